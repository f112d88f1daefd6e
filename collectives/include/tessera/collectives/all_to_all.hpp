#pragma once
#include <vector>

#include "tessera/collectives/transfer_graph.hpp"

namespace tessera::collectives {

/// Direct (pairwise) all-to-all of a `size`-byte send buffer: the buffer is
/// split into p blocks (block j for position j); in step s = 1..p-1, position i
/// sends its block for (i+s) mod p there, after its step s-1 send. Every rank
/// sends and receives one block per step; each sends (p-1)/p * size.
TransferGraph direct_all_to_all(const std::vector<int>& ranks, Bytes size);

}  // namespace tessera::collectives
