#include "tessera/node_model/device_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "tessera/error.hpp"
#include "tessera/names.hpp"

namespace tessera::node_model {
namespace {

/// A positive number up to `max` in the field's unit (GB, GB/s, MB, GFLOPS,
/// SMs): far above any GPU, far below where converting it to bytes, bits per
/// second or FLOP/s would overflow.
double positive_number(const JsonValue& json, const std::string& source, const char* field, double max = 1e9) {
  const JsonValue* v = json.find(field);
  if (v == nullptr) throw InputError(fmt::format("{}: missing field '{}'", source, field));
  if (!v->is_number()) throw InputError(fmt::format("{}: field '{}' must be a number", source, field));
  const double x = v->number();
  if (!std::isfinite(x) || x <= 0) {
    throw InputError(fmt::format("{}: field '{}' must be positive (got {})", source, field, x));
  }
  if (x > max) throw InputError(fmt::format("{}: field '{}' must be at most {:g} (got {:g})", source, field, max, x));
  return x;
}

/// The fields a device config may hold: those read below, and NeuSight's
/// Core_Per_SM and Freq (not read). Every read goes through field(), which
/// refuses a name missing here, so the list and the reads stay in step.
const std::vector<std::string> kFields{
    "Device",        "Dev_Mem",     "Mem_Bw",    "Num_Sm",   "L2Cache",     "SingleFLOPs", "SingleFLOPsVEC",
    "SingleFLOPsMM", "TensorFLOPs", "TF32FLOPs", "FP8FLOPs", "Core_Per_SM", "Freq"};

const char* field(const char* name) {
  if (std::find(kFields.begin(), kFields.end(), name) == kFields.end()) {
    throw Error(fmt::format("device config: field '{}' is read but not in kFields", name));
  }
  return name;
}

}  // namespace

GpuSpec gpu_from_device_json(const JsonValue& json, const std::string& source) {
  if (!json.is_object()) throw InputError(fmt::format("{}: a device config must be a JSON object", source));
  GpuSpec g;
  const JsonValue* name = json.find(field("Device"));
  if (name == nullptr || !name->is_string() || name->string().empty()) {
    throw InputError(fmt::format("{}: missing string field 'Device'", source));
  }
  g.name = name->string();
  // A field within a typo of one read here (case included: TensorFlops) is
  // an error, not ignored: a missing peak changes every 16-bit time. Other
  // fields (NeuSight's Core_Per_SM, Freq, ...) are left alone.
  for (const auto& [key, value] : json.object()) {
    if (std::find(kFields.begin(), kFields.end(), key) != kFields.end()) continue;
    std::string hint;
    for (const std::string& f : kFields) {
      if (std::equal(key.begin(), key.end(), f.begin(), f.end(), [](char a, char b) {
            return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
          })) {
        hint = fmt::format(", did you mean '{}'? (field names are case-sensitive)", f);
      }
    }
    if (hint.empty()) hint = did_you_mean(key, kFields);
    if (!hint.empty()) throw InputError(fmt::format("{}: unknown field '{}'{}", source, key, hint));
  }
  g.memory = Bytes(
      static_cast<std::int64_t>(positive_number(json, source, field("Dev_Mem"), 1e6) * 1024.0 * 1024 * 1024));
  g.memory_bandwidth = Bandwidth::bits_per_second(
      static_cast<std::int64_t>(std::llround(positive_number(json, source, field("Mem_Bw"), 1e6) * 8e9)));
  const double sms = positive_number(json, source, field("Num_Sm"), 1e6);
  if (sms != std::floor(sms)) throw InputError(fmt::format("{}: field 'Num_Sm' must be an integer", source));
  g.sms = static_cast<int>(sms);
  g.l2_cache =
      Bytes(static_cast<std::int64_t>(positive_number(json, source, field("L2Cache"), 1e6) * 1024.0 * 1024));
  if (json.find(field("SingleFLOPs")) != nullptr) {
    const double f = positive_number(json, source, field("SingleFLOPs")) * 1e9;
    g.fp32_peak = FlopRate::per_second(f);
    g.tensor_peak = FlopRate::per_second(f);
  } else if (json.find(field("SingleFLOPsVEC")) != nullptr || json.find(field("SingleFLOPsMM")) != nullptr) {
    // NeuSight's AMD configs: the vector peak for vector kernels, the matrix
    // cores' for FP32 GEMMs (NeuSight's GEMM predictors read SingleFLOPsMM).
    g.fp32_peak = FlopRate::per_second(positive_number(json, source, field("SingleFLOPsVEC")) * 1e9);
    g.tensor_peak = FlopRate::per_second(positive_number(json, source, field("SingleFLOPsMM")) * 1e9);
    g.fp32_matmul_peak = g.tensor_peak;
  } else {
    throw InputError(fmt::format("{}: missing field 'SingleFLOPs'", source));
  }
  // TF32: optional "TF32FLOPs"; else half the tensor peak when "TensorFLOPs"
  // is given (every NVIDIA GPU with TF32 tensor cores so far), else the FP32
  // peak (no tensor cores known: a TF32 request runs as an FP32 GEMM). FP8:
  // optional "FP8FLOPs", else none.
  g.tf32_peak = g.matmul_peak(DType::FP32);
  g.tensor_peak_given = json.find(field("TensorFLOPs")) != nullptr;
  if (const JsonValue* tp = json.find(field("TensorFLOPs")); tp != nullptr) {
    g.tensor_peak = FlopRate::per_second(positive_number(json, source, field("TensorFLOPs")) * 1e9);
    g.tf32_peak = FlopRate::per_second(g.tensor_peak.per_second() / 2.0);
  }
  if (json.find(field("TF32FLOPs")) != nullptr) {
    g.tf32_peak = FlopRate::per_second(positive_number(json, source, field("TF32FLOPs")) * 1e9);
  }
  if (json.find(field("FP8FLOPs")) != nullptr) {
    g.fp8_peak = FlopRate::per_second(positive_number(json, source, field("FP8FLOPs")) * 1e9);
  }
  // NeuSight's units are GB/s and GFLOP/s: a value below any GPU's (a
  // bandwidth written in TB/s, a peak in TFLOP/s) is refused, not timed
  // 1000x slow.
  auto plausible = [&](const char* key, double value, double least, const char* unit, const char* other) {
    if (value >= least) return;
    throw InputError(
        fmt::format("{}: field '{}' is {:g} {}, below any GPU's {:g} (in {}? the field is in {})", source,
                    key, value, unit, least, other, unit));
  };
  plausible("Mem_Bw", g.memory_bandwidth.bytes_per_second() / 1e9, 10, "GB/s", "TB/s");
  const char* flops_key = json.find("SingleFLOPs") != nullptr ? "SingleFLOPs" : "SingleFLOPsVEC";
  plausible(flops_key, g.fp32_peak.per_second() / 1e9, 100, "GFLOP/s", "TFLOP/s");
  // Tensor-core peaks at least the FP32 peak (FP8 at least the 16-bit one):
  // one below is a value in TFLOP/s (989 for an H100's 989000).
  auto above = [&](const char* key, FlopRate value, const char* than, FlopRate floor) {
    if (value.per_second() >= floor.per_second()) return;
    throw InputError(
        fmt::format("{}: field '{}' ({:g}) is below '{}' ({:g}): in TFLOP/s? the fields are in GFLOP/s",
                    source, key, value.per_second() / 1e9, than, floor.per_second() / 1e9));
  };
  if (json.find("SingleFLOPsMM") != nullptr)
    above("SingleFLOPsMM", g.fp32_matmul_peak, flops_key, g.fp32_peak);
  if (g.tensor_peak_given) above("TensorFLOPs", g.tensor_peak, flops_key, g.fp32_peak);
  if (json.find("TF32FLOPs") != nullptr) above("TF32FLOPs", g.tf32_peak, flops_key, g.fp32_peak);
  if (json.find("FP8FLOPs") != nullptr) {
    above("FP8FLOPs", g.fp8_peak, g.tensor_peak_given ? "TensorFLOPs" : flops_key, g.tensor_peak);
  }
  g.validate();
  return g;
}

GpuSpec load_device_config(const std::string& path) {
  return gpu_from_device_json(read_json_file(path), path);
}

DeviceCatalog::DeviceCatalog(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw InputError(fmt::format("{}: not a directory of device configs", dir));
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    const fs::path& p = e.path();
    if (p.extension() != ".json") continue;
    if (p.stem().string().ends_with("_TP")) continue;
    files.push_back(p);
  }
  std::sort(files.begin(), files.end());
  for (const auto& p : files) gpus_.push_back(load_device_config(p.string()));
}

const GpuSpec* DeviceCatalog::find(const std::string& device_name) const {
  for (const auto& g : gpus_) {
    if (g.name == device_name) return &g;
  }
  return nullptr;
}

}  // namespace tessera::node_model
