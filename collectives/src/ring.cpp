#include "tessera/collectives/ring.hpp"

#include <fmt/format.h>
#include <set>

#include "tessera/error.hpp"

namespace tessera::collectives {

TransferGraph ring_all_reduce(const std::vector<int>& ranks, Bytes size) {
  if (ranks.empty()) throw InputError("ring all-reduce: the group is empty");
  if (size.count() < 0) {
    throw InputError(fmt::format("ring all-reduce: size must not be negative (got {} B)", size.count()));
  }
  std::set<int> uniq(ranks.begin(), ranks.end());
  if (uniq.size() != ranks.size()) throw InputError("ring all-reduce: the group lists a rank twice");

  const auto p = static_cast<std::int64_t>(ranks.size());
  TransferGraph g;
  if (p == 1 || size.count() == 0) return g;

  auto chunk_bytes = [&](std::int64_t c) {
    return Bytes(size.count() / p + (c < size.count() % p ? 1 : 0));
  };
  const std::int64_t steps = 2 * (p - 1);
  g.transfers.reserve(static_cast<std::size_t>(steps * p));
  auto index = [&](std::int64_t step, std::int64_t i) { return static_cast<TransferIndex>(step * p + i); };
  for (std::int64_t s = 0; s < steps; ++s) {
    for (std::int64_t i = 0; i < p; ++i) {
      // Reduce-scatter: rank i sends chunk (i - s) mod p. All-gather: rank i
      // forwards the fully reduced chunk (i + 1 - (s - (p-1))) mod p.
      const std::int64_t c = s < p - 1 ? ((i - s) % p + p) % p : ((i + 1 - (s - (p - 1))) % p + p) % p;
      Transfer t;
      t.src = ranks[static_cast<std::size_t>(i)];
      t.dst = ranks[static_cast<std::size_t>((i + 1) % p)];
      t.bytes = chunk_bytes(c);
      t.step = static_cast<std::int32_t>(s);
      if (s > 0) {
        t.deps.push_back(index(s - 1, i));
        t.deps.push_back(index(s - 1, (i - 1 + p) % p));
      }
      g.transfers.push_back(std::move(t));
    }
  }
  return g;
}

}  // namespace tessera::collectives
