#include "tessera/study/kernels.hpp"

#include <map>
#include <tuple>
#include <utility>

#include "tessera/parallelism/passes.hpp"
#include "tessera/parallelism/transformer.hpp"

namespace tessera::study {

namespace {
using Key = std::tuple<node_model::KernelOp, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                       std::int64_t, node_model::DType>;
Key key_of(const node_model::Kernel& k) { return {k.op, k.b, k.m, k.n, k.k, k.h, k.dtype}; }
}  // namespace

KernelTable kernel_table(const Scenario& s) {
  const auto predictor = make_scenario_predictor(s);
  const parallelism::KernelTimer timer(*predictor, s.workload);
  KernelTable table;
  table.device_time = timer.host_model();
  table.tp = s.plan.tp;
  table.sequence_parallel = s.plan.sequence_parallel;
  const parallelism::Sharding dense{s.plan.tp, s.plan.sequence_parallel};
  const parallelism::Sharding moe{s.plan.tp, s.plan.sequence_parallel, s.plan.ep};

  std::vector<std::pair<std::string, std::vector<parallelism::OpKernels>>> parts;
  parts.emplace_back("embedding", parallelism::embedding_ops(s.model, s.workload, dense));
  bool dense_layers = !s.model.is_moe();
  for (std::int64_t l = 0; l < s.model.layers && !dense_layers; ++l) dense_layers = !s.model.is_moe_layer(l);
  if (dense_layers) parts.emplace_back("layer", parallelism::layer_ops(s.model, s.workload, dense));
  if (s.model.is_moe()) parts.emplace_back("moe_layer", parallelism::moe_layer_ops(s.model, s.workload, moe));
  parts.emplace_back("lm_head", parallelism::lm_head_ops(s.model, s.workload, dense));

  std::map<Key, std::size_t> index;
  for (const auto& [part, ops] : parts) {
    for (const auto& op : ops) {
      const std::pair<const char*, const node_model::Pass*> passes[] = {
          {"forward", &op.forward}, {"input_grad", &op.input_grad}, {"weight_grad", &op.weight_grad}};
      for (const auto& [pass_name, pass] : passes) {
        for (const auto& k : pass->kernels) {
          auto [it, inserted] = index.emplace(key_of(k), table.rows.size());
          if (inserted) table.rows.push_back({k, timer.time(k)});
          table.uses.push_back({part, op.name, pass_name, it->second});
        }
      }
    }
  }
  return table;
}

}  // namespace tessera::study
