#include "tessera/node_model/dataset.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <tuple>

#include "tessera/error.hpp"
#include "tessera/names.hpp"
#include "tessera/node_model/csv.hpp"

namespace tessera::node_model {

int MeasurementSet::add_gpu(const GpuSpec& g) {
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i].name == g.name) return static_cast<int>(i);
  }
  gpus.push_back(g);
  return static_cast<int>(gpus.size() - 1);
}

std::pair<int, int> gemm_tile_from_name(const std::string& kernel_name) {
  static const std::regex kTile("([0-9]+)x([0-9]+)");
  std::smatch m;
  if (!std::regex_search(kernel_name, m, kTile)) return {0, 0};
  return {std::stoi(m[1].str()), std::stoi(m[2].str())};
}

void read_measurements(const std::string& csv_path, const DeviceCatalog& catalog, MeasurementSet& into) {
  const CsvTable t = read_csv(csv_path);
  const std::size_t dev_col = t.require_column("Device");
  const std::size_t lat_col = t.require_column("Latency");
  // A header with no rows under it would leave its op or GPU out of the
  // training or the table without a word (helper 143).
  if (t.rows.empty()) {
    throw InputError(fmt::format("{}: no kernels (a header line, then one kernel per row)", csv_path));
  }
  const int name_col = t.column("Kernel Name");
  const int gx = t.column("Grid x");
  const int gy = t.column("Grid y");
  const int gz = t.column("Grid z");
  const int dtype_col = t.column("dtype");
  std::vector<std::pair<std::string, int>> gpu_of;  // small cache
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    const std::string& dev = t.rows[r][dev_col];
    int gpu = -1;
    for (const auto& [n, i] : gpu_of) {
      if (n == dev) gpu = i;
    }
    if (gpu < 0) {
      const GpuSpec* g = catalog.find(dev);
      if (g == nullptr) {
        // A row of a GPU the device configs do not describe cannot be
        // featurized: say so rather than train on fewer rows than given.
        std::vector<std::string> known;
        for (const GpuSpec& c : catalog.all()) known.push_back(c.name);
        std::string list;
        for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
        throw InputError(fmt::format("{}: {}, column 'Device': no device config describes '{}'{} (known: {})",
                                     csv_path, t.row_name(r), dev, did_you_mean(dev, known), list));
      }
      gpu = into.add_gpu(*g);
      gpu_of.emplace_back(dev, gpu);
    }
    // The tile-mlp learns FP32 kernels: a 16-bit row read as FP32 would be
    // trained on, or validated, at twice its bytes and the CUDA cores' peak.
    if (const DType d = row_dtype(t, r, dtype_col, DType::FP32); d != DType::FP32) {
      throw InputError(fmt::format(
          "{}: {}, column 'dtype': '{}': a measurement folder with device configs holds FP32 kernels "
          "(the tile-mlp's); check {} kernels with `validate kernels --data FILE.csv --device GPU`",
          csv_path, t.row_name(r), to_string(d), to_string(d)));
    }
    Measurement m;
    m.kernel = kernel_from_row(t, r);
    m.gpu = gpu;
    m.latency_ms = row_latency_ms(t, r, lat_col);
    if (is_gemm(m.kernel.op)) {
      if (name_col >= 0) std::tie(m.tile_a, m.tile_b) = gemm_tile_from_name(t.rows[r][name_col]);
      // A linear's grid z is cuBLAS's split-K factor (bmm's is the batch).
      if (m.kernel.op == KernelOp::Linear && gz >= 0) {
        m.split = std::max(1, static_cast<int>(t.number(r, gz)));
      }
    } else if (gx >= 0 && gy >= 0 && gz >= 0) {
      const double blocks = t.number(r, gx) * t.number(r, gy) * t.number(r, gz);
      if (blocks > 0) {
        m.elements_per_block = static_cast<double>(m.kernel.b) * static_cast<double>(m.kernel.h) / blocks;
      }
    }
    into.rows.push_back(m);
  }
}

MeasurementSet read_measurement_dir(const std::string& dir, const DeviceCatalog& catalog) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw InputError(fmt::format("{}: not a directory", dir));
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".csv") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  MeasurementSet set;
  for (const auto& f : files) read_measurements(f.string(), catalog, set);
  // The combined files repeat rows of the per-op files (test/vec.csv is
  // elem.csv + ln.csv + softmax.csv): keep the first copy of each measurement.
  using Key = std::tuple<int, int, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, double>;
  std::set<Key> seen;
  std::vector<Measurement> unique;
  unique.reserve(set.rows.size());
  for (const auto& m : set.rows) {
    const auto& k = m.kernel;
    if (seen.emplace(m.gpu, static_cast<int>(k.op), k.b, k.m, k.n, k.k, k.h, m.latency_ms).second) {
      unique.push_back(m);
    }
  }
  set.rows = std::move(unique);
  return set;
}

DType parse_xla_dtype(std::string_view name) {
  if (name == "bf16xbf16->bf16") return DType::BF16;
  if (name == "f16xf16->f16") return DType::FP16;
  if (name == "f32xf32->f32") return DType::TF32;
  static const std::regex kFp8("f8e(4m3fn|5m2)xf8e(4m3fn|5m2)->(bf16|f16|f32)");
  if (std::regex_match(std::string(name), kFp8)) return DType::FP8;
  throw InputError(fmt::format("unknown XLA dtype '{}' (expected bf16xbf16->bf16, f16xf16->f16, f32xf32->f32 "
                               "or an f8e4m3fn/f8e5m2 pair)",
                               name));
}

bool is_xla_gemm_table(const std::string& csv_path) {
  std::ifstream in(csv_path);
  std::string line;
  // The header is the first line with more than blanks on it, as read_csv
  // skips blank lines (helper 116: a leading blank line made the table a
  // NeuSight directory without device_configs).
  do {
    if (!in || !std::getline(in, line)) return false;
  } while (line.find_first_not_of(" \t\r") == std::string::npos);
  // An `arch` column, which no NeuSight schema has: a table missing one of
  // the other columns is then read as XLA's and its error names the column.
  // The header as read_csv reads it (BOM, quotes, spaces, CR).
  try {
    return parse_csv(line, csv_path).column("arch") >= 0;
  } catch (const InputError&) {
    // A header that does not parse (an unterminated quote, a stray CR) but
    // names `arch`: read as XLA's, whose reader names what is wrong with it
    // (helper 102: such a file was told of a missing device_configs folder).
    return line.find("arch") != std::string::npos;
  }
}

MeasurementSet read_xla_gemm_table(const std::string& csv_path) {
  const CsvTable t = read_csv(csv_path);
  const std::size_t arch_col = t.require_column("arch");
  const std::size_t b_col = t.require_column("b");
  const std::size_t m_col = t.require_column("m");
  const std::size_t n_col = t.require_column("n");
  const std::size_t k_col = t.require_column("k");
  const std::size_t dtype_col = t.require_column("dtype");
  const std::size_t flops_col = t.require_column("flops_per_s");
  const std::size_t lat_col = t.require_column("latency_ms");
  MeasurementSet set;
  const int h100 = set.add_gpu(gpu_preset("H100-SXM"));  // sm_90, the only arch read
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::string>, std::size_t> seen;
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    const std::string& arch = t.rows[r][arch_col];
    if (arch != "sm_90") {
      throw InputError(
          fmt::format("{}: {}, column 'arch': unknown arch '{}' (this reader knows sm_90, the H100 "
                      "SXM)",
                      csv_path, t.row_name(r), arch));
    }
    DType dtype{};
    try {
      dtype = parse_xla_dtype(t.rows[r][dtype_col]);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}, column 'dtype': {}", csv_path, t.row_name(r), e.what()));
    }
    Measurement m;
    m.kernel = Kernel::gemm(KernelOp::Bmm, t.positive_int(r, b_col), t.positive_int(r, m_col),
                            t.positive_int(r, n_col), t.positive_int(r, k_col), dtype);
    const double flops_per_s = t.number(r, flops_col);
    m.latency_ms = t.number(r, lat_col);
    if (!(m.latency_ms > 0)) {
      throw InputError(fmt::format("{}: {}, column 'latency_ms': latency must be positive (got '{}')",
                                   csv_path, t.row_name(r), t.rows[r][lat_col]));
    }
    // The table gives each GEMM's rate beside its time: they must agree (a
    // time in other units, or a dimension typed wrong, does not; helper 87:
    // such rows moved a MAPE from 3% to 16%, or to 192,038%).
    const double implied = m.kernel.flops().count() / (m.latency_ms * 1e-3);
    if (!(std::abs(flops_per_s / implied - 1.0) <= 0.05)) {
      throw InputError(fmt::format(
          "{}: {}, columns 'flops_per_s' and 'latency_ms': {:g} disagrees with 2 x b x m x n x k "
          "/ latency_ms = {:g} (which is wrong: is the latency in milliseconds, and are the dimensions "
          "right?)",
          csv_path, t.row_name(r), flops_per_s, implied));
    }
    // One measurement per GEMM: a repeated row would count twice.
    // (by the table's own dtype: two FP8 operand formats read as one DType)
    const auto key = std::make_tuple(m.kernel.b, m.kernel.m, m.kernel.n, m.kernel.k, t.rows[r][dtype_col]);
    if (const auto [it, fresh] = seen.emplace(key, r + 1); !fresh) {
      throw InputError(fmt::format("{}: {}: the GEMM of row {} again ({} x {} x {} x {}, {})", csv_path,
                                   t.row_name(r), it->second, m.kernel.b, m.kernel.m, m.kernel.n, m.kernel.k,
                                   t.rows[r][dtype_col]));
    }
    m.gpu = h100;
    set.rows.push_back(m);
  }
  if (set.rows.empty()) throw InputError(fmt::format("{}: no measurements", csv_path));
  return set;
}

MeasurementSet read_measured_gemms(const std::vector<std::string>& csv_paths, const GpuSpec& gpu) {
  MeasurementSet set;
  const int g = set.add_gpu(gpu);
  for (const std::string& path : csv_paths) {
    const CsvTable t = read_csv(path);
    const std::size_t op_col = t.require_column("OPName");
    const std::size_t lat_col = t.require_column("Latency");
    const std::size_t dtype_col = t.require_column("dtype");
    check_measured_on(t, t.column("Device"), gpu);
    for (std::size_t r = 0; r < t.rows.size(); ++r) {
      KernelOp op{};
      try {
        op = parse_kernel_op(t.rows[r][op_col]);
      } catch (const InputError& e) {
        throw InputError(fmt::format("{}: {}, column 'OPName': {}", path, t.row_name(r), e.what()));
      }
      if (!is_gemm(op)) continue;
      const DType dtype = row_dtype(t, r, static_cast<int>(dtype_col), DType::FP32);
      if (dtype == DType::FP32) continue;
      Measurement m;
      m.kernel = kernel_from_row(t, r, dtype);
      m.latency_ms = row_latency_ms(t, r, lat_col);
      m.gpu = g;
      set.rows.push_back(m);
    }
  }
  if (set.rows.empty()) {
    throw InputError(fmt::format("{}: no tensor-core GEMMs (bmm or linear rows in tf32, fp16, bf16 or fp8)",
                                 csv_paths.empty() ? std::string("--gemms") : csv_paths.front()));
  }
  return set;
}

void check_measured_on(const CsvTable& t, int device_col, const GpuSpec& gpu) {
  if (device_col < 0) return;
  std::set<std::string, std::less<>> accepted{"", gpu.name};
  for (std::size_t row = 0; row < t.rows.size(); ++row) {
    const std::string& dev = t.rows[row].at(static_cast<std::size_t>(device_col));
    if (accepted.contains(dev)) continue;
    const GpuSpec* preset = find_gpu_preset(dev);
    if (preset != nullptr && preset->name == gpu.name) {
      accepted.insert(dev);
      continue;
    }
    throw InputError(fmt::format(
        "{}: {}, column 'Device': measured on '{}'{}, but --device is {} (give the GPU "
        "the kernels ran on, or its device config JSON)",
        t.path, t.row_name(row), dev, preset ? fmt::format(" (the {} preset)", preset->name) : "", gpu.name));
  }
}

std::string find_device_configs(const std::string& data_dir) {
  namespace fs = std::filesystem;
  fs::path p(data_dir);
  for (int up = 0; up < 4; ++up) {
    if (fs::is_directory(p / "device_configs")) return (p / "device_configs").string();
    if (p.filename() == "device_configs") return p.string();
    if (!p.has_parent_path() || p.parent_path() == p) break;
    p = p.parent_path();
  }
  throw InputError(fmt::format("{}: cannot find the device_configs directory next to the data", data_dir));
}

}  // namespace tessera::node_model
