#include "tessera/topology/routing.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <map>
#include <vector>

#include "router.hpp"
#include "tessera/error.hpp"

namespace tessera::topology {

namespace {
bool is_fabric_switch(VertexKind k) {
  return k == VertexKind::Leaf || k == VertexKind::Spine || k == VertexKind::Core;
}
}  // namespace

ForwardingTables::ForwardingTables(std::vector<VertexId> switches, int num_lids, std::vector<PortNo> ports)
    : switches_(std::move(switches)), num_lids_(num_lids), ports_(std::move(ports)) {
  VertexId top = 0;
  for (VertexId v : switches_) top = std::max(top, v + 1);
  index_of_vertex_.assign(top, -1);
  for (std::size_t i = 0; i < switches_.size(); ++i) index_of_vertex_[switches_[i]] = static_cast<int>(i);
}

int ForwardingTables::switch_index(VertexId v) const {
  return v < index_of_vertex_.size() ? index_of_vertex_[v] : -1;
}

std::span<const PortNo> ForwardingTables::table(std::size_t switch_index) const {
  return {ports_.data() + switch_index * static_cast<std::size_t>(num_lids_),
          static_cast<std::size_t>(num_lids_)};
}

PortNo ForwardingTables::port(std::size_t switch_index, int lid) const {
  if (switch_index >= switches_.size() || lid < 0 || lid >= num_lids_) return kNoRoute;
  return ports_[switch_index * static_cast<std::size_t>(num_lids_) + static_cast<std::size_t>(lid)];
}

std::size_t ForwardingTables::memory_bytes() const {
  return ports_.capacity() * sizeof(PortNo) + switches_.capacity() * sizeof(VertexId) +
         index_of_vertex_.capacity() * sizeof(int);
}

ForwardingTables build_forwarding_tables(const Topology& topo) {
  const detail::Router& r = topo.router();
  const Graph& g = topo.graph();
  std::vector<VertexId> switches;
  for (VertexId v = 0; v < topo.num_vertices(); ++v) {
    if (is_fabric_switch(g[v].kind)) switches.push_back(v);
  }
  const int ngpu = topo.num_gpus();
  const int num_lids = ngpu + 1;
  const auto row = static_cast<std::size_t>(num_lids);
  std::vector<PortNo> ports(switches.size() * row, kNoRoute);

  // Output port of every link at its source.
  std::vector<PortNo> port_of_link(topo.links().size(), kNoRoute);
  for (VertexId v = 0; v < topo.num_vertices(); ++v) {
    // Ports are numbered in 16 bits, kNoRoute reserved: a vertex with more
    // would alias ports (and tables would loop), refused instead.
    if (const auto degree = boost::out_degree(v, g); degree >= kNoRoute) {
      throw InputError(
          fmt::format("forwarding tables: {} has {} ports; a switch's ports are numbered in 16 bits (at most "
                      "{}): split the "
                      "fabric over more switches (fewer hosts_per_leaf, a smaller fabric.k)",
                      g[v].name, degree, kNoRoute - 1));
    }
    PortNo p = 0;
    for (auto [e, end] = boost::out_edges(v, g); e != end; ++e)
      port_of_link[static_cast<std::size_t>(g[*e].id)] = ++p;
  }

  // Attachments reachable from the fabric switches decide a destination's
  // distances there; destinations with the same set share candidate lists.
  std::vector<int> sw_of(switches.size());
  for (std::size_t i = 0; i < switches.size(); ++i) sw_of[i] = r.switch_index(switches[i]);
  std::map<int, bool> reachable;
  auto att_reachable = [&](int a) {
    auto [it, inserted] = reachable.try_emplace(a, false);
    if (inserted) {
      for (int sw : sw_of) {
        if (r.att_dist(a, sw) != detail::Router::kInf) {
          it->second = true;
          break;
        }
      }
    }
    return it->second;
  };
  std::map<std::vector<int>, std::vector<int>> groups;
  for (int d = 0; d < ngpu; ++d) {
    std::vector<int> key;
    for (int a : r.attachments(d)) {
      if (att_reachable(a)) key.push_back(a);
    }
    std::sort(key.begin(), key.end());
    groups[key].push_back(d);
  }

  std::vector<PortNo> cand;
  std::vector<LinkId> cand_links;
  for (const auto& group : groups) {
    // Named references, not structured bindings: lambdas below capture them.
    const std::vector<int>& key = group.first;
    const std::vector<int>& dests = group.second;
    if (key.empty()) continue;
    auto dist = [&](int sw) {
      int best = detail::Router::kInf;
      for (int a : key) best = std::min(best, r.att_dist(a, sw));
      return best;
    };
    for (std::size_t i = 0; i < switches.size(); ++i) {
      const VertexId v = switches[i];
      const int dmin = dist(sw_of[i]);
      if (dmin == detail::Router::kInf) continue;
      PortNo* out = ports.data() + i * row;
      if (dmin == 0) {
        // The switch attaches to these destinations: last hop, per destination.
        for (int d : dests) {
          r.candidates(topo, v, d, cand_links);
          if (!cand_links.empty())
            out[lid_of_rank(d)] = port_of_link[static_cast<std::size_t>(r.choose(cand_links, v, d))];
        }
        continue;
      }
      cand.clear();
      std::int64_t best_bps = 0;
      PortNo p = 0;
      for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
        ++p;
        if (topo.failed(g[*e].id)) continue;
        const int sn = r.switch_index(boost::target(*e, g));
        if (sn < 0 || dist(sn) != dmin - 1) continue;
        const std::int64_t bps = g[*e].bandwidth.bps();
        if (bps > best_bps) {
          best_bps = bps;
          cand.clear();
        }
        if (bps == best_bps) cand.push_back(p);
      }
      if (cand.empty()) continue;
      const std::int64_t stride = r.stride(v);
      const auto c = static_cast<std::int64_t>(cand.size());
      for (int d : dests) out[lid_of_rank(d)] = cand[static_cast<std::size_t>((r.position(d) / stride) % c)];
    }
  }
  return ForwardingTables(std::move(switches), num_lids, std::move(ports));
}

Path follow_tables(const Topology& topo, const ForwardingTables& lft, int src, int dst) {
  const VertexId d = topo.gpu(dst);
  VertexId at = topo.gpu(src);
  const detail::Router& r = topo.router();
  Path path;
  std::vector<LinkId> cand;
  while (at != d) {
    if (path.size() > topo.num_vertices()) {
      throw SimulationError(fmt::format("forwarding tables loop between GPU {} and GPU {}", src, dst));
    }
    LinkId next = -1;
    const int idx = lft.switch_index(at);
    if (idx >= 0) {
      const PortNo p = lft.port(static_cast<std::size_t>(idx), lid_of_rank(dst));
      if (p == kNoRoute) {
        throw SimulationError(fmt::format("{} has no forwarding entry for LID {} (GPU {})",
                                          topo.vertex(at).name, lid_of_rank(dst), dst));
      }
      next = topo.port_link(at, p);
    } else {
      // GPUs and NVSwitches are outside the InfiniBand subnet.
      r.candidates(topo, at, dst, cand);
      if (cand.empty()) throw SimulationError(fmt::format("no route from GPU {} to GPU {}", src, dst));
      next = r.choose(cand, at, dst);
    }
    path.push_back(next);
    at = topo.link(next).dst;
  }
  return path;
}

Bandwidth bisection_bandwidth(const Topology& topo) {
  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
  using FlowGraph = boost::adjacency_list<
      boost::vecS, boost::vecS, boost::directedS, boost::no_property,
      boost::property<boost::edge_capacity_t, std::int64_t,
                      boost::property<boost::edge_residual_capacity_t, std::int64_t,
                                      boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
  const int n = topo.num_gpus();
  if (n < 2) return Bandwidth{};
  const auto nv = topo.num_vertices();
  FlowGraph fg(nv + 2);
  const auto source = static_cast<Traits::vertex_descriptor>(nv);
  const auto sink = static_cast<Traits::vertex_descriptor>(nv + 1);
  auto capacity = boost::get(boost::edge_capacity, fg);
  auto reverse = boost::get(boost::edge_reverse, fg);
  auto add = [&](Traits::vertex_descriptor u, Traits::vertex_descriptor v, std::int64_t c) {
    auto e = boost::add_edge(u, v, fg).first;
    auto re = boost::add_edge(v, u, fg).first;
    capacity[e] = c;
    capacity[re] = 0;
    reverse[e] = re;
    reverse[re] = e;
  };
  // What each vertex can send and receive over the links kept: a GPU's
  // edge from the source (to the sink) gets exactly that, which bounds no
  // cut and keeps every sum push-relabel forms far from int64 overflow (an
  // "unbounded" 2^62 per GPU overflowed the source's excess).
  std::vector<std::int64_t> out_cap(nv, 0), in_cap(nv, 0);
  for (std::size_t i = 0; i < topo.links().size(); ++i) {
    const auto id = static_cast<LinkId>(i);
    // (a failed cable carries nothing, as routing and the tables see it)
    if (topo.tier(id) == LinkTier::NvLink || topo.failed(id)) continue;
    const Link& l = topo.link(id);
    add(l.src, l.dst, l.bandwidth.bps());
    out_cap[static_cast<std::size_t>(l.src)] += l.bandwidth.bps();
    in_cap[static_cast<std::size_t>(l.dst)] += l.bandwidth.bps();
  }
  for (int r = 0; r < n; ++r) {
    const auto g = static_cast<std::size_t>(topo.gpu(r));
    if (r < n / 2) {
      add(source, topo.gpu(r), out_cap[g]);
    } else {
      add(topo.gpu(r), sink, in_cap[g]);
    }
  }
  const std::int64_t flow = boost::push_relabel_max_flow(fg, source, sink);
  return Bandwidth::bits_per_second(flow);
}

}  // namespace tessera::topology
