#pragma once
// Scenario -> plan -> topology -> simulation: the pipeline every command that
// forecasts an iteration shares (run, sweep).
#include <vector>

#include "tessera/cli/scenario.hpp"
#include "tessera/engine/executor.hpp"
#include "tessera/topology/topology.hpp"

namespace tessera::cli {

struct Simulation {
  topology::Topology topology;
  engine::ExecutionResult result;
  std::vector<double> link_bytes;  ///< per directed link; empty when the backend does not count
};

/// Plans the scenario's iteration, builds its topology and runs it on the
/// scenario's backend. `observer` (optional) sees every task and transfer.
Simulation simulate_scenario(const Scenario& s, engine::ExecutionObserver* observer = nullptr);

}  // namespace tessera::cli
