#pragma once
// Kernel latency measurements in NeuSight's CSV schema, as training and
// validation data for the learned predictors.
#include <string>
#include <vector>

#include "tessera/node_model/csv.hpp"
#include "tessera/node_model/device_config.hpp"
#include "tessera/node_model/kernel.hpp"

namespace tessera::node_model {

struct Measurement {
  Kernel kernel;
  int gpu = 0;               ///< index into MeasurementSet::gpus
  double latency_ms = 0.0;
  int tile_a = 0, tile_b = 0;        ///< GEMM: library tile from the kernel name (0 = unknown)
  int split = 1;                     ///< linear: split-K factor (the grid's z; 1 = none)
  double elements_per_block = 0.0;   ///< vector ops: elements / thread blocks (0 = unknown)
};

struct MeasurementSet {
  std::vector<GpuSpec> gpus;
  std::vector<Measurement> rows;
  /// Index of `g` (by name), appending it when new.
  int add_gpu(const GpuSpec& g);
};

/// "ampere_sgemm_128x64_tn" -> {128, 64}; {0, 0} when the name has no tile.
std::pair<int, int> gemm_tile_from_name(const std::string& kernel_name);

/// Appends the rows of one measurement CSV. Devices are resolved by the
/// `Device` column through `catalog`. A row of a device the catalog does not
/// hold, or with a latency that is not a positive number, is an InputError
/// naming file, row and column.
void read_measurements(const std::string& csv_path, const DeviceCatalog& catalog, MeasurementSet& into);
/// Every *.csv under `dir` (recursively, in sorted order).
MeasurementSet read_measurement_dir(const std::string& dir, const DeviceCatalog& catalog);
/// XLA's GEMM cost-model table (../shared/data/xla/gemm_h100.csv): columns
/// `arch,b,m,n,k,dtype,flops_per_s,latency_ms`, one batched GEMM
/// C[b,m,n] = A[b,m,k] x B[b,k,n] per row, read as
/// Kernel::gemm(Bmm, b, m, n, k, dtype) (n the output width, k the
/// reduction). `arch` sm_90 is the H100 SXM (the table's 805 TFLOP/s BF16
/// exceeds the PCIe card's 756 dense peak), timed with the H100-SXM preset.
/// Throws InputError naming file, row and column for a missing column, a
/// non-numeric cell, a non-positive size or latency, an unknown dtype or
/// arch; nothing is returned then.
MeasurementSet read_xla_gemm_table(const std::string& csv_path);
/// Whether the file's first line is an XLA GEMM table's header: it has an
/// `arch` column (read_xla_gemm_table then names any other one missing).
bool is_xla_gemm_table(const std::string& csv_path);

/// Tensor-core GEMMs measured on one GPU (`gpu`): CSV files in NeuSight's
/// schema (OPName bmm or linear, Latency in ms, B,M,N,K with N the
/// reduction) with a `dtype` column (tf32, fp16, bf16, fp8), such as
/// tests/data/h100/gemm.csv. Rows of other ops or of fp32 are skipped; no
/// tensor-core row at all, a missing column or a bad value is an InputError
/// naming file, row and column, and so is a row whose `Device` (when the
/// file has the column) names another GPU than `gpu` (check_measured_on).
MeasurementSet read_measured_gemms(const std::vector<std::string>& csv_paths, const GpuSpec& gpu);
/// Throws InputError naming file, row and column at the first row whose
/// `Device` cell (column `device_col`; none when negative, and an empty
/// cell passes) names another GPU than `gpu`: neither `gpu`'s name nor a
/// name of its preset ("NVIDIA H100 80GB HBM3" is H100-SXM). Each distinct
/// name is looked up once.
void check_measured_on(const CsvTable& t, int device_col, const GpuSpec& gpu);
/// XLA's dtype names: "bf16xbf16->bf16" -> bf16, "f16xf16->f16" -> fp16,
/// "f32xf32->f32" -> tf32 (XLA's default precision runs f32 dots on TF32
/// tensor cores), "f8e4m3fnxf8e5m2->bf16" and the other f8 pairs -> fp8.
/// Throws InputError for others.
DType parse_xla_dtype(std::string_view name);

/// The device_configs directory belonging to a data directory: tries DIR,
/// DIR/device_configs, and the same two levels up. Throws InputError.
std::string find_device_configs(const std::string& data_dir);

}  // namespace tessera::node_model
