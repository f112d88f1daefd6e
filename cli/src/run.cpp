#include <fmt/format.h>

#include <memory>
#include <ostream>

#include "tessera/cli/args.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/engine/flow_network.hpp"
#include "tessera/node_model/roofline.hpp"
#include "tessera/parallelism/data_parallel.hpp"
#ifdef TESSERA_HAVE_NS3
#include "tessera/ns3_modules/ns3_backend.hpp"
#endif

namespace tessera::cli {

namespace {
engine::ExecutionResult simulate(const Scenario& s, const parallelism::TaskGraph& graph,
                                 const topology::Topology& topo) {
  if (s.backend == Backend::Ns3) {
#ifdef TESSERA_HAVE_NS3
    return ns3_modules::run_on_ns3(graph, topo, ns3_modules::Ns3Options{});
#else
    throw InputError("backend 'ns3' is not available: this tessera was built without ns-3 (TESSERA_WITH_NS3=OFF)");
#endif
  }
  engine::DiscreteEventLoop loop;
  engine::FlowNetwork net(topo, loop);
  return engine::execute(graph, loop, net);
}
}  // namespace

int cmd_run(const Args& args, std::ostream& out) {
  ArgParser p("tessera run");
  p.option("backend").flag("json");
  p.parse(args);
  p.expect_positional(1, "a scenario file");
  Scenario s = load_scenario(p.positional()[0]);
  if (auto b = p.get("backend")) s.backend = parse_backend(*b);

  const node_model::RooflinePredictor predictor(s.gpu);
  const auto graph = parallelism::plan_data_parallel(s.model, s.workload, s.plan, predictor);
  const auto topo = topology::build_leaf_spine(s.cluster);
  const auto result = simulate(s, graph, topo);
  const RunReport rep = make_report(s, result);
  out << (p.has("json") ? format_json(rep) : format_text(rep));
  return 0;
}

}  // namespace tessera::cli
