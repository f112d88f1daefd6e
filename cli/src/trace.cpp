#include "tessera/cli/trace.hpp"

#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <unordered_map>

#include "tessera/cli/args.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/error.hpp"
#include "tessera/files.hpp"

namespace tessera::cli {

namespace {

/// Microseconds with picosecond precision, exactly.
void append_us(std::string& out, Time t) {
  fmt::format_to(std::back_inserter(out), "{}.{:06}", t.ps() / 1'000'000, t.ps() % 1'000'000);
}

// Track (thread) ids inside a rank's process.
constexpr std::int32_t kComputeTid = 0;
constexpr std::int32_t kHostTid = 1;
constexpr std::int32_t kTransferTid = 2;
constexpr std::int32_t kGroupTidBase = 3;  // group g is tid 3 + g
constexpr std::size_t kFlushBytes = std::size_t{1} << 20;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

/// `name` starts with `prefix`, decimal digits and a '.': the number, and
/// `name` past the dot. Else -1, `name` as it was.
std::int64_t take_numbered(std::string_view& name, std::string_view prefix) {
  if (name.size() <= prefix.size() + 1 || name.substr(0, prefix.size()) != prefix) return -1;
  const char* first = name.data() + prefix.size();
  const char* end = name.data() + name.size();
  if (*first < '0' || *first > '9') return -1;
  std::int64_t v = -1;
  const auto [p, ec] = std::from_chars(first, end, v);
  if (ec != std::errc() || p == end || *p != '.') return -1;
  name.remove_prefix(static_cast<std::size_t>(p - name.data()) + 1);
  return v;
}

/// Where a planner task name puts its task (StepNames: "mb3.", "c1.mb3.",
/// then "layer005." for a layer's tasks); -1 for what it does not say.
struct TaskPlace {
  std::int64_t chunk = -1, micro_batch = -1, layer = -1;
};

TaskPlace place_of(std::string_view name) {
  TaskPlace at;
  const std::int64_t chunk = take_numbered(name, "c");
  const std::int64_t mb = take_numbered(name, "mb");
  if (mb < 0) return at;  // no step's task (optimizer, gradient sync)
  at.chunk = chunk;
  at.micro_batch = mb;
  at.layer = take_numbered(name, "layer");
  return at;
}

/// A slice's args from its task's name (place_of): "chunk", "micro_batch"
/// and "layer", those it says, each followed by a comma.
void append_place(std::string& out, std::string_view name) {
  const TaskPlace at = place_of(name);
  if (at.chunk >= 0) fmt::format_to(std::back_inserter(out), R"("chunk":{},)", at.chunk);
  if (at.micro_batch >= 0) fmt::format_to(std::back_inserter(out), R"("micro_batch":{},)", at.micro_batch);
  if (at.layer >= 0) fmt::format_to(std::back_inserter(out), R"("layer":{},)", at.layer);
}

}  // namespace

// ---------------------------------------------------------------------------
// Option parsing

std::vector<int> parse_index_list(std::string_view text, std::string_view what, std::int64_t limit,
                                  bool once) {
  std::vector<int> out;
  auto number = [&](std::string_view item, std::string_view part) {
    std::int64_t v = -1;
    const auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || p != part.data() + part.size() || v < 0) {
      throw InputError(
          fmt::format("{}: '{}' is not a number or a range A-B of non-negative numbers", what, item));
    }
    if (v >= limit) throw InputError(fmt::format("{}: {} is out of range (0..{})", what, v, limit - 1));
    return static_cast<int>(v);
  };
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const auto comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, comma - pos);
    if (item.empty()) throw InputError(fmt::format("{}: empty item in '{}'", what, text));
    const auto dash = item.find('-');
    if (dash == std::string_view::npos) {
      out.push_back(number(item, item));
    } else {
      const int a = number(item, item.substr(0, dash));
      const int b = number(item, item.substr(dash + 1));
      if (b < a) throw InputError(fmt::format("{}: range '{}' runs backwards", what, item));
      for (int v = a; v <= b; ++v) out.push_back(v);
    }
    pos = comma + 1;
  }
  std::sort(out.begin(), out.end());
  if (once) {
    const auto twice = std::adjacent_find(out.begin(), out.end());
    if (twice != out.end())
      throw InputError(fmt::format("{}: {} is listed twice in '{}'", what, *twice, text));
  }
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

bool parse_on_off(std::string_view text, std::string_view what) {
  if (text == "on" || text == "true" || text == "yes" || text == "1") return true;
  if (text == "off" || text == "false" || text == "no" || text == "0") return false;
  throw InputError(fmt::format("{}: expected on or off, got '{}'", what, text));
}

std::vector<int> default_trace_ranks(const parallelism::ParallelPlan& plan, int ranks) {
  std::vector<int> out;
  if (ranks <= 64 || plan.world_size() != ranks) {
    for (int r = 0; r < std::min(ranks, 64); ++r) out.push_back(r);
    return out;
  }
  for (int stage = 0; stage < plan.pp; ++stage) out.push_back(parallelism::rank_of(plan, {0, 0, stage}));
  return out;
}

TraceOptions trace_options(const ArgParser& args, const Scenario& s) {
  TraceOptions o;
  o.ranks = s.outputs.trace_ranks;
  o.micro_batches = s.outputs.trace_micro_batches;
  o.transfers = s.outputs.trace_transfers;
  if (auto v = args.get("trace-ranks")) o.ranks = parse_index_list(*v, "--trace-ranks", s.gpus());
  // Micro-batches the plan has: one it does not would leave the trace
  // without any micro-batch slice.
  const std::int64_t micro_batches = s.plan.micro_batches(s.workload.micro_batch);
  std::string source = fmt::format("{}: outputs.trace_micro_batches", s.file);
  if (auto v = args.get("trace-micro-batches")) {
    o.micro_batches = parse_index_list(*v, "--trace-micro-batches", kMaxTraceMicroBatch);
    source = "--trace-micro-batches";
  }
  for (int mb : o.micro_batches) {
    if (mb >= micro_batches) {
      throw InputError(fmt::format("{}: {} is out of range (0..{}: the plan has {} micro-batch{})", source,
                                   mb, micro_batches - 1, micro_batches, micro_batches == 1 ? "" : "es"));
    }
  }
  if (auto v = args.get("trace-transfers")) o.transfers = parse_on_off(*v, "--trace-transfers");
  o.compute_scale = s.compute_scale;
  o.scenario = fmt::format("{} ({}: {} on {} x {}, dp={} tp={} pp={}, {} micro-batch{} of {})", s.file,
                           s.name, s.model.name, s.gpus(), s.gpu.name, s.plan.dp, s.plan.tp, s.plan.pp,
                           micro_batches, micro_batches == 1 ? "" : "es", s.workload.micro_batch);
  return o;
}

// ---------------------------------------------------------------------------
// File sink

FileTraceSink::FileTraceSink(std::string path) : path_(std::move(path)) {
  // Through a link to its target; a device or pipe in place (output_target).
  const OutputTarget target = output_target(path_);
  target_ = target.path;
  tmp_ = target.direct ? target.path : temporary_path(target.path, static_cast<long>(::getpid()));
  direct_ = target.direct;
  // In any case (helper 121: x.JSON.GZ was written as plain JSON).
  std::string lower = path_;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ends_with(lower, ".gz")) {
    // gzopen writes a header without name or time: deterministic output.
    gz_ = ::gzopen(tmp_.c_str(), "wb6");
    if (gz_ == nullptr) throw InputError(fmt::format("{}: cannot write: {}", path_, std::strerror(errno)));
    ::gzbuffer(static_cast<gzFile>(gz_), 1U << 18U);
  } else {
    file_ = std::fopen(tmp_.c_str(), "wb");
    if (file_ == nullptr) throw InputError(fmt::format("{}: cannot write: {}", path_, std::strerror(errno)));
  }
}

FileTraceSink::~FileTraceSink() {
  if (committed_) return;
  if (file_ != nullptr) std::fclose(file_);
  if (gz_ != nullptr) ::gzclose(static_cast<gzFile>(gz_));
  if (!direct_) std::remove(tmp_.c_str());
}

void FileTraceSink::write(std::string_view text) {
  if (committed_) throw InputError(fmt::format("{}: written after it was completed", path_));
  while (!text.empty()) {
    const std::size_t n = std::min<std::size_t>(text.size(), 1U << 30U);
    bool ok = false;
    if (gz_ != nullptr) {
      ok = ::gzwrite(static_cast<gzFile>(gz_), text.data(), static_cast<unsigned>(n)) == static_cast<int>(n);
    } else {
      ok = std::fwrite(text.data(), 1, n, file_) == n;
    }
    if (!ok) throw InputError(fmt::format("{}: write failed: {}", path_, std::strerror(errno)));
    text.remove_prefix(n);
  }
}

void FileTraceSink::commit() {
  if (committed_) return;
  bool ok = true;
  if (gz_ != nullptr) {
    ok = ::gzclose(static_cast<gzFile>(gz_)) == Z_OK;
    gz_ = nullptr;
  } else if (file_ != nullptr) {
    ok = std::fclose(file_) == 0;
    file_ = nullptr;
  }
  if (!ok) {
    const std::string why = std::strerror(errno);
    if (!direct_) std::remove(tmp_.c_str());
    committed_ = true;
    throw InputError(fmt::format("{}: write failed: {}", path_, why));
  }
  if (!direct_ && std::rename(tmp_.c_str(), target_.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp_.c_str());
    committed_ = true;
    throw InputError(fmt::format("{}: cannot write: {}", path_, why));
  }
  committed_ = true;
}

// ---------------------------------------------------------------------------
// Link load: payload bytes per link in time bins, for the counters. A fixed
// number of bins per link; when a transfer ends past the last bin, every bin
// doubles in width (pairs merged), so memory does not grow with the run.

class ChromeTraceObserver::LinkLoad {
 public:
  static constexpr std::int64_t kBins = 1000;

  explicit LinkLoad(const topology::Topology& topo)
      : topo_(topo), bins_(topo.links().size()), total_(topo.links().size(), 0.0) {}

  void add(int src, int dst, Time start, Time end, double bytes) {
    if (bytes <= 0 || src == dst) return;
    const auto& path = route(src, dst);
    if (path.empty()) return;
    while (end.ps() >= kBins * width_) widen();
    const std::int64_t s = start.ps(), e = std::max(end.ps(), s + 1);
    const std::int64_t first = s / width_, last = (e - 1) / width_;
    for (const topology::LinkId l : path) {
      auto& b = bins_[static_cast<std::size_t>(l)];
      if (b.empty()) b.assign(static_cast<std::size_t>(kBins), 0.0);
      total_[static_cast<std::size_t>(l)] += bytes;
      if (first == last) {
        b[static_cast<std::size_t>(first)] += bytes;
        continue;
      }
      const double per_ps = bytes / static_cast<double>(e - s);
      for (std::int64_t k = first; k <= last; ++k) {
        const std::int64_t lo = std::max(s, k * width_), hi = std::min(e, (k + 1) * width_);
        b[static_cast<std::size_t>(k)] += per_ps * static_cast<double>(hi - lo);
      }
    }
  }

  /// `n` links: the busiest (by bytes) of each link tier in turn (NVLink,
  /// host, leaf-spine, ...: the first of every tier that carried traffic,
  /// then the second, ...), so that a tier whose links all carry more
  /// (NVLink under tensor parallelism) does not hide the fabric. Ties: lower
  /// link id first.
  [[nodiscard]] std::vector<topology::LinkId> busiest(int n) const {
    std::vector<std::vector<topology::LinkId>> tiers(topology::kNumLinkTiers);
    for (std::size_t l = 0; l < total_.size(); ++l) {
      if (total_[l] <= 0) continue;
      const auto id = static_cast<topology::LinkId>(l);
      tiers[static_cast<std::size_t>(topo_.tier(id))].push_back(id);
    }
    for (auto& t : tiers) {
      std::stable_sort(t.begin(), t.end(), [&](topology::LinkId a, topology::LinkId b) {
        return total_[static_cast<std::size_t>(a)] > total_[static_cast<std::size_t>(b)];
      });
    }
    std::vector<topology::LinkId> ids;
    for (std::size_t rank = 0; static_cast<int>(ids.size()) < n; ++rank) {
      bool any = false;
      for (const auto& t : tiers) {
        if (rank >= t.size() || static_cast<int>(ids.size()) >= n) continue;
        ids.push_back(t[rank]);
        any = true;
      }
      if (!any) break;
    }
    return ids;
  }
  [[nodiscard]] const std::vector<double>& bins(topology::LinkId l) const {
    return bins_[static_cast<std::size_t>(l)];
  }
  /// The bins of `l` with none above `full` bytes (the line rate): spread
  /// evenly over its lifetime, a transfer that ran faster while it had the
  /// link to itself (slower once shared) puts too few bytes in its early
  /// bins and too many in its late ones, and transfers sharing the link can
  /// then sum above the line rate. The excess of a bin moves to the nearest
  /// earlier bins with room (where the bytes went), what is left to the
  /// nearest later ones; the total stays the link's bytes.
  /// `cap[k]` is bin k's room at line rate (less in a last bin cut by the
  /// iteration's end).
  [[nodiscard]] std::vector<double> capped(topology::LinkId l, const std::vector<double>& cap) const {
    std::vector<double> b = bins(l);
    double carry = 0;
    for (std::size_t k = b.size(); k-- > 0;) {
      b[k] += carry;
      carry = std::max(0.0, b[k] - cap[k]);
      b[k] -= carry;
    }
    for (std::size_t k = 0; k < b.size() && carry > 0; ++k) {
      const double room = std::max(0.0, cap[k] - b[k]);
      const double put = std::min(room, carry);
      b[k] += put;
      carry -= put;
    }
    return b;
  }
  [[nodiscard]] double total(topology::LinkId l) const { return total_[static_cast<std::size_t>(l)]; }
  [[nodiscard]] std::int64_t width_ps() const { return width_; }

 private:
  const topology::Path& route(int src, int dst) {
    const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32U) |
                              static_cast<std::uint32_t>(dst);
    auto it = routes_.find(key);
    if (it == routes_.end()) it = routes_.emplace(key, topo_.route(src, dst)).first;
    return it->second;
  }
  void widen() {
    for (auto& b : bins_) {
      if (b.empty()) continue;
      for (std::int64_t k = 0; k < kBins / 2; ++k) {
        b[static_cast<std::size_t>(k)] =
            b[static_cast<std::size_t>(2 * k)] + b[static_cast<std::size_t>(2 * k + 1)];
      }
      std::fill(b.begin() + kBins / 2, b.end(), 0.0);
    }
    width_ *= 2;
  }

  const topology::Topology& topo_;
  std::unordered_map<std::uint64_t, topology::Path> routes_;  // lookup only, never iterated
  std::vector<std::vector<double>> bins_;                     // per link, empty until used
  std::vector<double> total_;
  std::int64_t width_ = 1'000'000;  // 1 us
};

// ---------------------------------------------------------------------------
// The observer

ChromeTraceObserver::ChromeTraceObserver(TraceSink& sink, int ranks, TraceLayout layout, TraceOptions options,
                                         const topology::Topology* topology)
    : sink_(sink), ranks_(ranks), layout_(layout), options_(std::move(options)), topology_(topology) {
  if (options_.ranks.empty()) options_.ranks = default_trace_ranks(layout_.plan, ranks_);
  traced_.assign(static_cast<std::size_t>(std::max(ranks_, 0)), 0);
  for (int r : options_.ranks) {
    if (r < 0 || r >= ranks_)
      throw InputError(fmt::format("trace: rank {} is out of range (0..{})", r, ranks_ - 1));
    traced_[static_cast<std::size_t>(r)] = 1;
  }
  declared_.resize(traced_.size());
  if (topology_ != nullptr && options_.link_counters > 0) links_ = std::make_unique<LinkLoad>(*topology_);
  buffer_.reserve(kFlushBytes + 4096);
  // What was recorded, in the header (the Trace Event Format's otherData).
  auto list = [](const std::vector<int>& v) {
    std::string s;
    for (std::size_t i = 0; i < v.size(); ++i)
      fmt::format_to(std::back_inserter(s), "{}{}", i ? "," : "", v[i]);
    return s;
  };
  fmt::format_to(
      std::back_inserter(buffer_),
      R"({{"displayTimeUnit":"ns","otherData":{{"generator":"tessera",{}"ranks":"{}","micro_batches":"{}",)"
      R"("transfers":"{}","link_counters":{}}},"traceEvents":[)",
      options_.scenario.empty() ? "" : fmt::format(R"("scenario":{},)", json_string(options_.scenario)),
      list(options_.ranks), options_.micro_batches.empty() ? "all" : list(options_.micro_batches),
      options_.transfers ? "on" : "off", links_ ? options_.link_counters : 0);
}

ChromeTraceObserver::~ChromeTraceObserver() = default;

void ChromeTraceObserver::begin_event() {
  buffer_ += events_ == 0 ? "\n" : ",\n";
  ++events_;
}

void ChromeTraceObserver::flush_if_full() {
  if (buffer_.size() < kFlushBytes) return;
  sink_.write(buffer_);
  buffer_.clear();
}

void ChromeTraceObserver::on_start(const parallelism::TaskGraph& graph) {
  // The planner names a step's collectives of one kind alike (a layer's
  // tensor-parallel all-reduces: `tessera collectives` counts them so);
  // here each is numbered by its place among its name's collectives in its
  // rank's program, the order the rank issues them. Counted once per
  // program a traced rank runs (a stage's, shared by its tp x dp ranks).
  occurrences_.assign(graph.programs.size(), Occurrences{});
  program_of_.assign(traced_.size(), -1);
  std::unordered_map<std::string_view, std::int32_t> seen;  // lookup only, never iterated
  for (int r = 0; r < std::min(graph.num_ranks(), ranks_); ++r) {
    if (!traced(r)) continue;
    const std::int32_t p = graph.ranks[static_cast<std::size_t>(r)].program;
    program_of_[static_cast<std::size_t>(r)] = p;
    Occurrences& o = occurrences_[static_cast<std::size_t>(p)];
    const auto& tasks = graph.programs[static_cast<std::size_t>(p)]->tasks;
    if (o.tasks == tasks.data()) continue;  // counted for an earlier rank
    o.tasks = tasks.data();
    o.nth.assign(tasks.size(), 0);
    seen.clear();
    for (std::size_t i = 0; i < tasks.size(); ++i) {
      if (tasks[i].kind == parallelism::TaskKind::Collective) o.nth[i] = ++seen[tasks[i].name];
    }
  }
}

std::int32_t ChromeTraceObserver::occurrence(int rank, const parallelism::Task& task) const {
  if (rank < 0 || static_cast<std::size_t>(rank) >= program_of_.size()) return 0;
  const std::int32_t p = program_of_[static_cast<std::size_t>(rank)];
  if (p < 0) return 0;
  const Occurrences& o = occurrences_[static_cast<std::size_t>(p)];
  const std::less<const parallelism::Task*> before;
  if (o.nth.empty() || before(&task, o.tasks) || !before(&task, o.tasks + o.nth.size())) return 0;
  return o.nth[static_cast<std::size_t>(&task - o.tasks)];
}

void ChromeTraceObserver::append_task_name(int rank, const parallelism::Task& task) {
  append_json_escaped(buffer_, task.name);
  const std::int32_t n = occurrence(rank, task);
  if (n > 1) fmt::format_to(std::back_inserter(buffer_), ".{}", n);
}

bool ChromeTraceObserver::micro_batch_kept(std::string_view task_name) const {
  if (options_.micro_batches.empty()) return true;
  const std::int64_t mb = place_of(task_name).micro_batch;
  return mb < 0 || std::binary_search(options_.micro_batches.begin(), options_.micro_batches.end(), mb);
}

namespace {

/// A group's ranks in a track name: "8 ranks, 0..7" when consecutive, "2
/// ranks, 0..8 every 8" at a constant stride, else "3 ranks: 0, 1, 5".
std::string rank_span(const std::vector<int>& m) {
  if (m.size() < 2) return fmt::format("1 rank, {}", m.front());
  const int stride = m[1] - m[0];
  bool constant = stride > 0;
  for (std::size_t i = 1; i < m.size() && constant; ++i) constant = m[i] - m[i - 1] == stride;
  if (constant && stride == 1) return fmt::format("{} ranks, {}..{}", m.size(), m.front(), m.back());
  if (constant) return fmt::format("{} ranks, {}..{} every {}", m.size(), m.front(), m.back(), stride);
  std::string list;
  for (std::size_t i = 0; i < std::min<std::size_t>(m.size(), 6); ++i)
    list += fmt::format("{}{}", i ? ", " : "", m[i]);
  return fmt::format("{} ranks: {}{}", m.size(), list, m.size() > 6 ? ", ..." : "");
}

}  // namespace

std::string ChromeTraceObserver::track_name(int rank, std::int32_t tid, const parallelism::Task* task,
                                            const std::vector<int>* members) const {
  if (tid == kComputeTid) return "compute";
  if (tid == kTransferTid) return "transfers (sent)";
  if (tid == kHostTid) return "host (GPU waits for the host)";
  const std::int32_t group = tid - kGroupTidBase;
  if (members == nullptr || members->empty()) return fmt::format("comm group {}", group);
  const auto& plan = layout_.plan;
  const bool in_layout = plan.world_size() == ranks_;
  auto coord = [&](int r) { return parallelism::rank_coord(plan, r); };
  if (task != nullptr && task->collective == parallelism::CollectiveKind::SendRecv && members->size() == 2) {
    const int sender = (*members)[0], receiver = (*members)[1];
    if (rank == sender) {
      return in_layout ? fmt::format("pp-send to stage {} (rank {})", coord(receiver).pp, receiver)
                       : fmt::format("send to rank {}", receiver);
    }
    return in_layout ? fmt::format("pp-recv from stage {} (rank {})", coord(sender).pp, sender)
                     : fmt::format("recv from rank {}", sender);
  }
  const auto& m = *members;
  if (in_layout) {
    const auto c0 = coord(m.front());
    bool same_pp = true, same_dp = true, same_tp = true;
    for (int r : m) {
      const auto c = coord(r);
      same_pp = same_pp && c.pp == c0.pp;
      same_dp = same_dp && c.dp == c0.dp;
      same_tp = same_tp && c.tp == c0.tp;
    }
    const auto span = rank_span(m);
    if (same_pp && same_dp) return fmt::format("tp ({})", span);
    // Mixtures of experts: the expert-parallel group (all-to-alls) and the
    // ranks holding the same experts are data-parallel ranks too.
    if (same_pp && same_tp && task != nullptr && task->collective == parallelism::CollectiveKind::AllToAll) {
      return fmt::format("ep ({})", span);
    }
    if (same_pp && same_tp && task != nullptr && task->name.find("expert") != std::string_view::npos) {
      return fmt::format("expert dp ({})", span);
    }
    if (same_pp && same_tp) return fmt::format("dp ({})", span);
    if (task != nullptr && task->name.find("embedding") != std::string_view::npos) {
      // (the first and the last stage only: "0..7" would read as eight stages)
      return fmt::format("embedding (stages {} and {}, {})", c0.pp, coord(m.back()).pp, span);
    }
    if (!same_pp) return fmt::format("pp ({})", span);
  }
  return fmt::format("comm group {} ({})", group, rank_span(m));
}

void ChromeTraceObserver::declare(int rank, std::int32_t tid, const parallelism::Task* task,
                                  const std::vector<int>* members) {
  auto& tracks = declared_[static_cast<std::size_t>(rank)];
  if (std::find(tracks.begin(), tracks.end(), tid) != tracks.end()) return;
  if (tracks.empty()) {
    std::string name = fmt::format("rank {}", rank);
    if (layout_.plan.world_size() == ranks_) {
      const auto c = parallelism::rank_coord(layout_.plan, rank);
      fmt::format_to(std::back_inserter(name), " (node {}, stage {}, dp {}",
                     rank / std::max(layout_.gpus_per_node, 1), c.pp, c.dp);
      // The expert shard it holds: its place in its expert-parallel group
      // (dp ranks ep apart hold the same experts).
      if (layout_.plan.ep > 1) fmt::format_to(std::back_inserter(name), ", ep {}", c.dp % layout_.plan.ep);
      fmt::format_to(std::back_inserter(name), ", tp {})", c.tp);
    }
    begin_event();
    fmt::format_to(std::back_inserter(buffer_),
                   R"({{"name":"process_name","ph":"M","pid":{},"tid":0,"args":{{"name":")", rank);
    append_json_escaped(buffer_, name);
    buffer_ += "\"}}";
    begin_event();
    fmt::format_to(std::back_inserter(buffer_),
                   R"({{"name":"process_sort_index","ph":"M","pid":{},"tid":0,"args":{{"sort_index":{}}}}})",
                   rank, rank);
  }
  tracks.push_back(tid);
  begin_event();
  fmt::format_to(std::back_inserter(buffer_),
                 R"({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":")", rank, tid);
  append_json_escaped(buffer_, track_name(rank, tid, task, members));
  buffer_ += "\"}}";
  begin_event();
  fmt::format_to(std::back_inserter(buffer_),
                 R"({{"name":"thread_sort_index","ph":"M","pid":{},"tid":{},"args":{{"sort_index":{}}}}})",
                 rank, tid, tid);
}

void ChromeTraceObserver::on_compute(int rank, const parallelism::Task& task, Time start, Time end) {
  end_ = std::max(end_, end);
  if (!traced(rank) || !micro_batch_kept(task.name)) return;
  // A task with no GPU work that took no time (a host sync the GPU had
  // already reached) draws nothing: helper 60 counted 135 zero-length
  // `.sync` slices cluttering the compute track.
  if (task.duration == Time::zero() && end == start) return;
  // A task with no GPU work that still takes time (a micro-batch's data
  // step) is the host's: on the host track, so the compute track holds
  // only what the GPU runs.
  const bool host_only = task.duration == Time::zero() && end > start;
  const int tid = host_only ? kHostTid : kComputeTid;
  declare(rank, tid, nullptr, nullptr);
  begin_event();
  buffer_ += host_only ? R"({"name":"host work: )" : R"({"name":")";
  append_json_escaped(buffer_, task.name);
  fmt::format_to(std::back_inserter(buffer_), R"(","cat":"{}","ph":"X","pid":{},"tid":{},"ts":)",
                 host_only ? "host" : "compute", rank, tid);
  append_us(buffer_, start);
  buffer_ += R"(,"dur":)";
  append_us(buffer_, end - start);
  if (!host_only) {
    // What the task carries besides its time (the slice): where its name
    // puts it and the FLOPs its kernels execute on this rank (Task::flops,
    // recomputation included: what HFU counts). No op or kernel kind: a
    // task is a run of kernels and keeps none (the slice name says the
    // piece, `fwd.attn`).
    buffer_ += R"(,"args":{)";
    append_place(buffer_, task.name);
    fmt::format_to(std::back_inserter(buffer_), R"("flops":{:.0f})", task.flops.count());
    // A task whose kernels the host launched slower than the GPU ran them
    // (the optimizer's many small kernels, a host-bound layer): the slice
    // is the task's span; its args split it into the kernels' time and the
    // host's (what the summary's host time counts).
    const auto r = static_cast<std::size_t>(rank);
    const double scale = r < options_.compute_scale.size() ? options_.compute_scale[r] : 1.0;
    const Time kernels = engine::scaled_duration(task.duration, scale);
    if (end - start > kernels + Time::from_us(1)) {
      buffer_ += R"(,"kernels_us":)";
      append_us(buffer_, kernels);
      buffer_ += R"(,"host_us":)";
      append_us(buffer_, end - start - kernels);
    }
    buffer_ += '}';
  }
  buffer_ += '}';
  flush_if_full();
}

void ChromeTraceObserver::on_host_wait(int rank, const parallelism::Task& task, Time start, Time end) {
  if (!traced(rank) || !micro_batch_kept(task.name)) return;
  declare(rank, kHostTid, nullptr, nullptr);
  begin_event();
  buffer_ += R"({"name":"wait for host: )";
  append_task_name(rank, task);
  fmt::format_to(std::back_inserter(buffer_), R"(","cat":"host","ph":"X","pid":{},"tid":{},"ts":)", rank,
                 kHostTid);
  append_us(buffer_, start);
  buffer_ += R"(,"dur":)";
  append_us(buffer_, end - start);
  buffer_ += '}';
  flush_if_full();
}

void ChromeTraceObserver::on_collective_member(int rank, const parallelism::Task& task, std::int32_t group,
                                               const std::vector<int>& ranks, Time start, Time end) {
  // Each member's slice by its own task (helper 144: named by one member's,
  // an interleaved pipeline's message from the last stage to the first
  // took the sender's chunk, or the receiver's, by which arrived first).
  const std::int32_t tid = kGroupTidBase + group;
  const auto flow = pending_flows_.find(group);
  const bool last = flow != pending_flows_.end() && --flow->second.members_left == 0;
  if (traced(rank) && micro_batch_kept(task.name)) {
    declare(rank, tid, &task, &ranks);
    begin_event();
    buffer_ += R"({"name":")";
    append_task_name(rank, task);
    fmt::format_to(std::back_inserter(buffer_), R"(","cat":"{}","ph":"X","pid":{},"tid":{},"ts":)",
                   parallelism::to_string(task.collective), rank, tid);
    append_us(buffer_, start);
    buffer_ += R"(,"dur":)";
    append_us(buffer_, end - start);
    buffer_ += R"(,"args":{)";
    append_place(buffer_, task.name);
    fmt::format_to(std::back_inserter(buffer_), R"("bytes":{},"ranks":{}}}}})", task.bytes.count(),
                   ranks.size());
  }
  if (last) {
    // A flow arrow from the sender's slice to the receiver's, after both.
    const PendingFlow f = flow->second;
    pending_flows_.erase(flow);
    for (int side = 0; side < 2; ++side) {
      begin_event();
      fmt::format_to(std::back_inserter(buffer_),
                     R"({{"name":"pp","cat":"pp-flow","ph":"{}",{}"id":{},"pid":{},"tid":{},"ts":)",
                     side == 0 ? "s" : "f", side == 0 ? "" : R"("bp":"e",)", f.id,
                     side == 0 ? f.sender : f.receiver, tid);
      append_us(buffer_, f.start);
      buffer_ += '}';
    }
  }
  flush_if_full();
}

void ChromeTraceObserver::on_collective(const parallelism::Task& task, std::int32_t group,
                                        const std::vector<int>& ranks, Time start, Time end) {
  end_ = std::max(end_, end);
  // (the members' slices, and after them a message's flow arrow:
  // on_collective_member)
  if (!micro_batch_kept(task.name)) return;
  const bool p2p = task.collective == parallelism::CollectiveKind::SendRecv && ranks.size() == 2;
  if (p2p && traced(ranks[0]) && traced(ranks[1])) {
    pending_flows_[group] = PendingFlow{next_id_++, ranks[0], ranks[1], start, ranks.size()};
  }
}

void ChromeTraceObserver::on_transfer(const collectives::Transfer& t, Time start, Time end) {
  end_ = std::max(end_, end);
  if (links_) links_->add(t.src, t.dst, start, end, static_cast<double>(t.bytes.count()));
  if (!options_.transfers || !traced(t.src)) return;
  declare(t.src, kTransferTid, nullptr, nullptr);
  const std::int64_t id = next_id_++;
  begin_event();
  fmt::format_to(std::back_inserter(buffer_),
                 R"({{"name":"send {}->{}","cat":"transfer","ph":"b","id":{},"pid":{},"tid":{},"ts":)", t.src,
                 t.dst, id, t.src, kTransferTid);
  append_us(buffer_, start);
  fmt::format_to(std::back_inserter(buffer_), R"(,"args":{{"bytes":{},"step":{}}}}})", t.bytes.count(),
                 t.step);
  begin_event();
  fmt::format_to(std::back_inserter(buffer_),
                 R"({{"name":"send {}->{}","cat":"transfer","ph":"e","id":{},"pid":{},"tid":{},"ts":)", t.src,
                 t.dst, id, t.src, kTransferTid);
  append_us(buffer_, end);
  buffer_ += '}';
  flush_if_full();
}

void ChromeTraceObserver::finish() {
  if (finished_) return;
  finished_ = true;
  if (links_) {
    const auto busiest = links_->busiest(options_.link_counters);
    const int pid = ranks_;  // after every rank
    if (!busiest.empty()) {
      begin_event();
      fmt::format_to(
          std::back_inserter(buffer_),
          R"j({{"name":"process_name","ph":"M","pid":{},"tid":0,"args":{{"name":"links (busiest {} by bytes, tier by tier)"}}}})j",
          pid, busiest.size());
      begin_event();
      fmt::format_to(
          std::back_inserter(buffer_),
          R"({{"name":"process_sort_index","ph":"M","pid":{},"tid":0,"args":{{"sort_index":{}}}}})", pid,
          pid);
      begin_event();
      fmt::format_to(
          std::back_inserter(buffer_),
          R"({{"name":"thread_name","ph":"M","pid":{},"tid":0,"args":{{"name":"link utilization"}}}})", pid);
    }
    const std::int64_t width = links_->width_ps();
    for (const topology::LinkId l : busiest) {
      const auto& link = topology_->link(l);
      std::string name = fmt::format("{} link {} ", topology::to_string(topology_->tier(l)), l);
      append_json_escaped(name, topology_->vertex(link.src).name);
      name += "->";
      append_json_escaped(name, topology_->vertex(link.dst).name);
      // Bytes a bin holds at line rate: the bins end with the iteration (a
      // last bin cut by its end holds that part's; helper 177: the counters
      // ran 0.2 ms past gpt3-175b's end, the last bin averaged over time
      // after it), and a sample at the end returns to 0.
      const double rate = link.bandwidth.bytes_per_second() * 1e-12;  // bytes per ps
      // (the bins the iteration reaches; the rest hold nothing)
      const std::size_t used =
          std::min(links_->bins(l).size(),
                   end_ > Time::zero() ? static_cast<std::size_t>((end_.ps() - 1) / width) + 1 : 0);
      std::vector<double> cap(links_->bins(l).size(), 0.0);
      for (std::size_t k = 0; k < used; ++k) {
        const std::int64_t from = static_cast<std::int64_t>(k) * width;
        cap[k] = rate * static_cast<double>(std::min(width, end_.ps() - from));
      }
      const std::vector<double> bins = links_->capped(l, cap);
      std::string last;
      for (std::size_t k = 0; k <= used; ++k) {
        const double u = k < used && cap[k] > 0 ? bins[k] / cap[k] : 0.0;
        std::string value = fmt::format("{:.4f}", u);
        if (value == last && k < used) continue;
        if (value == last) break;
        last = value;
        begin_event();
        fmt::format_to(std::back_inserter(buffer_),
                       R"({{"name":"{}","cat":"link","ph":"C","pid":{},"tid":0,"ts":)", name, pid);
        append_us(buffer_, k < used ? Time::from_ps(static_cast<std::int64_t>(k) * width) : end_);
        fmt::format_to(std::back_inserter(buffer_), R"(,"args":{{"utilization":{}}}}})", value);
        flush_if_full();
      }
    }
  }
  buffer_ += "\n]}\n";
  sink_.write(buffer_);
  buffer_.clear();
  buffer_.shrink_to_fit();
}

// ---------------------------------------------------------------------------

TraceFile::TraceFile(const std::string& path, const Scenario& s, TraceOptions options) : sink_(path) {
  if (options.link_counters > 0) topology_ = std::make_unique<topology::Topology>(build_topology(s));
  observer_ = std::make_unique<ChromeTraceObserver>(
      sink_, s.gpus(), TraceLayout{s.plan, s.cluster.gpus_per_node}, std::move(options), topology_.get());
}

TraceFile::~TraceFile() = default;

void TraceFile::finish() {
  observer_->finish();
  sink_.commit();
}

}  // namespace tessera::cli
