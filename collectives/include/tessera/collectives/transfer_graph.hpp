#pragma once
// A collective expanded into point-to-point transfers: pure data.
#include <cstdint>
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
};

struct TransferGraph {
  std::vector<Transfer> transfers;

  /// Bytes sent by `rank` over the whole collective.
  [[nodiscard]] Bytes bytes_sent_by(int rank) const;
  /// Number of dependency levels (the critical path length in transfers).
  [[nodiscard]] int depth() const;
};

}  // namespace tessera::collectives
