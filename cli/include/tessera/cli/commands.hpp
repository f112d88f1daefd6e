#pragma once
// Sub-commands of the `tessera` program. Each takes the arguments after its
// name, writes its report to `out`, and returns the process exit code.
// Library errors propagate as exceptions; main() maps them to one line on
// stderr and an exit code: 0 success, 1 simulation/internal error,
// 2 bad input (usage, scenario, units, data files).
#include <iosfwd>
#include <string>
#include <vector>

namespace tessera::parallelism {
enum class Schedule;  // plan.hpp
}  // namespace tessera::parallelism

namespace tessera::cli {

using Args = std::vector<std::string>;

int cmd_run(const Args& args, std::ostream& out);
int cmd_sweep(const Args& args, std::ostream& out);
int cmd_sweep_merge(const Args& args, std::ostream& out);
/// `tessera sensitivity SCENARIO.yaml`: what each calibration constant is worth (cli/src/sensitivity.cpp).
int cmd_sensitivity(const Args& args, std::ostream& out);
int cmd_search(const Args& args, std::ostream& out);
// Planner commands: cli/src/planner_commands.cpp.
int cmd_compare_schedules(const Args& args, std::ostream& out);
/// `tessera kernels SCENARIO.yaml`: the kernels of the model on one rank and their predicted times.
int cmd_kernels(const Args& args, std::ostream& out);
/// `tessera collectives SCENARIO.yaml`: the collectives of one iteration and their times on the fabric.
int cmd_collectives(const Args& args, std::ostream& out);
/// A `--schedules` value: comma-separated schedule names (compare-schedules,
/// search); throws UsageError naming the option.
std::vector<parallelism::Schedule> parse_schedule_list(const std::string& text);
/// `tessera validate distributed ...` (called by cmd_validate; `args` after "distributed").
int cmd_validate_distributed(const Args& args, std::ostream& out);
/// `tessera validate training ...` (cli/src/training_validation.cpp).
int cmd_validate_training(const Args& args, std::ostream& out);
/// `tessera validate steps --data STEPS.csv [--gpu H200] [--framework pytorch-eager|megatron]`.
int cmd_validate_steps(const Args& args, std::ostream& out);
/// `tessera validate collectives ...` (cli/src/collective_commands.cpp; `args` after "collectives").
int cmd_validate_collectives(const Args& args, std::ostream& out);
// Node-model commands: cli/src/node_model_commands.cpp.
int cmd_predict_kernels(const Args& args, std::ostream& out);
int cmd_predict_model(const Args& args, std::ostream& out);
int cmd_predict_graph(const Args& args, std::ostream& out);
int cmd_validate(const Args& args, std::ostream& out);
int cmd_train_predictor(const Args& args, std::ostream& out);

}  // namespace tessera::cli
