#pragma once
#include <vector>

#include "tessera/collectives/transfer_graph.hpp"

namespace tessera::collectives {

/// Direct all-to-all of a `size`-byte send buffer: the buffer is split into
/// p blocks (block j for position j) and position i sends its block for
/// every other position j at once, as NCCL's grouped ncclSend/ncclRecv post
/// every peer together (a rank's NVLink and network sends overlap; its
/// links share their bandwidth among its blocks). Transfer (s, i), to
/// (i+s) mod p, is labelled step s - 1 for traces; none waits for another
/// (depth 1). Each rank sends and receives (p-1)/p * size.
TransferGraph direct_all_to_all(const std::vector<int>& ranks, Bytes size);

}  // namespace tessera::collectives
