#pragma once
// Predictors for hand-checkable planner tests.
#include "tessera/node_model/kernel.hpp"
#include "tessera/node_model/roofline.hpp"

namespace tessera::test_support {

/// GEMMs take one picosecond per FLOP; vector kernels and every GEMM that
/// touches the vocabulary dimension (embedding, LM head; vocab / tp columns
/// with tp = 1, 2, 4, 8) take no time. So a
/// layer's forward takes F = its GEMM FLOPs in ps, its backward exactly 2F,
/// and nothing else costs anything: pipeline bubbles are exact.
class LayersOnlyPredictor final : public node_model::KernelPredictor {
 public:
  explicit LayersOnlyPredictor(std::int64_t vocab)
      : vocab_(vocab), gpu_(node_model::gpu_preset("H100-SXM")) {}
  [[nodiscard]] Time predict(const node_model::Kernel& k) const override {
    if (!node_model::is_gemm(k.op)) return Time::zero();
    for (std::int64_t tp : {1, 2, 4, 8}) {
      const std::int64_t v = (vocab_ + tp - 1) / tp;
      if (k.m == v || k.n == v || k.k == v) return Time::zero();
    }
    return Time::from_ps(static_cast<std::int64_t>(k.flops().count()));
  }
  [[nodiscard]] std::string_view name() const override { return "layers-only"; }
  [[nodiscard]] const node_model::GpuSpec& gpu() const override { return gpu_; }

 private:
  std::int64_t vocab_;
  node_model::GpuSpec gpu_;
};

}  // namespace tessera::test_support
