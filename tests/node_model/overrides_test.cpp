// Measured kernel times (node_model::KernelTimeTable, OverridePredictor): an
// override file changes exactly the kernels it holds, in both accepted CSV
// forms; bad rows are refused with the file, row, line, column and value.
#include "tessera/node_model/overrides.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "tessera/error.hpp"
#include "tessera/node_model/predictors.hpp"
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

// PyTorch profiler exports (name,input_shapes,calls,device_time_total_us),
// rows without a dtype column in bf16 (a scenario's training.dtype).
const std::string kTorchHead = "name,input_shapes,calls,device_time_total_us\n";

std::shared_ptr<const nm::KernelTimeTable> torch_table(const std::string& rows) {
  return std::make_shared<const nm::KernelTimeTable>(
      nm::KernelTimeTable::parse(kTorchHead + rows, "o.csv", nm::DType::BF16));
}

std::string torch_error(const std::string& rows) {
  try {
    (void)nm::KernelTimeTable::parse(kTorchHead + rows, "o.csv", nm::DType::BF16);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

/// The PyTorch row that runs `k` (a GEMM): aten::mm [[M, K], [K, N]] for a
/// linear kernel, aten::bmm [[B, M, K], [B, K, N]] for a bmm.
std::string torch_row(const nm::Kernel& k, const std::string& time_us) {
  if (k.op == nm::KernelOp::Linear) {
    return fmt::format("aten::mm,\"[[{}, {}], [{}, {}]]\",1,{}\n", k.m, k.k, k.k, k.n, time_us);
  }
  return fmt::format("aten::bmm,\"[[{}, {}, {}], [{}, {}, {}]]\",1,{}\n", k.b, k.m, k.k, k.b, k.k, k.n,
                     time_us);
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
  threads.reserve(4);
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
      "div, divu, pow, powu, gelu, relu, tanh, softmax, ln, copy, memcpy)");
  EXPECT_NE(error_of(head + "linear,1,8,8,8,,fp64,1\n")
                .find("o.csv: row 1 (line 2), column 'dtype': unknown dtype 'fp64'"),
            std::string::npos);
  EXPECT_EQ(error_of(head + "linear,1,8,8,8,,bf16,0\n"),
            "o.csv: row 1 (line 2), column 'time_us': time must be positive (got '0')");
  EXPECT_EQ(error_of(head + "linear,1,8,8,8,,bf16,-2.5\n"),
            "o.csv: row 1 (line 2), column 'time_us': time must be positive (got '-2.5')");
  EXPECT_EQ(error_of(head + "linear,1,8,8,8,,bf16,fast\n"),
            "o.csv: row 1 (line 2), column 'time_us': 'fast' is not a number");
  // Hexadecimal (strtod reads it) is no measurement (helper 116: 0x400 and
  // 0x6d were read as 1024 and 109); blanks around a number are read past,
  // as CsvTable::number does.
  EXPECT_EQ(error_of(head + "linear,1,0x8,8,8,,bf16,1\n"),
            "o.csv: row 1 (line 2), column 'm': '0x8' is not a number");
  EXPECT_EQ(error_of(head + "linear,1,8,8,8,,bf16,0x6d\n"),
            "o.csv: row 1 (line 2), column 'time_us': '0x6d' is not a number");
  EXPECT_EQ(table(head + "linear,1, 8 ,8,8,,bf16, 7 \n")->entries().size(), 1U);
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
            "or B, H), "
            "Tessera's (op, b, m, n, k, h, dtype, time_us) or a PyTorch profiler export's (name, "
            "input_shapes, calls, device_time_total_us), got 'name,time'");
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

TEST(KernelOverridesPyTorch, RowOfATesseraKernelMatchesExactlyThatKernel) {
  // The GEMMs of a transformer layer as the planner builds them (linear:
  // b=1, M rows, N out, K in; bmm: B x M x N x K), each written as the
  // PyTorch op that runs it, matches that kernel and no other.
  using nm::KernelOp;
  const std::vector<nm::Kernel> kernels = {
      nm::Kernel::gemm(KernelOp::Linear, 1, 2048, 3072, 1024, nm::DType::BF16),  // QKV forward
      nm::Kernel::gemm(KernelOp::Linear, 1, 2048, 1024, 3072, nm::DType::BF16),  // its input gradient
      nm::Kernel::gemm(KernelOp::Linear, 1, 1024, 3072, 2048, nm::DType::BF16),  // its weight gradient
      nm::Kernel::gemm(KernelOp::Bmm, 16, 2048, 2048, 64, nm::DType::BF16),     // S = QK^T
      nm::Kernel::gemm(KernelOp::Bmm, 16, 2048, 64, 2048, nm::DType::BF16),     // O = PV
  };
  for (const auto& k : kernels) {
    const auto t = torch_table(torch_row(k, "7"));
    ASSERT_EQ(t->entries().size(), 1U);
    const auto& e = t->entries()[0];
    EXPECT_EQ(e.kernel.op, k.op);
    EXPECT_EQ(std::tie(e.kernel.b, e.kernel.m, e.kernel.n, e.kernel.k), std::tie(k.b, k.m, k.n, k.k));
    EXPECT_EQ(e.kernel.dtype, nm::DType::BF16);
    EXPECT_EQ(t->find(k), &e);
    EXPECT_EQ(e.time, Time::from_us(7));
    // Another op, dtype, batch or reduction is not it.
    nm::Kernel other = k;
    other.op = k.op == KernelOp::Bmm ? KernelOp::Linear : KernelOp::Bmm;
    EXPECT_EQ(t->find(other), nullptr);
    other = k;
    other.dtype = nm::DType::FP16;
    EXPECT_EQ(t->find(other), nullptr);
    other = k;
    other.k *= 2;
    EXPECT_EQ(t->find(other), nullptr);
    if (k.op == KernelOp::Bmm) {
      other = k;
      other.b = 32;
      EXPECT_EQ(t->find(other), nullptr);
    }
  }
}

TEST(KernelOverridesPyTorch, LeafGemmsAreReadPerCallAndEverythingElseIsCounted) {
  const auto t = torch_table(
      "ProfilerStep#2,[],1,61234.5\n"
      "aten::linear,\"[[1, 2048, 1024], [3072, 1024], [3072]]\",8,2100\n"
      "aten::addmm,\"[[3072], [2048, 1024], [1024, 3072], [], []]\",8,2001\n"
      "aten::t,\"[[3072, 1024]]\",8,0\n"
      "aten::matmul,\"[[16, 2048, 64], [16, 64, 2048]]\",4,900\n"
      "aten::bmm,\"[[16, 2048, 64], [16, 64, 2048]]\",4,880\n"
      "aten::baddbmm,\"[[1, 128, 256], [4, 128, 32], [4, 32, 256], [], []]\",2,30\n"
      "aten::gelu,\"[[1, 2048, 4096]]\",8,400\n");
  EXPECT_EQ(t->ignored_rows(), 5U);  // ProfilerStep, linear, t, matmul, gelu
  ASSERT_EQ(t->entries().size(), 3U);
  const auto* addmm = t->find(nm::Kernel::gemm(nm::KernelOp::Linear, 1, 2048, 3072, 1024, nm::DType::BF16));
  ASSERT_NE(addmm, nullptr);
  EXPECT_EQ(addmm->time, Time::from_seconds(2001e-6 / 8));
  EXPECT_EQ(addmm->line, 4U);
  const auto* bmm = t->find(nm::Kernel::gemm(nm::KernelOp::Bmm, 16, 2048, 2048, 64, nm::DType::BF16));
  ASSERT_NE(bmm, nullptr);
  EXPECT_EQ(bmm->time, Time::from_us(220));
  const auto* baddbmm = t->find(nm::Kernel::gemm(nm::KernelOp::Bmm, 4, 128, 256, 32, nm::DType::BF16));
  ASSERT_NE(baddbmm, nullptr);
  EXPECT_EQ(baddbmm->time, Time::from_us(15));
  // The composite aten::linear's shape is its input's, not a GEMM's: the
  // only 2048 x 3072 x 1024 GEMM is the addmm's.
  const nm::RooflinePredictor base(nm::gpu_preset("H100-SXM"));
  const nm::OverridePredictor p(base, t);
  EXPECT_EQ(p.stats().ignored_rows, 5U);
  EXPECT_EQ(p.stats().entries, 3U);
}

TEST(KernelOverridesPyTorch, DtypeComesFromTheColumnElseTheTrainingDtype) {
  const std::string row = "aten::mm,\"[[64, 32], [32, 16]]\",2,10";
  const auto fp16 = nm::KernelTimeTable::parse(
      "name,input_shapes,calls,device_time_total_us,dtype\n" + row + ",fp16\n", "o.csv", nm::DType::BF16);
  EXPECT_NE(fp16.find(nm::Kernel::gemm(nm::KernelOp::Linear, 1, 64, 16, 32, nm::DType::FP16)), nullptr);
  EXPECT_EQ(fp16.find(nm::Kernel::gemm(nm::KernelOp::Linear, 1, 64, 16, 32, nm::DType::BF16)), nullptr);
  // PyTorch's own names (str(torch.bfloat16) without the prefix) are read too.
  const auto bf16 = nm::KernelTimeTable::parse(
      "name,input_shapes,calls,device_time_total_us,dtype\n" + row + ",bfloat16\n", "o.csv");
  EXPECT_NE(bf16.find(nm::Kernel::gemm(nm::KernelOp::Linear, 1, 64, 16, 32, nm::DType::BF16)), nullptr);
  const auto torch_name = nm::KernelTimeTable::parse(
      "name,input_shapes,calls,device_time_total_us,dtype\n" + row + ",torch.float16\n", "o.csv");
  EXPECT_NE(torch_name.find(nm::Kernel::gemm(nm::KernelOp::Linear, 1, 64, 16, 32, nm::DType::FP16)), nullptr);
  EXPECT_NE(error_of("name,input_shapes,calls,device_time_total_us,dtype\n" + row + ",torch.float64\n")
                .find("o.csv: row 1 (line 2), column 'dtype': unknown dtype 'float64'"),
            std::string::npos);
  const auto dflt = nm::KernelTimeTable::parse(kTorchHead + row + "\n", "o.csv", nm::DType::FP32);
  EXPECT_NE(dflt.find(nm::Kernel::gemm(nm::KernelOp::Linear, 1, 64, 16, 32, nm::DType::FP32)), nullptr);
  try {
    (void)nm::KernelTimeTable::parse(kTorchHead + row + "\n", "o.csv");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "o.csv: a PyTorch profiler export needs a 'dtype' column (or a scenario's training.dtype to "
              "take it from)");
  }
}

TEST(KernelOverridesPyTorch, OneShapeFromSeveralOpsIsMergedAndTheTransposeMatchesUnlessGiven) {
  // mm and addmm of one shape (a square projection's input gradient and
  // forward): one kernel, total time over total calls.
  const auto t = torch_table(
      "aten::addmm,\"[[1024], [2048, 1024], [1024, 1024], [], []]\",4,400\n"
      "aten::mm,\"[[2048, 1024], [1024, 1024]]\",4,480\n"
      "aten::mm,\"[[3072, 2048], [2048, 1024]]\",2,300\n");
  ASSERT_EQ(t->entries().size(), 2U);
  const auto* sq = t->find(nm::Kernel::gemm(nm::KernelOp::Linear, 1, 2048, 1024, 1024, nm::DType::BF16));
  ASSERT_NE(sq, nullptr);
  EXPECT_EQ(sq->time, Time::from_us(110));
  EXPECT_EQ(sq->line, 2U);
  // PyTorch's nn.Linear weight gradient (dY^T X)^T is out x in x rows;
  // Tessera's is in x out x rows: the same product, matched both ways.
  const auto* wg = t->find(nm::Kernel::gemm(nm::KernelOp::Linear, 1, 1024, 3072, 2048, nm::DType::BF16));
  ASSERT_NE(wg, nullptr);
  EXPECT_EQ(wg, t->find(nm::Kernel::gemm(nm::KernelOp::Linear, 1, 3072, 1024, 2048, nm::DType::BF16)));
  EXPECT_EQ(wg->time, Time::from_us(150));
  // A row that gives the transposed shape itself wins over the alias.
  const auto both = torch_table(
      "aten::mm,\"[[3072, 2048], [2048, 1024]]\",1,150\n"
      "aten::mm,\"[[1024, 2048], [2048, 3072]]\",1,170\n"
      "aten::bmm,\"[[8, 128, 64], [8, 64, 256]]\",1,9\n");
  EXPECT_EQ(both->find(nm::Kernel::gemm(nm::KernelOp::Linear, 1, 3072, 1024, 2048, nm::DType::BF16))->time,
            Time::from_us(150));
  EXPECT_EQ(both->find(nm::Kernel::gemm(nm::KernelOp::Linear, 1, 1024, 3072, 2048, nm::DType::BF16))->time,
            Time::from_us(170));
  EXPECT_NE(both->find(nm::Kernel::gemm(nm::KernelOp::Bmm, 8, 256, 128, 64, nm::DType::BF16)), nullptr);
  // The Tessera and NeuSight forms match exactly, never transposed.
  const auto tessera = table("op,b,m,n,k,dtype,time_us\nlinear,1,3072,1024,2048,bf16,1\n");
  EXPECT_EQ(tessera->find(nm::Kernel::gemm(nm::KernelOp::Linear, 1, 1024, 3072, 2048, nm::DType::BF16)),
            nullptr);
}

TEST(KernelOverridesPyTorch, BadRowsAreOneLineErrors) {
  EXPECT_EQ(torch_error("aten::gelu,[[8]],1,3\naten::mm,\"[[4096, 1024], [512, 3072]]\",1,5\n"),
            "o.csv: row 2 (line 3), column 'input_shapes': aten::mm expects [[M, K], [K, N]] with dimensions "
            "from 1 to 9e15, got '[[4096, 1024], [512, 3072]]'");
  EXPECT_EQ(torch_error("aten::mm,\"[[4096, 1024], [1024, 30x72]]\",1,5\n"),
            "o.csv: row 1 (line 2), column 'input_shapes': '[[4096, 1024], [1024, 30x72]]' is not a list of "
            "shapes (a Python list of integer lists, e.g. [[4096, 1024], [1024, 3072]])");
  EXPECT_EQ(torch_error("aten::mm,\"[[4096, 1024], [1024, 3072]\",1,5\n").find(
                "o.csv: row 1 (line 2), column 'input_shapes': '[[4096, 1024], [1024, 3072]' is not a list"),
            0U);
  EXPECT_EQ(torch_error("aten::mm,[],3,5\n"),
            "o.csv: row 1 (line 2), column 'input_shapes': no input shapes ('[]'): profile with "
            "record_shapes=True");
  EXPECT_EQ(torch_error("aten::bmm,\"[[4, 8, 16], [2, 16, 8]]\",1,5\n"),
            "o.csv: row 1 (line 2), column 'input_shapes': aten::bmm expects [[B, M, K], [B, K, N]] with "
            "dimensions from 1 to 9e15, got '[[4, 8, 16], [2, 16, 8]]'");
  EXPECT_EQ(torch_error("aten::addmm,\"[[7], [8, 16], [16, 32], [], []]\",1,5\n"),
            "o.csv: row 1 (line 2), column 'input_shapes': aten::addmm expects [[N] or [M, N], [M, K], [K, "
            "N], ...] with dimensions from 1 to 9e15, got '[[7], [8, 16], [16, 32], [], []]'");
  EXPECT_NE(torch_error("aten::mm,\"[[0, 16], [16, 32]]\",1,5\n").find("aten::mm expects"),
            std::string::npos);
  EXPECT_EQ(torch_error("aten::mm,\"[[8, 16], [16, 32]]\",1,fast\n"),
            "o.csv: row 1 (line 2), column 'device_time_total_us': 'fast' is not a number");
  EXPECT_EQ(torch_error("aten::mm,\"[[8, 16], [16, 32]]\",1,0\n"),
            "o.csv: row 1 (line 2), column 'device_time_total_us': time must be positive (got '0'; no device "
            "time: the op ran on the CPU or the profile lacks ProfilerActivity.CUDA)");
  EXPECT_EQ(torch_error("aten::mm,\"[[8, 16], [16, 32]]\",2.5,3\n"),
            "o.csv: row 1 (line 2), column 'calls': calls must be a positive whole number (got '2.5')");
  EXPECT_EQ(torch_error("aten::mm,\"[[8, 16], [16, 32]]\",1,1e300\n").find(
                "o.csv: row 1 (line 2), column 'device_time_total_us': time overflow"),
            0U);
  EXPECT_EQ(torch_error("aten::linear,\"[[8, 16], [32, 16]]\",1,5\naten::gelu,[[8]],1,3\n"),
            "o.csv: no kernel times: all 2 rows are composite or non-GEMM ops (read: aten::mm, aten::addmm, "
            "aten::bmm, aten::baddbmm)");
  EXPECT_EQ(torch_error(""), "o.csv: no kernel times (a header and no rows)");
  EXPECT_EQ(error_of("name,input_shapes,calls\naten::mm,\"[[8, 16], [16, 32]]\",1\n"),
            "o.csv: missing column 'device_time_total_us'");
}

// A row asked for only as a part, with a part_time_us, never uses its
// time_us: said (helper 87: an edited time_us changed nothing and the row
// read "matched") where that time_us is not a prediction (the `kernels`
// template's value), not once the kernel is also launched.
TEST(KernelOverrides, ATimeOnlyEverUsedAsAPartIsNamedUnused) {
  const auto base = nm::make_predictor("tile-mlp", nm::gpu_preset("H100-SXM"));
  const auto ln = nm::Kernel::vector(nm::KernelOp::LayerNorm, 4096, 1024, nm::DType::BF16);
  const std::string predicted = fmt::format("{:.6f}", base->predict(ln).us());
  auto stats = [&](const std::string& time_us, bool launch) {
    const nm::OverridePredictor p(*base, table("op,b,m,n,k,h,dtype,time_us,part_time_us\n"
                                               "ln,4096,,,,1024,bf16," +
                                               time_us + ",2.5\n"));
    (void)p.predict_part(ln);
    if (launch) (void)p.predict(ln);
    return p.stats();
  };
  EXPECT_EQ(stats("500", false).unused_time_lines, std::vector<std::size_t>{2});
  EXPECT_TRUE(stats(predicted, false).unused_time_lines.empty());
  EXPECT_TRUE(stats("500", true).unused_time_lines.empty());
  EXPECT_EQ(stats("500", false).matched, 1U);
}

TEST(KernelOverrides, APartOfALaunchTakesItsPartTimeTheMeasuredTimeOrTheBasesPartTime) {
  // part_time_us: the kernel's time as a further part of a fused kernel;
  // without one (an empty cell) time_us stands for it. Other parts are the
  // wrapped predictor's, without its floors.
  const auto base = nm::make_predictor("tile-mlp", nm::gpu_preset("H100-SXM"));
  const nm::OverridePredictor p(*base, table("op,b,m,n,k,h,dtype,time_us,part_time_us\n"
                                             "bmm,32,128,128,64,0,fp16,9,\n"
                                             "ln,4096,,,,1024,bf16,7,2.5\n"));
  const auto measured = nm::Kernel::gemm(nm::KernelOp::Bmm, 32, 128, 128, 64, nm::DType::FP16);
  EXPECT_EQ(p.predict_part(measured), Time::from_us(9));
  const auto ln = nm::Kernel::vector(nm::KernelOp::LayerNorm, 4096, 1024, nm::DType::BF16);
  EXPECT_EQ(p.predict_part(ln), Time::from_ps(2'500'000));
  EXPECT_EQ(p.predict_device(ln), Time::from_us(7));
  const auto tiny = nm::Kernel::gemm(nm::KernelOp::Bmm, 1, 128, 128, 128, nm::DType::BF16);
  EXPECT_EQ(p.predict_part(tiny), base->predict_part(tiny));
  EXPECT_LT(p.predict_part(tiny), p.predict_device(tiny));  // the base's GPU floor
  EXPECT_EQ(p.stats().matched, 2U);
  // A part time is a time: positive, a number.
  const std::string head = "op,b,h,dtype,time_us,part_time_us\n";
  for (const char* bad : {"ln,4096,1024,bf16,7,0\n", "ln,4096,1024,bf16,7,x\n"}) {
    EXPECT_THROW((void)table(head + bad), tessera::InputError) << bad;
  }
}
