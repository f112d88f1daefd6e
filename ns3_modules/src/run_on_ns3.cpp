#include <fmt/format.h>

#include <cstdio>
#include <fstream>

#include "tessera/engine/network.hpp"
#include "tessera/error.hpp"
#include "tessera/ns3_modules/ns3_backend.hpp"

namespace tessera::ns3_modules {

engine::ExecutionResult run_on_ns3(const parallelism::TaskGraph& graph, const topology::Topology& topo,
                                   const Ns3Options& options, engine::ExecutionObserver* observer,
                                   Ns3Report* report) {
  // The loop is declared first, so it is destroyed last: the network lets go
  // of its ns-3 objects, then Simulator::Destroy() runs.
  Ns3EventLoop loop;
  // A long collective ends no task for minutes: the observer (a progress
  // bar) hears the simulated clock move meanwhile.
  if (observer != nullptr) loop.set_heartbeat([observer](Time now) { observer->on_heartbeat(now); });
  Ns3Network net(topo, loop, options);
  engine::ExecutionResult result;
  try {
    result = engine::execute(graph, loop, net, observer, options.execution);
  } catch (const SimulationError&) {
    // Ranks that never finished because the fabric stopped delivering (a
    // credit deadlock) are the fabric's error, said as such.
    net.verify();
    throw;
  }
  net.verify();
  if (report != nullptr) {
    *report = net.report();
    report->sample_interval = options.link_sample_interval;
    // The iteration's span, not the last event's time: a cable's rate
    // change timed after the iteration still runs on ns-3's clock and
    // diluted every link's utilization (helper 59: 56x at 2 s).
    report->end_time = result.makespan;
  }
  return result;
}

std::string link_csv(const Ns3Report& report, const topology::Topology& topo) {
  // Segments: what ns-3 moves, one per packets_per_segment MTU packets (a
  // packet at 1); named packets, the columns read 32x low at the default
  // coarsening (helper 149).
  std::string out = fmt::format("{},segments,wire_bytes,credit_stall_us,max_queue_bytes,max_queue_segments\n",
                                engine::kLinkCsvSharedColumns);
  const double span = report.end_time.seconds();
  for (const LinkReport& r : report.links) {
    if (r.packets == 0 && r.payload_bytes.count() == 0) continue;  // (NVLink flows carry no packets)
    const auto& l = topo.link(r.link);
    out += fmt::format("{},{},{},{},{},{},{:.3f},{:.6f},{},{},{:.3f},{},{}\n", r.link, topo.vertex(l.src).name,
                       topo.vertex(l.dst).name, topology::to_string(topo.tier(r.link)), l.bandwidth.bps(),
                       r.payload_bytes.count(), r.busy.us(), span > 0 ? r.busy.seconds() / span : 0.0, r.packets,
                       r.wire_bytes.count(), r.credit_stall.us(), r.max_queue.count(), r.max_queue_packets);
  }
  return out;
}

std::string link_timeseries_csv(const Ns3Report& report, const topology::Topology& topo) {
  std::string out = "link,t_us,wire_bytes,utilization\n";
  if (report.sample_interval <= Time::zero()) return out;
  const double bin = report.sample_interval.seconds();
  for (const LinkReport& r : report.links) {
    const double capacity = topo.link(r.link).bandwidth.bytes_per_second() * bin;
    for (std::size_t i = 0; i < r.bytes_per_sample.size(); ++i) {
      const Bytes b = r.bytes_per_sample[i];
      if (b.count() == 0) continue;
      out += fmt::format("{},{:.3f},{},{:.6f}\n", r.link, (report.sample_interval * static_cast<std::int64_t>(i)).us(),
                         b.count(), b.as_double() / capacity);
    }
  }
  return out;
}

namespace {
void write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw InputError(fmt::format("cannot write {}", path));
    f << text;
    if (!f.flush()) throw InputError(fmt::format("cannot write {}", path));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw InputError(fmt::format("cannot write {}", path));
  }
}
}  // namespace

void write_link_csv(const Ns3Report& report, const topology::Topology& topo, const std::string& path,
                    const std::string& timeseries_path) {
  write_atomically(path, link_csv(report, topo));
  if (!timeseries_path.empty() && report.sample_interval > Time::zero()) {
    write_atomically(timeseries_path, link_timeseries_csv(report, topo));
  }
}

}  // namespace tessera::ns3_modules
