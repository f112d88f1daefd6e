// The calibrated communication model (CommCalibration) on the flow backend:
// latencies, arrival skew, achieved-bandwidth efficiency, fused reductions and SM sharing,
// each against a hand-checkable time.
#include "tessera/engine/comm_calibration.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <numbers>

#include "tessera/engine/executor.hpp"
#include "tessera/engine/flow_network.hpp"
#include "tessera/engine/zero_cost_network.hpp"
#include "tessera/error.hpp"
#include "test_topologies.hpp"

using namespace tessera;
using namespace tessera::engine;
using parallelism::CollectiveKind;
using parallelism::Task;
using parallelism::TaskGraph;
using parallelism::TaskIndex;
using parallelism::TaskKind;

namespace {

Task compute(const char* name, Time duration, std::vector<TaskIndex> deps = {}) {
  Task t;
  t.name = name;
  t.kind = TaskKind::Compute;
  t.duration = duration;
  t.deps = std::move(deps);
  return t;
}

Task collective(CollectiveKind kind, Bytes size, std::vector<TaskIndex> deps = {}, std::int32_t slot = 0,
                std::int64_t id = 0) {
  Task t;
  t.name = "collective";
  t.kind = TaskKind::Collective;
  t.collective = kind;
  t.group = slot;
  t.collective_id = id;
  t.bytes = size;
  t.deps = std::move(deps);
  return t;
}

/// One collective over ranks 0..p-1.
TaskGraph one_collective(int p, CollectiveKind kind, Bytes size) {
  TaskGraph g;
  parallelism::Group all;
  for (int r = 0; r < p; ++r) all.ranks.push_back(r);
  g.groups.push_back(all);
  parallelism::Program prog;
  prog.tasks.push_back(collective(kind, size));
  const auto shared = g.add_program(std::move(prog));
  for (int r = 0; r < p; ++r) g.add_rank(shared, {0});
  return g;
}

struct Outcome {
  ExecutionResult result;
  std::vector<double> link_bytes;
};

Outcome run_flow(const topology::Topology& topo, const TaskGraph& g, const ExecutionOptions& o,
                 ExecutionObserver* obs = nullptr) {
  DiscreteEventLoop loop;
  FlowNetwork net(topo, loop);
  auto r = execute(g, loop, net, obs, o);
  return {std::move(r), net.link_bytes()};
}

const Bandwidth kLink = Bandwidth::gigabytes_per_second(300);  // per direction, like NVLink 3

CommCalibration nvlink_only(double peak, double penalty, Time launch, Time step = Time::zero()) {
  CommCalibration c;
  c.nvlink.peak_efficiency = peak;
  c.nvlink.group_penalty = penalty;
  c.nvlink.launch_latency = launch;
  c.nvlink.step_latency = step;
  return c;
}

}  // namespace

TEST(CommCalibration, RingAllReduceTakesLatencyPlusBusBytesOverEfficiencyTimesLink) {
  // Both granularities: the ring's steps, or one flow per connection
  // carrying the steps' bytes and paying their latencies in sequence.
  for (auto g : {collectives::Granularity::Steps, collectives::Granularity::Flows}) {
    // One all-reduce of S bytes over n ranks of one node (a star: each GPU one
    // link into the switch, no link latency) takes
    //   launch + 2(n-1)/n * S / (efficiency(n) * link),
    // efficiency(n) = 0.8 - 0.4 / n. Each of the 2(n-1) steps rounds up to a
    // picosecond.
    const Bytes size = Bytes::mib(64);
    for (int n : {2, 4, 8}) {
      const auto topo = test_support::star(n, kLink, Time::zero());
      ExecutionOptions o;
    o.collectives.granularity = g;
      o.collectives.ranks_per_node = n;
      o.calibration = nvlink_only(0.8, 0.4, Time::from_us(25));
      const auto out = run_flow(topo, one_collective(n, CollectiveKind::AllReduce, size), o);
      const double eff = 0.8 - 0.4 / n;
      const double expected_ps =
          25e6 + 2.0 * (n - 1) / n * size.as_double() / (eff * kLink.bytes_per_second()) * 1e12;
      EXPECT_NEAR(static_cast<double>(out.result.makespan.ps()), expected_ps, 2.0 * (n - 1)) << "n = " << n << " " << collectives::to_string(g);
      // Payload accounting: every rank sends 2(n-1)/n * S, whatever the efficiency.
      EXPECT_EQ(out.result.bytes_sent.count(), 2LL * (n - 1) * size.count());
      double total = 0;
      for (double b : out.link_bytes) total += b;
      EXPECT_DOUBLE_EQ(total, 2.0 * out.result.bytes_sent.as_double());  // GPU -> switch -> GPU: two links each
    }
  }
}

TEST(CommCalibration, LineRateDefaultKeepsTheExactAlphaBetaTime) {
  // Both granularities: the ring's steps, or one flow per connection
  // carrying the steps' bytes and paying their latencies in sequence.
  for (auto g : {collectives::Granularity::Steps, collectives::Granularity::Flows}) {
    const int n = 4;
    const Bytes size = Bytes::mib(64);
    const auto topo = test_support::star(n, kLink, Time::from_us(1));
    ExecutionOptions o;  // calibration = line rate
    o.collectives.granularity = g;
    ASSERT_TRUE(o.calibration.is_line_rate());
    const auto out = run_flow(topo, one_collective(n, CollectiveKind::AllReduce, size), o);
    const double expected_ps =
        2.0 * (n - 1) * 2e6 + 2.0 * (n - 1) / n * size.as_double() / kLink.bytes_per_second() * 1e12;
    EXPECT_NEAR(static_cast<double>(out.result.makespan.ps()), expected_ps, 2.0 * (n - 1));
  }
}

TEST(CommCalibration, StepLatencyIsPaidPerTransferOnTopOfThePathLatency) {
  // Both granularities: the ring's steps, or one flow per connection
  // carrying the steps' bytes and paying their latencies in sequence.
  for (auto g : {collectives::Granularity::Steps, collectives::Granularity::Flows}) {
    // Ring all-reduce on 4 ranks: 6 steps, each 2 x 1 us of links + 3 us.
    const int n = 4;
    const Bytes size = Bytes::mib(8);
    const auto topo = test_support::star(n, kLink, Time::from_us(1));
    ExecutionOptions o;
    o.collectives.granularity = g;
    o.collectives.ranks_per_node = n;
    o.calibration = nvlink_only(1.0, 0.0, Time::from_us(10), Time::from_us(3));
    const auto out = run_flow(topo, one_collective(n, CollectiveKind::AllReduce, size), o);
    const double expected_ps =
        10e6 + 6 * (2e6 + 3e6) + 2.0 * (n - 1) / n * size.as_double() / kLink.bytes_per_second() * 1e12;
    EXPECT_NEAR(static_cast<double>(out.result.makespan.ps()), expected_ps, 6.0);
  }
}

TEST(CommCalibration, TransfersBetweenNodesUseTheNetworkClass) {
  // Two nodes of two ranks (ranks_per_node = 2) on one star. A send-recv
  // inside a node uses the NVLink class, one between nodes the network class
  // (launch, step latency and efficiency).
  const auto topo = test_support::star(4, kLink, Time::zero());
  const Bytes size = Bytes::mib(16);
  CommCalibration c = nvlink_only(0.9, 0.2, Time::from_us(20));  // efficiency(2) = 0.8
  c.network.peak_efficiency = 0.5;
  c.network.launch_latency = Time::from_us(40);
  c.network.step_latency = Time::from_us(7);
  ExecutionOptions o;
  o.collectives.ranks_per_node = 2;
  o.calibration = c;
  auto send = [&](int src, int dst) {
    TaskGraph g;
    g.groups.push_back({{src, dst}});
    for (int r = 0; r < 4; ++r) {
      parallelism::Program p;
      if (r == src || r == dst) p.tasks.push_back(collective(CollectiveKind::SendRecv, size));
      g.add_rank(g.add_program(std::move(p)),
                 r == src || r == dst ? std::vector<std::int32_t>{0} : std::vector<std::int32_t>{});
    }
    return run_flow(topo, g, o).result.makespan;
  };
  const double wire = size.as_double() / kLink.bytes_per_second() * 1e12;
  EXPECT_NEAR(static_cast<double>(send(0, 1).ps()), 20e6 + wire / 0.8, 1.0);
  EXPECT_NEAR(static_cast<double>(send(1, 2).ps()), 40e6 + 7e6 + wire / 0.5, 1.0);
}

TEST(CommCalibration, NvlinkHopsOfAGroupAcrossNodesRunAtTheirNodesGroupSize) {
  // A ring all-reduce over 4 ranks on two nodes of two: hops 0->1 and 2->3
  // inside a node, 1->2 and 3->0 between them. The NVLink curve was fit on
  // one node's groups, so its hops here run at efficiency(2) = 0.9 - 0.4/2 =
  // 0.7 (2 ranks of the group per node), not at the whole group's
  // efficiency(4) = 0.8; the network class is at line rate. A ring step waits
  // for its predecessor's, so the critical path alternates the two kinds of
  // hop: 6 steps of S/4, half at 0.7 of the link and half at 1.
  const int n = 4;
  const Bytes size = Bytes::mib(64);
  const auto topo = test_support::star(n, kLink, Time::zero());
  ExecutionOptions o;
  o.collectives.ranks_per_node = 2;
  o.calibration = nvlink_only(0.9, 0.4, Time::zero());
  o.calibration.network.peak_efficiency = 1.0;
  o.calibration.network.launch_latency = Time::zero();
  o.calibration.network.step_latency = Time::zero();
  const auto out = run_flow(topo, one_collective(n, CollectiveKind::AllReduce, size), o);
  const double step_ps = size.as_double() / n / kLink.bytes_per_second() * 1e12;
  const double expected_ps = 3.0 * step_ps / 0.7 + 3.0 * step_ps;
  EXPECT_NEAR(static_cast<double>(out.result.makespan.ps()), expected_ps, 1e-6 * expected_ps);
}

TEST(CommCalibration, FusedReductionsAreNotCharged) {
  // Ring all-reduce on 4 ranks has 3 reducing steps on the critical path;
  // each reducing transfer costs 5 us when reductions are serial.
  const int n = 4;
  const auto topo = test_support::star(n, kLink, Time::zero());
  const auto g = one_collective(n, CollectiveKind::AllReduce, Bytes::mib(4));
  ExecutionOptions o;
  o.collectives.ranks_per_node = n;
  o.reduction_time = [](Bytes) { return Time::from_us(5); };
  const Time serial = run_flow(topo, g, o).result.makespan;
  o.calibration.fused_reductions = true;  // with nothing else: calibrated, efficiency 1, no latency
  const Time fused = run_flow(topo, g, o).result.makespan;
  EXPECT_EQ(serial - fused, Time::from_us(5LL * (n - 1)));
}

TEST(CommCalibration, InstantaneousNetworksIgnoreTheCalibration) {
  const auto g = one_collective(4, CollectiveKind::AllReduce, Bytes::mib(4));
  ExecutionOptions o;
  o.collectives.ranks_per_node = 4;
  o.calibration = CommCalibration::nccl(132);
  DiscreteEventLoop loop;
  ZeroCostNetwork net(loop);
  EXPECT_EQ(execute(g, loop, net, nullptr, o).makespan, Time::zero());
}

TEST(CommCalibration, FlowsOfLowEfficiencyOccupyMoreWireButReportPayload) {
  // Two messages of S into one GPU, efficiency 0.5: each puts 2S on the
  // shared link at half its rate: both finish at 4S/B. link_bytes counts S each.
  const auto topo = test_support::star(3, kLink, Time::zero());
  DiscreteEventLoop loop;
  FlowNetwork net(topo, loop);
  const Bytes size = Bytes::mib(3);
  Time a, b;
  net.send(Message{0, 2, size, 0.5}, [&] { a = loop.now(); });
  net.send(Message{1, 2, size, 0.5}, [&] { b = loop.now(); });
  loop.run();
  const double expected = 4.0 * size.as_double() / kLink.bytes_per_second() * 1e12;
  EXPECT_NEAR(static_cast<double>(a.ps()), expected, 1.0);
  EXPECT_NEAR(static_cast<double>(b.ps()), expected, 1.0);
  double total = 0;
  for (double x : net.link_bytes()) total += x;
  EXPECT_DOUBLE_EQ(total, 4.0 * size.as_double());  // 2 messages x 2 links, payload
  EXPECT_THROW(net.send(Message{0, 1, size, 0.0}, [] {}), SimulationError);
  EXPECT_THROW(net.send(Message{0, 1, size, 1.5}, [] {}), SimulationError);
}

// --- SM sharing ---------------------------------------------------------------

namespace {

/// Two ranks on a 1 GB/s star (no latency): a 2-rank all-reduce of 400 kB
/// takes 2 steps of 200 kB = 400 us at line rate.
const Bandwidth kSlow = Bandwidth::gigabytes_per_second(1);
const Bytes kAr = Bytes(400'000);
const Time kC = Time::from_us(400);

ExecutionOptions sm_sharing(double s) {
  ExecutionOptions o;
  o.collectives.ranks_per_node = 2;
  o.calibration.sm_slowdown = s;  // efficiency 1, no latency
  return o;
}

struct Spans : ExecutionObserver {
  std::vector<std::tuple<int, Time, Time>> compute;
  std::vector<std::pair<Time, Time>> collectives;
  void on_compute(int rank, const Task&, Time start, Time end) override {
    compute.emplace_back(rank, start, end);
  }
  void on_collective(const Task&, std::int32_t, const std::vector<int>&, Time start, Time end) override {
    collectives.emplace_back(start, end);
  }
};

}  // namespace

TEST(SmSharing, ComputeOverlappedByACollectiveEndsAtTPlusSTimesC) {
  // Both ranks: compute B (T = 1000 us) and the all-reduce, independent,
  // both start at 0. The all-reduce runs 0..400 us (C); B progresses at
  // 1 - s meanwhile: it ends at T + s C = 1100 us for s = 0.25.
  TaskGraph g;
  g.groups.push_back({{0, 1}});
  parallelism::Program p;
  p.tasks.push_back(compute("B", Time::from_us(1000)));
  p.tasks.push_back(collective(CollectiveKind::AllReduce, kAr));
  const auto shared = g.add_program(std::move(p));
  g.add_rank(shared, {0});
  g.add_rank(shared, {0});
  const auto topo = test_support::star(2, kSlow, Time::zero());
  Spans spans;
  const auto out = run_flow(topo, g, sm_sharing(0.25), &spans);
  EXPECT_EQ(out.result.makespan, Time::from_us(1100));
  ASSERT_EQ(spans.collectives.size(), 1U);
  EXPECT_EQ(spans.collectives[0], std::make_pair(Time::zero(), kC));  // communication is not slowed
  for (const auto& [rank, start, end] : spans.compute) EXPECT_EQ(end - start, Time::from_us(1100));
  for (const auto& rr : out.result.ranks) {
    EXPECT_EQ(rr.compute_busy, Time::from_us(1000));
    EXPECT_EQ(rr.overlap_slowdown, Time::from_us(100));
  }
  EXPECT_EQ(out.result.overlap_slowdown, Time::from_us(200));
  EXPECT_EQ(summarize(out.result).overlap_slowdown, Time::from_us(100));
  // Without SM sharing: T.
  EXPECT_EQ(run_flow(topo, g, sm_sharing(0.0)).result.makespan, Time::from_us(1000));
}

TEST(SmSharing, ACollectiveLaunchedMidTaskRetimesTheRunningCompute) {
  // Rank 0 starts B (1000 us) at 0 and reaches the all-reduce at 0; rank 1
  // reaches it after A (300 us). The all-reduce runs 300..700 us: rank 0's B
  // is slowed from 300 to 700 and ends at 1000 + 0.25 x 400 = 1100 us; rank
  // 1's A ran before the launch and is not slowed.
  TaskGraph g;
  g.groups.push_back({{0, 1}});
  parallelism::Program p0, p1;
  p0.tasks.push_back(compute("B", Time::from_us(1000)));
  p0.tasks.push_back(collective(CollectiveKind::AllReduce, kAr));
  p1.tasks.push_back(compute("A", Time::from_us(300)));
  p1.tasks.push_back(collective(CollectiveKind::AllReduce, kAr, {0}));
  g.add_rank(g.add_program(std::move(p0)), {0});
  g.add_rank(g.add_program(std::move(p1)), {0});
  const auto topo = test_support::star(2, kSlow, Time::zero());
  const auto out = run_flow(topo, g, sm_sharing(0.25));
  EXPECT_EQ(out.result.ranks[0].finish, Time::from_us(1100));
  EXPECT_EQ(out.result.ranks[0].overlap_slowdown, Time::from_us(100));
  EXPECT_EQ(out.result.ranks[1].finish, Time::from_us(700));
  EXPECT_EQ(out.result.ranks[1].overlap_slowdown, Time::zero());
}

TEST(SmSharing, ComputeShorterThanTheOverlapRunsAtOneMinusS) {
  // B (300 us) inside a 400 us collective: 300 / (1 - 0.25) = 400 us.
  TaskGraph g;
  g.groups.push_back({{0, 1}});
  parallelism::Program p;
  p.tasks.push_back(compute("B", Time::from_us(300)));
  p.tasks.push_back(collective(CollectiveKind::AllReduce, kAr));
  const auto shared = g.add_program(std::move(p));
  g.add_rank(shared, {0});
  g.add_rank(shared, {0});
  const auto topo = test_support::star(2, kSlow, Time::zero());
  Spans spans;
  const auto out = run_flow(topo, g, sm_sharing(0.25), &spans);
  for (const auto& [rank, start, end] : spans.compute) EXPECT_EQ(end, Time::from_us(400));
  EXPECT_EQ(out.result.ranks[0].overlap_slowdown, Time::from_us(100));
}

TEST(SmSharing, NoOverlapCostsNothingAndNonBinaryFactorsRoundToThePicosecond) {
  // A -> all-reduce -> B on each rank: nothing overlaps, so the makespan is
  // the same with and without SM sharing. Then s = 0.1 overlapping 400 us
  // adds 40 us to a 1000 us task (to the picosecond).
  TaskGraph g;
  g.groups.push_back({{0, 1}});
  parallelism::Program p;
  p.tasks.push_back(compute("A", Time::from_us(100)));
  p.tasks.push_back(collective(CollectiveKind::AllReduce, kAr, {0}));
  p.tasks.push_back(compute("B", Time::from_us(200), {1}));
  const auto shared = g.add_program(std::move(p));
  g.add_rank(shared, {0});
  g.add_rank(shared, {0});
  const auto topo = test_support::star(2, kSlow, Time::zero());
  const auto with = run_flow(topo, g, sm_sharing(0.2)).result;
  EXPECT_EQ(with.makespan, Time::from_us(100 + 400 + 200));
  EXPECT_EQ(with.overlap_slowdown, Time::zero());

  TaskGraph h;
  h.groups.push_back({{0, 1}});
  parallelism::Program q;
  q.tasks.push_back(compute("B", Time::from_us(1000)));
  q.tasks.push_back(collective(CollectiveKind::AllReduce, kAr));
  const auto shared_q = h.add_program(std::move(q));
  h.add_rank(shared_q, {0});
  h.add_rank(shared_q, {0});
  const auto a = run_flow(topo, h, sm_sharing(0.1)).result;
  const auto b = run_flow(topo, h, sm_sharing(0.1)).result;
  EXPECT_NEAR(static_cast<double>(a.makespan.ps()), 1040e6, 1.0);
  EXPECT_EQ(a.makespan, b.makespan);  // deterministic
  EXPECT_EQ(a.overlap_slowdown, b.overlap_slowdown);
}

// --- The value type and its fit ---------------------------------------------

TEST(CommCalibration, DefaultsAndValidation) {
  const auto c = CommCalibration::nccl(132);
  EXPECT_FALSE(c.is_line_rate());
  EXPECT_DOUBLE_EQ(c.sm_slowdown, 24.0 / 132.0);
  EXPECT_DOUBLE_EQ(CommCalibration::nccl(108).sm_slowdown, 24.0 / 108.0);
  EXPECT_DOUBLE_EQ(CommCalibration::nccl(0).sm_slowdown, 0.0);
  EXPECT_TRUE(c.fused_reductions);
  EXPECT_NEAR(c.nvlink.efficiency(2), c.nvlink.peak_efficiency - c.nvlink.group_penalty / 2, 1e-15);
  EXPECT_GT(c.nvlink.efficiency(8), c.nvlink.efficiency(2));
  EXPECT_NO_THROW(c.validate());
  EXPECT_TRUE(CommCalibration::line_rate().is_line_rate());

  auto bad = c;
  bad.nvlink.peak_efficiency = 1.2;
  EXPECT_THROW(bad.validate(), InputError);
  bad = c;
  bad.network.group_penalty = 5.0;  // efficiency(2) < 0
  EXPECT_THROW(bad.validate(), InputError);
  bad = c;
  bad.sm_slowdown = 1.0;
  EXPECT_THROW(bad.validate(), InputError);
  bad = c;
  bad.nvlink.launch_latency = Time::from_ps(-1);
  EXPECT_THROW(bad.validate(), InputError);
  // The executor checks a calibration it applies.
  ExecutionOptions o;
  o.calibration = c;
  o.calibration.sm_slowdown = -0.5;
  const auto topo = test_support::star(2, kLink, Time::zero());
  EXPECT_THROW(run_flow(topo, one_collective(2, CollectiveKind::AllReduce, Bytes::mib(1)), o), InputError);
}

TEST(CommCalibration, FitRecoversTheParametersThatMadeTheSamples) {
  // Samples made by the closed form from known parameters (efficiency
  // 0.85 - 0.5 / n, launch 30 us) over 2..8 ranks and 1 MiB..1 GiB: the fit
  // finds them again (the grid resolves 0.0002 in efficiency).
  LinkCalibration truth;
  truth.peak_efficiency = 0.85;
  truth.group_penalty = 0.5;
  truth.launch_latency = Time::from_us(30);
  std::vector<CollectiveSample> samples;
  for (int n = 2; n <= 8; ++n) {
    for (std::int64_t mib = 1; mib <= 1024; mib *= 2) {
      CollectiveSample s;
      s.group_size = n;
      s.steps = 2 * (n - 1);
      s.wire = Bytes(2LL * (n - 1) * (Bytes::mib(mib).count() / n));
      s.link = kLink;
      s.path_latency = Time::from_us(2);
      s.measured = Time::from_seconds(uncontended_seconds(truth, s));
      samples.push_back(s);
    }
  }
  const auto fit = fit_link_calibration(samples);
  EXPECT_NEAR(fit.peak_efficiency, 0.85, 0.0005);
  EXPECT_NEAR(fit.group_penalty, 0.5, 0.002);
  EXPECT_NEAR(fit.launch_latency.us(), 30.0, 0.1);
  EXPECT_LT(weighted_mape(fit, samples), 1e-4);
  // Without the group penalty the same samples are fitted worse.
  EXPECT_GT(weighted_mape(fit_link_calibration(samples, false), samples), 0.02);
  EXPECT_THROW(fit_link_calibration({}), InputError);
  // A slow link (a user's network at a fifth of its line rate) is inside
  // the grid too (peak from 0.06).
  truth.peak_efficiency = 0.2;
  truth.group_penalty = 0.0;
  for (auto& s : samples) s.measured = Time::from_seconds(uncontended_seconds(truth, s));
  const auto slow = fit_link_calibration(samples, false);
  EXPECT_NEAR(slow.peak_efficiency, 0.2, 0.0005);
  EXPECT_NEAR(slow.launch_latency.us(), 30.0, 0.1);
}

TEST(CommCalibration, ExpectedMaximumOfNormalsMatchesItsClosedForms) {
  // E[max] of 2 and 3 standard normals: 1/sqrt(pi) and 3/(2 sqrt(pi)); of 4
  // and 8 from tables of normal order statistics (1.029375, 1.423600).
  const double pi = std::numbers::pi;
  EXPECT_EQ(expected_max_normal(1), 0.0);
  EXPECT_EQ(expected_max_normal(0), 0.0);
  EXPECT_NEAR(expected_max_normal(2), 1.0 / std::sqrt(pi), 1e-9);
  EXPECT_NEAR(expected_max_normal(3), 1.5 / std::sqrt(pi), 1e-9);
  EXPECT_NEAR(expected_max_normal(4), 1.029375, 1e-6);
  EXPECT_NEAR(expected_max_normal(8), 1.423600, 1e-6);
  // Slowly in n (below sqrt(2 ln n)): 3.2414 at 1,000 ranks (Tippett's
  // table), 3.97 at 16,384.
  EXPECT_NEAR(expected_max_normal(1000), 3.24144, 1e-4);
  EXPECT_NEAR(expected_max_normal(16384), 3.9714, 1e-3);
}

TEST(CommCalibration, SkewDelaysEveryCollectiveByTheExpectedLatestArrival) {
  // A 4-rank all-reduce with skew 100 us waits 100 x 1.029375 us more than
  // without; a send between two ranks (its receiver already waits for its
  // sender through the task graph) is not delayed.
  const int n = 4;
  const auto topo = test_support::star(n, kLink, Time::zero());
  ExecutionOptions o;
  o.collectives.ranks_per_node = n;
  o.calibration = nvlink_only(0.8, 0.4, Time::from_us(25));
  const auto g = one_collective(n, CollectiveKind::AllReduce, Bytes::mib(8));
  const Time plain = run_flow(topo, g, o).result.makespan;
  o.calibration.nvlink.skew = Time::from_us(100);
  const Time skewed = run_flow(topo, g, o).result.makespan;
  EXPECT_EQ(skewed - plain, Time::from_ps(std::llround(100e6 * expected_max_normal(n))));
  EXPECT_NEAR(static_cast<double>((skewed - plain).ps()), 102.9375e6, 1e3);  // 102.9375 us

  // The network class's skew does not touch a collective inside one node.
  o.calibration.nvlink.skew = Time::zero();
  o.calibration.network.skew = Time::from_us(100);
  EXPECT_EQ(run_flow(topo, g, o).result.makespan, plain);

  // Send-recv: unchanged by either skew.
  TaskGraph send;
  send.groups.push_back({{0, 1}});
  for (int r = 0; r < 2; ++r) {
    parallelism::Program p;
    p.tasks.push_back(collective(CollectiveKind::SendRecv, Bytes::mib(8)));
    send.add_rank(send.add_program(std::move(p)), {0});
  }
  o.calibration.nvlink.skew = Time::zero();
  o.calibration.network.skew = Time::zero();
  const auto pair = test_support::star(2, kLink, Time::zero());
  const Time send_plain = run_flow(pair, send, o).result.makespan;
  o.calibration.nvlink.skew = Time::from_us(100);
  EXPECT_EQ(run_flow(pair, send, o).result.makespan, send_plain);
  EXPECT_GT(send_plain, Time::from_us(25));  // it ran, with its launch latency

  // A negative skew is rejected with the class named.
  CommCalibration bad = o.calibration;
  bad.nvlink.skew = Time::from_ps(-1);
  EXPECT_THROW(bad.validate(), InputError);
}

TEST(CommCalibration, LogSizeWeightsGiveEachSizeItsLogInterval) {
  // 1, 2, 4, 8 MiB: half the log distance between neighbours, ln 2 x
  // (1/2, 1, 1, 1/2), normalised: 1/6, 1/3, 1/3, 1/6, in any order; a size
  // below the minimum weighs 0; one size alone weighs 1.
  const std::vector<Bytes> sizes = {Bytes::mib(4), Bytes::mib(1), Bytes(512), Bytes::mib(8), Bytes::mib(2)};
  const auto w = log_size_weights(sizes, Bytes::mib(1));
  ASSERT_EQ(w.size(), 5U);
  EXPECT_NEAR(w[0], 1.0 / 3, 1e-12);
  EXPECT_NEAR(w[1], 1.0 / 6, 1e-12);
  EXPECT_EQ(w[2], 0.0);
  EXPECT_NEAR(w[3], 1.0 / 6, 1e-12);
  EXPECT_NEAR(w[4], 1.0 / 3, 1e-12);
  EXPECT_EQ(log_size_weights(std::vector<Bytes>{Bytes::mib(2)}, Bytes::mib(1)), std::vector<double>{1.0});
  EXPECT_EQ(log_size_weights(std::vector<Bytes>{Bytes(10)}, Bytes::mib(1)), std::vector<double>{0.0});
}
