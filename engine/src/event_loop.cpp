#include "tessera/engine/event_loop.hpp"

#include <fmt/format.h>

#include "tessera/error.hpp"

namespace tessera::engine {

void DiscreteEventLoop::schedule(Time delay, Callback fn) {
  if (delay < Time::zero()) throw SimulationError("event scheduled in the past");
  queue_.push(Event{now_ + delay, next_seq_++, std::move(fn)});
}

void DiscreteEventLoop::run() {
  while (!queue_.empty()) {
    // priority_queue::top is const; move the callback out before popping.
    Event ev = std::move(const_cast<Event&>(queue_.top()));  // NOLINT(cppcoreguidelines-pro-type-const-cast)
    queue_.pop();
    now_ = ev.at;
    ++processed_;
    ev.fn();
  }
}

}  // namespace tessera::engine
