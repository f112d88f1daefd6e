#include "tessera/topology/topology.hpp"

#include <deque>
#include <fmt/format.h>
#include <limits>

#include "tessera/error.hpp"

namespace tessera::topology {

std::string_view to_string(VertexKind k) {
  switch (k) {
    case VertexKind::Gpu: return "gpu";
    case VertexKind::NvSwitch: return "nvswitch";
    case VertexKind::Leaf: return "leaf";
    case VertexKind::Spine: return "spine";
  }
  return "?";
}

VertexId Topology::add_vertex(VertexKind kind, std::string name, int index) {
  const VertexId v = boost::add_vertex(VertexProps{kind, std::move(name), index}, g_);
  if (kind == VertexKind::Gpu) {
    if (index != static_cast<int>(gpus_.size())) {
      throw InputError(fmt::format("topology: GPUs must be added in rank order (got {} after {})",
                                   index, gpus_.size()));
    }
    gpus_.push_back(v);
  }
  return v;
}

void Topology::add_duplex_link(VertexId a, VertexId b, Bandwidth bw, Time latency) {
  if (bw.bps() <= 0) throw InputError("topology: link bandwidth must be positive");
  if (latency < Time::zero()) throw InputError("topology: link latency must not be negative");
  for (auto [u, v] : {std::pair{a, b}, std::pair{b, a}}) {
    const auto id = static_cast<LinkId>(links_.size());
    boost::add_edge(u, v, LinkProps{bw, latency, id}, g_);
    links_.push_back(Link{u, v, bw, latency});
  }
}

VertexId Topology::gpu(int rank) const {
  if (rank < 0 || rank >= num_gpus()) {
    throw InputError(fmt::format("topology: GPU rank {} outside 0..{}", rank, num_gpus() - 1));
  }
  return gpus_[static_cast<std::size_t>(rank)];
}

int Topology::count(VertexKind kind) const {
  int n = 0;
  for (auto [it, end] = boost::vertices(g_); it != end; ++it) n += g_[*it].kind == kind ? 1 : 0;
  return n;
}

Path Topology::route(int src, int dst) const {
  const VertexId s = gpu(src);
  const VertexId d = gpu(dst);
  if (s == d) return {};
  // Hop distance of every vertex to the destination (BFS over in-edges).
  constexpr int kInf = std::numeric_limits<int>::max();
  std::vector<int> dist(num_vertices(), kInf);
  dist[d] = 0;
  std::deque<VertexId> queue{d};
  while (!queue.empty()) {
    const VertexId v = queue.front();
    queue.pop_front();
    for (auto [e, end] = boost::in_edges(v, g_); e != end; ++e) {
      const VertexId u = boost::source(*e, g_);
      // GPUs do not forward traffic for others.
      if (dist[u] != kInf || (g_[u].kind == VertexKind::Gpu && u != s)) continue;
      dist[u] = dist[v] + 1;
      queue.push_back(u);
    }
  }
  if (dist[s] == kInf) {
    throw InputError(fmt::format("topology: no route from GPU {} to GPU {}", src, dst));
  }
  Path path;
  VertexId at = s;
  while (at != d) {
    // Among next hops on a shortest path keep the fastest links (NVLink
    // before the NIC inside a node), then let the destination pick (D-mod-k).
    std::vector<LinkId> candidates;
    std::int64_t best_bps = 0;
    for (auto [e, end] = boost::out_edges(at, g_); e != end; ++e) {
      const VertexId next = boost::target(*e, g_);
      if (dist[next] != dist[at] - 1) continue;
      const std::int64_t bps = g_[*e].bandwidth.bps();
      if (bps > best_bps) {
        best_bps = bps;
        candidates.clear();
      }
      if (bps == best_bps) candidates.push_back(g_[*e].id);
    }
    const LinkId chosen = candidates[static_cast<std::size_t>(dst) % candidates.size()];
    path.push_back(chosen);
    at = links_[static_cast<std::size_t>(chosen)].dst;
  }
  return path;
}

Time Topology::latency(const Path& p) const {
  Time total;
  for (LinkId id : p) total += link(id).latency;
  return total;
}

Topology build_leaf_spine(const LeafSpineSpec& spec) {
  auto positive = [](std::int64_t v, std::string_view key) {
    if (v <= 0) throw InputError(fmt::format("{} must be positive (got {})", key, v));
  };
  positive(spec.nodes, "cluster.nodes");
  positive(spec.gpus_per_node, "cluster.gpus_per_node");
  positive(spec.hosts_per_leaf, "cluster.fabric.hosts_per_leaf");
  positive(spec.spines, "cluster.fabric.spines");
  positive(spec.nvlink_bandwidth.bps(), "cluster.nvlink_bandwidth");
  positive(spec.nic_bandwidth.bps(), "cluster.nic_bandwidth");
  positive(spec.spine_bandwidth.bps(), "cluster.fabric.spine_bandwidth");

  Topology t;
  const int gpus = spec.nodes * spec.gpus_per_node;
  const int leaves = (gpus + spec.hosts_per_leaf - 1) / spec.hosts_per_leaf;
  std::vector<VertexId> gpu_v;
  for (int r = 0; r < gpus; ++r) gpu_v.push_back(t.add_vertex(VertexKind::Gpu, fmt::format("gpu{}", r), r));
  for (int n = 0; n < spec.nodes; ++n) {
    const VertexId sw = t.add_vertex(VertexKind::NvSwitch, fmt::format("nvswitch{}", n), n);
    for (int i = 0; i < spec.gpus_per_node; ++i) {
      t.add_duplex_link(gpu_v[static_cast<std::size_t>(n * spec.gpus_per_node + i)], sw,
                        spec.nvlink_bandwidth, spec.nvlink_latency);
    }
  }
  std::vector<VertexId> leaf_v;
  for (int l = 0; l < leaves; ++l) leaf_v.push_back(t.add_vertex(VertexKind::Leaf, fmt::format("leaf{}", l), l));
  for (int r = 0; r < gpus; ++r) {
    t.add_duplex_link(gpu_v[static_cast<std::size_t>(r)], leaf_v[static_cast<std::size_t>(r / spec.hosts_per_leaf)],
                      spec.nic_bandwidth, spec.nic_latency);
  }
  // A single leaf needs no spine layer.
  if (leaves > 1) {
    for (int s = 0; s < spec.spines; ++s) {
      const VertexId sp = t.add_vertex(VertexKind::Spine, fmt::format("spine{}", s), s);
      for (VertexId l : leaf_v) t.add_duplex_link(l, sp, spec.spine_bandwidth, spec.spine_latency);
    }
  }
  return t;
}

}  // namespace tessera::topology
