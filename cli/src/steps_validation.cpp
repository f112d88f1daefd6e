// `tessera validate steps`: whole single-GPU training steps measured on a GPU
// (tests/data/h200/steps.csv), each run as a one-GPU scenario and predicted
// against measured (docs/node_model.md, "Training steps on an H200").
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <ostream>
#include <tuple>
#include <utility>
#include <vector>

#include "tessera/cli/args.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/engine/executor.hpp"
#include "tessera/error.hpp"
#include "tessera/files.hpp"
#include "tessera/node_model/csv.hpp"
#include "tessera/node_model/gpu_spec.hpp"
#include "tessera/node_model/validation.hpp"
#include "tessera/node_model/workload.hpp"
#include "tessera/study/pipeline.hpp"

namespace tessera::cli {
namespace {

struct MeasuredStep {
  std::int64_t layers = 0, hidden = 0, heads = 0, seq = 0, micro_batch = 0, vocab = 0;
  /// Tensor parallelism: the step of one rank of `tp` (its share of the
  /// heads, MLP columns and vocabulary), without the collectives.
  std::int64_t tp = 1;
  std::string dtype;
  bool flash = false;
  /// Columns named by a scenario key path (e.g. `training.optimizer`) and
  /// this row's values: how the step ran where the columns above do not say.
  std::vector<std::pair<std::string, std::string>> keys;
  double measured_ms = 0;             ///< mean over the rows of this configuration
  double measured_optimizer_ms = -1;  ///< mean of the optimizer_ms column (-1: none)
  double measured_fwd_ms = -1;        ///< mean of the fwd_ms column (-1: none)
  double measured_fwd_bwd_ms = -1;    ///< mean of the fwd_bwd_ms column (-1: none)
  /// The measured forward + backward: its own column where the file has
  /// one (helper 112: iteration minus optimizer was used even then, wrong
  /// for an iteration_ms holding data loading), else iteration_ms minus
  /// optimizer_ms; -1 for neither.
  [[nodiscard]] double fwd_bwd_ms() const {
    if (measured_fwd_bwd_ms > 0) return measured_fwd_bwd_ms;
    return measured_optimizer_ms >= 0 ? measured_ms - measured_optimizer_ms : -1;
  }
  int rows = 0;
  int first_row = 0;  ///< 1-based data row of its first measurement
  [[nodiscard]] auto key() const {
    return std::tie(layers, hidden, heads, seq, micro_batch, vocab, dtype, flash, tp, keys);
  }
};

/// The keys the step's columns set (step_scenario_yaml), with the column.
constexpr std::pair<std::string_view, std::string_view> kSetBy[] = {
    {"model.layers", "layers"},
    {"model.hidden", "hidden"},
    {"model.heads", "heads"},
    {"model.vocab", "vocab"},
    {"training.micro_batch", "micro_batch"},
    {"training.global_batch", "micro_batch"},
    {"training.micro_batches", "micro_batch"},
    {"training.seq_len", "seq"},
    {"training.dtype", "dtype"},
    {"training.flash_attention", "flash_attention"},
    {"parallelism.tp", "tp"}};

std::string step_scenario_yaml(const MeasuredStep& m, const std::string& gpu, const std::string& framework);
void refuse_section_less_keys(const node_model::CsvTable& t, const MeasuredStep& first);

std::vector<MeasuredStep> read_steps(const std::string& path) {
  const node_model::CsvTable t = node_model::read_csv(path);
  auto col = [&](const char* name) { return t.require_column(name); };
  const std::size_t layers = col("layers"), hidden = col("hidden"), heads = col("heads"), seq = col("seq"),
                    mb = col("micro_batch"), vocab = col("vocab"), dtype = col("dtype"),
                    flash = col("flash_attention"), it = col("iteration_ms");
  const int opt_col = t.column("optimizer_ms");
  const int fwd_col = t.column("fwd_ms");
  const int fb_col = t.column("fwd_bwd_ms");
  const int tp_col = t.column("tp");
  const std::vector<std::size_t> key_columns = key_path_columns(t, kSetBy);
  for (const std::string& h : t.header) {
    // A GPU column would be a note nobody reads: the steps run on --gpu
    // (helper 112: a file of H100 rows ran on the H200, no word).
    if (loose_column_name(h) == "gpu" || loose_column_name(h) == "device") {
      throw InputError(
          fmt::format("{}: column '{}' is not read: every step runs on --gpu; give each GPU's "
                      "steps a file of their own",
                      path, h));
    }
  }
  std::vector<MeasuredStep> out;
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    MeasuredStep s;
    s.layers = t.positive_int(r, layers);
    s.hidden = t.positive_int(r, hidden);
    s.heads = t.positive_int(r, heads);
    s.seq = t.positive_int(r, seq);
    s.micro_batch = t.positive_int(r, mb);
    s.vocab = t.positive_int(r, vocab);
    s.dtype = t.rows[r][dtype];
    if (tp_col >= 0) s.tp = t.positive_int(r, static_cast<std::size_t>(tp_col));
    // The vocabulary need not divide: each framework pads it as it does
    // (Megatron to a multiple of 128 x tp), and the measured rank ran the same.
    if (s.heads % s.tp != 0 || s.hidden % s.tp != 0) {
      throw InputError(fmt::format("{}: {}, column 'tp': {} does not divide the heads ({}) and hidden ({})",
                                   path, t.row_name(r), s.tp, s.heads, s.hidden));
    }
    try {
      (void)node_model::parse_dtype(s.dtype);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}, column 'dtype': {}", path, t.row_name(r), e.what()));
    }
    const std::string& f = t.rows[r][flash];
    if (f != "true" && f != "false") {
      throw InputError(fmt::format("{}: {}, column 'flash_attention': expected true or false, got '{}'", path,
                                   t.row_name(r), f));
    }
    s.flash = f == "true";
    s.keys = key_path_cells(t, r, key_columns);
    const double ms = t.number(r, it);
    // Above a day is no step's time but a unit slip or a damaged cell (1e308
    // printed a 300-digit measurement and an error of -100%).
    if (!(ms > 0) || ms > kMaxMeasuredMs) {
      throw InputError(
          fmt::format("{}: {}, column 'iteration_ms': must be positive and at most a day, "
                      "86400000 ms (got '{}')",
                      path, t.row_name(r), t.rows[r][it]));
    }
    double opt = -1;
    if (opt_col >= 0) {
      opt = t.number(r, static_cast<std::size_t>(opt_col));
      if (!(opt >= 0) || opt >= ms) {
        throw InputError(
            fmt::format("{}: {}, column 'optimizer_ms': must be at least 0 and below "
                        "iteration_ms (got '{}', iteration_ms '{}')",
                        path, t.row_name(r), t.rows[r][static_cast<std::size_t>(opt_col)], t.rows[r][it]));
      }
    }
    double fwd = -1;
    if (fwd_col >= 0) {
      fwd = t.number(r, static_cast<std::size_t>(fwd_col));
      if (!(fwd > 0) || fwd >= ms) {
        throw InputError(
            fmt::format("{}: {}, column 'fwd_ms': must be positive and below iteration_ms (got '{}', "
                        "iteration_ms '{}')",
                        path, t.row_name(r), t.rows[r][static_cast<std::size_t>(fwd_col)], t.rows[r][it]));
      }
    }
    double fb = -1;
    if (fb_col >= 0) {
      fb = t.number(r, static_cast<std::size_t>(fb_col));
      if (!(fb > 0) || fb > ms) {
        throw InputError(
            fmt::format("{}: {}, column 'fwd_bwd_ms': must be positive and at most iteration_ms (got "
                        "'{}', iteration_ms '{}')",
                        path, t.row_name(r), t.rows[r][static_cast<std::size_t>(fb_col)], t.rows[r][it]));
      }
    }
    // The phases of one step must agree with each other (helper 120: a
    // forward longer than forward + backward, or phases summing to twice
    // the step, were read and gave errors of -63% and -87%). Phases timed
    // apart and averaged over repeats can sum a little past the step (our
    // H100 and H200 files: up to 4.3%); a fifth past it is not one step.
    if (fwd > 0 && fb > 0 && fwd >= fb) {
      throw InputError(
          fmt::format("{}: {}, column 'fwd_ms': the forward must be below fwd_bwd_ms, which "
                      "holds it (got '{}', fwd_bwd_ms '{}')",
                      path, t.row_name(r), t.rows[r][static_cast<std::size_t>(fwd_col)],
                      t.rows[r][static_cast<std::size_t>(fb_col)]));
    }
    if (fb > 0 && opt >= 0 && fb + opt > 1.2 * ms) {
      throw InputError(
          fmt::format("{}: {}, columns 'fwd_bwd_ms' and 'optimizer_ms': their sum ({} ms) is "
                      "more than a fifth past iteration_ms ('{}'): not the phases of one step",
                      path, t.row_name(r), fb + opt, t.rows[r][it]));
    }
    // Repeats of one configuration are averaged.
    bool merged = false;
    for (auto& o : out) {
      if (o.key() == s.key()) {
        o.measured_ms = (o.measured_ms * o.rows + ms) / (o.rows + 1);
        if (opt >= 0) o.measured_optimizer_ms = (o.measured_optimizer_ms * o.rows + opt) / (o.rows + 1);
        if (fwd > 0) o.measured_fwd_ms = (o.measured_fwd_ms * o.rows + fwd) / (o.rows + 1);
        if (fb > 0) o.measured_fwd_bwd_ms = (o.measured_fwd_bwd_ms * o.rows + fb) / (o.rows + 1);
        ++o.rows;
        merged = true;
        break;
      }
    }
    if (!merged) {
      s.measured_ms = ms;
      s.measured_optimizer_ms = opt;
      s.measured_fwd_ms = fwd;
      s.measured_fwd_bwd_ms = fb;
      s.rows = 1;
      s.first_row = static_cast<int>(r + 1);
      out.push_back(s);
    }
  }
  if (out.empty()) throw InputError(fmt::format("{}: no steps", path));
  refuse_section_less_keys(t, out.front());
  return out;
}

/// One GPU, no parallelism: the plain-PyTorch step the measurement ran
/// (eager kernels, no recomputation, one micro-batch). With tp > 1, one rank
/// of `tp` tensor-parallel ranks; the caller removes its collectives
/// (ParallelPlan::tp_collectives): the measurement ran one rank's share
/// alone, without its all-reduces.
std::string step_scenario_yaml(const MeasuredStep& m, const std::string& gpu, const std::string& framework) {
  return fmt::format(R"(name: step-l{layers}-h{hidden}
cluster:
  nodes: 1
  gpus_per_node: {tp}
  gpu: {gpu}
  nvlink_bandwidth: 450GB/s
  nvlink_latency: 1us
  nic_bandwidth: 400Gbps
  nic_latency: 1us
  fabric:
    type: leaf-spine
    hosts_per_leaf: {tp}
    spines: 1
    spine_bandwidth: 400Gbps
    spine_latency: 1us
model:
  layers: {layers}
  hidden: {hidden}
  heads: {heads}
  vocab: {vocab}
training:
  framework: {framework}
  micro_batch: {mb}
  global_batch: {mb}
  seq_len: {seq}
  dtype: {dtype}
  flash_attention: {flash}
parallelism:
  dp: 1
  tp: {tp}
  recompute: none
)",
                     fmt::arg("layers", m.layers), fmt::arg("hidden", m.hidden), fmt::arg("heads", m.heads),
                     fmt::arg("vocab", m.vocab), fmt::arg("gpu", gpu), fmt::arg("framework", framework),
                     fmt::arg("tp", m.tp), fmt::arg("mb", m.micro_batch), fmt::arg("seq", m.seq),
                     fmt::arg("dtype", m.dtype), fmt::arg("flash", m.flash ? "true" : "false"));
}

/// A plain column named as a scenario key without its section
/// (`recompute` for parallelism.recompute, `pp`, `virtual_stages`) would be
/// read by nobody, and every row would run at the default (helper 107: a
/// `recompute` column was ignored, the error 7.4% against 37.7%). Other
/// plain columns are the user's notes. Which names are keys the scenario
/// loader itself says: each such column is tried as a key of every section
/// on the first step's scenario, and any answer but "unknown key" (it ran,
/// or it refused the probe's value) makes it one. A file's own column
/// written otherwise (`TP`, `Fwd ms`) is named too: `TP` ran every row at
/// tp 1 under its label.
void refuse_section_less_keys(const node_model::CsvTable& t, const MeasuredStep& first) {
  static constexpr std::string_view kStepColumns[] = {"iteration_ms", "optimizer_ms", "fwd_ms", "fwd_bwd_ms"};
  static constexpr std::string_view kSections[] = {"parallelism", "training",    "model",
                                                   "cluster",     "calibration", "node_model"};
  const std::string yaml = step_scenario_yaml(first, "H200", "pytorch-eager");
  // A first step whose own scenario breaks would make every probe fail and
  // every note a "key": its row's error is the command's to name.
  try {
    (void)parse_scenario(yaml, "step", {});
  } catch (const ScenarioError&) {
    return;
  }
  auto own_column = [&](const std::string& h) -> std::optional<std::string_view> {
    const std::string loose = loose_column_name(h);
    for (const std::string_view c : kStepColumns) {
      if (loose == loose_column_name(c)) return c;
    }
    for (const auto& k : kSetBy) {
      if (loose == loose_column_name(k.second)) return k.second;
    }
    return std::nullopt;
  };
  for (const std::string& h : t.header) {
    if (const auto own = own_column(h)) {
      if (*own == h) continue;
      // "TP" for tp, "Fwd ms" for fwd_ms: an optional column would be a note, silently.
      throw InputError(fmt::format("{}: column '{}' is not read: name it '{}'", t.path, h, *own));
    }
    // As a key would be written: lower case, '_' for a space or '-'
    // ("Virtual stages", "virtual-stages"); a name with other punctuation is
    // a key path (section.key) or no key's name.
    std::string name;
    for (const char c : h) {
      if (c == ' ' || c == '-' || c == '_') {
        name += '_';
      } else if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
        name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      } else {
        name.clear();
        break;
      }
    }
    // `name` labels a row, as model.name labels a model: a note either way.
    if (name.empty() || name == "name") continue;
    for (const std::string_view section : kSections) {
      const std::string key = fmt::format("{}.{}", section, name);
      try {
        (void)parse_scenario(yaml, "step", {{key, "1", "probe"}});
      } catch (const ScenarioError& e) {
        if (e.detail().rfind(key + ": unknown key", 0) == 0) continue;
      }
      for (const auto& [set, column] : kSetBy) {
        if (set != key) continue;
        throw InputError(fmt::format("{}: column '{}' is not read: each step's '{}' column sets {}", t.path,
                                     h, column, key));
      }
      throw InputError(fmt::format(
          "{}: column '{}' is not read: a scenario key is named with its section, '{}'", t.path, h, key));
    }
  }
}

/// The phases of a simulated step on rank 0: the optimizer step (the
/// compute tasks named "optimizer", after the last micro-batch) and the
/// forward pass (the end of the last forward task, "....fwd": the GPU time
/// from the start of the step to the loss, as the harness's events time it;
/// a recomputed forward runs inside the backward's "recompute.fwd+bwd").
class StepPhases final : public engine::ExecutionObserver {
 public:
  void on_compute(int rank, const parallelism::Task& task, Time start, Time end) override {
    if (rank != 0) return;
    if (task.name == "optimizer") optimizer_ += end - start;
    if (task.name.ends_with(".fwd")) forward_end_ = std::max(forward_end_, end);
  }
  [[nodiscard]] Time optimizer() const { return optimizer_; }
  [[nodiscard]] Time forward() const { return forward_end_; }

 private:
  Time optimizer_;
  Time forward_end_;
};

/// The key-path columns whose values differ between the file's steps, by
/// the last part of their path ("recompute full"; a true flag by its name
/// alone, a false one left out): what tells rows apart where the label's
/// fixed fields do not.
std::string varying_keys(const std::vector<MeasuredStep>& steps, const MeasuredStep& m) {
  std::string out;
  for (const auto& kv_row : m.keys) {
    const std::string& key = kv_row.first;
    const std::string& value = kv_row.second;
    const bool varies = std::any_of(steps.begin(), steps.end(), [&](const MeasuredStep& o) {
      const auto it =
          std::find_if(o.keys.begin(), o.keys.end(), [&](const auto& kv) { return kv.first == key; });
      return it == o.keys.end() || it->second != value;
    });
    if (!varies || value == "false") continue;
    const std::string name = key.substr(key.rfind('.') + 1);
    out += value == "true" ? fmt::format(", {}", name) : fmt::format(", {} {}", name, value);
  }
  return out;
}

std::string signed_pct(double predicted, double measured) {
  return fmt::format("{:+.1f}%", 100.0 * (predicted / measured - 1.0));
}

/// predicted / measured - 1 as a JSON number, or null without a measurement.
std::string json_error(std::optional<double> predicted, double measured) {
  if (!predicted || measured <= 0) return "null";
  return fmt::format("{:.6f}", *predicted / measured - 1.0);
}

/// A step's row as a JSON object: its configuration (the row's key-path
/// columns as `keys`), measured and predicted times and the errors of the
/// text's columns (null where the data has no such time).
std::string step_json(const MeasuredStep& m, double predicted, double predicted_optimizer,
                      double predicted_fwd) {
  std::string keys;
  for (const auto& [k, v] : m.keys)
    keys += fmt::format("{}{}: {}", keys.empty() ? "" : ", ", json_string(k), json_string(v));
  const bool opt = m.measured_optimizer_ms >= 0;
  return fmt::format(
      "{{\"row\": {}, \"runs\": {}, \"layers\": {}, \"hidden\": {}, \"heads\": {}, \"seq\": {}, "
      "\"micro_batch\": {}, \"vocab\": {}, \"dtype\": {}, \"flash_attention\": {}, \"tp\": {}, "
      "\"keys\": {{{}}}, \"measured_ms\": {:.3f}, \"predicted_ms\": {:.3f}, \"error\": {:.6f}, "
      "\"fwd_bwd_error\": {}, \"optimizer_error\": {}, \"forward_error\": {}}}",
      m.first_row, m.rows, m.layers, m.hidden, m.heads, m.seq, m.micro_batch, m.vocab, json_string(m.dtype),
      m.flash ? "true" : "false", m.tp, keys, m.measured_ms, predicted, predicted / m.measured_ms - 1.0,
      m.fwd_bwd_ms() > 0 ? json_error(predicted - predicted_optimizer, m.fwd_bwd_ms()) : "null",
      opt ? json_error(predicted_optimizer, m.measured_optimizer_ms) : "null",
      json_error(predicted_fwd, m.measured_fwd_ms));
}

}  // namespace

int cmd_validate_steps(const Args& args, std::ostream& out) {
  ArgParser p("tessera validate steps");
  p.option("data").option("gpu").option("framework").flag("json");
  declare_scenario_options(p);
  std::vector<std::string> sets;
  p.parse(take_set_options(args, sets));
  p.expect_positional(0, "arguments");
  const std::vector<Override> overrides = scenario_overrides(sets, p);
  // A --set of a key the steps' own columns set would time steps that
  // were not measured (--set model.hidden=1024 ran every step at it).
  for (const Override& o : overrides) {
    // The report names --gpu's GPU (helper 113: --set cluster.gpu ran the
    // steps on an A100 under the H200's name).
    if (o.path == "cluster.gpu" || o.path.rfind("cluster.gpu.", 0) == 0) {
      throw UsageError(fmt::format("--set {}: the steps run on --gpu (give --gpu NAME)", o.path));
    }
  }
  refuse_set_of_row_keys(overrides, kSetBy, "step", [](std::string_view column) {
    return column == "tp" ? std::string_view(", 1 without it") : std::string_view();
  });
  const std::string data = p.require("data");
  const std::string gpu = p.get("gpu").value_or("H200");
  try {
    (void)node_model::gpu_preset(gpu);
  } catch (const InputError& e) {
    throw UsageError(fmt::format("--gpu: {}", e.what()));
  }
  const std::string framework = p.get("framework").value_or("pytorch-eager");
  try {
    (void)node_model::parse_framework(framework);
  } catch (const InputError& e) {
    throw UsageError(fmt::format("--framework: {}", e.what()));
  }
  FileSet files;
  files.input(data, "--data");
  const auto steps = read_steps(data);
  // The report is printed whole once every step has run: bad input (a --set
  // a scenario rejects) leaves no partial table.
  // The forward's error where the data times it (fwd_ms).
  const bool forward =
      std::any_of(steps.begin(), steps.end(), [](const auto& m) { return m.measured_fwd_ms > 0; });
  // The dtype and vocabulary where the steps differ in them (helper 112: two
  // configurations apart only in those printed the same label).
  const bool dtypes_differ = std::any_of(
      steps.begin(), steps.end(), [&](const MeasuredStep& m) { return m.dtype != steps.front().dtype; });
  const bool vocabs_differ = std::any_of(
      steps.begin(), steps.end(), [&](const MeasuredStep& m) { return m.vocab != steps.front().vocab; });
  auto label = [&](const MeasuredStep& m) {
    return fmt::format("{} x {}, {}, {}{}{}{}{}{}", m.layers, m.hidden, m.seq, m.micro_batch,
                       m.flash ? ", flash" : "", m.tp > 1 ? fmt::format(", tp {}", m.tp) : std::string(),
                       dtypes_differ ? ", " + m.dtype : std::string(),
                       vocabs_differ ? fmt::format(", vocab {}", m.vocab) : std::string(),
                       varying_keys(steps, m));
  };
  std::size_t width = 45;
  for (const auto& m : steps) width = std::max(width, label(m).size());
  std::string report = fmt::format("{:<{}} {:>5} {:>12} {:>12} {:>8} {:>16} {:>16}{}\n",
                                   "step (layers x hidden, seq, micro-batch)", width, "runs", "measured ms",
                                   "predicted ms", "error", "fwd+bwd error", "optimizer error",
                                   forward ? fmt::format(" {:>14}", "forward error") : std::string());
  std::vector<double> errors;
  std::vector<MeasuredBesideForecast> beside;
  std::string json_steps;
  // The frameworks the rows ran under (a row's training.framework column
  // wins over --framework), named in the footer.
  std::vector<std::string> frameworks;
  for (const auto& m : steps) {
    Scenario s;
    // The command's --set first, then the row's own keys: what a step
    // measured is the step's.
    const std::string row_flag = fmt::format("data row {}", m.first_row);
    std::vector<Override> o = overrides;
    for (const auto& [k, v] : m.keys) o.push_back({k, v, row_flag});
    try {
      s = parse_scenario(step_scenario_yaml(m, gpu, framework), "step", o);
    } catch (const ScenarioError& e) {
      // Named by the override, or by the data row (with the options that
      // made its scenario), never by the YAML generated for it.
      const std::string rest = without_scenario_file(e);
      if (e.option() == row_flag) {
        // A value in one of the row's key-path columns: "key.path: why".
        if (const auto column = key_column_error(m.keys, rest)) throw InputError(data + ": " + *column);
        throw InputError(fmt::format("{}: row {}: {}", data, m.first_row, rest));
      }
      throw InputError(e.option().empty() ? fmt::format("{}: row {} (on {}, {}): {}", data, m.first_row, gpu,
                                                        framework, rest)
                                          : fmt::format("validate steps ({}): {}", e.option(), rest));
    }
    s.plan.tp_collectives = false;  // one rank's share, measured alone
    const std::string ran_under(node_model::to_string(s.workload.framework));
    if (std::find(frameworks.begin(), frameworks.end(), ran_under) == frameworks.end()) {
      frameworks.push_back(ran_under);
    }
    StepPhases phases;
    double predicted = 0;
    try {
      predicted = study::simulate_scenario(s, &phases, nullptr, false).result.makespan.ms();
    } catch (const InputError& e) {
      // A plan past the simulator's limits (a row of 10^8 layers), or a
      // kernel the row's sizes make impossible: named by the data row, not
      // by the scenario generated for it.
      throw InputError(fmt::format("{}: row {} (on {}, {}): {}", data, m.first_row, gpu, framework,
                                   without_scenario_file(e, s.file)));
    }
    const double e = predicted / m.measured_ms - 1.0;
    // The phases, where the data says how long the optimizer step took.
    std::string fb = "-", opt = "-", fwd = "-";
    const double p_opt = phases.optimizer().ms();
    if (m.fwd_bwd_ms() > 0) fb = signed_pct(predicted - p_opt, m.fwd_bwd_ms());
    if (m.measured_optimizer_ms > 0) opt = signed_pct(p_opt, m.measured_optimizer_ms);
    if (m.measured_fwd_ms > 0) fwd = signed_pct(phases.forward().ms(), m.measured_fwd_ms);
    errors.push_back(e);
    beside.push_back({m.first_row, m.measured_ms, predicted});
    json_steps += (json_steps.empty() ? "" : ", ") +
                  step_json(m, predicted, phases.optimizer().ms(), phases.forward().ms());
    report += fmt::format("{:<{}} {:>5} {:>12.2f} {:>12.2f} {:>+7.1f}% {:>16} {:>16}{}\n", label(m), width,
                          m.rows, m.measured_ms, predicted, 100.0 * e, fb, opt,
                          forward ? fmt::format(" {:>14}", fwd) : std::string());
  }
  // Times not in milliseconds: refused, as validate training refuses them.
  check_time_units(beside, data, "step");
  const node_model::ErrorStats e = node_model::error_stats(errors);
  if (p.has("json")) {
    std::vector<std::string> quoted;
    quoted.reserve(frameworks.size());
    for (const std::string& f : frameworks) quoted.push_back(json_string(f));
    out << fmt::format(
        "{{\"data\": {}, \"gpu\": {}, \"frameworks\": [{}], \"steps\": [{}], \"mean_error\": {:.6f}, "
        "\"max_error\": {:.6f}, \"mean_signed_error\": {:.6f}}}\n",
        json_string(data), json_string(gpu), fmt::join(quoted, ", "), json_steps, e.mean, e.max,
        e.mean_signed);
    return 0;
  }
  out << report
      << fmt::format(
             "mean error {:.1f}%, max {:.1f}%, signed {:+.1f}% over {} configurations ({} on {}, {})\n",
             100.0 * e.mean, 100.0 * e.max, 100.0 * e.mean_signed, steps.size(), data, gpu,
             fmt::join(frameworks, ", "));
  return 0;
}

}  // namespace tessera::cli
