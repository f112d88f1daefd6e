#include "tessera/node_model/tile_mlp.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>
#include <sstream>
#include <thread>

#include "tessera/error.hpp"
#include "tessera/index.hpp"
#include "tessera/node_model/tensor_core.hpp"

namespace tessera::node_model {
namespace {

constexpr std::string_view kMagic = "tessera-node-model-weights";
constexpr int kVersion = 7;  // 3: softmax re-read traffic and thread-loop feature; 4: GEMM rows read
                              // as [M,N]x[N,K] (K = output width), tiles over M x K; 5: split-K;
                              // 6: GEMM tiles' DRAM traffic with wave panel reuse; 7: per-class
                              // launch-floor blend (and weight decay; chosen by leave-one-GPU-out)

double safe_log(double x) { return std::log(std::max(x, 1e-30)); }
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

/// Softmax and layer norm work on whole rows: their blocks hold rows.
bool row_op(KernelOp op) { return op == KernelOp::Softmax || op == KernelOp::LayerNorm; }

/// log2 of the largest power of two dividing n, capped (vector-load alignment).
double pow2_factor(std::int64_t n) {
  int f = 0;
  while (f < 6 && n > 0 && n % 2 == 0) {
    n /= 2;
    ++f;
  }
  return f;
}

int log2_bucket(double x, double per_octave) {
  return static_cast<int>(std::lround(std::log2(std::max(x, 1.0)) * per_octave));
}

/// log of launch_floor_blend(floor, kernel, p) from logs; `dk` (optional)
/// receives its derivative by log kernel.
double blend_log(double log_floor, double log_kernel, double p, double* dk) {
  if (p <= 0) {
    if (dk != nullptr) *dk = log_kernel > log_floor ? 1.0 : 0.0;
    return std::max(log_floor, log_kernel);
  }
  const double x = p * (log_kernel - log_floor);
  const double softplus = x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  if (dk != nullptr) *dk = 1.0 / (1.0 + std::exp(-x));
  return log_floor + softplus / p;
}

std::string underscored(std::string s) {
  std::replace(s.begin(), s.end(), ' ', '_');
  return s;
}

}  // namespace

double launch_floor_blend(double floor_ms, double kernel_ms, double p) {
  if (!(floor_ms > 0)) return kernel_ms;
  return std::exp(blend_log(std::log(floor_ms), std::log(std::max(kernel_ms, 1e-30)), p, nullptr));
}

std::string_view to_string(KernelClass c) {
  switch (c) {
    case KernelClass::Bmm: return "bmm";
    case KernelClass::Linear: return "linear";
    case KernelClass::Elementwise: return "elementwise";
    case KernelClass::Softmax: return "softmax";
    case KernelClass::LayerNorm: return "ln";
  }
  return "?";
}

std::optional<KernelClass> kernel_class(KernelOp op) {
  switch (op) {
    case KernelOp::Bmm: return KernelClass::Bmm;
    case KernelOp::Linear: return KernelClass::Linear;
    case KernelOp::Softmax: return KernelClass::Softmax;
    case KernelOp::LayerNorm: return KernelClass::LayerNorm;
    case KernelOp::Copy: return std::nullopt;
    default: return KernelClass::Elementwise;
  }
}

int elementwise_index(KernelOp op) {
  switch (op) {
    case KernelOp::Add: return 0;
    case KernelOp::AddU: return 1;
    case KernelOp::Mul: return 2;
    case KernelOp::MulU: return 3;
    case KernelOp::Div: return 4;
    case KernelOp::DivU: return 5;
    case KernelOp::Pow: return 6;
    case KernelOp::PowU: return 7;
    case KernelOp::Gelu: return 8;
    case KernelOp::Relu: return 9;
    case KernelOp::Tanh: return 10;
    default: return -1;
  }
}

double softmax_thread_fill(const Kernel& k) {
  // PyTorch's block-per-row softmax (cunn_SoftMaxForward, rows wider than
  // 1024): ILP = 16 bytes / element loads per thread, block size the power of
  // two >= min(H / ILP, 1024) / 2 (SoftMax_getBlockSize). Each thread loops
  // ceil(H / ILP / threads) times; the fill is the useful fraction of that
  // loop (1 for H = 2048, 0.625 for H = 2560).
  if (k.op != KernelOp::Softmax) return 0.0;  // (a constant: the feature is unused)
  if (k.h <= 1024) return 1.0;                 // warp-per-row kernel
  const double ilp = 16.0 / dtype_bytes(k.dtype);
  const double max_block = std::floor(std::min(std::floor(static_cast<double>(k.h) / ilp), 1024.0) / 2.0);
  double threads = 1;
  while (threads < max_block) threads *= 2;
  threads = std::max(threads, 32.0);
  const double loops = static_cast<double>(k.h) / ilp / threads;
  return loops / std::ceil(loops);
}

double softmax_reread_factor(const Kernel& k, const GpuSpec& gpu, const Tile& tile) {
  // PyTorch's block-per-row softmax (rows wider than 1024) passes over its
  // row three times (max, sum of exponentials, normalise): one read, two
  // re-reads, one write. The re-reads hit in cache while the rows of the
  // blocks resident on an SM (4 blocks of 512 threads) fit in the SM's share
  // of the L2, capped at 128 KB, an L1-class size (A100's L2 is split into
  // two partitions, so an SM effectively sees about half of its 40 MB).
  // Beyond that the re-reads miss, increasingly over one octave of the row
  // length, until both come from DRAM (traffic x2). The cap and the miss
  // rate (1.0 of 0.6-1.0 tried) were selected on the training GPUs'
  // held-out test rows, not on the A100-80GB.
  if (k.op != KernelOp::Softmax || tile.elements > static_cast<double>(k.h)) return 1.0;
  constexpr double kCacheCap = 128e3;
  constexpr double kMiss = 1.0;
  const double resident = 4.0 * dtype_bytes(k.dtype) * static_cast<double>(k.h);
  const double share = std::min(gpu.l2_cache.as_double() / gpu.sms, kCacheCap);
  const double ramp = std::clamp(std::log2(resident / share), 0.0, 1.0);
  return 1.0 + kMiss * ramp;
}

TileGeometry tile_geometry(const Kernel& k, const GpuSpec& gpu, const Tile& tile) {
  TileGeometry g;
  const double sms = gpu.sms;
  const double e = dtype_bytes(k.dtype);
  const double peak = (is_gemm(k.op) ? gpu.matmul_peak(k.dtype) : gpu.fp32_peak).per_second();
  const double bw = gpu.memory_bandwidth.bytes_per_second();
  if (is_gemm(k.op)) {
    const double rows = k.op == KernelOp::Linear ? static_cast<double>(k.b) * k.m : static_cast<double>(k.m);
    const double batch = k.op == KernelOp::Linear ? 1.0 : static_cast<double>(k.b);
    const double n = static_cast<double>(k.n);
    // Split-K cuts the reduction into `split` slices, each its own tile.
    const double split = std::max(1, tile.split);
    const double depth = std::ceil(static_cast<double>(k.k) / split);
    g.tiles = batch * std::ceil(n / tile.a) * std::ceil(rows / tile.b) * split;
    const double ta = std::min<double>(tile.a, n);
    const double tb = std::min<double>(tile.b, rows);
    g.tile_flops = 2.0 * ta * tb * depth;
    g.tile_bytes = e * (ta * depth + tb * depth + ta * tb);
    g.tile_waste = (n / (std::ceil(n / tile.a) * tile.a)) * (rows / (std::ceil(rows / tile.b) * tile.b));
  } else {
    const double numel = static_cast<double>(k.b) * static_cast<double>(k.h);
    const double ept = std::max(1.0, tile.elements);
    g.tiles = std::max(1.0, std::ceil(numel / ept));
    g.tile_flops = k.flops().count() / g.tiles;
    g.tile_bytes = k.bytes().as_double() / g.tiles * softmax_reread_factor(k, gpu, tile);
  }
  g.waves = std::ceil(g.tiles / sms);
  g.fill = g.tiles / (g.waves * sms);
  g.total_bytes = k.bytes().as_double();
  // DRAM traffic of a GEMM tile: the tiles of one wave run side by side and
  // share their operand panels through the L2 (cuBLAS rasterizes them into
  // blocks), so a wave of r x c output tiles reads r A-panels and c
  // B-panels once: per tile depth * (tb / c + ta / r) elements plus its
  // output, against depth * (ta + tb) + ta * tb for a tile alone. r and c
  // are the squarest block of the concurrent tiles (SMs / split-K slices)
  // that the tile grid allows. Vector ops read their own bytes.
  double dram_bytes = g.tile_bytes;
  if (is_gemm(k.op)) {
    const double rows = k.op == KernelOp::Linear ? static_cast<double>(k.b) * k.m : static_cast<double>(k.m);
    const double split = std::max(1, tile.split);
    const double depth = std::ceil(static_cast<double>(k.k) / split);
    const double grid_r = std::ceil(rows / tile.b);
    const double grid_c = std::ceil(static_cast<double>(k.n) / tile.a);
    const double conc = std::clamp(std::floor(sms / split), 1.0, grid_r * grid_c);
    double r = std::clamp(std::sqrt(conc), 1.0, grid_r);
    const double c = std::clamp(conc / r, 1.0, grid_c);
    r = std::clamp(conc / c, 1.0, grid_r);
    const double ta = std::min<double>(tile.a, static_cast<double>(k.n));
    const double tb = std::min<double>(tile.b, rows);
    dram_bytes = e * (depth * (tb / c + ta / r) + ta * tb);
  }
  g.tile_bound_s = std::max(g.tile_flops / (peak / sms), dram_bytes / (bw / sms));
  return g;
}

double wave_roofline_s(const Kernel& k, const GpuSpec& gpu, const TileGeometry& g) {
  const double peak = (is_gemm(k.op) ? gpu.matmul_peak(k.dtype) : gpu.fp32_peak).per_second();
  // Vector ops: tiles * tile bytes includes the softmax re-read traffic.
  const double bytes = is_gemm(k.op) ? g.total_bytes : g.tiles * g.tile_bytes;
  return std::max(g.waves * g.tile_flops / (peak / gpu.sms), bytes / gpu.memory_bandwidth.bytes_per_second());
}

Eigen::VectorXd tile_features(const Kernel& k, const GpuSpec& gpu, const Tile& tile, const TileGeometry& g) {
  // Only per-tile and per-GPU quantities (and bounded fractions): the problem
  // size enters the latency through the waves, so shapes far beyond the
  // training shapes map into the trained feature range.
  Eigen::VectorXd f = Eigen::VectorXd::Zero(kTileFeatures);
  const double sms = gpu.sms;
  const double peak = (is_gemm(k.op) ? gpu.matmul_peak(k.dtype) : gpu.fp32_peak).per_second();
  const double bw = gpu.memory_bandwidth.bytes_per_second();
  const double l2 = gpu.l2_cache.as_double();
  f(0) = safe_log(g.tile_flops / (peak / sms) * 1e6);
  f(1) = safe_log(g.tile_bytes / (bw / sms) * 1e6);
  f(2) = safe_log((g.tile_flops / std::max(g.tile_bytes, 1.0)) / (peak / bw));
  f(3) = safe_log(sms);
  f(4) = safe_log(peak * 1e-12);
  f(5) = safe_log(bw * 1e-9);
  f(6) = safe_log(l2 * 1e-6);
  f(7) = g.fill;
  // Working set of one full wave against the L2 (clamped to the training range).
  f(8) = safe_log(std::min(g.tiles, sms) * g.tile_bytes / l2);
  f(9) = safe_log(g.total_bytes / l2);
  if (is_gemm(k.op)) {
    f(10) = safe_log(static_cast<double>(k.k));
    f(11) = safe_log(tile.a);
    f(12) = safe_log(tile.b);
    f(13) = g.tile_waste;
    f(14) = pow2_factor(k.k);
    f(15) = pow2_factor(k.n);
  } else {
    f(10) = safe_log(static_cast<double>(k.h));
    f(11) = safe_log(tile.elements);
    f(12) = safe_log(tile.elements / static_cast<double>(k.h));
    f(13) = softmax_thread_fill(k);
    f(14) = pow2_factor(k.h);
  }
  // Size-dependent features, clamped to the training range by the MLP: they
  // let it fit the library's size-dependent kernel variants inside the
  // trained range; beyond it the waves carry the scaling.
  f(16) = safe_log(g.waves);
  f(17) = safe_log(g.tiles);
  if (is_gemm(k.op)) {
    const bool linear = k.op == KernelOp::Linear;
    f(18) = safe_log(linear ? static_cast<double>(k.b) * k.m : static_cast<double>(k.m));
    f(19) = safe_log(static_cast<double>(k.n));
    f(20) = safe_log(linear ? 1.0 : static_cast<double>(k.b));
    f(21) = safe_log(g.tiles / (linear ? 1.0 : static_cast<double>(k.b)));
  } else {
    f(18) = safe_log(static_cast<double>(k.b));
  }
  if (const int i = elementwise_index(k.op); i >= 0) f(22 + i) = 1.0;
  return f;
}

// ---------------------------------------------------------------- tile table

TileTable TileTable::learn(const MeasurementSet& data) {
  TileTable t;
  for (const auto& g : data.gpus) {
    t.gpus_.push_back({underscored(g.name), static_cast<double>(g.sms), g.fp32_peak.per_second(),
                       g.memory_bandwidth.bytes_per_second(), g.l2_cache.as_double()});
  }
  std::map<std::array<int, 5>, std::map<std::pair<int, int>, int>> gemm_counts;
  std::map<std::array<int, 5>, std::map<std::pair<int, int>, std::map<int, int>>> split_counts;
  std::map<std::array<int, 4>, std::vector<double>> vec_values;
  for (const auto& m : data.rows) {
    const auto cls = kernel_class(m.kernel.op);
    if (!cls) continue;
    const auto& k = m.kernel;
    if (is_gemm(k.op)) {
      if (m.tile_a <= 0 || m.tile_b <= 0) continue;
      const double rows = k.op == KernelOp::Linear ? static_cast<double>(k.b) * k.m : static_cast<double>(k.m);
      const std::array<int, 5> key{m.gpu, static_cast<int>(*cls), log2_bucket(rows, 1),
                                   log2_bucket(static_cast<double>(k.n), 1),
                                   log2_bucket(static_cast<double>(k.k), 0.5)};
      ++gemm_counts[key][{m.tile_a, m.tile_b}];
      ++split_counts[key][{m.tile_a, m.tile_b}][m.split];
    } else {
      if (m.elements_per_block <= 0) continue;
      // Row ops: PyTorch picks the kernel (rows per block) by the row length
      // alone, so key by the exact H; others by log2 buckets of H and size.
      const std::array<int, 4> key =
          row_op(k.op) ? std::array<int, 4>{static_cast<int>(*cls), 0, static_cast<int>(k.h), 0}
                       : std::array<int, 4>{static_cast<int>(*cls), std::max(0, elementwise_index(k.op)),
                                            log2_bucket(static_cast<double>(k.h), 1),
                                            log2_bucket(static_cast<double>(k.b) * static_cast<double>(k.h), 1)};
      // Row ops: rows per block (a block never splits a row); others: elements.
      vec_values[key].push_back(row_op(k.op) ? std::max(1.0, std::round(m.elements_per_block / k.h))
                                             : m.elements_per_block);
    }
  }
  for (const auto& [key, counts] : gemm_counts) {
    std::pair<int, int> best{128, 128};
    int best_n = -1;
    int total = 0;
    for (const auto& [tile, n] : counts) {
      total += n;
      if (n > best_n) {
        best = tile;
        best_n = n;
      }
    }
    // The split-K factor the library most often paired with that tile here.
    int split = 1;
    int split_n = -1;
    for (const auto& [s, n] : split_counts[key][best]) {
      if (n > split_n) {
        split = s;
        split_n = n;
      }
    }
    t.gemm_.push_back({key[0], key[1], key[2], key[3], key[4], best.first, best.second, total, split});
  }
  for (auto& [key, values] : vec_values) {
    std::sort(values.begin(), values.end());
    t.vector_.push_back({key[0], key[1], key[2], key[3], values[values.size() / 2]});
  }
  t.index();
  return t;
}

void TileTable::index() {
  gemm_groups_.assign(gpus_.size() * kNumKernelClasses, {});
  for (const auto& e : gemm_) {
    if (e.gpu >= 0 && e.gpu < static_cast<int>(gpus_.size()) && e.cls >= 0 && e.cls < kNumKernelClasses) {
      gemm_groups_[flat_index(e.gpu, kNumKernelClasses, e.cls)].push_back(e);
    }
  }
  vector_by_class_.assign(kNumKernelClasses, {});
  elementwise_by_op_.assign(kNumElementwiseOps, {});
  for (const auto& e : vector_) {
    if (e.cls < 0 || e.cls >= kNumKernelClasses) continue;
    vector_by_class_[static_cast<std::size_t>(e.cls)].push_back(e);
    if (e.cls == static_cast<int>(KernelClass::Elementwise) && e.op >= 0 && e.op < kNumElementwiseOps) {
      elementwise_by_op_[static_cast<std::size_t>(e.op)].push_back(e);
    }
  }
  // The largest GEMM tile, by area, then by count.
  Tile best;
  double best_area = -1;
  int best_count = -1;
  std::map<std::pair<int, int>, int> counts;
  for (const auto& e : gemm_) counts[{e.a, e.b}] += e.count;
  for (const auto& [ab, n] : counts) {
    const double area = static_cast<double>(ab.first) * ab.second;
    if (area > best_area || (area == best_area && n > best_count)) {
      best_area = area;
      best_count = n;
      best.a = ab.first;
      best.b = ab.second;
    }
  }
  largest_gemm_ = best;
}

std::vector<std::string> TileTable::gpu_names() const {
  std::vector<std::string> names;
  for (const auto& g : gpus_) names.push_back(g.name);
  return names;
}

int TileTable::nearest_gpu(const GpuSpec& gpu) const {
  int best = -1;
  double best_d = 1e300;
  const std::string name = underscored(gpu.name);
  for (std::size_t i = 0; i < gpus_.size(); ++i) {
    const auto& g = gpus_[i];
    if (g.name == name) return static_cast<int>(i);
    auto sq = [](double a, double b) { return std::pow(std::log(a / b), 2); };
    const double d = sq(g.sms, gpu.sms) + sq(g.peak, gpu.fp32_peak.per_second()) +
                     sq(g.bw, gpu.memory_bandwidth.bytes_per_second()) + sq(g.l2, gpu.l2_cache.as_double());
    if (d < best_d) {
      best_d = d;
      best = static_cast<int>(i);
    }
  }
  return best;
}

Tile TileTable::lookup(const Kernel& k, const GpuSpec& gpu) const { return lookup(k, nearest_gpu(gpu)); }

Tile TileTable::lookup(const Kernel& k, int g) const {
  Tile tile;
  const auto cls = kernel_class(k.op);
  if (!cls) return tile;
  if (is_gemm(k.op)) {
    if (g < 0 || g >= static_cast<int>(gpus_.size())) return tile;
    const double rows = k.op == KernelOp::Linear ? static_cast<double>(k.b) * k.m : static_cast<double>(k.m);
    const int mb = log2_bucket(rows, 1);
    const int nb = log2_bucket(static_cast<double>(k.n), 1);
    const int kb = log2_bucket(static_cast<double>(k.k), 0.5);
    int best_d = 1 << 30;
    int best_count = -1;
    for (const auto& e : gemm_groups_[flat_index(g, kNumKernelClasses, static_cast<int>(*cls))]) {
      const int d = std::abs(e.mb - mb) + std::abs(e.nb - nb) + std::abs(e.kb - kb);
      if (d < best_d || (d == best_d && e.count > best_count)) {
        best_d = d;
        best_count = e.count;
        tile.a = e.a;
        tile.b = e.b;
        tile.split = e.split;
      }
    }
    return tile;
  }
  if (row_op(k.op)) {
    // The longest trained row length <= H (kernel variants switch at
    // thresholds such as H <= 1024), else the shortest one above.
    double below = -1, above = 1e300, e_below = 1, e_above = 1;
    for (const auto& e : vector_by_class_[static_cast<std::size_t>(*cls)]) {
      const double h = e.hb;
      if (h <= static_cast<double>(k.h) && h > below) {
        below = h;
        e_below = e.elements;
      } else if (h > static_cast<double>(k.h) && h < above) {
        above = h;
        e_above = e.elements;
      }
    }
    tile.elements = (below > 0 ? e_below : e_above) * static_cast<double>(k.h);
    return tile;
  }
  const int op = std::max(0, elementwise_index(k.op));
  const int hb = log2_bucket(static_cast<double>(k.h), 1);
  const int eb = log2_bucket(static_cast<double>(k.b) * static_cast<double>(k.h), 1);
  int best_d = 1 << 30;
  for (const auto& e : elementwise_by_op_[static_cast<std::size_t>(op)]) {
    const int d = 2 * std::abs(e.hb - hb) + std::abs(e.eb - eb);
    if (d < best_d) {
      best_d = d;
      tile.elements = e.elements;
    }
  }
  return tile;
}

void TileTable::write(std::ostream& out) const {
  out << "gpus " << gpus_.size() << '\n';
  for (const auto& g : gpus_) out << fmt::format("{} {} {:.8g} {:.8g} {:.8g}\n", g.name, g.sms, g.peak, g.bw, g.l2);
  out << "gemm_tiles " << gemm_.size() << '\n';
  for (const auto& e : gemm_) {
    out << fmt::format("{} {} {} {} {} {} {} {} {}\n", e.gpu, e.cls, e.mb, e.nb, e.kb, e.a, e.b, e.count, e.split);
  }
  out << "vector_tiles " << vector_.size() << '\n';
  for (const auto& e : vector_) out << fmt::format("{} {} {} {} {:.6g}\n", e.cls, e.op, e.hb, e.eb, e.elements);
}

TileTable TileTable::read(std::istream& in, const std::string& source) {
  auto fail = [&](const char* what) {
    throw InputError(fmt::format("{}: malformed weights ({})", source, what));
  };
  TileTable t;
  std::string tag;
  std::size_t n = 0;
  if (!(in >> tag >> n) || tag != "gpus" || n > 1000) fail("gpus");
  t.gpus_.resize(n);
  for (auto& g : t.gpus_) {
    if (!(in >> g.name >> g.sms >> g.peak >> g.bw >> g.l2)) fail("gpu");
  }
  if (!(in >> tag >> n) || tag != "gemm_tiles" || n > 10'000'000) fail("gemm_tiles");
  t.gemm_.resize(n);
  for (auto& e : t.gemm_) {
    if (!(in >> e.gpu >> e.cls >> e.mb >> e.nb >> e.kb >> e.a >> e.b >> e.count >> e.split)) fail("gemm tile");
    if (e.a <= 0 || e.b <= 0 || e.split <= 0) fail("gemm tile size");
  }
  if (!(in >> tag >> n) || tag != "vector_tiles" || n > 10'000'000) fail("vector_tiles");
  t.vector_.resize(n);
  for (auto& e : t.vector_) {
    if (!(in >> e.cls >> e.op >> e.hb >> e.eb >> e.elements)) fail("vector tile");
  }
  t.index();
  return t;
}

// ---------------------------------------------------------------- model

std::string TileMlpModel::serialize() const {
  std::ostringstream out;
  out << kMagic << ' ' << kVersion << " tile-mlp\n";
  tiles.write(out);
  out << "floors_ms";
  for (double f : floor_ms) out << fmt::format(" {:.6g}", f);
  out << "\nfloor_blend";
  for (double p : floor_blend) out << fmt::format(" {:.6g}", p);
  out << '\n';
  for (int c = 0; c < kNumKernelClasses; ++c) {
    out << "class " << to_string(static_cast<KernelClass>(c)) << (nets[c].empty() ? " untrained\n" : " trained\n");
    if (!nets[c].empty()) nets[c].write(out);
  }
  return out.str();
}

TileMlpModel TileMlpModel::parse(std::string_view text, const std::string& source) {
  std::istringstream in{std::string(text)};
  std::string magic, kind;
  int version = 0;
  if (!(in >> magic >> version >> kind) || magic != kMagic) {
    throw InputError(fmt::format("{}: not a Tessera weights file (expected header '{} {} tile-mlp')", source,
                                 kMagic, kVersion));
  }
  if (version != kVersion || kind != "tile-mlp") {
    throw InputError(fmt::format("{}: weights version {} kind '{}' (this build reads version {} tile-mlp)",
                                 source, version, kind, kVersion));
  }
  TileMlpModel m;
  m.tiles = TileTable::read(in, source);
  std::string tag;
  if (!(in >> tag) || tag != "floors_ms") throw InputError(fmt::format("{}: malformed weights (floors_ms)", source));
  for (double& f : m.floor_ms) {
    if (!(in >> f) || !(f >= 0.0)) throw InputError(fmt::format("{}: malformed weights (floors_ms)", source));
  }
  if (!(in >> tag) || tag != "floor_blend") {
    throw InputError(fmt::format("{}: malformed weights (floor_blend)", source));
  }
  for (double& p : m.floor_blend) {
    if (!(in >> p) || !(p >= 0.0)) throw InputError(fmt::format("{}: malformed weights (floor_blend)", source));
  }
  for (int c = 0; c < kNumKernelClasses; ++c) {
    std::string tag, name, state;
    if (!(in >> tag >> name >> state) || tag != "class" || name != to_string(static_cast<KernelClass>(c))) {
      throw InputError(fmt::format("{}: malformed weights (class {})", source, c));
    }
    if (state == "trained") {
      m.nets[c] = Mlp::read(in, source);
      if (m.nets[c].inputs() != kTileFeatures || m.nets[c].outputs() != 2) {
        throw InputError(fmt::format("{}: weights for class {} have the wrong shape", source, name));
      }
    }
  }
  return m;
}

double TileMlpModel::utilization(KernelClass c, const Eigen::VectorXd& features, double waves) const {
  const Eigen::VectorXd o = nets[static_cast<int>(c)].forward(features);
  const double alpha = sigmoid(o(0));
  const double s1 = sigmoid(o(1));
  return std::max(alpha * (1.0 - s1 / waves), 1e-9);
}

// ---------------------------------------------------------------- training

TileMlpModel train_tile_mlp(const MeasurementSet& data, const TileMlpTrainOptions& opt, std::ostream* log) {
  TileMlpModel model;
  model.tiles = TileTable::learn(data);
  // Launch floors: the small shapes of every (GPU, op) bottom out at a fixed
  // latency (PyTorch dispatch and launch, measured through the host). Per
  // (GPU, op): the 3rd percentile of its latencies; per class: the median.
  std::map<std::pair<int, int>, std::vector<double>> lat_by_gpu_op;
  for (const auto& m : data.rows) lat_by_gpu_op[{m.gpu, static_cast<int>(m.kernel.op)}].push_back(m.latency_ms);
  std::map<std::pair<int, int>, double> floor_of;
  std::array<std::vector<double>, kNumKernelClasses> class_floors;
  for (auto& [key, v] : lat_by_gpu_op) {
    std::sort(v.begin(), v.end());
    const double f = v[v.size() * 3 / 100];
    floor_of[key] = f;
    if (const auto cls = kernel_class(static_cast<KernelOp>(key.second))) {
      class_floors[static_cast<int>(*cls)].push_back(f);
    }
  }
  for (int c = 0; c < kNumKernelClasses; ++c) {
    auto& v = class_floors[c];
    std::sort(v.begin(), v.end());
    const std::size_t h = v.size() / 2;
    model.floor_ms[c] = v.empty() ? 0.0 : v.size() % 2 == 1 ? v[h] : 0.5 * (v[h - 1] + v[h]);
  }
  model.floor_blend = opt.floor_blend;
  std::array<std::string, kNumKernelClasses> logs;
  auto train_class = [&](int c) {
    std::vector<int> rows;
    for (std::size_t i = 0; i < data.rows.size(); ++i) {
      const auto& m = data.rows[i];
      const auto cls = kernel_class(m.kernel.op);
      if (!cls || static_cast<int>(*cls) != c) continue;
      if (is_gemm(m.kernel.op) ? m.tile_a <= 0 : m.elements_per_block <= 0) continue;
      rows.push_back(static_cast<int>(i));
    }
    if (rows.empty()) {
      logs[c] = fmt::format("{}: no training rows, left untrained\n", to_string(static_cast<KernelClass>(c)));
      return;
    }
    Rng rng(opt.mlp.seed + 1000003ULL * static_cast<std::uint64_t>(c + 1));
    for (std::size_t i = rows.size() - 1; i > 0; --i) {
      std::swap(rows[i], rows[rng.next() % (i + 1)]);
    }
    if (static_cast<int>(rows.size()) > opt.max_rows_per_class) rows.resize(opt.max_rows_per_class);
    std::sort(rows.begin(), rows.end());
    const int n = static_cast<int>(rows.size());
    Eigen::MatrixXd x(kTileFeatures, n);
    std::vector<double> log_base(n), log_y(n), waves(n), log_floor(n);
    for (int i = 0; i < n; ++i) {
      const auto& m = data.rows[rows[i]];
      const GpuSpec& gpu = data.gpus[m.gpu];
      Tile tile;
      tile.a = m.tile_a;
      tile.b = m.tile_b;
      tile.elements = m.elements_per_block;
      const TileGeometry g = tile_geometry(m.kernel, gpu, tile);
      x.col(i) = tile_features(m.kernel, gpu, tile, g);
      log_base[i] = std::log(g.waves * g.tile_bound_s);
      log_y[i] = std::log(m.latency_ms * 1e-3);
      log_floor[i] = std::log(floor_of.at({m.gpu, static_cast<int>(m.kernel.op)}) * 1e-3);
      waves[i] = g.waves;
    }
    std::vector<int> sizes{kTileFeatures};
    sizes.insert(sizes.end(), opt.hidden.begin(), opt.hidden.end());
    sizes.push_back(2);
    Rng init(opt.mlp.seed + 17ULL * static_cast<std::uint64_t>(c + 1));
    Mlp net(sizes, init);
    // The measurement is the launch floor of its own (GPU, op) blended with
    // the kernel time (launch_floor_blend); with a hard maximum (blend 0) a
    // row below the floor says nothing about the kernel (zero gradient).
    const double blend = opt.floor_blend[c];
    LossFn loss = [&](const Eigen::MatrixXd& out, const std::vector<int>& idx, Eigen::MatrixXd& grad) {
      double total = 0.0;
      for (std::size_t j = 0; j < idx.size(); ++j) {
        const int i = idx[j];
        const double alpha = sigmoid(out(0, j));
        const double s1 = sigmoid(out(1, j));
        const double keep = std::max(1.0 - s1 / waves[i], 1e-12);
        const double log_kernel = log_base[i] - std::log(alpha) - std::log(keep);
        double dk = 0.0;
        const double log_pred = blend_log(log_floor[i], log_kernel, blend, &dk);
        const double r = log_pred - log_y[i];
        total += r * r;
        grad(0, j) = 2.0 * r * dk * -(1.0 - alpha);
        grad(1, j) = 2.0 * r * dk * (s1 * (1.0 - s1) / waves[i]) / keep;
      }
      return total;
    };
    TrainOptions train_opt = opt.mlp;
    train_opt.weight_decay = opt.weight_decay[c];
    train_mlp(net, x, loss, train_opt);
    // Training-set MAPE for the log.
    double ape = 0.0;
    for (int i = 0; i < n; ++i) {
      const Eigen::VectorXd o = net.forward(x.col(i));
      const double alpha = sigmoid(o(0));
      const double util = std::max(alpha * (1.0 - sigmoid(o(1)) / waves[i]), 1e-9);
      ape += std::abs(std::exp(blend_log(log_floor[i], log_base[i] - std::log(util), blend, nullptr) - log_y[i]) -
                      1.0);
    }
    logs[c] = fmt::format("{}: {} rows, training MAPE {:.2f}% (floor {:.4f} ms)\n",
                          to_string(static_cast<KernelClass>(c)), n, 100.0 * ape / n, model.floor_ms[c]);
    model.nets[c] = std::move(net);
  };
  // Classes are independent: train them on up to two threads (each result is
  // deterministic regardless of scheduling).
  const unsigned workers = std::max(1U, std::min(2U, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  std::mutex mu;
  int next = 0;
  for (unsigned w = 0; w < workers; ++w) {
    pool.emplace_back([&]() {
      while (true) {
        int c = 0;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (next >= kNumKernelClasses) return;
          c = next++;
        }
        train_class(c);
      }
    });
  }
  for (auto& t : pool) t.join();
  if (log != nullptr) {
    for (const auto& l : logs) *log << l;
  }
  return model;
}

// ---------------------------------------------------------------- prediction

Time memory_bound_time(const Kernel& k, const GpuSpec& gpu) {
  return transmit_time(k.bytes(), gpu.memory_bandwidth);
}

ShapeCache::Key ShapeCache::key(const Kernel& k) {
  return {k.b, k.m, k.n, k.k, k.h, static_cast<int>(k.op), static_cast<int>(k.dtype)};
}

std::size_t ShapeCache::Hash::operator()(const Key& k) const {
  std::uint64_t h = 1469598103934665603ULL;
  auto mix = [&](std::uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
  };
  mix(static_cast<std::uint64_t>(k.b));
  mix(static_cast<std::uint64_t>(k.m));
  mix(static_cast<std::uint64_t>(k.n));
  mix(static_cast<std::uint64_t>(k.k));
  mix(static_cast<std::uint64_t>(k.h));
  mix(static_cast<std::uint64_t>(k.op) << 8 | static_cast<std::uint64_t>(k.dtype));
  return static_cast<std::size_t>(h);
}

std::optional<Time> ShapeCache::find(const Kernel& k) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key(k));
  if (it == map_.end()) return std::nullopt;
  return it->second;
}

void ShapeCache::put(const Kernel& k, Time t) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (map_.size() > (1U << 20)) map_.clear();
  map_.emplace(key(k), t);
}

TileMlpPredictor::TileMlpPredictor(GpuSpec gpu, std::shared_ptr<const TileMlpModel> model,
                                   std::shared_ptr<const TensorCoreModel> tensor_core,
                                   std::shared_ptr<const TileMlpModel> untrained_from)
    : gpu_(std::move(gpu)), model_(std::move(model)), tensor_core_(std::move(tensor_core)), gpu_index_(-1) {
  gpu_.validate();
  if (!model_) throw InputError("tile-mlp predictor: no model");
  if (untrained_from &&
      std::any_of(model_->nets.begin(), model_->nets.end(), [](const Mlp& n) { return n.empty(); }))
    untrained_ = std::make_unique<TileMlpPredictor>(gpu_, std::move(untrained_from), tensor_core_);
  tensor_tile_ = model_->tiles.largest_gemm_tile();
  gpu_index_ = model_->tiles.nearest_gpu(gpu_);
}

double TileMlpPredictor::fp32_kernel_ms(KernelClass c, const Kernel& fp32) const {
  const Tile tile = model_->tiles.lookup(fp32, gpu_index_);
  const TileGeometry g = tile_geometry(fp32, gpu_, tile);
  const double util = model_->utilization(c, tile_features(fp32, gpu_, tile, g), g.waves);
  return g.waves * g.tile_bound_s / util * 1e3;
}

double TileMlpPredictor::learned_kernel_ms(const Kernel& kernel) const {
  const auto cls = kernel_class(kernel.op);
  if (cls && untrained_ && model_->nets[static_cast<int>(*cls)].empty())
    return untrained_->learned_kernel_ms(kernel);
  if (!cls || model_->nets[static_cast<int>(*cls)].empty()) return memory_bound_time(kernel, gpu_).ms();
  if (kernel.dtype == DType::FP32) return fp32_kernel_ms(*cls, kernel);
  // TF32 vector ops are FP32 ops.
  if (kernel.dtype == DType::TF32 && !is_gemm(kernel.op)) {
    Kernel fp32 = kernel;
    fp32.dtype = DType::FP32;
    return fp32_kernel_ms(*cls, fp32);
  }
  // 16-bit without measurements to learn from (an explicit assumption, see
  // docs/node_model.md): the FP32 twin's achieved fraction of its roofline
  // carries over to the 16-bit roofline. GEMMs (when no tensor-core model is
  // loaded) run on tensor cores with the table's largest tile (128x128),
  // vector ops with the FP32 blocks and the dtype's bytes.
  Kernel twin = kernel;
  twin.dtype = DType::FP32;
  const Tile tile32 = model_->tiles.lookup(twin, gpu_index_);
  const TileGeometry g32 = tile_geometry(twin, gpu_, tile32);
  const Tile tile16 = is_gemm(kernel.op) ? tensor_tile_ : tile32;
  const TileGeometry g16 = tile_geometry(kernel, gpu_, tile16);
  const double ratio = wave_roofline_s(kernel, gpu_, g16) / wave_roofline_s(twin, gpu_, g32);
  return fp32_kernel_ms(*cls, twin) * ratio;
}

double TileMlpPredictor::predict_ms_uncached(const Kernel& kernel) const {
  const auto cls = kernel_class(kernel.op);
  if (!cls && tensor_core_) {
    // A copy has no learned class and no fitted eager floor: at least the
    // GPU's per-kernel floor, as its GPU time (predict_device) has.
    return std::max(tensor_core_->floor_ms, memory_bound_time(kernel, gpu_).ms());
  }
  if (cls && untrained_ && model_->nets[static_cast<int>(*cls)].empty())
    return untrained_->predict_ms_uncached(kernel);
  if (!cls || model_->nets[static_cast<int>(*cls)].empty()) {
    return memory_bound_time(kernel, gpu_).ms();
  }
  // The eager launch floor, blended with the kernel time as measured (v7).
  const double floor_ms = model_->floor_ms[static_cast<int>(*cls)];
  const double blend = model_->floor_blend[static_cast<int>(*cls)];
  if (tensor_core_ && is_tensor_core_gemm(kernel)) {
    return launch_floor_blend(floor_ms, tensor_core_->predict_ms(kernel, gpu_), blend);
  }
  return launch_floor_blend(floor_ms, learned_kernel_ms(kernel), blend);
}

double TileMlpPredictor::predict_device_ms_uncached(const Kernel& kernel) const {
  if (!tensor_core_) return predict_ms_uncached(kernel);
  if (is_tensor_core_gemm(kernel)) return tensor_core_->predict_ms(kernel, gpu_);
  return std::max(tensor_core_->floor_ms, learned_kernel_ms(kernel));
}

Time TileMlpPredictor::predict(const Kernel& kernel) const {
  if (auto t = cache_.find(kernel)) return *t;
  kernel.validate();
  const Time t = Time::from_seconds(predict_ms_uncached(kernel) * 1e-3);
  cache_.put(kernel, t);
  return t;
}

Time TileMlpPredictor::predict_part(const Kernel& kernel) const {
  if (auto t = part_cache_.find(kernel)) return *t;
  kernel.validate();
  const double ms = tensor_core_ && is_tensor_core_gemm(kernel) ? tensor_core_->choose(kernel, gpu_).kernel_ms
                                                                : learned_kernel_ms(kernel);
  const Time t = Time::from_seconds(ms * 1e-3);
  part_cache_.put(kernel, t);
  return t;
}

Time TileMlpPredictor::predict_device(const Kernel& kernel) const {
  if (auto t = device_cache_.find(kernel)) return *t;
  kernel.validate();
  const Time t = Time::from_seconds(predict_device_ms_uncached(kernel) * 1e-3);
  device_cache_.put(kernel, t);
  return t;
}

}  // namespace tessera::node_model
