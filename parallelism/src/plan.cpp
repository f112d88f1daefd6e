// The general training planner (see docs/parallelism.md for the formulas).
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <utility>

#include "tessera/error.hpp"
#include "tessera/parallelism/plan.hpp"

namespace tessera::parallelism {

using node_model::dtype_bytes;

bool PlanSummary::oom() const {
  return std::any_of(memory_per_stage.begin(), memory_per_stage.end(), [](const MemoryEstimate& m) { return m.oom(); });
}

namespace {

constexpr std::int64_t kWorkspaceBytes = 1LL << 30;  // CUDA context + cuBLAS workspace + allocator slack

/// Activation bytes one layer keeps for backward per micro-batch (Korthikanti
/// et al., "Reducing Activation Recomputation in Large Transformer Models",
/// 2022, Table 2), for 16-bit activations; scaled by dtype_bytes / 2.
double layer_activation_bytes(const TransformerConfig& m, const Workload& w, const ParallelPlan& p) {
  const double s = static_cast<double>(w.seq_len), b = static_cast<double>(w.micro_batch);
  const double h = static_cast<double>(m.hidden), a = static_cast<double>(m.heads), t = p.tp;
  const double sbh = s * b * h;
  double bytes = 0;
  switch (p.recompute) {
    case Recompute::None:
      // The 5as/h term is the s x s matrices per head (softmax output 2,
      // dropout mask 1, dropout output 2 bytes per element); FlashAttention
      // keeps none of them (only its softmax statistics, s per head:
      // negligible), so Selective's figure holds.
      if (w.flash_attention) {
        bytes = p.sequence_parallel ? sbh * 34 / t : sbh * (10 + 24 / t);
        break;
      }
      bytes = p.sequence_parallel ? sbh / t * (34 + 5 * a * s / h) : sbh * (10 + 24 / t + 5 * a * s / (h * t));
      break;
    case Recompute::Selective:
      bytes = p.sequence_parallel ? sbh * 34 / t : sbh * (10 + 24 / t);
      break;
    case Recompute::Full:
      bytes = p.sequence_parallel ? 2 * sbh / t : 2 * sbh;
      break;
  }
  return bytes * dtype_bytes(w.dtype) / 2.0;
}

/// Activation bytes one layer keeps from its B until its W under a
/// zero-bubble schedule (B frees the rest): the inputs of the four linears
/// (QKV and fc1 inputs 2sbh each, sharded with SP and re-gathered by W; the
/// attention context 2sbh/t; the GeLU output 8sbh/t) and the gradients of
/// their outputs (QKV 6sbh/t, fc1 8sbh/t; projection and fc2 2sbh each, full
/// size as the row-parallel linears take them). 16-bit, scaled by
/// dtype_bytes / 2. For t = 1 this is Qi et al.'s M_W = 32 sbh (Table 1).
double layer_weight_grad_bytes(const TransformerConfig& m, const Workload& w, const ParallelPlan& p) {
  const double sbh = static_cast<double>(w.seq_len) * static_cast<double>(w.micro_batch) *
                     static_cast<double>(m.hidden);
  const double t = p.tp;
  const double bytes = p.sequence_parallel ? sbh * (4 + 28 / t) : sbh * (8 + 24 / t);
  return bytes * dtype_bytes(w.dtype) / 2.0;
}

/// Activation bytes one MoE layer keeps for backward per micro-batch, for
/// 16-bit activations (scaled by dtype_bytes / 2): the dense layer's
/// (layer_activation_bytes) with the MLP's 19sbh (fc1 input 2sbh and dropout
/// mask sbh, replicated without SP; GeLU input and output 16sbh/t) replaced by
/// the router input 2sbh, its FP32 probabilities 4sb x experts and the
/// dropout mask sbh (replicated without SP), per routed token (R per rank)
/// the experts' input 2h, activation input 2f' (4f' gated), activation
/// output 2f' (+2f' gated: the gate's output) and output 2h (f' =
/// expert_ffn_hidden / t), and the shared experts' activations per token
/// likewise. With full recomputation: the layer input, as dense.
double moe_layer_activation_bytes(const TransformerConfig& m, const Workload& w, const ParallelPlan& p) {
  const double dense = layer_activation_bytes(m, w, p);
  if (p.recompute == Recompute::Full) return dense;
  const double s = static_cast<double>(w.seq_len), b = static_cast<double>(w.micro_batch);
  const double h = static_cast<double>(m.hidden), t = p.tp;
  const double sbh = s * b * h;
  const double rep = p.sequence_parallel ? 1.0 / t : 1.0;  // replicated across TP ranks without SP
  const double mlp = 3 * sbh * rep + 16 * sbh / t;
  const double gated = m.gated_mlp ? 2.0 : 1.0;
  const double fe = static_cast<double>(m.expert_ffn()) / t;
  const double routed =
      static_cast<double>(expert_tokens_per_rank(m, w, Sharding{p.tp, p.sequence_parallel, p.ep}));
  double moe = 3 * sbh * rep + 4 * s * b * static_cast<double>(m.moe.experts) * rep;
  moe += routed * (4 * h + 2 * fe * (2 * gated));
  const double fs = static_cast<double>(m.moe.shared_experts * m.expert_ffn()) / t;
  moe += s * b * 2 * fs * (2 * gated);
  return dense + (moe - mlp) * dtype_bytes(w.dtype) / 2.0;
}

/// Activation bytes one MoE layer keeps from its B until its W under a
/// zero-bubble schedule, for 16-bit activations (scaled by dtype_bytes / 2):
/// the dense layer's (layer_weight_grad_bytes) with its MLP's share (fc1
/// input 2sbh, 2sbh/t with SP; GeLU output 8sbh/t; fc1 output gradient
/// 8sbh/t; fc2 output gradient 2sbh) replaced by the router's input (2sbh,
/// /t with SP) and output gradient (4sb x experts, FP32), the shared
/// experts' activation output 2f_s' and fc1 output gradient 2f_s' (4f_s'
/// gated) per token and their fc2 output gradient 2sbh, and per routed token
/// the experts' fc1 input 2h, fc2 input 2f', fc1 output gradient 2f' (4f'
/// gated) and fc2 output gradient 2h.
double moe_layer_weight_grad_bytes(const TransformerConfig& m, const Workload& w, const ParallelPlan& p) {
  const double s = static_cast<double>(w.seq_len), b = static_cast<double>(w.micro_batch);
  const double h = static_cast<double>(m.hidden), t = p.tp;
  const double sbh = s * b * h;
  const bool sp = p.sequence_parallel;
  const double dense_mlp = sp ? 2 * sbh + 18 * sbh / t : 4 * sbh + 16 * sbh / t;
  const double gated = m.gated_mlp ? 2.0 : 1.0;
  const double fe = static_cast<double>(m.expert_ffn()) / t;
  const double fs = static_cast<double>(m.moe.shared_experts * m.expert_ffn()) / t;
  const double routed =
      static_cast<double>(expert_tokens_per_rank(m, w, Sharding{p.tp, p.sequence_parallel, p.ep}));
  double moe = (sp ? 2 * sbh / t : 2 * sbh) + 4 * s * b * static_cast<double>(m.moe.experts);
  if (m.moe.shared_experts > 0) moe += s * b * 2 * fs * (1 + gated) + 2 * sbh;
  moe += routed * (4 * h + 2 * fe * (1 + gated));
  return layer_weight_grad_bytes(m, w, p) + (moe - dense_mlp) * dtype_bytes(w.dtype) / 2.0;
}

/// Layers of chunk `k` before it, i.e. the global index of its first layer.
std::int64_t chunk_first_layer(const std::vector<std::int64_t>& chunks, int k) {
  std::int64_t first = 0;
  for (int c = 0; c < k; ++c) first += chunks[static_cast<std::size_t>(c)];
  return first;
}

/// Parameters held by one rank of a pipeline stage: the experts' (divided by
/// ep) apart from the rest, as their gradients and optimizer states are
/// reduced and sharded over different data-parallel groups.
struct StageParams {
  std::int64_t dense = 0;
  std::int64_t expert = 0;
  [[nodiscard]] std::int64_t total() const { return dense + expert; }
};

/// Parameters held by one rank of pipeline stage `stage`.
StageParams stage_params(const TransformerConfig& m, const Workload& w, const ParallelPlan& p,
                         const std::vector<std::int64_t>& chunks, int stage) {
  std::int64_t layers = 0, moe_layers = 0;
  for (int c = 0; c < p.virtual_stages; ++c) {
    const int k = c * p.pp + stage;
    const std::int64_t n = chunks[static_cast<std::size_t>(k)];
    layers += n;
    moe_layers += m.moe_layers_in(chunk_first_layer(chunks, k), n);
  }
  StageParams out;
  std::int64_t& params = out.dense;
  params = (layers - moe_layers) * m.params_per_layer_per_tp_rank(p.tp);
  if (moe_layers > 0) {
    params += moe_layers * m.moe_layer_dense_params_per_rank(p.tp);
    out.expert = moe_layers * m.moe_layer_expert_params_per_rank(p.tp, p.ep);
  }
  const std::int64_t word = padded_vocab_per_rank(m, w, p.tp) * m.hidden;
  if (stage == 0) params += word + (m.learned_positions ? w.seq_len * m.hidden : 0);
  // The LM head (an untied one, or the tied one's copy on the last stage) and the final norm.
  if (stage == p.pp - 1) params += (p.pp > 1 || !m.tied_embeddings ? word : 0) + 2 * m.hidden;
  return out;
}

MemoryEstimate stage_memory(const TransformerConfig& m, const Workload& w, const ParallelPlan& p,
                            const std::vector<std::int64_t>& chunks, std::int64_t micro_batches, int stage,
                            const StageParams& sp, Bytes capacity) {
  MemoryEstimate e;
  e.capacity = capacity;
  // 16-bit training keeps an FP32 master copy (TF32 trains FP32 weights).
  const bool mixed = w.dtype != node_model::DType::FP32 && w.dtype != node_model::DType::TF32;
  const std::int64_t dp = p.dp;
  auto shard = [&](std::int64_t bytes, int from_stage) { return p.zero_stage >= from_stage ? (bytes + dp - 1) / dp : bytes; };
  // The experts' states are sharded over the dp / ep ranks holding the same experts.
  const std::int64_t expert_dp = dp / p.ep;
  auto shard_experts = [&](std::int64_t bytes, int from_stage) {
    return p.zero_stage >= from_stage ? (bytes + expert_dp - 1) / expert_dp : bytes;
  };
  auto sharded = [&](std::int64_t bytes_per_param, int from_stage) {
    const std::int64_t dense = shard(sp.dense * bytes_per_param, from_stage);
    return sp.expert > 0 ? dense + shard_experts(sp.expert * bytes_per_param, from_stage) : dense;
  };
  e.weights = Bytes(sharded(dtype_bytes(w.dtype), 3));
  // Gradients as the framework accumulates them (Megatron: FP32 main
  // gradients with bf16, node_model::OpRules::grad_dtype).
  e.gradients = Bytes(sharded(dtype_bytes(w.rules().grad_dtype()), 2));
  // Adam: two FP32 moments, plus an FP32 master copy when training in 16 bits.
  e.optimizer_states = Bytes(sharded(mixed ? 12 : 8, 1));

  const double per_layer = layer_activation_bytes(m, w, p);
  const double per_moe_layer = m.is_moe() ? moe_layer_activation_bytes(m, w, p) : 0.0;
  const double per_moe_layer_w = m.is_moe() ? moe_layer_weight_grad_bytes(m, w, p) : 0.0;
  // Zero-bubble schedules: what each layer keeps from B to W.
  const double per_layer_w = layer_weight_grad_bytes(m, w, p);
  const double logits = static_cast<double>(w.micro_batch * w.seq_len * padded_vocab_per_rank(m, w, p.tp)) * 4.0;
  const int last_chunk = p.pp * p.virtual_stages - 1;
  double held = 0, peak = 0;
  std::int64_t in_flight = 0;  // micro-batch chunks whose F has run and whose backward has not finished
  auto track = [&] {
    if (held > peak) {
      peak = held;
      e.peak_in_flight = std::max(e.peak_in_flight, in_flight);
    }
  };
  for (const PipelineStep& st : pipeline_order(p.schedule, p.pp, stage, micro_batches, p.virtual_stages)) {
    const int k = st.chunk * p.pp + stage;
    const auto layers = static_cast<double>(chunks[static_cast<std::size_t>(k)]);
    double bytes = per_layer * layers;
    // The LM head's logits (their gradient, in place) stay until its weight gradient.
    double kept = per_layer_w * layers;
    if (m.is_moe()) {
      const auto moe_layers = static_cast<double>(
          m.moe_layers_in(chunk_first_layer(chunks, k), chunks[static_cast<std::size_t>(k)]));
      bytes += (per_moe_layer - per_layer) * moe_layers;
      kept += (per_moe_layer_w - per_layer_w) * moe_layers;
    }
    if (k == last_chunk) {
      bytes += logits;
      kept += logits;
    }
    switch (st.kind) {
      case StepKind::F:
        held += bytes;
        ++in_flight;
        track();
        break;
      case StepKind::B:
        if (splits_backward(p.schedule)) {
          // B frees the activations W does not need (with full recomputation
          // it recomputes them first: what W keeps can exceed what F kept).
          held += kept - bytes;
          track();
        } else {
          held -= bytes;
          --in_flight;
        }
        break;
      case StepKind::W:
        held -= kept;
        --in_flight;
        break;
    }
  }
  e.activations = Bytes(static_cast<std::int64_t>(peak));
  std::int64_t workspace = kWorkspaceBytes;
  if (p.recompute == Recompute::Full) {
    // Backward of a layer holds that layer's recomputed activations.
    ParallelPlan none = p;
    none.recompute = Recompute::None;
    double largest = layer_activation_bytes(m, w, none);
    if (m.is_moe()) largest = std::max(largest, moe_layer_activation_bytes(m, w, none));
    workspace += static_cast<std::int64_t>(largest);
  }
  if (m.is_moe() && p.ep > 1) {
    // The expert-parallel all-to-all's send and receive buffers (one layer's at a time).
    workspace += 2 * expert_all_to_all_bytes(m, w, Sharding{p.tp, p.sequence_parallel, p.ep}).count();
  }
  e.workspace = Bytes(workspace);
  return e;
}

// ---------------------------------------------------------------------------
// Task-graph construction.

/// Host-side shape of a kernel sequence (Task::host_issue / host_span): `n`
/// launches issued `c` apart, each kernel running once issued and the GPU
/// free. `span` = max over launches j of (j c + the GPU time from kernel j
/// on): the earliest end of the sequence when the host starts issuing it at
/// 0 (exact for kernels of equal length within each pass).
struct HostShape {
  std::int64_t launches = 0;
  double duration_s = 0;
  double span_s = 0;
  bool any = false;

  static HostShape of_pass(int launches, double duration_s, double c) {
    HostShape h;
    h.any = launches > 0 || duration_s > 0;
    h.launches = launches;
    h.duration_s = duration_s;
    // Units of equal length: the bound is the first launch (c + D) or the last (L c + D / L).
    h.span_s = launches > 0 ? std::max(c + duration_s, launches * c + duration_s / launches) : duration_s;
    return h;
  }
  void then(const HostShape& q, double c) {
    if (!q.any) return;
    if (!any) {
      *this = q;
      return;
    }
    span_s = std::max(span_s + q.duration_s, static_cast<double>(launches) * c + q.span_s);
    launches += q.launches;
    duration_s += q.duration_s;
  }
};

/// A piece of a pass: a compute kernel sequence, or a tensor-parallel
/// collective. An async collective is waited for by the second compute piece
/// after it (the one after the computation it overlaps with).
struct Piece {
  bool compute = true;
  std::string name;
  Time duration;
  Flops flops;
  HostShape host;
  CollectiveKind kind = CollectiveKind::AllReduce;
  Bytes bytes;
  bool async = false;
  /// In the expert-parallel group (else the tensor-parallel group).
  bool expert = false;
};

/// How kernels are timed: under the Megatron profile, device time plus an
/// explicit host model (even with zero host costs, which then means an
/// infinitely fast host); under eager, the node model's isolated kernel times,
/// whose per-launch floors stand for the host (plus any host costs given).
class KernelTimer {
 public:
  KernelTimer(const node_model::KernelPredictor& pred, const Workload& work)
      : pred_(pred),
        device_(node_model::is_megatron(work.framework) || work.host.enabled()),
        c_(work.host.per_launch.seconds()) {}
  [[nodiscard]] Time time(const node_model::Kernel& k) const { return device_ ? pred_.predict_device(k) : pred_.predict(k); }
  [[nodiscard]] double per_launch_s() const { return c_; }
  [[nodiscard]] bool host_model() const { return device_; }

 private:
  const node_model::KernelPredictor& pred_;
  bool device_;
  double c_;
};

class PieceList {
 public:
  explicit PieceList(const KernelTimer& timer) : timer_(timer) {}
  /// One compute piece of the given passes, in order.
  void passes(const std::string& name, const std::vector<const Pass*>& ps) {
    Piece p;
    p.name = name;
    for (const Pass* pass : ps) {
      Time d;
      for (const auto& k : pass->kernels) {
        d += timer_.time(k);
        p.flops += k.flops();
      }
      p.duration += d;
      p.host.then(HostShape::of_pass(pass->launches, d.seconds(), timer_.per_launch_s()), timer_.per_launch_s());
    }
    add_compute(std::move(p));
  }
  void comm(const std::string& name, CollectiveKind kind, Bytes bytes, bool async = false) {
    split_ = false;
    Piece p;
    p.name = name;
    p.compute = false;
    p.kind = kind;
    p.bytes = bytes;
    p.async = async;
    pieces_.push_back(std::move(p));
  }
  /// An all-to-all in the expert-parallel group (blocking).
  void expert_comm(const std::string& name, Bytes bytes) {
    comm(name, CollectiveKind::AllToAll, bytes);
    pieces_.back().expert = true;
  }
  /// The next compute piece starts a new task (it overlaps a collective).
  void split() { split_ = true; }
  [[nodiscard]] const std::vector<Piece>& pieces() const { return pieces_; }
  void append(const PieceList& o) {
    for (const Piece& p : o.pieces_) {
      if (p.compute) {
        add_compute(p);
      } else {
        pieces_.push_back(p);
      }
    }
  }

 private:
  void add_compute(Piece p) {
    // Adjacent compute pieces merge into one task.
    if (!pieces_.empty() && pieces_.back().compute && !std::exchange(split_, false)) {
      pieces_.back().duration += p.duration;
      pieces_.back().flops += p.flops;
      pieces_.back().host.then(p.host, timer_.per_launch_s());
      return;
    }
    pieces_.push_back(std::move(p));
  }
  const KernelTimer& timer_;
  std::vector<Piece> pieces_;
  bool split_ = false;
};

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

/// The pieces of one layer's forward and backward on one tensor-parallel rank.
struct LayerPieces {
  PieceList forward;
  PieceList backward;  ///< including any recomputation
  /// Zero-bubble schedules (filled when `split`): B, the input gradients
  /// (with any recomputation), and W, the weight gradients.
  PieceList input_backward;
  PieceList weight_backward;
};

LayerPieces layer_pieces(const TransformerConfig& m, const Workload& w, const ParallelPlan& p,
                         const KernelTimer& timer, bool split) {
  const Sharding shard{p.tp, p.sequence_parallel};
  const auto ops = layer_ops(m, w, shard);
  const Bytes act(w.micro_batch * w.seq_len * m.hidden * dtype_bytes(w.dtype));
  const bool tp = p.tp > 1, sp = tp && p.sequence_parallel;
  const std::size_t qkv = index_of(ops, "qkv"), res1 = index_of(ops, "residual1");
  const std::size_t fc1 = index_of(ops, "fc1"), res2 = index_of(ops, "residual2");
  LayerPieces lp{PieceList(timer), PieceList(timer), PieceList(timer), PieceList(timer)};

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
  if (split) {
    // B: the recomputation and the input gradients; W: the weight gradients.
    lp.input_backward.append(b);
    split_layer_backward(lp.input_backward, lp.weight_backward, ops, steps, p, act);
  }
  if (!tp) {
    b.passes("bwd", range(0, steps.size()));
    return lp;
  }
  const std::size_t fc2_dgrad = step_of(ops, steps, "fc2", false), fc1_dgrad = step_of(ops, steps, "fc1", false);
  const std::size_t fc1_wgrad = step_of(ops, steps, "fc1", true), proj_dgrad = step_of(ops, steps, "proj", false);
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

/// The pieces of one MoE layer on one rank (docs/parallelism.md, "Mixture
/// of experts"). The attention block as in a dense layer; the MoE block:
/// [ln2] (AG) [router, top-k, permute, shared experts] A2A [experts] A2A
/// [unpermute] AR|RS [residual2]; its backward mirrors it, the tensor-
/// parallel reduction of the block's input gradient blocking after the
/// router's backward. Without expert parallelism no all-to-all runs.
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
  LayerPieces lp{PieceList(timer), PieceList(timer), PieceList(timer), PieceList(timer)};
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
  const std::size_t ln2_dgrad = step_of(ops, steps, "ln2", false),
                    proj_dgrad = step_of(ops, steps, "proj", false);
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

/// Group registry: one group per distinct (member list, purpose).
class Groups {
 public:
  std::int32_t get(const std::vector<int>& ranks, int purpose) {
    auto [it, inserted] = index_.try_emplace({purpose, ranks}, static_cast<std::int32_t>(groups_.size()));
    if (inserted) groups_.push_back(Group{ranks});
    return it->second;
  }
  std::vector<Group> take() { return std::move(groups_); }

 private:
  std::map<std::pair<int, std::vector<int>>, std::int32_t> index_;
  std::vector<Group> groups_;
};

enum Purpose {
  kTensor = 0,
  kData = 1,
  kPipeForward = 2,
  kPipeBackward = 3,
  kEmbedding = 4,
  kExpert = 5,      ///< the expert-parallel group
  kExpertData = 6,  ///< the dp / ep ranks holding the same experts
};

/// What a program's group slot stands for: the rank's TP or DP group, or the
/// pair (rank at stage `from`, rank at stage `to`) of its (tp, dp) pipeline
/// column for pipeline messages and the tied embeddings.
struct SlotRole {
  int purpose = kTensor;
  int from = -1;
  int to = -1;
  bool operator==(const SlotRole&) const = default;
};

/// The global group a slot role names for the rank at `me`.
std::int32_t bind(Groups& groups, const ParallelPlan& plan, const RankCoord& me, const SlotRole& role,
                  std::vector<int>& members) {
  members.clear();
  switch (role.purpose) {
    case kTensor:
      for (int t = 0; t < plan.tp; ++t) members.push_back(rank_of(plan, {t, me.dp, me.pp}));
      break;
    case kData:
      for (int d = 0; d < plan.dp; ++d) members.push_back(rank_of(plan, {me.tp, d, me.pp}));
      break;
    case kExpert: {
      const int first = me.dp / plan.ep * plan.ep;
      for (int e = 0; e < plan.ep; ++e) members.push_back(rank_of(plan, {me.tp, first + e, me.pp}));
      break;
    }
    case kExpertData:
      for (int d = me.dp % plan.ep; d < plan.dp; d += plan.ep)
        members.push_back(rank_of(plan, {me.tp, d, me.pp}));
      break;
    default:
      members.push_back(rank_of(plan, {me.tp, me.dp, role.from}));
      members.push_back(rank_of(plan, {me.tp, me.dp, role.to}));
      break;
  }
  return groups.get(members, role.purpose);
}

/// Builds the program of one pipeline stage, shared by its tp x dp ranks.
/// Slots are numbered in order of first use (TP and DP first), so that
/// binding each rank's slots in slot order registers its groups in the order
/// they were first needed. A collective's id is n for the n-th collective of
/// its slot: both sides of a pipeline pair and all TP/DP members issue a
/// group's collectives in the same order, so they derive the same id.
class ProgramBuilder {
 public:
  ProgramBuilder(Program& prog, const KernelTimer& timer, Time p2p_host)
      : prog_(prog), timer_(timer), p2p_host_(p2p_host) {}

  std::int32_t slot(const SlotRole& role) {
    for (std::size_t s = 0; s < roles_.size(); ++s) {
      if (roles_[s] == role) return static_cast<std::int32_t>(s);
    }
    roles_.push_back(role);
    seq_.push_back(0);
    return static_cast<std::int32_t>(roles_.size() - 1);
  }
  [[nodiscard]] const std::vector<SlotRole>& roles() const { return roles_; }

  TaskIndex compute(std::string_view name, Time duration, Flops flops, std::vector<TaskIndex> deps = {},
                    const HostShape& host = {}, Time host_extra = Time::zero()) {
    if (std::exchange(sync_before_compute_, false)) {
      // Megatron's pipeline exchanges (p2p_communication._communicate) end
      // with torch.cuda.synchronize(): the host drains the GPU before it
      // issues the next kernel. (So does a micro-batch's data step.)
      Task sync;
      sync.name = std::exchange(sync_name_, "pp.sync");
      sync.kind = TaskKind::Compute;
      sync.host_sync = true;
      if (last_compute_ >= 0) sync.deps.push_back(last_compute_);
      last_compute_ = push(std::move(sync));
    }
    Task t;
    t.name = prog_.keep_name(name);
    t.kind = TaskKind::Compute;
    t.duration = duration;
    t.flops = flops;
    if (timer_.host_model() && (host.any || host_extra > Time::zero())) {
      // Host work before the launches (host_extra) delays them all.
      t.host_issue = Time::from_seconds(static_cast<double>(host.launches) * timer_.per_launch_s()) + host_extra;
      t.host_span = std::max(duration, Time::from_seconds(host.span_s) + host_extra);
    }
    t.deps = std::move(deps);
    if (last_compute_ >= 0) t.deps.push_back(last_compute_);
    last_compute_ = push(std::move(t));
    return last_compute_;
  }

  /// The start of a micro-batch's forward step under the host model:
  /// Megatron's get_batch broadcasts the batch and reads its sizes back
  /// (`.cpu()`), which drains the GPU; then `host_work` of Python (data
  /// loader, masks, position ids) delays the step's first launch.
  void micro_batch_start(std::string_view name, Time host_work) {
    sync_before_compute_ = true;
    sync_name_ = "data.sync";
    compute(name, Time::zero(), Flops(), {}, {}, host_work);
  }

  TaskIndex collective(std::string_view name, CollectiveKind kind, std::int32_t slot, Bytes bytes,
                       std::vector<TaskIndex> deps) {
    Task t;
    t.name = prog_.keep_name(name);
    t.kind = TaskKind::Collective;
    t.collective = kind;
    t.group = slot;
    t.collective_id = seq_[static_cast<std::size_t>(slot)]++;
    t.bytes = bytes;
    t.deps = std::move(deps);
    if (timer_.host_model()) {
      t.host_issue = Time::from_seconds(timer_.per_launch_s());  // one NCCL call
      if (kind == CollectiveKind::SendRecv) {
        // A pipeline exchange: the pipeline engine's host work, then a sync.
        t.host_issue += p2p_host_;
        sync_before_compute_ = true;
      }
    }
    return push(std::move(t));
  }

  /// Emits `pieces`; the first compute waits for `first_deps`. Names are
  /// `prefix` + the piece's name (+ "." + kind for collectives).
  void pieces(const std::vector<Piece>& ps, std::string_view prefix, std::int32_t tp_slot,
              std::vector<TaskIndex> first_deps, std::int32_t ep_slot = -1) {
    std::vector<TaskIndex> wait_next = std::move(first_deps), wait_after;
    for (const Piece& p : ps) {
      name_.assign(prefix);
      name_ += p.name;
      if (p.compute) {
        compute(name_, p.duration, p.flops, std::move(wait_next), p.host);
        wait_next = std::move(wait_after);
        wait_after.clear();
        continue;
      }
      std::vector<TaskIndex> deps = wait_next;
      if (last_compute_ >= 0) deps.push_back(last_compute_);
      name_ += '.';
      name_ += to_string(p.kind);
      const TaskIndex c = collective(name_, p.kind, p.expert ? ep_slot : tp_slot, p.bytes, std::move(deps));
      (p.async ? wait_after : wait_next).push_back(c);
    }
    // Anything still outstanding is waited for by the next compute.
    wait_next.insert(wait_next.end(), wait_after.begin(), wait_after.end());
    pending_ = std::move(wait_next);
  }
  /// Collectives the next compute must wait for (left over by pieces()).
  std::vector<TaskIndex> take_pending() { return std::exchange(pending_, {}); }
  [[nodiscard]] TaskIndex last_compute() const { return last_compute_; }

 private:
  TaskIndex push(Task t) {
    prog_.tasks.push_back(std::move(t));
    return static_cast<TaskIndex>(prog_.tasks.size() - 1);
  }
  Program& prog_;
  const KernelTimer& timer_;
  Time p2p_host_;
  const char* sync_name_ = "pp.sync";
  bool sync_before_compute_ = false;  ///< a pipeline exchange was issued: sync before the next compute
  TaskIndex last_compute_ = -1;
  std::vector<SlotRole> roles_;
  std::vector<std::int64_t> seq_;  // per slot: collectives issued so far
  std::vector<TaskIndex> pending_;
  std::string name_;  // scratch
};

/// Weight, bias and norm tensors of one transformer layer (QKV, projection,
/// fc1, fc2 weights and biases; two layer norms' gains and biases).
constexpr std::int64_t kTensorsPerLayer = 12;

}  // namespace

PlanSummary estimate_memory(const TransformerConfig& model, const Workload& work, const ParallelPlan& plan,
                            Bytes gpu_memory) {
  plan.validate(model, work);
  PlanSummary s;
  s.micro_batches = plan.micro_batches(work.micro_batch);
  s.chunk_layers = chunk_layers(model.layers, plan.pp, plan.virtual_stages);
  for (int st = 0; st < plan.pp; ++st) {
    const StageParams params = stage_params(model, work, plan, s.chunk_layers, st);
    s.params_per_stage.push_back(params.total());
    s.memory_per_stage.push_back(
        stage_memory(model, work, plan, s.chunk_layers, s.micro_batches, st, params, gpu_memory));
  }
  return s;
}

PlannedTraining plan_training_detailed(const TransformerConfig& model, const Workload& given,
                                       const ParallelPlan& plan, const node_model::KernelPredictor& predictor) {
  PlannedTraining out;
  out.summary = estimate_memory(model, given, plan, predictor.gpu().memory);
  // Megatron with overlapped gradient sync is Megatron on PyTorch DDP
  // (--DDP-impl torch): gradients in .grad, no main-gradient buffer.
  Workload work = given;
  const bool torch_ddp = node_model::is_megatron(work.framework) &&
                         plan.resolved_grad_sync(work) == GradSync::Overlapped;
  if (torch_ddp) work.profile.main_grad = false;
  const PlanSummary& sum = out.summary;
  const std::int64_t m = sum.micro_batches;
  const int p = plan.pp, v = plan.virtual_stages, V = p * v;
  const bool tp = plan.tp > 1, sp = tp && plan.sequence_parallel;
  const Sharding shard{plan.tp, plan.sequence_parallel};
  const std::int64_t pbytes = dtype_bytes(work.dtype);
  const Bytes act(work.micro_batch * work.seq_len * model.hidden * pbytes);
  // Megatron's scatter-gather of pipeline tensors (without SP): each TP rank
  // sends its 1/tp slice of the activation, the receiving TP group
  // all-gathers it (over NVLink, instead of tp copies over the network).
  const bool scatter_gather =
      tp && !sp && plan.pipeline_scatter_gather && work.framework == node_model::Framework::Megatron;
  const Bytes pipe_msg = (sp || scatter_gather) ? Bytes(act.count() / plan.tp) : act;

  // Costs shared by every rank.
  const KernelTimer timer(predictor, work);
  // Zero-bubble schedules run each backward as B (input gradients) and a
  // later W (weight gradients).
  const bool split = splits_backward(plan.schedule);
  const LayerPieces layer = layer_pieces(model, work, plan, timer, split);
  // Mixture of experts: the MoE layers' pieces.
  std::optional<LayerPieces> moe_layer;
  if (model.is_moe()) moe_layer.emplace(moe_layer_pieces(model, work, plan, timer, split));
  const Sharding moe_shard{plan.tp, plan.sequence_parallel, plan.ep};
  PieceList embed_f(timer), embed_b(timer), head_f(timer), head_b(timer);
  PieceList embed_bi(timer), embed_w(timer), head_bi(timer), head_w(timer);  // split: B and W
  {
    const auto ef = embedding_ops(model, work, shard);
    embed_f.passes("fwd", forward_passes(ef, 0, ef.size()));
    if (tp) embed_f.comm("fwd.tp", sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce, act);
    if (sp) embed_b.comm("bwd.tp", CollectiveKind::AllGather, act);
    const auto esteps = backward_steps(ef);
    embed_b.passes("bwd", backward_passes(ef, esteps, 0, esteps.size()));
    const auto hf = lm_head_ops(model, work, shard);
    head_f.passes("fwd", forward_passes(hf, 0, 1));
    if (sp) head_f.comm("fwd.tp", CollectiveKind::AllGather, act);
    head_f.passes("fwd", forward_passes(hf, 1, hf.size()));
    // Loss, LM-head dgrad and wgrad; the TP reduction of the LM head's input
    // gradient; the final layer norm.
    const auto hsteps = backward_steps(hf);
    const std::size_t ln_f = step_of(hf, hsteps, "ln_f", false);
    head_b.passes("bwd", backward_passes(hf, hsteps, 0, ln_f));
    if (tp) head_b.comm("bwd.tp", sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce, act);
    head_b.passes("bwd", backward_passes(hf, hsteps, ln_f, hsteps.size()));
    if (split) {
      if (sp) embed_bi.comm("bwd.tp", CollectiveKind::AllGather, act);
      embed_bi.passes("bwd", backward_passes(ef, esteps, 0, esteps.size(), BackwardPart::Input));
      embed_w.passes("wgrad", backward_passes(ef, esteps, 0, esteps.size(), BackwardPart::Weight));
      head_bi.passes("bwd", backward_passes(hf, hsteps, 0, ln_f, BackwardPart::Input));
      if (tp) head_bi.comm("bwd.tp", sp ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce, act);
      head_bi.passes("bwd", backward_passes(hf, hsteps, ln_f, hsteps.size(), BackwardPart::Input));
      head_w.passes("wgrad", backward_passes(hf, hsteps, 0, hsteps.size(), BackwardPart::Weight));
    }
  }
  // Model FLOPs (no recomputation) of one micro-batch: per layer, and of the
  // embedding and the LM head.
  auto op_flops = [](const std::vector<OpKernels>& ops) {
    double f = 0;
    for (const auto& op : ops) {
      for (const Pass* pass : {&op.forward, &op.input_grad, &op.weight_grad}) {
        for (const auto& k : pass->kernels) f += k.flops().count();
      }
      f -= op.recomputed_flops.count();
      f -= op.padding_flops.count();
    }
    return f;
  };
  const double layer_model_flops = op_flops(layer_ops(model, work, shard));
  const double embed_model_flops = op_flops(embedding_ops(model, work, shard));
  const double head_model_flops = op_flops(lm_head_ops(model, work, shard));
  // An MoE layer's model FLOPs count the activated experts only (top_k per
  // token, no capacity padding: OpKernels::padding_flops).
  const double moe_model_flops = model.is_moe() ? op_flops(moe_layer_ops(model, work, moe_shard)) : 0.0;
  {
    double per_replica_rank_sum = 0;  // over the pp stages of one (tp, dp) column
    for (int stage = 0; stage < p; ++stage) {
      std::int64_t layers_here = 0, moe_here = 0;
      for (int c = 0; c < v; ++c) {
        const int k = c * p + stage;
        const std::int64_t n = sum.chunk_layers[static_cast<std::size_t>(k)];
        layers_here += n;
        moe_here += model.moe_layers_in(chunk_first_layer(sum.chunk_layers, k), n);
      }
      double f = static_cast<double>(layers_here - moe_here) * layer_model_flops;
      if (moe_here > 0) f += static_cast<double>(moe_here) * moe_model_flops;
      if (stage == 0) f += embed_model_flops;
      if (stage == p - 1) f += head_model_flops;
      per_replica_rank_sum += f;
    }
    out.summary.model_flops = per_replica_rank_sum * static_cast<double>(m) * plan.tp * plan.dp;
  }
  const node_model::OpRules rules = work.rules();
  const std::int64_t gbytes = dtype_bytes(rules.grad_dtype());  // gradients as reduced
  const std::int64_t layer_grad_bytes = model.params_per_layer_per_tp_rank(plan.tp) * gbytes;
  const std::int64_t word_params = padded_vocab_per_rank(model, work, plan.tp) * model.hidden;
  const bool sync_after_backward = plan.resolved_grad_sync(work) == GradSync::AfterBackward;
  // .grad += g of one layer's parameters (PyTorch's accumulation, one add
  // per tensor), for PyTorch DDP's micro-batches after the first.
  PieceList grad_add_piece(timer);
  {
    Pass add;
    add.add(node_model::flat_kernel(node_model::KernelOp::Add, model.params_per_layer_per_tp_rank(plan.tp),
                                    work.dtype),
            static_cast<int>(kTensorsPerLayer));
    grad_add_piece.passes("bwd.grad_add", {&add});
  }
  const Piece grad_add = grad_add_piece.pieces().front();
  // MoE layers: their dense parameters' gradients are reduced over the DP
  // group; their experts' over the expert-data-parallel group (dp / ep ranks)
  // when ep > 1, else with the rest.
  const bool separate_experts = model.is_moe() && plan.ep > 1;
  std::int64_t moe_dense_grad_bytes = 0, moe_expert_grad_bytes = 0;
  Piece moe_grad_add;
  if (model.is_moe()) {
    const std::int64_t dense_params = model.moe_layer_dense_params_per_rank(plan.tp);
    const std::int64_t expert_params = model.moe_layer_expert_params_per_rank(plan.tp, plan.ep);
    moe_dense_grad_bytes = dense_params * gbytes;
    moe_expert_grad_bytes = expert_params * gbytes;
    PieceList add_piece(timer);
    Pass add;
    add.add(node_model::flat_kernel(node_model::KernelOp::Add, dense_params + expert_params, work.dtype),
            static_cast<int>(kTensorsPerLayer));
    add_piece.passes("bwd.grad_add", {&add});
    moe_grad_add = add_piece.pieces().front();
  }

  // One program per pipeline stage: every (tp, dp) rank of a stage runs the
  // same tasks; only the groups its slots name differ.
  std::vector<std::vector<SlotRole>> stage_roles(static_cast<std::size_t>(p));
  out.graph.programs.reserve(static_cast<std::size_t>(p));
  std::string tag, prefix;
  for (int stage = 0; stage < p; ++stage) {
    Program prog;
    ProgramBuilder rb(prog, timer, work.host.per_p2p);
    const std::int32_t tp_group = tp ? rb.slot({kTensor}) : -1;
    const std::int32_t dp_group = plan.dp > 1 ? rb.slot({kData}) : -1;
    const std::int32_t ep_group = separate_experts ? rb.slot({kExpert}) : -1;
    const std::int32_t expert_dp_group =
        separate_experts && plan.dp / plan.ep > 1 ? rb.slot({kExpertData}) : -1;
    auto pipe_group = [&](int from_stage, int to_stage, int purpose) {
      return rb.slot({purpose, from_stage, to_stage});
    };

    const auto order = pipeline_order(plan.schedule, p, stage, m, v);
    // The steps that compute weight gradients: B (fused), or W (split). A
    // chunk's gradients are final after its last such step.
    const StepKind grad_step = split ? StepKind::W : StepKind::B;
    std::vector<std::size_t> last_backward(static_cast<std::size_t>(v), 0);
    std::vector<std::size_t> first_backward(static_cast<std::size_t>(v), order.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
      if (order[i].kind != grad_step) continue;
      last_backward[static_cast<std::size_t>(order[i].chunk)] = i;
      auto& f = first_backward[static_cast<std::size_t>(order[i].chunk)];
      f = std::min(f, i);
    }
    // Reserve: per micro-batch and chunk, each layer's pieces plus a few
    // pipeline, ZeRO-3 and wait tasks.
    {
      std::size_t per_layer =
          layer.forward.pieces().size() + 1 +
          (split ? layer.input_backward.pieces().size() + layer.weight_backward.pieces().size() + 1
                 : layer.backward.pieces().size());
      if (moe_layer) {
        const LayerPieces& ml = *moe_layer;
        per_layer = std::max(
            per_layer, ml.forward.pieces().size() + 1 +
                           (split ? ml.input_backward.pieces().size() + ml.weight_backward.pieces().size() + 1
                                  : ml.backward.pieces().size()));
      }
      std::size_t tasks = 64;
      for (int c = 0; c < v; ++c) {
        const auto nl = static_cast<std::size_t>(sum.chunk_layers[static_cast<std::size_t>(c * p + stage)]);
        tasks += static_cast<std::size_t>(m) * (nl * per_layer + 8);
      }
      prog.tasks.reserve(tasks);
    }

    // Gradient buckets: filled by the last backward of each chunk.
    std::vector<TaskIndex> grad_sync;
    std::vector<std::int64_t> bucket_bytes;
    std::int64_t pending_bytes = 0;
    auto flush = [&](TaskIndex after) {
      if (pending_bytes == 0) return;
      if (dp_group >= 0) {
        const auto kind = plan.zero_stage >= 1 ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
        grad_sync.push_back(rb.collective(fmt::format("dp.grad.{}.bucket{:03}", to_string(kind), bucket_bytes.size()),
                                          kind, dp_group, Bytes(pending_bytes), {after}));
      }
      bucket_bytes.push_back(pending_bytes);
      pending_bytes = 0;
    };
    auto produced = [&](std::int64_t bytes, TaskIndex task) {
      pending_bytes += bytes;
      // Megatron's DDP reduces the whole gradient buffer after the backward;
      // PyTorch DDP a bucket as soon as it is full (overlapping the backward).
      if (!sync_after_backward && pending_bytes >= plan.bucket_size.count()) flush(task);
    };
    // The experts' gradient buckets (ep > 1), reduced over the ranks holding the same experts.
    std::vector<TaskIndex> expert_grad_sync;
    std::vector<std::int64_t> expert_bucket_bytes;
    std::int64_t pending_expert_bytes = 0;
    auto flush_experts = [&](TaskIndex after) {
      if (pending_expert_bytes == 0) return;
      if (expert_dp_group >= 0) {
        const auto kind = plan.zero_stage >= 1 ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce;
        expert_grad_sync.push_back(rb.collective(
            fmt::format("dp.expert_grad.{}.bucket{:03}", to_string(kind), expert_bucket_bytes.size()), kind,
            expert_dp_group, Bytes(pending_expert_bytes), {after}));
      }
      expert_bucket_bytes.push_back(pending_expert_bytes);
      pending_expert_bytes = 0;
    };
    auto produced_layer = [&](bool moe, TaskIndex task) {
      if (!moe) {
        produced(layer_grad_bytes, task);
        return;
      }
      if (!separate_experts) {
        produced(moe_dense_grad_bytes + moe_expert_grad_bytes, task);
        return;
      }
      produced(moe_dense_grad_bytes, task);
      pending_expert_bytes += moe_expert_grad_bytes;
      if (!sync_after_backward && pending_expert_bytes >= plan.bucket_size.count()) flush_experts(task);
    };
    // `tag` + `suffix`, in a reused buffer.
    auto named = [&](std::string_view suffix) -> const std::string& {
      prefix.assign(tag);
      prefix += suffix;
      return prefix;
    };
    auto layer_prefix = [&](std::int64_t l) -> const std::string& {
      prefix.assign(tag);
      fmt::format_to(std::back_inserter(prefix), "layer{:03}.", l);
      return prefix;
    };

    for (std::size_t i = 0; i < order.size(); ++i) {
      const PipelineStep& st = order[i];
      const int k = st.chunk * p + stage;  // virtual stage
      const std::int64_t nl = sum.chunk_layers[static_cast<std::size_t>(k)];
      tag.clear();
      if (v > 1) {
        fmt::format_to(std::back_inserter(tag), "c{}.mb{}.", st.chunk, st.micro_batch);
      } else {
        fmt::format_to(std::back_inserter(tag), "mb{}.", st.micro_batch);
      }
      const bool grads = st.kind == grad_step;
      const bool last_mb = grads && i == last_backward[static_cast<std::size_t>(st.chunk)];
      // PyTorch DDP: micro-batches after the first add their gradients to .grad.
      const bool accumulate = torch_ddp && grads && i != first_backward[static_cast<std::size_t>(st.chunk)];
      std::vector<TaskIndex> first;
      // ZeRO-3: F and B need the chunk's parameters (W only the activations
      // and output gradients).
      if (plan.zero_stage == 3 && dp_group >= 0 && st.kind != StepKind::W) {
        std::int64_t chunk_params = nl * model.params_per_layer_per_tp_rank(plan.tp);
        std::int64_t chunk_expert_params = 0;
        if (moe_layer) {
          // MoE layers: their dense parameters with the rest; their experts'
          // over the ranks holding the same experts (ep > 1).
          const std::int64_t n_moe = model.moe_layers_in(chunk_first_layer(sum.chunk_layers, k), nl);
          chunk_params = (nl - n_moe) * model.params_per_layer_per_tp_rank(plan.tp) +
                         n_moe * model.moe_layer_dense_params_per_rank(plan.tp);
          chunk_expert_params = n_moe * model.moe_layer_expert_params_per_rank(plan.tp, plan.ep);
          if (!separate_experts) chunk_params += std::exchange(chunk_expert_params, 0);
        }
        first.push_back(rb.collective(named(st.forward() ? "fwd.zero3.param_all_gather"
                                                         : "bwd.zero3.param_all_gather"),
                                      CollectiveKind::AllGather, dp_group, Bytes(chunk_params * pbytes), {}));
        if (chunk_expert_params > 0 && expert_dp_group >= 0) {
          first.push_back(rb.collective(
              named(st.forward() ? "fwd.zero3.expert_param_all_gather" : "bwd.zero3.expert_param_all_gather"),
              CollectiveKind::AllGather, expert_dp_group, Bytes(chunk_expert_params * pbytes), {}));
        }
      }
      if (st.forward()) {
        // The stages that load data (the first: tokens; the last: labels).
        if (timer.host_model() && work.host.per_micro_batch > Time::zero() && (k == 0 || k == V - 1)) {
          rb.micro_batch_start(named("data"), work.host.per_micro_batch);
        }
        if (k == 0) {
          rb.pieces(embed_f.pieces(), named("embedding."), tp_group, std::move(first));
          first = rb.take_pending();
        } else {
          const int from = (k - 1) % p;
          const TaskIndex recv = rb.collective(named("pp.recv_activation"), CollectiveKind::SendRecv,
                                               pipe_group(from, stage, kPipeForward), pipe_msg, {});
          first.push_back(scatter_gather ? rb.collective(named("pp.gather_activation"), CollectiveKind::AllGather,
                                                         tp_group, act, {recv})
                                         : recv);
        }
        const std::int64_t first_layer = chunk_first_layer(sum.chunk_layers, k);
        for (std::int64_t l = 0; l < nl; ++l) {
          const LayerPieces& lp = moe_layer && model.is_moe_layer(first_layer + l) ? *moe_layer : layer;
          rb.pieces(lp.forward.pieces(), layer_prefix(l), tp_group, std::move(first), ep_group);
          first = rb.take_pending();
        }
        if (k == V - 1) {
          rb.pieces(head_f.pieces(), named("lm_head."), tp_group, std::move(first));
          first = rb.take_pending();
        }
        if (!first.empty()) rb.compute(named("fwd.wait"), Time::zero(), Flops(), std::exchange(first, {}));
        if (k != V - 1) {
          rb.collective(named("pp.send_activation"), CollectiveKind::SendRecv,
                        pipe_group(stage, (k + 1) % p, kPipeForward), pipe_msg, {rb.last_compute()});
        }
        continue;
      }
      // Backward: B (with W when fused), or a separate W. W exchanges no
      // pipeline messages; gradients are produced by the steps that
      // compute them.
      const bool w_step = st.kind == StepKind::W;
      const PieceList& head_pieces = !split ? head_b : w_step ? head_w : head_bi;
      const PieceList& embed_pieces = !split ? embed_b : w_step ? embed_w : embed_bi;
      if (k == V - 1) {
        rb.pieces(head_pieces.pieces(), named("lm_head."), tp_group, std::move(first));
        first = rb.take_pending();
        if (last_mb && (p > 1 || !model.tied_embeddings)) {
          produced((word_params + 2 * model.hidden) * gbytes, rb.last_compute());
        }
      } else if (!w_step) {
        const int from = (k + 1) % p;
        const TaskIndex recv = rb.collective(named("pp.recv_gradient"), CollectiveKind::SendRecv,
                                             pipe_group(from, stage, kPipeBackward), pipe_msg, {});
        first.push_back(scatter_gather ? rb.collective(named("pp.gather_gradient"), CollectiveKind::AllGather,
                                                       tp_group, act, {recv})
                                       : recv);
      }
      const std::int64_t first_layer = chunk_first_layer(sum.chunk_layers, k);
      for (std::int64_t l = nl - 1; l >= 0; --l) {
        const bool moe = moe_layer && model.is_moe_layer(first_layer + l);
        const LayerPieces& lp = moe ? *moe_layer : layer;
        const PieceList& layer_backward = !split   ? lp.backward
                                          : w_step ? lp.weight_backward
                                                   : lp.input_backward;
        rb.pieces(layer_backward.pieces(), layer_prefix(l), tp_group, std::move(first), ep_group);
        first = rb.take_pending();
        if (accumulate) {
          const Piece& add = moe ? moe_grad_add : grad_add;
          rb.compute(layer_prefix(l) + (w_step ? "wgrad.grad_add" : "bwd.grad_add"), add.duration, Flops(),
                     std::exchange(first, {}), add.host);
        }
        if (last_mb) {
          if (!first.empty()) {
            rb.compute(layer_prefix(l) + (w_step ? "wgrad.wait" : "bwd.wait"), Time::zero(), Flops(),
                       std::exchange(first, {}));
          }
          produced_layer(moe, rb.last_compute());
        }
      }
      if (k == 0) {
        rb.pieces(embed_pieces.pieces(), named("embedding."), tp_group, std::move(first));
        first = rb.take_pending();
      }
      if (!first.empty()) {
        rb.compute(named(w_step ? "wgrad.wait" : "bwd.wait"), Time::zero(), Flops(), std::exchange(first, {}));
      }
      if (k == 0 && last_mb) {
        produced((word_params + (model.learned_positions ? work.seq_len * model.hidden : 0) +
                  (p == 1 && model.tied_embeddings ? 2 * model.hidden : 0)) * gbytes,
                 rb.last_compute());
      }
      if (k != 0 && !w_step) {
        rb.collective(named("pp.send_gradient"), CollectiveKind::SendRecv,
                      pipe_group(stage, (k - 1) % p, kPipeBackward), pipe_msg, {rb.last_compute()});
      }
    }
    const TaskIndex last_compute = rb.last_compute();
    flush(last_compute);
    flush_experts(last_compute);

    // Tied embeddings: the first and last stage add their word-embedding gradients.
    std::vector<TaskIndex> before_step = grad_sync;
    before_step.insert(before_step.end(), expert_grad_sync.begin(), expert_grad_sync.end());
    if (p > 1 && model.tied_embeddings && (stage == 0 || stage == p - 1)) {
      before_step.push_back(rb.collective("embedding.grad_all_reduce", CollectiveKind::AllReduce,
                                          rb.slot({kEmbedding, 0, p - 1}), Bytes(word_params * gbytes),
                                          {last_compute}));
    }
    if (timer.host_model()) {
      // Megatron's step starts with .item() calls (the fp16 inf check, the
      // gradient norm): the host waits for the gradients to be reduced.
      const TaskIndex sync = rb.compute("optimizer.sync", Time::zero(), Flops(), std::move(before_step));
      prog.tasks[static_cast<std::size_t>(sync)].host_sync = true;
      before_step.clear();
    }
    // Optimizer step over this rank's (shard of the) parameters.
    const std::int64_t params = sum.params_per_stage[static_cast<std::size_t>(stage)];
    std::int64_t step_params = plan.zero_stage >= 1 ? (params + plan.dp - 1) / plan.dp : params;
    if (separate_experts && plan.zero_stage >= 1) {
      // The experts' optimizer states are sharded over dp / ep ranks.
      const StageParams split_params = stage_params(model, work, plan, sum.chunk_layers, stage);
      const std::int64_t expert_dp = plan.dp / plan.ep;
      step_params =
          (split_params.dense + plan.dp - 1) / plan.dp + (split_params.expert + expert_dp - 1) / expert_dp;
    }
    std::int64_t layers_here = 0;
    for (int c = 0; c < v; ++c) layers_here += sum.chunk_layers[static_cast<std::size_t>(c * p + stage)];
    const int tensors = static_cast<int>(layers_here * kTensorsPerLayer + 4);
    const Pass opt_pass = rules.optimizer(step_params, tensors, plan.fused_optimizer, plan.grad_clipping);
    PieceList opt_piece(timer);
    opt_piece.passes("optimizer", {&opt_pass});
    const Piece& opt = opt_piece.pieces().front();
    const TaskIndex step =
        rb.compute("optimizer", opt.duration, Flops(), std::move(before_step), opt.host, work.host.per_iteration);
    prog.tasks[static_cast<std::size_t>(step)].host_sync = timer.host_model();
    if (plan.zero_stage >= 1 && plan.zero_stage <= 2 && dp_group >= 0) {
      // Distributed optimizer: gather the updated parameters, bucket by bucket.
      for (std::size_t b = 0; b < bucket_bytes.size(); ++b) {
        const std::int64_t bytes = bucket_bytes[b] / gbytes * pbytes;  // parameters in the model's dtype
        rb.collective(fmt::format("dp.param_all_gather.bucket{:03}", b), CollectiveKind::AllGather, dp_group,
                      Bytes(bytes), {step});
      }
    }
    if (plan.zero_stage >= 1 && plan.zero_stage <= 2 && expert_dp_group >= 0) {
      for (std::size_t b = 0; b < expert_bucket_bytes.size(); ++b) {
        const std::int64_t bytes = expert_bucket_bytes[b] / gbytes * pbytes;
        rb.collective(fmt::format("dp.expert_param_all_gather.bucket{:03}", b), CollectiveKind::AllGather,
                      expert_dp_group, Bytes(bytes), {step});
      }
    }
    stage_roles[static_cast<std::size_t>(stage)] = rb.roles();
    out.graph.add_program(std::move(prog));
  }

  // Bind every rank to its stage's program. Ranks in order and each rank's
  // slots in slot order: the groups get the same numbers as when every rank
  // had its own program (and the executor's stream order with them).
  Groups groups;
  std::vector<int> members;
  out.graph.ranks.reserve(static_cast<std::size_t>(plan.world_size()));
  for (int rank = 0; rank < plan.world_size(); ++rank) {
    const RankCoord me = rank_coord(plan, rank);
    const auto& roles = stage_roles[static_cast<std::size_t>(me.pp)];
    std::vector<std::int32_t> slot_groups;
    slot_groups.reserve(roles.size());
    for (const SlotRole& role : roles) slot_groups.push_back(bind(groups, plan, me, role, members));
    out.graph.add_rank(me.pp, std::move(slot_groups));
  }
  out.graph.groups = groups.take();
  return out;
}

TaskGraph plan_training(const TransformerConfig& model, const Workload& work, const ParallelPlan& plan,
                        const node_model::KernelPredictor& predictor) {
  return plan_training_detailed(model, work, plan, predictor).graph;
}

}  // namespace tessera::parallelism
