// Node-model sub-commands: kernel/model/graph prediction, validation against
// measurements, and training of the learned predictors (docs/node_model.md).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <ostream>
#include <sstream>

#include "tessera/cli/args.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/cli/interrupt.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/error.hpp"
#include "tessera/files.hpp"
#include "tessera/node_model/baselines.hpp"
#include "tessera/node_model/cross_validation.hpp"
#include "tessera/node_model/csv.hpp"
#include "tessera/node_model/dataset.hpp"
#include "tessera/node_model/device_config.hpp"
#include "tessera/node_model/json.hpp"
#include "tessera/node_model/model_graph.hpp"
#include "tessera/node_model/predictors.hpp"
#include "tessera/node_model/tensor_core.hpp"
#include "tessera/node_model/tile_mlp.hpp"
#include "tessera/node_model/validation.hpp"

namespace tessera::cli {
namespace nm = tessera::node_model;
namespace fs = std::filesystem;

namespace {

/// "16,16" -> {16, 16}; "" or "0" -> {} (no hidden layer: a linear map).
std::vector<int> parse_hidden(const std::string& text) {
  std::vector<int> out;
  if (text.empty() || text == "0" || text == "none") return out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string part =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    out.push_back(parse_positive_int(part, "--hidden"));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

/// Tensor-core training options from --epochs/--hidden/--select/--drop-features/--seed.
nm::TensorCoreTrainOptions tensor_core_options(const ArgParser& p, bool use_epochs = true) {
  nm::TensorCoreTrainOptions opt;
  if (auto e = p.get("epochs"); e && use_epochs) opt.mlp.epochs = parse_positive_int(*e, "--epochs");
  if (auto h = p.get("hidden")) opt.hidden = parse_hidden(*h);
  if (auto sd = p.get("seed")) opt.mlp.seed = static_cast<std::uint64_t>(parse_positive_int(*sd, "--seed"));
  if (auto s = p.get("select")) {
    if (*s == "min-time") {
      opt.select = nm::TcSelect::MinTime;
    } else if (*s == "min-roofline") {
      opt.select = nm::TcSelect::MinRoofline;
    } else {
      throw UsageError(fmt::format("--select: expected min-time or min-roofline, got '{}'", *s));
    }
  }
  if (auto d = p.get("drop-features")) {
    std::size_t start = 0;
    while (start < d->size()) {
      const std::size_t comma = d->find(',', start);
      const std::string name =
          d->substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      int found = -1;
      for (int i = 0; i < nm::kTcFeatures; ++i) {
        if (nm::tensor_core_feature_name(i) == name) found = i;
      }
      if (found < 0) throw UsageError(fmt::format("--drop-features: unknown feature '{}'", name));
      opt.drop_features.push_back(found);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  return opt;
}

/// The XLA GEMM table at `path` (a file, or a directory holding gemm_h100.csv).
std::string xla_table_path(const std::string& path) {
  if (fs::is_directory(path)) return (fs::path(path) / "gemm_h100.csv").string();
  return path;
}

/// Predictor from --predictor/--weights.
std::unique_ptr<nm::KernelPredictor> predictor_from(const ArgParser& p, const nm::GpuSpec& gpu) {
  const std::string name = p.get("predictor").value_or(std::string(nm::kDefaultPredictor));
  if (auto w = p.get("weights")) return nm::make_predictor(name, gpu, *w);
  return nm::make_predictor(name, gpu);
}

/// The rows of one split ("train" or "test") of a kernel-measurement folder
/// given as --data: the folder above the datasets (DIR/neusight, as
/// dataset_folder), NeuSight's dataset root (DIR/kernels/SPLIT), its
/// kernels/ folder (DIR/SPLIT beside the other split), or else DIR itself.
/// Reading a folder that holds both splits would mix the held-out rows in.
fs::path kernel_split(const std::string& data, const std::string& split) {
  fs::path dir(dataset_folder(data, "neusight"));
  if (fs::is_directory(dir / "kernels" / split)) return dir / "kernels" / split;
  const std::string other = split == "train" ? "test" : "train";
  if (fs::is_directory(dir / split) && fs::is_directory(dir / other)) return dir / split;
  return dir;
}

/// `validate kernels --leave-one-gpu-out`: retrains the tile-mlp once per
/// GPU without it and measures it on that GPU (node_model/cross_validation.hpp).
int validate_leave_one_gpu_out(const ArgParser& p, const std::string& data, std::ostream& out) {
  if (p.has("predictor") || p.has("weights")) {
    throw UsageError("--leave-one-gpu-out retrains the tile-mlp: --predictor and --weights do not apply");
  }
  // Both splits, found as every kernel command finds them (kernel_split).
  const fs::path train_dir = kernel_split(data, "train");
  const fs::path test_dir = kernel_split(data, "test");
  if (train_dir == test_dir) {
    throw InputError(fmt::format("{}: expected the kernel measurements' train/ and test/ directories", data));
  }
  const fs::path dir = train_dir.parent_path();
  nm::LogoOptions opt;
  if (auto e = p.get("epochs")) opt.train.mlp.epochs = parse_positive_int(*e, "--epochs");
  if (auto m = p.get("max-rows")) opt.train.max_rows_per_class = parse_positive_int(*m, "--max-rows");
  opt.gpu = p.get("gpu").value_or("");
  const auto t0 = std::chrono::steady_clock::now();
  const nm::DeviceCatalog catalog(nm::find_device_configs(dir.string()));
  const nm::MeasurementSet train = nm::read_measurement_dir(train_dir.string(), catalog);
  const nm::MeasurementSet test = nm::read_measurement_dir(test_dir.string(), catalog);
  // The report once the folds ran: a fold that fails (a --gpu not in the
  // data) leaves stdout empty (helper 102: the header came first).
  const auto rows = nm::leave_one_gpu_out(train, test, opt, &std::cerr);
  out << fmt::format(
      "leave-one-GPU-out: for each GPU, tile-mlp and linreg are retrained on the training rows\n"
      "(train/) of the other GPUs only, tile table and launch floors included; MAPE on every row\n"
      "of the held-out GPU: its test rows (test/) and its training rows (train/), neither trained\n"
      "on in its fold. (test) and (train) split the tile-mlp error by source.\n"
      "tile-mlp: {} epochs, at most {} training rows per class\n\n",
      opt.train.mlp.epochs, opt.train.max_rows_per_class);
  out << nm::format_logo(rows);
  // On stderr, so that stdout stays the same byte for byte.
  std::cerr << fmt::format("leave-one-GPU-out took {:.0f}s\n",
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

/// The FP32 tile-mlp weights of --weights DIR, else the embedded ones.
std::shared_ptr<const nm::TileMlpModel> fp32_model(const ArgParser& p) {
  return nm::tile_mlp_model(p.get("weights").value_or(""));
}

/// The tensor-core weights of --weights DIR (tensor_core.txt), else the embedded ones.
nm::TensorCoreModel tensor_core_weights(const ArgParser& p) {
  if (auto w = p.get("weights")) {
    const std::string path = (fs::path(*w) / "tensor_core.txt").string();
    if (fs::exists(path)) return nm::TensorCoreModel::parse(nm::read_text_file(path), path);
  }
  const std::string_view text = nm::embedded_weights("tensor_core");
  if (text.empty())
    throw Error(
        "this build has no tensor-core weights (train them with 'tessera train-predictor --xla DIR')");
  return nm::TensorCoreModel::parse(text, "<embedded tensor_core.txt>");
}

/// Per-dtype MAPE of tensor-core GEMMs measured on one GPU (an XLA table, or
/// kernels measured on one GPU with --device): the predictor's GPU kernel time
/// (predict_device: the data are kernel times), or with --kfold the held-out
/// time of the tensor-core model retrained per fold.
int validate_gemm_set(const ArgParser& p, const nm::MeasurementSet& set, const std::string& data,
                      std::ostream& out) {
  const std::string name = p.get("predictor").value_or(std::string(nm::kDefaultPredictor));
  std::vector<double> predicted(set.rows.size());
  std::string label = name;
  // The --noise table read before anything is printed: a bad one is an
  // error with no report above it.
  std::optional<nm::MeasurementSet> noise_ref;
  std::vector<nm::DtypeErrorRow> noise_rows;
  if (auto other = p.get("noise")) {
    noise_ref = nm::read_xla_gemm_table(*other);
    noise_rows = nm::measurement_noise(set, *noise_ref);
    // A repeat that shares no shape with the data gives no floor: said
    // before any report (helper 102: a header line and nothing under it).
    if (noise_rows.empty()) {
      throw InputError(fmt::format(
          "{}: --noise: no GEMM of {} (b, m, n, k and dtype) is in it: not a repeat of it", *other, data));
    }
  }
  if (auto k = p.get("kfold")) {
    if (name != "tile-mlp")
      throw UsageError("--kfold retrains the tensor-core model of the tile-mlp predictor");
    // One message for 0 and 1 (helpers 87, 102).
    const int folds = parse_int_in(*k, "--kfold", 2);
    const auto t0 = std::chrono::steady_clock::now();
    std::ostringstream log;
    predicted = nm::tensor_core_kfold(set, folds, tensor_core_options(p), &log);
    out << log.str();
    out << fmt::format("{}-fold cross-validation by shape ({:.0f}s): held-out MAPE\n", folds,
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    label = "held-out";
  } else {
    for (const char* opt : {"epochs", "hidden", "select", "drop-features", "seed"}) {
      if (p.has(opt)) throw UsageError(fmt::format("tessera validate: --{} needs --kfold", opt));
    }
    std::vector<std::unique_ptr<nm::KernelPredictor>> predictors;
    for (const auto& g : set.gpus) predictors.push_back(predictor_from(p, g));
    for (std::size_t i = 0; i < set.rows.size(); ++i) {
      const auto& m = set.rows[i];
      predicted[i] = predictors[static_cast<std::size_t>(m.gpu)]->predict_device(m.kernel).ms();
    }
  }
  const double floor_ms = tensor_core_weights(p).floor_ms;
  out << nm::format_dtype_errors(nm::validate_tensor_core(set, predicted, fp32_model(p), floor_ms), label);
  out << fmt::format(
      "({} on {}; fp32-twin: the tile-mlp's FP32 twin scaled by the roofline ratio, without the eager "
      "launch floor, at least the GPU floor {:.4f} ms; fp8<=peak: FP8 rows at or below the dense FP8 "
      "peak)\n",
      data, set.gpus.front().name, floor_ms);
  if (noise_ref) {
    out << fmt::format("noise floor: {} taken as predictions of {} on shared shapes\n", *p.get("noise"),
                       data);
    for (const auto& r : noise_rows) {
      out << fmt::format("{:<10} {:>6} {:>17.1f}%\n", r.dtype, r.rows, r.mape);
    }
  }
  return 0;
}

/// `validate kernels --data TABLE.csv` on an XLA GEMM table.
int validate_xla_gemms(const ArgParser& p, const std::string& data, std::ostream& out) {
  return validate_gemm_set(p, nm::read_xla_gemm_table(data), data, out);
}

/// --device GPU of the commands on measured kernels: a preset (H200, ...) or
/// a device config JSON, which `files` (when given: the commands that write
/// outputs check them against their inputs) then lists as an input.
/// Whether --device `device` names a device config JSON (else a preset).
bool is_device_json(const std::string& device) { return fs::exists(device); }

nm::GpuSpec device_option(const std::string& device, FileSet* files = nullptr) {
  if (is_device_json(device)) {
    if (files != nullptr) files->input(device, "--device");
    return nm::load_device_config(device);
  }
  // A path (a / or a .json name) that is not there is a missing file, not
  // an unknown preset (helper 179).
  if (device.find('/') != std::string::npos ||
      (device.size() > 5 && device.compare(device.size() - 5, 5, ".json") == 0)) {
    throw InputError(fmt::format("--device {}: cannot open device JSON file: no such file", device));
  }
  try {
    return nm::gpu_preset(device);
  } catch (const InputError& e) {
    throw UsageError(fmt::format("--device: {} (or a device JSON file)", e.what()));
  }
}

/// The GPUs the tile-mlp weights in `weights_dir` (embedded: "") learned
/// on, as NeuSight names them (`Tesla T4`), and whether `gpu_name` is one.
std::vector<std::string> weights_gpus(const std::string& weights_dir) {
  auto names = nm::tile_mlp_model(weights_dir)->tiles.gpu_names();  // spaces as underscores
  for (auto& n : names) std::replace(n.begin(), n.end(), '_', ' ');
  return names;
}
bool trained_on(const std::vector<std::string>& gpus, const std::string& gpu_name) {
  return std::find(gpus.begin(), gpus.end(), gpu_name) != gpus.end();
}
/// The GPU the FP32 weights were checked on unseen (README, "Accuracy").
constexpr std::string_view kUnseenCheckGpu = "NVIDIA A100 80GB PCIe";

/// --dtype: the element type of rows without a dtype column (default fp32).
nm::DType dtype_option(const ArgParser& p) {
  try {
    return nm::parse_dtype(p.get("dtype").value_or("fp32"));
  } catch (const InputError& e) {
    throw UsageError(fmt::format("--dtype: {}", e.what()));
  }
}

/// `validate kernels --data FILE.csv --device GPU`: kernels measured on one GPU
/// (NeuSight's schema with a dtype column, e.g. tests/data/h200/gemm.csv).
int validate_measured(const ArgParser& p, const std::string& data, const nm::PredictorFactory& make,
                      std::ostream& out) {
  for (const char* opt : {"max-rows", "gpu"}) {
    if (p.has(opt)) throw UsageError(fmt::format("tessera validate: --{} does not apply with --device", opt));
  }
  if (!p.has("kfold")) {
    for (const char* opt : {"epochs", "hidden", "select", "drop-features", "seed"}) {
      if (p.has(opt)) throw UsageError(fmt::format("tessera validate: --{} needs --kfold", opt));
    }
  }
  if (p.has("leave-one-gpu-out"))
    throw UsageError("tessera validate: --leave-one-gpu-out does not apply with --device");
  if (!fs::is_regular_file(data)) {
    throw UsageError(
        fmt::format("--data {}: with --device, a CSV file of kernels measured on that GPU", data));
  }
  const std::string device = *p.get("device");
  FileSet files;
  files.input(data, "--data");
  const nm::GpuSpec gpu = device_option(device, &files);
  const nm::DType dtype = dtype_option(p);
  if (p.has("kfold")) {
    // The tensor-core model retrained per fold (folds by shape) on these GEMMs.
    if (p.has("noise"))
      throw UsageError("tessera validate: --noise does not apply with --kfold and --device");
    return validate_gemm_set(p, nm::read_measured_gemms({data}, gpu), data, out);
  }
  const std::string noise = p.get("noise").value_or("");
  if (!noise.empty()) files.input(noise, "--noise");
  const std::string name = p.get("predictor").value_or(std::string(nm::kDefaultPredictor));
  // (The footer names a --weights folder: its figures are not the shipped model's.)
  const std::string weights = p.get("weights").value_or("");
  const auto rows = nm::validate_measured_kernels(data, gpu, make, dtype, noise);
  if (p.has("json")) {
    // The table as one object: per group (a kernel and dtype, then "all")
    // its rows and errors as fractions; noise_mape null without --noise.
    std::string groups;
    for (const auto& r : rows) {
      groups += fmt::format(
          "{}{{\"group\": {}, \"rows\": {}, \"mape\": {:.6f}, \"signed_median\": {:.6f}, \"p90\": {:.6f}, "
          "\"roofline_mape\": {:.6f}, \"noise_mape\": {}}}",
          groups.empty() ? "" : ", ", json_string(r.group), r.rows, r.mape / 100, r.signed_median / 100,
          r.p90 / 100, r.roofline_mape / 100,
          r.noise_mape < 0 ? std::string("null") : fmt::format("{:.6f}", r.noise_mape / 100));
    }
    out << fmt::format(
        "{{\"data\": {}, \"gpu\": {}, \"predictor\": {}, \"weights\": {}, \"noise\": {}, \"groups\": "
        "[{}]}}\n",
        json_string(data), json_string(gpu.name), json_string(name),
        weights.empty() ? std::string("null") : json_string(weights),
        noise.empty() ? std::string("null") : json_string(noise), groups);
    return 0;
  }
  out << nm::format_measured_errors(rows, name);
  out << fmt::format(
      "({} on {}{}: GPU time (predict_device) against the measured kernels; signed: (predicted - measured) / "
      "measured; noise: {})\n",
      data, gpu.name, weights.empty() ? std::string() : fmt::format(", the weights in {}", weights),
      noise.empty() ? std::string("give a repeat of the measurement with --noise FILE") : noise);
  return 0;
}

}  // namespace

namespace {
/// The node-model commands' Untested GPU note for a GPU given by preset or
/// device JSON. FP32: none for a GPU the tile-mlp weights learned on, the
/// A100-80GB they were checked on unseen, or those GPUs' presets; a never
/// measured generation or vendor says so (tessera run's note); any other GPU
/// names the GPUs the weights learned on. Other dtypes: tessera run's note
/// (node_model::extrapolation_note, the presets' 16-bit validation).
std::string untested_gpu_note(const nm::GpuSpec& gpu, nm::DType dtype, const std::string& weights_dir,
                              bool device_json) {
  const std::string_view source = device_json ? "a device JSON" : "an inline GPU";
  if (dtype != nm::DType::FP32) return nm::extrapolation_note(gpu, dtype, source);
  const auto trained = weights_gpus(weights_dir);
  if (trained_on(trained, gpu.name) || gpu.name == kUnseenCheckGpu) return {};
  if (nm::is_preset(gpu)) {
    // The presets of those GPUs: the same silicon (tessera run's rule).
    for (const char* preset : {"A100-40GB", "A100-80GB", "V100-SXM2"}) {
      if (gpu.name == preset) return {};
    }
    if (std::string note = nm::extrapolation_note(gpu, dtype); !note.empty()) return note;
  }
  return fmt::format(
      "{}: the FP32 node model learned on {} and was checked on an unseen A100-80GB; "
      "this GPU's kernel times extrapolate from its spec",
      gpu.name, fmt::join(trained, ", "));
}
}  // namespace

int cmd_predict_kernels(const Args& args, std::ostream& out) {
  ArgParser p("tessera predict-kernels");
  p.option("device").option("input").option("output").option("predictor").option("weights").option("dtype");
  p.flag("device-time");
  p.parse(args);
  p.expect_positional(0, "arguments");
  const std::string input = p.require("input");
  const std::string output = p.require("output");
  FileSet files;
  const nm::GpuSpec gpu = device_option(p.require("device"), &files);
  files.input(input, "--input");
  files.output(output, "--output");
  const nm::DType default_dtype = dtype_option(p);
  const auto predictor = predictor_from(p, gpu);
  const bool device_time = p.has("device-time");
  const nm::CsvTable t = nm::read_csv(input);
  if (t.rows.empty())
    throw InputError(fmt::format("{}: no kernels (a header line, then one kernel per row)", input));
  const int dtype_col = t.column("dtype");
  std::vector<double> predicted(t.rows.size());
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    const nm::Kernel k = nm::kernel_from_row(t, r, nm::row_dtype(t, r, dtype_col, default_dtype));
    try {
      predicted[r] = (device_time ? predictor->predict_device(k) : predictor->predict(k)).ms();
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}: {}", input, t.row_name(r), e.what()));
    }
  }
  // A file that has a Predicted_ms column (an earlier run's output) gets
  // its values replaced in place: a second column of the name was appended
  // (helper 102), which no reader of the file could tell apart.
  const int predicted_col = t.column("Predicted_ms");
  std::string text;
  for (std::size_t c = 0; c < t.header.size(); ++c) {
    if (c > 0) text += ',';
    text += nm::csv_escape(t.header[c]);
  }
  text += predicted_col < 0 ? ",Predicted_ms\n" : "\n";
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    const std::string value = fmt::format("{:.6g}", predicted[r]);
    for (std::size_t c = 0; c < t.rows[r].size(); ++c) {
      if (c > 0) text += ',';
      text += static_cast<int>(c) == predicted_col ? value : nm::csv_escape(t.rows[r][c]);
    }
    text += predicted_col < 0 ? fmt::format(",{}\n", value) : "\n";
  }
  write_file_atomic(output, text);
  out << fmt::format("predicted {} kernel{} on {} with {} -> {}{}\n", t.rows.size(),
                     t.rows.size() == 1 ? "" : "s", gpu.name, predictor->name(), output,
                     predicted_col < 0 ? "" : " (the input's Predicted_ms column replaced)");
  // The Untested GPU note of each element type the rows use, as predict-model
  // gives it (none for the GPUs the weights learned on).
  std::vector<nm::DType> used;
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    const nm::DType d = nm::row_dtype(t, r, dtype_col, default_dtype);
    if (std::find(used.begin(), used.end(), d) == used.end()) used.push_back(d);
  }
  const bool device_json = is_device_json(p.require("device"));
  std::vector<std::string> notes;
  for (const nm::DType d : used) {
    std::string note = untested_gpu_note(gpu, d, p.get("weights").value_or(""), device_json);
    if (!note.empty() && std::find(notes.begin(), notes.end(), note) == notes.end())
      notes.push_back(std::move(note));
  }
  for (const std::string& note : notes) out << fmt::format("  Untested GPU: {}\n", note);
  return 0;
}

int cmd_validate(const Args& args, std::ostream& out) {
  // Ctrl-C says what was kept: nothing (every validation prints its report,
  // and writes --rows, when it finishes).
  say_on_interrupt("nothing was written (validate prints its report, and writes --rows, when it finishes)");
  if (!args.empty() && args[0] == "distributed") return cmd_validate_distributed(Args(args.begin() + 1, args.end()), out);
  if (!args.empty() && args[0] == "training") return cmd_validate_training(Args(args.begin() + 1, args.end()), out);
  if (!args.empty() && args[0] == "steps") return cmd_validate_steps(Args(args.begin() + 1, args.end()), out);
  if (!args.empty() && args[0] == "collectives") return cmd_validate_collectives(Args(args.begin() + 1, args.end()), out);
  ArgParser p("tessera validate");
  p.option("data").option("predictor").option("weights").option("max-rows").option("gpu").option("epochs");
  p.option("kfold").option("hidden").option("select").option("drop-features").option("noise").option("seed");
  p.option("device").option("dtype");
  p.flag("leave-one-gpu-out").flag("json");
  p.parse(args);
  p.expect_positional(1, "what to validate (kernels, models, distributed, collectives, training or steps)");
  // (helper 179: `validate kernel` got no hint)
  static const std::vector<std::string> kChecks{"collectives", "distributed", "kernels",
                                                "models",      "steps",       "training"};
  if (std::find(kChecks.begin(), kChecks.end(), p.positional()[0]) == kChecks.end()) {
    throw UsageError(
        fmt::format("tessera validate: unknown check '{}'{} (kernels, models, distributed, "
                    "collectives, training or steps)",
                    p.positional()[0], did_you_mean(p.positional()[0], kChecks)));
  }
  if (p.has("json") && !(p.positional()[0] == "kernels" && p.has("device") && !p.has("kfold"))) {
    throw UsageError(
        "tessera validate: --json applies to kernels measured on one GPU (validate kernels --data FILE.csv "
        "--device GPU), validate distributed, training and steps");
  }
  const std::string what = p.positional()[0];
  const std::string data = dataset_folder(p.require("data"), "neusight");
  if (p.has("leave-one-gpu-out")) {
    if (what != "kernels") throw UsageError("--leave-one-gpu-out: only with 'validate kernels'");
    return validate_leave_one_gpu_out(p, data, out);
  }
  const std::string name = p.get("predictor").value_or(std::string(nm::kDefaultPredictor));
  const int max_rows = p.has("max-rows") ? parse_positive_int(*p.get("max-rows"), "--max-rows") : 0;
  const nm::PredictorFactory make = [&](const nm::GpuSpec& gpu) {
    if (auto w = p.get("weights")) return nm::make_predictor(name, gpu, *w);
    return nm::make_predictor(name, gpu);
  };
  if (what == "kernels" && p.has("device")) {
    // An XLA table is read as XLA's (its GPU is the H100 it was measured
    // on): with --device it was read as a kernel file and refused for a
    // missing NeuSight column (helper 112).
    if (fs::is_regular_file(data) && nm::is_xla_gemm_table(data)) {
      throw UsageError(fmt::format(
          "tessera validate: {} is an XLA GEMM table, read without --device (its rows are XLA's H100-SXM "
          "measurements): validate kernels --data {}",
          data, data));
    }
    return validate_measured(p, data, make, out);
  }
  for (const char* opt : {"device", "dtype"}) {
    if (p.has(opt)) {
      throw UsageError(
          fmt::format("tessera validate: --{} applies to kernels measured on one GPU (validate "
                      "kernels --data FILE.csv --device GPU)",
                      opt));
    }
  }
  if (what == "kernels") {
    // XLA's GEMM table, given as the file or as its directory.
    const std::string table =
        fs::is_directory(data) && !fs::is_directory(fs::path(data) / "kernels") ? xla_table_path(data) : data;
    if (fs::is_regular_file(table) && nm::is_xla_gemm_table(table)) return validate_xla_gemms(p, table, out);
  }
  for (const char* opt : {"kfold", "epochs", "hidden", "select", "drop-features", "noise", "seed"}) {
    if (p.has(opt)) {
      throw UsageError(
          fmt::format("tessera validate: --{} applies to an XLA GEMM table (validate kernels --data "
                      "gemm_h100.csv){}",
                      opt, std::string_view(opt) == "epochs" ? " or to --leave-one-gpu-out" : ""));
    }
  }
  if (what == "kernels") {
    // A file that is no XLA table is none of the forms this reads without
    // --device (helper 116: an empty, binary or tab-separated file was told
    // of a missing device_configs directory).
    if (fs::is_regular_file(data)) {
      throw InputError(fmt::format(
          "{}: {}; validate kernels reads XLA's GEMM table, a NeuSight kernel directory, or one GPU's "
          "kernels with --device GPU",
          data,
          fs::file_size(data) == 0 ? "an empty file"
                                   : "not an XLA GEMM table (its header has no 'arch' column)"));
    }
    const std::string dir = kernel_split(p.require("data"), "test").string();
    const nm::DeviceCatalog catalog(nm::find_device_configs(dir));
    const nm::MeasurementSet test = nm::read_measurement_dir(dir, catalog);
    // A directory of header-only files (or none) measured nothing: an error,
    // as a header-only file is elsewhere (helper 116: an empty table, exit 0).
    if (test.rows.empty())
      throw InputError(fmt::format("{}: no measurements (no kernel rows in its CSV files)", dir));
    const auto rows = nm::validate_kernels(test, make, max_rows, p.get("gpu").value_or(""));
    out << nm::format_kernel_errors(rows, name);
    // Where the learned model loses to the roofline baseline, said under the
    // table rather than left to the docs (helper 171: the P4's linear at
    // 220.8% read as a broken model).
    std::vector<std::string> worse;
    for (const auto& r : rows) {
      if (r.mape > r.roofline_mape)
        worse.push_back(
            fmt::format("{} {} ({:.1f}% against {:.1f}%)", r.gpu, r.kernel_class, r.mape, r.roofline_mape));
    }
    if (!worse.empty()) {
      constexpr std::size_t kListed = 6;
      const std::size_t more = worse.size() > kListed ? worse.size() - kListed : 0;
      worse.resize(std::min(worse.size(), kListed));
      out << fmt::format(
          "worse than the roofline: {}{} (docs/node_model.md, Limitations, says why where it is known)\n",
          fmt::join(worse, ", "), more > 0 ? fmt::format(" and {} more", more) : std::string());
    }
    if (name == nm::kDefaultPredictor) {
      // Which rows test a GPU the weights learned on (their shapes held out,
      // the GPU not) and which a GPU they never saw.
      const auto trained = weights_gpus(p.get("weights").value_or(""));
      std::vector<std::string> seen, unseen;
      for (const auto& r : rows) {
        auto& list = trained_on(trained, r.gpu) ? seen : unseen;
        if (!trained_on(list, r.gpu)) list.push_back(r.gpu);
      }
      auto list = [](const std::vector<std::string>& v) {
        return v.empty() ? std::string("none") : fmt::format("{}", fmt::join(v, ", "));
      };
      out << fmt::format("trained on (held-out shapes of a seen GPU): {}\n", list(seen));
      out << fmt::format("not trained on (an unseen GPU): {}\n", list(unseen));
    }
    return 0;
  }
  if (what == "models") {
    std::string dir = data;
    if (fs::is_directory(fs::path(data) / "labels")) dir = (fs::path(data) / "labels").string();
    const nm::DeviceCatalog catalog(nm::find_device_configs(dir));
    const std::string configs = (fs::path(nm::find_device_configs(dir)).parent_path() / "model_configs").string();
    std::vector<std::string> skipped;
    const auto rows = nm::validate_models(dir, configs, catalog, make, p.get("gpu").value_or(""), &skipped);
    out << nm::format_model_errors(rows, name);
    if (!skipped.empty()) {
      constexpr std::size_t kShown = 5;
      out << fmt::format("not validated: {} label file{}\n", skipped.size(), skipped.size() == 1 ? "" : "s");
      for (std::size_t i = 0; i < std::min(skipped.size(), kShown); ++i) out << "  " << skipped[i] << "\n";
      if (skipped.size() > kShown) out << fmt::format("  ... and {} more\n", skipped.size() - kShown);
    }
    return 0;
  }
  throw UsageError(
      fmt::format("tessera validate: expected 'kernels', 'models', 'distributed', 'collectives', 'training' "
                  "or 'steps', got '{}'",
                  what));
}

int cmd_train_predictor(const Args& args, std::ostream& out) {
  ArgParser p("tessera train-predictor");
  p.option("data").option("out").option("devices").option("epochs").option("max-rows").option("only");
  p.option("xla").option("hidden").option("select").option("drop-features").option("seed");
  p.option("gemms").option("device");
  p.parse(args);
  p.expect_positional(0, "arguments");
  const std::string out_dir = p.require("out");
  if (p.has("gemms") && p.has("xla")) throw UsageError("tessera train-predictor: --gemms or --xla, not both");
  if (p.has("gemms") != p.has("device")) {
    throw UsageError(
        "tessera train-predictor: --gemms FILE.csv[,FILE.csv] needs --device GPU (and --device needs "
        "--gemms)");
  }
  // The tensor-core model's training GEMMs: kernels measured on one GPU
  // (--gemms, --device) or XLA's table (--xla).
  auto tensor_core_data = [&]() {
    if (p.has("gemms")) {
      const std::string list = *p.get("gemms");
      std::vector<std::string> csvs;
      for (const std::string& f : split(list, ',')) {
        if (!f.empty()) csvs.push_back(f);
      }
      FileSet files;
      for (const std::string& f : csvs) files.input(f, "--gemms");
      const nm::GpuSpec gpu = device_option(*p.get("device"), &files);
      return std::pair{nm::read_measured_gemms(csvs, gpu), list};
    }
    const std::string table = xla_table_path(*p.get("xla"));
    return std::pair{nm::read_xla_gemm_table(table), table};
  };
  const bool has_tc_data = p.has("xla") || p.has("gemms");
  // Options are checked before any data is read.
  nm::TileMlpTrainOptions opt;
  if (auto e = p.get("epochs")) opt.mlp.epochs = parse_positive_int(*e, "--epochs");
  if (auto m = p.get("max-rows")) opt.max_rows_per_class = parse_positive_int(*m, "--max-rows");
  if (has_tc_data) (void)tensor_core_options(p);
  {
    // A directory (made if missing) of weight files, never a file.
    std::error_code ec;
    if (fs::exists(out_dir, ec) && !fs::is_directory(out_dir, ec)) {
      throw UsageError(fmt::format("--out {}: not a directory (train-predictor writes weight files into it)", out_dir));
    }
    if (!fs::exists(out_dir, ec)) {
      const fs::path parent = fs::path(out_dir).has_parent_path() ? fs::path(out_dir).parent_path() : fs::path(".");
      if (!fs::is_directory(parent, ec)) {
        throw UsageError(fmt::format("--out {}: cannot create it: directory '{}' does not exist", out_dir,
                                     parent.string()));
      }
    }
  }
  // The folder is made as the first weights are written, not before the
  // training, which can fail (helper 87: an empty folder was left).
  auto write_weights = [&](const char* file, const std::string& text) {
    fs::create_directories(out_dir);
    write_file_atomic((fs::path(out_dir) / file).string(), text);
  };
  const std::string only = p.get("only").value_or("all");
  if (only != "all" && only != "tile-mlp" && only != "linreg" && only != "mlp" && only != "tensor-core") {
    throw UsageError(fmt::format("--only: expected tile-mlp, tensor-core, linreg or mlp, got '{}'", only));
  }
  if (only == "tensor-core" || (only == "all" && has_tc_data && !p.has("data"))) {
    if (!has_tc_data) {
      throw UsageError(
          "tessera train-predictor: --only tensor-core needs --gemms FILE.csv --device GPU or --xla DIR");
    }
    const auto t0 = std::chrono::steady_clock::now();
    const auto [set, source] = tensor_core_data();
    out << fmt::format("read {} GEMM measurements from {}\n", set.rows.size(), source);
    const nm::TensorCoreModel m = nm::train_tensor_core(set, tensor_core_options(p), &out);
    write_weights("tensor_core.txt", m.serialize());
    out << fmt::format("wrote {}/tensor_core.txt ({:.0f}s)\n", out_dir,
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return 0;
  }
  const std::string data = kernel_split(p.require("data"), "train").string();
  // (not value_or: the search must not run, and fail, when --devices is given)
  const auto given_devices = p.get("devices");
  const std::string devices = given_devices ? *given_devices : nm::find_device_configs(data);
  const auto t0 = std::chrono::steady_clock::now();
  const nm::DeviceCatalog catalog(devices);
  const nm::MeasurementSet set = nm::read_measurement_dir(data, catalog);
  if (set.rows.empty()) throw InputError(fmt::format("{}: no measurements of known devices", data));
  out << fmt::format("read {} measurements on {} GPUs from {}\n", set.rows.size(), set.gpus.size(), data);
  auto elapsed = [&]() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  if (only == "all" || only == "tile-mlp") {
    const nm::TileMlpModel m = nm::train_tile_mlp(set, opt, &out);
    write_weights("tile_mlp.txt", m.serialize());
    out << fmt::format("wrote {}/tile_mlp.txt ({:.0f}s)\n", out_dir, elapsed());
  }
  if (only == "all" || only == "linreg") {
    const nm::LinRegModel m = nm::train_linreg(set, &out);
    write_weights("linreg.txt", m.serialize());
    out << fmt::format("wrote {}/linreg.txt ({:.0f}s)\n", out_dir, elapsed());
  }
  if (only == "all" || only == "mlp") {
    const nm::DirectMlpModel m = nm::train_direct_mlp(set, opt, &out);
    write_weights("mlp.txt", m.serialize());
    out << fmt::format("wrote {}/mlp.txt ({:.0f}s)\n", out_dir, elapsed());
  }
  if (only == "all" && has_tc_data) {
    const nm::MeasurementSet gemms = tensor_core_data().first;
    // (--epochs is the NeuSight predictors' here; the tensor-core model keeps its default)
    const nm::TensorCoreModel m = nm::train_tensor_core(gemms, tensor_core_options(p, false), &out);
    write_weights("tensor_core.txt", m.serialize());
    out << fmt::format("wrote {}/tensor_core.txt ({:.0f}s)\n", out_dir, elapsed());
  } else if (only == "all") {
    out << "tensor-core model not trained (give --gemms FILE.csv --device GPU, or --xla DIR with "
           "gemm_h100.csv)\n";
  }
  return 0;
}

}  // namespace tessera::cli

namespace tessera::cli {

int cmd_predict_model(const Args& args, std::ostream& out) {
  ArgParser p("tessera predict-model");
  p.option("model")
      .option("device")
      .option("batch")
      .option("seq")
      .option("mode")
      .option("predictor")
      .option("weights")
      .option("dtype");
  p.flag("json");
  p.parse(args);
  p.expect_positional(0, "arguments");
  const std::string model_path = p.require("model");
  const nm::ModelShape shape = nm::model_shape_from_config(nm::read_json_file(model_path), model_path);
  const nm::GpuSpec gpu = device_option(p.require("device"));
  const int batch = parse_positive_int(p.require("batch"), "--batch");
  const int seq = parse_positive_int(p.require("seq"), "--seq");
  const std::string mode = p.require("mode");
  if (mode != "inf" && mode != "train") throw UsageError(fmt::format("--mode: expected inf or train, got '{}'", mode));
  const nm::DType dtype = dtype_option(p);
  if (dtype == nm::DType::FP8)
    throw UsageError("--dtype fp8: PyTorch eager runs no FP8 model (fp32, tf32, fp16, bf16)");
  // (build_model_graph's own error names neither the option nor the file)
  if (shape.max_seq > 0 && seq > shape.max_seq) {
    throw UsageError(fmt::format("--seq {}: longer than the {} learned positions of {} (its {})", seq,
                                 shape.max_seq, model_path, shape.max_seq_key));
  }
  const auto predictor = predictor_from(p, gpu);
  nm::GraphTimes t;
  try {
    t = nm::predict_graph_times(nm::build_model_graph(shape, batch, seq, mode == "train", dtype), *predictor);
  } catch (const OverflowError& e) {
    // A batch too large to time (10^9 sequences): named by the options that
    // size it, not by the clock alone.
    throw UsageError(fmt::format("--batch {} --seq {}: {} of {} cannot be timed: {}", batch, seq,
                                 mode == "train" ? "a training step" : "a forward pass", model_path,
                                 e.what()));
  }
  // A config saved in 16 bits is still timed in --dtype's (fp32 unless given).
  if (!shape.torch_dtype.empty() && shape.torch_dtype != "float32" && !p.get("dtype")) {
    std::cerr << fmt::format(
        "tessera: note: {}: torch_dtype {} is not what this times: fp32 (--dtype bf16 or fp16 for 16 bits)\n",
        model_path, shape.torch_dtype);
  }
  const std::string what = mode == "train" ? "forward + backward (no optimizer step)" : "one forward pass";
  const bool device_json = is_device_json(p.require("device"));
  const std::string untested = untested_gpu_note(gpu, dtype, p.get("weights").value_or(""), device_json);
  if (p.has("json")) {
    out << fmt::format(
        "{{\"model\": {}, \"model_type\": {}, \"device\": {}, \"batch\": {}, \"seq\": {}, \"mode\": {}, "
        "\"dtype\": {}, \"predictor\": {}, {}\"e2e_ms\": {:.3f}, \"fw_ms\": {:.3f}, \"bw_ms\": {:.3f}}}\n",
        json_string(model_path), json_string(shape.family), json_string(gpu.name), batch, seq,
        json_string(mode), json_string(std::string(nm::to_string(dtype))),
        json_string(std::string(predictor->name())),
        untested.empty() ? std::string() : fmt::format("\"untested_gpu\": {}, ", json_string(untested)),
        t.e2e_ms(), t.fw_ms, t.bw_ms);
  } else {
    out << fmt::format("model {} ({}), {} on {}, batch {}, seq {}, predictor {}\n", model_path, shape.family, mode,
                       gpu.name, batch, seq, predictor->name());
    out << fmt::format("  {} PyTorch eager kernels (unfused, as NeuSight measured{}), {}\n",
                       nm::to_string(dtype),
                       dtype == nm::DType::FP32 ? "" : "; 16-bit: unvalidated end to end", what);
    if (!untested.empty()) out << fmt::format("  Untested GPU: {}\n", untested);
    out << fmt::format("  end-to-end {:.3f} ms\n  forward    {:.3f} ms\n  backward   {:.3f} ms\n", t.e2e_ms(),
                       t.fw_ms, t.bw_ms);
  }
  return 0;
}

int cmd_predict_graph(const Args& args, std::ostream& out) {
  ArgParser p("tessera predict-graph");
  p.option("graph").option("device").option("predictor").option("weights").option("layers").option("model");
  p.parse(args);
  p.expect_positional(0, "arguments");
  const std::string graph_path = p.require("graph");
  const nm::GpuSpec gpu = device_option(p.require("device"));
  const auto predictor = predictor_from(p, gpu);
  // The model's config sizes the embedding tables (not in the graph):
  // --model, else NeuSight's layout, labels/<GPU>/<model>-<mode>-<seq>-<batch>.csv
  // beside model_configs/<model>.json (as validate models finds it).
  std::optional<std::string> config_path = p.get("model");
  if (!config_path) {
    if (const auto run = nm::parse_neusight_run_name(fs::path(graph_path).filename().string(), ".csv")) {
      const fs::path found = fs::path(graph_path).parent_path().parent_path().parent_path() /
                             "model_configs" / (run->model + ".json");
      if (fs::exists(found)) config_path = found.string();
    }
  }
  std::optional<nm::ModelShape> model;
  if (config_path) model = nm::model_shape_from_config(nm::read_json_file(*config_path), *config_path);
  const nm::FxGraph graph = nm::read_fx_graph(graph_path, model ? &*model : nullptr);
  // Layer count: --layers, else the label JSON beside the graph, else 1.
  // The label's own end-to-end time is said after the totals.
  double layers = 1;
  std::optional<double> label_e2e_ms;
  const fs::path label = fs::path(graph_path).replace_extension(".json");
  if (fs::exists(label)) {
    const nm::JsonValue j = nm::read_json_file(label.string());
    const double label_layers = j.find("num_layer") != nullptr ? nm::label_layers(j, label.string()) : 0;
    if (label_layers > 0) layers = label_layers;
    if (auto l = p.get("layers")) layers = parse_positive_int(*l, "--layers");
    // (its total is the label's layers': not comparable under another --layers)
    if (const nm::JsonValue* e = j.find("e2e_latency");
        e != nullptr && e->is_number() && e->number() > 0 && (label_layers == 0 || layers == label_layers))
      label_e2e_ms = e->number();
  } else if (auto l = p.get("layers")) {
    layers = parse_positive_int(*l, "--layers");
  }
  // NeuSight keeps each GPU's graphs in a folder named after it: a graph
  // measured on one GPU predicted for another is said (not an error).
  const std::string folder = fs::path(graph_path).parent_path().filename().string();
  std::string folder_gpu = folder;  // Tesla_T4: Tesla T4
  std::replace(folder_gpu.begin(), folder_gpu.end(), '_', ' ');
  const bool measured_elsewhere =
      folder_gpu != gpu.name && (trained_on(weights_gpus(""), folder_gpu) || folder_gpu == kUnseenCheckGpu);
  // A kernel the predictor refuses (a zero dimension, a time past the
  // clock) names the graph's row; nothing is printed before every op is priced.
  // A further part of a launched kernel (FxOp::fused_parts) pays no launch floor.
  auto sum_ms = [&](const nm::FxOp& op, const std::vector<nm::Kernel>& ks, const std::vector<bool>& parts) {
    double ms = 0;
    try {
      for (std::size_t i = 0; i < ks.size(); ++i) ms += predictor->predict_eager(ks[i], parts[i]).ms();
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: row {} ({}): {}", graph_path, op.row, op.name, e.what()));
    }
    return ms;
  };
  auto err = [](double pred, double meas) { return meas > 0 ? 100.0 * (pred / meas - 1.0) : 0.0; };
  // A row's error column: "n/a" where nothing was measured (0 ms), not 0%.
  auto err_cell = [&](double pred, double meas) {
    return meas > 0 ? fmt::format("{:>7.1f}%", err(pred, meas)) : fmt::format("{:>8}", "n/a");
  };
  std::string text;
  auto table = std::back_inserter(text);
  fmt::format_to(table, "{:<44} {:<9} {:>12} {:>12} {:>8}", "op", "kernel", "measured_ms", "predicted_ms",
                 "error");
  if (graph.train) fmt::format_to(table, " {:>12} {:>12} {:>8}", "bw_measured", "bw_predicted", "bw_error");
  text += "\n";
  double fw_meas = 0, fw_pred = 0, bw_meas = 0, bw_pred = 0;
  // Rows without a kernel rule (views, and ops the builder does not know)
  // are left out of both totals; what they measured is said below.
  double skipped_fw = 0, skipped_bw = 0;
  int skipped = 0;
  const nm::FxOp* largest_skipped = nullptr;
  auto weighted_ms = [&](const nm::FxOp& o) {
    return (o.in_layer ? layers : 1.0) * (o.measured_fw_ms + o.measured_bw_ms);
  };
  for (const auto& op : graph.ops) {
    if (op.kernels.empty() && op.bw_kernels.empty()) {
      const double w = op.in_layer ? layers : 1.0;
      if (op.measured_fw_ms + op.measured_bw_ms <= 0) continue;
      ++skipped;
      skipped_fw += w * op.measured_fw_ms;
      skipped_bw += w * op.measured_bw_ms;
      // The largest by what it adds to the totals (its layers' worth).
      if (largest_skipped == nullptr || weighted_ms(op) > weighted_ms(*largest_skipped))
        largest_skipped = &op;
      continue;
    }
    const double fw = sum_ms(op, op.kernels, op.fused_parts);
    const double bw = sum_ms(op, op.bw_kernels, op.bw_fused_parts);
    const double w = op.in_layer ? layers : 1.0;
    fw_meas += w * op.measured_fw_ms;
    fw_pred += w * fw;
    bw_meas += w * op.measured_bw_ms;
    bw_pred += w * bw;
    const auto& first = op.kernels.empty() ? op.bw_kernels.front() : op.kernels.front();
    fmt::format_to(table, "{:<44} {:<9} {:>12.4f} {:>12.4f} {}", op.name.substr(0, 44),
                   nm::to_string(first.op), op.measured_fw_ms, fw, err_cell(fw, op.measured_fw_ms));
    if (graph.train) {
      fmt::format_to(table, " {:>12.4f} {:>12.4f} {}", op.measured_bw_ms, bw,
                     err_cell(bw, op.measured_bw_ms));
    }
    text += "\n";
  }
  out << text;
  out << fmt::format("forward total of the mapped ops (x{} layers): measured {:.3f} ms, predicted {:.3f} ms ({:+.1f}%)\n",
                     layers, fw_meas, fw_pred, err(fw_pred, fw_meas));
  if (graph.train) {
    out << fmt::format(
        "backward total of the mapped ops (x{} layers): measured {:.3f} ms, predicted {:.3f} ms ({:+.1f}%)\n", layers,
        bw_meas, bw_pred, err(bw_pred, bw_meas));
  }
  if (label_e2e_ms) {
    out << fmt::format("the label ({}): measured end-to-end {:.3f} ms (the mapped ops above sum to {:.3f})\n",
                       label.filename().string(), *label_e2e_ms, fw_meas + bw_meas);
  }
  if (measured_elsewhere) {
    out << fmt::format(
        "note: the graph's folder names {} (NeuSight's GPU it was measured on); predicted for {}\n", folder,
        gpu.name);
  }
  int tables_unknown = 0;
  const nm::FxOp* first_unknown = nullptr;
  for (const auto& op : graph.ops) {
    if (!op.table_unknown) continue;
    ++tables_unknown;
    if (first_unknown == nullptr) first_unknown = &op;
  }
  if (tables_unknown > 0) {
    out << fmt::format(
        "note: {} embedding row{} (row {} {}) {} a table of unknown size ({}): the backward priced is the "
        "scatter-add alone, without zeroing and accumulating the table's gradient\n",
        tables_unknown, tables_unknown == 1 ? "" : "s", first_unknown->row, first_unknown->name,
        tables_unknown == 1 ? "has" : "have",
        model ? fmt::format("not one {} names", *config_path)
              : std::string("no model config: --model HF_CONFIG.json"));
  }
  if (skipped > 0) {
    out << fmt::format(
        "not in the totals: {} row{} with no kernel rule (views, ops the graph builder does not know), "
        "measured {:.3f} ms forward{}; the largest: row {} {} ({}, {:.4f} ms in all)\n",
        skipped, skipped == 1 ? "" : "s", skipped_fw,
        graph.train ? fmt::format(" and {:.3f} ms backward", skipped_bw) : std::string(),
        largest_skipped->row, largest_skipped->name, largest_skipped->target, weighted_ms(*largest_skipped));
  }
  return 0;
}

}  // namespace tessera::cli
