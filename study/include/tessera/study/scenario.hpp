#pragma once
// The scenario model: what a scenario file describes, fully validated, as
// plain Tessera types (no YAML here: cli's loader builds it), and what the
// pipeline derives from it (the GPU as the node model times it, the fabric
// with its failures, the node model with its overrides).
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/collectives/expand.hpp"
#include "tessera/engine/comm_calibration.hpp"
#include "tessera/error.hpp"
#include "tessera/node_model/gpu_spec.hpp"
#include "tessera/node_model/overrides.hpp"
#include "tessera/node_model/workload.hpp"
#include "tessera/parallelism/plan.hpp"
#include "tessera/parallelism/transformer.hpp"
#include "tessera/topology/fabrics.hpp"
#include "tessera/topology/topology.hpp"

namespace tessera::study {

/// The keys study::check_work names for an iteration too large to simulate
/// (the loader records where each was written: Scenario::key_locations).
inline constexpr std::array<const char*, 11> kWorkKeys = {
    "training.global_batch",   "training.micro_batches", "training.micro_batch", "model.layers",
    "parallelism.tp",          "collectives.chunks",     "parallelism.dp",       "cluster.nodes",
    "parallelism.bucket_size", "parallelism.pp",         "parallelism.ep"};
/// The keys that warnings and errors only a forecast can give open with (an
/// ns3.buffer below a link's credit round trip, a cable failing after the
/// iteration, one collectives.algorithm a collective the plan runs lacks):
/// the loader records where each was written (Scenario::key_locations), so
/// they are placed as the loader's are.
inline constexpr std::array<const char*, 3> kRunWarningKeys = {"ns3.buffer", "failures",
                                                               "collectives.algorithm"};
/// The keys an iteration too slow or too long to simulate is blamed on (a
/// bandwidth that cannot carry a transfer, a latency or host cost past a
/// day): recorded as kWorkKeys are, so the error is placed at the key or
/// its --set (helper 179: `--set cluster.nic_bandwidth=1bps` named neither).
inline constexpr std::array<const char*, 20> kSimulationKeys = {
    "cluster.nvlink_bandwidth",      "cluster.nic_bandwidth",
    "cluster.pcie_bandwidth",        "cluster.fabric.spine_bandwidth",
    "cluster.fabric.core_bandwidth", "cluster.nvlink_latency",
    "cluster.nic_latency",           "cluster.pcie_latency",
    "cluster.fabric.spine_latency",  "cluster.fabric.core_latency",
    "collectives.auto_latency",      "calibration.host_launch",
    "calibration.host_iteration",    "calibration.host_p2p",
    "calibration.host_microbatch",   "calibration.nvlink_launch",
    "calibration.nvlink_step",       "calibration.network_launch",
    "calibration.network_step",      "failures.degraded_rate"};

class ScenarioError : public InputError {
 public:
  using InputError::InputError;
  /// An error at `where` (the file, with its line and column, or with the
  /// command-line option that set the key: "s.yaml (--set KEY)"): the
  /// message is "WHERE: DETAIL". `option` names that option, if any.
  ScenarioError(const std::string& where, std::string detail, std::string option = {})
      : InputError(where + ": " + detail),
        where_(where),
        detail_(std::move(detail)),
        option_(std::move(option)) {}
  /// The location ("s.yaml:12:3"); empty for errors built from one string.
  [[nodiscard]] const std::string& where() const { return where_; }
  /// The message without its location ("KEY.PATH: what is wrong"): what a
  /// caller that generated the YAML names by its own source instead. Empty
  /// for errors built from one string.
  [[nodiscard]] const std::string& detail() const { return detail_; }
  /// The command-line option that set the offending key ("--set KEY",
  /// "--backend"); empty when the key came from the YAML.
  [[nodiscard]] const std::string& option() const { return option_; }

 private:
  std::string where_, detail_, option_;
};

/// A network backend by its name (backend.hpp: "flow", "ns3", or one a
/// caller registers).
struct Backend {
  std::string name = "flow";
  bool operator==(const Backend&) const = default;
};
enum class FabricKind { LeafSpine, FatTree, RailOptimized };
std::string_view to_string(FabricKind f);
struct Scenario;
/// fabric_name of a one-node cluster written without a fabric.
inline constexpr std::string_view kNoFabric = "none";
/// The fabric as reports name it: "leaf-spine", "fat-tree", "rail-optimized",
/// or kNoFabric ("none") for a one-node cluster written without one.
std::string_view fabric_name(const Scenario& s);
/// What the reports add to the fabric's name: for a fat-tree whose tiers
/// the scenario left to the cluster's size (`tiers: auto`), ", 3 tiers by
/// tiers: auto"; where the fullest leaf's hosts can send more than its
/// up-links carry, ", 2:1 at the leaves" (host bandwidth into the leaf
/// over its up-links'); where a fat-tree's spines' core links carry less
/// than their leaf links, ", 2:1 at the spines"; and where the HCAs
/// fill more than one leaf, the leaves' size: ", 3 nodes per leaf" (a
/// fraction where nodes straddle leaves, ", a node across 2 leaves"), a
/// rail-optimized fabric's ", rail groups of 16 nodes" past one group;
/// otherwise empty.
std::string fabric_detail(const Scenario& s);
/// Host bandwidth into the fullest leaf over its up-links' (1 or less:
/// non-blocking). HCAs fill leaves in order, so the first leaf is full when
/// there are two; a rail leaf holds one HCA per node, at most its ports. 0
/// for a leaf-spine or fat-tree whose HCAs all fit on one leaf (nothing
/// crosses the spines) and for a cluster written without a fabric.
double leaf_oversubscription(const Scenario& s);
/// A 3-tier fat-tree's spine oversubscription where the cluster spans pods,
/// a 3-tier rail-optimized fabric's where it has more than one rail
/// (topology::spine_oversubscription); 0 for every other fabric.
double spine_oversubscription(const Scenario& s);
/// The nodes one leaf serves: a leaf-spine or fat-tree leaf's host ports
/// over a node's HCAs (fractional where nodes straddle leaves, below 1
/// where a node spans leaves), a rail leaf's host ports (its rail group:
/// one HCA of each of its nodes); 0 for a cluster written without a
/// fabric. Where the leaf boundary falls decides what crosses the spines.
double nodes_per_leaf(const Scenario& s);
/// The switch tiers between the nodes: 0 for a one-node cluster written
/// without a fabric, 2 for a leaf-spine or rail-optimized fabric, a
/// fat-tree's tiers (as `tiers: auto` chose them).
int fabric_tiers(const Scenario& s);
/// A built-in backend's name (built_in_backends()); throws InputError
/// "unknown backend 'x' (expected flow or ns3)" otherwise.
Backend parse_backend(const std::string& text);
std::string_view to_string(const Backend& b);

/// Fitted constants of the models (docs/calibration.md), each a scenario key
/// under `calibration:` with the default below and the data it was fit on.
struct Calibration {
  /// Host time per kernel launch or collective call of a Megatron rank
  /// (Python, PyTorch dispatch, CUDA launch).
  Time host_launch;
  /// Host time per iteration outside the launches (optimizer bookkeeping).
  Time host_iteration;
  /// Host time per pipeline send or receive beyond its launch.
  Time host_p2p;
  /// Host time at the start of each micro-batch's forward step, after the
  /// GPU drained (parallelism::HostOverhead::per_micro_batch).
  Time host_microbatch;
  /// NCCL's costs (engine::CommCalibration; docs/collectives.md, "Calibration").
  engine::CommCalibration comm;
  /// Sustained fraction of the datasheet peaks the GPU's kernels run at
  /// (clocks under load): the node model sees the peaks times this. MFU is
  /// still against the datasheet peak.
  double clock_derate = 1.0;
};
/// The shipped defaults for `gpu` under `framework` (docs/calibration.md).
Calibration default_calibration(const node_model::GpuSpec& gpu, node_model::Framework framework);

/// The `ns3:` section: options of the packet-level ns-3 backend
/// (ns3_modules::Ns3Options, docs/scenarios.md and docs/ns3_modules.md), held
/// in plain Tessera types so that the CLI compiles without ns-3. Read with any
/// backend; the flow backend ignores them.
struct Ns3Settings {
  enum class Model { InfiniBand, PointToPoint };
  /// Messages inside a node's NVLink domain: flows (the flow backend's
  /// model, on the same clock) or packets through the NVSwitch.
  enum class ScaleUp { Flow, Packets };
  /// Segment coarsening chosen by measurement: iteration times within 1% of
  /// exact 4 KiB packets (packets_per_segment 1) on the shipped scenarios
  /// (docs/ns3_modules.md, "Segment size").
  static constexpr int kDefaultPacketsPerSegment = 32;
  static constexpr int kMaxPacketsPerSegment = 4096;
  static constexpr int kMaxVls = 15;
  /// Wire bytes per MTU packet besides payload by default (Ns3Options::
  /// header_bytes: LRH, BTH, CRCs and delimiters); `ns3.header_bytes` sets it.
  static constexpr Bytes kHeaderBytes{30};
  static constexpr Bytes kMaxHeaderBytes{256};
  /// Wire bytes per packet besides payload under the point-to-point model
  /// (ns3_modules::Ns3Network::kPacketOverhead: Tessera's header and PPP's).
  static constexpr Bytes kPointToPointOverhead{18};

  Model model = Model::InfiniBand;
  int packets_per_segment = kDefaultPacketsPerSegment;  ///< 1..4096 (InfiniBand)
  Bytes mtu = Bytes::kib(4);                            ///< 256, 512, 1024, 2048 or 4096 B
  int num_vls = 1;                                      ///< 1..15 (InfiniBand)
  bool adaptive_routing = false;                        ///< InfiniBand
  /// Receive buffer per input port and VL; zero = sized per link to cover the
  /// credit round trip (InfiniBand).
  Bytes buffer{0};
  ScaleUp scale_up = ScaleUp::Flow;
  /// Wire bytes per MTU packet besides payload (InfiniBand; 40 more with a
  /// GRH, 16 more for an RDMA write's RETH). 0..kMaxHeaderBytes.
  Bytes header_bytes = kHeaderBytes;
  /// Switches forward a packet once its headers are in (true), or once all
  /// of it is (store-and-forward). InfiniBand.
  bool cut_through = true;
};
std::string_view to_string(Ns3Settings::Model m);
std::string_view to_string(Ns3Settings::ScaleUp s);

struct Job;

struct Scenario {
  std::string file;
  std::string name;
  node_model::GpuSpec gpu;
  topology::LeafSpineSpec cluster;
  parallelism::TransformerConfig model;
  parallelism::Workload workload;
  parallelism::ParallelPlan plan;  ///< `parallelism:` plus training.global_batch
  /// `parallelism.virtual_stages` left out or `auto`: plan.virtual_stages
  /// was chosen for the schedule and the split (what the uneven-split
  /// warning says to paste depends on it).
  bool virtual_stages_auto = false;
  /// The batch was given as training.micro_batches (per data-parallel
  /// replica; plan.global_batch follows dp), not as global_batch.
  bool batch_as_micro_batches = false;
  /// `cluster` always holds the node and HCA fields; its leaf-spine fields
  /// are used when fabric == LeafSpine, fat_tree / rail otherwise.
  FabricKind fabric = FabricKind::LeafSpine;
  /// false: a one-node cluster written without `cluster.fabric`; `fabric`
  /// then holds the stand-in its HCAs sit on, which carries no traffic.
  bool fabric_written = true;
  topology::FatTreeSpec fat_tree;
  /// `cluster.fabric.tiers: auto`: fat_tree.tiers (or rail.tiers, on a
  /// rail-optimized fabric) was chosen for the cluster's size (the fewest
  /// that hold its HCAs).
  bool fabric_tiers_auto = false;
  /// `cluster.fabric.tiers` left out: auto, which the reports name only
  /// where it built 3 tiers.
  bool fabric_tiers_default = false;
  /// `cluster.fabric.routing: adaptive`: the flow backend routes each flow
  /// over the least loaded equal-cost links (engine::FlowNetwork::
  /// set_adaptive_routing), and the ns-3 backend routes adaptively unless
  /// `ns3.adaptive_routing` is written false; static destination-mod-k
  /// tables otherwise.
  bool fabric_adaptive_routing = false;
  topology::RailOptimizedSpec rail;
  collectives::ExpandOptions collectives;
  Calibration calibration;
  std::string predictor = "tile-mlp";
  /// `node_model.weights`: the folder `tessera train-predictor` wrote the
  /// predictor's weights to (resolved against the scenario's directory);
  /// empty: the weights built in.
  std::string predictor_weights;
  /// `node_model.overrides`: measured kernel times that replace the
  /// predictor's for the kernels they hold (null: none). Read and checked
  /// when the scenario is loaded.
  std::shared_ptr<const node_model::KernelTimeTable> kernel_overrides;
  Backend backend;  ///< `backend:` (flow by default)
  Ns3Settings ns3;  ///< `ns3:` (used with backend ns3 only)
  /// `outputs:` files `tessera run` writes besides its summary (paths
  /// relative to the working directory; empty = not written). The flags
  /// --json-out, --trace and --links override them.
  struct Outputs {
    std::string json;   ///< the JSON report
    std::string trace;  ///< Chrome/Perfetto trace (as --trace)
    std::string links;  ///< per-link CSV (as --links)
    /// What the trace records (as --trace-ranks, --trace-micro-batches,
    /// --trace-transfers; cli::TraceOptions): empty lists are the defaults.
    std::vector<int> trace_ranks;
    std::vector<int> trace_micro_batches;
    bool trace_transfers = false;
  } outputs;

  /// `mixed_gpus:` nodes that hold another GPU type (the node model times
  /// their kernels on it; each stage's memory is checked against the
  /// smallest GPU among its ranks, stage_memory_capacity).
  struct MixedGpus {
    node_model::GpuSpec gpu;
    std::vector<int> nodes;
  };
  std::optional<MixedGpus> mixed_gpus;
  /// `failures:` cables by their two ends' vertex names (applied by
  /// build_topology, which checks the names and that every GPU is reachable).
  struct Failures {
    std::vector<std::pair<std::string, std::string>> failed;    ///< out of service from the start
    std::vector<std::pair<std::string, std::string>> degraded;  ///< running at degraded_rate from the start
    double degraded_rate = 1.0;
    /// Entries with `at:`: the cable fails (or degrades to degraded_rate)
    /// at that simulated time (timed_cable_changes, backend.hpp).
    struct Timed {
      std::string a, b;
      Time at;
      bool fail = true;  ///< false: degraded
      bool operator==(const Timed&) const = default;
    };
    std::vector<Timed> timed;
    /// Whether any cable fails or degrades.
    [[nodiscard]] bool any() const { return !failed.empty() || !degraded.empty() || !timed.empty(); }
    /// A cable as reports name it: its two ends, "leaf0-spine1".
    [[nodiscard]] static std::string cable_name(const std::string& a, const std::string& b) {
      return a + "-" + b;
    }
    /// Where an entry was written, for errors found once the fabric is
    /// built: ScenarioError's location ("s.yaml:34:7", or "s.yaml (--set
    /// KEY)" with `option`) and the key path ("failures.links[1]").
    struct Source {
      std::string where, path, option;
    };
    /// Each named cable's source, by its two ends in order (std::minmax);
    /// `links` that of the `failures.links` key. Empty for a scenario built
    /// in code: errors then name the file and the key.
    std::map<std::pair<std::string, std::string>, Source> sources;
    std::optional<Source> links;
  } failures;
  /// `stragglers:` per GPU (index = rank): its compute takes this times the
  /// node model's time (engine::ExecutionOptions::compute_scale); empty:
  /// every GPU at its predicted speed.
  std::vector<double> compute_scale;
  /// Several jobs on one fabric (`jobs:`, docs/scenarios.md): empty for a
  /// single-job scenario. With jobs, this scenario is the cluster and every
  /// shared section (its model, training and plan are a stand-in: one
  /// data-parallel rank per GPU); each job has its own.
  std::vector<Job> jobs;
  std::string placement;  ///< `placement:` of the jobs given by count: packed, spread or random
  std::uint64_t placement_seed = 0;  ///< `placement.seed` with placement random (default 1); 0 otherwise
  /// What the loader found legal but likely unintended (one line each, no
  /// "warning:" prefix), e.g. a tensor-parallel group spanning nodes;
  /// `tessera run` prints them on stderr.
  std::vector<std::string> warnings;
  /// Where a warning is about, as errors say it: "file:line:col" of the key
  /// path it opens with (of the deepest part of it the file writes), or
  /// "file (--set KEY)" where the command line set it; a warning opening
  /// with no key of the file has no entry (its file is said).
  std::map<std::string, std::string> warning_locations;
  /// Where the keys study::check_work may name (kWorkKeys) and those a
  /// forecast's own warnings open with (kRunWarningKeys) were written, as
  /// Section::location gives it: {"file:line:col", ""} or {"file (--set
  /// KEY)", "--set KEY"}; a key the file does not write has no entry.
  std::map<std::string, std::pair<std::string, std::string>> key_locations;
  /// The inline GPU's spec keys (`cluster.gpu.sms`, ...) among the warnings
  /// as no GPU's (a unit slip): keys that change kernel times, which an
  /// iteration too long to simulate then names beside the workload's.
  std::vector<std::string> suspect_gpu_keys;
  /// `training.tokens`: the tokens the whole training run processes (0: not
  /// given); with it the reports give the run's time and GPU-hours
  /// (study::training_run).
  double train_tokens = 0;
  /// `cluster.price_per_gpu_hour` (in the user's currency): with
  /// train_tokens, the run's cost.
  std::optional<double> price_per_gpu_hour;

  [[nodiscard]] int gpus() const { return cluster.nodes * cluster.gpus_per_node; }
};

/// One job of a multi-job scenario.
struct Job {
  std::string name;
  std::vector<int> nodes;  ///< the cluster's nodes it runs on; job rank r is on nodes[r / gpus_per_node]
  Scenario scenario;       ///< the job alone, on nodes.size() nodes (its plan validated for its GPUs)
};

/// The GPU as the node model times it: the scenario's GPU with its peaks
/// scaled by calibration.clock_derate.
node_model::GpuSpec kernel_gpu(const Scenario& s);

/// Throws ScenarioError when `s` has several jobs: `command` (sweep, search,
/// compare-schedules) runs one job's plan; `tessera run` runs jobs.
void require_single_job(const Scenario& s, std::string_view command);

/// The scenario's kernel predictor: `predictor` for the GPU as the node
/// model times it (kernel_gpu), wrapped in a node_model::OverridePredictor
/// when the scenario has `node_model.overrides`.
std::unique_ptr<node_model::KernelPredictor> make_scenario_predictor(const Scenario& s);

/// The scenario's network, built from its fabric spec.
topology::Topology build_topology(const Scenario& s);

/// An error about the cable a-b of `failures.KEY` (links or degraded),
/// at the entry that named it (Failures::sources: "s.yaml:34:7:
/// failures.links[1]: a-b: WHY"), else naming the file and the key.
ScenarioError failure_error(const Scenario& s, const char* key, const std::string& a, const std::string& b,
                            const std::string& why);

}  // namespace tessera::study
