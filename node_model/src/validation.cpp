#include "tessera/node_model/validation.hpp"

#include <cmath>
#include <fmt/format.h>
#include <map>

#include "tessera/node_model/roofline.hpp"
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

}  // namespace tessera::node_model
