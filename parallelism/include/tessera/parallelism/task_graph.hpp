#pragma once
// The per-rank task graph: the seam between planning and execution. Pure
// data; built by planners, read by the engine's executor.
//
// Each rank has its own program: an ordered list of tasks with dependencies on
// earlier tasks of the same rank. Compute tasks run on the rank's compute
// stream in program order; communication tasks run on its communication
// stream in program order. Ranks meet only in collectives: every member of a
// group holds a task with the same `collective_id`, and the collective starts
// once every member has reached it.
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/units.hpp"

namespace tessera::parallelism {

using TaskIndex = std::int32_t;  ///< index into RankProgram::tasks

enum class TaskKind { Compute, Collective };
/// What a communication task does. `bytes` is always the per-rank buffer
/// size: the full buffer for all-reduce/broadcast/reduce, the full (gathered)
/// buffer for reduce-scatter/all-gather, the whole send buffer for all-to-all,
/// the message for send-recv (a group of two ranks: sender first).
enum class CollectiveKind { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, AllToAll, SendRecv };

std::string_view to_string(CollectiveKind k);

struct Task {
  std::string name;
  TaskKind kind = TaskKind::Compute;
  // Compute tasks:
  Time duration;  ///< predicted by the node model
  Flops flops;    ///< useful model FLOPs (for achieved TFLOP/s)
  // Collective tasks:
  CollectiveKind collective = CollectiveKind::AllReduce;
  std::int32_t group = -1;           ///< index into TaskGraph::groups
  std::int64_t collective_id = -1;   ///< shared by the matching tasks of all members
  Bytes bytes;                       ///< per-rank buffer size
  /// Earlier tasks of the same rank that must finish first.
  std::vector<TaskIndex> deps;
};

struct RankProgram {
  std::vector<Task> tasks;
};

struct Group {
  std::vector<int> ranks;  ///< global ranks, in ring order
};

struct TaskGraph {
  std::vector<RankProgram> ranks;  ///< index = global rank
  std::vector<Group> groups;

  [[nodiscard]] int num_ranks() const { return static_cast<int>(ranks.size()); }
  /// Checks indices, dependency order and collective matching; throws
  /// InputError describing the first problem.
  void validate() const;
};

}  // namespace tessera::parallelism
