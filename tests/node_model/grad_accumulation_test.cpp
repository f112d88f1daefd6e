// Megatron's gradient-accumulation fusion on a GPU it was never fit on: the
// weight-gradient GEMM that accumulates into the FP32 main gradient (apex's
// wgrad_gemm_accum_fp32, cublasGemmEx with FP32 C and beta = 1) against the
// same GEMM writing a 16-bit gradient, measured on an H200
// (tests/data/h200/wgrad_accumulate.csv and its repeat, two runs of
// scripts/device/measure_16bit.py SECTIONS=wgradacc).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "tessera/node_model/csv.hpp"
#include "tessera/node_model/gpu_spec.hpp"
#include "tessera/node_model/predictors.hpp"
#include "tessera/node_model/workload.hpp"

namespace nm = tessera::node_model;
namespace fs = std::filesystem;

namespace {

std::string data_file(const char* name) {
  const char* src = std::getenv("TESSERA_SOURCE_DIR");
  const fs::path p = fs::path(src != nullptr ? src : ".") / "tests" / "data" / "h200" / name;
  return p.string();
}

struct Sums {
  double measured_extra = 0, model_extra = 0, measured_16 = 0, model_16 = 0;
  int rows = 0;
};

/// Per token count: sums of the measured and modelled extra time of the
/// fused accumulation over the 16-bit GEMM (the file read once).
std::map<std::int64_t, Sums> sums(const std::string& path) {
  const nm::CsvTable t = nm::read_csv(path);
  const auto p = nm::make_predictor("tile-mlp", nm::gpu_preset("H200"));
  const std::size_t c_dtype = t.require_column("dtype"), c_tokens = t.require_column("tokens"),
                    c_in = t.require_column("in"), c_out = t.require_column("out"),
                    c_16 = t.require_column("gemmex_16bit_ms"),
                    c_acc = t.require_column("gemmex_fp32_accumulate_ms");
  std::map<std::int64_t, Sums> out;
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    const std::int64_t tokens = t.positive_int(r, c_tokens);
    const nm::OpRules rules(nm::Framework::Megatron, nm::parse_dtype(t.rows[r][c_dtype]));
    const nm::OpKernels op =
        rules.linear("w", tokens, t.positive_int(r, c_in), t.positive_int(r, c_out), false);
    const auto& k = op.weight_grad.kernels;
    EXPECT_EQ(k.size(), 2u);  // the GEMM and its main-gradient traffic
    Sums& s = out[tokens];
    s.measured_extra += t.number(r, c_acc) - t.number(r, c_16);
    s.measured_16 += t.number(r, c_16);
    s.model_16 += p->predict_device(k[0]).ms();
    // The accumulation is a part of the GEMM's launch: no floor of its own.
    for (std::size_t i = 1; i < k.size(); ++i) {
      EXPECT_TRUE(op.weight_grad.part[i]);
      s.model_extra += p->predict_part(k[i]).ms();
    }
    ++s.rows;
  }
  return out;
}

}  // namespace

// The model charges the fused accumulation as the 16-bit GEMM plus a pass of
// 4 bytes per weight element (OpRules::linear); the GPU reads and writes the
// FP32 main gradient in the GEMM's epilogue, partly under its compute. What
// the accumulation adds to a weight-gradient GEMM, measured: 19.4% / 20.0%
// (two runs) at 2,048 tokens, 3.4% / 3.1% at 8,192; modelled: 17.1% and 4.4%,
// so the fused GEMM comes out 1.9-2.4% fast at 2,048 tokens and 1.0-1.3% slow
// at 8,192 (the model's 16-bit GEMM times are its own; the ratio compares
// like with like). A pass of the full 6 extra bytes per element (read and
// write FP32 instead of writing 16 bits) gives +5.3% at 2,048 tokens; no pass
// -16%: both fail here.
TEST(GradAccumulationFusion, ExtraTimeOfTheFp32MainGradientOnAnH200) {
  for (const char* f : {"wgrad_accumulate.csv", "wgrad_accumulate_repeat.csv"}) {
    const auto by_tokens = sums(data_file(f));
    ASSERT_EQ(by_tokens.size(), 2u) << f;  // 2,048 and 8,192 tokens
    for (const auto& [tokens, s] : by_tokens) {
      ASSERT_EQ(s.rows, 48) << f;  // bf16 and fp16; hidden 4096-12288; tp 1, 8; QKV, projection, fc1, fc2
      const double measured = 1 + s.measured_extra / s.measured_16;
      const double model = 1 + s.model_extra / s.model_16;
      EXPECT_NEAR(model / measured - 1, 0.0, 0.03)
          << f << ", " << tokens << " tokens: fused over 16-bit GEMM, measured " << measured << ", model "
          << model;
    }
  }
}
