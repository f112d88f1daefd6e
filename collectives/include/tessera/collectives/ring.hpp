#pragma once
// Ring and chain (pipeline) algorithms. Group order is ring order.
#include <vector>

#include "tessera/collectives/transfer_graph.hpp"

namespace tessera::collectives {

/// Ring all-reduce of a `size`-byte buffer over `ranks` (in ring order):
/// p-1 reduce-scatter steps then p-1 all-gather steps; in every step each rank
/// sends one chunk (size/p, the remainder spread over the first chunks) to the
/// next rank. Step s of rank i waits for step s-1 of rank i (its own previous
/// send) and for step s-1 of rank i-1 (the chunk it has to forward).
/// Each rank sends 2(p-1)/p * size bytes in total.
/// Throws InputError for an empty group, a duplicate rank or a negative size.
TransferGraph ring_all_reduce(const std::vector<int>& ranks, Bytes size);

/// Ring reduce-scatter of a `size`-byte (full, unscattered) buffer: the first
/// p-1 steps of ring_all_reduce; each rank sends (p-1)/p * size and ends with
/// the reduced chunk (i+1) mod p.
TransferGraph ring_reduce_scatter(const std::vector<int>& ranks, Bytes size);

/// Ring all-gather of a `size`-byte (full, gathered) buffer: the last p-1
/// steps of ring_all_reduce (rank i starts with chunk (i+1) mod p); each rank
/// sends (p-1)/p * size.
TransferGraph ring_all_gather(const std::vector<int>& ranks, Bytes size);

/// Flow granularity (Granularity::Flows) of the three above: one transfer
/// per ring connection ranks[i] -> ranks[i+1], carrying exactly the bytes
/// that connection sends in the step graph, with `steps` = the graph's steps
/// (2(p-1), p-1, p-1) and, for the reduce-scatter steps, reduce_steps and
/// reduce_bytes. No dependencies: every flow starts at once.
TransferGraph ring_all_reduce_flows(const std::vector<int>& ranks, Bytes size);
TransferGraph ring_reduce_scatter_flows(const std::vector<int>& ranks, Bytes size);
TransferGraph ring_all_gather_flows(const std::vector<int>& ranks, Bytes size);

/// NCCL's rings over a group that spans N >= 2 nodes with the same L >= 2 of
/// its ranks on each (global rank r on node r / ranks_per_node): L rings
/// (NCCL's channels, one per NIC), each through every rank, whose hops
/// between nodes stay on one rail, as NCCL's rings do (PXN on NVSwitch
/// nodes). Nodes in group order; on each, the group's ranks by local index
/// (rail) as positions 0..L-1. Ring c visits positions c, c+1, ..., c-1
/// (mod L) on the 1st, 3rd, ... node and the reverse on the 2nd, 4th, ...:
/// each node's exit and the next node's entry are the same position, so a
/// hop between nodes joins GPUs of one rail, and over the L rings every
/// rank sends across nodes once per direction. With an odd N the wrap from
/// the last node to the first changes rails. On `mesh_node`s (a link per
/// GPU pair) of an even L, ring c visits the positions in the order of
/// mesh_paths(L)[c] instead (the reverse on the 2nd, 4th, ... node), so the
/// L rings use every directed link inside a node once where the chains
/// c, c+1, ... would all crowd the links i -> i+1; a mesh of an odd L keeps
/// those chains. Throws InputError unless the group has that shape.
std::vector<std::vector<int>> rail_rings(const std::vector<int>& ranks, int ranks_per_node,
                                         bool mesh_node = false);

/// Ring all-reduce, reduce-scatter and all-gather over the rail_rings of
/// `ranks`: ring c carries part c of `size` split in L (the remainder
/// spread over the first), all rings at once; step by step, or as flows
/// (one transfer per ring connection, as ring_*_flows).
TransferGraph rail_ring_all_reduce(const std::vector<int>& ranks, Bytes size, int ranks_per_node, bool flows,
                                   bool mesh_node = false);
TransferGraph rail_ring_reduce_scatter(const std::vector<int>& ranks, Bytes size, int ranks_per_node,
                                       bool flows, bool mesh_node = false);
TransferGraph rail_ring_all_gather(const std::vector<int>& ranks, Bytes size, int ranks_per_node, bool flows,
                                   bool mesh_node = false);

/// The rings of a group inside one node whose GPUs are a full NVLink mesh
/// (a link per pair, no switch): the floor((p-1)/2) Hamiltonian cycles of
/// the complete graph on the group's p positions that share no link
/// (Walecki's construction), each as two rings, one per direction, from
/// ranks[0]. So NCCL's channels over a mesh, which one ring would leave idle
/// but for one link of each GPU's p - 1, use every directed link at an odd
/// p and all but a perfect matching's at an even p: 1 ring at p = 2, 2 at 3
/// and 4 (at 4 two pairs stay idle), 4 at 5 and 6, 6 at 7 and 8. Throws
/// InputError for fewer than 2 ranks.
std::vector<std::vector<int>> mesh_rings(const std::vector<int>& ranks);
/// How many rings mesh_rings gives a group of p ranks: 1 below 3, else
/// 2 floor((p-1)/2).
int mesh_ring_count(int p);

/// The L directed Hamiltonian paths through the positions 0..L-1 of a mesh
/// node (L even) that share no directed link: Walecki's zig-zags k, k+1, k-1,
/// k+2, ..., k + L/2 (mod L) for k = 0..L/2-1, each followed by its reverse;
/// together they use every directed link once. Throws InputError for an odd
/// or non-positive L.
std::vector<std::vector<int>> mesh_paths(int local);

/// Ring all-reduce, reduce-scatter and all-gather over the mesh_rings of
/// `ranks`, ring c carrying part c of `size` (as the rail rings split it).
TransferGraph mesh_ring_all_reduce(const std::vector<int>& ranks, Bytes size, bool flows);
TransferGraph mesh_ring_reduce_scatter(const std::vector<int>& ranks, Bytes size, bool flows);
TransferGraph mesh_ring_all_gather(const std::vector<int>& ranks, Bytes size, bool flows);

/// Chain broadcast from ranks[0]: ranks[0] -> ranks[1] -> ... -> ranks[p-1],
/// the whole buffer per hop. Pipelined with pipeline(): C chunks take
/// (p-1 + C-1) hop times of size/C each.
TransferGraph chain_broadcast(const std::vector<int>& ranks, Bytes size);

/// Chain reduce to ranks[0]: ranks[p-1] -> ranks[p-2] -> ... -> ranks[0].
TransferGraph chain_reduce(const std::vector<int>& ranks, Bytes size);

}  // namespace tessera::collectives
