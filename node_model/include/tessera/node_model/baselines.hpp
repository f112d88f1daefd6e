#pragma once
// Baseline learned predictors, kept to show what the tile/wave structure buys:
//  * linreg: per kernel class, latency = c0 + c1 * FLOPs/peak + c2 * bytes/bandwidth,
//    fitted by least squares on relative error (after Li et al.).
//  * mlp: per kernel class, a direct MLP from log raw dimensions and GPU specs to
//    log latency (after Habitat).
#include <array>
#include <memory>
#include <string>
#include <string_view>

#include "tessera/node_model/tile_mlp.hpp"

namespace tessera::node_model {

struct LinRegModel {
  std::array<std::array<double, 3>, kNumKernelClasses> coef{};
  std::array<bool, kNumKernelClasses> trained{};
  [[nodiscard]] std::string serialize() const;
  static LinRegModel parse(std::string_view text, const std::string& source);
};
LinRegModel train_linreg(const MeasurementSet& data, std::ostream* log);

struct DirectMlpModel {
  std::array<Mlp, kNumKernelClasses> nets;
  [[nodiscard]] std::string serialize() const;
  static DirectMlpModel parse(std::string_view text, const std::string& source);
};
inline constexpr int kDirectFeatures = 9 + kNumElementwiseOps;
Eigen::VectorXd direct_features(const Kernel& k, const GpuSpec& gpu);
DirectMlpModel train_direct_mlp(const MeasurementSet& data, const TileMlpTrainOptions& opt, std::ostream* log);

class LinRegPredictor final : public KernelPredictor {
 public:
  LinRegPredictor(GpuSpec gpu, std::shared_ptr<const LinRegModel> model);
  [[nodiscard]] Time predict(const Kernel& kernel) const override;
  [[nodiscard]] std::string_view name() const override { return "linreg"; }
  [[nodiscard]] const GpuSpec& gpu() const override { return gpu_; }

 private:
  GpuSpec gpu_;
  std::shared_ptr<const LinRegModel> model_;
};

class DirectMlpPredictor final : public KernelPredictor {
 public:
  DirectMlpPredictor(GpuSpec gpu, std::shared_ptr<const DirectMlpModel> model);
  [[nodiscard]] Time predict(const Kernel& kernel) const override;
  [[nodiscard]] std::string_view name() const override { return "mlp"; }
  [[nodiscard]] const GpuSpec& gpu() const override { return gpu_; }

 private:
  GpuSpec gpu_;
  std::shared_ptr<const DirectMlpModel> model_;
  ShapeCache cache_;
};

}  // namespace tessera::node_model
