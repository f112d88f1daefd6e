// Leave-one-GPU-out cross-validation: the fold split (nothing of the held-out
// GPU reaches training, the tile table included) on synthetic measurements.
#include "tessera/node_model/cross_validation.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "tessera/error.hpp"
#include "tessera/node_model/dataset.hpp"
#include "tessera/node_model/device_config.hpp"
#include "tessera/node_model/tile_mlp.hpp"
#include "tessera/node_model/validation.hpp"

namespace nm = tessera::node_model;

namespace fs = std::filesystem;

namespace {

/// Three GPUs; "Mid" is nearest in spec to "Big", and only "Mid" runs
/// 256x128 GEMM tiles; vector blocks hold 512 (Small), 1024 (Mid) and 2048
/// (Big) elements.
struct SyntheticData {
  fs::path dir;
  nm::MeasurementSet train, test;

  SyntheticData() {
    // One directory per test: ctest runs the tests of this file in parallel.
    dir = fs::temp_directory_path() /
          (std::string("tessera_logo_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir / "dev");
    auto device = [&](const std::string& name, int sms, double bw, double flops, double l2) {
      std::ofstream(dir / "dev" / (name + ".json"))
          << R"({"Device":")" << name << R"(","Dev_Mem":16,"Mem_Bw":)" << bw << R"(,"Num_Sm":)" << sms
          << R"(,"Core_Per_SM":64,"Freq":1400,"SingleFLOPs":)" << flops << R"(,"L2Cache":)" << l2 << "}";
    };
    device("Small", 20, 200, 4000, 2);
    device("Mid", 80, 900, 14000, 6);
    device("Big", 100, 1500, 19000, 40);
    const nm::DeviceCatalog catalog((dir / "dev").string());
    auto write = [&](const fs::path& path, bool with_big_test) {
      std::ofstream gemm(path.string() + "_gemm.csv");
      std::ofstream vec(path.string() + "_vec.csv");
      gemm << "OPName,Latency,Device,Kernel Name,Grid x,Grid y,Grid z,B,M,N,K\n";
      vec << "OPName,Latency,Device,Grid x,Grid y,Grid z,B,H\n";
      for (const std::string gpu : {"Small", "Mid", "Big"}) {
        if (!with_big_test && gpu == "Big") continue;
        const double speed = gpu == "Small" ? 1.0 : gpu == "Mid" ? 3.0 : 4.0;
        const std::string tile = gpu == "Mid" ? "256x128" : "128x64";
        for (int i = 0; i < 24; ++i) {
          const int m = 64 << (i % 6);
          const int n = 128 << (i / 6);
          const double flops = 2.0 * m * n * 512;
          gemm << "linear," << 0.02 + flops / (speed * 1e9) << "," << gpu << ",sgemm_" << tile
               << "_tn,1,1,1,1," << m << "," << 512 << "," << n << "\n";
          const int rows = 32 << (i % 8);
          const double h = 256 << (i / 8);
          const double blocks = rows * h / (gpu == "Small" ? 512.0 : gpu == "Mid" ? 1024.0 : 2048.0);
          vec << "add," << 0.02 + rows * h * 12 / (speed * 1e8) << "," << gpu << "," << blocks << ",1,1,"
              << rows << "," << h << "\n";
        }
      }
    };
    fs::create_directories(dir / "train");
    fs::create_directories(dir / "test");
    write(dir / "train" / "k", true);
    write(dir / "test" / "k", true);
    train = nm::read_measurement_dir((dir / "train").string(), catalog);
    test = nm::read_measurement_dir((dir / "test").string(), catalog);
  }
  ~SyntheticData() { fs::remove_all(dir); }
};

}  // namespace

TEST(LeaveOneGpuOut, FoldHoldsNoRowOfTheHeldOutGpu) {
  SyntheticData d;
  ASSERT_EQ(d.train.gpus.size(), 3U);
  const nm::MeasurementSet fold = nm::without_gpu(d.train, "Mid");
  ASSERT_EQ(fold.gpus.size(), 2U);
  for (const auto& g : fold.gpus) EXPECT_NE(g.name, "Mid");
  // Every row kept, with its GPU renumbered to the same GPU, and none of Mid's.
  std::size_t mid_rows = 0;
  for (const auto& m : d.train.rows) mid_rows += d.train.gpus[m.gpu].name == "Mid" ? 1 : 0;
  EXPECT_GT(mid_rows, 0U);
  EXPECT_EQ(fold.rows.size(), d.train.rows.size() - mid_rows);
  for (const auto& m : fold.rows) {
    ASSERT_GE(m.gpu, 0);
    ASSERT_LT(m.gpu, 2);
    EXPECT_NE(fold.gpus[m.gpu].name, "Mid");
    EXPECT_NE(m.tile_a, 256);  // Mid's tile
  }
  const nm::MeasurementSet held = nm::only_gpu(d.train, "Mid");
  ASSERT_EQ(held.gpus.size(), 1U);
  EXPECT_EQ(held.gpus[0].name, "Mid");
  EXPECT_EQ(held.rows.size(), mid_rows);
  for (const auto& m : held.rows) EXPECT_EQ(m.gpu, 0);
  EXPECT_TRUE(nm::only_gpu(d.train, "Nowhere").rows.empty());
  EXPECT_EQ(nm::fold_gpus(d.train, d.test), (std::vector<std::string>{"Small", "Mid", "Big"}));
}

TEST(LeaveOneGpuOut, TileTableOfAFoldFallsBackToTheNearestTrainingGpu) {
  SyntheticData d;
  const nm::GpuSpec mid = d.train.gpus.at(1);
  ASSERT_EQ(mid.name, "Mid");
  const nm::Kernel gemm = nm::Kernel::gemm(nm::KernelOp::Linear, 1, 512, 512, 1024, nm::DType::FP32);
  const nm::Kernel add = nm::Kernel::vector(nm::KernelOp::Add, 256, 1024, nm::DType::FP32);
  // Trained with Mid: Mid's own GEMM tiles; vector blocks are pooled over
  // the GPUs (the median, Mid's 1024).
  const nm::TileTable all = nm::TileTable::learn(d.train);
  EXPECT_EQ(all.lookup(gemm, mid).a, 256);
  EXPECT_EQ(all.lookup(add, mid).elements, 1024.0);
  // Without Mid: its name is unknown to the table, it gets the GEMM tiles of
  // the training GPU nearest in spec (Big), which never ran 256x128, and the
  // vector blocks of the other GPUs alone.
  const nm::TileTable fold = nm::TileTable::learn(nm::without_gpu(d.train, "Mid"));
  const auto names = fold.gpu_names();
  EXPECT_EQ(std::count(names.begin(), names.end(), "Mid"), 0);
  ASSERT_EQ(names.size(), 2U);
  EXPECT_EQ(names.at(static_cast<std::size_t>(fold.nearest_gpu(mid))), "Big");
  const nm::Tile t = fold.lookup(gemm, mid);
  EXPECT_EQ(t.a, 128);
  EXPECT_EQ(t.b, 64);
  EXPECT_EQ(fold.lookup(add, mid).elements, 2048.0);
}

TEST(LeaveOneGpuOut, RetrainsPerFoldDeterministically) {
  SyntheticData d;
  nm::LogoOptions opt;
  opt.train.mlp.epochs = 3;
  opt.train.hidden = {8};
  const auto rows = nm::leave_one_gpu_out(d.train, d.test, opt, nullptr);
  // 3 held-out GPUs x 2 classes (linear, elementwise).
  ASSERT_EQ(rows.size(), 6U);
  for (const auto& r : rows) {
    EXPECT_EQ(r.test_rows, 24) << r.gpu << " " << r.kernel_class;
    EXPECT_EQ(r.train_rows, 24) << r.gpu << " " << r.kernel_class;
    EXPECT_TRUE(std::isfinite(r.mape));
    EXPECT_TRUE(std::isfinite(r.linreg_mape));
    EXPECT_NEAR(r.mape, (r.mape_test + r.mape_train) / 2, 1e-9);  // equal row counts
  }
  const auto again = nm::leave_one_gpu_out(d.train, d.test, opt, nullptr);
  ASSERT_EQ(again.size(), rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(again[i].mape, rows[i].mape);
    EXPECT_EQ(again[i].linreg_mape, rows[i].linreg_mape);
  }
  // One fold, and the summary's mean and worst over the GPUs.
  opt.gpu = "Big";
  const auto one = nm::leave_one_gpu_out(d.train, d.test, opt, nullptr);
  ASSERT_EQ(one.size(), 2U);
  EXPECT_EQ(one[0].gpu, "Big");
  EXPECT_EQ(one[0].mape, rows[4].mape);  // the same fold as in the full run
  const auto summary = nm::summarize_logo(rows);
  ASSERT_EQ(summary.size(), 2U);
  EXPECT_EQ(summary[0].kernel_class, "linear");
  EXPECT_EQ(summary[0].gpus, 3);
  EXPECT_NEAR(summary[0].mean, (rows[0].mape + rows[2].mape + rows[4].mape) / 3, 1e-9);
  EXPECT_EQ(summary[0].worst, std::max({rows[0].mape, rows[2].mape, rows[4].mape}));
  opt.gpu = "Nowhere";
  EXPECT_THROW(nm::leave_one_gpu_out(d.train, d.test, opt, nullptr), tessera::InputError);
}

TEST(LeaveOneGpuOut, SignedMedianIsTheMedianErrorOnTheHeldOutGpu) {
  // The fold's model rebuilt by hand: trained without Big, asked about every
  // row of Big (test and training); the row's signed median is the median of
  // (predicted - measured) / measured over them, in percent.
  SyntheticData d;
  nm::LogoOptions opt;
  opt.train.mlp.epochs = 3;
  opt.train.hidden = {8};
  opt.linreg = false;
  opt.gpu = "Big";
  const auto rows = nm::leave_one_gpu_out(d.train, d.test, opt, nullptr);
  ASSERT_EQ(rows.size(), 2U);
  const auto model =
      std::make_shared<const nm::TileMlpModel>(nm::train_tile_mlp(nm::without_gpu(d.train, "Big"), opt.train, nullptr));
  const nm::MeasurementSet held_test = nm::only_gpu(d.test, "Big"), held_train = nm::only_gpu(d.train, "Big");
  const nm::TileMlpPredictor pred(held_test.gpus.at(0), model);
  for (const auto& r : rows) {
    std::vector<double> e;
    for (const auto* set : {&held_test, &held_train}) {
      for (const auto& m : set->rows) {
        if (std::string(nm::to_string(*nm::kernel_class(m.kernel.op))) != r.kernel_class) continue;
        e.push_back(pred.predict(m.kernel).ms() / m.latency_ms - 1.0);
      }
    }
    ASSERT_EQ(e.size(), 48U) << r.kernel_class;
    std::sort(e.begin(), e.end());
    EXPECT_NEAR(r.signed_median, 100.0 * 0.5 * (e[23] + e[24]), 1e-9) << r.kernel_class;
  }
}

TEST(ErrorStatistics, MedianIsTheMiddleOrTheMeanOfTheMiddleTwo) {
  EXPECT_EQ(nm::median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(nm::median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_EQ(nm::median({-1.0}), -1.0);
  EXPECT_EQ(nm::median({}), 0.0);
}

// ---------------------------------------------------------------- real data

namespace {
std::string neusight_kernels() {
  const char* src = std::getenv("TESSERA_SOURCE_DIR");
  if (src == nullptr) return {};
  const fs::path p = fs::path(src) / ".." / "shared" / "data" / "neusight" / "kernels";
  return fs::is_directory(p / "train") && fs::is_directory(p / "test") ? p.lexically_normal().string()
                                                                       : std::string();
}
}  // namespace

// A reduced leave-one-GPU-out run guarding its own measured figures (about
// 25 s on 2 cores): all six folds, 20 epochs on at most 10,000 training rows
// per class, at most 4,000 evaluated rows per class and source of each
// held-out GPU. The full run (`tessera validate kernels --leave-one-gpu-out`,
// 60 epochs, 40,000 rows, every row) is in docs/node_model.md; the issue's
// targets (GEMMs <= 12% mean and no GPU above 25%, vector ops <= 10% mean)
// are not met there either.
TEST(LeaveOneGpuOutAccuracy, ReducedRunOverSixGpus) {
  const std::string root = neusight_kernels();
  if (root.empty())
    GTEST_SKIP() << "NeuSight data not found at $TESSERA_SOURCE_DIR/../shared/data/neusight/kernels";
  const nm::DeviceCatalog catalog(nm::find_device_configs(root));
  const nm::MeasurementSet train = nm::read_measurement_dir(root + "/train", catalog);
  const nm::MeasurementSet test = nm::read_measurement_dir(root + "/test", catalog);
  nm::LogoOptions opt;
  opt.train.mlp.epochs = 20;
  opt.train.max_rows_per_class = 10000;
  opt.max_eval_rows = 4000;
  const auto rows = nm::leave_one_gpu_out(train, test, opt, nullptr);
  ASSERT_EQ(rows.size(), 30U);  // 6 GPUs x 5 classes
  for (const auto& r : rows) {
    EXPECT_GT(r.test_rows, 0) << r.gpu << " " << r.kernel_class;
    EXPECT_EQ(r.train_rows > 0, r.gpu != "NVIDIA A100 80GB PCIe") << r.gpu << " " << r.kernel_class;
  }
  std::cout << nm::format_logo(rows);
  // Mean / worst MAPE over the held-out GPUs: measured, rounded up slightly.
  struct Limit {
    const char* cls;
    double mean, worst;
  };
  const Limit limits[] = {
      {"bmm", 25.5, 34.5},          // measured 24.9% / 33.8% (Tesla P4)
      {"linear", 28.8, 45.0},       // measured 28.2% / 44.4% (Tesla P4)
      {"elementwise", 11.8, 27.0},  // measured 11.3% / 26.5% (Tesla P100)
      {"softmax", 18.8, 37.2},      // measured 18.3% / 36.7% (Tesla P100)
      {"ln", 14.9, 22.1},           // measured 14.4% / 21.6% (Tesla V100)
  };
  const auto summary = nm::summarize_logo(rows);
  ASSERT_EQ(summary.size(), 5U);
  for (const auto& s : summary) {
    EXPECT_EQ(s.gpus, 6) << s.kernel_class;
    EXPECT_LT(s.mean, s.roofline_mean) << s.kernel_class;  // the learned model beats the roofline
    for (const auto& l : limits) {
      if (s.kernel_class != l.cls) continue;
      EXPECT_LE(s.mean, l.mean) << s.kernel_class;
      EXPECT_LE(s.worst, l.worst) << s.kernel_class << " (" << s.worst_gpu << ")";
    }
  }
}
