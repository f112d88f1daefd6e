#include "tessera/study/scenario.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tessera/node_model/predictors.hpp"
#include "tessera/study/backend.hpp"
#include "tessera/topology/fabrics.hpp"

namespace tessera::study {


Backend parse_backend(const std::string& text) {
  (void)built_in_backends().at(text);  // throws, naming the known ones
  return Backend{text};
}

std::string_view to_string(const Backend& b) { return b.name; }

std::string_view to_string(Ns3Settings::Model m) {
  return m == Ns3Settings::Model::InfiniBand ? "infiniband" : "point-to-point";
}

std::string_view to_string(Ns3Settings::ScaleUp s) {
  return s == Ns3Settings::ScaleUp::Flow ? "flow" : "packets";
}

std::string_view to_string(FabricKind f) {
  switch (f) {
    case FabricKind::LeafSpine: return "leaf-spine";
    case FabricKind::FatTree: return "fat-tree";
    case FabricKind::RailOptimized: return "rail-optimized";
  }
  return "?";
}

std::string_view fabric_name(const Scenario& s) { return s.fabric_written ? to_string(s.fabric) : kNoFabric; }

int fabric_tiers(const Scenario& s) {
  if (!s.fabric_written) return 0;
  return s.fabric == FabricKind::FatTree ? s.fat_tree.tiers : 2;
}

double leaf_oversubscription(const Scenario& s) {
  if (!s.fabric_written) return 0.0;
  const auto& c = s.cluster;
  const std::int64_t hcas =
      static_cast<std::int64_t>(c.nodes) * (c.hcas_per_node > 0 ? c.hcas_per_node : c.gpus_per_node);
  // Where one leaf holds every HCA nothing crosses a spine (a rail leaf
  // always sends cross-rail traffic up).
  switch (s.fabric) {
    case FabricKind::LeafSpine:
      return hcas <= c.hosts_per_leaf ? 0.0 : topology::oversubscription(c);
    case FabricKind::FatTree:
      return hcas <= static_cast<std::int64_t>(topology::host_ports_per_leaf(s.fat_tree))
                 ? 0.0
                 : topology::oversubscription(s.fat_tree);
    case FabricKind::RailOptimized:
      return topology::oversubscription(s.rail);
  }
  return 0.0;
}

std::string fabric_detail(const Scenario& s) {
  if (!s.fabric_written) return {};
  std::string out;
  if (s.fabric == FabricKind::FatTree && s.fat_tree_tiers_auto)
    out += fmt::format(", {} tiers by tiers: auto", fabric_tiers(s));
  // Where the leaves' up-links carry less than their hosts can send, say so:
  // it decides what crosses the leaves (docs/topology.md).
  if (const double r = leaf_oversubscription(s); r > 1.0 + 1e-9)
    out += fmt::format(", {:.3g}:1 at the leaves", r);
  return out;
}

Calibration default_calibration(const node_model::GpuSpec& gpu, node_model::Framework framework) {
  Calibration c;
  // Host overheads: fit on vTrain's single-node Megatron-DeepSpeed runs
  // (tessera validate training --data ../shared/data/vtrain --every 2 --fit:
  // every second of the 1,440 runs, A100-80GB; docs/calibration.md). The
  // per-exchange cost is DeepSpeed's pipeline engine's: Megatron-LM's
  // exchanges (one batched send/recv and a sync) have no measurement here and
  // get none beyond their launch and sync. The per-micro-batch data step
  // (get_batch's sync and host work) exists in both.
  c.host_launch = Time::from_ns(42'200);
  c.host_iteration = Time::zero();
  c.host_microbatch = Time::from_us(6'870);
  c.host_p2p = framework == node_model::Framework::MegatronDeepSpeed ? Time::from_us(680) : Time::zero();
  // NCCL: fitted on the A100 and H100 tables (docs/collectives.md). SM
  // sharing is a documented knob, off by default (no data here measures it).
  c.comm = engine::CommCalibration::nccl(gpu.sms);
  c.comm.sm_slowdown = 0.0;
  return c;
}

node_model::GpuSpec kernel_gpu(const Scenario& s) {
  node_model::GpuSpec g = s.gpu;
  const double d = s.calibration.clock_derate;
  if (d == 1.0) return g;
  g.fp32_peak = FlopRate::per_second(g.fp32_peak.per_second() * d);
  g.tensor_peak = FlopRate::per_second(g.tensor_peak.per_second() * d);
  g.tf32_peak = FlopRate::per_second(g.tf32_peak.per_second() * d);
  g.fp8_peak = FlopRate::per_second(g.fp8_peak.per_second() * d);
  g.fp32_matmul_peak = FlopRate::per_second(g.fp32_matmul_peak.per_second() * d);
  return g;
}

void require_single_job(const Scenario& s, std::string_view command) {
  if (s.jobs.empty()) return;
  throw ScenarioError(fmt::format("{}: jobs: {} runs a single job's plan; a scenario with jobs runs with "
                                  "`tessera run`",
                                  s.file, command));
}

std::unique_ptr<node_model::KernelPredictor> make_scenario_predictor(const Scenario& s) {
  auto base = s.predictor_weights.empty()
                  ? node_model::make_predictor(s.predictor, kernel_gpu(s))
                  : node_model::make_predictor(s.predictor, kernel_gpu(s), s.predictor_weights);
  if (!s.kernel_overrides) return base;
  return std::make_unique<node_model::OverridePredictor>(std::move(base), s.kernel_overrides);
}

namespace {

topology::Topology build_fabric(const Scenario& s) {
  switch (s.fabric) {
    case FabricKind::LeafSpine: return topology::build_leaf_spine(s.cluster);
    case FabricKind::FatTree: return topology::build_fat_tree(s.fat_tree);
    case FabricKind::RailOptimized: return topology::build_rail_optimized(s.rail);
  }
  throw InputError("unknown fabric");
}

}  // namespace

ScenarioError failure_error(const Scenario& s, const char* key, const std::string& a, const std::string& b,
                            const std::string& why) {
  const auto src = s.failures.sources.find(std::minmax(a, b));
  if (src == s.failures.sources.end()) {
    return ScenarioError(fmt::format("{}: failures.{}: {}-{}: {}", s.file, key, a, b, why));
  }
  return ScenarioError(src->second.where, fmt::format("{}: {}-{}: {}", src->second.path, a, b, why),
                       src->second.option);
}

topology::Topology build_topology(const Scenario& s) {
  topology::Topology t = build_fabric(s);
  const auto& f = s.failures;
  auto cable_error = [&](const char* key, const std::string& a, const std::string& b,
                         const std::string& why) { return failure_error(s, key, a, b, why); };
  auto apply = [&](const char* key, const std::vector<std::pair<std::string, std::string>>& cables, auto&& act) {
    for (const auto& [a, b] : cables) {
      try {
        act(t.find_vertex(a), t.find_vertex(b));
      } catch (const InputError& e) {
        throw cable_error(key, a, b, e.what());
      }
    }
  };
  apply("links", f.failed, [&](topology::VertexId a, topology::VertexId b) { (void)t.fail_cable(a, b); });
  apply("degraded", f.degraded,
        [&](topology::VertexId a, topology::VertexId b) { (void)t.degrade_cable(a, b, f.degraded_rate); });
  // Cables are duplex and GPUs never forward: every GPU reaches every other
  // exactly when GPU 0 reaches every GPU (so every other node's GPUs are on
  // GPU 0's side of the fabric) and each GPU of GPU 0's node reaches a GPU
  // of another node (its own cable to the fabric is up: GPU 0 reaches its
  // node's GPUs over NVLink whatever their cables).
  auto check_reachable = [&](const topology::Topology& topo, std::size_t down) {
    const int per_node = s.cluster.gpus_per_node;
    auto check = [&](int a, int b) {
      try {
        (void)topo.route(a, b);
      } catch (const InputError&) {
        // Its own cable among them: say that nothing routes around it.
        const std::string gpu = fmt::format("gpu{}", b);
        const bool own = std::any_of(f.failed.begin(), f.failed.end(),
                                     [&](const auto& c) { return c.first == gpu || c.second == gpu; }) ||
                         std::any_of(f.timed.begin(), f.timed.end(),
                                     [&](const auto& c) { return c.fail && (c.a == gpu || c.b == gpu); });
        const std::string why = fmt::format(
            "with {} {} down GPU {} cannot reach GPU {} (no route left{})", down == 1 ? "this" : "these",
            down == 1 ? "1 cable" : fmt::format("{} cables", down), b, a,
            own ? fmt::format("; GPU {}'s only cable to the fabric is down, "
                              "and NCCL's detour through a neighbour's NIC, PXN, is not modelled",
                              b)
                : "");
        if (!f.links) throw ScenarioError(fmt::format("{}: failures.links: {}", s.file, why));
        throw ScenarioError(f.links->where, fmt::format("{}: {}", f.links->path, why), f.links->option);
      }
    };
    for (int g = 1; g < topo.num_gpus(); ++g) check(0, g);
    if (topo.num_gpus() > per_node) {
      for (int g = 1; g < per_node; ++g) check(per_node, g);
    }
  };
  if (!f.failed.empty()) check_reachable(t, f.failed.size());
  // Cables failing during the run (`at:`): their names, and that the fabric
  // once they are all down still connects every GPU.
  if (f.timed.empty()) return t;
  topology::Topology after = t;
  std::size_t timed_down = 0;
  for (const auto& c : f.timed) {
    const char* key = c.fail ? "links" : "degraded";
    try {
      const auto a = after.find_vertex(c.a);
      const auto b = after.find_vertex(c.b);
      // Both throw when there is no such cable (a factor of 1 changes nothing).
      if (c.fail) {
        (void)after.fail_cable(a, b);
        ++timed_down;
      } else {
        (void)after.degrade_cable(a, b, 1.0);
      }
    } catch (const InputError& e) {
      throw cable_error(key, c.a, c.b, e.what());
    }
  }
  if (timed_down > 0) check_reachable(after, f.failed.size() + timed_down);
  return t;
}

}  // namespace tessera::study
