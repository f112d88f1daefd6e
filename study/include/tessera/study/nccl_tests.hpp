#pragma once
// A user's own nccl-tests runs (the standard output of all_reduce_perf,
// all_gather_perf, ...): read, each row timed on a scenario's cluster with
// the scenario's calibration, and the NVLink and network constants of the
// communication model fit to them. Behind `tessera validate collectives
// --nccl-tests` (docs/calibration.md, "Your own nccl-tests").
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/engine/comm_calibration.hpp"
#include "tessera/parallelism/task_graph.hpp"
#include "tessera/study/scenario.hpp"
#include "tessera/topology/topology.hpp"
#include "tessera/units.hpp"

namespace tessera::study {

/// One rank as nccl-tests lists it ("#  Rank  3 Group  0 Pid 4242 on node7
/// device  3 [0x..] NVIDIA ...").
struct NcclTestsRank {
  std::string host;
  int device = 0;
  /// The GPU's name the rank line ends with ("NVIDIA H100 80GB HBM3", after
  /// the bus id); empty when the line has none.
  std::string gpu;
};

/// One measured size: nccl-tests' `size` (bytes, in its convention, which
/// is Tessera's CollectiveKind convention: the all-gather's gathered output,
/// the reduce-scatter's input, the all-to-all's whole buffer) and its
/// out-of-place time.
struct NcclTestsRow {
  std::size_t line = 0;  ///< 1-based line in the file
  Bytes size;
  Time measured;
};

/// One nccl-tests run: one test over one communicator of every listed rank.
struct NcclTestsLog {
  std::string file;
  std::string test;  ///< "all_reduce_perf", ...
  parallelism::CollectiveKind kind = parallelism::CollectiveKind::AllReduce;
  std::vector<NcclTestsRank> ranks;  ///< indexed by rank
  std::vector<std::string> hosts;    ///< in order of first appearance
  std::vector<NcclTestsRow> rows;    ///< rows of more than 0 bytes, in file order
  int empty_rows = 0;                ///< rows of 0 bytes (tiny all-gathers), skipped
};

/// Reads the standard output of one nccl-tests run. The test comes from its
/// "# Collective test starting: NAME" line or else from the file name
/// (all_reduce, reduce_scatter, all_gather, alltoall, sendrecv, broadcast,
/// reduce); columns from its header line (any nccl-tests version: `size`
/// and the first `time`, the out-of-place one, in microseconds). Lines that
/// are neither comments nor rows (NCCL_DEBUG output) are skipped. Throws
/// InputError naming the file (and the line) for a file that is not
/// nccl-tests output, an unknown test, a cell that is not a number, ranks
/// missing or listed twice, or a second run in the same file.
[[nodiscard]] NcclTestsLog parse_nccl_tests(std::string_view text, const std::string& file);

/// The GPUs of `s`'s cluster that ran `log`'s ranks, by rank: the i-th host
/// is node i, device d its GPU d (node x gpus_per_node + d). Throws
/// InputError naming the file when the cluster has too few nodes or GPUs.
[[nodiscard]] std::vector<int> nccl_tests_gpus(const NcclTestsLog& log, const Scenario& s);

/// Nodes the run spans (its hosts).
[[nodiscard]] inline int nccl_tests_nodes(const NcclTestsLog& log) {
  return static_cast<int>(log.hosts.size());
}

/// One row's collective alone on `topo` (build_topology(s)) by `s`'s backend
/// with execution_options(s): the same transfer graphs and calibrated costs
/// a training iteration's collectives get.
[[nodiscard]] Time time_nccl_tests_row(const Scenario& s, const topology::Topology& topo,
                                       const NcclTestsLog& log, const std::vector<int>& gpus, Bytes size);

struct NcclTestsFitClass {
  bool fitted = false;
  bool step_fitted = false;             ///< the runs held two step counts or more
  bool penalty_fitted = false;          ///< the runs held two group sizes or more (else the scenario's)
  engine::LinkCalibration calibration;  ///< the scenario's, with peak, penalty, launch (and step) fitted
  std::size_t files = 0;
  std::size_t rows = 0;
  int smallest_group = 0, largest_group = 0;  ///< the runs' group sizes (ranks) fitted on
};

struct NcclTestsFit {
  NcclTestsFitClass nvlink;   ///< from the runs on one host
  NcclTestsFitClass network;  ///< from the runs across hosts
};

/// Fits the NVLink class to the runs on one host and then the network class
/// (with that NVLink class) to the runs across hosts, each only when asked
/// and when it has rows of engine::kCollectiveFitMinBytes and more: peak efficiency,
/// group penalty (only when the class's runs have two group sizes or more;
/// 0 otherwise), launch latency and, when the runs put two different
/// numbers of steps on their critical paths (rings of different sizes, a
/// send-recv beside an all-reduce), the step latency (0-50 us; otherwise
/// the scenario's), minimising the weighted MAPE of time (each file weighs
/// the same; within a file each row the log-size interval it stands for)
/// with engine::fit_link_calibration. Every row is timed on the scenario's
/// cluster three times, which gives its time as a + k x step + b /
/// efficiency (exact within one link class; across hosts, where NVLink hops
/// join the network ones, the network hops carry it); the skew stays the
/// scenario's. Deterministic.
[[nodiscard]] NcclTestsFit fit_nccl_tests(const Scenario& s, const topology::Topology& topo,
                                          const std::vector<NcclTestsLog>& logs, bool nvlink, bool network);

}  // namespace tessera::study
