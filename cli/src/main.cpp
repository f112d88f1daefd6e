// The `tessera` program: dispatches sub-commands and maps errors to one line
// on stderr and an exit code (0 ok, 1 simulation/internal error, 2 bad input).
#include <fmt/format.h>

#include <cstring>
#include <exception>
#include <functional>
#include <iostream>
#include <map>
#include <string>

#include "tessera/cli/commands.hpp"
#include "tessera/error.hpp"

namespace {

constexpr const char* kUsage = R"(usage: tessera <command> [options]

Forecasts how fast a model trains on a GPU cluster.

Commands:
  run SCENARIO.yaml [--backend flow|ns3] [--json]
        Simulate one training iteration and print iteration time, compute
        time, exposed communication and per-GPU TFLOP/s.
  sweep SCENARIO.yaml --set KEY=V1,V2,... [--set KEY2=...] [--out FILE.csv] [--svg FILE.svg] [--jobs N]
        Run every point of the grid of --set values (in parallel), append each
        to the CSV as it finishes, resume an interrupted sweep, and draw the
        throughput and parallel-efficiency curves as SVG.
  compare-schedules SCENARIO.yaml [--schedules gpipe,1f1b,interleaved-1f1b] [--svg FILE.svg] [--predictor NAME]
        Plan and simulate the scenario under each pipeline schedule: iteration
        time, bubble, exposed communication and peak memory per stage.
  validate distributed --data DIR [--scenarios scenarios/validation] [--predictor NAME]
        Predicted vs measured multi-GPU training iterations (docs/parallelism.md).
  predict-kernels --device DEVICE.json --input KERNELS.csv --output OUT.csv [--predictor NAME]
  predict-model --model HF_CONFIG.json --device DEVICE.json --batch N --seq L --mode inf|train [--json]
  predict-graph --graph OPGRAPH.csv --device DEVICE.json
  validate kernels|models --data DIR
  train-predictor --data DIR --out DIR
        Node-model commands (kernel latency prediction, see docs/node_model.md).

Exit codes: 0 success; 1 simulation or internal error; 2 bad input (usage,
scenario file, unit string, data file).
)";

using Command = std::function<int(const tessera::cli::Args&, std::ostream&)>;

}  // namespace

int main(int argc, char** argv) {
  const std::map<std::string, Command> commands{
      {"run", tessera::cli::cmd_run},
      {"sweep", tessera::cli::cmd_sweep},
      {"sweep-merge", tessera::cli::cmd_sweep_merge},
      {"search", tessera::cli::cmd_search},
      {"compare-schedules", tessera::cli::cmd_compare_schedules},
      {"predict-kernels", tessera::cli::cmd_predict_kernels},
      {"predict-model", tessera::cli::cmd_predict_model},
      {"predict-graph", tessera::cli::cmd_predict_graph},
      {"validate", tessera::cli::cmd_validate},
      {"train-predictor", tessera::cli::cmd_train_predictor},
  };
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
      std::strcmp(argv[1], "help") == 0) {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  auto it = commands.find(name);
  if (it == commands.end()) {
    std::cerr << fmt::format("tessera: error: unknown command '{}' (see 'tessera --help')\n", name);
    return 2;
  }
  const tessera::cli::Args args(argv + 2, argv + argc);
  try {
    return it->second(args, std::cout);
  } catch (const tessera::InputError& e) {
    std::cerr << "tessera: error: " << e.what() << '\n';
    return 2;
  } catch (const tessera::Error& e) {
    std::cerr << "tessera: simulation error: " << e.what() << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tessera: internal error: " << e.what() << '\n';
    return 1;
  }
}
