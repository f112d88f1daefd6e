#include <ns3/callback.h>
#include <ns3/event-impl.h>
#include <ns3/nstime.h>
#include <ns3/object-factory.h>
#include <ns3/priority-queue-scheduler.h>
#include <ns3/ptr.h>
#include <ns3/simulator.h>
#include <ns3/uinteger.h>

#include <atomic>

#include "tessera/error.hpp"
#include "tessera/ns3_modules/ns3_backend.hpp"

namespace tessera::ns3_modules {

namespace {

/// An ns-3 event that owns a Tessera callback (moved in, never copied).
class CallbackEvent final : public ns3::EventImpl {
 public:
  explicit CallbackEvent(engine::Callback fn) : m_fn(std::move(fn)) {}

 private:
  void Notify() override { m_fn(); }
  engine::Callback m_fn;
};

/// ns-3's PriorityQueueScheduler (the fastest here), which also calls a
/// heartbeat every "Interval" events it hands to the simulator: a sign of
/// life that adds no event, so it changes neither the order of events nor
/// their count, and stops with them.
class HeartbeatScheduler final : public ns3::PriorityQueueScheduler {
 public:
  static ns3::TypeId GetTypeId() {
    static ns3::TypeId tid =
        ns3::TypeId("tessera::HeartbeatScheduler")
            .SetParent<ns3::PriorityQueueScheduler>()
            .SetGroupName("Tessera")
            .AddConstructor<HeartbeatScheduler>()
            .AddAttribute("Heartbeat", "Called every Interval events removed from the queue.",
                          ns3::CallbackValue(), ns3::MakeCallbackAccessor(&HeartbeatScheduler::m_heartbeat),
                          ns3::MakeCallbackChecker())
            .AddAttribute("Interval", "Events between two heartbeats.",
                          ns3::UintegerValue(Ns3EventLoop::kHeartbeatEvents),
                          ns3::MakeUintegerAccessor(&HeartbeatScheduler::m_interval),
                          ns3::MakeUintegerChecker<std::uint64_t>(1));
    return tid;
  }

  ns3::Scheduler::Event RemoveNext() override {
    ns3::Scheduler::Event ev = ns3::PriorityQueueScheduler::RemoveNext();
    if (++m_removed == m_interval) {
      m_removed = 0;
      if (!m_heartbeat.IsNull()) m_heartbeat();
    }
    return ev;
  }

 private:
  ns3::Callback<void> m_heartbeat;
  std::uint64_t m_interval = Ns3EventLoop::kHeartbeatEvents;
  std::uint64_t m_removed = 0;
};

// ns3::Simulator is a process-wide singleton: one loop at a time, also
// across threads (a command that runs scenarios on several threads runs
// ns-3's one at a time; this catches one that does not).
std::atomic<bool> g_loopAlive{false};

/// Picosecond resolution, set once per process before our first Time. ns-3
/// rescales the Times its libraries created at load; it can do so only once.
void EnsurePicosecondResolution() {
  static const bool once = [] {
    if (ns3::Time::GetResolution() != ns3::Time::PS) ns3::Time::SetResolution(ns3::Time::PS);
    return true;
  }();
  (void)once;
  if (ns3::Time::GetResolution() != ns3::Time::PS) {
    throw SimulationError("ns-3 backend: ns3::Time resolution is not picoseconds");
  }
}

}  // namespace

Ns3EventLoop::Ns3EventLoop() {
  if (g_loopAlive.exchange(true))
    throw SimulationError("ns-3 backend: only one Ns3EventLoop may exist at a time");
  try {
    EnsurePicosecondResolution();
    ns3::Simulator::Destroy();  // start from a fresh simulator (a no-op when there is none)
    ns3::ObjectFactory scheduler;
    scheduler.SetTypeId("ns3::PriorityQueueScheduler");
    ns3::Simulator::SetScheduler(scheduler);
  } catch (...) {
    g_loopAlive = false;
    throw;
  }
}

Ns3EventLoop::~Ns3EventLoop() {
  ns3::Simulator::Destroy();
  g_loopAlive = false;
}

Time Ns3EventLoop::now() const { return Time::from_ps(ns3::Simulator::Now().ToInteger(ns3::Time::PS)); }

void Ns3EventLoop::schedule(Time delay, engine::Callback fn) {
  if (delay < Time::zero()) throw SimulationError("ns-3 backend: event scheduled in the past");
  // The Ptr holds the only reference; Schedule adds the simulator's own.
  const ns3::Ptr<ns3::EventImpl> event(new CallbackEvent(std::move(fn)), false);
  ns3::Simulator::Schedule(ns3::PicoSeconds(delay.ps()), event);
}

void Ns3EventLoop::run() {
  // The heartbeat calls out while the run runs, not when Destroy() (or
  // SetScheduler) drains what an interrupted run left (helper 128).
  running_ = true;
  try {
    ns3::Simulator::Run();
  } catch (...) {
    running_ = false;
    throw;
  }
  running_ = false;
}

void Ns3EventLoop::set_heartbeat(std::function<void(Time)> fn, std::uint64_t every) {
  if (every == 0) throw InputError("ns-3 backend: a heartbeat every 0 events");
  ns3::ObjectFactory scheduler;
  if (fn) {
    scheduler.SetTypeId(HeartbeatScheduler::GetTypeId());
    scheduler.Set("Heartbeat", ns3::CallbackValue(ns3::Callback<void>([this, fn = std::move(fn)] {
                    if (running_) fn(now());
                  })));
    scheduler.Set("Interval", ns3::UintegerValue(every));
  } else {
    scheduler.SetTypeId("ns3::PriorityQueueScheduler");
  }
  // (moves any events already queued into the new scheduler, in order)
  ns3::Simulator::SetScheduler(scheduler);
}

std::uint64_t Ns3EventLoop::events_processed() const { return ns3::Simulator::GetEventCount(); }

}  // namespace tessera::ns3_modules
