#pragma once
// The clock seam. The executor and the flow backend only ever see this
// interface; the flow backend brings DiscreteEventLoop, the ns-3 backend an
// adapter over ns3::Simulator, so either can own simulated time.
#include <cstdint>
#include <functional>
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
/// The heap holds small plain entries; callbacks wait in a slab of reused
/// slots, so sifting never moves a std::function. Zero-delay events (the
/// most common kind) skip the heap: they queue in a FIFO that is merged with
/// the heap by (time, sequence), which is the same order.
class DiscreteEventLoop final : public EventLoop {
 public:
  [[nodiscard]] Time now() const override { return now_; }
  void schedule(Time delay, Callback fn) override;
  void run() override;
  [[nodiscard]] std::uint64_t events_processed() const { return processed_; }

 private:
  struct Entry {
    Time at;
    std::uint64_t seq;
    std::uint32_t slot;  ///< index into callbacks_
  };
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.at != b.at ? a.at > b.at : a.seq > b.seq;
    }
  };
  std::vector<Entry> heap_;
  std::vector<Entry> now_queue_;  // zero-delay events, all at now_, ascending seq
  std::size_t now_head_ = 0;      // first unprocessed entry of now_queue_
  std::vector<Callback> callbacks_;
  std::vector<std::uint32_t> free_slots_;
  Time now_;
  std::uint64_t next_seq_ = 0;
  std::uint64_t processed_ = 0;
};

}  // namespace tessera::engine
