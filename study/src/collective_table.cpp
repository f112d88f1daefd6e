#include "tessera/study/collective_table.hpp"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "tessera/parallelism/plan.hpp"
#include "tessera/study/pipeline.hpp"

namespace tessera::study {

double bus_bandwidth(const CollectiveTableRow& r, Time t) {
  return t > Time::zero() ? collectives::bus_bytes(r.kind, r.group_size, r.bytes) / t.seconds() : 0.0;
}

std::string stage_ranges(const std::vector<int>& stages) {
  std::string out;
  for (std::size_t i = 0; i < stages.size();) {
    std::size_t j = i;
    while (j + 1 < stages.size() && stages[j + 1] == stages[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(stages[i]);
    if (j > i) out += '-' + std::to_string(stages[j]);
    i = j + 1;
  }
  return out;
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
        row.stages = {stage};
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
  // Stages whose rows agree in everything but the stage (the middle stages
  // of a deep pipeline, which run the same layers on the same shape of
  // groups) share one row, where the first of them lists it, so that the
  // table shows what tells the stages apart (helper 155: gpt3-175b's 16
  // stages listed 180 rows, mostly the same ones for stages 1 to 14; 27
  // now). Rows of one stage never merge (their role, size or group differ).
  using Same = std::tuple<std::string, parallelism::CollectiveKind, std::int64_t, int, int,
                          collectives::Algorithm, std::int64_t, int, Time, Time>;
  std::map<Same, std::size_t> same;
  std::vector<CollectiveTableRow> merged;
  for (CollectiveTableRow& row : table.rows) {
    const Same key{row.role,      row.kind,  row.bytes.count(),     row.group_size, row.nodes,
                   row.algorithm, row.calls, row.concurrent_groups, row.alone,      row.together};
    auto [it, inserted] = same.emplace(key, merged.size());
    if (inserted) {
      merged.push_back(std::move(row));
    } else {
      merged[it->second].stages.push_back(row.stage);
    }
  }
  table.rows = std::move(merged);
  // Each stage's sums: its rows' (each row counts once for each of its
  // stages), calls x time.
  const std::size_t stages = stage_rank.size();
  table.nvlink_per_stage.assign(stages, Time::zero());
  table.network_per_stage.assign(stages, Time::zero());
  table.nvlink_together_per_stage.assign(stages, Time::zero());
  table.network_together_per_stage.assign(stages, Time::zero());
  for (const CollectiveTableRow& r : table.rows) {
    for (const int stage : r.stages) {
      const auto at = static_cast<std::size_t>(std::distance(stage_rank.begin(), stage_rank.find(stage)));
      (r.nodes > 1 ? table.network_per_stage : table.nvlink_per_stage)[at] += r.alone * r.calls;
      (r.nodes > 1 ? table.network_together_per_stage : table.nvlink_together_per_stage)[at] +=
          r.together * r.calls;
    }
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
