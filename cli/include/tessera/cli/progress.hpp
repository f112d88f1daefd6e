#pragma once
// Progress of a long run: a bar on a terminal, a line every 10 s in a log.
// An observer that forwards every event to another one (the trace, or
// none) and counts the compute tasks finished against the graph's total,
// with the simulated time reached (also between tasks, from the backend's
// heartbeat).
// Runs shorter than a few seconds print nothing; the line is cleared at the
// end, so stdout's report and stderr's errors stay as they are.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <ostream>

#include "tessera/engine/executor.hpp"

namespace tessera::cli {

class ProgressObserver : public engine::ExecutionObserver {
 public:
  /// `inner` may be null; `tty`: draw a bar with carriage returns, else
  /// write a line every `log_every` (10 s); nothing before `quiet` (3 s).
  ProgressObserver(engine::ExecutionObserver* inner, std::ostream& err, bool tty,
                   std::chrono::milliseconds quiet = std::chrono::seconds(3),
                   std::chrono::milliseconds log_every = std::chrono::seconds(10));
  ~ProgressObserver() override;
  ProgressObserver(const ProgressObserver&) = delete;
  ProgressObserver& operator=(const ProgressObserver&) = delete;

  void on_start(const parallelism::TaskGraph& graph) override;
  void on_compute(int rank, const parallelism::Task& task, Time start, Time end) override;
  void on_collective_member(int rank, const parallelism::Task& task, std::int32_t group,
                            const std::vector<int>& ranks, Time start, Time end) override;
  void on_collective(const parallelism::Task& task, std::int32_t group, const std::vector<int>& ranks, Time start,
                     Time end) override;
  void on_transfer(const collectives::Transfer& t, Time start, Time end) override;
  void on_host_wait(int rank, const parallelism::Task& task, Time start, Time end) override;
  /// Redraws (as often as a task's end would) with the simulated time: a
  /// long collective on ns-3 ends no task for minutes.
  void on_heartbeat(Time now) override;
  /// Clears the bar (call before printing the report).
  void finish();

 private:
  void draw(bool force);
  /// `tasks` more tasks ended (a compute task, or one per rank of a collective).
  void advance(std::uint64_t tasks);
  engine::ExecutionObserver* inner_;
  std::ostream& err_;
  bool tty_;
  std::uint64_t total_ = 0;
  std::uint64_t done_ = 0;
  std::uint64_t stride_ = 4096;
  Time simulated_ = Time::zero();  ///< the latest simulated time heard of
  bool drawn_ = false;
  std::chrono::milliseconds quiet_;
  std::chrono::milliseconds log_every_;
  std::chrono::steady_clock::time_point begin_;
  std::chrono::steady_clock::time_point last_;
};

/// Progress of a job of many like items (sweep points, search candidates):
/// on a terminal a bar redrawn as items finish, cleared by finish(); in a log
/// a line every `log_every` (10 s), none for jobs that end sooner.
/// Thread-safe: workers call advance() as they finish items.
class CountProgress {
 public:
  /// `what`: the command ("sweep"); `items`: their name ("points"); `done`
  /// of `total` are finished already (a resumed sweep).
  CountProgress(std::string what, std::string items, std::size_t total, std::size_t done, std::ostream& err, bool tty,
                std::chrono::milliseconds log_every = std::chrono::seconds(10));
  ~CountProgress();
  CountProgress(const CountProgress&) = delete;
  CountProgress& operator=(const CountProgress&) = delete;

  /// One more item finished.
  void advance();
  /// Ends the bar's line (on a terminal); later advance() calls print nothing.
  void finish();

 private:
  void draw();  // with mu_ held
  std::string what_;
  std::string items_;
  std::size_t total_;
  std::size_t done_;
  std::ostream& err_;
  bool tty_;
  bool finished_ = false;
  std::chrono::milliseconds log_every_;
  std::chrono::steady_clock::time_point begin_;
  std::chrono::steady_clock::time_point last_;
  std::mutex mu_;
};

}  // namespace tessera::cli
