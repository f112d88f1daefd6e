#pragma once
// Scenario -> plan -> topology -> simulation: the pipeline every command that
// forecasts an iteration shares (run, sweep, compare-schedules).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/engine/executor.hpp"
#include "tessera/node_model/kernel.hpp"
#include "tessera/node_model/overrides.hpp"
#include "tessera/parallelism/plan.hpp"
#include "tessera/study/backend.hpp"
#include "tessera/study/scenario.hpp"
#include "tessera/topology/topology.hpp"

namespace tessera::study {

/// What the split takes from a run on the free network
/// (engine::execute_on_free_network): its makespan, the busiest compute
/// stream (ties: the rank that waited longer for its host) and that rank's
/// host wait (parallelism::HostOverhead: time its GPU idled for the host).
/// A Simulation and each job of a `jobs:` scenario hold one.
struct FreeCommunication {
  Time makespan, compute, host;
};

struct Simulation {
  topology::Topology topology;
  parallelism::PlanSummary plan;     ///< micro-batches, per-stage memory
  engine::ExecutionResult result;    ///< on the scenario's network
  /// The run with free communication: what the plan costs by itself
  /// (compute, host, pipeline bubbles).
  FreeCommunication free_comm;
  // What the backend measured on the links (BackendRun).
  std::vector<double> link_bytes;  ///< per directed link (flow backend)
  std::vector<Time> link_busy;     ///< per directed link: time it carried a flow (flow backend)
  std::vector<double> link_peak_utilization;  ///< per directed link: highest load / capacity (flow backend)
  std::string link_csv;            ///< the backend's own per-link CSV (ns3 backend); empty: built from the above
  std::optional<PacketFabricStats> packet_fabric;  ///< ns3 backend only
  /// Measured kernel times used while planning (when the predictor was a
  /// node_model::OverridePredictor, as with `node_model.overrides`).
  std::optional<node_model::OverrideStats> kernel_overrides;
};

/// The split of one iteration every report uses (defined here only):
/// iteration = compute + host + bubble + exposed communication, where
/// compute is the busiest compute stream, host the time that stream waited
/// for its host to issue work, bubble the rest of the iteration with free
/// communication (pipeline fill and drain), and exposed communication what
/// the real network adds on top.
struct IterationBreakdown {
  Time iteration, compute, host, bubble, exposed_comm;
  /// `part` (one of the four) as a share of the iteration, in [0, 1]: the
  /// percentages `run` and `compare-schedules` print (0 for an empty iteration).
  [[nodiscard]] double share(Time part) const;
  /// The four shares (compute, host, bubble, exposed communication) in
  /// tenths of a percent, rounded by largest remainder so that they add up
  /// to 1000 as the parts add up to the iteration (rounded one by one, a
  /// third of the reports summed to 99.9% or 100.1%); all 0 for an empty
  /// iteration.
  [[nodiscard]] std::array<int, 4> tenths_of_percent() const;
};
IterationBreakdown breakdown(const Simulation& sim);
FreeCommunication free_communication(const engine::ExecutionResult& free_network);
/// The split of an iteration of length `iteration` whose plan, on the free
/// network, gave `free` (what breakdown(Simulation) computes; the jobs'
/// reports use it for each job alone and shared).
IterationBreakdown breakdown(Time iteration, const FreeCommunication& free);
/// Throughput (defined here only): one iteration's tokens (the plan's
/// sequences x seq_len) over `iteration`; 0 for an empty iteration. `run`,
/// `sweep`, `search` and the jobs' reports all give this.
double tokens_per_second(const Scenario& s, Time iteration);
/// A whole training run at a forecast's throughput (defined here only):
/// `training.tokens` over the tokens per second, GPU-hours = every GPU of
/// the cluster for that time, cost = GPU-hours x `cluster.price_per_gpu_hour`.
/// Iterations at the forecast's steady state: no warm-up, evaluation,
/// checkpoints, restarts or failures.
struct TrainingRun {
  double tokens = 0;
  double seconds = 0;  ///< not a Time: months overflow its picoseconds
  double gpu_hours = 0;
  std::optional<double> cost;  ///< without a price: not known
  [[nodiscard]] double days() const { return seconds / 86400.0; }
};
/// nullopt without `training.tokens` or without throughput (`gpus` the
/// GPUs paid for: the scenario's).
std::optional<TrainingRun> training_run(double tokens, double tokens_per_second, int gpus,
                                        std::optional<double> price_per_gpu_hour);
std::optional<TrainingRun> training_run(const Scenario& s, double tokens_per_second);
/// How the scenario's collectives run, for every backend: its expansion
/// options, reductions timed by the roofline at the GPU's memory bandwidth
/// (charged only without fused reductions), and NCCL's calibrated costs
/// (engine::CommCalibration::nccl for the scenario's GPU: fitted NVLink
/// latency and efficiency, assumed network ones, SM sharing of
/// kNcclChannels / SMs). docs/collectives.md, "Calibration".
engine::ExecutionOptions execution_options(const Scenario& s);

/// The scenario's iteration with every collective free (a zero-cost
/// network, one rank per class of interchangeable ranks): its compute, the
/// host's launches and data steps and the pipeline's own bubble, without
/// building a topology or running a backend. What `search` screens plans
/// by; `predictor` times the kernels (make_scenario_predictor(s)).
Time free_communication_iteration(const Scenario& s, const node_model::KernelPredictor& predictor);

/// The GPU memory each pipeline stage of `plan` has, stage by stage: the
/// smallest among the GPUs of its ranks, so a stage with ranks on
/// `mixed_gpus` nodes of a smaller GPU must fit that one. `run` checks each
/// stage against it, and `search` keeps only plans that fit it.
std::vector<Bytes> stage_memory_capacity(const Scenario& s, const parallelism::ParallelPlan& plan);

/// The memory of the scenario's smallest GPU (`gpu`, or `mixed_gpus`' when
/// smaller): what every plan's capacity is at least, whatever its stages.
Bytes smallest_gpu_memory(const Scenario& s);

/// An a-priori estimate of one iteration's work from the scenario's numbers
/// alone, before anything is planned or built: compute tasks (about 40 per
/// layer and micro-batch on every rank: forward, backward, recomputation)
/// and point-to-point transfers, collectives counted as rings (2(p-1)
/// sends per rank and chunk for an all-reduce). Within a small factor of
/// what is simulated (Robustness.WorkEstimateIsWithinAFewTimesTheSimulated).
/// Used to refuse, with the estimate, what would run for hours or exhaust
/// memory (kMaxSimulatedEvents).
struct WorkEstimate {
  double ranks = 0;
  double micro_batches = 0;  ///< per pipeline replica
  double tasks = 0;
  double tp_transfers = 0, dp_transfers = 0, pp_transfers = 0;
  double ep_transfers = 0;  ///< expert-parallel all-to-alls (mixtures of experts)
  [[nodiscard]] double transfers() const { return tp_transfers + dp_transfers + pp_transfers + ep_transfers; }
  /// Engine events: one per task, two per transfer (start, finish).
  [[nodiscard]] double events() const { return tasks + 2 * transfers(); }
};
WorkEstimate estimate_work(const Scenario& s);
/// The most engine events one simulation may be estimated at: about 17
/// minutes and 7 GiB at the rates of the 1024-GPU GPT-3 iteration (137 M
/// events in 35 s and 234 MB, docs/benchmarks.md).
inline constexpr double kMaxSimulatedEvents = 4e9;
/// Throws ScenarioError naming the keys behind the largest term and the
/// estimate when estimate_work(s) is past kMaxSimulatedEvents.
/// simulate_scenario calls it; sweep calls it for every point first.
void check_work(const Scenario& s);

/// Throws the ScenarioError for `e`, a time or size past int64 met while
/// planning or simulating `s`: it names the key that scales it (a latency of
/// more than a day, a measured kernel time of more than a day, else the
/// work per iteration: training.micro_batch, seq_len, global_batch).
/// simulate_scenario, kernel_table and collective_table map with it.
[[noreturn]] void throw_overflow(const Scenario& s, const OverflowError& e);
/// `f()`, its OverflowError named by throw_overflow.
template <class F>
auto naming_overflow(const Scenario& s, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const OverflowError& e) {
    throw_overflow(s, e);
  }
}

/// Runs `graph` on `topo` with the scenario's backend, looked up by name in
/// `backends`, and its options (execution_options, and `ns3:` for the ns-3
/// backend), unobserved.
engine::ExecutionResult execute_on_backend(const Scenario& s, const parallelism::TaskGraph& graph,
                                           const topology::Topology& topo,
                                           const BackendRegistry& backends = built_in_backends());
/// The same with each rank's traffic class (NetworkBackend::run_classified;
/// -1 for none, empty for no classes), returning all the backend measured.
BackendRun run_on_backend(const Scenario& s, const parallelism::TaskGraph& graph, const topology::Topology& topo,
                          std::vector<std::int32_t> source_classes,
                          const BackendRegistry& backends = built_in_backends());

/// Plans the scenario's iteration (its predictor times every kernel), builds
/// its topology and runs it on the scenario's backend, then once more on a
/// zero-cost network to separate the pipeline bubble from exposed
/// communication. `observer` (optional) sees the real run.
/// `predictor` (optional) replaces the scenario's predictor
/// (make_scenario_predictor), overrides included.
/// `split` false skips the zero-cost run (free_comm_* stay zero): for
/// callers that need only the iteration time.
/// The backend is s.backend looked up in `backends` (its check() first).
Simulation simulate_scenario(const Scenario& s, engine::ExecutionObserver* observer = nullptr,
                             const node_model::KernelPredictor* predictor = nullptr, bool split = true,
                             const BackendRegistry& backends = built_in_backends());

/// Classes of the communication a plan runs, by a collective task's role
/// (parallelism::task_role): tensor-parallel (`.tp.`), the experts'
/// all-to-alls (`.ep.`), the experts' data-parallel traffic (gradients and
/// parameters over the ranks holding each expert: `dp.expert_grad`,
/// `dp.expert_param`, ZeRO-3's `zero3.expert_param`), the rest's
/// data-parallel traffic (`dp.grad`, `dp.param`, ZeRO-3's `zero3.param`
/// gathers, the tied embedding's gradient), the pipeline's sends and
/// receives (`pp.`), other (none in today's plans).
/// Classes of communication (comm_class, communication_costs): the tensor-
/// parallel group's (its layers' collectives, sequence parallelism's norm
/// gradients), the experts' all-to-alls and their data-parallel traffic,
/// the rest's data-parallel traffic (gradients, ZeRO's gathers), the tied
/// word embedding's gradient between the first and last pipeline stages,
/// the pipeline's sends and receives.
enum class CommClass {
  TensorParallel,
  ExpertAllToAll,
  ExpertDataParallel,
  DataParallel,
  TiedEmbedding,
  Pipeline,
  Other
};
std::string_view to_string(CommClass c);
CommClass comm_class(std::string_view task_name);

/// What one class of communication costs an iteration: the scenario run
/// again with that class's collectives free (engine::ExecutionOptions::
/// free_collective), everything else as it is.
struct CommClassCost {
  CommClass cls = CommClass::Other;
  Time iteration_without;  ///< the iteration with that class free
  Time saving;             ///< `iteration` - iteration_without (at least 0)
};
/// One CommClassCost per class the scenario's plan runs, in CommClass order,
/// against `iteration` (the scenario's own, from simulate_scenario). The
/// savings are each a whole-iteration counterfactual, as exposed
/// communication is (IterationBreakdown): they do not add up to it, since
/// classes that overlap each other hide behind one another.
std::vector<CommClassCost> communication_costs(const Scenario& s, Time iteration,
                                               const BackendRegistry& backends = built_in_backends());

}  // namespace tessera::study
