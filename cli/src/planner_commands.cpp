// Planner commands: `tessera compare-schedules` and `tessera validate
// distributed` (docs/parallelism.md).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <ostream>
#include <sstream>

#include "tessera/cli/args.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/files.hpp"
#include "tessera/study/pipeline.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/engine/executor.hpp"
#include "tessera/error.hpp"
#include "tessera/node_model/predictors.hpp"
#include "tessera/parallelism/plan.hpp"

namespace tessera::cli {
namespace fs = std::filesystem;
using parallelism::ParallelPlan;
using parallelism::Schedule;

namespace {

/// One plan, executed on the scenario's network and on a free network.
struct Breakdown {
  IterationBreakdown split;  ///< pipeline.hpp: the one definition of compute, host, bubble, exposed comm
  parallelism::PlanSummary summary;
};

Breakdown simulate_plan(const Scenario& scenario, const ParallelPlan& plan, const node_model::KernelPredictor& pred) {
  Scenario s = scenario;
  s.plan = plan;
  const Simulation sim = simulate_scenario(s, nullptr, &pred);
  return Breakdown{breakdown(sim), sim.plan};
}

std::vector<Schedule> parse_schedule_list(const std::string& text) {
  std::vector<Schedule> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    try {
      out.push_back(parallelism::parse_schedule(item));
    } catch (const InputError& e) {
      throw UsageError(fmt::format("--schedules: {}", e.what()));
    }
  }
  if (out.empty()) throw UsageError("--schedules: expected a comma-separated list of schedules");
  return out;
}

std::string gib(Bytes b) { return fmt::format("{:.1f}", b.as_double() / (1024.0 * 1024.0 * 1024.0)); }

struct Row {
  std::string schedule;
  int virtual_stages = 1;
  std::string error;  ///< non-empty when the schedule cannot run this scenario
  Breakdown result;
};

std::string svg_chart(const std::string& title, const std::vector<Row>& rows) {
  const double width = 760, left = 170, bar_h = 26, gap = 14, top = 48;
  double longest = 0;
  for (const Row& r : rows) {
    if (r.error.empty()) longest = std::max(longest, r.result.split.iteration.ms());
  }
  if (longest <= 0) longest = 1;
  const double scale = (width - left - 90) / longest;
  const double height = top + static_cast<double>(rows.size()) * (bar_h + gap) + 40;
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"20\" font-size=\"14\" font-weight=\"bold\">{2}</text>\n",
      width, height, title);
  const char* colors[] = {"#4878d0", "#8c613c", "#bbbbbb", "#ee854a"};
  const char* labels[] = {"compute", "host", "pipeline bubble", "exposed communication"};
  for (int i = 0; i < 4; ++i) {
    svg += fmt::format("<rect x=\"{}\" y=\"28\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{}\" y=\"38\">{}</text>\n",
                       left - 160 + i * 150, colors[i], left - 160 + i * 150 + 16, labels[i]);
  }
  double y = top;
  for (const Row& r : rows) {
    const std::string name = r.virtual_stages > 1 ? fmt::format("{} (v={})", r.schedule, r.virtual_stages) : r.schedule;
    svg += fmt::format("<text x=\"10\" y=\"{}\">{}</text>\n", y + bar_h * 0.65, name);
    if (!r.error.empty()) {
      svg += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#aa0000\">not applicable</text>\n", left, y + bar_h * 0.65);
      y += bar_h + gap;
      continue;
    }
    const auto& b = r.result.split;
    const double parts[] = {b.compute.ms(), b.host.ms(), b.bubble.ms(), b.exposed_comm.ms()};
    double x = left;
    for (int i = 0; i < 4; ++i) {
      const double w = std::max(0.0, parts[i] * scale);
      svg += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>\n", x, y, w, bar_h,
                         colors[i]);
      x += w;
    }
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{:.1f} ms{}</text>\n", x + 6, y + bar_h * 0.65,
                       r.result.split.iteration.ms(), r.result.summary.oom() ? " OOM" : "");
    y += bar_h + gap;
  }
  return svg + "</svg>\n";
}

}  // namespace

int cmd_compare_schedules(const Args& args, std::ostream& out) {
  ArgParser p("tessera compare-schedules");
  p.option("schedules").option("svg").flag("json");
  declare_scenario_options(p);
  std::vector<std::string> sets;
  p.parse(take_set_options(args, sets));
  p.expect_positional(1, "a scenario file");
  const auto schedules = parse_schedule_list(p.get("schedules").value_or("gpipe,1f1b,interleaved-1f1b,zb-h1,zb-h2"));
  const auto svg_path = p.get("svg");
  FileSet files;
  files.input(p.positional()[0], "the scenario");
  if (svg_path) files.output(*svg_path, "--svg");
  const Scenario s = load_scenario(p.positional()[0], scenario_overrides(sets, p));
  require_single_job(s, "compare-schedules");
  const auto owned = make_scenario_predictor(s);
  const node_model::KernelPredictor& predictor = *owned;

  std::vector<Row> rows;
  for (Schedule sched : schedules) {
    Row row;
    row.schedule = fmt::format("{}", parallelism::to_string(sched));
    ParallelPlan plan = s.plan;
    plan.schedule = sched;
    plan.virtual_stages = sched == Schedule::Interleaved1F1B ? std::max(2, s.plan.virtual_stages) : 1;
    row.virtual_stages = plan.virtual_stages;
    try {
      plan.validate(s.model, s.workload, s.gpus());
      row.result = simulate_plan(s, plan, predictor);
    } catch (const InputError& e) {
      row.error = e.what();
    }
    rows.push_back(std::move(row));
  }

  const auto& plan = s.plan;
  if (p.has("json")) {
    // One object: the scenario and, per schedule, the same numbers as the
    // table (times in seconds, the bubble's share of the iteration, peak
    // memory per stage in bytes), or why the schedule cannot run.
    std::string items;
    for (const Row& r : rows) {
      if (!items.empty()) items += ", ";
      if (!r.error.empty()) {
        items += fmt::format("{{\"schedule\": {}, \"virtual_stages\": {}, \"error\": {}}}", json_string(r.schedule),
                             r.virtual_stages, json_string(r.error));
        continue;
      }
      const IterationBreakdown& b = r.result.split;
      std::string mem;
      for (const auto& m : r.result.summary.memory_per_stage) {
        mem += fmt::format("{}{}", mem.empty() ? "" : ", ", m.total().count());
      }
      items += fmt::format(
          "{{\"schedule\": {}, \"virtual_stages\": {}, \"iteration_time_s\": {:.9e}, \"compute_time_s\": {:.9e}, "
          "\"host_time_s\": {:.9e}, \"bubble_time_s\": {:.9e}, \"bubble_share\": {:.6f}, "
          "\"exposed_comm_time_s\": {:.9e}, \"peak_memory_bytes_per_stage\": [{}], \"oom\": {}}}",
          json_string(r.schedule), r.virtual_stages, b.iteration.seconds(), b.compute.seconds(), b.host.seconds(),
          b.bubble.seconds(), b.share(b.bubble), b.exposed_comm.seconds(), mem,
          r.result.summary.oom() ? "true" : "false");
    }
    out << fmt::format("{{\"scenario\": {}, \"gpus\": {}, \"dp\": {}, \"tp\": {}, \"pp\": {}, \"micro_batches\": {}, "
                       "\"predictor\": {}, \"schedules\": [{}]}}\n",
                       json_string(s.name), s.gpus(), plan.dp, plan.tp, plan.pp,
                       plan.micro_batches(s.workload.micro_batch), json_string(std::string(predictor.name())), items);
    if (svg_path) write_file_atomic(*svg_path, svg_chart(fmt::format("{}: schedules", s.name), rows));
    return 0;
  }
  out << fmt::format(
      "Scenario {} ({} on {} x {}, dp={} tp={} pp={}{}, {} micro-batches of {}, {} node model)\n\n", s.name,
      s.model.name, s.gpus(), s.gpu.name, plan.dp, plan.tp, plan.pp,
      plan.ep > 1 ? fmt::format(" ep={}", plan.ep) : "", plan.micro_batches(s.workload.micro_batch),
      s.workload.micro_batch, predictor.name());
  out << fmt::format("{:<22} {:>12} {:>19} {:>12} {:>12}  {}\n", "schedule", "iteration", "bubble", "exposed comm",
                     "compute", "peak memory per stage (GiB)");
  for (const Row& r : rows) {
    const std::string name = r.virtual_stages > 1 ? fmt::format("{} (v={})", r.schedule, r.virtual_stages) : r.schedule;
    if (!r.error.empty()) {
      out << fmt::format("{:<22} not applicable: {}\n", name, r.error);
      continue;
    }
    std::string mem;
    for (const auto& m : r.result.summary.memory_per_stage) {
      if (!mem.empty()) mem += ' ';
      mem += gib(m.total());
      if (m.oom()) mem += '!';
    }
    // The bubble as `run` prints it: its time and its share of the iteration.
    const IterationBreakdown& b = r.result.split;
    out << fmt::format("{:<22} {:>9.3f} ms {:>9.3f} ms {:5.1f}% {:>9.3f} ms {:>9.3f} ms  {}{}\n", name, b.iteration.ms(),
                       b.bubble.ms(), 100.0 * b.share(b.bubble), b.exposed_comm.ms(), b.compute.ms(), mem,
                       r.result.summary.oom() ? fmt::format("  OOM (> {} GiB)", gib(s.gpu.memory)) : "");
  }
  out << "\nbubble: pipeline fill and drain with free communication, and its share of the iteration (as\n"
         "`tessera run` prints it); exposed comm: the rest of the iteration beyond that; '!' marks a stage\n"
         "that does not fit in the GPU's memory.\n";
  if (svg_path) {
    write_file_atomic(*svg_path, svg_chart(fmt::format("{}: schedules", s.name), rows));
    out << fmt::format("chart written to {}\n", *svg_path);
  }
  return 0;
}

namespace {

/// `e2e_latency` (ms) of a measurement JSON file.
double read_e2e_latency(const std::string& path) {
  const std::string s = read_input_file(path, "measurement file");
  const auto key = s.find("\"e2e_latency\"");
  const auto colon = key == std::string::npos ? key : s.find(':', key);
  if (colon == std::string::npos) throw InputError(fmt::format("{}: no \"e2e_latency\" field", path));
  try {
    return std::stod(s.substr(colon + 1));
  } catch (const std::logic_error&) {
    throw InputError(fmt::format("{}: \"e2e_latency\" is not a number", path));
  }
}

}  // namespace

int cmd_validate_distributed(const Args& args, std::ostream& out) {
  ArgParser p("tessera validate distributed");
  p.option("data").option("scenarios").option("predictor").option("weights");
  p.parse(args);
  p.expect_positional(0, "arguments");
  const std::string data = p.require("data");
  const std::string dir = p.get("scenarios").value_or("scenarios/validation");
  if (!fs::is_directory(data)) throw InputError(fmt::format("--data {}: not a directory", data));
  if (!fs::is_directory(dir)) {
    throw InputError(fmt::format("--scenarios {}: not a directory (run from the repository root or pass --scenarios)", dir));
  }
  const std::string name = p.get("predictor").value_or(std::string(node_model::kDefaultPredictor));

  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".yaml") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw InputError(fmt::format("--scenarios {}: no .yaml scenarios", dir));

  out << fmt::format("Distributed training iterations: predicted ({} node model, flow network) vs measured\n\n", name);
  out << fmt::format("{:<58} {:>12} {:>12} {:>8}\n", "run (scenario name = measurement)", "predicted", "measured",
                     "error");
  double sum = 0, worst = 0;
  for (const std::string& f : files) {
    const Scenario s = load_scenario(f);
    const std::string label = (fs::path(data) / (s.name + ".json")).string();
    const double measured = read_e2e_latency(label);
    const auto predictor = p.get("weights") ? node_model::make_predictor(name, kernel_gpu(s), *p.get("weights"))
                                            : node_model::make_predictor(name, kernel_gpu(s));
    const Breakdown b = simulate_plan(s, s.plan, *predictor);
    const double predicted = b.split.iteration.ms();
    const double err = std::abs(predicted - measured) / measured;
    sum += err;
    worst = std::max(worst, err);
    out << fmt::format("{:<58} {:>9.1f} ms {:>9.1f} ms {:>7.1f}%\n", s.name, predicted, measured, 100.0 * err);
  }
  out << fmt::format("\n{} runs: mean error {:.1f}%, max {:.1f}%\n", files.size(), 100.0 * sum / files.size(),
                     100.0 * worst);
  return 0;
}

}  // namespace tessera::cli
