#pragma once
// A Chrome / Perfetto trace of one simulated iteration, collected through the
// executor's observer interface: one process per rank, a "compute" thread
// and one thread per communication group, and every point-to-point transfer
// as an async "network" event on its sender.
#include <string>
#include <vector>

#include "tessera/engine/executor.hpp"

namespace tessera::cli {

class ChromeTraceObserver final : public engine::ExecutionObserver {
 public:
  explicit ChromeTraceObserver(int ranks) : ranks_(ranks) {}
  void on_compute(int rank, const parallelism::Task& task, Time start, Time end) override;
  void on_collective(const parallelism::Task& task, std::int32_t group, const std::vector<int>& ranks,
                     Time start, Time end) override;
  void on_transfer(const collectives::Transfer& t, Time start, Time end) override;

  /// The trace as JSON (the Trace Event Format), deterministic for a given run.
  [[nodiscard]] std::string json() const;

 private:
  int ranks_;
  std::vector<std::string> events_;
  std::vector<int> groups_seen_;
  long transfer_id_ = 0;
};

}  // namespace tessera::cli
