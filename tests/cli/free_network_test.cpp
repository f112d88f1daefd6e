// The bubble run (communication free) executes one rank per class of
// interchangeable ranks (parallelism::symmetry_quotient): it must give every
// rank exactly the timing the full execution on a zero-cost network gives.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/study/pipeline.hpp"
#include "tessera/cli/scenario.hpp"
#include "test_scenarios.hpp"
#include "tessera/engine/event_loop.hpp"
#include "tessera/engine/executor.hpp"
#include "tessera/engine/zero_cost_network.hpp"
#include "tessera/node_model/predictors.hpp"

using namespace tessera;
using namespace tessera::cli;
using tessera::cli::test::error_of;
using tessera::cli::test::scenario_text;

namespace {


void expect_same_free_timing(const Scenario& s, const std::string& what, std::size_t expected_classes) {
  const auto predictor = node_model::make_predictor(s.predictor, kernel_gpu(s));
  const auto planned = parallelism::plan_training_detailed(s.model, s.workload, s.plan, *predictor);
  const engine::ExecutionOptions options = execution_options(s);
  engine::DiscreteEventLoop loop;
  engine::ZeroCostNetwork net(loop);
  const engine::ExecutionResult full = engine::execute(planned.graph, loop, net, nullptr, options);
  const engine::ExecutionResult quick = engine::execute_on_free_network(planned.graph, options);
  EXPECT_EQ(quick.makespan, full.makespan) << what;
  ASSERT_EQ(quick.ranks.size(), full.ranks.size()) << what;
  for (std::size_t r = 0; r < full.ranks.size(); ++r) {
    EXPECT_EQ(quick.ranks[r].finish, full.ranks[r].finish) << what << " rank " << r;
    EXPECT_EQ(quick.ranks[r].compute_busy, full.ranks[r].compute_busy) << what << " rank " << r;
    EXPECT_EQ(quick.ranks[r].host_wait, full.ranks[r].host_wait) << what << " rank " << r;
    EXPECT_EQ(quick.ranks[r].flops.count(), full.ranks[r].flops.count()) << what << " rank " << r;
  }
  EXPECT_EQ(parallelism::symmetry_quotient(planned.graph).graph.num_ranks(), static_cast<int>(expected_classes))
      << what;
}

}  // namespace

// Every shipped flow-backend scenario: the tp x dp ranks of a pipeline stage
// are one class, so the quotient has one rank per stage (and per virtual
// stage layout: interleaved stages are still one program per stage).
TEST(FreeNetwork, QuotientGivesEveryRankTheFullExecutionsTiming) {
  struct Case {
    const char* file;
    std::vector<Override> overrides;
    std::size_t classes;
  };
  const std::vector<Case> cases = {
      {"default.yaml", {}, 1},                                    // dp 16: one class
      {"llama2-70b.yaml", {}, 0},                                 // classes: checked below
      {"schedules.yaml", {}, 0},
      {"schedules.yaml", {{"parallelism.schedule", "gpipe"}}, 0},
      {"schedules.yaml", {{"parallelism.schedule", "zb-h1"}}, 0},
      {"schedules.yaml", {{"parallelism.schedule", "zb-h2"}}, 0},
      {"shared-hcas.yaml", {}, 0},
      {"gpt3-175b.yaml", {{"training.global_batch", "32"}}, 16},  // pp 16
      // Expert parallelism: the all-to-all and expert-gradient groups keep
      // every rank of a stage in one class.
      {"mixtral-ep.yaml", {}, 0},
      {"mixtral-ep.yaml",
       {{"parallelism.tp", "2"}, {"parallelism.dp", "8"}, {"parallelism.sequence_parallel", "true"},
        {"parallelism.schedule", "zb-h1"}, {"training.global_batch", "32"}},
       0},
  };
  for (const Case& c : cases) {
    const Scenario s = parse_scenario(scenario_text(c.file), c.file, c.overrides);
    const std::size_t classes = c.classes != 0 ? c.classes : static_cast<std::size_t>(s.plan.pp);
    expect_same_free_timing(s, c.file, classes);
  }
}
