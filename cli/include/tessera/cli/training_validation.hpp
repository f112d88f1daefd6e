#pragma once
// Validation of whole training iterations against measured runs: vTrain's
// single-node Megatron-DeepSpeed table, or a user's own runs in its schema on
// a scenario of theirs (RunTemplate); each run becomes a scenario and goes
// through the same pipeline as `tessera run`.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/cli/scenario.hpp"
#include "tessera/node_model/validation.hpp"

namespace tessera::cli {

/// Plan families the report breaks errors down by.
enum class PlanFamily { DataParallel, TensorParallel, PipelineParallel, Mixed };
std::string_view to_string(PlanFamily f);

/// One measured iteration (a row of ground_truth_single.csv).
struct MeasuredRun {
  int row = 0;  ///< 1-based data row
  int gpus = 0, global_batch = 0, micro_batch = 0, hidden = 0, heads = 0, layers = 0, seq_len = 0;
  int tp = 1, dp = 1, pp = 1;
  double measured_ms = 0;
  /// Scenario keys the row sets besides its GPUs, size, batch and plan:
  /// columns named by a key path (`parallelism.recompute`,
  /// `parallelism.sequence_parallel`, ...), in column order; empty cells
  /// leave the key to the scenario.
  std::vector<std::pair<std::string, std::string>> keys;
  /// The keys as one text ("k=v;k=v"; empty without keys): part of what
  /// tells one configuration from another.
  [[nodiscard]] std::string keys_text() const;
  /// dp-only, tp-only, pp-only (one dimension above 1; dp-only also when all are 1) or mixed.
  [[nodiscard]] PlanFamily family() const;
};

/// The scenario of one run on `gpu` (a preset name): one NVSwitch node of
/// A100s, Megatron profile, fp16, full recomputation, 1F1B, the gradient
/// all-reduce after the backward, an empty `calibration:` section for
/// overrides.
std::string vtrain_scenario_yaml(const MeasuredRun& run, const std::string& gpu);

/// Where each run's scenario comes from: vTrain's template (one 8-GPU A100
/// node, Megatron-DeepSpeed, fp16, full recomputation) on a GPU preset, or a
/// scenario file of the user's (`--scenario`): its cluster, model,
/// training, parallelism and calibration settings, with each run's GPU count
/// (`cluster.nodes` = GPUs / `cluster.gpus_per_node`; a run on fewer GPUs
/// than a node gets one node of that many), model size (`model.layers`,
/// `hidden`, `heads`), batch (`training.micro_batch`, `global_batch`,
/// `seq_len`) and plan (`parallelism.tp`, `dp`, `pp`) set on top.
class RunTemplate {
 public:
  /// vTrain's template on `gpu` (A100-80GB or A100-40GB).
  static RunTemplate vtrain(std::string gpu);
  /// A scenario file, read with `overrides` (the command's --set: they may
  /// change its GPU or node size); throws ScenarioError (with its position)
  /// for a file that is not a valid scenario, InputError for one with
  /// several jobs.
  static RunTemplate from_file(const std::string& path, const std::vector<Override>& overrides = {});

  /// The name runs are reported under (the GPU preset, or the scenario's
  /// `cluster.gpu` name).
  [[nodiscard]] const std::string& label() const { return label_; }
  [[nodiscard]] bool is_vtrain() const { return base_text_.empty(); }
  /// The scenario file's measured kernels (`node_model.overrides`), an
  /// input of the command; empty when it has none (and for vTrain's).
  [[nodiscard]] const std::string& kernel_overrides_path() const { return kernel_overrides_path_; }
  /// The scenario of `run`: `overrides` (the command's --set), then the
  /// run's keys (its GPUs, size, batch, plan and key columns). Throws
  /// InputError for a run the template cannot hold (a GPU count that is not
  /// whole nodes; more than 8 GPUs on vTrain's one node), ScenarioError for
  /// a scenario rule a run or an override breaks (the keys a run sets are
  /// named as set by "data row N").
  [[nodiscard]] Scenario scenario(const MeasuredRun& run, const std::vector<Override>& overrides) const;

 private:
  std::string label_;
  std::string gpu_;        ///< vTrain: the preset
  std::string base_text_;  ///< a scenario file's text (empty: vTrain)
  std::string base_file_;
  int gpus_per_node_ = 8;
  std::string kernel_overrides_path_;
};

/// Reads measured runs in vTrain's schema (`ground_truth_single.csv`), plus
/// any columns named by a scenario key path (a '.' in the name: their cells
/// are set on that run's scenario, MeasuredRun::keys); throws
/// InputError naming file, row and column for a missing column, a
/// non-numeric or non-positive cell, or tp x dp x pp different from the GPU
/// count, and file and row for a row whose scenario under `where` breaks a
/// scenario rule (the rule's key and message) or that `where` cannot hold.
std::vector<MeasuredRun> read_vtrain_runs(const std::string& path,
                                          const RunTemplate& where = RunTemplate::vtrain("A100-80GB"));

/// Throws UsageError for a --set of a key every run sets from its own
/// columns (model sizes, batch, plan, the cluster's nodes; with `vtrain`,
/// the built-in node's GPUs too): it could not change what was measured.
void refuse_run_keys(const std::vector<Override>& overrides, bool vtrain);

struct PredictedRun {
  MeasuredRun run;
  std::string gpu;
  double predicted_ms = 0;
  /// predicted / measured - 1.
  [[nodiscard]] double error() const { return predicted_ms / run.measured_ms - 1.0; }
};

/// Simulates every run under `where` with `overrides` applied to each
/// scenario (e.g. calibration.host_launch=30us), on `jobs` threads; each
/// prediction's `gpu` is `where.label()`. Deterministic.
std::vector<PredictedRun> predict_runs(const std::vector<MeasuredRun>& runs, const RunTemplate& where,
                                       const std::vector<Override>& overrides, unsigned jobs);

/// Host-overhead calibration fit on measured runs (docs/calibration.md):
/// `calibration.host_launch`, `host_microbatch` and `host_p2p` by coordinate
/// descent (grid, then golden-section search) over simulations, where a
/// search went past its first grid followed by a Nelder-Mead simplex, then
/// `calibration.host_iteration`, which shifts every prediction by exactly its
/// value (it is host work after the last sync of the iteration), in closed
/// form (the weighted median minimising the mean relative error).
/// Which of the four constants a fit may move (`--fit-only`); the others
/// keep the value the runs' scenario gives them (its `calibration:`, the
/// command's --set, else the shipped default).
struct HostFitKeys {
  bool host_launch = true, host_p2p = true, host_microbatch = true, host_iteration = true;
  /// Parses "host_microbatch,host_iteration"; throws UsageError naming an
  /// unknown key.
  static HostFitKeys parse(const std::string& list);
  /// How many constants are set.
  [[nodiscard]] int count() const { return host_launch + host_p2p + host_microbatch + host_iteration; }
};
struct HostFit {
  Time host_launch;
  Time host_iteration;
  Time host_p2p;
  Time host_microbatch;
  double mean_error = 0;  ///< mean |predicted / measured - 1| on the fitted runs
  int simulations = 0;    ///< sweeps over the runs the search took
  /// The constants the fit moved: those asked for, less host_p2p when no
  /// run is pipelined (nothing measures it; it keeps the scenario's value).
  HostFitKeys fitted;
};
/// The fit as a scenario's `calibration:` section (exact: unit strings of
/// the fitted integer picoseconds), as `--fit` prints it to paste. With a
/// `source` ("my_runs.csv (12 runs)"), comments say what it was fit on and
/// that the section's other keys are not in it; a constant not fit is marked
/// "# kept" either way.
/// `sets`: the command's --set options the fit ran under, named in a
/// comment (pasted without them, the section does not give the fit's
/// error), and a kept constant one of them gave is said to come from it.
std::string calibration_yaml(const HostFit& fit, const std::string& source = {},
                             const std::vector<Override>& sets = {});
/// The four constants as a JSON object of exact unit strings (values for
/// --set calibration.KEY=...), as `--fit --json` prints them.
std::string calibration_json(const HostFit& fit);
HostFit fit_host_overhead(const std::vector<MeasuredRun>& runs, const RunTemplate& where,
                          const std::vector<Override>& overrides, unsigned jobs, HostFitKeys keys = {});

/// Cross-validation fold of a run: runs of one profile (the same hidden size,
/// micro-batch, tp and pp; any layers, data parallelism or global batch)
/// share a fold, so a fold's profiles are unseen by the fit that predicts
/// them (vTrain's table composes each profile's runs from one measurement:
/// docs/calibration.md). Deterministic.
int cv_fold(const MeasuredRun& run, int folds);

/// How `--cv` splits the runs: K folds by profile (cv_fold), or, given
/// "hidden", one fold per hidden size, so that every model width is
/// predicted by a fit on the other widths only (an extrapolation in width).
struct CvSplit {
  int folds = 0;  ///< 0: no cross-validation
  bool by_hidden = false;
  std::vector<int> hiddens;  ///< by_hidden: the distinct hidden sizes, ascending (fold i holds hiddens[i])
  int profiles = 0;          ///< the runs' distinct profiles (hidden, micro-batch, tp, pp)
  /// "2".."20" or "hidden"; throws UsageError otherwise, for "hidden"
  /// when the runs have fewer than two hidden sizes, and for K folds when
  /// every run falls in one (nothing would be held out).
  static CvSplit parse(const std::string& text, const std::vector<MeasuredRun>& runs);
  [[nodiscard]] int fold(const MeasuredRun& run) const;
};

/// (node_model/validation.hpp: one definition of the error statistics for
/// every validation report.)
using node_model::error_stats;
using node_model::ErrorStats;

/// What a marginal cost is measured along: one more micro-batch per pipeline
/// (runs that differ only in their global batch), or one more transformer
/// layer (runs that differ only in their layer count).
enum class Marginal { MicroBatch, Layer };

/// What one more micro-batch (or layer) costs: for a group of runs of one GPU
/// variant that differ only in their global batch (the same model,
/// micro-batch, tp, dp and pp), or only in their layers, and cover at least
/// two values of it, the least-squares line of iteration time over
/// micro-batches per pipeline (over layers), measured and predicted. The
/// slope is what a larger global batch adds per micro-batch (the cost a
/// forecast of a large-batch run extrapolates), or what one more layer adds
/// to the iteration (what a forecast of a deeper model extrapolates); the
/// intercept the fixed part of an iteration (optimizer, gradient sync,
/// pipeline fill; or embedding, LM head, loss and the data step).
struct MarginalCost {
  std::string gpu;
  MeasuredRun config;  ///< the group's first run (its global batch, or its layers, one of several)
  int runs = 0;
  double measured_ms = 0, predicted_ms = 0;              ///< per micro-batch (per layer)
  double measured_fixed_ms = 0, predicted_fixed_ms = 0;  ///< at zero micro-batches (layers)
  [[nodiscard]] double error() const { return predicted_ms / measured_ms - 1.0; }
};
/// The groups of `predicted` in order of first appearance.
std::vector<MarginalCost> marginal_costs(const std::vector<PredictedRun>& predicted,
                                         Marginal along = Marginal::MicroBatch);

/// Per GPU variant: errors by plan family, tensor parallelism, micro-batch,
/// hidden size, all; then the same for the marginal cost of a micro-batch
/// and of a layer (marginal_costs), and one `summary GPU: ...`, one
/// `marginal GPU: ...` and one `per-layer GPU: ...` line per variant.
std::string format_training_report(const std::vector<PredictedRun>& predicted);

/// A cross-validated fit against the scenario's own constants, for one GPU
/// variant (cv_verdict).
struct CvVerdict {
  ErrorStats held_out;  ///< each run predicted by a fit on the other folds
  ErrorStats scenario;  ///< the scenario's constants on the same runs
  double fold_min = 0;  ///< the folds' mean errors: least
  double fold_max = 0;  ///< and largest (0 and 0 without folds)
  int folds = 0;        ///< folds that predicted any run
  bool better = false;  ///< the held-out mean error is lower, as printed (to 0.1%)
};
/// The verdict of `held_out` against `before` (runs not in `held_out` are
/// left out); nullopt when either has no run.
std::optional<CvVerdict> cv_verdict(const std::vector<PredictedRun>& before,
                                    const std::vector<PredictedRun>& held_out,
                                    const std::vector<double>& fold_means);

/// Whether a cross-validated fit is worth pasting: for one GPU variant, the
/// held-out errors (`held_out`, each run predicted by a fit on the other
/// folds) beside the errors of the scenario's own constants on the same runs
/// (`before`; runs not in `held_out` are left out), mean, P90 and max, the
/// spread of the folds' mean errors (`fold_means`, fractions), and a verdict
/// line: the fit is better only when its held-out mean error is lower.
std::string format_cv_verdict(const std::string& gpu, const std::vector<PredictedRun>& before,
                              const std::vector<PredictedRun>& held_out,
                              const std::vector<double>& fold_means);

/// The same figures as JSON members (no braces): "gpus", per variant its
/// "runs", "per_micro_batch" and "per_layer" groups (group name -> n, mean,
/// median, p90, max of |error| and "signed", their signed mean; fractions),
/// and "rows", every run with its prediction and error.
std::string training_report_json(const std::vector<PredictedRun>& predicted);

}  // namespace tessera::cli
