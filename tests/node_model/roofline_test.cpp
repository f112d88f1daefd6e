#include "tessera/node_model/roofline.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>

#include "tessera/error.hpp"

using namespace tessera;
using namespace tessera::node_model;

TEST(GpuSpec, PresetsAreComplete) {
  for (const auto& name : gpu_preset_names()) {
    EXPECT_NO_THROW(gpu_preset(name).validate()) << name;
  }
  EXPECT_EQ(gpu_preset("H100-SXM").sms, 132);
  EXPECT_EQ(gpu_preset("A100-80GB").memory, Bytes::gib(80));
  try {
    (void)gpu_preset("B300");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("H100-PCIe, B200, GB200, MI300X"), std::string::npos) << e.what();
  }
}

TEST(GpuSpec, PresetsByTheNamesToolsPrint) {
  // Any case, spaces or underscores for hyphens, the vendor's prefix, and
  // the names nvidia-smi / rocm-smi print for the presets' parts.
  const std::map<std::string, std::string> same = {
      {"a100-80gb", "A100-80GB"},
      {"A100_80GB", "A100-80GB"},
      {"NVIDIA A100-SXM4-80GB", "A100-80GB"},
      {"NVIDIA A100-SXM4-40GB", "A100-40GB"},
      {"A100-SXM-80GB", "A100-80GB"},
      {"NVIDIA H100 80GB HBM3", "H100-SXM"},
      {"h100 sxm", "H100-SXM"},
      {"H100-SXM5", "H100-SXM"},
      {"NVIDIA H100 PCIe", "H100-PCIe"},
      {"NVIDIA H200", "H200"},
      {"Tesla V100-SXM2-32GB", "V100-SXM2"},
      {"AMD Instinct MI300X", "MI300X"},
      {"  nvidia  b200 ", "B200"},
      {"B200-SXM", "B200"},  // helper 132: refused without a hint
      {"B200 SXM6", "B200"},
      {"H200-SXM", "H200"},
      {"h200_sxm5", "H200"},
  };
  for (const auto& [name, preset] : same) {
    EXPECT_EQ(gpu_preset(name).name, preset) << name;
    EXPECT_EQ(&gpu_preset(name), &gpu_preset(preset)) << name;
    EXPECT_EQ(preset_nvlink_bandwidth(name), preset_nvlink_bandwidth(preset)) << name;
  }
  EXPECT_EQ(preset_nvlink_bandwidth("NVIDIA A100-SXM4-80GB"), Bandwidth::gigabytes_per_second(300));
  // The host interface by PCIe generation, x16 per direction (helper 173:
  // every GPU got PCIe 5.0's 64 GB/s, an A100's is 4.0).
  EXPECT_EQ(preset_pcie_bandwidth("V100-SXM2"), Bandwidth::gigabytes_per_second(16));
  EXPECT_EQ(preset_pcie_bandwidth("NVIDIA A100-SXM4-40GB"), Bandwidth::gigabytes_per_second(32));
  EXPECT_EQ(preset_pcie_bandwidth("A100-80GB"), Bandwidth::gigabytes_per_second(32));
  EXPECT_EQ(preset_pcie_bandwidth("H100-SXM"), Bandwidth::gigabytes_per_second(64));
  EXPECT_EQ(preset_pcie_bandwidth("B200"), Bandwidth::gigabytes_per_second(64));
  EXPECT_FALSE(preset_pcie_bandwidth("GB200").has_value());
  EXPECT_FALSE(preset_pcie_bandwidth("A100").has_value());
  EXPECT_EQ(find_gpu_preset("nvidia h200"), &gpu_preset("H200"));
  EXPECT_EQ(find_gpu_preset("A100"), nullptr);
  EXPECT_EQ(find_gpu_preset("B300"), nullptr);
  // Names of no one preset say what to write; other parts are not mapped.
  const std::map<std::string, std::string> refused = {
      {"A100", "GPU 'A100': ambiguous: write A100-40GB or A100-80GB (the SXM4 parts)"},
      {"h100", "GPU 'h100': ambiguous: write H100-SXM or H100-PCIe"},
      // Both H100 presets hold 80 GB (did-you-mean offered A100-80GB).
      {"H100-80GB", "GPU 'H100-80GB': ambiguous: write H100-SXM or H100-PCIe (both hold 80 GB)"},
      {"NVIDIA H100 NVL", "GPU 'NVIDIA H100 NVL': the H100 NVL (a PCIe card) is not a preset"},
      {"NVIDIA A100 80GB PCIe", "GPU 'NVIDIA A100 80GB PCIe': the PCIe A100 is not a preset"},
      {"NVIDIA A100-PCIE-40GB", "GPU 'NVIDIA A100-PCIE-40GB': the PCIe A100 is not a preset"},
      {"Tesla V100-SXM2-16GB", "GPU 'Tesla V100-SXM2-16GB': the V100-SXM2 preset is the 32 GB part"},
      {"A100-80GB-SXM-fast", "unknown GPU preset 'A100-80GB-SXM-fast' (known: V100-SXM2, A100-40GB"},
      // A near miss of a preset's name is named (tessera::did_you_mean).
      {"H100-SMX", "unknown GPU preset 'H100-SMX', did you mean 'H100-SXM'? (known: V100-SXM2, A100-40GB"},
      {"A100-80G", "unknown GPU preset 'A100-80G', did you mean 'A100-80GB'? (known: "},
      {"", "unknown GPU preset ''"},
  };
  for (const auto& [name, message] : refused) {
    try {
      (void)gpu_preset(name);
      ADD_FAILURE() << name;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(message, 0), 0U) << e.what();
    }
    EXPECT_FALSE(preset_nvlink_bandwidth(name).has_value()) << name;
  }
}

TEST(GpuSpec, VoltaHasFp16TensorCoresOnly) {
  // V100 SXM2 datasheet: FP32 15.7, tensor FP16 125 TFLOP/s, 900 GB/s; 80
  // SMs, 6 MB L2 (Volta whitepaper). No BF16, TF32 or FP8 tensor cores.
  const GpuSpec& v100 = gpu_preset("V100-SXM2");
  EXPECT_DOUBLE_EQ(v100.matmul_peak(DType::FP16).tflops(), 125);
  EXPECT_DOUBLE_EQ(v100.matmul_peak(DType::FP32).tflops(), 15.7);
  EXPECT_DOUBLE_EQ(v100.memory_bandwidth.bps(), 900e9 * 8);
  EXPECT_EQ(v100.sms, 80);
  EXPECT_EQ(v100.memory, Bytes::gib(32));
  for (const DType d : {DType::BF16, DType::TF32, DType::FP8}) {
    try {
      (void)v100.matmul_peak(d);
      ADD_FAILURE() << to_string(d);
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(fmt::format("GPU 'V100-SXM2' has no {} tensor cores", to_string(d))),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_TRUE(gpu_preset("A100-80GB").bf16);
  EXPECT_DOUBLE_EQ(gpu_preset("A100-80GB").matmul_peak(DType::BF16).tflops(), 312);
}

TEST(GpuSpec, PresetNvlinkBandwidthCoversTheNvswitchPresetsOnly) {
  // Every preset is named here, so a preset added or renamed without its
  // NVLink entry fails: the scenario default would silently vanish.
  const std::map<std::string, double> expected = {{"V100-SXM2", 150}, {"A100-40GB", 300}, {"A100-80GB", 300},
                                                  {"H100-SXM", 450},  {"H200", 450},      {"B200", 900},
                                                  {"GB200", 900},     {"H100-PCIe", 0},   {"MI300X", 0}};
  EXPECT_EQ(gpu_preset_names().size(), expected.size());
  for (const std::string& name : gpu_preset_names()) {
    ASSERT_TRUE(expected.contains(name)) << name;
    const auto bw = preset_nvlink_bandwidth(name);
    if (expected.at(name) == 0) {
      EXPECT_FALSE(bw.has_value()) << name;
    } else {
      ASSERT_TRUE(bw.has_value()) << name;
      EXPECT_EQ(*bw, Bandwidth::gigabytes_per_second(expected.at(name))) << name;
    }
  }
  EXPECT_FALSE(preset_nvlink_bandwidth("A100").has_value());  // not a preset name
}

TEST(GpuSpec, ExtrapolationNoteNamesWhatNoMeasurementHereBacks) {
  // Measured generations: Ampere and Hopper at every dtype, Volta at FP32.
  for (const char* name : {"A100-40GB", "A100-80GB", "H100-SXM", "H100-PCIe", "H200"}) {
    for (DType d : {DType::FP32, DType::FP16, DType::BF16}) {
      EXPECT_EQ(extrapolation_note(gpu_preset(name), d), "") << name;
    }
  }
  EXPECT_EQ(extrapolation_note(gpu_preset("V100-SXM2"), DType::FP32), "");
  EXPECT_NE(extrapolation_note(gpu_preset("V100-SXM2"), DType::FP16)
                .find("V100-SXM2 at fp16: no 16-bit kernel of a Volta GPU"),
            std::string::npos);
  for (const char* name : {"B200", "GB200"}) {
    EXPECT_EQ(extrapolation_note(gpu_preset(name), DType::BF16)
                  .rfind(std::string(name) + " (Blackwell): no kernel", 0),
              0U);
    EXPECT_NE(extrapolation_note(gpu_preset(name), DType::FP32), "");
  }
  EXPECT_EQ(extrapolation_note(gpu_preset("MI300X"), DType::BF16).rfind("MI300X (AMD CDNA 3)", 0), 0U);
  // A spec that is not exactly a preset's, even under a preset's name, is
  // known by its spec alone; a preset's spec under another name is the
  // preset (the model sees the spec, not the name).
  GpuSpec h100 = gpu_preset("H100-SXM");
  h100.memory_bandwidth = Bandwidth::gigabytes_per_second(3000);
  EXPECT_EQ(extrapolation_note(h100, DType::BF16).rfind("H100-SXM (an inline GPU, not a preset)", 0), 0U);
  h100 = gpu_preset("H100-SXM");
  h100.name = "my-h100";
  EXPECT_EQ(extrapolation_note(h100, DType::FP32), "");
  h100.sms = 100;
  EXPECT_EQ(extrapolation_note(h100, DType::FP32).rfind("my-h100 (an inline GPU, not a preset)", 0), 0U);
}

TEST(GpuSpec, KnownBiasNoteForHopperAtSixteenBits) {
  // Measured bf16 steps on an H100 and an H200 run 7-13% slower than the
  // model's GPU time: the Hopper presets at 16 bits (fp8 keeps the rest of
  // the step at bf16) carry the note, naming the GPU and the dtype.
  for (const char* name : {"H100-SXM", "H100-PCIe", "H200"}) {
    for (DType d : {DType::BF16, DType::FP16, DType::FP8}) {
      const std::string note = known_bias_note(gpu_preset(name), d);
      EXPECT_EQ(note.rfind(fmt::format("{} at {}: on bf16 training steps measured on an H100 and an H200 the "
                                       "model's GPU time comes out 7-13% short",
                                       name, to_string(d)),
                           0),
                0U)
          << note;
      EXPECT_NE(note.find("optimistic (docs/node_model.md, \"Training steps on an H200\")"),
                std::string::npos);
    }
    // FP8 training (Transformer Engine: the layers' GEMMs in FP8, the rest
    // in bf16) says both.
    EXPECT_EQ(
        known_bias_note(gpu_preset(name), DType::BF16, true)
            .rfind(fmt::format("{} at fp8 (bf16 outside the layers' GEMMs): on bf16 training steps", name),
                   0),
        0U)
        << known_bias_note(gpu_preset(name), DType::BF16, true);
    // ... and claims the sign for its bf16 kernels only (helper 162: the FP8
    // GEMMs' bias is unmeasured).
    EXPECT_NE(
        known_bias_note(gpu_preset(name), DType::BF16, true)
            .find("optimistic in its bf16 kernels (the layers' FP8 GEMMs were not measured in a step: their "
                  "bias is unknown)"),
        std::string::npos)
        << name;
    EXPECT_EQ(known_bias_note(gpu_preset(name), DType::BF16).find("FP8"), std::string::npos) << name;
    // FP32 and TF32 steps were not measured on Hopper: no bias is known.
    EXPECT_EQ(known_bias_note(gpu_preset(name), DType::FP32), "") << name;
    EXPECT_EQ(known_bias_note(gpu_preset(name), DType::TF32), "") << name;
  }
  // Other presets: none known (Volta at 16 bits, Blackwell and AMD have an
  // Untested GPU line instead).
  for (const char* name : {"V100-SXM2", "A100-40GB", "A100-80GB", "B200", "GB200", "MI300X"}) {
    for (DType d : {DType::FP32, DType::FP16, DType::BF16}) {
      EXPECT_EQ(known_bias_note(gpu_preset(name), d), "") << name;
    }
  }
  // An inline GPU with an H100's name but another spec is not the preset.
  GpuSpec h100 = gpu_preset("H100-SXM");
  h100.sms = 100;
  EXPECT_EQ(known_bias_note(h100, DType::BF16), "");
  // One with a preset's spec under another name is that GPU to the model:
  // its notes, naming both (helper 49: an inline H100 copy lost the bias).
  GpuSpec mine = gpu_preset("H100-SXM");
  mine.name = "MyH100";
  EXPECT_TRUE(is_preset(mine));
  EXPECT_EQ(
      known_bias_note(mine, DType::BF16).rfind("MyH100 (H100-SXM's spec) at bf16: on bf16 training steps", 0),
      0U)
      << known_bias_note(mine, DType::BF16);
  EXPECT_EQ(extrapolation_note(mine, DType::BF16), "");
  mine.memory = Bytes(94'000'000'000);  // the capacity times no kernel
  EXPECT_TRUE(is_preset(mine));
  GpuSpec blackwell = gpu_preset("B200");
  blackwell.name = "my-b200";
  EXPECT_EQ(
      extrapolation_note(blackwell, DType::BF16).rfind("my-b200 (B200's spec) (Blackwell): no kernel", 0), 0U)
      << extrapolation_note(blackwell, DType::BF16);
}

TEST(GpuSpec, CurrentGpusFromTheirSpecSheets) {
  // Dense peaks (half the "with sparsity" figures), per GPU.
  const GpuSpec& pcie = gpu_preset("H100-PCIe");
  EXPECT_DOUBLE_EQ(pcie.tensor_peak.tflops(), 756);
  EXPECT_DOUBLE_EQ(pcie.memory_bandwidth.bps(), 2000e9 * 8);
  EXPECT_EQ(pcie.sms, 114);
  const GpuSpec& b200 = gpu_preset("B200");  // HGX B200 / 8
  EXPECT_DOUBLE_EQ(b200.tensor_peak.tflops(), 36000.0 / 8 / 2);
  EXPECT_DOUBLE_EQ(b200.matmul_peak(DType::FP8).tflops(), 72000.0 / 8 / 2);
  EXPECT_DOUBLE_EQ(b200.matmul_peak(DType::TF32).tflops(), 18000.0 / 8 / 2);
  EXPECT_DOUBLE_EQ(b200.memory_bandwidth.bps(), 64e12 / 8 * 8);
  const GpuSpec& gb200 = gpu_preset("GB200");  // GB200 NVL72 / 72
  EXPECT_DOUBLE_EQ(gb200.tensor_peak.tflops(), 360000.0 / 72 / 2);
  EXPECT_DOUBLE_EQ(gb200.fp32_peak.tflops(), 5760.0 / 72);
  const GpuSpec& mi300x = gpu_preset("MI300X");
  EXPECT_DOUBLE_EQ(mi300x.tensor_peak.tflops(), 1307.4);
  // FP32 vector (and matrix) 163.4 TFLOP/s: 304 CUs x 2.1 GHz x 256 FLOP per
  // clock (81.7, the preset's figure before, is the FP64 vector peak).
  EXPECT_NEAR(mi300x.fp32_peak.tflops(), 304 * 2.1e9 * 256 / 1e12, 0.05);
  EXPECT_DOUBLE_EQ(mi300x.matmul_peak(DType::FP32).tflops(), 163.4);
  EXPECT_EQ(mi300x.sms, 304);
  EXPECT_EQ(mi300x.memory, Bytes::gib(192));
  // The existing presets are unchanged.
  EXPECT_DOUBLE_EQ(gpu_preset("H100-SXM").tensor_peak.tflops(), 989.4);
  EXPECT_DOUBLE_EQ(gpu_preset("H200").memory_bandwidth.bps(), 4800e9 * 8);
}

TEST(Kernel, FlopsAndBytes) {
  const auto g = Kernel::gemm(KernelOp::Bmm, 2, 128, 64, 32, DType::FP32);
  EXPECT_DOUBLE_EQ(g.flops().count(), 2.0 * 2 * 128 * 64 * 32);
  EXPECT_EQ(g.bytes().count(), 4 * 2 * (128 * 32 + 32 * 64 + 128 * 64));
  const auto v = Kernel::vector(KernelOp::Add, 10, 100, DType::BF16);
  EXPECT_EQ(v.bytes().count(), 2 * 10 * 100 * 3);  // two inputs, one output
  EXPECT_EQ(parse_kernel_op("ln"), KernelOp::LayerNorm);
  EXPECT_EQ(parse_kernel_op("Linear"), KernelOp::Linear);  // any case
  EXPECT_EQ(parse_kernel_op("BMM"), KernelOp::Bmm);
  EXPECT_EQ(parse_kernel_op("LN"), KernelOp::LayerNorm);
  EXPECT_THROW((void)parse_kernel_op("Linear2"), InputError);
  EXPECT_THROW((void)parse_kernel_op("conv2d"), InputError);
  EXPECT_THROW(Kernel::gemm(KernelOp::Linear, 1, 0, 4, 4, DType::FP32).validate(), InputError);
}

TEST(Roofline, ComputeBoundGemm) {
  RooflinePredictor p(gpu_preset("H100-SXM"));
  // 8192^3 GEMM in bf16: 2*8192^3 FLOPs at 989.4 TFLOP/s (compute bound);
  // tf32 at 494.7, fp8 at 1978.9.
  const auto k = Kernel::gemm(KernelOp::Linear, 1, 8192, 8192, 8192, DType::BF16);
  EXPECT_NEAR(p.predict(k).seconds(), 2.0 * 8192.0 * 8192 * 8192 / 989.4e12, 1e-12);
  auto tf32 = k;
  tf32.dtype = DType::TF32;
  EXPECT_NEAR(p.predict(tf32).seconds(), 2.0 * 8192.0 * 8192 * 8192 / 494.7e12, 1e-12);
  auto fp8 = k;
  fp8.dtype = DType::FP8;
  EXPECT_NEAR(p.predict(fp8).seconds(), 2.0 * 8192.0 * 8192 * 8192 / 1978.9e12, 1e-12);
}

TEST(Roofline, MemoryBoundVector) {
  RooflinePredictor p(gpu_preset("A100-40GB"));
  // 1M-element fp32 add: 12 MB moved at 1555 GB/s.
  const auto k = Kernel::vector(KernelOp::Add, 1024, 1024, DType::FP32);
  EXPECT_NEAR(p.predict(k).seconds(), 12.0 * 1024 * 1024 / 1555e9, 1e-12);
}
