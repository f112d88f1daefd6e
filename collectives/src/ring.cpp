#include "tessera/collectives/ring.hpp"

#include <fmt/format.h>

#include <numeric>

#include "build_util.hpp"
#include "tessera/collectives/hierarchical.hpp"
#include "tessera/error.hpp"

namespace tessera::collectives {

namespace detail {

TransferGraph ring_steps(const std::vector<int>& ranks, Bytes size, std::int64_t first, std::int64_t last) {
  const auto p = static_cast<std::int64_t>(ranks.size());
  TransferGraph g;
  if (p < 2 || last <= first) return g;
  const auto chunks = split(size, p);
  g.transfers.reserve(static_cast<std::size_t>((last - first) * p));
  auto index = [&](std::int64_t step, std::int64_t i) {
    return static_cast<TransferIndex>((step - first) * p + i);
  };
  for (std::int64_t s = first; s < last; ++s) {
    for (std::int64_t i = 0; i < p; ++i) {
      // Reduce-scatter: rank i sends chunk (i - s) mod p. All-gather: rank i
      // forwards the fully reduced chunk (i + 1 - (s - (p-1))) mod p.
      const std::int64_t c = s < p - 1 ? ((i - s) % p + p) % p : ((i + 1 - (s - (p - 1))) % p + p) % p;
      Transfer t;
      t.src = ranks[static_cast<std::size_t>(i)];
      t.dst = ranks[static_cast<std::size_t>((i + 1) % p)];
      t.bytes = chunks[static_cast<std::size_t>(c)];
      t.step = static_cast<std::int32_t>(s - first);
      t.reduce = s < p - 1;  // reduce-scatter steps combine the chunk they receive
      // A step forwards what the previous connection delivered at the step
      // before. It does not wait for its own connection's previous step to
      // arrive: NCCL keeps several steps in flight per connection, so a
      // connection's latency is not paid once per step (the chain goes round
      // the ring instead; its bytes still share the link).
      if (s > first) t.deps.push_back(index(s - 1, (i - 1 + p) % p));
      g.transfers.push_back(std::move(t));
    }
  }
  return g;
}

TransferGraph ring_flows(const std::vector<int>& ranks, Bytes size, std::int64_t first, std::int64_t last) {
  const auto p = static_cast<std::int64_t>(ranks.size());
  TransferGraph g;
  if (p < 2 || last <= first) return g;
  const auto chunks = split(size, p);
  g.transfers.reserve(static_cast<std::size_t>(p));
  for (std::int64_t i = 0; i < p; ++i) {
    // The chunks ring_steps has rank i send, step by step.
    Transfer t;
    t.src = ranks[static_cast<std::size_t>(i)];
    t.dst = ranks[static_cast<std::size_t>((i + 1) % p)];
    t.steps = static_cast<std::int32_t>(last - first);
    t.ring = 0;
    for (std::int64_t s = first; s < last; ++s) {
      const std::int64_t c = s < p - 1 ? ((i - s) % p + p) % p : ((i + 1 - (s - (p - 1))) % p + p) % p;
      const Bytes b = chunks[static_cast<std::size_t>(c)];
      t.bytes += b;
      if (s < p - 1) {
        t.reduce = true;
        ++t.reduce_steps;
        t.reduce_bytes += b;
      }
    }
    g.transfers.push_back(std::move(t));
  }
  return g;
}

}  // namespace detail

TransferGraph ring_all_reduce(const std::vector<int>& ranks, Bytes size) {
  detail::check_group("ring all-reduce", ranks, size);
  const auto p = static_cast<std::int64_t>(ranks.size());
  if (p == 1 || size.count() == 0) return {};
  return detail::ring_steps(ranks, size, 0, 2 * (p - 1));
}

TransferGraph ring_reduce_scatter(const std::vector<int>& ranks, Bytes size) {
  detail::check_group("ring reduce-scatter", ranks, size);
  const auto p = static_cast<std::int64_t>(ranks.size());
  if (p == 1 || size.count() == 0) return {};
  return detail::ring_steps(ranks, size, 0, p - 1);
}

TransferGraph ring_all_gather(const std::vector<int>& ranks, Bytes size) {
  detail::check_group("ring all-gather", ranks, size);
  const auto p = static_cast<std::int64_t>(ranks.size());
  if (p == 1 || size.count() == 0) return {};
  return detail::ring_steps(ranks, size, p - 1, 2 * (p - 1));
}

TransferGraph ring_all_reduce_flows(const std::vector<int>& ranks, Bytes size) {
  detail::check_group("ring all-reduce", ranks, size);
  const auto p = static_cast<std::int64_t>(ranks.size());
  if (p == 1 || size.count() == 0) return {};
  return detail::ring_flows(ranks, size, 0, 2 * (p - 1));
}

TransferGraph ring_reduce_scatter_flows(const std::vector<int>& ranks, Bytes size) {
  detail::check_group("ring reduce-scatter", ranks, size);
  const auto p = static_cast<std::int64_t>(ranks.size());
  if (p == 1 || size.count() == 0) return {};
  return detail::ring_flows(ranks, size, 0, p - 1);
}

TransferGraph ring_all_gather_flows(const std::vector<int>& ranks, Bytes size) {
  detail::check_group("ring all-gather", ranks, size);
  const auto p = static_cast<std::int64_t>(ranks.size());
  if (p == 1 || size.count() == 0) return {};
  return detail::ring_flows(ranks, size, p - 1, 2 * (p - 1));
}

std::vector<std::vector<int>> rail_rings(const std::vector<int>& ranks, int ranks_per_node) {
  detail::check_group("rail rings", ranks, Bytes(0));
  std::vector<std::vector<int>> nodes = split_by_node(ranks, ranks_per_node);
  const std::size_t local = nodes.front().size();
  if (nodes.size() < 2 || local < 2) {
    throw InputError(
        fmt::format("rail rings: the {} ranks must span at least 2 nodes of {} with at least 2 on each",
                    ranks.size(), ranks_per_node));
  }
  for (const auto& n : nodes) {
    if (n.size() != local) {
      throw InputError(
          fmt::format("rail rings: every node must hold as many of the group's ranks as the first ({}), "
                      "one holds {}",
                      local, n.size()));
    }
  }
  // (split_by_node orders each node's ranks by local index: its rail.)
  const auto l = static_cast<int>(local);
  std::vector<std::vector<int>> rings(local);
  for (int c = 0; c < l; ++c) {
    auto& ring = rings[static_cast<std::size_t>(c)];
    ring.reserve(ranks.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      for (int j = 0; j < l; ++j) {
        // Even nodes c, c+1, ..., c-1; odd nodes the reverse.
        const int k = i % 2 == 0 ? j : l - 1 - j;
        ring.push_back(nodes[i][static_cast<std::size_t>((c + k) % l)]);
      }
    }
  }
  return rings;
}

std::vector<std::vector<int>> mesh_rings(const std::vector<int>& ranks) {
  detail::check_group("mesh rings", ranks, Bytes(0));
  const auto p = static_cast<int>(ranks.size());
  if (p < 2) throw InputError(fmt::format("mesh rings: {} rank(s); a ring needs 2", p));
  std::vector<std::vector<int>> rings;
  for (int stride = 1; stride < p; ++stride) {
    if (std::gcd(stride, p) != 1) continue;
    std::vector<int>& ring = rings.emplace_back();
    ring.reserve(ranks.size());
    for (int i = 0; i < p; ++i) ring.push_back(ranks[static_cast<std::size_t>((i * stride) % p)]);
  }
  return rings;
}

namespace {
/// Ring reduce-scatter / all-gather / both over `rings` at once, ring c
/// carrying part c of `size`.
TransferGraph multi_ring(const std::vector<int>& ranks, Bytes size,
                         const std::vector<std::vector<int>>& rings, bool flows, bool reduce_scatter,
                         bool all_gather) {
  TransferGraph g;
  if (size.count() == 0) return g;
  const auto p = static_cast<std::int64_t>(ranks.size());
  const std::int64_t first = reduce_scatter ? 0 : p - 1;
  const std::int64_t last = all_gather ? 2 * (p - 1) : p - 1;
  const auto parts = detail::split(size, static_cast<std::int64_t>(rings.size()));
  for (std::size_t c = 0; c < rings.size(); ++c) {
    detail::append(g, flows ? detail::ring_flows(rings[c], parts[c], first, last)
                            : detail::ring_steps(rings[c], parts[c], first, last));
  }
  return g;
}

TransferGraph mesh_ring(std::string_view what, const std::vector<int>& ranks, Bytes size, bool flows,
                        bool reduce_scatter, bool all_gather) {
  detail::check_group(what, ranks, size);
  if (size.count() == 0) return {};
  return multi_ring(ranks, size, mesh_rings(ranks), flows, reduce_scatter, all_gather);
}

TransferGraph rail_ring(std::string_view what, const std::vector<int>& ranks, Bytes size, int ranks_per_node,
                        bool flows, bool reduce_scatter, bool all_gather) {
  detail::check_group(what, ranks, size);
  if (size.count() == 0) return {};
  return multi_ring(ranks, size, rail_rings(ranks, ranks_per_node), flows, reduce_scatter, all_gather);
}
}  // namespace

TransferGraph mesh_ring_all_reduce(const std::vector<int>& ranks, Bytes size, bool flows) {
  return mesh_ring("ring all-reduce", ranks, size, flows, true, true);
}

TransferGraph mesh_ring_reduce_scatter(const std::vector<int>& ranks, Bytes size, bool flows) {
  return mesh_ring("ring reduce-scatter", ranks, size, flows, true, false);
}

TransferGraph mesh_ring_all_gather(const std::vector<int>& ranks, Bytes size, bool flows) {
  return mesh_ring("ring all-gather", ranks, size, flows, false, true);
}

TransferGraph rail_ring_all_reduce(const std::vector<int>& ranks, Bytes size, int ranks_per_node,
                                   bool flows) {
  return rail_ring("ring all-reduce", ranks, size, ranks_per_node, flows, true, true);
}

TransferGraph rail_ring_reduce_scatter(const std::vector<int>& ranks, Bytes size, int ranks_per_node,
                                       bool flows) {
  return rail_ring("ring reduce-scatter", ranks, size, ranks_per_node, flows, true, false);
}

TransferGraph rail_ring_all_gather(const std::vector<int>& ranks, Bytes size, int ranks_per_node,
                                   bool flows) {
  return rail_ring("ring all-gather", ranks, size, ranks_per_node, flows, false, true);
}

TransferGraph chain_broadcast(const std::vector<int>& ranks, Bytes size) {
  detail::check_group("chain broadcast", ranks, size);
  TransferGraph g;
  if (ranks.size() == 1 || size.count() == 0) return g;
  for (std::size_t i = 0; i + 1 < ranks.size(); ++i) {
    std::vector<TransferIndex> deps;
    if (i > 0) deps.push_back(static_cast<TransferIndex>(i - 1));
    detail::add(g, ranks[i], ranks[i + 1], size, static_cast<std::int32_t>(i), std::move(deps));
  }
  return g;
}

TransferGraph chain_reduce(const std::vector<int>& ranks, Bytes size) {
  detail::check_group("chain reduce", ranks, size);
  TransferGraph g;
  if (ranks.size() == 1 || size.count() == 0) return g;
  for (std::size_t i = ranks.size() - 1; i > 0; --i) {
    std::vector<TransferIndex> deps;
    if (!g.transfers.empty()) deps.push_back(static_cast<TransferIndex>(g.transfers.size() - 1));
    detail::add_reduce(g, ranks[i], ranks[i - 1], size, static_cast<std::int32_t>(g.transfers.size()),
                       std::move(deps));
  }
  return g;
}

}  // namespace tessera::collectives
