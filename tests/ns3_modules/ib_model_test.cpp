// The ns-3 InfiniBand model: line rate, lossless incast, credit back-pressure
// (head-of-line blocking), agreement with the flow backend, adaptive routing,
// segment coarsening, reports and bad input. Hand calculations in comments.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "../engine/test_topologies.hpp"
#include "tessera/engine/executor.hpp"
#include "tessera/engine/flow_network.hpp"
#include "tessera/error.hpp"
#include "tessera/ns3_modules/ns3_backend.hpp"
#include "tessera/topology/fabrics.hpp"
#include "tessera/topology/routing.hpp"
#include "tessera/topology/topology.hpp"

using namespace tessera;
using engine::Message;
using ns3_modules::Ns3EventLoop;
using ns3_modules::Ns3Network;
using ns3_modules::Ns3Options;
using topology::Topology;
using topology::VertexKind;

namespace {

constexpr std::int64_t kMtu = 4096;
/// Default wire overhead per MTU packet: LRH 8 + BTH 12 + ICRC 4 + VCRC 2 +
/// 4 B of delimiters/idles.
constexpr std::int64_t kHeader = 30;
constexpr std::int64_t kWire = kMtu + kHeader;  // 4126 B

double packet_seconds(Bandwidth bw) { return static_cast<double>(kWire) * 8.0 / static_cast<double>(bw.bps()); }
/// Payload bytes per second a saturated link delivers.
double payload_rate(Bandwidth bw) {
  return bw.bytes_per_second() * static_cast<double>(kMtu) / static_cast<double>(kWire);
}

using test_support::star;  // hosts on one switch (tests/engine/test_topologies.hpp)

parallelism::TaskGraph all_reduce_graph(int ranks, Bytes size, std::int64_t compute_us = 0) {
  parallelism::TaskGraph g;
  parallelism::Group group;
  for (int r = 0; r < ranks; ++r) group.ranks.push_back(r);
  g.groups.push_back(group);
  for (int r = 0; r < ranks; ++r) {
    parallelism::Program prog;
    std::vector<parallelism::TaskIndex> deps;
    if (compute_us > 0) {
      parallelism::Task c;
      c.name = "backward";
      c.kind = parallelism::TaskKind::Compute;
      c.duration = Time::from_us(compute_us + 3LL * r);  // ranks finish a little apart
      c.flops = Flops(1e12);
      prog.tasks.push_back(c);
      deps.push_back(0);
    }
    parallelism::Task ar;
    ar.name = "grad_all_reduce";
    ar.kind = parallelism::TaskKind::Collective;
    ar.group = 0;
    ar.collective_id = 0;
    ar.bytes = size;
    ar.deps = deps;
    prog.tasks.push_back(ar);
    g.add_rank(g.add_program(std::move(prog)), {0});
  }
  return g;
}

struct Flows {
  std::vector<Time> done;
  ns3_modules::Ns3Report report;
};
Flows run_flows(const Topology& t, const std::vector<Message>& msgs, const Ns3Options& o = {}) {
  Ns3EventLoop loop;
  Ns3Network net(t, loop, o);
  Flows f;
  f.done.assign(msgs.size(), Time::max());
  for (std::size_t i = 0; i < msgs.size(); ++i) net.send(msgs[i], [&f, &loop, i] { f.done[i] = loop.now(); });
  loop.run();
  net.verify();
  f.report = net.report();
  return f;
}

}  // namespace

TEST(IbModel, OneLinkCarriesPayloadAtLineRateTimesMtuOverWireBytes) {
  for (const auto bw : {Bandwidth::gbps(200), Bandwidth::gbps(400), Bandwidth::gbps(800)}) {
    Topology t;
    const auto a = t.add_vertex(VertexKind::Gpu, "gpu0", 0);
    const auto b = t.add_vertex(VertexKind::Gpu, "gpu1", 1);
    const Time latency = Time::from_ns(100);
    t.add_duplex_link(a, b, bw, latency);
    const std::int64_t size = 8 << 20;  // 2048 full packets
    Ns3Options packets;  // a GPU-GPU cable is NVLink: as packets here
    packets.scale_up = ns3_modules::ScaleUpModel::Packets;
    const auto f = run_flows(t, {Message{0, 1, Bytes(size)}}, packets);
    const double rate = static_cast<double>(size) / (f.done[0] - latency).seconds();
    std::printf("%lld Gb/s: payload %.3f GB/s, expected %.3f GB/s (%+.4f %%)\n",
                static_cast<long long>(bw.bps() / 1'000'000'000), rate * 1e-9, payload_rate(bw) * 1e-9,
                100.0 * (rate / payload_rate(bw) - 1.0));
    EXPECT_NEAR(rate, payload_rate(bw), 0.01 * payload_rate(bw));
    // In fact exact: 2048 back-to-back packets (credits never run out).
    EXPECT_NEAR(f.done[0].seconds(), 2048 * packet_seconds(bw) + latency.seconds(), 2048e-12);
    EXPECT_EQ(f.report.network.credit_stall, Time::zero());
    EXPECT_EQ(f.report.network.packets_injected, 2048u);
    EXPECT_EQ(f.report.network.wire_bytes, Bytes(2048 * kWire));
    EXPECT_EQ(f.report.links[0].busy, f.done[0] - latency);
  }
}

// The automatic buffer counts credits as the flow control does, in whole
// 64-byte blocks: a 256 B MTU packet of 286 wire bytes takes 320. Sized in
// wire bytes, a lone link at one packet per segment ran out of credits (a
// GPU -> leaf -> GPU path 10.6% slow); now it sends back to back.
TEST(IbModel, AutomaticBufferCoversTheCreditLoopInBlocks) {
  Topology t;
  const auto a = t.add_vertex(VertexKind::Gpu, "gpu0", 0);
  const auto b = t.add_vertex(VertexKind::Gpu, "gpu1", 1);
  const Bandwidth bw = Bandwidth::gbps(200);
  const Time latency = Time::from_us(1);
  t.add_duplex_link(a, b, bw, latency);
  Ns3Options o;
  o.scale_up = ns3_modules::ScaleUpModel::Packets;
  o.mtu = Bytes(256);
  o.packets_per_segment = 1;
  const std::int64_t packets = 8192;
  const auto f = run_flows(t, {Message{0, 1, Bytes(packets * 256)}}, o);
  EXPECT_EQ(f.report.network.credit_stall, Time::zero());
  const double wire_s = static_cast<double>(packets * (256 + kHeader)) * 8.0 / static_cast<double>(bw.bps());
  EXPECT_NEAR(f.done[0].seconds(), wire_s + latency.seconds(), 1e-9);
}

// Credits count each MTU packet of a segment in whole 64-byte blocks: one
// segment of 32 packets of 256 + 30 B takes 32 x 5 = 160 blocks (10240 B
// of the receive buffer), not the 143 of its 9152 wire bytes taken
// together (helper 59: a buffer held 12% more than a real port's). A
// buffer of 9152 B cannot take one segment and is refused; one of 10240 B
// runs, its receiving port filled to exactly 10240 B.
TEST(IbModel, CreditsCountEachPacketOfASegmentInWholeBlocks) {
  Topology t;
  const auto a = t.add_vertex(VertexKind::Gpu, "gpu0", 0);
  const auto b = t.add_vertex(VertexKind::Gpu, "gpu1", 1);
  t.add_duplex_link(a, b, Bandwidth::gbps(200), Time::from_us(1));
  Ns3Options o;
  o.scale_up = ns3_modules::ScaleUpModel::Packets;
  o.mtu = Bytes(256);
  o.packets_per_segment = 32;
  o.buffer_bytes = Bytes(std::int64_t{32} * (256 + kHeader));
  {
    Ns3EventLoop loop;
    EXPECT_THROW(Ns3Network(t, loop, o), InputError);
  }
  o.buffer_bytes = Bytes(std::int64_t{32} * 320);
  const auto f = run_flows(t, {Message{0, 1, Bytes(std::int64_t{4} * 32 * 256)}}, o);  // four segments
  EXPECT_EQ(f.report.network.credit_violations, 0U);
  EXPECT_EQ(f.report.links[0].max_queue, Bytes(std::int64_t{32} * 320));
  // An explicit buffer is every port's, as reported.
  EXPECT_EQ(f.report.network.min_rx_buffer, Bytes(std::int64_t{32} * 320));
  EXPECT_EQ(f.report.network.max_rx_buffer, Bytes(std::int64_t{32} * 320));
}

TEST(IbModel, IncastIsLosslessAndFair) {
  // 8 hosts send 2 MiB each to host 8 over one leaf: the leaf's port to host
  // 8 serves its 8 inputs round-robin, so each flow gets 1/8 of the payload
  // rate; the senders are throttled by credits, not by drops.
  constexpr int kSenders = 8;
  const Bandwidth bw = Bandwidth::gbps(400);
  const Time hop = Time::from_ns(200);
  const Topology t = star(kSenders + 1, bw, hop);
  const std::int64_t size = 2 << 20;
  std::vector<Message> msgs;
  msgs.reserve(kSenders);
  for (int s = 0; s < kSenders; ++s) msgs.push_back(Message{s, kSenders, Bytes(size)});
  const auto f = run_flows(t, msgs);
  const double fair = payload_rate(bw) / kSenders;
  for (int s = 0; s < kSenders; ++s) {
    const double rate = static_cast<double>(size) / (f.done[static_cast<std::size_t>(s)] - hop * 2).seconds();
    EXPECT_NEAR(rate, fair, 0.05 * fair) << "sender " << s;
  }
  const auto& net = f.report.network;
  EXPECT_EQ(net.drops, 0u);
  EXPECT_EQ(net.credit_violations, 0u);
  EXPECT_EQ(net.payload_delivered, Bytes(kSenders * size));
  // Buffers stay bounded by the credits: 2 x 200 ns x 50 GB/s + 3 packets.
  const std::int64_t buffer = (20'000 + 3 * kWire + 63) / 64 * 64;
  EXPECT_LE(net.max_buffer_bytes.count(), buffer);
  // The buffers as sized, reported for the links that carried packets: the
  // credit loop counted in 64-byte blocks (20,000 B x 4160 / 4126 = 20,164.8,
  // so 20,165) plus 3 packets of 4160 B, rounded up to a block: 32,704 B on
  // every link, all of one rate and latency.
  EXPECT_EQ(net.min_rx_buffer, Bytes(32'704));
  EXPECT_EQ(net.max_rx_buffer, Bytes(32'704));
  // Back-pressure: each sender's port idles 7/8 of the time waiting for credits.
  const Time span = f.done.back() - hop * 2;
  for (int s = 0; s < kSenders; ++s) {
    const auto& up = f.report.links[2 * static_cast<std::size_t>(s)];  // gpu s -> leaf
    EXPECT_NEAR(up.credit_stall.seconds(), span.seconds() * 7 / 8, 0.05 * span.seconds()) << "sender " << s;
  }
  std::printf("incast 8->1: max buffer %lld B, sender 0 stalled %.2f of %.2f us\n",
              static_cast<long long>(net.max_buffer_bytes.count()), f.report.links[0].credit_stall.us(), span.us());
}

namespace {
/// Two leaves joined by one trunk. leaf0: A (0), B (1). leaf1: C (2), D (3),
/// E (4), F (5). Link ids: A-leaf0 0/1, B-leaf0 2/3, trunk leaf0->leaf1 4.
Topology hol_fabric(Bandwidth bw, Time hop) {
  Topology t;
  std::vector<topology::VertexId> g;
  g.reserve(6);
  for (int i = 0; i < 6; ++i) g.push_back(t.add_vertex(VertexKind::Gpu, fmt::format("gpu{}", i), i));
  const auto l0 = t.add_vertex(VertexKind::Leaf, "leaf0", 0);
  const auto l1 = t.add_vertex(VertexKind::Leaf, "leaf1", 1);
  t.add_duplex_link(g[0], l0, bw, hop);
  t.add_duplex_link(g[1], l0, bw, hop);
  t.add_duplex_link(l0, l1, bw, hop);
  for (int i = 2; i < 6; ++i) t.add_duplex_link(g[static_cast<std::size_t>(i)], l1, bw, hop);
  return t;
}
}  // namespace

TEST(IbModel, HeadOfLineBlockingStallsAnUnrelatedFlowThroughCredits) {
  // A->C, E->C and F->C congest leaf1's port to C: it serves its three
  // inputs round-robin, R/3 each. B->D is unrelated (D is idle) but shares
  // the trunk, and with one VL its packets sit in the same FIFO input buffer
  // at leaf1 behind A's. leaf0 alternates A and B packets on the trunk, so the
  // trunk input drains one C packet per 3 packet times T (its turn at C) and
  // the D packet behind it at once: 2 packets per 3T. B->D is dragged down to
  // R/3, and the trunk idles T of every 3T waiting for credits. Over the
  // 3 x 256 T the four 256-packet flows take, the trunk stalls 256 T (a
  // little less in fact: it stalls only once leaf1's trunk buffer has filled).
  // With two VLs (C on VL 0, D on VL 1) B->D bypasses the blocked lane and
  // gets the trunk's other 2R/3.
  const Bandwidth bw = Bandwidth::gbps(100);
  const Time hop = Time::from_ns(100);
  const Topology t = hol_fabric(bw, hop);
  const std::int64_t size = 1 << 20;  // 256 packets
  const std::vector<Message> msgs{{0, 2, Bytes(size)}, {4, 2, Bytes(size)}, {5, 2, Bytes(size)}, {1, 3, Bytes(size)}};
  const double packet = packet_seconds(bw);  // T, one packet time: 330.08 ns

  Ns3Options one_vl;
  one_vl.buffer_bytes = Bytes(8LL * 4160);  // 8 packets per input port (65 credit blocks each)
  const auto hol = run_flows(t, msgs, one_vl);
  const auto& trunk = hol.report.links[4];
  const double bd_rate = static_cast<double>(size) / (hol.done[3] - hop * 3).seconds();
  std::printf(
      "HOL, 1 VL: B->D %.3f GB/s (R/3 = %.3f), done %.1f us; trunk credit stall %.2f us (hand: %.2f us)\n",
      bd_rate * 1e-9, payload_rate(bw) / 3 * 1e-9, hol.done[3].us(), trunk.credit_stall.us(),
      256 * packet * 1e6);
  EXPECT_NEAR(bd_rate, payload_rate(bw) / 3, 0.05 * payload_rate(bw) / 3);
  EXPECT_NEAR(hol.done[3].seconds(), 768 * packet, 0.05 * 768 * packet);
  EXPECT_NEAR(trunk.credit_stall.seconds(), 256 * packet, 0.05 * 256 * packet);
  for (std::size_t i = 0; i < 3; ++i)
    EXPECT_NEAR(hol.done[i].seconds(), 768 * packet, 0.05 * 768 * packet) << "flow " << i;
  EXPECT_EQ(hol.report.network.drops, 0u);
  EXPECT_LE(hol.report.links[4].max_queue.count(), 8 * 4160);  // the trunk input never overfills

  Ns3Options two_vls = one_vl;
  two_vls.num_vls = 2;  // VL = destination rank mod 2: C (2) on VL 0, D (3) on VL 1
  two_vls.link_sample_interval = Time::from_us(1);
  const auto vl = run_flows(t, msgs, two_vls);
  const double bd_rate_vl = static_cast<double>(size) / (vl.done[3] - hop * 3).seconds();
  // While B->D lasts the trunk never waits for credits: it is busy all the
  // time (VL 1 fills the slots VL 0 has no credits for). Measured over the
  // whole microseconds from 1 us to B->D's end.
  const auto& samples = vl.report.links[4].bytes_per_sample;
  const auto last = static_cast<std::size_t>(vl.done[3].us()) - 1;
  double carried = 0;
  for (std::size_t i = 1; i < last; ++i) carried += samples.at(i).as_double();
  const double trunk_util = carried / (bw.bytes_per_second() * static_cast<double>(last - 1) * 1e-6);
  std::printf("HOL, 2 VLs: B->D %.3f GB/s (2R/3 = %.3f), trunk busy %.1f %% while B->D lasts\n", bd_rate_vl * 1e-9,
              2 * payload_rate(bw) / 3 * 1e-9, 100 * trunk_util);
  EXPECT_NEAR(bd_rate_vl, 2 * payload_rate(bw) / 3, 0.05 * 2 * payload_rate(bw) / 3);
  EXPECT_GT(trunk_util, 0.97);
  EXPECT_NEAR(vl.done[0].seconds(), 768 * packet, 0.05 * 768 * packet);  // the congested flows are unchanged
}

// A credit deadlock is the fabric's error, said as such (helper 62: the
// executor's "task graph deadlocked" sent the user to their plan). A 2-tier
// k=4 fat-tree of 8 GPUs with leaf0 cut from spine1 and leaf1 from spine0:
// leaf0 and leaf1 reach each other only down through another leaf and back
// up, and an all-to-all over one virtual lane fills a cycle of buffers. The
// flow backend (no buffers) and the intact fabric run it.
TEST(IbModel, ACreditDeadlockAfterFailuresIsTheFabricsError) {
  topology::FatTreeSpec spec;
  spec.nodes = 8;
  spec.node.gpus = 1;
  spec.k = 4;
  spec.tiers = 2;
  spec.host = {Bandwidth::gbps(200), Time::from_ns(600)};
  spec.leaf_spine = {Bandwidth::gbps(200), Time::from_ns(600)};
  const Topology intact = topology::build_fat_tree(spec);
  Topology failed = intact;
  (void)failed.fail_cable(failed.find_vertex("leaf0"), failed.find_vertex("spine1"));
  (void)failed.fail_cable(failed.find_vertex("leaf1"), failed.find_vertex("spine0"));
  std::vector<int> all(8);
  for (int r = 0; r < 8; ++r) all[static_cast<std::size_t>(r)] = r;
  const auto graph =
      parallelism::concurrent_collectives(8, {all}, parallelism::CollectiveKind::AllToAll, Bytes::mib(8));
  EXPECT_NO_THROW((void)ns3_modules::run_on_ns3(graph, intact));
  engine::DiscreteEventLoop flow_loop;
  engine::FlowNetwork flow_net(failed, flow_loop);
  EXPECT_NO_THROW((void)engine::execute(graph, flow_loop, flow_net));
  try {
    (void)ns3_modules::run_on_ns3(graph, failed);
    ADD_FAILURE() << "the all-to-all ran";
  } catch (const SimulationError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("ns-3 backend: the fabric deadlocked: ", 0), 0U) << e.what();
    // The waiting ports by link, the switches' (the cycle) before the hosts'.
    EXPECT_NE(
        std::string(e.what()).find("14 ports waiting for credits that never came back (leaf0 -> spine0, "
                                   "leaf1 -> spine1, leaf2 -> spine0, spine1 -> leaf2, spine0 -> leaf3, "
                                   "leaf3 -> spine1, gpu0 -> leaf0, gpu1 -> leaf0, ...) (a cycle"),
        std::string::npos)
        << e.what();
  }
}

TEST(IbModel, RingAllReduceAgreesWithFlowBackend) {
  const Topology t = star(8, Bandwidth::gbps(100), Time::from_us(1));
  const auto graph = all_reduce_graph(8, Bytes::mib(16));
  engine::DiscreteEventLoop flow_loop;
  engine::FlowNetwork flow_net(t, flow_loop);
  const auto flow = engine::execute(graph, flow_loop, flow_net);
  ns3_modules::Ns3Report report;
  const auto ib = ns3_modules::run_on_ns3(graph, t, {}, nullptr, &report);
  std::printf("ring all-reduce 16 MiB, 8 hosts, 100 Gb/s: flow %.3f us, ns-3 IB %.3f us (%+.3f %%), %llu packet-hops\n",
              flow.makespan.us(), ib.makespan.us(), 100.0 * (ib.makespan.seconds() / flow.makespan.seconds() - 1.0),
              static_cast<unsigned long long>(report.network.packet_hops));
  EXPECT_NEAR(ib.makespan.seconds(), flow.makespan.seconds(), 0.05 * flow.makespan.seconds());
  EXPECT_EQ(ib.transfers, flow.transfers);
  EXPECT_EQ(ib.bytes_sent, flow.bytes_sent);
  EXPECT_EQ(report.network.credit_stall, Time::zero());  // no congestion: credits never run out
}

TEST(IbModel, DataParallelStepOnAFatTreeAgreesWithFlowBackend) {
  // 2 nodes x 4 GPUs (NVSwitch inside), a 2-tier k=4 fat-tree of 200 Gb/s:
  // backward compute, then the gradient all-reduce over NVLink and IB.
  topology::FatTreeSpec spec;
  spec.nodes = 2;
  spec.node.gpus = 4;
  spec.node.nvlink = {Bandwidth::gigabytes_per_second(450), Time::from_ns(500)};
  spec.k = 4;
  spec.tiers = 2;
  spec.host = {Bandwidth::gbps(200), Time::from_ns(600)};
  spec.leaf_spine = {Bandwidth::gbps(200), Time::from_ns(600)};
  const Topology t = topology::build_fat_tree(spec);
  const auto graph = all_reduce_graph(8, Bytes::mib(8), 200);
  engine::DiscreteEventLoop flow_loop;
  engine::FlowNetwork flow_net(t, flow_loop);
  const auto flow = engine::execute(graph, flow_loop, flow_net);
  const auto ib = ns3_modules::run_on_ns3(graph, t);
  std::printf("DP step on fat-tree (2x4 GPUs): flow %.3f us, ns-3 IB %.3f us (%+.3f %%)\n", flow.makespan.us(),
              ib.makespan.us(), 100.0 * (ib.makespan.seconds() / flow.makespan.seconds() - 1.0));
  EXPECT_NEAR(ib.makespan.seconds(), flow.makespan.seconds(), 0.05 * flow.makespan.seconds());
  EXPECT_EQ(ib.bytes_sent, flow.bytes_sent);
}

TEST(IbModel, GpusSharingAnHcaShareItsRate) {
  // 2 nodes x 4 GPUs, one 200 Gb/s HCA per node behind PCIe (64 GB/s), a
  // 2-tier k=4 fat-tree. GPUs 0-3 each send 2 MiB to GPUs 4-7 at once: the
  // 4 flows share the HCA's cable, so each gets a quarter of its payload
  // rate: T = 4 S / rate (+ latencies), the flow backend's answer too.
  topology::FatTreeSpec spec;
  spec.nodes = 2;
  spec.node.gpus = 4;
  spec.node.nvlink = {Bandwidth::gigabytes_per_second(450), Time::from_ns(500)};
  spec.node.hcas = 1;
  spec.node.pcie = {Bandwidth::gigabytes_per_second(64), Time::from_ns(300)};
  spec.k = 4;
  spec.tiers = 2;
  spec.host = {Bandwidth::gbps(200), Time::from_ns(600)};
  spec.leaf_spine = {Bandwidth::gbps(200), Time::from_ns(600)};
  const Topology t = topology::build_fat_tree(spec);
  ASSERT_EQ(t.count(VertexKind::Hca), 2);
  const std::int64_t size = 2 << 20;
  std::vector<Message> msgs;
  msgs.reserve(4);
  for (int g = 0; g < 4; ++g) msgs.push_back(Message{g, 4 + g, Bytes(size)});
  const auto ib = run_flows(t, msgs);
  engine::DiscreteEventLoop loop;
  engine::FlowNetwork flow(t, loop);
  std::vector<Time> flow_done(msgs.size());
  for (std::size_t i = 0; i < msgs.size(); ++i) flow.send(msgs[i], [&, i] { flow_done[i] = loop.now(); });
  loop.run();
  const double shared = 4.0 * static_cast<double>(size) / payload_rate(spec.host.bandwidth);
  for (std::size_t i = 0; i < msgs.size(); ++i) {
    EXPECT_NEAR(ib.done[i].seconds(), shared, 0.05 * shared) << i;
    EXPECT_NEAR(ib.done[i].seconds(), flow_done[i].seconds(), 0.05 * flow_done[i].seconds()) << i;
  }
  std::printf("4 GPUs through one 200 Gb/s HCA: ns-3 IB %.1f us, flow %.1f us, hand %.1f us\n", ib.done[3].us(),
              flow_done[3].us(), shared * 1e6);
  // Every packet crossed PCIe twice (both ends) besides the IB hops.
  std::int64_t pcie_packets = 0;
  for (const auto& l : ib.report.links) {
    if (t.tier(l.link) == topology::LinkTier::Pcie) pcie_packets += static_cast<std::int64_t>(l.packets);
  }
  EXPECT_EQ(pcie_packets, 2LL * 4 * (size / kMtu));
}

TEST(IbModel, AdaptiveRoutingSpreadsCollidingFlowsOverSpines) {
  // 8 single-GPU nodes, 4 per leaf, 2 spines. D-mod-k sends both 0->4 and
  // 1->6 (even destinations) up the same spine: each gets half of it.
  // Adaptive routing picks the emptier uplink per packet: both run at ~full rate.
  topology::LeafSpineSpec spec;
  spec.nodes = 8;
  spec.gpus_per_node = 1;
  spec.nvlink_bandwidth = Bandwidth::gigabytes_per_second(450);
  spec.nvlink_latency = Time::from_ns(300);
  spec.nic_bandwidth = Bandwidth::gbps(100);
  spec.nic_latency = Time::from_ns(200);
  spec.hosts_per_leaf = 4;
  spec.spines = 2;
  spec.spine_bandwidth = Bandwidth::gbps(100);
  spec.spine_latency = Time::from_ns(200);
  const Topology t = topology::build_leaf_spine(spec);
  ASSERT_EQ(t.route(0, 4)[1], t.route(1, 6)[1]);  // the collision
  const std::int64_t size = 2 << 20;
  const std::vector<Message> msgs{{0, 4, Bytes(size)}, {1, 6, Bytes(size)}};
  const auto fixed = run_flows(t, msgs);
  Ns3Options ar;
  ar.adaptive_routing = true;
  const auto adaptive = run_flows(t, msgs, ar);
  const double one = static_cast<double>(size) / payload_rate(spec.nic_bandwidth);
  std::printf("static %.1f us, adaptive %.1f us (one flow alone: %.1f us)\n", fixed.done[1].us(), adaptive.done[1].us(),
              one * 1e6);
  EXPECT_NEAR(fixed.done[1].seconds(), 2 * one, 0.05 * 2 * one);
  EXPECT_NEAR(adaptive.done[1].seconds(), one, 0.05 * one);
  EXPECT_EQ(adaptive.report.network.payload_delivered, Bytes(2 * size));
}

TEST(IbModel, AdaptiveRoutingLeavesADegradedUplink) {
  // The same fabric, one flow 0->4 whose D-mod-k uplink runs at 10% of its
  // rate. Static routing keeps it there (about 10x the time alone);
  // adaptive routing keeps the slow port in the equal-cost set (by its built
  // rate) and steers by queued bytes, so the healthy spine carries most of
  // it (helper 101: the set was the ports of the degraded port's rate, the
  // slow port alone, and adaptive routing changed nothing).
  topology::LeafSpineSpec spec;
  spec.nodes = 8;
  spec.gpus_per_node = 1;
  spec.nvlink_bandwidth = Bandwidth::gigabytes_per_second(450);
  spec.nvlink_latency = Time::from_ns(300);
  spec.nic_bandwidth = Bandwidth::gbps(100);
  spec.nic_latency = Time::from_ns(200);
  spec.hosts_per_leaf = 4;
  spec.spines = 2;
  spec.spine_bandwidth = Bandwidth::gbps(100);
  spec.spine_latency = Time::from_ns(200);
  Topology t = topology::build_leaf_spine(spec);
  const auto& up = t.link(t.route(0, 4)[1]);
  (void)t.degrade_cable(up.src, up.dst, 0.1);
  const std::int64_t size = 2 << 20;
  const std::vector<Message> msgs{{0, 4, Bytes(size)}};
  const double one = static_cast<double>(size) / payload_rate(spec.nic_bandwidth);
  const auto fixed = run_flows(t, msgs);
  EXPECT_NEAR(fixed.done[0].seconds(), 10 * one, 0.05 * 10 * one);
  Ns3Options ar;
  ar.adaptive_routing = true;
  const auto adaptive = run_flows(t, msgs, ar);
  EXPECT_LT(adaptive.done[0].seconds(), 1.25 * one);
  EXPECT_EQ(adaptive.report.network.payload_delivered, Bytes(size));
}

namespace {
/// 4 nodes x 4 GPUs on a 2-tier k=8 fat-tree at 200 Gb/s (NVSwitch inside).
Topology small_fat_tree() {
  topology::FatTreeSpec spec;
  spec.nodes = 4;
  spec.node.gpus = 4;
  spec.node.nvlink = {Bandwidth::gigabytes_per_second(450), Time::from_ns(500)};
  spec.k = 8;
  spec.tiers = 2;
  spec.oversubscription = 1;
  spec.host = {Bandwidth::gbps(200), Time::from_ns(600)};
  spec.leaf_spine = {Bandwidth::gbps(200), Time::from_ns(600)};
  return topology::build_fat_tree(spec);
}
}  // namespace

TEST(IbModel, SegmentCoarseningTradesAccuracyForEvents) {
  const Topology t = small_fat_tree();
  // Without contention cut-through makes coarsening exact: a DP all-reduce.
  const auto graph = all_reduce_graph(16, Bytes::mib(16), 50);
  ns3_modules::Ns3Report exact_report;
  const auto exact = ns3_modules::run_on_ns3(graph, t, {}, nullptr, &exact_report);
  // With contention it costs accuracy: a 12-to-1 incast of uneven sizes
  // (over NVLink and IB) plus crossing flows; per-flow completion times.
  std::vector<Message> msgs;
  msgs.reserve(16);
  for (int s = 0; s < 12; ++s) msgs.push_back(Message{s, 15, Bytes((1 << 20) + s * 300'000 + 1234)});
  for (int s = 0; s < 4; ++s) msgs.push_back(Message{12 + s, s * 4 + 1, Bytes(3 << 20)});
  const auto exact_flows = run_flows(t, msgs);
  for (const int k : {4, 16, 64}) {
    Ns3Options o;
    o.packets_per_segment = k;
    ns3_modules::Ns3Report r;
    const auto coarse = ns3_modules::run_on_ns3(graph, t, o, nullptr, &r);
    const double err = coarse.makespan.seconds() / exact.makespan.seconds() - 1.0;
    const auto flows = run_flows(t, msgs, o);
    double worst = 0;
    for (std::size_t i = 0; i < msgs.size(); ++i) {
      worst = std::max(worst, std::abs(flows.done[i].seconds() / exact_flows.done[i].seconds() - 1.0));
    }
    std::printf("segments of %d packets: all-reduce %+.3f %%, %llu vs %llu packet-hops; incast worst flow %.3f %%\n",
                k, 100 * err, static_cast<unsigned long long>(r.network.packet_hops),
                static_cast<unsigned long long>(exact_report.network.packet_hops), 100 * worst);
    EXPECT_LT(std::abs(err), 0.01);
    EXPECT_LT(worst, k <= 16 ? 0.02 : 0.10);
    EXPECT_LT(r.network.packet_hops * static_cast<std::uint64_t>(k), exact_report.network.packet_hops * 11 / 10);
    EXPECT_EQ(r.network.wire_bytes, exact_report.network.wire_bytes);  // headers are still paid per MTU packet
  }
}

TEST(IbModel, ReportsAndCsv) {
  const Topology t = star(4, Bandwidth::gbps(200), Time::from_ns(500));
  const auto graph = all_reduce_graph(4, Bytes::mib(4));
  Ns3Options o;
  o.link_sample_interval = Time::from_us(10);
  ns3_modules::Ns3Report r;
  ns3_modules::run_on_ns3(graph, t, o, nullptr, &r);
  ASSERT_EQ(r.links.size(), t.links().size());
  std::int64_t total = 0;
  std::int64_t sampled = 0;
  for (const auto& l : r.links) {
    total += l.wire_bytes.count();
    for (const auto b : l.bytes_per_sample) sampled += b.count();
    EXPECT_LE(l.busy, r.end_time);
  }
  EXPECT_EQ(total, r.network.wire_bytes.count());
  EXPECT_EQ(sampled, total);
  EXPECT_GT(r.events, r.network.packet_hops);
  const std::string csv = ns3_modules::link_csv(r, t);
  EXPECT_EQ(csv.rfind("link,src,dst,tier,bandwidth_bps,payload_bytes,busy_us,utilization,segments,wire_bytes,"
                      "credit_stall_us,max_queue_bytes,max_queue_segments\n",
                      0),
            0u);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 8);  // all 8 directed links carried traffic
  const std::string series = ns3_modules::link_timeseries_csv(r, t);
  EXPECT_GT(std::count(series.begin(), series.end(), '\n'), 8);
  EXPECT_NE(series.find("\n0,0.000,"), std::string::npos);
}

// A cut-through switch port fed by a slower input: gpu0 (100 Gb/s) sends
// 16 MiB and gpu1 (400 Gb/s) 48 MiB to gpu2 (400 Gb/s) through one leaf.
// The leaf's port to gpu2 sends gpu0's packets only once they can leave at
// its own rate without running dry (a real switch stores them), serving
// gpu1 meanwhile: gpu0 gets its 100 Gb/s, gpu1 the other 300, and both end
// together at 16 MiB / 100 Gb/s of payload (1.352 ms), as max-min sharing
// has it. Helper 69: the port took each of gpu0's packets at once and held
// it for its slow arrival, idling 3/4 of the link (gpu1 ended at 1.691 ms)
// and counting the wait as busy time. The port's busy time is the wire
// time of the 64 MiB.
TEST(IbModel, ASlowerInputDoesNotHoldAFasterCutThroughPort) {
  Topology t;
  std::vector<topology::VertexId> g;
  g.reserve(3);
  for (int i = 0; i < 3; ++i) g.push_back(t.add_vertex(VertexKind::Gpu, fmt::format("gpu{}", i), i));
  const auto leaf = t.add_vertex(VertexKind::Leaf, "leaf0", 0);
  const Time hop = Time::from_ns(500);
  t.add_duplex_link(g[0], leaf, Bandwidth::gbps(100), hop);  // links 0, 1
  t.add_duplex_link(g[1], leaf, Bandwidth::gbps(400), hop);  // 2, 3
  t.add_duplex_link(g[2], leaf, Bandwidth::gbps(400), hop);  // 4, 5
  const auto f = run_flows(t, {Message{0, 2, Bytes::mib(16)}, Message{1, 2, Bytes::mib(48)}});
  const double slow = static_cast<double>(Bytes::mib(16).count()) / payload_rate(Bandwidth::gbps(100));
  EXPECT_NEAR(f.done[0].seconds(), slow, 0.005 * slow);
  EXPECT_NEAR(f.done[1].seconds(), slow, 0.005 * slow);
  const double wire = static_cast<double>(Bytes::mib(64).count()) / payload_rate(Bandwidth::gbps(400));
  EXPECT_NEAR(f.report.links[5].busy.seconds(), wire, 0.005 * wire);
  EXPECT_EQ(f.report.network.credit_violations, 0u);
}

// The link time series spreads a segment's bytes over the sample bins its
// serialisation spans: 1 MiB at 200 Gb/s in 32-packet segments (5.28 us
// each) sampled every 1 us fills each bin of the busy link to at most its
// capacity (25 kB per us, plus a byte of rounding), never 5x it in one bin
// and nothing in the next (helper 69), and the bins add up to the bytes.
TEST(IbModel, TimeSeriesSpreadsASegmentOverItsBins) {
  const Topology t = star(2, Bandwidth::gbps(200), Time::from_ns(500));
  Ns3Options o;
  o.packets_per_segment = 32;
  o.link_sample_interval = Time::from_us(1);
  const auto f = run_flows(t, {Message{0, 1, Bytes::mib(1)}}, o);
  const auto& up = f.report.links[0];  // gpu0 -> leaf
  std::int64_t sum = 0;
  for (const auto b : up.bytes_per_sample) {
    EXPECT_LE(b.count(), 25'000 + 1);
    sum += b.count();
  }
  EXPECT_EQ(sum, up.wire_bytes.count());
  EXPECT_GE(up.bytes_per_sample.size(), 5u);
}

// Payload by source class: on a 4-GPU star, gpu0 (class 0) and gpu1
// (class 1) send 1 MiB and 3 MiB to gpu3, gpu2 (no class, -1) 2 MiB. The
// leaf -> gpu3 link carries all 6 MiB: 1 MiB class 0, 3 MiB class 1, the
// rest in no class; each up-link only its sender's class. Payload, not wire
// bytes. Without source_classes the split is empty.
TEST(IbModel, PayloadBySourceClass) {
  const Topology t = star(4, Bandwidth::gbps(200), Time::from_ns(500));
  const std::vector<Message> msgs = {Message{0, 3, Bytes::mib(1)}, Message{1, 3, Bytes::mib(3)},
                                     Message{2, 3, Bytes::mib(2)}};
  Ns3Options o;
  o.source_classes = {0, 1, -1};  // gpu3 past the end: no class
  const auto f = run_flows(t, msgs, o);
  ASSERT_EQ(f.report.links.size(), t.links().size());
  // star(): gpu i's up-link is link 2i, its down-link 2i + 1.
  const auto& down = f.report.links[7];
  EXPECT_EQ(down.payload_bytes, Bytes::mib(6));
  EXPECT_EQ(down.payload_by_class, (std::vector<Bytes>{Bytes::mib(1), Bytes::mib(3)}));
  EXPECT_EQ(f.report.links[0].payload_by_class, (std::vector<Bytes>{Bytes::mib(1), Bytes(0)}));
  EXPECT_EQ(f.report.links[2].payload_by_class, (std::vector<Bytes>{Bytes(0), Bytes::mib(3)}));
  EXPECT_EQ(f.report.links[4].payload_by_class, (std::vector<Bytes>{Bytes(0), Bytes(0)}));
  EXPECT_EQ(f.report.links[4].payload_bytes, Bytes::mib(2));
  EXPECT_GT(down.wire_bytes, down.payload_bytes);
  const auto plain = run_flows(t, msgs);
  for (const auto& l : plain.report.links) EXPECT_TRUE(l.payload_by_class.empty());
  EXPECT_EQ(plain.report.links[7].payload_bytes, Bytes::mib(6));
  EXPECT_EQ(plain.report.end_time, f.report.end_time);  // accounting does not change the run
}

TEST(IbModel, RejectsBadInputBeforeSimulating) {
  const Topology t = star(3, Bandwidth::gbps(100), Time::from_us(1));
  auto with = [](auto edit) {
    Ns3Options o;
    edit(o);
    return o;
  };
  Ns3EventLoop loop;
  for (const std::int64_t mtu : {0, 100, 3000, 8192}) {
    EXPECT_THROW(Ns3Network(t, loop, with([&](Ns3Options& o) { o.mtu = Bytes(mtu); })), InputError) << mtu;
  }
  EXPECT_THROW(Ns3Network(t, loop, with([](Ns3Options& o) { o.num_vls = 0; })), InputError);
  EXPECT_THROW(Ns3Network(t, loop, with([](Ns3Options& o) { o.num_vls = 16; })), InputError);
  EXPECT_THROW(Ns3Network(t, loop, with([](Ns3Options& o) { o.packets_per_segment = 0; })), InputError);
  EXPECT_THROW(Ns3Network(t, loop, with([](Ns3Options& o) { o.header_bytes = Bytes(-1); })), InputError);
  EXPECT_THROW(Ns3Network(t, loop, with([](Ns3Options& o) { o.buffer_bytes = Bytes(4000); })), InputError);
  EXPECT_THROW(Ns3Network(t, loop, with([](Ns3Options& o) { o.link_sample_interval = Time::from_ps(-1); })),
               InputError);
  EXPECT_THROW(Ns3Network(t, loop, with([](Ns3Options& o) { o.source_classes = {0, -2}; })), InputError);
  // A buffer the 32-bit credit counters cannot hold names its link and the
  // key (helper 59: "receive buffer of 5368709120 B on link 0 is too large").
  try {
    Ns3Network net(t, loop, with([](Ns3Options& o) { o.buffer_bytes = Bytes::gib(5); }));
    ADD_FAILURE() << "a 5 GiB buffer was accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(
        e.what(),
        "ns-3 backend: the receive buffer of link 0 (gpu0 -> leaf0) would be 5368709120 B, more than the "
        "credit counters' 4294967295 B (ns3.buffer)");
  }
  // More HCAs than a subnet has unicast LIDs (0xBFFF): their 16-bit LIDs
  // would wrap.
  try {
    Ns3Network net(star(0xC000, Bandwidth::gbps(100), Time::from_us(1)), loop, Ns3Options{});
    ADD_FAILURE() << "49152 HCAs were accepted";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "ns-3 backend: 49152 HCAs, more than an InfiniBand subnet's 49151 unicast LIDs");
  }
  // A zero or negative rate never makes it into a topology.
  Topology bad;
  const auto a = bad.add_vertex(VertexKind::Gpu, "gpu0", 0);
  const auto b = bad.add_vertex(VertexKind::Gpu, "gpu1", 1);
  EXPECT_THROW(bad.add_duplex_link(a, b, Bandwidth::bits_per_second(0), Time::zero()), InputError);
  EXPECT_THROW(bad.add_duplex_link(a, b, Bandwidth::bits_per_second(-5), Time::zero()), InputError);

  // Forwarding tables with a hole: leaf0 forgets LID 3 (gpu rank 2).
  const auto lft = topology::build_forwarding_tables(t);
  std::vector<topology::PortNo> ports;
  for (std::size_t s = 0; s < lft.switches().size(); ++s) {
    const auto row = lft.table(s);
    ports.insert(ports.end(), row.begin(), row.end());
  }
  auto holed = ports;
  holed[static_cast<std::size_t>(topology::lid_of_rank(2))] = topology::kNoRoute;
  const topology::ForwardingTables hole(lft.switches(), lft.num_lids(), holed);
  try {
    Ns3Network net(t, loop, with([&](Ns3Options& o) { o.forwarding_tables = &hole; }));
    ADD_FAILURE() << "a hole in the tables was accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("leaf0"), std::string::npos) << what;
    EXPECT_NE(what.find("LID 3"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  // ... or that send LID 3 to the wrong host.
  auto wrong = ports;
  wrong[static_cast<std::size_t>(topology::lid_of_rank(2))] = ports[static_cast<std::size_t>(topology::lid_of_rank(1))];
  const topology::ForwardingTables misrouted(lft.switches(), lft.num_lids(), wrong);
  EXPECT_THROW(Ns3Network(t, loop, with([&](Ns3Options& o) { o.forwarding_tables = &misrouted; })), InputError);
  // The good tables pass, passed explicitly.
  Ns3Network ok(t, loop, with([&](Ns3Options& o) { o.forwarding_tables = &lft; }));
  EXPECT_EQ(loop.now(), Time::zero());
}
