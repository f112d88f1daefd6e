// The ns-3 backend: packets on an ns-3 InfiniBand or point-to-point fabric
// (ns3_modules). Compiled only in a build with ns-3 (TESSERA_HAVE_NS3).
#include "tessera/ns3_modules/ns3_backend.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "backends.hpp"

namespace tessera::study::detail {

static_assert(Ns3Settings::kPointToPointOverhead.count() == ns3_modules::Ns3Network::kPacketOverhead,
              "the reports' point-to-point overhead is the model's");

namespace {

/// The ns-3 backend's options from the scenario (`ns3:` and the execution).
ns3_modules::Ns3Options ns3_options(const Scenario& s, const engine::ExecutionOptions& options) {
  const Ns3Settings& set = s.ns3;
  ns3_modules::Ns3Options ns3;
  ns3.execution = options;
  ns3.model = set.model == Ns3Settings::Model::InfiniBand ? ns3_modules::Ns3Model::InfiniBand
                                                          : ns3_modules::Ns3Model::PointToPoint;
  ns3.mtu = set.mtu;
  ns3.header_bytes = set.header_bytes;
  ns3.cut_through = set.cut_through;
  ns3.packets_per_segment = set.packets_per_segment;
  ns3.num_vls = set.num_vls;
  ns3.adaptive_routing = set.adaptive_routing;
  ns3.buffer_bytes = set.buffer;
  ns3.scale_up = set.scale_up == Ns3Settings::ScaleUp::Flow ? ns3_modules::ScaleUpModel::Flow
                                                            : ns3_modules::ScaleUpModel::Packets;
  return ns3;
}

/// The most packet-hops (segment-hops: a coarsened segment is one) one ns-3
/// run may be estimated at: about 17 minutes at the 1 M packet-hops per CPU
/// second measured (docs/benchmarks.md), the flow backend's limit in time
/// (kMaxSimulatedEvents).
constexpr double kMaxPacketHops = 1e9;

/// Refuses, before any packet moves, a run whose packets would take longer
/// than kMaxPacketHops allows: the flow backend's run of the same graph
/// (about a hundred times faster) gives the bytes each link carries, and
/// each link's bytes over the segment size are its packet-hops (a lower
/// bound: a message shorter than a segment is one packet). NVLink links
/// carry flows, not packets, under `ns3.scale_up: flow`. (ns3.mtu=1B ran
/// for hours with no word.)
void check_packet_work(const parallelism::TaskGraph& graph, const topology::Topology& topo, const Scenario& s,
                       const engine::ExecutionOptions& options) {
  const Ns3Settings& set = s.ns3;
  const double segment = static_cast<double>(set.mtu.count()) *
                         (set.model == Ns3Settings::Model::InfiniBand ? set.packets_per_segment : 1);
  const BackendRun flow = make_flow_backend()->run(graph, topo, s, options, nullptr);
  double hops = 0;
  double bytes = 0;
  for (std::size_t l = 0; l < flow.link_bytes.size(); ++l) {
    if (set.scale_up == Ns3Settings::ScaleUp::Flow &&
        topo.tier(static_cast<topology::LinkId>(l)) == topology::LinkTier::NvLink)
      continue;
    bytes += flow.link_bytes[l];
    hops += std::ceil(flow.link_bytes[l] / segment);
  }
  if (hops <= kMaxPacketHops) return;
  const bool ib = set.model == Ns3Settings::Model::InfiniBand;
  throw ScenarioError(fmt::format(
      "{}: {}: one iteration would be about {:.2g} packet-hops ({:.3g} B over the packet fabric's links in "
      "segments of {:.0f} B), more than the {:.0e} that can be simulated (about 17 minutes at 1 M "
      "packet-hops "
      "per second; docs/scenarios.md, limits): {}, or use backend flow",
      s.file, ib ? "ns3.packets_per_segment" : "ns3.mtu", hops, bytes, segment, kMaxPacketHops,
      ib ? "coarsen the segments (a larger ns3.packets_per_segment)" : "a larger ns3.mtu"));
}

class Ns3Backend final : public NetworkBackend {
 public:
  [[nodiscard]] std::string_view name() const override { return "ns3"; }
  /// One ns-3 Simulator per process.
  [[nodiscard]] bool concurrent_runs() const override { return false; }
  /// A cable failing during the run is not supported (the forwarding tables
  /// do not change during a run); one slowing down is (failures.degraded
  /// with `at:`).
  void check(const Scenario& s) const override {
    for (const auto& t : s.failures.timed) {
      if (!t.fail) continue;
      // A cable the fabric does not have is said first, as the flow backend
      // says it (helper 106: dropping `at:` as told led to that error next).
      (void)build_topology(s);
      throw failure_error(s, "links", t.a, t.b,
                          "`at:` after 0 (a failure during the run) is not supported by the ns3 backend; use "
                          "backend flow, or drop `at:` (or give `at: 0`) to fail it from the start");
    }
  }
  [[nodiscard]] BackendRun run(const parallelism::TaskGraph& graph, const topology::Topology& topo,
                               const Scenario& s, const engine::ExecutionOptions& options,
                               engine::ExecutionObserver* observer) const override {
    return run_classified(graph, topo, s, options, observer, {});
  }
  /// Payload bytes per link by source class from the InfiniBand model's link
  /// counters (LinkReport::payload_by_class), with the per-link payload
  /// totals in link_bytes. The PointToPoint model has no per-link report:
  /// both stay empty there.
  [[nodiscard]] BackendRun run_classified(const parallelism::TaskGraph& graph, const topology::Topology& topo,
                                          const Scenario& s, const engine::ExecutionOptions& options,
                                          engine::ExecutionObserver* observer,
                                          std::vector<std::int32_t> source_classes) const override {
    check_packet_work(graph, topo, s, options);
    const bool classified = !source_classes.empty();
    ns3_modules::Ns3Options ns3 = ns3_options(s, options);
    ns3.source_classes = std::move(source_classes);
    // `failures.degraded` entries with `at:` slow their cable during the run.
    for (const TimedCableChange& c : timed_cable_changes(s, topo)) ns3.rate_changes.push_back({c.at, c.a, c.b, c.factor});
    ns3_modules::Ns3Report report;
    BackendRun out;
    out.result = ns3_modules::run_on_ns3(graph, topo, ns3, observer, &report);
    if (classified && !report.links.empty()) {
      std::size_t classes = 0;
      for (const ns3_modules::LinkReport& r : report.links) classes = std::max(classes, r.payload_by_class.size());
      out.link_bytes.assign(topo.links().size(), 0.0);
      out.link_bytes_by_class.assign(classes, std::vector<double>(topo.links().size(), 0.0));
      for (const ns3_modules::LinkReport& r : report.links) {
        const auto l = static_cast<std::size_t>(r.link);
        out.link_bytes[l] = r.payload_bytes.as_double();
        for (std::size_t c = 0; c < r.payload_by_class.size(); ++c) {
          out.link_bytes_by_class[c][l] = r.payload_by_class[c].as_double();
        }
      }
    }
    out.link_csv = ns3_modules::link_csv(report, topo);
    const ns3_modules::Ns3NetworkStats& n = report.network;
    PacketFabricStats f;
    f.settings = s.ns3;
    f.messages_sent = n.messages_sent;
    f.messages_delivered = n.messages_delivered;
    f.packets_injected = n.packets_injected;
    f.packets_delivered = n.packets_delivered;
    f.packet_hops = n.packet_hops;
    f.payload_injected = n.payload_injected;
    f.payload_delivered = n.payload_delivered;
    f.wire_bytes = n.wire_bytes;
    f.drops = n.drops;
    f.credit_stall = n.credit_stall;
    f.credit_violations = n.credit_violations;
    f.min_rx_buffer = n.min_rx_buffer;
    f.max_rx_buffer = n.max_rx_buffer;
    f.links_below_round_trip = n.links_below_round_trip;
    f.round_trip_bytes = n.round_trip_bytes;
    f.events = report.events;
    f.scale_up_messages = n.scale_up_messages;
    f.scale_up_payload = n.scale_up_payload;
    out.packet_fabric = f;
    return out;
  }
};

}  // namespace

std::unique_ptr<const NetworkBackend> make_ns3_backend() { return std::make_unique<const Ns3Backend>(); }

}  // namespace tessera::study::detail
