#pragma once
// The general training planner: data x tensor x pipeline parallelism with
// GPipe, 1F1B, interleaved 1F1B and zero-bubble (ZB-H1, ZB-H2) schedules, Megatron-style tensor
// parallelism (optionally with sequence parallelism), activation
// recomputation and ZeRO. Pure functions: no event loop, no network.
#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/node_model/kernel.hpp"
#include "tessera/parallelism/task_graph.hpp"
#include "tessera/parallelism/transformer.hpp"

namespace tessera::parallelism {

/// ZeroBubbleH1 / ZeroBubbleH2: the handcrafted schedules of Qi et al.,
/// "Zero Bubble Pipeline Parallelism", ICLR'24 (backward split into B and W).
enum class Schedule { GPipe, OneFOneB, Interleaved1F1B, ZeroBubbleH1, ZeroBubbleH2 };
/// "gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "zb-h2".
std::string_view to_string(Schedule s);
/// Parses the names above, case ignored; throws InputError listing them.
Schedule parse_schedule(std::string_view text);

/// none: keep every activation; selective: recompute the attention core
/// (scores, softmax, context) in backward (Korthikanti et al. 2022); full:
/// keep only each layer's input and rerun the whole forward in backward.
enum class Recompute { None, Selective, Full };
std::string_view to_string(Recompute r);
Recompute parse_recompute(std::string_view text);

/// When data-parallel gradients are reduced. Overlapped: PyTorch DDP's
/// buckets, each reduced as soon as the last micro-batch's backward has
/// filled it (under the Megatron profile Megatron on PyTorch DDP, gradients
/// in .grad); AfterBackward: one reduction of the whole gradient buffer
/// after the backward (Megatron-LM's DDP without --overlap-grad-reduce);
/// OverlapGradReduce: Megatron-Core's --overlap-grad-reduce, the FP32
/// main-gradient buffer (accumulated every micro-batch as AfterBackward)
/// reduced in buckets as the last micro-batch's backward fills them
/// (Megatron profile only); Auto: AfterBackward under the Megatron profile,
/// Overlapped under eager.
enum class GradSync { Auto, Overlapped, AfterBackward, OverlapGradReduce };
std::string_view to_string(GradSync g);
/// "auto", "overlapped", "after-backward", "overlap-grad-reduce".
GradSync parse_grad_sync(std::string_view text);

/// A dimension of the rank grid (expert parallelism is carved out of dp).
enum class ParallelDim { TP, DP, PP };
/// "tp", "dp", "pp".
std::string_view to_string(ParallelDim d);

/// How global ranks are laid out over the (tp, dp, pp) grid: the dimensions
/// from innermost (consecutive ranks) to outermost. The default is
/// Megatron's: tp innermost, then dp, then pp, so that a tensor-parallel
/// group is a block of consecutive ranks (one node when tp divides the GPUs
/// per node). Every group the planner builds (TP, DP, EP, pipeline pairs)
/// is derived from it through rank_coord / rank_of.
struct RankLayout {
  std::array<ParallelDim, 3> order{ParallelDim::TP, ParallelDim::DP, ParallelDim::PP};
  [[nodiscard]] bool is_default() const { return *this == RankLayout{}; }
  bool operator==(const RankLayout&) const = default;
};
/// "tp-dp-pp" (innermost first).
std::string to_string(const RankLayout& l);
/// Parses "tp-dp-pp", "tp-pp-dp", "dp-tp-pp", ... (each of tp, dp, pp once,
/// innermost first); throws InputError naming parallelism.layout's
/// accepted values.
RankLayout parse_rank_layout(std::string_view text);

struct ParallelPlan {
  int dp = 1;
  int tp = 1;
  int pp = 1;
  /// Expert parallelism (mixture-of-experts models): each MoE layer's experts
  /// are split over `ep` ranks, carved out of the data-parallel ranks as
  /// Megatron does (an expert-parallel group is `ep` consecutive dp indices
  /// with the same tp and pp index; ep divides dp). Tokens reach their
  /// experts and come back by all-to-all in that group; the experts'
  /// gradients are reduced over the dp / ep ranks holding the same experts,
  /// the rest of the model's over all dp ranks. Does not add ranks.
  int ep = 1;
  /// Model chunks per pipeline rank (interleaved 1F1B); 1 otherwise.
  int virtual_stages = 1;
  /// Layers of the first and of the last pipeline stage (Megatron-Core's
  /// --decoder-first-pipeline-num-layers and
  /// --decoder-last-pipeline-num-layers); the other stages split the rest
  /// evenly. Unset: every stage alike (stage_layer_split). Under
  /// interleaving each is split evenly over the stage's virtual_stages chunks.
  std::optional<std::int64_t> first_stage_layers;
  std::optional<std::int64_t> last_stage_layers;
  /// Megatron-Core's --account-for-embedding-in-pipeline-split and
  /// --account-for-loss-in-pipeline-split: the embedding and the loss each
  /// counted as a layer, the layers with them split evenly over pp x
  /// virtual_stages chunks, the first chunk (the first stage's first) and the
  /// last (the last stage's last) one transformer layer fewer
  /// (chunk_layers). Not with first_stage_layers or last_stage_layers.
  bool account_for_embedding = false;
  bool account_for_loss = false;
  /// Sequences per iteration over all replicas; 0 = dp x micro_batch (one
  /// micro-batch per replica).
  std::int64_t global_batch = 0;
  Schedule schedule = Schedule::OneFOneB;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::None;
  /// 0: plain data parallelism (gradient all-reduce); 1: optimizer states
  /// sharded (Megatron's distributed optimizer: gradient reduce-scatter, then
  /// parameter all-gather after the step); 2: + gradients sharded (same
  /// traffic); 3: + parameters sharded (all-gathered before each chunk's
  /// forward and backward).
  int zero_stage = 0;
  /// Gradient bucket: a bucket is reduced as soon as the last micro-batch's
  /// backward has filled it; unset: the framework's default
  /// (resolved_bucket_size).
  std::optional<Bytes> bucket_size;
  /// false: PyTorch's eager Adam (optimizer_ops); true: one fused kernel
  /// (fused_optimizer_ops, apex FusedAdam as Megatron-LM uses).
  bool fused_optimizer = false;
  /// Clip gradients by their global norm before the step (fused optimizer).
  bool grad_clipping = false;
  GradSync grad_sync = GradSync::Auto;
  /// Megatron-Core's --overlap-param-gather (zero_stage 1 with grad_sync
  /// OverlapGradReduce): the parameters the step updated are all-gathered
  /// bucket by bucket during the next forward, each layer's first forward
  /// waiting for its bucket, instead of all after the step.
  bool overlap_param_gather = false;
  /// Tensor-parallel backward: the all-reduce (reduce-scatter with SP) of a
  /// column-parallel linear's input gradient runs while its weight gradient
  /// is computed (Megatron's async tensor-model-parallel all-reduce); false:
  /// it blocks the compute stream.
  bool tp_comm_overlap = true;
  /// false: each tensor-parallel rank runs its share of the model without
  /// any tensor-parallel collective, as one rank measured alone (`tessera
  /// validate steps` with a `tp` column); not a scenario key.
  bool tp_collectives = true;
  /// Megatron's scatter-gather of pipeline tensors with tp > 1 and no SP
  /// (on unless --no-scatter-gather-tensors-in-pipeline): send 1/tp of each
  /// activation per rank, all-gather it in the receiving TP group.
  bool pipeline_scatter_gather = true;
  /// Which dimension is innermost in the global rank order (rank_coord).
  RankLayout layout;

  /// The grad-sync mode `Auto` stands for under `work`'s framework.
  [[nodiscard]] GradSync resolved_grad_sync(const Workload& work) const;
  /// The gradient bucket: bucket_size when set; under OverlapGradReduce
  /// Megatron-Core's default of max(40 M, 1 M x dp) parameters at the
  /// gradients' dtype; else PyTorch DDP's 25 MB.
  [[nodiscard]] Bytes resolved_bucket_size(const Workload& work) const;
  /// Megatron with overlapped gradient sync is Megatron on PyTorch DDP
  /// (--DDP-impl torch): gradients in .grad, no main-gradient buffer.
  [[nodiscard]] bool torch_ddp(const Workload& work) const;

  [[nodiscard]] int world_size() const { return dp * tp * pp; }
  /// Micro-batches per pipeline (per replica) and iteration.
  [[nodiscard]] std::int64_t micro_batches(std::int64_t micro_batch) const;
  /// Sequences per iteration over all replicas: global_batch, else
  /// dp x micro_batch (one micro-batch per replica).
  [[nodiscard]] std::int64_t sequences(std::int64_t micro_batch) const;
  /// Throws InputError, one line naming the keys and the numbers, for an
  /// impossible plan: dp x tp x pp != gpus (skipped when gpus <= 0), tp not
  /// dividing heads or hidden, more pipeline stages than layers, micro-batches
  /// not dividing the global batch, interleaving without interleaved-1f1b,
  /// ep not dividing the experts or dp...
  void validate(const TransformerConfig& model, const Workload& work, int gpus = 0) const;
};

/// The model chunks per pipeline rank interleaved-1f1b gets when none are
/// given (`virtual_stages: auto`, compare-schedules' default): the fewest
/// from 2 up that split `layers` evenly over pp x v chunks, as Megatron-LM
/// requires unless told how to split unevenly; 2 when none does (forecast,
/// with the scenario's warning for an uneven split).
int auto_virtual_stages(std::int64_t layers, int pp);
/// As above for a plan whose first or last stage holds its own number of
/// layers (ParallelPlan::first_stage_layers): the fewest from 2 up that
/// divide every stage's layers; with account_for_embedding / account_for_loss
/// the fewest that divide the stages' counts with them; 2 when none does (the
/// plan's validate then says why).
int auto_virtual_stages(std::int64_t layers, const ParallelPlan& plan);

/// Where a global rank sits, under `plan.layout`. The default is Megatron's
/// order: tp innermost, then dp, then pp, so that a tensor-parallel group is a
/// block of consecutive ranks (one node): rank = (pp x dp + dp) x tp + tp.
/// An expert-parallel group is the ranks of dp indices
/// [dp / ep x ep, dp / ep x ep + ep) with the rank's tp and pp index (ranks
/// tp apart: with tp x ep <= GPUs per node, one node).
struct RankCoord {
  int tp = 0;
  int dp = 0;
  int pp = 0;
};
RankCoord rank_coord(const ParallelPlan& plan, int rank);
int rank_of(const ParallelPlan& plan, const RankCoord& c);
/// True when some tensor-parallel group of `plan` holds ranks of two nodes of
/// `gpus_per_node` GPUs each (ranks [n x gpus_per_node, (n + 1) x
/// gpus_per_node) are node n): legal, but its all-reduces cross the network.
bool tp_group_spans_nodes(const ParallelPlan& plan, int gpus_per_node);
/// The narrowest tensor parallelism whose forecasts carry a known bias
/// (known_bias_note).
inline constexpr int kKnownBiasMinTp = 4;
/// A known bias of forecasts of `plan`, found by validating the model on
/// measured runs, or empty when none is known: with kKnownBiasMinTp-way or
/// wider tensor parallelism the cost of a layer comes out too low on
/// vTrain's single-node A100 runs (docs/calibration.md, "The marginal cost
/// of a layer"), so such forecasts are optimistic. `tessera run` prints it.
std::string known_bias_note(const ParallelPlan& plan);
/// `work` as `plan` runs it, what the planner and `tessera kernels` time
/// alike: under Megatron on PyTorch DDP (ParallelPlan::torch_ddp) there is
/// no main-gradient buffer (profile.main_grad off: no per-micro-batch
/// `main_grad +=` and no zeroing of it).
[[nodiscard]] Workload workload_under(const Workload& work, const ParallelPlan& plan);

/// Why Megatron-LM would refuse `plan`'s grad_sync overlapped (PyTorch DDP,
/// --DDP-impl torch) under framework megatron, or empty: its arguments.py
/// asserts DDP_impl == 'local' with bf16 (gradients accumulated and
/// all-reduced in FP32), with the distributed optimizer (zero_stage 1) and
/// with pipeline parallelism; Megatron-Core has no --DDP-impl at all. The
/// model runs such a plan (a warning); search does not recommend it. The
/// text starts with the value ("overlapped under ..."): callers name the key.
std::string torch_ddp_refusal(const ParallelPlan& plan, const Workload& work);

/// What a pipeline step computes. F: the forward. B: the backward's input
/// gradients (what the previous stage waits for); under a schedule that does
/// not split the backward (splits_backward() false: gpipe, 1f1b,
/// interleaved-1f1b) B also computes the weight gradients, as one step. W:
/// the weight gradients of a micro-batch whose B has run (zero-bubble
/// schedules only).
enum class StepKind { F, B, W };
/// "F", "B", "W".
std::string_view to_string(StepKind k);

/// True when the schedule runs weight gradients as separate W steps.
bool splits_backward(Schedule s);

/// One step of a pipeline rank's schedule.
struct PipelineStep {
  StepKind kind = StepKind::F;
  int chunk = 0;        ///< model chunk on this rank (0..virtual_stages-1)
  int micro_batch = 0;
  [[nodiscard]] bool forward() const { return kind == StepKind::F; }
  bool operator==(const PipelineStep&) const = default;
};
/// The order in which pipeline rank `stage` runs forward and backward passes
/// of its chunks over `m` micro-batches (docs/parallelism.md, "Schedules").
/// Throws InputError for a schedule that cannot run the combination (e.g.
/// interleaving with m % pp != 0, a zero-bubble schedule with virtual stages).
std::vector<PipelineStep> pipeline_order(Schedule s, int pp, int stage, std::int64_t m, int virtual_stages);

/// Layers of each model chunk, in pipeline order (chunk k runs on pipeline
/// rank k % pp as that rank's chunk k / pp): an even split, the first chunks
/// taking one more layer when it does not divide.
std::vector<std::int64_t> chunk_layers(std::int64_t layers, int pp, int virtual_stages);
/// Layers of each pipeline stage under `plan`: its first_stage_layers and
/// last_stage_layers where given, the other stages splitting the rest evenly
/// (as Megatron-Core requires); without them the stages' sums of
/// chunk_layers(layers, plan) (the even split above, or the one
/// account_for_embedding / account_for_loss make). Throws InputError, naming the key, for a split
/// Megatron-Core refuses: pp 1, a count below 1, a rest the other stages
/// cannot share evenly (or that leaves one without a layer), a stage's
/// layers not a multiple of virtual_stages.
std::vector<std::int64_t> stage_layer_split(std::int64_t layers, const ParallelPlan& plan);
/// Layers of each model chunk under `plan` (pipeline order): each stage's
/// stage_layer_split divided evenly over its virtual_stages chunks, or
/// chunk_layers(layers, pp, virtual_stages) when the plan gives no stage its
/// own number. With account_for_embedding / account_for_loss: the layers
/// plus one for each split evenly over the chunks, the first chunk one
/// fewer for the embedding, the last one fewer for the loss; InputError,
/// naming the key, where Megatron-Core refuses it (the count not a multiple
/// of pp, a stage's not of virtual_stages, given with first_stage_layers or
/// last_stage_layers) or a chunk would hold no layer (Megatron-Core's
/// standalone embedding or loss stage, not modelled).
std::vector<std::int64_t> chunk_layers(std::int64_t layers, const ParallelPlan& plan);

/// The keys of `plan` that count the embedding and the loss as layers, as
/// messages name them: "account_for_embedding and account_for_loss",
/// either alone, or "" for neither.
std::string accounted_split_keys(const ParallelPlan& plan);

/// `plan` with the layers counted as Megatron-Core's
/// --account-for-embedding/loss-in-pipeline-split count them, where that
/// splits them at the plan's pp and virtual_stages (`auto_chunks` and an
/// interleaved schedule: at the chunks auto_virtual_stages then takes): of
/// both, the embedding alone and the loss alone, the one whose fullest
/// stages hold the fewest layers, then the fewer on the last stage (its LM
/// head), then on the first; nullopt where none does. The plan's own split
/// keys are replaced.
std::optional<ParallelPlan> counted_layer_split(std::int64_t layers, const ParallelPlan& plan,
                                                bool auto_chunks);

/// A split of the first and last stages' layers (first_stage_layers,
/// last_stage_layers) and the compute it gives the slowest stage.
struct EdgeStageSplit {
  std::optional<std::int64_t> first_stage_layers, last_stage_layers;
  double slowest_s = 0;  ///< the slowest stage's compute under it, estimated (seconds)
  double layer_s = 0;    ///< what the estimate takes a layer to cost (seconds)
  int priced_on = 0;     ///< the stage that cost is measured on (1, a middle one; 0 with pp 2)
};
/// The most layers balanced_edge_stage_split searches splits of (it tries
/// every pair of counts; real models have a few hundred at most).
inline constexpr std::int64_t kMaxEdgeSplitLayers = 1024;
/// The split of the first and last stages' layers that Megatron-Core
/// accepts (stage_layer_split) with the least compute on the slowest stage,
/// estimated from what each stage of `plan` computes (`stage_compute_s`,
/// one per stage): a layer costs what one costs on a middle stage (its
/// compute over its layers; with pp 2, on the first stage, whose embedding
/// is taken as free), and the first and last stages keep what they compute
/// beside their layers (embedding, LM head and loss). Candidates: each
/// stage's count unset or 1..layers (not both unset), under
/// plan.virtual_stages, ranked by their stages' compute sorted slowest first
/// and compared in that order (the slowest stage, then the next: a stage
/// nearly as slow lengthens the pipeline's fill and drain); equal within
/// 1e-9, the fewer keys set, then the fewer layers on the last stage (it
/// holds the LM head), then on the first. Only candidates `admissible` accepts (the plan with
/// the candidate's keys; empty: all), e.g. those that fit in memory. Empty
/// when pp < 2, past kMaxEdgeSplitLayers layers, or the best's slowest
/// stage is not below the plan's own by `min_gain` (a fraction).
std::optional<EdgeStageSplit> balanced_edge_stage_split(
    std::int64_t layers, const ParallelPlan& plan, const std::vector<double>& stage_compute_s,
    double min_gain, const std::function<bool(const ParallelPlan&)>& admissible = {});

/// Memory one rank needs at its peak (Megatron/ZeRO accounting).
struct MemoryEstimate {
  Bytes weights;
  /// FP8 training (ProfileOptions::fp8) only: Transformer Engine's cached
  /// FP8 copy and FP8 transpose of each layer linear's weight (qkv, proj,
  /// fc1, fc2, the shared experts' and the rank's experts'), 1 + 1 bytes per
  /// weight element, held across micro-batches by every model chunk's
  /// modules; 0 otherwise.
  Bytes fp8_weights;
  Bytes gradients;
  Bytes optimizer_states;
  Bytes activations;  ///< peak of the activations held for backward, per schedule
  Bytes workspace;    ///< CUDA context, cuBLAS workspace, allocator slack, largest temporary
  Bytes capacity;     ///< the GPU's memory
  /// Micro-batch chunks whose activations are held at the peak (F run and
  /// backward not finished: W not run, under the zero-bubble schedules).
  std::int64_t peak_in_flight = 0;
  [[nodiscard]] Bytes total() const {
    return weights + fp8_weights + gradients + optimizer_states + activations + workspace;
  }
  [[nodiscard]] bool oom() const { return capacity.count() > 0 && total() > capacity; }
};

/// The stage fullest for its GPU: the most memory for its capacity (with
/// mixed GPUs a stage on the smaller GPU may be fuller with fewer bytes; on
/// equal GPUs, the most bytes), the first of equals; 0 without stages. The
/// stage whose bytes and capacity the reports give as peak_memory_bytes and
/// memory_capacity_bytes (run, sweep, compare-schedules, search, jobs).
[[nodiscard]] std::size_t fullest_stage(const std::vector<MemoryEstimate>& stages);

/// What the planner knows besides the graph.
struct PlanSummary {
  std::int64_t micro_batches = 0;
  std::vector<std::int64_t> chunk_layers;       ///< layers per model chunk, pipeline order
  std::vector<std::int64_t> params_per_stage;   ///< parameters held by one rank of each pipeline stage
  std::vector<MemoryEstimate> memory_per_stage; ///< one per pipeline stage (ranks of a stage are alike)
  /// FLOPs of one iteration over all ranks as the model defines them: every
  /// kernel's forward, input-gradient and weight-gradient work once, without
  /// recomputation (the numerator of MFU; the task graph's FLOPs include
  /// recomputation: hardware FLOPs, the numerator of HFU). Set by
  /// plan_training_detailed.
  double model_flops = 0;
  [[nodiscard]] bool oom() const;
};

struct PlannedTraining {
  TaskGraph graph;
  PlanSummary summary;
};

/// Plans one training iteration of `model` under `plan`: a task graph with
/// one program per pipeline stage, shared by the stage's tp x dp ranks (each
/// bound to its own TP/DP/pipeline groups), whose compute tasks are timed by
/// `predictor` (asked for the kernels of one layer, the embedding, the LM head
/// and each stage's optimizer, never per task or rank). The GPU memory for
/// the OOM flag is `predictor.gpu().memory`.
PlannedTraining plan_training_detailed(const TransformerConfig& model, const Workload& work,
                                       const ParallelPlan& plan, const node_model::KernelPredictor& predictor);
/// The task graph alone.
TaskGraph plan_training(const TransformerConfig& model, const Workload& work, const ParallelPlan& plan,
                        const node_model::KernelPredictor& predictor);
/// A planned task's name without the numbers that tell its repetitions
/// apart: the chunk and micro-batch tags and the layer and bucket indices
/// ("c1.mb3.layer005.fwd.tp.all-reduce" -> "layer.fwd.tp.all-reduce",
/// "dp.grad.all-reduce.bucket002" -> "dp.grad.all-reduce.bucket"): what
/// names the same work in every micro-batch and layer.
std::string task_role(std::string_view name);

/// The memory model alone (no timing): one estimate per pipeline stage.
PlanSummary estimate_memory(const TransformerConfig& model, const Workload& work, const ParallelPlan& plan,
                            Bytes gpu_memory);

}  // namespace tessera::parallelism
