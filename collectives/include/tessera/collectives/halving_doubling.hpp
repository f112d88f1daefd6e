#pragma once
// Recursive halving / doubling (Rabenseifner; Thakur, Rabenseifner, Gropp 2005).
#include <vector>

#include "tessera/collectives/transfer_graph.hpp"

namespace tessera::collectives {

/// Reduce-scatter by recursive halving then all-gather by recursive doubling:
/// log2(q) exchange steps each way, rank pairs at distance q/2, q/4, ..., 1 and
/// back; each rank sends 2(q-1)/q * size. The buffer is split into q chunks.
/// A group of p ranks that is not a power of two is folded first (Rabenseifner):
/// with q the largest power of two below p and r = p - q, positions 2i
/// (i < r) send their whole buffer to 2i+1 before, and get the result back
/// after; those r ranks send size only, their partners 2(q-1)/q * size + size.
TransferGraph halving_doubling_all_reduce(const std::vector<int>& ranks, Bytes size);

/// Recursive-halving reduce-scatter; position i ends with chunk i. Each rank
/// sends (p-1)/p * size. Needs a power-of-two group (InputError otherwise).
TransferGraph halving_reduce_scatter(const std::vector<int>& ranks, Bytes size);

/// Recursive-doubling all-gather; position i starts with chunk i. Each rank
/// sends (p-1)/p * size. Needs a power-of-two group (InputError otherwise).
TransferGraph doubling_all_gather(const std::vector<int>& ranks, Bytes size);

}  // namespace tessera::collectives
