#include "tessera/cli/parallel.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

using namespace tessera::cli;

// Every index runs once; what indices throw (any exception, not only the
// tool's own) is rethrown after all have run, the lowest index's, on any
// number of threads (an exception leaving a worker thread ended the process).
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
    for (std::size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].load(), 1) << i << " jobs " << jobs;
  }
  EXPECT_NO_THROW(for_each_index(0, 4, [](std::size_t) { throw std::runtime_error("never called"); }));
}
