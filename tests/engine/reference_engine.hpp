#pragma once
// The original engine, kept verbatim as a reference: the event loop (a
// priority_queue of std::function), the flow backend (reference_flow_network.hpp)
// and the executor (std::map streams, an expansion per collective).
// tests/bench/flow_bench.cpp --reference runs it to check that the optimised
// engine gives the same schedule. Slow; for tests and benchmarks only.
#include <fmt/format.h>

#include <map>
#include <memory>
#include <queue>

#include "reference_flow_network.hpp"
#include "tessera/collectives/expand.hpp"
#include "tessera/engine/executor.hpp"

namespace tessera::test_support {

using engine::ExecutionObserver;
using engine::ExecutionOptions;
using engine::ExecutionResult;
using engine::Network;
using parallelism::Task;
using parallelism::TaskGraph;
using parallelism::TaskIndex;
using parallelism::TaskKind;

/// A plain discrete-event loop: a binary heap ordered by (time, sequence).
class ReferenceEventLoop final : public engine::EventLoop {
 public:
  [[nodiscard]] Time now() const override { return now_; }
  void schedule(Time delay, Callback fn) override;
  void run() override;
  [[nodiscard]] std::uint64_t events_processed() const { return processed_; }

 private:
  struct Event {
    Time at;
    std::uint64_t seq;
    Callback fn;
  };
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.at != b.at ? a.at > b.at : a.seq > b.seq;
    }
  };
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  Time now_;
  std::uint64_t next_seq_ = 0;
  std::uint64_t processed_ = 0;
};

inline void ReferenceEventLoop::schedule(Time delay, Callback fn) {
  if (delay < Time::zero()) throw SimulationError("event scheduled in the past");
  queue_.push(Event{now_ + delay, next_seq_++, std::move(fn)});
}

inline void ReferenceEventLoop::run() {
  while (!queue_.empty()) {
    Event ev = std::move(const_cast<Event&>(queue_.top()));  // NOLINT(cppcoreguidelines-pro-type-const-cast)
    queue_.pop();
    now_ = ev.at;
    ++processed_;
    ev.fn();
  }
}

namespace reference_detail {


struct Stream {
  std::vector<TaskIndex> order;  // tasks of this stream in program order
  std::size_t next = 0;
  bool busy = false;
};

struct RankState {
  std::vector<int> pending;                     // unfinished deps per task
  std::vector<std::vector<TaskIndex>> dependents;
  std::vector<bool> done;
  std::size_t remaining = 0;
  Stream compute;
  std::map<std::int32_t, Stream> comm;          // one stream per global group
};

struct ActiveCollective {
  std::vector<int> arrived;  // member ranks that reached it
  collectives::TransferGraph transfers;
  std::vector<int> pending;  // unfinished deps per transfer
  std::vector<std::vector<collectives::TransferIndex>> dependents;
  std::size_t delivered = 0;
  Time start;
};

class ReferenceExecutor {
 public:
  using Key = std::pair<std::int32_t, std::int64_t>;  // (global group, collective id)

  ReferenceExecutor(const TaskGraph& g, EventLoop& loop, Network& net, ExecutionObserver* obs,
           const ExecutionOptions& opts)
      : g_(g), loop_(loop), net_(net), obs_(obs), opts_(opts), ranks_(static_cast<std::size_t>(g.num_ranks())),
        result_() {
    result_.ranks.resize(ranks_.size());
    for (std::size_t r = 0; r < ranks_.size(); ++r) {
      const auto& tasks = g.tasks(static_cast<int>(r));
      RankState& s = ranks_[r];
      s.pending.resize(tasks.size());
      s.dependents.resize(tasks.size());
      s.done.assign(tasks.size(), false);
      s.remaining = tasks.size();
      for (std::size_t i = 0; i < tasks.size(); ++i) {
        const Task& t = tasks[i];
        s.pending[i] = static_cast<int>(t.deps.size());
        for (TaskIndex d : t.deps) s.dependents[static_cast<std::size_t>(d)].push_back(static_cast<TaskIndex>(i));
        if (t.kind == TaskKind::Compute) {
          s.compute.order.push_back(static_cast<TaskIndex>(i));
        } else {
          s.comm[g.group_of(static_cast<int>(r), t.group)].order.push_back(static_cast<TaskIndex>(i));
        }
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
    for (const auto& rr : result_.ranks) result_.makespan = std::max(result_.makespan, rr.finish);
    return result_;
  }

 private:
  const Task& task(int rank, TaskIndex i) const {
    return g_.tasks(rank)[static_cast<std::size_t>(i)];
  }

  void advance(int rank) {
    RankState& s = ranks_[static_cast<std::size_t>(rank)];
    Stream& c = s.compute;
    if (!c.busy && c.next < c.order.size() && s.pending[static_cast<std::size_t>(c.order[c.next])] == 0) {
      const TaskIndex i = c.order[c.next];
      c.busy = true;
      const Task& t = task(rank, i);
      const Time start = loop_.now();
      loop_.schedule(t.duration, [this, rank, i, start] {
        const Task& tk = task(rank, i);
        auto& rr = result_.ranks[static_cast<std::size_t>(rank)];
        rr.compute_busy += tk.duration;
        rr.flops += tk.flops;
        if (obs_ != nullptr) obs_->on_compute(rank, tk, start, loop_.now());
        Stream& cs = ranks_[static_cast<std::size_t>(rank)].compute;
        cs.busy = false;
        ++cs.next;
        finish(rank, i);
      });
    }
    for (auto& [group, st] : s.comm) {
      if (st.busy || st.next >= st.order.size()) continue;
      const TaskIndex i = st.order[st.next];
      if (s.pending[static_cast<std::size_t>(i)] != 0) continue;
      st.busy = true;
      arrive(rank, group, i);
    }
  }

  void arrive(int rank, std::int32_t group, TaskIndex i) {
    const Task& t = task(rank, i);
    ActiveCollective& ac = active_[Key{group, t.collective_id}];
    ac.arrived.push_back(rank);
    const auto& members = g_.groups[static_cast<std::size_t>(group)].ranks;
    if (ac.arrived.size() < members.size()) return;
    launch(t, group);
  }

  void launch(const Task& t, std::int32_t group) {
    const Key id{group, t.collective_id};
    ActiveCollective& ac = active_[id];
    const auto& members = g_.groups[static_cast<std::size_t>(group)].ranks;
    ac.start = loop_.now();
    ac.transfers = collectives::expand(t.collective, members, t.bytes, opts_.collectives);
    const auto n = ac.transfers.transfers.size();
    if (n == 0) {
      loop_.schedule(Time::zero(), [this, id] { complete(id); });
      return;
    }
    ac.pending.resize(n);
    ac.dependents.resize(n);
    for (std::size_t k = 0; k < n; ++k) {
      const auto& tr = ac.transfers.transfers[k];
      ac.pending[k] = static_cast<int>(tr.deps.size());
      for (auto d : tr.deps) ac.dependents[static_cast<std::size_t>(d)].push_back(static_cast<collectives::TransferIndex>(k));
    }
    for (std::size_t k = 0; k < n; ++k) {
      if (ac.pending[k] == 0) start_transfer(id, static_cast<collectives::TransferIndex>(k));
    }
  }

  void start_transfer(Key id, collectives::TransferIndex k) {
    const auto& tr = active_[id].transfers.transfers[static_cast<std::size_t>(k)];
    const Time start = loop_.now();
    ++result_.transfers;
    result_.bytes_sent += tr.bytes;
    net_.send(Message{tr.src, tr.dst, tr.bytes}, [this, id, k, start] {
      ActiveCollective& ac = active_[id];
      if (obs_ != nullptr) obs_->on_transfer(ac.transfers.transfers[static_cast<std::size_t>(k)], start, loop_.now());
      ++ac.delivered;
      for (auto d : ac.dependents[static_cast<std::size_t>(k)]) {
        if (--ac.pending[static_cast<std::size_t>(d)] == 0) start_transfer(id, d);
      }
      if (ac.delivered == ac.transfers.transfers.size()) complete(id);
    });
  }

  void complete(Key id) {
    auto node = active_.extract(id);
    ActiveCollective& ac = node.mapped();
    bool observed = false;
    for (int rank : ac.arrived) {
      RankState& s = ranks_[static_cast<std::size_t>(rank)];
      // Find this rank's task for the collective: the head of the group's stream.
      for (auto& [group, st] : s.comm) {
        if (!st.busy || group != id.first) continue;
        const TaskIndex i = st.order[st.next];
        const Task& t = task(rank, i);
        if (t.collective_id != id.second) continue;
        if (obs_ != nullptr && !observed) {
          obs_->on_collective(t, group, g_.groups[static_cast<std::size_t>(group)].ranks, ac.start,
                              loop_.now());
          observed = true;
        }
        st.busy = false;
        ++st.next;
        finish(rank, i);
        break;
      }
    }
  }

  void finish(int rank, TaskIndex i) {
    RankState& s = ranks_[static_cast<std::size_t>(rank)];
    s.done[static_cast<std::size_t>(i)] = true;
    --s.remaining;
    auto& rr = result_.ranks[static_cast<std::size_t>(rank)];
    rr.finish = std::max(rr.finish, loop_.now());
    for (TaskIndex d : s.dependents[static_cast<std::size_t>(i)]) --s.pending[static_cast<std::size_t>(d)];
    advance(rank);
  }

  const TaskGraph& g_;
  EventLoop& loop_;
  Network& net_;
  ExecutionObserver* obs_;
  ExecutionOptions opts_;
  std::vector<RankState> ranks_;
  std::map<Key, ActiveCollective> active_;  // by (global group, collective id)
  ExecutionResult result_;
};

}  // namespace reference_detail

inline ExecutionResult reference_execute(const TaskGraph& graph, engine::EventLoop& loop, Network& net,
                                         ExecutionObserver* observer = nullptr,
                                         const ExecutionOptions& options = {}) {
  graph.validate();
  reference_detail::ReferenceExecutor ex(graph, loop, net, observer, options);
  return ex.run();
}

}  // namespace tessera::test_support
