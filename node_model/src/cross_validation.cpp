#include "tessera/node_model/cross_validation.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <ostream>

#include "tessera/error.hpp"
#include "tessera/node_model/baselines.hpp"
#include "tessera/node_model/roofline.hpp"
#include "tessera/node_model/validation.hpp"

namespace tessera::node_model {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Evenly spaced subset of `idx` (all of it when `max_rows` <= 0).
std::vector<int> subset(const std::vector<int>& idx, int max_rows) {
  const std::size_t n = idx.size();
  const std::size_t take = max_rows > 0 ? std::min<std::size_t>(n, static_cast<std::size_t>(max_rows)) : n;
  std::vector<int> out;
  out.reserve(take);
  for (std::size_t j = 0; j < take; ++j) out.push_back(idx[j * n / take]);
  return out;
}

int gpu_index(const MeasurementSet& set, const std::string& name) {
  for (std::size_t i = 0; i < set.gpus.size(); ++i) {
    if (set.gpus[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

MeasurementSet without_gpu(const MeasurementSet& set, const std::string& gpu) {
  MeasurementSet out;
  std::vector<int> remap(set.gpus.size(), -1);
  for (std::size_t i = 0; i < set.gpus.size(); ++i) {
    if (set.gpus[i].name != gpu) remap[i] = out.add_gpu(set.gpus[i]);
  }
  for (const auto& m : set.rows) {
    if (m.gpu < 0 || m.gpu >= static_cast<int>(remap.size()) || remap[m.gpu] < 0) continue;
    Measurement r = m;
    r.gpu = remap[m.gpu];
    out.rows.push_back(r);
  }
  return out;
}

MeasurementSet only_gpu(const MeasurementSet& set, const std::string& gpu) {
  MeasurementSet out;
  const int g = gpu_index(set, gpu);
  if (g < 0) return out;
  out.gpus.push_back(set.gpus[g]);
  for (const auto& m : set.rows) {
    if (m.gpu != g) continue;
    Measurement r = m;
    r.gpu = 0;
    out.rows.push_back(r);
  }
  return out;
}

std::vector<std::string> fold_gpus(const MeasurementSet& train, const MeasurementSet& test) {
  std::vector<std::string> names;
  for (const auto* set : {&train, &test}) {
    for (const auto& g : set->gpus) {
      if (std::find(names.begin(), names.end(), g.name) == names.end()) names.push_back(g.name);
    }
  }
  return names;
}

std::vector<LogoRow> leave_one_gpu_out(const MeasurementSet& train, const MeasurementSet& test,
                                       const LogoOptions& opt, std::ostream* log) {
  std::vector<std::string> folds = fold_gpus(train, test);
  if (!opt.gpu.empty()) {
    if (std::find(folds.begin(), folds.end(), opt.gpu) == folds.end()) {
      throw InputError(fmt::format("--gpu: no measurements of '{}' in the data (its GPUs: {})", opt.gpu,
                                   fmt::join(folds, ", ")));
    }
    folds = {opt.gpu};
  }
  std::vector<LogoRow> out;
  for (const auto& name : folds) {
    const MeasurementSet fold_train = without_gpu(train, name);
    if (fold_train.rows.empty()) {
      throw InputError(fmt::format("leave-one-GPU-out: no training rows without '{}'", name));
    }
    const auto model = std::make_shared<const TileMlpModel>(train_tile_mlp(fold_train, opt.train, nullptr));
    std::shared_ptr<const LinRegModel> linreg;
    if (opt.linreg) linreg = std::make_shared<const LinRegModel>(train_linreg(fold_train, nullptr));
    // The held-out GPU's rows: source 0 = its test rows, 1 = its training rows.
    const std::array<MeasurementSet, 2> held{only_gpu(test, name), only_gpu(train, name)};
    const GpuSpec& gpu = held[0].gpus.empty() ? held[1].gpus.at(0) : held[0].gpus.at(0);
    const TileMlpPredictor tile_mlp(gpu, model);
    const RooflinePredictor roofline(gpu);
    std::unique_ptr<LinRegPredictor> lin;
    if (linreg) lin = std::make_unique<LinRegPredictor>(gpu, linreg);
    // Group by class and source, in file order.
    std::array<std::array<std::vector<int>, 2>, kNumKernelClasses> groups;
    for (int s = 0; s < 2; ++s) {
      for (std::size_t i = 0; i < held[s].rows.size(); ++i) {
        if (const auto cls = kernel_class(held[s].rows[i].kernel.op)) {
          groups[static_cast<int>(*cls)][s].push_back(static_cast<int>(i));
        }
      }
    }
    for (int c = 0; c < kNumKernelClasses; ++c) {
      std::array<double, 2> ape{}, ape_lin{}, ape_roof{};
      std::array<int, 2> n{};
      std::vector<double> signed_err;
      for (int s = 0; s < 2; ++s) {
        for (const int i : subset(groups[c][s], opt.max_eval_rows)) {
          const Measurement& m = held[s].rows[i];
          const double e = tile_mlp.predict(m.kernel).ms() / m.latency_ms - 1.0;
          signed_err.push_back(e);
          ape[s] += std::abs(e);
          ape_roof[s] += std::abs(roofline.predict(m.kernel).ms() / m.latency_ms - 1.0);
          if (lin) ape_lin[s] += std::abs(lin->predict(m.kernel).ms() / m.latency_ms - 1.0);
          ++n[s];
        }
      }
      const int total = n[0] + n[1];
      if (total == 0) continue;
      auto pct = [](double sum, int count) { return count > 0 ? 100.0 * sum / count : kNaN; };
      LogoRow row;
      row.gpu = name;
      row.kernel_class = std::string(to_string(static_cast<KernelClass>(c)));
      row.test_rows = n[0];
      row.train_rows = n[1];
      row.mape = pct(ape[0] + ape[1], total);
      row.mape_test = pct(ape[0], n[0]);
      row.mape_train = pct(ape[1], n[1]);
      row.signed_median = 100.0 * median(std::move(signed_err));
      row.linreg_mape = lin ? pct(ape_lin[0] + ape_lin[1], total) : kNaN;
      row.roofline_mape = pct(ape_roof[0] + ape_roof[1], total);
      out.push_back(row);
    }
    if (log != nullptr) {
      *log << fmt::format("held out {}: trained on {} rows of {} GPUs\n", name, fold_train.rows.size(),
                          fold_train.gpus.size());
      log->flush();
    }
  }
  return out;
}

std::vector<LogoSummary> summarize_logo(const std::vector<LogoRow>& rows) {
  std::vector<LogoSummary> out;
  for (int c = 0; c < kNumKernelClasses; ++c) {
    LogoSummary s;
    s.kernel_class = std::string(to_string(static_cast<KernelClass>(c)));
    int with_test = 0;
    for (const auto& r : rows) {
      if (r.kernel_class != s.kernel_class) continue;
      ++s.gpus;
      s.mean += r.mape;
      s.linreg_mean += r.linreg_mape;
      s.roofline_mean += r.roofline_mape;
      if (r.test_rows > 0) {
        s.mean_test += r.mape_test;
        ++with_test;
      }
      if (s.worst_gpu.empty() || r.mape > s.worst) {
        s.worst = r.mape;
        s.worst_gpu = r.gpu;
      }
    }
    if (s.gpus == 0) continue;
    s.mean /= s.gpus;
    s.linreg_mean /= s.gpus;
    s.roofline_mean /= s.gpus;
    s.mean_test = with_test > 0 ? s.mean_test / with_test : kNaN;
    out.push_back(s);
  }
  return out;
}

std::string format_logo(const std::vector<LogoRow>& rows) {
  auto pct = [](double v) { return std::isnan(v) ? fmt::format("{:>9}", "-") : fmt::format("{:>8.1f}%", v); };
  std::string s =
      fmt::format("{:<24} {:<12} {:>6} {:>6} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "held-out gpu", "class",
                  "test", "train", "tile-mlp", "(test)", "(train)", "(signed)", "linreg", "roofline");
  for (const auto& r : rows) {
    s += fmt::format("{:<24} {:<12} {:>6} {:>6} {} {} {} {:>+8.1f}% {} {}\n", r.gpu, r.kernel_class, r.test_rows,
                     r.train_rows, pct(r.mape), pct(r.mape_test), pct(r.mape_train), r.signed_median,
                     pct(r.linreg_mape), pct(r.roofline_mape));
  }
  const auto summary = summarize_logo(rows);
  s += fmt::format("\n{:<12} {:>5} {:>9} {:>9} {:>9} {:>9}   {}\n", "class", "gpus", "tile-mlp", "(test)",
                   "linreg", "roofline", "worst held-out gpu (tile-mlp)");
  for (const auto& m : summary) {
    s += fmt::format("{:<12} {:>5} {} {} {} {}   {:.1f}% {}\n", m.kernel_class, m.gpus, pct(m.mean),
                     pct(m.mean_test), pct(m.linreg_mean), pct(m.roofline_mean), m.worst, m.worst_gpu);
  }
  s += "(signed): median of (predicted - measured) / measured of the tile-mlp on the held-out GPU's rows\n";
  return s;
}

}  // namespace tessera::node_model
