// The general planner without the engine: graph structure, communication
// counts and sizes, the memory model and bad input.
#include "tessera/parallelism/plan.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <tuple>

#include "tessera/error.hpp"
#include "tessera/node_model/roofline.hpp"
#include "test_predictors.hpp"

using namespace tessera;
using namespace tessera::parallelism;
using node_model::DType;

namespace {

TransformerConfig tiny() { return TransformerConfig{"tiny", 8, 64, 4, 256, 97}; }
const Workload kWork{1, 32, DType::FP32};

struct Counts {
  std::map<std::string, int> by_kind;
  std::map<std::string, std::int64_t> bytes;
};

/// Collectives of `rank` whose name contains `needle`, by kind.
Counts count(const TaskGraph& g, int rank, const std::string& needle) {
  Counts c;
  for (const Task& t : g.tasks(rank)) {
    if (t.kind != TaskKind::Collective || t.name.find(needle) == std::string::npos) continue;
    const std::string k(to_string(t.collective));
    ++c.by_kind[k];
    c.bytes[k] = t.bytes.count();
  }
  return c;
}

std::string error_of(const TransformerConfig& m, const Workload& w, const ParallelPlan& p, int gpus) {
  try {
    p.validate(m, w, gpus);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// One micro-batch's largest tensor must be sizeable in int64 elements
// (2^56 at most): the score matrices (micro_batch x heads x seq_len^2,
// unless flash attention keeps none) and the widest activation (micro_batch
// x seq_len x max(hidden, ffn, vocab)). Past it the kernels' int64 products
// overflowed (undefined behaviour under UBSan) before any kernel refused.
TEST(Plan, TensorsPastTwoToTheFiftySixElementsAreRefusedByTheirKey) {
  const TransformerConfig m = tiny();  // hidden 64, 4 heads, ffn 256, vocab 97
  ParallelPlan p;
  // 2^27 tokens: 4 x 2^54 scores = 2^56, the most allowed.
  Workload w{1, std::int64_t{1} << 27, DType::FP32};
  EXPECT_EQ(error_of(m, w, p, 1), "");
  w.seq_len = (std::int64_t{1} << 27) + 1;
  EXPECT_EQ(error_of(m, w, p, 1)
                .rfind("seq_len (134217729) is too long: one micro-batch's attention scores hold "
                       "7.21e+16 elements (micro_batch x heads x seq_len^2 = 1 x 4 x 134217729^2)",
                       0),
            0U)
      << error_of(m, w, p, 1);
  EXPECT_THROW(p.validate(m, w, 1), OverflowError);
  // Flash attention keeps no scores: then the widest activation, 2^56 / 256
  // tokens of ffn 256, bounds it.
  w.flash_attention = true;
  EXPECT_EQ(error_of(m, w, p, 1), "");
  w.seq_len = std::int64_t{1} << 48;
  EXPECT_EQ(error_of(m, w, p, 1), "");
  w.seq_len = (std::int64_t{1} << 48) + 1;
  EXPECT_EQ(error_of(m, w, p, 1)
                .rfind("seq_len (281474976710657) is too long: one micro-batch's widest activation "
                       "holds 7.21e+16 elements (micro_batch x seq_len x ffn_hidden = 1 x "
                       "281474976710657 x 256)",
                       0),
            0U)
      << error_of(m, w, p, 1);
}

// The stage fullest for its GPU: with mixed GPUs the one with the most
// memory for its capacity (50 of 40 GiB is fuller than 60 of 80), else the
// most bytes; the first of equals.
// virtual_stages: auto: the fewest chunks per rank from 2 up that split
// each stage's layers evenly; 2 when none can (uneven: forecast, warned).
TEST(Plan, AutoVirtualStagesSplitTheLayersEvenly) {
  EXPECT_EQ(auto_virtual_stages(24, 8), 3);  // GPT-3 XL over 8 stages: 3 layers each
  EXPECT_EQ(auto_virtual_stages(80, 8), 2);
  EXPECT_EQ(auto_virtual_stages(96, 4), 2);
  EXPECT_EQ(auto_virtual_stages(35, 7), 5);
  EXPECT_EQ(auto_virtual_stages(49, 7), 7);
  EXPECT_EQ(auto_virtual_stages(24, 5), 2);  // 24 layers do not split over 5 stages
  EXPECT_EQ(auto_virtual_stages(8, 8), 2);   // one layer per stage: no chunks to make
}

TEST(Plan, FullestStageIsTheMostMemoryForItsCapacity) {
  auto stage = [](std::int64_t gib, std::int64_t capacity_gib) {
    MemoryEstimate m;
    m.weights = Bytes::gib(gib);
    m.capacity = Bytes::gib(capacity_gib);
    return m;
  };
  EXPECT_EQ(fullest_stage({stage(50, 40), stage(60, 80)}), 0U);
  EXPECT_EQ(fullest_stage({stage(30, 40), stage(70, 80)}), 1U);
  EXPECT_EQ(fullest_stage({stage(30, 80), stage(70, 80), stage(70, 80)}), 1U);
  EXPECT_EQ(fullest_stage({stage(30, 0), stage(70, 0)}), 1U);
  EXPECT_EQ(fullest_stage({}), 0U);
}

TEST(Plan, RankLayoutIsTensorInnermostThenDataThenPipeline) {
  ParallelPlan p;
  p.dp = 2;
  p.tp = 4;
  p.pp = 3;
  for (int r = 0; r < p.world_size(); ++r) EXPECT_EQ(rank_of(p, rank_coord(p, r)), r);
  const RankCoord c = rank_coord(p, 13);  // 13 = (1 * 2 + 1) * 4 + 1
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(c.pp, 1);
}

namespace {

const std::vector<std::string> kLayouts{"tp-dp-pp", "tp-pp-dp", "dp-tp-pp", "dp-pp-tp", "pp-tp-dp", "pp-dp-tp"};

/// The rank of `c` under `p.layout`, computed apart from rank_of: each
/// coordinate times the product of the extents inside its dimension.
int rank_by_strides(const ParallelPlan& p, const RankCoord& c) {
  int rank = 0, stride = 1;
  for (const ParallelDim d : p.layout.order) {
    const int coord = d == ParallelDim::TP ? c.tp : d == ParallelDim::DP ? c.dp : c.pp;
    const int extent = d == ParallelDim::TP ? p.tp : d == ParallelDim::DP ? p.dp : p.pp;
    rank += coord * stride;
    stride *= extent;
  }
  return rank;
}

}  // namespace

TEST(Plan, DefaultRankLayoutIsMegatronsOrder) {
  for (const auto& [dp, tp, pp] : {std::tuple{2, 4, 3}, std::tuple{1, 8, 2}, std::tuple{4, 1, 1}, std::tuple{3, 2, 5}}) {
    ParallelPlan p;
    p.dp = dp;
    p.tp = tp;
    p.pp = pp;
    EXPECT_TRUE(p.layout.is_default());
    EXPECT_EQ(to_string(p.layout), "tp-dp-pp");
    for (int r = 0; r < p.world_size(); ++r) {
      const RankCoord c = rank_coord(p, r);
      EXPECT_EQ(c.tp, r % tp);
      EXPECT_EQ(c.dp, (r / tp) % dp);
      EXPECT_EQ(c.pp, r / (tp * dp));
      EXPECT_EQ(rank_of(p, c), (c.pp * dp + c.dp) * tp + c.tp);
    }
  }
}

TEST(Plan, KnownBiasNoteOnlyFromFourWayTensorParallelism) {
  // Validation on vTrain's A100 runs finds 4- and 8-way tensor-parallel
  // layers too cheap (docs/calibration.md); narrower plans carry no note.
  ParallelPlan p;
  for (int tp : {1, 2}) {
    p.tp = tp;
    EXPECT_EQ(known_bias_note(p), "") << tp;
  }
  for (int tp : {4, 8, 16}) {
    p.tp = tp;
    const std::string note = known_bias_note(p);
    EXPECT_EQ(note.rfind(std::to_string(tp) + "-way tensor parallelism: ", 0), 0U) << note;
    EXPECT_NE(note.find("so forecasts with it are optimistic"), std::string::npos) << note;
    EXPECT_NE(note.find("docs/calibration.md"), std::string::npos) << note;
  }
}

TEST(Plan, EveryRankLayoutRoundTripsRanksAndCoordinates) {
  for (const std::string& name : kLayouts) {
    const RankLayout layout = parse_rank_layout(name);
    EXPECT_EQ(to_string(layout), name);
    for (const auto& [dp, tp, pp] : {std::tuple{2, 4, 3}, std::tuple{1, 8, 2}, std::tuple{3, 2, 5}}) {
      ParallelPlan p;
      p.dp = dp;
      p.tp = tp;
      p.pp = pp;
      p.layout = layout;
      std::set<std::tuple<int, int, int>> seen;
      for (int r = 0; r < p.world_size(); ++r) {
        const RankCoord c = rank_coord(p, r);
        EXPECT_TRUE(c.tp >= 0 && c.tp < tp && c.dp >= 0 && c.dp < dp && c.pp >= 0 && c.pp < pp) << name << " " << r;
        EXPECT_TRUE(seen.insert({c.tp, c.dp, c.pp}).second) << name << " rank " << r;
        EXPECT_EQ(rank_of(p, c), r) << name;
        EXPECT_EQ(rank_by_strides(p, c), r) << name;
      }
    }
  }
}

TEST(Plan, BadRankLayoutIsOneLineNamingTheOrders) {
  for (const char* bad : {"", "tp-dp", "tp-tp-pp", "TP-DP-PP", "tp-dp-pp-ep", "bogus"}) {
    try {
      (void)parse_rank_layout(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.find('\n'), std::string::npos);
      EXPECT_NE(msg.find("tp-dp-pp, tp-pp-dp, dp-tp-pp"), std::string::npos) << msg;
    }
  }
}

TEST(Plan, EveryGroupIsBuiltFromTheRankLayout) {
  const auto m = tiny();
  test_support::LayersOnlyPredictor pred(m.vocab);
  for (const std::string& name : kLayouts) {
    ParallelPlan p;
    p.dp = 2;
    p.tp = 2;
    p.pp = 2;
    p.global_batch = 8;
    p.layout = parse_rank_layout(name);
    const auto g = plan_training(m, kWork, p, pred);
    ASSERT_NO_THROW(g.validate()) << name;
    std::map<std::string, int> checked;
    for (int r = 0; r < g.num_ranks(); ++r) {
      const RankCoord me = rank_coord(p, r);
      EXPECT_EQ(g.ranks[static_cast<std::size_t>(r)].program, me.pp) << name << " rank " << r;
      auto at = [&](int t, int d, int s) { return rank_by_strides(p, {t, d, s}); };
      const std::vector<int> tp_members{at(0, me.dp, me.pp), at(1, me.dp, me.pp)};
      const std::vector<int> dp_members{at(me.tp, 0, me.pp), at(me.tp, 1, me.pp)};
      const std::vector<int> forward{at(me.tp, me.dp, 0), at(me.tp, me.dp, 1)};
      const std::vector<int> backward{forward[1], forward[0]};
      for (const Task& t : g.tasks(r)) {
        if (t.kind != TaskKind::Collective) continue;
        const std::vector<int>& got = g.groups[static_cast<std::size_t>(g.group_of(r, t.group))].ranks;
        const std::string task(t.name);
        std::string kind;
        if (task.find(".tp.") != std::string::npos || task.find("pp.gather_") != std::string::npos) {
          EXPECT_EQ(got, tp_members) << name << " " << task;
          kind = "tp";
        } else if (task.rfind("dp.grad", 0) == 0) {
          EXPECT_EQ(got, dp_members) << name << " " << task;
          kind = "dp";
        } else if (task.find("activation") != std::string::npos || task == "embedding.grad.all-reduce") {
          EXPECT_EQ(got, forward) << name << " " << task;
          kind = "pp";
        } else if (task.find("gradient") != std::string::npos) {
          EXPECT_EQ(got, backward) << name << " " << task;
          kind = "pp";
        } else {
          ADD_FAILURE() << name << ": unexpected collective " << task;
        }
        ++checked[kind];
      }
    }
    EXPECT_GT(checked["tp"], 0) << name;
    EXPECT_GT(checked["dp"], 0) << name;
    EXPECT_GT(checked["pp"], 0) << name;
  }
}

TEST(Plan, TensorGroupsSpanNodesOnlyWhenTheyDoNotFitInOne) {
  auto spans = [](int dp, int tp, int pp, int gpus_per_node, const char* layout = "tp-dp-pp") {
    ParallelPlan p;
    p.dp = dp;
    p.tp = tp;
    p.pp = pp;
    p.layout = parse_rank_layout(layout);
    return tp_group_spans_nodes(p, gpus_per_node);
  };
  EXPECT_TRUE(spans(2, 16, 1, 8));   // tp > GPUs per node
  EXPECT_FALSE(spans(4, 8, 1, 8));   // one node per TP group
  EXPECT_FALSE(spans(4, 2, 2, 8));
  EXPECT_FALSE(spans(4, 3, 1, 12));  // 3 divides 12
  EXPECT_TRUE(spans(2, 4, 1, 6));    // 4 does not divide 6: ranks 4..7 cross
  EXPECT_FALSE(spans(8, 1, 1, 4));   // no tensor parallelism
  EXPECT_FALSE(spans(2, 4, 1, 8, "dp-tp-pp"));  // stride 2: {0, 2, 4, 6}
  EXPECT_TRUE(spans(4, 4, 1, 8, "dp-tp-pp"));   // stride 4: {0, 4, 8, 12}
  EXPECT_TRUE(spans(1, 2, 8, 8, "pp-tp-dp"));   // stride 8: {0, 8}
}

TEST(Plan, OneFOneBOrderHasWarmupSteadyCooldown) {
  // p = 4, stage 1, m = 5: 2 warm-up forwards, then F/B pairs, then 2 backwards.
  const auto o = pipeline_order(Schedule::OneFOneB, 4, 1, 5, 1);
  std::string s;
  for (const auto& st : o) s += std::string(to_string(st.kind)) + std::to_string(st.micro_batch) + " ";
  EXPECT_EQ(s, "F0 F1 F2 B0 F3 B1 F4 B2 B3 B4 ");
  const auto g = pipeline_order(Schedule::GPipe, 4, 1, 3, 1);
  s.clear();
  for (const auto& st : g) s += std::string(to_string(st.kind)) + std::to_string(st.micro_batch) + " ";
  EXPECT_EQ(s, "F0 F1 F2 B2 B1 B0 ");
}

TEST(Plan, InterleavedOrderVisitsEveryChunkAndMicroBatchOnce) {
  for (int stage = 0; stage < 4; ++stage) {
    const auto o = pipeline_order(Schedule::Interleaved1F1B, 4, stage, 8, 2);
    ASSERT_EQ(o.size(), 2U * 8 * 2);
    std::map<std::tuple<bool, int, int>, int> seen;
    for (const auto& st : o) ++seen[{st.forward(), st.chunk, st.micro_batch}];
    EXPECT_EQ(seen.size(), o.size());
  }
}

TEST(Plan, TensorParallelHasTwoAllReducesPerLayerEachWay) {
  const auto m = tiny();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p;
  p.tp = 2;
  const auto g = plan_training(m, kWork, p, pred);
  ASSERT_NO_THROW(g.validate());
  const std::int64_t act = 1LL * 32 * 64 * 4;  // b s h x 4 bytes
  for (int r = 0; r < 2; ++r) {
    const Counts c = count(g, r, "layer003.");
    EXPECT_EQ(c.by_kind.size(), 1U);
    EXPECT_EQ(c.by_kind.at("all-reduce"), 4);  // 2 forward + 2 backward
    EXPECT_EQ(c.bytes.at("all-reduce"), act);
  }
  EXPECT_EQ(count(g, 0, "layer003.fwd").by_kind.at("all-reduce"), 2);
}

TEST(Plan, ZeroThreeGathersEachUnitOneAheadOfTheUnitRunning) {
  // ZeRO-3 as FSDP runs it (ParamGathers): the forward gathers the
  // embedding, each layer and the LM head in the order it runs them, the
  // backward in reverse; the gather of unit u waits for unit u - 2's compute
  // (issued while u - 1 runs: one unit of prefetch), and unit u waits for it.
  const auto m = tiny();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p;
  p.dp = 2;
  p.zero_stage = 3;
  const auto g = plan_training(m, kWork, p, pred);
  ASSERT_NO_THROW(g.validate());
  const auto& tasks = g.tasks(0);
  std::vector<std::string> fwd, bwd;
  for (const Task& t : tasks) {
    if (t.kind != TaskKind::Collective || t.name.find("zero3") == std::string::npos) continue;
    (t.name.find(".fwd.zero3") != std::string::npos ? fwd : bwd).emplace_back(t.name);
  }
  std::vector<std::string> want{"mb0.embedding.fwd.zero3.param.all-gather"};
  for (int l = 0; l < 8; ++l) want.push_back(fmt::format("mb0.layer{:03}.fwd.zero3.param.all-gather", l));
  want.push_back("mb0.lm_head.fwd.zero3.param.all-gather");
  EXPECT_EQ(fwd, want);
  std::vector<std::string> back{"mb0.lm_head.bwd.zero3.param.all-gather"};
  for (int l = 7; l >= 0; --l) back.push_back(fmt::format("mb0.layer{:03}.bwd.zero3.param.all-gather", l));
  back.push_back("mb0.embedding.bwd.zero3.param.all-gather");
  EXPECT_EQ(bwd, back);
  // Layer 3's forward gather waits for layer 1's last compute.
  auto index_of = [&](const std::string& name) {
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      if (tasks[i].name == name) return static_cast<TaskIndex>(i);
    }
    return TaskIndex{-1};
  };
  const TaskIndex gather = index_of("mb0.layer003.fwd.zero3.param.all-gather");
  ASSERT_GE(gather, 0);
  TaskIndex layer1_end = -1, layer3_first = -1;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].kind != TaskKind::Compute) continue;
    if (tasks[i].name.rfind("mb0.layer001.", 0) == 0 && tasks[i].name.find("bwd") == std::string::npos) {
      layer1_end = static_cast<TaskIndex>(i);
    }
    if (layer3_first < 0 && tasks[i].name.rfind("mb0.layer003.", 0) == 0)
      layer3_first = static_cast<TaskIndex>(i);
  }
  EXPECT_EQ(tasks[static_cast<std::size_t>(gather)].deps, std::vector<TaskIndex>{layer1_end});
  const auto& d = tasks[static_cast<std::size_t>(layer3_first)].deps;
  EXPECT_NE(std::find(d.begin(), d.end(), gather), d.end());
}

TEST(Plan, ZeroTwoAndThreeReduceEveryMicroBatchsGradients) {
  // ZeRO-2 and ZeRO-3 keep only their shard of the gradients (the memory
  // model's gradients / dp), so, as DeepSpeed and FSDP do, they
  // reduce-scatter each micro-batch's gradients after that micro-batch's
  // backward (helper 61: ZeRO-3 reduced once, a quarter of the traffic
  // here); ZeRO-1 (Megatron's distributed optimizer) accumulates the full
  // gradients and reduce-scatters once. ZeRO-1 and 2 all-gather the updated
  // parameters once (ZeRO-3 gathers each unit before it runs). Tiny model,
  // dp 2, 4 micro-batches, one reduction after each backward; FP32.
  const auto m = tiny();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p;
  p.dp = 2;
  p.global_batch = 8;
  p.grad_sync = GradSync::AfterBackward;
  // 8 layers + the embedding (128 padded rows + 32 positions) + the final norm, 4 bytes each.
  const std::int64_t grads = (8 * m.params_per_layer() + (128 + 32) * 64LL + 2 * 64LL) * 4;
  for (int zero : {1, 2, 3}) {
    p.zero_stage = zero;
    const auto g = plan_training(m, kWork, p, pred);
    ASSERT_NO_THROW(g.validate());
    std::vector<std::string> reductions;
    for (const Task& t : g.tasks(0)) {
      if (t.kind != TaskKind::Collective || t.name.find("dp.grad.") == std::string::npos) continue;
      reductions.emplace_back(t.name);
      EXPECT_EQ(t.collective, CollectiveKind::ReduceScatter) << t.name;
      EXPECT_EQ(t.bytes.count(), grads) << t.name;
    }
    if (zero == 1) {
      EXPECT_EQ(reductions, std::vector<std::string>{"dp.grad.reduce-scatter.bucket000"});
    } else {
      EXPECT_EQ(reductions,
                (std::vector<std::string>{
                    "mb0.dp.grad.reduce-scatter.bucket000", "mb1.dp.grad.reduce-scatter.bucket001",
                    "mb2.dp.grad.reduce-scatter.bucket002", "mb3.dp.grad.reduce-scatter.bucket003"}));
    }
    if (zero == 3) continue;
    const Counts gathers = count(g, 0, "dp.param.all-gather");
    EXPECT_EQ(gathers.by_kind.at("all-gather"), 1) << zero;
    EXPECT_EQ(gathers.bytes.at("all-gather"), grads) << zero;  // FP32 parameters, as many as gradients
  }
}

TEST(Plan, TaskNamesCarryTheModelsLayerIndex) {
  // 8 layers on 2 pipeline stages: stage 1 runs layers 4-7 and names them
  // so (a trace reader looks a layer up by its number in the model).
  const auto m = tiny();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p;
  p.pp = 2;
  p.global_batch = 2;
  const auto g = plan_training(m, kWork, p, pred);
  std::set<std::string> layers;
  for (const Task& t : g.tasks(1)) {
    const auto at = t.name.find(".layer");
    if (at != std::string::npos) layers.emplace(t.name.substr(at + 1, 8));
  }
  EXPECT_EQ(layers, (std::set<std::string>{"layer004", "layer005", "layer006", "layer007"}));
}

TEST(Plan, TensorParallelTasksWithoutSequenceParallelismAreNamedAfterTheirBlock) {
  // Without SP nothing separates ln1 from the attention, nor ln2 from the
  // MLP: each pair is one task, named after the block (a trace reader took
  // "fwd.ln1" for the layer norm alone).
  const auto m = tiny();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p;
  p.tp = 2;
  const auto g = plan_training(m, kWork, p, pred);
  std::vector<std::string> names;
  for (const Task& t : g.tasks(0)) {
    if (t.name.rfind("mb0.layer001.", 0) == 0) names.emplace_back(t.name.substr(13));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"fwd.attn", "fwd.tp.all-reduce", "fwd.mlp", "fwd.tp.all-reduce",
                                             "fwd.res2", "bwd.mlp", "bwd.tp.all-reduce", "bwd.fc1.wgrad",
                                             "bwd.attn", "bwd.tp.all-reduce", "bwd.qkv.wgrad", "bwd.ln1"}));
}

TEST(Plan, RecomputedForwardIsNamedAsSuch) {
  // A trace reader must tell the recomputed forward from the forward: its
  // collectives are "recompute.fwd.tp", and where it runs into the backward
  // as one task the name says both ("recompute.fwd+bwd", not "fwd").
  const auto m = tiny();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p;
  p.tp = 2;
  p.recompute = Recompute::Full;
  const auto g = plan_training(m, kWork, p, pred);
  ASSERT_NO_THROW(g.validate());
  EXPECT_EQ(count(g, 0, "layer003.fwd").by_kind.at("all-reduce"), 2);
  EXPECT_EQ(count(g, 0, "layer003.recompute.fwd").by_kind.at("all-reduce"), 2);
  EXPECT_EQ(count(g, 0, "layer003.bwd").by_kind.at("all-reduce"), 2);
  // Rank 0's compute tasks of layer 3, from "layer003." on.
  auto layer3 = [&](const ParallelPlan& plan) {
    std::vector<std::string> names;
    // (the graph held: a range-for over a temporary's tasks() dangles
    // before C++23, which crashed the whole test binary run at once)
    const auto graph = plan_training(m, kWork, plan, pred);
    for (const Task& t : graph.tasks(0)) {
      const auto at = t.name.find("layer003.");
      if (t.kind == TaskKind::Compute && at != std::string::npos) names.emplace_back(t.name.substr(at));
    }
    return names;
  };
  p.tp = 1;
  EXPECT_EQ(layer3(p), (std::vector<std::string>{"layer003.fwd", "layer003.recompute.fwd+bwd"}));
  p.recompute = Recompute::Selective;
  const auto selective = layer3(p);
  ASSERT_EQ(selective.size(), 2U);
  EXPECT_EQ(selective[1], "layer003.recompute.attn+bwd");
}

TEST(Plan, SequenceParallelTurnsAllReducesIntoReduceScatterAllGatherPairs) {
  const auto m = tiny();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p;
  p.tp = 2;
  p.sequence_parallel = true;
  const auto g = plan_training(m, kWork, p, pred);
  ASSERT_NO_THROW(g.validate());
  const Counts f = count(g, 0, "layer003.fwd");
  EXPECT_EQ(f.by_kind.at("all-gather"), 2);
  EXPECT_EQ(f.by_kind.at("reduce-scatter"), 2);
  const Counts b = count(g, 0, "layer003.bwd");
  EXPECT_EQ(b.by_kind.at("all-gather"), 4);  // gradient gathers + input re-gathers for the weight gradients
  EXPECT_EQ(b.by_kind.at("reduce-scatter"), 2);
  EXPECT_EQ(f.bytes.at("all-gather"), 32 * 64 * 4);  // the full (gathered) buffer
}

TEST(Plan, PipelineSendsOneActivationAndOneGradientPerMicroBatch) {
  const auto m = tiny();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p;
  p.pp = 4;
  p.global_batch = 6;  // 6 micro-batches of 1
  const auto g = plan_training(m, kWork, p, pred);
  ASSERT_NO_THROW(g.validate());
  const std::int64_t act = 32LL * 64 * 4;
  for (int stage = 0; stage < 4; ++stage) {
    Counts sa = count(g, stage, "send_activation"), ra = count(g, stage, "recv_activation");
    Counts sg = count(g, stage, "send_gradient"), rg = count(g, stage, "recv_gradient");
    EXPECT_EQ(sa.by_kind["send-recv"], stage < 3 ? 6 : 0);
    EXPECT_EQ(ra.by_kind["send-recv"], stage > 0 ? 6 : 0);
    EXPECT_EQ(sg.by_kind["send-recv"], stage > 0 ? 6 : 0);
    EXPECT_EQ(rg.by_kind["send-recv"], stage < 3 ? 6 : 0);
    if (stage < 3) {
      EXPECT_EQ(sa.bytes.at("send-recv"), act);
    }
  }
  // Tied embeddings: first and last stage all-reduce the word-embedding gradient.
  EXPECT_EQ(count(g, 0, "embedding.grad.all-reduce").by_kind["all-reduce"], 1);
  EXPECT_EQ(count(g, 3, "embedding.grad.all-reduce").by_kind["all-reduce"], 1);
  EXPECT_EQ(count(g, 1, "embedding.grad.all-reduce").by_kind["all-reduce"], 0);
}

TEST(Plan, SequenceParallelAllReducesTheReplicatedGradientsOverTensorParallelRanks) {
  // Under SP each tp rank's gradient of the norms and row-parallel biases
  // covers its sequence shard: Megatron all-reduces them over the tp group
  // before the step, once. tiny: 4 layers per stage, each 2 layer norms
  // (2 x 2 x 64) and 2 row-parallel biases (2 x 64) = 384 parameters; the
  // last stage adds the final norm (128); FP32 gradients, 4 bytes.
  const auto m = tiny();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p;
  p.tp = 2;
  p.pp = 2;
  p.global_batch = 2;
  p.sequence_parallel = true;
  const auto g = plan_training(m, kWork, p, pred);
  ASSERT_NO_THROW(g.validate());
  for (int r = 0; r < g.num_ranks(); ++r) {
    const int stage = rank_coord(p, r).pp;
    const Counts c = count(g, r, "norm.grad.all-reduce");
    EXPECT_EQ(c.by_kind.at("all-reduce"), 1) << r;
    EXPECT_EQ(c.bytes.at("all-reduce"), (4 * 384 + (stage == 1 ? 128 : 0)) * 4) << r;
  }
  // Without SP every tp rank saw the whole sequence: nothing to add.
  p.sequence_parallel = false;
  EXPECT_TRUE(count(plan_training(m, kWork, p, pred), 0, "norm.grad").by_kind.empty());
}

TEST(Plan, MegatronReducesDataParallelThenNormsThenTiedEmbeddings) {
  // finalize_model_grads: finish_grad_sync (the data-parallel reductions),
  // then _allreduce_layernorm_grads, then _allreduce_embedding_grads, each
  // behind the previous (helper 71: they ran side by side). DeepSpeed's
  // pipeline engine: the tied and norm reductions wait for no data-parallel
  // one (its ReduceTiedGrads comes first; not modelled).
  const auto m = tiny();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p;
  p.dp = 2;
  p.tp = 2;
  p.pp = 2;
  p.global_batch = 4;
  p.sequence_parallel = true;
  for (const auto framework : {node_model::Framework::Megatron, node_model::Framework::MegatronDeepSpeed}) {
    Workload w = kWork;
    w.framework = framework;
    const auto g = plan_training(m, w, p, pred);
    ASSERT_NO_THROW(g.validate());
    const bool in_order = framework == node_model::Framework::Megatron;
    for (const int r : {0, g.num_ranks() - 1}) {  // the first and the last stage
      const auto& tasks = g.tasks(r);
      std::vector<TaskIndex> dp;
      TaskIndex norms = -1, embedding = -1;
      for (std::size_t i = 0; i < tasks.size(); ++i) {
        const std::string_view n = tasks[i].name;
        if (tasks[i].kind == TaskKind::Collective && n.find("dp.grad") != std::string::npos)
          dp.push_back(static_cast<TaskIndex>(i));
        if (n == "norm.grad.all-reduce") norms = static_cast<TaskIndex>(i);
        if (n == "embedding.grad.all-reduce") embedding = static_cast<TaskIndex>(i);
      }
      ASSERT_FALSE(dp.empty()) << r;
      ASSERT_GE(norms, 0) << r;
      ASSERT_GE(embedding, 0) << r;
      const auto& nd = tasks[static_cast<std::size_t>(norms)].deps;
      const auto& ed = tasks[static_cast<std::size_t>(embedding)].deps;
      for (const TaskIndex d : dp) {
        EXPECT_EQ(std::find(nd.begin(), nd.end(), d) != nd.end(), in_order)
            << r << " " << tasks[static_cast<std::size_t>(d)].name;
      }
      if (in_order) {
        EXPECT_EQ(ed, std::vector<TaskIndex>{norms}) << r;
      } else {  // the stage's last compute task alone
        ASSERT_EQ(ed.size(), 1U) << r;
        EXPECT_EQ(tasks[static_cast<std::size_t>(ed.front())].kind, TaskKind::Compute) << r;
      }
    }
  }
}

TEST(Plan, MegatronScattersPipelineTensorsOverTensorParallelRanks) {
  // tp = 2, pp = 2, no SP: each TP rank sends half the activation and the
  // receiving TP group all-gathers the whole of it; off, each sends all of it.
  const auto m = tiny();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p;
  p.tp = 2;
  p.pp = 2;
  p.global_batch = 3;
  const std::int64_t act = 32LL * 64 * 4;
  const auto g = plan_training(m, kWork, p, pred);
  const Counts send = count(g, 0, "send_activation"), gather = count(g, 2, "gather_activation");
  EXPECT_EQ(send.bytes.at("send-recv"), act / 2);
  EXPECT_EQ(gather.by_kind.at("all-gather"), 3);
  EXPECT_EQ(gather.bytes.at("all-gather"), act);
  EXPECT_EQ(count(g, 0, "gather_gradient").by_kind.at("all-gather"), 3);
  p.pipeline_scatter_gather = false;
  const auto full = plan_training(m, kWork, p, pred);
  EXPECT_EQ(count(full, 0, "send_activation").bytes.at("send-recv"), act);
  EXPECT_EQ(count(full, 2, "gather_activation").by_kind.size(), 0U);
}

TEST(Plan, DataParallelReducesEveryGradientOnceInBuckets) {
  const auto m = tiny();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p;
  p.dp = 2;
  p.tp = 2;
  p.pp = 2;
  p.global_batch = 8;
  p.bucket_size = Bytes(50'000);
  const auto pl = plan_training_detailed(m, kWork, p, pred);
  ASSERT_NO_THROW(pl.graph.validate());
  for (int r = 0; r < 8; ++r) {
    const int stage = rank_coord(p, r).pp;
    std::int64_t reduced = 0;
    for (const auto& t : pl.graph.tasks(r)) {
      if (t.name.rfind("dp.grad", 0) == 0) reduced += t.bytes.count();
    }
    EXPECT_EQ(reduced, pl.summary.params_per_stage[static_cast<std::size_t>(stage)] * 4) << "rank " << r;
  }
  // ZeRO-1: reduce-scatter + all-gather instead.
  p.zero_stage = 1;
  const auto z = plan_training(m, kWork, p, pred);
  EXPECT_GT(count(z, 0, "dp.grad").by_kind["reduce-scatter"], 0);
  EXPECT_EQ(count(z, 0, "dp.grad").by_kind["reduce-scatter"], count(z, 0, "dp.param.all-gather").by_kind["all-gather"]);
  EXPECT_EQ(count(z, 0, "dp.grad").by_kind.count("all-reduce"), 0U);
}

TEST(Plan, TheDistributedOptimizerZeroesEveryMainGradientTheRankHolds) {
  // Memory-bound kernels timed at 1 ps per byte, GEMMs free: the optimizer
  // task is the bytes of its passes. Megatron, bf16, dp 8 with the
  // distributed optimizer: the step updates an eighth of the stage's
  // parameters, zero_grad_buffer then clears all of them.
  const test_support::BytesPredictor pred;
  const auto m = tiny();
  Workload w{1, 32, DType::BF16};
  w.framework = node_model::Framework::Megatron;
  ParallelPlan p;
  p.dp = 8;
  p.global_batch = 8;
  p.zero_stage = 1;
  const auto pl = plan_training_detailed(m, w, p, pred);
  const auto& tasks = pl.graph.tasks(0);
  const auto opt =
      std::find_if(tasks.begin(), tasks.end(), [](const Task& t) { return t.name == "optimizer"; });
  ASSERT_NE(opt, tasks.end());
  const std::int64_t held = pl.summary.params_per_stage[0];
  const std::int64_t shard = (held + 7) / 8;
  auto time = [&](const node_model::Pass& pass) {
    Time t;
    for (const auto& k : pass.kernels) t += pred.predict(k);
    return t;
  };
  const node_model::OpRules rules = w.rules();
  EXPECT_EQ(opt->duration, time(rules.optimizer(shard, 1, p.fused_optimizer, p.grad_clipping, held)));
  EXPECT_GT(opt->duration, time(rules.optimizer(shard, 1, p.fused_optimizer, p.grad_clipping)));
}

TEST(Plan, EveryCombinationValidates) {
  const auto m = tiny();
  test_support::LayersOnlyPredictor pred(m.vocab);
  for (auto sched : {Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved1F1B, Schedule::ZeroBubbleH1,
                     Schedule::ZeroBubbleH2}) {
    for (auto rc : {Recompute::None, Recompute::Selective, Recompute::Full}) {
      for (int zero : {0, 1, 3}) {
        ParallelPlan p;
        p.dp = 2;
        p.tp = 2;
        p.pp = 2;
        p.schedule = sched;
        p.virtual_stages = sched == Schedule::Interleaved1F1B ? 2 : 1;
        p.global_batch = 8;
        p.recompute = rc;
        p.zero_stage = zero;
        p.sequence_parallel = zero == 1;
        const auto g = plan_training(m, kWork, p, pred);
        EXPECT_NO_THROW(g.validate()) << to_string(sched) << " " << to_string(rc) << " zero " << zero;
      }
    }
  }
}

TEST(Memory, GPipeHoldsEveryMicroBatchOneFOneBAtMostThePipelineDepth) {
  const auto m = tiny();
  ParallelPlan p;
  p.pp = 4;
  for (std::int64_t mb : {4, 8, 16}) {
    p.global_batch = mb;
    p.schedule = Schedule::GPipe;
    const auto g = estimate_memory(m, kWork, p, Bytes::gib(80));
    p.schedule = Schedule::OneFOneB;
    const auto f = estimate_memory(m, kWork, p, Bytes::gib(80));
    for (int s = 0; s < 4; ++s) {
      EXPECT_EQ(g.memory_per_stage[static_cast<std::size_t>(s)].peak_in_flight, mb);
      EXPECT_EQ(f.memory_per_stage[static_cast<std::size_t>(s)].peak_in_flight, 4 - s);
    }
    // Stage 1 (no embedding, no LM head): activations = in flight x 2 layers x per-layer bytes.
    EXPECT_EQ(g.memory_per_stage[1].activations.count(), mb * f.memory_per_stage[1].activations.count() / 3);
  }
  // 1F1B grows with p instead.
  p.global_batch = 16;
  p.pp = 8;
  EXPECT_EQ(estimate_memory(m, kWork, p, Bytes::gib(80)).memory_per_stage[0].peak_in_flight, 8);
}

TEST(Memory, WeightsGradientsOptimizerFollowZero) {
  const auto& m = model_preset("gpt2-large");
  const Workload w{1, 1024, DType::FP32};
  ParallelPlan p;
  p.dp = 4;
  const auto z0 = estimate_memory(m, w, p, Bytes::gib(40)).memory_per_stage[0];
  // Megatron pads the vocabulary (50,257) to a multiple of 128: 50,304 rows.
  const std::int64_t params = m.layers * m.params_per_layer() + (50304LL + 1024 + 2) * 1280;
  EXPECT_EQ(z0.weights.count(), params * 4);
  EXPECT_EQ(z0.gradients.count(), params * 4);
  EXPECT_EQ(z0.optimizer_states.count(), params * 8);
  EXPECT_FALSE(z0.oom());
  p.zero_stage = 3;
  const auto z3 = estimate_memory(m, w, p, Bytes::gib(40)).memory_per_stage[0];
  // ZeRO-3 also holds two neighbouring units' full parameters, the one
  // running and the one prefetched: at most the embedding (with its 1,024
  // positions) and layer 0.
  EXPECT_EQ(z3.weights.count(), (params * 4 + 3) / 4 + ((50304LL + 1024) * 1280 + m.params_per_layer()) * 4);
  EXPECT_EQ(z3.optimizer_states.count(), (params * 8 + 3) / 4);
  // Korthikanti et al.: sbh(34 + 5as/h) bytes per layer at 16 bits, doubled for FP32.
  const double per_layer = 1024.0 * 1280 * (34 + 5.0 * 20 * 1024 / 1280) * 2;
  const double logits = 1024.0 * 50304 * 4;
  // Outside the layers, on its one stage (Megatron-LM's own estimate): the
  // embedding dropout's mask, sbh bytes, and the final norm's and the LM
  // head's inputs, sbh each (FP32: 4 bytes).
  const double outside = 1024.0 * 1280 * (1 + 2 * 4);
  EXPECT_NEAR(static_cast<double>(z0.activations.count()), 36 * per_layer + logits + outside, 2.0);
  // GPT-3 175B does not fit on 8 GPUs with tp = 8.
  ParallelPlan big;
  big.tp = 8;
  EXPECT_TRUE(estimate_memory(model_preset("gpt3-175b"), Workload{1, 2048, DType::BF16}, big, Bytes::gib(80)).oom());
}

// Megatron's bytes per parameter of weights, gradients and optimizer
// (its distributed-optimizer table): bf16 with FP32 main gradients 2 + 4 +
// 12 = 18, 6 + 12/d with ZeRO-1; fp16 with 16-bit gradients 20, 4 + 16/d:
// the optimizer also holds the gradients in FP32 for its step (helper 61:
// 16 and 4 + 12/d).
TEST(Memory, MegatronBytesPerParameterFollowTheDtype) {
  const auto& m = model_preset("gpt2-large");
  ParallelPlan p;
  p.dp = 4;
  const std::int64_t params = m.layers * m.params_per_layer() + (50304LL + 1024 + 2) * 1280;
  for (const auto dtype : {DType::BF16, DType::FP16}) {
    Workload w{1, 1024, dtype};
    w.framework = node_model::Framework::Megatron;
    for (int zero : {0, 1}) {
      p.zero_stage = zero;
      const auto st = estimate_memory(m, w, p, Bytes::gib(80)).memory_per_stage[0];
      const std::int64_t grads = dtype == DType::BF16 ? 4 : 2;
      const std::int64_t opt = dtype == DType::BF16 ? 12 : 16;
      EXPECT_EQ(st.weights.count(), params * 2);
      EXPECT_EQ(st.gradients.count(), params * grads);
      EXPECT_EQ(st.optimizer_states.count(), zero == 0 ? params * opt : (params * opt + 3) / 4)
          << static_cast<int>(dtype) << " zero " << zero;
    }
  }
}

// Without dropout (Llama, Mixtral: probability 0) no mask is kept: the two
// sbh masks and 3 of the 5 as^2b go (the attention dropout's mask and output),
// sbh(32 + 2as/h) per layer; with sequence parallelism and selective
// recomputation 32 sbh/t against 34. No attention-dropout kernel, no mask
// multiply in the residuals' backward, no embedding dropout.
TEST(Memory, WithoutDropoutNoMasks) {
  auto m = model_preset("gpt2-large");
  m.dropout = false;
  ParallelPlan p;
  const auto st = estimate_memory(m, Workload{1, 1024, DType::FP32}, p, Bytes::gib(40)).memory_per_stage[0];
  const double per_layer = 1024.0 * 1280 * (32 + 2.0 * 20 * 1024 / 1280) * 2;  // FP32: x 2
  // (and outside the layers the final norm's and the LM head's inputs, no
  // embedding mask)
  EXPECT_NEAR(static_cast<double>(st.activations.count()),
              36 * per_layer + 1024.0 * 50304 * 4 + 2 * 1024.0 * 1280 * 4, 2.0);
  const Workload bf16{1, 1024, DType::BF16};
  p.tp = 4;
  p.dp = 1;
  p.sequence_parallel = true;
  p.recompute = Recompute::Selective;
  const std::int64_t vocab_per_rank = (50304 + 511) / 512 * 512 / 4;  // padded to 128 x tp, per rank
  const double logits = 1024.0 * static_cast<double>(vocab_per_rank) * 4;
  const double with = static_cast<double>(estimate_memory(model_preset("gpt2-large"), bf16, p, Bytes::gib(40))
                                              .memory_per_stage[0]
                                              .activations.count());
  const double without = static_cast<double>(
      estimate_memory(m, bf16, p, Bytes::gib(40)).memory_per_stage[0].activations.count());
  // (less the inputs of the final norm and the head, 2 + 2 sbh/t, and with
  // dropout the embedding's mask, sbh/t)
  const double sbh_t = 1024.0 * 1280 / 4;
  EXPECT_NEAR((without - logits - 4 * sbh_t) / (with - logits - 5 * sbh_t), 32.0 / 34.0, 1e-9);
  // The kernels.
  auto names = [](const std::vector<node_model::OpKernels>& ops) {
    std::string out;
    for (const auto& op : ops) out += op.name + " ";
    return out;
  };
  const Sharding one{1, false};
  const auto layer = layer_ops(m, bf16, one);
  EXPECT_EQ(names(layer).find("attn_dropout"), std::string::npos) << names(layer);
  EXPECT_NE(names(layer_ops(model_preset("gpt2-large"), bf16, one)).find("attn_dropout "), std::string::npos);
  for (const auto& op : layer) {
    if (op.name != "residual1" && op.name != "residual2") continue;
    // Megatron's fused bias-dropout-add: the add forward; backward only the residual gradients' add.
    ASSERT_EQ(op.input_grad.kernels.size(), 1U) << op.name;
    EXPECT_EQ(op.input_grad.kernels[0].op, node_model::KernelOp::Add) << op.name;
  }
  EXPECT_EQ(names(embedding_ops(m, bf16, one)).find("dropout"), std::string::npos);
  for (const char* llama : {"llama2-70b", "llama3-8b", "mixtral-8x7b", "deepseek-moe-16b"}) {
    EXPECT_FALSE(model_preset(llama).dropout) << llama;
  }
  EXPECT_TRUE(model_preset("gpt3-175b").dropout);
}

namespace {
/// Activation bytes one more layer per stage adds on stage 0 of 2 (tp 8, SP,
/// selective recomputation, 1F1B with 2 micro-batches at its peak, s = 4096,
/// bf16): the per-layer bytes of `m` (the embedding cancels out).
double one_layer_with_sp(const TransformerConfig& m,
                         node_model::Framework framework = node_model::Framework::Megatron) {
  Workload w{1, 4096, DType::BF16};
  w.framework = framework;
  ParallelPlan p;
  p.tp = 8;
  p.sequence_parallel = true;
  p.recompute = Recompute::Selective;
  p.pp = 2;
  p.global_batch = 2;
  TransformerConfig more = m;
  more.layers += 2;  // one more layer per stage
  const double a =
      static_cast<double>(estimate_memory(m, w, p, Bytes::gib(80)).memory_per_stage[0].activations.count());
  const double b = static_cast<double>(
      estimate_memory(more, w, p, Bytes::gib(80)).memory_per_stage[0].activations.count());
  return (b - a) / 2.0;  // 2 micro-batches in flight on stage 0
}
}  // namespace

// The MLP's activations follow its width and gating: 4 f/h sbh/t (16 for
// GPT's f = 4h); gated, fc1's output 4 f/h and fc2's input 2 f/h, and run
// unfused the SiLU's output 2 f/h more. Llama 3 70B (gated, f = 3.5h, no
// dropout, 8 of 64 heads for K and V) with SP and selective recomputation
// keeps (8 + 4.5 + 21) sbh/t = 33.5 sbh/t per layer under Megatron-Core's
// fused bias_swiglu (it saves its input alone), (8 + 4.5 + 28) = 40.5 under
// Megatron-DeepSpeed's unfused SiLU and multiply (helper 124: the fused
// one was counted so too); as a plain GPT MLP of the same width, 8 + 4.5 +
// 14 = 26.5.
TEST(Memory, GatedMlpKeepsItsWidth) {
  const auto& llama = model_preset("llama3-70b");
  ASSERT_EQ(llama.ffn_hidden * 2, llama.hidden * 7);
  ASSERT_EQ(llama.kv_heads * 8, llama.heads);
  const double sbh_t = 4096.0 * 8192 / 8;
  EXPECT_NEAR(one_layer_with_sp(llama) / sbh_t, 33.5, 1e-9);
  EXPECT_NEAR(one_layer_with_sp(llama, node_model::Framework::MegatronDeepSpeed) / sbh_t, 40.5, 1e-9);
  TransformerConfig plain = llama;
  plain.gated_mlp = false;
  EXPECT_NEAR(one_layer_with_sp(plain) / sbh_t, 26.5, 1e-9);
  TransformerConfig gpt = plain;
  gpt.ffn_hidden = 4 * gpt.hidden;
  gpt.dropout = true;
  gpt.kv_heads = 0;                                         // every head its own K and V
  EXPECT_NEAR(one_layer_with_sp(gpt) / sbh_t, 34.0, 1e-9);  // Korthikanti's figure
}

// Grouped-query attention keeps K and V kv_heads/heads as wide: Q 2, K and V
// 4 kv/a, the projection's input 2, so 4 + 4 kv/a sbh/t for Korthikanti's 8.
// Llama 3 70B (8 of 64 heads): 4.5, 3.5 sbh/t less per layer than with a K
// and V per head.
TEST(Memory, GroupedQueryAttentionKeepsNarrowKeysAndValues) {
  const auto& llama = model_preset("llama3-70b");
  TransformerConfig mha = llama;
  mha.kv_heads = 0;
  const double sbh_t = 4096.0 * 8192 / 8;
  EXPECT_NEAR((one_layer_with_sp(mha) - one_layer_with_sp(llama)) / sbh_t, 3.5, 1e-9);
  // Without SP and recomputation, at t = 1: the same 3.5 sbh, on a short
  // sequence with FlashAttention (no s x s term).
  Workload w{1, 128, DType::BF16};
  w.flash_attention = true;
  ParallelPlan p;
  p.pp = 2;
  p.global_batch = 2;
  auto stage0 = [&](const TransformerConfig& m) {
    TransformerConfig more = m;
    more.layers += 2;
    return (static_cast<double>(
                estimate_memory(more, w, p, Bytes::gib(8000)).memory_per_stage[0].activations.count()) -
            static_cast<double>(
                estimate_memory(m, w, p, Bytes::gib(8000)).memory_per_stage[0].activations.count())) /
           2.0;
  };
  EXPECT_NEAR((stage0(mha) - stage0(llama)) / (128.0 * 8192), 3.5, 1e-9);
}

namespace {
/// Activation bytes one more layer per stage adds on stage 0 of 2 under `p`
/// (1F1B, 2 micro-batches in flight at its peak; the embedding and the LM
/// head cancel out).
double one_more_layer(const TransformerConfig& m, const Workload& w, ParallelPlan p) {
  p.pp = 2;
  p.global_batch = 2;
  TransformerConfig more = m;
  more.layers += 2;  // one more layer per stage
  auto activations = [&](const TransformerConfig& c) {
    const MemoryEstimate e = estimate_memory(c, w, p, Bytes::gib(8000)).memory_per_stage[0];
    return static_cast<double>(e.activations.count());
  };
  return (activations(more) - activations(m)) / 2.0;
}

/// The FP8 memory tests' workloads: micro-batch 1 of 4,096 tokens with
/// FlashAttention, in bf16 and at fp8.
struct Bf16AndFp8 {
  Workload bf16;
  Workload fp8;
};
Bf16AndFp8 flash_bf16_and_fp8() {
  Workload bf16{1, 4096, DType::BF16};
  bf16.flash_attention = true;
  Workload fp8 = bf16;
  fp8.profile.fp8 = true;
  return {bf16, fp8};
}
}  // namespace

// FP8 training keeps what Transformer Engine 1.x saves (plan.cpp, "FP8
// training's saved inputs"): qkv's and fc1's inputs as the norms' FP8
// outputs, proj's and fc2's as their FP8 copies, 1 byte per element where
// bf16 keeps 2. Llama 3 70B (h 8192, f 3.5h, K and V 8 of 64 heads, no
// dropout, fused SwiGLU), s = 4096, FlashAttention, tp 8: sbh = 33,554,432.
// bf16 keeps 8 sbh of norms' and qkv/fc1 inputs and 4.5 + 21 = 25.5 sbh/t
// of Q, K, V, proj's input, fc1's output (7) and fc2's input (3.5h x 2 / h
// = 7): 33.5 sbh/t with SP. FP8: qkv and fc1 inputs 1 each (8 -> 6), fc2's
// input 3.5 (21 -> 17.5), and the projection keeps its FP8 copy, 1, beside
// the bf16 output FlashAttention keeps for its backward (4.5 -> 5.5): 6 +
// 23 = 29 sbh/t. Selective recomputation checkpoints the attention, so the
// projection's FP8 copy is its input's only copy: 6 + 21 = 27 sbh/t.
TEST(Memory, Fp8KeepsTheLinearsInputsInFp8) {
  const auto& llama = model_preset("llama3-70b");
  const auto [bf16, fp8] = flash_bf16_and_fp8();
  ParallelPlan p;
  p.tp = 8;
  p.sequence_parallel = true;
  p.recompute = Recompute::None;
  const double sbh = 4096.0 * 8192;
  const double sbh_t = sbh / 8;                             // 4,194,304
  EXPECT_EQ(one_more_layer(llama, bf16, p), 33.5 * sbh_t);  // 140,509,184 bytes
  EXPECT_EQ(one_more_layer(llama, fp8, p), 29 * sbh_t);     // 121,634,816
  // Without SP the norms' and qkv/fc1 inputs stay whole: bf16 8 sbh +
  // 25.5 sbh/t = 375,390,208 bytes, FP8 6 sbh + 23 sbh/t = 297,795,584.
  p.sequence_parallel = false;
  EXPECT_EQ(one_more_layer(llama, bf16, p), 8 * sbh + 25.5 * sbh_t);  // 375,390,208
  EXPECT_EQ(one_more_layer(llama, fp8, p), 6 * sbh + 23 * sbh_t);     // 297,795,584
  // Selective recomputation, SP: 33.5 and 27 sbh/t (113,246,208 bytes).
  p.sequence_parallel = true;
  p.recompute = Recompute::Selective;
  EXPECT_EQ(one_more_layer(llama, bf16, p), 33.5 * sbh_t);
  EXPECT_EQ(one_more_layer(llama, fp8, p), 27 * sbh_t);
  // The unfused attention keeps no bf16 output either: FP8 saves 2 sbh/t
  // more against bf16 than with FlashAttention (the s x s terms, the same
  // for both, cancel).
  p.recompute = Recompute::None;
  Workload bf16_unfused = bf16, fp8_unfused = fp8;
  bf16_unfused.flash_attention = fp8_unfused.flash_attention = false;
  EXPECT_EQ(one_more_layer(llama, bf16_unfused, p) - one_more_layer(llama, fp8_unfused, p),
            (33.5 - 29 + 2) * sbh_t);
  // Full recomputation keeps the layer's bf16 input, 2 sbh/t, either way;
  // the layer recomputed in the backward (workspace) is the FP8 one's 29
  // sbh/t against 33.5.
  p.recompute = Recompute::Full;
  EXPECT_EQ(one_more_layer(llama, bf16, p), 2 * sbh_t);
  EXPECT_EQ(one_more_layer(llama, fp8, p), 2 * sbh_t);
  ParallelPlan one_stage = p;
  one_stage.pp = 2;
  one_stage.global_batch = 2;
  EXPECT_EQ(estimate_memory(llama, bf16, one_stage, Bytes::gib(80)).memory_per_stage[0].workspace -
                estimate_memory(llama, fp8, one_stage, Bytes::gib(80)).memory_per_stage[0].workspace,
            Bytes::from_truncated(4.5 * sbh_t));
}

// Transformer Engine caches each FP8 linear's weight cast and its FP8
// transpose across micro-batches (module/base.py, set_fp8_weights), in
// every model chunk: 1 + 1 bytes per weight element of qkv, proj, fc1 and
// fc2. Llama 3 70B at tp 8: qkv 8192 x 10240, proj 8192^2, fc1 8192 x
// 57344, fc2 28672 x 8192 = 855,638,016 weights, 106,954,752 per rank,
// 213,909,504 bytes per layer; pp 4 holds 20 layers a stage: 4,278,190,080
// bytes (3.98 GiB), with 2 virtual stages of 10 layers each the same. bf16
// holds none; the bf16 weights, gradients and optimizer are the same.
TEST(Memory, Fp8CachesEachLinearsFp8WeightAndTranspose) {
  const auto& llama = model_preset("llama3-70b");
  const auto [bf16, fp8] = flash_bf16_and_fp8();
  // The weights the kernel model casts (OpKernels::weight_cast).
  std::int64_t cast = 0;
  for (const auto& op : layer_ops(llama, fp8, Sharding{8, true})) {
    if (!op.weight_cast.empty()) cast += op.params;
  }
  EXPECT_EQ(cast, 106'954'752);
  EXPECT_EQ(cast * 8, 8192LL * 10240 + 8192LL * 8192 + 8192LL * 57344 + 28672LL * 8192);
  ParallelPlan p;
  p.tp = 8;
  p.pp = 4;
  p.sequence_parallel = true;
  p.global_batch = 8;
  for (int v : {1, 2}) {
    p.virtual_stages = v;
    p.schedule = v == 1 ? Schedule::OneFOneB : Schedule::Interleaved1F1B;
    const auto a = estimate_memory(llama, bf16, p, Bytes::gib(80)).memory_per_stage;
    const auto b = estimate_memory(llama, fp8, p, Bytes::gib(80)).memory_per_stage;
    for (std::size_t s = 0; s < 4; ++s) {
      EXPECT_EQ(a[s].fp8_weights, Bytes(0));
      EXPECT_EQ(b[s].fp8_weights, Bytes(4'278'190'080)) << "stage " << s << ", " << v << " virtual";
      EXPECT_EQ(b[s].weights, a[s].weights);
      EXPECT_EQ(b[s].gradients, a[s].gradients);
      EXPECT_EQ(b[s].optimizer_states, a[s].optimizer_states);
      EXPECT_EQ(b[s].total(), b[s].weights + b[s].fp8_weights + b[s].gradients + b[s].optimizer_states +
                                  b[s].activations + b[s].workspace);
    }
  }
}

TEST(PlanErrors, OneLineNamingKeysAndNumbers) {
  const auto m = model_preset("gpt2-large");
  ParallelPlan p;
  p.dp = 2;
  p.tp = 2;
  p.pp = 2;
  EXPECT_EQ(error_of(m, kWork, p, 4), "dp x tp x pp (2 x 2 x 2 = 8) must equal the number of GPUs (4)");
  p.dp = 1;
  p.tp = 3;
  p.pp = 1;
  EXPECT_EQ(error_of(m, kWork, p, 3), "tp (3) must divide the model's heads (20)");
  p.tp = 1;
  p.pp = 40;
  EXPECT_NE(error_of(m, kWork, p, 40).find("pp (40) must not exceed the model's layers (36)"), std::string::npos);
  p.pp = 2;
  p.global_batch = 5;
  p.dp = 1;
  Workload w2 = kWork;
  w2.micro_batch = 2;
  EXPECT_EQ(error_of(m, w2, p, 2),
            "global_batch (5) must be a multiple of dp x micro_batch (1 x 2 = 2): the nearest are 4 and 6");
  p.global_batch = 8;
  p.virtual_stages = 2;
  // It says what to set (helper 60: a --set of virtual_stages alone).
  EXPECT_EQ(error_of(m, kWork, p, 2),
            "virtual_stages (2) needs schedule interleaved-1f1b (got 1f1b): set parallelism.schedule to "
            "interleaved-1f1b with it, or virtual_stages to auto");
  p.schedule = Schedule::Interleaved1F1B;
  p.pp = 3;
  EXPECT_NE(error_of(m, kWork, p, 3).find("= 8) to be a multiple of pp (3)"), std::string::npos);
  // Without a global batch: one micro-batch, said so (helper 130: "0 / (1 x 1) = 1").
  p.global_batch = 0;
  EXPECT_EQ(error_of(m, kWork, p, 3),
            "schedule interleaved-1f1b needs the micro-batches (1: no global_batch given, one micro-batch of 1 "
            "per dp rank) to be a multiple of pp (3): give a global_batch (or micro_batches) that makes them one");
  p.global_batch = 8;
  p.pp = 2;
  p.virtual_stages = 1;
  EXPECT_EQ(
      error_of(m, kWork, p, 2),
      "schedule interleaved-1f1b needs virtual_stages >= 2 (got 1; without a schedule given, one chunk per "
      "rank runs 1f1b and more run interleaved-1f1b)");
  p.virtual_stages = 20;
  EXPECT_EQ(error_of(m, kWork, p, 2), "pp x virtual_stages (2 x 20 = 40) must not exceed the model's layers (36)");
  EXPECT_THROW(parse_schedule("zero-bubble"), InputError);
  EXPECT_THROW(parse_recompute("some"), InputError);
}

// Issue 17: dp x tp x pp of ints overflowed int (65536 x 65536 wrapped to 0).
TEST(PlanErrors, ProductsOfThePlanDoNotWrap) {
  const auto m = model_preset("gpt2-large");
  ParallelPlan p;
  p.dp = 16;
  p.tp = 65536;
  p.pp = 65536;
  EXPECT_EQ(error_of(m, kWork, p, 16),
            "dp x tp x pp (16 x 65536 x 65536 = 68719476736) must equal the number of GPUs (16)");
  // Without a GPU count to compare with, the ranks must still be numbered by int.
  EXPECT_EQ(error_of(m, kWork, p, 0),
            "dp x tp x pp (16 x 65536 x 65536 = 68719476736) exceeds the 2147483647 ranks that can be simulated");
  p.dp = 2;
  p.tp = 1;
  p.pp = 2;
  p.virtual_stages = 1 << 30;
  p.schedule = Schedule::Interleaved1F1B;
  EXPECT_EQ(error_of(m, kWork, p, 4),
            "pp x virtual_stages (2 x 1073741824 = 2147483648) must not exceed the model's layers (36)");
  p.virtual_stages = 1;
  p.schedule = Schedule::OneFOneB;
  p.global_batch = 1'000'000;
  Workload huge = kWork;
  huge.micro_batch = std::int64_t{1} << 62;
  EXPECT_EQ(error_of(m, huge, p, 4),
            "global_batch (1000000) must be a multiple of dp x micro_batch (2 x 4611686018427387904 = "
            "more than 2^63)");
}

TEST(Plan, RanksOfAStageShareOneProgramBoundToTheirOwnGroups) {
  const auto m = tiny();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p;
  p.dp = 2;
  p.tp = 2;
  p.pp = 2;
  p.global_batch = 8;
  p.bucket_size = Bytes(50'000);
  const auto g = plan_training(m, kWork, p, pred);
  ASSERT_NO_THROW(g.validate());
  ASSERT_EQ(g.num_ranks(), 8);
  ASSERT_EQ(g.programs.size(), 2U);  // one per pipeline stage
  EXPECT_NE(g.programs[0]->tasks.size(), 0U);
  auto members = [&](std::int32_t group) {
    std::vector<int> v = g.groups[static_cast<std::size_t>(group)].ranks;
    return v;
  };
  for (int r = 0; r < g.num_ranks(); ++r) {
    const RankCoord me = rank_coord(p, r);
    EXPECT_EQ(g.ranks[static_cast<std::size_t>(r)].program, me.pp) << "rank " << r;
    EXPECT_EQ(&g.tasks(r), &g.programs[static_cast<std::size_t>(me.pp)]->tasks);
    const std::vector<int> tp_members{rank_of(p, {0, me.dp, me.pp}), rank_of(p, {1, me.dp, me.pp})};
    const std::vector<int> dp_members{rank_of(p, {me.tp, 0, me.pp}), rank_of(p, {me.tp, 1, me.pp})};
    const std::vector<int> forward{rank_of(p, {me.tp, me.dp, 0}), rank_of(p, {me.tp, me.dp, 1})};
    const std::vector<int> backward{forward[1], forward[0]};
    std::map<std::string, int> checked;
    for (const Task& t : g.tasks(r)) {
      if (t.kind != TaskKind::Collective) continue;
      const std::vector<int> got = members(g.group_of(r, t.group));
      const std::string name(t.name);
      if (name.find(".tp.") != std::string::npos) {
        EXPECT_EQ(got, tp_members) << name;
        ++checked["tp"];
      } else if (name.find("pp.gather_") != std::string::npos) {
        // Scatter-gather: the received 1/tp slices are all-gathered in the TP group.
        EXPECT_EQ(got, tp_members) << name;
        EXPECT_EQ(t.collective, CollectiveKind::AllGather) << name;
        ++checked["gather"];
      } else if (name.rfind("dp.grad", 0) == 0) {
        EXPECT_EQ(got, dp_members) << name;
        ++checked["dp"];
      } else if (name.find("activation") != std::string::npos) {
        EXPECT_EQ(got, forward) << name;  // sender first: stage 0 -> stage 1
        ++checked["pp"];
      } else if (name.find("gradient") != std::string::npos) {
        EXPECT_EQ(got, backward) << name;
        ++checked["pp"];
      } else if (name == "embedding.grad.all-reduce") {
        EXPECT_EQ(got, forward) << name;  // first and last stage
        ++checked["embedding"];
      } else {
        ADD_FAILURE() << "unexpected collective " << name;
      }
    }
    EXPECT_GT(checked["tp"], 0) << "rank " << r;
    EXPECT_GT(checked["dp"], 0) << "rank " << r;
    EXPECT_EQ(checked["pp"], 8) << "rank " << r;      // 8 micro-batches, one message each
    EXPECT_EQ(checked["gather"], 4) << "rank " << r;  // one per received message
    EXPECT_EQ(checked["embedding"], 1) << "rank " << r;
  }
  // Both sides of a pipeline pair hold the same ids in the same order.
  std::map<std::int32_t, std::map<int, std::vector<std::int64_t>>> ids;  // group -> rank -> ids
  for (int r = 0; r < g.num_ranks(); ++r) {
    for (const Task& t : g.tasks(r)) {
      if (t.kind == TaskKind::Collective) ids[g.group_of(r, t.group)][r].push_back(t.collective_id);
    }
  }
  for (const auto& [group, by_rank] : ids) {
    EXPECT_EQ(by_rank.size(), g.groups[static_cast<std::size_t>(group)].ranks.size()) << "group " << group;
    for (const auto& [r, v] : by_rank) {
      EXPECT_EQ(v, by_rank.begin()->second) << "group " << group << " rank " << r;
    }
  }
}

TEST(Plan, InterleavedAndDataParallelPlansSharePrograms) {
  const auto m = tiny();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p;
  p.dp = 3;
  p.tp = 2;
  p.pp = 2;
  p.virtual_stages = 2;
  p.schedule = Schedule::Interleaved1F1B;
  p.global_batch = 12;
  const auto g = plan_training(m, kWork, p, pred);
  ASSERT_NO_THROW(g.validate());
  EXPECT_EQ(g.programs.size(), 2U);
  ParallelPlan d;
  d.dp = 4;
  const auto dg = plan_training(m, kWork, d, pred);
  ASSERT_NO_THROW(dg.validate());
  EXPECT_EQ(dg.programs.size(), 1U);
  EXPECT_EQ(dg.num_ranks(), 4);
}

TEST(TaskGraph, ValidateChecksBindings) {
  Task ar;
  ar.kind = TaskKind::Collective;
  ar.group = 0;
  ar.collective_id = 0;
  ar.bytes = Bytes(8);
  Program prog;
  prog.tasks.push_back(ar);
  auto graph = [&] {
    TaskGraph g;
    g.groups.push_back(Group{{0, 1}});
    g.groups.push_back(Group{{1, 2}});
    const auto shared = g.add_program(prog);
    g.add_rank(shared, {0});
    g.add_rank(shared, {0});
    g.add_rank(g.add_program(Program{}), {});
    return g;
  };
  EXPECT_NO_THROW(graph().validate());
  auto expect_error = [](const TaskGraph& g, const std::string& pattern) {
    try {
      g.validate();
      ADD_FAILURE() << "no error, expected " << pattern;
    } catch (const InputError& e) {
      EXPECT_TRUE(std::regex_search(e.what(), std::regex(pattern))) << e.what();
    }
  };
  auto g = graph();
  g.ranks[0].groups = {1};
  expect_error(g, "rank 0 .* names group 1, which does not include it");
  g = graph();
  g.ranks[1].groups = {};
  expect_error(g, "rank 1 binds 0 group slots, its program uses 1");
  g = graph();
  g.ranks[1].groups = {7};
  expect_error(g, "group 7, which does not exist");
  g = graph();
  g.ranks[2].program = 5;
  expect_error(g, "rank 2 runs program 5, which does not exist");
  g = graph();
  g.ranks[2].program = 0;  // rank 2 holds a collective of group 0, not its member
  g.ranks[2].groups = {0};
  expect_error(g, "rank 2 .* names group 0, which does not include it");
  // The same group on two slots of one rank.
  g = graph();
  Program two = prog;
  ar.group = 1;
  two.tasks.push_back(ar);
  g.programs[0] = std::make_shared<const Program>(two);
  g.ranks[0].groups = {0, 0};
  g.ranks[1].groups = {0, 0};
  expect_error(g, "rank 0 binds group 0 to two slots");
  // Dependencies are checked once per program.
  g = graph();
  Program bad = prog;
  bad.tasks[0].deps = {0};
  g.programs[0] = std::make_shared<const Program>(bad);
  expect_error(g, "program 0 task 0 .* depends on task 0");
}

TEST(TaskGraph, CollectivesMatchPerGroupNotGlobally) {
  // Two groups with the same collective id: ids need only be unique within a group.
  Task ar;
  ar.kind = TaskKind::Collective;
  ar.collective_id = 0;
  ar.bytes = Bytes(8);
  Program prog;
  ar.group = 0;
  prog.tasks.push_back(ar);
  ar.group = 1;
  prog.tasks.push_back(ar);
  TaskGraph g;
  g.groups.push_back(Group{{0, 1}});
  g.groups.push_back(Group{{0, 1}});
  const auto shared = g.add_program(prog);
  g.add_rank(shared, {0, 1});
  g.add_rank(shared, {1, 0});  // slots bound the other way round: still matched
  EXPECT_NO_THROW(g.validate());
  // A different id in one member's group: held by one rank only.
  Program other = prog;
  other.tasks[1].collective_id = 3;
  g.ranks[1].program = g.add_program(other);
  EXPECT_THROW(g.validate(), InputError);
}

TEST(TaskGraph, NamesKeptByAProgramOutliveTheBuffersTheyCameFrom) {
  Program prog;
  for (int i = 0; i < 20'000; ++i) {  // several blocks of the name store
    Task t;
    t.name = prog.keep_name("task." + std::to_string(i));
    prog.tasks.push_back(t);
  }
  const std::string huge(100'000, 'x');
  Task big;
  big.name = prog.keep_name(huge);
  prog.tasks.push_back(big);
  const Program copy = prog;  // copies share the names
  prog = Program{};
  EXPECT_EQ(copy.tasks[0].name, "task.0");
  EXPECT_EQ(copy.tasks[19'999].name, "task.19999");
  EXPECT_EQ(copy.tasks.back().name, huge);
  // An empty name first (blocks.back() of no block, helper 88), then others.
  Program fresh;
  EXPECT_EQ(fresh.keep_name(""), "");
  EXPECT_EQ(fresh.keep_name("a"), "a");
}

TEST(Plan, ModelFlopsCountNoRecomputation) {
  // MFU's numerator: the GEMMs' work (as Megatron-LM and PaLM count it);
  // without recomputation, what the GEMMs of a plan without tensor
  // parallelism execute (all ranks): with this predictor (a GEMM 1 ps per
  // FLOP, anything else nothing, the LM head free) the compute tasks' time
  // plus the LM head's GEMMs. With tp 2 the tasks also execute twice what
  // both ranks repeat (layer norms, residuals, dropout without sequence
  // parallelism), the model FLOPs do not (helper 76: they counted it, MFU
  // 0.3% high at tp 8). With full recomputation the tasks execute one more
  // forward of every layer per micro-batch, the model FLOPs stay the same.
  const auto m = tiny();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p;
  p.dp = 4;
  p.tp = 1;
  p.pp = 2;
  p.global_batch = 8;
  auto executed = [](const TaskGraph& g) {
    double f = 0;
    for (int r = 0; r < g.num_ranks(); ++r) {
      for (const auto& t : g.tasks(r)) f += t.flops.count();
    }
    return f;
  };
  auto gemm_time_ps = [](const TaskGraph& g) {
    double ps = 0;
    for (int r = 0; r < g.num_ranks(); ++r) {
      for (const auto& t : g.tasks(r)) {
        if (t.kind == TaskKind::Compute) ps += static_cast<double>(t.duration.ps());
      }
    }
    return ps;
  };
  const auto tp1 = plan_training_detailed(m, kWork, p, pred);
  double head = 0;  // the LM head's GEMMs, per micro-batch
  for (const auto& op : lm_head_ops(m, kWork, Sharding{1, false})) {
    for (const Pass* pass : {&op.forward, &op.input_grad, &op.weight_grad}) {
      for (const auto& k : pass->kernels) head += node_model::is_gemm(k.op) ? k.flops().count() : 0.0;
    }
  }
  // 3 GEMMs of 2 x 32 x 64 x 128 (the vocabulary padded), 2 micro-batches
  // per pipeline (global batch 8 over dp 4), 4 pipelines.
  EXPECT_DOUBLE_EQ(head, 3 * 2 * 32 * 64 * 128);
  EXPECT_DOUBLE_EQ(tp1.summary.model_flops, gemm_time_ps(tp1.graph) + head * 2 * 4);
  EXPECT_GT(executed(tp1.graph), tp1.summary.model_flops);  // and the other kernels
  p.dp = 2;
  p.tp = 2;
  const auto none = plan_training_detailed(m, kWork, p, pred);
  EXPECT_DOUBLE_EQ(none.summary.model_flops, tp1.summary.model_flops);
  EXPECT_GT(executed(none.graph), none.summary.model_flops * 1.001);
  p.sequence_parallel = true;
  EXPECT_DOUBLE_EQ(plan_training_detailed(m, kWork, p, pred).summary.model_flops, tp1.summary.model_flops);
  p.sequence_parallel = false;
  p.recompute = Recompute::Full;
  const auto full = plan_training_detailed(m, kWork, p, pred);
  EXPECT_DOUBLE_EQ(full.summary.model_flops, none.summary.model_flops);
  double layer_forward = 0;
  for (const auto& op : layer_ops(m, kWork, Sharding{2, false})) {
    for (const auto& k : op.forward.kernels) layer_forward += k.flops().count();
  }
  // 8 layers x 4 micro-batches per pipeline x 4 (tp x dp) columns.
  EXPECT_DOUBLE_EQ(executed(full.graph) - executed(none.graph), layer_forward * 8 * 4 * 4);
}

TEST(Plan, MegatronOnPyTorchDdpAddsGradientsFromTheSecondMicroBatch) {
  // Megatron with overlapped gradient sync runs on PyTorch DDP: gradients live
  // in .grad, so there is no main-gradient pass, and every micro-batch after
  // the first adds its gradients (one task per layer); with Megatron's own
  // DDP (after-backward) none of those tasks exist.
  const auto m = tiny();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p;
  p.dp = 2;
  p.global_batch = 8;  // 4 micro-batches per replica
  auto grad_adds = [&](GradSync sync) {
    p.grad_sync = sync;
    const TaskGraph g = plan_training(m, kWork, p, pred);
    int n = 0;
    for (const auto& t : g.tasks(0)) n += t.name.find("grad_add") != std::string::npos ? 1 : 0;
    return n;
  };
  EXPECT_EQ(grad_adds(GradSync::Overlapped), 3 * 8);  // micro-batches 2-4, 8 layers
  EXPECT_EQ(grad_adds(GradSync::AfterBackward), 0);
  EXPECT_EQ(grad_adds(GradSync::OverlapGradReduce), 0);  // Megatron-Core keeps the main-gradient buffer
  // The rule table: no main-gradient accumulation or zeroing without main_grad.
  node_model::ProfileOptions torch;
  torch.main_grad = false;
  const node_model::OpRules local(node_model::Framework::Megatron, DType::BF16);
  const node_model::OpRules ddp(node_model::Framework::Megatron, DType::BF16, torch);
  EXPECT_EQ(ddp.linear("fc", 64, 32, 16, false).weight_grad.kernels.size(), 1U);  // the GEMM alone
  EXPECT_EQ(local.linear("fc", 64, 32, 16, false).weight_grad.kernels.size(), 2U);  // + main-gradient read (fusion)
  EXPECT_LT(ddp.optimizer(1'000'000, 10, true, true).launches, local.optimizer(1'000'000, 10, true, true).launches);
}

TEST(Plan, EagerZeroGradDecidesWhichBackwardsAddToDotGrad) {
  // PyTorch eager with zero_grad(set_to_none=True): the first micro-batch's
  // backward writes .grad (no add in its weight-gradient passes), each later
  // one adds, one task per layer; with zero_grad(set_to_none=False) (and in
  // NeuSight's per-op convention) every backward adds inside its passes.
  const auto m = tiny();
  test_support::LayersOnlyPredictor pred(m.vocab);
  ParallelPlan p;
  p.global_batch = 4;  // 4 micro-batches, one replica
  Workload eager = kWork;
  eager.framework = node_model::Framework::PyTorchEager;
  auto grad_adds = [&](bool every_backward) {
    eager.profile.eager_accumulate_every_backward = every_backward;
    const TaskGraph g = plan_training(m, eager, p, pred);
    int n = 0;
    for (const auto& t : g.tasks(0)) n += t.name.find("grad_add") != std::string::npos ? 1 : 0;
    return n;
  };
  EXPECT_EQ(grad_adds(false), 3 * 8);  // micro-batches 2-4, 8 layers
  EXPECT_EQ(grad_adds(true), 0);
  node_model::ProfileOptions every;
  every.eager_accumulate_every_backward = true;
  const node_model::OpRules zeros(node_model::Framework::PyTorchEager, DType::BF16, every);
  // set_to_none is the library's default, as the scenario key's.
  const node_model::OpRules set_to_none(node_model::Framework::PyTorchEager, DType::BF16);
  EXPECT_EQ(zeros.linear("fc", 64, 32, 16, true).weight_grad.kernels.size(),
            2U);  // the GEMM and .grad += (W and b)
  EXPECT_EQ(set_to_none.linear("fc", 64, 32, 16, true).weight_grad.kernels.size(), 1U);  // the GEMM alone
  EXPECT_EQ(zeros.layer_norm("ln", 64, 32).weight_grad.kernels.size(), 1U);
  EXPECT_TRUE(set_to_none.layer_norm("ln", 64, 32).weight_grad.kernels.empty());
}

TEST(TaskRole, DropsMicroBatchChunkLayerAndBucketNumbers) {
  EXPECT_EQ(task_role("mb3.layer005.fwd.tp.all-reduce"), "layer.fwd.tp.all-reduce");
  EXPECT_EQ(task_role("c1.mb12.layer000.bwd.tp.all-gather"), "layer.bwd.tp.all-gather");
  EXPECT_EQ(task_role("dp.grad.all-reduce.bucket002"), "dp.grad.all-reduce.bucket");
  EXPECT_EQ(task_role("mb0.pp.send_activation"), "pp.send_activation");
  // Words that merely start like a tag are kept.
  EXPECT_EQ(task_role("mbx.layer.c.bucket1a"), "mbx.layer.c.bucket1a");
  EXPECT_EQ(task_role(""), "");
}
