#include "tessera/node_model/validation.hpp"

#include <cmath>
#include <fmt/format.h>
#include <map>

#include <tuple>

#include "tessera/node_model/roofline.hpp"
#include "tessera/node_model/tensor_core.hpp"
#include "tessera/node_model/tile_mlp.hpp"

namespace tessera::node_model {

std::vector<KernelErrorRow> validate_kernels(const MeasurementSet& test, const PredictorFactory& make,
                                             int max_rows_per_group, const std::string& gpu_filter) {
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
                                                std::shared_ptr<const TileMlpModel> fp32_model,
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

}  // namespace tessera::node_model
