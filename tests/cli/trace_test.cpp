#include <gtest/gtest.h>

#include "tessera/cli/trace.hpp"

using namespace tessera;
using namespace tessera::cli;

namespace {
std::size_t count(const std::string& s, const std::string& needle) {
  std::size_t n = 0;
  for (auto pos = s.find(needle); pos != std::string::npos; pos = s.find(needle, pos + 1)) ++n;
  return n;
}
}  // namespace

TEST(ChromeTrace, RecordsEveryEventWithExactTimes) {
  ChromeTraceObserver obs(2);
  parallelism::Task fwd;
  fwd.name = "layer000.fwd";
  obs.on_compute(1, fwd, Time::from_ps(1'500'000), Time::from_ps(2'000'001));
  parallelism::Task ar;
  ar.name = "grad";
  ar.kind = parallelism::TaskKind::Collective;
  ar.group = 0;
  ar.bytes = Bytes(64);
  obs.on_collective(ar, 0, {0, 1}, Time::from_us(3), Time::from_us(5));
  obs.on_transfer(collectives::Transfer{0, 1, Bytes(32), {}, 0}, Time::from_us(3), Time::from_us(4));
  const std::string j = obs.json();
  EXPECT_NE(j.find(R"("name":"layer000.fwd","cat":"compute","ph":"X","pid":1,"tid":0,"ts":1.500000,"dur":0.500001)"),
            std::string::npos)
      << j;
  EXPECT_EQ(count(j, R"("cat":"all-reduce")"), 2U);  // one span per member rank
  EXPECT_EQ(count(j, R"("cat":"network")"), 2U);     // begin + end
  EXPECT_EQ(count(j, R"("name":"process_name")"), 2U);
  EXPECT_EQ(count(j, R"("comm group 0")"), 2U);
  EXPECT_EQ(j.substr(j.size() - 4), "\n]}\n");
}
