#pragma once
// Executes a task graph (shared programs bound to ranks) on any EventLoop +
// Network pair.
//
// Per rank: one compute stream (compute tasks in program order) and one
// communication stream per group (collectives in program order, as NCCL
// serialises a communicator). A collective starts when every member has
// reached it; it is expanded into point-to-point transfers by the collectives
// library and finishes on all members when its last transfer is delivered.
#include <cstdint>
#include <functional>
#include <vector>

#include "tessera/collectives/expand.hpp"
#include "tessera/collectives/transfer_graph.hpp"
#include "tessera/engine/comm_calibration.hpp"
#include "tessera/engine/event_loop.hpp"
#include "tessera/engine/network.hpp"
#include "tessera/parallelism/task_graph.hpp"

namespace tessera::engine {

/// Measurements go through observers, never logs. All hooks are optional.
class ExecutionObserver {
 public:
  virtual ~ExecutionObserver() = default;
  /// Called once before the first event, with the graph about to run.
  virtual void on_start(const parallelism::TaskGraph& /*graph*/) {}
  virtual void on_compute(int /*rank*/, const parallelism::Task& /*task*/, Time /*start*/, Time /*end*/) {}
  /// `group` is the global group (index into TaskGraph::groups) the
  /// collective ran in; `ranks` its members.
  virtual void on_collective(const parallelism::Task& /*task*/, std::int32_t /*group*/,
                             const std::vector<int>& /*ranks*/, Time /*start*/, Time /*end*/) {}
  /// The same collective's end on one member, `rank`, with that member's
  /// own task: called for every member after on_collective, whose task is
  /// one member's (the members' names differ where an interleaved
  /// pipeline's message goes from one model chunk to the next, and a
  /// message's sides are a send and a receive).
  virtual void on_collective_member(int /*rank*/, const parallelism::Task& /*task*/, std::int32_t /*group*/,
                                    const std::vector<int>& /*ranks*/, Time /*start*/, Time /*end*/) {}
  virtual void on_transfer(const collectives::Transfer& /*t*/, Time /*start*/, Time /*end*/) {}
  /// Host model: `rank`'s compute stream idles from `start` to `end`, its
  /// next task (`task`) ready but not yet issued by the host (the time
  /// RankResult::host_wait counts outside tasks).
  virtual void on_host_wait(int /*rank*/, const parallelism::Task& /*task*/, Time /*start*/, Time /*end*/) {}
  /// A backend's sign of life during a long stretch without tasks ending (a
  /// large collective on ns-3's packets): the simulated time now. Called
  /// every so many of the backend's own events (the ns-3 backend: 65,536),
  /// by none of the flow backend's; it measures nothing.
  virtual void on_heartbeat(Time /*now*/) {}
};

struct RankResult {
  Time finish;        ///< when the rank's last task ended
  /// Sum of its compute tasks' durations (the node model's time). Time added
  /// by SM sharing is in overlap_slowdown: the stream was busy for
  /// compute_busy + overlap_slowdown.
  Time compute_busy;
  /// Compute time added because collectives of this rank overlapped its
  /// compute (CommCalibration::sm_slowdown); zero without SM sharing.
  Time overlap_slowdown;
  Flops flops;        ///< model FLOPs it executed
  /// Time its compute stream waited for the host to issue work (host model;
  /// parallelism::HostOverhead), included in `finish` but not in `compute_busy`.
  Time host_wait;
};

struct ExecutionResult {
  Time makespan;  ///< when the last task of any rank ended
  std::vector<RankResult> ranks;
  std::uint64_t transfers = 0;
  Bytes bytes_sent;  ///< payload bytes of all transfers: nvlink_bytes + fabric_bytes
  /// bytes_sent split by where a transfer goes, the one classification the
  /// calibration also uses (ExecutionOptions::calibration): between two ranks
  /// of one node (rank / collectives.ranks_per_node), NVLink; between two
  /// nodes, the network (through the HCA: PCIe to a shared HCA, then the
  /// fabric). With ranks_per_node 0 every rank is in one node.
  Bytes nvlink_bytes;
  Bytes fabric_bytes;
  Time overlap_slowdown;  ///< sum over ranks of RankResult::overlap_slowdown
};

/// How collectives are expanded: algorithm (default Auto), chunks,
/// ranks_per_node and Auto's nominal latency/bandwidth, passed to
/// collectives::expand for every collective.
struct ExecutionOptions {
  collectives::ExpandOptions collectives;
  /// Time the receiving GPU needs to reduce `bytes` into its buffer after a
  /// transfer marked `reduce` arrives (a memory-bound kernel, timed by the
  /// node model). Empty: reductions are free. Not charged when
  /// calibration.fused_reductions is set.
  std::function<Time(Bytes)> reduction_time{};
  /// NCCL's real costs (latencies, achieved bandwidth, SM sharing), applied
  /// on any backend. Default: line rate (none of it). Transfers and
  /// collectives are classed NVLink or network by node, rank /
  /// collectives.ranks_per_node (0: every rank in one node). Not applied on
  /// an instantaneous network (communication is free there by definition).
  CommCalibration calibration{};
  /// Per rank (index = rank): its compute tasks take duration x this
  /// (stragglers, slower GPUs); counted in RankResult::compute_busy. Empty:
  /// every rank at its predicted speed. Otherwise one entry per rank, each in
  /// (0, 1e6) (InputError).
  std::vector<double> compute_scale{};
  /// A counterfactual: a collective for which this returns true completes
  /// the moment its last member arrives (no transfers, no latency, no
  /// bytes counted). Empty: none (study::communication_costs sets it).
  std::function<bool(const parallelism::Task&)> free_collective{};
};

/// A compute task's time on a GPU whose compute_scale is `factor`:
/// duration x factor, rounded to the picosecond (duration itself at 1). The
/// executor's one rule; observers that split a slice use it too.
[[nodiscard]] Time scaled_duration(Time duration, double factor);

/// Runs `graph` to completion: schedules its tasks on `loop`, sends its
/// transfers through `net`, calls loop.run(). Throws SimulationError if some
/// task can never run (a deadlock in the graph).
ExecutionResult execute(const parallelism::TaskGraph& graph, EventLoop& loop, Network& net,
                        ExecutionObserver* observer = nullptr, const ExecutionOptions& options = {});

/// What execute() on a ZeroCostNetwork returns for every rank's timing
/// (makespan, and per rank finish, compute_busy, host_wait, flops), computed
/// on parallelism::symmetry_quotient(graph): one representative per class of
/// interchangeable ranks, so a Megatron-style plan costs one rank per
/// pipeline stage instead of all of them. transfers and bytes are not
/// counted (zero): nothing is expanded. Throws as execute() does.
ExecutionResult execute_on_free_network(const parallelism::TaskGraph& graph, const ExecutionOptions& options = {});

/// The headline numbers of one iteration. The split of the iteration into
/// compute, host, bubble and exposed communication is not here: its one
/// definition is study::breakdown, which separates them with the
/// free-network run (helper 67: a compute and an uncovered time of the
/// last rank to finish here disagreed with it and were unused).
struct IterationSummary {
  Time iteration_time;
  Time overlap_slowdown;    ///< compute time the critical rank lost to SM sharing
  double tflops_per_gpu = 0.0;
  int critical_rank = 0;
};
IterationSummary summarize(const ExecutionResult& r);

}  // namespace tessera::engine
