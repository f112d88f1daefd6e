#include "tessera/collectives/expand.hpp"

#include <fmt/format.h>

#include "tessera/collectives/ring.hpp"
#include "tessera/error.hpp"

namespace tessera::collectives {

std::string_view to_string(Algorithm a) {
  switch (a) {
    case Algorithm::Auto: return "auto";
    case Algorithm::Ring: return "ring";
  }
  return "?";
}

Algorithm parse_algorithm(std::string_view text) {
  if (text == "auto") return Algorithm::Auto;
  if (text == "ring") return Algorithm::Ring;
  throw InputError(fmt::format("unknown collective algorithm '{}' (expected auto or ring)", text));
}

TransferGraph send_recv(const std::vector<int>& ranks, Bytes size) {
  if (ranks.size() != 2 || ranks[0] == ranks[1]) {
    throw InputError(fmt::format("send-recv needs a group of two distinct ranks (got {})", ranks.size()));
  }
  if (size.count() < 0) throw InputError("send-recv: size must not be negative");
  TransferGraph g;
  g.transfers.push_back(Transfer{ranks[0], ranks[1], size, {}, 0});
  return g;
}

TransferGraph expand(parallelism::CollectiveKind kind, const std::vector<int>& ranks, Bytes size,
                     Algorithm algorithm) {
  using parallelism::CollectiveKind;
  if (kind == CollectiveKind::SendRecv) return send_recv(ranks, size);
  if (kind == CollectiveKind::AllReduce && (algorithm == Algorithm::Auto || algorithm == Algorithm::Ring)) {
    return ring_all_reduce(ranks, size);
  }
  throw InputError(fmt::format("collective {} with algorithm {} is not implemented", parallelism::to_string(kind),
                               to_string(algorithm)));
}

}  // namespace tessera::collectives
