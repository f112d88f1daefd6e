#pragma once
// A cluster's physical network as a directed Boost.Graph: GPUs, NVSwitches,
// leaf, spine and core switches, and one directed edge per link direction.
#include <array>
#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/units.hpp"

namespace tessera::topology {

/// Vertex kinds. In a 3-tier fat-tree, Leaf = edge switch, Spine =
/// aggregation switch, Core = core switch. With one HCA per GPU (the usual
/// DGX/HGX build) a GPU vertex also stands for its HCA: the GPU-leaf link is
/// the HCA's cable. When GPUs share HCAs, each HCA is its own vertex (Hca):
/// its GPUs reach it over PCIe links and it forwards between them and its
/// leaf (as the PCIe switch and the adapter do).
enum class VertexKind { Gpu, NvSwitch, Leaf, Spine, Core, Hca };
std::string_view to_string(VertexKind k);

struct VertexProps {
  VertexKind kind = VertexKind::Gpu;
  std::string name;
  int index = 0;  ///< GPU rank for GPUs, switch number within its kind otherwise
};

struct LinkProps {
  Bandwidth bandwidth;
  Time latency;
  std::int32_t id = -1;  ///< dense link id (index into Topology::links())
};

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, VertexProps, LinkProps>;
using VertexId = Graph::vertex_descriptor;
using LinkId = std::int32_t;

struct Link {
  VertexId src;
  VertexId dst;
  Bandwidth bandwidth;
  Time latency;
};

/// One routed path: the directed links a message crosses, in order.
using Path = std::vector<LinkId>;

/// The tier a link belongs to, from the kinds of its two ends.
enum class LinkTier {
  NvLink,     ///< GPU-NVSwitch or GPU-GPU (inside a node)
  Host,       ///< HCA (or the GPU standing for it) to its fabric switch
  LeafSpine,  ///< leaf (edge) to spine (aggregation)
  SpineCore,  ///< spine (aggregation) to core
  Other,
  Pcie,  ///< GPU to a shared HCA (inside a node)
};
inline constexpr std::size_t kNumLinkTiers = 6;
std::string_view to_string(LinkTier t);

/// `rate` x `factor`, rounded to a whole bit per second and at least 1: what
/// a degraded cable (Topology::degrade_cable, a backend's timed change)
/// carries. `factor` in (0, 1].
Bandwidth degraded_rate(Bandwidth rate, double factor);
/// Links per tier, indexed by static_cast<std::size_t>(LinkTier).
using TierCounts = std::array<int, kNumLinkTiers>;

/// Output port numbers of a switch: port p (1-based) is the p-th out-link of
/// the vertex in the order the links were added. Port 0 is the switch itself.
using PortNo = std::uint16_t;
inline constexpr PortNo kNoRoute = 0xFFFF;

namespace detail {
class Router;
}

class Topology {
 public:
  VertexId add_vertex(VertexKind kind, std::string name, int index);
  /// Adds a full-duplex link: two directed links of the same properties.
  void add_duplex_link(VertexId a, VertexId b, Bandwidth bw, Time latency);

  [[nodiscard]] const Graph& graph() const { return g_; }
  [[nodiscard]] const std::vector<Link>& links() const { return links_; }
  [[nodiscard]] const Link& link(LinkId id) const { return links_.at(static_cast<std::size_t>(id)); }
  [[nodiscard]] int num_gpus() const { return static_cast<int>(gpus_.size()); }
  [[nodiscard]] VertexId gpu(int rank) const;
  [[nodiscard]] const VertexProps& vertex(VertexId v) const { return g_[v]; }
  [[nodiscard]] std::size_t num_vertices() const { return boost::num_vertices(g_); }
  [[nodiscard]] int count(VertexKind kind) const;

  /// Tier of a link (from its end points' kinds).
  [[nodiscard]] LinkTier tier(LinkId id) const;
  /// Directed links per tier in the whole topology.
  [[nodiscard]] TierCounts count_links() const;
  /// Links of `p` per tier.
  [[nodiscard]] TierCounts tier_counts(const Path& p) const;
  /// The out-link behind output port `port` (1-based) of vertex `v`.
  [[nodiscard]] LinkId port_link(VertexId v, PortNo port) const;
  /// Output port (1-based) of out-link `id` at its source vertex.
  [[nodiscard]] PortNo port_of(LinkId id) const;

  /// Shortest (fewest hops) path from GPU `src` to GPU `dst`; GPUs never
  /// forward for others. Among equal-cost next hops the fastest links are
  /// kept (NVLink before the NIC inside a node), then destination-mod-k picks
  /// one: a switch of tier t takes candidate (pos(dst) / stride_t) mod count,
  /// with stride 1 at leaves and the product of the up-link counts of the
  /// tiers below above them, pos the GPU's index in leaf-major order (OpenSM
  /// fat-tree / Zahavi D-mod-k; docs/topology.md). Hop distances are
  /// computed once per topology and cached; the first call after a change
  /// pays for one BFS per switch that GPUs attach to. Not thread-safe on
  /// the first call.
  [[nodiscard]] Path route(int src, int dst) const;
  /// As route(), but a switch with several equal-cost next hops takes the
  /// one through which the least loaded equal-cost path runs on (the least
  /// bottleneck, the most `load`ed link, then the least total load; `load`
  /// by LinkId, e.g. flows on it now), the destination-mod-k choice among
  /// equals, else the first in port order: adaptive routing, decided when a
  /// flow starts.
  [[nodiscard]] Path route_least_loaded(int src, int dst, const std::function<int(LinkId)>& load) const;
  /// Every equal-cost path route() chooses from (ECMP set, same filters), in
  /// port order; at most `limit` paths.
  [[nodiscard]] std::vector<Path> ecmp_paths(int src, int dst, std::size_t limit = 1 << 16) const;
  /// Number of equal-cost paths (without listing them).
  [[nodiscard]] std::uint64_t count_ecmp_paths(int src, int dst) const;
  /// Sum of link latencies along a path.
  [[nodiscard]] Time latency(const Path& p) const;

  /// The routing state (built on first use). For the forwarding tables.
  [[nodiscard]] const detail::Router& router() const;

  // --- Failures and degradation (applied after building, before routing).
  /// The vertex named `name` (as in link CSVs: "leaf0", "spine1", "gpu3",
  /// ...). Throws InputError naming a few that exist.
  [[nodiscard]] VertexId find_vertex(std::string_view name) const;
  /// Takes every cable between `a` and `b` out of service, both directions:
  /// route(), ecmp_paths() and the forwarding tables avoid them (routes are
  /// recomputed: the same failures give the same routes). Returns the
  /// directed links failed; throws InputError when there is no such cable.
  int fail_cable(VertexId a, VertexId b);
  /// Every cable between `a` and `b` carries `factor` (0, 1] of its rate,
  /// both directions. Routing still sees the built rate (tables do not
  /// change when a link runs slow); links() reports the degraded one, which
  /// the backends use. Returns the directed links changed; InputError when
  /// there is no such cable or the factor is out of range.
  int degrade_cable(VertexId a, VertexId b, double factor);
  /// The directed links of every cable between `a` and `b` (both directions,
  /// parallel cables too), in id order; empty when there is none.
  [[nodiscard]] std::vector<LinkId> cable_links(VertexId a, VertexId b) const;
  [[nodiscard]] bool failed(LinkId id) const {
    return !failed_.empty() && failed_[static_cast<std::size_t>(id)];
  }
  [[nodiscard]] int failed_links() const;

 private:
  Graph g_;
  std::vector<Link> links_;
  std::vector<VertexId> gpus_;
  std::vector<bool> failed_;  ///< per link; empty: none failed
  mutable std::shared_ptr<const detail::Router> router_;
};

/// A leaf-spine (2-tier fat-tree) cluster of nodes with an NVSwitch each.
/// Every GPU has an NVLink port into its node's NVSwitch and an HCA (its own,
/// or one shared over PCIe) with a port into a leaf switch; leaves connect
/// to every spine.
struct LeafSpineSpec {
  int nodes = 1;
  int gpus_per_node = 8;
  Bandwidth nvlink_bandwidth;  ///< per GPU, per direction
  Time nvlink_latency;
  Bandwidth nic_bandwidth;  ///< per HCA, per direction
  Time nic_latency;         ///< HCA to leaf link
  /// HCAs per node; 0 = one per GPU. Fewer must divide gpus_per_node: GPU i
  /// uses HCA i / (gpus_per_node / hcas_per_node) over a PCIe link.
  int hcas_per_node = 0;
  Bandwidth pcie_bandwidth;  ///< GPU to shared HCA, per direction
  Time pcie_latency;
  int hosts_per_leaf = 32;  ///< HCAs attached to one leaf
  int spines = 1;
  Bandwidth spine_bandwidth;  ///< each leaf-spine link
  Time spine_latency;
};

/// The most directed links a fabric may have: a fabric is built whole
/// whatever the GPU count, at about 210 bytes per directed link (a k = 2000
/// two-tier fat-tree, 4 M links, takes 0.86 GB), so 20 M links is about
/// 4 GiB. docs/scenarios.md, limits.
inline constexpr std::int64_t kMaxBuiltLinks = 20'000'000;
/// Bytes of memory a fabric of `links` directed links takes, about.
inline constexpr std::int64_t kBytesPerBuiltLink = 210;
/// The memory `directed_links` links would take, as the size errors print
/// it: "about 3.9 GiB" (one decimal), or "more than 8 EiB" where the count
/// times kBytesPerBuiltLink overflows (a negative count means that too).
std::string built_links_memory(std::int64_t directed_links);

/// Throws InputError naming cluster.fabric.spines when the fabric would have
/// more than kMaxBuiltLinks links. build_leaf_spine
/// calls it; loaders may call it first.
void check_size(const LeafSpineSpec& spec);
/// Builds the topology; GPU ranks are node-major (rank = node * gpus_per_node + i).
/// Throws InputError naming the field for impossible specs.
Topology build_leaf_spine(const LeafSpineSpec& spec);

/// Leaf oversubscription of a leaf-spine spec: host bandwidth into a full
/// leaf over its up-link bandwidth (1.0 = non-blocking).
double oversubscription(const LeafSpineSpec& spec);

}  // namespace tessera::topology
