#pragma once
// Strong unit types: the vocabulary every layer speaks.
//
// Simulated time is an integer number of picoseconds (4 KiB at 400 Gb/s is
// exactly 81,920 ps). Sizes are integer bytes, link rates integer bits per
// second. FLOP counts and FLOP rates are doubles (they are model estimates,
// never compared for equality). Conversions that produce a Time round up to
// the next picosecond so that the same input always gives the same output.
// Time and Bytes arithmetic is checked: a result outside int64 throws
// OverflowError (tessera/error.hpp) naming the operation, never wraps.
#include <compare>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace tessera {

namespace detail {
// Throw OverflowError naming the operation ("time overflow: 9000000s x 2 ...").
[[noreturn]] void time_overflow(std::int64_t a_ps, char op, std::int64_t b, bool b_is_time);
[[noreturn]] void size_overflow(std::int64_t a, char op, std::int64_t b, bool b_is_size);
// Throw SimulationError: a size divided by a count that is not positive (a
// bug: validation keeps every input from it).
[[noreturn]] void size_division(std::int64_t a, std::int64_t k);

enum class Quantity { Time, Size };
/// a + b, a - b or a x b (`op` '+', '-', 'x'), or OverflowError naming the
/// operation in the quantity's unit (b is a plain factor for 'x').
template <Quantity Q>
constexpr std::int64_t checked(char op, std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  const bool overflow = op == '+'   ? __builtin_add_overflow(a, b, &r)
                        : op == '-' ? __builtin_sub_overflow(a, b, &r)
                                    : __builtin_mul_overflow(a, b, &r);
  if (overflow) {
    if constexpr (Q == Quantity::Time) {
      time_overflow(a, op, b, op != 'x');
    } else {
      size_overflow(a, op, b, op != 'x');
    }
  }
  return r;
}
}  // namespace detail

class Time {
 public:
  constexpr Time() = default;
  static constexpr Time from_ps(std::int64_t ps) { return Time(ps); }
  static constexpr Time from_ns(std::int64_t ns) { return Time(detail::checked<detail::Quantity::Time>('x', ns, 1000)); }
  static constexpr Time from_us(std::int64_t us) { return Time(detail::checked<detail::Quantity::Time>('x', us, std::int64_t{1000} * 1000)); }
  static constexpr Time from_ms(std::int64_t ms) { return Time(detail::checked<detail::Quantity::Time>('x', ms, std::int64_t{1000} * 1000 * 1000)); }
  /// Rounds up to the next picosecond (a duration is never shortened).
  static Time from_seconds(double s);
  /// `ps` picoseconds rounded to the nearest; OverflowError when it is not
  /// finite or does not fit in 64 bits (a double cast to an integer out of
  /// range is undefined behaviour).
  static Time from_ps_rounded(double ps);
  static constexpr Time zero() { return Time(0); }
  static constexpr Time max() { return Time(std::numeric_limits<std::int64_t>::max()); }

  [[nodiscard]] constexpr std::int64_t ps() const { return ps_; }
  [[nodiscard]] constexpr double seconds() const { return static_cast<double>(ps_) * 1e-12; }
  [[nodiscard]] constexpr double ms() const { return static_cast<double>(ps_) * 1e-9; }
  [[nodiscard]] constexpr double us() const { return static_cast<double>(ps_) * 1e-6; }

  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>
  constexpr auto operator<=>(const Time&) const = default;
  // Checked: a result outside int64 picoseconds throws OverflowError.
  constexpr Time operator+(Time o) const { return Time(detail::checked<detail::Quantity::Time>('+', ps_, o.ps_)); }
  constexpr Time operator-(Time o) const { return Time(detail::checked<detail::Quantity::Time>('-', ps_, o.ps_)); }
  constexpr Time& operator+=(Time o) {
    ps_ = detail::checked<detail::Quantity::Time>('+', ps_, o.ps_);
    return *this;
  }
  constexpr Time& operator-=(Time o) {
    ps_ = detail::checked<detail::Quantity::Time>('-', ps_, o.ps_);
    return *this;
  }
  constexpr Time operator*(std::int64_t k) const { return Time(detail::checked<detail::Quantity::Time>('x', ps_, k)); }

 private:
  constexpr explicit Time(std::int64_t ps) : ps_(ps) {}
  std::int64_t ps_ = 0;
};

class Bytes {
 public:
  constexpr Bytes() = default;
  constexpr explicit Bytes(std::int64_t n) : n_(n) {}
  static constexpr Bytes kib(std::int64_t n) { return Bytes(detail::checked<detail::Quantity::Size>('x', n, 1024)); }
  static constexpr Bytes mib(std::int64_t n) { return Bytes(detail::checked<detail::Quantity::Size>('x', n, std::int64_t{1024} * 1024)); }
  static constexpr Bytes gib(std::int64_t n) { return Bytes(detail::checked<detail::Quantity::Size>('x', n, std::int64_t{1024} * 1024 * 1024)); }
  /// `n` bytes rounded toward zero (as a cast would); OverflowError when it is not finite
  /// or not representable in int64 (an estimate past 8 EiB).
  static Bytes from_truncated(double n);

  [[nodiscard]] constexpr std::int64_t count() const { return n_; }
  [[nodiscard]] constexpr double as_double() const { return static_cast<double>(n_); }
  /// In binary gigabytes (2^30 bytes), the unit memory is printed in.
  [[nodiscard]] constexpr double in_gib() const { return as_double() / (1024.0 * 1024.0 * 1024.0); }

  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>
  constexpr auto operator<=>(const Bytes&) const = default;
  // Checked: a result outside int64 bytes throws OverflowError.
  constexpr Bytes operator+(Bytes o) const { return Bytes(detail::checked<detail::Quantity::Size>('+', n_, o.n_)); }
  constexpr Bytes operator-(Bytes o) const { return Bytes(detail::checked<detail::Quantity::Size>('-', n_, o.n_)); }
  constexpr Bytes& operator+=(Bytes o) {
    n_ = detail::checked<detail::Quantity::Size>('+', n_, o.n_);
    return *this;
  }
  constexpr Bytes operator*(std::int64_t k) const { return Bytes(detail::checked<detail::Quantity::Size>('x', n_, k)); }
  /// Split in `k` parts (k > 0, else SimulationError), rounded down.
  constexpr Bytes operator/(std::int64_t k) const {
    if (k <= 0) detail::size_division(n_, k);
    return Bytes(n_ / k);
  }

 private:
  std::int64_t n_ = 0;
};

/// A data rate in bits per second (the unit network vendors quote).
class Bandwidth {
 public:
  constexpr Bandwidth() = default;
  static constexpr Bandwidth bits_per_second(std::int64_t bps) { return Bandwidth(bps); }
  static constexpr Bandwidth gbps(std::int64_t g) { return Bandwidth(g * 1000 * 1000 * 1000); }
  /// Decimal gigabytes per second (50 GB/s = 400 Gb/s).
  static constexpr Bandwidth gigabytes_per_second(std::int64_t g) {
    return Bandwidth(g * 8 * 1000 * 1000 * 1000);
  }

  [[nodiscard]] constexpr std::int64_t bps() const { return bps_; }
  [[nodiscard]] constexpr double bytes_per_second() const {
    return static_cast<double>(bps_) / 8.0;
  }
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>
  constexpr auto operator<=>(const Bandwidth&) const = default;

 private:
  constexpr explicit Bandwidth(std::int64_t bps) : bps_(bps) {}
  std::int64_t bps_ = 0;
};

/// A count of floating-point operations.
class Flops {
 public:
  constexpr Flops() = default;
  constexpr explicit Flops(double v) : v_(v) {}
  [[nodiscard]] constexpr double count() const { return v_; }
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>
  constexpr auto operator<=>(const Flops&) const = default;
  constexpr Flops operator+(Flops o) const { return Flops(v_ + o.v_); }
  constexpr Flops& operator+=(Flops o) { v_ += o.v_; return *this; }
  constexpr Flops operator*(double k) const { return Flops(v_ * k); }

 private:
  double v_ = 0.0;
};

/// Floating-point operations per second.
class FlopRate {
 public:
  constexpr FlopRate() = default;
  static constexpr FlopRate per_second(double v) { return FlopRate(v); }
  static constexpr FlopRate tflops(double t) { return FlopRate(t * 1e12); }
  [[nodiscard]] constexpr double per_second() const { return v_; }
  [[nodiscard]] constexpr double tflops() const { return v_ * 1e-12; }
  // NOLINTNEXTLINE(modernize-use-nullptr): clang-tidy 14 misreads a defaulted <=>
  constexpr auto operator<=>(const FlopRate&) const = default;

 private:
  constexpr explicit FlopRate(double v) : v_(v) {}
  double v_ = 0.0;
};

/// Exact time to serialise `size` at `rate`, rounded up to the picosecond.
/// Throws InputError for a non-positive rate.
Time transmit_time(Bytes size, Bandwidth rate);
/// Time to execute `work` at `rate` (rounded up to the picosecond).
Time compute_time(Flops work, FlopRate rate);
/// Achieved rate of `work` done in `t`.
FlopRate achieved_rate(Flops work, Time t);

// Parsing of unit strings. A number (decimal, optional exponent), optional
// spaces, then a unit. Each throws UnitError naming the string on failure.
//   time:      ps ns us ms s            ("1.5us", "500 ns")
//   bytes:     B KB MB GB TB (10^3) KiB MiB GiB TiB (2^10)   ("80GiB")
//   bandwidth: bps Kbps Mbps Gbps Tbps (also Gb/s), B/s KB/s MB/s GB/s TB/s,
//              KiB/s MiB/s GiB/s     ("400Gbps", "50GB/s")
//   flop rate: FLOPS GFLOPS TFLOPS PFLOPS (also TFLOP/s)   ("989TFLOPS")
Time parse_time(std::string_view text);
Bytes parse_bytes(std::string_view text);
Bandwidth parse_bandwidth(std::string_view text);
FlopRate parse_flop_rate(std::string_view text);
/// A count (tokens): a number, optionally with a decimal multiple K, M, B
/// (or G), T ("300B", "1.4T", "2e12"); a whole number in [1, 1e18].
double parse_count(std::string_view text);

// Canonical, round-trippable renderings ("81.92ns", "80GiB", "400Gbps").
std::string to_string(Time t);
std::string to_string(Bytes b);
std::string to_string(Bandwidth bw);
std::string to_string(FlopRate r);

}  // namespace tessera
