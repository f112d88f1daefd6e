#include "tessera/node_model/gpu_spec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <utility>

#include "tessera/error.hpp"
#include "tessera/names.hpp"

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

std::optional<DType> try_parse_dtype(std::string_view text) {
  std::string s = ascii_lower(text);
  if (s.starts_with("torch.")) s.erase(0, 6);  // PyTorch's spelling: torch.bfloat16
  if (s == "float" || s == "half") s = s == "float" ? "fp32" : "fp16";
  if (s == "fp32" || s == "float32") return DType::FP32;
  if (s == "fp16" || s == "float16") return DType::FP16;
  if (s == "bf16" || s == "bfloat16") return DType::BF16;
  if (s == "tf32") return DType::TF32;
  // PyTorch's FP8 types: both formats time as one FP8 peak.
  if (s == "fp8" || s == "float8_e4m3fn" || s == "float8_e5m2" || s == "float8_e4m3fnuz" ||
      s == "float8_e5m2fnuz")
    return DType::FP8;
  return std::nullopt;
}

DType parse_dtype(std::string_view text) {
  if (auto d = try_parse_dtype(text)) return *d;
  throw InputError(fmt::format("unknown dtype '{}' (expected fp32, tf32, fp16, bf16 or fp8)", text));
}

FlopRate GpuSpec::matmul_peak(DType d) const {
  FlopRate peak = tensor_peak;
  if ((d == DType::FP16 || d == DType::BF16) && !tensor_peak_given) {
    throw InputError(
        fmt::format("GPU '{}' has no 16-bit tensor-core peak (its device config gives no "
                    "TensorFLOPs, in GFLOP/s): cannot time {} GEMMs",
                    name, to_string(d)));
  }
  switch (d) {
    case DType::FP32:
      return fp32_matmul_peak.per_second() > 0 ? fp32_matmul_peak : fp32_peak;
    case DType::FP16: return tensor_peak;
    case DType::BF16:
      if (!bf16) {
        throw InputError(fmt::format(
            "GPU '{}' has no bf16 tensor cores: cannot run bf16 GEMMs (its tensor cores run fp16)", name));
      }
      return tensor_peak;
    case DType::TF32: peak = tf32_peak; break;
    case DType::FP8: peak = fp8_peak; break;
  }
  if (!(peak.per_second() > 0)) {
    // Where a peak is given: an inline GPU's `fp8_peak`, a device JSON's
    // `FP8FLOPs` (helper 102: only the first was named, to a JSON's user).
    std::string upper(to_string(d));
    for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    throw InputError(
        fmt::format("GPU '{}' has no {} tensor cores (no {} peak: `{}_peak` of an inline GPU, "
                    "`{}FLOPs` of a device JSON): cannot run {} GEMMs",
                    name, to_string(d), upper, to_string(d), upper, to_string(d)));
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
  if (fp32_matmul_peak.per_second() < 0)
    throw InputError(fmt::format("GPU '{}': fp32_matmul_peak must not be negative", name));
}

namespace {
// Dense (non-sparse) datasheet peaks: NVIDIA A100 datasheet (TF32 156,
// BF16/FP16 312 TFLOP/s, no FP8), H100 SXM5 datasheet (TF32 494.7, BF16/FP16
// 989.4, FP8 1978.9: half of the with-sparsity figures); H200 has H100 SXM's
// compute, and 60 MiB of L2 as its device query reports (PyTorch's
// L2_cache_size on the H200 measured for tests/data/h200, 2026-11-26).
//
// V100-SXM2: NVIDIA Tesla V100 datasheet, SXM2 column (FP32 15.7, tensor
// FP16 125 TFLOP/s; 32 GB HBM2 at 900 GB/s); 80 SMs and 6 MB of L2 from the
// Volta architecture whitepaper. No TF32, BF16 or FP8 tensor cores.
//
// Newer GPUs, all dense (half of NVIDIA's "with sparsity" figures):
//  - H100-PCIe: NVIDIA H100 Tensor Core GPU datasheet, PCIe column (FP32 51,
//    TF32 378, BF16/FP16 756, FP8 1513 TFLOP/s; 80GB HBM2e at 2.0 TB/s; 114
//    SMs, 50 MB L2 from the Hopper architecture whitepaper).
//  - B200: NVIDIA HGX B200 datasheet divided by its 8 GPUs (FP32 600 / 8 =
//    75, TF32 18 PF sparse -> 1.125, BF16/FP16 36 PF sparse -> 2.25, FP8
//    72 PF sparse -> 4.5 PFLOP/s; 1.44 TB HBM3e -> 180 GB and 64 TB/s -> 8
//    TB/s per GPU); 148 SMs (Chips and Cheese, "Nvidia's B200"), 126 MB L2 as the device query reports
//    them (not on the datasheet).
//  - GB200: one Blackwell GPU of the NVIDIA GB200 NVL72 datasheet divided by
//    its 72 GPUs (FP32 5,760 TF -> 80 TF, TF32 180 PF sparse -> 1.25, BF16
//    360 PF sparse -> 2.5, FP8 720 PF sparse -> 5 PFLOP/s; 13.4 TB HBM3e ->
//    186 GB and 576 TB/s -> 8 TB/s per GPU); SMs and L2 as B200's.
//  - MI300X: AMD Instinct MI300X datasheet (FP32 vector and matrix 163.4
//    (81.7 is its FP64 vector peak), TF32 653.7,
//    BF16/FP16 1,307.4, FP8 2,614.9 TFLOP/s dense; 192 GB HBM3 at 5.3 TB/s;
//    304 compute units in `sms`; `l2_cache` holds the 256 MB Infinity Cache,
//    the last-level cache that plays the L2's role on NVIDIA GPUs).
// The node model was fit on NVIDIA GPUs up to H100: forecasts on Blackwell
// and AMD GPUs are extrapolations (docs/node_model.md, Limitations).
const std::array<GpuSpec, 9>& presets() {
  static const std::array<GpuSpec, 9> kPresets{{
      {"V100-SXM2", FlopRate::tflops(15.7), FlopRate::tflops(125), Bandwidth::gigabytes_per_second(900), 80,
       Bytes(6'291'456), Bytes::gib(32), FlopRate::tflops(0), FlopRate::tflops(0), false},
      {"A100-40GB", FlopRate::tflops(19.5), FlopRate::tflops(312), Bandwidth::gigabytes_per_second(1555), 108,
       Bytes(40'000'000), Bytes::gib(40), FlopRate::tflops(156), FlopRate::tflops(0)},
      {"A100-80GB", FlopRate::tflops(19.5), FlopRate::tflops(312), Bandwidth::gigabytes_per_second(2039), 108,
       Bytes(40'000'000), Bytes::gib(80), FlopRate::tflops(156), FlopRate::tflops(0)},
      {"H100-SXM", FlopRate::tflops(66.9), FlopRate::tflops(989.4), Bandwidth::gigabytes_per_second(3350),
       132, Bytes(50'000'000), Bytes::gib(80), FlopRate::tflops(494.7), FlopRate::tflops(1978.9)},
      {"H200", FlopRate::tflops(66.9), FlopRate::tflops(989.4), Bandwidth::gigabytes_per_second(4800), 132,
       Bytes(62'914'560), Bytes(141'000'000'000), FlopRate::tflops(494.7), FlopRate::tflops(1978.9)},
      {"H100-PCIe", FlopRate::tflops(51), FlopRate::tflops(756), Bandwidth::gigabytes_per_second(2000), 114,
       Bytes(50'000'000), Bytes::gib(80), FlopRate::tflops(378), FlopRate::tflops(1513)},
      {"B200", FlopRate::tflops(75), FlopRate::tflops(2250), Bandwidth::gigabytes_per_second(8000), 148,
       Bytes(126'000'000), Bytes(180'000'000'000), FlopRate::tflops(1125), FlopRate::tflops(4500)},
      {"GB200", FlopRate::tflops(80), FlopRate::tflops(2500), Bandwidth::gigabytes_per_second(8000), 148,
       Bytes(126'000'000), Bytes(186'000'000'000), FlopRate::tflops(1250), FlopRate::tflops(5000)},
      {"MI300X", FlopRate::tflops(163.4), FlopRate::tflops(1307.4), Bandwidth::gigabytes_per_second(5300),
       304, Bytes(256'000'000), Bytes::gib(192), FlopRate::tflops(653.7), FlopRate::tflops(2614.9)},
  }};
  return kPresets;
}
}  // namespace

namespace {

/// A GPU name as compared: ASCII lower case, spaces and underscores as
/// hyphens, runs of hyphens as one, the vendor's prefix ("NVIDIA ", "Tesla ",
/// "AMD ") dropped: "NVIDIA A100-SXM4-80GB" -> "a100-sxm4-80gb".
std::string normalized_gpu_name(std::string_view name) {
  std::string s;
  for (char c : ascii_lower(name)) {
    if (c == ' ' || c == '_') c = '-';
    if (c == '-' && (s.empty() || s.back() == '-')) continue;
    s.push_back(c);
  }
  while (!s.empty() && s.back() == '-') s.pop_back();
  for (std::string_view prefix : {"nvidia-", "tesla-", "amd-"}) {
    if (s.rfind(prefix, 0) == 0) s.erase(0, prefix.size());
  }
  return s;
}

/// Other names of the presets' parts, normalized: what `nvidia-smi
/// --query-gpu=name` and `rocm-smi` print for them, and the SXM parts' full
/// names (H100 and H200 SXM5, B200 SXM6). Only names of the same part: the PCIe A100 cards differ in
/// bandwidth and power, the 16 GB V100 in memory.
constexpr std::array<std::pair<std::string_view, std::string_view>, 16> kAliases{{
    {"v100-sxm2-32gb", "V100-SXM2"},
    {"a100-sxm4-40gb", "A100-40GB"},
    {"a100-sxm4-80gb", "A100-80GB"},
    {"a100-sxm-40gb", "A100-40GB"},
    {"a100-sxm-80gb", "A100-80GB"},
    {"h100-80gb-hbm3", "H100-SXM"},
    {"h100-sxm5", "H100-SXM"},
    {"h100-sxm5-80gb", "H100-SXM"},
    {"h100-sxm-80gb", "H100-SXM"},
    {"h100-pcie-80gb", "H100-PCIe"},
    // The SXM form factors' names (helper 132: `B200-SXM` was refused).
    {"h200-sxm", "H200"},
    {"h200-sxm5", "H200"},
    {"b200-sxm", "B200"},
    {"b200-sxm6", "B200"},
    {"instinct-mi300x", "MI300X"},
    {"mi300x-oam", "MI300X"},
}};

/// Names of no one preset, and what to write instead.
constexpr std::string_view kPcieA100 =
    "the PCIe A100 is not a preset (the A100 presets are the SXM4 parts, 1,555 and 2,039 GB/s, "
    "with NVSwitch): give its spec as an inline GPU (docs/scenarios.md)";
constexpr std::array<std::pair<std::string_view, std::string_view>, 10> kNotOnePreset{{
    {"a100", "ambiguous: write A100-40GB or A100-80GB (the SXM4 parts)"},
    {"h100", "ambiguous: write H100-SXM or H100-PCIe"},
    // Both H100 presets hold 80 GB: without this, did-you-mean offered A100-80GB.
    {"h100-80gb", "ambiguous: write H100-SXM or H100-PCIe (both hold 80 GB)"},
    {"h100-nvl",
     "the H100 NVL (a PCIe card) is not a preset: give its spec as an inline GPU (docs/scenarios.md)"},
    {"v100",
     "ambiguous: V100-SXM2 is the 32 GB SXM2 part; give another V100 as an inline GPU (docs/scenarios.md)"},
    {"a100-pcie-40gb", kPcieA100},
    {"a100-pcie-80gb", kPcieA100},
    {"a100-80gb-pcie", kPcieA100},
    {"v100-sxm2-16gb",
     "the V100-SXM2 preset is the 32 GB part: give the 16 GB one as an inline GPU (docs/scenarios.md)"},
    {"v100-pcie-32gb",
     "the PCIe V100 is not a preset (V100-SXM2 is): give its spec as an inline GPU (docs/scenarios.md)"},
}};

}  // namespace

const GpuSpec* find_gpu_preset(std::string_view name) {
  const std::string n = normalized_gpu_name(name);
  std::string_view target;
  for (const auto& [alias, preset] : kAliases) {
    if (alias == n) target = preset;
  }
  for (const auto& g : presets()) {
    if (target.empty() ? normalized_gpu_name(g.name) == n : g.name == target) return &g;
  }
  return nullptr;
}

const GpuSpec& gpu_preset(std::string_view name) {
  if (const GpuSpec* g = find_gpu_preset(name)) return *g;
  const std::string n = normalized_gpu_name(name);
  for (const auto& [other, hint] : kNotOnePreset) {
    if (other == n) throw InputError(fmt::format("GPU '{}': {}", name, hint));
  }
  std::string known;
  for (const auto& g : presets()) known += (known.empty() ? "" : ", ") + g.name;
  throw InputError(fmt::format("unknown GPU preset '{}'{} (known: {})", name,
                               did_you_mean(std::string(name), gpu_preset_names()), known));
}

std::vector<std::string> gpu_preset_names() {
  std::vector<std::string> out;
  for (const auto& g : presets()) out.push_back(g.name);
  return out;
}

namespace {

/// A preset's links out of the GPU, GB/s per direction (0: none given):
/// NVLink to the node's switch or peers, the PCIe x16 of its generation.
struct HostLinks {
  std::string_view preset;
  double nvlink = 0;
  double pcie = 0;
};
constexpr std::array<HostLinks, 9> kHostLinks{{
    {"V100-SXM2", 150, 16},
    {"A100-40GB", 300, 32},
    {"A100-80GB", 300, 32},
    {"H100-SXM", 450, 64},
    {"H100-PCIe", 0, 64},
    {"H200", 450, 64},
    {"B200", 900, 64},
    {"GB200", 900, 0},
    {"MI300X", 0, 64},
}};

/// The GB/s `field` of kHostLinks gives the preset `name` means; empty for
/// another name or a preset without it.
std::optional<Bandwidth> host_link(std::string_view name, double HostLinks::*field) {
  const GpuSpec* g = find_gpu_preset(name);
  if (g == nullptr) return std::nullopt;
  for (const HostLinks& h : kHostLinks) {
    if (h.preset == g->name && h.*field > 0) return Bandwidth::gigabytes_per_second(h.*field);
  }
  return std::nullopt;
}

}  // namespace

std::optional<Bandwidth> preset_nvlink_bandwidth(std::string_view name) {
  return host_link(name, &HostLinks::nvlink);
}

std::optional<Bandwidth> preset_pcie_bandwidth(std::string_view name) {
  return host_link(name, &HostLinks::pcie);
}

/// The preset with `gpu`'s spec, whatever its name and memory capacity (an
/// inline GPU that copies a preset's numbers, or a preset with more or less
/// memory, is that GPU to the node model: the capacity times no kernel);
/// nullptr when none has it.
const GpuSpec* preset_of_spec(const GpuSpec& gpu) {
  for (const GpuSpec& p : presets()) {
    GpuSpec same = gpu;
    same.name = p.name;
    same.memory = p.memory;
    if (same == p) return &p;
  }
  return nullptr;
}

/// How notes name `gpu` when its spec is `preset`'s: its name, with the
/// preset's beside it when that does not start with it ("MyH100 (H100-SXM's
/// spec)").
std::string spec_label(const GpuSpec& gpu, const GpuSpec& preset) {
  // A name that starts with the preset's says it already ("H100-SXM (memory 94GB)").
  return gpu.name.rfind(preset.name, 0) == 0 ? gpu.name
                                             : fmt::format("{} ({}'s spec)", gpu.name, preset.name);
}

bool is_preset(const GpuSpec& gpu) { return preset_of_spec(gpu) != nullptr; }

std::string extrapolation_note(const GpuSpec& gpu, DType dtype, std::string_view not_preset) {
  const GpuSpec* it = preset_of_spec(gpu);
  constexpr std::string_view kFit = "a node model fit on NVIDIA GPUs from Pascal to Hopper";
  if (it == nullptr) {
    return fmt::format("{} ({}, not a preset): its kernel times extrapolate {} from its spec alone", gpu.name,
                       not_preset, kFit);
  }
  const std::string& n = it->name;
  const std::string label = spec_label(gpu, *it);
  if (n == "B200" || n == "GB200") {
    return fmt::format(
        "{} (Blackwell): no kernel of this generation was measured here; its kernel times "
        "extrapolate {}",
        label, kFit);
  }
  if (n == "MI300X") {
    return fmt::format(
        "{} (AMD CDNA 3): no AMD kernel or collective was measured here; its kernel times extrapolate {}, "
        "and its collectives take the efficiency NCCL reached on NVIDIA's NVLink",
        label, kFit);
  }
  if (n == "V100-SXM2" && dtype != DType::FP32) {
    return fmt::format(
        "{} at {}: no 16-bit kernel of a Volta GPU was measured here; its tensor-core GEMMs "
        "extrapolate a model fit on an H100 (its FP32 kernels are NeuSight's V100)",
        label, to_string(dtype));
  }
  return {};
}

std::string known_bias_note(const GpuSpec& gpu, DType dtype, bool fp8) {
  if (dtype == DType::FP32 || dtype == DType::TF32) return {};
  const GpuSpec* it = preset_of_spec(gpu);
  if (it == nullptr) return {};
  const std::string& n = it->name;
  if (n != "H100-SXM" && n != "H100-PCIe" && n != "H200") return {};
  // At fp8 the sign holds for the bf16 kernels only: no FP8 training step
  // was measured, and the FP8 GEMMs' own bias is unknown (helper 162: the
  // line said the whole compute was optimistic).
  return fmt::format(
      "{} at {}: on bf16 training steps measured on an H100 and an H200 the model's GPU time comes out 7-13% "
      "short where the GPU bounds them (its memory-bound kernels and optimizer on Hopper), so the compute of "
      "forecasts on it is optimistic{} (docs/node_model.md, \"Training steps on an H200\")",
      spec_label(gpu, *it),
      fp8 ? fmt::format("fp8 ({} outside the layers' GEMMs)", to_string(dtype))
          : std::string(to_string(dtype)),
      fp8 ? " in its bf16 kernels (the layers' FP8 GEMMs were not measured in a step: their bias is unknown)"
          : "");
}

}  // namespace tessera::node_model
