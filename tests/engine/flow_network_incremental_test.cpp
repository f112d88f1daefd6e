// The incremental flow backend against the original global one
// (reference_flow_network.hpp): same max-min rates bit for bit, same delivery
// times (up to the picosecond rounding of when remaining bytes are brought up
// to date), one recomputation per instant, exact per-link byte counters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "reference_flow_network.hpp"
#include "tessera/engine/flow_network.hpp"
#include "tessera/topology/fabrics.hpp"
#include "test_topologies.hpp"

using namespace tessera;
using namespace tessera::engine;

namespace {

/// 8 nodes x 2 GPUs on a 2-tier k=4 fat-tree, oversubscribed 3:1 at the
/// leaves, with different speeds per tier: plenty of distinct bottlenecks
/// and flows that share links transitively.
topology::Topology mixed_fabric() {
  topology::FatTreeSpec spec;
  spec.nodes = 4;
  spec.node.gpus = 2;
  spec.node.fabric = topology::NodeFabric::NvSwitch;
  spec.node.nvlink = {parse_bandwidth("100GB/s"), parse_time("1us")};
  spec.k = 4;
  spec.tiers = 2;
  spec.oversubscription = 3;
  spec.host = {parse_bandwidth("200Gbps"), parse_time("1us")};
  spec.leaf_spine = {parse_bandwidth("150Gbps"), parse_time("600ns")};
  return topology::build_fat_tree(spec);
}

struct PlannedFlow {
  Time at;
  int src;
  int dst;
  Bytes bytes;
};

std::vector<PlannedFlow> random_flows(std::mt19937_64& rng, int gpus, int n, bool same_instant) {
  std::uniform_int_distribution<int> rank(0, gpus - 1);
  std::uniform_int_distribution<std::int64_t> size(1, 20'000'000);
  std::uniform_int_distribution<std::int64_t> start(0, 2'000'000'000);  // 0..2 ms
  std::uniform_int_distribution<int> instant(0, 3);
  std::vector<PlannedFlow> out;
  for (int i = 0; i < n; ++i) {
    const int src = rank(rng);
    int dst = rank(rng);
    if (dst == src) dst = (src + 1) % gpus;
    // Starts cluster on a few instants (as ring steps do) or spread out.
    const Time at = same_instant ? Time::from_ps(500'000'000LL * instant(rng)) : Time::from_ps(start(rng));
    out.push_back(PlannedFlow{at, src, dst, Bytes(size(rng))});
  }
  return out;
}

/// Schedules every flow on `loop` through `net`; records delivery times.
template <class Net>
std::vector<Time> run_flows(const std::vector<PlannedFlow>& flows, DiscreteEventLoop& loop, Net& net) {
  std::vector<Time> delivered(flows.size(), Time::from_ps(-1));
  for (std::size_t i = 0; i < flows.size(); ++i) {
    const PlannedFlow& f = flows[i];
    loop.schedule(f.at, [&loop, &net, &delivered, f, i] {
      net.send(Message{f.src, f.dst, f.bytes}, [&loop, &delivered, i] { delivered[i] = loop.now(); });
    });
  }
  loop.run();
  return delivered;
}

}  // namespace

TEST(FlowNetworkIncremental, RatesEqualAGlobalRecomputationBitForBit) {
  // Flows arrive one by one; after each arrival the incremental backend
  // (which only refills the arrival's component) must give exactly the rates
  // of the reference's global progressive filling.
  const auto topo = mixed_fabric();
  const int gpus = 8;
  std::mt19937_64 rng(20240611);
  for (int trial = 0; trial < 20; ++trial) {
    DiscreteEventLoop la;
    DiscreteEventLoop lb;
    FlowNetwork inc(topo, la);
    test_support::ReferenceFlowNetwork ref(topo, lb);
    const auto flows = random_flows(rng, gpus, 40, true);
    for (const auto& f : flows) {
      inc.send(Message{f.src, f.dst, f.bytes}, [] {});
      ref.send(Message{f.src, f.dst, f.bytes}, [] {});
      const auto a = inc.active_rates();
      const auto b = ref.active_rates();
      ASSERT_EQ(a.size(), b.size());
      for (std::size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "trial " << trial << " flow " << i;
    }
  }
}

TEST(FlowNetworkIncremental, RatesAndDeliveriesMatchAsFlowsComeAndGo) {
  // Random arrivals over 2 ms; probes at odd instants compare every active
  // flow's rate, and every delivery time is compared.
  const auto topo = mixed_fabric();
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 10; ++trial) {
    const auto flows = random_flows(rng, 8, 120, trial % 2 == 0);
    DiscreteEventLoop la;
    DiscreteEventLoop lb;
    FlowNetwork inc(topo, la);
    test_support::ReferenceFlowNetwork ref(topo, lb);
    std::vector<std::vector<double>> probes_a;
    std::vector<std::vector<double>> probes_b;
    for (std::int64_t t = 123'456'789; t < 3'000'000'000; t += 97'531'357) {
      la.schedule(Time::from_ps(t), [&] { probes_a.push_back(inc.active_rates()); });
      lb.schedule(Time::from_ps(t), [&] { probes_b.push_back(ref.active_rates()); });
    }
    const auto da = run_flows(flows, la, inc);
    const auto db = run_flows(flows, lb, ref);
    ASSERT_EQ(da.size(), db.size());
    for (std::size_t i = 0; i < da.size(); ++i) {
      ASSERT_GE(da[i].ps(), 0) << "flow " << i << " never delivered";
      // Remaining bytes are brought up to date at other instants (only on a
      // rate change, not at every event anywhere): rounding may move a
      // delivery by a picosecond, never more.
      EXPECT_LE(std::abs(da[i].ps() - db[i].ps()), 2) << "trial " << trial << " flow " << i;
    }
    ASSERT_EQ(probes_a.size(), probes_b.size());
    int nonempty = 0;
    for (std::size_t p = 0; p < probes_a.size(); ++p) {
      ASSERT_EQ(probes_a[p], probes_b[p]) << "trial " << trial << " probe " << p;
      nonempty += probes_a[p].empty() ? 0 : 1;
    }
    EXPECT_GT(nonempty, 5);
    EXPECT_EQ(inc.flows_completed(), flows.size());
  }
}

TEST(FlowNetworkIncremental, SameInstantStartsAndEndsShareOneRecomputation) {
  // One ring step on a star: p flows start at one instant, end at one
  // instant: two recomputations in all, and the reference's delivery times.
  const int p = 8;
  const Bandwidth bw = parse_bandwidth("100Gbps");
  const auto topo = test_support::star(p, bw, parse_time("1us"));
  std::vector<PlannedFlow> flows;
  flows.reserve(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) flows.push_back(PlannedFlow{Time::zero(), r, (r + 1) % p, Bytes::mib(4)});
  DiscreteEventLoop la;
  DiscreteEventLoop lb;
  FlowNetwork inc(topo, la);
  test_support::ReferenceFlowNetwork ref(topo, lb);
  const auto da = run_flows(flows, la, inc);
  const auto db = run_flows(flows, lb, ref);
  EXPECT_EQ(da, db);
  EXPECT_EQ(inc.recomputations(), 2U);
  const Time expected = Time::from_ps(static_cast<std::int64_t>(
      std::ceil(Bytes::mib(4).as_double() / bw.bytes_per_second() * 1e12 - 1e-9))) + parse_time("2us");
  for (Time t : da) EXPECT_EQ(t, expected);
}

TEST(FlowNetworkIncremental, BatchedStartsGiveTheSameTimesAsOneByOne) {
  // Staggered starts (each its own recomputation) and the same flows with
  // clustered starts: both match the reference, which recomputes per flow.
  const auto topo = mixed_fabric();
  std::mt19937_64 rng(99);
  for (bool clustered : {false, true}) {
    const auto flows = random_flows(rng, 8, 60, clustered);
    DiscreteEventLoop la;
    DiscreteEventLoop lb;
    FlowNetwork inc(topo, la);
    test_support::ReferenceFlowNetwork ref(topo, lb);
    const auto da = run_flows(flows, la, inc);
    const auto db = run_flows(flows, lb, ref);
    for (std::size_t i = 0; i < da.size(); ++i) EXPECT_LE(std::abs(da[i].ps() - db[i].ps()), 2) << i;
    if (clustered) {
      EXPECT_LE(inc.recomputations(), 60U + 4U);  // at most one per end instant + one per start instant
    }
  }
}

TEST(FlowNetworkIncremental, LinkBytesAreExactWholeMessages) {
  const auto topo = mixed_fabric();
  std::mt19937_64 rng(3);
  const auto flows = random_flows(rng, 8, 200, false);
  DiscreteEventLoop loop;
  FlowNetwork net(topo, loop);
  run_flows(flows, loop, net);
  std::vector<double> expected(topo.links().size(), 0.0);
  for (const auto& f : flows) {
    for (auto l : topo.route(f.src, f.dst)) expected[static_cast<std::size_t>(l)] += f.bytes.as_double();
  }
  EXPECT_EQ(net.link_bytes(), expected);
}

TEST(FlowNetworkIncremental, LinkBytesMidFlightCountWhatHasMoved) {
  // 8 MB at 1 GB/s alone on its path: half of it after 4 ms.
  const auto topo = test_support::star(2, parse_bandwidth("8Gbps"), Time::zero());
  DiscreteEventLoop loop;
  FlowNetwork net(topo, loop);
  double mid = -1.0;
  net.send(Message{0, 1, Bytes(8'000'000)}, [] {});
  loop.schedule(parse_time("4ms"), [&] { mid = net.link_bytes()[static_cast<std::size_t>(topo.route(0, 1)[0])]; });
  loop.run();
  EXPECT_NEAR(mid, 4e6, 1.0);
  EXPECT_EQ(net.link_bytes()[static_cast<std::size_t>(topo.route(0, 1)[0])], 8e6);
}

TEST(FlowNetworkIncremental, IdenticalRunsAreIdentical) {
  const auto topo = mixed_fabric();
  std::mt19937_64 rng(11);
  const auto flows = random_flows(rng, 8, 150, true);
  std::vector<Time> first;
  for (int run = 0; run < 2; ++run) {
    DiscreteEventLoop loop;
    FlowNetwork net(topo, loop);
    const auto d = run_flows(flows, loop, net);
    if (run == 0) {
      first = d;
    } else {
      EXPECT_EQ(d, first);
    }
  }
}

TEST(DiscreteEventLoop, ZeroDelayEventsKeepSchedulingOrder) {
  // Zero-delay events bypass the heap; they must still run after every
  // event scheduled earlier for the same instant, in scheduling order.
  DiscreteEventLoop loop;
  std::string order;
  loop.schedule(Time::from_ps(5), [&] {
    order += 'A';
    loop.schedule(Time::zero(), [&] {
      order += 'B';
      loop.schedule(Time::zero(), [&] { order += 'F'; });
    });
    loop.schedule(Time::zero(), [&] { order += 'E'; });
    loop.schedule(Time::from_ps(1), [&] { order += 'G'; });
  });
  loop.schedule(Time::from_ps(5), [&] { order += 'D'; });
  loop.schedule(Time::zero(), [&] { order += '0'; });
  loop.run();
  EXPECT_EQ(order, "0ADBEFG");
  EXPECT_EQ(loop.events_processed(), 7U);
  EXPECT_EQ(loop.now(), Time::from_ps(6));
}

TEST(DiscreteEventLoop, RunsOfTiesKeepTimeThenSchedulingOrder) {
  // Events for the same later time are kept in runs (one heap entry per
  // run of consecutive schedules); runs for one time can interleave with
  // other times' events. Against a plain (time, sequence) priority queue:
  // every event, scheduled from a pseudo-random generator with few distinct
  // delays (many ties) and from inside other events, runs in the same order.
  struct Reference {
    std::vector<std::tuple<Time, std::uint64_t, int>> pending;  // (at, seq, id)
    Time now;
    std::uint64_t seq = 0;
  };
  const Time delays[] = {Time::zero(), Time::from_ps(3), Time::from_ps(3), Time::from_ps(7),
                         Time::from_ps(10)};
  // Event `id` schedules children with ids 3 id + 1 .. 3 id + 3 (up to 3000),
  // each with a delay picked from `delays` by a fixed hash of its id.
  auto delay_of = [&](int id) { return delays[(static_cast<unsigned>(id) * 2654435761U >> 7) % 5]; };
  auto children = [](int id) { return id < 1000 ? 3 : 0; };

  DiscreteEventLoop loop;
  std::vector<int> order;
  std::function<void(int)> fire = [&](int id) {
    order.push_back(id);
    for (int c = 1; c <= children(id); ++c) {
      const int child = 3 * id + c;
      loop.schedule(delay_of(child), [&fire, child] { fire(child); });
    }
  };
  for (int root = 0; root < 3; ++root) loop.schedule(delay_of(root), [&fire, root] { fire(root); });
  loop.run();

  Reference ref;
  std::vector<int> expected;
  auto push = [&](int id) { ref.pending.emplace_back(ref.now + delay_of(id), ref.seq++, id); };
  for (int root = 0; root < 3; ++root) push(root);
  while (!ref.pending.empty()) {
    const auto next = std::min_element(ref.pending.begin(), ref.pending.end());
    const auto [at, seq, id] = *next;
    ref.pending.erase(next);
    ref.now = at;
    expected.push_back(id);
    for (int c = 1; c <= children(id); ++c) push(3 * id + c);
  }
  ASSERT_GT(expected.size(), 3000U);
  EXPECT_EQ(order, expected);
  EXPECT_EQ(loop.events_processed(), expected.size());
  EXPECT_EQ(loop.now(), ref.now);
}
