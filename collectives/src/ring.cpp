#include "tessera/collectives/ring.hpp"

#include <fmt/format.h>

#include <algorithm>

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
  // The chunks ring_steps has rank i send over a run of steps are a cyclic
  // run of chunk indices: summed from prefix sums, O(1) a rank (a loop over
  // the steps made a ring of p ranks cost p^2: 93% of a 3,200-rank
  // data-parallel run; helper 179).
  std::vector<std::int64_t> prefix(static_cast<std::size_t>(p) + 1, 0);
  for (std::int64_t c = 0; c < p; ++c) {
    prefix[static_cast<std::size_t>(c) + 1] =
        prefix[static_cast<std::size_t>(c)] + chunks[static_cast<std::size_t>(c)].count();
  }
  // Chunks lo, lo + 1, ..., lo + len - 1 (mod p), len <= p.
  auto cyclic = [&](std::int64_t lo, std::int64_t len) -> std::int64_t {
    if (len <= 0) return 0;
    lo = (lo % p + p) % p;
    const auto at = [&](std::int64_t k) { return prefix[static_cast<std::size_t>(k)]; };
    return lo + len <= p ? at(lo + len) - at(lo) : at(p) - at(lo) + at(lo + len - p);
  };
  // Reduce-scatter steps s < p - 1 send chunk i - s; all-gather steps send
  // chunk i + 1 - (s - (p - 1)).
  const std::int64_t rs_from = std::max<std::int64_t>(first, 0), rs_to = std::min(last, p - 1);
  const std::int64_t rs = std::max<std::int64_t>(0, rs_to - rs_from);
  const std::int64_t ag_from = std::max(first, p - 1) - (p - 1),
                     ag = std::max<std::int64_t>(0, last - std::max(first, p - 1));
  g.transfers.reserve(static_cast<std::size_t>(p));
  for (std::int64_t i = 0; i < p; ++i) {
    Transfer t;
    t.src = ranks[static_cast<std::size_t>(i)];
    t.dst = ranks[static_cast<std::size_t>((i + 1) % p)];
    t.steps = static_cast<std::int32_t>(last - first);
    t.ring = 0;
    const Bytes reduced(cyclic(i - rs_from - rs + 1, rs));
    const Bytes gathered(cyclic(i + 1 - ag_from - ag + 1, ag));
    t.bytes = reduced + gathered;
    if (rs > 0) {
      t.reduce = true;
      t.reduce_steps = static_cast<std::int32_t>(rs);
      t.reduce_bytes = reduced;
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

std::vector<std::vector<int>> rail_rings(const std::vector<int>& ranks, int ranks_per_node, bool mesh_node) {
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
  // Ring c's order of the positions inside a node: c, c+1, ..., c-1 (the
  // links i -> i+1 of an NVSwitch node's ports), or on a mesh of an even
  // count the zig-zag paths, every directed link in one ring.
  std::vector<std::vector<int>> chains;
  if (mesh_node && l % 2 == 0) {
    chains = mesh_paths(l);
  } else {
    for (int c = 0; c < l; ++c) {
      std::vector<int>& chain = chains.emplace_back();
      for (int j = 0; j < l; ++j) chain.push_back((c + j) % l);
    }
  }
  std::vector<std::vector<int>> rings(local);
  for (int c = 0; c < l; ++c) {
    auto& ring = rings[static_cast<std::size_t>(c)];
    const auto& chain = chains[static_cast<std::size_t>(c)];
    ring.reserve(ranks.size());
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      for (int j = 0; j < l; ++j) {
        // Even nodes the chain; odd nodes the reverse.
        const int k = i % 2 == 0 ? j : l - 1 - j;
        ring.push_back(nodes[i][static_cast<std::size_t>(chain[static_cast<std::size_t>(k)])]);
      }
    }
  }
  return rings;
}

namespace {
/// Walecki's zig-zag order of the 2m points of a circle from point k: k, k+1,
/// k-1, k+2, k-2, ..., k+m (mod 2m). For k = 0..m-1 these m Hamiltonian paths
/// share no edge and cover every edge of the complete graph on the 2m points.
std::vector<int> zigzag(int k, int m) {
  const int c = 2 * m;
  std::vector<int> out{k};
  out.reserve(static_cast<std::size_t>(c));
  for (int j = 1; j <= m; ++j) {
    out.push_back((k + j) % c);
    if (j < m) out.push_back(((k - j) % c + c) % c);
  }
  return out;
}

/// floor((p-1)/2) Hamiltonian cycles of the complete graph on 0..p-1 (p >= 3)
/// that share no edge, each starting at 0. Odd p (Walecki): the hub p-1 and
/// the zig-zag from k of the circle 0..p-2, k = 0..(p-3)/2; they use every
/// edge. Even p: those of p-1 with p-1 spliced into edge {m-1, m} of each
/// zig-zag (positions m-1 and m, m = (p-2)/2): the spliced edges are
/// {k+m/2, k-m/2} (m even) or {k-(m-1)/2, k+(m+1)/2} (m odd), k = 0..m-1,
/// pairwise disjoint, so with {p-1, p-2} they are a perfect matching, the
/// edges no cycle uses (tests check both for p up to 64).
std::vector<std::vector<int>> hamiltonian_cycles(int p) {
  const int odd = p % 2 == 1 ? p : p - 1;
  const int m = (odd - 1) / 2;
  std::vector<std::vector<int>> cycles;
  for (int k = 0; k < m; ++k) {
    std::vector<int> c{odd - 1};
    for (int v : zigzag(k, m)) c.push_back(v);
    if (p != odd) c.insert(c.begin() + m + 1, p - 1);
    std::rotate(c.begin(), std::find(c.begin(), c.end(), 0), c.end());
    cycles.push_back(std::move(c));
  }
  return cycles;
}

/// `order` (positions 0..p-1) as the ranks at those positions.
std::vector<int> at_positions(const std::vector<int>& ranks, const std::vector<int>& order) {
  std::vector<int> out;
  out.reserve(order.size());
  for (int i : order) out.push_back(ranks[static_cast<std::size_t>(i)]);
  return out;
}
}  // namespace

std::vector<std::vector<int>> mesh_rings(const std::vector<int>& ranks) {
  detail::check_group("mesh rings", ranks, Bytes(0));
  const auto p = static_cast<int>(ranks.size());
  if (p < 2) throw InputError(fmt::format("mesh rings: {} rank(s); a ring needs 2", p));
  if (p == 2) return {ranks};
  std::vector<std::vector<int>> rings;
  for (const auto& cycle : hamiltonian_cycles(p)) {
    rings.push_back(at_positions(ranks, cycle));
    std::vector<int> back(cycle.rbegin(), cycle.rend());  // the other direction, from position 0
    std::rotate(back.begin(), back.end() - 1, back.end());
    rings.push_back(at_positions(ranks, back));
  }
  return rings;
}

int mesh_ring_count(int p) { return p < 3 ? 1 : 2 * ((p - 1) / 2); }

std::vector<std::vector<int>> mesh_paths(int local) {
  if (local < 2 || local % 2 != 0) {
    throw InputError(fmt::format("mesh paths: {} GPUs; the zig-zag paths need an even number", local));
  }
  std::vector<std::vector<int>> paths;
  for (int k = 0; k < local / 2; ++k) {
    std::vector<int> path = zigzag(k, local / 2);
    paths.push_back(path);
    paths.emplace_back(path.rbegin(), path.rend());
  }
  return paths;
}

namespace detail {
TransferGraph multi_ring(const std::vector<std::vector<int>>& rings, Bytes size, std::int64_t first,
                         std::int64_t last, bool flows) {
  TransferGraph g;
  const auto parts = split(size, static_cast<std::int64_t>(rings.size()));
  for (std::size_t c = 0; c < rings.size(); ++c) {
    append(g,
           flows ? ring_flows(rings[c], parts[c], first, last) : ring_steps(rings[c], parts[c], first, last));
  }
  return g;
}
}  // namespace detail

namespace {
/// Ring reduce-scatter / all-gather / both over `rings` at once, ring c
/// carrying part c of `size`.
TransferGraph multi_ring(const std::vector<int>& ranks, Bytes size,
                         const std::vector<std::vector<int>>& rings, bool flows, bool reduce_scatter,
                         bool all_gather) {
  if (size.count() == 0) return {};
  const auto p = static_cast<std::int64_t>(ranks.size());
  const std::int64_t first = reduce_scatter ? 0 : p - 1;
  const std::int64_t last = all_gather ? 2 * (p - 1) : p - 1;
  return detail::multi_ring(rings, size, first, last, flows);
}

TransferGraph mesh_ring(std::string_view what, const std::vector<int>& ranks, Bytes size, bool flows,
                        bool reduce_scatter, bool all_gather) {
  detail::check_group(what, ranks, size);
  if (size.count() == 0) return {};
  return multi_ring(ranks, size, mesh_rings(ranks), flows, reduce_scatter, all_gather);
}

TransferGraph rail_ring(std::string_view what, const std::vector<int>& ranks, Bytes size, int ranks_per_node,
                        bool flows, bool reduce_scatter, bool all_gather, bool mesh_node) {
  detail::check_group(what, ranks, size);
  if (size.count() == 0) return {};
  return multi_ring(ranks, size, rail_rings(ranks, ranks_per_node, mesh_node), flows, reduce_scatter,
                    all_gather);
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

TransferGraph rail_ring_all_reduce(const std::vector<int>& ranks, Bytes size, int ranks_per_node, bool flows,
                                   bool mesh_node) {
  return rail_ring("ring all-reduce", ranks, size, ranks_per_node, flows, true, true, mesh_node);
}

TransferGraph rail_ring_reduce_scatter(const std::vector<int>& ranks, Bytes size, int ranks_per_node,
                                       bool flows, bool mesh_node) {
  return rail_ring("ring reduce-scatter", ranks, size, ranks_per_node, flows, true, false, mesh_node);
}

TransferGraph rail_ring_all_gather(const std::vector<int>& ranks, Bytes size, int ranks_per_node, bool flows,
                                   bool mesh_node) {
  return rail_ring("ring all-gather", ranks, size, ranks_per_node, flows, false, true, mesh_node);
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
