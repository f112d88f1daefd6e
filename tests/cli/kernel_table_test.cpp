// `tessera kernels`' table (study::kernel_table): the kernels of one rank's
// share of the model with the shapes Megatron's tensor parallelism gives
// them (checked by hand), each distinct kernel once with every execution
// listed, and the times the planner uses (device time under Megatron, the
// isolated eager time under pytorch-eager).
#include <gtest/gtest.h>

#include <array>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tessera/cli/scenario.hpp"
#include "tessera/parallelism/transformer.hpp"
#include "tessera/study/kernels.hpp"

using namespace tessera;
using namespace tessera::cli;
namespace nm = tessera::node_model;

namespace {

// Two GPUs, tp = 2; hidden 1024 (16 heads of 64), MLP 4096, vocabulary
// 32000 (a multiple of Megatron's 128 x tp padding: 16000 rows per rank),
// 2 x 2048 tokens per micro-batch.
constexpr const char* kScenario = R"(name: tp2
cluster:
  nodes: 1
  gpus_per_node: 2
  gpu: A100-80GB
  nvlink_bandwidth: 300GB/s
  nvlink_latency: 1us
  nic_bandwidth: 200Gbps
  nic_latency: 1us
  fabric: {type: leaf-spine, hosts_per_leaf: 1, spines: 1, spine_bandwidth: 200Gbps, spine_latency: 600ns}
model: {layers: 2, hidden: 1024, heads: 16, vocab: 32000}
training:
  micro_batch: 2
  seq_len: 2048
  global_batch: 4
  dtype: fp16
parallelism:
  tp: 2
  recompute: full
)";

const study::KernelTableRow* find_use(const study::KernelTable& t, const std::string& part,
                                      const std::string& op, const std::string& pass) {
  for (const auto& u : t.uses) {
    if (u.part == part && u.op == op && study::to_string(u.pass) == pass) return &t.rows[u.row];
  }
  return nullptr;
}

void expect_gemm(const study::KernelTable& t, const std::string& part, const std::string& op,
                 const std::string& pass, nm::KernelOp kop, std::int64_t b, std::int64_t m, std::int64_t n,
                 std::int64_t k) {
  const auto* r = find_use(t, part, op, pass);
  ASSERT_NE(r, nullptr) << part << ":" << op << "." << pass;
  EXPECT_EQ(r->kernel.op, kop) << op;
  EXPECT_EQ(r->kernel.dtype, nm::DType::FP16) << op;
  EXPECT_EQ(std::make_tuple(r->kernel.b, r->kernel.m, r->kernel.n, r->kernel.k), std::make_tuple(b, m, n, k))
      << part << ":" << op << "." << pass;
}

}  // namespace

TEST(KernelTable, GemmsHaveTheShapesOfOneTensorParallelRank) {
  const study::Scenario s = parse_scenario(kScenario, "tp2.yaml");
  const study::KernelTable t = study::kernel_table(s);
  EXPECT_TRUE(t.device_time);  // megatron: GPU time, the host is the host model's
  // 4096 tokens; QKV column-parallel: 3 x 1024 / 2 outputs.
  expect_gemm(t, "layer", "qkv", "forward", nm::KernelOp::Linear, 1, 4096, 1536, 1024);
  expect_gemm(t, "layer", "qkv", "input_grad", nm::KernelOp::Linear, 1, 4096, 1024, 1536);
  expect_gemm(t, "layer", "qkv", "weight_grad", nm::KernelOp::Linear, 1, 1024, 1536, 4096);
  // Scores: micro-batch x heads / tp = 16 batched 2048 x 64 @ 64 x 2048.
  expect_gemm(t, "layer", "scores", "forward", nm::KernelOp::Bmm, 16, 2048, 2048, 64);
  // Row-parallel projection and fc2: the reduction is split.
  expect_gemm(t, "layer", "proj", "forward", nm::KernelOp::Linear, 1, 4096, 1024, 512);
  expect_gemm(t, "layer", "fc1", "forward", nm::KernelOp::Linear, 1, 4096, 2048, 1024);
  expect_gemm(t, "layer", "fc2", "forward", nm::KernelOp::Linear, 1, 4096, 1024, 2048);
  // Vocabulary-parallel LM head: 32000 / 2 rows.
  expect_gemm(t, "lm_head", "lm_head", "forward", nm::KernelOp::Linear, 1, 4096, 16000, 1024);
  // The causal softmax over 16 x 2048 rows of 2048 (Megatron's fused kernel).
  const auto* sm = find_use(t, "layer", "softmax", "forward");
  ASSERT_NE(sm, nullptr);
  EXPECT_EQ(sm->kernel.op, nm::KernelOp::Softmax);
  EXPECT_EQ(std::make_tuple(sm->kernel.b, sm->kernel.h),
            std::make_tuple(std::int64_t{16LL * 2048}, std::int64_t{2048}));
}

TEST(KernelTable, EachDistinctKernelOnceWithEveryExecution) {
  const study::Scenario s = parse_scenario(kScenario, "tp2.yaml");
  const study::KernelTable t = study::kernel_table(s);
  // Rows are distinct kernels.
  std::set<nm::Kernel> kernels;
  for (const auto& r : t.rows) EXPECT_TRUE(kernels.insert(r.kernel).second);
  // Every execution of one layer is listed: as many as layer_ops' passes hold.
  std::size_t layer_kernels = 0;
  for (const auto& op : parallelism::layer_ops(s.model, s.workload, parallelism::Sharding{2, false})) {
    layer_kernels += op.forward.kernels.size() + op.input_grad.kernels.size() + op.weight_grad.kernels.size();
  }
  std::size_t layer_uses = 0;
  std::map<std::size_t, std::size_t> per_row;
  for (const auto& u : t.uses) {
    layer_uses += u.part == "layer" ? 1 : 0;
    ++per_row[u.row];
  }
  EXPECT_EQ(layer_uses, layer_kernels);
  // Every row is used; the layer norm's two backward row passes are one
  // kernel run twice, and ln1, ln2 and the LM head's ln_f share it (no
  // sequence parallelism: 4096 rows of 1024 each).
  ASSERT_EQ(per_row.size(), t.rows.size());
  const auto* ln = find_use(t, "layer", "ln1", "input_grad");
  ASSERT_NE(ln, nullptr);
  EXPECT_EQ(per_row[static_cast<std::size_t>(ln - t.rows.data())], 9u);
  // The parts in model order, a dense model has no MoE layer.
  EXPECT_EQ(t.uses.front().part, "embedding");
  EXPECT_EQ(t.uses.back().part, "lm_head");
  for (const auto& u : t.uses) EXPECT_NE(u.part, "moe_layer");
}

TEST(KernelTable, TimesAreThePlannersDeviceOrEagerTimes) {
  const study::Scenario megatron = parse_scenario(kScenario, "tp2.yaml");
  const study::Scenario eager =
      parse_scenario(kScenario, "tp2.yaml", {{"training.framework", "pytorch-eager"}});
  const auto predictor = study::make_scenario_predictor(megatron);
  const study::KernelTable tm = study::kernel_table(megatron);
  const study::KernelTable te = study::kernel_table(eager);
  EXPECT_TRUE(tm.device_time);
  EXPECT_FALSE(te.device_time);
  for (const auto& r : tm.rows) EXPECT_EQ(r.time, predictor->predict_device(r.kernel));
  bool floor_seen = false;
  for (const auto& r : te.rows) {
    EXPECT_EQ(r.time, predictor->predict(r.kernel));
    floor_seen = floor_seen || r.time > predictor->predict_device(r.kernel);
  }
  EXPECT_TRUE(floor_seen);  // eager kernels carry their launch floor
}

TEST(KernelTable, AFusedKernelsPartsAreTimedWithoutAFloorAndCountedOnce) {
  // FlashAttention: one launch each way, listed as its GEMMs (QK^T and PV
  // forward; QK^T again and four gradients backward); the weight-gradient
  // GEMMs accumulate into the FP32 main gradient (a part of their launch).
  const study::Scenario s = parse_scenario(kScenario, "tp2.yaml", {{"training.flash_attention", "true"}});
  const auto predictor = study::make_scenario_predictor(s);
  const study::KernelTable t = study::kernel_table(s);
  std::map<std::string, int> parts, launched;
  for (const auto& u : t.uses) {
    if (u.part != "layer") continue;
    const std::string key = u.op + "." + std::string(study::to_string(u.pass));
    (u.fused_part ? parts : launched)[key] += 1;
    const study::KernelTableRow& r = t.rows[u.row];
    EXPECT_EQ(t.time_of(u),
              u.fused_part ? predictor->predict_part(r.kernel) : predictor->predict_device(r.kernel))
        << key;
    EXPECT_EQ(r.part_time, predictor->predict_part(r.kernel)) << key;
  }
  EXPECT_EQ(launched["attention.forward"], 1);
  EXPECT_EQ(parts["attention.forward"], 1);
  EXPECT_EQ(launched["attention.input_grad"], 1);
  EXPECT_EQ(parts["attention.input_grad"], 4);
  for (const char* w : {"qkv.weight_grad", "proj.weight_grad", "fc1.weight_grad", "fc2.weight_grad"}) {
    EXPECT_EQ(parts[w], 1) << w;
  }
  // The layer's kernel count is its launches (parts not counted again).
  int layer_launches = 0;
  for (const auto& [key, n] : launched) layer_launches += n;
  const std::vector<study::PartTotals> totals = study::part_totals(t, s);
  ASSERT_EQ(totals[1].part, "layer");
  EXPECT_EQ(totals[1].kernels, static_cast<std::size_t>(layer_launches));
}

TEST(KernelTable, PartTotalsSumTheUsesAndCountEachPart) {
  // One MoE layer in two (layers 1 and 3 of 4, Megatron's --moe-layer-freq 2
  // after one dense layer): two dense and two MoE layers (tp 2: with
  // sequence parallelism, as an MoE model's tensor parallelism needs).
  const study::Scenario s = parse_scenario(kScenario, "tp2.yaml",
                                           {{"model.layers", "4"},
                                            {"parallelism.sequence_parallel", "true"},
                                            {"model.moe.experts", "4"},
                                            {"model.moe.moe_every", "2"},
                                            {"model.moe.first_dense_layers", "1"}});
  const study::KernelTable t = study::kernel_table(s);
  const std::vector<study::PartTotals> totals = study::part_totals(t, s);
  ASSERT_EQ(totals.size(), 5u);
  const std::vector<std::pair<std::string, std::int64_t>> expected{
      {"embedding", 1}, {"layer", 2}, {"moe_layer", 2}, {"lm_head", 1}, {"model", 1}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(totals[i].part, expected[i].first);
    EXPECT_EQ(totals[i].instances, expected[i].second) << expected[i].first;
  }
  // Each part's sums are its uses' times, pass by pass.
  for (std::size_t i = 0; i + 1 < totals.size(); ++i) {
    std::array<Time, 3> pass{};
    Time gemm;
    std::size_t kernels = 0;
    for (const auto& u : t.uses) {
      if (u.part != totals[i].part) continue;
      pass[static_cast<std::size_t>(u.pass)] += t.time_of(u);
      if (nm::is_gemm(t.rows[u.row].kernel.op)) gemm += t.time_of(u);
      kernels += u.fused_part ? 0 : 1;
    }
    EXPECT_EQ(totals[i].pass, pass) << totals[i].part;
    EXPECT_EQ(totals[i].gemm, gemm) << totals[i].part;
    EXPECT_EQ(totals[i].kernels, kernels) << totals[i].part;
  }
  // A dense layer has 18 GEMMs (qkv, scores, context, proj, fc1, fc2: a
  // forward, an input gradient and a weight gradient each), the LM head 3,
  // the embeddings none.
  EXPECT_EQ(totals[0].gemm_kernels, 0u);
  EXPECT_EQ(totals[1].gemm_kernels, 18u);
  EXPECT_EQ(totals[3].gemm_kernels, 3u);
  // The model: every part times its count.
  const study::PartTotals& m = totals.back();
  EXPECT_EQ(m.gemm_kernels, 2LL * 18 + 2 * totals[2].gemm_kernels + 3);
  EXPECT_EQ(m.kernels, totals[0].kernels + 2 * totals[1].kernels + 2 * totals[2].kernels + totals[3].kernels);
  EXPECT_EQ(m.total(), totals[0].total() + totals[1].total() * 2 + totals[2].total() * 2 + totals[3].total());
  EXPECT_EQ(m.gemm, totals[0].gemm + totals[1].gemm * 2 + totals[2].gemm * 2 + totals[3].gemm);
  EXPECT_GT(m.gemm, Time::zero());
  EXPECT_LT(m.gemm, m.total());
}

TEST(KernelTable, Fp8WeightCastsAreListedOncePerIterationOutsideTheMicroBatchSums) {
  // fp8 training on an H100 (tp 2): Transformer Engine casts each layer
  // linear's weight once per iteration and model chunk (OpKernels::
  // weight_cast, which the planner runs in a chunk's first forward). The
  // table lists them, so that the --out CSV (a node_model.overrides
  // template) holds every kernel the plan times, but sums them apart from
  // the per-micro-batch passes.
  const study::Scenario s = parse_scenario(
      kScenario, "tp2.yaml", {{"cluster.gpu", "H100-SXM"}, {"training.dtype", "fp8"}, {"model.layers", "4"}});
  const study::KernelTable t = study::kernel_table(s);
  std::map<std::string, const study::KernelTableRow*> casts;
  Time layer_casts;
  for (const auto& u : t.uses) {
    if (u.pass != study::OpPass::WeightCast) continue;
    EXPECT_EQ(u.part, "layer");
    EXPECT_EQ(study::to_string(u.pass), "weight_cast");
    casts[u.op] = &t.rows[u.row];
    layer_casts += t.time_of(u);
  }
  // qkv 1024 x 1536, proj 512 x 1024, fc1 1024 x 2048, fc2 2048 x 1024 per
  // rank, each read in bf16 and written in FP8 with its transpose.
  const std::map<std::string, std::int64_t> elements{
      {"qkv", 1024 * 1536}, {"proj", 512 * 1024}, {"fc1", 1024 * 2048}, {"fc2", 2048 * 1024}};
  ASSERT_EQ(casts.size(), elements.size());
  for (const auto& [op, n] : elements) {
    ASSERT_TRUE(casts.contains(op)) << op;
    EXPECT_EQ(casts[op]->kernel.bytes(), Bytes(4 * n)) << op;
  }
  // The per-micro-batch sums leave them out; each part's weight_cast holds
  // them, the model's every layer's.
  const std::vector<study::PartTotals> totals = study::part_totals(t, s);
  ASSERT_EQ(totals[1].part, "layer");
  std::array<Time, 3> pass{};
  std::size_t kernels = 0;
  for (const auto& u : t.uses) {
    if (u.part != "layer" || u.pass == study::OpPass::WeightCast) continue;
    pass[static_cast<std::size_t>(u.pass)] += t.time_of(u);
    kernels += u.fused_part ? 0 : 1;
  }
  EXPECT_EQ(totals[1].pass, pass);
  EXPECT_EQ(totals[1].kernels, kernels);
  EXPECT_GT(layer_casts, Time::zero());
  EXPECT_EQ(totals[1].weight_cast, layer_casts);
  EXPECT_EQ(totals.back().weight_cast, layer_casts * 4);
  EXPECT_EQ(totals[0].weight_cast, Time::zero());  // the embedding and LM head stay bf16
  // bf16: none.
  const study::Scenario bf16 = parse_scenario(kScenario, "tp2.yaml", {{"cluster.gpu", "H100-SXM"}});
  for (const auto& u : study::kernel_table(bf16).uses) EXPECT_NE(u.pass, study::OpPass::WeightCast);
}

TEST(KernelTable, Fp8CastsAndTransposesAreNamedPerUseAndTimedAsTheirMemoryPasses) {
  // The fp8 tp2 scenario (as above): Transformer Engine's casts and
  // transposes are MulU memory passes of their traffic, each execution
  // labelled with what it does (KernelUse::role; the kernels table prints
  // it in place of `mulu`); everything else has none.
  const std::vector<Override> fp8{
      {"cluster.gpu", "H100-SXM"}, {"training.dtype", "fp8"}, {"model.layers", "4"}};
  const study::KernelTable t = study::kernel_table(parse_scenario(kScenario, "tp2.yaml", fp8));
  auto roles = [](const study::KernelTable& table, const std::string& op, study::OpPass pass) {
    std::vector<nm::KernelRole> out;
    for (const auto& u : table.uses) {
      if (u.part == "layer" && u.op == op && u.pass == pass) out.push_back(u.role);
    }
    return out;
  };
  using R = nm::KernelRole;
  using P = study::OpPass;
  // qkv (its input written in FP8 by ln1): the weight cast with its
  // transpose, dy's cast with its transpose, the FP8 input's transpose
  // before the wgrad GEMM; the GEMMs, the main-gradient part and the bias's
  // accumulation unlabelled.
  EXPECT_EQ(roles(t, "qkv", P::WeightCast), std::vector<R>{R::CastTranspose});
  EXPECT_EQ(roles(t, "qkv", P::Forward), std::vector<R>{R::None});
  EXPECT_EQ(roles(t, "qkv", P::InputGrad), (std::vector<R>{R::CastTranspose, R::None}));
  EXPECT_EQ(roles(t, "qkv", P::WeightGrad), (std::vector<R>{R::Transpose, R::None, R::None, R::None}));
  // proj (no sequence parallelism): its input and dy cast with their transposes.
  EXPECT_EQ(roles(t, "proj", P::Forward), (std::vector<R>{R::CastTranspose, R::None}));
  EXPECT_EQ(roles(t, "proj", P::InputGrad), (std::vector<R>{R::CastTranspose, R::None}));
  std::size_t labelled = 0;
  std::set<std::size_t> cast_rows;
  for (const auto& u : t.uses) {
    if (u.role == R::None) continue;
    ++labelled;
    cast_rows.insert(u.row);
    const nm::Kernel& k = t.rows[u.row].kernel;
    EXPECT_EQ(k.op, nm::KernelOp::MulU) << u.op;
    EXPECT_EQ(k.dtype, nm::DType::BF16) << u.op;
    EXPECT_FALSE(u.fused_part) << u.op;
    EXPECT_EQ(t.time_of(u), t.rows[u.row].time) << u.op;
  }
  // 4 weight casts, 4 dy casts, 2 input casts (proj, fc2: the norms write
  // qkv's and fc1's in FP8) and 2 transposes of those (qkv, fc1).
  EXPECT_EQ(labelled, 12U);
  // The label is the use's: proj's dy cast (1024 x 4096 rows of bf16 read,
  // FP8 written twice) is the row of gelu's bias gradient, unlabelled there.
  bool shared = false;
  for (const auto& u : t.uses) shared = shared || (u.role == R::None && cast_rows.contains(u.row));
  EXPECT_TRUE(shared);
  // Under sequence parallelism proj casts its input alone (before the FP8
  // gather) and dy's shard, transposes the gathered dy and, for the weight
  // gradient, its gathered input.
  auto sp = fp8;
  sp.push_back({"parallelism.sequence_parallel", "true"});
  const study::KernelTable t_sp = study::kernel_table(parse_scenario(kScenario, "tp2.yaml", sp));
  EXPECT_EQ(roles(t_sp, "proj", P::Forward), (std::vector<R>{R::Cast, R::None}));
  EXPECT_EQ(roles(t_sp, "proj", P::InputGrad), (std::vector<R>{R::Cast, R::Transpose, R::None}));
  EXPECT_EQ(roles(t_sp, "proj", P::WeightGrad), (std::vector<R>{R::Transpose, R::None, R::None}));
  EXPECT_EQ(nm::to_string(R::Cast), "cast");
  EXPECT_EQ(nm::to_string(R::Transpose), "transpose");
  EXPECT_EQ(nm::to_string(R::CastTranspose), "cast+transpose");
  // bf16: none.
  const study::Scenario bf16 = parse_scenario(kScenario, "tp2.yaml", {{"cluster.gpu", "H100-SXM"}});
  for (const auto& u : study::kernel_table(bf16).uses) EXPECT_EQ(u.role, R::None) << u.op;
}
