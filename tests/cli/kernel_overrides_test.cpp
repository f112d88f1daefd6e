// `node_model.overrides` end to end: a scenario whose override file holds one
// kernel shape of the model changes the iteration by exactly (measured -
// predicted) x that kernel's occurrences, and `tessera run`'s report says how
// many kernels were matched (and says nothing without overrides).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/cli/commands.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/node_model/predictors.hpp"
#include "tessera/node_model/roofline.hpp"
#include "tessera/study/pipeline.hpp"

using namespace tessera;
using namespace tessera::cli;
namespace fs = std::filesystem;
namespace nm = tessera::node_model;

namespace {

// One GPU, so every kernel runs on the one compute stream and nothing is
// communicated; PyTorch eager (no host model), no recomputation.
constexpr const char* kScenario = R"(name: one-gpu
cluster:
  nodes: 1
  gpus_per_node: 1
  gpu: H100-SXM
  nvlink_bandwidth: 450GB/s
  nvlink_latency: 1us
  nic_bandwidth: 400Gbps
  nic_latency: 1us
  fabric: {type: leaf-spine, hosts_per_leaf: 1, spines: 1, spine_bandwidth: 400Gbps, spine_latency: 600ns}
model: {layers: 2, hidden: 1024, heads: 16, vocab: 32000}
training:
  micro_batch: 1
  seq_len: 2048
  global_batch: 4
  dtype: bf16
  framework: pytorch-eager
parallelism:
  dp: 1
  recompute: none
predictor: roofline
backend: flow
)";

class KernelOverridesRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_overrides_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    std::string p = (dir_ / name).string();
    std::ofstream(p) << text;
    return p;
  }
  fs::path dir_;
};

}  // namespace

// A measured time below the GPU's roofline bound (here 1000 times too fast:
// milliseconds typed into time_us) is said in a warning naming the line; a
// plausible one is not.
TEST_F(KernelOverridesRun, ATimeFasterThanThePeakIsWarnedAbout) {
  const nm::Kernel qkv = nm::Kernel::gemm(nm::KernelOp::Linear, 1, 2048, 3072, 1024, nm::DType::BF16);
  const std::string text = std::string(kScenario) + "node_model:\n  overrides: fast.csv\n";
  write("fast.csv",
        "op,b,m,n,k,h,dtype,time_us\n"
        "linear,1,2048,3072,1024,,bf16,0.25\n");
  const Scenario fast = parse_scenario(text, write("fast.yaml", text));
  const Time bound = nm::roofline_time(qkv, fast.gpu);
  ASSERT_GT(bound, Time::from_ps(250'000));
  ASSERT_EQ(fast.warnings.size(), 1U);
  EXPECT_EQ(
      fast.warnings[0],
      fmt::format("node_model.overrides: 1 kernel of {} is faster than H100-SXM allows at its peak (line 2: "
                  "0.25 us, bound {:g} us): is time_us in microseconds? (NeuSight's Latency is in ms)",
                  (dir_ / "fast.csv").string(), bound.us()));
  write("fast.csv",
        "op,b,m,n,k,h,dtype,time_us\n"
        "linear,1,2048,3072,1024,,bf16,250.125\n");
  EXPECT_TRUE(parse_scenario(text, write("fast.yaml", text)).warnings.empty());
}

TEST_F(KernelOverridesRun, OneKernelShapeChangesComputeByMeasuredMinusPredictedTimesOccurrences) {
  const Scenario plain = parse_scenario(kScenario, write("plain.yaml", kScenario));
  EXPECT_EQ(plain.kernel_overrides, nullptr);
  // The QKV projection's forward GEMM: tokens = micro_batch x seq_len = 2048
  // rows, hidden 1024 in, 3 x 1024 out (Kernel::gemm(Linear, 1, 2048, 3072,
  // 1024)). No other kernel of this model has that shape: its input
  // gradient is 2048 x 1024 x 3072, its weight gradient 1024 x 3072 x 2048,
  // fc1 has 4096 columns, the projection and fc2 1024, the LM head 32000.
  // It runs once per layer and micro-batch, forward only (no
  // recomputation): 2 layers x 4 micro-batches (global_batch 4 / micro_batch
  // 1 / dp 1) = 8 times, all on the one GPU's compute stream.
  const nm::Kernel qkv = nm::Kernel::gemm(nm::KernelOp::Linear, 1, 2048, 3072, 1024, nm::DType::BF16);
  const std::int64_t occurrences = 8;
  const Time predicted = make_scenario_predictor(plain)->predict(qkv);
  const Time measured = Time::from_ps(250'125'000);  // 250.125 us
  ASSERT_NE(predicted, measured);
  // The second row (fp32) is not a kernel of this bf16 model: never matched.
  write("qkv.csv",
        "op,b,m,n,k,h,dtype,time_us\n"
        "linear,1,2048,3072,1024,,bf16,250.125\n"
        "linear,1,2048,3072,1024,,fp32,1\n");
  const std::string with_text = std::string(kScenario) + "node_model:\n  overrides: qkv.csv\n";
  // A relative path is read from the scenario file's directory.
  const Scenario with = parse_scenario(with_text, write("with.yaml", with_text));
  ASSERT_NE(with.kernel_overrides, nullptr);
  EXPECT_EQ(with.kernel_overrides->path(), (dir_ / "qkv.csv").string());

  const Simulation a = simulate_scenario(plain);
  const Simulation b = simulate_scenario(with);
  const Time delta = (measured - predicted) * occurrences;
  EXPECT_EQ(b.free_comm.compute - a.free_comm.compute, delta);
  EXPECT_EQ(b.result.makespan - a.result.makespan, delta);  // nothing else moves
  EXPECT_EQ(breakdown(b).exposed_comm, Time::zero());

  ASSERT_TRUE(b.kernel_overrides.has_value());
  EXPECT_FALSE(a.kernel_overrides.has_value());
  EXPECT_EQ(b.kernel_overrides->entries, 2U);
  EXPECT_EQ(b.kernel_overrides->matched, 1U);
  EXPECT_GE(b.kernel_overrides->lookups, 1);
  EXPECT_GT(b.kernel_overrides->delegated, 0);

  // The report: a line and a JSON object with overrides, neither without.
  const RunReport rep = make_report(with, b);
  const std::string text = format_text(rep);
  EXPECT_NE(text.find("Measured       1 of 2 kernels in " + (dir_ / "qkv.csv").string() + " matched (" +
                      std::to_string(b.kernel_overrides->lookups) + " planner lookup" +
                      (b.kernel_overrides->lookups == 1 ? "" : "s") +
                      "); unmatched (no kernel of this plan has their op, dtype and "
                      "dimensions): line 3\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(b.kernel_overrides->unmatched_lines, std::vector<std::size_t>{3});
  const std::string json = format_json(rep);
  EXPECT_NE(json.find("\"kernel_overrides\": {\"file\": \"" + (dir_ / "qkv.csv").string() +
                      "\", \"kernels\": 2, \"matched_kernels\": 1, \"lookups\": " +
                      std::to_string(b.kernel_overrides->lookups) + ", \"unmatched_lines\": [3]}, "),
            std::string::npos)
      << json;
  const RunReport plain_rep = make_report(plain, a);
  EXPECT_EQ(format_text(plain_rep).find("Measured"), std::string::npos);
  EXPECT_EQ(format_json(plain_rep).find("kernel_overrides"), std::string::npos);
}

TEST_F(KernelOverridesRun, NeuSightFormAndCommandLinePath) {
  // NeuSight's schema (Latency in ms; [B,M,N] x [B,N,K]: the QKV GEMM is
  // M 2048, N 1024 (the reduction), K 3072), with a dtype column: bf16.
  const std::string csv = write("neusight.csv",
                                "OPName,Latency,Device,B,M,N,K,dtype\n"
                                "linear,0.5,NVIDIA H100 80GB HBM3,1,2048,1024,3072,bf16\n");
  // From --set the path is taken as typed (relative to the working directory).
  const Scenario s =
      parse_scenario(kScenario, write("s.yaml", kScenario), {Override{"node_model.overrides", csv}});
  ASSERT_NE(s.kernel_overrides, nullptr);
  const auto p = make_scenario_predictor(s);
  EXPECT_EQ(p->predict(nm::Kernel::gemm(nm::KernelOp::Linear, 1, 2048, 3072, 1024, nm::DType::BF16)),
            Time::from_us(500));
  EXPECT_EQ(p->name(), "roofline");
  EXPECT_TRUE(s.warnings.empty());
  // The same file under an A100 scenario: another GPU's times, said (and not
  // blamed on units).
  const Scenario a100 =
      parse_scenario(kScenario, write("a.yaml", kScenario),
                     {Override{"node_model.overrides", csv}, Override{"cluster.gpu", "A100-80GB"},
                      Override{"cluster.nvlink_bandwidth", "300GB/s"}});
  ASSERT_EQ(a100.warnings.size(), 1U);
  EXPECT_EQ(a100.warnings[0],
            "node_model.overrides: " + csv +
                " was measured on H100-SXM (its Device column: 'NVIDIA H100 80GB HBM3'), the "
                "scenario's GPU is A100-80GB: its times replace this GPU's predictions as they are");
}

// node_model.weights: the folder train-predictor wrote. Here one whose
// tensor-core model floors GEMMs at 0.05 ms (the built-in floor is 0.0057
// ms): a tiny bf16 GEMM takes the folder's floor, and the report names it.
TEST_F(KernelOverridesRun, WeightsFolderFromTrainPredictor) {
  std::string tc(nm::embedded_weights("tensor_core"));
  ASSERT_FALSE(tc.empty());
  const auto at = tc.find("floor_ms ");
  ASSERT_NE(at, std::string::npos);
  tc.replace(at, tc.find('\n', at) - at, "floor_ms 0.05");
  fs::create_directories(dir_ / "w");
  write("w/tensor_core.txt", tc);
  std::string text(kScenario);
  text.replace(text.find("predictor: roofline"), 19, "predictor: tile-mlp");
  const nm::Kernel tiny = nm::Kernel::gemm(nm::KernelOp::Linear, 1, 64, 64, 64, nm::DType::BF16);
  const Scenario built_in = parse_scenario(text, write("s.yaml", text));
  EXPECT_LT(make_scenario_predictor(built_in)->predict_device(tiny), Time::from_us(20));
  const std::string with = text + "node_model:\n  weights: w\n";
  const Scenario s = parse_scenario(with, write("s.yaml", with));
  EXPECT_EQ(s.predictor_weights, (dir_ / "w").string());
  EXPECT_EQ(make_scenario_predictor(s)->predict_device(tiny), Time::from_us(50));
  const std::string report = format_text(make_report(s, study::simulate_scenario(s)));
  EXPECT_NE(report.find("Models         tile-mlp node model (weights " + (dir_ / "w").string() + "), flow"),
            std::string::npos)
      << report;
  // A folder that is not there, and one without the predictor's file.
  const std::string missing = text + "node_model:\n  weights: nowhere\n";
  try {
    (void)parse_scenario(missing, write("s.yaml", missing));
    FAIL() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find(":24:12: node_model.weights: '" + (dir_ / "nowhere").string() +
                                         "' is not a folder"),
              std::string::npos)
        << e.what();
  }
  fs::create_directories(dir_ / "empty");
  const std::string empty = text + "node_model:\n  weights: empty\n";
  try {
    (void)parse_scenario(empty, write("s.yaml", empty));
    FAIL() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find(":24:12: node_model.weights: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("tile_mlp.txt"), std::string::npos) << e.what();
  }
}

TEST_F(KernelOverridesRun, BadOverrideFileNamesTheKeyTheFileAndTheRow) {
  write("bad.csv", "op,b,m,n,k,h,dtype,time_us\nlinear,1,8,8,8,,bf16,1\nconv,1,8,8,8,,bf16,1\n");
  const std::string text = std::string(kScenario) + "node_model:\n  overrides: bad.csv\n";
  const std::string file = write("s.yaml", text);
  try {
    (void)parse_scenario(text, file);
    FAIL() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()),
              file + ":24:14: node_model.overrides: " + (dir_ / "bad.csv").string() +
                  ": row 2 (line 3), column 'op': unknown op 'conv' (expected bmm, linear, "
                  "add, addu, mul, mulu, div, divu, pow, powu, gelu, relu, tanh, softmax, ln, copy, memcpy)");
  }
  const std::string unknown = std::string(kScenario) + "node_model:\n  overides: bad.csv\n";
  try {
    (void)parse_scenario(unknown, file);
    FAIL() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()), file +
                                         ":24:3: node_model.overides: unknown key, did you mean 'overrides'? "
                                         "(known here: overrides, weights)");
  }
}

TEST_F(KernelOverridesRun, EveryJobOfAJobsScenarioUsesTheOverrides) {
  std::ifstream in(std::string(TESSERA_SCENARIO_DIR) + "/two-jobs.yaml");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string csv = write("o.csv", "op,b,h,dtype,time_us\nln,8,64,bf16,2\n");
  const Scenario s = parse_scenario(text, "two-jobs.yaml", {Override{"node_model.overrides", csv}});
  ASSERT_EQ(s.jobs.size(), 2U);
  for (const Job& job : s.jobs) {
    ASSERT_NE(job.scenario.kernel_overrides, nullptr) << job.name;
    const auto p = make_scenario_predictor(job.scenario);
    EXPECT_NE(dynamic_cast<const nm::OverridePredictor*>(p.get()), nullptr) << job.name;
    EXPECT_EQ(p->predict(nm::Kernel::vector(nm::KernelOp::LayerNorm, 8, 64, nm::DType::BF16)),
              Time::from_us(2));
  }
}

// Measured times are cluster.gpu's: the ranks of a mixed_gpus node keep
// their own GPU's predictions (helper 112: an untouched `kernels --out`
// template moved a mixed cluster's forecast 22%). Two one-GPU nodes in data
// parallel, node 1 a slower A100: every kernel measured at 1 us on the H100
// makes the H100 rank fast, but the iteration waits for the A100's.
TEST_F(KernelOverridesRun, MixedGpusNodesKeepTheirOwnGpusTimes) {
  std::string text = kScenario;
  text.replace(text.find("  nodes: 1\n"), 11, "  nodes: 2\n");
  text.replace(text.find("hosts_per_leaf: 1"), 17, "hosts_per_leaf: 2");
  text.replace(text.find("  dp: 1\n"), 8, "  dp: 2\n");
  text += "mixed_gpus: {gpu: A100-80GB, nodes: 1-1}\n";
  const Scenario plain = parse_scenario(text, "mixed.yaml");
  // Every kernel of the model at 1 us: `tessera kernels --out`'s template
  // (the H100's), its time_us and part_time_us cells set to 1.
  const std::string yaml = write("mixed.yaml", text);
  std::ostringstream ignored;
  ASSERT_EQ(cmd_kernels({yaml, "--out", (dir_ / "template.csv").string()}, ignored), 0);
  std::ifstream in(dir_ / "template.csv");
  std::string csv, line;
  std::getline(in, line);
  csv = line + "\n";  // op,b,m,n,k,h,dtype,time_us,part_time_us,...
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream cs(line);
    for (std::string c; std::getline(cs, c, ',');) cells.push_back(c);
    ASSERT_GE(cells.size(), 9U) << line;
    cells[7] = "1";
    if (!cells[8].empty()) cells[8] = "1";
    csv += fmt::format("{}\n", fmt::join(cells, ","));
  }
  const Scenario over =
      parse_scenario(text, "mixed.yaml", {Override{"node_model.overrides", write("all.csv", csv)}});
  const Time t_plain = study::simulate_scenario(plain).result.makespan;
  const Time t_over = study::simulate_scenario(over).result.makespan;
  EXPECT_EQ(t_over, t_plain);  // the A100 rank bounds both
  // All H100s: the overrides do apply, and the iteration falls.
  std::string all_h100 = text.substr(0, text.find("mixed_gpus:"));
  const Time h_plain = study::simulate_scenario(parse_scenario(all_h100, "h.yaml")).result.makespan;
  const Time h_over =
      study::simulate_scenario(
          parse_scenario(all_h100, "h.yaml", {Override{"node_model.overrides", write("all.csv", csv)}}))
          .result.makespan;
  EXPECT_LT(h_over.ps() * 2, h_plain.ps());
}

TEST_F(KernelOverridesRun, PyTorchProfilerExportChangesExactlyItsLeafGemms) {
  // tests/cli/kernels/pytorch_profile.csv: key_averages(group_by_input_shape
  // =True) of this model, written as docs/node_model.md shows, without a
  // dtype column (so bf16, the scenario's training.dtype). Two of its rows
  // are kernels of the model:
  //  - aten::addmm [[3072], [2048, 1024], [1024, 3072], [], []]: the QKV
  //    forward, Kernel::gemm(Linear, 1, 2048, 3072, 1024), 2001 us / 8 calls;
  //  - aten::mm [[3072, 2048], [2048, 1024]]: PyTorch's QKV weight gradient
  //    (dY^T X)^T, which Tessera times as in x out x rows,
  //    Kernel::gemm(Linear, 1, 1024, 3072, 2048): 1604 us / 8 calls.
  // Each runs once per layer and micro-batch (8 times, see above). The
  // aten::bmm row is no kernel of this model; aten::linear (composite: its
  // time holds the addmm's), aten::t, aten::gelu and the ProfilerStep are
  // skipped.
  const std::string csv = std::string(TESSERA_CLI_KERNELS_DIR) + "/pytorch_profile.csv";
  const Scenario plain = parse_scenario(kScenario, write("plain.yaml", kScenario));
  const Scenario with =
      parse_scenario(kScenario, write("with.yaml", kScenario), {Override{"node_model.overrides", csv}});
  ASSERT_NE(with.kernel_overrides, nullptr);
  EXPECT_EQ(with.kernel_overrides->entries().size(), 3U);
  EXPECT_EQ(with.kernel_overrides->ignored_rows(), 4U);

  const nm::Kernel qkv = nm::Kernel::gemm(nm::KernelOp::Linear, 1, 2048, 3072, 1024, nm::DType::BF16);
  const nm::Kernel qkv_wgrad = nm::Kernel::gemm(nm::KernelOp::Linear, 1, 1024, 3072, 2048, nm::DType::BF16);
  const auto base = make_scenario_predictor(plain);
  const auto measured = make_scenario_predictor(with);
  EXPECT_EQ(measured->predict(qkv), Time::from_seconds(2001e-6 / 8));
  EXPECT_EQ(measured->predict(qkv_wgrad), Time::from_seconds(1604e-6 / 8));
  ASSERT_NE(base->predict(qkv), measured->predict(qkv));
  ASSERT_NE(base->predict(qkv_wgrad), measured->predict(qkv_wgrad));

  const Simulation a = simulate_scenario(plain);
  const Simulation b = simulate_scenario(with);
  const std::int64_t occurrences = 8;
  const Time delta = (measured->predict(qkv) - base->predict(qkv)) * occurrences +
                     (measured->predict(qkv_wgrad) - base->predict(qkv_wgrad)) * occurrences;
  EXPECT_EQ(b.free_comm.compute - a.free_comm.compute, delta);
  EXPECT_EQ(b.result.makespan - a.result.makespan, delta);

  ASSERT_TRUE(b.kernel_overrides.has_value());
  EXPECT_EQ(b.kernel_overrides->entries, 3U);
  EXPECT_EQ(b.kernel_overrides->matched, 2U);
  EXPECT_EQ(b.kernel_overrides->ignored_rows, 4U);
  const RunReport rep = make_report(with, b);
  EXPECT_NE(
      format_text(rep).find("Measured       2 of 3 kernels in " + csv + " matched (" +
                            std::to_string(b.kernel_overrides->lookups) +
                            " planner lookups); 4 rows ignored: composite or non-GEMM ops; unmatched (no "
                            "kernel of this plan has their op, dtype and dimensions): line 8\n"),
      std::string::npos)
      << format_text(rep);
  EXPECT_NE(format_json(rep).find(
                "\"matched_kernels\": 2, \"lookups\": " + std::to_string(b.kernel_overrides->lookups) +
                ", \"ignored_rows\": 4, \"unmatched_lines\": [8]}, "),
            std::string::npos)
      << format_json(rep);
}

TEST_F(KernelOverridesRun, PyTorchExportBadShapeNamesTheKeyTheFileTheRowAndTheColumn) {
  const std::string csv = write("prof.csv",
                                "name,input_shapes,calls,device_time_total_us\n"
                                "aten::linear,\"[[2048, 1024], [3072, 1024]]\",1,9\n"
                                "aten::mm,\"[[2048, 1024], [512, 3072]]\",1,9\n");
  try {
    (void)parse_scenario(kScenario, write("s.yaml", kScenario), {Override{"node_model.overrides", csv}});
    FAIL() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_NE(std::string(e.what()).find("node_model.overrides: " + csv +
                                         ": row 2 (line 3), column 'input_shapes': aten::mm expects [[M, K], "
                                         "[K, N]] with dimensions from 1 to 9e15, got '[[2048, 1024], "
                                         "[512, 3072]]'"),
              std::string::npos)
        << e.what();
  }
}
