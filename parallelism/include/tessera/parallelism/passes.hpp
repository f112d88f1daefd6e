#pragma once
// The planner's passes (docs/parallelism.md, "Planner passes").
// plan_training_detailed is a chain of them:
//
//   partition_layers     plan -> StagePartition (layers per model chunk, where
//                        the chunks, the embedding and the LM head run)
//   model_pieces         model, plan -> ModelPieces: the op program of one
//                        layer (dense and MoE), the embedding and the LM head
//                        on one rank: forward, backward, and the backward
//                        split into B (input gradients) and W (weight
//                        gradients), with their tensor/sequence-parallel and
//                        expert-parallel collectives
//   pipeline_order       (plan.hpp) schedule -> the order of F, B, W steps of
//                        one pipeline rank
//   model_flops          model, partition -> model FLOPs of an iteration
//   GradBuckets          data-parallel gradient buckets as gradients are produced
//   optimizer_shard_params
//                        the parameters one rank's optimizer step updates
//
// The stage programs are then written from these (plan.cpp: each schedule
// step's pieces, pipeline exchanges, ZeRO-3 gathers, the gradient buckets'
// reductions, the optimizer step) and every rank bound to its stage's program.
// Every pass is a pure function of its inputs.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/node_model/kernel.hpp"
#include "tessera/parallelism/plan.hpp"
#include "tessera/parallelism/task_graph.hpp"
#include "tessera/parallelism/transformer.hpp"

namespace tessera::parallelism {

// ---------------------------------------------------------------------------
// Layer partition.

/// Which layers each model chunk holds and where the chunks run: chunk k
/// (pipeline order) runs on pipeline rank k % pp as that rank's chunk k / pp;
/// the embedding runs with chunk 0, the LM head with the last chunk.
struct StagePartition {
  int pp = 1;
  int virtual_stages = 1;
  std::vector<std::int64_t> chunk_layers;  ///< layers per model chunk, pipeline order

  [[nodiscard]] int chunks() const { return pp * virtual_stages; }
  /// The model chunk pipeline rank `stage` runs as its chunk `c`.
  [[nodiscard]] int chunk(int stage, int c) const { return c * pp + stage; }
  [[nodiscard]] std::int64_t layers(int chunk) const { return chunk_layers[static_cast<std::size_t>(chunk)]; }
  /// The global index of chunk `chunk`'s first layer.
  [[nodiscard]] std::int64_t first_layer(int chunk) const;
  /// Layers over all chunks of pipeline rank `stage`.
  [[nodiscard]] std::int64_t stage_layers(int stage) const;
  /// MoE layers of chunk `chunk` (TransformerConfig::is_moe_layer).
  [[nodiscard]] std::int64_t moe_layers(const TransformerConfig& model, int chunk) const {
    return model.moe_layers_in(first_layer(chunk), layers(chunk));
  }
  [[nodiscard]] bool has_embedding(int chunk) const { return chunk == 0; }
  [[nodiscard]] bool has_lm_head(int chunk) const { return chunk == chunks() - 1; }
};
/// `layers` over pp x virtual_stages chunks (chunk_layers: an even split, the
/// first chunks taking one more layer when it does not divide). Throws
/// InputError when there are more chunks than layers.
StagePartition partition_layers(std::int64_t layers, int pp, int virtual_stages);
/// `layers` over `plan`'s chunks as chunk_layers(layers, plan) splits them:
/// its first_stage_layers and last_stage_layers where given.
StagePartition partition_layers(std::int64_t layers, const ParallelPlan& plan);

// ---------------------------------------------------------------------------
// Op programs: a layer's work on one rank as a list of pieces.

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

  static HostShape of_pass(std::int64_t launches, double duration_s, double c) {
    HostShape h;
    h.any = launches > 0 || duration_s > 0;
    h.launches = launches;
    h.duration_s = duration_s;
    // Units of equal length: the bound is the first launch (c + D) or the last (L c + D / L).
    const auto l = static_cast<double>(launches);
    h.span_s = launches > 0 ? std::max(c + duration_s, l * c + duration_s / l) : duration_s;
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
  /// Compute pieces: the host waits for the GPU to finish this piece before
  /// it issues what follows (Task::host_sync: a device-to-host copy, such as
  /// the expert-parallel all-to-all's split sizes).
  bool host_sync = false;
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
  /// `k` as a further part of a launched kernel (Pass::part): no launch
  /// floor (KernelPredictor::predict_part).
  [[nodiscard]] Time part_time(const node_model::Kernel& k) const { return pred_.predict_part(k); }
  /// Kernel `i` of `pass`: part_time() for a further part of a launched
  /// kernel, else time().
  [[nodiscard]] Time time(const node_model::Pass& pass, std::size_t i) const {
    return pass.part[i] ? part_time(pass.kernels[i]) : time(pass.kernels[i]);
  }
  [[nodiscard]] double per_launch_s() const { return c_; }
  [[nodiscard]] bool host_model() const { return device_; }

 private:
  const node_model::KernelPredictor& pred_;
  bool device_;
  double c_;
};

/// An op program: pieces in execution order. Adjacent compute pieces merge
/// into one unless split() separates them, named after the first, or
/// "first+second" when they belong to different phases (the text before the
/// first '.': a recomputed forward running into the backward reads
/// "recompute.fwd+bwd", not "fwd").
class PieceList {
 public:
  explicit PieceList(const KernelTimer& timer) : timer_(timer) {}
  /// One compute piece of the given passes, in order.
  void passes(const std::string& name, const std::vector<const Pass*>& ps) {
    Piece p;
    p.name = name;
    for (const Pass* pass : ps) {
      Time d;
      for (std::size_t i = 0; i < pass->kernels.size(); ++i) {
        d += timer_.time(*pass, i);
        p.flops += pass->kernels[i].flops();
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
  /// The last compute piece ends in a host sync (Piece::host_sync); what
  /// follows starts a new piece.
  void host_sync() {
    for (auto it = pieces_.rbegin(); it != pieces_.rend(); ++it) {
      if (!it->compute) continue;
      it->host_sync = true;
      break;
    }
    split_ = true;
  }
  /// Removes the tensor-parallel collectives (expert all-to-alls stay); the
  /// compute pieces they separated merge (ParallelPlan::tp_collectives).
  void drop_tensor_parallel_collectives() {
    std::vector<Piece> old = std::move(pieces_);
    pieces_.clear();
    split_ = false;
    for (Piece& p : old) {
      if (p.compute) {
        add_compute(std::move(p));
      } else if (p.expert) {
        pieces_.push_back(std::move(p));
      }
    }
  }
  [[nodiscard]] const std::vector<Piece>& pieces() const { return pieces_; }
  /// The pieces of `o`, each name prefixed with `prefix` (e.g. "recompute.").
  void append(const PieceList& o, const std::string& prefix = "") {
    for (Piece p : o.pieces_) {
      p.name = prefix + p.name;
      if (p.compute) {
        add_compute(std::move(p));
      } else {
        pieces_.push_back(std::move(p));
      }
    }
  }

 private:
  void add_compute(Piece p) {
    // Adjacent compute pieces merge into one task, but not into one that
    // ends in a host sync (the sync stays where it is).
    if (!pieces_.empty() && pieces_.back().compute && !std::exchange(split_, false) &&
        !pieces_.back().host_sync) {
      Piece& last = pieces_.back();
      // The phase of the name's last "+" part, and of the piece joining it.
      auto phase = [](std::string_view n) {
        if (const auto plus = n.rfind('+'); plus != std::string_view::npos) n.remove_prefix(plus + 1);
        return n.substr(0, n.find('.'));
      };
      if (phase(last.name) != phase(p.name)) last.name += "+" + p.name;
      last.duration += p.duration;
      last.flops += p.flops;
      last.host.then(p.host, timer_.per_launch_s());
      last.host_sync = p.host_sync;  // (the merged piece ends where p ends)
      return;
    }
    pieces_.push_back(std::move(p));
  }
  const KernelTimer& timer_;
  std::vector<Piece> pieces_;
  bool split_ = false;
};

/// The pieces of one layer's (or the embedding's, or the LM head's) forward
/// and backward on one tensor-parallel rank.
struct LayerPieces {
  explicit LayerPieces(const KernelTimer& timer)
      : forward(timer), backward(timer), input_backward(timer), weight_backward(timer) {}
  /// The forward of every micro-batch (and the one a recomputation repeats).
  PieceList forward;
  /// The forward of a model chunk's first micro-batch of the iteration where
  /// it runs more than `forward`: `forward` with the ops' once-per-iteration
  /// kernels (OpKernels::weight_cast: Transformer Engine's FP8 weight casts)
  /// before their forward kernels. Empty where there are none.
  std::optional<PieceList> first_forward;
  PieceList backward;  ///< including any recomputation
  /// Zero-bubble schedules (filled when the schedule splits the backward):
  /// B, the input gradients (with any recomputation), and W, the weight
  /// gradients.
  PieceList input_backward;
  PieceList weight_backward;
  /// The pieces a step of kind `kind` runs (F: forward; B: the backward, or
  /// its input gradients when `split`; W: the weight gradients).
  [[nodiscard]] const PieceList& of(StepKind kind, bool split) const {
    if (kind == StepKind::F) return forward;
    if (!split) return backward;
    return kind == StepKind::W ? weight_backward : input_backward;
  }
  /// The forward a step runs: first_forward in the chunk's first
  /// micro-batch (`first`) where there is one, else `forward`.
  [[nodiscard]] const PieceList& forward_of(bool first) const {
    return first && first_forward ? *first_forward : forward;
  }
  void drop_tensor_parallel_collectives() {
    for (PieceList* l : {&forward, &backward, &input_backward, &weight_backward}) {
      l->drop_tensor_parallel_collectives();
    }
    if (first_forward) first_forward->drop_tensor_parallel_collectives();
  }
};

/// A dense layer on one rank: forward [ln1] (AG) [qkv .. proj] AR|RS
/// [residual1, ln2] (AG) [fc1 .. fc2] AR|RS [residual2] (collectives with
/// tp > 1, AG with SP), its backward (docs/parallelism.md, "Tensor
/// parallelism"), and with `split` its B and W. Under FP8 training the
/// all-gathers move 1 byte per element (Transformer Engine gathers FP8)
/// and the chunk's first micro-batch runs first_forward (the weight casts).
LayerPieces layer_pieces(const TransformerConfig& m, const Workload& w, const ParallelPlan& p,
                         const KernelTimer& timer, bool split);
/// An MoE layer on one rank (docs/parallelism.md, "Mixture of experts"): the
/// attention block as a dense layer's; the MoE block [ln2] (AG) [router,
/// top-k, permute, shared experts] A2A [experts] A2A [unpermute] AR|RS
/// [residual2] (all-to-alls with ep > 1), its backward mirroring it.
LayerPieces moe_layer_pieces(const TransformerConfig& m, const Workload& w, const ParallelPlan& p,
                             const KernelTimer& timer, bool split);

/// The op programs of a model on one rank.
struct ModelPieces {
  LayerPieces layer;
  std::optional<LayerPieces> moe_layer;  ///< mixture-of-experts models
  LayerPieces embedding;
  LayerPieces lm_head;
  /// The pieces of layer `layer` (global index).
  [[nodiscard]] const LayerPieces& of_layer(const TransformerConfig& m, std::int64_t layer) const {
    return moe_layer && m.is_moe_layer(layer) ? *moe_layer : this->layer;
  }
};
/// The op programs of `m`'s layers, embedding and LM head under `p` (the B/W
/// split when p.schedule splits the backward).
ModelPieces model_pieces(const TransformerConfig& m, const Workload& w, const ParallelPlan& p,
                         const KernelTimer& timer);

// ---------------------------------------------------------------------------
// Model FLOPs.

/// FLOPs of one iteration over all ranks as the model defines them (every
/// kernel's forward, input-gradient and weight-gradient work once, without
/// recomputation or capacity padding, and work every tensor-parallel rank
/// repeats once): PlanSummary::model_flops.
double model_flops(const TransformerConfig& m, const Workload& w, const ParallelPlan& p,
                   const StagePartition& partition, std::int64_t micro_batches);

// ---------------------------------------------------------------------------
// Data-parallel gradient buckets.

/// Gradients in the order the backward produces them, cut into buckets.
/// Overlapped (PyTorch DDP): a bucket closes as soon as it holds at least
/// `bucket_size` (and is reduced right away); otherwise (Megatron's DDP after
/// the backward) everything is one bucket, closed by close().
class GradBuckets {
 public:
  GradBuckets(Bytes bucket_size, bool overlapped) : bucket_size_(bucket_size), overlapped_(overlapped) {}
  /// Adds `bytes` of gradients just produced; true when they close a bucket
  /// (buckets().back()).
  bool add(std::int64_t bytes) {
    pending_ += bytes;
    return overlapped_ && pending_ >= bucket_size_.count() && close();
  }
  /// Turns cutting into buckets on or off for what is added next (off: what
  /// is added waits for close()).
  void set_bucketing(bool on) { overlapped_ = on; }
  /// Closes the open bucket; false when it holds no gradients.
  bool close() {
    if (pending_ == 0) return false;
    buckets_.push_back(std::exchange(pending_, 0));
    return true;
  }
  /// Bytes of each closed bucket, in order.
  [[nodiscard]] const std::vector<std::int64_t>& buckets() const { return buckets_; }

 private:
  Bytes bucket_size_;
  bool overlapped_;
  std::int64_t pending_ = 0;
  std::vector<std::int64_t> buckets_;
};

// ---------------------------------------------------------------------------
// Optimizer.

/// Parameters the optimizer step of one rank of pipeline stage `stage`
/// updates: all it holds, or under ZeRO >= 1 its 1/dp shard (the experts'
/// parameters 1/(dp/ep) with ep > 1).
std::int64_t optimizer_shard_params(const TransformerConfig& m, const Workload& w, const ParallelPlan& p,
                                    const StagePartition& partition, int stage);

}  // namespace tessera::parallelism
