// Tensor-core GEMM model: dtypes and peaks, the XLA table reader, the tile
// and wave geometry, the shipped weights against the measured H100 table and
// a reduced k-fold cross-validation (both skipped when ../shared/data/xla is
// absent), and plausibility on a GPU never measured in 16 bits (A100).
#include "tessera/node_model/tensor_core.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>

#include "tessera/error.hpp"
#include "tessera/node_model/dataset.hpp"
#include "tessera/node_model/predictors.hpp"
#include "tessera/node_model/roofline.hpp"
#include "tessera/node_model/tile_mlp.hpp"
#include "tessera/node_model/validation.hpp"

namespace nm = tessera::node_model;
namespace fs = std::filesystem;
using tessera::InputError;

namespace {

std::string xla_table() {
  const char* src = std::getenv("TESSERA_SOURCE_DIR");
  if (src == nullptr) return {};
  const fs::path p = fs::path(src) / ".." / "shared" / "data" / "xla" / "gemm_h100.csv";
  return fs::is_regular_file(p) ? p.lexically_normal().string() : std::string();
}

// The macro declares a variable named by its argument, which cannot be
// parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define REQUIRE_XLA(path)                                                               \
  const std::string path = xla_table();                                                 \
  if (path.empty())                                                                     \
  GTEST_SKIP() << "XLA GEMM table not found at $TESSERA_SOURCE_DIR/../shared/data/xla/" \
                  "gemm_h100.csv; tensor-core accuracy tests skipped"
// NOLINTEND(bugprone-macro-parentheses)

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "<no InputError>";
}

/// Writes `text` to a temporary CSV and returns its path.
std::string temp_csv(const std::string& name, const std::string& text) {
  const fs::path dir = fs::temp_directory_path() / "tessera_tensor_core_test";
  fs::create_directories(dir);
  const fs::path p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

const std::string kHeader = "arch,b,m,n,k,dtype,flops_per_s,latency_ms\n";

std::shared_ptr<const nm::TensorCoreModel> shipped_model() {
  static const auto kModel = std::make_shared<const nm::TensorCoreModel>(
      nm::TensorCoreModel::parse(nm::embedded_weights("tensor_core"), "<embedded tensor_core.txt>"));
  return kModel;
}

double mape(const std::vector<double>& pred, const nm::MeasurementSet& set, nm::DType d) {
  double e = 0;
  int n = 0;
  for (std::size_t i = 0; i < set.rows.size(); ++i) {
    if (set.rows[i].kernel.dtype != d) continue;
    e += std::abs(pred[i] / set.rows[i].latency_ms - 1.0);
    ++n;
  }
  return 100.0 * e / n;
}

}  // namespace

// ---------------------------------------------------------------- dtypes

TEST(DTypes, NamesBytesAndParsing) {
  const std::map<std::string, std::pair<nm::DType, int>> expected{{"fp32", {nm::DType::FP32, 4}},
                                                                  {"tf32", {nm::DType::TF32, 4}},
                                                                  {"fp16", {nm::DType::FP16, 2}},
                                                                  {"bf16", {nm::DType::BF16, 2}},
                                                                  {"fp8", {nm::DType::FP8, 1}}};
  for (const auto& [name, v] : expected) {
    EXPECT_EQ(nm::parse_dtype(name), v.first) << name;
    EXPECT_EQ(nm::to_string(v.first), name);
    EXPECT_EQ(nm::dtype_bytes(v.first), v.second) << name;
  }
  EXPECT_EQ(nm::parse_dtype("BF16"), nm::DType::BF16);
  EXPECT_EQ(nm::parse_dtype("Tf32"), nm::DType::TF32);
  EXPECT_EQ(nm::parse_dtype("FP8"), nm::DType::FP8);
  EXPECT_NE(error_of([] {
              (void)nm::parse_dtype("fp12");
            }).find("unknown dtype 'fp12' (expected fp32, tf32, fp16, bf16 or fp8)"),
            std::string::npos);
}

TEST(DTypes, MatmulPeaksAndMissingTensorCores) {
  const nm::GpuSpec& h100 = nm::gpu_preset("H100-SXM");
  EXPECT_DOUBLE_EQ(h100.matmul_peak(nm::DType::FP32).tflops(), 66.9);
  EXPECT_DOUBLE_EQ(h100.matmul_peak(nm::DType::TF32).tflops(), 494.7);
  EXPECT_DOUBLE_EQ(h100.matmul_peak(nm::DType::BF16).tflops(), 989.4);
  EXPECT_DOUBLE_EQ(h100.matmul_peak(nm::DType::FP16).tflops(), 989.4);
  EXPECT_DOUBLE_EQ(h100.matmul_peak(nm::DType::FP8).tflops(), 1978.9);
  const nm::GpuSpec& a100 = nm::gpu_preset("A100-80GB");
  EXPECT_DOUBLE_EQ(a100.matmul_peak(nm::DType::TF32).tflops(), 156.0);
  // A100 has no FP8 tensor cores: every path that times an FP8 GEMM says so.
  const std::string msg = error_of([&] { (void)a100.matmul_peak(nm::DType::FP8); });
  EXPECT_NE(msg.find("GPU 'A100-80GB' has no fp8 tensor cores"), std::string::npos) << msg;
  const auto fp8 = nm::Kernel::gemm(nm::KernelOp::Linear, 1, 4096, 4096, 4096, nm::DType::FP8);
  for (const auto& name : nm::predictor_names()) {
    EXPECT_NE(
        error_of([&] { (void)nm::make_predictor(name, a100)->predict(fp8); }).find("no fp8 tensor cores"),
        std::string::npos)
        << name;
  }
  EXPECT_GT(nm::make_predictor("tile-mlp", h100)->predict(fp8).ms(), 0.0);
  nm::GpuSpec bad = h100;
  bad.tf32_peak = tessera::FlopRate::tflops(-1);
  EXPECT_NE(error_of([&] { bad.validate(); }).find("tf32_peak must not be negative"), std::string::npos);
}

// ---------------------------------------------------------------- reader

TEST(XlaTable, ReadsColumnsIntoBatchedGemms) {
  const std::string path = temp_csv("ok.csv", kHeader +
                                                  "sm_90,2,256,512,1024,bf16xbf16->bf16,1.0e14,0.0055\n"
                                                  "sm_90,1,4096,2048,256,f32xf32->f32,3.0e14,0.0140\n"
                                                  "sm_90,4,256,256,256,f8e4m3fnxf8e5m2->bf16,2.4e13,0.0056\n"
                                                  "sm_90,1,512,512,512,f16xf16->f16,4.47e13,0.0060\n");
  EXPECT_TRUE(nm::is_xla_gemm_table(path));
  const nm::MeasurementSet set = nm::read_xla_gemm_table(path);
  ASSERT_EQ(set.rows.size(), 4U);
  ASSERT_EQ(set.gpus.size(), 1U);
  EXPECT_EQ(set.gpus[0].name, "H100-SXM");
  const nm::Kernel& k = set.rows[0].kernel;
  // C[b,m,n] = A[b,m,k] x B[b,k,n]: n is the output width, k the reduction.
  EXPECT_EQ(k.op, nm::KernelOp::Bmm);
  EXPECT_EQ(k.b, 2);
  EXPECT_EQ(k.m, 256);
  EXPECT_EQ(k.n, 512);
  EXPECT_EQ(k.k, 1024);
  EXPECT_EQ(k.dtype, nm::DType::BF16);
  EXPECT_DOUBLE_EQ(k.flops().count(), 2.0 * 2 * 256 * 512 * 1024);
  EXPECT_DOUBLE_EQ(set.rows[0].latency_ms, 0.0055);
  EXPECT_EQ(set.rows[1].kernel.dtype, nm::DType::TF32);  // f32 dots run on TF32 tensor cores
  EXPECT_EQ(set.rows[2].kernel.dtype, nm::DType::FP8);
  EXPECT_EQ(set.rows[3].kernel.dtype, nm::DType::FP16);
  EXPECT_FALSE(nm::is_xla_gemm_table(temp_csv("neusight.csv", "OPName,B,M,N,K,Latency\nbmm,1,2,3,4,0.1\n")));
  // A table missing a column is still XLA's: its reader names the column.
  const std::string short_table = temp_csv("short.csv", "arch,b,m,n\nsm_90,1,2,3\n");
  EXPECT_TRUE(nm::is_xla_gemm_table(short_table));
  const std::string missing = error_of([&] { (void)nm::read_xla_gemm_table(short_table); });
  EXPECT_NE(missing.find("short.csv: missing column 'k'"), std::string::npos) << missing;
  // Its header as the reader reads it: spaces around a name, quotes.
  EXPECT_TRUE(nm::is_xla_gemm_table(temp_csv("spaced.csv", "\"arch\" , b,m\nsm_90,1,2\n")));
}

TEST(XlaTable, BadInputNamesFileRowAndColumn) {
  const std::string good = "sm_90,1,256,256,256,bf16xbf16->bf16,6.7e12,0.005\n";
  auto error_for = [&](const std::string& name, const std::string& text) {
    const std::string path = temp_csv(name, text);
    return error_of([&] { (void)nm::read_xla_gemm_table(path); });
  };
  // Every column of the schema is required.
  for (const std::string col : {"arch", "b", "m", "n", "k", "dtype", "flops_per_s", "latency_ms"}) {
    std::string header = kHeader;
    header.replace(header.find(col + (col == "latency_ms" ? "\n" : ",")), col.size(), "x" + col);
    EXPECT_NE(error_for("missing.csv", header + good).find("missing.csv: missing column '" + col + "'"),
              std::string::npos)
        << col;
  }
  // The bad cell is on the second data row: no partial result comes back.
  EXPECT_NE(error_for("nan.csv", kHeader + good + "sm_90,1,256,x,256,bf16xbf16->bf16,1,0.005\n")
                .find("nan.csv: row 2, column 'n': 'x' is not a number"),
            std::string::npos);
  EXPECT_NE(error_for("zero.csv", kHeader + good + "sm_90,1,0,256,256,bf16xbf16->bf16,1,0.005\n")
                .find("zero.csv: row 2, column 'm': dimension must be a positive integer"),
            std::string::npos);
  EXPECT_NE(error_for("neg.csv", kHeader + good + "sm_90,-2,256,256,256,bf16xbf16->bf16,1,0.005\n")
                .find("neg.csv: row 2, column 'b': dimension must be a positive integer"),
            std::string::npos);
  EXPECT_NE(error_for("negk.csv", kHeader + good + "sm_90,1,256,256,-256,bf16xbf16->bf16,1,0.005\n")
                .find("negk.csv: row 2, column 'k'"),
            std::string::npos);
  EXPECT_NE(error_for("dtype.csv", kHeader + good + "sm_90,1,256,256,256,s8xs8->s32,1,0.005\n")
                .find("dtype.csv: row 2, column 'dtype': unknown XLA dtype 's8xs8->s32'"),
            std::string::npos);
  EXPECT_NE(error_for("arch.csv", kHeader + good + "sm_80,1,256,256,256,bf16xbf16->bf16,1,0.005\n")
                .find("arch.csv: row 2, column 'arch': unknown arch 'sm_80'"),
            std::string::npos);
  EXPECT_NE(error_for("lat.csv", kHeader + good + "sm_90,1,256,256,256,bf16xbf16->bf16,1,0\n")
                .find("lat.csv: row 2, column 'latency_ms': latency must be positive"),
            std::string::npos);
  EXPECT_NE(error_for("flops.csv", kHeader + good + "sm_90,1,256,256,256,bf16xbf16->bf16,fast,0.005\n")
                .find("flops.csv: row 2, column 'flops_per_s'"),
            std::string::npos);
  EXPECT_NE(error_for("empty.csv", kHeader).find("empty.csv: no measurements"), std::string::npos);
  // The rate and the time must agree (helper 87: a latency in microseconds,
  // a dimension typed wrong, were read), and one row per GEMM and dtype.
  EXPECT_NE(
      error_for("unit.csv", kHeader + good + "sm_90,1,256,256,256,bf16xbf16->bf16,6.7e12,5\n")
          .find(
              "unit.csv: row 2, columns 'flops_per_s' and 'latency_ms': 6.7e+12 disagrees with 2 x b x m x n "
              "x k / latency_ms = 6.71089e+09 (which is wrong: is the latency in milliseconds, and are the "
              "dimensions right?)"),
      std::string::npos);
  EXPECT_NE(error_for("dim.csv", kHeader + good + "sm_90,1,2560,256,256,bf16xbf16->bf16,6.7e12,0.005\n")
                .find("dim.csv: row 2, columns 'flops_per_s' and 'latency_ms'"),
            std::string::npos);
  EXPECT_EQ(error_for("dup.csv", kHeader + good + good),
            temp_csv("dup.csv", kHeader + good + good) +
                ": row 2: the GEMM of row 1 again (1 x 256 x 256 x 256, bf16xbf16->bf16)");
  // Two FP8 operand formats of one shape are two GEMMs.
  EXPECT_EQ(nm::read_xla_gemm_table(
                temp_csv("fp8.csv", kHeader + "sm_90,1,256,256,256,f8e4m3fnxf8e5m2->bf16,6.7e12,0.005\n"
                                              "sm_90,1,256,256,256,f8e4m3fnxf8e4m3fn->bf16,6.7e12,0.005\n"))
                .rows.size(),
            2U);
}

// ---------------------------------------------------------------- geometry

TEST(TensorCoreGeometry, TilesWavesAndDepthByHand) {
  const nm::GpuSpec& h100 = nm::gpu_preset("H100-SXM");  // 132 SMs
  const auto big = nm::Kernel::gemm(nm::KernelOp::Bmm, 1, 4096, 4096, 4096, nm::DType::BF16);
  // 128 (along N) x 256 (along M): 32 x 16 = 512 tiles, 4 waves (528 slots).
  const nm::TcGeometry g = nm::tensor_core_geometry(big, h100, {128, 256, 1});
  EXPECT_DOUBLE_EQ(g.tiles, 512);
  EXPECT_DOUBLE_EQ(g.waves, 4);
  EXPECT_DOUBLE_EQ(g.fill, 512.0 / 528.0);
  EXPECT_DOUBLE_EQ(g.depth, 4096);
  EXPECT_DOUBLE_EQ(g.ksteps, 64);  // 4096 bf16 = 64 steps of 64 elements (128 bytes)
  EXPECT_DOUBLE_EQ(g.tile_flops, 2.0 * 128 * 256 * 4096);
  // Compute-bound: one tile at the per-SM BF16 peak.
  EXPECT_NEAR(g.tile_bound_s, g.tile_flops / (989.4e12 / 132), 1e-15);
  // TF32: same tiles, twice the steps (32 elements per 128 bytes), half the peak.
  auto tf32 = big;
  tf32.dtype = nm::DType::TF32;
  const nm::TcGeometry t = nm::tensor_core_geometry(tf32, h100, {128, 256, 1});
  EXPECT_DOUBLE_EQ(t.ksteps, 128);
  EXPECT_NEAR(t.tile_bound_s, 2.0 * g.tile_bound_s, 1e-15);
  // Batched, split-K: 4 x (2 x 2) tiles of 128x128, split 4 -> 64 tiles, 1 wave, depth 1024.
  const auto skinny = nm::Kernel::gemm(nm::KernelOp::Bmm, 4, 256, 256, 4096, nm::DType::BF16);
  const nm::TcGeometry s = nm::tensor_core_geometry(skinny, h100, {128, 128, 4});
  EXPECT_DOUBLE_EQ(s.tiles, 64);
  EXPECT_DOUBLE_EQ(s.waves, 1);
  EXPECT_DOUBLE_EQ(s.depth, 1024);
  // Linear: the rows are B*M.
  const auto lin = nm::Kernel::gemm(nm::KernelOp::Linear, 8, 512, 1024, 1024, nm::DType::BF16);
  EXPECT_DOUBLE_EQ(nm::tensor_core_geometry(lin, h100, {128, 128, 1}).tiles, 8.0 * 32);
}

TEST(TensorCoreGeometry, CandidatesAreTheTilesALibraryWouldRun) {
  const nm::GpuSpec& h100 = nm::gpu_preset("H100-SXM");
  // Split-K only when the output does not fill one wave...
  const auto big = nm::Kernel::gemm(nm::KernelOp::Bmm, 1, 4096, 4096, 4096, nm::DType::BF16);
  EXPECT_FALSE(nm::tensor_core_candidate_valid(big, h100, {128, 128, 2}));
  const auto small = nm::Kernel::gemm(nm::KernelOp::Bmm, 1, 256, 256, 4096, nm::DType::BF16);
  EXPECT_TRUE(nm::tensor_core_candidate_valid(small, h100, {128, 128, 16}));  // 256 deep: 4 steps per slice
  // ... and every slice keeps >= 4 pipeline steps (512 bf16 / 4 = 128 = 2 steps: no).
  const auto shallow = nm::Kernel::gemm(nm::KernelOp::Bmm, 1, 256, 256, 512, nm::DType::BF16);
  EXPECT_TRUE(nm::tensor_core_candidate_valid(shallow, h100, {128, 128, 2}));
  EXPECT_FALSE(nm::tensor_core_candidate_valid(shallow, h100, {128, 128, 4}));
  // No tile twice as wide as the output (64 always fits): a 64-wide output.
  const auto narrow = nm::Kernel::gemm(nm::KernelOp::Bmm, 64, 1024, 64, 1024, nm::DType::BF16);
  EXPECT_FALSE(nm::tensor_core_candidate_valid(narrow, h100, {128, 128, 1}));
  EXPECT_TRUE(nm::tensor_core_candidate_valid(narrow, h100, {64, 128, 1}));
  EXPECT_EQ(nm::tensor_core_tiles().size(), 6U);
}

// The roofline candidate is the valid tile with the least waves x tile bound.
// 4096^3 BF16 on 132 SMs: a 128x256 (or 256x128) tile makes 512 tiles, 4
// waves of compute-bound tiles, the least of all; no split is valid.
TEST(TensorCoreGeometry, RooflineCandidateHasTheLeastWaveQuantizedRoofline) {
  const nm::GpuSpec& h100 = nm::gpu_preset("H100-SXM");
  const auto k = nm::Kernel::gemm(nm::KernelOp::Bmm, 1, 4096, 4096, 4096, nm::DType::BF16);
  const nm::TcCandidate best = nm::tensor_core_roofline_candidate(k, h100);
  EXPECT_EQ(best.tile.a * best.tile.b, 128 * 256);
  EXPECT_EQ(best.tile.split, 1);
  EXPECT_DOUBLE_EQ(best.g.waves, 4.0);
  EXPECT_TRUE(best.g.compute_bound);
  EXPECT_DOUBLE_EQ(best.g.roofline_s(), best.g.waves * best.g.tile_bound_s);
  for (const auto& t : nm::tensor_core_tiles()) {
    for (int s : nm::tensor_core_splits()) {
      const nm::TcTile tile{t.a, t.b, s};
      if (!nm::tensor_core_candidate_valid(k, h100, tile)) continue;
      EXPECT_LE(best.g.roofline_s(), nm::tensor_core_geometry(k, h100, tile).roofline_s());
    }
  }
}

TEST(TensorCoreModel, ChoosesTheFastestCandidate) {
  const nm::GpuSpec& h100 = nm::gpu_preset("H100-SXM");
  const auto& m = *shipped_model();
  for (const auto& k : {nm::Kernel::gemm(nm::KernelOp::Bmm, 1, 4096, 4096, 4096, nm::DType::BF16),
                        nm::Kernel::gemm(nm::KernelOp::Bmm, 4, 256, 256, 4096, nm::DType::BF16),
                        nm::Kernel::gemm(nm::KernelOp::Linear, 1, 8192, 3072, 1024, nm::DType::TF32)}) {
    const auto c = m.choose(k, h100);
    EXPECT_TRUE(nm::tensor_core_candidate_valid(k, h100, c.tile));
    // Its waves are those of its tile; no other candidate is predicted faster.
    EXPECT_DOUBLE_EQ(c.geometry.waves, std::ceil(c.geometry.tiles / 132.0));
    EXPECT_NEAR(c.kernel_ms, c.geometry.waves * c.geometry.tile_bound_s / c.utilization * 1e3, 1e-12);
    EXPECT_GT(c.utilization, 0.0);
    EXPECT_LE(c.utilization, 1.0);
    int valid = 0;
    for (const auto& t : nm::tensor_core_tiles()) {
      for (int s : nm::tensor_core_splits()) {
        const nm::TcTile tile{t.a, t.b, s};
        if (!nm::tensor_core_candidate_valid(k, h100, tile)) continue;
        ++valid;
        EXPECT_LE(c.kernel_ms, m.candidate_ms(k, h100, tile)) << tile.a << "x" << tile.b << " split " << s;
      }
    }
    EXPECT_GE(valid, 6);
    EXPECT_DOUBLE_EQ(c.kernel_ms, m.candidate_ms(k, h100, c.tile));
  }
}

// ---------------------------------------------------------------- predictor

TEST(TensorCorePredictor, FloorsAndDispatch) {
  const nm::GpuSpec& h100 = nm::gpu_preset("H100-SXM");
  auto p = nm::make_predictor("tile-mlp", h100);
  const double gpu_floor = shipped_model()->floor_ms;
  EXPECT_GT(gpu_floor, 0.003);  // the table's smallest kernels take ~5 us
  EXPECT_LT(gpu_floor, 0.007);
  const auto tiny = nm::Kernel::gemm(nm::KernelOp::Bmm, 1, 128, 128, 128, nm::DType::BF16);
  // Back to back on a stream: the GPU floor; from the host (eager): the class's launch floor.
  EXPECT_DOUBLE_EQ(p->predict_device(tiny).ms(), std::round(gpu_floor * 1e9) / 1e9);
  EXPECT_GT(p->predict(tiny).ms(), 0.02);
  // FP16 uses the BF16 fit (same peak, same element size).
  auto fp16 = tiny;
  const auto mid = nm::Kernel::gemm(nm::KernelOp::Linear, 1, 4096, 3072, 1024, nm::DType::BF16);
  auto mid16 = mid;
  mid16.dtype = nm::DType::FP16;
  EXPECT_EQ(p->predict_device(mid), p->predict_device(mid16));
  EXPECT_NEAR(p->predict_device(mid).ms(), shipped_model()->predict_ms(mid, h100), 1e-6);
  // TF32 vector ops are FP32 ops.
  const auto gelu = nm::Kernel::vector(nm::KernelOp::Gelu, 8192, 5120, nm::DType::FP32);
  auto gelu_tf32 = gelu;
  gelu_tf32.dtype = nm::DType::TF32;
  EXPECT_EQ(p->predict(gelu), p->predict(gelu_tf32));
  // Non-GEMMs on the device: the learned time without the eager floor, at least the GPU floor.
  const auto add = nm::Kernel::vector(nm::KernelOp::Add, 16, 1024, nm::DType::BF16);
  EXPECT_DOUBLE_EQ(p->predict_device(add).ms(), std::round(gpu_floor * 1e9) / 1e9);
  EXPECT_LT(p->predict_device(add), p->predict(add));
  const auto big_add = nm::Kernel::vector(nm::KernelOp::Add, 65536, 4096, nm::DType::BF16);
  // Far above both floors: the same time, up to the eager floor's smooth
  // blend (weights v7: sqrt(floor^2 + t^2) for elementwise adds floor^2 / 2t,
  // under 0.5 % for a floor of at most 0.066 ms and t = 0.56 ms).
  EXPECT_NEAR(p->predict_device(big_add).ms(), p->predict(big_add).ms(), 5e-3 * p->predict(big_add).ms());
  EXPECT_LE(p->predict_device(big_add), p->predict(big_add));
  // The default predict_device is predict.
  auto roof = nm::make_predictor("roofline", h100);
  EXPECT_EQ(roof->predict_device(mid), roof->predict(mid));
  (void)fp16;
}

TEST(TensorCorePredictor, APartOfALaunchedKernelPaysNoFloor) {
  // A fused kernel timed as several kernels (FlashAttention's GEMMs, the
  // main-gradient accumulation of a weight-gradient GEMM): its further
  // parts are the work alone, without the GPU floor (5.7 us) or the eager
  // launch floor (25-65 us) that the launch as a whole pays once.
  const nm::GpuSpec& h100 = nm::gpu_preset("H100-SXM");
  auto p = nm::make_predictor("tile-mlp", h100);
  const double gpu_floor = shipped_model()->floor_ms;
  const auto tiny = nm::Kernel::gemm(nm::KernelOp::Bmm, 1, 128, 128, 128, nm::DType::BF16);
  const double tiny_ms = shipped_model()->choose(tiny, h100).kernel_ms;
  EXPECT_LT(tiny_ms, gpu_floor);
  EXPECT_NEAR(p->predict_part(tiny).ms(), tiny_ms, 1e-9);
  const auto add = nm::Kernel::vector(nm::KernelOp::Add, 16, 1024, nm::DType::BF16);
  EXPECT_LT(p->predict_part(add).ms(), 0.5 * gpu_floor);
  // 16,384 elements: a few hundred nanoseconds of memory time at least.
  EXPECT_GT(p->predict_part(add), nm::memory_bound_time(add, h100));
  // Above the floor: the device time.
  const auto big_add = nm::Kernel::vector(nm::KernelOp::Add, 65536, 4096, nm::DType::BF16);
  EXPECT_EQ(p->predict_part(big_add), p->predict_device(big_add));
  const auto mid = nm::Kernel::gemm(nm::KernelOp::Linear, 1, 4096, 3072, 1024, nm::DType::BF16);
  EXPECT_EQ(p->predict_part(mid), p->predict_device(mid));
  // A predictor without floors: its device time.
  auto roof = nm::make_predictor("roofline", h100);
  EXPECT_EQ(roof->predict_part(tiny), roof->predict(tiny));
}

TEST(TensorCorePredictor, LargeGemmsOnA100AtAPlausibleFractionOfPeak) {
  // A100 was never measured in 16 bits: the model carries over through its
  // ratio features. Physically a large BF16 GEMM on A100 runs below the 312
  // TFLOP/s dense peak and, being compute-bound with thousands of tiles, well
  // above half of it (cuBLAS-class kernels keep the tensor cores busy once
  // there are many waves): the band is 50-95%. TF32 likewise of 156.
  const nm::GpuSpec& a100 = nm::gpu_preset("A100-80GB");
  auto p = nm::make_predictor("tile-mlp", a100);
  for (const auto& k : {nm::Kernel::gemm(nm::KernelOp::Linear, 1, 8192, 8192, 8192, nm::DType::BF16),
                        nm::Kernel::gemm(nm::KernelOp::Linear, 1, 16384, 12288, 4096, nm::DType::BF16),
                        nm::Kernel::gemm(nm::KernelOp::Bmm, 32, 2048, 2048, 2048, nm::DType::FP16),
                        nm::Kernel::gemm(nm::KernelOp::Linear, 1, 8192, 8192, 8192, nm::DType::TF32)}) {
    const double frac =
        k.flops().count() / p->predict_device(k).seconds() / a100.matmul_peak(k.dtype).per_second();
    EXPECT_GT(frac, 0.50) << nm::to_string(k.dtype) << " " << k.m << "x" << k.n << "x" << k.k;
    EXPECT_LT(frac, 0.95) << nm::to_string(k.dtype) << " " << k.m << "x" << k.n << "x" << k.k;
  }
  // The same GEMM on H100 is faster, by at most the ratio of the peaks (3.2x).
  const auto k = nm::Kernel::gemm(nm::KernelOp::Linear, 1, 8192, 8192, 8192, nm::DType::BF16);
  const double speedup =
      p->predict_device(k).seconds() /
      nm::make_predictor("tile-mlp", nm::gpu_preset("H100-SXM"))->predict_device(k).seconds();
  EXPECT_GT(speedup, 1.5);
  EXPECT_LT(speedup, 989.4 / 312.0 * 1.05);
}

TEST(TensorCoreWeights, RoundTripAndRejectWrongVersion) {
  const std::string text(nm::embedded_weights("tensor_core"));
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.rfind("tessera-node-model-weights 2 tensor-core\n", 0), 0U);
  const auto m = nm::TensorCoreModel::parse(text, "w");
  EXPECT_EQ(m.serialize(), nm::TensorCoreModel::parse(m.serialize(), "w2").serialize());
  // Version 1 (one cap for compute- and DRAM-bound tiles) is still read: its
  // cap applies to both.
  std::string v1 = text;
  v1.replace(v1.find(" 2 tensor-core"), 14, " 1 tensor-core");
  const auto cap_line = v1.find("util_cap_memory ");
  ASSERT_NE(cap_line, std::string::npos);
  v1.erase(cap_line, v1.find('\n', cap_line) + 1 - cap_line);
  const auto old = nm::TensorCoreModel::parse(v1, "v1.txt");
  EXPECT_EQ(old.util_cap, m.util_cap);
  EXPECT_EQ(old.util_cap_memory, m.util_cap);
  std::string bad = text;
  bad.replace(bad.find(" 2 tensor-core"), 14, " 7 tensor-core");
  EXPECT_NE(
      error_of([&] { (void)nm::TensorCoreModel::parse(bad, "t.txt"); }).find("t.txt: weights version 7"),
      std::string::npos);
  EXPECT_NE(error_of([] {
              (void)nm::TensorCoreModel::parse("tessera-node-model-weights 1 tensor-core\nfloor_ms x\n",
                                               "f.txt");
            }).find("f.txt: malformed weights (floor_ms)"),
            std::string::npos);
}

// ---------------------------------------------------------------- accuracy (real data)

// What the shipped weights and the reduced cross-validation measure on the
// table, rounded up slightly, so a regression fails. Target: <= 8% MAPE on
// held-out shapes; the noise floor (the older table against the newer) is
// 2.9% BF16, 10.5% TF32.
constexpr double kShippedBf16Limit = 2.4;  // measured 2.2% (training rows)
constexpr double kShippedTf32Limit = 6.7;  // measured 6.4% (training rows)
constexpr double kKFoldBf16Limit = 3.5;    // measured 3.3% held out (the shipped 1000 epochs)
constexpr double kKFoldTf32Limit =
    9.2;  // measured 8.9% held out (the shipped 1000 epochs): target 8% not met

TEST(TensorCoreAccuracy, ShippedWeightsOnTheMeasuredTable) {
  REQUIRE_XLA(path);
  const nm::MeasurementSet set = nm::read_xla_gemm_table(path);
  auto p = nm::make_predictor("tile-mlp", set.gpus[0]);
  std::vector<double> pred;
  for (const auto& r : set.rows) pred.push_back(p->predict_device(r.kernel).ms());
  const double bf16 = mape(pred, set, nm::DType::BF16);
  const double tf32 = mape(pred, set, nm::DType::TF32);
  std::cout << "shipped tensor-core weights on gemm_h100.csv: bf16 " << bf16 << "%, tf32 " << tf32 << "%\n";
  EXPECT_LT(bf16, kShippedBf16Limit);
  EXPECT_LT(tf32, kShippedTf32Limit);
}

// The floor is learnt from the table's fastest GEMMs: a table without small
// ones (or in microseconds under latency_ms) would floor every kernel,
// FP32 ones too, at milliseconds. Refused, saying why; XLA's table is at
// 0.0057 ms.
TEST(TensorCoreTraining, RefusesAFloorNoKernelLaunchHas) {
  nm::MeasurementSet set;
  const int gpu = set.add_gpu(nm::gpu_preset("H100-SXM"));
  auto add = [&](std::int64_t n, double ms) {
    nm::Measurement m;
    m.kernel = nm::Kernel::gemm(nm::KernelOp::Linear, 1, n, n, n, nm::DType::BF16);
    m.gpu = gpu;
    m.latency_ms = ms;
    set.rows.push_back(m);
  };
  add(4096, 175.0);  // one big GEMM, timed in microseconds
  nm::TensorCoreTrainOptions opt;
  opt.mlp.epochs = 2;
  try {
    (void)nm::train_tensor_core(set, opt, nullptr);
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("floor (percentile 1 of the 1 GEMM times) is 175 ms"), std::string::npos) << msg;
    EXPECT_NE(msg.find("must be milliseconds"), std::string::npos) << msg;
  }
  set.rows.clear();
  add(256, 0.006);  // small GEMMs give a launch-sized floor
  add(4096, 0.175);
  EXPECT_NEAR(nm::train_tensor_core(set, opt, nullptr).floor_ms, 0.006, 1e-12);
}

TEST(TensorCoreAccuracy, KFoldOnHeldOutShapes) {
  REQUIRE_XLA(path);
  const nm::MeasurementSet set = nm::read_xla_gemm_table(path);
  // Folds by shape: a shape's BF16 and TF32 rows share a fold.
  const std::vector<int> folds = nm::shape_folds(set, 5);
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>, int> fold_of;
  std::vector<int> sizes(5, 0);
  for (std::size_t i = 0; i < set.rows.size(); ++i) {
    const auto& k = set.rows[i].kernel;
    const auto [it, fresh] = fold_of.emplace(std::make_tuple(k.b, k.m, k.n, k.k), folds[i]);
    EXPECT_EQ(it->second, folds[i]);
    if (fresh) ++sizes[static_cast<std::size_t>(folds[i])];
  }
  for (int s : sizes) EXPECT_EQ(s, 75);  // 375 shapes dealt round-robin
  // The shipped training (1000 epochs, about 8 s): with the caps per regime,
  // 200 epochs fall short of it (3.5-3.9% BF16 over five seeds, against
  // 3.3% at 1000).
  const nm::TensorCoreTrainOptions opt;
  const std::vector<double> pred = nm::tensor_core_kfold(set, 5, opt, nullptr);
  const double bf16 = mape(pred, set, nm::DType::BF16);
  const double tf32 = mape(pred, set, nm::DType::TF32);
  std::cout << "5-fold held-out MAPE: bf16 " << bf16 << "%, tf32 " << tf32 << "%\n";
  EXPECT_LT(bf16, kKFoldBf16Limit);
  EXPECT_LT(tf32, kKFoldTf32Limit);
  // Far better than the roofline and the FP32-twin method on the same rows.
  const auto rows = nm::validate_tensor_core(set, pred,
                                             std::make_shared<const nm::TileMlpModel>(nm::TileMlpModel::parse(
                                                 nm::embedded_weights("tile_mlp"), "w")),
                                             shipped_model()->floor_ms);
  for (const auto& r : rows) {
    if (r.dtype != "bf16" && r.dtype != "tf32") continue;
    EXPECT_LT(2.0 * r.mape, r.twin_mape) << r.dtype;
    EXPECT_LT(4.0 * r.mape, r.roofline_mape) << r.dtype;
  }
}

// The utilization caps come from the table: the highest fraction of its
// fastest candidate's roofline that a compute-bound kernel reached (TF32
// 4096^3 at 403 TFLOP/s: 0.840) and that a DRAM-bound one reached (a BF16
// bmm of 4 x 256x4096 by 4096x4096, whose four 32 MiB weights bound it:
// 0.894). With one cap (the DRAM-bound one) large compute-bound GEMMs came
// out at 0.86 of the dense peak, above every compute-bound measurement
// (BF16 at most 0.826 in the table; 0.79-0.82 for 8192^3-16384^3 on our
// H200 in a burst, tests/data/h200/burst_sustained.csv).
TEST(TensorCoreAccuracy, CapsPerRegimeFromTheTable) {
  REQUIRE_XLA(path);
  const nm::MeasurementSet set = nm::read_xla_gemm_table(path);
  double cap_compute = 0.0, cap_memory = 0.0;
  for (const auto& r : set.rows) {
    if (!nm::tensor_core_trainable(r)) continue;
    const nm::TcGeometry g =
        nm::tensor_core_roofline_candidate(r.kernel, set.gpus[static_cast<std::size_t>(r.gpu)]).g;
    double& cap = g.compute_bound ? cap_compute : cap_memory;
    cap = std::max(cap, g.roofline_s() / (r.latency_ms * 1e-3));
  }
  EXPECT_NEAR(cap_compute, 0.8404, 5e-4);
  EXPECT_NEAR(cap_memory, 0.8936, 5e-4);
  const auto& m = *shipped_model();
  EXPECT_NEAR(m.util_cap, cap_compute, 1e-5);
  EXPECT_NEAR(m.util_cap_memory, cap_memory, 1e-5);
  // Large BF16 and FP16 GEMMs on the H100 stay at or below the compute-bound
  // cap of the dense peak (the old single cap gave 0.851-0.858 for these),
  // and above 0.78.
  const nm::GpuSpec h100 = nm::gpu_preset("H100-SXM");
  for (const auto& k : {nm::Kernel::gemm(nm::KernelOp::Linear, 1, 8192, 8192, 8192, nm::DType::BF16),
                        nm::Kernel::gemm(nm::KernelOp::Linear, 1, 16384, 16384, 16384, nm::DType::BF16),
                        nm::Kernel::gemm(nm::KernelOp::Linear, 1, 8192, 9600, 25600, nm::DType::BF16),
                        nm::Kernel::gemm(nm::KernelOp::Linear, 1, 16384, 12288, 12288, nm::DType::FP16)}) {
    const double frac =
        k.flops().count() / (m.predict_ms(k, h100) * 1e-3) / h100.matmul_peak(k.dtype).per_second();
    EXPECT_LE(frac, cap_compute) << k.m << "x" << k.n << "x" << k.k;
    EXPECT_GT(frac, 0.78) << k.m << "x" << k.n << "x" << k.k;
  }
}
