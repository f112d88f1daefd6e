// `tessera kernels`: the kernels a scenario's model runs on one rank and what
// the node model says each costs (docs/cli.md, "Kernels").
#include <fmt/format.h>

#include <algorithm>
#include <ostream>
#include <string>
#include <vector>

#include "tessera/cli/commands.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/files.hpp"
#include "tessera/node_model/gpu_spec.hpp"
#include "tessera/node_model/kernel.hpp"
#include "tessera/node_model/workload.hpp"
#include "tessera/study/kernels.hpp"

namespace tessera::cli {

namespace {
double rate(double amount, Time t) { return t > Time::zero() ? amount / t.seconds() : 0.0; }

std::string dims(const node_model::Kernel& k) {
  if (node_model::is_gemm(k.op)) return fmt::format("{} x {} x {} x {}", k.b, k.m, k.n, k.k);
  return fmt::format("{} x {}", k.b, k.h);
}

/// The text's kernel column: what the execution does where its class does
/// not say (Transformer Engine's FP8 casts and transposes, timed as MulU
/// memory passes), else the node model's class; "+" before a further part
/// of a launch.
std::string kernel_label(const study::KernelTable& t, const study::KernelUse& u) {
  const std::string_view what = u.role != node_model::KernelRole::None
                                    ? node_model::to_string(u.role)
                                    : node_model::to_string(t.rows[u.row].kernel.op);
  return fmt::format("{}{}", u.fused_part ? "+" : "", what);
}

/// The table as a CSV in the schema node_model.overrides reads (op, b, m, n,
/// k, h, dtype, time_us and, for a kernel that runs as a further part of a
/// fused kernel, part_time_us), one row per distinct kernel, with its rates
/// (launched) and uses (each execution: part:operator.pass, "+" after a
/// part, the role in parentheses after an FP8 cast or transpose, which the
/// row's op, mulu, does not name) as extra columns (ignored by the
/// overrides reader).
std::string table_csv(const study::KernelTable& t) {
  std::vector<std::string> uses(t.rows.size());
  std::vector<bool> part(t.rows.size(), false);
  for (const auto& u : t.uses) {
    uses[u.row] += fmt::format("{}{}:{}.{}{}{}", uses[u.row].empty() ? "" : " ", u.part, u.op,
                               study::to_string(u.pass), u.fused_part ? "+" : "",
                               u.role == node_model::KernelRole::None
                                   ? std::string()
                                   : fmt::format("({})", node_model::to_string(u.role)));
    if (u.fused_part) part[u.row] = true;
  }
  std::string out = "op,b,m,n,k,h,dtype,time_us,part_time_us,tflops,gb_per_s,uses\n";
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    const auto& r = t.rows[i];
    const auto& k = r.kernel;
    const bool gemm = node_model::is_gemm(k.op);
    out += fmt::format(
        "{},{},{},{},{},{},{},{:.6f},{},{:.2f},{:.1f},{}\n", node_model::to_string(k.op), k.b, gemm ? k.m : 0,
        gemm ? k.n : 0, gemm ? k.k : 0, gemm ? 0 : k.h, node_model::to_string(k.dtype), r.time.us(),
        part[i] ? fmt::format("{:.6f}", r.part_time.us()) : std::string(),
        rate(k.flops().count(), r.time) * 1e-12, rate(k.bytes().as_double(), r.time) * 1e-9, uses[i]);
  }
  return out;
}

/// The scenario as the kernels listed see it: its own GPU's alone (with
/// mixed_gpus the other GPU's kernels are not listed, nor its caveats), on
/// one node (kernel times cross no network: no Untested scale line).
study::Scenario listed_gpu(const study::Scenario& s) {
  study::Scenario one = s;
  one.mixed_gpus.reset();
  one.cluster.nodes = 1;
  return one;
}

/// `kernels --json`: what the text says, as one object: the workload, each
/// execution of the table (its kernel, dims, time and rates) and the
/// per-part sums, times in seconds.
std::string table_json(const study::KernelTable& t, const study::Scenario& s) {
  std::string kernels;
  for (const auto& u : t.uses) {
    const study::KernelTableRow& r = t.rows[u.row];
    const auto& k = r.kernel;
    const bool gemm = node_model::is_gemm(k.op);
    const Time time = t.time_of(u);
    kernels += fmt::format(
        "{}{{\"part\": {}, \"op\": {}, \"pass\": \"{}\", \"kernel\": \"{}\", \"role\": {}, "
        "\"dtype\": \"{}\", \"b\": {}, \"m\": {}, \"n\": {}, \"k\": {}, \"h\": {}, \"time_s\": {:.9e}, "
        "\"tflops\": {:.6f}, \"gb_per_s\": {:.3f}, \"part_of_launch\": {}, \"distinct_kernel\": {}}}",
        kernels.empty() ? "" : ", ", json_string(u.part), json_string(u.op), study::to_string(u.pass),
        node_model::to_string(k.op),
        // What the text's kernel column says in place of the class (an FP8
        // cast or transpose, its `kernel` the class that times it), or null.
        u.role == node_model::KernelRole::None ? std::string("null")
                                               : fmt::format("\"{}\"", node_model::to_string(u.role)),
        node_model::to_string(k.dtype), k.b, gemm ? k.m : 0, gemm ? k.n : 0, gemm ? k.k : 0, gemm ? 0 : k.h,
        time.seconds(), rate(k.flops().count(), time) * 1e-12, rate(k.bytes().as_double(), time) * 1e-9,
        u.fused_part ? "true" : "false", u.row);
  }
  std::string parts;
  for (const study::PartTotals& p : study::part_totals(t, s)) {
    parts += fmt::format(
        "{}{{\"part\": {}, \"count\": {}, \"forward_s\": {:.9e}, \"input_grad_s\": {:.9e}, "
        "\"weight_grad_s\": {:.9e}, \"total_s\": {:.9e}, \"gemm_s\": {:.9e}, "
        "\"kernels\": {}, \"gemms\": {}, \"weight_cast_s\": {:.9e}}}",
        parts.empty() ? "" : ", ", json_string(p.part), p.instances, p.pass[0].seconds(), p.pass[1].seconds(),
        p.pass[2].seconds(), p.total().seconds(), p.gemm.seconds(), p.kernels, p.gemm_kernels,
        p.weight_cast.seconds());
  }
  return fmt::format(
      "{{\"scenario\": {}, \"model\": {}, \"gpu\": {}, \"predictor\": {}, {}\"framework\": \"{}\", "
      "\"dtype\": \"{}\", \"micro_batch\": {}, \"seq_len\": {}, \"tp\": {}, \"ep\": {}, "
      "\"sequence_parallel\": {}, \"device_time\": {}, \"kernels\": [{}], \"parts\": [{}], "
      "\"distinct_kernels\": {}}}\n",
      json_string(s.name), json_string(s.model.name), json_string(s.gpu.name), json_string(s.predictor),
      // With mixed_gpus the other GPU's kernels are not listed (the text
      // says so): "mixed_gpus" names it.
      mixed_gpus_json(s) + scenario_warnings_json(s) + caveat_json(listed_gpu(s), false),
      node_model::to_string(s.workload.framework),
      s.workload.profile.fp8 ? std::string("fp8") : std::string(node_model::to_string(s.workload.dtype)),
      s.workload.micro_batch, s.workload.seq_len, s.plan.tp, s.plan.ep, s.plan.sequence_parallel,
      t.device_time, kernels, parts, t.rows.size());
}
}  // namespace

int cmd_kernels(const Args& args, std::ostream& out) {
  const TableCommand c = parse_table_command(args, "kernels");
  const study::Scenario& s = c.scenario;
  const auto& csv_path = c.out;
  const study::KernelTable t = study::kernel_table(s);
  if (c.json) {
    if (csv_path) write_file_atomic(*csv_path, table_csv(t));
    out << table_json(t, s);
    return 0;
  }

  out << fmt::format("Scenario       {}: {} on {}, {} node model\n", s.name, s.model.name, s.gpu.name,
                     s.predictor);
  // The kernels' times are what an Untested GPU line and a GPU's Known bias
  // are about; a plan's Known bias is in joining its ranks, not in these
  // kernels.
  out << caveat_lines(listed_gpu(s), false, false);  // (no MFU here)
  // fp8 runs keep bf16 outside their layer GEMMs (docs/parallelism.md).
  out << fmt::format("Workload       {} {}{}, micro-batch {}, sequence {}, tp={}{}{}\n",
                     node_model::to_string(s.workload.framework), node_model::to_string(s.workload.dtype),
                     s.workload.profile.fp8 ? " with fp8 layer GEMMs" : "", s.workload.micro_batch,
                     s.workload.seq_len, s.plan.tp, s.plan.ep > 1 ? fmt::format(" ep={}", s.plan.ep) : "",
                     s.plan.sequence_parallel ? ", sequence parallel" : "");
  out << (t.device_time
              ? "Times          GPU time of each kernel queued back to back (the host's launch costs are "
                "the host model's, calibration.host_*)\n"
              : "Times          each kernel timed alone from the host, its launch floor included "
                "(pytorch-eager)\n");
  if (s.mixed_gpus && s.mixed_gpus->gpu.name != s.gpu.name) {
    const auto n = s.mixed_gpus->nodes.size();
    out << fmt::format(
        "Mixed GPUs     the {} {} of {} (mixed_gpus) time their kernels on it: not listed here; "
        "--set cluster.gpu={} lists them\n",
        n, n == 1 ? "node" : "nodes", s.mixed_gpus->gpu.name, s.mixed_gpus->gpu.name);
  }
  out << "One micro-batch of one instance of each part (a layer's kernels run once per layer; recomputation "
         "repeats the forward):\n\n";
  // The kernel column as wide as its longest label ("cast+transpose").
  std::vector<std::string> labels;
  std::size_t width = 8;
  for (const auto& u : t.uses) width = std::max(width, labels.emplace_back(kernel_label(t, u)).size());
  out << fmt::format("{:<10} {:<28} {:<{}} {:<6} {:>24} {:>11} {:>9} {:>8}\n", "part", "op.pass", "kernel",
                     width, "dtype", "b x m x n x k | rows x h", "time_us", "TFLOP/s", "GB/s");
  bool parts = false;
  bool copies = false;
  bool weight_casts = false;
  bool roles = false;
  for (std::size_t i = 0; i < t.uses.size(); ++i) {
    const study::KernelUse& u = t.uses[i];
    const study::KernelTableRow& r = t.rows[u.row];
    const Time time = t.time_of(u);
    parts = parts || u.fused_part;
    weight_casts = weight_casts || u.pass == study::OpPass::WeightCast;
    copies = copies || r.kernel.op == node_model::KernelOp::Copy;
    roles = roles || u.role != node_model::KernelRole::None;
    out << fmt::format("{:<10} {:<28} {:<{}} {:<6} {:>24} {:>11.3f} {:>9.1f} {:>8.0f}\n", u.part,
                       u.op + "." + std::string(study::to_string(u.pass)), labels[i], width,
                       node_model::to_string(r.kernel.dtype), dims(r.kernel), time.us(),
                       rate(r.kernel.flops().count(), time) * 1e-12,
                       rate(r.kernel.bytes().as_double(), time) * 1e-9);
  }
  if (parts) {
    out << "(+: a further part of the kernel above it, in the same launch, as the node model times a fused "
           "kernel: no launch floor of its own)\n";
  }
  // Transformer Engine's FP8 casts and transposes are timed as the memory
  // passes of their traffic (OpRules::layer_linear): named by what they do.
  if (roles) {
    out << "(cast, transpose, cast+transpose: Transformer Engine's FP8 casts and transposes, timed as bf16 "
           "memory passes of their traffic, the mulu class: mulu rows in the --out CSV)\n";
  }
  // Transformer Engine's FP8 weight casts run in the plan once per
  // iteration and model chunk (LayerPieces::first_forward), not per
  // micro-batch: listed (the CSV times them) but summed apart.
  if (weight_casts) {
    out << "(weight_cast: Transformer Engine's FP8 weight casts, once per iteration and model chunk, before "
           "the forward of the chunk's first micro-batch: not in the per-micro-batch sums below)\n";
  }
  // (helper 140: copies at 100% of the HBM peak, unexplained)
  if (copies) {
    out << "(copy: no copy kernel was measured to learn from, so a copy is timed at the GPU's full memory "
           "bandwidth, or its per-kernel floor: a rate no real copy reaches)\n";
  }
  // Sums of the kernel times above: per part, and the whole model on this
  // rank (every part times its count; no recomputation, no collectives).
  out << "\nPer micro-batch, milliseconds:\n";
  out << fmt::format("{:<10} {:>5} {:>10} {:>11} {:>12} {:>10} {:>10} {:>8} {:>6}\n", "part", "count",
                     "forward", "input_grad", "weight_grad", "total", "GEMM time", "kernels", "GEMMs");
  const std::vector<study::PartTotals> totals = study::part_totals(t, s);
  for (const study::PartTotals& p : totals) {
    out << fmt::format("{:<10} {:>5} {:>10.3f} {:>11.3f} {:>12.3f} {:>10.3f} {:>10.3f} {:>8} {:>6}\n", p.part,
                       p.part == "model" ? "" : fmt::format("x{}", p.instances), p.pass[0].ms(),
                       p.pass[1].ms(), p.pass[2].ms(), p.total().ms(), p.gemm.ms(), p.kernels,
                       p.gemm_kernels);
  }
  out << "(model: every part times its count, on one tensor-parallel rank and every pipeline stage; no "
         "recomputation, collectives or optimizer step)\n";
  if (weight_casts) {
    const study::PartTotals& model = totals.back();
    std::string each;
    for (std::size_t i = 0; i + 1 < totals.size(); ++i) {
      if (totals[i].weight_cast <= Time::zero()) continue;
      each += fmt::format("{}{} {:.3f} ms x{}", each.empty() ? "" : ", ", totals[i].part,
                          totals[i].weight_cast.ms(), totals[i].instances);
    }
    out << fmt::format("Weight casts once per iteration: {:.3f} ms for the model ({})\n",
                       model.weight_cast.ms(), each);
  }
  out << fmt::format("{} distinct kernels", t.rows.size());
  if (csv_path) {
    write_file_atomic(*csv_path, table_csv(t));
    out << fmt::format(", written to {} (node_model.overrides schema: replace time_us with measured times)",
                       *csv_path);
  }
  out << '\n';
  return 0;
}

}  // namespace tessera::cli
