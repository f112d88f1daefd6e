#include "tessera/engine/event_loop.hpp"

#include <algorithm>
#include <utility>

#include "tessera/error.hpp"

namespace tessera::engine {

void DiscreteEventLoop::schedule(Time delay, Callback fn) {
  if (delay < Time::zero()) throw SimulationError("event scheduled in the past");
  std::uint32_t slot = 0;
  if (free_slots_.empty()) {
    slot = static_cast<std::uint32_t>(callbacks_.size());
    callbacks_.push_back(std::move(fn));
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
    callbacks_[slot] = std::move(fn);
  }
  if (delay == Time::zero()) {
    now_queue_.push_back(Entry{now_, next_seq_++, slot});
    return;
  }
  heap_.push_back(Entry{now_ + delay, next_seq_++, slot});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
}

void DiscreteEventLoop::run() {
  for (;;) {
    Entry ev{};
    const bool queued = now_head_ < now_queue_.size();
    // Zero-delay entries are at now_, which no heap entry precedes; the heap
    // wins only an equal time with an older sequence number.
    if (queued && (heap_.empty() || Later{}(heap_.front(), now_queue_[now_head_]))) {
      ev = now_queue_[now_head_++];
      if (now_head_ == now_queue_.size()) {
        now_queue_.clear();
        now_head_ = 0;
      }
    } else if (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      ev = heap_.back();
      heap_.pop_back();
    } else {
      break;
    }
    now_ = ev.at;
    ++processed_;
    // Move the callback out first: it may schedule (and grow the slab).
    Callback fn = std::move(callbacks_[ev.slot]);
    callbacks_[ev.slot] = nullptr;
    free_slots_.push_back(ev.slot);
    fn();
  }
}

}  // namespace tessera::engine
