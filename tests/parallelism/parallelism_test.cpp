#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "tessera/error.hpp"
#include "tessera/node_model/predictors.hpp"
#include "tessera/node_model/roofline.hpp"
#include "tessera/parallelism/passes.hpp"
#include "tessera/parallelism/plan.hpp"

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

TEST(Transformer, UnknownPresetNamesANearMissNotAnotherSize) {
  auto error = [](const std::string& name) {
    try {
      (void)model_preset(name);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("gpt3-175")
                .rfind("unknown model preset 'gpt3-175', did you mean 'gpt3-175b'? (known: gpt2-large, ", 0),
            0U)
      << error("gpt3-175");
  // llama2-7b is another model than llama2-70b: no hint, the list alone.
  EXPECT_EQ(error("llama2-7b").rfind("unknown model preset 'llama2-7b' (known: gpt2-large, ", 0), 0U)
      << error("llama2-7b");
}

TEST(Transformer, LayerFlopsMatchTheTextbook) {
  const auto& m = model_preset("gpt3-xl");
  for (auto fw : {node_model::Framework::Megatron, node_model::Framework::PyTorchEager}) {
    Workload w{2, 2048, DType::BF16, fw};
    double gemm = 0, bwd = 0;
    for (const auto& op : layer_ops(m, w)) {
      for (const auto& k : op.forward.kernels) {
        if (node_model::is_gemm(k.op)) gemm += k.flops().count();
      }
      for (const auto* pass : {&op.input_grad, &op.weight_grad}) {
        for (const auto& k : pass->kernels) {
          if (node_model::is_gemm(k.op)) bwd += k.flops().count();
        }
      }
    }
    // Forward GEMM FLOPs per layer: 24 b s h^2 + 4 b s^2 h (Megatron's formula, f = 4h).
    const double b = 2, s = 2048, h = 2048;
    EXPECT_DOUBLE_EQ(gemm, 24 * b * s * h * h + 4 * b * s * s * h);
    EXPECT_DOUBLE_EQ(bwd, 2 * gemm);
  }
}

TEST(Transformer, SoftmaxBackwardReadsTheOutputAndItsGradient) {
  const auto& m = model_preset("gpt2-large");
  auto softmax = [&](DType dt) {
    const auto ops = layer_ops(m, Workload{2, 1024, dt});
    const auto it = std::find_if(ops.begin(), ops.end(), [](const OpKernels& o) { return o.name == "softmax"; });
    EXPECT_NE(it, ops.end());
    return *it;
  };
  // FP32 (PyTorch's softmax): a row pass of the forward's shape plus a binary
  // elementwise pass, two input streams (y, dy) where the forward has one.
  const OpKernels f32 = softmax(DType::FP32);
  ASSERT_EQ(f32.input_grad.kernels.size(), 2U);
  EXPECT_EQ(f32.input_grad.launches, 1);
  EXPECT_EQ(f32.input_grad.kernels[0].op, node_model::KernelOp::Softmax);
  EXPECT_EQ(f32.input_grad.kernels[1].op, node_model::KernelOp::Mul);
  // 16-bit (Megatron's fused kernel): one pass reading y and dy, writing dx.
  const OpKernels f16 = softmax(DType::BF16);
  ASSERT_EQ(f16.input_grad.kernels.size(), 1U);
  EXPECT_EQ(f16.input_grad.kernels[0].op, node_model::KernelOp::Mul);
  for (const auto* k : {&f32.input_grad.kernels[0], &f16.input_grad.kernels[0]}) {
    EXPECT_EQ(k->b, 2 * 20 * 1024);  // batch x heads x query rows
    EXPECT_EQ(k->h, 1024);
  }
}

TEST(DataParallel, OverlappedBucketsFollowTheBackward) {
  const auto& m = model_preset("gpt2-large");
  node_model::RooflinePredictor pred(node_model::gpu_preset("H100-SXM"));
  ParallelPlan plan;
  plan.dp = 4;
  plan.bucket_size = Bytes(100'000'000);
  plan.grad_sync = GradSync::Overlapped;
  const Workload w{1, 1024, DType::BF16, node_model::Framework::PyTorchEager};
  const auto g = plan_training(m, w, plan, pred);
  ASSERT_EQ(g.num_ranks(), 4);
  ASSERT_NO_THROW(g.validate());
  const auto& tasks = g.tasks(0);
  std::int64_t reduced = 0;
  int collectives = 0;
  for (const auto& t : tasks) {
    if (t.kind != TaskKind::Collective) continue;
    ++collectives;
    reduced += t.bytes.count();
    // Every all-reduce waits for a backward task.
    ASSERT_EQ(t.deps.size(), 1U);
    EXPECT_NE(tasks[static_cast<std::size_t>(t.deps[0])].name.find("bwd"), std::string::npos);
  }
  const std::int64_t params = m.layers * m.params_per_layer() + m.embedding_params(1024);
  EXPECT_EQ(reduced, params * 2);  // bf16 gradients, every parameter exactly once
  // A layer has 39.4 MB of bf16 gradients: three layers fill a 100 MB bucket
  // (12 buckets for 36 layers), then the 131 MB embedding gradient is its own.
  EXPECT_EQ(collectives, 13);
  EXPECT_EQ(tasks.back().name, "optimizer");
}

TEST(DataParallel, MegatronReducesTheWholeBufferAfterTheBackward) {
  const auto& m = model_preset("gpt2-large");
  node_model::RooflinePredictor pred(node_model::gpu_preset("H100-SXM"));
  ParallelPlan plan;
  plan.dp = 4;
  for (auto dt : {DType::BF16, DType::FP16}) {
    const Workload w{1, 1024, dt, node_model::Framework::Megatron};
    EXPECT_EQ(plan.resolved_grad_sync(w), GradSync::AfterBackward);
    const auto g = plan_training(m, w, plan, pred);
    std::vector<const Task*> ar;
    for (const auto& t : g.tasks(0)) {
      if (t.kind == TaskKind::Collective) ar.push_back(&t);
    }
    ASSERT_EQ(ar.size(), 1U);
    // Megatron pads the vocabulary to a multiple of 128 (50,304 rows) and
    // keeps FP32 main gradients with bf16, 16-bit ones with fp16.
    const std::int64_t params = m.layers * m.params_per_layer() + 50304LL * 1280 + 1024LL * 1280 + 2LL * 1280;
    EXPECT_EQ(ar[0]->bytes.count(), params * (dt == DType::BF16 ? 4 : 2)) << to_string(dt);
  }
}

TEST(DataParallel, MegatronCoreOverlapGradReduceBucketsTheMainGradients) {
  // --overlap-grad-reduce: FP32 main gradients (bf16 training) reduced in
  // buckets of max(40 M, 1 M x dp) parameters as the backward fills them.
  // gpt2-large's layer has 12 h^2 + 13 h = 19,677,440 parameters: two layers
  // (39.35 M) do not fill 40 M, three do (12 buckets for 36 layers); the
  // 65.7 M parameters of the embeddings and final norm are a 13th. With
  // dp = 64 the bucket is 64 M parameters: four layers a bucket (9), then
  // the embeddings (10).
  const auto& m = model_preset("gpt2-large");
  ASSERT_EQ(m.params_per_layer(), 19'677'440);
  node_model::RooflinePredictor pred(node_model::gpu_preset("H100-SXM"));
  const Workload w{1, 1024, DType::BF16, node_model::Framework::Megatron};
  ParallelPlan plan;
  plan.grad_sync = GradSync::OverlapGradReduce;
  for (const auto& [dp, bucket_params, buckets] :
       {std::tuple{4, 40'000'000LL, 13U}, std::tuple{64, 64'000'000LL, 10U}}) {
    plan.dp = dp;
    EXPECT_EQ(plan.resolved_bucket_size(w), Bytes(bucket_params * 4)) << dp;
    const auto g = plan_training(m, w, plan, pred);
    const auto& tasks = g.tasks(0);
    std::vector<const Task*> ar;
    for (const auto& t : tasks) {
      if (t.kind == TaskKind::Collective) ar.push_back(&t);
    }
    ASSERT_EQ(ar.size(), buckets) << dp;
    const std::int64_t per_bucket = dp == 4 ? 3 : 4;
    EXPECT_EQ(ar[0]->bytes.count(), per_bucket * m.params_per_layer() * 4) << dp;
    std::int64_t reduced = 0;
    for (const Task* t : ar) {
      reduced += t->bytes.count();
      ASSERT_EQ(t->deps.size(), 1U);  // issued by the backward, not after it
      EXPECT_NE(tasks[static_cast<std::size_t>(t->deps[0])].name.find("bwd"), std::string::npos) << t->name;
    }
    const std::int64_t params = m.layers * m.params_per_layer() + 50304LL * 1280 + 1024LL * 1280 + 2LL * 1280;
    EXPECT_EQ(reduced, params * 4) << dp;  // every parameter once, in FP32
  }
  // A bucket_size given is used as given.
  plan.bucket_size = Bytes(1'000'000);
  EXPECT_EQ(plan.resolved_bucket_size(w), Bytes(1'000'000));
  // It is Megatron-Core's: refused under the eager profile (its overlapped
  // is PyTorch DDP's).
  const Workload eager{1, 1024, DType::BF16, node_model::Framework::PyTorchEager};
  try {
    plan.validate(m, eager, 64);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("grad_sync overlap-grad-reduce is Megatron-Core's"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(parse_grad_sync(to_string(GradSync::OverlapGradReduce)), GradSync::OverlapGradReduce);
  // Megatron-DeepSpeed has no Megatron-Core DDP either.
  const Workload mds{1, 1024, DType::BF16, node_model::Framework::MegatronDeepSpeed};
  EXPECT_THROW(plan.validate(m, mds, 64), InputError);
}

// Megatron-DeepSpeed's pipeline engine runs 1F1B over one chunk per rank,
// and DeepSpeed refuses ZeRO-2/3 with pipelines: other plans are errors
// under that profile (and run under megatron).
TEST(Plan, MegatronDeepSpeedRunsWhatItsPipelineEngineRuns) {
  const TransformerConfig m = model_preset("gpt2-large");
  const Workload mds{1, 1024, DType::FP16, node_model::Framework::MegatronDeepSpeed};
  const Workload megatron{1, 1024, DType::FP16, node_model::Framework::Megatron};
  ParallelPlan plan;
  plan.dp = 2;
  plan.pp = 4;
  plan.global_batch = 16;
  EXPECT_NO_THROW(plan.validate(m, mds, 8));  // 1F1B
  auto error = [&](const ParallelPlan& p) {
    try {
      p.validate(m, mds, 8);
    } catch (const InputError& e) {
      EXPECT_NO_THROW(p.validate(m, megatron, 8));
      return std::string(e.what());
    }
    return std::string("no error");
  };
  for (const Schedule s : {Schedule::GPipe, Schedule::ZeroBubbleH1, Schedule::ZeroBubbleH2}) {
    ParallelPlan other = plan;
    other.schedule = s;
    EXPECT_EQ(error(other).substr(0, 42 + to_string(s).size()),
              fmt::format("schedule {} is not Megatron-DeepSpeed's: its", to_string(s)));
  }
  ParallelPlan interleaved = plan;
  interleaved.schedule = Schedule::Interleaved1F1B;
  interleaved.virtual_stages = 2;
  EXPECT_NE(error(interleaved).find("is not Megatron-DeepSpeed's"), std::string::npos);
  ParallelPlan zero2 = plan;
  zero2.zero_stage = 2;
  EXPECT_EQ(error(zero2).substr(0, 69),
            "zero_stage 2 with pipeline parallelism (pp 4) is refused by DeepSpeed");
  zero2.pp = 1;
  zero2.dp = 8;
  EXPECT_NO_THROW(zero2.validate(m, mds, 8));  // ZeRO-2 without pipelines
}

TEST(Transformer, ALayerWithoutBiasesHasNoBiasGradients) {
  // Under Megatron a biased layer reduces four bias gradients in its weight
  // gradients (QKV's in the GEMM's pass, fc1's in bias-GeLU, the row-parallel
  // ones in the two bias-dropout-adds), each accumulated into its main
  // gradient. Llama's (--disable-bias-linear, RMSNorm): none, the norms' gain
  // alone, the op parameters summing to the layer's; the activation is SiLU.
  TransformerConfig m = model_preset("llama3-8b");
  const Workload w{1, 1024, DType::BF16, node_model::Framework::Megatron};
  auto op_params = [&] {
    std::int64_t sum = 0;
    for (const auto& op : layer_ops(m, w)) sum += op.params;
    return sum;
  };
  auto weight_grad_launches = [&](std::string_view name) -> std::int64_t {
    for (const auto& op : layer_ops(m, w)) {
      if (op.name == name) return op.weight_grad.launches;
    }
    ADD_FAILURE() << "no op " << name;
    return -1;
  };
  EXPECT_EQ(op_params(), m.params_per_layer());
  EXPECT_EQ(weight_grad_launches("swiglu"), 0);
  EXPECT_EQ(weight_grad_launches("residual1"), 0);
  EXPECT_EQ(weight_grad_launches("residual2"), 0);
  EXPECT_EQ(weight_grad_launches("ln1"), 1);  // the gain's main-gradient add
  // The same layer with biases, layer norms and a plain MLP (GPT's).
  m.linear_bias = true;
  m.rms_norm = false;
  m.gated_mlp = false;
  EXPECT_EQ(op_params(), m.params_per_layer());
  EXPECT_EQ(weight_grad_launches("gelu"), 2);  // the bias-gradient reduction, its main-gradient add
  EXPECT_EQ(weight_grad_launches("residual2"), 2);
  EXPECT_EQ(weight_grad_launches("ln1"), 2);  // gain and bias
  // Gated with biases (--swiglu without --disable-bias-linear): fc1's bias
  // covers gate and up, and the op parameters still sum to the layer's.
  m.gated_mlp = true;
  EXPECT_EQ(op_params(), m.params_per_layer());
}

TEST(Transformer, MegatronFusesSwiGlu) {
  // Megatron's bias_swiglu: one kernel each way. Forward: gate and up read,
  // the product written (3 x t x f x 2 bytes); backward: the output
  // gradient, gate and up read, both gradients written (5 x t x f x 2).
  // Eager: SiLU, then the multiply, each its own kernel (helper 72: Megatron
  // was timed as eager).
  const TransformerConfig m = model_preset("llama3-8b");
  const std::int64_t t = 1024, f = m.ffn_hidden;
  auto op = [&](node_model::Framework fw, std::string_view name) -> std::optional<node_model::OpKernels> {
    for (auto& o : layer_ops(m, Workload{1, 1024, DType::BF16, fw})) {
      if (o.name == name) return o;
    }
    return std::nullopt;
  };
  auto bytes = [](const node_model::Pass& p) {
    std::int64_t b = 0;
    for (const auto& k : p.kernels) b += k.bytes().count();
    return b;
  };
  const auto fused = op(node_model::Framework::Megatron, "swiglu");
  ASSERT_TRUE(fused.has_value());
  EXPECT_EQ(fused->forward.launches, 1);
  EXPECT_EQ(bytes(fused->forward), 3 * t * f * 2);
  EXPECT_EQ(fused->input_grad.launches, 1);
  EXPECT_EQ(bytes(fused->input_grad), 5 * t * f * 2);
  EXPECT_FALSE(op(node_model::Framework::Megatron, "silu").has_value());
  EXPECT_FALSE(op(node_model::Framework::Megatron, "gate").has_value());
  EXPECT_TRUE(op(node_model::Framework::PyTorchEager, "silu").has_value());
  EXPECT_TRUE(op(node_model::Framework::PyTorchEager, "gate").has_value());
  // Megatron-DeepSpeed's ParallelMLP: F.silu(x[0]) * x[1], unfused (helper 74).
  EXPECT_FALSE(op(node_model::Framework::MegatronDeepSpeed, "swiglu").has_value());
  EXPECT_TRUE(op(node_model::Framework::MegatronDeepSpeed, "silu").has_value());
  EXPECT_TRUE(op(node_model::Framework::MegatronDeepSpeed, "gate").has_value());
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
    for (const auto& op : layer_ops(m, Workload{1, 1024, dt})) out.push_back(op.name);
    return out;
  };
  auto has = [](const std::vector<std::string>& v, const char* n) { return std::find(v.begin(), v.end(), n) != v.end(); };
  // FP32: Megatron's torch softmax path (scale, mask, softmax) + dropout; 16-bit: one fused kernel + dropout.
  for (const char* n : {"scale", "mask", "softmax", "attn_dropout", "context_copy"}) EXPECT_TRUE(has(names(DType::FP32), n)) << n;
  EXPECT_FALSE(has(names(DType::BF16), "scale"));
  EXPECT_FALSE(has(names(DType::BF16), "mask"));
  EXPECT_TRUE(has(names(DType::BF16), "attn_dropout"));
}

namespace {
/// vTrain's hidden-1024 GPT: 24 layers, 16 heads, GPT-2's vocabulary.
TransformerConfig vtrain_gpt_1024() {
  TransformerConfig m;
  m.name = "vtrain-1024";
  m.layers = 24;
  m.hidden = 1024;
  m.heads = 16;
  m.ffn_hidden = 4096;
  m.vocab = 50257;
  return m;
}
}  // namespace

TEST(Transformer, FewScoreMatricesPerRankLeaveTheFusedSoftmax) {
  // vTrain's hidden-1024 GPT (16 heads) at 8-way tensor parallelism: 2 heads
  // per rank. At micro-batch 1 that is 2 score matrices, which Megatron's
  // fused kernel does not take (a multiple of 4); at micro-batch 2 it does.
  const TransformerConfig m = vtrain_gpt_1024();
  auto names = [&](std::int64_t micro_batch, std::int64_t tp) {
    Workload w{micro_batch, 1024, DType::FP16};
    w.framework = node_model::Framework::MegatronDeepSpeed;
    std::vector<std::string> out;
    for (const auto& op : layer_ops(m, w, Sharding{tp})) out.push_back(op.name);
    return out;
  };
  auto has = [](const std::vector<std::string>& v, const char* n) {
    return std::find(v.begin(), v.end(), n) != v.end();
  };
  EXPECT_TRUE(has(names(1, 8), "softmax_to_fp32"));
  EXPECT_TRUE(has(names(1, 8), "softmax_to_16bit"));
  EXPECT_FALSE(has(names(2, 8), "softmax_to_fp32"));
  EXPECT_FALSE(has(names(1, 4), "softmax_to_fp32"));
  EXPECT_EQ(names(1, 8).size(), names(2, 8).size() + 4);  // cast, scale, mask, cast more
}

TEST(Memory, TorchSoftmaxPathKeepsItsOutputInFp32) {
  // 16 heads at tp 8, micro-batch 2, 4096 tokens, fp16, no recomputation:
  // 4 score matrices per rank. Megatron-LM's fused kernel takes keys up to
  // 4096, Megatron-DeepSpeed's only to 2048, so the latter runs the torch
  // path and keeps the softmax output in FP32: 2 more bytes per score,
  // 2 x (16 / 8) x 4096^2 x 2 = 134,217,728 bytes per layer, 24 layers.
  TransformerConfig m = vtrain_gpt_1024();
  ParallelPlan p;
  p.tp = 8;
  p.recompute = Recompute::None;
  auto activations = [&](node_model::Framework f) {
    Workload w{2, 4096, DType::FP16};
    w.framework = f;
    return static_cast<double>(
        estimate_memory(m, w, p, Bytes::gib(80)).memory_per_stage[0].activations.count());
  };
  const double per_layer = 2.0 * 2 * 4096.0 * 4096.0 * 2;
  EXPECT_DOUBLE_EQ(per_layer, 134'217'728.0);
  EXPECT_NEAR(
      activations(node_model::Framework::MegatronDeepSpeed) - activations(node_model::Framework::Megatron),
      24 * per_layer, 2.0);
  // Without dropout (the Llama presets) the fused kernel's 16-bit output is
  // the tensor the context bmm keeps, 2 bytes per score, where the torch
  // path keeps its FP32 output and the 16-bit probabilities the bmm reads,
  // 4 + 2 (helper 124: 4): 4 bytes more per score, twice the difference
  // with dropout (7 against 5 bytes).
  m.dropout = false;
  EXPECT_NEAR(
      activations(node_model::Framework::MegatronDeepSpeed) - activations(node_model::Framework::Megatron),
      2 * 24 * per_layer, 2.0);
}

TEST(Transformer, OptimizerStreamsUseMeasuredRowWidths) {
  // A flat pass over all parameters is rows of kFlatRow elements, never one 1 x N row.
  const node_model::OpRules rules(node_model::Framework::Megatron, DType::BF16);
  const auto pass = rules.optimizer(774'030'080, 436, true, true);
  for (const auto& k : pass.kernels) {
    EXPECT_EQ(k.h, node_model::kFlatRow);
    EXPECT_GE(k.b * k.h, 774'030'080 / 2);
  }
  // Multi-tensor launches: 774M parameters are 11,811 chunks of 64 Ki, 37
  // launches of 320 chunks per pass: norm, rescale, Adam, master copy (4
  // passes), plus one zeroing launch per tensor.
  EXPECT_EQ(pass.launches, 4 * 37 + 436);
}

TEST(Transformer, EagerSixteenBitOptimizerUpdatesFp32Masters) {
  // One million parameters in 10 tensors, fused Adam, no clipping. FP32:
  // the fused pass alone, 7 FP32 streams = 28 B per parameter. BF16 with FP32
  // masters (what stage_memory holds): + the gradients copied to FP32 (read 2,
  // write 4 B) + the masters copied back (read 4, write 2 B) = 40 B per
  // parameter, each pass one multi-tensor launch (16 chunks of 64 Ki).
  const std::int64_t params = 1'000'000;
  auto bytes = [](const node_model::Pass& p) {
    std::int64_t b = 0;
    for (const auto& k : p.kernels)
      b += k.b * k.h * 2 * node_model::dtype_bytes(k.dtype);  // MulU: read + write
    return b;
  };
  const node_model::OpRules fp32(node_model::Framework::PyTorchEager, DType::FP32);
  const node_model::OpRules bf16(node_model::Framework::PyTorchEager, DType::BF16);
  const auto full = fp32.optimizer(params, 10, true, false);
  const auto mixed = bf16.optimizer(params, 10, true, false);
  EXPECT_EQ(full.kernels.size(), 1U);
  EXPECT_EQ(mixed.kernels.size(), 3U);
  EXPECT_EQ(mixed.launches, 3);
  // Each pass rounds up to whole rows of kFlatRow elements.
  const double row = 8.0 * node_model::kFlatRow;
  EXPECT_NEAR(static_cast<double>(bytes(full)), 28.0 * params, row);
  EXPECT_NEAR(static_cast<double>(bytes(mixed)), 40.0 * params, 3 * row);
  // FP16 adds GradScaler's unscale of the FP32 gradients (read + write 8 B).
  const node_model::OpRules fp16(node_model::Framework::PyTorchEager, DType::FP16);
  const auto scaled = fp16.optimizer(params, 10, true, false);
  EXPECT_EQ(scaled.kernels.size(), 4U);
  EXPECT_NEAR(static_cast<double>(bytes(scaled)), 48.0 * params, 4 * row);
}

TEST(Transformer, LlamaParameterCountsMatchThePublishedSizes) {
  // Meta's published sizes: 8.03B, 70.6B, 405.9B (untied LM head, RoPE).
  const std::pair<const char*, double> sizes[] = {
      {"llama3-8b", 8.03e9}, {"llama3-70b", 70.6e9}, {"llama3-405b", 405.9e9}};
  for (const auto& [name, published] : sizes) {
    const auto& m = model_preset(name);
    EXPECT_EQ(m.vocab, 128256) << name;
    EXPECT_EQ(m.kv_heads, 8) << name;
    EXPECT_TRUE(m.gated_mlp) << name;
    EXPECT_FALSE(m.tied_embeddings) << name;
    const double total = static_cast<double>(m.total_params(8192));
    EXPECT_NEAR(total / published, 1.0, 0.01) << name << ": " << total;
  }
  // Exactly, by hand (no biases and RMSNorm: Megatron's --disable-bias-linear,
  // --normalization RMSNorm). Llama 3 8B, per layer: QKV 4096 x (4096 + 2 x
  // 8 x 128) = 25,165,824; SwiGLU fc1 4096 x 2 x 14336 = 117,440,512;
  // projection 4096^2 = 16,777,216; fc2 14336 x 4096 = 58,720,256; two norms
  // 8,192: 218,112,000, x 32 = 6,979,584,000; embedding and untied head 2 x
  // 128256 x 4096 = 1,050,673,152; final norm 4,096: 8,030,261,248. The 70B
  // models' layer is 855,654,400 (x 80) and the 405B's 3,187,703,808 (x 126)
  // the same way. Each is its checkpoint's count.
  EXPECT_EQ(model_preset("llama3-8b").total_params(8192), 8'030'261'248);
  EXPECT_EQ(model_preset("llama3-70b").params_per_layer(), 855'654'400);
  EXPECT_EQ(model_preset("llama3-70b").total_params(8192), 70'553'706'496);
  EXPECT_EQ(model_preset("llama3-405b").params_per_layer(), 3'187'703'808);
  EXPECT_EQ(model_preset("llama3-405b").total_params(8192), 405'853'388'800);
  // Per tensor-parallel rank nothing is replicated but the norms.
  EXPECT_EQ(model_preset("llama3-70b").params_per_layer_per_tp_rank(8), (855'654'400 - 16'384) / 8 + 16'384);
  // Llama 2 70B (config.json: tie_word_embeddings false, rotary positions):
  // its layer is the 70B's above; 2 x 32000 x 8192 = 524,288,000 for the
  // embedding and its own LM head and the final norm: 68,976,648,192. No
  // position table: seq_len does not change it.
  const auto& llama2 = model_preset("llama2-70b");
  EXPECT_FALSE(llama2.tied_embeddings);
  EXPECT_FALSE(llama2.learned_positions);
  EXPECT_EQ(llama2.total_params(4096), llama2.total_params(2048));
  EXPECT_EQ(llama2.total_params(4096), 68'976'648'192);
  try {
    (void)model_preset("llama3-7b");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("llama3-8b, llama3-70b, llama3-405b"), std::string::npos) << e.what();
  }
}

namespace {
/// The attention ops of one layer (from `qkv` to `context_copy`, exclusive).
std::vector<OpKernels> attention_ops(const TransformerConfig& m, const Workload& w) {
  const auto ops = layer_ops(m, w);
  auto at = [&](const char* name) {
    return std::find_if(ops.begin(), ops.end(), [&](const OpKernels& o) { return o.name == name; });
  };
  return {at("qkv") + 1, at("context_copy")};
}
double pass_flops(const std::vector<OpKernels>& ops, bool gemm_only) {
  double f = 0;
  for (const auto& op : ops) {
    for (const auto* pass : {&op.forward, &op.input_grad, &op.weight_grad}) {
      for (const auto& k : pass->kernels) {
        if (!gemm_only || node_model::is_gemm(k.op)) f += k.flops().count();
      }
    }
    f -= op.recomputed_flops.count();
  }
  return f;
}
}  // namespace

TEST(FlashAttention, OneFusedKernelEachWayWithTheSameModelFlops) {
  const auto& m = model_preset("gpt2-large");  // 20 heads of 64
  Workload w{2, 1024, DType::BF16};
  const auto plain = attention_ops(m, w);
  w.flash_attention = true;
  const auto flash = attention_ops(m, w);
  // Unfused (Megatron, bf16): scores, the fused scale-mask-softmax, dropout, context.
  ASSERT_EQ(plain.size(), 4U);
  EXPECT_EQ(plain[1].name, "softmax");
  EXPECT_EQ(plain[2].name, "attn_dropout");
  ASSERT_EQ(flash.size(), 1U);
  const OpKernels& a = flash[0];
  EXPECT_EQ(a.name, "attention");
  EXPECT_EQ(a.forward.launches, 1);
  EXPECT_EQ(a.input_grad.launches, 1);
  EXPECT_TRUE(a.weight_grad.empty());
  for (const auto* pass : {&a.forward, &a.input_grad}) {
    for (const auto& k : pass->kernels) EXPECT_EQ(k.op, node_model::KernelOp::Bmm);  // no softmax, mask, dropout
  }
  // QK^T and PV: 2 x 2 b a s^2 d forward = 4 x 2 x 20 x 1024^2 x 64 = 10,737,418,240
  // FLOPs; backward twice that; the recomputed QK^T (2 b a s^2 d) is not model work.
  const double fwd = 4.0 * 2 * 20 * 1024 * 1024 * 64;
  EXPECT_DOUBLE_EQ(fwd, 10'737'418'240.0);
  EXPECT_DOUBLE_EQ(pass_flops(flash, false), 3 * fwd);
  EXPECT_DOUBLE_EQ(pass_flops(plain, true), 3 * fwd);
  EXPECT_DOUBLE_EQ(a.recomputed_flops.count(), fwd / 2);
  // The whole layer's model FLOPs are the unfused GEMMs'.
  EXPECT_DOUBLE_EQ(pass_flops(layer_ops(m, w), true), pass_flops(layer_ops(m, Workload{2, 1024, DType::BF16}), true));
}

TEST(FlashAttention, KeepsNoScoreMatricesForTheBackward) {
  // Small config by hand: gpt2-large (h 1280, a 20), s 1024, b 1, bf16, tp 1:
  // Korthikanti et al. keep sbh(34 + 5as/h) bytes per layer; 5as/h = 80 of
  // them are the s x s matrices (softmax output, dropout mask and output).
  const auto& m = model_preset("gpt2-large");
  Workload w{1, 1024, DType::BF16};
  ParallelPlan p;
  const auto plain = estimate_memory(m, w, p, Bytes::gib(80)).memory_per_stage[0].activations;
  w.flash_attention = true;
  const auto flash = estimate_memory(m, w, p, Bytes::gib(80)).memory_per_stage[0].activations;
  const double sbh = 1024.0 * 1280;
  const double scores_per_layer = 5.0 * 20 * 1024 * 1024;  // 5 a s^2 b = 104,857,600 bytes
  EXPECT_DOUBLE_EQ(sbh * 5 * 20 * 1024 / 1280, scores_per_layer);
  EXPECT_NEAR(static_cast<double>(plain.count() - flash.count()), 36 * scores_per_layer, 2.0);
  // (+ the embedding dropout's mask, sbh, and the final norm's and the LM
  // head's inputs, 2 sbh each, outside the layers)
  EXPECT_NEAR(static_cast<double>(flash.count()), 36 * 34 * sbh + 1024.0 * 50304 * 4 + 5 * sbh, 2.0);
}

namespace {
/// Megatron, bf16, one sequence of `seq_len` tokens per micro-batch.
Workload bf16_work(std::int64_t seq_len) {
  Workload w;
  w.seq_len = seq_len;
  w.dtype = DType::BF16;
  return w;
}
/// `w` with Transformer Engine FP8 layer GEMMs (training.dtype: fp8).
Workload fp8(Workload w) {
  w.profile.fp8 = true;
  return w;
}
/// The FLOPs of `ops`' GEMMs in the three passes: the work model_flops
/// counts as the model's where nothing is recomputed or padded.
double gemm_flops(const std::vector<OpKernels>& ops) {
  double f = 0;
  for (const auto& op : ops) {
    for (const Pass* p : {&op.forward, &op.input_grad, &op.weight_grad}) {
      for (const auto& k : p->kernels) {
        if (node_model::is_gemm(k.op)) f += k.flops().count();
      }
    }
  }
  return f;
}
}  // namespace

TEST(Fp8, TheFourLayerGemmsRunInFp8AndEverythingElseAsWithBf16) {
  // Llama 3 8B (gated MLP, GQA), unfused attention so the attention bmms are
  // there to stay bf16; tp = 2 with sequence parallelism.
  const auto& m = model_preset("llama3-8b");
  const Workload bf16 = bf16_work(2048);
  const Sharding shard{2, true};
  const auto base = layer_ops(m, bf16, shard);
  const auto ops = layer_ops(m, fp8(bf16), shard);
  ASSERT_EQ(ops.size(), base.size());
  // Transformer Engine's kernels in the three passes, per linear: qkv and fc1
  // (TELayerNormColumnParallelLinear: the norm writes their input in FP8)
  // cast dy and transpose their input for the weight gradient; proj and fc2
  // (TERowParallelLinear under sequence parallelism) cast their input, cast
  // dy's shard and transpose the gathered dy, and transpose their input.
  const std::map<std::string, std::size_t> added{{"qkv", 2}, {"proj", 4}, {"fc1", 2}, {"fc2", 4}};
  int fp8_gemms = 0;
  std::size_t casts = 0, weight_casts = 0;
  std::map<DType, int> others;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const bool layer_gemm = added.contains(ops[i].name);
    std::size_t kernels = 0, base_kernels = 0;
    for (const Pass OpKernels::*p : {&OpKernels::forward, &OpKernels::input_grad, &OpKernels::weight_grad}) {
      kernels += (ops[i].*p).kernels.size();
      base_kernels += (base[i].*p).kernels.size();
      for (const auto& k : (ops[i].*p).kernels) {
        if (k.dtype == DType::FP8) {
          EXPECT_TRUE(layer_gemm && node_model::is_gemm(k.op)) << ops[i].name;
          ++fp8_gemms;
        } else {
          ++others[k.dtype];
          EXPECT_FALSE(layer_gemm && node_model::is_gemm(k.op)) << ops[i].name;
        }
      }
    }
    EXPECT_EQ(kernels, base_kernels + (layer_gemm ? added.at(ops[i].name) : 0)) << ops[i].name;
    casts += layer_gemm ? added.at(ops[i].name) : 0;
    // The weight's cast, once per iteration, apart from the passes.
    EXPECT_EQ(ops[i].weight_cast.kernels.size(), layer_gemm ? 1U : 0U) << ops[i].name;
    EXPECT_EQ(ops[i].weight_cast.launches, layer_gemm ? 1 : 0) << ops[i].name;
    weight_casts += ops[i].weight_cast.kernels.size();
    EXPECT_TRUE(base[i].weight_cast.empty()) << ops[i].name;
  }
  // 4 linears x (forward, input-gradient, weight-gradient GEMM).
  EXPECT_EQ(fp8_gemms, 12);
  EXPECT_EQ(casts, 12U);  // 16 with the weights' casts before: 12 launches every micro-batch
  EXPECT_EQ(weight_casts, 4U);
  // The rest: bf16, but for the FP32 main-gradient accumulation of the fused
  // wgrad GEMMs (one per linear, as with bf16) and the norms' gradients.
  int base_fp32 = 0;
  for (const auto& op : base) {
    for (const Pass* p : {&op.forward, &op.input_grad, &op.weight_grad}) {
      for (const auto& k : p->kernels) base_fp32 += k.dtype == DType::FP32 ? 1 : 0;
    }
  }
  EXPECT_EQ(others[DType::FP32], base_fp32);
  EXPECT_EQ(others.size(), 2U);  // bf16 and fp32 only
  auto find = [&](const std::string& name) {
    const auto it = std::find_if(ops.begin(), ops.end(), [&](const OpKernels& o) { return o.name == name; });
    EXPECT_NE(it, ops.end()) << name;
    return *it;
  };
  // qkv: no input cast (ln1 writes FP8; the planner gathers it in FP8): its
  // forward is the GEMM alone.
  const OpKernels qkv = find("qkv");
  EXPECT_EQ(qkv.forward.launches, 1);
  ASSERT_EQ(qkv.forward.kernels.size(), 1U);
  // The weight, 4096 x (32 + 2 x 8) x 128 / tp, read in bf16 and written in
  // FP8 with its transpose: 4 bytes per element.
  EXPECT_EQ(qkv.weight_cast.kernels[0].bytes(), Bytes(4LL * 4096 * (48 * 128 / 2)));
  // dy (t x 3072 = 2048 x 3072, not gathered: column-parallel), cast with
  // its transpose; the gathered FP8 input (2048 x 4096) transposed for the
  // weight gradient before its GEMM (1 + 1 bytes per element).
  EXPECT_EQ(qkv.input_grad.kernels[0].bytes(), Bytes(4LL * 2048 * 3072));
  ASSERT_EQ(qkv.weight_grad.kernels.size(), 3U);  // transpose, GEMM, its main-gradient part
  EXPECT_EQ(qkv.weight_grad.kernels[0].bytes(), Bytes(2LL * 2048 * 4096));
  EXPECT_TRUE(node_model::is_gemm(qkv.weight_grad.kernels[1].op));
  // proj (input 2048 x 4096 / tp): the input cast alone (3 bytes per
  // element; sequence parallelism), dy's shard (1024 x 4096) cast before
  // the FP8 gather and the gathered dy (2048 x 4096) transposed, the input
  // transposed for the weight gradient.
  const OpKernels proj = find("proj");
  EXPECT_EQ(proj.forward.kernels[0].bytes(), Bytes(3LL * 2048 * 2048));
  EXPECT_EQ(proj.input_grad.kernels[0].bytes(), Bytes(3LL * 1024 * 4096));
  EXPECT_EQ(proj.input_grad.kernels[1].bytes(), Bytes(2LL * 2048 * 4096));
  EXPECT_EQ(proj.input_grad.launches, 3);
  EXPECT_EQ(proj.weight_grad.kernels[0].bytes(), Bytes(2LL * 2048 * 2048));
  // The same model FLOPs: the casts are hardware FLOPs only.
  EXPECT_DOUBLE_EQ(gemm_flops(ops), gemm_flops(base));
  // The LM head and the MoE router stay bf16.
  for (const auto& op : lm_head_ops(m, fp8(bf16), shard)) {
    for (const auto& k : op.forward.kernels) EXPECT_NE(k.dtype, DType::FP8) << op.name;
    EXPECT_TRUE(op.weight_cast.empty()) << op.name;
  }
  // fp8 keeps bf16 for everything but its GEMMs: other dtypes are refused.
  EXPECT_THROW((void)node_model::OpRules(node_model::Framework::Megatron, DType::FP16, {.fp8 = true}), InputError);
}

TEST(Fp8, WithoutSequenceParallelismInputsAndGradientsAreCastWithTheirTransposes) {
  // GPT-3 XL at tp 2 without sequence parallelism: nothing is gathered, so
  // Transformer Engine casts proj's and fc2's inputs and every dy with their
  // transposes (fp8_cast_transpose_fused, 4 bytes per element) and
  // transposes nothing in the weight-gradient pass but the FP8 output of
  // the fused norms (qkv, fc1). QKV's bias gradient is fused into its dy
  // cast (fp8_cast_transpose_bgrad_fused): no bias pass of its own.
  const auto& m = model_preset("gpt3-xl");
  ASSERT_TRUE(m.linear_bias);
  const Workload bf16 = bf16_work(2048);
  const Sharding shard{2, false};
  const auto base = layer_ops(m, bf16, shard);
  const auto ops = layer_ops(m, fp8(bf16), shard);
  auto find = [](const std::vector<OpKernels>& v, const std::string& name) {
    return *std::find_if(v.begin(), v.end(), [&](const OpKernels& o) { return o.name == name; });
  };
  const std::int64_t t = 2048, h = 2048, f = 8192 / 2;
  const OpKernels proj = find(ops, "proj"), fc2 = find(ops, "fc2");
  EXPECT_EQ(proj.forward.kernels[0].bytes(), Bytes(4LL * t * (h / 2)));
  EXPECT_EQ(proj.input_grad.kernels[0].bytes(), Bytes(4LL * t * h));
  EXPECT_EQ(proj.input_grad.launches, 2);  // the cast, the dgrad GEMM
  EXPECT_EQ(fc2.forward.kernels[0].bytes(), Bytes(4LL * t * f));
  for (const OpKernels& op : {proj, fc2}) {
    EXPECT_EQ(op.weight_grad.kernels.size(), find(base, op.name).weight_grad.kernels.size()) << op.name;
  }
  const OpKernels qkv = find(ops, "qkv"), qkv16 = find(base, "qkv");
  // bf16: the wgrad GEMM, its main-gradient part, the bias gradient and the
  // bias's accumulation; fp8: the input's transpose, the GEMM, its part and
  // the bias's accumulation.
  ASSERT_EQ(qkv16.weight_grad.kernels.size(), 4U);
  ASSERT_EQ(qkv.weight_grad.kernels.size(), 4U);
  EXPECT_EQ(qkv.weight_grad.kernels[0].bytes(), Bytes(2LL * t * h));
  EXPECT_EQ(qkv.weight_grad.launches, qkv16.weight_grad.launches);
  EXPECT_EQ(qkv.input_grad.kernels[0].bytes(), Bytes(4LL * t * (3 * h / 2)));
  // The layer's model FLOPs (its GEMMs') are the bf16 run's.
  EXPECT_DOUBLE_EQ(gemm_flops(ops), gemm_flops(base));
  EXPECT_DOUBLE_EQ(model_flops(m, fp8(bf16), ParallelPlan{}, partition_layers(m.layers, 1, 1), 1),
                   model_flops(m, bf16, ParallelPlan{}, partition_layers(m.layers, 1, 1), 1));
  // A mixture of experts' grouped GEMMs (Transformer Engine's GroupedLinear):
  // tokens and dy cast with their transposes, the weights once per iteration.
  const node_model::OpRules rules(node_model::Framework::Megatron, DType::BF16, {.fp8 = true});
  const OpKernels experts = rules.grouped_linear("fc1", 4, 512, 1024, 2048);
  EXPECT_EQ(experts.forward.kernels.size(), 2U);
  EXPECT_EQ(experts.forward.kernels[0].bytes(), Bytes(4LL * 4 * 512 * 1024));
  EXPECT_EQ(experts.input_grad.kernels[0].bytes(), Bytes(4LL * 4 * 512 * 2048));
  ASSERT_EQ(experts.weight_cast.kernels.size(), 1U);
  EXPECT_EQ(experts.weight_cast.kernels[0].bytes(), Bytes(4LL * 4 * 1024 * 2048));
}

TEST(Transformer, MegatronAddsThePositionsOnEveryTokenAndAccumulatesTheTiedHeadsGradient) {
  // GPT-3 175B at tp 8 with SP, one sequence of 2048 tokens.
  const auto& m = model_preset("gpt3-175b");
  const Workload bf16 = bf16_work(2048);
  const Sharding shard{8, true};
  auto find = [](const std::vector<OpKernels>& ops, const std::string& name) {
    const auto it = std::find_if(ops.begin(), ops.end(), [&](const OpKernels& o) { return o.name == name; });
    EXPECT_NE(it, ops.end()) << name;
    return *it;
  };
  const auto embedding = embedding_ops(m, bf16, shard);
  // The word and position embeddings are added on all 2048 tokens (before
  // the sum is split among the shards): 2048 x 12288 bf16 read twice and
  // written once; the dropout runs on the rank's 256.
  const OpKernels add = find(embedding, "embedding_add");
  ASSERT_EQ(add.forward.kernels.size(), 1U);
  EXPECT_EQ(add.forward.kernels[0].bytes(), Bytes(3LL * 2 * 2048 * 12288));
  const OpKernels dropout = find(embedding, "embedding_dropout");
  EXPECT_EQ(dropout.forward.kernels[0].b * dropout.forward.kernels[0].h, 256LL * 12288);
  // The tied LM head's weight gradient (51200 / 8 = 6400 vocabulary rows of
  // the shared weight): the wgrad GEMM accumulating into the FP32 main
  // gradient (gradient_accumulation_fusion: as for every fused linear, the
  // main gradient's 6400 x 12288 x 4 B beside the GEMM, no launch of its
  // own). Its parameters are the embedding's.
  const OpKernels head = find(lm_head_ops(m, bf16, shard), "lm_head");
  EXPECT_EQ(head.params, 0);
  ASSERT_EQ(head.weight_grad.kernels.size(), 2U);
  EXPECT_TRUE(node_model::is_gemm(head.weight_grad.kernels[0].op));
  EXPECT_EQ(head.weight_grad.kernels[1].dtype, DType::FP32);
  EXPECT_EQ(head.weight_grad.kernels[1].bytes(), Bytes(6400LL * 12288 * 4));
  EXPECT_EQ(head.weight_grad.launches, 1);
  // Under eager, autograd sums the two uses into the one .grad whose
  // accumulation the embedding counts: the GEMM alone.
  Workload eager = bf16;
  eager.framework = node_model::Framework::PyTorchEager;
  EXPECT_EQ(find(lm_head_ops(m, eager, shard), "lm_head").weight_grad.kernels.size(), 1U);
}

TEST(Transformer, TheDistributedOptimizerZeroesTheWholeMainGradientBuffer) {
  // Megatron's zero_grad_buffer clears every main gradient the rank
  // accumulated into, though the distributed optimizer steps on a shard:
  // 1 M parameters, a shard of 125,000 (dp 8), FP32 main gradients (bf16).
  const node_model::OpRules rules(node_model::Framework::Megatron, DType::BF16);
  const auto whole = rules.optimizer(125'000, 10, true, false, 1'000'000);
  const auto shard = rules.optimizer(125'000, 10, true, false);
  ASSERT_EQ(whole.kernels.size(), shard.kernels.size());
  // The zeroing: 4 B per main gradient.
  const node_model::Kernel& zero = whole.kernels.back();
  const double row = 8.0 * node_model::kFlatRow;
  EXPECT_EQ(zero.dtype, DType::FP32);
  EXPECT_NEAR(static_cast<double>(zero.bytes().count()), 4'000'000.0, row);
  EXPECT_NEAR(static_cast<double>(shard.kernels.back().bytes().count()), 500'000.0, row);
  // Everything before it is the shard's.
  for (std::size_t i = 0; i + 1 < whole.kernels.size(); ++i) {
    EXPECT_EQ(whole.kernels[i].bytes(), shard.kernels[i].bytes()) << i;
  }
}

TEST(Fp8, GemmsAreNoSlowerThanTheirBf16TwinsOnH100) {
  // Every layer GEMM of Llama 3 70B at tp = 8, 8K tokens, with the shipped
  // tile-mlp (tensor-core) model.
  const auto& h100 = node_model::gpu_preset("H100-SXM");
  const auto pred = node_model::make_predictor(node_model::kDefaultPredictor, h100);
  const auto& m = model_preset("llama3-70b");
  const Workload bf16 = bf16_work(8192);
  const auto ops = layer_ops(m, fp8(bf16), Sharding{8, true});
  int n = 0;
  for (const auto& op : ops) {
    for (const Pass* p : {&op.forward, &op.input_grad, &op.weight_grad}) {
      for (const auto& k : p->kernels) {
        if (k.dtype != DType::FP8) continue;
        auto twin = k;
        twin.dtype = DType::BF16;
        EXPECT_LE(pred->predict_device(k), pred->predict_device(twin)) << op.name;
        EXPECT_LE(pred->predict(k), pred->predict(twin)) << op.name;
        ++n;
      }
    }
  }
  EXPECT_EQ(n, 12);
}

TEST(TaskGraph, ConcurrentCollectivesGiveEachGroupASlotOnEveryMember) {
  // Ranks 0-3 in one group, 2 and 4 in another: rank 2 holds both (slots 0
  // and 1), rank 5 is idle; every member's task names its own group.
  const TaskGraph g = concurrent_collectives(6, {{0, 1, 2, 3}, {2, 4}}, CollectiveKind::AllGather, Bytes(64));
  g.validate();
  ASSERT_EQ(g.num_ranks(), 6);
  ASSERT_EQ(g.groups.size(), 2U);
  const std::vector<std::size_t> tasks{1, 1, 2, 1, 1, 0};
  for (int r = 0; r < 6; ++r) {
    ASSERT_EQ(g.tasks(r).size(), tasks[static_cast<std::size_t>(r)]) << r;
    for (const Task& t : g.tasks(r)) {
      EXPECT_EQ(t.kind, TaskKind::Collective);
      EXPECT_EQ(t.collective, CollectiveKind::AllGather);
      EXPECT_EQ(t.bytes, Bytes(64));
    }
  }
  EXPECT_EQ(g.group_of(2, 0), 0);
  EXPECT_EQ(g.group_of(2, 1), 1);
  EXPECT_EQ(g.group_of(4, 0), 1);
  EXPECT_THROW((void)concurrent_collectives(2, {{0, 2}}, CollectiveKind::AllReduce, Bytes(8)), InputError);
}
