// Flow backend + executor benchmark: a plain timing main (not Google
// Benchmark: one run of a large scenario takes seconds to minutes).
//
//   flow_bench [SCENARIO.yaml] [--set KEY=VALUE ...] [--reference] [--line-rate] [--no-free] [--dump FILE]
//              [--json]
//
// Loads the scenario (default: tests/bench/scenarios/gpt3_175b_1024.yaml),
// plans it with the scenario's predictor, builds its topology, then times one
// iteration on the flow backend and one on a zero-cost network with the
// scenario's execution options (study::execution_options: its NCCL
// calibration, stragglers, reduction kernels; what `tessera run` does), and
// prints wall times, sizes and a fingerprint of every observed event (compute,
// collective and transfer times), which must not change when the engine is
// optimised. --reference runs the original engine instead (event loop,
// global-recompute flow backend and executor, tests/engine/reference_engine.hpp),
// which predates the NCCL calibration, the host model and coarse collective
// expansion: it compares with the current engine under --line-rate (no
// calibration) with the host constants at 0 and collectives.granularity=steps
// (makespans within a few ps; docs/benchmarks.md). --dump writes every observed event (kind, id, start
// ps, end ps) to FILE; --json also prints the report `tessera run --json`
// would print (not with --line-rate or --reference, whose runs it is not).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <exception>
#include <string>
#include <vector>

#include "../engine/reference_engine.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/engine/executor.hpp"
#include "tessera/engine/flow_network.hpp"
#include "tessera/engine/zero_cost_network.hpp"
#include "tessera/error.hpp"
#include "tessera/node_model/predictors.hpp"
#include "tessera/parallelism/plan.hpp"
#include "tessera/study/pipeline.hpp"
#include "tessera/study/scenario.hpp"

using namespace tessera;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// CPU time of this process: the honest figure on a shared machine.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// FNV-1a over every observed event: equal fingerprints mean the same
/// schedule to the picosecond.
class Fingerprint final : public engine::ExecutionObserver {
 public:
  void on_compute(int rank, const parallelism::Task& /*task*/, Time start, Time end) override {
    mix(1, rank, start, end);
  }
  void on_collective(const parallelism::Task& task, std::int32_t group, const std::vector<int>& /*ranks*/,
                     Time start, Time end) override {
    // (group << 32) | id: the planner's ids before programs were shared, so
    // fingerprints stay comparable.
    mix(2, (static_cast<std::int64_t>(group) << 32) | task.collective_id, start, end);
  }
  void on_transfer(const collectives::Transfer& t, Time start, Time end) override {
    mix(3, static_cast<std::int64_t>(t.src) * 65536 + t.dst, start, end);
  }
  [[nodiscard]] std::uint64_t value() const { return h_; }
  [[nodiscard]] std::uint64_t events() const { return n_; }
  std::FILE* dump = nullptr;

 private:
  void mix(std::int64_t kind, std::int64_t id, Time a, Time b) {
    if (dump != nullptr) fmt::print(dump, "{} {} {} {}\n", kind, id, a.ps(), b.ps());
    for (std::int64_t v : {kind, id, a.ps(), b.ps()}) {
      auto u = static_cast<std::uint64_t>(v);
      for (int i = 0; i < 8; ++i) {
        h_ ^= (u >> (8 * i)) & 0xffU;
        h_ *= 1099511628211ULL;
      }
    }
    ++n_;
  }
  std::uint64_t h_ = 14695981039346656037ULL;
  std::uint64_t n_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string path = std::string(TESSERA_BENCH_DIR) + "/scenarios/gpt3_175b_1024.yaml";
    std::vector<cli::Override> overrides;
    bool reference = false;
    bool line_rate = false;
    bool free_run = true;
    std::string dump_path;
    bool json = false;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--set" && i + 1 < argc) {
        overrides.push_back(cli::parse_override(argv[++i]));
      } else if (a == "--reference") {
        reference = true;
      } else if (a == "--line-rate") {
        line_rate = true;
      } else if (a == "--dump" && i + 1 < argc) {
        dump_path = argv[++i];
      } else if (a == "--json") {
        json = true;
      } else if (a == "--no-free") {
        free_run = false;
      } else {
        path = a;
      }
    }
    auto t0 = Clock::now();
    const cli::Scenario s = cli::load_scenario(path, overrides);
    const auto predictor = study::make_scenario_predictor(s);
    auto planned = parallelism::plan_training_detailed(s.model, s.workload, s.plan, *predictor);
    std::size_t tasks = 0;
    for (int r = 0; r < planned.graph.num_ranks(); ++r) tasks += planned.graph.tasks(r).size();
    const double t_plan = seconds_since(t0);
    t0 = Clock::now();
    const topology::Topology topo = cli::build_topology(s);
    const double t_topo = seconds_since(t0);

    if (json && (line_rate || reference))
      throw InputError("--json prints run's report: not with --line-rate or --reference");
    if (s.mixed_gpus)
      throw InputError("flow_bench plans one GPU type: a scenario with mixed_gpus is not supported");
    const engine::ExecutionOptions options =
        line_rate || reference ? engine::ExecutionOptions{s.collectives} : study::execution_options(s);
    Fingerprint fp;
    if (!dump_path.empty()) fp.dump = std::fopen(dump_path.c_str(), "w");
    t0 = Clock::now();
    double c0 = cpu_seconds();
    engine::DiscreteEventLoop loop;
    test_support::ReferenceEventLoop ref_loop;
    engine::ExecutionResult result;
    std::uint64_t flows = 0;
    std::vector<double> link_bytes;
    std::uint64_t recomputations = 0;
    std::uint64_t visited = 0;
    if (reference) {
      test_support::ReferenceFlowNetwork net(topo, ref_loop);
      result = test_support::reference_execute(planned.graph, ref_loop, net, &fp, options);
      flows = net.flows_completed();
      link_bytes = net.link_bytes();
    } else {
      engine::FlowNetwork net(topo, loop);
      result = engine::execute(planned.graph, loop, net, &fp, options);
      flows = net.flows_completed();
      link_bytes = net.link_bytes();
      recomputations = net.recomputations();
      visited = net.flows_visited();
    }
    const double t_flow = seconds_since(t0);
    const double c_flow = cpu_seconds() - c0;

    double t_free = 0.0;
    double c_free = 0.0;
    study::FreeCommunication free_comm;  // what run's split reads (study::free_communication)
    if (free_run) {
      t0 = Clock::now();
      c0 = cpu_seconds();
      if (reference) {
        test_support::ReferenceEventLoop free_loop;
        engine::ZeroCostNetwork free_net(free_loop);
        free_comm = study::free_communication(
            test_support::reference_execute(planned.graph, free_loop, free_net, nullptr, options));
      } else {
        engine::DiscreteEventLoop free_loop;
        engine::ZeroCostNetwork free_net(free_loop);
        free_comm =
            study::free_communication(engine::execute(planned.graph, free_loop, free_net, nullptr, options));
      }
      t_free = seconds_since(t0);
      c_free = cpu_seconds() - c0;
    }

    fmt::print("scenario     {} ({} GPUs: dp={} tp={} pp={}, {} micro-batches, {}, {})\n", s.name, s.gpus(),
               s.plan.dp, s.plan.tp, s.plan.pp, planned.summary.micro_batches,
               reference ? "reference backend" : "flow backend",
               line_rate || reference ? "line rate" : "scenario's calibration");
    fmt::print("graph        {} tasks, topology {} links\n", tasks, topo.links().size());
    fmt::print("plan         {:.3f} s\n", t_plan);
    fmt::print("topology     {:.3f} s\n", t_topo);
    fmt::print("flow run     {:.3f} s wall, {:.3f} s CPU  ({} events, {} transfers, {} flows)\n", t_flow, c_flow,
               reference ? ref_loop.events_processed() : loop.events_processed(), result.transfers, flows);
    if (!reference) {
      fmt::print("recompute    {} rate recomputations, {:.1f} flows visited per recomputation\n", recomputations,
                 recomputations == 0 ? 0.0 : static_cast<double>(visited) / static_cast<double>(recomputations));
    }
    if (free_run) {
      fmt::print("zero-cost    {:.3f} s wall, {:.3f} s CPU  (makespan {} ps, busiest compute {} ps)\n",
                 t_free, c_free, free_comm.makespan.ps(), free_comm.compute.ps());
    }
    fmt::print("makespan     {} ps\n", result.makespan.ps());
    fmt::print("fingerprint  {:016x} over {} observed events\n", fp.value(), fp.events());
    if (fp.dump != nullptr) std::fclose(fp.dump);
    if (json && free_run) {
      // What `tessera run --json` would print for this engine (flow backend).
      cli::Simulation sim{};
      sim.topology = topo;
      sim.plan = std::move(planned.summary);
      sim.result = result;
      sim.free_comm = free_comm;
      sim.link_bytes = link_bytes;
      fmt::print("{}", cli::format_json(cli::make_report(s, sim)));
    }
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "flow_bench: {}\n", e.what());
    return 1;
  }
}
