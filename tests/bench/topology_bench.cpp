// Topology and routing at cluster scale: a 3-tier fat-tree of 64-port
// switches, 30 pods, 3840 nodes x 8 GPUs (30,720 HCAs), with its linear
// forwarding tables. Target: under 10 s and 4 GiB. Also collective expansion
// at scale.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include "tessera/collectives/expand.hpp"
#include "tessera/topology/fabrics.hpp"
#include "tessera/topology/routing.hpp"

using namespace tessera;

namespace {

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

topology::FatTreeSpec big_fat_tree() {
  topology::FatTreeSpec s;
  s.nodes = 3840;
  s.node.gpus = 8;
  s.node.nvlink = {parse_bandwidth("450GB/s"), parse_time("500ns")};
  s.k = 64;
  s.tiers = 3;
  s.pods = 30;  // 30 pods x 32 leaves x 32 HCAs = 30,720
  s.host = {parse_bandwidth("400Gbps"), parse_time("1us")};
  s.leaf_spine = {parse_bandwidth("400Gbps"), parse_time("1us")};
  s.spine_core = {parse_bandwidth("400Gbps"), parse_time("1us")};
  return s;
}

void BM_FatTree3840x8_BuildAndForwardingTables(benchmark::State& state) {
  for (auto _ : state) {
    const auto topo = topology::build_fat_tree(big_fat_tree());
    const auto lft = topology::build_forwarding_tables(topo);
    benchmark::DoNotOptimize(lft.port(0, 1));
    state.counters["hcas"] = topo.num_gpus();
    state.counters["switches"] = static_cast<double>(lft.switches().size());
    state.counters["lft_MiB"] = static_cast<double>(lft.memory_bytes()) / (1024.0 * 1024.0);
  }
  state.counters["peak_rss_MiB"] = peak_rss_mib();
}
BENCHMARK(BM_FatTree3840x8_BuildAndForwardingTables)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_FatTree3840x8_Build(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(topology::build_fat_tree(big_fat_tree()).num_gpus());
}
BENCHMARK(BM_FatTree3840x8_Build)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_FatTree3840x8_Route(benchmark::State& state) {
  const auto topo = topology::build_fat_tree(big_fat_tree());
  (void)topo.route(0, 1);  // builds the routing state once
  int i = 0;
  const int n = topo.num_gpus();
  for (auto _ : state) {
    benchmark::DoNotOptimize(topo.route(i % n, (i * 7919 + 12345) % n).size());
    ++i;
  }
}
BENCHMARK(BM_FatTree3840x8_Route)->Unit(benchmark::kMicrosecond);

void BM_ExpandAllReduce(benchmark::State& state) {
  std::vector<int> ranks(static_cast<std::size_t>(state.range(0)));
  for (std::size_t i = 0; i < ranks.size(); ++i) ranks[i] = static_cast<int>(i);
  collectives::ExpandOptions o;
  o.algorithm = static_cast<collectives::Algorithm>(state.range(1));
  o.ranks_per_node = 8;
  std::size_t n = 0;
  for (auto _ : state) {
    const auto g = collectives::expand(parallelism::CollectiveKind::AllReduce, ranks, Bytes::mib(256), o);
    n = g.transfers.size();
    benchmark::DoNotOptimize(n);
  }
  state.counters["transfers"] = static_cast<double>(n);
}
BENCHMARK(BM_ExpandAllReduce)
    ->ArgsProduct({{64, 1024},
                   {static_cast<int>(collectives::Algorithm::Ring),
                    static_cast<int>(collectives::Algorithm::Tree),
                    static_cast<int>(collectives::Algorithm::HalvingDoubling),
                    static_cast<int>(collectives::Algorithm::Hierarchical)}})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
