// Network backends by name (study/backend.hpp): a backend a caller registers
// runs scenarios through the same pipeline as the built-in ones, with no
// edit to pipeline.cpp; unknown names are one-line errors listing the known.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tessera/cli/scenario.hpp"
#include "tessera/engine/event_loop.hpp"
#include "tessera/engine/executor.hpp"
#include "tessera/engine/zero_cost_network.hpp"
#include "tessera/study/backend.hpp"
#include "tessera/study/pipeline.hpp"
#include "test_scenarios.hpp"

using namespace tessera;
using namespace tessera::cli;
using tessera::cli::test::scenario_text;

namespace {

/// A test backend: communication is free (engine::ZeroCostNetwork). Counts
/// its runs and writes its own (one-line) link CSV.
class FreeBackend final : public study::NetworkBackend {
 public:
  explicit FreeBackend(int* runs) : runs_(runs) {}
  [[nodiscard]] std::string_view name() const override { return "free"; }
  void check(const Scenario& s) const override {
    if (s.plan.pp > 4) throw ScenarioError("parallelism.pp: the free backend takes at most 4 stages");
  }
  [[nodiscard]] study::BackendRun run(const parallelism::TaskGraph& graph, const topology::Topology& /*topo*/,
                                      const Scenario& /*s*/, const engine::ExecutionOptions& options,
                                      engine::ExecutionObserver* observer) const override {
    ++*runs_;
    engine::DiscreteEventLoop loop;
    engine::ZeroCostNetwork net(loop);
    study::BackendRun out;
    out.result = engine::execute(graph, loop, net, observer, options);
    out.link_csv = "link,src,dst,tier,bandwidth_bps,payload_bytes,busy_us,utilization\n";
    return out;
  }

 private:
  int* runs_;
};

study::BackendRegistry with_free_backend(int* runs) {
  study::BackendRegistry r = study::built_in_backends();
  r.add(std::make_unique<const FreeBackend>(runs));
  return r;
}

}  // namespace

TEST(Backends, BuiltInNamesAndUnknownNames) {
  const study::BackendRegistry r = study::built_in_backends();
  EXPECT_EQ(r.names(), (std::vector<std::string_view>{"flow", "ns3"}));
  EXPECT_EQ(r.at("flow").name(), "flow");
  EXPECT_TRUE(r.at("flow").concurrent_runs());
  EXPECT_EQ(r.find("packet"), nullptr);
  try {
    (void)r.at("packet");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "unknown backend 'packet' (expected flow or ns3)");
  }
  EXPECT_EQ(study::parse_backend("ns3"), study::Backend{"ns3"});
  EXPECT_THROW((void)study::parse_backend("tpu"), InputError);

  int runs = 0;
  study::BackendRegistry mine = with_free_backend(&runs);
  EXPECT_EQ(mine.names(), (std::vector<std::string_view>{"flow", "ns3", "free"}));
  try {
    (void)mine.at("tpu");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "unknown backend 'tpu' (expected flow, ns3 or free)");
  }
  EXPECT_THROW(mine.add(std::make_unique<const FreeBackend>(&runs)), InputError);  // the name is taken
}

// A registered backend runs a shipped scenario through simulate_scenario and
// execute_on_backend: the free network's iteration is the bubble run's, and
// what the backend reports (its link CSV) reaches the Simulation.
TEST(Backends, ARegisteredBackendRunsAScenario) {
  Scenario s = parse_scenario(scenario_text("default.yaml"), "default.yaml");
  int runs = 0;
  const study::BackendRegistry backends = with_free_backend(&runs);

  const Simulation flow = simulate_scenario(s, nullptr, nullptr, true, backends);
  EXPECT_EQ(runs, 0);
  EXPECT_TRUE(flow.link_csv.empty());
  EXPECT_FALSE(flow.link_bytes.empty());

  s.backend = study::Backend{"free"};
  const Simulation free = simulate_scenario(s, nullptr, nullptr, true, backends);
  EXPECT_EQ(runs, 1);
  EXPECT_GT(free.result.makespan, Time::zero());
  EXPECT_EQ(free.result.makespan, free.free_comm.makespan);  // nothing exposed
  EXPECT_LT(free.result.makespan, flow.result.makespan);
  EXPECT_EQ(free.link_csv.substr(0, 5), "link,");
  EXPECT_TRUE(free.link_bytes.empty());

  const auto predictor = make_scenario_predictor(s);
  const auto planned = parallelism::plan_training_detailed(s.model, s.workload, s.plan, *predictor);
  EXPECT_EQ(execute_on_backend(s, planned.graph, build_topology(s), backends).makespan, free.result.makespan);
  EXPECT_EQ(runs, 2);
  // search's screen: the same free-communication iteration, without a
  // topology or a backend run.
  EXPECT_EQ(study::free_communication_iteration(s, *predictor), free.free_comm.makespan);
  EXPECT_EQ(runs, 2);

  // Without the registry that has it, the name is unknown.
  EXPECT_THROW((void)simulate_scenario(s), InputError);
  // The backend's check() runs before anything is planned or run.
  s.plan.pp = 8;
  EXPECT_THROW((void)simulate_scenario(s, nullptr, nullptr, true, backends), ScenarioError);
  EXPECT_EQ(runs, 2);
}

// `failures:` entries with `at:` (a list item {cable, at}) are read as timed
// failures; the flow backend applies them during the run. Failing at time
// zero is failing from the start; failing after the iteration changes
// nothing; ns3 refuses them.
TEST(Backends, TimedFailuresOnTheFlowBackend) {
  const std::string base = scenario_text("default.yaml");
  const Scenario s = parse_scenario(base + R"(
failures:
  links:
    - leaf0-spine1
    - {cable: leaf0-spine2, at: 5ms}
  degraded:
    - cable: leaf1-spine3
      at: 2ms
  degraded_rate: 0.5
)",
                                    "t.yaml");
  ASSERT_EQ(s.failures.failed.size(), 1U);
  EXPECT_EQ(s.failures.failed[0], (std::pair<std::string, std::string>{"leaf0", "spine1"}));
  EXPECT_TRUE(s.failures.degraded.empty());
  ASSERT_EQ(s.failures.timed.size(), 2U);
  EXPECT_EQ(s.failures.timed[0], (Scenario::Failures::Timed{"leaf0", "spine2", Time::from_ms(5), true}));
  EXPECT_EQ(s.failures.timed[1], (Scenario::Failures::Timed{"leaf1", "spine3", Time::from_ms(2), false}));
  const topology::Topology topo = build_topology(s);
  EXPECT_EQ(topo.failed_links(), 2);  // only leaf0-spine1 (both directions) from the start
  const auto changes = study::timed_cable_changes(s, topo);
  ASSERT_EQ(changes.size(), 2U);
  EXPECT_EQ(changes[0].factor, 0.0);
  EXPECT_EQ(changes[1].factor, 0.5);
  EXPECT_EQ(changes[1].at, Time::from_ms(2));

  const Scenario plain = parse_scenario(base, "p.yaml");
  const Scenario from_start = parse_scenario(base, "s.yaml", {{"failures.links", "leaf0-spine1"}});
  const Scenario at_zero = parse_scenario(base, "z.yaml", {{"failures.links", "[{cable: leaf0-spine1, at: 0ms}]"}});
  // (1 ps: a timed failure before anything is sent, on the timed path)
  const Scenario at_one_ps =
      parse_scenario(base, "o.yaml", {{"failures.links", "[{cable: leaf0-spine1, at: 1ps}]"}});
  const Scenario after = parse_scenario(base, "a.yaml", {{"failures.links", "[{cable: leaf0-spine1, at: 1000s}]"}});
  // At 0 is from the start, read as such: no timed failure, so every
  // backend runs it (ns3 runs no failure during the run).
  EXPECT_EQ(at_zero.failures.failed, from_start.failures.failed);
  EXPECT_TRUE(at_zero.failures.timed.empty());
  const Time none = simulate_scenario(plain, nullptr, nullptr, false).result.makespan;
  ASSERT_EQ(at_one_ps.failures.timed.size(), 1U);
  EXPECT_EQ(simulate_scenario(at_one_ps, nullptr, nullptr, false).result.makespan,
            simulate_scenario(from_start, nullptr, nullptr, false).result.makespan);
  EXPECT_EQ(simulate_scenario(after, nullptr, nullptr, false).result.makespan, none);
  const Time mid = simulate_scenario(s, nullptr, nullptr, false).result.makespan;
  EXPECT_GT(mid, Time::zero());

  Scenario ns3 = s;
  ns3.backend = study::Backend{"ns3"};
  EXPECT_THROW((void)simulate_scenario(ns3), InputError);  // ScenarioError (or: built without ns-3)
}
