// The flow backend: every message a max-min fair fluid flow on its routed
// path (engine::FlowNetwork).
#include "backends.hpp"
#include "tessera/engine/event_loop.hpp"
#include "tessera/engine/flow_network.hpp"

namespace tessera::study::detail {

namespace {

class FlowBackend final : public NetworkBackend {
 public:
  [[nodiscard]] std::string_view name() const override { return "flow"; }
  [[nodiscard]] BackendRun run(const parallelism::TaskGraph& graph, const topology::Topology& topo,
                               const Scenario& s, const engine::ExecutionOptions& options,
                               engine::ExecutionObserver* observer) const override {
    return run_classified(graph, topo, s, options, observer, {});
  }
  [[nodiscard]] BackendRun run_classified(const parallelism::TaskGraph& graph, const topology::Topology& topo,
                                          const Scenario& s, const engine::ExecutionOptions& options,
                                          engine::ExecutionObserver* observer,
                                          std::vector<std::int32_t> source_classes) const override {
    engine::DiscreteEventLoop loop;
    engine::FlowNetwork net(topo, loop);
    net.set_adaptive_routing(s.fabric_adaptive_routing);
    const bool classified = !source_classes.empty();
    if (classified) net.set_source_classes(std::move(source_classes));
    // `failures:` entries with `at:` change their cable during the run.
    for (const TimedCableChange& c : timed_cable_changes(s, topo)) net.change_cable_at(c.at, c.a, c.b, c.factor);
    BackendRun out;
    out.result = engine::execute(graph, loop, net, observer, options);
    out.link_bytes = net.link_bytes();
    out.link_busy = net.link_busy();
    out.link_peak_utilization = net.link_peak_utilization();
    if (classified) out.link_bytes_by_class = net.link_bytes_by_class();
    return out;
  }
};

}  // namespace

std::unique_ptr<const NetworkBackend> make_flow_backend() { return std::make_unique<const FlowBackend>(); }

}  // namespace tessera::study::detail
