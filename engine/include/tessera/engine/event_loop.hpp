#pragma once
// The clock seam. The executor and the flow backend only ever see this
// interface; the flow backend brings DiscreteEventLoop, the ns-3 backend an
// adapter over ns3::Simulator, so either can own simulated time.
#include <cstdint>
#include <functional>
#include <queue>
#include <vector>

#include "tessera/units.hpp"

namespace tessera::engine {

using Callback = std::function<void()>;

class EventLoop {
 public:
  virtual ~EventLoop() = default;
  [[nodiscard]] virtual Time now() const = 0;
  /// Runs `fn` at now() + delay. Events at the same time run in the order
  /// they were scheduled (deterministic tie-breaking).
  virtual void schedule(Time delay, Callback fn) = 0;
  /// Runs events until none remain.
  virtual void run() = 0;
};

/// A plain discrete-event loop: a binary heap ordered by (time, sequence).
class DiscreteEventLoop final : public EventLoop {
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

}  // namespace tessera::engine
