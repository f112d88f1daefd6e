#pragma once
// Private: the hop-distance state behind Topology::route and the forwarding
// tables. One BFS per "attachment" switch (a switch with a link into some
// GPU), over switches only (GPUs never forward); the distance from a switch
// to GPU d is 1 + the least distance to one of d's attachment switches.
#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "tessera/topology/topology.hpp"

namespace tessera::topology::detail {

class Router {
 public:
  static constexpr int kInf = std::numeric_limits<int>::max() / 4;

  explicit Router(const Topology& t);

  /// Hops from vertex `v` to GPU `dst` (v a switch; kInf if unreachable).
  [[nodiscard]] int switch_dist(VertexId v, int dst) const;
  /// Out-links of `v` (a switch, or the source GPU) on a shortest path to GPU
  /// `dst`, NVLink before the fabric, then fastest only, in port order.
  /// Empty when unreachable.
  void candidates(const Topology& t, VertexId v, int dst, std::vector<LinkId>& out) const;
  /// D-mod-k pick among `c` (non-empty) at vertex `v`.
  [[nodiscard]] LinkId choose(const std::vector<LinkId>& c, VertexId v, int dst) const {
    const auto k = static_cast<std::int64_t>(c.size());
    return c[static_cast<std::size_t>((position(dst) / stride(v)) % k)];
  }
  [[nodiscard]] std::int64_t stride(VertexId v) const { return stride_[kind_[v]]; }
  /// GPU `dst`'s number in D-mod-k: its index among the GPUs in leaf-major
  /// order (by the leaf its HCA hangs off, then rank), as Zahavi numbers a
  /// fat-tree's hosts. The rank itself where HCAs fill leaves in rank order
  /// (leaf-spine, fat-trees); on a rail-optimized fabric rail j's hosts are
  /// ranks j, j + g, j + 2g, ... (g GPUs per node), whose ranks mod the
  /// spine count would reach only 1/g of the spines.
  [[nodiscard]] std::int64_t position(int dst) const { return position_[static_cast<std::size_t>(dst)]; }

  // Exposed to the table builder.
  [[nodiscard]] int num_switches() const { return num_switches_; }
  [[nodiscard]] int switch_index(VertexId v) const { return sw_index_[v]; }
  [[nodiscard]] const std::vector<int>& attachments(int gpu) const {
    return gpu_atts_[static_cast<std::size_t>(gpu)];
  }
  [[nodiscard]] int att_dist(int att, int sw) const {
    const std::int16_t d = dist_[static_cast<std::size_t>(att) * static_cast<std::size_t>(num_switches_) +
                                 static_cast<std::size_t>(sw)];
    return d == kInf16 ? kInf : d;
  }
  [[nodiscard]] VertexId att_vertex(int att) const { return att_vertex_[static_cast<std::size_t>(att)]; }

 private:
  static constexpr std::int16_t kInf16 = std::numeric_limits<std::int16_t>::max();
  std::vector<int> sw_index_;       // per vertex: dense switch index, -1 for GPUs
  std::vector<std::uint8_t> kind_;  // per vertex: VertexKind
  std::vector<int> gpu_of_vertex_;  // per vertex: GPU rank or -1
  int num_switches_ = 0;
  std::vector<std::vector<int>> gpu_atts_;  // per GPU: attachment indices
  std::vector<VertexId> att_vertex_;
  std::vector<std::int16_t> dist_;  // attachments x switches
  std::array<std::int64_t, 6> stride_{1, 1, 1, 1, 1, 1};
  std::vector<std::int64_t> position_;  // per GPU: D-mod-k number (position())
};

}  // namespace tessera::topology::detail
