// Several jobs on one fabric (`jobs:`): placement, the merged graph, and
// slowdowns that can be checked by hand.
#include "tessera/study/jobs.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "tessera/cli/report.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/study/pipeline.hpp"
#include "test_scenarios.hpp"

using namespace tessera;
using namespace tessera::cli;
using tessera::cli::test::error_of;
using tessera::cli::test::scenario_text;

namespace {

/// Per-job link bytes add up to each link's total; packed placement puts no
/// job byte on a leaf-spine link, spread placement some.
void expect_job_link_bytes(const JobsOutcome& o, const topology::Topology& topo, const std::string& placement) {
  ASSERT_EQ(o.link_bytes.size(), topo.links().size());
  double spine_total = 0.0;
  for (std::size_t l = 0; l < o.link_bytes.size(); ++l) {
    double sum = 0.0;
    for (const auto& j : o.jobs) sum += j.link_bytes.at(l);
    EXPECT_EQ(sum, o.link_bytes[l]) << placement << " link " << l;
    if (topo.tier(static_cast<topology::LinkId>(l)) == topology::LinkTier::LeafSpine) {
      for (const auto& j : o.jobs) {
        if (placement == "packed") {
          EXPECT_EQ(j.link_bytes[l], 0.0) << j.name << " link " << l;
        }
      }
      spine_total += o.link_bytes[l];
    }
  }
  if (placement == "packed") {
    EXPECT_EQ(spine_total, 0.0);
  } else {
    EXPECT_GT(spine_total, 0.0);
  }
}

}  // namespace

TEST(Jobs, PlacementPackedSpreadAndExplicit) {
  const std::string text = scenario_text("two-jobs.yaml");
  const Scenario spread = parse_scenario(text, "two-jobs.yaml");
  ASSERT_EQ(spread.jobs.size(), 2U);
  EXPECT_EQ(spread.jobs[0].nodes, (std::vector<int>{0, 2}));
  EXPECT_EQ(spread.jobs[1].nodes, (std::vector<int>{1, 3}));
  EXPECT_EQ(spread.jobs[0].scenario.gpus(), 16);
  EXPECT_EQ(spread.gpus(), 32);
  const Scenario packed = parse_scenario(text, "two-jobs.yaml", {{"placement", "packed"}});
  EXPECT_EQ(packed.jobs[0].nodes, (std::vector<int>{0, 1}));
  EXPECT_EQ(packed.jobs[1].nodes, (std::vector<int>{2, 3}));
  // An explicit list is kept; the job by count takes the free nodes.
  std::string explicit_text = text;
  explicit_text.replace(explicit_text.find("  - name: job-a\n    nodes: 2"), 28, "  - name: job-a\n    nodes: [3, 0]");
  const Scenario ex = parse_scenario(explicit_text, "two-jobs.yaml", {{"placement", "packed"}});
  EXPECT_EQ(ex.jobs[0].nodes, (std::vector<int>{3, 0}));
  EXPECT_EQ(ex.jobs[1].nodes, (std::vector<int>{1, 2}));
}

TEST(Jobs, BadInputIsOneLineNamingTheNumbers) {
  const std::string text = scenario_text("two-jobs.yaml");
  EXPECT_EQ(error_of(text, {{"cluster.nodes", "3"}}),
            "s.yaml:34:3: jobs: the jobs need 4 nodes (4 placed by count, 3 free of cluster.nodes = 3)");
  // A job's own error names the job and its nodes (one node: "node").
  std::string one = text;
  one.replace(one.rfind("    nodes: 2"), 12, "    nodes: 1\n    parallelism:\n      dp: 16");
  EXPECT_NE(error_of(one).find(" (job 1 'job-b', on 1 node: its cluster.nodes)"), std::string::npos)
      << error_of(one);
  std::string overlap = text;
  overlap.replace(overlap.find("    nodes: 2"), 12, "    nodes: [1, 2]");
  overlap.replace(overlap.rfind("    nodes: 2"), 12, "    nodes: [2, 3]");
  EXPECT_NE(error_of(overlap).find("jobs[1].nodes[0]: node 2 is already job-a's"), std::string::npos)
      << error_of(overlap);
  // Outputs run cannot write for several jobs are refused, as --trace and
  // --links are, not dropped.
  EXPECT_EQ(error_of(text, {{"outputs.trace", "t.json"}}),
            "s.yaml (--set outputs.trace): outputs.trace: not available for a scenario with jobs "
            "(outputs.json is)");
  EXPECT_NE(error_of(text + "outputs:\n  links: l.csv\n")
                .find("outputs.links: not available for a scenario with jobs"),
            std::string::npos);
  // Two jobs of one name would be two indistinguishable rows of the report.
  std::string same_name = text;
  same_name.replace(same_name.find("  - name: job-b"), 15, "  - name: job-a");
  EXPECT_NE(error_of(same_name).find("jobs[1].name: 'job-a' is also jobs[0]'s name (each job needs its own)"),
            std::string::npos)
      << error_of(same_name);
  std::string out_of_range = text;
  out_of_range.replace(out_of_range.find("    nodes: 2"), 12, "    nodes: [7]");
  EXPECT_NE(error_of(out_of_range).find("jobs[0].nodes[0]: 7 is out of range 0..3"), std::string::npos);
  std::string unknown = text;
  unknown.replace(unknown.find("    nodes: 2"), 12, "    nodes: 2\n    gpus: 8");
  EXPECT_NE(error_of(unknown).find(
                "jobs[0].gpus: unknown key (a job has name, nodes, model, training, parallelism)"),
            std::string::npos)
      << error_of(unknown);
  std::string near = text;  // a near miss of a job's key is named
  near.replace(near.find("    nodes: 2"), 12, "    nodes: 2\n    modle: gpt2-large");
  EXPECT_NE(error_of(near).find("jobs[0].modle: unknown key, did you mean 'model'? (a job has name, "),
            std::string::npos)
      << error_of(near);
  EXPECT_NE(error_of(text, {{"placement", "scattered"}}).find("placement: expected packed, spread or random"),
            std::string::npos);
  // A job's own plan is checked against its own GPUs.
  EXPECT_NE(error_of(text, {{"parallelism.dp", "32"}}).find("parallelism.dp"), std::string::npos);
  // An empty list from --set names the --set (helper 127: a bogus 1:1).
  EXPECT_EQ(error_of(text, {{"jobs", "[]"}}), "s.yaml (--set jobs): jobs: expected a non-empty list of jobs");
  // mixed_gpus is refused at its line (helper 127: the file alone).
  const std::string mixed = text + "mixed_gpus:\n  gpu: A100-80GB\n  nodes: 1\n";
  const std::string line = std::to_string(std::count(text.begin(), text.end(), '\n') + 1);
  EXPECT_EQ(
      error_of(mixed),
      "s.yaml:" + line + ":1: mixed_gpus: not available with jobs (each job runs on the cluster's gpu)");
}

// One job's keys from the command line (helper 81: `--set jobs[0].nodes=3`
// was an unknown key `jobs[0]`): an element of the jobs list by index; a
// job's section that --set creates starts as the top level's, changed.
TEST(Jobs, SetReachesOneJobByIndex) {
  const std::string text = scenario_text("two-jobs.yaml");
  const Scenario s = parse_scenario(text, "s.yaml",
                                    {{"cluster.nodes", "6"},
                                     {"jobs[0].nodes", "4"},
                                     {"jobs[0].parallelism.dp", "auto"},
                                     {"jobs[1].training.micro_batch", "4"}});
  ASSERT_EQ(s.jobs.size(), 2U);
  EXPECT_EQ(s.jobs[0].scenario.gpus(), 32);
  EXPECT_EQ(s.jobs[0].scenario.plan.dp, 32);
  EXPECT_EQ(s.jobs[1].scenario.gpus(), 16);
  EXPECT_EQ(s.jobs[1].scenario.workload.micro_batch, 4);
  // The rest of job-b's training is the top level's (seq_len, dtype...).
  EXPECT_EQ(s.jobs[1].scenario.workload.seq_len, s.jobs[0].scenario.workload.seq_len);
  EXPECT_NE(s.jobs[0].scenario.workload.micro_batch, 4);
  EXPECT_EQ(error_of(text, {{"jobs[2].nodes", "1"}}),
            "s.yaml: --set jobs[2].nodes: 'jobs[2]': the scenario's jobs has 2 elements (0..1)");
  EXPECT_EQ(
      error_of(text, {{"jobs[x].nodes", "1"}}),
      "s.yaml: --set jobs[x].nodes: 'jobs[x]': write the index as a plain whole number (jobs[0], jobs[1], "
      "...)");
  // (a scenario without jobs says so; helper 84)
  EXPECT_EQ(error_of(scenario_text("minimal.yaml"), {{"jobs[0].nodes", "1"}}),
            "s.yaml: --set jobs[0].nodes: 'jobs[0]': this scenario has no 'jobs' list");
  EXPECT_EQ(error_of(text, {{"jobs[0].nodes", "abc"}}),
            "s.yaml (--set jobs[0].nodes): jobs[0].nodes: expected an integer in 1..4");
  // Whatever the order given, a job section --set creates holds every
  // top-level --set (helper 82: it held those given before it only), and
  // no warning says a top-level --set missed it.
  const Scenario before =
      parse_scenario(text, "s.yaml", {{"training.micro_batch", "4"}, {"jobs[0].training.seq_len", "512"}});
  const Scenario after =
      parse_scenario(text, "s.yaml", {{"jobs[0].training.seq_len", "512"}, {"training.micro_batch", "4"}});
  for (const Scenario* sc : {&before, &after}) {
    EXPECT_EQ(sc->jobs[0].scenario.workload.micro_batch, 4);
    EXPECT_EQ(sc->jobs[0].scenario.workload.seq_len, 512);
    EXPECT_TRUE(sc->warnings.empty()) << sc->warnings.front();
  }
  // Indices as they are named (not jobs[01]); a list element is not set
  // whole.
  EXPECT_NE(
      error_of(text, {{"jobs[01].nodes", "1"}}).find("'jobs[01]': write the index as a plain whole number"),
      std::string::npos);
  EXPECT_EQ(error_of(text, {{"jobs[0]", "3"}}),
            "s.yaml: --set jobs[0]: 'jobs[0]' is a job: set one of its keys (jobs[0].nodes, "
            "jobs[0].training.micro_batch, ...)");
  EXPECT_EQ(error_of(text, {{"jobs[0].nodes[0]", "1"}}),
            "s.yaml: --set jobs[0].nodes[0]: 'nodes[0]' is an item of a list: set the list whole "
            "(jobs[0].nodes=[...])");
  // A job's own error names the option that set its key.
  EXPECT_NE(error_of(text, {{"jobs[1].parallelism.dp", "8"}}).find("s.yaml (--set jobs[1].parallelism.dp): "),
            std::string::npos)
      << error_of(text, {{"jobs[1].parallelism.dp", "8"}});
}

// A top-level --set of a section a job has its own of does not reach that
// job: said (helper 81: job-a kept its dp silently).
TEST(Jobs, SetShadowedByAJobsOwnSectionIsWarned) {
  std::string text = scenario_text("two-jobs.yaml");
  text.replace(text.find("    nodes: 2"), 12, "    nodes: 2\n    parallelism:\n      dp: 16");
  const Scenario s =
      parse_scenario(text, "s.yaml", {{"parallelism.dp", "16"}, {"training.micro_batch", "4"}});
  EXPECT_EQ(s.warnings,
            std::vector<std::string>{
                "--set parallelism.dp: jobs[0] (job-a) has a parallelism section of its own, which this "
                "setting does not change (set jobs[i].parallelism.dp for a job's own)"});
  // Not where the jobs list is replaced by one without the section, nor
  // where the job's own key is set too (helper 84).
  EXPECT_TRUE(
      parse_scenario(text, "s.yaml",
                     {{"parallelism.dp", "16"}, {"jobs", "[{name: a, nodes: 2}, {name: b, nodes: 2}]"}})
          .warnings.empty());
  EXPECT_TRUE(parse_scenario(text, "s.yaml", {{"parallelism.dp", "16"}, {"jobs[0].parallelism.dp", "16"}})
                  .warnings.empty());
}

// `placement: random`: a seeded shuffle of the free nodes, dealt out in job
// order. Same seed, same nodes; another seed, other nodes; never a node twice.
TEST(Jobs, RandomPlacementIsSeededAndDeterministic) {
  // splitmix64 from seed 1 shuffling {0, 1, 2, 3} (Fisher-Yates from the
  // end, k = next() mod i) gives 2, 0, 3, 1 (checked with an independent
  // Python splitmix64): job-a takes {2, 0}, job-b {3, 1}, each sorted.
  const auto one = study::random_placement({0, 1, 2, 3}, {2, 2}, 1);
  EXPECT_EQ(one, (std::vector<std::vector<int>>{{0, 2}, {1, 3}}));
  const auto again = study::random_placement({0, 1, 2, 3}, {2, 2}, 1);
  EXPECT_EQ(one, again);
  std::set<std::vector<std::vector<int>>> seen;
  for (std::uint64_t seed = 0; seed < 64; ++seed) {
    const auto p = study::random_placement({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {3, 1, 4}, seed);
    ASSERT_EQ(p.size(), 3U);
    EXPECT_EQ(p[0].size(), 3U);
    EXPECT_EQ(p[1].size(), 1U);
    EXPECT_EQ(p[2].size(), 4U);
    std::set<int> nodes;
    for (const auto& job : p) {
      EXPECT_TRUE(std::is_sorted(job.begin(), job.end()));
      for (int n : job) {
        EXPECT_GE(n, 0);
        EXPECT_LE(n, 9);
        EXPECT_TRUE(nodes.insert(n).second) << "node " << n << " twice, seed " << seed;
      }
    }
    seen.insert(p);
  }
  EXPECT_GT(seen.size(), 50U);  // 64 seeds: (almost) all different placements
  EXPECT_NE(study::random_placement({0, 1, 2, 3, 4, 5, 6, 7}, {4, 4}, 1),
            study::random_placement({0, 1, 2, 3, 4, 5, 6, 7}, {4, 4}, 2));
  EXPECT_THROW((void)study::random_placement({0, 1}, {2, 1}, 1), InputError);

  // Through the loader: explicit lists are kept, the rest is shuffled.
  std::string text = scenario_text("two-jobs.yaml");
  text.replace(text.find("cluster:\n  nodes: 4\n"), 20, "cluster:\n  nodes: 16\n");
  const Scenario a = parse_scenario(text, "t.yaml", {{"placement", "{policy: random, seed: 7}"}});
  const Scenario b = parse_scenario(text, "t.yaml", {{"placement", "{policy: random, seed: 7}"}});
  const Scenario c = parse_scenario(text, "t.yaml", {{"placement", "{policy: random, seed: 8}"}});
  const Scenario d = parse_scenario(text, "t.yaml", {{"placement", "random"}});  // seed 1
  EXPECT_EQ(a.placement, "random");
  EXPECT_EQ(a.placement_seed, 7U);
  EXPECT_EQ(d.placement_seed, 1U);
  ASSERT_EQ(a.jobs.size(), 2U);
  EXPECT_EQ(a.jobs[0].nodes, b.jobs[0].nodes);
  EXPECT_EQ(a.jobs[1].nodes, b.jobs[1].nodes);
  EXPECT_TRUE(a.jobs[0].nodes != c.jobs[0].nodes || a.jobs[1].nodes != c.jobs[1].nodes);
  EXPECT_EQ(a.jobs[0].nodes, (std::vector<int>{6, 14}));  // shuffled: 14, 6, 4, 2, ...
  EXPECT_EQ(a.jobs[1].nodes, (std::vector<int>{2, 4}));
  EXPECT_EQ(c.jobs[0].nodes, (std::vector<int>{5, 12}));  // seed 8: 5, 12, 4, 1, ...
  std::string listed = text;
  listed.replace(listed.find("  - name: job-a\n    nodes: 2"), 28, "  - name: job-a\n    nodes: [3, 0]");
  const Scenario e = parse_scenario(listed, "t.yaml", {{"placement", "{policy: random, seed: 7}"}});
  EXPECT_EQ(e.jobs[0].nodes, (std::vector<int>{3, 0}));
  EXPECT_EQ(e.jobs[1].nodes,
            study::random_placement({1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {0, 2}, 7)[1]);

  // Bad input: one line naming the key.
  EXPECT_EQ(error_of(text, {{"placement", "{policy: random, seed: abc}"}}),
            "s.yaml (--set placement): placement.seed: expected an integer in 0..4294967295");
  EXPECT_EQ(error_of(text, {{"placement", "{policy: random, seed: -3}"}}),
            "s.yaml (--set placement): placement.seed: expected an integer in 0..4294967295");
  EXPECT_EQ(error_of(text, {{"placement", "{policy: random, seed: 2.5}"}}),
            "s.yaml (--set placement): placement.seed: expected an integer in 0..4294967295");
  EXPECT_EQ(error_of(text, {{"placement", "{policy: packed, seed: 3}"}}),
            "s.yaml (--set placement): placement.seed: a seed is only used by policy random");
  EXPECT_EQ(error_of(text, {{"placement", "{seed: 3}"}}),
            "s.yaml (--set placement): placement.policy: missing required key (packed, spread or random)");
  EXPECT_EQ(
      error_of(text, {{"placement", "{policy: random, sed: 3}"}}),
      "s.yaml (--set placement): placement.sed: unknown key, did you mean 'seed'? (placement has policy and "
      "seed)");
  EXPECT_EQ(error_of(text, {{"placement", "{policy: random, colour: 3}"}}),
            "s.yaml (--set placement): placement.colour: unknown key (placement has policy and seed)");
}

// Packed: each job under its own leaf, sharing no link: exactly as fast as
// alone. Spread: each job has one node per leaf and both all-reduce at the
// same instants through the same 4 up-links per leaf, so each gets half of
// them: exactly its time alone on a fabric with 2 spines.
TEST(Jobs, SlowdownsByHand) {
  const std::string text = scenario_text("two-jobs.yaml");
  const JobsOutcome packed = simulate_jobs(parse_scenario(text, "t.yaml", {{"placement", "packed"}}));
  for (const auto& j : packed.jobs) {
    EXPECT_EQ(j.shared, j.alone) << j.name;
    EXPECT_EQ(j.slowdown(), 0.0);
  }
  const JobsOutcome spread = simulate_jobs(parse_scenario(text, "t.yaml"));
  const JobsOutcome half = simulate_jobs(parse_scenario(text, "t.yaml", {{"cluster.fabric.spines", "2"}}));
  ASSERT_EQ(spread.jobs.size(), 2U);
  for (std::size_t j = 0; j < 2; ++j) {
    EXPECT_GT(spread.jobs[j].shared, spread.jobs[j].alone);
    EXPECT_EQ(spread.jobs[j].shared, half.jobs[j].alone) << j;
  }
  EXPECT_EQ(spread.makespan, spread.jobs[0].shared);
}

// Each job's split (compute, host, bubble, exposed communication) is the
// one tessera run gives the same job alone on a cluster of its own, and its
// parts fill the iteration alone and shared (both splits read one
// free-network run, so sharing moves only the exposed communication).
TEST(Jobs, EachJobsSplitIsTesseraRunsAndSharingAddsOnlyExposedComm) {
  const std::string text = scenario_text("two-jobs.yaml");
  // The same job alone: the top level without `jobs`, on its 2 nodes.
  std::string one = text.substr(0, text.find("\njobs:") + 1);
  one.replace(one.find("nodes: 4"), 8, "nodes: 2");
  one.erase(one.find("placement: spread\n"), 18);  // (a key of jobs only)
  const Simulation sim = simulate_scenario(parse_scenario(one, "one.yaml"));
  const IterationBreakdown single = breakdown(sim);
  ASSERT_GT(single.exposed_comm, Time::zero());
  ASSERT_GT(single.host, Time::zero());
  const JobsOutcome packed = simulate_jobs(parse_scenario(text, "t.yaml", {{"placement", "packed"}}));
  const JobsOutcome spread = simulate_jobs(parse_scenario(text, "t.yaml"));
  for (const JobsOutcome* o : {&packed, &spread}) {
    ASSERT_EQ(o->jobs.size(), 2U);
    for (const auto& j : o->jobs) {
      const IterationBreakdown alone = j.alone_breakdown();
      const IterationBreakdown shared = j.shared_breakdown();
      EXPECT_EQ(alone.compute + alone.host + alone.bubble + alone.exposed_comm, j.alone) << j.name;
      EXPECT_EQ(shared.compute + shared.host + shared.bubble + shared.exposed_comm, j.shared) << j.name;
      EXPECT_EQ(alone.compute, single.compute) << j.name;
      EXPECT_EQ(alone.host, single.host) << j.name;
      EXPECT_EQ(alone.bubble, single.bubble) << j.name;
    }
  }
  // Packed, each job under its own leaf is the single job, exposed
  // communication included; spread, the shared up-links add to it.
  EXPECT_EQ(packed.jobs[0].alone_breakdown().exposed_comm, single.exposed_comm);
  EXPECT_EQ(packed.jobs[0].shared_breakdown().exposed_comm, single.exposed_comm);
  EXPECT_GT(spread.jobs[0].shared_breakdown().exposed_comm, spread.jobs[0].alone_breakdown().exposed_comm);
  // A straggler node of job-a doubles its compute; job-b's is untouched.
  const JobsOutcome slow = simulate_jobs(
      parse_scenario(text, "t.yaml", {{"stragglers.nodes", "0"}, {"stragglers.slowdown", "2"}}));
  EXPECT_EQ(slow.jobs[0].alone_breakdown().compute, single.compute + single.compute);
  EXPECT_EQ(slow.jobs[1].alone_breakdown().compute, single.compute);
  // The report: the split per job, in ms, and the exposed share of the
  // shared iteration; --json: tessera run's keys per job.
  const Scenario s = parse_scenario(text, "t.yaml");
  const std::string t = format_jobs_text(s, spread);
  const auto& a = spread.jobs[0];
  const IterationBreakdown sa = a.shared_breakdown();
  EXPECT_NE(t.find(fmt::format(
                "\njob-a            {:>12.3f} {:>12.3f} {:>12.3f}   {:.3f} -> {:.3f} ({:.1f}% of the "
                "shared iteration)\n",
                sa.compute.ms(), sa.host.ms(), sa.bubble.ms(), a.alone_breakdown().exposed_comm.ms(),
                sa.exposed_comm.ms(), sa.tenths_of_percent()[3] / 10.0)),
            std::string::npos)
      << t;
  const std::string j = format_jobs_json(s, spread);
  EXPECT_NE(j.find(fmt::format(R"("slowdown": {:.6f}, "compute_time_s": {:.9e}, "host_time_s": {:.9e}, )"
                               R"("bubble_time_s": {:.9e}, "alone_exposed_comm_time_s": {:.9e}, )"
                               R"("exposed_comm_time_s": {:.9e}, "tokens_per_s")",
                               a.slowdown(), sa.compute.seconds(), sa.host.seconds(), sa.bubble.seconds(),
                               a.alone_breakdown().exposed_comm.seconds(), sa.exposed_comm.seconds())),
            std::string::npos)
      << j;
}

// Link bytes by job (flow backend): packed, each job stays under its own
// leaf, so neither has a byte on a leaf-spine link; spread, both cross the
// spines. On every link the jobs' bytes add up to the link's total, and a
// job's bytes are the ones it moves alone (bytes do not depend on timing).
TEST(Jobs, LinkBytesByJob) {
  const std::string text = scenario_text("two-jobs.yaml");
  for (const char* placement : {"packed", "spread"}) {
    const Scenario s = parse_scenario(text, "t.yaml", {{"placement", placement}});
    const topology::Topology topo = study::build_topology(s);
    const JobsOutcome o = simulate_jobs(s);
    ASSERT_TRUE(o.per_job_links);
    expect_job_link_bytes(o, topo, placement);
    for (const auto& j : o.jobs) {
      ASSERT_EQ(j.busiest_links.size(), study::kJobBusiestLinks) << j.name;
      for (std::size_t k = 0; k < j.busiest_links.size(); ++k) {
        const auto& b = j.busiest_links[k];
        EXPECT_EQ(b.bytes, j.link_bytes[static_cast<std::size_t>(b.link)]);
        if (k > 0) {
          EXPECT_GE(j.busiest_links[k - 1].utilization, b.utilization);
        }
        EXPECT_GT(b.share, 0.0);
        EXPECT_LE(b.share, 1.0);
        EXPECT_GT(b.utilization, 0.0);
        EXPECT_LE(b.utilization, 1.0);
        // The two jobs never share a GPU's links: all of it is this job's.
        if (b.tier == "nvlink" || b.tier == "host") {
          EXPECT_EQ(b.share, 1.0) << b.src << " -> " << b.dst;
        }
      }
    }
  }
  // Spread: job-a (nodes 0 and 2) alone moves exactly its shared-run bytes.
  std::string alone = text;
  alone.replace(alone.find("  - name: job-a\n    nodes: 2"), 28, "  - name: job-a\n    nodes: [0, 2]");
  alone.erase(alone.find("  - name: job-b"), std::string("  - name: job-b\n    nodes: 2\n").size());
  const JobsOutcome a = simulate_jobs(parse_scenario(alone, "t.yaml"));
  const JobsOutcome both = simulate_jobs(parse_scenario(text, "t.yaml"));
  ASSERT_EQ(a.jobs.size(), 1U);
  EXPECT_EQ(a.jobs[0].nodes, both.jobs[0].nodes);
  EXPECT_EQ(a.link_bytes, both.jobs[0].link_bytes);
  EXPECT_EQ(a.jobs[0].link_bytes, both.jobs[0].link_bytes);
}

// Two one-GPU-per-node jobs whose routes share leaf0 -> spine0: each job
// loads that up-link as much as its own host link, and it is the one the
// other job also loads, so it comes first in both jobs' lists (it lost the
// tie to the host links by link number).
TEST(Jobs, ASharedLinkComesFirstAmongEquallyLoadedLinks) {
  const std::string text = R"(name: ar
cluster:
  nodes: 8
  gpus_per_node: 1
  gpu: A100-80GB
  nic_bandwidth: 200Gbps
  nic_latency: 1us
  fabric: {type: leaf-spine, hosts_per_leaf: 4, spines: 2, spine_bandwidth: 200Gbps, spine_latency: 600ns}
model: {name: tiny, layers: 2, hidden: 1024, heads: 16, vocab: 32000}
training: {micro_batch: 1, seq_len: 512, dtype: bf16}
parallelism: {dp: 2, grad_sync: after-backward}
jobs:
  - {name: a, nodes: [0, 4]}
  - {name: b, nodes: [1, 6]}
)";
  const JobsOutcome o = simulate_jobs(parse_scenario(text, "ar.yaml"));
  ASSERT_EQ(o.jobs.size(), 2U);
  EXPECT_FALSE(o.packet_fabric.has_value());  // the flow backend
  for (const auto& j : o.jobs) {
    ASSERT_FALSE(j.busiest_links.empty()) << j.name;
    EXPECT_EQ(j.busiest_links[0].src + " -> " + j.busiest_links[0].dst, "leaf0 -> spine0") << j.name;
    EXPECT_DOUBLE_EQ(j.busiest_links[0].share, 0.5) << j.name;
  }
}

#ifdef TESSERA_HAVE_NS3
// Link bytes by job on the ns-3 backend (InfiniBand model): each packet's
// payload counted for its source rank's job. As on the flow backend, the
// jobs' bytes add up to each link's payload total, packed keeps every job
// off the leaf-spine links and spread does not; and each job moves as many
// payload bytes over all links together as on the flow backend (payload, not
// wire bytes; the forwarding tables' paths have the routes' hop counts).
TEST(Jobs, LinkBytesByJobNs3) {
  const std::string text = scenario_text("two-jobs.yaml");
  for (const char* placement : {"packed", "spread"}) {
    const Scenario s = parse_scenario(text, "t.yaml", {{"placement", placement}, {"backend", "ns3"}});
    const topology::Topology topo = study::build_topology(s);
    const JobsOutcome o = simulate_jobs(s);
    ASSERT_TRUE(o.per_job_links) << placement;
    expect_job_link_bytes(o, topo, placement);
    // The shared run's packet fabric is reported, as for one job: every
    // segment injected is delivered, the payload too.
    ASSERT_TRUE(o.packet_fabric.has_value()) << placement;
    EXPECT_GT(o.packet_fabric->packets_injected, 0U);
    EXPECT_EQ(o.packet_fabric->packets_delivered, o.packet_fabric->packets_injected);
    EXPECT_EQ(o.packet_fabric->payload_delivered, o.packet_fabric->payload_injected);
    EXPECT_NE(format_jobs_text(s, o).find("\nPacket fabric  infiniband, segment = 32 x 4096 B MTU"),
              std::string::npos);
    EXPECT_NE(format_jobs_json(s, o).find(", \"ns3\": {\"model\": \"infiniband\""), std::string::npos);
    const JobsOutcome flow = simulate_jobs(parse_scenario(text, "t.yaml", {{"placement", placement}}));
    ASSERT_EQ(flow.jobs.size(), o.jobs.size());
    for (std::size_t j = 0; j < o.jobs.size(); ++j) {
      const auto& job = o.jobs[j];
      ASSERT_EQ(job.busiest_links.size(), study::kJobBusiestLinks) << job.name;
      for (const auto& b : job.busiest_links) {
        EXPECT_EQ(b.bytes, job.link_bytes[static_cast<std::size_t>(b.link)]);
        EXPECT_GT(b.share, 0.0);
        EXPECT_LE(b.share, 1.0);
      }
      double ns3_bytes = 0.0;
      double flow_bytes = 0.0;
      for (const double b : job.link_bytes) ns3_bytes += b;
      for (const double b : flow.jobs[j].link_bytes) flow_bytes += b;
      EXPECT_GT(ns3_bytes, 0.0) << placement << " " << job.name;
      EXPECT_EQ(ns3_bytes, flow_bytes) << placement << " " << job.name;
    }
  }
  // The point-to-point model keeps no per-link counts (its run is far too
  // slow for this test: only the report of an outcome without them).
  const Scenario p2p = parse_scenario(text, "t.yaml", {{"backend", "ns3"}, {"ns3.model", "point-to-point"}});
  JobsOutcome none;
  none.jobs.resize(1);
  none.jobs[0].name = "job-a";
  EXPECT_NE(format_jobs_text(p2p, none).find("Links by job   not available: the ns-3 point-to-point model does not "
                                              "attribute link traffic to jobs"),
            std::string::npos);
  EXPECT_NE(format_jobs_json(p2p, none).find(R"("busiest_links": null)"), std::string::npos);
}
#endif

TEST(Jobs, PlaceJobsRelabelsRanksAndSharesPrograms) {
  parallelism::TaskGraph g;
  parallelism::Program p;
  parallelism::Task t;
  t.name = "c";
  t.kind = parallelism::TaskKind::Collective;
  t.collective = parallelism::CollectiveKind::AllReduce;
  t.group = 0;
  t.collective_id = 0;
  t.bytes = Bytes(1024);
  p.tasks.push_back(t);
  g.groups.push_back({{0, 1}});
  const auto prog = g.add_program(std::move(p));
  g.add_rank(prog, {0});
  g.add_rank(prog, {0});
  const parallelism::TaskGraph placed = place_jobs({&g, &g}, {{4, 1}, {0, 5}}, 6);
  placed.validate();
  ASSERT_EQ(placed.num_ranks(), 6);
  ASSERT_EQ(placed.groups.size(), 2U);
  EXPECT_EQ(placed.groups[0].ranks, (std::vector<int>{4, 1}));
  EXPECT_EQ(placed.groups[1].ranks, (std::vector<int>{0, 5}));
  EXPECT_EQ(placed.ranks[4].groups, (std::vector<std::int32_t>{0}));
  EXPECT_EQ(placed.ranks[0].groups, (std::vector<std::int32_t>{1}));
  EXPECT_TRUE(placed.tasks(2).empty());  // GPUs no job uses
  EXPECT_TRUE(placed.tasks(3).empty());
  EXPECT_EQ(placed.programs[0], placed.programs[1]);  // shared, not copied
  EXPECT_THROW((void)place_jobs({&g, &g}, {{0, 1}, {1, 2}}, 6), InputError);
  EXPECT_THROW((void)place_jobs({&g}, {{0}}, 6), InputError);
}

// `stragglers:`: a factor on nodes or ranks, seeded noise on every GPU, one
// line per bad value; the report counts them.
TEST(Stragglers, KeysGiveThePerGpuFactors) {
  const std::string text = scenario_text("default.yaml");
  const Scenario s = parse_scenario(text, "d.yaml", {{"stragglers.nodes", "1"}, {"stragglers.slowdown", "1.25"}});
  ASSERT_EQ(s.compute_scale.size(), 16U);
  for (std::size_t r = 0; r < 16; ++r) EXPECT_EQ(s.compute_scale[r], r >= 8 ? 1.25 : 1.0) << r;
  const Scenario ranks = parse_scenario(text, "d.yaml", {{"stragglers.ranks", "0,3-4"}, {"stragglers.slowdown", "2"}});
  EXPECT_EQ(ranks.compute_scale[3], 2.0);
  EXPECT_EQ(ranks.compute_scale[5], 1.0);
  const Scenario a = parse_scenario(text, "d.yaml", {{"stragglers.random_sigma", "0.1"}, {"stragglers.seed", "7"}});
  const Scenario b = parse_scenario(text, "d.yaml", {{"stragglers.random_sigma", "0.1"}, {"stragglers.seed", "7"}});
  const Scenario c = parse_scenario(text, "d.yaml", {{"stragglers.random_sigma", "0.1"}, {"stragglers.seed", "8"}});
  EXPECT_EQ(a.compute_scale, b.compute_scale);
  EXPECT_NE(a.compute_scale, c.compute_scale);
  for (double f : a.compute_scale) {
    EXPECT_GT(f, 0.5);
    EXPECT_LT(f, 2.0);
  }
  EXPECT_NE(error_of(text, {{"stragglers.nodes", "2"}}).find("stragglers.nodes: 2 is out of range (0..1)"),
            std::string::npos)
      << error_of(text, {{"stragglers.nodes", "2"}});
  EXPECT_NE(error_of(text, {{"stragglers.slowdown", "0"}}).find("stragglers.slowdown"), std::string::npos);
  EXPECT_NE(error_of(text, {{"stragglers.seed", "3"}}).find("a seed without random_sigma"), std::string::npos);
  // Listed GPUs without a slowdown, or a slowdown with no GPUs listed,
  // change nothing (helper 106: silently).
  EXPECT_NE(
      error_of(text, {{"stragglers.nodes", "1"}})
          .find("stragglers.nodes: without stragglers.slowdown (default 1) the listed GPUs run as predicted"),
      std::string::npos)
      << error_of(text, {{"stragglers.nodes", "1"}});
  EXPECT_NE(error_of(text, {{"stragglers.random_sigma", "0.1"}, {"stragglers.slowdown", "2"}})
                .find("stragglers.slowdown: a slowdown without nodes or ranks has no effect"),
            std::string::npos);
  // A node or rank listed twice is likely a slip for another (helper 127:
  // read as a set, silently), as in a job's nodes.
  for (const auto& [key, list, twice] :
       {std::tuple{"stragglers.ranks", "3,3", 3}, std::tuple{"stragglers.ranks", "0-4,2", 2},
        std::tuple{"stragglers.nodes", "1,1", 1}}) {
    const std::string e = error_of(text, {{key, list}, {"stragglers.slowdown", "2"}});
    EXPECT_NE(e.find(fmt::format("{}: {} is listed twice in '{}'", key, twice, list)), std::string::npos)
        << e;
  }
  const std::string mixed = error_of(text, {{"mixed_gpus.gpu", "A100-80GB"}, {"mixed_gpus.nodes", "1,1"}});
  EXPECT_NE(mixed.find("mixed_gpus.nodes: 1 is listed twice in '1,1'"), std::string::npos) << mixed;
  // A slowdown of 1 with GPUs listed slows nothing: said.
  const Scenario one =
      parse_scenario(text, "d.yaml", {{"stragglers.nodes", "1"}, {"stragglers.slowdown", "1"}});
  EXPECT_NE(std::find(one.warnings.begin(), one.warnings.end(),
                      "stragglers.slowdown 1: the listed GPUs run as predicted (no straggler)"),
            one.warnings.end());
}

// A slower data-parallel rank holds the all-reduce back: the iteration grows,
// by at most its extra compute; the report counts one slower GPU.
TEST(Stragglers, OneSlowGpuSlowsTheDataParallelStep) {
  const std::string text = scenario_text("default.yaml");
  const Scenario base = parse_scenario(text, "d.yaml");
  const Scenario slow = parse_scenario(text, "d.yaml", {{"stragglers.ranks", "5"}, {"stragglers.slowdown", "1.1"}});
  const auto a = simulate_scenario(base);
  const auto b = simulate_scenario(slow);
  const Time compute = a.result.ranks[5].compute_busy;
  // Every task scaled and rounded to the picosecond: the sum within a
  // picosecond per task.
  EXPECT_NEAR(static_cast<double>(b.result.ranks[5].compute_busy.ps()), static_cast<double>(compute.ps()) * 1.1,
              1000.0);
  // The others wait for it in the all-reduce; part of its extra compute
  // hides behind its host's launch time (the host model), none beyond it.
  EXPECT_GT(b.result.makespan, a.result.makespan);
  EXPECT_LE(b.result.makespan, a.result.makespan + (b.result.ranks[5].compute_busy - compute));
  const RunReport r = make_report(slow, b);
  EXPECT_EQ(r.scales.slower, 1);
  EXPECT_DOUBLE_EQ(r.scales.max_scale, 1.1);
}

// A slowdown under 1 makes GPUs faster, and a random draw makes some slower
// and some faster: the report counts each side (helper 106: every factor
// other than 1 was called slower, "x0.500 at most").
TEST(Stragglers, FasterGpusAreCountedAsFaster) {
  const std::string text = scenario_text("default.yaml");
  const Scenario fast =
      parse_scenario(text, "d.yaml", {{"stragglers.nodes", "1"}, {"stragglers.slowdown", "0.5"}});
  const RunReport f = make_report(fast, simulate_scenario(fast));
  EXPECT_EQ(f.scales.slower, 0);
  EXPECT_EQ(f.scales.faster, 8);
  EXPECT_DOUBLE_EQ(f.scales.min_scale, 0.5);
  EXPECT_NE(
      format_text(f).find("\nStragglers     8 of 16 GPUs faster than predicted (compute x0.500 at least)\n"),
      std::string::npos)
      << format_text(f);
  EXPECT_NE(format_json(f).find("\"faster_gpus\": 8, \"min_compute_scale\": 0.500000, "), std::string::npos);
  EXPECT_EQ(format_json(f).find("\"stragglers\""), std::string::npos);

  const Scenario noisy = parse_scenario(text, "d.yaml", {{"stragglers.random_sigma", "0.2"}});
  const RunReport n = make_report(noisy, simulate_scenario(noisy));
  int above = 0, below = 0;
  for (const double x : noisy.compute_scale) {
    above += x > 1.0 ? 1 : 0;
    below += x < 1.0 ? 1 : 0;
  }
  ASSERT_GT(above, 0);
  ASSERT_GT(below, 0);
  EXPECT_EQ(n.scales.slower, above);
  EXPECT_EQ(n.scales.faster, below);
  EXPECT_NE(format_text(n).find(
                fmt::format("\nStragglers     {} of 16 GPUs slower than predicted (compute x{:.3f} at "
                            "most), {} faster (x{:.3f} at least)\n",
                            above, n.scales.max_scale, below, n.scales.min_scale)),
            std::string::npos)
      << format_text(n);
}

// Stragglers in a scenario with jobs: node and rank indices are the
// cluster's. Spread placement gives job-a nodes 0 and 2: node 0 at 2x makes
// 8 of job-a's 16 GPUs slower and none of job-b's; the summary and the JSON
// say so per job. A slow node no job runs on is warned about (it changes
// nothing); random_sigma scales the idle GPUs too, without a warning.
TEST(Stragglers, JobsCountTheirOwnSlowGpus) {
  const std::string text = scenario_text("two-jobs.yaml");
  const Scenario s =
      parse_scenario(text, "t.yaml", {{"stragglers.nodes", "0"}, {"stragglers.slowdown", "2"}});
  ASSERT_EQ(s.jobs.at(0).nodes, (std::vector<int>{0, 2}));
  EXPECT_TRUE(s.warnings.empty());
  EXPECT_EQ(job_gpus(s.jobs[0], 8),
            (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23}));
  const JobsOutcome o = simulate_jobs(s);
  ASSERT_EQ(o.jobs.size(), 2U);
  EXPECT_EQ(o.jobs[0].scales.slower, 8);
  EXPECT_EQ(o.jobs[0].scales.max_scale, 2.0);
  EXPECT_EQ(o.jobs[1].scales.slower, 0);
  EXPECT_EQ(o.jobs[1].scales.max_scale, 1.0);
  const JobsOutcome plain = simulate_jobs(parse_scenario(text, "t.yaml"));
  EXPECT_GT(o.jobs[0].alone, plain.jobs[0].alone);
  EXPECT_EQ(o.jobs[1].alone, plain.jobs[1].alone);
  const std::string t = format_jobs_text(s, o);
  EXPECT_NE(t.find("\nStragglers     job-a: 8 of 16 GPUs slower than predicted (compute x2.000 at most)\n"),
            std::string::npos)
      << t;
  EXPECT_EQ(format_jobs_text(s, plain).find("Stragglers"), std::string::npos);
  // Iterations of different lengths: the one-iteration caveat, with both.
  EXPECT_NE(
      t.find(fmt::format("\nPhase          the jobs' iterations differ ({:.3f} to {:.3f} ms alone): the "
                         "shared times are one iteration each, started together;",
                         o.jobs[1].alone.seconds() * 1e3, o.jobs[0].alone.seconds() * 1e3)),
      std::string::npos)
      << t;
  EXPECT_EQ(format_jobs_text(s, plain).find("Phase"), std::string::npos) << "alike jobs stay in phase";
  const std::string j = format_jobs_json(s, o);
  EXPECT_NE(
      j.find(R"("nodes": [0, 2], "stragglers": 8, "max_compute_scale": 2.000000, "alone_iteration_time_s")"),
      std::string::npos)
      << j;
  EXPECT_EQ(j.find(R"("nodes": [1, 3], "stragglers")"), std::string::npos) << j;
  // Five nodes, node 4 idle.
  const Scenario idle = parse_scenario(
      text, "t.yaml", {{"cluster.nodes", "5"}, {"stragglers.nodes", "1,4"}, {"stragglers.slowdown", "2"}});
  ASSERT_EQ(idle.warnings.size(), 1U);
  EXPECT_EQ(idle.warnings[0],
            "stragglers: node 4 runs no job: its slowdown changes nothing (node indices are the cluster's)");
  const Scenario two_idle = parse_scenario(
      text, "t.yaml", {{"cluster.nodes", "6"}, {"stragglers.ranks", "33,47"}, {"stragglers.slowdown", "2"}});
  ASSERT_EQ(two_idle.warnings.size(), 1U);
  // (ranks named as given, with their nodes: helper 127)
  EXPECT_EQ(two_idle.warnings[0],
            "stragglers: ranks 33 (node 4), 47 (node 5) run no job: their slowdown changes nothing (rank and "
            "node indices are the cluster's)");
  EXPECT_TRUE(parse_scenario(text, "t.yaml", {{"cluster.nodes", "5"}, {"stragglers.random_sigma", "0.1"}})
                  .warnings.empty());
}

// `failures:` names cables by their ends; wrong names and a cut-off GPU are
// one-line errors naming the key; both backends route around a failed link.
TEST(Failures, TheReportSaysWhichCables) {
  // A forecast with cables out or slow says so, in the text and the JSON.
  const std::string text = scenario_text("default.yaml");
  const Scenario s = parse_scenario(text, "d.yaml",
                                    {{"failures.links", "leaf0-spine0"},
                                     {"failures.degraded", "leaf0-spine1"},
                                     {"failures.degraded_rate", "0.1"}});
  const RunReport rep = make_report(s, simulate_scenario(s));
  EXPECT_NE(format_text(rep).find(
                "\nFailures       out of service: leaf0-spine0; at 10% of their rate: leaf0-spine1\n"),
            std::string::npos)
      << format_text(rep);
  EXPECT_NE(
      format_json(rep).find("\"failures\": {\"links\": [\"leaf0-spine0\"], \"degraded\": [\"leaf0-spine1\"], "
                            "\"degraded_rate\": 0.100000, \"timed\": []}"),
      std::string::npos);
  // None: no line, no key.
  const Scenario healthy = parse_scenario(text, "d.yaml");
  const RunReport h = make_report(healthy, simulate_scenario(healthy));
  EXPECT_EQ(format_text(h).find("Failures"), std::string::npos);
  EXPECT_EQ(format_json(h).find("\"failures\""), std::string::npos);
}

TEST(Failures, CablesByNameAndUnreachableGpus) {
  const std::string text = scenario_text("default.yaml");
  const Scenario s = parse_scenario(text, "d.yaml", {{"failures.links", "leaf0-spine1, leaf1-spine2"}});
  ASSERT_EQ(s.failures.failed.size(), 2U);
  EXPECT_EQ(s.failures.failed[1], (std::pair<std::string, std::string>{"leaf1", "spine2"}));
  const topology::Topology t = build_topology(s);
  EXPECT_EQ(t.failed_links(), 4);
  // Each failed up-link moves its destinations onto the others: slower.
  const Time healthy = simulate_scenario(parse_scenario(text, "d.yaml")).result.makespan;
  EXPECT_GT(simulate_scenario(s).result.makespan, healthy);
  EXPECT_EQ(error_of(text, {{"failures.links", "leaf0"}}),
            "s.yaml (--set failures.links): failures.links: 'leaf0' is not a cable: name its two ends, as "
            "leaf0-spine1");
  // A cable named twice, either way round or as failed and degraded.
  EXPECT_EQ(error_of(text, {{"failures.links", "leaf0-spine0,spine0-leaf0"}}),
            "s.yaml (--set failures.links): failures.links: cable spine0-leaf0 is also in failures.links "
            "(name each "
            "cable once)");
  EXPECT_EQ(error_of(text, {{"failures.links", "leaf0-spine0"},
                            {"failures.degraded", "leaf0-spine0"},
                            {"failures.degraded_rate", "0.5"}}),
            "s.yaml (--set failures.degraded): failures.degraded: cable leaf0-spine0 is also in "
            "failures.links (name "
            "each cable once)");
  const Scenario typo = parse_scenario(text, "s.yaml", {{"failures.links", "leaf0-spine9"}});
  try {
    (void)build_topology(typo);
    ADD_FAILURE() << "no error";
  } catch (const ScenarioError& e) {
    // (where the key came from, and the names that exist, by kind)
    EXPECT_EQ(
        std::string(e.what()),
        "s.yaml (--set failures.links): failures.links: leaf0-spine9: topology: no vertex named 'spine9' "
        "(the names are gpu0..gpu15, nvswitch0..nvswitch1, leaf0..leaf1, spine0..spine7)");
  }
  // Both ends unknown: the first is named (helper 126: the second was).
  try {
    (void)build_topology(parse_scenario(text, "s.yaml", {{"failures.links", "foo-bar"}}));
    ADD_FAILURE() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("foo-bar: topology: no vertex named 'foo'"), std::string::npos)
        << e.what();
  }
  std::string all;
  for (int k = 0; k < 8; ++k) all += fmt::format("{}leaf1-spine{}", k ? "," : "", k);
  const Scenario cut = parse_scenario(text, "s.yaml", {{"failures.links", all}});
  EXPECT_THROW((void)build_topology(cut), ScenarioError);
  // A GPU's own cable to the fabric: GPU 0 still reaches it over NVLink, no
  // GPU of the other node does (this was an error in the middle of the run,
  // naming neither the file nor the key).
  try {
    (void)build_topology(parse_scenario(text, "s.yaml", {{"failures.links", "gpu3-leaf0"}}));
    ADD_FAILURE() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "s.yaml (--set failures.links): failures.links: with this 1 cable down GPU 3 cannot reach GPU 8 "
        "(no route left; GPU 3: its only cable to the fabric, gpu3-leaf0, is down, "
        "and NCCL's detour through a neighbour's NIC over NVLink, PXN, is not modelled)");
  }
  // A shared adapter's cable cuts off every GPU behind it: the first of them
  // is named, with the adapter (helper 101: "GPU 8 cannot reach GPU 0", as
  // if GPU 8 had lost something), and a GPU's PCIe link to it the same.
  const std::string shared = scenario_text("shared-hcas.yaml");
  auto topology_error = [](const std::string& t, const std::string& cables) {
    try {
      (void)build_topology(parse_scenario(t, "s.yaml", {{"failures.links", cables}}));
    } catch (const ScenarioError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(topology_error(shared, "hca0-leaf0"),
            "s.yaml (--set failures.links): failures.links: with this 1 cable down GPU 0 cannot reach GPU 8 "
            "(no route left; GPU 0: its network adapter hca0 lost its only cable to the fabric, hca0-leaf0, "
            "and NCCL's detour through a neighbour's NIC over NVLink, PXN, is not modelled)");
  EXPECT_EQ(topology_error(shared, "gpu1-hca0"),
            "s.yaml (--set failures.links): failures.links: with this 1 cable down GPU 1 cannot reach GPU 8 "
            "(no route left; GPU 1: its only link to its network adapter, gpu1-hca0, is down, "
            "and NCCL's detour through a neighbour's NIC over NVLink, PXN, is not modelled)");
  // An NVLink cable does not fail: inside a node the traffic is timed with
  // NCCL's NVLink figures, which a detour over the NICs would not follow
  // (helper 101: it was accepted and the detour still counted as NVLink).
  // Timed or not; degraded, it slows the iteration.
  const std::string nvlink_refused =
      "an NVLink cable inside a node cannot fail in this model (its node's traffic is timed with NCCL's "
      "NVLink figures; a GPU that loses an NVLink is drained in practice): give it under failures.degraded "
      "for a slow NVLink";
  EXPECT_EQ(topology_error(text, "gpu0-nvswitch0"),
            "s.yaml (--set failures.links): failures.links: gpu0-nvswitch0: " + nvlink_refused);
  // Two GPUs of an NVSwitch node have no cable between them: said so, not
  // sent to failures.degraded, which would say it (helper 126).
  EXPECT_EQ(topology_error(text, "gpu0-gpu1").find(nvlink_refused), std::string::npos);
  EXPECT_NE(topology_error(text, "gpu0-gpu1").find("no cable between gpu0 and gpu1"), std::string::npos)
      << topology_error(text, "gpu0-gpu1");
  try {
    (void)build_topology(
        parse_scenario(text + "failures:\n  links:\n    - {cable: nvswitch1-gpu9, at: 1ms}\n", "s.yaml"));
    ADD_FAILURE() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("failures.links[0]: nvswitch1-gpu9: " + nvlink_refused),
              std::string::npos)
        << e.what();
  }
  const Scenario slow_nvlink = parse_scenario(
      text, "d.yaml", {{"failures.degraded", "gpu0-nvswitch0"}, {"failures.degraded_rate", "0.1"}});
  EXPECT_GT(simulate_scenario(slow_nvlink).result.makespan, healthy);
  EXPECT_NE(error_of(text, {{"failures.degraded", "leaf0-spine0"}}).find("degraded and degraded_rate go together"),
            std::string::npos);
}

// A failures entry is found at its line: a missing `cable`, a cable named
// twice (timed or not: two 50% degradations are not a 25% one), a cable the
// fabric does not have, a cut that leaves a GPU unreachable.
TEST(Failures, EveryEntryErrorNamesItsLine) {
  const std::string text = scenario_text("default.yaml");
  auto with = [&](const std::string& failures) { return text + "failures:\n" + failures; };
  const int line = static_cast<int>(std::count(text.begin(), text.end(), '\n')) + 1;  // of "failures:"
  EXPECT_EQ(error_of(with("  links:\n    - {at: 5ms}\n")),
            fmt::format("s.yaml:{}:7: failures.links[0].cable: missing required key", line + 2));
  EXPECT_EQ(
      error_of(with("  degraded:\n    - leaf0-spine1\n    - {cable: spine1-leaf0, at: 2ms}\n"
                    "  degraded_rate: 0.5\n")),
      fmt::format("s.yaml:{}:7: failures.degraded[1]: cable spine1-leaf0 is also in failures.degraded[0] "
                  "(name each cable once)",
                  line + 3));
  EXPECT_EQ(error_of(with("  links:\n    - {cable: leaf0-spine1, at: 1ms}\n  degraded:\n"
                          "    - {cable: leaf0-spine1, at: 2ms}\n  degraded_rate: 0.5\n")),
            fmt::format("s.yaml:{}:7: failures.degraded[0]: cable leaf0-spine1 is also in failures.links[0] "
                        "(name each cable once)",
                        line + 4));
  auto topology_error = [&](const std::string& failures) {
    try {
      (void)build_topology(parse_scenario(with(failures), "s.yaml"));
    } catch (const ScenarioError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(
      topology_error("  links:\n    - leaf0-spine1\n    - leaf0-leaf1\n"),
      fmt::format("s.yaml:{}:7: failures.links[1]: leaf0-leaf1: topology: no cable between leaf0 and leaf1",
                  line + 3));
  std::string cut = "  links:\n";
  for (int k = 0; k < 8; ++k) cut += fmt::format("    - leaf1-spine{}\n", k);
  EXPECT_EQ(topology_error(cut),
            fmt::format("s.yaml:{}:5: failures.links: with these 8 cables down GPU 8 cannot "
                        "reach GPU 0 (no route left)",
                        line + 2));
}

// A cable timed to change after the iteration has ended changes nothing:
// said in the Failures line and as a warning (JSON "warnings").
TEST(Failures, AChangeAfterTheIterationIsSaid) {
  const std::string text =
      scenario_text("default.yaml") + "failures:\n  links:\n    - {cable: leaf0-spine1, at: 10s}\n";
  const Scenario s = parse_scenario(text, "s.yaml");
  const RunReport rep = make_report(s, simulate_scenario(s));
  EXPECT_NE(format_text(rep).find(
                "Failures       leaf0-spine1 fails at 10000 ms (after the iteration ends: no effect)\n"),
            std::string::npos)
      << format_text(rep);
  ASSERT_EQ(rep.warnings.size(), s.warnings.size() + 1);
  EXPECT_EQ(rep.warnings.back(),
            fmt::format("failures: leaf0-spine1 fails at 10000 ms, after the iteration ends "
                        "({:.3f} ms): it changes nothing",
                        rep.iteration_time.ms()));
  // Within the iteration: no warning.
  const Scenario early = parse_scenario(
      scenario_text("default.yaml") + "failures:\n  links:\n    - {cable: leaf0-spine1, at: 1ms}\n",
      "s.yaml");
  const RunReport e = make_report(early, simulate_scenario(early));
  EXPECT_EQ(e.warnings.size(), early.warnings.size());
  EXPECT_EQ(format_text(e).find("no effect"), std::string::npos);
}

// With jobs, the summary carries the scenario's failures as a single job's
// does (the Failures line, with a change after the last job's iteration
// marked, and warned about) and the JSON its "failures" and "warnings".
TEST(Failures, TheJobsReportSaysWhichCables) {
  const Scenario s = parse_scenario(scenario_text("two-jobs.yaml") +
                                        "failures:\n  links:\n    - leaf0-spine0\n"
                                        "    - {cable: leaf0-spine1, at: 10s}\n",
                                    "t.yaml");
  const JobsOutcome o = simulate_jobs(s);
  const std::string t = format_jobs_text(s, o);
  EXPECT_NE(t.find("\nFailures       out of service: leaf0-spine0; leaf0-spine1 fails at 10000 ms (after the "
                   "iteration ends: no effect)\n"),
            std::string::npos)
      << t;
  const auto warnings = jobs_outcome_warnings(s, o);
  ASSERT_EQ(warnings.size(), 1U);
  EXPECT_EQ(warnings[0],
            fmt::format("failures: leaf0-spine1 fails at 10000 ms, after the iteration ends ({:.3f} "
                        "ms): it changes nothing",
                        o.makespan.ms()));
  const std::string j = format_jobs_json(s, o);
  EXPECT_NE(j.find(", \"failures\": {\"links\": [\"leaf0-spine0\"], \"degraded\": [], "), std::string::npos)
      << j;
  EXPECT_NE(j.find("\"warnings\": [" + json_string(warnings[0]) + "]}"), std::string::npos) << j;
}

// `mixed_gpus:`: every node of the other type gives exactly the run with that
// GPU; the same type on some nodes changes nothing; some nodes in between.
TEST(MixedGpus, EachNodeTimedOnItsOwnGpu) {
  const std::string text = scenario_text("schedules.yaml");  // 4 nodes x 8 A100-80GB, pp 8
  const Time a100 = simulate_scenario(parse_scenario(text, "s.yaml")).result.makespan;
  const Time h100 = simulate_scenario(parse_scenario(text, "s.yaml", {{"cluster.gpu", "H100-SXM"}})).result.makespan;
  const Time all = simulate_scenario(parse_scenario(text, "s.yaml", {{"mixed_gpus.gpu", "H100-SXM"},
                                                                     {"mixed_gpus.nodes", "0-3"}}))
                       .result.makespan;
  EXPECT_EQ(all, h100);
  // ... and says that no cluster.gpu is left, whose peak MFU stays against
  // (helper 127).
  const Scenario every =
      parse_scenario(text, "s.yaml", {{"mixed_gpus.gpu", "H100-SXM"}, {"mixed_gpus.nodes", "0-3"}});
  EXPECT_NE(std::find(every.warnings.begin(), every.warnings.end(),
                      "mixed_gpus.nodes names every node: no A100-80GB is left (MFU and HFU stay against its "
                      "peak); for a cluster of H100-SXM alone set cluster.gpu: H100-SXM"),
            every.warnings.end());
  const Time same = simulate_scenario(parse_scenario(text, "s.yaml", {{"mixed_gpus.gpu", "A100-80GB"},
                                                                      {"mixed_gpus.nodes", "1"}}))
                        .result.makespan;
  EXPECT_EQ(same, a100);
  const Time some = simulate_scenario(parse_scenario(text, "s.yaml", {{"mixed_gpus.gpu", "H100-SXM"},
                                                                      {"mixed_gpus.nodes", "0-2"}}))
                        .result.makespan;
  EXPECT_LT(h100, some);
  EXPECT_LE(some, a100);  // node 3 (pipeline stages 6-7) still A100: the slowest stage sets the pace
  EXPECT_NE(error_of(text, {{"mixed_gpus.gpu", "Z100"}, {"mixed_gpus.nodes", "1"}}).find("mixed_gpus.gpu"),
            std::string::npos);
  EXPECT_NE(error_of(text, {{"mixed_gpus.gpu", "H100-SXM"}, {"mixed_gpus.nodes", "4"}})
                .find("mixed_gpus.nodes: 4 is out of range (0..3)"),
            std::string::npos);
}

// parallelism.first_stage_layers / last_stage_layers reach the execution:
// GPT-3 XL's 24 layers over 4 stages as 6 + 7 + 7 + 4 against 6 each. The
// first stage is the same plan (the same compute, to the picosecond); a
// middle stage's one more layer costs what the last stage's two fewer save
// per layer (a layer is the same work on every stage, within a microsecond:
// the optimizer's and gradient buffers' sizes differ); the last stage, whose
// LM head made it 1.3 times the others, stops setting the pace.
TEST(StageBalance, FirstAndLastStageLayersMoveLayersBetweenStages) {
  const std::string text = scenario_text("schedules.yaml");
  const std::vector<Override> pp4 = {{"parallelism.pp", "4"}, {"parallelism.dp", "4"}};
  std::vector<Override> split = pp4;
  split.push_back({"parallelism.first_stage_layers", "6"});
  split.push_back({"parallelism.last_stage_layers", "4"});
  const Scenario even_s = parse_scenario(text, "s.yaml", pp4);
  const Scenario split_s = parse_scenario(text, "s.yaml", split);
  const auto even_r = simulate_scenario(even_s, nullptr, nullptr, false);
  const auto split_r = simulate_scenario(split_s, nullptr, nullptr, false);
  const RunReport even = make_report(even_s, even_r);
  const RunReport own = make_report(split_s, split_r);
  ASSERT_EQ(even.stage_balance.size(), 4U);
  ASSERT_EQ(own.stage_balance.size(), 4U);
  for (int st = 0; st < 4; ++st) {
    EXPECT_EQ(even.stage_balance[static_cast<std::size_t>(st)].layers, 6);
    EXPECT_EQ(own.stage_balance[static_cast<std::size_t>(st)].layers, (std::array<int, 4>{6, 7, 7, 4})[st]);
  }
  EXPECT_EQ(own.stage_balance[0].compute, even.stage_balance[0].compute);
  EXPECT_EQ(own.stage_balance[1].compute, own.stage_balance[2].compute);
  const double layer_s = own.stage_balance[1].compute.seconds() - even.stage_balance[1].compute.seconds();
  const double two_layers_s =
      even.stage_balance[3].compute.seconds() - own.stage_balance[3].compute.seconds();
  EXPECT_GT(layer_s, 0.03);  // about a seventh of the stage's 0.27 s
  EXPECT_NEAR(two_layers_s, 2 * layer_s, 1e-6);
  EXPECT_GT(even.stage_balance[3].vs_fastest, 1.25);
  // The split simulated here is the one the even split's summary suggests,
  // and the slowest stage's compute it estimates (seven layers as a middle
  // stage computes six) is what the split's run gives, within 0.1%.
  EXPECT_EQ(even.stage_balance_hint.rfind("the last stage computes x1.30 what the fastest does: "
                                          "parallelism.first_stage_layers 6 and last_stage_layers 4 ",
                                          0),
            0U)
      << even.stage_balance_hint;
  const double estimate_ms = 7.0 / 6.0 * even.stage_balance[1].compute.ms();
  EXPECT_NE(even.stage_balance_hint.find(fmt::format("to about {:.1f} ms", estimate_ms)), std::string::npos)
      << even.stage_balance_hint;
  EXPECT_NEAR(own.stage_balance[1].compute.ms(), estimate_ms, 1e-3 * estimate_ms);
  // The estimate is of compute: where the host's share of the iteration is
  // 5% or more (the even split's last stage waits on its data steps: 56 ms
  // of host in 477 ms, 0.9 ms with the split), the hint says so.
  // (the breakdown's host time needs the run split into its parts)
  const RunReport even_parts = make_report(even_s, simulate_scenario(even_s));
  const RunReport own_parts = make_report(split_s, simulate_scenario(split_s));
  const double host_share = even_parts.host_time.seconds() / even_parts.iteration_time.seconds();
  EXPECT_GT(host_share, 0.05);
  EXPECT_LT(own_parts.host_time.seconds() / own_parts.iteration_time.seconds(), 0.01);
  EXPECT_NE(
      even_parts.stage_balance_hint.find(fmt::format(
          "; compute alone: the host, {:.1f}% of this iteration, is not in it, and its waits on the first "
          "and last stages' data steps can decide which split is fastest: run the candidates)",
          100 * host_share)),
      std::string::npos)
      << even_parts.stage_balance_hint;
  // Where the report can time a plan (`run`), the suggested split is
  // simulated with free communication, as the plan's own free-network run,
  // and the hint says what it does to that iteration instead of "run the
  // candidates": here 438 -> 373 ms, the host's waits gone with the split.
  const auto predictor = study::make_scenario_predictor(even_s);
  std::vector<parallelism::ParallelPlan> timed;
  const PlanTimer timer = [&](const parallelism::ParallelPlan& plan) {
    timed.push_back(plan);
    Scenario with = even_s;
    with.plan = plan;
    return study::free_communication_iteration(with, *predictor);
  };
  const Simulation even_sim = simulate_scenario(even_s);
  const RunReport simulated = make_report(even_s, even_sim, timer);
  ASSERT_EQ(timed.size(), 1U);
  EXPECT_EQ(timed[0].first_stage_layers, 6);
  EXPECT_EQ(timed[0].last_stage_layers, 4);
  ASSERT_TRUE(simulated.split_free_iteration && simulated.plan_free_iteration);
  EXPECT_EQ(*simulated.plan_free_iteration, even_sim.free_comm.makespan);
  EXPECT_EQ(*simulated.split_free_iteration, simulate_scenario(split_s).free_comm.makespan);
  EXPECT_LT(*simulated.split_free_iteration, *simulated.plan_free_iteration);
  const Time own_free = *simulated.plan_free_iteration;
  const Time split_free = *simulated.split_free_iteration;
  EXPECT_NE(
      simulated.stage_balance_hint.find(fmt::format(
          "as a middle stage computes one); simulated with every collective free, it takes the iteration "
          "from {:.1f} to {:.1f} ms ({:+.1f}%)",
          own_free.ms(), split_free.ms(), 100 * (split_free.seconds() / own_free.seconds() - 1))),
      std::string::npos)
      << simulated.stage_balance_hint;
  EXPECT_EQ(simulated.stage_balance_hint.find("run the candidates"), std::string::npos);
  EXPECT_NE(format_json(simulated).find(fmt::format(R"("free_comm_iteration_s": {:.9e}, )"
                                                    R"("plan_free_comm_iteration_s": {:.9e}}})",
                                                    split_free.seconds(), own_free.seconds())),
            std::string::npos);
  // A split whose compute is less but whose iteration is not (512-token
  // sequences at pp 8 under GPipe: the host half the iteration, waiting on
  // the data steps; under 1F1B, whose exchanges block since 2026-12-08, the
  // split is 5.4% faster there) is said to be no faster.
  const Scenario short_s =
      parse_scenario(text, "s.yaml", {{"training.seq_len", "512"}, {"parallelism.schedule", "gpipe"}});
  const auto short_predictor = study::make_scenario_predictor(short_s);
  const RunReport short_r =
      make_report(short_s, simulate_scenario(short_s), [&](const parallelism::ParallelPlan& plan) {
        Scenario with = short_s;
        with.plan = plan;
        return study::free_communication_iteration(with, *short_predictor);
      });
  ASSERT_TRUE(short_r.split_free_iteration && short_r.plan_free_iteration);
  EXPECT_GE(*short_r.split_free_iteration, *short_r.plan_free_iteration);
  EXPECT_NE(
      short_r.stage_balance_hint.find(fmt::format(
          "); but simulated with every collective free, it does not make the iteration faster: {:.1f} ms, "
          "{:.1f} ms with it ({:+.1f}%); the slowest stage's compute does not decide it (the host is ",
          short_r.plan_free_iteration->ms(), short_r.split_free_iteration->ms(),
          100 * (short_r.split_free_iteration->seconds() / short_r.plan_free_iteration->seconds() - 1))),
      std::string::npos)
      << short_r.stage_balance_hint;
  EXPECT_TRUE(own.stage_balance_hint.empty());  // the slowest stage is a middle one
  EXPECT_NE(format_json(even).find(R"("suggested_split": {"first_stage_layers": 6, "last_stage_layers": 4, )"
                                   R"("slowest_stage_compute_s": )"),
            std::string::npos);
  EXPECT_NE(format_json(even).find(R"("stage_balance_hint": "the last stage computes x1.30)"),
            std::string::npos);
  EXPECT_EQ(format_json(own).find("suggested_split"), std::string::npos);
  // A plan with a split of its own is told the whole split, a key of its
  // own the suggestion drops included: 9 + 6 + 6 + 3 under 3 chunks a rank
  // (virtual_stages auto) has its first stage slowest; 6 each is better.
  std::vector<Override> nine = pp4;
  for (const auto& [k, v] :
       {std::pair{"parallelism.schedule", "interleaved-1f1b"},
        std::pair{"parallelism.first_stage_layers", "9"}, std::pair{"parallelism.last_stage_layers", "3"}})
    nine.push_back({k, v});
  const Scenario nine_s = parse_scenario(text, "s.yaml", nine);
  EXPECT_EQ(nine_s.plan.virtual_stages, 3);
  const RunReport nine_r = make_report(nine_s, simulate_scenario(nine_s, nullptr, nullptr, false));
  EXPECT_EQ(nine_r.stage_balance_hint.rfind("the first stage computes x", 0), 0U)
      << nine_r.stage_balance_hint;
  EXPECT_NE(nine_r.stage_balance_hint.find(
                ": parallelism.last_stage_layers 6 without the plan's first_stage_layers "
                "(Megatron-Core's"),
            std::string::npos)
      << nine_r.stage_balance_hint;
  // Dense and MoE layers mixed: the keys are named, no split estimated.
  std::vector<Override> moe = pp4;
  for (const auto& [k, v] :
       {std::pair{"model.moe.experts", "8"}, std::pair{"model.moe.top_k", "2"},
        std::pair{"model.moe.first_dense_layers", "4"}, std::pair{"parallelism.sequence_parallel", "true"}})
    moe.push_back({k, v});
  const Scenario moe_s = parse_scenario(text, "s.yaml", moe);
  const RunReport moe_r = make_report(moe_s, simulate_scenario(moe_s, nullptr, nullptr, false));
  EXPECT_FALSE(moe_r.suggested_split.has_value());
  EXPECT_NE(
      moe_r.stage_balance_hint.find("(no split suggested: this model's dense and MoE layers differ in cost)"),
      std::string::npos)
      << moe_r.stage_balance_hint;
  EXPECT_LT(own.iteration_time.seconds(), 0.9 * even.iteration_time.seconds());
  EXPECT_NE(
      format_text(own).find("Plan           dp=4 tp=2 pp=4 (first_stage_layers 6, last_stage_layers 4), "),
      std::string::npos);
  EXPECT_NE(
      format_json(own).find(R"("virtual_stages": 1, "first_stage_layers": 6, "last_stage_layers": 4, )"),
      std::string::npos);
}

// parallelism.account_for_embedding / account_for_loss reach the execution:
// 22 layers + 2 over 4 stages as 5 + 6 + 6 + 5. The middle stages are the
// even split's 6-layer stages (the same compute, to the picosecond); the
// first stage is one layer lighter than the even split's 6 + 6 + 5 + 5; the
// plan line and the JSON name the keys, and a suggested split drops them.
TEST(StageBalance, AccountForEmbeddingAndLossMoveALayerOffEachEdgeStage) {
  const std::string text = scenario_text("schedules.yaml");
  const std::vector<Override> pp4 = {
      {"parallelism.pp", "4"}, {"parallelism.dp", "4"}, {"model.layers", "22"}};
  std::vector<Override> counted = pp4;
  counted.push_back({"parallelism.account_for_embedding", "true"});
  counted.push_back({"parallelism.account_for_loss", "true"});
  const Scenario even_s = parse_scenario(text, "s.yaml", pp4);
  const Scenario counted_s = parse_scenario(text, "s.yaml", counted);
  const RunReport even = make_report(even_s, simulate_scenario(even_s, nullptr, nullptr, false));
  const RunReport own = make_report(counted_s, simulate_scenario(counted_s, nullptr, nullptr, false));
  ASSERT_EQ(own.stage_balance.size(), 4U);
  for (int st = 0; st < 4; ++st) {
    EXPECT_EQ(even.stage_balance[static_cast<std::size_t>(st)].layers, (std::array<int, 4>{6, 6, 5, 5})[st]);
    EXPECT_EQ(own.stage_balance[static_cast<std::size_t>(st)].layers, (std::array<int, 4>{5, 6, 6, 5})[st]);
  }
  EXPECT_EQ(own.stage_balance[1].compute, even.stage_balance[1].compute);
  EXPECT_EQ(own.stage_balance[2].compute, own.stage_balance[1].compute);
  EXPECT_EQ(own.stage_balance[3].compute, even.stage_balance[3].compute);  // 5 layers and the LM head both
  EXPECT_LT(own.stage_balance[0].compute, even.stage_balance[0].compute);
  EXPECT_NE(format_text(own).find("pp=4 (account_for_embedding, account_for_loss), "), std::string::npos);
  const std::string json = format_json(own);
  EXPECT_NE(json.find(R"("virtual_stages": 1, "account_for_embedding": true, "account_for_loss": true, )"),
            std::string::npos);
  EXPECT_NE(own.stage_balance_hint.find(
                ": parallelism.last_stage_layers 4 without the plan's account_for_embedding and "
                "account_for_loss (Megatron-Core's"),
            std::string::npos)
      << own.stage_balance_hint;
  EXPECT_EQ(format_json(even).find(R"("account_for_embedding": true)"), std::string::npos);
  // The suggestion in JSON says the counted split goes.
  EXPECT_NE(
      json.find(R"("suggested_split": {"first_stage_layers": null, "last_stage_layers": 4, )"
                R"("account_for_embedding": false, "account_for_loss": false, "slowest_stage_compute_s": )"),
      std::string::npos);
}

// Stage balance (`stragglers:` or `mixed_gpus:`): dp=8 pp=2 on 2 nodes puts
// stage 0 on node 0 and stage 1 on node 1 (Megatron order: tp, dp, pp).
// Node 1 at 1.5x: stage 1's busiest compute stream is 1.5 times what it is
// without stragglers (each task scaled, rounded to the picosecond); stage 0's
// is unchanged; stage 1 is marked the slowest.
TEST(Stragglers, StageBalanceNamesTheSlowStage) {
  const std::string text = scenario_text("default.yaml");
  const std::vector<Override> plan = {{"parallelism.dp", "8"}, {"parallelism.pp", "2"}};
  const Scenario base = parse_scenario(text, "d.yaml", plan);
  std::vector<Override> slow_keys = plan;
  slow_keys.push_back({"stragglers.nodes", "1"});
  slow_keys.push_back({"stragglers.slowdown", "1.5"});
  const Scenario slow = parse_scenario(text, "d.yaml", slow_keys);
  const auto a = simulate_scenario(base, nullptr, nullptr, false);
  const auto b = simulate_scenario(slow, nullptr, nullptr, false);
  Time stage_base[2];
  for (int r = 0; r < 16; ++r) {
    stage_base[r / 8] = std::max(stage_base[r / 8], a.result.ranks[static_cast<std::size_t>(r)].compute_busy);
  }
  // Without either key a pipeline has its stages' balance too (18 layers
  // each), and the last stage, whose LM head computes about 2.9 layers'
  // FLOPs (2 x 1280 x 50257 a token against 2 x (12 x 1280^2 + 2 x 1024 x
  // 1280)), 1.1 times the first or more: the hint.
  const RunReport plain = make_report(base, a);
  ASSERT_EQ(plain.stage_balance.size(), 2U);
  EXPECT_EQ(plain.stage_balance[0].compute, stage_base[0]);
  EXPECT_EQ(plain.stage_balance[1].compute, stage_base[1]);
  EXPECT_EQ(plain.stage_balance[0].layers, 18);
  EXPECT_EQ(plain.stage_balance[1].layers, 18);
  EXPECT_GT(plain.stage_balance[1].vs_fastest, 1.1);
  EXPECT_LT(plain.stage_balance[1].vs_fastest, 1.2);
  // One layer fewer on it: 19 + 17 layers (a layer as the first stage
  // computes one, its embedding taken as free).
  EXPECT_EQ(plain.stage_balance_hint.rfind(
                fmt::format(
                    "the last stage computes x{:.2f} what the fastest does: parallelism.last_stage_layers 17 "
                    "(Megatron-Core's --decoder-first/last-pipeline-num-layers) would take the slowest "
                    "stage's compute from {:.1f} to about ",
                    plain.stage_balance[1].vs_fastest, plain.stage_balance[1].compute.ms()),
                0),
            0U)
      << plain.stage_balance_hint;
  EXPECT_NE(format_text(plain).find("\n               " + plain.stage_balance_hint + "\n"),
            std::string::npos);
  // Slower GPUs make the slow stage: no hint of layers then.
  const RunReport rep = make_report(slow, b);
  EXPECT_TRUE(rep.stage_balance_hint.empty()) << rep.stage_balance_hint;
  ASSERT_EQ(rep.stage_balance.size(), 2U);
  EXPECT_EQ(rep.stage_balance[0].stage, 0);
  EXPECT_EQ(rep.stage_balance[1].stage, 1);
  EXPECT_EQ(rep.stage_balance[0].compute, stage_base[0]);
  EXPECT_LT(rep.stage_balance[0].slowest_rank, 8);
  EXPECT_GE(rep.stage_balance[1].slowest_rank, 8);
  const double tasks_ps = 100000.0;  // a picosecond of rounding per task, generously
  EXPECT_NEAR(static_cast<double>(rep.stage_balance[1].compute.ps()), 1.5 * static_cast<double>(stage_base[1].ps()),
              tasks_ps);
  const double ratio = static_cast<double>(rep.stage_balance[1].compute.ps()) /
                       static_cast<double>(std::min(rep.stage_balance[0].compute, rep.stage_balance[1].compute).ps());
  EXPECT_DOUBLE_EQ(rep.stage_balance[1].vs_fastest, ratio);
  EXPECT_GT(rep.stage_balance[1].vs_fastest, 1.3);
  EXPECT_DOUBLE_EQ(rep.stage_balance[0].vs_fastest, 1.0);
  const std::string txt = format_text(rep);
  EXPECT_NE(txt.find("Stage balance"), std::string::npos) << txt;
  EXPECT_NE(txt.find(fmt::format("  stage 1      {:>12.3f} ms  x{:.3f}  (rank {}, 18 layers)  <- slowest",
                                 rep.stage_balance[1].compute.ms(), rep.stage_balance[1].vs_fastest,
                                 rep.stage_balance[1].slowest_rank)),
            std::string::npos)
      << txt;
  const std::string json = format_json(rep);
  EXPECT_NE(json.find(fmt::format(R"("stage_balance": [{{"stage": 0, "layers": 18, "slowest_rank": {}, )",
                                  rep.stage_balance[0].slowest_rank)),
            std::string::npos)
      << json;
}

// Stage balance with `mixed_gpus`: dp=8 pp=2 on 2 nodes of H100 with node 1
// (stage 1) an A100: stage 0's busiest compute stream is exactly the all-H100
// run's, stage 1's exactly the all-A100 run's (each rank runs the plan timed
// on its GPU), and stage 1 is the slower.
TEST(MixedGpus, StageBalanceIsEachStageOnItsGpu) {
  const std::string text = scenario_text("default.yaml");
  const std::vector<Override> plan = {{"parallelism.dp", "8"}, {"parallelism.pp", "2"}};
  auto stage_compute = [](const study::Simulation& sim, int stage) {
    Time t;
    for (int r = stage * 8; r < stage * 8 + 8; ++r) {
      t = std::max(t, sim.result.ranks[static_cast<std::size_t>(r)].compute_busy);
    }
    return t;
  };
  const auto h100 = simulate_scenario(parse_scenario(text, "d.yaml", plan), nullptr, nullptr, false);
  std::vector<Override> a100_keys = plan;
  a100_keys.push_back({"cluster.gpu", "A100-80GB"});
  const auto a100 = simulate_scenario(parse_scenario(text, "d.yaml", a100_keys), nullptr, nullptr, false);
  std::vector<Override> mixed_keys = plan;
  mixed_keys.push_back({"mixed_gpus.gpu", "A100-80GB"});
  mixed_keys.push_back({"mixed_gpus.nodes", "1"});
  const Scenario mixed = parse_scenario(text, "d.yaml", mixed_keys);
  const RunReport rep = make_report(mixed, simulate_scenario(mixed, nullptr, nullptr, false));
  ASSERT_EQ(rep.stage_balance.size(), 2U);
  EXPECT_EQ(rep.stage_balance[0].compute, stage_compute(h100, 0));
  EXPECT_EQ(rep.stage_balance[1].compute, stage_compute(a100, 1));
  EXPECT_GT(rep.stage_balance[1].compute, rep.stage_balance[0].compute);
  EXPECT_DOUBLE_EQ(rep.stage_balance[0].vs_fastest, 1.0);
  EXPECT_DOUBLE_EQ(rep.stage_balance[1].vs_fastest, static_cast<double>(stage_compute(a100, 1).ps()) /
                                                        static_cast<double>(stage_compute(h100, 0).ps()));
}

// Memory with `mixed_gpus`: a pipeline stage must fit on each of its GPUs.
// dp=8 pp=2 on 2 H100 nodes with node 1 (stage 1) an A100-40GB: stage 1 is
// checked against 40 GiB, stage 0 against the H100's 80; the JSON lists the
// nodes.
TEST(MixedGpus, EachStageFitsOnItsSmallestGpu) {
  const std::string text = scenario_text("default.yaml");
  const Scenario mixed = parse_scenario(text, "d.yaml",
                                        {{"parallelism.dp", "8"},
                                         {"parallelism.pp", "2"},
                                         {"mixed_gpus.gpu", "A100-40GB"},
                                         {"mixed_gpus.nodes", "1"}});
  const auto h100 = node_model::gpu_preset("H100-SXM").memory;
  const auto a100 = node_model::gpu_preset("A100-40GB").memory;
  EXPECT_EQ(stage_memory_capacity(mixed, mixed.plan), (std::vector<Bytes>{h100, a100}));
  // One stage over both nodes: the A100's; search asks for each plan it tries.
  parallelism::ParallelPlan flat = mixed.plan;
  flat.dp = 16;
  flat.pp = 1;
  EXPECT_EQ(stage_memory_capacity(mixed, flat), (std::vector<Bytes>{a100}));
  const RunReport rep = make_report(mixed, simulate_scenario(mixed, nullptr, nullptr, false));
  ASSERT_EQ(rep.memory.size(), 2U);
  EXPECT_EQ(rep.memory[0].capacity, node_model::gpu_preset("H100-SXM").memory);
  EXPECT_EQ(rep.memory[1].capacity, node_model::gpu_preset("A100-40GB").memory);
  for (const auto& m : rep.memory) EXPECT_EQ(m.oom, m.total > m.capacity) << m.stage;
  // (with the GPU whose peak MFU is against, helper 127, said in the text too)
  EXPECT_NE(format_json(rep).find(
                "\"mixed_gpus\": {\"gpu\": \"A100-40GB\", \"nodes\": [1], \"mfu_peak_gpu\": \"H100-SXM\"}"),
            std::string::npos);
  EXPECT_NE(format_text(rep).find("; MFU and HFU against H100-SXM's peak)\n"), std::string::npos);
  // Micro-batch 16: stage 1 (51 GiB) fits an H100, not its A100-40GB.
  const Scenario big = parse_scenario(text, "d.yaml",
                                      {{"parallelism.dp", "8"},
                                       {"parallelism.pp", "2"},
                                       {"training.micro_batch", "16"},
                                       {"mixed_gpus.gpu", "A100-40GB"},
                                       {"mixed_gpus.nodes", "1"}});
  const RunReport big_rep = make_report(big, simulate_scenario(big, nullptr, nullptr, false));
  ASSERT_EQ(big_rep.memory.size(), 2U);
  EXPECT_GT(big_rep.memory[1].total, Bytes::gib(40)) << "the case needs a stage above 40 GiB";
  EXPECT_LT(big_rep.memory[1].total, Bytes::gib(80));
  EXPECT_TRUE(big_rep.memory[1].oom);
  EXPECT_TRUE(big_rep.oom());
}

TEST(Jobs, ReportCarriesTheJobsUntestedGpuAndKnownBiasNotes) {
  // tessera run's notes for a scenario with jobs: one line when every job
  // has the same, one per job (named) otherwise; in the JSON per job, only
  // where the job has one. The outcome's numbers do not matter here.
  std::string text = scenario_text("two-jobs.yaml");
  const std::string job_b = "  - name: job-b\n    nodes: 2\n";
  ASSERT_NE(text.find(job_b), std::string::npos);
  JobsOutcome o;
  o.jobs.resize(2);
  o.jobs[0].name = "job-a";
  o.jobs[1].name = "job-b";
  // As shipped: H100 data-parallel jobs in bf16, no Untested GPU line and
  // one Known bias line for both (the H100's: node_model::known_bias_note).
  const Scenario plain = parse_scenario(text, "two-jobs.yaml");
  const std::string hopper = node_model::known_bias_note(plain.gpu, plain.workload.dtype);
  ASSERT_EQ(hopper.rfind("H100-SXM at bf16: ", 0), 0U) << hopper;
  EXPECT_NE(format_jobs_text(plain, o).find("\nKnown bias     " + hopper + "\n"), std::string::npos);
  EXPECT_EQ(format_jobs_text(plain, o).find("Known bias     job-"), std::string::npos);
  EXPECT_EQ(format_jobs_text(plain, o).find("Untested GPU"), std::string::npos);
  // Each job on two nodes: tessera run's Untested scale, the jobs named (the
  // cluster has four nodes); in the JSON per job.
  EXPECT_NE(format_jobs_text(plain, o).find(
                "\nUntested scale job-a, job-b: 2 nodes: no multi-node run was measured"),
            std::string::npos)
      << format_jobs_text(plain, o);
  const std::string pj = format_jobs_json(plain, o);
  const std::size_t first = pj.find("\"known_bias\": [" + json_string(hopper) + "]");
  ASSERT_NE(first, std::string::npos) << pj;
  EXPECT_NE(pj.find("\"known_bias\": [" + json_string(hopper) + "]", first + 1), std::string::npos) << pj;
  const std::size_t scale = pj.find(R"("untested_scale": "2 nodes: no multi-node run)");
  ASSERT_NE(scale, std::string::npos) << pj;
  EXPECT_NE(pj.find(R"("untested_scale": "2 nodes: no multi-node run)", scale + 1), std::string::npos) << pj;
  // job-b with 4-way tensor parallelism, on B200s: the GPU's note once, the
  // bias for job-b alone.
  text.replace(text.find(job_b), job_b.size(), job_b + "    parallelism:\n      tp: 4\n      dp: 4\n");
  const Scenario s = parse_scenario(text, "two-jobs.yaml", {{"cluster.gpu", "B200"}});
  const std::string t = format_jobs_text(s, o);
  EXPECT_NE(t.find("\nUntested GPU   B200 (Blackwell): no kernel of this generation was measured here"),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("Untested GPU   job-"), std::string::npos) << t;
  EXPECT_NE(t.find("\nKnown bias     job-b: 4-way tensor parallelism: "), std::string::npos) << t;
  EXPECT_EQ(t.find("job-a: 4-way"), std::string::npos) << t;
  const std::string j = format_jobs_json(s, o);
  // The cluster's GPU and fabric, as run --json names them.
  EXPECT_NE(
      j.find(
          R"("gpus": 32, "gpu": "B200", "fabric": "leaf-spine", "fabric_tiers": 2, "leaf_oversubscription": 4.000000, )"
          R"("spine_oversubscription": 0.000000, "nodes_per_leaf": 2.000000, "placement")"),
      std::string::npos)
      << j;
  const std::size_t a = j.find(R"({"name": "job-a")");
  const std::size_t b = j.find(R"({"name": "job-b")");
  ASSERT_NE(a, std::string::npos);
  ASSERT_NE(b, std::string::npos);
  EXPECT_EQ(j.substr(a, b - a).find("known_bias"), std::string::npos) << j;
  EXPECT_NE(j.substr(a, b - a).find(R"("untested_gpu": ["B200 (Blackwell))"), std::string::npos) << j;
  EXPECT_NE(j.substr(b).find(R"("known_bias": ["4-way tensor parallelism: )"), std::string::npos) << j;
  // The same on the shipped H100s: the H100's note once for both jobs, then
  // job-b's own under it; job-b's JSON joins its two notes, its plan's first.
  const Scenario h = parse_scenario(text, "two-jobs.yaml");
  const std::string tp = parallelism::known_bias_note(h.jobs[1].scenario.plan);
  ASSERT_EQ(tp.rfind("4-way tensor parallelism: ", 0), 0U) << tp;
  const std::string ht = format_jobs_text(h, o);
  EXPECT_NE(ht.find("\nKnown bias     " + hopper + "\n               job-b: " + tp + "\n"), std::string::npos)
      << ht;
  const std::string hj = format_jobs_json(h, o);
  EXPECT_NE(hj.find(R"("known_bias": [)" + json_string(hopper) + "], \"untested_scale\": "),
            std::string::npos)
      << hj;
  EXPECT_NE(hj.find(R"("known_bias": [)" + json_string(tp) + ", " + json_string(hopper) + "]"),
            std::string::npos)
      << hj;
}
