#include <gtest/gtest.h>

#include "tessera/error.hpp"
#include "tessera/node_model/roofline.hpp"

using namespace tessera;
using namespace tessera::node_model;

TEST(GpuSpec, PresetsAreComplete) {
  for (const auto& name : gpu_preset_names()) {
    EXPECT_NO_THROW(gpu_preset(name).validate()) << name;
  }
  EXPECT_EQ(gpu_preset("H100-SXM").sms, 132);
  EXPECT_EQ(gpu_preset("A100-80GB").memory, Bytes::gib(80));
  EXPECT_THROW((void)gpu_preset("B200"), InputError);
}

TEST(Kernel, FlopsAndBytes) {
  const auto g = Kernel::gemm(KernelOp::Bmm, 2, 128, 64, 32, DType::FP32);
  EXPECT_DOUBLE_EQ(g.flops().count(), 2.0 * 2 * 128 * 64 * 32);
  EXPECT_EQ(g.bytes().count(), 4 * 2 * (128 * 32 + 32 * 64 + 128 * 64));
  const auto v = Kernel::vector(KernelOp::Add, 10, 100, DType::BF16);
  EXPECT_EQ(v.bytes().count(), 2 * 10 * 100 * 3);  // two inputs, one output
  EXPECT_EQ(parse_kernel_op("ln"), KernelOp::LayerNorm);
  EXPECT_THROW((void)parse_kernel_op("conv2d"), InputError);
  EXPECT_THROW(Kernel::gemm(KernelOp::Linear, 1, 0, 4, 4, DType::FP32).validate(), InputError);
}

TEST(Roofline, ComputeBoundGemm) {
  RooflinePredictor p(gpu_preset("H100-SXM"));
  // 8192^3 GEMM in bf16: 2*8192^3 FLOPs at 989.4 TFLOP/s (compute bound);
  // tf32 at 494.7, fp8 at 1978.9.
  const auto k = Kernel::gemm(KernelOp::Linear, 1, 8192, 8192, 8192, DType::BF16);
  EXPECT_NEAR(p.predict(k).seconds(), 2.0 * 8192.0 * 8192 * 8192 / 989.4e12, 1e-12);
  auto tf32 = k;
  tf32.dtype = DType::TF32;
  EXPECT_NEAR(p.predict(tf32).seconds(), 2.0 * 8192.0 * 8192 * 8192 / 494.7e12, 1e-12);
  auto fp8 = k;
  fp8.dtype = DType::FP8;
  EXPECT_NEAR(p.predict(fp8).seconds(), 2.0 * 8192.0 * 8192 * 8192 / 1978.9e12, 1e-12);
}

TEST(Roofline, MemoryBoundVector) {
  RooflinePredictor p(gpu_preset("A100-40GB"));
  // 1M-element fp32 add: 12 MB moved at 1555 GB/s.
  const auto k = Kernel::vector(KernelOp::Add, 1024, 1024, DType::FP32);
  EXPECT_NEAR(p.predict(k).seconds(), 12.0 * 1024 * 1024 / 1555e9, 1e-12);
}
