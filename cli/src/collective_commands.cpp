// `tessera validate collectives`: the calibrated communication model
// (engine::CommCalibration) against measured NCCL collectives on one NVLink
// node (docs/collectives.md, "Calibration"). Every measured row is simulated
// on a one-node scenario of the right GPU and NVLink, through the same
// options and engine a scenario uses.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/cli/args.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/collectives/expand.hpp"
#include "tessera/engine/comm_calibration.hpp"
#include "tessera/engine/event_loop.hpp"
#include "tessera/engine/executor.hpp"
#include "tessera/engine/flow_network.hpp"
#include "tessera/error.hpp"
#include "tessera/files.hpp"
#include "tessera/node_model/csv.hpp"
#include "tessera/node_model/gpu_spec.hpp"
#include "tessera/parallelism/task_graph.hpp"
#include "tessera/study/nccl_tests.hpp"
#include "tessera/study/pipeline.hpp"

namespace tessera::cli {
namespace fs = std::filesystem;
using parallelism::CollectiveKind;

namespace {

/// The measured tables and the node each ran on.
struct Table {
  std::string name;    ///< "a100", "h100"
  std::string gpu;     ///< GPU preset of the simulated node
  std::string nvlink;  ///< NVLink rate per GPU per direction (unit string)
  std::string what;    ///< one line for the report
};
const Table kTables[] = {
    {"a100", "A100-80GB", "300GB/s",
     "vTrain nccl-tests all-reduce, 8 x A100 SXM (NVLink 3, 300 GB/s), per-op GPU time"},
    {"h100", "H100-SXM", "450GB/s",
     "XLA collectives, 8 x H100 (NVLink 4, 450 GB/s), host wall time incl. launch"},
};
/// The topology's NVLink latency per link (GPU -> NVSwitch -> GPU: two
/// links per transfer), as in the shipped scenarios. The fitted launch
/// latency comes on top of it.
constexpr const char* kNvlinkLatency = "1us";
/// Rows below this size are reported but never fitted (the H100 table's
/// host wall time is dominated there by launch and synchronisation).
constexpr std::int64_t kFitMinBytes = engine::kCollectiveFitMinBytes;

struct Row {
  const Table* table = nullptr;
  std::string file;
  std::size_t line = 0;  ///< 1-based line in the file (header = 1)
  std::string op;        ///< as the table names it
  CollectiveKind kind = CollectiveKind::AllReduce;
  std::string series;                    ///< "1x8", "4x2", "ring", ...
  std::vector<std::vector<int>> groups;  ///< each collective's ranks (sender first for send-recv)
  Bytes bytes;
  Time measured;
  // Filled in:
  engine::CollectiveSample sample;  ///< closed-form description (first group)
  Time predicted;
  double weight = 0.0;  ///< in fits: per table 1, per series equal, log-size trapezoid within
};

CollectiveKind kind_of(const std::string& op, const std::string& where) {
  if (op == "all-reduce") return CollectiveKind::AllReduce;
  if (op == "all-gather") return CollectiveKind::AllGather;
  if (op == "reduce-scatter") return CollectiveKind::ReduceScatter;
  if (op == "all-to-all") return CollectiveKind::AllToAll;
  if (op == "collective-permute") return CollectiveKind::SendRecv;
  throw InputError(fmt::format("{}, column 'opcode': unknown collective '{}'", where, op));
}

/// Bus bytes per rank in nccl-tests' convention (busbw = these / time).
double bus_bytes(const Row& r) {
  return collectives::bus_bytes(r.kind, static_cast<int>(r.groups.front().size()), r.bytes);
}

std::vector<std::vector<int>> contiguous_groups(int num_groups, int per_group) {
  std::vector<std::vector<int>> out(static_cast<std::size_t>(num_groups));
  for (int g = 0; g < num_groups; ++g) {
    for (int i = 0; i < per_group; ++i) out[static_cast<std::size_t>(g)].push_back(g * per_group + i);
  }
  return out;
}

/// Bytes per element of an nccl-tests `type` or an XLA `element_type`;
/// nullopt for a name neither uses.
std::optional<std::int64_t> element_bytes(std::string_view type) {
  static const std::map<std::string_view, std::int64_t> kSizes = {
      {"int8", 1},  {"uint8", 1},  {"int32", 4},    {"uint32", 4}, {"int64", 8}, {"uint64", 8}, {"half", 2},
      {"float", 4}, {"double", 8}, {"bfloat16", 2}, {"PRED", 1},   {"S8", 1},    {"U8", 1},     {"S16", 2},
      {"U16", 2},   {"S32", 4},    {"U32", 4},      {"S64", 8},    {"U64", 8},   {"F16", 2},    {"BF16", 2},
      {"F32", 4},   {"F64", 8},    {"F8E4M3FN", 1}, {"F8E5M2", 1}};
  const auto it = kSizes.find(type);
  if (it == kSizes.end()) return std::nullopt;
  return it->second;
}

/// A table's element count and type, where it has them, must give its
/// byte size (helper 143: a count or type disagreeing with the size, or an
/// unknown type, was read without a word).
/// `per_element`: the buffers `bytes` counts per element (a reduce-scatter's
/// bytes are its input, its elements the output: the group size).
void check_elements(const node_model::CsvTable& t, std::size_t row, std::size_t bytes_col, int count_col,
                    int type_col, std::int64_t per_element = 1) {
  if (type_col < 0) return;
  const std::string& type = t.rows[row][static_cast<std::size_t>(type_col)];
  const auto size = element_bytes(type);
  if (!size) {
    throw InputError(fmt::format("{}: {}, column '{}': unknown element type '{}'", t.path, t.row_name(row),
                                 t.header[static_cast<std::size_t>(type_col)], type));
  }
  if (count_col < 0) return;
  const std::int64_t count = t.positive_int(row, static_cast<std::size_t>(count_col));
  const std::int64_t bytes = t.positive_int(row, bytes_col);
  if (count * *size * per_element != bytes) {  // (positive_int's 9e15 x 8 x 8: no overflow)
    throw InputError(fmt::format(
        "{}: {}, columns '{}' and '{}': {} elements of {} ({} B each{}) are not {} bytes", t.path,
        t.row_name(row), t.header[static_cast<std::size_t>(count_col)], t.header[bytes_col], count, type,
        *size, per_element > 1 ? fmt::format(", x {} ranks", per_element) : "", bytes));
  }
}

void read_a100(const std::string& dir, std::vector<Row>& rows) {
  for (int n = 2; n <= 8; ++n) {
    const std::string path = (fs::path(dir) / fmt::format("AR_GPU{}_1M_1024M_LUT.csv", n)).string();
    const node_model::CsvTable t = node_model::read_csv(path);
    const std::size_t size_col = t.require_column("size(B)");
    const std::size_t time_col = t.require_first_column("time(ns)");  // the first: out-of-place
    // (a header alone left the group size out of the table: helper 143)
    if (t.rows.empty())
      throw InputError(fmt::format("{}: no measurements (a header line, then one per row)", path));
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      Row r;
      r.table = &kTables[0];
      r.file = path;
      r.line = t.lines[i];
      r.op = "all-reduce";
      r.series = fmt::format("1x{}", n);
      r.groups = contiguous_groups(1, n);
      r.bytes = Bytes(t.positive_int(i, size_col));
      check_elements(t, i, size_col, t.column("count"), t.column("type"));
      const double ns = t.number(i, time_col);
      if (!(ns > 0)) {
        throw InputError(fmt::format("{}: {}, column 'time(ns)': must be positive", path, t.row_name(i)));
      }
      r.measured = Time::from_seconds(ns * 1e-9);
      rows.push_back(std::move(r));
    }
  }
}

std::vector<std::vector<int>> parse_pairs(const std::string& text, const std::string& where) {
  std::vector<std::vector<int>> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ';');) {
    const auto arrow = item.find("->");
    try {
      if (arrow == std::string::npos) throw std::invalid_argument("no ->");
      std::size_t used = 0;
      const int a = std::stoi(item.substr(0, arrow), &used);
      const int b = std::stoi(item.substr(arrow + 2), &used);
      if (a < 0 || b < 0 || a > 7 || b > 7 || a == b) throw std::invalid_argument("range");
      out.push_back({a, b});
    } catch (const std::exception&) {
      throw InputError(fmt::format("{}, column 'pairs': '{}' is not SRC->DST with GPUs 0-7", where, item));
    }
  }
  if (out.empty()) throw InputError(fmt::format("{}, column 'pairs': empty", where));
  return out;
}

void read_h100(const std::string& path, std::vector<Row>& rows) {
  const node_model::CsvTable t = node_model::read_csv(path);
  const std::size_t op_col = t.require_column("opcode");
  const std::size_t bytes_col = t.require_column("bytes");
  const std::size_t groups_col = t.require_column("num_groups");
  const std::size_t devices_col = t.require_column("devices_per_group");
  const std::size_t pairs_col = t.require_column("pairs");
  const std::size_t latency_col = t.require_column("latency_us");
  const int arch_col = t.column("arch");
  if (t.rows.empty())
    throw InputError(fmt::format("{}: no measurements (a header line, then one per row)", path));
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    Row r;
    r.table = &kTables[1];
    r.file = path;
    r.line = t.lines[i];
    r.op = t.rows[i][op_col];
    const std::string where = fmt::format("{}: {}", path, t.row_name(i));
    r.kind = kind_of(r.op, where);
    if (r.kind == CollectiveKind::SendRecv) {
      // "NAME SRC->DST;SRC->DST;..."
      const std::string cell = t.rows[i][pairs_col];
      const auto space = cell.find(' ');
      if (space == std::string::npos || space == 0) {
        throw InputError(
            fmt::format("{}, column 'pairs': expected 'NAME SRC->DST;...', got '{}'", where, cell));
      }
      r.series = cell.substr(0, space);
      r.groups = parse_pairs(cell.substr(space + 1), where);
    } else {
      const auto g = t.positive_int(i, groups_col);
      const auto d = t.positive_int(i, devices_col);
      if (g * d > 8 || d < 2) {
        throw InputError(fmt::format(
            "{}, columns 'num_groups' x 'devices_per_group': {} x {} does not fit 8 GPUs", where, g, d));
      }
      r.groups = contiguous_groups(static_cast<int>(g), static_cast<int>(d));
      r.series = fmt::format("{}x{}", g, d);
    }
    r.bytes = Bytes(t.positive_int(i, bytes_col));
    check_elements(
        t, i, bytes_col, t.column("elements"), t.column("element_type"),
        r.kind == CollectiveKind::ReduceScatter ? static_cast<std::int64_t>(r.groups.front().size()) : 1);
    // Measured on an H100 (sm_90), as the GEMM table's reader requires.
    if (arch_col >= 0 && t.rows[i][static_cast<std::size_t>(arch_col)] != "sm_90") {
      throw InputError(
          fmt::format("{}, column 'arch': unknown arch '{}' (this reader knows sm_90, the H100 "
                      "the table was measured on)",
                      where, t.rows[i][static_cast<std::size_t>(arch_col)]));
    }
    const double us = t.number(i, latency_col);
    if (!(us > 0)) throw InputError(fmt::format("{}, column 'latency_us': must be positive", where));
    r.measured = Time::from_seconds(us * 1e-6);
    rows.push_back(std::move(r));
  }
}

/// The one-node scenario a table's rows run on: parsed like any scenario
/// file, so topology and options come from the same code.
Scenario node_scenario(const Table& t) {
  const std::string yaml = fmt::format(R"(name: validate-collectives-{0}
cluster:
  nodes: 1
  gpus_per_node: 8
  gpu: {1}
  nvlink_bandwidth: {2}
  nvlink_latency: {3}
  nic_bandwidth: 400Gbps
  nic_latency: 1us
  fabric:
    type: leaf-spine
    hosts_per_leaf: 8
    spines: 1
    spine_bandwidth: 400Gbps
    spine_latency: 1us
model:
  preset: gpt2-large
training:
  micro_batch: 1
  seq_len: 1024
  dtype: fp32
parallelism:
  dp: 8
)",
                                       t.name, t.gpu, t.nvlink, kNvlinkLatency);
  return parse_scenario(yaml, fmt::format("<validate collectives: {} node>", t.name));
}

/// One measured row as a task graph: every group runs its collective once,
/// all groups at the same time (as measured).
parallelism::TaskGraph row_graph(const Row& r) {
  return parallelism::concurrent_collectives(8, r.groups, r.kind, r.bytes);
}

struct Node {
  Scenario scenario;
  topology::Topology topo;
  Time path_latency;  ///< one transfer GPU -> NVSwitch -> GPU
};

/// Closed-form description of a row: its first group's transfer graph.
engine::CollectiveSample sample_of(const Row& r, const Node& node) {
  const auto& ranks = r.groups.front();
  const auto graph = collectives::expand(r.kind, ranks, r.bytes, node.scenario.collectives);
  engine::CollectiveSample s;
  s.group_size = static_cast<int>(ranks.size());
  s.steps = graph.depth();
  for (int rank : ranks) s.wire = std::max(s.wire, graph.bytes_sent_by(rank));
  s.link = node.scenario.cluster.nvlink_bandwidth;
  s.path_latency = node.path_latency;
  s.measured = r.measured;
  s.weight = r.weight;
  return s;
}

Time simulate(const Row& r, const Node& node, const engine::ExecutionOptions& options) {
  const auto graph = row_graph(r);
  engine::DiscreteEventLoop loop;
  engine::FlowNetwork net(node.topo, loop);
  return engine::execute(graph, loop, net, nullptr, options).makespan;
}

/// Fit weights: each table weighs 1 in a fit, each of its series equally, and
/// within a series each row the log-size interval it stands for (so the
/// A100 table's linear 1 MiB steps do not let its largest sizes dominate).
void set_weights(std::vector<Row>& rows) {
  std::map<std::pair<std::string, std::string>, std::vector<std::size_t>> series;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    series[{rows[i].table->name, rows[i].op + " " + rows[i].series}].push_back(i);
  }
  std::map<std::string, int> per_table;
  for (const auto& [key, idx] : series) {
    if (rows[idx.front()].kind != CollectiveKind::SendRecv) ++per_table[key.first];
  }
  for (auto& [key, idx] : series) {
    if (rows[idx.front()].kind == CollectiveKind::SendRecv) continue;  // never fitted: weight 0
    std::vector<Bytes> sizes;
    for (std::size_t i : idx) sizes.push_back(rows[i].bytes);
    const std::vector<double> w = engine::log_size_weights(sizes, Bytes(kFitMinBytes));
    for (std::size_t k = 0; k < idx.size(); ++k) rows[idx[k]].weight = w[k] / per_table[key.first];
  }
}

/// A row selector for --fit and the cross-validation: table, kind, group size.
struct Selector {
  std::string table;           ///< empty: any
  std::string op;              ///< empty: any (collective-permute is never fitted)
  int group = 0;               ///< 0: any
  bool exclude_group = false;  ///< group names the one left out
  [[nodiscard]] bool fits(const Row& r) const {
    if (r.kind == CollectiveKind::SendRecv || r.bytes.count() < kFitMinBytes) return false;
    if (!table.empty() && r.table->name != table) return false;
    if (!op.empty() && r.op != op) return false;
    const int n = static_cast<int>(r.groups.front().size());
    if (group != 0 && (exclude_group ? n == group : n != group)) return false;
    return true;
  }
  [[nodiscard]] std::string describe() const {
    std::string s = table.empty() ? "both tables" : table;
    if (!op.empty()) s += " " + op;
    if (group != 0) s += fmt::format(" {}n={}", exclude_group ? "except " : "", group);
    return s;
  }
};

/// "a100", "h100:all-reduce", "all" (= a100,h100), comma-separated.
std::vector<Selector> parse_fit_set(const std::string& text) {
  std::vector<Selector> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    Selector s;
    const auto colon = item.find(':');
    s.table = item.substr(0, colon);
    if (colon != std::string::npos) s.op = item.substr(colon + 1);
    if (s.table == "all") s.table.clear();
    if (!s.table.empty() && s.table != "a100" && s.table != "h100") {
      throw UsageError(fmt::format("--fit: unknown table '{}' (expected a100, h100 or all)", s.table));
    }
    if (!s.op.empty() && s.op != "all-reduce" && s.op != "all-gather" && s.op != "reduce-scatter" &&
        s.op != "all-to-all") {
      throw UsageError(
          fmt::format("--fit: unknown collective '{}' (expected all-reduce, all-gather, "
                      "reduce-scatter or all-to-all)",
                      s.op));
    }
    out.push_back(s);
  }
  if (out.empty()) throw UsageError("--fit: expected a100, h100, all or TABLE:KIND, comma-separated");
  return out;
}

std::vector<engine::CollectiveSample> samples(const std::vector<Row>& rows,
                                              const std::vector<Selector>& sel) {
  std::vector<engine::CollectiveSample> out;
  for (const Row& r : rows) {
    if (std::any_of(sel.begin(), sel.end(), [&](const Selector& s) { return s.fits(r); }))
      out.push_back(r.sample);
  }
  return out;
}

bool power_of_two_size(Bytes b) {
  const auto n = static_cast<std::uint64_t>(b.count());
  return (n & (n - 1)) == 0 || ((n + 1) & n) == 0;
}

std::string link_text(const engine::LinkCalibration& l) {
  return fmt::format(
      "efficiency(n) = {:.3f} - {:.3f}/n (n=2: {:.3f}, 4: {:.3f}, 8: {:.3f}), launch {:.2f} us, "
      "step {:.1f} us",
      l.peak_efficiency, l.group_penalty, l.efficiency(2), l.efficiency(4), l.efficiency(8),
      l.launch_latency.us(), l.step_latency.us());
}

double mape(const std::vector<const Row*>& rows) {
  if (rows.empty()) return 0.0;
  double e = 0.0;
  for (const Row* r : rows)
    e += std::abs(r->predicted.seconds() - r->measured.seconds()) / r->measured.seconds();
  return 100.0 * e / static_cast<double>(rows.size());
}

/// Cross-validation: fit on one set, MAPE on another (closed form, which
/// equals the simulation on these uncontended single-node rows).
void cross_validate(const std::vector<Row>& rows, std::ostream& out) {
  struct Fold {
    std::vector<Selector> fit;
    std::vector<Selector> test;
  };
  auto sel = [](std::string table, std::string op = "", int group = 0, bool exclude = false) {
    return Selector{std::move(table), std::move(op), group, exclude};
  };
  std::vector<Fold> folds = {
      {{sel("a100")}, {sel("h100", "all-reduce")}},
      {{sel("h100", "all-reduce")}, {sel("a100")}},
      {{sel("a100")}, {sel("h100")}},
      {{sel("h100")}, {sel("a100")}},
      {{sel("h100", "all-reduce")}, {sel("h100", "all-gather")}},
      {{sel("h100", "all-reduce")}, {sel("h100", "reduce-scatter")}},
      {{sel("h100", "all-reduce")}, {sel("h100", "all-to-all")}},
  };
  for (int n = 2; n <= 8; ++n) folds.push_back({{sel("a100", "", n, true)}, {sel("a100", "", n)}});
  for (int n : {2, 4, 8}) folds.push_back({{sel("h100", "", n, true)}, {sel("h100", "", n)}});
  for (int n : {2, 4, 8})
    folds.push_back({{sel("h100", "all-reduce", n, true)}, {sel("h100", "all-reduce", n)}});

  out << "\nCross-validation: fit the NVLink calibration on one set, MAPE of time on held-out rows (>= 1 "
         "MiB;\n"
         "closed form, equal to the simulation for one collective on an uncontended node). Forms: "
         "'n-penalty'\n"
         "fits efficiency(n) = peak - penalty/n (the shipped form), 'flat' a single efficiency.\n\n";
  out << fmt::format("{:<34} {:<34} {:>10} {:>10}\n", "fit on", "held out", "n-penalty", "flat");
  double sum_penalty = 0, sum_flat = 0;
  for (const Fold& f : folds) {
    const auto train = samples(rows, f.fit);
    const auto test = samples(rows, f.test);
    std::vector<engine::CollectiveSample> test_unweighted = test;
    for (auto& s : test_unweighted) s.weight = 1.0;
    const double with =
        100.0 * engine::weighted_mape(engine::fit_link_calibration(train, true), test_unweighted);
    const double flat =
        100.0 * engine::weighted_mape(engine::fit_link_calibration(train, false), test_unweighted);
    sum_penalty += with;
    sum_flat += flat;
    out << fmt::format("{:<34} {:<34} {:>9.1f}% {:>9.1f}%\n", f.fit.front().describe(),
                       f.test.front().describe(), with, flat);
  }
  out << fmt::format("cv mean over {} folds: n-penalty {:.1f}%, flat {:.1f}%\n", folds.size(),
                     sum_penalty / static_cast<double>(folds.size()),
                     sum_flat / static_cast<double>(folds.size()));
}

/// --fit in --nccl-tests mode: "nvlink", "network", "all", comma-separated.
std::pair<bool, bool> parse_nccl_fit(const std::string& text) {
  bool nvlink = false;
  bool network = false;
  for (const std::string& item : split(text, ',')) {
    if (item == "nvlink" || item == "all") nvlink = true;
    if (item == "network" || item == "all") network = true;
    if (item != "nvlink" && item != "network" && item != "all") {
      throw UsageError(fmt::format(
          "--fit: with --nccl-tests, expected nvlink (the runs on one host), network (the runs across "
          "hosts) or all, got '{}'",
          item));
    }
  }
  return {nvlink, network};
}

/// The fitted classes as a `calibration:` section to paste, with a note for
/// each launch that fitted at its floor and each efficiency at its ceiling.
std::string fitted_section(const study::NcclTestsFit& fit, const std::vector<std::string>& sets) {
  std::string out =
      "\nFitted (paste into the scenario's calibration: section, merged with any keys it has there):\n"
      "calibration:\n";
  const std::pair<const study::NcclTestsFitClass*, const char*> classes[] = {{&fit.nvlink, "nvlink"},
                                                                             {&fit.network, "network"}};
  for (const auto& [cls, prefix] : classes) {
    if (!cls->fitted) continue;
    // The efficiencies are fit on a grid of 0.0002 and 0.0005 (4 decimals
    // hold them); the latencies as exact times, so that the section pasted
    // back gives the fit's errors row for row (helper 137: at 10 ns some
    // rows moved by 0.1 point).
    out += fmt::format("  {0}_efficiency: {1:.4f}\n  {0}_group_penalty: {2:.4f}\n  {0}_launch: {3}\n", prefix,
                       cls->calibration.peak_efficiency, cls->calibration.group_penalty,
                       to_string(cls->calibration.launch_latency));
    // The step always: where it was not fitted, the one the fit ran with
    // (the scenario's, or this command's --set), so the section reproduces
    // the fit's error (helper 110: a --set step was left out).
    out += fmt::format("  {}_step: {}\n", prefix, to_string(cls->calibration.step_latency));
    out += fmt::format(
        "  # {} from {} file{}, {} rows{}{}\n", prefix, cls->files, cls->files == 1 ? "" : "s", cls->rows,
        cls->penalty_fitted ? "" : "; the group penalty is the scenario's (one group size)",
        cls->step_fitted ? "" : "; the step latency is the one the fit ran with (one step count)");
  }
  if (!sets.empty()) {
    out +=
        fmt::format("  # fitted with --set {}: keep those in the scenario too\n", fmt::join(sets, " --set "));
  }
  // The notes after a blank line: the section is pasted up to it (helper
  // 137: a note right under it was pasted as a key).
  const std::size_t section_end = out.size();
  for (const auto& [cls, prefix] : classes) {
    if (!cls->fitted) continue;
    const bool nvlink = std::string_view(prefix) == "nvlink";
    // At the efficiency's ceiling the link rate is suspect first: the
    // launch's note would point at latencies (helper 79).
    const bool ceiling = cls->calibration.peak_efficiency >= 0.9999;
    if (!ceiling && !cls->step_fitted && cls->calibration.launch_latency <= Time::zero()) {
      // With the step already 0 only the topology's per-hop latency is left
      // to lower (helper 78: the note advised a lower step at 0).
      const std::string lower =
          cls->calibration.step_latency > Time::zero()
              ? fmt::format("with a lower calibration.{}_step the launch can take it", prefix)
              : fmt::format("the step is 0 already: with a lower cluster.{} the launch can take it",
                            nvlink ? "nvlink_latency" : "nic_latency");
      out += fmt::format(
          "note: {0}_launch fitted at its floor, 0: the runs' fixed cost is below what the model charges "
          "before any launch ({0}_step {1:.1f} us per transfer, and the topology's latency per hop); {2}\n",
          prefix, cls->calibration.step_latency.us(), lower);
    } else if (!ceiling && cls->step_fitted && cls->calibration.launch_latency <= Time::zero() &&
               cls->calibration.step_latency <= Time::zero()) {
      // Both fixed costs at their floor (helper 110: no note, +34% left at
      // 1 MiB): only the topology's per-hop latency is left to lower.
      out += fmt::format(
          "note: {0}_launch and {0}_step both fitted at their floor, 0: the runs' fixed cost is below the "
          "topology's latency per hop alone; with a lower cluster.{1} the fit can follow the small rows\n",
          prefix, nvlink ? "nvlink_latency" : "nic_latency");
    }
    if (!nvlink && cls->penalty_fitted && cls->calibration.group_penalty > 0 && !ceiling) {
      // efficiency(n) = peak - penalty / n rises with the group and goes on
      // rising past the runs' largest group: unmeasured there (helper 78: a
      // fit on 2-4 nodes forecast 64 nodes at the efficiency's limit). An
      // NVLink group ends at the node, which the runs have usually spanned.
      const auto& c = cls->calibration;
      out += fmt::format(
          "note: {0}_group_penalty > 0: the efficiency rises with the group, {1:.3f} at {2} ranks to {3:.3f} "
          "at "
          "{4}, and goes on to {5:.4f} for groups larger than the runs', where nothing was measured; to hold "
          "it at the largest group measured, set {0}_efficiency: {3:.4f} and {0}_group_penalty: 0\n",
          prefix, c.efficiency(cls->smallest_group), cls->smallest_group, c.efficiency(cls->largest_group),
          cls->largest_group, std::min(1.0, c.peak_efficiency));
    }
    if (ceiling) {
      // The runs move data as fast as the scenario's links, or faster: its
      // link rates are likely wrong (helper 78: 200GB/s for 200 Gb/s HDR).
      out += fmt::format(
          "note: {0}_efficiency fitted at its ceiling, 1: the runs' bus bandwidth reaches the scenario's "
          "link rate or passes it; check {1} (a rate in bytes where bits were meant, or too few links?)\n",
          prefix, nvlink ? "cluster.nvlink_bandwidth" : "cluster.nic_bandwidth and cluster.hcas_per_node");
    }
  }
  if (out.size() > section_end) out.insert(section_end, "\n");
  return out;
}

/// Mean of absolute relative errors, in percent (0 for none).
double mean_percent(const std::vector<double>& errors) {
  double total = 0.0;
  for (double e : errors) total += e;
  return errors.empty() ? 0.0 : 100.0 * total / static_cast<double>(errors.size());
}

/// "12.3% over 5 rows >= 1 MiB", or "n/a (no rows >= 1 MiB)" for none (a
/// 0.0% over no rows read as a perfect fit).
std::string mape_over(const std::vector<double>& errors, std::string_view which) {
  if (errors.empty()) return fmt::format("n/a (no rows{})", which);
  return fmt::format("{:.1f}% over {} rows{}", mean_percent(errors), errors.size(), which);
}

/// `validate collectives --nccl-tests FILE,... --scenario CLUSTER.yaml`: the
/// user's own nccl-tests runs, each row timed on the scenario's cluster,
/// and with --fit the NVLink and network constants fit to them.
int validate_nccl_tests(const ArgParser& p, const std::vector<std::string>& sets, std::ostream& final_out) {
  // The report is written whole at the end: an error on a later row leaves
  // no partial report on stdout (helper 116).
  std::ostringstream out;
  if (p.has("data")) throw UsageError("--nccl-tests and --data exclude each other");
  if (p.has("cv"))
    throw UsageError("--cv is for --data's tables; with --nccl-tests, --fit prints the fitted error");
  const auto scenario_path = p.get("scenario");
  if (!scenario_path) {
    throw UsageError(
        "--nccl-tests needs --scenario CLUSTER.yaml: the cluster the runs were measured on "
        "(GPU, GPUs per node, NVLink, HCAs, fabric)");
  }
  std::vector<std::string> paths = split(*p.get("nccl-tests"), ',');
  if (paths.empty() ||
      std::any_of(paths.begin(), paths.end(), [](const std::string& x) { return x.empty(); })) {
    throw UsageError("--nccl-tests: expected FILE[,FILE...] (an empty name in the list)");
  }
  // A file named twice would weigh twice in --fit, where each file weighs
  // the same (helper 120: counted twice, silently). Compared as named and
  // as resolved (./FILE); a name that does not resolve as itself.
  std::map<std::filesystem::path, std::string> named;
  for (const std::string& path : paths) {
    std::error_code ec;
    std::filesystem::path key = std::filesystem::weakly_canonical(path, ec);
    if (ec || key.empty()) key = path;
    if (const auto [it, fresh] = named.emplace(key, path); !fresh) {
      throw UsageError(fmt::format("--nccl-tests: {} is named twice (as {}): each file weighs the same once",
                                   path, it->second));
    }
  }
  std::optional<std::pair<bool, bool>> fit;
  bool fit_all = false;  // --fit all: whichever class the runs have
  if (auto f = p.get("fit")) {
    fit = parse_nccl_fit(*f);
    const auto items = split(*f, ',');
    fit_all = std::find(items.begin(), items.end(), "all") != items.end();
  }
  if (fit && p.has("line-rate")) throw UsageError("--line-rate and --fit exclude each other");
  Scenario s = load_cluster_scenario(*scenario_path, scenario_overrides(sets, p));
  std::vector<study::NcclTestsLog> logs;
  logs.reserve(paths.size());
  for (const std::string& path : paths) {
    logs.push_back(
        study::parse_nccl_tests(read_input_file(path, "--nccl-tests file", std::int64_t{16} << 20), path));
  }
  std::vector<std::vector<int>> gpus;
  gpus.reserve(logs.size());
  for (const auto& log : logs) gpus.push_back(study::nccl_tests_gpus(log, s));
  // Runs of another GPU than the scenario's (their rank lines name it, as
  // nvidia-smi does: the names node_model::find_gpu_preset knows, which
  // validate kernels --device checks its Device column with): a fit would
  // calibrate this cluster with that GPU's NCCL (helper 120: H100 runs
  // fitted an A100 scenario without a word). Said, not refused: a name no
  // preset has says nothing.
  for (const auto& log : logs) {
    const std::string ran = log.ranks.empty() ? std::string() : log.ranks.front().gpu;
    const node_model::GpuSpec* part = ran.empty() ? nullptr : node_model::find_gpu_preset(ran);
    if (part != nullptr && part->name != s.gpu.name) {
      std::cerr << fmt::format(
          "tessera: warning: {}: its ranks ran on {}, the scenario's GPU is {}: these runs time another "
          "GPU's "
          "NCCL than the cluster's\n",
          log.file, ran, s.gpu.name);
    }
  }
  const topology::Topology topo = build_topology(s);
  const std::string fit_min = size_text(Bytes(kFitMinBytes));  // as the messages and the report write it

  std::string source = "the scenario's (its calibration: section and the shipped defaults)";
  std::optional<study::NcclTestsFit> fitted;
  if (fit) {
    fitted = study::fit_nccl_tests(s, topo, logs, fit->first, fit->second);
    if (fit_all && !fitted->nvlink.fitted && !fitted->network.fitted) {
      throw InputError(
          fmt::format("--fit all: no run on one host or across hosts with rows of {} and more", fit_min));
    }
    std::string kept;  // under --fit all, the class the runs do not cover
    for (const auto& [asked, cls, what] :
         {std::tuple{fit->first, &fitted->nvlink, "nvlink: no run on one host"},
          std::tuple{fit->second, &fitted->network, "network: no run across hosts"}}) {
      if (asked && !cls->fitted) {
        if (fit_all) {
          kept = what;
          continue;
        }
        throw InputError(fmt::format("--fit {}, with rows of {} and more", what, fit_min));
      }
    }
    if (!kept.empty()) {
      const std::string cls = kept.substr(0, kept.find(':'));
      out << fmt::format(
          "note: --fit all fits {} only ({}, with rows of {} and more): the {} constants are the "
          "scenario's\n",
          cls == "nvlink" ? "network" : "nvlink", kept, fit_min, cls);
    }
    if (fitted->nvlink.fitted) s.calibration.comm.nvlink = fitted->nvlink.calibration;
    if (fitted->network.fitted) s.calibration.comm.network = fitted->network.calibration;
    source = fmt::format("fitted on these runs (rows of {} and up; each file weighs the same)", fit_min);
  } else if (p.has("line-rate")) {
    s.calibration.comm = engine::CommCalibration::line_rate();
    source = "uncalibrated (line rate, serial reductions)";
  }

  out << fmt::format(
      "nccl-tests runs against the communication model on {}'s cluster ({} node{} x {} {}, {} backend)\n",
      *scenario_path, s.cluster.nodes, s.cluster.nodes == 1 ? "" : "s", s.cluster.gpus_per_node, s.gpu.name,
      to_string(s.backend));
  // (Not "calibration:": a line a user might take for the section to paste.)
  out << fmt::format("Communication model, {}:\n  NVLink: {}\n  network: {}\n", source,
                     link_text(s.calibration.comm.nvlink), link_text(s.calibration.comm.network));
  if (fitted) out << fitted_section(*fitted, sets);
  out << '\n';
  out << fmt::format("{:<28} {:<15} {:>5} {:>5} {:>10} {:>12} {:>12} {:>8} {:>11} {:>11}\n", "file",
                     "collective", "ranks", "nodes", "size", "measured", "predicted", "error", "busbw meas",
                     "busbw pred");
  std::vector<double> all_big, all_rows;
  std::vector<std::string> summaries;
  for (std::size_t f = 0; f < logs.size(); ++f) {
    const auto& log = logs[f];
    const std::string name = fs::path(log.file).filename().string();
    const int n = static_cast<int>(log.ranks.size());
    std::vector<double> big, every;
    for (const auto& row : log.rows) {
      Time predicted;
      try {
        predicted = study::time_nccl_tests_row(s, topo, log, gpus[f], row.size);
      } catch (const OverflowError& e) {
        throw InputError(fmt::format("{}:{}: column 'size': {} cannot be simulated on {}'s cluster: {}",
                                     log.file, row.line, size_text(row.size), *scenario_path, e.what()));
      }
      const double err = predicted.seconds() / row.measured.seconds() - 1.0;
      const double bus = collectives::bus_bytes(log.kind, n, row.size) * 1e-9;
      out << fmt::format(
          "{:<28} {:<15} {:>5} {:>5} {:>10} {:>9.1f} us {:>9.1f} us {:>+7.1f}% {:>6.1f} GB/s {:>6.1f} GB/s\n",
          name, to_string(log.kind), n, study::nccl_tests_nodes(log), size_text(row.size), row.measured.us(),
          predicted.us(), 100.0 * err, bus / row.measured.seconds(), bus / predicted.seconds());
      every.push_back(std::abs(err));
      if (row.size.count() >= kFitMinBytes) big.push_back(std::abs(err));
    }
    summaries.push_back(fmt::format(
        "summary {}: {} of {} ranks on {} host{}: {}; all sizes {}{}\n", name, to_string(log.kind), n,
        study::nccl_tests_nodes(log), study::nccl_tests_nodes(log) == 1 ? "" : "s",
        mape_over(big, " >= " + fit_min), mape_over(every, ""),
        log.empty_rows > 0
            ? fmt::format(" ({} row{} of 0 bytes skipped)", log.empty_rows, log.empty_rows == 1 ? "" : "s")
            : ""));
    all_big.insert(all_big.end(), big.begin(), big.end());
    all_rows.insert(all_rows.end(), every.begin(), every.end());
  }
  out << fmt::format("\nMAPE of time (rows below {}: NCCL's small-message protocols, not fitted):\n",
                     fit_min);
  for (const auto& line : summaries) out << line;
  out << fmt::format("summary overall: {}; all sizes {}\n", mape_over(all_big, " >= " + fit_min),
                     mape_over(all_rows, ""));
  final_out << out.str();
  return 0;
}

}  // namespace

int cmd_validate_collectives(const Args& args, std::ostream& out) {
  ArgParser p("tessera validate collectives");
  p.option("data")
      .option("fit")
      .option("nccl-tests")
      .option("scenario")
      .flag("cv")
      .flag("rows")
      .flag("line-rate");
  declare_scenario_options(p);
  std::vector<std::string> sets;
  p.parse(take_set_options(args, sets));
  p.expect_positional(0, "arguments");
  if (p.has("nccl-tests")) return validate_nccl_tests(p, sets, out);
  if (p.has("scenario") || !sets.empty() || p.has("backend") || p.has("predictor")) {
    throw UsageError("--scenario, --set, --backend and --predictor go with --nccl-tests (your own runs)");
  }
  const std::string data = p.require("data");
  std::optional<std::vector<Selector>> fit_set;
  if (auto fit = p.get("fit")) fit_set = parse_fit_set(*fit);
  const fs::path a100_dir = fs::path(data) / "vtrain" / "allreduce_a100";
  const fs::path h100_csv = fs::path(data) / "xla" / "collectives_h100.csv";
  if (!fs::is_directory(a100_dir) || !fs::is_regular_file(h100_csv)) {
    throw InputError(
        fmt::format("--data {}: expected vtrain/allreduce_a100/ and xla/collectives_h100.csv under it "
                    "(e.g. --data ../shared/data)",
                    data));
  }
  std::vector<Row> rows;
  read_a100(a100_dir.string(), rows);
  read_h100(h100_csv.string(), rows);
  set_weights(rows);

  std::map<std::string, Node> nodes;
  for (const Table& t : kTables) {
    Node n{node_scenario(t), {}, {}};
    n.topo = build_topology(n.scenario);
    n.path_latency = n.topo.latency(n.topo.route(0, 1));
    nodes.emplace(t.name, std::move(n));
  }
  for (Row& r : rows) r.sample = sample_of(r, nodes.at(r.table->name));

  engine::CommCalibration calibration = execution_options(nodes.at("h100").scenario).calibration;
  std::string source = "shipped defaults (engine::CommCalibration::nccl)";
  if (p.has("line-rate")) {
    if (fit_set) throw UsageError("--line-rate and --fit exclude each other");
    calibration = engine::CommCalibration::line_rate();
    source = "none: line rate, serial reductions (the uncalibrated model)";
  }
  if (fit_set) {
    const std::string fit = *p.get("fit");
    const auto train = samples(rows, *fit_set);
    if (train.empty()) throw UsageError(fmt::format("--fit {}: no rows to fit", fit));
    calibration.nvlink = engine::fit_link_calibration(train, true);
    source = fmt::format("NVLink fitted on {} ({} rows)", fit, train.size());
  }

  out << "Collectives on one 8-GPU NVSwitch node: predicted (flow network) vs measured\n";
  for (const Table& t : kTables) out << fmt::format("  {}: {}\n", t.name, t.what);
  out << fmt::format("calibration: {}\n  NVLink: {}\n  network (assumed, unused here): {}\n", source,
                     link_text(calibration.nvlink), link_text(calibration.network));
  out << fmt::format("  topology: {} per NVLink link, {:.1f} us per transfer (GPU -> NVSwitch -> GPU)\n\n",
                     kNvlinkLatency, nodes.at("a100").path_latency.us());

  for (const Table& t : kTables) {
    engine::ExecutionOptions options = execution_options(nodes.at(t.name).scenario);
    options.calibration = calibration;
    for (Row& r : rows) {
      if (r.table == &t) r.predicted = simulate(r, nodes.at(t.name), options);
    }
  }

  // Per series: the bus-bandwidth curve at power-of-two sizes (every row
  // with --rows), then the summary.
  std::vector<std::pair<std::string, std::vector<const Row*>>> series;  // in file order
  for (const Row& r : rows) {
    const std::string key = fmt::format("{} {} {}", r.table->name, r.op, r.series);
    if (series.empty() || series.back().first != key) series.emplace_back(key, std::vector<const Row*>{});
    series.back().second.push_back(&r);
  }
  out << fmt::format("{:<5} {:<19} {:<13} {:>10} {:>12} {:>12} {:>8} {:>11} {:>11}\n", "table", "collective",
                     "group", "size", "measured", "predicted", "error", "busbw meas", "busbw pred");
  for (const auto& [key, list] : series) {
    for (const Row* r : list) {
      if (!p.has("rows") && !power_of_two_size(r->bytes)) continue;
      const double bus = bus_bytes(*r) * 1e-9;
      out << fmt::format(
          "{:<5} {:<19} {:<13} {:>10} {:>9.1f} us {:>9.1f} us {:>+7.1f}% {:>6.1f} GB/s {:>6.1f} GB/s\n",
          r->table->name, r->op, r->series, size_text(r->bytes), r->measured.us(), r->predicted.us(),
          100.0 * (r->predicted.seconds() / r->measured.seconds() - 1.0), bus / r->measured.seconds(),
          bus / r->predicted.seconds());
    }
  }

  // The size below which rows are left out of the fit and its summaries, as the report writes it.
  const std::string fit_min = size_text(Bytes(kFitMinBytes));
  out << fmt::format(
      "\nMAPE of time across sizes (the H100 table's rows below {} time mostly the host's launch and "
      "sync):\n",
      fit_min);
  out << fmt::format("{:<5} {:<19} {:<13} {:>6} {:>10} {:>8} {:>10}\n", "table", "collective", "group",
                     "rows", "MAPE", fmt::format(">={}", fit_min), "MAPE");
  std::map<std::string, std::vector<const Row*>> by_table_kind, by_table_kind_all;
  for (const auto& [key, list] : series) {
    std::vector<const Row*> big;
    for (const Row* r : list) {
      if (r->bytes.count() >= kFitMinBytes) big.push_back(r);
    }
    const Row& first = *list.front();
    out << fmt::format("{:<5} {:<19} {:<13} {:>6} {:>9.1f}% {:>8} {:>9.1f}%\n", first.table->name, first.op,
                       first.series, list.size(), mape(list), big.size(), mape(big));
    out << fmt::format("summary {} {} {}: {:.1f}%\n", first.table->name, first.op, first.series, mape(big));
    auto& tk = by_table_kind[first.table->name + " " + first.op];
    tk.insert(tk.end(), big.begin(), big.end());
    auto& tka = by_table_kind_all[first.table->name + " " + first.op];
    tka.insert(tka.end(), list.begin(), list.end());
  }
  out << '\n';
  std::vector<const Row*> all_big, all_rows;
  for (const auto& [key, list] : by_table_kind) {
    out << fmt::format("summary {} (>= {}): {:.1f}% over {} rows; all sizes {:.1f}% over {} rows\n", key,
                       fit_min, mape(list), list.size(), mape(by_table_kind_all[key]),
                       by_table_kind_all[key].size());
    all_big.insert(all_big.end(), list.begin(), list.end());
    all_rows.insert(all_rows.end(), by_table_kind_all[key].begin(), by_table_kind_all[key].end());
  }
  for (const Table& t : kTables) {
    std::vector<const Row*> big;
    for (const Row* r : all_big) {
      if (r->table == &t) big.push_back(r);
    }
    out << fmt::format("summary table {} (>= {}): {:.1f}% over {} rows\n", t.name, fit_min, mape(big),
                       big.size());
  }
  out << fmt::format("summary overall (>= {}): {:.1f}% over {} rows; all sizes {:.1f}% over {} rows\n",
                     fit_min, mape(all_big), all_big.size(), mape(all_rows), all_rows.size());

  if (p.has("cv")) cross_validate(rows, out);
  return 0;
}

}  // namespace tessera::cli
