#include "tessera/units.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tessera/error.hpp"
#include "tessera/index.hpp"
#include "tessera/names.hpp"

using namespace tessera;

TEST(Units, ParsesTime) {
  EXPECT_EQ(parse_time("1.5us").ps(), 1'500'000);
  EXPECT_EQ(parse_time("500 ns").ps(), 500'000);
  EXPECT_EQ(parse_time("81.92ns").ps(), 81'920);
  EXPECT_EQ(parse_time("2ms").ps(), 2'000'000'000LL);
  EXPECT_EQ(parse_time("1s").ps(), 1'000'000'000'000LL);
  EXPECT_EQ(parse_time("0ps").ps(), 0);
  EXPECT_EQ(parse_time("1e3ns").ps(), 1'000'000);
}

// A scaled time back to picoseconds: rounded, and out of range (a factor
// of 1e6 on days, infinity, NaN) an OverflowError, not a cast's undefined
// behaviour.
TEST(Units, PicosecondsFromADoubleRoundOrOverflow) {
  EXPECT_EQ(Time::from_ps_rounded(1.4).ps(), 1);
  EXPECT_EQ(Time::from_ps_rounded(2.5).ps(), 3);
  EXPECT_EQ(Time::from_ps_rounded(-2.5).ps(), -3);
  EXPECT_EQ(Time::from_ps_rounded(9.0e18).ps(), 9'000'000'000'000'000'000);
  EXPECT_THROW((void)Time::from_ps_rounded(9.3e18), OverflowError);
  EXPECT_THROW((void)Time::from_ps_rounded(static_cast<double>(Time::from_seconds(86'400).ps()) * 1e6),
               OverflowError);
  EXPECT_THROW((void)Time::from_ps_rounded(std::numeric_limits<double>::infinity()), OverflowError);
  EXPECT_THROW((void)Time::from_ps_rounded(std::nan("")), OverflowError);
}

// A size split in parts: at least one part (a division by zero was
// undefined behaviour).
TEST(Units, BytesSplitInPartsNeedsAPart) {
  EXPECT_EQ(Bytes(10) / 3, Bytes(3));
  EXPECT_THROW((void)(Bytes(10) / 0), SimulationError);
  EXPECT_THROW((void)(Bytes(10) / -1), SimulationError);
}

TEST(Units, ParsesBytes) {
  EXPECT_EQ(parse_bytes("80GiB").count(), 80LL * 1024 * 1024 * 1024);
  EXPECT_EQ(parse_bytes("25MB").count(), 25'000'000);
  EXPECT_EQ(parse_bytes("4KiB").count(), 4096);
  EXPECT_EQ(parse_bytes("1.5KiB").count(), 1536);
  EXPECT_EQ(parse_bytes("7B").count(), 7);
}

TEST(Units, UnknownUnitListsEveryUnitTaken) {
  // The error's list is the parser's own table: every spelling it takes.
  auto error_of = [](auto parse, const char* text) {
    try {
      (void)parse(text);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(
      error_of(parse_bandwidth, "4Gbs"),
      "invalid bandwidth '4Gbs': unknown unit 'Gbs' (expected one of bps, Kbps, Mbps, Gbps, Tbps, b/s, Kb/s, "
      "Mb/s, Gb/s, Tb/s, B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, MiB/s, GiB/s)");
  EXPECT_EQ(parse_bandwidth("4Gb/s").bps(), 4'000'000'000LL);
  EXPECT_EQ(parse_bandwidth("1MiB/s").bps(), 8LL * 1024 * 1024);
  EXPECT_NE(error_of(parse_flop_rate, "1 GF").find("FLOPS, GFLOPS, TFLOPS, PFLOPS, FLOP/s"),
            std::string::npos);
}

TEST(Units, BytesInGib) {
  EXPECT_DOUBLE_EQ(Bytes::gib(80).in_gib(), 80.0);
  EXPECT_DOUBLE_EQ(Bytes::mib(512).in_gib(), 0.5);
  EXPECT_DOUBLE_EQ(parse_bytes("80GB").in_gib(), 80e9 / (1024.0 * 1024 * 1024));
}

TEST(Units, ParsesBandwidth) {
  EXPECT_EQ(parse_bandwidth("400Gbps").bps(), 400'000'000'000LL);
  EXPECT_EQ(parse_bandwidth("50GB/s").bps(), 400'000'000'000LL);
  EXPECT_EQ(parse_bandwidth("200Gb/s").bps(), 200'000'000'000LL);
  EXPECT_EQ(parse_bandwidth("1GiB/s").bps(), 8LL * 1024 * 1024 * 1024);
}

TEST(Units, ParsesCounts) {
  EXPECT_DOUBLE_EQ(parse_count("1T"), 1e12);
  EXPECT_DOUBLE_EQ(parse_count("300B"), 300e9);
  EXPECT_DOUBLE_EQ(parse_count("300G"), 300e9);
  EXPECT_DOUBLE_EQ(parse_count("1.5 M"), 1.5e6);
  EXPECT_DOUBLE_EQ(parse_count("2e12"), 2e12);
  EXPECT_DOUBLE_EQ(parse_count("1000"), 1000);
  EXPECT_THROW(parse_count("0"), UnitError);
  EXPECT_THROW(parse_count("-1T"), UnitError);
  EXPECT_THROW(parse_count("1X"), UnitError);
  EXPECT_THROW(parse_count("T"), UnitError);
  EXPECT_THROW(parse_count("1.5"), UnitError);  // a count is whole (1.5K is 1500)
  EXPECT_DOUBLE_EQ(parse_count("1.5K"), 1500);
  EXPECT_DOUBLE_EQ(parse_count("1e18"), 1e18);
  EXPECT_THROW(parse_count("1e30"), UnitError);
}

TEST(Units, ParsesFlopRate) {
  EXPECT_DOUBLE_EQ(parse_flop_rate("989TFLOPS").per_second(), 989e12);
  EXPECT_DOUBLE_EQ(parse_flop_rate("19.5 TFLOP/s").per_second(), 19.5e12);
  EXPECT_DOUBLE_EQ(parse_flop_rate("2250TFLOPs").per_second(), 2250e12);  // spec sheets' spelling
  EXPECT_DOUBLE_EQ(parse_flop_rate("4.5 PFLOPs").per_second(), 4.5e15);
}

TEST(Units, BareZeroNeedsNoUnit) {
  EXPECT_EQ(parse_time("0").ps(), 0);
  EXPECT_EQ(parse_time("0.0").ps(), 0);
  EXPECT_EQ(parse_bytes("0").count(), 0);
  // Rates must be positive: a bare zero is rejected as 0Gbps is, for its value.
  EXPECT_THROW((void)parse_bandwidth("0"), UnitError);
  EXPECT_THROW((void)parse_flop_rate("0"), UnitError);
  for (const char* bad : {"1", "0.5", "1e-3"}) {
    EXPECT_THROW((void)parse_time(bad), UnitError) << bad;
  }
}

TEST(Units, RejectsBadStrings) {
  for (const char* bad : {"", "us", "1.5", "1.5 parsecs", "-1us", "1.2.3us", "abc", "1 u s", "0.3ps"}) {
    EXPECT_THROW((void)parse_time(bad), UnitError) << bad;
  }
  for (const char* bad : {"0.5B", "-4KiB", "4 KIB", "4Kib", "GB", "1e400GB"}) {
    EXPECT_THROW((void)parse_bytes(bad), UnitError) << bad;
  }
  for (const char* bad : {"400Gbs", "400", "0Gbps", "-1Gbps", "400 GBps"}) {
    EXPECT_THROW((void)parse_bandwidth(bad), UnitError) << bad;
  }
  EXPECT_THROW((void)parse_flop_rate("0TFLOPS"), UnitError);
}

TEST(Units, ErrorMessageNamesTheString) {
  try {
    (void)parse_bandwidth("400Gbs");
    FAIL() << "expected UnitError";
  } catch (const UnitError& e) {
    EXPECT_NE(std::string(e.what()).find("'400Gbs'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Gbps"), std::string::npos) << e.what();
  }
}

TEST(Units, RoundTrips) {
  for (const char* s : {"81.92ns", "1.5us", "3ms", "2s", "17ps"}) {
    EXPECT_EQ(to_string(parse_time(s)), s);
  }
  for (const char* s : {"80GiB", "4KiB", "1000B", "3MiB"}) {
    EXPECT_EQ(to_string(parse_bytes(s)), s);
  }
  for (const char* s : {"400Gbps", "100Mbps", "1Tbps", "7bps"}) {
    EXPECT_EQ(to_string(parse_bandwidth(s)), s);
  }
  EXPECT_EQ(to_string(Time::zero()), "0s");
  EXPECT_EQ(to_string(Time::from_ps(-17)), "-17ps");
  // Any time survives a round trip through its rendering.
  for (std::int64_t ps : {0LL, 1LL, 999LL, 1001LL, 123'456'789LL, 5'000'000'000'001LL}) {
    EXPECT_EQ(parse_time(to_string(Time::from_ps(ps))).ps(), ps) << to_string(Time::from_ps(ps));
  }
}

TEST(Units, TransmitTimeIsExact) {
  // 4 KiB at 400 Gb/s is 81.92 ns exactly.
  EXPECT_EQ(transmit_time(Bytes::kib(4), Bandwidth::gbps(400)).ps(), 81'920);
  // 1 byte at 3 bps: 8/3 s, rounded up to the picosecond.
  EXPECT_EQ(transmit_time(Bytes(1), Bandwidth::bits_per_second(3)).ps(), 2'666'666'666'667LL);
  // 64 GiB at 1 Gbps does not overflow.
  EXPECT_EQ(transmit_time(Bytes::gib(64), Bandwidth::gbps(1)).ps(), 64LL * 1024 * 1024 * 1024 * 8 * 1000);
  EXPECT_THROW((void)transmit_time(Bytes(1), Bandwidth::bits_per_second(0)), InputError);
}

TEST(Units, ComputeTime) {
  EXPECT_EQ(compute_time(Flops(1e12), FlopRate::tflops(1)).ps(), 1'000'000'000'000LL);
  EXPECT_NEAR(achieved_rate(Flops(2e12), Time::from_ms(1000)).tflops(), 2.0, 1e-12);
}

// Issue 17: Time and Bytes arithmetic never wraps; it throws OverflowError
// naming the operation.
TEST(Units, TimeArithmeticOverflowThrows) {
  const Time big = parse_time("9000000s");  // 9e18 ps: fits, but twice it does not
  EXPECT_EQ(big.ps(), 9'000'000'000'000'000'000LL);
  try {
    (void)(big * 2);
    FAIL() << "expected OverflowError";
  } catch (const OverflowError& e) {
    EXPECT_EQ(std::string(e.what()),
              "time overflow: 9000000s x 2 does not fit in 64-bit picoseconds (at most about 106 days)");
  }
  EXPECT_THROW((void)(big + big), OverflowError);
  Time acc = big;
  EXPECT_THROW(acc += big, OverflowError);
  EXPECT_EQ(acc, big);  // unchanged by the failed addition
  EXPECT_THROW((void)(Time::zero() - big - big), OverflowError);
  EXPECT_THROW((void)Time::from_ms(std::int64_t{1} << 40), OverflowError);
  EXPECT_THROW((void)Time::from_seconds(1e7), OverflowError);
  EXPECT_EQ((big + Time::from_ps(1)).ps(), 9'000'000'000'000'000'001LL);
  EXPECT_EQ((Time::max() - Time::max()).ps(), 0);
}

// A size computed in double (an activation estimate) converts through
// from_truncated: past int64 it throws (the cast was undefined behaviour,
// found by UBSan at seq_len 10^9).
TEST(Units, SizeFromDoubleTruncatesOrThrows) {
  EXPECT_EQ(Bytes::from_truncated(1536.9).count(), 1536);
  EXPECT_EQ(Bytes::from_truncated(9.2e18).count(), 9'200'000'000'000'000'000LL);
  EXPECT_THROW((void)Bytes::from_truncated(9.3e18), OverflowError);
  EXPECT_THROW((void)Bytes::from_truncated(5.376e21), OverflowError);
  EXPECT_THROW((void)Bytes::from_truncated(std::nan("")), OverflowError);
  EXPECT_THROW((void)Bytes::from_truncated(HUGE_VAL), OverflowError);
}

TEST(Units, SizeArithmeticOverflowThrows) {
  const Bytes big = parse_bytes("8000000TB");
  EXPECT_EQ(big.count(), 8'000'000'000'000'000'000LL);
  EXPECT_THROW((void)(big + big), OverflowError);
  EXPECT_THROW((void)(big * 2), OverflowError);
  EXPECT_THROW((void)Bytes::gib(std::int64_t{1} << 34), OverflowError);
  try {
    (void)(Bytes::gib(4) * (std::int64_t{1} << 32));
    FAIL() << "expected OverflowError";
  } catch (const OverflowError& e) {
    EXPECT_EQ(std::string(e.what()),
              "size overflow: 4GiB x 4294967296 does not fit in 64-bit bytes (at most about 8 EiB)");
  }
}

TEST(Units, TransmitTimeOverflowThrows) {
  // 1 EB at 1 bps: 8e18 s, far beyond int64 picoseconds.
  EXPECT_THROW((void)transmit_time(parse_bytes("1000000TB"), Bandwidth::bits_per_second(1)), OverflowError);
  EXPECT_EQ(transmit_time(Bytes(1), Bandwidth::bits_per_second(8)).ps(), 1'000'000'000'000LL);
}

TEST(Units, ParsersRejectValuesBeyondInt64) {
  // The largest values that fit are accepted, the next ones rejected (not wrapped or saturated).
  EXPECT_EQ(parse_time("9223372s").ps(), 9'223'372'000'000'000'000LL);
  EXPECT_THROW((void)parse_time("9223373s"), UnitError);
  EXPECT_THROW((void)parse_time("1e300s"), UnitError);
  EXPECT_EQ(parse_bytes("9223372TB").count(), 9'223'372'000'000'000'000LL);
  EXPECT_THROW((void)parse_bytes("9223373TB"), UnitError);
  EXPECT_THROW((void)parse_bytes("8388608TiB"), UnitError);  // exactly 2^63 bytes
  EXPECT_THROW((void)parse_bandwidth("9223373Tbps"), UnitError);
  try {
    (void)parse_time("9223373s");
    FAIL() << "expected UnitError";
  } catch (const UnitError& e) {
    EXPECT_NE(std::string(e.what()).find("'9223373s': value too large"), std::string::npos) << e.what();
  }
}

TEST(Index, FlatIndexDoesNotWrapPastTwoToTheThirtyOne) {
  static_assert(tessera::flat_index(2, 8, 3) == 19);
  EXPECT_EQ(tessera::flat_index(0, 8, 0), 0U);
  // 70,000 x 70,000 + 5: the int product would wrap; the size_t one does not.
  EXPECT_EQ(tessera::flat_index(70000, 70000, 5), std::size_t{4900000005});
}

// "Did you mean": the nearest names by edit distance, within a third of the
// mistyped name's length (at least one edit), ties all named.
TEST(DidYouMean, NamesTheNearestCandidates) {
  const std::vector<std::string> commands{"collectives", "compare-schedules", "kernels", "run", "search",
                                          "sweep",       "sweep-merge",       "validate"};
  EXPECT_EQ(closest_names("runn", commands), std::vector<std::string>{"run"});           // an insertion
  EXPECT_EQ(closest_names("rnu", commands), std::vector<std::string>{"run"});            // a swap: one edit
  EXPECT_EQ(closest_names("swep", commands), std::vector<std::string>{"sweep"});         // a deletion
  EXPECT_EQ(closest_names("Validate", commands), std::vector<std::string>{"validate"});  // case ignored
  EXPECT_EQ(closest_names("kernals", commands), std::vector<std::string>{"kernels"});    // a substitution
  EXPECT_TRUE(closest_names("fly", commands).empty());  // 3 letters: one edit at most
  EXPECT_TRUE(closest_names("run", commands).empty());  // a candidate itself
  EXPECT_TRUE(closest_names("", commands).empty());
  EXPECT_TRUE(closest_names("runn", {}).empty());
  // 8 letters: two edits allowed, three not.
  EXPECT_EQ(closest_names("scheudle", {"schedule", "sequence_parallel"}),
            std::vector<std::string>{"schedule"});
  EXPECT_EQ(closest_names("shcedle", {"schedule"}),
            std::vector<std::string>{"schedule"});  // swap + insertion
  EXPECT_TRUE(closest_names("xyzdule", {"schedule"}).empty());
  // Digits must agree: a number is a size or a generation, not a typo.
  EXPECT_TRUE(closest_names("llama2-7B", {"llama2-70b", "llama3-8b"}).empty());
  EXPECT_TRUE(closest_names("B300", {"B200", "GB200"}).empty());
  EXPECT_EQ(closest_names("gpt3-175", {"gpt3-175b", "gpt3-xl"}), std::vector<std::string>{"gpt3-175b"});
  EXPECT_EQ(closest_names("1f1bb", {"gpipe", "1f1b", "zb-h1"}), std::vector<std::string>{"1f1b"});
  // A tie: both, in the candidates' order.
  EXPECT_EQ(closest_names("tpp", {"dp", "pp", "tp"}), (std::vector<std::string>{"pp", "tp"}));
  EXPECT_EQ(did_you_mean("tpp", {"dp", "pp", "tp"}), ", did you mean 'pp' or 'tp'?");
  EXPECT_EQ(did_you_mean("tpp", {"pp", "tp", "tpx"}), ", did you mean 'pp', 'tp' or 'tpx'?");
  EXPECT_EQ(did_you_mean("jsn", {"json", "out"}, "--", ""), ", did you mean --json?");
  EXPECT_EQ(did_you_mean("fly", {"run"}), "");
}

// A long value is cut in the message, with its length (helper 145: a
// 100,000-character value made a 100 kB error line).
TEST(Units, LongValuesAreCutInErrors) {
  const std::string value = std::string(100'000, '4') + "Gbps";
  try {
    (void)parse_bandwidth(value);
    FAIL() << "accepted";
  } catch (const UnitError& e) {
    const std::string what = e.what();
    EXPECT_LT(what.size(), 400U) << what;
    EXPECT_NE(what.find("'" + std::string(64, '4') + "... (100004 bytes)'"), std::string::npos) << what;
  }
  try {
    (void)parse_bandwidth("400" + std::string(1000, 'G'));
    FAIL() << "accepted";
  } catch (const UnitError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown unit '" + std::string(64, 'G') + "... (1000 bytes)'"),
              std::string::npos)
        << e.what();
  }
  // A cut falls between UTF-8 characters, not inside one: 63 digits, then
  // two-byte characters.
  std::string accented = std::string(63, '1');
  for (int i = 0; i < 40; ++i) accented += "\u00e9";
  try {
    (void)parse_bandwidth(accented);
    FAIL() << "accepted";
  } catch (const UnitError& e) {
    EXPECT_NE(std::string(e.what()).find("'" + std::string(63, '1') + "... (143 bytes)'"), std::string::npos)
        << e.what();
  }
  // A short one is shown whole.
  try {
    (void)parse_bandwidth("400Gbs");
    FAIL() << "accepted";
  } catch (const UnitError& e) {
    EXPECT_NE(std::string(e.what()).find("invalid bandwidth '400Gbs': unknown unit 'Gbs'"), std::string::npos)
        << e.what();
  }
}
