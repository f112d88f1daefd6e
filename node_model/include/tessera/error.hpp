#pragma once
// Typed exceptions shared by every layer. Library code throws these; only the
// CLI turns them into a one-line message and an exit code.
#include <stdexcept>
#include <string>

namespace tessera {

/// Base of every error Tessera throws on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The user gave us something we cannot use (bad unit string, impossible value,
/// unknown key). The CLI maps this to exit code 2.
class InputError : public Error {
 public:
  using Error::Error;
};

/// A unit string that does not parse ("400Gbs", "-1us", "1.5B").
class UnitError : public InputError {
 public:
  using InputError::InputError;
};

/// A time or size too large for its integer representation (picoseconds or
/// bytes in int64): a scenario so big that it cannot be simulated exactly.
class OverflowError : public InputError {
 public:
  using InputError::InputError;
};

/// A simulated transfer would finish past the simulation's time range: a
/// bandwidth far too low for its bytes.
class TransferOverflowError : public OverflowError {
 public:
  TransferOverflowError(const std::string& what, double bottleneck_bps)
      : OverflowError(what), bottleneck_bps_(bottleneck_bps) {}
  /// The rate of the slowest link of the transfer's path, bits per second
  /// (a degraded cable's included).
  [[nodiscard]] double bottleneck_bps() const { return bottleneck_bps_; }

 private:
  double bottleneck_bps_;
};

/// An internal invariant was violated while simulating (a bug or a model
/// limitation), e.g. a task graph that deadlocks.
class SimulationError : public Error {
 public:
  using Error::Error;
};

}  // namespace tessera
