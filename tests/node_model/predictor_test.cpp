// The learned kernel predictors: input handling, the shipped weights, and
// accuracy on NeuSight's real measurements (skipped when the data is absent).
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "tessera/error.hpp"
#include "tessera/files.hpp"
#include "tessera/node_model/csv.hpp"
#include "tessera/node_model/dataset.hpp"
#include "tessera/node_model/device_config.hpp"
#include "tessera/node_model/json.hpp"
#include "tessera/node_model/model_graph.hpp"
#include "tessera/node_model/predictors.hpp"
#include "tessera/node_model/roofline.hpp"
#include "tessera/node_model/tile_mlp.hpp"
#include "tessera/node_model/validation.hpp"

namespace nm = tessera::node_model;
namespace fs = std::filesystem;
using tessera::InputError;

namespace {

std::string data_root() {
  const char* src = std::getenv("TESSERA_SOURCE_DIR");
  if (src == nullptr) return {};
  const fs::path p = fs::path(src) / ".." / "shared" / "data" / "neusight";
  return fs::is_directory(p / "kernels" / "test") ? p.lexically_normal().string() : std::string();
}

// The macro declares a variable named by its argument, which cannot be
// parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define REQUIRE_DATA(root)                                                                              \
  const std::string root = data_root();                                                                 \
  if (root.empty()) GTEST_SKIP() << "NeuSight data not found at $TESSERA_SOURCE_DIR/../shared/data/neusight; " \
                                    "accuracy tests skipped"
// NOLINTEND(bugprone-macro-parentheses)

// Accuracy guards: what the committed weights measure on the fixed test
// subset, rounded up slightly, so a regression fails. Issue-3 targets are
// 10% (GEMMs), 8% (vector ops) and 5% (end to end).
constexpr double kBmmLimit = 8.5;         // measured 8.3% (target 10%: met); 7.7% with weights v6, whose bmm
                                          // net generalised worse to held-out GPUs (docs/node_model.md)
constexpr double kLinearLimit = 8.0;      // measured 7.5% (target 10%: met)
constexpr double kElementwiseLimit = 3.0;  // measured 2.5% (target 8%: met)
constexpr double kSoftmaxLimit = 7.6;     // measured 7.2% (target 8%: met)
constexpr double kLnLimit = 7.5;          // measured 7.0% (target 8%: met)
constexpr double kE2eLimit = 7.4;         // measured 7.0% (target 5%: not met)
constexpr double kOpsLimit = 8.5;         // each A100-80GB training run vs its own op sum: measured max 7.7%

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no InputError>";
}

const std::string kA100Json =
    R"({"Device":"NVIDIA A100 80GB PCIe","Dev_Mem":80,"Mem_Bw":1935,"Num_Sm":108,"Core_Per_SM":64,)"
    R"("Freq":1410,"SingleFLOPs":19492,"L2Cache":40})";

nm::GpuSpec a100_80() { return nm::gpu_from_device_json(nm::parse_json(kA100Json, "a100.json"), "a100.json"); }

}  // namespace

TEST(DeviceConfig, ParsesNeuSightJson) {
  const nm::GpuSpec g = a100_80();
  EXPECT_EQ(g.name, "NVIDIA A100 80GB PCIe");
  EXPECT_EQ(g.sms, 108);
  EXPECT_NEAR(g.fp32_peak.tflops(), 19.492, 1e-9);
  EXPECT_NEAR(g.memory_bandwidth.bytes_per_second(), 1935e9, 1.0);
}

TEST(DeviceConfig, AmdMatrixPeakTimesFp32Gemms) {
  // NeuSight's AMD configs: SingleFLOPsVEC for vector kernels, SingleFLOPsMM
  // (the matrix cores) for FP32 GEMMs, as NeuSight's GEMM predictors read
  // it. An MI250's 8192^3 FP32 GEMM is 2 x 8192^3 / 45.3 TFLOP/s = 24.27 ms
  // on the roofline (it was timed at the vector peak: 48.65 ms).
  const std::string mi250 =
      R"({"Device":"AMD Instinct MI250","Dev_Mem":64,"Mem_Bw":1640,"Num_Sm":104,"Core_Per_SM":4,"Freq":1700,)"
      R"("SingleFLOPsMM":45300,"SingleFLOPsVEC":22600,"L2Cache":16})";
  const nm::GpuSpec g = nm::gpu_from_device_json(nm::parse_json(mi250, "mi250.json"), "mi250.json");
  EXPECT_NEAR(g.fp32_peak.tflops(), 22.6, 1e-9);
  EXPECT_NEAR(g.matmul_peak(nm::DType::FP32).tflops(), 45.3, 1e-9);
  EXPECT_NEAR(g.matmul_peak(nm::DType::TF32).tflops(), 45.3, 1e-9);  // no TF32 peak: an FP32 GEMM
  const nm::RooflinePredictor roof(g);
  const auto gemm = nm::Kernel::gemm(nm::KernelOp::Linear, 1, 8192, 8192, 8192, nm::DType::FP32);
  EXPECT_NEAR(roof.predict(gemm).ms(), 2.0 * 8192 * 8192 * 8192 / 45.3e12 * 1e3, 1e-6);
  // A matrix peak below the vector one is a unit slip.
  const std::string slip =
      R"({"Device":"X","Dev_Mem":64,"Mem_Bw":1640,"Num_Sm":104,"SingleFLOPsMM":45.3,"SingleFLOPsVEC":22600,)"
      R"("L2Cache":16})";
  EXPECT_EQ(error_of([&] { (void)nm::gpu_from_device_json(nm::parse_json(slip, "x.json"), "x.json"); }),
            "x.json: field 'SingleFLOPsMM' (45.3) is below 'SingleFLOPsVEC' (22600): in TFLOP/s? "
            "the fields are in GFLOP/s");
}

TEST(DeviceConfig, ErrorsNameFileAndField) {
  EXPECT_NE(error_of([] { (void)nm::gpu_from_device_json(nm::parse_json(R"({"Device":"x"})", "d.json"), "d.json"); })
                .find("d.json: missing field 'Dev_Mem'"),
            std::string::npos);
  const std::string bad = R"({"Device":"x","Dev_Mem":8,"Mem_Bw":-1,"Num_Sm":4,"SingleFLOPs":1,"L2Cache":1})";
  EXPECT_NE(error_of([&] { (void)nm::gpu_from_device_json(nm::parse_json(bad, "d.json"), "d.json"); })
                .find("'Mem_Bw' must be positive"),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)nm::parse_json("{\"a\": 1,\n \"b\" 2}", "m.json"); }).find("m.json: line 2"),
            std::string::npos);
}

TEST(DeviceConfig, NoTensorPeakNoSixteenBitGemmsAndTyposAreErrors) {
  // NeuSight's configs give no TensorFLOPs: FP32 as always, but a 16-bit
  // GEMM is refused rather than timed at the FP32 peak (8.6 ms for a 4096^3
  // bf16 GEMM on an A100, 16x the preset's 0.54 ms).
  const nm::GpuSpec g = a100_80();
  EXPECT_FALSE(g.tensor_peak_given);
  EXPECT_NEAR(g.matmul_peak(nm::DType::FP32).tflops(), 19.492, 1e-9);
  EXPECT_EQ(
      error_of([&] { (void)g.matmul_peak(nm::DType::BF16); }),
      "GPU 'NVIDIA A100 80GB PCIe' has no 16-bit tensor-core peak (its device config gives no TensorFLOPs, "
      "in GFLOP/s): cannot time bf16 GEMMs");
  const std::string with = kA100Json.substr(0, kA100Json.size() - 1) + R"(,"TensorFLOPs":312000})";
  const nm::GpuSpec t = nm::gpu_from_device_json(nm::parse_json(with, "t.json"), "t.json");
  EXPECT_TRUE(t.tensor_peak_given);
  EXPECT_NEAR(t.matmul_peak(nm::DType::FP16).tflops(), 312.0, 1e-9);
  // A typo of a field is an error (case included); an unrelated field is not.
  const std::string typo = kA100Json.substr(0, kA100Json.size() - 1) + R"(,"TensorFlops":312000})";
  EXPECT_EQ(
      error_of([&] { (void)nm::gpu_from_device_json(nm::parse_json(typo, "t.json"), "t.json"); }),
      "t.json: unknown field 'TensorFlops', did you mean 'TensorFLOPs'? (field names are case-sensitive)");
  const std::string near = kA100Json.substr(0, kA100Json.size() - 1) + R"(,"TensorFLOP":312000})";
  EXPECT_EQ(error_of([&] { (void)nm::gpu_from_device_json(nm::parse_json(near, "t.json"), "t.json"); }),
            "t.json: unknown field 'TensorFLOP', did you mean 'TensorFLOPs'?");
  const std::string other = kA100Json.substr(0, kA100Json.size() - 1) + R"(,"Vendor":"NVIDIA"})";
  EXPECT_NO_THROW((void)nm::gpu_from_device_json(nm::parse_json(other, "t.json"), "t.json"));
  // An L40S written in TB/s and TFLOP/s (0.864, 91.6) instead of GB/s and
  // GFLOP/s is refused, not timed a thousand times slow.
  const std::string tb =
      R"({"Device":"L40S","Dev_Mem":48,"Mem_Bw":0.864,"Num_Sm":142,"SingleFLOPs":91600,"L2Cache":96})";
  EXPECT_EQ(error_of([&] { (void)nm::gpu_from_device_json(nm::parse_json(tb, "l.json"), "l.json"); }),
            "l.json: field 'Mem_Bw' is 0.864 GB/s, below any GPU's 10 (in TB/s? the field is in GB/s)");
  const std::string tf =
      R"({"Device":"L40S","Dev_Mem":48,"Mem_Bw":864,"Num_Sm":142,"SingleFLOPs":91.6,"L2Cache":96})";
  EXPECT_EQ(error_of([&] { (void)nm::gpu_from_device_json(nm::parse_json(tf, "l.json"), "l.json"); }),
            "l.json: field 'SingleFLOPs' is 91.6 GFLOP/s, below any GPU's 100 "
            "(in TFLOP/s? the field is in GFLOP/s)");
  // A tensor-core peak in TFLOP/s is above 100 but below the FP32 peak.
  const std::string h100 =
      R"({"Device":"H100","Dev_Mem":80,"Mem_Bw":3350,"Num_Sm":132,"SingleFLOPs":67000,"L2Cache":50,"TensorFLOPs":989})";
  EXPECT_EQ(error_of([&] { (void)nm::gpu_from_device_json(nm::parse_json(h100, "h.json"), "h.json"); }),
            "h.json: field 'TensorFLOPs' (989) is below 'SingleFLOPs' (67000): "
            "in TFLOP/s? the fields are in GFLOP/s");
  const std::string fp8 =
      R"({"Device":"H100","Dev_Mem":80,"Mem_Bw":3350,"Num_Sm":132,"SingleFLOPs":67000,"L2Cache":50,)"
      R"("TensorFLOPs":989000,"FP8FLOPs":1979})";
  EXPECT_EQ(error_of([&] { (void)nm::gpu_from_device_json(nm::parse_json(fp8, "h.json"), "h.json"); }),
            "h.json: field 'FP8FLOPs' (1979) is below 'TensorFLOPs' (989000): "
            "in TFLOP/s? the fields are in GFLOP/s");
}

TEST(KernelCsv, ErrorsNameFileRowAndColumn) {
  const auto t = nm::parse_csv("OPName,B,M,N,K\nbmm,1,2,3,4\nfoo,1,2,3,4\nbmm,1,0,3,4\nbmm,1,x,3,4\n", "k.csv");
  // NeuSight's N is the reduction, K the output width: Kernel::k = N, n = K.
  EXPECT_EQ(nm::kernel_from_row(t, 0).k, 3);
  EXPECT_EQ(nm::kernel_from_row(t, 0).n, 4);
  EXPECT_NE(error_of([&] { (void)nm::kernel_from_row(t, 1); }).find("k.csv: row 2, column 'OPName'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)nm::kernel_from_row(t, 2); }).find("k.csv: row 3, column 'M'"), std::string::npos);
  EXPECT_NE(error_of([&] { (void)nm::kernel_from_row(t, 3); }).find("not a number"), std::string::npos);
  const auto v = nm::parse_csv("OPName,B\nsoftmax,4\n", "v.csv");
  EXPECT_NE(error_of([&] { (void)nm::kernel_from_row(v, 0); }).find("v.csv: missing column 'H'"), std::string::npos);
  EXPECT_NE(error_of([] { (void)nm::parse_csv("a,b\n1,2,3\n", "r.csv"); }).find("r.csv: row 1"), std::string::npos);
  // Spaces around numbers and op names are read past at both ends (helper
  // 102: a trailing one was refused); inside a number they are an error.
  const auto sp = nm::parse_csv("OPName,B,M,N,K\n Linear ,1 , 2,3\t,4\nbmm,1,2 2,3,4\n", "s.csv");
  EXPECT_EQ(nm::kernel_from_row(sp, 0).op, nm::KernelOp::Linear);
  EXPECT_EQ(nm::kernel_from_row(sp, 0).m, 2);
  EXPECT_EQ(nm::kernel_from_row(sp, 0).k, 3);
  EXPECT_EQ(error_of([&] { (void)nm::kernel_from_row(sp, 1); }),
            "s.csv: row 2, column 'M': '2 2' is not a number");
}

TEST(KernelCsv, LoneCarriageReturnsEndRowsAndGraphsNeedTheirColumns) {
  // Old Mac line ends (CR alone) end rows as LF and CRLF do; before, the
  // whole file was one header line.
  const auto cr = nm::parse_csv("OPName,B,M,N,K\rlinear,1,64,64,64\r", "cr.csv");
  EXPECT_EQ(cr.header.size(), 5U);
  ASSERT_EQ(cr.rows.size(), 1U);
  EXPECT_EQ(cr.rows[0][4], "64");
  // A NUL byte is refused by line: it cut short every message quoting its
  // cell (helper 107).
  EXPECT_EQ(error_of([] { (void)nm::parse_csv(std::string("OPName,B\nadd,2\nmul,\0\n", 20), "nul.csv"); }),
            "nul.csv: line 3: a NUL byte: not a UTF-8 text CSV file (binary, UTF-16 or damaged)");
  const auto crlf = nm::parse_csv("OPName,B\r\nadd,2\r\n", "crlf.csv");
  EXPECT_EQ(crlf.rows.size(), 1U);
  EXPECT_EQ(crlf.rows[0][1], "2");
  // A graph with backward times but no forward column: 'latency' (forward
  // + backward) is not taken for the forward; a graph without ops is no graph.
  const std::string head = "op,target,meta,input_shapes,output_shape,latency";
  EXPECT_EQ(
      error_of([&] { (void)nm::fx_graph_from_csv(nm::parse_csv(head + ",bw_latency\n", "g.csv"), "g.csv"); }),
      "g.csv: missing column 'fw_latency' (a graph with 'bw_latency' needs its forward times; 'latency' is "
      "forward + backward)");
  EXPECT_EQ(error_of([&] { (void)nm::fx_graph_from_csv(nm::parse_csv(head + "\n", "g.csv"), "g.csv"); }),
            "g.csv: no ops (a header line, then one op per row)");
  // A shape cell cut short, or one with a stray closing bracket, read as no
  // shape (helper 107: an unclosed input_shapes was accepted).
  auto matmul = [&](const std::string& in) {
    return error_of([&] {
      (void)nm::fx_graph_from_csv(nm::parse_csv(head + "\ncall_function,<built-in function matmul>,{},\"" +
                                                    in + "\",\"(4, 2, 16)\",0.01\n",
                                                "g.csv"),
                                  "g.csv");
    });
  };
  EXPECT_EQ(
      matmul("[[4, 2, 8], [4, 8, 16]"),
      "g.csv: row 1, columns 'input_shapes'/'output_shape': cannot parse shapes (1 bracket never closed)");
  EXPECT_EQ(matmul("[[4, 2, 8]], [4, 8, 16]]"),
            "g.csv: row 1, columns 'input_shapes'/'output_shape': cannot parse "
            "shapes (']' closes a bracket never opened)");
  EXPECT_EQ(matmul("[[4, 2, 8], [4, 8, 16]]"), "<no InputError>");
}

TEST(KernelCsv, GraphConversionsThatReturnTheirInputHaveNoKernelAndKernelsTakeTheRowsDtype) {
  // PyTorch returns the tensor itself from .to() to its own dtype and from
  // .contiguous() on a contiguous tensor: no kernel. To another dtype, or
  // from a strided tensor, a copy.
  const std::string csv =
      "op,target,_args,meta,input_shapes,input_contiguous,output_shape,latency,dtype,Name\n"
      "placeholder,x,(),{},[],[],\"(4, 8)\",0,torch.float32,x\n"
      "call_method,to,\"(x, torch.float32)\",{},\"[[4, 8]]\",[True],\"(4, 8)\",0.01,torch.float32,to_same\n"
      "call_method,to,\"(x, torch.float16)\",{},\"[[4, 8]]\",[True],\"(4, 8)\",0.01,torch.float16,to_half\n"
      "call_method,float,\"(to_half,)\",{},\"[[4, 8]]\",[True],\"(4, 8)\",0.01,torch.float32,back\n"
      "call_method,contiguous,\"(x,)\",{},\"[[4, 8]]\",[True],\"(4, 8)\",0.01,torch.float32,already\n"
      "call_method,contiguous,\"(x,)\",{},\"[[4, 8]]\",[False],\"(4, 8)\",0.01,torch.float32,strided\n";
  const nm::FxGraph g = nm::fx_graph_from_csv(nm::parse_csv(csv, "g.csv"), "g.csv");
  ASSERT_EQ(g.ops.size(), 6U);
  std::map<std::string, std::size_t> kernels;
  for (const auto& op : g.ops) kernels[op.name] = op.kernels.size();
  EXPECT_EQ(kernels["to_same"], 0U);
  EXPECT_EQ(kernels["to_half"], 1U);
  EXPECT_EQ(kernels["back"], 1U);  // float16 -> float32
  EXPECT_EQ(kernels["already"], 0U);
  EXPECT_EQ(kernels["strided"], 1U);
  EXPECT_EQ(g.ops[5].row, 6);
  // Each kernel takes its row's dtype: a float16 graph is priced in float16.
  EXPECT_EQ(g.ops[2].kernels.at(0).dtype, nm::DType::FP16);
  EXPECT_EQ(g.ops[5].kernels.at(0).dtype, nm::DType::FP32);
}

TEST(KernelCsv, DtypeCellsTrimmedEmptyMeansTheFallbackTorchNamesRead) {
  const auto t =
      nm::parse_csv("OPName,dtype\nadd, bf16\nadd,\nadd,torch.float16\nadd,half\nadd,bf61\n", "d.csv");
  const int col = t.column("dtype");
  EXPECT_EQ(nm::row_dtype(t, 0, col, nm::DType::FP32), nm::DType::BF16);
  EXPECT_EQ(nm::row_dtype(t, 1, col, nm::DType::FP8), nm::DType::FP8);  // no dtype: --dtype's
  EXPECT_EQ(nm::row_dtype(t, 2, col, nm::DType::FP32), nm::DType::FP16);
  EXPECT_EQ(nm::row_dtype(t, 3, col, nm::DType::FP32), nm::DType::FP16);
  EXPECT_EQ(error_of([&] { (void)nm::row_dtype(t, 4, col, nm::DType::FP32); }),
            "d.csv: row 5, column 'dtype': unknown dtype 'bf61' (expected fp32, tf32, fp16, bf16 or fp8)");
  EXPECT_EQ(nm::parse_dtype("torch.bfloat16"), nm::DType::BF16);
  EXPECT_EQ(nm::parse_dtype("float"), nm::DType::FP32);
  // PyTorch's FP8 types, either format (helper 102: refused).
  EXPECT_EQ(nm::parse_dtype("torch.float8_e4m3fn"), nm::DType::FP8);
  EXPECT_EQ(nm::parse_dtype("float8_e5m2"), nm::DType::FP8);
  EXPECT_EQ(nm::try_parse_dtype("float8"), std::nullopt);
}

TEST(KernelCsv, QuotedCellsAndAtomicWrite) {
  const auto t = nm::parse_csv("OPName,Kernel Name,B,H\nadd,\"void f<4, float>(int, \"\"x\"\")\",2,3\n", "q.csv");
  EXPECT_EQ(t.rows[0][1], "void f<4, float>(int, \"x\")");
  EXPECT_EQ(nm::csv_escape(t.rows[0][1]), "\"void f<4, float>(int, \"\"x\"\")\"");
  const fs::path dir = fs::temp_directory_path() / "tessera_csv_test";
  fs::create_directories(dir);
  tessera::write_file_atomic((dir / "out.csv").string(), "a,b\n");
  std::ifstream in(dir / "out.csv");
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "a,b");
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++files;
  EXPECT_EQ(files, 1);  // no temporary left behind
  EXPECT_THROW(tessera::write_file_atomic((dir / "missing" / "out.csv").string(), "x"), InputError);
  fs::remove_all(dir);
}

TEST(Predictors, FactoryKnowsEveryNameAndRejectsOthers) {
  const nm::GpuSpec g = a100_80();
  for (const auto& name : nm::predictor_names()) {
    auto p = nm::make_predictor(name, g);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->name(), name);
    const auto t = p->predict(nm::Kernel::gemm(nm::KernelOp::Linear, 1, 4096, 4096, 4096, nm::DType::FP32));
    EXPECT_GT(t.ms(), 0.1) << name;
    EXPECT_LT(t.ms(), 100.0) << name;
  }
  EXPECT_NE(error_of([&] { (void)nm::make_predictor("habitat", g); }).find("unknown predictor 'habitat'"),
            std::string::npos);
}

TEST(TileMlp, ShippedWeightsGiveSensibleDeterministicPredictions) {
  const nm::GpuSpec g = a100_80();
  auto p = nm::make_predictor("tile-mlp", g);
  const auto small = nm::Kernel::gemm(nm::KernelOp::Bmm, 8, 256, 256, 256, nm::DType::FP32);
  const auto big = nm::Kernel::gemm(nm::KernelOp::Bmm, 64, 1024, 1024, 1024, nm::DType::FP32);
  EXPECT_LT(p->predict(small), p->predict(big));
  EXPECT_EQ(p->predict(big), p->predict(big));                                  // cached
  EXPECT_EQ(p->predict(big), nm::make_predictor("tile-mlp", g)->predict(big));  // deterministic
  // A 64x1024^3 FP32 bmm is 137 GFLOP: at most 19.5 TFLOP/s, so >= 7 ms.
  EXPECT_GT(p->predict(big).ms(), 7.0);
  EXPECT_LT(p->predict(big).ms(), 14.0);
  // Elementwise: 64 Mi floats add = 768 MiB of traffic; >= 0.41 ms at 1935 GB/s.
  const auto add = nm::Kernel::vector(nm::KernelOp::Add, 65536, 1024, nm::DType::FP32);
  EXPECT_GT(p->predict(add).ms(), 0.41);
  EXPECT_LT(p->predict(add).ms(), 0.7);
  // Copies (no learned class) take their memory-bound time, but no less
  // than the GPU's per-kernel floor, as their GPU time: 4 MiB moves in
  // 8 MiB / 1935 GB/s = 4.3 us, below the floor (5.7 us); the eager time
  // was the bare 4.3 us, below the GPU time. 1 GiB is memory-bound.
  const auto copy = nm::Kernel::vector(nm::KernelOp::Copy, 1, 1 << 20, nm::DType::FP32);
  EXPECT_LT(nm::memory_bound_time(copy, g), p->predict_device(copy));
  EXPECT_EQ(p->predict(copy), p->predict_device(copy));
  const auto big_copy = nm::Kernel::vector(nm::KernelOp::Copy, 256, 1 << 20, nm::DType::FP32);
  EXPECT_EQ(p->predict(big_copy), nm::memory_bound_time(big_copy, g));
  EXPECT_THROW((void)p->predict(nm::Kernel::gemm(nm::KernelOp::Bmm, 1, 0, 2, 2, nm::DType::FP32)), InputError);
}

// ---------------------------------------------------------------- 16-bit

// 16-bit GEMMs run through the tensor-core model (fit to measured H100
// kernels, tensor_core_test.cpp); 16-bit vector ops, never measured, are
// predicted from their FP32 twin (same shape, same GPU), whose achieved
// fraction of its roofline is assumed to carry over to the 16-bit roofline
// (2-byte elements). See docs/node_model.md, Limitations.

namespace {
nm::Kernel with_dtype(nm::Kernel k, nm::DType d) {
  k.dtype = d;
  return k;
}
/// Achieved fraction of the dense 16-bit tensor-core peak.
double tensor_fraction(const nm::KernelPredictor& p, const nm::Kernel& k) {
  return k.flops().count() / p.predict(k).seconds() / p.gpu().tensor_peak.per_second();
}
}  // namespace

TEST(TileMlp16Bit, LargeGemmsReachAPlausibleFractionOfTensorPeak) {
  // Public figures bound what a large BF16 GEMM achieves: cuBLAS reaches
  // about 250-290 of A100's 312 dense TFLOP/s and about 600-800 of H100 SXM's
  // 989 (NVIDIA's published GEMM benchmarks; H100 runs below peak clocks
  // under tensor-core load), and whole-model training that is dominated by
  // such GEMMs reaches 40-55% MFU (Megatron-LM: 52% for GPT-3 175B on A100,
  // Narayanan et al. SC'21; MLPerf GPT-3 on H100 ~40-50%). So a large GEMM
  // must land well above 40% of the tensor peak and below 90% on H100 (95% on
  // A100). Before the FP32-twin transfer the tile-mlp said 9% (H100). These
  // GEMMs now run through the tensor-core model (fit to H100 kernels that
  // reach at most 81% of the peak).
  for (const char* gpu : {"H100-SXM", "A100-80GB"}) {
    const nm::GpuSpec& g = nm::gpu_preset(gpu);
    const double hi = std::string(gpu) == "H100-SXM" ? 0.90 : 0.95;
    auto p = nm::make_predictor("tile-mlp", g);
    for (const auto& k : {nm::Kernel::gemm(nm::KernelOp::Linear, 1, 8192, 8192, 8192, nm::DType::BF16),
                          nm::Kernel::gemm(nm::KernelOp::Linear, 1, 8192, 5120, 1280, nm::DType::BF16),
                          nm::Kernel::gemm(nm::KernelOp::Linear, 1, 4096, 7168, 8192, nm::DType::FP16),
                          nm::Kernel::gemm(nm::KernelOp::Bmm, 64, 2048, 2048, 2048, nm::DType::BF16)}) {
      const double f = tensor_fraction(*p, k);
      EXPECT_GT(f, 0.40) << gpu << " " << k.m << "x" << k.n << "x" << k.k;
      EXPECT_LT(f, hi) << gpu << " " << k.m << "x" << k.n << "x" << k.k;
      // Tensor cores: far faster than the FP32 twin. (Not bounded by the
      // peak ratio: the FP32 and tensor-core models are fit separately, and
      // SIMT SGEMM reaches a lower fraction of its peak than tensor cores.)
      const double speedup = p->predict(with_dtype(k, nm::DType::FP32)).seconds() / p->predict(k).seconds();
      EXPECT_GT(speedup, 5.0) << gpu;
      EXPECT_LT(speedup, 1.25 * g.tensor_peak.per_second() / g.fp32_peak.per_second()) << gpu;
    }
  }
  // Same BF16 GEMM: H100 at least twice as fast as A100 (3.2x the peak).
  const auto k = nm::Kernel::gemm(nm::KernelOp::Linear, 1, 8192, 8192, 8192, nm::DType::BF16);
  EXPECT_GT(nm::make_predictor("tile-mlp", nm::gpu_preset("A100-80GB"))->predict(k).seconds() /
                nm::make_predictor("tile-mlp", nm::gpu_preset("H100-SXM"))->predict(k).seconds(),
            2.0);
}

TEST(TileMlp16Bit, VectorOpsMoveHalfTheBytes) {
  // Memory-bound vector ops: a 16-bit op moves half the bytes of its FP32
  // twin, so (well above the launch floor) it takes half the time.
  for (const char* gpu : {"H100-SXM", "A100-80GB"}) {
    const nm::GpuSpec& g = nm::gpu_preset(gpu);
    for (const auto& name : nm::predictor_names()) {
      auto p = nm::make_predictor(name, g);
      for (const auto& k : {nm::Kernel::vector(nm::KernelOp::Add, 65536, 1024, nm::DType::BF16),
                            nm::Kernel::vector(nm::KernelOp::Gelu, 16384, 5120, nm::DType::BF16),
                            nm::Kernel::vector(nm::KernelOp::Softmax, 163840, 1024, nm::DType::FP16),
                            nm::Kernel::vector(nm::KernelOp::LayerNorm, 65536, 4096, nm::DType::BF16)}) {
        const double ratio = p->predict(with_dtype(k, nm::DType::FP32)).seconds() / p->predict(k).seconds();
        if (name == "linreg") {
          // linreg keeps its fitted launch intercept (not halved): 1.4-2x.
          EXPECT_GT(ratio, 1.4) << gpu << " " << name << " " << nm::to_string(k.op);
          EXPECT_LT(ratio, 2.05) << gpu << " " << name << " " << nm::to_string(k.op);
        } else {
          EXPECT_NEAR(ratio, 2.0, 0.1) << gpu << " " << name << " " << nm::to_string(k.op);
        }
      }
    }
  }
}

TEST(TileMlp16Bit, BaselinesScaleByTheRooflineRatio) {
  const nm::GpuSpec& g = nm::gpu_preset("H100-SXM");
  const auto k = nm::Kernel::gemm(nm::KernelOp::Linear, 1, 8192, 8192, 8192, nm::DType::BF16);
  const double roof = nm::roofline_time(with_dtype(k, nm::DType::FP32), g).seconds() / nm::roofline_time(k, g).seconds();
  auto mlp = nm::make_predictor("mlp", g);
  EXPECT_NEAR(mlp->predict(with_dtype(k, nm::DType::FP32)).seconds() / mlp->predict(k).seconds(), roof, 1e-6 * roof);
  auto linreg = nm::make_predictor("linreg", g);  // the launch intercept is not scaled
  const double r = linreg->predict(with_dtype(k, nm::DType::FP32)).seconds() / linreg->predict(k).seconds();
  EXPECT_GT(r, 0.5 * roof);
  EXPECT_LE(r, roof * (1 + 1e-9));
}

TEST(TileMlp16Bit, Fp32PredictionsUnchanged) {
  // FP32 predictions of the committed weights, recorded before 16-bit
  // kernels got their own path: FP32 must not move. (Retraining the weights
  // changes these numbers; re-record them then. The tile-mlp softmax values
  // are those of the softmax net retrained with the wide-row re-read traffic
  // and the thread-loop feature; the linear values those of weights v6
  // (N/K read as reduction/output, split-K, wave panel reuse); the bmm and
  // gelu values those of weights v7 (weight decay and the launch-floor
  // blend, selected by leave-one-GPU-out).)
  const std::map<std::string, std::map<std::string, std::array<double, 5>>> expected{
      {"A100-80GB",
       {{"tile-mlp", {6.323851631, 1.282005469, 0.204427143, 0.840055026, 0.098092889}},
        {"linreg", {7.856158541, 1.776017521, 0.195127601, 1.069738671, 0.108350699}},
        {"mlp", {6.486571782, 1.489105948, 0.209378572, 0.132875986, 0.12556689}}}},
      {"H100-SXM",
       {{"tile-mlp", {2.052407524, 0.637236506, 0.135331051, 0.465902152, 0.064492505}},
        {"linreg", {2.395594894, 0.706626525, 0.133512044, 0.600141385, 0.088759923}},
        {"mlp", {6.420871147, 1.513799973, 0.211442857, 0.138748108, 0.128434037}}}},
  };
  const std::array<nm::Kernel, 5> kernels{
      nm::Kernel::gemm(nm::KernelOp::Linear, 1, 8192, 5120, 1280, nm::DType::FP32),
      nm::Kernel::gemm(nm::KernelOp::Bmm, 160, 1024, 1024, 64, nm::DType::FP32),
      nm::Kernel::vector(nm::KernelOp::Gelu, 8192, 5120, nm::DType::FP32),
      nm::Kernel::vector(nm::KernelOp::Softmax, 163840, 1024, nm::DType::FP32),
      nm::Kernel::vector(nm::KernelOp::LayerNorm, 8192, 1280, nm::DType::FP32),
  };
  for (const auto& [gpu, by_predictor] : expected) {
    for (const auto& [name, ms] : by_predictor) {
      auto p = nm::make_predictor(name, nm::gpu_preset(gpu));
      for (std::size_t i = 0; i < kernels.size(); ++i) {
        EXPECT_NEAR(p->predict(kernels[i]).ms(), ms[i], 1e-8 * ms[i]) << gpu << " " << name << " kernel " << i;
      }
    }
  }
}

TEST(TileMlp, WeightsRoundTripAndRejectWrongVersion) {
  const std::string text(nm::embedded_weights("tile_mlp"));
  ASSERT_FALSE(text.empty());
  const auto m = nm::TileMlpModel::parse(text, "w");
  EXPECT_EQ(m.serialize(), nm::TileMlpModel::parse(m.serialize(), "w2").serialize());
  std::string bad = text;
  bad.replace(bad.find(" 7 tile-mlp"), 11, " 6 tile-mlp");  // before the launch-floor blend
  EXPECT_NE(error_of([&] { (void)nm::TileMlpModel::parse(bad, "w.txt"); }).find("w.txt: weights version 6"),
            std::string::npos);
  std::string no_blend = text;
  const auto at = no_blend.find("floor_blend");
  ASSERT_NE(at, std::string::npos);
  no_blend.replace(at, 11, "floor_blends");
  EXPECT_NE(error_of([&] { (void)nm::TileMlpModel::parse(no_blend, "w.txt"); }).find("w.txt: malformed weights (floor_blend)"),
            std::string::npos);
}

// A retrained folder whose bmm class had no training rows: its bmm kernels
// are timed by the embedded network, as a folder without a file keeps the
// embedded file (helper 112: at their memory bound, 84% fast); the classes
// it has are its own.
TEST(TileMlp, ARetrainedFoldersUntrainedClassKeepsTheEmbeddedNetwork) {
  const std::string text(nm::embedded_weights("tile_mlp"));
  ASSERT_FALSE(text.empty());
  nm::TileMlpModel partial = nm::TileMlpModel::parse(text, "w");
  partial.nets[static_cast<int>(nm::KernelClass::Bmm)] = nm::Mlp{};
  const auto dir =
      std::filesystem::temp_directory_path() / ("tessera_untrained_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tile_mlp.txt") << partial.serialize();
  const nm::GpuSpec& g = nm::gpu_preset("A100-80GB");
  const auto retrained = nm::make_predictor("tile-mlp", g, dir.string());
  const auto embedded = nm::make_predictor("tile-mlp", g);
  const nm::Kernel bmm = nm::Kernel::gemm(nm::KernelOp::Bmm, 64, 2048, 2048, 128, nm::DType::FP32);
  EXPECT_EQ(retrained->predict(bmm), embedded->predict(bmm));
  EXPECT_EQ(retrained->predict_device(bmm), embedded->predict_device(bmm));
  // Without the embedded network to fall back on: the memory bound, far faster.
  const nm::TileMlpPredictor bare(g, std::make_shared<const nm::TileMlpModel>(partial));
  EXPECT_LT(bare.predict(bmm).seconds(), 0.5 * embedded->predict(bmm).seconds());
  // A class the folder has is its own network's (here the same weights).
  const nm::Kernel ln = nm::Kernel::vector(nm::KernelOp::LayerNorm, 8192, 4096, nm::DType::FP32);
  EXPECT_EQ(retrained->predict(ln), bare.predict(ln));
  std::filesystem::remove_all(dir);
}

TEST(TileMlp, LaunchFloorBlendIsASmoothMaximum) {
  // p = 0: the hard maximum.
  EXPECT_DOUBLE_EQ(nm::launch_floor_blend(0.03, 0.01, 0.0), 0.03);
  EXPECT_DOUBLE_EQ(nm::launch_floor_blend(0.03, 0.05, 0.0), 0.05);
  // p = 2: sqrt(floor^2 + kernel^2), which a kernel as long as the floor
  // shows (1.3-1.55 floors measured on the training GPUs).
  EXPECT_NEAR(nm::launch_floor_blend(0.03, 0.03, 2.0), 0.03 * std::sqrt(2.0), 1e-12);
  EXPECT_NEAR(nm::launch_floor_blend(0.03, 0.04, 2.0), 0.05, 1e-12);
  EXPECT_NEAR(nm::launch_floor_blend(0.03, 1e-6, 2.0), 0.03, 1e-9);  // tiny kernels: the floor
  EXPECT_NEAR(nm::launch_floor_blend(0.03, 3.0, 2.0), 3.0, 1e-3);    // long kernels: the kernel
  double last = 0;
  for (double k = 0.001; k < 1.0; k *= 1.5) {
    const double t = nm::launch_floor_blend(0.03, k, 2.0);
    EXPECT_GT(t, last);
    EXPECT_GE(t, std::max(0.03, k));
    last = t;
  }
  EXPECT_DOUBLE_EQ(nm::launch_floor_blend(0.0, 0.02, 2.0), 0.02);  // no floor
}

TEST(ModelGraph, SequenceNoLongerThanTheLearnedPositions) {
  // GPT-2, OPT and BERT learn one embedding per position: a longer sequence
  // is not a model they can run. Switch (relative positions) has no limit.
  const auto gpt2 = nm::model_shape_from_config(
      nm::parse_json(
          R"({"model_type":"gpt2","n_embd":64,"n_head":4,"n_layer":2,"vocab_size":97,"n_positions":128})",
          "g.json"),
      "g.json");
  EXPECT_EQ(gpt2.max_seq, 128);
  EXPECT_NO_THROW((void)nm::build_model_graph(gpt2, 1, 128, false));
  EXPECT_EQ(
      error_of([&] { (void)nm::build_model_graph(gpt2, 1, 129, false); }),
      "sequence length 129 is longer than the model's 128 learned positions (n_positions in its config)");
  const auto sw = nm::model_shape_from_config(
      nm::parse_json(
          R"({"model_type":"switch_transformers","d_model":64,"num_heads":4,"num_layers":2,"d_ff":128,)"
          R"("vocab_size":97,"max_position_embeddings":128})",
          "s.json"),
      "s.json");
  EXPECT_EQ(sw.max_seq, 0);
}

// The config's activation, OPT's word_embed_proj_dim and do_layer_norm_before
// shape the graph; an activation it does not build is refused.
TEST(ModelGraph, ConfigFieldsShapeTheGraph) {
  auto shape = [](const std::string& json) {
    return nm::model_shape_from_config(nm::parse_json(json, "c.json"), "c.json");
  };
  auto names = [](const std::vector<nm::GraphOp>& g) {
    std::set<std::string> out;
    for (const auto& op : g) out.insert(op.name);
    return out;
  };
  const std::string gpt2 = R"({"model_type":"gpt2","n_embd":64,"n_head":4,"n_layer":2,"vocab_size":97)";
  // gelu_new (the default) is 8 elementwise kernels; relu one.
  const auto tanh_gelu = names(nm::build_model_graph(shape(gpt2 + "}"), 1, 16, false));
  EXPECT_EQ(tanh_gelu.count("h.gelu.tanh"), 1U);
  const auto relu = nm::build_model_graph(shape(gpt2 + R"(,"activation_function":"relu"})"), 1, 16, false);
  EXPECT_EQ(names(relu).count("h.gelu.tanh"), 0U);
  EXPECT_EQ(names(relu).count("h.act"), 1U);
  EXPECT_EQ(error_of([&] { (void)shape(gpt2 + R"(,"activation_function":"swish"})"); }),
            "c.json: activation_function 'swish' is not one the graph builds (gelu_new, gelu, "
            "gelu_pytorch_tanh, relu)");
  // Hugging Face's null is the default (GPT-2's n_inner: 4 x n_embd), and
  // GPT-Neo's own key names are read (both were refused).
  EXPECT_EQ(shape(gpt2 + R"(,"n_inner":null})").ffn, 256);
  const auto neo = shape(
      R"({"model_type":"gpt_neo","hidden_size":64,"num_heads":4,"num_layers":3,"intermediate_size":null,)"
      R"("vocab_size":97})");
  EXPECT_EQ(neo.heads, 4);
  EXPECT_EQ(neo.layers, 3);
  EXPECT_EQ(neo.ffn, 256);
  EXPECT_EQ(error_of([&] {
              (void)shape(R"({"model_type":"gpt2","n_embd":64,"n_head":null,"n_layer":2,"vocab_size":97})");
            }),
            "c.json: key 'n_head' must be a whole number from 1 to 16777216");
  // OPT-350m's shape: 2048-wide embeddings and LM head projected to 512; post-norm, no final layer norm.
  const std::string opt =
      R"({"model_type":"opt","hidden_size":512,"num_attention_heads":8,"num_hidden_layers":2,)"
      R"("ffn_dim":2048,"vocab_size":97)";
  const auto plain = names(nm::build_model_graph(shape(opt + "}"), 1, 16, false));
  EXPECT_EQ(plain.count("project_in"), 0U);
  EXPECT_EQ(plain.count("final_layer_norm"), 1U);
  const auto proj = nm::build_model_graph(
      shape(opt + R"(,"word_embed_proj_dim":2048,"do_layer_norm_before":false})"), 1, 16, false);
  EXPECT_EQ(names(proj).count("project_in"), 1U);
  EXPECT_EQ(names(proj).count("project_out"), 1U);
  EXPECT_EQ(names(proj).count("final_layer_norm"), 0U);
  for (const auto& op : proj) {
    // The LM head: 16 tokens x 2048 -> 97 (Kernel::gemm's m, n, k: rows, out, in).
    if (op.name == "lm_head") {
      EXPECT_EQ(op.kernel.k, 2048) << "the LM head reduces over word_embed_proj_dim";
      EXPECT_EQ(op.kernel.n, 97);
    }
  }
}

TEST(ModelGraph, BuildsGpt2Graph) {
  const auto cfg = nm::parse_json(
      R"({"model_type":"gpt2","n_embd":1280,"n_head":20,"n_layer":36,"vocab_size":50257})", "gpt2.json");
  const auto shape = nm::model_shape_from_config(cfg, "gpt2.json");
  const auto inf = nm::build_model_graph(shape, 4, 1024, false);
  const auto train = nm::build_model_graph(shape, 4, 1024, true);
  EXPECT_GT(train.size(), inf.size());
  auto roof = nm::make_predictor("roofline", a100_80());
  const auto ti = nm::predict_graph_times(inf, *roof);
  const auto tt = nm::predict_graph_times(train, *roof);
  EXPECT_EQ(ti.bw_ms, 0.0);
  EXPECT_GT(tt.bw_ms, 1.5 * tt.fw_ms);
  EXPECT_NEAR(ti.fw_ms, tt.fw_ms, 0.05 * ti.fw_ms);  // only dropout differs
  // GPT-2 masks its scores with torch.where, whose backward is a kernel over
  // the 4 x 20 x 1024 x 1024 scores (`where` in NeuSight's measured graphs);
  // a BERT's additive mask has none.
  int mask_backward = 0;
  for (const auto& op : train) {
    if (op.name.find("h.mask") == std::string::npos || op.phase != nm::Phase::Backward) continue;
    ++mask_backward;
    EXPECT_EQ(op.kernel.b * op.kernel.h, std::int64_t{4} * 20 * 1024 * 1024) << op.name;
  }
  EXPECT_EQ(mask_backward, 1);
  const auto bert = nm::build_model_graph(
      nm::model_shape_from_config(
          nm::parse_json(
              R"({"model_type":"bert","hidden_size":64,"num_attention_heads":4,"num_hidden_layers":2,)"
              R"("intermediate_size":256,"vocab_size":97})",
              "b.json"),
          "b.json"),
      2, 16, true);
  for (const auto& op : bert) {
    EXPECT_FALSE(op.name.find(".mask") != std::string::npos && op.phase == nm::Phase::Backward) << op.name;
  }
  EXPECT_NE(error_of([] { (void)nm::model_shape_from_config(nm::parse_json(R"({"model_type":"gpt2"})", "c.json"),
                                                            "c.json"); })
                .find("c.json: missing key 'n_embd'"),
            std::string::npos);
}

TEST(FxGraph, EvalDropoutIsFreeAndTrainingOpsGetTheBuildersBackwardRules) {
  const fs::path dir = fs::temp_directory_path() / "tessera_fx_graph_test";
  fs::create_directories(dir);
  const std::string header = "op,target,meta,input_shapes,output_shape,latency,fw_latency,bw_latency,acc_latency,Name\n";
  const std::string drop = "call_module,drop,\"{'nn_module_stack': [('transformer.h.0.drop', <class 'torch.nn.modules.dropout.Dropout'>)]}\","
                           "\"[[4, 1024, 1280]]\",\"(4, 1024, 1280)\",";
  const std::string addmm = "call_function,<built-in method addmm>,\"{'nn_module_stack': [('transformer.h.0', <class 'Block'>)]}\","
                            "\"[[3840], [4096, 1280], [1280, 3840]]\",\"(4096, 3840)\",";
  const std::string softmax = "call_function,<function softmax>,{},\"[[4, 20, 1024, 1024]]\",\"(4, 20, 1024, 1024)\",";
  std::ofstream(dir / "inf.csv") << header << drop << "0.02,0.02,0,0,drop\n"
                                 << addmm << "2.0,2.0,0,0,addmm\n";
  std::ofstream(dir / "train.csv") << header << drop << "0.3,0.1,0.2,0,drop\n"
                                   << addmm << "6.0,2.0,4.0,0.1,addmm\n"
                                   << softmax << "1.6,0.45,1.15,0,softmax\n";
  const nm::FxGraph inf = nm::read_fx_graph((dir / "inf.csv").string());
  ASSERT_FALSE(inf.train);
  ASSERT_EQ(inf.ops.size(), 2U);
  EXPECT_TRUE(inf.ops[0].kernels.empty());  // eval mode: dropout is the identity
  EXPECT_TRUE(inf.ops[0].in_layer);
  ASSERT_EQ(inf.ops[1].kernels.size(), 1U);
  EXPECT_TRUE(inf.ops[1].bw_kernels.empty());
  // [4096, 1280] @ [1280, 3840]: 4096 rows, output width 3840, reduction 1280.
  const nm::Kernel& fwd = inf.ops[1].kernels[0];
  EXPECT_EQ(fwd.op, nm::KernelOp::Linear);
  EXPECT_EQ(fwd.m, 4096);
  EXPECT_EQ(fwd.n, 3840);
  EXPECT_EQ(fwd.k, 1280);

  const nm::FxGraph tr = nm::read_fx_graph((dir / "train.csv").string());
  ASSERT_TRUE(tr.train);
  ASSERT_EQ(tr.ops.size(), 3U);
  ASSERT_EQ(tr.ops[0].kernels.size(), 1U);  // training: dropout multiplies by its mask
  EXPECT_EQ(tr.ops[0].bw_kernels.size(), 1U);
  // Linear backward: the data gradient [4096, 3840] @ [3840, 1280], the weight
  // gradient [1280, 4096] @ [4096, 3840], and the accumulation into .grad.
  const auto& bw = tr.ops[1].bw_kernels;
  ASSERT_EQ(bw.size(), 3U);
  EXPECT_EQ(bw[0].m, 4096);
  EXPECT_EQ(bw[0].n, 1280);
  EXPECT_EQ(bw[0].k, 3840);
  EXPECT_EQ(bw[1].m, 1280);
  EXPECT_EQ(bw[1].n, 3840);
  EXPECT_EQ(bw[1].k, 4096);
  EXPECT_EQ(bw[2].op, nm::KernelOp::Add);
  EXPECT_DOUBLE_EQ(tr.ops[1].measured_bw_ms, 4.1);  // backward plus accumulation
  // Softmax backward reads y and dy: a row pass plus a binary elementwise pass.
  ASSERT_EQ(tr.ops[2].bw_kernels.size(), 2U);
  EXPECT_EQ(tr.ops[2].bw_kernels[0].op, nm::KernelOp::Softmax);
  EXPECT_EQ(tr.ops[2].bw_kernels[1].op, nm::KernelOp::Mul);
  // Measured totals: layer-0 ops count `layers` times, the softmax (no layer) once.
  const nm::GraphTimes m = nm::measured_fx_times(tr, 10);
  EXPECT_NEAR(m.fw_ms, 10 * (0.1 + 2.0) + 0.45, 1e-9);
  EXPECT_NEAR(m.bw_ms, 10 * (0.2 + 4.1) + 1.15, 1e-9);
  fs::remove_all(dir);
}

// An fx Embedding row gets the analytic graph's embedding rule, its table
// sized by the model's config: forward a gather; backward the table gradient
// zeroed (a pass over the table's bytes), the tokens scatter-added and the
// table accumulated. Without a config only the scatter-add, said by the flag.
TEST(FxGraph, EmbeddingRowsGetTheAnalyticRuleWithTheirConfigsTable) {
  const nm::ModelShape gpt2 = nm::model_shape_from_config(
      nm::parse_json(R"({"model_type":"gpt2","n_embd":64,"n_head":4,"n_layer":2,"vocab_size":1000,)"
                     R"("n_positions":512})",
                     "g.json"),
      "g.json");
  EXPECT_EQ(nm::embedding_table_rows(gpt2, "transformer.wte", 128), 1000);
  EXPECT_EQ(nm::embedding_table_rows(gpt2, "transformer.wpe", 128),
            512);  // the whole table, not the sequence
  EXPECT_EQ(nm::embedding_table_rows(gpt2, "transformer.h.0.attn", 128), 0);
  const std::string csv =
      "op,target,meta,input_shapes,output_shape,latency,fw_latency,bw_latency,acc_latency,Name\n"
      "call_module,transformer.wte,\"{'nn_module_stack': [('transformer.wte', <class "
      "'torch.nn.modules.sparse.Embedding'>)]}\",\"[[2, 128]]\",\"(2, 128, 64)\",0.3,0.1,0.1,0.1,wte\n";
  const nm::FxGraph with = nm::fx_graph_from_csv(nm::parse_csv(csv, "g.csv"), "g.csv", &gpt2);
  ASSERT_EQ(with.ops.size(), 1U);
  const nm::FxOp& op = with.ops[0];
  EXPECT_FALSE(op.table_unknown);
  ASSERT_EQ(op.kernels.size(), 1U);
  EXPECT_EQ(op.kernels[0].op, nm::KernelOp::Copy);
  // The same kernels as predict-model's wte, in order.
  const auto analytic = nm::build_model_graph(gpt2, 2, 128, true);
  std::vector<nm::Kernel> wte_bw;
  for (const auto& k : analytic) {
    if (k.name.rfind("wte.bw", 0) == 0) wte_bw.push_back(k.kernel);
  }
  ASSERT_EQ(op.bw_kernels.size(), wte_bw.size());
  ASSERT_GE(wte_bw.size(), 3U);
  for (std::size_t i = 0; i < wte_bw.size(); ++i) {
    EXPECT_EQ(op.bw_kernels[i].op, wte_bw[i].op) << i;
    EXPECT_EQ(op.bw_kernels[i].b, wte_bw[i].b) << i;
    EXPECT_EQ(op.bw_kernels[i].h, wte_bw[i].h) << i;
  }
  // The zeroing writes the 1000 x 64 FP32 table (256000 B, in whole rows of
  // a flat kernel: 262144); the scatter-add is 256 x 64.
  EXPECT_EQ(op.bw_kernels[0].bytes().count(), 262144);
  EXPECT_EQ(op.bw_kernels[1].op, nm::KernelOp::Add);
  EXPECT_EQ(op.bw_kernels[1].b * op.bw_kernels[1].h, 256 * 64);

  const nm::FxGraph without = nm::fx_graph_from_csv(nm::parse_csv(csv, "g.csv"), "g.csv");
  EXPECT_TRUE(without.ops[0].table_unknown);
  ASSERT_EQ(without.ops[0].bw_kernels.size(), 1U);  // the scatter-add alone
  EXPECT_EQ(without.ops[0].bw_kernels[0].op, nm::KernelOp::Add);
}

TEST(ModelGraph, ErrorTableSummarisesEachGpuAndMode) {
  std::vector<nm::ModelErrorRow> rows(3);
  rows[0] = {"GPU A", "m-512-1", "inf", 100, 110, 50, 0};
  rows[1] = {"GPU A", "m-512-2", "inf", 200, 180, 100, 190};
  rows[2] = {"GPU B", "m-512-1", "train", 100, 95, 50, 0};
  EXPECT_NEAR(rows[1].ops_error(), -100.0 / 19.0, 1e-9);
  const std::string s = nm::format_model_errors(rows, "tile-mlp");
  EXPECT_NE(s.find("GPU A                    inf  : mean error tile-mlp 10.0%, max 10.0%, roofline 50.0% over 2 runs"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("GPU B                    train: mean error tile-mlp 5.0%, max 5.0%"), std::string::npos) << s;
  EXPECT_NE(s.find("190.0    -5.3%"), std::string::npos) << s;
  EXPECT_NE(s.find("max error: 10.0%"), std::string::npos) << s;
}

// ---------------------------------------------------------------- real data

namespace {
/// Test-set MAPE per class for one GPU on a fixed subset (every n-th row).
std::map<std::string, nm::KernelErrorRow> kernel_mape(const std::string& root, const std::string& gpu) {
  const nm::DeviceCatalog catalog(root + "/device_configs");
  const nm::MeasurementSet test = nm::read_measurement_dir(root + "/kernels/test", catalog);
  const auto rows = nm::validate_kernels(
      test, [](const nm::GpuSpec& g) { return nm::make_predictor("tile-mlp", g); }, 400, gpu);
  std::map<std::string, nm::KernelErrorRow> out;
  for (const auto& r : rows) out[r.kernel_class] = r;
  return out;
}
}  // namespace

TEST(TileMlpAccuracy, UnseenA100_80GB) {
  REQUIRE_DATA(root);
  const auto m = kernel_mape(root, "NVIDIA A100 80GB PCIe");
  ASSERT_EQ(m.size(), 5U);
  for (const auto& [cls, r] : m) {
    std::cout << "A100-80GB " << cls << ": tile-mlp MAPE " << r.mape << "% (roofline " << r.roofline_mape
              << "%) on " << r.rows << " rows\n";
    EXPECT_LT(r.mape, r.roofline_mape) << cls;  // the learned model beats the roofline
  }
  // Issue targets: GEMMs <= 10%, vector ops <= 8%. Thresholds are what the
  // committed weights reach (see docs/node_model.md): every class meets
  // its target.
  EXPECT_LE(m.at("linear").mape, kLinearLimit);
  EXPECT_LE(m.at("elementwise").mape, kElementwiseLimit);
  EXPECT_LE(m.at("bmm").mape, kBmmLimit);
  EXPECT_LE(m.at("softmax").mape, kSoftmaxLimit);
  EXPECT_LE(m.at("ln").mape, kLnLimit);
}

TEST(TileMlpAccuracy, EndToEndModels) {
  REQUIRE_DATA(root);
  const nm::DeviceCatalog catalog(root + "/device_configs");
  const auto rows = nm::validate_models(
      root + "/labels", root + "/model_configs", catalog,
      [](const nm::GpuSpec& g) { return nm::make_predictor("tile-mlp", g); }, "NVIDIA A100 80GB PCIe");
  ASSERT_GE(rows.size(), 8U);
  double sum = 0, roof = 0;
  for (const auto& r : rows) {
    sum += r.error();
    roof += r.roofline_error();
  }
  const double mean = sum / static_cast<double>(rows.size());
  std::cout << "A100-80GB end-to-end training: mean error " << mean << "% (roofline "
            << roof / static_cast<double>(rows.size()) << "%)\n";
  EXPECT_LT(mean, roof / static_cast<double>(rows.size()));
  EXPECT_LE(mean, kE2eLimit);  // issue target 5%: not met yet, see docs/node_model.md
  // Against the runs' own per-op measurements (their graph CSVs), where the
  // forward labels of several runs disagree with their ops by 20-50%.
  int with_ops = 0;
  for (const auto& r : rows) {
    if (r.ops_ms <= 0) continue;
    ++with_ops;
    std::cout << "  " << r.model << ": " << r.ops_error() << "% against its own op sum\n";
    EXPECT_LE(std::abs(r.ops_error()), kOpsLimit) << r.model;
  }
  EXPECT_GE(with_ops, 8);
}

// validate models says which label files it left out and why, and a label
// it cannot run names its file (a batch of 0 in the name, an e2e_latency of 0).
TEST(ModelGraph, ValidateModelsSaysWhatItLeftOutAndNamesBadLabels) {
  const fs::path dir = fs::temp_directory_path() / "tessera_validate_models_test";
  fs::remove_all(dir);
  for (const char* d : {"labels/GPU_X", "labels/GPU_Y", "model_configs", "device_configs"})
    fs::create_directories(dir / d);
  std::ofstream(dir / "device_configs" / "GPU_X.json")
      << R"({"Device":"GPU X","Dev_Mem":16,"Mem_Bw":900,"Num_Sm":80,"Core_Per_SM":64,"Freq":1380,)"
      << R"("SingleFLOPs":14000,"L2Cache":6})";
  std::ofstream(dir / "model_configs" / "m.json")
      << R"({"model_type":"gpt2","n_embd":64,"n_head":4,"n_layer":2,"vocab_size":1000,"n_positions":128})";
  const std::string ok = R"({"num_layer": 2, "e2e_latency": 1.5})";
  std::ofstream(dir / "labels" / "GPU_X" / "m-train-64-1.json") << ok;
  std::ofstream(dir / "labels" / "GPU_X" / "m-inf-64-1-fusion.json")
      << ok;  // fused runs: left out, documented
  std::ofstream(dir / "labels" / "GPU_X" / "m-train-64.json") << ok;
  std::ofstream(dir / "labels" / "GPU_X" / "other-train-64-1.json") << ok;
  std::ofstream(dir / "labels" / "GPU_X" / "m-inf-64-2.json") << R"({"num_layer": 2})";
  std::ofstream(dir / "labels" / "GPU_Y" / "m-train-64-1.json") << ok;
  const nm::DeviceCatalog catalog((dir / "device_configs").string());
  const auto make = [](const nm::GpuSpec& g) { return nm::make_predictor("roofline", g); };
  const std::string labels = (dir / "labels").string();
  const std::string configs = (dir / "model_configs").string();
  std::vector<std::string> skipped;
  const auto rows = nm::validate_models(labels, configs, catalog, make, "", &skipped);
  ASSERT_EQ(rows.size(), 1U);
  EXPECT_EQ(rows[0].model, "m-64-1");
  const std::string x = (dir / "labels" / "GPU_X").string() + "/";
  ASSERT_EQ(skipped.size(), 4U);
  EXPECT_EQ(skipped[0], x + "m-inf-64-2.json: no numeric \"e2e_latency\"");
  EXPECT_EQ(skipped[1], x + "m-train-64.json: not named <model>-<inf|train>-<seq>-<batch>.json");
  EXPECT_EQ(skipped[2], x + "other-train-64-1.json: no model config " + configs + "/other.json");
  EXPECT_EQ(skipped[3], (dir / "labels" / "GPU_Y").string() + "/m-train-64-1.json: no device config " +
                            (dir / "device_configs").string() + "/GPU_Y.json");

  fs::remove_all(dir / "labels" / "GPU_Y");
  std::ofstream(dir / "labels" / "GPU_X" / "m-train-64-0.json") << ok;
  EXPECT_EQ(error_of([&] { (void)nm::validate_models(labels, configs, catalog, make); }),
            x + "m-train-64-0.json: its name's batch must be a whole number from 1 to 999999999 (got 0)");
  fs::remove(dir / "labels" / "GPU_X" / "m-train-64-0.json");
  std::ofstream(dir / "labels" / "GPU_X" / "m-train-256-1.json") << ok;
  EXPECT_EQ(error_of([&] { (void)nm::validate_models(labels, configs, catalog, make); }),
            x + "m-train-256-1.json: sequence length 256 is longer than the model's 128 learned positions "
                "(n_positions in its config)");
  fs::remove(dir / "labels" / "GPU_X" / "m-train-256-1.json");
  std::ofstream(dir / "labels" / "GPU_X" / "m-train-64-1.json") << R"({"num_layer": 2, "e2e_latency": 0})";
  EXPECT_EQ(error_of([&] { (void)nm::validate_models(labels, configs, catalog, make); }),
            x + "m-train-64-1.json: \"e2e_latency\" must be a positive time in milliseconds (got 0)");
  fs::remove_all(dir);
}

TEST(SplitK, GridZOfALinearIsItsSplitAndCutsTheReduction) {
  // A linear's grid z is cuBLAS's split-K factor; a bmm's is its batch.
  const fs::path dir = fs::temp_directory_path() / "tessera_splitk_test";
  fs::create_directories(dir / "dev");
  std::ofstream(dir / "dev" / "g.json")
      << R"({"Device":"G","Dev_Mem":16,"Mem_Bw":900,"Num_Sm":80,"Core_Per_SM":64,"Freq":1380,)"
      << R"("SingleFLOPs":14000,"L2Cache":6})";
  std::ofstream(dir / "k.csv")
      << "OPName,Latency,Device,Kernel Name,Grid x,Grid y,Grid z,B,M,N,K\n"
      << "linear,0.5,G,volta_sgemm_128x64_tn,2,2,4,1,128,8192,256\n"
      << "linear,0.5,G,volta_sgemm_128x64_tn,2,2,4,1,128,8000,250\n"
      << "linear,0.2,G,volta_sgemm_128x64_tn,8,16,1,1,1024,512,1024\n"
      << "bmm,0.3,G,volta_sgemm_128x64_nn,1,2,12,12,128,64,128\n";
  const nm::DeviceCatalog catalog((dir / "dev").string());
  nm::MeasurementSet set;
  nm::read_measurements((dir / "k.csv").string(), catalog, set);
  ASSERT_EQ(set.rows.size(), 4U);
  EXPECT_EQ(set.rows[0].split, 4);
  EXPECT_EQ(set.rows[2].split, 1);
  EXPECT_EQ(set.rows[3].split, 1);  // bmm: z is the batch
  const auto table = nm::TileTable::learn(set);
  const nm::GpuSpec& gpu = set.gpus.at(0);
  const nm::Kernel small_out = nm::Kernel::gemm(nm::KernelOp::Linear, 1, 128, 256, 8192, nm::DType::FP32);
  const nm::Tile t = table.lookup(small_out, gpu);
  EXPECT_EQ(t.a, 128);
  EXPECT_EQ(t.b, 64);
  EXPECT_EQ(t.split, 4);
  EXPECT_EQ(table.lookup(nm::Kernel::gemm(nm::KernelOp::Linear, 1, 1024, 1024, 512, nm::DType::FP32), gpu).split, 1);
  // 2 x 2 output tiles x 4 slices of the 8192-deep reduction.
  nm::Tile unsplit = t;
  unsplit.split = 1;
  const auto g1 = nm::tile_geometry(small_out, gpu, unsplit);
  const auto g4 = nm::tile_geometry(small_out, gpu, t);
  EXPECT_DOUBLE_EQ(g1.tiles, 4.0);
  EXPECT_DOUBLE_EQ(g4.tiles, 16.0);
  EXPECT_DOUBLE_EQ(g4.tile_flops, g1.tile_flops / 4);
  EXPECT_DOUBLE_EQ(g4.tiles * g4.tile_flops, small_out.flops().count());
  fs::remove_all(dir);
}

// ------------------------------------------------- kernels measured on one GPU

namespace {

/// Every kernel takes 1 ms: the errors of validate_measured_kernels can be
/// checked by hand.
class OneMsPredictor final : public nm::KernelPredictor {
 public:
  OneMsPredictor() : gpu_(nm::gpu_preset("H200")) {}
  [[nodiscard]] tessera::Time predict(const nm::Kernel&) const override {
    return tessera::Time::from_us(1000);
  }
  [[nodiscard]] std::string_view name() const override { return "one-ms"; }
  [[nodiscard]] const nm::GpuSpec& gpu() const override { return gpu_; }

 private:
  nm::GpuSpec gpu_;
};

std::string write_measured(const std::string& name, const std::string& text) {
  const fs::path dir = fs::temp_directory_path() / "tessera_measured_test";
  fs::create_directories(dir);
  const fs::path f = dir / name;
  std::ofstream(f) << text;
  return f.string();
}

}  // namespace

TEST(MeasuredKernels, ErrorsPerGroupByHand) {
  const std::string data = write_measured("data.csv",
                                          "OPName,Latency,dtype,source,B,M,N,K\n"
                                          "linear,0.5,bf16,a,1,256,256,256\n"     // +100%
                                          "linear,2.0,bf16,a,1,512,256,256\n"     // -50%
                                          "linear,1.25,fp16,a,1,256,256,256\n");  // -20%
  const std::string repeat = write_measured("repeat.csv",
                                            "OPName,Latency,dtype,source,B,M,N,K\n"
                                            "linear,0.55,bf16,a,1,256,256,256\n"    // 10% off row 1
                                            "linear,9.0,bf16,a,1,1024,256,256\n");  // shares nothing
  const nm::PredictorFactory make = [](const nm::GpuSpec&) { return std::make_unique<OneMsPredictor>(); };
  const auto rows =
      nm::validate_measured_kernels(data, nm::gpu_preset("H200"), make, nm::DType::FP32, repeat);
  ASSERT_EQ(rows.size(), 3U);
  EXPECT_EQ(rows[0].group, "linear/bf16/a");
  EXPECT_EQ(rows[0].rows, 2);
  EXPECT_NEAR(rows[0].mape, 75.0, 1e-9);
  EXPECT_NEAR(rows[0].signed_median, 25.0, 1e-9);  // mean of +100% and -50%
  EXPECT_NEAR(rows[0].p90, 100.0, 1e-9);
  EXPECT_NEAR(rows[0].noise_mape, 10.0, 1e-9);
  EXPECT_EQ(rows[1].group, "linear/fp16/a");
  EXPECT_NEAR(rows[1].mape, 20.0, 1e-9);
  EXPECT_NEAR(rows[1].signed_median, -20.0, 1e-9);
  EXPECT_DOUBLE_EQ(rows[1].noise_mape, -1.0);  // the repeat has no fp16 row
  EXPECT_EQ(rows[2].group, "all");
  EXPECT_EQ(rows[2].rows, 3);
  EXPECT_NEAR(rows[2].mape, (100.0 + 50.0 + 20.0) / 3.0, 1e-9);
  EXPECT_NEAR(rows[2].signed_median, -20.0, 1e-9);
  EXPECT_NEAR(rows[2].p90, 100.0, 1e-9);
  EXPECT_GT(rows[2].roofline_mape, 0.0);
  const std::string table = nm::format_measured_errors(rows, "one-ms");
  EXPECT_NE(table.find("linear/bf16/a"), std::string::npos);
  EXPECT_NE(table.find("75.0%"), std::string::npos);
}

TEST(MeasuredKernels, BadInputNamesFileRowAndColumn) {
  const nm::PredictorFactory make = [](const nm::GpuSpec&) { return std::make_unique<OneMsPredictor>(); };
  auto message = [&](const std::string& text) {
    const std::string f = write_measured("bad.csv", text);
    try {
      (void)nm::validate_measured_kernels(f, nm::gpu_preset("H200"), make, nm::DType::BF16);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("OPName,Latency,B,M,N,K\nlinear,0,1,2,2,2\n").find("row 1, column 'Latency'"),
            std::string::npos);
  EXPECT_NE(message("OPName,Latency,B,M,N,K\nlinear,abc,1,2,2,2\n").find("column 'Latency'"),
            std::string::npos);
  EXPECT_NE(message("OPName,B,M,N,K\nlinear,1,2,2,2\n").find("missing column 'Latency'"), std::string::npos);
  EXPECT_NE(message("OPName,Latency,dtype,B,M,N,K\nlinear,1,int4,1,2,2,2\n").find("row 1, column 'dtype'"),
            std::string::npos);
  EXPECT_NE(message("OPName,Latency,B,M,N,K\nlinear,1,1,0,2,2\n").find("column 'M'"), std::string::npos);
  EXPECT_NE(message("OPName,Latency,B,M,N,K\n").find("no measurements"), std::string::npos);
}

// The files of a weights folder a predictor reads (what a sweep's identity
// covers): its own weights and, for tile-mlp, tensor_core.txt where there is
// one; nothing for roofline or an empty folder name; a tensor-core-only
// folder's tile-mlp reads tensor_core.txt alone. Other files are not named.
TEST(WeightsFiles, NamesTheFilesThePredictorReads) {
  const fs::path dir = fs::temp_directory_path() / "tessera_weights_files_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "tensor_core.txt") << "x";
  std::ofstream(dir / "notes.log") << "x";
  const std::string d = dir.string();
  using tessera::node_model::weights_files;
  EXPECT_EQ(weights_files("tile-mlp", d), std::vector<std::string>{(dir / "tensor_core.txt").string()});
  std::ofstream(dir / "tile_mlp.txt") << "x";
  EXPECT_EQ(weights_files("tile-mlp", d),
            (std::vector<std::string>{(dir / "tile_mlp.txt").string(), (dir / "tensor_core.txt").string()}));
  EXPECT_EQ(weights_files("linreg", d), std::vector<std::string>{(dir / "linreg.txt").string()});
  EXPECT_TRUE(weights_files("roofline", d).empty());
  EXPECT_TRUE(weights_files("tile-mlp", "").empty());
  EXPECT_THROW((void)weights_files("tile_mlp", d), InputError);
  fs::remove_all(dir);
}
