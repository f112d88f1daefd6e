#pragma once
// The thread pool of the commands that run many independent simulations
// (sweep, search, sensitivity, validate training): indices handed out in
// order to up to `jobs` threads.
#include <cstddef>
#include <functional>

namespace tessera::cli {

/// Calls f(0) .. f(n - 1), each at most once, on min(jobs, n) threads (at
/// least one); returns when all have returned. Indices are handed out in
/// increasing order, so with jobs = 1 they run in order. When `f` throws,
/// the indices above the lowest that threw are no longer called, and once
/// the others have returned the lowest index's exception is rethrown: the
/// same error whatever the threads' timing. Without a throw every index
/// runs. A caller that goes on past a failure records its error per index
/// and does not throw.
void for_each_index(std::size_t n, unsigned jobs, const std::function<void(std::size_t)>& f);

/// for_each_index with state per thread (a kernel predictor, which one
/// thread uses at a time): each thread calls `make_worker()` once, before
/// the first index it takes, and then what it returned for each index it
/// takes. What `make_worker` throws is a failure of that first index.
void for_each_index_per_thread(std::size_t n, unsigned jobs,
                               const std::function<std::function<void(std::size_t)>()>& make_worker);

}  // namespace tessera::cli
