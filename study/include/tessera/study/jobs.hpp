#pragma once
// Several jobs on one fabric (`jobs:` in a scenario, docs/scenarios.md,
// "Several jobs"): every job planned alone, their task graphs placed on the
// cluster's GPUs and run in one simulation on one network, and each job run
// alone on the same GPUs for its slowdown.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/parallelism/task_graph.hpp"
#include "tessera/study/backend.hpp"
#include "tessera/study/pipeline.hpp"
#include "tessera/study/scenario.hpp"
#include "tessera/topology/topology.hpp"
#include "tessera/units.hpp"

namespace tessera::study {

/// Pure: one graph over `total_ranks` ranks (the cluster's GPUs) holding
/// every graph of `jobs`, rank r of job j becoming rank gpu_of[j][r];
/// programs and groups are shared, not copied per rank; GPUs no job uses
/// run an empty program. Throws InputError when a GPU is given twice or a
/// job's mapping does not cover its ranks.
parallelism::TaskGraph place_jobs(const std::vector<const parallelism::TaskGraph*>& jobs,
                                  const std::vector<std::vector<int>>& gpu_of, int total_ranks);

/// Pure: nodes for jobs placed by count under `placement: random`. The
/// free nodes are shuffled by Fisher-Yates driven by splitmix64 seeded with
/// `seed` (self-contained: the same on every platform and standard library)
/// and dealt out in job order, counts[j] to job j; each job's nodes are then
/// sorted. Throws InputError when the counts exceed the free nodes.
std::vector<std::vector<int>> random_placement(std::vector<int> free_nodes, const std::vector<int>& counts,
                                               std::uint64_t seed);

/// GPUs whose compute the `stragglers:` section scales (Scenario::
/// compute_scale), split by direction: a factor above 1 is slower than
/// predicted, below 1 faster (a slowdown under 1, or the random draw's lower
/// half; helper 106: every factor other than 1 was counted slower).
struct ComputeScales {
  int slower = 0;
  double max_scale = 1.0;  ///< the largest factor of the slower GPUs (1 if none)
  int faster = 0;
  double min_scale = 1.0;  ///< the smallest factor of the faster GPUs (1 if none)
  void add(double f) {
    if (f > 1.0) {
      max_scale = slower++ == 0 ? f : std::max(max_scale, f);
    } else if (f < 1.0) {
      min_scale = faster++ == 0 ? f : std::min(min_scale, f);
    }
  }
  [[nodiscard]] bool any() const { return slower + faster > 0; }
};

/// One directed link as one job used it in the shared run.
struct JobLink {
  topology::LinkId link = -1;
  std::string src, dst;  ///< vertex names, as in link CSVs
  std::string tier;      ///< topology::to_string(LinkTier)
  double bytes = 0.0;    ///< payload this job's ranks sent over it
  double share = 0.0;    ///< of every job's bytes on it, in [0, 1]
  /// bytes / (its bandwidth x the job's shared iteration time): the part of
  /// the link's capacity over the job's iteration that the job used.
  double utilization = 0.0;
};

/// The busiest links listed per job (JobOutcome::busiest_links).
inline constexpr std::size_t kJobBusiestLinks = 3;

struct JobOutcome {
  std::string name;
  std::vector<int> nodes;
  int gpus = 0;
  Time alone;   ///< iteration time with the job alone on its GPUs (the rest of the fabric idle)
  Time shared;  ///< iteration time with every job running
  double tokens_per_s = 0.0;  ///< at the shared iteration time
  /// Payload its ranks sent over each directed link in the shared run
  /// (index = LinkId); empty where the backend cannot attribute traffic
  /// (JobsOutcome::per_job_links false).
  std::vector<double> link_bytes;
  /// Its kJobBusiestLinks links of highest utilization (bytes over
  /// bandwidth; highest first; ties: the link the other jobs load more
  /// first, then by link id), links it did not use left
  /// out; empty without per_job_links.
  std::vector<JobLink> busiest_links;
  /// Its fullest pipeline stage (the memory model's, as `run` prints it):
  /// the stage, what one of its ranks needs at its peak, and its GPU's
  /// memory. A job that does not fit is forecast all the same; `run` says
  /// so and exits with the out-of-memory code unless --allow-oom.
  int fullest_stage = 0;
  Bytes peak_memory;
  Bytes memory_capacity;
  /// Its GPUs slower and faster than predicted (`stragglers:`,
  /// Scenario::compute_scale on the cluster's GPUs).
  ComputeScales scales;
  /// The job alone on its GPUs with every collective free: what splits its
  /// iterations into compute, host, bubble and exposed communication.
  FreeCommunication free_comm;
  /// The split of its iteration alone and shared (tessera run's, defined
  /// once in study::breakdown): the other jobs' traffic can only add to the
  /// exposed communication.
  [[nodiscard]] IterationBreakdown alone_breakdown() const { return breakdown(alone, free_comm); }
  [[nodiscard]] IterationBreakdown shared_breakdown() const { return breakdown(shared, free_comm); }
  [[nodiscard]] bool oom() const { return memory_capacity.count() > 0 && peak_memory > memory_capacity; }
  [[nodiscard]] double slowdown() const {
    return alone > Time::zero() ? static_cast<double>(shared.ps()) / static_cast<double>(alone.ps()) - 1.0 : 0.0;
  }
};

struct JobsOutcome {
  std::vector<JobOutcome> jobs;
  Time makespan;  ///< when the last job's iteration ended
  /// Per-job link bytes were collected: the flow backend attributes each
  /// message, the ns-3 backend (InfiniBand model) each packet, to its source
  /// rank's job. The ns-3 PointToPoint model keeps no per-link counts:
  /// false there, and the jobs' link lists are empty.
  bool per_job_links = false;
  std::vector<double> link_bytes;  ///< every job together, per directed link (payload; with per_job_links)
  /// The shared run's packet-level statistics (the ns-3 backend).
  std::optional<PacketFabricStats> packet_fabric;
};

/// Pure: the cluster's GPU (flat index) of each rank of `job`: rank r on GPU
/// r mod gpus_per_node of the job's (r / gpus_per_node)-th node.
std::vector<int> job_gpus(const Job& job, int gpus_per_node);

/// Runs a multi-job scenario (s.jobs not empty) on its backend.
JobsOutcome simulate_jobs(const Scenario& s);


}  // namespace tessera::study
