#include "tessera/collectives/all_to_all.hpp"

#include "build_util.hpp"

namespace tessera::collectives {

TransferGraph direct_all_to_all(const std::vector<int>& ranks, Bytes size) {
  detail::check_group("direct all-to-all", ranks, size);
  const auto p = static_cast<std::int64_t>(ranks.size());
  TransferGraph g;
  if (p == 1 || size.count() == 0) return g;
  const auto blocks = detail::split(size, p);
  g.transfers.reserve(static_cast<std::size_t>(p * (p - 1)));
  for (std::int64_t s = 1; s < p; ++s) {
    for (std::int64_t i = 0; i < p; ++i) {
      const std::int64_t j = (i + s) % p;
      detail::add(g, ranks[static_cast<std::size_t>(i)], ranks[static_cast<std::size_t>(j)],
                  blocks[static_cast<std::size_t>(j)], static_cast<std::int32_t>(s - 1), {});
    }
  }
  return g;
}

}  // namespace tessera::collectives
