#include <gtest/gtest.h>

#include "tessera/engine/executor.hpp"
#include "tessera/engine/flow_network.hpp"
#include "tessera/error.hpp"
#include "test_topologies.hpp"

using namespace tessera;
using namespace tessera::engine;
using parallelism::Task;
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

TEST(Executor, CommunicationOverlapsIndependentCompute) {
  // Per rank: A (10us) -> all-reduce; B (20us) after A runs meanwhile;
  // C (5us) needs both. 2 ranks, 1 MB at 8 Gb/s (1 GB/s): the all-reduce
  // sends 2(p-1)/p * 1 MB = 1 MB in 2 steps of 500 us each (no latency).
  parallelism::TaskGraph g;
  g.groups.push_back({{0, 1}});
  for (int r = 0; r < 2; ++r) {
    parallelism::RankProgram prog;
    prog.tasks.push_back(compute("A", 10));
    prog.tasks.push_back(all_reduce(0, Bytes(1'000'000), {0}));
    prog.tasks.push_back(compute("B", 20, {0}));
    prog.tasks.push_back(compute("C", 5, {1, 2}));
    g.ranks.push_back(prog);
  }
  const auto topo = test_support::star(2, parse_bandwidth("8Gbps"), Time::zero());
  DiscreteEventLoop loop;
  FlowNetwork net(topo, loop);
  const auto r = execute(g, loop, net);
  EXPECT_EQ(r.makespan, Time::from_us(10 + 1000 + 5));
  const auto s = summarize(r);
  EXPECT_EQ(s.compute_time, Time::from_us(35));
  EXPECT_EQ(s.exposed_comm_time, Time::from_us(1015 - 35));
  EXPECT_NEAR(s.tflops_per_gpu, 35e6 / 1015e-6 * 1e-12, 1e-12);
}

TEST(Executor, ComputeStreamRunsInProgramOrder) {
  // B does not depend on A, but the stream runs A first: makespan = 30us.
  parallelism::TaskGraph g;
  parallelism::RankProgram prog;
  prog.tasks.push_back(compute("A", 10));
  prog.tasks.push_back(compute("B", 20));
  g.ranks.push_back(prog);
  const auto topo = test_support::star(1, parse_bandwidth("8Gbps"), Time::zero());
  DiscreteEventLoop loop;
  FlowNetwork net(topo, loop);
  EXPECT_EQ(execute(g, loop, net).makespan, Time::from_us(30));
}

TEST(Executor, CrossedCollectivesDeadlockIsReported) {
  parallelism::TaskGraph g;
  g.groups.push_back({{0, 1}});
  g.ranks.resize(2);
  g.ranks[0].tasks = {all_reduce(1, Bytes(8), {}), all_reduce(2, Bytes(8), {})};
  g.ranks[1].tasks = {all_reduce(2, Bytes(8), {}), all_reduce(1, Bytes(8), {})};
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
      parallelism::RankProgram prog;
      prog.tasks.push_back(compute("A", 3 + r));
      prog.tasks.push_back(all_reduce(0, Bytes(123'457), {0}));
      prog.tasks.push_back(compute("B", 7, {1}));
      g.ranks.push_back(prog);
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
