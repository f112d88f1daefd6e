#pragma once
// Tensor-core GEMM latency model: TF32 / FP16 / BF16 / FP8 GEMMs, fit to
// measured H100 kernels (../shared/data/xla, see docs/node_model.md,
// "Tensor-core GEMMs"). NeuSight's structure, with the tile chosen as an
// autotuner does:
//
//   for every candidate CTA tile (a x b) and split-K factor s:
//     tiles       = batch * ceil(N / a) * ceil(rows / b) * s
//     waves       = ceil(tiles / SMs)
//     tile bound  = max(tile FLOPs / (peak_dtype / SMs), tile DRAM bytes / (bandwidth / SMs))
//                   (DRAM bytes with the L2 panel reuse of a wave, as tile_geometry)
//     utilization = alpha * (1 - s / waves) * ksteps / (ksteps + k0)
//                   (alpha <= the highest utilization measured in the tile's
//                   regime, compute- or DRAM-bound; alpha, s, k0 from a small
//                   MLP on dimensionless features)
//     time        = waves * tile bound / utilization
//   kernel time = min over the candidates            (the autotuner keeps the fastest)
//   latency     = max(floor, kernel time)           (floor: GPU-side, learned)
//
// The features are ratios that carry to GPUs never measured (waves, K depth
// in pipeline steps, tile intensity per element, working set / L2, split,
// element size): no raw GPU quantity, which would be a
// constant in single-GPU training data. Peak and bandwidth enter through the
// roofline only.
#include <array>
#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/node_model/dataset.hpp"
#include "tessera/node_model/kernel.hpp"
#include "tessera/node_model/mlp.hpp"

namespace tessera::node_model {

/// GEMMs the tensor-core model times: bmm/linear in tf32, fp16, bf16 or fp8.
bool is_tensor_core_gemm(const Kernel& k);

/// A candidate: CTA tile `a` (along N, the output width) x `b` (along the
/// rows: M per batch for bmm, B*M for linear), the reduction cut into
/// `split` slices (split-K).
struct TcTile {
  int a = 128, b = 128, split = 1;
  bool operator==(const TcTile&) const = default;
};

/// The CTA tiles the model chooses among (before split-K): 128x256, 256x128,
/// 128x128, 128x64, 64x128, 64x64 (docs/node_model.md says why).
std::span<const TcTile> tensor_core_tiles();
/// Split-K factors tried: 1, 2, 4, 8, 16.
std::span<const int> tensor_core_splits();

/// Work decomposition of a GEMM run as one candidate.
struct TcGeometry {
  double tiles = 1, waves = 1, fill = 1;
  double depth = 0;   ///< reduction elements per tile (ceil(K / split))
  double ksteps = 0;  ///< depth in 128-byte pipeline steps (64 bf16, 32 tf32, 128 fp8 elements)
  double tile_flops = 0;
  double dram_bytes = 0;  ///< one tile's DRAM traffic with the wave's panel reuse
  double tile_bound_s = 0;
  bool compute_bound = true;  ///< the tile's FLOP time is at least its DRAM time
  /// The candidate's wave-quantized roofline: waves x tile bound, seconds.
  [[nodiscard]] double roofline_s() const { return waves * tile_bound_s; }
};

TcGeometry tensor_core_geometry(const Kernel& k, const GpuSpec& gpu, const TcTile& tile);

/// A candidate tile with its geometry.
struct TcCandidate {
  TcTile tile;
  TcGeometry g;
};
/// The valid candidate with the least wave-quantized roofline: the one a
/// kernel's measured utilization is taken against (the caps), and the choice
/// of TcSelect::MinRoofline.
TcCandidate tensor_core_roofline_candidate(const Kernel& k, const GpuSpec& gpu);

/// Whether the candidate is one a library would run: split-K only when the
/// output alone does not fill one wave and every slice keeps >= 4 pipeline
/// steps; tiles no larger than twice the output in either dimension.
bool tensor_core_candidate_valid(const Kernel& k, const GpuSpec& gpu, const TcTile& tile);

/// Features of the utilization MLP (see tensor_core_features).
inline constexpr int kTcFeatures = 6;
/// log waves, log K steps, log(tile FLOPs per element of its DRAM traffic
/// with the wave's panel reuse), log(kernel bytes / L2), log2(split),
/// log2(element bytes). (Selected by cross-validation; the last-wave fill,
/// the tile area and the tile aspect did not help.)
Eigen::VectorXd tensor_core_features(const Kernel& k, const GpuSpec& gpu, const TcTile& tile,
                                     const TcGeometry& g);
std::string_view tensor_core_feature_name(int i);

/// How the tile is chosen.
enum class TcSelect {
  MinTime,      ///< the candidate with the least predicted time (the default)
  MinRoofline,  ///< the candidate with the least wave-quantized roofline, then its learned time
};

/// Trained weights of the tensor-core model.
struct TensorCoreModel {
  Mlp net;
  double floor_ms = 0.0;  ///< GPU-side per-kernel floor
  TcSelect select = TcSelect::MinTime;
  /// Highest utilization (fraction of the roofline) measured in training by
  /// kernels whose fastest candidate is compute-bound, and by DRAM-bound ones.
  double util_cap = 1.0;
  double util_cap_memory = 1.0;
  [[nodiscard]] double cap_for(const TcGeometry& g) const {
    return g.compute_bound ? util_cap : util_cap_memory;
  }
  /// Smallest GEMM dimension measured in training: a GEMM with a smaller
  /// dimension is predicted no slower than its zero-padded twin of this size.
  std::int64_t min_dim = 0;

  struct Choice {
    TcTile tile;
    TcGeometry geometry;
    double utilization = 1;
    double kernel_ms = 0;  ///< waves * tile bound / utilization (no floor)
  };
  /// The chosen candidate of a tensor-core GEMM (throws InputError for other
  /// kernels and for dtypes the GPU has no tensor cores for).
  [[nodiscard]] Choice choose(const Kernel& k, const GpuSpec& gpu) const;
  /// The fastest candidate of `k` itself (no padding, no checks).
  [[nodiscard]] Choice choose_unpadded(const Kernel& k, const GpuSpec& gpu) const;
  /// Kernel time in ms (no floor) of `k` run as `tile`.
  [[nodiscard]] double candidate_ms(const Kernel& k, const GpuSpec& gpu, const TcTile& tile) const;
  /// GPU kernel time in ms: max(floor, chosen kernel time).
  [[nodiscard]] double predict_ms(const Kernel& k, const GpuSpec& gpu) const;

  [[nodiscard]] std::string serialize() const;
  /// Throws InputError naming `source` on a malformed or wrong-version file.
  static TensorCoreModel parse(std::string_view text, const std::string& source);
};

struct TensorCoreTrainOptions {
  TrainOptions mlp{
      .epochs = 1000, .batch = 32, .lr = 1e-2, .lr_final = 3e-5, .weight_decay = 0.0, .seed = 20250601};
  std::vector<int> hidden = {16};
  TcSelect select = TcSelect::MinTime;
  /// Features left out (set to 0, so the MLP ignores them), for model selection.
  std::vector<int> drop_features;
  double floor_percentile = 1.0;  ///< of the training latencies
};

/// Rows of `data` the model trains on: GEMMs in tf32, fp16 or bf16 (FP8 rows
/// are evaluated, never trained on: see docs/node_model.md).
bool tensor_core_trainable(const Measurement& m);

/// The largest GPU-side floor training accepts (ms): a kernel launch with
/// its prologue and epilogue takes microseconds on any GPU (XLA's H100 table:
/// 0.0057 ms); a table whose low percentile is over this has no small GEMMs
/// or is not in milliseconds.
inline constexpr double kMaxTensorCoreFloorMs = 0.1;

/// Trains on the rows of `data` listed in `rows` (all trainable rows when
/// empty). Deterministic for fixed options. `log` may be null. Throws
/// InputError when the floor is over kMaxTensorCoreFloorMs.
TensorCoreModel train_tensor_core(const MeasurementSet& data, const TensorCoreTrainOptions& opt,
                                  std::ostream* log, std::vector<int> rows = {});

/// Fold (0..folds-1) of every row: rows of the same GEMM shape (b, m, n, k,
/// op) share a fold whatever their dtype; shapes are ordered by a fixed hash
/// and dealt round-robin, so folds are balanced and reproducible.
std::vector<int> shape_folds(const MeasurementSet& data, int folds);

/// k-fold cross-validation: for each fold, trains on the trainable rows of
/// the other folds and predicts every row of the fold. Returns the held-out
/// prediction (ms, with the floor) of every row.
std::vector<double> tensor_core_kfold(const MeasurementSet& data, int folds,
                                      const TensorCoreTrainOptions& opt, std::ostream* log);

}  // namespace tessera::node_model
