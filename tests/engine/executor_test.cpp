#include <gtest/gtest.h>

#include "tessera/engine/executor.hpp"
#include "tessera/engine/flow_network.hpp"
#include "tessera/engine/zero_cost_network.hpp"
#include "tessera/error.hpp"
#include "tessera/node_model/roofline.hpp"
#include "tessera/parallelism/plan.hpp"
#include "test_topologies.hpp"

using namespace tessera;
using namespace tessera::engine;
using parallelism::Task;
using parallelism::TaskGraph;
using parallelism::TaskKind;

namespace {
Task compute(const char* name, std::int64_t us, std::vector<parallelism::TaskIndex> deps = {}) {
  Task t;
  t.name = name;
  t.kind = TaskKind::Compute;
  t.duration = Time::from_us(us);
  t.flops = Flops(1e6 * static_cast<double>(us));
  t.deps = std::move(deps);
  return t;
}
Task all_reduce(std::int64_t id, Bytes size, std::vector<parallelism::TaskIndex> deps) {
  Task t;
  t.name = "ar";
  t.kind = TaskKind::Collective;
  t.group = 0;
  t.collective_id = id;
  t.bytes = size;
  t.deps = std::move(deps);
  return t;
}
}  // namespace

namespace {
/// Per rank of 2: A (10us) -> all-reduce of 1 MB; B (20us) after A runs
/// meanwhile; C (5us) needs both.
TaskGraph overlap_graph() {
  parallelism::TaskGraph g;
  g.groups.push_back({{0, 1}});
  for (int r = 0; r < 2; ++r) {
    parallelism::Program prog;
    prog.tasks.push_back(compute("A", 10));
    prog.tasks.push_back(all_reduce(0, Bytes(1'000'000), {0}));
    prog.tasks.push_back(compute("B", 20, {0}));
    prog.tasks.push_back(compute("C", 5, {1, 2}));
    g.add_rank(g.add_program(std::move(prog)), {0});
  }
  return g;
}
}  // namespace

TEST(Executor, CommunicationOverlapsIndependentCompute) {
  // overlap_graph at 8 Gb/s (1 GB/s): the all-reduce sends 2(p-1)/p * 1 MB
  // = 1 MB in 2 steps of 500 us each (no latency).
  const TaskGraph g = overlap_graph();
  const auto topo = test_support::star(2, parse_bandwidth("8Gbps"), Time::zero());
  DiscreteEventLoop loop;
  FlowNetwork net(topo, loop);
  const auto r = execute(g, loop, net);
  EXPECT_EQ(r.makespan, Time::from_us(10 + 1000 + 5));
  const auto s = summarize(r);
  for (const auto& rank : r.ranks) EXPECT_EQ(rank.compute_busy, Time::from_us(35));
  EXPECT_EQ(s.iteration_time, Time::from_us(1015));
  EXPECT_NEAR(s.tflops_per_gpu, 35e6 / 1015e-6 * 1e-12, 1e-12);
}

// The counterfactual of a free class of collectives: overlap_graph with
// its all-reduce free runs A, B, C back to back: 10 + 20 + 5 = 35 us, and
// sends nothing; a predicate that matches nothing changes nothing (1015 us).
TEST(Executor, AFreeCollectiveCompletesWhenItsMembersArrive) {
  const TaskGraph g = overlap_graph();
  const auto topo = test_support::star(2, parse_bandwidth("8Gbps"), Time::zero());
  for (const bool free : {true, false}) {
    ExecutionOptions o;
    o.free_collective = [free](const Task& t) { return free && t.name == "ar"; };
    DiscreteEventLoop loop;
    FlowNetwork net(topo, loop);
    const auto r = execute(g, loop, net, nullptr, o);
    EXPECT_EQ(r.makespan, Time::from_us(free ? 35 : 1015)) << free;
    EXPECT_EQ(r.bytes_sent, Bytes(free ? 0 : 2'000'000)) << free;
  }
}

TEST(Executor, ComputeStreamRunsInProgramOrder) {
  // B does not depend on A, but the stream runs A first: makespan = 30us.
  parallelism::TaskGraph g;
  parallelism::Program prog;
  prog.tasks.push_back(compute("A", 10));
  prog.tasks.push_back(compute("B", 20));
  g.add_rank(g.add_program(std::move(prog)), {});
  const auto topo = test_support::star(1, parse_bandwidth("8Gbps"), Time::zero());
  DiscreteEventLoop loop;
  FlowNetwork net(topo, loop);
  EXPECT_EQ(execute(g, loop, net).makespan, Time::from_us(30));
}

TEST(Executor, CrossedCollectivesDeadlockIsReported) {
  parallelism::TaskGraph g;
  g.groups.push_back({{0, 1}});
  parallelism::Program a, b;
  a.tasks = {all_reduce(1, Bytes(8), {}), all_reduce(2, Bytes(8), {})};
  b.tasks = {all_reduce(2, Bytes(8), {}), all_reduce(1, Bytes(8), {})};
  g.add_rank(g.add_program(std::move(a)), {0});
  g.add_rank(g.add_program(std::move(b)), {0});
  const auto topo = test_support::star(2, parse_bandwidth("8Gbps"), Time::zero());
  DiscreteEventLoop loop;
  FlowNetwork net(topo, loop);
  EXPECT_THROW(execute(g, loop, net), SimulationError);
}

TEST(Executor, SameInputSameOutput) {
  auto run = [] {
    parallelism::TaskGraph g;
    g.groups.push_back({{0, 1, 2, 3}});
    for (int r = 0; r < 4; ++r) {
      parallelism::Program prog;
      prog.tasks.push_back(compute("A", 3 + r));
      prog.tasks.push_back(all_reduce(0, Bytes(123'457), {0}));
      prog.tasks.push_back(compute("B", 7, {1}));
      g.add_rank(g.add_program(std::move(prog)), {0});
    }
    const auto topo = test_support::star(4, parse_bandwidth("10Gbps"), parse_time("700ns"));
    DiscreteEventLoop loop;
    FlowNetwork net(topo, loop);
    return execute(g, loop, net).makespan;
  };
  const Time first = run();
  EXPECT_EQ(run(), first);
  EXPECT_GT(first, Time::from_us(10));
}

namespace {

/// The graph as it was before programs were shared: a program per rank,
/// whose slots are the global groups (identity bindings) and whose ids are
/// (group << 32) | n, globally unique.
TaskGraph one_program_per_rank(const TaskGraph& g) {
  TaskGraph out;
  out.groups = g.groups;
  std::vector<std::int32_t> identity(g.groups.size());
  for (std::size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<std::int32_t>(i);
  for (int r = 0; r < g.num_ranks(); ++r) {
    parallelism::Program prog = g.program(r);  // a copy; the names are shared
    for (Task& t : prog.tasks) {
      if (t.kind != TaskKind::Collective) continue;
      const std::int32_t global = g.group_of(r, t.group);
      t.group = global;
      t.collective_id = (static_cast<std::int64_t>(global) << 32) | t.collective_id;
    }
    out.add_rank(out.add_program(std::move(prog)), identity);
  }
  return out;
}

/// Every compute and collective span, in observation order.
class Spans final : public ExecutionObserver {
 public:
  void on_compute(int rank, const Task& t, Time start, Time end) override {
    spans.push_back(fmt::format("c {} {} {} {}", rank, t.name, start.ps(), end.ps()));
  }
  void on_collective(const Task& t, std::int32_t group, const std::vector<int>& /*ranks*/, Time start,
                     Time end) override {
    spans.push_back(fmt::format("g {} {} {} {}", group, t.name, start.ps(), end.ps()));
  }
  std::vector<std::string> spans;
};

}  // namespace

TEST(Executor, SharedProgramsRunLikeOneProgramPerRank) {
  // dp 2 x tp 2 x pp 2 with sequence parallelism and ZeRO-1: two programs,
  // eight bindings; the same schedule to the picosecond as eight programs
  // addressing global groups directly.
  const parallelism::TransformerConfig model{"tiny", 8, 256, 8, 1024, 1000};
  const parallelism::Workload work{1, 128, node_model::DType::BF16};
  parallelism::ParallelPlan plan;
  plan.dp = 2;
  plan.tp = 2;
  plan.pp = 2;
  plan.global_batch = 8;
  plan.sequence_parallel = true;
  plan.zero_stage = 1;
  plan.bucket_size = Bytes(400'000);
  node_model::RooflinePredictor pred(node_model::gpu_preset("H100-SXM"));
  const TaskGraph shared = parallelism::plan_training(model, work, plan, pred);
  ASSERT_EQ(shared.programs.size(), 2U);
  const TaskGraph flat = one_program_per_rank(shared);
  ASSERT_EQ(flat.programs.size(), 8U);
  const auto topo = test_support::star(8, parse_bandwidth("100Gbps"), parse_time("500ns"));
  auto run = [&](const TaskGraph& g, Spans& spans) {
    DiscreteEventLoop loop;
    FlowNetwork net(topo, loop);
    return execute(g, loop, net, &spans);
  };
  Spans a, b;
  const auto ra = run(shared, a);
  const auto rb = run(flat, b);
  EXPECT_EQ(ra.makespan, rb.makespan);
  EXPECT_EQ(ra.transfers, rb.transfers);
  for (std::size_t r = 0; r < ra.ranks.size(); ++r) {
    EXPECT_EQ(ra.ranks[r].finish, rb.ranks[r].finish) << "rank " << r;
  }
  EXPECT_EQ(a.spans, b.spans);
  EXPECT_GT(a.spans.size(), 100U);
}

namespace {
/// One all-reduce of `size` per rank over 8 ranks on 2 nodes of 4
/// (ranks_per_node 4), with `algorithm`; returns the result on the flow
/// network (`flow`) or the zero-cost one (which counts whole
/// expansions at once).
ExecutionResult all_reduce_on_two_nodes(collectives::Algorithm algorithm, Bytes size, bool flow) {
  parallelism::TaskGraph g;
  g.groups.push_back({{0, 1, 2, 3, 4, 5, 6, 7}});
  for (int r = 0; r < 8; ++r) {
    parallelism::Program prog;
    prog.tasks.push_back(all_reduce(0, size, {}));
    g.add_rank(g.add_program(std::move(prog)), {0});
  }
  ExecutionOptions options;
  options.collectives.algorithm = algorithm;
  options.collectives.ranks_per_node = 4;
  DiscreteEventLoop loop;
  const auto topo = test_support::star(8, parse_bandwidth("8Gbps"), Time::zero());
  if (flow) {
    FlowNetwork net(topo, loop);
    return execute(g, loop, net, nullptr, options);
  }
  ZeroCostNetwork net(loop);
  return execute(g, loop, net, nullptr, options);
}
}  // namespace

TEST(Executor, SentBytesSplitIntoNvlinkAndFabricForARing) {
  // Ring 0..7 over 2 nodes of 4: 2(p-1) = 14 steps, each rank sends S/8 per
  // step; of the 8 sends of a step, 3->4 and 7->0 cross nodes. Fabric:
  // 14 * 2 * S/8 = 3.5 S; NVLink: 14 * 6 * S/8 = 10.5 S. S = 1 MB.
  for (bool flow : {true, false}) {
    const auto r = all_reduce_on_two_nodes(collectives::Algorithm::Ring, Bytes(1'000'000), flow);
    EXPECT_EQ(r.fabric_bytes, Bytes(3'500'000)) << "flow " << flow;
    EXPECT_EQ(r.nvlink_bytes, Bytes(10'500'000)) << "flow " << flow;
    EXPECT_EQ(r.bytes_sent, Bytes(14'000'000)) << "flow " << flow;
  }
}

TEST(Executor, SentBytesSplitIntoNvlinkAndFabricForHierarchical) {
  // Hierarchical over N = 2 nodes of L = 4 (docs/collectives.md): each rank
  // sends 2(L-1)/L S = 1.5 S inside its node and 2(N-1)/N S/L = S/4 across
  // nodes. 8 ranks, S = 1 MB: NVLink 12 MB, fabric 2 MB.
  for (bool flow : {true, false}) {
    const auto r = all_reduce_on_two_nodes(collectives::Algorithm::Hierarchical, Bytes(1'000'000), flow);
    EXPECT_EQ(r.nvlink_bytes, Bytes(12'000'000)) << "flow " << flow;
    EXPECT_EQ(r.fabric_bytes, Bytes(2'000'000)) << "flow " << flow;
    EXPECT_EQ(r.bytes_sent, r.nvlink_bytes + r.fabric_bytes);
  }
}

namespace {
/// A forward-only two-stage pipeline of m micro-batches: stage 0 computes
/// F_i (d us) and sends it to stage 1, which computes F_i (d us). Four ranks:
/// two replicas (0 -> 1 and 2 -> 3) running the same two programs.
TaskGraph two_stage_pipeline(int m, std::int64_t d) {
  TaskGraph g;
  parallelism::Program first;
  parallelism::Program second;
  for (int i = 0; i < m; ++i) {
    const auto f = static_cast<parallelism::TaskIndex>(first.tasks.size());
    first.tasks.push_back(compute("F", d, i > 0 ? std::vector<parallelism::TaskIndex>{f - 2} : std::vector<parallelism::TaskIndex>{}));
    Task send;
    send.name = "send";
    send.kind = TaskKind::Collective;
    send.collective = parallelism::CollectiveKind::SendRecv;
    send.group = 0;
    send.collective_id = i;
    send.bytes = Bytes(1000);
    send.deps = {f};
    first.tasks.push_back(send);
    Task recv = send;
    recv.name = "recv";
    recv.deps = {};
    const auto r = static_cast<parallelism::TaskIndex>(second.tasks.size());
    if (i > 0) recv.deps = {r - 1};
    second.tasks.push_back(recv);
    second.tasks.push_back(compute("F", d, {r}));
  }
  g.groups.push_back({{0, 1}});
  g.groups.push_back({{2, 3}});
  const auto p0 = g.add_program(std::move(first));
  const auto p1 = g.add_program(std::move(second));
  g.add_rank(p0, {0});
  g.add_rank(p1, {0});
  g.add_rank(p0, {1});
  g.add_rank(p1, {1});
  return g;
}
}  // namespace

// The one scaling rule (the executor's and the trace's): picoseconds x
// factor, rounded half away from zero; a factor of 1 is the duration itself.
TEST(Executor, ScaledDurationRoundsToThePicosecond) {
  EXPECT_EQ(scaled_duration(Time::from_ps(3), 1.5), Time::from_ps(5));  // 4.5 -> 5
  EXPECT_EQ(scaled_duration(Time::from_ps(3), 1.1), Time::from_ps(3));  // 3.3 -> 3
  EXPECT_EQ(scaled_duration(Time::from_us(1), 1e-3), Time::from_ns(1));
  EXPECT_EQ(scaled_duration(Time::from_ms(150), 1.0), Time::from_ms(150));
  EXPECT_EQ(scaled_duration(Time::from_ms(100), 1.5), Time::from_ms(150));
}

// A straggler: stage 1 of the first replica runs its compute f times slower.
// With free communication stage 0 produces a micro-batch every d, stage 1
// consumes one every f d (f >= 1), so that replica ends at d + m f d; the
// other replica, at its predicted speed, at d + m d. Its compute time counts
// the slowdown. The free-network quotient keeps the straggler apart.
TEST(Executor, StragglerLengthensItsPipelineByHand) {
  const int m = 6;
  const std::int64_t d = 100;
  const TaskGraph g = two_stage_pipeline(m, d);
  ExecutionOptions o;
  o.compute_scale = {1.0, 1.5, 1.0, 1.0};
  DiscreteEventLoop loop;
  ZeroCostNetwork net(loop);
  const auto r = execute(g, loop, net, nullptr, o);
  EXPECT_EQ(r.ranks[1].finish, Time::from_us(d + std::int64_t{m} * 150));
  EXPECT_EQ(r.ranks[3].finish, Time::from_us(d + m * d));
  EXPECT_EQ(r.ranks[1].compute_busy, Time::from_us(std::int64_t{m} * 150));
  EXPECT_EQ(r.ranks[3].compute_busy, Time::from_us(m * d));
  EXPECT_EQ(r.makespan, Time::from_us(d + std::int64_t{m} * 150));
  const auto quick = execute_on_free_network(g, o);
  ASSERT_EQ(quick.ranks.size(), 4U);
  for (std::size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(quick.ranks[k].finish, r.ranks[k].finish) << k;
    EXPECT_EQ(quick.ranks[k].compute_busy, r.ranks[k].compute_busy) << k;
  }
  EXPECT_EQ(parallelism::symmetry_quotient(g).graph.num_ranks(), 2);
  // Rank 1 apart splits rank 0 from rank 2 too: their partners differ.
  EXPECT_EQ(parallelism::symmetry_quotient(g, {0, 1, 0, 0}).graph.num_ranks(), 4);
  EXPECT_EQ(parallelism::symmetry_quotient(g, {0, 1, 0, 1}).graph.num_ranks(), 2);
  // Bad factors are refused before running.
  o.compute_scale = {1.0, 0.0, 1.0, 1.0};
  DiscreteEventLoop loop2;
  ZeroCostNetwork net2(loop2);
  EXPECT_THROW((void)execute(g, loop2, net2, nullptr, o), InputError);
  o.compute_scale = {1.0};
  EXPECT_THROW((void)execute(g, loop2, net2, nullptr, o), InputError);
}

namespace {
/// A network whose every path takes `before` until `at` and `after` from
/// then on, its routing epoch moving with it (a cable failed at `at`);
/// bytes are free: a message arrives one path latency plus its delay_after
/// after it is sent.
class RerouteAtNetwork final : public Network {
 public:
  RerouteAtNetwork(EventLoop& loop, Time at, Time before, Time after)
      : loop_(loop), at_(at), before_(before), after_(after) {}
  void send(const Message& msg, Callback on_delivered) override {
    loop_.schedule(latency(msg.src, msg.dst) + msg.delay_after, std::move(on_delivered));
  }
  [[nodiscard]] Time latency(int /*src*/, int /*dst*/) override { return rerouted() ? after_ : before_; }
  [[nodiscard]] std::uint64_t routing_epoch() const override { return rerouted() ? 1 : 0; }

 private:
  [[nodiscard]] bool rerouted() const { return loop_.now() >= at_; }
  EventLoop& loop_;
  Time at_, before_, after_;
};
}  // namespace

// Two ring all-reduces of the same size on the same pair, 1 ms apart, as
// flows: each rank's flow carries both steps (2(p-1) = 2), so it pays its
// path latency twice. Paths take 1 us until 0.5 ms and 5 us after (a
// rerouted path): 2 us, then 1 ms of compute, then 10 us. The second was
// 5 + 1 us while the costs were cached by (kind, group, bytes) alone
// (helper 57): they hold the path latency of before the failure.
TEST(Executor, ACollectiveAfterAReroutePaysTheNewPathsLatency) {
  TaskGraph g;
  g.groups.push_back({{0, 1}});
  for (int r = 0; r < 2; ++r) {
    parallelism::Program prog;
    prog.tasks.push_back(all_reduce(0, Bytes(1'000'000), {}));
    prog.tasks.push_back(compute("A", 1000, {0}));
    prog.tasks.push_back(all_reduce(1, Bytes(1'000'000), {1}));
    g.add_rank(g.add_program(std::move(prog)), {0});
  }
  ExecutionOptions o;
  o.collectives.algorithm = collectives::Algorithm::Ring;
  o.collectives.granularity = collectives::Granularity::Flows;
  o.calibration = CommCalibration::line_rate();
  DiscreteEventLoop loop;
  RerouteAtNetwork net(loop, Time::from_us(500), Time::from_us(1), Time::from_us(5));
  const auto r = execute(g, loop, net, nullptr, o);
  EXPECT_EQ(r.makespan, Time::from_us(2 + 1000 + 10));
}
