// Fuzzes every input loader besides the scenario's (scenario_fuzz.cpp):
// device-config JSON, kernel CSV, HuggingFace config JSON, torch.fx
// operator-graph CSV and nccl-tests output. Bad input must raise tessera::InputError and nothing
// else: any other exception aborts with the input written to a file.
//
// The first byte picks the loader ('d' device, 'k' kernels, 'h' HF config,
// 'g' fx graph, 'n' nccl-tests; other bytes modulo 5), the rest is the
// file's text. Two drivers: libFuzzer's (TESSERA_LIBFUZZER) and a
// deterministic mutation driver over seed files whose names start with
// dev_, k_, hf_, g_ or nccl_ (tests/cli/hostile/), run by ctest
// (fuzz.loaders).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "tessera/error.hpp"
#include "tessera/node_model/csv.hpp"
#include "tessera/node_model/device_config.hpp"
#include "tessera/node_model/json.hpp"
#include "tessera/node_model/model_graph.hpp"
#include "tessera/study/nccl_tests.hpp"

namespace nm = tessera::node_model;

namespace {

void load(char which, std::string_view text) {
  switch (which == 'd'   ? 0
          : which == 'k' ? 1
          : which == 'h' ? 2
          : which == 'g' ? 3
          : which == 'n' ? 4
                         : static_cast<unsigned char>(which) % 5) {
    case 0: (void)nm::gpu_from_device_json(nm::parse_json(text, "d.json"), "d.json"); break;
    case 1: {
      const nm::CsvTable t = nm::parse_csv(text, "k.csv");
      for (std::size_t r = 0; r < t.rows.size(); ++r) (void)nm::kernel_from_row(t, r);
      break;
    }
    case 2: {
      const nm::ModelShape m = nm::model_shape_from_config(nm::parse_json(text, "c.json"), "c.json");
      (void)nm::build_model_graph(m, 2, 16, true);
      break;
    }
    case 3:
      (void)nm::fx_graph_from_csv(nm::parse_csv(text, "g.csv"), "g.csv");
      break;
    default:
      (void)tessera::study::parse_nccl_tests(text, "all_reduce_perf.txt");
      break;
  }
}

}  // namespace

// libFuzzer's entry point, named by libFuzzer.
// NOLINTNEXTLINE(readability-identifier-naming)
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    load(static_cast<char>(data[0]), text);
  } catch (const tessera::InputError&) {
    // Expected for bad input.
  } catch (const std::exception& e) {
    if (std::FILE* f = std::fopen("loader-fuzz-crash.bin", "wb")) {
      std::fwrite(data, 1, size, f);
      std::fclose(f);
    }
    std::fprintf(stderr, "a loader threw a non-input error: %s (input written to loader-fuzz-crash.bin)\n", e.what());
    std::abort();
  }
  return 0;
}

#ifndef TESSERA_LIBFUZZER
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "mutate.hpp"

/// Usage: loader_fuzz SEED_DIR [MUTATIONS_PER_SEED]
int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s SEED_DIR [MUTATIONS_PER_SEED]\n", argv[0]);
    return 2;
  }
  const long rounds = argc > 2 ? std::strtol(argv[2], nullptr, 10) : 500;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(argv[1])) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::mt19937_64 rng(20261123);
  long inputs = 0;
  std::size_t seeds = 0;
  for (const auto& f : files) {
    const std::string name = f.filename().string();
    const char which = name.rfind("dev_", 0) == 0                            ? 'd'
                       : name.rfind("k_", 0) == 0                            ? 'k'
                       : name.rfind("hf_", 0) == 0                           ? 'h'
                       : name.rfind("g_", 0) == 0 && f.extension() == ".csv" ? 'g'
                       : name.rfind("nccl_", 0) == 0                         ? 'n'
                                                                             : '\0';
    if (which == '\0' || std::filesystem::file_size(f) > (1 << 20)) continue;
    std::ifstream in(f, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string seed = which + ss.str();
    ++seeds;
    std::string cur = seed;
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(cur.data()), cur.size());
    for (long i = 0; i < rounds; ++i) {
      // Stack a few edits after the selector byte, restarting now and then.
      const std::string base = (i % 8 == 0) ? seed : cur;
      cur.assign(1, which);
      cur += tessera::fuzz::mutate(base.substr(1), rng);
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(cur.data()), cur.size());
      ++inputs;
    }
  }
  if (seeds == 0) {
    std::fprintf(stderr, "no dev_/k_/hf_/g_/nccl_ seeds in %s\n", argv[1]);
    return 2;
  }
  std::printf("loaders survived %ld mutated inputs from %zu seeds\n", inputs, seeds);
  return 0;
}
#endif
