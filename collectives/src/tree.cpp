#include "tessera/collectives/tree.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "build_util.hpp"
#include "tessera/error.hpp"

namespace tessera::collectives {

TransferGraph binomial_broadcast(const std::vector<int>& ranks, Bytes size) {
  detail::check_group("binomial broadcast", ranks, size);
  const auto p = static_cast<int>(ranks.size());
  TransferGraph g;
  if (p == 1 || size.count() == 0) return g;
  std::vector<TransferIndex> received(static_cast<std::size_t>(p), -1);
  std::vector<TransferIndex> last_send(static_cast<std::size_t>(p), -1);
  for (int k = 0; (1 << k) < p; ++k) {
    for (int i = 0; i < (1 << k) && i + (1 << k) < p; ++i) {
      const int j = i + (1 << k);
      std::vector<TransferIndex> deps;
      if (received[static_cast<std::size_t>(i)] >= 0) deps.push_back(received[static_cast<std::size_t>(i)]);
      if (last_send[static_cast<std::size_t>(i)] >= 0) deps.push_back(last_send[static_cast<std::size_t>(i)]);
      const TransferIndex t = detail::add(g, ranks[static_cast<std::size_t>(i)],
                                          ranks[static_cast<std::size_t>(j)], size, k, std::move(deps));
      received[static_cast<std::size_t>(j)] = t;
      last_send[static_cast<std::size_t>(i)] = t;
    }
  }
  return g;
}

TransferGraph binomial_reduce(const std::vector<int>& ranks, Bytes size) {
  detail::check_group("binomial reduce", ranks, size);
  const auto p = static_cast<int>(ranks.size());
  TransferGraph g;
  if (p == 1 || size.count() == 0) return g;
  std::vector<std::vector<TransferIndex>> from_children(static_cast<std::size_t>(p));
  for (int k = 0; (1 << k) < p; ++k) {
    for (int i = 1 << k; i < p; i += 1 << (k + 1)) {
      const int parent = i - (1 << k);
      // After its own children, and one message into the parent per round.
      std::vector<TransferIndex> deps = from_children[static_cast<std::size_t>(i)];
      if (!from_children[static_cast<std::size_t>(parent)].empty()) {
        deps.push_back(from_children[static_cast<std::size_t>(parent)].back());
      }
      const TransferIndex t = detail::add_reduce(g, ranks[static_cast<std::size_t>(i)],
                                                 ranks[static_cast<std::size_t>(parent)], size, k, std::move(deps));
      from_children[static_cast<std::size_t>(parent)].push_back(t);
    }
  }
  return g;
}

int btree_parent(int i, int p) {
  if (i <= 0 || i >= p) return -1;
  int bit = 1;
  while ((bit & i) == 0) bit <<= 1;
  int up = (i ^ bit) | (bit << 1);
  if (up >= p) up = i ^ bit;
  return up;
}

int dtree_parent(int i, int p) {
  // Position of i in the first tree's layout, and back.
  auto to = [p](int x) { return p % 2 == 0 ? p - 1 - x : (x - 1 + p) % p; };
  auto from = [p](int x) { return p % 2 == 0 ? p - 1 - x : (x + 1) % p; };
  const int up = btree_parent(to(i), p);
  return up < 0 ? -1 : from(up);
}

namespace detail {

TransferGraph double_binary_tree_core(const std::vector<int>& ranks, Bytes size) {
  const auto p = static_cast<int>(ranks.size());
  TransferGraph g;
  if (p < 2) return g;
  const auto halves = split(size, 2);
  for (int tree = 0; tree < 2; ++tree) {
    const Bytes h = halves[static_cast<std::size_t>(tree)];
    std::vector<int> parent(static_cast<std::size_t>(p));
    std::vector<int> depth(static_cast<std::size_t>(p), 0);
    std::vector<std::vector<int>> children(static_cast<std::size_t>(p));
    int root = -1;
    for (int i = 0; i < p; ++i) {
      parent[static_cast<std::size_t>(i)] = tree == 0 ? btree_parent(i, p) : dtree_parent(i, p);
      if (parent[static_cast<std::size_t>(i)] < 0) {
        root = i;
      } else {
        children[static_cast<std::size_t>(parent[static_cast<std::size_t>(i)])].push_back(i);
      }
    }
    // Depths by walking up (trees are O(log p) deep).
    int max_depth = 0;
    for (int i = 0; i < p; ++i) {
      for (int x = i; parent[static_cast<std::size_t>(x)] >= 0; x = parent[static_cast<std::size_t>(x)]) {
        ++depth[static_cast<std::size_t>(i)];
      }
      max_depth = std::max(max_depth, depth[static_cast<std::size_t>(i)]);
    }
    std::vector<int> order(static_cast<std::size_t>(p));
    for (int i = 0; i < p; ++i) order[static_cast<std::size_t>(i)] = i;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return depth[static_cast<std::size_t>(a)] > depth[static_cast<std::size_t>(b)];
    });
    // Reduce: deepest first; a node sends up after all its children have.
    std::vector<std::vector<TransferIndex>> up_in(static_cast<std::size_t>(p));
    for (int x : order) {
      const int par = parent[static_cast<std::size_t>(x)];
      if (par < 0) continue;
      const TransferIndex t =
          add_reduce(g, ranks[static_cast<std::size_t>(x)], ranks[static_cast<std::size_t>(par)], h,
                     max_depth - depth[static_cast<std::size_t>(x)], up_in[static_cast<std::size_t>(x)]);
      up_in[static_cast<std::size_t>(par)].push_back(t);
    }
    // Broadcast: shallowest first; the root once it has everything.
    std::vector<TransferIndex> down_in(static_cast<std::size_t>(p), -1);
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const int x = *it;
      std::vector<TransferIndex> deps =
          x == root ? up_in[static_cast<std::size_t>(x)]
                    : std::vector<TransferIndex>{down_in[static_cast<std::size_t>(x)]};
      for (int c : children[static_cast<std::size_t>(x)]) {
        down_in[static_cast<std::size_t>(c)] =
            add(g, ranks[static_cast<std::size_t>(x)], ranks[static_cast<std::size_t>(c)], h,
                max_depth + depth[static_cast<std::size_t>(x)], deps);
      }
    }
  }
  return g;
}

}  // namespace detail

TransferGraph double_binary_tree_all_reduce(const std::vector<int>& ranks, Bytes size) {
  detail::check_group("double binary tree all-reduce", ranks, size);
  if (ranks.size() == 1 || size.count() == 0) return {};
  return detail::double_binary_tree_core(ranks, size);
}

}  // namespace tessera::collectives
