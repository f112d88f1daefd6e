#pragma once
// The thread pool of the commands that run many independent simulations
// (search, sensitivity): indices handed out in order to up to `jobs` threads.
#include <cstddef>
#include <functional>

namespace tessera::cli {

/// Calls f(0) .. f(n - 1), each exactly once, on min(jobs, n) threads (at
/// least one); returns when all have returned. Indices are handed out in
/// increasing order, so with jobs = 1 they run in order. What `f` throws is
/// kept per index and, once every index has run, the lowest index's is
/// rethrown: the same error whatever the threads' timing. A caller that
/// goes on past a failure records its error per index and decides after.
void for_each_index(std::size_t n, unsigned jobs, const std::function<void(std::size_t)>& f);

}  // namespace tessera::cli
