#pragma once
// Scenario files: YAML in, a fully validated Scenario out. Unknown keys,
// wrong types, bad unit strings and impossible values are all reported as a
// ScenarioError naming the file, line, column and key path.
#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tessera/cli/args.hpp"
#include "tessera/collectives/expand.hpp"
#include "tessera/engine/comm_calibration.hpp"
#include "tessera/error.hpp"
#include "tessera/node_model/csv.hpp"
#include "tessera/node_model/gpu_spec.hpp"
#include "tessera/node_model/overrides.hpp"
#include "tessera/node_model/workload.hpp"
#include "tessera/parallelism/plan.hpp"
#include "tessera/parallelism/transformer.hpp"
#include "tessera/study/scenario.hpp"
#include "tessera/topology/fabrics.hpp"
#include "tessera/topology/topology.hpp"

namespace tessera::cli {

// The scenario model and the pipeline live in the study layer; cli reads
// files and arguments into it and formats what it returns.
using namespace tessera::study;

/// A value set from the command line over the file's: `cluster.nodes=4`.
struct Override {
  std::string path;   ///< dotted key path
  std::string value;  ///< YAML scalar text
  std::string flag{};  ///< the option that gave it, in messages (empty: "--set PATH")
};
/// Parses "key.path=value"; throws InputError.
Override parse_override(const std::string& text);

/// The model chunks to try, as written, and the option that gave them:
/// `--virtual-stages` (`given`), or a `--set parallelism.virtual_stages=N`
/// other than auto, which counts as `--virtual-stages N` and is taken out
/// of `sets` (compare-schedules and search). None: neither; both: UsageError.
struct ChunkList {
  std::string text;
  std::string flag;
};
std::optional<ChunkList> take_chunk_list(const std::optional<std::string>& given,
                                         std::vector<std::string>& sets);

/// The keys (under `parallelism.`) of a plan's own split of its layers over
/// the pipeline's stages.
inline constexpr std::array<std::string_view, 4> kLayerSplitKeys = {
    "first_stage_layers", "last_stage_layers", "account_for_embedding", "account_for_loss"};
/// Those of kLayerSplitKeys that `plan` sets (in that order): empty where its
/// stages split the layers evenly, or as evenly as they go.
std::vector<std::string_view> layer_split_keys_set(const parallelism::ParallelPlan& plan);

/// The warning for a pipeline whose pp x virtual_stages chunks do not split
/// the model's layers evenly (forecast as such; Megatron-LM refuses it
/// unless told how), or empty: the scenario's, and each schedule's of
/// compare-schedules. Empty for a plan that says how
/// (first_stage_layers, last_stage_layers, account_for_embedding,
/// account_for_loss). `virtual_stages_auto`: the plan's chunks were chosen
/// by `virtual_stages: auto`, which a key pasted from the warning would
/// choose again. Empty under megatron-deepspeed too: DeepSpeed's pipeline
/// engine splits the layers itself and refuses no uneven split.
std::string uneven_layer_split_warning(std::int64_t layers, const parallelism::ParallelPlan& plan,
                                       node_model::Framework framework, bool virtual_stages_auto = false);

/// The warning for full recomputation under a schedule that splits the
/// backward (zero-bubble: W keeps what full recomputation would drop), or
/// empty: the scenario's, and each schedule's of compare-schedules.
std::string split_backward_recompute_warning(const parallelism::ParallelPlan& plan);

/// The columns of a table of measured runs named by a scenario key path (a
/// '.' in the name, e.g. `training.optimizer`): each sets its key for its row
/// (`validate training`, `validate steps`). `set_by` lists the key paths
/// the table's own columns set (key path, column): a key-path column for one
/// of them, or a key path named by two columns, throws InputError naming
/// the file and both columns.
std::vector<std::size_t> key_path_columns(
    const node_model::CsvTable& t,
    std::span<const std::pair<std::string_view, std::string_view>> set_by = {});
/// Throws UsageError for a --set of a key that `set_by` (key path, column)
/// sets in every row of a table of measured `row`s ("run", "step"): each row
/// is timed as measured (a --set model.layers moved every run to that depth,
/// silently). `note` is added after the column's name (", 1 without it").
void refuse_set_of_row_keys(const std::vector<Override>& overrides,
                            std::span<const std::pair<std::string_view, std::string_view>> set_by,
                            std::string_view row,
                            std::string_view (*note)(std::string_view column) = nullptr);
/// The longest time a measured row (`validate training`, `validate steps`)
/// may give, in ms: a day. Above it is a unit slip or a damaged cell.
inline constexpr double kMaxMeasuredMs = 86'400'000.0;

/// An error's message without its location: a ScenarioError's detail
/// ("KEY.PATH: what is wrong"), else what() with a leading "FILE: " dropped
/// (`file` non-empty). For callers that name the error by their own source
/// (a data row, a schedule) instead of a scenario they generated.
std::string without_scenario_file(const InputError& e, const std::string& file = {});
/// `message` without a leading "FILE: " (`file` non-empty): an error message
/// kept as text (a compare-schedules row's) named by the caller's source.
std::string without_file_prefix(std::string message, const std::string& file);

/// A column name without case, spaces or punctuation ("# GPUs" -> "gpus"):
/// how the measured-data readers match a header written another way.
std::string loose_column_name(std::string_view name);

/// A measured time this many times its forecast, or its forecast this
/// many times it, is in another unit than milliseconds (or damaged).
inline constexpr double kTimeUnitsOffFactor = 30.0;

/// One measured time beside its forecast, for check_time_units.
struct MeasuredBesideForecast {
  int row = 0;  ///< 1-based data row
  double measured_ms = 0;
  double predicted_ms = 0;
};
/// Throws InputError when the measured times are 30x or more off their
/// forecasts in the median (the time column not in milliseconds), or one
/// row's is 30x or more off the others' (that row in seconds): nothing
/// reported on them would mean anything. `noun`: "run" or "step", as the
/// messages name the rows.
void check_time_units(const std::vector<MeasuredBesideForecast>& rows, const std::string& file,
                      std::string_view noun);
/// Row `row`'s non-empty cells of those columns, trimmed: (key path, value).
std::vector<std::pair<std::string, std::string>> key_path_cells(const node_model::CsvTable& t,
                                                                std::size_t row,
                                                                const std::vector<std::size_t>& columns);
/// A scenario's error `detail` about a key path one of `keys` named that
/// is no key ("training.optimiser: unknown key, ..."): the column's fault,
/// not its row's, as "column 'training.optimiser': <detail>"; else nothing.
std::optional<std::string> key_column_error(const std::vector<std::pair<std::string, std::string>>& keys,
                                            std::string_view detail);

/// Reads and validates a scenario file, after applying `overrides`. Throws
/// ScenarioError.
Scenario load_scenario(const std::string& path, const std::vector<Override>& overrides = {});
/// The same for a file that describes a cluster (commands that use only the
/// cluster, its calibration, collectives and backend: `validate collectives
/// --nccl-tests`): its `model`, `training` and `parallelism` sections may be
/// left out (stand-ins take their place: GPT-3 XL, one sequence of 2048
/// tokens in fp32, no parallelism); sections written are read and checked
/// as in any scenario.
Scenario load_cluster_scenario(const std::string& path, const std::vector<Override>& overrides = {});

/// The scenario options of every command that runs one (run, sweep, search,
/// compare-schedules): `--set KEY=VALUE`, repeatable, taken out of `args`
/// into `sets` (ArgParser keeps one value per option) -- the rest is
/// returned; `--backend flow|ns3` and `--predictor NAME`, declared on `p`
/// by declare_scenario_options and turned into the overrides of the keys
/// `backend` and `predictor` by scenario_overrides (errors name them).
std::vector<std::string> take_set_options(const std::vector<std::string>& args, std::vector<std::string>& sets);
void declare_scenario_options(ArgParser& p);
std::vector<Override> scenario_overrides(const std::vector<std::string>& sets, const ArgParser& p);
/// A word as a POSIX shell reads it back: as is where it holds only
/// letters, digits and `._:/=,+-`, else in single quotes.
std::string shell_word(const std::string& word);
/// `overrides` as the command-line flags that give them, in order, each
/// shell-quoted (shell_word): `--backend X` and `--predictor X` for the
/// overrides of those options, `--set PATH=VALUE` for the others.
std::string override_flags(const std::vector<Override>& overrides);
/// The overrides of `--set` texts alone, in order (commands without
/// --backend/--predictor: validate training).
std::vector<Override> parse_overrides(const std::vector<std::string>& sets);

/// What a table command (`kernels`, `collectives`: one scenario in, a table
/// out, `--out FILE.csv` optional) starts from: its arguments parsed with
/// the scenario options, the scenario loaded, a scenario with jobs refused
/// (ScenarioError naming `command`), the scenario's warnings printed on
/// stderr, and `--out` checked to be neither the scenario nor its
/// node_model.overrides file (InputError).
struct TableCommand {
  Scenario scenario;
  std::optional<std::string> out;
  bool json = false;  ///< --json: one object on stdout instead of the text
};
TableCommand parse_table_command(const std::vector<std::string>& args, const std::string& command);
/// Same, from text; `file` is used in messages.
Scenario parse_scenario(const std::string& text, const std::string& file,
                        const std::vector<Override>& overrides = {});
/// load_cluster_scenario, from text.
Scenario parse_cluster_scenario(const std::string& text, const std::string& file,
                                const std::vector<Override>& overrides = {});
/// The scenario file's text (throws ScenarioError when unreadable).
std::string read_scenario_text(const std::string& path);

}  // namespace tessera::cli
