#pragma once
// GPU specs from NeuSight's device-config JSON files:
//   {"Device": "NVIDIA A100 80GB PCIe", "Dev_Mem": 80, "Mem_Bw": 1935, "Num_Sm": 108,
//    "Core_Per_SM": 64, "Freq": 1410, "SingleFLOPs": 19492, "L2Cache": 40}
// Dev_Mem in GB, Mem_Bw in GB/s, SingleFLOPs in GFLOP/s (AMD: SingleFLOPsMM for
// matrix units, SingleFLOPsVEC for vector units), L2Cache in MB. Optional
// (Tessera's additions, GFLOP/s, dense): TensorFLOPs (FP16/BF16 tensor
// cores), TF32FLOPs (default TensorFLOPs / 2, or SingleFLOPs without
// TensorFLOPs), FP8FLOPs (default 0: no FP8 tensor cores).
#include <string>
#include <vector>

#include "tessera/node_model/gpu_spec.hpp"
#include "tessera/node_model/json.hpp"

namespace tessera::node_model {

/// Builds a GpuSpec from a parsed device config; throws InputError naming
/// `source` and the offending field.
GpuSpec gpu_from_device_json(const JsonValue& json, const std::string& source);
/// Reads a device-config file; throws InputError naming the file and field.
GpuSpec load_device_config(const std::string& path);

/// All device configs of a directory, looked up by their "Device" name (as it
/// appears in the Device column of the measurement CSVs). Tensor-core variants
/// (*_TP.json) are skipped.
class DeviceCatalog {
 public:
  DeviceCatalog() = default;
  explicit DeviceCatalog(const std::string& dir);
  /// nullptr when unknown.
  [[nodiscard]] const GpuSpec* find(const std::string& device_name) const;
  [[nodiscard]] const std::vector<GpuSpec>& all() const { return gpus_; }

 private:
  std::vector<GpuSpec> gpus_;
};

}  // namespace tessera::node_model
