#pragma once
// Kernel descriptors: the unit of work the node model times.
#include <array>
#include <cstdint>
#include <string_view>

#include "tessera/node_model/gpu_spec.hpp"
#include "tessera/units.hpp"

namespace tessera::node_model {

/// Kernel classes, named as in NeuSight's measurements.
enum class KernelOp {
  Bmm,        ///< batched GEMM  B x (M x K) @ (K x N)
  Linear,     ///< GEMM with a weight matrix (B*M rows)
  Add, AddU, Mul, MulU, Div, DivU, Pow, PowU,  ///< elementwise; U = with a scalar
  Gelu, Relu, Tanh,
  Softmax,    ///< row softmax over B rows of H
  LayerNorm,  ///< row layer norm over B rows of H
  Copy,       ///< memory copy / transpose of B x H elements
};

std::string_view to_string(KernelOp op);
/// Parses NeuSight's OPName ("bmm", "linear", "add", "addu", ..., "ln", "softmax").
/// Throws InputError for an unknown name.
KernelOp parse_kernel_op(std::string_view name);
bool is_gemm(KernelOp op);

struct Kernel {
  KernelOp op = KernelOp::Copy;
  DType dtype = DType::FP32;
  // GEMMs: B x M x N x K.  Vector ops: B rows x H columns (stored in b, h).
  std::int64_t b = 1, m = 0, n = 0, k = 0, h = 0;

  static Kernel gemm(KernelOp op, std::int64_t b, std::int64_t m, std::int64_t n, std::int64_t k,
                     DType dtype);
  static Kernel vector(KernelOp op, std::int64_t rows, std::int64_t cols, DType dtype);

  /// Floating-point work (2BMNK for GEMMs).
  [[nodiscard]] Flops flops() const;
  /// Minimum DRAM traffic: every operand read once, the result written once.
  [[nodiscard]] Bytes bytes() const;
  /// Throws InputError when a needed dimension is not positive.
  void validate() const;
  /// The same kernel: op, dtype and every dimension (a key for maps).
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>
  auto operator<=>(const Kernel&) const = default;
};

/// The kernels of a softmax's backward, dx = y * (dy - sum(dy * y)): it reads
/// two tensors of the forward's shape (y and dy) where the forward reads one,
/// so it is timed as a row pass like the forward plus a binary elementwise
/// pass for the second operand stream. Shared by the HF operator graphs and
/// the parallelism planner.
std::array<Kernel, 2> softmax_backward(const Kernel& forward);

/// Predicts the latency of one kernel on one GPU. Implementations are
/// immutable after construction, so one instance may be shared by planners.
class KernelPredictor {
 public:
  virtual ~KernelPredictor() = default;
  /// The kernel's latency as timed alone from the host by PyTorch eager
  /// (NeuSight's measurement): small kernels bottom out at a per-launch floor
  /// of 25-65 us, mostly host dispatch. What the planner sums under the pytorch-eager profile.
  [[nodiscard]] virtual Time predict(const Kernel& kernel) const = 0;
  /// The kernel's GPU time when kernels are queued back to back on a stream
  /// (CUPTI kernel time): no host launch/dispatch floor, only the GPU-side
  /// per-kernel floor (~5 us on H100). The planner times kernels with this
  /// when it models the host explicitly (parallelism::HostOverhead, the
  /// megatron profile). Defaults to predict() for predictors without that
  /// distinction.
  [[nodiscard]] virtual Time predict_device(const Kernel& kernel) const { return predict(kernel); }
  /// The time of a further part of a kernel launched before it (Pass::part:
  /// a fused kernel timed as several traffic-equivalent kernels): the work
  /// alone, with no launch floor of either kind, since the launch it
  /// belongs to pays that once. Defaults to predict_device(): exact for
  /// predictors without a floor (roofline); the baselines that learn whole
  /// latencies (linreg's launch intercept, the direct MLP) keep theirs in
  /// a part too.
  [[nodiscard]] virtual Time predict_part(const Kernel& kernel) const { return predict_device(kernel); }
  /// The eager time of one kernel of a launch: predict_part() for a further
  /// part of it (Pass::part), else predict() (the HF and fx graphs' timing).
  [[nodiscard]] Time predict_eager(const Kernel& kernel, bool part) const {
    return part ? predict_part(kernel) : predict(kernel);
  }
  [[nodiscard]] virtual std::string_view name() const = 0;
  [[nodiscard]] virtual const GpuSpec& gpu() const = 0;
};

}  // namespace tessera::node_model
