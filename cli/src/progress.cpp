#include "tessera/cli/progress.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

namespace tessera::cli {

namespace {
/// The bar is redrawn at most this often.
constexpr std::chrono::milliseconds kDrawEvery{200};
}  // namespace

ProgressObserver::ProgressObserver(engine::ExecutionObserver* inner, std::ostream& err, bool tty,
                                   std::chrono::milliseconds quiet, std::chrono::milliseconds log_every)
    : inner_(inner),
      err_(err),
      tty_(tty),
      quiet_(quiet),
      log_every_(log_every),
      begin_(std::chrono::steady_clock::now()),
      last_(begin_) {}

ProgressObserver::~ProgressObserver() { finish(); }

void ProgressObserver::on_start(const parallelism::TaskGraph& graph) {
  total_ = 0;
  done_ = 0;
  simulated_ = Time::zero();
  for (int r = 0; r < graph.num_ranks(); ++r) {
    total_ += graph.tasks(r).size();  // compute tasks and each rank's part in a collective
  }
  // The clock is read every `stride_` tasks: cheap against ~1 us per task,
  // and at least 256 times per run.
  stride_ = std::max<std::uint64_t>(1, std::min<std::uint64_t>(4096, total_ / 256));
  if (inner_ != nullptr) inner_->on_start(graph);
}

void ProgressObserver::on_compute(int rank, const parallelism::Task& task, Time start, Time end) {
  simulated_ = std::max(simulated_, end);
  advance(1);
  if (inner_ != nullptr) inner_->on_compute(rank, task, start, end);
}

void ProgressObserver::advance(std::uint64_t tasks) {
  const std::uint64_t before = done_;
  done_ += tasks;
  if (done_ / stride_ != before / stride_) draw(false);
  if (done_ == total_ && drawn_) {
    // The report still needs the same graph run once more on a free
    // network (the pipeline bubble), about as long again.
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin_).count();
    err_ << fmt::format("{}simulated the iteration in {:.0f} s; measuring the pipeline bubble (the same graph on a "
                        "free network)...{}",
                        tty_ ? "\r\033[K" : "tessera: ", secs, tty_ ? "" : "\n")
         << std::flush;
  }
}

void ProgressObserver::on_collective(const parallelism::Task& task, std::int32_t group, const std::vector<int>& ranks,
                                     Time start, Time end) {
  // A collective ends for all its ranks at once: one task of each of them.
  simulated_ = std::max(simulated_, end);
  advance(ranks.size());
  if (inner_ != nullptr) inner_->on_collective(task, group, ranks, start, end);
}

void ProgressObserver::on_collective_member(int rank, const parallelism::Task& task, std::int32_t group,
                                            const std::vector<int>& ranks, Time start, Time end) {
  if (inner_ != nullptr) inner_->on_collective_member(rank, task, group, ranks, start, end);
}

void ProgressObserver::on_transfer(const collectives::Transfer& t, Time start, Time end) {
  if (inner_ != nullptr) inner_->on_transfer(t, start, end);
}

void ProgressObserver::on_host_wait(int rank, const parallelism::Task& task, Time start, Time end) {
  if (inner_ != nullptr) inner_->on_host_wait(rank, task, start, end);
}

void ProgressObserver::on_heartbeat(Time now) {
  simulated_ = std::max(simulated_, now);
  draw(false);
  if (inner_ != nullptr) inner_->on_heartbeat(now);
}

void ProgressObserver::draw(bool force) {
  const auto now = std::chrono::steady_clock::now();
  if (now - begin_ < quiet_ || total_ == 0) return;
  const std::chrono::milliseconds every = tty_ ? kDrawEvery : log_every_;
  if (!force && drawn_ && now - last_ < every) return;
  last_ = now;
  // Rounded down: 100% only once every task has ended (a last collective
  // can take a while after the last compute task).
  const double share =
      std::floor(100.0 * static_cast<double>(done_) / static_cast<double>(total_)) / 100.0;
  const double secs = std::chrono::duration<double>(now - begin_).count();
  if (tty_) {
    constexpr int kWidth = 30;
    const auto filled = static_cast<int>(kWidth * share);
    err_ << fmt::format("\rsimulating [{}{}] {:3.0f}% of {} tasks, {:.0f} s, {:.1f} ms simulated",
                        std::string(filled, '#'), std::string(kWidth - filled, ' '), 100 * share, total_,
                        secs, simulated_.ms())
         << std::flush;
  } else {
    err_ << fmt::format("tessera: simulating: {:.0f}% of {} tasks after {:.0f} s, {:.1f} ms simulated\n",
                        100 * share, total_, secs, simulated_.ms())
         << std::flush;
  }
  drawn_ = true;
}

void ProgressObserver::finish() {
  if (drawn_ && tty_) err_ << "\r\033[K" << std::flush;
  drawn_ = false;
}

CountProgress::CountProgress(std::string what, std::string items, std::size_t total, std::size_t done,
                             std::ostream& err, bool tty, std::chrono::milliseconds log_every)
    : what_(std::move(what)),
      items_(std::move(items)),
      total_(total),
      done_(done),
      err_(err),
      tty_(tty),
      log_every_(log_every),
      begin_(std::chrono::steady_clock::now()),
      last_(begin_) {
  std::lock_guard lock(mu_);
  if (tty_) draw();
}

CountProgress::~CountProgress() { finish(); }

void CountProgress::advance() {
  std::lock_guard lock(mu_);
  if (finished_) return;
  ++done_;
  const auto now = std::chrono::steady_clock::now();
  if (tty_ || now - last_ >= log_every_) {
    last_ = now;
    draw();
  }
}

void CountProgress::finish() {
  std::lock_guard lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (tty_) err_ << '\n' << std::flush;
}

void CountProgress::draw() {
  if (tty_) {
    constexpr std::size_t kWidth = 30;
    const std::size_t filled = kWidth * std::min(done_, total_) / std::max<std::size_t>(total_, 1);
    err_ << fmt::format("\r{} [{}{}] {}/{} {}", what_, std::string(filled, '#'), std::string(kWidth - filled, ' '), done_,
                        total_, items_)
         << std::flush;
  } else {
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin_).count();
    err_ << fmt::format("tessera: {}: {}/{} {} after {:.0f} s\n", what_, done_, total_, items_, secs) << std::flush;
  }
}

}  // namespace tessera::cli
