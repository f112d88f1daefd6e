#include <fmt/format.h>
#include <ns3/callback.h>
#include <ns3/data-rate.h>
#include <ns3/drop-tail-queue.h>
#include <ns3/mac48-address.h>
#include <ns3/node.h>
#include <ns3/nstime.h>
#include <ns3/packet.h>
#include <ns3/point-to-point-channel.h>
#include <ns3/point-to-point-net-device.h>
#include <ns3/queue-size.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <unordered_map>
#include <vector>

#include "tessera/engine/flow_network.hpp"
#include "tessera/error.hpp"
#include "tessera/ns3_modules/ns3_backend.hpp"
#include "fabric.hpp"
#include "tessera_header.hpp"

namespace tessera::ns3_modules {

using topology::LinkId;

namespace {
/// PPP header bytes the PointToPointNetDevice adds to every frame.
constexpr std::int64_t kPppHeaderBytes = 2;
static_assert(Ns3Network::kPacketOverhead == TesseraHeader::kSerializedSize + kPppHeaderBytes);
/// EtherType handed to PointToPointNetDevice::Send. PPP only knows how to
/// frame IPv4 and IPv6; the number is never interpreted beyond that.
constexpr std::uint16_t kProtocolNumber = 0x0800;
/// Transmit queues are never the reason for a loss (see docs/ns3_modules.md).
constexpr std::uint32_t kUnboundedQueuePackets = std::numeric_limits<std::uint32_t>::max();
constexpr std::int64_t kMaxMtu = std::int64_t{1} << 20;
}  // namespace

namespace {

/// The PointToPoint model: nodes, devices, channels and the forwarding
/// logic. It lives inside ns-3's callbacks, so it follows ns-3 naming.
class P2pFabric final : public Ns3Network::Fabric {
 public:
  P2pFabric(const topology::Topology& topo, Ns3EventLoop& loop, const Ns3Options& options);

  void Send(const engine::Message& msg, engine::Callback onDelivered) override;
  const Ns3NetworkStats& GetStats() const override { return m_stats; }
  Ns3Report GetReport() const override;
  void Verify() const override;
  void SetLinkRate(LinkId link, Bandwidth rate) override {
    m_txDevice[static_cast<std::size_t>(link)]->SetDataRate(ns3::DataRate(static_cast<std::uint64_t>(rate.bps())));
  }

 private:
  struct MessageState {
    const topology::Path* path;
    std::uint32_t destination;
    std::int64_t bytes;
    std::uint32_t packets;  ///< at least one: an empty message is a header-only packet
    /// Payload per packet: the MTU, or floor(efficiency x MTU) when the
    /// message's efficiency is below 1 (the packet then carries payload /
    /// efficiency bytes: the rest is protocol overhead).
    std::int64_t packetPayload;
    double efficiency;
    std::uint32_t nextSequence = 0;
    std::uint32_t packetsArrived = 0;
    engine::Callback onDelivered;
  };
  /// A GPU's transmit side on one of its links: the messages that start
  /// there, served one packet at a time in round-robin order.
  struct SourcePort {
    std::deque<std::uint64_t> active;
    bool filling = false;
  };

  ns3::Ptr<ns3::PointToPointNetDevice> MakeDevice(topology::VertexId vertex, Bandwidth rate);
  const topology::Path& Route(int src, int dst);
  void FillSourcePort(LinkId link);
  void InjectPacket(std::uint64_t id, MessageState& msg, LinkId link);
  /// Payload bytes packet `sequence` of `msg` carries.
  static std::uint32_t PacketPayload(const MessageState& msg, std::uint32_t sequence) {
    const std::int64_t offset = static_cast<std::int64_t>(sequence) * msg.packetPayload;
    return static_cast<std::uint32_t>(std::max<std::int64_t>(0, std::min(msg.packetPayload, msg.bytes - offset)));
  }
  void Transmit(LinkId link, ns3::Ptr<ns3::Packet> packet);
  bool Receive(LinkId inLink, ns3::Ptr<ns3::NetDevice> device, ns3::Ptr<const ns3::Packet> packet,
               std::uint16_t protocol, const ns3::Address& from);
  void OnSourceTxBegin(LinkId link, ns3::Ptr<const ns3::Packet> packet);
  void OnDrop(ns3::Ptr<const ns3::Packet> packet);

  const topology::Topology& m_topo;
  Ns3EventLoop& m_loop;
  std::int64_t m_mtu;
  std::uint32_t m_sourceWindow;
  std::vector<ns3::Ptr<ns3::Node>> m_nodes;                      ///< index = VertexId
  std::vector<ns3::Ptr<ns3::PointToPointNetDevice>> m_txDevice;  ///< index = LinkId
  std::vector<SourcePort> m_ports;                               ///< index = LinkId
  std::map<std::pair<int, int>, topology::Path> m_routes;
  std::unordered_map<std::uint64_t, MessageState> m_messages;
  std::uint64_t m_nextMessageId = 0;
  ns3::Address m_peer;  ///< PointToPointNetDevice ignores the destination address
  Ns3NetworkStats m_stats;
};

P2pFabric::P2pFabric(const topology::Topology& topo, Ns3EventLoop& loop, const Ns3Options& options)
    : m_topo(topo),
      m_loop(loop),
      m_mtu(options.mtu.count()),
      m_sourceWindow(static_cast<std::uint32_t>(options.source_window)),
      m_peer(ns3::Mac48Address("ff:ff:ff:ff:ff:ff")) {
  if (m_mtu <= 0 || m_mtu > kMaxMtu) {
    throw InputError(fmt::format("ns-3 backend: mtu must be in 1 B..1 MiB (got {} B)", m_mtu));
  }
  if (options.source_window < 1) {
    throw InputError(fmt::format("ns-3 backend: source_window must be at least 1 (got {})", options.source_window));
  }
  m_nodes.reserve(topo.num_vertices());
  for (std::size_t v = 0; v < topo.num_vertices(); ++v) m_nodes.push_back(ns3::CreateObject<ns3::Node>());

  // Topology::add_duplex_link appends the two directions of a link as ids
  // 2k (a->b) and 2k+1 (b->a): one channel with a device at each end.
  const auto& links = topo.links();
  if (links.size() % 2 != 0) throw SimulationError("ns-3 backend: topology links are not duplex pairs");
  m_txDevice.resize(links.size());
  m_ports.resize(links.size());
  for (std::size_t k = 0; k < links.size(); k += 2) {
    const topology::Link& ab = links[k];
    const topology::Link& ba = links[k + 1];
    if (ab.src != ba.dst || ab.dst != ba.src || ab.bandwidth != ba.bandwidth || ab.latency != ba.latency) {
      throw SimulationError(fmt::format("ns-3 backend: links {} and {} are not one duplex link", k, k + 1));
    }
    const auto a = MakeDevice(ab.src, ab.bandwidth);
    const auto b = MakeDevice(ab.dst, ab.bandwidth);
    const auto channel = ns3::CreateObject<ns3::PointToPointChannel>();
    channel->SetAttribute("Delay", ns3::TimeValue(ns3::PicoSeconds(ab.latency.ps())));
    a->Attach(channel);
    b->Attach(channel);
    const auto abId = static_cast<LinkId>(k);
    const auto baId = static_cast<LinkId>(k + 1);
    m_txDevice[k] = a;
    m_txDevice[k + 1] = b;
    // A device receives what travels towards it: a hears b->a, b hears a->b.
    a->SetReceiveCallback(ns3::MakeCallback(&P2pFabric::Receive, this, baId));
    b->SetReceiveCallback(ns3::MakeCallback(&P2pFabric::Receive, this, abId));
    for (const auto& [id, dev] : {std::pair{abId, a}, std::pair{baId, b}}) {
      if (topo.vertex(links[static_cast<std::size_t>(id)].src).kind == topology::VertexKind::Gpu) {
        dev->TraceConnectWithoutContext("PhyTxBegin", ns3::MakeCallback(&P2pFabric::OnSourceTxBegin, this, id));
      }
    }
  }
}

ns3::Ptr<ns3::PointToPointNetDevice> P2pFabric::MakeDevice(topology::VertexId vertex, Bandwidth rate) {
  auto device = ns3::CreateObject<ns3::PointToPointNetDevice>();
  device->SetDataRate(ns3::DataRate(static_cast<std::uint64_t>(rate.bps())));
  auto queue = ns3::CreateObject<ns3::DropTailQueue<ns3::Packet>>();
  queue->SetMaxSize(ns3::QueueSize(ns3::QueueSizeUnit::PACKETS, kUnboundedQueuePackets));
  device->SetQueue(queue);
  m_nodes[vertex]->AddDevice(device);  // installs the node's receive callback; ours replaces it
  for (const char* source : {"MacTxDrop", "PhyTxDrop", "PhyRxDrop"}) {
    device->TraceConnectWithoutContext(source, ns3::MakeCallback(&P2pFabric::OnDrop, this));
  }
  return device;
}

const topology::Path& P2pFabric::Route(int src, int dst) {
  const auto key = std::make_pair(src, dst);
  auto it = m_routes.find(key);
  if (it == m_routes.end()) it = m_routes.emplace(key, m_topo.route(src, dst)).first;
  return it->second;
}

void P2pFabric::Send(const engine::Message& msg, engine::Callback onDelivered) {
  if (msg.bytes.count() < 0) throw SimulationError("ns-3 backend: negative message size");
  const topology::Path& path = Route(msg.src, msg.dst);
  ++m_stats.messages_sent;
  if (path.empty()) {  // to itself: nothing crosses the fabric
    m_loop.schedule(Time::zero(), [this, done = std::move(onDelivered)] {
      ++m_stats.messages_delivered;
      done();
    });
    return;
  }
  if (!(msg.efficiency > 0.0 && msg.efficiency <= 1.0)) {
    throw SimulationError(fmt::format("ns-3 backend: message efficiency must be in (0, 1] (got {})", msg.efficiency));
  }
  const std::int64_t packetPayload =
      msg.efficiency == 1.0
          ? m_mtu
          : std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor(msg.efficiency * static_cast<double>(m_mtu))));
  const std::int64_t packets = std::max<std::int64_t>(1, (msg.bytes.count() + packetPayload - 1) / packetPayload);
  if (packets > std::numeric_limits<std::uint32_t>::max()) {
    throw SimulationError(fmt::format("ns-3 backend: message of {} B needs too many packets", msg.bytes.count()));
  }
  const std::uint64_t id = m_nextMessageId++;
  m_messages.emplace(id, MessageState{&path, static_cast<std::uint32_t>(msg.dst), msg.bytes.count(),
                                      static_cast<std::uint32_t>(packets), packetPayload, msg.efficiency, 0, 0,
                                      std::move(onDelivered)});
  m_ports[static_cast<std::size_t>(path.front())].active.push_back(id);
  FillSourcePort(path.front());
}

void P2pFabric::FillSourcePort(LinkId link) {
  SourcePort& port = m_ports[static_cast<std::size_t>(link)];
  // Sending on an idle device starts its transmission at once, which fires
  // PhyTxBegin and calls us again: the outer call keeps filling.
  if (port.filling) return;
  port.filling = true;
  const auto queue = m_txDevice[static_cast<std::size_t>(link)]->GetQueue();
  while (!port.active.empty() && queue->GetNPackets() < m_sourceWindow) {
    const std::uint64_t id = port.active.front();
    port.active.pop_front();
    MessageState& msg = m_messages.at(id);
    InjectPacket(id, msg, link);
    if (msg.nextSequence < msg.packets) port.active.push_back(id);
  }
  port.filling = false;
}

void P2pFabric::InjectPacket(std::uint64_t id, MessageState& msg, LinkId link) {
  const auto payload = PacketPayload(msg, msg.nextSequence);
  const auto onWire =
      msg.efficiency == 1.0
          ? payload
          : static_cast<std::uint32_t>(std::min<double>(static_cast<double>(m_mtu), std::ceil(payload / msg.efficiency)));
  auto packet = ns3::Create<ns3::Packet>(onWire);  // zero-filled virtual payload, never allocated
  TesseraHeader header;
  header.SetMessageId(id);
  header.SetDestination(msg.destination);
  header.SetSequence(msg.nextSequence);
  packet->AddHeader(header);
  ++msg.nextSequence;
  ++m_stats.packets_injected;
  m_stats.payload_injected += Bytes(payload);
  Transmit(link, packet);
}

void P2pFabric::Transmit(LinkId link, ns3::Ptr<ns3::Packet> packet) {
  const auto& device = m_txDevice[static_cast<std::size_t>(link)];
  m_stats.wire_bytes += Bytes(packet->GetSize() + kPppHeaderBytes);
  ++m_stats.packet_hops;
  device->Send(packet, m_peer, kProtocolNumber);  // a refusal shows up as MacTxDrop
  m_stats.max_queue_packets = std::max(m_stats.max_queue_packets, device->GetQueue()->GetNPackets());
}

// NOLINTNEXTLINE(performance-unnecessary-value-param): the signature ns-3's callback or trace source takes
bool P2pFabric::Receive(LinkId inLink, ns3::Ptr<ns3::NetDevice> /*device*/,
                                 ns3::Ptr<const ns3::Packet> packet, std::uint16_t /*protocol*/,
                                 const ns3::Address& /*from*/) {
  TesseraHeader header;
  packet->PeekHeader(header);
  const auto it = m_messages.find(header.GetMessageId());
  if (it == m_messages.end()) {
    throw SimulationError(fmt::format("ns-3 backend: packet of unknown message {}", header.GetMessageId()));
  }
  MessageState& msg = it->second;
  auto hop = std::find(msg.path->begin(), msg.path->end(), inLink);
  if (hop == msg.path->end()) {
    throw SimulationError(fmt::format("ns-3 backend: packet of message {} arrived off its route on link {}",
                                      it->first, inLink));
  }
  if (++hop != msg.path->end()) {
    Transmit(*hop, packet->Copy());
    return true;
  }
  // One path and FIFO queues: a message's packets arrive in order.
  if (header.GetDestination() != msg.destination || header.GetSequence() != msg.packetsArrived) {
    throw SimulationError(fmt::format("ns-3 backend: message {} got packet {} for GPU {}, expected packet {} for GPU {}",
                                      it->first, header.GetSequence(), header.GetDestination(),
                                      msg.packetsArrived, msg.destination));
  }
  ++m_stats.packets_delivered;
  m_stats.payload_delivered += Bytes(PacketPayload(msg, header.GetSequence()));
  if (++msg.packetsArrived < msg.packets) return true;
  engine::Callback done = std::move(msg.onDelivered);
  m_messages.erase(it);
  ++m_stats.messages_delivered;
  done();
  return true;
}

// NOLINTNEXTLINE(performance-unnecessary-value-param): the signature ns-3's callback or trace source takes
void P2pFabric::OnSourceTxBegin(LinkId link, ns3::Ptr<const ns3::Packet> /*packet*/) {
  FillSourcePort(link);
}

// NOLINTNEXTLINE(performance-unnecessary-value-param): the signature ns-3's callback or trace source takes
void P2pFabric::OnDrop(ns3::Ptr<const ns3::Packet> /*packet*/) { ++m_stats.drops; }

void P2pFabric::Verify() const {
  if (m_stats.drops != 0) {
    throw SimulationError(fmt::format("ns-3 backend: {} packets were dropped", m_stats.drops));
  }
  if (!m_messages.empty() || m_stats.messages_delivered != m_stats.messages_sent) {
    throw SimulationError(fmt::format("ns-3 backend: {} of {} messages were never delivered",
                                      m_stats.messages_sent - m_stats.messages_delivered, m_stats.messages_sent));
  }
  if (m_stats.packets_delivered != m_stats.packets_injected ||
      m_stats.payload_delivered != m_stats.payload_injected) {
    throw SimulationError(fmt::format("ns-3 backend: injected {} packets ({} B) but delivered {} ({} B)",
                                      m_stats.packets_injected, m_stats.payload_injected.count(),
                                      m_stats.packets_delivered, m_stats.payload_delivered.count()));
  }
}

Ns3Report P2pFabric::GetReport() const {
  Ns3Report report;
  report.network = m_stats;
  report.end_time = m_loop.now();
  report.events = m_loop.events_processed();
  return report;
}

}  // namespace

std::unique_ptr<Ns3Network::Fabric> MakePointToPointFabric(const topology::Topology& topo, Ns3EventLoop& loop,
                                                            const Ns3Options& options) {
  return std::make_unique<P2pFabric>(topo, loop, options);
}

// --- Ns3Network: the Tessera-facing side ------------------------------------

Ns3Network::Ns3Network(const topology::Topology& topo, Ns3EventLoop& loop, const Ns3Options& options)
    : fabric_(options.model == Ns3Model::InfiniBand ? MakeInfiniBandFabric(topo, loop, options)
                                                    : MakePointToPointFabric(topo, loop, options)),
      topo_(topo),
      loop_(loop) {
  min_link_bps_ = std::numeric_limits<double>::infinity();
  for (const topology::Link& l : topo.links())
    min_link_bps_ = std::min(min_link_bps_, static_cast<double>(l.bandwidth.bps()));
  if (options.scale_up == ScaleUpModel::Flow) {
    scale_up_ = std::make_unique<engine::FlowNetwork>(topo, loop);
    if (!options.source_classes.empty()) scale_up_->set_source_classes(options.source_classes);
  }
  for (const Ns3Options::CableRateChange& c : options.rate_changes) {
    if (!(c.factor > 0.0 && c.factor <= 1.0)) {
      throw InputError(fmt::format("ns-3 backend: a cable's rate factor must be in (0, 1] (got {}); a cable failing "
                                   "during the run is not supported",
                                   c.factor));
    }
    if (c.at < Time::zero()) throw InputError("ns-3 backend: a cable's rate change must not be before time 0");
    const std::vector<LinkId> cable = topo.cable_links(c.a, c.b);
    if (cable.empty()) {
      throw InputError(fmt::format("ns-3 backend: no cable between {} and {}", topo.vertex(c.a).name,
                                   topo.vertex(c.b).name));
    }
    // NVLink cables carry the scale-up flows: the flow model slows them.
    if (scale_up_ && topo.tier(cable.front()) == topology::LinkTier::NvLink) {
      scale_up_->change_cable_at(c.at, c.a, c.b, c.factor);
      continue;
    }
    std::vector<std::pair<LinkId, Bandwidth>> rates;
    rates.reserve(cable.size());
    for (const LinkId l : cable) rates.emplace_back(l, topology::degraded_rate(topo.link(l).bandwidth, c.factor));
    loop.schedule(c.at, [this, rates = std::move(rates)] {
      for (const auto& [l, rate] : rates) fabric_->SetLinkRate(l, rate);
    });
  }
}

Ns3Network::~Ns3Network() = default;

bool Ns3Network::scale_up_route(int src, int dst) {
  if (!scale_up_ || src == dst) return false;
  const std::uint64_t key =
      static_cast<std::uint64_t>(src) * static_cast<std::uint64_t>(topo_.num_gpus()) + static_cast<std::uint64_t>(dst);
  const auto it = scale_up_pair_.find(key);
  if (it != scale_up_pair_.end()) return it->second;
  // A route never passes through a GPU and an NVSwitch links only GPUs, so
  // a route is NVLink from end to end or crosses no NVLink link at all: the
  // flow model and the packet fabric never share a link.
  const topology::Path path = topo_.route(src, dst);
  const bool nvlink = !path.empty() && std::all_of(path.begin(), path.end(), [&](LinkId l) {
    return topo_.tier(l) == topology::LinkTier::NvLink;
  });
  scale_up_pair_.emplace(key, nvlink);
  return nvlink;
}

void Ns3Network::send(const engine::Message& msg, engine::Callback on_delivered) {
  if (msg.src >= 0 && msg.dst >= 0 && msg.src < topo_.num_gpus() && msg.dst < topo_.num_gpus() &&
      scale_up_route(msg.src, msg.dst)) {
    // The flow model pays delay_after itself.
    ++scale_up_sent_;
    scale_up_bytes_ += msg.bytes;
    scale_up_->send(msg, [this, cb = std::move(on_delivered)]() {
      ++scale_up_delivered_;
      cb();
    });
    return;
  }
  check_transfer_time(msg);
  if (msg.delay_after > Time::zero()) {
    const Time delay = msg.delay_after;
    fabric_->Send(msg, [this, delay, cb = std::move(on_delivered)]() mutable { loop_.schedule(delay, std::move(cb)); });
    return;
  }
  fabric_->Send(msg, std::move(on_delivered));
}

void Ns3Network::check_transfer_time(const engine::Message& msg) {
  const double bits = 8.0 * msg.bytes.as_double();
  // Nothing to look up while even the slowest link carries it in time.
  if (bits / min_link_bps_ * 1e12 < static_cast<double>(engine::kLongestTransferPs)) return;
  const topology::Path path = topo_.route(msg.src, msg.dst);
  if (path.empty()) return;
  topology::LinkId slowest = path.front();
  for (const LinkId l : path) {
    if (topo_.link(l).bandwidth.bps() < topo_.link(slowest).bandwidth.bps()) slowest = l;
  }
  const auto bps = static_cast<double>(topo_.link(slowest).bandwidth.bps());
  if (bits / bps * 1e12 < static_cast<double>(engine::kLongestTransferPs)) return;
  throw engine::transfer_overflow_error(msg.bytes.as_double(), msg.src, msg.dst, topo_, slowest, bps);
}

Time Ns3Network::latency(int src, int dst) { return topo_.latency(topo_.route(src, dst)); }

void Ns3Network::add_scale_up(Ns3NetworkStats& s) const {
  s.messages_sent += scale_up_sent_;
  s.messages_delivered += scale_up_delivered_;
  s.scale_up_messages = scale_up_sent_;
  s.scale_up_payload = scale_up_bytes_;
}

const Ns3NetworkStats& Ns3Network::stats() const {
  stats_ = fabric_->GetStats();
  add_scale_up(stats_);
  return stats_;
}

Ns3Report Ns3Network::report() const {
  Ns3Report report = fabric_->GetReport();  // its network stats are the fabric's
  add_scale_up(report.network);
  if (scale_up_ && !report.links.empty()) {
    // The NVLink links carried flows: their totals come from the flow model.
    const std::vector<double>& bytes = scale_up_->link_bytes();
    const std::vector<Time> busy = scale_up_->link_busy();
    const std::vector<std::vector<double>> by_class = scale_up_->link_bytes_by_class();
    for (LinkReport& r : report.links) {
      const auto l = static_cast<std::size_t>(r.link);
      if (topo_.tier(r.link) != topology::LinkTier::NvLink || bytes[l] <= 0.0) continue;
      r.payload_bytes = Bytes(std::llround(bytes[l]));
      r.busy = busy[l];
      if (!by_class.empty()) {
        r.payload_by_class.assign(std::max(r.payload_by_class.size(), by_class.size()), Bytes(0));
        for (std::size_t c = 0; c < by_class.size(); ++c) r.payload_by_class[c] = Bytes(std::llround(by_class[c][l]));
      }
    }
  }
  return report;
}

void Ns3Network::verify() const {
  fabric_->Verify();
  if (scale_up_delivered_ != scale_up_sent_) {
    throw SimulationError(fmt::format("ns-3 backend: {} of {} NVLink messages were never delivered",
                                      scale_up_sent_ - scale_up_delivered_, scale_up_sent_));
  }
}

}  // namespace tessera::ns3_modules
