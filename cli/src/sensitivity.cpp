// `tessera sensitivity`: the forecast with each calibration constant moved by
// one step (docs/calibration.md, "Which constants matter for your forecast").
#include "tessera/cli/sensitivity.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <memory>
#include <ostream>
#include <thread>

#include "tessera/cli/args.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/cli/interrupt.hpp"
#include "tessera/cli/parallel.hpp"
#include "tessera/cli/progress.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/error.hpp"
#include "tessera/study/pipeline.hpp"

namespace tessera::cli {

namespace {

Override calibration_set(const std::string& key, const std::string& value) {
  return Override{"calibration." + key, value};
}

/// A number as a --set value: six significant digits (the value to within
/// 5e-6 of itself; 0.799 x 0.99 prints as 0.79101).
std::string number_text(double x) { return fmt::format("{:.6g}", x); }

/// The steps of one link class (`prefix`: "nvlink" or "network").
void link_steps(std::vector<SensitivityStep>& out, const std::string& prefix, const std::string& name,
                const engine::LinkCalibration& l) {
  out.push_back({name + " collective launch",
                 "+10us",
                 {calibration_set(prefix + "_launch", to_string(l.launch_latency + Time::from_us(10)))}});
  // Per transfer on the collective's critical path (a ring over n ranks pays
  // it 2(n-1) times): the network's 6.2us is NCCL's own figure, not a fit.
  out.push_back({name + " collective step latency",
                 "+1us",
                 {calibration_set(prefix + "_step", to_string(l.step_latency + Time::from_us(1)))}});
  // Efficiency and group penalty both x 0.99: efficiency(n) x 0.99 for every
  // group size. The loader takes efficiencies from 0.01: below that, the
  // step goes the other way (x 1.01).
  const bool down = l.peak_efficiency * 0.99 >= 0.01;
  const double f = down ? 0.99 : 1.01;
  out.push_back({name + " collectives' bandwidth",
                 down ? "-1%" : "+1%",
                 {calibration_set(prefix + "_efficiency", number_text(l.peak_efficiency * f)),
                  calibration_set(prefix + "_group_penalty", number_text(l.group_penalty * f))}});
  out.push_back({name + " collective arrival skew",
                 "+10us",
                 {calibration_set(prefix + "_skew", to_string(l.skew + Time::from_us(10)))}});
}

}  // namespace

std::vector<SensitivityStep> sensitivity_steps(const Scenario& s) {
  std::vector<SensitivityStep> out;
  // The host constants as the host model uses them (under pytorch-eager only
  // the keys the scenario gives are on; without any the host model is off and
  // eager kernels carry their launch floors: no host step then).
  const parallelism::HostOverhead& h = s.workload.host;
  if (h.enabled()) {
    out.push_back({"host time per kernel launch",
                   "+1us",
                   {calibration_set("host_launch", to_string(h.per_launch + Time::from_us(1)))}});
    out.push_back({"host data step per micro-batch",
                   "+1ms",
                   {calibration_set("host_microbatch", to_string(h.per_micro_batch + Time::from_ms(1)))}});
    if (s.plan.pp > 1) {
      out.push_back({"host time per pipeline send or receive",
                     "+100us",
                     {calibration_set("host_p2p", to_string(h.per_p2p + Time::from_us(100)))}});
    }
  }
  const engine::CommCalibration& c = s.calibration.comm;
  if (s.cluster.gpus_per_node > 1) link_steps(out, "nvlink", "NVLink", c.nvlink);
  if (s.cluster.nodes > 1) link_steps(out, "network", "network", c.network);
  // Each step goes the other way where the loader's range ends (overlap
  // slowdown at most 0.9, clock derate at least 0.1): every constant keeps
  // its row.
  if (s.gpus() > 1) {
    const bool up = c.sm_slowdown + 0.05 <= 0.9;
    out.push_back({"compute slowdown under an overlapping collective",
                   up ? "+0.05" : "-0.05",
                   {calibration_set("overlap_slowdown", number_text(c.sm_slowdown + (up ? 0.05 : -0.05)))}});
  }
  const bool slower = s.calibration.clock_derate * 0.99 >= 0.1;
  out.push_back(
      {"GPU clock under load",
       slower ? "-1%" : "+1%",
       {calibration_set("clock_derate", number_text(s.calibration.clock_derate * (slower ? 0.99 : 1.01)))}});
  return out;
}

Sensitivity run_sensitivity(const Scenario& base, const std::string& text,
                            const std::vector<Override>& overrides, unsigned jobs,
                            SensitivityProgress* progress) {
  require_single_job(base, "sensitivity");
  // Every step's scenario is loaded and checked before any is simulated.
  const std::vector<SensitivityStep> steps = sensitivity_steps(base);
  std::vector<Scenario> scenarios{base};
  for (const SensitivityStep& step : steps) {
    std::vector<Override> o = overrides;
    o.insert(o.end(), step.sets.begin(), step.sets.end());
    scenarios.push_back(parse_scenario(text, base.file, o));
  }
  for (const Scenario& sc : scenarios) check_work(sc);

  const BackendRegistry backends = built_in_backends();
  if (!backends.at(base.backend.name).concurrent_runs()) jobs = 1;
  if (progress != nullptr) progress->started(scenarios.size());
  std::vector<Time> times(scenarios.size());
  std::vector<std::exception_ptr> errors(scenarios.size());
  for_each_index(scenarios.size(), jobs, [&](std::size_t k) {
    try {
      times[k] = simulate_scenario(scenarios[k], nullptr, nullptr, /*split=*/false, backends).result.makespan;
      if (progress != nullptr) progress->finished_one();
    } catch (...) {
      errors[k] = std::current_exception();
    }
  });
  // The first failing run in the steps' order, whatever finished first.
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }

  Sensitivity r;
  r.iteration = times.front();
  r.overrides = overrides;
  for (std::size_t i = 0; i < steps.size(); ++i) r.rows.push_back({steps[i], times[i + 1]});
  const auto magnitude = [&](const SensitivityRow& row) { return std::llabs(row.change(r.iteration).ps()); };
  std::stable_sort(r.rows.begin(), r.rows.end(), [&](const SensitivityRow& a, const SensitivityRow& b) {
    return magnitude(a) > magnitude(b);
  });
  return r;
}

namespace {

/// The overrides of a row's run: the command's own (the last of a key, as
/// applied), then the step's, a step's key replacing the command's. As
/// flags, `tessera run SCENARIO` with them reproduces the row (helper 103:
/// the command's own --set flags were left out, and a row's flags gave
/// another forecast).
std::vector<Override> row_overrides(const std::vector<Override>& own, const SensitivityStep& step) {
  std::vector<Override> all;
  const auto same_key = [](const Override& a, const Override& b) { return a.path == b.path; };
  for (const Override& o : own) {
    const auto by_step = [&](const Override& t) { return same_key(t, o); };
    if (std::any_of(step.sets.begin(), step.sets.end(), by_step)) continue;
    const auto earlier = std::find_if(all.begin(), all.end(), by_step);
    if (earlier != all.end()) all.erase(earlier);
    all.push_back(o);
  }
  all.insert(all.end(), step.sets.begin(), step.sets.end());
  return all;
}

/// A row's keys as one JSON object's members; --backend and --predictor are
/// the report's `backend` and `predictor`.
std::string sets_json(const std::vector<Override>& own, const SensitivityStep& step) {
  std::string out;
  for (const Override& o : row_overrides(own, step)) {
    if (o.flag == "--backend" || o.flag == "--predictor") continue;
    out += fmt::format("{}{}: {}", out.empty() ? "" : ", ", json_string(o.path), json_string(o.value));
  }
  return out;
}

/// `part` as a share of the iteration, as every report computes it.
double share(Time part, Time iteration) {
  IterationBreakdown b{};
  b.iteration = iteration;
  return b.share(part);
}

}  // namespace

std::string format_sensitivity_text(const Scenario& s, const Sensitivity& r) {
  std::string out;
  out += fmt::format("Scenario       {}: {} on {} x {}{}, {} node model, {} network backend\n", s.name,
                     s.model.name, s.gpus(), s.gpu.name, mixed_gpus_phrase(s), s.predictor,
                     to_string(s.backend));
  out += caveat_lines(s);
  out += stragglers_line(s);  // (helper 127: a forecast with slower GPUs said nothing of them here)
  out += fmt::format("Iteration      {:.3f} ms with the scenario's calibration (docs/calibration.md)\n\n",
                     r.iteration.ms());
  out +=
      "What each calibration constant is worth in this forecast: the iteration with that one constant\n"
      "moved by one step from the value the scenario uses, the others unchanged, largest change first.\n"
      "`tessera run` on the scenario file with a row's flags reproduces it.\n\n";
  out += fmt::format("{:<50} {:>7} {:>13} {:>12} {:>8}   {}\n", "constant", "step", "iteration", "change", "",
                     "flags");
  for (const SensitivityRow& row : r.rows) {
    const Time d = row.change(r.iteration);
    // A change that rounds to zero is shown as +0 (helper 148: "-0.00%").
    const auto shown = [](double v, double unit) { return std::abs(v) < unit / 2 ? 0.0 : v; };
    out += fmt::format("{:<50} {:>7} {:>10.3f} ms {:>+9.3f} ms {:>+7.2f}%   {}\n", row.step.constant,
                       row.step.step, row.iteration.ms(), shown(d.ms(), 1e-3),
                       shown(100.0 * share(d, r.iteration), 1e-2),
                       override_flags(row_overrides(r.overrides, row.step)));
  }
  if (r.rows.empty()) out += "(no calibration constant applies to this scenario)\n";
  out +=
      "\ncalibration.host_iteration is not run: it adds itself to the iteration (host work after the last "
      "sync).\n";
  return out;
}

std::string format_sensitivity_json(const Scenario& s, const Sensitivity& r) {
  std::string out = fmt::format(
      "{{\"scenario\": {}, \"model\": {}, \"gpu\": {}, \"gpus\": {}, \"backend\": {}, \"predictor\": {}, {}{}"
      "\"iteration_time_s\": {:.9e}, \"steps\": [",
      json_string(s.name), json_string(s.model.name), json_string(s.gpu.name), s.gpus(),
      json_string(std::string(to_string(s.backend))), json_string(s.predictor), scenario_warnings_json(s),
      caveat_json(s), r.iteration.seconds());
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    const SensitivityRow& row = r.rows[i];
    const std::string sets = sets_json(r.overrides, row.step);
    const Time d = row.change(r.iteration);
    out += fmt::format(
        "{}{{\"constant\": {}, \"step\": {}, \"set\": {{{}}}, \"iteration_time_s\": {:.9e}, "
        "\"change_s\": {:.9e}, \"change\": {:.6f}}}",
        i == 0 ? "" : ", ", json_string(row.step.constant), json_string(row.step.step), sets,
        row.iteration.seconds(), d.seconds(), share(d, r.iteration));
  }
  out += "]}\n";
  return out;
}

namespace {

/// The progress bar or log line of the runs (progress.hpp).
class ProgressAdapter : public SensitivityProgress {
 public:
  explicit ProgressAdapter(bool tty) : tty_(tty) {}
  void started(std::size_t runs) override {
    bar_ = std::make_unique<CountProgress>("sensitivity", "runs", runs, 0, std::cerr, tty_);
  }
  void finished_one() override { bar_->advance(); }
  void finish() {
    if (bar_) bar_->finish();
  }

 private:
  bool tty_;
  std::unique_ptr<CountProgress> bar_;
};

}  // namespace

int cmd_sensitivity(const Args& args, std::ostream& out) {
  ArgParser p("tessera sensitivity");
  p.option("jobs").flag("json");
  declare_scenario_options(p);
  std::vector<std::string> sets;
  p.parse(take_set_options(args, sets));
  p.expect_positional(1, "a scenario file");
  unsigned jobs = std::max(1U, std::thread::hardware_concurrency());
  if (auto j = p.get("jobs")) jobs = static_cast<unsigned>(parse_positive_int(*j, "--jobs", 4096));
  const std::string path = p.positional()[0];
  const std::vector<Override> overrides = scenario_overrides(sets, p);
  const std::string text = read_scenario_text(path);
  const Scenario s = parse_scenario(text, path, overrides);
  require_single_job(s, "sensitivity");
  print_scenario_warnings(s);
  say_on_interrupt("nothing was written");
  ProgressAdapter progress(::isatty(STDERR_FILENO) != 0);
  const Sensitivity r = run_sensitivity(s, text, overrides, jobs, &progress);
  progress.finish();
  out << (p.has("json") ? format_sensitivity_json(s, r) : format_sensitivity_text(s, r));
  return 0;
}

}  // namespace tessera::cli
