// Fuzz target for the scenario loader: any input must either load or throw
// tessera::InputError (a one-line error, exit code 2) — never crash, hang or
// throw anything else. Built with TESSERA_FUZZ_SIMULATE (plan_fuzz), a
// scenario that loads and is small (one job, at most kMaxEvents estimated
// engine events) is also planned and simulated on the flow backend: that
// must finish or throw a tessera::Error (a readable message), never
// anything else, and never trip AddressSanitizer or UBSan.
//
// Built two ways:
//  - with Clang, `scenario_fuzz_libfuzzer` links libFuzzer (-fsanitize=fuzzer):
//      build/tests/fuzz/scenario_fuzz_libfuzzer scenarios/ -max_total_time=60
//  - with any compiler, `scenario_fuzz` is a standalone driver that replays
//    the seed corpus and a fixed number of deterministic mutations of it; it
//    runs under ctest (fuzz.scenario_loader).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "tessera/cli/scenario.hpp"
#include "tessera/error.hpp"
#ifdef TESSERA_FUZZ_SIMULATE
#include "tessera/study/pipeline.hpp"

namespace {
/// Small enough that one input simulates in well under a second.
constexpr double kMaxEvents = 2e5;
long simulated = 0;  // inputs that reached the simulation (the driver's report)

void simulate_if_small(tessera::study::Scenario s) {
  if (!s.jobs.empty() || tessera::study::estimate_work(s).events() > kMaxEvents) return;
  s.backend = tessera::study::parse_backend("flow");
  ++simulated;
  try {
    (void)tessera::study::simulate_scenario(s);
  } catch (const tessera::Error&) {
    // A readable refusal (an invalid plan, a simulation error): fine.
  }
}
}  // namespace
#endif

// libFuzzer's entry point, named by libFuzzer.
// NOLINTNEXTLINE(readability-identifier-naming)
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
#ifdef TESSERA_FUZZ_SIMULATE
    simulate_if_small(tessera::cli::parse_scenario(text, "fuzz.yaml"));
#else
    (void)tessera::cli::parse_scenario(text, "fuzz.yaml");
#endif
  } catch (const tessera::InputError&) {
    // Expected for bad input.
  } catch (const std::exception& e) {
    // The whole input (it may hold NUL bytes) goes to a file for replay.
    if (std::FILE* f = std::fopen("scenario-fuzz-crash.yaml", "wb")) {
      std::fwrite(data, 1, size, f);
      std::fclose(f);
    }
    std::fprintf(stderr,
                 "scenario loader (or simulation) threw a non-input error: %s (input written to "
                 "scenario-fuzz-crash.yaml)\n--- input "
                 "---\n%s\n",
                 e.what(), text.c_str());
    std::abort();
  }
  return 0;
}

#ifndef TESSERA_LIBFUZZER
#include "mutate.hpp"
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

using tessera::fuzz::mutate;

/// Usage: scenario_fuzz CORPUS_DIR [MUTATIONS_PER_SEED]
int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [MUTATIONS_PER_SEED]\n", argv[0]);
    return 2;
  }
  const long rounds = argc > 2 ? std::strtol(argv[2], nullptr, 10) : 2000;
  std::vector<std::string> seeds;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(argv[1])) {
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    seeds.push_back(ss.str());
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "no .yaml seeds in %s\n", argv[1]);
    return 2;
  }
  std::mt19937_64 rng(20261121);
  long inputs = 0;
  for (const std::string& seed : seeds) {
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(seed.data()), seed.size());
    std::string cur = seed;
    for (long i = 0; i < rounds; ++i) {
      // Stack a few edits, restarting from the seed now and then.
      cur = (i % 8 == 0) ? mutate(seed, rng) : mutate(cur, rng);
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(cur.data()), cur.size());
      ++inputs;
    }
  }
#ifdef TESSERA_FUZZ_SIMULATE
  std::printf("scenario loader and simulation survived %ld mutated inputs from %zu seeds (%ld simulated)\n",
              inputs, seeds.size(), simulated);
#else
  std::printf("scenario loader survived %ld mutated inputs from %zu seeds\n", inputs, seeds.size());
#endif
  return 0;
}
#endif
