#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tessera/cli/scenario.hpp"

using namespace tessera;
using namespace tessera::cli;

namespace {
std::string default_text() {
  std::ifstream in(std::string(TESSERA_SCENARIO_DIR) + "/default.yaml");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return text.replace(pos, from.size(), to);
}

std::string error_of(const std::string& text) {
  try {
    (void)parse_scenario(text, "s.yaml");
  } catch (const ScenarioError& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST(Scenario, DefaultLoads) {
  const Scenario s = parse_scenario(default_text(), "default.yaml");
  EXPECT_EQ(s.gpus(), 16);
  EXPECT_EQ(s.gpu.name, "H100-SXM");
  EXPECT_EQ(s.cluster.nic_bandwidth, parse_bandwidth("400Gbps"));
  EXPECT_EQ(s.cluster.spine_latency, parse_time("600ns"));
  EXPECT_EQ(s.model.hidden, 1280);
  EXPECT_EQ(s.workload.dtype, node_model::DType::BF16);
  EXPECT_EQ(s.plan.bucket_size, Bytes(25'000'000));
  EXPECT_EQ(s.backend, Backend::Flow);
}

TEST(Scenario, InlineGpuAndModel) {
  std::string t = replaced(default_text(), "gpu: H100-SXM",
                           "gpu: {name: X1, fp32_peak: 50TFLOPS, tensor_peak: 800TFLOPS, memory_bandwidth: 3TB/s, "
                           "sms: 100, l2_cache: 40MiB, memory: 96GiB}");
  t = replaced(t, "preset: gpt2-large", "{layers: 4, hidden: 512, heads: 8, vocab: 1000}");
  t = replaced(t, "model:\n  {", "model: {");
  const Scenario s = parse_scenario(t, "s.yaml");
  EXPECT_EQ(s.gpu.name, "X1");
  EXPECT_EQ(s.gpu.memory_bandwidth, parse_bandwidth("3TB/s"));
  EXPECT_EQ(s.model.ffn_hidden, 2048);
}

TEST(Scenario, ErrorsNameTheKeyPath) {
  EXPECT_EQ(error_of(replaced(default_text(), "gpu: H100-SXM", "gpu: B300")).find("s.yaml:"), 0U);
  EXPECT_NE(error_of(replaced(default_text(), "gpu: H100-SXM", "gpu: B300")).find("cluster.gpu: unknown GPU preset 'B300'"),
            std::string::npos);
  EXPECT_NE(error_of(replaced(default_text(), "dtype: bf16", "dtype: int4")).find("training.dtype: unknown dtype"),
            std::string::npos);
  EXPECT_NE(error_of(replaced(default_text(), "preset: gpt2-large", "preset: gpt2-large\n  heads: 7"))
                .find("model: model 'gpt2-large': heads (7) must divide hidden (1280)"),
            std::string::npos);
  EXPECT_NE(error_of(replaced(default_text(), "backend: flow", "backend: flow\nextra: 1")).find("extra: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of(replaced(default_text(), "spines: 8", "spines: [8]")).find("cluster.fabric.spines: expected a whole number"),
            std::string::npos);
  EXPECT_NE(error_of("").find("the scenario is empty"), std::string::npos);
  EXPECT_NE(error_of("- a\n- b\n").find("must be a YAML mapping"), std::string::npos);
}
