#include "tessera/topology/topology.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

#include "router.hpp"
#include "tessera/error.hpp"
#include "tessera/index.hpp"
#include "tessera/topology/fabrics.hpp"

namespace tessera::topology {

std::string_view to_string(VertexKind k) {
  switch (k) {
    case VertexKind::Gpu:
      return "gpu";
    case VertexKind::NvSwitch:
      return "nvswitch";
    case VertexKind::Leaf:
      return "leaf";
    case VertexKind::Spine:
      return "spine";
    case VertexKind::Core:
      return "core";
    case VertexKind::Hca:
      return "hca";
  }
  return "?";
}

std::string_view to_string(LinkTier t) {
  switch (t) {
    case LinkTier::NvLink:
      return "nvlink";
    case LinkTier::Host:
      return "host";
    case LinkTier::LeafSpine:
      return "leaf-spine";
    case LinkTier::SpineCore:
      return "spine-core";
    case LinkTier::Other:
      return "other";
    case LinkTier::Pcie:
      return "pcie";
  }
  return "?";
}

// ---------------------------------------------------------------- Router

namespace detail {

Router::Router(const Topology& t) {
  const Graph& g = t.graph();
  const std::size_t n = t.num_vertices();
  sw_index_.assign(n, -1);
  kind_.resize(n);
  gpu_of_vertex_.assign(n, -1);
  for (std::size_t v = 0; v < n; ++v) {
    kind_[v] = static_cast<std::uint8_t>(g[v].kind);
    if (g[v].kind == VertexKind::Gpu) {
      gpu_of_vertex_[v] = g[v].index;
    } else {
      sw_index_[v] = num_switches_++;
    }
  }
  // Attachment switches: switches with a link into a GPU.
  std::vector<int> att_of_vertex(n, -1);
  gpu_atts_.resize(static_cast<std::size_t>(t.num_gpus()));
  for (int r = 0; r < t.num_gpus(); ++r) {
    const VertexId d = t.gpu(r);
    auto& atts = gpu_atts_[static_cast<std::size_t>(r)];
    for (auto [e, end] = boost::in_edges(d, g); e != end; ++e) {
      const VertexId u = boost::source(*e, g);
      if (sw_index_[u] < 0 || t.failed(g[*e].id)) continue;
      if (att_of_vertex[u] < 0) {
        att_of_vertex[u] = static_cast<int>(att_vertex_.size());
        att_vertex_.push_back(u);
      }
      if (std::find(atts.begin(), atts.end(), att_of_vertex[u]) == atts.end())
        atts.push_back(att_of_vertex[u]);
    }
  }
  // One BFS per attachment over in-edges between switches.
  const auto nsw = static_cast<std::size_t>(num_switches_);
  dist_.assign(att_vertex_.size() * nsw, kInf16);
  std::vector<VertexId> queue;
  queue.reserve(nsw);
  for (std::size_t a = 0; a < att_vertex_.size(); ++a) {
    std::int16_t* dist = dist_.data() + a * nsw;
    queue.clear();
    queue.push_back(att_vertex_[a]);
    dist[sw_index_[att_vertex_[a]]] = 0;
    for (std::size_t head = 0; head < queue.size(); ++head) {
      const VertexId v = queue[head];
      const std::int16_t dv = dist[sw_index_[v]];
      for (auto [e, end] = boost::in_edges(v, g); e != end; ++e) {
        const VertexId u = boost::source(*e, g);
        const int su = sw_index_[u];
        if (su < 0 || dist[su] != kInf16 || t.failed(g[*e].id)) continue;
        if (dv + 1 >= kInf16) {
          throw InputError(
              fmt::format("topology: a switch path of more than {} hops is not supported", kInf16 - 1));
        }
        dist[su] = static_cast<std::int16_t>(dv + 1);
        queue.push_back(u);
      }
    }
  }
  // D-mod-k strides: leaves 1, spines the leaves' up-link count, cores that
  // times the spines' up-link count.
  auto max_up = [&](VertexKind from, VertexKind to) {
    std::int64_t best = 1;
    for (std::size_t v = 0; v < n; ++v) {
      if (g[v].kind != from) continue;
      std::int64_t up = 0;
      for (auto [e, end] = boost::out_edges(v, g); e != end; ++e)
        up += g[boost::target(*e, g)].kind == to ? 1 : 0;
      best = std::max(best, up);
    }
    return best;
  };
  // D-mod-k numbers: GPUs in leaf-major order, by the leaf their own or
  // their shared HCA's cable reaches (failed or not: a subnet's numbering
  // does not follow failures), then by rank; GPUs with no leaf last. GPUs
  // behind one shared HCA share its number, as they share its port (helper
  // 86: numbered one by one, GPUs 0 and 4 of a node of 4 HCAs, behind HCAs
  // 0 and 2, both came down spine 0 of 4 and halved a lone ring).
  std::vector<std::pair<VertexId, int>> by_leaf;
  std::vector<VertexId> port_of(static_cast<std::size_t>(t.num_gpus()));
  by_leaf.reserve(static_cast<std::size_t>(t.num_gpus()));
  for (int r = 0; r < t.num_gpus(); ++r) {
    VertexId leaf = n;
    auto leaf_of = [&](VertexId v) {
      for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
        const VertexId u = boost::target(*e, g);
        if (g[u].kind == VertexKind::Leaf) leaf = std::min(leaf, u);
      }
    };
    const VertexId d = t.gpu(r);
    port_of[static_cast<std::size_t>(r)] = d;
    leaf_of(d);
    for (auto [e, end] = boost::out_edges(d, g); e != end; ++e) {
      const VertexId u = boost::target(*e, g);
      if (g[u].kind == VertexKind::Hca) {
        leaf_of(u);
        port_of[static_cast<std::size_t>(r)] = u;
      }
    }
    by_leaf.emplace_back(leaf, r);
  }
  std::sort(by_leaf.begin(), by_leaf.end());
  position_.assign(by_leaf.size(), 0);
  // (a shared HCA's GPUs are consecutive ranks, so consecutive here)
  std::int64_t number = -1;
  for (std::size_t i = 0; i < by_leaf.size(); ++i) {
    const auto r = static_cast<std::size_t>(by_leaf[i].second);
    if (i == 0 || port_of[r] != port_of[static_cast<std::size_t>(by_leaf[i - 1].second)]) ++number;
    position_[r] = number;
  }
  stride_[static_cast<std::size_t>(VertexKind::Spine)] = max_up(VertexKind::Leaf, VertexKind::Spine);
  stride_[static_cast<std::size_t>(VertexKind::Core)] =
      stride_[static_cast<std::size_t>(VertexKind::Spine)] * max_up(VertexKind::Spine, VertexKind::Core);
}

int Router::switch_dist(VertexId v, int dst) const {
  const int sw = sw_index_[v];
  if (sw < 0) return kInf;
  int best = kInf;
  for (int a : gpu_atts_[static_cast<std::size_t>(dst)]) {
    const int d = att_dist(a, sw);
    if (d != kInf) best = std::min(best, d + 1);
  }
  return best;
}

void Router::candidates(const Topology& t, VertexId v, int dst, std::vector<LinkId>& out) const {
  out.clear();
  const Graph& g = t.graph();
  int best = kInf;
  bool best_in_node = false;
  std::int64_t best_bps = 0;
  for (auto [e, end] = boost::out_edges(v, g); e != end; ++e) {
    if (t.failed(g[*e].id)) continue;
    const VertexId next = boost::target(*e, g);
    const int gpu = gpu_of_vertex_[next];
    const int d = gpu >= 0 ? (gpu == dst ? 0 : kInf) : switch_dist(next, dst);
    if (d == kInf || d > best) continue;
    // Of equally short paths, one inside the node (NVLink) before the
    // fabric whatever their rates, as NCCL sends between GPUs of a node
    // (helper 88: a GPU whose NVLink is slower than its NIC reached its
    // neighbour through the leaf, two hops either way); then the fastest.
    const bool in_node = t.tier(g[*e].id) == LinkTier::NvLink;
    const std::int64_t bps = g[*e].bandwidth.bps();
    if (d < best || in_node > best_in_node || (in_node == best_in_node && bps > best_bps)) {
      out.clear();
      best = d;
      best_in_node = in_node;
      best_bps = bps;
    }
    if (in_node == best_in_node && bps == best_bps) out.push_back(g[*e].id);
  }
}

}  // namespace detail

// -------------------------------------------------------------- Topology

VertexId Topology::add_vertex(VertexKind kind, std::string name, int index) {
  router_.reset();
  const VertexId v = boost::add_vertex(VertexProps{kind, std::move(name), index}, g_);
  if (kind == VertexKind::Gpu) {
    if (index != static_cast<int>(gpus_.size())) {
      throw InputError(
          fmt::format("topology: GPUs must be added in rank order (got {} after {})", index, gpus_.size()));
    }
    gpus_.push_back(v);
  }
  return v;
}

void Topology::add_duplex_link(VertexId a, VertexId b, Bandwidth bw, Time latency) {
  if (bw.bps() <= 0) throw InputError("topology: link bandwidth must be positive");
  if (latency < Time::zero()) throw InputError("topology: link latency must not be negative");
  router_.reset();
  for (auto [u, v] : {std::pair{a, b}, std::pair{b, a}}) {
    const auto id = static_cast<LinkId>(links_.size());
    boost::add_edge(u, v, LinkProps{bw, latency, id}, g_);
    links_.push_back(Link{u, v, bw, latency});
    if (!failed_.empty()) failed_.push_back(false);
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

LinkTier Topology::tier(LinkId id) const {
  const Link& l = link(id);
  VertexKind a = g_[l.src].kind;
  VertexKind b = g_[l.dst].kind;
  if (a > b) std::swap(a, b);
  if (a == VertexKind::Gpu) {
    if (b == VertexKind::Gpu || b == VertexKind::NvSwitch) return LinkTier::NvLink;
    if (b == VertexKind::Hca) return LinkTier::Pcie;
    return LinkTier::Host;
  }
  if (b == VertexKind::Hca) return LinkTier::Host;  // HCA to its leaf
  if (a == VertexKind::Leaf && b == VertexKind::Spine) return LinkTier::LeafSpine;
  if (a == VertexKind::Spine && b == VertexKind::Core) return LinkTier::SpineCore;
  return LinkTier::Other;
}

TierCounts Topology::count_links() const {
  TierCounts c{};
  for (std::size_t i = 0; i < links_.size(); ++i) ++c[static_cast<std::size_t>(tier(static_cast<LinkId>(i)))];
  return c;
}

TierCounts Topology::tier_counts(const Path& p) const {
  TierCounts c{};
  for (LinkId id : p) ++c[static_cast<std::size_t>(tier(id))];
  return c;
}

LinkId Topology::port_link(VertexId v, PortNo port) const {
  PortNo p = 0;
  for (auto [e, end] = boost::out_edges(v, g_); e != end; ++e) {
    if (++p == port) return g_[*e].id;
  }
  throw InputError(fmt::format("topology: {} has no port {} (it has {})", g_[v].name, port, p));
}

PortNo Topology::port_of(LinkId id) const {
  const VertexId v = link(id).src;
  PortNo p = 0;
  for (auto [e, end] = boost::out_edges(v, g_); e != end; ++e) {
    ++p;
    if (g_[*e].id == id) return p;
  }
  return kNoRoute;
}

VertexId Topology::find_vertex(std::string_view name) const {
  // The names that exist, by kind: "gpu0..gpu31, leaf0..leaf3, spine0..spine7".
  struct Range {
    std::string prefix;
    long lo = 0, hi = 0;
    std::size_t count = 0;
  };
  std::vector<Range> ranges;
  for (auto [it, end] = boost::vertices(g_); it != end; ++it) {
    const std::string& n = g_[*it].name;
    if (n == name) return *it;
    const std::size_t digits = n.find_last_not_of("0123456789") + 1;
    const std::string prefix = n.substr(0, digits);
    const long number = digits < n.size() && n.size() - digits < 10 ? std::stol(n.substr(digits)) : -1;
    auto r = std::find_if(ranges.begin(), ranges.end(), [&](const Range& x) { return x.prefix == prefix; });
    if (r == ranges.end() || number < 0) {
      ranges.push_back({number < 0 ? n : prefix, number, number, 1});
    } else {
      r->lo = std::min(r->lo, number);
      r->hi = std::max(r->hi, number);
      ++r->count;
    }
  }
  std::string names;
  for (const Range& r : ranges) {
    names += names.empty() ? "" : ", ";
    if (r.lo < 0) {
      names += r.prefix;
    } else if (r.count == 1) {
      names += fmt::format("{}{}", r.prefix, r.lo);
    } else {
      names += fmt::format("{}{}..{}{}", r.prefix, r.lo, r.prefix, r.hi);
    }
  }
  throw InputError(fmt::format("topology: no vertex named '{}' (the names are {})", name, names));
}

namespace {
template <typename F>
int each_cable_link(const Graph& g, VertexId a, VertexId b, F&& f) {
  int n = 0;
  for (auto [u, v] : {std::pair{a, b}, std::pair{b, a}}) {
    for (auto [e, end] = boost::out_edges(u, g); e != end; ++e) {
      if (boost::target(*e, g) != v) continue;
      f(g[*e].id);
      ++n;
    }
  }
  return n;
}
}  // namespace

int Topology::fail_cable(VertexId a, VertexId b) {
  if (failed_.empty()) failed_.assign(links_.size(), false);
  const int n = each_cable_link(g_, a, b, [&](LinkId id) { failed_[static_cast<std::size_t>(id)] = true; });
  if (n == 0) {
    throw InputError(fmt::format("topology: no cable between {} and {}", g_[a].name, g_[b].name));
  }
  router_.reset();
  return n;
}

int Topology::degrade_cable(VertexId a, VertexId b, double factor) {
  if (!(factor > 0.0 && factor <= 1.0)) {
    throw InputError(fmt::format("topology: a degraded link carries a factor in (0, 1] of its rate (got {})", factor));
  }
  const int n = each_cable_link(g_, a, b, [&](LinkId id) {
    Link& l = links_[static_cast<std::size_t>(id)];
    l.bandwidth = degraded_rate(l.bandwidth, factor);
  });
  if (n == 0) {
    throw InputError(fmt::format("topology: no cable between {} and {}", g_[a].name, g_[b].name));
  }
  return n;
}

std::vector<LinkId> Topology::cable_links(VertexId a, VertexId b) const {
  std::vector<LinkId> out;
  (void)each_cable_link(g_, a, b, [&](LinkId id) { out.push_back(id); });
  std::sort(out.begin(), out.end());
  return out;
}

Bandwidth degraded_rate(Bandwidth rate, double factor) {
  const auto bps = static_cast<std::int64_t>(std::llround(static_cast<double>(rate.bps()) * factor));
  return Bandwidth::bits_per_second(std::max<std::int64_t>(1, bps));
}

int Topology::failed_links() const {
  return static_cast<int>(std::count(failed_.begin(), failed_.end(), true));
}

const detail::Router& Topology::router() const {
  if (!router_) router_ = std::make_shared<const detail::Router>(*this);
  return *router_;
}

namespace {

[[noreturn]] void no_route(int src, int dst) {
  throw InputError(fmt::format("topology: no route from GPU {} to GPU {}", src, dst));
}

/// The path from GPU `src` to GPU `dst` that `pick(candidates, at)` takes
/// hop by hop among each switch's equal-cost next hops (route() and
/// route_least_loaded() differ only in the pick).
template <typename Pick>
Path walk(const Topology& t, const detail::Router& r, int src, int dst, Pick&& pick) {
  const VertexId d = t.gpu(dst);
  Path path;
  std::vector<LinkId> cand;
  for (VertexId at = t.gpu(src); at != d; at = t.link(path.back()).dst) {
    r.candidates(t, at, dst, cand);
    if (cand.empty() || path.size() > t.num_vertices()) no_route(src, dst);
    path.push_back(pick(cand, at));
  }
  return path;
}

}  // namespace

Path Topology::route(int src, int dst) const {
  const detail::Router& r = router();
  return walk(*this, r, src, dst,
              [&](const std::vector<LinkId>& cand, VertexId at) { return r.choose(cand, at, dst); });
}

Path Topology::route_least_loaded(int src, int dst, const std::function<int(LinkId)>& load) const {
  const detail::Router& r = router();
  const VertexId d = gpu(dst);
  // The least loaded equal-cost path from each vertex on to dst, memoised:
  // its bottleneck (the most loaded link), then its total load (links every
  // choice shares, such as the destination's own, add alike). A switch's
  // choice then looks past its own up-links to the spine's one link down
  // to the destination's leaf, which a choice of the up-link alone would
  // crowd. Equal-cost next hops each come nearer to dst: no cycle.
  using Score = std::pair<int, int>;  // (most loaded link, sum of loads)
  const auto via = [](int l, Score rest) { return Score{std::max(l, rest.first), l + rest.second}; };
  std::unordered_map<VertexId, Score> best;
  const auto rest_of = [&](auto&& self, VertexId at) -> Score {
    if (at == d) return {0, 0};
    if (const auto it = best.find(at); it != best.end()) return it->second;
    std::vector<LinkId> here;
    r.candidates(*this, at, dst, here);
    if (here.empty()) no_route(src, dst);
    Score least{std::numeric_limits<int>::max(), std::numeric_limits<int>::max()};
    for (LinkId l : here) least = std::min(least, via(load(l), self(self, link(l).dst)));
    best.emplace(at, least);
    return least;
  };
  const auto through = [&](LinkId l) { return via(load(l), rest_of(rest_of, link(l).dst)); };
  return walk(*this, r, src, dst, [&](const std::vector<LinkId>& cand, VertexId at) {
    LinkId chosen = r.choose(cand, at, dst);
    if (cand.size() == 1) return chosen;
    Score least = through(chosen);
    for (LinkId l : cand) {  // port order: the first of the least, unless D-mod-k's is one
      if (const Score x = through(l); x < least) {
        least = x;
        chosen = l;
      }
    }
    return chosen;
  });
}

std::vector<Path> Topology::ecmp_paths(int src, int dst, std::size_t limit) const {
  const VertexId s = gpu(src);
  const VertexId d = gpu(dst);
  std::vector<Path> out;
  if (s == d) return out;
  const detail::Router& r = router();
  Path current;
  // Depth-first over candidate next hops (in port order).
  auto walk = [&](auto&& self, VertexId at) -> void {
    if (out.size() >= limit) return;
    if (at == d) {
      out.push_back(current);
      return;
    }
    std::vector<LinkId> cand;
    r.candidates(*this, at, dst, cand);
    for (LinkId l : cand) {
      current.push_back(l);
      self(self, links_[static_cast<std::size_t>(l)].dst);
      current.pop_back();
    }
  };
  walk(walk, s);
  if (out.empty()) throw InputError(fmt::format("topology: no route from GPU {} to GPU {}", src, dst));
  return out;
}

std::uint64_t Topology::count_ecmp_paths(int src, int dst) const {
  const VertexId s = gpu(src);
  const VertexId d = gpu(dst);
  if (s == d) return 1;
  const detail::Router& r = router();
  std::map<VertexId, std::uint64_t> memo;
  auto count = [&](auto&& self, VertexId at) -> std::uint64_t {
    if (at == d) return 1;
    if (auto it = memo.find(at); it != memo.end()) return it->second;
    std::vector<LinkId> cand;
    r.candidates(*this, at, dst, cand);
    std::uint64_t total = 0;
    for (LinkId l : cand) total += self(self, links_[static_cast<std::size_t>(l)].dst);
    memo[at] = total;
    return total;
  };
  return count(count, s);
}

Time Topology::latency(const Path& p) const {
  Time total;
  for (LinkId id : p) total += link(id).latency;
  return total;
}

// ------------------------------------------------------------ leaf-spine

std::string built_links_memory(std::int64_t directed_links) {
  if (directed_links < 0 || directed_links > std::numeric_limits<std::int64_t>::max() / kBytesPerBuiltLink) {
    return "more than 8 EiB";
  }
  return fmt::format("about {:.1f} GiB",
                     static_cast<double>(directed_links * kBytesPerBuiltLink) / (1 << 30));
}

void check_size(const LeafSpineSpec& spec) {
  __extension__ using Int128 = __int128;
  const Int128 gpus = static_cast<Int128>(spec.nodes) * spec.gpus_per_node;
  const bool shared = spec.hcas_per_node > 0 && spec.hcas_per_node < spec.gpus_per_node;
  const Int128 hosts = shared ? static_cast<Int128>(spec.nodes) * spec.hcas_per_node : gpus;
  const Int128 leaves =
      spec.hosts_per_leaf <= 0 ? 0 : (hosts + spec.hosts_per_leaf - 1) / spec.hosts_per_leaf;
  // NVSwitch links, PCIe links to shared HCAs, HCA-leaf links, leaf-spine links.
  const Int128 duplex = gpus + (shared ? gpus : 0) + hosts + (leaves > 1 ? leaves * spec.spines : 0);
  if (2 * duplex > kMaxBuiltLinks) {
    throw InputError(
        fmt::format("{} leaves x {} spines and {} GPUs need more than {} directed links ({}), the "
                    "most that are built: fewer cluster.nodes or cluster.fabric.spines",
                    static_cast<std::int64_t>(leaves), spec.spines, static_cast<std::int64_t>(gpus),
                    kMaxBuiltLinks, built_links_memory(kMaxBuiltLinks)));
  }
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

  check_size(spec);  // from here on every count below fits in int
  Topology t;
  const int gpus = spec.nodes * spec.gpus_per_node;
  std::vector<VertexId> gpu_v;
  gpu_v.reserve(static_cast<std::size_t>(gpus));
  for (int r = 0; r < gpus; ++r) gpu_v.push_back(t.add_vertex(VertexKind::Gpu, fmt::format("gpu{}", r), r));
  for (int n = 0; n < spec.nodes; ++n) {
    const VertexId sw = t.add_vertex(VertexKind::NvSwitch, fmt::format("nvswitch{}", n), n);
    for (int i = 0; i < spec.gpus_per_node; ++i) {
      t.add_duplex_link(gpu_v[flat_index(n, spec.gpus_per_node, i)], sw, spec.nvlink_bandwidth,
                        spec.nvlink_latency);
    }
  }
  NodeSpec node;
  node.gpus = spec.gpus_per_node;
  node.nvlink = {spec.nvlink_bandwidth, spec.nvlink_latency};
  node.hcas = spec.hcas_per_node;
  node.pcie = {spec.pcie_bandwidth, spec.pcie_latency};
  const std::vector<VertexId> host_v = add_hcas(t, gpu_v, spec.nodes, node);
  const auto hosts = static_cast<int>(host_v.size());
  // (in 64 bits: hosts + hosts_per_leaf - 1 can pass INT_MAX)
  const auto leaves =
      static_cast<int>((static_cast<std::int64_t>(hosts) + spec.hosts_per_leaf - 1) / spec.hosts_per_leaf);
  std::vector<VertexId> leaf_v;
  leaf_v.reserve(static_cast<std::size_t>(leaves));
  for (int l = 0; l < leaves; ++l)
    leaf_v.push_back(t.add_vertex(VertexKind::Leaf, fmt::format("leaf{}", l), l));
  for (int h = 0; h < hosts; ++h) {
    t.add_duplex_link(host_v[static_cast<std::size_t>(h)], leaf_v[static_cast<std::size_t>(h / spec.hosts_per_leaf)],
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

double oversubscription(const LeafSpineSpec& spec) {
  const double down = static_cast<double>(spec.hosts_per_leaf) * spec.nic_bandwidth.bytes_per_second();
  const double up = static_cast<double>(spec.spines) * spec.spine_bandwidth.bytes_per_second();
  return up > 0 ? down / up : 0.0;
}

}  // namespace tessera::topology
