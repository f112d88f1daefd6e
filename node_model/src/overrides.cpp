#include "tessera/node_model/overrides.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "tessera/error.hpp"
#include "tessera/files.hpp"
#include "tessera/names.hpp"
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
    // As CsvTable::number reads them: blanks around the number read past,
    // hexadecimal (strtod's 0x400) refused (helper 116: a dimension 0x400
    // and a time 0x6d were read as 1024 and 109 us).
    const std::string& raw = cell(row, col);
    if (trim_blanks(raw).empty()) return std::nullopt;
    const auto v = decimal_number(raw);
    if (!v) fail(row, col, fmt::format("'{}' is not a number", raw));
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
/// appears, h once a vector row does), an optional part_time_us (a cell may
/// be empty).
std::vector<MeasuredKernel> read_tessera(const CsvTable& t) {
  const RowReader r(t);
  const std::size_t op_col = t.require_column("op");
  const std::size_t b_col = t.require_column("b");
  const std::size_t dtype_col = t.require_column("dtype");
  const std::size_t time_col = t.require_column("time_us");
  const int m_col = t.column("m"), n_col = t.column("n"), k_col = t.column("k"), h_col = t.column("h");
  const int part_col = t.column("part_time_us");
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
    if (part_col >= 0 && !t.rows[row][static_cast<std::size_t>(part_col)].empty())
      m.part_time = r.time(row, static_cast<std::size_t>(part_col), 1e-6);
    out.push_back(m);
  }
  return out;
}

/// A Python repr of a list of integer lists ("[[4096, 1024], [1024, 3072]]",
/// "[[3072], [4096, 1024], [1024, 3072], [], []]"), or nullopt when `text`
/// is not one.
std::optional<std::vector<std::vector<std::int64_t>>> parse_shapes(std::string_view text) {
  std::size_t i = 0;
  auto skip = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])) != 0) ++i;
  };
  auto eat = [&](char c) {
    skip();
    if (i < text.size() && text[i] == c) {
      ++i;
      return true;
    }
    return false;
  };
  std::vector<std::vector<std::int64_t>> out;
  if (!eat('[')) return std::nullopt;
  if (!eat(']')) {
    do {
      if (!eat('[')) return std::nullopt;
      std::vector<std::int64_t> shape;
      if (!eat(']')) {
        do {
          skip();
          const std::size_t start = i;
          std::int64_t v = 0;
          while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0) {
            if (v > (INT64_MAX - 9) / 10) return std::nullopt;
            v = v * 10 + (text[i] - '0');
            ++i;
          }
          if (i == start) return std::nullopt;
          shape.push_back(v);
        } while (eat(','));
        if (!eat(']')) return std::nullopt;
      }
      out.push_back(std::move(shape));
    } while (eat(','));
    if (!eat(']')) return std::nullopt;
  }
  skip();
  if (i != text.size()) return std::nullopt;
  return out;
}

/// The PyTorch ops whose input shapes determine a Tessera GEMM, with the
/// shapes each expects (for messages).
struct TorchGemm {
  std::string_view name;
  KernelOp op;
  bool bias;  ///< a first input (bias) broadcast to the result, then scalars
  std::string_view expected;
};
constexpr std::array<TorchGemm, 4> kTorchGemms{{
    {"aten::mm", KernelOp::Linear, false, "[[M, K], [K, N]]"},
    {"aten::addmm", KernelOp::Linear, true, "[[N] or [M, N], [M, K], [K, N], ...]"},
    {"aten::bmm", KernelOp::Bmm, false, "[[B, M, K], [B, K, N]]"},
    {"aten::baddbmm", KernelOp::Bmm, true, "[[B, M, N], [B, M, K], [B, K, N], ...]"},
}};

/// Whether `bias` broadcasts to `result` (trailing dimensions 1 or equal).
bool broadcasts(const std::vector<std::int64_t>& bias, const std::vector<std::int64_t>& result) {
  if (bias.size() > result.size()) return false;
  for (std::size_t d = 0; d < bias.size(); ++d) {
    const std::int64_t b = bias[bias.size() - 1 - d];
    if (b != 1 && b != result[result.size() - 1 - d]) return false;
  }
  return true;
}

/// The GEMM of one leaf op from its input shapes (b x M x N x K, as
/// Kernel::gemm), or nullopt when the shapes do not fit the op.
std::optional<std::array<std::int64_t, 4>> gemm_dims(const TorchGemm& g,
                                                     const std::vector<std::vector<std::int64_t>>& shapes) {
  const bool batched = g.op == KernelOp::Bmm;
  const std::size_t rank = batched ? 3 : 2;
  const std::size_t first = g.bias ? 1 : 0;
  if (shapes.size() < first + 2) return std::nullopt;
  // After the operands only scalars (addmm's beta and alpha: empty shapes).
  for (std::size_t s = first + 2; s < shapes.size(); ++s) {
    if (!g.bias || !shapes[s].empty()) return std::nullopt;
  }
  const auto& a = shapes[first];
  const auto& b = shapes[first + 1];
  if (a.size() != rank || b.size() != rank) return std::nullopt;
  const std::size_t r = batched ? 1 : 0;
  const std::int64_t batch = batched ? a[0] : 1;
  if (batched && b[0] != batch) return std::nullopt;
  const std::int64_t m = a[r], k = a[r + 1], n = b[r + 1];
  if (b[r] != k) return std::nullopt;
  constexpr std::int64_t kMaxDim = 9'000'000'000'000'000;  // as the other forms' dimensions
  for (const std::int64_t d : {batch, m, n, k}) {
    if (d <= 0 || d > kMaxDim) return std::nullopt;
  }
  if (g.bias) {
    std::vector<std::int64_t> result{m, n};
    if (batched) result.insert(result.begin(), batch);
    if (!broadcasts(shapes[0], result)) return std::nullopt;
  }
  return std::array<std::int64_t, 4>{batch, m, n, k};
}

/// PyTorch's key_averages(group_by_input_shape=True), exported as
/// name,input_shapes,calls,device_time_total_us[,dtype]: the leaf GEMM ops
/// (kTorchGemms) at their time per call; rows of one kernel merged (total
/// time over total calls); every other op skipped and counted in `ignored`.
std::vector<MeasuredKernel> read_pytorch(const CsvTable& t, std::optional<DType> training_dtype,
                                         std::size_t& ignored) {
  const RowReader r(t);
  const std::size_t name_col = t.require_column("name");
  const std::size_t shapes_col = t.require_column("input_shapes");
  const std::size_t calls_col = t.require_column("calls");
  const std::size_t time_col = t.require_column("device_time_total_us");
  const int dtype_col = t.column("dtype");
  if (dtype_col < 0 && !training_dtype) {
    throw InputError(fmt::format("{}: a PyTorch profiler export needs a 'dtype' column (or a scenario's "
                                 "training.dtype to take it from)",
                                 t.path));
  }
  struct Sum {
    std::size_t first_row;
    double total_us;
    double calls;
  };
  std::vector<MeasuredKernel> out;
  std::vector<Sum> sums;
  std::map<std::tuple<int, int, std::int64_t, std::int64_t, std::int64_t, std::int64_t>, std::size_t> at;
  for (std::size_t row = 0; row < t.rows.size(); ++row) {
    const std::string& name = r.cell(row, name_col);
    const TorchGemm* g = nullptr;
    for (const auto& c : kTorchGemms) {
      if (c.name == name) g = &c;
    }
    if (g == nullptr) {
      ++ignored;
      continue;
    }
    const auto shapes = parse_shapes(r.cell(row, shapes_col));
    if (!shapes) {
      r.fail(row, shapes_col,
             fmt::format("'{}' is not a list of shapes (a Python list of integer lists, e.g. [[4096, 1024], "
                         "[1024, 3072]])",
                         r.cell(row, shapes_col)));
    }
    if (shapes->empty()) {
      r.fail(row, shapes_col, "no input shapes ('[]'): profile with record_shapes=True");
    }
    const auto dims = gemm_dims(*g, *shapes);
    if (!dims) {
      r.fail(row, shapes_col,
             fmt::format("{} expects {} with dimensions from 1 to 9e15, got '{}'", g->name, g->expected,
                         r.cell(row, shapes_col)));
    }
    const auto calls = r.number_or_empty(row, calls_col);
    if (!calls || *calls <= 0 || *calls != std::floor(*calls) || *calls > 9e15) {
      r.fail(row, calls_col,
             fmt::format("calls must be a positive whole number (got '{}')", r.cell(row, calls_col)));
    }
    const auto total = r.number_or_empty(row, time_col);
    if (!total) r.fail(row, time_col, "missing time (empty cell)");
    if (*total <= 0) {
      r.fail(row, time_col,
             fmt::format("time must be positive (got '{}'; no device time: the op ran on the CPU or the "
                         "profile lacks ProfilerActivity.CUDA)",
                         r.cell(row, time_col)));
    }
    DType dtype = training_dtype.value_or(DType::FP32);
    if (dtype_col >= 0) {
      // Tessera's names or PyTorch's (str(torch.bfloat16) is "torch.bfloat16").
      std::string_view d = r.cell(row, static_cast<std::size_t>(dtype_col));
      if (d.starts_with("torch.")) d.remove_prefix(6);
      try {
        dtype = parse_dtype(d);
      } catch (const InputError& e) {
        r.fail(row, static_cast<std::size_t>(dtype_col), e.what());
      }
    }
    const Kernel k = Kernel::gemm(g->op, (*dims)[0], (*dims)[1], (*dims)[2], (*dims)[3], dtype);
    const auto key = std::make_tuple(static_cast<int>(k.op), static_cast<int>(k.dtype), k.b, k.m, k.n, k.k);
    const auto [it, fresh] = at.emplace(key, out.size());
    if (fresh) {
      MeasuredKernel m;
      m.kernel = k;
      m.line = t.lines.at(row);
      m.either_orientation = true;
      out.push_back(m);
      sums.push_back({row, 0.0, 0.0});
    }
    Sum& s = sums[it->second];
    s.total_us += *total;
    s.calls += *calls;
    try {
      out[it->second].time = Time::from_seconds(s.total_us * 1e-6 / s.calls);
    } catch (const InputError& e) {
      r.fail(row, time_col, e.what());
    }
  }
  return out;
}
}  // namespace

KernelTimeTable::Key KernelTimeTable::key_of(const Kernel& k) {
  // Only the dimensions the op uses (Kernel's factories leave the others 0).
  if (is_gemm(k.op)) return {static_cast<int>(k.op), static_cast<int>(k.dtype), k.b, k.m, k.n, k.k, 0};
  return {static_cast<int>(k.op), static_cast<int>(k.dtype), k.b, 0, 0, 0, k.h};
}

KernelTimeTable KernelTimeTable::read(const std::string& path, std::optional<DType> training_dtype) {
  return parse(read_input_file(path, "kernel-time override CSV"), path, training_dtype);
}

KernelTimeTable KernelTimeTable::parse(std::string_view text, const std::string& path,
                                       std::optional<DType> training_dtype) {
  const CsvTable t = parse_csv(text, path);
  KernelTimeTable out;
  out.path_ = path;
  if (t.column("OPName") >= 0) {
    out.entries_ = read_neusight(t);
    if (const int dev = t.column("Device"); dev >= 0 && !t.rows.empty()) {
      out.device_ = t.rows.front().at(static_cast<std::size_t>(dev));
    }
  } else if (t.column("op") >= 0) {
    out.entries_ = read_tessera(t);
  } else if (t.column("input_shapes") >= 0) {
    out.entries_ = read_pytorch(t, training_dtype, out.ignored_rows_);
  } else {
    throw InputError(
        fmt::format("{}: line 1: not a kernel-time CSV: expected NeuSight's columns (OPName, Latency, "
                    "B, M, N, K or B, H), Tessera's (op, b, m, n, k, h, dtype, time_us) or a PyTorch "
                    "profiler export's (name, input_shapes, calls, device_time_total_us), got '{}'",
                    path, joined_header(t)));
  }
  if (out.entries_.empty() && out.ignored_rows_ > 0) {
    throw InputError(fmt::format("{}: no kernel times: all {} rows are composite or non-GEMM ops (read: "
                                 "aten::mm, aten::addmm, aten::bmm, aten::baddbmm)",
                                 path, out.ignored_rows_));
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
  // The transposed GEMM of PyTorch rows, where no row holds it itself
  // (after every exact key, so an exact row always wins).
  for (std::size_t i = 0; i < out.entries_.size(); ++i) {
    const auto& e = out.entries_[i];
    if (!e.either_orientation) continue;
    Kernel transposed = e.kernel;
    std::swap(transposed.m, transposed.n);
    out.index_.emplace(key_of(transposed), i);
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
  launch_hits_ = std::make_unique<std::atomic<std::int64_t>[]>(table_->entries().size());
}

OverridePredictor::OverridePredictor(std::unique_ptr<KernelPredictor> base,
                                     std::shared_ptr<const KernelTimeTable> table)
    : OverridePredictor(*base, std::move(table)) {
  owned_ = std::move(base);
}

const MeasuredKernel* OverridePredictor::lookup(const Kernel& k, bool launch) const {
  const MeasuredKernel* m = table_->find(k);
  if (m == nullptr) {
    delegated_.fetch_add(1, std::memory_order_relaxed);
  } else {
    const std::size_t i = table_->index_of(m);
    hits_[i].fetch_add(1, std::memory_order_relaxed);
    if (launch) launch_hits_[i].fetch_add(1, std::memory_order_relaxed);
  }
  return m;
}

Time OverridePredictor::predict(const Kernel& kernel) const {
  const MeasuredKernel* m = lookup(kernel, true);
  return m != nullptr ? m->time : base_->predict(kernel);
}

Time OverridePredictor::predict_device(const Kernel& kernel) const {
  const MeasuredKernel* m = lookup(kernel, true);
  return m != nullptr ? m->time : base_->predict_device(kernel);
}

Time OverridePredictor::predict_part(const Kernel& kernel) const {
  const MeasuredKernel* m = lookup(kernel, false);
  return m != nullptr ? m->part_time.value_or(m->time) : base_->predict_part(kernel);
}

OverrideStats OverridePredictor::stats() const {
  OverrideStats s;
  s.path = table_->path();
  s.entries = table_->entries().size();
  for (std::size_t i = 0; i < s.entries; ++i) {
    const std::int64_t h = hits_[i].load(std::memory_order_relaxed);
    s.lookups += h;
    const MeasuredKernel& e = table_->entries()[i];
    if (h > 0) {
      ++s.matched;
      // Only ever a part, timed by its part_time_us: its time_us is unused,
      // said where it is not a prediction (the `kernels` template's own
      // value: the launch time, or the device time under a host model).
      auto near = [&](Time t) { return std::abs((e.time - t).ps()) <= 1; };
      if (launch_hits_[i].load(std::memory_order_relaxed) == 0 && e.part_time &&
          !near(base_->predict(e.kernel)) && !near(base_->predict_device(e.kernel))) {
        s.unused_time_lines.push_back(e.line);
      }
    } else {
      s.unmatched_lines.push_back(e.line);
    }
  }
  std::sort(s.unmatched_lines.begin(), s.unmatched_lines.end());
  std::sort(s.unused_time_lines.begin(), s.unused_time_lines.end());
  s.ignored_rows = table_->ignored_rows();
  s.delegated = delegated_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace tessera::node_model
