// `tessera sensitivity`: which steps apply to a scenario, what they set, and
// iterations that can be checked by hand on a one-GPU plan.
#include "tessera/cli/sensitivity.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "tessera/error.hpp"
#include "tessera/study/pipeline.hpp"
#include "test_scenarios.hpp"

namespace tessera::cli {
namespace {

// The shipped default scenario (GPT-2 Large, Megatron, H100) on one GPU: 4
// micro-batches of 8 x 1024 tokens.
const std::vector<Override> kOneGpu = {{"cluster.nodes", "1"},
                                       {"cluster.gpus_per_node", "1"},
                                       {"cluster.fabric.hosts_per_leaf", "1"},
                                       {"parallelism.dp", "1"},
                                       {"training.global_batch", "32"}};

// The same on two GPUs of one node as two pipeline stages.
const std::vector<Override> kTwoStages = {
    {"cluster.gpus_per_node", "2"}, {"cluster.fabric.hosts_per_leaf", "2"}, {"parallelism.pp", "2"}};

/// The default scenario's text.
const std::string& text() {
  static const std::string kText = test::scenario_text("default.yaml");
  return kText;
}

/// The overrides of the one-GPU scenario, then `more`.
std::vector<Override> one_gpu(const std::vector<Override>& more = {}) {
  std::vector<Override> o = kOneGpu;
  o.insert(o.end(), more.begin(), more.end());
  return o;
}

Scenario load(const std::vector<Override>& more = {}) {
  return parse_scenario(text(), "s.yaml", one_gpu(more));
}

Sensitivity run(const std::vector<Override>& more, unsigned jobs) {
  return run_sensitivity(load(more), text(), one_gpu(more), jobs);
}

std::vector<std::string> constants(const std::vector<SensitivityStep>& steps) {
  std::vector<std::string> out;
  out.reserve(steps.size());
  for (const auto& s : steps) out.push_back(s.constant);
  return out;
}

const SensitivityStep& step_named(const std::vector<SensitivityStep>& steps, const std::string& constant) {
  const auto it =
      std::find_if(steps.begin(), steps.end(), [&](const auto& s) { return s.constant == constant; });
  if (it == steps.end()) throw std::runtime_error("no step " + constant);
  return *it;
}

const SensitivityRow& row_named(const Sensitivity& r, const std::string& constant) {
  const auto it = std::find_if(r.rows.begin(), r.rows.end(),
                               [&](const auto& row) { return row.step.constant == constant; });
  if (it == r.rows.end()) throw std::runtime_error("no row " + constant);
  return *it;
}

TEST(Sensitivity, StepsFollowTheScenarioAndStartFromItsValues) {
  // Megatron on one GPU: the host steps and the clock, no link class.
  const auto one = sensitivity_steps(load());
  EXPECT_EQ(constants(one),
            (std::vector<std::string>{"host time per kernel launch", "host data step per micro-batch",
                                      "GPU clock under load"}));
  ASSERT_EQ(step_named(one, "host time per kernel launch").sets.size(), 1U);
  EXPECT_EQ(step_named(one, "host time per kernel launch").sets[0].path, "calibration.host_launch");
  EXPECT_EQ(step_named(one, "host time per kernel launch").sets[0].value, "43.2us");     // 42.2 us shipped
  EXPECT_EQ(step_named(one, "host data step per micro-batch").sets[0].value, "7.87ms");  // 6.87 ms shipped
  EXPECT_EQ(step_named(one, "GPU clock under load").sets[0].value, "0.99");

  // Two stages on one node under Megatron-DeepSpeed: its 0.68 ms exchange
  // cost + 100 us, and the NVLink class (efficiency and penalty x 0.99).
  std::vector<Override> ds = kTwoStages;
  ds.push_back({"training.framework", "megatron-deepspeed"});
  const auto two = sensitivity_steps(load(ds));
  EXPECT_EQ(step_named(two, "host time per pipeline send or receive").sets[0].value, "780us");
  const auto& bw = step_named(two, "NVLink collectives' bandwidth");
  ASSERT_EQ(bw.sets.size(), 2U);
  EXPECT_EQ(bw.sets[0].path, "calibration.nvlink_efficiency");
  EXPECT_EQ(bw.sets[0].value, "0.79101");  // 0.799 x 0.99
  EXPECT_EQ(bw.sets[1].path, "calibration.nvlink_group_penalty");
  EXPECT_EQ(bw.sets[1].value, "0.44451");  // 0.449 x 0.99
  EXPECT_EQ(step_named(two, "NVLink collective launch").sets[0].value, "39.09us");
  EXPECT_EQ(step_named(two, "NVLink collective step latency").sets[0].path, "calibration.nvlink_step");
  EXPECT_EQ(step_named(two, "NVLink collective step latency").sets[0].value, "1us");  // 0 shipped
  EXPECT_EQ(step_named(two, "NVLink collective arrival skew").sets[0].value, "10us");
  EXPECT_EQ(step_named(two, "compute slowdown under an overlapping collective").sets[0].value, "0.05");
  for (const auto& s : two)
    EXPECT_EQ(s.constant.find("network"), std::string::npos) << "one node: " << s.constant;

  // Two nodes: the network class too.
  const auto nodes = sensitivity_steps(
      load({{"cluster.nodes", "2"}, {"cluster.fabric.hosts_per_leaf", "2"}, {"parallelism.dp", "2"}}));
  EXPECT_EQ(step_named(nodes, "network collective launch").sets[0].path, "calibration.network_launch");
  EXPECT_EQ(step_named(nodes, "network collectives' bandwidth").sets[0].value, "0.9108");  // 0.92 x 0.99
  EXPECT_EQ(step_named(nodes, "network collective step latency").sets[0].value, "7.2us");  // 6.2 us shipped
}

TEST(Sensitivity, HostStepsOnlyWhereTheHostModelIsOn) {
  // pytorch-eager without host keys: its kernels carry their launch floors
  // and no host model runs, so moving a host key would change the model.
  const auto eager = sensitivity_steps(load({{"training.framework", "pytorch-eager"}}));
  for (const auto& s : eager) EXPECT_EQ(s.constant.find("host"), std::string::npos) << s.constant;
  // With a host key given, the steps start from what the host model uses:
  // the key given, and 0 for the others.
  const auto given =
      sensitivity_steps(load({{"training.framework", "pytorch-eager"}, {"calibration.host_launch", "27us"}}));
  EXPECT_EQ(step_named(given, "host time per kernel launch").sets[0].value, "28us");
  EXPECT_EQ(step_named(given, "host data step per micro-batch").sets[0].value, "1ms");
}

TEST(Sensitivity, StepsAtTheEndOfTheirRangeGoTheOtherWay) {
  // Every constant keeps its row: where one step would leave the loader's
  // range, it goes the other way.
  const std::vector<Override> at_ends = {{"calibration.clock_derate", "0.1"},
                                         {"calibration.overlap_slowdown", "0.9"},
                                         {"calibration.nvlink_efficiency", "0.01"},
                                         {"calibration.nvlink_group_penalty", "0"},
                                         {"cluster.gpus_per_node", "2"},
                                         {"cluster.fabric.hosts_per_leaf", "2"},
                                         {"parallelism.dp", "2"}};
  const auto s = sensitivity_steps(load(at_ends));
  const auto& clock = step_named(s, "GPU clock under load");  // 0.099 < 0.1
  EXPECT_EQ(clock.step, "+1%");
  EXPECT_EQ(clock.sets[0].value, "0.101");
  const auto& overlap = step_named(s, "compute slowdown under an overlapping collective");  // 0.95 > 0.9
  EXPECT_EQ(overlap.step, "-0.05");
  EXPECT_EQ(overlap.sets[0].value, "0.85");
  const auto& bandwidth = step_named(s, "NVLink collectives' bandwidth");  // 0.0099 < 0.01
  EXPECT_EQ(bandwidth.step, "+1%");
  EXPECT_EQ(bandwidth.sets[0].value, "0.0101");
  EXPECT_EQ(step_named(s, "NVLink collective launch").sets[0].path, "calibration.nvlink_launch");
  // Each step's scenario loads.
  for (const auto& step : s) {
    std::vector<Override> o = at_ends;
    o.insert(o.end(), step.sets.begin(), step.sets.end());
    try {
      (void)load(o);
    } catch (const std::exception& e) {
      ADD_FAILURE() << step.constant << ": " << e.what();
    }
  }
}

TEST(Sensitivity, OneGpuIterationsCheckedByHand) {
  const Sensitivity r = run({}, 2);
  ASSERT_EQ(r.rows.size(), 3U);
  // The data step runs after the GPU drained, before the micro-batch's first
  // launch: 1 ms more for each of the 4 micro-batches is 4 ms more, exactly.
  EXPECT_EQ(row_named(r, "host data step per micro-batch").change(r.iteration), Time::from_ms(4));
  // Largest change first.
  EXPECT_EQ(r.rows.front().step.constant, "host data step per micro-batch");
  for (std::size_t i = 1; i < r.rows.size(); ++i) {
    EXPECT_GE(std::llabs(r.rows[i - 1].change(r.iteration).ps()),
              std::llabs(r.rows[i].change(r.iteration).ps()));
  }
  // 1 us more per launch moves the iteration by at most 1 us per kernel the
  // host issues, and by more than nothing (some launches are on the
  // critical path: each micro-batch's first ones, after the data step).
  const Time launch = row_named(r, "host time per kernel launch").change(r.iteration);
  EXPECT_GT(launch, Time::zero());
  EXPECT_LT(launch, Time::from_ms(1));
  // Kernels 1% slower (peaks x 0.99): at most 1/0.99 - 1 of the iteration.
  const Time clock = row_named(r, "GPU clock under load").change(r.iteration);
  EXPECT_GT(clock, Time::zero());
  EXPECT_LE(clock.seconds(), r.iteration.seconds() * (1 / 0.99 - 1));
}

TEST(Sensitivity, TwoStagesCheckedByHand) {
  std::vector<Override> ds = kTwoStages;
  ds.push_back({"training.framework", "megatron-deepspeed"});
  const Sensitivity r = run(ds, 1);
  // The data step on the first and the last stage, both on the critical
  // path of every micro-batch's forward: 4 x 1 ms.
  EXPECT_EQ(row_named(r, "host data step per micro-batch").change(r.iteration), Time::from_ms(4));
  // One collective of the two stages on the critical path (the tied
  // embedding's gradient all-reduce): 10 us of skew x the expected later of
  // two normal arrivals, 0.5641896 (1 / sqrt(pi)).
  EXPECT_NEAR(row_named(r, "NVLink collective arrival skew").change(r.iteration).us(), 10 * 0.5641896, 0.001);
}

TEST(Sensitivity, EveryRowIsWhatRunGivesWithItsSetsAndJobsChangeNothing) {
  std::vector<Override> base = kTwoStages;
  const Sensitivity serial = run(base, 1);
  const Sensitivity parallel = run(base, 4);
  ASSERT_EQ(serial.rows.size(), parallel.rows.size());
  EXPECT_EQ(serial.iteration, parallel.iteration);
  for (std::size_t i = 0; i < serial.rows.size(); ++i) {
    EXPECT_EQ(serial.rows[i].step.constant, parallel.rows[i].step.constant);
    EXPECT_EQ(serial.rows[i].iteration, parallel.rows[i].iteration);
    // `tessera run --set ...` with the row's sets.
    std::vector<Override> o = base;
    o.insert(o.end(), serial.rows[i].step.sets.begin(), serial.rows[i].step.sets.end());
    const Time rerun = study::simulate_scenario(load(o)).result.makespan;
    EXPECT_EQ(rerun, serial.rows[i].iteration) << serial.rows[i].step.constant;
  }
  EXPECT_EQ(study::simulate_scenario(load(base)).result.makespan, serial.iteration);
}

TEST(Sensitivity, ReportsNameEveryRowAndItsSets) {
  const Scenario s = load();
  const Sensitivity r = run({}, 1);
  const std::string report = format_sensitivity_text(s, r);
  EXPECT_NE(report.find("host data step per micro-batch"), std::string::npos) << report;
  EXPECT_NE(report.find("+4.000 ms"), std::string::npos) << report;
  EXPECT_NE(report.find("--set calibration.host_microbatch=7.87ms"), std::string::npos) << report;
  const std::string json = format_sensitivity_json(s, r);
  // The command's own overrides (one GPU) come first, in each row's set.
  EXPECT_NE(json.find("\"set\": {\"cluster.nodes\": \"1\", \"cluster.gpus_per_node\": \"1\", "
                      "\"cluster.fabric.hosts_per_leaf\": \"1\", \"parallelism.dp\": \"1\", "
                      "\"training.global_batch\": \"32\", \"calibration.host_microbatch\": \"7.87ms\"}"),
            std::string::npos)
      << json;
  EXPECT_NE(
      report.find(
          "--set cluster.nodes=1 --set cluster.gpus_per_node=1 --set cluster.fabric.hosts_per_leaf=1 "
          "--set parallelism.dp=1 --set training.global_batch=32 --set calibration.host_microbatch=7.87ms"),
      std::string::npos)
      << report;
  EXPECT_NE(json.find("\"change_s\": 4.000000000e-03"), std::string::npos) << json;
}

TEST(Sensitivity, AScenarioWithJobsIsRefused) {
  const std::string jobs = test::scenario_text("two-jobs.yaml");
  EXPECT_THROW((void)run_sensitivity(parse_scenario(jobs, "two-jobs.yaml"), jobs, {}, 1), ScenarioError);
}

}  // namespace
}  // namespace tessera::cli
