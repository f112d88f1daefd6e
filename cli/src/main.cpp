// The `tessera` program: dispatches sub-commands and maps errors to one line
// on stderr and an exit code (0 ok, 1 simulation/internal error, 2 bad input).
#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <iostream>
#include <map>
#include <new>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/cli/commands.hpp"
#include "tessera/cli/help_text.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/error.hpp"
#include "tessera/names.hpp"

namespace {

// The program's help, in parts (tessera/cli/help_text.hpp): `tessera --help`
// prints them as text, `tessera help --man` as a man page.
constexpr std::string_view kName = R"(forecast how fast a model trains on a GPU cluster
)";

constexpr std::string_view kSynopsis = R"(tessera <command> [options]      (tessera <command> --help for details)
)";

constexpr std::string_view kDescription = R"(Forecasts how fast a model trains on a GPU cluster, from a YAML scenario
(docs/scenarios.md).
)";

constexpr std::string_view kCommands = R"(Forecasting:
  run SCENARIO.yaml [--backend flow|ns3] [--json] [--set KEY=VALUE] [--trace F] [--links F]
        Simulate one training iteration: iteration time (compute, host,
        pipeline bubble, exposed communication), tokens/s, TFLOP/s and MFU
        per GPU, memory per stage.
  sweep SCENARIO.yaml --set KEY=V1,V2,... [--out F.csv] [--svg F.svg] [--jobs N] [--shard I/N|auto]
        Run a grid of settings in parallel, resumable, with a scaling chart.
  sweep-merge --out F.csv [--svg F.svg] [--json] SHARD.csv...
        Merge the shards of a sweep run as a Slurm array or MPI ranks.
  search SCENARIO.yaml [--top N] [--json]
        Find the fastest parallel plan that fits in memory.
  compare-schedules SCENARIO.yaml [--schedules gpipe,1f1b,interleaved-1f1b,zb-h1,zb-h2] [--virtual-stages V1,V2,...] [--svg F.svg]
        Compare pipeline schedules: iteration, bubble, exposed comm, memory.
  kernels SCENARIO.yaml [--out F.csv] [--json]
        The kernels of the model on one GPU and what each costs, per layer
        and micro-batch; the CSV is a node_model.overrides template.
  collectives SCENARIO.yaml [--out F.csv] [--json]
        The collectives of one iteration, each timed on the scenario's
        fabric alone and with its stage's other groups; bus bandwidth.
  sensitivity SCENARIO.yaml [--json] [--jobs N]
        What each calibration constant (host costs, NCCL latency and
        bandwidth, clock) is worth in this forecast: the iteration with
        each moved by one step, largest change first.

Node model (kernel latency prediction, docs/node_model.md):
  predict-kernels --device GPU|DEVICE.json --input KERNELS.csv --output OUT.csv [--dtype D] [--device-time]
                  [--predictor NAME] [--weights DIR]
  predict-model --model HF_CONFIG.json --device GPU|DEVICE.json --batch N --seq L --mode inf|train [--dtype D]
                [--predictor NAME] [--weights DIR] [--json]
  predict-graph --graph OPGRAPH.csv --device GPU|DEVICE.json [--layers N] [--model HF_CONFIG.json]
                [--predictor NAME] [--weights DIR]
  train-predictor --data DIR --out DIR [--xla DIR | --gemms FILE.csv --device GPU]

Validation against measurements:
  validate kernels|models|distributed|collectives|training|steps --data DIR   (kernels: also an XLA GEMM table, [--kfold N])

  Every command that runs a scenario (run, sweep, search, compare-schedules, kernels,
  collectives, sensitivity) takes --set KEY=VALUE (repeatable), --backend flow|ns3 and
  --predictor NAME (roofline, linreg, mlp, tile-mlp), the same as setting the keys.

  tessera help COMMAND   the options, defaults and examples of one command
  tessera help --man     this help and every command's as a man page
                         (view it with: tessera help --man | man -l -)
  tessera --version      the version
)";

constexpr std::string_view kFiles =
    R"(  SCENARIO.yaml          the cluster, model, parallelism and training to forecast
                         (docs/scenarios.md); scenarios/ holds examples
  SCENARIO-sweep.csv     sweep's results (default name), resumed when it holds the
                         same sweep unfinished, and its chart SCENARIO-sweep.svg
  GPU|DEVICE.json        a GPU preset (A100-80GB, H100-SXM, H200, ...: docs/node_model.md,
                         "GPU presets") or a GPU's specification as a JSON file
  KERNELS.csv            kernel shapes and measured times in NeuSight's schema
)";

constexpr std::string_view kExamples = R"(  tessera run scenarios/default.yaml --json
  tessera run scenarios/gpt3-175b.yaml --trace t.json.gz
  tessera sweep scenarios/scaling.yaml --set cluster.nodes=1,2,4,8,16
  tessera search scenarios/llama2-70b.yaml --json
  tessera compare-schedules scenarios/schedules.yaml --svg schedules.svg
  tessera help --man | man -l -
)";

constexpr std::string_view kExitCodes = R"(0 success; 1 simulation or internal error; 3 `run` of a plan that
does not fit in GPU memory (report printed; --allow-oom for 0), or `search` with
no plan that fits; 2 bad input (usage,
scenario file, unit string, data file, refused output path); 130 interrupted
(Ctrl-C or SIGTERM during run, sweep, search or validate: one line says what
was kept). Errors are one line on stderr.
)";

using Command = std::function<int(const tessera::cli::Args&, std::ostream&)>;

/// Flushes stdout; a report that could not be written (a full disk,
/// `> /dev/full`, a closed pipe) is an error, not a silent success.
int finish_stdout() {
  // errno names the cause only when this flush is the write that failed: a
  // write that failed while the command ran left an errno that later calls
  // overwrote (helper 102: `kernels > /dev/full` said "No such file").
  errno = 0;
  std::cout.flush();
  if (std::cout.good() && std::fflush(stdout) == 0 && std::ferror(stdout) == 0) return 0;
  const int cause = errno;
  std::cerr << "tessera: error: cannot write the output to stdout"
            << (cause != 0 ? std::string(": ") + std::strerror(cause)
                           : std::string(" (a write to it failed)"))
            << '\n';
  return 2;
}

/// `validate`'s help for one of its checks: the lines before the first
/// check, that check's paragraphs (each starts "  NAME "), and the lines
/// after the last check; the whole help for a name that is no check.
std::string validate_help_of(const std::string& text, const std::string& check) {
  static const std::regex kCheck(R"(^  (kernels|models|distributed|collectives|steps|training)( |$).*)");
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  bool known = false, in_check = false, seen_check = false;
  std::string out;
  for (const std::string& line : lines) {
    std::smatch m;
    if (std::regex_match(line, m, kCheck)) {
      seen_check = true;
      in_check = m[1] == check;
      known = known || in_check;
    } else if (seen_check && !line.empty() && line[0] != ' ') {
      in_check = true;  // the closing lines, after the checks, after a blank line
      seen_check = false;
      if (!out.ends_with("\n\n")) out += "\n";
    }
    if (!seen_check || in_check) out += line + "\n";
  }
  return known ? out : text;
}

/// Per-command help, printed by `tessera COMMAND --help`.
const std::map<std::string, std::string>& command_help() {
  static const std::map<std::string, std::string> kHelp{
      {"run",
       R"(usage: tessera run SCENARIO.yaml [--backend flow|ns3] [--predictor NAME] [--json] [--set KEY=VALUE]...
                   [--json-out FILE.json] [--trace FILE.json[.gz]] [--links FILE.csv] [--allow-oom]
                   [--trace-ranks LIST] [--trace-micro-batches LIST] [--trace-transfers on|off]
                   [--comm-breakdown]

Plans one training iteration of the scenario (docs/scenarios.md), simulates it
on the chosen network backend and prints: iteration time split into compute,
host, pipeline bubble and exposed communication; tokens/s; model and hardware
TFLOP/s per GPU (MFU, HFU); bytes sent; with pipeline stages each stage's
compute and layers (Stage balance; where the first or last stage computes
1.1x the fastest, the split of parallelism.first_stage_layers and
last_stage_layers that balances them best); memory per pipeline stage
(weights, gradients with their dtype, optimizer states, activations,
workspace). On the ns3 backend also the packet fabric: segment size, packets and payload
injected and delivered, packet-hops, drops, credit stalls, ns-3 events.

  --backend flow|ns3   override the scenario's backend (flow: max-min fluid
                       flows; ns3: packet-level ns-3, options in the scenario's
                       `ns3:` section, e.g. --set ns3.packets_per_segment=1)
  --json               print one JSON object instead (iteration_time_s,
                       compute_time_s, host_time_s, bubble_time_s, exposed_comm_time_s,
                       tflops_per_gpu, mfu, hardware_tflops_per_gpu, hfu,
                       tokens_per_s, ...)
  --set KEY=VALUE      override any scenario key, e.g. --set parallelism.tp=4
  --json-out FILE      also write the JSON report to FILE
  --trace FILE         write a Chrome/Perfetto trace (chrome://tracing, ui.perfetto.dev),
                       streamed while simulating; gzip-compressed when FILE ends in .gz
  --trace-ranks LIST   ranks the trace records, e.g. 0-7,64 (default: every rank up
                       to 64 GPUs, else one per pipeline stage)
  --trace-micro-batches LIST
                       micro-batches the trace records (default: all; tasks of no
                       micro-batch, such as the optimizer, always)
  --trace-transfers on|off
                       one slice per point-to-point transfer (default off: one
                       slice per collective and rank)
  --links FILE         write per-link bytes and utilization as CSV (on ns3 also
                       packets, credit-stall time and queue depths)
  The scenario's `outputs:` section (json, trace, links, trace_ranks,
  trace_micro_batches, trace_transfers) can name these too; the flags win.
  --allow-oom          exit 0 even when a pipeline stage does not fit in GPU memory
  --comm-breakdown     also what each class of communication costs: the iteration
                       again with that class free (tensor-parallel, expert
                       all-to-all, expert data-parallel, data-parallel, tied
                       embedding, pipeline), one more simulation each; each alone, so the
                       savings do not add up to the exposed communication
                       (JSON: comm_costs)

Exit codes: 0 ok, 1 simulation error, 2 bad input, 3 the plan does not fit in
GPU memory (the report is printed, and one line on stderr names the stage).
)"},
      {"sweep",
       R"(usage: tessera sweep SCENARIO.yaml --set KEY=V1,V2,... [--set KEY2=...] [--zip] [--skip-invalid]
                     [--skip-failed] [--out FILE.csv] [--svg FILE.svg] [--jobs N] [--shard I/N|auto]
                     [--backend flow|ns3] [--predictor NAME] [--json]

Runs every point of the grid of --set values (cartesian product, first key
outermost) on all cores, appends each point to the CSV as it finishes, and at
the end rewrites the CSV in point order and draws an SVG chart: throughput
against the first key given more than one value, or the key that sets the GPU
count wherever given (against the GPU count, on a log axis, with an
ideal-scaling line and a scaling-efficiency panel, when that key changes it),
one line per value of the other keys (a key of one value is a
setting, named under the chart). Running the same command again
resumes an interrupted sweep without redoing finished points (while it runs,
the CSV's first line names the sweep: the scenario's text and the settings;
an unfinished CSV of another sweep is an error, a finished CSV of the same
swept keys is run again and rewritten, so a changed scenario never keeps an
old row, and one of other keys is an error: remove it or give --out). Every
point is checked before any runs (an invalid one is an error naming it, or,
with --skip-invalid, left out and listed). In a node sweep dp follows the GPU count
when the scenario leaves parallelism.dp out; over one that fixes it, add
--set parallelism.dp=auto.

  --out FILE.csv       default SCENARIO-sweep.csv
  --svg FILE.svg       default: the CSV's name with .svg; the chart is SVG, so
                       its name ends in .svg (rsvg-convert makes a PNG of it)
  --jobs N             parallel points (default: all cores; ns-3 runs one at a time)
  --json               print one JSON object (every point's settings and metrics,
                       the CSV's columns; skipped and failed with their flags) instead
                       of the table
  --zip                pair the lists instead of crossing them: point i takes every
                       key's i-th value (lists of one length; a configuration per
                       point, e.g. nodes, dp and global batch of a scaling table),
                       drawn as one line
  --skip-invalid       leave out the points that are no valid scenario (e.g. a tp x pp
                       that does not divide the GPUs), naming each and why; the rest run
  --skip-failed        finish the sweep without the points whose simulation fails (an
                       ns-3 fabric that deadlocks), naming each and why, exit 0 (an
                       unsharded sweep whose every point fails is still the error); without
                       it every point runs, then the sweep is an error and stays
                       unfinished. A shard lists its failed points after its rows
                       (sweep-merge reads them); run again, it retries them
  --shard I/N|auto     run only the points with index % N == I; `auto` reads
                       Slurm (SLURM_ARRAY_TASK_ID/COUNT, MIN/STEP) or MPI
                       (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE) variables. Merge shards
                       with `tessera sweep-merge`.
)"},
      {"sweep-merge", R"(usage: tessera sweep-merge --out FILE.csv [--svg FILE.svg] [--json] SHARD.csv...

Merges the CSVs of a sharded sweep into the CSV and chart an unsharded sweep
would have written, and prints its table (with the scaling column of a node
sweep). Refuses shards of different sweeps, conflicting points and missing
points (the points a shard's --skip-failed left out are named, not missing).

  --svg    the chart, default: the CSV's name with .svg; the chart is SVG,
           so its name ends in .svg (rsvg-convert makes a PNG of it)
  --json   one object instead of the table: csv, svg, shards, points (each
           point's settings and metric columns, as sweep --json gives them
           from the CSV), skipped and failed
)"},
      {"search", R"(usage: tessera search SCENARIO.yaml [--top N] [--max-candidates M] [--jobs N] [--json]
                      [--schedules LIST] [--virtual-stages LIST] [--zero-stages LIST] [--grad-syncs LIST] [--memory-headroom SIZE] [--set KEY=VALUE]... [--backend flow|ns3] [--predictor NAME]

Finds the fastest parallel plan (dp, tp, pp, expert parallelism ep for a
mixture-of-experts model, micro-batch, schedule, recomputation) for the
scenario's cluster, model and global batch that fits in GPU memory:
enumerates plans, keeps the cheapest recomputation that fits, simulates up
to M candidates (default 64 per ZeRO stage and gradient sync tried) in
parallel and prints the top N (default 10).
When more than M plans fit, all of them are first screened by their
iteration with free communication (compute, host and the plan's own pipeline
bubble; no topology, no network) and the M most promising are simulated.
Prints the winner as --set flags and as YAML, and under the table the
scenario's own plan as `tessera run` forecasts it, against the winner.

  --top N              rows of the table (default 10)
  --max-candidates M   plans simulated at most (default 64 per ZeRO stage and
                       gradient sync tried)
  --jobs N             parallel simulations (default: all cores; ns-3 runs one
                       at a time)
  --schedules LIST     the pipeline schedules tried (default
                       1f1b,interleaved-1f1b,zb-h1,zb-h2; gpipe may be named;
                       all but gpipe and 1f1b need pp > 1; interleaved-1f1b
                       takes the fewest chunks from 2 up that split each
                       stage's layers evenly, unless --virtual-stages)
  --virtual-stages LIST  interleaved-1f1b's chunk counts tried (e.g. 2,4,5,10;
                       each at the pp whose stages' layers it splits evenly)
  --zero-stages LIST   try these ZeRO stages, not the scenario's alone (e.g.
                       0,1,3; the scenario's is tried only if listed; default:
                       the scenario's, kept): a zero column, and the winner's
                       stage in its flags and YAML. Plans without data
                       parallelism run at stage 0 without
                       overlap_param_gather (neither has an effect there),
                       the scenario's stage too
  --grad-syncs LIST    try these data-parallel gradient syncs (after-backward,
                       overlapped, overlap-grad-reduce; the scenario's only if
                       listed; default: the scenario's, kept): a grad sync
                       column, and the winner's in its flags and YAML. Plans
                       without data parallelism take the first sync listed
                       that makes a valid plan
  --memory-headroom SIZE  GPU memory a plan must leave free (e.g. 8GiB: CUDA
                       context, allocator fragmentation, NCCL buffers); the
                       plans kept rank by time alone (0B: every plan that
                       fits). Default: every plan that fits is kept, and those
                       tessera run warns may not fit (95% or more of a GPU's
                       memory, marked *) rank after the others
  --json               print one JSON object instead: "searched" (the tp, pp,
                       ep, micro_batch, schedules, recompute, zero_stages,
                       grad_syncs and virtual_stages ("auto" or the counts) values
                       enumerated, global_batch, seq_len, top,
                       max_candidates), the counts
                       (plans_considered, plans_invalid, plans_fit,
                       simulated, screened),
                       "candidates" (the top N ranked: rank, dp, tp, pp, ep,
                       micro_batch, schedule, virtual_stages, recompute,
                       zero_stage, grad_sync, peak_memory_bytes, "flags"
                       (the --set flags that run it) and "run", the object
                       `run --json` prints for the plan), "winner" (the
                       plan, its iteration_time_s, tokens_per_s, mfu,
                       peak_memory_bytes, "flags" and "yaml"),
                       "scenario_plan" (the scenario's own plan as run
                       forecasts it, against the winner: best_change; null
                       where it is not valid on this cluster) and
                       "failed" (plans whose simulation failed, with "error")

Writes no files; Ctrl-C or SIGTERM exits 130 with one line on stderr.
Exit codes: 0 ok, 1 simulation error (also when no simulated plan ran to the
end, unless the first one's input was at fault: 2), 2 bad input, 3 no plan
fits in GPU memory.
)"},
      {"compare-schedules", R"(usage: tessera compare-schedules SCENARIO.yaml
                                 [--schedules gpipe,1f1b,interleaved-1f1b,zb-h1,zb-h2]
                                 [--virtual-stages V1,V2,...] [--svg FILE.svg]
                                 [--set KEY=VALUE]... [--backend flow|ns3]
                                 [--predictor NAME] [--json]

Plans and simulates the scenario under each pipeline schedule (by default
all five) and prints iteration time, bubble (ms and share of the iteration,
as run prints it), exposed communication, compute, host, MFU and peak memory
per stage; --svg draws the iteration time split of each schedule and its
peak memory per GPU against the GPU's capacity (an SVG file: its name ends
in .svg; rsvg-convert makes a PNG of it). A note under the table says why
when zb-h2's times are zb-h1's (no more micro-batches than stages).

--virtual-stages 2,4 runs interleaved-1f1b once per chunk count (default:
the scenario's virtual_stages; when it does not interleave, the fewest
chunks from 2 up that split the layers evenly, as virtual_stages: auto);
a --set
parallelism.virtual_stages=N counts as --virtual-stages N, whatever the
scenario's schedule.

--json prints one object instead of the table: the scenario and its plan,
and per schedule its times in seconds, bubble_share, tokens_per_s, mfu and
peak memory (docs/cli.md).
)"},
      {"kernels",
       R"(usage: tessera kernels SCENARIO.yaml [--out FILE.csv] [--json] [--set KEY=VALUE]... [--predictor NAME]
                       [--backend flow|ns3]

Lists the kernels the scenario's model runs on one GPU, in model order: the
embeddings, one transformer layer (one MoE layer too, for a mixture of
experts) and the LM head with the loss, each operator's forward,
input-gradient and weight-gradient kernels, for one micro-batch on one
tensor-parallel rank (tp, sequence and expert parallelism as the plan
cuts them). Beside each: its dimensions, the time the node model gives it
(as the planner times it: GPU time under the Megatron profiles, the
kernel timed alone with its launch floor under pytorch-eager; a
node_model.overrides file applies), its TFLOP/s and GB/s; then each part's
forward, input-gradient and weight-gradient milliseconds, its GEMM time and
kernel count, and the same summed over the whole model. The schedule,
recomputation and the optimizer step are the planner's (tessera run).

  --out FILE.csv   one row per distinct kernel in the schema that
                   node_model.overrides reads (op,b,m,n,k,h,dtype,time_us)
                   plus tflops, gb_per_s and uses (where it runs): replace
                   time_us with your measurements and give the file as
                   node_model.overrides (docs/scenarios.md)
  --json           one JSON object instead of the text: the workload, each
                   kernel execution (part, op, pass, kernel, role: cast,
                   transpose or cast+transpose for fp8's Transformer Engine
                   kernels, else null, dtype, b, m, n, k, h, time_s,
                   tflops, gb_per_s, distinct_kernel: its row of --out) and
                   each part's sums in seconds (parts; the last, "model",
                   the whole model)

Example:
  tessera kernels scenarios/default.yaml --out default_kernels.csv
)"},
      {"collectives",
       R"(usage: tessera collectives SCENARIO.yaml [--out FILE.csv] [--json] [--set KEY=VALUE]... [--backend flow|ns3]
                           [--predictor NAME]

Lists the collectives of one training iteration of the scenario's plan, each
stage's distinct ones once: its role in the plan (the planner's task name without
micro-batch, layer and bucket numbers, e.g. layer.fwd.tp.all-reduce,
pp.send_activation, dp.grad.reduce-scatter.bucket), kind, per-rank buffer
size, group size, the nodes a group spans, the algorithm NCCL's rule picks
for it (collectives.algorithm) and how often a rank of each of its
pipeline stages calls it per iteration (stage: ranges such as 1-14, one row
for the stages that call it alike). Each is timed on the scenario's fabric
by its backend with the calibrated NCCL costs (calibration.*), as tessera
run times it: alone (one group) and with every group of its pipeline stage
at once, with the bus bandwidth in nccl-tests' convention, so that it can
be checked against nccl-tests on your own cluster. What the iteration
exposes of them (overlap with compute, waiting for other ranks) is tessera
run's.

  --out FILE.csv   the table as CSV (bytes, times in us, bus bandwidths in
                   GB/s; stage: the row's first stage, stages: all of them)
  --json           one JSON object instead of the text: the plan, each
                   collective (the CSV's columns, times in seconds, bus
                   bandwidths in bytes/s) and per_stage: each stage's sums
                   inside and across nodes, alone and together

Example:
  tessera collectives scenarios/gpt3-175b.yaml
)"},
      {"sensitivity",
       R"(usage: tessera sensitivity SCENARIO.yaml [--json] [--jobs N] [--set KEY=VALUE]... [--backend flow|ns3]
                           [--predictor NAME]

What each calibration constant (docs/calibration.md) is worth in this
forecast. Simulates the scenario as given and once more per constant, that
constant moved by one step from the value the scenario uses, the others
unchanged, and prints the iterations, largest change first:

  host time per kernel launch +1us, host data step per micro-batch +1ms,
  host time per pipeline send or receive +100us (Megatron's host model, or
  the host keys a pytorch-eager scenario gives; the last with pipeline
  stages only); per link class (NVLink with more than one GPU per node,
  network with more than one node): collective launch +10us, step latency
  +1us, bandwidth -1% (efficiency and group penalty x 0.99), arrival skew
  +10us; compute
  slowdown under an overlapping collective +0.05; GPU clock under load
  -1% (clock_derate x 0.99). A step that would leave its constant's range
  goes the other way (overlap slowdown -0.05 above 0.85, clock +1% at 0.1,
  bandwidth +1% at efficiency 0.01), so every constant keeps its row.

Each row names the --set that makes its step: `tessera run SCENARIO --set
...` reproduces its iteration. The constants that matter most are the ones
to measure on your own cluster and override (docs/calibration.md, "Your own
measurements"). calibration.host_iteration is not run: it adds itself.

  --json      one JSON object: iteration_time_s and, per step, constant,
              step, set (key: value), iteration_time_s, change_s, change
  --jobs N    simulations at once (default: the CPU count; ns3: one)

Example:
  tessera sensitivity scenarios/gpt3-175b.yaml --set training.global_batch=1536
)"},
      {"validate",
       R"(usage: tessera validate kernels|models|distributed|collectives|training|steps --data DIR [options]
       tessera validate collectives --nccl-tests FILE[,FILE...] --scenario CLUSTER.yaml [options]

--data may also be the folder above the datasets (../shared/data): kernels,
models and distributed then read its neusight/, training its vtrain/.

  kernels      MAPE per op class and GPU of the node model vs measured
               kernels (e.g. --data ../shared/data/neusight/kernels/test).
               Given XLA's GEMM table (--data ../shared/data/xla/gemm_h100.csv,
               detected by its header): MAPE per dtype of the GPU kernel time
               (predict_device), beside the FP32-twin method and the roofline.
                 --kfold N          retrain the tensor-core model per fold (folds
                                    by shape) and report held-out MAPE
                 --epochs N, --hidden 16[,16], --select min-time|min-roofline,
                 --drop-features F1,F2, --seed N   training options for --kfold
                 --predictor NAME, --weights DIR   the predictor, and weights
                                    train-predictor wrote (also for models)
                 --noise OTHER.csv  also print OTHER's latencies as predictions
                                    of the data's (the measurement noise floor)
               Given --device GPU (a preset such as H200, or a device JSON) and
               --data FILE.csv (NeuSight's schema with a dtype column, e.g.
               tests/data/h200/gemm.csv): MAPE, signed median and P90 of the GPU
               kernel time per op, dtype, source and pass, beside the roofline;
               --noise REPEAT.csv for the noise floor, --dtype for rows without one;
               --json: the table as one object (errors as fractions)
  models       end-to-end model latency vs measured, beside the sum of each
               run's own per-op measurements, with each GPU's mean and worst
               error (--data ../shared/data/neusight or .../labels)
  distributed  multi-GPU iterations vs measured (--data .../labels_distributed
               or a folder above it;
               the scenarios of scenarios/validation or --scenarios DIR, with
               --set KEY=VALUE, --backend, --predictor as in run; --json)
  collectives  NCCL collectives on one NVLink node vs measured (A100 nccl-tests,
               H100 XLA tables), MAPE per table, kind and group size, with the
               calibrated communication model (--data ../shared/data);
               --fit a100|h100|all|TABLE:KIND refits the NVLink calibration,
               --cv prints the cross-validation, --rows every row,
               --line-rate the uncalibrated model for comparison.
               Your own runs: --nccl-tests FILE[,FILE...] (nccl-tests'
               output, one run per file) --scenario CLUSTER.yaml (its
               cluster: section; model, training, plan not needed;
               --set KEY=VALUE overrides it as in run) times
               each row on that cluster; --fit nvlink|network|all fits the
               constants (runs on one host: NVLink; across hosts: network)
               and prints them as a calibration: section
  steps        whole one-GPU training steps measured on a GPU (--data
               tests/data/h200/steps.csv: plain PyTorch, bf16), each run as a
               one-GPU scenario (--gpu H200, --framework
               pytorch-eager|megatron|megatron-deepspeed,
               --set KEY=VALUE as in run); with an optimizer_ms column, also
               the forward+backward and optimizer errors; a tp column: one
               tensor-parallel rank's step (tests/data/h200/tp_steps.csv);
               a column named by a key path (training.optimizer, ...) sets
               that key for its row; --json the table as one object
               (errors as fractions, null where the data has no time)
  training     single-node Megatron-DeepSpeed iterations vs measured (vTrain,
               --data ../shared/data/vtrain): errors by plan family, tp,
               micro-batch and hidden size for A100-80GB and A100-40GB,
               and of the cost of one more micro-batch and one more layer,
               with an iteration's cost outside its micro-batches, a
               micro-batch's outside its layers and a layer's per
               micro-batch by tp
               (--gpu NAME for one); --set KEY=VALUE as in run (e.g.
               calibration.host_launch=40us); --fit fits the host calibration
               (docs/calibration.md); --cv K cross-validates it by
               profile (hidden, micro-batch, tp, pp), --cv hidden by
               model width (each hidden size predicted by a fit on the
               others); --every N takes every N-th run only (the
               shipped constants were fit with --every 2); --rows FILE
               writes every run's prediction (with --fit: the fitted
               constants'; with --cv: held out); --json the report and
               every run as one object (errors as fractions; with --fit
               or --cv, the fits, folds and verdict too). Your own runs
               (any GPU count) in
               vTrain's schema: --data RUNS.csv --scenario CLUSTER.yaml runs
               each as that scenario with the run's GPUs (cluster.nodes in
               whole nodes), model size, batch and plan, and any column
               named by a key path (parallelism.recompute, ...) sets that
               key for its run; --fit and --cv as above, --fit-only
               host_microbatch,host_iteration to fit only those
               (docs/calibration.md, "Your own measurements")

  kernels --leave-one-gpu-out --data ../shared/data/neusight/kernels
               [--gpu NAME] [--epochs N] [--max-rows N]
               for each GPU (or --gpu NAME alone), retrains the tile-mlp and
               linreg on the other GPUs' training rows and reports per-class
               MAPE on all of its rows (test and training) with its signed
               median, then the mean and worst over the held-out GPUs;
               --epochs and --max-rows (training rows per class) trade time
               for accuracy (defaults 60, 40000: 2.5 minutes on 2 idle cores)
Each prints the roofline baseline beside the learned model. See docs/node_model.md
and docs/parallelism.md.
)"},
      {"predict-kernels",
       R"(usage: tessera predict-kernels --device GPU|DEVICE.json --input KERNELS.csv --output OUT.csv
                               [--dtype fp32|tf32|fp16|bf16|fp8] [--device-time]
                               [--predictor tile-mlp|roofline|linreg|mlp] [--weights DIR]

Predicts every kernel of a NeuSight-schema CSV (OPName plus B,M,N,K or B,H;
op names in any case) and writes the rows with a Predicted_ms column (an
input's own Predicted_ms column, an earlier output's, is replaced). As in
NeuSight's schema, a GEMM is (B x M x N) @ (B x N x K): N is the reduction
dimension, not K (tessera kernels' k); an XLA table's m,n,k go in as
M=m, N=k, K=n (docs/node_model.md). An optional `dtype` column
(fp32 tf32 fp16 bf16 fp8, any case) gives each row's element type; --dtype
the type of rows without one (default fp32), vector rows included (under fp8
a softmax moves 1-byte elements; give such rows bf16 in the column to time
them as FP8 training runs them). tf32/fp16/bf16/fp8 GEMMs use the
tensor-core model (fp8 needs FP8FLOPs in the device config).

  --device-time   the GPU time of kernels queued back to back (no host
                  launch floor) instead of a kernel timed alone from PyTorch
  --weights DIR   the weights train-predictor wrote to DIR instead of the
                  built-in ones (a DIR with only tensor_core.txt keeps the
                  built-in FP32 tile-mlp)
)"},
      {"predict-model",
       R"(usage: tessera predict-model --model HF_CONFIG.json --device GPU|DEVICE.json --batch N --seq L
                             --mode inf|train [--dtype fp32|tf32|fp16|bf16] [--predictor NAME]
                             [--weights DIR] [--json]

Builds a HuggingFace model's operator graph as PyTorch eager runs it
(unfused kernels, as NeuSight measured) and sums the predicted kernel times:
end-to-end, forward and backward ms. model_type gpt2 (gpt_neo, gpt3: GPT-Neo's
local attention layers are priced as global ones), opt, bert or
switch_transformers; a null size (n_inner, intermediate_size) is Hugging
Face's default; the MLP activation from the config (gelu_new,
gelu, gelu_pytorch_tanh, relu). --mode inf: one forward pass of the whole
sequence (no KV cache); train: forward + backward, no optimizer step.
--dtype: the tensors' type (default fp32, what the 1-GPU runs it is
validated on measured; 16-bit is the rule table's eager 16-bit kernels,
unvalidated end to end; a config's torch_dtype is not read). --json: one
object with the model, device, batch, seq, mode, dtype, predictor,
e2e_ms, fw_ms, bw_ms. No memory check (tessera run has one).
)"},
      {"predict-graph", R"(usage: tessera predict-graph --graph OPGRAPH.csv --device GPU|DEVICE.json
                             [--predictor NAME] [--weights DIR] [--layers N] [--model HF_CONFIG.json]

Predicts every op of a torch.fx operator-graph CSV (NeuSight's labels/<GPU>/*.csv)
beside its measured latency, with the kernels and backward rules of
predict-model. A training graph (one with measured backward latencies) also
gets backward columns (backward plus gradient accumulation); in an inference
graph dropout is free. Totals count the ops of the repeated block (layer 0)
--layers times, else num_layer of the label JSON beside the graph, else once.
--model: the graph's HuggingFace config, which sizes the embedding tables
(their gradients are zeroed and accumulated whole); else NeuSight's
model_configs/<model>.json beside labels/ when there is one.
)"},
      {"train-predictor",
       R"(usage: tessera train-predictor --data DIR --out DIR [--xla DIR | --gemms FILE --device GPU]
                               [--devices DIR] [--only tile-mlp|tensor-core|linreg|mlp]
                               [--epochs N] [--max-rows N]

Trains the node-model predictors (tile-mlp, linreg, mlp) on kernel
measurements in NeuSight's CSV schema (DIR/<op>/<GPU>.csv; of a folder
with train/ and test/, or NeuSight's dataset root, the train/ rows only)
and, given --xla (a directory with gemm_h100.csv, or the file), the
tensor-core GEMM model on XLA's measured H100 table; writes weight files
(tile_mlp.txt, tensor_core.txt, linreg.txt, mlp.txt). Rebuild to embed
them, pass --weights DIR to the predict and validate kernels/models
commands, or forecast with them: node_model.weights: DIR in a scenario (or
--set node_model.weights=DIR on run, sweep, search, validate training...).

  --devices DIR                  the device config JSONs of --data's GPUs
                                 (default: device_configs/ beside or above
                                 --data); a row of another GPU is an error
  --only tensor-core --xla DIR   just the tensor-core model (no --data needed);
                                 --epochs, --hidden, --select, --drop-features,
                                 --seed then set its training
  --gemms FILE.csv[,FILE.csv] --device GPU
                                 instead of --xla: tensor-core GEMMs measured on
                                 one GPU (NeuSight's schema with a dtype column,
                                 e.g. tests/data/h100/gemm.csv; GPU a preset or
                                 a device JSON; a Device cell naming another
                                 GPU is an error)
)"},
  };
  return kHelp;
}

const tessera::cli::HelpText& help_text() {
  static const tessera::cli::HelpText kHelpText{kName,     kSynopsis, kDescription, kCommands,
                                                kFiles,    kExamples, kExitCodes,   &command_help()};
  return kHelpText;
}

/// The commands `tessera` dispatches: the one list that "did you mean" and
/// `tessera help NAME` check a name against.
const std::map<std::string, Command>& commands_table() {
  static const std::map<std::string, Command> kTable{
      {"run", tessera::cli::cmd_run},
      {"sweep", tessera::cli::cmd_sweep},
      {"sweep-merge", tessera::cli::cmd_sweep_merge},
      {"search", tessera::cli::cmd_search},
      {"compare-schedules", tessera::cli::cmd_compare_schedules},
      {"kernels", tessera::cli::cmd_kernels},
      {"collectives", tessera::cli::cmd_collectives},
      {"sensitivity", tessera::cli::cmd_sensitivity},
      {"predict-kernels", tessera::cli::cmd_predict_kernels},
      {"predict-model", tessera::cli::cmd_predict_model},
      {"predict-graph", tessera::cli::cmd_predict_graph},
      {"validate", tessera::cli::cmd_validate},
      {"train-predictor", tessera::cli::cmd_train_predictor},
  };
  return kTable;
}

/// Every command's name (the keys of the dispatch table), for "did you mean".
std::vector<std::string> command_names() {
  std::vector<std::string> out;
  for (const auto& [name, fn] : commands_table()) out.push_back(name);
  return out;
}

const std::string& usage() {
  static const std::string kUsage = tessera::cli::format_usage(help_text());
  return kUsage;
}

/// `message` on one line: a value that held a line break (a YAML block
/// scalar, a job name with \n) broke the one-line error in two or three
/// (helper 179); line breaks and other control characters are written as
/// escapes.
std::string one_line(std::string_view message) {
  std::string out;
  out.reserve(message.size());
  for (const char c : message) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  const auto& commands = commands_table();
  // Bare `tessera` is a usage error: usage on stderr, exit 2.
  if (argc < 2) {
    std::cerr << usage();
    return 2;
  }
  if (std::strcmp(argv[1], "--version") == 0 || std::strcmp(argv[1], "version") == 0) {
    std::cout << "tessera " << TESSERA_VERSION << '\n';
    return finish_stdout();
  }
  if (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "help") == 0) {
    // `tessera help --man`: the same text as a man page.
    if (argc >= 3 && std::strcmp(argv[2], "--man") == 0) {
      std::cout << tessera::cli::format_man_page(help_text(), TESSERA_VERSION);
      return finish_stdout();
    }
    // `tessera help COMMAND` is `tessera COMMAND --help`.
    if (argc >= 3) {
      if (commands.count(argv[2]) == 0) {
        std::cerr << fmt::format("tessera: error: unknown command '{}'{} (see 'tessera --help')\n", argv[2],
                                 tessera::did_you_mean(argv[2], command_names()));
        return 2;
      }
      const auto& help = command_help();
      auto h = help.find(argv[2]);
      const std::string text = h != help.end() ? h->second : usage();
      // (`tessera help validate training` is `validate training --help`)
      std::cout << (std::string_view(argv[2]) == "validate" && argc > 3 ? validate_help_of(text, argv[3])
                                                                        : text);
      return finish_stdout();
    }
    std::cout << usage();
    return finish_stdout();
  }
  const std::string name = argv[1];
  auto it = commands.find(name);
  if (it == commands.end()) {
    std::cerr << fmt::format("tessera: error: unknown command '{}'{} (see 'tessera --help')\n", name,
                             tessera::did_you_mean(name, command_names()));
    return 2;
  }
  const tessera::cli::Args args(argv + 2, argv + argc);
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") {
      const auto& help = command_help();
      auto h = help.find(name);
      const std::string text = h != help.end() ? h->second : usage();
      // `tessera validate training --help`: that check's part of the help
      // (helper 78: it printed all six).
      // (the first argument that names a check: an option's value may come
      // before it, `validate --data X training --help`; helper 84)
      const auto sub = std::find_if(args.begin(), args.end(), [](const std::string& x) {
        return x == "kernels" || x == "models" || x == "distributed" || x == "collectives" ||
               x == "training" || x == "steps";
      });
      std::cout << (name == "validate" && sub != args.end() ? validate_help_of(text, *sub) : text);
      return finish_stdout();
    }
  }
  try {
    const int rc = it->second(args, std::cout);
    const int out_rc = finish_stdout();
    return rc != 0 ? rc : out_rc;
  } catch (const std::bad_alloc&) {
    // A valid but huge input: one line and the bad-input code, not a crash.
    std::cerr << "tessera: error: out of memory: the scenario or input is too large to simulate on this machine "
                 "(see the limits in docs/scenarios.md)\n";
    return 2;
  } catch (const tessera::InputError& e) {
    std::cerr << "tessera: error: " << one_line(e.what()) << '\n';
    return 2;
  } catch (const tessera::cli::OutOfMemoryError& e) {
    std::cerr << "tessera: out of memory: " << one_line(e.what()) << '\n';
    return 3;
  } catch (const tessera::Error& e) {
    std::cerr << "tessera: simulation error: " << one_line(e.what()) << '\n';
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "tessera: internal error: " << one_line(e.what()) << '\n';
    return 1;
  }
}
