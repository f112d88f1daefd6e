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
  const std::uint64_t seq = next_seq_++;
  if (delay == Time::zero()) {
    // At now_: no later run can tie with it, so the open run stays open.
    now_queue_.push_back(slot);
    return;
  }
  const Time at = now_ + delay;
  if (open_run_ != kNone && open_at_ == at) {
    runs_[open_run_].push_back(slot);  // the previous event's run: consecutive sequence numbers
    return;
  }
  std::uint32_t index = 0;
  if (free_runs_.empty()) {
    index = static_cast<std::uint32_t>(runs_.size());
    runs_.emplace_back();
  } else {
    index = free_runs_.back();
    free_runs_.pop_back();
  }
  runs_[index].push_back(slot);
  heap_.push_back(Run{at, seq, index});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
  open_run_ = index;
  open_at_ = at;
}

void DiscreteEventLoop::run() {
  for (;;) {
    std::uint32_t slot = 0;
    // At now_: the run being drained, then the other runs for now_ (all
    // scheduled earlier, so older than any zero-delay event), then the
    // zero-delay events; then the next run, which moves the clock.
    if (draining_ != kNone && drain_pos_ == runs_[draining_].size()) {
      runs_[draining_].clear();
      free_runs_.push_back(draining_);
      draining_ = kNone;
    }
    if (draining_ == kNone && !heap_.empty() &&
        (heap_.front().at == now_ || now_head_ == now_queue_.size())) {
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      draining_ = heap_.back().index;
      now_ = heap_.back().at;
      heap_.pop_back();
      drain_pos_ = 0;
      if (open_run_ == draining_) open_run_ = kNone;  // no later event joins a run in progress
    }
    if (draining_ != kNone) {
      slot = runs_[draining_][drain_pos_++];
    } else if (now_head_ < now_queue_.size()) {
      slot = now_queue_[now_head_++];
      if (now_head_ == now_queue_.size()) {
        now_queue_.clear();
        now_head_ = 0;
      }
    } else {
      break;
    }
    ++processed_;
    // Move the callback out first: it may schedule (and grow the slab).
    Callback fn = std::move(callbacks_[slot]);
    callbacks_[slot] = nullptr;
    free_slots_.push_back(slot);
    fn();
  }
}

}  // namespace tessera::engine
