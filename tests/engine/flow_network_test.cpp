#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "tessera/engine/executor.hpp"
#include "tessera/engine/flow_network.hpp"
#include "tessera/error.hpp"
#include "tessera/topology/fabrics.hpp"
#include "test_topologies.hpp"

using namespace tessera;
using namespace tessera::engine;

namespace {

parallelism::TaskGraph one_all_reduce(int p, Bytes size) {
  parallelism::TaskGraph g;
  parallelism::Group all;
  for (int r = 0; r < p; ++r) all.ranks.push_back(r);
  g.groups.push_back(all);
  parallelism::Program prog;
  {
    parallelism::Task ar;
    ar.name = "all_reduce";
    ar.kind = parallelism::TaskKind::Collective;
    ar.group = 0;
    ar.collective_id = 0;
    ar.bytes = size;
    prog.tasks.push_back(ar);
  }
  const std::int32_t shared = g.add_program(std::move(prog));  // every rank runs it
  for (int r = 0; r < p; ++r) g.add_rank(shared, {0});
  return g;
}

}  // namespace

TEST(FlowNetwork, RingAllReduceMatchesAlphaBeta) {
  // T = 2(p-1)/p * S/B + 2(p-1) * a, with a the per-step (path) latency.
  for (int p : {2, 4, 8}) {
    const Bandwidth bw = parse_bandwidth("100Gbps");
    const Time hop = parse_time("1us");
    const auto topo = test_support::star(p, bw, hop);
    DiscreteEventLoop loop;
    FlowNetwork net(topo, loop);
    const Bytes size = Bytes::mib(64);
    const auto r = execute(one_all_reduce(p, size), loop, net);
    const double a = 2 * hop.seconds();
    const double expected = 2.0 * (p - 1) / p * size.as_double() / bw.bytes_per_second() + 2.0 * (p - 1) * a;
    EXPECT_NEAR(r.makespan.seconds(), expected, 0.01 * expected) << "p=" << p;
    EXPECT_EQ(r.transfers, static_cast<std::uint64_t>(2 * (p - 1) * p));
  }
}

// A transfer that would outlast ~46 days of simulated time fails the run
// with OverflowError rather than finishing at the cap (a 1 GiB all-reduce
// over 1 bps links printed the cap as its time).
TEST(FlowNetwork, TransferBeyondTheTimeCapIsAnOverflowError) {
  const auto topo = test_support::star(2, Bandwidth::bits_per_second(1), Time::zero());
  DiscreteEventLoop loop;
  FlowNetwork net(topo, loop);
  try {
    (void)execute(one_all_reduce(2, Bytes::gib(1)), loop, net);
    FAIL() << "a 1 GiB all-reduce at 1 bps finished";
  } catch (const OverflowError& e) {
    EXPECT_NE(std::string(e.what()).find("from GPU 0 to GPU 1 would take more than 46 days"),
              std::string::npos)
        << e.what();
  }
  // At 1 Mbps the same all-reduce takes S / B, 8589.93 s (2.4 hours).
  const auto slow = test_support::star(2, parse_bandwidth("1Mbps"), Time::zero());
  DiscreteEventLoop loop2;
  FlowNetwork net2(slow, loop2);
  const auto r = execute(one_all_reduce(2, Bytes::gib(1)), loop2, net2);
  EXPECT_NEAR(r.makespan.seconds(), 8.0 * 1073741824 / 1e6, 1e-3);
}

TEST(FlowNetwork, TwoFlowsSharingALinkEachGetHalf) {
  const Bandwidth bw = parse_bandwidth("100Gbps");
  const auto topo = test_support::star(3, bw, Time::zero());
  DiscreteEventLoop loop;
  FlowNetwork net(topo, loop);
  Time done_a, done_b;
  net.send(Message{0, 2, Bytes::mib(8)}, [&] { done_a = loop.now(); });
  net.send(Message{1, 2, Bytes::mib(8)}, [&] { done_b = loop.now(); });
  const auto rates = net.active_rates();
  ASSERT_EQ(rates.size(), 2U);
  EXPECT_DOUBLE_EQ(rates[0], bw.bytes_per_second() / 2);
  EXPECT_DOUBLE_EQ(rates[1], bw.bytes_per_second() / 2);
  loop.run();
  const double expected = 2 * Bytes::mib(8).as_double() / bw.bytes_per_second();
  EXPECT_NEAR(done_a.seconds(), expected, 1e-9);
  EXPECT_NEAR(done_b.seconds(), expected, 1e-9);
}

TEST(FlowNetwork, MaxMinGivesLeftoverToUnconstrainedFlows) {
  // Flows 0->2 and 1->2 share host 2's link; flow 0->3 shares host 0's uplink
  // with 0->2. Max-min: 0->2 and 1->2 get B/2, 0->3 gets the other B/2.
  const Bandwidth bw = parse_bandwidth("80Gbps");
  const auto topo = test_support::star(4, bw, Time::zero());
  DiscreteEventLoop loop;
  FlowNetwork net(topo, loop);
  net.send(Message{0, 2, Bytes::mib(1)}, [] {});
  net.send(Message{1, 2, Bytes::mib(1)}, [] {});
  net.send(Message{1, 3, Bytes::mib(1)}, [] {});
  const auto rates = net.active_rates();
  ASSERT_EQ(rates.size(), 3U);
  EXPECT_DOUBLE_EQ(rates[0], 5e9);
  EXPECT_DOUBLE_EQ(rates[1], 5e9);
  EXPECT_DOUBLE_EQ(rates[2], 5e9);
  loop.run();
  EXPECT_EQ(net.flows_completed(), 3U);
}

TEST(FlowNetwork, LateFlowSpeedsUpWhenTheOtherFinishes) {
  // A 1 MB flow and a 3 MB flow start together on one link of 8 Gb/s (1 GB/s):
  // both at 0.5 GB/s until the small one ends at 2 ms, then the big one alone:
  // it has 2 MB left at 1 GB/s, ending at 4 ms.
  const auto topo = test_support::star(3, parse_bandwidth("8Gbps"), Time::zero());
  DiscreteEventLoop loop;
  FlowNetwork net(topo, loop);
  Time small, big;
  net.send(Message{0, 2, Bytes(1'000'000)}, [&] { small = loop.now(); });
  net.send(Message{1, 2, Bytes(3'000'000)}, [&] { big = loop.now(); });
  loop.run();
  EXPECT_EQ(small, parse_time("2ms"));
  EXPECT_NEAR(big.ms(), 4.0, 1e-6);
  EXPECT_NEAR(net.link_bytes()[topo.route(1, 2)[0]], 3e6, 1.0);
}

TEST(FlowNetwork, GpusSharingAnHcaSplitItsBandwidth) {
  // 2 nodes x 8 GPUs, 2 HCAs of 100 Gb/s per node (4 GPUs each), PCIe of
  // 16 GB/s per GPU. GPUs 0-3 (behind HCA 0) each send S to node 1: the
  // HCA's 100 Gb/s is split 4 ways (25 Gb/s < PCIe). GPU 4 alone behind HCA 1
  // gets the whole 100 Gb/s. With one HCA per GPU each gets 100 Gb/s.
  topology::FatTreeSpec spec;
  spec.nodes = 2;
  spec.node.gpus = 8;
  spec.node.nvlink = {parse_bandwidth("300GB/s"), parse_time("1us")};
  spec.node.hcas = 2;
  spec.node.pcie = {parse_bandwidth("16GB/s"), Time::zero()};
  spec.k = 8;
  spec.tiers = 2;
  spec.host = {parse_bandwidth("100Gbps"), Time::zero()};
  spec.leaf_spine = {parse_bandwidth("400Gbps"), Time::zero()};
  for (const int hcas : {2, 8}) {
    spec.node.hcas = hcas;
    const auto topo = topology::build_fat_tree(spec);
    DiscreteEventLoop loop;
    FlowNetwork net(topo, loop);
    const Bytes size = Bytes::mib(4);
    std::vector<Time> done(5);
    for (int g = 0; g < 5; ++g) net.send(Message{g, 8 + g, size}, [&, g] { done[static_cast<std::size_t>(g)] = loop.now(); });
    loop.run();
    const double full = size.as_double() / parse_bandwidth("100Gbps").bytes_per_second();
    for (int g = 0; g < 4; ++g) EXPECT_NEAR(done[static_cast<std::size_t>(g)].seconds(), hcas == 2 ? 4 * full : full, 1e-9) << hcas;
    EXPECT_NEAR(done[4].seconds(), full, 1e-9) << hcas;
  }
  // A PCIe link slower than the HCA share is the bottleneck of a lone flow.
  spec.node.hcas = 2;
  spec.node.pcie = {parse_bandwidth("8Gbps"), Time::zero()};
  const auto topo = topology::build_fat_tree(spec);
  DiscreteEventLoop loop;
  FlowNetwork net(topo, loop);
  Time t;
  net.send(Message{0, 8, Bytes::mib(1)}, [&] { t = loop.now(); });
  loop.run();
  EXPECT_NEAR(t.seconds(), Bytes::mib(1).as_double() / 1e9, 1e-9);
}

TEST(FlowNetwork, LoneFlowKeepsItsLinksBusyBytesOverBandwidthAtFullLoad) {
  // 1 MB at 8 Gb/s (1 GB/s): both links of the path busy 1 ms at load 1;
  // the path latency (2 x 1 us) delays delivery, not the links.
  const auto topo = test_support::star(3, parse_bandwidth("8Gbps"), Time::from_us(1));
  DiscreteEventLoop loop;
  FlowNetwork net(topo, loop);
  Time done;
  net.send(Message{0, 1, Bytes(1'000'000)}, [&] { done = loop.now(); });
  loop.run();
  EXPECT_EQ(done, Time::from_us(1002));
  const auto path = topo.route(0, 1);
  ASSERT_EQ(path.size(), 2u);
  const auto busy = net.link_busy();
  const auto& peak = net.link_peak_utilization();
  for (std::size_t l = 0; l < busy.size(); ++l) {
    const bool on_path = std::find(path.begin(), path.end(), static_cast<topology::LinkId>(l)) != path.end();
    EXPECT_EQ(busy[l], on_path ? Time::from_ms(1) : Time::zero()) << "link " << l;
    EXPECT_EQ(peak[l], on_path ? 1.0 : 0.0) << "link " << l;
  }
}

TEST(FlowNetwork, TwoFlowsSharingALinkFillItAndHalfLoadTheirOwnLinks) {
  // 0 -> 1 and 0 -> 2, 1 MB each at 1 GB/s: they share GPU 0's uplink at
  // 0.5 GB/s each and both finish at 2 ms. The uplink is busy 2 ms at load
  // 1; each downlink 2 ms at load 0.5.
  const auto topo = test_support::star(3, parse_bandwidth("8Gbps"), Time::zero());
  DiscreteEventLoop loop;
  FlowNetwork net(topo, loop);
  net.send(Message{0, 1, Bytes(1'000'000)}, [] {});
  net.send(Message{0, 2, Bytes(1'000'000)}, [] {});
  loop.run();
  const auto a = topo.route(0, 1);
  const auto b = topo.route(0, 2);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(a[0], b[0]);  // the shared uplink
  const auto busy = net.link_busy();
  const auto& peak = net.link_peak_utilization();
  const auto up = static_cast<std::size_t>(a[0]);
  EXPECT_EQ(busy[up], Time::from_ms(2));
  EXPECT_EQ(peak[up], 1.0);
  for (auto down : {static_cast<std::size_t>(a[1]), static_cast<std::size_t>(b[1])}) {
    EXPECT_EQ(busy[down], Time::from_ms(2));
    EXPECT_EQ(peak[down], 0.5);
  }
}

TEST(FlowNetwork, BusyTimeIsTheUnionOfAFlowsPeriods) {
  // 1 MB at 1 GB/s from 0 ms to 1 ms, then again from 3 ms to 4 ms: busy
  // 2 ms, not 4. Mid-way through the second (3.5 ms) it reads 1.5 ms.
  const auto topo = test_support::star(2, parse_bandwidth("8Gbps"), Time::zero());
  DiscreteEventLoop loop;
  FlowNetwork net(topo, loop);
  const auto up = static_cast<std::size_t>(topo.route(0, 1)[0]);
  net.send(Message{0, 1, Bytes(1'000'000)}, [] {});
  loop.schedule(Time::from_ms(3), [&] { net.send(Message{0, 1, Bytes(1'000'000)}, [] {}); });
  Time midway;
  loop.schedule(Time::from_us(3500), [&] { midway = net.link_busy()[up]; });
  loop.run();
  EXPECT_EQ(midway, Time::from_us(1500));
  EXPECT_EQ(net.link_busy()[up], Time::from_ms(2));
  EXPECT_EQ(net.link_peak_utilization()[up], 1.0);
}

namespace {
/// Two leaves of two single-GPU nodes each (one 100 Gb/s HCA per GPU), two
/// spines of 100 Gb/s up-links: non-blocking.
topology::Topology two_spine_fabric() {
  topology::LeafSpineSpec s;
  s.nodes = 4;
  s.gpus_per_node = 1;
  s.nvlink_bandwidth = Bandwidth::gbps(400);
  s.nvlink_latency = Time::zero();
  s.nic_bandwidth = Bandwidth::gbps(100);
  s.nic_latency = Time::zero();
  s.hosts_per_leaf = 2;
  s.spines = 2;
  s.spine_bandwidth = Bandwidth::gbps(100);
  s.spine_latency = Time::zero();
  return topology::build_leaf_spine(s);
}

/// When the last of two 100 MB flows, GPU 0 -> 2 and GPU 1 -> 3, arrives.
double two_cross_leaf_flows(const topology::Topology& t) {
  DiscreteEventLoop loop;
  FlowNetwork net(t, loop);
  for (auto [src, dst] : {std::pair{0, 2}, std::pair{1, 3}}) net.send(Message{src, dst, Bytes(100'000'000)}, [] {});
  loop.run();
  return loop.now().seconds();
}
}  // namespace

// A failed spine link: the two cross-leaf flows that had a spine each share
// the one left, so the cross-leaf bandwidth halves (8 ms -> 16 ms for 100 MB
// each at 100 Gb/s). A degraded link instead keeps its route and slows the
// flow crossing it. Failing both leaves a leaf unreachable.
TEST(FlowNetwork, FailedSpineLinkHalvesCrossLeafBandwidth) {
  topology::Topology t = two_spine_fabric();
  EXPECT_NEAR(two_cross_leaf_flows(t), 8e-3, 1e-9);
  ASSERT_NE(t.route(0, 2), t.route(1, 3));
  const auto leaf0 = t.find_vertex("leaf0");
  EXPECT_EQ(t.fail_cable(leaf0, t.find_vertex("spine1")), 2);
  EXPECT_EQ(t.failed_links(), 2);
  EXPECT_NEAR(two_cross_leaf_flows(t), 16e-3, 1e-9);
  for (int dst : {2, 3}) {
    for (auto l : t.route(0, dst)) EXPECT_FALSE(t.failed(l));
  }

  topology::Topology slow = two_spine_fabric();
  EXPECT_EQ(slow.degrade_cable(slow.find_vertex("leaf0"), slow.find_vertex("spine1"), 0.25), 2);
  // One flow keeps its own spine (8 ms), the other crosses the quarter-rate
  // link: 32 ms.
  EXPECT_NEAR(two_cross_leaf_flows(slow), 32e-3, 1e-9);

  EXPECT_THROW((void)t.find_vertex("spine7"), InputError);
  EXPECT_THROW((void)t.fail_cable(t.find_vertex("leaf0"), t.find_vertex("leaf1")), InputError);
  EXPECT_THROW((void)t.degrade_cable(leaf0, t.find_vertex("spine0"), 0.0), InputError);
  (void)t.fail_cable(leaf0, t.find_vertex("spine0"));
  EXPECT_THROW((void)t.route(0, 2), InputError);
  EXPECT_NO_THROW((void)t.route(0, 1));  // under the same leaf
}

// Bytes by source class: on a star, ranks 0 and 1 (class 0) and rank 2
// (class 1) all send to rank 3; rank 3's link carries 1 + 2 MB of class 0
// and 4 MB of class 1; rank 4 (no class) adds 8 MB counted in no class.
TEST(FlowNetwork, LinkBytesBySourceClass) {
  const auto topo = test_support::star(5, parse_bandwidth("8Gbps"), Time::zero());
  DiscreteEventLoop loop;
  FlowNetwork net(topo, loop);
  net.set_source_classes({0, 0, 1, 0, -1});
  net.send(Message{0, 3, Bytes(1'000'000)}, [] {});
  net.send(Message{1, 3, Bytes(2'000'000)}, [] {});
  net.send(Message{2, 3, Bytes(4'000'000)}, [] {});
  net.send(Message{4, 3, Bytes(8'000'000)}, [] {});
  EXPECT_THROW(net.set_source_classes({0}), SimulationError);  // too late
  loop.run();
  const auto by_class = net.link_bytes_by_class();
  ASSERT_EQ(by_class.size(), 2U);
  const auto into3 = static_cast<std::size_t>(topo.route(0, 3).back());
  EXPECT_EQ(by_class[0][into3], 3e6);
  EXPECT_EQ(by_class[1][into3], 4e6);
  EXPECT_EQ(net.link_bytes()[into3], 15e6);
  const auto out_of2 = static_cast<std::size_t>(topo.route(2, 3).front());
  EXPECT_EQ(by_class[0][out_of2], 0.0);
  EXPECT_EQ(by_class[1][out_of2], 4e6);
  // Without classes: nothing to split.
  DiscreteEventLoop loop2;
  FlowNetwork plain(topo, loop2);
  EXPECT_TRUE(plain.link_bytes_by_class().empty());
}

namespace {
/// two_spine_fabric with latencies: 1 us per HCA cable, 2 us per spine
/// cable, so every cross-leaf path (GPU, leaf, spine, leaf, GPU) takes 6 us.
topology::Topology two_spine_fabric_with_latency() {
  topology::LeafSpineSpec s;
  s.nodes = 4;
  s.gpus_per_node = 1;
  s.nvlink_bandwidth = Bandwidth::gbps(400);
  s.nvlink_latency = Time::zero();
  s.nic_bandwidth = Bandwidth::gbps(100);
  s.nic_latency = Time::from_us(1);
  s.hosts_per_leaf = 2;
  s.spines = 2;
  s.spine_bandwidth = Bandwidth::gbps(100);
  s.spine_latency = Time::from_us(2);
  return topology::build_leaf_spine(s);
}

void expect_within_a_ps(Time got, Time want) {
  EXPECT_LE(std::abs((got - want).ps()), 1) << to_string(got) << " vs " << to_string(want);
}
}  // namespace

// A spine cable drops to half rate at 2 ms under one 100 MB flow at 100 Gb/s
// (12.5 GB/s): 25 MB have crossed by then, the other 75 MB take 75e6 /
// 6.25e9 = 12 ms, so the last byte leaves at 14 ms and arrives one path
// latency (6 us) later.
TEST(FlowNetwork, CableDegradedDuringAFlowSlowsItFromThen) {
  const topology::Topology t = two_spine_fabric_with_latency();
  const topology::Path path = t.route(0, 2);
  ASSERT_EQ(path.size(), 4U);
  EXPECT_EQ(t.latency(path), Time::from_us(6));
  const topology::Link& up = t.link(path[1]);  // leaf0 -> its spine
  DiscreteEventLoop loop;
  FlowNetwork net(t, loop);
  net.change_cable_at(Time::from_ms(2), up.src, up.dst, 0.5);
  Time arrived;
  net.send(Message{0, 2, Bytes(100'000'000)}, [&] { arrived = loop.now(); });
  double rate_before = 0, rate_after = 0;
  loop.schedule(Time::from_ms(1), [&] { rate_before = net.active_rates().at(0); });
  loop.schedule(Time::from_ms(3), [&] { rate_after = net.active_rates().at(0); });
  loop.run();
  EXPECT_DOUBLE_EQ(rate_before, 12.5e9);
  EXPECT_DOUBLE_EQ(rate_after, 6.25e9);
  EXPECT_EQ(net.routing_epoch(), 0U);  // a slower cable routes as before
  expect_within_a_ps(arrived, Time::from_ms(14) + Time::from_us(6));
  EXPECT_NEAR(net.link_bytes()[static_cast<std::size_t>(path[1])], 1e8, 1e-3);
  expect_within_a_ps(net.link_busy()[static_cast<std::size_t>(path[1])], Time::from_ms(14));
  EXPECT_DOUBLE_EQ(net.link_peak_utilization()[static_cast<std::size_t>(path[1])], 1.0);
}

// Two 100 MB flows, GPU 0 -> 2 and GPU 1 -> 3, each on its own spine at
// 100 Gb/s; at 4 ms (50 MB left each) the second one's spine cable at leaf0
// fails. It moves to the other spine with its 50 MB: the two share one
// up-link at 6.25 GB/s each, so both finish 8 ms later, at 12 ms (+ 6 us
// latency on either path). A message sent afterwards routes around it.
TEST(FlowNetwork, CableFailedDuringAFlowMovesItToTheOtherSpine) {
  const topology::Topology t = two_spine_fabric_with_latency();
  const topology::Path first = t.route(0, 2);
  const topology::Path second = t.route(1, 3);
  ASSERT_NE(t.link(first[1]).dst, t.link(second[1]).dst);  // one spine each
  const topology::Link& failing = t.link(second[1]);       // leaf0 -> spine of the second
  DiscreteEventLoop loop;
  FlowNetwork net(t, loop);
  net.set_source_classes({0, 1, 0, 1});  // the sources' jobs: 0 and 2, 1 and 3
  net.change_cable_at(Time::from_ms(4), failing.src, failing.dst, 0.0);
  std::vector<Time> arrived(3);
  net.send(Message{0, 2, Bytes(100'000'000)}, [&] { arrived[0] = loop.now(); });
  net.send(Message{1, 3, Bytes(100'000'000)}, [&] { arrived[1] = loop.now(); });
  std::vector<double> rates;
  std::vector<std::uint64_t> epochs;  // at 3 and 5 ms: the failure at 4 ms moves routes on by one
  loop.schedule(Time::from_ms(3), [&] { epochs.push_back(net.routing_epoch()); });
  loop.schedule(Time::from_ms(5), [&] {
    rates = net.active_rates();
    epochs.push_back(net.routing_epoch());
  });
  loop.schedule(Time::from_ms(13), [&] {
    net.send(Message{1, 3, Bytes(12'500'000)}, [&] { arrived[2] = loop.now(); });  // 1 ms alone
  });
  loop.run();
  ASSERT_EQ(rates.size(), 2U);
  EXPECT_EQ(epochs, (std::vector<std::uint64_t>{0, 1}));
  EXPECT_DOUBLE_EQ(rates[0], 6.25e9);
  EXPECT_DOUBLE_EQ(rates[1], 6.25e9);
  expect_within_a_ps(arrived[0], Time::from_ms(12) + Time::from_us(6));
  expect_within_a_ps(arrived[1], Time::from_ms(12) + Time::from_us(6));
  expect_within_a_ps(arrived[2], Time::from_ms(14) + Time::from_us(6));
  const auto bytes = net.link_bytes();
  EXPECT_NEAR(bytes[static_cast<std::size_t>(second[1])], 5e7, 1e-3);            // until it failed
  EXPECT_NEAR(bytes[static_cast<std::size_t>(first[1])], 1e8 + 5e7 + 1.25e7, 1e-3);  // then everything
  expect_within_a_ps(net.link_busy()[static_cast<std::size_t>(second[1])], Time::from_ms(4));
  EXPECT_EQ(net.flows_completed(), 3U);
  // The bytes a moved flow carried before the failure stay its class's
  // (helper 57: they were dropped, and a job's link bytes with them): the
  // classes sum to link_bytes() on every link.
  const auto by_class = net.link_bytes_by_class();
  ASSERT_EQ(by_class.size(), 2U);
  EXPECT_NEAR(by_class[1][static_cast<std::size_t>(second[1])], 5e7, 1e-3);
  EXPECT_NEAR(by_class[1][static_cast<std::size_t>(first[1])], 5e7 + 1.25e7, 1e-3);
  for (std::size_t l = 0; l < bytes.size(); ++l)
    EXPECT_NEAR(by_class[0][l] + by_class[1][l], bytes[l], 1e-3) << l;

  // Failing it at time zero is the failure from the start (16 ms, as
  // FailedSpineLinkHalvesCrossLeafBandwidth).
  DiscreteEventLoop loop0;
  FlowNetwork net0(t, loop0);
  net0.change_cable_at(Time::zero(), failing.src, failing.dst, 0.0);
  for (auto [src, dst] : {std::pair{0, 2}, std::pair{1, 3}}) net0.send(Message{src, dst, Bytes(100'000'000)}, [] {});
  loop0.run();
  expect_within_a_ps(loop0.now(), Time::from_ms(16) + Time::from_us(6));

  // What it refuses: no cable, a factor out of range, a time in the past.
  EXPECT_THROW(net0.change_cable_at(Time::from_ms(1), t.find_vertex("leaf0"), t.find_vertex("leaf1"), 0.0),
               InputError);
  EXPECT_THROW(net0.change_cable_at(Time::from_ms(20), failing.src, failing.dst, 1.5), InputError);
  EXPECT_THROW(net0.change_cable_at(Time::from_ms(1), failing.src, failing.dst, 0.0), InputError);
}
