// Pipeline schedules executed by the engine with zero-cost communication:
// the bubble fractions must match the textbook formulas exactly.
#include <gtest/gtest.h>

#include "tessera/engine/executor.hpp"
#include "tessera/engine/zero_cost_network.hpp"
#include "tessera/parallelism/plan.hpp"
#include "test_predictors.hpp"

using namespace tessera;
using namespace tessera::parallelism;
using node_model::DType;

namespace {

using engine::ZeroCostNetwork;

const TransformerConfig kModel{"tiny", 16, 64, 4, 256, 97};
const Workload kWork{1, 32, DType::FP32};

struct Outcome {
  Time makespan;
  Time busy;  ///< compute time of one stage (all stages are alike)
  [[nodiscard]] double bubble() const {
    return static_cast<double>((makespan - busy).ps()) / static_cast<double>(makespan.ps());
  }
};

Outcome run(const ParallelPlan& p) {
  test_support::LayersOnlyPredictor pred(kModel.vocab);
  const auto g = plan_training(kModel, kWork, p, pred);
  engine::DiscreteEventLoop loop;
  ZeroCostNetwork net(loop);
  const auto r = engine::execute(g, loop, net);
  Outcome o{r.makespan, r.ranks[0].compute_busy};
  for (const auto& rr : r.ranks) EXPECT_EQ(rr.compute_busy, o.busy);
  return o;
}

ParallelPlan pipeline(Schedule s, int pp, std::int64_t m, int v = 1) {
  ParallelPlan p;
  p.pp = pp;
  p.schedule = s;
  p.virtual_stages = v;
  p.global_batch = m;
  return p;
}

}  // namespace

TEST(Schedules, OneFOneBAndGPipeBubbleIsPMinusOneOverMPlusPMinusOne) {
  for (auto s : {Schedule::GPipe, Schedule::OneFOneB}) {
    for (int pp : {2, 4, 8}) {
      for (std::int64_t m : {1, 4, 8, 16}) {
        const Outcome o = run(pipeline(s, pp, m));
        const double expected = static_cast<double>(pp - 1) / static_cast<double>(m + pp - 1);
        EXPECT_NEAR(o.bubble(), expected, 1e-12) << to_string(s) << " p=" << pp << " m=" << m;
        // Exactly: (m + p - 1) x (forward + backward of one stage's micro-batch).
        EXPECT_EQ(o.makespan.ps() * m, o.busy.ps() * (m + pp - 1));
      }
    }
  }
}

TEST(Schedules, InterleavingDividesTheBubbleByTheVirtualStages) {
  for (int pp : {2, 4}) {
    for (int v : {2, 4}) {
      for (std::int64_t m : {4, 8, 16}) {
        if (m % pp != 0) continue;
        const Outcome plain = run(pipeline(Schedule::OneFOneB, pp, m));
        const Outcome inter = run(pipeline(Schedule::Interleaved1F1B, pp, m, v));
        EXPECT_EQ(plain.busy, inter.busy);
        // Bubble time: (p - 1) x (tf + tb) of a stage, divided by v.
        const Time bubble_plain = plain.makespan - plain.busy;
        const Time bubble_inter = inter.makespan - inter.busy;
        EXPECT_EQ(bubble_inter.ps() * v, bubble_plain.ps()) << "p=" << pp << " v=" << v << " m=" << m;
        const double expected = (pp - 1.0) / v / (static_cast<double>(m) + (pp - 1.0) / v);
        EXPECT_NEAR(inter.bubble(), expected, 1e-12);
      }
    }
  }
}

TEST(Schedules, TensorAndDataParallelismWithZeroCostCommunicationAddNoTime) {
  ParallelPlan p = pipeline(Schedule::OneFOneB, 2, 8);
  p.dp = 2;
  p.tp = 2;
  p.global_batch = 16;
  const Outcome o = run(p);
  EXPECT_NEAR(o.bubble(), 1.0 / 9.0, 1e-12);
}

TEST(Schedules, FullRecomputationAddsOneForwardToEveryBackward) {
  ParallelPlan p = pipeline(Schedule::OneFOneB, 2, 4);
  const Outcome none = run(p);
  p.recompute = Recompute::Full;
  const Outcome full = run(p);
  // Per layer: F + 2F without, F + (F + 2F) with recomputation: 4/3 the work.
  EXPECT_EQ(full.busy.ps() * 3, none.busy.ps() * 4);
}

TEST(Schedules, EveryCombinationRunsToCompletion) {
  // No deadlock for any schedule x recomputation x ZeRO x SP, with every group kind present.
  for (auto sched : {Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved1F1B}) {
    for (auto rc : {Recompute::None, Recompute::Selective, Recompute::Full}) {
      for (int zero : {0, 1, 3}) {
        ParallelPlan p = pipeline(sched, 2, 4, sched == Schedule::Interleaved1F1B ? 2 : 1);
        p.dp = 2;
        p.tp = 2;
        p.global_batch = 8;
        p.recompute = rc;
        p.zero_stage = zero;
        p.sequence_parallel = zero != 0;
        const Outcome o = run(p);
        EXPECT_GT(o.makespan, o.busy) << to_string(sched) << " " << to_string(rc) << " zero " << zero;
      }
    }
  }
}

TEST(Schedules, MegatronHostSyncsAfterPipelineExchangesNeverDeadlock) {
  // The host model with real costs: every schedule, with and without data
  // and tensor parallelism, runs to completion; every pipeline exchange is
  // followed by a host sync before the next compute, and the host costs
  // lengthen the iteration.
  Workload w = kWork;
  w.framework = node_model::Framework::Megatron;
  w.host = {Time::from_us(1), Time::from_us(50), Time::from_us(20), Time::zero()};  // no data step
  test_support::LayersOnlyPredictor pred(kModel.vocab);
  for (auto sched : {Schedule::GPipe, Schedule::OneFOneB, Schedule::Interleaved1F1B, Schedule::ZeroBubbleH1,
                     Schedule::ZeroBubbleH2}) {
    for (int dp : {1, 2}) {
      ParallelPlan p = pipeline(sched, 4, 8, sched == Schedule::Interleaved1F1B ? 2 : 1);
      p.dp = dp;
      p.tp = 2;
      p.global_batch = 8LL * dp;
      const auto g = plan_training(kModel, w, p, pred);
      const auto& tasks = g.tasks(rank_of(p, {0, 0, 1}));
      int exchanges = 0, syncs = 0;
      for (std::size_t i = 0; i < tasks.size(); ++i) {
        if (tasks[i].kind == TaskKind::Collective && tasks[i].collective == CollectiveKind::SendRecv) {
          ++exchanges;
          EXPECT_EQ(tasks[i].host_issue, Time::from_us(21));  // a launch plus the exchange's host work
        }
        if (tasks[i].host_sync) ++syncs;
      }
      EXPECT_GT(exchanges, 0);
      EXPECT_GT(syncs, 1);  // after the exchanges, and before the optimizer
      engine::DiscreteEventLoop loop;
      engine::ZeroCostNetwork net(loop);
      const auto r = engine::execute(g, loop, net);
      engine::DiscreteEventLoop loop0;
      engine::ZeroCostNetwork net0(loop0);
      const auto free = engine::execute(plan_training(kModel, kWork, p, pred), loop0, net0);
      EXPECT_GT(r.makespan, free.makespan) << to_string(sched) << " dp " << dp;
    }
  }
}

// Megatron-LM's 1F1B exchanges end with the requests' wait() and
// torch.cuda.synchronize(): the sync after them waits for the sends too
// (helper 178: they never held the sender), and the last stage posts each
// activation's receive before the micro-batch's data step (recv_forward
// before get_batch). DeepSpeed's engine (megatron-deepspeed) does not sync
// the device after its exchanges, and Megatron-Core overlaps the
// interleaved schedule's: there the sync drains the compute stream alone.
TEST(Schedules, MegatronsOneFOneBSyncWaitsForItsSends) {
  test_support::LayersOnlyPredictor pred(kModel.vocab);
  auto plan_of = [&](node_model::Framework f, Schedule sched) {
    Workload w = kWork;
    w.framework = f;
    w.host.per_micro_batch = Time::from_us(300);
    const ParallelPlan p = pipeline(sched, 2, 4);
    return std::pair{plan_training(kModel, w, p, pred), p};
  };
  // Whether some sync of `rank`'s program depends on one of its sends.
  auto sync_waits_for_a_send = [](const TaskGraph& g, int rank) {
    const auto& tasks = g.tasks(rank);
    for (const auto& t : tasks) {
      if (!t.host_sync) continue;
      for (const TaskIndex d : t.deps) {
        if (std::string_view(tasks[static_cast<std::size_t>(d)].name).find("pp.send_") !=
            std::string_view::npos)
          return true;
      }
    }
    return false;
  };
  const auto [megatron, p] = plan_of(node_model::Framework::Megatron, Schedule::OneFOneB);
  EXPECT_TRUE(sync_waits_for_a_send(megatron, rank_of(p, {0, 0, 0})));
  EXPECT_TRUE(sync_waits_for_a_send(megatron, rank_of(p, {0, 0, 1})));
  EXPECT_FALSE(sync_waits_for_a_send(
      plan_of(node_model::Framework::MegatronDeepSpeed, Schedule::OneFOneB).first, rank_of(p, {0, 0, 0})));
  EXPECT_FALSE(sync_waits_for_a_send(plan_of(node_model::Framework::Megatron, Schedule::GPipe).first,
                                     rank_of(p, {0, 0, 0})));
  // The last stage: mb0's receive, then its data step.
  std::vector<std::string_view> order;
  for (const auto& t : megatron.tasks(rank_of(p, {0, 0, 1}))) {
    const std::string_view n = t.name;
    if (n == "mb0.pp.recv_activation" || n == "mb0.data") order.push_back(n);
  }
  EXPECT_EQ(order, (std::vector<std::string_view>{"mb0.pp.recv_activation", "mb0.data"}));
}

TEST(Schedules, EachMicroBatchsDataStepIdlesTheGpuForItsHostWork) {
  // The host model with only a per-micro-batch cost X (an infinitely fast
  // host otherwise): each micro-batch's forward starts with a sync and X of
  // host work on the stages that load data (the first and the last), so on
  // one stage (pp 1) the GPU idles X per micro-batch: the iteration grows by
  // exactly m x X. With pp 2 only stage 0 (tokens) and stage 1 (labels) have
  // data steps; every micro-batch's forward on each stage gets one.
  Workload w = kWork;
  w.framework = node_model::Framework::Megatron;
  test_support::LayersOnlyPredictor pred(kModel.vocab);
  const Time x = Time::from_us(300);
  for (std::int64_t m : {1, 3, 8}) {
    ParallelPlan p = pipeline(Schedule::OneFOneB, 1, m);
    auto run_with = [&](Time per_micro_batch) {
      Workload wk = w;
      wk.host.per_micro_batch = per_micro_batch;
      engine::DiscreteEventLoop loop;
      ZeroCostNetwork net(loop);
      return engine::execute(plan_training(kModel, wk, p, pred), loop, net).makespan;
    };
    EXPECT_EQ(run_with(x) - run_with(Time::zero()), x * m) << "m " << m;
  }
  Workload wk = w;
  wk.host.per_micro_batch = x;
  const ParallelPlan p2 = pipeline(Schedule::OneFOneB, 2, 4);
  const auto g = plan_training(kModel, wk, p2, pred);
  for (int stage = 0; stage < 2; ++stage) {
    int steps = 0, syncs = 0;
    for (const auto& t : g.tasks(rank_of(p2, {0, 0, stage}))) {
      if (std::string_view(t.name).find(".data") != std::string_view::npos) {
        ++steps;
        EXPECT_EQ(t.host_issue, x);
      }
      if (t.host_sync && std::string_view(t.name) == "data.sync") ++syncs;
    }
    EXPECT_EQ(steps, 4) << "stage " << stage;
    EXPECT_EQ(syncs, 4) << "stage " << stage;
  }
}
