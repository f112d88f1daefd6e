#include "tessera/engine/executor.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "tessera/collectives/expand.hpp"
#include "tessera/engine/zero_cost_network.hpp"
#include "tessera/error.hpp"

namespace tessera::engine {

using parallelism::Task;
using parallelism::TaskGraph;
using parallelism::TaskIndex;
using parallelism::TaskKind;

namespace {

struct Stream {
  const std::vector<TaskIndex>* order = nullptr;  // tasks of this stream in program order (shared)
  std::size_t next = 0;
  bool busy = false;
};

/// What every rank running one program shares: dependency counts, dependents
/// (CSR) and the tasks of each stream in program order.
struct ProgramLayout {
  std::vector<int> pending;                     // deps per task
  std::vector<std::uint32_t> dependents_begin;  // CSR offsets into dependents, size tasks + 1
  std::vector<TaskIndex> dependents;            // tasks waiting on each task, ascending
  std::vector<TaskIndex> compute;               // compute tasks in program order
  std::vector<std::vector<TaskIndex>> comm;     // per slot: its collectives in program order
  // Host model (empty `issue_prefix` when every task's host fields are zero):
  std::vector<Time> issue_prefix;               // host issue time of tasks [0, i), size tasks + 1
  std::vector<TaskIndex> syncs;                 // host_sync tasks, ascending
  std::vector<std::int32_t> compute_prefix;     // compute tasks among [0, i), size tasks + 1 (with syncs)
  std::vector<std::uint8_t> feeds_comm;         // per task: some dependent is a collective
};

struct RankState {
  const std::vector<Task>* tasks = nullptr;     // the rank's program
  const ProgramLayout* layout = nullptr;
  std::vector<int> pending;                     // unfinished deps per task
  std::size_t remaining = 0;
  Stream compute;
  Time compute_start;                           // of the compute task in flight
  // SM sharing (only with CommCalibration::sm_slowdown > 0): the compute
  // task in flight has work_left picoseconds of undisturbed work left at
  // work_since, progressing at rate 1 - s while slowed.
  int comm_in_flight = 0;                       // launched collectives of this rank not yet complete
  bool slowed = false;
  double work_left = 0.0;
  Time work_since;
  std::uint32_t compute_gen = 0;                // completion events of older generations are stale
  Time not_before;                              // host model: the task in flight ends no earlier
  Time host_part;                               // host model: its run time beyond its duration
  // Compute chain (no SM sharing): the compute tasks from compute.next on
  // that run back to back, ending at chain_ends[k]; one event ends them all.
  std::vector<Time> chain_ends;
  std::vector<std::int32_t> comm_groups;        // global groups, ascending
  std::vector<Stream> comm;                     // one per entry of comm_groups
  std::vector<std::uint8_t> stream_of_slot;     // program slot -> index into comm
  // Communication streams advance() must look at (bit k: comm[k]); the rest
  // cannot have changed since it last looked: a head's last dependency
  // finished, a collective completed, a wake-up or a host sync released
  // set bits. More than 64 streams: always all.
  std::uint64_t check = ~std::uint64_t{0};
  // Host model: the host issues tasks in program order from `host_base`
  // (when it started issuing task `base_index`) and waits at syncs[sync_pos]
  // until every task up to it has finished (`window_done` of them have).
  Time host_base;
  TaskIndex base_index = 0;
  std::size_t sync_pos = 0;
  std::int64_t window_done = 0;
  bool wake_pending = false;
  Time wake_at;
  TaskIndex waiting_compute = -1;               // compute head already charged its host wait
  // Host model: when the compute stream went idle, and until when its wait
  // for the host to launch a collective (one its next task waits for, or
  // after its last task) is charged.
  Time compute_idle_since;
  Time tail_charged;
};

/// A collective expanded once and shared by every launch of the same
/// (kind, group, size): immutable, never copied.
struct Expansion {
  collectives::TransferGraph graph;
  std::vector<int> pending;                            // deps per transfer
  std::vector<std::uint32_t> dependents_begin;         // CSR offsets, size n + 1
  std::vector<collectives::TransferIndex> dependents;  // transfers waiting on each
  std::vector<collectives::TransferIndex> roots;       // transfers without deps, ascending
  Bytes total_bytes;
  Bytes fabric_bytes;  // of total_bytes, between nodes (count_sent)
  int group_size = 0;
  // The most members of the group on one node: the group size of its
  // NVLink hops' efficiency (the NVLink curve was fit on one node's groups).
  int node_group_size = 0;
  bool crosses_nodes = false;  // some transfer joins two nodes: network-class launch latency
  Time skew;  // the members' arrival skew, added to the launch latency (LinkCalibration::skew)
  // Per transfer, fixed for the run (calibration, reduction model, routes):
  struct Cost {
    Time before;        // calibrated step latency x steps, before it is sent
    Time after;         // after its last byte arrived: further steps' path latencies, reductions
    double efficiency;  // Message::efficiency
    bool crosses;       // between two nodes
  };
  std::vector<Cost> cost;
  /// The `before` every root shares, or -1 ps when they differ.
  Time roots_before = Time::from_ps(-1);
};

/// Collectives match on (global group, id): ids are unique within a group.
struct CollectiveKey {
  std::int32_t group;
  std::int64_t id;
  bool operator==(const CollectiveKey&) const = default;
};
struct CollectiveKeyHash {
  std::size_t operator()(const CollectiveKey& k) const {
    return static_cast<std::size_t>((static_cast<std::uint64_t>(k.id) * 0x9E3779B97F4A7C15ULL) ^
                                    static_cast<std::uint32_t>(k.group));
  }
};

struct ActiveCollective {
  std::int64_t id = -1;
  std::int32_t group = -1;
  std::vector<int> arrived;  // member ranks that reached it, in arrival order
  const Expansion* expansion = nullptr;
  std::vector<int> pending;  // unfinished deps per transfer
  std::vector<Time> starts;  // per transfer, kept only for an observer
  std::size_t delivered = 0;
  Time start;
};

class Executor {
 public:
  Executor(const TaskGraph& g, EventLoop& loop, Network& net, ExecutionObserver* obs,
           const ExecutionOptions& opts)
      : g_(g),
        loop_(loop),
        net_(net),
        obs_(obs),
        opts_(opts),
        calibrated_(!net.instantaneous() && !opts.calibration.is_line_rate()),
        fused_reductions_(calibrated_ && opts.calibration.fused_reductions),
        sm_share_(calibrated_ ? opts.calibration.sm_slowdown : 0.0),
        ranks_(static_cast<std::size_t>(g.num_ranks())),
        result_() {
    if (calibrated_) opts_.calibration.validate();
    if (!opts_.compute_scale.empty()) {
      if (opts_.compute_scale.size() != static_cast<std::size_t>(g.num_ranks())) {
        throw InputError(fmt::format("execute: compute_scale has {} entries for {} ranks", opts_.compute_scale.size(),
                                     g.num_ranks()));
      }
      for (double f : opts_.compute_scale) {
        if (!(f > 0.0 && f < 1e6)) throw InputError(fmt::format("execute: compute_scale {} is not in (0, 1e6)", f));
      }
    }
    result_.ranks.resize(ranks_.size());
    layouts_.resize(g.programs.size());
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      const auto& binding = g.ranks[r];
      const auto p = static_cast<std::size_t>(binding.program);
      if (!layouts_[p]) layouts_[p] = make_layout(g.programs[p]->tasks);
      const ProgramLayout& lay = *layouts_[p];
      RankState& s = ranks_[r];
      s.tasks = &g.programs[p]->tasks;
      s.layout = &lay;
      s.pending = lay.pending;
      s.remaining = s.tasks->size();
      s.compute.order = &lay.compute;
      // Streams in ascending global group order: advance() visits them so (as
      // before programs were shared), which keeps equal-time events in order.
      std::vector<std::pair<std::int32_t, std::size_t>> used;  // (global group, slot)
      for (std::size_t slot = 0; slot < lay.comm.size(); ++slot) {
        if (!lay.comm[slot].empty()) used.emplace_back(binding.groups[slot], slot);
      }
      std::sort(used.begin(), used.end());
      s.comm.resize(used.size());
      s.stream_of_slot.assign(lay.comm.size(), 0);
      for (std::size_t k = 0; k < used.size(); ++k) {
        s.comm_groups.push_back(used[k].first);
        s.comm[k].order = &lay.comm[used[k].second];
        s.stream_of_slot[used[k].second] = static_cast<std::uint8_t>(std::min<std::size_t>(k, 255));
      }
    }
  }

  ExecutionResult run() {
    for (int r = 0; r < g_.num_ranks(); ++r) advance(r);
    loop_.run();
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      if (ranks_[r].remaining != 0) {
        throw SimulationError(fmt::format(
            "task graph deadlocked: rank {} has {} tasks that never ran (a collective that not "
            "every member reaches, or a dependency cycle)",
            r, ranks_[r].remaining));
      }
    }
    for (const auto& rr : result_.ranks) {
      result_.makespan = std::max(result_.makespan, rr.finish);
      result_.overlap_slowdown += rr.overlap_slowdown;
    }
    return result_;
  }

 private:
  static std::unique_ptr<const ProgramLayout> make_layout(const std::vector<Task>& tasks) {
    auto lay = std::make_unique<ProgramLayout>();
    bool host = false;
    lay->pending.resize(tasks.size());
    lay->dependents_begin.assign(tasks.size() + 1, 0);
    for (const Task& t : tasks) {
      for (TaskIndex d : t.deps) ++lay->dependents_begin[static_cast<std::size_t>(d) + 1];
    }
    for (std::size_t i = 0; i < tasks.size(); ++i) lay->dependents_begin[i + 1] += lay->dependents_begin[i];
    lay->dependents.resize(lay->dependents_begin.back());
    lay->feeds_comm.assign(tasks.size(), 0);
    for (const Task& t : tasks) {
      if (t.kind == TaskKind::Compute) continue;
      for (TaskIndex d : t.deps) lay->feeds_comm[static_cast<std::size_t>(d)] = 1;
    }
    std::vector<std::uint32_t> fill(lay->dependents_begin.begin(), lay->dependents_begin.end() - 1);
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      const Task& t = tasks[i];
      lay->pending[i] = static_cast<int>(t.deps.size());
      for (TaskIndex d : t.deps) {
        lay->dependents[fill[static_cast<std::size_t>(d)]++] = static_cast<TaskIndex>(i);
      }
      if (t.host_issue > Time::zero() || t.host_span > Time::zero() || t.host_sync) host = true;
      if (t.kind == TaskKind::Compute) {
        lay->compute.push_back(static_cast<TaskIndex>(i));
      } else {
        const auto slot = static_cast<std::size_t>(t.group);
        if (slot >= lay->comm.size()) lay->comm.resize(slot + 1);
        lay->comm[slot].push_back(static_cast<TaskIndex>(i));
      }
    }
    if (host) {
      lay->issue_prefix.resize(tasks.size() + 1);
      for (std::size_t i = 0; i < tasks.size(); ++i) {
        lay->issue_prefix[i + 1] = lay->issue_prefix[i] + tasks[i].host_issue;
        if (tasks[i].host_sync) lay->syncs.push_back(static_cast<TaskIndex>(i));
      }
      if (!lay->syncs.empty()) {
        lay->compute_prefix.resize(tasks.size() + 1);
        for (std::size_t i = 0; i < tasks.size(); ++i) {
          lay->compute_prefix[i + 1] = lay->compute_prefix[i] + (tasks[i].kind == TaskKind::Compute ? 1 : 0);
        }
      }
    }
    return lay;
  }

  // ---- host model (docs/engine.md, "Host model")

  /// When the host starts issuing task `i`, or nullopt while it waits at a
  /// sync before `i`.
  std::optional<Time> issue_time(const RankState& s, TaskIndex i) const {
    const ProgramLayout& lay = *s.layout;
    if (lay.issue_prefix.empty()) return Time::zero();
    if (s.sync_pos < lay.syncs.size() && i > lay.syncs[s.sync_pos]) return std::nullopt;
    return s.host_base + (lay.issue_prefix[static_cast<std::size_t>(i)] -
                          lay.issue_prefix[static_cast<std::size_t>(s.base_index)]);
  }

  /// Runs advance(rank) at `at` (> now), unless an earlier wake-up is pending.
  void wake(int rank, Time at) {
    RankState& s = ranks_[static_cast<std::size_t>(rank)];
    if (s.wake_pending && s.wake_at <= at) return;
    s.wake_pending = true;
    s.wake_at = at;
    loop_.schedule(at - loop_.now(), [this, rank, at] {
      RankState& r = ranks_[static_cast<std::size_t>(rank)];
      if (r.wake_pending && r.wake_at == at) r.wake_pending = false;
      r.check = ~std::uint64_t{0};
      advance(rank);
    });
  }

  /// Compute task `i` of `rank` finished: release the host's sync when it
  /// was the last compute task the sync waits for.
  void host_task_done(int rank, TaskIndex i) {
    RankState& s = ranks_[static_cast<std::size_t>(rank)];
    const ProgramLayout& lay = *s.layout;
    if (s.sync_pos >= lay.syncs.size()) return;
    const TaskIndex sync = lay.syncs[s.sync_pos];
    if (i > sync) return;
    const std::int64_t window = lay.compute_prefix[static_cast<std::size_t>(sync) + 1] -
                                lay.compute_prefix[static_cast<std::size_t>(s.base_index)];
    if (++s.window_done < window) return;
    // Everything up to the sync is done: the host goes on once it has also
    // finished issuing the sync task itself.
    const Time issued = *issue_time(s, sync) + (*s.tasks)[static_cast<std::size_t>(sync)].host_issue;
    s.host_base = std::max(loop_.now(), issued);
    s.base_index = sync + 1;
    ++s.sync_pos;
    s.check = ~std::uint64_t{0};  // tasks after the sync may be issued now
    s.window_done = 0;
  }

  /// Whether task `next` waits for task `task` (one of its dependencies).
  static bool feeds(const ProgramLayout& lay, TaskIndex task, TaskIndex next) {
    const auto first = lay.dependents.begin() + lay.dependents_begin[static_cast<std::size_t>(task)];
    const auto last = lay.dependents.begin() + lay.dependents_begin[static_cast<std::size_t>(task) + 1];
    return std::binary_search(first, last, next);
  }

  static std::int32_t stream_index(const RankState& s, std::int32_t group) {
    const auto it = std::lower_bound(s.comm_groups.begin(), s.comm_groups.end(), group);
    return static_cast<std::int32_t>(it - s.comm_groups.begin());
  }

  /// A compute task's time on `rank`: its duration, times the rank's
  /// ExecutionOptions::compute_scale (stragglers).
  [[nodiscard]] Time scaled(int rank, Time duration) const {
    if (opts_.compute_scale.empty()) return duration;
    return scaled_duration(duration, opts_.compute_scale[static_cast<std::size_t>(rank)]);
  }

  const Task& task(int rank, TaskIndex i) const {
    return (*ranks_[static_cast<std::size_t>(rank)].tasks)[static_cast<std::size_t>(i)];
  }

  void advance(int rank) {
    RankState& s = ranks_[static_cast<std::size_t>(rank)];
    Stream& c = s.compute;
    const Time now = loop_.now();
    if (!c.busy && c.next < c.order->size() && s.pending[static_cast<std::size_t>((*c.order)[c.next])] == 0) {
      const TaskIndex i = (*c.order)[c.next];
      const Task& t = task(rank, i);
      const std::optional<Time> h = issue_time(s, i);
      if (h && *h <= now) {
        c.busy = true;
        s.compute_start = now;
        // The GPU runs the task's kernels as the host issues them: it ends no
        // earlier than issue start + host span.
        const Time work = scaled(rank, t.duration);
        Time run = work;
        s.not_before = Time::zero();
        if (t.host_span > Time::zero()) {
          s.not_before = *h + t.host_span;
          run = std::max(run, s.not_before - now);
        }
        s.host_part = run - work;
        result_.ranks[static_cast<std::size_t>(rank)].host_wait += s.host_part;
        if (sm_share_ > 0.0) {
          s.work_left = static_cast<double>(work.ps());
          s.work_since = now;
          s.slowed = s.comm_in_flight > 0;
          schedule_compute_end(rank);
        } else {
          // Captures fit std::function's inline buffer: no allocation per task.
          chain(rank, i, now + run);
          loop_.schedule(s.chain_ends.back() - now, [this, rank, i] { compute_done(rank, i); });
        }
      } else if (h) {
        if (s.waiting_compute != i) {  // the stream idles until the host issues the task
          s.waiting_compute = i;
          result_.ranks[static_cast<std::size_t>(rank)].host_wait += *h - now;
          if (obs_ != nullptr) obs_->on_host_wait(rank, t, now, *h);
        }
        wake(rank, *h);
      }
    }
    const bool all = s.comm.size() > 64;
    for (std::size_t k = 0; k < s.comm.size(); ++k) {  // ascending group order
      if (!all) {
        const std::uint64_t bit = std::uint64_t{1} << k;
        if ((s.check & bit) == 0) continue;
        s.check &= ~bit;  // looked at now; set again when something changes for it
      }
      Stream& st = s.comm[k];
      if (st.busy || st.next >= st.order->size()) continue;
      const TaskIndex i = (*st.order)[st.next];
      if (s.pending[static_cast<std::size_t>(i)] != 0) continue;
      const std::optional<Time> h = issue_time(s, i);
      if (!h) continue;  // issued after the host's pending sync
      const Time issued = *h + task(rank, i).host_issue;
      if (issued > now) {
        wake(rank, issued);
        continue;
      }
      st.busy = true;
      if (!s.compute.busy && (s.compute.next >= s.compute.order->size() ||
                              feeds(*s.layout, i, (*s.compute.order)[s.compute.next]))) {
        // The stream idles while the host launches a collective its next
        // kernel waits for (a tensor-parallel all-reduce, ZeRO-3's parameter
        // all-gather, issued late by a host that is behind) or, after the
        // rank's last kernel, the iteration's closing collectives (ZeRO's
        // parameter all-gather after the optimizer step's sync): host time,
        // as before a kernel, not a bubble (helper 76: at pp 1 it was).
        const Time from = std::max(s.compute_idle_since, s.tail_charged);
        if (issued > from) {
          result_.ranks[static_cast<std::size_t>(rank)].host_wait += issued - from;
          if (obs_ != nullptr) obs_->on_host_wait(rank, task(rank, i), from, issued);
          s.tail_charged = issued;
        }
      }
      arrive(rank, s.comm_groups[k], i);
    }
  }

  /// Fills s.chain_ends: the compute task `first` (ending at `end`) and the
  /// compute tasks after it that start the instant the previous one ends,
  /// with nothing else able to happen in between: the previous task feeds
  /// no collective and is not a host sync, the next one waits for no
  /// unfinished collective, and the host has issued it by then. Their
  /// times are exactly those of one event per task; only the events are
  /// saved (docs/engine.md, "Compute chains").
  void chain(int rank, TaskIndex first, Time end) {
    RankState& s = ranks_[static_cast<std::size_t>(rank)];
    const ProgramLayout& lay = *s.layout;
    const std::vector<TaskIndex>& order = *s.compute.order;
    s.chain_ends.clear();
    s.chain_ends.push_back(end);
    TaskIndex last = first;
    for (std::size_t pos = s.compute.next + 1; pos < order.size(); ++pos) {
      const Task& prev = task(rank, last);
      if (lay.feeds_comm[static_cast<std::size_t>(last)] != 0 || prev.host_sync) break;
      const TaskIndex j = order[pos];
      const Task& t = task(rank, j);
      // Unfinished deps other than the chain's own compute tasks (compute
      // tasks before `first` are done: the stream runs in program order).
      int unmet = s.pending[static_cast<std::size_t>(j)];
      for (TaskIndex d : t.deps) {
        if (d >= first && task(rank, d).kind == TaskKind::Compute) --unmet;
      }
      if (unmet != 0) break;
      const std::optional<Time> h = issue_time(s, j);
      if (!h || *h > end) break;
      const Time work = scaled(rank, t.duration);
      Time run = work;
      if (t.host_span > Time::zero()) run = std::max(run, *h + t.host_span - end);
      result_.ranks[static_cast<std::size_t>(rank)].host_wait += run - work;
      end += run;
      s.chain_ends.push_back(end);
      last = j;
    }
  }

  /// SM sharing: (re)schedules the end of the rank's compute task from its
  /// work left and current rate; earlier completion events become stale.
  void schedule_compute_end(int rank) {
    RankState& s = ranks_[static_cast<std::size_t>(rank)];
    const double ps = s.slowed ? s.work_left / (1.0 - sm_share_) : s.work_left;
    const std::uint32_t gen = ++s.compute_gen;
    // Not before the host has issued the task's last kernel (host model).
    const Time after = std::max(Time::from_ps_rounded(ps), s.not_before - loop_.now());
    loop_.schedule(after, [this, rank, gen] {
      RankState& r = ranks_[static_cast<std::size_t>(rank)];
      if (gen != r.compute_gen) return;  // re-timed since
      compute_done(rank, (*r.compute.order)[r.compute.next]);
    });
  }

  /// SM sharing: the rank's communication started or stopped; a compute task
  /// in flight changes rate now.
  void comm_changed(int rank) {
    RankState& s = ranks_[static_cast<std::size_t>(rank)];
    const bool slowed = s.comm_in_flight > 0;
    if (!s.compute.busy || slowed == s.slowed) {
      s.slowed = slowed;
      return;
    }
    const Time now = loop_.now();
    const auto elapsed = static_cast<double>((now - s.work_since).ps());
    s.work_left = std::max(0.0, s.work_left - (s.slowed ? elapsed * (1.0 - sm_share_) : elapsed));
    s.work_since = now;
    s.slowed = slowed;
    schedule_compute_end(rank);
  }

  void compute_done(int rank, TaskIndex i) {
    RankState& s = ranks_[static_cast<std::size_t>(rank)];
    auto& rr = result_.ranks[static_cast<std::size_t>(rank)];
    if (sm_share_ > 0.0) {
      const Task& tk = task(rank, i);
      const Time work = scaled(rank, tk.duration);
      rr.compute_busy += work;
      ++s.compute_gen;  // nothing pending may end this task again
      rr.overlap_slowdown += std::max(Time::zero(), loop_.now() - s.compute_start - work - s.host_part);
      rr.flops += tk.flops;
      if (obs_ != nullptr) obs_->on_compute(rank, tk, s.compute_start, loop_.now());
      s.compute.busy = false;
      s.compute_idle_since = loop_.now();
      ++s.compute.next;
      finish(rank, i);
      return;
    }
    // The chain that started with `i` (chain()), each task as its own event would.
    Time start = s.compute_start;
    for (const Time end : s.chain_ends) {
      const TaskIndex k = (*s.compute.order)[s.compute.next];
      const Task& tk = task(rank, k);
      rr.compute_busy += scaled(rank, tk.duration);
      rr.flops += tk.flops;
      if (obs_ != nullptr) obs_->on_compute(rank, tk, start, end);
      ++s.compute.next;
      retire(rank, k);
      start = end;
    }
    s.compute.busy = false;
    s.compute_idle_since = loop_.now();
    advance(rank);
  }

  void arrive(int rank, std::int32_t group, TaskIndex i) {
    const Task& t = task(rank, i);
    auto [it, inserted] = slot_of_.try_emplace(CollectiveKey{group, t.collective_id}, 0U);
    if (inserted) {
      if (free_.empty()) {
        it->second = static_cast<std::uint32_t>(active_.size());
        active_.emplace_back();
      } else {
        it->second = free_.back();
        free_.pop_back();
      }
      active_[it->second].id = t.collective_id;
      active_[it->second].group = group;
    }
    const std::uint32_t slot = it->second;
    ActiveCollective& ac = active_[slot];
    ac.arrived.push_back(rank);
    const auto& members = g_.groups[static_cast<std::size_t>(group)].ranks;
    if (ac.arrived.size() < members.size()) return;
    launch(t, slot);
  }

  const Expansion& expansion(const Task& t, std::int32_t group) {
    // Keyed by the network's routing epoch too: the costs hold path
    // latencies, which a cable failed since may have changed. Expansions of
    // earlier epochs stay (collectives in flight point at theirs).
    const auto key =
        std::make_tuple(static_cast<int>(t.collective), group, t.bytes.count(), net_.routing_epoch());
    auto it = expansions_.find(key);
    if (it != expansions_.end()) return *it->second;
    auto e = std::make_unique<Expansion>();
    e->graph = collectives::expand(t.collective, g_.groups[static_cast<std::size_t>(group)].ranks, t.bytes,
                                   opts_.collectives);
    const auto& trs = e->graph.transfers;
    const std::size_t n = trs.size();
    e->pending.resize(n);
    e->dependents_begin.assign(n + 1, 0);
    for (std::size_t k = 0; k < n; ++k) {
      e->pending[k] = static_cast<int>(trs[k].deps.size());
      for (auto d : trs[k].deps) ++e->dependents_begin[static_cast<std::size_t>(d) + 1];
      if (trs[k].deps.empty()) e->roots.push_back(static_cast<collectives::TransferIndex>(k));
    }
    for (std::size_t k = 0; k < n; ++k) e->dependents_begin[k + 1] += e->dependents_begin[k];
    for (const auto& tr : trs) {
      e->total_bytes += tr.bytes;
      if (crosses_nodes(tr)) {
        e->crosses_nodes = true;
        e->fabric_bytes += tr.bytes;
      }
    }
    e->group_size = static_cast<int>(g_.groups[static_cast<std::size_t>(group)].ranks.size());
    e->node_group_size = node_group_size(group);
    const Time s = calibrated_ ? link_class(e->crosses_nodes).skew : Time::zero();
    if (s > Time::zero() && t.collective != parallelism::CollectiveKind::SendRecv) {
      // The expected latest of the members' arrivals (a send's receiver
      // waits for its sender through the task graph already).
      auto [m, added] = max_normal_by_size_.try_emplace(e->group_size, 0.0);
      if (added) m->second = expected_max_normal(e->group_size);  // an integral: once per group size
      e->skew = Time::from_ps_rounded(static_cast<double>(s.ps()) * m->second);
    }
    // The flows of a ring (Transfer::ring) pay the per-step fixed costs of
    // the whole ring, as the step chain goes round it: per ring, the sums
    // of its connections' step and path latencies and its connection count.
    struct RingCost {
      Time step;
      Time path;
      std::int64_t connections = 0;
    };
    std::vector<RingCost> rings;
    // Each transfer's path latency, looked up once (rings and multi-step
    // flows need it twice: in their ring's sum and for their own crossing).
    std::vector<Time> path(n, Time::from_ps(-1));
    auto path_of = [&](std::size_t k) {
      if (path[k] < Time::zero()) path[k] = net_.latency(trs[k].src, trs[k].dst);
      return path[k];
    };
    for (std::size_t k = 0; k < n; ++k) {
      const collectives::Transfer& tr = trs[k];
      if (tr.ring < 0 || tr.steps <= 1) continue;
      if (static_cast<std::size_t>(tr.ring) >= rings.size()) {
        rings.resize(static_cast<std::size_t>(tr.ring) + 1);
      }
      RingCost& rc = rings[static_cast<std::size_t>(tr.ring)];
      if (calibrated_) rc.step += link_class(crosses_nodes(tr)).step_latency;
      rc.path += path_of(k);
      ++rc.connections;
    }
    e->cost.reserve(n);
    for (std::size_t k = 0; k < n; ++k) {
      const collectives::Transfer& tr = trs[k];
      Expansion::Cost c{};
      c.crosses = crosses_nodes(tr);
      const LinkCalibration& cls = link_class(c.crosses);
      const RingCost* ring =
          tr.ring >= 0 && tr.steps > 1 ? &rings[static_cast<std::size_t>(tr.ring)] : nullptr;
      // steps x the mean over the ring's connections (exact in picoseconds;
      // 128-bit: a sum over a million connections times 2 million steps).
      auto ring_share = [&](Time sum) {
        __extension__ using Int128 = __int128;
        return Time::from_ps(
            static_cast<std::int64_t>(static_cast<Int128>(sum.ps()) * tr.steps / ring->connections));
      };
      if (calibrated_) {
        c.before = ring != nullptr ? ring_share(ring->step) : cls.step_latency * tr.steps;
        // An NVLink hop of a group spanning nodes runs as a hop of the
        // group's ranks on its node do (NCCL's rings chain them there).
        c.efficiency = cls.efficiency(c.crosses ? e->group_size : e->node_group_size);
      } else {
        c.efficiency = 1.0;
      }
      // A multi-step flow: each further step pays the path latency again
      // (the flow's own crossing pays the first).
      if (ring != nullptr) {
        c.after = std::max(Time::zero(), ring_share(ring->path) - path_of(k));
      } else if (tr.steps > 1) {
        c.after = path_of(k) * (tr.steps - 1);
      }
      // A reducing receiver runs its reduction kernel (one per reducing
      // step) before the data counts as delivered (dependent transfers
      // forward the reduced chunk), unless NCCL's fused kernel pipelines it
      // with the copy.
      const std::int32_t reductions = tr.reductions();
      if (reductions > 0 && opts_.reduction_time && !fused_reductions_) {
        c.after += reduction_time(Bytes(tr.reduced_bytes().count() / reductions)) * reductions;
      }
      e->cost.push_back(c);
    }
    for (std::size_t r = 0; r < e->roots.size(); ++r) {
      const Time b = e->cost[static_cast<std::size_t>(e->roots[r])].before;
      if (r == 0) {
        e->roots_before = b;
      } else if (b != e->roots_before) {
        e->roots_before = Time::from_ps(-1);
        break;
      }
    }
    e->dependents.resize(e->dependents_begin[n]);
    std::vector<std::uint32_t> fill(e->dependents_begin.begin(), e->dependents_begin.end() - 1);
    for (std::size_t k = 0; k < n; ++k) {  // ascending k: each list in transfer order, as before
      for (auto d : trs[k].deps) e->dependents[fill[static_cast<std::size_t>(d)]++] = static_cast<collectives::TransferIndex>(k);
    }
    return *expansions_.emplace(key, std::move(e)).first->second;
  }

  void launch(const Task& t, std::uint32_t slot) {
    ActiveCollective& ac = active_[slot];
    if (obs_ == nullptr && net_.instantaneous() && ac.arrived.size() < 2) {
      // A member alone (a group of symmetry_quotient's): nothing to send.
      ac.start = loop_.now();
      loop_.schedule(Time::zero(), [this, slot] { complete(slot); });
      return;
    }
    const Expansion& e = expansion(t, ac.group);
    ac.start = loop_.now();
    ac.expansion = &e;
    if (sm_share_ > 0.0) {  // the members' NCCL kernels occupy SMs from now to complete()
      for (int r : ac.arrived) {
        if (++ranks_[static_cast<std::size_t>(r)].comm_in_flight == 1) comm_changed(r);
      }
    }
    if (opts_.free_collective && opts_.free_collective(t)) {
      loop_.schedule(Time::zero(), [this, slot] { complete(slot); });
      return;
    }
    const auto n = e.graph.transfers.size();
    if (n > 0 && obs_ == nullptr && net_.instantaneous()) {
      // Every transfer would arrive at this instant: the collective ends now
      // on all members, whatever the order of its deliveries.
      result_.transfers += n;
      count_sent(e.total_bytes, e.fabric_bytes);
      loop_.schedule(Time::zero(), [this, slot] { complete(slot); });
      return;
    }
    if (n == 0) {
      loop_.schedule(Time::zero(), [this, slot] { complete(slot); });
      return;
    }
    ac.pending = e.pending;
    if (obs_ != nullptr) ac.starts.resize(n);
    const Time launch_latency =
        calibrated_ ? link_class(e.crosses_nodes).launch_latency + e.skew : Time::zero();
    if (e.roots_before >= Time::zero()) {
      // Every root waits as long before it is sent: one event sends them all.
      const Time lead = launch_latency + e.roots_before;
      if (lead > Time::zero()) {
        loop_.schedule(lead, [this, slot] { send_roots(slot); });
        return;
      }
      send_roots(slot);
      return;
    }
    if (launch_latency > Time::zero()) {
      loop_.schedule(launch_latency, [this, slot] { start_roots(slot); });
      return;
    }
    start_roots(slot);
  }

  void start_roots(std::uint32_t slot) {
    for (auto k : active_[slot].expansion->roots) start_transfer(slot, k);
  }
  void send_roots(std::uint32_t slot) {
    for (auto k : active_[slot].expansion->roots) send_transfer(slot, k);
  }

  /// The most members of `group` on one node (Expansion::node_group_size),
  /// counted once per group.
  int node_group_size(int group) {
    if (node_group_sizes_.empty()) node_group_sizes_.assign(g_.groups.size(), 0);
    int& most = node_group_sizes_[static_cast<std::size_t>(group)];
    if (most == 0) {
      std::map<int, int> per_node;
      for (const auto r : g_.groups[static_cast<std::size_t>(group)].ranks)
        most = std::max(most, ++per_node[node_of(r)]);
    }
    return most;
  }

  [[nodiscard]] int node_of(int rank) const {
    const int per_node = opts_.collectives.ranks_per_node;
    return per_node > 0 ? rank / per_node : 0;
  }
  [[nodiscard]] bool crosses_nodes(const collectives::Transfer& tr) const { return node_of(tr.src) != node_of(tr.dst); }
  /// The one place sent bytes are counted and split (ExecutionResult::nvlink_bytes).
  void count_sent(Bytes total, Bytes fabric) {
    result_.bytes_sent += total;
    result_.fabric_bytes += fabric;
    result_.nvlink_bytes += total - fabric;
  }
  [[nodiscard]] const LinkCalibration& link_class(bool between_nodes) const {
    return between_nodes ? opts_.calibration.network : opts_.calibration.nvlink;
  }

  void start_transfer(std::uint32_t slot, collectives::TransferIndex k) {
    const Time before = active_[slot].expansion->cost[static_cast<std::size_t>(k)].before;
    if (before > Time::zero()) {
      loop_.schedule(before, [this, slot, k] { send_transfer(slot, k); });
      return;
    }
    send_transfer(slot, k);
  }

  void send_transfer(std::uint32_t slot, collectives::TransferIndex k) {
    ActiveCollective& ac = active_[slot];
    const Expansion& e = *ac.expansion;
    const auto ki = static_cast<std::size_t>(k);
    const auto& tr = e.graph.transfers[ki];
    const Expansion::Cost& c = e.cost[ki];
    if (obs_ != nullptr) ac.starts[ki] = loop_.now();
    ++result_.transfers;
    count_sent(tr.bytes, c.crosses ? tr.bytes : Bytes{});
    // Delivered c.after past its last byte (further steps, reductions), in
    // the network's delivery event.
    const Message msg{tr.src, tr.dst, tr.bytes, c.efficiency, c.after};
    net_.send(msg, [this, slot, k] { delivered(slot, k); });
  }

  /// The reduction model's time for `bytes`, memoized by size.
  Time reduction_time(Bytes bytes) {
    auto [it, inserted] = reduction_memo_.try_emplace(bytes.count());
    if (inserted) it->second = opts_.reduction_time(bytes);
    return it->second;
  }

  void delivered(std::uint32_t slot, collectives::TransferIndex k) {
    ActiveCollective& ac = active_[slot];
    const Expansion& e = *ac.expansion;
    const auto ki = static_cast<std::size_t>(k);
    if (obs_ != nullptr) obs_->on_transfer(e.graph.transfers[ki], ac.starts[ki], loop_.now());
    ++ac.delivered;
    for (auto j = e.dependents_begin[ki]; j < e.dependents_begin[ki + 1]; ++j) {
      const auto d = e.dependents[j];
      if (--active_[slot].pending[static_cast<std::size_t>(d)] == 0) start_transfer(slot, d);
    }
    if (active_[slot].delivered == e.graph.transfers.size()) complete(slot);
  }

  void complete(std::uint32_t slot) {
    // Take what is needed and free the slot first: finishing the members'
    // tasks may make them reach (and launch) further collectives.
    ActiveCollective& ac = active_[slot];
    const std::int64_t id = ac.id;
    const std::int32_t group = ac.group;
    const Time start = ac.start;
    const std::vector<int> arrived = std::move(ac.arrived);
    ac.arrived.clear();  // keep the other buffers' capacity for the slot's next collective
    ac.pending.clear();
    ac.starts.clear();
    ac.expansion = nullptr;
    ac.delivered = 0;
    slot_of_.erase(CollectiveKey{group, id});
    free_.push_back(slot);
    bool observed = false;
    if (sm_share_ > 0.0) {
      // Communication stops on every member before any of them moves on.
      for (int rank : arrived) {
        if (--ranks_[static_cast<std::size_t>(rank)].comm_in_flight == 0) comm_changed(rank);
      }
    }
    for (int rank : arrived) {
      RankState& s = ranks_[static_cast<std::size_t>(rank)];
      // This rank's task for the collective is the head of its group's
      // stream (validate(): every member holds it in the same group).
      Stream& st = s.comm[static_cast<std::size_t>(stream_index(s, group))];
      const TaskIndex i = (*st.order)[st.next];
      const Task& t = task(rank, i);
      if (!st.busy || t.collective_id != id) {
        throw SimulationError(fmt::format("executor: rank {} is not running collective {}", rank, id));
      }
      if (obs_ != nullptr) {
        const std::vector<int>& members = g_.groups[static_cast<std::size_t>(group)].ranks;
        if (!observed) obs_->on_collective(t, group, members, start, loop_.now());
        observed = true;
        obs_->on_collective_member(rank, t, group, members, start, loop_.now());
      }
      st.busy = false;
      ++st.next;
      s.check |= stream_bit(s, t.group);  // its next collective
      finish(rank, i);
    }
  }

  void finish(int rank, TaskIndex i) {
    retire(rank, i);
    advance(rank);
  }

  /// Task `i` of `rank` finished now: its counters and dependents, no advance.
  void retire(int rank, TaskIndex i) {
    RankState& s = ranks_[static_cast<std::size_t>(rank)];
    if (!s.layout->syncs.empty() && task(rank, i).kind == TaskKind::Compute) host_task_done(rank, i);
    --s.remaining;
    auto& rr = result_.ranks[static_cast<std::size_t>(rank)];
    rr.finish = std::max(rr.finish, loop_.now());
    const auto ii = static_cast<std::size_t>(i);
    const ProgramLayout& lay = *s.layout;
    for (auto j = lay.dependents_begin[ii]; j < lay.dependents_begin[ii + 1]; ++j) {
      const TaskIndex d = lay.dependents[j];
      if (--s.pending[static_cast<std::size_t>(d)] == 0) {
        const Task& t = task(rank, d);
        if (t.kind != TaskKind::Compute) s.check |= stream_bit(s, t.group);
      }
    }
  }

  /// The check bit of the stream running program slot `slot`.
  static std::uint64_t stream_bit(const RankState& s, std::int32_t slot) {
    const std::size_t k = s.stream_of_slot[static_cast<std::size_t>(slot)];
    return k < 64 ? std::uint64_t{1} << k : 0;
  }

  const TaskGraph& g_;
  EventLoop& loop_;
  Network& net_;
  ExecutionObserver* obs_;
  ExecutionOptions opts_;
  bool calibrated_;          // apply opts_.calibration (not line rate, not an instantaneous network)
  bool fused_reductions_;    // reductions are not charged
  double sm_share_;          // SM-sharing slowdown s (0: off, no tracking at all)
  std::vector<std::unique_ptr<const ProgramLayout>> layouts_;  // per program, built on first use
  std::vector<RankState> ranks_;
  // Collectives in flight: slots (stable addresses, reused) and the slot of
  // each collective id (lookup only, never iterated).
  std::deque<ActiveCollective> active_;
  std::vector<std::uint32_t> free_;
  std::unordered_map<CollectiveKey, std::uint32_t, CollectiveKeyHash> slot_of_;
  std::map<std::tuple<int, std::int32_t, std::int64_t, std::uint64_t>, std::unique_ptr<const Expansion>>
      expansions_;
  std::unordered_map<int, double> max_normal_by_size_;  // expected_max_normal(n), for the skew
  std::vector<int> node_group_sizes_;                   // node_group_size(group), 0 until counted
  std::unordered_map<std::int64_t, Time> reduction_memo_;
  ExecutionResult result_;
};

}  // namespace

Time scaled_duration(Time duration, double factor) {
  return factor == 1.0 ? duration : Time::from_ps_rounded(static_cast<double>(duration.ps()) * factor);
}

ExecutionResult execute(const TaskGraph& graph, EventLoop& loop, Network& net, ExecutionObserver* observer,
                        const ExecutionOptions& options) {
  graph.validate();
  if (observer != nullptr) observer->on_start(graph);
  Executor ex(graph, loop, net, observer, options);
  return ex.run();
}

ExecutionResult execute_on_free_network(const TaskGraph& graph, const ExecutionOptions& options) {
  graph.validate();
  // Ranks of different compute speed are told apart from the start.
  std::vector<std::int64_t> colour;
  for (double f : options.compute_scale) colour.push_back(static_cast<std::int64_t>(std::bit_cast<std::uint64_t>(f)));
  const parallelism::SymmetryQuotient q = parallelism::symmetry_quotient(graph, colour);
  ExecutionOptions quotient_options = options;
  if (!options.compute_scale.empty()) {
    quotient_options.compute_scale.assign(static_cast<std::size_t>(q.graph.num_ranks()), 1.0);
    for (std::size_t r = 0; r < q.class_of.size(); ++r) {
      quotient_options.compute_scale[static_cast<std::size_t>(q.class_of[r])] = options.compute_scale[r];
    }
  }
  DiscreteEventLoop loop;
  ZeroCostNetwork net(loop);
  Executor ex(q.graph, loop, net, nullptr, quotient_options);
  ExecutionResult merged = ex.run();
  ExecutionResult out;
  out.makespan = merged.makespan;
  out.ranks.reserve(q.class_of.size());
  for (int c : q.class_of) out.ranks.push_back(merged.ranks[static_cast<std::size_t>(c)]);
  for (const auto& rr : out.ranks) out.overlap_slowdown += rr.overlap_slowdown;
  return out;
}

IterationSummary summarize(const ExecutionResult& r) {
  IterationSummary s;
  s.iteration_time = r.makespan;
  double total_flops = 0.0;
  for (std::size_t i = 0; i < r.ranks.size(); ++i) {
    total_flops += r.ranks[i].flops.count();
    if (r.ranks[i].finish > r.ranks[static_cast<std::size_t>(s.critical_rank)].finish) {
      s.critical_rank = static_cast<int>(i);
    }
  }
  if (r.ranks.empty()) return s;
  const auto& crit = r.ranks[static_cast<std::size_t>(s.critical_rank)];
  s.overlap_slowdown = crit.overlap_slowdown;
  if (r.makespan > Time::zero()) {
    s.tflops_per_gpu = total_flops / static_cast<double>(r.ranks.size()) / r.makespan.seconds() * 1e-12;
  }
  return s;
}

}  // namespace tessera::engine
