#include "tessera/node_model/gpu_spec.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <fmt/format.h>
#include <string>

#include "tessera/error.hpp"

namespace tessera::node_model {

int dtype_bytes(DType d) { return d == DType::FP32 ? 4 : 2; }

std::string_view to_string(DType d) {
  switch (d) {
    case DType::FP32: return "fp32";
    case DType::FP16: return "fp16";
    case DType::BF16: return "bf16";
  }
  return "?";
}

DType parse_dtype(std::string_view text) {
  std::string s(text);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "fp32" || s == "float32") return DType::FP32;
  if (s == "fp16" || s == "float16") return DType::FP16;
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  throw InputError(fmt::format("unknown dtype '{}' (expected fp32, fp16 or bf16)", text));
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
}

namespace {
// Dense (non-sparse) datasheet peaks.
const std::array<GpuSpec, 4>& presets() {
  static const std::array<GpuSpec, 4> kPresets{{
      {"A100-40GB", FlopRate::tflops(19.5), FlopRate::tflops(312), Bandwidth::gigabytes_per_second(1555),
       108, Bytes(40'000'000), Bytes::gib(40)},
      {"A100-80GB", FlopRate::tflops(19.5), FlopRate::tflops(312), Bandwidth::gigabytes_per_second(2039),
       108, Bytes(40'000'000), Bytes::gib(80)},
      {"H100-SXM", FlopRate::tflops(66.9), FlopRate::tflops(989), Bandwidth::gigabytes_per_second(3350),
       132, Bytes(50'000'000), Bytes::gib(80)},
      {"H200", FlopRate::tflops(66.9), FlopRate::tflops(989), Bandwidth::gigabytes_per_second(4800),
       132, Bytes(50'000'000), Bytes(141'000'000'000)},
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
