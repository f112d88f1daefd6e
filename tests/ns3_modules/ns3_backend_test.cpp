#include "tessera/ns3_modules/ns3_backend.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "../engine/test_topologies.hpp"
#include "tessera/engine/executor.hpp"
#include "tessera/engine/flow_network.hpp"
#include "tessera/error.hpp"
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
/// Per-packet wire overhead, by hand: Tessera header (8 B message id, 4 B
/// destination, 4 B sequence) + 2 B PPP header.
constexpr std::int64_t kOverhead = 8 + 4 + 4 + 2;

/// The walking skeleton's PointToPoint model (the default is InfiniBand).
Ns3Options p2p(Bytes mtu = Bytes(kMtu), int window = 2) {
  Ns3Options o;
  o.model = ns3_modules::Ns3Model::PointToPoint;
  o.mtu = mtu;
  o.source_window = window;
  // Two GPUs cabled directly are an NVLink pair: the skeleton's tests move
  // every message as packets.
  o.scale_up = ns3_modules::ScaleUpModel::Packets;
  return o;
}

/// Seconds to serialise `payload` message bytes (with their packet headers).
double wire_seconds(std::int64_t payload, Bandwidth bw) {
  const std::int64_t packets = std::max<std::int64_t>(1, (payload + kMtu - 1) / kMtu);
  return static_cast<double>(payload + packets * kOverhead) * 8.0 / static_cast<double>(bw.bps());
}

/// `hosts` GPUs, each on its own link to one leaf switch.
using test_support::star;  // hosts on one switch (tests/engine/test_topologies.hpp)

/// One collective per rank, all in one group, optionally after a compute task
/// of `compute_us[rank]` microseconds.
parallelism::TaskGraph all_reduce_graph(int ranks, Bytes size, const std::vector<std::int64_t>& compute_us = {}) {
  parallelism::TaskGraph g;
  parallelism::Group group;
  for (int r = 0; r < ranks; ++r) group.ranks.push_back(r);
  g.groups.push_back(group);
  for (int r = 0; r < ranks; ++r) {
    parallelism::Program prog;
    std::vector<parallelism::TaskIndex> deps;
    if (!compute_us.empty()) {
      parallelism::Task c;
      c.name = "fwd";
      c.kind = parallelism::TaskKind::Compute;
      c.duration = Time::from_us(compute_us[static_cast<std::size_t>(r)]);
      c.flops = Flops(1e9);
      prog.tasks.push_back(c);
      deps.push_back(0);
    }
    parallelism::Task ar;
    ar.name = "all_reduce";
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

}  // namespace

TEST(Ns3EventLoop, PicosecondClockAndFifoTies) {
  Ns3EventLoop loop;
  std::vector<int> order;
  std::vector<Time> at;
  loop.schedule(Time::from_ps(81'920), [&] { order.push_back(2); at.push_back(loop.now()); });
  loop.schedule(Time::from_ps(1), [&] {
    order.push_back(0);
    at.push_back(loop.now());
    loop.schedule(Time::from_ps(81'919), [&] { order.push_back(3); at.push_back(loop.now()); });
  });
  loop.schedule(Time::from_ps(1), [&] { order.push_back(1); at.push_back(loop.now()); });
  loop.run();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(at, (std::vector<Time>{Time::from_ps(1), Time::from_ps(1), Time::from_ps(81'920), Time::from_ps(81'920)}));
  EXPECT_THROW(loop.schedule(Time::from_ps(-1), [] {}), SimulationError);
}

TEST(Ns3EventLoop, OnlyOneAtATime) {
  {
    Ns3EventLoop first;
    EXPECT_THROW(Ns3EventLoop second, SimulationError);
  }
  Ns3EventLoop again;  // the first one's destructor released the simulator
  EXPECT_EQ(again.now(), Time::zero());
}

TEST(Ns3EventLoop, FreshSimulatorAfterAnExceptionInsideRun) {
  {
    Ns3EventLoop loop;
    loop.schedule(Time::from_ns(5), [] { throw SimulationError("boom"); });
    loop.schedule(Time::from_ns(9), [] {});
    EXPECT_THROW(loop.run(), SimulationError);
  }
  Ns3EventLoop loop;
  EXPECT_EQ(loop.now(), Time::zero());
  int ran = 0;
  loop.schedule(Time::from_ns(1), [&] { ++ran; });
  loop.run();
  EXPECT_EQ(ran, 1);  // the 9 ns event of the failed run is gone
  EXPECT_EQ(loop.now(), Time::from_ns(1));
}

// The heartbeat comes from the scheduler, once every `every` events taken
// from the queue, with the time of the event before it: it adds no event,
// so the order and the count are those of a run without it.
TEST(Ns3EventLoop, HeartbeatEveryNEventsAddsNone) {
  std::vector<Time> beats;
  std::vector<int> order;
  std::uint64_t events = 0;
  {
    Ns3EventLoop loop;
    loop.set_heartbeat([&](Time now) { beats.push_back(now); }, 3);
    for (int i = 1; i <= 10; ++i) loop.schedule(Time::from_ps(i), [&order, i] { order.push_back(i); });
    loop.run();
    events = loop.events_processed();
    EXPECT_THROW(loop.set_heartbeat([](Time) {}, 0), InputError);
  }
  // (taken 3rd, 6th and 9th: the clock still reads the 2nd, 5th and 8th)
  EXPECT_EQ(beats, (std::vector<Time>{Time::from_ps(2), Time::from_ps(5), Time::from_ps(8)}));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  Ns3EventLoop plain;
  for (int i = 1; i <= 10; ++i) plain.schedule(Time::from_ps(i), [] {});
  plain.run();
  EXPECT_EQ(events, plain.events_processed());
}

// A run that throws leaves events queued, which ns-3 takes from the
// scheduler when the loop is destroyed: no heartbeat then (helper 128: it
// called out during the stack's unwinding, after the error).
TEST(Ns3EventLoop, NoHeartbeatAfterAnInterruptedRun) {
  std::vector<Time> beats;
  {
    Ns3EventLoop loop;
    loop.set_heartbeat([&](Time now) { beats.push_back(now); }, 1);
    for (int i = 1; i <= 5; ++i) {
      loop.schedule(Time::from_ps(i), [i] {
        if (i == 2) throw SimulationError("boom");
      });
    }
    EXPECT_THROW(loop.run(), SimulationError);
  }
  // (the events at 1 and 2 ps were taken, the clock at 0 and 1 ps then)
  EXPECT_EQ(beats, (std::vector<Time>{Time::zero(), Time::from_ps(1)}));
}

TEST(Ns3PointToPoint, RejectsBadOptions) {
  const Topology t = star(2, Bandwidth::gbps(100), Time::from_us(1));
  Ns3EventLoop loop;
  EXPECT_THROW(Ns3Network(t, loop, p2p(Bytes(0), 2)), InputError);
  EXPECT_THROW(Ns3Network(t, loop, p2p(Bytes(4096), 0)), InputError);
}

TEST(Ns3PointToPoint, OneMessageOnOneLinkTakesSizeOverBandwidthPlusLatency) {
  const Bandwidth bw = Bandwidth::gbps(100);
  const Time latency = Time::from_us(1);
  Topology t;
  const auto a = t.add_vertex(VertexKind::Gpu, "gpu0", 0);
  const auto b = t.add_vertex(VertexKind::Gpu, "gpu1", 1);
  t.add_duplex_link(a, b, bw, latency);

  const std::int64_t size = (1 << 20) + 100;  // 256 full packets and a 100 B one
  Ns3EventLoop loop;
  Ns3Network net(t, loop, p2p());
  Time delivered = Time::max();
  net.send(Message{0, 1, Bytes(size)}, [&] { delivered = loop.now(); });
  loop.run();
  net.verify();

  const double expected = wire_seconds(size, bw) + latency.seconds();  // 85.25 us
  EXPECT_NEAR(delivered.seconds(), expected, 0.01 * expected);
  // In fact it is exact up to ns-3's per-packet rounding to the picosecond.
  EXPECT_NEAR(delivered.seconds(), expected, 257e-12);
  EXPECT_EQ(net.stats().packets_injected, 257u);
  EXPECT_EQ(net.stats().wire_bytes, Bytes(size + 257 * kOverhead));
  EXPECT_EQ(net.stats().drops, 0u);
}

namespace {
/// 2 nodes x 2 GPUs on NVSwitches (450 GB/s, 300 ns), one 100 Gb/s HCA
/// link per GPU into a leaf-spine: GPU 0 -> 1 stays in node 0 (two NVLink
/// links), GPU 0 -> 3 crosses the InfiniBand fabric.
Topology two_nvlink_nodes() {
  topology::LeafSpineSpec spec;
  spec.nodes = 2;
  spec.gpus_per_node = 2;
  spec.nvlink_bandwidth = Bandwidth::gigabytes_per_second(450);
  spec.nvlink_latency = Time::from_ns(300);
  spec.nic_bandwidth = Bandwidth::gbps(100);
  spec.nic_latency = Time::from_ns(500);
  spec.hosts_per_leaf = 2;
  spec.spines = 1;
  spec.spine_bandwidth = Bandwidth::gbps(100);
  spec.spine_latency = Time::from_ns(700);
  return build_leaf_spine(spec);
}
}  // namespace

TEST(Ns3PointToPoint, StoreAndForwardAcrossALeafSpineFabric) {
  // 2 nodes x 2 GPUs, 2 GPUs per leaf: GPU 0 -> GPU 3 crosses
  // GPU-leaf-spine-leaf-GPU, four 100 Gb/s links.
  const Topology t = two_nvlink_nodes();
  ASSERT_EQ(t.route(0, 3).size(), 4u);

  Ns3EventLoop loop;
  Ns3Network net(t, loop, p2p());
  const std::int64_t size = 64 * kMtu;
  Time big = Time::max();
  Time empty = Time::max();
  net.send(Message{0, 3, Bytes(size)}, [&] { big = loop.now(); });
  net.send(Message{1, 2, Bytes(0)}, [&] { empty = loop.now(); });  // one header-only packet
  Time self = Time::max();
  net.send(Message{3, 3, Bytes(1000)}, [&] { self = loop.now(); });  // crosses nothing
  loop.run();
  net.verify();

  const Bandwidth bw = Bandwidth::gbps(100);
  const double packet = wire_seconds(kMtu, bw);
  const double path_latency = 2 * 500e-9 + 2 * 700e-9;
  // 64 packets back to back on the first link, then the last one is
  // re-serialised at each of the three switches.
  const double expected = 64 * packet + 3 * packet + path_latency;
  EXPECT_NEAR(big.seconds(), expected, 1e-4 * expected);
  const double header_only = 4 * static_cast<double>(kOverhead) * 8.0 / 100e9 + path_latency;
  EXPECT_NEAR(empty.seconds(), header_only, 1e-4 * header_only);
  EXPECT_EQ(self, Time::zero());
  EXPECT_EQ(net.stats().messages_delivered, 3u);
  EXPECT_EQ(net.stats().packets_delivered, 65u);
}

namespace {
struct SharedLinkRun {
  Time first;
  Time second;
  ns3_modules::Ns3NetworkStats stats;
};
SharedLinkRun run_two_flows(const Topology& t, Message m1, Message m2) {
  Ns3EventLoop loop;
  Ns3Network net(t, loop, p2p());
  SharedLinkRun r{Time::max(), Time::max(), {}};
  net.send(m1, [&] { r.first = loop.now(); });
  net.send(m2, [&] { r.second = loop.now(); });
  loop.run();
  net.verify();
  r.stats = net.stats();
  return r;
}
}  // namespace

TEST(Ns3PointToPoint, TwoFlowsSharingALinkEachGetHalf) {
  const Bandwidth bw = Bandwidth::gbps(100);
  const Time hop = Time::from_us(1);
  const Topology t = star(4, bw, hop);
  const std::int64_t size = 4 << 20;
  const double half_rate = bw.bytes_per_second() / 2;
  // Each message's payload over its time on the wire (delivery minus path
  // latency), against half the link; the header overhead is 0.44 %.
  auto rate = [&](Time done) { return static_cast<double>(size) / (done.seconds() - 2 * hop.seconds()); };

  // Incast: 0 -> 2 and 1 -> 2 meet on the leaf's link down to GPU 2.
  const auto in = run_two_flows(t, Message{0, 2, Bytes(size)}, Message{1, 2, Bytes(size)});
  std::printf("incast: %.3f and %.3f GB/s of %.3f (max queue %u packets)\n", rate(in.first) * 1e-9,
              rate(in.second) * 1e-9, half_rate * 1e-9, in.stats.max_queue_packets);
  EXPECT_NEAR(rate(in.first), half_rate, 0.01 * half_rate);
  EXPECT_NEAR(rate(in.second), half_rate, 0.01 * half_rate);
  EXPECT_EQ(in.stats.drops, 0u);
  EXPECT_EQ(in.stats.payload_injected, Bytes(2 * size));
  EXPECT_EQ(in.stats.payload_delivered, in.stats.payload_injected);
  EXPECT_EQ(in.stats.packets_delivered, in.stats.packets_injected);
  EXPECT_GT(in.stats.max_queue_packets, 500u);  // the leaf absorbed the incast losslessly

  // Outcast: 0 -> 1 and 0 -> 2 share GPU 0's own link; it serves them
  // round-robin, packet by packet.
  const auto out = run_two_flows(t, Message{0, 1, Bytes(size)}, Message{0, 2, Bytes(size)});
  std::printf("outcast: %.3f and %.3f GB/s of %.3f\n", rate(out.first) * 1e-9, rate(out.second) * 1e-9,
              half_rate * 1e-9);
  EXPECT_NEAR(rate(out.first), half_rate, 0.01 * half_rate);
  EXPECT_NEAR(rate(out.second), half_rate, 0.01 * half_rate);
  EXPECT_EQ(out.stats.drops, 0u);
  EXPECT_EQ(out.stats.payload_delivered, Bytes(2 * size));
  EXPECT_EQ(out.stats.packets_delivered, out.stats.packets_injected);
}

TEST(Ns3Backend, AgreesWithFlowBackendOnRingAllReduce) {
  const Topology t = star(8, Bandwidth::gbps(100), Time::from_us(1));
  const auto graph = all_reduce_graph(8, Bytes::mib(64));

  engine::DiscreteEventLoop flow_loop;
  engine::FlowNetwork flow_net(t, flow_loop);
  const auto flow = engine::execute(graph, flow_loop, flow_net);
  const auto packet = ns3_modules::run_on_ns3(graph, t, p2p());

  std::printf("ring all-reduce 64 MiB, 8 hosts, 100 Gb/s: flow %.3f us, ns-3 point-to-point %.3f us (%+.3f %%)\n",
              flow.makespan.us(), packet.makespan.us(),
              100.0 * (packet.makespan.seconds() / flow.makespan.seconds() - 1.0));
  EXPECT_NEAR(packet.makespan.seconds(), flow.makespan.seconds(), 0.05 * flow.makespan.seconds());
  EXPECT_EQ(packet.transfers, flow.transfers);
  EXPECT_EQ(packet.bytes_sent, flow.bytes_sent);
  // Packets cost header bytes and store-and-forward: never faster than fluid.
  EXPECT_GT(packet.makespan, flow.makespan);
}

TEST(Ns3Backend, TwoRunsInOneProcessAreIdentical) {
  const Topology t = star(4, Bandwidth::gbps(200), Time::from_ns(600));
  const auto graph = all_reduce_graph(4, Bytes::mib(8) + Bytes(12'345), {30, 10, 20, 40});
  for (const auto model : {ns3_modules::Ns3Model::InfiniBand, ns3_modules::Ns3Model::PointToPoint}) {
  Ns3Options o = p2p(Bytes(2048), 3);
  o.model = model;
  const auto first = ns3_modules::run_on_ns3(graph, t, o);
  const auto second = ns3_modules::run_on_ns3(graph, t, o);
  EXPECT_EQ(first.makespan, second.makespan);
  ASSERT_EQ(first.ranks.size(), second.ranks.size());
  for (std::size_t r = 0; r < first.ranks.size(); ++r) {
    EXPECT_EQ(first.ranks[r].finish, second.ranks[r].finish) << "rank " << r;
  }
  EXPECT_GT(first.makespan, Time::from_us(40));
  }
}

// An observer hears the ns-3 clock between the tasks' ends (a long
// collective ends none for minutes), and the run is the one without it:
// the same times, the same ns-3 events.
TEST(Ns3Backend, ObserverHearsAHeartbeatThatChangesNothing) {
  struct Beats final : engine::ExecutionObserver {
    std::vector<Time> at;
    void on_heartbeat(Time now) override { at.push_back(now); }
  };
  const Topology t = star(4, Bandwidth::gbps(200), Time::from_ns(600));
  const auto graph = all_reduce_graph(4, Bytes::mib(64));
  Beats beats;
  ns3_modules::Ns3Report heard;
  ns3_modules::Ns3Report plain;
  const auto with = ns3_modules::run_on_ns3(graph, t, {}, &beats, &heard);
  const auto without = ns3_modules::run_on_ns3(graph, t, {}, nullptr, &plain);
  EXPECT_EQ(with.makespan, without.makespan);
  EXPECT_EQ(heard.events, plain.events);
  // One all-reduce of 64 MiB: no task ends before the last event, but the
  // heartbeat comes every 65,536 events, the clock moving forward.
  ASSERT_GT(plain.events, 4 * Ns3EventLoop::kHeartbeatEvents);
  EXPECT_EQ(beats.at.size(), plain.events / Ns3EventLoop::kHeartbeatEvents);
  EXPECT_TRUE(std::is_sorted(beats.at.begin(), beats.at.end()));
  EXPECT_GT(beats.at.front(), Time::zero());
  EXPECT_LT(beats.at.front(), with.makespan);
}

// --- Scale-up (NVLink) domain: flows beside the packet fabric ---------------

namespace {

struct ScaleUpRun {
  std::vector<Time> done;
  ns3_modules::Ns3NetworkStats stats;
  ns3_modules::Ns3Report report;
};

ScaleUpRun run_scale_up(const Topology& t, const std::vector<Message>& msgs, ns3_modules::ScaleUpModel model) {
  Ns3Options o;
  o.scale_up = model;
  Ns3EventLoop loop;
  Ns3Network net(t, loop, o);
  ScaleUpRun r;
  r.done.assign(msgs.size(), Time::max());
  for (std::size_t i = 0; i < msgs.size(); ++i) net.send(msgs[i], [&r, &loop, i] { r.done[i] = loop.now(); });
  loop.run();
  net.verify();
  r.stats = net.stats();
  r.report = net.report();
  return r;
}
}  // namespace

TEST(Ns3ScaleUp, MessagesInsideANodeAreFlowsWithTheFlowBackendsTiming) {
  const Topology t = two_nvlink_nodes();
  for (const int d : {1, 3}) {
    for (const int s : {0, 1, 2, 3}) {
      Ns3EventLoop loop;
      Ns3Network net(t, loop);
      // Only same-node pairs (0-1, 2-3) are NVLink routes; a GPU to itself is not.
      EXPECT_EQ(net.scale_up_route(s, d), s != d && s / 2 == d / 2) << s << "->" << d;
    }
  }
  // 64 MiB at efficiency 0.8 plus 3 us of delay_after, from GPU 0 to GPU 1:
  // by hand, wire = 64 MiB / 0.8 at 450 GB/s, then two 300 ns hops and the
  // delay: the flow backend's formula, to the picosecond.
  const std::int64_t size = 64 << 20;
  Message intra{0, 1, Bytes(size), 0.8, Time::from_us(3)};
  const auto flows = run_scale_up(t, {intra}, ns3_modules::ScaleUpModel::Flow);
  engine::DiscreteEventLoop flow_loop;
  engine::FlowNetwork flow(t, flow_loop);
  Time flow_done = Time::max();
  flow.send(intra, [&] { flow_done = flow_loop.now(); });
  flow_loop.run();
  const double by_hand = static_cast<double>(size) / 0.8 / 450e9 + 2 * 300e-9 + 3e-6;
  EXPECT_NEAR(flows.done[0].seconds(), by_hand, 1e-12 * 4);
  EXPECT_EQ(flows.done[0], flow_done);
  // Counted as a delivered message, not as packets.
  EXPECT_EQ(flows.stats.messages_sent, 1u);
  EXPECT_EQ(flows.stats.messages_delivered, 1u);
  EXPECT_EQ(flows.stats.scale_up_messages, 1u);
  EXPECT_EQ(flows.stats.scale_up_payload, Bytes(size));
  EXPECT_EQ(flows.stats.packets_injected, 0u);
  EXPECT_EQ(flows.stats.payload_injected, Bytes(0));
  // The link report has the NVLink links' payload and busy time from the flows.
  const auto path = t.route(0, 1);
  ASSERT_EQ(path.size(), 2u);
  for (const auto l : path) {
    const auto& r = flows.report.links[static_cast<std::size_t>(l)];
    EXPECT_EQ(r.payload_bytes, Bytes(size));
    EXPECT_EQ(r.packets, 0u);
    EXPECT_NEAR(r.busy.seconds(), static_cast<double>(size) / 0.8 / 450e9, 1e-12);
  }

  // As 4 KiB packets through the NVSwitch the same message takes within 1%
  // of the flow's time (headers and the cut-through at the switch are all
  // that differ), and the packet counters see it.
  const auto packets = run_scale_up(t, {intra}, ns3_modules::ScaleUpModel::Packets);
  EXPECT_EQ(packets.stats.scale_up_messages, 0u);
  EXPECT_EQ(packets.stats.payload_injected, Bytes(size));
  EXPECT_GT(packets.stats.packets_injected, 0u);
  EXPECT_NEAR(packets.done[0].seconds(), flows.done[0].seconds(), 0.01 * flows.done[0].seconds());
  EXPECT_GT(packets.done[0], flows.done[0]);  // 30 B of headers per 4 KiB packet
}

TEST(Ns3ScaleUp, FabricMessagesAreUntouchedByNvLinkFlows) {
  // GPU 0 sends 8 MiB to GPU 3 (InfiniBand) while 0 -> 1 and 1 -> 0 move
  // 256 MiB over NVLink: the links are disjoint, so the fabric message
  // arrives at the same picosecond with or without them, and the NVLink pair
  // share nothing either (each its own direction at full rate).
  const Topology t = two_nvlink_nodes();
  const Message fabric{0, 3, Bytes(8 << 20)};
  const Message a{0, 1, Bytes(256 << 20)};
  const Message b{1, 0, Bytes(256 << 20)};
  const auto alone = run_scale_up(t, {fabric}, ns3_modules::ScaleUpModel::Flow);
  const auto mixed = run_scale_up(t, {fabric, a, b}, ns3_modules::ScaleUpModel::Flow);
  EXPECT_EQ(mixed.done[0], alone.done[0]);
  EXPECT_EQ(mixed.done[1], mixed.done[2]);
  EXPECT_EQ(mixed.stats.messages_delivered, 3u);
  EXPECT_EQ(mixed.stats.scale_up_messages, 2u);
  EXPECT_EQ(mixed.stats.payload_injected, Bytes(8 << 20));
  EXPECT_EQ(mixed.stats.payload_delivered, Bytes(8 << 20));
  EXPECT_EQ(mixed.stats.scale_up_payload, Bytes(512 << 20));
  EXPECT_EQ(alone.stats.packets_injected, mixed.stats.packets_injected);
  // Every link carried exactly one model's traffic: NVLink links flows only,
  // the others packets only.
  for (const auto& r : mixed.report.links) {
    if (t.tier(r.link) == topology::LinkTier::NvLink) {
      EXPECT_EQ(r.packets, 0u) << r.link;
    } else {
      EXPECT_EQ(r.payload_bytes.count() > 0, r.packets > 0) << r.link;
    }
  }
}

// --- Cables slowing down during the run ---------------------------------------

namespace {
/// Three GPUs on one switch (vertices gpu0..gpu2 = 0..2, leaf0 = 3; 100 Gb/s
/// cables of 1 us): GPU 0 -> GPU 1, 8 MiB as exact 4 KiB packets, with
/// `changes` applied. Returns the delivery time.
Time one_message_with(const std::vector<Ns3Options::CableRateChange>& changes) {
  const Topology t = star(3, Bandwidth::gbps(100), Time::from_us(1));
  Ns3Options o;  // InfiniBand, 4 KiB MTU, every packet
  o.rate_changes = changes;
  Ns3EventLoop loop;
  Ns3Network net(t, loop, o);
  Time done = Time::max();
  net.send(Message{0, 1, Bytes(8 << 20)}, [&] { done = loop.now(); });
  loop.run();
  net.verify();
  return done;
}
}  // namespace

TEST(Ns3RateChange, ACableHalvedMidMessageStretchesTheRestByTwo) {
  // Unslowed the 8 MiB serialise in T = 2048 x (4096 + 30) B at 100 Gb/s
  // (675.9 us). The first cable (gpu0 - leaf0: vertices 0 and 3) halves at
  // T / 2: the second half of the bytes takes T, so delivery moves by T / 2
  // (to within a packet time, 0.33 us).
  const Time base = one_message_with({});
  const double wire_s = 2048.0 * (4096 + 30) * 8.0 / 100e9;
  EXPECT_NEAR(base.seconds(), wire_s + 2e-6, 1e-6);
  const Time half = Time::from_seconds(wire_s / 2);
  const Time slowed = one_message_with({{half, 0, 3, 0.5}});
  EXPECT_NEAR((slowed - base).seconds(), wire_s / 2, 0.5e-6);
  // From the start: every byte at half rate; after the message: no change.
  EXPECT_NEAR(one_message_with({{Time::zero(), 0, 3, 0.5}}).seconds(), 2 * wire_s + 2e-6, 1e-6);
  EXPECT_EQ(one_message_with({{Time::from_ms(5), 0, 3, 0.5}}), base);
  // GPU 2's cable carries nothing of this message.
  EXPECT_EQ(one_message_with({{half, 2, 3, 0.5}}), base);
}

// A rate change timed after the iteration changes nothing, also in the
// per-link CSV: utilization is busy time over the iteration, as the flow
// backend's (helper 59: the span ran to the change's time, 56x lower).
TEST(Ns3RateChange, OneAfterTheIterationLeavesTheLinkCsvAlone) {
  const Topology t = star(4, Bandwidth::gbps(200), Time::from_ns(600));
  const auto graph = all_reduce_graph(4, Bytes::mib(8), {30, 10, 20, 40});
  Ns3Options late;
  late.rate_changes = {{Time::from_seconds(2.0), 0, 4, 0.5}};  // gpu0 - leaf0, long after
  ns3_modules::Ns3Report plain_report, late_report;
  const auto plain = ns3_modules::run_on_ns3(graph, t, Ns3Options{}, nullptr, &plain_report);
  const auto r = ns3_modules::run_on_ns3(graph, t, late, nullptr, &late_report);
  EXPECT_EQ(r.makespan, plain.makespan);
  EXPECT_EQ(late_report.end_time, r.makespan);
  EXPECT_EQ(plain_report.end_time, plain.makespan);
  EXPECT_EQ(ns3_modules::link_csv(late_report, t), ns3_modules::link_csv(plain_report, t));
}

TEST(Ns3RateChange, FailuresUnknownCablesAndBadTimesAreInputErrors) {
  const Topology t = star(2, Bandwidth::gbps(100), Time::from_us(1));
  Ns3EventLoop loop;
  auto with = [](Ns3Options::CableRateChange c) {
    Ns3Options o;
    o.rate_changes = {c};
    return o;
  };
  EXPECT_THROW(Ns3Network(t, loop, with({Time::from_us(1), 0, 2, 0.0})), InputError);   // a failure
  EXPECT_THROW(Ns3Network(t, loop, with({Time::from_us(1), 0, 2, 1.5})), InputError);
  EXPECT_THROW(Ns3Network(t, loop, with({Time::from_us(1), 0, 1, 0.5})), InputError);   // no gpu0-gpu1 cable
  EXPECT_THROW(Ns3Network(t, loop, with({Time::from_ps(-1), 0, 2, 0.5})), InputError);
}

TEST(Ns3RateChange, AnNvLinkCableSlowsItsFlows) {
  // Under scale_up: flow an NVLink cable's change goes to the flow model:
  // 64 MiB from GPU 0 to GPU 1 with GPU 0's NVLink cable at half rate from
  // the start takes twice the serialisation (by hand, as the flow backend).
  const Topology t = two_nvlink_nodes();
  const auto& first = t.link(t.route(0, 1).front());  // gpu0 -> its NVSwitch
  Ns3Options o;
  o.rate_changes = {{Time::zero(), first.src, first.dst, 0.5}};
  Ns3EventLoop loop;
  Ns3Network net(t, loop, o);
  Time done = Time::max();
  const std::int64_t size = 64 << 20;
  net.send(Message{0, 1, Bytes(size)}, [&] { done = loop.now(); });
  loop.run();
  net.verify();
  EXPECT_NEAR(done.seconds(), static_cast<double>(size) / 225e9 + 2 * 300e-9, 1e-11);
  EXPECT_EQ(net.stats().packets_injected, 0u);
}
