#pragma once
// InfiniBand-style routing state exported from a Topology: per-switch linear
// forwarding tables (destination LID -> output port), as OpenSM computes them
// with its fat-tree / D-mod-k routing, and fabric-wide queries.
#include <cstdint>
#include <span>
#include <vector>

#include "tessera/topology/topology.hpp"

namespace tessera::topology {

/// LID of a GPU's HCA: rank + 1 (LID 0 is reserved in InfiniBand).
constexpr int lid_of_rank(int rank) { return rank + 1; }
constexpr int rank_of_lid(int lid) { return lid - 1; }

/// Linear forwarding tables of every fabric switch (Leaf, Spine and Core;
/// NVSwitches are inside nodes and not part of the InfiniBand subnet).
/// Entry [switch][lid] is the output port (see Topology::port_link) toward
/// the HCA with that LID, or kNoRoute. Following the tables from a GPU's
/// first hop gives exactly Topology::route().
class ForwardingTables {
 public:
  ForwardingTables() = default;
  ForwardingTables(std::vector<VertexId> switches, int num_lids, std::vector<PortNo> ports);

  [[nodiscard]] const std::vector<VertexId>& switches() const { return switches_; }
  [[nodiscard]] int num_lids() const { return num_lids_; }  ///< GPUs + 1 (LID 0)
  /// Index of `v` in switches(), or -1.
  [[nodiscard]] int switch_index(VertexId v) const;
  [[nodiscard]] std::span<const PortNo> table(std::size_t switch_index) const;
  [[nodiscard]] PortNo port(std::size_t switch_index, int lid) const;
  /// Bytes held by the tables.
  [[nodiscard]] std::size_t memory_bytes() const;

 private:
  std::vector<VertexId> switches_;
  std::vector<int> index_of_vertex_;
  int num_lids_ = 0;
  std::vector<PortNo> ports_;  // switches x num_lids, row-major
};

/// Computes the tables with the same D-mod-k rule as Topology::route. Cost:
/// one BFS per switch that GPUs attach to, plus switches x destinations
/// table entries (destinations under the same leaf share candidate lists).
ForwardingTables build_forwarding_tables(const Topology& topo);

/// Follows the tables from GPU `src` to GPU `dst` (the first hop is the
/// GPU's own choice, as in route()). Throws SimulationError on a loop or a
/// missing entry.
Path follow_tables(const Topology& topo, const ForwardingTables& lft, int src, int dst);

/// Bisection bandwidth of the inter-node fabric: the max flow between the
/// first and the second half of the GPUs in rank order (NVLink and failed
/// cables excluded; a degraded cable at its degraded rate), in bits per
/// second. For the regular generators (HCAs fill leaves and pods in
/// rank order) this is the worst-case balanced cut: hosts/2 x host bandwidth
/// / oversubscription for a fat-tree of uniform links.
Bandwidth bisection_bandwidth(const Topology& topo);

}  // namespace tessera::topology
