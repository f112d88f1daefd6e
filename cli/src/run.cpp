#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <ostream>

#include "tessera/cli/args.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/cli/interrupt.hpp"
#include "tessera/cli/progress.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/cli/trace.hpp"
#include "tessera/engine/network.hpp"
#include "tessera/files.hpp"
#include "tessera/parallelism/plan.hpp"
#include "tessera/study/jobs.hpp"
#include "tessera/study/pipeline.hpp"

namespace tessera::cli {

namespace {

/// What takes most of a stage that does not fit, and what shrinks it
/// (helper 80: the error only offered --allow-oom).
std::string out_of_memory_hint(const StageMemory& m, const Scenario& s) {
  const parallelism::ParallelPlan& plan = s.plan;
  const parallelism::Workload& work = s.workload;
  // The parts of a stage's memory; the ZeRO stage that shards each (0:
  // none does). fp8 weights (0 but under fp8 training): Transformer
  // Engine's cached FP8 weights and transposes, which no ZeRO stage shards
  // (MemoryEstimate::fp8_weights; helper 167: a stage they filled named
  // its activations as its largest part).
  enum class Part { Activations, OptimizerStates, Weights, Fp8Weights, Gradients };
  struct Share {
    Part part;
    const char* name;
    Bytes bytes;
    int zero_stage;
  };
  const Share parts[] = {{Part::Activations, "activations", m.activations, 0},
                         {Part::OptimizerStates, "optimizer states", m.optimizer_states, 1},
                         {Part::Weights, "weights", m.weights, 3},
                         {Part::Fp8Weights, "fp8 weights", m.fp8_weights, 0},
                         {Part::Gradients, "gradients", m.gradients, 2}};
  const Share* largest = std::max_element(std::begin(parts), std::end(parts),
                                          [](const Share& a, const Share& b) { return a.bytes < b.bytes; });
  std::vector<std::string> fixes;
  // GPipe keeps every micro-batch's activations until its backward: 1F1B
  // keeps at most pp of them, and more pipeline stages only add micro-
  // batches per pipeline under GPipe (helper 106: the hint left out the
  // schedule and offered more pipeline parallelism, which grew the stage).
  const bool gpipe_activations = largest->part == Part::Activations &&
                                 plan.schedule == parallelism::Schedule::GPipe &&
                                 plan.micro_batches(work.micro_batch) > 1;
  if (gpipe_activations) {
    fixes.emplace_back(
        "parallelism.schedule: 1f1b (GPipe holds every micro-batch's activations, 1F1B at most pp)");
  }
  if (largest->part == Part::Activations) {
    // Selective recomputation recomputes the attention core, which
    // FlashAttention already keeps none of (helper 83: it was advised).
    if (plan.recompute == parallelism::Recompute::None && !work.flash_attention) {
      fixes.emplace_back("parallelism.recompute: selective or full");
    } else if (plan.recompute != parallelism::Recompute::Full) {
      fixes.emplace_back("parallelism.recompute: full");
    }
    if (work.micro_batch > 1) fixes.emplace_back("a smaller training.micro_batch");
    if (plan.tp > 1 && !plan.sequence_parallel) fixes.emplace_back("parallelism.sequence_parallel: true");
  } else if (plan.dp > 1) {
    // A mixture of experts: twice the expert parallelism holds half the
    // experts per GPU (their weights, gradients and optimizer states), where
    // the plan with it runs (helper 99: it was never suggested).
    if (s.model.is_moe()) {
      parallelism::ParallelPlan wider = plan;
      wider.ep = plan.ep * 2;
      try {
        wider.validate(s.model, work, s.gpus());
        fixes.push_back(fmt::format("parallelism.ep: {} (half the experts per GPU)", wider.ep));
      } catch (const Error&) {
        // no wider expert parallelism fits this plan
      }
    }
    // The ZeRO stage that shards the part (helper 82: gradients were sent
    // to stage 1, which does not shard them).
    // Named only where the plan with it is one the tool runs (helper 84:
    // DeepSpeed refuses ZeRO-2 with pipelines; overlap-grad-reduce is
    // ZeRO-1's).
    const int stage = largest->zero_stage;
    if (stage > 0 && plan.zero_stage < stage) {
      parallelism::ParallelPlan sharded = plan;
      sharded.zero_stage = stage;
      bool valid = true;
      try {
        sharded.validate(s.model, work, s.gpus());
      } catch (const Error&) {
        valid = false;
      }
      if (valid) fixes.push_back(fmt::format("parallelism.zero_stage: {}", stage));
    }
  }
  fixes.emplace_back(gpipe_activations ? "more tensor parallelism" : "more tensor or pipeline parallelism");
  const std::string last = fixes.back();
  fixes.pop_back();
  return fmt::format("its largest part, {}, {:.1f} GiB: try {}{}{}", largest->name, largest->bytes.in_gib(),
                     fmt::join(fixes, ", "), fixes.empty() ? "" : " or ", last);
}

/// Per-link totals of a flow-backend run, as CSV: one row per directed link
/// that carried traffic. First the columns every backend starts with
/// (engine::kLinkCsvSharedColumns, as ns3_modules::link_csv): link, src,
/// dst, tier, bandwidth_bps, payload_bytes, busy_us (time the link carried
/// any flow), utilization (busy / iteration). Then its own: avg_utilization
/// (payload / (bandwidth x iteration)) and peak_utilization (highest
/// instantaneous load / capacity).
std::string link_csv(const topology::Topology& topo, const Simulation& sim) {
  std::string out = fmt::format("{},avg_utilization,peak_utilization\n", engine::kLinkCsvSharedColumns);
  const Time makespan = sim.result.makespan;
  const double span = makespan.seconds();
  for (std::size_t i = 0; i < sim.link_bytes.size(); ++i) {
    const double bytes = sim.link_bytes[i];
    if (bytes <= 0) continue;
    const auto id = static_cast<topology::LinkId>(i);
    const auto& l = topo.link(id);
    const double capacity = l.bandwidth.bytes_per_second() * span;
    const Time busy = i < sim.link_busy.size() ? sim.link_busy[i] : Time::zero();
    const double peak = i < sim.link_peak_utilization.size() ? sim.link_peak_utilization[i] : 0.0;
    out += fmt::format("{},{},{},{},{},{:.0f},{:.3f},{:.6f},{:.6f},{:.6f}\n", i, topo.vertex(l.src).name,
                       topo.vertex(l.dst).name, topology::to_string(topo.tier(id)), l.bandwidth.bps(), bytes,
                       busy.us(), span > 0 ? busy.seconds() / span : 0.0, capacity > 0 ? bytes / capacity : 0.0,
                       peak);
  }
  return out;
}

/// One stderr line naming the files the run wrote (sweep, compare-schedules,
/// kernels and collectives say where theirs went; stdout stays the report,
/// valid JSON under --json; helper 171).
void say_written(const std::vector<std::string>& files) {
  if (!files.empty()) std::cerr << fmt::format("tessera: wrote {}\n", fmt::join(files, ", "));
}

}  // namespace

int cmd_run(const Args& args, std::ostream& out) {
  ArgParser p("tessera run");
  declare_scenario_options(p);
  p.option("trace").option("links").option("json-out").flag("json").flag("allow-oom").flag("comm-breakdown");
  p.option("trace-ranks").option("trace-micro-batches").option("trace-transfers");
  std::vector<std::string> sets;
  p.parse(take_set_options(args, sets));
  p.expect_positional(1, "a scenario file");
  Scenario s = load_scenario(p.positional()[0], scenario_overrides(sets, p));
  // Legal but likely unintended (a tensor-parallel group across nodes): one
  // line each on stderr, the forecast unchanged.
  print_scenario_warnings(s);
  if (!s.jobs.empty()) {
    // Several jobs on one fabric: their own summary (docs/scenarios.md).
    for (const char* flag : {"trace", "links", "trace-ranks", "trace-micro-batches", "trace-transfers"}) {
      if (p.get(flag)) throw InputError(fmt::format("--{} is not available for a scenario with jobs", flag));
    }
    if (p.has("comm-breakdown"))
      throw InputError("--comm-breakdown is not available for a scenario with jobs");
    std::optional<std::string> json_out = p.get("json-out");
    if (!json_out && !s.outputs.json.empty()) json_out = s.outputs.json;
    FileSet files;
    files.input(p.positional()[0], "the scenario");
    if (s.kernel_overrides) files.input(s.kernel_overrides->path(), "node_model.overrides");
    if (json_out) files.output(*json_out, p.get("json-out") ? "--json-out" : "outputs.json");
    say_on_interrupt("nothing was written (outputs are written when the run finishes)");
    const JobsOutcome o = simulate_jobs(s);
    for (const std::string& w : jobs_outcome_warnings(s, o)) print_forecast_warning(s, w);
    if (json_out) {
      write_file_atomic(*json_out, format_jobs_json(s, o));
      say_written({*json_out + " (the report as JSON)"});
    }
    out << (p.has("json") ? format_jobs_json(s, o) : format_jobs_text(s, o));
    // As for one job: printed, but a plan that does not fit is not a result.
    // Every job that does not fit, in one line.
    std::vector<std::string> names, stages;
    for (const auto& j : o.jobs) {
      if (!j.oom()) continue;
      names.push_back(j.name);
      stages.push_back(fmt::format("pipeline stage {} needs {:.1f} GiB of {:.1f} GiB", j.fullest_stage,
                                   j.peak_memory.in_gib(), j.memory_capacity.in_gib()));
    }
    if (names.size() == 1 && !p.has("allow-oom")) {
      throw OutOfMemoryError(
          fmt::format("{}: job {} does not fit in GPU memory: {} (--allow-oom to accept the forecast)",
                      s.file, names.front(), stages.front()));
    }
    if (names.size() > 1 && !p.has("allow-oom")) {
      for (std::size_t i = 0; i < names.size(); ++i) stages[i] = names[i] + "'s " + stages[i];
      throw OutOfMemoryError(
          fmt::format("{}: jobs {} do not fit in GPU memory: {} (--allow-oom to accept the forecast)", s.file,
                      fmt::join(names, ", "), fmt::join(stages, "; ")));
    }
    return 0;
  }
  // Output files: command-line flags first, then the scenario's `outputs:`.
  auto output = [&](const char* flag, const std::string& from_scenario) -> std::optional<std::string> {
    if (auto v = p.get(flag)) return v;
    if (!from_scenario.empty()) return from_scenario;
    return std::nullopt;
  };
  const auto trace_path = output("trace", s.outputs.trace);
  // Said on stderr now, and in the report's warnings (JSON) with the rest.
  std::vector<std::string> option_warnings;
  if (!trace_path) {
    // What the trace records, with no trace written: it does nothing.
    std::vector<std::string> unused;
    for (const char* flag : {"trace-ranks", "trace-micro-batches", "trace-transfers"}) {
      if (p.get(flag)) unused.push_back(fmt::format("--{}", flag));
    }
    if (!s.outputs.trace_ranks.empty()) unused.emplace_back("outputs.trace_ranks");
    if (!s.outputs.trace_micro_batches.empty()) unused.emplace_back("outputs.trace_micro_batches");
    if (s.outputs.trace_transfers) unused.emplace_back("outputs.trace_transfers");
    for (const std::string& u : unused) {
      option_warnings.push_back(
          fmt::format("{} has no effect without a trace (--trace FILE or outputs.trace)", u));
      std::cerr << fmt::format("tessera: warning: {}: {}\n", s.file, option_warnings.back());
    }
  }
  const auto links_path = output("links", s.outputs.links);
  const auto json_path = output("json-out", s.outputs.json);
  // The ns-3 point-to-point model keeps no per-link counts: its CSV would
  // be a header alone.
  if (links_path && s.backend.name == "ns3" && s.ns3.model == Ns3Settings::Model::PointToPoint) {
    throw InputError(
        fmt::format("{}: the ns-3 point-to-point model keeps no per-link counts (ns3.model "
                    "infiniband or backend flow have them)",
                    p.get("links") ? "--links" : "outputs.links"));
  }
  // Fail on unwritable outputs before spending time simulating.
  // (none may be the scenario itself, or another output)
  FileSet files;
  files.input(p.positional()[0], "the scenario");
  if (s.kernel_overrides) files.input(s.kernel_overrides->path(), "node_model.overrides");
  if (trace_path) files.output(*trace_path, p.get("trace") ? "--trace" : "outputs.trace");
  if (links_path) files.output(*links_path, p.get("links") ? "--links" : "outputs.links");
  if (json_path) files.output(*json_path, p.get("json-out") ? "--json-out" : "outputs.json");

  // The trace streams to a temporary file while simulating (removed on error).
  std::unique_ptr<TraceFile> trace;
  if (trace_path) trace = std::make_unique<TraceFile>(*trace_path, s, trace_options(p, s));
  // Ctrl-C says what was kept (nothing: outputs are written at the end; a
  // trace's hidden temporary is removed by the next run writing it).
  say_on_interrupt("nothing was written (outputs are written when the run finishes)");
  // A bar on a terminal, a line every 10 s in a log, for runs over 3 s.
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  ProgressObserver progress(trace ? trace->observer() : nullptr, std::cerr, tty);
  const auto started = std::chrono::steady_clock::now();
  const Simulation sim = simulate_scenario(s, &progress);
  progress.finish();
  // The split the Stage-balance hint suggests, simulated as the plan's own
  // free-network run was (one more run, only where a split is suggested).
  std::unique_ptr<node_model::KernelPredictor> split_predictor;
  const PlanTimer time_split = [&](const parallelism::ParallelPlan& plan) {
    // Said where the run was long enough to show progress (3 s).
    const bool say = std::chrono::steady_clock::now() - started >= std::chrono::seconds(3);
    if (say) {
      std::cerr << (tty ? "" : "tessera: ")
                << "timing the pipeline split the Stage balance line suggests (the plan once more on a free "
                   "network)..."
                << (tty ? "" : "\n") << std::flush;
    }
    if (!split_predictor) split_predictor = study::make_scenario_predictor(s);
    Scenario with = s;
    with.plan = plan;
    const Time t = study::free_communication_iteration(with, *split_predictor);
    if (say && tty) std::cerr << "\r\033[K" << std::flush;
    return t;
  };
  RunReport rep = make_report(s, sim, time_split);
  // One more simulation per class of communication the plan runs.
  if (p.has("comm-breakdown")) rep.comm_costs = study::communication_costs(s, sim.result.makespan);
  // Warnings only the forecast shows (a cable changing after the iteration).
  for (std::size_t i = s.warnings.size(); i < rep.warnings.size(); ++i)
    print_forecast_warning(s, rep.warnings[i]);
  rep.warnings.insert(rep.warnings.end(), option_warnings.begin(), option_warnings.end());
  std::vector<std::string> written;
  if (trace) {
    trace->finish();
    written.push_back(*trace_path + " (the trace: ui.perfetto.dev)");
  }
  if (links_path) {
    // The backend's own CSV (ns3), else the one from its per-link vectors.
    write_file_atomic(*links_path, !sim.link_csv.empty() ? sim.link_csv : link_csv(sim.topology, sim));
    written.push_back(*links_path + " (each link's bytes and busy time)");
  }
  if (json_path) {
    write_file_atomic(*json_path, format_json(rep));
    written.push_back(*json_path + " (the report as JSON)");
  }
  say_written(written);
  out << (p.has("json") ? format_json(rep) : format_text(rep));
  if (rep.oom() && !p.has("allow-oom")) {
    // The forecast is printed, but a plan that does not fit is not a result
    // to build on: a distinct exit code, and one line saying why.
    // The stage furthest over (helper 84: the first named, with another
    // further over).
    const StageMemory* worst = nullptr;
    for (const auto& m : rep.memory) {
      if (m.oom && (worst == nullptr || m.total.in_gib() - m.capacity.in_gib() >
                                            worst->total.in_gib() - worst->capacity.in_gib()))
        worst = &m;
    }
    if (worst != nullptr) {
      const StageMemory& m = *worst;
      throw OutOfMemoryError(fmt::format(
          "{}: the plan does not fit in GPU memory: pipeline stage {} needs {:.1f} GiB of {:.1f} GiB ({}; "
          "tessera search finds plans that fit; --allow-oom to accept the forecast)",
          s.file, m.stage, m.total.in_gib(), m.capacity.in_gib(), out_of_memory_hint(m, s)));
    }
  }
  return 0;
}

}  // namespace tessera::cli
