#pragma once
// What `tessera run` reports, and its two renderings.
#include <string>

#include "tessera/cli/scenario.hpp"
#include "tessera/engine/executor.hpp"

namespace tessera::cli {

struct RunReport {
  std::string scenario;
  std::string model;
  std::string gpu;
  int gpus = 0;
  int dp = 0;
  std::string backend;
  std::string predictor;
  engine::IterationSummary summary;
  double tokens_per_second = 0.0;
  Bytes bytes_sent;  ///< over the network, all ranks
};

RunReport make_report(const Scenario& s, const engine::ExecutionResult& r);
/// Aligned human-readable summary.
std::string format_text(const RunReport& r);
/// One JSON object; numbers printed with a fixed precision so output is
/// byte-for-byte reproducible.
std::string format_json(const RunReport& r);

}  // namespace tessera::cli
