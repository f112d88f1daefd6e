// Kernel prediction speed: the planner calls KernelPredictor::predict in its
// inner loops, so the default predictor must sustain >= 1M predictions/s on
// one core when shapes repeat (the shape cache), as they do in a planner sweep.
#include <benchmark/benchmark.h>

#include <vector>

#include "tessera/node_model/gpu_spec.hpp"
#include "tessera/node_model/predictors.hpp"

namespace nm = tessera::node_model;

namespace {

std::vector<nm::Kernel> shapes() {
  std::vector<nm::Kernel> ks;
  for (std::int64_t b : {1, 4, 16}) {
    for (std::int64_t s : {512, 1024, 2048}) {
      ks.push_back(nm::Kernel::gemm(nm::KernelOp::Linear, b, s, 4096, 1024, nm::DType::FP32));
      ks.push_back(nm::Kernel::gemm(nm::KernelOp::Bmm, b * 16, s, s, 64, nm::DType::FP32));
      ks.push_back(nm::Kernel::vector(nm::KernelOp::Softmax, b * 16 * s, s, nm::DType::FP32));
      ks.push_back(nm::Kernel::vector(nm::KernelOp::LayerNorm, b * s, 1024, nm::DType::FP32));
      ks.push_back(nm::Kernel::vector(nm::KernelOp::Gelu, b * s, 4096, nm::DType::FP32));
    }
  }
  return ks;
}

void run(benchmark::State& state, const char* name, bool warm) {
  const auto ks = shapes();
  std::size_t i = 0;
  auto p = nm::make_predictor(name, nm::gpu_preset("A100-80GB"));
  if (warm) {
    for (const auto& k : ks) benchmark::DoNotOptimize(p->predict(k));
  }
  for (auto _ : state) {
    if (!warm && i % ks.size() == 0) p = nm::make_predictor(name, nm::gpu_preset("A100-80GB"));
    benchmark::DoNotOptimize(p->predict(ks[i++ % ks.size()]));
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_TileMlpCached(benchmark::State& s) { run(s, "tile-mlp", true); }
void BM_TileMlpUncached(benchmark::State& s) { run(s, "tile-mlp", false); }
void BM_Roofline(benchmark::State& s) { run(s, "roofline", true); }
void BM_DirectMlpCached(benchmark::State& s) { run(s, "mlp", true); }

}  // namespace

BENCHMARK(BM_TileMlpCached);
BENCHMARK(BM_TileMlpUncached);
BENCHMARK(BM_Roofline);
BENCHMARK(BM_DirectMlpCached);
BENCHMARK_MAIN();
