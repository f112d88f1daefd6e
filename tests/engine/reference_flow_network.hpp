#pragma once
// The original flow backend (global progressive filling over std::map,
// completion by scanning every flow), kept verbatim as a reference: the
// property tests and tests/bench/flow_bench.cpp check the incremental
// FlowNetwork against it. Slow; for tests only.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <vector>

#include "tessera/engine/network.hpp"
#include "tessera/error.hpp"
#include "tessera/topology/topology.hpp"

namespace tessera::test_support {

using engine::Callback;
using engine::EventLoop;
using engine::Message;

class ReferenceFlowNetwork final : public engine::Network {
 public:
  ReferenceFlowNetwork(const topology::Topology& topo, EventLoop& loop);
  void send(const Message& msg, Callback on_delivered) override;
  [[nodiscard]] Time latency(int src, int dst) override { return topo_.latency(route(src, dst)); }

  /// Current rate of every active flow, in bytes per second (for tests).
  [[nodiscard]] std::vector<double> active_rates() const;
  /// Bytes that crossed each directed link so far (index = LinkId).
  [[nodiscard]] const std::vector<double>& link_bytes() const { return link_bytes_; }
  [[nodiscard]] std::uint64_t flows_completed() const { return completed_; }

 private:
  struct Flow {
    const topology::Path* path;
    double remaining;       ///< bytes
    double rate = 0.0;      ///< bytes per picosecond
    Time latency;
    Callback on_delivered;
  };
  const topology::Path& route(int src, int dst);
  void advance();
  void recompute_rates();
  void schedule_next_completion();
  void on_completion_event(std::uint64_t generation);

  const topology::Topology& topo_;
  EventLoop& loop_;
  std::map<std::pair<int, int>, topology::Path> routes_;
  std::map<std::uint64_t, Flow> flows_;  // ordered by start: deterministic
  std::uint64_t next_flow_ = 0;
  std::uint64_t generation_ = 0;
  std::uint64_t completed_ = 0;
  Time last_update_;
  std::vector<double> link_bytes_;
};

inline ReferenceFlowNetwork::ReferenceFlowNetwork(const topology::Topology& topo, EventLoop& loop)
    : topo_(topo), loop_(loop), link_bytes_(topo.links().size(), 0.0) {}

inline const topology::Path& ReferenceFlowNetwork::route(int src, int dst) {
  auto key = std::make_pair(src, dst);
  auto it = routes_.find(key);
  if (it == routes_.end()) it = routes_.emplace(key, topo_.route(src, dst)).first;
  return it->second;
}

inline void ReferenceFlowNetwork::send(const Message& msg, Callback on_delivered) {
  if (msg.bytes.count() < 0) throw SimulationError("flow network: negative message size");
  const topology::Path& path = route(msg.src, msg.dst);
  const Time latency = topo_.latency(path) + msg.delay_after;
  if (path.empty() || msg.bytes.count() == 0) {
    loop_.schedule(latency, std::move(on_delivered));
    return;
  }
  advance();
  flows_.emplace(next_flow_++, Flow{&path, msg.bytes.as_double(), 0.0, latency, std::move(on_delivered)});
  recompute_rates();
  schedule_next_completion();
}

inline void ReferenceFlowNetwork::advance() {
  const Time now = loop_.now();
  const auto dt = static_cast<double>((now - last_update_).ps());
  if (dt > 0) {
    for (auto& [id, f] : flows_) {
      const double moved = std::min(f.remaining, f.rate * dt);
      f.remaining -= moved;
      for (topology::LinkId l : *f.path) link_bytes_[static_cast<std::size_t>(l)] += moved;
    }
  }
  last_update_ = now;
}

inline void ReferenceFlowNetwork::recompute_rates() {
  // Progressive filling: repeatedly find the link whose remaining capacity,
  // split equally among its unfrozen flows, is smallest; freeze those flows
  // at that share.
  struct LinkState {
    double capacity;  // bytes per ps left
    std::vector<std::uint64_t> flows;
    int unfrozen = 0;
  };
  std::map<topology::LinkId, LinkState> links;
  for (auto& [id, f] : flows_) {
    f.rate = -1.0;
    for (topology::LinkId l : *f.path) {
      auto [it, inserted] = links.try_emplace(l);
      if (inserted) it->second.capacity = topo_.link(l).bandwidth.bytes_per_second() * 1e-12;
      it->second.flows.push_back(id);
      ++it->second.unfrozen;
    }
  }
  std::size_t frozen = 0;
  while (frozen < flows_.size()) {
    double best = std::numeric_limits<double>::infinity();
    topology::LinkId best_link = -1;
    for (const auto& [l, s] : links) {
      if (s.unfrozen == 0) continue;
      const double share = s.capacity / s.unfrozen;
      if (share < best) {
        best = share;
        best_link = l;
      }
    }
    if (best_link < 0) break;
    for (std::uint64_t id : links[best_link].flows) {
      Flow& f = flows_.at(id);
      if (f.rate >= 0) continue;
      f.rate = best;
      ++frozen;
      for (topology::LinkId l : *f.path) {
        LinkState& s = links[l];
        s.capacity = std::max(0.0, s.capacity - best);
        --s.unfrozen;
      }
    }
  }
}

inline void ReferenceFlowNetwork::schedule_next_completion() {
  double soonest = std::numeric_limits<double>::infinity();
  for (const auto& [id, f] : flows_) {
    if (f.rate > 0) soonest = std::min(soonest, f.remaining / f.rate);
  }
  if (!std::isfinite(soonest)) return;
  const std::uint64_t gen = ++generation_;
  const auto delay = Time::from_ps(static_cast<std::int64_t>(std::ceil(std::max(0.0, soonest) - 1e-9)));
  loop_.schedule(delay, [this, gen] { on_completion_event(gen); });
}

inline void ReferenceFlowNetwork::on_completion_event(std::uint64_t generation) {
  if (generation != generation_) return;  // superseded by a later rate change
  advance();
  std::vector<std::uint64_t> done;
  for (const auto& [id, f] : flows_) {
    // Finished, or would finish within the next picosecond (rounding).
    if (f.remaining <= f.rate * 1.0 + 1e-9) done.push_back(id);
  }
  for (std::uint64_t id : done) {
    auto node = flows_.extract(id);
    Flow& f = node.mapped();
    for (topology::LinkId l : *f.path) link_bytes_[static_cast<std::size_t>(l)] += f.remaining;
    ++completed_;
    loop_.schedule(f.latency, std::move(f.on_delivered));
  }
  recompute_rates();
  schedule_next_completion();
}

inline std::vector<double> ReferenceFlowNetwork::active_rates() const {
  std::vector<double> out;
  for (const auto& [id, f] : flows_) out.push_back(f.rate * 1e12);
  return out;
}


}  // namespace tessera::test_support
