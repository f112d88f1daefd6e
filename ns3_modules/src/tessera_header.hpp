#pragma once
// The header every Tessera packet carries in front of its payload. An
// ns3::Header, so it follows ns-3 naming (m_ members, PascalCase methods).
#include <cstdint>
#include <ostream>

#include <ns3/buffer.h>
#include <ns3/header.h>
#include <ns3/type-id.h>

namespace tessera::ns3_modules {

class TesseraHeader : public ns3::Header {
 public:
  /// Bytes on the wire: message id (8), destination rank (4), sequence (4).
  static constexpr std::uint32_t kSerializedSize = 16;

  static ns3::TypeId GetTypeId();
  ns3::TypeId GetInstanceTypeId() const override;
  std::uint32_t GetSerializedSize() const override;
  void Serialize(ns3::Buffer::Iterator start) const override;
  std::uint32_t Deserialize(ns3::Buffer::Iterator start) override;
  void Print(std::ostream& os) const override;

  void SetMessageId(std::uint64_t id) { m_messageId = id; }
  std::uint64_t GetMessageId() const { return m_messageId; }
  /// Destination GPU rank.
  void SetDestination(std::uint32_t rank) { m_destination = rank; }
  std::uint32_t GetDestination() const { return m_destination; }
  /// Index of the packet within its message.
  void SetSequence(std::uint32_t seq) { m_sequence = seq; }
  std::uint32_t GetSequence() const { return m_sequence; }

 private:
  std::uint64_t m_messageId = 0;
  std::uint32_t m_destination = 0;
  std::uint32_t m_sequence = 0;
};

}  // namespace tessera::ns3_modules
