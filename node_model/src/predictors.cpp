#include "tessera/node_model/predictors.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <mutex>

#include "tessera/error.hpp"
#include "tessera/names.hpp"
#include "tessera/node_model/baselines.hpp"
#include "tessera/node_model/json.hpp"
#include "tessera/node_model/roofline.hpp"
#include "tessera/node_model/tensor_core.hpp"
#include "tessera/node_model/tile_mlp.hpp"

namespace tessera::node_model {
namespace {

std::string weights_stem(std::string_view name) {
  if (name == "tile-mlp") return "tile_mlp";
  return std::string(name);
}

void check_name(std::string_view name) {
  std::vector<std::string> list;
  for (const auto& n : predictor_names()) {
    if (n == name) return;
    list.emplace_back(n);
  }
  throw InputError(fmt::format("unknown predictor '{}'{} (expected roofline, linreg, mlp or tile-mlp)", name,
                               did_you_mean(std::string(name), list)));
}

/// Parsed models are shared by every predictor made from the same text
/// (an immutable cache, not simulation state: it never changes a result).
/// Keyed by `key` (the file) and the whole text, so a file rewritten
/// between runs is parsed again (helper 88: a hash of the text could match
/// another text's).
template <class Model>
std::shared_ptr<const Model> parse_shared(const std::string& key, std::string_view text, const std::string& source) {
  static std::mutex mu;
  static std::map<std::pair<std::string, std::string>, std::shared_ptr<const Model>, std::less<>> cache;
  std::lock_guard<std::mutex> lock(mu);
  std::pair<std::string, std::string> full{key, std::string(text)};
  auto it = cache.find(full);
  if (it != cache.end()) return it->second;
  auto model = std::make_shared<const Model>(Model::parse(text, source));
  cache.emplace(std::move(full), model);
  return model;
}

/// The tensor-core model: `weights_dir`/tensor_core.txt when it exists, else
/// the embedded weights, else none (16-bit GEMMs then go through the FP32 twin).
std::shared_ptr<const TensorCoreModel> tensor_core_model(const std::string& weights_dir) {
  if (!weights_dir.empty()) {
    const std::string path = (std::filesystem::path(weights_dir) / "tensor_core.txt").string();
    if (std::filesystem::exists(path)) {
      const std::string text = read_text_file(path);
      return parse_shared<TensorCoreModel>(path, text, path);
    }
  }
  const std::string_view text = embedded_weights("tensor_core");
  if (text.empty()) return nullptr;
  return parse_shared<TensorCoreModel>("embedded:tensor_core", text, "<embedded tensor_core.txt>");
}

/// `weights_dir` holds tensor-core weights but not `stem`'s: a folder that
/// `train-predictor --only tensor-core` wrote, whose FP32 twin is the
/// embedded tile-mlp.
bool only_tensor_core(const std::string& weights_dir, const std::string& stem) {
  const std::filesystem::path dir(weights_dir);
  return stem == "tile_mlp" && !std::filesystem::exists(dir / "tile_mlp.txt") &&
         std::filesystem::exists(dir / "tensor_core.txt") && !embedded_weights("tile_mlp").empty();
}

std::unique_ptr<KernelPredictor> build(std::string_view name, const GpuSpec& gpu, std::string_view text,
                                       const std::string& source, const std::string& key,
                                       const std::string& weights_dir = {}) {
  if (name == "tile-mlp") {
    // A retrained folder's classes without training rows: the embedded
    // network's (helper 112: they fell to the memory bound, bmm 84% fast).
    const std::string_view embedded = embedded_weights("tile_mlp");
    std::shared_ptr<const TileMlpModel> untrained_from;
    if (key != "embedded:tile_mlp" && !embedded.empty())
      untrained_from = parse_shared<TileMlpModel>("embedded:tile_mlp", embedded, "<embedded tile_mlp.txt>");
    return std::make_unique<TileMlpPredictor>(gpu, parse_shared<TileMlpModel>(key, text, source),
                                              tensor_core_model(weights_dir), std::move(untrained_from));
  }
  if (name == "linreg") {
    return std::make_unique<LinRegPredictor>(gpu, parse_shared<LinRegModel>(key, text, source));
  }
  return std::make_unique<DirectMlpPredictor>(gpu, parse_shared<DirectMlpModel>(key, text, source));
}

}  // namespace

std::shared_ptr<const TileMlpModel> tile_mlp_model(const std::string& weights_dir) {
  if (weights_dir.empty() || only_tensor_core(weights_dir, "tile_mlp")) {
    const std::string_view text = embedded_weights("tile_mlp");
    if (text.empty()) throw Error("this build has no weights for predictor 'tile-mlp'");
    return parse_shared<TileMlpModel>("embedded:tile_mlp", text, "<embedded tile_mlp.txt>");
  }
  const std::string path = (std::filesystem::path(weights_dir) / "tile_mlp.txt").string();
  const std::string text = read_text_file(path);
  return parse_shared<TileMlpModel>(path, text, path);
}

std::vector<std::string> predictor_names() { return {"roofline", "linreg", "mlp", "tile-mlp"}; }

std::unique_ptr<KernelPredictor> make_predictor(std::string_view name, const GpuSpec& gpu) {
  check_name(name);
  if (name == "roofline") return std::make_unique<RooflinePredictor>(gpu);
  const std::string stem = weights_stem(name);
  const std::string_view text = embedded_weights(stem);
  if (text.empty()) {
    throw Error(fmt::format("this build has no weights for predictor '{}' (train them with 'tessera "
                            "train-predictor' and rebuild)",
                            name));
  }
  return build(name, gpu, text, fmt::format("<embedded {}.txt>", stem), "embedded:" + stem);
}

std::unique_ptr<KernelPredictor> make_predictor(std::string_view name, const GpuSpec& gpu,
                                                const std::string& weights_dir) {
  check_name(name);
  if (name == "roofline") return std::make_unique<RooflinePredictor>(gpu);
  const std::string stem = weights_stem(name);
  if (only_tensor_core(weights_dir, stem)) {
    return build(name, gpu, embedded_weights(stem), "<embedded tile_mlp.txt>", "embedded:tile_mlp",
                 weights_dir);
  }
  const std::string path = (std::filesystem::path(weights_dir) / (stem + ".txt")).string();
  const std::string text = read_text_file(path);
  // Keyed by path and content so a retrained file is re-read.
  return build(name, gpu, text, path, path, weights_dir);
}

std::vector<std::string> weights_files(std::string_view name, const std::string& weights_dir) {
  check_name(name);
  std::vector<std::string> out;
  if (weights_dir.empty() || name == "roofline") return out;
  const std::string stem = weights_stem(name);
  const std::filesystem::path dir(weights_dir);
  if (!only_tensor_core(weights_dir, stem)) out.push_back((dir / (stem + ".txt")).string());
  if (name == "tile-mlp" && std::filesystem::exists(dir / "tensor_core.txt")) {
    out.push_back((dir / "tensor_core.txt").string());
  }
  return out;
}

}  // namespace tessera::node_model
