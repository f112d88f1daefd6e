#include <gtest/gtest.h>

#include <limits>
#include <map>

#include "tessera/error.hpp"
#include "tessera/topology/topology.hpp"

using namespace tessera;
using namespace tessera::topology;

namespace {
LeafSpineSpec two_nodes() {
  LeafSpineSpec s;
  s.nodes = 4;
  s.gpus_per_node = 8;
  s.nvlink_bandwidth = parse_bandwidth("450GB/s");
  s.nvlink_latency = parse_time("500ns");
  s.nic_bandwidth = parse_bandwidth("400Gbps");
  s.nic_latency = parse_time("1us");
  s.hosts_per_leaf = 16;
  s.spines = 4;
  s.spine_bandwidth = parse_bandwidth("400Gbps");
  s.spine_latency = parse_time("1us");
  return s;
}
}  // namespace

TEST(LeafSpine, CountsVerticesAndLinks) {
  const auto t = build_leaf_spine(two_nodes());
  EXPECT_EQ(t.num_gpus(), 32);
  EXPECT_EQ(t.count(VertexKind::NvSwitch), 4);
  EXPECT_EQ(t.count(VertexKind::Leaf), 2);
  EXPECT_EQ(t.count(VertexKind::Spine), 4);
  // Directed links: 2 x (32 NVLink + 32 NIC + 2 leaves x 4 spines).
  EXPECT_EQ(t.links().size(), 2U * (32 + 32 + 8));
}

TEST(LeafSpine, IntraNodeTrafficUsesNvSwitch) {
  const auto t = build_leaf_spine(two_nodes());
  const Path p = t.route(0, 5);
  ASSERT_EQ(p.size(), 2U);
  EXPECT_EQ(t.vertex(t.link(p[0]).dst).kind, VertexKind::NvSwitch);
  EXPECT_EQ(t.latency(p), parse_time("1us"));
}

// A node's GPUs talk over NVLink even where it is slower than their NICs
// (a PCIe-class GPU at 32 GB/s, 256 Gb/s, under 400 Gb/s NICs): the path
// through the leaf is as short, two hops, and was taken for its rate.
TEST(LeafSpine, IntraNodeTrafficStaysOnSlowNvLink) {
  LeafSpineSpec s = two_nodes();
  s.nvlink_bandwidth = parse_bandwidth("32GB/s");
  const auto t = build_leaf_spine(s);
  const Path p = t.route(0, 5);
  ASSERT_EQ(p.size(), 2U);
  EXPECT_EQ(t.vertex(t.link(p[0]).dst).kind, VertexKind::NvSwitch);
  EXPECT_EQ(t.tier(p[0]), LinkTier::NvLink);
  EXPECT_EQ(t.link(p[0]).bandwidth, parse_bandwidth("32GB/s"));
  // Between nodes nothing changes: the NIC and the leaf.
  EXPECT_EQ(t.tier(t.route(0, 8)[0]), LinkTier::Host);
}

TEST(LeafSpine, PathsAcrossLeavesCrossOneSpine) {
  const auto t = build_leaf_spine(two_nodes());
  const Path same_leaf = t.route(0, 8);  // node 0 -> node 1, both on leaf 0
  ASSERT_EQ(same_leaf.size(), 2U);
  EXPECT_EQ(t.vertex(t.link(same_leaf[0]).dst).kind, VertexKind::Leaf);
  const Path p = t.route(0, 20);  // leaf 0 -> leaf 1
  ASSERT_EQ(p.size(), 4U);
  EXPECT_EQ(t.vertex(t.link(p[1]).dst).kind, VertexKind::Spine);
  EXPECT_EQ(t.latency(p), parse_time("4us"));
}

TEST(LeafSpine, DestinationModKSpreadsOverSpines) {
  const auto t = build_leaf_spine(two_nodes());
  // Sixteen destinations on leaf 1 from GPU 0: each of the 4 spines carries 4.
  std::map<VertexId, int> per_spine;
  for (int dst = 16; dst < 32; ++dst) ++per_spine[t.link(t.route(0, dst)[1]).dst];
  ASSERT_EQ(per_spine.size(), 4U);
  for (auto [spine, n] : per_spine) EXPECT_EQ(n, 4);
}

TEST(LeafSpine, RejectsImpossibleSpecs) {
  auto s = two_nodes();
  s.nodes = 0;
  EXPECT_THROW(build_leaf_spine(s), InputError);
  s = two_nodes();
  s.spines = -1;
  EXPECT_THROW(build_leaf_spine(s), InputError);
  const auto t = build_leaf_spine(two_nodes());
  EXPECT_THROW((void)t.route(0, 32), InputError);
}

// One wording for every fabric's size error: 20 M links x 210 B = 3.91 GiB;
// a count whose bytes overflow int64 (or the -1 callers pass for a count
// past int64) is "more than 8 EiB".
TEST(Topology, BuiltLinksMemoryIsOneDecimalGiB) {
  EXPECT_EQ(built_links_memory(kMaxBuiltLinks), "about 3.9 GiB");
  EXPECT_EQ(built_links_memory(5'113'056), "about 1.0 GiB");  // 5113056 x 210 = 1.0737e9 B
  EXPECT_EQ(built_links_memory(0), "about 0.0 GiB");
  EXPECT_EQ(built_links_memory(std::numeric_limits<std::int64_t>::max() / kBytesPerBuiltLink + 1),
            "more than 8 EiB");
  EXPECT_EQ(built_links_memory(-1), "more than 8 EiB");
}

// Issue 17: hosts + hosts_per_leaf - 1 overflowed int for a huge leaf (no
// leaves, then an empty vector indexed); huge spine counts overflow LinkId.
TEST(LeafSpine, HugeLeavesAndSpinesDoNotWrap) {
  LeafSpineSpec s = two_nodes();
  s.hosts_per_leaf = std::numeric_limits<int>::max();
  const auto t = build_leaf_spine(s);
  EXPECT_EQ(t.count(VertexKind::Leaf), 1);
  EXPECT_EQ(t.num_gpus(), 32);
  s.hosts_per_leaf = 1;
  s.spines = std::numeric_limits<int>::max();
  try {
    (void)build_leaf_spine(s);
    FAIL() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "32 leaves x 2147483647 spines and 32 GPUs need more than 20000000 directed "
                  "links (about 3.9 GiB), the most that are built: fewer cluster.nodes or "
                  "cluster.fabric.spines"),
              std::string::npos)
        << e.what();
  }
}
