#pragma once
// A planning-time check of the fabric's static routes against the
// data-parallel gradient rings: where destination-mod-k puts more of their
// concurrent flows on one switch link than the switch's links need
// (docs/topology.md, Limitations). Pure: routes and counts, no event loop.
#include <optional>
#include <string>

#include "tessera/study/scenario.hpp"
#include "tessera/topology/topology.hpp"

namespace tessera::study {

/// The worst fabric link of the data-parallel rings (the ring all-reduce
/// connections of every data-parallel group of two neighbouring pipeline
/// stages at once, expanded as the executor expands them, routed by
/// Topology::route).
struct SharedFabricLink {
  int flows = 0;   ///< the rings' flows on that link
  int needed = 0;  ///< ceil(flows through its switch's links of that direction / those links)
  int links = 0;   ///< the switch's links of that direction (up-links out of it, or down-links into it)
  std::string switch_name;  ///< the switch whose links these are ("leaf1")
  std::string link;         ///< "leaf1 -> spine0"
  bool up = true;           ///< up-links out of the switch, else down-links into it
};

/// The most GPUs data_parallel_link_sharing checks (a route each; the
/// loader checks every scenario it reads).
inline constexpr int kMostGpusChecked = 65536;

/// The fabric link (leaf-spine or spine-core tier) where the data-parallel
/// rings' flows exceed what their switch's links of that direction could
/// hold them to, the largest excess (flows / needed) first, ties by link id;
/// nullopt when there is none, the cluster has no fabric or one node, dp is
/// 1, the all-reduce is no ring (collectives::resolve_algorithm for a 256 MiB
/// bucket: a tree's steps take turns), the cluster has more than
/// kMostGpusChecked GPUs, or the ns-3 backend routes adaptively.
std::optional<SharedFabricLink> data_parallel_link_sharing(const Scenario& s, const topology::Topology& topo);

/// The warning `run` prints for it (empty for nullopt).
std::string link_sharing_warning(const std::optional<SharedFabricLink>& shared, const Scenario& s);

/// The warning for the scenario's own fabric (built here, where the check
/// applies at all), or empty: what the scenario loader adds to its warnings.
std::string crowded_routes_warning(const Scenario& s);

}  // namespace tessera::study
