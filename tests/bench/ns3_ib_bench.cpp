// Scale and speed of the ns-3 InfiniBand model (a plain program, not Google
// Benchmark: each case is one long run). Figures go to docs/benchmarks.md.
//
//   ns3_ib_bench events              packet events per second (64-host fat-tree)
//   ns3_ib_bench coarsening          segment coarsening: error vs 4 KiB packets, speed-up
//   ns3_ib_bench gpt3 NODES BATCH K [packets|flow]
//                                    GPT-3 175B iteration (tp 8, pp 16, dp rest) on
//                                    NODES x 8 GPUs, global batch BATCH, K packets per
//                                    segment, NVLink messages as packets (default, as
//                                    docs/benchmarks.md's table) or flows
//                                    (Ns3Options::scale_up); flow backend first, then ns-3
#include <fmt/format.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/engine/executor.hpp"
#include "tessera/engine/flow_network.hpp"
#include "tessera/node_model/gpu_spec.hpp"
#include "tessera/node_model/roofline.hpp"
#include "tessera/ns3_modules/ns3_backend.hpp"
#include "tessera/parallelism/plan.hpp"
#include "tessera/parallelism/transformer.hpp"
#include "tessera/topology/fabrics.hpp"

using namespace tessera;
using Clock = std::chrono::steady_clock;

namespace {

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/// User + system CPU seconds of this process (the machine is shared, so
/// rates are quoted per CPU second as well as per wall second).
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

topology::Topology fat_tree(int nodes, int gpus, int k) {
  topology::FatTreeSpec s;
  s.nodes = nodes;
  s.node.gpus = gpus;
  s.node.nvlink = {Bandwidth::gigabytes_per_second(450), Time::from_ns(500)};
  s.k = k;
  s.tiers = 2;
  s.host = {Bandwidth::gbps(400), Time::from_ns(600)};
  s.leaf_spine = {Bandwidth::gbps(400), Time::from_ns(600)};
  return topology::build_fat_tree(s);
}

parallelism::TaskGraph all_reduce(int ranks, Bytes size) {
  parallelism::TaskGraph g;
  parallelism::Group group;
  for (int r = 0; r < ranks; ++r) group.ranks.push_back(r);
  g.groups.push_back(group);
  for (int r = 0; r < ranks; ++r) {
    parallelism::Task ar;
    ar.name = "all_reduce";
    ar.kind = parallelism::TaskKind::Collective;
    ar.group = 0;
    ar.collective_id = 0;
    ar.bytes = size;
    parallelism::Program p;
    p.tasks.push_back(ar);
    g.add_rank(g.add_program(std::move(p)), {0});
  }
  return g;
}

/// Congested traffic: every host sends `size` to host (i * 7 + 3) mod n and
/// half of them also to host 0 (an incast), all at once.
struct Mixed {
  Time makespan;
  std::vector<Time> done;
  ns3_modules::Ns3Report report;
  double wall = 0;
};
Mixed run_mixed(const topology::Topology& t, Bytes size, const ns3_modules::Ns3Options& o) {
  const auto t0 = Clock::now();
  Mixed m;
  ns3_modules::Ns3EventLoop loop;
  ns3_modules::Ns3Network net(t, loop, o);
  const int n = t.num_gpus();
  std::vector<engine::Message> msgs;
  msgs.reserve(static_cast<std::size_t>(n) + static_cast<std::size_t>(n / 2));
  for (int i = 0; i < n; ++i) msgs.push_back({i, (i * 7 + 3) % n, size});
  for (int i = 1; i < n; i += 2) msgs.push_back({i, 0, size / 4});
  m.done.assign(msgs.size(), Time::zero());
  for (std::size_t i = 0; i < msgs.size(); ++i) net.send(msgs[i], [&m, &loop, i] { m.done[i] = loop.now(); });
  loop.run();
  net.verify();
  m.report = net.report();
  m.makespan = *std::max_element(m.done.begin(), m.done.end());
  m.wall = since(t0);
  return m;
}

int events() {
  const auto t = fat_tree(64, 1, 16);  // 64 hosts, 8 leaves x 8 hosts, 8 spines
  const auto graph = all_reduce(64, Bytes::mib(64));
  const auto t0 = Clock::now();
  const double c0 = cpu_seconds();
  ns3_modules::Ns3Report r;
  const auto res = ns3_modules::run_on_ns3(graph, t, {}, nullptr, &r);
  const double wall = since(t0);
  const double cpu = cpu_seconds() - c0;
  fmt::print("ring all-reduce 64 MiB over 64 hosts (fat-tree k=16, 400 Gb/s, 4 KiB packets)\n");
  fmt::print("  simulated {:.1f} us, wall {:.2f} s, CPU {:.2f} s, {} events ({:.2f} M/CPU-s), {} packet-hops "
             "({:.2f} M/CPU-s), RSS {:.0f} MiB\n",
             res.makespan.us(), wall, cpu, r.events, r.events / cpu * 1e-6, r.network.packet_hops,
             r.network.packet_hops / cpu * 1e-6, peak_rss_mib());
  const double c1 = cpu_seconds();
  const auto m = run_mixed(t, Bytes::mib(8), {});
  fmt::print("mixed permutation + 32-to-1 incast, 8 MiB each (congested)\n");
  const double cpu1 = cpu_seconds() - c1;
  fmt::print("  simulated {:.1f} us, wall {:.2f} s, CPU {:.2f} s, {} events ({:.2f} M/CPU-s), {} packet-hops "
             "({:.2f} M/CPU-s), credit stall {:.0f} us\n",
             m.makespan.us(), m.wall, cpu1, m.report.events, m.report.events / cpu1 * 1e-6,
             m.report.network.packet_hops, m.report.network.packet_hops / cpu1 * 1e-6,
             m.report.network.credit_stall.us());
  return 0;
}

int coarsening() {
  const auto t = fat_tree(64, 1, 16);
  const auto graph = all_reduce(64, Bytes::mib(64));
  Time exact_ar;
  Mixed exact_mixed;
  fmt::print("| packets/segment | segment | all-reduce error | congested mix: makespan error | worst flow error | packet-hops | wall (both) | speed-up |\n");
  fmt::print("|---|---|---|---|---|---|---|---|\n");
  double wall1 = 0;
  for (const int k : {1, 4, 16, 64, 256}) {
    ns3_modules::Ns3Options o;
    o.packets_per_segment = k;
    const auto t0 = Clock::now();
    ns3_modules::Ns3Report r;
    const auto ar = ns3_modules::run_on_ns3(graph, t, o, nullptr, &r);
    const auto m = run_mixed(t, Bytes::mib(8), o);
    const double wall = since(t0);
    if (k == 1) {
      exact_ar = ar.makespan;
      exact_mixed = m;
      wall1 = wall;
    }
    double worst = 0;
    for (std::size_t i = 0; i < m.done.size(); ++i) {
      worst = std::max(worst, std::abs(m.done[i].seconds() / exact_mixed.done[i].seconds() - 1.0));
    }
    fmt::print("| {} | {} KiB | {:+.3f} % | {:+.3f} % | {:.3f} % | {} | {:.2f} s | {:.1f}x |\n", k, 4 * k,
               100 * (ar.makespan.seconds() / exact_ar.seconds() - 1), 100 * (m.makespan.seconds() / exact_mixed.makespan.seconds() - 1),
               100 * worst, r.network.packet_hops + m.report.network.packet_hops, wall, wall1 / wall);
  }
  return 0;
}

int gpt3(int nodes, std::int64_t batch, int k, ns3_modules::ScaleUpModel scale_up) {
  const auto t0 = Clock::now();
  const int gpus = nodes * 8;
  const auto topo = fat_tree(nodes, 8, 64);
  const auto& model = parallelism::model_preset("gpt3-175b");
  parallelism::Workload w;
  w.micro_batch = 1;
  w.seq_len = 2048;
  w.dtype = node_model::DType::BF16;
  parallelism::ParallelPlan plan;
  plan.tp = 8;
  plan.pp = 16;
  plan.dp = gpus / 128;
  plan.global_batch = batch;
  plan.sequence_parallel = true;
  plan.fused_optimizer = true;
  plan.zero_stage = 1;
  plan.validate(model, w, gpus);
  const node_model::RooflinePredictor predictor(node_model::gpu_preset("H100-SXM"));
  const auto graph = parallelism::plan_training(model, w, plan, predictor);
  fmt::print("GPT-3 175B, {} GPUs (tp 8, pp 16, dp {}), global batch {}: graph built in {:.1f} s\n", gpus, plan.dp, batch,
             since(t0));
  auto t1 = Clock::now();
  engine::DiscreteEventLoop flow_loop;
  engine::FlowNetwork flow_net(topo, flow_loop);
  const auto flow = engine::execute(graph, flow_loop, flow_net);
  fmt::print("  flow backend: iteration {:.3f} s, {} transfers, {:.1f} GB, wall {:.1f} s\n", flow.makespan.seconds(),
             flow.transfers, flow.bytes_sent.as_double() * 1e-9, since(t1));
  if (k <= 0) return 0;
  t1 = Clock::now();
  const double c1 = cpu_seconds();
  ns3_modules::Ns3Options o;
  o.packets_per_segment = k;
  o.scale_up = scale_up;
  ns3_modules::Ns3Report r;
  const auto ib = ns3_modules::run_on_ns3(graph, topo, o, nullptr, &r);
  const double wall = since(t1);
  const double cpu = cpu_seconds() - c1;
  fmt::print("  ns-3 IB, {} KiB segments: iteration {:.3f} s ({:+.2f} % vs flow), wall {:.1f} s, CPU {:.1f} s, {} events "
             "({:.2f} M/CPU-s), {} packet-hops, peak RSS {:.0f} MiB\n",
             4 * k, ib.makespan.seconds(), 100 * (ib.makespan.seconds() / flow.makespan.seconds() - 1), wall, cpu,
             r.events, r.events / cpu * 1e-6, r.network.packet_hops, peak_rss_mib());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "events";
  try {
    if (mode == "events") return events();
    if (mode == "coarsening") return coarsening();
    if (mode == "gpt3" && (argc == 5 || argc == 6)) {
      const std::string su = argc == 6 ? argv[5] : "packets";
      if (su != "packets" && su != "flow") throw std::invalid_argument("the fifth argument is packets or flow");
      return gpt3(std::atoi(argv[2]), std::atoll(argv[3]), std::atoi(argv[4]),
                  su == "flow" ? ns3_modules::ScaleUpModel::Flow : ns3_modules::ScaleUpModel::Packets);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  fmt::print(stderr, "usage: ns3_ib_bench events | coarsening | gpt3 NODES GLOBAL_BATCH PACKETS_PER_SEGMENT [packets|flow]\n");
  return 2;
}
