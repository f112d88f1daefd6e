#pragma once
// Tree algorithms. Positions are indices into the group; the root is ranks[0].
#include <vector>

#include "tessera/collectives/transfer_graph.hpp"

namespace tessera::collectives {

/// Binomial-tree broadcast from ranks[0]: in round k = 0..ceil(log2 p)-1,
/// position i < 2^k sends the whole buffer to position i + 2^k. Every rank
/// sends and receives at most one message per round: ceil(log2 p) rounds.
TransferGraph binomial_broadcast(const std::vector<int>& ranks, Bytes size);

/// Binomial-tree reduce to ranks[0]: in round k, position i with lowest set
/// bit k sends its partial result (the whole buffer) to i - 2^k, after it has
/// received from its own children and after the parent's round k-1 message
/// (one message into a rank per round). ceil(log2 p) rounds, p-1 messages.
TransferGraph binomial_reduce(const std::vector<int>& ranks, Bytes size);

/// Parent position of `i` in NCCL's in-order binary tree over p positions
/// (ncclGetBtree): bit = lowest set bit of i, parent = (i ^ bit) | (bit << 1),
/// or i ^ bit when that is out of range; position 0 is the root (-1).
int btree_parent(int i, int p);
/// Parent position of `i` in the second tree of the pair (ncclGetDtree): the
/// first tree mirrored (even p) or shifted by one (odd p), so that most leaves
/// of one tree are inner nodes of the other.
int dtree_parent(int i, int p);

/// Double binary tree all-reduce (NCCL): the buffer is halved; each half is
/// reduced up one of the two trees and broadcast back down it. A node sends
/// up after all its children have, and down after it received from above.
/// Each rank sends half the buffer per tree edge it owns (to its parent and
/// to each child): 2(p-1) messages of size/2 per tree.
TransferGraph double_binary_tree_all_reduce(const std::vector<int>& ranks, Bytes size);

}  // namespace tessera::collectives
