// Node-model sub-commands: kernel/model/graph prediction, validation against
// measurements, and training of the learned predictors (docs/node_model.md).
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <fmt/format.h>
#include <memory>
#include <ostream>
#include <sstream>

#include "tessera/cli/args.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/error.hpp"
#include "tessera/node_model/baselines.hpp"
#include "tessera/node_model/cross_validation.hpp"
#include "tessera/node_model/csv.hpp"
#include "tessera/node_model/dataset.hpp"
#include "tessera/node_model/device_config.hpp"
#include "tessera/node_model/model_graph.hpp"
#include "tessera/node_model/predictors.hpp"
#include "tessera/node_model/tile_mlp.hpp"
#include "tessera/node_model/validation.hpp"

namespace tessera::cli {
namespace nm = tessera::node_model;
namespace fs = std::filesystem;

namespace {

int parse_positive_int(const std::string& text, const std::string& flag) {
  try {
    std::size_t used = 0;
    const long v = std::stol(text, &used);
    if (used == text.size() && v > 0 && v < (1L << 30)) return static_cast<int>(v);
  } catch (const std::logic_error&) {
  }
  throw UsageError(fmt::format("{}: expected a positive integer, got '{}'", flag, text));
}

/// Predictor from --predictor/--weights.
std::unique_ptr<nm::KernelPredictor> predictor_from(const ArgParser& p, const nm::GpuSpec& gpu) {
  const std::string name = p.get("predictor").value_or(std::string(nm::kDefaultPredictor));
  if (auto w = p.get("weights")) return nm::make_predictor(name, gpu, *w);
  return nm::make_predictor(name, gpu);
}

/// `validate kernels --leave-one-gpu-out`: retrains the tile-mlp once per
/// GPU without it and measures it on that GPU (node_model/cross_validation.hpp).
int validate_leave_one_gpu_out(const ArgParser& p, const std::string& data, std::ostream& out) {
  if (p.has("predictor") || p.has("weights")) {
    throw UsageError("--leave-one-gpu-out retrains the tile-mlp: --predictor and --weights do not apply");
  }
  // DIR holds train/ and test/ (NeuSight's kernels/), or is a level above it.
  fs::path dir(data);
  if (!fs::is_directory(dir / "train") && fs::is_directory(dir / "kernels" / "train")) dir = dir / "kernels";
  if (!fs::is_directory(dir / "train") || !fs::is_directory(dir / "test")) {
    throw InputError(fmt::format("{}: expected the kernel measurements' train/ and test/ directories", data));
  }
  nm::LogoOptions opt;
  if (auto e = p.get("epochs")) opt.train.mlp.epochs = parse_positive_int(*e, "--epochs");
  if (auto m = p.get("max-rows")) opt.train.max_rows_per_class = parse_positive_int(*m, "--max-rows");
  opt.gpu = p.get("gpu").value_or("");
  const auto t0 = std::chrono::steady_clock::now();
  const nm::DeviceCatalog catalog(nm::find_device_configs(dir.string()));
  const nm::MeasurementSet train = nm::read_measurement_dir((dir / "train").string(), catalog);
  const nm::MeasurementSet test = nm::read_measurement_dir((dir / "test").string(), catalog);
  out << fmt::format(
      "leave-one-GPU-out: for each GPU, tile-mlp and linreg are retrained on the training rows\n"
      "(train/) of the other GPUs only, tile table and launch floors included; MAPE on every row\n"
      "of the held-out GPU: its test rows (test/) and its training rows (train/), neither trained\n"
      "on in its fold. (test) and (train) split the tile-mlp error by source.\n"
      "tile-mlp: {} epochs, at most {} training rows per class\n\n",
      opt.train.mlp.epochs, opt.train.max_rows_per_class);
  const auto rows = nm::leave_one_gpu_out(train, test, opt, &std::cerr);
  out << nm::format_logo(rows);
  // On stderr, so that stdout stays the same byte for byte.
  std::cerr << fmt::format("leave-one-GPU-out took {:.0f}s\n",
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

}  // namespace

int cmd_predict_kernels(const Args& args, std::ostream& out) {
  ArgParser p("tessera predict-kernels");
  p.option("device").option("input").option("output").option("predictor").option("weights");
  p.parse(args);
  p.expect_positional(0, "arguments");
  const nm::GpuSpec gpu = nm::load_device_config(p.require("device"));
  const std::string input = p.require("input");
  const std::string output = p.require("output");
  const auto predictor = predictor_from(p, gpu);
  const nm::CsvTable t = nm::read_csv(input);
  std::vector<double> predicted(t.rows.size());
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    const nm::Kernel k = nm::kernel_from_row(t, r);
    predicted[r] = predictor->predict(k).ms();
  }
  std::string text;
  for (std::size_t c = 0; c < t.header.size(); ++c) text += (c ? "," : "") + nm::csv_escape(t.header[c]);
  text += ",Predicted_ms\n";
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    for (std::size_t c = 0; c < t.rows[r].size(); ++c) text += (c ? "," : "") + nm::csv_escape(t.rows[r][c]);
    text += fmt::format(",{:.6g}\n", predicted[r]);
  }
  nm::write_file_atomic(output, text);
  out << fmt::format("predicted {} kernels on {} with {} -> {}\n", t.rows.size(), gpu.name, predictor->name(),
                     output);
  return 0;
}

int cmd_validate(const Args& args, std::ostream& out) {
  if (!args.empty() && args[0] == "distributed") return cmd_validate_distributed(Args(args.begin() + 1, args.end()), out);
  if (!args.empty() && args[0] == "training") return cmd_validate_training(Args(args.begin() + 1, args.end()), out);
  if (!args.empty() && args[0] == "collectives") return cmd_validate_collectives(Args(args.begin() + 1, args.end()), out);
  ArgParser p("tessera validate");
  p.option("data").option("predictor").option("weights").option("max-rows").option("gpu").option("epochs");
  p.flag("leave-one-gpu-out");
  p.parse(args);
  p.expect_positional(1, "what to validate (kernels or models)");
  const std::string what = p.positional()[0];
  const std::string data = p.require("data");
  if (p.has("leave-one-gpu-out")) {
    if (what != "kernels") throw UsageError("--leave-one-gpu-out: only with 'validate kernels'");
    return validate_leave_one_gpu_out(p, data, out);
  }
  if (p.has("epochs")) throw UsageError("--epochs: only with --leave-one-gpu-out");
  const std::string name = p.get("predictor").value_or(std::string(nm::kDefaultPredictor));
  const int max_rows = p.has("max-rows") ? parse_positive_int(*p.get("max-rows"), "--max-rows") : 0;
  const nm::PredictorFactory make = [&](const nm::GpuSpec& gpu) {
    if (auto w = p.get("weights")) return nm::make_predictor(name, gpu, *w);
    return nm::make_predictor(name, gpu);
  };
  if (what == "kernels") {
    std::string dir = data;
    if (fs::is_directory(fs::path(data) / "kernels" / "test")) dir = (fs::path(data) / "kernels" / "test").string();
    const nm::DeviceCatalog catalog(nm::find_device_configs(dir));
    const nm::MeasurementSet test = nm::read_measurement_dir(dir, catalog);
    const auto rows = nm::validate_kernels(test, make, max_rows, p.get("gpu").value_or(""));
    out << nm::format_kernel_errors(rows, name);
    return 0;
  }
  if (what == "models") {
    std::string dir = data;
    if (fs::is_directory(fs::path(data) / "labels")) dir = (fs::path(data) / "labels").string();
    const nm::DeviceCatalog catalog(nm::find_device_configs(dir));
    const std::string configs = (fs::path(nm::find_device_configs(dir)).parent_path() / "model_configs").string();
    const auto rows = nm::validate_models(dir, configs, catalog, make, p.get("gpu").value_or(""));
    out << nm::format_model_errors(rows, name);
    return 0;
  }
  throw UsageError(fmt::format("tessera validate: expected 'kernels', 'models', 'distributed' or 'collectives', got '{}'", what));
}

int cmd_train_predictor(const Args& args, std::ostream& out) {
  ArgParser p("tessera train-predictor");
  p.option("data").option("out").option("devices").option("epochs").option("max-rows").option("only");
  p.parse(args);
  p.expect_positional(0, "arguments");
  const std::string data = p.require("data");
  const std::string out_dir = p.require("out");
  const std::string only = p.get("only").value_or("all");
  if (only != "all" && only != "tile-mlp" && only != "linreg" && only != "mlp") {
    throw UsageError(fmt::format("--only: expected tile-mlp, linreg or mlp, got '{}'", only));
  }
  // (not value_or: the search must not run, and fail, when --devices is given)
  const auto given_devices = p.get("devices");
  const std::string devices = given_devices ? *given_devices : nm::find_device_configs(data);
  nm::TileMlpTrainOptions opt;
  if (auto e = p.get("epochs")) opt.mlp.epochs = parse_positive_int(*e, "--epochs");
  if (auto m = p.get("max-rows")) opt.max_rows_per_class = parse_positive_int(*m, "--max-rows");
  const auto t0 = std::chrono::steady_clock::now();
  const nm::DeviceCatalog catalog(devices);
  const nm::MeasurementSet set = nm::read_measurement_dir(data, catalog);
  if (set.rows.empty()) throw InputError(fmt::format("{}: no measurements of known devices", data));
  out << fmt::format("read {} measurements on {} GPUs from {}\n", set.rows.size(), set.gpus.size(), data);
  fs::create_directories(out_dir);
  auto elapsed = [&]() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  if (only == "all" || only == "tile-mlp") {
    const nm::TileMlpModel m = nm::train_tile_mlp(set, opt, &out);
    nm::write_file_atomic((fs::path(out_dir) / "tile_mlp.txt").string(), m.serialize());
    out << fmt::format("wrote {}/tile_mlp.txt ({:.0f}s)\n", out_dir, elapsed());
  }
  if (only == "all" || only == "linreg") {
    const nm::LinRegModel m = nm::train_linreg(set, &out);
    nm::write_file_atomic((fs::path(out_dir) / "linreg.txt").string(), m.serialize());
    out << fmt::format("wrote {}/linreg.txt ({:.0f}s)\n", out_dir, elapsed());
  }
  if (only == "all" || only == "mlp") {
    const nm::DirectMlpModel m = nm::train_direct_mlp(set, opt, &out);
    nm::write_file_atomic((fs::path(out_dir) / "mlp.txt").string(), m.serialize());
    out << fmt::format("wrote {}/mlp.txt ({:.0f}s)\n", out_dir, elapsed());
  }
  return 0;
}

}  // namespace tessera::cli

namespace tessera::cli {

int cmd_predict_model(const Args& args, std::ostream& out) {
  ArgParser p("tessera predict-model");
  p.option("model").option("device").option("batch").option("seq").option("mode").option("predictor").option(
      "weights");
  p.flag("json");
  p.parse(args);
  p.expect_positional(0, "arguments");
  const std::string model_path = p.require("model");
  const nm::ModelShape shape = nm::model_shape_from_config(nm::read_json_file(model_path), model_path);
  const nm::GpuSpec gpu = nm::load_device_config(p.require("device"));
  const int batch = parse_positive_int(p.require("batch"), "--batch");
  const int seq = parse_positive_int(p.require("seq"), "--seq");
  const std::string mode = p.require("mode");
  if (mode != "inf" && mode != "train") throw UsageError(fmt::format("--mode: expected inf or train, got '{}'", mode));
  const auto predictor = predictor_from(p, gpu);
  const auto graph = nm::build_model_graph(shape, batch, seq, mode == "train");
  const nm::GraphTimes t = nm::predict_graph_times(graph, *predictor);
  if (p.has("json")) {
    out << fmt::format("{{\"e2e_ms\": {:.3f}, \"fw_ms\": {:.3f}, \"bw_ms\": {:.3f}}}\n", t.e2e_ms(), t.fw_ms, t.bw_ms);
  } else {
    out << fmt::format("model {} ({}), {} on {}, batch {}, seq {}, predictor {}\n", model_path, shape.family, mode,
                       gpu.name, batch, seq, predictor->name());
    out << fmt::format("  end-to-end {:.3f} ms\n  forward    {:.3f} ms\n  backward   {:.3f} ms\n", t.e2e_ms(),
                       t.fw_ms, t.bw_ms);
  }
  return 0;
}

int cmd_predict_graph(const Args& args, std::ostream& out) {
  ArgParser p("tessera predict-graph");
  p.option("graph").option("device").option("predictor").option("weights").option("layers");
  p.parse(args);
  p.expect_positional(0, "arguments");
  const std::string graph_path = p.require("graph");
  const nm::GpuSpec gpu = nm::load_device_config(p.require("device"));
  const auto predictor = predictor_from(p, gpu);
  const nm::FxGraph graph = nm::read_fx_graph(graph_path);
  // Layer count: --layers, else the label JSON beside the graph, else 1.
  double layers = 1;
  if (auto l = p.get("layers")) {
    layers = parse_positive_int(*l, "--layers");
  } else {
    const fs::path label = fs::path(graph_path).replace_extension(".json");
    if (fs::exists(label)) {
      const nm::JsonValue j = nm::read_json_file(label.string());
      if (const auto* n = j.find("num_layer"); n != nullptr && n->is_number()) layers = n->number();
    }
  }
  auto sum_ms = [&](const std::vector<nm::Kernel>& ks) {
    double ms = 0;
    for (const auto& k : ks) ms += predictor->predict(k).ms();
    return ms;
  };
  auto err = [](double pred, double meas) { return meas > 0 ? 100.0 * (pred / meas - 1.0) : 0.0; };
  out << fmt::format("{:<44} {:<9} {:>12} {:>12} {:>8}", "op", "kernel", "measured_ms", "predicted_ms", "error");
  if (graph.train) out << fmt::format(" {:>12} {:>12} {:>8}", "bw_measured", "bw_predicted", "bw_error");
  out << "\n";
  double fw_meas = 0, fw_pred = 0, bw_meas = 0, bw_pred = 0;
  for (const auto& op : graph.ops) {
    if (op.kernels.empty() && op.bw_kernels.empty()) continue;
    const double fw = sum_ms(op.kernels);
    const double bw = sum_ms(op.bw_kernels);
    const double w = op.in_layer ? layers : 1.0;
    fw_meas += w * op.measured_fw_ms;
    fw_pred += w * fw;
    bw_meas += w * op.measured_bw_ms;
    bw_pred += w * bw;
    const auto& first = op.kernels.empty() ? op.bw_kernels.front() : op.kernels.front();
    out << fmt::format("{:<44} {:<9} {:>12.4f} {:>12.4f} {:>7.1f}%", op.name.substr(0, 44), nm::to_string(first.op),
                       op.measured_fw_ms, fw, err(fw, op.measured_fw_ms));
    if (graph.train) {
      out << fmt::format(" {:>12.4f} {:>12.4f} {:>7.1f}%", op.measured_bw_ms, bw, err(bw, op.measured_bw_ms));
    }
    out << "\n";
  }
  out << fmt::format("forward total of the mapped ops (x{} layers): measured {:.3f} ms, predicted {:.3f} ms ({:+.1f}%)\n",
                     layers, fw_meas, fw_pred, err(fw_pred, fw_meas));
  if (graph.train) {
    out << fmt::format(
        "backward total of the mapped ops (x{} layers): measured {:.3f} ms, predicted {:.3f} ms ({:+.1f}%)\n", layers,
        bw_meas, bw_pred, err(bw_pred, bw_meas));
  }
  return 0;
}

}  // namespace tessera::cli
