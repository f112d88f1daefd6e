// `tessera collectives`' table (study::collective_table): the collectives of
// one iteration with the sizes, groups and counts the plan gives them
// (checked by hand), timed alone and with their stage's other groups on the
// fabric: with the NCCL calibration at line rate, a two-rank ring over the
// network carries its buffer at the NIC's rate, and four such rings behind
// one leaf uplink share it.
#include "tessera/study/collective_table.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/cli/scenario.hpp"
#include "tessera/parallelism/plan.hpp"
#include "tessera/study/scenario.hpp"

using namespace tessera;
using namespace tessera::cli;
using parallelism::CollectiveKind;

namespace {

// Two nodes of four GPUs, tp 4 inside a node, dp 2 across the nodes; one
// leaf per node (four HCAs each) under a single spine of 200 Gb/s per link.
// Hidden 1024 x 1024 tokens per micro-batch in fp16: 2 MiB per activation.
// The NCCL calibration at line rate (efficiency 1, no launch or step cost).
constexpr const char* kScenario = R"(name: tp4dp2
cluster:
  nodes: 2
  gpus_per_node: 4
  gpu: A100-80GB
  nvlink_bandwidth: 300GB/s
  nvlink_latency: 1us
  nic_bandwidth: 200Gbps
  nic_latency: 1us
  fabric: {type: leaf-spine, hosts_per_leaf: 4, spines: 1, spine_bandwidth: 200Gbps, spine_latency: 1us}
model: {layers: 2, hidden: 1024, heads: 16, vocab: 32000}
training:
  micro_batch: 1
  seq_len: 1024
  global_batch: 4
  dtype: fp16
parallelism:
  tp: 4
  dp: 2
calibration:
  nvlink_efficiency: 1
  nvlink_group_penalty: 0
  nvlink_launch: 0us
  nvlink_step: 0us
  network_efficiency: 1
  network_group_penalty: 0
  network_launch: 0us
  network_step: 0us
)";

const study::CollectiveTableRow* find(const study::CollectiveTable& t, const std::string& role) {
  for (const auto& r : t.rows) {
    if (r.role == role) return &r;
  }
  return nullptr;
}

bool holds(const study::CollectiveTableRow& r, int stage) {
  return std::find(r.stages.begin(), r.stages.end(), stage) != r.stages.end();
}

// Each stage's sums are those of the rows it is under, each row once for
// each of its stages (helper 152: stage 1's counted the layers' all-reduces,
// listed under stage 0 alone); every row's stages ascend from its `stage`,
// and no two rows differ in their stages alone (helper 155: they share one).
void expect_stage_sums_of_rows(const study::CollectiveTable& t) {
  const auto stages = static_cast<int>(t.nvlink_per_stage.size());
  ASSERT_EQ(t.network_per_stage.size(), t.nvlink_per_stage.size());
  ASSERT_EQ(t.nvlink_together_per_stage.size(), t.nvlink_per_stage.size());
  ASSERT_EQ(t.network_together_per_stage.size(), t.nvlink_per_stage.size());
  for (const auto& r : t.rows) {
    ASSERT_FALSE(r.stages.empty()) << r.role;
    EXPECT_EQ(r.stage, r.stages.front()) << r.role;
    EXPECT_TRUE(std::is_sorted(r.stages.begin(), r.stages.end())) << r.role;
    EXPECT_EQ(std::adjacent_find(r.stages.begin(), r.stages.end()), r.stages.end()) << r.role;
    EXPECT_GE(r.stages.front(), 0) << r.role;
    EXPECT_LT(r.stages.back(), stages) << r.role;
  }
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    for (std::size_t j = i + 1; j < t.rows.size(); ++j) {
      const auto& a = t.rows[i];
      const auto& b = t.rows[j];
      EXPECT_FALSE(a.role == b.role && a.kind == b.kind && a.bytes == b.bytes &&
                   a.group_size == b.group_size && a.nodes == b.nodes && a.algorithm == b.algorithm &&
                   a.calls == b.calls && a.concurrent_groups == b.concurrent_groups && a.alone == b.alone &&
                   a.together == b.together)
          << a.role << " in two rows, stages " << study::stage_ranges(a.stages) << " and "
          << study::stage_ranges(b.stages);
    }
  }
  for (int stage = 0; stage < stages; ++stage) {
    Time nvlink, network, nvlink_together, network_together;
    for (const auto& r : t.rows) {
      if (!holds(r, stage)) continue;
      (r.nodes > 1 ? network : nvlink) += r.alone * r.calls;
      (r.nodes > 1 ? network_together : nvlink_together) += r.together * r.calls;
    }
    const auto at = static_cast<std::size_t>(stage);
    EXPECT_EQ(t.nvlink_per_stage[at], nvlink) << stage;
    EXPECT_EQ(t.network_per_stage[at], network) << stage;
    EXPECT_EQ(t.nvlink_together_per_stage[at], nvlink_together) << stage;
    EXPECT_EQ(t.network_together_per_stage[at], network_together) << stage;
  }
}

}  // namespace

TEST(CollectiveTable, StageRanges) {
  EXPECT_EQ(study::stage_ranges({0}), "0");
  EXPECT_EQ(study::stage_ranges({0, 15}), "0,15");
  EXPECT_EQ(study::stage_ranges({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}), "1-14");
  EXPECT_EQ(study::stage_ranges({1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}), "1-2,4-14");
  EXPECT_EQ(study::stage_ranges({3, 7, 11}), "3,7,11");
  EXPECT_EQ(study::stage_ranges({0, 1, 2, 4, 5, 6}), "0-2,4-6");
}

TEST(CollectiveTable, SizesGroupsAndCallsOfATensorAndDataParallelPlan) {
  const study::Scenario s = parse_scenario(kScenario, "tp4dp2.yaml");
  const study::CollectiveTable t = study::collective_table(s);
  // Each distinct collective once.
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    for (std::size_t j = i + 1; j < t.rows.size(); ++j) {
      EXPECT_FALSE(t.rows[i].role == t.rows[j].role && t.rows[i].bytes == t.rows[j].bytes) << t.rows[i].role;
    }
  }
  // Tensor parallelism: all-reduces of one activation (2 MiB) among the
  // node's 4 GPUs, and every one of them runs one (2 groups at once). Per
  // iteration, 2 micro-batches: the embedding's forward and the LM head's
  // backward once each, the layers' forward (attention and MLP outputs) and
  // backward (their input gradients) twice per layer each, 2 layers.
  const std::map<std::string, std::int64_t> tp_calls{{"embedding.fwd.tp.all-reduce", 2},
                                                     {"layer.fwd.tp.all-reduce", 8},
                                                     {"layer.bwd.tp.all-reduce", 8},
                                                     {"lm_head.bwd.tp.all-reduce", 2}};
  for (const auto& [role, calls] : tp_calls) {
    const auto* r = find(t, role);
    ASSERT_NE(r, nullptr) << role;
    EXPECT_EQ(r->kind, CollectiveKind::AllReduce) << role;
    EXPECT_EQ(r->bytes, Bytes(2LL * 1024 * 1024)) << role;
    EXPECT_EQ(r->group_size, 4) << role;
    EXPECT_EQ(r->nodes, 1) << role;
    EXPECT_EQ(r->concurrent_groups, 2) << role;
    EXPECT_EQ(r->calls, calls) << role;
  }
  // The vocabulary-parallel cross entropy: three all-reduces of one FP32
  // value per token (1024 x 4 B = 4 KiB) in each micro-batch's forward.
  const auto* loss = find(t, "lm_head.fwd.tp.loss.all-reduce");
  ASSERT_NE(loss, nullptr);
  EXPECT_EQ(loss->bytes, Bytes(1024LL * 4));
  EXPECT_EQ(loss->group_size, 4);
  EXPECT_EQ(loss->calls, 6);
  EXPECT_EQ(t.rows.size(), tp_calls.size() + 2);
  // Data parallelism: one all-reduce of one rank's gradients between the two
  // nodes, 4 groups at once; in fp16 Megatron reduces them in fp16 (in bf16
  // its FP32 main gradients).
  const auto* dp = find(t, "dp.grad.all-reduce.bucket");
  ASSERT_NE(dp, nullptr);
  const auto summary = parallelism::estimate_memory(s.model, s.workload, s.plan, Bytes(0));
  EXPECT_EQ(dp->bytes, Bytes(summary.params_per_stage.at(0) * 2));
  EXPECT_EQ(dp->group_size, 2);
  EXPECT_EQ(dp->nodes, 2);
  EXPECT_EQ(dp->calls, 1);
  EXPECT_EQ(dp->concurrent_groups, 4);
  EXPECT_EQ(dp->algorithm, collectives::Algorithm::Ring);
  // One stage: its rank's collectives one after another.
  ASSERT_EQ(t.nvlink_per_stage.size(), 1u);
  Time nvlink, network, nvlink_together, network_together;
  for (const auto& r : t.rows) {
    (r.nodes > 1 ? network : nvlink) += r.alone * r.calls;
    (r.nodes > 1 ? network_together : nvlink_together) += r.together * r.calls;
  }
  EXPECT_EQ(t.nvlink_per_stage[0], nvlink);
  EXPECT_EQ(t.network_per_stage[0], network);
  // With the stage's four data-parallel groups on the fabric at once, the
  // sums of the `together` times: the groups across nodes take longer.
  ASSERT_EQ(t.network_together_per_stage.size(), 1u);
  EXPECT_EQ(t.nvlink_together_per_stage[0], nvlink_together);
  EXPECT_EQ(t.network_together_per_stage[0], network_together);
  EXPECT_GT(t.network_together_per_stage[0], t.network_per_stage[0]);
}

TEST(CollectiveTable, TimesOnTheFabricAloneAndTogether) {
  const study::Scenario s = parse_scenario(kScenario, "tp4dp2.yaml");
  const study::CollectiveTable t = study::collective_table(s);
  const auto* dp = find(t, "dp.grad.all-reduce.bucket");
  ASSERT_NE(dp, nullptr);
  // A two-rank ring all-reduce sends half the buffer each way, twice: the
  // whole buffer per rank at the NIC's 25 GB/s (bus bytes 2(2-1)/2 S = S),
  // plus a few microseconds of path latency and the reduction.
  const double nic = 200e9 / 8;
  EXPECT_NEAR(study::bus_bandwidth(*dp, dp->alone) / nic, 1.0, 0.02);
  // Four at once: the node's four HCAs share its leaf's one 200 Gb/s uplink.
  EXPECT_NEAR(dp->together.seconds() / dp->alone.seconds(), 4.0, 0.1);
  // Inside a node the two tensor-parallel groups do not meet: together = alone;
  // a 4-rank ring all-reduce of 2 MiB at 300 GB/s: 2(3/4) x 2 MiB / 300 GB/s
  // = 10.5 us, plus 6 steps of a path of two 1 us NVLink hops.
  const auto& tp = t.rows.front();
  ASSERT_EQ(tp.group_size, 4);
  EXPECT_EQ(tp.together, tp.alone);
  EXPECT_GT(tp.alone.us(), 10.48);
  EXPECT_LT(tp.alone.us(), 10.49 + 6 * 2.0 + 2.0);
}

// The same two nodes, tp 4 inside a node, as two pipeline stages (one per
// node, one layer each): every stage calls the layers' tensor-parallel
// all-reduces, the two sides of each send/recv pair and the tied
// embedding's all-reduce between the first and last stages.
TEST(CollectiveTable, EachStageSumsTheRowsListedUnderIt) {
  std::string text = kScenario;
  const std::string dp = "  dp: 2\n";
  text.replace(text.find(dp), dp.size(), "  pp: 2\n");
  const study::Scenario s = parse_scenario(text, "tp4pp2.yaml");
  ASSERT_EQ(s.plan.pp, 2);
  const study::CollectiveTable t = study::collective_table(s);
  ASSERT_EQ(t.nvlink_per_stage.size(), 2u);
  ASSERT_EQ(t.network_together_per_stage.size(), 2u);
  expect_stage_sums_of_rows(t);
  // Each stage's rows hold every collective its rank calls, once: their
  // calls add up to the collective tasks of the stage's first rank.
  const auto predictor = study::make_scenario_predictor(s);
  const auto graph = parallelism::plan_training(s.model, s.workload, s.plan, *predictor);
  for (int stage = 0; stage < 2; ++stage) {
    int rank = 0;
    while (parallelism::rank_coord(s.plan, rank).pp != stage) ++rank;
    std::int64_t tasks = 0;
    for (const auto& task : graph.tasks(rank))
      tasks += task.kind == parallelism::TaskKind::Collective ? 1 : 0;
    std::int64_t calls = 0;
    std::map<std::string, int> seen;
    for (const auto& r : t.rows) {
      if (!holds(r, stage)) continue;
      calls += r.calls;
      EXPECT_EQ(++seen[r.role + "/" + std::to_string(r.bytes.count())], 1)
          << r.role << " twice in stage " << stage;
    }
    EXPECT_EQ(calls, tasks) << stage;
  }
  // A collective both stages call is under each, with that stage's calls:
  // the layers' forward all-reduces (4 micro-batches x 1 layer x 2), and
  // the tied embedding's gradient all-reduce between the two nodes; each
  // the same on both stages' groups, so in one row for both (helper 155).
  for (const std::string_view role : {"layer.fwd.tp.all-reduce", "embedding.grad.all-reduce"}) {
    const auto it = std::find_if(t.rows.begin(), t.rows.end(), [&](const auto& r) { return r.role == role; });
    ASSERT_NE(it, t.rows.end()) << role;
    EXPECT_EQ(it->stages, (std::vector<int>{0, 1})) << role;
    EXPECT_EQ(it->stage, 0) << role;
    EXPECT_EQ(it->calls, role == "layer.fwd.tp.all-reduce" ? 8 : 1) << role;
  }
  // A send/recv pair is under both of its stages, as each side's role.
  const auto under = [&](const std::string& role) {
    std::set<int> stages;
    for (const auto& r : t.rows) {
      if (r.role == role) stages.insert(r.stages.begin(), r.stages.end());
    }
    return stages;
  };
  EXPECT_EQ(under("pp.send_activation"), std::set<int>{0});
  EXPECT_EQ(under("pp.recv_activation"), std::set<int>{1});
  EXPECT_EQ(under("pp.send_gradient"), std::set<int>{1});
  EXPECT_EQ(under("pp.recv_gradient"), std::set<int>{0});
}

// gpt3-175b's 16 stages (tp 8 inside a node, dp 8 and pp 16 across nodes):
// the middle stages run the same layers on groups of the same shape, so
// what they call alike shares one row with their stages as ranges (helper
// 155: they listed 180 rows, mostly the same for stages 1 to 14), and each
// stage's sums are still its rows'.
TEST(CollectiveTable, StagesThatCallACollectiveAlikeShareItsRow) {
  const study::Scenario s = load_scenario(std::string(TESSERA_SCENARIO_DIR) + "/gpt3-175b.yaml", {});
  ASSERT_EQ(s.plan.pp, 16);
  const study::CollectiveTable t = study::collective_table(s);
  ASSERT_EQ(t.nvlink_per_stage.size(), 16u);
  expect_stage_sums_of_rows(t);
  // Every stage's rank calls the layers' tensor-parallel collectives alike:
  // one row each, under all 16 stages.
  const auto* fwd = find(t, "layer.fwd.tp.all-gather");
  ASSERT_NE(fwd, nullptr);
  EXPECT_EQ(study::stage_ranges(fwd->stages), "0-15");
  // The middle stages' data-parallel gradients (the same layers, no
  // embedding or LM head): one row for stages 1 to 14, after stage 0's own
  // (which holds the embedding too).
  std::vector<std::string> grads;
  for (const auto& r : t.rows) {
    if (r.role == "dp.grad.reduce-scatter.bucket") grads.push_back(study::stage_ranges(r.stages));
  }
  EXPECT_EQ(grads, (std::vector<std::string>{"0", "1-14", "15"}));
  // The tied embedding's all-reduce, between the first and last stages.
  const auto* tied = find(t, "embedding.grad.all-reduce");
  ASSERT_NE(tied, nullptr);
  EXPECT_EQ(tied->stages, (std::vector<int>{0, 15}));
  // In order of first stage; far fewer rows than the stages' collectives
  // one stage at a time (27 of 180).
  for (std::size_t i = 1; i < t.rows.size(); ++i) EXPECT_LE(t.rows[i - 1].stage, t.rows[i].stage) << i;
  std::size_t per_stage_rows = 0;
  for (const auto& r : t.rows) per_stage_rows += r.stages.size();
  EXPECT_LT(t.rows.size() * 4, per_stage_rows);
}

TEST(CollectiveTable, RefusesJobs) {
  const study::Scenario s = load_scenario(std::string(TESSERA_SCENARIO_DIR) + "/two-jobs.yaml", {});
  EXPECT_THROW((void)study::collective_table(s), study::ScenarioError);
}
