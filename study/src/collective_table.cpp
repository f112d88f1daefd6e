#include "tessera/study/collective_table.hpp"

#include <algorithm>
#include <cstddef>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <utility>

#include "tessera/parallelism/plan.hpp"
#include "tessera/study/pipeline.hpp"

namespace tessera::study {

double bus_bandwidth(const CollectiveTableRow& r, Time t) {
  return t > Time::zero() ? collectives::bus_bytes(r.kind, r.group_size, r.bytes) / t.seconds() : 0.0;
}

namespace {

/// Where a distinct collective was first called most often: a rank of that
/// stage and the task's index in the stage's program.
struct Representative {
  int rank = 0;
  std::size_t task = 0;
};

}  // namespace

namespace {

// The table, its overflows not yet named (collective_table).
CollectiveTable build_collective_table(const Scenario& s) {
  require_single_job(s, "collectives");
  const auto predictor = make_scenario_predictor(s);
  const parallelism::TaskGraph graph = parallelism::plan_training(s.model, s.workload, s.plan, *predictor);
  const int ranks = graph.num_ranks();

  // The stages in order, each by its first rank (its tp x dp ranks run one
  // program).
  std::map<int, int> stage_rank;
  for (int r = 0; r < ranks; ++r) stage_rank.emplace(parallelism::rank_coord(s.plan, r).pp, r);

  using Key = std::tuple<std::string, parallelism::CollectiveKind, std::int64_t, int, int>;
  std::map<Key, std::size_t> index;
  std::vector<Representative> reps;
  CollectiveTable table;
  // Per stage: each call's row and task index, in program order.
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> stage_calls;
  for (const auto& [stage, rank] : stage_rank) {
    auto& mine = stage_calls.emplace_back();
    const auto& tasks = graph.tasks(rank);
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      const parallelism::Task& t = tasks[i];
      if (t.kind != parallelism::TaskKind::Collective) continue;
      const auto& members = graph.groups[static_cast<std::size_t>(graph.group_of(rank, t.group))].ranks;
      std::set<int> nodes;
      for (int m : members) nodes.insert(m / s.cluster.gpus_per_node);
      const Key key{parallelism::task_role(t.name), t.collective, t.bytes.count(),
                    static_cast<int>(members.size()), static_cast<int>(nodes.size())};
      auto [it, inserted] = index.emplace(key, table.rows.size());
      if (inserted) {
        CollectiveTableRow row;
        row.role = std::get<0>(key);
        row.kind = t.collective;
        row.bytes = t.bytes;
        row.group_size = std::get<3>(key);
        row.nodes = std::get<4>(key);
        row.algorithm = collectives::resolve_algorithm(t.collective, members, t.bytes, s.collectives);
        table.rows.push_back(row);
        reps.push_back({rank, i});
      }
      mine.emplace_back(it->second, i);
    }
    // The stage that calls a collective most represents it (the first such).
    std::map<std::size_t, std::pair<std::int64_t, std::size_t>> calls;  // row -> calls, first task
    for (const auto& [row, task] : mine) {
      auto& c = calls.try_emplace(row, 0, task).first->second;
      ++c.first;
    }
    for (const auto& [row, c] : calls) {
      if (c.first <= table.rows[row].calls) continue;
      table.rows[row].calls = c.first;
      table.rows[row].stage = stage;
      reps[row] = {rank, c.second};
    }
  }

  const topology::Topology topo = build_topology(s);
  // Roles often share a collective (the forward's and backward's all-gathers
  // of one size in one group): each distinct set of groups runs once.
  std::map<std::tuple<parallelism::CollectiveKind, std::int64_t, std::vector<std::vector<int>>>, Time> timed;
  auto time_of = [&](parallelism::CollectiveKind kind, Bytes bytes,
                     const std::vector<std::vector<int>>& groups) {
    auto [it, inserted] = timed.try_emplace({kind, bytes.count(), groups});
    if (inserted) {
      it->second =
          execute_on_backend(s, parallelism::concurrent_collectives(ranks, groups, kind, bytes), topo)
              .makespan;
    }
    return it->second;
  };
  for (std::size_t i = 0; i < table.rows.size(); ++i) {
    CollectiveTableRow& row = table.rows[i];
    const Representative& rep = reps[i];
    const parallelism::Task& t = graph.tasks(rep.rank)[rep.task];
    const std::int32_t program = graph.ranks[static_cast<std::size_t>(rep.rank)].program;
    // Every group that runs this task: those of the stage's ranks.
    std::set<std::int32_t> group_ids;
    for (int r = 0; r < ranks; ++r) {
      if (graph.ranks[static_cast<std::size_t>(r)].program == program)
        group_ids.insert(graph.group_of(r, t.group));
    }
    std::vector<std::vector<int>> groups;
    groups.reserve(group_ids.size());
    for (std::int32_t gi : group_ids) groups.push_back(graph.groups[static_cast<std::size_t>(gi)].ranks);
    const auto& own = graph.groups[static_cast<std::size_t>(graph.group_of(rep.rank, t.group))].ranks;
    row.concurrent_groups = static_cast<int>(groups.size());
    row.alone = time_of(row.kind, row.bytes, {own});
    row.together = groups.size() == 1 ? row.alone : time_of(row.kind, row.bytes, groups);
  }
  for (const auto& calls : stage_calls) {
    Time nvlink, network, nvlink_together, network_together;
    for (const auto& [row, task] : calls) {
      const CollectiveTableRow& r = table.rows[row];
      (r.nodes > 1 ? network : nvlink) += r.alone;
      (r.nodes > 1 ? network_together : nvlink_together) += r.together;
    }
    table.nvlink_per_stage.push_back(nvlink);
    table.network_per_stage.push_back(network);
    table.nvlink_together_per_stage.push_back(nvlink_together);
    table.network_together_per_stage.push_back(network_together);
  }
  return table;
}

}  // namespace

// Sizes past int64 (a kernel of seq_len 10^11): named by the keys that
// scale them, as tessera run names them.
CollectiveTable collective_table(const Scenario& s) {
  return naming_overflow(s, [&] { return build_collective_table(s); });
}

}  // namespace tessera::study
