#pragma once
// Generators for the cluster fabrics: k-ary fat-trees (2 and 3 tiers, with
// leaf oversubscription and a pod count for multi-pod builds) and
// rail-optimized leaf-spine fabrics, over nodes with an NVSwitch or an NVLink
// mesh inside. All link properties come from the spec (unit types).
//
// Vertex order (and so VertexId and port numbers) is fixed: GPUs by rank, the
// node internals, leaves, spines, cores. GPU ranks are node-major
// (rank = node * gpus + local index); HCAs fill leaves in rank order.
#include "tessera/topology/topology.hpp"

namespace tessera::topology {

struct LinkSpec {
  Bandwidth bandwidth;  ///< per direction
  Time latency;
};

enum class NodeFabric {
  NvSwitch,    ///< every GPU has one link into the node's NVSwitch
  NvLinkMesh,  ///< every GPU pair has its own link (no switch)
};
std::string_view to_string(NodeFabric f);
NodeFabric parse_node_fabric(std::string_view text);  // "nvswitch" | "nvlink-mesh"; throws InputError

struct NodeSpec {
  int gpus = 8;
  NodeFabric fabric = NodeFabric::NvSwitch;
  LinkSpec nvlink;  ///< GPU-NVSwitch link, or each GPU pair's link in a mesh
  /// HCAs per node; 0 = one per GPU (the GPU vertex stands for its HCA).
  /// Fewer HCAs than GPUs must divide the GPUs: GPU i of a node uses HCA
  /// i / (gpus / hcas), reached over its own `pcie` link.
  int hcas = 0;
  LinkSpec pcie;  ///< GPU to shared HCA (used when hcas < gpus)

  [[nodiscard]] int hca_count() const { return hcas == 0 ? gpus : hcas; }
  [[nodiscard]] bool shares_hcas() const { return hca_count() < gpus; }
};

/// A k-ary fat-tree of k-port switches.
///  tiers = 2: k leaves (one per spine port) and k/(r+1) spines; each leaf has
///             k*r/(r+1) host ports and one link to every spine.
///  tiers = 3: `pods` pods (k for the full tree) of k/2 edge (leaf) and
///             k/(r+1) aggregation (spine) switches, each edge linked to every
///             aggregation switch of its pod; aggregation switch j of every pod
///             links to core group j of k/2 cores, so there are
///             k/(r+1) * k/2 cores. With r = 1: k^3/4 hosts, (k/2)^2 cores.
/// r is the leaf oversubscription (host ports : up-links); r+1 must divide k.
struct FatTreeSpec {
  int nodes = 1;
  NodeSpec node;
  int k = 4;
  int tiers = 3;
  int pods = 0;  ///< 3 tiers: pods built (0 = k, the full tree)
  int oversubscription = 1;
  LinkSpec host;        ///< HCA to leaf
  LinkSpec leaf_spine;  ///< leaf (edge) to spine (aggregation)
  LinkSpec spine_core;  ///< aggregation to core (3 tiers)
};

/// HCAs a fat-tree spec can attach (leaves x host ports per leaf); the
/// cluster needs nodes x node.hca_count().
std::int64_t host_capacity(const FatTreeSpec& spec);
/// Host ports of a leaf, k*r/(r+1); throws InputError naming the key for
/// an impossible k or oversubscription.
int host_ports_per_leaf(const FatTreeSpec& spec);
/// Leaf oversubscription of a fat-tree: the host bandwidth into a leaf as
/// built (its k*r/(r+1) host ports, or the cluster's HCAs where fewer fill
/// the one leaf) over the leaf's up-link bandwidth; 1.0 = non-blocking.
double oversubscription(const FatTreeSpec& spec);
/// Spine (aggregation) oversubscription of a 3-tier fat-tree whose HCAs
/// span more than one pod: a spine's leaf links (one per leaf of its pod)
/// over its k/2 core links, by bandwidth; 1.0 = non-blocking. 0 when no
/// traffic crosses the cores (2 tiers, or one pod holds every HCA).
double spine_oversubscription(const FatTreeSpec& spec);
/// Throws InputError naming cluster.fabric.k when the fat-tree would have
/// more links than a Topology can number (LinkId is int32), e.g. a 3-tier
/// tree of a huge radix. build_fat_tree calls it; loaders may call it first.
void check_size(const FatTreeSpec& spec);
/// Throws InputError naming the key and the numbers for an impossible spec.
Topology build_fat_tree(const FatTreeSpec& spec);

/// Rail-optimized leaf-spine: HCA i of every node attaches to rail i (one
/// rail per HCA: per GPU unless the GPUs share HCAs). A rail
/// leaf takes k*r/(r+1) nodes; with more nodes a rail spans several leaves
/// (rail groups of consecutive nodes). Every leaf has one link to each of
/// the k/(r+1) spines, so a spine needs one port per leaf: at most k leaves
/// (gpus x rail groups). Same-rail traffic stays under one leaf while the
/// nodes fit a rail leaf; cross-rail traffic crosses a spine.
///
/// With tiers = 3 (NVIDIA's SuperPOD layout), each rail is a plane of its
/// own: rail i's leaves (one per rail group) link to rail i's group of
/// k/(r+1) spines, each spine with k/2 ports down (at most k/2 rail groups)
/// and k/2 up to the cores; spine j of every rail links to the same k/2
/// cores (core group j). Same-rail traffic crosses at most a spine of its
/// rail; cross-rail traffic crosses a core. (k/2) x k*r/(r+1) nodes.
struct RailOptimizedSpec {
  int nodes = 1;
  NodeSpec node;
  int k = 64;
  int oversubscription = 1;
  int tiers = 2;        ///< 2 or 3
  LinkSpec host;        ///< HCA to rail leaf
  LinkSpec leaf_spine;  ///< rail leaf to spine
  LinkSpec spine_core;  ///< spine to core (tiers = 3)
};

std::int64_t host_capacity(const RailOptimizedSpec& spec);
/// Host ports of a rail leaf, k*r/(r+1): the nodes of a rail group (the
/// leaf takes one HCA of each). Throws as host_ports_per_leaf(FatTreeSpec).
int host_ports_per_leaf(const RailOptimizedSpec& spec);
/// Spine oversubscription of a 3-tier rail-optimized fabric with more than
/// one rail: a spine's leaf links (one per rail group) over its k/2 core
/// links, by bandwidth; 0 with 2 tiers or one rail (no cores).
double spine_oversubscription(const RailOptimizedSpec& spec);
/// Leaf oversubscription of a rail leaf: its hosts' bandwidth (one HCA per
/// node of its rail group, at most k*r/(r+1)) over its up-link bandwidth.
double oversubscription(const RailOptimizedSpec& spec);
/// As check_size(FatTreeSpec) for a rail-optimized fabric (names cluster.fabric.k).
void check_size(const RailOptimizedSpec& spec);
Topology build_rail_optimized(const RailOptimizedSpec& spec);

/// Adds `nodes` nodes' GPUs and internals to an empty topology (used by every
/// generator; exposed for hand-built fabrics). Returns the GPU vertices.
std::vector<VertexId> add_nodes(Topology& t, int nodes, const NodeSpec& node);

/// The vertices that plug into the fabric, node-major (node n's HCA j is
/// entry n * hca_count + j): the GPU vertices themselves when every GPU has
/// its own HCA, otherwise new Hca vertices, each linked to its GPUs over
/// PCIe. Call right after add_nodes. Throws InputError naming
/// cluster.hcas_per_node when the count does not divide the GPUs.
std::vector<VertexId> add_hcas(Topology& t, const std::vector<VertexId>& gpu_v, int nodes, const NodeSpec& node);

}  // namespace tessera::topology
