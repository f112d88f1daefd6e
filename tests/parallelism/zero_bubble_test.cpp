// Zero-bubble schedules (Qi et al., "Zero Bubble Pipeline Parallelism",
// ICLR'24): the step orders of ZB-H1 and ZB-H2, their memory, and their
// bubbles executed by the engine with zero-cost communication. Every number
// below can be checked by hand against the paper's Figure 3 and Tables 1-2.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "tessera/engine/executor.hpp"
#include "tessera/engine/zero_cost_network.hpp"
#include "tessera/error.hpp"
#include "tessera/parallelism/plan.hpp"
#include "test_predictors.hpp"

using namespace tessera;
using namespace tessera::parallelism;
using node_model::DType;

namespace {

// 16 layers, hidden 64, 4 heads, ffn 256, vocabulary 97; one sequence of 32 tokens.
const TransformerConfig kModel{"tiny", 16, 64, 4, 256, 97};
const Workload kWork{1, 32, DType::FP32};

std::string text(const std::vector<PipelineStep>& order) {
  std::string s;
  for (const auto& st : order) {
    if (!s.empty()) s += ' ';
    s += std::string(to_string(st.kind)) + std::to_string(st.micro_batch);
  }
  return s;
}

/// Micro-batches whose F has run and whose W has not, at the most.
std::int64_t peak_in_flight(const std::vector<PipelineStep>& order) {
  std::int64_t held = 0, peak = 0;
  for (const auto& st : order) {
    if (st.kind == StepKind::F) peak = std::max(peak, ++held);
    if (st.kind == StepKind::W) --held;
  }
  return peak;
}

/// Replays the orders of all stages with unit-time steps and the pipeline's
/// dependencies (F of stage s after F of s - 1, B of s after B of s + 1, W
/// after B of the same stage): true when every stage runs to its end (no
/// step waits for one that its own stage runs later: no deadlock).
bool runs_to_completion(const std::vector<std::vector<PipelineStep>>& orders) {
  const int p = static_cast<int>(orders.size());
  std::map<std::tuple<int, int, int>, bool> done;  // (kind, stage, micro-batch)
  std::vector<std::size_t> pos(orders.size(), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      auto& i = pos[static_cast<std::size_t>(s)];
      const auto& order = orders[static_cast<std::size_t>(s)];
      while (i < order.size()) {
        const PipelineStep& st = order[i];
        auto has = [&](StepKind k, int stage) { return done.count({static_cast<int>(k), stage, st.micro_batch}) > 0; };
        bool ready = true;
        if (st.kind == StepKind::F && s > 0) ready = has(StepKind::F, s - 1);
        if (st.kind == StepKind::B) ready = has(StepKind::F, s) && (s == p - 1 || has(StepKind::B, s + 1));
        if (st.kind == StepKind::W) ready = has(StepKind::B, s);
        if (!ready) break;
        done[{static_cast<int>(st.kind), s, st.micro_batch}] = true;
        ++i;
        progress = true;
      }
    }
  }
  for (int s = 0; s < p; ++s) {
    if (pos[static_cast<std::size_t>(s)] != orders[static_cast<std::size_t>(s)].size()) return false;
  }
  return true;
}

ParallelPlan pipeline(Schedule s, int pp, std::int64_t m) {
  ParallelPlan p;
  p.pp = pp;
  p.schedule = s;
  p.global_batch = m;
  return p;
}

/// Per-stage compute spans, to measure the idle time between a stage's first
/// and last compute (the bubble the paper counts when the optimizer step does
/// not synchronise the stages).
class Spans final : public engine::ExecutionObserver {
 public:
  void on_compute(int rank, const Task& task, Time start, Time end) override {
    if (task.duration == Time::zero()) return;
    auto [it, inserted] = first_.try_emplace(rank, start);
    if (!inserted) it->second = std::min(it->second, start);
    last_[rank] = std::max(last_[rank], end);
  }
  [[nodiscard]] Time span(int rank) const { return last_.at(rank) - first_.at(rank); }

 private:
  std::map<int, Time> first_, last_;
};

struct Outcome {
  Time makespan;
  Time busy;                 ///< compute time of one stage (all stages are alike)
  std::vector<Time> inside;  ///< per stage: idle time between its first and last compute
  [[nodiscard]] Time bubble() const { return makespan - busy; }
};

Outcome run(const ParallelPlan& p, bool linears_only) {
  test_support::LayersOnlyPredictor pred(kModel.vocab, linears_only);
  const auto g = plan_training(kModel, kWork, p, pred);
  EXPECT_NO_THROW(g.validate());
  engine::DiscreteEventLoop loop;
  engine::ZeroCostNetwork net(loop);
  Spans spans;
  const auto r = engine::execute(g, loop, net, &spans);
  Outcome o{r.makespan, r.ranks[0].compute_busy, {}};
  for (std::size_t rank = 0; rank < r.ranks.size(); ++rank) {
    EXPECT_EQ(r.ranks[rank].compute_busy, o.busy);
    o.inside.push_back(spans.span(static_cast<int>(rank)) - o.busy);
  }
  return o;
}

/// F, B and W of one micro-batch on stage 0, read off a zero-bubble plan's
/// tasks by name (".fwd", ".bwd", ".wgrad").
struct StepTimes {
  Time f, b, w;
};
StepTimes step_times(int pp, bool linears_only) {
  test_support::LayersOnlyPredictor pred(kModel.vocab, linears_only);
  const auto g = plan_training(kModel, kWork, pipeline(Schedule::ZeroBubbleH1, pp, 2LL * pp), pred);
  StepTimes t;
  for (const Task& task : g.tasks(0)) {
    const std::string_view n = task.name;
    if (n.substr(0, 4) != "mb0.") continue;
    if (n.find(".fwd") != std::string_view::npos) t.f += task.duration;
    if (n.find(".bwd") != std::string_view::npos) t.b += task.duration;
    if (n.find(".wgrad") != std::string_view::npos) t.w += task.duration;
  }
  return t;
}

}  // namespace

TEST(ZeroBubble, ScheduleNamesParseAndPrint) {
  EXPECT_EQ(parse_schedule("zb-h1"), Schedule::ZeroBubbleH1);
  EXPECT_EQ(parse_schedule("zb-h2"), Schedule::ZeroBubbleH2);
  // Case ignored, as papers write them.
  EXPECT_EQ(parse_schedule("1F1B"), Schedule::OneFOneB);
  EXPECT_EQ(parse_schedule("ZB-H1"), Schedule::ZeroBubbleH1);
  EXPECT_EQ(parse_schedule("GPipe"), Schedule::GPipe);
  EXPECT_EQ(to_string(Schedule::ZeroBubbleH1), "zb-h1");
  EXPECT_EQ(to_string(Schedule::ZeroBubbleH2), "zb-h2");
  EXPECT_TRUE(splits_backward(Schedule::ZeroBubbleH1));
  EXPECT_FALSE(splits_backward(Schedule::OneFOneB));
  // The error of a name that is no schedule ("parsed" if it is one).
  const auto error_of = [](const char* name) {
    try {
      parse_schedule(name);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("parsed");
  };
  constexpr const char* kExpected = "(expected gpipe, 1f1b, interleaved-1f1b, zb-h1 or zb-h2)";
  EXPECT_EQ(error_of("zb-h3"), fmt::format("unknown schedule 'zb-h3' {}", kExpected));
  // A near miss of a name (not of its number, as zb-h3 is) is named.
  EXPECT_EQ(error_of("zbh1"), fmt::format("unknown schedule 'zbh1', did you mean 'zb-h1'? {}", kExpected));
  // A name cut short, as papers write it, when one schedule starts so; not
  // when several do (zb).
  EXPECT_EQ(error_of("Interleaved"),
            fmt::format("unknown schedule 'Interleaved', did you mean 'interleaved-1f1b'? {}", kExpected));
  EXPECT_EQ(error_of("zb"), fmt::format("unknown schedule 'zb' {}", kExpected));
}

TEST(ZeroBubble, OrdersFollowThePapersFigure3) {
  // p = 4, m = 8, micro-batches numbered from 0 (the paper's figure from 1).
  // ZB-H1, first stage: 1F1B's warm-up, then each B is followed at once by its W.
  EXPECT_EQ(text(pipeline_order(Schedule::ZeroBubbleH1, 4, 0, 8, 1)),
            "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 B6 W6 B7 W7");
  // Last stage: W deferred by p - 1 = 3 pairs, the rest closing the schedule.
  EXPECT_EQ(text(pipeline_order(Schedule::ZeroBubbleH1, 4, 3, 8, 1)),
            "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 W5 W6 W7");
  // A middle stage: warm-up p - s - 1 = 2, W deferred by s = 1 pair.
  EXPECT_EQ(text(pipeline_order(Schedule::ZeroBubbleH1, 4, 1, 8, 1)),
            "F0 F1 F2 B0 F3 B1 W0 F4 B2 W1 F5 B3 W2 F6 B4 W3 F7 B5 W4 B6 W5 B7 W6 W7");
  // ZB-H2, first stage: 2p - 1 = 7 forwards before the first B.
  EXPECT_EQ(text(pipeline_order(Schedule::ZeroBubbleH2, 4, 0, 8, 1)),
            "F0 F1 F2 F3 F4 F5 F6 B0 W0 F7 B1 W1 B2 W2 B3 W3 B4 W4 B5 W5 B6 W6 B7 W7");
  // Last stage: F/B pairs for the first 7 micro-batches, then W0 F7 B7 and the other W.
  EXPECT_EQ(text(pipeline_order(Schedule::ZeroBubbleH2, 4, 3, 8, 1)),
            "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 W0 F7 B7 W1 W2 W3 W4 W5 W6 W7");
  // The fused schedules have no W steps (their B computes the weight gradients).
  for (const auto& st : pipeline_order(Schedule::OneFOneB, 4, 0, 8, 1)) EXPECT_NE(st.kind, StepKind::W);
}

TEST(ZeroBubble, EveryMicroBatchHasOneFThenBThenWPerStageAndThePipelineNeverDeadlocks) {
  for (Schedule sched : {Schedule::ZeroBubbleH1, Schedule::ZeroBubbleH2}) {
    for (int p : {1, 2, 3, 4, 8}) {
      for (std::int64_t m : {1, 2, 3, 4, 7, 8, 15, 16, 33}) {
        std::vector<std::vector<PipelineStep>> orders;
        for (int s = 0; s < p; ++s) {
          const auto order = pipeline_order(sched, p, s, m, 1);
          ASSERT_EQ(order.size(), static_cast<std::size_t>(3 * m));
          std::map<std::pair<int, int>, std::size_t> at;  // (kind, micro-batch) -> position
          for (std::size_t i = 0; i < order.size(); ++i) {
            EXPECT_EQ(order[i].chunk, 0);
            EXPECT_TRUE(at.emplace(std::pair{static_cast<int>(order[i].kind), order[i].micro_batch}, i).second)
                << "a step twice";
          }
          for (int j = 0; j < m; ++j) {
            const auto f = at.at({static_cast<int>(StepKind::F), j});
            const auto b = at.at({static_cast<int>(StepKind::B), j});
            const auto w = at.at({static_cast<int>(StepKind::W), j});
            EXPECT_LT(f, b);
            EXPECT_LT(b, w);
          }
          orders.push_back(order);
        }
        EXPECT_TRUE(runs_to_completion(orders)) << to_string(sched) << " p=" << p << " m=" << m;
      }
    }
  }
}

TEST(ZeroBubble, InFlightMicroBatchesArePForH1And2PMinus1ForH2) {
  for (int p : {2, 4, 8}) {
    const std::int64_t m = 4LL * p;
    for (int s = 0; s < p; ++s) {
      // ZB-H1 keeps 1F1B's p on every stage (Qi et al., 2.1); ZB-H2 2p - 1.
      EXPECT_EQ(peak_in_flight(pipeline_order(Schedule::ZeroBubbleH1, p, s, m, 1)), p);
      EXPECT_EQ(peak_in_flight(pipeline_order(Schedule::ZeroBubbleH2, p, s, m, 1)), 2 * p - 1);
    }
    // Fewer micro-batches than that: all of them.
    EXPECT_EQ(peak_in_flight(pipeline_order(Schedule::ZeroBubbleH2, p, 0, p, 1)), p);
  }
}

TEST(ZeroBubble, VirtualStagesAreRejectedNamingTheKey) {
  ParallelPlan p = pipeline(Schedule::ZeroBubbleH1, 2, 4);
  p.virtual_stages = 2;
  try {
    p.validate(kModel, kWork);
    FAIL() << "zb-h1 with virtual stages validated";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("virtual_stages (2) must be 1 with schedule zb-h1", 0), 0U) << e.what();
  }
  EXPECT_THROW(pipeline_order(Schedule::ZeroBubbleH2, 2, 0, 4, 2), InputError);
}

// With one stage there is no bubble to fill: a zero-bubble schedule is an
// error (it ran, only delaying W and holding its stash); 1f1b and gpipe run.
TEST(ZeroBubble, OneStageIsRejected) {
  for (Schedule s : {Schedule::ZeroBubbleH1, Schedule::ZeroBubbleH2}) {
    ParallelPlan p = pipeline(s, 1, 4);
    try {
      p.validate(kModel, kWork);
      FAIL() << to_string(s) << " with pp 1 validated";
    } catch (const InputError& e) {
      EXPECT_EQ(
          std::string(e.what()),
          fmt::format("schedule {} needs pp >= 2 (got 1): it fills a pipeline's bubbles; with one stage "
                      "use 1f1b",
                      to_string(s)));
    }
  }
  EXPECT_NO_THROW(pipeline(Schedule::OneFOneB, 1, 4).validate(kModel, kWork));
  EXPECT_NO_THROW(pipeline(Schedule::GPipe, 1, 4).validate(kModel, kWork));
}

TEST(ZeroBubble, ActivationMemoryFollowsThePapersTable2) {
  // Per layer, FP32 (twice Korthikanti's 16-bit bytes), s = 32, b = 1,
  // h = 64, a = 4, t = 1: M_B = sbh (34 + 5as/h) x 2 = 2048 x 44 x 2 bytes
  // held from F to B; M_W = 32 sbh x 2 = 2048 x 64 bytes kept from B to W
  // (the linears' inputs and output gradients, Qi et al. Table 1). 4 stages
  // of 4 layers; the last stage also holds b s vocab x 4 bytes of logits
  // (vocabulary 97 padded to 128) and the LM head's input, sbh x 4 bytes,
  // per micro-batch until its W, and the final norm's input, sbh x 4 bytes,
  // until its B; the first the embedding dropout's mask, sbh bytes, until
  // its B.
  const std::int64_t mb = 2048LL * 44 * 2, mw = 2048LL * 64, logits = 32LL * 128 * 4, layers = 4;
  const std::int64_t mask = 2048, head = 2048LL * 4;
  const int p = 4;
  const auto h1 = estimate_memory(kModel, kWork, pipeline(Schedule::ZeroBubbleH1, p, 8), Bytes::gib(80));
  const auto h2 = estimate_memory(kModel, kWork, pipeline(Schedule::ZeroBubbleH2, p, 8), Bytes::gib(80));
  const auto one = estimate_memory(kModel, kWork, pipeline(Schedule::OneFOneB, p, 8), Bytes::gib(80));
  for (int s = 0; s < p; ++s) {
    const auto i = static_cast<std::size_t>(s);
    // (the last stage: 1 micro-batch between F and B, 3 (ZB-H2: 6) between
    // B and W; the first: 4 (7) between F and B)
    const std::int64_t extra_h1 = s == p - 1 ? p * logits + 5 * head : s == 0 ? p * mask : 0;
    const std::int64_t extra_h2 = s == p - 1 ? (2 * p - 1) * logits + 8 * head
                                  : s == 0   ? (2 * p - 1) * mask
                                             : 0;
    // Worker s (from 0) holds (p - s) M_B + s M_W under ZB-H1, (2p - 2s - 1) M_B + 2s M_W under ZB-H2.
    EXPECT_EQ(h1.memory_per_stage[i].activations.count(), layers * ((p - s) * mb + s * mw) + extra_h1) << s;
    EXPECT_EQ(h2.memory_per_stage[i].activations.count(),
              layers * ((2 * p - 2 * s - 1) * mb + 2LL * s * mw) + extra_h2)
        << s;
    EXPECT_EQ(h1.memory_per_stage[i].peak_in_flight, p);
    EXPECT_EQ(h2.memory_per_stage[i].peak_in_flight, 2 * p - 1);
  }
  // Stage 0: ZB-H1 peaks where 1F1B does (p M_B); ZB-H2 at (2p - 1) M_B, 7/4 of it.
  EXPECT_EQ(h1.memory_per_stage[0].activations, one.memory_per_stage[0].activations);
  EXPECT_EQ(h2.memory_per_stage[0].activations.count() * 4, one.memory_per_stage[0].activations.count() * 7);
}

// Where W keeps more than F (full recomputation: F keeps a layer's input,
// M_B = 2 sbh x 2 bytes; M_W = 32 sbh x 2 as above) the peak comes one step
// later, just after a B: (p - s - 1) M_B + (s + 1) M_W under ZB-H1,
// (2p - 2s - 2) M_B + (2s + 1) M_W under ZB-H2 (docs/parallelism.md,
// Memory); stage 0 holds M_W - M_B more per layer than 1F1B's p M_B.
TEST(ZeroBubble, PeakFollowsTheLargerStashWhereWKeepsMore) {
  const std::int64_t mb = 2048LL * 2 * 2, mw = 2048LL * 64, layers = 4;
  const std::int64_t mask = 2048;  // the embedding dropout's, stage 0, F to B
  const int p = 4;
  auto full = [&](Schedule s) {
    ParallelPlan plan = pipeline(s, p, 8);
    plan.recompute = Recompute::Full;
    return estimate_memory(kModel, kWork, plan, Bytes::gib(80));
  };
  const auto h1 = full(Schedule::ZeroBubbleH1), h2 = full(Schedule::ZeroBubbleH2),
             one = full(Schedule::OneFOneB);
  for (int s = 0; s < p - 1; ++s) {  // (the last stage adds its logits)
    const auto i = static_cast<std::size_t>(s);
    EXPECT_EQ(h1.memory_per_stage[i].activations.count(),
              layers * ((p - s - 1) * mb + (s + 1) * mw) + (s == 0 ? (p - 1) * mask : 0))
        << s;
    EXPECT_EQ(h2.memory_per_stage[i].activations.count(),
              layers * ((2 * p - 2 * s - 2) * mb + (2LL * s + 1) * mw) + (s == 0 ? (2 * p - 2) * mask : 0))
        << s;
  }
  // (1F1B's stage 0 holds p masks, ZB-H1's p - 1 at its peak)
  EXPECT_EQ(h1.memory_per_stage[0].activations.count() - one.memory_per_stage[0].activations.count(),
            layers * (mw - mb) - mask);
}

// What W keeps follows the layer's shape, not GPT's (Memory in
// docs/parallelism.md): with grouped-query attention (kv_heads 2 of 4) the
// QKV output gradient is 2 (a + 2 kv)/a = 4 sbh wide, not 6, and a gated MLP
// of ffn = 2h keeps the activation's output 2 f/h = 4 sbh and fc1's output
// gradient 2 g f/h = 8 sbh (GPT's ffn = 4h: 8 and 8). Per layer, t = 1:
//   M_W = QKV and fc1 inputs 2 + 2, context 2, QKV grad 4, projection and
//         fc2 output gradients 2 + 2, MLP 4 + 8 = 26 sbh (GPT's 32);
//   M_B = 10 replicated (8 + masks 2) + Q 2 + K, V 4 x 2/4 + projection
//         input 2 + MLP 6 f/h = 12 (fc1's output, both halves, 4 f/h and
//         the product 2 f/h: Megatron-Core's fused bias_swiglu keeps no
//         SiLU output): 28 sbh, + 5as/h = 10: 38 sbh.
// FP32: x 2 bytes.
TEST(ZeroBubble, StashFollowsTheLayerShape) {
  TransformerConfig m = kModel;
  m.kv_heads = 2;
  m.gated_mlp = true;
  m.ffn_hidden = 128;
  const std::int64_t mb = 2048LL * 38 * 2, mw = 2048LL * 26 * 2, logits = 32LL * 128 * 4, layers = 4;
  const std::int64_t mask = 2048, head = 2048LL * 4;  // outside the layers, as above
  const int p = 4;
  const auto h1 = estimate_memory(m, kWork, pipeline(Schedule::ZeroBubbleH1, p, 8), Bytes::gib(80));
  for (int s = 0; s < p; ++s) {
    const std::int64_t extra = s == p - 1 ? p * logits + 5 * head : s == 0 ? p * mask : 0;
    EXPECT_EQ(h1.memory_per_stage[static_cast<std::size_t>(s)].activations.count(),
              layers * ((p - s) * mb + s * mw) + extra)
        << s;
  }
}

TEST(ZeroBubble, BubblesWithEqualFBWTimesAreThePapersTable2) {
  // Linears only: F = B = W exactly (each linear's three GEMMs have the same
  // FLOPs, 1 ps per FLOP), communication free. Per stage, with T = F:
  //   1f1b   (p - 1)(F + B + W) = 3 (p - 1) T
  //   zb-h1  (p - 1)(F + B - W) =   (p - 1) T, a third of 1F1B's
  //   zb-h2  (p - 1)(F + B - 2W) = 0 between each stage's first and last
  //          compute (the parallelogram); the iteration still waits
  //          (p - 1) F for the last stage to fill and the first to drain,
  //          which the paper removes by not synchronising the optimizer step.
  // Times are integer picoseconds and every step takes exactly T, so the
  // comparisons are exact: no tolerance is needed.
  // By hand, per layer (b = 1, s = 32, h = 64, ffn 256): QKV 2*32*64*192,
  // projection 2*32*64*64, fc1 and fc2 2*32*64*256 FLOPs: 3,145,728 ps; with
  // p = 4, 4 layers per stage: T = 12,582,912 ps.
  EXPECT_EQ(step_times(4, true).f.ps(), 4 * 3'145'728);
  for (int p : {2, 4, 8}) {
    const StepTimes t = step_times(p, true);
    ASSERT_GT(t.f, Time::zero());
    ASSERT_EQ(t.b, t.f);
    ASSERT_EQ(t.w, t.f);
    for (std::int64_t m : {2 * p, 4 * p}) {
      const Outcome one = run(pipeline(Schedule::OneFOneB, p, m), true);
      const Outcome h1 = run(pipeline(Schedule::ZeroBubbleH1, p, m), true);
      const Outcome h2 = run(pipeline(Schedule::ZeroBubbleH2, p, m), true);
      EXPECT_EQ(one.busy.ps(), 3 * m * t.f.ps());
      EXPECT_EQ(h1.busy, one.busy);
      EXPECT_EQ(h2.busy, one.busy);
      EXPECT_EQ(one.bubble().ps(), 3LL * (p - 1) * t.f.ps()) << "p=" << p << " m=" << m;
      EXPECT_EQ(h1.bubble().ps(), (p - 1) * t.f.ps()) << "p=" << p << " m=" << m;
      EXPECT_EQ(h2.bubble().ps(), (p - 1) * t.f.ps()) << "p=" << p << " m=" << m;
      for (int s = 0; s < p; ++s) EXPECT_EQ(h2.inside[static_cast<std::size_t>(s)], Time::zero()) << s;
      // ZB-H1's idle is all inside stage 0 (waiting for its first B).
      EXPECT_EQ(h1.inside[0].ps(), (p - 1) * t.f.ps());
    }
  }
}

TEST(ZeroBubble, BubblesWithTheAttentionInBFollowTheGeneralFormulas) {
  // All GEMMs: the attention's batched GEMMs put their whole backward into B,
  // so B = F + A and W = F - A (A > 0: T_W < T_F < T_B and T_B + T_W = 2 T_F,
  // as Qi et al. Table 1). Exact in picoseconds (no tolerance):
  //   zb-h1  bubble (p - 1)(F + B - W)
  //   zb-h2  bubble (p - 1) max(F, F + B - 2W); stage 0 idles (p - 1)(F + B - 2W)
  //          between its first and last compute (the paper's ZB-H2 bubble)
  //   1f1b   bubble (p - 1)(F + B + W)
  // By hand, per layer: the linears 3,145,728 ps (above) and the attention's
  // scores and context GEMMs 2*4*32*16*32 = 131,072 ps each, A = 262,144 ps.
  // With p = 4 (4 layers per stage): F = 13,631,488, B = 14,680,064,
  // W = 12,582,912 ps.
  const StepTimes four = step_times(4, false);
  EXPECT_EQ(four.f.ps(), 4 * (3'145'728 + 262'144));
  EXPECT_EQ(four.b.ps(), 4 * (3'145'728 + 2 * 262'144));
  EXPECT_EQ(four.w.ps(), 4 * 3'145'728);
  for (int p : {2, 4}) {
    const StepTimes t = step_times(p, false);
    ASSERT_GT(t.b, t.f);
    ASSERT_LT(t.w, t.f);
    ASSERT_EQ((t.b + t.w).ps(), 2 * t.f.ps());
    const std::int64_t m = 4LL * p;
    const Outcome one = run(pipeline(Schedule::OneFOneB, p, m), false);
    const Outcome h1 = run(pipeline(Schedule::ZeroBubbleH1, p, m), false);
    const Outcome h2 = run(pipeline(Schedule::ZeroBubbleH2, p, m), false);
    EXPECT_EQ(one.bubble(), (t.f + t.b + t.w) * (p - 1));
    EXPECT_EQ(h1.bubble(), (t.f + t.b - t.w) * (p - 1));
    const Time h2_inside = t.f + t.b - t.w - t.w;
    EXPECT_EQ(h2.bubble(), std::max(t.f, h2_inside) * (p - 1));
    EXPECT_EQ(h2.inside[0], h2_inside * (p - 1));
    EXPECT_LT(h2.bubble(), h1.bubble());
    EXPECT_LT(h1.bubble(), one.bubble());
  }
}

TEST(ZeroBubble, EveryCombinationRunsToCompletionWithTheSameWork) {
  // TP (with and without SP), DP with both gradient-sync modes, ZeRO and
  // recomputation under ZB-H1/H2: the plan validates, executes without
  // deadlock, and does the same compute as 1F1B (splitting B and W moves
  // kernels, it adds none).
  test_support::LayersOnlyPredictor pred(kModel.vocab);
  for (auto sched : {Schedule::ZeroBubbleH1, Schedule::ZeroBubbleH2}) {
    for (auto rc : {Recompute::None, Recompute::Selective, Recompute::Full}) {
      for (int zero : {0, 1, 3}) {
        for (auto sync : {GradSync::AfterBackward, GradSync::Overlapped}) {
          ParallelPlan p = pipeline(sched, 2, 8);
          p.dp = 2;
          p.tp = 2;
          p.global_batch = 16;
          p.recompute = rc;
          p.zero_stage = zero;
          p.sequence_parallel = zero != 0;
          p.grad_sync = sync;
          p.bucket_size = Bytes(100'000);
          ParallelPlan ref = p;
          ref.schedule = Schedule::OneFOneB;
          auto busy = [&](const ParallelPlan& plan) {
            const auto g = plan_training(kModel, kWork, plan, pred);
            EXPECT_NO_THROW(g.validate());
            engine::DiscreteEventLoop loop;
            engine::ZeroCostNetwork net(loop);
            const auto r = engine::execute(g, loop, net);
            EXPECT_GT(r.makespan, r.ranks[0].compute_busy);
            return r.ranks[0].compute_busy;
          };
          EXPECT_EQ(busy(p), busy(ref)) << to_string(sched) << " " << to_string(rc) << " zero " << zero;
        }
      }
    }
  }
}

TEST(ZeroBubble, GradientSyncWaitsForTheLastWeightGradient) {
  // dp = 2, overlapped buckets: every DP gradient collective depends (through
  // program order) on a W task of the last micro-batch of its chunk, never on
  // a B; and under after-backward the one reduction follows the last W.
  test_support::LayersOnlyPredictor pred(kModel.vocab);
  ParallelPlan p = pipeline(Schedule::ZeroBubbleH1, 2, 8);
  p.dp = 2;
  p.global_batch = 16;
  p.grad_sync = GradSync::Overlapped;
  p.bucket_size = Bytes(1);  // one bucket per produced gradient
  const auto g = plan_training(kModel, kWork, p, pred);
  ASSERT_NO_THROW(g.validate());
  for (int stage = 0; stage < 2; ++stage) {
    const auto& tasks = g.tasks(rank_of(p, {0, 0, stage}));
    int buckets = 0;
    for (const Task& t : tasks) {
      if (t.kind != TaskKind::Collective || t.name.find("dp.grad") == std::string_view::npos) continue;
      ++buckets;
      ASSERT_EQ(t.deps.size(), 1U);
      const Task& after = tasks[static_cast<std::size_t>(t.deps[0])];
      // The last micro-batch's (mb7) weight gradients of a layer, the LM head or the embedding.
      EXPECT_EQ(after.name.substr(0, 4), "mb7.") << after.name;
      EXPECT_NE(after.name.find("wgrad"), std::string_view::npos) << after.name;
    }
    // 8 layers per stage, plus the tied embedding (stage 0) or LM head and final norm (stage 1).
    EXPECT_EQ(buckets, 9) << stage;
  }
}
