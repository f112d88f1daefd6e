#include "tessera/study/kernels.hpp"

#include <array>
#include <map>
#include <utility>

#include "tessera/parallelism/passes.hpp"
#include "tessera/parallelism/transformer.hpp"
#include "tessera/study/pipeline.hpp"

namespace tessera::study {

std::string_view to_string(OpPass p) {
  switch (p) {
    case OpPass::Forward:
      return "forward";
    case OpPass::InputGrad:
      return "input_grad";
    case OpPass::WeightGrad:
      return "weight_grad";
    case OpPass::WeightCast:
      return "weight_cast";
  }
  return "?";
}

namespace {

// The table, its overflows not yet named (kernel_table).
KernelTable build_kernel_table(const Scenario& s) {
  const auto predictor = make_scenario_predictor(s);
  // As the plan runs it (helper 141: Megatron on PyTorch DDP listed the
  // main-gradient accumulation the plan does not run).
  const parallelism::Workload work = parallelism::workload_under(s.workload, s.plan);
  const parallelism::KernelTimer timer(*predictor, work);
  KernelTable table;
  table.device_time = timer.host_model();
  const parallelism::Sharding dense{s.plan.tp, s.plan.sequence_parallel};
  const parallelism::Sharding moe{s.plan.tp, s.plan.sequence_parallel, s.plan.ep};

  std::vector<std::pair<std::string, std::vector<parallelism::OpKernels>>> parts;
  parts.emplace_back("embedding", parallelism::embedding_ops(s.model, work, dense));
  if (s.model.moe_layers_in(0, s.model.layers) < s.model.layers) {
    parts.emplace_back("layer", parallelism::layer_ops(s.model, work, dense));
  }
  if (s.model.is_moe()) parts.emplace_back("moe_layer", parallelism::moe_layer_ops(s.model, work, moe));
  parts.emplace_back("lm_head", parallelism::lm_head_ops(s.model, work, dense));

  std::map<node_model::Kernel, std::size_t> index;
  for (const auto& [part, ops] : parts) {
    for (const auto& op : ops) {
      // The weight casts (once per iteration) first: they run before the
      // forward of a chunk's first micro-batch.
      const std::array<std::pair<OpPass, const node_model::Pass*>, 4> passes{
          {{OpPass::WeightCast, &op.weight_cast},
           {OpPass::Forward, &op.forward},
           {OpPass::InputGrad, &op.input_grad},
           {OpPass::WeightGrad, &op.weight_grad}}};
      for (const auto& [pass, kernels] : passes) {
        for (std::size_t i = 0; i < kernels->kernels.size(); ++i) {
          const node_model::Kernel& k = kernels->kernels[i];
          auto [it, inserted] = index.emplace(k, table.rows.size());
          if (inserted) table.rows.push_back({k, timer.time(k), timer.part_time(k)});
          table.uses.push_back({part, op.name, pass, it->second, kernels->part[i], kernels->role[i]});
        }
      }
    }
  }
  return table;
}

}  // namespace

// Sizes past int64 (a kernel of seq_len 10^11): named by the keys that
// scale them, as tessera run names them.
KernelTable kernel_table(const Scenario& s) {
  return naming_overflow(s, [&] { return build_kernel_table(s); });
}

std::vector<PartTotals> part_totals(const KernelTable& t, const Scenario& s) {
  const std::int64_t moe_layers = s.model.moe_layers_in(0, s.model.layers);
  std::vector<PartTotals> out;
  for (const KernelUse& u : t.uses) {
    if (out.empty() || out.back().part != u.part) {
      const std::int64_t n = u.part == "layer"       ? s.model.layers - moe_layers
                             : u.part == "moe_layer" ? moe_layers
                                                     : 1;
      PartTotals p;
      p.part = u.part;
      p.instances = n;
      out.push_back(p);
    }
    PartTotals& p = out.back();
    const KernelTableRow& r = t.rows[u.row];
    const Time time = t.time_of(u);
    if (u.pass == OpPass::WeightCast) {  // once per iteration, not per micro-batch
      p.weight_cast += time;
      continue;
    }
    p.pass[static_cast<std::size_t>(u.pass)] += time;
    if (!u.fused_part) ++p.kernels;
    if (node_model::is_gemm(r.kernel.op)) {
      p.gemm += time;
      if (!u.fused_part) ++p.gemm_kernels;
    }
  }
  PartTotals model;
  model.part = "model";
  model.instances = 1;
  for (const PartTotals& p : out) {
    for (std::size_t i = 0; i < 3; ++i) model.pass[i] += p.pass[i] * p.instances;
    model.gemm += p.gemm * p.instances;
    model.weight_cast += p.weight_cast * p.instances;
    model.kernels += p.kernels * static_cast<std::size_t>(p.instances);
    model.gemm_kernels += p.gemm_kernels * static_cast<std::size_t>(p.instances);
  }
  out.push_back(model);
  return out;
}

}  // namespace tessera::study
