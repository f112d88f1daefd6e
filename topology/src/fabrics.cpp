#include "tessera/topology/fabrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "tessera/error.hpp"
#include "tessera/index.hpp"

namespace tessera::topology {

namespace {

__extension__ using Int128 = __int128;

/// Directed links a fabric may have (topology.hpp).
constexpr Int128 kMaxLinks = kMaxBuiltLinks;

/// Duplex links inside the nodes and to shared HCAs (128-bit: no overflow).
Int128 node_links(int nodes, const NodeSpec& n) {
  const Int128 g = n.gpus;
  Int128 per_node = n.gpus <= 1 ? 0 : (n.fabric == NodeFabric::NvSwitch ? g : g * (g - 1) / 2);
  if (n.shares_hcas()) per_node += g;
  return per_node * nodes;
}

/// Throws InputError naming `key` when `duplex` links (two directed links
/// each) do not fit in the topology's link ids.
void check_links(Int128 duplex, std::string_view key, int value, std::string_view what) {
  if (2 * duplex <= kMaxLinks) return;
  const std::string count = 2 * duplex > std::numeric_limits<std::int64_t>::max()
                                ? std::string("more than 2^63")
                                : std::to_string(static_cast<std::int64_t>(2 * duplex));
  const std::string memory = built_links_memory(
      2 * duplex > std::numeric_limits<std::int64_t>::max() ? -1 : static_cast<std::int64_t>(2 * duplex));
  throw InputError(fmt::format("{} = {} is too large: {} has {} directed links ({}, only the part the "
                               "cluster uses counted); at most {} can be simulated",
                               key, value, what, count, memory, static_cast<std::int64_t>(kMaxLinks)));
}

void check_positive(std::int64_t v, std::string_view key) {
  if (v <= 0) throw InputError(fmt::format("{} must be positive (got {})", key, v));
}

void check_link(const LinkSpec& l, std::string_view key) {
  if (l.bandwidth.bps() <= 0) {
    throw InputError(fmt::format("{}_bandwidth must be positive (got {} bps)", key, l.bandwidth.bps()));
  }
  if (l.latency < Time::zero()) {
    throw InputError(fmt::format("{}_latency must not be negative (got {} ps)", key, l.latency.ps()));
  }
}

void check_node(const NodeSpec& n, int nodes) {
  check_positive(nodes, "cluster.nodes");
  check_positive(n.gpus, "cluster.gpus_per_node");
  if (n.gpus > 1) check_link(n.nvlink, "cluster.nvlink");
  if (n.hcas < 0 || n.hcas > n.gpus || (n.hcas > 0 && n.gpus % n.hcas != 0)) {
    throw InputError(fmt::format(
        "cluster.hcas_per_node must divide cluster.gpus_per_node (got {} HCAs for {} GPUs per node)", n.hcas,
        n.gpus));
  }
  if (n.shares_hcas()) check_link(n.pcie, "cluster.pcie");
}

/// Ports per leaf: host ports d and up-links u with d = r*u, d + u = k.
struct LeafPorts {
  int down;
  int up;
};

LeafPorts leaf_ports(int k, int r) {
  if (k < 4 || k % 2 != 0)
    throw InputError(fmt::format("cluster.fabric.k must be even and at least 4 (got {})", k));
  if (r < 1) throw InputError(fmt::format("cluster.fabric.oversubscription must be at least 1 (got {})", r));
  // (64-bit: r + 1 overflowed at r = 2^31 - 1; helper 179)
  const std::int64_t parts = static_cast<std::int64_t>(r) + 1;
  if (k % parts != 0) {
    throw InputError(fmt::format(
        "cluster.fabric.oversubscription {} does not divide the ports: a leaf of k = {} ports cannot split "
        "{}:1 into host ports and up-links (r + 1 = {} must divide k)",
        r, k, r, parts));
  }
  return {k / (r + 1) * r, k / (r + 1)};
}

/// `hosts` HCAs at `host` bandwidth each over `ups` up-links of `up`.
double leaf_ratio(std::int64_t hosts, Bandwidth host, int ups, Bandwidth up) {
  const double u = static_cast<double>(ups) * up.bytes_per_second();
  return u > 0 ? static_cast<double>(hosts) * host.bytes_per_second() / u : 0.0;
}

void check_capacity(std::int64_t hosts, std::int64_t capacity, std::string_view what) {
  if (hosts > capacity) {
    throw InputError(fmt::format("cluster: {} HCAs (nodes x hcas_per_node) but {} attaches at most {}", hosts,
                                 what, capacity));
  }
}

}  // namespace

std::string_view to_string(NodeFabric f) {
  switch (f) {
    case NodeFabric::NvSwitch:
      return "nvswitch";
    case NodeFabric::NvLinkMesh:
      return "nvlink-mesh";
  }
  return "?";
}

NodeFabric parse_node_fabric(std::string_view text) {
  if (text == "nvswitch") return NodeFabric::NvSwitch;
  if (text == "nvlink-mesh") return NodeFabric::NvLinkMesh;
  throw InputError(fmt::format("unknown node fabric '{}' (expected nvswitch or nvlink-mesh)", text));
}

std::vector<VertexId> add_nodes(Topology& t, int nodes, const NodeSpec& node) {
  check_node(node, nodes);
  std::vector<VertexId> gpu_v;
  const int gpus = nodes * node.gpus;
  gpu_v.reserve(static_cast<std::size_t>(gpus));
  for (int r = 0; r < gpus; ++r) gpu_v.push_back(t.add_vertex(VertexKind::Gpu, fmt::format("gpu{}", r), r));
  if (node.gpus == 1) return gpu_v;
  for (int n = 0; n < nodes; ++n) {
    const std::size_t first = flat_index(n, node.gpus, 0);
    if (node.fabric == NodeFabric::NvSwitch) {
      const VertexId sw = t.add_vertex(VertexKind::NvSwitch, fmt::format("nvswitch{}", n), n);
      for (int i = 0; i < node.gpus; ++i) {
        t.add_duplex_link(gpu_v[first + static_cast<std::size_t>(i)], sw, node.nvlink.bandwidth,
                          node.nvlink.latency);
      }
    } else {
      for (int i = 0; i < node.gpus; ++i) {
        for (int j = i + 1; j < node.gpus; ++j) {
          t.add_duplex_link(gpu_v[first + static_cast<std::size_t>(i)],
                            gpu_v[first + static_cast<std::size_t>(j)], node.nvlink.bandwidth,
                            node.nvlink.latency);
        }
      }
    }
  }
  return gpu_v;
}

std::vector<VertexId> add_hcas(Topology& t, const std::vector<VertexId>& gpu_v, int nodes, const NodeSpec& node) {
  check_node(node, nodes);
  if (gpu_v.size() != static_cast<std::size_t>(nodes) * static_cast<std::size_t>(node.gpus)) {
    throw InputError(fmt::format("topology: {} GPU vertices for {} nodes of {} GPUs", gpu_v.size(), nodes, node.gpus));
  }
  if (!node.shares_hcas()) return gpu_v;
  const int hcas = node.hca_count();
  const int per_hca = node.gpus / hcas;
  std::vector<VertexId> hca_v;
  hca_v.reserve(static_cast<std::size_t>(nodes) * static_cast<std::size_t>(hcas));
  for (int n = 0; n < nodes; ++n) {
    for (int j = 0; j < hcas; ++j) {
      const int id = n * hcas + j;
      const VertexId h = t.add_vertex(VertexKind::Hca, fmt::format("hca{}", id), id);
      for (int i = j * per_hca; i < (j + 1) * per_hca; ++i) {
        t.add_duplex_link(gpu_v[flat_index(n, node.gpus, i)], h, node.pcie.bandwidth, node.pcie.latency);
      }
      hca_v.push_back(h);
    }
  }
  return hca_v;
}

// --------------------------------------------------------------- fat-tree

std::int64_t host_capacity(const FatTreeSpec& spec) {
  const LeafPorts p = leaf_ports(spec.k, spec.oversubscription);
  if (spec.tiers == 2) return static_cast<std::int64_t>(spec.k) * p.down;
  const int pods = spec.pods == 0 ? spec.k : spec.pods;
  // pods x k/2 x down can pass 2^63 for huge radices: saturate (the size check rejects them).
  const Int128 capacity = static_cast<Int128>(pods) * (spec.k / 2) * p.down;
  return capacity > std::numeric_limits<std::int64_t>::max() ? std::numeric_limits<std::int64_t>::max()
                                                             : static_cast<std::int64_t>(capacity);
}

int host_ports_per_leaf(const FatTreeSpec& spec) { return leaf_ports(spec.k, spec.oversubscription).down; }

double oversubscription(const FatTreeSpec& spec) {
  const LeafPorts p = leaf_ports(spec.k, spec.oversubscription);
  const std::int64_t hcas = static_cast<std::int64_t>(spec.nodes) * spec.node.hca_count();
  return leaf_ratio(std::min<std::int64_t>(p.down, hcas), spec.host.bandwidth, p.up,
                    spec.leaf_spine.bandwidth);
}

namespace {

/// The part of a fat-tree the cluster's hosts use: the leaves they attach
/// to, the pods of those leaves (with all their spines: every used leaf
/// keeps its ECMP paths), and the cores only when more than one pod is used
/// (all of them: every inter-pod path). Unused leaves, pods and cores carry
/// nothing and are not built.
struct FatTreeUse {
  Int128 leaves = 0;  ///< leaves built (the first ones, in order)
  Int128 pods = 0;    ///< pods with a built leaf (3 tiers; 1 for 2 tiers)
  bool cores = false;
};

FatTreeUse fat_tree_use(const FatTreeSpec& spec) {
  const LeafPorts p = leaf_ports(spec.k, spec.oversubscription);
  const Int128 k = spec.k;
  const Int128 hosts = static_cast<Int128>(spec.nodes) * spec.node.hca_count();
  const Int128 leaves_per_pod = spec.tiers == 2 ? k : k / 2;
  FatTreeUse u;
  u.leaves = std::max<Int128>(1, (hosts + p.down - 1) / p.down);
  u.pods = spec.tiers == 2 ? 1 : (u.leaves + leaves_per_pod - 1) / leaves_per_pod;
  u.cores = spec.tiers == 3 && u.pods > 1;
  return u;
}

}  // namespace

double spine_oversubscription(const FatTreeSpec& spec) {
  const FatTreeUse use = fat_tree_use(spec);
  if (!use.cores) return 0.0;
  // A spine's down-links: one to each leaf of its pod (the first pod is
  // full when the cluster uses more than one); its up-links: k/2 cores.
  const int k = spec.k;
  return leaf_ratio(std::min<std::int64_t>(k / 2, static_cast<std::int64_t>(use.leaves)), spec.leaf_spine.bandwidth,
                    k / 2, spec.spine_core.bandwidth);
}

void check_size(const FatTreeSpec& spec) {
  const LeafPorts p = leaf_ports(spec.k, spec.oversubscription);
  const Int128 k = spec.k;
  const FatTreeUse use = fat_tree_use(spec);
  Int128 duplex = static_cast<Int128>(spec.nodes) * spec.node.hca_count() + use.leaves * p.up +
                  node_links(spec.nodes, spec.node);
  if (use.cores) duplex += use.pods * p.up * (k / 2);
  check_links(duplex, "cluster.fabric.k", spec.k,
              fmt::format("a {}-tier fat-tree of {}-port switches{}", spec.tiers, spec.k,
                          spec.tiers == 3 ? fmt::format(" ({} pods used)", static_cast<std::int64_t>(use.pods)) : ""));
}

Topology build_fat_tree(const FatTreeSpec& spec) {
  if (spec.tiers != 2 && spec.tiers != 3) {
    throw InputError(fmt::format("cluster.fabric.tiers must be 2 or 3 (got {})", spec.tiers));
  }
  const int k = spec.k;
  const LeafPorts p = leaf_ports(k, spec.oversubscription);
  if (spec.tiers == 3 && (spec.pods < 0 || spec.pods > k)) {
    throw InputError(
        fmt::format("cluster.fabric.pods must be between 1 and k = {}, or 0 for k (got {})", k, spec.pods));
  }
  check_node(spec.node, spec.nodes);
  check_link(spec.host, "cluster.fabric.host");
  check_link(spec.leaf_spine, "cluster.fabric.leaf_spine");
  if (spec.tiers == 3) check_link(spec.spine_core, "cluster.fabric.spine_core");
  check_size(spec);  // from here on every count below fits in int
  const std::int64_t hosts = static_cast<std::int64_t>(spec.nodes) * spec.node.hca_count();
  check_capacity(
      hosts, host_capacity(spec),
      fmt::format("a {}-tier fat-tree of k = {} ports (oversubscription {}{})", spec.tiers, k,
                  spec.oversubscription,
                  spec.tiers == 3 ? fmt::format(", {} pods", spec.pods == 0 ? k : spec.pods) : ""));

  Topology t;
  const auto gpu_v = add_nodes(t, spec.nodes, spec.node);
  const auto host_v = add_hcas(t, gpu_v, spec.nodes, spec.node);
  // Only the part the hosts use (fat_tree_use): `pods` and k bound the
  // tree's capacity, not what is built.
  const FatTreeUse use = fat_tree_use(spec);
  const int leaves = static_cast<int>(use.leaves);
  const int pods = static_cast<int>(use.pods);
  const int leaves_per_pod = spec.tiers == 2 ? k : k / 2;
  const int spines_per_pod = p.up;
  std::vector<VertexId> leaf_v;
  std::vector<VertexId> spine_v;
  leaf_v.reserve(static_cast<std::size_t>(leaves));
  spine_v.reserve(static_cast<std::size_t>(pods) * static_cast<std::size_t>(spines_per_pod));
  for (int l = 0; l < leaves; ++l) {
    leaf_v.push_back(t.add_vertex(VertexKind::Leaf, fmt::format("leaf{}", l), l));
  }
  for (int s = 0; s < pods * spines_per_pod; ++s) {
    spine_v.push_back(t.add_vertex(VertexKind::Spine, fmt::format("spine{}", s), s));
  }
  std::vector<VertexId> core_v;
  if (use.cores) {
    for (int c = 0; c < spines_per_pod * (k / 2); ++c) {
      core_v.push_back(t.add_vertex(VertexKind::Core, fmt::format("core{}", c), c));
    }
  }
  for (std::size_t r = 0; r < host_v.size(); ++r) {
    t.add_duplex_link(host_v[r], leaf_v[r / static_cast<std::size_t>(p.down)], spec.host.bandwidth,
                      spec.host.latency);
  }
  for (int pod = 0; pod < pods; ++pod) {
    for (int l = 0; l < std::min(leaves_per_pod, leaves - pod * leaves_per_pod); ++l) {
      for (int s = 0; s < spines_per_pod; ++s) {
        t.add_duplex_link(leaf_v[flat_index(pod, leaves_per_pod, l)],
                          spine_v[flat_index(pod, spines_per_pod, s)], spec.leaf_spine.bandwidth,
                          spec.leaf_spine.latency);
      }
    }
  }
  if (use.cores) {
    for (int pod = 0; pod < pods; ++pod) {
      for (int s = 0; s < spines_per_pod; ++s) {
        for (int c = 0; c < k / 2; ++c) {
          t.add_duplex_link(spine_v[flat_index(pod, spines_per_pod, s)], core_v[flat_index(s, k / 2, c)],
                            spec.spine_core.bandwidth, spec.spine_core.latency);
        }
      }
    }
  }
  return t;
}

// --------------------------------------------------------- rail-optimized

namespace {
/// Rail groups of a rail-optimized fabric: consecutive nodes sharing each
/// rail's leaf, p.down per leaf (in 64 bits: nodes + down - 1 can pass
/// INT_MAX).
std::int64_t rail_groups(const RailOptimizedSpec& spec, const LeafPorts& p) {
  return (static_cast<std::int64_t>(spec.nodes) + p.down - 1) / p.down;
}
}  // namespace

int host_ports_per_leaf(const RailOptimizedSpec& spec) {
  return leaf_ports(spec.k, spec.oversubscription).down;
}

std::int64_t host_capacity(const RailOptimizedSpec& spec) {
  const LeafPorts p = leaf_ports(spec.k, spec.oversubscription);
  const int rails = std::max(1, spec.node.hca_count());
  // 3 tiers: a rail's spines take k/2 rail groups (their other k/2 ports go
  // to the cores), each of `rails` leaves.
  if (spec.tiers == 3) return static_cast<std::int64_t>(spec.k / 2) * p.down * rails;
  // At most k leaves (one spine port each), one leaf per rail per rail group.
  return static_cast<std::int64_t>(spec.k / rails) * p.down * rails;
}

double spine_oversubscription(const RailOptimizedSpec& spec) {
  if (spec.tiers != 3 || spec.node.hca_count() <= 1) return 0.0;
  const LeafPorts p = leaf_ports(spec.k, spec.oversubscription);
  const std::int64_t groups = rail_groups(spec, p);
  return leaf_ratio(std::min<std::int64_t>(spec.k / 2, groups), spec.leaf_spine.bandwidth, spec.k / 2,
                    spec.spine_core.bandwidth);
}

double oversubscription(const RailOptimizedSpec& spec) {
  const LeafPorts p = leaf_ports(spec.k, spec.oversubscription);
  return leaf_ratio(std::min<std::int64_t>(p.down, spec.nodes), spec.host.bandwidth, p.up,
                    spec.leaf_spine.bandwidth);
}

void check_size(const RailOptimizedSpec& spec) {
  const LeafPorts p = leaf_ports(spec.k, spec.oversubscription);
  // At most k leaves (more are rejected by the builder), each linked to every
  // spine; with 3 tiers at most k/2 x rails leaves, one link to each spine of
  // their rail, and each rail's spines k/2 core links.
  const Int128 rails = std::max(1, spec.node.hca_count());
  const Int128 leaves = spec.tiers == 3 ? static_cast<Int128>(spec.k / 2) * rails : spec.k;
  Int128 duplex = static_cast<Int128>(spec.nodes) * spec.node.hca_count() + leaves * p.up +
                  node_links(spec.nodes, spec.node);
  if (spec.tiers == 3) duplex += rails * p.up * (spec.k / 2);
  check_links(
      duplex, "cluster.fabric.k", spec.k,
      fmt::format("a {}rail-optimized fabric of {}-port switches", spec.tiers == 3 ? "3-tier " : "", spec.k));
}

namespace {

/// The 3-tier rail-optimized fabric (RailOptimizedSpec): rail i's leaves
/// are leaf{i * groups + g} for rail group g, its spines spine{i * up + j},
/// and spine j of every rail links to cores core{j * k/2 + c}.
Topology build_rail_planes(const RailOptimizedSpec& spec, const LeafPorts& p) {
  const int rails = spec.node.hca_count();
  const std::int64_t groups = rail_groups(spec, p);
  if (groups > spec.k / 2) {
    throw InputError(
        fmt::format("cluster: {} nodes need {} rail groups of {} nodes but a 3-tier rail-optimized fabric of "
                    "k = {} ports "
                    "takes at most k/2 = {} ({} HCAs)",
                    spec.nodes, groups, p.down, spec.k, spec.k / 2, host_capacity(spec)));
  }
  Topology t;
  const auto gpu_v = add_nodes(t, spec.nodes, spec.node);
  const auto host_v = add_hcas(t, gpu_v, spec.nodes, spec.node);
  const auto g = static_cast<int>(groups);
  std::vector<VertexId> leaf_v;
  leaf_v.reserve(static_cast<std::size_t>(rails) * static_cast<std::size_t>(g));
  for (int l = 0; l < rails * g; ++l)
    leaf_v.push_back(t.add_vertex(VertexKind::Leaf, fmt::format("leaf{}", l), l));
  for (int n = 0; n < spec.nodes; ++n) {
    for (int i = 0; i < rails; ++i) {
      t.add_duplex_link(host_v[flat_index(n, rails, i)], leaf_v[flat_index(i, g, n / p.down)],
                        spec.host.bandwidth, spec.host.latency);
    }
  }
  // Rails meet only in the cores: none with one rail (then its spines
  // join its leaves, and one leaf needs no spine).
  const bool cores = rails > 1;
  std::vector<VertexId> spine_v;
  if (rails * g > 1) {
    for (int sp = 0; sp < rails * p.up; ++sp) {
      spine_v.push_back(t.add_vertex(VertexKind::Spine, fmt::format("spine{}", sp), sp));
    }
    for (int i = 0; i < rails; ++i) {
      for (int l = 0; l < g; ++l) {
        for (int j = 0; j < p.up; ++j) {
          t.add_duplex_link(leaf_v[flat_index(i, g, l)], spine_v[flat_index(i, p.up, j)],
                            spec.leaf_spine.bandwidth, spec.leaf_spine.latency);
        }
      }
    }
  }
  if (cores) {
    std::vector<VertexId> core_v;
    core_v.reserve(static_cast<std::size_t>(p.up) * static_cast<std::size_t>(spec.k / 2));
    for (int c = 0; c < p.up * (spec.k / 2); ++c) {
      core_v.push_back(t.add_vertex(VertexKind::Core, fmt::format("core{}", c), c));
    }
    for (int i = 0; i < rails; ++i) {
      for (int j = 0; j < p.up; ++j) {
        for (int c = 0; c < spec.k / 2; ++c) {
          t.add_duplex_link(spine_v[flat_index(i, p.up, j)], core_v[flat_index(j, spec.k / 2, c)],
                            spec.spine_core.bandwidth, spec.spine_core.latency);
        }
      }
    }
  }
  return t;
}

}  // namespace

Topology build_rail_optimized(const RailOptimizedSpec& spec) {
  const LeafPorts p = leaf_ports(spec.k, spec.oversubscription);
  if (spec.tiers != 2 && spec.tiers != 3) {
    throw InputError(fmt::format("cluster.fabric.tiers must be 2 or 3 (got {})", spec.tiers));
  }
  check_node(spec.node, spec.nodes);
  check_link(spec.host, "cluster.fabric.host");
  check_link(spec.leaf_spine, "cluster.fabric.leaf_spine");
  if (spec.tiers == 3) check_link(spec.spine_core, "cluster.fabric.spine_core");
  check_size(spec);
  if (spec.tiers == 3) return build_rail_planes(spec, p);
  const int rails = spec.node.hca_count();
  const std::int64_t groups = rail_groups(spec, p);
  const std::int64_t leaves = groups * rails;
  if (leaves > spec.k) {
    throw InputError(fmt::format(
        "cluster: {} nodes x {} HCAs need {} rail leaves ({} rail groups of {} nodes) but a spine of k = {} "
        "ports attaches at most {} leaves ({} HCAs)",
        spec.nodes, rails, leaves, groups, p.down, spec.k, spec.k, host_capacity(spec)));
  }
  Topology t;
  const auto gpu_v = add_nodes(t, spec.nodes, spec.node);
  const auto host_v = add_hcas(t, gpu_v, spec.nodes, spec.node);
  std::vector<VertexId> leaf_v;
  leaf_v.reserve(static_cast<std::size_t>(leaves));
  for (int l = 0; l < leaves; ++l)
    leaf_v.push_back(t.add_vertex(VertexKind::Leaf, fmt::format("leaf{}", l), l));
  for (int n = 0; n < spec.nodes; ++n) {
    for (int i = 0; i < rails; ++i) {
      const std::size_t leaf = flat_index(n / p.down, rails, i);
      t.add_duplex_link(host_v[flat_index(n, rails, i)], leaf_v[leaf], spec.host.bandwidth,
                        spec.host.latency);
    }
  }
  if (leaves > 1) {
    for (int s = 0; s < p.up; ++s) {
      const VertexId sp = t.add_vertex(VertexKind::Spine, fmt::format("spine{}", s), s);
      for (VertexId l : leaf_v) t.add_duplex_link(l, sp, spec.leaf_spine.bandwidth, spec.leaf_spine.latency);
    }
  }
  return t;
}

}  // namespace tessera::topology
