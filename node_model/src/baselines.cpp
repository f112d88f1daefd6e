#include "tessera/node_model/baselines.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <sstream>

#include "tessera/error.hpp"
#include "tessera/node_model/roofline.hpp"

namespace tessera::node_model {
namespace {

constexpr std::string_view kMagic = "tessera-node-model-weights";
constexpr int kVersion = 2;  // 2: GEMM rows read as [M,N]x[N,K] (K = output width)

void check_header(std::istream& in, std::string_view kind, const std::string& source) {
  std::string magic, k;
  int version = 0;
  if (!(in >> magic >> version >> k) || magic != kMagic || version != kVersion || k != kind) {
    throw InputError(fmt::format("{}: not a Tessera weights file of kind '{}' version {}", source, kind, kVersion));
  }
}

/// 1 us, FLOPs / peak and bytes / bandwidth of an FP32 kernel (what the fit saw).
std::array<double, 3> linreg_terms(const Kernel& k, const GpuSpec& gpu) {
  const double peak = (is_gemm(k.op) ? gpu.matmul_peak(k.dtype) : gpu.fp32_peak).per_second();
  return {1e-6, k.flops().count() / peak, k.bytes().as_double() / gpu.memory_bandwidth.bytes_per_second()};
}

}  // namespace

// ---------------------------------------------------------------- linreg

std::string LinRegModel::serialize() const {
  std::ostringstream out;
  out << kMagic << ' ' << kVersion << " linreg\n";
  for (int c = 0; c < kNumKernelClasses; ++c) {
    out << fmt::format("{} {} {:.10g} {:.10g} {:.10g}\n", to_string(static_cast<KernelClass>(c)),
                       trained[c] ? 1 : 0, coef[c][0], coef[c][1], coef[c][2]);
  }
  return out.str();
}

LinRegModel LinRegModel::parse(std::string_view text, const std::string& source) {
  std::istringstream in{std::string(text)};
  check_header(in, "linreg", source);
  LinRegModel m;
  for (int c = 0; c < kNumKernelClasses; ++c) {
    std::string name;
    int t = 0;
    if (!(in >> name >> t >> m.coef[c][0] >> m.coef[c][1] >> m.coef[c][2])) {
      throw InputError(fmt::format("{}: malformed linreg weights", source));
    }
    m.trained[c] = t != 0;
  }
  return m;
}

LinRegModel train_linreg(const MeasurementSet& data, std::ostream* log) {
  LinRegModel m;
  for (int c = 0; c < kNumKernelClasses; ++c) {
    Eigen::Matrix3d ata = Eigen::Matrix3d::Zero();
    Eigen::Vector3d atb = Eigen::Vector3d::Zero();
    int n = 0;
    for (const auto& r : data.rows) {
      const auto cls = kernel_class(r.kernel.op);
      if (!cls || static_cast<int>(*cls) != c) continue;
      const auto t = linreg_terms(r.kernel, data.gpus[r.gpu]);
      const double y = r.latency_ms * 1e-3;
      const Eigen::Vector3d a(t[0] / y, t[1] / y, t[2] / y);  // relative-error weighting
      ata += a * a.transpose();
      atb += a;  // (y / y)
      ++n;
    }
    if (n == 0) continue;
    const Eigen::Vector3d x = ata.ldlt().solve(atb);
    m.coef[c] = {x(0), x(1), x(2)};
    m.trained[c] = true;
    if (log != nullptr) {
      *log << fmt::format("linreg {}: {} rows, latency = {:.3g}us + {:.3g} x FLOPs/peak + {:.3g} x bytes/bw\n",
                          to_string(static_cast<KernelClass>(c)), n, x(0), x(1), x(2));
    }
  }
  return m;
}

LinRegPredictor::LinRegPredictor(GpuSpec gpu, std::shared_ptr<const LinRegModel> model)
    : gpu_(std::move(gpu)), model_(std::move(model)) {
  gpu_.validate();
}

Time LinRegPredictor::predict(const Kernel& kernel) const {
  kernel.validate();
  const auto cls = kernel_class(kernel.op);
  if (!cls || !model_->trained[static_cast<int>(*cls)]) return memory_bound_time(kernel, gpu_);
  // 16-bit: the fit evaluated on the FP32 twin, its non-intercept part
  // scaled by the roofline ratio (tensor-core peak, 2-byte elements); the
  // launch intercept c0 is not scaled. (Evaluating the fit on 16-bit terms
  // directly would let a negative FLOP coefficient make vector ops > 2x faster.)
  Kernel twin = kernel;
  twin.dtype = DType::FP32;
  const auto t = linreg_terms(twin, gpu_);
  const auto& c = model_->coef[static_cast<int>(*cls)];
  const double s = std::max(c[0] * t[0] + c[1] * t[1] + c[2] * t[2], 1e-7);
  if (kernel.dtype == DType::FP32) return Time::from_seconds(s);
  const double intercept = std::clamp(c[0] * t[0], 0.0, s);
  const double scale = roofline_time(kernel, gpu_).seconds() / roofline_time(twin, gpu_).seconds();
  return Time::from_seconds(std::max(intercept + (s - intercept) * scale, 1e-7));
}

// ---------------------------------------------------------------- direct MLP

Eigen::VectorXd direct_features(const Kernel& k, const GpuSpec& gpu) {
  Eigen::VectorXd f = Eigen::VectorXd::Zero(kDirectFeatures);
  auto lg = [](double x) { return std::log(std::max(x, 1e-30)); };
  f(0) = lg(static_cast<double>(k.b));
  if (is_gemm(k.op)) {
    f(1) = lg(static_cast<double>(k.m));
    f(2) = lg(static_cast<double>(k.n));
    f(3) = lg(static_cast<double>(k.k));
  } else {
    f(1) = lg(static_cast<double>(k.h));
  }
  f(4) = lg(static_cast<double>(gpu.sms));
  f(5) = lg((is_gemm(k.op) ? gpu.matmul_peak(k.dtype) : gpu.fp32_peak).tflops());
  f(6) = lg(gpu.memory_bandwidth.bytes_per_second() * 1e-9);
  f(7) = lg(gpu.l2_cache.as_double() * 1e-6);
  f(8) = lg(gpu.memory.as_double() * 1e-9);
  if (const int i = elementwise_index(k.op); i >= 0) f(9 + i) = 1.0;
  return f;
}

std::string DirectMlpModel::serialize() const {
  std::ostringstream out;
  out << kMagic << ' ' << kVersion << " mlp\n";
  for (int c = 0; c < kNumKernelClasses; ++c) {
    out << "class " << to_string(static_cast<KernelClass>(c)) << (nets[c].empty() ? " untrained\n" : " trained\n");
    if (!nets[c].empty()) nets[c].write(out);
  }
  return out.str();
}

DirectMlpModel DirectMlpModel::parse(std::string_view text, const std::string& source) {
  std::istringstream in{std::string(text)};
  check_header(in, "mlp", source);
  DirectMlpModel m;
  for (int c = 0; c < kNumKernelClasses; ++c) {
    std::string tag, name, state;
    if (!(in >> tag >> name >> state) || tag != "class") {
      throw InputError(fmt::format("{}: malformed mlp weights", source));
    }
    if (state == "trained") {
      m.nets[c] = Mlp::read(in, source);
      if (m.nets[c].inputs() != kDirectFeatures || m.nets[c].outputs() != 1) {
        throw InputError(fmt::format("{}: mlp weights for {} have the wrong shape", source, name));
      }
    }
  }
  return m;
}

DirectMlpModel train_direct_mlp(const MeasurementSet& data, const TileMlpTrainOptions& opt, std::ostream* log) {
  DirectMlpModel model;
  for (int c = 0; c < kNumKernelClasses; ++c) {
    std::vector<int> rows;
    for (std::size_t i = 0; i < data.rows.size(); ++i) {
      const auto cls = kernel_class(data.rows[i].kernel.op);
      if (cls && static_cast<int>(*cls) == c) rows.push_back(static_cast<int>(i));
    }
    if (rows.empty()) continue;
    Rng rng(opt.mlp.seed + 7919ULL * static_cast<std::uint64_t>(c + 1));
    for (std::size_t i = rows.size() - 1; i > 0; --i) std::swap(rows[i], rows[rng.next() % (i + 1)]);
    if (static_cast<int>(rows.size()) > opt.max_rows_per_class) rows.resize(opt.max_rows_per_class);
    const int n = static_cast<int>(rows.size());
    Eigen::MatrixXd x(kDirectFeatures, n);
    std::vector<double> log_y(n);
    for (int i = 0; i < n; ++i) {
      const auto& m = data.rows[rows[i]];
      x.col(i) = direct_features(m.kernel, data.gpus[m.gpu]);
      log_y[i] = std::log(m.latency_ms);
    }
    std::vector<int> sizes{kDirectFeatures};
    sizes.insert(sizes.end(), opt.hidden.begin(), opt.hidden.end());
    sizes.push_back(1);
    Rng init(opt.mlp.seed + 31ULL * static_cast<std::uint64_t>(c + 1));
    Mlp net(sizes, init);
    LossFn loss = [&](const Eigen::MatrixXd& out, const std::vector<int>& idx, Eigen::MatrixXd& grad) {
      double total = 0.0;
      for (std::size_t j = 0; j < idx.size(); ++j) {
        const double r = out(0, j) - log_y[idx[j]];
        total += r * r;
        grad(0, j) = 2.0 * r;
      }
      return total;
    };
    train_mlp(net, x, loss, opt.mlp);
    if (log != nullptr) *log << fmt::format("mlp {}: {} rows\n", to_string(static_cast<KernelClass>(c)), n);
    model.nets[c] = std::move(net);
  }
  return model;
}

DirectMlpPredictor::DirectMlpPredictor(GpuSpec gpu, std::shared_ptr<const DirectMlpModel> model)
    : gpu_(std::move(gpu)), model_(std::move(model)) {
  gpu_.validate();
}

Time DirectMlpPredictor::predict(const Kernel& kernel) const {
  if (auto t = cache_.find(kernel)) return *t;
  kernel.validate();
  const auto cls = kernel_class(kernel.op);
  Time t;
  if (!cls || model_->nets[static_cast<int>(*cls)].empty()) {
    t = memory_bound_time(kernel, gpu_);
  } else {
    // 16-bit: the FP32 twin (what the net was trained on) scaled by the
    // roofline ratio (tensor-core peak, 2-byte elements): the same assumption
    // as tile-mlp, applied to the whole kernel.
    Kernel twin = kernel;
    twin.dtype = DType::FP32;
    const double log_ms = model_->nets[static_cast<int>(*cls)].forward(direct_features(twin, gpu_))(0);
    const double scale = kernel.dtype == DType::FP32
                             ? 1.0
                             : roofline_time(kernel, gpu_).seconds() / roofline_time(twin, gpu_).seconds();
    t = Time::from_seconds(std::exp(std::min(log_ms, 30.0)) * 1e-3 * scale);
  }
  cache_.put(kernel, t);
  return t;
}

}  // namespace tessera::node_model
