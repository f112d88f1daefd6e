#include "tessera/study/routing_check.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "tessera/collectives/expand.hpp"
#include "tessera/parallelism/plan.hpp"

namespace tessera::study {

namespace {

/// The all-reduce the check lays out: a gradient bucket's size, large enough
/// that Auto takes the ring where a bucket's all-reduce would.
constexpr Bytes kBucket = Bytes::mib(256);

/// Switch tiers bottom up: a link is an up-link when it climbs.
int level(topology::VertexKind k) {
  switch (k) {
    case topology::VertexKind::Leaf:
      return 1;
    case topology::VertexKind::Spine:
      return 2;
    case topology::VertexKind::Core:
      return 3;
    default:
      return 0;
  }
}

bool fabric_tier(topology::LinkTier t) {
  return t == topology::LinkTier::LeafSpine || t == topology::LinkTier::SpineCore;
}

/// Whether the check has anything to look at: rings between nodes over a
/// fabric with static routes, on a cluster it checks.
bool checked(const Scenario& s) {
  if (!s.fabric_written || s.cluster.nodes <= 1 || s.plan.dp <= 1 || s.gpus() > kMostGpusChecked)
    return false;
  // One leaf holding every node: nothing crosses a spine.
  if (s.fabric != FabricKind::RailOptimized && nodes_per_leaf(s) >= s.cluster.nodes) return false;
  return !(s.backend.name == "ns3" ? s.ns3.adaptive_routing : s.fabric_adaptive_routing);
}

}  // namespace

std::optional<SharedFabricLink> data_parallel_link_sharing(const Scenario& s,
                                                           const topology::Topology& topo) {
  const parallelism::ParallelPlan& plan = s.plan;
  if (!checked(s)) return std::nullopt;
  const int rpn = s.cluster.gpus_per_node;
  collectives::ExpandOptions opts = s.collectives;
  opts.granularity = collectives::Granularity::Flows;
  opts.chunks = 1;
  if (opts.ranks_per_node == 0) opts.ranks_per_node = rpn;
  // Every data-parallel group's ring connections (a gradient bucket's
  // all-reduce: large enough that Auto takes the ring, as for a bucket),
  // their fabric links by pipeline stage.
  std::vector<std::vector<topology::LinkId>> stage_links(static_cast<std::size_t>(plan.pp));
  for (int pp = 0; pp < plan.pp; ++pp) {
    for (int tp = 0; tp < plan.tp; ++tp) {
      std::vector<int> ranks;
      ranks.reserve(static_cast<std::size_t>(plan.dp));
      for (int d = 0; d < plan.dp; ++d) ranks.push_back(parallelism::rank_of(plan, {tp, d, pp}));
      // Rings only (the hierarchical all-reduce's between nodes too): their
      // connections all carry at once; a tree's or halving-doubling's take
      // turns, and so may share a link at no cost.
      const auto kind = parallelism::CollectiveKind::AllReduce;
      const collectives::Algorithm a = collectives::resolve_algorithm(kind, ranks, kBucket, opts);
      if (a != collectives::Algorithm::Ring && a != collectives::Algorithm::Hierarchical) return std::nullopt;
      const collectives::TransferGraph g = collectives::expand(kind, ranks, kBucket, opts);
      for (const collectives::Transfer& t : g.transfers) {
        if (t.src / rpn == t.dst / rpn) continue;  // inside a node
        for (topology::LinkId l : topo.route(t.src, t.dst)) {
          if (fabric_tier(topo.tier(l))) stage_links[static_cast<std::size_t>(pp)].push_back(l);
        }
      }
    }
  }
  // Per switch and direction: its links in service.
  std::map<std::pair<topology::VertexId, bool>, int> side_links;  // (switch, up) -> links
  const auto side_of = [&](topology::LinkId l) {
    const topology::Link& k = topo.link(l);
    const bool up = level(topo.vertex(k.dst).kind) > level(topo.vertex(k.src).kind);
    return std::make_pair(up ? k.src : k.dst, up);
  };
  for (std::size_t i = 0; i < topo.links().size(); ++i) {
    const auto l = static_cast<topology::LinkId>(i);
    if (fabric_tier(topo.tier(l)) && !topo.failed(l)) ++side_links[side_of(l)];
  }
  // The rings of neighbouring stages together: their reductions follow each
  // other by one micro-batch's backward, so they are the ones that overlap
  // (stages far apart reduce at different times: counted together they
  // warned of links the run never shared).
  std::optional<SharedFabricLink> worst;
  double worst_excess = 1.0;
  std::vector<int> flows_on(topo.links().size(), 0);
  const int windows = std::max(1, plan.pp - 1);
  for (int w = 0; w < windows; ++w) {
    std::vector<topology::LinkId> used;
    for (int st = w; st < std::min(plan.pp, w + 2); ++st) {
      for (topology::LinkId l : stage_links[static_cast<std::size_t>(st)]) {
        if (flows_on[static_cast<std::size_t>(l)]++ == 0) used.push_back(l);
      }
    }
    std::map<std::pair<topology::VertexId, bool>, int> side_flows;
    for (topology::LinkId l : used) side_flows[side_of(l)] += flows_on[static_cast<std::size_t>(l)];
    std::sort(used.begin(), used.end());  // ties by link id
    for (topology::LinkId l : used) {
      const int flows = flows_on[static_cast<std::size_t>(l)];
      if (flows < 2) continue;
      const auto key = side_of(l);
      const int links = side_links.at(key);
      const int needed = (side_flows.at(key) + links - 1) / links;
      const double excess = static_cast<double>(flows) / needed;
      if (excess <= worst_excess) continue;
      worst_excess = excess;
      const topology::Link& k = topo.link(l);
      worst = SharedFabricLink{flows,
                               needed,
                               links,
                               topo.vertex(key.first).name,
                               fmt::format("{} -> {}", topo.vertex(k.src).name, topo.vertex(k.dst).name),
                               key.second};
    }
    for (topology::LinkId l : used) flows_on[static_cast<std::size_t>(l)] = 0;
  }
  return worst;
}

std::string link_sharing_warning(const std::optional<SharedFabricLink>& shared, const Scenario& s) {
  if (!shared) return {};
  const SharedFabricLink& w = *shared;
  const int per_stage = s.plan.dp * s.plan.tp;
  const auto leaf_gpus = static_cast<long long>(std::llround(nodes_per_leaf(s) * s.cluster.gpus_per_node));
  return fmt::format(
      "static destination-mod-k routing puts {} of the data-parallel rings' flows on one link ({}) where "
      "{}'s {} {} could carry them {} per link: where the stages' gradient reductions overlap, their steps "
      "between nodes run at up to 1/{} of the rate (as a subnet manager's static routes would; "
      "docs/topology.md, Limitations); pipeline stages on whole {} (dp x tp, {} GPUs here, a multiple or a "
      "divisor of the {} GPUs of {}), or adaptive routing (cluster.fabric.routing: adaptive), avoid it",
      w.flows, w.link, w.switch_name, w.links, w.up ? "up-links" : "down-links", w.needed,
      (w.flows + w.needed - 1) / w.needed, s.fabric == FabricKind::RailOptimized ? "rail groups" : "leaves",
      per_stage, leaf_gpus,
      s.fabric == FabricKind::RailOptimized ? "a rail group's nodes" : "a leaf's nodes");
}

std::string crowded_routes_warning(const Scenario& s) {
  if (!checked(s)) return {};  // (building the fabric is most of the cost)
  try {
    return link_sharing_warning(data_parallel_link_sharing(s, build_topology(s)), s);
  } catch (const Error&) {
    return {};  // a fabric that cannot be built: the run that builds it says why
  }
}

}  // namespace tessera::study
