#include "tessera/topology/fabrics.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <set>
#include <string>

#include "tessera/error.hpp"
#include "tessera/topology/routing.hpp"

using namespace tessera;
using namespace tessera::topology;

namespace {

const Bandwidth kB = parse_bandwidth("400Gbps");

LinkSpec spec_link(const char* bw = "400Gbps", const char* lat = "1us") {
  return {parse_bandwidth(bw), parse_time(lat)};
}

/// A fully populated fat-tree of single-GPU nodes with uniform 400 Gb/s links.
FatTreeSpec fat_tree(int k, int tiers, int r = 1) {
  FatTreeSpec s;
  s.k = k;
  s.tiers = tiers;
  s.oversubscription = r;
  s.node.gpus = 1;
  s.host = spec_link();
  s.leaf_spine = spec_link();
  s.spine_core = spec_link();
  s.nodes = static_cast<int>(host_capacity(s));
  return s;
}

template <typename F>
void expect_input_error(F&& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

VertexKind kind_after(const Topology& t, LinkId l) { return t.vertex(t.link(l).dst).kind; }

/// A rail-optimized fabric of `nodes` 8-GPU NVSwitch nodes and k-port
/// switches, 400 Gb/s links.
RailOptimizedSpec rail_spec(int nodes, int k) {
  RailOptimizedSpec s;
  s.nodes = nodes;
  s.node.gpus = 8;
  s.node.nvlink = spec_link("450GB/s", "500ns");
  s.k = k;
  s.host = spec_link();
  s.leaf_spine = spec_link();
  return s;
}

}  // namespace

TEST(FatTree, KAryCountsMatchTheFormulas) {
  for (int k : {4, 6, 8, 12}) {
    const auto t = build_fat_tree(fat_tree(k, 3));
    EXPECT_EQ(t.num_gpus(), k * k * k / 4) << "k=" << k;
    EXPECT_EQ(t.count(VertexKind::Core), (k / 2) * (k / 2));
    EXPECT_EQ(t.count(VertexKind::Spine), k * k / 2);
    EXPECT_EQ(t.count(VertexKind::Leaf), k * k / 2);
    EXPECT_EQ(t.count(VertexKind::NvSwitch), 0);
    const auto links = t.count_links();
    // Directed: hosts, k pods x k/2 x k/2 edge-aggregation, same again to cores.
    EXPECT_EQ(links[static_cast<std::size_t>(LinkTier::Host)], 2 * k * k * k / 4);
    EXPECT_EQ(links[static_cast<std::size_t>(LinkTier::LeafSpine)], 2 * k * k * k / 4);
    EXPECT_EQ(links[static_cast<std::size_t>(LinkTier::SpineCore)], 2 * k * k * k / 4);
  }
  const auto two = build_fat_tree(fat_tree(8, 2));
  EXPECT_EQ(two.num_gpus(), 8 * 8 / 2);
  EXPECT_EQ(two.count(VertexKind::Leaf), 8);
  EXPECT_EQ(two.count(VertexKind::Spine), 4);
}

TEST(FatTree, InterPodPathCountIsHalfKSquared) {
  for (int k : {4, 6, 8}) {
    const auto t = build_fat_tree(fat_tree(k, 3));
    const int per_pod = k * k / 4;
    const int h = k / 2;
    EXPECT_EQ(t.count_ecmp_paths(0, per_pod), static_cast<std::uint64_t>(h * h)) << "k=" << k;
    EXPECT_EQ(t.count_ecmp_paths(0, t.num_gpus() - 1), static_cast<std::uint64_t>(h * h));
    EXPECT_EQ(t.ecmp_paths(0, per_pod).size(), static_cast<std::size_t>(h * h));
    EXPECT_EQ(t.count_ecmp_paths(0, h), static_cast<std::uint64_t>(h));  // same pod, other edge
    EXPECT_EQ(t.count_ecmp_paths(0, 1), 1U);                             // same edge
    const auto path = t.route(0, per_pod);
    const auto tiers = t.tier_counts(path);
    EXPECT_EQ(tiers[static_cast<std::size_t>(LinkTier::Host)], 2);
    EXPECT_EQ(tiers[static_cast<std::size_t>(LinkTier::LeafSpine)], 2);
    EXPECT_EQ(tiers[static_cast<std::size_t>(LinkTier::SpineCore)], 2);
    EXPECT_EQ(t.latency(path), parse_time("6us"));
    // Every ECMP path is distinct and as long as the route.
    std::set<Path> distinct;
    for (const auto& p : t.ecmp_paths(0, per_pod)) {
      EXPECT_EQ(p.size(), path.size());
      distinct.insert(p);
    }
    EXPECT_EQ(distinct.size(), static_cast<std::size_t>(h * h));
  }
}

TEST(FatTree, BisectionBandwidthMatchesTheFormula) {
  // hosts/2 x B / r with uniform links; r+1 must divide k = 8: r = 1, 3, 7.
  for (int tiers : {2, 3}) {
    for (int r : {1, 3, 7}) {
      const auto spec = fat_tree(8, tiers, r);
      const auto t = build_fat_tree(spec);
      const std::int64_t hosts = t.num_gpus();
      EXPECT_EQ(bisection_bandwidth(t).bps(), hosts / 2 * kB.bps() / r) << tiers << " tiers, r=" << r;
    }
  }
}

namespace {
/// 4 nodes of 8 GPUs, 16 HCAs per leaf (two leaves), 4 spines: 4:1.
LeafSpineSpec two_leaves_of_two_nodes() {
  LeafSpineSpec s;
  s.nodes = 4;
  s.gpus_per_node = 8;
  s.nvlink_bandwidth = parse_bandwidth("450GB/s");
  s.nic_bandwidth = kB;
  s.hosts_per_leaf = 16;
  s.spines = 4;
  s.spine_bandwidth = kB;
  return s;
}
}  // namespace

TEST(LeafSpine, BisectionFollowsTheOversubscription) {
  LeafSpineSpec s = two_leaves_of_two_nodes();
  EXPECT_DOUBLE_EQ(oversubscription(s), 4.0);
  // 32 HCAs, two leaves: 16 x 400 Gb/s / 4.
  EXPECT_EQ(bisection_bandwidth(build_leaf_spine(s)).bps(), 16 * kB.bps() / 4);
  s.spines = 16;
  EXPECT_EQ(bisection_bandwidth(build_leaf_spine(s)).bps(), 16 * kB.bps());
  // A failed leaf-spine cable carries nothing: one uplink fewer across the
  // cut (helper 68: it was still counted); a GPU's failed HCA cable takes
  // that GPU's traffic out of the flow (15 of leaf0's 16 hosts can send).
  Topology t = build_leaf_spine(s);
  t.fail_cable(t.find_vertex("leaf0"), t.find_vertex("spine0"));
  EXPECT_EQ(bisection_bandwidth(t).bps(), 15 * kB.bps());
  Topology u = build_leaf_spine(s);
  u.fail_cable(u.gpu(0), u.find_vertex("leaf0"));
  EXPECT_EQ(bisection_bandwidth(u).bps(), 15 * kB.bps());
}

// Adaptive routing (route_least_loaded): with no load it is the static
// route; with load it takes the equal-cost path whose most loaded link is
// least, looking past the source leaf's up-links to the spine's link down
// to the destination leaf.
TEST(LeafSpine, LeastLoadedRouteAvoidsLoadedLinksOnTheWholePath) {
  LeafSpineSpec s = two_leaves_of_two_nodes();
  const Topology t = build_leaf_spine(s);  // leaf0: GPUs 0-15, leaf1: 16-31
  std::vector<int> load(t.links().size(), 0);
  const auto by_load = [&](LinkId l) { return load[static_cast<std::size_t>(l)]; };
  const Path fixed = t.route(0, 16);
  EXPECT_EQ(t.route_least_loaded(0, 16, by_load), fixed);
  // Load the static route's spine on its way down: the flow goes by another.
  const auto spine_of = [&](const Path& p) { return t.vertex(t.link(p[1]).dst).name; };
  for (LinkId l : fixed) ++load[static_cast<std::size_t>(l)];
  const Path other = t.route_least_loaded(0, 16, by_load);
  EXPECT_NE(spine_of(other), spine_of(fixed));
  ASSERT_EQ(other.size(), fixed.size());
  // Only the down-link of the static route's spine loaded (a flow from
  // another leaf into leaf1): the up-links are all free, the path still
  // avoids that spine.
  std::fill(load.begin(), load.end(), 0);
  ++load[static_cast<std::size_t>(fixed[2])];
  EXPECT_NE(spine_of(t.route_least_loaded(0, 16, by_load)), spine_of(fixed));
  // Inside a node there is one path.
  EXPECT_EQ(t.route_least_loaded(0, 1, by_load), t.route(0, 1));
}

TEST(FatTree, LeafOversubscriptionCountsTheHostsALeafHolds) {
  FatTreeSpec s = fat_tree(12, 2, 3);  // 9 host ports and 3 up-links per leaf
  EXPECT_EQ(host_ports_per_leaf(s), 9);
  EXPECT_DOUBLE_EQ(oversubscription(s), 3.0);
  s.leaf_spine = spec_link("800Gbps");  // up-links twice the host links
  EXPECT_DOUBLE_EQ(oversubscription(s), 1.5);
  s.nodes = 6;  // six HCAs on the one leaf: 6 x 400 / (3 x 800)
  EXPECT_DOUBLE_EQ(oversubscription(s), 1.0);
}

TEST(RailOptimized, LeafOversubscriptionCountsTheNodesOfARailGroup) {
  RailOptimizedSpec s = rail_spec(24, 16);
  s.oversubscription = 3;  // 12 host ports, 4 up-links per rail leaf; two rail groups
  EXPECT_DOUBLE_EQ(oversubscription(s), 3.0);
  s.nodes = 2;  // two hosts on each rail leaf
  EXPECT_DOUBLE_EQ(oversubscription(s), 0.5);
}

TEST(FatTree, DModKSpreadsAShiftPermutationEvenly) {
  // Every shift permutation i -> i + s: no up-link of a leaf or spine carries
  // more than ceil(flows going up through that switch / its up-links).
  for (int tiers : {2, 3}) {
    const auto t = build_fat_tree(fat_tree(8, tiers));
    const int n = t.num_gpus();
    for (int shift = 1; shift < n; ++shift) {
      std::vector<int> flows(t.links().size(), 0);
      for (int i = 0; i < n; ++i) {
        for (LinkId l : t.route(i, (i + shift) % n)) ++flows[static_cast<std::size_t>(l)];
      }
      for (VertexId v = 0; v < t.num_vertices(); ++v) {
        const VertexKind kind = t.vertex(v).kind;
        if (kind != VertexKind::Leaf && kind != VertexKind::Spine) continue;
        const VertexKind up = kind == VertexKind::Leaf ? VertexKind::Spine : VertexKind::Core;
        int total = 0;
        int uplinks = 0;
        int worst = 0;
        for (auto [e, end] = boost::out_edges(v, t.graph()); e != end; ++e) {
          if (t.vertex(boost::target(*e, t.graph())).kind != up) continue;
          const int f = flows[static_cast<std::size_t>(t.graph()[*e].id)];
          total += f;
          ++uplinks;
          worst = std::max(worst, f);
        }
        if (uplinks == 0) continue;
        EXPECT_LE(worst, (total + uplinks - 1) / uplinks)
            << tiers << " tiers, shift " << shift << ", " << t.vertex(v).name;
      }
    }
  }
}

TEST(ForwardingTables, FollowingTheTablesGivesTheRoute) {
  FatTreeSpec ft = fat_tree(6, 3);
  ft.node.gpus = 2;  // NVSwitch inside nodes: intra-node traffic stays off the fabric
  ft.node.nvlink = spec_link("450GB/s", "500ns");
  ft.nodes = static_cast<int>(host_capacity(ft) / 2);
  RailOptimizedSpec rail;
  rail.nodes = 6;
  rail.node.gpus = 4;
  rail.node.nvlink = spec_link("450GB/s", "500ns");
  rail.k = 8;
  rail.host = spec_link();
  rail.leaf_spine = spec_link();
  for (const auto& t : {build_fat_tree(ft), build_fat_tree(fat_tree(8, 2, 3)), build_rail_optimized(rail)}) {
    const auto lft = build_forwarding_tables(t);
    EXPECT_EQ(lft.num_lids(), t.num_gpus() + 1);
    EXPECT_EQ(lft.switches().size(),
              static_cast<std::size_t>(t.count(VertexKind::Leaf) + t.count(VertexKind::Spine) +
                                       t.count(VertexKind::Core)));
    for (int s = 0; s < t.num_gpus(); ++s) {
      for (int d = 0; d < t.num_gpus(); ++d)
        ASSERT_EQ(follow_tables(t, lft, s, d), t.route(s, d)) << s << "->" << d;
    }
    // Every fabric switch can reach every HCA.
    for (std::size_t i = 0; i < lft.switches().size(); ++i) {
      for (int lid = 1; lid < lft.num_lids(); ++lid) ASSERT_NE(lft.port(i, lid), kNoRoute);
      EXPECT_EQ(lft.port(i, 0), kNoRoute);
    }
  }
}

TEST(ForwardingTables, SwitchWithMorePortsThanSixteenBitsNumberIsRefused) {
  // One leaf with 65,535 GPUs: port 65,535 would be kNoRoute and the next
  // ones would wrap onto ports 1, 2, ... (tables that loop; helper 57).
  auto star = [](int gpus) {
    Topology t;
    const VertexId leaf = t.add_vertex(VertexKind::Leaf, "leaf0", 0);
    for (int i = 0; i < gpus; ++i) {
      t.add_duplex_link(t.add_vertex(VertexKind::Gpu, "gpu" + std::to_string(i), i), leaf,
                        Bandwidth::gbps(100), Time::from_us(1));
    }
    return t;
  };
  try {
    (void)build_forwarding_tables(star(65535));
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(
        e.what(),
        "forwarding tables: leaf0 has 65535 ports; a switch's ports are numbered in 16 bits (at most "
        "65534): split the fabric over more switches (fewer hosts_per_leaf, a smaller fabric.k)");
  }
}

TEST(ForwardingTables, LeafTablesSpreadDestinationsOverUpLinks) {
  const auto t = build_fat_tree(fat_tree(8, 3));
  const auto lft = build_forwarding_tables(t);
  const VertexId leaf0 = t.link(t.route(0, 1)[0]).dst;
  const int idx = lft.switch_index(leaf0);
  ASSERT_GE(idx, 0);
  // Ports 1-4 go down to hosts 0-3, 5-8 up; remote LIDs cycle over 5..8.
  std::map<PortNo, int> use;
  for (int d = 4; d < t.num_gpus(); ++d) ++use[lft.port(static_cast<std::size_t>(idx), lid_of_rank(d))];
  ASSERT_EQ(use.size(), 4U);
  for (auto [port, n] : use) {
    EXPECT_GE(port, 5);
    EXPECT_EQ(n, (t.num_gpus() - 4) / 4);
  }
  for (int d = 0; d < 4; ++d) EXPECT_EQ(lft.port(static_cast<std::size_t>(idx), lid_of_rank(d)), d + 1);
}

TEST(RailOptimized, SameRailStaysUnderOneLeafCrossRailCrossesASpine) {
  const auto t = build_rail_optimized(rail_spec(4, 16));  // 8 nodes per rail leaf, 8 spines
  EXPECT_EQ(t.count(VertexKind::Leaf), 8);
  EXPECT_EQ(t.count(VertexKind::Spine), 8);
  EXPECT_EQ(t.count(VertexKind::NvSwitch), 4);
  const Path same_rail = t.route(3, 8 + 3);  // GPU 3 of node 0 -> GPU 3 of node 1
  ASSERT_EQ(same_rail.size(), 2U);
  EXPECT_EQ(kind_after(t, same_rail[0]), VertexKind::Leaf);
  const Path cross = t.route(3, 8 + 4);
  ASSERT_EQ(cross.size(), 4U);
  EXPECT_EQ(kind_after(t, cross[1]), VertexKind::Spine);
  EXPECT_EQ(t.route(3, 4).size(), 2U);  // intra-node: NVSwitch
  EXPECT_EQ(kind_after(t, t.route(3, 4)[0]), VertexKind::NvSwitch);
}

// D-mod-k numbers a rail leaf's hosts in leaf-major order, not by rank:
// rail 1's hosts are ranks 1, 9, 17, ... (8 GPUs per node), which mod 16
// spines would reach spines 1 and 9 only, 8 flows on each of their
// down-links into rail 1's leaf. Every shift from rail 0 to rail 1 (node n
// to node n + s, s = 1..15: 16 flows between nodes) is spread one flow per
// spine up- and down-link, as on a full fat-tree.
TEST(RailOptimized, CrossRailShiftUsesEverySpineOnce) {
  const RailOptimizedSpec s = rail_spec(16, 32);  // 16 nodes per rail leaf, 16 spines
  const auto t = build_rail_optimized(s);
  ASSERT_EQ(t.count(VertexKind::Spine), 16);
  for (int shift = 1; shift < s.nodes; ++shift) {
    std::vector<int> flows(t.links().size(), 0);
    for (int node = 0; node < s.nodes; ++node) {
      for (LinkId l : t.route(8 * node, 8 * ((node + shift) % s.nodes) + 1))
        ++flows[static_cast<std::size_t>(l)];
    }
    int spine_links = 0;
    for (std::size_t l = 0; l < flows.size(); ++l) {
      if (t.tier(static_cast<LinkId>(l)) != LinkTier::LeafSpine || flows[l] == 0) continue;
      ++spine_links;
      EXPECT_EQ(flows[l], 1) << "shift " << shift << ", link " << l;
    }
    EXPECT_EQ(spine_links, 2 * 16) << "shift " << shift;  // 16 up from rail 0's leaf, 16 down into rail 1's
  }
  // The forwarding tables agree (one BFS per leaf, the same numbering).
  const auto lft = build_forwarding_tables(t);
  for (int node = 0; node < s.nodes; ++node)
    EXPECT_EQ(follow_tables(t, lft, 0, 8 * node + 1), t.route(0, 8 * node + 1));
}

// Three tiers (a plane per rail, NVIDIA's SuperPOD layout): k = 16, 8 nodes
// per rail leaf, 3 rail groups (20 nodes) of 8 rails: 24 leaves, 8 spines
// per rail (64), 8 x 8 cores. Same-rail traffic crosses one spine of its
// rail, never a core; cross-rail traffic crosses a core. k/2 = 8 rail
// groups at most: 64 nodes; 65 are refused. A rail ring's shift between
// rail groups puts one flow on each spine link it uses, as on a full tree.
TEST(RailOptimized, ThreeTiersAreRailPlanesJoinedByCores) {
  RailOptimizedSpec s = rail_spec(20, 16);
  s.tiers = 3;
  s.spine_core = spec_link();
  EXPECT_EQ(host_capacity(s), 8 * 8 * 8);
  const auto t = build_rail_optimized(s);
  EXPECT_EQ(t.count(VertexKind::Leaf), 24);
  EXPECT_EQ(t.count(VertexKind::Spine), 64);
  EXPECT_EQ(t.count(VertexKind::Core), 64);
  const auto links = t.count_links();
  EXPECT_EQ(links[static_cast<std::size_t>(LinkTier::LeafSpine)], 2 * 24 * 8);
  EXPECT_EQ(links[static_cast<std::size_t>(LinkTier::SpineCore)], 2 * 64 * 8);
  const Path same_group = t.route(3, 8 + 3);  // rail 3 of nodes 0 and 1: one leaf
  EXPECT_EQ(same_group.size(), 2U);
  const Path same_rail = t.route(3, 8 * 8 + 3);  // rail 3 of nodes 0 and 8: rail groups 0 and 1
  ASSERT_EQ(same_rail.size(), 4U);
  EXPECT_EQ(kind_after(t, same_rail[1]), VertexKind::Spine);
  const Path cross = t.route(3, 8 * 8 + 4);  // rail 3 to rail 4 of another group
  ASSERT_EQ(cross.size(), 6U);
  EXPECT_EQ(kind_after(t, cross[2]), VertexKind::Core);
  // A rail ring's hop from group 0 to group 1 on every rail at once: one
  // flow per spine link used, none through a core.
  for (int shift = 1; shift < 8; ++shift) {
    std::vector<int> flows(t.links().size(), 0);
    for (int node = 0; node < 8; ++node) {
      for (int rail = 0; rail < 8; ++rail) {
        for (LinkId l : t.route(8 * node + rail, 8 * (8 + (node + shift) % 8) + rail))
          ++flows[static_cast<std::size_t>(l)];
      }
    }
    for (std::size_t l = 0; l < flows.size(); ++l) {
      const LinkTier tier = t.tier(static_cast<LinkId>(l));
      EXPECT_LE(flows[l], tier == LinkTier::SpineCore   ? 0
                          : tier == LinkTier::LeafSpine ? 1
                                                        : 8)
          << "link " << l;
    }
  }
  const auto lft = build_forwarding_tables(t);
  EXPECT_EQ(follow_tables(t, lft, 3, 8 * 8 + 4), cross);
  s.nodes = 65;
  EXPECT_THROW((void)build_rail_optimized(s), InputError);
  s.nodes = 64;
  EXPECT_EQ(build_rail_optimized(s).count(VertexKind::Leaf), 64);
  // Two tiers of the same switches hold 16 / 8 = 2 rail groups.
  s.tiers = 2;
  s.nodes = 20;
  EXPECT_EQ(host_capacity(s), 2 * 8 * 8);
  EXPECT_THROW((void)build_rail_optimized(s), InputError);
  // Spines whose core links are half as fast: 2:1 between rail groups' spines
  // and cores (8 down-links at 400 Gb/s, 8 up at 200).
  s.tiers = 3;
  s.spine_core = spec_link("200Gbps");
  EXPECT_DOUBLE_EQ(spine_oversubscription(s), 3.0 / 8.0 * 2.0);
  s.nodes = 64;
  EXPECT_DOUBLE_EQ(spine_oversubscription(s), 2.0);
}

TEST(NodeInternals, NvLinkMeshGivesDirectGpuLinks) {
  FatTreeSpec s = fat_tree(4, 2);
  s.node.gpus = 4;
  s.node.fabric = NodeFabric::NvLinkMesh;
  s.node.nvlink = spec_link("100GB/s", "300ns");
  s.nodes = 2;
  const auto t = build_fat_tree(s);
  EXPECT_EQ(t.count(VertexKind::NvSwitch), 0);
  EXPECT_EQ(t.count_links()[static_cast<std::size_t>(LinkTier::NvLink)], 2 * 2 * 6);
  const Path p = t.route(1, 3);
  ASSERT_EQ(p.size(), 1U);
  EXPECT_EQ(t.latency(p), parse_time("300ns"));
  EXPECT_EQ(parse_node_fabric("nvlink-mesh"), NodeFabric::NvLinkMesh);
  EXPECT_THROW((void)parse_node_fabric("mesh"), InputError);
}

TEST(FatTree, MultiPodBuildsOnlyThePodsAsked) {
  FatTreeSpec s = fat_tree(8, 3);
  s.pods = 3;
  s.nodes = static_cast<int>(host_capacity(s));
  const auto t = build_fat_tree(s);
  EXPECT_EQ(t.num_gpus(), 3 * 16);
  EXPECT_EQ(t.count(VertexKind::Leaf), 12);
  EXPECT_EQ(t.count(VertexKind::Core), 16);
  EXPECT_EQ(t.count_ecmp_paths(0, 16), 16U);
  EXPECT_EQ(bisection_bandwidth(t).bps(), 24 * kB.bps());
}

TEST(FatTree, BadInputNamesTheKeyAndTheNumbers) {
  auto s = fat_tree(8, 3);
  s.k = 7;
  expect_input_error([&] { (void)build_fat_tree(s); }, {"cluster.fabric.k", "even", "got 7"});
  s.k = 2;
  expect_input_error([&] { (void)build_fat_tree(s); }, {"cluster.fabric.k", "at least 4", "got 2"});
  s = fat_tree(8, 3);
  s.oversubscription = 2;
  expect_input_error([&] { (void)build_fat_tree(s); },
                     {"cluster.fabric.oversubscription 2", "k = 8", "r + 1 = 3"});
  s = fat_tree(8, 3);
  s.nodes = 129;
  expect_input_error([&] { (void)build_fat_tree(s); }, {"129 HCAs", "at most 128", "k = 8"});
  s = fat_tree(8, 3);
  s.tiers = 4;
  expect_input_error([&] { (void)build_fat_tree(s); }, {"cluster.fabric.tiers", "got 4"});
  s = fat_tree(8, 3);
  s.pods = 9;
  expect_input_error([&] { (void)build_fat_tree(s); }, {"cluster.fabric.pods", "got 9"});
  s = fat_tree(8, 3);
  s.host.bandwidth = Bandwidth{};
  expect_input_error([&] { (void)build_fat_tree(s); }, {"cluster.fabric.host_bandwidth", "got 0"});
  RailOptimizedSpec r;
  r.nodes = 40;
  r.node.gpus = 8;
  r.node.nvlink = spec_link();
  r.k = 16;
  r.host = spec_link();
  r.leaf_spine = spec_link();
  expect_input_error([&] { (void)build_rail_optimized(r); },
                     {"40 nodes", "40 rail leaves", "k = 16", "128 HCAs"});
}

// ---------------------------------------------------------- shared HCAs

namespace {

/// 4 nodes of 8 GPUs, `hcas` HCAs each, in a 2-tier k=8 fat-tree.
FatTreeSpec shared_hca_tree(int hcas) {
  FatTreeSpec s = fat_tree(8, 2);
  s.nodes = 4;
  s.node.gpus = 8;
  s.node.nvlink = spec_link("300GB/s", "1us");
  s.node.hcas = hcas;
  s.node.pcie = spec_link("25GB/s", "500ns");
  return s;
}

}  // namespace

TEST(SharedHcas, GpusReachTheirHcaOverPcieAndTheFabricThroughIt) {
  const auto t = build_fat_tree(shared_hca_tree(2));
  EXPECT_EQ(t.num_gpus(), 32);
  EXPECT_EQ(t.count(VertexKind::Hca), 4 * 2);
  const TierCounts links = t.count_links();
  EXPECT_EQ(links[static_cast<std::size_t>(LinkTier::Pcie)], 2 * 32);  // one duplex link per GPU
  EXPECT_EQ(links[static_cast<std::size_t>(LinkTier::Host)], 2 * 8);   // one per HCA
  EXPECT_EQ(links[static_cast<std::size_t>(LinkTier::NvLink)], 2 * 32);
  // GPU 5 of node 0 uses HCA 1 (GPUs 4-7); node 2's GPU 0 uses HCA 4.
  const Path p = t.route(5, 16);
  ASSERT_EQ(p.size(), 6U);  // gpu -> hca -> leaf -> spine -> leaf -> hca -> gpu
  EXPECT_EQ(t.tier(p[0]), LinkTier::Pcie);
  EXPECT_EQ(t.vertex(t.link(p[0]).dst).name, "hca1");
  EXPECT_EQ(kind_after(t, p[1]), VertexKind::Leaf);
  EXPECT_EQ(kind_after(t, p[2]), VertexKind::Spine);
  EXPECT_EQ(t.vertex(t.link(p[4]).dst).name, "hca4");
  EXPECT_EQ(t.tier(p[5]), LinkTier::Pcie);
  EXPECT_EQ(t.latency(p), parse_time("500ns") * 2 + parse_time("1us") * 4);
  // Inside a node, even behind one HCA, GPUs talk over NVLink.
  const Path local = t.route(4, 5);
  ASSERT_EQ(local.size(), 2U);
  EXPECT_EQ(kind_after(t, local[0]), VertexKind::NvSwitch);
  // 8 HCAs fill 2 leaves of 4 host ports; both leaves reach each other over 4 spines.
  EXPECT_EQ(t.count_ecmp_paths(0, 16), 4U);
  // Half the HCAs on each side of the cut: 4 x 400 Gb/s.
  EXPECT_EQ(bisection_bandwidth(t).bps(), 4 * kB.bps());
}

// D-mod-k numbers a shared HCA once, as its port has one LID: node 2's
// HCAs 4-7 (2 per node, 4 per leaf) come down spines 0-3, so GPUs 16 (HCA
// 4) and 20 (HCA 5) arrive over different spines, and the GPUs behind one
// HCA over the same one (numbered one by one, 16 and 20 both took spine 0).
TEST(SharedHcas, DestinationModKNumbersTheHcas) {
  const auto t = build_fat_tree(shared_hca_tree(2));
  auto spine = [&](int src, int dst) {
    const Path p = t.route(src, dst);
    EXPECT_EQ(kind_after(t, p[2]), VertexKind::Spine);
    return t.vertex(t.link(p[2]).dst).name;
  };
  EXPECT_NE(spine(0, 16), spine(0, 20));
  EXPECT_EQ(spine(0, 16), spine(0, 17));
  std::set<std::string> spines;
  for (int dst : {16, 20, 24, 28}) spines.insert(spine(0, dst));  // HCAs 4, 5, 6, 7
  EXPECT_EQ(spines.size(), 4U);
}

TEST(SharedHcas, OneHcaPerGpuIsTheDefaultBuild) {
  const auto a = build_fat_tree(shared_hca_tree(0));
  const auto b = build_fat_tree(shared_hca_tree(8));
  EXPECT_EQ(a.count(VertexKind::Hca), 0);
  EXPECT_EQ(b.count(VertexKind::Hca), 0);
  EXPECT_EQ(a.links().size(), b.links().size());
  EXPECT_EQ(a.route(5, 16), b.route(5, 16));
  EXPECT_EQ(a.route(5, 16).size(), 4U);
  EXPECT_EQ(bisection_bandwidth(a).bps(), 16 * kB.bps());
}

TEST(SharedHcas, ForwardingTablesMatchRoutesOnEveryFabric) {
  RailOptimizedSpec rail;
  rail.nodes = 4;
  rail.node.gpus = 8;
  rail.node.nvlink = spec_link("450GB/s", "500ns");
  rail.node.hcas = 4;
  rail.node.pcie = spec_link("64GB/s", "300ns");
  rail.k = 8;
  rail.host = spec_link();
  rail.leaf_spine = spec_link();
  LeafSpineSpec ls;
  ls.nodes = 3;
  ls.gpus_per_node = 4;
  ls.nvlink_bandwidth = parse_bandwidth("300GB/s");
  ls.nic_bandwidth = kB;
  ls.hcas_per_node = 1;
  ls.pcie_bandwidth = parse_bandwidth("64GB/s");
  ls.pcie_latency = parse_time("300ns");
  ls.hosts_per_leaf = 2;
  ls.spines = 2;
  ls.spine_bandwidth = kB;
  const auto rail_t = build_rail_optimized(rail);
  EXPECT_EQ(rail_t.count(VertexKind::Leaf), 4);  // one rail per HCA
  const auto ls_t = build_leaf_spine(ls);
  EXPECT_EQ(ls_t.count(VertexKind::Hca), 3);
  EXPECT_EQ(ls_t.count(VertexKind::Leaf), 2);
  for (const auto& t : {build_fat_tree(shared_hca_tree(2)), build_fat_tree(shared_hca_tree(4)), rail_t, ls_t}) {
    const auto lft = build_forwarding_tables(t);
    EXPECT_EQ(lft.num_lids(), t.num_gpus() + 1);
    for (int s = 0; s < t.num_gpus(); ++s) {
      for (int d = 0; d < t.num_gpus(); ++d) ASSERT_EQ(follow_tables(t, lft, s, d), t.route(s, d)) << s << "->" << d;
    }
  }
}

TEST(SharedHcas, BadCountsNameTheKey) {
  auto s = shared_hca_tree(3);
  expect_input_error([&] { (void)build_fat_tree(s); }, {"cluster.hcas_per_node", "3 HCAs", "8 GPUs"});
  s.node.hcas = 16;
  expect_input_error([&] { (void)build_fat_tree(s); }, {"cluster.hcas_per_node"});
  s.node.hcas = 2;
  s.node.pcie.bandwidth = Bandwidth{};
  expect_input_error([&] { (void)build_fat_tree(s); }, {"cluster.pcie_bandwidth"});
  s = shared_hca_tree(1);
  s.nodes = 40;  // 40 HCAs > 32 host ports of a k=8 2-tier tree
  expect_input_error([&] { (void)build_fat_tree(s); }, {"40 HCAs", "hcas_per_node"});
}

// Issue 17: a 3-tier fat-tree of a huge radix overflowed pods x leaves_per_pod
// (int) and indexed an empty vector (SIGSEGV); now the size is checked first.
TEST(FatTree, OnlyTheUsedPartIsBuilt) {
  // 5 hosts on k = 8 (4 host ports per leaf): 2 leaves of pod 0, its 4
  // spines, no cores (one pod); 9 pods' worth of hosts on k = 4 (2 per leaf,
  // 4 per pod): 3 pods' leaves, their spines and every core.
  FatTreeSpec s = fat_tree(8, 3);
  s.nodes = 5;
  const auto t = build_fat_tree(s);
  EXPECT_EQ(t.num_gpus(), 5);
  EXPECT_EQ(t.count(VertexKind::Leaf), 2);
  EXPECT_EQ(t.count(VertexKind::Spine), 4);
  EXPECT_EQ(t.count(VertexKind::Core), 0);
  EXPECT_EQ(t.count_ecmp_paths(0, 4), 4U);  // other leaf: every spine of the pod
  FatTreeSpec m = fat_tree(4, 3);
  m.nodes = 9;
  const auto u = build_fat_tree(m);
  EXPECT_EQ(u.count(VertexKind::Leaf), 5);
  EXPECT_EQ(u.count(VertexKind::Spine), 6);
  EXPECT_EQ(u.count(VertexKind::Core), 4);
  EXPECT_EQ(u.count_ecmp_paths(0, 8), 4U);  // across pods: (k/2)^2 as in the full tree
  // Routes between the used hosts are those of the full tree.
  const auto full = build_fat_tree(fat_tree(4, 3));
  for (int a = 0; a < 9; ++a) {
    for (int b = 0; b < 9; ++b) {
      if (a == b) continue;
      EXPECT_EQ(u.count_ecmp_paths(a, b), full.count_ecmp_paths(a, b)) << a << " -> " << b;
      EXPECT_EQ(u.latency(u.route(a, b)), full.latency(full.route(a, b)));
    }
  }
  // 2 tiers: the used leaves and every spine.
  FatTreeSpec two = fat_tree(8, 2);
  two.nodes = 6;
  const auto w = build_fat_tree(two);
  EXPECT_EQ(w.count(VertexKind::Leaf), 2);
  EXPECT_EQ(w.count(VertexKind::Spine), 4);
}

TEST(FatTree, HugeRadixBuildsOnlyWhatIsUsedAndRefusesWhatCannotFit) {
  // 16 hosts on 3,000,000-port switches: one leaf and its 1.5 M spines are
  // counted (3 M directed links, under the limit); the whole tree would
  // pass 2^63 links.
  FatTreeSpec s = fat_tree(4, 3);
  s.nodes = 16;
  s.k = 3'000'000;
  EXPECT_NO_THROW(check_size(s));
  // Hosts that need a second pod of a k = 20000 tree: its 10^8 cores are
  // too many (and the hosts' own links already are).
  FatTreeSpec big = fat_tree(4, 3);
  big.k = 20'000;
  big.nodes = 100'000'001;
  expect_input_error([&] { check_size(big); },
                     {"cluster.fabric.k = 20000 is too large", "directed links", "at most 20000000"});
  EXPECT_NO_THROW(check_size(fat_tree(64, 3)));
  // Saturated, not wrapped: k^3/4 passes 2^63 for k near 2^31.
  s.k = 2'147'483'646;
  EXPECT_EQ(host_capacity(s), std::numeric_limits<std::int64_t>::max());
  // The largest tree that fits is still built (k = 32: 8192 hosts).
  EXPECT_NO_THROW(check_size(fat_tree(32, 3)));
}

TEST(RailOptimized, HugeRadixIsRejectedNotBuilt) {
  RailOptimizedSpec s;
  s.nodes = 2;
  s.node.gpus = 8;
  s.node.nvlink = spec_link("450GB/s");
  s.host = spec_link();
  s.leaf_spine = spec_link();
  s.k = 2'000'000;
  expect_input_error([&] { (void)build_rail_optimized(s); },
                     {"cluster.fabric.k = 2000000 is too large", "a rail-optimized fabric"});
}
