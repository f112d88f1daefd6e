#pragma once
// `tessera sensitivity SCENARIO.yaml`: what each calibration constant is worth
// in one forecast. The scenario is simulated as given and once more per
// constant, that constant moved by one step from the value the scenario uses
// (docs/calibration.md, "Which constants matter for your forecast"). Each step
// is a set of --set overrides, so `tessera run SCENARIO --set ...` reproduces
// its row exactly.
#include <cstddef>
#include <string>
#include <vector>

#include "tessera/cli/scenario.hpp"
#include "tessera/units.hpp"

namespace tessera::cli {

/// One constant moved by one step, as the overrides that make it.
struct SensitivityStep {
  std::string constant;        ///< what moves, in words ("host data step per micro-batch")
  std::string step;            ///< by how much ("+1ms", "-1%")
  std::vector<Override> sets;  ///< applied after the scenario's own overrides
};

/// The steps that apply to `s`, in a fixed order (pure; nothing is run):
/// the host constants when the host model is on (`calibration.host_p2p`
/// only with pipeline stages), each from the value the host model uses; the
/// NVLink class with more than one GPU per node and the network class with
/// more than one node (launch +10us, step latency +1us, bandwidth -1%:
/// efficiency and group penalty both x 0.99, arrival skew +10us); the
/// overlap slowdown +0.05; the
/// clock derate x 0.99 (kernels about 1% slower). A step that would leave
/// its key's range is left out. `calibration.host_iteration` has no step:
/// it adds itself to the iteration.
std::vector<SensitivityStep> sensitivity_steps(const Scenario& s);

struct SensitivityRow {
  SensitivityStep step;
  Time iteration;  ///< the iteration with the step
  [[nodiscard]] Time change(Time base) const { return iteration - base; }
};

struct Sensitivity {
  Time iteration;                    ///< the scenario as given
  /// The command's own overrides (--set, --backend, --predictor), before
  /// each step's: a row's flags reproduce it with these first.
  std::vector<Override> overrides;
  std::vector<SensitivityRow> rows;  ///< largest |change| first; ties in sensitivity_steps' order
};

/// What run_sensitivity tells of its progress; finished_one() may be called
/// from several threads at once.
struct SensitivityProgress {
  virtual ~SensitivityProgress() = default;
  virtual void started(std::size_t runs) = 0;
  virtual void finished_one() = 0;
};
/// Simulates `base` (loaded from `text` with `overrides`: parse_scenario(text,
/// base.file, overrides)) and every step of sensitivity_steps(base), each
/// step's scenario loaded from `text` with the step's sets after
/// `overrides`, `jobs` at a time (one at a time on a backend whose runs
/// cannot overlap). Throws what loading or simulating throws (the first
/// failing run in the steps' order); a scenario with jobs is refused
/// (ScenarioError). The result does not depend on `jobs`. `progress`
/// (optional) is told of each finished run.
Sensitivity run_sensitivity(const Scenario& base, const std::string& text,
                            const std::vector<Override>& overrides, unsigned jobs,
                            SensitivityProgress* progress = nullptr);

std::string format_sensitivity_text(const Scenario& s, const Sensitivity& r);
std::string format_sensitivity_json(const Scenario& s, const Sensitivity& r);

}  // namespace tessera::cli
