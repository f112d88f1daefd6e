#include "build_util.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "tessera/error.hpp"

namespace tessera::collectives::detail {

void check_group(std::string_view what, const std::vector<int>& ranks, Bytes size) {
  if (ranks.empty()) throw InputError(fmt::format("{}: the group is empty", what));
  if (size.count() < 0)
    throw InputError(fmt::format("{}: size must not be negative (got {} B)", what, size.count()));
  std::unordered_map<int, std::size_t> seen;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0)
      throw InputError(fmt::format("{}: rank {} at position {} is negative", what, ranks[i], i));
    auto [it, inserted] = seen.emplace(ranks[i], i);
    if (!inserted) {
      throw InputError(fmt::format("{}: the group lists rank {} twice (positions {} and {} of {})", what,
                                   ranks[i], it->second, i, ranks.size()));
    }
  }
}

std::vector<Bytes> split(Bytes size, std::int64_t parts) {
  // (a bug: the builders split into group sizes and chunk counts, both validated)
  if (parts <= 0)
    throw SimulationError(
        fmt::format("split: {} in {} parts: the parts must be at least one", to_string(size), parts));
  std::vector<Bytes> out;
  out.reserve(static_cast<std::size_t>(parts));
  for (std::int64_t c = 0; c < parts; ++c)
    out.emplace_back(size.count() / parts + (c < size.count() % parts ? 1 : 0));
  return out;
}

TransferIndex add(TransferGraph& g, int src, int dst, Bytes bytes, std::int32_t step,
                  std::vector<TransferIndex> deps) {
  g.transfers.push_back(Transfer{src, dst, bytes, std::move(deps), step, false});
  return static_cast<TransferIndex>(g.transfers.size() - 1);
}

TransferIndex add_reduce(TransferGraph& g, int src, int dst, Bytes bytes, std::int32_t step,
                         std::vector<TransferIndex> deps) {
  g.transfers.push_back(Transfer{src, dst, bytes, std::move(deps), step, true});
  return static_cast<TransferIndex>(g.transfers.size() - 1);
}

TransferIndex append(TransferGraph& g, const TransferGraph& part) {
  const auto offset = static_cast<TransferIndex>(g.transfers.size());
  // Ring ids stay one per ring: the part's after g's (g is scanned only
  // when the part has rings: step graphs, chunked ones appended slice by
  // slice, have none).
  std::int32_t rings = 0;
  if (std::any_of(part.transfers.begin(), part.transfers.end(),
                  [](const Transfer& t) { return t.ring >= 0; })) {
    for (const Transfer& t : g.transfers) rings = std::max(rings, t.ring + 1);
  }
  for (Transfer t : part.transfers) {
    for (auto& d : t.deps) d += offset;
    if (t.ring >= 0) t.ring += rings;
    g.transfers.push_back(std::move(t));
  }
  return offset;
}

std::unordered_map<int, std::vector<TransferIndex>> into(const TransferGraph& g, TransferIndex begin,
                                                         TransferIndex end) {
  std::unordered_map<int, std::vector<TransferIndex>> out;
  for (TransferIndex i = begin; i < end; ++i) out[g.transfers[static_cast<std::size_t>(i)].dst].push_back(i);
  return out;
}

}  // namespace tessera::collectives::detail
