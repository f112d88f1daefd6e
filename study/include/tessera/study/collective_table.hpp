#pragma once
// The collectives a scenario's iteration runs and what each costs on the
// scenario's fabric: the table behind `tessera collectives` (docs/cli.md).
// Each distinct collective of each pipeline stage (the stage, the
// collective's role in the plan, kind, size and group shape) is found once
// with how often a rank of that stage calls it per iteration, and timed
// alone and with every group of that stage at once, by the
// scenario's backend with the calibrated NCCL costs that `run` uses; the
// stages whose entries then agree in everything but the stage share one
// row (the middle stages of a deep pipeline run the same layers). What
// the iteration exposes of them (overlap with compute, waiting for other
// ranks) is `tessera run`'s.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/collectives/expand.hpp"
#include "tessera/parallelism/task_graph.hpp"
#include "tessera/study/scenario.hpp"
#include "tessera/units.hpp"

namespace tessera::study {

struct CollectiveTableRow {
  /// The planner's task name without micro-batch, chunk, layer and bucket
  /// numbers (parallelism::task_role): "layer.fwd.tp.all-reduce",
  /// "pp.send_activation", "dp.grad.all-reduce.bucket".
  std::string role;
  parallelism::CollectiveKind kind = parallelism::CollectiveKind::AllReduce;
  Bytes bytes;         ///< per-rank buffer (parallelism::CollectiveKind)
  int group_size = 0;  ///< ranks in one group
  int nodes = 0;       ///< nodes one group spans (1: within a node, over NVLink)
  collectives::Algorithm algorithm = collectives::Algorithm::Auto;  ///< as resolved for the group
  /// Calls per iteration on one rank of each of `stages`, the pipeline
  /// stages whose row it is: a collective several stages call is under
  /// each (a pipeline send/recv pair under both of its stages, as each
  /// side's role: `pp.send_activation` under the sender's,
  /// `pp.recv_activation` under the receiver's), in one row for the stages
  /// where it has the same calls, groups and times, else in a row per
  /// stage.
  std::int64_t calls = 0;
  /// The first of `stages`.
  int stage = 0;
  /// The stages whose row it is, ascending (at least one): each calls it
  /// `calls` times with `concurrent_groups` groups, taking `alone` and
  /// `together`, exactly.
  std::vector<int> stages;
  /// Groups of each of those stages that run it at the same point of the
  /// iteration (the stage's tp x dp ranks' groups of this kind).
  int concurrent_groups = 0;
  Time alone;     ///< one group alone on the fabric
  Time together;  ///< all `concurrent_groups` at once (the slowest group)
};

/// `stages` (ascending) as ranges: "0", "1-14", "0,15", "1-2,4-14".
[[nodiscard]] std::string stage_ranges(const std::vector<int>& stages);

/// Bus bandwidth in nccl-tests' convention (bytes per second): the
/// collective's bus bytes (collectives::bus_bytes) over `t`; 0 for t = 0.
[[nodiscard]] double bus_bandwidth(const CollectiveTableRow& r, Time t);

struct CollectiveTable {
  /// Each stage's distinct collectives, stage by stage, each stage's in
  /// order of first call; a row that several stages share is where its
  /// first stage lists it.
  std::vector<CollectiveTableRow> rows;
  /// Per pipeline stage: the sum over its rows (those whose `stages` hold
  /// it: every collective its ranks call) of calls x alone time, for groups
  /// inside one node and groups that span nodes (what one rank's
  /// collectives would take one after another, with no overlap and no
  /// waiting).
  std::vector<Time> nvlink_per_stage, network_per_stage;
  /// The same sums of the `together` times (each with its stage's other
  /// groups at once, contending for the fabric).
  std::vector<Time> nvlink_together_per_stage, network_together_per_stage;
};

/// The collectives of `s`'s iteration (its plan as `run` plans it), each
/// timed on build_topology(s) by the scenario's backend with
/// execution_options(s). A scenario with jobs is refused (ScenarioError).
[[nodiscard]] CollectiveTable collective_table(const Scenario& s);

}  // namespace tessera::study
