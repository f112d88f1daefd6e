#pragma once
// Leave-one-GPU-out cross-validation of the tile-mlp (docs/node_model.md,
// Validation): for each GPU in turn, the predictor is retrained on the
// training rows of the other GPUs only (tile table and launch floors
// included) and measured on every row of the held-out GPU. This is the
// figure that says how the model does on a GPU it never saw.
#include <iosfwd>
#include <string>
#include <vector>

#include "tessera/node_model/dataset.hpp"
#include "tessera/node_model/tile_mlp.hpp"

namespace tessera::node_model {

/// The rows of `set` of every GPU but `gpu` (by name). The GPU is also removed
/// from `gpus` (the other GPUs' indices renumbered in order), so nothing
/// learned from the result, the tile table's GPU list included, knows it.
MeasurementSet without_gpu(const MeasurementSet& set, const std::string& gpu);
/// The rows of `set` of `gpu` alone (`gpus` = that GPU, or empty when absent).
MeasurementSet only_gpu(const MeasurementSet& set, const std::string& gpu);
/// GPU names of `train` then `test`, each once, in order of first appearance.
std::vector<std::string> fold_gpus(const MeasurementSet& train, const MeasurementSet& test);

struct LogoOptions {
  TileMlpTrainOptions train;
  bool linreg = true;     ///< also retrain and report the linreg baseline
  std::string gpu;        ///< non-empty: run this fold only
  int max_eval_rows = 0;  ///< > 0: an evenly spaced subset of each (class, source) group
};

/// One held-out GPU and kernel class. Errors are MAPE in percent; `mape` is
/// over all evaluated rows (test and training rows of the held-out GPU),
/// `mape_test` / `mape_train` over each source alone (NaN when it has none).
struct LogoRow {
  std::string gpu;
  std::string kernel_class;
  int test_rows = 0, train_rows = 0;
  double mape = 0, mape_test = 0, mape_train = 0;
  /// Median of the tile-mlp's (predicted - measured) / measured, percent:
  /// whether the unseen GPU comes out fast (< 0) or slow as a whole.
  double signed_median = 0;
  double linreg_mape = 0;  ///< NaN when linreg was not run
  double roofline_mape = 0;
};

/// Runs the folds (every GPU of `train` or `test`, or `opt.gpu` alone) and
/// returns one row per (held-out GPU, class) with rows to evaluate. The
/// held-out GPU's rows are its rows in `train` and in `test`. Deterministic.
/// `log` (may be null) gets one progress line per fold. Throws InputError
/// when `opt.gpu` names no GPU of the data or a fold has nothing to train on.
std::vector<LogoRow> leave_one_gpu_out(const MeasurementSet& train, const MeasurementSet& test,
                                       const LogoOptions& opt, std::ostream* log);

/// Per class over the held-out GPUs: mean and worst tile-mlp MAPE.
struct LogoSummary {
  std::string kernel_class;
  int gpus = 0;
  double mean = 0, mean_test = 0, linreg_mean = 0, roofline_mean = 0;
  double worst = 0;
  std::string worst_gpu;
};
std::vector<LogoSummary> summarize_logo(const std::vector<LogoRow>& rows);

/// The per-fold table, then the per-class summary.
std::string format_logo(const std::vector<LogoRow>& rows);

}  // namespace tessera::node_model
