#pragma once
// Choosing a kernel predictor by name. The learned predictors load the
// weights committed in node_model/weights/ (embedded in the binary at build
// time), or the weights of a directory written by `tessera train-predictor`.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/node_model/kernel.hpp"

namespace tessera::node_model {

/// "roofline", "linreg", "mlp", "tile-mlp" (the default).
std::vector<std::string> predictor_names();
inline constexpr std::string_view kDefaultPredictor = "tile-mlp";

/// A predictor with the shipped (embedded) weights. Throws InputError for an
/// unknown name, Error when the build has no weights for it.
std::unique_ptr<KernelPredictor> make_predictor(std::string_view name, const GpuSpec& gpu);
/// Same, with weights read from `weights_dir` (tile_mlp.txt, linreg.txt,
/// mlp.txt; tile-mlp also reads tensor_core.txt there when present, else the
/// embedded tensor-core weights). A folder with tensor_core.txt and no
/// tile_mlp.txt (`train-predictor --only tensor-core`) takes the embedded
/// FP32 tile-mlp weights beside its tensor-core ones.
std::unique_ptr<KernelPredictor> make_predictor(std::string_view name, const GpuSpec& gpu,
                                                const std::string& weights_dir);
/// The files of `weights_dir` that make_predictor(name, gpu, weights_dir)
/// reads, in that order: the predictor's own (none for roofline, nor for
/// tile-mlp in a tensor-core-only folder) and tile-mlp's tensor_core.txt
/// when the folder has it. Empty for an empty `weights_dir`. What a run's
/// identity covers (`tessera sweep`), no other file of the folder.
std::vector<std::string> weights_files(std::string_view name, const std::string& weights_dir);

struct TileMlpModel;
/// The FP32 tile-mlp model make_predictor("tile-mlp", gpu, weights_dir) uses
/// (the embedded one for an empty `weights_dir`).
std::shared_ptr<const TileMlpModel> tile_mlp_model(const std::string& weights_dir);

/// Text of an embedded weights file by stem ("tile_mlp", "tensor_core", "linreg", "mlp");
/// empty when the build has none. Defined in a generated source.
std::string_view embedded_weights(std::string_view name);

}  // namespace tessera::node_model
