#pragma once
// The task graph: the seam between planning and execution. Pure data; built
// by planners, read by the engine's executor.
//
// A `Program` is an ordered list of tasks with dependencies on earlier tasks
// of the same program. Programs are stored once and shared: every rank runs
// one program, bound to the rank by a slot -> group table (`RankBinding`). In
// a Megatron-style plan all tp x dp ranks of a pipeline stage run the same
// program; they differ only in which TP, DP and pipeline groups its slots
// name.
//
// Compute tasks run on the rank's compute stream in program order;
// communication tasks run on the rank's stream for their group, in program
// order. Ranks meet only in collectives: every member of a group holds a task
// in that group with the same `collective_id`, and the collective starts once
// every member has reached it. Collectives are matched on (global group,
// collective_id), so ids need only be unique within one group.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/units.hpp"

namespace tessera::parallelism {

using TaskIndex = std::int32_t;  ///< index into Program::tasks

enum class TaskKind { Compute, Collective };
/// What a communication task does. `bytes` is always the per-rank buffer
/// size: the full buffer for all-reduce/broadcast/reduce, the full (gathered)
/// buffer for reduce-scatter/all-gather, the whole send buffer for all-to-all,
/// the message for send-recv (a group of two ranks: sender first).
enum class CollectiveKind { AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, AllToAll, SendRecv };

std::string_view to_string(CollectiveKind k);

struct Task {
  /// A view of storage that outlives the program: a string literal, or a
  /// name kept by the program (`Program::keep_name`).
  std::string_view name;
  TaskKind kind = TaskKind::Compute;
  // Compute tasks:
  Time duration;  ///< predicted by the node model
  Flops flops;    ///< useful model FLOPs (for achieved TFLOP/s)
  // Collective tasks:
  CollectiveKind collective = CollectiveKind::AllReduce;
  /// Program-local group slot: index into the rank's `RankBinding::groups`.
  std::int32_t group = -1;
  /// Shared by the matching tasks of all members of the group (the same on
  /// every member whatever its program); unique within the group.
  std::int64_t collective_id = -1;
  Bytes bytes;  ///< per-rank buffer size
  // Host side (both kinds). A rank's host thread issues its tasks in program
  // order and runs ahead of the GPU; it waits only at `host_sync` tasks. All
  // zero (the default): the host is never the bottleneck.
  /// Host time to issue this task (its kernel launches, or the collective's
  /// call, plus any host work before them).
  Time host_issue;
  /// Compute tasks: from the moment the host starts issuing the task to the
  /// earliest end of its last kernel when the GPU is idle (its kernels issued
  /// one by one, each running once issued): at least `duration`; 0 = no bound.
  Time host_span;
  /// Compute tasks only: once this task is issued the host waits until it
  /// and every earlier compute task of the program have finished (the
  /// compute stream drained: torch.cuda.synchronize after a pipeline
  /// exchange, an .item()). Collectives in flight are not waited for unless
  /// the task depends on them, so a sync never waits on another rank's host.
  bool host_sync = false;
  /// Earlier tasks of the same program that must finish first.
  std::vector<TaskIndex> deps;
};

/// One program, shared by every rank that runs it.
class Program {
 public:
  std::vector<Task> tasks;

  /// Copies `name` into storage owned by this program (and shared by its
  /// copies, never moved) and returns a view of the copy, to use as a
  /// `Task::name` built at run time.
  std::string_view keep_name(std::string_view name);

 private:
  struct NameStore;
  std::shared_ptr<NameStore> names_;
};

struct Group {
  std::vector<int> ranks;  ///< global ranks, in ring order
};

/// Which program a rank runs and which groups its slots name.
struct RankBinding {
  std::int32_t program = -1;         ///< index into TaskGraph::programs
  std::vector<std::int32_t> groups;  ///< slot -> index into TaskGraph::groups
};

struct TaskGraph {
  std::vector<std::shared_ptr<const Program>> programs;
  std::vector<RankBinding> ranks;  ///< index = global rank
  std::vector<Group> groups;

  [[nodiscard]] int num_ranks() const { return static_cast<int>(ranks.size()); }
  /// The program `rank` runs.
  [[nodiscard]] const Program& program(int rank) const {
    return *programs[static_cast<std::size_t>(ranks[static_cast<std::size_t>(rank)].program)];
  }
  [[nodiscard]] const std::vector<Task>& tasks(int rank) const { return program(rank).tasks; }
  /// The global group (index into `groups`) that `slot` names on `rank`.
  [[nodiscard]] std::int32_t group_of(int rank, std::int32_t slot) const {
    return ranks[static_cast<std::size_t>(rank)].groups[static_cast<std::size_t>(slot)];
  }
  /// Stores `program` once; returns its index for RankBinding::program.
  std::int32_t add_program(Program program);
  /// Appends a rank (the next global rank) running program `program` with
  /// the given slot -> group table; returns the rank.
  int add_rank(std::int32_t program, std::vector<std::int32_t> slot_groups);

  /// Checks, throwing InputError describing the first problem: every
  /// program's dependencies (earlier tasks of the same program), durations,
  /// sizes and slots; every group (ranks in range, none twice); every binding
  /// (program and groups exist, the rank is a member of each group it uses,
  /// no group on two slots); and collective matching: every member of a group
  /// holds the same collectives in it (ids, kinds, sizes). Each distinct
  /// program is checked once, so the cost is the programs' tasks plus the
  /// bindings, not the tasks of every rank.
  void validate() const;
};

/// A graph of `ranks` ranks in which every group of `groups` (global ranks,
/// in ring order) runs one collective of `kind` and `bytes`, all at once: a
/// rank holds one task per group it is in, each in its own slot (so its
/// groups run side by side), in the order of `groups`; ranks in no group
/// are idle. For timing collectives alone (`tessera collectives`,
/// `validate collectives`).
TaskGraph concurrent_collectives(int ranks, const std::vector<std::vector<int>>& groups, CollectiveKind kind,
                                 Bytes bytes);

/// The graph with interchangeable ranks merged, for an execution in which
/// communication is free (a collective ends the instant its last member
/// reaches it). Two ranks are interchangeable when they run the same
/// program and, slot by slot, their groups hold the same classes of ranks in
/// the same slots (partition refinement to the coarsest such classes). On a
/// free network every rank of a class then runs exactly the same timeline,
/// so executing one representative per class gives every rank's timing: in
/// a Megatron-style plan the tp x dp ranks of a pipeline stage are one class.
/// Not for a real network, where ranks differ by their routes.
struct SymmetryQuotient {
  /// One rank per class (its lowest original rank), in ascending order of
  /// those ranks; the programs are the original's, shared. A group of the
  /// quotient lists the distinct classes of an original group's members
  /// (possibly only one).
  TaskGraph graph;
  std::vector<int> class_of;  ///< original rank -> rank of `graph`
};
/// `colour` (empty, or one value per rank): ranks of different colours are
/// never merged (e.g. ranks whose compute runs at different speeds).
SymmetryQuotient symmetry_quotient(const TaskGraph& g, const std::vector<std::int64_t>& colour = {});

}  // namespace tessera::parallelism
