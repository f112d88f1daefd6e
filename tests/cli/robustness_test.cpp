// Issue 17, "Reliability under hostile and huge inputs": values that used to
// wrap, crash or be accepted silently are one-line errors naming the key.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/cli/args.hpp"
#include "tessera/cli/progress.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/study/pipeline.hpp"
#include "test_scenarios.hpp"

using namespace tessera;
using namespace tessera::cli;
using tessera::cli::test::error_of;
using tessera::cli::test::scenario_text;

namespace {


std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return text.replace(pos, from.size(), to);
}

/// The ScenarioError of loading `text` with `overrides`, or "no error".

/// The default scenario on a fat-tree (for the fat-tree keys) without dp.
std::string fat_tree_text() {
  std::string t = replaced(scenario_text("default.yaml"),
                           "    type: leaf-spine\n    hosts_per_leaf: 8\n    spines: 8\n",
                           "    type: fat-tree\n    k: 8\n    tiers: 3\n    pods: 8\n    oversubscription: 1\n"
                           "    core_bandwidth: 800Gbps\n    core_latency: 700ns\n");
  return replaced(t, "  dp: 16\n", "  tp: 1\n  pp: 1\n  virtual_stages: 1\n") +
         "collectives:\n  chunks: 1\n";
}

}  // namespace

// Integers held as int were narrowed with a cast: cluster.nodes 4294967298
// ran as 2 nodes. Every one is range-checked before narrowing.
TEST(Robustness, IntKeysAreRangeCheckedBeforeNarrowing) {
  const std::string leaf_spine = scenario_text("default.yaml");
  const std::string fat_tree = fat_tree_text();
  const std::string inline_gpu = replaced(leaf_spine, "gpu: H100-SXM",
                                          "gpu: {name: X, fp32_peak: 50TFLOPS, tensor_peak: 800TFLOPS, "
                                          "memory_bandwidth: 3TB/s, sms: 100, l2_cache: 40MiB, memory: 96GiB}");
  const std::string hcas = replaced(leaf_spine, "gpus_per_node: 8\n", "gpus_per_node: 8\n  hcas_per_node: 8\n");
  const std::vector<std::pair<std::string, const std::string*>> keys = {
      {"cluster.nodes", &leaf_spine},
      {"cluster.gpus_per_node", &leaf_spine},
      {"cluster.hcas_per_node", &hcas},
      {"cluster.gpu.sms", &inline_gpu},
      {"cluster.fabric.hosts_per_leaf", &leaf_spine},
      {"cluster.fabric.spines", &leaf_spine},
      {"cluster.fabric.k", &fat_tree},
      {"cluster.fabric.tiers", &fat_tree},
      {"cluster.fabric.pods", &fat_tree},
      {"cluster.fabric.oversubscription", &fat_tree},
      {"parallelism.dp", &leaf_spine},
      {"parallelism.tp", &fat_tree},
      {"parallelism.pp", &fat_tree},
      {"parallelism.virtual_stages", &fat_tree},
      {"collectives.chunks", &fat_tree},
  };
  for (const auto& [key, text] : keys) {
    ASSERT_EQ(error_of(*text), "no error") << key;
    // 2^32 + 2 (was 2 after the cast) and a value beyond int64.
    for (const std::string value : {"4294967298", "99999999999999999999"}) {
      EXPECT_EQ(
          error_of(*text, {Override{key, value}}),
          fmt::format("s.yaml (--set {0}): {0}: must be between 1 and 2147483647, got {1}", key, value));
    }
  }
  // Keys held in int64 are checked against int64's range, not wrapped.
  EXPECT_EQ(error_of(leaf_spine, {Override{"training.micro_batch", "9223372036854775808"}}),
            "s.yaml (--set training.micro_batch): training.micro_batch: must be between 1 and "
            "9223372036854775807, got 9223372036854775808");
}

// tp x pp overflowed int: SIGFPE (x % 0) without dp, a wrong product with it.
TEST(Robustness, TpTimesPpDoesNotOverflow) {
  const std::vector<Override> huge{{"parallelism.tp", "65536"}, {"parallelism.pp", "65536"}};
  // (the --set tp named, then the message)
  const std::string msg = error_of(fat_tree_text(), huge);
  EXPECT_EQ(msg,
            "s.yaml (--set parallelism.tp): parallelism.tp: tp x pp (65536 x 65536 = 4294967296) does not "
            "divide the 16 GPUs (dp, not given, would be the GPUs over tp x pp)");
  EXPECT_NE(error_of(scenario_text("default.yaml"), huge)
                .find("parallelism.dp: dp x tp x pp (16 x 65536 x 65536 = 68719476736) must equal the number of "
                      "GPUs (16)"),
            std::string::npos);
}

TEST(Robustness, GpuCountMustFitInt) {
  EXPECT_EQ(error_of(scenario_text("default.yaml"),
                     {{"cluster.nodes", "65536"}, {"cluster.gpus_per_node", "65536"}}),
            "s.yaml (--set cluster.nodes): cluster.nodes: cluster.nodes x cluster.gpus_per_node = 65536 x 65536 = "
            "4294967296 GPUs; at most 2147483647 can be simulated");
}

// A 3-tier fat-tree of radix 3,000,000 overflowed pods x leaves_per_pod and
// crashed (SIGSEGV) when built; it is rejected when the scenario loads.
TEST(Robustness, HugeFatTreeRadixBuildsOnlyTheUsedPart) {
  // 1024 GPUs (one HCA each) on 300000-port switches: one leaf holds them
  // all, so one pod is built with its 150000 spines and no core switch
  // (the whole tree would be 300000 pods).
  const Scenario s =
      parse_scenario(scenario_text("gpt3-175b.yaml"), "s.yaml", {{"cluster.fabric.k", "300000"}});
  const auto topo = build_topology(s);
  EXPECT_EQ(topo.count(topology::VertexKind::Leaf), 1);
  EXPECT_EQ(topo.count(topology::VertexKind::Spine), 150000);
  EXPECT_EQ(topo.count(topology::VertexKind::Core), 0);
  EXPECT_NE(error_of(scenario_text("default.yaml"), {{"cluster.fabric.spines", "2147483647"}})
                .find("cluster.fabric.spines: 2 leaves x 2147483647 spines and 16 GPUs need more than"),
            std::string::npos);
}

// 2 x nic_latency (collectives.auto_latency's default) overflowed int64
// picoseconds; the run then failed with "event scheduled in the past".
TEST(Robustness, TimeOverflowWhileLoadingNamesTheKey) {
  EXPECT_EQ(error_of(scenario_text("default.yaml"), {{"cluster.nic_latency", "9000000s"}}),
            "s.yaml (--set cluster.nic_latency): cluster.nic_latency: time overflow: 9000000s x 2 does not fit in "
            "64-bit picoseconds (at most about 106 days)");
  // A time that does not fit at all is a bad unit string.
  EXPECT_NE(error_of(scenario_text("default.yaml"), {{"cluster.nic_latency", "9223373s"}})
                .find("cluster.nic_latency: invalid time '9223373s': value too large"),
            std::string::npos);
}

// training.micro_batch = 10^9 wrapped the iteration time (exit 0, a
// negative compute time); simulated-time overflow now names the keys.
TEST(Robustness, TimeOverflowWhileSimulatingNamesTheKeys) {
  const std::string text = scenario_text("default.yaml");
  const Scenario big_batch = parse_scenario(text, "s.yaml", {{"training.micro_batch", "1000000000"}});
  try {
    (void)simulate_scenario(big_batch);
    FAIL() << "no ScenarioError";
  } catch (const ScenarioError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(
        msg.rfind("s.yaml: training.micro_batch, training.seq_len, training.global_batch, model.hidden, "
                  "model.layers: one iteration (1000000000 x 1024 tokens per micro-batch, one micro-batch "
                  "per replica, through 36 layers of hidden 1280) cannot be simulated: time overflow: ",
                  0),
        0U)
        << msg;
  }
  // A GPU spec warned about as no GPU's (10^6 SMs at an H100's peak: the
  // tile model's per-SM rate a millionth of it) is named beside them
  // (helper 114: only the workload's keys were).
  const Scenario many_sms = parse_scenario(text, "s.yaml", {{"cluster.gpu.sms", "1000000"}});
  try {
    (void)simulate_scenario(many_sms);
    FAIL() << "no ScenarioError";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(
                  "s.yaml: training.micro_batch, training.seq_len, training.global_batch, model.hidden, "
                  "model.layers (or cluster.gpu.sms, warned about as no GPU's): one iteration ",
                  0),
              0U)
        << e.what();
  }
  // Only the keys that change kernel times: a memory capacity warned about
  // as no GPU's too (1 GB, under a P4's 8) is not named.
  const Scenario small_memory =
      parse_scenario(text, "s.yaml", {{"cluster.gpu.sms", "1000000"}, {"cluster.gpu.memory", "1GB"}});
  EXPECT_EQ(small_memory.suspect_gpu_keys, std::vector<std::string>{"cluster.gpu.sms"});
  EXPECT_TRUE(std::any_of(small_memory.warnings.begin(), small_memory.warnings.end(),
                          [](const std::string& w) { return w.rfind("cluster.gpu.memory = 1 GB", 0) == 0; }));
  try {
    (void)simulate_scenario(small_memory);
    FAIL() << "no ScenarioError";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers (or cluster.gpu.sms, warned about as no GPU's): one "),
              std::string::npos)
        << e.what();
  }
  // A latency of weeks fits once, but not summed over an iteration: named as the cause.
  const Scenario slow_link = parse_scenario(text, "s.yaml", {{"cluster.nic_latency", "4000000s"}});
  try {
    (void)simulate_scenario(slow_link);
    FAIL() << "no ScenarioError";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("s.yaml (--set cluster.nic_latency): cluster.nic_latency: 4000000s "
                                          "cannot be simulated: time overflow: ",
                                          0),
              0U)
        << e.what();
  }
}

// A transfer that cannot finish in the simulated time range (a NIC at 1
// bps) names the cluster's slowest link; it printed the ~46-day cap as the
// iteration (4e9 ms).
// The ns-3 backend says the same, before any packet is sent (helper 96: its
// packets never arrived, a simulation error with exit code 1).
TEST(Robustness, TransferTooSlowToSimulateNamesTheSlowestLink) {
  const std::string text = scenario_text("default.yaml");
  std::vector<std::vector<Override>> cases = {{{"cluster.nic_bandwidth", "1bps"}}};
#ifdef TESSERA_HAVE_NS3
  cases.push_back({{"cluster.nic_bandwidth", "1bps"}, {"backend", "ns3"}});
  cases.push_back({{"cluster.nic_bandwidth", "1bps"}, {"backend", "ns3"}, {"ns3.model", "point-to-point"}});
#endif
  for (const std::vector<Override>& o : cases) {
    const Scenario slow_nic = parse_scenario(text, "s.yaml", o);
    try {
      (void)simulate_scenario(slow_nic);
      ADD_FAILURE() << "no ScenarioError with " << o.back().path << "=" << o.back().value;
    } catch (const ScenarioError& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("s.yaml (--set cluster.nic_bandwidth): cluster.nic_bandwidth: 1bps cannot carry "
                          "this iteration: a transfer of ",
                          0),
                0U)
          << msg;
      EXPECT_NE(msg.find("would take more than 46 days of simulated time: the slowest link of its path, "),
                std::string::npos)
          << msg;
      EXPECT_NE(msg.find(", carries 1 bit/s (is a bandwidth's unit wrong?)"), std::string::npos) << msg;
    }
  }
  // A degraded cable is named as such, not the slowest key (10 Mbps spines
  // carry the iteration; at 1e-6 of it, 10 bit/s, they do not).
  std::string spines;
  for (int i = 0; i < 8; ++i) spines += fmt::format("{}leaf0-spine{}", i == 0 ? "" : ", ", i);
  const Scenario degraded =
      parse_scenario(text + "failures:\n  degraded: [" + spines + "]\n  degraded_rate: 0.000001\n", "s.yaml",
                     {{"cluster.fabric.spine_bandwidth", "10Mbps"}});
  try {
    (void)simulate_scenario(degraded);
    FAIL() << "no ScenarioError";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("s.yaml:34:18: failures.degraded_rate: 1e-06 leaves a degraded "
                                          "cable too slow for this iteration: ",
                                          0),
              0U)
        << e.what();
  }
}

// yaml-cpp keeps the first of two equal keys and ignores a second document;
// a list used as a key threw an internal error. All are one-line errors now.
TEST(Robustness, YamlKeysAreNamesGivenOnce) {
  const std::string text = scenario_text("default.yaml");
  EXPECT_EQ(error_of("name: a\nname: b\n"), "s.yaml:2:1: name: duplicate key (given twice in the same mapping)");
  const std::string nested = replaced(text, "  nodes: 2\n", "  nodes: 2\n  nodes: 4\n");
  EXPECT_NE(error_of(nested).find(": cluster.nodes: duplicate key (given twice in the same mapping)"),
            std::string::npos);
  EXPECT_EQ(error_of("? [a, b]\n: 1\n"), "s.yaml:1:3: (top level): a key must be a plain name, not a list or mapping");
  EXPECT_NE(error_of(text + "---\nname: other\n").find(": a second YAML document: a scenario is one document"),
            std::string::npos);
  // A trailing '---' with nothing after it is harmless.
  EXPECT_EQ(error_of(text + "---\n"), "no error");
  // Quoted numbers are numbers (documented in docs/scenarios.md).
  EXPECT_EQ(parse_scenario(replaced(text, "  nodes: 2\n", "  nodes: '2'\n"), "s.yaml").cluster.nodes, 2);
}

// --set creates a section the file does not have; its keys are still checked.
TEST(Robustness, SetCreatesMissingSections) {
  const std::string text = scenario_text("default.yaml");
  ASSERT_EQ(text.find("collectives:"), std::string::npos);
  const Scenario s = parse_scenario(text, "s.yaml", {{"collectives.algorithm", "tree"}, {"outputs.json", "r.json"}});
  EXPECT_EQ(s.outputs.json, "r.json");
  EXPECT_EQ(to_string(s.collectives.algorithm), "tree");
  EXPECT_EQ(error_of(text, {{"collectives.algoritm", "tree"}}).find("s.yaml (--set collectives.algoritm): "
                                                                    "collectives.algoritm: unknown key"),
            0U);
  // A key that is a value, not a section, is still not one (a GPU preset's
  // name is: the preset with that spec changed, Scenario.PresetWithChangedSpecs).
  EXPECT_EQ(error_of(text, {{"training.micro_batch.x", "1"}}),
            "s.yaml: --set training.micro_batch.x: 'training.micro_batch' is not a mapping in this scenario");
  EXPECT_EQ(error_of(text, {{"cluster.gpu.sms", "1"}}), "no error");
}

// The a-priori work estimate that refuses huge scenarios must not refuse
// real ones: it is within a few times the transfers actually simulated
// (rings where the simulation may pick hierarchical or tree algorithms), on
// plans with data, tensor, pipeline and expert parallelism.
TEST(Robustness, WorkEstimateIsWithinAFewTimesTheSimulated) {
  for (const char* name : {"default.yaml", "schedules.yaml", "gpt3-175b.yaml", "mixtral-ep.yaml"}) {
    const std::string text = scenario_text(name);
    const Scenario s = parse_scenario(text, name);
    const WorkEstimate w = estimate_work(s);
    const Simulation sim = simulate_scenario(s, nullptr, nullptr, false);
    const auto actual = static_cast<double>(sim.result.transfers);
    EXPECT_GE(w.transfers(), actual / 3) << name;
    EXPECT_LE(w.transfers(), 3 * actual) << name;
    EXPECT_LT(w.events(), kMaxSimulatedEvents) << name;
  }
  // A bucket holds at least a layer's gradients (it closes at the first
  // layer end past the bucket size): a 100 B bucket size runs one bucket
  // per layer, and was refused as 7.5e11 events, one bucket per 100 B.
  {
    const Scenario tiny =
        parse_scenario(scenario_text("default.yaml"), "default.yaml",
                       {{"parallelism.grad_sync", "overlapped"}, {"parallelism.bucket_size", "100B"}});
    const WorkEstimate w = estimate_work(tiny);
    const auto actual =
        static_cast<double>(simulate_scenario(tiny, nullptr, nullptr, false).result.transfers);
    EXPECT_GE(w.transfers(), actual / 3);
    EXPECT_LE(w.transfers(), 3 * actual);
  }
  // The GPT-3 scenario at its real global batch, and the 30,720-GPU
  // benchmark of docs/benchmarks.md, are below the limit.
  const std::string gpt3 = scenario_text("gpt3-175b.yaml");
  EXPECT_LT(estimate_work(parse_scenario(gpt3, "g.yaml", {{"training.global_batch", "1536"}})).events(),
            kMaxSimulatedEvents / 4);
  const Scenario big = parse_scenario(gpt3, "g.yaml",
                                      {{"cluster.nodes", "3840"}, {"parallelism.dp", "240"},
                                       {"training.global_batch", "3840"}, {"cluster.fabric.k", "64"}});
  EXPECT_LT(estimate_work(big).events(), kMaxSimulatedEvents);
}

// Progress of a run in a log (stderr not a terminal): lines with the share of
// tasks done (compute tasks and each rank's part in a collective), the last
// one saying the bubble run follows; the
// forwarded observer (here none) and the result are unaffected.
TEST(Progress, LogLinesCountComputeTasksAndNameTheSecondRun) {
  const Scenario s = parse_scenario(scenario_text("default.yaml"), "default.yaml");
  std::ostringstream err;
  Simulation with;
  {
    ProgressObserver progress(nullptr, err, false, std::chrono::milliseconds(0), std::chrono::milliseconds(0));
    with = simulate_scenario(s, &progress);
  }
  const Simulation without = simulate_scenario(s);
  EXPECT_EQ(with.result.makespan, without.result.makespan);
  const std::string log = err.str();
  EXPECT_EQ(log.rfind("tessera: simulating: ", 0), 0U) << log;
  // (16 ranks x 80 compute tasks each in this plan: 78 kernels' tasks, and
  // the micro-batch's data step with its sync; plus each rank's collectives)
  const auto at = log.find("% of ");
  ASSERT_NE(at, std::string::npos) << log;
  const std::size_t tasks = std::stoul(log.substr(at + 5));
  EXPECT_GT(tasks, 1280U);
  EXPECT_LT(tasks, 2 * 1280U);
  EXPECT_NE(log.find("% of " + std::to_string(tasks) + " tasks after "), std::string::npos) << log;
  // (with the simulated time reached: the iteration's end by the last line)
  EXPECT_NE(log.find(fmt::format(", {:.1f} ms simulated\n", without.result.makespan.ms())), std::string::npos)
      << log;
  EXPECT_NE(log.find("tessera: simulated the iteration in "), std::string::npos) << log;
  EXPECT_EQ(log.back(), '\n');
}

// A backend's heartbeat (ns-3, during a long collective) redraws the line
// with the simulated time, though no task ended, and is forwarded.
TEST(Progress, HeartbeatRedrawsWithTheSimulatedTime) {
  struct Inner final : engine::ExecutionObserver {
    std::vector<Time> beats;
    void on_heartbeat(Time now) override { beats.push_back(now); }
  };
  parallelism::TaskGraph g;
  parallelism::Program prog;
  parallelism::Task c;
  c.name = "fwd";
  c.kind = parallelism::TaskKind::Compute;
  c.duration = Time::from_ms(5);
  prog.tasks.push_back(c);
  g.add_rank(g.add_program(std::move(prog)), {});
  std::ostringstream err;
  Inner inner;
  {
    ProgressObserver progress(&inner, err, false, std::chrono::milliseconds(0), std::chrono::milliseconds(0));
    progress.on_start(g);
    progress.on_heartbeat(Time::from_us(1'300));
    progress.on_heartbeat(Time::from_us(2'500));
  }
  EXPECT_EQ(err.str(),
            "tessera: simulating: 0% of 1 tasks after 0 s, 1.3 ms simulated\n"
            "tessera: simulating: 0% of 1 tasks after 0 s, 2.5 ms simulated\n");
  EXPECT_EQ(inner.beats, (std::vector<Time>{Time::from_us(1'300), Time::from_us(2'500)}));
}

// Progress of a job of many items (sweep points, search candidates): on a
// terminal a bar redrawn on every item and ended by finish(); in a log a line
// per `log_every` (here 0: every item), none when the interval has not passed.
TEST(CountProgress, BarOnATerminalLinesInALog) {
  {
    std::ostringstream err;
    CountProgress bar("sweep", "points", 4, 1, err, true);
    bar.advance();
    bar.finish();
    bar.advance();  // after finish: nothing
    EXPECT_EQ(err.str(), "\rsweep [#######                       ] 1/4 points"
                         "\rsweep [###############               ] 2/4 points\n");
  }
  {
    std::ostringstream err;
    CountProgress log("search", "plans simulated", 3, 0, err, false, std::chrono::milliseconds(0));
    for (int i = 0; i < 3; ++i) log.advance();
    log.finish();
    const std::string text = err.str();
    EXPECT_EQ(text.rfind("tessera: search: 1/3 plans simulated after ", 0), 0U) << text;
    EXPECT_NE(text.find("tessera: search: 3/3 plans simulated after "), std::string::npos) << text;
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);
    EXPECT_EQ(text.find('\r'), std::string::npos);
  }
  {
    std::ostringstream err;
    CountProgress quiet("search", "plans simulated", 3, 0, err, false);  // a line every 10 s
    for (int i = 0; i < 3; ++i) quiet.advance();
    quiet.finish();
    EXPECT_EQ(err.str(), "");
  }
}

TEST(DidYouMean, UnknownOptionsAndKeysGetTheHint) {
  ArgParser p("tessera run");
  p.option("set").option("trace").flag("json");
  try {
    p.parse({"--jsn"});
    ADD_FAILURE();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(),
                 "tessera run: unknown option --jsn, did you mean --json? (see 'tessera run --help')");
  }
  try {
    p.parse({"--fast"});
    ADD_FAILURE();
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "tessera run: unknown option --fast (see 'tessera run --help')");
  }
  const std::string text = scenario_text("default.yaml");
  EXPECT_NE(error_of(text, {{"parallelism.scheudle", "gpipe"}})
                .find("parallelism.scheudle: unknown key, did you mean 'schedule'? (known here: "),
            std::string::npos)
      << error_of(text, {{"parallelism.scheudle", "gpipe"}});
  // Nothing near: the list alone, as before.
  EXPECT_NE(error_of(text, {{"parallelism.speed", "1"}}).find("parallelism.speed: unknown key (known here: "),
            std::string::npos);
}
