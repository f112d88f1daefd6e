// The planner's op-program pass: one layer's (dense or MoE), the embedding's
// and the LM head's work on one rank as pieces, with their tensor/sequence-
// and expert-parallel collectives (docs/parallelism.md, "Planner passes").
#include <fmt/format.h>

#include <string_view>

#include "tessera/error.hpp"
#include "tessera/parallelism/passes.hpp"

namespace tessera::parallelism {

using node_model::dtype_bytes;

namespace {

std::size_t index_of(const std::vector<OpKernels>& ops, std::string_view name) {
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].name == name) return i;
  }
  throw SimulationError(fmt::format("planner: layer has no op '{}'", name));
}

/// The forward passes of ops [from, to).
std::vector<const Pass*> forward_passes(const std::vector<OpKernels>& ops, std::size_t from, std::size_t to) {
  std::vector<const Pass*> out;
  for (std::size_t i = from; i < to && i < ops.size(); ++i) out.push_back(&ops[i].forward);
  return out;
}

/// Backward steps in execution order: for each op, last to first, its input
/// gradient then its weight gradient (Megatron computes a linear's dgrad
/// first, so its all-reduce can overlap the wgrad).
struct BackwardStep {
  std::size_t op;
  bool weight;
};
std::vector<BackwardStep> backward_steps(const std::vector<OpKernels>& ops) {
  std::vector<BackwardStep> out;
  for (std::size_t i = ops.size(); i-- > 0;) {
    out.push_back({i, false});
    out.push_back({i, true});
  }
  return out;
}
std::size_t step_of(const std::vector<OpKernels>& ops, const std::vector<BackwardStep>& steps, std::string_view name,
                    bool weight) {
  const std::size_t op = index_of(ops, name);
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].op == op && steps[i].weight == weight) return i;
  }
  throw SimulationError(fmt::format("planner: no backward step for '{}'", name));
}
/// Which kernels of a backward a task runs: all of them (gpipe, 1f1b,
/// interleaved), the input gradients (B) or the weight gradients (W) of a
/// zero-bubble schedule.
enum class BackwardPart { All, Input, Weight };

std::vector<const Pass*> backward_passes(const std::vector<OpKernels>& ops, const std::vector<BackwardStep>& steps,
                                         std::size_t from, std::size_t to, BackwardPart part = BackwardPart::All) {
  std::vector<const Pass*> out;
  for (std::size_t i = from; i < to && i < steps.size(); ++i) {
    if (part == BackwardPart::Input && steps[i].weight) continue;
    if (part == BackwardPart::Weight && !steps[i].weight) continue;
    const OpKernels& op = ops[steps[i].op];
    out.push_back(steps[i].weight ? &op.weight_grad : &op.input_grad);
  }
  return out;
}

/// A layer's backward split as a zero-bubble schedule runs it. B (`in`):
/// the input gradients, in the fused order; the tensor-parallel reduction of
/// a column-parallel linear's input gradient blocks (the weight gradient it
/// overlaps in the fused backward is W's). With SP, the gradient entering
/// each row-parallel linear is all-gathered in B and kept for W. W (`wg`):
/// the weight gradients, in backward order; with SP the inputs of fc1 and
/// QKV are re-gathered, overlapping the weight gradients before them when
/// tp_comm_overlap is on.
void split_layer_backward(PieceList& in, PieceList& wg, const std::vector<OpKernels>& ops,
                          const std::vector<BackwardStep>& steps, const ParallelPlan& p, Bytes act) {
  const bool tp = p.tp > 1, sp = tp && p.sequence_parallel;
  auto inputs = [&](std::size_t from, std::size_t to) {
    return backward_passes(ops, steps, from, to, BackwardPart::Input);
  };
  auto weights = [&](std::size_t from, std::size_t to) {
    return backward_passes(ops, steps, from, to, BackwardPart::Weight);
  };
  if (!tp) {
    in.passes("bwd", inputs(0, steps.size()));
    wg.passes("wgrad", weights(0, steps.size()));
    return;
  }
  const std::size_t fc2_dgrad = step_of(ops, steps, "fc2", false), fc1_dgrad = step_of(ops, steps, "fc1", false);
  const std::size_t proj_dgrad = step_of(ops, steps, "proj", false), qkv_dgrad = step_of(ops, steps, "qkv", false);
  const std::size_t fc1_wgrad = step_of(ops, steps, "fc1", true), qkv_wgrad = step_of(ops, steps, "qkv", true);
  const CollectiveKind grad_kind = sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
  in.passes("bwd.res2", inputs(0, fc2_dgrad));
  if (sp) in.comm("bwd.tp", CollectiveKind::AllGather, act);
  in.passes("bwd.mlp", inputs(fc2_dgrad, fc1_dgrad + 1));
  in.comm("bwd.tp", grad_kind, act);
  in.passes("bwd.ln2", inputs(fc1_dgrad + 1, proj_dgrad));
  if (sp) in.comm("bwd.tp", CollectiveKind::AllGather, act);
  in.passes("bwd.attn", inputs(proj_dgrad, qkv_dgrad + 1));
  in.comm("bwd.tp", grad_kind, act);
  in.passes("bwd.ln1", inputs(qkv_dgrad + 1, steps.size()));
  if (!sp) {
    wg.passes("wgrad", weights(0, steps.size()));
    return;
  }
  // An async collective is waited for by the second compute piece after it.
  const bool overlap = p.tp_comm_overlap;
  wg.comm("wgrad.tp", CollectiveKind::AllGather, act, overlap);
  wg.passes("wgrad.mlp", weights(0, fc1_wgrad));
  wg.split();
  wg.passes("wgrad.fc1", weights(fc1_wgrad, fc1_wgrad + 1));
  wg.comm("wgrad.tp", CollectiveKind::AllGather, act, overlap);
  wg.passes("wgrad.attn", weights(fc1_wgrad + 1, qkv_wgrad));
  wg.split();
  wg.passes("wgrad.qkv", weights(qkv_wgrad, steps.size()));
}

/// An MoE layer's backward split as a zero-bubble schedule runs it (B into
/// `lp.input_backward` after the recomputation `lp.backward` holds so far;
/// W into `lp.weight_backward`). B: the input gradients in the fused order,
/// with both all-to-alls and the tensor-parallel reductions blocking. W: the
/// weight gradients; with SP the MoE block's input (for the router and the
/// shared experts) and the QKV input are re-gathered, each overlapping the
/// weight gradients before them when tp_comm_overlap is on.
void split_moe_layer_backward(LayerPieces& lp, const std::vector<OpKernels>& ops,
                              const std::vector<BackwardStep>& steps, const ParallelPlan& p, Bytes act,
                              Bytes a2a) {
  const bool tp = p.tp > 1, sp = tp && p.sequence_parallel, ep = p.ep > 1;
  const CollectiveKind reduce = sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
  auto inputs = [&](std::size_t from, std::size_t to) {
    return backward_passes(ops, steps, from, to, BackwardPart::Input);
  };
  auto weights = [&](std::size_t from, std::size_t to) {
    return backward_passes(ops, steps, from, to, BackwardPart::Weight);
  };
  const std::size_t unpermute_dgrad = step_of(ops, steps, "unpermute", false);
  const std::size_t fc2_dgrad = step_of(ops, steps, "fc2", false),
                    fc1_wgrad = step_of(ops, steps, "fc1", true);
  PieceList& in = lp.input_backward;
  PieceList& wg = lp.weight_backward;
  in.append(lp.backward);  // the recomputation
  in.passes("bwd.res2", inputs(0, unpermute_dgrad));
  if (sp) in.comm("bwd.tp", CollectiveKind::AllGather, act);
  in.passes("bwd.unpermute", inputs(unpermute_dgrad, fc2_dgrad));
  if (ep) in.expert_comm("bwd.ep.combine", a2a);
  in.passes("bwd.experts", inputs(fc2_dgrad, fc1_wgrad + 1));
  if (ep) in.expert_comm("bwd.ep.dispatch", a2a);
  if (!tp) {
    in.passes("bwd.router", inputs(fc1_wgrad + 1, steps.size()));
    wg.passes("wgrad", weights(0, steps.size()));
    return;
  }
  const std::size_t ln2_dgrad = step_of(ops, steps, "ln2", false),
                    proj_dgrad = step_of(ops, steps, "proj", false);
  const std::size_t qkv_dgrad = step_of(ops, steps, "qkv", false),
                    qkv_wgrad = step_of(ops, steps, "qkv", true);
  in.passes("bwd.router", inputs(fc1_wgrad + 1, ln2_dgrad));
  in.comm("bwd.tp", reduce, act);
  in.passes("bwd.ln2", inputs(ln2_dgrad, proj_dgrad));
  if (sp) in.comm("bwd.tp", CollectiveKind::AllGather, act);
  in.passes("bwd.attn", inputs(proj_dgrad, qkv_dgrad + 1));
  in.comm("bwd.tp", reduce, act);
  in.passes("bwd.ln1", inputs(qkv_dgrad + 1, steps.size()));
  if (!sp) {
    wg.passes("wgrad", weights(0, steps.size()));
    return;
  }
  // An async collective is waited for by the second compute piece after it.
  const bool overlap = p.tp_comm_overlap;
  wg.comm("wgrad.tp", CollectiveKind::AllGather, act, overlap);
  wg.passes("wgrad.experts", weights(0, fc1_wgrad + 1));
  wg.split();
  wg.passes("wgrad.router", weights(fc1_wgrad + 1, ln2_dgrad));
  wg.comm("wgrad.tp", CollectiveKind::AllGather, act, overlap);
  wg.passes("wgrad.attn", weights(ln2_dgrad, qkv_wgrad));
  wg.split();
  wg.passes("wgrad.qkv", weights(qkv_wgrad, steps.size()));
}

}  // namespace

LayerPieces layer_pieces(const TransformerConfig& m, const Workload& w, const ParallelPlan& p,
                         const KernelTimer& timer, bool split) {
  const Sharding shard{p.tp, p.sequence_parallel};
  const auto ops = layer_ops(m, w, shard);
  const Bytes act(w.micro_batch * w.seq_len * m.hidden * dtype_bytes(w.dtype));
  const bool tp = p.tp > 1, sp = tp && p.sequence_parallel;
  const std::size_t qkv = index_of(ops, "qkv"), res1 = index_of(ops, "residual1");
  const std::size_t fc1 = index_of(ops, "fc1"), res2 = index_of(ops, "residual2");
  LayerPieces lp(timer);

  // Forward: [ln1] (AG) [qkv .. proj] AR|RS [residual1, ln2] (AG) [fc1 .. fc2] AR|RS [residual2].
  PieceList& f = lp.forward;
  if (!tp) {
    f.passes("fwd", forward_passes(ops, 0, ops.size()));
  } else {
    f.passes("fwd.ln1", forward_passes(ops, 0, qkv));
    if (sp) f.comm("fwd.tp", CollectiveKind::AllGather, act);
    f.passes("fwd.attn", forward_passes(ops, qkv, res1));
    f.comm("fwd.tp", sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce, act);
    f.passes("fwd.ln2", forward_passes(ops, res1, fc1));
    if (sp) f.comm("fwd.tp", CollectiveKind::AllGather, act);
    f.passes("fwd.mlp", forward_passes(ops, fc1, res2));
    f.comm("fwd.tp", sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce, act);
    f.passes("fwd.res2", forward_passes(ops, res2, ops.size()));
  }

  PieceList& b = lp.backward;
  if (p.recompute == Recompute::Full) b.append(lp.forward);
  if (p.recompute == Recompute::Selective && !w.flash_attention) {
    // Recompute the attention core: scores to context (scale, mask, softmax,
    // dropout in between).
    b.passes("bwd.recompute", forward_passes(ops, index_of(ops, "scores"), index_of(ops, "context") + 1));
  }
  const auto steps = backward_steps(ops);
  auto range = [&](std::size_t from, std::size_t to) { return backward_passes(ops, steps, from, to); };
  const std::size_t fc2_dgrad = step_of(ops, steps, "fc2", false), fc1_dgrad = step_of(ops, steps, "fc1", false);
  const std::size_t fc1_wgrad = step_of(ops, steps, "fc1", true);
  if (split) {
    // B: the recomputation and the input gradients; W: the weight gradients.
    lp.input_backward.append(b);
    split_layer_backward(lp.input_backward, lp.weight_backward, ops, steps, p, act);
  }
  if (!tp) {
    b.passes("bwd", range(0, steps.size()));
    return lp;
  }
  const std::size_t proj_dgrad = step_of(ops, steps, "proj", false);
  const std::size_t qkv_dgrad = step_of(ops, steps, "qkv", false), qkv_wgrad = step_of(ops, steps, "qkv", true);
  // Column-parallel linears: the input gradient is all-reduced (reduce-
  // scattered with SP) while the weight gradient is computed (Megatron's
  // async tensor-parallel communication; with tp_comm_overlap off the
  // all-reduce blocks). With SP the gradient entering each row-parallel
  // linear is all-gathered first, and the column-parallel input is
  // re-gathered for its weight gradient.
  const bool overlap = p.tp_comm_overlap;
  const CollectiveKind grad_kind = sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
  b.passes("bwd.res2", range(0, fc2_dgrad));
  if (sp) b.comm("bwd.tp", CollectiveKind::AllGather, act);
  b.passes("bwd.mlp", range(fc2_dgrad, fc1_dgrad));
  if (sp) b.comm("bwd.tp", CollectiveKind::AllGather, act, overlap);
  b.passes("bwd.fc1.dgrad", range(fc1_dgrad, fc1_wgrad));
  b.comm("bwd.tp", grad_kind, act, overlap);
  b.passes("bwd.fc1.wgrad", range(fc1_wgrad, fc1_wgrad + 1));
  b.split();
  b.passes("bwd.ln2", range(fc1_wgrad + 1, proj_dgrad));
  if (sp) b.comm("bwd.tp", CollectiveKind::AllGather, act);
  b.passes("bwd.attn", range(proj_dgrad, qkv_dgrad));
  if (sp) b.comm("bwd.tp", CollectiveKind::AllGather, act, overlap);
  b.passes("bwd.qkv.dgrad", range(qkv_dgrad, qkv_wgrad));
  b.comm("bwd.tp", grad_kind, act, overlap);
  b.passes("bwd.qkv.wgrad", range(qkv_wgrad, qkv_wgrad + 1));
  b.split();
  b.passes("bwd.ln1", range(qkv_wgrad + 1, steps.size()));
  return lp;
}

LayerPieces moe_layer_pieces(const TransformerConfig& m, const Workload& w, const ParallelPlan& p,
                             const KernelTimer& timer, bool split) {
  const Sharding shard{p.tp, p.sequence_parallel, p.ep};
  const auto ops = moe_layer_ops(m, w, shard);
  const Bytes act(w.micro_batch * w.seq_len * m.hidden * dtype_bytes(w.dtype));
  const Bytes a2a = expert_all_to_all_bytes(m, w, shard);
  const bool tp = p.tp > 1, sp = tp && p.sequence_parallel, ep = p.ep > 1;
  const CollectiveKind reduce = sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
  const std::size_t qkv = index_of(ops, "qkv"), res1 = index_of(ops, "residual1"),
                    router = index_of(ops, "router");
  const std::size_t fc1 = index_of(ops, "fc1"), unpermute = index_of(ops, "unpermute");
  const std::size_t res2 = index_of(ops, "residual2");
  LayerPieces lp(timer);
  auto fwd = [&](std::size_t from, std::size_t to) { return forward_passes(ops, from, to); };

  PieceList& f = lp.forward;
  if (!tp) {
    f.passes("fwd", fwd(0, fc1));
  } else {
    f.passes("fwd.ln1", fwd(0, qkv));
    if (sp) f.comm("fwd.tp", CollectiveKind::AllGather, act);
    f.passes("fwd.attn", fwd(qkv, res1));
    f.comm("fwd.tp", reduce, act);
    f.passes("fwd.ln2", fwd(res1, router));
    if (sp) f.comm("fwd.tp", CollectiveKind::AllGather, act);
    f.passes("fwd.router", fwd(router, fc1));
  }
  if (ep) f.expert_comm("fwd.ep.dispatch", a2a);
  f.passes("fwd.experts", fwd(fc1, unpermute));
  if (ep) f.expert_comm("fwd.ep.combine", a2a);
  f.passes("fwd.unpermute", fwd(unpermute, res2));
  if (tp) f.comm("fwd.tp", reduce, act);
  f.passes("fwd.res2", fwd(res2, ops.size()));

  PieceList& b = lp.backward;
  if (p.recompute == Recompute::Full) b.append(lp.forward);
  if (p.recompute == Recompute::Selective && !w.flash_attention) {
    b.passes("bwd.recompute", fwd(index_of(ops, "scores"), index_of(ops, "context") + 1));
  }
  const auto steps = backward_steps(ops);
  auto range = [&](std::size_t from, std::size_t to) { return backward_passes(ops, steps, from, to); };
  const std::size_t unpermute_dgrad = step_of(ops, steps, "unpermute", false);
  const std::size_t fc2_dgrad = step_of(ops, steps, "fc2", false),
                    fc1_wgrad = step_of(ops, steps, "fc1", true);
  const std::size_t ln2_dgrad = step_of(ops, steps, "ln2", false);
  if (split) split_moe_layer_backward(lp, ops, steps, p, act, a2a);
  b.passes("bwd.res2", range(0, unpermute_dgrad));
  if (sp) b.comm("bwd.tp", CollectiveKind::AllGather, act);
  b.passes("bwd.unpermute", range(unpermute_dgrad, fc2_dgrad));
  if (ep) b.expert_comm("bwd.ep.combine", a2a);
  b.passes("bwd.experts", range(fc2_dgrad, fc1_wgrad + 1));
  if (ep) b.expert_comm("bwd.ep.dispatch", a2a);
  if (!tp) {
    b.passes("bwd.router", range(fc1_wgrad + 1, steps.size()));
    return lp;
  }
  const std::size_t proj_dgrad = step_of(ops, steps, "proj", false);
  const std::size_t qkv_dgrad = step_of(ops, steps, "qkv", false),
                    qkv_wgrad = step_of(ops, steps, "qkv", true);
  const bool overlap = p.tp_comm_overlap;
  b.passes("bwd.router", range(fc1_wgrad + 1, ln2_dgrad));
  b.comm("bwd.tp", reduce, act);
  b.passes("bwd.ln2", range(ln2_dgrad, proj_dgrad));
  if (sp) b.comm("bwd.tp", CollectiveKind::AllGather, act);
  b.passes("bwd.attn", range(proj_dgrad, qkv_dgrad));
  if (sp) b.comm("bwd.tp", CollectiveKind::AllGather, act, overlap);
  b.passes("bwd.qkv.dgrad", range(qkv_dgrad, qkv_wgrad));
  b.comm("bwd.tp", reduce, act, overlap);
  b.passes("bwd.qkv.wgrad", range(qkv_wgrad, qkv_wgrad + 1));
  b.split();
  b.passes("bwd.ln1", range(qkv_wgrad + 1, steps.size()));
  return lp;
}

ModelPieces model_pieces(const TransformerConfig& m, const Workload& w, const ParallelPlan& p,
                         const KernelTimer& timer) {
  // Zero-bubble schedules run each backward as B (input gradients) and a
  // later W (weight gradients).
  const bool split = splits_backward(p.schedule);
  ModelPieces out{layer_pieces(m, w, p, timer, split), std::nullopt, LayerPieces(timer), LayerPieces(timer)};
  if (m.is_moe()) out.moe_layer.emplace(moe_layer_pieces(m, w, p, timer, split));
  const bool tp = p.tp > 1, sp = tp && p.sequence_parallel;
  const Sharding shard{p.tp, p.sequence_parallel};
  const Bytes act(w.micro_batch * w.seq_len * m.hidden * dtype_bytes(w.dtype));
  const CollectiveKind reduce = sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
  LayerPieces& embed = out.embedding;
  LayerPieces& head = out.lm_head;
  const auto ef = embedding_ops(m, w, shard);
  embed.forward.passes("fwd", forward_passes(ef, 0, ef.size()));
  if (tp) embed.forward.comm("fwd.tp", reduce, act);
  if (sp) embed.backward.comm("bwd.tp", CollectiveKind::AllGather, act);
  const auto esteps = backward_steps(ef);
  embed.backward.passes("bwd", backward_passes(ef, esteps, 0, esteps.size()));
  const auto hf = lm_head_ops(m, w, shard);
  head.forward.passes("fwd", forward_passes(hf, 0, 1));
  if (sp) head.forward.comm("fwd.tp", CollectiveKind::AllGather, act);
  head.forward.passes("fwd", forward_passes(hf, 1, hf.size()));
  // Loss, LM-head dgrad and wgrad; the TP reduction of the LM head's input
  // gradient; the final layer norm.
  const auto hsteps = backward_steps(hf);
  const std::size_t ln_f = step_of(hf, hsteps, "ln_f", false);
  head.backward.passes("bwd", backward_passes(hf, hsteps, 0, ln_f));
  if (tp) head.backward.comm("bwd.tp", reduce, act);
  head.backward.passes("bwd", backward_passes(hf, hsteps, ln_f, hsteps.size()));
  if (split) {
    if (sp) embed.input_backward.comm("bwd.tp", CollectiveKind::AllGather, act);
    embed.input_backward.passes("bwd", backward_passes(ef, esteps, 0, esteps.size(), BackwardPart::Input));
    embed.weight_backward.passes("wgrad", backward_passes(ef, esteps, 0, esteps.size(), BackwardPart::Weight));
    head.input_backward.passes("bwd", backward_passes(hf, hsteps, 0, ln_f, BackwardPart::Input));
    if (tp) head.input_backward.comm("bwd.tp", reduce, act);
    head.input_backward.passes("bwd", backward_passes(hf, hsteps, ln_f, hsteps.size(), BackwardPart::Input));
    head.weight_backward.passes("wgrad", backward_passes(hf, hsteps, 0, hsteps.size(), BackwardPart::Weight));
  }
  return out;
}

}  // namespace tessera::parallelism
