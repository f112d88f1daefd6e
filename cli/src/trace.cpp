#include "tessera/cli/trace.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace tessera::cli {

namespace {
/// Microseconds with picosecond precision, exactly.
std::string us(Time t) { return fmt::format("{}.{:06}", t.ps() / 1'000'000, t.ps() % 1'000'000); }
std::string escaped(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}
constexpr int kCommThreadBase = 1;  // thread 0 is compute, 1 + g is group g
}  // namespace

void ChromeTraceObserver::on_compute(int rank, const parallelism::Task& task, Time start, Time end) {
  events_.push_back(fmt::format(R"({{"name":"{}","cat":"compute","ph":"X","pid":{},"tid":0,"ts":{},"dur":{}}})",
                                escaped(task.name), rank, us(start), us(end - start)));
}

void ChromeTraceObserver::on_collective(const parallelism::Task& task, std::int32_t group,
                                        const std::vector<int>& ranks, Time start, Time end) {
  if (std::find(groups_seen_.begin(), groups_seen_.end(), group) == groups_seen_.end()) {
    groups_seen_.push_back(group);
  }
  for (int r : ranks) {
    events_.push_back(fmt::format(
        R"({{"name":"{}","cat":"{}","ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"args":{{"bytes":{}}}}})",
        escaped(task.name), parallelism::to_string(task.collective), r, kCommThreadBase + group, us(start),
        us(end - start), task.bytes.count()));
  }
}

void ChromeTraceObserver::on_transfer(const collectives::Transfer& t, Time start, Time end) {
  const long id = transfer_id_++;
  events_.push_back(fmt::format(
      R"({{"name":"send {}->{}","cat":"network","ph":"b","id":{},"pid":{},"tid":0,"ts":{},"args":{{"bytes":{},"step":{}}}}})",
      t.src, t.dst, id, t.src, us(start), t.bytes.count(), t.step));
  events_.push_back(fmt::format(R"({{"name":"send {}->{}","cat":"network","ph":"e","id":{},"pid":{},"tid":0,"ts":{}}})",
                                t.src, t.dst, id, t.src, us(end)));
}

std::string ChromeTraceObserver::json() const {
  std::vector<int> groups = groups_seen_;
  std::sort(groups.begin(), groups.end());
  std::vector<std::string> lines;
  for (int r = 0; r < ranks_; ++r) {
    lines.push_back(fmt::format(R"({{"name":"process_name","ph":"M","pid":{},"args":{{"name":"rank {}"}}}})", r, r));
    lines.push_back(fmt::format(R"({{"name":"thread_name","ph":"M","pid":{},"tid":0,"args":{{"name":"compute"}}}})", r));
    for (int g : groups) {
      lines.push_back(fmt::format(
          R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"comm group {}"}}}})", r,
          kCommThreadBase + g, g));
    }
  }
  lines.insert(lines.end(), events_.begin(), events_.end());
  return fmt::format("{{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n{}\n]}}\n", fmt::join(lines, ",\n"));
}

}  // namespace tessera::cli
