#include <gtest/gtest.h>

#include <algorithm>

#include "tessera/error.hpp"
#include "tessera/node_model/roofline.hpp"
#include "tessera/parallelism/data_parallel.hpp"

using namespace tessera;
using namespace tessera::parallelism;
using node_model::DType;

TEST(Transformer, Gpt2LargeParameterCount) {
  const auto& m = model_preset("gpt2-large");
  // GPT-2 Large has 774M parameters (36 layers of 12h^2+13h, plus embeddings).
  EXPECT_EQ(m.params_per_layer(), 12 * 1280 * 1280 + 13 * 1280);
  const std::int64_t total = m.layers * m.params_per_layer() + m.embedding_params(1024);
  EXPECT_NEAR(static_cast<double>(total), 774.0e6, 2e6);
}

TEST(Transformer, LayerFlopsMatchTheTextbook) {
  const auto& m = model_preset("gpt3-xl");
  Workload w{2, 2048, DType::BF16};
  double gemm = 0;
  for (const auto& op : layer_forward_ops(m, w)) {
    if (node_model::is_gemm(op.kernel.op)) gemm += op.kernel.flops().count();
  }
  // Forward GEMM FLOPs per layer: 24 b s h^2 + 4 b s^2 h (Megatron's formula, f = 4h).
  const double b = 2, s = 2048, h = 2048;
  EXPECT_DOUBLE_EQ(gemm, 24 * b * s * h * h + 4 * b * s * s * h);
  double bwd = 0;
  for (const auto& op : layer_backward_ops(m, w)) {
    if (node_model::is_gemm(op.kernel.op)) bwd += op.kernel.flops().count();
  }
  EXPECT_DOUBLE_EQ(bwd, 2 * gemm);
}

TEST(Transformer, SoftmaxBackwardReadsTheOutputAndItsGradient) {
  const auto& m = model_preset("gpt2-large");
  Workload w{2, 1024, DType::BF16};
  std::vector<Op> grads;
  for (const auto& op : layer_backward_ops(m, w)) {
    if (op.name.rfind("softmax.", 0) == 0) grads.push_back(op);
  }
  // A row pass of the forward's shape plus a binary elementwise pass: two
  // input streams (y, dy) where the forward has one.
  ASSERT_EQ(grads.size(), 2U);
  EXPECT_EQ(grads[0].kernel.op, node_model::KernelOp::Softmax);
  EXPECT_EQ(grads[1].kernel.op, node_model::KernelOp::Mul);
  for (const auto& g : grads) {
    EXPECT_EQ(g.kernel.b, 2 * 20 * 1024);  // batch x heads x query rows
    EXPECT_EQ(g.kernel.h, 1024);
  }
}

TEST(DataParallel, OneAllReducePerBucketAfterBackward) {
  const auto& m = model_preset("gpt2-large");
  node_model::RooflinePredictor pred(node_model::gpu_preset("H100-SXM"));
  DataParallelPlan plan{4, Bytes(100'000'000)};
  const auto g = plan_data_parallel(m, Workload{1, 1024, DType::BF16}, plan, pred);
  ASSERT_EQ(g.num_ranks(), 4);
  ASSERT_NO_THROW(g.validate());
  const auto& tasks = g.tasks(0);
  std::int64_t reduced = 0;
  int collectives = 0;
  for (const auto& t : tasks) {
    if (t.kind != TaskKind::Collective) continue;
    ++collectives;
    reduced += t.bytes.count();
    // Every all-reduce waits for a backward (or the embedding backward) task.
    ASSERT_EQ(t.deps.size(), 1U);
    EXPECT_NE(tasks[static_cast<std::size_t>(t.deps[0])].name.find(".bwd"), std::string::npos);
  }
  const std::int64_t params = m.layers * m.params_per_layer() + m.embedding_params(1024);
  EXPECT_EQ(reduced, params * 2);  // bf16 gradients, every parameter exactly once
  // A layer has 39.4 MB of bf16 gradients: three layers fill a 100 MB bucket
  // (12 buckets for 36 layers), then the 131 MB embedding gradient is its own.
  EXPECT_EQ(collectives, 13);
  EXPECT_EQ(tasks.back().name, "optimizer");
  EXPECT_EQ(tasks.back().deps.size(), 1U + static_cast<std::size_t>(collectives));
}

TEST(DataParallel, RejectsBadPlans) {
  const auto& m = model_preset("gpt2-large");
  node_model::RooflinePredictor pred(node_model::gpu_preset("H100-SXM"));
  EXPECT_THROW(plan_data_parallel(m, Workload{1, 1024, DType::BF16}, DataParallelPlan{0, Bytes(1)}, pred),
               InputError);
  EXPECT_THROW(plan_data_parallel(m, Workload{0, 1024, DType::BF16}, DataParallelPlan{2, Bytes(1)}, pred),
               InputError);
}

TEST(TaskGraph, ValidateCatchesMismatchedCollectives) {
  TaskGraph g;
  g.groups.push_back(Group{{0, 1}});
  Task ar;
  ar.kind = TaskKind::Collective;
  ar.group = 0;
  ar.collective_id = 7;
  ar.bytes = Bytes(100);
  Program with, without;
  with.tasks.push_back(ar);
  g.add_rank(g.add_program(with), {0});
  g.add_rank(g.add_program(without), {0});
  EXPECT_THROW(g.validate(), InputError);  // rank 1 never joins
  Program bigger;
  ar.bytes = Bytes(200);
  bigger.tasks.push_back(ar);
  g.programs[1] = std::make_shared<const Program>(bigger);
  EXPECT_THROW(g.validate(), InputError);  // sizes disagree
  g.ranks[1].program = 0;
  EXPECT_NO_THROW(g.validate());
}

TEST(Transformer, Fp32AttentionRunsTheUnfusedSoftmaxPath) {
  const auto& m = model_preset("gpt2-large");
  auto names = [&](DType dt) {
    std::vector<std::string> out;
    for (const auto& op : layer_forward_ops(m, Workload{1, 1024, dt})) out.push_back(op.name);
    return out;
  };
  auto has = [](const std::vector<std::string>& v, const char* n) { return std::find(v.begin(), v.end(), n) != v.end(); };
  // FP32: Megatron's torch softmax path (scale, mask, softmax) + dropout; 16-bit: one fused kernel + dropout.
  for (const char* n : {"scale", "mask", "softmax", "attn_dropout", "context_copy"}) EXPECT_TRUE(has(names(DType::FP32), n)) << n;
  EXPECT_FALSE(has(names(DType::BF16), "scale"));
  EXPECT_FALSE(has(names(DType::BF16), "mask"));
  EXPECT_TRUE(has(names(DType::BF16), "attn_dropout"));
}

TEST(Transformer, OptimizerStreamsUseMeasuredRowWidths) {
  // A flat pass over all parameters is rows of kFlatStreamRow elements, never one 1 x N row.
  for (const auto& op : fused_optimizer_ops(774'030'080, DType::FP32, true)) {
    EXPECT_EQ(op.kernel.h, kFlatStreamRow) << op.name;
    EXPECT_GE(op.kernel.b * op.kernel.h, 774'030'080 / 2) << op.name;
  }
}
