#include "tessera/node_model/validation.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "tessera/error.hpp"
#include "tessera/node_model/csv.hpp"
#include "tessera/node_model/roofline.hpp"
#include "tessera/node_model/tensor_core.hpp"
#include "tessera/node_model/tile_mlp.hpp"

namespace tessera::node_model {

std::vector<KernelErrorRow> validate_kernels(const MeasurementSet& test, const PredictorFactory& make,
                                             int max_rows_per_group, const std::string& gpu_filter) {
  // A --gpu that names no GPU of the data is a mistake, not an empty table
  // (helper 102: it printed one and exited 0).
  if (!gpu_filter.empty() && std::none_of(test.gpus.begin(), test.gpus.end(),
                                          [&](const GpuSpec& g) { return g.name == gpu_filter; })) {
    std::vector<std::string> names;
    for (const GpuSpec& g : test.gpus) names.push_back(g.name);
    throw InputError(fmt::format("--gpu: no measurements of '{}' in the data (its GPUs: {})", gpu_filter,
                                 fmt::join(names, ", ")));
  }
  // Group row indices by (gpu, class), keeping file order.
  std::map<std::pair<int, int>, std::vector<int>> groups;
  for (std::size_t i = 0; i < test.rows.size(); ++i) {
    const auto& m = test.rows[i];
    const auto cls = kernel_class(m.kernel.op);
    if (!cls) continue;
    if (!gpu_filter.empty() && test.gpus[m.gpu].name != gpu_filter) continue;
    groups[{m.gpu, static_cast<int>(*cls)}].push_back(static_cast<int>(i));
  }
  std::vector<KernelErrorRow> out;
  std::map<int, std::pair<std::unique_ptr<KernelPredictor>, std::unique_ptr<KernelPredictor>>> predictors;
  for (const auto& [key, idx] : groups) {
    auto& p = predictors[key.first];
    if (!p.first) {
      p.first = make(test.gpus[key.first]);
      p.second = std::make_unique<RooflinePredictor>(test.gpus[key.first]);
    }
    const std::size_t n = idx.size();
    const std::size_t take = max_rows_per_group > 0 ? std::min<std::size_t>(n, max_rows_per_group) : n;
    double ape = 0.0;
    double ape_roof = 0.0;
    for (std::size_t j = 0; j < take; ++j) {
      const auto& m = test.rows[idx[j * n / take]];
      ape += std::abs(p.first->predict(m.kernel).ms() / m.latency_ms - 1.0);
      ape_roof += std::abs(p.second->predict(m.kernel).ms() / m.latency_ms - 1.0);
    }
    KernelErrorRow row;
    row.gpu = test.gpus[key.first].name;
    row.kernel_class = std::string(to_string(static_cast<KernelClass>(key.second)));
    row.rows = static_cast<int>(take);
    row.mape = 100.0 * ape / static_cast<double>(take);
    row.roofline_mape = 100.0 * ape_roof / static_cast<double>(take);
    out.push_back(row);
  }
  return out;
}

std::string format_kernel_errors(const std::vector<KernelErrorRow>& rows, const std::string& predictor) {
  std::string s = fmt::format("{:<24} {:<12} {:>6} {:>12} {:>14}\n", "gpu", "class", "rows",
                              fmt::format("{} MAPE", predictor), "roofline MAPE");
  for (const auto& r : rows) {
    s += fmt::format("{:<24} {:<12} {:>6} {:>11.1f}% {:>13.1f}%\n", r.gpu, r.kernel_class, r.rows, r.mape,
                     r.roofline_mape);
  }
  return s;
}

namespace {

/// Rows grouped by dtype name, in a fixed order, FP8 also as "fp8<=peak".
std::vector<std::pair<std::string, std::vector<int>>> dtype_groups(const MeasurementSet& data) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  auto add = [&](const std::string& name, int i) {
    for (auto& [n, idx] : groups) {
      if (n == name) {
        idx.push_back(i);
        return;
      }
    }
    groups.push_back({name, {i}});
  };
  for (DType d : {DType::BF16, DType::FP16, DType::TF32, DType::FP8}) {
    for (std::size_t i = 0; i < data.rows.size(); ++i) {
      const auto& m = data.rows[i];
      if (m.kernel.dtype != d || !is_gemm(m.kernel.op)) continue;
      add(std::string(to_string(d)), static_cast<int>(i));
    }
    if (d != DType::FP8) continue;
    for (std::size_t i = 0; i < data.rows.size(); ++i) {
      const auto& m = data.rows[i];
      if (m.kernel.dtype != d || !is_gemm(m.kernel.op)) continue;
      const GpuSpec& g = data.gpus[static_cast<std::size_t>(m.gpu)];
      if (g.fp8_peak.per_second() <= 0) continue;
      if (m.kernel.flops().count() / (m.latency_ms * 1e-3) <= g.fp8_peak.per_second()) {
        add("fp8<=peak", static_cast<int>(i));
      }
    }
  }
  return groups;
}

}  // namespace

std::vector<DtypeErrorRow> validate_tensor_core(const MeasurementSet& data,
                                                const std::vector<double>& predicted_ms,
                                                const std::shared_ptr<const TileMlpModel>& fp32_model,
                                                double gpu_floor_ms) {
  std::vector<std::unique_ptr<TileMlpPredictor>> twins;
  for (const auto& g : data.gpus) twins.push_back(std::make_unique<TileMlpPredictor>(g, fp32_model));
  std::vector<DtypeErrorRow> out;
  for (const auto& [name, idx] : dtype_groups(data)) {
    DtypeErrorRow row;
    row.dtype = name;
    for (int i : idx) {
      const auto& m = data.rows[static_cast<std::size_t>(i)];
      const GpuSpec& g = data.gpus[static_cast<std::size_t>(m.gpu)];
      const double twin =
          std::max(gpu_floor_ms, twins[static_cast<std::size_t>(m.gpu)]->learned_kernel_ms(m.kernel));
      row.mape += std::abs(predicted_ms[static_cast<std::size_t>(i)] / m.latency_ms - 1.0);
      row.twin_mape += std::abs(twin / m.latency_ms - 1.0);
      row.roofline_mape += std::abs(roofline_time(m.kernel, g).ms() / m.latency_ms - 1.0);
      ++row.rows;
    }
    row.mape *= 100.0 / row.rows;
    row.twin_mape *= 100.0 / row.rows;
    row.roofline_mape *= 100.0 / row.rows;
    out.push_back(row);
  }
  return out;
}

std::string format_dtype_errors(const std::vector<DtypeErrorRow>& rows, const std::string& predictor) {
  std::string s = fmt::format("{:<10} {:>6} {:>18} {:>15} {:>14}\n", "dtype", "rows",
                              fmt::format("{} MAPE", predictor), "fp32-twin MAPE", "roofline MAPE");
  for (const auto& r : rows) {
    s += fmt::format("{:<10} {:>6} {:>17.1f}% {:>14.1f}% {:>13.1f}%\n", r.dtype, r.rows, r.mape, r.twin_mape,
                     r.roofline_mape);
  }
  return s;
}

std::vector<DtypeErrorRow> measurement_noise(const MeasurementSet& data, const MeasurementSet& other) {
  using Key = std::tuple<int, int, std::int64_t, std::int64_t, std::int64_t, std::int64_t>;
  auto key = [](const Kernel& k) {
    return Key{static_cast<int>(k.op), static_cast<int>(k.dtype), k.b, k.m, k.n, k.k};
  };
  std::map<Key, double> theirs;
  for (const auto& m : other.rows) theirs.emplace(key(m.kernel), m.latency_ms);
  std::vector<DtypeErrorRow> out;
  for (const auto& [name, idx] : dtype_groups(data)) {
    DtypeErrorRow row;
    row.dtype = name;
    for (int i : idx) {
      const auto& m = data.rows[static_cast<std::size_t>(i)];
      auto it = theirs.find(key(m.kernel));
      if (it == theirs.end()) continue;
      row.mape += std::abs(it->second / m.latency_ms - 1.0);
      ++row.rows;
    }
    if (row.rows == 0) continue;
    row.mape *= 100.0 / row.rows;
    out.push_back(row);
  }
  return out;
}

namespace {

struct MeasuredRow {
  std::string group;  ///< op/dtype[/source][/pass]
  std::string key;    ///< group, layout and dimensions: what a repeat shares
  Kernel kernel;
  double latency_ms = 0.0;
};

struct MeasuredKernels {
  std::vector<MeasuredRow> rows;
  /// The columns a repeat matches on, as the file names them (its OPName
  /// and dtype, then source, pass, layout and dimensions where present).
  std::vector<std::string> key_columns;
};

MeasuredKernels read_measured_kernels(const std::string& csv_path, DType default_dtype, const GpuSpec& gpu) {
  const CsvTable t = read_csv(csv_path);
  const std::size_t op_col = t.require_column("OPName");
  const std::size_t lat_col = t.require_column("Latency");
  const int device_col = t.column("Device");
  const int dtype_col = t.column("dtype");
  std::vector<int> group_cols;
  for (const char* c : {"source", "pass"}) {
    if (int i = t.column(c); i >= 0) group_cols.push_back(i);
  }
  std::vector<int> key_cols;
  for (const char* c : {"layout", "B", "M", "N", "K", "H"}) {
    if (int i = t.column(c); i >= 0) key_cols.push_back(i);
  }
  MeasuredKernels result;
  result.key_columns = {"OPName", "dtype"};
  for (const std::vector<int>* cols : {&group_cols, &key_cols}) {
    for (int c : *cols) result.key_columns.push_back(t.header.at(static_cast<std::size_t>(c)));
  }
  std::vector<MeasuredRow>& out = result.rows;
  check_measured_on(t, device_col, gpu);
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    const DType dtype = row_dtype(t, r, dtype_col, default_dtype);
    MeasuredRow m;
    m.kernel = kernel_from_row(t, r, dtype);
    m.latency_ms = row_latency_ms(t, r, lat_col);
    // A kernel measured ten times faster than the GPU's peaks allow (its
    // roofline bound) is a slip in its dimensions or its unit (helper 116:
    // B = 99999999999 was scored as a 2e12% error). (Ten times: a boost clock
    // or a sparse peak is never that far above the datasheet's dense one.)
    if (const Time bound = roofline_time(m.kernel, gpu); m.latency_ms * 1e-3 < bound.seconds() / 10) {
      throw InputError(
          fmt::format("{}: {}, column '{}': {} ms is more than ten times faster than {} allows at its peak "
                      "({:.4g} ms for this kernel): are the dimensions and the unit (milliseconds) right?",
                      csv_path, t.row_name(r), t.header.at(lat_col), t.rows[r][lat_col], gpu.name,
                      bound.seconds() * 1e3));
    }
    m.group = fmt::format("{}/{}", t.rows[r][op_col], to_string(dtype));
    // The group names the parts a row has (no empty `linear/bf16//fwd`);
    // the key keeps every column's place, empty or not.
    m.key = m.group;
    for (int c : group_cols) {
      const std::string& v = t.rows[r][static_cast<std::size_t>(c)];
      if (!v.empty()) m.group += "/" + v;
      m.key += "/" + v;
    }
    for (int c : key_cols) m.key += "," + t.rows[r][static_cast<std::size_t>(c)];
    out.push_back(std::move(m));
  }
  if (out.empty()) throw InputError(fmt::format("{}: no measurements", csv_path));
  return result;
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

ErrorStats error_stats(const std::vector<double>& signed_errors) {
  ErrorStats s;
  s.n = static_cast<int>(signed_errors.size());
  if (s.n == 0) return s;
  std::vector<double> a;
  a.reserve(signed_errors.size());
  double sum = 0, sum_signed = 0;
  for (double e : signed_errors) {
    a.push_back(std::abs(e));
    sum += std::abs(e);
    sum_signed += e;
  }
  std::sort(a.begin(), a.end());
  // Percentiles by the nearest-rank method.
  auto rank = [&](double q) { return a[static_cast<std::size_t>(std::max(0.0, std::ceil(q * s.n) - 1))]; };
  s.mean = sum / s.n;
  s.median = rank(0.5);
  s.p90 = rank(0.9);
  s.max = a.back();
  s.mean_signed = sum_signed / s.n;
  return s;
}

std::vector<MeasuredErrorRow> validate_measured_kernels(const std::string& csv_path, const GpuSpec& gpu,
                                                        const PredictorFactory& make, DType default_dtype,
                                                        const std::string& reference) {
  const MeasuredKernels data = read_measured_kernels(csv_path, default_dtype, gpu);
  const std::vector<MeasuredRow>& rows = data.rows;
  std::map<std::string, double> ref;
  if (!reference.empty()) {
    for (const auto& m : read_measured_kernels(reference, default_dtype, gpu).rows)
      ref.emplace(m.key, m.latency_ms);
  }
  const auto predictor = make(gpu);
  struct Acc {
    std::vector<double> signed_err;
    double roof = 0.0, noise = 0.0;
    int noise_rows = 0;
  };
  std::vector<std::string> order;
  std::map<std::string, Acc> groups;
  Acc all;
  for (const auto& m : rows) {
    if (!groups.contains(m.group)) order.push_back(m.group);
    const double e = predictor->predict_device(m.kernel).ms() / m.latency_ms - 1.0;
    const double roof = std::abs(roofline_time(m.kernel, gpu).ms() / m.latency_ms - 1.0);
    for (Acc* a : {&groups[m.group], &all}) {
      a->signed_err.push_back(e);
      a->roof += roof;
      if (auto it = ref.find(m.key); it != ref.end()) {
        a->noise += std::abs(it->second / m.latency_ms - 1.0);
        ++a->noise_rows;
      }
    }
  }
  auto summarize = [](const std::string& name, const Acc& a) {
    const ErrorStats e = error_stats(a.signed_err);
    MeasuredErrorRow r;
    r.group = name;
    r.rows = e.n;
    r.mape = 100.0 * e.mean;
    r.signed_median = 100.0 * median(a.signed_err);
    r.p90 = 100.0 * e.p90;
    r.roofline_mape = 100.0 * a.roof / r.rows;
    if (a.noise_rows > 0) r.noise_mape = 100.0 * a.noise / a.noise_rows;
    return r;
  };
  std::vector<MeasuredErrorRow> out;
  out.reserve(order.size());
  // A reference that repeats none of the kernels gives no floor: an error,
  // not a column of dashes (helper 102).
  if (!reference.empty() && all.noise_rows == 0) {
    throw InputError(fmt::format("{}: --noise: no kernel of {} (the same {}) is in it: not a repeat of it",
                                 reference, csv_path, fmt::join(data.key_columns, ", ")));
  }
  for (const auto& g : order) out.push_back(summarize(g, groups.at(g)));
  out.push_back(summarize("all", all));
  return out;
}

std::string format_measured_errors(const std::vector<MeasuredErrorRow>& rows, const std::string& predictor) {
  std::size_t width = 5;
  for (const auto& r : rows) width = std::max(width, r.group.size());
  std::string s =
      fmt::format("{:<{}} {:>6} {:>15} {:>14} {:>9} {:>14} {:>11}\n", "group", width, "rows",
                  fmt::format("{} MAPE", predictor), "signed median", "P90", "roofline MAPE", "noise MAPE");
  for (const auto& r : rows) {
    s += fmt::format("{:<{}} {:>6} {:>14.1f}% {:>+13.1f}% {:>8.1f}% {:>13.1f}% {:>11}\n", r.group, width,
                     r.rows, r.mape, r.signed_median, r.p90, r.roofline_mape,
                     r.noise_mape < 0 ? std::string("-") : fmt::format("{:.1f}%", r.noise_mape));
  }
  return s;
}

}  // namespace tessera::node_model
