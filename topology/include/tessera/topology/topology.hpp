#pragma once
// A cluster's physical network as a directed Boost.Graph: GPUs, NVSwitches,
// leaf and spine switches, and one directed edge per link direction.
#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/units.hpp"

namespace tessera::topology {

enum class VertexKind { Gpu, NvSwitch, Leaf, Spine };
std::string_view to_string(VertexKind k);

struct VertexProps {
  VertexKind kind = VertexKind::Gpu;
  std::string name;
  int index = 0;  ///< GPU rank for GPUs, switch number within its kind otherwise
};

struct LinkProps {
  Bandwidth bandwidth;
  Time latency;
  std::int32_t id = -1;  ///< dense link id (index into Topology::links())
};

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, VertexProps, LinkProps>;
using VertexId = Graph::vertex_descriptor;
using LinkId = std::int32_t;

struct Link {
  VertexId src;
  VertexId dst;
  Bandwidth bandwidth;
  Time latency;
};

/// One routed path: the directed links a message crosses, in order.
using Path = std::vector<LinkId>;

class Topology {
 public:
  VertexId add_vertex(VertexKind kind, std::string name, int index);
  /// Adds a full-duplex link: two directed links of the same properties.
  void add_duplex_link(VertexId a, VertexId b, Bandwidth bw, Time latency);

  [[nodiscard]] const Graph& graph() const { return g_; }
  [[nodiscard]] const std::vector<Link>& links() const { return links_; }
  [[nodiscard]] const Link& link(LinkId id) const { return links_.at(static_cast<std::size_t>(id)); }
  [[nodiscard]] int num_gpus() const { return static_cast<int>(gpus_.size()); }
  [[nodiscard]] VertexId gpu(int rank) const;
  [[nodiscard]] const VertexProps& vertex(VertexId v) const { return g_[v]; }
  [[nodiscard]] std::size_t num_vertices() const { return boost::num_vertices(g_); }
  [[nodiscard]] int count(VertexKind kind) const;

  /// Shortest (fewest hops) path from GPU `src` to GPU `dst`. Among equal
  /// next hops the choice is deterministic, destination-mod-k (as OpenSM's
  /// fat-tree routing), which spreads destinations over up-links.
  [[nodiscard]] Path route(int src, int dst) const;
  /// Sum of link latencies along a path.
  [[nodiscard]] Time latency(const Path& p) const;

 private:
  Graph g_;
  std::vector<Link> links_;
  std::vector<VertexId> gpus_;
};

/// A leaf-spine (2-tier fat-tree) cluster of nodes with an NVSwitch each.
/// Every GPU has an NVLink port into its node's NVSwitch and its own HCA port
/// into a leaf switch; leaves connect to every spine.
struct LeafSpineSpec {
  int nodes = 1;
  int gpus_per_node = 8;
  Bandwidth nvlink_bandwidth;   ///< per GPU, per direction
  Time nvlink_latency;
  Bandwidth nic_bandwidth;      ///< per HCA (one per GPU), per direction
  Time nic_latency;             ///< GPU/HCA to leaf link
  int hosts_per_leaf = 32;      ///< HCAs attached to one leaf
  int spines = 1;
  Bandwidth spine_bandwidth;    ///< each leaf-spine link
  Time spine_latency;
};

/// Builds the topology; GPU ranks are node-major (rank = node * gpus_per_node + i).
/// Throws InputError naming the field for impossible specs.
Topology build_leaf_spine(const LeafSpineSpec& spec);

}  // namespace tessera::topology
