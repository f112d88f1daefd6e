// The calibrated communication model (engine::CommCalibration) on the ns-3
// backend: message efficiency in both fabric models, and the executor's
// latencies and SM sharing on ns-3's clock. Hand calculations in comments.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "../engine/test_topologies.hpp"
#include "tessera/engine/executor.hpp"
#include "tessera/engine/flow_network.hpp"
#include "tessera/error.hpp"
#include "tessera/ns3_modules/ns3_backend.hpp"
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
constexpr std::int64_t kIbHeader = 30;                // default IB wire overhead per MTU packet
constexpr std::int64_t kP2pOverhead = 8 + 4 + 4 + 2;  // Tessera header + PPP

Topology pair(Bandwidth bw, Time latency) {
  Topology t;
  const auto a = t.add_vertex(VertexKind::Gpu, "gpu0", 0);
  const auto b = t.add_vertex(VertexKind::Gpu, "gpu1", 1);
  t.add_duplex_link(a, b, bw, latency);
  return t;
}

using test_support::star;  // hosts on one switch (tests/engine/test_topologies.hpp)

parallelism::Task compute_task(Time d) {
  parallelism::Task c;
  c.name = "compute";
  c.kind = parallelism::TaskKind::Compute;
  c.duration = d;
  return c;
}

parallelism::Task all_reduce_task(Bytes size, std::vector<parallelism::TaskIndex> deps = {}) {
  parallelism::Task ar;
  ar.name = "all_reduce";
  ar.kind = parallelism::TaskKind::Collective;
  ar.group = 0;
  ar.collective_id = 0;
  ar.bytes = size;
  ar.deps = std::move(deps);
  return ar;
}

/// Every rank: an optional compute task of `compute` (independent of the
/// all-reduce), then the all-reduce over all ranks.
parallelism::TaskGraph overlap_graph(int ranks, Bytes size, Time compute = Time::zero()) {
  parallelism::TaskGraph g;
  parallelism::Group group;
  for (int r = 0; r < ranks; ++r) group.ranks.push_back(r);
  g.groups.push_back(group);
  parallelism::Program prog;
  if (compute > Time::zero()) prog.tasks.push_back(compute_task(compute));
  prog.tasks.push_back(all_reduce_task(size));
  const auto shared = g.add_program(std::move(prog));
  for (int r = 0; r < ranks; ++r) g.add_rank(shared, {0});
  return g;
}

}  // namespace

TEST(Ns3Calibration, IbPacketsCarryEfficiencyTimesMtuOfPayload) {
  // 8 MiB at efficiency 0.75 over one 400 Gb/s link: each 4096 B packet
  // carries floor(0.75 x 4096) = 3072 B of payload, so 2731 packets: 2730
  // full (4096 + 30 B on the wire) and a last one of 2048 B payload, i.e.
  // ceil(2048 / 0.75) = 2731 B + 30 B. Back to back, one latency after.
  const Bandwidth bw = Bandwidth::gbps(400);
  const Time latency = Time::from_ns(100);
  const Topology t = pair(bw, latency);
  const std::int64_t size = 8 << 20;
  Ns3EventLoop loop;
  Ns3Options packets;  // the pair's cable is GPU-GPU, i.e. NVLink: as packets here
  packets.scale_up = ns3_modules::ScaleUpModel::Packets;
  Ns3Network net(t, loop, packets);
  Time done = Time::max();
  net.send(Message{0, 1, Bytes(size), 0.75}, [&] { done = loop.now(); });
  loop.run();
  net.verify();
  const std::int64_t wire = 2730 * (kMtu + kIbHeader) + 2731 + kIbHeader;
  EXPECT_NEAR(done.seconds(),
              static_cast<double>(wire) * 8.0 / static_cast<double>(bw.bps()) + latency.seconds(), 2731e-12);
  EXPECT_EQ(net.stats().packets_injected, 2731u);
  EXPECT_EQ(net.stats().payload_injected, Bytes(size));  // reports count payload
  EXPECT_EQ(net.stats().payload_delivered, Bytes(size));
  EXPECT_EQ(net.stats().wire_bytes, Bytes(wire));
}

TEST(Ns3Calibration, PointToPointPacketsCarryEfficiencyTimesMtuOfPayload) {
  // 1 MiB at efficiency 0.5: 2048 B of payload per 4096 B packet, 512
  // packets of 4096 + 18 B, pipelined on one 100 Gb/s link.
  const Bandwidth bw = Bandwidth::gbps(100);
  const Time latency = Time::from_us(1);
  const Topology t = pair(bw, latency);
  Ns3Options o;
  o.model = ns3_modules::Ns3Model::PointToPoint;
  o.scale_up = ns3_modules::ScaleUpModel::Packets;  // GPU-GPU (NVLink) cable, as packets
  Ns3EventLoop loop;
  Ns3Network net(t, loop, o);
  Time done = Time::max();
  const std::int64_t size = 1 << 20;
  net.send(Message{0, 1, Bytes(size), 0.5}, [&] { done = loop.now(); });
  loop.run();
  net.verify();
  const double expected =
      512.0 * (kMtu + kP2pOverhead) * 8.0 / static_cast<double>(bw.bps()) + latency.seconds();
  EXPECT_NEAR(done.seconds(), expected, 512e-12);
  EXPECT_EQ(net.stats().packets_injected, 512u);
  EXPECT_EQ(net.stats().payload_delivered, Bytes(size));
  EXPECT_EQ(net.stats().wire_bytes, Bytes(512 * (kMtu + kP2pOverhead)));
  EXPECT_THROW(net.send(Message{0, 1, Bytes(size), 0.0}, [] {}), SimulationError);
}

TEST(Ns3Calibration, CalibratedRingAllReduceMatchesTheFlowBackendAndTheFormula) {
  // 4 ranks of one node on a 100 Gb/s star (1 us per link), calibration
  // efficiency(4) = 0.8 - 0.4/4 = 0.7, launch 20 us: both backends give
  //   20 us + 6 x 2 us + 2 x 3/4 x S / (0.7 x B)
  // (ns-3 adds its 30 B per 4 KiB packet of headers: +0.73 %).
  const int n = 4;
  const Bandwidth bw = Bandwidth::gbps(100);
  const Topology t = star(n, bw, Time::from_us(1));
  const Bytes size = Bytes::mib(8);
  engine::ExecutionOptions o;
  o.collectives.ranks_per_node = n;
  o.calibration.nvlink.peak_efficiency = 0.8;
  o.calibration.nvlink.group_penalty = 0.4;
  o.calibration.nvlink.launch_latency = Time::from_us(20);
  const auto graph = overlap_graph(n, size);
  engine::DiscreteEventLoop flow_loop;
  engine::FlowNetwork flow_net(t, flow_loop);
  const auto flow = engine::execute(graph, flow_loop, flow_net, nullptr, o);
  Ns3Options ns3;
  ns3.execution = o;
  const auto ib = ns3_modules::run_on_ns3(graph, t, ns3);
  const double formula = 20e-6 + 6 * 2e-6 + 1.5 * size.as_double() / (0.7 * bw.bytes_per_second());
  EXPECT_NEAR(flow.makespan.seconds(), formula, 1e-9);
  EXPECT_NEAR(ib.makespan.seconds(), formula, 0.012 * formula);
  EXPECT_GT(ib.makespan.seconds(), formula);  // the headers only add
  EXPECT_EQ(ib.bytes_sent, flow.bytes_sent);  // payload, not wire
  // Line rate on ns-3 is 0.7 x faster in the bandwidth term.
  Ns3Options plain;
  plain.execution.collectives.ranks_per_node = n;
  const auto line = ns3_modules::run_on_ns3(graph, t, plain);
  const double line_formula = 6 * 2e-6 + 1.5 * size.as_double() / bw.bytes_per_second();
  EXPECT_NEAR(line.makespan.seconds(), line_formula, 0.012 * line_formula);
}

TEST(Ns3Calibration, SmSharingSlowsOverlappedComputeOnNs3ByStimesC) {
  // Compute T = 2 ms beside a 2-rank all-reduce: it ends at T + s x C,
  // C the all-reduce's duration on ns-3 (s = 0.25, exact to a picosecond).
  struct Spans : engine::ExecutionObserver {
    Time collective_span, compute_end;
    void on_compute(int, const parallelism::Task&, Time, Time end) override {
      compute_end = std::max(compute_end, end);
    }
    void on_collective(const parallelism::Task&, std::int32_t, const std::vector<int>&, Time start,
                       Time end) override {
      collective_span = end - start;
    }
  };
  const Topology t = star(2, Bandwidth::gbps(100), Time::from_ns(500));
  Ns3Options o;
  o.execution.collectives.ranks_per_node = 2;
  o.execution.calibration.sm_slowdown = 0.25;
  Spans spans;
  const Time compute = Time::from_ms(2);
  const auto r = ns3_modules::run_on_ns3(overlap_graph(2, Bytes::mib(8), compute), t, o, &spans);
  const Time comm = spans.collective_span;
  ASSERT_GT(comm, Time::zero());
  ASSERT_LT(comm, compute);
  EXPECT_NEAR(static_cast<double>(spans.compute_end.ps()),
              static_cast<double>((compute + comm).ps()) - 0.75 * comm.ps(), 1.0);
  EXPECT_NEAR(static_cast<double>(r.ranks[0].overlap_slowdown.ps()), 0.25 * comm.ps(), 1.0);
  EXPECT_EQ(r.makespan, spans.compute_end);
}
