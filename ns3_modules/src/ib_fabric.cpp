// The InfiniBand model behind Ns3Network: builds one ns3::Node per topology
// vertex with an IbHca (GPUs) or an IbSwitch (every switch; a shared HCA with its
// PCIe switch also forwards like a small switch) behind its ports,
// one IbChannel per duplex link, loads the linear forwarding tables, checks
// them, and turns engine messages into queue-pair sends and completions.
#include <fmt/format.h>
#include <ns3/boolean.h>
#include <ns3/node.h>
#include <ns3/uinteger.h>

#include <algorithm>
#include <boost/range/iterator_range.hpp>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <vector>

#include "fabric.hpp"
#include "ib_nodes.hpp"
#include "tessera/error.hpp"
#include "tessera/topology/routing.hpp"

namespace tessera::ns3_modules {

using topology::LinkId;
using topology::VertexId;
using topology::VertexKind;

namespace {

constexpr std::int16_t kHopsUnknown = -2;
constexpr std::int16_t kHopsVisiting = -1;
/// The highest unicast LID (0xBFFF); HCA `rank` has LID rank + 1.
constexpr int kMaxUnicastLid = 0xBFFF;

bool IsIbMtu(std::int64_t mtu) { return mtu == 256 || mtu == 512 || mtu == 1024 || mtu == 2048 || mtu == 4096; }

/// Whether `v` is a shared HCA with a PCIe link into GPU `rank`.
bool HcaServes(const topology::Topology& topo, VertexId v, std::size_t rank) {
  if (topo.vertex(v).kind != VertexKind::Hca) return false;
  for (auto [e, end] = boost::out_edges(v, topo.graph()); e != end; ++e) {
    const auto& np = topo.vertex(boost::target(*e, topo.graph()));
    if (np.kind == VertexKind::Gpu && static_cast<std::size_t>(np.index) == rank) return true;
  }
  return false;
}

class IbFabric final : public Ns3Network::Fabric {
 public:
  IbFabric(const topology::Topology& topo, Ns3EventLoop& loop, const Ns3Options& options);
  ~IbFabric() override;

  void Send(const engine::Message& msg, engine::Callback onDelivered) override;
  const Ns3NetworkStats& GetStats() const override;
  Ns3Report GetReport() const override;
  void Verify() const override;
  void SetLinkRate(LinkId link, Bandwidth rate) override {
    m_devices[static_cast<std::size_t>(link)]->SetAttribute(
        "DataRate", ns3::DataRateValue(ns3::DataRate(static_cast<std::uint64_t>(rate.bps()))));
  }

 private:
  struct InMessage {
    std::int64_t bytes;
    std::int64_t arrived = 0;
    engine::Callback onDelivered;
  };

  void CheckOptions(const Ns3Options& options) const;
  void CheckLinks() const;
  /// Hop counts from every table switch to every fabric-attached GPU by
  /// following the tables; throws InputError on a hole, a loop or a wrong turn.
  void CheckTables();
  std::vector<std::uint16_t> SwitchLft(VertexId v) const;
  std::vector<std::uint16_t> EcmpPorts(VertexId v, std::uint32_t dstRank) const;
  std::uint16_t FirstPort(int src, int dst);
  void OnDeliver(const IbPacketInfo& info);

  const topology::Topology& m_topo;
  Ns3EventLoop& m_loop;
  std::int64_t m_mtu;
  std::uint32_t m_headerBytes;
  std::uint8_t m_numVls;
  VlPolicy m_vlPolicy;
  std::uint32_t m_packetsPerSegment;
  std::int64_t m_segmentWireBytes;
  bool m_adaptive;
  int m_gpus;

  topology::ForwardingTables m_ownTables;
  const topology::ForwardingTables* m_tables;
  std::vector<std::int16_t> m_hops;  ///< [table switch x GPU], kept for adaptive routing

  std::vector<ns3::Ptr<ns3::Node>> m_nodes;            ///< index = VertexId
  std::vector<ns3::Ptr<IbHca>> m_hcas;                 ///< index = rank
  std::vector<ns3::Ptr<IbSwitch>> m_switches;
  std::vector<ns3::Ptr<IbNetDevice>> m_devices;        ///< index = LinkId it transmits on
  std::vector<ns3::Ptr<IbChannel>> m_channels;
  std::unordered_map<std::uint64_t, std::uint16_t> m_firstPort;  ///< (src, dst) -> port at src
  std::unordered_map<std::uint64_t, InMessage> m_messages;
  std::vector<std::int64_t>
      m_roundTripBytes;  ///< per LinkId: its credit round trip at line rate, in credit bytes
  std::vector<std::int32_t> m_sourceClasses;  ///< Ns3Options::source_classes (the devices point here)
  std::size_t m_numClasses = 0;               ///< highest class + 1
  std::uint64_t m_nextMessageId = 0;
  mutable Ns3NetworkStats m_stats;
};

IbFabric::IbFabric(const topology::Topology& topo, Ns3EventLoop& loop, const Ns3Options& options)
    : m_topo(topo),
      m_loop(loop),
      m_mtu(options.mtu.count()),
      m_headerBytes(static_cast<std::uint32_t>(std::clamp<std::int64_t>(options.header_bytes.count(), 0, 256))),
      m_numVls(static_cast<std::uint8_t>(std::clamp(options.num_vls, 1, 15))),
      m_vlPolicy(options.vl_policy),
      m_packetsPerSegment(static_cast<std::uint32_t>(std::clamp(options.packets_per_segment, 1, 4096))),
      m_segmentWireBytes(0),
      m_adaptive(options.adaptive_routing),
      m_gpus(topo.num_gpus()),
      m_tables(options.forwarding_tables),
      m_sourceClasses(options.source_classes) {
  // Everything is checked before a single ns-3 object exists.
  CheckOptions(options);
  m_segmentWireBytes = m_mtu * m_packetsPerSegment + std::int64_t{m_headerBytes} * m_packetsPerSegment;
  CheckLinks();
  if (m_tables == nullptr) {
    m_ownTables = topology::build_forwarding_tables(topo);
    m_tables = &m_ownTables;
  }
  CheckTables();

  const auto& links = topo.links();
  const std::size_t nv = topo.num_vertices();
  m_nodes.reserve(nv);
  for (std::size_t v = 0; v < nv; ++v) m_nodes.push_back(ns3::CreateObject<ns3::Node>());

  // One device per directed link, at its source vertex: it transmits on the
  // link and receives on its reverse (duplex ids 2k and 2k+1).
  std::vector<std::vector<ns3::Ptr<IbNetDevice>>> ports(nv);
  for (std::size_t v = 0; v < nv; ++v) ports[v].resize(boost::out_degree(v, topo.graph()));
  m_devices.resize(links.size());
  m_roundTripBytes.assign(links.size(), 0);
  for (std::size_t k = 0; k < links.size(); ++k) {
    const auto& l = links[k];
    auto device = ns3::CreateObject<IbNetDevice>();
    device->SetAttribute("DataRate", ns3::DataRateValue(ns3::DataRate(static_cast<std::uint64_t>(l.bandwidth.bps()))));
    device->SetAttribute("HeaderBytes", ns3::UintegerValue(m_headerBytes));
    device->SetAttribute("Mtu", ns3::UintegerValue(static_cast<std::uint64_t>(m_mtu)));
    device->SetAddress(ns3::Mac48Address::Allocate());
    device->SetSampleInterval(ns3::PicoSeconds(options.link_sample_interval.ps()));
    // The receive buffer (per VL) of this end of the cable. Auto: cover the
    // credit loop at line rate (data out + credits back = 2 x latency, plus
    // the packet in flight, the one being forwarded and one spare), counted
    // as credits count it: each MTU packet of a segment takes whole 64-byte
    // blocks (a 286-byte packet of a 256 B MTU takes 320; SegmentBlocksOf),
    // so the loop's bytes are scaled by
    // blocks per wire byte. Sized in wire bytes, a link with no other
    // traffic stalled for credits at small MTUs (256 B, one packet per
    // segment: 10.6% slow on a lone all-reduce).
    std::int64_t buffer = options.buffer_bytes.count();
    const auto segmentBlockBytes =
        static_cast<std::int64_t>(SegmentBlocksOf(static_cast<std::uint64_t>(m_segmentWireBytes),
                                                  static_cast<std::uint64_t>(m_mtu), m_headerBytes)) *
        kIbCreditBlockBytes;
    const double perWireByte =
        static_cast<double>(segmentBlockBytes) / static_cast<double>(m_segmentWireBytes);
    const double loopBytes = 2.0 * l.latency.seconds() * l.bandwidth.bytes_per_second() * perWireByte;
    // What auto sizes: the credit round trip of this link at line rate and
    // three segments. An explicit buffer below it throttles the link
    // whatever the load (reported in the stats): below the round trip by
    // the loop, below the segments by the segment-coarsened model (helper
    // 108: 130-260 KiB at 32 packets per segment slowed a lone collective
    // 2.4x, with no word).
    // (in whole credit blocks, as the buffer is sized: the warning's figure
    // is the auto buffer the report gives; helper 121)
    m_roundTripBytes[k] =
        (static_cast<std::int64_t>(std::ceil(loopBytes)) + 3 * segmentBlockBytes + kIbCreditBlockBytes - 1) /
        kIbCreditBlockBytes * kIbCreditBlockBytes;
    if (buffer == 0) buffer = m_roundTripBytes[k];
    buffer = (buffer + kIbCreditBlockBytes - 1) / kIbCreditBlockBytes * kIbCreditBlockBytes;
    if (buffer > std::numeric_limits<std::uint32_t>::max()) {
      throw InputError(fmt::format(
          "ns-3 backend: the receive buffer of link {} ({} -> {}) would be {} B, "
          "more than the credit counters' {} B ({})",
          k, topo.vertex(l.src).name, topo.vertex(l.dst).name, buffer,
          std::numeric_limits<std::uint32_t>::max(),
          options.buffer_bytes.count() > 0 ? "ns3.buffer"
                                           : "the automatic size from its latency and bandwidth"));
    }
    device->SetBufferBytes(static_cast<std::uint32_t>(buffer));
    const std::uint16_t port = static_cast<std::uint16_t>(topo.port_of(static_cast<LinkId>(k)) - 1);
    ports[l.src][port] = device;
    m_nodes[l.src]->AddDevice(device);
    m_devices[k] = device;
  }
  for (std::size_t k = 0; k < links.size(); k += 2) {
    auto channel = ns3::CreateObject<IbChannel>();
    channel->SetAttribute("Delay", ns3::TimeValue(ns3::PicoSeconds(links[k].latency.ps())));
    m_devices[k]->Attach(channel);
    m_devices[k + 1]->Attach(channel);
    m_devices[k]->SetPeerBufferBytes(m_devices[k + 1]->GetBufferBytes());
    m_devices[k + 1]->SetPeerBufferBytes(m_devices[k]->GetBufferBytes());
    m_channels.push_back(channel);
  }

  m_hcas.resize(static_cast<std::size_t>(m_gpus));
  for (std::size_t v = 0; v < nv; ++v) {
    const auto& props = topo.vertex(v);
    if (props.kind == VertexKind::Gpu) {
      auto hca = ns3::CreateObject<IbHca>();
      for (std::size_t p = 0; p < ports[v].size(); ++p) ports[v][p]->Setup(PeekPointer(hca), static_cast<std::uint16_t>(p), m_numVls);
      hca->Setup(ports[v], m_numVls, static_cast<std::uint32_t>(props.index), static_cast<std::uint32_t>(m_mtu),
                 m_headerBytes, m_packetsPerSegment);
      hca->SetDeliverCallback([this](const IbPacketInfo& info) { OnDeliver(info); });
      m_nodes[v]->AggregateObject(hca);
      m_hcas[static_cast<std::size_t>(props.index)] = hca;
    } else {
      auto sw = ns3::CreateObject<IbSwitch>();
      sw->SetAttribute("AdaptiveRouting", ns3::BooleanValue(m_adaptive));
      for (std::size_t p = 0; p < ports[v].size(); ++p) {
        ports[v][p]->Setup(PeekPointer(sw), static_cast<std::uint16_t>(p), m_numVls);
        ports[v][p]->SetAttribute("CutThrough", ns3::BooleanValue(options.cut_through));
      }
      sw->Setup(ports[v], m_numVls, SwitchLft(v));
      if (m_adaptive && m_tables->switch_index(v) >= 0) {
        sw->SetEcmpProvider([this, v](std::uint32_t dst) { return EcmpPorts(v, dst); });
      }
      m_nodes[v]->AggregateObject(sw);
      m_switches.push_back(sw);
    }
  }
  // Peer credits were set before Setup sized the per-VL arrays: set again.
  for (std::size_t k = 0; k < links.size(); ++k) {
    m_devices[k]->SetPeerBufferBytes(m_devices[k ^ 1]->GetBufferBytes());
  }
  if (!m_sourceClasses.empty()) {
    for (const std::int32_t c : m_sourceClasses) {
      m_numClasses = std::max(m_numClasses, static_cast<std::size_t>(std::max(c + 1, 0)));
    }
    for (auto& d : m_devices) d->SetSourceClasses(&m_sourceClasses, m_numClasses);
  }
  if (!m_adaptive) m_hops = {};
}

IbFabric::~IbFabric() {
  // Break the Ptr cycles (device <-> channel, owner <-> device) so ns-3 can
  // free everything before Simulator::Destroy.
  for (auto& d : m_devices) d->Dispose();
  for (auto& s : m_switches) s->Dispose();
  for (auto& h : m_hcas) {
    if (h) h->Dispose();
  }
}

void IbFabric::CheckOptions(const Ns3Options& o) const {
  if (!IsIbMtu(o.mtu.count())) {
    throw InputError(fmt::format("ns-3 backend: InfiniBand mtu must be 256, 512, 1024, 2048 or 4096 B (got {} B)",
                                 o.mtu.count()));
  }
  if (o.header_bytes.count() < 0 || o.header_bytes.count() > 256) {
    throw InputError(fmt::format("ns-3 backend: header_bytes must be in 0..256 B (got {} B)", o.header_bytes.count()));
  }
  if (o.num_vls < 1 || o.num_vls > 15) {
    throw InputError(fmt::format("ns-3 backend: num_vls must be in 1..15 (got {})", o.num_vls));
  }
  if (o.packets_per_segment < 1 || o.packets_per_segment > 4096) {
    throw InputError(fmt::format("ns-3 backend: packets_per_segment must be in 1..4096 (got {})", o.packets_per_segment));
  }
  // A segment's credits: each of its packets in whole 64-byte blocks.
  const std::int64_t segmentCredit =
      std::int64_t{kIbCreditBlockBytes} *
      BlocksOf(static_cast<std::uint64_t>(o.mtu.count() + o.header_bytes.count())) * o.packets_per_segment;
  if (o.buffer_bytes.count() < 0 || (o.buffer_bytes.count() > 0 && o.buffer_bytes.count() < segmentCredit)) {
    throw InputError(fmt::format(
        "ns-3 backend: buffer_bytes must be 0 (auto) or hold one segment's credits, {} B (got {} B)",
        segmentCredit, o.buffer_bytes.count()));
  }
  // Unicast LIDs are 0x0001..0xBFFF, one per HCA (rank + 1): a larger
  // subnet's 16-bit LIDs would wrap in the headers.
  if (m_gpus > kMaxUnicastLid) {
    throw InputError(fmt::format("ns-3 backend: {} HCAs, more than an InfiniBand subnet's {} unicast LIDs",
                                 m_gpus, kMaxUnicastLid));
  }
  if (o.link_sample_interval < Time::zero()) {
    throw InputError("ns-3 backend: link_sample_interval must not be negative");
  }
  for (std::size_t r = 0; r < o.source_classes.size(); ++r) {
    if (o.source_classes[r] < -1) {
      throw InputError(fmt::format("ns-3 backend: source_classes[{}] must be -1 (none) or a class >= 0 (got {})", r,
                                   o.source_classes[r]));
    }
  }
}

void IbFabric::CheckLinks() const {
  const auto& links = m_topo.links();
  if (links.size() % 2 != 0) throw InputError("ns-3 backend: topology links are not duplex pairs");
  for (std::size_t k = 0; k < links.size(); ++k) {
    const auto& l = links[k];
    const auto& r = links[k ^ 1];
    if (l.bandwidth.bps() <= 0) {
      throw InputError(fmt::format("ns-3 backend: link {} ({} -> {}) has a rate of {} b/s; it must be positive", k,
                                   m_topo.vertex(l.src).name, m_topo.vertex(l.dst).name, l.bandwidth.bps()));
    }
    if (l.latency < Time::zero()) {
      throw InputError(fmt::format("ns-3 backend: link {} ({} -> {}) has a negative latency", k,
                                   m_topo.vertex(l.src).name, m_topo.vertex(l.dst).name));
    }
    if (l.src != r.dst || l.dst != r.src || l.bandwidth != r.bandwidth || l.latency != r.latency) {
      throw InputError(fmt::format("ns-3 backend: links {} and {} are not one duplex link", k, k ^ 1));
    }
  }
}

void IbFabric::CheckTables() {
  const auto& t = *m_tables;
  if (t.num_lids() != m_gpus + 1) {
    throw InputError(fmt::format("ns-3 backend: forwarding tables cover {} LIDs, the topology has {} HCAs",
                                 t.num_lids() - 1, m_gpus));
  }
  const std::size_t nsw = t.switches().size();
  const auto G = static_cast<std::size_t>(m_gpus);
  // GPUs attached to the subnet: an out-link from a table switch into them,
  // or into the shared HCA that serves them.
  std::vector<bool> attached(G, false);
  for (const auto& l : m_topo.links()) {
    if (t.switch_index(l.src) < 0) continue;
    const auto& np = m_topo.vertex(l.dst);
    if (np.kind == VertexKind::Gpu) attached[static_cast<std::size_t>(np.index)] = true;
    if (np.kind != VertexKind::Hca) continue;
    for (auto [e, end] = boost::out_edges(l.dst, m_topo.graph()); e != end; ++e) {
      const auto& gp = m_topo.vertex(boost::target(*e, m_topo.graph()));
      if (gp.kind == VertexKind::Gpu) attached[static_cast<std::size_t>(gp.index)] = true;
    }
  }
  m_hops.assign(nsw * G, kHopsUnknown);
  std::vector<std::size_t> stack;
  auto name = [&](std::size_t s) { return m_topo.vertex(t.switches()[s]).name; };
  for (std::size_t d = 0; d < G; ++d) {
    if (!attached[d]) continue;
    const int lid = topology::lid_of_rank(static_cast<int>(d));
    for (std::size_t s0 = 0; s0 < nsw; ++s0) {
      std::size_t cur = s0;
      stack.clear();
      std::int16_t base = 0;
      while (true) {
        const std::int16_t h = m_hops[cur * G + d];
        if (h >= 0) {
          base = h;
          break;
        }
        if (h == kHopsVisiting) {
          throw InputError(fmt::format("ns-3 backend: forwarding tables loop at switch {} for LID {}", name(cur), lid));
        }
        m_hops[cur * G + d] = kHopsVisiting;
        stack.push_back(cur);
        const VertexId v = t.switches()[cur];
        const topology::PortNo port = t.port(cur, lid);
        if (port == topology::kNoRoute || port == 0 || port > boost::out_degree(v, m_topo.graph())) {
          throw InputError(fmt::format("ns-3 backend: forwarding table of switch {} does not reach LID {} (gpu rank {})",
                                       name(cur), lid, d));
        }
        const VertexId next = m_topo.link(m_topo.port_link(v, port)).dst;
        const auto& np = m_topo.vertex(next);
        if (np.kind == VertexKind::Gpu) {
          if (static_cast<std::size_t>(np.index) != d) {
            throw InputError(fmt::format("ns-3 backend: forwarding table of switch {} sends LID {} to {}", name(cur),
                                         lid, np.name));
          }
          base = 0;
          break;
        }
        if (np.kind == VertexKind::Hca) {  // a shared HCA: one PCIe hop to the GPU
          if (!HcaServes(m_topo, next, d)) {
            throw InputError(fmt::format("ns-3 backend: forwarding table of switch {} sends LID {} to {}, which does "
                                         "not serve gpu rank {}",
                                         name(cur), lid, np.name, d));
          }
          base = 1;
          break;
        }
        const int ni = t.switch_index(next);
        if (ni < 0) {
          throw InputError(fmt::format("ns-3 backend: forwarding table of switch {} sends LID {} out of the subnet, to {}",
                                       name(cur), lid, np.name));
        }
        cur = static_cast<std::size_t>(ni);
      }
      for (auto it = stack.rbegin(); it != stack.rend(); ++it) m_hops[*it * G + d] = ++base;
    }
  }
}

std::vector<std::uint16_t> IbFabric::SwitchLft(VertexId v) const {
  std::vector<std::uint16_t> lft(static_cast<std::size_t>(m_gpus), kIbNoPort);
  const int s = m_tables->switch_index(v);
  if (s >= 0) {
    for (int d = 0; d < m_gpus; ++d) {
      const topology::PortNo p = m_tables->port(static_cast<std::size_t>(s), topology::lid_of_rank(d));
      if (p != topology::kNoRoute && p != 0) lft[static_cast<std::size_t>(d)] = static_cast<std::uint16_t>(p - 1);
    }
    return lft;
  }
  // A switch outside the IB subnet: an NVSwitch reaches only the GPUs wired
  // to it, which is all Topology::route ever asks of it; a shared HCA also
  // sends everything else up its (single) link into the subnet, as route()
  // does.
  std::uint16_t up = kIbNoPort;
  for (auto [e, end] = boost::out_edges(v, m_topo.graph()); e != end; ++e) {
    const LinkId id = m_topo.graph()[*e].id;
    const VertexId to = m_topo.link(id).dst;
    const auto& dst = m_topo.vertex(to);
    const auto port = static_cast<std::uint16_t>(m_topo.port_of(id) - 1);
    if (dst.kind == VertexKind::Gpu) lft[static_cast<std::size_t>(dst.index)] = port;
    if (m_topo.vertex(v).kind == VertexKind::Hca && up == kIbNoPort && m_tables->switch_index(to) >= 0) up = port;
  }
  if (up != kIbNoPort) {
    for (auto& p : lft) {
      if (p == kIbNoPort) p = up;
    }
  }
  return lft;
}

std::vector<std::uint16_t> IbFabric::EcmpPorts(VertexId v, std::uint32_t dstRank) const {
  const auto G = static_cast<std::size_t>(m_gpus);
  const int s = m_tables->switch_index(v);
  const std::int16_t h = m_hops[static_cast<std::size_t>(s) * G + dstRank];
  const topology::PortNo lftPort = m_tables->port(static_cast<std::size_t>(s), topology::lid_of_rank(static_cast<int>(dstRank)));
  // Ports of the table's port's built rate (the graph's; links() has a
  // degraded cable's): a degraded up-link stays in the set, as a slow port
  // stays in an InfiniBand adaptive-routing group, its queue steering
  // packets off it, and a degraded table port does not shrink the set to
  // itself.
  const auto& g = m_topo.graph();
  std::vector<Bandwidth> built(boost::out_degree(v, g) + 1);
  for (const auto e : boost::make_iterator_range(boost::out_edges(v, g))) {
    built[m_topo.port_of(g[e].id)] = g[e].bandwidth;
  }
  const Bandwidth bw = built[lftPort];
  std::vector<std::uint16_t> out;
  const auto degree = static_cast<topology::PortNo>(boost::out_degree(v, g));
  for (topology::PortNo p = 1; p <= degree; ++p) {
    const auto& l = m_topo.link(m_topo.port_link(v, p));
    if (built[p] != bw) continue;
    const auto& np = m_topo.vertex(l.dst);
    bool ok = false;
    if (np.kind == VertexKind::Gpu) {
      ok = static_cast<std::uint32_t>(np.index) == dstRank;
    } else if (np.kind == VertexKind::Hca) {
      ok = HcaServes(m_topo, l.dst, dstRank);
    } else if (const int t = m_tables->switch_index(l.dst); t >= 0) {
      ok = m_hops[static_cast<std::size_t>(t) * G + dstRank] == h - 1;
    }
    if (ok) out.push_back(static_cast<std::uint16_t>(p - 1));
  }
  return out;
}

std::uint16_t IbFabric::FirstPort(int src, int dst) {
  const std::uint64_t key = static_cast<std::uint64_t>(src) * static_cast<std::uint64_t>(m_gpus) + static_cast<std::uint64_t>(dst);
  auto it = m_firstPort.find(key);
  if (it != m_firstPort.end()) return it->second;
  const topology::Path path = m_topo.route(src, dst);
  if (path.empty()) throw SimulationError(fmt::format("ns-3 backend: no route from GPU {} to GPU {}", src, dst));
  const auto port = static_cast<std::uint16_t>(m_topo.port_of(path.front()) - 1);
  m_firstPort.emplace(key, port);
  return port;
}

void IbFabric::Send(const engine::Message& msg, engine::Callback onDelivered) {
  if (msg.bytes.count() < 0) throw SimulationError("ns-3 backend: negative message size");
  if (msg.src < 0 || msg.src >= m_gpus || msg.dst < 0 || msg.dst >= m_gpus) {
    throw SimulationError(fmt::format("ns-3 backend: message from {} to {}: no such GPU", msg.src, msg.dst));
  }
  ++m_stats.messages_sent;
  if (msg.src == msg.dst) {  // to itself: nothing crosses the fabric
    m_loop.schedule(Time::zero(), [this, done = std::move(onDelivered)] {
      ++m_stats.messages_delivered;
      done();
    });
    return;
  }
  const std::uint16_t port = FirstPort(msg.src, msg.dst);
  const std::uint64_t id = m_nextMessageId++;
  m_messages.emplace(id, InMessage{msg.bytes.count(), 0, std::move(onDelivered)});
  const int key = m_vlPolicy == VlPolicy::Destination ? msg.dst : msg.src;
  const auto vl = static_cast<std::uint8_t>(key % m_numVls);
  m_hcas[static_cast<std::size_t>(msg.src)]->PostSend(id, static_cast<std::uint32_t>(msg.dst), msg.bytes.count(), port, vl,
                                                     msg.efficiency);
}

void IbFabric::OnDeliver(const IbPacketInfo& info) {
  const auto it = m_messages.find(info.messageId);
  if (it == m_messages.end()) {
    throw SimulationError(fmt::format("ns-3 backend: packet of unknown message {}", info.messageId));
  }
  ++m_stats.packets_delivered;
  m_stats.payload_delivered += Bytes(info.payload);
  InMessage& m = it->second;
  m.arrived += info.payload;
  if (m.arrived > m.bytes) throw SimulationError(fmt::format("ns-3 backend: message {} got too many bytes", it->first));
  if (m.arrived < m.bytes) return;
  engine::Callback done = std::move(m.onDelivered);
  m_messages.erase(it);
  ++m_stats.messages_delivered;
  done();
}

const Ns3NetworkStats& IbFabric::GetStats() const {
  m_stats.packets_injected = 0;
  m_stats.payload_injected = Bytes(0);
  for (const auto& h : m_hcas) {
    if (!h) continue;
    m_stats.packets_injected += h->m_packetsInjected;
    m_stats.payload_injected += Bytes(static_cast<std::int64_t>(h->m_payloadInjected));
  }
  m_stats.packet_hops = 0;
  m_stats.wire_bytes = Bytes(0);
  m_stats.drops = 0;
  m_stats.credit_violations = 0;
  m_stats.max_queue_packets = 0;
  m_stats.max_buffer_bytes = Bytes(0);
  m_stats.min_rx_buffer = Bytes(0);
  m_stats.max_rx_buffer = Bytes(0);
  m_stats.links_below_round_trip = 0;
  m_stats.round_trip_bytes = Bytes(0);
  std::int64_t stall = 0;
  for (std::size_t k = 0; k < m_devices.size(); ++k) {
    const auto& d = m_devices[k];
    // A device transmits into its peer's buffer: the reverse link's device
    // (duplex ids 2k and 2k+1).
    if (d->m_txPackets > 0) {
      const Bytes b(static_cast<std::int64_t>(m_devices[k ^ 1U]->GetBufferBytes()));
      m_stats.min_rx_buffer = m_stats.min_rx_buffer == Bytes(0) ? b : std::min(m_stats.min_rx_buffer, b);
      m_stats.max_rx_buffer = std::max(m_stats.max_rx_buffer, b);
      if (b.count() < m_roundTripBytes[k]) {
        ++m_stats.links_below_round_trip;
        m_stats.round_trip_bytes = std::max(m_stats.round_trip_bytes, Bytes(m_roundTripBytes[k]));
      }
    }
    m_stats.packet_hops += d->m_txPackets;
    m_stats.wire_bytes += Bytes(static_cast<std::int64_t>(d->m_txWireBytes));
    m_stats.drops += d->m_rxOverflows;
    m_stats.credit_violations += d->m_creditViolations;
    m_stats.max_queue_packets = std::max(m_stats.max_queue_packets, d->m_rxMaxPackets);
    m_stats.max_buffer_bytes = std::max(m_stats.max_buffer_bytes, Bytes(static_cast<std::int64_t>(d->m_rxMaxVlBytes)));
    stall += d->m_stallPs;
  }
  m_stats.credit_stall = Time::from_ps(stall);
  return m_stats;
}

Ns3Report IbFabric::GetReport() const {
  Ns3Report report;
  report.network = GetStats();
  report.end_time = m_loop.now();
  report.events = m_loop.events_processed();
  report.links.resize(m_devices.size());
  for (std::size_t k = 0; k < m_devices.size(); ++k) {
    const IbNetDevice& tx = *m_devices[k];
    const IbNetDevice& rx = *m_devices[k ^ 1];
    LinkReport& r = report.links[k];
    r.link = static_cast<LinkId>(k);
    r.wire_bytes = Bytes(static_cast<std::int64_t>(tx.m_txWireBytes));
    r.payload_bytes = Bytes(static_cast<std::int64_t>(tx.m_txPayloadBytes));
    r.packets = tx.m_txPackets;
    r.busy = Time::from_ps(tx.m_busyPs);
    r.credit_stall = Time::from_ps(tx.m_stallPs);
    r.max_queue = Bytes(static_cast<std::int64_t>(rx.m_rxMaxBytes));
    r.max_queue_packets = rx.m_rxMaxPackets;
    r.bytes_per_sample.reserve(tx.m_samples.size());
    for (const auto b : tx.m_samples) r.bytes_per_sample.emplace_back(static_cast<std::int64_t>(b));
    r.payload_by_class.reserve(tx.m_txPayloadByClass.size());
    for (const auto b : tx.m_txPayloadByClass) r.payload_by_class.emplace_back(static_cast<std::int64_t>(b));
  }
  return report;
}

void IbFabric::Verify() const {
  const Ns3NetworkStats& s = GetStats();
  if (s.drops != 0) {
    throw SimulationError(fmt::format("ns-3 backend: {} packets arrived to a full buffer (would be dropped)", s.drops));
  }
  if (s.credit_violations != 0) {
    throw SimulationError(fmt::format("ns-3 backend: {} credit violations (credits below zero or above the buffer)",
                                      s.credit_violations));
  }
  if (!m_messages.empty() || s.messages_delivered != s.messages_sent) {
    // Ports waiting for credits that never come: a cycle of full receive
    // buffers (helper 62: routes around failed cables that turn down and
    // back up close one; the executor then saw ranks that never finished).
    // The first ports waiting, by link, the switches' first: the cycle is
    // theirs, the hosts only wait behind it (helper 95: the message named
    // none of the cycle a user was studying).
    constexpr std::size_t kNamed = 8;
    std::size_t waiting = 0;
    std::vector<std::string> named;
    const auto& links = m_topo.links();
    for (const bool switches : {true, false}) {
      for (std::size_t k = 0; k < m_devices.size(); ++k) {
        if (!m_devices[k]->IsWaitingForCredits()) continue;
        const VertexKind kind = m_topo.vertex(links[k].src).kind;
        if ((kind != VertexKind::Gpu && kind != VertexKind::Hca) != switches) continue;
        ++waiting;
        if (named.size() < kNamed) {
          named.push_back(
              fmt::format("{} -> {}", m_topo.vertex(links[k].src).name, m_topo.vertex(links[k].dst).name));
        }
      }
    }
    if (waiting > 0) {
      throw SimulationError(
          fmt::format("ns-3 backend: the fabric deadlocked: {} of {} messages never delivered, "
                      "{} ports waiting for credits that never came back ({}{}) "
                      "(a cycle of full receive buffers, as routes around failed cables "
                      "that go down and back up can close; "
                      "more ns3.num_vls spread the traffic over more buffers, which ran the cases tried but "
                      "breaks no cycle for certain, and the flow backend has none to fill; "
                      "docs/ns3_modules.md, Limitations)",
                      s.messages_sent - s.messages_delivered, s.messages_sent, waiting,
                      fmt::join(named, ", "), waiting > named.size() ? ", ..." : ""));
    }
    throw SimulationError(fmt::format("ns-3 backend: {} of {} messages were never delivered",
                                      s.messages_sent - s.messages_delivered, s.messages_sent));
  }
  if (s.packets_delivered != s.packets_injected || s.payload_delivered != s.payload_injected) {
    throw SimulationError(fmt::format("ns-3 backend: injected {} packets ({} B) but delivered {} ({} B)",
                                      s.packets_injected, s.payload_injected.count(), s.packets_delivered,
                                      s.payload_delivered.count()));
  }
  for (std::size_t k = 0; k < m_devices.size(); ++k) {
    if (!m_devices[k]->IsQuiescent()) {
      throw SimulationError(fmt::format("ns-3 backend: port on link {} still holds packets or credits at the end", k));
    }
  }
  for (const auto& sw : m_switches) {
    if (!sw->IsEmpty()) throw SimulationError("ns-3 backend: a switch still buffers packets at the end");
  }
  for (const auto& h : m_hcas) {
    if (h && !h->IsEmpty()) throw SimulationError("ns-3 backend: an HCA still has queued messages at the end");
  }
}

}  // namespace

std::unique_ptr<Ns3Network::Fabric> MakeInfiniBandFabric(const topology::Topology& topo, Ns3EventLoop& loop,
                                                          const Ns3Options& options) {
  return std::make_unique<IbFabric>(topo, loop, options);
}

}  // namespace tessera::ns3_modules
