// Planner commands: `tessera compare-schedules` and `tessera validate
// distributed` (docs/parallelism.md).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>

#include "tessera/cli/args.hpp"
#include "tessera/cli/chart.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/engine/executor.hpp"
#include "tessera/error.hpp"
#include "tessera/files.hpp"
#include "tessera/node_model/predictors.hpp"
#include "tessera/parallelism/plan.hpp"
#include "tessera/study/pipeline.hpp"

namespace tessera::cli {
namespace fs = std::filesystem;
using parallelism::ParallelPlan;
using parallelism::Schedule;

std::vector<Schedule> parse_schedule_list(const std::string& text) {
  std::vector<Schedule> out;
  std::stringstream ss(text);
  // (helper 179: `1f1b,` ran as 1f1b; getline drops a trailing empty item)
  if (!text.empty() && text.back() == ',') {
    throw UsageError(fmt::format("--schedules '{}': an empty item after the last comma", text));
  }
  for (std::string item; std::getline(ss, item, ',');) {
    Schedule s{};
    try {
      s = parallelism::parse_schedule(item);
    } catch (const InputError& e) {
      throw UsageError(fmt::format("--schedules: {}", e.what()));
    }
    // (as sweep refuses a value given twice: a second row or search of the
    // same schedule is a typo, not a request)
    if (std::find(out.begin(), out.end(), s) != out.end()) {
      throw UsageError(fmt::format("--schedules: {} is named twice", parallelism::to_string(s)));
    }
    out.push_back(s);
  }
  if (out.empty()) throw UsageError("--schedules: expected a comma-separated list of schedules");
  return out;
}

namespace {

/// One plan, executed on the scenario's network and on a free network.
struct Breakdown {
  IterationBreakdown split;  ///< pipeline.hpp: the one definition of compute, host, bubble, exposed comm
  parallelism::PlanSummary summary;
  double mfu = 0.0;           ///< as tessera run reports it (make_report)
  double tokens_per_s = 0.0;  ///< likewise
};

Breakdown simulate_plan(const Scenario& scenario, const ParallelPlan& plan, const node_model::KernelPredictor& pred) {
  Scenario s = scenario;
  s.plan = plan;
  const Simulation sim = simulate_scenario(s, nullptr, &pred);
  const RunReport rep = make_report(s, sim);
  return Breakdown{breakdown(sim), sim.plan, rep.mfu, rep.tokens_per_second};
}

/// The interleaved schedule's chunk counts: --virtual-stages "2,4" or a
/// --set parallelism.virtual_stages=N (taken out of `sets`: the scenario's
/// own schedule may not interleave), else the scenario's count (2 when it
/// does not interleave).
/// `given_by`: the option that gave the list (ChunkList::flag), if one did.
std::vector<int> virtual_stage_list(const ArgParser& p, std::vector<std::string>& sets,
                                    std::string& given_by) {
  const std::optional<ChunkList> list = take_chunk_list(p.get("virtual-stages"), sets);
  std::vector<int> out;
  if (!list) return out;
  given_by = list->flag;
  const std::string& text = list->text;
  const std::string& flag = list->flag;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    int v = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || end != item.data() + item.size() || v < 2) {
      throw UsageError(
          fmt::format("{} {}: expected whole numbers of 2 or more "
                      "(model chunks per pipeline rank), got '{}'",
                      flag, text, item));
    }
    if (std::find(out.begin(), out.end(), v) != out.end()) {
      throw UsageError(fmt::format("{} {}: {} is named twice", flag, text, v));
    }
    out.push_back(v);
  }
  if (out.empty()) throw UsageError(fmt::format("{}: expected a comma-separated list of chunk counts", flag));
  return out;
}

struct Row {
  std::string schedule;
  int virtual_stages = 1;
  std::string error;  ///< non-empty when the schedule cannot run this scenario
  /// With an error: whether the plan took the schedule (its simulation
  /// failed: a size past the simulator's range) or refused it.
  bool applicable = true;
  Breakdown result;
  /// What tessera run would warn of for this schedule besides the
  /// scenario's own warnings (printed once): an uneven split of the layers
  /// into its chunks, a plan near its memory (schedule_tight_warning).
  std::vector<std::string> warnings;
};

/// One bar of a horizontal bar panel: stacked segments (value, colour) and
/// the text after it; `missing` (non-empty) replaces the bar.
struct Bar {
  std::string name;
  std::vector<std::pair<double, std::string>> segments;
  std::string end_label;
  std::string missing;
};

/// A horizontal bar panel from y0 across `width`: title, bars, x axis with
/// ticks of `axis_max` and its label, and an optional dashed vertical
/// marker (value, label); `skip` leaves room below the title (for a
/// legend). Returns the SVG; `height` gets the height used.
std::string bar_panel(const std::string& title, const std::string& x_label, const std::vector<Bar>& bars,
                      double axis_max, const std::optional<std::pair<double, std::string>>& marker, double y0,
                      double skip, double width, double& height) {
  constexpr double kLeft = 170, kBar = 22, kGap = 10;
  // Room on the right for the longest text after a bar.
  double right = 60;
  for (const Bar& b : bars) right = std::max(right, chart::text_width(b.end_label, 12) + 16);
  const double top = y0 + skip + (marker ? 42 : 26);
  const double pw = width - kLeft - right;
  const std::vector<double> ticks = chart::ticks_from_zero(axis_max);
  const double scale = pw / ticks.back();
  const double bottom = top + static_cast<double>(bars.size()) * (kBar + kGap);
  std::string s = fmt::format(R"(<text x="10" y="{:.1f}" font-size="13" font-weight="bold">{}</text>)"
                              "\n",
                              y0 + 16, chart::escape(title));
  for (const double t : ticks) {
    const double x = kLeft + t * scale;
    s += fmt::format(R"(<line x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" stroke="#e5e5e5"/>)"
                     "\n",
                     x, top - 4, bottom);
    s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="11" text-anchor="middle">{}</text>)"
                     "\n",
                     x, bottom + 14, t < 1e4 ? fmt::format("{:g}", t) : chart::short_number(t));
  }
  s += fmt::format(R"(<line x1="{0}" y1="{1:.1f}" x2="{2:.1f}" y2="{1:.1f}" stroke="#888"/>)"
                   "\n",
                   kLeft, bottom, kLeft + pw);
  s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{}</text>)"
                   "\n",
                   kLeft + pw / 2, bottom + 32, chart::escape(x_label));
  // The marker under the bars and their labels, in near-black: the red of
  // a bar out of memory hid it where it crossed one (helper 148).
  if (marker) {
    const double mx = kLeft + marker->first * scale;
    s += fmt::format(
        R"(<line class="capacity" x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" stroke="#333333" stroke-width="2" stroke-dasharray="6 4"/>)"
        "\n",
        mx, top - 12, bottom);
    // The label ends at the line, or starts there when it would not fit left of it.
    const bool left_of = mx - chart::text_width(marker->second, 12) - 4 >= 10;
    s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" fill="#333333" text-anchor="{}">{}</text>)"
                     "\n",
                     left_of ? mx - 4 : mx + 4, top - 8, left_of ? "end" : "start",
                     chart::escape(marker->second));
  }
  double y = top;
  for (const Bar& b : bars) {
    s += fmt::format(R"(<text x="10" y="{:.1f}">{}</text>)"
                     "\n",
                     y + kBar * 0.68, chart::escape(b.name));
    if (!b.missing.empty()) {
      s += fmt::format(R"(<text x="{}" y="{:.1f}" fill="#aa0000">{}</text>)"
                       "\n",
                       kLeft + 4, y + kBar * 0.68, chart::escape(b.missing));
      y += kBar + kGap;
      continue;
    }
    double x = kLeft;
    for (const auto& [value, color] : b.segments) {
      const double w = std::max(0.0, value * scale);
      s += fmt::format(R"(<rect class="bar" x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{}" fill="{}"/>)"
                       "\n",
                       x, y, w, kBar, color);
      x += w;
    }
    // A white halo keeps the text readable over the marker line.
    s += fmt::format(
        R"(<text x="{:.1f}" y="{:.1f}" stroke="white" stroke-width="5" paint-order="stroke">{}</text>)"
        "\n",
        x + 6, y + kBar * 0.68, chart::escape(b.end_label));
    y += kBar + kGap;
  }
  height = bottom + 44 - y0;
  return s;
}

/// Two panels: the iteration time of each schedule split into compute,
/// host, bubble and exposed communication, and its peak memory per GPU (the
/// fullest stage) against the GPU's capacity.
/// tessera run's caveats of the scenario, one short line each, for under
/// the chart's legend (a reader of the chart alone; helper 60: the text's
/// Known bias lines were missing from it).
std::vector<std::string> chart_notes(const Scenario& s) {
  // Which models drew it, as sweep's chart says (helper 121: an ns-3 chart
  // looked like a flow one).
  std::vector<std::string> out{
      fmt::format("Models: {} node model, {} network backend", s.predictor, to_string(s.backend))};
  for (const std::string& note : untested_gpu_notes(s)) out.push_back(chart_untested_note("", note));
  const std::string attention = flash_attention_note(s);
  for (const std::string& note : known_bias_notes(s, false))
    out.push_back(note == attention ? chart_attention_note("") : chart_gpu_bias_note("", note));
  if (!fp8_note(s).empty()) out.push_back(chart_fp8_note(""));
  if (!parallelism::known_bias_note(s.plan).empty())
    out.push_back(chart_tp_bias_note("", std::to_string(s.plan.tp)));
  if (!multi_node_note(s).empty()) out.push_back(chart_scale_note(""));
  return out;
}

std::string svg_chart(const std::string& title, const std::string& subtitle, const std::vector<Row>& rows,
                      const std::string& gpu_name, Bytes capacity, const std::vector<std::string>& notes) {
  constexpr double kWidth = 820;
  const std::array<const char*, 4> colors{"#4878d0", "#8c613c", "#bbbbbb", "#ee854a"};
  const std::array<const char*, 4> parts{"compute", "host", "pipeline bubble", "exposed communication"};
  std::vector<Bar> time_bars, memory_bars;
  double longest = 0, fullest = capacity.in_gib();
  for (const Row& r : rows) {
    const std::string name = r.virtual_stages > 1 ? fmt::format("{} (v={})", r.schedule, r.virtual_stages) : r.schedule;
    Bar t{name, {}, {}, r.error.empty() ? "" : (r.applicable ? "failed (see the table)" : "not applicable")};
    Bar m = t;
    if (r.error.empty()) {
      const auto& b = r.result.split;
      const std::array<double, 4> ms{b.compute.ms(), b.host.ms(), b.bubble.ms(), b.exposed_comm.ms()};
      for (std::size_t i = 0; i < ms.size(); ++i) t.segments.emplace_back(ms[i], colors[i]);
      // A schedule out of memory is no choice: said on its time bar too
      // (helper 60: zb-h2 at 86 of 80 GiB looked like the second fastest).
      t.end_label =
          fmt::format("{:.1f} ms{}", b.iteration.ms(), r.result.summary.oom() ? ", out of memory" : "");
      longest = std::max(longest, b.iteration.ms());
      double peak = 0;
      std::size_t stage = 0;
      const auto& stages = r.result.summary.memory_per_stage;
      for (std::size_t k = 0; k < stages.size(); ++k) {
        const double gib = stages[k].total().in_gib();
        if (gib > peak) peak = gib, stage = k;
      }
      const bool oom = r.result.summary.oom();
      m.segments.emplace_back(peak, oom ? "#d62728" : "#59a14f");
      m.end_label = fmt::format("{:.1f} GiB{}", peak, stages.size() > 1 ? fmt::format(" (stage {})", stage) : "");
      if (oom) m.end_label += " OOM";
      fullest = std::max(fullest, peak);
    }
    time_bars.push_back(std::move(t));
    memory_bars.push_back(std::move(m));
  }
  std::vector<chart::LegendEntry> entries;
  for (std::size_t i = 0; i < parts.size(); ++i) entries.push_back({parts[i], colors[i], false, false, true});
  for (const std::string& n : notes) entries.push_back({n, "#555", false, false, false, true});
  // The parts' legend goes under the time panel's title, which keeps clear
  // of the subtitle above it (helper 136: 1.5 px between them).
  const double time_y = chart::kHeaderHeight - 6;
  double legend_h = 0;
  const std::string legend = chart::legend(entries, 10, time_y + 24, kWidth - 20, legend_h);
  double time_h = 0, memory_h = 0;
  const std::string time_panel = bar_panel("Iteration time", "time per iteration (ms)", time_bars,
                                           longest > 0 ? longest : 1, std::nullopt, time_y, legend_h + 4, kWidth, time_h);
  const double memory_y = time_y + time_h + 10;
  const std::string memory_panel = bar_panel(
      "Peak memory per GPU", "peak memory per GPU (GiB), the fullest pipeline stage", memory_bars, fullest,
      std::pair(capacity.in_gib(), fmt::format("{} memory: {:.0f} GiB", gpu_name, capacity.in_gib())),
      memory_y, 0, kWidth, memory_h);
  const double height = memory_y + memory_h + 6;
  return chart::open_document(kWidth, height, title, subtitle) + legend + time_panel + memory_panel +
         "</svg>\n";
}

}  // namespace

/// tessera run's warning for a schedule whose plan fits in 95% or more of a
/// stage's memory (tight_memory_warning), or empty.
std::string schedule_tight_warning(const parallelism::PlanSummary& summary) {
  return tight_memory_warning(stage_memory(summary.memory_per_stage));
}

int cmd_compare_schedules(const Args& args, std::ostream& out) {
  ArgParser p("tessera compare-schedules");
  p.option("schedules").option("virtual-stages").option("svg").flag("json");
  declare_scenario_options(p);
  std::vector<std::string> sets;
  p.parse(take_set_options(args, sets));
  p.expect_positional(1, "a scenario file");
  const auto schedules = parse_schedule_list(p.get("schedules").value_or("gpipe,1f1b,interleaved-1f1b,zb-h1,zb-h2"));
  // (named as given: helper 148's --set parallelism.virtual_stages=4 was
  // told of a --virtual-stages it never typed)
  std::string chunks_given_by;
  std::vector<int> chunk_counts = virtual_stage_list(p, sets, chunks_given_by);
  if (!chunk_counts.empty() &&
      std::find(schedules.begin(), schedules.end(), Schedule::Interleaved1F1B) == schedules.end()) {
    throw UsageError(fmt::format(
        "{}: --schedules leaves out interleaved-1f1b, the one schedule with model chunks", chunks_given_by));
  }
  const auto svg_path = p.get("svg");
  const Scenario s = load_scenario(p.positional()[0], scenario_overrides(sets, p));
  FileSet files;
  files.input(p.positional()[0], "the scenario");
  // (helper 179: --svg naming node_model.overrides overwrote the measurements)
  if (s.kernel_overrides) files.input(s.kernel_overrides->path(), "node_model.overrides");
  if (svg_path) {
    files.output(*svg_path, "--svg");
    check_svg_path(*svg_path);  // (after: --svg naming the scenario is refused as that)
  }
  require_single_job(s, "compare-schedules");
  print_scenario_warnings(s);  // as tessera run: every schedule runs with them
  const auto owned = make_scenario_predictor(s);
  const node_model::KernelPredictor& predictor = *owned;
  // The chart stands alone: it says what was compared (its title the
  // command, with its --set flags: helper 148 could not tell a recompute=
  // full chart from the file's), and under its legend the text's Untested
  // GPU and Known bias lines (chart_notes).
  std::string chart_title = fmt::format("tessera compare-schedules {}", p.positional()[0]);
  for (const std::string& set : sets) chart_title += " --set " + set;
  const std::string chart_subtitle =
      fmt::format("{} on {} x {}, dp={} tp={} pp={}{}, {}", s.model.name, s.gpus(), s.gpu.name, s.plan.dp,
                  s.plan.tp, s.plan.pp,
                  layer_split_phrase(s.plan.first_stage_layers, s.plan.last_stage_layers,
                                     s.plan.account_for_embedding, s.plan.account_for_loss),
                  micro_batches_phrase(s.plan.micro_batches(s.workload.micro_batch), s.workload.micro_batch));

  // The scenario's chunk count, else as `virtual_stages: auto` (helper 60:
  // 2 split schedules.yaml's 24 layers into 16 chunks, which Megatron-LM
  // refuses).
  if (chunk_counts.empty())
    chunk_counts.push_back(s.plan.virtual_stages > 1
                               ? s.plan.virtual_stages
                               : parallelism::auto_virtual_stages(s.model.layers, s.plan));

  std::vector<Row> rows;
  for (Schedule sched : schedules) {
    // The interleaved schedule once per chunk count, the others once.
    const std::vector<int> counts = sched == Schedule::Interleaved1F1B ? chunk_counts : std::vector<int>{1};
    for (int v : counts) {
      Row row;
      row.schedule = fmt::format("{}", parallelism::to_string(sched));
      ParallelPlan plan = s.plan;
      plan.schedule = sched;
      plan.virtual_stages = v;
      row.virtual_stages = v;
      try {
        plan.validate(s.model, s.workload, s.gpus());
      } catch (const InputError& e) {
        row.error = e.what();
        row.applicable = false;
      }
      if (row.error.empty()) {
        try {
          row.result = simulate_plan(s, plan, predictor);
        } catch (const InputError& e) {
          row.error = e.what();
        }
      }
      if (row.error.empty()) {
        // helper 60: the shipped schedules.yaml's v=2 row split 24 layers
        // into 16 chunks without the warning run gives for it.
        if (std::string w = uneven_layer_split_warning(s.model.layers, plan, s.workload.framework);
            !w.empty() && std::find(s.warnings.begin(), s.warnings.end(), w) == s.warnings.end())
          row.warnings.push_back(std::move(w));
        // (helper 148: zb-h1 under full recomputation held 2.4x 1f1b's
        // memory here, without the warning run gives)
        if (std::string w = split_backward_recompute_warning(plan);
            !w.empty() && std::find(s.warnings.begin(), s.warnings.end(), w) == s.warnings.end())
          row.warnings.push_back(std::move(w));
        if (std::string w = schedule_tight_warning(row.result.summary); !w.empty())
          row.warnings.push_back(std::move(w));
      }
      rows.push_back(std::move(row));
    }
  }
  // Nothing to compare: one error, not a table of failures and exit 0
  // (a seq_len of 10^9 printed five "not applicable" rows of the same
  // "cannot be simulated").
  if (!rows.empty() && std::all_of(rows.begin(), rows.end(), [](const Row& r) { return !r.error.empty(); })) {
    // Named by the scenario (and the --schedules entry when it is the only
    // one): "schedule zb-h1 needs pp >= 2" alone did not say of which file.
    if (std::all_of(rows.begin(), rows.end(), [&](const Row& r) { return r.error == rows.front().error; }))
      throw InputError(fmt::format(
          "{}{}: {}", p.positional()[0],
          rows.size() == 1 ? fmt::format(" (--schedules {})", rows.front().schedule) : std::string(),
          without_file_prefix(rows.front().error, s.file)));
    throw InputError(fmt::format(
        "{}: none of the {} schedules compared runs its plan; {}{}: {}", p.positional()[0], rows.size(),
        rows.front().schedule,
        rows.front().virtual_stages > 1 ? fmt::format(" (v={})", rows.front().virtual_stages) : std::string(),
        // (the scenario's name once)
        without_file_prefix(rows.front().error, s.file)));
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
      const auto& stages = r.result.summary.memory_per_stage;
      for (const auto& m : stages) mem += fmt::format("{}{}", mem.empty() ? "" : ", ", m.total().count());
      // The fullest stage's memory and its GPU's, as run, sweep and search
      // name them (parallelism::fullest_stage).
      const parallelism::MemoryEstimate fullest =
          stages.empty() ? parallelism::MemoryEstimate{} : stages[parallelism::fullest_stage(stages)];
      items += fmt::format(
          "{{\"schedule\": {}, \"virtual_stages\": {}, \"iteration_time_s\": {:.9e}, "
          "\"compute_time_s\": {:.9e}, \"host_time_s\": {:.9e}, \"bubble_time_s\": {:.9e}, "
          "\"bubble_share\": {:.6f}, \"exposed_comm_time_s\": {:.9e}, "
          "\"tokens_per_s\": {:.3f}, \"mfu\": {:.6f}, "
          "\"peak_memory_bytes\": {}, \"memory_capacity_bytes\": {}, "
          "\"peak_memory_bytes_per_stage\": [{}], \"oom\": {}{}}}",
          json_string(r.schedule), r.virtual_stages, b.iteration.seconds(), b.compute.seconds(),
          b.host.seconds(), b.bubble.seconds(), b.share(b.bubble), b.exposed_comm.seconds(),
          r.result.tokens_per_s, r.result.mfu, fullest.total().count(), fullest.capacity.count(), mem,
          r.result.summary.oom() ? "true" : "false",
          r.warnings.empty() ? std::string() : ", \"warnings\": " + json_string_array(r.warnings));
    }
    // As in tessera run --json: "untested_gpu" and "known_bias" only when set.
    out << fmt::format(
        "{{\"scenario\": {}, \"model\": {}, \"gpu\": {}, \"gpus\": {}, \"dp\": {}, \"tp\": {}, \"pp\": {}, "
        "{}\"micro_batches\": {}, \"micro_batch\": {}, \"global_batch\": {}, \"seq_len\": {}, "
        "\"backend\": {}, \"predictor\": {}, {}{}\"schedules\": [{}]}}\n",
        json_string(s.name), json_string(s.model.name), json_string(s.gpu.name), s.gpus(), plan.dp, plan.tp,
        plan.pp,
        // As in run --json: `ep` for a mixture of experts only (helper 106).
        s.model.is_moe() ? fmt::format("\"ep\": {}, ", plan.ep) : std::string(),
        plan.micro_batches(s.workload.micro_batch), s.workload.micro_batch,
        plan.sequences(s.workload.micro_batch), s.workload.seq_len,
        json_string(std::string(to_string(s.backend))), json_string(std::string(predictor.name())),
        mixed_gpus_json(s) + scenario_warnings_json(s), caveat_json(s), items);
    if (svg_path)
      write_file_atomic(
          *svg_path, svg_chart(chart_title, chart_subtitle, rows, s.gpu.name, s.gpu.memory, chart_notes(s)));
    return 0;
  }
  out << fmt::format(
      "Scenario {} ({} on {} x {}{}{}, dp={} tp={} pp={}{}{}, {}, {} node model, {} network backend)\n",
      s.name, s.model.name, s.gpus(), s.gpu.name, mixed_gpus_phrase(s),
      // the fabric where run's Scenario line says more of it than its kind
      // (helper 136: the leaves' 2:1 oversubscription went unsaid here)
      study::fabric_detail(s).empty() ? std::string()
                                      : ", " + fabric_phrase(study::fabric_name(s)) + study::fabric_detail(s),
      plan.dp, plan.tp, plan.pp, plan.ep > 1 ? fmt::format(" ep={}", plan.ep) : "",
      layer_split_phrase(plan.first_stage_layers, plan.last_stage_layers, plan.account_for_embedding,
                         plan.account_for_loss),
      micro_batches_phrase(s.plan.micro_batches(s.workload.micro_batch), s.workload.micro_batch),
      predictor.name(), to_string(s.backend));
  out << caveat_lines(s) << stragglers_line(s) << "\n";
  auto row_name = [](const Row& r) {
    return r.virtual_stages > 1 ? fmt::format("{} (v={})", r.schedule, r.virtual_stages) : r.schedule;
  };
  // The schedule column holds the longest name ("interleaved-1f1b (v=10)"
  // broke the columns: helper 70).
  std::size_t width = 22;
  for (const Row& r : rows) width = std::max(width, row_name(r).size());
  // The memory of each stage in a column of its own, right-aligned to the
  // widest figure of any row, with a column for '!' where a stage of any row
  // does not fit (they were joined by single spaces: "9.5" and "14.9" put
  // the stages after them out of line, helper 151).
  std::size_t mem_width = 0;
  bool any_oom = false;
  for (const Row& r : rows) {
    if (!r.error.empty()) continue;
    for (const auto& m : r.result.summary.memory_per_stage) {
      mem_width = std::max(mem_width, fmt::format("{:.1f}", m.total().in_gib()).size());
      any_oom = any_oom || m.oom();
    }
  }
  out << fmt::format("{:<{}} {:>12} {:>19} {:>12} {:>12} {:>12} {:>6}  {}\n", "schedule", width, "iteration",
                     "bubble", "exposed comm", "compute", "host", "MFU", "peak memory per stage (GiB)");
  std::string warned;  // tessera run's warnings, per schedule they hold for
  for (const Row& r : rows) {
    const std::string name = row_name(r);
    if (!r.error.empty()) {
      out << fmt::format("{:<{}} {}: {}\n", name, width, r.applicable ? "failed" : "not applicable", r.error);
      continue;
    }
    for (const std::string& w : r.warnings) warned += fmt::format("warning for {}: {}\n", name, w);
    std::string mem;
    std::optional<Bytes> over;  // the first stage out of memory's capacity (mixed_gpus: its smallest GPU's)
    for (const auto& m : r.result.summary.memory_per_stage) {
      if (!mem.empty()) mem += ' ';
      mem += fmt::format("{:>{}.1f}{}", m.total().in_gib(), mem_width, m.oom() ? "!" : (any_oom ? " " : ""));
      if (m.oom() && !over) over = m.capacity;
    }
    // (no blank at the end of a line; before "OOM" it keeps that in line)
    if (!over) mem.erase(mem.find_last_not_of(' ') + 1);
    // The bubble as `run` prints it: its time and its share of the iteration,
    // rounded with the other three (helper 113: 10.9% here, 11.0% in run).
    const IterationBreakdown& b = r.result.split;
    out << fmt::format(
        "{:<{}} {:>9.3f} ms {:>9.3f} ms {:5.1f}% {:>9.3f} ms {:>9.3f} ms {:>9.3f} ms {:5.1f}%  {}{}\n", name,
        width, b.iteration.ms(), b.bubble.ms(), b.tenths_of_percent()[2] / 10.0, b.exposed_comm.ms(),
        b.compute.ms(), b.host.ms(), 100.0 * r.result.mfu, mem,
        over ? fmt::format("  OOM (> {:.1f} GiB)", over->in_gib()) : "");
  }
  out << warned;
  // A zero-bubble schedule that exposes more communication than 1F1B: say
  // why, as it can decide the ranking (docs/parallelism.md, "Schedules").
  const auto one_f_one_b = std::find_if(rows.begin(), rows.end(), [](const Row& r) {
    return r.error.empty() && r.schedule == parallelism::to_string(Schedule::OneFOneB);
  });
  std::vector<std::string> exposing;
  for (const Row& r : rows) {
    if (plan.tp == 1 || one_f_one_b == rows.end() || !r.error.empty() ||
        (r.schedule != parallelism::to_string(Schedule::ZeroBubbleH1) &&
         r.schedule != parallelism::to_string(Schedule::ZeroBubbleH2)))
      continue;
    const Time more = r.result.split.exposed_comm - one_f_one_b->result.split.exposed_comm;
    if (more.seconds() >= 0.01 * r.result.split.iteration.seconds())
      exposing.push_back(fmt::format("{} {:.3f} ms", r.schedule, more.ms()));
  }
  if (!exposing.empty()) {
    out << fmt::format(
        "\nnote: more communication exposed than under 1f1b ({}): with tensor parallelism "
        "the input-gradient all-reduce (reduce-scatter with SP) of QKV and fc1 blocks B, "
        "as the weight-gradient GEMM that hides it under 1f1b runs in W "
        "(docs/parallelism.md, \"Schedules\")\n",
        fmt::join(exposing, ", "));
  }
  // zb-h2 with zb-h1's times, as the table prints them (helper 151: identical
  // rows, nothing said why). With no more micro-batches than stages the first
  // stage runs every forward before its first B under both (zb-h2's warm-up
  // of 2(p - 1) forwards is cut to the m there are), as the last stage runs
  // F and B in turn under both: the extra forwards that fill the first
  // stage's wait under zb-h2 are not there (docs/parallelism.md,
  // "Schedules"). Only the stages between may hold other memory.
  auto ran = [&](Schedule sched) {
    return std::find_if(rows.begin(), rows.end(), [&](const Row& r) {
      return r.error.empty() && r.schedule == parallelism::to_string(sched);
    });
  };
  const auto zb_h1 = ran(Schedule::ZeroBubbleH1);
  const auto zb_h2 = ran(Schedule::ZeroBubbleH2);
  const std::int64_t micro_batches = plan.micro_batches(s.workload.micro_batch);
  if (zb_h1 != rows.end() && zb_h2 != rows.end() && micro_batches <= plan.pp) {
    auto times = [](const Row& r) {
      const IterationBreakdown& b = r.result.split;
      return fmt::format("{:.3f} {:.3f} {:.3f} {:.3f} {:.3f}", b.iteration.ms(), b.bubble.ms(),
                         b.exposed_comm.ms(), b.compute.ms(), b.host.ms());
    };
    auto memory = [](const Row& r) {
      std::string text;
      for (const auto& m : r.result.summary.memory_per_stage)
        text += fmt::format(" {:.1f}", m.total().in_gib());
      return text;
    };
    if (times(*zb_h1) == times(*zb_h2)) {
      const bool same_memory = memory(*zb_h1) == memory(*zb_h2);
      const std::int64_t h2_warm = 2 * (static_cast<std::int64_t>(plan.pp) - 1);
      out << fmt::format(
          "\nnote: zb-h2 forecasts zb-h1's times{} here: with {} micro-batch{} for {} pipeline stages the "
          "first stage runs every forward before its first backward under both{}, so zb-h2 has no extra "
          "forward to fill its wait for that backward with; with more micro-batches than stages ({} or more) "
          "it can (docs/parallelism.md, \"Schedules\")\n",
          same_memory ? " and memory" : " (not the memory of the stages between the first and the last)",
          micro_batches, micro_batches == 1 ? "" : "es", plan.pp,
          h2_warm > micro_batches
              ? fmt::format(" (zb-h2's warm-up of 2(pp - 1) = {} forwards is cut to the {} there {})",
                            h2_warm, micro_batches, micro_batches == 1 ? "is" : "are")
              : std::string(),
          plan.pp + 1);
    }
  }
  // Interleaving slower than 1F1B where the per-micro-batch data step
  // (fit on DeepSpeed's data path) is what turns it: said with the figures
  // both would have without it, so a user with a faster data loader knows.
  if (one_f_one_b != rows.end() && s.workload.host.per_micro_batch > Time::zero()) {
    Scenario no_data = s;
    no_data.workload.host.per_micro_batch = Time::zero();
    std::optional<Breakdown> base;  // 1f1b without the data step, run once
    for (const Row& r : rows) {
      if (!r.error.empty() || r.schedule != parallelism::to_string(Schedule::Interleaved1F1B) ||
          r.result.split.iteration <= one_f_one_b->result.split.iteration)
        continue;
      ParallelPlan lean = plan;
      lean.schedule = Schedule::Interleaved1F1B;
      lean.virtual_stages = r.virtual_stages;
      const Breakdown without = simulate_plan(no_data, lean, predictor);
      if (!base) {
        lean.schedule = Schedule::OneFOneB;
        lean.virtual_stages = 1;
        base = simulate_plan(no_data, lean, predictor);
      }
      if (without.split.iteration >= base->split.iteration) continue;
      out << fmt::format(
          "\nnote: interleaved-1f1b (v={}) is slower than 1f1b here because of the data step each "
          "micro-batch starts with on the first and last stages (calibration.host_microbatch = {}, fit on "
          "DeepSpeed's data path, docs/calibration.md): without it interleaved-1f1b would take {:.3f} ms "
          "and 1f1b {:.3f} ms. With a data loader that costs less per micro-batch, set "
          "calibration.host_microbatch to what it costs\n",
          r.virtual_stages, to_string(s.workload.host.per_micro_batch), without.split.iteration.ms(),
          base->split.iteration.ms());
    }
  }
  out << "\nThe iteration is bubble + exposed comm + compute + host, as `tessera run` splits it. compute:\n"
         "the busiest GPU's kernels; host: its compute stream waiting for the host to launch them (the\n"
         "data step per micro-batch, pipeline sends, collectives its kernels wait for); bubble: pipeline\n"
         "fill and drain with free communication, other stages' host stalls included, and its share of\n"
         "the iteration; exposed comm: the rest. MFU: model FLOPs per GPU-second over the GPU's dense\n"
         "matmul peak, as `tessera run` reports it. '!' marks a stage that does not fit in the GPU's\n"
         "memory.\n";
  if (svg_path) {
    write_file_atomic(*svg_path,
                      svg_chart(chart_title, chart_subtitle, rows, s.gpu.name, s.gpu.memory, chart_notes(s)));
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
  double ms = 0;
  try {
    ms = std::stod(s.substr(colon + 1));
  } catch (const std::logic_error&) {
    throw InputError(fmt::format("{}: \"e2e_latency\" is not a number", path));
  }
  // (helper 120: 0 printed an error of inf, invalid JSON under --json, and
  // -5 an error of -9985%, exit 0)
  if (!std::isfinite(ms) || ms <= 0) {
    throw InputError(
        fmt::format("{}: \"e2e_latency\" must be a positive time in milliseconds (got {})", path, ms));
  }
  return ms;
}

}  // namespace

int cmd_validate_distributed(const Args& args, std::ostream& out) {
  ArgParser p("tessera validate distributed");
  p.option("data").option("scenarios").option("weights").flag("json");
  declare_scenario_options(p);
  std::vector<std::string> sets;
  p.parse(take_set_options(args, sets));
  p.expect_positional(0, "arguments");
  const std::vector<Override> overrides = scenario_overrides(sets, p);
  // NeuSight's labels_distributed/, or a folder above it.
  std::string data = dataset_folder(p.require("data"), "neusight");
  if (fs::is_directory(fs::path(data) / "labels_distributed"))
    data = (fs::path(data) / "labels_distributed").string();
  const std::string dir = p.get("scenarios").value_or("scenarios/validation");
  if (!fs::is_directory(data)) throw InputError(fmt::format("--data {}: not a directory", data));
  if (!fs::is_directory(dir)) {
    // (the hint is for the default, not a --scenarios given: helper 179)
    throw InputError(
        p.get("scenarios")
            ? fmt::format("--scenarios {}: not a directory", dir)
            : fmt::format("{}: not a directory (the default --scenarios: run from the repository root "
                          "or pass --scenarios DIR)",
                          dir));
  }
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".yaml") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw InputError(fmt::format("--scenarios {}: no .yaml scenarios", dir));

  // Every scenario with the command's --set / --backend / --predictor.
  std::string rows, json_rows, models;
  double sum = 0, worst = 0, signed_sum = 0;
  for (const std::string& f : files) {
    const Scenario s = load_scenario(f, overrides);
    if (models.empty()) models = fmt::format("{} node model, {} network", s.predictor, to_string(s.backend));
    const std::string label = (fs::path(data) / (s.name + ".json")).string();
    const double measured = read_e2e_latency(label);
    const auto predictor = p.get("weights") ? node_model::make_predictor(s.predictor, kernel_gpu(s), *p.get("weights"))
                                            : node_model::make_predictor(s.predictor, kernel_gpu(s));
    const Breakdown b = simulate_plan(s, s.plan, *predictor);
    const double predicted = b.split.iteration.ms();
    // A label in seconds (0.452 for 452 ms) would read as a 10^5 % error:
    // refused, as validate training and steps refuse their rows'.
    if (const double ratio = measured / predicted;
        ratio >= kTimeUnitsOffFactor || ratio <= 1.0 / kTimeUnitsOffFactor) {
      throw InputError(fmt::format(
          "{}: \"e2e_latency\" {:g} is {:.3g} x the forecast of {:.1f} ms: is it in milliseconds?", label,
          measured, ratio, predicted));
    }
    const double signed_err = (predicted - measured) / measured;
    const double err = std::abs(signed_err);
    sum += err;
    signed_sum += signed_err;
    worst = std::max(worst, err);
    rows += fmt::format("{:<58} {:>9.1f} ms {:>9.1f} ms {:>+7.1f}%\n", s.name, predicted, measured,
                        100.0 * signed_err);
    // error: |predicted - measured| / measured; signed_error: negative
    // when the forecast is too fast.
    json_rows += fmt::format(
        "{}{{\"run\": {}, \"predicted_ms\": {:.3f}, \"measured_ms\": {:.3f}, \"error\": {:.4f}, "
        "\"signed_error\": {:.4f}}}",
        json_rows.empty() ? "" : ", ", json_string(s.name), predicted, measured, err, signed_err);
  }
  const double mean = sum / static_cast<double>(files.size());
  const double signed_mean = signed_sum / static_cast<double>(files.size());
  if (p.has("json")) {
    out << fmt::format(
        "{{\"runs\": [{}], \"models\": {}, \"mean_error\": {:.4f}, \"max_error\": {:.4f}, "
        "\"mean_signed_error\": {:.4f}}}\n",
        json_rows, json_string(models), mean, worst, signed_mean);
    return 0;
  }
  out << fmt::format("Distributed training iterations: predicted ({}) vs measured\n\n", models);
  out << fmt::format("{:<58} {:>12} {:>12} {:>8}\n", "run (scenario name = measurement)", "predicted", "measured",
                     "error");
  out << rows;
  out << fmt::format(
      "\n{} runs: mean error {:.1f}%, max {:.1f}%, signed mean {:+.1f}% (negative: too fast)\n", files.size(),
      100.0 * mean, 100.0 * worst, 100.0 * signed_mean);
  return 0;
}

}  // namespace tessera::cli
