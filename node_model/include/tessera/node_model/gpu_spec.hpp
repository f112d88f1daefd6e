#pragma once
// What the node model needs to know about one GPU.
#include <string>
#include <string_view>
#include <vector>

#include "tessera/units.hpp"

namespace tessera::node_model {

enum class DType { FP32, FP16, BF16 };

/// Bytes per element of `d`.
int dtype_bytes(DType d);
/// "fp32", "fp16", "bf16".
std::string_view to_string(DType d);
/// Parses "fp32" | "fp16" | "bf16" (case-insensitive); throws InputError.
DType parse_dtype(std::string_view text);

struct GpuSpec {
  std::string name;
  FlopRate fp32_peak;     ///< dense FP32 (CUDA cores)
  FlopRate tensor_peak;   ///< dense FP16/BF16 on tensor cores
  Bandwidth memory_bandwidth;
  int sms = 0;            ///< streaming multiprocessors
  Bytes l2_cache;
  Bytes memory;

  /// Peak for GEMMs of the given element type.
  [[nodiscard]] FlopRate matmul_peak(DType d) const {
    return d == DType::FP32 ? fp32_peak : tensor_peak;
  }
  /// Throws InputError naming the first field that is not positive.
  void validate() const;
};

/// Shipped specs: "A100-40GB", "A100-80GB", "H100-SXM", "H200".
const GpuSpec& gpu_preset(std::string_view name);
std::vector<std::string> gpu_preset_names();

}  // namespace tessera::node_model
