#include "tessera/study/scenario.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/range/iterator_range.hpp>
#include <cmath>
#include <map>

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
  if (s.fabric == FabricKind::FatTree) return s.fat_tree.tiers;
  return s.fabric == FabricKind::RailOptimized ? s.rail.tiers : 2;
}

namespace {

int hcas_per_node(const Scenario& s) {
  return s.cluster.hcas_per_node > 0 ? s.cluster.hcas_per_node : s.cluster.gpus_per_node;
}

/// HCAs of the whole cluster.
std::int64_t cluster_hcas(const Scenario& s) {
  return static_cast<std::int64_t>(s.cluster.nodes) * hcas_per_node(s);
}

/// Host ports of one leaf of the written fabric (a rail leaf's: one per
/// node of its rail group).
int leaf_host_ports(const Scenario& s) {
  switch (s.fabric) {
    case FabricKind::LeafSpine:
      return s.cluster.hosts_per_leaf;
    case FabricKind::FatTree:
      return topology::host_ports_per_leaf(s.fat_tree);
    case FabricKind::RailOptimized:
      return topology::host_ports_per_leaf(s.rail);
  }
  return 0;
}

}  // namespace

double leaf_oversubscription(const Scenario& s) {
  if (!s.fabric_written) return 0.0;
  // Where one leaf holds every HCA nothing crosses a spine (a rail leaf
  // always sends cross-rail traffic up).
  switch (s.fabric) {
    case FabricKind::LeafSpine:
      return cluster_hcas(s) <= leaf_host_ports(s) ? 0.0 : topology::oversubscription(s.cluster);
    case FabricKind::FatTree:
      return cluster_hcas(s) <= leaf_host_ports(s) ? 0.0 : topology::oversubscription(s.fat_tree);
    case FabricKind::RailOptimized:
      return topology::oversubscription(s.rail);
  }
  return 0.0;
}

double spine_oversubscription(const Scenario& s) {
  if (!s.fabric_written || s.fabric == FabricKind::LeafSpine) return 0.0;
  return s.fabric == FabricKind::FatTree ? topology::spine_oversubscription(s.fat_tree)
                                         : topology::spine_oversubscription(s.rail);
}

double nodes_per_leaf(const Scenario& s) {
  if (!s.fabric_written) return 0.0;
  const int ports = leaf_host_ports(s);
  return s.fabric == FabricKind::RailOptimized ? ports : static_cast<double>(ports) / hcas_per_node(s);
}

namespace {

/// ", 3 nodes per leaf" where the cluster's HCAs fill more than one leaf
/// (helper 173: at a fixed radix a 2:1 fat-tree holds more nodes per leaf
/// than a 1:1 one and can come out faster, which the line did not show).
std::string leaf_size_detail(const Scenario& s) {
  const int ports = leaf_host_ports(s);
  if (s.fabric == FabricKind::RailOptimized) {  // a rail group: a node per port
    return s.cluster.nodes > ports ? fmt::format(", rail groups of {} node{}", ports, ports == 1 ? "" : "s")
                                   : "";
  }
  const int hca = hcas_per_node(s);
  if (cluster_hcas(s) <= ports) return {};  // one leaf holds them all
  if (ports % hca == 0) return fmt::format(", {} node{} per leaf", ports / hca, ports == hca ? "" : "s");
  if (hca % ports == 0) return fmt::format(", a node across {} leaves", hca / ports);
  return fmt::format(", {:.3g} nodes per leaf", nodes_per_leaf(s));
}

}  // namespace

std::string fabric_detail(const Scenario& s) {
  if (!s.fabric_written) return {};
  std::string out;
  if (s.fabric != FabricKind::LeafSpine && s.fabric_tiers_auto) {
    if (!s.fabric_tiers_default)
      out += fmt::format(", {} tiers by tiers: auto", fabric_tiers(s));
    else if (fabric_tiers(s) == 3)
      out += ", 3 tiers";  // tiers left out (auto): said where the cluster needed the third
  }
  // Where the leaves' up-links carry less than their hosts can send, say so:
  // it decides what crosses the leaves (docs/topology.md).
  if (const double r = leaf_oversubscription(s); r > 1.0 + 1e-9)
    out += fmt::format(", {:.3g}:1 at the leaves", r);
  // And where the spines' core links carry less than their leaf links
  // (core_bandwidth below spine_bandwidth): what crosses pods shares them.
  if (const double r = spine_oversubscription(s); r > 1.0 + 1e-9)
    out += fmt::format(", {:.3g}:1 at the spines", r);
  out += leaf_size_detail(s);
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
        // The first end first (helper 126: the order of a call's arguments
        // is unspecified, and GCC named an unknown second end before an
        // unknown first).
        const topology::VertexId va = t.find_vertex(a);
        act(va, t.find_vertex(b));
      } catch (const InputError& e) {
        throw cable_error(key, a, b, e.what());
      }
    }
  };
  // A GPU's NVLink (to its NVSwitch, or to another GPU in a mesh) does not
  // fail here: traffic inside a node is timed with NCCL's NVLink figures
  // (collectives.nvlink_*), which a detour over the node's NICs would not
  // follow; a GPU that loses an NVLink is drained in practice (helper 101).
  auto refuse_nvlink = [&](topology::VertexId a, topology::VertexId b) {
    using topology::VertexKind;
    const VertexKind ka = t.vertex(a).kind, kb = t.vertex(b).kind;
    const bool gpu_side = ka == VertexKind::Gpu || kb == VertexKind::Gpu;
    const bool nvlink = gpu_side && (ka == VertexKind::NvSwitch || kb == VertexKind::NvSwitch ||
                                     (ka == VertexKind::Gpu && kb == VertexKind::Gpu));
    // (a pair with no cable between them, gpu0-gpu1 on NVSwitch nodes, is
    // the topology's "no cable" error: helper 126, this one sent the user
    // to failures.degraded, which then said so)
    if (nvlink && !t.cable_links(a, b).empty()) {
      throw InputError(
          "an NVLink cable inside a node cannot fail in this model (its node's traffic is timed with "
          "NCCL's NVLink figures; a GPU that loses an NVLink is drained in practice): give it under "
          "failures.degraded for a slow NVLink");
    }
  };
  apply("links", f.failed, [&](topology::VertexId a, topology::VertexId b) {
    refuse_nvlink(a, b);
    (void)t.fail_cable(a, b);
  });
  apply("degraded", f.degraded,
        [&](topology::VertexId a, topology::VertexId b) { (void)t.degrade_cable(a, b, f.degraded_rate); });
  // Cables are duplex and GPUs never forward: every GPU reaches every other
  // exactly when GPU 0 reaches every GPU (so every other node's GPUs are on
  // GPU 0's side of the fabric) and each GPU of GPU 0's node reaches a GPU
  // of another node (its own cable to the fabric is up: GPU 0 reaches its
  // node's GPUs over NVLink whatever their cables).
  auto check_reachable = [&](const topology::Topology& topo,
                             const std::vector<std::pair<std::string, std::string>>& down) {
    const int per_node = s.cluster.gpus_per_node;
    // The GPUs whose only way into the fabric is down: a GPU's own cable to
    // its leaf, or its shared adapter's (every GPU behind that HCA), with
    // the cable that cut it off.
    std::map<int, std::string> cut_off;
    for (const auto& [na, nb] : down) {
      const topology::VertexId va = topo.find_vertex(na), vb = topo.find_vertex(nb);
      for (const auto& [v, other] : {std::pair{va, vb}, std::pair{vb, va}}) {
        const topology::VertexKind k = topo.vertex(v).kind, ko = topo.vertex(other).kind;
        const bool fabric = ko == topology::VertexKind::Leaf || ko == topology::VertexKind::Spine ||
                            ko == topology::VertexKind::Core;
        const std::string cable = fmt::format("{}-{}", na, nb);
        if (k == topology::VertexKind::Gpu && fabric) {
          cut_off.emplace(topo.vertex(v).index,
                          fmt::format("its only cable to the fabric, {}, is down", cable));
        } else if (k == topology::VertexKind::Gpu && ko == topology::VertexKind::Hca) {
          cut_off.emplace(topo.vertex(v).index,
                          fmt::format("its only link to its network adapter, {}, is down", cable));
        } else if (k == topology::VertexKind::Hca && fabric) {
          for (const auto e : boost::make_iterator_range(boost::out_edges(v, topo.graph()))) {
            const topology::VertexId g = boost::target(e, topo.graph());
            if (topo.vertex(g).kind != topology::VertexKind::Gpu) continue;
            cut_off.emplace(topo.vertex(g).index,
                            fmt::format("its network adapter {} lost its only cable to the fabric, {}",
                                        topo.vertex(v).name, cable));
          }
        }
      }
    }
    auto check = [&](int a, int b) {
      try {
        (void)topo.route(a, b);
      } catch (const InputError&) {
        // A GPU cut off from the fabric among them: named first, with the
        // cable, and that nothing routes around it.
        const auto cut = cut_off.count(b) != 0U ? cut_off.find(b) : cut_off.find(a);
        const int from = cut != cut_off.end() ? cut->first : b;
        const int to = from == b ? a : b;
        const std::string why = fmt::format(
            "with {} {} down GPU {} cannot reach GPU {} (no route left{})",
            down.size() == 1 ? "this" : "these",
            down.size() == 1 ? "1 cable" : fmt::format("{} cables", down.size()), from, to,
            cut != cut_off.end() ? fmt::format("; GPU {}: {}, and NCCL's detour through a neighbour's "
                                               "NIC over NVLink, PXN, is not modelled",
                                               from, cut->second)
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
  if (!f.failed.empty()) check_reachable(t, f.failed);
  // Cables failing during the run (`at:`): their names, and that the fabric
  // once they are all down still connects every GPU.
  if (f.timed.empty()) return t;
  topology::Topology after = t;
  std::vector<std::pair<std::string, std::string>> all_down = f.failed;
  for (const auto& c : f.timed) {
    const char* key = c.fail ? "links" : "degraded";
    try {
      const auto a = after.find_vertex(c.a);
      const auto b = after.find_vertex(c.b);
      // Both throw when there is no such cable (a factor of 1 changes nothing).
      if (c.fail) {
        refuse_nvlink(a, b);
        (void)after.fail_cable(a, b);
        all_down.emplace_back(c.a, c.b);
      } else {
        (void)after.degrade_cable(a, b, 1.0);
      }
    } catch (const InputError& e) {
      throw cable_error(key, c.a, c.b, e.what());
    }
  }
  if (all_down.size() > f.failed.size()) check_reachable(after, all_down);
  return t;
}

}  // namespace tessera::study
