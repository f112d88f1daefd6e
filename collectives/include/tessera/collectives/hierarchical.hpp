#pragma once
// Two-level all-reduce for groups spanning several nodes.
#include <vector>

#include "tessera/collectives/transfer_graph.hpp"

namespace tessera::collectives {

enum class InterNode { Ring, Tree };

/// Hierarchical all-reduce. Global rank r lives on node r / ranks_per_node;
/// the group's ranks on one node keep their group order. With L ranks on each
/// of N nodes:
///  1. ring reduce-scatter of `size` inside every node (NVSwitch): local
///     position l ends with reduced shard (l+1) mod L of size/L;
///  2. all-reduce of that shard across the N nodes among the ranks of the
///     same local position (one "rail" per position), ring or double binary
///     tree; a rank starts once it has received its intra-node chunks;
///  3. ring all-gather inside every node.
/// Per rank: 2(L-1)/L * size inside the node and 2(N-1)/N * size/L across
/// nodes (ring). With N = 1 or L = 1 it is the flat ring all-reduce.
/// Throws InputError when ranks_per_node < 1 or nodes hold different numbers
/// of the group's ranks.
TransferGraph hierarchical_all_reduce(const std::vector<int>& ranks, Bytes size, int ranks_per_node,
                                      InterNode inter = InterNode::Ring);
/// The same with its rings as flows (ring_*_flows): per node one flow per
/// intra-node ring connection for the reduce-scatter and one for the
/// all-gather, per rail one flow per connection of the inter-node ring (a
/// tree rail keeps its steps). A rank's inter-node flows wait for the
/// reduce-scatter flow into it, its all-gather flow for the inter-node flows
/// into it.
TransferGraph hierarchical_all_reduce_flows(const std::vector<int>& ranks, Bytes size, int ranks_per_node,
                                            InterNode inter = InterNode::Ring);

/// The group's ranks per node, nodes in order of first appearance, ranks in
/// group order. Throws InputError for ranks_per_node < 1.
std::vector<std::vector<int>> split_by_node(const std::vector<int>& ranks, int ranks_per_node);

}  // namespace tessera::collectives
