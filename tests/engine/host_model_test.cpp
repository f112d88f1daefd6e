// The host model of the executor (docs/engine.md, "Host model"): a rank's
// host issues its tasks in program order, runs ahead of the GPU, and waits at
// host_sync tasks. Hand-checkable times on a zero-cost network.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "tessera/engine/executor.hpp"
#include "tessera/engine/zero_cost_network.hpp"
#include "tessera/error.hpp"
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

/// A collective of 1000 bytes over group 0 after task 0, whose host call
/// takes `issue_us` (`name`: a literal, Task::name views it).
Task collective_after_first(std::string_view name, std::int64_t issue_us) {
  Task c;
  c.name = name;
  c.kind = TaskKind::Collective;
  c.group = 0;
  c.collective_id = 0;
  c.bytes = Bytes(1000);
  c.deps = {0};
  c.host_issue = Time::from_us(issue_us);
  return c;
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

TEST(HostModel, ASyncDrainsTheComputeStreamAndWaitsOnlyForItsOwnDependencies) {
  // Per rank: A (10 us on rank 0, 50 us on rank 1), an all-reduce after A
  // (free network), a zero-length sync, then 5 us of GPU work issued in 5 us.
  // With the sync depending on the all-reduce, rank 0's host resumes when
  // the slower rank 1 reaches it (51 us); without, as soon as its own A is
  // done (11 us): a sync drains the compute stream, it does not wait for
  // collectives in flight (so it never waits on another rank's host).
  for (bool on_collective : {true, false}) {
    TaskGraph g;
    g.groups.push_back({{0, 1}});
    for (int r = 0; r < 2; ++r) {
      parallelism::Program prog;
      prog.tasks.push_back(kernels(r == 0 ? 10 : 50, 1, r == 0 ? 11 : 51));
      prog.tasks.push_back(collective_after_first("ar", 2));
      Task sync = kernels(0, 0, 0);
      sync.host_sync = true;
      sync.deps =
          on_collective ? std::vector<parallelism::TaskIndex>{0, 1} : std::vector<parallelism::TaskIndex>{0};
      prog.tasks.push_back(sync);
      Task after = kernels(5, 5, 10);
      after.deps = {2};
      prog.tasks.push_back(after);
      g.add_rank(g.add_program(std::move(prog)), {0});
    }
    struct LastCompute : ExecutionObserver {
      Time end[2];
      void on_compute(int rank, const Task&, Time, Time e) override { end[rank] = std::max(end[rank], e); }
    } obs;
    DiscreteEventLoop loop;
    ZeroCostNetwork net(loop);
    execute(g, loop, net, &obs);
    EXPECT_EQ(obs.end[0], Time::from_us(on_collective ? 61 : 21)) << on_collective;
    EXPECT_EQ(obs.end[1], Time::from_us(61)) << on_collective;
  }
}

TEST(HostModel, ClosingCollectivesLaunchedAfterTheLastKernelAreHostTime) {
  // Per rank: A (100 us, issued in 1 us) with a sync, then an all-gather
  // (free network) the host launches in 40 us once A is done: the iteration
  // ends at 101 + 40 us, the stream idle those 40 us waiting for the host:
  // host time (1 + 40 us), as before a kernel, not an unexplained gap.
  TaskGraph g;
  g.groups.push_back({{0, 1}});
  for (int r = 0; r < 2; ++r) {
    parallelism::Program prog;
    Task a = kernels(100, 1, 101);
    a.host_sync = true;
    prog.tasks.push_back(a);
    prog.tasks.push_back(collective_after_first("ag", 40));
    g.add_rank(g.add_program(std::move(prog)), {0});
  }
  DiscreteEventLoop loop;
  ZeroCostNetwork net(loop);
  const auto r = execute(g, loop, net);
  EXPECT_EQ(r.makespan, Time::from_us(141));
  for (const auto& rank : r.ranks) {
    EXPECT_EQ(rank.compute_busy, Time::from_us(100));
    EXPECT_EQ(rank.host_wait, Time::from_us(41));
  }
}

TEST(HostModel, OnlyComputeTasksMaySync) {
  TaskGraph g;
  g.groups.push_back({{0, 1}});
  for (int r = 0; r < 2; ++r) {
    parallelism::Program prog;
    Task ar;
    ar.name = "ar";
    ar.kind = TaskKind::Collective;
    ar.group = 0;
    ar.collective_id = 0;
    ar.bytes = Bytes(1000);
    ar.host_sync = true;
    prog.tasks.push_back(ar);
    g.add_rank(g.add_program(std::move(prog)), {0});
  }
  EXPECT_THROW(g.validate(), InputError);
}

TEST(HostModel, TheObserverSeesTheStreamWaitingForTheHost) {
  // A and B: 1 us on the GPU each, issued in 10 us, no span bound. A runs at
  // 0 and ends at 1 us; B is ready then but issued only from 10 us: the
  // compute stream idles [1, 10) us, which host_wait counts and the observer
  // reports.
  struct Waits : ExecutionObserver {
    void on_host_wait(int rank, const Task& task, Time start, Time end) override {
      seen.push_back({rank, std::string(task.name), start, end});
    }
    struct Wait {
      int rank;
      std::string name;
      Time start, end;
    };
    std::vector<Wait> seen;
  } waits;
  Task a = kernels(1, 10, 0);
  a.name = "a";
  Task b = kernels(1, 10, 0);
  b.name = "b";
  b.deps.push_back(0);
  TaskGraph g;
  parallelism::Program prog;
  prog.tasks = {a, b};
  g.add_rank(g.add_program(std::move(prog)), {});
  DiscreteEventLoop loop;
  ZeroCostNetwork net(loop);
  const auto r = execute(g, loop, net, &waits);
  EXPECT_EQ(r.makespan, Time::from_us(11));
  EXPECT_EQ(r.ranks[0].host_wait, Time::from_us(9));
  ASSERT_EQ(waits.seen.size(), 1U);
  EXPECT_EQ(waits.seen[0].rank, 0);
  EXPECT_EQ(waits.seen[0].name, "b");
  EXPECT_EQ(waits.seen[0].start, Time::from_us(1));
  EXPECT_EQ(waits.seen[0].end, Time::from_us(10));
}

TEST(HostModel, WaitingForTheHostToLaunchACollectiveTheNextKernelNeedsIsHostTime) {
  // Per rank: A (1 us on the GPU, issued in 1 us, ends at 2 us), an
  // all-reduce after A (free network) whose host call takes 30 us (issued
  // from 1 to 31 us), then B after the all-reduce (1 us, issued in 1 us from
  // 31 us, ends at 33 us). The stream idles [2, 31) us for the host to launch
  // the all-reduce B needs: host time (helper 76: a pp 1 plan's tensor-
  // parallel all-reduces behind a slow host showed as pipeline bubble), as
  // the 1 us A and B each wait for their own launch: 1 + 29 + 1 us.
  struct Waits : ExecutionObserver {
    void on_host_wait(int, const Task& task, Time start, Time end) override {
      seen.push_back({std::string(task.name), start, end});
    }
    struct Wait {
      std::string name;
      Time start, end;
    };
    std::vector<Wait> seen;
  } waits;
  TaskGraph g;
  g.groups.push_back({{0, 1}});
  for (int r = 0; r < 2; ++r) {
    parallelism::Program prog;
    prog.tasks.push_back(kernels(1, 1, 2));
    prog.tasks.push_back(collective_after_first("ar", 30));
    Task b = kernels(1, 1, 2);
    b.name = "b";
    b.deps = {1};
    prog.tasks.push_back(b);
    g.add_rank(g.add_program(std::move(prog)), {0});
  }
  DiscreteEventLoop loop;
  ZeroCostNetwork net(loop);
  const auto r = execute(g, loop, net, &waits);
  EXPECT_EQ(r.makespan, Time::from_us(33));
  for (const auto& rank : r.ranks) {
    EXPECT_EQ(rank.compute_busy, Time::from_us(2));
    EXPECT_EQ(rank.host_wait, Time::from_us(31));
  }
  ASSERT_EQ(waits.seen.size(), 2U);  // one idle stretch per rank, named after the collective
  EXPECT_EQ(waits.seen[0].name, "ar");
  EXPECT_EQ(waits.seen[0].start, Time::from_us(2));
  EXPECT_EQ(waits.seen[0].end, Time::from_us(31));
}
