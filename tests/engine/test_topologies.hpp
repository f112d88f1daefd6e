#pragma once
// Small hand-checkable topologies shared by the engine and ns-3 backend tests.
#include <fmt/format.h>

#include <cstddef>
#include <vector>

#include "tessera/topology/topology.hpp"

namespace tessera::test_support {

/// `hosts` GPUs, each on its own full-duplex link (bandwidth `bw`, latency
/// `hop`) to a single switch: every GPU-to-GPU path is 2 links, 2*hop latency.
inline topology::Topology star(int hosts, Bandwidth bw, Time hop) {
  topology::Topology t;
  std::vector<topology::VertexId> gpus;
  gpus.reserve(static_cast<std::size_t>(hosts));
  for (int i = 0; i < hosts; ++i) gpus.push_back(t.add_vertex(topology::VertexKind::Gpu, fmt::format("gpu{}", i), i));
  const auto sw = t.add_vertex(topology::VertexKind::Leaf, "leaf0", 0);
  for (auto g : gpus) t.add_duplex_link(g, sw, bw, hop);
  return t;
}

}  // namespace tessera::test_support
