#include "tessera/collectives/transfer_graph.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "build_util.hpp"
#include "tessera/error.hpp"

namespace tessera::collectives {

Bytes TransferGraph::bytes_reduced_by(int rank) const {
  Bytes total;
  for (const auto& t : transfers) {
    if (t.dst == rank) total += t.reduced_bytes();
  }
  return total;
}

Bytes TransferGraph::bytes_sent_by(int rank) const {
  Bytes total;
  for (const auto& t : transfers) {
    if (t.src == rank) total += t.bytes;
  }
  return total;
}

Bytes TransferGraph::bytes_received_by(int rank) const {
  Bytes total;
  for (const auto& t : transfers) {
    if (t.dst == rank) total += t.bytes;
  }
  return total;
}

Bytes TransferGraph::total_bytes() const {
  Bytes total;
  for (const auto& t : transfers) total += t.bytes;
  return total;
}

int TransferGraph::depth() const {
  std::vector<int> level(transfers.size(), 0);
  int best = 0;
  for (std::size_t i = 0; i < transfers.size(); ++i) {
    for (TransferIndex d : transfers[i].deps) level[i] = std::max(level[i], level[static_cast<std::size_t>(d)]);
    level[i] += transfers[i].steps;
    best = std::max(best, level[i]);
  }
  return best;
}

TransferGraph pipeline(const std::function<TransferGraph(Bytes)>& make, Bytes size, int chunks) {
  if (chunks < 1) throw InputError(fmt::format("collective chunks must be at least 1 (got {})", chunks));
  const std::int64_t c = std::max<std::int64_t>(1, std::min<std::int64_t>(chunks, size.count()));
  if (c == 1) return make(size);
  TransferGraph g;
  std::size_t per_slice = 0;
  TransferIndex prev = -1;
  for (const Bytes slice : detail::split(size, c)) {
    TransferGraph part = make(slice);
    if (prev >= 0 && part.transfers.size() != per_slice) {
      throw SimulationError("pipeline: slices of one collective expanded to different transfer structures");
    }
    per_slice = part.transfers.size();
    const TransferIndex offset = detail::append(g, part);
    if (prev >= 0) {
      for (std::size_t j = 0; j < per_slice; ++j) {
        g.transfers[static_cast<std::size_t>(offset) + j].deps.push_back(prev +
                                                                         static_cast<TransferIndex>(j));
      }
    }
    prev = offset;
  }
  return g;
}

}  // namespace tessera::collectives
