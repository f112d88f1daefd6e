#pragma once
// Two-level all-reduce and all-to-all for groups spanning several nodes.
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
/// nodes (ring). With N = 1 or L = 1 it is the flat ring all-reduce. On
/// `mesh_node`s (a link per GPU pair) the phases inside a node, and the flat
/// ring of N = 1, run over the node's mesh_rings (ring.hpp), the bytes
/// split among them.
/// Throws InputError when ranks_per_node < 1 or nodes hold different numbers
/// of the group's ranks.
TransferGraph hierarchical_all_reduce(const std::vector<int>& ranks, Bytes size, int ranks_per_node,
                                      InterNode inter = InterNode::Ring, bool mesh_node = false);
/// The same with its rings as flows (ring_*_flows): per node one flow per
/// intra-node ring connection for the reduce-scatter and one for the
/// all-gather, per rail one flow per connection of the inter-node ring (a
/// tree rail keeps its steps). A rank's inter-node flows wait for the
/// reduce-scatter flow into it, its all-gather flow for the inter-node flows
/// into it.
TransferGraph hierarchical_all_reduce_flows(const std::vector<int>& ranks, Bytes size, int ranks_per_node,
                                            InterNode inter = InterNode::Ring, bool mesh_node = false);

/// Hierarchical (two-level) all-to-all, rail-aligned: with L ranks on each of
/// N nodes and the buffer split into one block per group member as the
/// direct all-to-all splits it,
///  1. inside every node, pairwise (L - 1 steps): the rank at local position
///     l sends the rank at position l' the blocks for position l' of every
///     node (N blocks, its own node's included);
///  2. across nodes on each rail (the ranks at one local position), pairwise
///     (N - 1 steps): a rank sends each other node's rank at its position
///     the L blocks its node's ranks have for it (its own included), once it
///     has received its node's blocks.
/// Per rank: (L-1)/L * size inside the node and (N-1)/N * size across nodes
/// (the direct all-to-all's inter-node bytes, in N - 1 messages on its rail
/// instead of (N - 1) L messages to every rank of the other nodes). With N = 1
/// or L = 1 it is the direct all-to-all. Throws InputError when
/// ranks_per_node < 1 or nodes hold different numbers of the group's ranks.
TransferGraph hierarchical_all_to_all(const std::vector<int>& ranks, Bytes size, int ranks_per_node);

/// The group's ranks per node, nodes in order of first appearance, each
/// node's ranks by local index (rank mod ranks_per_node: its rail, so that
/// position l on every node is one rail; helper 68: group order paired
/// rail 0 with rail 1 for a group listed {0, 1, 9, 8}). Throws InputError
/// for ranks_per_node < 1.
std::vector<std::vector<int>> split_by_node(const std::vector<int>& ranks, int ranks_per_node);

}  // namespace tessera::collectives
