#include "ib_header.hpp"

#include <ns3/object-base.h>

namespace tessera::ns3_modules {

NS_OBJECT_ENSURE_REGISTERED(IbHeader);

ns3::TypeId IbHeader::GetTypeId() {
  static const ns3::TypeId tid = ns3::TypeId("tessera::IbHeader")
                                     .SetParent<ns3::Header>()
                                     .SetGroupName("Tessera")
                                     .AddConstructor<IbHeader>();
  return tid;
}

ns3::TypeId IbHeader::GetInstanceTypeId() const { return GetTypeId(); }

std::uint32_t IbHeader::GetSerializedSize() const { return kSerializedSize; }

void IbHeader::Serialize(ns3::Buffer::Iterator start) const {
  start.WriteHtonU16(m_dlid);
  start.WriteHtonU16(m_slid);
  start.WriteU8(m_vl);
  start.WriteU8(m_sl);
  start.WriteHtonU16(m_packets);
  start.WriteHtonU32(m_payload);
  start.WriteHtonU32(m_psn);
  start.WriteHtonU64(m_messageId);
}

std::uint32_t IbHeader::Deserialize(ns3::Buffer::Iterator start) {
  m_dlid = start.ReadNtohU16();
  m_slid = start.ReadNtohU16();
  m_vl = start.ReadU8();
  m_sl = start.ReadU8();
  m_packets = start.ReadNtohU16();
  m_payload = start.ReadNtohU32();
  m_psn = start.ReadNtohU32();
  m_messageId = start.ReadNtohU64();
  return kSerializedSize;
}

void IbHeader::Print(std::ostream& os) const {
  os << "dlid=" << m_dlid << " slid=" << m_slid << " vl=" << unsigned{m_vl} << " sl=" << unsigned{m_sl}
     << " packets=" << m_packets << " payload=" << m_payload << " psn=" << m_psn << " message=" << m_messageId;
}

}  // namespace tessera::ns3_modules
