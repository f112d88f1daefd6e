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
