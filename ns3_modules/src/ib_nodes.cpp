#include "ib_nodes.hpp"

#include <fmt/format.h>
#include <ns3/boolean.h>
#include <ns3/uinteger.h>

#include <algorithm>
#include <cmath>

#include "ib_header.hpp"
#include "tessera/error.hpp"

namespace tessera::ns3_modules {

NS_OBJECT_ENSURE_REGISTERED(IbSwitch);
NS_OBJECT_ENSURE_REGISTERED(IbHca);

// --- IbSwitch ---------------------------------------------------------------

ns3::TypeId IbSwitch::GetTypeId() {
  static const ns3::TypeId tid =
      ns3::TypeId("tessera::IbSwitch")
          .SetParent<IbPortOwner>()
          .SetGroupName("Tessera")
          .AddConstructor<IbSwitch>()
          .AddAttribute("AdaptiveRouting",
                        "Route each packet to the least-loaded equal-cost output instead of the LFT's port.",
                        ns3::BooleanValue(false), ns3::MakeBooleanAccessor(&IbSwitch::m_adaptiveRouting),
                        ns3::MakeBooleanChecker());
  return tid;
}

IbSwitch::IbSwitch() = default;

void IbSwitch::Setup(std::vector<ns3::Ptr<IbNetDevice>> ports, std::uint8_t numVls, std::vector<std::uint16_t> lft) {
  m_ports = std::move(ports);
  m_numVls = numVls;
  m_lft = std::move(lft);
  m_input.assign(m_ports.size() * numVls, {});
  m_requests.assign(m_ports.size() * numVls, {});
  m_outQueuedBytes.assign(m_ports.size(), 0);
  if (m_adaptiveRouting) m_ecmp.assign(m_lft.size(), {});
}

std::uint16_t IbSwitch::Route(const IbPacketInfo& info) {
  if (info.dstRank >= m_lft.size()) throw SimulationError("ns-3 IbSwitch: destination LID out of range");
  const std::uint16_t lftPort = m_lft[info.dstRank];
  if (lftPort == kIbNoPort) {
    throw SimulationError(fmt::format("ns-3 IbSwitch: no forwarding entry for LID {}", info.dstRank + 1));
  }
  if (!m_adaptiveRouting || !m_ecmpProvider) return lftPort;
  auto& choices = m_ecmp[info.dstRank];
  if (choices.empty()) {
    choices = m_ecmpProvider(info.dstRank);
    if (choices.empty()) choices.push_back(lftPort);
  }
  // The output that drains soonest: bytes routed to it and not yet sent out
  // (the packet on the wire included) over its line rate, so that a slow
  // (degraded) port in the set counts its backlog in time; ties go to the
  // LFT's own port, then to the lowest port number. (Over ports of one
  // rate: the least bytes.)
  auto drain = [this](std::uint16_t p) {
    return static_cast<double>(m_outQueuedBytes[p]) / static_cast<double>(m_ports[p]->GetBitRate());
  };
  std::uint16_t best = lftPort;
  double bestDrain = drain(lftPort);
  for (const std::uint16_t p : choices) {
    if (drain(p) < bestDrain) {
      best = p;
      bestDrain = drain(p);
    }
  }
  return best;
}

void IbSwitch::Receive(std::uint16_t port, ns3::Ptr<ns3::Packet> packet, const IbPacketInfo& info) {
  const std::uint16_t out = Route(info);
  auto& fifo = m_input[Slot(port, info.vl)];
  fifo.push_back(Entry{packet, info, out});  // ns-3 3.37 Ptr has no move
  m_outQueuedBytes[out] += info.wireBytes;
  if (fifo.size() == 1) {  // a new head: it asks for its output
    m_requests[Slot(out, info.vl)].push_back(port);
    m_ports[out]->TryTransmit();
  }
}

bool IbSwitch::PeekTx(std::uint16_t port, std::uint8_t vl, std::size_t k, std::uint32_t& wireBytes,
                      std::int64_t& lastBytePs) {
  const auto& requests = m_requests[Slot(port, vl)];
  if (k >= requests.size()) return false;
  const IbPacketInfo& info = m_input[Slot(requests[k], vl)].front().info;
  wireBytes = info.wireBytes;
  lastBytePs = info.lastBytePs;
  return true;
}

IbTxItem IbSwitch::DequeueTx(std::uint16_t port, std::uint8_t vl, std::size_t k) {
  auto& requests = m_requests[Slot(port, vl)];
  const std::uint16_t in = requests[k];
  requests.erase(requests.begin() + static_cast<std::ptrdiff_t>(k));
  auto& fifo = m_input[Slot(in, vl)];
  IbTxItem item{fifo.front().packet, fifo.front().info, in};
  fifo.pop_front();
  if (!fifo.empty()) {  // the next packet of that input becomes its head
    const std::uint16_t next = fifo.front().outPort;
    m_requests[Slot(next, vl)].push_back(in);
    if (next != port) m_ports[next]->TryTransmit();
  }
  return item;
}

void IbSwitch::TxComplete(std::uint16_t port, const IbTxItem& item) {
  // Sent out: no longer the output's backlog (adaptive routing's measure).
  m_outQueuedBytes[port] -= item.info.wireBytes;
  // The packet has been read out of its input buffer: its space goes back
  // upstream as credits.
  m_ports[item.inPort]->ReleaseRxBuffer(item.info.vl, item.info.wireBytes);
}

bool IbSwitch::IsEmpty() const {
  for (const auto& fifo : m_input) {
    if (!fifo.empty()) return false;
  }
  return true;
}

void IbSwitch::DoDispose() {
  m_ports.clear();
  m_input.clear();
  m_requests.clear();
  m_ecmpProvider = nullptr;
  IbPortOwner::DoDispose();
}

// --- IbHca ------------------------------------------------------------------

ns3::TypeId IbHca::GetTypeId() {
  static const ns3::TypeId tid =
      ns3::TypeId("tessera::IbHca").SetParent<IbPortOwner>().SetGroupName("Tessera").AddConstructor<IbHca>();
  return tid;
}

IbHca::IbHca() = default;

void IbHca::Setup(std::vector<ns3::Ptr<IbNetDevice>> ports, std::uint8_t numVls, std::uint32_t rank,
                  std::uint32_t mtu, std::uint32_t headerBytes, std::uint32_t packetsPerSegment) {
  m_ports = std::move(ports);
  m_numVls = numVls;
  m_rank = rank;
  m_mtu = mtu;
  m_headerBytes = headerBytes;
  m_segmentBytes = mtu * packetsPerSegment;
  m_ready.assign(m_ports.size() * numVls, {});
}

void IbHca::PostSend(std::uint64_t messageId, std::uint32_t dstRank, std::int64_t bytes, std::uint16_t port,
                     std::uint8_t vl, double efficiency) {
  if (!(efficiency > 0.0 && efficiency <= 1.0)) {
    throw SimulationError(fmt::format("ns-3 IbHca: message efficiency must be in (0, 1] (got {})", efficiency));
  }
  const auto packetPayload =
      efficiency == 1.0 ? m_mtu
                        : std::max<std::uint32_t>(1, static_cast<std::uint32_t>(std::floor(efficiency * m_mtu)));
  auto [it, inserted] = m_qpOfDst.try_emplace(dstRank, static_cast<std::uint32_t>(m_qps.size()));
  if (inserted) m_qps.push_back(QueuePair{dstRank, port, vl, false, {}});
  QueuePair& qp = m_qps[it->second];
  if (qp.port != port || qp.vl != vl) throw SimulationError("ns-3 IbHca: a queue pair changed its port or VL");
  qp.messages.push_back(OutMessage{messageId, bytes, efficiency, packetPayload});
  if (!qp.ready) {
    qp.ready = true;
    m_ready[Slot(port, vl)].push_back(it->second);
    m_ports[port]->TryTransmit();
  }
}

void IbHca::NextSegment(const OutMessage& m, std::uint32_t& payload, std::uint32_t& packets,
                        std::uint32_t& wire) const {
  if (m.efficiency == 1.0) {
    payload = static_cast<std::uint32_t>(std::min<std::int64_t>(m_segmentBytes, m.bytes - m.sent));
    packets = std::max<std::uint32_t>(1, (payload + m_mtu - 1) / m_mtu);  // an empty message: one header-only packet
    wire = payload + packets * m_headerBytes;
    return;
  }
  // Each MTU packet carries packetPayload bytes of payload; the wire holds
  // payload / efficiency (at most full MTU packets) plus the headers.
  const std::int64_t perSegment = std::int64_t{m.packetPayload} * (m_segmentBytes / m_mtu);
  payload = static_cast<std::uint32_t>(std::min<std::int64_t>(perSegment, m.bytes - m.sent));
  packets = std::max<std::uint32_t>(1, (payload + m.packetPayload - 1) / m.packetPayload);
  const auto onWire = static_cast<std::uint32_t>(std::ceil(payload / m.efficiency));
  wire = std::min(onWire, packets * m_mtu) + packets * m_headerBytes;
}

bool IbHca::PeekTx(std::uint16_t port, std::uint8_t vl, std::size_t k, std::uint32_t& wireBytes,
                   std::int64_t& lastBytePs) {
  const auto& ready = m_ready[Slot(port, vl)];
  // (a source's segments are whole: the first can always start)
  if (ready.empty() || k > 0) return false;
  lastBytePs = 0;
  std::uint32_t payload = 0;
  std::uint32_t packets = 0;
  NextSegment(m_qps[ready.front()].messages.front(), payload, packets, wireBytes);
  return true;
}

IbTxItem IbHca::DequeueTx(std::uint16_t port, std::uint8_t vl, std::size_t /*k: 0, PeekTx offers one*/) {
  auto& ready = m_ready[Slot(port, vl)];
  const std::uint32_t qpIndex = ready.front();
  ready.pop_front();
  QueuePair& qp = m_qps[qpIndex];
  OutMessage& m = qp.messages.front();
  std::uint32_t payload = 0;
  std::uint32_t packets = 0;
  std::uint32_t wire = 0;
  NextSegment(m, payload, packets, wire);

  IbHeader header;
  header.m_dlid = static_cast<std::uint16_t>(qp.dstRank + 1);
  header.m_slid = static_cast<std::uint16_t>(m_rank + 1);
  header.m_vl = vl;
  header.m_sl = vl;
  header.m_packets = static_cast<std::uint16_t>(packets);
  header.m_payload = payload;
  header.m_psn = m.psn++;
  header.m_messageId = m.id;
  auto packet = ns3::Create<ns3::Packet>(payload);  // virtual zero-filled payload, never allocated
  packet->AddHeader(header);
  IbTxItem item{packet, IbPacketInfo{.dstRank = qp.dstRank, .srcRank = m_rank, .wireBytes = wire, .payload = payload, .messageId = m.id, .lastBytePs = 0, .vl = vl}, kIbNoPort};

  ++m_packetsInjected;
  m_payloadInjected += payload;
  m.sent += payload;
  if (m.sent >= m.bytes) qp.messages.pop_front();
  if (qp.messages.empty()) {
    qp.ready = false;
  } else {
    ready.push_back(qpIndex);  // round-robin: to the back of the line
  }
  return item;
}

void IbHca::TxComplete(std::uint16_t /*port*/, const IbTxItem& /*item*/) {}

void IbHca::Receive(std::uint16_t port, ns3::Ptr<ns3::Packet> /*packet*/, const IbPacketInfo& info) {
  if (info.dstRank != m_rank) {
    throw SimulationError(fmt::format("ns-3 IbHca: HCA of rank {} got a packet for rank {}", m_rank, info.dstRank));
  }
  m_ports[port]->ReleaseRxBuffer(info.vl, info.wireBytes);
  m_deliver(info);
}

bool IbHca::IsEmpty() const {
  return std::all_of(m_qps.begin(), m_qps.end(), [](const QueuePair& qp) { return qp.messages.empty(); });
}

void IbHca::DoDispose() {
  m_ports.clear();
  m_qps.clear();
  m_deliver = nullptr;
  IbPortOwner::DoDispose();
}

}  // namespace tessera::ns3_modules
