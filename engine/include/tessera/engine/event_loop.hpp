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
  // Events for a later time are kept in runs: a run is events for one time
  // scheduled with no other later event in between (a tie among many ranks
  // doing the same thing: most events of a large symmetric plan). The heap
  // orders runs by (time, sequence number of the run's first event); no
  // event for the same time falls between two of a run's, so draining runs
  // in that order runs every event in (time, sequence) order, exactly as one
  // heap of single events would, with one heap operation per run.
  struct Run {
    Time at;
    std::uint64_t seq;    ///< of the run's first event
    std::uint32_t index;  ///< into runs_
  };
  struct Later {
    bool operator()(const Run& a, const Run& b) const { return a.at != b.at ? a.at > b.at : a.seq > b.seq; }
  };
  static constexpr std::uint32_t kNone = 0xffffffffU;
  std::vector<Run> heap_;
  std::vector<std::vector<std::uint32_t>> runs_;  ///< callback slots of each run, in order
  std::vector<std::uint32_t> free_runs_;
  std::uint32_t open_run_ = kNone;  ///< the run of the last event scheduled for a later time
  Time open_at_;
  std::uint32_t draining_ = kNone;  ///< the run whose events are running (at now_)
  std::size_t drain_pos_ = 0;
  std::vector<std::uint32_t> now_queue_;  // zero-delay events' slots, all at now_, in order
  std::size_t now_head_ = 0;              // first unprocessed entry of now_queue_
  std::vector<Callback> callbacks_;
  std::vector<std::uint32_t> free_slots_;
  Time now_;
  std::uint64_t next_seq_ = 0;
  std::uint64_t processed_ = 0;
};

}  // namespace tessera::engine
