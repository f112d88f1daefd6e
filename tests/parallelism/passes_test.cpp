// The planner's passes (passes.hpp), each alone, with hand-checkable
// expectations: the layer partition, the schedules' step orders, the op
// programs of a layer split into B and W, the data-parallel gradient buckets,
// the optimizer's shard and the model FLOPs.
#include "tessera/parallelism/passes.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/error.hpp"
#include "test_predictors.hpp"

using namespace tessera;
using namespace tessera::parallelism;
using node_model::DType;

namespace {

TransformerConfig tiny() { return TransformerConfig{"tiny", 8, 64, 4, 256, 97}; }

/// 4 layers; layers 1 and 3 are MoE layers of 4 experts (2 per token).
TransformerConfig tiny_moe() {
  TransformerConfig m{"tiny-moe", 4, 64, 4, 256, 97};
  m.moe.experts = 4;
  m.moe.top_k = 2;
  m.moe.expert_ffn_hidden = 96;
  m.moe.moe_every = 2;
  m.moe.first_dense_layers = 1;
  return m;
}

Workload work() {
  Workload w;
  w.micro_batch = 1;
  w.seq_len = 32;
  w.dtype = DType::FP32;
  return w;
}

/// work() under the Megatron profile.
Workload megatron_work() {
  Workload w = work();
  w.framework = node_model::Framework::Megatron;
  return w;
}

/// Megatron-Core's data parallelism on tiny: dp 2, pp 2, 4 micro-batches,
/// the distributed optimizer, --overlap-grad-reduce, a bucket per produced
/// gradient where there are buckets.
ParallelPlan megatron_core_plan() {
  ParallelPlan p;
  p.dp = 2;
  p.pp = 2;
  p.global_batch = 8;  // 4 micro-batches
  p.zero_stage = 1;
  p.grad_sync = GradSync::OverlapGradReduce;
  p.bucket_size = Bytes(1);
  return p;
}

/// 2-way tensor parallelism with sequence parallelism under zb-h1 (its
/// layers split into B and W pieces).
ParallelPlan tp2_sp_zb_h1() {
  ParallelPlan p;
  p.tp = 2;
  p.sequence_parallel = true;
  p.schedule = Schedule::ZeroBubbleH1;
  return p;
}

/// The names of the tasks that `prefix`'s tasks of stage `stage` depend on
/// first, in order.
std::vector<std::string> first_deps(const TaskGraph& g, int stage, std::string_view prefix) {
  const auto& tasks = g.programs[static_cast<std::size_t>(stage)]->tasks;
  std::vector<std::string> out;
  for (const Task& t : tasks) {
    if (t.name.starts_with(prefix)) out.emplace_back(tasks[static_cast<std::size_t>(t.deps.at(0))].name);
  }
  return out;
}

/// "F0 B0 W0 ..." (with the chunk when `chunks`: "F0.1" = chunk 0, micro-batch 1).
std::string order_text(const std::vector<PipelineStep>& order, bool chunks = false) {
  std::string s;
  for (const PipelineStep& st : order) {
    if (!s.empty()) s += ' ';
    s += to_string(st.kind);
    if (chunks) s += std::to_string(st.chunk) + ".";
    s += std::to_string(st.micro_batch);
  }
  return s;
}

/// Pieces as "name" (compute) or "name.kind" with "~" for async and "@ep"
/// for the expert-parallel group, space-separated.
std::string pieces_text(const PieceList& list) {
  std::string s;
  for (const Piece& p : list.pieces()) {
    if (!s.empty()) s += ' ';
    s += p.name;
    if (p.compute) continue;
    s += '.';
    s += to_string(p.kind);
    if (p.async) s += '~';
    if (p.expert) s += "@ep";
  }
  return s;
}

double flops_of(const PieceList& list) {
  double f = 0;
  for (const Piece& p : list.pieces()) f += p.flops.count();
  return f;
}

}  // namespace

// --- Layer partition --------------------------------------------------------

TEST(Passes, PartitionTenLayersOnFourStagesGivesTheFirstStagesOneMore) {
  const StagePartition part = partition_layers(10, 4, 1);
  EXPECT_EQ(part.chunk_layers, (std::vector<std::int64_t>{3, 3, 2, 2}));
  EXPECT_EQ(part.chunks(), 4);
  EXPECT_EQ(part.first_layer(0), 0);
  EXPECT_EQ(part.first_layer(2), 6);
  EXPECT_EQ(part.first_layer(3), 8);
  EXPECT_EQ(part.stage_layers(1), 3);
  // The embedding runs with the first chunk, the LM head with the last.
  EXPECT_TRUE(part.has_embedding(0));
  EXPECT_FALSE(part.has_embedding(1));
  EXPECT_TRUE(part.has_lm_head(3));
  EXPECT_FALSE(part.has_lm_head(2));
}

TEST(Passes, InterleavedPartitionPlacesChunkKOnRankKModP) {
  // 2 ranks x 2 chunks: chunks 0, 1, 2, 3 hold 3, 3, 2, 2 layers; rank 0
  // runs chunks 0 and 2, rank 1 chunks 1 and 3 (which has the LM head).
  const StagePartition part = partition_layers(10, 2, 2);
  EXPECT_EQ(part.chunk(0, 0), 0);
  EXPECT_EQ(part.chunk(0, 1), 2);
  EXPECT_EQ(part.chunk(1, 1), 3);
  EXPECT_EQ(part.stage_layers(0), 5);
  EXPECT_EQ(part.stage_layers(1), 5);
  EXPECT_TRUE(part.has_lm_head(part.chunk(1, 1)));
}

TEST(Passes, PartitionCountsMoeLayersPerChunk) {
  // Layers 0..3 on 2 stages: chunk 0 = layers 0, 1 (MoE: 1), chunk 1 = 2, 3 (MoE: 3).
  const StagePartition part = partition_layers(4, 2, 1);
  EXPECT_EQ(part.moe_layers(tiny_moe(), 0), 1);
  EXPECT_EQ(part.moe_layers(tiny_moe(), 1), 1);
  EXPECT_EQ(partition_layers(4, 1, 1).moe_layers(tiny_moe(), 0), 2);
}

// Megatron-Core's --decoder-first/last-pipeline-num-layers: the stages not
// named split the rest evenly; under interleaving each stage's layers are
// split evenly over its chunks (chunk k on rank k % pp).
TEST(Passes, FirstAndLastStageLayersSplitTheRestEvenly) {
  ParallelPlan plan;
  plan.pp = 4;
  EXPECT_EQ(stage_layer_split(24, plan), (std::vector<std::int64_t>{6, 6, 6, 6}));
  EXPECT_EQ(stage_layer_split(10, plan), (std::vector<std::int64_t>{3, 3, 2, 2}));  // the even split's
  plan.first_stage_layers = 8;
  plan.last_stage_layers = 4;
  EXPECT_EQ(stage_layer_split(24, plan), (std::vector<std::int64_t>{8, 6, 6, 4}));
  EXPECT_EQ(chunk_layers(24, plan), (std::vector<std::int64_t>{8, 6, 6, 4}));
  plan.first_stage_layers.reset();
  plan.last_stage_layers = 3;
  EXPECT_EQ(stage_layer_split(24, plan), (std::vector<std::int64_t>{7, 7, 7, 3}));
  // Two chunks per rank: rank 0 runs chunks 0 and 4 (4 layers each), rank 3
  // chunks 3 and 7 (2 each; the LM head with chunk 7).
  plan.virtual_stages = 2;
  plan.first_stage_layers = 8;
  plan.last_stage_layers = 4;
  EXPECT_EQ(chunk_layers(24, plan), (std::vector<std::int64_t>{4, 3, 3, 2, 4, 3, 3, 2}));
  const StagePartition part = partition_layers(24, plan);
  EXPECT_EQ(part.stage_layers(0), 8);
  EXPECT_EQ(part.stage_layers(3), 4);
  EXPECT_EQ(part.first_layer(4), 12);
  EXPECT_TRUE(part.has_lm_head(part.chunk(3, 1)));
  // virtual_stages auto: the fewest chunks from 2 up dividing every stage.
  plan.virtual_stages = 1;
  plan.first_stage_layers = 9;
  plan.last_stage_layers = 3;
  EXPECT_EQ(auto_virtual_stages(24, plan), 3);  // 9, 6, 6, 3
  plan.first_stage_layers = 7;
  EXPECT_EQ(auto_virtual_stages(26, plan), 2);  // 7 is prime: none divides; 2, refused by validate
}

TEST(Passes, FirstAndLastStageLayersRefuseWhatMegatronCoreRefuses) {
  const auto error = [](std::int64_t layers, int pp, int v, std::optional<std::int64_t> first,
                        std::optional<std::int64_t> last) {
    ParallelPlan plan;
    plan.pp = pp;
    plan.virtual_stages = v;
    plan.first_stage_layers = first;
    plan.last_stage_layers = last;
    try {
      (void)stage_layer_split(layers, plan);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error(24, 1, 1, 6, {}),
            "first_stage_layers needs pp >= 2 (got pp 1: one stage holds every layer)");
  EXPECT_EQ(error(24, 4, 1, {}, 0), "last_stage_layers must be positive (got 0)");
  EXPECT_EQ(error(24, 4, 1, {}, 1),
            "last_stage_layers (1) leaves 23 layers, which the other 3 stages cannot split evenly "
            "(Megatron-Core requires it)");
  EXPECT_EQ(error(24, 4, 2, 7, {}),
            "first_stage_layers (7) must be a multiple of virtual_stages (2): each of a stage's model chunks "
            "holds as many layers (Megatron-Core requires it)");
  EXPECT_EQ(
      error(24, 4, 2, 8, 6),
      "first_stage_layers + last_stage_layers (8 + 6) leave 10 layers, 5 for each of the other 2 stages: "
      "not a multiple of virtual_stages (2) (each of a stage's model chunks holds as many layers; "
      "Megatron-Core requires it)");
  EXPECT_EQ(error(24, 4, 2, 6, 6), "no error");  // 6, 6, 6, 6 in chunks of 3
  EXPECT_EQ(
      error(24, 4, 1, 12, 11),
      "first_stage_layers + last_stage_layers (12 + 11) leave 1 of the model's 24 layers to the other 2 "
      "stages: each needs at least 1");
  EXPECT_EQ(
      error(24, 2, 1, 12, 11),
      "first_stage_layers + last_stage_layers (12 + 11) must be the model's 24 layers with pp 2 (the two "
      "stages are all of them)");
  EXPECT_EQ(error(24, 2, 1, 16, {}), "no error");  // 16 and 8
}

// Megatron-Core's --account-for-embedding/loss-in-pipeline-split
// (get_num_layers_to_build): the layers plus one for each split evenly over
// the pp x v chunks, the first chunk and the last one layer fewer.
TEST(Passes, AccountingForEmbeddingAndLossCountsThemAsLayers) {
  ParallelPlan plan;
  plan.pp = 16;
  plan.account_for_embedding = true;
  plan.account_for_loss = true;
  // Llama 3 405B's 126 layers at pp 16: 128 / 16 = 8, the edge stages 7.
  std::vector<std::int64_t> stages(16, 8);
  stages.front() = stages.back() = 7;
  EXPECT_EQ(stage_layer_split(126, plan), stages);
  EXPECT_EQ(chunk_layers(126, plan), stages);
  // One of them: 127 = 16 x 8 - 1 does not split; 24 + 1 over pp 5 does.
  plan.account_for_loss = false;
  plan.pp = 5;
  EXPECT_EQ(stage_layer_split(24, plan), (std::vector<std::int64_t>{4, 5, 5, 5, 5}));
  plan.account_for_embedding = false;
  plan.account_for_loss = true;
  EXPECT_EQ(stage_layer_split(24, plan), (std::vector<std::int64_t>{5, 5, 5, 5, 4}));
  // Interleaved: 14 + 2 = 16 over 4 stages x 2 chunks of 2. Chunk 0 (rank 0's
  // first) and chunk 7 (rank 3's second) build one: the stages 3, 4, 4, 3.
  plan.pp = 4;
  plan.virtual_stages = 2;
  plan.account_for_embedding = true;
  EXPECT_EQ(chunk_layers(14, plan), (std::vector<std::int64_t>{1, 2, 2, 2, 2, 2, 2, 1}));
  EXPECT_EQ(stage_layer_split(14, plan), (std::vector<std::int64_t>{3, 4, 4, 3}));
  const StagePartition part = partition_layers(14, plan);
  EXPECT_EQ(part.first_layer(1), 1);
  EXPECT_EQ(part.first_layer(4), 7);
  EXPECT_TRUE(part.has_lm_head(part.chunk(3, 1)));
  // virtual_stages auto: the fewest chunks from 2 up that split the counted
  // stages (30 + 2 = 32 over pp 4: 8 per stage, 2 chunks).
  plan.virtual_stages = 1;
  EXPECT_EQ(auto_virtual_stages(30, plan), 2);
  EXPECT_EQ(auto_virtual_stages(34, plan), 3);  // 36 / 4 = 9 per stage
  // pp 1: one chunk that is first and last, all the layers.
  plan.pp = 1;
  EXPECT_EQ(chunk_layers(24, plan), (std::vector<std::int64_t>{24}));

  const auto error = [](std::int64_t layers, int pp, int v, bool embedding, bool loss,
                        std::optional<std::int64_t> first = {}) {
    ParallelPlan p;
    p.pp = pp;
    p.virtual_stages = v;
    p.account_for_embedding = embedding;
    p.account_for_loss = loss;
    p.first_stage_layers = first;
    try {
      (void)chunk_layers(layers, p);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(
      error(126, 16, 1, true, false),
      "account_for_embedding counts the model's 126 layers + 1 (the embedding) = 127, which do not split "
      "evenly over pp 16 (Megatron-Core requires it)");
  EXPECT_EQ(
      error(126, 16, 3, true, true),
      "account_for_embedding and account_for_loss count the model's 126 layers + 2 (the embedding and the "
      "loss) = 128, 8 per stage, not a multiple of virtual_stages (3) (each of a stage's model chunks "
      "holds as many; Megatron-Core requires it)");
  EXPECT_EQ(
      error(14, 4, 4, false, true),
      "account_for_loss counts the model's 14 layers + 1 (the loss) = 15, which do not split evenly over "
      "pp 4 (Megatron-Core requires it)");
  EXPECT_EQ(
      error(14, 4, 4, true, true),
      "account_for_embedding and account_for_loss count the model's 14 layers + 2 (the embedding and the "
      "loss) = 16, 1 per model chunk, which leaves the first chunk no transformer layer (Megatron-Core's "
      "standalone embedding or loss stage, which is not modelled)");
  EXPECT_EQ(error(24, 4, 1, true, false, 6),
            "account_for_embedding cannot be given with first_stage_layers: Megatron-Core takes either the "
            "stages' own layer counts or the even split counting the embedding and the loss, not both");
  EXPECT_EQ(error(14, 4, 2, true, true), "no error");
}

// The split of the edge stages' layers with the least compute on the
// slowest stage, from a layer's cost on a middle stage (1 s here) and what
// the first and last stages compute beside their layers (0 and 3 s).
TEST(Passes, BalancedEdgeStageSplitEstimatesFromAMiddleStage) {
  ParallelPlan plan;
  plan.pp = 4;
  // 6, 6, 6, 6 + 3: one layer fewer on the last stage gives 7, 7, 7, 3 + 3
  // (slowest 7); 6 + 7 + 7 + 4 ties it (7, 7, 7, 6 sorted) with two keys.
  auto split = balanced_edge_stage_split(24, plan, {6, 6, 6, 9}, 0.03);
  ASSERT_TRUE(split.has_value());
  EXPECT_FALSE(split->first_stage_layers.has_value());
  EXPECT_EQ(split->last_stage_layers, 3);
  EXPECT_DOUBLE_EQ(split->slowest_s, 7.0);
  // Nothing beats a last stage 1.7% above the rest (a layer moved costs more).
  EXPECT_FALSE(balanced_edge_stage_split(24, plan, {6, 6, 6, 6.1}, 0.03).has_value());
  // Under 2 chunks per rank every stage's layers are even: 8 + 6 + 6 + 4
  // (8, 6, 6, 4 + 3) is the best, 11% below the plan's 9.
  plan.virtual_stages = 2;
  split = balanced_edge_stage_split(24, plan, {6, 6, 6, 9}, 0.03);
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->first_stage_layers, 8);
  EXPECT_EQ(split->last_stage_layers, 4);
  EXPECT_DOUBLE_EQ(split->slowest_s, 8.0);
  // pp 2: a layer as the first stage computes one (18 layers, 18 s): 19 + 17.
  ParallelPlan two;
  two.pp = 2;
  split = balanced_edge_stage_split(36, two, {18, 20.9}, 0.03);
  ASSERT_TRUE(split.has_value());
  EXPECT_FALSE(split->first_stage_layers.has_value());
  EXPECT_EQ(split->last_stage_layers, 17);
  EXPECT_DOUBLE_EQ(split->slowest_s, 19.9);
  EXPECT_FALSE(balanced_edge_stage_split(36, ParallelPlan{}, {18}, 0.03).has_value());  // pp 1
  // Past kMaxEdgeSplitLayers no search (every pair of counts is tried).
  EXPECT_FALSE(balanced_edge_stage_split(kMaxEdgeSplitLayers + 2, two,
                                         {kMaxEdgeSplitLayers / 2 + 1.0, kMaxEdgeSplitLayers / 2 + 101.0},
                                         0.03)
                   .has_value());
  EXPECT_TRUE(balanced_edge_stage_split(kMaxEdgeSplitLayers, two,
                                        {kMaxEdgeSplitLayers / 2.0, kMaxEdgeSplitLayers / 2 + 100.0}, 0.03)
                  .has_value());
  // Only admissible splits (those that fit in memory, in the report): 19 +
  // 17 refused, the next best is 20 + 16 (20 against 20.9: 4% gained).
  split = balanced_edge_stage_split(36, two, {18, 20.9}, 0.03, [](const ParallelPlan& p) {
    return stage_layer_split(36, p).front() != 19;
  });
  ASSERT_TRUE(split.has_value());
  EXPECT_EQ(split->last_stage_layers, 16);
  EXPECT_DOUBLE_EQ(split->slowest_s, 20.0);
}

TEST(Passes, PartitionRejectsMoreChunksThanLayers) {
  EXPECT_THROW(partition_layers(3, 4, 1), InputError);
  EXPECT_THROW(partition_layers(7, 2, 4), InputError);
}

// --- Schedules ----------------------------------------------------------------

TEST(Passes, ScheduleOrdersForTwoStagesAndThreeMicroBatches) {
  EXPECT_EQ(order_text(pipeline_order(Schedule::GPipe, 2, 0, 3, 1)), "F0 F1 F2 B2 B1 B0");
  // 1F1B: stage 0 warms up with p - 1 = 1 forward, stage 1 with none.
  EXPECT_EQ(order_text(pipeline_order(Schedule::OneFOneB, 2, 0, 3, 1)), "F0 F1 B0 F2 B1 B2");
  EXPECT_EQ(order_text(pipeline_order(Schedule::OneFOneB, 2, 1, 3, 1)), "F0 B0 F1 B1 F2 B2");
  // ZB-H1: 1F1B's order with each W after its B on stage 0 and one pair
  // later on stage 1 (W deferred by `stage` pairs); the W left over close it.
  EXPECT_EQ(order_text(pipeline_order(Schedule::ZeroBubbleH1, 2, 0, 3, 1)), "F0 F1 B0 W0 F2 B1 W1 B2 W2");
  EXPECT_EQ(order_text(pipeline_order(Schedule::ZeroBubbleH1, 2, 1, 3, 1)), "F0 B0 F1 B1 W0 F2 B2 W1 W2");
  // ZB-H2: twice the warm-up forwards on stage 0 (2 of 3), W deferred by 2 pairs on stage 1.
  EXPECT_EQ(order_text(pipeline_order(Schedule::ZeroBubbleH2, 2, 0, 3, 1)), "F0 F1 F2 B0 W0 B1 W1 B2 W2");
  EXPECT_EQ(order_text(pipeline_order(Schedule::ZeroBubbleH2, 2, 1, 3, 1)), "F0 B0 F1 B1 F2 B2 W0 W1 W2");
}

TEST(Passes, InterleavedOrderForTwoStagesTwoChunksAndTwoMicroBatches) {
  // m = p: all forwards first (chunk 0 then chunk 1), then all backwards
  // (chunk 1 then chunk 0).
  EXPECT_EQ(order_text(pipeline_order(Schedule::Interleaved1F1B, 2, 0, 2, 2), true),
            "F0.0 F0.1 F1.0 F1.1 B1.0 B1.1 B0.0 B0.1");
}

TEST(Passes, EveryScheduleParsesFromItsNameAndOnlyZeroBubbleSplitsTheBackward) {
  for (Schedule s : {Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved1F1B, Schedule::ZeroBubbleH1,
                     Schedule::ZeroBubbleH2}) {
    EXPECT_EQ(parse_schedule(to_string(s)), s);
    EXPECT_EQ(splits_backward(s), s == Schedule::ZeroBubbleH1 || s == Schedule::ZeroBubbleH2) << to_string(s);
  }
}

// --- Op programs ----------------------------------------------------------------

/// Every kernel 10 us launched (from the host or on the device), 1 us as a
/// further part of a launched kernel.
class PartsPredictor final : public node_model::KernelPredictor {
 public:
  [[nodiscard]] Time predict(const node_model::Kernel&) const override { return Time::from_us(10); }
  [[nodiscard]] Time predict_part(const node_model::Kernel&) const override { return Time::from_us(1); }
  [[nodiscard]] std::string_view name() const override { return "parts"; }
  [[nodiscard]] const node_model::GpuSpec& gpu() const override { return node_model::gpu_preset("H100-SXM"); }
};

TEST(Passes, AFusedKernelsFurtherPartsPayNoLaunchFloor) {
  // FlashAttention: one launch each way, timed as its GEMMs (2 forward, 5
  // backward); the launch pays the floor once: 10 + 1 us forward, 10 + 4 x 1
  // us backward, with the Megatron profile's device times and eager's alike.
  const PartsPredictor pred;
  for (const Workload& w : {megatron_work(), work()}) {
    const KernelTimer timer(pred, w);
    const node_model::OpKernels fa = w.rules().flash_attention("attention", 4, 128, 64);
    EXPECT_EQ(fa.forward.launches, 1);
    EXPECT_EQ(fa.input_grad.launches, 1);
    PieceList list(timer);
    list.passes("fwd", {&fa.forward});
    list.split();
    list.passes("bwd", {&fa.input_grad});
    ASSERT_EQ(list.pieces().size(), 2U);
    EXPECT_EQ(list.pieces()[0].duration, Time::from_us(11));
    EXPECT_EQ(list.pieces()[1].duration, Time::from_us(14));
  }
}

TEST(Passes, DenseLayerWithTensorAndSequenceParallelismSplitsIntoBAndW) {
  const test_support::LayersOnlyPredictor pred(97);
  const Workload w = work();
  const KernelTimer timer(pred, w);
  const ParallelPlan p = tp2_sp_zb_h1();
  const LayerPieces lp = layer_pieces(tiny(), w, p, timer, true);
  EXPECT_EQ(pieces_text(lp.forward),
            "fwd.ln1 fwd.tp.all-gather fwd.attn fwd.tp.reduce-scatter fwd.ln2 fwd.tp.all-gather fwd.mlp "
            "fwd.tp.reduce-scatter fwd.res2");
  // B: the input gradients, every collective blocking.
  EXPECT_EQ(pieces_text(lp.input_backward),
            "bwd.res2 bwd.tp.all-gather bwd.mlp bwd.tp.reduce-scatter bwd.ln2 bwd.tp.all-gather bwd.attn "
            "bwd.tp.reduce-scatter bwd.ln1");
  // W: the weight gradients; the re-gathered fc1 and QKV inputs overlap the
  // weight gradients before them.
  EXPECT_EQ(pieces_text(lp.weight_backward),
            "wgrad.tp.all-gather~ wgrad.mlp wgrad.fc1 wgrad.tp.all-gather~ wgrad.attn wgrad.qkv");
  // B and W together do the fused backward's work.
  EXPECT_DOUBLE_EQ(flops_of(lp.input_backward) + flops_of(lp.weight_backward), flops_of(lp.backward));
}

TEST(Passes, DenseLayerWithoutTensorParallelismIsOnePiecePerStep) {
  const test_support::LayersOnlyPredictor pred(97);
  const Workload w = work();
  const KernelTimer timer(pred, w);
  ParallelPlan p;
  p.schedule = Schedule::ZeroBubbleH2;
  const LayerPieces lp = layer_pieces(tiny(), w, p, timer, true);
  EXPECT_EQ(pieces_text(lp.forward), "fwd");
  EXPECT_EQ(pieces_text(lp.backward), "bwd");
  EXPECT_EQ(pieces_text(lp.input_backward), "bwd");
  EXPECT_EQ(pieces_text(lp.weight_backward), "wgrad");
  // Not split: no B or W pieces.
  EXPECT_TRUE(layer_pieces(tiny(), w, p, timer, false).input_backward.pieces().empty());
}

TEST(Passes, MoeLayerSplitsLikeTheDenseLayerWithItsAllToAllsInB) {
  const test_support::LayersOnlyPredictor pred(97);
  const Workload w = work();
  const KernelTimer timer(pred, w);
  ParallelPlan p;
  p.tp = 2;
  p.dp = 2;
  p.ep = 2;
  p.sequence_parallel = true;
  p.schedule = Schedule::ZeroBubbleH1;
  const LayerPieces lp = moe_layer_pieces(tiny_moe(), w, p, timer, true);
  // Megatron-Core's token dispatcher: each rank routes its own sequence
  // shard (no gather before the router), dispatches it (A2A), the
  // tensor-parallel group gathers what arrived for the experts (AG) and
  // reduce-scatters their outputs (RS) before the combine (A2A).
  EXPECT_EQ(pieces_text(lp.forward),
            "fwd.ln1 fwd.tp.all-gather fwd.attn fwd.tp.reduce-scatter fwd.ln2 fwd.ep.dispatch.all-to-all@ep "
            "fwd.tp.all-gather fwd.experts fwd.tp.reduce-scatter fwd.ep.combine.all-to-all@ep fwd.unpermute");
  // The backward mirrors it (an all-gather's gradient is a reduce-scatter);
  // the router's input gradient is its shard's own (no reduction), so the
  // residual and unpermute run as one piece, as do the router and ln2
  // (adjacent compute pieces merge; in the forward ln2 and the router, and
  // unpermute and the residual).
  EXPECT_EQ(pieces_text(lp.backward),
            "bwd.res2 bwd.ep.combine.all-to-all@ep bwd.tp.all-gather bwd.experts bwd.tp.reduce-scatter "
            "bwd.ep.dispatch.all-to-all@ep bwd.router bwd.tp.all-gather bwd.attn bwd.tp.all-gather~ "
            "bwd.qkv.dgrad bwd.tp.reduce-scatter~ bwd.qkv.wgrad bwd.ln1");
  EXPECT_EQ(
      pieces_text(lp.input_backward),
      "bwd.res2 bwd.ep.combine.all-to-all@ep bwd.tp.all-gather bwd.experts bwd.tp.reduce-scatter "
      "bwd.ep.dispatch.all-to-all@ep bwd.router bwd.tp.all-gather bwd.attn bwd.tp.reduce-scatter bwd.ln1");
  // W: the experts' inputs are kept from B (no re-gather); QKV's is re-gathered.
  EXPECT_EQ(pieces_text(lp.weight_backward),
            "wgrad.experts wgrad.router wgrad.tp.all-gather~ wgrad.attn wgrad.qkv");
  EXPECT_DOUBLE_EQ(flops_of(lp.input_backward) + flops_of(lp.weight_backward), flops_of(lp.backward));

  // Shared experts run on the whole sequence as a dense MLP: the block input
  // gathered for them and their output reduce-scattered; W re-gathers their input.
  TransformerConfig shared = tiny_moe();
  shared.moe.shared_experts = 1;
  const LayerPieces sl = moe_layer_pieces(shared, w, p, timer, true);
  EXPECT_EQ(pieces_text(sl.forward),
            "fwd.ln1 fwd.tp.all-gather fwd.attn fwd.tp.reduce-scatter fwd.ln2 fwd.tp.all-gather fwd.shared "
            "fwd.tp.reduce-scatter fwd.ep.dispatch.all-to-all@ep fwd.tp.all-gather fwd.experts "
            "fwd.tp.reduce-scatter fwd.ep.combine.all-to-all@ep fwd.unpermute");
  EXPECT_EQ(pieces_text(sl.input_backward),
            "bwd.res2 bwd.ep.combine.all-to-all@ep bwd.tp.all-gather bwd.experts bwd.tp.reduce-scatter "
            "bwd.ep.dispatch.all-to-all@ep bwd.tp.all-gather bwd.shared bwd.tp.reduce-scatter bwd.router "
            "bwd.tp.all-gather bwd.attn bwd.tp.reduce-scatter bwd.ln1");
  EXPECT_EQ(pieces_text(sl.weight_backward),
            "wgrad.tp.all-gather~ wgrad.experts wgrad.router wgrad.tp.all-gather~ wgrad.attn wgrad.qkv");
  EXPECT_DOUBLE_EQ(flops_of(sl.input_backward) + flops_of(sl.weight_backward), flops_of(sl.backward));
  // The fused backward runs the shared experts as the dense MLP's: their
  // output gradient gathered, their input re-gathered for shared_fc1's
  // weight gradient and their input gradient reduce-scattered (both async),
  // the same collectives as B and W together.
  EXPECT_EQ(
      pieces_text(sl.backward),
      "bwd.res2 bwd.ep.combine.all-to-all@ep bwd.tp.all-gather bwd.experts bwd.tp.reduce-scatter "
      "bwd.ep.dispatch.all-to-all@ep bwd.tp.all-gather bwd.shared bwd.tp.all-gather~ bwd.shared.fc1.dgrad "
      "bwd.tp.reduce-scatter~ bwd.shared.fc1.wgrad bwd.router bwd.tp.all-gather bwd.attn bwd.tp.all-gather~ "
      "bwd.qkv.dgrad bwd.tp.reduce-scatter~ bwd.qkv.wgrad bwd.ln1");

  // Without tensor parallelism: the all-to-alls only.
  p.tp = 1;
  p.sequence_parallel = false;
  const LayerPieces serial = moe_layer_pieces(tiny_moe(), w, p, timer, true);
  EXPECT_EQ(pieces_text(serial.input_backward),
            "bwd.res2 bwd.ep.combine.all-to-all@ep bwd.experts bwd.ep.dispatch.all-to-all@ep bwd.router");
  EXPECT_EQ(pieces_text(serial.weight_backward), "wgrad");
}

TEST(Passes, ModelPiecesPickTheMoePiecesForMoeLayersOnly) {
  const test_support::LayersOnlyPredictor pred(97);
  const Workload w = work();
  const KernelTimer timer(pred, w);
  const ModelPieces pieces = model_pieces(tiny_moe(), w, ParallelPlan{}, timer);
  ASSERT_TRUE(pieces.moe_layer.has_value());
  EXPECT_EQ(&pieces.of_layer(tiny_moe(), 0), &pieces.layer);
  EXPECT_EQ(&pieces.of_layer(tiny_moe(), 1), &*pieces.moe_layer);
  EXPECT_EQ(&pieces.of_layer(tiny_moe(), 2), &pieces.layer);
  EXPECT_EQ(&pieces.of_layer(tiny_moe(), 3), &*pieces.moe_layer);
  // 1F1B: the step kinds pick forward and the fused backward.
  EXPECT_EQ(&pieces.layer.of(StepKind::F, false), &pieces.layer.forward);
  EXPECT_EQ(&pieces.layer.of(StepKind::B, false), &pieces.layer.backward);
  EXPECT_EQ(&pieces.layer.of(StepKind::B, true), &pieces.layer.input_backward);
  EXPECT_EQ(&pieces.layer.of(StepKind::W, true), &pieces.layer.weight_backward);
  EXPECT_FALSE(model_pieces(tiny(), w, ParallelPlan{}, timer).moe_layer.has_value());
}

TEST(Passes, LmHeadRunsTheVocabularyParallelLossAllReducesInItsForward) {
  const test_support::LayersOnlyPredictor pred(97);
  const Workload w = work();
  const KernelTimer timer(pred, w);
  ParallelPlan p;
  p.tp = 2;
  const ModelPieces pieces = model_pieces(tiny(), w, p, timer);
  // Megatron's vocabulary-parallel cross entropy: the logits' maximum, the
  // target's logit and the sum of the exponentials, one FP32 value per token
  // each (1 x 32 tokens x 4 B), all-reduced over the tensor-parallel group.
  EXPECT_EQ(
      pieces_text(pieces.lm_head.forward),
      "fwd fwd.tp.loss.all-reduce fwd.loss fwd.tp.loss.all-reduce fwd.loss fwd.tp.loss.all-reduce fwd.loss");
  for (const Piece& c : pieces.lm_head.forward.pieces()) {
    if (!c.compute) {
      EXPECT_EQ(c.bytes, Bytes(32LL * 4));
    }
  }
  // Its backward needs none; the LM head's input gradient is all-reduced
  // while its weight gradient runs (~: async, as the layers' column-parallel
  // linears; helper 71: after it), and the final norm waits for it.
  EXPECT_EQ(pieces_text(pieces.lm_head.backward), "bwd bwd.tp.all-reduce~ bwd.wgrad bwd.ln_f");
  // With SP the head's input is re-gathered for the weight gradient while
  // the dgrad runs, and the input gradient reduce-scattered over the wgrad
  // (helper 71: no re-gather); zero-bubble's W re-gathers it itself.
  p.sequence_parallel = true;
  p.schedule = Schedule::ZeroBubbleH1;  // B and W apart
  const ModelPieces sp = model_pieces(tiny(), w, p, timer);
  EXPECT_EQ(pieces_text(sp.lm_head.backward),
            "bwd.loss bwd.tp.all-gather~ bwd bwd.tp.reduce-scatter~ bwd.wgrad bwd.ln_f");
  EXPECT_EQ(pieces_text(sp.lm_head.weight_backward), "wgrad.tp.all-gather wgrad");
  // tp_comm_overlap off: each blocks.
  p.tp_comm_overlap = false;
  EXPECT_EQ(pieces_text(model_pieces(tiny(), w, p, timer).lm_head.backward),
            "bwd.loss bwd.tp.all-gather bwd bwd.tp.reduce-scatter bwd.wgrad bwd.ln_f");
  // Without tensor parallelism: no collective at all.
  EXPECT_EQ(pieces_text(model_pieces(tiny(), w, ParallelPlan{}, timer).lm_head.forward), "fwd");
}

TEST(Passes, EmbeddingReducesItsLookupsBeforeThePositionAdd) {
  // Megatron's LanguageModelEmbedding: the vocabulary-parallel lookup's
  // partial sums are reduced right after the lookups; the position add and
  // the dropout follow. With sequence parallelism and a position table it
  // all-reduces (the add runs on every token, then the sum is split among
  // the shards); only without a position table does it reduce-scatter.
  const test_support::LayersOnlyPredictor pred(97);
  const Workload w = megatron_work();
  const KernelTimer timer(pred, w);
  ParallelPlan p;
  p.tp = 2;
  const Bytes act(32LL * 64 * 4);  // 32 tokens x hidden 64 x FP32
  const ModelPieces plain = model_pieces(tiny(), w, p, timer);
  EXPECT_EQ(pieces_text(plain.embedding.forward), "fwd fwd.tp.all-reduce fwd");
  p.sequence_parallel = true;
  const ModelPieces sp = model_pieces(tiny(), w, p, timer);
  EXPECT_EQ(pieces_text(sp.embedding.forward), "fwd fwd.tp.all-reduce fwd");
  for (const Piece& c : sp.embedding.forward.pieces()) {
    if (!c.compute) {
      EXPECT_EQ(c.kind, CollectiveKind::AllReduce);
      EXPECT_EQ(c.bytes, act);
    }
  }
  EXPECT_EQ(pieces_text(sp.embedding.backward), "bwd.tp.all-gather bwd");
  TransformerConfig rotary = tiny();
  rotary.learned_positions = false;
  const ModelPieces rs = model_pieces(rotary, w, p, timer);
  EXPECT_EQ(pieces_text(rs.embedding.forward), "fwd fwd.tp.reduce-scatter fwd");
  rotary.dropout = false;
  EXPECT_EQ(pieces_text(model_pieces(rotary, w, p, timer).embedding.forward), "fwd fwd.tp.reduce-scatter");
}

TEST(Passes, SelectiveRecomputationRedoesTheAttentionCoreWithItsPermute) {
  // Megatron checkpoints CoreAttention (DotProductAttention): the scores,
  // softmax, dropout and context bmms and the context's permute to
  // [s, b, h], whose copy is inside it. Memory-bound kernels at 1 ps per
  // byte, GEMMs free: the recomputation is the softmax's, the dropout's and
  // the copy's bytes.
  const test_support::BytesPredictor pred;
  const Workload w = work();
  const KernelTimer timer(pred, w);
  // The backward's compute with it, less the backward's without it.
  auto backward = [&](Recompute rc) {
    ParallelPlan p;
    p.recompute = rc;
    Time t;
    const LayerPieces lp = layer_pieces(tiny(), w, p, timer, false);
    for (const Piece& c : lp.backward.pieces()) t += c.duration;
    return t;
  };
  Time expected, without_copy;
  bool in = false;
  for (const auto& op : layer_ops(tiny(), w, Sharding{1, false})) {
    in = in || op.name == "scores";
    if (!in) continue;
    for (const auto& k : op.forward.kernels) {
      expected += pred.predict(k);
      if (op.name != "context_copy") without_copy += pred.predict(k);
    }
    if (op.name == "context_copy") break;
  }
  EXPECT_EQ(backward(Recompute::Selective) - backward(Recompute::None), expected);
  EXPECT_GT(expected, without_copy);
}

TEST(Passes, WithoutTensorParallelCollectivesARankRunsItsShareAlone) {
  const test_support::LayersOnlyPredictor pred(97);
  const Workload w = work();
  const KernelTimer timer(pred, w);
  ParallelPlan p;
  p.tp = 4;
  p.dp = 2;
  p.ep = 2;
  p.sequence_parallel = true;
  const ModelPieces with = model_pieces(tiny_moe(), w, p, timer);
  p.tp_collectives = false;
  const ModelPieces alone = model_pieces(tiny_moe(), w, p, timer);
  // The same work in fewer pieces: the compute between two collectives merges.
  EXPECT_EQ(pieces_text(alone.layer.forward), "fwd.ln1");
  EXPECT_EQ(pieces_text(alone.layer.backward), "bwd.res2");
  EXPECT_EQ(pieces_text(alone.lm_head.forward), "fwd");
  EXPECT_EQ(pieces_text(alone.embedding.backward), "bwd");
  for (const LayerPieces* l : {&alone.layer, &alone.embedding, &alone.lm_head}) {
    for (const Piece& c : l->forward.pieces()) EXPECT_TRUE(c.compute) << c.name;
    for (const Piece& c : l->backward.pieces()) EXPECT_TRUE(c.compute) << c.name;
  }
  EXPECT_DOUBLE_EQ(flops_of(alone.layer.forward), flops_of(with.layer.forward));
  EXPECT_DOUBLE_EQ(flops_of(alone.layer.backward), flops_of(with.layer.backward));
  EXPECT_DOUBLE_EQ(flops_of(alone.lm_head.forward), flops_of(with.lm_head.forward));
  // The expert-parallel all-to-alls stay.
  EXPECT_EQ(pieces_text(alone.moe_layer->forward),
            "fwd.ln1 fwd.ep.dispatch.all-to-all@ep fwd.experts fwd.ep.combine.all-to-all@ep fwd.unpermute");
}

namespace {
/// megatron_work() in bf16 with Transformer Engine FP8 layer GEMMs
/// (training.dtype: fp8).
Workload fp8_work() {
  Workload w = megatron_work();
  w.dtype = DType::BF16;
  w.profile.fp8 = true;
  return w;
}

/// Every collective of `kind` in `list`, as its bytes.
std::vector<std::int64_t> collective_bytes(const PieceList& list, CollectiveKind kind) {
  std::vector<std::int64_t> out;
  for (const Piece& p : list.pieces()) {
    if (!p.compute && p.kind == kind) out.push_back(p.bytes.count());
  }
  return out;
}
}  // namespace

TEST(Passes, Fp8SequenceParallelGathersMoveOneBytePerElement) {
  // Transformer Engine casts a sequence shard to FP8 before gathering it
  // (the norms' FP8 output for qkv and fc1; the saved FP8 input re-gathered
  // for the weight gradient; a row-parallel linear's dy in
  // grad_output_preprocess): every all-gather of the layer moves 1 byte per
  // element of b s h (32 x 64), the reduce-scatters of the GEMMs' bf16
  // outputs 2.
  const test_support::LayersOnlyPredictor pred(97);
  const Workload w = fp8_work();
  const KernelTimer timer(pred, w);
  const ParallelPlan p = tp2_sp_zb_h1();
  const std::int64_t act = 32 * 64;
  const LayerPieces lp = layer_pieces(tiny(), w, p, timer, true);
  ASSERT_TRUE(lp.first_forward.has_value());
  // Forward: qkv's and fc1's inputs; the fused backward: fc2's and proj's dy,
  // fc1's and qkv's inputs re-gathered (B: the dy, W: the inputs).
  const std::vector<std::pair<const PieceList*, std::size_t>> lists{
      {&lp.forward, 2}, {&*lp.first_forward, 2}, {&lp.backward, 4}, {&lp.input_backward, 2}, {&lp.weight_backward, 2}};
  for (const auto& [l, n] : lists) {
    const auto gathers = collective_bytes(*l, CollectiveKind::AllGather);
    EXPECT_EQ(gathers, std::vector<std::int64_t>(n, act)) << pieces_text(*l);
    for (std::int64_t b : collective_bytes(*l, CollectiveKind::ReduceScatter)) EXPECT_EQ(b, 2 * act);
  }
  // bf16: 2 bytes each.
  Workload bf16 = w;
  bf16.profile.fp8 = false;
  const LayerPieces plain = layer_pieces(tiny(), bf16, p, timer, true);
  EXPECT_FALSE(plain.first_forward.has_value());
  EXPECT_EQ(collective_bytes(plain.forward, CollectiveKind::AllGather), (std::vector<std::int64_t>{2 * act, 2 * act}));
  // An MoE layer: the attention's and the shared experts' gathers in FP8;
  // the token dispatcher's gather of the routed tokens stays bf16 (its own,
  // not Transformer Engine's).
  TransformerConfig m = tiny_moe();
  m.moe.shared_experts = 1;
  const LayerPieces moe = moe_layer_pieces(m, w, p, timer, false);
  const Bytes routed(expert_tokens_per_rank(m, w, Sharding{2, true}) * 64 * 2);
  const auto gathers = collective_bytes(moe.forward, CollectiveKind::AllGather);
  EXPECT_EQ(gathers, (std::vector<std::int64_t>{act, act, routed.count()}));
}

TEST(Passes, Fp8WeightCastsRunInEachChunksFirstMicroBatchOnly) {
  // Megatron-Core sets is_first_microbatch on a model chunk for its first
  // micro-batch and Transformer Engine caches the FP8 weights for the rest
  // of the iteration: each layer casts its four weights (4 bytes per
  // element: cast and transpose) in its chunk's first forward step only,
  // not in later micro-batches and not in a recomputed forward. Memory
  // passes cost a picosecond per byte, GEMMs nothing; interleaved 1F1B (two
  // chunks per stage), 4 micro-batches, full recomputation.
  const test_support::BytesPredictor pred;
  Workload w = fp8_work();
  w.host.per_launch = Time::from_us(1);
  ParallelPlan p;
  p.pp = 2;
  p.virtual_stages = 2;
  p.schedule = Schedule::Interleaved1F1B;
  p.global_batch = 4;
  p.recompute = Recompute::Full;
  const TransformerConfig m = tiny();
  // A layer's weight casts: qkv 64 x 192, proj 64 x 64, fc1 64 x 256, fc2 256 x 64.
  std::int64_t cast_bytes = 0, cast_launches = 0;
  for (const OpKernels& op : layer_ops(m, w)) {
    for (const auto& k : op.weight_cast.kernels) cast_bytes += k.bytes().count();
    cast_launches += op.weight_cast.launches;
  }
  EXPECT_EQ(cast_bytes, 4 * (64 * 192 + 64 * 64 + 64 * 256 + 256 * 64));
  EXPECT_EQ(cast_launches, 4);
  const TaskGraph g = plan_training(m, w, p, pred);
  ASSERT_NO_THROW(g.validate());
  ParallelPlan kept = p;
  kept.recompute = Recompute::None;
  const TaskGraph none = plan_training(m, w, kept, pred);
  // Stage 0 runs layers 0-1 (chunk 0) and 4-5 (chunk 1).
  auto task = [](const TaskGraph& graph, int chunk, int mb, std::int64_t layer,
                 std::string_view step) -> const Task& {
    const std::string name = fmt::format("c{}.mb{}.layer{:03}.{}", chunk, mb, layer, step);
    const auto& tasks = graph.tasks(0);
    const auto it = std::find_if(tasks.begin(), tasks.end(), [&](const Task& t) { return t.name == name; });
    // (a missing task ends the test: comparing another task's times would
    // pass or fail for the wrong reason)
    if (it == tasks.end()) throw std::runtime_error("no task " + name);
    return *it;
  };
  for (const auto& [chunk, layer] : std::vector<std::pair<int, std::int64_t>>{{0, 0}, {0, 1}, {1, 4}, {1, 5}}) {
    const Task& first = task(g, chunk, 0, layer, "fwd");
    for (int mb = 0; mb < 4; ++mb) {
      const Task& fwd = task(g, chunk, mb, layer, "fwd");
      const Task& later = task(g, chunk, mb == 0 ? 1 : mb, layer, "fwd");
      if (mb > 0) {
        EXPECT_EQ(first.duration - fwd.duration, Time::from_ps(cast_bytes)) << layer << " mb " << mb;
        EXPECT_EQ(first.host_issue - fwd.host_issue, Time::from_us(cast_launches)) << layer << " mb " << mb;
      }
      // The recomputed forward (one task with the backward) casts no weight,
      // in the first micro-batch either: it is a later micro-batch's forward
      // and the backward.
      EXPECT_EQ(task(g, chunk, mb, layer, "recompute.fwd+bwd").duration,
                later.duration + task(none, chunk, mb, layer, "bwd").duration)
          << layer << " mb " << mb;
    }
  }
  // Without FP8 no forward differs.
  Workload bf16 = w;
  bf16.profile.fp8 = false;
  const TaskGraph plain = plan_training(m, bf16, p, pred);
  EXPECT_EQ(task(plain, 0, 0, 0, "fwd").duration, task(plain, 0, 1, 0, "fwd").duration);
}

// --- Data-parallel gradient buckets ----------------------------------------------

TEST(Passes, OverlappedBucketsCloseOnceFull) {
  GradBuckets b(Bytes(100), true);
  EXPECT_FALSE(b.add(60));
  EXPECT_TRUE(b.add(60));  // 120 >= 100: closed
  EXPECT_FALSE(b.add(30));
  EXPECT_TRUE(b.close());  // the rest
  EXPECT_FALSE(b.close());  // nothing left
  EXPECT_EQ(b.buckets(), (std::vector<std::int64_t>{120, 30}));
}

TEST(Passes, AfterBackwardIsOneBucket) {
  GradBuckets b(Bytes(100), false);
  EXPECT_FALSE(b.add(60));
  EXPECT_FALSE(b.add(60));
  EXPECT_FALSE(b.add(30));
  EXPECT_TRUE(b.close());
  EXPECT_EQ(b.buckets(), (std::vector<std::int64_t>{150}));
}

TEST(Passes, GradSyncOfTwoLayersPerBucketReducesFiveBuckets) {
  // 8 layers, one stage, tied embeddings: the backward produces the layers'
  // gradients (2 per bucket: 4 buckets), then the embedding's (the 5th,
  // closed after the backward).
  const TransformerConfig m = tiny();
  const test_support::LayersOnlyPredictor pred(97);
  ParallelPlan p;
  p.dp = 2;
  p.grad_sync = GradSync::Overlapped;
  const std::int64_t layer_bytes = m.params_per_layer_per_tp_rank(1) * 4;  // FP32 gradients
  p.bucket_size = Bytes(2 * layer_bytes);
  const TaskGraph g = plan_training(m, work(), p, pred);
  std::vector<std::int64_t> buckets;
  for (const Task& t : g.tasks(0)) {
    if (t.kind == TaskKind::Collective && t.name.starts_with("dp.grad.")) buckets.push_back(t.bytes.count());
  }
  ASSERT_EQ(buckets.size(), 5U);
  for (int b = 0; b < 4; ++b) EXPECT_EQ(buckets[static_cast<std::size_t>(b)], 2 * layer_bytes);
}

TEST(Passes, OverlapParamGatherGathersEachBucketBeforeItsFirstForward) {
  // Megatron-Core's distributed optimizer with --overlap-grad-reduce and
  // --overlap-param-gather: the gradient buckets of the backward (tiny, 8
  // layers, tied embeddings, one stage, two layers a bucket: [7 6] [5 4]
  // [3 2] [1 0] [embedding]) are gathered in reverse during the forward of
  // the first micro-batch: the embedding waits for bucket004, layers 0-1 for
  // bucket003, ..., layers 6-7 for bucket000; none after the step.
  const TransformerConfig m = tiny();
  const test_support::LayersOnlyPredictor pred(97);
  Workload w = work();
  w.dtype = DType::BF16;  // FP32 main gradients, bf16 parameters
  w.framework = node_model::Framework::Megatron;
  ParallelPlan p;
  p.dp = 2;
  p.global_batch = 4;  // 2 micro-batches
  p.zero_stage = 1;
  p.grad_sync = GradSync::OverlapGradReduce;
  const std::int64_t layer_params = m.params_per_layer_per_tp_rank(1);
  p.bucket_size = Bytes(2 * layer_params * 4);
  auto gathers_of = [&](bool overlap) {
    p.overlap_param_gather = overlap;
    const TaskGraph g = plan_training(m, w, p, pred);
    const auto& tasks = g.tasks(0);
    std::vector<std::pair<std::string, std::int64_t>> out;  // gather, bytes
    std::map<std::string, std::string> waiter;              // gather -> first task waiting for it
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      const Task& t = tasks[i];
      if (t.name.starts_with("dp.param.all-gather")) {
        out.emplace_back(std::string(t.name), t.bytes.count());
        if (!overlap) {
          EXPECT_EQ(tasks[static_cast<std::size_t>(t.deps.at(0))].name, "optimizer");
        }
      }
      for (TaskIndex d : t.deps) {
        const std::string dn(tasks[static_cast<std::size_t>(d)].name);
        if (dn.starts_with("dp.param.all-gather") && !waiter.contains(dn)) waiter[dn] = std::string(t.name);
      }
    }
    if (overlap) {
      EXPECT_EQ(tasks.back().name, "optimizer");  // nothing after the step
      for (const auto& [gather, bytes] : out) {
        const std::string first = waiter.at(gather);
        const char b = gather.back();  // bucket00b
        const std::string expect =
            b == '4' ? "mb0.embedding." : fmt::format("mb0.layer{:03}.", 2 * ('3' - b));
        EXPECT_TRUE(first.starts_with(expect)) << gather << " first waited for by " << first;
      }
    }
    return out;
  };
  const auto after_step = gathers_of(false);
  const auto in_forward = gathers_of(true);
  ASSERT_EQ(in_forward.size(), 5U);
  EXPECT_EQ(in_forward.front().first, "dp.param.all-gather.bucket004");
  EXPECT_EQ(in_forward.back().first, "dp.param.all-gather.bucket000");
  EXPECT_EQ(in_forward[1].second, 2 * layer_params * 2);  // two layers of bf16 parameters
  // The same buckets, gathered in the opposite order.
  EXPECT_EQ(std::vector(after_step.rbegin(), after_step.rend()), in_forward);
}

TEST(Passes, OverlapGradReduceBucketsOnlyTheFirstStage) {
  // Megatron-Core's DDP cuts buckets only on pipeline stage 0; a later
  // stage's buffer is one bucket, reduced after its last backward. tiny (8
  // layers) on pp 2, every layer a bucket where there are buckets: stage 0
  // (layers 0-3 and the embedding) 5, stage 1 (layers 4-7) 1 and the tied
  // LM head's own (OverlapGradReduceGivesATiedEmbeddingItsOwnBucket).
  const test_support::LayersOnlyPredictor pred(97);
  const TaskGraph g = plan_training(tiny(), megatron_work(), megatron_core_plan(), pred);
  for (int stage = 0; stage < 2; ++stage) {
    EXPECT_EQ(first_deps(g, stage, "dp.grad.reduce-scatter").size(), stage == 0 ? 5U : 2U) << stage;
  }
}

TEST(Passes, OverlapGradReduceGivesATiedEmbeddingItsOwnBucket) {
  // Under the distributed optimizer Megatron-Core puts the word embedding
  // shared by the first and last stage in a bucket of its own: on stage 1
  // (one bucket otherwise) the LM head's gradient is reduced right after its
  // backward, the layers' after the last; on stage 0 the layers' bucket and
  // the embedding's are two, both reduced after the backward.
  const TransformerConfig m = tiny();  // tied embeddings
  const test_support::LayersOnlyPredictor pred(97);
  const Workload w = megatron_work();
  ParallelPlan p = megatron_core_plan();
  p.bucket_size = Bytes(1'000'000'000);
  const TaskGraph g = plan_training(m, w, p, pred);
  for (int stage = 0; stage < 2; ++stage) {
    const auto after = first_deps(g, stage, "dp.grad.reduce-scatter");
    ASSERT_EQ(after.size(), 2U) << stage;
    if (stage == 1) {
      EXPECT_TRUE(after[0].starts_with("mb3.lm_head.")) << after[0];
      EXPECT_TRUE(after[1].starts_with("mb3.layer004.")) << after[1];
    } else {
      // The layers' bucket closes when the embedding's gradient arrives
      // (the model cuts buckets where gradients are produced).
      EXPECT_TRUE(after[0].starts_with("mb3.embedding.")) << after[0];
      EXPECT_TRUE(after[1].starts_with("mb3.embedding.")) << after[1];
    }
  }
  // ZeRO-0 (all-reduce): no such bucket.
  p.zero_stage = 0;
  const TaskGraph g0 = plan_training(m, w, p, pred);
  int stage1 = 0;
  for (const Task& t : g0.programs[1]->tasks) stage1 += t.name.starts_with("dp.grad.all-reduce") ? 1 : 0;
  EXPECT_EQ(stage1, 1);
}

TEST(Passes, OverlapGradReduceUnderZeroBubbleFollowsTheWeightGradients) {
  // zb-h1 splits the backward: the W steps compute the weight gradients, so
  // the last micro-batch's W steps fill the buckets (one per layer here)
  // and each reduction follows a W task; ZeRO-2 is refused with it.
  const TransformerConfig m = tiny();
  const test_support::LayersOnlyPredictor pred(97);
  const Workload w = megatron_work();
  ParallelPlan p = megatron_core_plan();
  p.schedule = Schedule::ZeroBubbleH1;
  const TaskGraph g = plan_training(m, w, p, pred);
  const auto after = first_deps(g, 0, "dp.grad.reduce-scatter");
  const auto after_w = std::count_if(
      after.begin(), after.end(), [](const std::string& n) { return n.find("wgrad") != std::string::npos; });
  EXPECT_EQ(after.size(), 5U);  // layers 0-3 and the embedding
  EXPECT_GE(after_w, 4);     // the layers' (the embedding's W may be its backward)
  p.zero_stage = 2;
  EXPECT_THROW(p.validate(m, w, 4), InputError);
}

TEST(Passes, OverlapGradReduceWithInterleavingSyncsEachChunkAsItsScheduleDoes) {
  // With interleaving Megatron-Core's schedule launches each chunk's whole
  // gradient sync at once (align_grad_reduce), `stage` backward steps after
  // the chunk's last: one reduction per chunk on every stage (tiny on pp 2,
  // 4 chunks per stage), on stage 0 right after the chunk's last backward,
  // on stage 1 after the next one. With --overlap-param-gather the first
  // two chunks' parameters are gathered at the start (no dependency), each
  // later chunk's during the forward.
  const test_support::LayersOnlyPredictor pred(97);
  ParallelPlan p = megatron_core_plan();
  p.virtual_stages = 4;
  p.schedule = Schedule::Interleaved1F1B;
  p.overlap_param_gather = true;
  const TaskGraph g = plan_training(tiny(), megatron_work(), p, pred);
  for (int stage = 0; stage < 2; ++stage) {
    const auto& tasks = g.programs[static_cast<std::size_t>(stage)]->tasks;
    int reductions = 0, gathers = 0, at_start = 0, after_own_chunk = 0;
    for (const Task& t : tasks) {
      if (t.name.starts_with("dp.grad.reduce-scatter")) {
        ++reductions;
        // Its dependency: the backward step it follows.
        const std::string_view dep = tasks[static_cast<std::size_t>(t.deps.at(0))].name;
        after_own_chunk += dep.find(".mb3.") != std::string_view::npos ? 1 : 0;
      }
      if (t.name.starts_with("dp.param.all-gather")) {
        ++gathers;
        at_start += t.deps.empty() ? 1 : 0;
      }
    }
    EXPECT_EQ(reductions, 4) << stage;
    EXPECT_EQ(gathers, 4) << stage;
    EXPECT_EQ(at_start, 2) << stage;  // the first two chunks'
    // Stage 0: each after its chunk's last backward (micro-batch 3); stage
    // 1: one backward step later (micro-batch 2 of the chunk before), the
    // last chunk's at the end.
    EXPECT_EQ(after_own_chunk, stage == 0 ? 4 : 1) << stage;
  }
}

TEST(Passes, ZeroTwoWithInterleavingGathersEveryChunksParameters) {
  // ZeRO-2 reduces every micro-batch's gradients in rounds; with interleaving
  // a chunk's last round was left open and the next chunk's round took it,
  // so one chunk's parameters were never gathered after the step. Each
  // round is closed now: the gathers after the step cover the stage's
  // parameters (tiny, pp 2, 2 chunks per stage, buckets larger than a chunk).
  const TransformerConfig m = tiny();
  const test_support::LayersOnlyPredictor pred(97);
  Workload w = work();
  ParallelPlan p;
  p.dp = 2;
  p.pp = 2;
  p.virtual_stages = 2;
  p.schedule = Schedule::Interleaved1F1B;
  p.global_batch = 8;
  p.zero_stage = 2;
  p.grad_sync = GradSync::Overlapped;
  p.bucket_size = Bytes(1'000'000'000);
  const TaskGraph g = plan_training(m, w, p, pred);
  const auto& tasks = g.programs[0]->tasks;
  std::int64_t gathered = 0;
  for (const Task& t : tasks) {
    if (t.name.starts_with("dp.param.all-gather")) gathered += t.bytes.count();
  }
  // Stage 0: layers 0-1 and 4-5 and the word embedding, FP32.
  const std::int64_t params = 4 * m.params_per_layer_per_tp_rank(1) +
                              padded_vocab_per_rank(m, w, 1) * m.hidden +
                              w.seq_len * m.hidden;  // and the position table
  EXPECT_EQ(gathered, params * 4);
}

TEST(Passes, OverlapParamGatherGathersTheExpertsBeforeTheirLayers) {
  // tiny_moe (MoE layers 1 and 3), dp 4, ep 2: the experts' parameters are
  // gathered over the expert-data-parallel group before each MoE layer's
  // first forward (one bucket a layer here), the same bytes as after the step.
  const TransformerConfig m = tiny_moe();
  const test_support::LayersOnlyPredictor pred(97);
  Workload w = work();
  w.framework = node_model::Framework::Megatron;
  ParallelPlan p;
  p.dp = 4;
  p.ep = 2;
  p.zero_stage = 1;
  p.grad_sync = GradSync::OverlapGradReduce;
  p.bucket_size = Bytes(1);  // a bucket per produced gradient
  auto experts = [&](bool overlap) {
    p.overlap_param_gather = overlap;
    const TaskGraph g = plan_training(m, w, p, pred);
    const auto& tasks = g.tasks(0);
    std::map<std::string, std::pair<std::int64_t, std::string>> out;  // gather -> bytes, first waiting task
    for (const Task& t : tasks) {
      if (t.name.starts_with("dp.expert_param.all-gather")) out[std::string(t.name)].first = t.bytes.count();
      for (TaskIndex d : t.deps) {
        const std::string dn(tasks[static_cast<std::size_t>(d)].name);
        if (dn.starts_with("dp.expert_param") && out[dn].second.empty()) out[dn].second = t.name;
      }
    }
    return out;
  };
  const auto after_step = experts(false);
  const auto in_forward = experts(true);
  ASSERT_EQ(in_forward.size(), 2U);
  ASSERT_EQ(after_step.size(), 2U);
  // bucket000 holds layer 3's experts (the backward's first), bucket001 layer 1's.
  EXPECT_TRUE(in_forward.at("dp.expert_param.all-gather.bucket000").second.starts_with("mb0.layer003."));
  EXPECT_TRUE(in_forward.at("dp.expert_param.all-gather.bucket001").second.starts_with("mb0.layer001."));
  for (const auto& [name, v] : in_forward) {
    EXPECT_EQ(v.first, after_step.at(name).first) << name;
    EXPECT_EQ(after_step.at(name).second, "");  // nothing waits for them after the step
  }
}

// --- Optimizer and model FLOPs -----------------------------------------------------

TEST(Passes, OptimizerUpdatesItsZeroShard) {
  const TransformerConfig m = tiny();
  const Workload w = work();
  ParallelPlan p;
  p.dp = 4;
  p.pp = 2;
  const StagePartition part = partition_layers(m.layers, p.pp, 1);
  const PlanSummary s = estimate_memory(m, w, p, Bytes());
  for (int stage = 0; stage < 2; ++stage) {
    const std::int64_t held = s.params_per_stage[static_cast<std::size_t>(stage)];
    p.zero_stage = 0;
    EXPECT_EQ(optimizer_shard_params(m, w, p, part, stage), held);
    p.zero_stage = 1;
    EXPECT_EQ(optimizer_shard_params(m, w, p, part, stage), (held + 3) / 4);
  }
}

TEST(Passes, ModelFlopsDoNotDependOnThePartition) {
  const TransformerConfig m = tiny();
  const Workload w = work();
  ParallelPlan p;
  const double one_stage = model_flops(m, w, p, partition_layers(m.layers, 1, 1), 4);
  p.pp = 4;
  EXPECT_DOUBLE_EQ(model_flops(m, w, p, partition_layers(m.layers, 4, 1), 4), one_stage);
  // Linear in micro-batches and data-parallel replicas.
  p.dp = 2;
  EXPECT_DOUBLE_EQ(model_flops(m, w, p, partition_layers(m.layers, 4, 1), 2), one_stage);
}
