#include "tessera/collectives/ring.hpp"

#include <gtest/gtest.h>

#include <map>

#include "tessera/collectives/hierarchical.hpp"
#include "tessera/error.hpp"

using namespace tessera;
using namespace tessera::collectives;

TEST(Ring, StepsAndBytesMatchTheTextbook) {
  const std::vector<int> ranks{3, 5, 7, 9};
  const std::int64_t size = 1000;
  const auto g = ring_all_reduce(ranks, Bytes(size));
  const int p = 4;
  EXPECT_EQ(g.transfers.size(), static_cast<std::size_t>(2 * (p - 1) * p));
  EXPECT_EQ(g.depth(), 2 * (p - 1));
  for (int r : ranks) EXPECT_EQ(g.bytes_sent_by(r).count(), 2LL * (p - 1) * size / p);
  for (const auto& t : g.transfers) {
    // Each rank sends only to its ring successor.
    const auto pos = std::find(ranks.begin(), ranks.end(), t.src) - ranks.begin();
    EXPECT_EQ(t.dst, ranks[static_cast<std::size_t>((pos + 1) % p)]);
  }
}

// A step waits for what the previous connection delivered at the step
// before, and for nothing else: not for its own connection's previous step
// (NCCL keeps several in flight), so the chain of 2(p-1) steps goes round
// the ring and pays each connection's latency 2(p-1)/p times, not one
// connection's 2(p-1) times.
TEST(Ring, AStepWaitsOnlyForThePreviousConnection) {
  const std::vector<int> ranks{3, 5, 7, 9};
  const int p = 4;
  const auto g = ring_all_reduce(ranks, Bytes(1000));
  for (std::size_t k = 0; k < g.transfers.size(); ++k) {
    const Transfer& t = g.transfers[k];
    if (t.step == 0) {
      EXPECT_TRUE(t.deps.empty()) << k;
      continue;
    }
    ASSERT_EQ(t.deps.size(), 1U) << k;
    const Transfer& before = g.transfers[static_cast<std::size_t>(t.deps[0])];
    EXPECT_EQ(before.step, t.step - 1);
    EXPECT_EQ(before.dst, t.src) << k;  // what t forwards
  }
  EXPECT_EQ(g.depth(), 2 * (p - 1));
}

TEST(Ring, EveryChunkVisitsEveryRank) {
  // Reduce-scatter: after p-1 steps each chunk has passed through all ranks once.
  const std::vector<int> ranks{0, 1, 2};
  const auto g = ring_all_reduce(ranks, Bytes(10));  // chunks 4, 3, 3 bytes
  std::map<int, std::int64_t> sent;
  for (const auto& t : g.transfers) sent[t.src] += t.bytes.count();
  std::int64_t total = 0;
  for (auto [r, b] : sent) total += b;
  EXPECT_EQ(total, 2 * 2 * 10);  // 2(p-1)/p * S per rank, times p ranks
}

TEST(Ring, DegenerateGroups) {
  EXPECT_TRUE(ring_all_reduce({4}, Bytes(1 << 20)).transfers.empty());
  EXPECT_TRUE(ring_all_reduce({0, 1}, Bytes(0)).transfers.empty());
  EXPECT_THROW(ring_all_reduce({}, Bytes(1)), InputError);
  EXPECT_THROW(ring_all_reduce({1, 1}, Bytes(1)), InputError);
  EXPECT_THROW(ring_all_reduce({0, 1}, Bytes(-1)), InputError);
}

// Flow granularity: one transfer per ring connection with exactly the bytes,
// reduced bytes and steps of the step graph, per rank, for sizes that do not
// divide evenly; every flow starts at once.
TEST(RingFlows, SameBytesReductionsAndDepthAsTheSteps) {
  for (const std::vector<int>& ranks : {std::vector<int>{4, 0, 6, 2, 9}, std::vector<int>{3, 1},
                                        std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}) {
    const auto p = static_cast<std::int32_t>(ranks.size());
    for (std::int64_t size : {1, 7, 1000, 1'000'003}) {
      const std::vector<std::pair<TransferGraph, TransferGraph>> pairs = {
          {ring_all_reduce(ranks, Bytes(size)), ring_all_reduce_flows(ranks, Bytes(size))},
          {ring_reduce_scatter(ranks, Bytes(size)), ring_reduce_scatter_flows(ranks, Bytes(size))},
          {ring_all_gather(ranks, Bytes(size)), ring_all_gather_flows(ranks, Bytes(size))}};
      const std::int32_t expected_steps[] = {2 * (p - 1), p - 1, p - 1};
      for (std::size_t k = 0; k < pairs.size(); ++k) {
        const auto& [steps, flows] = pairs[k];
        ASSERT_EQ(flows.transfers.size(), ranks.size()) << "size " << size << " kind " << k;
        EXPECT_EQ(flows.depth(), steps.depth());
        EXPECT_EQ(flows.depth(), expected_steps[k]);
        for (int r : ranks) {
          EXPECT_EQ(flows.bytes_sent_by(r), steps.bytes_sent_by(r)) << "rank " << r;
          EXPECT_EQ(flows.bytes_received_by(r), steps.bytes_received_by(r)) << "rank " << r;
          EXPECT_EQ(flows.bytes_reduced_by(r), steps.bytes_reduced_by(r)) << "rank " << r;
        }
        for (std::size_t i = 0; i < flows.transfers.size(); ++i) {
          const Transfer& t = flows.transfers[i];
          EXPECT_TRUE(t.deps.empty());
          EXPECT_EQ(t.src, ranks[i]);
          EXPECT_EQ(t.dst, ranks[(i + 1) % ranks.size()]);
          EXPECT_EQ(t.steps, expected_steps[k]);
          // Reduce-scatter steps reduce (all of a reduce-scatter, half of an
          // all-reduce), all-gather steps do not.
          EXPECT_EQ(t.reductions(), k == 2 ? 0 : p - 1);
        }
      }
    }
  }
  EXPECT_TRUE(ring_all_reduce_flows({3}, Bytes(100)).transfers.empty());
  EXPECT_TRUE(ring_all_reduce_flows({4, 0, 6}, Bytes(0)).transfers.empty());
  EXPECT_THROW(ring_all_reduce_flows({1, 1}, Bytes(8)), InputError);
}

// Each ring's flows carry one ring id, from 0, so the engine can charge
// them the ring's per-step costs: one ring; L rail rings (ids 0..L-1, p
// connections each); the hierarchical all-reduce's rings, one id each. The
// step graph carries none.
TEST(RingFlows, EveryRingHasItsOwnId) {
  auto rings_of = [](const TransferGraph& g) {
    std::map<int, int> connections;
    for (const Transfer& t : g.transfers) ++connections[t.ring];
    return connections;
  };
  const std::vector<int> ranks{0, 1, 2, 3, 8, 9, 10, 11};  // 2 nodes of 8, 4 ranks each
  EXPECT_EQ(rings_of(ring_all_reduce_flows(ranks, Bytes(800))), (std::map<int, int>{{0, 8}}));
  EXPECT_EQ(rings_of(ring_all_reduce(ranks, Bytes(800))), (std::map<int, int>{{-1, 8 * 14}}));
  EXPECT_EQ(rings_of(rail_ring_all_reduce(ranks, Bytes(800), 8, true)),
            (std::map<int, int>{{0, 8}, {1, 8}, {2, 8}, {3, 8}}));
  EXPECT_EQ(rings_of(rail_ring_reduce_scatter(ranks, Bytes(800), 8, true)),
            (std::map<int, int>{{0, 8}, {1, 8}, {2, 8}, {3, 8}}));
  // Hierarchical: a reduce-scatter ring per node (0, 1), a ring per rail
  // across the two nodes (2..5), an all-gather ring per node (6, 7).
  EXPECT_EQ(rings_of(hierarchical_all_reduce_flows(ranks, Bytes(800), 8)),
            (std::map<int, int>{{0, 4}, {1, 4}, {2, 2}, {3, 2}, {4, 2}, {5, 2}, {6, 4}, {7, 4}}));
}
