#pragma once
// Accuracy of kernel predictors against measurements: mean absolute
// percentage error per GPU and kernel class, with the roofline beside it.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/node_model/dataset.hpp"

namespace tessera::node_model {

/// Statistics of signed relative errors ((predicted - measured) / measured):
/// mean, median, P90 and max of |error| (percentiles by nearest rank), and
/// the mean signed error. Every validation report takes them from here.
struct ErrorStats {
  int n = 0;
  double mean = 0, median = 0, p90 = 0, max = 0;  ///< of |error|
  double mean_signed = 0;
};
ErrorStats error_stats(const std::vector<double>& signed_errors);
/// The median: the middle value, or the mean of the middle two (0 when
/// empty). The one definition the reports use (signed medians, medians of
/// measured and predicted times); ErrorStats' percentiles are by nearest rank.
double median(std::vector<double> v);

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

struct TileMlpModel;

/// Accuracy of tensor-core GEMM predictions per dtype (rows of a table read
/// by read_xla_gemm_table): MAPE of `predicted_ms` (one per row of `data`),
/// beside the FP32-twin method (the tile-mlp's FP32 prediction of the same
/// shape scaled by the roofline ratio, without the eager launch floor and
/// bounded below by `gpu_floor_ms`, as predict_device would) and the
/// roofline. FP8 gets a second row over the measurements at or below the
/// dense FP8 peak (the others cannot be whole GEMMs).
struct DtypeErrorRow {
  std::string dtype;
  int rows = 0;
  double mape = 0.0, twin_mape = 0.0, roofline_mape = 0.0;  ///< percent
};
std::vector<DtypeErrorRow> validate_tensor_core(const MeasurementSet& data,
                                                const std::vector<double>& predicted_ms,
                                                const std::shared_ptr<const TileMlpModel>& fp32_model,
                                                double gpu_floor_ms);
std::string format_dtype_errors(const std::vector<DtypeErrorRow>& rows, const std::string& predictor);

/// Kernel times measured on one GPU: a CSV in NeuSight's schema (OPName,
/// Latency in ms, B,M,N,K or B,H; an optional `dtype` column, else
/// `default_dtype`), predicted as GPU time (predict_device), as the data under
/// tests/data/h200 was measured (CUDA events around each kernel, L2 flushed).
/// Rows are grouped by op and dtype, and by the optional columns `source` and
/// `pass`, in order of appearance; the last row is "all". `reference` (a file
/// of the same schema, e.g. a repeat of the measurement, or empty) is taken
/// as the prediction of the rows it shares (same op, dtype, source, pass and
/// shape): the noise floor, in `noise_mape` (-1 where it shares none).
/// Throws InputError naming file, row and column for bad input.
struct MeasuredErrorRow {
  std::string group;
  int rows = 0;
  double mape = 0.0;           ///< percent
  double signed_median = 0.0;  ///< percent, (predicted - measured) / measured
  double p90 = 0.0;            ///< percent, 90th percentile of the absolute error
  double roofline_mape = 0.0;  ///< percent
  double noise_mape = -1.0;    ///< percent, or -1 without a reference
};
std::vector<MeasuredErrorRow> validate_measured_kernels(const std::string& csv_path, const GpuSpec& gpu,
                                                        const PredictorFactory& make, DType default_dtype,
                                                        const std::string& reference = {});
std::string format_measured_errors(const std::vector<MeasuredErrorRow>& rows, const std::string& predictor);

/// The noise floor: MAPE per dtype of `other`'s latencies taken as
/// predictions of `data`'s on the shapes both measured.
std::vector<DtypeErrorRow> measurement_noise(const MeasurementSet& data, const MeasurementSet& other);

}  // namespace tessera::node_model
