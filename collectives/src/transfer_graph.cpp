#include "tessera/collectives/transfer_graph.hpp"

#include <algorithm>

namespace tessera::collectives {

Bytes TransferGraph::bytes_sent_by(int rank) const {
  Bytes total;
  for (const auto& t : transfers) {
    if (t.src == rank) total += t.bytes;
  }
  return total;
}

int TransferGraph::depth() const {
  std::vector<int> level(transfers.size(), 1);
  int best = 0;
  for (std::size_t i = 0; i < transfers.size(); ++i) {
    for (TransferIndex d : transfers[i].deps) {
      level[i] = std::max(level[i], level[static_cast<std::size_t>(d)] + 1);
    }
    best = std::max(best, level[i]);
  }
  return best;
}

}  // namespace tessera::collectives
