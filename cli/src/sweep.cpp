// tessera sweep: one scenario, a grid of --set values, one CSV row per point.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "tessera/cli/args.hpp"
#include "tessera/cli/chart.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/cli/interrupt.hpp"
#include "tessera/cli/parallel.hpp"
#include "tessera/cli/progress.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/files.hpp"
#include "tessera/names.hpp"
#include "tessera/node_model/predictors.hpp"
#include "tessera/study/pipeline.hpp"

namespace tessera::cli {

namespace {

struct Axis {
  std::string key;
  std::vector<std::string> values;

  bool operator==(const Axis&) const = default;
};

struct Point {
  std::size_t index = 0;
  std::vector<Override> overrides;
};

/// The points of the grid of `axes` (the cartesian product; `zip`: point i
/// takes every axis's i-th value, a list of one value holding for every
/// point), without making it (saturating at SIZE_MAX).
std::size_t grid_size(const std::vector<Axis>& axes, bool zip) {
  std::size_t n = zip ? 0 : 1;
  for (const Axis& a : axes) {
    const std::size_t m = a.values.size();
    if (zip) {
      n = std::max(n, m);
    } else {
      n = m != 0 && n > std::numeric_limits<std::size_t>::max() / m ? std::numeric_limits<std::size_t>::max()
                                                                    : n * m;
    }
  }
  return n;
}

/// Point `index`'s value of each axis (the first axis outermost), without
/// making the grid; `index` < grid_size(axes, zip). The one definition of a
/// point's settings: grid() and sweep-merge's check of a shard's rows.
std::vector<std::string> grid_values(const std::vector<Axis>& axes, bool zip, std::size_t index) {
  std::vector<std::string> values(axes.size());
  for (std::size_t k = axes.size(); k-- > 0;) {
    const auto& v = axes[k].values;
    if (zip) {
      values[k] = v[std::min(index, v.size() - 1)];
    } else {
      values[k] = v[index % v.size()];
      index /= v.size();
    }
  }
  return values;
}

/// The grid's points (grid_size, grid_values), each with its index.
std::vector<Point> grid(const std::vector<Axis>& axes, bool zip) {
  std::vector<Point> points(grid_size(axes, zip));
  for (std::size_t i = 0; i < points.size(); ++i) {
    points[i].index = i;
    const std::vector<std::string> values = grid_values(axes, zip, i);
    points[i].overrides.reserve(axes.size());
    for (std::size_t k = 0; k < axes.size(); ++k)
      points[i].overrides.push_back(Override{axes[k].key, values[k]});
  }
  return points;
}

/// The point's settings as `key=value` words, in axis order; with `only`,
/// those of the axes it marks alone.
std::string label(const Point& p, const std::vector<bool>* only = nullptr) {
  std::string s;
  for (std::size_t a = 0; a < p.overrides.size(); ++a) {
    if (only != nullptr && (a >= only->size() || !(*only)[a])) continue;
    s += (s.empty() ? "" : " ") + p.overrides[a].path + "=" + p.overrides[a].value;
  }
  return s;
}

// The metric columns after the swept keys, in order; offsets from the first.
// The plan each point ran (dp, tp, pp, micro-batches: what `dp=auto` or a
// node count chose), its MFU, the sequences per iteration (a weak-scaling
// table's batch), expert parallelism (1 for a dense model), HFU, the
// fullest stage's GPU memory and the model chunks per pipeline rank (what
// `virtual_stages: auto` chose under interleaved-1f1b; helper 60: a sweep
// over schedules did not say), the bytes sent per iteration, all, within
// nodes and between them (run --json's; helper 99: a sweep over plans or
// fabrics had no traffic to compare), then, with `training.tokens`, the whole
// training run at the point's throughput (tokens, days, GPU-hours and, with
// a price, cost: empty cells where the point has none, or does not fit;
// helpers 64 and 70: the table had them, the CSV not) close the row.
constexpr const char* kMetricNames =
    "gpus,fabric_tiers,iteration_time_s,compute_time_s,host_time_s,bubble_time_s,exposed_comm_time_s,"
    "tflops_per_gpu,tokens_per_s,peak_memory_bytes,oom,dp,tp,pp,micro_batches,mfu,global_batch,ep,hfu,"
    "memory_capacity_bytes,virtual_stages,network_bytes,nvlink_bytes,fabric_bytes,training_tokens,training_"
    "days,"
    "gpu_hours,cost";
constexpr std::size_t kMetricColumns = 28;
enum MetricColumn : std::size_t {
  kGpus = 0,
  kIteration = 2,
  kTflops = 7,
  kTokens = 8,
  kPeakMemory = 9,
  kOom = 10,
  kMemoryCapacity = 19,
  kVirtualStages = 20,
  kTrainingTokens = 24,  // the first of the training run's cells, which may be empty
  kTrainingDays = 25,
  kGpuHours = 26,
  kCost = 27
};

/// The training run's cells of a row, in plain decimals (a spreadsheet
/// shows 2.304220694e+06 as 2.30E+06; helper 73): the scenario's tokens
/// (`tokens`, 0: none, an empty cell), then the run's days, GPU-hours and
/// cost, empty without a run (out of memory: the tokens stay, so that an
/// empty run is not read as no tokens given).
std::string training_cells(double tokens, const std::optional<study::TrainingRun>& t) {
  const std::string given = tokens > 0 ? fmt::format("{:.0f}", tokens) : std::string();
  if (!t) return fmt::format(",{},,,", given);
  return fmt::format(",{},{:.9f},{:.3f},{}", given, t->days(), t->gpu_hours,
                     t->cost ? fmt::format("{:.3f}", *t->cost) : std::string());
}

/// A split row's training run, from its cells (nullopt where they are
/// empty): what the table, --json and sweep-merge show, so that they agree
/// with the CSV.
std::optional<study::TrainingRun> training_run_of(const std::vector<std::string>& cols) {
  const std::size_t m0 = cols.size() - kMetricColumns;
  if (cols[m0 + kTrainingTokens].empty() || cols[m0 + kTrainingDays].empty() ||
      cols[m0 + kGpuHours].empty()) {
    return std::nullopt;
  }
  study::TrainingRun t;
  t.tokens = std::stod(cols[m0 + kTrainingTokens]);
  t.seconds = std::stod(cols[m0 + kTrainingDays]) * 86400.0;
  t.gpu_hours = std::stod(cols[m0 + kGpuHours]);
  if (!cols[m0 + kCost].empty()) t.cost = std::stod(cols[m0 + kCost]);
  return t;
}

/// Each finished row's training run, by point (the rows that have one).
std::map<std::size_t, study::TrainingRun> training_runs(const std::map<std::size_t, std::string>& rows) {
  std::map<std::size_t, study::TrainingRun> runs;
  for (const auto& [index, row] : rows) {
    if (auto t = training_run_of(split(row, ','))) runs.emplace(index, *t);
  }
  return runs;
}

std::string csv_header(const std::vector<Axis>& axes) {
  std::string h = "point";
  for (const Axis& a : axes) h += "," + a.key;
  return h + "," + kMetricNames;
}

std::string csv_row(const Point& p, const RunReport& r, double training_tokens) {
  std::string row = std::to_string(p.index);
  for (const auto& o : p.overrides) row += "," + o.value;
  const StageMemory fullest = r.fullest_stage();
  return row + fmt::format(
                   // gpus, fabric_tiers, the iteration split, tflops_per_gpu,
                   // tokens_per_s, peak_memory_bytes, oom, the plan, mfu,
                   // global_batch, ep, hfu, memory_capacity_bytes, virtual_stages,
                   // the bytes sent, then the training run's cells
                   ",{},{},"
                   "{:.9e},{:.9e},{:.9e},{:.9e},{:.9e},"
                   "{:.6f},{:.3f},{},{},"
                   "{},{},{},{},{:.6f},"
                   "{},{},{:.6f},{},{},{},{},{}{}",
                   r.gpus, r.fabric_tiers, r.iteration_time.seconds(), r.compute_time.seconds(),
                   r.host_time.seconds(), r.bubble_time.seconds(), r.exposed_comm_time.seconds(),
                   r.tflops_per_gpu, r.tokens_per_second, fullest.total.count(), r.oom() ? 1 : 0, r.dp, r.tp,
                   r.pp, r.micro_batches, r.mfu, r.global_batch, r.ep, r.hfu, fullest.capacity.count(),
                   r.virtual_stages, r.bytes_sent.count(), r.nvlink_bytes.count(), r.fabric_bytes.count(),
                   training_cells(training_tokens, r.oom() ? std::nullopt : r.training_run));
}

/// tessera run's warning for a row's plan when it fits in kTightMemoryShare
/// or more of its fullest stage's GPU memory, else empty.
std::string tight_row(const std::string& row) {
  const auto cols = split(row, ',');
  const std::size_t m0 = cols.size() - kMetricColumns;
  // As written (integers), or as a spreadsheet may have rewritten them
  // (3.2e10): metrics_are_numbers checked that they are numbers.
  const Bytes peak(std::llround(std::strtod(cols[m0 + kPeakMemory].c_str(), nullptr)));
  const Bytes capacity(std::llround(std::strtod(cols[m0 + kMemoryCapacity].c_str(), nullptr)));
  if (cols[m0 + kOom] == "1" || !tight_memory(peak, capacity)) return {};
  return tight_memory_text("its fullest stage", peak, capacity);
}

/// The first of the last kMetricColumns cells of a split row that is not
/// a finite number (the training run's may be empty), or none; a row too
/// short for the metrics gives its size.
std::optional<std::size_t> first_non_number_metric(const std::vector<std::string>& cols) {
  if (cols.size() < kMetricColumns) return cols.size();
  const std::size_t m0 = cols.size() - kMetricColumns;
  for (std::size_t m = m0; m < cols.size(); ++m) {
    const std::string& c = cols[m];
    if (c.empty() && m >= m0 + kTrainingTokens) continue;
    char* end = nullptr;
    const double v = std::strtod(c.c_str(), &end);
    // (every metric is a time, a count, bytes or a share: helper 179's
    // edited shard merged -1000 ms as an iteration)
    if (c.empty() || end == nullptr || *end != '\0' || !std::isfinite(v) || v < 0) return m;
  }
  return std::nullopt;
}

/// Whether the last kMetricColumns cells of a split row are finite numbers
/// (the training run's may be empty).
bool metrics_are_numbers(const std::vector<std::string>& cols) { return !first_non_number_metric(cols); }

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

/// An exclusive lock (flock) on a hidden file beside --out, `.NAME.lock`,
/// held while the sweep reads and writes --out: a second sweep on the same
/// file is refused instead of interleaving its rows with the first's, or
/// rewriting the file under it (helper 94). Removed when the sweep ends; one
/// left by an interrupted sweep holds no lock and is reused.
class OutLock {
 public:
  explicit OutLock(const std::string& out) {
    const std::filesystem::path p(out);
    path_ = (p.parent_path() / ("." + p.filename().string() + ".lock")).string();
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      throw InputError(
          fmt::format("--out {}: cannot create its lock file {}: {}", out, path_, std::strerror(errno)));
    }
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      throw InputError(fmt::format(
          "--out {}: another tessera sweep is writing it now (it holds {}); wait for it to finish, or choose "
          "another --out",
          out, path_));
    }
  }
  ~OutLock() {
    ::unlink(path_.c_str());
    ::close(fd_);
  }
  OutLock(const OutLock&) = delete;
  OutLock& operator=(const OutLock&) = delete;
  OutLock(OutLock&&) = delete;
  OutLock& operator=(OutLock&&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

/// The --out file's text as it is before the sweep writes it (empty when
/// there is none), read as every input is (read_input_file: whole, capped).
std::string existing_text(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return {};
  return read_input_file(path, "--out file");
}

/// What an existing --out file (`text`) holds for a sweep whose file starts
/// with `header` (its first line, then the columns, while it is unfinished).
enum class OutFile { Fresh, Unfinished, Finished };

/// Fresh: no file, or an empty one. Unfinished: this sweep's, interrupted
/// (resumed). Finished: an unsharded sweep's CSV with `columns` and no
/// first line, i.e. a sweep that finished (which one cannot be told: run
/// again and rewritten). Anything else, an unfinished sweep of another
/// scenario, other settings or another shard among them, is an error:
/// never a stale row.
OutFile out_file_state(const std::string& path, const std::string& text, const std::string& header,
                       const std::string& columns, bool sharded) {
  if (text.empty()) return OutFile::Fresh;
  if (text.compare(0, header.size() + 1, header + "\n") == 0) return OutFile::Unfinished;
  const std::string first = text.substr(0, text.find('\n'));
  if (first == header.substr(0, header.find('\n'))) {
    // This sweep, but columns another version of tessera wrote.
    throw InputError(
        fmt::format("--out {}: the file holds this sweep's points in other columns than this tessera "
                    "writes (an older version's?); remove it or choose another --out",
                    path));
  }
  if (first.rfind("# tessera sweep ", 0) == 0 && first.find(" shard ") != std::string::npos) {
    // A shard keeps this line when it finishes (sweep-merge reads it).
    throw InputError(
        fmt::format("--out {}: the file holds a shard of another sweep (another scenario or other settings), "
                    "or of this one "
                    "run with another --shard ('{}'); remove it or choose another --out",
                    path, first));
  }
  if (first.rfind("# tessera sweep ", 0) == 0) {
    throw InputError(
        fmt::format("--out {}: the file holds an unfinished sweep of another scenario, other settings "
                    "or another shard ('{}'); remove it or choose another --out",
                    path, first));
  }
  if (!sharded && text.compare(0, columns.size() + 1, columns + "\n") == 0) return OutFile::Finished;
  throw InputError(
      fmt::format("--out {}: the file exists but is not a CSV of this sweep (different columns); "
                  "remove it or choose another --out",
                  path));
}

/// The first line of an unsharded sweep's CSV while it runs (removed when
/// it finishes): which sweep it is, so that a resume takes only its rows.
std::string unfinished_line(const std::string& id, std::size_t points) {
  return fmt::format("# tessera sweep {} unfinished: {} points (run the same command to resume)", id, points);
}

/// Rows of an interrupted run in `text`, an Unfinished file of this sweep
/// (it starts with `header`), by point index. Only complete lines
/// (newline-terminated) of a point of this sweep, with its settings and
/// numeric metrics, count; any other line is dropped and its point
/// simulated again.
std::map<std::size_t, std::string> read_finished(const std::string& text, const std::string& header,
                                                 const std::vector<Point>& points) {
  std::map<std::size_t, std::string> rows;
  std::size_t pos = header.size() + 1;
  while (pos < text.size()) {
    const auto nl = text.find('\n', pos);
    if (nl == std::string::npos) break;  // a partial last line: redo that point
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    const auto cols = split(line, ',');
    if (cols.empty() || !is_point_index(cols[0])) continue;
    const auto idx = static_cast<std::size_t>(std::stoull(cols[0]));
    if (idx >= points.size() || !row_of_point(cols, points[idx])) continue;
    rows[idx] = line;
  }
  return rows;
}

/// Whether every value parses as a finite number; the numbers in `out`.
bool all_numbers(const std::vector<std::string>& values, std::vector<double>& out) {
  out.clear();
  for (const std::string& v : values) {
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    if (v.empty() || end == nullptr || *end != '\0' || !std::isfinite(d)) return false;
    out.push_back(d);
  }
  return true;
}

/// tessera run's caveats of a sweep's points: each distinct Untested GPU
/// note and each distinct GPU's Known bias (16-bit on Hopper) with the
/// points it holds for, and the points with a plan's Known bias (4-way or
/// wider tensor parallelism; the widest's note is quoted).
struct SweepCaveats {
  std::size_t points = 0;
  const std::vector<Point>* all = nullptr;  ///< the sweep's points, for which_on_chart
  HeldNotes untested;               ///< each note with its points
  HeldNotes gpu_bias;               ///< each note with its points
  HeldNotes attention;              ///< flash_attention_note (pessimistic, unlike the GPUs')
  HeldNotes fp8;                    ///< fp8_note (unvalidated FP8 GEMM times)
  HeldNotes scale;                  ///< kMultiNodeCaveat, held by the points on more than one node
  HeldNotes warnings;               ///< each scenario warning (tessera run's) with its points
  HeldNotes models;                 ///< "P node model, B network backend" with its points
  /// Each leaf oversubscription ("2:1") with its points: a point whose
  /// leaves' up-links carry less than their hosts can send is capped there
  /// (helper 80: a sweep over the HCAs' speed at fixed spines levelled off
  /// with nothing saying why; tessera run's Scenario line says so).
  HeldNotes oversubscribed;
  HeldNotes spines_oversubscribed;  ///< a fat-tree's spine tier (core links below leaf links)
  std::vector<std::string> biased;  ///< points with a plan's known bias
  int narrowest_tp = 0, widest_tp = 0;
  std::string widest_bias;  ///< known_bias_note of the widest tensor parallelism
  /// `cluster.fabric.tiers: auto`: the fewest and most GPUs of the points
  /// of each tier count chosen (said only when the points differ: a kink in
  /// the curve may be the tier).
  std::map<int, std::pair<int, int>> tiers;
  bool rail_tiers = false;  ///< the fabric is rail-optimized (tiers and spines said as a rail fabric's)
  /// The points' GPU counts and global batches (sequences; 0: one
  /// micro-batch per replica): a sweep over GPUs at one global batch says
  /// so (helper 70: its chart's efficiency fell with the micro-batches per
  /// pipeline, which nothing on it named).
  std::set<int> gpus;
  std::set<std::int64_t> global_batches;

  /// The one global batch of points with different GPU counts, else 0.
  [[nodiscard]] std::int64_t fixed_global_batch() const {
    return gpus.size() > 1 && global_batches.size() == 1 ? *global_batches.begin() : 0;
  }

  [[nodiscard]] std::string tiers_by_gpus() const {
    std::vector<std::string> parts;
    for (const auto& [n, gpus] : tiers) {
      parts.push_back(gpus.first == gpus.second
                          ? fmt::format("{} tiers at {} GPUs", n, gpus.first)
                          : fmt::format("{} tiers at {} to {} GPUs", n, gpus.first, gpus.second));
    }
    return fmt::format("{}", fmt::join(parts, ", "));
  }

  /// "every point", "point 1" or "points 1, 2".
  [[nodiscard]] std::string which(const std::vector<std::string>& pts) const {
    return pts.size() == points ? std::string("every point")
                                : fmt::format("point{} {}", pts.size() > 1 ? "s" : "", fmt::join(pts, ", "));
  }
  /// `pts` for a reader of the chart, which shows no point numbers: by the
  /// values of one swept key when they are exactly the points with those
  /// values ("points with parallelism.tp=4, 8"), else by their numbers, as
  /// the CSV's point column has them.
  [[nodiscard]] std::string which_on_chart(const std::vector<std::string>& pts) const {
    if (pts.size() == points || all == nullptr || all->empty()) return which(pts);
    std::set<std::size_t> in;
    for (const std::string& p : pts) in.insert(static_cast<std::size_t>(std::stoull(p)));
    for (std::size_t k = 0; k < all->front().overrides.size(); ++k) {
      std::set<std::string> values;
      // (`all` holds the points that ran, by grid number: --skip-invalid may leave gaps)
      for (const Point& pt : *all) {
        if (in.count(pt.index) != 0) values.insert(pt.overrides[k].value);
      }
      bool exact = true;
      std::vector<std::string> ordered;  // in the sweep's order
      for (const Point& pt : *all) {
        const std::string& v = pt.overrides[k].value;
        const bool has = values.count(v) != 0;
        if (has != (in.count(pt.index) != 0)) {
          exact = false;
          break;
        }
        if (has && std::find(ordered.begin(), ordered.end(), v) == ordered.end()) ordered.push_back(v);
      }
      if (exact)
        return fmt::format("points with {}={}", all->front().overrides[k].path, fmt::join(ordered, ", "));
    }
    return which(pts) + " (the CSV's point column)";
  }
  /// The tensor parallelism of the biased points, as the notes name it:
  /// "8", or "4- to 8" where they differ.
  [[nodiscard]] std::string tp_widths() const {
    return narrowest_tp == widest_tp ? std::to_string(widest_tp)
                                     : fmt::format("{}- to {}", narrowest_tp, widest_tp);
  }
  /// The plan's known bias of the biased points: the widest's note, headed
  /// by every width they have ("4- to 8-way tensor parallelism: ...", as the
  /// chart says it; helper 157: "8-way" headed a note said of every point,
  /// half of them 4-way).
  [[nodiscard]] std::string tp_bias() const {
    const std::string head = fmt::format("{}-way ", widest_tp);
    if (narrowest_tp == widest_tp || !widest_bias.starts_with(head)) return widest_bias;
    return fmt::format("{}-way {}", tp_widths(), widest_bias.substr(head.size()));
  }
  /// The warnings tessera run prints on stderr about the points' settings,
  /// a line each with the points it holds for ("warning for points 0, 3:
  /// ..."): after the table of sweep, and of sweep-merge from a shard's
  /// kSweepWarning lines.
  [[nodiscard]] std::vector<std::string> warning_lines() const {
    std::vector<std::string> out;
    for (const auto& [w, pts] : warnings.entries) {
      out.push_back(pts.size() == points ? fmt::format("warning (every point): {}", w)
                                         : fmt::format("warning for {}: {}", which(pts), w));
    }
    return out;
  }
  /// Short lines for under the chart, for a reader of the chart alone.
  [[nodiscard]] std::vector<std::string> chart_notes() const {
    std::vector<std::string> out;
    // Which models drew it (helper 121: an ns-3 chart looked like a flow one).
    for (const auto& [note, pts] : models.entries) {
      out.push_back(models.entries.size() == 1 ? "Models: " + note
                                               : fmt::format("Models ({}): {}", which_on_chart(pts), note));
    }
    for (const auto& [note, pts] : untested.entries)
      out.push_back(chart_untested_note(which_on_chart(pts), note));
    // tessera run's warnings, their opening words (helper 176: a dip the
    // table's warning explained was unexplained on the chart).
    for (const auto& [w, pts] : warnings.entries) {
      constexpr std::size_t kShort = 40, kLong = 96;
      std::string head = w;
      if (head.size() > kLong) {
        std::size_t cut = std::string::npos;  // the first clause's end past its opening words
        for (const char* sep : {" (", "; ", ": ", ", "}) {
          if (const std::size_t p = head.find(sep, kShort); p <= kLong) cut = std::min(cut, p);
        }
        head =
            cut != std::string::npos ? head.substr(0, cut) : head.substr(0, head.rfind(' ', kLong)) + " ...";
      }
      out.push_back(fmt::format("Warning ({}): {} (the table's notes and --json say it all)",
                                which_on_chart(pts), head));
    }
    for (const auto& [note, pts] : gpu_bias.entries)
      out.push_back(chart_gpu_bias_note(which_on_chart(pts), note));
    for (const auto& [note, pts] : attention.entries)
      out.push_back(chart_attention_note(which_on_chart(pts)));
    for (const auto& [note, pts] : fp8.entries) out.push_back(chart_fp8_note(which_on_chart(pts)));
    if (!biased.empty()) out.push_back(chart_tp_bias_note(which_on_chart(biased), tp_widths()));
    for (const auto& [note, pts] : scale.entries) out.push_back(chart_scale_note(which_on_chart(pts)));
    for (const auto& [ratio, pts] : oversubscribed.entries) {
      out.push_back(
          fmt::format("Leaves oversubscribed {} ({}): their up-links can cap the traffic between leaves",
                      ratio, which_on_chart(pts)));
    }
    for (const auto& [ratio, pts] : spines_oversubscribed.entries) {
      out.push_back(
          fmt::format("Spines oversubscribed {} ({}): their core links can cap the traffic between {}", ratio,
                      which_on_chart(pts), rail_tiers ? "rails" : "pods"));
    }
    if (tiers.size() > 1) {
      out.push_back(
          fmt::format("{} (tiers: auto): {}", rail_tiers ? "Rail-optimized" : "Fat-tree", tiers_by_gpus()));
    }
    if (const std::int64_t b = fixed_global_batch(); b > 0) {
      out.push_back(
          fmt::format("Global batch {} sequences at every point: more GPUs, fewer micro-batches each", b));
    }
    return out;
  }
  /// The notes after the table: the whole notes, naming the points.
  [[nodiscard]] std::string text() const {
    std::string out;
    // What tessera run says on stderr about a point's settings.
    for (const std::string& w : warning_lines()) out += w + "\n";
    if (tiers.size() > 1) {
      out += fmt::format("note: cluster.fabric.tiers: auto built {}\n", tiers_by_gpus());
    }
    for (const auto& [ratio, pts] : oversubscribed.entries) {
      out += fmt::format(
          "note{}: the leaves are oversubscribed {}: their up-links carry less than their hosts can send, "
          "and can cap the traffic between leaves (cluster.fabric's spine bandwidth and count)\n",
          pts.size() == points ? " (every point)" : " for " + which(pts), ratio);
    }
    for (const auto& [ratio, pts] : spines_oversubscribed.entries) {
      out += fmt::format(
          "note{}: the spines are oversubscribed {}: their core links carry less than their leaf links, and can "
          "cap the traffic between pods (cluster.fabric's core and spine bandwidth)\n",
          pts.size() == points ? " (every point)" : " for " + which(pts), ratio);
    }
    if (const std::int64_t b = fixed_global_batch(); b > 0) {
      out += fmt::format(
          "note: the global batch is {} sequences at every point: more GPUs run fewer micro-batches each (a "
          "larger pipeline bubble share); sweep training.global_batch with --zip to scale it with the GPUs\n",
          b);
    }
    // "note (every point): LABEL: ..." or "note: LABEL for points ...: ...".
    auto notes = [&](const HeldNotes& held, std::string_view label) {
      for (const auto& [note, pts] : held.entries) {
        out += pts.size() == points ? fmt::format("note (every point): {}: {}\n", label, note)
                                    : fmt::format("note: {} for {}: {}\n", label, which(pts), note);
      }
    };
    notes(untested, "untested GPU");
    notes(gpu_bias, "known bias");
    notes(attention, "known bias");
    notes(fp8, "fp8");
    if (biased.size() == points) {
      out += fmt::format("note (every point): known bias: {}\n", tp_bias());
    } else if (!biased.empty()) {
      out += ranking_bias_note(widest_bias, "points", fmt::format("({})", fmt::join(biased, ", ")));
    }
    notes(scale, "untested scale");  // last, as tessera run's Untested scale follows its Known bias
    return out;
  }
};

/// The scenario of each point that runs, by point index.
using PointScenarios = std::map<std::size_t, Scenario>;

SweepCaveats sweep_caveats(const std::vector<Point>& points, const PointScenarios& scenarios) {
  SweepCaveats c;
  c.points = points.size();
  c.all = &points;
  for (const Point& pt : points) {
    const Scenario& sc = scenarios.at(pt.index);
    if (sc.fabric_written && sc.fabric == FabricKind::RailOptimized) c.rail_tiers = true;
    if (sc.fabric_tiers_auto && sc.fabric_written) {
      auto& [fewest, most] = c.tiers.try_emplace(fabric_tiers(sc), sc.gpus(), sc.gpus()).first->second;
      fewest = std::min(fewest, sc.gpus());
      most = std::max(most, sc.gpus());
    }
    c.gpus.insert(sc.gpus());
    c.global_batches.insert(sc.plan.global_batch);
    const std::string point = std::to_string(pt.index);
    for (const std::string& note : untested_gpu_notes(sc)) c.untested.add(note, point);
    const std::string attention = flash_attention_note(sc);
    for (const std::string& note : known_bias_notes(sc, false))
      (note == attention ? c.attention : c.gpu_bias).add(note, point);
    c.fp8.add(fp8_note(sc), point);
    if (!multi_node_note(sc).empty()) c.scale.add(std::string(kMultiNodeCaveat), point);
    for (const std::string& w : scenario_warnings(sc)) c.warnings.add(w, point);
    c.models.add(fmt::format("{} node model, {} network backend", sc.predictor, to_string(sc.backend)),
                 point);
    if (const double r = study::leaf_oversubscription(sc); r > 1.0 + 1e-9)
      c.oversubscribed.add(fmt::format("{:.3g}:1", r), point);
    if (const double r = study::spine_oversubscription(sc); r > 1.0 + 1e-9)
      c.spines_oversubscribed.add(fmt::format("{:.3g}:1", r), point);
    const std::string bias = parallelism::known_bias_note(sc.plan);
    if (bias.empty()) continue;
    c.biased.push_back(std::to_string(pt.index));
    c.narrowest_tp = c.narrowest_tp == 0 ? sc.plan.tp : std::min(c.narrowest_tp, sc.plan.tp);
    if (sc.plan.tp > c.widest_tp) {
      c.widest_tp = sc.plan.tp;
      c.widest_bias = bias;
    }
  }
  return c;
}

/// A swept value in --json: a JSON number as one ("2", "0.5", "1e3"; not
/// "01" or "400Gbps"), true and false as booleans, anything else a string.
std::string json_setting(const std::string& v) {
  if (v == "true" || v == "false") return v;
  static const std::regex kNumber(R"(-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?)");
  return std::regex_match(v, kNumber) ? v : json_string(v);
}

/// A point's settings as a JSON object ({"cluster.nodes": 2}).
std::string settings_json(const Point& pt) {
  std::string json = "{";
  for (std::size_t k = 0; k < pt.overrides.size(); ++k) {
    json += fmt::format("{}{}: {}", k == 0 ? "" : ", ", json_string(pt.overrides[k].path),
                        json_setting(pt.overrides[k].value));
  }
  return json + "}";
}

/// A finished sweep's points as the chart draws them: one series per value
/// of the keys after the first (a key of one value is a fixed setting; keys
/// that change with the first, one combination per value of it, as with
/// --zip, are one series).
struct SweepPoint {
  std::size_t index = 0;
  std::string x_value;  // the first key's value
  double gpus = 0, tokens = 0;
  bool oom = false;
};
struct SweepSeries {
  std::vector<std::set<std::string>> values;  ///< per key, the values it takes
  std::vector<bool> fixed;                    ///< per key: one value, after the first
  bool covarying = false;
  std::vector<std::string> names;  ///< in order of first appearance (the second key's order)
  std::map<std::string, std::vector<SweepPoint>> by_series;
  std::vector<std::string> x_values;  ///< the first key's values, in order
  /// The GPU count changes along the first key within a series: the x axis,
  /// each series' points in its order.
  bool gpus_on_x = false;
};

/// A key that picks the GPU model or one of its properties (cluster.gpu,
/// cluster.gpu.tensor_peak, ...).
bool is_gpu_key(const std::string& key) { return key == "cluster.gpu" || key.starts_with("cluster.gpu."); }

/// `joining`: rows that join the series the others form without changing
/// them (a failed point's, failed_point_below_its_baseline): not counted in
/// the keys' values nor in what varies together.
SweepSeries sweep_series(const std::map<std::size_t, std::string>& rows, const std::vector<std::string>& keys,
                         bool zipped = false, const std::set<std::size_t>& joining = {}) {
  SweepSeries out;
  out.values.resize(keys.size());
  // Each row's columns, split once; m0: where its metrics start.
  std::vector<std::pair<std::size_t, std::vector<std::string>>> split_rows;
  split_rows.reserve(rows.size());
  for (const auto& [index, row] : rows) split_rows.emplace_back(index, split(row, ','));
  for (const auto& [index, cols] : split_rows) {
    if (joining.count(index) != 0U) continue;
    const std::size_t m0 = cols.size() - kMetricColumns;
    for (std::size_t a = 0; a < keys.size() && 1 + a < m0; ++a) out.values[a].insert(cols[1 + a]);
  }
  for (std::size_t a = 0; a < keys.size(); ++a) out.fixed.push_back(a > 0 && out.values[a].size() == 1);
  std::set<std::string> firsts, combinations;
  for (const auto& [index, cols] : split_rows) {
    if (joining.count(index) != 0U) continue;
    const std::size_t m0 = cols.size() - kMetricColumns;
    std::string combo;
    for (std::size_t a = 1; a < keys.size() && 1 + a < m0; ++a) {
      if (!out.fixed[a]) combo += cols[1 + a] + ",";
    }
    if (!keys.empty()) firsts.insert(cols[1]);
    combinations.insert(combo);
  }
  // --zip says so; a merged CSV does not: one combination of the other
  // keys per point, and the first key changing with them.
  const std::size_t formed = rows.size() - joining.size();
  out.covarying = formed > 1 && (zipped || (combinations.size() == formed && firsts.size() > 1));
  for (const auto& [index, cols] : split_rows) {
    const std::size_t m0 = cols.size() - kMetricColumns;
    SweepPoint pt;
    pt.index = index;
    pt.x_value = keys.empty() ? "" : cols[1];
    pt.gpus = std::stod(cols[m0 + kGpus]);
    pt.tokens = std::stod(cols[m0 + kTokens]);
    pt.oom = cols[m0 + kOom] == "1";
    // A series per value of the other keys; with keys set point by point
    // (--zip), one series, but a GPU model of its own for each: scaling
    // from one GPU's baseline to another GPU is no scaling.
    std::string name;
    for (std::size_t a = 0; a < keys.size() && 1 + a < m0; ++a) {
      const bool own_series =
          out.covarying ? is_gpu_key(keys[a]) && out.values[a].size() > 1 : a > 0 && !out.fixed[a];
      if (own_series) name += fmt::format("{}{}={}", name.empty() ? "" : ", ", keys[a], cols[1 + a]);
    }
    if (out.by_series.count(name) == 0U) out.names.push_back(name);
    out.by_series[name].push_back(pt);
    if (std::find(out.x_values.begin(), out.x_values.end(), pt.x_value) == out.x_values.end()) {
      out.x_values.push_back(pt.x_value);
    }
  }
  for (auto& [name, pts] : out.by_series) {
    for (const SweepPoint& q : pts) out.gpus_on_x = out.gpus_on_x || q.gpus != pts.front().gpus;
  }
  if (out.gpus_on_x) {
    for (auto& [name, pts] : out.by_series) {
      std::stable_sort(pts.begin(), pts.end(),
                       [](const SweepPoint& a, const SweepPoint& b) { return a.gpus < b.gpus; });
    }
  }
  return out;
}

/// A sweep's rows and keys as its chart and scaling column read them: a key
/// that sets the GPU count first (not with --zip), else the first key with
/// more than one value first (a key given one value says
/// nothing along x; helper 73: `--set cluster.price_per_gpu_hour=3.5
/// --set cluster.nodes=32,64,128` drew the price as the x axis, one tick,
/// the node counts as stacked dots, and lost the scaling column). The CSV
/// and the table keep the order given.
struct SweepView {
  std::map<std::size_t, std::string> rows;
  std::vector<std::string> keys;
};
SweepView x_key_first(const std::map<std::size_t, std::string>& rows, const std::vector<std::string>& keys,
                      bool zipped) {
  std::vector<std::pair<std::size_t, std::vector<std::string>>> split_rows;
  split_rows.reserve(rows.size());
  for (const auto& [index, row] : rows) split_rows.emplace_back(index, split(row, ','));
  std::size_t x = 0;
  for (std::size_t a = 0; a < keys.size(); ++a) {
    const auto differs = [&](const auto& r) { return r.second[1 + a] != split_rows.front().second[1 + a]; };
    if (std::any_of(split_rows.begin(), split_rows.end(), differs)) {
      x = a;
      break;
    }
  }
  // A key that sets the GPU count (each of its values one count, not all
  // the same) comes first wherever it was given (helper 80: `--set
  // training.micro_batch=... --set cluster.nodes=...` lost the scaling
  // column the other order had). With --zip the keys move together and the
  // first names the line.
  if (!zipped && !split_rows.empty()) {
    const std::size_t gpus_col = split_rows.front().second.size() - kMetricColumns + kGpus;
    for (std::size_t a = 0; a < keys.size(); ++a) {
      std::map<std::string, std::string> gpus_of;
      bool sets = true;
      for (const auto& [index, cols] : split_rows) {
        const auto [it, fresh] = gpus_of.emplace(cols[1 + a], cols[gpus_col]);
        if (!fresh && it->second != cols[gpus_col]) sets = false;
      }
      std::set<std::string> counts;
      for (const auto& [value, gpus] : gpus_of) counts.insert(gpus);
      if (sets && counts.size() > 1) {
        x = a;
        break;
      }
    }
  }
  if (x == 0) return {rows, keys};
  SweepView view;
  view.keys.push_back(keys[x]);
  for (std::size_t a = 0; a < keys.size(); ++a) {
    if (a != x) view.keys.push_back(keys[a]);
  }
  for (const auto& [index, cols] : split_rows) {
    std::string moved = cols[0] + "," + cols[1 + x];
    for (std::size_t c = 1; c < cols.size(); ++c) {
      if (c != 1 + x) moved += "," + cols[c];
    }
    view.rows.emplace(index, std::move(moved));
  }
  return view;
}

/// Scaling efficiency per point, where the GPU count changes within a
/// series: its throughput per GPU over its series' baseline's, the
/// baseline being the point of fewest GPUs that fits in memory (the first
/// when none fits). Empty otherwise. The chart's second panel and the
/// table's column.
/// The scaling baseline of a series' points (in order of their GPUs): the
/// point of fewest GPUs that fits in memory (an out-of-memory throughput is
/// no result to scale from); the first when none fits. `pts` not empty.
const SweepPoint& scaling_baseline(const std::vector<SweepPoint>& pts) {
  const auto fits = std::find_if(pts.begin(), pts.end(), [](const SweepPoint& q) { return !q.oom; });
  return fits != pts.end() ? *fits : pts.front();
}

std::map<std::size_t, double> scaling_efficiency(const SweepSeries& series) {
  std::map<std::size_t, double> out;
  if (!series.gpus_on_x) return out;
  for (const auto& [name, pts] : series.by_series) {
    const SweepPoint& base = scaling_baseline(pts);
    for (const SweepPoint& q : pts) {
      out[q.index] = base.tokens > 0 ? (q.tokens / q.gpus) / (base.tokens / base.gpus) : 0.0;
    }
  }
  return out;
}

/// Whether a point that failed (its settings as the CSV's columns, and its
/// GPUs) has fewer GPUs than the scaling baseline of its own series
/// (scaling_efficiency's base point), so that it would have been that
/// baseline: each failed point joins the rows as a row of its own, and
/// the series are formed as the chart forms them (helper 138: compared
/// with other series' baselines).
bool failed_point_below_its_baseline(
    const std::map<std::size_t, std::string>& rows, const std::vector<std::string>& keys, bool zipped,
    const std::map<std::size_t, std::pair<std::vector<std::string>, double>>& failed) {
  if (rows.empty() || failed.empty()) return false;
  std::map<std::size_t, std::string> with_failed = rows;
  const std::vector<std::string> proto = split(rows.begin()->second, ',');
  const std::size_t m0 = proto.size() - kMetricColumns;
  for (const auto& [index, point] : failed) {
    const auto& [settings, gpus] = point;
    if (settings.size() + 1 != m0) return true;  // (not in the rows' layout: said, to be safe)
    std::vector<std::string> cols = proto;
    cols[0] = std::to_string(index);
    std::copy(settings.begin(), settings.end(), cols.begin() + 1);
    cols[m0 + kGpus] = fmt::format("{}", gpus);
    cols[m0 + kTokens] = "0";
    cols[m0 + kOom] = "0";
    with_failed[index] = fmt::format("{}", fmt::join(cols, ","));
  }
  const SweepView view = x_key_first(with_failed, keys, zipped);
  std::set<std::size_t> joining;
  for (const auto& [index, point] : failed) joining.insert(index);
  const SweepSeries series = sweep_series(view.rows, view.keys, zipped, joining);
  if (!series.gpus_on_x) return false;
  for (const auto& [name, pts] : series.by_series) {
    double fewest_ran = 0, fewest_failed = 0;
    for (const SweepPoint& q : pts) {
      double& fewest = failed.count(q.index) != 0U ? fewest_failed : fewest_ran;
      fewest = fewest == 0 ? q.gpus : std::min(fewest, q.gpus);
    }
    // (a series none of whose points ran has no scaling to speak of)
    if (fewest_failed > 0 && fewest_ran > 0 && fewest_failed < fewest_ran) return true;
  }
  return false;
}

/// A sweep's scaling column as the chart draws it (x_key_first): each
/// point's efficiency, its series' baseline, and the line under the table
/// that names each series' baseline (the column compares each series with
/// its own; helper 157: pp16 read 100.0% at 2048 GPUs beside pp32's 88.8%
/// with nothing saying why). Empty where the GPU count does not change.
struct SweepScaling {
  std::map<std::size_t, double> efficiency;
  /// Per point of a series with a point that fits: its baseline point.
  std::map<std::size_t, std::size_t> baseline;
  std::string note;  ///< "note: scaling: ...\n"; empty without a baseline that fits
};
SweepScaling sweep_scaling(const std::map<std::size_t, std::string>& rows, const std::vector<std::string>& keys,
                           bool zipped = false) {
  SweepScaling out;
  const SweepView view = x_key_first(rows, keys, zipped);
  const SweepSeries series = sweep_series(view.rows, view.keys, zipped);
  out.efficiency = scaling_efficiency(series);
  if (!series.gpus_on_x) return out;
  // Each series' baseline that fits, in the series' order; those of none.
  std::vector<std::pair<std::string, const SweepPoint*>> bases;
  std::vector<std::string> none_fits;
  for (const std::string& name : series.names) {
    const std::vector<SweepPoint>& pts = series.by_series.at(name);
    const SweepPoint& base = scaling_baseline(pts);
    if (base.oom) {
      none_fits.push_back(name);
      continue;
    }
    bases.emplace_back(name, &base);
    for (const SweepPoint& q : pts) out.baseline[q.index] = base.index;
  }
  if (bases.empty()) return out;
  const auto at = [](const SweepPoint& b) { return fmt::format("point {} ({:g} GPUs)", b.index, b.gpus); };
  const std::string none =
      none_fits.empty() ? std::string()
                        : fmt::format("; no point fits for {}", fmt::join(none_fits, "; "));
  if (series.names.size() == 1) {
    out.note = fmt::format("note: scaling: tokens/s per GPU over that of {}, the fewest GPUs that fit\n",
                           at(*bases.front().second));
    return out;
  }
  const bool one_count = std::all_of(bases.begin(), bases.end(), [&](const auto& b) {
    return b.second->gpus == bases.front().second->gpus;
  });
  if (one_count) {
    std::vector<std::size_t> indices;
    indices.reserve(bases.size());
    for (const auto& b : bases) indices.push_back(b.second->index);
    out.note = fmt::format(
        "note: scaling: tokens/s per GPU over its series' point at {:g} GPUs, the fewest that fit (point{} "
        "{}){}\n",
        bases.front().second->gpus, indices.size() == 1 ? "" : "s", fmt::join(indices, ", "), none);
    return out;
  }
  std::vector<std::string> each;
  each.reserve(bases.size());
  for (const auto& [name, base] : bases) each.push_back(fmt::format("{} for {}", at(*base), name));
  out.note = fmt::format(
      "note: scaling: tokens/s per GPU over its series' baseline, the point of fewest GPUs that fits: {}{}\n",
      fmt::join(each, "; "), none);
  return out;
}

/// The members of a point's JSON object that its CSV row holds: "point",
/// "settings", the metric columns before the training run's (oom a boolean;
/// the callers add the run as "training_run") and, where `efficiency`
/// has the point, "scaling_efficiency" (null out of memory). sweep --json
/// adds what the scenario says; sweep-merge --json has only these.
std::string point_json(const Point& pt, const std::string& row, const SweepScaling& scaling) {
  const std::map<std::size_t, double>& efficiency = scaling.efficiency;
  static const std::vector<std::string> kNames = split(kMetricNames, ',');
  const auto cols = split(row, ',');
  const std::size_t m0 = cols.size() - kMetricColumns;
  std::string json = fmt::format("\"point\": {}, \"settings\": {}", pt.index, settings_json(pt));
  for (std::size_t m = 0; m < kTrainingTokens; ++m) {
    const std::string& v = cols[m0 + m];
    json += fmt::format(", {}: {}", json_string(kNames[m]),
                        kNames[m] == "oom" ? (v == "1" ? std::string("true") : std::string("false")) : v);
  }
  if (const auto e = efficiency.find(pt.index); e != efficiency.end()) {
    // An out-of-memory point's throughput is no result to scale from.
    json += cols[m0 + kOom] == "1" ? std::string(", \"scaling_efficiency\": null")
                                   : fmt::format(", \"scaling_efficiency\": {:.6f}", e->second);
    // Which point it is relative to: its series' (null where none fits).
    const auto b = scaling.baseline.find(pt.index);
    json += b == scaling.baseline.end() ? std::string(", \"scaling_baseline\": null")
                                        : fmt::format(", \"scaling_baseline\": {}", b->second);
  }
  return json;
}

/// Chart of a finished sweep from its CSV rows (point order); `keys` are the
/// swept keys (the columns after `point`), first key outermost.
///
/// The x axis is the GPU count (log scale) when it changes along the first
/// key, else the first key's values (log scale for positive numbers spanning
/// 8x or more, linear for other numbers, categories otherwise). Each value of
/// the other keys is a series (sweep_series), its points joined in the order
/// of x (not the order listed). With GPUs on x, the throughput panel has the
/// ideal-scaling line of each series (its baseline's throughput x GPUs / its
/// GPUs) and a second panel shows scaling_efficiency.
std::string svg_chart(const std::map<std::size_t, std::string>& swept_rows,
                      const std::vector<std::string>& swept_keys, const std::string& title,
                      const std::vector<std::string>& notes = {}, bool zipped = false) {
  using Pt = SweepPoint;
  const SweepView view = x_key_first(swept_rows, swept_keys, zipped);
  const std::vector<std::string>& keys = view.keys;
  SweepSeries series = sweep_series(view.rows, keys, zipped);
  const auto& values = series.values;
  auto fixed = [&](std::size_t a) { return series.fixed[a]; };
  const bool covarying = series.covarying;
  const std::vector<std::string>& series_names = series.names;
  std::map<std::string, std::vector<Pt>>& by_series = series.by_series;
  const std::vector<std::string>& x_values = series.x_values;
  const bool gpus_on_x = series.gpus_on_x;
  const std::map<std::size_t, double> efficiency = scaling_efficiency(series);
  chart::LinePanel tput;
  tput.title = "Throughput";
  tput.y_label = "throughput (tokens/s)";
  std::vector<double> numbers;
  std::map<std::string, double> x_of;  // the first key's value -> x
  if (gpus_on_x) {
    tput.x_scale = chart::XScale::Log;
    tput.x_label = "GPUs (log scale)";
    std::vector<double> g;
    for (const auto& [name, pts] : by_series) {
      for (const Pt& q : pts) g.push_back(q.gpus);
    }
    std::sort(g.begin(), g.end());
    g.erase(std::unique(g.begin(), g.end()), g.end());
    tput.x_ticks = g;
  } else if (all_numbers(x_values, numbers)) {
    const auto [lo, hi] = std::minmax_element(numbers.begin(), numbers.end());
    const bool log = *lo > 0 && *hi / *lo >= 8;
    tput.x_scale = log ? chart::XScale::Log : chart::XScale::Linear;
    tput.x_label = keys.empty() ? "" : keys[0] + (log ? " (log scale)" : "");
    for (std::size_t i = 0; i < x_values.size(); ++i) x_of[x_values[i]] = numbers[i];
    tput.x_ticks = numbers;
    std::sort(tput.x_ticks.begin(), tput.x_ticks.end());
  } else {
    tput.x_scale = chart::XScale::Category;
    tput.x_label = keys.empty() ? "" : keys[0];
    tput.categories = x_values;
    for (std::size_t i = 0; i < x_values.size(); ++i) x_of[x_values[i]] = static_cast<double>(i);
  }
  // Each series joined along x: a sweep listed 16,4,1,64 nodes is drawn
  // 1,4,16,64 (categories keep the order listed; with GPUs on x
  // sweep_series has ordered them).
  if (!gpus_on_x && tput.x_scale != chart::XScale::Category) {
    for (auto& [name, pts] : by_series) {
      std::stable_sort(pts.begin(), pts.end(),
                       [&](const Pt& a, const Pt& b) { return x_of[a.x_value] < x_of[b.x_value]; });
    }
  }
  chart::LinePanel eff = tput;
  eff.title = "Scaling efficiency per GPU";
  eff.y_label = "tokens/s per GPU vs the baseline";
  eff.y_percent = true;
  eff.reference_y = 1.0;
  if (gpus_on_x) {
    // Log-log: ideal scaling is a straight line and each doubling of the
    // GPUs the same step, however many there are.
    tput.y_log = true;
    tput.y_label = "throughput (tokens/s, log scale)";
  }

  const bool many = series_names.size() > 1;
  const bool category = tput.x_scale == chart::XScale::Category;  // points not joined
  bool any_oom = false;
  bool any_baseline = false;  // a series with a point that fits
  std::vector<chart::LegendEntry> entries;
  for (std::size_t i = 0; i < series_names.size(); ++i) {
    const std::vector<Pt>& pts = by_series[series_names[i]];
    const std::string c = chart::color(i);
    chart::Series data{
        series_names[i].empty() ? "throughput" : series_names[i], {}, {}, c, false, {}, chart::marker(i)};
    // One series: a grey ideal line, as in the legend; several: each in its colour.
    chart::Series ideal{"ideal scaling" + (many ? " " + series_names[i] : std::string()), {}, {}, many ? c : "#777",
                        true, {}};
    chart::Series per_gpu{data.name, {}, {}, c, false, {}, chart::marker(i)};
    // The baseline: the fewest GPUs that fit (an out-of-memory point's
    // throughput is no result to scale from); the first when none fits.
    const Pt& first = scaling_baseline(pts);
    for (const Pt& q : pts) {
      const double x = gpus_on_x ? q.gpus : x_of[q.x_value];
      data.x.push_back(x);
      data.y.push_back(q.tokens);
      data.flagged.push_back(q.oom);
      any_oom = any_oom || q.oom;
      // (from the baseline on: none below it, where a point is out of
      // memory; helper 139: the line ran into its cross)
      if (q.gpus >= first.gpus) {
        ideal.x.push_back(x);
        ideal.y.push_back(first.tokens * q.gpus / first.gpus);
      }
      // The efficiency of the points that fit, as the table and the JSON
      // give it (`-`, null out of memory; helper 81: crosses at 100%): a
      // gap, where the line stops.
      per_gpu.x.push_back(x);
      per_gpu.y.push_back(q.oom || !gpus_on_x ? std::numeric_limits<double>::quiet_NaN()
                                              : efficiency.at(q.index));
    }
    // A series that fits nowhere is drawn faded and says so in the legend:
    // out-of-memory throughput is not a result to read off, and there is no
    // baseline to draw an ideal line or an efficiency from.
    const bool none_fits =
        !pts.empty() && std::all_of(pts.begin(), pts.end(), [](const Pt& q) { return q.oom; });
    data.faded = none_fits;
    any_baseline = any_baseline || !none_fits;
    if (gpus_on_x && !none_fits) tput.series.push_back(std::move(ideal));
    tput.series.push_back(std::move(data));
    if (std::any_of(per_gpu.y.begin(), per_gpu.y.end(), [](double v) { return std::isfinite(v); })) {
      eff.series.push_back(std::move(per_gpu));
    }
    if (many) {
      entries.push_back({series_names[i] + (none_fits ? " (OOM at every point)" : ""), c, false, false, false,
                         false, chart::marker(i), category, none_fits});
    }
  }
  // The efficiency axis from a round 10% at least 5 points below the
  // lowest efficiency, where all are above half (helper 81: from 0, lines
  // at 97.5-100% lay on each other and on the 100% line); from 0 otherwise.
  // (no point fits: no efficiency, the axis from 0)
  double lowest = 1.0;
  bool any_efficiency = false;
  for (const chart::Series& ser : eff.series) {
    for (const double v : ser.y) {
      if (!std::isfinite(v)) continue;  // out of memory
      lowest = std::min(lowest, v);
      any_efficiency = true;
    }
  }
  // (helper 84: an empty panel read as a chart of nothing)
  if (!any_efficiency) eff.title = "Scaling efficiency per GPU: no point fits";
  if (any_efficiency && lowest >= 0.5) eff.y_from = std::floor((lowest - 0.05) * 10 + 1e-9) / 10;
  if (gpus_on_x && any_baseline) {
    entries.push_back({many ? "ideal scaling (dashed, per series): baseline x GPUs / its GPUs; "
                              "baseline: the fewest GPUs that fit"
                            : "ideal scaling: baseline x GPUs / its GPUs; baseline: the fewest GPUs that fit",
                       "#777", true});
  }
  if (any_oom) entries.push_back({"does not fit in GPU memory (OOM)", "#d62728", false, true});
  // The one-value keys, a line of their own (wrapped, where the subtitle
  // would cut them).
  std::string set;
  for (std::size_t a = 1; a < keys.size(); ++a) {
    if (fixed(a)) set += fmt::format("{}{}={}", set.empty() ? "" : ", ", keys[a], *values[a].begin());
  }
  // Two panels side by side, or the throughput panel alone, wider.
  const double panel_w = gpus_on_x ? 480 : 620, panel_h = 340, margin = 10;
  const double width = gpus_on_x ? 2 * panel_w + 3 * margin : panel_w + 2 * margin;
  std::string subtitle;
  if (!keys.empty()) {
    // With keys set point by point the GPU count may come from another.
    subtitle = fmt::format("swept: {}{}", keys[0],
                           !gpus_on_x  ? " (x axis)"
                           : covarying ? " (x axis: the points' GPU counts)"
                                       : " (x axis: the GPU count it gives)");
    std::string lines;
    for (std::size_t a = 1; a < keys.size(); ++a) {
      if (!fixed(a)) lines += (lines.empty() ? "" : ", ") + keys[a];
    }
    // The keys of the lines: in the subtitle where they fit on it, else a
    // line of the legend (wrapped) rather than cut.
    const std::string with_lines =
        fmt::format("{}; {} ({})", subtitle, lines,
                    covarying ? "set with it, point by point"
                              : (category ? "one series per value" : "one line per value"));
    if (!lines.empty() && chart::text_width(with_lines, 12) <= width - 24) {
      subtitle = with_lines;
    } else if (!lines.empty()) {
      entries.push_back({(covarying  ? "Set with it, point by point: "
                          : category ? "One series per value of "
                                     : "One line per value of ") +
                             lines,
                         "#555", false, false, false, true});
    }
  }
  if (!set.empty()) entries.push_back({"Every point: " + set, "#555", false, false, false, true});
  // Caveats of some points' forecasts (tessera run's Untested GPU and Known
  // bias), one line each under the legend.
  for (const std::string& n : notes) entries.push_back({n, "#555", false, false, false, true});

  double legend_h = 0;
  const double legend_y = chart::kHeaderHeight + panel_h + 4;
  const std::string legend = chart::legend(entries, 20, legend_y, width - 40, legend_h);
  const double height = legend_y + legend_h + 10;
  std::string svg = chart::open_document(width, height, title, subtitle);
  svg += chart::line_panel(tput, margin, chart::kHeaderHeight, panel_w, panel_h);
  // Efficiency only means something when the GPU count changes along x.
  if (gpus_on_x) svg += chart::line_panel(eff, 2 * margin + panel_w, chart::kHeaderHeight, panel_w, panel_h);
  svg += legend;
  return svg + "</svg>\n";
}

struct Shard {
  std::size_t index = 0;
  std::size_t count = 1;
};

/// "I/N", or "auto": the rank and size a Slurm job array or an MPI launcher
/// (Open MPI, MPICH/PMI) gives the process. A Slurm array's task ID counts
/// from SLURM_ARRAY_TASK_MIN in steps of SLURM_ARRAY_TASK_STEP (--array=1-4,
/// --array=0-6:2): the shard is the ID's position, (ID - MIN) / STEP.
Shard parse_shard(const std::string& text) {
  // Digits only (a sign would wrap), at most a million shards; a Slurm
  // array's task IDs go up to 4000000 (MaxArraySize at most 4000001), the
  // shard, their position, again at most a million.
  auto number = [&](const std::string& v, const std::string& what,
                    std::size_t limit = 1'000'000) -> std::size_t {
    if (v.empty() || v.size() > 7 || v.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(v) > limit) {
      throw UsageError(fmt::format("tessera sweep: --shard {}: {} '{}' is not a whole number from 0 to {}",
                                   text, what, v, limit));
    }
    return std::stoul(v);
  };
  constexpr std::size_t kSlurmIds = 4'000'000;
  Shard sh;
  std::string position;  // a Slurm array task's: how its ID gave I
  if (text == "auto") {
    const std::pair<const char*, const char*> sources[] = {{"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT"},
                                                           {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                                           {"PMI_RANK", "PMI_SIZE"}};
    bool found = false;
    std::string half;  // a rank variable without its size, or the size without the rank
    for (const auto& [rank, size] : sources) {
      const char* r = std::getenv(rank);
      const char* n = std::getenv(size);
      if ((r == nullptr) != (n == nullptr) && half.empty()) {
        const bool slurm = std::string_view(rank) == "SLURM_ARRAY_TASK_ID";
        half = fmt::format("{} is set but {} is not ({} sets both; or give --shard I/N)",
                           r != nullptr ? rank : size, r != nullptr ? size : rank,
                           slurm ? "a Slurm array job" : "an MPI launcher");
        // A half-set Slurm array is said before any MPI variables are read:
        // srun inside the array task sets PMI_RANK 0 of PMI_SIZE 1, which
        // would run the whole sweep as shard 0/1 (helper 138).
        if (slurm) break;
      }
      if (r == nullptr || n == nullptr) continue;
      const bool slurm = std::string_view(rank) == "SLURM_ARRAY_TASK_ID";
      sh.index = number(r, rank, slurm ? kSlurmIds : 1'000'000);
      sh.count = number(n, size);
      found = true;
      if (slurm) {
        const char* lo = std::getenv("SLURM_ARRAY_TASK_MIN");
        const char* st = std::getenv("SLURM_ARRAY_TASK_STEP");
        const char* hi = std::getenv("SLURM_ARRAY_TASK_MAX");
        const std::size_t min = lo != nullptr ? number(lo, "SLURM_ARRAY_TASK_MIN", kSlurmIds) : 0;
        const std::size_t step = st != nullptr ? number(st, "SLURM_ARRAY_TASK_STEP", kSlurmIds) : 1;
        // An array of IDs that are not evenly spaced (--array=0,1,5) gives
        // every task MIN, MAX and COUNT, whose span is not (COUNT - 1)
        // steps: refused on every task, not only on those off the steps
        // (helper 96: tasks 0 and 1 wrote shards 0/3 and 1/3, no task 2/3).
        if (hi != nullptr && sh.count > 0) {
          const std::size_t max = number(hi, "SLURM_ARRAY_TASK_MAX", kSlurmIds);
          if (max != min + step * (sh.count - 1)) {
            throw UsageError(fmt::format(
                "tessera sweep: --shard auto: the Slurm array's task IDs are not evenly spaced "
                "(SLURM_ARRAY_TASK_MIN {}, SLURM_ARRAY_TASK_MAX {}, SLURM_ARRAY_TASK_STEP {}, "
                "SLURM_ARRAY_TASK_COUNT {}); use --array=0-{} (or any MIN-MAX:STEP range), or --shard I/N",
                min, max, step, sh.count, sh.count - 1));
          }
        }
        if (step == 0 || sh.index < min || (sh.index - min) % step != 0) {
          throw UsageError(
              fmt::format("tessera sweep: --shard auto: SLURM_ARRAY_TASK_ID {} is not SLURM_ARRAY_TASK_MIN "
                          "{} plus a multiple of SLURM_ARRAY_TASK_STEP {} (an array of evenly spaced IDs, "
                          "--array=0-7 or 1-8:1, runs the shards; for any other give --shard I/N)",
                          sh.index, min, step));
        }
        if (min != 0 || step != 1) {
          position = fmt::format(": SLURM_ARRAY_TASK_ID {} is position {} of an array from {} in steps of {}",
                                 sh.index, (sh.index - min) / step, min, step);
        }
        sh.index = (sh.index - min) / step;
      }
      break;
    }
    if (!found && !half.empty()) {
      // (helper 136: "no Slurm array variables" with SLURM_ARRAY_TASK_ID set)
      throw UsageError(fmt::format("tessera sweep: --shard auto: {}", half));
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
    throw UsageError(fmt::format("tessera sweep: --shard {}: need 0 <= I < N (got I={}, N={}){}", text,
                                 sh.index, sh.count, position));
  }
  return sh;
}


}  // namespace

namespace {

/// The files the sweep's points read besides the scenario, each as its
/// name and text, in the order of their paths: `node_model.overrides`
/// (measured kernel times) and the weights the predictor reads from
/// `node_model.weights`' folder (node_model::weights_files: no other file of
/// the folder). Part of the sweep's
/// identity (helper 94: a shard or a resumed row made before the kernel
/// times were edited merged with rows made after, into a nonsense table).
std::vector<std::string> referenced_inputs(const PointScenarios& scenarios) {
  std::set<std::string> paths;
  for (const auto& [index, sc] : scenarios) {
    if (sc.kernel_overrides) paths.insert(sc.kernel_overrides->path());
    for (const std::string& path : node_model::weights_files(sc.predictor, sc.predictor_weights))
      paths.insert(path);
  }
  std::vector<std::string> out;
  for (const std::string& path : paths) {
    out.push_back(std::filesystem::path(path).filename().string());
    out.push_back(read_input_file(path, "a file the scenario reads"));
  }
  return out;
}

/// Identifies a sweep: FNV-1a of the scenario text, the swept settings and
/// the files the points read (referenced_inputs), as 16 hex digits. Shards
/// of one sweep carry the same one.
std::string sweep_id(const std::string& text, const std::vector<Axis>& axes,
                     const std::vector<Override>& fixed, const std::vector<std::string>& inputs) {
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
  for (const std::string& content : inputs) add(content);
  return fmt::format("{:016x}", h);
}

/// A line of a shard's CSV between its first line and the column names: one
/// of the sweep's chart notes (SweepCaveats::chart_notes), for sweep-merge.
constexpr std::string_view kChartNote = "# chart note: ";
/// After them, one of the warnings the sweep prints after its table about
/// the points' settings (SweepCaveats::warning_lines, every valid point's),
/// which sweep-merge prints as sweep does (helper 157: a merge dropped
/// "warning for point 1: parallelism.zero_stage 1 has no effect ...").
constexpr std::string_view kSweepWarning = "# sweep warning: ";
/// The line before them: the chart's title, "tessera sweep SCENARIO", so
/// that the merged chart says which scenario it is (helper 136: it said
/// "tessera sweep-merge").
constexpr std::string_view kChartTitle = "# chart title: ";
/// After the title, in a shard of a sweep with --zip: the keys were set
/// point by point, which the rows alone do not always tell (helper 139: a
/// zipped list repeating a value merged as two series).
constexpr std::string_view kChartZipped = "# chart zipped: --zip";
/// After them, in a shard, one line per swept key with its values as the
/// sweep lists them ("# sweep axis: KEY=V1,V2,..."): the grid, so that
/// sweep-merge can check that each row's settings are its point's (helper
/// 152: a hand-edited row, or one of another sweep, merged under the index
/// it claimed).
constexpr std::string_view kSweepAxis = "# sweep axis: ";

/// The first line of a shard's CSV (before the column names): which sweep,
/// which shard, how many points in all, and those --skip-invalid left out
/// (no shard runs them). sweep-merge checks it.
std::string shard_line(const std::string& id, const Shard& s, std::size_t points,
                       const std::vector<std::pair<Point, std::string>>& skipped) {
  std::string line = fmt::format("# tessera sweep {} shard {}/{} of {} points", id, s.index, s.count, points);
  for (std::size_t k = 0; k < skipped.size(); ++k)
    line += fmt::format("{}{}", k == 0 ? ", skipping " : " ", skipped[k].first.index);
  return line;
}

/// A scenario error without the scenario's path in front ("FILE:12:3:
/// parallelism.dp: ..." -> "parallelism.dp: ..."): the sweep's skipped
/// points are all of one file.
std::string without_file(const std::string& message, const std::string& path) {
  if (message.rfind(path, 0) != 0) return message;
  const auto colon = message.find(": ", path.size());
  return colon == std::string::npos ? message : message.substr(colon + 2);
}

/// A finished shard's line for a point --skip-failed left out, after its
/// rows (sweep-merge reads them; a resumed shard runs the point again).
constexpr std::string_view kFailedLine = "# failed point ";
/// The line after it: the point's GPUs and settings ("# failed settings N:
/// GPUS,V1,V2,..."), so that sweep-merge can tell whether it would have
/// been its series' scaling baseline as sweep does.
constexpr std::string_view kFailedSettingsLine = "# failed settings ";

/// Said under a table with a scaling column when points failed: its 100%
/// is the fewest GPUs among the points that ran (helper 97: a failed
/// baseline moved it without a word).
constexpr std::string_view kScalingOfWhatRan =
    "note: scaling is relative to the fewest GPUs among the points that ran; a failed point with fewer "
    "GPUs would have been its baseline\n";

/// The chart's line for the points --skip-failed left out (none: empty),
/// the same from sweep and sweep-merge.
std::string failed_chart_note(const std::vector<std::size_t>& indices) {
  if (indices.empty()) return {};
  return fmt::format("Left out: point{} {}, whose simulation failed (--skip-failed)",
                     indices.size() == 1 ? "" : "s", fmt::join(indices, ", "));
}

/// The lines after the table naming the points --skip-failed left out.
std::string failed_text(const std::vector<std::pair<Point, std::string>>& failed) {
  if (failed.empty()) return {};
  std::string out =
      fmt::format("left out {} point(s) whose simulation failed (--skip-failed):\n", failed.size());
  for (const auto& [pt, why] : failed) out += fmt::format("  point {} ({}): {}\n", pt.index, label(pt), why);
  return out;
}

/// The lines after the table naming the points --skip-invalid left out.
std::string skipped_text(const std::vector<std::pair<Point, std::string>>& skipped) {
  if (skipped.empty()) return {};
  std::string out =
      fmt::format("skipped {} point(s) that are not valid scenarios (--skip-invalid):\n", skipped.size());
  for (const auto& [pt, why] : skipped) out += fmt::format("  point {} ({}): {}\n", pt.index, label(pt), why);
  return out;
}

/// The table of a sweep's points: a key with one value (`one_value`, per
/// key) is said once above it, the rows naming the others (all of them when
/// none varies); the scaling column where `scaling` has points, and its
/// note naming each series' baseline under the rows; the
/// count of points out of memory after it. `price`: what the cost column
/// is priced at, as the days line says it (", at 3.5 per GPU-hour").
void print_table(std::ostream& out, const std::vector<Point>& points,
                 const std::map<std::size_t, std::string>& rows, const std::vector<bool>& one_value,
                 const SweepScaling& scaling,
                 const std::map<std::size_t, study::TrainingRun>& runs = {}, const std::string& price = {}) {
  const std::map<std::size_t, double>& efficiency = scaling.efficiency;
  // With training.tokens: each point's days, and cost where it has a price.
  const bool days = !runs.empty();
  const bool cost =
      std::any_of(runs.begin(), runs.end(), [](const auto& r) { return r.second.cost.has_value(); });
  std::vector<bool> varies;
  varies.reserve(one_value.size());
  for (const bool one : one_value) varies.push_back(!one);
  const bool any_varies = std::find(varies.begin(), varies.end(), true) != varies.end();
  auto row_label = [&](const Point& pt) { return any_varies ? label(pt, &varies) : label(pt); };
  if (any_varies && !points.empty()) {
    const std::string set = label(points.front(), &one_value);
    if (!set.empty()) out << fmt::format("every point: {}\n", set);
  }
  // The settings column as wide as its longest label (at least 40), so the
  // numbers line up whatever the swept keys are.
  std::size_t width = 40;
  for (const Point& pt : points) width = std::max(width, row_label(pt).size());
  // Where a point interleaves: each point's model chunks per rank (what
  // `virtual_stages: auto` chose; helper 60: the CSV said, the table not).
  // (As a number: a merged shard's CSV may have been rewritten, 3.0.)
  const auto chunks_of = [](const std::vector<std::string>& cols) {
    return std::llround(std::stod(cols[cols.size() - kMetricColumns + kVirtualStages]));
  };
  const bool chunks = std::any_of(points.begin(), points.end(), [&](const Point& pt) {
    return chunks_of(split(rows.at(pt.index), ',')) != 1;
  });
  out << fmt::format("{:>5}  {:<{}} {:>6} {:>14} {:>12} {:>14}{}{}{}{}\n", "point", "settings", width, "GPUs",
                     "iteration ms", "TFLOP/s/GPU", "tokens/s", chunks ? "  chunks" : "",
                     efficiency.empty() ? "" : "  scaling", days ? fmt::format(" {:>8}", "days") : "",
                     cost ? fmt::format(" {:>12}", "cost") : "");
  int oom = 0;
  for (const Point& pt : points) {
    const auto cols = split(rows.at(pt.index), ',');
    const std::size_t m0 = cols.size() - kMetricColumns;
    const bool does_not_fit = cols[m0 + kOom] == "1";
    oom += does_not_fit ? 1 : 0;
    const auto e = efficiency.find(pt.index);
    std::string run_columns;
    if (days) {
      const auto r = runs.find(pt.index);
      run_columns = r == runs.end() || does_not_fit ? fmt::format(" {:>8}", "-")
                                                    : fmt::format(" {:>8.1f}", r->second.days());
      if (cost) {
        run_columns += r == runs.end() || does_not_fit || !r->second.cost
                           ? fmt::format(" {:>12}", "-")
                           : fmt::format(" {:>12.0f}", *r->second.cost);
      }
    }
    out << fmt::format("{:>5}  {:<{}} {:>6} {:>14.3f} {:>12.1f} {:>14.0f}{}{}{}{}\n", pt.index, row_label(pt),
                       width, cols[m0 + kGpus], std::stod(cols[m0 + kIteration]) * 1e3,
                       std::stod(cols[m0 + kTflops]), std::stod(cols[m0 + kTokens]),
                       chunks ? fmt::format("  {:>6}", chunks_of(cols)) : std::string(),
                       e == efficiency.end() ? std::string()
                       : does_not_fit        ? std::string("        -")
                                             : fmt::format("  {:>6.1f}%", 100 * e->second),
                       run_columns, does_not_fit ? "  OOM" : "");
  }
  // Which point each series' scaling is relative to.
  if (!efficiency.empty()) out << scaling.note;
  if (days) {
    // What the days and cost are (run's and search's words; helper 73: the
    // sweep said neither the tokens, the price nor "steady state").
    std::set<std::string> tokens;
    for (const auto& [index, r] : runs) tokens.insert(count_text(r.tokens));
    out << fmt::format(
        "days{}: the whole training run ({} tokens) at each point's throughput{} (steady state only: no "
        "warm-up, evaluation, checkpoints or failures)\n",
        cost ? " and cost" : "", tokens.size() == 1 ? *tokens.begin() : std::string("each point's"),
        cost ? price : std::string());
  }
  if (oom > 0)
    out << fmt::format("{} point(s) do not fit in GPU memory (OOM; peak_memory_bytes in the CSV)\n", oom);
  // tessera run's warning for a plan that fits in 95% or more of the
  // memory, once for the points it holds for.
  std::vector<std::size_t> tight;
  for (const Point& pt : points) {
    if (!tight_row(rows.at(pt.index)).empty()) tight.push_back(pt.index);
  }
  if (!tight.empty()) {
    out << fmt::format(
        "warning for point{} {}: memory: {}% or more of the GPU's memory needed, and {}: "
        "a plan this full may not fit "
        "(tessera search --memory-headroom SIZE keeps plans that leave SIZE free; "
        "--json: each point's warnings)\n",
        tight.size() == 1 ? "" : "s", fmt::join(tight, ", "), std::lround(100 * kTightMemoryShare),
        kWorkspaceCaveat);
  }
}

}  // namespace

int cmd_sweep(const Args& args, std::ostream& out) {
  ArgParser p("tessera sweep");
  p.option("out").option("svg").option("jobs").option("shard").flag("json").flag("zip").flag("skip-invalid");
  p.flag("skip-failed");
  declare_scenario_options(p);
  // --zip pairs the lists (point i: every key's i-th value), where a value
  // may repeat; known before the lists are read.
  const bool zip = std::find(args.begin(), args.end(), "--zip") != args.end();
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
    // A comma separates the values of an axis, so a YAML list or mapping
    // cannot be one of them: said as such, not as the YAML error of its
    // first piece ("malformed value '[0'").
    if (o.value.find_first_of("[]{}") != std::string::npos) {
      throw UsageError(fmt::format(
          "tessera sweep: --set {}: a swept value is one scalar (commas separate the values); set a list or "
          "mapping in the scenario file, or with tessera run --set",
          value));
    }
    Axis a{o.path, split(o.value, ',')};
    for (auto& v : a.values) {
      // "1, 2": the space after a comma is no part of the value.
      v = std::string(trim_blanks(v));
      if (v.empty()) throw UsageError(fmt::format("tessera sweep: --set {}: empty value in the list", value));
      // The CSV writes values as they are, unquoted (helper 94: a quote
      // made rows a CSV reader splits otherwise).
      if (v.find_first_of("\"\n\r") != std::string::npos) {
        throw UsageError(fmt::format(
            "tessera sweep: --set {}: a swept value cannot hold a double quote or a line break (the CSV "
            "writes values unquoted); set such a value in the scenario file",
            value));
      }
    }
    // A key swept twice would make each point set it twice (the last wins),
    // and a value listed twice repeats points: both are mistakes.
    for (const Axis& earlier : axes) {
      if (earlier.key == a.key) {
        throw UsageError(fmt::format("tessera sweep: --set {}: {} is already swept (one list per key)", value, a.key));
      }
      // Each point applies the keys in order: this one would replace the
      // earlier key's section whole.
      if (earlier.key.rfind(a.key + ".", 0) == 0) {
        throw UsageError(
            fmt::format("tessera sweep: --set {}: it would replace {}, swept before it: "
                        "give --set {} first",
                        value, earlier.key, a.key));
      }
    }
    // A number listed twice in two spellings (01 and 1, +2 and 2: YAML
    // reads a leading + as the number) is one point too. (Zipped lists may
    // repeat a value: whole points are checked below.) Words are compared
    // as written: some keys read them in any case, others not.
    std::map<std::string, std::string> listed;
    for (const auto& v : zip ? std::vector<std::string>{} : a.values) {
      double x = 0;
      const char* first = v.data() + (v.size() > 1 && v[0] == '+' && v[1] != '-' && v[1] != '+' ? 1 : 0);
      const auto [end, ec] = std::from_chars(first, v.data() + v.size(), x);
      const std::string key = ec == std::errc() && end == v.data() + v.size() ? fmt::format("{}", x) : v;
      const auto [it, fresh] = listed.emplace(key, v);
      if (fresh) continue;
      throw UsageError(it->second == v ? fmt::format("tessera sweep: --set {}: {} is listed twice", value, v)
                                       : fmt::format("tessera sweep: --set {}: {} and {} are the same value",
                                                     value, it->second, v));
    }
    axes.push_back(std::move(a));
  }
  p.parse(rest);
  p.expect_positional(1, "a scenario file");
  if (axes.empty()) throw UsageError("tessera sweep: give at least one --set key=v1,v2,...");
  if (zip) {
    std::size_t n = 0;
    for (const Axis& a : axes) n = std::max(n, a.values.size());
    for (const Axis& a : axes) {
      if (a.values.size() != n && a.values.size() != 1) {
        const Axis& longest =
            *std::find_if(axes.begin(), axes.end(), [&](const Axis& b) { return b.values.size() == n; });
        throw UsageError(fmt::format(
            "tessera sweep --zip: the lists pair value by value, but {} has {} values and {} has {} (a list "
            "of one value holds for every point)",
            longest.key, n, a.key, a.values.size()));
      }
    }
    // A point listed twice repeats a run.
    const std::vector<Point> zipped = grid(axes, true);
    for (std::size_t i = 0; i < zipped.size(); ++i) {
      for (std::size_t j = 0; j < i; ++j) {
        if (label(zipped[i]) == label(zipped[j])) {
          throw UsageError(
              fmt::format("tessera sweep --zip: point {} ({}) repeats point {}", i, label(zipped[i]), j));
        }
      }
    }
  }
  const std::string scenario_path = p.positional()[0];
  const std::string stem = std::filesystem::path(scenario_path).stem().string();
  // Without --shard the whole sweep is shard 0/1 (a plain Shard and a flag:
  // std::optional<Shard> drew a false -Wmaybe-uninitialized from GCC 12).
  const bool sharded = p.get("shard").has_value();
  if (sharded && p.get("svg")) {
    throw UsageError(
        "tessera sweep: --svg with --shard: a shard draws no chart; sweep-merge draws the sweep's");
  }
  const Shard shard = sharded ? parse_shard(*p.get("shard")) : Shard{};
  const std::string csv_path = p.get("out").value_or(
      sharded ? fmt::format("{}-sweep.shard{}of{}.csv", stem, shard.index, shard.count) : stem + "-sweep.csv");
  const std::string svg_path = p.get("svg").value_or(
      std::filesystem::path(csv_path).replace_extension(".svg").string());
  // Options and files are checked before anything is written.
  unsigned jobs = std::max(1U, std::thread::hardware_concurrency());
  if (auto j = p.get("jobs")) jobs = static_cast<unsigned>(parse_positive_int(*j, "--jobs", 4096));
  FileSet files;
  files.input(scenario_path, "the scenario");
  files.output(csv_path, "--out");
  files.output(svg_path, "--svg");
  // (after the checks of the files: an --svg naming the scenario or the CSV
  // is refused as that)
  if (p.get("svg")) check_svg_path(svg_path);

  // Validate every point before simulating any. --skip-invalid leaves out
  // the points that are no valid scenario (a grid of tp x pp where some
  // products do not divide the GPUs) and says why; the others run.
  const std::string text = read_scenario_text(scenario_path);
  const std::vector<Point> grid_points = grid(axes, zip);
  const bool skip_invalid = p.has("skip-invalid");
  std::vector<Point> points;                           // those that run
  std::vector<std::pair<Point, std::string>> skipped;  // and those left out, with the error
  // --backend and --predictor hold for every point.
  const std::vector<Override> fixed = scenario_overrides({}, p);
  PointScenarios scenarios;
  // Without --skip-invalid the first invalid point is the error; the rest
  // are still checked, so that --skip-invalid is suggested only where some
  // point is valid (helper 136: suggested for a --predictor typo, which no
  // point survives).
  std::optional<std::pair<ScenarioError, std::string>> first_invalid;  // the error, the point's part
  // Whether every invalid point failed with the first one's message: where
  // no point is valid either, the error is no point's, with --skip-invalid
  // or without (a --predictor typo; helpers 138, 139: it named point 0).
  bool one_error = true;
  for (const Point& pt : grid_points) {
    std::vector<Override> o = pt.overrides;
    o.insert(o.end(), fixed.begin(), fixed.end());
    try {
      Scenario sc = parse_scenario(text, scenario_path, o);
      // A scenario with jobs is no sweep at any point: said as such, not as
      // one invalid point that --skip-invalid would leave out (helper 103).
      try {
        require_single_job(sc, "sweep");
      } catch (const ScenarioError& e) {
        throw UsageError(e.what());
      }
      check_work(sc);  // a point too large to simulate is no valid point either
      scenarios.emplace(pt.index, std::move(sc));
    } catch (const ScenarioError& e) {
      // The message alone may not tell which value or combination is
      // invalid (cluster.nodes=4 makes dp x tp x pp wrong): name the point,
      // unless it names the one swept key's value already (a bad value).
      // (helper 109: that case lost the --skip-invalid hint)
      if (!first_invalid) {
        first_invalid.emplace(e, axes.size() == 1 && e.option() == "--set " + axes.front().key
                                     ? std::string()
                                     : fmt::format("sweep point {}: {}", pt.index, label(pt)));
      } else if (std::string_view(e.what()) != first_invalid->first.what()) {
        one_error = false;
      }
      if (skip_invalid) skipped.emplace_back(pt, without_file(e.what(), scenario_path));
      continue;
    }
    points.push_back(pt);
  }
  if (first_invalid && points.empty() && (one_error || (first_invalid->second.empty() && !skip_invalid))) {
    throw first_invalid->first;
  }
  if (first_invalid && !skip_invalid) {
    const auto& [e, at] = *first_invalid;
    const char* hint = points.empty() ? "" : "--skip-invalid runs the valid points";
    throw ScenarioError(
        fmt::format("{} ({}{}{})", e.what(), at, !at.empty() && *hint != '\0' ? "; " : "", hint));
  }
  if (points.empty()) {
    throw ScenarioError(
        fmt::format("tessera sweep: no point of the sweep is a valid scenario (point {}, {}: {})",
                    skipped.front().first.index, label(skipped.front().first), skipped.front().second));
  }
  // The points' measured kernel times are inputs too (helper 179: --svg
  // naming node_model.overrides overwrote the measurements).
  {
    FileSet measured;
    for (const auto& [index, sc] : scenarios) {
      if (sc.kernel_overrides) measured.input(sc.kernel_overrides->path(), "node_model.overrides");
    }
    measured.output(csv_path, "--out");
    measured.output(svg_path, "--svg");
  }

  // A shard's CSV starts with a line naming its sweep and shard, an
  // unsharded sweep's with one naming the sweep until it finishes.
  // A zipped sweep is another sweep than the grid of the same lists.
  std::vector<Override> identity = fixed;
  if (zip) identity.push_back(Override{"--zip", "1"});
  const std::string id = sweep_id(text, axes, identity, referenced_inputs(scenarios));
  const std::string columns = csv_header(axes);
  SweepCaveats caveats = sweep_caveats(points, scenarios);
  // A shard's chart notes (those of every point, as the unsharded sweep's
  // chart has them) go to the merged chart: sweep-merge reads no scenario.
  std::string chart_notes;
  if (sharded) {
    chart_notes = fmt::format("{}tessera sweep {}\n", kChartTitle, scenario_path);
    if (zip) chart_notes += fmt::format("{}\n", kChartZipped);
    for (const Axis& a : axes)
      chart_notes += fmt::format("{}{}={}\n", kSweepAxis, a.key, fmt::join(a.values, ","));
    for (const std::string& note : caveats.chart_notes())
      chart_notes += fmt::format("{}{}\n", kChartNote, note);
    for (const std::string& w : caveats.warning_lines()) chart_notes += fmt::format("{}{}\n", kSweepWarning, w);
  }
  const std::string header = (sharded ? shard_line(id, shard, grid_points.size(), skipped)
                                      : unfinished_line(id, grid_points.size())) +
                             "\n" + chart_notes + columns;
  std::map<std::size_t, std::string> rows;
  const OutLock out_lock(csv_path);
  const std::string existing = existing_text(csv_path);
  switch (out_file_state(csv_path, existing, header, columns, sharded)) {
    case OutFile::Fresh:
      break;
    case OutFile::Unfinished:
      rows = read_finished(existing, header, grid_points);
      // A row of a point that is not valid now (an older binary ran it) is
      // no row of this sweep.
      std::erase_if(rows, [&](const auto& row) { return scenarios.count(row.first) == 0U; });
      break;
    case OutFile::Finished:
      std::cerr << fmt::format(
          "sweep: {} holds a finished sweep; every point runs again and the file is rewritten\n", csv_path);
      break;
  }
  std::vector<std::size_t> todo;
  // A shard owns the points whose index is its own modulo the shard count.
  auto mine = [&](std::size_t index) { return index % shard.count == shard.index; };
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
  const bool serial = std::any_of(scenarios.begin(), scenarios.end(), [&](const auto& point) {
    return !backends.at(point.second.backend.name).concurrent_runs();
  });
  if (serial) jobs = 1;
  jobs = std::min<unsigned>(jobs, static_cast<unsigned>(std::max<std::size_t>(1, todo.size())));

  std::mutex mu;
  std::ofstream csv(csv_path, std::ios::app | std::ios::binary);
  say_on_interrupt(fmt::format("finished points are kept in {}; run the same command again to resume", csv_path));
  // A bar on a terminal, a line every 10 s in a log (progress.hpp).
  CountProgress progress("sweep", "points", owned, rows.size(), std::cerr, tty);
  // Every point runs, whatever the others do (helper 94: one point that
  // fails every time, an ns-3 deadlock, kept the points after it from ever
  // running, resumed or not). A failed point writes no row: the sweep stays
  // unfinished, and the same command again runs only the failed points. The
  // failure reported is the first point's in point order, so the same input
  // reports the same error whatever the threads' timing; a point's input at
  // fault (a bandwidth too low to simulate) is an InputError: exit code 2.
  // Only the tool's own errors are a point's: anything else (out of memory,
  // a bug) stops the sweep as for_each_index stops, and main reports it.
  struct PointFailure {
    std::string message;  ///< "sweep point N (settings): error"
    std::string cause;    ///< the error alone, without the scenario's path (--skip-failed's list)
    bool input = false;   ///< an InputError: exit code 2
  };
  std::vector<std::optional<PointFailure>> errors(todo.size());
  for_each_index(todo.size(), jobs, [&](std::size_t k) {
    const Point& pt = grid_points[todo[k]];
    try {
      const Scenario& sc = scenarios.at(pt.index);
      const Simulation sim = simulate_scenario(sc);
      const std::string row = csv_row(pt, make_report(sc, sim), sc.train_tokens);
      std::lock_guard lock(mu);
      csv << row << '\n' << std::flush;
      rows[pt.index] = row;
      progress.advance();
    } catch (const Error& e) {
      errors[k] =
          PointFailure{fmt::format("sweep point {} ({}): {}", pt.index, label(pt), e.what()),
                       without_file(e.what(), scenario_path), dynamic_cast<const InputError*>(&e) != nullptr};
      progress.advance();  // finished, if not well: the bar reaches its end
    }
  });
  csv.close();
  progress.finish();
  std::vector<std::size_t> failed;
  for (std::size_t k = 0; k < todo.size(); ++k) {
    if (errors[k]) failed.push_back(k);
  }
  // --skip-failed: the sweep finishes without them, naming each and why
  // (a point that fails every time, an ns-3 deadlock, kept it unfinished).
  const bool skip_failed = p.has("skip-failed");
  const std::size_t valid_points = points.size();  // failed or not
  std::vector<std::pair<Point, std::string>> failed_points;
  // Each failed point's settings (as the CSV's columns) and GPUs.
  std::map<std::size_t, std::pair<std::vector<std::string>, double>> failed_settings;
  if (skip_failed) {
    for (std::size_t k : failed) {
      std::string why = errors[k]->cause;
      std::replace(why.begin(), why.end(), '\n', ' ');
      std::replace(why.begin(), why.end(), '\r', ' ');
      failed_points.emplace_back(grid_points[todo[k]], std::move(why));
    }
    std::sort(failed_points.begin(), failed_points.end(),
              [](const auto& a, const auto& b) { return a.first.index < b.first.index; });
    for (const auto& [pt, why] : failed_points) {
      if (const auto it = scenarios.find(pt.index); it != scenarios.end()) {
        std::vector<std::string> settings;
        for (const Override& o : pt.overrides) settings.push_back(o.value);
        failed_settings[pt.index] = {settings, static_cast<double>(it->second.gpus())};
      }
    }
    std::set<std::size_t> left_out;
    for (const auto& f : failed_points) left_out.insert(f.first.index);
    std::erase_if(points, [&](const Point& pt) { return left_out.count(pt.index) != 0U; });
    // Unsharded, the notes and models are those of the points that ran (a
    // shard's chart notes stay every valid point's: all shards write the same).
    if (!sharded && !failed_points.empty() && !points.empty()) {
      for (const auto& [pt, why] : failed_points) scenarios.erase(pt.index);
      caveats = sweep_caveats(points, scenarios);
    }
    // Unsharded, a sweep of no point that ran is no result: the error.
    if (!points.empty() || sharded) {
      if (!failed_points.empty()) {
        std::cerr << fmt::format(
            "sweep: {} point(s) failed and are left out (--skip-failed); the output says why\n",
            failed_points.size());
      }
      failed.clear();
    }
  }
  if (!failed.empty()) {
    const std::size_t first = failed.front();
    std::string others;
    if (failed.size() > 1) {
      // The first ten, so that a sweep of thousands stays one readable line.
      constexpr std::size_t kNamed = 10;
      std::vector<std::size_t> indices;
      for (std::size_t i = 0; i < std::min(failed.size(), kNamed); ++i)
        indices.push_back(grid_points[todo[failed[i]]].index);
      others = fmt::format("; {} points failed: {}{}", failed.size(), fmt::join(indices, ", "),
                           failed.size() > kNamed ? fmt::format(" and {} more", failed.size() - kNamed) : "");
    }
    const std::string msg =
        fmt::format("{}{} ({}the same command runs the failed points again{})", errors[first]->message,
                    others, rows.empty() ? "" : "the finished points are kept; ",
                    skip_failed ? "" : "; --skip-failed finishes the sweep without them");
    if (errors[first]->input) throw InputError(msg);
    throw SimulationError(msg);
  }

  // Final file: rows in point order, whatever order they finished in; an
  // unsharded sweep's without its first line (a plain CSV), a shard's with
  // it (sweep-merge reads it).
  std::string final_csv = (sharded ? header : columns) + "\n";
  for (const auto& [index, row] : rows) final_csv += row + "\n";
  if (sharded) {
    for (const auto& [pt, why] : failed_points) {
      final_csv += fmt::format("{}{}: {}\n", kFailedLine, pt.index, why);
      if (const auto it = failed_settings.find(pt.index); it != failed_settings.end()) {
        final_csv += fmt::format("{}{}: {},{}\n", kFailedSettingsLine, pt.index, it->second.second,
                                 fmt::join(it->second.first, ","));
      }
    }
  }
  write_file_atomic(csv_path, final_csv);
  // --json: one object, every (of a shard: each of its) point's settings
  // and the CSV's metric columns.
  std::vector<std::string> keys;
  keys.reserve(axes.size());
  for (const Axis& a : axes) keys.push_back(a.key);
  // Where the GPU count changes along the first key: each point's scaling
  // efficiency (the chart's second panel), over the whole sweep only.
  const SweepScaling scaling = sharded ? SweepScaling{} : sweep_scaling(rows, keys, zip);
  const std::map<std::size_t, double>& efficiency = scaling.efficiency;
  // With training.tokens: each point's whole run at its throughput, as its
  // CSV row has it (a plan that does not fit trains nothing).
  const std::map<std::size_t, study::TrainingRun> runs = training_runs(rows);
  const bool one_name = std::all_of(scenarios.begin(), scenarios.end(), [&](const auto& point) {
    return point.second.name == scenarios.begin()->second.name;
  });
  auto print_json = [&](const std::string& svg) {
    std::string json =
        // "scenario": its name, as the other commands' --json name it (null
        // when the sweep sets `name`: each point has its own then).
        fmt::format("{{\"scenario\": {}, \"scenario_file\": {}, \"csv\": {}, ",
                    one_name ? json_string(scenarios.begin()->second.name) : std::string("null"),
                    json_string(scenario_path), json_string(csv_path));
    json += sharded ? fmt::format("\"shard\": {{\"index\": {}, \"count\": {}, \"of_points\": {}}}, ",
                                  shard.index, shard.count, grid_points.size())
                    : fmt::format("\"svg\": {}, ", json_string(svg));
    json += "\"points\": [";
    bool first = true;
    for (const Point& pt : points) {
      if (!mine(pt.index)) continue;
      json += fmt::format("{}{{{}", first ? "" : ", ", point_json(pt, rows.at(pt.index), scaling));
      first = false;
      const Scenario& sc = scenarios.at(pt.index);
      if (!one_name) json += fmt::format(", \"scenario\": {}", json_string(sc.name));
      // As in tessera run --json: the models, the warnings and each caveat
      // only when the point has them.
      json += fmt::format(", \"backend\": {}, \"predictor\": {}",
                          json_string(std::string(to_string(sc.backend))), json_string(sc.predictor));
      std::vector<std::string> warnings = scenario_warnings(sc);
      if (std::string tight = tight_row(rows.at(pt.index)); !tight.empty())
        warnings.push_back(std::move(tight));
      if (!warnings.empty()) json += ", \"warnings\": " + json_string_array(warnings);
      json += caveat_json(sc, true, false);
      if (const auto r = runs.find(pt.index); r != runs.end()) {
        json += ", \"training_run\": " + training_run_json(r->second);
      }
      json += "}";
    }
    json += "]";
    // The points left out and why: --skip-invalid's (every shard lists
    // all), --skip-failed's (a shard: its own).
    auto left_out = [&](std::string_view key, const std::vector<std::pair<Point, std::string>>& list) {
      json += fmt::format(", \"{}\": [", key);
      for (std::size_t k = 0; k < list.size(); ++k) {
        json += fmt::format("{}{{\"point\": {}, \"settings\": {}, \"error\": {}}}", k == 0 ? "" : ", ",
                            list[k].first.index, settings_json(list[k].first), json_string(list[k].second));
      }
      json += "]";
    };
    if (skip_invalid) left_out("skipped", skipped);
    if (skip_failed) left_out("failed", failed_points);
    out << json << "}\n";
  };
  if (sharded) {
    // The shards' CSVs by their default names, else as the user named them.
    const std::string merge_inputs = p.get("out") ? std::string("SHARD.csv...")
                                                  : fmt::format("{}-sweep.shard*of{}.csv", stem, shard.count);
    if (p.has("json")) {
      print_json("");
      std::cerr << fmt::format(
          "shard {}/{}: merge the shards with tessera sweep-merge --out {}-sweep.csv {}\n", shard.index,
          shard.count, stem, merge_inputs);
      return 0;
    }
    // Its own points; of those --skip-invalid left out, its own with the
    // error (every shard's first line lists all, for sweep-merge).
    std::vector<std::pair<Point, std::string>> own_skipped;
    std::vector<std::size_t> others;
    for (const auto& point : skipped) {
      if (mine(point.first.index)) {
        own_skipped.push_back(point);
      } else {
        others.push_back(point.first.index);
      }
    }
    out << fmt::format("shard {}/{}: {} point(s) written to {} (its share of the sweep's {} {}points)",
                       shard.index, shard.count, owned - failed_points.size(), csv_path, valid_points,
                       skipped.empty() ? "" : "valid ");
    out << fmt::format("; merge the shards with\n  tessera sweep-merge --out {}-sweep.csv {}\n", stem,
                       merge_inputs);
    out << skipped_text(own_skipped);
    out << failed_text(failed_points);
    if (!others.empty()) {
      out << fmt::format("the other shards skip point(s) {} (each names its own)\n", fmt::join(others, ", "));
    }
    return 0;
  }
  std::vector<std::string> notes = caveats.chart_notes();
  std::vector<std::size_t> failed_indices;
  failed_indices.reserve(failed_points.size());
  for (const auto& f : failed_points) failed_indices.push_back(f.first.index);
  if (!failed_indices.empty()) notes.push_back(failed_chart_note(failed_indices));
  write_file_atomic(svg_path,
                    svg_chart(rows, keys, fmt::format("tessera sweep {}", scenario_path), notes, zip));

  if (p.has("json")) {
    print_json(svg_path);
    return 0;
  }
  // The models every point runs with, the chart's Models line (a swept
  // backend is in the rows).
  if (caveats.models.entries.size() == 1)
    out << fmt::format("models: {}\n", caveats.models.entries.front().note);
  std::vector<bool> one_value;
  one_value.reserve(axes.size());
  for (const Axis& a : axes) one_value.push_back(a.values.size() == 1);
  // The price the cost is at, as the scenarios give it.
  std::set<double> prices;
  for (const auto& [index, sc] : scenarios) {
    if (runs.count(index) != 0U && sc.price_per_gpu_hour) prices.insert(*sc.price_per_gpu_hour);
  }
  print_table(out, points, rows, one_value, scaling, runs,
              prices.size() == 1 ? fmt::format(", at {:g} per GPU-hour", *prices.begin())
                                 : std::string(", at each point's price per GPU-hour"));
  out << skipped_text(skipped);
  out << failed_text(failed_points);
  // Only where a failed point has fewer GPUs than some series' baseline
  // (helper 136: said for a failed point of 16 GPUs under baselines of 8).
  if (!failed_points.empty() && !efficiency.empty() &&
      failed_point_below_its_baseline(rows, keys, zip, failed_settings)) {
    out << kScalingOfWhatRan;
  }
  out << caveats.text();
  // Measured kernel times match by exact shape: a point that changes the
  // micro-batch, sequence, tensor parallelism or model predicts the kernels
  // the file does not hold, and the table cannot say which points did.
  if (std::any_of(scenarios.begin(), scenarios.end(),
                  [](const auto& point) { return point.second.kernel_overrides != nullptr; })) {
    out << "note: node_model.overrides match kernels by exact shape (op, dtype, every dimension); "
           "points whose kernels the file does not hold are predicted "
           "(tessera run on a point prints how many matched)\n";
  }
  out << fmt::format("wrote {} and {}\n", csv_path, svg_path);
  return 0;
}

}  // namespace tessera::cli

namespace tessera::cli {

int cmd_sweep_merge(const Args& args, std::ostream& out) {
  ArgParser p("tessera sweep-merge");
  p.option("out").option("svg").flag("json");
  p.parse(args);
  if (p.positional().empty()) throw UsageError("tessera sweep-merge: give the shard CSV files to merge");
  const std::string csv_path = p.require("out");
  const std::string svg_path =
      p.get("svg").value_or(std::filesystem::path(csv_path).replace_extension(".svg").string());
  FileSet files;
  for (const std::string& part : p.positional()) files.input(part, "a shard");
  files.output(csv_path, "--out");
  files.output(svg_path, "--svg");
  // (after the checks of the files: an --svg naming a shard or the CSV is
  // refused as that)
  if (p.get("svg")) check_svg_path(svg_path);
  // Each shard starts with "# tessera sweep ID shard I/N of P points": all
  // must name the same sweep, every shard 0..N-1 must be there once, and
  // each must hold all of its points (a killed shard leaves some out).
  struct ShardFile {
    std::string id;
    std::size_t index = 0, count = 0, points = 0;
    std::set<std::size_t> skipped;  ///< points --skip-invalid left out (", skipping 3 7")
  };
  auto parse_shard_line = [](const std::string& line, const std::string& part) {
    ShardFile f;
    char id[17] = {};
    int used = 0;
    const auto not_a_shard = [&] {
      return InputError(
          fmt::format("{}: not a shard CSV (its first line is not '# tessera sweep ID shard I/N of P "
                      "points'; merge the files written by `sweep --shard`)",
                      part));
    };
    if (std::sscanf(line.c_str(), "# tessera sweep %16[0-9a-f] shard %zu/%zu of %zu points%n", id, &f.index,
                    &f.count, &f.points, &used) != 4 ||
        f.count == 0 || f.index >= f.count) {
      throw not_a_shard();
    }
    std::string_view rest = std::string_view(line).substr(static_cast<std::size_t>(used));
    if (!rest.empty()) {
      constexpr std::string_view kSkipping = ", skipping ";
      if (rest.substr(0, kSkipping.size()) != kSkipping) throw not_a_shard();
      for (const std::string& index : split(std::string(rest.substr(kSkipping.size())), ' ')) {
        if (!is_point_index(index) || !f.skipped.insert(std::stoull(index)).second) throw not_a_shard();
      }
    }
    f.id = id;
    return f;
  };
  std::string header;
  std::vector<std::string> chart_notes;  // the first shard's (kChartNote lines)
  std::vector<std::string> warnings;     // the first shard's (kSweepWarning lines)
  std::string chart_title = "tessera sweep-merge";  // the first shard's (kChartTitle), where it has one
  bool zipped = false;                              // the shards' sweep had --zip (kChartZipped)
  std::vector<Axis> sweep_axes;                     // the first shard's (kSweepAxis lines)
  std::optional<ShardFile> first;
  std::map<std::size_t, std::string> shard_files;  // shard index -> file
  std::map<std::size_t, std::string> rows;
  std::map<std::size_t, std::string> failed;  // points --skip-failed left out, and why
  // their settings and GPUs (kFailedSettingsLine; none from an older shard)
  std::map<std::size_t, std::pair<std::vector<std::string>, double>> failed_settings;
  for (const std::string& part : p.positional()) {
    const std::string text = read_input_file(part, "shard CSV");
    std::istringstream in(text);
    // A shard copied through Windows has CRLF line ends (helper 120: its
    // first line was "not a shard"); the other CSV readers take them too.
    const auto next_line = [&in](std::string& out) -> bool {
      if (!std::getline(in, out)) return false;
      if (!out.empty() && out.back() == '\r') out.pop_back();
      return true;
    };
    std::string line;
    next_line(line);
    const ShardFile f = parse_shard_line(line, part);
    if (!first) first = f;
    if (f.id == first->id && f.points == first->points && f.count != first->count) {
      throw InputError(fmt::format(
          "{}: shard {}/{} of the same sweep split {} ways, where {} is shard {}/{} (split {} "
          "ways): run every shard with one --shard count",
          part, f.index, f.count, f.count, p.positional().front(), first->index, first->count, first->count));
    }
    if (f.id == first->id && f.count == first->count && f.points == first->points &&
        f.skipped != first->skipped) {
      const auto list = [](const std::set<std::size_t>& s) {
        return s.empty() ? std::string("none") : fmt::format("{}", fmt::join(s, ", "));
      };
      throw InputError(
          fmt::format("{}: its sweep skipped points {}, where {}'s skipped {} (--skip-invalid "
                      "with another binary or input? run every shard alike)",
                      part, list(f.skipped), p.positional().front(), list(first->skipped)));
    }
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
    std::vector<std::string> notes, shard_warnings;
    std::string title;
    bool shard_zipped = false;
    std::vector<Axis> shard_axes;  // its kSweepAxis lines
    std::size_t line_no = 1;       // the lines read so far
    while (next_line(columns) && (columns.rfind(kChartNote, 0) == 0 || columns.rfind(kChartTitle, 0) == 0 ||
                                  columns == kChartZipped || columns.rfind(kSweepAxis, 0) == 0 ||
                                  columns.rfind(kSweepWarning, 0) == 0)) {
      ++line_no;
      if (columns.rfind(kSweepWarning, 0) == 0) {
        shard_warnings.push_back(columns.substr(kSweepWarning.size()));
      } else if (columns == kChartZipped) {
        shard_zipped = true;
      } else if (columns.rfind(kChartTitle, 0) == 0) {
        title = columns.substr(kChartTitle.size());
      } else if (columns.rfind(kSweepAxis, 0) == 0) {
        const std::string axis = columns.substr(kSweepAxis.size());
        const auto eq = axis.find('=');
        Axis a;
        if (eq != std::string::npos) a = Axis{axis.substr(0, eq), split(axis.substr(eq + 1), ',')};
        if (a.key.empty() || a.values.empty() ||
            std::ranges::any_of(a.values, [](const std::string& v) { return v.empty(); })) {
          throw InputError(
              fmt::format("{}:{}: malformed line (expected '{}KEY=V1,V2,...')", part, line_no, kSweepAxis));
        }
        shard_axes.push_back(std::move(a));
      } else {
        notes.push_back(columns.substr(kChartNote.size()));
      }
    }
    ++line_no;  // the columns
    // (the sweep's ID counts --zip: shards of one sweep agree)
    zipped = zipped || shard_zipped;
    if (header.empty()) {
      header = columns;
      chart_notes = notes;
      warnings = shard_warnings;
      if (!title.empty()) chart_title = title;
    } else if (notes != chart_notes || shard_warnings != warnings) {
      throw InputError(
          fmt::format("{}: its chart notes{} differ from {}'s (another tessera wrote it? run every "
                      "shard with one)",
                      part, notes != chart_notes ? "" : " (its warnings)", p.positional().front()));
    }
    // The metric columns this tessera writes (a shard of an older version
    // has others, which would be read in the wrong places).
    const std::string metrics = std::string(",") + kMetricNames;
    if (columns.size() < metrics.size() ||
        columns.compare(columns.size() - metrics.size(), metrics.size(), metrics) != 0 ||
        columns.rfind("point,", 0) != 0 || split(columns, ',').size() < kMetricColumns + 2) {
      throw InputError(
          fmt::format("{}: its columns are not those this tessera writes "
                      "(a shard of an older version's sweep? run it again)",
                      part));
    }
    if (columns != header) {
      throw InputError(fmt::format("{}: its columns differ from {}'s", part, p.positional().front()));
    }
    const auto fields = split(header, ',').size();
    // The grid its rows are points of (kSweepAxis): the same in every
    // shard, one line per setting column, as many points as the first line
    // says.
    const std::vector<std::string> setting_columns = [&] {
      const auto all = split(header, ',');
      return std::vector<std::string>(all.begin() + 1,
                                      all.end() - static_cast<std::ptrdiff_t>(kMetricColumns));
    }();
    if (shard_axes.empty()) {
      throw InputError(
          fmt::format("{}: no '{}KEY=V1,V2,...' lines above its columns (a shard of an older version's "
                      "sweep? run it again)",
                      part, kSweepAxis));
    }
    std::vector<std::string> axis_keys;
    axis_keys.reserve(shard_axes.size());
    for (const Axis& a : shard_axes) axis_keys.push_back(a.key);
    if (axis_keys != setting_columns) {
      throw InputError(fmt::format("{}: its swept keys ('{}' lines: {}) are not its setting columns ({})",
                                   part, kSweepAxis, fmt::join(axis_keys, ", "),
                                   fmt::join(setting_columns, ", ")));
    }
    if (grid_size(shard_axes, shard_zipped) != f.points) {
      throw InputError(
          fmt::format("{}: its swept values ('{}' lines) make {} points, where its first line says {}", part,
                      kSweepAxis, grid_size(shard_axes, shard_zipped), f.points));
    }
    if (sweep_axes.empty()) {
      sweep_axes = shard_axes;
    } else if (shard_axes != sweep_axes) {
      throw InputError(fmt::format("{}: its swept values ('{}' lines) differ from {}'s", part, kSweepAxis,
                                   p.positional().front()));
    }
    // A row's (or failed point's) settings are those of the point its index
    // names (helper 152: an edited row, or one of another sweep, merged
    // under the index it claimed). `cells`: the settings, in column order.
    const auto check_settings = [&](std::size_t idx, const std::vector<std::string>& cells) {
      const std::vector<std::string> expected = grid_values(shard_axes, shard_zipped, idx);
      for (std::size_t k = 0; k < expected.size(); ++k) {
        if (cells[k] == expected[k]) continue;
        throw InputError(
            fmt::format("{}:{}: column '{}': '{}', where point {} of the sweep has {}={} (an edited "
                        "row, or one of another sweep?)",
                        part, line_no, setting_columns[k], cells[k], idx, setting_columns[k], expected[k]));
      }
    };
    std::size_t held = 0;
    std::size_t held_failed = 0;
    for (; next_line(line);) {
      ++line_no;
      if (line.empty() && in.peek() == std::char_traits<char>::eof()) break;  // a last blank line
      // Its GPUs and settings, after it.
      if (line.rfind(kFailedSettingsLine, 0) == 0) {
        const std::string rest = line.substr(kFailedSettingsLine.size());
        const auto colon = rest.find(": ");
        const std::string index = rest.substr(0, colon);
        std::vector<std::string> cells =
            colon == std::string::npos ? std::vector<std::string>{} : split(rest.substr(colon + 2), ',');
        std::vector<double> gpus;
        if (colon == std::string::npos || !is_point_index(index) || failed.count(std::stoull(index)) == 0U ||
            cells.size() != fields - kMetricColumns || !all_numbers({cells.front()}, gpus) ||
            !(gpus[0] > 0)) {
          throw InputError(
              fmt::format("{}:{}: malformed line (expected '{}N: GPUS,SETTING,...' after point N's "
                          "'{}N: error')",
                          part, line_no, kFailedSettingsLine, kFailedLine));
        }
        cells.erase(cells.begin());
        check_settings(std::stoull(index), cells);
        failed_settings[std::stoull(index)] = {cells, gpus[0]};
        continue;
      }
      // A point whose simulation failed, left out by --skip-failed: "#
      // failed point N: why", after the rows.
      if (line.rfind(kFailedLine, 0) == 0) {
        const std::string rest = line.substr(kFailedLine.size());
        const auto colon = rest.find(": ");
        const std::string index = rest.substr(0, colon);
        // The index as the shard wrote it (no leading zero), and an error
        // on one line (no carriage return), not empty.
        if (colon == std::string::npos || !is_point_index(index) ||
            std::to_string(std::stoull(index)) != index || rest.size() == colon + 2 ||
            rest.find('\r') != std::string::npos) {
          throw InputError(
              fmt::format("{}:{}: malformed line (expected '{}N: error')", part, line_no, kFailedLine));
        }
        const auto idx = static_cast<std::size_t>(std::stoull(index));
        if (idx >= f.points || idx % f.count != f.index || f.skipped.count(idx) != 0U) {
          throw InputError(fmt::format("{}:{}: point {} does not belong to shard {}/{} of {} points", part,
                                       line_no, idx, f.index, f.count, f.points));
        }
        if (rows.count(idx) != 0U || !failed.emplace(idx, rest.substr(colon + 2)).second) {
          throw InputError(fmt::format("{}:{}: point {} is given twice", part, line_no, idx));
        }
        ++held_failed;
        continue;
      }
      const auto cols = split(line, ',');
      if (cols.size() != fields || !is_point_index(cols[0])) {
        throw InputError(fmt::format("{}:{}: malformed row (expected a point index, {} settings and {} numbers)", part,
                                     line_no, fields - 1 - kMetricColumns, kMetricColumns));
      }
      // (a bare "malformed row" named no column)
      if (const auto bad = first_non_number_metric(cols)) {
        throw InputError(fmt::format("{}:{}: column '{}': '{}' is not a number{}", part, line_no,
                                     split(header, ',').at(*bad), cols.at(*bad),
                                     cols.at(*bad).starts_with('-') ? " of zero or more" : ""));
      }
      const auto idx = static_cast<std::size_t>(std::stoull(cols[0]));
      if (idx >= f.points || idx % f.count != f.index || f.skipped.count(idx) != 0U) {
        throw InputError(fmt::format("{}:{}: point {} does not belong to shard {}/{} of {} points", part, line_no, idx,
                                     f.index, f.count, f.points));
      }
      check_settings(
          idx, std::vector<std::string>(
                   cols.begin() + 1, cols.begin() + 1 + static_cast<std::ptrdiff_t>(setting_columns.size())));
      if (failed.count(idx) != 0U || !rows.emplace(idx, line).second) {
        throw InputError(fmt::format("{}:{}: point {} is given twice", part, line_no, idx));
      }
      ++held;
    }
    std::size_t owned = f.points > f.index ? (f.points - f.index + f.count - 1) / f.count : 0;
    for (const std::size_t s : f.skipped) owned -= s < f.points && s % f.count == f.index ? 1 : 0;
    if (held + held_failed != owned) {
      std::size_t missing = f.index;
      while (rows.count(missing) != 0U || failed.count(missing) != 0U || f.skipped.count(missing) != 0U)
        missing += f.count;
      throw InputError(
          fmt::format("{}: shard {}/{} holds {} of its {} points (point {} is missing: has the shard "
                      "finished? run it again to resume)",
                      part, f.index, f.count, held + held_failed, owned, missing));
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
  const auto columns = split(header, ',');
  const std::vector<std::string> keys(columns.begin() + 1, columns.end() - static_cast<std::ptrdiff_t>(kMetricColumns));
  std::vector<std::string> notes = chart_notes;
  std::vector<std::size_t> failed_indices;
  failed_indices.reserve(failed.size());
  for (const auto& f : failed) failed_indices.push_back(f.first);
  if (!failed_indices.empty()) notes.push_back(failed_chart_note(failed_indices));
  write_file_atomic(svg_path, svg_chart(rows, keys, chart_title, notes, zipped));
  // The table the unsharded sweep prints, its settings read from the rows
  // (a key of one value in every row is said once above it).
  std::vector<Point> points;
  std::vector<std::set<std::string>> values(keys.size());
  for (const auto& [idx, row] : rows) {
    const auto cols = split(row, ',');
    Point pt{idx, {}};
    for (std::size_t k = 0; k < keys.size(); ++k) {
      pt.overrides.push_back(Override{keys[k], cols[1 + k]});
      values[k].insert(cols[1 + k]);
    }
    points.push_back(std::move(pt));
  }
  const SweepScaling scaling = sweep_scaling(rows, keys, zipped);
  const std::map<std::size_t, double>& efficiency = scaling.efficiency;
  // The training run where the shards' scenarios had training.tokens: in
  // the rows.
  const std::map<std::size_t, study::TrainingRun> runs = training_runs(rows);
  if (p.has("json")) {
    // As sweep --json from the rows: no scenario was read, so no models,
    // scenario warnings or caveats (the shards' sweep --json has them).
    std::string json = fmt::format("{{\"csv\": {}, \"svg\": {}, \"shards\": {}, \"points\": [",
                                   json_string(csv_path), json_string(svg_path), first->count);
    for (std::size_t i = 0; i < points.size(); ++i) {
      const std::string& row = rows.at(points[i].index);
      json += fmt::format("{}{{{}", i == 0 ? "" : ", ", point_json(points[i], row, scaling));
      if (std::string tight = tight_row(row); !tight.empty())
        json += ", \"warnings\": " + json_string_array({tight});
      if (const auto r = runs.find(points[i].index); r != runs.end()) {
        json += ", \"training_run\": " + training_run_json(r->second);
      }
      json += "}";
    }
    // The points --skip-invalid left out, in sweep --json's shape (each
    // shard's own output said why: no error here).
    std::string skipped;
    for (const std::size_t s : first->skipped)
      skipped += fmt::format("{}{{\"point\": {}}}", skipped.empty() ? "" : ", ", s);
    json += fmt::format("], \"skipped\": [{}]", skipped);
    // The points --skip-failed left out, with the shard's error.
    std::string failures;
    for (const auto& [idx, why] : failed)
      failures += fmt::format("{}{{\"point\": {}, \"error\": {}}}", failures.empty() ? "" : ", ", idx,
                              json_string(why));
    json += fmt::format(", \"failed\": [{}]}}\n", failures);
    out << json;
    return 0;
  }
  std::vector<bool> one_value;
  one_value.reserve(values.size());
  for (const auto& v : values) one_value.push_back(v.size() == 1);
  // The price the cost is at: the rows have it only where it was swept (a
  // price worked back from the rounded cells would be off; helper 74).
  const auto price_key = static_cast<std::size_t>(
      std::find(keys.begin(), keys.end(), "cluster.price_per_gpu_hour") - keys.begin());
  const std::string price = price_key == keys.size() ? std::string(", at the shards' price per GPU-hour")
                            : values[price_key].size() == 1
                                ? fmt::format(", at {} per GPU-hour", *values[price_key].begin())
                                : std::string(", at each point's price per GPU-hour");
  // The models line sweep prints above its table, from the shards' chart
  // note of one set of models (several: a note each, below).
  constexpr std::string_view kModels = "Models: ";
  for (const std::string& note : chart_notes) {
    if (note.starts_with(kModels)) out << fmt::format("models: {}\n", note.substr(kModels.size()));
  }
  print_table(out, points, rows, one_value, scaling, runs, price);
  // The warnings about the points' settings, as the shards' sweep printed
  // them (kSweepWarning).
  for (const std::string& w : warnings) out << w << "\n";
  // The caveats the shards' sweep printed under its table, in the short
  // form its chart has them (helper 73: the merged table had none).
  for (const std::string& note : chart_notes) {
    if (!note.starts_with(kModels)) out << fmt::format("note: {}\n", note);
  }
  if (!first->skipped.empty()) {
    out << fmt::format(
        "skipped {} point(s) that are not valid scenarios (--skip-invalid): {} (each shard said why)\n",
        first->skipped.size(), fmt::join(first->skipped, ", "));
  }
  if (!failed.empty()) {
    out << fmt::format("left out {} point(s) whose simulation failed (--skip-failed):\n", failed.size());
    for (const auto& [idx, why] : failed) out << fmt::format("  point {}: {}\n", idx, why);
    // As sweep says it (a shard of an older tessera, whose failed points
    // lack their settings: said, to be safe).
    const bool all_known =
        std::ranges::all_of(failed, [&](const auto& f) { return failed_settings.count(f.first) != 0U; });
    if (!efficiency.empty() &&
        (!all_known || failed_point_below_its_baseline(rows, keys, zipped, failed_settings))) {
      out << kScalingOfWhatRan;
    }
  }
  out << fmt::format("merged {} point{} from {} shard{} into {} and {}\n", rows.size(),
                     rows.size() == 1 ? "" : "s", p.positional().size(),
                     p.positional().size() == 1 ? "" : "s", csv_path, svg_path);
  return 0;
}

}  // namespace tessera::cli
