#include "tessera/ns3_modules/ns3_backend.hpp"

namespace tessera::ns3_modules {

engine::ExecutionResult run_on_ns3(const parallelism::TaskGraph& graph, const topology::Topology& topo,
                                   const Ns3Options& options, engine::ExecutionObserver* observer) {
  // The loop is declared first, so it is destroyed last: the network lets go
  // of its ns-3 objects, then Simulator::Destroy() runs.
  Ns3EventLoop loop;
  Ns3Network net(topo, loop, options);
  engine::ExecutionResult result = engine::execute(graph, loop, net, observer);
  net.verify();
  return result;
}

}  // namespace tessera::ns3_modules
