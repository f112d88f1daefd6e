#pragma once
// A collective expanded into point-to-point transfers: pure data.
#include <cstdint>
#include <functional>
#include <vector>

#include "tessera/units.hpp"

namespace tessera::collectives {

using TransferIndex = std::int32_t;

struct Transfer {
  int src = -1;  ///< global rank
  int dst = -1;  ///< global rank
  Bytes bytes;
  /// Transfers that must be delivered before this one may start.
  std::vector<TransferIndex> deps;
  std::int32_t step = 0;  ///< algorithm step (for traces and tests)
  /// The receiver combines the received bytes with its own buffer (a
  /// memory-bound reduction kernel on the receiving GPU) before anything that
  /// depends on this transfer may use them.
  bool reduce = false;
};

struct TransferGraph {
  std::vector<Transfer> transfers;

  /// Bytes sent by `rank` over the whole collective.
  [[nodiscard]] Bytes bytes_sent_by(int rank) const;
  /// Bytes delivered to `rank` over the whole collective.
  [[nodiscard]] Bytes bytes_received_by(int rank) const;
  /// Bytes `rank` receives and reduces into its own buffer.
  [[nodiscard]] Bytes bytes_reduced_by(int rank) const;
  /// Bytes of all transfers.
  [[nodiscard]] Bytes total_bytes() const;
  /// Number of dependency levels (the critical path length in transfers).
  [[nodiscard]] int depth() const;
};

/// Chunking / pipelining: splits `size` into `chunks` slices (at most one per
/// byte; the remainder spread over the first), builds `make(slice)` for each
/// and chains them: transfer j of slice c also waits for transfer j of slice
/// c-1 (the same connection sends its slices in order), so slice c can run
/// step s while slice c+1 runs step s-1. `make` must give the same transfer
/// structure for every non-zero slice size. chunks < 1 throws InputError.
TransferGraph pipeline(const std::function<TransferGraph(Bytes)>& make, Bytes size, int chunks);

}  // namespace tessera::collectives
