#include "tessera/node_model/gpu_spec.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <fmt/format.h>
#include <string>

#include "tessera/error.hpp"

namespace tessera::node_model {

int dtype_bytes(DType d) {
  switch (d) {
    case DType::FP32: case DType::TF32: return 4;
    case DType::FP16: case DType::BF16: return 2;
    case DType::FP8: return 1;
  }
  return 4;
}

std::string_view to_string(DType d) {
  switch (d) {
    case DType::FP32: return "fp32";
    case DType::TF32: return "tf32";
    case DType::FP16: return "fp16";
    case DType::BF16: return "bf16";
    case DType::FP8: return "fp8";
  }
  return "?";
}

DType parse_dtype(std::string_view text) {
  std::string s(text);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "fp32" || s == "float32") return DType::FP32;
  if (s == "fp16" || s == "float16") return DType::FP16;
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  if (s == "tf32") return DType::TF32;
  if (s == "fp8") return DType::FP8;
  throw InputError(fmt::format("unknown dtype '{}' (expected fp32, tf32, fp16, bf16 or fp8)", text));
}

FlopRate GpuSpec::matmul_peak(DType d) const {
  FlopRate peak = tensor_peak;
  switch (d) {
    case DType::FP32: return fp32_peak;
    case DType::FP16: case DType::BF16: return tensor_peak;
    case DType::TF32: peak = tf32_peak; break;
    case DType::FP8: peak = fp8_peak; break;
  }
  if (!(peak.per_second() > 0)) {
    throw InputError(fmt::format("GPU '{}' has no {} tensor cores ({}_peak is 0): cannot run a {} GEMM", name,
                                 to_string(d), to_string(d), to_string(d)));
  }
  return peak;
}

void GpuSpec::validate() const {
  auto need = [&](bool ok, std::string_view field) {
    if (!ok) throw InputError(fmt::format("GPU '{}': {} must be positive", name, field));
  };
  need(fp32_peak.per_second() > 0, "fp32_peak");
  need(tensor_peak.per_second() > 0, "tensor_peak");
  need(memory_bandwidth.bps() > 0, "memory_bandwidth");
  need(sms > 0, "sms");
  need(l2_cache.count() > 0, "l2_cache");
  need(memory.count() > 0, "memory");
  if (tf32_peak.per_second() < 0)
    throw InputError(fmt::format("GPU '{}': tf32_peak must not be negative", name));
  if (fp8_peak.per_second() < 0)
    throw InputError(fmt::format("GPU '{}': fp8_peak must not be negative", name));
}

namespace {
// Dense (non-sparse) datasheet peaks: NVIDIA A100 datasheet (TF32 156,
// BF16/FP16 312 TFLOP/s, no FP8), H100 SXM5 datasheet (TF32 494.7, BF16/FP16
// 989.4, FP8 1978.9: half of the with-sparsity figures); H200 has H100 SXM's
// compute.
const std::array<GpuSpec, 4>& presets() {
  static const std::array<GpuSpec, 4> kPresets{{
      {"A100-40GB", FlopRate::tflops(19.5), FlopRate::tflops(312), Bandwidth::gigabytes_per_second(1555),
       108, Bytes(40'000'000), Bytes::gib(40), FlopRate::tflops(156), FlopRate::tflops(0)},
      {"A100-80GB", FlopRate::tflops(19.5), FlopRate::tflops(312), Bandwidth::gigabytes_per_second(2039),
       108, Bytes(40'000'000), Bytes::gib(80), FlopRate::tflops(156), FlopRate::tflops(0)},
      {"H100-SXM", FlopRate::tflops(66.9), FlopRate::tflops(989.4), Bandwidth::gigabytes_per_second(3350),
       132, Bytes(50'000'000), Bytes::gib(80), FlopRate::tflops(494.7), FlopRate::tflops(1978.9)},
      {"H200", FlopRate::tflops(66.9), FlopRate::tflops(989.4), Bandwidth::gigabytes_per_second(4800),
       132, Bytes(50'000'000), Bytes(141'000'000'000), FlopRate::tflops(494.7), FlopRate::tflops(1978.9)},
  }};
  return kPresets;
}
}  // namespace

const GpuSpec& gpu_preset(std::string_view name) {
  for (const auto& g : presets()) {
    if (g.name == name) return g;
  }
  std::string known;
  for (const auto& g : presets()) known += (known.empty() ? "" : ", ") + g.name;
  throw InputError(fmt::format("unknown GPU preset '{}' (known: {})", name, known));
}

std::vector<std::string> gpu_preset_names() {
  std::vector<std::string> out;
  for (const auto& g : presets()) out.push_back(g.name);
  return out;
}

}  // namespace tessera::node_model
