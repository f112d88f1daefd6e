// The framework rule table (node_model/workload.hpp): which attention-softmax
// kernels Megatron launches for a shape, checked against the conditions of
// Megatron's FusedScaleMaskSoftmax and by hand-counted traffic.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tessera/node_model/workload.hpp"

namespace nm = tessera::node_model;
using nm::DType;
using nm::Framework;

namespace {

double pass_bytes(const nm::Pass& p) {
  double total = 0;
  for (const auto& k : p.kernels) total += static_cast<double>(k.bytes().count());
  return total;
}

}  // namespace

TEST(FusedSoftmax, MegatronTakesTheFusedKernelOnlyForShapesItsCudaKernelAccepts) {
  const auto ok = [](Framework f, DType d, std::int64_t batches, std::int64_t sq, std::int64_t sk) {
    return nm::fused_softmax_available(f, d, batches, sq, sk);
  };
  // GPT-3 175B at tp 8: 96 / 8 = 12 heads per rank, micro-batch 1, s 2048.
  EXPECT_TRUE(ok(Framework::Megatron, DType::BF16, 12, 2048, 2048));
  EXPECT_TRUE(ok(Framework::MegatronDeepSpeed, DType::FP16, 12, 2048, 2048));
  // 16 heads at tp 8 and micro-batch 1: 2 score matrices, not a multiple of 4.
  EXPECT_FALSE(ok(Framework::MegatronDeepSpeed, DType::FP16, 2, 1024, 1024));
  EXPECT_FALSE(ok(Framework::Megatron, DType::BF16, 2, 1024, 1024));
  EXPECT_TRUE(ok(Framework::MegatronDeepSpeed, DType::FP16, 4, 1024, 1024));  // micro-batch 2
  // Key length: Megatron-DeepSpeed's kernel stops at 2048, Megatron-LM's at 4096.
  EXPECT_FALSE(ok(Framework::MegatronDeepSpeed, DType::BF16, 8, 4096, 4096));
  EXPECT_TRUE(ok(Framework::Megatron, DType::BF16, 8, 4096, 4096));
  EXPECT_FALSE(ok(Framework::Megatron, DType::BF16, 8, 8192, 8192));
  EXPECT_FALSE(ok(Framework::Megatron, DType::BF16, 8, 16, 16));  // sk must exceed 16
  // Short keys: Megatron-LM's kernel packs 8 matrices per block (4 rejected).
  EXPECT_FALSE(ok(Framework::Megatron, DType::BF16, 4, 64, 64));
  EXPECT_TRUE(ok(Framework::Megatron, DType::BF16, 8, 64, 64));
  EXPECT_TRUE(ok(Framework::MegatronDeepSpeed, DType::BF16, 4, 64, 64));
  EXPECT_FALSE(ok(Framework::Megatron, DType::BF16, 8, 1022, 1022));  // sq not a multiple of 4
  // 16-bit Megatron only.
  EXPECT_FALSE(ok(Framework::Megatron, DType::FP32, 12, 2048, 2048));
  EXPECT_FALSE(ok(Framework::PyTorchEager, DType::BF16, 12, 2048, 2048));
}

TEST(FusedSoftmax, SixteenBitFallbackRunsTheTorchPathInFp32) {
  const nm::OpRules rules(Framework::MegatronDeepSpeed, DType::FP16);
  const std::int64_t b = 2, s = 1024;
  const double n = static_cast<double>(b * s * s);  // 2,097,152 scores
  const auto ops = rules.attention_softmax("", b, s, s);
  std::vector<std::string> names;
  int forward = 0, backward = 0;
  double forward_bytes = 0, backward_bytes = 0;
  for (const auto& op : ops) {
    names.push_back(op.name);
    forward += op.forward.launches;
    backward += op.input_grad.launches;
    forward_bytes += pass_bytes(op.forward);
    backward_bytes += pass_bytes(op.input_grad);
    EXPECT_TRUE(op.weight_grad.empty());
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"softmax_to_fp32", "scale", "mask", "softmax", "softmax_to_16bit"}));
  EXPECT_EQ(forward, 5);   // one kernel per step
  EXPECT_EQ(backward, 5);  // the softmax's backward is one kernel reading y and dy
  // Forward bytes per score: casts 2 + 4 each, scale, mask and softmax 4 + 4
  // each in FP32: 6 + 8 + 8 + 8 + 6 = 36.
  EXPECT_DOUBLE_EQ(forward_bytes, 36 * n);
  // Backward: casts 6 each, scale and mask 8 each, the softmax reads y and dy
  // and writes dx (a row pass and a binary pass: 8 + 12): 6 + 8 + 8 + 20 + 6 = 48.
  EXPECT_DOUBLE_EQ(backward_bytes, 48 * n);

  // Four matrices: the fused kernel, 2 + 2 bytes per score forward, y and dy
  // read and dx written (2 + 2 + 2) backward, one launch each way.
  const auto fused = rules.attention_softmax("", 4, s, s);
  ASSERT_EQ(fused.size(), 1U);
  EXPECT_EQ(fused[0].forward.launches, 1);
  EXPECT_EQ(fused[0].input_grad.launches, 1);
  EXPECT_DOUBLE_EQ(pass_bytes(fused[0].forward), 4 * 2 * n);
  EXPECT_DOUBLE_EQ(pass_bytes(fused[0].input_grad), 6 * 2 * n);
}

TEST(FusedSoftmax, Fp32AndEagerKeepTheirThreeKernelPath) {
  for (const auto& rules :
       {nm::OpRules(Framework::Megatron, DType::FP32), nm::OpRules(Framework::PyTorchEager, DType::BF16)}) {
    const auto ops = rules.attention_softmax("", 4, 1024, 1024);
    ASSERT_EQ(ops.size(), 3U);
    EXPECT_EQ(ops[0].name, "scale");
    EXPECT_EQ(ops[1].name, "mask");
    EXPECT_EQ(ops[2].name, "softmax");
  }
}

TEST(Embedding, BackwardFillsTheTableGradientOnceAndAddsTheTokens) {
  // embedding_dense_backward zeroes the whole table gradient (a write of
  // rows x hidden, nothing read), then scatter-adds each token's gradient
  // (an add of tokens x hidden: two reads and a write). 50,304 x 1,024 in
  // bf16: 103,022,592 bytes written; 2,048 tokens: 12,582,912 bytes.
  // (PyTorch eager: no main-gradient accumulation after it.)
  const nm::OpRules rules(Framework::PyTorchEager, DType::BF16);
  const auto op = rules.embedding("embedding", 2048, 50304, 1024);
  EXPECT_EQ(op.weight_grad.launches, 2);
  EXPECT_DOUBLE_EQ(pass_bytes(op.weight_grad), 103022592.0 + 12582912.0);
  // The forward gathers the tokens' rows: read and written once each.
  EXPECT_DOUBLE_EQ(pass_bytes(op.forward), 2.0 * 2048 * 1024 * 2);
}

TEST(FusedParts, AWeightGradientGemmsMainGradientAccumulationFollowsTheGemm) {
  // Gradient-accumulation fusion: the GEMM reads and writes the FP32 main
  // gradient, a part of its launch listed right after it; the bias
  // gradient's reduction is a kernel of its own after both (helper 77: the
  // part followed the bias kernel, which `tessera kernels` then showed it
  // as a part of).
  const nm::OpRules rules(Framework::Megatron, DType::BF16);
  const nm::OpKernels op = rules.linear("qkv", 8192, 1280, 3840, true);
  const nm::Pass& w = op.weight_grad;
  ASSERT_EQ(w.kernels.size(), 4U);
  ASSERT_EQ(w.part.size(), 4U);
  EXPECT_TRUE(nm::is_gemm(w.kernels[0].op));
  EXPECT_FALSE(w.part[0]);
  // 4 bytes per weight element (what the fusion adds to the GEMM on an H200:
  // grad_accumulation_test.cpp): 1280 x 3840 x 4 = 19,660,800 bytes.
  EXPECT_TRUE(w.part[1]);
  EXPECT_EQ(w.kernels[1].dtype, DType::FP32);
  EXPECT_DOUBLE_EQ(static_cast<double>(w.kernels[1].bytes().count()), 1280.0 * 3840 * 4);
  EXPECT_FALSE(w.part[2]);  // the bias gradient: 8192 x 3840 bf16 read
  EXPECT_FALSE(w.part[3]);  // its main-gradient accumulation
  EXPECT_EQ(w.launches, 3);
}

TEST(Optimizer, GradientClippingCostsANormAndARescaleWithEitherAdam) {
  // Global-norm clipping reads every FP32 gradient once for the norm (4
  // bytes a parameter), then rescales them (read and write: 8 bytes), under
  // PyTorch's unfused Adam as under the fused one (helper 114: the unfused
  // optimizer priced nothing for it). 2^20 parameters: 12,582,912 bytes.
  for (const Framework f : {Framework::PyTorchEager, Framework::Megatron}) {
    const nm::OpRules rules(f, DType::BF16);
    for (const bool fused : {false, true}) {
      const auto with = rules.optimizer(1 << 20, 10, fused, true);
      const auto without = rules.optimizer(1 << 20, 10, fused, false);
      EXPECT_EQ(with.kernels.size(), without.kernels.size() + 2) << nm::to_string(f) << " fused " << fused;
      EXPECT_DOUBLE_EQ(pass_bytes(with) - pass_bytes(without), 12.0 * (1 << 20))
          << nm::to_string(f) << " fused " << fused;
      EXPECT_GT(with.launches, without.launches);
    }
  }
}
