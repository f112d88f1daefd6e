// Mixture of experts with expert parallelism: the model (presets, parameter
// counts), the planner's all-to-alls and gradient groups, the memory model,
// MFU's model FLOPs and, executed with zero-cost communication, the compute
// time of MoE layers. Every expected number is worked out by hand in the
// comments.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tessera/engine/executor.hpp"
#include "tessera/engine/zero_cost_network.hpp"
#include "tessera/error.hpp"
#include "tessera/parallelism/plan.hpp"
#include "test_predictors.hpp"

using namespace tessera;
using namespace tessera::parallelism;
using node_model::DType;

namespace {

/// 2 layers, hidden 64, 4 heads (d = 16), ffn 256, vocab 97; every layer an
/// MoE layer of 4 experts of 96 columns, 2 per token.
TransformerConfig tiny_moe() {
  TransformerConfig m{"tiny-moe", 2, 64, 4, 256, 97};
  m.moe.experts = 4;
  m.moe.top_k = 2;
  m.moe.expert_ffn_hidden = 96;
  return m;
}
/// 32 tokens per micro-batch, FP32 (4 bytes), Megatron's kernels.
Workload make_work() {
  Workload w;
  w.micro_batch = 1;
  w.seq_len = 32;
  w.dtype = DType::FP32;
  return w;
}
const Workload kWork = make_work();

ParallelPlan data_parallel(int dp, int ep, std::int64_t global_batch) {
  ParallelPlan p;
  p.dp = dp;
  p.ep = ep;
  p.global_batch = global_batch;
  return p;
}

std::string error_of(const TransformerConfig& m, const ParallelPlan& p, int gpus = 0) {
  try {
    p.validate(m, kWork, gpus);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

struct Executed {
  Time makespan;
  Time busy;  ///< compute time of rank 0
};
/// `alike`: every rank computes the same (no pipeline).
Executed execute_zero_cost(const TaskGraph& g, bool alike = true) {
  engine::DiscreteEventLoop loop;
  engine::ZeroCostNetwork net(loop);
  const auto r = engine::execute(g, loop, net);
  if (alike) {
    for (const auto& rr : r.ranks) EXPECT_EQ(rr.compute_busy, r.ranks[0].compute_busy);
  }
  return {r.makespan, r.ranks[0].compute_busy};
}

double executed_flops(const TaskGraph& g) {
  double f = 0;
  for (int r = 0; r < g.num_ranks(); ++r) {
    for (const auto& t : g.tasks(r)) f += t.flops.count();
  }
  return f;
}

}  // namespace

TEST(Moe, PresetsMatchThePublishedParameterCounts) {
  // Mixtral 8x7B (no biases, RMSNorm), per layer: QKV 4096 x (4096 + 2 x 8
  // x 128) = 25,165,824; projection 4096^2 = 16,777,216; two norms 8,192;
  // router 4096 x 8 = 32,768; 8 experts x 3 x 4096 x 14336 = 1,409,286,144:
  // 1,451,270,144. x 32 layers = 46,440,644,608, + embedding and untied LM
  // head 2 x 32000 x 4096 = 262,144,000 + final norm 4,096: 46,702,792,704
  // (the checkpoint's count; Mistral AI: 46.7B).
  const TransformerConfig& mixtral = model_preset("mixtral-8x7b");
  EXPECT_EQ(mixtral.total_params(4096), 46'702'792'704);
  EXPECT_EQ(mixtral.moe_layers_in(0, 32), 32);
  // Per rank with ep = 8: one expert, 3 x 4096 x 14336 = 176,160,768.
  EXPECT_EQ(mixtral.moe_layer_expert_params_per_rank(1, 8), 176'160'768);
  // Active per token (top 2 of 8): 6 experts fewer in each of the 32 layers,
  // 46,702,792,704 - 32 x 6 x 176,160,768 = 12,879,925,248 (Mistral AI: 12.9B).
  EXPECT_EQ(mixtral.active_params(4096), 12'879'925'248);
  // DeepSeekMoE 16B: the first layer dense (first_k_dense_replace 1), 27 MoE
  // layers of 64 routed experts (1408 columns) and 2 shared ones. MoE layer:
  // attention 2048 x 6144 + 2048^2 = 16,777,216; norms 4,096; router 2048 x
  // 64 = 131,072; shared 3 x 2048 x 2816 = 17,301,504; routed 64 x 3 x 2048
  // x 1408 = 553,648,128: 587,862,016, x 27 = 15,872,274,432. Dense layer
  // (params_per_layer: a gated MLP of 10944): attention 16,777,216 + norms
  // 4,096 + fc1 2048 x 21888 = 44,826,624 + fc2 10944 x 2048 = 22,413,312:
  // 84,021,248. Embedding + untied head 2 x 102400 x 2048 = 419,430,400,
  // final norm 2,048: 16,375,728,128 in all (DeepSeek: 16.4B).
  const TransformerConfig& ds = model_preset("deepseek-moe-16b");
  EXPECT_FALSE(ds.is_moe_layer(0));
  EXPECT_TRUE(ds.is_moe_layer(1));
  EXPECT_EQ(ds.moe_layers_in(0, 28), 27);
  EXPECT_EQ(ds.moe_layer_dense_params_per_rank(1) + ds.moe_layer_expert_params_per_rank(1, 1), 587'862'016);
  EXPECT_EQ(ds.params_per_layer(), 84'021'248);
  EXPECT_EQ(ds.total_params(4096), 16'375'728'128);
  // Active: 27 layers x (64 - 6) routed experts of 3 x 2048 x 1408 =
  // 8,650,752 fewer: 16,375,728,128 - 13,547,077,632 = 2,828,650,496
  // (DeepSeek: 2.8B).
  EXPECT_EQ(ds.active_params(4096), 2'828'650'496);
  EXPECT_EQ(model_preset("gpt2-large").active_params(1024), model_preset("gpt2-large").total_params(1024));
}

TEST(Moe, MoeEveryAndFirstDenseLayersPickTheLayers) {
  TransformerConfig m = tiny_moe();
  m.layers = 8;
  m.moe.moe_every = 2;  // Megatron's --moe-layer-freq 2: layers 0, 2, 4, 6
  std::string moe;
  for (std::int64_t l = 0; l < 8; ++l) moe += m.is_moe_layer(l) ? 'M' : 'd';
  EXPECT_EQ(moe, "MdMdMdMd");
  m.moe.first_dense_layers = 1;  // layers 1, 3, 5, 7
  moe.clear();
  for (std::int64_t l = 0; l < 8; ++l) moe += m.is_moe_layer(l) ? 'M' : 'd';
  EXPECT_EQ(moe, "dMdMdMdM");
  EXPECT_EQ(m.moe_layers_in(2, 4), 2);  // layers 2..5: 3 and 5
}

TEST(Moe, AllToAllBytesPerRankMatchTheFormula) {
  // Task::bytes of an all-to-all is the rank's whole send buffer: its tokens
  // x top_k x capacity x imbalance, x hidden x dtype bytes. ep = 2, 32
  // tokens, top_k 2, 4 experts: ceil(2 x 32 x 2 / 4) = 32 tokens per expert,
  // 2 experts per rank: 64 tokens (= 32 x 2), x 64 x 4 bytes = 16,384.
  const TransformerConfig m = tiny_moe();
  const Sharding ep2{1, false, 2};
  EXPECT_EQ(expert_tokens_per_rank(m, kWork, ep2), 64);
  EXPECT_EQ(expert_all_to_all_bytes(m, kWork, ep2), Bytes(16'384));
  // Capacity factor 1.25: ceil(32 x 1.25) = 40 per expert, 80 tokens: 20,480 bytes.
  TransformerConfig padded = m;
  padded.moe.capacity_factor = 1.25;
  EXPECT_EQ(expert_all_to_all_bytes(padded, kWork, ep2), Bytes(20'480));
  // An imbalance up to the capacity is in its padding: the same 20,480.
  padded.moe.imbalance = 1.1;
  EXPECT_EQ(expert_all_to_all_bytes(padded, kWork, ep2), Bytes(20'480));
  // Dropless (capacity 1), imbalance 1.1: ceil(32 x 1.1 = 35.2) = 36 per
  // expert, 72 tokens: 18,432 bytes.
  TransformerConfig skewed = m;
  skewed.moe.imbalance = 1.1;
  EXPECT_EQ(expert_all_to_all_bytes(skewed, kWork, ep2), Bytes(18'432));
  // With ep 1 a rank computes every expert for its own tokens, t x top_k =
  // 64 rows whatever the routing: no imbalance (helper 90: ep 1 was charged
  // it as ep 8 was); a capacity's padding stays (ceil(16 x 1.25) = 20 per
  // expert, 80 rows).
  const Sharding ep1{1, false, 1};
  EXPECT_EQ(expert_tokens_per_rank(m, kWork, ep1), 64);
  EXPECT_EQ(expert_tokens_per_rank(skewed, kWork, ep1), 64);
  EXPECT_EQ(expert_tokens_per_rank(padded, kWork, ep1), 80);
  // tp 2 (with SP): each tensor-parallel rank dispatches its own 16 tokens:
  // ceil(2 x 16 x 2 / 4) = 16 per expert, 32 tokens, 8,192 bytes, half of
  // tp 1's; its experts compute the group's 2 x 32 = 64 gathered tokens.
  const Sharding tp2{2, true, 2};
  EXPECT_EQ(expert_dispatch_tokens_per_rank(m, kWork, tp2), 32);
  EXPECT_EQ(expert_tokens_per_rank(m, kWork, tp2), 64);
  EXPECT_EQ(expert_all_to_all_bytes(m, kWork, tp2), Bytes(8'192));

  // In the graph: per MoE layer and micro-batch, a dispatch and a combine in
  // the forward and both again in the backward, each 16,384 bytes, in the
  // expert-parallel group; 2 layers x 2 micro-batches x 4 = 16 per rank.
  test_support::LayersOnlyPredictor pred(m.vocab);
  const TaskGraph g = plan_training(m, kWork, data_parallel(4, 2, 8), pred);
  g.validate();
  std::map<std::string, int> names;
  for (int r = 0; r < g.num_ranks(); ++r) {
    int n = 0;
    for (const Task& t : g.tasks(r)) {
      if (t.kind != TaskKind::Collective || t.collective != CollectiveKind::AllToAll) continue;
      ++n;
      EXPECT_EQ(t.bytes, Bytes(16'384)) << t.name;
      // ep = 2 consecutive dp ranks: {0, 1} and {2, 3}.
      const auto& members = g.groups[static_cast<std::size_t>(g.group_of(r, t.group))].ranks;
      EXPECT_EQ(members, (std::vector<int>{r / 2 * 2, r / 2 * 2 + 1}));
      if (r == 0)
        ++names[std::string(t.name.substr(t.name.find(".fwd.") != std::string::npos ? t.name.find(".fwd.")
                                                                                    : t.name.find(".bwd.")))];
    }
    EXPECT_EQ(n, 16) << "rank " << r;
  }
  EXPECT_EQ(names[".fwd.ep.dispatch.all-to-all"], 4);
  EXPECT_EQ(names[".fwd.ep.combine.all-to-all"], 4);
  EXPECT_EQ(names[".bwd.ep.dispatch.all-to-all"], 4);
  EXPECT_EQ(names[".bwd.ep.combine.all-to-all"], 4);
}

TEST(Moe, TensorParallelRanksDispatchTheirOwnShardAndGatherForTheExperts) {
  // tp 2 with SP, ep 2, dp 4 (8 ranks): each rank routes its own 16 of the
  // 32 tokens and sends 32 routed tokens x 64 x 4 = 8,192 bytes per
  // all-to-all (half of tp 1's 16,384: AllToAllBytesPerRankMatchTheFormula);
  // the tensor-parallel group all-gathers the 64 tokens its experts compute,
  // 64 x 64 x 4 = 16,384 bytes gathered, and reduce-scatters their outputs,
  // once each way per MoE layer and micro-batch (2 layers x 2 micro-batches
  // x 2 = 8 of each per rank), beside the attention block's gathers of the
  // 32 x 64 x 4 = 8,192-byte activations.
  const TransformerConfig m = tiny_moe();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p = data_parallel(4, 2, 8);
  p.tp = 2;
  p.sequence_parallel = true;
  const TaskGraph g = plan_training(m, kWork, p, pred);
  g.validate();
  for (int r = 0; r < g.num_ranks(); ++r) {
    std::map<std::pair<CollectiveKind, std::int64_t>, int> n;
    for (const Task& t : g.tasks(r)) {
      if (t.kind == TaskKind::Collective && t.name.find(".tp.") != std::string::npos) {
        ++n[{t.collective, t.bytes.count()}];
      }
      if (t.kind == TaskKind::Collective && t.collective == CollectiveKind::AllToAll) {
        EXPECT_EQ(t.bytes, Bytes(8'192)) << t.name;
      }
    }
    EXPECT_EQ((n[{CollectiveKind::AllGather, 16'384}]), 8) << "rank " << r;
    EXPECT_EQ((n[{CollectiveKind::ReduceScatter, 16'384}]), 8) << "rank " << r;
  }
}

TEST(Moe, TheDispatchWaitsForTheHost) {
  // Megatron-Core's dropless dispatcher copies the tokens per expert to the
  // host after the router: the compute task before each forward dispatch is
  // a host sync (Task::host_sync), once per MoE layer and micro-batch (2 x 2
  // per rank), with expert parallelism or without (ep 1: before the experts);
  // with full recomputation the recomputed forward syncs too (8); padded to
  // a capacity (capacity_factor > 1) the sizes are known: none.
  test_support::LayersOnlyPredictor pred(tiny_moe().vocab);
  auto count = [&](const TransformerConfig& m, const ParallelPlan& p) {
    const TaskGraph g = plan_training(m, kWork, p, pred);
    const auto& tasks = g.tasks(0);
    int syncs = 0;
    for (const Task& t : tasks) {
      if (t.host_sync && t.name.find("fwd") != std::string_view::npos) ++syncs;
      const bool checked = m.moe.shared_experts == 0 && m.moe.capacity_factor <= 1.0;
      if (t.name.find(".fwd.ep.dispatch") == std::string_view::npos || !checked) continue;
      // Its dependency on the last compute task before it: that task syncs.
      bool after_sync = false;
      for (const TaskIndex d : t.deps)
        after_sync = after_sync || tasks[static_cast<std::size_t>(d)].host_sync;
      EXPECT_TRUE(after_sync) << t.name;
    }
    return syncs;
  };
  const TransformerConfig m = tiny_moe();
  EXPECT_EQ(count(m, data_parallel(4, 2, 8)), 4);
  EXPECT_EQ(count(m, data_parallel(4, 1, 8)), 4);
  ParallelPlan full = data_parallel(4, 2, 8);
  full.recompute = Recompute::Full;
  EXPECT_EQ(count(m, full), 8);
  TransformerConfig padded = m;
  padded.moe.capacity_factor = 1.25;
  EXPECT_EQ(count(padded, data_parallel(4, 2, 8)), 0);
  // tp 2 with shared experts: the sync ends the router's piece, before the
  // shared experts' gather.
  TransformerConfig shared = m;
  shared.moe.shared_experts = 1;
  ParallelPlan tp2 = data_parallel(4, 2, 8);
  tp2.tp = 2;
  tp2.sequence_parallel = true;
  const TaskGraph g = plan_training(shared, kWork, tp2, pred);
  const auto& tasks = g.tasks(0);
  for (std::size_t i = 0; i + 1 < tasks.size(); ++i) {
    if (!tasks[i].host_sync || tasks[i].name.find("fwd") == std::string_view::npos) continue;
    EXPECT_NE(tasks[i + 1].name.find("fwd.tp.all-gather"), std::string_view::npos) << tasks[i + 1].name;
  }
  EXPECT_EQ(count(shared, tp2), 4);
}

TEST(Moe, ExpertGroupsLiveInsideTheDataParallelRanksOfOneTensorIndex) {
  // tp = 2, dp = 4, ep = 2: rank = dp x 2 + tp. Rank 5 (tp 1, dp 2): its
  // expert-parallel group is dp 2 and 3 at tp 1 = ranks {5, 7}; its experts'
  // gradients are reduced with dp 0 (same experts, dp % ep = 0) = {1, 5}.
  const TransformerConfig m = tiny_moe();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p = data_parallel(4, 2, 8);
  p.tp = 2;
  p.sequence_parallel = true;  // an MoE model's tp needs it
  const TaskGraph g = plan_training(m, kWork, p, pred);
  g.validate();
  std::set<std::vector<int>> a2a_groups, expert_grad_groups, dense_grad_groups;
  for (const Task& t : g.tasks(5)) {
    if (t.kind != TaskKind::Collective) continue;
    const auto& members = g.groups[static_cast<std::size_t>(g.group_of(5, t.group))].ranks;
    if (t.collective == CollectiveKind::AllToAll) a2a_groups.insert(members);
    if (t.name.find("dp.expert_grad") == 0) expert_grad_groups.insert(members);
    if (t.name.find("dp.grad") == 0) dense_grad_groups.insert(members);
  }
  EXPECT_EQ(a2a_groups, (std::set<std::vector<int>>{{5, 7}}));
  EXPECT_EQ(expert_grad_groups, (std::set<std::vector<int>>{{1, 5}}));
  EXPECT_EQ(dense_grad_groups, (std::set<std::vector<int>>{{1, 3, 5, 7}}));
}

TEST(Moe, ExpertGroupsFollowTheRankLayout) {
  // As above under layout dp-tp-pp: rank = tp x 4 + dp. Rank 6 (tp 1, dp 2):
  // expert-parallel group dp 2 and 3 at tp 1 = {6, 7}; its experts'
  // gradients with dp 0 = {4, 6}; the rest over dp 0..3 at tp 1.
  const TransformerConfig m = tiny_moe();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p = data_parallel(4, 2, 8);
  p.tp = 2;
  p.sequence_parallel = true;  // an MoE model's tp needs it
  p.layout = parse_rank_layout("dp-tp-pp");
  const TaskGraph g = plan_training(m, kWork, p, pred);
  g.validate();
  std::set<std::vector<int>> a2a_groups, expert_grad_groups, dense_grad_groups;
  for (const Task& t : g.tasks(6)) {
    if (t.kind != TaskKind::Collective) continue;
    const auto& members = g.groups[static_cast<std::size_t>(g.group_of(6, t.group))].ranks;
    if (t.collective == CollectiveKind::AllToAll) a2a_groups.insert(members);
    if (t.name.find("dp.expert_grad") == 0) expert_grad_groups.insert(members);
    if (t.name.find("dp.grad") == 0) dense_grad_groups.insert(members);
  }
  EXPECT_EQ(a2a_groups, (std::set<std::vector<int>>{{6, 7}}));
  EXPECT_EQ(expert_grad_groups, (std::set<std::vector<int>>{{4, 6}}));
  EXPECT_EQ(dense_grad_groups, (std::set<std::vector<int>>{{4, 5, 6, 7}}));
}

TEST(Moe, EveryRankLayoutRunsToTheSameMakespanOnAFreeNetwork) {
  // The layout only renames ranks: on a zero-cost network every order of
  // tp, dp and pp finishes at the default's time.
  TransformerConfig m = tiny_moe();
  m.layers = 4;
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p = data_parallel(4, 2, 16);
  p.tp = 2;
  p.sequence_parallel = true;  // an MoE model's tp needs it
  p.pp = 2;
  const Time reference = execute_zero_cost(plan_training(m, kWork, p, pred), false).makespan;
  EXPECT_GT(reference, Time::zero());
  for (const char* name : {"tp-pp-dp", "dp-tp-pp", "dp-pp-tp", "pp-tp-dp", "pp-dp-tp"}) {
    p.layout = parse_rank_layout(name);
    const TaskGraph g = plan_training(m, kWork, p, pred);
    ASSERT_NO_THROW(g.validate()) << name;
    EXPECT_EQ(execute_zero_cost(g, false).makespan, reference) << name;
  }
}

TEST(Moe, ExpertGradientsAreReducedOverDpOverEpRanksTheRestOverDp) {
  // dp = 4, ep = 2, Megatron's after-backward sync, FP32 gradients (4 bytes).
  // Experts per rank and layer: 2 x (64 x 96 + 96 x 64) = 24,576 parameters,
  // x 2 layers x 4 bytes = 196,608 bytes, reduced over 2 ranks. The rest:
  // per MoE layer (attention 64 x 192 + 192 + 64 x 64 + 64 = 16,640, norms
  // 256, router 256: 17,152) x 2 = 34,304, + the word embedding (vocabulary
  // padded to 128) 128 x 64 = 8,192, the position table 32 x 64 = 2,048 and
  // the final norm 128 (tied LM head, one stage): 44,672 parameters =
  // 178,688 bytes, reduced over 4 ranks.
  const TransformerConfig m = tiny_moe();
  test_support::LayersOnlyPredictor pred(m.vocab);
  const TaskGraph g = plan_training(m, kWork, data_parallel(4, 2, 8), pred);
  std::int64_t expert = 0, dense = 0;
  for (const Task& t : g.tasks(0)) {
    if (t.kind != TaskKind::Collective) continue;
    const auto size = g.groups[static_cast<std::size_t>(g.group_of(0, t.group))].ranks.size();
    if (t.name.find("dp.expert_grad.all-reduce") == 0) {
      expert += t.bytes.count();
      EXPECT_EQ(size, 2U);
    }
    if (t.name.find("dp.grad.all-reduce") == 0) {
      dense += t.bytes.count();
      EXPECT_EQ(size, 4U);
    }
  }
  EXPECT_EQ(expert, 196'608);
  EXPECT_EQ(dense, 178'688);
  // ep = 1: one all-reduce stream over the 4 ranks, experts (2 x 49,152 x 4
  // bytes = 393,216) included; no all-to-all.
  const TaskGraph g1 = plan_training(m, kWork, data_parallel(4, 1, 8), pred);
  std::int64_t all = 0;
  for (const Task& t : g1.tasks(0)) {
    EXPECT_NE(t.collective, CollectiveKind::AllToAll) << t.name;
    if (t.kind == TaskKind::Collective && t.name.find("dp.grad.all-reduce") == 0) all += t.bytes.count();
  }
  EXPECT_EQ(all, 178'688 + 393'216);
}

TEST(Moe, ZeroCostComputeOfAnMoeLayerIsItsActivatedExpertsFlops) {
  // LayersOnlyPredictor: a GEMM takes 1 ps per FLOP, everything else nothing;
  // backward = 2 x forward. Forward GEMM FLOPs of one MoE layer on one rank
  // (t = 32 tokens, h = 64, 4 heads of 16, ep = 2: 2 experts of 32 tokens):
  //   QKV 2 x 32 x 64 x 192 = 786,432; scores and context 2 x (2 x 4 x 32 x
  //   32 x 16) = 262,144; projection 2 x 32 x 64 x 64 = 262,144;
  //   router 2 x 32 x 64 x 4 = 16,384;
  //   experts fc1 and fc2 2 x (2 x 2 x 32 x 64 x 96) = 1,572,864
  //   (= top_k 2 x a dense 96-column MLP on the 32 tokens);
  //   F = 2,899,968 ps. 2 layers, 2 micro-batches per replica (global batch
  //   8, dp 4), F + 2F each: 2 x 2 x 3 x 2,899,968 = 34,799,616 ps.
  const TransformerConfig m = tiny_moe();
  test_support::LayersOnlyPredictor pred(m.vocab);
  const auto planned = plan_training_detailed(m, kWork, data_parallel(4, 2, 8), pred);
  const Executed e = execute_zero_cost(planned.graph);
  EXPECT_EQ(e.busy, Time::from_ps(34'799'616));
  EXPECT_EQ(e.makespan, e.busy);  // no pipeline, communication free
  // MFU's model FLOPs: the GEMMs that ran (no padding, no recomputation),
  // the 4 ranks' 34,799,616 each, and the LM head's, which this predictor
  // does not time: 3 GEMMs of 2 x 32 x 64 x 128 (the vocabulary of 97
  // padded to 128) = 1,572,864 per micro-batch, 2 micro-batches per rank:
  // 4 x (34,799,616 + 3,145,728) = 151,781,376.
  EXPECT_DOUBLE_EQ(planned.summary.model_flops, 151'781'376);
  EXPECT_GT(executed_flops(planned.graph), planned.summary.model_flops);  // norms, activations, accumulation
  // ep = 1: each rank runs all 4 experts on 16 tokens each: the same FLOPs.
  const auto ep1 = plan_training_detailed(m, kWork, data_parallel(4, 1, 8), pred);
  EXPECT_EQ(execute_zero_cost(ep1.graph).busy, Time::from_ps(34'799'616));
  EXPECT_DOUBLE_EQ(ep1.summary.model_flops, planned.summary.model_flops);
}

TEST(Moe, CapacityPaddingCostsTimeButNotModelFlops) {
  // Capacity factor 1.5: ceil(32 x 1.5) = 48 tokens per expert: the expert
  // GEMMs take 1.5 x 1,572,864 = 2,359,296 ps, F = 3,686,400 ps, the rank
  // 2 x 2 x 3 x 3,686,400 = 44,236,800 ps. MFU's model FLOPs stay those of
  // the top_k routed tokens.
  const TransformerConfig m = tiny_moe();
  TransformerConfig padded = m;
  padded.moe.capacity_factor = 1.5;
  test_support::LayersOnlyPredictor pred(m.vocab);
  const auto base = plan_training_detailed(m, kWork, data_parallel(4, 2, 8), pred);
  const auto pad = plan_training_detailed(padded, kWork, data_parallel(4, 2, 8), pred);
  EXPECT_EQ(execute_zero_cost(pad.graph).busy, Time::from_ps(44'236'800));
  EXPECT_NEAR(pad.summary.model_flops, base.summary.model_flops, 1e-6 * base.summary.model_flops);
  EXPECT_GT(executed_flops(pad.graph), pad.summary.model_flops * 1.2);
}

TEST(Moe, OneExpertOfTheDenseWidthComputesTheDenseMlpPlusTheRouter) {
  // experts = top_k = 1, expert_ffn = ffn: the grouped GEMMs do the dense
  // MLP's work; the MoE layer adds only the router, 2 x 32 x 64 x 1 = 4,096
  // ps per forward. 2 layers x 2 micro-batches x 3 x 4,096 = 49,152 ps.
  TransformerConfig dense{"dense", 2, 64, 4, 256, 97};
  TransformerConfig one = dense;
  one.moe.experts = 1;
  one.moe.top_k = 1;
  test_support::LayersOnlyPredictor pred(dense.vocab);
  const Time d = execute_zero_cost(plan_training(dense, kWork, data_parallel(2, 1, 4), pred)).busy;
  const Time o = execute_zero_cost(plan_training(one, kWork, data_parallel(2, 1, 4), pred)).busy;
  EXPECT_EQ(o - d, Time::from_ps(49'152));
}

TEST(Moe, MoeFieldsOfADenseModelChangeNothing) {
  // experts = 0 is a dense model whatever the other MoE fields say: the same
  // task graph, task by task, and the same memory estimate.
  TransformerConfig dense{"dense", 4, 64, 4, 256, 97};
  TransformerConfig fields = dense;
  fields.moe.top_k = 2;
  fields.moe.moe_every = 2;
  fields.moe.capacity_factor = 2.0;
  test_support::LayersOnlyPredictor pred(dense.vocab);
  ParallelPlan p = data_parallel(2, 1, 8);
  p.tp = 2;
  p.pp = 2;
  const auto a = plan_training_detailed(dense, kWork, p, pred);
  const auto b = plan_training_detailed(fields, kWork, p, pred);
  ASSERT_EQ(a.graph.num_ranks(), b.graph.num_ranks());
  ASSERT_EQ(a.graph.groups.size(), b.graph.groups.size());
  for (int r = 0; r < a.graph.num_ranks(); ++r) {
    const auto& ta = a.graph.tasks(r);
    const auto& tb = b.graph.tasks(r);
    ASSERT_EQ(ta.size(), tb.size());
    for (std::size_t i = 0; i < ta.size(); ++i) {
      EXPECT_EQ(ta[i].name, tb[i].name);
      EXPECT_EQ(ta[i].duration, tb[i].duration);
      EXPECT_EQ(ta[i].bytes, tb[i].bytes);
      EXPECT_EQ(ta[i].deps, tb[i].deps);
    }
  }
  EXPECT_EQ(a.summary.model_flops, b.summary.model_flops);
  EXPECT_EQ(a.summary.memory_per_stage[0].total(), b.summary.memory_per_stage[0].total());
}

TEST(Moe, ExpertStatesAreDividedByEpAndTheAllToAllBuffersAdded) {
  // Experts per rank and layer: ep = 1: 4 x 12,288 = 49,152; ep = 2: 24,576.
  // 2 layers, FP32: weights 4 bytes, gradients 4, Adam 8 per parameter. So
  // ep = 2 holds 2 x 24,576 = 49,152 fewer parameters: 196,608 bytes fewer
  // weights and gradients, 393,216 fewer optimizer bytes; its workspace adds
  // the all-to-all's send and receive buffers, 2 x 16,384 = 32,768 bytes.
  const TransformerConfig m = tiny_moe();
  const auto one = estimate_memory(m, kWork, data_parallel(4, 1, 8), Bytes(0)).memory_per_stage[0];
  const auto two = estimate_memory(m, kWork, data_parallel(4, 2, 8), Bytes(0)).memory_per_stage[0];
  EXPECT_EQ(one.weights - two.weights, Bytes(196'608));
  EXPECT_EQ(one.gradients - two.gradients, Bytes(196'608));
  EXPECT_EQ(one.optimizer_states - two.optimizer_states, Bytes(393'216));
  EXPECT_EQ(two.workspace - one.workspace, Bytes(32'768));
  EXPECT_EQ(one.activations, two.activations);  // 64 routed tokens per rank either way
  // ZeRO-1: the experts' optimizer states are sharded over dp / ep = 2 ranks,
  // the rest over 4. Experts 2 x 24,576 x 8 / 2 = 196,608 bytes; the rest
  // 44,672 x 8 / 4 = 89,344 bytes.
  ParallelPlan z = data_parallel(4, 2, 8);
  z.zero_stage = 1;
  EXPECT_EQ(estimate_memory(m, kWork, z, Bytes(0)).memory_per_stage[0].optimizer_states,
            Bytes(196'608 + 89'344));
}

TEST(Moe, BadInputIsOneLineNamingTheKeysAndNumbers) {
  const TransformerConfig m = tiny_moe();
  EXPECT_EQ(
      error_of(m, data_parallel(4, 3, 0)),
      "ep (3) must divide dp (4): expert-parallel groups are carved out of the data-parallel ranks (experts "
      "across tensor-parallel ranks are not supported)");
  EXPECT_EQ(error_of(m, data_parallel(8, 8, 0)), "ep (8) must divide the model's experts (4)");
  TransformerConfig k = m;
  k.moe.top_k = 5;
  EXPECT_EQ(error_of(k, data_parallel(1, 1, 0)),
            "model 'tiny-moe': moe.top_k (5) must not exceed moe.experts (4)");
  TransformerConfig dense{"dense", 2, 64, 4, 256, 97};
  EXPECT_EQ(error_of(dense, data_parallel(2, 2, 0)),
            "ep (2) needs a mixture-of-experts model (model.moe.experts)");
  TransformerConfig f = m;
  f.moe.expert_ffn_hidden = 90;
  ParallelPlan tp4 = data_parallel(1, 1, 0);
  tp4.tp = 4;
  EXPECT_EQ(error_of(f, tp4), "tp (4) must divide the model's expert_ffn_hidden (90)");
  TransformerConfig c = m;
  c.moe.capacity_factor = 0.5;
  EXPECT_EQ(
      error_of(c, data_parallel(1, 1, 0)),
      "model 'tiny-moe': moe.capacity_factor must be at least 1 (got 0.5): below it an expert drops tokens, "
      "which the model does not represent (1: dropless)");
  c.moe.capacity_factor = 1.25;
  c.moe.imbalance = 1.5;
  EXPECT_EQ(
      error_of(c, data_parallel(1, 1, 0)),
      "model 'tiny-moe': moe.imbalance (1.5) exceeds moe.capacity_factor (1.25): the busiest expert would "
      "drop the tokens over its capacity, which the model does not represent (an imbalance up to the "
      "capacity is in its padding)");
  // Megatron-Core runs an MoE model's tensor parallelism with sequence parallelism only.
  ParallelPlan tp2 = data_parallel(1, 1, 0);
  tp2.tp = 2;
  EXPECT_EQ(
      error_of(m, tp2),
      "tp (2) of a mixture-of-experts model needs parallelism.sequence_parallel: true, as Megatron-Core "
      "requires (each tensor-parallel rank routes its own sequence shard's tokens)");
  tp2.sequence_parallel = true;
  EXPECT_EQ(error_of(m, tp2), "");
}

TEST(Moe, EveryCombinationPlansValidatesAndRuns) {
  // tp, sp, pp (with interleaving), ep, recomputation, ZeRO-1 and PyTorch
  // DDP's overlapped sync together: every graph validates and finishes.
  TransformerConfig m = tiny_moe();
  m.layers = 4;
  m.moe.moe_every = 2;
  m.moe.shared_experts = 1;
  test_support::LayersOnlyPredictor pred(m.vocab);
  for (int tp : {1, 2}) {
    for (bool sp : {false, true}) {
      if (tp > 1 && !sp) continue;  // refused (BadInputIsOneLineNamingTheKeysAndNumbers)
      for (int pp : {1, 2}) {
        for (auto rc : {Recompute::None, Recompute::Full}) {
          ParallelPlan p = data_parallel(4, 2, 16);
          p.tp = tp;
          p.sequence_parallel = sp;
          p.pp = pp;
          p.recompute = rc;
          p.zero_stage = 1;
          p.grad_sync = sp ? GradSync::Overlapped : GradSync::AfterBackward;
          if (pp == 2 && tp == 2) {
            p.virtual_stages = 2;
            p.schedule = Schedule::Interleaved1F1B;
          }
          const auto planned = plan_training_detailed(m, kWork, p, pred);
          ASSERT_NO_THROW(planned.graph.validate()) << "tp " << tp << " sp " << sp << " pp " << pp;
          const Executed e = execute_zero_cost(planned.graph, pp == 1);
          EXPECT_GT(e.makespan, Time::zero());
        }
      }
    }
  }
}

TEST(Moe, ZeroThreeGathersExpertsOverTheRanksHoldingThem) {
  // dp = 4, ep = 2, ZeRO-3, FP32 parameters, 2 micro-batches (4 F and B
  // steps). Before each unit of a step runs, a rank gathers its parameters
  // (ParamGathers): per layer, the dense 17,152 x 4 = 68,608 bytes over the
  // 4 data-parallel ranks and its experts' 24,576 x 4 = 98,304 bytes over the
  // 2 ranks holding the same experts; the embedding (128 padded rows x 64 +
  // 32 positions x 64 = 10,240 x 4 = 40,960 bytes) and the tied LM head
  // (8,192 + the final norm's 128 = 8,320 x 4 = 33,280 bytes) over the 4.
  // Weights held: dense 44,672 x 4 / 4 = 44,672 bytes + experts 196,608 / 2 =
  // 98,304, plus the two largest neighbouring units in full: both layers,
  // 2 x (17,152 + 24,576) x 4 = 333,824.
  const TransformerConfig m = tiny_moe();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p = data_parallel(4, 2, 8);
  p.zero_stage = 3;
  const auto planned = plan_training_detailed(m, kWork, p, pred);
  planned.graph.validate();
  std::map<std::string, int> count;
  for (const Task& t : planned.graph.tasks(0)) {
    if (t.kind != TaskKind::Collective || t.collective != CollectiveKind::AllGather) continue;
    const auto size =
        planned.graph.groups[static_cast<std::size_t>(planned.graph.group_of(0, t.group))].ranks.size();
    const bool expert = t.name.find("zero3.expert_param.all-gather") != std::string::npos;
    ASSERT_TRUE(expert || t.name.find("zero3.param.all-gather") != std::string::npos) << t.name;
    const bool layer = t.name.find(".layer") != std::string::npos;
    const std::string unit = expert                                            ? "expert"
                             : layer                                           ? "layer"
                             : t.name.find(".embedding.") != std::string::npos ? "embedding"
                                                                               : "lm_head";
    ++count[unit];
    const std::map<std::string, std::int64_t> bytes{
        {"expert", 98'304}, {"layer", 68'608}, {"embedding", 40'960}, {"lm_head", 33'280}};
    EXPECT_EQ(t.bytes, Bytes(bytes.at(unit))) << t.name;
    EXPECT_EQ(size, expert ? 2U : 4U) << t.name;
  }
  EXPECT_EQ(count["layer"], 8);  // 2 layers x 4 steps
  EXPECT_EQ(count["expert"], 8);
  EXPECT_EQ(count["embedding"], 4);
  EXPECT_EQ(count["lm_head"], 4);
  EXPECT_EQ(planned.summary.memory_per_stage[0].weights, Bytes(44'672 + 98'304 + 333'824));
  EXPECT_GT(execute_zero_cost(planned.graph).makespan, Time::zero());
}

TEST(Moe, ZeroBubbleSplitsAnMoeLayerIntoBAndWWithTheSameWork) {
  // Under zb-h1 / zb-h2 every MoE layer's backward runs as B (input
  // gradients, both all-to-alls) and a later W (weight gradients): with
  // zero-cost communication each rank computes exactly what 1f1b computes
  // (B + W = the fused backward), on tp 2 with SP, ep 2, pp 2.
  TransformerConfig m = tiny_moe();
  m.layers = 4;
  m.moe.moe_every = 2;
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p = data_parallel(4, 2, 16);
  p.tp = 2;
  p.sequence_parallel = true;
  p.pp = 2;
  auto busy = [&](Schedule s) {
    p.schedule = s;
    const TaskGraph g = plan_training(m, kWork, p, pred);
    g.validate();
    engine::DiscreteEventLoop loop;
    engine::ZeroCostNetwork net(loop);
    const auto r = engine::execute(g, loop, net);
    std::vector<Time> out;
    for (const auto& rr : r.ranks) out.push_back(rr.compute_busy);
    // B and W both hold the MoE layers' work: a2a in B only.
    int a2a_in_w = 0;
    for (const Task& t : g.tasks(0)) {
      if (t.collective == CollectiveKind::AllToAll && t.name.find("wgrad") != std::string::npos) ++a2a_in_w;
    }
    EXPECT_EQ(a2a_in_w, 0);
    return out;
  };
  const auto one_f_one_b = busy(Schedule::OneFOneB);
  EXPECT_EQ(busy(Schedule::ZeroBubbleH1), one_f_one_b);
  EXPECT_EQ(busy(Schedule::ZeroBubbleH2), one_f_one_b);
}

// FP8 training (Transformer Engine, plan.cpp "FP8 training's saved
// inputs"): tiny_moe with a shared expert, bf16 against fp8, tp 1, no SP,
// unfused attention. Per MoE layer FP8 saves 1 byte per element of qkv's
// input (sbh = 2,048) and proj's (2,048: the attention keeps no bf16 copy),
// the experts' fc1 inputs (64 routed tokens x 64 = 4,096) and fc2 inputs
// (64 x 96 = 6,144) and the shared expert's fc2 input (32 x 96 = 3,072), and
// keeps the shared expert's FP8 copy of its input (2,048) beside the
// router's bf16 one: 15,360 bytes less; 30,720 for the stage's 2 layers. A
// zero-bubble W keeps those inputs too: zb-h1 with full recomputation holds
// one layer's W share at its peak, 15,360 less. The cached FP8 weights and
// transposes, 2 bytes per weight: qkv 64 x 192 + proj 64 x 64 + the shared
// expert 2 x 64 x 96 + 4 experts x 12,288 = 77,824 per layer, 311,296 bytes
// for 2 layers; with ep 2 the rank's 2 experts: 53,248, 212,992 bytes.
TEST(Moe, Fp8KeepsTheExpertsInputsAndWeightsInFp8) {
  TransformerConfig m = tiny_moe();
  m.moe.shared_experts = 1;
  Workload bf16 = kWork;
  bf16.dtype = DType::BF16;
  Workload fp8 = bf16;
  fp8.profile.fp8 = true;
  ParallelPlan p = data_parallel(1, 1, 1);
  auto stage0 = [&](const Workload& w, const ParallelPlan& plan) {
    return estimate_memory(m, w, plan, Bytes(0)).memory_per_stage[0];
  };
  EXPECT_EQ(stage0(bf16, p).activations - stage0(fp8, p).activations, Bytes(30'720));
  EXPECT_EQ(stage0(bf16, p).fp8_weights, Bytes(0));
  EXPECT_EQ(stage0(fp8, p).fp8_weights, Bytes(311'296));
  ParallelPlan zb = p;
  zb.pp = 2;
  zb.schedule = Schedule::ZeroBubbleH1;
  zb.recompute = Recompute::Full;
  EXPECT_EQ(stage0(bf16, zb).activations - stage0(fp8, zb).activations, Bytes(15'360));
  EXPECT_EQ(stage0(fp8, zb).fp8_weights, Bytes(155'648));  // its one layer
  EXPECT_EQ(stage0(fp8, data_parallel(2, 2, 2)).fp8_weights, Bytes(212'992));
}

TEST(Moe, ZeroBubbleKeepsTheExpertsInputsAndOutputGradientsUntilW) {
  // pp 2, one micro-batch, full recomputation, zb-h1: F keeps each layer's
  // input, B recomputes and then keeps what W needs, so the peak is W's. Per
  // MoE layer (16-bit units, t = 1, no SP): the dense layer keeps 32 sbh =
  // 65,536, its MLP's share 20 sbh = 40,960; the MoE block keeps the router
  // input 2 sbh = 4,096 and output gradient 4 sb x 4 experts = 512, and per
  // routed token (64) 4h + 2 x 96 x 2 = 640: 40,960. 65,536 - 40,960 +
  // 45,568 = 70,144, x 2 for FP32 = 140,288 bytes per layer: stage 0's one
  // layer; the last stage's layer + the logits 32 x 128 x 4 = 16,384 + the
  // LM head's input sbh x 4 = 8,192: 164,864 bytes. (zb-h1 needs pp >= 2.)
  const TransformerConfig m = tiny_moe();
  ParallelPlan p = data_parallel(1, 1, 1);
  p.pp = 2;
  p.schedule = Schedule::ZeroBubbleH1;
  p.recompute = Recompute::Full;
  const auto stages = estimate_memory(m, kWork, p, Bytes(0)).memory_per_stage;
  EXPECT_EQ(stages[0].activations, Bytes(140'288));
  EXPECT_EQ(stages[1].activations, Bytes(164'864));
}
