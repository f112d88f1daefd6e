#include "tessera/units.hpp"

#include <array>
#include <cmath>
#include <fmt/format.h>
#include <charconv>
#include <limits>
#include <utility>

#include "tessera/error.hpp"

namespace tessera {
namespace {

__extension__ using Int128 = __int128;

struct UnitFactor {
  std::string_view unit;
  double factor;  // multiplier to the base unit
};

struct Parsed {
  double value;
  double factor;
};

/// A value as an error shows it: cut past 64 bytes (helper 145: a
/// 100,000-character value was echoed whole), at a UTF-8 character's start
/// (helper 150: a cut inside one made the JSON of a sweep's errors invalid).
std::string shown(std::string_view t) {
  constexpr std::size_t kShown = 64;
  if (t.size() <= kShown) return std::string(t);
  std::size_t cut = kShown;
  while (cut > 0 && (static_cast<unsigned char>(t[cut]) & 0xC0U) == 0x80U) --cut;  // a continuation byte
  return fmt::format("{}... ({} bytes)", t.substr(0, cut), t.size());
}

[[noreturn]] void fail(std::string_view kind, std::string_view text, std::string_view why) {
  throw UnitError(fmt::format("invalid {} '{}': {}", kind, shown(text), why));
}

template <std::size_t N>
Parsed parse_with(std::string_view kind, std::string_view text, const std::array<UnitFactor, N>& units,
                  bool unit_optional = false) {
  // Every unit the table takes, in its order: the error lists them all.
  std::string expected;
  for (const auto& u : units) expected += fmt::format("{}{}", expected.empty() ? "" : ", ", u.unit);
  std::string_view s = text;
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.empty()) fail(kind, text, "empty string");
  // Number: [+-]digits[.digits][e[+-]digits]
  std::size_t i = 0;
  if (s[i] == '+' || s[i] == '-') ++i;
  bool digits = false;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) != 0)) { ++i; digits = true; }
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) != 0)) { ++i; digits = true; }
  }
  if (!digits) fail(kind, text, fmt::format("expected a number followed by a unit ({})", expected));
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    std::size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    std::size_t k = j;
    while (k < s.size() && (std::isdigit(static_cast<unsigned char>(s[k])) != 0)) ++k;
    if (k > j) i = k;  // a real exponent; otherwise 'e' starts the unit
  }
  const std::string number(s.substr(0, i));
  double value = 0.0;
  try {
    std::size_t used = 0;
    value = std::stod(number, &used);
    if (used != number.size()) fail(kind, text, "malformed number");
  } catch (const std::logic_error&) {
    fail(kind, text, "malformed number");
  }
  if (!std::isfinite(value)) fail(kind, text, "number out of range");
  if (value < 0) fail(kind, text, "must not be negative");
  std::string_view unit = s.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  // A bare zero is zero in any unit ("host_microbatch: 0" turns the data step off).
  if (unit.empty() && (value == 0.0 || unit_optional)) return {value, 1.0};
  if (unit.empty()) fail(kind, text, fmt::format("missing unit (one of {})", expected));
  for (const auto& u : units) {
    if (u.unit == unit) return {value, u.factor};
  }
  fail(kind, text, fmt::format("unknown unit '{}' (expected one of {})", shown(unit), expected));
}

constexpr std::array<UnitFactor, 5> kTimeUnits{{
    {"ps", 1.0}, {"ns", 1e3}, {"us", 1e6}, {"ms", 1e9}, {"s", 1e12}}};

constexpr std::array<UnitFactor, 9> kByteUnits{{{"B", 1.0},
                                                {"KB", 1e3},
                                                {"MB", 1e6},
                                                {"GB", 1e9},
                                                {"TB", 1e12},
                                                {"KiB", 1024.0},
                                                {"MiB", 1024.0 * 1024},
                                                {"GiB", 1024.0 * 1024 * 1024},
                                                {"TiB", 1024.0 * 1024 * 1024 * 1024}}};

constexpr std::array<UnitFactor, 18> kBandwidthUnits{{{"bps", 1.0},
                                                      {"Kbps", 1e3},
                                                      {"Mbps", 1e6},
                                                      {"Gbps", 1e9},
                                                      {"Tbps", 1e12},
                                                      {"b/s", 1.0},
                                                      {"Kb/s", 1e3},
                                                      {"Mb/s", 1e6},
                                                      {"Gb/s", 1e9},
                                                      {"Tb/s", 1e12},
                                                      {"B/s", 8.0},
                                                      {"KB/s", 8e3},
                                                      {"MB/s", 8e6},
                                                      {"GB/s", 8e9},
                                                      {"TB/s", 8e12},
                                                      {"KiB/s", 8.0 * 1024},
                                                      {"MiB/s", 8.0 * 1024 * 1024},
                                                      {"GiB/s", 8.0 * 1024 * 1024 * 1024}}};

// (the "TFLOPs" of spec sheets too: a peak is a rate whatever its s's case;
// helper 132 met a refusal)
constexpr std::array<UnitFactor, 14> kFlopRateUnits{{{"FLOPS", 1.0},
                                                     {"GFLOPS", 1e9},
                                                     {"TFLOPS", 1e12},
                                                     {"PFLOPS", 1e15},
                                                     {"FLOP/s", 1.0},
                                                     {"GFLOP/s", 1e9},
                                                     {"TFLOP/s", 1e12},
                                                     {"PFLOP/s", 1e15},
                                                     {"MFLOPS", 1e6},
                                                     {"MFLOP/s", 1e6},
                                                     {"GFLOPs", 1e9},
                                                     {"TFLOPs", 1e12},
                                                     {"PFLOPs", 1e15},
                                                     {"MFLOPs", 1e6}}};

/// 2^63 as a double: every double below it converts to int64 exactly.
constexpr double kInt64Limit = 9223372036854775808.0;

std::int64_t to_integer(std::string_view kind, std::string_view text, double v) {
  if (std::round(v) >= kInt64Limit) {
    fail(kind, text,
         kind == "time" ? "value too large (at most 9223372036854775807 ps, about 106 days)"
                        : "value too large (at most 9223372036854775807 bytes, about 8 EiB)");
  }
  const double r = std::round(v);
  // Accept tiny floating-point noise from decimal scaling (1.1us), reject real fractions.
  if (std::fabs(v - r) > 1e-6 * std::max(1.0, std::fabs(v))) {
    fail(kind, text, "not a whole number of the base unit");
  }
  return static_cast<std::int64_t>(r);
}

/// Shortest decimal rendering of value / factor, with up to 6 significant decimals.
std::string with_unit(double value, std::string_view unit) {
  std::string s = fmt::format("{:.6f}", value);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s + std::string(unit);
}

}  // namespace

namespace detail {

void time_overflow(std::int64_t a_ps, char op, std::int64_t b, bool b_is_time) {
  throw OverflowError(fmt::format(
      "time overflow: {} {} {} does not fit in 64-bit picoseconds (at most about 106 days)",
      to_string(Time::from_ps(a_ps)), op, b_is_time ? to_string(Time::from_ps(b)) : std::to_string(b)));
}

void size_overflow(std::int64_t a, char op, std::int64_t b, bool b_is_size) {
  throw OverflowError(
      fmt::format("size overflow: {} {} {} does not fit in 64-bit bytes (at most about 8 EiB)",
                  to_string(Bytes(a)), op, b_is_size ? to_string(Bytes(b)) : std::to_string(b)));
}

void size_division(std::int64_t a, std::int64_t k) {
  // (no input reaches this past validation: a bug, not bad input)
  throw SimulationError(
      fmt::format("size division: {} / {}: the parts must be at least one", to_string(Bytes(a)), k));
}

}  // namespace detail

Time Time::from_seconds(double s) {
  if (!std::isfinite(s) || s < 0) throw InputError(fmt::format("invalid duration {} s", s));
  const double ps = std::ceil(s * 1e12 - 1e-6);
  if (ps >= kInt64Limit) {
    throw OverflowError(fmt::format(
        "time overflow: a duration of {:.6g} s does not fit in 64-bit picoseconds (at most about 106 days)",
        s));
  }
  return Time(static_cast<std::int64_t>(std::max(ps, 0.0)));
}

Time Time::from_ps_rounded(double ps) {
  const double r = std::round(ps);
  if (!std::isfinite(r) || r >= kInt64Limit || r < -kInt64Limit) {
    throw OverflowError(fmt::format(
        "time overflow: a duration of {:.6g} ps does not fit in 64-bit picoseconds (at most about 106 days)",
        ps));
  }
  return Time(static_cast<std::int64_t>(r));
}

Bytes Bytes::from_truncated(double n) {
  const double r = std::trunc(n);
  if (!std::isfinite(r) || r >= kInt64Limit || r < -kInt64Limit) {
    throw OverflowError(
        fmt::format("size overflow: {:.6g} bytes do not fit in a 64-bit byte count (at most 8 EiB)", n));
  }
  return Bytes(static_cast<std::int64_t>(r));
}

Time transmit_time(Bytes size, Bandwidth rate) {
  if (rate.bps() <= 0) throw InputError("transmit_time: bandwidth must be positive");
  if (size.count() < 0) throw InputError("transmit_time: size must not be negative");
  const Int128 num = static_cast<Int128>(size.count()) * 8 * 1'000'000'000'000LL;
  const Int128 den = rate.bps();
  const Int128 q = (num + den - 1) / den;
  if (q > std::numeric_limits<std::int64_t>::max()) {
    throw OverflowError(fmt::format(
        "time overflow: sending {} at {} takes longer than 64-bit picoseconds hold (about 106 days)",
        to_string(size), to_string(rate)));
  }
  return Time::from_ps(static_cast<std::int64_t>(q));
}

Time compute_time(Flops work, FlopRate rate) {
  if (rate.per_second() <= 0) throw InputError("compute_time: FLOP rate must be positive");
  return Time::from_seconds(work.count() / rate.per_second());
}

FlopRate achieved_rate(Flops work, Time t) {
  if (t.ps() <= 0) return FlopRate::per_second(0.0);
  return FlopRate::per_second(work.count() / t.seconds());
}

Time parse_time(std::string_view text) {
  const auto p = parse_with("time", text, kTimeUnits);
  return Time::from_ps(to_integer("time", text, p.value * p.factor));
}

Bytes parse_bytes(std::string_view text) {
  const auto p = parse_with("size", text, kByteUnits);
  return Bytes(to_integer("size", text, p.value * p.factor));
}

Bandwidth parse_bandwidth(std::string_view text) {
  const auto p = parse_with("bandwidth", text, kBandwidthUnits);
  const double bps = std::round(p.value * p.factor);
  if (bps >= kInt64Limit) fail("bandwidth", text, "value too large (at most 9223372036854775807 bps)");
  if (bps <= 0) fail("bandwidth", text, "must be positive");
  return Bandwidth::bits_per_second(static_cast<std::int64_t>(bps));
}

double parse_count(std::string_view text) {
  // Decimal multiples, as token counts are written ("300B", "1.4T").
  static constexpr std::array<UnitFactor, 5> kCountUnits{
      {{"K", 1e3}, {"M", 1e6}, {"B", 1e9}, {"G", 1e9}, {"T", 1e12}}};
  const auto p = parse_with("count", text, kCountUnits, true);
  const double n = p.value * p.factor;
  if (n <= 0) fail("count", text, "must be positive");
  if (n != std::floor(n)) fail("count", text, "must be a whole number");
  if (n > 1e18) fail("count", text, "at most 1e18");
  return n;
}

FlopRate parse_flop_rate(std::string_view text) {
  const auto p = parse_with("FLOP rate", text, kFlopRateUnits);
  if (p.value <= 0) fail("FLOP rate", text, "must be positive");
  return FlopRate::per_second(p.value * p.factor);
}

std::string to_string(Time t) {
  // Exact decimal rendering in the largest unit that is at most |t|.
  const std::int64_t ps = t.ps();
  // Magnitude as unsigned: -INT64_MIN does not fit in int64.
  const std::uint64_t a = ps < 0 ? 0 - static_cast<std::uint64_t>(ps) : static_cast<std::uint64_t>(ps);
  constexpr std::array<std::pair<std::uint64_t, std::string_view>, 4> kUnits{
      {{1'000'000'000'000ULL, "s"}, {1'000'000'000ULL, "ms"}, {1'000'000ULL, "us"}, {1'000ULL, "ns"}}};
  for (const auto& [f, u] : kUnits) {
    if (a < f) continue;
    std::string frac =
        fmt::format("{:0{}}", a % f, static_cast<int>(std::lround(std::log10(static_cast<double>(f)))));
    while (!frac.empty() && frac.back() == '0') frac.pop_back();
    return fmt::format("{}{}{}{}{}", ps < 0 ? "-" : "", a / f, frac.empty() ? "" : ".", frac, u);
  }
  // Zero in the unit a reader expects of "no time" (helper 98: "0ps").
  return ps == 0 ? std::string("0s") : fmt::format("{}ps", ps);
}

std::string to_string(Bytes b) {
  const std::int64_t n = b.count();
  constexpr std::array<std::pair<std::int64_t, std::string_view>, 4> kBin{
      {{1LL << 40, "TiB"}, {1LL << 30, "GiB"}, {1LL << 20, "MiB"}, {1LL << 10, "KiB"}}};
  for (const auto& [f, u] : kBin) {
    if (n != 0 && n % f == 0) return fmt::format("{}{}", n / f, u);
  }
  return fmt::format("{}B", n);
}

std::string to_string(Bandwidth bw) {
  const std::int64_t b = bw.bps();
  constexpr std::array<std::pair<std::int64_t, std::string_view>, 4> kDec{
      {{1'000'000'000'000LL, "Tbps"}, {1'000'000'000LL, "Gbps"}, {1'000'000LL, "Mbps"}, {1'000LL, "Kbps"}}};
  for (const auto& [f, u] : kDec) {
    if (b != 0 && b % f == 0) return fmt::format("{}{}", b / f, u);
  }
  return fmt::format("{}bps", b);
}

std::string to_string(FlopRate r) { return with_unit(r.tflops(), "TFLOPS"); }

}  // namespace tessera
