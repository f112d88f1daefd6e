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
  /// Flow granularity (Granularity::Flows): the consecutive algorithm steps
  /// this transfer stands for on its connection. Its bytes move as one flow
  /// (a pipelined ring keeps every ring link busy for the whole collective);
  /// each step's fixed costs (the calibration's step latency, the path
  /// latency) are paid in sequence, as the steps' dependency chain pays them:
  /// for a flow of a ring (`ring`), the chain of the ring's connections.
  /// 1 for a transfer of the step-by-step graph.
  std::int32_t steps = 1;
  /// Flow granularity: the ring this flow belongs to (one id per ring of the
  /// graph, from 0), or -1. A ring's steps wait for the step before on the
  /// previous connection, not on their own: the chain of `steps` steps goes
  /// round the ring, through each connection steps / p times, so each flow
  /// of a ring of p connections pays steps / p times the sum of the ring's
  /// per-step fixed costs, not steps times its own connection's. A ring
  /// all-reduce over p ranks on N nodes (rail rings: N network connections
  /// of p) pays 2(p-1)N/p network and 2(p-1)(p-N)/p NVLink step latencies,
  /// near NCCL's tuning model's 2N network steps.
  std::int32_t ring = -1;
  /// With steps > 1 and `reduce`: how many of the steps the receiver reduces
  /// (one reduction kernel per step, in sequence) and the bytes they reduce
  /// in total. Ignored for steps == 1 (a reducing step transfer reduces its
  /// bytes once): use reductions() and reduced_bytes().
  std::int32_t reduce_steps = 0;
  Bytes reduce_bytes{};

  [[nodiscard]] std::int32_t reductions() const {
    if (!reduce) return 0;
    return steps == 1 ? 1 : reduce_steps;
  }
  [[nodiscard]] Bytes reduced_bytes() const {
    if (!reduce) return Bytes{};
    return steps == 1 ? bytes : reduce_bytes;
  }
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
  /// The critical path length in algorithm steps: the most steps
  /// (Transfer::steps, 1 per step transfer) along a dependency chain. The
  /// same for both granularities of one collective.
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
