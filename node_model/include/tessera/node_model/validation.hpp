#pragma once
// Accuracy of kernel predictors against measurements: mean absolute
// percentage error per GPU and kernel class, with the roofline beside it.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/node_model/dataset.hpp"

namespace tessera::node_model {

struct KernelErrorRow {
  std::string gpu;
  std::string kernel_class;
  int rows = 0;
  double mape = 0.0;           ///< percent
  double roofline_mape = 0.0;  ///< percent
};

using PredictorFactory = std::function<std::unique_ptr<KernelPredictor>(const GpuSpec&)>;

/// MAPE per (GPU, class). `max_rows_per_group` > 0 evaluates an evenly spaced
/// fixed subset of each group (for fast tests); `gpu_filter` (non-empty) keeps
/// one GPU by name.
std::vector<KernelErrorRow> validate_kernels(const MeasurementSet& test, const PredictorFactory& make,
                                             int max_rows_per_group = 0, const std::string& gpu_filter = "");

/// Fixed-width table of the rows.
std::string format_kernel_errors(const std::vector<KernelErrorRow>& rows, const std::string& predictor);

}  // namespace tessera::node_model
