// `tessera collectives`: the collectives of a scenario's iteration and what
// each costs on its fabric (docs/cli.md, "Collectives").
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <ostream>
#include <string>

#include "tessera/cli/commands.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/files.hpp"
#include "tessera/node_model/csv.hpp"
#include "tessera/study/collective_table.hpp"

namespace tessera::cli {

namespace {

std::string table_csv(const study::CollectiveTable& t) {
  std::string out =
      "role,kind,bytes,group_size,nodes,algorithm,calls,stage,concurrent_groups,"
      "alone_us,alone_busbw_gb_per_s,together_us,together_busbw_gb_per_s,stages\n";
  // `stage`: the row's first stage (the column before helper 155 merged
  // stages); `stages`: all of them as the text shows them, quoted where a
  // comma separates ranges ("0,15").
  for (const auto& r : t.rows) {
    out += fmt::format(
        "{},{},{},{},{},{},{},{},{},{:.3f},{:.2f},{:.3f},{:.2f},{}\n", r.role, parallelism::to_string(r.kind),
        r.bytes.count(), r.group_size, r.nodes, collectives::to_string(r.algorithm), r.calls, r.stage,
        r.concurrent_groups, r.alone.us(), study::bus_bandwidth(r, r.alone) * 1e-9, r.together.us(),
        study::bus_bandwidth(r, r.together) * 1e-9, node_model::csv_escape(study::stage_ranges(r.stages)));
  }
  return out;
}

/// `collectives --json`: the table and each stage's sums as one object,
/// times in seconds, bandwidths in bytes per second.
std::string table_json(const study::CollectiveTable& t, const study::Scenario& s) {
  std::string rows;
  for (const auto& r : t.rows) {
    rows += fmt::format(
        "{}{{\"role\": {}, \"kind\": \"{}\", \"bytes\": {}, \"group_size\": {}, \"nodes\": {}, "
        "\"algorithm\": \"{}\", \"calls\": {}, \"stage\": {}, \"stages\": [{}], \"concurrent_groups\": {}, "
        "\"alone_s\": {:.9e}, \"alone_busbw_bytes_per_s\": {:.6e}, "
        "\"together_s\": {:.9e}, \"together_busbw_bytes_per_s\": {:.6e}}}",
        rows.empty() ? "" : ", ", json_string(r.role), parallelism::to_string(r.kind), r.bytes.count(),
        r.group_size, r.nodes, collectives::to_string(r.algorithm), r.calls, r.stage,
        fmt::join(r.stages, ", "), r.concurrent_groups, r.alone.seconds(), study::bus_bandwidth(r, r.alone),
        r.together.seconds(), study::bus_bandwidth(r, r.together));
  }
  std::string stages;
  for (std::size_t i = 0; i < t.nvlink_per_stage.size(); ++i) {
    stages += fmt::format(
        "{}{{\"stage\": {}, \"inside_nodes_s\": {:.9e}, \"across_nodes_s\": {:.9e}, "
        "\"inside_nodes_together_s\": {:.9e}, \"across_nodes_together_s\": {:.9e}}}",
        stages.empty() ? "" : ", ", i, t.nvlink_per_stage[i].seconds(), t.network_per_stage[i].seconds(),
        t.nvlink_together_per_stage[i].seconds(), t.network_together_per_stage[i].seconds());
  }
  return fmt::format(
      "{{\"scenario\": {}, \"gpu\": {}, \"nodes\": {}, \"gpus_per_node\": {}, \"backend\": {}, "
      "\"dp\": {}, \"tp\": {}, \"pp\": {}, \"ep\": {}, \"zero_stage\": {}, {}"
      "\"collectives\": [{}], \"per_stage\": [{}]}}\n",
      json_string(s.name), json_string(s.gpu.name), s.cluster.nodes, s.cluster.gpus_per_node,
      json_string(s.backend.name), s.plan.dp, s.plan.tp, s.plan.pp, s.plan.ep, s.plan.zero_stage,
      scenario_warnings_json(s), rows, stages);
}

}  // namespace

int cmd_collectives(const Args& args, std::ostream& out) {
  const TableCommand c = parse_table_command(args, "collectives");
  const study::Scenario& s = c.scenario;
  const auto& csv_path = c.out;
  const study::CollectiveTable t = study::collective_table(s);
  if (c.json) {
    if (csv_path) write_file_atomic(*csv_path, table_csv(t));
    out << table_json(t, s);
    return 0;
  }

  out << fmt::format("Scenario       {}: {} x {} GPUs ({}), {} network backend\n", s.name, s.cluster.nodes,
                     s.cluster.gpus_per_node, s.gpu.name, s.backend.name);
  out << fmt::format("Plan           dp={} tp={} pp={}{}{}{}\n", s.plan.dp, s.plan.tp, s.plan.pp,
                     s.plan.ep > 1 ? fmt::format(" ep={}", s.plan.ep) : "",
                     layer_split_phrase(s.plan.first_stage_layers, s.plan.last_stage_layers,
                                        s.plan.account_for_embedding, s.plan.account_for_loss),
                     s.plan.zero_stage > 0 ? fmt::format(", ZeRO stage {}", s.plan.zero_stage) : "");
  out << "Each stage's distinct collectives of one iteration, timed on the scenario's fabric with the\n"
         "calibrated NCCL costs (calibration.*): alone (one group), and with all the groups of its\n"
         "pipeline stage at once (`groups`, contending for the fabric). calls: per iteration on one\n"
         "rank of each of its row's stages (a collective several stages run is under each, in one\n"
         "row for the stages where its calls and times are the same; a send/recv pair between two\n"
         "stages is under both, as each side's role). busbw: bus bandwidth in GB/s, as nccl-tests\n"
         "reports it.\n\n";
  // The stage column as wide as its longest list of ranges ("1-2,4-14").
  std::size_t stage_width = 5;
  for (const auto& r : t.rows) stage_width = std::max(stage_width, study::stage_ranges(r.stages).size());
  out << fmt::format("{:<40} {:<15} {:>11} {:>5} {:>5} {:<17} {:>6} {:>{}} {:>11} {:>8} {:>6} {:>11} {:>8}\n",
                     "role", "kind", "size", "group", "nodes", "algorithm", "calls", "stage", stage_width,
                     "alone_us", "busbw", "groups", "together_us", "busbw");
  for (const auto& r : t.rows) {
    out << fmt::format(
        "{:<40} {:<15} {:>11} {:>5} {:>5} {:<17} {:>6} {:>{}} {:>11.1f} {:>8.1f} {:>6} {:>11.1f} {:>8.1f}\n",
        r.role, parallelism::to_string(r.kind), size_text(r.bytes), r.group_size, r.nodes,
        collectives::to_string(r.algorithm), r.calls, study::stage_ranges(r.stages), stage_width,
        r.alone.us(), study::bus_bandwidth(r, r.alone) * 1e-9, r.concurrent_groups, r.together.us(),
        study::bus_bandwidth(r, r.together) * 1e-9);
  }
  // The stage whose collectives take longest one after another.
  std::size_t busiest = 0;
  for (std::size_t i = 0; i < t.nvlink_per_stage.size(); ++i) {
    const Time a = t.nvlink_per_stage[i] + t.network_per_stage[i];
    if (a > t.nvlink_per_stage[busiest] + t.network_per_stage[busiest]) busiest = i;
  }
  if (!t.nvlink_per_stage.empty()) {
    out << fmt::format(
        "\nOne rank of stage {}, every collective one after another (its stage's rows, calls x time): alone "
        "{:.3f} ms in groups inside a node, "
        "{:.3f} ms in groups across nodes; with its stage's groups at once {:.3f} ms and {:.3f} ms "
        "(tessera run reports what the iteration exposes of them)\n",
        busiest, t.nvlink_per_stage[busiest].ms(), t.network_per_stage[busiest].ms(),
        t.nvlink_together_per_stage[busiest].ms(), t.network_together_per_stage[busiest].ms());
  }
  // Rows, not collectives: one per stage's distinct collective, stages
  // alike sharing one (helper 161: "distinct collectives" counted rows).
  out << fmt::format("{} row{} (each stage's distinct collectives; stages that call one alike share its row)",
                     t.rows.size(), t.rows.size() == 1 ? "" : "s");
  if (csv_path) {
    write_file_atomic(*csv_path, table_csv(t));
    out << fmt::format(", written to {}", *csv_path);
  }
  out << '\n';
  return 0;
}

}  // namespace tessera::cli
