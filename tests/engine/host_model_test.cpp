// The host model of the executor (docs/engine.md, "Host model"): a rank's
// host issues its tasks in program order, runs ahead of the GPU, and waits at
// host_sync tasks. Hand-checkable times on a zero-cost network.
#include <gtest/gtest.h>

#include "tessera/engine/executor.hpp"
#include "tessera/engine/zero_cost_network.hpp"
#include "tessera/parallelism/task_graph.hpp"

using namespace tessera;
using namespace tessera::engine;
using parallelism::Task;
using parallelism::TaskGraph;
using parallelism::TaskKind;

namespace {

/// A compute task of `gpu_us` whose kernels take `issue_us` of host time to
/// launch, the last kernel running once issued.
Task kernels(std::int64_t gpu_us, std::int64_t issue_us, std::int64_t span_us = -1) {
  Task t;
  t.name = "k";
  t.kind = TaskKind::Compute;
  t.duration = Time::from_us(gpu_us);
  t.host_issue = Time::from_us(issue_us);
  t.host_span = Time::from_us(span_us >= 0 ? span_us : std::max(gpu_us, issue_us));
  return t;
}

ExecutionResult run_one_rank(std::vector<Task> tasks) {
  TaskGraph g;
  parallelism::Program prog;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    if (i > 0) tasks[i].deps.push_back(static_cast<parallelism::TaskIndex>(i - 1));
    prog.tasks.push_back(tasks[i]);
  }
  g.add_rank(g.add_program(std::move(prog)), {});
  DiscreteEventLoop loop;
  ZeroCostNetwork net(loop);
  return execute(g, loop, net);
}

}  // namespace

TEST(HostModel, ZeroHostCostsChangeNothing) {
  Task a = kernels(10, 0, 0);
  Task b = kernels(20, 0, 0);
  const auto r = run_one_rank({a, b});
  EXPECT_EQ(r.makespan, Time::from_us(30));
  EXPECT_EQ(r.ranks[0].host_wait, Time::zero());
}

TEST(HostModel, AHostSlowerThanTheGpuSetsThePace) {
  // Three tasks of 1 us GPU time whose launches take 3 us each: issued at 0,
  // 3 and 6 us, each ending 1 us after its issue completes (span 4 us).
  const Task t = kernels(1, 3, 4);
  const auto r = run_one_rank({t, t, t});
  EXPECT_EQ(r.makespan, Time::from_us(10));
  EXPECT_EQ(r.ranks[0].compute_busy, Time::from_us(3));
  EXPECT_EQ(r.ranks[0].host_wait, Time::from_us(7));
}

TEST(HostModel, AHostAheadOfTheGpuCostsOnlyTheFirstLaunch) {
  // GPU-bound: 100 us tasks issued in 5 us each. The first task cannot end
  // before its span (5 + 100 us); the rest are issued long before they run.
  const Task t = kernels(100, 5, 105);
  const auto r = run_one_rank({t, t, t});
  EXPECT_EQ(r.makespan, Time::from_us(5 + 300));
  EXPECT_EQ(r.ranks[0].host_wait, Time::from_us(5));
}

TEST(HostModel, TheHostWaitsAtASync) {
  // A: 100 us on the GPU, issued in 1 us, then a sync: the host waits for A
  // to end at 101 us, then issues B (10 us of launches for 1 us of GPU time).
  Task a = kernels(100, 1, 101);
  a.host_sync = true;
  const Task b = kernels(1, 10, 11);
  const auto r = run_one_rank({a, b});
  EXPECT_EQ(r.makespan, Time::from_us(101 + 11));
  EXPECT_EQ(r.ranks[0].host_wait, Time::from_us(1 + 10));
  // Without the sync the host issues B at 1 us, long before A ends.
  a.host_sync = false;
  EXPECT_EQ(run_one_rank({a, b}).makespan, Time::from_us(102));
}

TEST(HostModel, ASyncWaitsForEveryEarlierTaskOnEveryStream) {
  // Rank 0 and 1 all-reduce (free network) after A; the sync is on a later
  // zero-length task: the host resumes only once A and the collective are
  // done on this rank, i.e. when the slower rank 1 reaches the collective.
  TaskGraph g;
  g.groups.push_back({{0, 1}});
  for (int r = 0; r < 2; ++r) {
    parallelism::Program prog;
    prog.tasks.push_back(kernels(r == 0 ? 10 : 50, 1, r == 0 ? 11 : 51));
    Task ar;
    ar.name = "ar";
    ar.kind = TaskKind::Collective;
    ar.group = 0;
    ar.collective_id = 0;
    ar.bytes = Bytes(1000);
    ar.deps = {0};
    ar.host_issue = Time::from_us(2);
    prog.tasks.push_back(ar);
    Task sync = kernels(0, 0, 0);
    sync.host_sync = true;
    sync.deps = {0};
    prog.tasks.push_back(sync);
    Task after = kernels(5, 5, 10);
    after.deps = {2};
    prog.tasks.push_back(after);
    g.add_rank(g.add_program(std::move(prog)), {0});
  }
  DiscreteEventLoop loop;
  ZeroCostNetwork net(loop);
  const auto r = execute(g, loop, net);
  // Rank 1's GPU ends A at 51 us; the collective ends then on both ranks;
  // both hosts resume at 51 us and their last task ends 10 us later.
  EXPECT_EQ(r.ranks[0].finish, Time::from_us(61));
  EXPECT_EQ(r.ranks[1].finish, Time::from_us(61));
}
