#include "tessera/cli/parallel.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <vector>

namespace tessera::cli {

void for_each_index(std::size_t n, unsigned jobs, const std::function<void(std::size_t)>& f) {
  // Every thread calls the one `f` (not a copy per thread).
  for_each_index_per_thread(n, jobs, [&f] { return [&f](std::size_t i) { f(i); }; });
}

void for_each_index_per_thread(std::size_t n, unsigned jobs,
                               const std::function<std::function<void(std::size_t)>()>& make_worker) {
  std::atomic<std::size_t> next{0};
  // What each index threw: the lowest index's is rethrown once all have
  // run, whatever the threads' timing (helper 88: an exception leaving a
  // thread ended the process).
  std::vector<std::exception_ptr> thrown(n);
  // After a failure the indices above it are skipped (every one below it
  // was handed out before it, and runs): the lowest failure is the same
  // whatever the timing, and a failed run stops early.
  std::atomic<std::size_t> lowest_failed{n};
  auto work = [&] {
    std::function<void(std::size_t)> f;
    for (std::size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      if (i > lowest_failed.load()) continue;
      try {
        if (!f) f = make_worker();
        f(i);
      } catch (...) {
        thrown[i] = std::current_exception();
        std::size_t seen = lowest_failed.load();
        while (i < seen && !lowest_failed.compare_exchange_weak(seen, i)) {
        }
      }
    }
  };
  const std::size_t threads = std::max<std::size_t>(1, std::min<std::size_t>(jobs, n));
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  for (const std::exception_ptr& e : thrown) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace tessera::cli
