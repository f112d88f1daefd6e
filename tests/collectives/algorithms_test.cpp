#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <string>

#include "tessera/collectives/all_to_all.hpp"
#include "tessera/collectives/expand.hpp"
#include "tessera/collectives/halving_doubling.hpp"
#include "tessera/collectives/hierarchical.hpp"
#include "tessera/collectives/ring.hpp"
#include "tessera/collectives/tree.hpp"
#include "tessera/error.hpp"

using namespace tessera;
using namespace tessera::collectives;
using parallelism::CollectiveKind;

namespace {

std::vector<int> iota_ranks(int p, int first = 0) {
  std::vector<int> r(static_cast<std::size_t>(p));
  std::iota(r.begin(), r.end(), first);
  return r;
}

/// Deps point backwards (the graph is a DAG in index order) and no transfer
/// goes from a rank to itself.
void expect_well_formed(const TransferGraph& g) {
  for (std::size_t i = 0; i < g.transfers.size(); ++i) {
    const auto& t = g.transfers[i];
    EXPECT_NE(t.src, t.dst) << "transfer " << i;
    for (auto d : t.deps) {
      EXPECT_GE(d, 0);
      EXPECT_LT(static_cast<std::size_t>(d), i) << "transfer " << i;
    }
  }
}

/// Runs `fn`, expects an InputError whose one-line message holds every part.
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

}  // namespace

TEST(RingFamily, ReduceScatterAndAllGatherSendPMinus1OverPOfTheBuffer) {
  for (int p : {2, 3, 8}) {
    const auto ranks = iota_ranks(p, 10);
    const std::int64_t size = 8LL * 1024 * 3;  // divisible by 2, 3 and 8
    for (const auto& g : {ring_reduce_scatter(ranks, Bytes(size)), ring_all_gather(ranks, Bytes(size))}) {
      expect_well_formed(g);
      EXPECT_EQ(g.transfers.size(), static_cast<std::size_t>(p * (p - 1)));
      EXPECT_EQ(g.depth(), p - 1);
      for (int r : ranks) EXPECT_EQ(g.bytes_sent_by(r).count(), (p - 1) * size / p) << "p=" << p;
    }
  }
}

TEST(RingFamily, AllReduceIsReduceScatterThenAllGather) {
  const auto ranks = iota_ranks(5);
  const auto ar = ring_all_reduce(ranks, Bytes(1001));
  const auto rs = ring_reduce_scatter(ranks, Bytes(1001));
  const auto ag = ring_all_gather(ranks, Bytes(1001));
  ASSERT_EQ(ar.transfers.size(), rs.transfers.size() + ag.transfers.size());
  for (int r : ranks) EXPECT_EQ(ar.bytes_sent_by(r), rs.bytes_sent_by(r) + ag.bytes_sent_by(r));
}

TEST(Chain, BroadcastAndReduceMoveTheWholeBufferPerHop) {
  const auto ranks = iota_ranks(4);
  const auto b = chain_broadcast(ranks, Bytes(100));
  const auto r = chain_reduce(ranks, Bytes(100));
  expect_well_formed(b);
  expect_well_formed(r);
  EXPECT_EQ(b.transfers.size(), 3U);
  EXPECT_EQ(b.depth(), 3);
  EXPECT_EQ(b.bytes_sent_by(0).count(), 100);
  EXPECT_EQ(b.bytes_sent_by(3).count(), 0);
  EXPECT_EQ(r.bytes_received_by(0).count(), 100);
  EXPECT_EQ(r.bytes_sent_by(0).count(), 0);
}

TEST(Pipeline, ChunkedChainOverlapsSlices) {
  // p = 5 ranks, C = 4 chunks: 4 x 4 transfers of 250 B; the critical path
  // is (p-1) + (C-1) = 7 transfers long.
  const auto ranks = iota_ranks(5);
  const auto g = pipeline([&](Bytes s) { return chain_broadcast(ranks, s); }, Bytes(1000), 4);
  expect_well_formed(g);
  EXPECT_EQ(g.transfers.size(), 16U);
  EXPECT_EQ(g.depth(), 4 + 3);
  for (const auto& t : g.transfers) EXPECT_EQ(t.bytes.count(), 250);
  // Never more slices than bytes; chunks < 1 is an error.
  EXPECT_EQ(pipeline([&](Bytes s) { return chain_broadcast(ranks, s); }, Bytes(2), 8).transfers.size(), 8U);
  expect_input_error([&] { (void)pipeline([&](Bytes s) { return chain_broadcast(ranks, s); }, Bytes(2), 0); },
                     {"chunks", "got 0"});
}

TEST(Binomial, BroadcastTakesLog2PRoundsAndReachesEveryRank) {
  for (int p : {2, 5, 8, 13}) {
    const auto ranks = iota_ranks(p, 100);
    const auto g = binomial_broadcast(ranks, Bytes(64));
    expect_well_formed(g);
    EXPECT_EQ(g.transfers.size(), static_cast<std::size_t>(p - 1));
    const int rounds = static_cast<int>(std::bit_width(static_cast<unsigned>(p - 1)));
    EXPECT_EQ(g.depth(), rounds) << "p=" << p;
    std::set<int> reached{100};
    for (const auto& t : g.transfers) {
      EXPECT_TRUE(reached.count(t.src)) << "rank " << t.src << " forwards before receiving";
      reached.insert(t.dst);
    }
    EXPECT_EQ(reached.size(), static_cast<std::size_t>(p));
    // The root sends once per round.
    EXPECT_EQ(g.bytes_sent_by(100).count(), rounds * 64);
  }
}

TEST(Binomial, ReduceIsTheMirrorOfBroadcast) {
  for (int p : {2, 6, 8}) {
    const auto g = binomial_reduce(iota_ranks(p), Bytes(64));
    expect_well_formed(g);
    EXPECT_EQ(g.transfers.size(), static_cast<std::size_t>(p - 1));
    EXPECT_EQ(g.depth(), static_cast<int>(std::bit_width(static_cast<unsigned>(p - 1))));
    EXPECT_EQ(g.bytes_sent_by(0).count(), 0);
    for (int r = 1; r < p; ++r) EXPECT_EQ(g.bytes_sent_by(r).count(), 64);  // each sends its partial once
  }
}

TEST(DoubleBinaryTree, TreesAreTreesAndComplementary) {
  for (int p : {2, 3, 4, 7, 8, 16, 33}) {
    int roots1 = 0;
    int roots2 = 0;
    int inner_in_both = 0;
    std::vector<int> kids1(static_cast<std::size_t>(p)), kids2(static_cast<std::size_t>(p));
    for (int i = 0; i < p; ++i) {
      const int a = btree_parent(i, p);
      const int b = dtree_parent(i, p);
      roots1 += a < 0;
      roots2 += b < 0;
      if (a >= 0) ++kids1[static_cast<std::size_t>(a)];
      if (b >= 0) ++kids2[static_cast<std::size_t>(b)];
      // Walking up ends at the root within log2(p) + 1 hops (no cycles).
      int x = i;
      int hops = 0;
      while (btree_parent(x, p) >= 0 && hops <= p) x = btree_parent(x, p), ++hops;
      EXPECT_LE(hops, static_cast<int>(std::bit_width(static_cast<unsigned>(p))));
    }
    EXPECT_EQ(roots1, 1);
    EXPECT_EQ(roots2, 1);
    for (int i = 0; i < p; ++i) {
      EXPECT_LE(kids1[static_cast<std::size_t>(i)], 2);
      EXPECT_LE(kids2[static_cast<std::size_t>(i)], 2);
      inner_in_both += kids1[static_cast<std::size_t>(i)] > 0 && kids2[static_cast<std::size_t>(i)] > 0;
    }
    // Complementary: (almost) no rank is an inner node of both trees.
    EXPECT_LE(inner_in_both, 1) << "p=" << p;
  }
}

TEST(DoubleBinaryTree, EachTreeEdgeCarriesHalfTheBufferBothWays) {
  const int p = 8;
  const std::int64_t size = 4096;
  const auto g = double_binary_tree_all_reduce(iota_ranks(p), Bytes(size));
  expect_well_formed(g);
  // Two trees x (p-1) edges x (up + down), size/2 each.
  EXPECT_EQ(g.transfers.size(), static_cast<std::size_t>(2 * 2 * (p - 1)));
  EXPECT_EQ(g.total_bytes().count(), 2LL * (p - 1) * size);
  for (int r = 0; r < p; ++r) {
    // Per tree: half to the parent (unless root) and half to each child.
    std::int64_t expected = 0;
    for (int tree = 0; tree < 2; ++tree) {
      int edges = 0;
      for (int i = 0; i < p; ++i) edges += (tree == 0 ? btree_parent(i, p) : dtree_parent(i, p)) == r;
      edges += (tree == 0 ? btree_parent(r, p) : dtree_parent(r, p)) >= 0;
      expected += edges * size / 2;
    }
    EXPECT_EQ(g.bytes_sent_by(r).count(), expected) << "rank " << r;
    EXPECT_EQ(g.bytes_received_by(r).count(), expected) << "rank " << r;
  }
}

TEST(HalvingDoubling, PowerOfTwoSendsTwicePMinus1OverP) {
  for (int p : {2, 4, 8, 16}) {
    const std::int64_t size = 1 << 20;
    const auto g = halving_doubling_all_reduce(iota_ranks(p), Bytes(size));
    expect_well_formed(g);
    const int l = static_cast<int>(std::bit_width(static_cast<unsigned>(p)) - 1);
    EXPECT_EQ(g.depth(), 2 * l);
    EXPECT_EQ(g.transfers.size(), static_cast<std::size_t>(2 * l * p));
    for (int r = 0; r < p; ++r) EXPECT_EQ(g.bytes_sent_by(r).count(), 2LL * (p - 1) * size / p);
    // Partners are at distance p/2, p/4, ..., 1, then back.
    for (const auto& t : g.transfers) EXPECT_EQ(std::popcount(static_cast<unsigned>(t.src ^ t.dst)), 1);
  }
}

TEST(HalvingDoubling, NonPowerOfTwoFoldsTheExtraRanks) {
  // p = 6: q = 4, r = 2; positions 0 and 2 fold into 1 and 3.
  const std::int64_t size = 4000;
  const auto g = halving_doubling_all_reduce(iota_ranks(6), Bytes(size));
  expect_well_formed(g);
  EXPECT_EQ(g.depth(), 1 + 2 * 2 + 1);
  for (int r : {0, 2}) EXPECT_EQ(g.bytes_sent_by(r).count(), size);
  for (int r : {1, 3}) EXPECT_EQ(g.bytes_sent_by(r).count(), 2LL * 3 * size / 4 + size);
  for (int r : {4, 5}) EXPECT_EQ(g.bytes_sent_by(r).count(), 2LL * 3 * size / 4);
}

TEST(HalvingDoubling, ReduceScatterAndAllGatherNeedAPowerOfTwo) {
  const auto rs = halving_reduce_scatter(iota_ranks(8), Bytes(800));
  const auto ag = doubling_all_gather(iota_ranks(8), Bytes(800));
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(rs.bytes_sent_by(r).count(), 700);
    EXPECT_EQ(ag.bytes_sent_by(r).count(), 700);
  }
  expect_input_error([] { (void)halving_reduce_scatter(iota_ranks(6), Bytes(60)); },
                     {"power-of-two", "got 6 ranks", "4 or 8", "ring"});
  expect_input_error([] { (void)doubling_all_gather(iota_ranks(12), Bytes(60)); }, {"got 12 ranks"});
}

TEST(AllToAll, DirectSendsOneBlockToEveryOtherRank) {
  const int p = 4;
  const auto g = direct_all_to_all({7, 3, 9, 1}, Bytes(4000));
  expect_well_formed(g);
  EXPECT_EQ(g.transfers.size(), static_cast<std::size_t>(p * (p - 1)));
  EXPECT_EQ(g.depth(), 1);  // all at once, as NCCL's grouped sends and receives
  std::set<std::pair<int, int>> pairs;
  for (const auto& t : g.transfers) {
    pairs.emplace(t.src, t.dst);
    EXPECT_EQ(t.bytes.count(), 1000);
  }
  EXPECT_EQ(pairs.size(), static_cast<std::size_t>(p * (p - 1)));
  for (int r : {7, 3, 9, 1}) EXPECT_EQ(g.bytes_received_by(r).count(), 3000);
}

TEST(Hierarchical, BytesSplitIntoIntraAndInterNode) {
  // 4 nodes x 4 ranks: per rank 2(L-1)/L * S inside its node and
  // 2(N-1)/N * S/L across nodes (to the same local position).
  const int rpn = 4;
  const int nodes = 4;
  const std::int64_t size = 1 << 16;
  const auto ranks = iota_ranks(rpn * nodes);
  const auto g = hierarchical_all_reduce(ranks, Bytes(size), rpn);
  expect_well_formed(g);
  std::vector<std::int64_t> intra(ranks.size()), inter(ranks.size());
  for (const auto& t : g.transfers) {
    if (t.src / rpn == t.dst / rpn) {
      intra[static_cast<std::size_t>(t.src)] += t.bytes.count();
    } else {
      EXPECT_EQ(t.src % rpn, t.dst % rpn) << "inter-node traffic leaves its rail";
      inter[static_cast<std::size_t>(t.src)] += t.bytes.count();
    }
  }
  for (int r : ranks) {
    EXPECT_EQ(intra[static_cast<std::size_t>(r)], 2LL * (rpn - 1) * size / rpn);
    EXPECT_EQ(inter[static_cast<std::size_t>(r)], 2LL * (nodes - 1) * (size / rpn) / nodes);
  }
  // Tree across nodes: same intra-node bytes.
  const auto t = hierarchical_all_reduce(ranks, Bytes(size), rpn, InterNode::Tree);
  expect_well_formed(t);
  EXPECT_EQ(t.transfers.size(), 4 * 2 * 3 * 4 + 4 * 2 * 2 * 3 * 1U);
}

TEST(Hierarchical, RejectsUnevenNodesAndDegeneratesToRing) {
  expect_input_error(
      [] {
        (void)hierarchical_all_reduce({0, 1, 2, 4, 5}, Bytes(10), 4);
      },
      {"node 1 holds 2", "node 0 holds 3", "ranks_per_node = 4"});
  expect_input_error(
      [] {
        (void)hierarchical_all_reduce({0, 1}, Bytes(10), 0);
      },
      {"ranks_per_node", "got 0"});
  // One node, or one rank per node: the flat ring.
  EXPECT_EQ(hierarchical_all_reduce(iota_ranks(4), Bytes(400), 8).transfers.size(),
            ring_all_reduce(iota_ranks(4), Bytes(400)).transfers.size());
}

TEST(RailRings, EveryRingVisitsEveryRankAndCrossesNodesOnOneRail) {
  // 4 nodes x 4 ranks (positions = local indices): 4 rings, each through all
  // 16 ranks, whose hops between nodes join the same local index; over the
  // rings every rank leaves its node exactly once.
  const int rpn = 4;
  const int nodes = 4;
  const auto ranks = iota_ranks(rpn * nodes);
  const auto rings = rail_rings(ranks, rpn);
  ASSERT_EQ(rings.size(), 4U);
  std::vector<int> exits(ranks.size());
  for (const auto& ring : rings) {
    EXPECT_EQ(std::set<int>(ring.begin(), ring.end()).size(), ranks.size());
    for (std::size_t i = 0; i < ring.size(); ++i) {
      const int a = ring[i];
      const int b = ring[(i + 1) % ring.size()];
      if (a / rpn == b / rpn) continue;
      EXPECT_EQ(a % rpn, b % rpn) << a << " -> " << b << " changes rails";
      ++exits[static_cast<std::size_t>(a)];
    }
  }
  for (int r : ranks) EXPECT_EQ(exits[static_cast<std::size_t>(r)], 1) << r;
  // Ring 1: node 0 from position 1 up, node 1 back down from position 0.
  EXPECT_EQ(std::vector<int>(rings[1].begin(), rings[1].begin() + 8),
            (std::vector<int>{1, 2, 3, 0, 4, 7, 6, 5}));
  // A group of every second GPU (tp = 2 inside 8-GPU nodes): positions are
  // the GPUs 0, 2, 4, 6 of each node, still rail to rail.
  const std::vector<int> every_second{0, 2, 4, 6, 8, 10, 12, 14};
  for (const auto& ring : rail_rings(every_second, 8)) {
    for (std::size_t i = 0; i < ring.size(); ++i) {
      const int a = ring[i];
      const int b = ring[(i + 1) % ring.size()];
      if (a / 8 != b / 8) {
        EXPECT_EQ(a % 8, b % 8);
      }
    }
  }
  // Three nodes: the wrap from the last node to the first changes rails once per ring.
  for (const auto& ring : rail_rings(iota_ranks(12), 4)) {
    int changes = 0;
    for (std::size_t i = 0; i < ring.size(); ++i) {
      const int a = ring[i];
      const int b = ring[(i + 1) % ring.size()];
      changes += a / 4 != b / 4 && a % 4 != b % 4 ? 1 : 0;
    }
    EXPECT_EQ(changes, 1);
  }
  expect_input_error([] { (void)rail_rings({0, 1, 2, 4, 5}, 4); }, {"as many", "holds 2"});
  expect_input_error([] { (void)rail_rings({0, 1, 2, 3}, 4); }, {"at least 2 nodes"});
}

// A full NVLink mesh (helper 111: one ring left two of each GPU's three
// links idle, a 4-GPU board forecast as a third of its NVLink): rings of
// the Hamiltonian cycles that share no link, each both ways, the bytes split.
TEST(MeshRings, HamiltonianCyclesBothWaysUseEveryLinkOnce) {
  EXPECT_EQ(mesh_rings({5, 6}), (std::vector<std::vector<int>>{{5, 6}}));
  EXPECT_EQ(mesh_ring_count(2), 1);
  EXPECT_EQ(mesh_rings({7, 8, 9}), (std::vector<std::vector<int>>{{7, 8, 9}, {7, 9, 8}}));
  // p = 4: one cycle (0 3 1 2) each way; the pairs 0-1 and 2-3 stay idle.
  EXPECT_EQ(mesh_rings(iota_ranks(4)), (std::vector<std::vector<int>>{{0, 3, 1, 2}, {0, 2, 1, 3}}));
  // p = 8: Walecki's three cycles (the hub 6, the zig-zags of the circle
  // 0..5 from 0, 1, 2, with 7 spliced in) each way: 6 rings where the
  // strides coprime with 8 gave 4.
  const auto eight = mesh_rings(iota_ranks(8));
  ASSERT_EQ(eight.size(), 6U);
  EXPECT_EQ(eight[0], (std::vector<int>{0, 1, 5, 7, 2, 4, 3, 6}));
  EXPECT_EQ(eight[1], (std::vector<int>{0, 6, 3, 4, 2, 7, 5, 1}));
  for (int p = 3; p <= 64; ++p) {
    const auto rings = mesh_rings(iota_ranks(p, 100));
    EXPECT_EQ(rings.size(), 2U * static_cast<std::size_t>((p - 1) / 2)) << p;
    EXPECT_EQ(static_cast<int>(rings.size()), mesh_ring_count(p)) << p;
    std::set<std::pair<int, int>> links;
    for (const auto& ring : rings) {
      ASSERT_EQ(ring.size(), static_cast<std::size_t>(p));
      EXPECT_EQ(ring.front(), 100);
      EXPECT_EQ(std::set<int>(ring.begin(), ring.end()).size(), static_cast<std::size_t>(p)) << p;
      for (std::size_t i = 0; i < ring.size(); ++i)
        EXPECT_TRUE(links.insert({ring[i], ring[(i + 1) % ring.size()]}).second)
            << p << ": a link used twice";
    }
    if (p % 2 == 1) {
      EXPECT_EQ(links.size(), static_cast<std::size_t>(p * (p - 1))) << p;  // every directed link
    } else {
      // The idle pairs (both directions idle) are a perfect matching.
      std::vector<int> idle(static_cast<std::size_t>(p));
      for (int a = 0; a < p; ++a)
        for (int b = a + 1; b < p; ++b) {
          const bool there = links.count({100 + a, 100 + b}) > 0;
          EXPECT_EQ(there, links.count({100 + b, 100 + a}) > 0) << p;
          if (!there) ++idle[static_cast<std::size_t>(a)], ++idle[static_cast<std::size_t>(b)];
        }
      for (int n : idle) EXPECT_EQ(n, 1) << p;
    }
  }
  // The same bytes as one ring's in all, each rank sending 2(p-1)/p of the buffer.
  const std::int64_t size = 1 << 20;
  for (bool flows : {false, true}) {
    const auto g = mesh_ring_all_reduce(iota_ranks(4), Bytes(size), flows);
    std::vector<std::int64_t> sent(4);
    for (const auto& t : g.transfers) sent[static_cast<std::size_t>(t.src)] += t.bytes.count();
    for (std::int64_t b : sent) EXPECT_EQ(b, size * 2 * 3 / 4);
  }
  // expand() takes them for a ring inside one mesh node, not across nodes.
  ExpandOptions o;
  o.algorithm = Algorithm::Ring;
  o.ranks_per_node = 4;
  o.mesh_node = true;
  std::set<std::pair<int, int>> used;
  for (const auto& t :
       expand(parallelism::CollectiveKind::AllReduce, iota_ranks(4), Bytes(size), o).transfers)
    used.insert({t.src, t.dst});
  EXPECT_EQ(used.size(), 8U);  // both directions of the ring
  o.mesh_node = false;
  used.clear();
  for (const auto& t :
       expand(parallelism::CollectiveKind::AllReduce, iota_ranks(4), Bytes(size), o).transfers)
    used.insert({t.src, t.dst});
  EXPECT_EQ(used.size(), 4U);
}

// Walecki's zig-zag paths, each both ways: every directed link of an
// even mesh once.
TEST(MeshPaths, ZigZagsBothWaysUseEveryDirectedLinkOnce) {
  EXPECT_EQ(mesh_paths(4),
            (std::vector<std::vector<int>>{{0, 1, 3, 2}, {2, 3, 1, 0}, {1, 2, 0, 3}, {3, 0, 2, 1}}));
  for (int l = 2; l <= 32; l += 2) {
    const auto paths = mesh_paths(l);
    ASSERT_EQ(paths.size(), static_cast<std::size_t>(l));
    std::set<std::pair<int, int>> links;
    for (const auto& path : paths) {
      EXPECT_EQ(std::set<int>(path.begin(), path.end()).size(), static_cast<std::size_t>(l));
      for (std::size_t i = 0; i + 1 < path.size(); ++i)
        EXPECT_TRUE(links.insert({path[i], path[i + 1]}).second) << l;
    }
    EXPECT_EQ(links.size(), static_cast<std::size_t>(l * (l - 1))) << l;
  }
  expect_input_error([] { (void)mesh_paths(5); }, {"5 GPUs", "even"});
}

// Rings across nodes of a mesh (helper 114): the chains c, c+1, ... put
// L - 1 of the L rings on each link i -> i+1 inside a node, so an 8-GPU
// mesh of 50 GB/s links moved a ring's in-node hops at a seventh of its
// NIC's pace; over the zig-zag paths each directed link carries one ring.
TEST(RailRings, OnMeshNodesEachLinkInsideANodeCarriesOneRing) {
  const int rpn = 8;
  for (int nodes : {2, 3}) {
    const auto ranks = iota_ranks(rpn * nodes);
    for (bool mesh : {false, true}) {
      std::map<std::pair<int, int>, int> load;
      std::vector<int> exits(ranks.size());
      int off_rail = 0;
      for (const auto& ring : rail_rings(ranks, rpn, mesh)) {
        EXPECT_EQ(std::set<int>(ring.begin(), ring.end()).size(), ranks.size());
        for (std::size_t i = 0; i < ring.size(); ++i) {
          const int a = ring[i];
          const int b = ring[(i + 1) % ring.size()];
          if (a / rpn == b / rpn) {
            ++load[{a, b}];
          } else {
            ++exits[static_cast<std::size_t>(a)];
            off_rail += a % rpn != b % rpn ? 1 : 0;
          }
        }
      }
      int busiest = 0;
      for (const auto& [link, n] : load) busiest = std::max(busiest, n);
      EXPECT_EQ(busiest, mesh ? 1 : rpn - 1) << nodes;
      if (mesh) {
        EXPECT_EQ(load.size(), static_cast<std::size_t>(nodes * rpn * (rpn - 1)));
      }
      for (int n : exits) EXPECT_EQ(n, 1) << "every rank leaves its node once";
      EXPECT_EQ(off_rail, nodes % 2 == 0 ? 0 : rpn) << "only an odd count's wrap changes rails";
    }
  }
  // An odd count keeps the chains.
  EXPECT_EQ(rail_rings(iota_ranks(6), 3, true), rail_rings(iota_ranks(6), 3, false));
  // expand() takes the paths for a ring across mesh nodes.
  ExpandOptions o;
  o.algorithm = Algorithm::Ring;
  o.ranks_per_node = rpn;
  o.mesh_node = true;
  std::set<std::pair<int, int>> used;
  for (const auto& t :
       expand(parallelism::CollectiveKind::AllReduce, iota_ranks(2 * rpn), Bytes::mib(1), o).transfers)
    if (t.src / rpn == t.dst / rpn) used.insert({t.src, t.dst});
  EXPECT_EQ(used.size(), 2U * rpn * (rpn - 1));
}

// The hierarchical all-reduce's phases inside a mesh node run over its mesh
// rings (they used one ring: half a 4-GPU board's speed, a third of an
// 8-GPU one's), with the same bytes per rank.
TEST(Hierarchical, OnMeshNodesThePhasesInsideANodeUseTheMeshRings) {
  const int rpn = 8;
  const int nodes = 2;
  const std::int64_t size = 3 << 20;  // whole chunks of six rings of 8
  const auto ranks = iota_ranks(rpn * nodes);
  for (bool flows : {false, true}) {
    for (bool mesh : {false, true}) {
      const auto g = flows ? hierarchical_all_reduce_flows(ranks, Bytes(size), rpn, InterNode::Ring, mesh)
                           : hierarchical_all_reduce(ranks, Bytes(size), rpn, InterNode::Ring, mesh);
      expect_well_formed(g);
      std::vector<std::int64_t> intra(ranks.size()), inter(ranks.size());
      std::map<std::pair<int, int>, std::int64_t> link_bytes;
      for (const auto& t : g.transfers) {
        if (t.src / rpn == t.dst / rpn) {
          intra[static_cast<std::size_t>(t.src)] += t.bytes.count();
          link_bytes[{t.src, t.dst}] += t.bytes.count();
        } else {
          EXPECT_EQ(t.src % rpn, t.dst % rpn);
          inter[static_cast<std::size_t>(t.src)] += t.bytes.count();
        }
      }
      for (int r : ranks) {
        EXPECT_EQ(intra[static_cast<std::size_t>(r)], 2LL * (rpn - 1) * size / rpn) << mesh;
        EXPECT_EQ(inter[static_cast<std::size_t>(r)], 2LL * (nodes - 1) * (size / rpn) / nodes) << mesh;
      }
      // One ring: 8 links a node, each with a GPU's whole in-node bytes;
      // six rings: 48, each with a sixth.
      EXPECT_EQ(link_bytes.size(), static_cast<std::size_t>(nodes * (mesh ? 6 : 1) * rpn)) << flows;
      std::int64_t most = 0;
      for (const auto& [link, b] : link_bytes) most = std::max(most, b);
      const double per_gpu = 2.0 * (rpn - 1) * static_cast<double>(size) / rpn;
      EXPECT_EQ(static_cast<double>(most), mesh ? per_gpu / 6 : per_gpu) << flows;
    }
  }
  // One mesh node: the mesh ring all-reduce.
  ExpandOptions o;
  o.algorithm = Algorithm::Hierarchical;
  o.ranks_per_node = 4;
  o.mesh_node = true;
  EXPECT_EQ(expand(parallelism::CollectiveKind::AllReduce, iota_ranks(4), Bytes(400), o).transfers.size(),
            mesh_ring_all_reduce(iota_ranks(4), Bytes(400), false).transfers.size());
}

TEST(RailRings, CarryTheFlatRingsBytesSplitOverTheRings) {
  // Each rank sends 2(p-1)/p of the buffer in all, as on one ring, and
  // across nodes once: 2(p-1)/p of its ring's share S/L.
  const int rpn = 4;
  const int nodes = 2;
  const int p = rpn * nodes;
  const std::int64_t size = 1 << 20;
  const auto ranks = iota_ranks(p);
  for (bool flows : {false, true}) {
    const auto g = rail_ring_all_reduce(ranks, Bytes(size), rpn, flows);
    expect_well_formed(g);
    std::vector<std::int64_t> sent(ranks.size()), inter(ranks.size());
    for (const auto& t : g.transfers) {
      sent[static_cast<std::size_t>(t.src)] += t.bytes.count();
      if (t.src / rpn != t.dst / rpn) inter[static_cast<std::size_t>(t.src)] += t.bytes.count();
    }
    for (int r : ranks) {
      EXPECT_EQ(sent[static_cast<std::size_t>(r)], 2LL * (p - 1) * size / p) << r;
      EXPECT_EQ(inter[static_cast<std::size_t>(r)], 2LL * (p - 1) * (size / rpn) / p) << r;
    }
    EXPECT_EQ(g.transfers.size(), flows ? rpn * p * 1U : rpn * p * 2U * (p - 1));
    EXPECT_EQ(g.depth(), 2 * (p - 1));
    // Reduce-scatter and all-gather: half each.
    EXPECT_EQ(rail_ring_reduce_scatter(ranks, Bytes(size), rpn, flows).bytes_sent_by(0).count(),
              (p - 1) * size / p);
    EXPECT_EQ(rail_ring_all_gather(ranks, Bytes(size), rpn, flows).bytes_sent_by(0).count(),
              (p - 1) * size / p);
  }
}

TEST(Hierarchical, AllToAllSplitsIntoIntraAndInterNodeOnTheRails) {
  // 3 nodes x 4 ranks: per rank (L-1)/L * S inside its node in L-1 messages
  // and (N-1)/N * S across nodes in N-1 messages, each to its own rail.
  const int rpn = 4;
  const int nodes = 3;
  const std::int64_t size = 12000;  // one 1000-byte block per member
  const auto ranks = iota_ranks(rpn * nodes);
  const auto g = hierarchical_all_to_all(ranks, Bytes(size), rpn);
  expect_well_formed(g);
  EXPECT_EQ(g.transfers.size(), static_cast<std::size_t>(rpn * nodes * ((rpn - 1) + (nodes - 1))));
  EXPECT_EQ(g.depth(), (rpn - 1) + (nodes - 1));
  std::vector<std::int64_t> intra(ranks.size()), inter(ranks.size());
  std::vector<int> inter_messages(ranks.size());
  for (const auto& t : g.transfers) {
    if (t.src / rpn == t.dst / rpn) {
      EXPECT_EQ(t.bytes.count(), nodes * 1000);
      intra[static_cast<std::size_t>(t.src)] += t.bytes.count();
    } else {
      EXPECT_EQ(t.src % rpn, t.dst % rpn) << "inter-node traffic leaves its rail";
      EXPECT_EQ(t.bytes.count(), rpn * 1000);
      inter[static_cast<std::size_t>(t.src)] += t.bytes.count();
      ++inter_messages[static_cast<std::size_t>(t.src)];
    }
  }
  for (int r : ranks) {
    EXPECT_EQ(intra[static_cast<std::size_t>(r)], (rpn - 1) * size / rpn);
    EXPECT_EQ(inter[static_cast<std::size_t>(r)], (nodes - 1) * size / nodes);
    EXPECT_EQ(inter_messages[static_cast<std::size_t>(r)], nodes - 1);
    // What the direct all-to-all receives across nodes, and (L-1)/L * S more inside the node.
    EXPECT_EQ(g.bytes_received_by(r).count(), (nodes - 1) * size / nodes + (rpn - 1) * size / rpn);
  }
  // A rank forwards across nodes only once its node's blocks have arrived:
  // its first inter-node send waits for every intra-node transfer into it.
  for (const auto& t : g.transfers) {
    if (t.src / rpn == t.dst / rpn || t.step != rpn - 1) continue;
    int waits = 0;
    for (TransferIndex d : t.deps) {
      const auto& in = g.transfers[static_cast<std::size_t>(d)];
      if (in.dst == t.src && in.src / rpn == t.src / rpn) ++waits;
    }
    EXPECT_EQ(waits, rpn - 1);
  }
  // expand() takes it for all-to-all with the node shape, and needs the shape.
  ExpandOptions o;
  o.algorithm = Algorithm::Hierarchical;
  o.ranks_per_node = rpn;
  EXPECT_EQ(expand(CollectiveKind::AllToAll, ranks, Bytes(size), o).transfers.size(), g.transfers.size());
  expect_input_error(
      [] { (void)expand(CollectiveKind::AllToAll, iota_ranks(8), Bytes(8), Algorithm::Hierarchical); },
      {"hierarchical all-to-all", "ranks_per_node", "got 0"});
  expect_input_error([] { (void)hierarchical_all_to_all({0, 1, 2, 4, 5}, Bytes(10), 4); },
                     {"all-to-all", "node 1 holds 2", "node 0 holds 3"});
  // One node, or one rank per node: the direct all-to-all.
  EXPECT_EQ(hierarchical_all_to_all(iota_ranks(4), Bytes(400), 8).transfers.size(),
            direct_all_to_all(iota_ranks(4), Bytes(400)).transfers.size());
  EXPECT_EQ(hierarchical_all_to_all({0, 8, 16}, Bytes(300), 8).transfers.size(),
            direct_all_to_all({0, 8, 16}, Bytes(300)).transfers.size());
  // Auto stays direct.
  o.algorithm = Algorithm::Auto;
  EXPECT_EQ(resolve_algorithm(CollectiveKind::AllToAll, ranks, Bytes(size), o), Algorithm::Direct);
}

TEST(BadInput, OneLineErrorsNameTheNumbers) {
  expect_input_error([] { (void)ring_all_reduce({}, Bytes(1)); }, {"empty"});
  expect_input_error(
      [] {
        (void)ring_reduce_scatter({4, 2, 4}, Bytes(1));
      },
      {"rank 4 twice", "positions 0 and 2"});
  expect_input_error([] { (void)binomial_broadcast({1, 2}, Bytes(-5)); }, {"-5"});
  expect_input_error([] { (void)direct_all_to_all({0, -1}, Bytes(5)); }, {"rank -1"});
  expect_input_error([] { (void)parse_algorithm("rings"); }, {"'rings'", "halving-doubling"});
  expect_input_error([] { (void)expand(CollectiveKind::AllToAll, iota_ranks(4), Bytes(8), Algorithm::Ring); },
                     {"all", "'ring'", "direct"});
  expect_input_error(
      [] { (void)expand(CollectiveKind::AllReduce, iota_ranks(4), Bytes(8), Algorithm::Hierarchical); },
      {"ranks_per_node", "got 0"});
  expect_input_error(
      [] { (void)expand(CollectiveKind::AllGather, iota_ranks(6), Bytes(0), Algorithm::HalvingDoubling); },
      {"got 6 ranks"});
}

// Reduction work: which receiver combines how many bytes (the GPU kernel the
// engine times with the node model).
TEST(Reduction, BytesReducedPerRankMatchTheTextbook) {
  const std::vector<int> eight{0, 1, 2, 3, 4, 5, 6, 7};
  const Bytes s(8'000'000);
  const auto ring = ring_all_reduce(eight, s);
  const auto rs = ring_reduce_scatter(eight, s);
  const auto ag = ring_all_gather(eight, s);
  const auto hd = halving_doubling_all_reduce(eight, s);
  for (int r : eight) {
    // (p-1)/p * S: every chunk but its own arrives once, to be reduced.
    EXPECT_EQ(ring.bytes_reduced_by(r).count(), 7'000'000) << r;
    EXPECT_EQ(rs.bytes_reduced_by(r).count(), 7'000'000) << r;
    EXPECT_EQ(ag.bytes_reduced_by(r).count(), 0) << r;
    EXPECT_EQ(hd.bytes_reduced_by(r).count(), 7'000'000) << r;  // S/2 + S/4 + S/8
  }
  // Binomial reduce to rank 0 over 8: the root combines log2(8) = 3 buffers.
  EXPECT_EQ(binomial_reduce(eight, s).bytes_reduced_by(0).count(), 3 * 8'000'000);
  // Chain reduce: every rank but the last combines one full buffer.
  const auto chain = chain_reduce(eight, s);
  for (int r = 0; r < 7; ++r) EXPECT_EQ(chain.bytes_reduced_by(r).count(), 8'000'000) << r;
  EXPECT_EQ(chain.bytes_reduced_by(7).count(), 0);
  // Broadcasts reduce nothing.
  EXPECT_EQ(binomial_broadcast(eight, s).bytes_reduced_by(3).count(), 0);
}

// The hierarchical algorithms pair each node's ranks by local index (their
// rail), whatever order the group lists them in: {0, 1, 9, 8} on nodes of 8
// joins 0 with 8 and 1 with 9 across nodes (helper 68: group order joined
// rail 0 with rail 1 through the spines). The graph is the sorted group's.
TEST(Hierarchical, RailsFollowLocalIndexNotGroupOrder) {
  for (const auto& g : {hierarchical_all_reduce({0, 1, 9, 8}, Bytes::mib(1), 8),
                        hierarchical_all_to_all({0, 1, 9, 8}, Bytes::mib(1), 8)}) {
    int across = 0;
    for (const auto& t : g.transfers) {
      if (t.src / 8 == t.dst / 8) continue;
      ++across;
      EXPECT_EQ(t.src % 8, t.dst % 8) << t.src << " -> " << t.dst;
    }
    EXPECT_GT(across, 0);
  }
  EXPECT_EQ(hierarchical_all_reduce({0, 1, 9, 8}, Bytes::mib(1), 8).transfers.size(),
            hierarchical_all_reduce({0, 1, 8, 9}, Bytes::mib(1), 8).transfers.size());
}

// NCCL's ring over nodes is expanded as rail rings only when every node
// holds the group's ranks on the same rails: {0, 1, 8, 9} on nodes of 8
// does, and every hop between nodes stays on its rail; {0, 1, 10, 11} does
// not (rails 0-1 against 2-3) and takes the flat ring, as with no node
// shape known (helper 68: its rail rings crossed rails as if they did not).
TEST(Expand, RailRingsOnlyWhereTheNodesShareRails) {
  ExpandOptions on_nodes;
  on_nodes.ranks_per_node = 8;
  on_nodes.algorithm = Algorithm::Ring;
  ExpandOptions flat = on_nodes;
  flat.ranks_per_node = 0;
  const auto same = expand(CollectiveKind::AllReduce, {0, 1, 8, 9}, Bytes::mib(8), on_nodes);
  for (const auto& t : same.transfers) {
    if (t.src / 8 != t.dst / 8) {
      EXPECT_EQ(t.src % 8, t.dst % 8) << t.src << " -> " << t.dst;
    }
  }
  const auto other = expand(CollectiveKind::AllReduce, {0, 1, 10, 11}, Bytes::mib(8), on_nodes);
  const auto plain = expand(CollectiveKind::AllReduce, {0, 1, 10, 11}, Bytes::mib(8), flat);
  ASSERT_EQ(other.transfers.size(), plain.transfers.size());
  for (std::size_t i = 0; i < other.transfers.size(); ++i) {
    EXPECT_EQ(other.transfers[i].src, plain.transfers[i].src);
    EXPECT_EQ(other.transfers[i].dst, plain.transfers[i].dst);
    EXPECT_EQ(other.transfers[i].bytes, plain.transfers[i].bytes);
  }
}
