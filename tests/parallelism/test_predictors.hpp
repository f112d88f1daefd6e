#pragma once
// Predictors for hand-checkable planner tests.
#include "tessera/node_model/kernel.hpp"
#include "tessera/node_model/roofline.hpp"

namespace tessera::test_support {

/// GEMMs take one picosecond per FLOP; vector kernels and every GEMM that
/// touches the vocabulary dimension (embedding, LM head; vocab / tp columns
/// with tp = 1, 2, 4, 8, padded or not) take no time. So a
/// layer's forward takes F = its GEMM FLOPs in ps, its backward exactly 2F,
/// and nothing else costs anything: pipeline bubbles are exact.
///
/// With `linears_only`, the attention's batched GEMMs (scores, context) take
/// no time either: then a layer's forward (F), input gradients (B) and
/// weight gradients (W) take exactly the same time, as each linear's three
/// GEMMs have the same FLOPs (the zero-bubble schedules' textbook case).
/// Without it, B = F + A and W = F - A, A the attention GEMMs' FLOPs in ps
/// (their gradients are all input gradients).
class LayersOnlyPredictor final : public node_model::KernelPredictor {
 public:
  explicit LayersOnlyPredictor(std::int64_t vocab, bool linears_only = false)
      : vocab_(vocab), linears_only_(linears_only), gpu_(node_model::gpu_preset("H100-SXM")) {}
  [[nodiscard]] Time predict(const node_model::Kernel& k) const override {
    if (!node_model::is_gemm(k.op)) return Time::zero();
    if (linears_only_ && k.op == node_model::KernelOp::Bmm) return Time::zero();
    for (std::int64_t tp : {1, 2, 4, 8}) {
      // Unpadded (PyTorch eager) and padded to 128 x tp (Megatron) rows per rank.
      const std::int64_t v = (vocab_ + tp - 1) / tp;
      const std::int64_t padded = (vocab_ + 128 * tp - 1) / (128 * tp) * 128;
      for (std::int64_t x : {v, padded}) {
        if (k.m == x || k.n == x || k.k == x) return Time::zero();
      }
    }
    return Time::from_ps(static_cast<std::int64_t>(k.flops().count()));
  }
  [[nodiscard]] std::string_view name() const override { return "layers-only"; }
  [[nodiscard]] const node_model::GpuSpec& gpu() const override { return gpu_; }

 private:
  std::int64_t vocab_;
  bool linears_only_;
  node_model::GpuSpec gpu_;
};

/// The other way round: memory-bound kernels take one picosecond per byte
/// they move, GEMMs no time (a pass's time is its vector kernels' bytes).
class BytesPredictor final : public node_model::KernelPredictor {
 public:
  [[nodiscard]] Time predict(const node_model::Kernel& k) const override {
    return node_model::is_gemm(k.op) ? Time::zero() : Time::from_ps(k.bytes().count());
  }
  [[nodiscard]] std::string_view name() const override { return "bytes"; }
  [[nodiscard]] const node_model::GpuSpec& gpu() const override { return gpu_; }

 private:
  node_model::GpuSpec gpu_ = node_model::gpu_preset("H100-SXM");
};

}  // namespace tessera::test_support
