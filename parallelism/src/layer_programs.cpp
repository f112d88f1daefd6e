// The planner's op-program pass: one layer's (dense or MoE), the embedding's
// and the LM head's work on one rank as pieces, with their tensor/sequence-
// and expert-parallel collectives (docs/parallelism.md, "Planner passes").
#include <fmt/format.h>

#include <algorithm>
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

/// The forward passes of ops [from, to); with `first` (a model chunk's first
/// micro-batch) each op's once-per-iteration kernels before its forward
/// (OpKernels::weight_cast).
std::vector<const Pass*> forward_passes(const std::vector<OpKernels>& ops, std::size_t from, std::size_t to,
                                        bool first = false) {
  std::vector<const Pass*> out;
  for (std::size_t i = from; i < to && i < ops.size(); ++i) {
    if (first && !ops[i].weight_cast.empty()) out.push_back(&ops[i].weight_cast);
    out.push_back(&ops[i].forward);
  }
  return out;
}

/// Whether any op runs kernels once per iteration (LayerPieces::first_forward).
bool has_weight_casts(const std::vector<OpKernels>& ops) {
  return std::any_of(ops.begin(), ops.end(), [](const OpKernels& op) { return !op.weight_cast.empty(); });
}

/// Bytes of one micro-batch's activation (b s h) in the training dtype, as
/// the layers' and the embedding's reductions move it (the GEMMs write it).
Bytes activation(const TransformerConfig& m, const Workload& w) {
  return Bytes(w.micro_batch * w.seq_len * m.hidden * dtype_bytes(w.dtype));
}

/// Bytes of one micro-batch's activation (b s h) in the layers' sequence-
/// parallel all-gathers: the training dtype's, or under FP8 training 1 byte
/// per element, as Transformer Engine gathers the FP8 copies (the norm's FP8
/// output or a shard cast before the gather, the saved FP8 input re-gathered
/// for the weight gradient, a row-parallel linear's FP8 output gradient;
/// _Linear / _LayerNormLinear, grad_output_preprocess). Reductions stay in
/// the training dtype (the GEMMs write bf16).
Bytes gathered_activation(const TransformerConfig& m, const Workload& w) {
  return w.profile.fp8 ? Bytes(w.micro_batch * w.seq_len * m.hidden) : activation(m, w);
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

/// The attention block's forward with tensor parallelism, up to the second
/// block (the MLP, or the MoE block) starting at op `block`: [ln1] (AG)
/// [qkv .. proj] AR|RS [residual1, ln2] (AG); the last gather only when the
/// block takes the whole sequence (`gather_block_input`: the MLP does, the
/// MoE block routes each rank's own shard).
void attention_forward(PieceList& f, const std::vector<OpKernels>& ops, std::size_t block,
                       const ParallelPlan& p, Bytes act, Bytes gathered, bool first,
                       bool gather_block_input = true) {
  const bool sp = p.tp > 1 && p.sequence_parallel;
  const std::size_t qkv = index_of(ops, "qkv"), res1 = index_of(ops, "residual1");
  // Without SP no collective separates ln1 from the attention (nor ln2
  // from the next block): one task each, named after the block it runs.
  if (sp) {
    f.passes("fwd.ln1", forward_passes(ops, 0, qkv, first));
    f.comm("fwd.tp", CollectiveKind::AllGather, gathered);
  }
  f.passes("fwd.attn", forward_passes(ops, sp ? qkv : 0, res1, first));
  f.comm("fwd.tp", sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce, act);
  if (sp) {
    f.passes("fwd.ln2", forward_passes(ops, res1, block, first));
    if (gather_block_input) f.comm("fwd.tp", CollectiveKind::AllGather, gathered);
  }
}
/// Where the block after the attention starts its forward: at op `block`
/// with SP, else at the first residual (ln2 runs in its task).
std::size_t second_block_forward_start(const std::vector<OpKernels>& ops, std::size_t block,
                                       const ParallelPlan& p) {
  return p.tp > 1 && p.sequence_parallel ? block : index_of(ops, "residual1");
}

/// The attention block's fused backward with tensor parallelism, from
/// backward step `from` (the second block's input gradient reduced): ln2 and
/// residual1, (AG) the attention to QKV's input gradient, whose reduction
/// (with SP after re-gathering QKV's input) overlaps QKV's weight gradient
/// unless tp_comm_overlap is off, then ln1.
void attention_backward(PieceList& b, const std::vector<OpKernels>& ops, const std::vector<BackwardStep>& steps,
                        std::size_t from, const ParallelPlan& p, Bytes act, Bytes gathered) {
  const bool sp = p.tp > 1 && p.sequence_parallel, overlap = p.tp_comm_overlap;
  auto range = [&](std::size_t a, std::size_t z) { return backward_passes(ops, steps, a, z); };
  const std::size_t proj_dgrad = step_of(ops, steps, "proj", false);
  const std::size_t qkv_dgrad = step_of(ops, steps, "qkv", false), qkv_wgrad = step_of(ops, steps, "qkv", true);
  if (sp) {
    b.passes("bwd.ln2", range(from, proj_dgrad));
    b.comm("bwd.tp", CollectiveKind::AllGather, gathered);
  }
  b.passes("bwd.attn", range(sp ? proj_dgrad : from, qkv_dgrad));
  if (sp) b.comm("bwd.tp", CollectiveKind::AllGather, gathered, overlap);
  b.passes("bwd.qkv.dgrad", range(qkv_dgrad, qkv_wgrad));
  b.comm("bwd.tp", sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce, act, overlap);
  b.passes("bwd.qkv.wgrad", range(qkv_wgrad, qkv_wgrad + 1));
  b.split();
  b.passes("bwd.ln1", range(qkv_wgrad + 1, steps.size()));
}

/// The second block of a layer (the dense MLP, or the MoE block) as a split
/// backward runs it; the rest of the layer is the same for both.
struct BlockBackward {
  /// A collective after a run: an all-to-all in the expert-parallel group
  /// (`expert`, run with ep > 1) or a tensor-parallel one (run with tp > 1).
  struct Comm {
    std::string_view name;
    CollectiveKind kind = CollectiveKind::AllToAll;
    Bytes bytes;
    bool expert = false;
  };
  /// Backward steps [from, to) as one piece, followed by its collectives.
  struct Run {
    std::string_view name;
    std::size_t from = 0;
    std::size_t to = 0;
    std::vector<Comm> after;
  };
  /// With SP, B all-gathers the block's output gradient after res2 and
  /// reduce-scatters its input gradient (with TP, all-reduces it) at its
  /// end, and W re-gathers the block's input: the dense MLP. The MoE block
  /// routes each rank's own shard; its collectives are its runs'.
  bool whole_sequence = true;
  /// W re-gathers the block's input (SP) before `weight_last`: the dense
  /// MLP's fc1, an MoE block's shared experts.
  bool weights_gather_input = true;
  /// The block's first backward step: "bwd.res2" runs the steps before it.
  std::size_t start = 0;
  /// B: the block's input gradients, from `start`; the last run ends at the
  /// block's input gradient (where its tensor-parallel reduction goes).
  std::vector<Run> input;
  /// Without tensor parallelism B is one "bwd" piece (else res2, then the
  /// runs, the last one running to the layer's end).
  bool one_piece_without_tp = false;
  /// W with SP: the block's weight gradients, before and after the split at
  /// which the block input's re-gather is waited for.
  Run weight_first;
  Run weight_last;
};

/// A run's collectives: the all-to-alls with ep > 1, the tensor-parallel
/// ones with tp > 1 (the split and the fused backward alike).
void run_comms(PieceList& l, const std::vector<BlockBackward::Comm>& comms, const ParallelPlan& p) {
  for (const BlockBackward::Comm& c : comms) {
    if (c.expert && p.ep > 1) l.expert_comm(std::string(c.name), c.bytes);
    if (!c.expert && p.tp > 1) l.comm(std::string(c.name), c.kind, c.bytes);
  }
}

/// A layer's backward split as a zero-bubble schedule runs it. B (`in`):
/// the input gradients, in the fused order; the tensor-parallel reductions
/// and any all-to-alls block (the weight gradient a column-parallel linear's
/// reduction overlaps in the fused backward is W's). With SP, the gradient
/// entering each row-parallel linear (or the MoE block) is all-gathered in B
/// and kept for W. W (`wg`): the weight gradients, in backward order; with
/// SP the inputs of the block and of QKV are re-gathered, each overlapping
/// the weight gradients before them when tp_comm_overlap is on.
void split_layer_backward(PieceList& in, PieceList& wg, const std::vector<OpKernels>& ops,
                          const std::vector<BackwardStep>& steps, const BlockBackward& block,
                          const ParallelPlan& p, Bytes act, Bytes gathered) {
  const bool tp = p.tp > 1, sp = tp && p.sequence_parallel;
  const std::size_t end = steps.size();
  auto inputs = [&](std::size_t from, std::size_t to) {
    return backward_passes(ops, steps, from, to, BackwardPart::Input);
  };
  auto weights = [&](std::size_t from, std::size_t to) {
    return backward_passes(ops, steps, from, to, BackwardPart::Weight);
  };
  if (!tp && block.one_piece_without_tp) {
    in.passes("bwd", inputs(0, end));
    wg.passes("wgrad", weights(0, end));
    return;
  }
  in.passes("bwd.res2", inputs(0, block.start));
  if (sp && block.whole_sequence) in.comm("bwd.tp", CollectiveKind::AllGather, gathered);
  for (std::size_t r = 0; r < block.input.size(); ++r) {
    const BlockBackward::Run& run = block.input[r];
    in.passes(std::string(run.name), inputs(run.from, !tp && r + 1 == block.input.size() ? end : run.to));
    run_comms(in, run.after, p);
  }
  if (!tp) {
    wg.passes("wgrad", weights(0, end));
    return;
  }
  const std::size_t block_end = block.input.back().to;
  const std::size_t proj_dgrad = step_of(ops, steps, "proj", false), qkv_dgrad = step_of(ops, steps, "qkv", false);
  const std::size_t qkv_wgrad = step_of(ops, steps, "qkv", true);
  const CollectiveKind reduce = sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
  if (block.whole_sequence) in.comm("bwd.tp", reduce, act);
  in.passes("bwd.ln2", inputs(block_end, proj_dgrad));
  if (sp) in.comm("bwd.tp", CollectiveKind::AllGather, gathered);
  in.passes("bwd.attn", inputs(proj_dgrad, qkv_dgrad + 1));
  in.comm("bwd.tp", reduce, act);
  in.passes("bwd.ln1", inputs(qkv_dgrad + 1, end));
  if (!sp) {
    wg.passes("wgrad", weights(0, end));
    return;
  }
  // An async collective is waited for by the second compute piece after it.
  const bool overlap = p.tp_comm_overlap;
  if (block.weights_gather_input) wg.comm("wgrad.tp", CollectiveKind::AllGather, gathered, overlap);
  wg.passes(std::string(block.weight_first.name), weights(block.weight_first.from, block.weight_first.to));
  wg.split();
  wg.passes(std::string(block.weight_last.name), weights(block.weight_last.from, block.weight_last.to));
  wg.comm("wgrad.tp", CollectiveKind::AllGather, gathered, overlap);
  wg.passes("wgrad.attn", weights(block.weight_last.to, qkv_wgrad));
  wg.split();
  wg.passes("wgrad.qkv", weights(qkv_wgrad, end));
}

}  // namespace

LayerPieces layer_pieces(const TransformerConfig& m, const Workload& w, const ParallelPlan& p,
                         const KernelTimer& timer, bool split) {
  const Sharding shard{p.tp, p.sequence_parallel};
  const auto ops = layer_ops(m, w, shard);
  const Bytes act = activation(m, w);
  const Bytes gathered = gathered_activation(m, w);
  const bool tp = p.tp > 1, sp = tp && p.sequence_parallel;
  const std::size_t fc1 = index_of(ops, "fc1"), res2 = index_of(ops, "residual2");
  LayerPieces lp(timer);

  // Forward: [ln1] (AG) [qkv .. proj] AR|RS [residual1, ln2] (AG) [fc1 .. fc2] AR|RS [residual2];
  // `first`: the chunk's first micro-batch (with the once-per-iteration kernels).
  auto forward = [&](PieceList& f, bool first) {
    if (!tp) {
      f.passes("fwd", forward_passes(ops, 0, ops.size(), first));
      return;
    }
    attention_forward(f, ops, fc1, p, act, gathered, first);
    f.passes("fwd.mlp", forward_passes(ops, second_block_forward_start(ops, fc1, p), res2, first));
    f.comm("fwd.tp", sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce, act);
    f.passes("fwd.res2", forward_passes(ops, res2, ops.size(), first));
  };
  forward(lp.forward, false);
  if (has_weight_casts(ops)) forward(lp.first_forward.emplace(timer), true);

  PieceList& b = lp.backward;
  if (p.recompute == Recompute::Full) b.append(lp.forward, "recompute.");
  if (p.recompute == Recompute::Selective && !w.flash_attention) {
    // Recompute the attention core: scores to context (scale, mask, softmax,
    // dropout in between) and the context's permute to [s, b, h] (inside
    // Megatron's checkpointed CoreAttention / DotProductAttention).
    b.passes("recompute.attn",
             forward_passes(ops, index_of(ops, "scores"), index_of(ops, "context_copy") + 1));
  }
  const auto steps = backward_steps(ops);
  auto range = [&](std::size_t from, std::size_t to) { return backward_passes(ops, steps, from, to); };
  const std::size_t fc2_dgrad = step_of(ops, steps, "fc2", false), fc1_dgrad = step_of(ops, steps, "fc1", false);
  const std::size_t fc1_wgrad = step_of(ops, steps, "fc1", true);
  if (split) {
    // B: the recomputation and the input gradients; W: the weight gradients.
    BlockBackward mlp;
    mlp.start = fc2_dgrad;
    mlp.input = {{"bwd.mlp", fc2_dgrad, fc1_dgrad + 1, {}}};
    mlp.one_piece_without_tp = true;
    mlp.weight_first = {"wgrad.mlp", 0, fc1_wgrad, {}};
    mlp.weight_last = {"wgrad.fc1", fc1_wgrad, fc1_wgrad + 1, {}};
    lp.input_backward.append(b);
    split_layer_backward(lp.input_backward, lp.weight_backward, ops, steps, mlp, p, act, gathered);
  }
  if (!tp) {
    b.passes("bwd", range(0, steps.size()));
    return lp;
  }
  // Column-parallel linears: the input gradient is all-reduced (reduce-
  // scattered with SP) while the weight gradient is computed (Megatron's
  // async tensor-parallel communication; with tp_comm_overlap off the
  // all-reduce blocks). With SP the gradient entering each row-parallel
  // linear is all-gathered first, and the column-parallel input is
  // re-gathered for its weight gradient.
  const bool overlap = p.tp_comm_overlap;
  const CollectiveKind grad_kind = sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
  if (sp) {
    b.passes("bwd.res2", range(0, fc2_dgrad));
    b.comm("bwd.tp", CollectiveKind::AllGather, gathered);
  }
  b.passes("bwd.mlp", range(sp ? fc2_dgrad : 0, fc1_dgrad));
  if (sp) b.comm("bwd.tp", CollectiveKind::AllGather, gathered, overlap);
  b.passes("bwd.fc1.dgrad", range(fc1_dgrad, fc1_wgrad));
  b.comm("bwd.tp", grad_kind, act, overlap);
  b.passes("bwd.fc1.wgrad", range(fc1_wgrad, fc1_wgrad + 1));
  b.split();
  attention_backward(b, ops, steps, fc1_wgrad + 1, p, act, gathered);
  return lp;
}

LayerPieces moe_layer_pieces(const TransformerConfig& m, const Workload& w, const ParallelPlan& p,
                             const KernelTimer& timer, bool split) {
  // Megatron-Core's all-to-all token dispatcher. Each rank routes its own
  // tokens (its sequence shard with tp > 1, which needs SP): it dispatches
  // them to the expert-parallel group (A2A), the tensor-parallel group
  // all-gathers what arrived (the experts' columns are split tp ways), the
  // experts run, their partial outputs are reduce-scattered back (RS) and
  // combined (A2A). Shared experts run on the whole sequence as a dense MLP
  // (AG of the block input, RS of their output).
  const Sharding shard{p.tp, p.sequence_parallel, p.ep};
  const auto ops = moe_layer_ops(m, w, shard);
  const Bytes act = activation(m, w);
  const Bytes gathered = gathered_activation(m, w);  // the attention's and the shared experts' gathers
  const Bytes a2a = expert_all_to_all_bytes(m, w, shard);
  const Bytes routed(expert_tokens_per_rank(m, w, shard) * m.hidden * dtype_bytes(w.dtype));
  const bool tp = p.tp > 1, ep = p.ep > 1, shared = m.moe.shared_experts > 0;
  const std::size_t router = index_of(ops, "router");
  const std::size_t fc1 = index_of(ops, "fc1"), unpermute = index_of(ops, "unpermute");
  const std::size_t res2 = index_of(ops, "residual2");
  const std::size_t shared_fc1 = shared ? index_of(ops, "shared_fc1") : fc1;
  LayerPieces lp(timer);
  auto fwd = [&](std::size_t from, std::size_t to, bool first = false) {
    return forward_passes(ops, from, to, first);
  };

  // Forward: ... [ln2] [router, top-k, permute] (AG [shared experts] RS) A2A (AG) [experts] (RS) A2A
  // [unpermute, residual2].
  // Megatron-Core's all-to-all dispatcher, dropless (capacity_factor 1),
  // copies the tokens per expert to the host (.cpu(), blocking) for the
  // split sizes: the host drains the GPU after the router, before the
  // shared experts, the dispatch and the experts, in every MoE layer's
  // forward (and its recomputation). Padded to capacity
  // (--moe-pad-expert-input-to-capacity) the sizes are known: no sync.
  const bool sync = m.moe.dropless();
  // `first`: the chunk's first micro-batch (with the once-per-iteration kernels).
  auto forward = [&](PieceList& f, bool first) {
    if (!tp) {
      f.passes("fwd", fwd(0, shared_fc1, first));
      if (sync) f.host_sync();
      if (shared) f.passes("fwd.shared", fwd(shared_fc1, fc1, first));
    } else {
      attention_forward(f, ops, router, p, act, gathered, first, false);
      f.passes("fwd.router", fwd(router, shared_fc1, first));
      if (sync) f.host_sync();
      if (shared) {
        // The shared experts' fc1 gathers its input (in FP8 under fp8 training).
        f.comm("fwd.tp", CollectiveKind::AllGather, gathered);
        f.passes("fwd.shared", fwd(shared_fc1, fc1, first));
        f.comm("fwd.tp", CollectiveKind::ReduceScatter, act);
      }
    }
    // The token dispatcher's gathers are its own (bf16), not Transformer Engine's.
    if (ep) f.expert_comm("fwd.ep.dispatch", a2a);
    if (tp) f.comm("fwd.tp", CollectiveKind::AllGather, routed);
    f.passes("fwd.experts", fwd(fc1, unpermute, first));
    if (tp) f.comm("fwd.tp", CollectiveKind::ReduceScatter, routed);
    if (ep) f.expert_comm("fwd.ep.combine", a2a);
    f.passes("fwd.unpermute", fwd(unpermute, res2, first));
    f.passes("fwd.res2", fwd(res2, ops.size(), first));
  };
  forward(lp.forward, false);
  if (has_weight_casts(ops)) forward(lp.first_forward.emplace(timer), true);

  PieceList& b = lp.backward;
  if (p.recompute == Recompute::Full) b.append(lp.forward, "recompute.");
  if (p.recompute == Recompute::Selective && !w.flash_attention) {
    b.passes("recompute.attn", fwd(index_of(ops, "scores"), index_of(ops, "context_copy") + 1));
  }
  const auto steps = backward_steps(ops);
  auto range = [&](std::size_t from, std::size_t to) { return backward_passes(ops, steps, from, to); };
  const std::size_t unpermute_dgrad = step_of(ops, steps, "unpermute", false);
  const std::size_t fc2_dgrad = step_of(ops, steps, "fc2", false),
                    fc1_wgrad = step_of(ops, steps, "fc1", true);
  const std::size_t ln2_dgrad = step_of(ops, steps, "ln2", false);
  // The shared experts' backward steps: [fc1_wgrad + 1, shared_end).
  const std::size_t shared_end = shared ? step_of(ops, steps, "shared_fc1", true) + 1 : fc1_wgrad + 1;
  using Comm = BlockBackward::Comm;
  const Comm combine{"bwd.ep.combine", CollectiveKind::AllToAll, a2a, true};
  const Comm dispatch{"bwd.ep.dispatch", CollectiveKind::AllToAll, a2a, true};
  // The backward of the forward's reduce-scatter is an all-gather, and back.
  const Comm gather_routed{"bwd.tp", CollectiveKind::AllGather, routed, false};
  const Comm scatter_routed{"bwd.tp", CollectiveKind::ReduceScatter, routed, false};
  const Comm gather_act{"bwd.tp", CollectiveKind::AllGather, gathered, false};  // shared_fc2's dy
  const Comm scatter_act{"bwd.tp", CollectiveKind::ReduceScatter, act, false};
  // B (and the fused backward): the runs and their collectives in order.
  std::vector<BlockBackward::Run> runs;
  runs.push_back({"bwd.unpermute", unpermute_dgrad, fc2_dgrad, {combine, gather_routed}});
  runs.push_back({"bwd.experts", fc2_dgrad, fc1_wgrad + 1, {scatter_routed, dispatch}});
  if (shared && tp) {
    runs.back().after.push_back(gather_act);
    runs.push_back({"bwd.shared", fc1_wgrad + 1, shared_end, {scatter_act}});
  }
  runs.push_back({"bwd.router", runs.back().to, ln2_dgrad, {}});
  if (split) {
    // B: the recomputation, then the input gradients with the all-to-alls and
    // tensor-parallel collectives blocking; W: the weight gradients (the
    // shared experts' input re-gathered with SP; the experts' inputs are kept).
    BlockBackward moe;
    moe.start = unpermute_dgrad;
    moe.input = runs;
    moe.whole_sequence = false;
    moe.weights_gather_input = shared;
    moe.weight_first = {"wgrad.experts", 0, fc1_wgrad + 1, {}};
    moe.weight_last = {"wgrad.router", fc1_wgrad + 1, ln2_dgrad, {}};
    lp.input_backward.append(b);
    split_layer_backward(lp.input_backward, lp.weight_backward, ops, steps, moe, p, act, gathered);
  }
  b.passes("bwd.res2", range(0, unpermute_dgrad));
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const bool last = r + 1 == runs.size();
    if (runs[r].name == "bwd.shared") {
      // The shared experts' fused backward, as the dense MLP's: their input
      // re-gathered for shared_fc1's weight gradient while its input
      // gradient is computed, then reduce-scattered while the weight
      // gradient is (both async unless tp_comm_overlap is off).
      const std::size_t dgrad = step_of(ops, steps, "shared_fc1", false);
      const std::size_t wgrad = step_of(ops, steps, "shared_fc1", true);
      const bool overlap = p.tp_comm_overlap;
      b.passes("bwd.shared", range(runs[r].from, dgrad));
      b.comm("bwd.tp", CollectiveKind::AllGather, gathered, overlap);
      b.passes("bwd.shared.fc1.dgrad", range(dgrad, wgrad));
      b.comm("bwd.tp", CollectiveKind::ReduceScatter, act, overlap);
      b.passes("bwd.shared.fc1.wgrad", range(wgrad, runs[r].to));
      b.split();
      continue;
    }
    b.passes(std::string(runs[r].name), range(runs[r].from, last && !tp ? steps.size() : runs[r].to));
    run_comms(b, runs[r].after, p);
  }
  if (!tp) return lp;
  // The router's input gradient is its own shard's: no reduction before the
  // attention block's backward.
  attention_backward(b, ops, steps, ln2_dgrad, p, act, gathered);
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
  const Bytes act = activation(m, w);
  const CollectiveKind reduce = sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
  LayerPieces& embed = out.embedding;
  LayerPieces& head = out.lm_head;
  const auto ef = embedding_ops(m, w, shard);
  // The vocabulary-parallel lookup's partial sums are reduced over the tp
  // group right after the lookups, before the position add and the
  // dropout. With sequence parallelism Megatron reduce-scatters them only
  // when there is no position table (LanguageModelEmbedding's
  // reduce_scatter_embeddings); with one it all-reduces, adds the positions
  // on every token and scatters the sum (a split, no communication).
  const std::size_t lookups = m.learned_positions ? 2 : 1;
  embed.forward.passes("fwd", forward_passes(ef, 0, lookups));
  const CollectiveKind embed_reduce =
      sp && !m.learned_positions ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
  if (tp) embed.forward.comm("fwd.tp", embed_reduce, act);
  if (lookups < ef.size()) embed.forward.passes("fwd", forward_passes(ef, lookups, ef.size()));
  if (sp) embed.backward.comm("bwd.tp", CollectiveKind::AllGather, act);
  const auto esteps = backward_steps(ef);
  embed.backward.passes("bwd", backward_passes(ef, esteps, 0, esteps.size()));
  const auto hf = lm_head_ops(m, w, shard);
  head.forward.passes("fwd", forward_passes(hf, 0, 1));
  if (sp) head.forward.comm("fwd.tp", CollectiveKind::AllGather, act);
  if (!tp) {
    head.forward.passes("fwd", forward_passes(hf, 1, hf.size()));
  } else {
    // Vocabulary-parallel cross entropy (Megatron's
    // _VocabParallelCrossEntropy): each rank holds a slice of the vocabulary,
    // so three values per token are all-reduced over the tensor-parallel
    // group, each in FP32: the logits' maximum (after the reductions), the
    // target's logit (after the shift) and the sum of the exponentials
    // (after the exp). Its backward needs none.
    const Bytes per_token(w.micro_batch * w.seq_len * 4);
    const std::size_t shift = index_of(hf, "loss.shift"), exp = index_of(hf, "loss.exp");
    const std::size_t normalize = index_of(hf, "loss.normalize");
    head.forward.passes("fwd", forward_passes(hf, 1, shift));
    head.forward.comm("fwd.tp.loss", CollectiveKind::AllReduce, per_token);
    head.forward.passes("fwd.loss", forward_passes(hf, shift, exp));
    head.forward.comm("fwd.tp.loss", CollectiveKind::AllReduce, per_token);
    head.forward.passes("fwd.loss", forward_passes(hf, exp, normalize));
    head.forward.comm("fwd.tp.loss", CollectiveKind::AllReduce, per_token);
    head.forward.passes("fwd.loss", forward_passes(hf, normalize, hf.size()));
  }
  // The loss, the LM head's dgrad and wgrad, the final layer norm. The head
  // is a column-parallel linear as the layers' (Megatron's
  // LinearWithGradAccumulationAndAsyncCommunication): with SP its input is
  // re-gathered for the weight gradient while the dgrad runs, and its input
  // gradient's reduction overlaps the wgrad unless tp_comm_overlap is off
  // (helper 71: no re-gather, and a reduction after the wgrad).
  const auto hsteps = backward_steps(hf);
  const std::size_t ln_f = step_of(hf, hsteps, "ln_f", false);
  const std::size_t head_dgrad = step_of(hf, hsteps, "lm_head", false);
  const std::size_t head_wgrad = step_of(hf, hsteps, "lm_head", true);
  const bool overlap = p.tp_comm_overlap;
  if (!tp) {
    head.backward.passes("bwd", backward_passes(hf, hsteps, 0, hsteps.size()));
  } else {
    if (sp) {
      head.backward.passes("bwd.loss", backward_passes(hf, hsteps, 0, head_dgrad));
      head.backward.comm("bwd.tp", CollectiveKind::AllGather, act, overlap);
    }
    head.backward.passes("bwd", backward_passes(hf, hsteps, sp ? head_dgrad : 0, head_wgrad));
    head.backward.comm("bwd.tp", reduce, act, overlap);
    head.backward.passes("bwd.wgrad", backward_passes(hf, hsteps, head_wgrad, ln_f));
    head.backward.split();
    head.backward.passes("bwd.ln_f", backward_passes(hf, hsteps, ln_f, hsteps.size()));
  }
  if (split) {
    if (sp) embed.input_backward.comm("bwd.tp", CollectiveKind::AllGather, act);
    embed.input_backward.passes("bwd", backward_passes(ef, esteps, 0, esteps.size(), BackwardPart::Input));
    embed.weight_backward.passes("wgrad", backward_passes(ef, esteps, 0, esteps.size(), BackwardPart::Weight));
    head.input_backward.passes("bwd", backward_passes(hf, hsteps, 0, ln_f, BackwardPart::Input));
    if (tp) head.input_backward.comm("bwd.tp", reduce, act);
    head.input_backward.passes("bwd", backward_passes(hf, hsteps, ln_f, hsteps.size(), BackwardPart::Input));
    // W re-gathers the head's input with SP (B's gather is gone by then).
    if (sp) head.weight_backward.comm("wgrad.tp", CollectiveKind::AllGather, act);
    head.weight_backward.passes("wgrad", backward_passes(hf, hsteps, 0, hsteps.size(), BackwardPart::Weight));
  }
  if (!p.tp_collectives) {
    for (LayerPieces* l : {&out.layer, &out.embedding, &out.lm_head}) l->drop_tensor_parallel_collectives();
    if (out.moe_layer) out.moe_layer->drop_tensor_parallel_collectives();
  }
  return out;
}

}  // namespace tessera::parallelism
