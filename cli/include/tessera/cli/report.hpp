#pragma once
// What `tessera run` reports, and its two renderings.
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/cli/scenario.hpp"
#include "tessera/study/jobs.hpp"
#include "tessera/study/pipeline.hpp"

namespace tessera::cli {

/// The summary of a scenario with several jobs: per job alone, shared,
/// slowdown and tokens/s (text), or one JSON object with a `jobs` list.
std::string format_jobs_text(const Scenario& s, const study::JobsOutcome& o);
std::string format_jobs_json(const Scenario& s, const study::JobsOutcome& o);
/// The scenario's warnings, then its jobs' (each "jobs NAME: ..."): what
/// `run` says on stderr and the JSON reports list under "warnings".
std::vector<std::string> scenario_warnings(const Scenario& s);
/// Prints scenario_warnings(s) on stderr, one "tessera: warning: FILE: ..."
/// line each (run, kernels, collectives).
void print_scenario_warnings(const Scenario& s);
/// Where a warning only the forecast gives is about: the line (or --set)
/// of the key it opens with, for the keys the loader located
/// (study::kRunWarningKeys: `ns3.buffer`, `failures`), else the file.
std::string forecast_warning_location(const Scenario& s, const std::string& warning);
/// Prints such a warning on stderr, "tessera: warning: WHERE: ...".
void print_forecast_warning(const Scenario& s, const std::string& warning);
/// `"warnings": [...], ` of scenario_warnings(s), or nothing without any:
/// the --json of the commands that forecast one scenario carries what they
/// print on stderr.
std::string scenario_warnings_json(const Scenario& s);
/// `"mixed_gpus": {"gpu": NAME, "nodes": [...], "mfu_peak_gpu": NAME}, ` as run --json gives it,
/// or nothing without `mixed_gpus:`.
std::string mixed_gpus_json(const Scenario& s);
/// `peak_gpu`: the GPU whose peak MFU and HFU are against (cluster.gpu).
std::string mixed_gpus_json(const std::string& gpu, const std::vector<int>& nodes,
                            const std::string& peak_gpu);
/// The warnings only the jobs' forecast shows (a cable changing after the
/// last job's iteration, late_failure_warnings): `run` prints them on
/// stderr, the JSON lists them after scenario_warnings.
std::vector<std::string> jobs_outcome_warnings(const Scenario& s, const study::JobsOutcome& o);

/// A buffer size for people, to 3 significant digits in binary units:
/// "512 B", "48 MiB", "5.45 GiB" (`validate collectives`, `collectives`).
std::string size_text(Bytes b);
/// The nodes of a node list as a phrase: "node 1", "nodes 2, 3".
std::string nodes_phrase(const std::vector<int>& nodes);
/// " (node 1 of A100-40GB, mixed_gpus)" after a header's GPU count and
/// GPU, or empty with one GPU type (search, compare-schedules).
std::string mixed_gpus_phrase(const Scenario& s);
/// A fabric_name as the text reports' Scenario line says it: "leaf-spine
/// fabric", or "one node, no fabric" for "none".
std::string fabric_phrase(std::string_view fabric);

/// `s` as a JSON string literal (quotes, escapes).
std::string json_string(const std::string& s);
/// `items` as a JSON array of string literals: ["a", "b"].
std::string json_string_array(const std::vector<std::string>& items);
/// `s` escaped for the inside of a JSON string literal, appended to `out`.
void append_json_escaped(std::string& out, std::string_view s);

/// `tessera run` of a plan that does not fit in GPU memory (without
/// --allow-oom; the report is printed), or `tessera search` with no plan
/// that fits: the exit code is 3.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

struct StageMemory {
  int stage = 0;
  Bytes total;
  Bytes capacity;
  bool oom = false;
  // The parts of `total` (parallelism::MemoryEstimate; fp8_weights: 0 but
  // for fp8 runs, where the text and JSON give it).
  Bytes weights, fp8_weights, gradients, optimizer_states, activations, workspace;
};

/// One pipeline stage's compute in the real run (plans with pp > 1): its
/// busiest rank's compute stream (engine::RankResult::compute_busy) against
/// the fastest stage's.
struct StageBalance {
  int stage = 0;
  std::int64_t layers = 0;  ///< the stage's layers (parallelism::stage_layer_split)
  int slowest_rank = 0;  ///< the stage's rank with the most compute (lowest rank on a tie)
  Time compute;          ///< that rank's compute_busy
  double vs_fastest = 1.0;  ///< compute / the least of every stage's `compute` (1 for the fastest)
};

struct RunReport {
  std::string scenario;
  std::string model;
  /// The model's parameters (TransformerConfig::total_params) and those one
  /// token goes through (active_params: fewer for a mixture of experts).
  std::int64_t parameters = 0;
  std::int64_t active_parameters = 0;
  /// The vocabulary the plan runs (Megatron pads it to a multiple of 128 x
  /// tp) and the parameters with it, as Megatron counts them (the padded
  /// rows of the word embedding, and of an untied LM head).
  std::int64_t padded_vocab = 0;
  std::int64_t padded_parameters = 0;
  /// An MoE plan shows its ep, 1 included (a dense one only above 1).
  [[nodiscard]] bool shows_ep() const { return ep > 1 || experts > 0; }
  std::int64_t experts = 0;  ///< routed experts (0: dense), and
  std::int64_t top_k = 0;    ///< how many a token goes to
  /// The rest of the routing (parallelism::MoeConfig), for an MoE model:
  /// experts every token goes through, the capacity factor (1: dropless),
  /// the busiest expert-parallel rank's load over the average, and what a
  /// rank computes and sends over the average at this plan's ep
  /// (MoeConfig::load_factor: every rank is modelled as the busiest).
  std::int64_t shared_experts = 0;
  double capacity_factor = 1.0;
  double imbalance = 1.0;
  double load_factor = 1.0;
  std::string gpu;
  std::string fabric;
  std::string fabric_detail;  ///< study::fabric_detail: ", 3 tiers by tiers: auto" or empty
  int fabric_tiers = 0;       ///< study::fabric_tiers: switch tiers between nodes (0: no fabric)
  /// study::leaf_oversubscription and spine_oversubscription: host (leaf)
  /// bandwidth into a switch over its up-links' (1: non-blocking; 0: no
  /// traffic crosses that tier).
  double leaf_oversubscription = 0.0;
  double spine_oversubscription = 0.0;
  double nodes_per_leaf = 0.0;  ///< study::nodes_per_leaf (0: no fabric)
  std::string hcas;  ///< "; 4 HCAs per node, 2 GPUs each" when GPUs share HCAs, else empty
  int gpus = 0;
  int dp = 1, tp = 1, pp = 1;
  /// Expert parallelism (printed, and in the JSON, only when above 1).
  int ep = 1;
  /// `parallelism.layout` ("dp-tp-pp"; printed, and in the JSON, only when
  /// not the default; empty for the default tp-dp-pp).
  std::string layout;
  std::string mixed_gpu;        ///< `mixed_gpus.gpu` (empty: one GPU type)
  std::vector<int> mixed_nodes;    ///< the nodes that hold it
  Scenario::Failures failures;     ///< `failures:` (cables out of service or slow)
  study::ComputeScales scales;     ///< GPUs `stragglers:` makes slower or faster
  std::string schedule;
  std::int64_t micro_batches = 0;
  /// The rest of the plan, as the scenario's keys name them (the summary's
  /// Plan and Options lines, the JSON): chunks per stage, sequences per
  /// micro-batch and per iteration, tokens per sequence, recomputation,
  /// sequence parallelism, ZeRO stage, gradient sync (resolved: never auto).
  int virtual_stages = 1;
  /// parallelism.first_stage_layers / last_stage_layers, where given.
  std::optional<std::int64_t> first_stage_layers, last_stage_layers;
  /// parallelism.account_for_embedding / account_for_loss.
  bool account_for_embedding = false, account_for_loss = false;
  /// Every stage's lines in the text (stragglers or mixed GPUs, or at most
  /// 4 stages); else one line, the fastest and the slowest stage.
  bool stage_balance_lines = false;
  /// What moves layers off a first or last stage that computes
  /// kStageImbalanceHint times the fastest stage's or more (empty: none).
  std::string stage_balance_hint;
  /// The split stage_balance_hint suggests, with its estimate of the slowest
  /// stage's compute (JSON `suggested_split`).
  std::optional<parallelism::EdgeStageSplit> suggested_split;
  /// The iteration with every collective free, the plan's own and with the
  /// suggested split (make_report's `time_plan`; unset without it).
  std::optional<Time> plan_free_iteration, split_free_iteration;
  std::int64_t micro_batch = 0;
  std::int64_t global_batch = 0;
  std::int64_t seq_len = 0;
  /// training.dtype as given: "fp8" runs bf16 outside the layers' GEMMs.
  std::string dtype;
  std::string framework;  ///< the kernel profile: megatron or pytorch-eager
  std::string recompute;
  bool sequence_parallel = false;
  int zero_stage = 0;
  std::string grad_sync;
  /// What grad_sync means here, said in the Options line after it: Megatron
  /// on PyTorch DDP (overlapped under megatron, no main-gradient buffer), or
  /// Megatron-Core's buckets (overlap-grad-reduce); else empty.
  std::string grad_sync_note;
  /// Megatron-Core's --overlap-param-gather (in the JSON only when on).
  bool overlap_param_gather = false;
  std::string backend;
  std::string predictor;
  /// `node_model.weights` (empty: the built-in weights; printed, and in the
  /// JSON, only when given).
  std::string predictor_weights;
  /// `node_model.overrides` (printed, and in the JSON, only when given).
  std::optional<node_model::OverrideStats> kernel_overrides;

  Time iteration_time;
  Time compute_time;       ///< busiest compute stream
  Time host_time;          ///< GPU idle waiting for its host to issue work (host model)
  Time bubble_time;        ///< idle time the plan causes with free communication
  Time exposed_comm_time;  ///< the rest: iteration time waiting on the network
  double tflops_per_gpu = 0.0;  ///< model FLOPs (no recomputation) per GPU per second, in TFLOP/s
  double mfu = 0.0;             ///< tflops_per_gpu / the GPU's matmul peak for the dtype (bf16's for fp8)
  double hardware_tflops_per_gpu = 0.0;  ///< executed FLOPs (recomputation included) per GPU per second
  double hfu = 0.0;             ///< hardware_tflops_per_gpu / the same peak
  double mfu_fp8_peak = 0.0;    ///< fp8 runs only: tflops_per_gpu / the GPU's dense FP8 peak
  double tokens_per_second = 0.0;
  /// With `training.tokens`: the whole run at this throughput (a "Training
  /// run" line; JSON "training_run"); nullopt otherwise.
  std::optional<study::TrainingRun> training_run;
  std::optional<double> price_per_gpu_hour;  ///< `cluster.price_per_gpu_hour`, as given
  Bytes bytes_sent;  ///< payload sent by all ranks: nvlink_bytes + fabric_bytes
  Bytes nvlink_bytes;  ///< of it, within a node (engine::ExecutionResult::nvlink_bytes)
  Bytes fabric_bytes;  ///< of it, between nodes: HCA (and PCIe to a shared one) and fabric
  std::vector<StageMemory> memory;
  /// The scenario's warnings (legal but likely unintended settings, as
  /// stderr says them; in the JSON as "warnings" only when there are any).
  std::vector<std::string> warnings;
  /// One per pipeline stage when the scenario has stragglers or mixed GPUs
  /// (printed, and in the JSON, only then); empty otherwise.
  std::vector<StageBalance> stage_balance;
  /// `training.dtype: fp8` (Transformer Engine FP8 GEMMs; an "FP8" line and a
  /// JSON "fp8" object only then): MFU and HFU count against the BF16 peak.
  bool fp8 = false;
  /// Why the GPU's (and a `mixed_gpus` GPU's) kernel times are an
  /// extrapolation beyond the generations the node model was fit on or
  /// checked against (untested_gpu_notes: one note per GPU); empty when
  /// measurements back them. Text: an "Untested GPU" line per note; JSON:
  /// "untested_gpu", a list of the notes, only when there is one.
  std::vector<std::string> untested_gpu;
  /// The known biases of the forecast of this plan on its GPUs, from
  /// validation on measured runs (known_bias_notes: the plan's tensor
  /// parallelism, the GPU at the training dtype); empty when none is known.
  /// Text: a "Known bias" line per note; JSON: "known_bias", a list of the
  /// notes, only when there is one.
  std::vector<std::string> known_bias;
  /// multi_node_note for a cluster of more than one node, else empty. Text:
  /// an "Untested scale" line; JSON: "untested_scale", only when set.
  std::string untested_scale;
  std::string gradient_dtype;  ///< gradients as held and reduced (FP32 main gradients under Megatron with bf16)
  /// The ns-3 backend's packet fabric (a "Packet fabric" section and a JSON
  /// "ns3" object); absent on the flow backend, whose output is unchanged.
  std::optional<PacketFabricStats> packet_fabric;
  /// `run --comm-breakdown`: what each class of communication costs the
  /// iteration (study::communication_costs; empty for a plan without any);
  /// unset otherwise. Text: a "Comm costs" section after the split; JSON:
  /// "comm_costs".
  std::optional<std::vector<study::CommClassCost>> comm_costs;
  [[nodiscard]] bool oom() const;
  /// parallelism::fullest_stage of `memory`: the stage fullest for its GPU.
  std::size_t fullest = 0;
  /// That stage, with its GPU's capacity: run --json's and sweep's
  /// peak_memory_bytes and memory_capacity_bytes. Empty without stages.
  [[nodiscard]] StageMemory fullest_stage() const;
};

/// Times a plan of the scenario with every collective free (compute, host,
/// bubble: study::free_communication_iteration), as `run` does for the
/// split its Stage-balance hint suggests.
using PlanTimer = std::function<Time(const parallelism::ParallelPlan&)>;
/// `time_plan`: where given, the split the Stage-balance hint suggests is
/// simulated with it and the hint says what it does to the iteration with
/// free communication (beside the plan's own, Simulation::free_comm), not
/// only to the slowest stage's compute.
RunReport make_report(const Scenario& s, const Simulation& sim, const PlanTimer& time_plan = {});
/// Aligned human-readable summary.
std::string format_text(const RunReport& r);
/// A count as written in a scenario: 1T, 300B, 1.5M (4 significant digits).
std::string count_text(double n);
/// "16 micro-batches of 2 sequences", "1 micro-batch of 8 sequences" (run's
/// Plan line, compare-schedules' header).
std::string micro_batches_phrase(std::int64_t micro_batches, std::int64_t micro_batch);
/// " (first_stage_layers 6, last_stage_layers 4)", " (account_for_embedding,
/// account_for_loss)": the plan's own split of the layers as its keys name
/// it, or "" (run's Plan line, compare-schedules' header, collectives').
std::string layer_split_phrase(const std::optional<std::int64_t>& first_stage_layers,
                               const std::optional<std::int64_t>& last_stage_layers,
                               bool account_for_embedding, bool account_for_loss);

/// The short forms of tessera run's caveat lines under a chart (sweep,
/// compare-schedules): `which` names the points a sweep's line holds for
/// ("points with cluster.gpu=H200"), empty on a chart of one scenario;
/// `note` is the full untested_gpu_notes or known_bias_notes line, whose
/// head (before ':') names the GPU.
std::string chart_untested_note(std::string_view which, const std::string& note);
std::string chart_gpu_bias_note(std::string_view which, const std::string& note);
std::string chart_attention_note(std::string_view which);
std::string chart_fp8_note(std::string_view which);
/// kMultiNodeCaveat in short.
std::string chart_scale_note(std::string_view which);
/// `tp`: "8", or a range "4- to 8".
std::string chart_tp_bias_note(std::string_view which, std::string_view tp);
/// "1T tokens in 28.2 days at this throughput: 43,321 GPU-hours, cost ..."
/// (the cost only with a price).
std::string training_run_text(const study::TrainingRun& t, std::optional<double> price_per_gpu_hour);
/// The run as a JSON object: tokens, time_s, days, gpu_hours, cost (null
/// without a price).
std::string training_run_json(const study::TrainingRun& t);
/// One JSON object; numbers printed with a fixed precision so output is
/// byte-for-byte reproducible. Keys: iteration_time_s, compute_time_s,
/// exposed_comm_time_s, tflops_per_gpu and more (see docs/scenarios.md).
std::string format_json(const RunReport& r);

/// Why the scenario's kernel times are an extrapolation, one note per GPU
/// (its GPU's and a `mixed_gpus` GPU's node_model::extrapolation_note, none
/// repeated), or empty when measurements back them: RunReport::untested_gpu.
std::vector<std::string> untested_gpu_notes(const Scenario& s);
/// The known biases of the scenario's forecast, one sentence each, none
/// repeated (empty when none is known): RunReport::known_bias. With `plan`
/// (the default) its plan's (parallelism::known_bias_note: 4-way or wider
/// tensor parallelism) first; then its GPU's at the training dtype and a
/// `mixed_gpus` GPU's (node_model::known_bias_note: 16-bit on Hopper).
/// `plan` false: the GPUs' alone, which hold for every plan on them. Last,
/// the workload's (flash_attention_note).
std::vector<std::string> known_bias_notes(const Scenario& s, bool plan = true);
/// How far FP8 GEMM times are validated: `validate kernels --kfold 5` on
/// XLA's H100 table, the fp8 row (docs/node_model.md; test docs.fp8_figure
/// checks it against the command).
inline constexpr std::string_view kFp8GemmFigure =
    "28.3% MAPE on XLA's H100 FP8 rows, shapes held out, worse than the FP32-twin baseline's 24.0%";
/// What an FP8 run's forecast rests on (helper 125: the line did not say
/// that no FP8 data was fit, nor what memory counts): "layer GEMMs in FP8,
/// timed unvalidated: ... (kFp8GemmFigure); memory as Transformer Engine
/// keeps it ...".
/// `mfu`: the command prints an MFU, so the note says which peak it is
/// against (`kernels` prints none). Empty unless training.dtype is fp8.
std::string fp8_note(const Scenario& s, bool mfu = true);
/// fp8_note's text before its MFU clause, for any fp8 scenario.
std::string fp8_basis();
/// Why a forecast on more than one node is untested: no multi-node run was
/// measured here, and the collectives between nodes are timed with assumed
/// InfiniBand constants (helpers 64, 66).
inline constexpr std::string_view kMultiNodeCaveat =
    "no multi-node run was measured here (the fits are single-node); the collectives between nodes use "
    "network constants that are assumptions (calibration.network_efficiency, network_launch: fit them on "
    "your cluster's nccl-tests, docs/calibration.md)";
/// The same where the scenario's calibration: section sets the network
/// constants (the user's fit on their nccl-tests).
inline constexpr std::string_view kMultiNodeCalibratedCaveat =
    "no multi-node run was measured here (the fits are single-node); the collectives between nodes use "
    "the network constants of the scenario's calibration: section, not the shipped assumptions, and hold "
    "as far as the runs they were fit on (more nodes than those extrapolate them)";
/// "N nodes: kMultiNodeCaveat" (kMultiNodeCalibratedCaveat where the
/// scenario sets its network constants) for a cluster of more than one
/// node, else empty: RunReport::untested_scale.
std::string multi_node_note(const Scenario& s);
/// FlashAttention's known bias (pessimistic attention), or empty: one of
/// known_bias_notes, which a sweep names apart (its direction differs).
std::string flash_attention_note(const Scenario& s);
/// tessera run's caveat lines for a one-job scenario, for the other commands
/// that forecast it (kernels, compare-schedules, sensitivity, search):
/// "Untested GPU" (untested_gpu_notes), "Known bias" (known_bias_notes) and
/// "Untested scale" (multi_node_note), each only when set, padded as `run`
/// pads them; `plan_bias` false leaves the plan's bias out of the second (a
/// command whose rows have plans of their own, or none). An fp8 scenario's
/// "FP8" line (fp8_note) follows.
/// `mfu` false: the command prints no MFU (fp8_note).
std::string caveat_lines(const Scenario& s, bool plan_bias = true, bool mfu = true);
/// The same as JSON members, each followed by ", " (to precede another
/// member; `trailing` false: each preceded by ", ", to follow one):
/// "untested_gpu", "known_bias" and "untested_scale", each only when set,
/// and "fp8_gemm_times": "unvalidated" for an fp8 scenario.
std::string caveat_json(const Scenario& s, bool plan_bias = true, bool trailing = true);
/// The lines and JSON members of given notes (RunReport's, a job's, a sweep
/// point's), each only when not empty: the one place their format lives.
/// Text: an "Untested GPU" line per note, then a "Known bias" line per note
/// (each label on its first line, the others under it), then an "Untested
/// scale" line (multi_node_note). JSON: "untested_gpu" and "known_bias"
/// (each a list of its notes) and "untested_scale" (a string); `trailing`
/// false puts ", " before each member instead of after it (to follow the
/// last member of an object).
std::string caveat_lines(const std::vector<std::string>& untested_gpu,
                         const std::vector<std::string>& known_bias, const std::string& untested_scale = {});
std::string caveat_json(const std::vector<std::string>& untested_gpu,
                        const std::vector<std::string>& known_bias, bool trailing = true,
                        const std::string& untested_scale = {});
/// The summary's `Failures` line (empty without failures): the cables the
/// scenario takes out or slows, as it names them, a timed change at or
/// after `iteration` marked as having no effect.
std::string failures_line(const Scenario::Failures& f, Time iteration);
/// What `stragglers:` does to `gpus` GPUs, in words ("4 of 32 GPUs slower
/// than predicted (compute x1.250 at most), 3 faster (x0.800 at least)"),
/// and as JSON members with a trailing ", " (`stragglers` and
/// `max_compute_scale` for the slower, `faster_gpus` and `min_compute_scale`
/// for the faster; each pair only where there are such GPUs).
std::string compute_scales_phrase(const study::ComputeScales& c, int gpus);
std::string compute_scales_json(const study::ComputeScales& c);
/// The scenario's `stragglers:` factors, counted by direction (the one count
/// of slower and faster GPUs every report uses).
study::ComputeScales compute_scales_of(const Scenario& s);
/// "Stragglers     <compute_scales_phrase>\n" where the scenario has slower
/// or faster GPUs, else empty: `run`'s line, which sensitivity,
/// compare-schedules and search print too (helpers 127, 128).
std::string stragglers_line(const Scenario& s);
/// The ns-3 run's fabric counters (the report's `Packet fabric` lines), with
/// the invariants side by side (injected against delivered, drops, credit
/// violations).
std::string format_packet_fabric(const PacketFabricStats& f);
/// The same numbers as the JSON report's "ns3" object (with its leading comma).
std::string json_packet_fabric(const PacketFabricStats& f);
/// The share of a GPU's memory from which a stage that fits is said to be
/// tight: within 5% of capacity (4 GiB of 80), where allocator
/// fragmentation and NCCL's buffers, which the memory model leaves out,
/// often run a real job out of memory.
inline constexpr double kTightMemoryShare = 0.95;
/// Whether `need` fits `capacity` but at kTightMemoryShare of it or more:
/// the one rule of tessera run's warning, search's `*` and sweep's rows.
inline bool tight_memory(Bytes need, Bytes capacity) {
  return capacity > Bytes() && need <= capacity && need.in_gib() >= kTightMemoryShare * capacity.in_gib();
}
/// A warning naming the fullest stage that fits at kTightMemoryShare of its
/// GPU's memory or more, or empty (also when a stage is out of memory: the
/// plan does not fit, which its report says).
std::string tight_memory_warning(const std::vector<StageMemory>& memory);
/// The planner's per-stage estimates as the report keeps them.
std::vector<StageMemory> stage_memory(const std::vector<parallelism::MemoryEstimate>& stages);
/// Its text for `what` ("stage 2", a sweep point's "the fullest stage").
std::string tight_memory_text(std::string_view what, Bytes need, Bytes capacity);
/// What the memory model's workspace holds and what it leaves out, in the
/// words of every "may not fit" warning and note (run, sweep, search): the
/// fixed 1 GiB beside the plan's own buffers, so that a report's "workspace
/// 1.1 GiB" does not read as a contradiction (helper 171).
inline constexpr std::string_view kWorkspaceCaveat =
    "the memory model's workspace (1 GiB of CUDA context, cuBLAS and allocator slack, plus a recomputed "
    "layer's activations or all-to-all buffers where the plan has them) counts no fragmentation or NCCL's "
    "own buffers";
/// One warning per timed change at or after `iteration` (it changes
/// nothing: a unit slip, 10s for 10ms, would make a failure study the
/// baseline).
std::vector<std::string> late_failure_warnings(const Scenario::Failures& f, Time iteration);
/// The JSON report's "failures" object followed by ", ", only when the
/// scenario has any: cables as "a-b", times in seconds.
std::string failures_json(const Scenario::Failures& f);
/// Summary lines of notes under a label: `label` (padded as tessera run pads
/// it) on the first, the others under it.
std::string labelled_lines(std::string_view label, const std::vector<std::string>& notes);

/// Distinct notes in first-seen order, each with who holds it (a job's name,
/// a sweep point's number): how jobs and sweep say a note once for all
/// that hold it.
struct HeldNotes {
  struct Entry {
    std::string note;
    std::vector<std::string> holders;
  };
  std::vector<Entry> entries;
  /// Records that `holder` holds `note` (an empty note is none).
  void add(const std::string& note, const std::string& holder);
};

/// The note `search` and `sweep` print after a table that ranks plans of
/// which some have a known bias: `known_bias` (the widest tensor
/// parallelism's parallelism::known_bias_note) and that such `rows` ("plans",
/// "points") may rank above rows with less tensor parallelism that run
/// faster; `which` (e.g. "(1, 2)"), when not empty, names the biased rows.
/// One line ending in a newline.
std::string ranking_bias_note(std::string_view known_bias, std::string_view rows,
                              std::string_view which = {});

}  // namespace tessera::cli
