#include "tessera/cli/parallel.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using namespace tessera::cli;

// What indices throw (any exception, not only the tool's own) is rethrown
// once the others have returned, the lowest index's, on any number of
// threads (an exception leaving a worker thread ended the process); indices
// above a failure are skipped; without one every index runs once.
TEST(ForEachIndex, RunsEveryIndexAndRethrowsTheLowestFailure) {
  for (unsigned jobs : {1U, 2U, 8U}) {
    std::vector<std::atomic<int>> runs(50);
    try {
      for_each_index(50, jobs, [&](std::size_t i) {
        ++runs[i];
        if (i == 41) throw std::bad_alloc();
        if (i == 7 || i == 30) throw std::out_of_range("index " + std::to_string(i));
      });
      FAIL() << "nothing thrown with jobs " << jobs;
    } catch (const std::out_of_range& e) {
      EXPECT_EQ(std::string(e.what()), "index 7") << "jobs " << jobs;
    }
    // Every index up to the failure ran once; above it at most once (those
    // handed out before the failure), and with one thread none.
    for (std::size_t i = 0; i <= 7; ++i) EXPECT_EQ(runs[i].load(), 1) << i << " jobs " << jobs;
    for (std::size_t i = 8; i < runs.size(); ++i) EXPECT_LE(runs[i].load(), jobs == 1 ? 0 : 1) << i;
  }
  std::vector<std::atomic<int>> all(50);
  for_each_index(50, 4, [&](std::size_t i) { ++all[i]; });
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].load(), 1) << i;
  EXPECT_NO_THROW(for_each_index(0, 4, [](std::size_t) { throw std::runtime_error("never called"); }));
}

// Per-thread state: each thread makes its worker once, before its first
// index (at most `jobs` workers, one with jobs 1), and every index runs once
// on some thread's worker; a worker that cannot be made fails the index its
// thread was about to run, and the lowest failure is rethrown as before.
TEST(ForEachIndex, MakesOneWorkerPerThread) {
  for (unsigned jobs : {1U, 3U}) {
    std::atomic<int> made{0};
    std::vector<std::atomic<int>> runs(40);
    std::atomic<int> foreign{0};  // indices run by another thread's worker
    for_each_index_per_thread(40, jobs, [&] {
      ++made;
      const std::thread::id owner = std::this_thread::get_id();
      return [&runs, &foreign, owner](std::size_t i) {
        ++runs[i];
        if (std::this_thread::get_id() != owner) ++foreign;
      };
    });
    EXPECT_EQ(foreign.load(), 0) << "jobs " << jobs;
    EXPECT_GE(made.load(), 1);
    EXPECT_LE(made.load(), static_cast<int>(jobs));
    for (std::size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].load(), 1) << i << " jobs " << jobs;
  }
  try {
    for_each_index_per_thread(
        10, 1, []() -> std::function<void(std::size_t)> { throw std::runtime_error("no predictor"); });
    FAIL() << "nothing thrown";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "no predictor");
  }
}
