#pragma once
// The kernels a scenario's model runs on one rank, each timed as the planner
// times it: the table behind `tessera kernels` (docs/cli.md). It lists what
// one instance of each part of the model launches per micro-batch (the word
// and position embeddings, one transformer layer, one MoE layer, the LM head
// and loss), and the kernels an instance runs once per iteration
// (OpPass::WeightCast); the schedule, recomputation and the optimizer step
// are the planner's and are not repeated here.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/node_model/kernel.hpp"
#include "tessera/node_model/workload.hpp"
#include "tessera/study/scenario.hpp"
#include "tessera/units.hpp"

namespace tessera::study {

/// One distinct kernel (op, dimensions and dtype) of the model on one rank.
struct KernelTableRow {
  node_model::Kernel kernel;
  /// One execution, as the planner times it (KernelTimer): device time under
  /// the Megatron profiles, the isolated eager time (with its launch floor)
  /// under pytorch-eager.
  Time time;
  /// One execution as a further part of a kernel launched before it
  /// (node_model::Pass::part: FlashAttention's GEMMs, a weight-gradient
  /// GEMM's main-gradient accumulation): no launch floor.
  Time part_time;
};

/// The pass of an operator a kernel belongs to (node_model::OpKernels).
/// WeightCast: OpKernels::weight_cast (Transformer Engine's FP8 weight
/// casts under fp8 training), run once per iteration and model chunk, before
/// the forward of the chunk's first micro-batch: not one micro-batch's work.
enum class OpPass { Forward, InputGrad, WeightGrad, WeightCast };
/// "forward", "input_grad", "weight_grad", "weight_cast".
std::string_view to_string(OpPass p);

/// One execution of a kernel in one micro-batch of one instance of a part
/// (OpPass::WeightCast: in one iteration).
struct KernelUse {
  std::string part;  ///< "embedding", "layer", "moe_layer" or "lm_head"
  std::string op;    ///< the operator (parallelism::layer_ops names): "qkv", "softmax", ...
  OpPass pass = OpPass::Forward;
  std::size_t row = 0;  ///< index into KernelTable::rows
  /// A further part of the kernel launched before it (one launch): timed as
  /// the row's part_time.
  bool fused_part = false;
  /// What this execution does where the row's kernel class does not say
  /// (Transformer Engine's FP8 casts and transposes, timed as MulU memory
  /// passes). Of the use, not the row: a row of the same class and shape
  /// may be another pass elsewhere.
  node_model::KernelRole role = node_model::KernelRole::None;
};

struct KernelTable {
  /// Distinct kernels in order of first use (embedding, layer, moe_layer,
  /// lm_head; forward, input_grad, weight_grad within an op).
  std::vector<KernelTableRow> rows;
  /// Every execution in model order: parts as above, operators in forward
  /// order, each operator's weight casts (once per iteration, run before its
  /// first forward), forward, input-gradient, weight-gradient kernels.
  std::vector<KernelUse> uses;
  /// True: device times (Megatron's explicit host model); false: eager
  /// kernels timed alone from the host.
  bool device_time = false;

  /// One execution's time: its row's part_time for a further part of a
  /// launched kernel, else its time.
  [[nodiscard]] Time time_of(const KernelUse& u) const {
    return u.fused_part ? rows[u.row].part_time : rows[u.row].time;
  }
};

/// What one part's kernels add up to in one micro-batch, and how many
/// instances of the part the model has.
struct PartTotals {
  std::string part;
  /// Instances in the whole model (all pipeline stages): the dense or MoE
  /// layers for "layer" and "moe_layer", 1 for "embedding" and "lm_head".
  std::int64_t instances = 0;
  std::array<Time, 3> pass{};  ///< forward, input_grad, weight_grad (indexed by OpPass)
  Time gemm;                   ///< of which GEMMs (linear, bmm), the three passes
  std::size_t kernels = 0;     ///< kernel executions, the three passes (a fused kernel's parts: one)
  std::size_t gemm_kernels = 0;
  /// The OpPass::WeightCast kernels, once per iteration (in none of the
  /// per-micro-batch sums above).
  Time weight_cast;
  [[nodiscard]] Time total() const { return pass[0] + pass[1] + pass[2]; }
};

/// The table's uses summed per part, in model order, and the whole model
/// (every part times its instances) last, named "model": per micro-batch,
/// the weight casts (once per iteration) apart. No recomputation, schedule
/// or collectives: a sum of kernel times, not an iteration.
[[nodiscard]] std::vector<PartTotals> part_totals(const KernelTable& t, const Scenario& s);

/// The kernels of `s`'s model on one tensor-parallel rank (tp, sequence
/// parallelism and expert parallelism as the plan cuts them), timed by the
/// scenario's predictor (make_scenario_predictor: overrides apply). Parts a
/// model does not have (an MoE layer in a dense model) are left out.
[[nodiscard]] KernelTable kernel_table(const Scenario& s);

}  // namespace tessera::study
