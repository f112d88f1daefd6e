// Collective completion times on the flow backend against the alpha-beta
// formulas, and per-link byte accounting on real fabrics.
#include <gtest/gtest.h>

#include "tessera/engine/executor.hpp"
#include "tessera/engine/flow_network.hpp"
#include "tessera/topology/fabrics.hpp"
#include "test_topologies.hpp"

using namespace tessera;
using namespace tessera::engine;
using collectives::Algorithm;
using parallelism::CollectiveKind;

namespace {

parallelism::TaskGraph one_collective(int p, CollectiveKind kind, Bytes size) {
  std::vector<int> all(static_cast<std::size_t>(p));
  for (int r = 0; r < p; ++r) all[static_cast<std::size_t>(r)] = r;
  return parallelism::concurrent_collectives(p, {all}, kind, size);
}

struct Run {
  double seconds;
  std::vector<double> link_bytes;
};

Run run(const topology::Topology& topo, int p, CollectiveKind kind, Bytes size, Algorithm a, int chunks = 1,
        int ranks_per_node = 0, collectives::Granularity granularity = collectives::Granularity::Steps,
        const CommCalibration& calibration = CommCalibration::line_rate()) {
  DiscreteEventLoop loop;
  FlowNetwork net(topo, loop);
  ExecutionOptions o;
  o.collectives.algorithm = a;
  o.collectives.granularity = granularity;
  o.collectives.chunks = chunks;
  o.collectives.ranks_per_node = ranks_per_node;
  o.calibration = calibration;
  const auto r = execute(one_collective(p, kind, size), loop, net, nullptr, o);
  return {r.makespan.seconds(), net.link_bytes()};
}

const Bandwidth kBw = parse_bandwidth("100Gbps");
const Time kHop = parse_time("1us");
// On the star every GPU-GPU path is two links: alpha = 2 hops.
const double kAlpha = 2 * kHop.seconds();
const double kBeta = 1.0 / kBw.bytes_per_second();
constexpr collectives::Granularity kBoth[] = {collectives::Granularity::Steps, collectives::Granularity::Flows};

}  // namespace

TEST(AlphaBeta, HalvingDoublingPowerOfTwo) {
  // 2 log2(p) exchanges, no link shared: 2 log2(p) a + 2(p-1)/p S b.
  for (int p : {2, 4, 8, 16}) {
    const Bytes s = Bytes::mib(64);
    const double lg = std::log2(p);
    const double expected = 2 * lg * kAlpha + 2.0 * (p - 1) / p * s.as_double() * kBeta;
    const auto r =
        run(test_support::star(p, kBw, kHop), p, CollectiveKind::AllReduce, s, Algorithm::HalvingDoubling);
    EXPECT_NEAR(r.seconds, expected, 0.01 * expected) << "p=" << p;
  }
}

TEST(AlphaBeta, HalvingDoublingFoldsNonPowerOfTwo) {
  // p = 6: fold (a + S b), 4 exchanges on q = 4, unfold (a + S b).
  const Bytes s = Bytes::mib(64);
  const double expected = 2 * (kAlpha + s.as_double() * kBeta) + 4 * kAlpha + 1.5 * s.as_double() * kBeta;
  const auto r =
      run(test_support::star(6, kBw, kHop), 6, CollectiveKind::AllReduce, s, Algorithm::HalvingDoubling);
  EXPECT_NEAR(r.seconds, expected, 0.01 * expected);
}

TEST(AlphaBeta, RingReduceScatterAndAllGather) {
  for (int p : {3, 8}) {
    const Bytes s = Bytes::mib(48);
    const double expected = (p - 1) * kAlpha + (p - 1.0) / p * s.as_double() * kBeta;
    for (auto kind : {CollectiveKind::ReduceScatter, CollectiveKind::AllGather}) {
      for (auto g : kBoth) {
        const auto r = run(test_support::star(p, kBw, kHop), p, kind, s, Algorithm::Ring, 1, 0, g);
        EXPECT_NEAR(r.seconds, expected, 0.01 * expected) << "p=" << p << " " << collectives::to_string(g);
      }
    }
  }
}

TEST(AlphaBeta, BinomialTreeBroadcastAndReduce) {
  // ceil(log2 p) rounds of a + S b: one message in and out per rank per round.
  for (int p : {2, 5, 8, 16}) {
    const Bytes s = Bytes::mib(16);
    const double rounds = std::ceil(std::log2(p));
    const double expected = rounds * (kAlpha + s.as_double() * kBeta);
    for (auto kind : {CollectiveKind::Broadcast, CollectiveKind::Reduce}) {
      const auto r = run(test_support::star(p, kBw, kHop), p, kind, s, Algorithm::Tree);
      EXPECT_NEAR(r.seconds, expected, 0.01 * expected) << "p=" << p;
    }
  }
}

TEST(AlphaBeta, DoubleBinaryTreeAllReduce) {
  // Hand-derived from the two trees (h = S/2 per tree):
  //  p = 2: up and down, both trees on opposite directions: 2(a + h b).
  //  p = 3: 0<-2<-1 and 1<-0<-2, never sharing a link: 4(a + h b).
  //  p = 4: 0<-2<-{1,3} and 3<-1<-{0,2}: the first reduce level and the last
  //         broadcast level share a link between two flows: 2(a + S b) + 2(a + h b).
  const Bytes s = Bytes::mib(32);
  const double h = s.as_double() / 2 * kBeta;
  const double full = s.as_double() * kBeta;
  const std::vector<std::pair<int, double>> cases{
      {2, 2 * (kAlpha + h)}, {3, 4 * (kAlpha + h)}, {4, 2 * (kAlpha + full) + 2 * (kAlpha + h)}};
  for (auto [p, expected] : cases) {
    const auto r = run(test_support::star(p, kBw, kHop), p, CollectiveKind::AllReduce, s, Algorithm::Tree);
    EXPECT_NEAR(r.seconds, expected, 0.01 * expected) << "p=" << p;
  }
}

TEST(AlphaBeta, PipelinedChainBroadcast) {
  // (p-1 + C-1) hops of a + (S/C) b.
  const int p = 6;
  const Bytes s = Bytes::mib(60);
  for (int c : {1, 4, 16}) {
    const double expected = (p - 1 + c - 1) * (kAlpha + s.as_double() / c * kBeta);
    const auto r = run(test_support::star(p, kBw, kHop), p, CollectiveKind::Broadcast, s, Algorithm::Ring, c);
    EXPECT_NEAR(r.seconds, expected, 0.01 * expected) << "C=" << c;
  }
}

TEST(AlphaBeta, DirectAllToAll) {
  // Every block at once (NCCL's grouped sends and receives): one a, and
  // each rank's up-link carries its p-1 blocks of S/p side by side:
  // a + (p-1)/p S b. At 64 KiB the a is a third of it (p-1 steps in
  // sequence would pay it 7 times: 18.6 us, not 6.6).
  const int p = 8;
  for (const Bytes s : {Bytes::kib(64), Bytes::mib(64)}) {
    const double expected = kAlpha + (p - 1.0) / p * s.as_double() * kBeta;
    const auto r = run(test_support::star(p, kBw, kHop), p, CollectiveKind::AllToAll, s, Algorithm::Direct);
    EXPECT_NEAR(r.seconds, expected, 0.01 * expected) << s.count();
  }
}

namespace {

topology::Topology rail_fabric(int nodes, int gpus) {
  topology::RailOptimizedSpec s;
  s.nodes = nodes;
  s.node.gpus = gpus;
  s.node.nvlink = {parse_bandwidth("450GB/s"), parse_time("500ns")};
  s.k = 16;
  s.host = {parse_bandwidth("400Gbps"), parse_time("1us")};
  s.leaf_spine = {parse_bandwidth("400Gbps"), parse_time("1us")};
  return topology::build_rail_optimized(s);
}

double bytes_on(const topology::Topology& t, const std::vector<double>& link_bytes, topology::LinkTier tier) {
  double total = 0;
  for (std::size_t i = 0; i < link_bytes.size(); ++i) {
    if (t.tier(static_cast<topology::LinkId>(i)) == tier) total += link_bytes[i];
  }
  return total;
}

}  // namespace

TEST(LinkBytes, RailOptimizedHierarchicalAndRailRingAllReducesAvoidSpines) {
  const int nodes = 4;
  const int gpus = 8;
  const int p = nodes * gpus;
  const auto t = rail_fabric(nodes, gpus);
  const Bytes s = Bytes::mib(64);
  const auto hier = run(t, p, CollectiveKind::AllReduce, s, Algorithm::Hierarchical, 1, gpus);
  // As flows: the same bytes on every link, and (no link shared by two
  // rings' flows, equal shards) the same time to within a picosecond per step.
  const auto hier_flows = run(t, p, CollectiveKind::AllReduce, s, Algorithm::Hierarchical, 1, gpus,
                              collectives::Granularity::Flows);
  for (std::size_t l = 0; l < hier.link_bytes.size(); ++l) {
    EXPECT_NEAR(hier_flows.link_bytes[l], hier.link_bytes[l], 1.0) << "link " << l;
  }
  EXPECT_NEAR(hier_flows.seconds, hier.seconds, 1e-10);
  EXPECT_EQ(bytes_on(t, hier.link_bytes, topology::LinkTier::LeafSpine), 0.0);
  // Each rank sends 2(N-1)/N * S/L over its HCA, crossing two host links.
  const double inter = 2.0 * (nodes - 1) / nodes * s.as_double() / gpus;
  EXPECT_NEAR(bytes_on(t, hier.link_bytes, topology::LinkTier::Host), 2 * p * inter, 1.0);
  EXPECT_NEAR(bytes_on(t, hier.link_bytes, topology::LinkTier::NvLink),
              2 * p * 2.0 * (gpus - 1) / gpus * s.as_double(), 1.0);
  // One ring in rank order (no node shape given) crosses rails at every
  // node boundary: through the spines.
  const auto ring = run(t, p, CollectiveKind::AllReduce, s, Algorithm::Ring);
  EXPECT_GT(bytes_on(t, ring.link_bytes, topology::LinkTier::LeafSpine), 0.0);
  EXPECT_LT(hier.seconds, ring.seconds);
  // With the node shape, NCCL's rail-aligned rings (one per local GPU):
  // nothing through the spines; every rank leaves its node once, with
  // 2(p-1)/p of its ring's S/L, over two host links.
  const auto rails = run(t, p, CollectiveKind::AllReduce, s, Algorithm::Ring, 1, gpus);
  EXPECT_EQ(bytes_on(t, rails.link_bytes, topology::LinkTier::LeafSpine), 0.0);
  EXPECT_NEAR(bytes_on(t, rails.link_bytes, topology::LinkTier::Host),
              2 * p * 2.0 * (p - 1) / p * s.as_double() / gpus, 1.0);
  // and the other p - N hops of each of the L rings inside the nodes (two NVLink links each).
  EXPECT_NEAR(bytes_on(t, rails.link_bytes, topology::LinkTier::NvLink),
              2.0 * gpus * (p - nodes) * 2.0 * (p - 1) / p * s.as_double() / gpus, 1.0 * p);
  // Everything at once beats the hierarchical phases one after another here
  // (8 HCAs of 400 Gb/s per node against 450 GB/s of NVLink per GPU).
  EXPECT_LT(rails.seconds, hier.seconds);
  // Auto with the node shape known picks the ring, as rail rings.
  const auto autom = run(t, p, CollectiveKind::AllReduce, s, Algorithm::Auto, 1, gpus);
  EXPECT_DOUBLE_EQ(autom.seconds, rails.seconds);
}

// A ring across nodes pays its per-step fixed costs along the step chain,
// which goes round the ring: each flow waits steps / p x the sum over the
// ring's connections of path latency (and calibrated step latency), as
// NCCL's tuning model charges 2(N-1) network and 2(p-N) NVLink step
// latencies, not 2(p-1) of the network's. Two nodes of two GPUs, rail
// rings (L = 2, p = 4, 6 steps): in each ring two NVLink connections
// (GPU - NVSwitch - GPU, 2 x 500 ns) and two across the nodes on one rail
// (HCA - rail leaf - HCA, 2 x 1 us). No link carries two flows.
TEST(AlphaBeta, RailRingLatencyGoesRoundTheRing) {
  const int nodes = 2;
  const int gpus = 2;
  const int p = nodes * gpus;
  const auto t = rail_fabric(nodes, gpus);
  const Bytes s = Bytes::mib(64);
  const double steps = 2.0 * (p - 1);
  // Each ring carries S/L in chunks of S/(L p); a flow sends `steps` of them.
  const double flow_bytes = steps * s.as_double() / (gpus * p);
  const double across = flow_bytes / parse_bandwidth("400Gbps").bytes_per_second();
  const double ring_path = 2 * 1e-6 + 2 * 2e-6;  // sum over the ring's connections
  auto at = [&](const CommCalibration& c) {
    return run(t, p, CollectiveKind::AllReduce, s, Algorithm::Ring, 1, gpus, collectives::Granularity::Flows,
               c)
        .seconds;
  };
  // Line rate: 6/4 x 6 us = 9 us of latency (each flow's own 6 x 2 us = 12 us before).
  EXPECT_NEAR(at(CommCalibration::line_rate()), across + steps / p * ring_path, 1e-9);
  // A network step latency of 6 us on the two crossing connections: 6/4 x 12 us more
  // (36 us before); efficiency 1, no launch.
  CommCalibration c;
  c.network.step_latency = parse_time("6us");  // efficiencies stay 1
  EXPECT_NEAR(at(c), across + steps / p * (ring_path + 2 * 6e-6), 1e-9);
  // The step graph: each crossing connection sends its 6 chunks back to
  // back (`across`), and the chain's latency shows at most once round the
  // ring (6 us) to fill and drain the pipeline. Had each step waited for its
  // own connection's previous one, every step would pay the crossing's 2 us
  // again (12 us).
  const auto steps_graph = run(t, p, CollectiveKind::AllReduce, s, Algorithm::Ring, 1, gpus);
  EXPECT_GE(steps_graph.seconds, across);
  EXPECT_LE(steps_graph.seconds, across + ring_path + 1e-9);
}

TEST(LinkBytes, RailOptimizedHierarchicalAllToAllAvoidsSpines) {
  const int nodes = 4;
  const int gpus = 8;
  const int p = nodes * gpus;
  const auto t = rail_fabric(nodes, gpus);
  const Bytes s = Bytes::mib(64);
  const auto hier = run(t, p, CollectiveKind::AllToAll, s, Algorithm::Hierarchical, 1, gpus);
  // Inter-node traffic stays on its rail: nothing through the spines.
  EXPECT_EQ(bytes_on(t, hier.link_bytes, topology::LinkTier::LeafSpine), 0.0);
  // Each rank sends (N-1)/N * S over its HCA (two host links) and
  // (L-1)/L * S over NVLink (two NVLink hops through the switch).
  const double inter = static_cast<double>(nodes - 1) / nodes * s.as_double();
  EXPECT_NEAR(bytes_on(t, hier.link_bytes, topology::LinkTier::Host), 2 * p * inter, p * 2.0);
  EXPECT_NEAR(bytes_on(t, hier.link_bytes, topology::LinkTier::NvLink),
              2 * p * static_cast<double>(gpus - 1) / gpus * s.as_double(), p * 2.0);
  // The direct all-to-all sends the same bytes across nodes, (N-1) L
  // messages per rank and most of them across rails, through the spines.
  const auto direct = run(t, p, CollectiveKind::AllToAll, s, Algorithm::Direct, 1, gpus);
  EXPECT_NEAR(bytes_on(t, direct.link_bytes, topology::LinkTier::Host), 2 * p * inter, p * 2.0);
  EXPECT_GT(bytes_on(t, direct.link_bytes, topology::LinkTier::LeafSpine), 0.0);
  // All peers at once (NCCL's grouped sends and receives), the direct
  // exchange is bound by each rank's HCA alone on this non-blocking fabric:
  // (N-1)/N S at 400 Gb/s, 1.0066 ms, plus a few us of path latency. The
  // hierarchical one first moves (L-1)/L S over NVLink (0.13 ms): slower
  // here; what it saves is the spines' bytes (above).
  const double hca_bound = inter / parse_bandwidth("400Gbps").bytes_per_second();
  EXPECT_NEAR(direct.seconds, hca_bound, 0.01 * hca_bound);
  EXPECT_LT(direct.seconds, hier.seconds);
  // Auto stays direct (NCCL's all-to-all).
  const auto autom = run(t, p, CollectiveKind::AllToAll, s, Algorithm::Auto, 1, gpus);
  EXPECT_DOUBLE_EQ(autom.seconds, direct.seconds);
}

TEST(LinkBytes, RingAllReduceBytesPerLinkMatchTheFormula) {
  // On the star, every GPU uplink carries exactly 2(p-1)/p * S.
  const int p = 5;
  const Bytes s = Bytes(5'000'000);
  const auto t = test_support::star(p, kBw, kHop);
  for (auto gran : kBoth) {
    const auto r = run(t, p, CollectiveKind::AllReduce, s, Algorithm::Ring, 1, 0, gran);
    for (int g = 0; g < p; ++g) {
      const auto up = t.route(g, (g + 1) % p)[0];
      EXPECT_NEAR(r.link_bytes[static_cast<std::size_t>(up)], 2.0 * (p - 1) / p * s.as_double(), 1.0)
          << collectives::to_string(gran);
    }
  }
}

// Reduction kernels on the receiving GPU: in a ring all-reduce each of the
// p-1 reduce-scatter steps waits for the reduction of the chunk it forwards,
// so T = 2(p-1)(S/(pB) + a) + (p-1) r(S/p); all-gather steps add nothing.
TEST(AlphaBeta, RingAllReduceWithReductionKernels) {
  const Bytes s = Bytes::mib(64);
  for (auto [p, g] : {std::pair{2, kBoth[0]}, std::pair{4, kBoth[0]}, std::pair{8, kBoth[0]}, std::pair{2, kBoth[1]},
                      std::pair{4, kBoth[1]}, std::pair{8, kBoth[1]}}) {
    const auto topo = test_support::star(p, kBw, kHop);
    DiscreteEventLoop loop;
    FlowNetwork net(topo, loop);
    ExecutionOptions o;
    o.collectives.algorithm = Algorithm::Ring;
    o.collectives.granularity = g;
    // A memory-bound reduction at 1 TB/s reading two inputs, writing one.
    o.reduction_time = [](Bytes b) { return Time::from_seconds(3.0 * b.as_double() / 1e12); };
    const auto r = execute(one_collective(p, CollectiveKind::AllReduce, s), loop, net, nullptr, o);
    const double chunk = s.as_double() / p;
    const double expected = 2.0 * (p - 1) * (chunk * kBeta + kAlpha) + (p - 1) * 3.0 * chunk / 1e12;
    EXPECT_NEAR(r.makespan.seconds(), expected, 0.01 * expected) << "p=" << p;
    // And without the kernels it is the plain alpha-beta time.
    DiscreteEventLoop loop2;
    FlowNetwork net2(topo, loop2);
    o.reduction_time = nullptr;
    const auto free = execute(one_collective(p, CollectiveKind::AllReduce, s), loop2, net2, nullptr, o);
    EXPECT_NEAR(r.makespan.seconds() - free.makespan.seconds(), (p - 1) * 3.0 * chunk / 1e12, 1e-9) << "p=" << p;
  }
}
