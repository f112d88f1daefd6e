#include "tessera/study/nccl_tests.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>
#include <sstream>

#include "tessera/error.hpp"
#include "tessera/node_model/csv.hpp"
#include "tessera/study/pipeline.hpp"

namespace tessera::study {

using parallelism::CollectiveKind;

namespace {

std::vector<std::string> tokens_of(std::string_view line) {
  std::vector<std::string> out;
  std::istringstream ss{std::string(line)};
  for (std::string t; ss >> t;) out.push_back(std::move(t));
  return out;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// nccl-tests' binaries by the stem of their name, most specific first
/// ("all_reduce" before "reduce").
struct Test {
  std::string_view stem;
  std::string_view name;
  CollectiveKind kind;
};
constexpr Test kTests[] = {
    {"all_reduce", "all_reduce_perf", CollectiveKind::AllReduce},
    {"allreduce", "all_reduce_perf", CollectiveKind::AllReduce},
    {"reduce_scatter", "reduce_scatter_perf", CollectiveKind::ReduceScatter},
    {"reducescatter", "reduce_scatter_perf", CollectiveKind::ReduceScatter},
    {"all_gather", "all_gather_perf", CollectiveKind::AllGather},
    {"allgather", "all_gather_perf", CollectiveKind::AllGather},
    {"alltoall", "alltoall_perf", CollectiveKind::AllToAll},
    {"all_to_all", "alltoall_perf", CollectiveKind::AllToAll},
    {"sendrecv", "sendrecv_perf", CollectiveKind::SendRecv},
    {"broadcast", "broadcast_perf", CollectiveKind::Broadcast},
    {"reduce", "reduce_perf", CollectiveKind::Reduce},
};
const Test* test_in(std::string_view text) {
  for (const Test& t : kTests) {
    if (text.find(t.stem) != std::string_view::npos) return &t;
  }
  return nullptr;
}

double number_cell(const std::string& cell, const std::string& file, std::size_t line,
                   std::string_view column) {
  if (const auto v = node_model::decimal_number(cell)) return *v;
  throw InputError(fmt::format("{}:{}: column '{}': '{}' is not a number", file, line, column, cell));
}

/// A rank or device index: digits, at most 2^31 - 1.
int index_cell(const std::string& cell, const std::string& file, std::size_t line, std::string_view what) {
  if (!all_digits(cell) || cell.size() > 10 || std::stoll(cell) > std::numeric_limits<int>::max()) {
    throw InputError(
        fmt::format("{}:{}: {} '{}' is not a whole number up to 2147483647", file, line, what, cell));
  }
  return static_cast<int>(std::stoll(cell));
}

}  // namespace

NcclTestsLog parse_nccl_tests(std::string_view text, const std::string& file) {
  NcclTestsLog log;
  log.file = file;
  const Test* test = nullptr;
  std::vector<std::pair<int, NcclTestsRank>> ranks;
  std::vector<std::string> columns;  // the header's, without its '#'
  std::size_t size_col = 0;
  std::size_t time_col = 0;
  std::size_t algbw_col = std::string::npos;
  std::vector<std::size_t> wrong_cols;        // out-of-place's and in-place's "#wrong"
  std::size_t type_col = std::string::npos;   // the data type ("float", "half"): one per file
  std::size_t redop_col = std::string::npos;  // the reduction ("sum", "max"): one per file
  std::string first_type;
  std::string first_redop;
  std::set<std::int64_t> sizes;  // each size once
  bool rows_started = false;
  // nccl-tests ends every run it finishes with "# Out of bounds values : N
  // OK" (then "# Avg bus bandwidth"): without it the run was cut off.
  bool finished = false;
  std::size_t line_no = 0;
  // A run's header (its test, its ranks) after rows: another run.
  auto check_one_run = [&] {
    if (rows_started) {
      throw InputError(fmt::format("{}:{}: a second nccl-tests run in one file: give each run its own file",
                                   file, line_no));
    }
  };
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const auto tok = tokens_of(line);
    if (tok.empty()) continue;
    if (tok[0].front() == '#') {
      const auto starting = line.find("Collective test starting:");
      if (starting != std::string_view::npos) {
        check_one_run();
        const auto named =
            tokens_of(line.substr(starting + std::string_view("Collective test starting:").size()));
        const std::string name = named.empty() ? std::string() : named.front();
        test = test_in(name);
        if (test == nullptr) {
          throw InputError(
              fmt::format("{}:{}: test '{}' is not one Tessera models (all_reduce_perf, all_gather_perf, "
                          "reduce_scatter_perf, alltoall_perf, sendrecv_perf, broadcast_perf, reduce_perf)",
                          file, line_no, name));
        }
        continue;
      }
      // "# Out of bounds values : 3 FAILED": nccl-tests found wrong results.
      if (line.find("Out of bounds values") != std::string_view::npos) {
        if (tok.back() == "FAILED") {
          throw InputError(
              fmt::format("{}:{}: nccl-tests reports wrong results ('{}'): a failed run times nothing "
                          "trustworthy; rerun it",
                          file, line_no, fmt::join(tok, " ")));
        }
        finished = true;
      }
      if (tok.size() >= 3 && tok[1] == "Rank") {
        check_one_run();
        const auto on = std::find(tok.begin(), tok.end(), "on");
        const auto device = std::find(tok.begin(), tok.end(), "device");
        if (on == tok.end() || on + 1 == tok.end() || device == tok.end() || device + 1 == tok.end() ||
            !all_digits(*(device + 1))) {
          throw InputError(fmt::format("{}:{}: a rank line without 'on HOST device N': '{}'", file, line_no,
                                       std::string(line)));
        }
        // "... device 0 [0x07] NVIDIA H100 80GB HBM3": the name after the bus id.
        std::string gpu;
        if (device + 2 < tok.end() && (device + 2)->front() == '[') {
          for (auto t = device + 3; t < tok.end(); ++t) gpu += (gpu.empty() ? "" : " ") + std::string(*t);
        }
        ranks.emplace_back(index_cell(tok[2], file, line_no, "rank"),
                           NcclTestsRank{*(on + 1), index_cell(*(device + 1), file, line_no, "device"), gpu});
        continue;
      }
      // The column header: "#  size  count  type  redop  root  time  algbw ...".
      if (columns.empty() && std::find(tok.begin(), tok.end(), "size") != tok.end() &&
          std::find(tok.begin(), tok.end(), "time") != tok.end()) {
        columns.assign(tok.begin() + (tok[0] == "#" ? 1 : 0), tok.end());
        if (columns.front().front() == '#') columns.front().erase(0, 1);
        size_col =
            static_cast<std::size_t>(std::find(columns.begin(), columns.end(), "size") - columns.begin());
        time_col =
            static_cast<std::size_t>(std::find(columns.begin(), columns.end(), "time") - columns.begin());
        // The first algbw after the time (out-of-place's); past the end when none.
        const auto algbw =
            std::find(columns.begin() + static_cast<std::ptrdiff_t>(time_col), columns.end(), "algbw");
        algbw_col =
            algbw == columns.end() ? std::string::npos : static_cast<std::size_t>(algbw - columns.begin());
        // The out-of-place and in-place "#wrong" (a count of wrong values;
        // older versions print a maximum "error" instead, judged by the
        // footer alone).
        wrong_cols.clear();
        for (std::size_t c = time_col; c < columns.size(); ++c) {
          if (columns[c] == "#wrong") wrong_cols.push_back(c);
        }
        const auto column_at = [&](std::string_view name) {
          const auto at = std::find(columns.begin(), columns.end(), name);
          return at == columns.end() ? std::string::npos : static_cast<std::size_t>(at - columns.begin());
        };
        type_col = column_at("type");
        redop_col = column_at("redop");
      }
      continue;
    }
    // A row: after the header, its first cell a number. Anything else
    // (NCCL_DEBUG lines, "HOST:PID:TID [0] NCCL INFO ...", warnings) is not
    // nccl-tests' own output.
    // nccl-tests' failure messages ("HOST: Test NCCL failure common.cu:1279
    // 'unhandled system error'", "Test CUDA failure"): the run aborted, and
    // the rows before it are a run cut off (helper 137: they were fit).
    if (line.find("Test NCCL failure") != std::string_view::npos ||
        line.find("Test CUDA failure") != std::string_view::npos ||
        line.find("Test failure") != std::string_view::npos) {
      throw InputError(
          fmt::format("{}:{}: nccl-tests failed ('{}'): a run cut off times nothing trustworthy; "
                      "rerun it",
                      file, line_no, fmt::join(tok, " ")));
    }
    if (columns.empty() || tok[0].find(':') != std::string::npos) continue;
    const auto bad_size = [&] {
      return InputError(fmt::format("{}:{}: column 'size': must be a whole number of bytes, got '{}'", file,
                                    line_no, tok[size_col]));
    };
    if (!(tok[0].front() >= '0' && tok[0].front() <= '9')) {
      // A line laid out as a row (the header's cells; a sign before the
      // size, or a number for the time) whose size is no count of bytes is
      // a damaged row, not a log line (helper 116: -4194304 and +4194304
      // rows were dropped without a word).
      const char first = tok[0].front();
      if (tok.size() == columns.size() && time_col < tok.size() &&
          (first == '-' || first == '+' ||
           tok[time_col].find_first_not_of("0123456789.") == std::string::npos)) {
        (void)number_cell(tok[size_col], file, line_no, "size");
        throw bad_size();
      }
      continue;
    }
    rows_started = true;
    // Every row has a cell under each of the header's columns: one with
    // fewer was cut off while printed (helper 137: "1073741824 268435456
    // float sum -1 11" read as 11 us for 1 GiB).
    // rccl-tests' -O 0 (in-place only) leaves the out-of-place cells blank:
    // a whole row of the in-place group alone, its time where the
    // out-of-place time would be (helper 138: refused as cut off).
    const auto second_time =
        std::find(columns.begin() + static_cast<std::ptrdiff_t>(time_col) + 1, columns.end(), "time");
    const std::size_t out_of_place_cells =
        second_time == columns.end() ? 0 : static_cast<std::size_t>(second_time - columns.begin()) - time_col;
    const bool in_place_only = out_of_place_cells > 0 && tok.size() == columns.size() - out_of_place_cells;
    if (tok.size() < columns.size() && !in_place_only) {
      throw InputError(
          fmt::format("{}:{}: {} cells, but the header has {} columns: a row cut off (the run "
                      "killed while printing it?); rerun it",
                      file, line_no, tok.size(), columns.size()));
    }
    const double size = number_cell(tok[size_col], file, line_no, "size");
    const double us = number_cell(tok[time_col], file, line_no, "time");
    if (size < 0 || size != std::floor(size) || !all_digits(tok[size_col])) throw bad_size();
    // nccl-tests' sizes stop at what a GPU holds; 2^50 B (1 PiB) keeps a
    // collective's sums inside int64 bytes (helper 116: 9e18 overflowed
    // while the report was printed, naming no file).
    if (size > 1125899906842624.0) {
      throw InputError(
          fmt::format("{}:{}: column 'size': {} B is more than 2^50 (1 PiB), no GPU's collective", file,
                      line_no, tok[size_col]));
    }
    if (size == 0) {
      ++log.empty_rows;
      continue;
    }
    if (!(us > 0)) {
      throw InputError(
          fmt::format("{}:{}: column 'time': must be positive, got '{}'", file, line_no, tok[time_col]));
    }
    if (us > 86'400e6) {  // (1e300 us overflowed Time, naming no file)
      throw InputError(
          fmt::format("{}:{}: column 'time': {} us is more than a day: nccl-tests writes microseconds", file,
                      line_no, tok[time_col]));
    }
    // nccl-tests prints algbw = size / time beside the time: a time that
    // disagrees with it by more than rounding was not written in
    // microseconds (or not by nccl-tests), and would fit nonsense.
    if (algbw_col < tok.size()) {
      const double algbw = number_cell(tok[algbw_col], file, line_no, "algbw");
      const double implied = size / (us * 1e-6) / 1e9;
      if (algbw >= 0.1 && (implied > 1.5 * algbw || implied < algbw / 1.5)) {
        throw InputError(fmt::format(
            "{}:{}: column 'time': {} us for {} B is {:.4g} GB/s, but the row's algbw is {} GB/s: nccl-tests "
            "writes the time in microseconds",
            file, line_no, tok[time_col], tok[size_col], implied, tok[algbw_col]));
      }
    }
    // (in place as well: helper 137, a run whose in-place results were
    // wrong was fit)
    for (const std::size_t wrong_col : wrong_cols) {
      if (wrong_col < tok.size() && tok[wrong_col] != "0" && tok[wrong_col] != "N/A") {
        throw InputError(fmt::format(
            "{}:{}: column '#wrong': {} wrong values at {} B: nccl-tests found this row's results "
            "wrong; rerun it",
            file, line_no, tok[wrong_col], tok[size_col]));
      }
    }
    // `-d all` or `-o all` time each size once per data type or reduction
    // (each file a fit would count ten times over, its types' different
    // speeds mixed): one of each per file.
    const auto one_of = [&](std::size_t col, std::string& first, std::string_view what,
                            std::string_view flag) {
      if (col >= tok.size()) return;
      if (first.empty()) {
        first = tok[col];
      } else if (tok[col] != first) {
        throw InputError(
            fmt::format("{}:{}: {} '{}' after rows of '{}': the run timed several {}s (nccl-tests {} all?); "
                        "Tessera reads "
                        "one per file: rerun with one {} (e.g. {} {}), or keep one's rows",
                        file, line_no, what, tok[col], first, what, flag, flag, flag, first));
      }
    };
    one_of(type_col, first_type, "data type", "-d");
    one_of(redop_col, first_redop, "reduction", "-o");
    if (!sizes.insert(static_cast<std::int64_t>(size)).second) {
      throw InputError(fmt::format("{}:{}: size {} B a second time: each size is timed once in a run", file,
                                   line_no, tok[size_col]));
    }
    log.rows.push_back({line_no, Bytes(static_cast<std::int64_t>(size)), Time::from_seconds(us * 1e-6)});
  }
  if (ranks.empty()) {
    throw InputError(
        fmt::format("{}: no rank lines ('#  Rank 0 Group 0 Pid P on HOST device 0 ...'): not the output of "
                    "an nccl-tests run",
                    file));
  }
  if (columns.empty()) {
    throw InputError(
        fmt::format("{}: no column header ('#  size  count  type ... time  algbw  busbw ...')", file));
  }
  if (log.rows.empty()) throw InputError(fmt::format("{}: no measured rows of more than 0 bytes", file));
  if (!finished) {
    throw InputError(fmt::format(
        "{}: no '# Out of bounds values : 0 OK' line after the rows: the run did not finish (killed, "
        "or the file cut short), and its last rows may be missing or cut off; rerun it",
        file));
  }
  if (test == nullptr) test = test_in(std::filesystem::path(file).filename().string());
  if (test == nullptr) {
    throw InputError(fmt::format(
        "{}: which test is this? It has no '# Collective test starting:' line and its name names none of "
        "all_reduce, all_gather, reduce_scatter, alltoall, sendrecv, broadcast, reduce "
        "(name the file after its test, e.g. all_reduce_perf.txt)",
        file));
  }
  log.test = std::string(test->name);
  log.kind = test->kind;
  std::sort(ranks.begin(), ranks.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].first != static_cast<int>(i)) {
      throw InputError(fmt::format(
          "{}: rank {} is {} ({} rank lines: ranks 0 to {} once each)", file,
          ranks[i].first < static_cast<int>(i) ? ranks[i].first : static_cast<int>(i),
          ranks[i].first < static_cast<int>(i) ? "listed twice" : "missing", ranks.size(), ranks.size() - 1));
    }
    log.ranks.push_back(ranks[i].second);
    if (std::find(log.hosts.begin(), log.hosts.end(), ranks[i].second.host) == log.hosts.end()) {
      log.hosts.push_back(ranks[i].second.host);
    }
  }
  if (log.ranks.size() < 2) throw InputError(fmt::format("{}: one rank: no collective to time", file));
  return log;
}

std::vector<int> nccl_tests_gpus(const NcclTestsLog& log, const Scenario& s) {
  const int per_node = s.cluster.gpus_per_node;
  if (static_cast<int>(log.hosts.size()) > s.cluster.nodes) {
    throw InputError(fmt::format("{}: the run spans {} hosts, the scenario's cluster has {} node{}", log.file,
                                 log.hosts.size(), s.cluster.nodes, s.cluster.nodes == 1 ? "" : "s"));
  }
  std::vector<int> gpus;
  std::set<int> seen;
  for (std::size_t r = 0; r < log.ranks.size(); ++r) {
    const auto& rank = log.ranks[r];
    if (rank.device >= per_node) {
      throw InputError(fmt::format("{}: rank {} ran on device {} of {}, the scenario's nodes have {} GPUs",
                                   log.file, r, rank.device, rank.host, per_node));
    }
    const auto node = std::find(log.hosts.begin(), log.hosts.end(), rank.host) - log.hosts.begin();
    const int gpu = static_cast<int>(node) * per_node + rank.device;
    if (!seen.insert(gpu).second) {
      throw InputError(fmt::format("{}: rank {} shares device {} of {} with another rank", log.file, r,
                                   rank.device, rank.host));
    }
    gpus.push_back(gpu);
  }
  return gpus;
}

Time time_nccl_tests_row(const Scenario& s, const topology::Topology& topo, const NcclTestsLog& log,
                         const std::vector<int>& gpus, Bytes size) {
  std::vector<std::vector<int>> groups;
  if (log.kind == CollectiveKind::SendRecv) {
    // Every rank sends to the next and receives from the previous.
    for (std::size_t i = 0; i < gpus.size(); ++i) groups.push_back({gpus[i], gpus[(i + 1) % gpus.size()]});
  } else {
    groups.push_back(gpus);  // rank 0 first: the root of broadcast and reduce
  }
  return execute_on_backend(s, parallelism::concurrent_collectives(s.gpus(), groups, log.kind, size), topo)
      .makespan;
}

namespace {

/// Per file equal, within a file each row the log-size interval it stands
/// for (rows below the fit size weigh 0).
std::vector<double> row_weights(const NcclTestsLog& log) {
  std::vector<Bytes> sizes;
  for (const NcclTestsRow& row : log.rows) sizes.push_back(row.size);
  return engine::log_size_weights(sizes, Bytes(engine::kCollectiveFitMinBytes));
}

/// One row reduced to what its time depends on in the fitted class: time =
/// launch + a + k x step + b / efficiency(n), from three simulations of the
/// class at efficiency 1 and 1/2 and with a step latency of 1 us more, all
/// without a launch.
struct Linearised {
  int group_size = 0;
  double a = 0;  ///< seconds: everything but the class's launch, step and bandwidth terms
  double k = 0;  ///< step latencies on the critical path
  double b = 0;  ///< seconds at efficiency 1
  Time measured;
  double weight = 0;
};

/// The fit for a given step latency (seconds): engine::fit_link_calibration
/// on samples whose fixed part is a + k x step.
engine::LinkCalibration fit_at_step(const std::vector<Linearised>& rows, double step, bool penalty,
                                    double fixed_penalty, double* objective) {
  constexpr double kLink = 1e12;  // bytes per second of the samples' nominal link
  std::vector<engine::CollectiveSample> samples;
  for (const Linearised& r : rows) {
    engine::CollectiveSample x;
    x.group_size = r.group_size;
    x.steps = 1;
    x.path_latency = Time::from_seconds(std::max(0.0, r.a + r.k * step));
    x.wire = Bytes(std::llround(r.b * kLink));
    x.link = Bandwidth::bits_per_second(static_cast<std::int64_t>(8.0 * kLink));
    x.measured = r.measured;
    x.weight = r.weight;
    samples.push_back(x);
  }
  engine::LinkCalibration fit = engine::fit_link_calibration(samples, penalty, fixed_penalty);
  if (objective != nullptr) *objective = engine::weighted_mape(fit, samples);
  return fit;
}

/// Fits one link class to the logs that are its (one host: NVLink; more:
/// network), with `s`'s calibration for everything else.
NcclTestsFitClass fit_class(const Scenario& s, const topology::Topology& topo,
                            const std::vector<NcclTestsLog>& logs, bool network) {
  NcclTestsFitClass out;
  auto cls = [network](Scenario& x) -> engine::LinkCalibration& {
    return network ? x.calibration.comm.network : x.calibration.comm.nvlink;
  };
  out.calibration = network ? s.calibration.comm.network : s.calibration.comm.nvlink;
  Scenario full = s;  // efficiency 1, no launch, no step
  cls(full).peak_efficiency = 1.0;
  cls(full).group_penalty = 0.0;
  cls(full).launch_latency = Time::zero();
  cls(full).step_latency = Time::zero();
  Scenario half = full;  // efficiency 1/2
  cls(half).peak_efficiency = 0.5;
  Scenario stepped = full;  // a step latency of 1 us
  cls(stepped).step_latency = Time::from_ps(1'000'000);
  std::vector<Linearised> rows;
  std::set<int> group_sizes;
  std::set<long long> step_counts;
  for (const NcclTestsLog& log : logs) {
    if ((nccl_tests_nodes(log) > 1) != network) continue;
    const std::vector<double> w = row_weights(log);
    const std::vector<int> gpus = nccl_tests_gpus(log, s);
    bool used = false;
    for (std::size_t i = 0; i < log.rows.size(); ++i) {
      if (w[i] <= 0) continue;
      const double t1 = time_nccl_tests_row(full, topo, log, gpus, log.rows[i].size).seconds();
      const double t2 = time_nccl_tests_row(half, topo, log, gpus, log.rows[i].size).seconds();
      const double t3 = time_nccl_tests_row(stepped, topo, log, gpus, log.rows[i].size).seconds();
      Linearised r;
      r.group_size = static_cast<int>(log.ranks.size());
      r.b = std::max(0.0, t2 - t1);
      r.a = std::max(0.0, t1 - r.b);
      r.k = std::max(0.0, (t3 - t1) / 1e-6);
      r.measured = log.rows[i].measured;
      r.weight = w[i];
      rows.push_back(r);
      group_sizes.insert(r.group_size);
      step_counts.insert(std::llround(r.k));
      used = true;
      ++out.rows;
    }
    if (used) ++out.files;
  }
  if (rows.empty()) return out;
  // The group penalty when the runs hold two group sizes or more; otherwise
  // the scenario's, with the peak fit under it (one size cannot tell them
  // apart, and a penalty of 0 would move every other size).
  const bool penalty = group_sizes.size() >= 2;
  out.penalty_fitted = penalty;
  out.smallest_group = *group_sizes.begin();
  out.largest_group = *group_sizes.rbegin();
  const double fixed_penalty = out.calibration.group_penalty;
  // The step latency when the runs hold two step counts or more (a launch
  // and a step are then told apart); otherwise the scenario's.
  double step = out.calibration.step_latency.seconds();
  if (step_counts.size() >= 2) {
    out.step_fitted = true;
    double best = 1e300;
    double lo = 0.0;
    double width = 50e-6;  // 0 to 50 us
    for (int round = 0; round < 3; ++round) {
      const double grid = width / 100;
      const double from = lo;
      for (int i = 0; i <= 100; ++i) {
        const double x = from + i * grid;
        if (x < 0) continue;
        double obj = 0;
        (void)fit_at_step(rows, x, penalty, fixed_penalty, &obj);
        if (obj < best) {  // ties keep the smaller step: deterministic
          best = obj;
          step = x;
        }
      }
      lo = step - grid;
      width = 2 * grid;
    }
  }
  const engine::LinkCalibration fit = fit_at_step(rows, step, penalty, fixed_penalty, nullptr);
  out.calibration.peak_efficiency = fit.peak_efficiency;
  out.calibration.group_penalty = fit.group_penalty;
  out.calibration.launch_latency = fit.launch_latency;
  out.calibration.step_latency = Time::from_ps_rounded(step * 1e12);
  out.fitted = true;
  return out;
}

}  // namespace

NcclTestsFit fit_nccl_tests(const Scenario& s, const topology::Topology& topo,
                            const std::vector<NcclTestsLog>& logs, bool nvlink, bool network) {
  NcclTestsFit out;
  Scenario with = s;
  if (nvlink) {
    out.nvlink = fit_class(s, topo, logs, false);
    with.calibration.comm.nvlink = out.nvlink.calibration;
  }
  if (network) out.network = fit_class(with, topo, logs, true);
  return out;
}

}  // namespace tessera::study
