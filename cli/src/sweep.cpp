// tessera sweep: one scenario, a grid of --set values, one CSV row per point.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "tessera/cli/args.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/cli/interrupt.hpp"
#include "tessera/study/pipeline.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/files.hpp"

namespace tessera::cli {

namespace {

struct Axis {
  std::string key;
  std::vector<std::string> values;
};

struct Point {
  std::size_t index = 0;
  std::vector<Override> overrides;
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);) out.push_back(item);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

/// The cartesian product of the axes, first axis outermost.
std::vector<Point> grid(const std::vector<Axis>& axes) {
  std::vector<Point> points{Point{}};
  for (const Axis& a : axes) {
    std::vector<Point> next;
    for (const Point& p : points) {
      for (const std::string& v : a.values) {
        Point q = p;
        q.overrides.push_back(Override{a.key, v});
        next.push_back(std::move(q));
      }
    }
    points = std::move(next);
  }
  for (std::size_t i = 0; i < points.size(); ++i) points[i].index = i;
  return points;
}

std::string label(const Point& p) {
  std::string s;
  for (const auto& o : p.overrides) s += (s.empty() ? "" : " ") + o.path + "=" + o.value;
  return s;
}

// The metric columns after the swept keys, in order; offsets from the first.
constexpr const char* kMetricNames =
    "gpus,iteration_time_s,compute_time_s,host_time_s,bubble_time_s,exposed_comm_time_s,tflops_per_gpu,"
    "tokens_per_s,peak_memory_bytes,oom";
constexpr std::size_t kMetricColumns = 10;
enum MetricColumn : std::size_t { kGpus = 0, kIteration = 1, kTflops = 6, kTokens = 7 };

std::string csv_header(const std::vector<Axis>& axes) {
  std::string h = "point";
  for (const Axis& a : axes) h += "," + a.key;
  return h + "," + kMetricNames;
}

std::string csv_row(const Point& p, const RunReport& r) {
  std::string row = std::to_string(p.index);
  for (const auto& o : p.overrides) row += "," + o.value;
  Bytes peak;
  for (const auto& m : r.memory) peak = std::max(peak, m.total);
  return row + fmt::format(",{},{:.9e},{:.9e},{:.9e},{:.9e},{:.9e},{:.6f},{:.3f},{},{}", r.gpus,
                           r.iteration_time.seconds(), r.compute_time.seconds(), r.host_time.seconds(),
                           r.bubble_time.seconds(), r.exposed_comm_time.seconds(), r.tflops_per_gpu,
                           r.tokens_per_second, peak.count(), r.oom() ? 1 : 0);
}

/// Whether the last kMetricColumns cells of a split row are finite numbers.
bool metrics_are_numbers(const std::vector<std::string>& cols) {
  if (cols.size() < kMetricColumns) return false;
  for (std::size_t m = cols.size() - kMetricColumns; m < cols.size(); ++m) {
    const std::string& c = cols[m];
    char* end = nullptr;
    const double v = std::strtod(c.c_str(), &end);
    if (c.empty() || end == nullptr || *end != '\0' || !std::isfinite(v)) return false;
  }
  return true;
}

/// Whether `row` (split) is a finished row of `p`: its settings are the
/// point's and every metric is a number.
bool row_of_point(const std::vector<std::string>& cols, const Point& p) {
  if (cols.size() != 1 + p.overrides.size() + kMetricColumns) return false;
  for (std::size_t a = 0; a < p.overrides.size(); ++a) {
    if (cols[1 + a] != p.overrides[a].value) return false;
  }
  return metrics_are_numbers(cols);
}

/// Whether a split row's first cell is a point index (digits).
bool is_point_index(const std::string& cell) {
  return !cell.empty() && cell.size() <= 18 && cell.find_first_not_of("0123456789") == std::string::npos;
}

/// Rows already in `path` from an interrupted run, by point index. Only
/// complete lines (newline-terminated) of a point of this sweep, with its
/// settings and numeric metrics, count; any other line is dropped and its
/// point simulated again.
std::map<std::size_t, std::string> read_finished(const std::string& path, const std::string& header,
                                                 const std::vector<Point>& points) {
  std::map<std::size_t, std::string> rows;
  std::ifstream in(path, std::ios::binary);
  if (!in) return rows;
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  if (text.empty()) return rows;
  // (`header` is the column line, after the shard line for a shard's CSV)
  const auto first_nl = header.size();
  if (text.compare(0, header.size() + 1, header + "\n") != 0) {
    throw InputError(fmt::format("--out {}: the file exists but is not a CSV of this sweep (different columns); "
                                 "remove it or choose another --out",
                                 path));
  }
  const auto fields = split(header.substr(header.rfind('\n') == std::string::npos ? 0 : header.rfind('\n') + 1), ',').size();
  std::size_t pos = first_nl + 1;
  while (pos < text.size()) {
    const auto nl = text.find('\n', pos);
    if (nl == std::string::npos) break;  // a partial last line: redo that point
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    const auto cols = split(line, ',');
    if (cols.size() != fields || !is_point_index(cols[0])) continue;
    const auto idx = static_cast<std::size_t>(std::stoull(cols[0]));
    if (idx >= points.size() || !row_of_point(cols, points[idx])) continue;
    rows[idx] = line;
  }
  return rows;
}

/// Chart of a finished sweep from its CSV rows (point order); `axes` is the
/// number of swept keys (the columns after `point`).
std::string svg_chart(const std::map<std::size_t, std::string>& rows, std::size_t axes, const std::string& title) {
  // Two panels: throughput (tokens/s) and parallel efficiency per GPU
  // relative to the first point.
  std::vector<double> tput, eff;
  std::vector<std::string> labels;
  double base = 0;
  for (const auto& [index, row] : rows) {
    const auto cols = split(row, ',');
    const std::size_t m0 = cols.size() - kMetricColumns;
    const double gpus = std::stod(cols[m0 + kGpus]);
    const double t = std::stod(cols[m0 + kTokens]);
    if (tput.empty()) base = t / gpus;
    tput.push_back(t);
    eff.push_back(base > 0 ? (t / gpus) / base : 0.0);
    std::string l;
    for (std::size_t a = 1; a <= axes && a < cols.size(); ++a) l += (l.empty() ? "" : ",") + cols[a];
    labels.push_back(l);
  }
  const int w = 420, h = 300, pad = 55;
  auto panel = [&](int x0, const std::vector<double>& ys, const std::string& name, bool unit_max) {
    double ymax = unit_max ? 1.2 : 0;
    for (double y : ys) ymax = std::max(ymax, y);
    if (ymax <= 0) ymax = 1;
    std::string s = fmt::format(R"svg(<g transform="translate({},30)">)svg", x0);
    s += fmt::format(R"(<rect x="{}" y="0" width="{}" height="{}" fill="none" stroke="#999"/>)", pad, w - pad - 10,
                     h - pad);
    s += fmt::format(R"(<text x="{}" y="-8" font-size="13" text-anchor="middle">{}</text>)", (w + pad) / 2, name);
    std::string poly;
    const std::size_t n = ys.size();
    for (std::size_t i = 0; i < n; ++i) {
      const double x = pad + (n == 1 ? 0.5 : static_cast<double>(i) / static_cast<double>(n - 1)) * (w - pad - 30) + 10;
      const double y = (h - pad) * (1 - ys[i] / ymax);
      poly += fmt::format("{:.1f},{:.1f} ", x, y);
      s += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="3" fill="#1f77b4"/>)", x, y);
      s += fmt::format(R"(<text x="{:.1f}" y="{}" font-size="10" text-anchor="middle">{}</text>)", x, h - pad + 14,
                       labels[i]);
    }
    s += fmt::format(R"(<polyline points="{}" fill="none" stroke="#1f77b4" stroke-width="2"/>)", poly);
    for (int k = 0; k <= 4; ++k) {
      const double v = ymax * k / 4;
      s += fmt::format(R"(<text x="{}" y="{:.1f}" font-size="10" text-anchor="end">{:.3g}</text>)", pad - 4,
                       (h - pad) * (1 - static_cast<double>(k) / 4) + 3, v);
    }
    return s + "</g>";
  };
  std::string svg = fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif">)",
                                2 * w + 20, h + 30);
  svg += fmt::format(R"(<text x="10" y="16" font-size="12">{}</text>)", title);
  svg += panel(0, tput, "throughput (tokens/s)", false);
  svg += panel(w + 20, eff, "parallel efficiency per GPU (vs first point)", true);
  return svg + "</svg>\n";
}

struct Shard {
  std::size_t index = 0;
  std::size_t count = 1;
};

/// "I/N", or "auto": the rank and size a Slurm job array or an MPI launcher
/// (Open MPI, MPICH/PMI) gives the process.
Shard parse_shard(const std::string& text) {
  auto number = [&](const std::string& v, const std::string& what) -> std::size_t {
    // Digits only (a sign would wrap), at most a million shards.
    if (v.empty() || v.size() > 7 || v.find_first_not_of("0123456789") != std::string::npos) {
      throw UsageError(fmt::format("tessera sweep: --shard {}: {} '{}' is not a whole number from 0 to 1000000",
                                   text, what, v));
    }
    const std::size_t x = std::stoul(v);
    if (x > 1'000'000) {
      throw UsageError(fmt::format("tessera sweep: --shard {}: {} '{}' is not a whole number from 0 to 1000000",
                                   text, what, v));
    }
    return x;
  };
  Shard sh;
  if (text == "auto") {
    const std::pair<const char*, const char*> sources[] = {{"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT"},
                                                           {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                                           {"PMI_RANK", "PMI_SIZE"}};
    bool found = false;
    for (const auto& [rank, size] : sources) {
      const char* r = std::getenv(rank);
      const char* n = std::getenv(size);
      if (r == nullptr || n == nullptr) continue;
      sh.index = number(r, rank);
      sh.count = number(n, size);
      found = true;
      break;
    }
    if (!found) {
      throw UsageError("tessera sweep: --shard auto: no Slurm array (SLURM_ARRAY_TASK_ID/COUNT) or MPI "
                       "(OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE) variables in the environment");
    }
  } else {
    const auto slash = text.find('/');
    if (slash == std::string::npos) throw UsageError(fmt::format("tessera sweep: --shard {}: expected I/N or auto", text));
    sh.index = number(text.substr(0, slash), "I");
    sh.count = number(text.substr(slash + 1), "N");
  }
  if (sh.count == 0 || sh.index >= sh.count) {
    throw UsageError(fmt::format("tessera sweep: --shard {}: need 0 <= I < N (got I={}, N={})", text, sh.index, sh.count));
  }
  return sh;
}


}  // namespace

namespace {

/// Identifies a sweep: FNV-1a of the scenario text and the swept settings,
/// as 16 hex digits. Shards of one sweep carry the same one.
std::string sweep_id(const std::string& text, const std::vector<Axis>& axes, const std::vector<Override>& fixed) {
  std::uint64_t h = 1469598103934665603ULL;
  auto add = [&](std::string_view s) {
    for (const char c : s) {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ULL;
    }
    h ^= 0xFF;  // separator
    h *= 1099511628211ULL;
  };
  add(text);
  for (const Axis& a : axes) {
    add(a.key);
    for (const auto& v : a.values) add(v);
  }
  for (const Override& o : fixed) {
    add(o.path);
    add(o.value);
  }
  return fmt::format("{:016x}", h);
}

/// The first line of a shard's CSV (before the column names): which sweep,
/// which shard, how many points in all. sweep-merge checks it.
std::string shard_line(const std::string& id, const Shard& s, std::size_t points) {
  return fmt::format("# tessera sweep {} shard {}/{} of {} points", id, s.index, s.count, points);
}

}  // namespace

int cmd_sweep(const Args& args, std::ostream& out) {
  ArgParser p("tessera sweep");
  p.option("out").option("svg").option("jobs").option("shard");
  declare_scenario_options(p);
  // --set may repeat: collect them by hand before strict parsing.
  std::vector<Axis> axes;
  Args rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string value;
    if (args[i] == "--set" && i + 1 < args.size()) {
      value = args[++i];
    } else if (args[i].rfind("--set=", 0) == 0) {
      value = args[i].substr(6);
    } else {
      rest.push_back(args[i]);
      continue;
    }
    const Override o = parse_override(value);
    Axis a{o.path, split(o.value, ',')};
    for (const auto& v : a.values) {
      if (v.empty()) throw UsageError(fmt::format("tessera sweep: --set {}: empty value in the list", value));
    }
    axes.push_back(std::move(a));
  }
  p.parse(rest);
  p.expect_positional(1, "a scenario file");
  if (axes.empty()) throw UsageError("tessera sweep: give at least one --set key=v1,v2,...");
  const std::string scenario_path = p.positional()[0];
  const std::string stem = std::filesystem::path(scenario_path).stem().string();
  const std::optional<Shard> shard = p.get("shard") ? std::optional(parse_shard(*p.get("shard"))) : std::nullopt;
  const std::string csv_path = p.get("out").value_or(
      shard ? fmt::format("{}-sweep.shard{}of{}.csv", stem, shard->index, shard->count) : stem + "-sweep.csv");
  const std::string svg_path = p.get("svg").value_or(
      std::filesystem::path(csv_path).replace_extension(".svg").string());
  // Options and files are checked before anything is written.
  unsigned jobs = std::max(1U, std::thread::hardware_concurrency());
  if (auto j = p.get("jobs")) jobs = static_cast<unsigned>(parse_positive_int(*j, "--jobs", 4096));
  FileSet files;
  files.input(scenario_path, "the scenario");
  files.output(csv_path, "--out");
  files.output(svg_path, "--svg");

  // Validate every point before simulating any.
  const std::string text = read_scenario_text(scenario_path);
  const std::vector<Point> points = grid(axes);
  // --backend and --predictor hold for every point.
  const std::vector<Override> fixed = scenario_overrides({}, p);
  std::vector<Scenario> scenarios;
  for (const Point& pt : points) {
    std::vector<Override> o = pt.overrides;
    o.insert(o.end(), fixed.begin(), fixed.end());
    scenarios.push_back(parse_scenario(text, scenario_path, o));
    require_single_job(scenarios.back(), "sweep");
    check_work(scenarios.back());
  }

  // A shard's CSV starts with a line naming its sweep and shard.
  const std::string header =
      shard ? shard_line(sweep_id(text, axes, fixed), *shard, points.size()) + "\n" + csv_header(axes) : csv_header(axes);
  std::map<std::size_t, std::string> rows = read_finished(csv_path, header, points);
  std::vector<std::size_t> todo;
  // A shard owns the points whose index is its own modulo the shard count.
  auto mine = [&](std::size_t index) { return !shard || index % shard->count == shard->index; };
  std::size_t owned = 0;
  for (const Point& pt : points) {
    if (!mine(pt.index)) continue;
    ++owned;
    if (rows.count(pt.index) == 0U) todo.push_back(pt.index);
  }
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  if (!rows.empty()) {
    std::cerr << fmt::format("sweep: resuming {}: {} of {} points already done\n", csv_path, rows.size(), owned);
  }
  {
    // Rewrite what is kept (drops a partial last line), then append as points finish.
    std::string kept = header + "\n";
    for (const auto& [i, row] : rows) kept += row + "\n";
    write_file_atomic(csv_path, kept);
  }

  // A backend whose runs cannot overlap (ns-3: one Simulator per process):
  // its points run one at a time.
  const BackendRegistry backends = built_in_backends();
  const bool serial = std::any_of(scenarios.begin(), scenarios.end(), [&](const Scenario& s) {
    return !backends.at(s.backend.name).concurrent_runs();
  });
  if (serial) jobs = 1;
  jobs = std::min<unsigned>(jobs, static_cast<unsigned>(std::max<std::size_t>(1, todo.size())));

  std::mutex mu;
  std::atomic<std::size_t> next{0};
  std::size_t done = rows.size();
  std::optional<std::string> first_error;
  std::ofstream csv(csv_path, std::ios::app | std::ios::binary);
  say_on_interrupt(fmt::format("finished points are kept in {}; run the same command again to resume", csv_path));
  auto progress = [&] {
    if (!tty) return;
    const int width = 30;
    const auto filled = static_cast<int>(width * done / std::max<std::size_t>(owned, 1));
    std::cerr << fmt::format("\rsweep [{}{}] {}/{} points", std::string(static_cast<std::size_t>(filled), '#'),
                             std::string(static_cast<std::size_t>(width - filled), ' '), done, owned)
              << std::flush;
  };
  auto worker = [&] {
    for (;;) {
      const std::size_t k = next.fetch_add(1);
      if (k >= todo.size()) return;
      {
        std::lock_guard lock(mu);
        if (first_error) return;
      }
      const Point& pt = points[todo[k]];
      try {
        const Simulation sim = simulate_scenario(scenarios[pt.index]);
        const std::string row = csv_row(pt, make_report(scenarios[pt.index], sim));
        std::lock_guard lock(mu);
        csv << row << '\n' << std::flush;
        rows[pt.index] = row;
        ++done;
        progress();
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        if (!first_error) first_error = fmt::format("sweep point {} ({}): {}", pt.index, label(pt), e.what());
      }
    }
  };
  progress();
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < jobs; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  csv.close();
  if (tty) std::cerr << '\n';
  if (first_error) throw SimulationError(*first_error + " (finished points are kept; run again to resume)");

  // Final file: rows in point order, whatever order they finished in.
  std::string final_csv = header + "\n";
  for (const auto& [index, row] : rows) final_csv += row + "\n";
  write_file_atomic(csv_path, final_csv);
  if (shard) {
    out << fmt::format("shard {}/{}: {} of {} points written to {}; merge the shards with\n"
                       "  tessera sweep-merge --out {}-sweep.csv SHARD.csv...\n",
                       shard->index, shard->count, owned, points.size(), csv_path, stem);
    return 0;
  }
  write_file_atomic(svg_path, svg_chart(rows, axes.size(), fmt::format("tessera sweep {}", scenario_path)));

  out << fmt::format("{:>5}  {:<40} {:>6} {:>14} {:>12} {:>14}\n", "point", "settings", "GPUs", "iteration ms",
                     "TFLOP/s/GPU", "tokens/s");
  int oom = 0;
  for (const Point& pt : points) {
    const auto cols = split(rows.at(pt.index), ',');
    const std::size_t m0 = cols.size() - kMetricColumns;
    const bool does_not_fit = cols.back() == "1";
    oom += does_not_fit ? 1 : 0;
    out << fmt::format("{:>5}  {:<40} {:>6} {:>14.3f} {:>12.1f} {:>14.0f}{}\n", pt.index, label(pt), cols[m0 + kGpus],
                       std::stod(cols[m0 + kIteration]) * 1e3, std::stod(cols[m0 + kTflops]),
                       std::stod(cols[m0 + kTokens]), does_not_fit ? "  OOM" : "");
  }
  if (oom > 0) out << fmt::format("{} point(s) do not fit in GPU memory (OOM; peak_memory_bytes in the CSV)\n", oom);
  out << fmt::format("wrote {} and {}\n", csv_path, svg_path);
  return 0;
}

}  // namespace tessera::cli

namespace tessera::cli {

int cmd_sweep_merge(const Args& args, std::ostream& out) {
  ArgParser p("tessera sweep-merge");
  p.option("out").option("svg");
  p.parse(args);
  if (p.positional().empty()) throw UsageError("tessera sweep-merge: give the shard CSV files to merge");
  const std::string csv_path = p.require("out");
  const std::string svg_path =
      p.get("svg").value_or(std::filesystem::path(csv_path).replace_extension(".svg").string());
  FileSet files;
  for (const std::string& part : p.positional()) files.input(part, "a shard");
  files.output(csv_path, "--out");
  files.output(svg_path, "--svg");
  // Each shard starts with "# tessera sweep ID shard I/N of P points": all
  // must name the same sweep, every shard 0..N-1 must be there once, and
  // each must hold all of its points (a killed shard leaves some out).
  struct ShardFile {
    std::string id;
    std::size_t index = 0, count = 0, points = 0;
  };
  auto parse_shard_line = [](const std::string& line, const std::string& part) {
    ShardFile f;
    char id[17] = {};
    int used = 0;
    if (std::sscanf(line.c_str(), "# tessera sweep %16[0-9a-f] shard %zu/%zu of %zu points%n", id, &f.index,
                    &f.count, &f.points, &used) != 4 ||
        static_cast<std::size_t>(used) != line.size() || f.count == 0 || f.index >= f.count) {
      throw InputError(fmt::format("{}: not a shard CSV (its first line is not '# tessera sweep ID shard I/N of P "
                                   "points'; merge the files written by `sweep --shard`)",
                                   part));
    }
    f.id = id;
    return f;
  };
  std::string header;
  std::optional<ShardFile> first;
  std::map<std::size_t, std::string> shard_files;  // shard index -> file
  std::map<std::size_t, std::string> rows;
  for (const std::string& part : p.positional()) {
    const std::string text = read_input_file(part, "shard CSV");
    std::istringstream in(text);
    std::string line;
    std::getline(in, line);
    const ShardFile f = parse_shard_line(line, part);
    if (!first) first = f;
    if (f.id != first->id || f.count != first->count || f.points != first->points) {
      throw InputError(fmt::format("{}: a shard of another sweep (sweep {}, {} shards of {} points) than {} (sweep {}, "
                                   "{} shards of {} points)",
                                   part, f.id, f.count, f.points, p.positional().front(), first->id, first->count,
                                   first->points));
    }
    if (auto [it, fresh] = shard_files.emplace(f.index, part); !fresh) {
      throw InputError(fmt::format("{}: shard {}/{} is also given as {}", part, f.index, f.count, it->second));
    }
    std::string columns;
    std::getline(in, columns);
    if (header.empty()) header = columns;
    if (columns != header || split(header, ',').size() < kMetricColumns + 2 || header.rfind("point,", 0) != 0) {
      throw InputError(fmt::format("{}: its columns differ from {}'s", part, p.positional().front()));
    }
    const auto fields = split(header, ',').size();
    std::size_t line_no = 2;
    std::size_t held = 0;
    for (; std::getline(in, line);) {
      ++line_no;
      const auto cols = split(line, ',');
      if (cols.size() != fields || !is_point_index(cols[0]) || !metrics_are_numbers(cols)) {
        throw InputError(fmt::format("{}:{}: malformed row (expected a point index, {} settings and {} numbers)", part,
                                     line_no, fields - 1 - kMetricColumns, kMetricColumns));
      }
      const auto idx = static_cast<std::size_t>(std::stoull(cols[0]));
      if (idx >= f.points || idx % f.count != f.index) {
        throw InputError(fmt::format("{}:{}: point {} does not belong to shard {}/{} of {} points", part, line_no, idx,
                                     f.index, f.count, f.points));
      }
      if (!rows.emplace(idx, line).second) {
        throw InputError(fmt::format("{}:{}: point {} is given twice", part, line_no, idx));
      }
      ++held;
    }
    const std::size_t owned = f.points > f.index ? (f.points - f.index + f.count - 1) / f.count : 0;
    if (held != owned) {
      std::size_t missing = f.index;
      while (rows.count(missing) != 0U) missing += f.count;
      throw InputError(fmt::format("{}: shard {}/{} holds {} of its {} points (point {} is missing: has the shard "
                                   "finished? run it again to resume)",
                                   part, f.index, f.count, held, owned, missing));
    }
  }
  for (std::size_t i = 0; i < first->count; ++i) {
    if (shard_files.count(i) == 0U) {
      throw InputError(fmt::format("tessera sweep-merge: shard {}/{} of sweep {} is missing (give all {} shard files)",
                                   i, first->count, first->id, first->count));
    }
  }
  if (rows.empty()) throw InputError("tessera sweep-merge: the shards hold no points");
  std::string merged = header + "\n";
  for (const auto& [idx, row] : rows) merged += row + "\n";
  write_file_atomic(csv_path, merged);
  const std::size_t axes = split(header, ',').size() - 1 - kMetricColumns;
  write_file_atomic(svg_path, svg_chart(rows, axes, "tessera sweep-merge"));
  out << fmt::format("merged {} points from {} shards into {} and {}\n", rows.size(), p.positional().size(), csv_path,
                     svg_path);
  return 0;
}

}  // namespace tessera::cli
