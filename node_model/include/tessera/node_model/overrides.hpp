#pragma once
// Measured kernel times that replace the node model's predictions
// (a scenario's `node_model.overrides`; docs/node_model.md, "Measured kernel
// times"). A KernelTimeTable is read from a CSV in one of three forms:
//   - NeuSight's kernel CSV (columns OPName, Latency in ms, and B,M,N,K for
//     GEMMs or B,H for vector ops; the measurement files under
//     data/neusight/kernels), FP32 unless the file has a `dtype` column;
//   - Tessera's own: op,b,m,n,k,h,dtype,time_us (GEMMs fill b,m,n,k in BLAS
//     order, M x K times K x N; vector ops b,h; unused cells empty or 0),
//     optionally part_time_us: the kernel's time as a further part of a
//     fused kernel (KernelPredictor::predict_part; empty: time_us);
//   - a PyTorch profiler export, one row per
//     `prof.key_averages(group_by_input_shape=True)` entry:
//     name,input_shapes,calls,device_time_total_us[,dtype]. Only the leaf
//     GEMM ops aten::mm, aten::addmm (-> linear b=1) and aten::bmm,
//     aten::baddbmm (-> bmm) are read, at device_time_total_us / calls per
//     call; every other row (composite ops such as aten::linear, whose time
//     contains their leaf GEMMs', and non-GEMM ops) is skipped and counted.
// OverridePredictor wraps any KernelPredictor: an exact match of a kernel
// (op, dtype and every dimension) returns the measured time, anything else
// the wrapped predictor's.
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "tessera/node_model/kernel.hpp"

namespace tessera::node_model {

/// One measured kernel: where it came from and its time.
struct MeasuredKernel {
  Kernel kernel;
  Time time;
  /// As a further part of a fused kernel (Tessera form's part_time_us);
  /// none: `time` stands for that too.
  std::optional<Time> part_time;
  std::size_t line = 0;  ///< 1-based line of the file
  /// PyTorch form: the row also stands for the transposed GEMM (m and n
  /// swapped: C^T = B^T A^T is the same product), unless another row holds
  /// that kernel itself. PyTorch computes nn.Linear's weight gradient as
  /// (dY^T X)^T, out x in, where Tessera's kernel is in x out.
  bool either_orientation = false;
};

/// The measured kernels of one file, looked up by exact kernel. Immutable
/// after construction.
class KernelTimeTable {
 public:
  /// Reads `path` (capped at kMaxInputFileBytes). Throws InputError naming
  /// the file, the row and its line, the column and the value: unknown op or
  /// dtype, a missing column, a dimension or time that is not a positive
  /// number, a row repeating an earlier one's kernel, rows of more than one
  /// device (NeuSight form), or a file without rows. PyTorch-form rows
  /// without a `dtype` column take `training_dtype` (the scenario's
  /// training.dtype); without one such a file is refused. Rows of the
  /// PyTorch form that give the same kernel (an aten::mm and an aten::addmm
  /// of one shape) are merged: their total time over their total calls.
  static KernelTimeTable read(const std::string& path, std::optional<DType> training_dtype = std::nullopt);
  /// Same, from CSV text; `path` is used in messages.
  static KernelTimeTable parse(std::string_view text, const std::string& path,
                               std::optional<DType> training_dtype = std::nullopt);

  /// The entry matching `k` exactly, or nullptr.
  [[nodiscard]] const MeasuredKernel* find(const Kernel& k) const;
  /// Index of `entry` (a pointer find() returned) in entries().
  [[nodiscard]] std::size_t index_of(const MeasuredKernel* entry) const {
    return static_cast<std::size_t>(entry - entries_.data());
  }
  [[nodiscard]] const std::vector<MeasuredKernel>& entries() const { return entries_; }
  [[nodiscard]] const std::string& path() const { return path_; }
  /// PyTorch form: rows skipped as composite or non-GEMM ops (0 otherwise).
  [[nodiscard]] std::size_t ignored_rows() const { return ignored_rows_; }
  /// The GPU the file says it measured (NeuSight form's `Device` column;
  /// empty when the file does not say).
  [[nodiscard]] const std::string& device() const { return device_; }

 private:
  using Key = std::tuple<int, int, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t>;
  static Key key_of(const Kernel& k);

  std::string path_;
  std::vector<MeasuredKernel> entries_;
  std::map<Key, std::size_t> index_;
  std::size_t ignored_rows_ = 0;
  std::string device_;
};

/// What an OverridePredictor answered from its table so far.
struct OverrideStats {
  std::string path;         ///< the override file
  std::size_t entries = 0;  ///< measured kernels in it
  std::size_t matched = 0;  ///< of them, asked for at least once
  /// Calls answered from the file. The planner asks once per kernel shape
  /// and pass it builds, not once per execution of the kernel.
  std::int64_t lookups = 0;
  std::int64_t delegated = 0;  ///< predictions left to the wrapped predictor
  /// PyTorch form: rows of the file skipped as composite or non-GEMM ops.
  std::size_t ignored_rows = 0;
  /// The file lines of the kernels never asked for (no kernel of the plan
  /// has their op, dtype and dimensions), in file order.
  std::vector<std::size_t> unmatched_lines;
  /// The file lines whose time_us is never used: asked for only as a
  /// further part of a fused launch, where their part_time_us stands, and
  /// with a time_us other than the prediction (an edit that changes
  /// nothing; helper 87), in file order.
  std::vector<std::size_t> unused_time_lines;
};

/// A KernelPredictor that answers measured kernels from a table and passes
/// every other kernel to the one it wraps. The measured time stands for both
/// predict() and predict_device(): the file holds one time per kernel.
/// Counting is thread-safe (atomic), so one instance may still be shared by
/// planners on several threads; stats() then sums their calls.
class OverridePredictor final : public KernelPredictor {
 public:
  /// Wraps `base` (not owned: it must outlive this predictor).
  OverridePredictor(const KernelPredictor& base, std::shared_ptr<const KernelTimeTable> table);
  /// Wraps and owns `base`.
  OverridePredictor(std::unique_ptr<KernelPredictor> base, std::shared_ptr<const KernelTimeTable> table);

  [[nodiscard]] Time predict(const Kernel& kernel) const override;
  [[nodiscard]] Time predict_device(const Kernel& kernel) const override;
  /// A measured kernel's part_time, else its time; others the wrapped
  /// predictor's predict_part().
  [[nodiscard]] Time predict_part(const Kernel& kernel) const override;
  /// The wrapped predictor's name (reports name the model that predicts
  /// everything the file does not hold).
  [[nodiscard]] std::string_view name() const override { return base_->name(); }
  [[nodiscard]] const GpuSpec& gpu() const override { return base_->gpu(); }

  [[nodiscard]] OverrideStats stats() const;
  [[nodiscard]] const KernelTimeTable& table() const { return *table_; }

 private:
  /// The measured entry for `k` (counted), or nullptr (counted as delegated).
  /// `launch`: asked for as a launched kernel (its time), not as a part.
  const MeasuredKernel* lookup(const Kernel& k, bool launch) const;

  std::unique_ptr<KernelPredictor> owned_;
  const KernelPredictor* base_;
  std::shared_ptr<const KernelTimeTable> table_;
  std::unique_ptr<std::atomic<std::int64_t>[]> hits_;  ///< per table entry
  std::unique_ptr<std::atomic<std::int64_t>[]> launch_hits_;  ///< of them, as a launched kernel
  mutable std::atomic<std::int64_t> delegated_{0};
};

}  // namespace tessera::node_model
