#include "tessera/collectives/expand.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "build_util.hpp"
#include "tessera/collectives/all_to_all.hpp"
#include "tessera/collectives/halving_doubling.hpp"
#include "tessera/collectives/hierarchical.hpp"
#include "tessera/collectives/ring.hpp"
#include "tessera/collectives/tree.hpp"
#include "tessera/error.hpp"

namespace tessera::collectives {

using parallelism::CollectiveKind;

std::string_view to_string(Algorithm a) {
  switch (a) {
    case Algorithm::Auto:
      return "auto";
    case Algorithm::Ring:
      return "ring";
    case Algorithm::Tree:
      return "tree";
    case Algorithm::HalvingDoubling:
      return "halving-doubling";
    case Algorithm::Direct:
      return "direct";
    case Algorithm::Hierarchical:
      return "hierarchical";
  }
  return "?";
}

Algorithm parse_algorithm(std::string_view text) {
  for (Algorithm a : {Algorithm::Auto, Algorithm::Ring, Algorithm::Tree, Algorithm::HalvingDoubling,
                      Algorithm::Direct, Algorithm::Hierarchical}) {
    if (text == to_string(a)) return a;
  }
  throw InputError(
      fmt::format("unknown collective algorithm '{}' (expected auto, ring, tree, halving-doubling, direct or "
                  "hierarchical)",
                  text));
}

std::string_view to_string(Granularity g) { return g == Granularity::Flows ? "flows" : "steps"; }

Granularity parse_granularity(std::string_view text) {
  for (Granularity g : {Granularity::Steps, Granularity::Flows}) {
    if (text == to_string(g)) return g;
  }
  throw InputError(fmt::format("unknown collective granularity '{}' (expected flows or steps)", text));
}

TransferGraph send_recv(const std::vector<int>& ranks, Bytes size) {
  if (ranks.size() != 2 || ranks[0] == ranks[1]) {
    throw InputError(fmt::format("send-recv needs a group of two distinct ranks (got {})", ranks.size()));
  }
  if (size.count() < 0) throw InputError("send-recv: size must not be negative");
  TransferGraph g;
  g.transfers.push_back(Transfer{ranks[0], ranks[1], size, {}, 0});
  return g;
}

static_assert(static_cast<std::size_t>(CollectiveKind::SendRecv) + 1 == kNumCollectiveKinds);

std::vector<Algorithm> algorithms_for(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::AllReduce:
      return {Algorithm::Ring, Algorithm::Tree, Algorithm::HalvingDoubling, Algorithm::Hierarchical};
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllGather:
      return {Algorithm::Ring, Algorithm::HalvingDoubling};
    case CollectiveKind::Broadcast:
    case CollectiveKind::Reduce:
      return {Algorithm::Ring, Algorithm::Tree};
    case CollectiveKind::AllToAll:
      return {Algorithm::Direct, Algorithm::Hierarchical};
    case CollectiveKind::SendRecv:
      return {Algorithm::Direct};
  }
  return {};
}

namespace {

/// True when the group spans >= 2 nodes with >= 2 ranks on each, on the
/// same rails (local indices) on every node: the rail rings' hops between
/// nodes then stay on one rail (helper 68: {0, 1, 10, 11} on nodes of 8
/// paired rails 0-1 with 2-3 through the spines; it takes the flat ring).
bool multi_node_shape(const std::vector<int>& ranks, int ranks_per_node) {
  if (ranks_per_node < 2) return false;
  const auto nodes = split_by_node(ranks, ranks_per_node);
  if (nodes.size() < 2 || nodes.front().size() < 2) return false;
  auto rails = [&](const std::vector<int>& n) {
    std::vector<int> out;
    out.reserve(n.size());
    for (int r : n) out.push_back(r % ranks_per_node);  // (split_by_node sorts by it)
    return out;
  };
  const std::vector<int> first = rails(nodes.front());
  return std::all_of(nodes.begin(), nodes.end(), [&](const auto& n) { return rails(n) == first; });
}

/// True when `a` for `kind` is of the ring family, which Granularity::Flows
/// expands as flows (ExpandOptions::granularity).
bool ring_family(CollectiveKind kind, Algorithm a) {
  switch (kind) {
    case CollectiveKind::AllReduce:
      return a == Algorithm::Ring || a == Algorithm::Hierarchical;
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllGather:
      return a == Algorithm::Ring;
    default:
      return false;
  }
}

/// True when every rank of the group is on one node (ranks_per_node known).
bool within_one_node(const std::vector<int>& ranks, int ranks_per_node) {
  if (ranks_per_node < 1 || ranks.empty()) return false;
  const int node = ranks.front() / ranks_per_node;
  return std::all_of(ranks.begin(), ranks.end(), [&](int r) { return r / ranks_per_node == node; });
}

TransferGraph build(CollectiveKind kind, Algorithm a, const std::vector<int>& ranks, Bytes size,
                    const ExpandOptions& o) {
  const bool flows = o.granularity == Granularity::Flows;
  // A ring over several nodes runs as NCCL's rail-aligned channels; one in
  // a mesh node as rings over the mesh's links.
  const bool rails = a == Algorithm::Ring && multi_node_shape(ranks, o.ranks_per_node);
  const bool mesh =
      a == Algorithm::Ring && o.mesh_node && ranks.size() >= 3 && within_one_node(ranks, o.ranks_per_node);
  switch (kind) {
    case CollectiveKind::AllReduce:
      if (mesh) return mesh_ring_all_reduce(ranks, size, flows);
      if (rails) return rail_ring_all_reduce(ranks, size, o.ranks_per_node, flows, o.mesh_node);
      if (a == Algorithm::Ring) return flows ? ring_all_reduce_flows(ranks, size) : ring_all_reduce(ranks, size);
      if (a == Algorithm::Tree) return double_binary_tree_all_reduce(ranks, size);
      if (a == Algorithm::HalvingDoubling) return halving_doubling_all_reduce(ranks, size);
      if (a == Algorithm::Hierarchical) {
        if (o.ranks_per_node < 1) {
          throw InputError(fmt::format(
              "hierarchical all-reduce needs ranks_per_node (got {}): which of the {} ranks share a node",
              o.ranks_per_node, ranks.size()));
        }
        return flows ? hierarchical_all_reduce_flows(ranks, size, o.ranks_per_node, InterNode::Ring,
                                                     o.mesh_node)
                     : hierarchical_all_reduce(ranks, size, o.ranks_per_node, InterNode::Ring, o.mesh_node);
      }
      break;
    case CollectiveKind::ReduceScatter:
      if (mesh) return mesh_ring_reduce_scatter(ranks, size, flows);
      if (rails) return rail_ring_reduce_scatter(ranks, size, o.ranks_per_node, flows, o.mesh_node);
      if (a == Algorithm::Ring) return flows ? ring_reduce_scatter_flows(ranks, size) : ring_reduce_scatter(ranks, size);
      if (a == Algorithm::HalvingDoubling) return halving_reduce_scatter(ranks, size);
      break;
    case CollectiveKind::AllGather:
      if (mesh) return mesh_ring_all_gather(ranks, size, flows);
      if (rails) return rail_ring_all_gather(ranks, size, o.ranks_per_node, flows, o.mesh_node);
      if (a == Algorithm::Ring) return flows ? ring_all_gather_flows(ranks, size) : ring_all_gather(ranks, size);
      if (a == Algorithm::HalvingDoubling) return doubling_all_gather(ranks, size);
      break;
    case CollectiveKind::Broadcast:
      if (a == Algorithm::Ring) return chain_broadcast(ranks, size);
      if (a == Algorithm::Tree) return binomial_broadcast(ranks, size);
      break;
    case CollectiveKind::Reduce:
      if (a == Algorithm::Ring) return chain_reduce(ranks, size);
      if (a == Algorithm::Tree) return binomial_reduce(ranks, size);
      break;
    case CollectiveKind::AllToAll:
      if (a == Algorithm::Direct) return direct_all_to_all(ranks, size);
      if (a == Algorithm::Hierarchical) return hierarchical_all_to_all(ranks, size, o.ranks_per_node);
      break;
    case CollectiveKind::SendRecv:
      return send_recv(ranks, size);
  }
  std::string names;
  for (Algorithm x : algorithms_for(kind)) names += fmt::format("{}{}", names.empty() ? "" : ", ", to_string(x));
  throw AlgorithmError(kind, a,
                       fmt::format("collective {} has no algorithm '{}' (available: auto, {})",
                                   parallelism::to_string(kind), to_string(a), names));
}

}  // namespace

Algorithm resolve_algorithm(CollectiveKind kind, const std::vector<int>& ranks, Bytes size,
                            const ExpandOptions& o) {
  if (const Algorithm chosen = o.chosen(kind); chosen != Algorithm::Auto) return chosen;
  const auto p = static_cast<double>(ranks.size());
  const double a = o.auto_latency.seconds();
  const double s_over_b = size.as_double() / o.auto_bandwidth.bytes_per_second();
  const double c = std::max(1, o.chunks);
  const double log_p = std::bit_width(ranks.size() > 1 ? ranks.size() - 1 : 0);  // ceil(log2 p)
  switch (kind) {
    case CollectiveKind::SendRecv:
    case CollectiveKind::AllToAll:
      return Algorithm::Direct;
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllGather:
      return Algorithm::Ring;
    case CollectiveKind::AllReduce: {
      if (ranks.size() <= 2) return Algorithm::Ring;
      // Across nodes the ring runs as L rail rings at once (build(): one per
      // rank a node holds), each with S/L of the buffer; the tree has no
      // such lanes. The choice is by size, as NCCL's, whatever the chunks:
      // chunking pipelines the algorithm chosen. (A tree pipelined in C
      // chunks, estimated so, reached the one ring's bandwidth term at C = 8
      // on 16 ranks and then won at any size, while the tree as built runs
      // 1.3x (one node) to 5x (two nodes' rail rings) slower than the ring
      // there: default.yaml with collectives.chunks 8.)
      const double lanes = multi_node_shape(ranks, o.ranks_per_node)
                               ? static_cast<double>(split_by_node(ranks, o.ranks_per_node).front().size())
                               : 1.0;
      const double ring = 2 * (p - 1) * (a + s_over_b / (p * lanes));
      const double tree = 2 * log_p * (a + s_over_b);
      return tree < ring ? Algorithm::Tree : Algorithm::Ring;
    }
    case CollectiveKind::Broadcast:
    case CollectiveKind::Reduce: {
      const double chain = (p - 1 + c - 1) * (a + s_over_b / c);
      const double tree = log_p * (a + s_over_b);
      return chain < tree ? Algorithm::Ring : Algorithm::Tree;
    }
  }
  return Algorithm::Ring;
}

TransferGraph expand(CollectiveKind kind, const std::vector<int>& ranks, Bytes size,
                     const ExpandOptions& options) {
  if (kind == CollectiveKind::SendRecv) return send_recv(ranks, size);
  detail::check_group(parallelism::to_string(kind), ranks, size);
  if (options.chunks < 1) {
    throw InputError(fmt::format("collective chunks must be at least 1 (got {})", options.chunks));
  }
  const Algorithm a = resolve_algorithm(kind, ranks, size, options);
  // Validate the pair once, even for sizes that expand to nothing.
  (void)build(kind, a, ranks, Bytes(0), options);
  if (options.chunks == 1 || (options.granularity == Granularity::Flows && ring_family(kind, a))) {
    return build(kind, a, ranks, size, options);
  }
  return pipeline([&](Bytes slice) { return build(kind, a, ranks, slice, options); }, size, options.chunks);
}

TransferGraph expand(CollectiveKind kind, const std::vector<int>& ranks, Bytes size, Algorithm algorithm) {
  ExpandOptions o;
  o.algorithm = algorithm;
  return expand(kind, ranks, size, o);
}

double bus_bytes(parallelism::CollectiveKind kind, int group_size, Bytes size) {
  const auto n = static_cast<double>(group_size);
  const double s = size.as_double();
  switch (kind) {
    case parallelism::CollectiveKind::AllReduce:
      return 2.0 * (n - 1) / n * s;
    case parallelism::CollectiveKind::ReduceScatter:
    case parallelism::CollectiveKind::AllGather:
    case parallelism::CollectiveKind::AllToAll:
      return (n - 1) / n * s;
    case parallelism::CollectiveKind::Broadcast:
    case parallelism::CollectiveKind::Reduce:
    case parallelism::CollectiveKind::SendRecv:
      return s;
  }
  return s;
}

}  // namespace tessera::collectives
