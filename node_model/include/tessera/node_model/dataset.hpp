#pragma once
// Kernel latency measurements in NeuSight's CSV schema, as training and
// validation data for the learned predictors.
#include <string>
#include <vector>

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
/// `Device` column through `catalog`; rows of unknown devices are skipped.
void read_measurements(const std::string& csv_path, const DeviceCatalog& catalog, MeasurementSet& into);
/// Every *.csv under `dir` (recursively, in sorted order).
MeasurementSet read_measurement_dir(const std::string& dir, const DeviceCatalog& catalog);
/// The device_configs directory belonging to a data directory: tries DIR,
/// DIR/device_configs, and the same two levels up. Throws InputError.
std::string find_device_configs(const std::string& data_dir);

}  // namespace tessera::node_model
