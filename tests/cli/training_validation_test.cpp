// Training-iteration validation (cli/training_validation.hpp): reading vTrain's
// table, plan families, error statistics, cross-validation folds, and one run
// through the scenario pipeline.
#include "tessera/cli/training_validation.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "tessera/cli/args.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/error.hpp"
#include "tessera/node_model/json.hpp"
#include "tessera/study/pipeline.hpp"

using namespace tessera;
using namespace tessera::cli;

namespace {

constexpr const char* kHeader =
    "# GPUs,global batch,micro batch,hidden size,attention heads,# layers,sequence length,tensor parallelism,"
    "data parallelism,pipeline parallelism,iteration time (ms)\n";

/// `name` under the temporary folder, prefixed by the running test's name:
/// ctest runs the tests as processes at once, and three wrote one base
/// scenario file over each other's reads.
std::string write_temp(const std::string& name, const std::string& text) {
  const auto path =
      std::filesystem::temp_directory_path() /
      (std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" + name);
  std::ofstream(path) << text;
  return path.string();
}

std::string error_of(const std::string& text) {
  try {
    read_vtrain_runs(write_temp("tessera_vtrain_test.csv", text));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

MeasuredRun run(int tp, int dp, int pp) {
  MeasuredRun r;
  r.gpus = tp * dp * pp;
  r.tp = tp;
  r.dp = dp;
  r.pp = pp;
  r.global_batch = 8 * dp;
  r.micro_batch = 1;
  r.hidden = 1024;
  r.heads = 16;
  r.layers = 4;
  r.seq_len = 256;
  r.measured_ms = 10;
  return r;
}

}  // namespace

TEST(TrainingValidation, ReadsRunsAndRejectsBadRows) {
  const auto runs = read_vtrain_runs(write_temp(
      "tessera_vtrain_ok.csv", std::string(kHeader) + "8,32,4,1024,16,24,1024,2,2,2,219.732754\n"));
  ASSERT_EQ(runs.size(), 1U);
  EXPECT_EQ(runs[0].row, 1);
  EXPECT_EQ(runs[0].gpus, 8);
  EXPECT_EQ(runs[0].tp, 2);
  EXPECT_EQ(runs[0].dp, 2);
  EXPECT_EQ(runs[0].pp, 2);
  EXPECT_DOUBLE_EQ(runs[0].measured_ms, 219.732754);
  EXPECT_EQ(runs[0].family(), PlanFamily::Mixed);
  EXPECT_TRUE(std::regex_search(error_of(std::string(kHeader) + "8,32,4,1024,16,24,1024,2,2,2,abc\n"),
                                std::regex("row 1, column 'iteration time \\(ms\\)'")));
  EXPECT_TRUE(std::regex_search(error_of(std::string(kHeader) + "8,32,0,1024,16,24,1024,2,2,2,1\n"),
                                std::regex("row 1, column 'micro batch'")));
  EXPECT_TRUE(std::regex_search(error_of(std::string(kHeader) + "8,32,4,1024,16,24,1024,2,2,1,1\n"),
                                std::regex("row 1: tp x dp x pp = 2 x 2 x 1 is not the 8 GPUs")));
  EXPECT_TRUE(
      std::regex_search(error_of("# GPUs,global batch\n8,32\n"),
                        std::regex("missing columns 'micro batch', 'hidden size', 'attention heads'")));
  // Every missing column at once, a near miss named, the header needed and
  // the one given (helper 78: "missing column '# GPUs'" alone).
  const std::string snake = error_of("gpus,global_batch\n8,32\n");
  EXPECT_NE(snake.find("missing columns '# GPUs' (not 'gpus'), 'global batch' (not 'global_batch'), "
                       "'micro batch', "),
            std::string::npos)
      << snake;
  EXPECT_NE(snake.find("a runs file's header is # GPUs,global batch,micro batch,hidden size,"),
            std::string::npos)
      << snake;
  EXPECT_NE(snake.find("; this one's is gpus,global_batch"), std::string::npos) << snake;
  EXPECT_TRUE(std::regex_search(error_of(kHeader), std::regex("no runs")));
  // A row that makes no valid scenario: the scenario's rule, named by file
  // and row, with no position in the YAML generated for it.
  const std::string file = write_temp("tessera_vtrain_test.csv", "");
  EXPECT_EQ(
      error_of(std::string(kHeader) + "8,32,4,1024,16,24,1024,2,2,2,1\n2,15,8,1024,16,24,1024,1,1,2,1\n"),
      file +
          ": row 2, column 'global batch': global_batch (15) must be a multiple of dp x micro_batch "
          "(1 x 8 = 8): the nearest are 8 and 16");
  EXPECT_EQ(
      error_of(std::string(kHeader) + "2,16,8,1000,16,24,1024,1,1,2,1\n"),
      file +
          ": row 1, column 'attention heads': model 'gpt-h1000-l24': heads (16) must divide hidden (1000)");
}

TEST(TrainingValidation, PlanFamilies) {
  EXPECT_EQ(run(1, 8, 1).family(), PlanFamily::DataParallel);
  EXPECT_EQ(run(1, 1, 1).family(), PlanFamily::DataParallel);
  EXPECT_EQ(run(4, 1, 1).family(), PlanFamily::TensorParallel);
  EXPECT_EQ(run(1, 1, 4).family(), PlanFamily::PipelineParallel);
  EXPECT_EQ(run(2, 2, 1).family(), PlanFamily::Mixed);
}

TEST(TrainingValidation, ErrorStatisticsByNearestRank) {
  // |errors| 1..10 %: mean 5.5 %, median (rank 5) 5 %, p90 (rank 9) 9 %, max 10 %.
  std::vector<double> e;
  for (int i = 1; i <= 10; ++i) e.push_back((i % 2 == 0 ? 1 : -1) * i / 100.0);
  const ErrorStats s = error_stats(e);
  EXPECT_EQ(s.n, 10);
  EXPECT_NEAR(s.mean, 0.055, 1e-12);
  EXPECT_NEAR(s.median, 0.05, 1e-12);
  EXPECT_NEAR(s.p90, 0.09, 1e-12);
  EXPECT_NEAR(s.max, 0.10, 1e-12);
  EXPECT_NEAR(s.mean_signed, 0.005, 1e-12);
}

TEST(TrainingValidation, FoldsKeepProfilesTogether) {
  // Runs that differ only in dp, global batch or layers (one profile of
  // vTrain's composed table) share a fold; folds are deterministic and every
  // fold gets profiles.
  std::map<int, int> per_fold;
  for (int tp : {1, 2, 4, 8}) {
    for (int pp : {1, 2, 4}) {
      for (int mb : {1, 2, 4, 8}) {
        MeasuredRun a = run(tp, 1, pp), b = run(tp, 2, pp), c = run(tp, 1, pp);
        a.micro_batch = b.micro_batch = c.micro_batch = mb;
        b.global_batch = 64;
        c.layers = a.layers + 8;
        EXPECT_EQ(cv_fold(a, 5), cv_fold(b, 5));
        EXPECT_EQ(cv_fold(a, 5), cv_fold(c, 5));
        EXPECT_EQ(cv_fold(a, 5), cv_fold(a, 5));
        ++per_fold[cv_fold(a, 5)];
      }
    }
  }
  EXPECT_EQ(per_fold.size(), 5U);
}

TEST(TrainingValidation, CrossValidationByWidthHoldsOutOneHiddenSizePerFold) {
  // `--cv hidden`: one fold per hidden size, ascending, whatever the other
  // keys; `--cv K` stays the profile folds.
  std::vector<MeasuredRun> runs;
  for (int hidden : {2048, 1024, 4096, 1024}) {
    MeasuredRun r = run(2, 1, 1);
    r.hidden = hidden;
    runs.push_back(r);
  }
  runs[3].micro_batch = 4;
  const CvSplit w = CvSplit::parse("hidden", runs);
  EXPECT_TRUE(w.by_hidden);
  EXPECT_EQ(w.folds, 3);
  EXPECT_EQ(w.hiddens, (std::vector<int>{1024, 2048, 4096}));
  EXPECT_EQ(w.fold(runs[0]), 1);
  EXPECT_EQ(w.fold(runs[1]), 0);
  EXPECT_EQ(w.fold(runs[2]), 2);
  EXPECT_EQ(w.fold(runs[3]), 0);
  const CvSplit k = CvSplit::parse("3", runs);
  EXPECT_FALSE(k.by_hidden);
  EXPECT_EQ(k.folds, 3);
  for (const MeasuredRun& r : runs) EXPECT_EQ(k.fold(r), cv_fold(r, 3));
  // One width cannot be held out against another; bad counts are named.
  const std::vector<MeasuredRun> narrow = {runs[1], runs[3]};
  try {
    (void)CvSplit::parse("hidden", narrow);
    ADD_FAILURE() << "one hidden size accepted";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--cv hidden: the runs have 1 hidden size(s); it needs at least 2");
  }
  EXPECT_THROW((void)CvSplit::parse("1", runs), UsageError);
  EXPECT_THROW((void)CvSplit::parse("3x", runs), UsageError);
  EXPECT_THROW((void)CvSplit::parse("width", runs), UsageError);
}

TEST(TrainingValidation, ScenarioOfARunGoesThroughThePipeline) {
  // One tiny run on both A100 variants: the scenario parses, simulates, and
  // more host time per launch makes it slower.
  const MeasuredRun r = run(2, 1, 2);
  auto predict = [&](const std::string& gpu, const std::string& launch) {
    const auto p = predict_runs({r}, RunTemplate::vtrain(gpu), {{"calibration.host_launch", launch}}, 1);
    EXPECT_EQ(p.size(), 1U);
    return p[0].predicted_ms;
  };
  const double a = predict("A100-80GB", "10us"), b = predict("A100-80GB", "40us");
  EXPECT_GT(a, 0);
  EXPECT_GT(b, a);
  EXPECT_GE(predict("A100-40GB", "10us"), a);  // less memory bandwidth
  EXPECT_THROW(predict_runs({r}, RunTemplate::vtrain("A100-80GB"), {{"calibration.host_launch", "fast"}}, 1),
               InputError);
}

namespace {
/// One group's least-squares line, measured and predicted, and its error.
void expect_cost(const MarginalCost& c, int runs, double measured, double predicted, double measured_fixed,
                 double predicted_fixed) {
  EXPECT_EQ(c.runs, runs);
  EXPECT_NEAR(c.measured_ms, measured, 1e-9);
  EXPECT_NEAR(c.predicted_ms, predicted, 1e-9);
  EXPECT_NEAR(c.measured_fixed_ms, measured_fixed, 1e-9);
  EXPECT_NEAR(c.predicted_fixed_ms, predicted_fixed, 1e-9);
  EXPECT_NEAR(c.error(), predicted / measured - 1.0, 1e-12);
}
}  // namespace

TEST(TrainingValidation, PerLayerCostIsTheSlopeOverLayers) {
  // tp 8, 8 micro-batches: layers 12, 16, 20, 24, measured 30 + 5 L ms,
  // predicted 40 + 4 L: one more layer costs 5 ms measured, 4 ms predicted
  // (-20%), the fixed parts 30 and 40 ms. The same runs differ in no global
  // batch, so they have no micro-batch slope; a run with another micro-batch
  // is a group of its own, alone, with no slope either.
  std::vector<PredictedRun> p;
  for (int layers : {12, 16, 20, 24}) {
    MeasuredRun r = run(8, 1, 1);
    r.layers = layers;
    r.measured_ms = 30 + 5.0 * layers;
    p.push_back({r, "A100-80GB", 40 + 4.0 * layers});
  }
  MeasuredRun other = run(8, 1, 1);
  other.micro_batch = 2;
  p.push_back({other, "A100-80GB", 11.0});
  EXPECT_TRUE(marginal_costs(p).empty());
  const auto c = marginal_costs(p, Marginal::Layer);
  ASSERT_EQ(c.size(), 1U);
  expect_cost(c[0], 4, 5.0, 4.0, 30.0, 40.0);
  const std::string report = format_training_report(p);
  EXPECT_NE(report.find("per-layer A100-80GB: mean 20.0% p90 20.0% max 20.0% signed -20.0% over 1 groups"),
            std::string::npos)
      << report;
  // The tensor-parallel degree is a group of its own in every table.
  EXPECT_NE(report.find("A100-80GB   tp 8                 1   20.0%"), std::string::npos) << report;
  EXPECT_EQ(report.find("marginal A100-80GB"), std::string::npos) << report;
}

namespace {

/// tp 8, layers 12-24, measured 30 + 5 L ms: at micro-batch 1 predicted 40
/// + 4 L, at micro-batch 4 40 + 4.5 L.
std::vector<PredictedRun> layer_sweeps_at_two_micro_batches() {
  std::vector<PredictedRun> p;
  for (const auto& [mb, slope] : {std::pair{1, 4.0}, std::pair{4, 4.5}}) {
    for (int layers : {12, 16, 20, 24}) {
      MeasuredRun r = run(8, 1, 1);
      r.micro_batch = mb;
      r.global_batch = 8 * mb;
      r.layers = layers;
      r.measured_ms = 30 + 5.0 * layers;
      p.push_back({r, "A100-80GB", 40 + slope * layers});
    }
  }
  return p;
}

}  // namespace

TEST(TrainingValidation, PerLayerTableSplitsLargeMicroBatchesByTp) {
  // tp 8: one group of layer sweeps at micro-batch 1 (a layer 5 ms measured,
  // 4 ms predicted: -20%), one at micro-batch 4 (5 ms against 4.5: -10%).
  // The Per layer table has both under "tp 8" (mean 15%) and the second
  // alone under "tp 8 mb>=4", right after it; the other tables have no such
  // row.
  std::vector<PredictedRun> p = layer_sweeps_at_two_micro_batches();
  const std::string report = format_training_report(p);
  const std::size_t per_layer = report.find("\nPer layer:");
  ASSERT_NE(per_layer, std::string::npos) << report;
  const std::size_t all_tp = report.find("A100-80GB   tp 8                 2   15.0%", per_layer);
  const std::size_t large = report.find("A100-80GB   tp 8 mb>=4           1   10.0%", per_layer);
  ASSERT_NE(all_tp, std::string::npos) << report;
  ASSERT_NE(large, std::string::npos) << report;
  EXPECT_LT(all_tp, large);
  EXPECT_EQ(report.find('\n', all_tp), large - 1) << report;  // the next row
  EXPECT_NE(report.find("-10.0%\n", large), std::string::npos);
  EXPECT_NE(report.find("`tp N mb>=4`: the groups of\nmicro-batches of 4 and more by tp", per_layer),
            std::string::npos);
  // No such row before the Per layer table, whose header names them first.
  const std::size_t header = report.find("`tp N mb>=4`", per_layer);
  EXPECT_EQ(report.find("mb>="), header + 6) << report;
  EXPECT_EQ(report.find("mb>=", header + 12), large + std::string("A100-80GB   tp 8 ").size()) << report;
}

TEST(TrainingValidation, JsonReportHasTheTextsGroupsAndEveryRun) {
  // The runs of PerLayerTableSplitsLargeMicroBatchesByTp: per layer -20% at
  // micro-batch 1, -10% at micro-batch 4; the "tp 8 mb>=4" group only in
  // per_layer; every run with its error, predicted / measured - 1.
  std::vector<PredictedRun> p = layer_sweeps_at_two_micro_batches();
  p.back().run.keys = {{"parallelism.recompute", "full"}};
  const node_model::JsonValue j = node_model::parse_json("{" + training_report_json(p) + "}", "report");
  const auto& gpus = j.find("gpus")->array();
  ASSERT_EQ(gpus.size(), 1U);
  EXPECT_EQ(gpus[0].find("gpu")->string(), "A100-80GB");
  const auto& layer = *gpus[0].find("per_layer");
  EXPECT_DOUBLE_EQ(layer.find("tp 8")->find("mean")->number(), 0.15);
  EXPECT_DOUBLE_EQ(layer.find("tp 8 mb>=4")->find("signed")->number(), -0.10);
  EXPECT_EQ(layer.find("tp 8 mb>=4")->find("n")->number(), 1);
  EXPECT_EQ(gpus[0].find("runs")->find("tp 8 mb>=4"), nullptr);
  EXPECT_EQ(gpus[0].find("runs")->find("all")->find("n")->number(), 8);
  EXPECT_EQ(gpus[0].find("runs")->find("tp-only")->find("n")->number(), 8);
  // No run differs from another in global batch alone: no micro-batch groups.
  EXPECT_TRUE(gpus[0].find("per_micro_batch")->object().empty());
  const auto& rows = j.find("rows")->array();
  ASSERT_EQ(rows.size(), 8U);
  // Micro-batch 1, 12 layers: measured 90 ms, predicted 88 ms.
  EXPECT_EQ(rows[0].find("measured_ms")->number(), 90);
  EXPECT_EQ(rows[0].find("predicted_ms")->number(), 88);
  EXPECT_NEAR(rows[0].find("error")->number(), 88.0 / 90 - 1, 1e-6);
  EXPECT_EQ(rows[0].find("plans")->string(), "tp-only");
  EXPECT_EQ(rows[0].find("keys"), nullptr);
  EXPECT_EQ(rows[7].find("keys")->find("parallelism.recompute")->string(), "full");
  // Layer sweeps only: no micro-batch groups, no fixed part.
  EXPECT_TRUE(gpus[0].find("fixed_part")->is_null());
}

// The forward + backward is the fwd_bwd_ms column where the file has one
// (helper 112: iteration minus optimizer was used, so an iteration_ms that
// held more, data loading, moved the fwd+bwd error): the same step with its
// iteration doubled keeps its fwd+bwd error.
TEST(StepsValidation, FwdBwdIsItsOwnColumn) {
  const std::string header =
      "layers,hidden,heads,seq,micro_batch,vocab,dtype,flash_attention,fwd_bwd_ms,optimizer_ms,iteration_"
      "ms\n";
  auto fwd_bwd_error = [&](const std::string& row) {
    const std::string data = write_temp("tessera_fwd_bwd.csv", header + row);
    std::ostringstream json;
    EXPECT_EQ(cmd_validate_steps({"--data", data, "--json"}, json), 0);
    const node_model::JsonValue j = node_model::parse_json(json.str(), "validate steps --json");
    return j.find("steps")->array()[0].find("fwd_bwd_error")->number();
  };
  const double as_measured = fwd_bwd_error("8,1024,16,1024,4,50304,bf16,false,21.5391,2.6053,24.1413\n");
  EXPECT_DOUBLE_EQ(fwd_bwd_error("8,1024,16,1024,4,50304,bf16,false,21.5391,2.6053,48.2826\n"), as_measured);
  // Without the column: iteration minus optimizer.
  const std::string no_column =
      write_temp("tessera_fwd_bwd.csv",
                 "layers,hidden,heads,seq,micro_batch,vocab,dtype,flash_attention,optimizer_ms,iteration_ms\n"
                 "8,1024,16,1024,4,50304,bf16,false,2.6053,24.1413\n");
  std::ostringstream json;
  ASSERT_EQ(cmd_validate_steps({"--data", no_column, "--json"}, json), 0);
  const double derived =
      node_model::parse_json(json.str(), "j").find("steps")->array()[0].find("fwd_bwd_error")->number();
  EXPECT_NE(derived, as_measured);  // 21.5360 ms, not 21.5391
  EXPECT_NEAR(derived, (1 + as_measured) * 21.5391 / (24.1413 - 2.6053) - 1, 2e-6);  // (JSON to 6 places)
}

// Steps apart only in dtype or vocabulary are labelled apart (helper 112:
// two identical labels); a file of one dtype keeps the short label.
TEST(StepsValidation, LabelsNameTheDtypeOrVocabularyWhereTheyDiffer) {
  const std::string header = "layers,hidden,heads,seq,micro_batch,vocab,dtype,flash_attention,iteration_ms\n";
  auto text_of = [&](const std::string& rows) {
    std::ostringstream out;
    EXPECT_EQ(cmd_validate_steps({"--data", write_temp("tessera_labels.csv", header + rows)}, out), 0);
    return out.str();
  };
  const std::string dtypes =
      text_of("8,1024,16,1024,4,50304,bf16,false,24.1\n8,1024,16,1024,4,50304,fp16,false,24.5\n");
  EXPECT_NE(dtypes.find("\n8 x 1024, 1024, 4, bf16 "), std::string::npos) << dtypes;
  EXPECT_NE(dtypes.find("\n8 x 1024, 1024, 4, fp16 "), std::string::npos) << dtypes;
  const std::string vocabs =
      text_of("8,1024,16,1024,4,50304,bf16,false,24.1\n8,1024,16,1024,4,32000,bf16,false,23.5\n");
  EXPECT_NE(vocabs.find("\n8 x 1024, 1024, 4, vocab 32000 "), std::string::npos) << vocabs;
  const std::string same =
      text_of("8,1024,16,1024,4,50304,bf16,false,24.1\n8,2048,16,1024,4,50304,bf16,false,60\n");
  EXPECT_EQ(same.find("bf16 "), std::string::npos) << same;
}

TEST(StepsValidation, JsonHasTheTablesFigures) {
  // Our H200 Megatron steps with their phases (fwd_ms, optimizer_ms): each
  // step's JSON numbers are the text row's, the summary's too.
  const std::string data = std::string(TESSERA_TEST_DATA_DIR) + "/h200/megatron_steps_phases.csv";
  std::ostringstream text, json;
  ASSERT_EQ(cmd_validate_steps({"--data", data}, text), 0);
  ASSERT_EQ(cmd_validate_steps({"--data", data, "--json"}, json), 0);
  const node_model::JsonValue j = node_model::parse_json(json.str(), "validate steps --json");
  EXPECT_EQ(j.find("gpu")->string(), "H200");
  ASSERT_EQ(j.find("frameworks")->array().size(), 1U);
  EXPECT_EQ(j.find("frameworks")->array()[0].string(), "megatron");
  const auto& steps = j.find("steps")->array();
  ASSERT_EQ(steps.size(), 6U);
  auto pct = [](const node_model::JsonValue& v) { return fmt::format("{:+.1f}%", 100 * v.number()); };
  for (const auto& st : steps) {
    const std::string row = fmt::format("{:>12.2f} {:>12.2f} {:>+7.1f}% {:>16} {:>16} {:>14}\n",
                                        st.find("measured_ms")->number(), st.find("predicted_ms")->number(),
                                        100 * st.find("error")->number(), pct(*st.find("fwd_bwd_error")),
                                        pct(*st.find("optimizer_error")), pct(*st.find("forward_error")));
    EXPECT_NE(text.str().find(row), std::string::npos) << row << text.str();
    EXPECT_EQ(st.find("keys")->find("training.framework")->string(), "megatron");
  }
  EXPECT_EQ(steps[1].find("tp")->number(), 8);
  EXPECT_EQ(steps[1].find("row")->number(), 2);
  EXPECT_NE(
      text.str().find(fmt::format("mean error {:.1f}%, max {:.1f}%, signed {:+.1f}% over 6 configurations",
                                  100 * j.find("mean_error")->number(), 100 * j.find("max_error")->number(),
                                  100 * j.find("mean_signed_error")->number())),
      std::string::npos)
      << text.str();
}

TEST(StepsValidation, JsonErrorsAreNullWithoutTheirTimes) {
  // steps.csv has no fwd_ms column: forward_error is null; its optimizer_ms
  // column gives the other two.
  std::ostringstream json;
  ASSERT_EQ(
      cmd_validate_steps({"--data", std::string(TESSERA_TEST_DATA_DIR) + "/h200/steps.csv", "--json"}, json),
      0);
  const node_model::JsonValue j = node_model::parse_json(json.str(), "validate steps --json");
  const auto& first = j.find("steps")->array().at(0);
  EXPECT_TRUE(first.find("forward_error")->is_null());
  EXPECT_TRUE(first.find("optimizer_error")->is_number());
  EXPECT_TRUE(first.find("fwd_bwd_error")->is_number());
  EXPECT_FALSE(first.find("flash_attention")->boolean());
}

TEST(TrainingValidation, MarginalCostIsTheSlopeOverMicroBatches) {
  // dp 2, micro-batch 2: global batches 8, 16, 32 are 2, 4, 8 micro-batches
  // per pipeline. Measured 20 + 5 n ms, predicted 24 + 4 n: the marginal cost
  // is 5 ms measured, 4 ms predicted (-20%), the fixed parts 20 and 24 ms. A
  // run alone in its group (another tp) has no slope and no entry.
  std::vector<PredictedRun> p;
  for (int gb : {8, 16, 32}) {
    MeasuredRun r = run(1, 2, 1);
    r.micro_batch = 2;
    r.global_batch = gb;
    const double n = gb / 4.0;
    r.measured_ms = 20 + 5 * n;
    p.push_back({r, "A100-80GB", 24 + 4 * n});
  }
  p.push_back({run(2, 1, 1), "A100-80GB", 11.0});
  const auto c = marginal_costs(p);
  ASSERT_EQ(c.size(), 1U);
  expect_cost(c[0], 3, 5.0, 4.0, 20.0, 24.0);
  const std::string report = format_training_report(p);
  EXPECT_NE(report.find("marginal A100-80GB: mean 20.0% p90 20.0% max 20.0% signed -20.0% over 1 groups"),
            std::string::npos)
      << report;
  // --json: the same group, and the fixed parts the text gives.
  const node_model::JsonValue j = node_model::parse_json("{" + training_report_json(p) + "}", "report");
  const node_model::JsonValue& gpu = j.find("gpus")->array().at(0);
  EXPECT_DOUBLE_EQ(gpu.find("per_micro_batch")->find("all")->find("signed")->number(), -0.2);
  EXPECT_DOUBLE_EQ(gpu.find("fixed_part")->find("measured_ms")->number(), 20.0);
  EXPECT_DOUBLE_EQ(gpu.find("fixed_part")->find("predicted_ms")->number(), 24.0);
}

TEST(TrainingValidation, IterationMicroBatchAndLayerCostsWithoutPipeliningAreTheInterceptsAndSlopes) {
  // tp 2, dp 1, no pipelining: layers 4, 8, 12 x global batches 4, 8 (4 and
  // 8 micro-batches). Measured 1 + 0.5 L + n (3 + 2 L) ms, predicted 2 +
  // 0.25 L + n (6 + 2.5 L): an iteration costs 1 ms measured and 2 ms
  // predicted outside its layers and micro-batches, a layer once per
  // iteration 0.5 and 0.25 ms; a micro-batch 3 + 2 L measured, 6 + 2.5 L
  // predicted, so outside its layers 3 ms measured and 6 ms predicted, and a
  // layer of it 2 ms measured and 2.5 ms predicted. Pipelined runs have no
  // line.
  std::vector<PredictedRun> p;
  for (int layers : {4, 8, 12}) {
    for (int gb : {4, 8}) {
      MeasuredRun r = run(2, 1, 1);
      r.layers = layers;
      r.global_batch = gb;
      r.measured_ms = 1 + 0.5 * layers + gb * (3 + 2.0 * layers);
      p.push_back({r, "A100-80GB", 2 + 0.25 * layers + gb * (6 + 2.5 * layers)});
      MeasuredRun piped = run(1, 1, 2);
      piped.layers = layers;
      piped.global_batch = gb;
      p.push_back({piped, "A100-80GB", 10.0 + gb});
    }
  }
  const std::string report = format_training_report(p);
  for (const char* line :
       {"an iteration outside its layers and micro-batches (no pipelining; intercept over layers of the "
        "intercept "
        "over micro-batches), median over configurations, measured / predicted: tp 2 1.0 / 2.0 ms (1)\n",
        "a layer once per iteration (no pipelining; slope over layers of the intercept over micro-batches: "
        "its "
        "optimizer step and gradient all-reduce), median over configurations, measured / predicted: tp 2 "
        "0.50 / "
        "0.25 ms (1)\n",
        "a micro-batch outside its layers (no pipelining; intercept over layers of its cost), median over "
        "configurations, measured / predicted: tp 2 3.0 / 6.0 ms (1)\n",
        "a layer of a micro-batch (no pipelining; slope over layers of its cost), median over "
        "configurations, "
        "measured / predicted: tp 2 2.00 / 2.50 ms (1)\n"}) {
    EXPECT_NE(report.find(line), std::string::npos) << line << "\n" << report;
  }
  EXPECT_EQ(report.find("/ predicted: tp 1"), std::string::npos) << report;
}

namespace {
// A user's cluster for their own runs (validate training --scenario): 8-GPU
// A100 nodes, bf16 Megatron-LM with selective recomputation.
constexpr const char* kBase = R"(name: mine
cluster:
  nodes: 2
  gpus_per_node: 8
  gpu: A100-80GB
  nvlink_bandwidth: 300GB/s
  nvlink_latency: 1us
  nic_bandwidth: 200Gbps
  nic_latency: 1us
  fabric:
    type: leaf-spine
    hosts_per_leaf: 8
    spines: 8
    spine_bandwidth: 200Gbps
    spine_latency: 600ns
model:
  preset: gpt3-xl
training:
  micro_batch: 1
  seq_len: 2048
  dtype: bf16
parallelism:
  recompute: selective
)";

MeasuredRun big_run() {
  MeasuredRun m = run(8, 2, 2);  // 32 GPUs
  m.row = 7;
  m.hidden = 4096;
  m.heads = 32;
  m.layers = 8;
  m.micro_batch = 2;
  m.global_batch = 8;
  m.seq_len = 1024;
  m.measured_ms = 100;
  return m;
}
}  // namespace

// A run on the user's scenario keeps its cluster, precision and
// recomputation and sets its own GPU count (in whole nodes), model size,
// batch and plan: the same forecast as the scenario written out by hand.
TEST(TrainingValidation, RunOnAScenarioFileIsThatScenarioWithTheRunsKeys) {
  const std::string path = write_temp("tessera_runs_base.yaml", kBase);
  const RunTemplate t = RunTemplate::from_file(path);
  EXPECT_EQ(t.label(), "A100-80GB");
  EXPECT_FALSE(t.is_vtrain());
  const MeasuredRun m = big_run();
  const Scenario s = t.scenario(m, {});
  EXPECT_EQ(s.cluster.nodes, 4);
  EXPECT_EQ(s.cluster.gpus_per_node, 8);
  EXPECT_EQ(s.plan.tp, 8);
  EXPECT_EQ(s.plan.dp, 2);
  EXPECT_EQ(s.plan.pp, 2);
  EXPECT_EQ(s.plan.global_batch, 8);
  EXPECT_EQ(s.plan.recompute, parallelism::Recompute::Selective);
  EXPECT_EQ(s.model.hidden, 4096);
  EXPECT_EQ(s.model.ffn_hidden, 4 * 4096);  // the preset's MLP ratio, not its width
  EXPECT_EQ(s.model.heads, 32);
  EXPECT_EQ(s.model.layers, 8);
  EXPECT_EQ(s.workload.micro_batch, 2);
  EXPECT_EQ(s.workload.seq_len, 1024);
  EXPECT_EQ(s.workload.dtype, node_model::DType::BF16);

  std::string by_hand = kBase;
  auto replace = [&](const std::string& from, const std::string& to) {
    by_hand.replace(by_hand.find(from), from.size(), to);
  };
  replace("nodes: 2", "nodes: 4");
  replace("preset: gpt3-xl", "preset: gpt3-xl\n  layers: 8\n  hidden: 4096\n  heads: 32");
  replace("micro_batch: 1\n  seq_len: 2048", "micro_batch: 2\n  global_batch: 8\n  seq_len: 1024");
  replace("parallelism:\n", "parallelism:\n  tp: 8\n  dp: 2\n  pp: 2\n");
  const double expected =
      study::simulate_scenario(parse_scenario(by_hand, "by_hand.yaml", {})).result.makespan.ms();
  const auto p = predict_runs({m}, t, {}, 1);
  ASSERT_EQ(p.size(), 1U);
  EXPECT_EQ(p[0].gpu, "A100-80GB");
  EXPECT_DOUBLE_EQ(p[0].predicted_ms, expected);
  // The command's --set applies to every run; a key the run sets stays the run's.
  const auto slower = predict_runs({m}, t, {{"calibration.host_launch", "80us"}}, 1);
  EXPECT_GT(slower[0].predicted_ms, expected);
  EXPECT_EQ(t.scenario(m, {{"parallelism.tp", "4"}, {"parallelism.dp", "4"}}).plan.tp, 8);
  // So on vTrain's built-in node (it took the --set: every run at that depth).
  MeasuredRun small = big_run();
  small.gpus = 8;
  small.tp = 8;
  small.dp = 1;
  small.pp = 1;
  small.global_batch = 4;
  const Scenario on_vtrain = RunTemplate::vtrain("A100-80GB").scenario(small, {{"model.layers", "3"}});
  EXPECT_EQ(on_vtrain.model.layers, small.layers);
  EXPECT_EQ(on_vtrain.plan.tp, 8);
  // The command refuses such a --set, naming the column.
  EXPECT_THROW(refuse_run_keys({{"training.seq_len", "4096"}}, false), UsageError);
  EXPECT_THROW(refuse_run_keys({{"cluster.gpus_per_node", "4"}}, true), UsageError);
  EXPECT_THROW(refuse_run_keys({{"cluster.gpu", "H100-SXM"}}, true), UsageError);  // --gpu names vTrain's
  EXPECT_NO_THROW(refuse_run_keys({{"cluster.gpu", "H100-SXM"}}, false));     // a scenario's label follows it
  EXPECT_NO_THROW(refuse_run_keys({{"cluster.gpus_per_node", "4"}}, false));  // the scenario's nodes
  EXPECT_NO_THROW(refuse_run_keys({{"calibration.host_launch", "30us"}}, true));

  // Fewer GPUs than a node: one node of that many.
  MeasuredRun part = big_run();
  part.gpus = 4;
  part.tp = 4;
  part.dp = 1;
  part.pp = 1;
  const Scenario sp = t.scenario(part, {});
  EXPECT_EQ(sp.cluster.nodes, 1);
  EXPECT_EQ(sp.cluster.gpus_per_node, 4);
  // ... also where the scenario's nodes share HCAs that would not divide it.
  std::string shared = kBase;
  shared.replace(shared.find("gpus_per_node: 8"), 16, "gpus_per_node: 8\n  hcas_per_node: 4");
  part.gpus = 2;
  part.tp = 2;
  const Scenario s2 = RunTemplate::from_file(write_temp("tessera_runs_hcas.yaml", shared)).scenario(part, {});
  EXPECT_EQ(s2.cluster.gpus_per_node, 2);
  // ... and where the command's --set gives that node size's HCAs.
  const std::vector<Override> hcas = {{"cluster.hcas_per_node", "4"}};
  EXPECT_EQ(RunTemplate::from_file(path, hcas).scenario(part, hcas).cluster.gpus_per_node, 2);
  // A node size given with --set is the one runs are counted in.
  const Scenario s4 = RunTemplate::from_file(path, {{"cluster.gpus_per_node", "4"}}).scenario(m, {});
  EXPECT_EQ(s4.cluster.nodes, 8);
  EXPECT_EQ(s4.cluster.gpus_per_node, 4);
}

TEST(TrainingValidation, RunsAScenarioFileCannotHoldAreNamed) {
  const std::string path = write_temp("tessera_runs_base.yaml", kBase);
  const RunTemplate t = RunTemplate::from_file(path);
  MeasuredRun m = big_run();
  m.gpus = 12;
  m.dp = 1;
  m.pp = 1;
  m.tp = 12;
  try {
    (void)t.scenario(m, {});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "12 GPUs are not whole nodes of 8 (cluster.gpus_per_node in " + path + ")");
  }
  // A rule a run's key breaks names the key as set by the run.
  m = big_run();
  m.global_batch = 7;
  try {
    (void)t.scenario(m, {});
    FAIL();
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.option(), "data row 7");
    EXPECT_EQ(
        std::string(e.what()).rfind(path + " (data row 7): training.global_batch: global_batch (7) must", 0),
        0U)
        << e.what();
  }
  // Read from a file: by file and row.
  const std::string csv =
      write_temp("tessera_runs.csv",
                 std::string(kHeader) + "8,8,1,1024,16,4,256,8,1,1,50\n12,12,1,1024,16,4,256,12,1,1,50\n");
  try {
    (void)read_vtrain_runs(csv, t);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              csv + ": row 2: 12 GPUs are not whole nodes of 8 (cluster.gpus_per_node in " + path + ")");
  }
  // vTrain's template is one 8-GPU node: a larger run asks for a scenario.
  m = big_run();
  try {
    (void)RunTemplate::vtrain("A100-80GB").scenario(m, {});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("32 GPUs: the built-in scenario is vTrain's one 8-GPU node; give "
                                          "--scenario with your cluster",
                                          0),
              0U)
        << e.what();
  }
}

// Columns named by a scenario key path set that key on their run's scenario
// (an empty cell leaves it to the scenario); a bad value is named by file,
// row and key; runs that differ in such a key are different configurations.
TEST(TrainingValidation, KeyPathColumnsSetTheirKeyPerRun) {
  const std::string base = write_temp("tessera_runs_base.yaml", kBase);
  const RunTemplate t = RunTemplate::from_file(base);
  const std::string header = std::string(kHeader).substr(0, std::strlen(kHeader) - 1) +
                             ",parallelism.recompute, parallelism.sequence_parallel\n";
  const std::string csv = write_temp("tessera_runs_keys.csv", header +
                                                                  "8,8,1,1024,16,4,256,8,1,1,50,full,true\n"
                                                                  "8,16,1,1024,16,4,256,8,1,1,90, ,\n");
  const auto runs = read_vtrain_runs(csv, t);
  ASSERT_EQ(runs.size(), 2U);
  using Keys = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(runs[0].keys,
            (Keys{{"parallelism.recompute", "full"}, {"parallelism.sequence_parallel", "true"}}));
  EXPECT_EQ(runs[0].keys_text(), "parallelism.recompute=full;parallelism.sequence_parallel=true");
  EXPECT_TRUE(runs[1].keys.empty());
  const Scenario s0 = t.scenario(runs[0], {});
  EXPECT_EQ(s0.plan.recompute, parallelism::Recompute::Full);
  EXPECT_TRUE(s0.plan.sequence_parallel);
  const Scenario s1 = t.scenario(runs[1], {});
  EXPECT_EQ(s1.plan.recompute, parallelism::Recompute::Selective);  // the scenario's
  EXPECT_FALSE(s1.plan.sequence_parallel);
  // vTrain's template takes them too.
  EXPECT_EQ(RunTemplate::vtrain("A100-80GB").scenario(runs[0], {}).plan.recompute,
            parallelism::Recompute::Full);

  const std::string bad =
      write_temp("tessera_runs_keys_bad.csv", header + "8,8,1,1024,16,4,256,8,1,1,50,most,\n");
  try {
    (void)read_vtrain_runs(bad, t);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(bad + ": row 1: parallelism.recompute: ", 0), 0U) << e.what();
  }

  // A column whose name is no key path is named as the column's path.
  const std::string bad_path = write_temp("tessera_runs_keys_path.csv",
                                          std::string(kHeader).substr(0, std::strlen(kHeader) - 1) +
                                              ",parallelism..recompute\n8,8,1,1024,16,4,256,8,1,1,50,full\n");
  try {
    (void)read_vtrain_runs(bad_path, t);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              bad_path + ": row 1: key path 'parallelism..recompute': empty key in the path");
  }

  // A column that is neither a runs-file column nor a key path is an error,
  // not a column nobody reads (helper 98: `recompute` left every run at the
  // scenario's recomputation, silently).
  const std::string unread =
      write_temp("tessera_runs_keys_unread.csv", std::string(kHeader).substr(0, std::strlen(kHeader) - 1) +
                                                     ",recompute\n8,8,1,1024,16,4,256,8,1,1,50,full\n");
  try {
    (void)read_vtrain_runs(unread, t);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(
        std::string(e.what()).rfind(unread + ": column 'recompute' is neither a runs-file column (# GPUs,"
                                             "global batch,",
                                    0),
        0U)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("such as parallelism.recompute"), std::string::npos) << e.what();
  }

  // A key path named twice, or one a runs column already sets (the rows
  // were labelled with the runs column and run with the other).
  const std::string plain = std::string(kHeader).substr(0, std::strlen(kHeader) - 1);
  const std::pair<std::string, std::string> contradictions[] = {
      {",parallelism.recompute,parallelism.recompute\n8,8,1,1024,16,4,256,8,1,1,50,full,none\n",
       ": column 'parallelism.recompute' appears twice in the header (columns 12 and 13)"},
      {",model.hidden\n8,8,1,1024,16,4,256,8,1,1,50,2048\n",
       ": column 'model.hidden' sets what column 'hidden size' gives: remove one of them"},
      {",cluster.nodes\n8,8,1,1024,16,4,256,8,1,1,50,2\n",
       ": column 'cluster.nodes' sets what column '# GPUs' gives: remove one of them"}};
  for (const auto& [columns, message] : contradictions) {
    const std::string file = write_temp("tessera_runs_keys_twice.csv", plain + columns);
    try {
      (void)read_vtrain_runs(file, t);
      ADD_FAILURE() << columns;
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), file + message);
    }
  }

  // Two global batches each with and without full recomputation: two
  // groups of the marginal cost, not one.
  std::vector<PredictedRun> p;
  for (const char* recompute : {"full", "selective"}) {
    for (int gb : {8, 16}) {
      PredictedRun r;
      r.gpu = "A100-80GB";
      r.run = runs[1];
      r.run.global_batch = gb;
      r.run.keys = {{"parallelism.recompute", recompute}};
      r.run.measured_ms = gb * 10.0;
      r.predicted_ms = gb * 10.0;
      p.push_back(r);
    }
  }
  EXPECT_EQ(marginal_costs(p).size(), 2U);
}

// --fit-only: the constants not listed keep the scenario's values; with
// only host_iteration free, the fit is the closed-form shift alone.
TEST(TrainingValidation, FitOnlyMovesTheListedConstants) {
  const RunTemplate t = RunTemplate::vtrain("A100-80GB");
  std::vector<MeasuredRun> runs = {run(2, 1, 2), run(1, 2, 1), run(2, 2, 1)};
  const auto shipped = predict_runs(runs, t, {}, 1);
  // 5.0123 ms more per run: not a whole number of microseconds, so that the
  // printed section below is checked to render the fit exactly.
  for (std::size_t i = 0; i < runs.size(); ++i) runs[i].measured_ms = shipped[i].predicted_ms + 5.0123;
  const Calibration c = t.scenario(runs[0], {}).calibration;
  HostFitKeys only_iteration{false, false, false, true};
  const HostFit f = fit_host_overhead(runs, t, {}, 1, only_iteration);
  EXPECT_EQ(f.host_launch, c.host_launch);
  EXPECT_EQ(f.host_p2p, c.host_p2p);
  EXPECT_EQ(f.host_microbatch, c.host_microbatch);
  EXPECT_NEAR(f.host_iteration.ms(), c.host_iteration.ms() + 5.0123, 1e-6);
  EXPECT_NEAR(f.mean_error, 0.0, 1e-9);
  EXPECT_EQ(f.simulations, 1);
  // A kept host_iteration is not moved either: the error is what it leaves.
  const HostFit g = fit_host_overhead(runs, t, {}, 1, HostFitKeys{false, false, false, false});
  EXPECT_EQ(g.host_iteration, c.host_iteration);
  EXPECT_GT(g.mean_error, 0.0);

  // The printed section, pasted into a scenario, gives back the fit exactly.
  const Calibration pasted =
      parse_scenario(vtrain_scenario_yaml(runs[0], "A100-80GB")
                             .substr(0, vtrain_scenario_yaml(runs[0], "A100-80GB").find("calibration: {}")) +
                         calibration_yaml(f),
                     "pasted.yaml", {})
          .calibration;
  EXPECT_EQ(pasted.host_launch, f.host_launch);
  EXPECT_EQ(pasted.host_p2p, f.host_p2p);
  EXPECT_EQ(pasted.host_microbatch, f.host_microbatch);
  EXPECT_EQ(pasted.host_iteration, f.host_iteration);
  EXPECT_NE(f.host_iteration.ps() % 1'000'000, 0);  // not a round number: the rendering is exact
  // The shift is fit to 0.1 us, not to the picosecond (helper 110:
  // 97.860131us in the section, a precision no measurement has).
  std::vector<MeasuredRun> finer = runs;
  for (std::size_t i = 0; i < runs.size(); ++i) finer[i].measured_ms = shipped[i].predicted_ms + 2.34567891;
  const HostFit rounded = fit_host_overhead(finer, t, {}, 1, only_iteration);
  EXPECT_EQ(rounded.host_iteration.ps() % 100'000, 0) << to_string(rounded.host_iteration);
  EXPECT_NEAR(rounded.host_iteration.ms(), c.host_iteration.ms() + 2.3457, 1e-9);
  // With its source: comments say what it was fit on, which keys it holds,
  // and which constants it kept; pasted, it gives the same constants.
  const std::string commented = calibration_yaml(f, "runs.csv (3 runs, A100-80GB)");
  EXPECT_EQ(commented.rfind(
                "calibration:\n  # host constants fit by tessera validate training on runs.csv (3 runs, "
                "A100-80GB); the section's other keys are not printed: keep yours\n  host_launch: ",
                0),
            0U)
      << commented;
  EXPECT_NE(commented.find("  # kept: the scenario's, not fit\n  host_p2p: "), std::string::npos)
      << commented;
  EXPECT_EQ(commented.find("host_iteration: " + to_string(f.host_iteration) + "\n"),
            commented.size() - ("host_iteration: " + to_string(f.host_iteration) + "\n").size())
      << commented;  // fit: no comment
  const Calibration pasted_commented =
      parse_scenario(vtrain_scenario_yaml(runs[0], "A100-80GB")
                             .substr(0, vtrain_scenario_yaml(runs[0], "A100-80GB").find("calibration: {}")) +
                         commented,
                     "pasted.yaml", {})
          .calibration;
  EXPECT_EQ(pasted_commented.host_iteration, f.host_iteration);
  EXPECT_EQ(pasted_commented.host_launch, f.host_launch);

  // No pipelined run: nothing measures host_p2p; it keeps the scenario's.
  const std::vector<MeasuredRun> flat = {runs[1], runs[2]};
  const HostFit h = fit_host_overhead(flat, t, {}, 1);
  EXPECT_FALSE(h.fitted.host_p2p);
  EXPECT_TRUE(h.fitted.host_launch);
  EXPECT_EQ(h.host_p2p, c.host_p2p);
  EXPECT_GT(c.host_p2p, Time::zero());  // megatron-deepspeed's fitted exchange cost, not 0

  const HostFitKeys k = HostFitKeys::parse("host_microbatch,host_iteration");
  EXPECT_FALSE(k.host_launch);
  EXPECT_FALSE(k.host_p2p);
  EXPECT_TRUE(k.host_microbatch);
  EXPECT_TRUE(k.host_iteration);
  EXPECT_THROW((void)HostFitKeys::parse("host_lunch"), UsageError);
  EXPECT_THROW((void)HostFitKeys::parse(""), UsageError);
}

// The fit's error is in sample: said so, and with as many constants as runs
// (which can absorb any model error) said to be no accuracy at all.
TEST(TrainingValidation, FitSaysWhatItsErrorIsWorth) {
  const std::string base = write_temp("tessera_runs_fit_base.yaml", kBase);
  const std::string csv = write_temp("tessera_runs_fit.csv", std::string(kHeader) +
                                                                 "8,8,1,1024,16,4,256,8,1,1,50\n"
                                                                 "8,16,1,1024,16,4,256,8,1,1,90\n");
  std::ostringstream two;
  EXPECT_EQ(cmd_validate_training(
                {"--data", csv, "--scenario", base, "--fit-only", "host_microbatch,host_iteration"}, two),
            0);
  // After the section, a blank line and the note at column 0 (helper 79:
  // indented, it was copied with the section as invalid YAML).
  EXPECT_NE(two.str().find("  host_iteration: "), std::string::npos) << two.str();
  EXPECT_NE(two.str().find("\n\nnote: 2 constants fit on 2 runs: as many constants as runs can absorb the "
                           "model's error on them, so the "),
            std::string::npos)
      << two.str();
  // More constants than runs: said so.
  std::ostringstream three;
  EXPECT_EQ(cmd_validate_training({"--data", csv, "--scenario", base, "--fit-only",
                                   "host_launch,host_microbatch,host_iteration"},
                                  three),
            0);
  EXPECT_NE(three.str().find("\nnote: 3 constants fit on 2 runs: more constants than runs can absorb"),
            std::string::npos)
      << three.str();
  EXPECT_EQ(two.str().find("--cv K predicts"), std::string::npos) << two.str();

  std::ostringstream one;
  EXPECT_EQ(cmd_validate_training({"--data", csv, "--scenario", base, "--fit-only", "host_iteration"}, one),
            0);
  EXPECT_NE(one.str().find(" fit on all 2 runs (1 sweep): mean error "), std::string::npos) << one.str();
  EXPECT_NE(
      one.str().find("\n\n(the error is on the runs fit; --cv K predicts each run with a fit that did not "
                     "see its profile)\n"),
      std::string::npos)
      << one.str();
  EXPECT_EQ(one.str().find("note:"), std::string::npos) << one.str();

  // Nothing to fit: the runs are not pipelined, and host_p2p is all that was asked.
  std::ostringstream none;
  EXPECT_EQ(cmd_validate_training({"--data", csv, "--scenario", base, "--fit-only", "host_p2p"}, none), 0);
  EXPECT_NE(none.str().find("\n\nnote: no constant fit (host_p2p needs a pipelined run): the error is the "
                            "scenario's constants' on these runs\n"),
            std::string::npos)
      << none.str();
  EXPECT_EQ(none.str().find("--cv K predicts"), std::string::npos) << none.str();
}

// --cv's verdict: the held-out errors beside the scenario's constants' on
// the same runs (a run no fold predicted is left out of both), the folds'
// spread, and whether to paste the fit (helper 98: a fit whose held-out
// error was worse than before printed a section to paste all the same).
TEST(TrainingValidation, CvVerdictComparesHeldOutWithTheScenarioConstants) {
  auto predicted = [](int row, double measured, double predicted) {
    PredictedRun p;
    p.gpu = "A100-80GB";
    p.run = run(1, 2, 1);
    p.run.row = row;
    p.run.measured_ms = measured;
    p.predicted_ms = predicted;
    return p;
  };
  // Before: errors 10%, 20% (and row 3's 50%, which no fold predicted).
  const std::vector<PredictedRun> before{predicted(1, 100, 110), predicted(2, 100, 80),
                                         predicted(3, 100, 150)};
  // Held out: 5% and 10%, better in the mean and at the worst run.
  const std::string better =
      format_cv_verdict("A100-80GB", before, {predicted(1, 100, 105), predicted(2, 100, 90)}, {0.05, 0.10});
  EXPECT_EQ(
      better,
      "A100-80GB: held-out error of the fit: mean 7.5% p90 10.0% max 10.0%; the scenario's constants on "
      "the same 2 runs: mean 15.0% p90 20.0% max 20.0%; fold means 5.0-10.0% over 2 folds\n"
      "verdict A100-80GB: the fit forecasts runs it did not see better than the scenario's constants: "
      "paste the section above\n");
  // Better in the mean, worse at the worst run: said.
  const std::string worst =
      format_cv_verdict("A100-80GB", before, {predicted(1, 100, 100), predicted(2, 100, 125)}, {0.0, 0.25});
  EXPECT_NE(worst.find("paste the section above (its worst run is worse, 25.0% against 20.0%)"),
            std::string::npos)
      << worst;
  // Worse in the mean: keep the scenario's constants.
  const std::string worse =
      format_cv_verdict("A100-80GB", before, {predicted(1, 100, 130), predicted(2, 100, 100)}, {0.0, 0.30});
  EXPECT_NE(
      worse.find("mean 15.0% p90 30.0% max 30.0%; the scenario's constants on the same 2 runs: mean 15.0%"),
      std::string::npos)
      << worse;
  EXPECT_NE(worse.find("verdict A100-80GB: the fit does not forecast runs it did not see better than the "
                       "scenario's constants: keep them"),
            std::string::npos)
      << worse;
  EXPECT_EQ(format_cv_verdict("A100-80GB", before, {}, {}), "");
}
