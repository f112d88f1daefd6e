#include "ib_net_device.hpp"

#include <ns3/boolean.h>
#include <ns3/simulator.h>
#include <ns3/trace-source-accessor.h>
#include <ns3/uinteger.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "tessera/error.hpp"

namespace tessera::ns3_modules {

NS_OBJECT_ENSURE_REGISTERED(IbPortOwner);
NS_OBJECT_ENSURE_REGISTERED(IbChannel);
NS_OBJECT_ENSURE_REGISTERED(IbNetDevice);

ns3::TypeId IbPortOwner::GetTypeId() {
  static const ns3::TypeId tid = ns3::TypeId("tessera::IbPortOwner").SetParent<ns3::Object>().SetGroupName("Tessera");
  return tid;
}

// --- IbChannel --------------------------------------------------------------

ns3::TypeId IbChannel::GetTypeId() {
  static const ns3::TypeId tid =
      ns3::TypeId("tessera::IbChannel")
          .SetParent<ns3::Channel>()
          .SetGroupName("Tessera")
          .AddConstructor<IbChannel>()
          .AddAttribute("Delay", "Propagation delay of the cable, each direction.", ns3::TimeValue(ns3::Seconds(0)),
                        ns3::MakeTimeAccessor(&IbChannel::m_delay), ns3::MakeTimeChecker());
  return tid;
}

IbChannel::IbChannel() = default;

void IbChannel::Attach(const ns3::Ptr<IbNetDevice>& device) {
  if (m_nDevices >= 2) throw SimulationError("ns-3 IbChannel: a cable has two ends");
  m_devices[m_nDevices++] = device;
}

IbNetDevice* IbChannel::Peer(const IbNetDevice* device) const {
  if (m_nDevices != 2) throw SimulationError("ns-3 IbChannel: used before both ends were attached");
  return PeekPointer(m_devices[0]) == device ? PeekPointer(m_devices[1]) : PeekPointer(m_devices[0]);
}

void IbChannel::TransmitStart(const IbNetDevice* sender, const ns3::Ptr<ns3::Packet>& packet,
                              IbPacketInfo info, const ns3::Time& txTime, const ns3::Time& headerTime) {
  IbNetDevice* peer = Peer(sender);
  info.lastBytePs = (ns3::Simulator::Now() + txTime + m_delay).GetPicoSeconds();
  const ns3::Time first = peer->IsCutThrough() ? std::min(headerTime, txTime) : txTime;
  ns3::Simulator::Schedule(first + m_delay, &IbNetDevice::ReceiveFromChannel, peer, packet, info);
}

void IbChannel::ReturnCredits(const IbNetDevice* receiver, std::uint8_t vl, std::uint32_t blocks) {
  ns3::Simulator::Schedule(m_delay, &IbNetDevice::AddCredits, Peer(receiver), vl, blocks);
}

std::size_t IbChannel::GetNDevices() const { return m_nDevices; }

ns3::Ptr<ns3::NetDevice> IbChannel::GetDevice(std::size_t i) const { return i < m_nDevices ? m_devices[i] : nullptr; }

// --- IbNetDevice ------------------------------------------------------------

ns3::TypeId IbNetDevice::GetTypeId() {
  static const ns3::TypeId tid =
      ns3::TypeId("tessera::IbNetDevice")
          .SetParent<ns3::NetDevice>()
          .SetGroupName("Tessera")
          .AddConstructor<IbNetDevice>()
          .AddAttribute("DataRate", "Signalling rate of the port (HDR 200, NDR 400, XDR 800 Gb/s).",
                        ns3::DataRateValue(ns3::DataRate("400Gb/s")), ns3::MakeDataRateAccessor(&IbNetDevice::m_rate),
                        ns3::MakeDataRateChecker())
          .AddAttribute("HeaderBytes", "Wire bytes per MTU packet besides its payload (LRH, BTH, CRCs, delimiters).",
                        ns3::UintegerValue(30), ns3::MakeUintegerAccessor(&IbNetDevice::m_headerBytes),
                        ns3::MakeUintegerChecker<std::uint32_t>(0, 256))
          .AddAttribute("Mtu", "Payload bytes of one MTU packet.", ns3::UintegerValue(4096),
                        ns3::MakeUintegerAccessor(&IbNetDevice::m_mtu), ns3::MakeUintegerChecker<std::uint16_t>(256, 4096))
          .AddAttribute("CutThrough",
                        "Hand received packets to the owner once their headers are in (switch ports), not their "
                        "last byte.",
                        ns3::BooleanValue(false), ns3::MakeBooleanAccessor(&IbNetDevice::m_cutThrough),
                        ns3::MakeBooleanChecker())
          .AddAttribute("BufferBytes", "Receive buffer per virtual lane (credits the peer starts with).",
                        ns3::UintegerValue(0),
                        ns3::MakeUintegerAccessor(&IbNetDevice::SetBufferBytes, &IbNetDevice::GetBufferBytes),
                        ns3::MakeUintegerChecker<std::uint32_t>())
          .AddTraceSource("TxBegin", "A packet starts serialising on the given VL.",
                          ns3::MakeTraceSourceAccessor(&IbNetDevice::m_txBeginTrace),
                          "tessera::IbNetDevice::TxBeginCallback")
          .AddTraceSource("RxEnd", "A packet has fully arrived in the receive buffer.",
                          ns3::MakeTraceSourceAccessor(&IbNetDevice::m_rxEndTrace), "ns3::Packet::TracedCallback")
          .AddTraceSource("CreditStall", "The output idled from start to end with packets but no credits.",
                          ns3::MakeTraceSourceAccessor(&IbNetDevice::m_creditStallTrace),
                          "tessera::IbNetDevice::CreditStallCallback");
  return tid;
}

IbNetDevice::IbNetDevice() = default;

void IbNetDevice::Setup(IbPortOwner* owner, std::uint16_t port, std::uint8_t numVls) {
  m_owner = owner;
  m_port = port;
  m_numVls = numVls;
  m_credits.assign(numVls, static_cast<std::int64_t>(m_peerBufferBlocks));
  m_rxBytes.assign(numVls, 0);
}

void IbNetDevice::Attach(ns3::Ptr<IbChannel> channel) {
  m_channel = channel;
  channel->Attach(this);
}

void IbNetDevice::SetPeerBufferBytes(std::uint32_t bytes) {
  m_peerBufferBlocks = bytes / kIbCreditBlockBytes;
  m_credits.assign(m_numVls, static_cast<std::int64_t>(m_peerBufferBlocks));
}

void IbNetDevice::SetBufferBytes(std::uint32_t bytes) { m_bufferBytes = bytes / kIbCreditBlockBytes * kIbCreditBlockBytes; }

ns3::Time IbNetDevice::TxTime(std::uint64_t bytes) const {
  const double ps = static_cast<double>(bytes) * 8e12 / static_cast<double>(m_rate.GetBitRate());
  return ns3::PicoSeconds(std::llround(ps));
}

void IbNetDevice::TryTransmit() {
  if (m_busy) return;
  bool waiting = false;
  const std::int64_t now = ns3::Simulator::Now().GetPicoSeconds();
  std::int64_t wakeAt = std::numeric_limits<std::int64_t>::max();
  for (std::uint8_t i = 0; i < m_numVls; ++i) {
    const auto vl = static_cast<std::uint8_t>((m_nextVl + i) % m_numVls);
    std::uint32_t wire = 0;
    std::int64_t lastBytePs = 0;
    std::size_t k = 0;
    // A cut-through packet whose last byte comes in later than the port
    // could send it from now (a slower input) waits, as a switch would
    // store it, and the port serves the next request meanwhile; it starts
    // when its last byte is in just as its serialisation ends (helper 69:
    // it held the faster port idle for the whole slow arrival).
    bool found = false;
    for (; m_owner->PeekTx(m_port, vl, k, wire, lastBytePs); ++k) {
      const std::int64_t start = lastBytePs - TxTime(wire).GetPicoSeconds();
      if (start <= now) {
        found = true;
        break;
      }
      wakeAt = std::min(wakeAt, start);
    }
    if (!found) continue;
    const std::uint32_t blocks = SegmentBlocksOf(wire, m_mtu, m_headerBytes);
    if (m_credits[vl] < blocks) {
      waiting = true;
      continue;
    }
    // Credits for the whole packet: take them and start serialising.
    m_busy = true;  // before DequeueTx, which may poke other ports (and this one)
    m_credits[vl] -= blocks;
    if (m_stallSince >= 0) {
      m_stallPs += now - m_stallSince;
      m_creditStallTrace(ns3::PicoSeconds(m_stallSince), ns3::PicoSeconds(now));
      m_stallSince = -1;
    }
    m_current = m_owner->DequeueTx(m_port, vl, k);
    m_nextVl = static_cast<std::uint8_t>((vl + 1) % m_numVls);
    // (its last byte is in by the time its serialisation ends: see above)
    const ns3::Time tx = TxTime(wire);
    ++m_txPackets;
    m_txWireBytes += wire;
    m_txPayloadBytes += m_current.info.payload;
    if (m_sourceClasses != nullptr && m_current.info.srcRank < m_sourceClasses->size()) {
      const std::int32_t cls = (*m_sourceClasses)[m_current.info.srcRank];
      if (cls >= 0 && static_cast<std::size_t>(cls) < m_txPayloadByClass.size()) {
        m_txPayloadByClass[static_cast<std::size_t>(cls)] += m_current.info.payload;
      }
    }
    m_busyPs += tx.GetPicoSeconds();
    if (m_sampleInterval.IsStrictlyPositive()) {
      // The wire bytes spread over the bins the serialisation spans, in
      // proportion (helper 69: a 32-packet segment put 528% in one 1 us
      // bin); the last bin takes the rounding, so the bytes add up.
      const std::int64_t bin = m_sampleInterval.GetPicoSeconds();
      const std::int64_t end = now + std::max<std::int64_t>(1, tx.GetPicoSeconds());
      const auto last = static_cast<std::size_t>((end - 1) / bin);
      if (m_samples.size() <= last) m_samples.resize(last + 1, 0);
      std::uint64_t left = wire;
      for (auto b = static_cast<std::size_t>(now / bin); b < last; ++b) {
        const std::int64_t from = std::max(now, static_cast<std::int64_t>(b) * bin);
        const std::int64_t overlap = static_cast<std::int64_t>(b + 1) * bin - from;
        const auto part = static_cast<std::uint64_t>(
            static_cast<double>(wire) * static_cast<double>(overlap) / static_cast<double>(end - now));
        m_samples[b] += part;
        left -= std::min(left, part);
      }
      m_samples[last] += left;
    }
    m_txBeginTrace(m_current.packet, vl);
    m_channel->TransmitStart(this, m_current.packet, m_current.info, tx, TxTime(m_headerBytes));
    ns3::Simulator::Schedule(tx, &IbNetDevice::TransmitComplete, this);
    return;
  }
  if (waiting && m_stallSince < 0) m_stallSince = now;
  if (wakeAt != std::numeric_limits<std::int64_t>::max() &&
      (!m_wake.IsRunning() ||
       m_wake.GetTs() > static_cast<std::uint64_t>(ns3::PicoSeconds(wakeAt).GetTimeStep()))) {
    m_wake.Cancel();
    m_wake = ns3::Simulator::Schedule(ns3::PicoSeconds(wakeAt - now), &IbNetDevice::TryTransmit, this);
  }
}

void IbNetDevice::SetSourceClasses(const std::vector<std::int32_t>* classes, std::size_t numClasses) {
  m_sourceClasses = classes;
  m_txPayloadByClass.assign(classes != nullptr ? numClasses : 0, 0);
}

void IbNetDevice::TransmitComplete() {
  m_busy = false;
  const IbTxItem done = std::move(m_current);
  m_current = IbTxItem{};
  m_owner->TxComplete(m_port, done);
  TryTransmit();
}

void IbNetDevice::ReceiveFromChannel(const ns3::Ptr<ns3::Packet>& packet, IbPacketInfo info) {
  if (info.vl >= m_numVls) throw SimulationError("ns-3 IbNetDevice: packet on a virtual lane the port does not have");
  const std::uint64_t bytes =
      std::uint64_t{SegmentBlocksOf(info.wireBytes, m_mtu, m_headerBytes)} * kIbCreditBlockBytes;
  m_rxBytes[info.vl] += bytes;
  m_rxTotalBytes += bytes;
  ++m_rxPackets;
  if (m_rxBytes[info.vl] > m_bufferBytes) ++m_rxOverflows;  // a real port would have dropped it
  if (m_rxTotalBytes > m_rxMaxBytes) m_rxMaxBytes = m_rxTotalBytes;
  if (m_rxBytes[info.vl] > m_rxMaxVlBytes) m_rxMaxVlBytes = m_rxBytes[info.vl];
  if (m_rxPackets > m_rxMaxPackets) m_rxMaxPackets = m_rxPackets;
  m_rxEndTrace(packet);
  m_owner->Receive(m_port, packet, info);
}

void IbNetDevice::ReleaseRxBuffer(std::uint8_t vl, std::uint32_t wireBytes) {
  const std::uint32_t blocks = SegmentBlocksOf(wireBytes, m_mtu, m_headerBytes);
  const std::uint64_t bytes = std::uint64_t{blocks} * kIbCreditBlockBytes;
  if (m_rxBytes[vl] < bytes || m_rxPackets == 0) {
    ++m_creditViolations;
    return;
  }
  m_rxBytes[vl] -= bytes;
  m_rxTotalBytes -= bytes;
  --m_rxPackets;
  m_channel->ReturnCredits(this, vl, blocks);
}

void IbNetDevice::AddCredits(std::uint8_t vl, std::uint32_t blocks) {
  m_credits[vl] += blocks;
  if (m_credits[vl] > static_cast<std::int64_t>(m_peerBufferBlocks)) ++m_creditViolations;
  TryTransmit();
}

bool IbNetDevice::IsQuiescent() const {
  if (m_busy || m_rxTotalBytes != 0 || m_rxPackets != 0 || m_stallSince >= 0) return false;
  for (const std::int64_t c : m_credits) {
    if (c != static_cast<std::int64_t>(m_peerBufferBlocks)) return false;
  }
  return true;
}

void IbNetDevice::DoDispose() {
  m_channel = nullptr;
  m_node = nullptr;
  m_current = IbTxItem{};
  m_owner = nullptr;
  ns3::NetDevice::DoDispose();
}

// ns3::NetDevice boilerplate: an IB port has no MAC address semantics, no
// broadcast or multicast, and is fed by its owner, not by Send().
void IbNetDevice::SetIfIndex(const std::uint32_t index) { m_ifIndex = index; }
std::uint32_t IbNetDevice::GetIfIndex() const { return m_ifIndex; }
ns3::Ptr<ns3::Channel> IbNetDevice::GetChannel() const { return m_channel; }
void IbNetDevice::SetAddress(ns3::Address address) { m_address = ns3::Mac48Address::ConvertFrom(address); }
ns3::Address IbNetDevice::GetAddress() const { return m_address; }
bool IbNetDevice::SetMtu(const std::uint16_t mtu) {
  if (mtu < 256 || mtu > 4096) return false;
  m_mtu = mtu;
  return true;
}
std::uint16_t IbNetDevice::GetMtu() const { return m_mtu; }
bool IbNetDevice::IsLinkUp() const { return m_channel != nullptr; }
void IbNetDevice::AddLinkChangeCallback(ns3::Callback<void> /*callback*/) {}
bool IbNetDevice::IsBroadcast() const { return false; }
ns3::Address IbNetDevice::GetBroadcast() const { return ns3::Mac48Address::GetBroadcast(); }
bool IbNetDevice::IsMulticast() const { return false; }
ns3::Address IbNetDevice::GetMulticast(ns3::Ipv4Address /*multicastGroup*/) const {
  return ns3::Mac48Address::GetBroadcast();
}
ns3::Address IbNetDevice::GetMulticast(ns3::Ipv6Address /*addr*/) const { return ns3::Mac48Address::GetBroadcast(); }
bool IbNetDevice::IsBridge() const { return false; }
bool IbNetDevice::IsPointToPoint() const { return true; }
bool IbNetDevice::Send(ns3::Ptr<ns3::Packet> /*packet*/, const ns3::Address& /*dest*/,
                       std::uint16_t /*protocolNumber*/) {
  return false;
}
bool IbNetDevice::SendFrom(ns3::Ptr<ns3::Packet> /*packet*/, const ns3::Address& /*source*/,
                           const ns3::Address& /*dest*/, std::uint16_t /*protocolNumber*/) {
  return false;
}
ns3::Ptr<ns3::Node> IbNetDevice::GetNode() const { return m_node; }
void IbNetDevice::SetNode(ns3::Ptr<ns3::Node> node) { m_node = node; }
bool IbNetDevice::NeedsArp() const { return false; }
void IbNetDevice::SetReceiveCallback(ns3::NetDevice::ReceiveCallback /*cb*/) {}
void IbNetDevice::SetPromiscReceiveCallback(ns3::NetDevice::PromiscReceiveCallback /*cb*/) {}
bool IbNetDevice::SupportsSendFrom() const { return false; }

}  // namespace tessera::ns3_modules
