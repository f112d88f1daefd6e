#pragma once
// What the node model needs to know about one GPU.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/units.hpp"

namespace tessera::node_model {

/// Element types. TF32 is FP32 data (4 bytes) whose GEMMs run on TF32
/// tensor cores (PyTorch's allow_tf32, XLA's default precision); its vector
/// ops are FP32 ops. FP8 (E4M3/E5M2, 1 byte) GEMMs run on FP8 tensor cores.
enum class DType { FP32, FP16, BF16, TF32, FP8 };

/// Bytes per element of `d`: 4 4 2 2 1 for fp32 tf32 fp16 bf16 fp8.
int dtype_bytes(DType d);
/// "fp32", "tf32", "fp16", "bf16", "fp8".
std::string_view to_string(DType d);
/// Parses "fp32" | "tf32" | "fp16" | "bf16" | "fp8" (case-insensitive, also
/// "float32", "float16", "bfloat16", "float", "half", and PyTorch's
/// "torch.bfloat16" ...); throws InputError.
DType parse_dtype(std::string_view text);
/// As parse_dtype, with no value for any other text (int64, bool ...).
std::optional<DType> try_parse_dtype(std::string_view text);

struct GpuSpec {
  std::string name;
  FlopRate fp32_peak;     ///< dense FP32 (CUDA cores)
  FlopRate tensor_peak;   ///< dense FP16/BF16 on tensor cores
  Bandwidth memory_bandwidth;
  int sms = 0;            ///< streaming multiprocessors
  Bytes l2_cache;
  Bytes memory;
  FlopRate tf32_peak;     ///< dense TF32 on tensor cores (0: no TF32 tensor cores)
  FlopRate fp8_peak;      ///< dense FP8 on tensor cores (0: no FP8 tensor cores)
  bool bf16 = true;       ///< BF16 on the tensor cores at tensor_peak (false: FP16 only, as Volta)
  /// False for a device config without "TensorFLOPs": tensor_peak is then
  /// its FP32 matmul peak, and no 16-bit tensor-core peak is known (fp16 and
  /// bf16 GEMMs are refused rather than timed at FP32 speed).
  bool tensor_peak_given = true;
  /// Dense FP32 GEMMs where they run faster than fp32_peak: AMD's matrix
  /// cores (a device config's "SingleFLOPsMM"); 0: fp32_peak (NVIDIA runs
  /// FP32 GEMMs on the CUDA cores).
  FlopRate fp32_matmul_peak = FlopRate::per_second(0);

  bool operator==(const GpuSpec&) const = default;

  /// Peak for GEMMs of the given element type: fp32_peak (fp32_matmul_peak
  /// where given), tf32_peak, tensor_peak (fp16, bf16) or fp8_peak. Throws InputError naming the GPU
  /// and the dtype when the GPU has no tensor cores for it (peak 0, or bf16
  /// false).
  [[nodiscard]] FlopRate matmul_peak(DType d) const;
  /// Throws InputError naming the first field that is not positive (tf32_peak
  /// and fp8_peak: negative).
  void validate() const;
};

/// Shipped specs: "V100-SXM2" (32 GB), "A100-40GB", "A100-80GB", "H100-SXM",
/// "H200", "H100-PCIe", "B200", "GB200" (one Blackwell GPU of an NVL72),
/// "MI300X" (sms: compute units). A name matches in any case, with spaces or
/// underscores for hyphens and without the vendor's prefix, and the name
/// nvidia-smi or rocm-smi prints for a preset's part means that preset
/// ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "AMD Instinct MI300X").
/// Throws InputError for other names, saying what to write where the name
/// is of no one preset ("A100", a PCIe A100).
const GpuSpec& gpu_preset(std::string_view name);
/// The preset `name` means as gpu_preset reads it; nullptr for any other name.
const GpuSpec* find_gpu_preset(std::string_view name);
std::vector<std::string> gpu_preset_names();

/// The NVLink bandwidth per GPU and direction of a preset's SXM / HGX part,
/// from NVIDIA's datasheets (their totals count both directions): V100-SXM2
/// 150 GB/s (NVLink 2, 300 GB/s total), A100-40GB and A100-80GB 300 GB/s
/// (NVLink 3, 600), H100-SXM and H200 450 GB/s (NVLink 4, 900), B200 and
/// GB200 900 GB/s (NVLink 5, 1.8 TB/s). Empty for presets without one NVLink
/// port to an NVSwitch: H100-PCIe (a two-card bridge at most) and MI300X
/// (an Infinity Fabric mesh, whose bandwidth is per link), and for names
/// that are not presets (`name` as gpu_preset reads it). A scenario's
/// `cluster.nvlink_bandwidth` defaults to it.
std::optional<Bandwidth> preset_nvlink_bandwidth(std::string_view name);
/// The host interface of a preset's part, PCIe x16 per direction by its
/// generation (what a GPU's traffic to an HCA it shares crosses): V100-SXM2
/// 16 GB/s (PCIe 3.0), A100-40GB and A100-80GB 32 GB/s (4.0), H100-SXM,
/// H100-PCIe, H200, B200 and MI300X 64 GB/s (5.0). Empty for GB200 (the
/// path from a superchip's GPU to its HCA is not a datasheet's PCIe slot)
/// and for names that are not presets. A scenario's `cluster.pcie_bandwidth`
/// defaults to it, else to PCIe 5.0's 64 GB/s.
std::optional<Bandwidth> preset_pcie_bandwidth(std::string_view name);

/// Why kernel times on `gpu` at training dtype `dtype` are an extrapolation
/// beyond the GPU generations the node model was fit on or checked against
/// here, in one sentence for reports; empty when measurements of the GPU's
/// generation at that precision back it. Backed: the Ampere and Hopper
/// presets (A100-40GB, A100-80GB, H100-SXM, H100-PCIe, H200) at any dtype
/// (FP32: NeuSight's GPUs and 4-GPU runs; 16-bit: the H100 GEMM tables,
/// vTrain's A100 runs, H100 and H200 kernels and steps), and the V100 at
/// FP32 (NeuSight's V100). Not: the V100's FP16 tensor cores, Blackwell
/// (B200, GB200), AMD (MI300X), and any inline GPU (a spec that is not
/// exactly a preset's): docs/node_model.md, "GPU presets". `not_preset`
/// names such a GPU's source in the note ("an inline GPU", "a device JSON").
std::string extrapolation_note(const GpuSpec& gpu, DType dtype,
                               std::string_view not_preset = "an inline GPU");
/// Whether `gpu` has the spec of one of the presets (gpu_preset_names()),
/// whatever its name and memory capacity (which times no kernel).
bool is_preset(const GpuSpec& gpu);

/// A known bias of kernel times on `gpu` at training dtype `dtype`, found
/// by validating the model on measured training steps, in one sentence for
/// reports; empty when none is known. Known: the Hopper presets (H100-SXM,
/// H100-PCIe, H200) at 16 bits (fp16, bf16, fp8): on every GPU-bound bf16
/// step measured on an H100 and an H200 (tests/data/h100, tests/data/h200,
/// plain PyTorch and Megatron's kernels) the model's GPU time is 7-13%
/// short, so the compute of forecasts there is optimistic
/// (docs/node_model.md, "Training steps on an H200").
/// Inline GPUs get none: their extrapolation_note already says the model is
/// not checked on them.
/// `fp8`: FP8 training (its GEMMs in FP8, the rest in `dtype`, bf16): the
/// note says "at fp8 (bf16 outside the layers' GEMMs)", the bias being of
/// the bf16 kernels.
std::string known_bias_note(const GpuSpec& gpu, DType dtype, bool fp8 = false);

}  // namespace tessera::node_model
