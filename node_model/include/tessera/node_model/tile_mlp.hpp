#pragma once
// NeuSight-style tile/wave kernel latency predictor (see docs/node_model.md).
//
//   tiles       = number of output tiles (GEMM) or thread blocks (vector ops)
//   waves       = ceil(tiles / SMs)
//   tile bound  = max(tile FLOPs / (peak / SMs), tile bytes / (bandwidth / SMs))
//   utilization = alpha - beta / waves,  alpha = sigmoid(o0), beta = alpha * sigmoid(o1)
//   latency     = blend(floor, waves * tile bound / utilization)
// (blend: max, or per class a smooth maximum, launch_floor_blend)
// with (o0, o1) from a small MLP per kernel class. The MLP sees only
// per-tile and per-GPU quantities (never the problem size), so the size
// scaling is carried by the waves and extrapolates to shapes far larger than
// the training shapes. `floor` is the per-launch floor of the measurements
// (PyTorch dispatch + launch), learned per class. The tile shape is looked
// up in a table learned from the kernel names / grid sizes of the training
// data (nearest shape, on the nearest training GPU by spec).
//
// Tensor-core GEMMs (TF32/FP16/BF16/FP8) are timed by the tensor-core model
// (tensor_core.hpp, fit to measured H100 kernels). 16-bit vector ops (no
// 16-bit vector measurements exist to train on), and 16-bit GEMMs when no
// tensor-core model is loaded, are predicted through their FP32 twin, the
// same shape in FP32 on the same GPU:
//   latency16 = latency32_twin * R16 / R32
// where R is the wave-quantized roofline of each precision's tiles
// (wave_roofline_s): the FP32 twin's achieved fraction of its roofline is
// assumed to carry over to the 16-bit roofline (2-byte elements), see
// docs/node_model.md, Limitations. TF32 vector ops are FP32 ops.
#include <array>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tessera/node_model/dataset.hpp"
#include "tessera/node_model/kernel.hpp"
#include "tessera/node_model/mlp.hpp"

namespace tessera::node_model {

enum class KernelClass { Bmm, Linear, Elementwise, Softmax, LayerNorm };
inline constexpr int kNumKernelClasses = 5;
std::string_view to_string(KernelClass c);
/// nullptr-like: std::nullopt for kernels without a learned class (copies).
std::optional<KernelClass> kernel_class(KernelOp op);

/// Index of an elementwise op in the one-hot feature (0..10), -1 otherwise.
int elementwise_index(KernelOp op);
inline constexpr int kNumElementwiseOps = 11;

/// The tile a kernel runs with: GEMMs use an (a x b) output tile, a along N
/// and b along the rows (B*M for linear, M for bmm); vector ops process
/// `elements` elements per thread block (softmax / layer norm: whole rows,
/// a multiple of H).
struct Tile {
  int a = 128, b = 128;
  int split = 1;  ///< GEMMs: split-K factor (the reduction is cut into `split` tiles)
  double elements = 512.0;
};

/// Work decomposition of one kernel on one GPU.
struct TileGeometry {
  double tiles = 1, waves = 1;
  double tile_flops = 0, tile_bytes = 0;
  double tile_bound_s = 0;  ///< roofline time of one tile on one SM
  double total_bytes = 0;
  double fill = 1;          ///< tiles / (waves * SMs): how full the waves are
  double tile_waste = 1;    ///< useful / computed fraction of the edge tiles (GEMMs)
};
/// Useful fraction of the per-thread loop of PyTorch's block-per-row softmax
/// (1 for the warp-per-row softmax, 0 for other kernels): a feature of the
/// utilization MLP.
double softmax_thread_fill(const Kernel& k);
/// DRAM traffic of a kernel relative to bytes(): above 1 for wide softmax
/// rows whose multi-pass re-reads miss the cache, 1 otherwise.
double softmax_reread_factor(const Kernel& k, const GpuSpec& gpu, const Tile& tile);
TileGeometry tile_geometry(const Kernel& k, const GpuSpec& gpu, const Tile& tile);

/// Wave-quantized roofline of a kernel run as `g`'s tiles, in seconds:
/// max(waves * tile FLOPs / per-SM peak, kernel bytes / bandwidth), the peak
/// of the kernel's dtype (tensor cores for 16-bit GEMMs). The memory term is
/// the kernel's unique traffic (operand reuse between tiles served by L2):
/// a per-tile DRAM bound would make every tensor-core GEMM memory-bound
/// (a 128x128 BF16 tile does 64 FLOP/byte against a ridge of 295 on H100).
double wave_roofline_s(const Kernel& k, const GpuSpec& gpu, const TileGeometry& g);

/// Features of the utilization MLP (all classes use the same layout). They
/// describe FP32 kernels, the only ones trained on: 16-bit kernels are
/// predicted through their FP32 twin (TileMlpPredictor).
inline constexpr int kTileFeatures = 22 + kNumElementwiseOps;
Eigen::VectorXd tile_features(const Kernel& k, const GpuSpec& gpu, const Tile& tile, const TileGeometry& g);

/// The learned tile table.
class TileTable {
 public:
  struct GemmEntry {
    int gpu, cls, mb, nb, kb, a, b, count, split;
  };
  struct VectorEntry {
    int cls, op, hb, eb;
    double elements;
  };
  struct GpuKey {
    std::string name;
    double sms, peak, bw, l2;
  };

  /// Learns the table from measurements (GEMM tiles from kernel names,
  /// elements per block from grid sizes).
  static TileTable learn(const MeasurementSet& data);
  /// The tile for `k` on `gpu`.
  [[nodiscard]] Tile lookup(const Kernel& k, const GpuSpec& gpu) const;
  /// The same, with `gpu_index = nearest_gpu(gpu)` computed once by the caller.
  [[nodiscard]] Tile lookup(const Kernel& k, int gpu_index) const;
  /// The largest GEMM tile in the table (by area, then by count): the tile
  /// 16-bit (tensor-core) GEMMs run with (128x128 in the shipped table).
  [[nodiscard]] Tile largest_gemm_tile() const { return largest_gemm_; }
  /// Names of the GPUs the table was learned on (spaces as underscores).
  [[nodiscard]] std::vector<std::string> gpu_names() const;
  /// Index of the training GPU closest to `gpu` by spec (-1 if none).
  [[nodiscard]] int nearest_gpu(const GpuSpec& gpu) const;

  void write(std::ostream& out) const;
  static TileTable read(std::istream& in, const std::string& source);

 private:
  /// Groups the entries a lookup scans (GEMMs by GPU and class, vector ops by
  /// class and op), keeping their order, so results equal a full scan's.
  void index();

  std::vector<GpuKey> gpus_;
  std::vector<GemmEntry> gemm_;
  std::vector<VectorEntry> vector_;
  std::vector<std::vector<GemmEntry>> gemm_groups_;         ///< [gpu * kNumKernelClasses + class]
  std::vector<std::vector<VectorEntry>> vector_by_class_;   ///< [class]
  std::vector<std::vector<VectorEntry>> elementwise_by_op_;  ///< [elementwise_index(op)]
  Tile largest_gemm_;
};

/// Trained weights of the tile-mlp predictor.
struct TileMlpModel {
  TileTable tiles;
  std::array<Mlp, kNumKernelClasses> nets;
  /// Per-class latency floor in ms (median over the training GPUs of the
  /// fastest measurements): no launch of the class is predicted faster.
  std::array<double, kNumKernelClasses> floor_ms{};
  /// Per-class exponent of launch_floor_blend (0: a hard maximum).
  std::array<double, kNumKernelClasses> floor_blend{};

  [[nodiscard]] std::string serialize() const;
  /// Throws InputError naming `source` on a malformed or wrong-version file.
  static TileMlpModel parse(std::string_view text, const std::string& source);
  /// Utilization (0, 1] for a kernel of a learned class.
  /// (features from tile_features, waves from tile_geometry)
  [[nodiscard]] double utilization(KernelClass c, const Eigen::VectorXd& features, double waves) const;
};

struct TileMlpTrainOptions {
  TrainOptions mlp;
  int max_rows_per_class = 40000;
  std::vector<int> hidden = {64, 64, 64};
  /// Per class (bmm, linear, elementwise, softmax, ln), selected by
  /// leave-one-GPU-out within the A100-80GB and 4-GPU constraints (docs/node_model.md):
  /// decoupled (AdamW) weight decay of the utilization network (the `mlp`
  /// baseline, which shares the other options, keeps `mlp.weight_decay`)...
  std::array<double, kNumKernelClasses> weight_decay{1.0, 0.0, 1.0, 0.0, 0.0};
  /// ... and the exponent of the launch-floor blend (launch_floor_blend).
  std::array<double, kNumKernelClasses> floor_blend{2.0, 0.0, 2.0, 0.0, 0.0};
};

/// Trains every class on `data` (deterministic for a fixed seed). `log` may be null.
TileMlpModel train_tile_mlp(const MeasurementSet& data, const TileMlpTrainOptions& opt, std::ostream* log);

/// A measured latency from the launch floor and the kernel time: the p-norm
/// smooth maximum (floor^p + kernel^p)^(1/p), or max(floor, kernel) for
/// p = 0. Kernels near the floor overlap only partly with the host's
/// dispatch (measured on all five training GPUs: a kernel as long as the floor
/// measures 1.3-1.55 floors, sqrt(2) for p = 2).
double launch_floor_blend(double floor_ms, double kernel_ms, double p);

/// Memory-bound fallback for kernels without a learned class.
Time memory_bound_time(const Kernel& k, const GpuSpec& gpu);

/// A per-shape cache shared by the learned predictors (thread-safe).
class ShapeCache {
 public:
  [[nodiscard]] std::optional<Time> find(const Kernel& k) const;
  void put(const Kernel& k, Time t) const;

 private:
  struct Key {
    std::int64_t b, m, n, k, h;
    int op, dtype;
    bool operator==(const Key&) const = default;
  };
  struct Hash {
    std::size_t operator()(const Key& k) const;
  };
  static Key key(const Kernel& k);
  mutable std::mutex mu_;
  mutable std::unordered_map<Key, Time, Hash> map_;
};

struct TensorCoreModel;

/// The tile-mlp predictor. Tensor-core GEMMs (tf32, fp16, bf16, fp8 bmm and
/// linear) go to the tensor-core model when one is given (tensor_core.hpp,
/// fit to measured H100 kernels); without one (and for 16-bit vector ops)
/// 16-bit kernels are predicted through their FP32 twin (above).
class TileMlpPredictor final : public KernelPredictor {
 public:
  /// `untrained_from`: the model that times the classes `model` has no
  /// network for (a retrained folder's classes without training rows keep
  /// the embedded network, as a folder without a file keeps the embedded
  /// file); without it such a class is timed at its memory bound.
  TileMlpPredictor(GpuSpec gpu, std::shared_ptr<const TileMlpModel> model,
                   std::shared_ptr<const TensorCoreModel> tensor_core = nullptr,
                   std::shared_ptr<const TileMlpModel> untrained_from = nullptr);
  /// As timed alone from the host by PyTorch eager: launch_floor_blend(class
  /// launch floor, learned kernel time, the class's p); tensor-core GEMMs the
  /// same with the tensor-core model's GPU time; copies (no class) their
  /// memory time, at least the GPU's per-kernel floor.
  [[nodiscard]] Time predict(const Kernel& kernel) const override;
  /// Back to back on a stream: tensor-core GEMMs the tensor-core model's GPU
  /// time (with its GPU-side floor); other kernels the learned kernel time
  /// without the eager launch floor, bounded below by the tensor-core
  /// model's GPU floor (predict() without a tensor-core model).
  [[nodiscard]] Time predict_device(const Kernel& kernel) const override;
  /// A further part of a launched kernel: the tensor-core model's GPU time
  /// without its floor for tensor-core GEMMs, else learned_kernel_ms()
  /// (no floor).
  [[nodiscard]] Time predict_part(const Kernel& kernel) const override;
  [[nodiscard]] std::string_view name() const override { return "tile-mlp"; }
  [[nodiscard]] const GpuSpec& gpu() const override { return gpu_; }
  /// Uncached prediction in milliseconds (for validation and training reports).
  [[nodiscard]] double predict_ms_uncached(const Kernel& kernel) const;
  /// Uncached predict_device() in milliseconds.
  [[nodiscard]] double predict_device_ms_uncached(const Kernel& kernel) const;
  /// The learned kernel time in ms without any floor, by the FP32 model
  /// (16-bit kernels through the FP32 twin, whatever the tensor-core model);
  /// the memory-bound estimate for kernels without a class.
  [[nodiscard]] double learned_kernel_ms(const Kernel& kernel) const;

 private:
  /// The learned kernel time in ms of an FP32 kernel of a trained class,
  /// without the launch floor.
  [[nodiscard]] double fp32_kernel_ms(KernelClass c, const Kernel& fp32) const;

  GpuSpec gpu_;
  std::shared_ptr<const TileMlpModel> model_;
  std::shared_ptr<const TensorCoreModel> tensor_core_;
  Tile tensor_tile_;  ///< tile of 16-bit GEMMs (FP32-twin path)
  int gpu_index_;     ///< the training GPU whose tile table this GPU uses
  ShapeCache cache_;
  ShapeCache device_cache_;
  ShapeCache part_cache_;
  /// The classes `model_` has no network for (see the constructor).
  std::unique_ptr<TileMlpPredictor> untrained_;
};

}  // namespace tessera::node_model
