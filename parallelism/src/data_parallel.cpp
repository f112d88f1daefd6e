#include "tessera/parallelism/data_parallel.hpp"

#include <fmt/format.h>

#include "tessera/error.hpp"

namespace tessera::parallelism {
namespace {

/// Appends one compute task (the sum of `ops`) after the previous compute task.
TaskIndex add_compute(Program& prog, std::string_view name, const std::vector<Op>& ops,
                      const node_model::KernelPredictor& predictor, TaskIndex previous) {
  Task t;
  t.name = prog.keep_name(name);
  t.kind = TaskKind::Compute;
  for (const Op& op : ops) {
    t.duration += predictor.predict(op.kernel);
    t.flops += op.kernel.flops();
  }
  if (previous >= 0) t.deps.push_back(previous);
  prog.tasks.push_back(std::move(t));
  return static_cast<TaskIndex>(prog.tasks.size() - 1);
}

}  // namespace

TaskGraph plan_data_parallel(const TransformerConfig& model, const Workload& work,
                             const DataParallelPlan& plan,
                             const node_model::KernelPredictor& predictor) {
  model.validate();
  if (plan.dp <= 0) throw InputError(fmt::format("parallelism.dp must be positive (got {})", plan.dp));
  if (plan.bucket_size.count() <= 0) {
    throw InputError(fmt::format("parallelism.bucket_size must be positive (got {})",
                                 to_string(plan.bucket_size)));
  }
  const std::int64_t grad_bytes_per_param = node_model::dtype_bytes(work.dtype);

  // Build one program; every replica runs it (slot 0: all ranks).
  Program prog;
  const auto layer_fwd = layer_forward_ops(model, work);
  const auto layer_bwd = backward_ops(layer_fwd);
  const auto embed_fwd = embedding_forward_ops(model, work);
  const auto head_fwd = lm_head_forward_ops(model, work);

  TaskIndex last = add_compute(prog, "embedding.fwd", embed_fwd, predictor, -1);
  for (std::int64_t l = 0; l < model.layers; ++l) {
    last = add_compute(prog, fmt::format("layer{:03}.fwd", l), layer_fwd, predictor, last);
  }
  last = add_compute(prog, "lm_head.fwd", head_fwd, predictor, last);

  // Backward: gradients become ready in reverse layer order; buckets fill up
  // and each full bucket is all-reduced while backward continues.
  std::vector<TaskIndex> all_reduces;
  std::int64_t pending_bytes = 0;
  std::int64_t bucket = 0;
  auto flush = [&](TaskIndex after) {
    if (pending_bytes == 0) return;
    Task ar;
    ar.name = prog.keep_name(fmt::format("grad_all_reduce.bucket{:03}", bucket));
    ar.kind = TaskKind::Collective;
    ar.collective = CollectiveKind::AllReduce;
    ar.group = 0;
    ar.collective_id = bucket;
    ar.bytes = Bytes(pending_bytes);
    ar.deps.push_back(after);
    prog.tasks.push_back(std::move(ar));
    all_reduces.push_back(static_cast<TaskIndex>(prog.tasks.size() - 1));
    pending_bytes = 0;
    ++bucket;
  };
  auto produced = [&](std::int64_t params, TaskIndex task) {
    pending_bytes += params * grad_bytes_per_param;
    if (pending_bytes >= plan.bucket_size.count()) flush(task);
  };

  last = add_compute(prog, "lm_head.bwd", backward_ops(head_fwd), predictor, last);
  TaskIndex last_compute = last;
  for (std::int64_t l = model.layers - 1; l >= 0; --l) {
    last_compute = add_compute(prog, fmt::format("layer{:03}.bwd", l), layer_bwd, predictor, last_compute);
    produced(model.params_per_layer(), last_compute);
  }
  last_compute = add_compute(prog, "embedding.bwd", backward_ops(embed_fwd), predictor, last_compute);
  produced(model.embedding_params(work.seq_len), last_compute);
  flush(last_compute);

  const std::int64_t params = model.layers * model.params_per_layer() + model.embedding_params(work.seq_len);
  Task opt;
  opt.name = "optimizer";
  opt.kind = TaskKind::Compute;
  for (const Op& op : optimizer_ops(params, node_model::DType::FP32)) {
    opt.duration += predictor.predict(op.kernel);
  }
  opt.deps.push_back(last_compute);
  opt.deps.insert(opt.deps.end(), all_reduces.begin(), all_reduces.end());
  prog.tasks.push_back(std::move(opt));

  TaskGraph graph;
  Group everyone;
  for (int r = 0; r < plan.dp; ++r) everyone.ranks.push_back(r);
  graph.groups.push_back(std::move(everyone));
  const std::int32_t shared = graph.add_program(std::move(prog));
  for (int r = 0; r < plan.dp; ++r) graph.add_rank(shared, {0});
  return graph;
}

}  // namespace tessera::parallelism
