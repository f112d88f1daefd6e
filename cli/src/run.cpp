#include <fmt/format.h>

#include <memory>
#include <ostream>

#include "tessera/cli/args.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/cli/output.hpp"
#include "tessera/cli/pipeline.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/cli/trace.hpp"
#include "tessera/engine/flow_network.hpp"
#include "tessera/node_model/roofline.hpp"
#include "tessera/parallelism/plan.hpp"
#ifdef TESSERA_HAVE_NS3
#include "tessera/ns3_modules/ns3_backend.hpp"
#endif

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

Simulation simulate_scenario(const Scenario& s, engine::ExecutionObserver* observer) {
  const node_model::RooflinePredictor predictor(s.gpu);
  const auto graph = parallelism::plan_training(s.model, s.workload, s.plan, predictor);
  Simulation sim{topology::build_leaf_spine(s.cluster), {}, {}};
  if (s.backend == Backend::Ns3) {
#ifdef TESSERA_HAVE_NS3
    sim.result = ns3_modules::run_on_ns3(graph, sim.topology, ns3_modules::Ns3Options{}, observer);
    return sim;
#else
    throw InputError("backend 'ns3' is not available: this tessera was built without ns-3 (TESSERA_WITH_NS3=OFF)");
#endif
  }
  engine::DiscreteEventLoop loop;
  engine::FlowNetwork net(sim.topology, loop);
  sim.result = engine::execute(graph, loop, net, observer);
  sim.link_bytes = net.link_bytes();
  return sim;
}

int cmd_run(const Args& args, std::ostream& out) {
  ArgParser p("tessera run");
  p.option("backend").option("trace").option("links").flag("json");
  p.parse(args);
  p.expect_positional(1, "a scenario file");
  Scenario s = load_scenario(p.positional()[0]);
  if (auto b = p.get("backend")) s.backend = parse_backend(*b);
  const auto trace_path = p.get("trace");
  const auto links_path = p.get("links");
  // Fail on unwritable outputs before spending time simulating.
  if (trace_path) check_writable(*trace_path, "--trace");
  if (links_path) {
    check_writable(*links_path, "--links");
    if (s.backend != Backend::Flow) throw InputError("--links: per-link counters are only available on the flow backend so far");
  }

  ChromeTraceObserver trace(s.gpus());
  const Simulation sim = simulate_scenario(s, trace_path ? &trace : nullptr);
  const RunReport rep = make_report(s, sim.result);
  if (trace_path) write_file_atomically(*trace_path, trace.json());
  if (links_path) write_file_atomically(*links_path, link_csv(sim.topology, sim.link_bytes, sim.result.makespan));
  out << (p.has("json") ? format_json(rep) : format_text(rep));
  return 0;
}

}  // namespace tessera::cli
