#pragma once
// Private: the interface both ns-3 fabric models implement behind Ns3Network.
// It lives inside ns-3's callbacks, so it follows ns-3 naming.
#include <memory>

#include "tessera/ns3_modules/ns3_backend.hpp"

namespace tessera::ns3_modules {

class Ns3Network::Fabric {
 public:
  virtual ~Fabric() = default;
  virtual void Send(const engine::Message& msg, engine::Callback onDelivered) = 0;
  virtual const Ns3NetworkStats& GetStats() const = 0;
  virtual Ns3Report GetReport() const = 0;
  virtual void Verify() const = 0;
  /// From now on, `link` transmits at `rate` (a packet already on the wire
  /// keeps the rate it started with).
  virtual void SetLinkRate(topology::LinkId link, Bandwidth rate) = 0;
};

/// The PointToPoint model (ns3_network.cpp).
std::unique_ptr<Ns3Network::Fabric> MakePointToPointFabric(const topology::Topology& topo, Ns3EventLoop& loop,
                                                            const Ns3Options& options);
/// The InfiniBand model (ib_fabric.cpp).
std::unique_ptr<Ns3Network::Fabric> MakeInfiniBandFabric(const topology::Topology& topo, Ns3EventLoop& loop,
                                                          const Ns3Options& options);

}  // namespace tessera::ns3_modules
