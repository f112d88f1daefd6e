#pragma once
// Flow-level backend: every message is a fluid flow along its routed path.
// Active flows share link bandwidth max-min fairly (progressive filling),
// rates are recomputed whenever a flow starts or finishes, and a message is
// delivered one path latency (sum of link latencies) after its last byte
// left the bottleneck.
#include <cstdint>
#include <map>
#include <vector>

#include "tessera/engine/network.hpp"
#include "tessera/topology/topology.hpp"

namespace tessera::engine {

class FlowNetwork final : public Network {
 public:
  FlowNetwork(const topology::Topology& topo, EventLoop& loop);
  void send(const Message& msg, Callback on_delivered) override;

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

}  // namespace tessera::engine
