#include "tessera/parallelism/task_graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

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

/// Names in fixed blocks that are never moved or freed while a copy of the
/// program lives, so the views handed out stay valid.
struct Program::NameStore {
  static constexpr std::size_t kBlock = std::size_t{64} * 1024;
  std::vector<std::unique_ptr<char[]>> blocks;
  std::size_t used = kBlock;  // of the last block

  std::string_view keep(std::string_view s) {
    if (s.size() > kBlock / 4) {  // a long name gets a block of its own, before the current one
      auto own = std::make_unique<char[]>(s.size());
      std::memcpy(own.get(), s.data(), s.size());
      const std::string_view v(own.get(), s.size());
      blocks.insert(blocks.end() - (blocks.empty() ? 0 : 1), std::move(own));
      return v;
    }
    // (an empty first name too: blocks.back() of no block was undefined)
    if (blocks.empty() || used + s.size() > kBlock) {
      blocks.push_back(std::make_unique<char[]>(kBlock));
      used = 0;
    }
    char* at = blocks.back().get() + used;
    std::memcpy(at, s.data(), s.size());
    used += s.size();
    return {at, s.size()};
  }
};

std::string_view Program::keep_name(std::string_view name) {
  if (!names_) names_ = std::make_shared<NameStore>();
  return names_->keep(name);
}

std::int32_t TaskGraph::add_program(Program program) {
  programs.push_back(std::make_shared<const Program>(std::move(program)));
  return static_cast<std::int32_t>(programs.size() - 1);
}

int TaskGraph::add_rank(std::int32_t program, std::vector<std::int32_t> slot_groups) {
  ranks.push_back(RankBinding{program, std::move(slot_groups)});
  return num_ranks() - 1;
}

namespace {

/// One collective as a member sees it; a slot's collectives sorted by id.
struct Held {
  std::int64_t id;
  CollectiveKind kind;
  Bytes bytes;
  TaskIndex task;
};

bool same(const Held& a, const Held& b) { return a.id == b.id && a.kind == b.kind && a.bytes == b.bytes; }

}  // namespace

void TaskGraph::validate() const {
  // Programs, each once: dependencies, durations, sizes, slots; per slot the
  // collectives it holds, sorted by id.
  std::vector<std::vector<std::vector<Held>>> held(programs.size());  // [program][slot]
  for (std::size_t p = 0; p < programs.size(); ++p) {
    if (!programs[p]) throw InputError(fmt::format("task graph: program {} is missing", p));
    const auto& tasks = programs[p]->tasks;
    auto& slots = held[p];
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      const Task& t = tasks[i];
      for (TaskIndex d : t.deps) {
        if (d < 0 || static_cast<std::size_t>(d) >= i) {
          throw InputError(fmt::format("task graph: program {} task {} ('{}') depends on task {}, "
                                       "which is not an earlier task of the same program",
                                       p, i, t.name, d));
        }
      }
      if (t.host_sync && t.kind != TaskKind::Compute) {
        throw InputError(fmt::format("task graph: program {} task '{}': only compute tasks may be host syncs", p, t.name));
      }
      if (t.host_issue < Time::zero() || t.host_span < Time::zero()) {
        throw InputError(fmt::format("task graph: program {} task '{}' has a negative host time", p, t.name));
      }
      if (t.kind == TaskKind::Compute) {
        if (t.host_span > Time::zero() && t.host_span < t.duration) {
          throw InputError(fmt::format("task graph: program {} task '{}' has a host span shorter than its duration",
                                       p, t.name));
        }
        if (t.duration < Time::zero()) {
          throw InputError(
              fmt::format("task graph: program {} task '{}' has a negative duration", p, t.name));
        }
        continue;
      }
      if (t.group < 0) {
        throw InputError(
            fmt::format("task graph: program {} task '{}' names group slot {}", p, t.name, t.group));
      }
      if (t.bytes.count() < 0) {
        throw InputError(fmt::format("task graph: program {} task '{}' has a negative size", p, t.name));
      }
      const auto slot = static_cast<std::size_t>(t.group);
      if (slot >= slots.size()) slots.resize(slot + 1);
      slots[slot].push_back(Held{t.collective_id, t.collective, t.bytes, static_cast<TaskIndex>(i)});
    }
    for (std::size_t s = 0; s < slots.size(); ++s) {
      auto& v = slots[s];
      std::stable_sort(v.begin(), v.end(), [](const Held& a, const Held& b) { return a.id < b.id; });
      for (std::size_t k = 1; k < v.size(); ++k) {
        if (v[k].id == v[k - 1].id) {
          throw InputError(fmt::format("task graph: program {} holds collective {} twice in group slot {}", p,
                                       v[k].id, s));
        }
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

  // Bindings: who holds which group's collectives, as (program, slot).
  struct Use {
    std::int32_t program = -1;
    std::int32_t slot = -1;
  };
  std::vector<std::vector<std::pair<int, Use>>> users(groups.size());  // [group] -> (rank, use), rank order
  std::vector<std::int32_t> seen;
  for (int r = 0; r < num_ranks(); ++r) {
    const RankBinding& b = ranks[static_cast<std::size_t>(r)];
    if (b.program < 0 || static_cast<std::size_t>(b.program) >= programs.size()) {
      throw InputError(
          fmt::format("task graph: rank {} runs program {}, which does not exist", r, b.program));
    }
    const auto& slots = held[static_cast<std::size_t>(b.program)];
    if (b.groups.size() < slots.size()) {
      throw InputError(fmt::format("task graph: rank {} binds {} group slots, its program uses {}", r,
                                   b.groups.size(), slots.size()));
    }
    const auto& tasks = programs[static_cast<std::size_t>(b.program)]->tasks;
    seen.clear();
    for (std::size_t s = 0; s < slots.size(); ++s) {
      if (slots[s].empty()) continue;
      const std::int32_t g = b.groups[s];
      const Task& first = tasks[static_cast<std::size_t>(slots[s][0].task)];
      if (g < 0 || static_cast<std::size_t>(g) >= groups.size()) {
        throw InputError(fmt::format("task graph: rank {} task '{}' names group {}, which does not exist", r,
                                     first.name, g));
      }
      const auto& members = groups[static_cast<std::size_t>(g)].ranks;
      if (std::find(members.begin(), members.end(), r) == members.end()) {
        throw InputError(fmt::format("task graph: rank {} task '{}' names group {}, which does not "
                                     "include it",
                                     r, first.name, g));
      }
      if (std::find(seen.begin(), seen.end(), g) != seen.end()) {
        throw InputError(fmt::format("task graph: rank {} binds group {} to two slots", r, g));
      }
      seen.push_back(g);
      users[static_cast<std::size_t>(g)].emplace_back(r, Use{b.program, static_cast<std::int32_t>(s)});
    }
  }

  // Matching: every member of a group holds the same collectives in it. Equal
  // (program, slot) pairs are equal by construction; other pairs are compared
  // once.
  std::set<std::tuple<std::int32_t, std::int32_t, std::int32_t, std::int32_t>> compared;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const auto& us = users[g];
    if (us.empty()) continue;
    const auto& [r0, u0] = us.front();
    const auto& ref = held[static_cast<std::size_t>(u0.program)][static_cast<std::size_t>(u0.slot)];
    if (us.size() != groups[g].ranks.size()) {
      throw InputError(fmt::format("task graph: collective {} of group {} is held by {} of the {} "
                                   "ranks of its group",
                                   ref.front().id, g, us.size(), groups[g].ranks.size()));
    }
    for (const auto& [r, u] : us) {
      if (u.program == u0.program && u.slot == u0.slot) continue;
      if (!compared.emplace(u0.program, u0.slot, u.program, u.slot).second) continue;
      const auto& other = held[static_cast<std::size_t>(u.program)][static_cast<std::size_t>(u.slot)];
      const std::size_t n = std::min(ref.size(), other.size());
      std::size_t k = 0;
      while (k < n && same(ref[k], other[k])) ++k;
      if (k == ref.size() && k == other.size()) continue;
      if (k < n && ref[k].id == other[k].id) {
        const auto& tasks = programs[static_cast<std::size_t>(u0.program)]->tasks;
        throw InputError(fmt::format("task graph: collective {} ('{}') of group {} disagrees between "
                                     "ranks {} and {} on kind or size",
                                     ref[k].id, tasks[static_cast<std::size_t>(ref[k].task)].name, g, r0, r));
      }
      // The smaller id at the first difference is held by one side only.
      const bool ref_has = k < ref.size() && (k >= other.size() || ref[k].id < other[k].id);
      const std::int64_t id = ref_has ? ref[k].id : other[k].id;
      throw InputError(fmt::format("task graph: collective {} of group {} is held by rank {} but not "
                                   "by rank {}",
                                   id, g, ref_has ? r0 : r, ref_has ? r : r0));
    }
  }
}

SymmetryQuotient symmetry_quotient(const TaskGraph& g, const std::vector<std::int64_t>& colour) {
  const std::size_t n = g.ranks.size();
  // slot_in[group][position]: the slot under which that member names it.
  // (group by group, each member's few slots searched: a search of every
  // group of every rank for the rank cost ranks x group size, quadratic in
  // a pure data-parallel job; helper 179)
  std::vector<std::vector<std::int32_t>> slot_in(g.groups.size());
  for (std::size_t gi = 0; gi < g.groups.size(); ++gi) {
    const auto& members = g.groups[gi].ranks;
    slot_in[gi].assign(members.size(), -1);
    for (std::size_t pos = 0; pos < members.size(); ++pos) {
      const auto r = static_cast<std::size_t>(members[pos]);
      if (r >= n) continue;
      const auto& slots = g.ranks[r].groups;
      for (std::size_t s = 0; s < slots.size(); ++s) {
        if (slots[s] == static_cast<std::int32_t>(gi)) slot_in[gi][pos] = static_cast<std::int32_t>(s);
      }
    }
  }
  // A group as its members' (class, slot) pairs in group order, a class
  // listed once (first appearance).
  auto signature = [&](const std::vector<int>& cls, std::size_t gi, std::vector<std::int64_t>& out) {
    const auto& members = g.groups[gi].ranks;
    const std::size_t begin = out.size();
    for (std::size_t pos = 0; pos < members.size(); ++pos) {
      const std::int64_t c = cls[static_cast<std::size_t>(members[pos])];
      bool seen = false;
      for (std::size_t k = begin; k < out.size(); k += 2) seen = seen || out[k] == c;
      if (seen) continue;
      out.push_back(c);
      out.push_back(slot_in[gi][pos]);
    }
  };
  std::vector<int> cls(n);
  for (std::size_t r = 0; r < n; ++r) cls[r] = g.ranks[r].program;
  if (!colour.empty()) {
    if (colour.size() != n) {
      throw InputError(fmt::format("symmetry_quotient: {} colours for {} ranks", colour.size(), n));
    }
    std::map<std::pair<int, std::int64_t>, int> ids;
    for (std::size_t r = 0; r < n; ++r) {
      cls[r] = ids.try_emplace({cls[r], colour[r]}, static_cast<int>(ids.size())).first->second;
    }
  }
  std::size_t classes = 0;
  std::vector<std::vector<std::int64_t>> group_sig(g.groups.size());  // each group's, once a round
  for (;;) {
    std::map<std::vector<std::int64_t>, int> ids;
    std::vector<int> next(n);
    std::vector<std::int64_t> key;
    for (std::size_t gi = 0; gi < g.groups.size(); ++gi) {
      group_sig[gi].clear();
      signature(cls, gi, group_sig[gi]);
    }
    for (std::size_t r = 0; r < n; ++r) {
      key.clear();
      key.push_back(cls[r]);
      for (std::int32_t gi : g.ranks[r].groups) {
        key.push_back(-1);  // slot separator
        if (gi >= 0 && static_cast<std::size_t>(gi) < g.groups.size()) {
          const auto& sig = group_sig[static_cast<std::size_t>(gi)];
          key.insert(key.end(), sig.begin(), sig.end());
        }
      }
      next[r] = ids.try_emplace(key, static_cast<int>(ids.size())).first->second;
    }
    cls = std::move(next);
    if (ids.size() == classes) break;  // refinement only splits: no new class, stable
    classes = ids.size();
  }
  // One representative per class, the lowest rank; quotient ranks in order.
  SymmetryQuotient q;
  q.graph.programs = g.programs;
  q.class_of.assign(n, -1);
  std::vector<int> rank_of_class(classes, -1);
  std::vector<std::size_t> reps;
  for (std::size_t r = 0; r < n; ++r) {
    auto& qr = rank_of_class[static_cast<std::size_t>(cls[r])];
    if (qr < 0) {
      qr = static_cast<int>(reps.size());
      reps.push_back(r);
    }
    q.class_of[r] = qr;
  }
  std::map<std::vector<std::int64_t>, std::int32_t> group_ids;
  std::vector<std::int64_t> key;
  for (std::size_t rep : reps) {
    std::vector<std::int32_t> slots;
    for (std::int32_t gi : g.ranks[rep].groups) {
      key.clear();
      signature(cls, static_cast<std::size_t>(gi), key);
      auto [it, inserted] = group_ids.try_emplace(key, static_cast<std::int32_t>(q.graph.groups.size()));
      if (inserted) {
        Group qg;
        for (std::size_t k = 0; k < key.size(); k += 2) {
          qg.ranks.push_back(rank_of_class[static_cast<std::size_t>(key[k])]);
        }
        q.graph.groups.push_back(std::move(qg));
      }
      slots.push_back(it->second);
    }
    q.graph.add_rank(g.ranks[rep].program, std::move(slots));
  }
  return q;
}

TaskGraph concurrent_collectives(int ranks, const std::vector<std::vector<int>>& groups, CollectiveKind kind,
                                 Bytes bytes) {
  TaskGraph g;
  std::vector<std::vector<std::int32_t>> slots(
      static_cast<std::size_t>(std::max(ranks, 0)));  // per rank: its groups
  for (const auto& members : groups) {
    const auto gi = static_cast<std::int32_t>(g.groups.size());
    g.groups.push_back({members});
    for (int m : members) {
      if (m < 0 || m >= ranks) {
        throw InputError(
            fmt::format("concurrent_collectives: rank {} of a group is not among the {} ranks", m, ranks));
      }
      slots[static_cast<std::size_t>(m)].push_back(gi);
    }
  }
  // One program per number of slots: task s in slot s.
  std::vector<std::int32_t> program_of;
  for (int r = 0; r < ranks; ++r) {
    auto& mine = slots[static_cast<std::size_t>(r)];
    while (program_of.size() <= mine.size()) {
      Program p;
      for (std::size_t s = 0; s < program_of.size(); ++s) {
        Task t;
        t.name = "collective";
        t.kind = TaskKind::Collective;
        t.collective = kind;
        t.group = static_cast<std::int32_t>(s);
        t.collective_id = 0;
        t.bytes = bytes;
        p.tasks.push_back(t);
      }
      program_of.push_back(g.add_program(std::move(p)));
    }
    const std::int32_t program = program_of[mine.size()];  // before mine is moved from
    g.add_rank(program, std::move(mine));
  }
  return g;
}

}  // namespace tessera::parallelism
