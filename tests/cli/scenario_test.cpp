#include "tessera/cli/scenario.hpp"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>

#include "tessera/cli/commands.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/node_model/json.hpp"
#include "tessera/parallelism/plan.hpp"
#include "tessera/study/pipeline.hpp"
#include "tessera/study/routing_check.hpp"

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

/// `text` without the lines that set `keys` (the first line of each).
std::string without(std::string text, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    const auto key = text.find(std::string("  ") + k + ":");
    EXPECT_NE(key, std::string::npos) << k;
    const auto at = text.rfind('\n', key) + 1;  // the whole line
    text.erase(at, text.find('\n', at) + 1 - at);
  }
  return text;
}

/// `o` with a global batch of 128 sequences (default.yaml gives none; with
/// pp > 1 one micro-batch per pipeline is warned about, which tests of
/// other warnings on a pipeline keep out this way).
std::vector<Override> with_batch(std::vector<Override> o) {
  o.push_back({"training.global_batch", "128"});
  return o;
}

std::string error_of(const std::string& text, const std::vector<Override>& overrides = {}) {
  try {
    (void)parse_scenario(text, "s.yaml", overrides);
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
  EXPECT_FALSE(s.plan.bucket_size);  // PyTorch DDP's 25 MB unless under overlap-grad-reduce
  EXPECT_EQ(s.plan.resolved_bucket_size(s.workload), Bytes(25'000'000));
  EXPECT_EQ(s.backend, Backend{"flow"});
}

// The summary names the whole plan: two runs that differ in a plan key
// differ in their Plan or Options line and in the JSON's key of that name.
TEST(Scenario, ReportNamesTheWholePlan) {
  const Scenario s = parse_scenario(default_text(), "default.yaml",
                                    {{"parallelism.pp", "2"},
                                     {"parallelism.dp", "8"},
                                     {"parallelism.schedule", "interleaved-1f1b"},
                                     {"parallelism.virtual_stages", "2"},
                                     {"parallelism.recompute", "selective"},
                                     {"parallelism.zero_stage", "2"},
                                     {"parallelism.grad_sync", "overlapped"},
                                     {"training.global_batch", "128"}});
  const RunReport r = make_report(s, simulate_scenario(s));
  const std::string t = format_text(r);
  // 16 GPUs, pp 2: dp 8, 128 / (8 x 8) = 2 micro-batches of 8 sequences.
  EXPECT_NE(
      t.find("\nPlan           dp=8 tp=1 pp=2, 2 micro-batches of 8 sequences x 1024 tokens, "
             "interleaved-1f1b schedule (virtual_stages 2)\n"
             "Options        dtype bf16, framework megatron, recompute selective, sequence_parallel false, "
             "zero_stage 2, grad_sync overlapped (Megatron on PyTorch DDP: no main-gradient buffer)\n"),
      std::string::npos)
      << t;
  const std::string j = format_json(r);
  EXPECT_NE(
      j.find(R"("schedule": "interleaved-1f1b", "virtual_stages": 2, "micro_batches": 2, "micro_batch": 8, )"
             R"("global_batch": 128, "seq_len": 1024, "dtype": "bf16", "framework": "megatron", )"
             R"("recompute": "selective", "sequence_parallel": false, )"
             R"("zero_stage": 2, "grad_sync": "overlapped", )"),
      std::string::npos)
      << j;
  // As shipped: auto resolved to Megatron's after-backward, no note.
  const Scenario d = parse_scenario(default_text(), "default.yaml", {{"parallelism.grad_sync", "auto"}});
  const std::string dt = format_text(make_report(d, simulate_scenario(d)));
  EXPECT_NE(dt.find("\nOptions        dtype bf16, framework megatron, recompute none, sequence_parallel "
                    "false, zero_stage 0, grad_sync after-backward\n"),
            std::string::npos)
      << dt;
}

// Whole numbers are decimal: yaml-cpp alone reads 010 as octal 8 and 0x40 as
// 64 (YAML 1.1), which silently changed a sizing run's GPUs or batch.
TEST(Scenario, WholeNumbersAreDecimal) {
  const Scenario s = parse_scenario(
      default_text(), "default.yaml",
      {{"cluster.nodes", "010"}, {"parallelism.dp", "auto"}, {"training.global_batch", "01280"}});
  EXPECT_EQ(s.gpus(), 80);
  EXPECT_EQ(s.plan.global_batch, 1280);
  EXPECT_EQ(
      error_of(default_text(), {{"training.global_batch", "0x40"}}),
      "s.yaml (--set training.global_batch): training.global_batch: expected a whole number, got '0x40'");
  EXPECT_EQ(error_of(default_text(), {{"training.global_batch", "99999999999999999999"}}),
            "s.yaml (--set training.global_batch): training.global_batch: must be between 1 and "
            "9223372036854775807, got 99999999999999999999");
}

// model.linear_bias and model.norm: Llama's layer on a GPT preset. default.yaml's
// model (hidden 1280, ffn 5120) loses its biases (column 3 x 1280 + 5120,
// row 2 x 1280) and its norms' biases (2 x 1280) per layer, and the final
// norm's bias (1280).
TEST(Scenario, LinearBiasAndNormKeysChangeTheParameterCount) {
  const Scenario gpt = parse_scenario(default_text(), "default.yaml");
  EXPECT_TRUE(gpt.model.linear_bias);
  EXPECT_FALSE(gpt.model.rms_norm);
  const Scenario llama = parse_scenario(default_text(), "default.yaml",
                                        {{"model.linear_bias", "false"}, {"model.norm", "rmsnorm"}});
  EXPECT_FALSE(llama.model.linear_bias);
  EXPECT_TRUE(llama.model.rms_norm);
  const std::int64_t h = 1280;
  EXPECT_EQ(gpt.model.params_per_layer() - llama.model.params_per_layer(), 3 * h + 4 * h + 2 * h + 2 * h);
  EXPECT_EQ(gpt.model.total_params(1024) - llama.model.total_params(1024), gpt.model.layers * (11 * h) + h);
  EXPECT_EQ(error_of(default_text(), {{"model.norm", "rms"}}),
            "s.yaml (--set model.norm): model.norm: expected layernorm or rmsnorm, got 'rms'");
  // Megatron's spellings: RMSNorm, and its flags as unknown keys said as ours.
  EXPECT_TRUE(parse_scenario(default_text(), "default.yaml", {{"model.norm", "RMSNorm"}}).model.rms_norm);
  EXPECT_NE(error_of(default_text(), {{"model.disable_bias_linear", "true"}})
                .find("model.disable_bias_linear: unknown key, Megatron's --disable-bias-linear is "
                      "'linear_bias: false' (known here:"),
            std::string::npos);
  // An inline GPU's 16-bit peak by its dtype's name (helper 132).
  EXPECT_NE(
      error_of(default_text(), {{"cluster.gpu",
                                 "{name: X, fp32_peak: 60TFLOPS, bf16_peak: 900TFLOPS, memory_bandwidth: "
                                 "3TB/s, sms: 132, l2_cache: 50MB, memory: 80GiB}"},
                                {"cluster.nvlink_bandwidth", "450GB/s"}})
          .find("did you mean 'tensor_peak'?"),
      std::string::npos)
      << error_of(default_text(), {{"cluster.gpu",
                                    "{name: X, fp32_peak: 60TFLOPS, bf16_peak: 900TFLOPS, memory_bandwidth: "
                                    "3TB/s, sms: 132, l2_cache: 50MB, memory: 80GiB}"},
                                   {"cluster.nvlink_bandwidth", "450GB/s"}});
  EXPECT_NE(error_of(default_text(), {{"model.padded_vocab_size", "51200"}})
                .find("model.padded_vocab_size: unknown key, did you mean 'vocab'? (the tokenizer's size: "
                      "Megatron's padded_vocab_size is it padded to a multiple of 128 x tp"),
            std::string::npos)
      << error_of(default_text(), {{"model.padded_vocab_size", "51200"}});
  EXPECT_NE(
      error_of(default_text(), {{"parallelism.overlap_grad_reduce", "true"}})
          .find("unknown key, Megatron's --overlap-grad-reduce is 'grad_sync: overlap-grad-reduce' (known"),
      std::string::npos);
  EXPECT_NE(error_of(default_text(), {{"parallelism.ddp_bucket_size", "40000000"}})
                .find("did you mean 'bucket_size'? (bytes of gradients: Megatron's --ddp-bucket-size counts "
                      "parameters, x 4 for FP32 main gradients)"),
            std::string::npos);
}

// Megatron-Core's --overlap-grad-reduce: the Options line gives the bucket
// (16 ranks: max(40 M, 16 M) FP32 parameters = 160 MB; as given otherwise);
// it overlaps what after-backward leaves exposed; eager is refused. Its
// --overlap-param-gather likewise.
TEST(Scenario, OverlapGradReduceSaysItsBucketAndHidesTheGradientSync) {
  auto options = [](const std::vector<Override>& o) {
    const Scenario s = parse_scenario(default_text(), "default.yaml", o);
    const Simulation sim = simulate_scenario(s);
    const std::string t = format_text(make_report(s, sim));
    const auto at = t.find("\nOptions ");
    return std::pair{t.substr(at + 1, t.find('\n', at + 1) - at - 1), sim.result.makespan};
  };
  const auto [line, overlapped] = options({{"parallelism.grad_sync", "overlap-grad-reduce"}});
  EXPECT_EQ(
      line,
      "Options        dtype bf16, framework megatron, recompute none, sequence_parallel false, zero_stage 0, "
      "grad_sync overlap-grad-reduce (Megatron-Core: main gradients reduced in buckets closed at the first "
      "layer end past 160 MB)");
  const auto [given, unused] =
      options({{"parallelism.grad_sync", "overlap-grad-reduce"}, {"parallelism.bucket_size", "500KB"}});
  EXPECT_NE(given.find("buckets closed at the first layer end past 500 kB)"), std::string::npos) << given;
  const auto [piped, unused_too] = options({{"parallelism.grad_sync", "overlap-grad-reduce"},
                                            {"parallelism.pp", "2"},
                                            {"parallelism.dp", "8"},
                                            {"training.global_batch", "128"}});
  EXPECT_NE(piped.find("past 160 MB on the first stage, one bucket on the others)"), std::string::npos)
      << piped;
  const auto [chunked, unused_three] = options({{"parallelism.grad_sync", "overlap-grad-reduce"},
                                                {"parallelism.pp", "2"},
                                                {"parallelism.dp", "8"},
                                                {"parallelism.virtual_stages", "2"},
                                                {"training.global_batch", "128"}});
  EXPECT_NE(chunked.find("(Megatron-Core: main gradients reduced a chunk's at a time, as the interleaved "
                         "schedule launches them)"),
            std::string::npos)
      << chunked;
  // No data parallelism, no gradient sync to describe.
  const auto [alone, unused_four] = options({{"parallelism.grad_sync", "overlap-grad-reduce"},
                                             {"parallelism.tp", "4"},
                                             {"parallelism.pp", "4"},
                                             {"parallelism.dp", "1"}});
  EXPECT_EQ(alone.find("Megatron-Core"), std::string::npos) << alone;
  const auto [after, after_backward] = options({});
  EXPECT_LT(overlapped, after_backward);
  // --overlap-param-gather with the distributed optimizer: said, and faster
  // than gathering after the step.
  const auto [step_line, gathered_after_step] =
      options({{"parallelism.grad_sync", "overlap-grad-reduce"}, {"parallelism.zero_stage", "1"}});
  const auto [gather_line, gathered_in_forward] = options({{"parallelism.grad_sync", "overlap-grad-reduce"},
                                                           {"parallelism.zero_stage", "1"},
                                                           {"parallelism.overlap_param_gather", "true"}});
  EXPECT_NE(gather_line.find("past 160 MB; parameters gathered in the next forward)"), std::string::npos)
      << gather_line;
  EXPECT_EQ(step_line.find("next forward"), std::string::npos) << step_line;
  EXPECT_LT(gathered_in_forward, gathered_after_step);
  EXPECT_EQ(error_of(default_text(), {{"parallelism.overlap_param_gather", "true"}}),
            "s.yaml (--set parallelism.overlap_param_gather): parallelism.overlap_param_gather: "
            "overlap_param_gather is Megatron-Core's --overlap-param-gather: it needs zero_stage 1 (the "
            "distributed optimizer) and grad_sync overlap-grad-reduce (got zero_stage 0, grad_sync "
            "after-backward)");
  // Megatron-Core's DDP has no ZeRO-2 or 3.
  EXPECT_NE(error_of(default_text(),
                     {{"parallelism.grad_sync", "overlap-grad-reduce"}, {"parallelism.zero_stage", "3"}})
                .find("grad_sync overlap-grad-reduce is Megatron-Core's DDP, whose distributed optimizer is "
                      "zero_stage 1 (got zero_stage 3;"),
            std::string::npos);
  EXPECT_EQ(error_of(default_text(), {{"parallelism.grad_sync", "overlap-grad-reduce"},
                                      {"training.framework", "pytorch-eager"}}),
            "s.yaml (--set parallelism.grad_sync): parallelism.grad_sync: grad_sync overlap-grad-reduce is "
            "Megatron-Core's (FP32 main gradients reduced in buckets) and needs framework megatron (got "
            "pytorch-eager; grad_sync: overlapped is PyTorch DDP's buckets)");
}

// The Scenario line says how oversubscribed the fullest leaf is: host
// bandwidth into it over its up-links', from what the cluster puts on it.
// ns3.mtu: InfiniBand's five MTUs, or for the point-to-point model any
// packet size up to 1 MiB.
TEST(Scenario, Ns3MtuFollowsTheModel) {
  const std::string text = default_text();
  const Scenario p2p =
      parse_scenario(text, "d.yaml", {{"ns3.model", "point-to-point"}, {"ns3.mtu", "64KiB"}});
  EXPECT_EQ(p2p.ns3.mtu, Bytes::kib(64));
  EXPECT_THROW((void)parse_scenario(text, "d.yaml", {{"ns3.mtu", "64KiB"}}), ScenarioError);
  EXPECT_EQ(parse_scenario(text, "d.yaml", {{"ns3.mtu", "1KiB"}}).ns3.mtu, Bytes::kib(1));
}

#ifdef TESSERA_HAVE_NS3
// ns3.header_bytes and ns3.cut_through reach the packet fabric: more header
// bytes per packet, or store-and-forward switches, make small-ns3's
// iteration longer (35.305 ms; 35.374 with a GRH's 70 B, 35.335
// store-and-forward), and the report says what ran.
TEST(Scenario, Ns3HeaderBytesAndCutThroughReachTheFabric) {
  std::ifstream in(std::string(TESSERA_SCENARIO_DIR) + "/small-ns3.yaml");
  std::ostringstream text;
  text << in.rdbuf();
  const Scenario base = parse_scenario(text.str(), "small-ns3.yaml");
  const Scenario grh = parse_scenario(text.str(), "small-ns3.yaml", {{"ns3.header_bytes", "70B"}});
  const Scenario saf = parse_scenario(text.str(), "small-ns3.yaml", {{"ns3.cut_through", "false"}});
  EXPECT_EQ(base.ns3.header_bytes, Bytes(30));
  EXPECT_EQ(grh.ns3.header_bytes, Bytes(70));
  EXPECT_FALSE(saf.ns3.cut_through);
  const Simulation b = simulate_scenario(base);
  const Simulation g = simulate_scenario(grh);
  const Simulation f = simulate_scenario(saf);
  EXPECT_GT(g.result.makespan, b.result.makespan);
  EXPECT_GT(f.result.makespan, b.result.makespan);
  ASSERT_TRUE(g.packet_fabric.has_value());
  EXPECT_EQ(g.packet_fabric->settings.header_bytes, Bytes(70));
  // Wire bytes grow by 40 more header bytes per MTU packet and hop: up to 32
  // packets per segment-hop (a message's last segment holds fewer).
  const std::int64_t more = g.packet_fabric->wire_bytes.count() - b.packet_fabric->wire_bytes.count();
  const auto hops = static_cast<std::int64_t>(b.packet_fabric->packet_hops);
  EXPECT_EQ(more % 40, 0);
  EXPECT_LE(more, std::int64_t{40} * 32 * hops);
  EXPECT_GT(more, std::int64_t{40} * 31 * hops);
  EXPECT_NE(format_text(make_report(saf, f)).find("static routing, store-and-forward\n"), std::string::npos);
  EXPECT_THROW((void)parse_scenario(text.str(), "small-ns3.yaml", {{"ns3.header_bytes", "300B"}}),
               ScenarioError);
}
#endif

// training.micro_batches: micro-batches per data-parallel replica, so the
// global batch follows dp (a weak-scaling sweep over cluster.nodes).
TEST(Scenario, MicroBatchesPerReplicaSetTheGlobalBatch) {
  const std::string text = default_text();  // dp 16, micro_batch 8, no global_batch
  const Scenario s = parse_scenario(text, "d.yaml", {{"training.micro_batches", "4"}});
  EXPECT_EQ(s.plan.global_batch, 4 * 16 * 8);
  EXPECT_EQ(s.plan.micro_batches(s.workload.micro_batch), 4);
  const Scenario one = parse_scenario(
      text, "d.yaml", {{"training.micro_batches", "4"}, {"cluster.nodes", "1"}, {"parallelism.dp", "auto"}});
  EXPECT_EQ(one.plan.global_batch, 4 * 8 * 8);
  // Over a file's global_batch, the one typed on the command line wins.
  const std::string with_gb = replaced(text, "  seq_len: 1024\n", "  seq_len: 1024\n  global_batch: 256\n");
  EXPECT_EQ(parse_scenario(with_gb, "d.yaml", {{"training.micro_batches", "3"}}).plan.global_batch,
            3 * 16 * 8);
  const std::string both =
      replaced(with_gb, "  global_batch: 256\n", "  global_batch: 256\n  micro_batches: 2\n");
  EXPECT_EQ(parse_scenario(both, "d.yaml", {{"training.global_batch", "128"}}).plan.global_batch, 128);
  try {
    (void)parse_scenario(both, "d.yaml");
    ADD_FAILURE() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_NE(
        std::string(e.what()).find(
            "training.micro_batches: training.global_batch and training.micro_batches both set the batch: "
            "give one"),
        std::string::npos)
        << e.what();
  }
}

TEST(Report, ScenarioLineSaysTheLeavesOversubscription) {
  const std::string text = default_text();  // 8 hosts per leaf at 400 Gb/s, 8 spine links at 400 Gb/s
  auto detail = [&](const std::vector<Override>& o) {
    return study::fabric_detail(parse_scenario(text, "d.yaml", o));
  };
  EXPECT_EQ(detail({}), ", 1 node per leaf");
  EXPECT_EQ(detail({{"cluster.fabric.spines", "4"}}), ", 2:1 at the leaves, 1 node per leaf");
  EXPECT_EQ(detail({{"cluster.fabric.spines", "3"}}), ", 2.67:1 at the leaves, 1 node per leaf");
  EXPECT_EQ(detail({{"cluster.fabric.spines", "4"}, {"cluster.fabric.spine_bandwidth", "800Gbps"}}),
            ", 1 node per leaf");
  // A leaf of 32 ports holding all the cluster's 16 HCAs: nothing crosses it.
  EXPECT_EQ(detail({{"cluster.fabric.hosts_per_leaf", "32"}, {"cluster.fabric.spines", "1"}}), "");
  // A fat-tree's and a rail-optimized fabric's leaves: k*r/(r+1) host ports
  // over k/(r+1) up-links (the fat-tree's when its HCAs fill a leaf, a rail
  // leaf's one HCA per node of its group).
  const std::string block = "    type: leaf-spine\n    hosts_per_leaf: 8\n    spines: 8\n";
  const std::string tree =
      replaced(text, block, "    type: fat-tree\n    k: 8\n    tiers: 2\n    oversubscription: 3\n");
  // k = 8 at 3:1: 6 host ports per leaf, a node's 8 HCAs straddle two.
  EXPECT_EQ(study::fabric_detail(parse_scenario(tree, "d.yaml", {})),
            ", 3:1 at the leaves, 0.75 nodes per leaf");
  EXPECT_EQ(study::fabric_detail(parse_scenario(tree, "d.yaml", {{"cluster.fabric.k", "32"}})), "");
  const std::string rail =
      replaced(text, block, "    type: rail-optimized\n    k: 8\n    oversubscription: 3\n");
  // Two nodes on each rail leaf of 6 host ports and 2 up-links: 1:1, not said.
  EXPECT_EQ(study::fabric_detail(parse_scenario(rail, "d.yaml", {})), "");
  EXPECT_EQ(study::fabric_detail(
                parse_scenario(rail, "d.yaml", {{"cluster.nodes", "6"}, {"parallelism.dp", "48"}})),
            ", 3:1 at the leaves");
  // Past one rail group (12 nodes on leaves of 12 host ports at k = 16) its size is said.
  EXPECT_EQ(
      study::fabric_detail(parse_scenario(
          rail, "d.yaml", {{"cluster.nodes", "12"}, {"parallelism.dp", "96"}, {"cluster.fabric.k", "16"}})),
      ", 3:1 at the leaves");
  EXPECT_EQ(
      study::fabric_detail(parse_scenario(
          rail, "d.yaml", {{"cluster.nodes", "13"}, {"parallelism.dp", "104"}, {"cluster.fabric.k", "16"}})),
      ", 3:1 at the leaves, rail groups of 12 nodes");
  const Scenario four = parse_scenario(text, "d.yaml", {{"cluster.fabric.spines", "4"}});
  const std::string report = format_text(make_report(four, simulate_scenario(four)));
  EXPECT_EQ(
      report.substr(0, report.find('\n')),
      "Scenario       default: gpt2-large on 16 x H100-SXM (leaf-spine fabric, 2:1 at the leaves, 1 node per "
      "leaf)");
  EXPECT_NE(format_json(make_report(four, simulate_scenario(four)))
                .find("\"leaf_oversubscription\": 2.000000, \"spine_oversubscription\": 0.000000, "
                      "\"nodes_per_leaf\": 1.000000"),
            std::string::npos);
  // Leaves of 16 HCAs hold two nodes; of 12, one and a half (nodes straddle them).
  EXPECT_EQ(detail({{"cluster.fabric.hosts_per_leaf", "16"},
                    {"cluster.fabric.spines", "16"},
                    {"cluster.nodes", "4"},
                    {"parallelism.dp", "32"}}),
            ", 2 nodes per leaf");
  EXPECT_DOUBLE_EQ(
      study::nodes_per_leaf(parse_scenario(text, "d.yaml", {{"cluster.fabric.hosts_per_leaf", "12"}})), 1.5);
}

// A 3-tier fat-tree's spines: k/2 leaf links over k/2 core links, said
// where the cluster spans pods and the core links are slower (helper 108:
// only the leaves were ever reported). k = 8: 4 leaves of 4 hosts per pod,
// 16 HCAs; the default's 16 GPUs fill one pod, 32 span two.
TEST(Report, ScenarioLineSaysTheSpinesOversubscription) {
  const std::string block = "    type: leaf-spine\n    hosts_per_leaf: 8\n    spines: 8\n";
  const std::string tree = replaced(default_text(), block,
                                    "    type: fat-tree\n    k: 8\n    tiers: 3\n    core_bandwidth: 100Gbps\n");
  auto spines = [&](const std::vector<Override>& o) {
    return study::spine_oversubscription(parse_scenario(tree, "d.yaml", o));
  };
  EXPECT_EQ(spines({}), 0.0);  // one pod: nothing crosses the cores
  const std::vector<Override> two_pods{{"cluster.nodes", "4"}, {"parallelism.dp", "32"}};
  EXPECT_DOUBLE_EQ(spines(two_pods), 4.0);  // 400 Gb/s leaf links over 100 Gb/s core links
  const Scenario s = parse_scenario(tree, "d.yaml", two_pods);
  EXPECT_EQ(study::fabric_detail(s), ", 4:1 at the spines, a node across 2 leaves");
  EXPECT_NE(format_json(make_report(s, simulate_scenario(s))).find("\"spine_oversubscription\": 4.000000"),
            std::string::npos);
  std::vector<Override> fast = two_pods;
  fast.push_back({"cluster.fabric.core_bandwidth", "400Gbps"});
  EXPECT_DOUBLE_EQ(spines(fast), 1.0);
  EXPECT_EQ(study::fabric_detail(parse_scenario(tree, "d.yaml", fast)), ", a node across 2 leaves");
}

// A stage that fits with less than 5% of its GPU's memory left is warned
// about (the memory model leaves fragmentation and NCCL buffers out), the
// fullest named; one over capacity is OOM, not "tight".
// Throughput, one definition for run and the jobs' reports: an iteration's
// sequences x seq_len over its time. default.yaml: dp 16 x micro-batch 8 =
// 128 sequences of 1024 tokens, 131,072 tokens; in 0.5 s, 262,144 tokens/s;
// with a global batch of 256 (2 micro-batches per replica) twice that.
// The breakdown's four shares, rounded together: 35.25 / 7.75 / 31.25 /
// 25.75%, each rounded up alone, would print 100.2%; by largest remainder
// (ties to the earlier part) 35.3 + 7.8 + 31.2 + 25.7 = 100.0.
TEST(Report, TheBreakdownsSharesAddUpToAHundred) {
  const auto ms = [](double v) { return Time::from_seconds(v * 1e-3); };
  const study::IterationBreakdown b{ms(1000), ms(352.5), ms(77.5), ms(312.5), ms(257.5)};
  EXPECT_EQ(b.tenths_of_percent(), (std::array<int, 4>{353, 78, 312, 257}));
  // 1/3 each of three parts: 333 + 333 + 334 (the remainders equal: the earliest first).
  const study::IterationBreakdown thirds{ms(3), ms(1), ms(1), ms(1), ms(0)};
  EXPECT_EQ(thirds.tenths_of_percent(), (std::array<int, 4>{334, 333, 333, 0}));
  // Parts short of the iteration keep their own rounding (no tenth made up).
  const study::IterationBreakdown part{ms(1000), ms(500), ms(0), ms(0), ms(0)};
  EXPECT_EQ(part.tenths_of_percent(), (std::array<int, 4>{500, 0, 0, 0}));
  EXPECT_EQ((study::IterationBreakdown{}.tenths_of_percent()), (std::array<int, 4>{0, 0, 0, 0}));
}

TEST(Report, TokensPerSecondIsTheIterationsTokensOverItsTime) {
  const Scenario d = parse_scenario(default_text(), "d.yaml");
  EXPECT_DOUBLE_EQ(study::tokens_per_second(d, Time::from_ms(500)), 262'144.0);
  const Scenario g = parse_scenario(default_text(), "d.yaml", {{"training.global_batch", "256"}});
  EXPECT_DOUBLE_EQ(study::tokens_per_second(g, Time::from_ms(500)), 524'288.0);
  EXPECT_DOUBLE_EQ(study::tokens_per_second(d, Time::zero()), 0.0);
  const RunReport rep = make_report(d, simulate_scenario(d));
  EXPECT_DOUBLE_EQ(rep.tokens_per_second, 131'072.0 / rep.iteration_time.seconds());
}

TEST(Report, TrainingRunIsTheTokensAtTheThroughput) {
  // 1e12 tokens at 1e6 tokens/s: 1e6 s = 11.574 days; 8 GPUs that long are
  // 2,222.2 GPU-hours; at 2 per GPU-hour 4,444.4.
  const auto r = study::training_run(1e12, 1e6, 8, 2.0);
  ASSERT_TRUE(r.has_value());
  EXPECT_DOUBLE_EQ(r->seconds, 1e6);
  EXPECT_DOUBLE_EQ(r->days(), 1e6 / 86400);
  EXPECT_DOUBLE_EQ(r->gpu_hours, 8e6 / 3600);
  ASSERT_TRUE(r->cost.has_value());
  EXPECT_DOUBLE_EQ(*r->cost, 16e6 / 3600);
  EXPECT_EQ(
      training_run_text(*r, 2.0),
      "1T tokens in 11.6 days at this throughput: 2,222 GPU-hours, cost 4,444 at 2 per GPU-hour (steady "
      "state only: no warm-up, evaluation, checkpoints or failures)");
  EXPECT_EQ(training_run_json(*r),
            R"({"tokens": 1000000000000, "time_s": 1000000.000, "days": 11.574074, "gpu_hours": 2222.222, )"
            R"("cost": 4444.444})");
  // No price: no cost; no tokens or no throughput: no run.
  EXPECT_FALSE(study::training_run(1e12, 1e6, 8, std::nullopt)->cost.has_value());
  EXPECT_EQ(
      training_run_json(*study::training_run(3e11, 1e6, 8, std::nullopt)),
      R"({"tokens": 300000000000, "time_s": 300000.000, "days": 3.472222, "gpu_hours": 666.667, "cost": null})");
  EXPECT_FALSE(study::training_run(0, 1e6, 8, 2.0).has_value());
  EXPECT_FALSE(study::training_run(1e12, 0, 8, 2.0).has_value());
  EXPECT_EQ(count_text(1.4e12), "1.4T");
  EXPECT_EQ(count_text(300e9), "300B");
  EXPECT_EQ(count_text(2.5e6), "2.5M");
  EXPECT_EQ(count_text(999), "999");
  // The largest count training.tokens takes (1e18) in whole trillions, not 1e+06T.
  EXPECT_EQ(count_text(1e18), "1000000T");
  EXPECT_EQ(count_text(12345e12), "12345T");
}

TEST(Report, TrainingRunFollowsTheScenariosTokensAndPrice) {
  // run with training.tokens and a price: the Training run line and JSON
  // object are the forecast's throughput's; without them, neither.
  const std::string yaml = std::string(TESSERA_SCENARIO_DIR) + "/default.yaml";
  std::ostringstream text, json, plain;
  ASSERT_EQ(cmd_run({yaml, "--set", "training.tokens=300B", "--set", "cluster.price_per_gpu_hour=2.5"}, text),
            0);
  ASSERT_EQ(
      cmd_run({yaml, "--set", "training.tokens=300B", "--set", "cluster.price_per_gpu_hour=2.5", "--json"},
              json),
      0);
  ASSERT_EQ(cmd_run({yaml, "--json"}, plain), 0);
  const node_model::JsonValue j = node_model::parse_json(json.str(), "run --json");
  const double tps = j.find("tokens_per_s")->number();
  const node_model::JsonValue* run = j.find("training_run");
  ASSERT_NE(run, nullptr);
  EXPECT_DOUBLE_EQ(run->find("tokens")->number(), 3e11);
  EXPECT_NEAR(run->find("time_s")->number(), 3e11 / tps, 1e-3);
  EXPECT_NEAR(run->find("gpu_hours")->number(), 16 * 3e11 / tps / 3600, 1e-3);
  EXPECT_NEAR(run->find("cost")->number(), 2.5 * 16 * 3e11 / tps / 3600, 1e-2);
  EXPECT_NE(text.str().find(fmt::format("\nTraining run   300B tokens in {:.1f} days at this throughput: ",
                                        3e11 / tps / 86400)),
            std::string::npos)
      << text.str();
  EXPECT_NE(text.str().find(" at 2.5 per GPU-hour (steady state only"), std::string::npos) << text.str();
  EXPECT_EQ(plain.str().find("training_run"), std::string::npos);
  // A plan out of memory trains nothing: no days or cost (helper 58: its
  // run came out cheaper than the plans that fit).
  std::ostringstream oom;
  EXPECT_EQ(cmd_run({yaml, "--set", "training.tokens=300B", "--set", "training.micro_batch=32", "--allow-oom",
                     "--json"},
                    oom),
            0);
  EXPECT_NE(oom.str().find("\"oom\": true"), std::string::npos);
  EXPECT_EQ(oom.str().find("training_run"), std::string::npos);
}

TEST(Report, EagerHostLineSaysWhereTheLaunchCostIs) {
  // pytorch-eager has no host model by default: its launch floors are in
  // the kernels' times, which the host line says (a 0 read as a free host).
  const std::string yaml = std::string(TESSERA_SCENARIO_DIR) + "/default.yaml";
  std::ostringstream eager, megatron, eager_host;
  ASSERT_EQ(cmd_run({yaml, "--set", "training.framework=pytorch-eager"}, eager), 0);
  ASSERT_EQ(cmd_run({yaml}, megatron), 0);
  ASSERT_EQ(
      cmd_run({yaml, "--set", "training.framework=pytorch-eager", "--set", "calibration.host_launch=30us"},
              eager_host),
      0);
  const std::string note = "(pytorch-eager: each kernel's launch floor is in compute";
  EXPECT_NE(eager.str().find("\n  host                0.000 ms    0.0%  " + note), std::string::npos)
      << eager.str();
  EXPECT_EQ(megatron.str().find(note), std::string::npos) << megatron.str();
  EXPECT_EQ(eager_host.str().find(note), std::string::npos) << eager_host.str();
}

TEST(Report, TightMemoryIsWarned) {
  auto stage = [](int i, double gib, bool oom = false) {
    StageMemory m;
    m.stage = i;
    m.total = Bytes(static_cast<std::int64_t>(gib * 1024 * 1024 * 1024));
    m.capacity = Bytes::gib(80);
    m.oom = oom;
    return m;
  };
  EXPECT_EQ(tight_memory_warning({stage(0, 75.9), stage(1, 60)}), "");  // 94.9%
  // A plan with a stage out of memory does not fit: no "may not fit" about
  // another (helper 80: compare-schedules said both of one plan).
  EXPECT_EQ(tight_memory_warning({stage(0, 76.0), stage(1, 79.9), stage(2, 90, true)}), "");
  EXPECT_EQ(tight_memory_warning({stage(0, 76.0), stage(1, 79.9), stage(2, 60)}),
            "memory: stage 1 needs 79.9 of 80.0 GiB (100%), and the memory model's workspace (1 GiB of "
            "CUDA context, cuBLAS and allocator slack, plus a recomputed layer's activations or all-to-all "
            "buffers where the plan has them) counts no fragmentation or NCCL's own buffers: "
            "a plan this full may not fit "
            "(tessera search --memory-headroom SIZE keeps plans that leave SIZE free)");
  EXPECT_NE(tight_memory_warning({stage(0, 76.0)}).find("stage 0 needs 76.0 of 80.0 GiB (95%)"),
            std::string::npos);
}

// With more than 4 stages the summary gives the memory range and the
// fullest stage's split (weights, gradients, optimizer, activations).
TEST(Report, ManyStagesShowTheFullestStagesSplit) {
  const Scenario s = parse_scenario(default_text(), "default.yaml",
                                    {{"parallelism.pp", "6"},
                                     {"parallelism.dp", "auto"},
                                     {"cluster.nodes", "3"},
                                     {"training.global_batch", "64"}});
  const RunReport r = make_report(s, simulate_scenario(s));
  const std::string t = format_text(r);
  ASSERT_EQ(r.memory.size(), 6U);
  const auto fullest =
      std::max_element(r.memory.begin(), r.memory.end(),
                       [](const StageMemory& a, const StageMemory& b) { return a.total < b.total; });
  EXPECT_NE(t.find(fmt::format("\n  stage {}: weights {:.1f}, gradients {:.1f} (fp32), optimizer {:.1f}, "
                               "activations {:.1f}, workspace 1.0 GiB\n",
                               fullest->stage, fullest->weights.in_gib(), fullest->gradients.in_gib(),
                               fullest->optimizer_states.in_gib(), fullest->activations.in_gib())),
            std::string::npos)
      << t;
}

// Keys as other tools name them (Megatron's flags, Hugging Face configs) are
// suggested as ours, also when they stand for required keys.
TEST(Scenario, OtherToolsKeyNamesAreSuggestedAsOurs) {
  const std::string text = default_text();
  // An unknown key: its alias before any spelling neighbour.
  EXPECT_EQ(error_of(replaced(text, "  dp: 16\n", "  dp: 16\n  expert_parallel: 1\n")).substr(0, 73),
            "s.yaml:30:3: parallelism.expert_parallel: unknown key, did you mean 'ep'?");
  // A required key given under another tool's name.
  const std::string ft = replaced(text, "    type: leaf-spine\n    hosts_per_leaf: 8\n    spines: 8\n",
                                  "    type: fat-tree\n    radix: 16\n    tiers: 2\n");
  EXPECT_EQ(error_of(ft),
            "s.yaml:17:5: cluster.fabric.radix: unknown key, did you mean 'k'? (cluster.fabric.k is "
            "required)");
  // Two required keys, each under its Hugging Face name.
  const std::string hf =
      replaced(text, "  preset: gpt2-large\n",
               "  num_hidden_layers: 4\n  hidden_size: 1280\n  heads: 20\n  vocab: 1000\n");
  // Both named in one error (a user pasting a config's names fixes the
  // section in one go).
  EXPECT_EQ(error_of(hf).substr(0, 139),
            "s.yaml:22:3: model.num_hidden_layers: unknown key, did you mean 'layers'?; also unknown here: "
            "hidden_size (line 23, did you mean 'hidden'?)");
  // Every unknown key of a section in one error (the first where it stands),
  // whichever order they come in beside a missing required key.
  const std::string three = replaced(
      text, "  preset: gpt2-large\n",
      "  layers: 4\n  hidden: 1280\n  heads: 20\n  num_key_value_heads: 4\n  intermediate_size: 5120\n"
      "  vocab_size: 1000\n");
  EXPECT_EQ(
      error_of(three).substr(0, 198),
      "s.yaml:25:3: model.num_key_value_heads: unknown key, did you mean 'kv_heads'?; also unknown here: "
      "intermediate_size (line 26, did you mean 'ffn_hidden'?), vocab_size (line 27, did you mean 'vocab'?)");
  // A mixture-of-experts key one level up, as Megatron's flag or our name:
  // the key under model.moe.
  const std::string moe =
      replaced(text, "  preset: gpt2-large\n", "  preset: gpt2-large\n  num_experts: 8\n  top_k: 2\n");
  EXPECT_NE(
      error_of(moe).find("model.num_experts: unknown key, did you mean 'moe.experts'?; also unknown here: "
                         "top_k (line "),
      std::string::npos)
      << error_of(moe);
  EXPECT_NE(error_of(moe).find(", did you mean 'moe.top_k'?)"), std::string::npos) << error_of(moe);
  // A moe section without experts on a dense model: said to be dense
  // (helper 109: "model.moe.experts: missing required key" for an imbalance).
  EXPECT_NE(
      error_of(replaced(text, "  preset: gpt2-large\n", "  preset: gpt2-large\n  moe:\n    imbalance: 1.5\n"))
          .find("model.moe.experts: missing: the model 'gpt2-large' is dense, and a moe section makes it a "
                "mixture of experts, which needs experts (and top_k, 1 by default)"),
      std::string::npos);
  // DeepSeek's routed experts are `experts`, not `shared_experts` (helper 99:
  // the spelling neighbour was suggested), one level up and in `moe`; the
  // capacity factor under Megatron's name.
  EXPECT_EQ(
      error_of(replaced(text, "  preset: gpt2-large\n", "  preset: gpt2-large\n  n_routed_experts: 8\n"))
          .substr(0, 77),
      "s.yaml:23:3: model.n_routed_experts: unknown key, did you mean 'moe.experts'?");
  const std::string in_moe = replaced(text, "  preset: gpt2-large\n",
                                      "  preset: gpt2-large\n  moe:\n    experts: 8\n    routed_experts: 8\n"
                                      "    moe_expert_capacity_factor: 1.25\n");
  EXPECT_EQ(error_of(in_moe).substr(0, 165),
            "s.yaml:25:5: model.moe.routed_experts: unknown key, did you mean 'experts'?; also unknown here: "
            "moe_expert_capacity_factor (line 26, did you mean 'capacity_factor'?)");
  // Megatron's expert tensor parallelism: said to be not modelled.
  EXPECT_NE(error_of(replaced(text, "  dp: 16\n", "  dp: 16\n  expert_tensor_parallel_size: 1\n"))
                .find("parallelism.expert_tensor_parallel_size: unknown key, Megatron's "
                      "--expert-tensor-parallel-size is not modelled: the experts are split over 'tp' as the "
                      "layers are (Megatron's default)"),
            std::string::npos);
}

// A plan's key written under `training` (or `model`), a batch key under
// `parallelism`: the section it belongs to (helper 99: training.ep had no
// suggestion).
TEST(Scenario, KeysInTheWrongSectionNameTheirSection) {
  const std::string text = default_text();
  EXPECT_EQ(error_of(replaced(text, "  dtype: bf16\n", "  dtype: bf16\n  ep: 2\n")).substr(0, 69),
            "s.yaml:27:3: training.ep: unknown key, did you mean 'parallelism.ep'?");
  EXPECT_EQ(error_of(replaced(text, "  dtype: bf16\n", "  dtype: bf16\n  tensor_model_parallel_size: 2\n"))
                .substr(0, 93),
            "s.yaml:27:3: training.tensor_model_parallel_size: unknown key, did you mean 'parallelism.tp'?");
  EXPECT_EQ(error_of(replaced(text, "  preset: gpt2-large\n", "  preset: gpt2-large\n  zero_stage: 1\n"))
                .substr(0, 82),
            "s.yaml:23:3: model.zero_stage: unknown key, did you mean 'parallelism.zero_stage'?");
  EXPECT_EQ(error_of(replaced(text, "  dp: 16\n", "  dp: 16\n  micro_batch: 2\n")).substr(0, 87),
            "s.yaml:30:3: parallelism.micro_batch: unknown key, did you mean 'training.micro_batch'?");
}

// Megatron-LM's flags written as keys: what to write instead, in the error
// of the section (several at once), also where they stand for a missing
// required key; a flag we do not model is said to be so.
// A missing key of a few values names them (helper 83: `tiers` did not say
// 2, 3 or auto).
TEST(Scenario, MissingKeysOfAFewValuesNameThem) {
  const std::string text = default_text();
  EXPECT_NE(error_of(replaced(text, "  dtype: bf16\n", ""))
                .find("training.dtype: missing required key (fp32, tf32, "
                      "fp16, bf16 or fp8)"),
            std::string::npos)
      << error_of(replaced(text, "  dtype: bf16\n", ""));
}

// `tiers` is optional on both trees and `auto` by default (helper 173: a
// fat-tree required it, a rail-optimized fabric took 2): the fewest tiers
// of these switches that hold the HCAs, named in the Scenario line only
// where that is 3; 2 or 3 written are built as written.
TEST(Scenario, TreeTiersDefaultToAuto) {
  const std::string block = "    type: leaf-spine\n    hosts_per_leaf: 8\n    spines: 8\n";
  const std::string tree = replaced(default_text(), block, "    type: fat-tree\n    k: 8\n");
  auto at = [&](const std::string& text, int nodes) {
    return parse_scenario(
        text, "s.yaml",
        {Override{"cluster.nodes", std::to_string(nodes)}, Override{"parallelism.dp", "auto"}});
  };
  const Scenario two = at(tree, 4);
  EXPECT_TRUE(two.fabric_tiers_auto);
  EXPECT_TRUE(two.fabric_tiers_default);
  EXPECT_EQ(two.fat_tree.tiers, 2);
  EXPECT_TRUE(two.warnings.empty());
  EXPECT_EQ(study::fabric_detail(two), ", a node across 2 leaves");
  const Scenario three = at(tree, 5);
  EXPECT_EQ(three.fat_tree.tiers, 3);
  EXPECT_EQ(three.fat_tree.spine_core.bandwidth, parse_bandwidth("400Gbps"));  // the spine links'
  EXPECT_EQ(study::fabric_detail(three), ", 3 tiers, a node across 2 leaves");
  EXPECT_NE(error_of(tree, {{"cluster.nodes", "17"}, {"parallelism.dp", "auto"}})
                .find("a k=8 3-tier fat-tree (the most tiers: auto, the default, builds) attaches 128 HCAs"),
            std::string::npos)
      << error_of(tree, {{"cluster.nodes", "17"}, {"parallelism.dp", "auto"}});
  EXPECT_EQ(
      at(replaced(tree, "k: 8\n", "k: 8\n    tiers: 3\n    core_bandwidth: 400Gbps\n"), 4).fat_tree.tiers, 3);
  // tiers: 3 written takes the spine links' bandwidth for the cores, as
  // auto's third tier does (helper 176: it was a missing key there).
  const Scenario written3 = at(replaced(tree, "k: 8\n", "k: 8\n    tiers: 3\n"), 4);
  EXPECT_EQ(written3.fat_tree.tiers, 3);
  EXPECT_EQ(written3.fat_tree.spine_core.bandwidth, written3.fat_tree.leaf_spine.bandwidth);
  // A value neither a number nor auto says what it may be.
  EXPECT_EQ(
      error_of(tree, {{"cluster.fabric.tiers", "Auto"}}),
      "s.yaml (--set cluster.fabric.tiers): cluster.fabric.tiers: a fat-tree has 2 or 3 tiers, or tiers: "
      "auto (got 'Auto')");
  const std::string rail = replaced(default_text(), block, "    type: rail-optimized\n    k: 8\n");
  EXPECT_EQ(at(rail, 4).rail.tiers, 2);
  EXPECT_EQ(at(rail, 5).rail.tiers, 3);
  EXPECT_EQ(study::fabric_detail(at(rail, 5)), ", 3 tiers, rail groups of 4 nodes");
}

TEST(Scenario, MegatronFlagsAreSaidAsOurKeys) {
  const std::string text = default_text();
  const std::string flags =
      replaced(text, "  seq_len: 1024\n  dtype: bf16\n", "  seq_length: 1024\n  bf16: true\n");
  ASSERT_NE(flags, text);
  EXPECT_NE(
      error_of(flags).find("training: missing required keys: seq_len, dtype (fp32, tf32, fp16, bf16 or fp8) "
                           "(seq_length (line 25): did you mean 'seq_len'?; bf16 (line 26): Megatron's "
                           "--bf16 is 'dtype: bf16')"),
      std::string::npos)
      << error_of(flags);
  // So is Megatron's FP8 flag (helper 125: "missing required key" alone).
  for (const char* key : {"fp8", "fp8_format"}) {
    const std::string fp8 = replaced(text, "  dtype: bf16\n", fmt::format("  {}: hybrid\n", key));
    EXPECT_NE(error_of(fp8).find(fmt::format(
                  "{} (line 26): Megatron's --fp8-format hybrid (Transformer Engine's FP8 training) is "
                  "'dtype: fp8'",
                  key)),
              std::string::npos)
        << error_of(fp8);
  }
  // Context parallelism, however it is spelled, is said not to be modelled
  // (helper 83: `cp` was "did you mean 'dp', 'ep', 'pp' or 'tp'?").
  for (const char* key :
       {"parallelism.cp", "parallelism.context_parallel", "parallelism.context_parallel_size"}) {
    EXPECT_NE(
        error_of(text, {{key, "2"}})
            .find("unknown key, context parallelism (Megatron's --context-parallel-size) is not modelled"),
        std::string::npos)
        << key;
  }
  // clip_grad is grad_clipping (not its spelling neighbour zero_grad).
  const std::string clip =
      replaced(text, "  dtype: bf16\n", "  dtype: bf16\n  clip_grad: 1.0\n  use_flash_attn: true\n");
  EXPECT_NE(
      error_of(clip).find("training.clip_grad: unknown key, Megatron's --clip-grad is 'grad_clipping: true' "
                          "(the norm's value costs nothing); also unknown here: use_flash_attn (line "),
      std::string::npos)
      << error_of(clip);
  // The flag's value counts: --clip-grad 0 is no clipping (helper 52).
  const std::string no_clip = replaced(text, "  dtype: bf16\n", "  dtype: bf16\n  clip_grad: 0.0\n");
  EXPECT_NE(error_of(no_clip).find("training.clip_grad: unknown key, Megatron's --clip-grad 0 is "
                                   "'grad_clipping: false'"),
            std::string::npos)
      << error_of(no_clip);
  // Layers per chunk is not chunks per rank.
  const std::string chunks =
      replaced(text, "  dp: 16\n",
               "  dp: 16\n  num_layers_per_virtual_pipeline_stage: 3\n  recompute_num_layers: 1\n");
  EXPECT_NE(
      error_of(chunks).find("parallelism.num_layers_per_virtual_pipeline_stage: unknown key, Megatron's "
                            "--num-layers-per-virtual-pipeline-stage 3 counts layers per model chunk; ours "
                            "counts chunks per rank: 'virtual_stages: layers / (pp x 3)'; also unknown here: "
                            "recompute_num_layers (line 31, Megatron's --recompute-method / "
                            "--recompute-num-layers (some layers only) are not modelled"),
      std::string::npos)
      << error_of(chunks);
  // A value that is no count keeps the formula's N.
  EXPECT_NE(error_of(replaced(chunks, "stage: 3\n", "stage: auto\n"))
                .find("--num-layers-per-virtual-pipeline-stage N counts layers per model chunk"),
            std::string::npos)
      << error_of(replaced(chunks, "stage: 3\n", "stage: auto\n"));
  const std::string model =
      replaced(text, "  preset: gpt2-large\n",
               "  preset: gpt2-large\n  swiglu: true\n  untie_embeddings_and_output_weights: true\n"
               "  position_embedding_type: rope\n");
  EXPECT_NE(error_of(model).find(
                "model.swiglu: unknown key, Megatron's --swiglu is 'gated_mlp: true' (without a preset and "
                "ffn_hidden, its width is Megatron's: 4 x hidden x 2/3, rounded down to a multiple of 64); "
                "also unknown "
                "here: untie_embeddings_and_output_weights (line 24, Megatron's "
                "--untie-embeddings-and-output-weights is 'tied_embeddings: false'), "
                "position_embedding_type (line 25, Megatron's --position-embedding-type rope is "
                "'learned_positions: false')"),
            std::string::npos)
      << error_of(model);
}

// Values no hardware has, most likely unit slips, are warned about; a
// device JSON given as the scenario's GPU is an error saying what to write.
TEST(Scenario, LikelyUnitSlipsAreWarnedAbout) {
  auto warnings = [](const std::vector<Override>& o) {
    return parse_scenario(default_text(), "d.yaml", o).warnings;
  };
  EXPECT_EQ(
      warnings({{"cluster.nvlink_bandwidth", "900Gbps"}}),
      std::vector<std::string>{"cluster.nvlink_bandwidth = 112.5GB/s is 0.25x H100-SXM's NVLink, 450GB/s per "
                               "GPU and direction (bits for bytes, or both directions for one?)"});
  EXPECT_EQ(warnings({{"cluster.nvlink_bandwidth", "900GB/s"}}).size(), 1U);
  EXPECT_TRUE(warnings({{"cluster.nvlink_bandwidth", "225GB/s"}}).empty());  // half: a study, not a slip
  // Against the GPU set beside it on the command line, not the file's.
  EXPECT_EQ(
      warnings({{"cluster.gpu", "A100-80GB"}, {"cluster.nvlink_bandwidth", "600GB/s"}}),
      std::vector<std::string>{"cluster.nvlink_bandwidth = 600GB/s is 2x A100-80GB's NVLink, 300GB/s per "
                               "GPU and direction (bits for bytes, or both directions for one?)"});
  EXPECT_TRUE(warnings({{"cluster.gpu", "A100-80GB"}, {"cluster.nvlink_bandwidth", "300GB/s"}}).empty());
  EXPECT_EQ(warnings({{"cluster.nic_latency", "5ms"}}),
            std::vector<std::string>{
                "cluster.nic_latency = 5000 us: a link's latency is a few microseconds at most "
                "(a unit slip, ms for us?)"});
  EXPECT_TRUE(warnings({{"cluster.nic_latency", "5us"}}).empty());
  EXPECT_EQ(warnings({{"cluster.fabric.spine_latency", "0.6ms"}}),
            std::vector<std::string>{
                "cluster.fabric.spine_latency = 600 us: a link's latency is a few microseconds "
                "at most (a unit slip, ms for us?)"});
  EXPECT_EQ(
      warnings({{"cluster.nic_bandwidth", "400GB/s"}}),
      std::vector<std::string>{"cluster.nic_bandwidth = 3200 Gb/s: one HCA port runs at 800 Gb/s at most "
                               "today (bytes for bits, GB/s for Gbps?)"});
  EXPECT_TRUE(warnings({{"cluster.nic_bandwidth", "800Gbps"}}).empty());
  // HDR's 200 Gb/s written in bytes (helper 78: 1600 Gb/s was not warned about).
  EXPECT_EQ(
      warnings({{"cluster.nic_bandwidth", "200GB/s"}}),
      std::vector<std::string>{"cluster.nic_bandwidth = 1600 Gb/s: one HCA port runs at 800 Gb/s at most "
                               "today (bytes for bits, GB/s for Gbps?)"});
  // Megabits for gigabits (helper 86: 400Mbps ran silently).
  EXPECT_EQ(warnings({{"cluster.nic_bandwidth", "400Mbps"}}),
            std::vector<std::string>{"cluster.nic_bandwidth = 0.4 Gb/s: a GPU cluster's HCA port runs at 10 "
                                     "Gb/s or more (Mbps for Gbps?)"});
  EXPECT_TRUE(warnings({{"cluster.nic_bandwidth", "10Gbps"}}).empty());
  // One node: the NIC carries nothing (a node's GPUs talk over NVLink).
  EXPECT_TRUE(
      warnings({{"cluster.nic_bandwidth", "400Mbps"}, {"cluster.nodes", "1"}, {"parallelism.dp", "8"}})
          .empty());
  const std::string inline_gpu =
      "{name: X, fp32_peak: 1200TFLOPS, tensor_peak: 900TFLOPS, fp8_peak: 450TFLOPS, "
      "memory_bandwidth: 3TB/s, sms: 132, l2_cache: 50MB, memory: 80GiB}";
  const auto w = warnings({{"cluster.gpu", inline_gpu}, {"cluster.nvlink_bandwidth", "450GB/s"}});
  ASSERT_EQ(w.size(), 3U);
  EXPECT_EQ(
      w[0],
      "cluster.gpu.fp32_peak (1200 TFLOP/s) is above tensor_peak (900 TFLOP/s): on every GPU the 16-bit "
      "tensor cores are the faster (a unit slip?)");
  EXPECT_EQ(w[1],
            "cluster.gpu.fp8_peak (450 TFLOP/s) is below tensor_peak (900 TFLOP/s): FP8 tensor cores run at "
            "least the 16-bit rate (a unit slip?)");
  EXPECT_EQ(
      w[2],
      "cluster.gpu.fp32_peak = 1200 TFLOP/s is above 4x every GPU's the node model knows (MI300X: 163.4 "
      "TFLOP/s) (a unit slip?)");
  // Each spec against the least and 4x the most of the GPUs the node model
  // knows: bits for bytes, a prefix off by 1000.
  const std::string l40s =
      "{name: L40S, fp32_peak: 91.6TFLOPS, tensor_peak: 181TFLOPS, fp8_peak: 362TFLOPS, "
      "memory_bandwidth: 864GB/s, sms: 142, l2_cache: 96MB, memory: 48GB}";
  EXPECT_TRUE(warnings({{"cluster.gpu", l40s}, {"cluster.nvlink_bandwidth", "32GB/s"}}).empty());
  auto slip = [&](const std::string& from, const std::string& to) {
    const std::string gpu = replaced(l40s, from, to);
    EXPECT_NE(gpu, l40s);
    return warnings({{"cluster.gpu", gpu}, {"cluster.nvlink_bandwidth", "32GB/s"}});
  };
  EXPECT_EQ(slip("864GB/s", "864Gbps"),
            std::vector<std::string>{"cluster.gpu.memory_bandwidth = 108 GB/s is below every GPU's the node "
                                     "model knows (P4: 192 GB/s) (a unit slip?)"});
  EXPECT_EQ(
      slip("memory: 48GB", "memory: 48MB"),
      std::vector<std::string>{"cluster.gpu.memory = 0.048 GB is below every GPU's the node model knows "
                               "(P4: 8 GB) (a unit slip?)"});
  EXPECT_EQ(
      slip("memory: 48GB", "memory: 48TB"),
      std::vector<std::string>{"cluster.gpu.memory = 48000 GB is above 4x every GPU's the node model knows "
                               "(MI300X: 192GiB) (a unit slip?)"});
  EXPECT_EQ(slip("l2_cache: 96MB", "l2_cache: 96GB"),
            std::vector<std::string>{"cluster.gpu.l2_cache = 96000 MB is above 4x every GPU's the node model "
                                     "knows (MI300X: 256 MB) (a unit slip?)"});
  // The SM count too (helper 114: 100,000 SMs at a fixed peak gave a 13-day
  // iteration without a word).
  EXPECT_EQ(
      slip("sms: 142", "sms: 14"),
      std::vector<std::string>{"cluster.gpu.sms = 14 SMs is below every GPU's the node model knows (P4: "
                               "20 SMs) (a unit slip?)"});
  EXPECT_EQ(
      slip("sms: 142", "sms: 100000"),
      std::vector<std::string>{"cluster.gpu.sms = 100000 SMs is above 4x every GPU's the node model knows "
                               "(MI300X: 304 SMs) (a unit slip?)"});
  // Each key in range, the two together not (helper 132: a B200's peak over
  // 8000Gbps, 1 TB/s, ran 5x slower without a word): FLOPs per byte more than
  // twice any preset's. Said once where the range check names the key.
  const auto ridge = slip("864GB/s", "200GB/s");
  ASSERT_EQ(ridge.size(), 1U);
  EXPECT_EQ(
      ridge[0].rfind("cluster.gpu: tensor_peak / memory_bandwidth = 905 FLOP per byte, above twice every "
                     "GPU's the node model knows (",
                     0),
      0U)
      << ridge[0];
  EXPECT_NE(ridge[0].find("): memory_bandwidth 200 GB/s (a unit slip, Gbps for GB/s?)"), std::string::npos)
      << ridge[0];
  EXPECT_TRUE(slip("864GB/s", "450GB/s").empty());  // 402 FLOP per byte: within twice
  // FP8 runs twice the 16-bit rate wherever it exists; 10x would put FP8
  // plans' MFU past 100% (helper 132: 174.5%).
  EXPECT_EQ(
      slip("fp8_peak: 362TFLOPS", "fp8_peak: 1810TFLOPS"),
      std::vector<std::string>{
          "cluster.gpu.fp8_peak (1810 TFLOP/s) is 10x tensor_peak (181 TFLOP/s): FP8 tensor cores run 2x "
          "the 16-bit rate on every GPU that has them (a unit slip?; MFU is counted against tensor_peak, "
          "so FP8 plans could pass 100%)"});
  EXPECT_EQ(error_of(default_text(), {{"cluster.gpu", "my_gpu.JSON"}})
                .rfind("s.yaml (--set cluster.gpu): cluster.gpu: 'my_gpu.JSON' is a file: a scenario takes "
                       "a GPU preset name or the GPU inline, a mapping with name, fp32_peak,",
                       0),
            0U)
      << error_of(default_text(), {{"cluster.gpu", "my_gpu.JSON"}});
}

// A preset with some specs changed: `gpu: {preset: H100-SXM, memory: 94GB}`,
// or --set cluster.gpu.memory=94GB over a file naming the preset. It keeps
// the preset's NVLink default and, with only its capacity changed, its
// notes; a --set the next one replaces whole is an error.
TEST(Scenario, PresetWithChangedSpecs) {
  const std::string bare =
      without(default_text(), {"nvlink_bandwidth", "nvlink_latency", "nic_latency", "spine_latency"});
  const Scenario s = parse_scenario(bare, "s.yaml", {{"cluster.gpu.memory", "94GB"}});
  node_model::GpuSpec expected = node_model::gpu_preset("H100-SXM");
  expected.name = "H100-SXM (memory 94GB)";
  expected.memory = parse_bytes("94GB");
  EXPECT_EQ(s.gpu, expected);
  EXPECT_EQ(s.cluster.nvlink_bandwidth, Bandwidth::gigabytes_per_second(450));
  EXPECT_TRUE(node_model::is_preset(s.gpu));
  const Scenario written = parse_scenario(
      replaced(bare, "gpu: H100-SXM", "gpu: {preset: h200, name: H200 NVL, memory_bandwidth: 4.8TB/s}"),
      "s.yaml");
  EXPECT_EQ(written.gpu.name, "H200 NVL");
  EXPECT_EQ(written.gpu.memory, node_model::gpu_preset("H200").memory);
  EXPECT_EQ(written.cluster.nvlink_bandwidth, Bandwidth::gigabytes_per_second(450));
  EXPECT_NE(error_of(default_text(), {{"cluster.gpu.memory", "24GB"}, {"cluster.gpu", "H200"}})
                .find("--set cluster.gpu replaces cluster.gpu.memory, set before it: give cluster.gpu first"),
            std::string::npos)
      << error_of(default_text(), {{"cluster.gpu.memory", "24GB"}, {"cluster.gpu", "H200"}});
  EXPECT_EQ(
      parse_scenario(default_text(), "s.yaml", {{"cluster.gpu", "H200"}, {"cluster.gpu.memory", "24GB"}})
          .gpu.memory,
      parse_bytes("24GB"));
  EXPECT_NE(error_of(default_text(), {{"cluster.gpu.preset", "H300"}})
                .find("cluster.gpu.preset: unknown GPU preset 'H300'"),
            std::string::npos)
      << error_of(default_text(), {{"cluster.gpu.preset", "H300"}});
}

// A preset's tensor cores changed (an export variant: 148 TFLOP/s dense
// BF16) keep its TF32 : 16-bit : FP8 ratios unless those peaks are given;
// its memory written in the other unit (80GB for an H100's 80GiB) is warned.
TEST(Scenario, PresetChangedKeepsItsRatiosAndWarnsAboutGbForGib) {
  const node_model::GpuSpec h100 = node_model::gpu_preset("H100-SXM");
  const Scenario slow = parse_scenario(default_text(), "s.yaml", {{"cluster.gpu.tensor_peak", "148TFLOPS"}});
  // The datasheet's 494.7 / 989.4 / 1978.9 TFLOP/s scaled by 148 / 989.4.
  EXPECT_NEAR(slow.gpu.tf32_peak.per_second(), 74e12, 0.05e12);
  EXPECT_NEAR(slow.gpu.fp8_peak.per_second(), 296e12, 0.05e12);
  EXPECT_EQ(slow.gpu.fp32_peak, h100.fp32_peak);
  const Scenario given =
      parse_scenario(default_text(), "s.yaml",
                     {{"cluster.gpu.tensor_peak", "148TFLOPS"}, {"cluster.gpu.fp8_peak", "1PFLOPS"}});
  EXPECT_NEAR(given.gpu.tf32_peak.per_second(), 74e12, 0.05e12);
  EXPECT_EQ(given.gpu.fp8_peak, parse_flop_rate("1PFLOPS"));
  EXPECT_TRUE(slow.warnings.empty()) << slow.warnings.front();

  const Scenario gb = parse_scenario(default_text(), "s.yaml", {{"cluster.gpu.memory", "80GB"}});
  ASSERT_EQ(gb.warnings.size(), 1U);
  EXPECT_EQ(
      gb.warnings.front(),
      "cluster.gpu.memory = 80GB is 74.51 GiB, where the H100-SXM preset's is 80GiB: the same number in "
      "the other unit (GB = 10^9 bytes, GiB = 2^30); give 80GiB for the preset's capacity");
  const Scenario gib =
      parse_scenario(default_text(), "s.yaml", {{"cluster.gpu", "H200"}, {"cluster.gpu.memory", "141GiB"}});
  ASSERT_FALSE(gib.warnings.empty());
  EXPECT_NE(gib.warnings.back().find("141GiB is 151.4 GB, where the H200 preset's is 141GB"),
            std::string::npos)
      << gib.warnings.back();
  // Another capacity, or the preset's own, is no slip.
  for (const char* m : {"94GB", "80GiB", "96GiB"}) {
    EXPECT_TRUE(parse_scenario(default_text(), "s.yaml", {{"cluster.gpu.memory", m}}).warnings.empty()) << m;
  }
}

TEST(Scenario, InlineGpuAndModel) {
  std::string t =
      replaced(default_text(), "gpu: H100-SXM",
               "gpu: {name: X1, fp32_peak: 50TFLOPS, tensor_peak: 800TFLOPS, memory_bandwidth: 3TB/s, "
               "sms: 100, l2_cache: 40MiB, memory: 96GiB}");
  t = replaced(t, "preset: gpt2-large", "{layers: 4, hidden: 512, heads: 8, vocab: 1000}");
  t = replaced(t, "model:\n  {", "model: {");
  const Scenario s = parse_scenario(t, "s.yaml");
  EXPECT_EQ(s.gpu.name, "X1");
  EXPECT_EQ(s.gpu.memory_bandwidth, parse_bandwidth("3TB/s"));
  EXPECT_EQ(s.model.ffn_hidden, 2048);
  // Defaults: TF32 at half the tensor peak, no FP8 tensor cores.
  EXPECT_EQ(s.gpu.tf32_peak, parse_flop_rate("400TFLOPS"));
  EXPECT_EQ(s.gpu.fp8_peak.per_second(), 0.0);
  const Scenario x = parse_scenario(
      replaced(t, "memory: 96GiB}", "memory: 96GiB, tf32_peak: 350TFLOPS, fp8_peak: 1.6PFLOPS}"), "x.yaml");
  EXPECT_EQ(x.gpu.tf32_peak, parse_flop_rate("350TFLOPS"));
  EXPECT_EQ(x.gpu.fp8_peak, parse_flop_rate("1.6PFLOPS"));
  EXPECT_NE(
      error_of(replaced(t, "memory: 96GiB}", "memory: 96GiB, tf32_peak: -1TFLOPS}")).find("cluster.gpu"),
      std::string::npos);
  // bf16: false (FP16-only tensor cores, as Volta): a bf16 training dtype is
  // one line naming the key; fp16 runs.
  EXPECT_TRUE(s.gpu.bf16);
  const std::string volta = replaced(t, "memory: 96GiB}", "memory: 96GiB, bf16: false}");
  const std::string no_bf16 = error_of(volta);
  EXPECT_NE(no_bf16.find("training.dtype: GPU 'X1' has no bf16 tensor cores"), std::string::npos) << no_bf16;
  const Scenario v = parse_scenario(replaced(volta, "dtype: bf16", "dtype: fp16"), "v.yaml");
  EXPECT_FALSE(v.gpu.bf16);
  EXPECT_EQ(v.workload.dtype, node_model::DType::FP16);
}

TEST(Scenario, Tf32TrainingAndFp8Training) {
  const Scenario s = parse_scenario(replaced(default_text(), "dtype: bf16", "dtype: TF32"), "s.yaml");
  EXPECT_EQ(s.workload.dtype, node_model::DType::TF32);
  EXPECT_FALSE(s.workload.profile.fp8);
  // fp8: Transformer Engine FP8 layer GEMMs, everything else bf16.
  const Scenario f = parse_scenario(replaced(default_text(), "dtype: bf16", "dtype: fp8"), "s.yaml");
  EXPECT_EQ(f.workload.dtype, node_model::DType::BF16);
  EXPECT_TRUE(f.workload.profile.fp8);
  // A GPU without FP8 tensor cores: one line naming the GPU, the dtype and the key.
  const std::string a100 =
      error_of(replaced(replaced(default_text(), "dtype: bf16", "dtype: fp8"), "gpu: H100-SXM", "gpu: A100-80GB"));
  EXPECT_NE(a100.find("training.dtype: GPU 'A100-80GB' has no fp8 tensor cores"), std::string::npos) << a100;
  EXPECT_EQ(a100.find('\n'), std::string::npos) << a100;
  // Transformer Engine runs under Megatron: not with the pytorch-eager profile.
  EXPECT_NE(error_of(replaced(replaced(default_text(), "dtype: bf16", "dtype: fp8"), "framework: megatron",
                              "framework: pytorch-eager"))
                .find("training.dtype: fp8 training is modelled as Transformer Engine under Megatron"),
            std::string::npos);
}

TEST(Scenario, ErrorsNameTheKeyPath) {
  EXPECT_EQ(error_of(replaced(default_text(), "gpu: H100-SXM", "gpu: B300")).find("s.yaml:"), 0U);
  EXPECT_NE(error_of(replaced(default_text(), "gpu: H100-SXM", "gpu: B300"))
                .find("cluster.gpu: unknown GPU preset 'B300'"),
            std::string::npos);
  EXPECT_NE(
      error_of(replaced(default_text(), "dtype: bf16", "dtype: int4")).find("training.dtype: unknown dtype"),
      std::string::npos);
  EXPECT_NE(
      error_of(replaced(default_text(), "preset: gpt2-large", "preset: gpt2-large\n  heads: 7"))
          .find(":23:10: model.heads: model 'gpt2-large (heads 7)': heads (7) must divide hidden (1280)"),
      std::string::npos);
  // The key the rule names first, not the section nor the other key named.
  EXPECT_NE(
      error_of(
          replaced(default_text(), "preset: gpt2-large", "preset: gpt2-large\n  heads: 20\n  kv_heads: 6"))
          .find(
              ":24:13: model.kv_heads: model 'gpt2-large (kv_heads 6)': kv_heads (6) must divide heads (20)"),
      std::string::npos)
      << error_of(replaced(default_text(), "preset: gpt2-large",
                           "preset: gpt2-large\n  heads: 20\n  kv_heads: 6"));
  EXPECT_NE(error_of(replaced(default_text(), "backend: flow", "backend: flow\nextra: 1"))
                .find("extra: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of(replaced(default_text(), "spines: 8", "spines: [8]"))
                .find("cluster.fabric.spines: expected a whole number"),
            std::string::npos);
  EXPECT_NE(error_of("").find("the scenario is empty"), std::string::npos);
  EXPECT_NE(error_of("- a\n- b\n").find("must be a YAML mapping"), std::string::npos);
}

TEST(Scenario, LinkLatenciesAndNvlinkBandwidthHaveDefaults) {
  // A cluster needs only what differs between clusters: the GPU preset gives
  // its NVLink bandwidth per direction, link latencies default to the shipped
  // scenarios' values (NVLink 1us, HCA link 1us, switch links 600ns).
  const std::string bare =
      without(default_text(), {"nvlink_bandwidth", "nvlink_latency", "nic_latency", "spine_latency"});
  const Scenario s = parse_scenario(bare, "s.yaml");
  const Scenario full = parse_scenario(default_text(), "s.yaml");
  EXPECT_EQ(s.cluster.nvlink_bandwidth, Bandwidth::gigabytes_per_second(450));  // H100-SXM: NVLink 4
  EXPECT_EQ(s.cluster.nvlink_latency, Time::from_us(1));
  EXPECT_EQ(s.cluster.nic_latency, Time::from_us(1));
  EXPECT_EQ(s.cluster.spine_latency, Time::from_ns(600));
  // default.yaml spells out exactly these values: the same cluster.
  EXPECT_EQ(s.cluster.nvlink_bandwidth, full.cluster.nvlink_bandwidth);
  EXPECT_EQ(s.cluster.nvlink_latency, full.cluster.nvlink_latency);
  EXPECT_EQ(s.cluster.nic_latency, full.cluster.nic_latency);
  EXPECT_EQ(s.cluster.spine_latency, full.cluster.spine_latency);
  EXPECT_EQ(
      parse_scenario(replaced(bare, "gpu: H100-SXM", "gpu: A100-80GB"), "s.yaml").cluster.nvlink_bandwidth,
      Bandwidth::gigabytes_per_second(300));
  EXPECT_EQ(parse_scenario(replaced(bare, "gpu: H100-SXM", "gpu: B200"), "s.yaml").cluster.nvlink_bandwidth,
            Bandwidth::gigabytes_per_second(900));
  // No default where the preset has no NVSwitch port or the GPU is inline.
  EXPECT_EQ(
      error_of(replaced(bare, "gpu: H100-SXM", "gpu: h100 pcie")),
      "s.yaml:8:3: cluster.nvlink_bandwidth: missing required key (GPU preset H100-PCIe has no NVSwitch "
      "NVLink to default to: give each GPU's bandwidth to the others per direction, or with "
      "cluster.node_fabric: nvlink-mesh each link's)");
  EXPECT_NE(
      error_of(
          replaced(bare, "gpu: H100-SXM",
                   "gpu: {name: X, fp32_peak: 60TFLOPS, tensor_peak: 900TFLOPS, memory_bandwidth: 3TB/s, "
                   "sms: 132, l2_cache: 50MB, memory: 80GiB}"))
          .find("cluster.nvlink_bandwidth: missing required key (an inline GPU has no default)"),
      std::string::npos);
  EXPECT_NE(error_of(replaced(bare, "gpu: H100-SXM", "gpu: H100-SXM\n  node_fabric: nvlink-mesh"))
                .find("cluster.nvlink_bandwidth: missing required key (an nvlink-mesh node gives no default "
                      "(bandwidth per link))"),
            std::string::npos);
  // A 3-tier fat-tree's core links default as its spine links do.
  const Scenario ft = parse_scenario(
      replaced(bare, "  fabric:\n    type: leaf-spine\n    hosts_per_leaf: 8\n    spines: 8\n",
               "  fabric:\n    type: fat-tree\n    k: 8\n    tiers: 3\n    core_bandwidth: 400Gbps\n"),
      "s.yaml");
  EXPECT_EQ(ft.fat_tree.leaf_spine.latency, Time::from_ns(600));
  EXPECT_EQ(ft.fat_tree.spine_core.latency, Time::from_ns(600));
  EXPECT_EQ(ft.fat_tree.host.latency, Time::from_us(1));
}

TEST(Scenario, MissingKeysAreNamedTogether) {
  // Two or more required keys missing from one mapping: one error names them
  // all, at the mapping; one missing key keeps its own message.
  EXPECT_EQ(error_of(without(default_text(), {"gpus_per_node", "nic_bandwidth"})),
            "s.yaml:8:3: cluster: missing required keys: gpus_per_node, nic_bandwidth");
  EXPECT_NE(error_of(without(default_text(), {"nic_bandwidth"}))
                .find("cluster.nic_bandwidth: missing required key"),
            std::string::npos);
  EXPECT_NE(error_of(without(default_text(), {"spine_bandwidth", "hosts_per_leaf"}))
                .find("cluster.fabric: missing required keys: hosts_per_leaf, spine_bandwidth"),
            std::string::npos);
  EXPECT_NE(error_of(without(default_text(), {"micro_batch", "dtype"}))
                .find("training: missing required keys: micro_batch, dtype"),
            std::string::npos);
  // An inline GPU: a new GPU's spec in one go.
  EXPECT_NE(error_of(default_text(), {{"cluster.gpu",
                                       "{name: X, fp32_peak: 60TFLOPS, tensor_peak: 900TFLOPS, "
                                       "memory_bandwidth: 3TB/s}"},
                                      {"cluster.nvlink_bandwidth", "450GB/s"}})
                .find("cluster.gpu: missing required keys: sms, l2_cache, memory"),
            std::string::npos)
      << error_of(default_text(), {{"cluster.gpu",
                                    "{name: X, fp32_peak: 60TFLOPS, tensor_peak: 900TFLOPS, "
                                    "memory_bandwidth: 3TB/s}"},
                                   {"cluster.nvlink_bandwidth", "450GB/s"}});
  EXPECT_NE(error_of(replaced(default_text(), "preset: gpt2-large", "hidden: 1280"))
                .find("model: missing required keys: layers, heads, vocab"),
            std::string::npos);
  EXPECT_EQ(error_of("name: x\nmodel:\n  preset: gpt2-large\n"),
            "s.yaml:1:1: missing required keys: cluster, training, parallelism");
}

TEST(Scenario, OneNodeNeedsNoFabric) {
  // A one-node cluster may leave cluster.fabric out: its HCAs go on one leaf
  // at their own rate, and the forecast is the one with that fabric written
  // out (no traffic leaves the node). More nodes name the missing fabric.
  const std::string one = replaced(replaced(default_text(), "nodes: 2", "nodes: 1"), "dp: 16", "dp: 8");
  const std::string fabric =
      "  fabric:\n    type: leaf-spine\n    hosts_per_leaf: 8\n    spines: 8\n"
      "    spine_bandwidth: 400Gbps\n    spine_latency: 600ns\n";
  const Scenario bare = parse_scenario(replaced(one, fabric, ""), "s.yaml");
  EXPECT_EQ(bare.fabric, FabricKind::LeafSpine);
  EXPECT_EQ(bare.cluster.hosts_per_leaf, 8);
  EXPECT_EQ(bare.cluster.spines, 1);
  EXPECT_EQ(bare.cluster.spine_bandwidth, parse_bandwidth("400Gbps"));
  const Scenario written = parse_scenario(
      replaced(one, fabric,
               "  fabric: {type: leaf-spine, hosts_per_leaf: 8, spines: 1, spine_bandwidth: 400Gbps}\n"),
      "s.yaml");
  const auto bare_sim = study::simulate_scenario(bare, nullptr, nullptr, false);
  const auto written_sim = study::simulate_scenario(written, nullptr, nullptr, false);
  EXPECT_GT(bare_sim.result.makespan.ms(), 0.0);
  EXPECT_EQ(bare_sim.result.makespan, written_sim.result.makespan);
  // The reports say no fabric was written rather than name the stand-in.
  EXPECT_FALSE(bare.fabric_written);
  EXPECT_TRUE(written.fabric_written);
  const RunReport bare_report = make_report(bare, bare_sim);
  EXPECT_NE(format_text(bare_report).find("on 8 x H100-SXM (one node, no fabric)\n"), std::string::npos)
      << format_text(bare_report);
  EXPECT_NE(format_json(bare_report).find("\"fabric\": \"none\", \"fabric_tiers\": 0,"), std::string::npos);
  const RunReport written_report = make_report(written, written_sim);
  EXPECT_NE(format_text(written_report).find("on 8 x H100-SXM (leaf-spine fabric)\n"), std::string::npos);
  EXPECT_NE(format_json(written_report).find("\"fabric\": \"leaf-spine\", \"fabric_tiers\": 2,"),
            std::string::npos);
  // An NVLink mesh node (which a leaf-spine does not take): the smallest
  // two-tier fat-tree holding its 8 HCAs (k = 4 holds 8).
  const Scenario mesh = parse_scenario(
      replaced(replaced(one, fabric, ""), "gpu: H100-SXM", "gpu: H100-SXM\n  node_fabric: nvlink-mesh"),
      "s.yaml", {{"cluster.nvlink_bandwidth", "64GB/s"}});
  EXPECT_EQ(mesh.fabric, FabricKind::FatTree);
  EXPECT_EQ(mesh.fat_tree.tiers, 2);
  EXPECT_EQ(mesh.fat_tree.k, 4);
  EXPECT_GT(study::simulate_scenario(mesh, nullptr, nullptr, false).result.makespan.ms(), 0.0);
  EXPECT_EQ(error_of(replaced(default_text(), fabric, "")),
            "s.yaml:8:3: cluster.fabric: missing required key (a cluster of 2 nodes needs the fabric between "
            "them: leaf-spine, fat-tree or rail-optimized)");
}

TEST(Scenario, ErrorOfAGeneratedScenarioLosesItsYamlPosition) {
  // A caller that generated the YAML (one scenario per data row) names the
  // error by its own source: the detail is the message without the file,
  // line and column, and the option names a command-line override.
  try {
    (void)parse_scenario(replaced(default_text(), "micro_batch: 8", "micro_batch: 0"), "gen");
    ADD_FAILURE() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.detail(), "training.micro_batch: must be positive, got 0");
    EXPECT_EQ(e.option(), "");
    EXPECT_EQ(std::string(e.what()).find("gen:"), 0U);
    EXPECT_EQ(std::string(e.what()).substr(std::string(e.what()).size() - e.detail().size()), e.detail());
  }
  try {
    (void)parse_scenario(default_text(), "gen", {Override{"calibration.host_launch", "fast"}});
    ADD_FAILURE() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.detail().find("calibration.host_launch: invalid time 'fast'"), 0U) << e.detail();
    EXPECT_EQ(e.option(), "--set calibration.host_launch");
    EXPECT_EQ(std::string(e.what()).find("gen (--set calibration.host_launch): calibration.host_launch:"), 0U);
  }
  try {
    (void)parse_scenario(default_text(), "gen", {Override{"name.x", "1"}});
    ADD_FAILURE() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.option(), "--set name.x");
  }
  // An error built from one string has no separate detail.
  EXPECT_EQ(ScenarioError("gen: x").detail(), "");
}

TEST(Scenario, FabricsCollectivesAndDefaults) {
  std::string t = default_text();
  t = replaced(
      t, "    type: leaf-spine\n    hosts_per_leaf: 8\n    spines: 8\n",
      "    type: fat-tree\n    k: 8\n    tiers: 3\n    core_bandwidth: 800Gbps\n    core_latency: 700ns\n");
  t = replaced(t, "  dp: 16\n", "");
  t += "collectives:\n  algorithm: ring\n  chunks: 4\n";
  const Scenario s = parse_scenario(t, "s.yaml");
  EXPECT_EQ(s.fabric, FabricKind::FatTree);
  EXPECT_EQ(s.fat_tree.k, 8);
  EXPECT_EQ(s.fat_tree.spine_core.bandwidth, parse_bandwidth("800Gbps"));
  EXPECT_EQ(s.fat_tree.host.bandwidth, parse_bandwidth("400Gbps"));
  EXPECT_EQ(s.plan.dp, 16);  // the GPUs left by tp x pp
  EXPECT_EQ(s.collectives.algorithm, collectives::Algorithm::Ring);
  EXPECT_EQ(s.collectives.chunks, 4);
  EXPECT_EQ(s.collectives.ranks_per_node, 8);
  EXPECT_EQ(build_topology(s).num_gpus(), 16);
}

TEST(Scenario, FabricTooSmallNamesTheNumbers) {
  std::string t = replaced(default_text(), "    type: leaf-spine\n    hosts_per_leaf: 8\n    spines: 8\n",
                           "    type: fat-tree\n    k: 4\n    tiers: 2\n");
  EXPECT_NE(
      error_of(t).find(
          "cluster.fabric.k: a k=4 2-tier fat-tree attaches 8 HCAs, but the cluster has 16 (one per GPU: "
          "cluster.nodes x cluster.gpus_per_node = 2 x 8); for more HCAs a larger k, or tiers: 3 (or auto)"),
      std::string::npos)
      << error_of(t);
  EXPECT_NE(error_of(replaced(default_text(), "type: leaf-spine", "type: torus"))
                .find("unknown fabric type 'torus'"),
            std::string::npos);
  EXPECT_NE(error_of(default_text() + "collectives:\n  algorithm: magic\n")
                .find("collectives.algorithm: unknown collective algorithm 'magic'"),
            std::string::npos);
  EXPECT_NE(error_of(default_text() + "predictor: oracle\n").find("predictor: "), std::string::npos);
}

// An nvlink-mesh node of a 4-GPU A100 board, 100 GB/s per link: its key is
// each link's, three a GPU, no unit slip (helper 111: warned against the
// GPU's 300 GB/s); and its tensor-parallel rings spread over two of the
// three links, so the iteration is an NVSwitch node's at 200 GB/s (one
// ring ran it as a 100 GB/s node, 28% slow).
TEST(Scenario, AMeshNodesLinksAreEachLinksAndItsRingsSpreadOverThem) {
  const std::string mesh =
      "name: hgx4\ncluster:\n  nodes: 1\n  gpus_per_node: 4\n  gpu: A100-40GB\n  node_fabric: nvlink-mesh\n"
      "  nvlink_bandwidth: 100GB/s\n  nic_bandwidth: 200Gbps\nmodel:\n  preset: gpt2-large\ntraining:\n"
      "  micro_batch: 4\n  global_batch: 16\n  seq_len: 1024\n  dtype: bf16\nparallelism:\n  tp: 4\n";
  const Scenario s = parse_scenario(mesh, "m.yaml");
  EXPECT_TRUE(s.warnings.empty()) << s.warnings.front();
  EXPECT_TRUE(s.collectives.mesh_node);
  const Time on_mesh = simulate_scenario(s).result.makespan;
  const std::string switch_at =
      replaced(replaced(mesh, "  node_fabric: nvlink-mesh\n", ""), "100GB/s", "200GB/s");
  const Time on_switch = simulate_scenario(parse_scenario(switch_at, "s.yaml")).result.makespan;
  EXPECT_NEAR(on_mesh.seconds() / on_switch.seconds(), 1.0, 0.01);
  const Time one_link =
      simulate_scenario(parse_scenario(replaced(switch_at, "200GB/s", "100GB/s"), "s.yaml")).result.makespan;
  EXPECT_GT(one_link.seconds() / on_mesh.seconds(), 1.05);
}

// Two 8-GPU mesh nodes of 50 GB/s links (helper 114): a data-parallel ring
// across them ran each node's hops over the chains c, c+1, ..., seven rings
// on each link i -> i+1, and a hierarchical all-reduce ran its phases
// inside a node on one ring, both forecast as a node of 50 GB/s (51% and
// 56% slow here). Over the zig-zag paths each directed link carries one of
// the eight rings (an NVSwitch port carries seven), and the hierarchical
// phases run over six mesh rings: the forecasts of NVSwitch nodes at 350
// and 300 GB/s.
TEST(Scenario, RingsAcrossMeshNodesSpreadOverTheirLinks) {
  const std::string mesh =
      "name: mesh8\ncluster:\n  nodes: 2\n  gpus_per_node: 8\n  gpu: A100-40GB\n  node_fabric: nvlink-mesh\n"
      "  nvlink_bandwidth: 50GB/s\n  nic_bandwidth: 200Gbps\n  fabric:\n    type: fat-tree\n    tiers: 2\n"
      "    k: 8\n    spine_bandwidth: 200Gbps\nmodel:\n  preset: gpt3-xl\n  layers: 4\ntraining:\n"
      "  micro_batch: 4\n  global_batch: 64\n  seq_len: 1024\n  dtype: bf16\nparallelism:\n  dp: 16\n"
      "collectives:\n  algorithm: ring\n";
  auto iteration = [](const std::string& text) {
    return simulate_scenario(parse_scenario(text, "m.yaml")).result.makespan.seconds();
  };
  const std::string on_switch = replaced(mesh, "  node_fabric: nvlink-mesh\n", "");
  for (const auto& [algorithm, ports] :
       {std::pair{"ring", "350GB/s"}, std::pair{"hierarchical", "300GB/s"}}) {
    const std::string m = replaced(mesh, "algorithm: ring", std::string("algorithm: ") + algorithm);
    const std::string sw = replaced(on_switch, "algorithm: ring", std::string("algorithm: ") + algorithm);
    const double on_mesh = iteration(m);
    EXPECT_NEAR(on_mesh / iteration(replaced(sw, "50GB/s", ports)), 1.0, 0.01) << algorithm;
    EXPECT_GT(iteration(sw) / on_mesh, 1.4) << algorithm;  // a port of one link
  }
}

// Keys that do nothing here are said so (helper 111): PCIe with an HCA per
// GPU; and RoPE's common names point to learned_positions, not to 'moe'.
TEST(Scenario, PcieWithAnHcaPerGpuAndRopeNames) {
  const Scenario s = parse_scenario(default_text(), "d.yaml", {{"cluster.pcie_bandwidth", "8GB/s"}});
  ASSERT_EQ(s.warnings.size(), 1U);
  EXPECT_EQ(
      s.warnings[0],
      "cluster.pcie_bandwidth has no effect with an HCA per GPU (the PCIe link is modelled where GPUs share "
      "an HCA: cluster.hcas_per_node below gpus_per_node)");
  EXPECT_TRUE(parse_scenario(default_text(), "d.yaml",
                             {{"cluster.pcie_bandwidth", "8GB/s"}, {"cluster.hcas_per_node", "4"}})
                  .warnings.empty());
  for (const char* key : {"model.rope", "model.use_rotary_position_embeddings"}) {
    const std::string e = error_of(default_text(), {{key, "true"}});
    EXPECT_NE(e.find("'learned_positions: false'"), std::string::npos) << e;
    EXPECT_EQ(e.find("did you mean 'moe'"), std::string::npos) << e;
  }
}

// Names other tools give (helper 173: refused with no hint): each points to
// our key or value.
TEST(Scenario, OtherToolsNamesPointToOurs) {
  const std::pair<Override, std::string> cases[] = {
      {{"parallelism.zero", "1"}, "did you mean 'zero_stage'?"},
      {{"training.flash_attn", "true"}, "did you mean 'flash_attention'?"},
      {{"parallelism.activation_checkpointing", "true"}, "activation checkpointing is 'recompute: full'"},
      {{"model.activation", "swiglu"}, "'gated_mlp: true' for SwiGLU"},
      {{"training.optimizer", "adamw"}, "did you mean 'adam'? (AdamW's weight decay costs the same passes"},
      {{"training.optimizer", "fused_adam"}, "did you mean 'fused-adam'?"},
  };
  for (const auto& [o, hint] : cases) {
    const std::string e = error_of(default_text(), {o});
    EXPECT_NE(e.find(hint), std::string::npos) << o.path << "=" << o.value << ": " << e;
  }
  EXPECT_EQ(error_of(default_text(), {{"training.optimizer", "sgd"}}).find("did you mean"),
            std::string::npos);
}

// YAML merge keys share a section between jobs (helper 111: "training.<<:
// unknown key", or keys the merge gave reported missing): the merged keys
// join the mapping, its own keys winning.
TEST(Scenario, YamlMergeKeysJoinTheMapping) {
  std::string t = default_text();
  t = replaced(t, "training:\n", "training: &t\n");
  t = replaced(t, "  dp: 16\n", "");
  t += "jobs:\n  - name: a\n    nodes: 1\n    training:\n      <<: *t\n      micro_batch: 4\n"
       "  - name: b\n    nodes: 1\n";
  const Scenario s = parse_scenario(t, "m.yaml");
  ASSERT_EQ(s.jobs.size(), 2U);
  EXPECT_EQ(s.jobs[0].scenario.workload.micro_batch, 4);                                // its own key wins
  EXPECT_EQ(s.jobs[0].scenario.workload.seq_len, s.jobs[1].scenario.workload.seq_len);  // the rest merged
  EXPECT_NE(s.jobs[1].scenario.workload.micro_batch, 4);
  // A --set of one job's section changes that job only, though the file
  // shares the mapping by an anchor (helper 113: both jobs changed).
  std::string aliased = replaced(t, "      <<: *t\n      micro_batch: 4\n", "      *t\n");
  aliased = replaced(aliased, "    training:\n      *t\n", "    training: *t\n");
  aliased = replaced(aliased, "  - name: b\n    nodes: 1\n", "  - name: b\n    nodes: 1\n    training: *t\n");
  const Scenario one = parse_scenario(aliased, "m.yaml", {{"jobs[1].training.micro_batch", "2"}});
  EXPECT_EQ(one.jobs[1].scenario.workload.micro_batch, 2);
  EXPECT_NE(one.jobs[0].scenario.workload.micro_batch, 2);
  // A merge of a scalar is an error naming its line.
  const std::string bad = replaced(t, "<<: *t", "<<: 5");
  EXPECT_NE(error_of(bad).find("'<<' (a YAML merge key) takes a mapping"), std::string::npos)
      << error_of(bad);
}

// Core links exist only in a 3-tier fat-tree (helper 109: core_latency was
// refused on a 2-tier tree, so a sweep over tiers 2, 3 failed, while
// core_bandwidth was taken silently on leaf-spine, where it did nothing).
TEST(Scenario, CoreKeysOnlyWhereThereAreCoreLinks) {
  const std::string two =
      replaced(default_text(), "    type: leaf-spine\n    hosts_per_leaf: 8\n    spines: 8\n",
               "    type: fat-tree\n    k: 8\n    tiers: 2\n    core_latency: 700ns\n");
  const Scenario s = parse_scenario(two, "s.yaml");
  ASSERT_EQ(s.warnings.size(), 1U);
  EXPECT_EQ(s.warnings[0],
            "cluster.fabric.core_latency has no effect on a 2-tier fat-tree (core links and pods exist with "
            "tiers: 3, "
            "or tiers: auto past 32 HCAs)");
  // Still checked: a sweep's 3-tier point would use it.
  EXPECT_NE(error_of(replaced(two, "700ns", "soon")).find("cluster.fabric.core_latency"), std::string::npos);
  const Scenario both =
      parse_scenario(replaced(two, "core_latency", "core_bandwidth: 400Gbps\n    core_latency"), "s.yaml");
  ASSERT_EQ(both.warnings.size(), 1U);
  EXPECT_EQ(both.warnings[0].rfind(
                "cluster.fabric.core_bandwidth and cluster.fabric.core_latency have no effect", 0),
            0U)
      << both.warnings[0];
  // Nor pods (helper 126: silently); past k, or fewer than the cluster's
  // HCAs need, the error names pods at its line (it named no file, or k).
  const Scenario pods = parse_scenario(two, "s.yaml", {{"cluster.fabric.pods", "2"}});
  ASSERT_EQ(pods.warnings.size(), 1U);
  EXPECT_EQ(pods.warnings[0].rfind("cluster.fabric.pods and cluster.fabric.core_latency have no effect", 0),
            0U)
      << pods.warnings[0];
  const std::string three = replaced(two, "tiers: 2", "tiers: 3\n    core_bandwidth: 400Gbps");
  EXPECT_EQ(
      error_of(three, {{"cluster.fabric.pods", "9"}}),
      "s.yaml (--set cluster.fabric.pods): cluster.fabric.pods: a 3-tier fat-tree of 8-port switches has "
      "at most k = 8 pods (got 9)");
  // A library check's message names its key once (helper 126: twice).
  EXPECT_EQ(error_of(two, {{"cluster.fabric.k", "7"}}),
            "s.yaml (--set cluster.fabric.k): cluster.fabric.k: must be even and at least 4 (got 7)");
  // In the file, at the value, where `k: 0`'s own check points (helper 126:
  // `k: 7` was marked at the key).
  const std::size_t k_line =
      static_cast<std::size_t>(
          std::count(two.begin(), two.begin() + static_cast<std::ptrdiff_t>(two.find("k: 8")), '\n')) +
      1;
  EXPECT_EQ(error_of(replaced(two, "k: 8", "k: 7")),
            fmt::format("s.yaml:{}:8: cluster.fabric.k: must be even and at least 4 (got 7)", k_line));
  EXPECT_EQ(error_of(replaced(two, "k: 8", "k: 0")),
            fmt::format("s.yaml:{}:8: cluster.fabric.k: must be positive, got 0", k_line));
  const std::string one_pod = replaced(three, "k: 8", "k: 8\n    pods: 1");
  EXPECT_NE(error_of(one_pod, {{"cluster.nodes", "3"}})
                .find(": cluster.fabric.pods: a k=8 3-tier fat-tree of 1 pod attaches 16 HCAs, but the "
                      "cluster has 24 (one per GPU: cluster.nodes x cluster.gpus_per_node = 3 x 8); for more "
                      "HCAs more pods (up to k = 8) or a larger k"),
            std::string::npos)
      << error_of(one_pod, {{"cluster.nodes", "3"}});
  // A leaf-spine fabric has no core tier at all: another fabric's key (an
  // unknown key until helper 173's review, which wrote a fat-tree's keys
  // under a leaf-spine).
  for (const char* key : {"core_bandwidth: 400Gbps", "core_latency: 1us"}) {
    const std::string e = error_of(
        replaced(default_text(), "    spines: 8\n", "    spines: 8\n    " + std::string(key) + "\n"));
    EXPECT_NE(e.find(" is a fat-tree or rail-optimized fabric's key, not a leaf-spine fabric's: a leaf-spine "
                     "fabric takes hosts_per_leaf, spines and spine_bandwidth"),
              std::string::npos)
        << e;
    EXPECT_EQ(e.find("known here: core_bandwidth"), std::string::npos) << e;
  }
}

// `tiers: auto`: the fewest tiers of k-port switches that hold the HCAs,
// so a sweep over nodes grows the tree (k = 8: 2 tiers hold 32 HCAs, 4
// nodes of 8; 3 tiers 128, 16 nodes). The core links default to the spine
// links; core keys written for the larger points are checked at 2 tiers.
TEST(Scenario, FatTreeTiersAutoGrowsWithTheCluster) {
  const std::string t =
      replaced(default_text(), "    type: leaf-spine\n    hosts_per_leaf: 8\n    spines: 8\n",
               "    type: fat-tree\n    k: 8\n    tiers: auto\n");
  auto at = [&](int nodes, const std::string& text) {
    return parse_scenario(
        text, "s.yaml",
        {Override{"cluster.nodes", std::to_string(nodes)}, Override{"parallelism.dp", "auto"}});
  };
  const Scenario two = at(4, t);
  EXPECT_TRUE(two.fabric_tiers_auto);
  EXPECT_EQ(two.fat_tree.tiers, 2);
  EXPECT_EQ(study::fabric_detail(two), ", 2 tiers by tiers: auto, a node across 2 leaves");
  EXPECT_EQ(build_topology(two).num_gpus(), 32);
  const Scenario three = at(5, t);
  EXPECT_EQ(three.fat_tree.tiers, 3);
  EXPECT_EQ(three.fat_tree.spine_core.bandwidth, parse_bandwidth("400Gbps"));  // spine_bandwidth
  EXPECT_EQ(three.fat_tree.spine_core.latency, parse_time("600ns"));
  EXPECT_EQ(study::fabric_detail(three), ", 3 tiers by tiers: auto, a node across 2 leaves");
  EXPECT_EQ(study::fabric_tiers(two), 2);  // run --json's and the sweep CSV's fabric_tiers
  EXPECT_EQ(study::fabric_tiers(three), 3);
  EXPECT_EQ(build_topology(three).num_gpus(), 40);
  EXPECT_EQ(at(16, t).fat_tree.tiers, 3);
  // Written core links: used at 3 tiers, checked and not used at 2.
  const std::string cores = replaced(t, "tiers: auto\n", "tiers: auto\n    core_bandwidth: 800Gbps\n");
  EXPECT_EQ(at(5, cores).fat_tree.spine_core.bandwidth, parse_bandwidth("800Gbps"));
  EXPECT_EQ(at(4, cores).fat_tree.tiers, 2);
  EXPECT_NE(error_of(replaced(cores, "800Gbps", "fast")).find("cluster.fabric.core_bandwidth"),
            std::string::npos)
      << error_of(replaced(cores, "800Gbps", "fast"));
  // Beyond 3 tiers: the capacity error names k and the most auto builds.
  try {
    (void)at(17, t);
    FAIL() << "17 nodes of 8 on a k=8 tree";
  } catch (const ScenarioError& e) {
    EXPECT_NE(
        std::string(e.what()).find("cluster.fabric.k: a k=8 3-tier fat-tree (the most tiers: auto builds) "
                                   "attaches 128 HCAs, but the cluster has 136 (one per GPU: cluster.nodes x "
                                   "cluster.gpus_per_node = 17 x 8); for more HCAs a larger k"),
        std::string::npos)
        << e.what();
  }
  // A written tier count is not reported; anything but 2, 3 or auto is an error naming tiers.
  EXPECT_EQ(study::fabric_detail(parse_scenario(replaced(t, "tiers: auto", "tiers: 2"), "s.yaml")),
            ", a node across 2 leaves");
  EXPECT_EQ(study::fabric_tiers(parse_scenario(replaced(t, "tiers: auto", "tiers: 2"), "s.yaml")), 2);
  EXPECT_EQ(study::fabric_tiers(parse_scenario(default_text(), "s.yaml")), 2);  // leaf-spine
  EXPECT_NE(error_of(replaced(t, "tiers: auto", "tiers: many")).find("cluster.fabric.tiers"),
            std::string::npos)
      << error_of(replaced(t, "tiers: auto", "tiers: many"));
}

// A rail-optimized fabric of two tiers: past its k / rails rail groups the
// error says what holds more (a larger k, or a third tier, which the
// default tiers: auto builds).
TEST(Scenario, RailFabricTooSmallSaysWhatHoldsMore) {
  const std::string t =
      replaced(default_text(), "    type: leaf-spine\n    hosts_per_leaf: 8\n    spines: 8\n",
               "    type: rail-optimized\n    k: 8\n");
  EXPECT_EQ(parse_scenario(t, "s.yaml", {Override{"cluster.nodes", "4"}, Override{"parallelism.dp", "auto"}})
                .gpus(),
            32);
  EXPECT_NE(
      error_of(t, {Override{"cluster.nodes", "5"}, Override{"parallelism.dp", "auto"},
                   Override{"cluster.fabric.tiers", "2"}})
          .find(
              "cluster.fabric.k: a k=8 2-tier rail-optimized fabric attaches 32 HCAs, but the cluster has 40 "
              "(one per GPU: cluster.nodes x cluster.gpus_per_node = 5 x 8); "
              "for more HCAs a larger k, or tiers: 3 (or auto)"),
      std::string::npos)
      << error_of(t, {Override{"cluster.nodes", "5"}, Override{"parallelism.dp", "auto"},
                      Override{"cluster.fabric.tiers", "2"}});
}

// Three tiers (a plane per rail joined by cores, NVIDIA's SuperPOD layout):
// `tiers: 3` needs core_bandwidth, `tiers: auto` takes the fewest tiers
// that hold the HCAs (core links at the spine links' speed unless given),
// and core keys on two tiers are said to do nothing. k = 8: 2 tiers hold 4
// nodes, 3 tiers 4 rail groups of 4 nodes (16).
TEST(Scenario, RailFabricOfThreeTiers) {
  const std::string t =
      replaced(default_text(), "    type: leaf-spine\n    hosts_per_leaf: 8\n    spines: 8\n",
               "    type: rail-optimized\n    k: 8\n");
  const std::vector<Override> nodes{{"cluster.nodes", "16"}, {"parallelism.dp", "auto"}};
  auto with = [&](std::vector<Override> o) {
    o.insert(o.begin(), nodes.begin(), nodes.end());
    return o;
  };
  const Scenario three = parse_scenario(
      t, "s.yaml", with({{"cluster.fabric.tiers", "3"}, {"cluster.fabric.core_bandwidth", "200Gbps"}}));
  EXPECT_EQ(three.rail.tiers, 3);
  EXPECT_EQ(three.rail.spine_core.bandwidth, parse_bandwidth("200Gbps"));
  EXPECT_EQ(study::fabric_tiers(three), 3);
  EXPECT_FALSE(three.fabric_tiers_auto);
  EXPECT_DOUBLE_EQ(study::spine_oversubscription(three), 2.0);  // 4 groups at 400 Gb/s over 4 cores at 200
  // Without core_bandwidth the cores take the spine links' (a non-blocking
  // core, as tiers: auto builds it; until 2026-12-08 a missing key).
  EXPECT_EQ(parse_scenario(t, "s.yaml", with({{"cluster.fabric.tiers", "3"}})).rail.spine_core.bandwidth,
            three.rail.leaf_spine.bandwidth);
  EXPECT_NE(
      error_of(t, with({{"cluster.fabric.tiers", "4"}}))
          .find("cluster.fabric.tiers: a rail-optimized fabric has 2 or 3 tiers, or tiers: auto (got 4)"),
      std::string::npos);
  const Scenario autos = parse_scenario(t, "s.yaml", with({{"cluster.fabric.tiers", "auto"}}));
  EXPECT_EQ(autos.rail.tiers, 3);
  EXPECT_TRUE(autos.fabric_tiers_auto);
  EXPECT_EQ(autos.rail.spine_core.bandwidth, autos.rail.leaf_spine.bandwidth);
  EXPECT_NE(study::fabric_detail(autos).find(", 3 tiers by tiers: auto"), std::string::npos);
  EXPECT_EQ(
      parse_scenario(t, "s.yaml",
                     {{"cluster.nodes", "4"}, {"parallelism.dp", "auto"}, {"cluster.fabric.tiers", "auto"}})
          .rail.tiers,
      2);
  EXPECT_NE(error_of(t, with({{"cluster.fabric.tiers", "3"},
                              {"cluster.fabric.core_bandwidth", "400Gbps"},
                              {"cluster.nodes", "17"}}))
                .find("a k=8 3-tier rail-optimized fabric attaches 128 HCAs, but the cluster has 136"),
            std::string::npos);
  const Scenario idle = parse_scenario(t, "s.yaml",
                                       {{"cluster.fabric.core_bandwidth", "400Gbps"},
                                        {"cluster.fabric.tiers", "2"},
                                        {"cluster.nodes", "4"},
                                        {"parallelism.dp", "auto"}});
  ASSERT_EQ(idle.warnings.size(), 1U);
  EXPECT_EQ(idle.warnings[0],
            "cluster.fabric.core_bandwidth has no effect on a 2-tier rail-optimized fabric (core links exist "
            "with tiers: 3, or tiers: auto past 32 HCAs)");
}

// A leaf's k ports split r:1 into host ports and up-links: an
// oversubscription r with r + 1 not dividing k is an error at the key, with
// the file, under `tiers: auto` too (it escaped the loader there and named
// no file).
TEST(Scenario, OversubscriptionThatDoesNotSplitTheLeafNamesTheKey) {
  const std::string t =
      replaced(default_text(), "    type: leaf-spine\n    hosts_per_leaf: 8\n    spines: 8\n",
               "    type: fat-tree\n    k: 16\n    tiers: auto\n    oversubscription: 1\n");
  // (the key named once: helper 126)
  const std::string why =
      "4 does not divide the ports: a leaf of k = 16 ports cannot split 4:1 "
      "into host ports and up-links (r + 1 = 5 must divide k)";
  EXPECT_EQ(error_of(t, {Override{"cluster.fabric.oversubscription", "4"}}),
            "s.yaml (--set cluster.fabric.oversubscription): cluster.fabric.oversubscription: " + why);
  EXPECT_EQ(error_of(replaced(t, "oversubscription: 1", "oversubscription: 4")),
            "s.yaml:19:23: cluster.fabric.oversubscription: " + why);
  EXPECT_EQ(error_of(replaced(replaced(t, "tiers: auto", "tiers: 2"), "oversubscription: 1",
                              "oversubscription: 4")),
            "s.yaml:19:23: cluster.fabric.oversubscription: " + why);
  EXPECT_EQ(parse_scenario(t, "s.yaml", {Override{"cluster.fabric.oversubscription", "3"}})
                .fat_tree.oversubscription,
            3);
}

// With fewer than k leaves for a node's rails the fabric holds no HCA: the
// error says the bound on k, not "attaches 0 HCAs".
TEST(Scenario, RailFabricNeedsALeafPerRail) {
  const std::string t =
      replaced(default_text(), "    type: leaf-spine\n    hosts_per_leaf: 8\n    spines: 8\n",
               "    type: rail-optimized\n    k: 8\n");
  EXPECT_EQ(
      error_of(t, {Override{"cluster.fabric.k", "6"}, Override{"cluster.fabric.tiers", "2"}}),
      "s.yaml (--set cluster.fabric.k): cluster.fabric.k: a k=6 rail-optimized fabric has at most 6 leaves "
      "(one per spine port), fewer than a node's 8 rails (a leaf for each of its HCAs); k must be at least "
      "8, or tiers: 3");
  // Three tiers give each rail its own spines: k = 6 takes 3 rail groups.
  EXPECT_EQ(
      parse_scenario(t, "s.yaml", {{"cluster.fabric.k", "6"}, {"cluster.fabric.tiers", "auto"}}).rail.tiers,
      3);
}

// Under pytorch-eager a host key switches to the host model, taking the
// launch floors out of every kernel: without host_launch launches are then
// free, said (helper 87: host_iteration=0.001us cut a step by 29%).
TEST(Scenario, EagerHostModelWithoutALaunchCostIsWarnedAbout) {
  auto warnings = [](const std::vector<Override>& o) {
    std::vector<Override> all{{"training.framework", "pytorch-eager"}};
    all.insert(all.end(), o.begin(), o.end());
    return parse_scenario(default_text(), "d.yaml", all).warnings;
  };
  EXPECT_EQ(
      warnings({{"calibration.host_iteration", "0.001us"}}),
      std::vector<std::string>{
          "calibration.host_iteration: a host key under framework pytorch-eager switches to the host model, "
          "where kernels take their GPU time without their launch floors, and calibration.host_launch is not "
          "given (0): "
          "launches cost the host nothing (give host_launch, fit on your host: docs/calibration.md, \"Your "
          "own host\")"});
  EXPECT_EQ(warnings({{"calibration.host_iteration", "1ms"}, {"calibration.host_launch", "0us"}}).size(), 1U);
  EXPECT_TRUE(warnings({{"calibration.host_iteration", "1ms"}, {"calibration.host_launch", "30us"}}).empty());
  EXPECT_TRUE(warnings({{"calibration.host_launch", "0us"}}).empty());  // no switch: the floors stay
  EXPECT_TRUE(
      parse_scenario(default_text(), "d.yaml", {{"calibration.host_iteration", "1ms"}}).warnings.empty());
}

// The parallelism section is required though every key of it is optional:
// the error says what an empty one means (helper 89: nothing did).
TEST(Scenario, MissingParallelismSaysAnEmptyOneIsDataParallel) {
  const std::string block =
      "parallelism:\n  dp: 16\n  grad_sync: after-backward      # Megatron's DDP (the default); overlapped = "
      "PyTorch DDP buckets\n";
  const std::string none = replaced(default_text(), block, "");
  const std::string err = error_of(none);
  EXPECT_NE(err.find(": parallelism: missing required key (its keys are optional: `parallelism: {}` is data "
                     "parallelism over every GPU)"),
            std::string::npos)
      << err;
  const Scenario empty = parse_scenario(none + "parallelism: {}\n", "s.yaml");
  EXPECT_EQ(empty.plan.dp, 16);
  EXPECT_EQ(empty.plan.tp, 1);
  EXPECT_EQ(empty.plan.pp, 1);
}

TEST(Scenario, OverridesApplyAndNameTheirSource) {
  const Scenario s = parse_scenario(
      default_text(), "s.yaml",
      {Override{"cluster.nodes", "4"}, Override{"parallelism.dp", "32"}, Override{"model.layers", "12"}});
  EXPECT_EQ(s.gpus(), 32);
  EXPECT_EQ(s.model.layers, 12);
  EXPECT_EQ(s.model.hidden, 1280);  // the rest of the preset stays
  // A key set twice takes the last value (docs/cli.md).
  EXPECT_EQ(parse_scenario(default_text(), "s.yaml",
                           {Override{"cluster.nodes", "1"}, Override{"cluster.nodes", "2"}})
                .gpus(),
            16);
  try {
    (void)parse_scenario(default_text(), "s.yaml", {Override{"cluster.nodes", "0"}});
    FAIL();
  } catch (const ScenarioError& e) {
    EXPECT_EQ(std::string(e.what()), "s.yaml (--set cluster.nodes): cluster.nodes: must be positive, got 0");
  }
  EXPECT_THROW((void)parse_scenario(default_text(), "s.yaml", {Override{"name.x", "1"}}), ScenarioError);
  EXPECT_THROW((void)parse_override("novalue"), InputError);
}

// A hidden size given beside a preset keeps the preset's MLP width ratio
// unless ffn_hidden is given too (a GPT preset's MLP stays 4 x hidden).
TEST(Scenario, HiddenBesidePresetScalesItsMlp) {
  auto model = [](const std::string& fields) {
    return parse_scenario(replaced(default_text(), "preset: gpt2-large", "preset: gpt2-large\n" + fields), "s.yaml")
        .model;
  };
  EXPECT_EQ(model("  hidden: 2560\n  heads: 20").ffn_hidden, 4 * 2560);
  EXPECT_EQ(model("  hidden: 2560\n  heads: 20\n  ffn_hidden: 7000").ffn_hidden, 7000);
  EXPECT_EQ(model("  heads: 10").ffn_hidden, 5120);  // the preset's, hidden unchanged
  // The label says what differs from the preset, unless the model is named.
  EXPECT_EQ(model("  hidden: 2560\n  heads: 20").name, "gpt2-large (hidden 2560, ffn_hidden 10240)");
  EXPECT_EQ(model("  layers: 12").name, "gpt2-large (layers 12)");
  EXPECT_EQ(model("  layers: 36").name, "gpt2-large");  // the preset's own value
  // kv_heads as attention has them: gpt2-large has one per head (20), so 20
  // is no change; with 40 heads, 20 is (grouped-query attention).
  EXPECT_EQ(model("  kv_heads: 20").name, "gpt2-large");
  EXPECT_EQ(model("  kv_heads: 5").name, "gpt2-large (kv_heads 5)");
  EXPECT_EQ(model("  heads: 40").name, "gpt2-large (heads 40)");
  EXPECT_EQ(model("  heads: 40\n  kv_heads: 20").name, "gpt2-large (heads 40, kv_heads 20)");
  EXPECT_EQ(model("  heads: 40\n  kv_heads: 40").name, "gpt2-large (heads 40)");
  EXPECT_EQ(model("  layers: 12\n  name: small").name, "small");
  // Every architecture key, not the sizes alone (helper 125: a moe or a
  // boolean override kept the preset's label, so a sweep over one named
  // different models alike); a routing setting is no other model.
  EXPECT_EQ(model("  dropout: false\n  norm: rmsnorm").name, "gpt2-large (dropout false, norm rmsnorm)");
  EXPECT_EQ(model("  dropout: true").name, "gpt2-large");
  EXPECT_EQ(model("  moe: {experts: 8, top_k: 2}").name, "gpt2-large (moe.experts 8, moe.top_k 2)");
  EXPECT_EQ(model("  moe: {experts: 8, top_k: 2, expert_ffn_hidden: 5120, capacity_factor: 1.5}").name,
            "gpt2-large (moe.experts 8, moe.top_k 2)");  // 5120: the model's ffn_hidden
  EXPECT_EQ(model("  moe: {experts: 8, expert_ffn_hidden: 2560, moe_every: 2}").name,
            "gpt2-large (moe.experts 8, moe.expert_ffn_hidden 2560, moe.moe_every 2)");
  auto llama = [](const std::string& hidden) {
    return parse_scenario(replaced(replaced(default_text(), "preset: gpt2-large",
                                            "preset: llama3-8b\n  hidden: " + hidden),
                                   "dp: 16", "dp: 16\n  tp: 1"),
                          "s.yaml")
        .model.ffn_hidden;
  };
  EXPECT_EQ(llama("8192"), 28672);  // 14336 / 4096 = 3.5, as llama3-70b
  EXPECT_EQ(llama("4128"), 14448);  // 3.5 x 4128
}

// A --set that creates an unknown key (or a mapping of them) is named by the
// error about that key; an unknown key of the file keeps its position.
TEST(Scenario, UnknownKeyCreatedByAnOverrideNamesIt) {
  auto error = [](const std::string& text, const std::vector<Override>& o) {
    try {
      (void)parse_scenario(text, "s.yaml", o);
    } catch (const ScenarioError& e) {
      return std::make_pair(std::string(e.what()), e.option());
    }
    return std::make_pair(std::string("no error"), std::string());
  };
  const auto [msg, option] = error(default_text(), {{"bogus.key", "3"}});
  EXPECT_EQ(msg.rfind("s.yaml (--set bogus.key): bogus: unknown key (known here: backend, ", 0), 0U) << msg;
  EXPECT_EQ(option, "--set bogus.key");
  EXPECT_EQ(error(default_text(), {{"training.bogus.x", "3"}})
                .first.rfind("s.yaml (--set training.bogus.x): training.bogus: unknown key (known here: ", 0),
            0U);
  // The file's own unknown key, beside an override of a known one.
  const auto [file_msg, file_option] = error(default_text() + "bogus: 1\n", {{"training.micro_batch", "2"}});
  EXPECT_EQ(file_msg.rfind("s.yaml:", 0), 0U) << file_msg;
  EXPECT_NE(file_msg.find(": bogus: unknown key"), std::string::npos) << file_msg;
  EXPECT_EQ(file_option, "");
  // A prefix of a key is not its parent.
  EXPECT_EQ(error(default_text() + "bogus: 1\n", {{"bogus2.x", "1"}}).first.rfind("s.yaml:", 0), 0U);
}

// dp: auto (or left out) follows the GPU count; a fixed dp that no longer
// fits names the dp it would follow (a node sweep over a scenario fixing dp).
TEST(Scenario, DpAutoFollowsTheGpuCount) {
  auto with = [](const std::vector<Override>& o) { return parse_scenario(default_text(), "s.yaml", o); };
  EXPECT_EQ(with({{"cluster.nodes", "4"}, {"parallelism.dp", "auto"}}).plan.dp, 32);
  EXPECT_EQ(with({{"cluster.nodes", "4"}, {"parallelism.dp", "auto"}, {"parallelism.pp", "2"}}).plan.dp, 16);
  EXPECT_EQ(parse_scenario(replaced(default_text(), "dp: 16", "dp: auto"), "s.yaml").plan.dp, 16);
  auto error = [&](const std::vector<Override>& o) {
    try {
      (void)with(o);
    } catch (const ScenarioError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(
      error({{"cluster.nodes", "4"}}),
      "s.yaml:29:7: parallelism.dp: dp (16) must equal the number of GPUs (32), cluster.nodes x "
      "cluster.gpus_per_node = 4 x 8 = 32 (with parallelism.dp left out or `auto` it follows the GPU "
      "count: dp 32, and the global batch with it, micro_batch x dp without training.global_batch: 256, "
      "not 128)");
  // With a global batch given, the batch stays: only dp is said.
  EXPECT_EQ(error({{"cluster.nodes", "4"}, {"training.global_batch", "128"}}),
            "s.yaml:29:7: parallelism.dp: dp (16) must equal the number of GPUs (32), cluster.nodes x "
            "cluster.gpus_per_node = 4 x 8 = 32 (with parallelism.dp left out or `auto` it follows the GPU "
            "count: dp 32)");
  // No hint where tp x pp does not divide the GPUs.
  EXPECT_EQ(error({{"cluster.nodes", "4"}, {"parallelism.pp", "3"}}),
            "s.yaml:29:7: parallelism.dp: dp x tp x pp (16 x 1 x 3 = 48) must equal the number of GPUs (32), "
            "cluster.nodes x cluster.gpus_per_node = 4 x 8 = 32");
  EXPECT_EQ(error({{"parallelism.dp", "Auto"}}),
            "s.yaml (--set parallelism.dp): parallelism.dp: expected a whole number or auto, got 'Auto'");
  EXPECT_EQ(error({{"parallelism.dp", "-3"}}), "s.yaml (--set parallelism.dp): parallelism.dp: must be positive, got -3");
  EXPECT_EQ(error({{"parallelism.dp", "auto"}, {"parallelism.pp", "3"}}),
            "s.yaml (--set parallelism.dp): parallelism.dp: auto, and tp x pp (1 x 3 = 3) does not divide the 16 "
            "GPUs");
}

TEST(Scenario, OutputsSection) {
  const Scenario s = parse_scenario(default_text() + "outputs:\n  json: r.json\n  links: l.csv\n", "s.yaml");
  EXPECT_EQ(s.outputs.json, "r.json");
  EXPECT_EQ(s.outputs.links, "l.csv");
  EXPECT_EQ(s.outputs.trace, "");
  EXPECT_NE(error_of(default_text() + "outputs:\n  jsn: r.json\n")
                .find("outputs.jsn: unknown key, did you mean 'json'? (known here: json, links, trace, "
                      "trace_micro_batches, trace_ranks, "
                      "trace_transfers)"),
            std::string::npos);
}

TEST(Scenario, Ns3SectionKeysDefaultsAndOverrides) {
  // Defaults without the section: IB model, 4 KiB MTU, the measured segment.
  const Scenario d = parse_scenario(default_text(), "s.yaml");
  EXPECT_EQ(d.ns3.model, Ns3Settings::Model::InfiniBand);
  EXPECT_EQ(d.ns3.packets_per_segment, Ns3Settings::kDefaultPacketsPerSegment);
  EXPECT_EQ(d.ns3.mtu, Bytes::kib(4));
  EXPECT_EQ(d.ns3.num_vls, 1);
  EXPECT_FALSE(d.ns3.adaptive_routing);
  EXPECT_EQ(d.ns3.buffer, Bytes(0));
  const Scenario s =
      parse_scenario(default_text() +
                         "ns3:\n  model: point-to-point\n  packets_per_segment: 64\n  mtu: 2KiB\n"
                         "  num_vls: 4\n  adaptive_routing: true\n  buffer: 1MiB\n",
                     "s.yaml");
  EXPECT_EQ(s.backend, Backend{"flow"});  // accepted (and ignored) with the flow backend
  EXPECT_EQ(s.ns3.model, Ns3Settings::Model::PointToPoint);
  EXPECT_EQ(s.ns3.packets_per_segment, 64);
  EXPECT_EQ(s.ns3.mtu, Bytes::kib(2));
  EXPECT_EQ(s.ns3.num_vls, 4);
  EXPECT_TRUE(s.ns3.adaptive_routing);
  EXPECT_EQ(s.ns3.buffer, Bytes::mib(1));
  // --set creates the section.
  const Scenario o = parse_scenario(
      default_text(), "s.yaml", {Override{"ns3.packets_per_segment", "256"}, Override{"ns3.buffer", "0"}});
  EXPECT_EQ(o.ns3.packets_per_segment, 256);
  EXPECT_EQ(o.ns3.buffer, Bytes(0));
  EXPECT_EQ(error_of(default_text() + "ns3:\n  packets_per_segment: 0\n"),
            "s.yaml:33:24: ns3.packets_per_segment: must be positive, got 0");
  EXPECT_NE(error_of(default_text() + "ns3:\n  mtu: 1000B\n")
                .find("ns3.mtu: an InfiniBand MTU is 256B, 512B, 1KiB, 2KiB or 4KiB, got 1000B"),
            std::string::npos);
  EXPECT_NE(error_of(default_text() + "ns3:\n  model: ethernet\n")
                .find("ns3.model: unknown model 'ethernet' (expected infiniband or point-to-point)"),
            std::string::npos);
  // The buffer must hold one segment's credits, of the segment size given
  // anywhere in the section: 16 packets of 4096 + 30 B in whole 64-byte
  // blocks, 16 x 4160 = 66560 B (16 x 4126 = 66016 B of wire bytes fell
  // short of the credits the model now counts; helper 59).
  for (const char* short_of : {"64KiB", "66016B", "66559B"}) {
    EXPECT_NE(error_of(default_text() + "ns3:\n  buffer: " + short_of + "\n  packets_per_segment: 16\n")
                  .find("ns3.buffer: must be 0 (auto) or hold one segment's credits"),
              std::string::npos)
        << short_of;
  }
  EXPECT_NO_THROW(
      (void)parse_scenario(default_text() + "ns3:\n  buffer: 66560B\n  packets_per_segment: 16\n", "s.yaml"));
  // The credit counters hold 4 GiB less one 64-byte block (the buffer is
  // rounded up to whole blocks): more is an error at the key, whatever the
  // backend (helper 95: on flow 1TiB ran; helper 118: 4294967295 B passed
  // here and failed when the ns-3 fabric was built).
  EXPECT_EQ(error_of(default_text() + "ns3:\n  buffer: 1TiB\n"),
            "s.yaml:33:11: ns3.buffer: 1TiB is more than the credit counters hold, "
            "4294967232 B (4 GiB less one 64-byte credit block: a buffer is rounded up to whole blocks)");
  EXPECT_NE(error_of(default_text() + "ns3:\n  buffer: 4294967233B\n").find("more than the credit counters"),
            std::string::npos);
  EXPECT_NO_THROW((void)parse_scenario(default_text() + "ns3:\n  buffer: 4294967232B\n", "s.yaml"));
}

TEST(Scenario, HcasPerNodeDefaultsToOnePerGpuAndSharesWhenFewer) {
  const Scenario own = parse_scenario(default_text(), "s.yaml");
  EXPECT_EQ(own.cluster.hcas_per_node, 8);
  EXPECT_EQ(build_topology(own).count(topology::VertexKind::Hca), 0);
  EXPECT_EQ(own.collectives.auto_bandwidth, parse_bandwidth("400Gbps"));
  const Scenario shared =
      parse_scenario(default_text(), "s.yaml",
                     {Override{"cluster.hcas_per_node", "2"}, Override{"cluster.pcie_bandwidth", "32GB/s"}});
  EXPECT_EQ(shared.cluster.hcas_per_node, 2);
  EXPECT_EQ(shared.cluster.pcie_bandwidth, parse_bandwidth("32GB/s"));
  EXPECT_EQ(shared.cluster.pcie_latency, parse_time("500ns"));  // documented default
  // Without the key, the GPU preset's PCIe generation: H100-SXM 5.0, an
  // A100 4.0 (helper 173: 64 GB/s for every GPU), an inline GPU 5.0.
  const Override share{"cluster.hcas_per_node", "2"};
  EXPECT_EQ(parse_scenario(default_text(), "s.yaml", {share}).cluster.pcie_bandwidth,
            parse_bandwidth("64GB/s"));
  EXPECT_EQ(parse_scenario(default_text(), "s.yaml", {share, Override{"cluster.gpu", "A100-80GB"}})
                .cluster.pcie_bandwidth,
            parse_bandwidth("32GB/s"));
  const auto t = build_topology(shared);
  EXPECT_EQ(t.count(topology::VertexKind::Hca), 2 * 2);
  EXPECT_EQ(t.count_links()[static_cast<std::size_t>(topology::LinkTier::Pcie)], 2 * 16);
  // Auto's per-rank bandwidth: four GPUs share each 400 Gb/s HCA.
  EXPECT_EQ(shared.collectives.auto_bandwidth, parse_bandwidth("100Gbps"));
  EXPECT_NE(error_of(replaced(default_text(), "  nic_bandwidth: 400Gbps",
                              "  hcas_per_node: 0\n  nic_bandwidth: 400Gbps"))
                .find("cluster.hcas_per_node: must be positive, got 0"),
            std::string::npos);
}

TEST(Scenario, FrameworkProfilesAndCalibrationSection) {
  // Megatron by default: fused Adam, clipping, the fitted host constants,
  // Megatron-LM's exchanges without DeepSpeed's per-exchange cost.
  const Scenario m = parse_scenario(default_text(), "default.yaml");
  EXPECT_EQ(m.workload.framework, node_model::Framework::Megatron);
  EXPECT_TRUE(m.plan.fused_optimizer);
  EXPECT_TRUE(m.plan.grad_clipping);
  EXPECT_EQ(m.workload.host.per_launch, m.calibration.host_launch);
  EXPECT_GT(m.workload.host.per_launch, Time::zero());
  EXPECT_EQ(m.workload.host.per_p2p, Time::zero());
  EXPECT_EQ(m.workload.host.per_micro_batch, m.calibration.host_microbatch);
  EXPECT_GT(m.workload.host.per_micro_batch, Time::zero());
  EXPECT_EQ(m.plan.grad_sync, parallelism::GradSync::AfterBackward);
  EXPECT_DOUBLE_EQ(m.calibration.comm.sm_slowdown, 0.0);
  EXPECT_GT(m.calibration.comm.nvlink.launch_latency, Time::zero());
  // DeepSpeed's pipeline engine: a host cost per exchange.
  const Scenario ds =
      parse_scenario(default_text() + "", "d.yaml", {{"training.framework", "megatron-deepspeed"}});
  EXPECT_GT(ds.workload.host.per_p2p, Time::zero());
  // Eager: PyTorch Adam, no clipping, no host model.
  const Scenario e = parse_scenario(default_text(), "e.yaml", {{"training.framework", "pytorch-eager"}});
  EXPECT_FALSE(e.plan.fused_optimizer);
  EXPECT_FALSE(e.plan.grad_clipping);
  EXPECT_FALSE(e.workload.host.enabled());
  // Eager: zero_grad(set_to_none=True) by default (PyTorch 2); `zeros`
  // adds every backward's gradients to .grad; Megatron refuses the key.
  EXPECT_FALSE(e.workload.profile.eager_accumulate_every_backward);
  const Scenario ez = parse_scenario(
      default_text(), "ez.yaml", {{"training.framework", "pytorch-eager"}, {"training.zero_grad", "zeros"}});
  EXPECT_TRUE(ez.workload.profile.eager_accumulate_every_backward);
  EXPECT_GT(study::simulate_scenario(ez, nullptr, nullptr, false).result.makespan.ms(),
            study::simulate_scenario(e, nullptr, nullptr, false).result.makespan.ms());
  EXPECT_NE(
      error_of(default_text(), {{"training.framework", "pytorch-eager"}, {"training.zero_grad", "never"}})
          .find("training.zero_grad: unknown zero_grad 'never' (expected set_to_none or zeros)"),
      std::string::npos);
  EXPECT_NE(error_of(default_text(), {{"training.zero_grad", "zeros"}})
                .find("training.zero_grad: applies to framework pytorch-eager only"),
            std::string::npos);
  // Eager with a host key given: the host model with that key alone (the
  // fitted Megatron constants stay out), and kernels on their GPU time.
  const Scenario eh = parse_scenario(default_text() + "calibration:\n  host_launch: 12us\n", "eh.yaml",
                                     {{"training.framework", "pytorch-eager"}});
  EXPECT_TRUE(eh.workload.host.enabled());
  EXPECT_EQ(eh.workload.host.per_launch, Time::from_us(12));
  EXPECT_EQ(eh.workload.host.per_iteration, Time::zero());
  EXPECT_EQ(eh.workload.host.per_micro_batch, Time::zero());
  EXPECT_EQ(eh.workload.host.per_p2p, Time::zero());
  // A host key of 0 keeps the launch floors (the 4-GPU validation scenarios).
  const Scenario e0 = parse_scenario(default_text() + "calibration:\n  host_launch: 0s\n", "e0.yaml",
                                     {{"training.framework", "pytorch-eager"}});
  EXPECT_FALSE(e0.workload.host.enabled());
  // With the host model an eager iteration no longer pays NeuSight's launch
  // floors: the default scenario's kernels are large, so it changes little,
  // but it changes.
  const double floors = study::simulate_scenario(e, nullptr, nullptr, false).result.makespan.ms();
  const double hosted = study::simulate_scenario(eh, nullptr, nullptr, false).result.makespan.ms();
  EXPECT_NE(floors, hosted);
  // Every key of the section, and the planner keys.
  const std::string t =
      default_text() +
      "calibration:\n  host_launch: 12us\n  host_iteration: 3ms\n  host_p2p: 100us\n  host_microbatch: 2ms\n"
      "  nvlink_efficiency: 0.7\n  nvlink_group_penalty: 0.2\n  nvlink_launch: 10us\n"
      "  nvlink_step: 1us\n  network_efficiency: 0.8\n  network_group_penalty: 0\n"
      "  network_launch: 20us\n  network_step: 5us\n  overlap_slowdown: 0.1\n  clock_derate: 0.9\n"
      "  nvlink_skew: 70us\n  network_skew: 0.2ms\n";
  const Scenario c = parse_scenario(t, "c.yaml",
                                    {{"parallelism.tp_comm_overlap", "false"},
                                     {"parallelism.pipeline_scatter_gather", "false"},
                                     {"training.grad_accumulation_fusion", "false"}});
  EXPECT_EQ(c.workload.host.per_launch, Time::from_us(12));
  EXPECT_EQ(c.workload.host.per_iteration, Time::from_ms(3));
  EXPECT_EQ(c.workload.host.per_p2p, Time::from_us(100));
  EXPECT_EQ(c.workload.host.per_micro_batch, Time::from_ms(2));
  EXPECT_DOUBLE_EQ(c.calibration.comm.nvlink.peak_efficiency, 0.7);
  EXPECT_DOUBLE_EQ(c.calibration.comm.nvlink.group_penalty, 0.2);
  EXPECT_EQ(c.calibration.comm.nvlink.launch_latency, Time::from_us(10));
  EXPECT_EQ(c.calibration.comm.network.step_latency, Time::from_us(5));
  EXPECT_EQ(c.calibration.comm.nvlink.skew, Time::from_us(70));
  EXPECT_EQ(c.calibration.comm.network.skew, Time::from_us(200));
  EXPECT_EQ(m.calibration.comm.nvlink.skew, Time::zero());  // off unless set
  EXPECT_DOUBLE_EQ(c.calibration.comm.sm_slowdown, 0.1);
  // The node model sees derated peaks; the scenario keeps the datasheet's (MFU).
  EXPECT_DOUBLE_EQ(kernel_gpu(c).tensor_peak.per_second(), 0.9 * c.gpu.tensor_peak.per_second());
  EXPECT_DOUBLE_EQ(kernel_gpu(m).tensor_peak.per_second(), m.gpu.tensor_peak.per_second());
  EXPECT_FALSE(c.plan.tp_comm_overlap);
  EXPECT_FALSE(c.plan.pipeline_scatter_gather);
  EXPECT_FALSE(c.workload.profile.grad_accumulation_fusion);
  // Bad values name the key.
  EXPECT_NE(error_of(default_text() + "calibration:\n  overlap_slowdown: 2\n")
                .find("calibration.overlap_slowdown: must be between 0 and 0.9"),
            std::string::npos);
  EXPECT_NE(error_of(default_text() + "calibration:\n  host_launch: fast\n").find("calibration.host_launch"),
            std::string::npos);
  EXPECT_NE(error_of(default_text() + "calibration:\n  hots_launch: 1us\n")
                .find("calibration.hots_launch: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of(replaced(default_text(), "framework: megatron ", "framework: jax "))
                .find("unknown framework 'jax'"),
            std::string::npos);
}

TEST(Scenario, ZeroBubbleSchedulesFromYamlAndOverrides) {
  std::ifstream in(std::string(TESSERA_SCENARIO_DIR) + "/schedules.yaml");
  std::ostringstream text;
  text << in.rdbuf();
  const std::string yaml = replaced(text.str(), "schedule: 1f1b", "schedule: zb-h2");
  EXPECT_EQ(parse_scenario(yaml, "s.yaml").plan.schedule, parallelism::Schedule::ZeroBubbleH2);
  const Scenario h1 = parse_scenario(text.str(), "s.yaml", {Override{"parallelism.schedule", "zb-h1"}});
  EXPECT_EQ(h1.plan.schedule, parallelism::Schedule::ZeroBubbleH1);
  // virtual_stages: auto, so that run and sweep take the interleaved
  // schedule compare-schedules shows (helper 130: the file's 1 refused it).
  const Scenario inter =
      parse_scenario(text.str(), "s.yaml", {Override{"parallelism.schedule", "interleaved-1f1b"}});
  EXPECT_EQ(inter.plan.schedule, parallelism::Schedule::Interleaved1F1B);
  EXPECT_EQ(inter.plan.virtual_stages, 3);
  EXPECT_EQ(parse_scenario(text.str(), "s.yaml").plan.virtual_stages, 1);
  // Virtual stages are refused naming the key (line 38 of the file, its value at column 19).
  EXPECT_EQ(error_of(replaced(yaml, "virtual_stages: auto", "virtual_stages: 2")),
            "s.yaml:40:19: parallelism.virtual_stages: virtual_stages (2) must be 1 with schedule zb-h2: the "
            "zero-bubble schedules are implemented for one model chunk per pipeline rank");
}

TEST(Scenario, DefaultSendsHandCheckedNvlinkAndFabricBytes) {
  // default.yaml: GPT-2 Large, dp = 16 over N = 2 nodes of L = 8, FP32 main
  // gradients all-reduced by NCCL's ring as L = 8 rail-aligned rings, each
  // through all p = 16 ranks with 1/8 of the buffer. Parameters, vocab
  // padded to 50304, 1024 positions, 36 layers of hidden 1280:
  // 50304*1280 + 1024*1280 + 36*(12*1280^2 + 13*1280) + 2*1280 = 774,090,240,
  // so S = 4 B x 774,090,240 = 3,096,360,960 B per rank and iteration.
  // Per rank: 2(p-1)/p * S = 1.875 S in all, of which it sends 2(p-1)/p *
  // S/L = 0.234375 S between nodes (it leaves its node on one ring) and the
  // rest, 1.640625 S, inside the node; 16 ranks: fabric 3.75 S, NVLink 26.25 S.
  const Scenario s = parse_scenario(default_text(), "default.yaml");
  const RunReport r = make_report(s, simulate_scenario(s));
  const std::int64_t gradient_bytes = 4LL * 774'090'240;
  EXPECT_EQ(r.fabric_bytes, Bytes(15 * gradient_bytes / 4));
  EXPECT_EQ(r.nvlink_bytes, Bytes(105 * gradient_bytes / 4));
  EXPECT_EQ(r.bytes_sent, r.nvlink_bytes + r.fabric_bytes);
  const std::string json = format_json(r);
  EXPECT_NE(json.find(fmt::format("\"network_bytes\": {}, \"nvlink_bytes\": {}, \"fabric_bytes\": {},",
                                  30 * gradient_bytes, 105 * gradient_bytes / 4, 15 * gradient_bytes / 4)),
            std::string::npos)
      << json;
  EXPECT_NE(format_text(r).find(
                "Network              92.891 GB sent per iteration: 81.279 GB over NVLink within nodes, "
                "11.611 GB between nodes\n"),
            std::string::npos);
}

TEST(Scenario, FlashAttentionAndLlama3Keys) {
  EXPECT_FALSE(parse_scenario(default_text(), "s.yaml").workload.flash_attention);  // default: off
  const Scenario s = parse_scenario(default_text(), "s.yaml",
                                    {Override{"training.flash_attention", "true"}, Override{"model.preset", "llama3-8b"},
                                     Override{"cluster.gpu", "B200"}});
  EXPECT_TRUE(s.workload.flash_attention);
  EXPECT_EQ(s.model.name, "llama3-8b");
  EXPECT_FALSE(s.model.tied_embeddings);
  EXPECT_FALSE(s.model.learned_positions);
  EXPECT_EQ(s.gpu.sms, 148);
  const Scenario tied = parse_scenario(default_text(), "s.yaml",
                                       {Override{"model.preset", "llama3-8b"}, Override{"model.tied_embeddings", "true"}});
  EXPECT_TRUE(tied.model.tied_embeddings);
  EXPECT_NE(error_of(replaced(default_text(), "dtype: bf16", "dtype: bf16\n  flash_attention: 3")).find(
                "training.flash_attention"),
            std::string::npos);
  EXPECT_NE(error_of(replaced(default_text(), "dtype: bf16", "dtype: fp32\n  flash_attention: true"))
                .find("training.flash_attention: FlashAttention runs fp16 or bf16 only, as does fp8 "
                      "training's attention "
                      "(training.dtype is fp32)"),
            std::string::npos);
}

TEST(Scenario, MixtureOfExpertsAndExpertParallelKeys) {
  std::ifstream in(std::string(TESSERA_SCENARIO_DIR) + "/mixtral-ep.yaml");
  std::ostringstream text;
  text << in.rdbuf();
  const Scenario s = parse_scenario(text.str(), "mixtral-ep.yaml");
  EXPECT_EQ(s.model.name, "mixtral-8x7b");
  EXPECT_EQ(s.model.moe.experts, 8);
  EXPECT_EQ(s.model.moe.top_k, 2);
  EXPECT_EQ(s.plan.ep, 8);
  EXPECT_EQ(parse_scenario(default_text(), "s.yaml").plan.ep, 1);  // default: no expert parallelism
  // MoE fields beside a preset override it; a dense preset takes a moe section.
  const Scenario o =
      parse_scenario(text.str(), "mixtral-ep.yaml",
                     {Override{"model.moe.top_k", "1"}, Override{"model.moe.capacity_factor", "1.25"},
                      Override{"model.moe.imbalance", "1.1"}, Override{"parallelism.ep", "4"}});
  EXPECT_EQ(o.model.moe.top_k, 1);
  EXPECT_DOUBLE_EQ(o.model.moe.capacity_factor, 1.25);
  EXPECT_DOUBLE_EQ(o.model.moe.imbalance, 1.1);
  EXPECT_EQ(o.plan.ep, 4);
  // An imbalance is between expert-parallel ranks: with ep 1 it does
  // nothing, said (helper 90).
  EXPECT_TRUE(parse_scenario(text.str(), "mixtral-ep.yaml",
                             {Override{"model.moe.imbalance", "1.5"}, Override{"parallelism.ep", "4"}})
                  .warnings.empty());
  EXPECT_EQ(
      parse_scenario(text.str(), "mixtral-ep.yaml",
                     {Override{"model.moe.imbalance", "1.5"}, Override{"parallelism.ep", "1"}})
          .warnings,
      std::vector<std::string>{
          "parallelism.ep = 1: model.moe.imbalance (1.5) has no effect (a rank computes every expert for "
          "its own tokens, whatever the routing; the imbalance is between expert-parallel ranks)"});
  const Scenario d = parse_scenario(
      replaced(default_text(), "preset: gpt2-large",
               "preset: gpt2-large\n  moe: {experts: 16, top_k: 2, moe_every: 2, expert_ffn_hidden: 1280, "
               "shared_experts: 1, first_dense_layers: 0}"),
      "s.yaml", {Override{"parallelism.ep", "8"}});
  EXPECT_EQ(d.model.moe.experts, 16);
  EXPECT_EQ(d.model.moe.moe_every, 2);
  EXPECT_EQ(d.model.moe.expert_ffn_hidden, 1280);
  EXPECT_EQ(d.model.moe.shared_experts, 1);
  EXPECT_EQ(d.model.moe_layers_in(0, d.model.layers), 18);  // gpt2-large: 36 layers, every other one
  EXPECT_EQ(d.plan.ep, 8);

  // Bad input: one line naming the key and the numbers.
  auto error = [&](const std::vector<Override>& o) {
    try {
      (void)parse_scenario(text.str(), "m.yaml", o);
    } catch (const ScenarioError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error({Override{"parallelism.ep", "16"}}),
            "m.yaml (--set parallelism.ep): parallelism.ep: ep (16) must divide the model's experts (8)");
  EXPECT_EQ(
      error({Override{"parallelism.dp", "4"}, Override{"parallelism.tp", "4"}}),
      "m.yaml:38:7: parallelism.ep: ep (8) must divide dp (4): expert-parallel groups are carved out of the "
      "data-parallel ranks (experts across tensor-parallel ranks are not supported)");
  EXPECT_EQ(
      error({Override{"model.moe.top_k", "9"}}),
      "m.yaml (--set model.moe.top_k): model.moe.top_k: model 'mixtral-8x7b': moe.top_k (9) must not exceed "
      "moe.experts (8)");
  EXPECT_EQ(
      error({Override{"model.moe.first_dense_layers", "32"}}),
      "m.yaml (--set model.moe.first_dense_layers): model.moe.first_dense_layers: model 'mixtral-8x7b': "
      "moe.first_dense_layers (32) leaves no MoE layer among the 32 "
      "layers");
  // One range, said with why (helper 99: 0.001 was "between 0.01 and 100",
  // 0.5 "at least 1").
  const std::string drops =
      ": below 1 an expert drops tokens, which the model does not represent (1: dropless)";
  EXPECT_EQ(error({Override{"model.moe.capacity_factor", "0"}}),
            "m.yaml (--set model.moe.capacity_factor): model.moe.capacity_factor: must be between 1 and 100, "
            "got 0" +
                drops);
  EXPECT_EQ(error({Override{"model.moe.capacity_factor", "0.5"}}),
            "m.yaml (--set model.moe.capacity_factor): model.moe.capacity_factor: must be between 1 and 100, "
            "got 0.5" +
                drops);
  EXPECT_EQ(error({Override{"model.moe.capacity_factor", "101"}}),
            "m.yaml (--set model.moe.capacity_factor): model.moe.capacity_factor: must be between 1 and 100, "
            "got 101");
  EXPECT_NE(error({Override{"model.moe.expertz", "3"}}).find("model.moe.expertz: unknown key"),
            std::string::npos);
  EXPECT_EQ(error({Override{"model.preset", "llama3-8b"}}),
            "m.yaml:38:7: parallelism.ep: ep (8) needs a mixture-of-experts model (model.moe.experts)");
}

// The routing the forecast assumes is in the report (helper 99: an
// imbalance of 1.25 moved the iteration 15% and the report did not say it):
// the text's Model line when it is not the even dropless default, the JSON's
// "moe" object always for an MoE model, none for a dense one.
TEST(Scenario, MoeRoutingIsInTheReport) {
  std::ifstream in(std::string(TESSERA_SCENARIO_DIR) + "/mixtral-ep.yaml");
  std::ostringstream text;
  text << in.rdbuf();
  auto report = [&](const std::vector<Override>& o) {
    const Scenario s = parse_scenario(text.str(), "m.yaml", o);
    return make_report(s, simulate_scenario(s, nullptr, nullptr, false));
  };
  const RunReport even = report({});
  EXPECT_NE(format_text(even).find("12.88 B active per token (top 2 of 8 experts)\n"), std::string::npos)
      << format_text(even);
  EXPECT_NE(format_json(even).find("\"moe\": {\"experts\": 8, \"top_k\": 2, \"shared_experts\": 0, "
                                   "\"capacity_factor\": 1.000000, \"imbalance\": 1.000000, "
                                   "\"load_factor\": 1.000000}"),
            std::string::npos);
  const RunReport busy = report({Override{"model.moe.imbalance", "1.25"}});
  EXPECT_NE(
      format_text(busy).find("(top 2 of 8 experts, busiest expert-parallel rank 1.25x the average: every "
                             "rank modelled as it, in time and all-to-all bytes)\n"),
      std::string::npos)
      << format_text(busy);
  EXPECT_NE(format_json(busy).find("\"imbalance\": 1.250000, \"load_factor\": 1.250000}"), std::string::npos);
  EXPECT_GT(busy.iteration_time, even.iteration_time);
  // Under a capacity the padding is the load, at any ep; with ep 1 an
  // imbalance loads nothing.
  const RunReport padded = report({Override{"model.moe.capacity_factor", "1.5"}});
  EXPECT_NE(
      format_text(padded).find("(top 2 of 8 experts, capacity factor 1.5: every expert padded to it)\n"),
      std::string::npos)
      << format_text(padded);
  const RunReport local = report({Override{"model.moe.imbalance", "1.25"}, Override{"parallelism.ep", "1"}});
  EXPECT_DOUBLE_EQ(local.load_factor, 1.0);
  EXPECT_NE(format_text(local).find("(top 2 of 8 experts)\n"), std::string::npos);
  const Scenario dense = parse_scenario(default_text(), "s.yaml");
  EXPECT_EQ(
      format_json(make_report(dense, simulate_scenario(dense, nullptr, nullptr, false))).find("\"moe\""),
      std::string::npos);
}

TEST(Scenario, Fp8IsFasterThanBf16ButNotTwiceAsFast) {
  // scenarios/llama3-70b(-fp8).yaml on 4 nodes (tp 8, pp 4, dp 1, 16
  // micro-batches): the same run but for the layer GEMMs' dtype.
  auto small = [](const std::string& file) {
    std::ifstream in(std::string(TESSERA_SCENARIO_DIR) + "/" + file);
    std::ostringstream s;
    s << in.rdbuf();
    std::string t = replaced(s.str(), "nodes: 64", "nodes: 4");
    t = replaced(t, "dp: 16", "dp: 1");
    return replaced(t, "global_batch: 256", "global_batch: 16");
  };
  const Scenario b = parse_scenario(small("llama3-70b.yaml"), "b.yaml");
  const Scenario f = parse_scenario(small("llama3-70b-fp8.yaml"), "f.yaml");
  ASSERT_TRUE(f.workload.profile.fp8);
  const RunReport rb = make_report(b, simulate_scenario(b));
  const RunReport rf = make_report(f, simulate_scenario(f));
  const double tb = rb.iteration_time.seconds(), tf = rf.iteration_time.seconds();
  EXPECT_LT(tf, tb);
  EXPECT_GT(2 * tf, tb);
  // The same model FLOPs (the casts are not model FLOPs), and MFU against
  // the dense BF16 peak (989.4 TFLOP/s on H100 SXM), not the FP8 one.
  EXPECT_NEAR(rf.tflops_per_gpu * tf, rb.tflops_per_gpu * tb, 1e-9 * rb.tflops_per_gpu * tb);
  EXPECT_NEAR(rf.mfu, rf.tflops_per_gpu / 989.4, 1e-12);
  EXPECT_GT(rf.mfu, rb.mfu);
  // And against the dense FP8 peak (1978.9 TFLOP/s), said beside it, so that
  // an MFU above 100% of the BF16 peak reads for what it is.
  EXPECT_NEAR(rf.mfu_fp8_peak, rf.tflops_per_gpu / 1978.9, 1e-12);
  EXPECT_EQ(rb.mfu_fp8_peak, 0.0);
  EXPECT_NE(format_text(rf).find(fmt::format("(against the FP8 peak: MFU {:.1f}%)", 100 * rf.mfu_fp8_peak)),
            std::string::npos);
  // The text says FP8 GEMM times are unvalidated, for fp8 runs only.
  const std::string line = "FP8            layer GEMMs in FP8, timed unvalidated";
  EXPECT_NE(format_text(rf).find(line), std::string::npos);
  EXPECT_EQ(format_text(rb).find("FP8"), std::string::npos);
  EXPECT_NE(format_json(rf).find(
                fmt::format("\"fp8\": {{\"gemm_times\": \"unvalidated\", \"memory\": \"transformer-engine\", "
                            "\"mfu_peak\": \"bf16\", \"mfu_fp8_peak\": {:.6f}}}",
                            rf.mfu_fp8_peak)),
            std::string::npos);
  EXPECT_EQ(format_json(rb).find("fp8"), std::string::npos);
  // The note compare-schedules and sweep print says which peak their MFU is
  // against (helper 109: it did not).
  EXPECT_NE(fp8_note(f).find("; MFU against the BF16 peak"), std::string::npos) << fp8_note(f);
  EXPECT_TRUE(fp8_note(b).empty());
  // `kernels` prints no MFU: its note names no peak (helper 125). Every
  // note says no FP8 data was fit and that memory is counted as Transformer
  // Engine keeps it.
  EXPECT_EQ(fp8_note(f, false).find("MFU"), std::string::npos) << fp8_note(f, false);
  for (const std::string& note : {fp8_note(f), fp8_note(f, false), format_text(rf)}) {
    EXPECT_NE(note.find("fit on no FP8 data"), std::string::npos) << note;
    EXPECT_NE(note.find("memory as Transformer Engine keeps it"), std::string::npos) << note;
  }
  // Memory: the cached FP8 weights and transposes as a part of their own,
  // in the text and the JSON (fp8 runs only), the same on every stage (20
  // layers each: 4,278,190,080 bytes, Memory.Fp8CachesEachLinearsFp8WeightAndTranspose);
  // the activations less than bf16's (FP8 saved inputs).
  ASSERT_EQ(rf.memory.size(), 4U);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(rf.memory[i].fp8_weights, Bytes(4'278'190'080));
    EXPECT_EQ(rb.memory[i].fp8_weights, Bytes(0));
    EXPECT_LT(rf.memory[i].activations, rb.memory[i].activations);
    EXPECT_EQ(rf.memory[i].weights, rb.memory[i].weights);
  }
  EXPECT_NE(format_text(rf).find(fmt::format("\n  weights {:.1f}, fp8 weights 4.0, gradients ",
                                             rf.memory[0].weights.in_gib())),
            std::string::npos)
      << format_text(rf);
  EXPECT_EQ(format_text(rb).find("fp8 weights"), std::string::npos);
  EXPECT_NE(format_json(rf).find("\"fp8_weights_bytes\": 4278190080, \"gradients_bytes\""),
            std::string::npos);
  EXPECT_EQ(format_json(rb).find("fp8_weights_bytes"), std::string::npos);
}

// run --json gives the fullest stage's memory and its GPU's at the top, as
// sweep, search and a job's report name them (peak_memory_bytes,
// memory_capacity_bytes).
TEST(Report, JsonGivesTheFullestStagesMemoryAsTheOtherCommands) {
  const Scenario d =
      parse_scenario(default_text(), "d.yaml", {{"parallelism.dp", "auto"}, {"parallelism.pp", "2"}});
  const RunReport r = make_report(d, simulate_scenario(d));
  ASSERT_EQ(r.memory.size(), 2U);
  // The last stage holds the output layer and its logits: the fuller.
  ASSERT_GT(r.memory[1].total, r.memory[0].total);
  EXPECT_NE(format_json(r).find(
                fmt::format("\"peak_memory_bytes\": {}, \"memory_capacity_bytes\": {}, \"oom\": false",
                            r.memory[1].total.count(), Bytes::gib(80).count())),
            std::string::npos)
      << format_json(r);
  // With mixed GPUs the stage fullest for its GPU: schedules.yaml's stage
  // 0 on a node of 40 GB A100s (the others 80 GB), under GPipe with 32
  // micro-batches in flight, holds fewer bytes than the last stage (about
  // 50 against 62 GiB) but does not fit; the pair says so.
  std::ifstream in(std::string(TESSERA_SCENARIO_DIR) + "/schedules.yaml");
  std::ostringstream schedules;
  schedules << in.rdbuf();
  const Scenario m = parse_scenario(schedules.str(), "m.yaml",
                                    {{"mixed_gpus.gpu", "A100-40GB"},
                                     {"mixed_gpus.nodes", "0"},
                                     {"parallelism.schedule", "gpipe"},
                                     {"training.global_batch", "128"}});
  const RunReport rm = make_report(m, simulate_scenario(m));
  ASSERT_GT(rm.memory.back().total, rm.memory.front().total);
  ASSERT_TRUE(rm.memory.front().oom);
  EXPECT_EQ(rm.fullest, 0U);
  EXPECT_NE(format_json(rm).find(
                fmt::format("\"peak_memory_bytes\": {}, \"memory_capacity_bytes\": {}, \"oom\": true",
                            rm.memory.front().total.count(), Bytes::gib(40).count())),
            std::string::npos)
      << format_json(rm);
  // The text's Memory line names it too (the bytes' range alone hid it).
  EXPECT_NE(format_text(rm).find(fmt::format("; fullest for its GPU: stage 0, {:.1f} of 40.0 GiB\n",
                                             rm.memory.front().total.in_gib())),
            std::string::npos)
      << format_text(rm);
}

TEST(Report, DefaultScenarioHasOnlyTheHopperBias) {
  // H100, bf16, tp 1: measurements back its kernels (no Untested GPU line)
  // and no bias is known for its plan, but the model's GPU time of bf16
  // steps on Hopper is short (node_model::known_bias_note): that alone.
  const Scenario d = parse_scenario(default_text(), "d.yaml");
  const RunReport r = make_report(d, simulate_scenario(d));
  EXPECT_TRUE(r.untested_gpu.empty());
  EXPECT_EQ(format_text(r).find("Untested GPU"), std::string::npos);
  EXPECT_EQ(format_json(r).find("untested_gpu"), std::string::npos);
  const std::string hopper = node_model::known_bias_note(d.gpu, d.workload.dtype);
  ASSERT_EQ(hopper.rfind("H100-SXM at bf16: ", 0), 0U) << hopper;
  EXPECT_EQ(r.known_bias, std::vector{hopper});
  EXPECT_NE(format_text(r).find("\nKnown bias     " + hopper + "\nUntested scale 2 nodes: "),
            std::string::npos)
      << format_text(r);
  EXPECT_NE(format_json(r).find("\"known_bias\": [" + json_string(hopper) + "]"), std::string::npos);
  // Its 2 nodes: no multi-node run was measured (helpers 64, 66), in text and
  // JSON; on one node neither.
  EXPECT_EQ(
      r.untested_scale.rfind("2 nodes: no multi-node run was measured here (the fits are single-node)", 0),
      0U)
      << r.untested_scale;
  EXPECT_NE(format_text(r).find("\nUntested scale " + r.untested_scale + "\nIteration "), std::string::npos);
  EXPECT_NE(format_json(r).find("\"untested_scale\": " + json_string(r.untested_scale) + ", "),
            std::string::npos);
  EXPECT_NE(r.untested_scale.find("network constants that are assumptions"), std::string::npos);
  // The network constants of the scenario's own (a validate collectives
  // fit pasted): not called assumptions to replace (helper 78); a skew, a
  // what-if, leaves the shipped line.
  const std::string own_network = multi_node_note(parse_scenario(
      default_text() + "calibration:\n  network_efficiency: 0.85\n  network_launch: 20us\n", "n.yaml"));
  EXPECT_EQ(own_network, std::string("2 nodes: ") + std::string(kMultiNodeCalibratedCaveat));
  EXPECT_NE(own_network.find("the network constants of the scenario's calibration: section"),
            std::string::npos);
  EXPECT_EQ(multi_node_note(parse_scenario(default_text(), "k.yaml", {{"calibration.network_skew", "5us"}})),
            r.untested_scale);
  const Scenario one =
      parse_scenario(default_text(), "o.yaml", {{"cluster.nodes", "1"}, {"parallelism.dp", "8"}});
  const RunReport ro = make_report(one, simulate_scenario(one));
  EXPECT_TRUE(ro.untested_scale.empty());
  EXPECT_EQ(format_text(ro).find("Untested scale"), std::string::npos);
  EXPECT_EQ(format_json(ro).find("untested_scale"), std::string::npos);
  // On A100s, neither caveat line nor JSON key.
  const Scenario a = parse_scenario(default_text(), "a.yaml", {{"cluster.gpu", "A100-80GB"}});
  const RunReport ra = make_report(a, simulate_scenario(a));
  const std::string text = format_text(ra);
  const std::string json = format_json(ra);
  EXPECT_TRUE(ra.untested_gpu.empty());
  EXPECT_TRUE(ra.known_bias.empty());
  for (const auto& [line, key] :
       {std::pair{"Untested GPU", "untested_gpu"}, std::pair{"Known bias", "known_bias"}}) {
    EXPECT_EQ(text.find(line), std::string::npos) << text;
    EXPECT_EQ(json.find(key), std::string::npos) << json;
  }
}

TEST(Report, UntestedGpuLineOnlyForGenerationsNoMeasurementBacks) {
  // (The default scenario, on an H100, has none: DefaultScenarioHasOnlyTheHopperBias.)
  // A B200 cluster: the summary says its kernel times are extrapolated.
  const Scenario b = parse_scenario(default_text(), "b.yaml", {{"cluster.gpu", "B200"}});
  const RunReport rb = make_report(b, simulate_scenario(b));
  EXPECT_NE(format_text(rb).find(
                "\nUntested GPU   B200 (Blackwell): no kernel of this generation was measured here"),
            std::string::npos);
  EXPECT_NE(format_json(rb).find("\"untested_gpu\": [\"B200 (Blackwell): no kernel"), std::string::npos);
  // Some nodes of another, unmeasured GPU: that GPU is named too.
  const Scenario m =
      parse_scenario(default_text(), "m.yaml", {{"mixed_gpus.gpu", "MI300X"}, {"mixed_gpus.nodes", "1"}});
  const RunReport rm = make_report(m, simulate_scenario(m));
  ASSERT_EQ(rm.untested_gpu.size(), 1U);
  EXPECT_EQ(rm.untested_gpu[0].rfind("MI300X (AMD CDNA 3)", 0), 0U);
  EXPECT_NE(format_text(rm).find("\nMixed GPUs     1 node of MI300X (node 1; each stage's memory checked "
                                 "against its smallest GPU; MFU and HFU against H100-SXM's peak)\n"),
            std::string::npos)
      << format_text(rm);
  // Both unmeasured: a line each, the label on the first; --json lists
  // them.
  const Scenario bm =
      parse_scenario(default_text(), "bm.yaml",
                     {{"cluster.gpu", "B200"}, {"mixed_gpus.gpu", "MI300X"}, {"mixed_gpus.nodes", "1"}});
  const RunReport rbm = make_report(bm, simulate_scenario(bm));
  const std::string blackwell = node_model::extrapolation_note(bm.gpu, bm.workload.dtype);
  const std::string amd = node_model::extrapolation_note(bm.mixed_gpus->gpu, bm.workload.dtype);
  EXPECT_EQ(rbm.untested_gpu, (std::vector{blackwell, amd}));
  EXPECT_NE(format_text(rbm).find("\nUntested GPU   " + blackwell + "\n               " + amd + "\n"),
            std::string::npos)
      << format_text(rbm);
  EXPECT_NE(
      format_json(rbm).find("\"untested_gpu\": [" + json_string(blackwell) + ", " + json_string(amd) + "]"),
      std::string::npos);
  // Every node of the other GPU: "nodes", plural.
  const Scenario mm =
      parse_scenario(default_text(), "mm.yaml", {{"mixed_gpus.gpu", "MI300X"}, {"mixed_gpus.nodes", "0-1"}});
  EXPECT_NE(format_text(make_report(mm, simulate_scenario(mm)))
                .find("\nMixed GPUs     2 nodes of MI300X (nodes 0, 1; each stage's memory checked against "
                      "its smallest GPU; MFU and HFU against H100-SXM's peak)\n"),
            std::string::npos);
  // The same GPU on both: said once.
  const Scenario bb =
      parse_scenario(default_text(), "bb.yaml",
                     {{"cluster.gpu", "B200"}, {"mixed_gpus.gpu", "B200"}, {"mixed_gpus.nodes", "1"}});
  EXPECT_EQ(make_report(bb, simulate_scenario(bb)).untested_gpu, std::vector{blackwell});
}

TEST(Report, KnownBiasLineForWideTensorParallelism) {
  // (The default scenario, tp 1, has only its GPU's: DefaultScenarioHasOnlyTheHopperBias.)
  // 4-way tensor parallelism (GPT-2 Large has 20 heads): the summary says
  // the forecast is optimistic, the plan's bias first, then the H100's,
  // each a line (the label on the first); --json lists them.
  const Scenario t =
      parse_scenario(default_text(), "t.yaml", {{"parallelism.tp", "4"}, {"parallelism.dp", "4"}});
  const RunReport rt = make_report(t, simulate_scenario(t));
  const std::string tp = parallelism::known_bias_note(t.plan);
  const std::string hopper = node_model::known_bias_note(t.gpu, t.workload.dtype);
  EXPECT_EQ(tp.rfind("4-way tensor parallelism: ", 0), 0U) << tp;
  EXPECT_EQ(hopper.rfind("H100-SXM at bf16: ", 0), 0U) << hopper;
  EXPECT_EQ(rt.known_bias, (std::vector{tp, hopper}));
  EXPECT_NE(
      format_text(rt).find("\nKnown bias     " + tp + "\n               " + hopper + "\nUntested scale "),
      std::string::npos)
      << format_text(rt);
  EXPECT_NE(format_json(rt).find("\"known_bias\": [" + json_string(tp) + ", " + json_string(hopper) + "]"),
            std::string::npos);
  // On A100s the plan's alone.
  const Scenario a =
      parse_scenario(default_text(), "a.yaml",
                     {{"parallelism.tp", "4"}, {"parallelism.dp", "4"}, {"cluster.gpu", "A100-80GB"}});
  EXPECT_EQ(make_report(a, simulate_scenario(a)).known_bias,
            std::vector{parallelism::known_bias_note(a.plan)});
  // Some nodes of H200s among A100s: the H200's bias for the scenario
  // (known_bias_notes without the plan's: what every plan on them holds);
  // H200s among H100s: each GPU's, in that order.
  const Scenario m =
      parse_scenario(default_text(), "m.yaml",
                     {{"cluster.gpu", "A100-80GB"}, {"mixed_gpus.gpu", "H200"}, {"mixed_gpus.nodes", "1"}});
  const std::string h200 = node_model::known_bias_note(m.mixed_gpus->gpu, m.workload.dtype);
  EXPECT_EQ(h200.rfind("H200 at bf16: ", 0), 0U);
  EXPECT_EQ(known_bias_notes(m, false), std::vector{h200});
  EXPECT_TRUE(known_bias_notes(a, false).empty());
  const Scenario hh =
      parse_scenario(default_text(), "hh.yaml", {{"mixed_gpus.gpu", "H200"}, {"mixed_gpus.nodes", "1"}});
  EXPECT_EQ(known_bias_notes(hh), (std::vector{hopper, h200}));
}

TEST(Scenario, Ns3KeysThatDoNothingAreWarnedAbout) {
  // A --set of an ns3 key on the flow backend does nothing: a warning. With
  // --backend ns3 it applies: none. A file's ns3 section is for a later
  // --backend ns3 and is not warned about.
  const Scenario flow = parse_scenario(default_text(), "d.yaml", {{"ns3.packets_per_segment", "1"}});
  ASSERT_EQ(flow.warnings.size(), 1U);
  EXPECT_EQ(flow.warnings[0],
            "ns3.packets_per_segment: the flow backend ignores the ns3 section (--backend ns3 uses it)");
  // Placed as an error at that key would be (helper 175: "d.yaml: --set ...").
  EXPECT_EQ(flow.warning_locations.at(flow.warnings[0]), "d.yaml (--set ns3.packets_per_segment)");
  EXPECT_TRUE(parse_scenario(default_text(), "d.yaml",
                             {{"ns3.packets_per_segment", "1"}, {"backend", "ns3", "--backend"}})
                  .warnings.empty());
  EXPECT_TRUE(parse_scenario(default_text() + "ns3:\n  packets_per_segment: 1\n", "d.yaml").warnings.empty());
  // The InfiniBand model's keys under point-to-point: one warning each.
  const Scenario p2p =
      parse_scenario(default_text() + "ns3:\n  model: point-to-point\n  num_vls: 2\n", "d.yaml",
                     {{"ns3.adaptive_routing", "true"}, {"backend", "ns3", "--backend"}});
  ASSERT_EQ(p2p.warnings.size(), 2U);
  EXPECT_EQ(p2p.warnings[0],
            "ns3.num_vls: ns3.model = point-to-point ignores it (it applies to the infiniband model)");
  EXPECT_EQ(p2p.warnings[1].rfind("ns3.adaptive_routing: ns3.model = point-to-point ignores it", 0), 0U);
}

// An uneven split of the layers over the pipeline is forecast, and said:
// gpt2-large's 36 layers on 16 GPUs.
TEST(Scenario, UnevenLayerSplitIsWarnedAbout) {
  auto warnings = [](const std::vector<Override>& o) {
    return parse_scenario(default_text(), "d.yaml", with_batch(o)).warnings;
  };
  EXPECT_EQ(warnings({{"parallelism.pp", "8"}, {"parallelism.dp", "2"}}),
            std::vector<std::string>{
                "model.layers (36) is not a multiple of the pipeline's stages, pp (8): the first "
                "4 stages get 5 layers, the other 4 get 4 (forecast as such; Megatron-LM "
                "refuses an uneven split unless told how to make it: parallelism.first_stage_layers: 3 and "
                "last_stage_layers: 3 give layers per stage 3, 5 (x6), 3)"});
  EXPECT_EQ(warnings({{"parallelism.pp", "2"},
                      {"parallelism.dp", "8"},
                      {"parallelism.schedule", "interleaved-1f1b"},
                      {"parallelism.virtual_stages", "5"},
                      {"training.global_batch", "128"}}),
            std::vector<std::string>{
                "model.layers (36) is not a multiple of the pipeline's chunks, pp x "
                "virtual_stages (2 x 5 = 10): the first 6 chunks get 4 layers, the other 4 get "
                "3 (forecast as such; Megatron-LM refuses an uneven split unless told how to make it)"});
  EXPECT_EQ(
      warnings({{"model.layers", "33"}, {"parallelism.pp", "16"}, {"parallelism.dp", "1"}})[0].rfind(
          "model.layers (33) is not a multiple of the pipeline's stages, pp (16): the first stage gets 3 "
          "layers, the other 15 get 2 (forecast as such; Megatron-LM refuses an uneven split unless told how "
          "to "
          "make it: parallelism.first_stage_layers: 3 gives layers per stage 3, 2 (x15))",
          0),
      0U);
  EXPECT_TRUE(warnings({{"parallelism.pp", "4"}, {"parallelism.dp", "4"}}).empty());
}

// Megatron-Core's --decoder-first/last-pipeline-num-layers as
// parallelism.first_stage_layers / last_stage_layers: gpt2-large's 36 layers
// over 8 stages as 8 + 4 x 6 + 4 (with no uneven-split warning: the plan
// says how); a split Megatron-Core refuses is an error at the key; the flag's
// names point to ours.
TEST(Scenario, FirstAndLastStageLayersSayHowToSplitThePipeline) {
  const std::vector<Override> pp8 = with_batch({{"parallelism.pp", "8"}, {"parallelism.dp", "2"}});
  auto with = [&](const std::vector<Override>& more) {
    std::vector<Override> o = pp8;
    o.insert(o.end(), more.begin(), more.end());
    return o;
  };
  const Scenario s =
      parse_scenario(default_text(), "d.yaml",
                     with({{"parallelism.first_stage_layers", "2"}, {"parallelism.last_stage_layers", "4"}}));
  EXPECT_EQ(s.plan.first_stage_layers, 2);
  EXPECT_EQ(s.plan.last_stage_layers, 4);
  EXPECT_EQ(parallelism::stage_layer_split(s.model.layers, s.plan),
            (std::vector<std::int64_t>{2, 5, 5, 5, 5, 5, 5, 4}));
  EXPECT_TRUE(s.warnings.empty()) << s.warnings[0];
  // The even split of 36 over 8 is warned about; the same plan told how is not.
  EXPECT_EQ(parse_scenario(default_text(), "d.yaml", pp8).warnings.size(), 1U);
  // virtual_stages auto under interleaving: the fewest chunks per rank
  // dividing every stage's layers (6, 12, 12, 6: 2).
  const Scenario v = parse_scenario(default_text(), "d.yaml",
                                    {{"parallelism.pp", "4"},
                                     {"parallelism.dp", "4"},
                                     {"parallelism.schedule", "interleaved-1f1b"},
                                     {"parallelism.first_stage_layers", "6"},
                                     {"parallelism.last_stage_layers", "6"},
                                     {"training.global_batch", "128"}});
  EXPECT_EQ(v.plan.virtual_stages, 2);  // 6, 12, 12, 6: the fewest dividing all
  EXPECT_EQ(parallelism::chunk_layers(v.model.layers, v.plan),
            (std::vector<std::int64_t>{3, 6, 6, 3, 3, 6, 6, 3}));
  // Refused where Megatron-Core refuses, at the key.
  EXPECT_EQ(error_of(default_text(), with({{"parallelism.last_stage_layers", "3"}})),
            "s.yaml (--set parallelism.last_stage_layers): parallelism.last_stage_layers: last_stage_layers "
            "(3) leaves 33 layers, which the other 7 stages cannot split evenly (Megatron-Core requires it)");
  EXPECT_EQ(
      error_of(default_text(), {{"parallelism.first_stage_layers", "4"}}),
      "s.yaml (--set parallelism.first_stage_layers): parallelism.first_stage_layers: first_stage_layers "
      "needs pp >= 2 (got pp 1: one stage holds every layer)");
  EXPECT_NE(error_of(default_text(), with({{"parallelism.last_stage_layers", "0"}})).find("must be positive"),
            std::string::npos);
  const std::string text = default_text();
  // Both given, refused together: the error is at last_stage_layers where
  // the command line set it alone (a sweep over it, the file giving
  // first_stage_layers), at first_stage_layers where the file gives both.
  const std::string first_in_file =
      replaced(text, "  dp: 16\n", "  dp: 2\n  pp: 8\n  first_stage_layers: 2\n");
  EXPECT_EQ(
      error_of(first_in_file, {{"parallelism.last_stage_layers", "5"}}),
      "s.yaml (--set parallelism.last_stage_layers): parallelism.last_stage_layers: first_stage_layers + "
      "last_stage_layers (2 + 5) leave 29 layers, which the other 6 stages cannot split evenly "
      "(Megatron-Core requires it)");
  const std::string both_in_file =
      replaced(text, "  dp: 16\n", "  dp: 2\n  pp: 8\n  first_stage_layers: 2\n  last_stage_layers: 5\n");
  EXPECT_TRUE(error_of(both_in_file).starts_with("s.yaml:")) << error_of(both_in_file);
  EXPECT_NE(
      error_of(both_in_file).find(": parallelism.first_stage_layers: first_stage_layers + last_stage_layers"),
      std::string::npos);
  const std::string flag =
      replaced(text, "  dp: 16\n", "  dp: 2\n  pp: 8\n  decoder_last_pipeline_num_layers: 4\n");
  EXPECT_NE(error_of(flag).find("parallelism.decoder_last_pipeline_num_layers: unknown key, did you mean "
                                "'last_stage_layers'?"),
            std::string::npos)
      << error_of(flag);
  // As typed on Megatron's command line, dashes and all (any flag).
  EXPECT_NE(error_of(text, {{"parallelism.decoder-first-pipeline-num-layers", "4"}})
                .find("unknown key, did you mean 'first_stage_layers'?"),
            std::string::npos);
  EXPECT_NE(error_of(text, {{"parallelism.--tensor-model-parallel-size", "2"}})
                .find("unknown key, did you mean 'tp'?"),
            std::string::npos);
}

// Megatron-Core's --account-for-embedding/loss-in-pipeline-split: keys of
// the plan, the uneven split's warning names them where they split evenly,
// and what Megatron-Core refuses is refused at the key.
TEST(Scenario, AccountForEmbeddingAndLossSplitThePipelineAsMegatronCoreDoes) {
  const std::vector<Override> pp8 =
      with_batch({{"parallelism.pp", "8"}, {"parallelism.dp", "2"}, {"model.layers", "30"}});
  auto with = [&](const std::vector<Override>& more) {
    std::vector<Override> o = pp8;
    o.insert(o.end(), more.begin(), more.end());
    return o;
  };
  const Scenario s = parse_scenario(
      default_text(), "d.yaml",
      with({{"parallelism.account_for_embedding", "true"}, {"parallelism.account_for_loss", "true"}}));
  EXPECT_TRUE(s.plan.account_for_embedding);
  EXPECT_TRUE(s.plan.account_for_loss);
  EXPECT_EQ(parallelism::stage_layer_split(s.model.layers, s.plan),
            (std::vector<std::int64_t>{3, 4, 4, 4, 4, 4, 4, 3}));
  EXPECT_TRUE(s.warnings.empty()) << s.warnings[0];
  // Without them the uneven split is warned about, naming both ways to tell it.
  const Scenario uneven = parse_scenario(default_text(), "d.yaml", pp8);
  ASSERT_EQ(uneven.warnings.size(), 1U);
  EXPECT_NE(uneven.warnings[0].find(
                "; or parallelism.account_for_embedding and account_for_loss: true give 3, 4 (x6), 3 (the "
                "embedding and the loss each counted as a layer)"),
            std::string::npos)
      << uneven.warnings[0];
  // virtual_stages auto: the fewest chunks that split the counted stages (4 each: 2).
  const Scenario v = parse_scenario(default_text(), "d.yaml",
                                    with({{"parallelism.account_for_embedding", "true"},
                                          {"parallelism.account_for_loss", "true"},
                                          {"parallelism.schedule", "interleaved-1f1b"},
                                          {"training.global_batch", "128"}}));
  EXPECT_EQ(v.plan.virtual_stages, 2);
  EXPECT_EQ(parallelism::chunk_layers(v.model.layers, v.plan),
            (std::vector<std::int64_t>{1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1}));
  // Refused at the key.
  EXPECT_EQ(
      error_of(default_text(), with({{"parallelism.account_for_loss", "true"}})),
      "s.yaml (--set parallelism.account_for_loss): parallelism.account_for_loss: account_for_loss counts "
      "the model's 30 layers + 1 (the loss) = 31, which do not split evenly over pp 8 (Megatron-Core "
      "requires it)");
  EXPECT_NE(
      error_of(default_text(), with({{"parallelism.account_for_embedding", "true"},
                                     {"parallelism.account_for_loss", "true"},
                                     {"parallelism.first_stage_layers", "2"}}))
          .find("parallelism.account_for_embedding: account_for_embedding and account_for_loss cannot be "
                "given with first_stage_layers"),
      std::string::npos);
  // Of the two alone, the warning names the one with the fewer layers on
  // the last stage (its LM head): 17 over pp 2 is 9, 8 counting the loss
  // (8, 9 counting the embedding); under `virtual_stages: auto` at the
  // chunks auto then takes (3: 9 and 9 - 1 in chunks of 3).
  const std::vector<Override> seventeen =
      with_batch({{"parallelism.pp", "2"}, {"parallelism.dp", "8"}, {"model.layers", "17"}});
  const Scenario loss = parse_scenario(default_text(), "d.yaml", seventeen);
  ASSERT_EQ(loss.warnings.size(), 1U);
  EXPECT_NE(
      loss.warnings[0].find(
          "parallelism.last_stage_layers: 8 gives layers per stage 9, 8; or parallelism.account_for_loss: "
          "true gives 9, 8 (the loss counted as a layer))"),
      std::string::npos)
      << loss.warnings[0];
  std::vector<Override> interleaved = seventeen;
  interleaved.push_back({"parallelism.schedule", "interleaved-1f1b"});
  interleaved.push_back({"training.global_batch", "128"});
  const Scenario auto_v = parse_scenario(default_text(), "d.yaml", interleaved);
  ASSERT_EQ(auto_v.warnings.size(), 1U);
  EXPECT_NE(auto_v.warnings[0].find(
                "told how to make it: parallelism.account_for_loss: true gives layers per stage 9, 8 at "
                "virtual_stages 3 (the loss counted as a layer))"),
            std::string::npos)
      << auto_v.warnings[0];
  interleaved.push_back({"parallelism.account_for_loss", "true"});
  const Scenario pasted = parse_scenario(default_text(), "d.yaml", interleaved);
  EXPECT_EQ(pasted.plan.virtual_stages, 3);
  EXPECT_TRUE(pasted.warnings.empty()) << pasted.warnings[0];
  // One stage: nothing to move, said.
  const Scenario one = parse_scenario(default_text(), "d.yaml", {{"parallelism.account_for_loss", "true"}});
  ASSERT_EQ(one.warnings.size(), 1U);
  EXPECT_EQ(one.warnings[0],
            "parallelism.account_for_loss has no effect with pp = 1 (it moves layers off the first and last "
            "pipeline stages)");
  // A chunk left with no layer is said as such, before pp x virtual_stages
  // exceeding the layers (32 chunks of 30 layers + 2).
  EXPECT_NE(error_of(default_text(), with({{"parallelism.account_for_embedding", "true"},
                                           {"parallelism.account_for_loss", "true"},
                                           {"parallelism.virtual_stages", "4"}}))
                .find("1 per model chunk, which leaves the first chunk no transformer layer"),
            std::string::npos);
  // Megatron's flag names, dashed or not: did you mean.
  EXPECT_NE(error_of(default_text(), with({{"parallelism.account-for-embedding-in-pipeline-split", "true"}}))
                .find("unknown key, did you mean 'account_for_embedding'?"),
            std::string::npos);
}

// A warning is placed as an error would be: at the value of the key it
// opens with (the deepest part of its path the file writes), or at the
// --set that set it; one opening with no key of the file has no place.
TEST(Scenario, WarningsArePlacedAtTheirKey) {
  const std::string text = replaced(default_text(), "nvlink_bandwidth: 450GB/s", "nvlink_bandwidth: 900GB/s");
  const Scenario file = parse_scenario(text, "s.yaml");
  ASSERT_EQ(file.warnings.size(), 1U);
  EXPECT_EQ(file.warnings[0].rfind("cluster.nvlink_bandwidth = 900GB/s is 2x", 0), 0U) << file.warnings[0];
  EXPECT_EQ(file.warning_locations.at(file.warnings[0]), "s.yaml:11:21");
  const Scenario set = parse_scenario(default_text(), "s.yaml", {{"cluster.nvlink_bandwidth", "900GB/s"}});
  EXPECT_EQ(set.warning_locations.at(set.warnings.at(0)), "s.yaml (--set cluster.nvlink_bandwidth)");
  // model.layers comes from the preset: placed at the model section the file writes.
  const Scenario uneven = parse_scenario(default_text(), "s.yaml",
                                         with_batch({{"parallelism.pp", "8"}, {"parallelism.dp", "2"}}));
  EXPECT_EQ(uneven.warning_locations.at(uneven.warnings.at(0)), "s.yaml:22:3");
  const Scenario softmax = parse_scenario(default_text(), "s.yaml",
                                          {{"model.heads", "16"},
                                           {"parallelism.dp", "2"},
                                           {"parallelism.tp", "8"},
                                           {"training.micro_batch", "1"}});
  ASSERT_EQ(softmax.warnings.size(), 1U);
  EXPECT_EQ(softmax.warnings[0].rfind("attention softmax unfused", 0), 0U);
  EXPECT_TRUE(softmax.warning_locations.empty());
}

TEST(Scenario, TensorParallelKeysWithoutTensorParallelismAreWarnedAbout) {
  // default.yaml: tp = 1, pp = 1. Each key given does nothing: one warning.
  auto warnings = [](const std::vector<Override>& o) {
    return parse_scenario(default_text(), "d.yaml", o).warnings;
  };
  EXPECT_EQ(warnings({{"parallelism.sequence_parallel", "true"}}),
            std::vector<std::string>{
                "parallelism.sequence_parallel has no effect with tp = 1 (it splits activations "
                "across a tensor-parallel group)"});
  EXPECT_EQ(warnings({{"parallelism.tp_comm_overlap", "false"}}).size(), 1U);
  EXPECT_EQ(warnings({{"parallelism.pipeline_scatter_gather", "false"}}).size(), 1U);
  EXPECT_TRUE(warnings({{"parallelism.sequence_parallel", "false"}}).empty());
  // With tensor parallelism they apply: none.
  EXPECT_TRUE(warnings({{"model.heads", "16"},
                        {"parallelism.dp", "4"},
                        {"parallelism.tp", "4"},
                        {"parallelism.sequence_parallel", "true"},
                        {"parallelism.tp_comm_overlap", "false"}})
                  .empty());
}

// Megatron's fused main-gradient accumulation under eager PyTorch, which has
// no main gradients: warned about as doing nothing (helper 114: silent).
TEST(Scenario, GradAccumulationFusionUnderEagerIsWarnedAbout) {
  auto warnings = [](const std::vector<Override>& o) {
    return parse_scenario(default_text(), "d.yaml", o).warnings;
  };
  EXPECT_EQ(
      warnings({{"training.framework", "pytorch-eager"}, {"training.grad_accumulation_fusion", "false"}}),
      std::vector<std::string>{
          "training.grad_accumulation_fusion has no effect under framework pytorch-eager (it fuses "
          "Megatron's FP32 main-gradient accumulation into the weight-gradient GEMMs)"});
  EXPECT_TRUE(warnings({{"training.grad_accumulation_fusion", "false"}}).empty());  // megatron
  EXPECT_TRUE(warnings({{"training.framework", "pytorch-eager"}}).empty());
}

// An empty --set value is said as such (it had the key.path=value form).
TEST(Scenario, EmptyOverrideValueIsNamed) {
  try {
    (void)parse_override("training.micro_batch=");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--set 'training.micro_batch=': the value is empty (expected key.path=value)");
  }
}

TEST(Scenario, BucketSizeWithOneReductionAfterTheBackwardIsWarnedAbout) {
  // default.yaml reduces all gradients after the backward (grad_sync:
  // after-backward): a bucket size does nothing there; with overlapped
  // buckets it applies.
  auto warnings = [](const std::vector<Override>& o) {
    return parse_scenario(default_text(), "d.yaml", with_batch(o)).warnings;
  };
  EXPECT_EQ(
      warnings({{"parallelism.bucket_size", "25MB"}}),
      std::vector<std::string>{
          "parallelism.bucket_size has no effect with grad_sync after-backward (all gradients are reduced "
          "at once after the backward; grad_sync: overlapped or overlap-grad-reduce reduces them in "
          "buckets)"});
  EXPECT_TRUE(
      warnings({{"parallelism.bucket_size", "25MB"}, {"parallelism.grad_sync", "overlap-grad-reduce"}})
          .empty());
  // Full recomputation under a zero-bubble schedule keeps W's stash (helper
  // 83: nothing said why recomputation saved so little); not under 1f1b.
  EXPECT_EQ(warnings({{"parallelism.schedule", "zb-h1"},
                      {"parallelism.recompute", "full"},
                      {"parallelism.pp", "2"},
                      {"parallelism.dp", "8"}}),
            std::vector<std::string>{
                "parallelism.recompute: full under zb-h1: B recomputes each layer and W keeps its linears' "
                "inputs and output gradients until it runs, more than full recomputation keeps, so this plan "
                "holds more activation memory than 1f1b with it (docs/parallelism.md, Memory model; tessera "
                "compare-schedules shows both)"});
  EXPECT_TRUE(warnings({{"parallelism.recompute", "full"}}).empty());
  // Selective recomputation with FlashAttention recomputes nothing (helper
  // 85): said; without FlashAttention, or full, nothing is.
  EXPECT_EQ(
      warnings({{"parallelism.recompute", "selective"},
                {"training.flash_attention", "true"},
                {"training.dtype", "bf16"}}),
      std::vector<std::string>{
          "parallelism.recompute: selective has no effect with training.flash_attention (FlashAttention "
          "keeps no attention scores, which is what selective recomputation recomputes: the plan holds "
          "what recompute: none holds; recompute: full recomputes whole layers)"});
  EXPECT_TRUE(warnings({{"parallelism.recompute", "selective"}}).empty());
  EXPECT_TRUE(warnings({{"parallelism.recompute", "full"},
                        {"training.flash_attention", "true"},
                        {"training.dtype", "bf16"}})
                  .empty());
  // PyTorch DDP (overlapped) under Megatron: Megatron-LM refuses it with bf16
  // (helper 79), said; with fp16 and one stage it runs, bucket and all.
  EXPECT_EQ(
      warnings({{"parallelism.bucket_size", "25MB"}, {"parallelism.grad_sync", "overlapped"}}),
      std::vector<std::string>{
          "parallelism.grad_sync: overlapped under framework megatron is Megatron-LM's "
          "--DDP-impl torch, which Megatron-LM refuses with bf16 (FP32 gradient accumulation) (it needs "
          "its own DDP: grad_sync after-backward or overlap-grad-reduce; Megatron-Core has no "
          "--DDP-impl torch)"});
  EXPECT_TRUE(warnings({{"parallelism.bucket_size", "25MB"},
                        {"parallelism.grad_sync", "overlapped"},
                        {"training.dtype", "fp16"}})
                  .empty());
  EXPECT_NE(
      warnings({{"parallelism.grad_sync", "overlapped"},
                {"training.dtype", "fp16"},
                {"parallelism.zero_stage", "1"},
                {"parallelism.pp", "2"},
                {"parallelism.dp", "8"}})
          .front()
          .find("refuses with the distributed optimizer (zero_stage 1) and with pipeline parallelism (pp 2)"),
      std::string::npos);
  // auto under the megatron profile resolves to after-backward: said so.
  const auto aut = warnings({{"parallelism.bucket_size", "25MB"}, {"parallelism.grad_sync", "auto"}});
  ASSERT_EQ(aut.size(), 1U);
  EXPECT_NE(aut[0].find("grad_sync auto (all gradients are reduced at once after the backward, the framework "
                        "profile's default;"),
            std::string::npos)
      << aut[0];
}

// Megatron's fused softmax refuses shapes its CUDA kernel does not take; the
// torch path then runs (a step in MFU between micro-batch sizes, helper 131):
// one warning naming why, the next micro-batch the kernel takes, and
// FlashAttention. 16 heads at tp 8: 2 per rank.
// FlashAttention 2 runs on Ampere and newer; a V100 (no BF16 tensor
// cores) is warned about (helper 132), an A100 not.
TEST(Scenario, FlashAttentionOnAGpuWithoutBf16IsWarnedAbout) {
  const std::vector<Override> v100{{"cluster.gpu", "V100-SXM2"},
                                   {"cluster.nvlink_bandwidth", "150GB/s"},
                                   {"training.dtype", "fp16"},
                                   {"training.flash_attention", "true"}};
  const Scenario s = parse_scenario(default_text(), "s.yaml", v100);
  ASSERT_EQ(s.warnings.size(), 1U);
  EXPECT_EQ(
      s.warnings[0].rfind("training.flash_attention on V100-SXM2: FlashAttention 2 runs on GPUs with BF16 "
                          "tensor cores (Ampere and newer)",
                          0),
      0U)
      << s.warnings[0];
  EXPECT_TRUE(parse_scenario(default_text(), "s.yaml",
                             {{"cluster.gpu", "A100-80GB"},
                              {"cluster.nvlink_bandwidth", "300GB/s"},
                              {"training.flash_attention", "true"}})
                  .warnings.empty());
}

TEST(Scenario, UnfusedSoftmaxIsWarnedWithWhatWouldFuseIt) {
  auto with = [&](const std::vector<std::pair<std::string, std::string>>& sets) {
    std::vector<Override> o{{"model.heads", "16"}, {"parallelism.dp", "2"}, {"parallelism.tp", "8"}};
    for (const auto& [k, v] : sets) o.push_back({k, v});
    return parse_scenario(default_text(), "s.yaml", o);
  };
  const Scenario mb1 = with({{"training.micro_batch", "1"}});
  ASSERT_EQ(mb1.warnings.size(), 1U);
  EXPECT_EQ(
      mb1.warnings[0],
      "attention softmax unfused: Megatron's fused softmax kernel takes micro_batch x heads per rank score "
      "matrices in multiples of 4 only (2 here), so its torch path runs (micro_batch 1 x 2 heads per rank, "
      "sequence 1024: FP32 scores, more time and activation memory; training.micro_batch 2 or "
      "training.flash_attention: true would use a fused kernel; docs/parallelism.md, \"Framework "
      "profiles\")");
  // 3 x 2 = 6 is no multiple of 4 either; 4 x 2 is.
  const Scenario mb3 = with({{"training.micro_batch", "3"}});
  ASSERT_EQ(mb3.warnings.size(), 1U);
  EXPECT_NE(mb3.warnings[0].find("(6 here)"), std::string::npos) << mb3.warnings[0];
  EXPECT_NE(mb3.warnings[0].find("training.micro_batch 4 or training.flash_attention"), std::string::npos)
      << mb3.warnings[0];
  EXPECT_TRUE(with({{"training.micro_batch", "2"}}).warnings.empty());
  EXPECT_TRUE(with({{"training.micro_batch", "1"}, {"training.flash_attention", "true"}}).warnings.empty());
  EXPECT_TRUE(with({{"training.micro_batch", "1"}, {"training.dtype", "fp32"}}).warnings.empty());
  EXPECT_TRUE(
      with({{"training.micro_batch", "1"}, {"training.framework", "pytorch-eager"}}).warnings.empty());
  // Megatron-DeepSpeed's kernel stops at 2048 keys: no micro-batch helps.
  const Scenario ds = with({{"training.framework", "megatron-deepspeed"}, {"training.seq_len", "4096"}});
  ASSERT_EQ(ds.warnings.size(), 1U);
  EXPECT_NE(ds.warnings[0].find("takes more than 16 and at most 2048 keys only (sequence 4096 here)"),
            std::string::npos)
      << ds.warnings[0];
  EXPECT_NE(ds.warnings[0].find("; training.flash_attention: true would use"), std::string::npos)
      << ds.warnings[0];
  EXPECT_TRUE(with({{"training.seq_len", "4096"}}).warnings.empty());  // Megatron-LM's takes 4096
}

TEST(Scenario, RankLayoutKeyAndTensorGroupsAcrossNodes) {
  // Default: Megatron's layout, no warning (tp = 1).
  const Scenario d = parse_scenario(default_text(), "d.yaml");
  EXPECT_TRUE(d.plan.layout.is_default());
  EXPECT_TRUE(d.warnings.empty());
  auto with = [&](const std::vector<std::pair<std::string, std::string>>& sets) {
    std::vector<Override> o{{"model.heads", "16"}};
    for (const auto& [k, v] : sets) o.push_back({k, v});
    return parse_scenario(default_text(), "s.yaml", with_batch(o));
  };
  // tp = 8 on 8-GPU nodes: one node per TP group.
  const Scenario tp8 = with({{"parallelism.dp", "2"}, {"parallelism.tp", "8"}});
  EXPECT_TRUE(tp8.warnings.empty());
  // tp = 16 on 8-GPU nodes: legal, one warning naming the keys.
  const Scenario tp16 = with({{"parallelism.dp", "1"}, {"parallelism.tp", "16"}});
  ASSERT_EQ(tp16.warnings.size(), 1U);
  EXPECT_NE(tp16.warnings[0].find("parallelism.tp = 16 spans nodes"), std::string::npos) << tp16.warnings[0];
  EXPECT_NE(tp16.warnings[0].find("cluster.gpus_per_node = 8"), std::string::npos) << tp16.warnings[0];
  // The layout key; dp innermost puts a tp = 8 group across both nodes.
  const Scenario dtp = with({{"parallelism.dp", "2"}, {"parallelism.tp", "8"}, {"parallelism.layout", "dp-tp-pp"}});
  EXPECT_EQ(parallelism::to_string(dtp.plan.layout), "dp-tp-pp");
  EXPECT_EQ(dtp.warnings.size(), 1U);
  // An expert- or data-parallel group across nodes is no warning.
  const Scenario tpp = with({{"parallelism.dp", "2"}, {"parallelism.tp", "4"}, {"parallelism.pp", "2"},
                             {"parallelism.layout", "tp-pp-dp"}});
  EXPECT_TRUE(tpp.warnings.empty());
  // A bad layout: one line naming the key and the accepted orders.
  const std::string e = error_of(replaced(default_text(), "  dp: 16\n", "  dp: 16\n  layout: tp-ep-pp\n"));
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_NE(e.find("parallelism.layout: unknown layout 'tp-ep-pp'"), std::string::npos) << e;
  EXPECT_NE(e.find("tp-dp-pp, tp-pp-dp, dp-tp-pp"), std::string::npos) << e;
}

// Every collective a plan runs falls in a named class of communication
// (none in `other`), and `run --comm-breakdown`'s costs are each the
// iteration with that class free: on mixtral-ep (tp 1, ep 8 inside a node,
// pp 2, dp 16 over 4 nodes) the experts' all-to-alls, their gradient sync
// (10.5 GiB of FP32 expert gradients reduce-scattered between 2 ranks on
// different nodes, the larger), the dense gradients' sync and the pipeline.
TEST(Report, CommCostsNameEveryClassThePlanRuns) {
  const Scenario s = load_scenario(std::string(TESSERA_SCENARIO_DIR) + "/mixtral-ep.yaml");
  const auto predictor = study::make_scenario_predictor(s);
  const auto planned = parallelism::plan_training_detailed(s.model, s.workload, s.plan, *predictor);
  std::map<study::CommClass, int> seen;
  for (const auto& program : planned.graph.programs) {
    for (const parallelism::Task& t : program->tasks) {
      if (t.kind != parallelism::TaskKind::Collective) continue;
      ++seen[study::comm_class(t.name)];
      EXPECT_NE(study::comm_class(t.name), study::CommClass::Other) << t.name;
    }
  }
  EXPECT_EQ(seen.count(study::CommClass::TensorParallel), 0U);  // tp 1
  // Under ZeRO-3 and tp 2 too (its per-layer parameter gathers).
  const Scenario z3 = load_scenario(std::string(TESSERA_SCENARIO_DIR) + "/mixtral-ep.yaml",
                                    {{"parallelism.zero_stage", "3"},
                                     {"parallelism.tp", "2"},
                                     {"parallelism.dp", "8"},
                                     {"parallelism.ep", "4"},
                                     {"parallelism.sequence_parallel", "true"}});
  const auto z3_plan = parallelism::plan_training_detailed(z3.model, z3.workload, z3.plan, *predictor);
  for (const auto& program : z3_plan.graph.programs) {
    for (const parallelism::Task& t : program->tasks) {
      if (t.kind == parallelism::TaskKind::Collective) {
        EXPECT_NE(study::comm_class(t.name), study::CommClass::Other) << t.name;
      }
    }
  }
  const Simulation sim = study::simulate_scenario(s);
  const auto costs = study::communication_costs(s, sim.result.makespan);
  std::vector<study::CommClass> classes;
  for (const auto& c : costs) {
    classes.push_back(c.cls);
    EXPECT_EQ(c.iteration_without + c.saving, sim.result.makespan) << study::to_string(c.cls);
    EXPECT_GT(c.saving, Time::zero()) << study::to_string(c.cls);
  }
  EXPECT_EQ(classes, (std::vector<study::CommClass>{
                         study::CommClass::ExpertAllToAll, study::CommClass::ExpertDataParallel,
                         study::CommClass::DataParallel, study::CommClass::Pipeline}));
  EXPECT_GT(costs[1].saving, costs[0].saving);
  // Text and JSON carry them only when asked.
  RunReport rep = make_report(s, sim);
  EXPECT_EQ(format_text(rep).find("Comm costs"), std::string::npos);
  rep.comm_costs = costs;
  EXPECT_NE(format_text(rep).find("\n  expert data-parallel "), std::string::npos) << format_text(rep);
  EXPECT_NE(format_json(rep).find(R"("comm_costs": [{"class": "expert all-to-all", "saving_s": )"),
            std::string::npos);
  // Asked of a plan without communication: said, and an empty list.
  rep.comm_costs.emplace();
  EXPECT_NE(format_text(rep).find("\nComm costs     none: the plan runs no communication\n"),
            std::string::npos);
  EXPECT_NE(format_json(rep).find(R"("comm_costs": [])"), std::string::npos);
  // ZeRO-3's parameter gathers are data-parallel traffic, the experts' their own.
  EXPECT_EQ(study::comm_class("layer003.fwd.zero3.param.all-gather"), study::CommClass::DataParallel);
  EXPECT_EQ(study::comm_class("layer003.fwd.zero3.expert_param.all-gather"),
            study::CommClass::ExpertDataParallel);
  EXPECT_EQ(study::comm_class("embedding.bwd.zero3.param.all-gather"), study::CommClass::DataParallel);
  // The tensor-parallel class on a plan with tp 8 (llama3-70b's layers).
  EXPECT_EQ(study::comm_class("layer012.fwd.tp.all-gather"), study::CommClass::TensorParallel);
  EXPECT_EQ(study::comm_class("lm_head.fwd.tp.loss.all-reduce"), study::CommClass::TensorParallel);
  // Sequence parallelism's norm gradients go over the tp group; the tied
  // embedding's over the first and last stages: not data-parallel (helper
  // 131: a dp-1 plan showed a data-parallel cost).
  EXPECT_EQ(study::comm_class("norm.grad.all-reduce"), study::CommClass::TensorParallel);
  EXPECT_EQ(study::comm_class("embedding.grad.all-reduce"), study::CommClass::TiedEmbedding);
  EXPECT_EQ(study::to_string(study::CommClass::TiedEmbedding), "tied embedding");
}

// A dp-1 pipeline of a tied-embedding GPT with sequence parallelism: no
// data-parallel row; the embedding group's all-reduce and the norms' are
// named for what they are, each a real cost.
TEST(Report, CommCostsOfAPipelineWithoutDataParallelism) {
  const Scenario s =
      load_scenario(std::string(TESSERA_SCENARIO_DIR) + "/gpt3-175b.yaml",
                    {{"cluster.nodes", "16"}, {"parallelism.dp", "1"}, {"training.global_batch", "16"}});
  const Simulation sim = study::simulate_scenario(s);
  std::vector<study::CommClass> classes;
  for (const auto& c : study::communication_costs(s, sim.result.makespan)) {
    classes.push_back(c.cls);
    EXPECT_EQ(c.iteration_without + c.saving, sim.result.makespan) << study::to_string(c.cls);
  }
  EXPECT_EQ(classes,
            (std::vector<study::CommClass>{study::CommClass::TensorParallel, study::CommClass::TiedEmbedding,
                                           study::CommClass::Pipeline}));
}

// Helper 145's findings on where errors and warnings point, and what ran
// without a word.
TEST(Scenario, PlanChecksAndWorkLimitPointAtTheirKey) {
  // The plan's seq_len check pointed at the training section's first key
  // (micro_batch, line 24).
  EXPECT_EQ(error_of(replaced(default_text(), "seq_len: 1024", "seq_len: 100000000"))
                .rfind("s.yaml:25:12: training.seq_len: seq_len (100000000) is too long", 0),
            0U)
      << error_of(replaced(default_text(), "seq_len: 1024", "seq_len: 100000000"));
  // An iteration too large to simulate names the line of the key the file
  // writes, or the --set that set it.
  const auto work_error = [](const Scenario& s) {
    try {
      study::check_work(s);
    } catch (const ScenarioError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const Scenario in_file = parse_scenario(
      replaced(default_text(), "preset: gpt2-large", "preset: gpt2-large\n  layers: 1000000000"), "s.yaml");
  EXPECT_EQ(work_error(in_file).rfind("s.yaml:23:11: model.layers: one iteration would take about", 0), 0U)
      << work_error(in_file);
  const Scenario set = parse_scenario(default_text(), "s.yaml", {{"model.layers", "1000000000"}});
  EXPECT_EQ(work_error(set).rfind("s.yaml (--set model.layers): model.layers: one iteration", 0), 0U)
      << work_error(set);
  // A batch given as micro-batches is named so (helper 150: placed at
  // micro_batch's line as training.global_batch).
  const Scenario mbs = parse_scenario(default_text(), "s.yaml", {{"training.micro_batches", "10000000"}});
  EXPECT_EQ(work_error(mbs).rfind("s.yaml (--set training.micro_batches): training.micro_batches, "
                                  "training.micro_batch, model.layers: one iteration",
                                  0),
            0U)
      << work_error(mbs);
}

TEST(Scenario, SlipsThatRanSilentlyAreWarnedAbout) {
  const auto warned = [](const Scenario& s, const std::string& start) {
    return std::any_of(s.warnings.begin(), s.warnings.end(),
                       [&](const std::string& w) { return w.rfind(start, 0) == 0; });
  };
  // A host time in seconds: 41 minutes an iteration.
  const Scenario launch = parse_scenario(default_text(), "s.yaml", {{"calibration.host_launch", "1s"}});
  EXPECT_TRUE(warned(launch, "calibration.host_launch = 1s: a kernel launch costs the host microseconds"));
  EXPECT_EQ(launch.warning_locations.at(launch.warnings.back()), "s.yaml (--set calibration.host_launch)");
  EXPECT_TRUE(warned(parse_scenario(default_text(), "s.yaml", {{"calibration.host_microbatch", "5s"}}),
                     "calibration.host_microbatch = 5s"));
  EXPECT_TRUE(warned(parse_scenario(default_text(), "s.yaml", {{"calibration.nvlink_launch", "20ms"}}),
                     "calibration.nvlink_launch = 20ms"));
  // The fitted values and a few times them are no slips.
  EXPECT_TRUE(parse_scenario(default_text(), "s.yaml",
                             {{"calibration.host_launch", "200us"}, {"calibration.host_microbatch", "20ms"}})
                  .warnings.empty());
  // 512 GPUs on one NVSwitch: the cluster's count as a node's.
  const Scenario wide = parse_scenario(default_text(), "s.yaml",
                                       {{"cluster.nodes", "1"},
                                        {"cluster.gpus_per_node", "512"},
                                        {"parallelism.dp", "auto"},
                                        {"cluster.fabric.hosts_per_leaf", "512"}});
  EXPECT_TRUE(warned(wide, "cluster.gpus_per_node = 512 GPUs in one NVLink domain"));
  EXPECT_FALSE(warned(parse_scenario(default_text(), "s.yaml",
                                     {{"cluster.nodes", "1"},
                                      {"cluster.gpus_per_node", "72"},
                                      {"parallelism.dp", "auto"},
                                      {"cluster.fabric.hosts_per_leaf", "72"}}),
                      "cluster.gpus_per_node"));
}

TEST(Scenario, WarningOfAGpuKeySetOverAPresetIsPlacedAtTheOption) {
  // The preset's name in the file, a spec key set on the command line: the
  // fp32_peak warning was placed at the cluster section's first key.
  const Scenario s = parse_scenario(default_text(), "s.yaml", {{"cluster.gpu.tensor_peak", "1TFLOPS"}});
  ASSERT_FALSE(s.warnings.empty());
  EXPECT_EQ(s.warnings[0].rfind("cluster.gpu.fp32_peak", 0), 0U) << s.warnings[0];
  EXPECT_EQ(s.warning_locations.at(s.warnings[0]), "s.yaml (--set cluster.gpu.tensor_peak)");
}

TEST(Scenario, BlanksAroundASetKeyAreNoPartOfIt) {
  const Override o = parse_override(" cluster.nodes \t=2");
  EXPECT_EQ(o.path, "cluster.nodes");
  EXPECT_EQ(o.value, "2");
  EXPECT_THROW((void)parse_override("  =2"), InputError);
}

// Helper 147: what a Megatron user's file left out was read silently
// another way than Megatron reads it.
TEST(Scenario, MegatronDefaultsWhereAFileLeavesThemOut) {
  const std::string custom = replaced(default_text(), "  preset: gpt2-large\n",
                                      "  layers: 40\n  hidden: 5120\n  heads: 40\n  vocab: 32000\n");
  // SwiGLU without a width: Megatron's 4h x 2/3 rounded down to 64.
  EXPECT_EQ(
      parse_scenario(replaced(custom, "  vocab: 32000\n", "  vocab: 32000\n  gated_mlp: true\n"), "s.yaml")
          .model.ffn_hidden,
      13632);
  EXPECT_EQ(parse_scenario(custom, "s.yaml").model.ffn_hidden, 4 * 5120);
  EXPECT_EQ(parse_scenario(replaced(custom, "  vocab: 32000\n",
                                    "  vocab: 32000\n  gated_mlp: true\n  ffn_hidden: 13824\n"),
                           "s.yaml")
                .model.ffn_hidden,
            13824);
  // A pipeline without a global batch runs one micro-batch: said.
  const Scenario pipe =
      parse_scenario(default_text(), "s.yaml", {{"parallelism.pp", "2"}, {"parallelism.dp", "8"}});
  ASSERT_FALSE(pipe.warnings.empty());
  EXPECT_EQ(pipe.warnings.back().rfind("training.global_batch not given: one micro-batch per pipeline "
                                       "(micro_batch x dp = 8 x 8 sequences), so 1 of the 2 stages idle",
                                       0),
            0U)
      << pipe.warnings.back();
  const Scenario given =
      parse_scenario(default_text(), "s.yaml",
                     {{"parallelism.pp", "2"}, {"parallelism.dp", "8"}, {"training.global_batch", "128"}});
  for (const std::string& w : given.warnings)
    EXPECT_EQ(w.find("global_batch not given"), std::string::npos) << w;
  EXPECT_NE(error_of(default_text(), {{"training.framework", "megatron-lm"}})
                .find("unknown framework 'megatron-lm', did you mean 'megatron'?"),
            std::string::npos);
}

// Static destination-mod-k routes crowd the data-parallel rings of two
// pipeline stages that share a leaf (helper 172: dp 3, 5, 7 slower than 4, 6,
// 8, unexplained). Leaves of 16 HCAs hold two 8-GPU nodes; tp 8, pp 2:
// at dp 3 stage 0 is nodes 0-2 and stage 1 nodes 3-5, so leaf1 holds node 2
// (its ring's wrap to node 0, GPUs 0-7) and node 3 (to node 4, GPUs 32-39):
// 32-39 mod 16 are 0-7 again, two flows on each of leaf1's first 8 up-links
// while the other 8 stand idle. At dp 4 each stage fills two leaves.
TEST(Report, DataParallelRingsCrowdedOnStaticRoutesAreWarnedAbout) {
  const std::string text = replaced(default_text(), "    hosts_per_leaf: 8\n    spines: 8\n",
                                    "    hosts_per_leaf: 16\n    spines: 16\n");
  auto at = [&](int dp, std::vector<Override> more = {}) {
    more.push_back({"cluster.nodes", std::to_string(2 * dp)});
    more.push_back({"model.heads", "16"});  // (gpt2-large's 20 do not split 8 ways)
    more.push_back({"parallelism.tp", "8"});
    more.push_back({"parallelism.pp", "2"});
    more.push_back({"parallelism.dp", std::to_string(dp)});
    more.push_back({"training.global_batch", std::to_string(16 * dp)});
    return parse_scenario(text, "s.yaml", more);
  };
  const Scenario three = at(3);
  const auto shared = study::data_parallel_link_sharing(three, build_topology(three));
  ASSERT_TRUE(shared.has_value());
  EXPECT_EQ(shared->flows, 2);
  EXPECT_EQ(shared->needed, 1);
  EXPECT_EQ(shared->links, 16);
  EXPECT_TRUE(shared->up);
  EXPECT_EQ(shared->switch_name, "leaf1");
  EXPECT_EQ(shared->link, "leaf1 -> spine0");
  EXPECT_EQ(
      study::link_sharing_warning(shared, three),
      "static destination-mod-k routing puts 2 of the data-parallel rings' flows on one link (leaf1 -> "
      "spine0) where leaf1's 16 up-links could carry them 1 per link: where the stages' gradient "
      "reductions overlap, their steps between nodes run at up to 1/2 of the rate (as a subnet manager's "
      "static routes would; docs/topology.md, Limitations); pipeline stages on whole leaves (dp x tp, 24 "
      "GPUs here, a multiple or a divisor of the 16 GPUs of a leaf's nodes), or adaptive routing "
      "(cluster.fabric.routing: adaptive), avoid it");
  // run's report carries it, once.
  const RunReport rep = make_report(three, simulate_scenario(three));
  EXPECT_EQ(std::count(rep.warnings.begin(), rep.warnings.end(), study::link_sharing_warning(shared, three)),
            1);
  const Scenario four = at(4);
  EXPECT_FALSE(study::data_parallel_link_sharing(four, build_topology(four)).has_value());
  // The ns-3 backend's adaptive routing spreads them: nothing to say.
  const Scenario adaptive = at(3, {{"backend", "ns3"}, {"ns3.adaptive_routing", "true"}});
  EXPECT_FALSE(study::data_parallel_link_sharing(adaptive, build_topology(adaptive)).has_value());
  // So does the flow backend's (cluster.fabric.routing: adaptive, which the
  // ns-3 backend takes too unless ns3.adaptive_routing says otherwise), and
  // (the iteration: Report.CrowdedRoutesAreCheckedBetweenNeighbouringStages).
  const Scenario flows = at(3, {{"cluster.fabric.routing", "adaptive"}});
  EXPECT_TRUE(flows.fabric_adaptive_routing);
  EXPECT_TRUE(flows.ns3.adaptive_routing);
  EXPECT_FALSE(at(3, {{"cluster.fabric.routing", "adaptive"}, {"ns3.adaptive_routing", "false"}})
                   .ns3.adaptive_routing);
  EXPECT_FALSE(study::data_parallel_link_sharing(flows, build_topology(flows)).has_value());
  EXPECT_EQ(error_of(text, {{"cluster.fabric.routing", "ecmp"}}),
            "s.yaml (--set cluster.fabric.routing): cluster.fabric.routing: expected static or adaptive (got "
            "'ecmp')");
  // One data-parallel rank: no rings.
  const Scenario alone = parse_scenario(
      text, "s.yaml",
      {{"model.heads", "16"}, {"parallelism.tp", "8"}, {"parallelism.pp", "2"}, {"parallelism.dp", "1"}});
  EXPECT_FALSE(study::data_parallel_link_sharing(alone, build_topology(alone)).has_value());
}

// One collectives.algorithm that a collective the plan runs lacks is an
// error at the key, as the loader's are (helper 175: it named the file
// alone, and no --set).
TEST(Scenario, AnAlgorithmThePlanCannotRunIsAnErrorAtItsKey) {
  const std::string text = default_text() + "collectives:\n  algorithm: hierarchical\n";
  const auto line = std::count(text.begin(), text.end(), '\n');  // the last line's number
  const Scenario s = parse_scenario(text, "s.yaml", {{"parallelism.zero_stage", "1"}});
  try {
    (void)simulate_scenario(s);
    FAIL() << "ZeRO's reduce-scatter has no hierarchical algorithm";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.where(), fmt::format("s.yaml:{}:14", line));
    EXPECT_TRUE(e.option().empty());
    EXPECT_EQ(e.detail().rfind(
                  "collectives.algorithm: collective reduce-scatter has no algorithm 'hierarchical'", 0),
              0U)
        << e.detail();
  }
  const Scenario set = parse_scenario(
      default_text(), "s.yaml", {{"parallelism.zero_stage", "1"}, {"collectives.algorithm", "hierarchical"}});
  try {
    (void)simulate_scenario(set);
    FAIL() << "ZeRO's reduce-scatter has no hierarchical algorithm";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.where(), "s.yaml (--set collectives.algorithm)");
    EXPECT_EQ(e.option(), "--set collectives.algorithm");
  }
}

// The top-level keys are checked first, `jobs` and `placement` among those
// known (helper 175: `job:` came after a dp error that the jobs it meant
// would have made moot, and the list of known keys named neither).
TEST(Scenario, TopLevelKeysAreCheckedFirstJobsAndPlacementKnown) {
  const std::string text = default_text() + "job:\n  - nodes: 1\n";
  const auto line = std::count(text.begin(), text.end(), '\n') - 1;
  const std::string known =
      "(known here: backend, calibration, cluster, collectives, failures, jobs, mixed_gpus, model, name, "
      "node_model, ns3, outputs, parallelism, placement, predictor, stragglers, training)";
  // dp 16 on 4 nodes of 8 would be an error of its own: the typo comes first.
  EXPECT_EQ(error_of(text, {{"cluster.nodes", "4"}}),
            fmt::format("s.yaml:{}:1: job: unknown key, did you mean 'jobs'? {}", line, known));
  EXPECT_EQ(error_of(default_text() + "placment: spread\n"),
            fmt::format("s.yaml:{}:1: placment: unknown key, did you mean 'placement'? {}", line, known));
}

// Two neighbouring stages' rings are counted together, not all stages at
// once: on llama3-70b.yaml's rail fabric at tp 2, pp 8 on 40 nodes, rings
// of stages far apart map onto the same up-links but reduce at different
// times (the run's data-parallel cost, 159 ms, lies between 32 and 48
// nodes' 157 and 160 ms), while gpt3-175b.yaml at dp 3 (48 nodes) crowds
// neighbouring stages' rings (206 ms against 145 at dp 4).
TEST(Report, CrowdedRoutesAreCheckedBetweenNeighbouringStages) {
  auto file = [](const char* name) {
    std::ifstream in(std::string(TESSERA_SCENARIO_DIR) + "/" + name);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  };
  const Scenario llama = parse_scenario(file("llama3-70b.yaml"), "l.yaml",
                                        {{"cluster.nodes", "40"},
                                         {"parallelism.tp", "2"},
                                         {"parallelism.pp", "8"},
                                         {"parallelism.dp", "auto"},
                                         {"training.global_batch", "2560"}});
  EXPECT_FALSE(study::data_parallel_link_sharing(llama, build_topology(llama)).has_value());
  const Scenario gpt = parse_scenario(file("gpt3-175b.yaml"), "g.yaml",
                                      {{"cluster.nodes", "48"}, {"training.global_batch", "48"}});
  const auto shared = study::data_parallel_link_sharing(gpt, build_topology(gpt));
  ASSERT_TRUE(shared.has_value());
  EXPECT_EQ(shared->flows, 2);
  EXPECT_EQ(shared->needed, 1);
  EXPECT_EQ(shared->link, "leaf1 -> spine0");
  EXPECT_EQ(gpt.warnings.back(), study::link_sharing_warning(shared, gpt));
  // The flow backend's adaptive routing spreads them: 1452.5 ms against the
  // static routes' 1529.0 (dp 4 on static routes: 1466.4).
  const Scenario adaptive = parse_scenario(
      file("gpt3-175b.yaml"), "g.yaml",
      {{"cluster.nodes", "48"}, {"training.global_batch", "48"}, {"cluster.fabric.routing", "adaptive"}});
  EXPECT_TRUE(adaptive.warnings.empty() ||
              adaptive.warnings.back().find("destination-mod-k") == std::string::npos);
  const double fixed_ms = simulate_scenario(gpt).result.makespan.seconds() * 1e3;
  const double adaptive_ms = simulate_scenario(adaptive).result.makespan.seconds() * 1e3;
  EXPECT_NEAR(fixed_ms, 1529.0, 0.1);
  EXPECT_NEAR(adaptive_ms, 1452.5, 0.1);
}
