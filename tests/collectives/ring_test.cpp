#include <gtest/gtest.h>

#include <map>

#include "tessera/collectives/ring.hpp"
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
  for (int r : ranks) EXPECT_EQ(g.bytes_sent_by(r).count(), 2 * (p - 1) * size / p);
  for (const auto& t : g.transfers) {
    // Each rank sends only to its ring successor.
    const auto pos = std::find(ranks.begin(), ranks.end(), t.src) - ranks.begin();
    EXPECT_EQ(t.dst, ranks[static_cast<std::size_t>((pos + 1) % p)]);
  }
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
  const std::vector<int> ranks{4, 0, 6, 2, 9};
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
  EXPECT_TRUE(ring_all_reduce_flows({3}, Bytes(100)).transfers.empty());
  EXPECT_TRUE(ring_all_reduce_flows(ranks, Bytes(0)).transfers.empty());
  EXPECT_THROW(ring_all_reduce_flows({1, 1}, Bytes(8)), InputError);
}
