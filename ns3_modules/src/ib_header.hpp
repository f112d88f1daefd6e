#pragma once
// The header every simulated InfiniBand packet carries: the routing fields of
// the Local Route Header (LRH) and the Base Transport Header (BTH), plus the
// message id the simulator reassembles by. An ns3::Header, so ns-3 naming.
//
// Its serialized size is NOT what the wire pays: serialization time uses the
// payload plus IbNetDevice's HeaderBytes per MTU packet (LRH 8 + BTH 12 +
// ICRC 4 + VCRC 2 + delimiters 4 = 30 B by default).
#include <cstdint>
#include <ostream>

#include <ns3/buffer.h>
#include <ns3/header.h>
#include <ns3/type-id.h>

namespace tessera::ns3_modules {

class IbHeader : public ns3::Header {
 public:
  /// DLID 2, SLID 2, VL 1, SL 1, MTU packets in the segment 2, payload 4,
  /// PSN 4, message id 8.
  static constexpr std::uint32_t kSerializedSize = 24;

  static ns3::TypeId GetTypeId();
  ns3::TypeId GetInstanceTypeId() const override;
  std::uint32_t GetSerializedSize() const override;
  void Serialize(ns3::Buffer::Iterator start) const override;
  std::uint32_t Deserialize(ns3::Buffer::Iterator start) override;
  void Print(std::ostream& os) const override;

  std::uint16_t m_dlid = 0;      ///< destination LID (HCA of rank dlid - 1)
  std::uint16_t m_slid = 0;      ///< source LID
  std::uint8_t m_vl = 0;         ///< virtual lane
  std::uint8_t m_sl = 0;         ///< service level
  std::uint16_t m_packets = 1;   ///< MTU packets this simulated segment stands for
  std::uint32_t m_payload = 0;   ///< payload bytes
  std::uint32_t m_psn = 0;       ///< packet sequence number within the message
  std::uint64_t m_messageId = 0;
};

}  // namespace tessera::ns3_modules
