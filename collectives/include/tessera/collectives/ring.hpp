#pragma once
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

}  // namespace tessera::collectives
