// Planner speed: plan_training for the 3072-GPU GPT-3 175B plan of the
// issue (t = 8, p = 64, d = 6, 512 micro-batches of 1, 1F1B, sequence
// parallelism) must take under 2 s. Each iteration plans with a fresh
// predictor (cold shape cache, the default tile-MLP node model), then
// validates the graph (timed separately). Interleaved 1F1B cannot run
// p = 64 on 96 layers (it needs 2 layers per stage and chunk), so the
// interleaved variant is the other 3072-GPU shape: t = 8, p = 32 x 3 chunks,
// d = 12, 256 micro-batches.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>

#include "tessera/node_model/gpu_spec.hpp"
#include "tessera/node_model/predictors.hpp"
#include "tessera/parallelism/plan.hpp"

namespace nm = tessera::node_model;
namespace par = tessera::parallelism;

namespace {

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

void plan(benchmark::State& state, int dp, int pp, int virtual_stages, par::Schedule schedule) {
  const auto& model = par::model_preset("gpt3-175b");
  const par::Workload work{1, 2048, nm::DType::BF16};
  par::ParallelPlan p;
  p.tp = 8;
  p.pp = pp;
  p.dp = dp;
  p.virtual_stages = virtual_stages;
  p.schedule = schedule;
  p.global_batch = 3072;
  p.sequence_parallel = true;
  const auto& gpu = nm::gpu_preset("H100-SXM");
  double validate_s = 0;
  std::size_t stored = 0, largest = 0, programs = 0, per_rank = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto predictor = nm::make_predictor(nm::kDefaultPredictor, gpu);
    state.ResumeTiming();
    const par::TaskGraph g = par::plan_training(model, work, p, *predictor);
    state.PauseTiming();
    const auto t0 = std::chrono::steady_clock::now();
    g.validate();
    validate_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    programs = g.programs.size();
    stored = largest = per_rank = 0;
    for (const auto& prog : g.programs) {
      stored += prog->tasks.size();
      largest = std::max(largest, prog->tasks.size());
    }
    for (int r = 0; r < g.num_ranks(); ++r) per_rank += g.tasks(r).size();
    state.ResumeTiming();  // the graph is freed inside the timed region, as a caller's would be
  }
  state.counters["ranks"] = p.world_size();
  state.counters["micro_batches"] = static_cast<double>(p.micro_batches(work.micro_batch));
  state.counters["programs"] = static_cast<double>(programs);
  state.counters["tasks_stored"] = static_cast<double>(stored);
  state.counters["tasks_largest_program"] = static_cast<double>(largest);
  state.counters["tasks_all_ranks"] = static_cast<double>(per_rank);
  state.counters["validate_s"] = validate_s / static_cast<double>(state.iterations());
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}

void BM_Plan3072(benchmark::State& state) { plan(state, 6, 64, 1, par::Schedule::OneFOneB); }
void BM_Plan3072Interleaved(benchmark::State& state) { plan(state, 12, 32, 3, par::Schedule::Interleaved1F1B); }

}  // namespace

BENCHMARK(BM_Plan3072)->Name("plan_3072")->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_Plan3072Interleaved)->Name("plan_3072_interleaved")->Unit(benchmark::kMillisecond)->Iterations(3);

BENCHMARK_MAIN();
