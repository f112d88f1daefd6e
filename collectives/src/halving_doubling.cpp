#include "tessera/collectives/halving_doubling.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "build_util.hpp"
#include "tessera/error.hpp"

namespace tessera::collectives {

namespace {

bool is_power_of_two(std::int64_t p) { return p > 0 && (p & (p - 1)) == 0; }

/// Bytes of chunks [lo, lo + n).
Bytes range_bytes(const std::vector<Bytes>& chunks, std::int64_t lo, std::int64_t n) {
  Bytes b;
  for (std::int64_t c = lo; c < lo + n; ++c) b += chunks[static_cast<std::size_t>(c)];
  return b;
}

struct State {
  std::vector<TransferIndex> last_send;
  std::vector<TransferIndex> last_recv;
  /// Deps of a send from position j to `partner`: j's previous send and
  /// receive, and the partner's previous receive (rendezvous: the partner
  /// posts its receive once its previous step, or its fold, is done).
  std::vector<TransferIndex> deps(std::size_t j, std::size_t partner) const {
    std::vector<TransferIndex> d;
    for (TransferIndex x : {last_send[j], last_recv[j], last_recv[partner]}) {
      if (x >= 0 && std::find(d.begin(), d.end(), x) == d.end()) d.push_back(x);
    }
    return d;
  }
};

/// Recursive halving over the power-of-two `core` (global ranks); position j
/// ends with chunk j.
void halving(TransferGraph& g, const std::vector<int>& core, const std::vector<Bytes>& chunks, State& st,
             std::int32_t& step) {
  const auto q = static_cast<std::int64_t>(core.size());
  for (std::int64_t d = q / 2; d >= 1; d /= 2, ++step) {
    std::vector<TransferIndex> recv(static_cast<std::size_t>(q), -1);
    std::vector<TransferIndex> sent(static_cast<std::size_t>(q), -1);
    for (std::int64_t j = 0; j < q; ++j) {
      const std::int64_t partner = j ^ d;
      const std::int64_t lo = j & ~(2 * d - 1);
      const std::int64_t send_lo = (j & d) == 0 ? lo + d : lo;  // keep our half, send the other
      const TransferIndex t =
          detail::add_reduce(g, core[static_cast<std::size_t>(j)], core[static_cast<std::size_t>(partner)],
                             range_bytes(chunks, send_lo, d), step,
                             st.deps(static_cast<std::size_t>(j), static_cast<std::size_t>(partner)));
      sent[static_cast<std::size_t>(j)] = t;
      recv[static_cast<std::size_t>(partner)] = t;
    }
    st.last_send = sent;
    st.last_recv = recv;
  }
}

/// Recursive doubling: position j starts with chunk j, ends with all.
void doubling(TransferGraph& g, const std::vector<int>& core, const std::vector<Bytes>& chunks, State& st,
              std::int32_t& step) {
  const auto q = static_cast<std::int64_t>(core.size());
  for (std::int64_t d = 1; d < q; d *= 2, ++step) {
    std::vector<TransferIndex> recv(static_cast<std::size_t>(q), -1);
    std::vector<TransferIndex> sent(static_cast<std::size_t>(q), -1);
    for (std::int64_t j = 0; j < q; ++j) {
      const std::int64_t partner = j ^ d;
      const std::int64_t lo = j & ~(d - 1);
      const TransferIndex t =
          detail::add(g, core[static_cast<std::size_t>(j)], core[static_cast<std::size_t>(partner)],
                      range_bytes(chunks, lo, d), step,
                      st.deps(static_cast<std::size_t>(j), static_cast<std::size_t>(partner)));
      sent[static_cast<std::size_t>(j)] = t;
      recv[static_cast<std::size_t>(partner)] = t;
    }
    st.last_send = sent;
    st.last_recv = recv;
  }
}

void require_power_of_two(std::string_view what, std::size_t p) {
  if (!is_power_of_two(static_cast<std::int64_t>(p))) {
    throw InputError(fmt::format("{} needs a power-of-two group (got {} ranks; nearest {} or {}); use ring",
                                 what, p, std::size_t{1} << (std::bit_width(p) - 1),
                                 std::size_t{1} << std::bit_width(p)));
  }
}

}  // namespace

TransferGraph halving_doubling_all_reduce(const std::vector<int>& ranks, Bytes size) {
  detail::check_group("halving-doubling all-reduce", ranks, size);
  const auto p = static_cast<std::int64_t>(ranks.size());
  TransferGraph g;
  if (p == 1 || size.count() == 0) return g;
  const std::int64_t q = std::int64_t{1} << (std::bit_width(static_cast<std::uint64_t>(p)) - 1);
  const std::int64_t r = p - q;
  std::vector<int> core;
  for (std::int64_t j = 0; j < q; ++j) {
    core.push_back(ranks[static_cast<std::size_t>(j < r ? 2 * j + 1 : j + r)]);
  }
  State st{std::vector<TransferIndex>(static_cast<std::size_t>(q), -1),
           std::vector<TransferIndex>(static_cast<std::size_t>(q), -1)};
  std::int32_t step = 0;
  if (r > 0) {
    // Fold: the extra ranks hand their buffer to their odd neighbour.
    for (std::int64_t i = 0; i < r; ++i) {
      st.last_recv[static_cast<std::size_t>(i)] = detail::add_reduce(
          g, ranks[static_cast<std::size_t>(2 * i)], ranks[static_cast<std::size_t>(2 * i + 1)], size, 0);
    }
    ++step;
  }
  const auto chunks = detail::split(size, q);
  halving(g, core, chunks, st, step);
  doubling(g, core, chunks, st, step);
  for (std::int64_t i = 0; i < r; ++i) {
    detail::add(g, ranks[static_cast<std::size_t>(2 * i + 1)], ranks[static_cast<std::size_t>(2 * i)], size,
                step, st.deps(static_cast<std::size_t>(i), static_cast<std::size_t>(i)));
  }
  return g;
}

TransferGraph halving_reduce_scatter(const std::vector<int>& ranks, Bytes size) {
  detail::check_group("recursive-halving reduce-scatter", ranks, size);
  require_power_of_two("recursive-halving reduce-scatter", ranks.size());
  TransferGraph g;
  if (ranks.size() == 1 || size.count() == 0) return g;
  State st{std::vector<TransferIndex>(ranks.size(), -1), std::vector<TransferIndex>(ranks.size(), -1)};
  std::int32_t step = 0;
  halving(g, ranks, detail::split(size, static_cast<std::int64_t>(ranks.size())), st, step);
  return g;
}

TransferGraph doubling_all_gather(const std::vector<int>& ranks, Bytes size) {
  detail::check_group("recursive-doubling all-gather", ranks, size);
  require_power_of_two("recursive-doubling all-gather", ranks.size());
  TransferGraph g;
  if (ranks.size() == 1 || size.count() == 0) return g;
  State st{std::vector<TransferIndex>(ranks.size(), -1), std::vector<TransferIndex>(ranks.size(), -1)};
  std::int32_t step = 0;
  doubling(g, ranks, detail::split(size, static_cast<std::int64_t>(ranks.size())), st, step);
  return g;
}

}  // namespace tessera::collectives
