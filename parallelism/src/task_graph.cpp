#include "tessera/parallelism/task_graph.hpp"

#include <fmt/format.h>
#include <map>
#include <set>

#include "tessera/error.hpp"

namespace tessera::parallelism {

std::string_view to_string(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllReduce: return "all-reduce";
    case CollectiveKind::ReduceScatter: return "reduce-scatter";
    case CollectiveKind::AllGather: return "all-gather";
    case CollectiveKind::Broadcast: return "broadcast";
    case CollectiveKind::Reduce: return "reduce";
    case CollectiveKind::AllToAll: return "all-to-all";
    case CollectiveKind::SendRecv: return "send-recv";
  }
  return "?";
}

void TaskGraph::validate() const {
  struct Seen {
    std::int32_t group;
    CollectiveKind kind;
    Bytes bytes;
    std::set<int> ranks;
  };
  std::map<std::int64_t, Seen> collectives;
  for (int r = 0; r < num_ranks(); ++r) {
    const auto& tasks = ranks[static_cast<std::size_t>(r)].tasks;
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      const Task& t = tasks[i];
      for (TaskIndex d : t.deps) {
        if (d < 0 || static_cast<std::size_t>(d) >= i) {
          throw InputError(fmt::format("task graph: rank {} task {} ('{}') depends on task {}, "
                                       "which is not an earlier task of the same rank",
                                       r, i, t.name, d));
        }
      }
      if (t.kind == TaskKind::Compute) {
        if (t.duration < Time::zero()) {
          throw InputError(fmt::format("task graph: rank {} task '{}' has a negative duration", r, t.name));
        }
        continue;
      }
      if (t.group < 0 || static_cast<std::size_t>(t.group) >= groups.size()) {
        throw InputError(fmt::format("task graph: rank {} task '{}' names group {}, which does not exist",
                                     r, t.name, t.group));
      }
      if (t.bytes.count() < 0) {
        throw InputError(fmt::format("task graph: rank {} task '{}' has a negative size", r, t.name));
      }
      auto [it, inserted] = collectives.try_emplace(t.collective_id, Seen{t.group, t.collective, t.bytes, {}});
      Seen& s = it->second;
      if (!inserted && (s.group != t.group || s.kind != t.collective || s.bytes != t.bytes)) {
        throw InputError(fmt::format("task graph: collective {} ('{}') disagrees between ranks on "
                                     "group, kind or size", t.collective_id, t.name));
      }
      if (!s.ranks.insert(r).second) {
        throw InputError(fmt::format("task graph: rank {} holds collective {} twice", r, t.collective_id));
      }
    }
  }
  for (std::size_t g = 0; g < groups.size(); ++g) {
    std::set<int> uniq(groups[g].ranks.begin(), groups[g].ranks.end());
    if (uniq.size() != groups[g].ranks.size()) {
      throw InputError(fmt::format("task graph: group {} lists a rank twice", g));
    }
    for (int r : groups[g].ranks) {
      if (r < 0 || r >= num_ranks()) {
        throw InputError(fmt::format("task graph: group {} names rank {}, outside 0..{}", g, r, num_ranks() - 1));
      }
    }
  }
  for (const auto& [id, s] : collectives) {
    const auto& members = groups[static_cast<std::size_t>(s.group)].ranks;
    std::set<int> expected(members.begin(), members.end());
    if (expected != s.ranks) {
      throw InputError(fmt::format("task graph: collective {} is held by {} of the {} ranks of its group",
                                   id, s.ranks.size(), expected.size()));
    }
  }
}

}  // namespace tessera::parallelism
