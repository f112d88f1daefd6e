#include "tessera/collectives/hierarchical.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "build_util.hpp"
#include "tessera/collectives/all_to_all.hpp"
#include "tessera/collectives/ring.hpp"
#include "tessera/error.hpp"

namespace tessera::collectives {

std::vector<std::vector<int>> split_by_node(const std::vector<int>& ranks, int ranks_per_node) {
  if (ranks_per_node < 1) {
    throw InputError(
        fmt::format("hierarchical all-reduce: ranks_per_node must be at least 1 (got {})", ranks_per_node));
  }
  std::vector<std::vector<int>> nodes;
  std::map<int, std::size_t> slot;
  for (int r : ranks) {
    auto [it, inserted] = slot.emplace(r / ranks_per_node, nodes.size());
    if (inserted) nodes.emplace_back();
    nodes[it->second].push_back(r);
  }
  for (auto& n : nodes) {
    std::stable_sort(n.begin(), n.end(),
                     [&](int a, int b) { return a % ranks_per_node < b % ranks_per_node; });
  }
  return nodes;
}

namespace {

/// Throws InputError, naming `what`, unless every node holds as many of the
/// group's ranks as the first.
void check_even_nodes(std::string_view what, const std::vector<std::vector<int>>& nodes, int ranks_per_node) {
  const std::size_t local = nodes.front().size();
  for (std::size_t n = 1; n < nodes.size(); ++n) {
    if (nodes[n].size() != local) {
      throw InputError(
          fmt::format("{}: node {} holds {} of the group's ranks but node {} holds {} "
                      "(every node needs "
                      "the same count; ranks_per_node = {})",
                      what, nodes[n].front() / ranks_per_node, nodes[n].size(),
                      nodes.front().front() / ranks_per_node, local, ranks_per_node));
    }
  }
}

TransferGraph hierarchical(const std::vector<int>& ranks, Bytes size, int ranks_per_node, InterNode inter,
                           bool flows, bool mesh_node) {
  const auto rings = flows ? &detail::ring_flows : &detail::ring_steps;
  // Inside a mesh node, the phases run over its mesh rings (one ring for 2).
  auto in_node = [&](const std::vector<int>& members, std::int64_t first, std::int64_t last) {
    return mesh_node ? detail::multi_ring(mesh_rings(members), size, first, last, flows)
                     : rings(members, size, first, last);
  };
  detail::check_group("hierarchical all-reduce", ranks, size);
  const auto nodes = split_by_node(ranks, ranks_per_node);
  const std::size_t local = nodes.front().size();
  check_even_nodes("hierarchical all-reduce", nodes, ranks_per_node);
  if (ranks.size() == 1 || size.count() == 0) return {};
  if (nodes.size() == 1 && mesh_node) return mesh_ring_all_reduce(ranks, size, flows);
  if (nodes.size() == 1 || local == 1) return flows ? ring_all_reduce_flows(ranks, size) : ring_all_reduce(ranks, size);

  const auto members_per_node = static_cast<std::int64_t>(local);
  TransferGraph g;
  // 1. Intra-node reduce-scatter.
  const auto rs_begin = static_cast<TransferIndex>(g.transfers.size());
  for (const auto& members : nodes) detail::append(g, in_node(members, 0, members_per_node - 1));
  const auto rs_end = static_cast<TransferIndex>(g.transfers.size());
  const auto rs_into = detail::into(g, rs_begin, rs_end);
  auto received = [](const auto& by_rank, int rank) {
    auto it = by_rank.find(rank);
    return it == by_rank.end() ? std::vector<TransferIndex>{} : it->second;
  };
  // 2. Per rail: the shard local position l holds, across nodes.
  const auto shards = detail::split(size, members_per_node);
  for (std::int64_t l = 0; l < members_per_node; ++l) {
    std::vector<int> rail;
    rail.reserve(nodes.size());
    for (const auto& members : nodes) rail.push_back(members[static_cast<std::size_t>(l)]);
    const Bytes shard = shards[static_cast<std::size_t>((l + 1) % members_per_node)];
    const auto n = static_cast<std::int64_t>(rail.size());
    const TransferGraph part = inter == InterNode::Ring ? rings(rail, shard, 0, 2 * (n - 1))
                                                        : detail::double_binary_tree_core(rail, shard);
    const TransferIndex begin = detail::append(g, part);
    detail::gate(g, begin, static_cast<TransferIndex>(g.transfers.size()),
                 [&](int src) { return received(rs_into, src); });
  }
  const auto inter_end = static_cast<TransferIndex>(g.transfers.size());
  const auto inter_into = detail::into(g, rs_end, inter_end);
  // 3. Intra-node all-gather.
  for (const auto& members : nodes) {
    const TransferIndex begin =
        detail::append(g, in_node(members, members_per_node - 1, 2 * (members_per_node - 1)));
    detail::gate(g, begin, static_cast<TransferIndex>(g.transfers.size()),
                 [&](int src) { return received(inter_into, src); });
  }
  return g;
}

}  // namespace

TransferGraph hierarchical_all_reduce(const std::vector<int>& ranks, Bytes size, int ranks_per_node,
                                      InterNode inter, bool mesh_node) {
  return hierarchical(ranks, size, ranks_per_node, inter, false, mesh_node);
}

TransferGraph hierarchical_all_reduce_flows(const std::vector<int>& ranks, Bytes size, int ranks_per_node,
                                            InterNode inter, bool mesh_node) {
  return hierarchical(ranks, size, ranks_per_node, inter, true, mesh_node);
}

TransferGraph hierarchical_all_to_all(const std::vector<int>& ranks, Bytes size, int ranks_per_node) {
  detail::check_group("hierarchical all-to-all", ranks, size);
  if (ranks_per_node < 1) {
    throw InputError(fmt::format(
        "hierarchical all-to-all needs ranks_per_node (got {}): which of the {} ranks share a node",
        ranks_per_node, ranks.size()));
  }
  const auto nodes = split_by_node(ranks, ranks_per_node);
  check_even_nodes("hierarchical all-to-all", nodes, ranks_per_node);
  if (ranks.size() == 1 || size.count() == 0) return {};
  if (nodes.size() == 1 || nodes.front().size() == 1) return direct_all_to_all(ranks, size);

  const auto n_nodes = static_cast<std::int64_t>(nodes.size());
  const auto local = static_cast<std::int64_t>(nodes.front().size());
  // The block for group member j (as the direct all-to-all splits the buffer).
  std::map<int, std::size_t> position;
  for (std::size_t j = 0; j < ranks.size(); ++j) position.emplace(ranks[j], j);
  const auto blocks = detail::split(size, static_cast<std::int64_t>(ranks.size()));
  auto block = [&](std::int64_t n, std::int64_t l) {
    return blocks[position.at(nodes[static_cast<std::size_t>(n)][static_cast<std::size_t>(l)])];
  };
  auto member = [&](std::int64_t n, std::int64_t l) {
    return nodes[static_cast<std::size_t>(n)][static_cast<std::size_t>(l)];
  };
  TransferGraph g;
  // 1. Inside every node, pairwise (step s: l -> l + s): the blocks of every
  //    node's member at the peer's local position.
  for (std::int64_t s = 1; s < local; ++s) {
    for (std::int64_t n = 0; n < n_nodes; ++n) {
      for (std::int64_t l = 0; l < local; ++l) {
        const std::int64_t to = (l + s) % local;
        Bytes bytes;
        for (std::int64_t m = 0; m < n_nodes; ++m) bytes += block(m, to);
        std::vector<TransferIndex> deps;
        if (s > 1) deps.push_back(static_cast<TransferIndex>(((s - 2) * n_nodes + n) * local + l));
        detail::add(g, member(n, l), member(n, to), bytes, static_cast<std::int32_t>(s - 1), std::move(deps));
      }
    }
  }
  const auto intra_end = static_cast<TransferIndex>(g.transfers.size());
  const auto intra_into = detail::into(g, 0, intra_end);
  // 2. Across nodes on every rail, pairwise (step t: node n -> n + t): the
  //    blocks of the node's `local` members for the peer, once the rank has
  //    received its node's blocks.
  for (std::int64_t t = 1; t < n_nodes; ++t) {
    for (std::int64_t n = 0; n < n_nodes; ++n) {
      for (std::int64_t l = 0; l < local; ++l) {
        const std::int64_t to = (n + t) % n_nodes;
        std::vector<TransferIndex> deps;
        if (t > 1) deps.push_back(intra_end + static_cast<TransferIndex>(((t - 2) * n_nodes + n) * local + l));
        detail::add(g, member(n, l), member(to, l), block(to, l) * local,
                    static_cast<std::int32_t>(local - 1 + t - 1), std::move(deps));
      }
    }
  }
  detail::gate(g, intra_end, static_cast<TransferIndex>(g.transfers.size()), [&](int src) {
    auto it = intra_into.find(src);
    return it == intra_into.end() ? std::vector<TransferIndex>{} : it->second;
  });
  return g;
}

}  // namespace tessera::collectives
