#pragma once
// A Chrome / Perfetto trace of one simulated iteration (the Trace Event
// Format, JSON), collected through the executor's observer interface and
// streamed to its sink while the simulation runs: memory stays constant
// apart from a few tracks' state per traced rank, a number per task of the
// programs traced ranks run and the link counters' bins.
//
// One process per traced rank, named by its coordinates (node, pipeline
// stage, data-parallel and tensor-parallel index). Its tracks (threads) are
// declared when they first carry an event, so every declared track has
// events: "compute", "host" (the compute stream waiting for its host to
// launch the next task), and one per communication group named by its role (tp,
// dp, pp-send / pp-recv with the peer stage, embedding). Slices are named by
// their tasks (a collective whose name recurs on its rank numbered ".2",
// ".3", ...), their args say what the task carries (FLOPs, bytes) and where
// its name puts it (chunk, micro-batch, layer). Pipeline sends carry
// flow arrows from the sender's slice to the receiver's. Optionally every
// point-to-point transfer is an async slice on its sender ("transfers"). A
// last process, "links", holds utilization counters of the busiest links.
// docs/cli.md, "Traces".
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tessera/engine/executor.hpp"
#include "tessera/parallelism/plan.hpp"
#include "tessera/topology/topology.hpp"

namespace tessera::study {
struct Scenario;
}  // namespace tessera::study

namespace tessera::cli {

using study::Scenario;
class ArgParser;

/// What a trace records.
struct TraceOptions {
  /// Global ranks to record, ascending; empty: default_trace_ranks().
  std::vector<int> ranks;
  /// Micro-batches whose tasks are recorded, ascending; empty: all. Tasks of
  /// no micro-batch (optimizer, gradient synchronisation, tied embeddings)
  /// are always recorded. Per-transfer slices are filtered by rank only.
  std::vector<int> micro_batches;
  /// One async slice per point-to-point transfer (on the sender); off: a
  /// collective is one slice per member rank.
  bool transfers = false;
  /// Utilization counters for this many links, the busiest by bytes of each
  /// link tier in turn (needs a topology; 0: none).
  int link_counters = 16;
  /// What produced the trace, for its header: the scenario file, its name,
  /// model, GPUs and plan (empty: not said).
  std::string scenario;
  /// Per rank, its compute time over the node model's (`stragglers:`;
  /// empty: 1 everywhere): a compute slice longer than its kernels at that
  /// speed waited for the host inside the task, said in its args.
  std::vector<double> compute_scale;
};

/// Where ranks sit, to name processes and tracks.
struct TraceLayout {
  parallelism::ParallelPlan plan;  ///< dp, tp, pp and the rank layout (parallelism::rank_coord)
  int gpus_per_node = 1;
};

/// Micro-batch numbers a trace filter accepts are below this.
inline constexpr std::int64_t kMaxTraceMicroBatch = 1'000'000;

/// Parses a list of non-negative integers such as "0-7,64" (ranges
/// inclusive) into an ascending list without repeats; every value must be
/// below `limit`. Throws InputError "`what`: ..." naming the bad item.
/// `once`: a value listed twice (`1,1`, `0-3,2`) is an error too (a list of
/// nodes or ranks, where it is likely a slip for another; a trace's ranks
/// may overlap).
std::vector<int> parse_index_list(std::string_view text, std::string_view what, std::int64_t limit,
                                  bool once = false);
/// "on" / "off" (also true/false, yes/no, 1/0); throws InputError naming `what`.
bool parse_on_off(std::string_view text, std::string_view what);

/// The ranks a trace records by default: every rank up to 64 ranks; beyond
/// that one rank per pipeline stage (tp index 0 of data-parallel replica 0),
/// which shows the whole pipeline schedule at a size a browser can open.
std::vector<int> default_trace_ranks(const parallelism::ParallelPlan& plan, int ranks);

/// `tessera run`'s trace options: --trace-ranks, --trace-micro-batches and
/// --trace-transfers, else the scenario's outputs.trace_* keys, else the
/// defaults. Throws InputError naming the flag.
TraceOptions trace_options(const ArgParser& args, const Scenario& s);

/// Where trace text goes.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void write(std::string_view text) = 0;
};

/// Keeps the trace in memory (tests, small traces).
class StringTraceSink final : public TraceSink {
 public:
  void write(std::string_view text) override { text_.append(text); }
  [[nodiscard]] const std::string& text() const { return text_; }

 private:
  std::string text_;
};

/// Writes to a temporary file beside `path` (`path`.tmp.PID), gzip-compressed
/// when `path` ends in ".gz" (deterministic: no name or time in the header),
/// and renames it over `path` on commit(). Destroyed without commit() (an
/// error while simulating) it removes the temporary. Throws InputError naming
/// `path` when the file cannot be created or written.
class FileTraceSink final : public TraceSink {
 public:
  explicit FileTraceSink(std::string path);
  ~FileTraceSink() override;
  FileTraceSink(const FileTraceSink&) = delete;
  FileTraceSink& operator=(const FileTraceSink&) = delete;
  void write(std::string_view text) override;
  /// Closes the file and renames it into place.
  void commit();

 private:
  void close_file();
  std::string path_, tmp_;
  std::string target_;   ///< where path_ leads (a link's target)
  bool direct_ = false;  ///< a device or pipe, written in place
  std::FILE* file_ = nullptr;
  void* gz_ = nullptr;  ///< gzFile when compressing
  bool committed_ = false;
};

class ChromeTraceObserver final : public engine::ExecutionObserver {
 public:
  /// `ranks`: the job's ranks. `topology` (optional, must outlive the
  /// observer) routes every transfer for the link counters. Writes the
  /// trace's header to `sink` at once.
  ChromeTraceObserver(TraceSink& sink, int ranks, TraceLayout layout, TraceOptions options,
                      const topology::Topology* topology = nullptr);
  ~ChromeTraceObserver() override;
  ChromeTraceObserver(const ChromeTraceObserver&) = delete;
  ChromeTraceObserver& operator=(const ChromeTraceObserver&) = delete;

  /// Numbers the collectives whose name recurs in a traced rank's program.
  void on_start(const parallelism::TaskGraph& graph) override;
  void on_compute(int rank, const parallelism::Task& task, Time start, Time end) override;
  void on_collective(const parallelism::Task& task, std::int32_t group, const std::vector<int>& ranks,
                     Time start, Time end) override;
  void on_collective_member(int rank, const parallelism::Task& task, std::int32_t group,
                            const std::vector<int>& ranks, Time start, Time end) override;
  void on_transfer(const collectives::Transfer& t, Time start, Time end) override;
  void on_host_wait(int rank, const parallelism::Task& task, Time start, Time end) override;

  /// Writes the link counters and closes the JSON document; once, after the run.
  void finish();

  /// The ranks recorded, ascending.
  [[nodiscard]] const std::vector<int>& ranks() const { return options_.ranks; }
  /// Events written so far (metadata included).
  [[nodiscard]] std::uint64_t events() const { return events_; }

 private:
  class LinkLoad;
  [[nodiscard]] bool traced(int rank) const {
    return rank >= 0 && rank < ranks_ && traced_[static_cast<std::size_t>(rank)] != 0;
  }
  [[nodiscard]] bool micro_batch_kept(std::string_view task_name) const;
  /// Declares rank `rank`'s process and its track `tid` on first use.
  void declare(int rank, std::int32_t tid, const parallelism::Task* task, const std::vector<int>* members);
  [[nodiscard]] std::string track_name(int rank, std::int32_t tid, const parallelism::Task* task,
                                       const std::vector<int>* members) const;
  void begin_event();
  void flush_if_full();
  /// `task`'s place among the collectives of its name in `rank`'s program
  /// (1, 2, ... in program order), from on_start; 0 for a compute task, or
  /// a rank or task on_start did not see.
  [[nodiscard]] std::int32_t occurrence(int rank, const parallelism::Task& task) const;
  /// Appends `task`'s name, escaped, as its slices read: a collective from
  /// the second of its name on `rank` on takes ".2", ".3", ...
  void append_task_name(int rank, const parallelism::Task& task);

  TraceSink& sink_;
  int ranks_;
  TraceLayout layout_;
  TraceOptions options_;
  const topology::Topology* topology_;
  std::vector<char> traced_;                         ///< per rank
  std::vector<std::vector<std::int32_t>> declared_;  ///< per rank: tracks declared so far
  std::unique_ptr<LinkLoad> links_;
  std::string buffer_;
  std::uint64_t events_ = 0;
  std::int64_t next_id_ = 0;  ///< async transfer and flow ids
  /// A pipeline message's flow arrow, written once both members' slices
  /// are (on_collective reports the collective before its members: a flow
  /// event before the slice it binds to at the same instant may bind to
  /// none); by group, where one collective at a time completes.
  struct PendingFlow {
    std::int64_t id = 0;
    int sender = 0, receiver = 0;
    Time start;
    std::size_t members_left = 0;
  };
  std::unordered_map<std::int32_t, PendingFlow> pending_flows_;
  /// Per program a traced rank runs (TaskGraph::programs index): its tasks
  /// and each one's occurrence(); empty for the others.
  struct Occurrences {
    const parallelism::Task* tasks = nullptr;
    std::vector<std::int32_t> nth;
  };
  std::vector<Occurrences> occurrences_;
  std::vector<std::int32_t> program_of_;  ///< per rank: its program when traced, else -1
  bool finished_ = false;
  Time end_;  ///< the latest end of anything reported: the iteration's end
};

/// What `tessera run --trace FILE` uses: the file sink, the scenario's
/// topology for the link counters and the observer, in one object. Dropped
/// without finish() it leaves no file behind.
class TraceFile {
 public:
  TraceFile(const std::string& path, const Scenario& s, TraceOptions options);
  ~TraceFile();
  [[nodiscard]] engine::ExecutionObserver* observer() { return observer_.get(); }
  /// Completes the trace and renames it into place.
  void finish();

 private:
  FileTraceSink sink_;
  std::unique_ptr<topology::Topology> topology_;
  std::unique_ptr<ChromeTraceObserver> observer_;
};

}  // namespace tessera::cli
