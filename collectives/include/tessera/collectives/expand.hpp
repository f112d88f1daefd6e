#pragma once
// The single entry point the engine uses: expand one collective into its
// point-to-point transfer graph with the chosen algorithm.
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/collectives/transfer_graph.hpp"
#include "tessera/error.hpp"
#include "tessera/parallelism/task_graph.hpp"

namespace tessera::collectives {

/// Tree: double binary tree for all-reduce, binomial tree for broadcast and
/// reduce. Ring: ring for all-reduce / reduce-scatter / all-gather, a
/// pipelined chain for broadcast and reduce. HalvingDoubling: recursive
/// halving-doubling. Direct: pairwise all-to-all (and send-recv).
/// Hierarchical (needs ExpandOptions::ranks_per_node): all-reduce as
/// intra-node reduce-scatter, inter-node ring per rail, intra-node
/// all-gather; all-to-all as a pairwise exchange inside the node, then one
/// across nodes per rail (hierarchical.hpp).
enum class Algorithm { Auto, Ring, Tree, HalvingDoubling, Direct, Hierarchical };
std::string_view to_string(Algorithm a);
/// "auto", "ring", "tree", "halving-doubling", "direct", "hierarchical".
Algorithm parse_algorithm(std::string_view text);  // throws InputError
/// The algorithms expand() has for `kind` besides Auto, in the order error
/// messages list them.
std::vector<Algorithm> algorithms_for(parallelism::CollectiveKind kind);
/// expand() asked for an algorithm its collective's kind does not have
/// (ExpandOptions::algorithm `hierarchical` reaching a reduce-scatter): an
/// InputError naming the kind and the algorithms it has, which a caller
/// that knows where the choice came from can name too.
class AlgorithmError : public InputError {
 public:
  AlgorithmError(parallelism::CollectiveKind kind, Algorithm algorithm, const std::string& message)
      : InputError(message), kind_(kind), algorithm_(algorithm) {}
  [[nodiscard]] parallelism::CollectiveKind kind() const { return kind_; }
  [[nodiscard]] Algorithm algorithm() const { return algorithm_; }

 private:
  parallelism::CollectiveKind kind_;
  Algorithm algorithm_;
};

/// Collective kinds (parallelism::CollectiveKind, AllReduce .. SendRecv).
inline constexpr std::size_t kNumCollectiveKinds = 7;

/// How finely a collective is expanded. Steps: every algorithm step of every
/// rank is a transfer, with its dependencies (2(p-1) x p transfers for a ring
/// all-reduce). Flows: the ring family (ring all-reduce, reduce-scatter,
/// all-gather, and the rings of the hierarchical all-reduce) becomes one
/// flow per ring connection carrying all the bytes that connection sends,
/// with Transfer::steps counting the steps it stands for (p flows for a ring
/// all-reduce, each 2(p-1)/p of the buffer, 2(p-1) steps). Tree,
/// halving-doubling, chain, direct all-to-all and send-recv expand the same
/// in both: their connections are not busy for the whole collective, so a
/// flow would drop their per-step serialisation. docs/collectives.md,
/// "Granularity", says where the two differ.
enum class Granularity { Steps, Flows };
std::string_view to_string(Granularity g);
/// "steps", "flows".
Granularity parse_granularity(std::string_view text);  // throws InputError

struct ExpandOptions {
  /// The algorithm of every collective kind (Auto: resolve_algorithm's rule)...
  Algorithm algorithm = Algorithm::Auto;
  /// ...unless its kind has its own here (index =
  /// static_cast<std::size_t>(CollectiveKind); Auto = `algorithm`), as
  /// NCCL_ALGO chooses per collective (e.g. hierarchical all-to-all with ring
  /// reduce-scatter and all-gather).
  std::array<Algorithm, kNumCollectiveKinds> per_kind{};
  /// per_kind's entry for `kind` when set, else `algorithm`.
  [[nodiscard]] Algorithm chosen(parallelism::CollectiveKind kind) const {
    const Algorithm a = per_kind[static_cast<std::size_t>(kind)];
    return a != Algorithm::Auto ? a : algorithm;
  }
  /// Granularity::Steps for the pure algorithms; the engine and scenarios
  /// default to Flows (cli: collectives.granularity).
  Granularity granularity = Granularity::Steps;
  /// Pipeline slices per collective (see pipeline()); 1 = no chunking. With
  /// Granularity::Flows the ring family ignores it: its flows already carry
  /// each connection's bytes as one pipelined stream.
  int chunks = 1;
  /// Ranks per node (global rank r is on node r / ranks_per_node); 0 = not
  /// known, the group is treated as flat.
  int ranks_per_node = 0;
  /// The node's GPUs are a full NVLink mesh (a link per pair, no switch): a
  /// ring inside one node runs as mesh_rings, several rings over different
  /// links, as NCCL's channels spread over them (one ring used one link of
  /// each GPU's p - 1); so do the hierarchical all-reduce's phases inside a
  /// node, and a ring across nodes takes mesh_paths inside each node of an
  /// even count (rail_rings). Needs ranks_per_node.
  bool mesh_node = false;
  /// Nominal per-step latency and per-rank bandwidth Auto's cost model uses
  /// (an inter-node hop of a 400 Gb/s HCA with NCCL's software overhead).
  Time auto_latency = Time::from_us(5);
  Bandwidth auto_bandwidth = Bandwidth::gbps(400);
};

/// What Auto resolves to for this collective (identity for other choices).
/// The rule (NCCL-like, by message size and group shape):
///  - send-recv, all-to-all: Direct (all-to-all: Hierarchical only when asked);
///  - reduce-scatter, all-gather: Ring (as NCCL);
///  - all-reduce: Tree when its estimate 2*ceil(log2 p)*(a + S/B) beats the
///    ring's 2(p-1)*(a + S/(p*L*B)), whatever the chunks (they pipeline the
///    algorithm chosen); otherwise Ring (across whole nodes build() lays
///    it as L rail rings at once, L the ranks on each node, NCCL's choice;
///    within a node L = 1; Hierarchical only when asked). Groups of 1 or 2
///    ranks: Ring.
///  - broadcast, reduce: Tree (binomial, ceil(log2 p)*(a + S/B)) unless the
///    pipelined chain ((p-1 + C-1)*(a + S/(C*B))) is faster.
/// a = auto_latency, B = auto_bandwidth, S = size, C = chunks.
/// Recursive halving-doubling is never chosen automatically (as in NCCL).
Algorithm resolve_algorithm(parallelism::CollectiveKind kind, const std::vector<int>& ranks, Bytes size,
                            const ExpandOptions& options);

/// Expands `kind` over `ranks` (group order) for a per-rank buffer of `size`
/// (see CollectiveKind for what the size means per kind). Throws InputError
/// for bad groups and for a kind/algorithm pair that does not exist, naming
/// the algorithms that do.
TransferGraph expand(parallelism::CollectiveKind kind, const std::vector<int>& ranks, Bytes size,
                     const ExpandOptions& options);
TransferGraph expand(parallelism::CollectiveKind kind, const std::vector<int>& ranks, Bytes size,
                     Algorithm algorithm = Algorithm::Auto);

/// The bytes nccl-tests divides by a collective's time to report its bus
/// bandwidth, for a group of `group_size` ranks and a per-rank buffer of
/// `size` (CollectiveKind): 2(n-1)/n of it for all-reduce, (n-1)/n for
/// reduce-scatter, all-gather and all-to-all, all of it for broadcast, reduce
/// and send-recv.
double bus_bytes(parallelism::CollectiveKind kind, int group_size, Bytes size);

/// A single message from ranks[0] to ranks[1].
TransferGraph send_recv(const std::vector<int>& ranks, Bytes size);

}  // namespace tessera::collectives
