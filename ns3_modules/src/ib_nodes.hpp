#pragma once
// Private: what sits behind the ports of an InfiniBand node (ns-3 naming).
//
//  IbSwitch  input-buffered crossbar switch. A packet that arrives on port i,
//            VL v joins the FIFO input buffer (i, v); its output port comes
//            from the linear forwarding table (destination LID -> port) or,
//            with AdaptiveRouting, from the least-loaded of the destination's
//            equal-cost ports. Only the head of an input buffer can cross the
//            crossbar (so a blocked head blocks everything behind it: head-of-
//            line blocking). Each output serves the input heads that want it
//            first-come first-served, which, as a served input re-queues its
//            next head at the back, is round-robin among inputs. A packet's
//            input-buffer space is freed, and its credits sent back upstream,
//            when its transmission on the output ends (store and forward).
//  IbHca     host channel adapter: one queue pair per destination. A posted
//            message is segmented into MTU packets (or coarser segments); the
//            QPs with data for a port and VL take turns packet by packet, and
//            the port paces them at line rate as credits allow. Received
//            packets are drained at once (host memory is not the bottleneck)
//            and reassembled by byte count.
#include <cstdint>
#include <deque>
#include <functional>
#include <unordered_map>
#include <vector>

#include "ib_net_device.hpp"

namespace tessera::ns3_modules {

class IbSwitch : public IbPortOwner {
 public:
  static ns3::TypeId GetTypeId();
  IbSwitch();

  /// `lft[rank]` is the output port toward the HCA of `rank` (kIbNoPort: none).
  void Setup(std::vector<ns3::Ptr<IbNetDevice>> ports, std::uint8_t numVls, std::vector<std::uint16_t> lft);
  /// Equal-cost output ports toward a destination rank, for adaptive routing.
  using EcmpProvider = std::function<std::vector<std::uint16_t>(std::uint32_t dstRank)>;
  void SetEcmpProvider(EcmpProvider provider) { m_ecmpProvider = std::move(provider); }

  void Receive(std::uint16_t port, ns3::Ptr<ns3::Packet> packet, const IbPacketInfo& info) override;
  bool PeekTx(std::uint16_t port, std::uint8_t vl, std::size_t k, std::uint32_t& wireBytes,
              std::int64_t& lastBytePs) override;
  IbTxItem DequeueTx(std::uint16_t port, std::uint8_t vl, std::size_t k) override;
  void TxComplete(std::uint16_t port, const IbTxItem& item) override;

  bool IsEmpty() const;

 protected:
  void DoDispose() override;

 private:
  struct Entry {
    ns3::Ptr<ns3::Packet> packet;
    IbPacketInfo info;
    std::uint16_t outPort;
  };
  std::uint16_t Route(const IbPacketInfo& info);
  std::size_t Slot(std::uint16_t port, std::uint8_t vl) const { return std::size_t{port} * m_numVls + vl; }

  bool m_adaptiveRouting = false;
  std::uint8_t m_numVls = 1;
  std::vector<ns3::Ptr<IbNetDevice>> m_ports;
  std::vector<std::uint16_t> m_lft;
  std::vector<std::deque<Entry>> m_input;              ///< [in port, VL] FIFO
  std::vector<std::deque<std::uint16_t>> m_requests;   ///< [out port, VL] inputs whose head wants it
  std::vector<std::uint64_t> m_outQueuedBytes;         ///< per out port: bytes routed to it, not yet sent out
  std::vector<std::vector<std::uint16_t>> m_ecmp;      ///< per destination (adaptive routing, lazily)
  EcmpProvider m_ecmpProvider;
};

class IbHca : public IbPortOwner {
 public:
  static ns3::TypeId GetTypeId();
  IbHca();

  void Setup(std::vector<ns3::Ptr<IbNetDevice>> ports, std::uint8_t numVls, std::uint32_t rank, std::uint32_t mtu,
             std::uint32_t headerBytes, std::uint32_t packetsPerSegment);
  /// Called for every packet that reaches this HCA.
  using DeliverCallback = std::function<void(const IbPacketInfo&)>;
  void SetDeliverCallback(DeliverCallback cb) { m_deliver = std::move(cb); }
  /// Queues a message on the QP to `dstRank`, sent out of `port` on `vl`.
  /// `efficiency` (0, 1]: payload per wire byte (engine::Message): each MTU
  /// packet carries floor(efficiency x MTU) payload bytes and the rest of the
  /// packet is protocol overhead, so payload moves at that fraction of the
  /// line rate; reports still count payload.
  void PostSend(std::uint64_t messageId, std::uint32_t dstRank, std::int64_t bytes, std::uint16_t port,
                std::uint8_t vl, double efficiency = 1.0);

  void Receive(std::uint16_t port, ns3::Ptr<ns3::Packet> packet, const IbPacketInfo& info) override;
  bool PeekTx(std::uint16_t port, std::uint8_t vl, std::size_t k, std::uint32_t& wireBytes,
              std::int64_t& lastBytePs) override;
  IbTxItem DequeueTx(std::uint16_t port, std::uint8_t vl, std::size_t k) override;
  void TxComplete(std::uint16_t port, const IbTxItem& item) override;

  bool IsEmpty() const;
  std::uint64_t m_packetsInjected = 0;
  std::uint64_t m_payloadInjected = 0;

 protected:
  void DoDispose() override;

 private:
  struct OutMessage {
    std::uint64_t id;
    std::int64_t bytes;
    double efficiency = 1.0;
    std::uint32_t packetPayload = 0;  ///< payload per MTU packet: floor(efficiency x MTU), at least 1
    std::int64_t sent = 0;
    std::uint32_t psn = 0;
  };
  struct QueuePair {
    std::uint32_t dstRank;
    std::uint16_t port;
    std::uint8_t vl;
    bool ready = false;  ///< in m_ready
    std::deque<OutMessage> messages;
  };
  /// Payload and wire bytes of the next segment of `m`.
  void NextSegment(const OutMessage& m, std::uint32_t& payload, std::uint32_t& packets, std::uint32_t& wire) const;
  std::size_t Slot(std::uint16_t port, std::uint8_t vl) const { return std::size_t{port} * m_numVls + vl; }

  std::vector<ns3::Ptr<IbNetDevice>> m_ports;
  std::uint8_t m_numVls = 1;
  std::uint32_t m_rank = 0;
  std::uint32_t m_mtu = 4096;
  std::uint32_t m_headerBytes = 30;
  std::uint32_t m_segmentBytes = 4096;
  std::vector<QueuePair> m_qps;
  std::unordered_map<std::uint32_t, std::uint32_t> m_qpOfDst;
  std::vector<std::deque<std::uint32_t>> m_ready;  ///< [port, VL] QPs with data, round-robin
  DeliverCallback m_deliver;
};

}  // namespace tessera::ns3_modules
