#pragma once
// Scenario -> plan -> topology -> simulation: the pipeline every command that
// forecasts an iteration shares (run, sweep, compare-schedules).
#include <vector>

#include "tessera/cli/scenario.hpp"
#include "tessera/engine/executor.hpp"
#include "tessera/node_model/kernel.hpp"
#include "tessera/parallelism/plan.hpp"
#include "tessera/topology/topology.hpp"

namespace tessera::cli {

struct Simulation {
  topology::Topology topology;
  parallelism::PlanSummary plan;     ///< micro-batches, per-stage memory
  engine::ExecutionResult result;    ///< on the scenario's network
  /// Makespan and busiest compute stream with free communication: what the
  /// plan costs by itself (compute + pipeline bubbles).
  Time free_comm_makespan;
  Time free_comm_compute;
  /// The same run's host wait on the rank with the busiest compute stream
  /// (parallelism::HostOverhead): time its GPU idled for the host.
  Time free_comm_host;
  std::vector<double> link_bytes;  ///< per directed link (flow backend)
  std::string ns3_link_csv;        ///< per-link report of the ns-3 backend (ns3 backend)
};

/// The split of one iteration every report uses (defined here only):
/// iteration = compute + host + bubble + exposed communication, where
/// compute is the busiest compute stream, host the time that stream waited
/// for its host to issue work, bubble the rest of the iteration with free
/// communication (pipeline fill and drain), and exposed communication what
/// the real network adds on top.
struct IterationBreakdown {
  Time iteration, compute, host, bubble, exposed_comm;
  /// bubble / (compute + host + bubble): the idle share with free communication.
  [[nodiscard]] double bubble_fraction() const;
};
IterationBreakdown breakdown(const Simulation& sim);
/// How the scenario's collectives run, for every backend: its expansion
/// options, reductions timed by the roofline at the GPU's memory bandwidth
/// (charged only without fused reductions), and NCCL's calibrated costs
/// (engine::CommCalibration::nccl for the scenario's GPU: fitted NVLink
/// latency and efficiency, assumed network ones, SM sharing of
/// kNcclChannels / SMs). docs/collectives.md, "Calibration".
engine::ExecutionOptions execution_options(const Scenario& s);

/// Plans the scenario's iteration (its predictor times every kernel), builds
/// its topology and runs it on the scenario's backend, then once more on a
/// zero-cost network to separate the pipeline bubble from exposed
/// communication. `observer` (optional) sees the real run.
/// `predictor` (optional) replaces the scenario's named predictor.
/// `split` false skips the zero-cost run (free_comm_* stay zero): for
/// callers that need only the iteration time.
Simulation simulate_scenario(const Scenario& s, engine::ExecutionObserver* observer = nullptr,
                             const node_model::KernelPredictor* predictor = nullptr, bool split = true);

}  // namespace tessera::cli
