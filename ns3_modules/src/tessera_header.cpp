#include "tessera_header.hpp"

#include <ns3/object-base.h>

namespace tessera::ns3_modules {

NS_OBJECT_ENSURE_REGISTERED(TesseraHeader);

ns3::TypeId TesseraHeader::GetTypeId() {
  static const ns3::TypeId tid = ns3::TypeId("tessera::TesseraHeader")
                                     .SetParent<ns3::Header>()
                                     .SetGroupName("Tessera")
                                     .AddConstructor<TesseraHeader>();
  return tid;
}

ns3::TypeId TesseraHeader::GetInstanceTypeId() const { return GetTypeId(); }

std::uint32_t TesseraHeader::GetSerializedSize() const { return kSerializedSize; }

void TesseraHeader::Serialize(ns3::Buffer::Iterator start) const {
  start.WriteHtonU64(m_messageId);
  start.WriteHtonU32(m_destination);
  start.WriteHtonU32(m_sequence);
}

std::uint32_t TesseraHeader::Deserialize(ns3::Buffer::Iterator start) {
  m_messageId = start.ReadNtohU64();
  m_destination = start.ReadNtohU32();
  m_sequence = start.ReadNtohU32();
  return kSerializedSize;
}

void TesseraHeader::Print(std::ostream& os) const {
  os << "message=" << m_messageId << " dst=" << m_destination << " seq=" << m_sequence;
}

}  // namespace tessera::ns3_modules
