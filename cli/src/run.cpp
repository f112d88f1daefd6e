#include <fmt/format.h>

#include <memory>
#include <optional>
#include <ostream>

#include "tessera/cli/args.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/cli/pipeline.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/cli/trace.hpp"
#include "tessera/files.hpp"
#include "tessera/parallelism/plan.hpp"

namespace tessera::cli {

namespace {

/// Per-link totals of a run, as CSV: one row per directed link that carried
/// traffic, average utilization over the iteration.
std::string link_csv(const topology::Topology& topo, const std::vector<double>& bytes, Time makespan) {
  std::string out = "link,src,dst,bandwidth_bps,bytes,avg_utilization\n";
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] <= 0) continue;
    const auto& l = topo.link(static_cast<topology::LinkId>(i));
    const double capacity = l.bandwidth.bytes_per_second() * makespan.seconds();
    out += fmt::format("{},{},{},{},{:.0f},{:.6f}\n", i, topo.vertex(l.src).name, topo.vertex(l.dst).name,
                       l.bandwidth.bps(), bytes[i], capacity > 0 ? bytes[i] / capacity : 0.0);
  }
  return out;
}

}  // namespace

int cmd_run(const Args& args, std::ostream& out) {
  ArgParser p("tessera run");
  p.option("backend").option("trace").option("links").option("json-out").flag("json").flag("allow-oom");
  p.option("trace-ranks").option("trace-micro-batches").option("trace-transfers");
  // --set KEY=VALUE may repeat: take them out before strict parsing.
  std::vector<Override> overrides;
  Args rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--set" && i + 1 < args.size()) {
      overrides.push_back(parse_override(args[++i]));
    } else if (args[i].rfind("--set=", 0) == 0) {
      overrides.push_back(parse_override(args[i].substr(6)));
    } else {
      rest.push_back(args[i]);
    }
  }
  p.parse(rest);
  p.expect_positional(1, "a scenario file");
  Scenario s = load_scenario(p.positional()[0], overrides);
  if (auto b = p.get("backend")) s.backend = parse_backend(*b);
  // Output files: command-line flags first, then the scenario's `outputs:`.
  auto output = [&](const char* flag, const std::string& from_scenario) -> std::optional<std::string> {
    if (auto v = p.get(flag)) return v;
    if (!from_scenario.empty()) return from_scenario;
    return std::nullopt;
  };
  const auto trace_path = output("trace", s.outputs.trace);
  const auto links_path = output("links", s.outputs.links);
  const auto json_path = output("json-out", s.outputs.json);
  // Fail on unwritable outputs before spending time simulating.
  // (none may be the scenario itself, or another output)
  FileSet files;
  files.input(p.positional()[0], "the scenario");
  if (trace_path) files.output(*trace_path, p.get("trace") ? "--trace" : "outputs.trace");
  if (links_path) files.output(*links_path, p.get("links") ? "--links" : "outputs.links");
  if (json_path) files.output(*json_path, p.get("json-out") ? "--json-out" : "outputs.json");

  // The trace streams to a temporary file while simulating (removed on error).
  std::unique_ptr<TraceFile> trace;
  if (trace_path) trace = std::make_unique<TraceFile>(*trace_path, s, trace_options(p, s));
  const Simulation sim = simulate_scenario(s, trace ? trace->observer() : nullptr);
  const RunReport rep = make_report(s, sim);
  if (trace) trace->finish();
  if (links_path) {
    write_file_atomic(*links_path, s.backend == Backend::Ns3
                                           ? sim.ns3_link_csv
                                           : link_csv(sim.topology, sim.link_bytes, sim.result.makespan));
  }
  if (json_path) write_file_atomic(*json_path, format_json(rep));
  out << (p.has("json") ? format_json(rep) : format_text(rep));
  if (rep.oom() && !p.has("allow-oom")) {
    // The forecast is printed, but a plan that does not fit is not a result
    // to build on: a distinct exit code, and one line saying why.
    for (const auto& m : rep.memory) {
      if (!m.oom) continue;
      throw OutOfMemoryError(fmt::format(
          "{}: the plan does not fit in GPU memory: pipeline stage {} needs {:.1f} GiB of {:.1f} GiB (--allow-oom to "
          "accept the forecast)",
          s.file, m.stage, m.total.as_double() / (1024.0 * 1024 * 1024), m.capacity.as_double() / (1024.0 * 1024 * 1024)));
    }
  }
  return 0;
}

}  // namespace tessera::cli
