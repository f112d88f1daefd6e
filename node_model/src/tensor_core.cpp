#include "tessera/node_model/tensor_core.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <ostream>
#include <set>
#include <sstream>
#include <tuple>

#include "tessera/error.hpp"

namespace tessera::node_model {
namespace {

constexpr std::string_view kMagic = "tessera-node-model-weights";
constexpr std::string_view kKind = "tensor-core";
/// Version 2 added the memory-bound cap (`util_cap_memory`); version 1 files
/// (one cap for both) are still read.
constexpr int kVersion = 2;

constexpr std::array<TcTile, 6> kTiles{
    {{128, 256, 1}, {256, 128, 1}, {128, 128, 1}, {128, 64, 1}, {64, 128, 1}, {64, 64, 1}}};
constexpr std::array<int, 5> kSplits{1, 2, 4, 8, 16};
/// Bytes of the reduction one pipeline step (one stage of the mainloop)
/// loads per row: 64 bf16 / 32 tf32 / 128 fp8 elements, the K of the
/// tensor-core CTA tiles of CUTLASS and cuBLAS on Ampere and Hopper.
constexpr double kStepBytes = 128.0;
/// Split-K slices keep at least this many pipeline steps.
constexpr double kMinStepsPerSlice = 4.0;
/// Outputs of the utilization MLP (see utilization_of).
constexpr int kOutputs = 3;

double safe_log(double x) { return std::log(std::max(x, 1e-30)); }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

/// Rows of the GEMM's output (B*M for linear, M for bmm) and its batch.
std::pair<double, double> rows_and_batch(const Kernel& k) {
  if (k.op == KernelOp::Linear) return {static_cast<double>(k.b) * static_cast<double>(k.m), 1.0};
  return {static_cast<double>(k.m), static_cast<double>(k.b)};
}

/// Output element bytes: FP8 GEMMs write BF16 (as measured), partial sums
/// of split-K are FP32.
double output_bytes(const Kernel& k, int split) {
  if (split > 1) return 4.0;
  return k.dtype == DType::FP8 ? 2.0 : dtype_bytes(k.dtype);
}

std::string_view select_name(TcSelect s) { return s == TcSelect::MinTime ? "min-time" : "min-roofline"; }

/// utilization = alpha * (1 - s / waves) * ksteps / (ksteps + k0), with
/// alpha = cap * sigmoid(o0), s = sigmoid(o1), k0 = exp(o2): the fraction of
/// the roofline a long kernel reaches (at most `cap`, the highest fraction
/// measured), the tail of its last waves, and the pipeline's fill and drain
/// worth k0 steps per tile. All three saturate as the GEMM grows.
double utilization_of(const Eigen::VectorXd& o, double waves, double ksteps, double cap) {
  const double alpha = cap * sigmoid(o(0));
  const double k0 = std::exp(std::clamp(o(2), -20.0, 20.0));
  return std::max(alpha * (1.0 - sigmoid(o(1)) / waves) * ksteps / (ksteps + k0), 1e-9);
}

}  // namespace

bool is_tensor_core_gemm(const Kernel& k) { return is_gemm(k.op) && k.dtype != DType::FP32; }

std::span<const TcTile> tensor_core_tiles() { return kTiles; }
std::span<const int> tensor_core_splits() { return kSplits; }

TcGeometry tensor_core_geometry(const Kernel& k, const GpuSpec& gpu, const TcTile& tile) {
  TcGeometry g;
  const double sms = gpu.sms;
  const double e = dtype_bytes(k.dtype);
  const double peak = gpu.matmul_peak(k.dtype).per_second();
  const double bw = gpu.memory_bandwidth.bytes_per_second();
  const auto [rows, batch] = rows_and_batch(k);
  const double n = static_cast<double>(k.n);
  const double split = std::max(1, tile.split);
  g.depth = std::ceil(static_cast<double>(k.k) / split);
  g.ksteps = g.depth * e / kStepBytes;
  const double grid_c = std::ceil(n / tile.a);
  const double grid_r = std::ceil(rows / tile.b);
  g.tiles = batch * grid_c * grid_r * split;
  g.waves = std::ceil(g.tiles / sms);
  g.fill = g.tiles / (g.waves * sms);
  const double ta = std::min<double>(tile.a, n);
  const double tb = std::min<double>(tile.b, rows);
  g.tile_flops = 2.0 * ta * tb * g.depth;
  // DRAM traffic with the panel reuse of a wave (tile_geometry, step 3 of
  // docs/node_model.md): the concurrent tiles of one matrix form a squarest
  // r x c block that reads r A-panels and c B-panels once.
  const double conc = std::clamp(std::floor(sms / split), 1.0, grid_r * grid_c);
  double r = std::clamp(std::sqrt(conc), 1.0, grid_r);
  const double c = std::clamp(conc / r, 1.0, grid_c);
  r = std::clamp(conc / c, 1.0, grid_r);
  g.dram_bytes = e * g.depth * (tb / c + ta / r) + output_bytes(k, tile.split) * ta * tb;
  // Each tile gets bandwidth / SMs, also in a lone partial wave (sharing the
  // bandwidth among only the active tiles cross-validated worse: 6.4% against
  // 6.0% mean held-out MAPE).
  const double compute_s = g.tile_flops / (peak / sms);
  const double memory_s = g.dram_bytes / (bw / sms);
  g.tile_bound_s = std::max(compute_s, memory_s);
  g.compute_bound = compute_s >= memory_s;
  return g;
}

bool tensor_core_candidate_valid(const Kernel& k, const GpuSpec& gpu, const TcTile& tile) {
  const auto [rows, batch] = rows_and_batch(k);
  const double n = static_cast<double>(k.n);
  // A tile dimension above twice the output's is all padding (64 always fits).
  if (tile.a > 64 && tile.a >= 2.0 * n) return false;
  if (tile.b > 64 && tile.b >= 2.0 * rows) return false;
  if (tile.split <= 1) return true;
  const double base_tiles = batch * std::ceil(n / tile.a) * std::ceil(rows / tile.b);
  if (base_tiles >= gpu.sms) return false;
  const double depth = std::ceil(static_cast<double>(k.k) / tile.split);
  return depth * dtype_bytes(k.dtype) / kStepBytes >= kMinStepsPerSlice;
}

Eigen::VectorXd tensor_core_features(const Kernel& k, const GpuSpec& gpu, const TcTile& tile,
                                     const TcGeometry& g) {
  Eigen::VectorXd f(kTcFeatures);
  f(0) = safe_log(g.waves);
  f(1) = safe_log(g.ksteps);
  // Tile intensity per element of its DRAM traffic (with the wave's panel
  // reuse): geometry only. On H100 it equals intensity / ridge point up to a
  // constant (ridge x element bytes is 590 FLOP per element for tf32, bf16
  // and fp8 alike), but it keeps the bandwidth out of the utilization, so a
  // GPU with more bandwidth is never predicted slower (with the ridge, H200
  // came out up to 11% slower than H100: one GPU holds no data on how the
  // utilization responds to the ridge point).
  f(2) = safe_log(g.tile_flops / std::max(g.dram_bytes, 1.0) * dtype_bytes(k.dtype));
  f(3) = safe_log(k.bytes().as_double() / gpu.l2_cache.as_double());
  f(4) = std::log2(static_cast<double>(std::max(1, tile.split)));
  f(5) = std::log2(static_cast<double>(dtype_bytes(k.dtype)));
  return f;
}

std::string_view tensor_core_feature_name(int i) {
  static constexpr std::array<std::string_view, kTcFeatures> kNames{
      "log_waves", "log_ksteps", "log_flops_per_element", "log_bytes_over_l2", "log2_split", "log2_element_bytes"};
  return i >= 0 && i < kTcFeatures ? kNames[static_cast<std::size_t>(i)] : "?";
}

// ---------------------------------------------------------------- model

namespace {

using Candidate = TcCandidate;

std::vector<Candidate> candidates(const Kernel& k, const GpuSpec& gpu) {
  std::vector<Candidate> out;
  for (const TcTile& t : kTiles) {
    for (int s : kSplits) {
      const TcTile tile{t.a, t.b, s};
      if (!tensor_core_candidate_valid(k, gpu, tile)) continue;
      out.push_back({tile, tensor_core_geometry(k, gpu, tile)});
    }
  }
  if (out.empty()) {  // (cannot happen: 64x64 without split is always valid)
    const TcTile tile{64, 64, 1};
    out.push_back({tile, tensor_core_geometry(k, gpu, tile)});
  }
  return out;
}

const Candidate& least_roofline(const std::vector<Candidate>& cands) {
  const Candidate* pick = &cands.front();
  for (const auto& c : cands) {
    if (c.g.roofline_s() < pick->g.roofline_s()) pick = &c;
  }
  return *pick;
}

}  // namespace

TcCandidate tensor_core_roofline_candidate(const Kernel& k, const GpuSpec& gpu) {
  return least_roofline(candidates(k, gpu));
}

double TensorCoreModel::candidate_ms(const Kernel& k, const GpuSpec& gpu, const TcTile& tile) const {
  const TcGeometry g = tensor_core_geometry(k, gpu, tile);
  return g.roofline_s() /
         utilization_of(net.forward(tensor_core_features(k, gpu, tile, g)), g.waves, g.ksteps, cap_for(g)) *
         1e3;
}

TensorCoreModel::Choice TensorCoreModel::choose_unpadded(const Kernel& k, const GpuSpec& gpu) const {
  const auto cands = candidates(k, gpu);
  Choice best;
  best.kernel_ms = std::numeric_limits<double>::infinity();
  if (select == TcSelect::MinRoofline) {
    const Candidate* pick = &least_roofline(cands);
    best.tile = pick->tile;
    best.geometry = pick->g;
    best.utilization = utilization_of(net.forward(tensor_core_features(k, gpu, pick->tile, pick->g)),
                                      pick->g.waves, pick->g.ksteps, cap_for(pick->g));
    best.kernel_ms = pick->g.roofline_s() / best.utilization * 1e3;
    return best;
  }
  for (const auto& c : cands) {
    const double util = utilization_of(net.forward(tensor_core_features(k, gpu, c.tile, c.g)), c.g.waves,
                                       c.g.ksteps, cap_for(c.g));
    const double ms = c.g.roofline_s() / util * 1e3;
    if (ms < best.kernel_ms) {
      best.tile = c.tile;
      best.geometry = c.g;
      best.utilization = util;
      best.kernel_ms = ms;
    }
  }
  return best;
}

TensorCoreModel::Choice TensorCoreModel::choose(const Kernel& k, const GpuSpec& gpu) const {
  if (!is_tensor_core_gemm(k)) {
    throw InputError(fmt::format("tensor-core model: {} {} is not a tensor-core GEMM", to_string(k.dtype),
                                 to_string(k.op)));
  }
  if (net.empty()) throw InputError("tensor-core model: no trained weights");
  k.validate();
  (void)gpu.matmul_peak(k.dtype);  // throws for a dtype the GPU cannot run
  Choice best = choose_unpadded(k, gpu);
  // Below the smallest measured dimension the model extrapolates; a GEMM
  // can always run as its zero-padded twin of the smallest measured size,
  // so it is predicted no slower than that.
  const auto [rows, batch] = rows_and_batch(k);
  if (min_dim > 0 && (rows < min_dim || k.n < min_dim || k.k < min_dim)) {
    Kernel padded = k;
    if (k.op == KernelOp::Linear) {
      padded.b = 1;
      padded.m = std::max<std::int64_t>(static_cast<std::int64_t>(rows), min_dim);
    } else {
      padded.m = std::max<std::int64_t>(k.m, min_dim);
    }
    padded.n = std::max<std::int64_t>(k.n, min_dim);
    padded.k = std::max<std::int64_t>(k.k, min_dim);
    const Choice p = choose_unpadded(padded, gpu);
    if (p.kernel_ms < best.kernel_ms) best = p;
  }
  return best;
}

double TensorCoreModel::predict_ms(const Kernel& k, const GpuSpec& gpu) const {
  return std::max(floor_ms, choose(k, gpu).kernel_ms);
}

std::string TensorCoreModel::serialize() const {
  std::ostringstream out;
  out << kMagic << ' ' << kVersion << ' ' << kKind << '\n';
  out << fmt::format("floor_ms {:.6g}\n", floor_ms);
  out << "select " << select_name(select) << '\n';
  out << fmt::format("util_cap {:.6g}\n", util_cap);
  out << fmt::format("util_cap_memory {:.6g}\n", util_cap_memory);
  out << "min_dim " << min_dim << '\n';
  out << "features " << kTcFeatures;
  for (int i = 0; i < kTcFeatures; ++i) out << ' ' << tensor_core_feature_name(i);
  out << '\n';
  net.write(out);
  return out.str();
}

TensorCoreModel TensorCoreModel::parse(std::string_view text, const std::string& source) {
  std::istringstream in{std::string(text)};
  std::string magic, kind;
  int version = 0;
  if (!(in >> magic >> version >> kind) || magic != kMagic) {
    throw InputError(fmt::format("{}: not a Tessera weights file (expected header '{} {} {}')", source,
                                 kMagic, kVersion, kKind));
  }
  if ((version != kVersion && version != 1) || kind != kKind) {
    throw InputError(fmt::format("{}: weights version {} kind '{}' (this build reads versions 1 to {} of {})",
                                 source, version, kind, kVersion, kKind));
  }
  auto fail = [&](const std::string& what) {
    throw InputError(fmt::format("{}: malformed weights ({})", source, what));
  };
  TensorCoreModel m;
  std::string tag;
  if (!(in >> tag >> m.floor_ms) || tag != "floor_ms" || !(m.floor_ms >= 0.0)) fail("floor_ms");
  std::string sel;
  if (!(in >> tag >> sel) || tag != "select") fail("select");
  if (sel == "min-time") {
    m.select = TcSelect::MinTime;
  } else if (sel == "min-roofline") {
    m.select = TcSelect::MinRoofline;
  } else {
    fail("select");
  }
  if (!(in >> tag >> m.util_cap) || tag != "util_cap" || !(m.util_cap > 0.0 && m.util_cap <= 1.0))
    fail("util_cap");
  m.util_cap_memory = m.util_cap;
  if (version >= 2 && (!(in >> tag >> m.util_cap_memory) || tag != "util_cap_memory" ||
                       !(m.util_cap_memory > 0.0 && m.util_cap_memory <= 1.0)))
    fail("util_cap_memory");
  if (!(in >> tag >> m.min_dim) || tag != "min_dim" || m.min_dim < 0) fail("min_dim");
  int nf = 0;
  if (!(in >> tag >> nf) || tag != "features" || nf != kTcFeatures) fail("features");
  for (int i = 0; i < nf; ++i) {
    std::string name;
    if (!(in >> name) || name != tensor_core_feature_name(i)) fail(fmt::format("feature {}", i));
  }
  m.net = Mlp::read(in, source);
  if (m.net.inputs() != kTcFeatures || m.net.outputs() != kOutputs) fail("network shape");
  return m;
}

// ---------------------------------------------------------------- training

bool tensor_core_trainable(const Measurement& m) {
  const DType d = m.kernel.dtype;
  return is_gemm(m.kernel.op) && (d == DType::BF16 || d == DType::FP16 || d == DType::TF32) &&
         m.latency_ms > 0;
}

TensorCoreModel train_tensor_core(const MeasurementSet& data, const TensorCoreTrainOptions& opt,
                                  std::ostream* log, std::vector<int> rows) {
  if (rows.empty()) {
    for (std::size_t i = 0; i < data.rows.size(); ++i) {
      if (tensor_core_trainable(data.rows[i])) rows.push_back(static_cast<int>(i));
    }
  }
  std::erase_if(rows, [&](int i) { return !tensor_core_trainable(data.rows[static_cast<std::size_t>(i)]); });
  if (rows.empty()) throw InputError("tensor-core training: no tf32/fp16/bf16 GEMM measurements");
  TensorCoreModel model;
  model.select = opt.select;
  // GPU-side floor: a low percentile of the training latencies (the smallest
  // kernels bottom out at ~5 us of kernel time: launch, prologue, epilogue).
  {
    std::vector<double> lat;
    lat.reserve(rows.size());
    for (int i : rows) lat.push_back(data.rows[static_cast<std::size_t>(i)].latency_ms);
    std::sort(lat.begin(), lat.end());
    const auto idx = static_cast<std::size_t>(std::floor(opt.floor_percentile / 100.0 * (lat.size() - 1)));
    model.floor_ms = lat[std::min(idx, lat.size() - 1)];
    // The floor is a kernel's launch, prologue and epilogue: microseconds on
    // any GPU. A table whose fastest kernels take longer has no small GEMMs
    // to learn it from, or its times are not in milliseconds (microseconds
    // under latency_ms); either way the model would put every kernel,
    // including the FP32 ones predicted beside it, at that floor or above.
    if (model.floor_ms > kMaxTensorCoreFloorMs) {
      throw InputError(fmt::format(
          "tensor-core training: the floor (percentile {:g} of the {} GEMM times) is {:.4g} ms, over the "
          "{:g} ms a kernel's launch takes on any GPU: the table needs small GEMMs (XLA's smallest take "
          "about 0.006 ms), and its times must be milliseconds",
          opt.floor_percentile, lat.size(), model.floor_ms, kMaxTensorCoreFloorMs));
    }
  }
  // Smallest measured GEMM dimension (rows, N or K).
  model.min_dim = std::numeric_limits<std::int64_t>::max();
  for (int i : rows) {
    const Kernel& k = data.rows[static_cast<std::size_t>(i)].kernel;
    const auto [r, batch] = rows_and_batch(k);
    model.min_dim = std::min({model.min_dim, static_cast<std::int64_t>(r), k.n, k.k});
  }
  // Utilization caps: the highest fraction of its fastest candidate's
  // roofline any training kernel reached, one for kernels whose fastest
  // candidate is bound by the tensor cores and one for those bound by DRAM
  // (on XLA's H100 table 0.840 and 0.894), so shapes beyond the training
  // range never run closer to the roofline than measured in their regime.
  // (One cap for both let large compute-bound GEMMs reach 0.86 of the peak,
  // above every compute-bound measurement, through the DRAM-bound maximum.)
  model.util_cap = 0.0;
  model.util_cap_memory = 0.0;
  for (int i : rows) {
    const auto& m = data.rows[static_cast<std::size_t>(i)];
    const TcGeometry g =
        tensor_core_roofline_candidate(m.kernel, data.gpus[static_cast<std::size_t>(m.gpu)]).g;
    double& cap = g.compute_bound ? model.util_cap : model.util_cap_memory;
    cap = std::max(cap, std::min(1.0, g.roofline_s() / (m.latency_ms * 1e-3)));
  }
  // A regime no training kernel measured takes the other's cap.
  if (model.util_cap == 0.0) model.util_cap = model.util_cap_memory;
  if (model.util_cap_memory == 0.0) model.util_cap_memory = model.util_cap;
  const int n = static_cast<int>(rows.size());
  // Every (row, candidate) pair is one column of x; row r owns columns
  // [begin[r], begin[r + 1]).
  std::vector<int> begin{0};
  std::vector<double> log_base, waves, ksteps, caps;
  std::vector<Eigen::VectorXd> cols;
  std::vector<double> log_y(n), log_floor(n, std::log(model.floor_ms * 1e-3));
  for (int r = 0; r < n; ++r) {
    const auto& m = data.rows[static_cast<std::size_t>(rows[r])];
    const GpuSpec& gpu = data.gpus[static_cast<std::size_t>(m.gpu)];
    auto cands = candidates(m.kernel, gpu);
    if (opt.select == TcSelect::MinRoofline) cands = {least_roofline(cands)};
    for (const auto& c : cands) {
      Eigen::VectorXd f = tensor_core_features(m.kernel, gpu, c.tile, c.g);
      for (int d : opt.drop_features) {
        if (d >= 0 && d < kTcFeatures) f(d) = 0.0;
      }
      cols.push_back(std::move(f));
      log_base.push_back(std::log(c.g.roofline_s()));
      waves.push_back(c.g.waves);
      ksteps.push_back(c.g.ksteps);
      caps.push_back(model.cap_for(c.g));
    }
    begin.push_back(static_cast<int>(cols.size()));
    log_y[r] = std::log(m.latency_ms * 1e-3);
  }
  Eigen::MatrixXd x(kTcFeatures, static_cast<Eigen::Index>(cols.size()));
  for (std::size_t c = 0; c < cols.size(); ++c) x.col(static_cast<Eigen::Index>(c)) = cols[c];

  std::vector<int> sizes{kTcFeatures};
  sizes.insert(sizes.end(), opt.hidden.begin(), opt.hidden.end());
  sizes.push_back(kOutputs);
  Rng init(opt.mlp.seed + 7919ULL);
  Mlp net(sizes, init);
  net.fit_normalization(x);
  const Eigen::MatrixXd z = net.normalize(x);

  // Adam on mini-batches of rows; a row's loss is that of its fastest
  // candidate (the gradient flows into that candidate only), so the network
  // learns the utilization of the tiles an autotuner keeps.
  const auto& o = opt.mlp;
  const int batches = (n + o.batch - 1) / o.batch;
  AdamTrainer adam(net, o, static_cast<std::int64_t>(batches) * o.epochs);
  Rng rng(o.seed);
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  std::vector<Eigen::MatrixXd> acts(adam.layers() + 1);
  double last_loss = 0.0;
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    shuffle(order, rng);
    double epoch_loss = 0.0;
    for (int start = 0; start < n; start += o.batch) {
      const int bs = std::min(o.batch, n - start);
      int ncols = 0;
      for (int j = 0; j < bs; ++j) ncols += begin[order[start + j] + 1] - begin[order[start + j]];
      acts[0].resize(kTcFeatures, ncols);
      std::vector<int> col_of(ncols);
      {
        int c = 0;
        for (int j = 0; j < bs; ++j) {
          const int r = order[start + j];
          for (int q = begin[r]; q < begin[r + 1]; ++q, ++c) {
            acts[0].col(c) = z.col(q);
            col_of[c] = q;
          }
        }
      }
      adam.forward(acts);
      const Eigen::MatrixXd& out = acts.back();
      Eigen::MatrixXd grad = Eigen::MatrixXd::Zero(kOutputs, ncols);
      // A row's prediction is its fastest candidate's; the gradient flows
      // into that candidate only. (A soft minimum annealed to the hard one,
      // which lets every candidate learn early on, cross-validated worse.)
      int c = 0;
      for (int j = 0; j < bs; ++j) {
        const int r = order[start + j];
        int best = -1;
        double best_log = std::numeric_limits<double>::infinity();
        for (int q = begin[r]; q < begin[r + 1]; ++q, ++c) {
          const double keep = std::max(1.0 - sigmoid(out(1, c)) / waves[q], 1e-12);
          const double k0 = std::exp(std::clamp(out(2, c), -20.0, 20.0));
          const double lp = log_base[q] - std::log(caps[q] * sigmoid(out(0, c))) - std::log(keep) +
                            std::log1p(k0 / ksteps[q]);
          if (lp < best_log) {
            best_log = lp;
            best = c;
          }
        }
        if (best_log < log_floor[r]) {  // measured max(floor, kernel): no gradient below the floor
          const double res = log_floor[r] - log_y[r];
          epoch_loss += res * res;
          continue;
        }
        const double res = best_log - log_y[r];
        epoch_loss += res * res;
        const int q = col_of[best];
        const double alpha = sigmoid(out(0, best));
        const double s1 = sigmoid(out(1, best));
        const double keep = std::max(1.0 - s1 / waves[q], 1e-12);
        const double k0 = std::exp(std::clamp(out(2, best), -20.0, 20.0));
        grad(0, best) = 2.0 * res * -(1.0 - alpha);
        grad(1, best) = 2.0 * res * (s1 * (1.0 - s1) / waves[q]) / keep;
        grad(2, best) = 2.0 * res * k0 / (ksteps[q] + k0);
      }
      grad /= static_cast<double>(bs);
      adam.step(std::move(grad), acts);
    }
    last_loss = epoch_loss / n;
  }
  model.net = std::move(net);
  if (log != nullptr) {
    double ape = 0.0;
    for (int i : rows) {
      const auto& m = data.rows[static_cast<std::size_t>(i)];
      ape += std::abs(model.predict_ms(m.kernel, data.gpus[static_cast<std::size_t>(m.gpu)]) / m.latency_ms -
                      1.0);
    }
    *log << fmt::format(
        "tensor-core: {} rows, {} candidates, training MAPE {:.2f}% (loss {:.5f}, floor {:.4f} ms)\n", n,
        cols.size(), 100.0 * ape / n, last_loss, model.floor_ms);
  }
  return model;
}

std::vector<int> shape_folds(const MeasurementSet& data, int folds) {
  using Shape = std::tuple<int, std::int64_t, std::int64_t, std::int64_t, std::int64_t>;
  auto shape_of = [](const Kernel& k) { return Shape{static_cast<int>(k.op), k.b, k.m, k.n, k.k}; };
  auto hash = [](const Shape& s) {
    // splitmix64 over the fields: platform independent.
    std::uint64_t h = 0x243F6A8885A308D3ULL;
    auto mix = [&](std::uint64_t v) {
      Rng r(h ^ v);
      h = r.next();
    };
    mix(static_cast<std::uint64_t>(std::get<0>(s)));
    mix(static_cast<std::uint64_t>(std::get<1>(s)));
    mix(static_cast<std::uint64_t>(std::get<2>(s)));
    mix(static_cast<std::uint64_t>(std::get<3>(s)));
    mix(static_cast<std::uint64_t>(std::get<4>(s)));
    return h;
  };
  std::map<Shape, std::uint64_t> shapes;
  for (const auto& m : data.rows) shapes.emplace(shape_of(m.kernel), 0);
  std::vector<std::pair<std::uint64_t, Shape>> order;
  order.reserve(shapes.size());
  for (auto& [s, h] : shapes) order.emplace_back(hash(s), s);
  std::sort(order.begin(), order.end());
  std::map<Shape, int> fold_of;
  for (std::size_t i = 0; i < order.size(); ++i) fold_of[order[i].second] = static_cast<int>(i % folds);
  std::vector<int> out;
  out.reserve(data.rows.size());
  for (const auto& m : data.rows) out.push_back(fold_of.at(shape_of(m.kernel)));
  return out;
}

std::vector<double> tensor_core_kfold(const MeasurementSet& data, int folds,
                                      const TensorCoreTrainOptions& opt, std::ostream* log) {
  if (folds < 2) throw InputError(fmt::format("k-fold: need at least 2 folds (got {})", folds));
  const std::vector<int> fold = shape_folds(data, folds);
  // Each fold holds out whole shapes: past the shapes, folds hold out
  // nothing (helper 87: 50 folds of 8 shapes trained 42 times for nothing).
  const std::size_t shapes = std::set<int>(fold.begin(), fold.end()).size();
  if (shapes < static_cast<std::size_t>(folds)) {
    throw InputError(
        fmt::format("k-fold: {} folds but the data has {} shapes (each fold holds out whole shapes): "
                    "at most {} folds",
                    folds, shapes, shapes));
  }
  std::vector<double> pred(data.rows.size(), 0.0);
  for (int f = 0; f < folds; ++f) {
    std::vector<int> train;
    for (std::size_t i = 0; i < data.rows.size(); ++i) {
      if (fold[i] != f && tensor_core_trainable(data.rows[i])) train.push_back(static_cast<int>(i));
    }
    if (log != nullptr) *log << fmt::format("fold {}/{}: ", f + 1, folds);
    const TensorCoreModel m = train_tensor_core(data, opt, log, train);
    for (std::size_t i = 0; i < data.rows.size(); ++i) {
      if (fold[i] != f) continue;
      const auto& r = data.rows[i];
      if (is_tensor_core_gemm(r.kernel))
        pred[i] = m.predict_ms(r.kernel, data.gpus[static_cast<std::size_t>(r.gpu)]);
    }
  }
  return pred;
}

}  // namespace tessera::node_model
