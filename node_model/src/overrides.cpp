#include "tessera/node_model/overrides.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <utility>

#include "tessera/error.hpp"
#include "tessera/files.hpp"
#include "tessera/node_model/csv.hpp"

namespace tessera::node_model {

namespace {

/// "linear b=1 m=4096 n=3072 k=1024 bf16", "ln b=4096 h=1024 fp32".
std::string describe(const Kernel& k) {
  if (is_gemm(k.op)) {
    return fmt::format("{} b={} m={} n={} k={} {}", to_string(k.op), k.b, k.m, k.n, k.k, to_string(k.dtype));
  }
  return fmt::format("{} b={} h={} {}", to_string(k.op), k.b, k.h, to_string(k.dtype));
}

/// Reads the cells of one CSV for the override table; every error names the
/// file, the row, its line, the column and the value.
class RowReader {
 public:
  explicit RowReader(const CsvTable& t) : t_(t) {}

  [[nodiscard]] std::string where(std::size_t row) const {
    return fmt::format("{}: row {} (line {})", t_.path, row + 1, t_.lines.at(row));
  }
  [[noreturn]] void fail(std::size_t row, std::size_t col, const std::string& msg) const {
    throw InputError(fmt::format("{}, column '{}': {}", where(row), t_.header.at(col), msg));
  }
  [[nodiscard]] const std::string& cell(std::size_t row, std::size_t col) const {
    return t_.rows.at(row).at(col);
  }

  /// A finite number, or nullopt for an empty cell.
  [[nodiscard]] std::optional<double> number_or_empty(std::size_t row, std::size_t col) const {
    const std::string& c = cell(row, col);
    if (c.empty()) return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(c.c_str(), &end);
    if (end != c.c_str() + c.size() || !std::isfinite(v))
      fail(row, col, fmt::format("'{}' is not a number", c));
    return v;
  }

  /// A positive whole number.
  [[nodiscard]] std::int64_t dimension(std::size_t row, std::size_t col) const {
    const auto v = number_or_empty(row, col);
    if (!v) fail(row, col, "missing dimension (empty cell)");
    if (*v <= 0 || *v != std::floor(*v) || *v > 9e15) {
      fail(row, col, fmt::format("dimension must be a positive whole number (got '{}')", cell(row, col)));
    }
    return static_cast<std::int64_t>(*v);
  }

  /// A dimension the row's op does not use: empty or 0.
  void unused(std::size_t row, std::size_t col, KernelOp op) const {
    const auto v = number_or_empty(row, col);
    if (v && *v != 0) {
      fail(row, col,
           fmt::format(
               "'{}' is not used by a {} kernel (leave it empty or 0; GEMMs use b,m,n,k, vector ops b,h)",
               cell(row, col), to_string(op)));
    }
  }

  /// A positive duration given in `seconds_per_unit`.
  [[nodiscard]] Time time(std::size_t row, std::size_t col, double seconds_per_unit) const {
    const auto v = number_or_empty(row, col);
    if (!v) fail(row, col, "missing time (empty cell)");
    if (*v <= 0) fail(row, col, fmt::format("time must be positive (got '{}')", cell(row, col)));
    try {
      return Time::from_seconds(*v * seconds_per_unit);
    } catch (const InputError& e) {
      fail(row, col, e.what());
    }
  }

  [[nodiscard]] KernelOp op(std::size_t row, std::size_t col) const {
    try {
      return parse_kernel_op(cell(row, col));
    } catch (const InputError& e) {
      fail(row, col, e.what());
    }
  }

  [[nodiscard]] DType dtype(std::size_t row, std::size_t col) const {
    try {
      return parse_dtype(cell(row, col));
    } catch (const InputError& e) {
      fail(row, col, e.what());
    }
  }

 private:
  const CsvTable& t_;
};

std::string joined_header(const CsvTable& t) {
  std::string out;
  for (const auto& h : t.header) out += (out.empty() ? "" : ",") + h;
  return out.size() > 120 ? out.substr(0, 117) + "..." : out;
}

/// NeuSight's kernel CSV: OPName, Latency (ms), B,M,N,K (GEMMs: [B,M,N] x
/// [B,N,K], so Kernel::n = column K and Kernel::k = column N, as
/// kernel_from_row) or B,H; `Device` (optional) must be one device
/// throughout; `dtype` (optional) else FP32, NeuSight's measurements.
std::vector<MeasuredKernel> read_neusight(const CsvTable& t) {
  const RowReader r(t);
  const std::size_t op_col = t.require_column("OPName");
  const std::size_t lat_col = t.require_column("Latency");
  const std::size_t b_col = t.require_column("B");
  const int dev_col = t.column("Device");
  const int dtype_col = t.column("dtype");
  std::vector<MeasuredKernel> out;
  for (std::size_t row = 0; row < t.rows.size(); ++row) {
    if (dev_col >= 0 && row > 0 && r.cell(row, dev_col) != r.cell(0, dev_col)) {
      r.fail(
          row, static_cast<std::size_t>(dev_col),
          fmt::format("'{}' differs from '{}' of row 1 (line {}): an override file holds the measurements of "
                      "one GPU",
                      r.cell(row, dev_col), r.cell(0, dev_col), t.lines.at(0)));
    }
    const KernelOp op = r.op(row, op_col);
    const DType dtype = dtype_col >= 0 ? r.dtype(row, static_cast<std::size_t>(dtype_col)) : DType::FP32;
    MeasuredKernel m;
    m.line = t.lines.at(row);
    if (is_gemm(op)) {
      m.kernel = Kernel::gemm(op, r.dimension(row, b_col), r.dimension(row, t.require_column("M")),
                              r.dimension(row, t.require_column("K")),
                              r.dimension(row, t.require_column("N")), dtype);
    } else {
      m.kernel = Kernel::vector(op, r.dimension(row, b_col), r.dimension(row, t.require_column("H")), dtype);
    }
    m.time = r.time(row, lat_col, 1e-3);
    out.push_back(m);
  }
  return out;
}

/// Tessera's form: op,b,m,n,k,h,dtype,time_us (m,n,k needed once a GEMM row
/// appears, h once a vector row does).
std::vector<MeasuredKernel> read_tessera(const CsvTable& t) {
  const RowReader r(t);
  const std::size_t op_col = t.require_column("op");
  const std::size_t b_col = t.require_column("b");
  const std::size_t dtype_col = t.require_column("dtype");
  const std::size_t time_col = t.require_column("time_us");
  const int m_col = t.column("m"), n_col = t.column("n"), k_col = t.column("k"), h_col = t.column("h");
  std::vector<MeasuredKernel> out;
  for (std::size_t row = 0; row < t.rows.size(); ++row) {
    const KernelOp op = r.op(row, op_col);
    const DType dtype = r.dtype(row, dtype_col);
    MeasuredKernel m;
    m.line = t.lines.at(row);
    const std::int64_t b = r.dimension(row, b_col);
    if (is_gemm(op)) {
      m.kernel = Kernel::gemm(op, b, r.dimension(row, t.require_column("m")),
                              r.dimension(row, t.require_column("n")),
                              r.dimension(row, t.require_column("k")), dtype);
      if (h_col >= 0) r.unused(row, static_cast<std::size_t>(h_col), op);
    } else {
      m.kernel = Kernel::vector(op, b, r.dimension(row, t.require_column("h")), dtype);
      for (int c : {m_col, n_col, k_col}) {
        if (c >= 0) r.unused(row, static_cast<std::size_t>(c), op);
      }
    }
    m.time = r.time(row, time_col, 1e-6);
    out.push_back(m);
  }
  return out;
}

}  // namespace

KernelTimeTable::Key KernelTimeTable::key_of(const Kernel& k) {
  // Only the dimensions the op uses (Kernel's factories leave the others 0).
  if (is_gemm(k.op)) return {static_cast<int>(k.op), static_cast<int>(k.dtype), k.b, k.m, k.n, k.k, 0};
  return {static_cast<int>(k.op), static_cast<int>(k.dtype), k.b, 0, 0, 0, k.h};
}

KernelTimeTable KernelTimeTable::read(const std::string& path) {
  return parse(read_input_file(path, "kernel-time override CSV"), path);
}

KernelTimeTable KernelTimeTable::parse(std::string_view text, const std::string& path) {
  const CsvTable t = parse_csv(text, path);
  KernelTimeTable out;
  out.path_ = path;
  if (t.column("OPName") >= 0) {
    out.entries_ = read_neusight(t);
  } else if (t.column("op") >= 0) {
    out.entries_ = read_tessera(t);
  } else {
    throw InputError(
        fmt::format("{}: line 1: not a kernel-time CSV: expected NeuSight's columns (OPName, Latency, "
                    "B, M, N, K or B, H) or Tessera's (op, b, m, n, k, h, dtype, time_us), got '{}'",
                    path, joined_header(t)));
  }
  if (out.entries_.empty()) throw InputError(fmt::format("{}: no kernel times (a header and no rows)", path));
  for (std::size_t i = 0; i < out.entries_.size(); ++i) {
    const auto& e = out.entries_[i];
    const auto [at, fresh] = out.index_.emplace(key_of(e.kernel), i);
    if (!fresh) {
      const auto& first = out.entries_[at->second];
      throw InputError(
          fmt::format("{}: row {} (line {}): {} is listed twice, first on row {} (line {}); keep one "
                      "time per kernel",
                      path, i + 1, e.line, describe(e.kernel), at->second + 1, first.line));
    }
  }
  return out;
}

const MeasuredKernel* KernelTimeTable::find(const Kernel& k) const {
  const auto it = index_.find(key_of(k));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

OverridePredictor::OverridePredictor(const KernelPredictor& base,
                                     std::shared_ptr<const KernelTimeTable> table)
    : base_(&base), table_(std::move(table)) {
  if (!table_) throw InputError("OverridePredictor: no table");
  hits_ = std::make_unique<std::atomic<std::int64_t>[]>(table_->entries().size());
}

OverridePredictor::OverridePredictor(std::unique_ptr<KernelPredictor> base,
                                     std::shared_ptr<const KernelTimeTable> table)
    : OverridePredictor(*base, std::move(table)) {
  owned_ = std::move(base);
}

const MeasuredKernel* OverridePredictor::lookup(const Kernel& k) const {
  const MeasuredKernel* m = table_->find(k);
  if (m == nullptr) {
    delegated_.fetch_add(1, std::memory_order_relaxed);
  } else {
    hits_[table_->index_of(m)].fetch_add(1, std::memory_order_relaxed);
  }
  return m;
}

Time OverridePredictor::predict(const Kernel& kernel) const {
  const MeasuredKernel* m = lookup(kernel);
  return m != nullptr ? m->time : base_->predict(kernel);
}

Time OverridePredictor::predict_device(const Kernel& kernel) const {
  const MeasuredKernel* m = lookup(kernel);
  return m != nullptr ? m->time : base_->predict_device(kernel);
}

OverrideStats OverridePredictor::stats() const {
  OverrideStats s;
  s.path = table_->path();
  s.entries = table_->entries().size();
  for (std::size_t i = 0; i < s.entries; ++i) {
    const std::int64_t h = hits_[i].load(std::memory_order_relaxed);
    s.lookups += h;
    if (h > 0) ++s.matched;
  }
  s.delegated = delegated_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace tessera::node_model
