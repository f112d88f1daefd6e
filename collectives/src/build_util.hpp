#pragma once
// Private helpers shared by the algorithm builders.
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tessera/collectives/transfer_graph.hpp"

namespace tessera::collectives::detail {

/// Throws InputError naming `what` and the numbers for an empty group, a
/// duplicate rank or a negative size.
void check_group(std::string_view what, const std::vector<int>& ranks, Bytes size);
/// `size` split into `parts` pieces, the remainder spread over the first ones.
std::vector<Bytes> split(Bytes size, std::int64_t parts);
TransferIndex add(TransferGraph& g, int src, int dst, Bytes bytes, std::int32_t step,
                  std::vector<TransferIndex> deps = {});
/// Same, for a transfer whose receiver reduces the data into its buffer.
TransferIndex add_reduce(TransferGraph& g, int src, int dst, Bytes bytes, std::int32_t step,
                         std::vector<TransferIndex> deps = {});
/// Appends `part` (its deps shifted); returns the index of its first transfer.
TransferIndex append(TransferGraph& g, const TransferGraph& part);
/// Transfers in [begin, end) by receiving rank.
std::unordered_map<int, std::vector<TransferIndex>> into(const TransferGraph& g, TransferIndex begin,
                                                         TransferIndex end);
/// Adds the deps `entry(src)` to every transfer in [begin, end) that does not
/// already wait for an earlier send of its own sender (which is gated itself).
template <typename F>
void gate(TransferGraph& g, TransferIndex begin, TransferIndex end, F&& entry) {
  for (TransferIndex i = begin; i < end; ++i) {
    Transfer& t = g.transfers[static_cast<std::size_t>(i)];
    bool chained = false;
    for (TransferIndex d : t.deps) chained = chained || g.transfers[static_cast<std::size_t>(d)].src == t.src;
    if (chained) continue;
    for (TransferIndex d : entry(t.src)) t.deps.push_back(d);
  }
}

// Size-independent cores (no short cut for size 0), for composition.
/// Ring steps [first, last) of the 2(p-1)-step all-reduce schedule; steps are
/// renumbered from 0 and the first has no deps.
TransferGraph ring_steps(const std::vector<int>& ranks, Bytes size, std::int64_t first, std::int64_t last);
/// ring_steps as flows: one transfer per connection (ring_*_flows).
TransferGraph ring_flows(const std::vector<int>& ranks, Bytes size, std::int64_t first, std::int64_t last);
/// Steps [first, last) (as ring_steps, or as ring_flows with `flows`) of
/// several rings of the same ranks at once, ring c carrying part c of `size`
/// split in rings.size().
TransferGraph multi_ring(const std::vector<std::vector<int>>& rings, Bytes size, std::int64_t first,
                         std::int64_t last, bool flows);
TransferGraph double_binary_tree_core(const std::vector<int>& ranks, Bytes size);

}  // namespace tessera::collectives::detail
