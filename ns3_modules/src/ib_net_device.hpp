#pragma once
// Private: the InfiniBand link layer of our ns-3 model (ns-3 naming inside).
//
//  IbChannel    a full-duplex point-to-point cable with a propagation delay
//               (attribute Delay); it carries data packets and credit updates.
//  IbNetDevice  one port: a transmitter at DataRate with per-VL credits for
//               the peer's receive buffer and a round-robin VL arbiter, and a
//               receiver with a buffer of BufferBytes per VL whose space goes
//               back to the peer as credits once the owner drains a packet.
//  IbPortOwner  what sits behind a node's ports (IbSwitch, IbHca): it accepts
//               received packets and supplies packets to transmit, per VL.
//
// Credits are 64 B blocks, as in IB. A device transmits a packet only if it
// holds credits for all of its blocks, so a receive buffer can never
// overflow: nothing is ever dropped (an overflow would be a bug and is counted
// as a credit violation, which Ns3Network::verify reports).
#include <ns3/channel.h>
#include <ns3/data-rate.h>
#include <ns3/event-id.h>
#include <ns3/mac48-address.h>
#include <ns3/net-device.h>
#include <ns3/node.h>
#include <ns3/nstime.h>
#include <ns3/object.h>
#include <ns3/packet.h>
#include <ns3/traced-callback.h>

#include <cstdint>
#include <vector>

namespace tessera::ns3_modules {

class IbNetDevice;

/// Credit block size: IB flow-control credits count 64-byte blocks.
inline constexpr std::uint32_t kIbCreditBlockBytes = 64;
inline constexpr std::uint32_t BlocksOf(std::uint64_t bytes) {
  return static_cast<std::uint32_t>((bytes + kIbCreditBlockBytes - 1) / kIbCreditBlockBytes);
}
/// The credit blocks of a segment of `wireBytes` (packets of at most `mtu`
/// payload, each with `headerBytes`): each MTU packet takes whole blocks, as
/// on a real link. Its full packets are (mtu + headerBytes) each; what is
/// left, shorter, is the last packet. One block count for the whole segment
/// undercounted by up to a block per packet (12% at a 256 B MTU).
inline constexpr std::uint32_t SegmentBlocksOf(std::uint64_t wireBytes, std::uint64_t mtu,
                                               std::uint64_t headerBytes) {
  const std::uint64_t packet = mtu + headerBytes;
  const std::uint64_t rest = wireBytes % packet;
  return static_cast<std::uint32_t>(wireBytes / packet) * BlocksOf(packet) + (rest > 0 ? BlocksOf(rest) : 0);
}
inline constexpr std::uint16_t kIbNoPort = 0xFFFF;

/// The fields of a packet's IbHeader that forwarding needs, parsed once at the
/// source and carried with the packet from hop to hop (a switch would re-read
/// them from the LRH; the values are the same).
struct IbPacketInfo {
  std::uint32_t dstRank = 0;    ///< destination HCA (DLID - 1)
  std::uint32_t srcRank = 0;    ///< source HCA (SLID - 1)
  std::uint32_t wireBytes = 0;  ///< payload + header bytes of every MTU packet in it
  std::uint32_t payload = 0;
  std::uint64_t messageId = 0;
  std::int64_t lastBytePs = 0;  ///< when its last byte reaches the current hop (cut-through)
  std::uint8_t vl = 0;
};

/// A packet handed from an owner to a device for transmission.
struct IbTxItem {
  ns3::Ptr<ns3::Packet> packet;
  IbPacketInfo info;
  std::uint16_t inPort = kIbNoPort;  ///< switch: the input port whose buffer it occupies
};

class IbPortOwner : public ns3::Object {
 public:
  static ns3::TypeId GetTypeId();
  /// A packet has fully arrived on `port` and sits in that port's receive
  /// buffer; the owner must eventually call device->ReleaseRxBuffer for it.
  virtual void Receive(std::uint16_t port, ns3::Ptr<ns3::Packet> packet, const IbPacketInfo& info) = 0;
  /// The k-th packet waiting for output `port` on `vl` (0: the next in
  /// round-robin order), if there is one: its wire size and when its last
  /// byte is in (IbPacketInfo::lastBytePs; 0 at a source, whose packets
  /// are whole). A port passes over a cut-through packet whose last byte
  /// comes in too late for it to start now (a slower input).
  virtual bool PeekTx(std::uint16_t port, std::uint8_t vl, std::size_t k, std::uint32_t& wireBytes,
                      std::int64_t& lastBytePs) = 0;
  /// Takes the packet PeekTx(k) announced.
  virtual IbTxItem DequeueTx(std::uint16_t port, std::uint8_t vl, std::size_t k) = 0;
  /// The device finished serialising `item`.
  virtual void TxComplete(std::uint16_t port, const IbTxItem& item) = 0;
};

class IbChannel : public ns3::Channel {
 public:
  static ns3::TypeId GetTypeId();
  IbChannel();

  void Attach(const ns3::Ptr<IbNetDevice>& device);
  /// Delivers `packet` to the other end txTime + Delay from now, or, if that
  /// end cuts through, headerTime + Delay from now (its last byte still
  /// arrives at txTime + Delay: info.lastBytePs).
  void TransmitStart(const IbNetDevice* sender, const ns3::Ptr<ns3::Packet>& packet, IbPacketInfo info,
                     const ns3::Time& txTime, const ns3::Time& headerTime);
  /// Returns `blocks` credits of `vl` to the other end, Delay from now.
  void ReturnCredits(const IbNetDevice* receiver, std::uint8_t vl, std::uint32_t blocks);

  ns3::Time GetDelay() const { return m_delay; }
  std::size_t GetNDevices() const override;
  ns3::Ptr<ns3::NetDevice> GetDevice(std::size_t i) const override;

 private:
  IbNetDevice* Peer(const IbNetDevice* device) const;

  ns3::Time m_delay;
  ns3::Ptr<IbNetDevice> m_devices[2];
  std::size_t m_nDevices = 0;
};

class IbNetDevice : public ns3::NetDevice {
 public:
  static ns3::TypeId GetTypeId();
  IbNetDevice();

  /// Wires the device: `owner` serves it as port `port`; `numVls` data VLs.
  void Setup(IbPortOwner* owner, std::uint16_t port, std::uint8_t numVls);
  void Attach(ns3::Ptr<IbChannel> channel);
  /// The peer's receive buffer per VL (the credits this transmitter starts with).
  void SetPeerBufferBytes(std::uint32_t bytes);
  void SetBufferBytes(std::uint32_t bytes);  ///< own receive buffer per VL
  std::uint32_t GetBufferBytes() const { return m_bufferBytes; }
  std::uint64_t GetBitRate() const { return m_rate.GetBitRate(); }  ///< the port's line rate
  void SetSampleInterval(const ns3::Time& interval) { m_sampleInterval = interval; }
  /// Counts transmitted payload by the class of the packet's source rank
  /// (`classes[srcRank]`, -1 or past the end: none) into m_txPayloadByClass,
  /// sized `numClasses`. `classes` must outlive the device; null: no accounting.
  void SetSourceClasses(const std::vector<std::int32_t>* classes, std::size_t numClasses);
  std::uint16_t GetPort() const { return m_port; }
  /// Cut-through: a received packet goes to the owner as soon as its headers
  /// are in (switch ports); otherwise once its last byte is (HCA ports).
  bool IsCutThrough() const { return m_cutThrough; }

  /// Called by the owner whenever a packet may have become available.
  void TryTransmit();
  /// The owner drained a packet out of this port's receive buffer: free the
  /// space and return the credits to the peer.
  void ReleaseRxBuffer(std::uint8_t vl, std::uint32_t wireBytes);

  // Called by IbChannel.
  void ReceiveFromChannel(const ns3::Ptr<ns3::Packet>& packet, IbPacketInfo info);
  void AddCredits(std::uint8_t vl, std::uint32_t blocks);

  // Counters (the fabric turns them into LinkReports).
  std::uint64_t m_txPackets = 0;
  std::uint64_t m_txWireBytes = 0;
  std::uint64_t m_txPayloadBytes = 0;
  std::vector<std::uint64_t> m_txPayloadByClass;  ///< SetSourceClasses: payload per source class
  std::int64_t m_busyPs = 0;
  std::int64_t m_stallPs = 0;
  std::uint64_t m_rxMaxBytes = 0;     ///< fullest receive buffer, all VLs together
  std::uint32_t m_rxMaxPackets = 0;
  std::uint64_t m_rxMaxVlBytes = 0;   ///< fullest single VL buffer
  std::uint64_t m_creditViolations = 0;
  std::uint64_t m_rxOverflows = 0;     ///< packets that arrived to a full buffer
  std::vector<std::uint64_t> m_samples;  ///< wire bytes started per sample interval

  /// Time to serialise `bytes` at the device's rate, rounded to the picosecond.
  ns3::Time TxTime(std::uint64_t bytes) const;
  /// Every credit is back and the buffers are empty (the end-of-run check).
  bool IsQuiescent() const;
  /// Has a packet waiting for credits its peer has not returned (since the
  /// time stall accounting started)?
  bool IsWaitingForCredits() const { return m_stallSince >= 0; }

  // ns3::NetDevice
  void SetIfIndex(const std::uint32_t index) override;
  std::uint32_t GetIfIndex() const override;
  ns3::Ptr<ns3::Channel> GetChannel() const override;
  void SetAddress(ns3::Address address) override;
  ns3::Address GetAddress() const override;
  bool SetMtu(const std::uint16_t mtu) override;
  std::uint16_t GetMtu() const override;
  bool IsLinkUp() const override;
  void AddLinkChangeCallback(ns3::Callback<void> callback) override;
  bool IsBroadcast() const override;
  ns3::Address GetBroadcast() const override;
  bool IsMulticast() const override;
  ns3::Address GetMulticast(ns3::Ipv4Address multicastGroup) const override;
  ns3::Address GetMulticast(ns3::Ipv6Address addr) const override;
  bool IsBridge() const override;
  bool IsPointToPoint() const override;
  /// Not a path for data: IB traffic enters through an IbHca queue pair.
  bool Send(ns3::Ptr<ns3::Packet> packet, const ns3::Address& dest, std::uint16_t protocolNumber) override;
  bool SendFrom(ns3::Ptr<ns3::Packet> packet, const ns3::Address& source, const ns3::Address& dest,
                std::uint16_t protocolNumber) override;
  ns3::Ptr<ns3::Node> GetNode() const override;
  void SetNode(ns3::Ptr<ns3::Node> node) override;
  bool NeedsArp() const override;
  void SetReceiveCallback(ns3::NetDevice::ReceiveCallback cb) override;
  void SetPromiscReceiveCallback(ns3::NetDevice::PromiscReceiveCallback cb) override;
  bool SupportsSendFrom() const override;

 protected:
  void DoDispose() override;

 private:
  void TransmitComplete();

  ns3::DataRate m_rate;
  std::uint32_t m_headerBytes = 30;
  IbPortOwner* m_owner = nullptr;
  std::uint16_t m_port = 0;
  std::uint8_t m_numVls = 1;
  std::uint8_t m_nextVl = 0;
  ns3::Ptr<IbChannel> m_channel;
  ns3::Ptr<ns3::Node> m_node;
  std::uint32_t m_ifIndex = 0;
  ns3::Mac48Address m_address;
  std::uint16_t m_mtu = 4096;
  bool m_cutThrough = false;

  // Transmit side.
  bool m_busy = false;
  IbTxItem m_current;
  ns3::EventId m_wake;                  ///< TryTransmit again when a passed-over packet can start
  std::vector<std::int64_t> m_credits;  ///< blocks free in the peer's buffer, per VL
  std::uint32_t m_peerBufferBlocks = 0;
  std::int64_t m_stallSince = -1;       ///< ps; -1 = not stalled
  ns3::Time m_sampleInterval;
  const std::vector<std::int32_t>* m_sourceClasses = nullptr;  ///< SetSourceClasses (not owned)

  // Receive side.
  std::uint32_t m_bufferBytes = 0;
  std::vector<std::uint64_t> m_rxBytes;  ///< per VL, bytes held
  std::uint64_t m_rxTotalBytes = 0;
  std::uint32_t m_rxPackets = 0;

  ns3::TracedCallback<ns3::Ptr<const ns3::Packet>, std::uint8_t> m_txBeginTrace;
  ns3::TracedCallback<ns3::Ptr<const ns3::Packet>> m_rxEndTrace;
  ns3::TracedCallback<ns3::Time, ns3::Time> m_creditStallTrace;  ///< (start, end) of a stall
};

}  // namespace tessera::ns3_modules
