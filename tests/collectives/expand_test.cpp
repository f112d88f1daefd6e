#include "tessera/collectives/expand.hpp"

#include <gtest/gtest.h>

#include "tessera/collectives/ring.hpp"
#include "tessera/error.hpp"

using namespace tessera;
using namespace tessera::collectives;
using parallelism::CollectiveKind;

namespace {
std::vector<int> first_ranks(int p) {
  std::vector<int> r;
  r.reserve(static_cast<std::size_t>(p));
  for (int i = 0; i < p; ++i) r.push_back(i);
  return r;
}
}  // namespace

TEST(Expand, NamesRoundTrip) {
  for (Algorithm a : {Algorithm::Auto, Algorithm::Ring, Algorithm::Tree, Algorithm::HalvingDoubling,
                      Algorithm::Direct, Algorithm::Hierarchical}) {
    EXPECT_EQ(parse_algorithm(to_string(a)), a);
  }
}

TEST(Expand, EveryKindHasAnAlgorithm) {
  const auto ranks = first_ranks(8);
  for (auto kind : {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter, CollectiveKind::AllGather,
                    CollectiveKind::Broadcast, CollectiveKind::Reduce, CollectiveKind::AllToAll}) {
    EXPECT_FALSE(expand(kind, ranks, Bytes::mib(1)).transfers.empty()) << parallelism::to_string(kind);
  }
  EXPECT_EQ(expand(CollectiveKind::SendRecv, {3, 4}, Bytes(9)).transfers.size(), 1U);
}

TEST(Expand, AutoFollowsTheDocumentedRule) {
  ExpandOptions o;  // a = 5 us, B = 400 Gb/s
  const auto g16 = first_ranks(16);
  // 16 ranks: ring 30(a + S/16B) vs tree 8(a + S/B): tree below ~0.90 MB.
  EXPECT_EQ(resolve_algorithm(CollectiveKind::AllReduce, g16, Bytes::kib(64), o), Algorithm::Tree);
  EXPECT_EQ(resolve_algorithm(CollectiveKind::AllReduce, g16, Bytes(800'000), o), Algorithm::Tree);
  EXPECT_EQ(resolve_algorithm(CollectiveKind::AllReduce, g16, Bytes(1'000'000), o), Algorithm::Ring);
  EXPECT_EQ(resolve_algorithm(CollectiveKind::AllReduce, g16, Bytes::mib(25), o), Algorithm::Ring);
  EXPECT_EQ(resolve_algorithm(CollectiveKind::AllReduce, first_ranks(2), Bytes(8), o), Algorithm::Ring);
  // Known node shape, 2 nodes x 8: still NCCL's ring (expanded as its
  // rail-aligned channels, RailRings).
  o.ranks_per_node = 8;
  EXPECT_EQ(resolve_algorithm(CollectiveKind::AllReduce, g16, Bytes::mib(25), o), Algorithm::Ring);
  EXPECT_EQ(resolve_algorithm(CollectiveKind::AllReduce, first_ranks(8), Bytes::mib(25), o), Algorithm::Ring);
  EXPECT_EQ(resolve_algorithm(CollectiveKind::AllReduce, {0, 1, 2, 8, 9}, Bytes::mib(25), o),
            Algorithm::Ring);
  // ...as 8 rail rings at once, each with an eighth of the buffer: ring
  // 30(a + S/(16 x 8 B)) vs tree 8(a + S/B), tree below ~0.71 MB (0.90 MB
  // for one ring, above).
  EXPECT_EQ(resolve_algorithm(CollectiveKind::AllReduce, g16, Bytes(600'000), o), Algorithm::Tree);
  EXPECT_EQ(resolve_algorithm(CollectiveKind::AllReduce, g16, Bytes(800'000), o), Algorithm::Ring);
  // Chunks pipeline the algorithm chosen, they do not choose it: a tree in
  // 8 chunks had been estimated at 15(a + S/8B), below one ring's 30(a +
  // S/16B) at any size, and won on 16 ranks (and within a node of 8) for
  // gradients of gigabytes, where the tree as built runs 1.3-5x slower.
  o.chunks = 8;
  EXPECT_EQ(resolve_algorithm(CollectiveKind::AllReduce, g16, Bytes::mib(25), o), Algorithm::Ring);
  EXPECT_EQ(resolve_algorithm(CollectiveKind::AllReduce, first_ranks(8), Bytes::mib(25), o), Algorithm::Ring);
  EXPECT_EQ(resolve_algorithm(CollectiveKind::AllReduce, g16, Bytes(600'000), o), Algorithm::Tree);
  o.chunks = 1;
  o.ranks_per_node = 0;
  EXPECT_EQ(resolve_algorithm(CollectiveKind::ReduceScatter, g16, Bytes(64), o), Algorithm::Ring);
  EXPECT_EQ(resolve_algorithm(CollectiveKind::AllGather, g16, Bytes(64), o), Algorithm::Ring);
  EXPECT_EQ(resolve_algorithm(CollectiveKind::AllToAll, g16, Bytes(64), o), Algorithm::Direct);
  // Broadcast: binomial unless the pipelined chain is faster.
  EXPECT_EQ(resolve_algorithm(CollectiveKind::Broadcast, g16, Bytes::mib(64), o), Algorithm::Tree);
  o.chunks = 64;
  EXPECT_EQ(resolve_algorithm(CollectiveKind::Broadcast, g16, Bytes::mib(64), o), Algorithm::Ring);
  EXPECT_EQ(resolve_algorithm(CollectiveKind::Broadcast, g16, Bytes::kib(4), o), Algorithm::Tree);
  // An explicit choice is kept.
  o.algorithm = Algorithm::HalvingDoubling;
  EXPECT_EQ(resolve_algorithm(CollectiveKind::AllReduce, g16, Bytes::kib(4), o), Algorithm::HalvingDoubling);
}

TEST(Expand, APerKindChoiceOverridesTheChoiceForAllKinds) {
  // Hierarchical for all-to-all alone: reduce-scatter and all-gather (which
  // have no hierarchical algorithm) keep the all-kinds choice (auto: ring);
  // a kind set to Auto falls back to it too.
  ExpandOptions o;
  o.ranks_per_node = 4;
  const auto g8 = first_ranks(8);
  o.per_kind[static_cast<std::size_t>(CollectiveKind::AllToAll)] = Algorithm::Hierarchical;
  EXPECT_EQ(o.chosen(CollectiveKind::AllToAll), Algorithm::Hierarchical);
  EXPECT_EQ(o.chosen(CollectiveKind::ReduceScatter), Algorithm::Auto);
  EXPECT_EQ(resolve_algorithm(CollectiveKind::AllToAll, g8, Bytes::mib(8), o), Algorithm::Hierarchical);
  EXPECT_EQ(resolve_algorithm(CollectiveKind::ReduceScatter, g8, Bytes::mib(8), o), Algorithm::Ring);
  EXPECT_NO_THROW((void)expand(CollectiveKind::ReduceScatter, g8, Bytes::mib(8), o));
  // The hierarchical all-to-all's pattern: 2 nodes x 4, phase 1 inside the
  // node (3 peers), phase 2 one peer on the rank's rail: 4 messages a rank,
  // against the direct algorithm's 7.
  const auto h = expand(CollectiveKind::AllToAll, g8, Bytes::mib(8), o);
  EXPECT_EQ(h.transfers.size(), 8U * 4U);
  o.algorithm = Algorithm::HalvingDoubling;  // all kinds...
  EXPECT_EQ(resolve_algorithm(CollectiveKind::AllGather, g8, Bytes::mib(8), o), Algorithm::HalvingDoubling);
  EXPECT_EQ(resolve_algorithm(CollectiveKind::AllToAll, g8, Bytes::mib(8), o), Algorithm::Hierarchical);  // ...but this one
  EXPECT_EQ(expand(CollectiveKind::AllToAll, g8, Bytes::mib(8), Algorithm::Direct).transfers.size(), 8U * 7U);
  // Every kind lists what it has.
  EXPECT_EQ(algorithms_for(CollectiveKind::AllGather),
            (std::vector<Algorithm>{Algorithm::Ring, Algorithm::HalvingDoubling}));
  EXPECT_EQ(algorithms_for(CollectiveKind::AllToAll), (std::vector<Algorithm>{Algorithm::Direct, Algorithm::Hierarchical}));
}

TEST(Expand, ChunksPipelineAnyAlgorithm) {
  ExpandOptions o;
  o.algorithm = Algorithm::Ring;
  o.chunks = 3;
  const auto g = expand(CollectiveKind::AllReduce, first_ranks(4), Bytes(1200), o);
  const auto one = ring_all_reduce(first_ranks(4), Bytes(1200));
  EXPECT_EQ(g.transfers.size(), 3 * one.transfers.size());
  for (int r = 0; r < 4; ++r) EXPECT_EQ(g.bytes_sent_by(r), one.bytes_sent_by(r));
  EXPECT_EQ(g.depth(), one.depth() + 2);
  o.chunks = 0;
  EXPECT_THROW((void)expand(CollectiveKind::AllReduce, first_ranks(4), Bytes(1200), o), InputError);
}

TEST(Expand, DefaultStaysTheRingForLargeAllReduces) {
  // The engine's default (Auto, no node shape) keeps the ring for
  // bandwidth-bound all-reduces: identical to ring_all_reduce.
  const auto ranks = first_ranks(16);
  const auto a = expand(CollectiveKind::AllReduce, ranks, Bytes::mib(25));
  const auto b = ring_all_reduce(ranks, Bytes::mib(25));
  ASSERT_EQ(a.transfers.size(), b.transfers.size());
  for (std::size_t i = 0; i < a.transfers.size(); ++i) {
    EXPECT_EQ(a.transfers[i].bytes, b.transfers[i].bytes);
    EXPECT_EQ(a.transfers[i].dst, b.transfers[i].dst);
  }
}

// Granularity::Flows: the ring family (ring all-reduce, reduce-scatter,
// all-gather, hierarchical) as one flow per connection, chunks ignored; the
// other algorithms expand exactly as at step granularity.
TEST(Expand, FlowsForTheRingFamilyOnly) {
  EXPECT_EQ(parse_granularity("flows"), Granularity::Flows);
  EXPECT_EQ(parse_granularity(to_string(Granularity::Steps)), Granularity::Steps);
  EXPECT_THROW((void)parse_granularity("packets"), InputError);
  const auto ranks = first_ranks(16);
  ExpandOptions steps;
  steps.ranks_per_node = 4;
  ExpandOptions flows = steps;
  flows.granularity = Granularity::Flows;
  for (int chunks : {1, 5}) {
    steps.chunks = chunks;
    flows.chunks = chunks;
    for (Algorithm a : {Algorithm::Ring, Algorithm::Hierarchical, Algorithm::Tree, Algorithm::HalvingDoubling}) {
      steps.algorithm = a;
      flows.algorithm = a;
      const auto f = expand(CollectiveKind::AllReduce, ranks, Bytes::mib(3), flows);
      // The ring family's flows carry the unchunked steps' bytes (slices
      // round differently by a few bytes).
      const bool ring_family = a == Algorithm::Ring || a == Algorithm::Hierarchical;
      ExpandOptions reference = steps;
      if (ring_family) reference.chunks = 1;
      const auto s = expand(CollectiveKind::AllReduce, ranks, Bytes::mib(3), reference);
      for (int r : ranks) {
        EXPECT_EQ(f.bytes_sent_by(r), s.bytes_sent_by(r)) << to_string(a);
        EXPECT_EQ(f.bytes_reduced_by(r), s.bytes_reduced_by(r)) << to_string(a);
      }
      if (a == Algorithm::Ring) {
        // 4 nodes x 4: the 4 rail rings of 16 flows each.
        EXPECT_EQ(f.transfers.size(), 4 * 16U);
        EXPECT_EQ(f.depth(), 2 * 15);  // chunks ignored
      } else if (a == Algorithm::Hierarchical) {
        // 4 nodes x 4: per node 4 reduce-scatter and 4 all-gather flows, per
        // rail 4 inter-node flows; 3 + 6 + 3 steps on the longest chain.
        EXPECT_EQ(f.transfers.size(), 4 * 4 + 4 * 4 + 4 * 4U);
        EXPECT_EQ(f.depth(), 3 + 6 + 3);
      } else {
        EXPECT_EQ(f.transfers.size(), s.transfers.size()) << to_string(a);
        EXPECT_EQ(f.depth(), s.depth()) << to_string(a);
      }
    }
  }
}
