#include "tessera/study/collective_table.hpp"

#include <algorithm>
#include <cstddef>
#include <iterator>
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

/// Where a row's collective is first called: a rank of the row's stage and
/// the task's index in the stage's program.
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

  // A row is one stage's: a collective that several stages call (the
  // layers' tensor-parallel collectives, a pipeline send/recv pair's two
  // sides, the tied embedding's all-reduce between the first and last
  // stages) has a row under each, with that stage's calls, groups and
  // times, so that each stage's sums below are those of its rows (helper
  // 152: one row for all stages, under the stage calling it most, left
  // each other stage's sums counting rows listed under another stage, timed
  // on that stage's groups).
  using Key = std::tuple<int, std::string, parallelism::CollectiveKind, std::int64_t, int, int>;
  std::map<Key, std::size_t> index;
  std::vector<Representative> reps;
  CollectiveTable table;
  for (const auto& [stage, rank] : stage_rank) {
    const auto& tasks = graph.tasks(rank);
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      const parallelism::Task& t = tasks[i];
      if (t.kind != parallelism::TaskKind::Collective) continue;
      const auto& members = graph.groups[static_cast<std::size_t>(graph.group_of(rank, t.group))].ranks;
      std::set<int> nodes;
      for (int m : members) nodes.insert(m / s.cluster.gpus_per_node);
      const Key key{stage,           parallelism::task_role(t.name),   t.collective,
                    t.bytes.count(), static_cast<int>(members.size()), static_cast<int>(nodes.size())};
      auto [it, inserted] = index.emplace(key, table.rows.size());
      if (inserted) {
        CollectiveTableRow row;
        row.role = std::get<1>(key);
        row.kind = t.collective;
        row.bytes = t.bytes;
        row.group_size = std::get<4>(key);
        row.nodes = std::get<5>(key);
        row.algorithm = collectives::resolve_algorithm(t.collective, members, t.bytes, s.collectives);
        row.stage = stage;
        table.rows.push_back(row);
        reps.push_back({rank, i});
      }
      ++table.rows[it->second].calls;
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
  // Each stage's sums: its rows' (every row is one stage's), calls x time.
  const std::size_t stages = stage_rank.size();
  table.nvlink_per_stage.assign(stages, Time::zero());
  table.network_per_stage.assign(stages, Time::zero());
  table.nvlink_together_per_stage.assign(stages, Time::zero());
  table.network_together_per_stage.assign(stages, Time::zero());
  for (const CollectiveTableRow& r : table.rows) {
    const auto at = static_cast<std::size_t>(std::distance(stage_rank.begin(), stage_rank.find(r.stage)));
    (r.nodes > 1 ? table.network_per_stage : table.nvlink_per_stage)[at] += r.alone * r.calls;
    (r.nodes > 1 ? table.network_together_per_stage : table.nvlink_together_per_stage)[at] +=
        r.together * r.calls;
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
