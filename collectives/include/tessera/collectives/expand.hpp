#pragma once
// The single entry point the engine uses: expand one collective into its
// point-to-point transfer graph with the chosen algorithm.
#include <string_view>
#include <vector>

#include "tessera/collectives/transfer_graph.hpp"
#include "tessera/parallelism/task_graph.hpp"

namespace tessera::collectives {

enum class Algorithm { Auto, Ring };
std::string_view to_string(Algorithm a);
Algorithm parse_algorithm(std::string_view text);  // throws InputError

/// Expands `kind` over `ranks` (group order) for a per-rank buffer of `size`.
/// Throws InputError for a combination that is not implemented.
TransferGraph expand(parallelism::CollectiveKind kind, const std::vector<int>& ranks, Bytes size,
                     Algorithm algorithm = Algorithm::Auto);

/// A single message from ranks[0] to ranks[1].
TransferGraph send_recv(const std::vector<int>& ranks, Bytes size);

}  // namespace tessera::collectives
