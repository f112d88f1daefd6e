#include "tessera/cli/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

namespace tessera::cli {

void for_each_index(std::size_t n, unsigned jobs, const std::function<void(std::size_t)>& f) {
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) f(i);
  };
  const std::size_t threads = std::max<std::size_t>(1, std::min<std::size_t>(jobs, n));
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
}

}  // namespace tessera::cli
