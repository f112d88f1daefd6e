#pragma once
#include "tessera/node_model/kernel.hpp"

namespace tessera::node_model {

/// max(FLOPs / peak, bytes / bandwidth) with the peak and element size of
/// the kernel's dtype (tensor-core peak for 16-bit GEMMs).
Time roofline_time(const Kernel& kernel, const GpuSpec& gpu);

/// The roofline bound: max(FLOPs / peak, bytes / memory bandwidth). An upper
/// bound on speed, kept as the reference baseline for every learned predictor.
class RooflinePredictor final : public KernelPredictor {
 public:
  explicit RooflinePredictor(GpuSpec gpu);
  [[nodiscard]] Time predict(const Kernel& kernel) const override;
  [[nodiscard]] std::string_view name() const override { return "roofline"; }
  [[nodiscard]] const GpuSpec& gpu() const override { return gpu_; }

 private:
  GpuSpec gpu_;
};

}  // namespace tessera::node_model
