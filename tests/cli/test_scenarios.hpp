#pragma once
// Shared by the cli tests: a shipped scenario's text, and the one-line
// ScenarioError of loading a text (or "no error").
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/cli/scenario.hpp"

namespace tessera::cli::test {

inline std::string scenario_text(const std::string& name) {
  std::ifstream in(std::string(TESSERA_SCENARIO_DIR) + "/" + name);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string error_of(const std::string& text, const std::vector<Override>& overrides = {}) {
  try {
    (void)parse_scenario(text, "s.yaml", overrides);
  } catch (const ScenarioError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    return msg;
  }
  return "no error";
}

}  // namespace tessera::cli::test
