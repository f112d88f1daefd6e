#include "tessera/cli/trace.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "tessera/cli/args.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/node_model/json.hpp"
#include "tessera/study/pipeline.hpp"

using namespace tessera;
using namespace tessera::cli;

namespace {

std::size_t count(const std::string& s, const std::string& needle) {
  std::size_t n = 0;
  for (auto pos = s.find(needle); pos != std::string::npos; pos = s.find(needle, pos + 1)) ++n;
  return n;
}

/// What a trace holds, after checking it against the Trace Event Format.
struct TraceSummary {
  std::map<std::string, int> phases;                  ///< events per ph
  std::map<std::string, int> categories;              ///< non-metadata events per cat
  std::set<double> pids;                              ///< of non-metadata events
  std::map<std::pair<int, int>, std::string> tracks;  ///< (pid, tid) -> thread name
  std::set<std::string> counters;                     ///< names of C events
  double max_utilization = 0;                         ///< of the link counters
  double last_counter_us = 0;                         ///< the latest C event's ts
  std::map<std::string, double> last_counter_value;   ///< per counter, its latest utilization
  std::vector<std::string> slice_names;               ///< names of X events
  int flows = 0;                                      ///< s/f pairs
  node_model::JsonValue other;                        ///< otherData
};

/// Parses `text` with the repository's JSON reader and checks the schema:
/// every event has ph, pid and tid, every timed event ts >= 0; X durations
/// non-negative; B/E balanced per track; async b/e and flow s/f paired by id;
/// every (pid, tid) used declared by exactly one thread_name and every
/// declared track used; every pid used named by exactly one process_name.
TraceSummary check_trace(const std::string& text) {
  TraceSummary out;
  const auto root = node_model::parse_json(text, "trace");
  EXPECT_TRUE(root.is_object());
  const auto* events = root.find("traceEvents");
  EXPECT_NE(events, nullptr);
  if (events == nullptr) return out;
  if (const auto* o = root.find("otherData")) out.other = *o;
  std::map<std::pair<int, int>, int> declared, used;
  std::map<int, int> processes;
  std::map<std::pair<int, int>, int> open_b;            // B/E depth per track
  std::map<std::string, std::pair<int, double>> async;  // cat:id -> (open count, begin ts)
  std::map<double, std::pair<int, int>> flows;          // id -> (s, f)
  for (const auto& e : events->array()) {
    const auto* ph = e.find("ph");
    const auto* pid = e.find("pid");
    const auto* tid = e.find("tid");
    EXPECT_TRUE(ph != nullptr && ph->is_string() && pid != nullptr && pid->is_number() && tid != nullptr &&
                tid->is_number());
    if (ph == nullptr || pid == nullptr || tid == nullptr) continue;
    const std::string p = ph->string();
    ++out.phases[p];
    const std::pair<int, int> track{static_cast<int>(pid->number()), static_cast<int>(tid->number())};
    const std::string name = e.find("name") != nullptr ? e.find("name")->string() : "";
    if (p == "M") {
      if (name == "thread_name") {
        ++declared[track];
        out.tracks[track] = e.find("args")->find("name")->string();
      }
      if (name == "process_name") ++processes[track.first];
      continue;
    }
    const auto* ts = e.find("ts");
    EXPECT_TRUE(ts != nullptr && ts->is_number() && ts->number() >= 0) << name;
    const double t = ts != nullptr ? ts->number() : 0;
    ++used[track];
    out.pids.insert(pid->number());
    if (const auto* cat = e.find("cat")) ++out.categories[cat->string()];
    if (p == "X") {
      const auto* dur = e.find("dur");
      EXPECT_TRUE(dur != nullptr && dur->number() >= 0) << name;
      out.slice_names.push_back(name);
    } else if (p == "B") {
      ++open_b[track];
    } else if (p == "E") {
      EXPECT_GT(open_b[track]--, 0) << "E without B";
    } else if (p == "b" || p == "e") {
      const std::string key = e.find("cat")->string() + ":" + std::to_string(e.find("id")->number());
      auto& a = async[key];
      if (p == "b") {
        EXPECT_EQ(a.first, 0) << "async id reused: " << key;
        a = {1, t};
      } else {
        EXPECT_EQ(a.first, 1) << "async end without begin: " << key;
        EXPECT_GE(t, a.second);
        a.first = 2;
      }
    } else if (p == "s" || p == "f") {
      auto& f = flows[e.find("id")->number()];
      (p == "s" ? f.first : f.second) += 1;
    } else if (p == "C") {
      out.counters.insert(name);
      out.last_counter_us = std::max(out.last_counter_us, t);
      for (const auto& [k, v] : e.find("args")->object()) {
        EXPECT_TRUE(v.is_number()) << k;
        if (k == "utilization") {
          EXPECT_GE(v.number(), 0.0) << name;
          out.max_utilization = std::max(out.max_utilization, v.number());
          out.last_counter_value[name] = v.number();
        }
      }
    } else {
      ADD_FAILURE() << "unexpected phase " << p;
    }
  }
  for (const auto& [track, n] : declared) {
    EXPECT_EQ(n, 1) << "track " << track.first << "/" << track.second << " declared " << n << " times";
    EXPECT_GT(used[track], 0) << "declared track without events: " << track.first << "/" << track.second;
  }
  for (const auto& [track, n] : used) {
    EXPECT_EQ(declared.count(track), 1U) << "undeclared track " << track.first << "/" << track.second;
    EXPECT_EQ(processes[track.first], 1) << "process " << track.first << " not named once";
  }
  for (const auto& [track, depth] : open_b) EXPECT_EQ(depth, 0);
  for (const auto& [key, a] : async) EXPECT_EQ(a.first, 2) << "unpaired async " << key;
  for (const auto& [id, f] : flows) {
    EXPECT_TRUE(f.first == 1 && f.second == 1) << "flow " << id << " not paired";
    ++out.flows;
  }
  return out;
}

/// Counts what the executor reports, and passes it on to the trace.
struct Tee final : engine::ExecutionObserver {
  explicit Tee(engine::ExecutionObserver& next) : next_(next) {}
  void on_start(const parallelism::TaskGraph& graph) override { next_.on_start(graph); }
  void on_compute(int rank, const parallelism::Task& task, Time start, Time end) override {
    // A task without GPU work that took no time (a host sync reached) is
    // not drawn: counted apart.
    ++(task.duration == Time::zero() && end == start ? instant : compute);
    next_.on_compute(rank, task, start, end);
  }
  void on_collective(const parallelism::Task& task, std::int32_t group, const std::vector<int>& ranks,
                     Time start, Time end) override {
    if (task.collective == parallelism::CollectiveKind::SendRecv) ++sendrecv;
    next_.on_collective(task, group, ranks, start, end);
  }
  void on_collective_member(int rank, const parallelism::Task& task, std::int32_t group,
                            const std::vector<int>& ranks, Time start, Time end) override {
    ++member_slices;
    next_.on_collective_member(rank, task, group, ranks, start, end);
  }
  void on_transfer(const collectives::Transfer& t, Time start, Time end) override {
    ++transfers;
    next_.on_transfer(t, start, end);
  }
  void on_host_wait(int rank, const parallelism::Task& task, Time start, Time end) override {
    ++host_waits;
    next_.on_host_wait(rank, task, start, end);
  }
  engine::ExecutionObserver& next_;
  long compute = 0, instant = 0, sendrecv = 0, member_slices = 0, transfers = 0, host_waits = 0;
};

/// scenarios/schedules.yaml (32 A100, tp 2, dp 2, pp 8, 1F1B) cut to 4
/// micro-batches per pipeline, timed by the roofline.
Scenario pipeline_scenario() {
  return load_scenario(std::string(TESSERA_SCENARIO_DIR) + "/schedules.yaml",
                       {{"training.global_batch", "16"}, {"predictor", "roofline"}});
}

struct Traced {
  std::string text;
  long compute = 0, instant = 0, sendrecv = 0, member_slices = 0, transfers = 0, host_waits = 0;
  std::vector<double> flops;  ///< per rank, the executor's (RankResult::flops)
  Time makespan;              ///< the iteration
};

Traced run_traced(const Scenario& s, TraceOptions options) {
  StringTraceSink sink;
  const auto topo = build_topology(s);
  ChromeTraceObserver trace(sink, s.gpus(), {s.plan, s.cluster.gpus_per_node}, std::move(options), &topo);
  Tee tee(trace);
  const Simulation sim = simulate_scenario(s, &tee, nullptr, false);
  trace.finish();
  EXPECT_EQ(static_cast<std::uint64_t>(tee.transfers), sim.result.transfers);
  std::vector<double> flops;
  for (const auto& r : sim.result.ranks) flops.push_back(r.flops.count());
  return {sink.text(),   tee.compute,    tee.instant,      tee.sendrecv,       tee.member_slices,
          tee.transfers, tee.host_waits, std::move(flops), sim.result.makespan};
}

/// Checks every compute and collective slice's args against its name: a
/// "[cK.]mbN.[layerL.]" name's numbers, and only those, as `chunk`,
/// `micro_batch` and `layer`; compute slices carry `flops`, collectives
/// `bytes`. Returns the FLOPs of the compute slices per pid.
std::map<int, double> check_slice_args(const std::string& text) {
  static const std::regex kPlace(R"(^(?:c(\d+)\.)?mb(\d+)\.(?:layer(\d+)\.)?)");
  std::map<int, double> flops;
  const auto root = node_model::parse_json(text, "trace");
  for (const auto& e : root.find("traceEvents")->array()) {
    if (e.find("ph")->string() != "X" || e.find("cat")->string() == "host") continue;
    const std::string name = e.find("name")->string();
    const auto* args = e.find("args");
    EXPECT_NE(args, nullptr) << name;
    if (args == nullptr) continue;
    std::smatch m;
    const bool step = std::regex_search(name, m, kPlace);
    const std::array<const char*, 3> keys{"chunk", "micro_batch", "layer"};
    for (std::size_t k = 0; k < keys.size(); ++k) {
      const auto* v = args->find(keys[k]);
      const bool said = step && m[k + 1].matched;
      EXPECT_EQ(v != nullptr, said) << name << ": " << keys[k];
      if (v != nullptr && said) {
        EXPECT_EQ(v->number(), std::stod(m[k + 1].str())) << name << ": " << keys[k];
      }
    }
    if (e.find("cat")->string() == "compute") {
      const auto* f = args->find("flops");
      EXPECT_TRUE(f != nullptr && f->is_number() && f->number() >= 0) << name;
      if (f != nullptr) flops[static_cast<int>(e.find("pid")->number())] += f->number();
    } else {
      EXPECT_NE(args->find("bytes"), nullptr) << name;
    }
  }
  return flops;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  EXPECT_NE(f, nullptr);
  std::string out;
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  gzclose(f);
  return out;
}

}  // namespace

TEST(ChromeTrace, RecordsEveryEventWithExactTimes) {
  StringTraceSink sink;
  ChromeTraceObserver obs(sink, 2, {}, TraceOptions{{}, {}, true, 16, {}, {}});
  parallelism::Task fwd;
  fwd.name = "layer000.fwd";
  fwd.duration = Time::from_ps(500'001);
  obs.on_compute(1, fwd, Time::from_ps(1'500'000), Time::from_ps(2'000'001));
  parallelism::Task ar;
  ar.name = "grad";
  ar.kind = parallelism::TaskKind::Collective;
  ar.group = 0;
  ar.bytes = Bytes(64);
  obs.on_collective(ar, 0, {0, 1}, Time::from_us(3), Time::from_us(5));
  for (int r : {0, 1}) obs.on_collective_member(r, ar, 0, {0, 1}, Time::from_us(3), Time::from_us(5));
  obs.on_transfer(collectives::Transfer{0, 1, Bytes(32), {}, 0}, Time::from_us(3), Time::from_us(4));
  obs.finish();
  const std::string& j = sink.text();
  EXPECT_NE(
      j.find(
          R"("name":"layer000.fwd","cat":"compute","ph":"X","pid":1,"tid":0,"ts":1.500000,"dur":0.500001)"),
      std::string::npos)
      << j;
  EXPECT_EQ(count(j, R"("cat":"all-reduce")"), 2U);  // one span per member rank
  EXPECT_EQ(count(j, R"("cat":"transfer")"), 2U);    // begin + end
  EXPECT_EQ(count(j, R"("name":"process_name")"), 2U);
  EXPECT_EQ(count(j, R"("name":"thread_name")"), 4U);  // compute on 1, the group on 0 and 1, transfers on 0
  // No layout for 2 ranks (the default plan is 1 x 1 x 1): groups by number.
  EXPECT_EQ(count(j, R"j("comm group 0 (2 ranks, 0..1)")j"), 2U);
  EXPECT_EQ(j.substr(j.size() - 4), "\n]}\n");
  const auto summary = check_trace(j);
  EXPECT_EQ(summary.phases.at("X"), 3);
  EXPECT_EQ(summary.counters.size(), 0U);  // no topology, no link counters
}

// The host time the summary counts is all in the trace: the host track's
// slices (waits and data steps) plus, inside compute slices the host
// launched slower than their kernels ran (the optimizer's many kernels),
// their `host_us` args. default.yaml: 6.870 ms on the track and 11.161 ms
// in args on rank 0 (the optimizer alone 11.019 ms), 18.031 ms in all.
TEST(ChromeTrace, HostTimeInsideComputeSlicesIsInTheirArgs) {
  const Scenario s = load_scenario(std::string(TESSERA_SCENARIO_DIR) + "/default.yaml");
  StringTraceSink sink;
  TraceOptions options;
  options.ranks = {0};
  options.link_counters = 0;
  ChromeTraceObserver trace(sink, s.gpus(), {s.plan, s.cluster.gpus_per_node}, options, nullptr);
  const Simulation sim = simulate_scenario(s, &trace, nullptr, false);
  trace.finish();
  const auto root = node_model::parse_json(sink.text(), "trace");
  double track_us = 0, args_us = 0, optimizer_host_us = 0;
  for (const auto& e : root.find("traceEvents")->array()) {
    if (e.find("ph")->string() != "X" || e.find("pid")->number() != 0) continue;
    const std::string cat = e.find("cat")->string();
    if (cat == "host") track_us += e.find("dur")->number();
    if (cat != "compute") continue;
    // Every compute slice has args (its FLOPs); host time in some.
    ASSERT_NE(e.find("args"), nullptr);
    EXPECT_NE(e.find("args")->find("flops"), nullptr);
    if (e.find("args")->find("host_us") == nullptr) continue;
    const double host = e.find("args")->find("host_us")->number();
    EXPECT_NEAR(e.find("args")->find("kernels_us")->number() + host, e.find("dur")->number(), 1e-3);
    args_us += host;
    if (e.find("name")->string() == "optimizer") optimizer_host_us = host;
  }
  EXPECT_NEAR(track_us + args_us, sim.result.ranks[0].host_wait.us(), 1e-2);
  EXPECT_NEAR(track_us, 6870.0, 1e-3);
  EXPECT_GT(optimizer_host_us, 11000.0);
}

TEST(ChromeTrace, ParsesIndexLists) {
  EXPECT_EQ(parse_index_list("0-3,64,2", "--trace-ranks", 100), (std::vector<int>{0, 1, 2, 3, 64}));
  EXPECT_EQ(parse_index_list("7", "x", 8), (std::vector<int>{7}));
  EXPECT_THROW((void)parse_index_list("8", "x", 8), InputError);
  EXPECT_THROW((void)parse_index_list("3-1", "x", 8), InputError);
  EXPECT_THROW((void)parse_index_list("1,,2", "x", 8), InputError);
  EXPECT_THROW((void)parse_index_list("a", "x", 8), InputError);
  EXPECT_THROW((void)parse_index_list("-1", "x", 8), InputError);
  try {
    (void)parse_index_list("0-7,99", "--trace-ranks", 16);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "--trace-ranks: 99 is out of range (0..15)");
  }
  EXPECT_TRUE(parse_on_off("on", "x"));
  EXPECT_FALSE(parse_on_off("off", "x"));
  EXPECT_THROW((void)parse_on_off("maybe", "x"), InputError);
}

TEST(ChromeTrace, DefaultRanksAreOnePerStageBeyond64) {
  parallelism::ParallelPlan plan;
  plan.tp = 8;
  plan.dp = 8;
  plan.pp = 16;
  const auto r = default_trace_ranks(plan, 1024);
  ASSERT_EQ(r.size(), 16U);
  EXPECT_EQ(r[0], 0);
  EXPECT_EQ(r[1], 64);
  EXPECT_EQ(r[15], 960);
  plan.dp = 1;
  plan.pp = 8;
  EXPECT_EQ(default_trace_ranks(plan, 64).size(), 64U);
}

TEST(ChromeTrace, PipelineRunMatchesTheTraceEventSchema) {
  const Scenario s = pipeline_scenario();
  ASSERT_EQ(s.gpus(), 32);
  const Traced t = run_traced(s, {});
  const TraceSummary sum = check_trace(t.text);
  // Every rank (32 <= 64) plus the links process.
  EXPECT_EQ(sum.pids.size(), 33U);
  EXPECT_EQ(t.host_waits, 60);
  // Zero-length host syncs are not drawn (helper 60: 135 empty `.sync`
  // slices on llama3-70b's compute tracks); this run has some.
  EXPECT_GT(t.instant, 0);
  EXPECT_EQ(sum.phases.at("X"), t.compute + t.member_slices + t.host_waits);
  // 4 pipeline columns (tp x dp) x 4 micro-batches x (7 activations + 7 gradients).
  EXPECT_EQ(t.sendrecv, 224);
  EXPECT_EQ(sum.flows, 224);
  EXPECT_EQ(sum.phases.count("b"), 0U);  // transfers off by default
  // The host model: the 28 ranks after the first stage wait once for their
  // host to launch a pipeline receive, the 4 ranks of the last stage also
  // once per micro-batch (4): each micro-batch's data step drains their GPU
  // first (after the receive is posted, as Megatron receives before
  // get_batch).
  // The first stage's 4 ranks wait once per micro-batch for their host to
  // launch the embedding's tensor-parallel all-reduce (the embedding's
  // launches outlast its kernels: 17.5 us; helper 76: it was bubble). Each
  // data step (first and last stage, 8 ranks x 4 micro-batches) is host
  // work on the same track.
  EXPECT_EQ(sum.categories.at("host"), 28 + 4 * 4 + 4 * 4 + 8 * 4);
  EXPECT_NE(t.text.find(R"("name":"wait for host: mb3.embedding.fwd.tp.all-reduce","cat":"host")"),
            std::string::npos);
  EXPECT_EQ(sum.tracks.at({10, 1}), "host (GPU waits for the host)");
  EXPECT_NE(t.text.find(R"("name":"host work: mb0.data","cat":"host")"), std::string::npos);
  EXPECT_EQ(sum.counters.size(), 16U);
  // Tier by tier: NVLink, host and leaf-spine links all among them.
  std::map<std::string, int> tiers;
  for (const auto& c : sum.counters) ++tiers[c.substr(0, c.find(" link "))];
  EXPECT_EQ(tiers, (std::map<std::string, int>{{"host", 5}, {"leaf-spine", 5}, {"nvlink", 6}}));
  EXPECT_EQ(sum.other.find("transfers")->string(), "off");
  // Tracks by role on rank 0 (tp 0, dp 0, stage 0); its stage-1 peer is rank 4.
  std::set<std::string> rank0;
  for (const auto& [track, name] : sum.tracks) {
    if (track.first == 0) rank0.insert(name);
  }
  EXPECT_EQ(rank0, (std::set<std::string>{"compute", "host (GPU waits for the host)", "tp (2 ranks, 0..1)",
                                          "dp (2 ranks, 0..2 every 2)", "pp-send to stage 1 (rank 4)",
                                          "pp-recv from stage 1 (rank 4)",
                                          "embedding (stages 0 and 7, 2 ranks, 0..28 every 28)"}));
  EXPECT_NE(t.text.find(R"j("name":"rank 5 (node 0, stage 1, dp 0, tp 1)")j"), std::string::npos);
  // Pipeline slices are named by their own side.
  EXPECT_NE(t.text.find(R"("name":"mb0.pp.send_activation","cat":"send-recv","ph":"X","pid":0,)"),
            std::string::npos);
  EXPECT_NE(t.text.find(R"("name":"mb0.pp.recv_activation","cat":"send-recv","ph":"X","pid":4,)"),
            std::string::npos);
  // The first message's flow arrow comes after both its slices (helper
  // 150: written before them, at the same instant, a viewer may bind it to
  // no slice).
  const auto send = t.text.find(R"("name":"mb0.pp.send_activation","cat":"send-recv","ph":"X","pid":0,)");
  const auto recv = t.text.find(R"("name":"mb0.pp.recv_activation","cat":"send-recv","ph":"X","pid":4,)");
  const auto arrow = t.text.find(R"("cat":"pp-flow","ph":"s","id":)");
  ASSERT_NE(arrow, std::string::npos);
  EXPECT_NE(t.text.find(R"("pid":0,)", arrow), std::string::npos);
  EXPECT_LT(t.text.find(R"("pid":0,)", arrow), t.text.find('\n', arrow)) << t.text.substr(arrow, 120);
  EXPECT_GT(arrow, send);
  EXPECT_GT(arrow, recv);
  // A compute task after an op's own collective is named apart: the
  // embedding's lookup, then what follows its tensor-parallel all-reduce.
  EXPECT_NE(t.text.find(R"("name":"mb0.embedding.fwd","cat":"compute")"), std::string::npos);
  EXPECT_NE(t.text.find(R"("name":"mb0.embedding.fwd.2","cat":"compute")"), std::string::npos);
}

// Interleaved: a message from the last stage to the first goes from one
// model chunk to the next; each side's slice is named by its own chunk
// (helper 144: both took one member's name, c0 receiving activations on
// stage 0, whose c0 holds the embedding, and c2 receiving gradients on the
// last stage, whose c2 computes the loss).
TEST(ChromeTrace, InterleavedPipelineSlicesNameTheirOwnChunk) {
  const Scenario s = load_scenario(std::string(TESSERA_SCENARIO_DIR) + "/schedules.yaml",
                                   {{"training.global_batch", "32"},
                                    {"predictor", "roofline"},
                                    {"parallelism.schedule", "interleaved-1f1b"}});
  ASSERT_EQ(s.plan.virtual_stages, 3);
  ASSERT_EQ(s.plan.pp, 8);
  const Traced t = run_traced(s, {});
  const auto slices = [&](const std::string& chunk, const char* what, int pid) {
    long n = 0;
    for (int mb = 0; mb < 8; ++mb) {
      n += static_cast<long>(
          count(t.text, fmt::format(R"("name":"{}.mb{}.pp.{}","cat":"send-recv","ph":"X","pid":{},)", chunk,
                                    mb, what, pid)));
    }
    return n;
  };
  // Stage 0 (rank 0) receives activations for its chunks 1 and 2 and sends
  // their gradients back; stage 7 (rank 28) receives gradients for its
  // chunks 0 and 1 and sends their activations on.
  struct Want {
    const char* what;
    int pid;
    std::array<long, 3> per_chunk;  // slices of chunks c0, c1, c2
  };
  for (const Want& w : {Want{"recv_activation", 0, {0, 8, 8}}, Want{"send_gradient", 0, {0, 8, 8}},
                        Want{"recv_gradient", 28, {8, 8, 0}}, Want{"send_activation", 28, {8, 8, 0}}}) {
    for (std::size_t c = 0; c < 3; ++c) {
      EXPECT_EQ(slices(fmt::format("c{}", c), w.what, w.pid), w.per_chunk[c])
          << w.what << " on rank " << w.pid << ", c" << c;
    }
  }
  // Each slice's args say its chunk, micro-batch and layer.
  (void)check_slice_args(t.text);
  EXPECT_NE(
      t.text.find(R"("name":"c1.mb0.layer008.fwd.tp.all-reduce.2","cat":"all-reduce","ph":"X","pid":0,)"),
      std::string::npos);
}

// Llama 2 70B on a rail-optimized fabric, with a tied embedding and a
// position table (GPT-style) under Megatron-DeepSpeed (whose tied and
// data-parallel reductions the model runs side by side: the embedding's
// all-reduce then meets the data-parallel all-reduce on the first stage's
// host links; Megatron-LM runs them one after the other): transfers that
// share a host link at unequal rates, spread evenly over their lifetimes,
// summed to 130% of the line rate in some bins; the counters are capped at
// it, bytes kept. Whether a bin holds such an overlap depends on where the
// transfers fall in the bins: over three batch sizes, some do.
TEST(ChromeTrace, LinkUtilizationNeverAboveTheLineRate) {
  double busiest = 0.0;
  for (const char* batch : {"24", "32", "40"}) {
    const Scenario s = load_scenario(std::string(TESSERA_SCENARIO_DIR) + "/llama2-70b.yaml",
                                     {{"model.tied_embeddings", "true"},
                                      {"model.learned_positions", "true"},
                                      {"training.framework", "megatron-deepspeed"},
                                      {"training.global_batch", batch}});
    TraceOptions o;
    o.ranks = {0};
    const TraceSummary sum = check_trace(run_traced(s, o).text);
    EXPECT_EQ(sum.counters.size(), 16U) << batch;
    EXPECT_LE(sum.max_utilization, 1.0) << batch;
    busiest = std::max(busiest, sum.max_utilization);
  }
  EXPECT_GE(busiest, 0.99);  // the busiest links do run at line rate
}

// Helper 177: the counters' last bin ran past the iteration (gpt3-175b's
// last sample 1.65 ms after its end), averaged over time after it. They end
// with the iteration, every link back at 0 there.
// default.yaml with ZeRO-1 ends on the parameters' all-gather, over the
// fabric until the last microsecond.
TEST(ChromeTrace, LinkCountersEndWithTheIteration) {
  const Scenario s =
      load_scenario(std::string(TESSERA_SCENARIO_DIR) + "/default.yaml", {{"parallelism.zero_stage", "1"}});
  TraceOptions o;
  o.ranks = {0};
  const Traced t = run_traced(s, o);
  const TraceSummary sum = check_trace(t.text);
  ASSERT_FALSE(sum.counters.empty());
  EXPECT_LE(sum.last_counter_us, t.makespan.us() + 1e-3);
  EXPECT_GT(sum.last_counter_us, t.makespan.us() - 1000.0);  // the fabric busy in the last ms
  for (const auto& [name, last] : sum.last_counter_value) EXPECT_EQ(last, 0.0) << name;
  EXPECT_LE(sum.max_utilization, 1.0);
}

TEST(ChromeTrace, RankFilterKeepsOnlyTheChosenRanks) {
  const Scenario s = pipeline_scenario();
  TraceOptions o;
  o.ranks = {0, 4};
  const Traced t = run_traced(s, o);
  const TraceSummary sum = check_trace(t.text);
  EXPECT_EQ(sum.pids, (std::set<double>{0, 4, 32}));  // + links
  EXPECT_EQ(sum.flows, 8);              // 0 -> 4 activations and 4 -> 0 gradients, 4 micro-batches
  EXPECT_EQ(sum.counters.size(), 16U);  // links carry every rank's traffic
  EXPECT_EQ(sum.other.find("ranks")->string(), "0,4");
}

TEST(ChromeTrace, TransfersOnlyWhenAskedFor) {
  const Scenario s = pipeline_scenario();
  TraceOptions off;
  const TraceSummary a = check_trace(run_traced(s, off).text);
  EXPECT_EQ(a.phases.count("b"), 0U);
  EXPECT_EQ(a.categories.count("transfer"), 0U);
  TraceOptions on;
  on.transfers = true;
  const Traced t = run_traced(s, on);
  const TraceSummary b = check_trace(t.text);
  EXPECT_GT(t.transfers, 1000);
  EXPECT_EQ(b.phases.at("b"), t.transfers);  // every rank traced: every transfer once
  EXPECT_EQ(b.phases.at("e"), t.transfers);
  EXPECT_EQ(b.categories.at("transfer"), 2 * t.transfers);
}

TEST(ChromeTrace, MicroBatchFilterKeepsTheirTasksAndTheRest) {
  const Scenario s = pipeline_scenario();
  TraceOptions o;
  o.micro_batches = {1};
  const TraceSummary sum = check_trace(run_traced(s, o).text);
  int mb1 = 0, other = 0;
  for (const auto& n : sum.slice_names) {
    if (n.rfind("mb1.", 0) == 0) {
      ++mb1;
    } else {
      EXPECT_EQ(n.rfind("mb", 0), std::string::npos) << n;
      ++other;
    }
  }
  EXPECT_GT(mb1, 0);
  EXPECT_GT(other, 0);           // optimizer, gradient reduction
  EXPECT_EQ(sum.flows, 4 * 14);  // one micro-batch of 4 pipeline columns
}

TEST(ChromeTrace, GzipDecompressesToTheSameBytesAndRunsAreIdentical) {
  Scenario s = pipeline_scenario();
  const auto dir =
      std::filesystem::temp_directory_path() / ("tessera_trace_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string plain = (dir / "t.json").string(), gz = (dir / "t.json.gz").string(),
                    gz2 = (dir / "again.json.gz").string(), upper = (dir / "UPPER.JSON.GZ").string();
  for (const auto& path : {plain, gz, gz2, upper}) {
    TraceFile f(path, s, {});
    (void)simulate_scenario(s, f.observer(), nullptr, false);
    f.finish();
  }
  const std::string text = read_file(plain);
  EXPECT_GT(text.size(), 100'000U);
  EXPECT_EQ(gunzip(gz), text);
  EXPECT_EQ(read_file(gz2), read_file(gz));  // no file name or time in the gzip header
  EXPECT_EQ(read_file(upper), read_file(gz));  // .GZ compresses as .gz does
  EXPECT_LT(std::filesystem::file_size(gz) * 5, text.size());
  // Determinism: the same input gives the same bytes.
  EXPECT_EQ(run_traced(s, {}).text, run_traced(s, {}).text);
  // Only the four traces: no temporaries left.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()),
            4);
  std::filesystem::remove_all(dir);
}

TEST(ChromeTrace, UnfinishedTraceLeavesNoFile) {
  Scenario s = pipeline_scenario();
  const auto dir =
      std::filesystem::temp_directory_path() / ("tessera_trace_drop_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    TraceFile f((dir / "t.json.gz").string(), s, {});
    f.observer()->on_compute(0, parallelism::Task{}, Time::zero(), Time::from_us(1));
    // dropped: an error while simulating
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}

TEST(ChromeTrace, ScenarioOutputsKeys) {
  const std::string base = read_scenario_text(std::string(TESSERA_SCENARIO_DIR) + "/schedules.yaml");
  const Scenario s = parse_scenario(
      base + "outputs:\n  trace_ranks: 0-3,8\n  trace_micro_batches: 2\n  trace_transfers: on\n", "s.yaml");
  EXPECT_EQ(s.outputs.trace_ranks, (std::vector<int>{0, 1, 2, 3, 8}));
  EXPECT_EQ(s.outputs.trace_micro_batches, (std::vector<int>{2}));
  EXPECT_TRUE(s.outputs.trace_transfers);
  try {
    (void)parse_scenario(base + "outputs:\n  trace_ranks: 0-40\n", "s.yaml");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(": outputs.trace_ranks: 40 is out of range (0..31)"),
              std::string::npos)
        << e.what();
  }
  // The flag wins over the key, which wins over the default.
  ArgParser p("tessera run");
  p.option("trace-ranks").option("trace-micro-batches").option("trace-transfers");
  p.parse({"--trace-ranks", "5", "--trace-transfers", "off"});
  const TraceOptions o = trace_options(p, s);
  EXPECT_EQ(o.ranks, (std::vector<int>{5}));
  EXPECT_EQ(o.micro_batches, (std::vector<int>{2}));
  EXPECT_FALSE(o.transfers);
}

TEST(ChromeTrace, ExpertParallelTracksAreNamedByRole) {
  // mixtral-ep: tp 1, dp 16, ep 8, pp 2. Rank 0's expert-parallel group is
  // dp 0..7 (ranks 0..7), the ranks holding its experts dp 0 and 8 (ranks 0
  // and 8), its data-parallel group dp 0..15 (ranks 0..15).
  const Scenario s = load_scenario(std::string(TESSERA_SCENARIO_DIR) + "/mixtral-ep.yaml",
                                   {{"predictor", "roofline"}, {"training.global_batch", "16"}});
  const Traced t = run_traced(s, {});
  const TraceSummary sum = check_trace(t.text);
  std::set<std::string> rank0;
  for (const auto& [track, name] : sum.tracks) {
    if (track.first == 0) rank0.insert(name);
  }
  // (and a host track: after its optimizer step's sync, the GPU waits for
  // the host to launch ZeRO-1's parameter all-gathers)
  EXPECT_EQ(rank0,
            (std::set<std::string>{"compute", "ep (8 ranks, 0..7)", "expert dp (2 ranks, 0..8 every 8)",
                                   "dp (16 ranks, 0..15)", "pp-send to stage 1 (rank 16)",
                                   "pp-recv from stage 1 (rank 16)", "host (GPU waits for the host)"}));
  EXPECT_NE(t.text.find(R"("name":"mb0.layer000.fwd.ep.dispatch.all-to-all")"), std::string::npos);
  // A rank's name says which experts it holds (helper 81: no ep in it):
  // rank 19 is dp 3 of stage 1, the same experts as dp 11 (rank 27).
  EXPECT_NE(t.text.find(R"j("name":"rank 19 (node 2, stage 1, dp 3, ep 3, tp 0)")j"), std::string::npos);
  EXPECT_NE(t.text.find(R"j("name":"rank 27 (node 3, stage 1, dp 11, ep 3, tp 0)")j"), std::string::npos);
}

// The collectives a step issues of one kind share a task name (the
// attention's and the MLP's tensor-parallel all-reduce, as `tessera
// collectives` counts them); their slices are numbered apart, the second
// on a rank `.2`, in the order the rank issues them. Compute slices say
// where their names put them and the FLOPs the executor counts.
TEST(ChromeTrace, SlicesOfAStepAreNamedApartAndCarryTheirTask) {
  const Scenario s = pipeline_scenario();
  const Traced t = run_traced(s, {});
  const TraceSummary sum = check_trace(t.text);
  const auto root = node_model::parse_json(t.text, "trace");
  std::map<int, std::map<std::string, int>> names;  // pid -> collective slice name -> slices
  for (const auto& e : root.find("traceEvents")->array()) {
    if (e.find("ph")->string() != "X") continue;
    const std::string cat = e.find("cat")->string();
    if (cat == "compute" || cat == "host") continue;
    ++names[static_cast<int>(e.find("pid")->number())][e.find("name")->string()];
  }
  EXPECT_EQ(names.size(), 32U);
  for (const auto& [pid, n] : names) {
    for (const auto& [name, slices] : n) EXPECT_EQ(slices, 1) << "rank " << pid << ": " << name;
  }
  // A layer's four tensor-parallel all-reduces (tp 2, no sequence
  // parallelism), and the loss's three on the last stage.
  for (const char* name : {"mb1.layer002.fwd.tp.all-reduce", "mb1.layer002.fwd.tp.all-reduce.2",
                           "mb1.layer002.bwd.tp.all-reduce", "mb1.layer002.bwd.tp.all-reduce.2"}) {
    EXPECT_EQ(names[0][name], 1) << name;
  }
  EXPECT_EQ(names[0].count("mb1.layer002.fwd.tp.all-reduce.3"), 0U);
  for (const char* name : {"mb3.lm_head.fwd.tp.loss.all-reduce", "mb3.lm_head.fwd.tp.loss.all-reduce.2",
                           "mb3.lm_head.fwd.tp.loss.all-reduce.3"}) {
    EXPECT_EQ(names[28][name], 1) << name;
  }
  // Args: the place the name says, and the FLOPs: on every rank, its
  // compute slices' add up to the executor's count.
  const std::map<int, double> flops = check_slice_args(t.text);
  ASSERT_EQ(t.flops.size(), 32U);
  for (int r = 0; r < 32; ++r) {
    EXPECT_GT(t.flops[static_cast<std::size_t>(r)], 0.0) << r;
    EXPECT_NEAR(flops.count(r) ? flops.at(r) : 0.0, t.flops[static_cast<std::size_t>(r)],
                1e-9 * t.flops[static_cast<std::size_t>(r)] + 64.0)
        << "rank " << r;
  }
  EXPECT_NE(t.text.find(R"("name":"mb1.layer002.fwd.tp.all-reduce.2","cat":"all-reduce","ph":"X","pid":0,)"),
            std::string::npos);
  EXPECT_NE(t.text.find(R"("args":{"micro_batch":1,"layer":2,"bytes":)"), std::string::npos);
  EXPECT_NE(t.text.find(R"("name":"optimizer","cat":"compute")"), std::string::npos);
  EXPECT_EQ(sum.phases.at("X"), t.compute + t.member_slices + t.host_waits);
}
