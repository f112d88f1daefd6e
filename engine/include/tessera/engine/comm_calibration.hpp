#pragma once
// Communication as NCCL really performs it: a calibration the executor
// applies on any backend (flow or ns-3), on top of the transfer graphs the
// collectives library builds and the links the topology gives.
//
//  - Every collective pays a launch latency before its first transfer
//    (kernel launch and the members' handshake), by link class: NVLink when
//    all members sit in one node, network when it spans nodes.
//  - Every transfer pays its class's step latency before it is sent (NCCL's
//    per-step cost beyond the topology's path latency).
//  - Every transfer moves its payload at efficiency(n) of the rate the
//    backend gives it: the backend puts bytes / efficiency on the wire and
//    still reports payload bytes. efficiency(n) = peak - group_penalty / n
//    for a collective over n ranks (NCCL's bus bandwidth over line rate).
//  - Reductions run inside NCCL's copy kernel, pipelined with the data
//    (fused_reductions): ExecutionOptions::reduction_time is not charged;
//    their cost is part of the fitted efficiency.
//  - SM sharing: while a rank has a collective in flight (launch to
//    completion), its compute runs at rate 1 - sm_slowdown, the share of the
//    SMs NCCL's kernels leave to it.
//
// line_rate() (the default of ExecutionOptions) switches all of it off:
// efficiency 1, no latency, serial reductions, no slowdown; exact line-rate
// tests use it. nccl() holds the fitted defaults (docs/collectives.md,
// "Calibration") that scenarios use.
#include <span>
#include <vector>

#include "tessera/units.hpp"

namespace tessera::engine {

/// The calibration of one link class.
struct LinkCalibration {
  /// Achieved bus bandwidth over line rate for a collective over n ranks is
  /// peak_efficiency - group_penalty / n (at most 1).
  double peak_efficiency = 1.0;
  double group_penalty = 0.0;
  /// Once per collective, before its first transfer.
  Time launch_latency;
  /// Before every transfer of this class (per algorithm step).
  Time step_latency;
  /// Arrival skew of a collective's members (not of point-to-point sends):
  /// each collective over n ranks waits `skew` x expected_max_normal(n)
  /// more, the expected latest of n arrivals with this standard deviation.
  Time skew;

  /// Efficiency for a collective over `group_size` ranks, in (0, 1].
  [[nodiscard]] double efficiency(int group_size) const;
  bool operator==(const LinkCalibration&) const = default;
};

struct CommCalibration {
  LinkCalibration nvlink;   ///< transfers inside a node; collectives within one node
  LinkCalibration network;  ///< transfers between nodes; collectives spanning nodes
  /// Share of a rank's compute throughput lost while it has a collective in
  /// flight: compute progresses at rate 1 - sm_slowdown then. In [0, 1).
  double sm_slowdown = 0.0;
  /// Reductions are pipelined inside NCCL's kernel: do not charge
  /// ExecutionOptions::reduction_time.
  bool fused_reductions = false;

  /// Efficiency 1, no latencies, serial reductions, no SM sharing.
  static CommCalibration line_rate() { return {}; }
  /// The fitted defaults for NCCL on GPUs with `gpu_sms` SMs (sm_slowdown =
  /// nccl_sm_share(gpu_sms); 0 SMs: no slowdown).
  static CommCalibration nccl(int gpu_sms);
  [[nodiscard]] bool is_line_rate() const { return *this == CommCalibration{}; }
  /// Throws InputError naming the first bad field.
  void validate() const;
  bool operator==(const CommCalibration&) const = default;
};

/// The expected maximum of n independent standard normal samples (0 for
/// n <= 1; 0.5642 for 2, 1.0294 for 4, 1.4236 for 8, 3.24 for 1,000).
double expected_max_normal(int n);

/// NCCL's channels on an 8-GPU NVSwitch node: one CTA (thread block, one
/// SM) per channel. 24 is what NCCL reports on 8 x A100 SXM ("Channel
/// 23/24", NVIDIA/Megatron-LM issue #516).
inline constexpr int kNcclChannels = 24;
/// The share of a GPU's SMs NCCL's kernels occupy: channels / sms (0 when
/// sms is 0). A documented estimate, not a fit.
double nccl_sm_share(int sms, int channels = kNcclChannels);

// --- Fitting ------------------------------------------------------------------

/// One measured collective, reduced to what its time depends on when nothing
/// else shares its links (one collective on an NVSwitch node): time =
/// launch + steps x (path_latency + step_latency) + wire / (efficiency(n) x link).
struct CollectiveSample {
  int group_size = 2;
  int steps = 1;      ///< transfers on the critical path (TransferGraph::depth)
  Bytes wire;         ///< payload bytes the busiest rank sends
  Bandwidth link;     ///< that rank's line rate
  Time path_latency;  ///< topology latency of one transfer
  Time measured;
  double weight = 1.0;  ///< in the fit's weighted mean (>= 0)
};

/// Measured collectives below this size are reported but never fit (the
/// shipped fit and a user's nccl-tests fit alike): there NCCL's protocol
/// choice (LL, LL128) and the host's launch and synchronisation decide,
/// which one launch latency does not describe.
inline constexpr std::int64_t kCollectiveFitMinBytes = std::int64_t{1} << 20;

/// Fit weights of one series of measured sizes (one collective kind and
/// group measured over a range of sizes): each size of at least `min` the
/// log-size interval it stands for (half the log distance between its
/// neighbours in size), normalised to sum to 1; sizes below `min` weigh 0.
/// So a table in linear steps (1 MiB, 2 MiB, ...) does not let its largest
/// sizes dominate a fit. One size alone weighs 1.
[[nodiscard]] std::vector<double> log_size_weights(std::span<const Bytes> sizes, Bytes min);

/// The closed-form time of `s` under `c` (one collective on uncontended links).
[[nodiscard]] double uncontended_seconds(const LinkCalibration& c, const CollectiveSample& s);
/// Weighted mean absolute percentage error of `c` on `samples`.
[[nodiscard]] double weighted_mape(const LinkCalibration& c, std::span<const CollectiveSample> samples);

/// Fits peak_efficiency, group_penalty (unless fit_group_penalty is false:
/// then `fixed_group_penalty`, and the peak is fit under it) and launch_latency to minimise the weighted
/// MAPE; step_latency stays 0 (the topology's per-transfer latency is the step cost). For given efficiencies
/// the best latency is a weighted median; the efficiencies come from a grid search refined around the best
/// point. Deterministic. Throws InputError when there are no samples.
LinkCalibration fit_link_calibration(std::span<const CollectiveSample> samples, bool fit_group_penalty = true,
                                     double fixed_group_penalty = 0.0);

}  // namespace tessera::engine
