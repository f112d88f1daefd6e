// The summary of a scenario with several jobs (study::simulate_jobs).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <iostream>

#include "tessera/cli/report.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/study/jobs.hpp"

namespace tessera::cli {

namespace {

std::string node_list(const std::vector<int>& nodes) {
  // Ranges: 0-3,8,10-11
  std::string out;
  for (std::size_t i = 0; i < nodes.size();) {
    std::size_t k = i;
    while (k + 1 < nodes.size() && nodes[k + 1] == nodes[k] + 1) ++k;
    out += fmt::format("{}{}", out.empty() ? "" : ",", nodes[i]);
    if (k > i) out += fmt::format("-{}", nodes[k]);
    i = k + 1;
  }
  return out;
}

/// tessera run's Untested GPU, Known bias and Untested scale notes for each
/// job (the jobs' order), empty where a job has none.
struct JobNotes {
  std::vector<std::vector<std::string>> untested_gpu;
  std::vector<std::vector<std::string>> known_bias;
  std::vector<std::string> untested_scale;  ///< multi_node_note of the job on its nodes
};

JobNotes job_notes(const Scenario& s) {
  JobNotes n;
  for (const Job& j : s.jobs) {
    n.untested_gpu.push_back(untested_gpu_notes(j.scenario));
    n.known_bias.push_back(known_bias_notes(j.scenario));
    n.untested_scale.push_back(multi_node_note(j.scenario));
  }
  return n;
}

/// Summary lines under `label` (labelled_lines) for the notes held by the
/// jobs (`notes[i]`: job i's): each distinct note once, unnamed when every
/// job holds it (unless `always_named`), else after the names of the jobs
/// that do.
std::string note_lines(std::string_view label, const std::vector<std::vector<std::string>>& notes,
                       const Scenario& s, bool always_named = false) {
  HeldNotes held;
  for (std::size_t i = 0; i < notes.size(); ++i) {
    for (const std::string& n : notes[i]) held.add(n, s.jobs[i].name);
  }
  std::vector<std::string> lines;
  for (const auto& [note, jobs] : held.entries) {
    lines.push_back(jobs.size() == notes.size() && !always_named
                        ? note
                        : fmt::format("{}: {}", fmt::join(jobs, ", "), note));
  }
  return labelled_lines(label, lines);
}

}  // namespace

std::string format_jobs_text(const Scenario& s, const JobsOutcome& o) {
  const std::string placement =
      s.placement == "random" ? fmt::format("random placement, seed {}", s.placement_seed) : s.placement + " placement";
  std::string out =
      fmt::format("Scenario       {}: {} jobs on {} x {} ({}, {})\n", s.name, o.jobs.size(), s.gpus(),
                  s.gpu.name, fabric_phrase(fabric_name(s)) + fabric_detail(s), placement);
  out += fmt::format("Models         {} node model, {} network backend\n", s.predictor, to_string(s.backend));
  const JobNotes notes = job_notes(s);
  out += note_lines("Untested GPU", notes.untested_gpu, s);
  out += note_lines("Known bias", notes.known_bias, s);
  std::vector<std::vector<std::string>> scale;
  for (const std::string& n : notes.untested_scale)
    scale.push_back(n.empty() ? std::vector<std::string>{} : std::vector<std::string>{n});
  // Named always: "2 nodes" is each job's, not the cluster's.
  out += note_lines("Untested scale", scale, s, true);
  out += failures_line(s.failures, o.makespan);
  // tessera run's Stragglers line, per job that has any.
  std::vector<std::string> slow;
  for (const auto& j : o.jobs) {
    if (!j.scales.any()) continue;
    slow.push_back(fmt::format("{}: {}", j.name, compute_scales_phrase(j.scales, j.gpus)));
  }
  if (!slow.empty()) out += fmt::format("Stragglers     {}\n", fmt::join(slow, "; "));
  // Each job's fullest pipeline stage against its GPU (tessera run's memory table, one line).
  std::vector<std::string> memory;
  for (const auto& j : o.jobs) {
    memory.push_back(fmt::format("{}: {:.1f} of {:.1f} GiB (stage {}){}", j.name, j.peak_memory.in_gib(),
                                 j.memory_capacity.in_gib(), j.fullest_stage,
                                 j.oom() ? " ** OUT OF MEMORY **" : ""));
  }
  if (!memory.empty()) out += fmt::format("Memory         {}\n", fmt::join(memory, "; "));
  out += fmt::format("{:<16} {:>5}  {:<14} {:>14} {:>14} {:>9} {:>12}\n", "job", "GPUs", "nodes", "alone (ms)",
                     "shared (ms)", "slowdown", "tokens/s");
  for (const auto& j : o.jobs) {
    out += fmt::format("{:<16} {:>5}  {:<14} {:>14.3f} {:>14.3f} {:>8.2f}% {:>12.0f}\n", j.name, j.gpus,
                       node_list(j.nodes), j.alone.seconds() * 1e3, j.shared.seconds() * 1e3, 100.0 * j.slowdown(),
                       j.tokens_per_s);
  }
  // tessera run's split of each job's iteration (study::breakdown): with
  // the same plan alone and shared, only the exposed communication differs.
  out +=
      "Split          each job's iteration as tessera run splits it; sharing the fabric adds only to the "
      "exposed communication\n";
  out += fmt::format("{:<16} {:>12} {:>12} {:>12}   {}\n", "job", "compute (ms)", "host (ms)", "bubble (ms)",
                     "exposed comm (ms): alone -> shared");
  for (const auto& j : o.jobs) {
    const IterationBreakdown alone = j.alone_breakdown();
    const IterationBreakdown shared = j.shared_breakdown();
    const std::array<int, 4> tenths = shared.tenths_of_percent();
    out += fmt::format(
        "{:<16} {:>12.3f} {:>12.3f} {:>12.3f}   {:.3f} -> {:.3f} ({:.1f}% of the shared iteration)\n", j.name,
        shared.compute.ms(), shared.host.ms(), shared.bubble.ms(), alone.exposed_comm.ms(),
        shared.exposed_comm.ms(), tenths[3] / 10.0);
  }
  // One iteration each, started together: jobs of different lengths would
  // drift in and out of phase over many (docs/scenarios.md, "Several jobs").
  if (!o.jobs.empty()) {
    const auto [shortest, longest] =
        std::minmax_element(o.jobs.begin(), o.jobs.end(),
                            [](const JobOutcome& a, const JobOutcome& b) { return a.alone < b.alone; });
    if (shortest->alone != longest->alone) {
      out += fmt::format(
          "Phase          the jobs' iterations differ ({:.3f} to {:.3f} ms alone): the shared times are one "
          "iteration each, started together; over many iterations the jobs drift in and out of phase "
          "and meet more or less often\n",
          shortest->alone.seconds() * 1e3, longest->alone.seconds() * 1e3);
    }
  }
  // The shared run's packet fabric, as tessera run prints it for one job.
  if (o.packet_fabric) out += format_packet_fabric(*o.packet_fabric);
  if (!o.per_job_links) {
    out += "Links by job   not available: the ns-3 point-to-point model does not attribute link traffic to jobs "
           "(use ns3 model infiniband or backend flow)\n";
    return out;
  }
  out += fmt::format("Busiest links by job (utilization: its payload over the link's capacity during its shared "
                     "iteration; share: of the link's payload)\n");
  out += fmt::format("{:<16} {:<24} {:<10} {:>12} {:>7} {:>12}\n", "job", "link", "tier", "payload (GB)", "share",
                     "utilization");
  for (const auto& j : o.jobs) {
    if (j.busiest_links.empty()) {
      out += fmt::format("{:<16} (no link traffic)\n", j.name);
      continue;
    }
    bool first = true;
    for (const auto& l : j.busiest_links) {
      out += fmt::format("{:<16} {:<24} {:<10} {:>12.3f} {:>6.1f}% {:>11.1f}%\n", first ? j.name : "",
                         l.src + " -> " + l.dst, l.tier, l.bytes * 1e-9, 100.0 * l.share, 100.0 * l.utilization);
      first = false;
    }
  }
  return out;
}

void print_scenario_warnings(const Scenario& s) {
  // At the key a warning opens with, as errors are placed (file:line:col).
  for (const std::string& w : scenario_warnings(s)) {
    const auto at = s.warning_locations.find(w);
    std::cerr << fmt::format("tessera: warning: {}: {}\n",
                             at == s.warning_locations.end() ? s.file : at->second, w);
  }
}

std::string mixed_gpus_json(const std::string& gpu, const std::vector<int>& nodes,
                            const std::string& peak_gpu) {
  return fmt::format("\"mixed_gpus\": {{\"gpu\": {}, \"nodes\": [{}], \"mfu_peak_gpu\": {}}}, ",
                     json_string(gpu), fmt::join(nodes, ", "), json_string(peak_gpu));
}

std::string mixed_gpus_json(const Scenario& s) {
  return s.mixed_gpus ? mixed_gpus_json(s.mixed_gpus->gpu.name, s.mixed_gpus->nodes, s.gpu.name)
                      : std::string();
}

std::string scenario_warnings_json(const Scenario& s) {
  const std::vector<std::string> w = scenario_warnings(s);
  return w.empty() ? std::string() : fmt::format("\"warnings\": {}, ", json_string_array(w));
}

std::vector<std::string> scenario_warnings(const Scenario& s) {
  std::vector<std::string> out = s.warnings;
  for (const Job& job : s.jobs) {
    for (const std::string& w : job.scenario.warnings) out.push_back(fmt::format("jobs {}: {}", job.name, w));
  }
  return out;
}

std::vector<std::string> jobs_outcome_warnings(const Scenario& s, const JobsOutcome& o) {
  return late_failure_warnings(s.failures, o.makespan);
}

std::string format_jobs_json(const Scenario& s, const JobsOutcome& o) {
  const std::string seed = s.placement == "random" ? fmt::format(R"(, "placement_seed": {})", s.placement_seed) : "";
  std::string out = fmt::format(
      R"({{"scenario": {}, "gpus": {}, "gpu": {}, "fabric": {}, "fabric_tiers": {}, )"
      R"("leaf_oversubscription": {:.6f}, "spine_oversubscription": {:.6f}, "nodes_per_leaf": {:.6f}, )"
      R"("placement": "{}"{}, "backend": "{}", "jobs": [)",
      json_string(s.name), s.gpus(), json_string(s.gpu.name), json_string(std::string(fabric_name(s))),
      fabric_tiers(s), study::leaf_oversubscription(s), study::spine_oversubscription(s),
      study::nodes_per_leaf(s), s.placement, seed, to_string(s.backend));
  const JobNotes notes = job_notes(s);
  for (std::size_t i = 0; i < o.jobs.size(); ++i) {
    const auto& j = o.jobs[i];
    const IterationBreakdown shared = j.shared_breakdown();
    // As in tessera run --json: each only when the job has one.
    const std::string extra =
        i < notes.untested_gpu.size()
            ? caveat_json(notes.untested_gpu[i], notes.known_bias[i], false, notes.untested_scale[i])
            : "";
    std::string nodes;
    for (int n : j.nodes) nodes += fmt::format("{}{}", nodes.empty() ? "" : ", ", n);
    std::string links = "null";  // ns-3 point-to-point: not available
    if (o.per_job_links) {
      links = "[";
      for (std::size_t k = 0; k < j.busiest_links.size(); ++k) {
        const auto& l = j.busiest_links[k];
        links += fmt::format(
            R"({}{{"link": {}, "src": {}, "dst": {}, "tier": "{}", "payload_bytes": {:.0f}, "share": {:.6f}, "utilization": {:.6f}}})",
            k == 0 ? "" : ", ", l.link, json_string(l.src), json_string(l.dst), l.tier, l.bytes, l.share,
            l.utilization);
      }
      links += "]";
    }
    out += fmt::format(
        R"({}{{"name": {}, "gpus": {}, "nodes": [{}], {}"alone_iteration_time_s": {:.9e}, "iteration_time_s": {:.9e}, "slowdown": {:.6f}, "compute_time_s": {:.9e}, "host_time_s": {:.9e}, "bubble_time_s": {:.9e}, "alone_exposed_comm_time_s": {:.9e}, "exposed_comm_time_s": {:.9e}, "tokens_per_s": {:.3f}, "peak_memory_bytes": {}, "memory_capacity_bytes": {}, "oom": {}, "busiest_links": {}{}}})",
        i == 0 ? "" : ", ", json_string(j.name), j.gpus, nodes,
        // As tessera run --json: only for a job with stragglers.
        compute_scales_json(j.scales), j.alone.seconds(), j.shared.seconds(), j.slowdown(),
        shared.compute.seconds(), shared.host.seconds(), shared.bubble.seconds(),
        j.alone_breakdown().exposed_comm.seconds(), shared.exposed_comm.seconds(), j.tokens_per_s,
        j.peak_memory.count(), j.memory_capacity.count(), j.oom(), links, extra);
  }
  out += fmt::format(R"(], "iteration_time_s": {:.9e})", o.makespan.seconds());
  if (o.packet_fabric) out += json_packet_fabric(*o.packet_fabric);
  if (std::string f = failures_json(s.failures); !f.empty()) out += ", " + f.substr(0, f.size() - 2);
  // The warnings stderr gives, only when there are any.
  std::string warnings;
  std::vector<std::string> all = scenario_warnings(s);
  for (std::string& w : jobs_outcome_warnings(s, o)) all.push_back(std::move(w));
  for (const std::string& w : all) warnings += (warnings.empty() ? "" : ", ") + json_string(w);
  if (!warnings.empty()) out += ", \"warnings\": [" + warnings + "]";
  out += "}";
  out += "\n";
  return out;
}

}  // namespace tessera::cli
