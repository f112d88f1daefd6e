// A user's own nccl-tests runs (study::parse_nccl_tests, fit_nccl_tests and
// `tessera validate collectives --nccl-tests`): the output of any nccl-tests
// version read (made-up numbers, no measurement), every bad file one line
// naming the file and line, and the fit recovering the constants of runs
// that the model itself generated with known constants.
#include "tessera/study/nccl_tests.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/cli/args.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/error.hpp"

using namespace tessera;
using namespace tessera::cli;
using parallelism::CollectiveKind;

namespace {

// nccl-tests 2.13's layout (made-up times): 16 ranks on two hosts, a row of 0
// bytes (a tiny all-gather's), NCCL_DEBUG lines in between.
constexpr const char* kCurrent =
    R"(# nThread 1 nGpus 1 minBytes 8 maxBytes 2097152 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   1000 on     alpha device  0 [0x07] NVIDIA A100-SXM4-80GB
#  Rank  1 Group  0 Pid   1001 on     alpha device  1 [0x0b] NVIDIA A100-SXM4-80GB
#  Rank  2 Group  0 Pid   2000 on      beta device  0 [0x07] NVIDIA A100-SXM4-80GB
#  Rank  3 Group  0 Pid   2001 on      beta device  1 [0x0b] NVIDIA A100-SXM4-80GB
alpha:1000:1000 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
# Collective test starting: all_gather_perf
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           0             0     float    none      -1     0.10    0.00    0.00      0     0.10    0.00    0.00      0
     1048576         65536     float    none      -1    101.5   10.33    7.75      0     99.0   10.59    7.94      0
10-0-0-1:1000:1001 [0] NCCL INFO comm 0x1 rank 0 nranks 4 - Init COMPLETE
     2097152        131072     float    none      -1    180.25  11.63    8.73      0    178.0   11.78    8.84      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 8.24
)";

// An older layout: no Group and no root column, "error" for "#wrong"; the
// test only in the file's name.
constexpr const char* kOld =
    R"(# nThread 1 nGpus 4 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#   Rank  0 Pid  31337 on     gamma device  0 [0x1a] Tesla V100-SXM2-32GB
#   Rank  1 Pid  31337 on     gamma device  1 [0x1b] Tesla V100-SXM2-32GB
#   Rank  2 Pid  31337 on     gamma device  2 [0x3d] Tesla V100-SXM2-32GB
#   Rank  3 Pid  31337 on     gamma device  3 [0x3e] Tesla V100-SXM2-32GB
#
#                                                     out-of-place                       in-place
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        262144   float     sum    61.20   17.13   25.70  0e+00    60.90   17.22   25.82  0e+00
     2097152        524288   float     sum    88.00   23.83   35.75  0e+00    87.10   24.08   36.11  0e+00
# Out of bounds values : 0 OK
)";

std::string error_of(const std::string& text, const std::string& file) {
  try {
    (void)study::parse_nccl_tests(text, file);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  if (at == std::string::npos) throw std::logic_error("test text lacks: " + from);
  return text.replace(at, from.size(), to);
}

// Two nodes of eight A100s, one 200 Gb/s HCA per GPU on one leaf: a cluster
// file (`--scenario` of --nccl-tests), no model, training or plan.
constexpr const char* kCluster = R"(name: my-cluster
cluster:
  nodes: 2
  gpus_per_node: 8
  gpu: A100-80GB
  nvlink_bandwidth: 300GB/s
  nic_bandwidth: 200Gbps
  fabric: {type: leaf-spine, hosts_per_leaf: 16, spines: 1, spine_bandwidth: 200Gbps}
)";
// The same cluster in a whole scenario.
constexpr const char* kWorkload = R"(model:
  preset: gpt2-large
training:
  micro_batch: 1
  seq_len: 1024
  dtype: fp16
parallelism:
  tp: 4
)";

/// A run of `test` over the first `per_host` GPUs of each of `hosts` hosts,
/// its times those the model gives `truth` (printed to 0.01 us, as
/// nccl-tests prints them), 1 KiB to 1 GiB.
/// A fresh directory under the system's temporary one, named by `tag` and
/// the process (tests running at once do not share it).
std::filesystem::path temp_dir(const std::string& tag) {
  auto dir = std::filesystem::temp_directory_path() / (tag + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

std::string model_run(const Scenario& truth, const topology::Topology& topo, const std::string& test,
                      int hosts, int per_host) {
  std::string text = "# Using devices\n";
  int rank = 0;
  for (int h = 0; h < hosts; ++h) {
    for (int d = 0; d < per_host; ++d) {
      text += "#  Rank " + std::to_string(rank++) + " Group  0 Pid 7 on host" + std::to_string(h) +
              " device " + std::to_string(d) + " [0x00] NVIDIA A100-SXM4-80GB\n";
    }
  }
  text += "# Collective test starting: " + test + "\n";
  text += "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n";
  const study::NcclTestsLog shape = study::parse_nccl_tests(
      text + "1024 256 float sum -1 1.0 0 0 0 1.0 0 0 0\n# Out of bounds values : 0 OK\n", test);
  const std::vector<int> gpus = study::nccl_tests_gpus(shape, truth);
  for (std::int64_t size = 1024; size <= (std::int64_t{1} << 30); size *= 2) {
    const Time t = study::time_nccl_tests_row(truth, topo, shape, gpus, Bytes(size));
    char cells[160];
    std::snprintf(cells, sizeof cells, "%lld %lld float sum -1 %.2f 0 0 0 %.2f 0 0 0\n",
                  static_cast<long long>(size), static_cast<long long>(size / 4), t.us(), t.us());
    text += cells;
  }
  return text + "# Out of bounds values : 0 OK\n";
}

}  // namespace

// rccl-tests with -O 0 (in place only) leaves the out-of-place cells blank:
// a row of the in-place group alone is read, its time the in-place one
// (helper 138: refused as a row cut off); a row shorter still is cut off.
TEST(NcclTests, InPlaceOnlyRowsAreRead) {
  const std::string in_place =
      replaced(replaced(replaced(kCurrent, "0.10    0.00    0.00      0     0.10", "0.10"),
                        "101.5   10.33    7.75      0     99.0", "99.0"),
               "180.25  11.63    8.73      0    178.0", "178.0");
  const auto log = study::parse_nccl_tests(in_place, "ag.txt");
  ASSERT_EQ(log.rows.size(), 2U);
  EXPECT_EQ(log.rows[0].measured, Time::from_ps(99'000'000));
  EXPECT_EQ(log.rows[1].measured, Time::from_ps(178'000'000));
  EXPECT_NE(error_of(replaced(in_place, "178.0   11.78    8.84      0", "178.0   11.78"), "ag.txt")
                .find("ag.txt:17: 7 cells, but the header has 13 columns: a row cut off"),
            std::string::npos);
}

TEST(NcclTests, ReadsTheOutputOfAnyVersion) {
  const auto log = study::parse_nccl_tests(kCurrent, "runs/ag.txt");
  EXPECT_EQ(log.test, "all_gather_perf");
  EXPECT_EQ(log.kind, CollectiveKind::AllGather);
  ASSERT_EQ(log.ranks.size(), 4U);
  EXPECT_EQ(log.hosts, (std::vector<std::string>{"alpha", "beta"}));
  EXPECT_EQ(log.ranks[2].host, "beta");
  EXPECT_EQ(log.ranks[3].device, 1);
  EXPECT_EQ(log.ranks[2].gpu, "NVIDIA A100-SXM4-80GB");  // after the bus id
  ASSERT_EQ(log.rows.size(), 2U);
  EXPECT_EQ(log.rows[0].size, Bytes(1048576));
  EXPECT_EQ(log.rows[0].measured, Time::from_ps(101'500'000));  // the out-of-place time, not the in-place
  EXPECT_EQ(log.rows[1].line, 17U);
  EXPECT_EQ(log.rows[1].measured, Time::from_ps(180'250'000));
  EXPECT_EQ(log.empty_rows, 1);

  const auto old = study::parse_nccl_tests(kOld, "logs/v100_all_reduce_perf.out");
  EXPECT_EQ(old.test, "all_reduce_perf");
  EXPECT_EQ(old.kind, CollectiveKind::AllReduce);
  EXPECT_EQ(old.hosts, (std::vector<std::string>{"gamma"}));
  ASSERT_EQ(old.rows.size(), 2U);
  EXPECT_EQ(old.rows[1].measured, Time::from_ps(88'000'000));
  // A file named after no test but with its starting line; names in any order.
  EXPECT_EQ(
      study::parse_nccl_tests(
          replaced(kOld, "#\n# Using", "# Collective test starting: sendrecv_perf\n#\n# Using"), "run3.log")
          .kind,
      CollectiveKind::SendRecv);
  EXPECT_EQ(study::parse_nccl_tests(kOld, "reduce_scatter_perf.txt").kind, CollectiveKind::ReduceScatter);
  EXPECT_EQ(study::parse_nccl_tests(kOld, "alltoall.txt").kind, CollectiveKind::AllToAll);
  EXPECT_EQ(study::parse_nccl_tests(kOld, "reduce_perf.txt").kind, CollectiveKind::Reduce);
}

TEST(NcclTests, BadOutputIsOneLineNamingFileAndLine) {
  struct Case {
    std::string text;
    std::string file;
    std::string error;
  };
  const std::string short_row =
      replaced(kOld,
               "     1048576        262144   float     sum    61.20   17.13   25.70  "
               "0e+00    60.90   17.22   25.82  0e+00",
               "     1048576        262144   float");
  const Case cases[] = {
      {replaced(kCurrent, "180.25", "abc"), "ag.txt", "ag.txt:17: column 'time': 'abc' is not a number"},
      {replaced(kCurrent, "     2097152", "    2097152.5"), "ag.txt",
       "ag.txt:17: column 'size': must be a whole number of bytes, got '2097152.5'"},
      {replaced(kCurrent, "180.25", "0.0"), "ag.txt",
       "ag.txt:17: column 'time': must be positive, got '0.0'"},
      // Milliseconds where nccl-tests writes microseconds: the row's algbw
      // (2097152 B / 180.25 us = 11.63 GB/s) says so.
      {replaced(kCurrent, "180.25", "0.18025"), "ag.txt",
       "ag.txt:17: column 'time': 0.18025 us for 2097152 B is 1.163e+04 GB/s, but the row's algbw is 11.63 "
       "GB/s: nccl-tests writes the time in microseconds"},
      {"size time\n1 2\n", "x_all_reduce.txt",
       "x_all_reduce.txt: no rank lines ('#  Rank 0 Group 0 Pid P on HOST device 0 ...'): "
       "not the output of an nccl-tests run"},
      {kOld, "run.txt",
       "run.txt: which test is this? It has no '# Collective test starting:' line and its name "
       "names none of all_reduce, all_gather, reduce_scatter, alltoall, sendrecv, broadcast, reduce "
       "(name the file after its test, e.g. all_reduce_perf.txt)"},
      {replaced(kCurrent, "all_gather_perf", "hypercube_perf"), "x.txt",
       "x.txt:9: test 'hypercube_perf' is not one Tessera models (all_reduce_perf, all_gather_perf, "
       "reduce_scatter_perf, alltoall_perf, sendrecv_perf, broadcast_perf, reduce_perf)"},
      {replaced(kCurrent, "Rank  1 Group", "Rank 99999999999 Group"), "ag.txt",
       "ag.txt:5: rank '99999999999' is not a whole number up to 2147483647"},
      {replaced(kCurrent, "device  1 [0x0b]", "device 2147483648 [0x0b]"), "ag.txt",
       "ag.txt:5: device '2147483648' is not a whole number up to 2147483647"},
      {replaced(kCurrent, "Rank  3 Group", "Rank  2 Group"), "ag.txt",
       "ag.txt: rank 2 is listed twice (4 rank lines: ranks 0 to 3 once each)"},
      {replaced(kCurrent, "Rank  3 Group", "Rank  5 Group"), "ag.txt",
       "ag.txt: rank 3 is missing (4 rank lines: ranks 0 to 3 once each)"},
      {std::string(kCurrent) + "#  Rank  0 Group  0 Pid 1 on alpha device 0\n", "ag.txt",
       "ag.txt:20: a second nccl-tests run in one file: give each run its own file"},
      {short_row, "all_reduce.txt",
       "all_reduce.txt:12: 3 cells, but the header has 12 columns: a row cut off (the run killed while "
       "printing it?); rerun it"},
      // A row cut off after its time (helper 137: read as 11 us for 1 GiB,
      // the fit pinned to its bound), an aborted run's failure line, and a
      // run without its closing line (killed, or the file cut short).
      {replaced(kCurrent, "180.25  11.63    8.73      0    178.0   11.78    8.84      0", "11"), "ag.txt",
       "ag.txt:17: 6 cells, but the header has 13 columns: a row cut off (the run killed while "
       "printing it?); rerun it"},
      {replaced(kCurrent, "# Out of bounds values : 0 OK",
                "beta: Test NCCL failure common.cu:1279 'unhandled system error'"),
       "ag.txt",
       "ag.txt:18: nccl-tests failed ('beta: Test NCCL failure common.cu:1279 'unhandled system "
       "error''): a run cut off times nothing trustworthy; rerun it"},
      {replaced(replaced(kCurrent, "# Out of bounds values : 0 OK\n", ""), "# Avg bus bandwidth    : 8.24\n",
                ""),
       "ag.txt",
       "ag.txt: no '# Out of bounds values : 0 OK' line after the rows: the run did not finish "
       "(killed, or the file cut short), and its last rows may be missing or cut off; rerun it"},
      // A rank line whose rank is not an index was skipped: the run was
      // timed as 3 ranks.
      {replaced(kCurrent, "Rank  3 Group", "Rank -3 Group"), "ag.txt",
       "ag.txt:7: rank '-3' is not a whole number up to 2147483647"},
      // A row whose size is damaged was skipped as a log line.
      {replaced(kCurrent, "     2097152", "    2O97152"), "ag.txt",
       "ag.txt:17: column 'size': '2O97152' is not a number"},
      // A signed or hexadecimal size (helper 116: -4194304 and +4194304 rows
      // dropped as log lines, 0x200000 read as hex), a size past 2^50 B (it
      // overflowed while the report printed), a time past a day (1e300 us
      // overflowed), a hexadecimal time.
      {replaced(kCurrent, "     2097152", "    -2097152"), "ag.txt",
       "ag.txt:17: column 'size': must be a whole number of bytes, got '-2097152'"},
      {replaced(kCurrent, "     2097152", "    +2097152"), "ag.txt",
       "ag.txt:17: column 'size': must be a whole number of bytes, got '+2097152'"},
      {replaced(kCurrent, "     2097152", "    0x200000"), "ag.txt",
       "ag.txt:17: column 'size': '0x200000' is not a number"},
      {replaced(kCurrent, "     2097152", "9000000000000000000"), "ag.txt",
       "ag.txt:17: column 'size': 9000000000000000000 B is more than 2^50 (1 PiB), no GPU's collective"},
      {replaced(kCurrent, "180.25  11.63", "1e300  11.63"), "ag.txt",
       "ag.txt:17: column 'time': 1e300 us is more than a day: nccl-tests writes microseconds"},
      {replaced(kCurrent, "180.25", "0xb4"), "ag.txt", "ag.txt:17: column 'time': '0xb4' is not a number"},
      // Wrong results: the row's count, and the footer of a failed run.
      {replaced(kCurrent, "11.63    8.73      0", "11.63    8.73      7"), "ag.txt",
       "ag.txt:17: column '#wrong': 7 wrong values at 2097152 B: nccl-tests found this row's results wrong; "
       "rerun it"},
      {replaced(kCurrent, "11.78    8.84      0", "11.78    8.84      5"), "ag.txt",
       "ag.txt:17: column '#wrong': 5 wrong values at 2097152 B: nccl-tests found this row's results wrong; "
       "rerun it"},
      // `-d all` / `-o all`: each size once per data type or reduction
      // (helper 110: counted ten times in a fit), and a size twice.
      {replaced(kCurrent, "131072     float", "131072      half"), "ag.txt",
       "ag.txt:17: data type 'half' after rows of 'float': the run timed several data types (nccl-tests -d "
       "all?); Tessera reads one per file: rerun with one -d (e.g. -d float), or keep one's rows"},
      {replaced(kOld, "524288   float     sum", "524288   float     max"), "all_reduce.txt",
       "all_reduce.txt:13: reduction 'max' after rows of 'sum': the run timed several reductions (nccl-tests "
       "-o all?); Tessera reads one per file: rerun with one -o (e.g. -o sum), or keep one's rows"},
      {replaced(kOld, "     2097152        524288   float     sum    88.00   23.83",
                "     1048576        262144   float     sum    44.00   23.83"),
       "all_reduce.txt", "all_reduce.txt:13: size 1048576 B a second time: each size is timed once in a run"},
      {replaced(kOld, "values : 0 OK", "values : 2 FAILED"), "all_reduce.txt",
       "all_reduce.txt:14: nccl-tests reports wrong results ('# Out of bounds values : 2 FAILED'): a failed "
       "run times nothing trustworthy; rerun it"},
  };
  for (const Case& c : cases) EXPECT_EQ(error_of(c.text, c.file), c.error);
  // A cluster too small for the run names the file.
  const Scenario one_node = parse_cluster_scenario(replaced(kCluster, "nodes: 2", "nodes: 1"), "c.yaml");
  try {
    (void)study::nccl_tests_gpus(study::parse_nccl_tests(kCurrent, "ag.txt"), one_node);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "ag.txt: the run spans 2 hosts, the scenario's cluster has 1 node");
  }
}

TEST(NcclTests, FitRecoversTheConstantsThatMadeTheRuns) {
  // Runs the model made with known constants: all-reduce on 2, 4 and 8 GPUs
  // of one host and on 2 x 8 GPUs of two hosts, all-gather on 2 x 4. The fit
  // starts from the shipped constants and must find the ones that made them.
  const Scenario shipped = parse_cluster_scenario(kCluster, "cluster.yaml");
  Scenario truth = shipped;
  truth.calibration.comm.nvlink.peak_efficiency = 0.7;
  truth.calibration.comm.nvlink.group_penalty = 0.4;
  truth.calibration.comm.nvlink.launch_latency = Time::from_ps(35'000'000);
  truth.calibration.comm.network.peak_efficiency = 0.8;
  truth.calibration.comm.network.group_penalty = 0.0;
  truth.calibration.comm.network.launch_latency = Time::from_ps(40'000'000);
  truth.calibration.comm.network.step_latency = Time::from_ps(3'000'000);
  const topology::Topology topo = build_topology(shipped);
  std::vector<study::NcclTestsLog> logs;
  for (const auto& [test, hosts, per_host] :
       {std::tuple{"all_reduce_perf", 1, 2}, std::tuple{"all_reduce_perf", 1, 4},
        std::tuple{"all_reduce_perf", 1, 8}, std::tuple{"all_reduce_perf", 2, 8},
        std::tuple{"all_gather_perf", 2, 4}}) {
    logs.push_back(study::parse_nccl_tests(model_run(truth, topo, test, hosts, per_host), test));
  }
  const study::NcclTestsFit fit = study::fit_nccl_tests(shipped, topo, logs, true, true);
  ASSERT_TRUE(fit.nvlink.fitted);
  ASSERT_TRUE(fit.network.fitted);
  EXPECT_EQ(fit.nvlink.files, 3U);
  EXPECT_EQ(fit.nvlink.rows, 33U);  // 1 MiB to 1 GiB: 11 sizes each
  EXPECT_EQ(fit.network.files, 2U);
  EXPECT_NEAR(fit.nvlink.calibration.peak_efficiency, 0.7, 0.001);
  EXPECT_NEAR(fit.nvlink.calibration.group_penalty, 0.4, 0.002);
  EXPECT_NEAR(fit.nvlink.calibration.launch_latency.us(), 35.0, 0.05);
  EXPECT_NEAR(fit.network.calibration.peak_efficiency, 0.8, 0.002);
  EXPECT_NEAR(fit.network.calibration.group_penalty, 0.0, 0.002);
  EXPECT_NEAR(fit.network.calibration.launch_latency.us(), 40.0, 0.2);
  // The runs put different step counts on their critical paths (rings of
  // 2, 4, 8 and 16 ranks), so the step latency is fitted too: NVLink's 0
  // (the topology's hop latency is the step cost), the network's 3 us where
  // the scenario started from 6.2 us.
  EXPECT_TRUE(fit.nvlink.step_fitted);
  EXPECT_TRUE(fit.network.step_fitted);
  EXPECT_NEAR(fit.nvlink.calibration.step_latency.us(), 0.0, 0.01);
  EXPECT_NEAR(fit.network.calibration.step_latency.us(), 3.0, 0.01);
  EXPECT_NEAR(shipped.calibration.comm.network.step_latency.us(), 6.2, 1e-9);
  // Asked for one class, the other is left alone.
  EXPECT_FALSE(study::fit_nccl_tests(shipped, topo, logs, true, false).network.fitted);
}

// Runs whose rank lines name another GPU than the scenario's are said to
// (helper 120: H100 runs fitted an A100 cluster without a word); runs of
// the scenario's GPU are not.
TEST(NcclTests, RunsOfAnotherGpuAreWarnedAbout) {
  const auto dir = temp_dir("tessera_nccl_gpu_");
  const std::string yaml = (dir / "cluster.yaml").string();
  std::ofstream(yaml) << kCluster;
  const Scenario s = parse_cluster_scenario(kCluster, yaml);
  const std::string a100 = (dir / "all_reduce_perf.txt").string();
  const std::string h100 = (dir / "all_reduce_h100.txt").string();
  const std::string run = model_run(s, build_topology(s), "all_reduce_perf", 1, 8);
  std::ofstream(a100) << run;
  std::ofstream(h100) << replaced(run, "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3");
  auto warnings = [&](const std::string& file) {
    std::ostringstream out;
    testing::internal::CaptureStderr();
    const int rc = cmd_validate_collectives({"--nccl-tests", file, "--scenario", yaml}, out);
    std::string err = testing::internal::GetCapturedStderr();
    EXPECT_EQ(rc, 0);
    return err;
  };
  EXPECT_EQ(warnings(a100), "");
  EXPECT_EQ(warnings(h100),
            "tessera: warning: " + h100 +
                ": its ranks ran on NVIDIA H100 80GB HBM3, the scenario's GPU is A100-80GB: these "
                "runs time another GPU's NCCL than the cluster's\n");
  std::filesystem::remove_all(dir);
}

TEST(NcclTests, CommandPrintsTheFittedSectionAndEachRow) {
  const auto dir = temp_dir("tessera_nccl_tests_");
  const std::string yaml = (dir / "cluster.yaml").string();
  std::ofstream(yaml) << kCluster;
  const Scenario shipped = parse_cluster_scenario(kCluster, yaml);
  Scenario truth = shipped;
  truth.calibration.comm.nvlink.peak_efficiency = 0.65;
  truth.calibration.comm.nvlink.group_penalty = 0.0;
  truth.calibration.comm.nvlink.launch_latency = Time::from_ps(20'000'000);
  const topology::Topology topo = build_topology(shipped);
  const std::string run = (dir / "all_reduce_perf.txt").string();
  std::ofstream(run) << model_run(truth, topo, "all_reduce_perf", 1, 8);

  std::ostringstream out;
  EXPECT_EQ(cmd_validate_collectives({"--nccl-tests", run, "--scenario", yaml, "--fit", "nvlink"}, out), 0);
  const std::string text = out.str();
  // Runs of one group size (8) fix the efficiency at 8 only: the scenario's
  // penalty (the shipped 0.449) stays, and the peak is fit under it, so that
  // efficiency(8) = 0.7062 - 0.449 / 8 = 0.65 (a penalty of 0 would have
  // moved every other group size).
  EXPECT_NEAR(shipped.calibration.comm.nvlink.group_penalty, 0.449, 1e-9);
  EXPECT_NE(
      text.find(
          "calibration:\n  nvlink_efficiency: 0.7062\n  nvlink_group_penalty: 0.4490\n"
          "  nvlink_launch: 20.003152us\n  nvlink_step: 0s\n  # nvlink from 1 file, 11 rows; the group "
          "penalty is the scenario's (one group size); the step latency is the one the fit ran with (one "
          "step count)\n"),
      std::string::npos)
      << text;
  // A step the command set is the one the fit ran with: the section carries
  // it, and names the --set (helper 110: pasted without it, the error was
  // not the fit's).
  std::ostringstream with_step;
  EXPECT_EQ(cmd_validate_collectives({"--nccl-tests", run, "--scenario", yaml, "--fit", "nvlink", "--set",
                                      "calibration.nvlink_step=3us"},
                                     with_step),
            0);
  EXPECT_NE(with_step.str().find("  nvlink_step: 3us\n"), std::string::npos) << with_step.str();
  EXPECT_NE(
      with_step.str().find("  # fitted with --set calibration.nvlink_step=3us: keep those in the scenario "
                           "too\n"),
      std::string::npos)
      << with_step.str();
  EXPECT_NE(text.find("all_reduce_perf.txt          all-reduce          8     1      1 GiB"),
            std::string::npos)
      << text;
  EXPECT_NE(
      text.find("summary all_reduce_perf.txt: all-reduce of 8 ranks on 1 host: 0.0% over 11 rows >= 1 MiB"),
      std::string::npos)
      << text;
  // The printed section, pasted into the scenario, gives the fitted errors.
  const auto section = text.find("calibration:\n");
  const auto section_end = text.find("\n\n", section);
  std::ofstream(dir / "fitted.yaml") << kCluster << text.substr(section, section_end - section + 1);
  std::ostringstream pasted;
  EXPECT_EQ(
      cmd_validate_collectives({"--nccl-tests", run, "--scenario", (dir / "fitted.yaml").string()}, pasted),
      0);
  EXPECT_NE(
      pasted.str().find("summary all_reduce_perf.txt: all-reduce of 8 ranks on 1 host: 0.0% over 11 rows"),
      std::string::npos)
      << pasted.str();
  // Without --fit: the scenario's (shipped) constants, which are not these.
  std::ostringstream shipped_out;
  EXPECT_EQ(cmd_validate_collectives({"--nccl-tests", run, "--scenario", yaml}, shipped_out), 0);
  EXPECT_EQ(shipped_out.str().find("0.0% over 11 rows"), std::string::npos);
  // A run of small sizes only has no figure >= 1 MiB: n/a, not "0.0% over 0
  // rows" (helper 110), which reads as a perfect fit.
  const std::string small = (dir / "all_gather_perf.txt").string();
  std::ofstream(small) << replaced(
      replaced(kCurrent, "     1048576         65536     float    none      -1    101.5   10.33",
               "        1024           256     float    none      -1     10.5    0.00"),
      "     2097152        131072     float    none      -1    180.25  11.63",
      "        2048           512     float    none      -1     11.25   0.00");
  std::ostringstream small_out;
  EXPECT_EQ(cmd_validate_collectives({"--nccl-tests", small, "--scenario", yaml}, small_out), 0);
  EXPECT_NE(
      small_out.str().find("summary all_gather_perf.txt: all-gather of 4 ranks on 2 hosts: n/a (no rows >= "
                           "1 MiB); all sizes "),
      std::string::npos)
      << small_out.str();
  EXPECT_NE(small_out.str().find("summary overall: n/a (no rows >= 1 MiB); all sizes "), std::string::npos)
      << small_out.str();
  EXPECT_EQ(small_out.str().find("over 0 rows"), std::string::npos) << small_out.str();
  // The network class needs runs across hosts; --scenario is required.
  EXPECT_THROW(
      (void)cmd_validate_collectives({"--nccl-tests", run, "--scenario", yaml, "--fit", "network"}, out),
      InputError);
  try {
    (void)cmd_validate_collectives({"--nccl-tests", run}, out);
    ADD_FAILURE() << "no error";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).find("--nccl-tests needs --scenario CLUSTER.yaml"), 0U);
  }
  std::filesystem::remove_all(dir);
}

TEST(NcclTests, AFitAtItsBoundsSaysWhatToCheck) {
  // Runs made at full NVLink efficiency on a 300 GB/s node, fit on a
  // scenario that says 150 GB/s (a wrong rate): the efficiency stops at its
  // ceiling, 1, and the command names the rate to check (helper 78: it
  // printed 1.0000 and nothing else). Their launch is 0 and the step 0
  // already: the note points to the per-hop latency, not to a lower step.
  const auto dir = temp_dir("tessera_nccl_bounds_");
  const Scenario shipped = parse_cluster_scenario(kCluster, "cluster.yaml");
  Scenario truth = shipped;
  truth.calibration.comm.nvlink.peak_efficiency = 1.0;
  truth.calibration.comm.nvlink.group_penalty = 0.0;
  truth.calibration.comm.nvlink.launch_latency = Time::zero();
  const std::string run = (dir / "all_reduce_perf.txt").string();
  std::ofstream(run) << model_run(truth, build_topology(shipped), "all_reduce_perf", 1, 8);
  std::string slow = kCluster;
  slow.replace(slow.find("300GB/s"), 7, "150GB/s");
  const std::string yaml = (dir / "slow.yaml").string();
  std::ofstream(yaml) << slow;
  std::ostringstream out;
  EXPECT_EQ(cmd_validate_collectives({"--nccl-tests", run, "--scenario", yaml, "--fit", "nvlink"}, out), 0);
  const std::string text = out.str();
  EXPECT_NE(text.find("  nvlink_efficiency: 1.0000\n"), std::string::npos) << text;
  // (after a blank line: the section is pasted up to one; helper 137)
  EXPECT_NE(
      text.find("\n\nnote: nvlink_efficiency fitted at its ceiling, 1: the runs' bus bandwidth reaches the "
                "scenario's link rate or passes it; check cluster.nvlink_bandwidth"),
      std::string::npos)
      << text;
  // (the launch's note, about latencies, waits for the rate to be right)
  EXPECT_EQ(text.find("nvlink_launch fitted at its floor"), std::string::npos) << text;
  // The header above the section is not a line to paste.
  EXPECT_EQ(text.find("\ncalibration: "), std::string::npos) << text;
  // Runs with no fixed cost at 0.7 efficiency, fit on a scenario whose
  // NVLink hops are 5 us: the launch stops at its floor with the step at 0
  // already, and the note points to the per-hop latency (helper 78: it
  // advised a lower step).
  truth.calibration.comm.nvlink.peak_efficiency = 0.7;
  std::ofstream(run) << model_run(truth, build_topology(shipped), "all_reduce_perf", 1, 8);
  std::string slow_hops = kCluster;
  slow_hops.replace(slow_hops.find("  nic_bandwidth"), 0, "  nvlink_latency: 5us\n");
  std::ofstream(yaml) << slow_hops;
  std::ostringstream hops;
  EXPECT_EQ(cmd_validate_collectives({"--nccl-tests", run, "--scenario", yaml, "--fit", "nvlink"}, hops), 0);
  EXPECT_NE(
      hops.str().find("note: nvlink_launch fitted at its floor, 0: the runs' fixed cost is below what the "
                      "model charges before any launch (nvlink_step 0.0 us per transfer, and the "
                      "topology's latency per hop); the step is 0 already: with a lower "
                      "cluster.nvlink_latency the launch can take it"),
      std::string::npos)
      << hops.str();
  EXPECT_EQ(hops.str().find("fitted at its ceiling"), std::string::npos) << hops.str();
  // Runs across hosts of two step counts (2 and 8 ranks) with no fixed
  // cost, fit on a scenario whose HCA hops are 20 us: launch and step both
  // stop at 0, and a note says so (helper 110: none, with +34% left).
  Scenario free = shipped;
  free.calibration.comm.network.launch_latency = Time::zero();
  free.calibration.comm.network.step_latency = Time::zero();
  free.calibration.comm.network.peak_efficiency = 0.5;
  free.calibration.comm.network.group_penalty = 0.0;
  std::vector<std::string> files;
  for (const int per_host : {1, 4}) {
    files.push_back((dir / ("all_reduce_perf_" + std::to_string(per_host) + ".txt")).string());
    std::ofstream(files.back()) << model_run(free, build_topology(shipped), "all_reduce_perf", 2, per_host);
  }
  std::string slow_nic = kCluster;
  slow_nic.replace(slow_nic.find("  nic_bandwidth"), 0, "  nic_latency: 20us\n");
  std::ofstream(yaml) << slow_nic;
  std::ostringstream floors;
  EXPECT_EQ(cmd_validate_collectives(
                {"--nccl-tests", files[0] + "," + files[1], "--scenario", yaml, "--fit", "network"}, floors),
            0);
  EXPECT_NE(floors.str().find("  network_launch: 0s\n  network_step: 0s\n"), std::string::npos)
      << floors.str();
  EXPECT_NE(
      floors.str().find("note: network_launch and network_step both fitted at their floor, 0: the runs' "
                        "fixed cost is below the topology's latency per hop alone; with a lower "
                        "cluster.nic_latency the fit can follow the small rows\n"),
      std::string::npos)
      << floors.str();
  std::filesystem::remove_all(dir);
}

TEST(NcclTests, ANetworkEfficiencyRisingWithTheGroupIsSaidToGoOnUnmeasured) {
  // Runs across 2 hosts of 4 and of 8 GPUs made with a network group penalty
  // of 1.2: the efficiency is 0.85 - 1.2/8 = 0.70 at 8 ranks, 0.775 at 16,
  // and the model takes it on to 0.85 at any larger group (helper 78: a
  // fit on 2-4 nodes carried to 64 unremarked). The note gives the values
  // that hold it at 16 ranks.
  const auto dir = temp_dir("tessera_nccl_rising_");
  const Scenario shipped = parse_cluster_scenario(kCluster, "cluster.yaml");
  Scenario truth = shipped;
  truth.calibration.comm.network.peak_efficiency = 0.85;
  truth.calibration.comm.network.group_penalty = 1.2;
  const topology::Topology topo = build_topology(shipped);
  std::vector<std::string> files;
  for (const int per_host : {4, 8}) {
    files.push_back((dir / ("all_reduce_perf_" + std::to_string(per_host) + ".txt")).string());
    std::ofstream(files.back()) << model_run(truth, topo, "all_reduce_perf", 2, per_host);
  }
  const std::string yaml = (dir / "cluster.yaml").string();
  std::ofstream(yaml) << kCluster;
  std::ostringstream out;
  EXPECT_EQ(cmd_validate_collectives(
                {"--nccl-tests", files[0] + "," + files[1], "--scenario", yaml, "--fit", "network"}, out),
            0);
  // (the fit recovers the constants to within a percent: 0.778 at 16)
  const std::string text = out.str();
  EXPECT_NE(
      text.find("note: network_group_penalty > 0: the efficiency rises with the group, 0.700 at 8 ranks "
                "to 0.77"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find("for groups larger than the runs', where nothing was measured; to hold it at the largest "
                "group measured, set network_efficiency: 0.77"),
      std::string::npos)
      << text;
  EXPECT_NE(text.find(" and network_group_penalty: 0\n"), std::string::npos) << text;
  std::filesystem::remove_all(dir);
}

TEST(NcclTests, ClusterFileNeedsNoModelTrainingOrPlan) {
  const auto dir = temp_dir("tessera_nccl_cluster_");
  const std::string cluster = (dir / "cluster.yaml").string();
  const std::string whole = (dir / "whole.yaml").string();
  std::ofstream(cluster) << kCluster;
  std::ofstream(whole) << kCluster << kWorkload;
  const Scenario s = parse_cluster_scenario(kCluster, cluster);
  const std::string run = (dir / "all_reduce_perf.txt").string();
  std::ofstream(run) << model_run(s, build_topology(s), "all_reduce_perf", 2, 8);

  // The cluster file reads as the whole scenario does, row for row.
  std::ostringstream from_cluster, from_whole;
  EXPECT_EQ(cmd_validate_collectives({"--nccl-tests", run, "--scenario", cluster}, from_cluster), 0);
  EXPECT_EQ(cmd_validate_collectives({"--nccl-tests", run, "--scenario", whole}, from_whole), 0);
  std::string expected = from_whole.str();
  expected.replace(expected.find(whole), whole.size(), cluster);
  EXPECT_EQ(from_cluster.str(), expected);
  EXPECT_NE(from_cluster.str().find("cluster.yaml's cluster (2 nodes x 8 A100-80GB, flow backend)"),
            std::string::npos)
      << from_cluster.str();
  EXPECT_NE(from_cluster.str().find("all-reduce of 16 ranks on 2 hosts: 0.0% over 11 rows"),
            std::string::npos)
      << from_cluster.str();

  // One node (it needs no fabric either).
  const std::string one = (dir / "one.yaml").string();
  std::ofstream(one) << "cluster: {nodes: 1, gpus_per_node: 8, gpu: A100-80GB, nic_bandwidth: 200Gbps}\n";
  const std::string run1 = (dir / "all_reduce_1node.txt").string();
  std::ofstream(run1) << model_run(s, build_topology(s), "all_reduce_perf", 1, 8);
  std::ostringstream one_out;
  EXPECT_EQ(cmd_validate_collectives({"--nccl-tests", run1, "--scenario", one}, one_out), 0);
  EXPECT_NE(one_out.str().find("one.yaml's cluster (1 node x 8 A100-80GB, flow backend)"), std::string::npos)
      << one_out.str();
  EXPECT_NE(one_out.str().find("all-reduce of 8 ranks on 1 host: 0.0% over 11 rows"), std::string::npos)
      << one_out.str();
  // A GPU without bf16 (helper 104: the stand-in training's bf16 refused a
  // V100 cluster, at a line and column of no file).
  const std::string v100 = (dir / "v100.yaml").string();
  std::ofstream(v100) << "cluster: {nodes: 1, gpus_per_node: 8, gpu: V100-SXM2, nic_bandwidth: 100Gbps}\n";
  const Scenario sv = parse_cluster_scenario(
      "cluster: {nodes: 1, gpus_per_node: 8, gpu: V100-SXM2, nic_bandwidth: 100Gbps}\n", v100);
  const std::string runv = (dir / "all_reduce_v100.txt").string();
  std::ofstream(runv) << model_run(sv, build_topology(sv), "all_reduce_perf", 1, 8);
  std::ostringstream v100_out;
  EXPECT_EQ(cmd_validate_collectives({"--nccl-tests", runv, "--scenario", v100}, v100_out), 0);
  EXPECT_NE(v100_out.str().find("v100.yaml's cluster (1 node x 8 V100-SXM2, flow backend)"),
            std::string::npos)
      << v100_out.str();

  // Sections written are read and checked as in any scenario.
  std::ofstream(cluster) << kCluster << "training:\n  micro_batch: 1\n  dtype: fp16\n";
  try {
    (void)cmd_validate_collectives({"--nccl-tests", run, "--scenario", cluster}, from_cluster);
    ADD_FAILURE() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()), cluster + ":10:3: training.seq_len: missing required key");
  }
  // A whole-scenario command still needs them.
  EXPECT_THROW((void)load_scenario(cluster), ScenarioError);
  std::filesystem::remove_all(dir);
}
