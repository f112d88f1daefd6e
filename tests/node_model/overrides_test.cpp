// Measured kernel times (node_model::KernelTimeTable, OverridePredictor): an
// override file changes exactly the kernels it holds, in both accepted CSV
// forms; bad rows are refused with the file, row, line, column and value.
#include "tessera/node_model/overrides.hpp"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "tessera/error.hpp"
#include "tessera/node_model/roofline.hpp"

using namespace tessera;
namespace nm = tessera::node_model;

namespace {

std::string error_of(const std::string& csv) {
  try {
    (void)nm::KernelTimeTable::parse(csv, "o.csv");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

std::shared_ptr<const nm::KernelTimeTable> table(const std::string& csv) {
  return std::make_shared<const nm::KernelTimeTable>(nm::KernelTimeTable::parse(csv, "o.csv"));
}

}  // namespace

TEST(KernelOverrides, MatchedKernelsTakeTheMeasuredTimeAndOthersAreUnchanged) {
  const nm::RooflinePredictor base(nm::gpu_preset("H100-SXM"));
  const auto qkv = nm::Kernel::gemm(nm::KernelOp::Linear, 1, 4096, 3072, 1024, nm::DType::BF16);
  const auto ln = nm::Kernel::vector(nm::KernelOp::LayerNorm, 4096, 1024, nm::DType::BF16);
  const nm::OverridePredictor p(base, table("op,b,m,n,k,h,dtype,time_us\n"
                                            "linear,1,4096,3072,1024,,bf16,123.5\n"
                                            "ln,4096,,,,1024,bf16,7\n"
                                            "bmm,32,128,128,64,0,fp16,9\n"));
  EXPECT_EQ(p.predict(qkv), Time::from_ps(123'500'000));
  EXPECT_EQ(p.predict_device(qkv), Time::from_ps(123'500'000));
  EXPECT_EQ(p.predict(ln), Time::from_us(7));
  // Anything that differs in op, dtype or one dimension is the base's.
  const std::vector<nm::Kernel> others = {
      nm::Kernel::gemm(nm::KernelOp::Bmm, 1, 4096, 3072, 1024, nm::DType::BF16),     // op
      nm::Kernel::gemm(nm::KernelOp::Linear, 1, 4096, 3072, 1024, nm::DType::FP16),  // dtype
      nm::Kernel::gemm(nm::KernelOp::Linear, 2, 4096, 3072, 1024, nm::DType::BF16),  // b
      nm::Kernel::gemm(nm::KernelOp::Linear, 1, 4096, 1024, 3072, nm::DType::BF16),  // n, k swapped
      nm::Kernel::vector(nm::KernelOp::LayerNorm, 1024, 4096, nm::DType::BF16),      // rows, cols swapped
  };
  for (const auto& k : others) {
    EXPECT_EQ(p.predict(k), base.predict(k));
    EXPECT_EQ(p.predict_device(k), base.predict_device(k));
  }
  EXPECT_NE(base.predict(qkv), Time::from_ps(123'500'000));  // the override is a change
  const auto s = p.stats();
  EXPECT_EQ(s.path, "o.csv");
  EXPECT_EQ(s.entries, 3U);
  EXPECT_EQ(s.matched, 2U);    // qkv and ln; the bmm never asked for
  EXPECT_EQ(s.lookups, 3);     // qkv twice, ln once
  EXPECT_EQ(s.delegated, 10);  // five others, each twice
  EXPECT_EQ(p.name(), base.name());
}

TEST(KernelOverrides, CountsAreExactAcrossThreads) {
  const nm::RooflinePredictor base(nm::gpu_preset("H100-SXM"));
  const nm::OverridePredictor p(base, table("op,b,h,dtype,time_us\ngelu,8,1024,fp32,3\n"));
  const auto hit = nm::Kernel::vector(nm::KernelOp::Gelu, 8, 1024, nm::DType::FP32);
  const auto miss = nm::Kernel::vector(nm::KernelOp::Gelu, 8, 2048, nm::DType::FP32);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        (void)p.predict(hit);
        (void)p.predict(miss);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(p.stats().lookups, 4000);
  EXPECT_EQ(p.stats().delegated, 4000);
  EXPECT_EQ(p.stats().matched, 1U);
}

TEST(KernelOverrides, NeuSightRowsReadAsTheirKernels) {
  // NeuSight's GEMM columns are [B,M,N] x [B,N,K]: N the reduction, so the
  // kernel is Kernel::gemm(op, B, M, n = K, k = N); Latency is in ms; FP32.
  const auto t = table(
      "OPName,Latency,Device,Kernel Name,B,M,N,K\n"
      "bmm,0.25,NVIDIA H100 80GB HBM3,\"sgemm_128x64, tn\",12,256,64,512\n"
      "linear,1.5,NVIDIA H100 80GB HBM3,x,1,1024,4096,2048\n");
  const auto* bmm = t->find(nm::Kernel::gemm(nm::KernelOp::Bmm, 12, 256, 512, 64, nm::DType::FP32));
  ASSERT_NE(bmm, nullptr);
  EXPECT_EQ(bmm->time, Time::from_us(250));
  EXPECT_EQ(bmm->line, 2U);
  const auto* lin = t->find(nm::Kernel::gemm(nm::KernelOp::Linear, 1, 1024, 2048, 4096, nm::DType::FP32));
  ASSERT_NE(lin, nullptr);
  EXPECT_EQ(lin->time, Time::from_us(1500));
  EXPECT_EQ(t->find(nm::Kernel::gemm(nm::KernelOp::Linear, 1, 1024, 2048, 4096, nm::DType::BF16)), nullptr);
  // Vector ops (B,H) and an optional dtype column.
  const auto v = table("OPName,Latency,B,H,dtype\nsoftmax,0.004,64,2048,bf16\n");
  ASSERT_NE(v->find(nm::Kernel::vector(nm::KernelOp::Softmax, 64, 2048, nm::DType::BF16)), nullptr);
}

TEST(KernelOverrides, BadRowsNameFileRowLineColumnAndValue) {
  const std::string head = "op,b,m,n,k,h,dtype,time_us\n";
  EXPECT_EQ(
      error_of(head + "linear,1,8,8,8,,bf16,1\n\nconv,1,8,8,8,,bf16,1\n"),
      "o.csv: row 2 (line 4), column 'op': unknown op 'conv' (expected bmm, linear, add, addu, mul, mulu, "
      "div, divu, pow, powu, gelu, relu, tanh, softmax, ln)");
  EXPECT_NE(error_of(head + "linear,1,8,8,8,,fp64,1\n")
                .find("o.csv: row 1 (line 2), column 'dtype': unknown dtype 'fp64'"),
            std::string::npos);
  EXPECT_EQ(error_of(head + "linear,1,8,8,8,,bf16,0\n"),
            "o.csv: row 1 (line 2), column 'time_us': time must be positive (got '0')");
  EXPECT_EQ(error_of(head + "linear,1,8,8,8,,bf16,-2.5\n"),
            "o.csv: row 1 (line 2), column 'time_us': time must be positive (got '-2.5')");
  EXPECT_EQ(error_of(head + "linear,1,8,8,8,,bf16,fast\n"),
            "o.csv: row 1 (line 2), column 'time_us': 'fast' is not a number");
  EXPECT_NE(error_of(head + "linear,1,8,8,8,,bf16,1e300\n")
                .find("o.csv: row 1 (line 2), column 'time_us': time overflow"),
            std::string::npos);
  EXPECT_EQ(error_of(head + "linear,1,8,0,8,,bf16,1\n"),
            "o.csv: row 1 (line 2), column 'n': dimension must be a positive whole number (got '0')");
  EXPECT_EQ(error_of(head + "linear,1,8,8,8,64,bf16,1\n"),
            "o.csv: row 1 (line 2), column 'h': '64' is not used by a linear kernel (leave it empty or 0; "
            "GEMMs use "
            "b,m,n,k, vector ops b,h)");
  EXPECT_EQ(
      error_of(head + "linear,1,8,8,8,,bf16,1\nln,4,,,,8,bf16,2\nlinear,1,8,8,8,0,bf16,3\n"),
      "o.csv: row 3 (line 4): linear b=1 m=8 n=8 k=8 bf16 is listed twice, first on row 1 (line 2); keep one "
      "time per kernel");
  EXPECT_EQ(error_of("op,b,dtype,time_us\nln,4,fp32,1\n"), "o.csv: missing column 'h'");
  EXPECT_EQ(error_of("op,b,m,n,k,dtype\nlinear,1,8,8,8,fp32\n"), "o.csv: missing column 'time_us'");
  EXPECT_EQ(error_of(head), "o.csv: no kernel times (a header and no rows)");
  EXPECT_EQ(error_of("name,time\nx,1\n"),
            "o.csv: line 1: not a kernel-time CSV: expected NeuSight's columns (OPName, Latency, B, M, N, K "
            "or B, H) "
            "or Tessera's (op, b, m, n, k, h, dtype, time_us), got 'name,time'");
  EXPECT_EQ(error_of("OPName,Latency,Device,B,H\nln,0.1,A100,4,8\nln,0.1,V100,4,16\n"),
            "o.csv: row 2 (line 3), column 'Device': 'V100' differs from 'A100' of row 1 (line 2): an "
            "override file "
            "holds the measurements of one GPU");
  EXPECT_EQ(error_of("OPName,Latency,B,H\nln,0,4,8\n"),
            "o.csv: row 1 (line 2), column 'Latency': time must be positive (got '0')");
  EXPECT_EQ(error_of("OPName,Latency,B,H\nconv2d,1,4,8\n")
                .find("o.csv: row 1 (line 2), column 'OPName': unknown op 'conv2d'"),
            0U);
}
