#include <ns3/event-impl.h>
#include <ns3/nstime.h>
#include <ns3/object-factory.h>
#include <ns3/ptr.h>
#include <ns3/simulator.h>

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

void Ns3EventLoop::run() { ns3::Simulator::Run(); }

std::uint64_t Ns3EventLoop::events_processed() const { return ns3::Simulator::GetEventCount(); }

}  // namespace tessera::ns3_modules
