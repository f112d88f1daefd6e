#include "tessera/cli/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <set>

namespace tessera::cli {

std::string count_text(double n) {
  for (const auto& [unit, f] :
       {std::pair{"T", 1e12}, std::pair{"B", 1e9}, std::pair{"M", 1e6}, std::pair{"K", 1e3}}) {
    // {:.4g} turns 12345 into 1.234e+04: whole numbers from ten thousand up.
    if (n >= f)
      return n / f >= 1e4 ? fmt::format("{:.0f}{}", n / f, unit) : fmt::format("{:.4g}{}", n / f, unit);
  }
  return fmt::format("{:.4g}", n);
}

std::string micro_batches_phrase(std::int64_t micro_batches, std::int64_t micro_batch) {
  return fmt::format("{} micro-batch{} of {} sequence{}", micro_batches, micro_batches == 1 ? "" : "es",
                     micro_batch, micro_batch == 1 ? "" : "s");
}

std::string layer_split_phrase(const std::optional<std::int64_t>& first_stage_layers,
                               const std::optional<std::int64_t>& last_stage_layers,
                               bool account_for_embedding, bool account_for_loss) {
  std::vector<std::string> keys;
  if (first_stage_layers) keys.push_back(fmt::format("first_stage_layers {}", *first_stage_layers));
  if (last_stage_layers) keys.push_back(fmt::format("last_stage_layers {}", *last_stage_layers));
  if (account_for_embedding) keys.emplace_back("account_for_embedding");
  if (account_for_loss) keys.emplace_back("account_for_loss");
  return keys.empty() ? std::string() : fmt::format(" ({})", fmt::join(keys, ", "));
}

namespace {

/// A first or last pipeline stage this many times the fastest stage's
/// compute gets the hint of first_stage_layers / last_stage_layers.
constexpr double kStageImbalanceHint = 1.10;
/// The least gain on the slowest stage's compute a suggested split must
/// promise (parallelism::balanced_edge_stage_split).
constexpr double kStageSplitMinGain = 0.03;
/// The host's share of the iteration from which the split hint, an estimate
/// of compute alone, says so: the data steps on the first and last stages
/// can then decide the iteration (4 + 8 + 8 + 4 layers at pp 4 under
/// interleaving, 9% faster than 6 each where no split cuts compute).
constexpr double kStageHintHostShare = 0.05;

/// "Known bias" on a chart of one scenario, "Known bias, points with ..." on a sweep's.
std::string chart_label(std::string_view label, std::string_view which) {
  return which.empty() ? std::string(label) : fmt::format("{}, {}", label, which);
}
std::string note_head(const std::string& note) { return note.substr(0, note.find(':')); }

/// Pipeline stages by their busiest compute stream: the slowest stage (the
/// first of equals) is max_element's, the fastest min_element's.
bool computes_less(const StageBalance& a, const StageBalance& b) { return a.compute < b.compute; }

}  // namespace

std::string chart_untested_note(std::string_view which, const std::string& note) {
  return fmt::format("{}: {}: its kernel times are extrapolated", chart_label("Untested GPU", which),
                     note_head(note));
}
std::string chart_gpu_bias_note(std::string_view which, const std::string& note) {
  return fmt::format("{}: {}, whose forecasts validate optimistic (docs/node_model.md)",
                     chart_label("Known bias", which), note_head(note));
}
std::string chart_attention_note(std::string_view which) {
  return fmt::format(
      "{}: FlashAttention timed as the full s x s square, so attention is pessimistic (docs/parallelism.md)",
      chart_label("Known bias", which));
}
std::string chart_scale_note(std::string_view which) {
  return fmt::format("{}: no multi-node run measured; network constants assumed (docs/calibration.md)",
                     chart_label("Untested scale", which));
}
std::string chart_fp8_note(std::string_view which) {
  return fmt::format("{}: layer GEMM times unvalidated (docs/node_model.md)", chart_label("FP8", which));
}
std::string chart_tp_bias_note(std::string_view which, std::string_view tp) {
  return fmt::format(
      "{}: {}-way tensor parallelism, whose forecasts validate optimistic (docs/calibration.md)",
      chart_label("Known bias", which), tp);
}

namespace {

/// A large amount with thousands separators (43,321).
std::string grouped(double x) {
  std::string digits = fmt::format("{:.0f}", x);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

std::string training_run_text(const study::TrainingRun& t, std::optional<double> price_per_gpu_hour) {
  std::string cost;
  if (t.cost && price_per_gpu_hour) {
    cost = fmt::format(", cost {} at {:g} per GPU-hour", grouped(*t.cost), *price_per_gpu_hour);
  }
  return fmt::format(
      "{} tokens in {:.1f} days at this throughput: {} GPU-hours{} (steady state only: no warm-up, "
      "evaluation, checkpoints or failures)",
      count_text(t.tokens), t.days(), grouped(t.gpu_hours), cost);
}

std::string training_run_json(const study::TrainingRun& t) {
  return fmt::format(
      R"({{"tokens": {:.0f}, "time_s": {:.3f}, "days": {:.6f}, "gpu_hours": {:.3f}, "cost": {}}})", t.tokens,
      t.seconds, t.days(), t.gpu_hours, t.cost ? fmt::format("{:.3f}", *t.cost) : std::string("null"));
}

RunReport make_report(const Scenario& s, const Simulation& sim, const PlanTimer& time_plan) {
  RunReport rep;
  rep.scenario = s.name;
  rep.warnings = s.warnings;
  rep.model = s.model.name;
  rep.parameters = s.model.total_params(s.workload.seq_len);
  rep.active_parameters = s.model.active_params(s.workload.seq_len);
  rep.padded_vocab = parallelism::padded_vocab(s.model, s.workload, s.plan.tp);
  rep.padded_parameters = rep.parameters + (rep.padded_vocab - s.model.vocab) * s.model.hidden *
                                               (s.model.tied_embeddings ? 1 : 2);
  rep.experts = s.model.moe.experts;
  rep.top_k = s.model.is_moe() ? s.model.moe.top_k : 0;
  if (s.model.is_moe()) {
    rep.shared_experts = s.model.moe.shared_experts;
    rep.capacity_factor = s.model.moe.capacity_factor;
    rep.imbalance = s.model.moe.imbalance;
    rep.load_factor = s.model.moe.load_factor(s.plan.ep);
  }
  rep.gpu = s.gpu.name;
  rep.fabric = std::string(fabric_name(s));
  rep.fabric_detail = fabric_detail(s);
  rep.fabric_tiers = fabric_tiers(s);
  rep.leaf_oversubscription = study::leaf_oversubscription(s);
  rep.spine_oversubscription = study::spine_oversubscription(s);
  rep.nodes_per_leaf = study::nodes_per_leaf(s);
  if (s.cluster.hcas_per_node < s.cluster.gpus_per_node) {
    rep.hcas = fmt::format("; {} HCAs per node, {} GPUs each", s.cluster.hcas_per_node,
                           s.cluster.gpus_per_node / s.cluster.hcas_per_node);
  }
  rep.gpus = s.gpus();
  rep.dp = s.plan.dp;
  rep.tp = s.plan.tp;
  rep.pp = s.plan.pp;
  rep.ep = s.plan.ep;
  rep.virtual_stages = s.plan.virtual_stages;
  rep.first_stage_layers = s.plan.first_stage_layers;
  rep.last_stage_layers = s.plan.last_stage_layers;
  rep.account_for_embedding = s.plan.account_for_embedding;
  rep.account_for_loss = s.plan.account_for_loss;
  rep.micro_batch = s.workload.micro_batch;
  rep.seq_len = s.workload.seq_len;
  rep.recompute = std::string(parallelism::to_string(s.plan.recompute));
  rep.sequence_parallel = s.plan.sequence_parallel;
  rep.zero_stage = s.plan.zero_stage;
  rep.grad_sync = std::string(parallelism::to_string(s.plan.resolved_grad_sync(s.workload)));
  if (s.plan.torch_ddp(s.workload)) {
    rep.grad_sync_note = " (Megatron on PyTorch DDP: no main-gradient buffer)";
  } else if (s.plan.resolved_grad_sync(s.workload) == parallelism::GradSync::OverlapGradReduce &&
             s.plan.dp > 1) {
    // Decimal units, as a bucket size is given ("25MB"), three digits.
    const double b = s.plan.resolved_bucket_size(s.workload).as_double();
    const std::string size = b >= 1e9   ? fmt::format("{:.3g} GB", b / 1e9)
                             : b >= 1e6 ? fmt::format("{:.3g} MB", b / 1e6)
                             : b >= 1e3 ? fmt::format("{:.3g} kB", b / 1e3)
                                        : fmt::format("{:.0f} B", b);
    // How Megatron-Core's DDP cuts the buffers (parallelism::DpGradSync).
    const std::string how =
        s.plan.virtual_stages > 1
            ? std::string("a chunk's at a time, as the interleaved schedule launches them")
            : fmt::format("in buckets closed at the first layer end past {}{}", size,
                          s.plan.pp > 1 ? " on the first stage, one bucket on the others" : "");
    rep.grad_sync_note =
        fmt::format(" (Megatron-Core: main gradients reduced {}{})", how,
                    s.plan.overlap_param_gather ? "; parameters gathered in the next forward" : "");
  }
  rep.overlap_param_gather = s.plan.overlap_param_gather;
  if (!s.plan.layout.is_default()) rep.layout = parallelism::to_string(s.plan.layout);
  rep.untested_gpu = untested_gpu_notes(s);
  rep.known_bias = known_bias_notes(s);
  rep.untested_scale = multi_node_note(s);
  if (s.mixed_gpus) {
    rep.mixed_gpu = s.mixed_gpus->gpu.name;
    rep.mixed_nodes = s.mixed_gpus->nodes;
  }
  rep.failures = s.failures;
  rep.scales = compute_scales_of(s);
  rep.schedule = std::string(parallelism::to_string(s.plan.schedule));
  rep.micro_batches = sim.plan.micro_batches;
  // (the plan validated global_batch = dp x micro_batch x micro-batches)
  rep.global_batch = rep.micro_batches * rep.dp * rep.micro_batch;
  rep.backend = std::string(to_string(s.backend));
  rep.predictor = s.predictor;
  rep.predictor_weights = s.predictor_weights;
  rep.kernel_overrides = sim.kernel_overrides;

  const auto& r = sim.result;
  const auto summary = engine::summarize(r);
  const IterationBreakdown b = breakdown(sim);
  rep.iteration_time = b.iteration;
  // A cable timed to change after the iteration has ended changes nothing
  // (a unit slip, 10s for 10ms, would make a failure study the baseline).
  for (std::string& w : late_failure_warnings(s.failures, rep.iteration_time))
    rep.warnings.push_back(std::move(w));
  rep.compute_time = b.compute;
  rep.host_time = b.host;
  rep.bubble_time = b.bubble;
  rep.exposed_comm_time = b.exposed_comm;
  // MFU: model FLOPs (no recomputation) / (time x peak); HFU: the FLOPs the
  // GPUs execute, recomputation included (Korthikanti et al. 2022; PaLM).
  // The peak of the training dtype; fp8 runs (whose dtype is bf16, with FP8
  // layer GEMMs) count against the dense BF16 peak, as Megatron-LM and
  // Transformer Engine users report it (docs/parallelism.md, "FP8 training").
  const double peak = s.gpu.matmul_peak(s.workload.dtype).tflops();
  rep.fp8 = s.workload.profile.fp8;
  rep.dtype = rep.fp8 ? "fp8" : std::string(node_model::to_string(s.workload.dtype));
  rep.framework = std::string(node_model::to_string(s.workload.framework));
  rep.hardware_tflops_per_gpu = summary.tflops_per_gpu;
  rep.hfu = rep.hardware_tflops_per_gpu / peak;
  if (r.makespan > Time::zero() && rep.gpus > 0) {
    rep.tflops_per_gpu = sim.plan.model_flops / rep.gpus / r.makespan.seconds() * 1e-12;
  }
  rep.mfu = rep.tflops_per_gpu / peak;
  // FP8 runs: the same model FLOPs against the dense FP8 peak too, so that
  // an MFU above 100% of the BF16 peak reads for what it is.
  if (rep.fp8) rep.mfu_fp8_peak = rep.tflops_per_gpu / s.gpu.matmul_peak(node_model::DType::FP8).tflops();
  if (s.plan.pp > 1 || rep.scales.any() || s.mixed_gpus) {
    // Which pipeline stage holds the iteration back: each stage's busiest
    // compute stream (a stage waits for its slowest rank) against the
    // fastest. The first and last stages hold the embedding and the LM head
    // beside their layers (parallelism.first_stage_layers and
    // last_stage_layers move layers off them).
    rep.stage_balance_lines = rep.scales.any() || s.mixed_gpus || s.plan.pp <= 4;
    const std::vector<std::int64_t> layers = parallelism::stage_layer_split(s.model.layers, s.plan);
    rep.stage_balance.resize(static_cast<std::size_t>(s.plan.pp));
    for (std::size_t st = 0; st < rep.stage_balance.size(); ++st) {
      rep.stage_balance[st].stage = static_cast<int>(st);
      rep.stage_balance[st].layers = layers[st];
      rep.stage_balance[st].slowest_rank = -1;
    }
    for (std::size_t rank = 0; rank < r.ranks.size(); ++rank) {
      const int stage = parallelism::rank_coord(s.plan, static_cast<int>(rank)).pp;
      auto& b = rep.stage_balance.at(static_cast<std::size_t>(stage));
      if (b.slowest_rank < 0 || r.ranks[rank].compute_busy > b.compute) {
        b.slowest_rank = static_cast<int>(rank);
        b.compute = r.ranks[rank].compute_busy;
      }
    }
    Time fastest = rep.stage_balance.front().compute;
    for (const auto& b : rep.stage_balance) fastest = std::min(fastest, b.compute);
    for (auto& b : rep.stage_balance) {
      b.vs_fastest = fastest > Time::zero() ? static_cast<double>(b.compute.ps()) / static_cast<double>(fastest.ps())
                                            : 1.0;
    }
    // The slowest stage the first or the last, which hold the embedding and
    // the LM head beside their layers, on GPUs alike: what moves layers off
    // it (the first of equals, as the text marks it).
    const auto slowest = std::max_element(rep.stage_balance.begin(), rep.stage_balance.end(), computes_less);
    const bool last = slowest->stage + 1 == s.plan.pp;
    if ((slowest->stage == 0 || last) && slowest->vs_fastest >= kStageImbalanceHint && !rep.scales.any() &&
        !s.mixed_gpus) {
      const std::string head = fmt::format("the {} stage computes x{:.2f} what the fastest does",
                                           last ? "last" : "first", slowest->vs_fastest);
      const double host_share =
          rep.iteration_time > Time::zero() ? rep.host_time.seconds() / rep.iteration_time.seconds() : 0.0;
      const std::string host_caveat =
          host_share >= kStageHintHostShare
              ? fmt::format(
                    "; compute alone: the host, {:.1f}% of this iteration, is not in it, and its waits "
                    "on the first and last stages' data steps can decide which split is fastest: run "
                    "the candidates",
                    100 * host_share)
              : "";
      // The estimate prices every layer alike: not for a model whose layers
      // differ (dense and MoE layers mixed).
      const std::int64_t moe_layers = s.model.moe_layers_in(0, s.model.layers);
      if (s.workload.framework == node_model::Framework::MegatronDeepSpeed) {
        // DeepSpeed's pipeline engine has no split keys (helper 156: the
        // hint offered Megatron-Core's under megatron-deepspeed).
        rep.stage_balance_hint = fmt::format(
            "{}: DeepSpeed's pipeline engine places the layers by its partition_method (framework "
            "megatron-deepspeed: no split suggested; Megatron-Core's first_stage_layers and "
            "last_stage_layers move layers off it under framework megatron)",
            head);
      } else if (moe_layers != 0 && moe_layers != s.model.layers) {
        rep.stage_balance_hint = fmt::format(
            "{}: parallelism.first_stage_layers and last_stage_layers (Megatron-Core's "
            "--decoder-first/last-pipeline-num-layers) move layers off it (no split suggested: this model's "
            "dense and MoE layers differ in cost)",
            head);
      } else {
        std::vector<double> compute_s;
        for (const auto& b : rep.stage_balance) compute_s.push_back(b.compute.seconds());
        // A split whose stages fit the GPU (or, where the plan's own does
        // not, hold no more than it does).
        const auto& own_memory = sim.plan.memory_per_stage;
        const Bytes own_peak =
            own_memory.empty() ? Bytes() : own_memory[parallelism::fullest_stage(own_memory)].total();
        const auto fits = [&](const parallelism::ParallelPlan& plan) {
          const auto memory =
              parallelism::estimate_memory(s.model, s.workload, plan, s.gpu.memory).memory_per_stage;
          const auto& fullest = memory[parallelism::fullest_stage(memory)];
          return !fullest.oom() || fullest.total() <= own_peak;
        };
        rep.suggested_split = parallelism::balanced_edge_stage_split(s.model.layers, s.plan, compute_s,
                                                                     kStageSplitMinGain, fits);
        if (const auto& split = rep.suggested_split) {
          // Both keys where the plan sets either: one it sets and the
          // suggestion does not is to be removed.
          std::vector<std::string> keys;
          std::string dropped;
          for (const auto& [value, own, key] :
               {std::tuple{split->first_stage_layers, s.plan.first_stage_layers, "first_stage_layers"},
                std::tuple{split->last_stage_layers, s.plan.last_stage_layers, "last_stage_layers"}}) {
            if (value)
              keys.push_back(fmt::format("{} {}", key, *value));
            else if (own)
              dropped = fmt::format(" without the plan's {}", key);
          }
          // (Megatron-Core takes either: the counted split goes.)
          if (const std::string counted = parallelism::accounted_split_keys(s.plan); !counted.empty())
            dropped = fmt::format(" without the plan's {}", counted);
          // The estimate is of compute alone; where `run` can time the
          // split, it is simulated (free communication: compute, host and
          // bubble, as the plan's own free-network run), which settles what
          // the host's waits do to it.
          std::string caveat = fmt::format("{})", host_caveat);
          if (time_plan) {
            parallelism::ParallelPlan with = s.plan;
            with.first_stage_layers = split->first_stage_layers;
            with.last_stage_layers = split->last_stage_layers;
            with.account_for_embedding = false;
            with.account_for_loss = false;
            const Time own = sim.free_comm.makespan;
            const Time t = time_plan(with);
            rep.plan_free_iteration = own;
            rep.split_free_iteration = t;
            caveat = t < own
                         ? fmt::format(
                               "); simulated with every collective free, it takes the iteration from {:.1f} "
                               "to {:.1f} ms ({:+.1f}%)",
                               own.ms(), t.ms(), 100 * (t.seconds() / own.seconds() - 1))
                         : fmt::format(
                               "); but simulated with every collective free, it does not make the "
                               "iteration faster: {:.1f} ms, {:.1f} ms with it ({:+.1f}%); the slowest "
                               "stage's compute does not decide it{}",
                               own.ms(), t.ms(), 100 * (t.seconds() / own.seconds() - 1),
                               // (the host's share, not a cause: its
                               // data steps or its launches; helper 138)
                               host_share >= kStageHintHostShare
                                   ? fmt::format(" (the host is {:.1f}% of this iteration)", 100 * host_share)
                                   : "");
          }
          rep.stage_balance_hint = fmt::format(
              "{}: parallelism.{}{} (Megatron-Core's --decoder-first/last-pipeline-num-layers) "
              "would take the slowest stage's compute from {:.1f} to about {:.1f} ms "
              "({:.2f} ms a layer, as {} stage computes one{}",
              head, fmt::join(keys, " and "), dropped, slowest->compute.ms(), split->slowest_s * 1e3,
              split->layer_s * 1e3, split->priced_on == 0 ? "the first" : "a middle", caveat);
        } else {
          rep.stage_balance_hint = fmt::format(
              "{}: no split of the first and last stages' layers that Megatron-Core accepts at pp {} "
              "(parallelism.first_stage_layers, last_stage_layers) and that fits in memory cuts the slowest "
              "stage's compute by {:.0f}% or more{}",
              head, s.plan.pp, 100 * kStageSplitMinGain, host_caveat);
        }
      }
    }
  }
  rep.bytes_sent = r.bytes_sent;
  rep.nvlink_bytes = r.nvlink_bytes;
  rep.fabric_bytes = r.fabric_bytes;
  rep.tokens_per_second = study::tokens_per_second(s, r.makespan);
  rep.price_per_gpu_hour = s.price_per_gpu_hour;
  rep.memory = stage_memory(sim.plan.memory_per_stage);
  rep.fullest = parallelism::fullest_stage(sim.plan.memory_per_stage);
  if (std::string w = tight_memory_warning(rep.memory); !w.empty()) rep.warnings.push_back(std::move(w));
  // A plan that does not fit runs no training: no days or cost for it.
  if (!rep.oom()) rep.training_run = study::training_run(s, rep.tokens_per_second);
  // As stored: TF32 is a tensor-core mode, its tensors are FP32.
  const node_model::DType grad = s.workload.rules().grad_dtype();
  rep.gradient_dtype =
      std::string(node_model::to_string(grad == node_model::DType::TF32 ? node_model::DType::FP32 : grad));
  rep.packet_fabric = sim.packet_fabric;
  // An explicit ns3.buffer below a link's credit round trip throttles it
  // whatever its load (helper 101: nothing said so; docs/scenarios.md).
  if (const auto& f = sim.packet_fabric; f && f->links_below_round_trip > 0) {
    rep.warnings.push_back(fmt::format(
        "ns3.buffer ({} B per port and VL) is below what 0 (auto) sizes for {} link{} that carried packets "
        "(the credit round trip at line rate and three segments of ns3.packets_per_segment packets: "
        "up to {} B): they wait for credits however light their load, so the forecast is slower than such a "
        "fabric runs; 0 (auto){}",
        f->settings.buffer.count(), f->links_below_round_trip, f->links_below_round_trip == 1 ? "" : "s",
        f->round_trip_bytes.count(),
        f->settings.packets_per_segment > 1 ? ", or ns3.packets_per_segment=1 for a small buffer" : ""));
  }
  return rep;
}

StageMemory RunReport::fullest_stage() const {
  return fullest < memory.size() ? memory[fullest] : StageMemory{};
}

bool RunReport::oom() const {
  return std::any_of(memory.begin(), memory.end(), [](const StageMemory& m) { return m.oom; });
}

void append_json_escaped(std::string& out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
}

std::string size_text(Bytes b) {
  const double v = b.as_double();
  if (v >= 1024.0 * 1024 * 1024) return fmt::format("{:.3g} GiB", v / (1024.0 * 1024 * 1024));
  if (v >= 1024.0 * 1024) return fmt::format("{:.3g} MiB", v / (1024.0 * 1024));
  if (v >= 1024.0) return fmt::format("{:.3g} KiB", v / 1024.0);
  return fmt::format("{} B", b.count());
}

std::string nodes_phrase(const std::vector<int>& nodes) {
  return fmt::format("{} {}", nodes.size() == 1 ? "node" : "nodes", fmt::join(nodes, ", "));
}

std::string mixed_gpus_phrase(const Scenario& s) {
  if (!s.mixed_gpus) return {};
  return fmt::format(" ({} of {}, mixed_gpus)", nodes_phrase(s.mixed_gpus->nodes), s.mixed_gpus->gpu.name);
}

std::string fabric_phrase(std::string_view fabric) {
  return fabric == study::kNoFabric ? std::string("one node, no fabric") : fmt::format("{} fabric", fabric);
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  append_json_escaped(out, s);
  return out + "\"";
}

std::string json_string_array(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i == 0 ? "" : ", ") + json_string(items[i]);
  return out + "]";
}

std::string format_packet_fabric(const PacketFabricStats& f) {
  const Ns3Settings& set = f.settings;
  const bool ib = set.model == Ns3Settings::Model::InfiniBand;
  std::string out;
  out += fmt::format(
      "Packet fabric  {}, segment = {} x {} B MTU{}\n", to_string(set.model),
      ib ? set.packets_per_segment : 1, set.mtu.count(),
      ib ? fmt::format(" + {} B headers, {} VL{}, {} routing{}", set.header_bytes.count(), set.num_vls,
                       set.num_vls == 1 ? "" : "s", set.adaptive_routing ? "adaptive" : "static",
                       set.cut_through ? "" : ", store-and-forward")
         : std::string());
  // The simulator's units: segments of packets_per_segment MTU packets (a
  // count of 7,880 at 32 per segment is some 252,000 packets).
  const bool segments = ib && set.packets_per_segment > 1;
  out += fmt::format("  {:<12} {} injected, {} delivered, {} {}-hops, {} dropped\n",
                     segments ? "segments" : "packets", f.packets_injected, f.packets_delivered,
                     f.packet_hops, segments ? "segment" : "packet", f.drops);
  // The payload's messages: those that crossed the packet fabric (the
  // NVLink messages moved as flows count in messages_sent, not in the payload).
  const auto fabric = [&](std::uint64_t n) { return n - std::min(n, f.scale_up_messages); };
  out += fmt::format(
      "  payload      {} B injected, {} B delivered ({} messages of {}), {} B on the wire summed over hops\n",
      f.payload_injected.count(), f.payload_delivered.count(), fabric(f.messages_delivered),
      fabric(f.messages_sent), f.wire_bytes.count());
  if (set.scale_up == Ns3Settings::ScaleUp::Flow) {
    out += fmt::format("  NVLink       {} messages ({} B) inside nodes moved as flows, not packets (ns3.scale_up)\n",
                       f.scale_up_messages, f.scale_up_payload.count());
  }
  if (ib) {
    // The buffers as sized (helper 95: a buffer study could not see them).
    const bool automatic = set.buffer == Bytes(0);
    std::string buffers;
    if (f.max_rx_buffer > Bytes(0)) {
      const auto kib = [](Bytes b) { return fmt::format("{:.1f} KiB", b.as_double() / 1024.0); };
      buffers =
          f.min_rx_buffer == f.max_rx_buffer
              ? fmt::format("; buffers {} per port and VL", kib(f.max_rx_buffer))
              : fmt::format("; buffers {} to {} per port and VL", kib(f.min_rx_buffer), kib(f.max_rx_buffer));
      buffers += automatic ? " (auto: credit round trip + 3 segments)" : " (ns3.buffer)";
    }
    out += fmt::format("  credits      {:.3f} ms stalled (summed over ports), {} violations{}\n",
                       f.credit_stall.ms(), f.credit_violations, buffers);
  }
  out += fmt::format("  ns-3 events  {}\n", f.events);
  return out;
}

/// "; unmatched: lines 3, 7" (the first ten, then how many more): the
/// override rows no kernel of the plan asked for; empty when all matched.
std::string unmatched_phrase(const std::vector<std::size_t>& lines) {
  if (lines.empty()) return {};
  constexpr std::size_t kShown = 10;
  const std::vector<std::size_t> shown(
      lines.begin(), lines.begin() + static_cast<std::ptrdiff_t>(std::min(lines.size(), kShown)));
  return fmt::format("; unmatched (no kernel of this plan has their op, dtype and dimensions): line{} {}{}",
                     lines.size() == 1 ? "" : "s", fmt::join(shown, ", "),
                     lines.size() > kShown ? fmt::format(" and {} more", lines.size() - kShown) : "");
}

/// Cables as the reports name them, ", "-separated; `json`: each a JSON string.
std::string cable_names(const std::vector<std::pair<std::string, std::string>>& cables, bool json) {
  std::vector<std::string> out;
  out.reserve(cables.size());
  for (const auto& [a, b] : cables) {
    std::string name = Scenario::Failures::cable_name(a, b);
    out.push_back(json ? json_string(name) : std::move(name));
  }
  return fmt::format("{}", fmt::join(out, ", "));
}

std::string json_packet_fabric(const PacketFabricStats& f) {
  const Ns3Settings& set = f.settings;
  // The point-to-point model's packets, as it sends them: one per segment,
  // its own overhead, store-and-forward; the InfiniBand-only settings null
  // (helper 59: the JSON gave the InfiniBand settings it ignores).
  const bool ib = set.model == Ns3Settings::Model::InfiniBand;
  auto ib_only = [&](const std::string& v) { return ib ? v : std::string("null"); };
  return fmt::format(
      ", \"ns3\": {{\"model\": {}, \"packets_per_segment\": {}, \"mtu_bytes\": {}, \"header_bytes\": {}, "
      "\"cut_through\": {}, \"num_vls\": {}, "
      "\"adaptive_routing\": {}, \"buffer_bytes\": {}, "
      "\"rx_buffer_min_bytes\": {}, \"rx_buffer_max_bytes\": {}, "
      "\"messages_sent\": {}, \"messages_delivered\": {}, "
      "\"packets_injected\": {}, \"packets_delivered\": {}, \"packet_hops\": {}, "
      "\"payload_injected_bytes\": {}, \"payload_delivered_bytes\": {}, \"wire_bytes\": {}, \"drops\": {}, "
      "\"credit_stall_s\": {:.9e}, \"credit_violations\": {}, \"events\": {}, \"scale_up\": {}, "
      "\"scale_up_messages\": {}, \"scale_up_payload_bytes\": {}}}",
      json_string(std::string(to_string(set.model))), ib ? set.packets_per_segment : 1, set.mtu.count(),
      ib ? set.header_bytes.count() : Ns3Settings::kPointToPointOverhead.count(),
      ib && set.cut_through ? "true" : "false", ib_only(std::to_string(set.num_vls)),
      ib_only(set.adaptive_routing ? "true" : "false"), ib_only(std::to_string(set.buffer.count())),
      ib_only(std::to_string(f.min_rx_buffer.count())), ib_only(std::to_string(f.max_rx_buffer.count())),
      f.messages_sent, f.messages_delivered, f.packets_injected, f.packets_delivered, f.packet_hops,
      f.payload_injected.count(), f.payload_delivered.count(), f.wire_bytes.count(), f.drops,
      f.credit_stall.seconds(), f.credit_violations, f.events,
      json_string(std::string(to_string(set.scale_up))), f.scale_up_messages, f.scale_up_payload.count());
}

namespace {

/// Appends `note` to `notes` unless it is empty or there already.
void add_distinct(std::vector<std::string>& notes, std::string note) {
  if (!note.empty() && std::find(notes.begin(), notes.end(), note) == notes.end())
    notes.push_back(std::move(note));
}
}  // namespace

std::vector<std::string> untested_gpu_notes(const Scenario& s) {
  std::vector<std::string> notes;
  add_distinct(notes, node_model::extrapolation_note(s.gpu, s.workload.dtype));
  if (s.mixed_gpus) add_distinct(notes, node_model::extrapolation_note(s.mixed_gpus->gpu, s.workload.dtype));
  return notes;
}

namespace {

/// Data-parallel rings this wide across nodes, with several of their ranks
/// on each node, are where NCCL has long left the ring for its tree (the
/// ring's latency grows with every rank; docs/collectives.md, Limitations).
/// On scenarios/scaling.yaml with 25 MB buckets the ring's iteration is
/// within 0.5% of the hierarchical all-reduce's at 32 nodes of 8 GPUs, 6.9%
/// longer at 64, 31% at 128 (with Megatron-Core's larger default buckets
/// the ring is the faster of the two there: its latencies are paid twice).
constexpr int kKnownBiasMinRingNodes = 32;

/// The gradient all-reduce as a ring over many nodes, with several ranks per
/// node: Tessera's ring pays every rank's step latency where NCCL's tree pays
/// about 2 log2(nodes) network ones, so the forecast is pessimistic.
std::string data_parallel_ring_note(const Scenario& s) {
  const auto& plan = s.plan;
  using collectives::Algorithm;
  const Algorithm a = s.collectives.chosen(parallelism::CollectiveKind::AllReduce);
  if (plan.dp < 2 * kKnownBiasMinRingNodes || plan.zero_stage > 0 ||
      (a != Algorithm::Auto && a != Algorithm::Ring))
    return {};
  // The data-parallel group of rank 0: its nodes.
  parallelism::RankCoord c = parallelism::rank_coord(plan, 0);
  std::set<int> nodes;
  for (c.dp = 0; c.dp < plan.dp; ++c.dp)
    nodes.insert(parallelism::rank_of(plan, c) / s.cluster.gpus_per_node);
  const int n = static_cast<int>(nodes.size());
  if (n < kKnownBiasMinRingNodes || n == plan.dp) return {};
  return fmt::format(
      "data parallelism over {} nodes with {} ranks on each: the gradient all-reduce is a ring of {} ranks "
      "paying 2 x {} step latencies per bucket, where NCCL switches to its tree across nodes, so its "
      "communication is pessimistic, the more so the more ranks (compare --set "
      "collectives.algorithm.all-reduce=hierarchical, rings per rail; docs/collectives.md, Limitations)",
      n, plan.dp / n, plan.dp, plan.dp - 1);
}

}  // namespace

/// FlashAttention is timed as the full s x s square of tensor-core GEMMs; a
/// causal kernel skips the masked half (docs/parallelism.md, FlashAttention,
/// with the H200 measurements and why the half is not timed yet).
std::string flash_attention_note(const Scenario& s) {
  if (!s.workload.flash_attention) return {};
  return "flash_attention: the fused attention kernel is timed as tensor-core GEMMs over the full s x s "
         "square, where a causal kernel skips the masked half (on an H200 these times are 1.8-2.1x the "
         "measured causal kernel), so attention is pessimistic; its share of a layer is in `tessera kernels` "
         "(docs/parallelism.md, FlashAttention)";
}

std::vector<std::string> known_bias_notes(const Scenario& s, bool plan) {
  std::vector<std::string> notes;
  if (plan) {
    add_distinct(notes, parallelism::known_bias_note(s.plan));
    add_distinct(notes, data_parallel_ring_note(s));
  }
  add_distinct(notes, node_model::known_bias_note(s.gpu, s.workload.dtype, s.workload.profile.fp8));
  if (s.mixed_gpus) {
    add_distinct(notes,
                 node_model::known_bias_note(s.mixed_gpus->gpu, s.workload.dtype, s.workload.profile.fp8));
  }
  add_distinct(notes, flash_attention_note(s));
  return notes;
}

std::string labelled_lines(std::string_view label, const std::vector<std::string>& notes) {
  std::string out;
  for (std::size_t i = 0; i < notes.size(); ++i)
    out += fmt::format("{:<15}{}\n", i == 0 ? label : "", notes[i]);
  return out;
}

void HeldNotes::add(const std::string& note, const std::string& holder) {
  if (note.empty()) return;
  auto it = std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.note == note; });
  if (it == entries.end()) it = entries.insert(entries.end(), Entry{note, {}});
  it->holders.push_back(holder);
}

std::string caveat_lines(const std::vector<std::string>& untested_gpu,
                         const std::vector<std::string>& known_bias, const std::string& untested_scale) {
  return labelled_lines("Untested GPU", untested_gpu) + labelled_lines("Known bias", known_bias) +
         (untested_scale.empty() ? std::string() : labelled_lines("Untested scale", {untested_scale}));
}

std::string caveat_json(const std::vector<std::string>& untested_gpu,
                        const std::vector<std::string>& known_bias, bool trailing,
                        const std::string& untested_scale) {
  std::string out;
  auto member = [&](std::string_view key, std::vector<std::string> notes) {
    std::erase(notes, std::string());
    if (notes.empty()) return;
    const std::string m = fmt::format("\"{}\": {}", key, json_string_array(notes));
    out += trailing ? m + ", " : ", " + m;
  };
  member("untested_gpu", untested_gpu);
  member("known_bias", known_bias);
  if (!untested_scale.empty()) {
    const std::string m = fmt::format("\"untested_scale\": {}", json_string(untested_scale));
    out += trailing ? m + ", " : ", " + m;
  }
  return out;
}

std::string fp8_basis() {
  return fmt::format(
      "layer GEMMs in FP8, timed unvalidated: the BF16 fit's utilization on the FP8 peak, fit on no FP8 "
      "data ({}); memory as Transformer Engine keeps it (the layer linears' saved inputs in FP8; their "
      "cached FP8 weights and transposes as fp8 weights)",
      kFp8GemmFigure);
}

std::string fp8_note(const Scenario& s, bool mfu) {
  if (!s.workload.profile.fp8) return {};
  // (the MFU's peak said wherever this note is: compare-schedules and sweep
  // printed an FP8 run's MFU with no word of which peak, helper 109)
  return mfu ? fp8_basis() + "; MFU against the BF16 peak" : fp8_basis();
}

std::string multi_node_note(const Scenario& s) {
  if (s.cluster.nodes <= 1) return {};
  // Network constants of the scenario's own (a calibration: section from
  // validate collectives --fit): not the shipped assumptions, which the
  // line would otherwise tell the user to replace (helper 78).
  engine::LinkCalibration shipped = study::default_calibration(s.gpu, s.workload.framework).comm.network;
  shipped.skew = s.calibration.comm.network.skew;  // a what-if of its own, not a fit
  if (s.calibration.comm.network != shipped) {
    return fmt::format("{} nodes: {}", s.cluster.nodes, kMultiNodeCalibratedCaveat);
  }
  return fmt::format("{} nodes: {}", s.cluster.nodes, kMultiNodeCaveat);
}

std::string caveat_lines(const Scenario& s, bool plan_bias, bool mfu) {
  const std::string fp8 = fp8_note(s, mfu);
  return caveat_lines(untested_gpu_notes(s), known_bias_notes(s, plan_bias), multi_node_note(s)) +
         labelled_lines("FP8", fp8.empty() ? std::vector<std::string>{} : std::vector<std::string>{fp8});
}

std::string caveat_json(const Scenario& s, bool plan_bias, bool trailing) {
  constexpr std::string_view kFp8 = R"("fp8_gemm_times": "unvalidated")";
  const std::string fp8 = !s.workload.profile.fp8 ? std::string()
                          : trailing              ? fmt::format("{}, ", kFp8)
                                                  : fmt::format(", {}", kFp8);
  return caveat_json(untested_gpu_notes(s), known_bias_notes(s, plan_bias), trailing, multi_node_note(s)) +
         fp8;
}

std::string ranking_bias_note(std::string_view known_bias, std::string_view rows, std::string_view which) {
  // The note of one plan starts with its own width ("8-way tensor
  // parallelism: "); over rows of several widths it names them all (helper
  // 106: "8-way" headed a note about 4-way points).
  constexpr std::string_view kWay = "-way tensor parallelism: ";
  const std::size_t way = known_bias.find(kWay);
  std::string bias(known_bias);
  if (way != std::string_view::npos && way > 0 &&
      known_bias.substr(0, way).find_first_not_of("0123456789") == std::string_view::npos) {
    bias = fmt::format("{}-way and wider tensor parallelism: {}", parallelism::kKnownBiasMinTp,
                       known_bias.substr(way + kWay.size()));
  }
  return fmt::format(
      "note: known bias: {}; {} with {}-way or wider tensor parallelism{}{} may therefore rank above {} with "
      "less "
      "that run faster\n",
      bias, rows, parallelism::kKnownBiasMinTp, which.empty() ? "" : " ", which, rows);
}

std::string failures_json(const Scenario::Failures& f) {
  if (!f.any()) return {};
  std::vector<std::string> timed;
  timed.reserve(f.timed.size());
  for (const auto& t : f.timed) {
    timed.push_back(fmt::format("{{\"cable\": {}, \"at_s\": {:.9e}, \"change\": {}}}",
                                json_string(Scenario::Failures::cable_name(t.a, t.b)), t.at.seconds(),
                                json_string(t.fail ? "fails" : "degraded")));
  }
  auto names = [](const auto& list) { return fmt::format("[{}]", cable_names(list, true)); };
  return fmt::format(
      "\"failures\": {{\"links\": {}, \"degraded\": {}, \"degraded_rate\": {:.6f}, \"timed\": [{}]}}, ",
      names(f.failed), names(f.degraded), f.degraded_rate, fmt::join(timed, ", "));
}

std::string compute_scales_phrase(const study::ComputeScales& c, int gpus) {
  std::string out;
  if (c.slower > 0) {
    out = fmt::format("{} of {} GPUs slower than predicted (compute x{:.3f} at most)", c.slower, gpus,
                      c.max_scale);
  }
  if (c.faster > 0) {
    out += c.slower > 0 ? fmt::format(", {} faster (x{:.3f} at least)", c.faster, c.min_scale)
                        : fmt::format("{} of {} GPUs faster than predicted (compute x{:.3f} at least)",
                                      c.faster, gpus, c.min_scale);
  }
  return out;
}

study::ComputeScales compute_scales_of(const Scenario& s) {
  study::ComputeScales c;
  for (double f : s.compute_scale) c.add(f);
  return c;
}

std::string stragglers_line(const Scenario& s) {
  const study::ComputeScales c = compute_scales_of(s);
  return c.any() ? fmt::format("Stragglers     {}\n", compute_scales_phrase(c, s.gpus())) : std::string();
}

std::string compute_scales_json(const study::ComputeScales& c) {
  std::string out;
  if (c.slower > 0)
    out += fmt::format("\"stragglers\": {}, \"max_compute_scale\": {:.6f}, ", c.slower, c.max_scale);
  if (c.faster > 0)
    out += fmt::format("\"faster_gpus\": {}, \"min_compute_scale\": {:.6f}, ", c.faster, c.min_scale);
  return out;
}

std::string failures_line(const Scenario::Failures& f, Time iteration) {
  if (!f.any()) return {};
  std::vector<std::string> parts;
  if (!f.failed.empty()) parts.push_back(fmt::format("out of service: {}", cable_names(f.failed, false)));
  if (!f.degraded.empty()) {
    parts.push_back(
        fmt::format("at {:g}% of their rate: {}", 100.0 * f.degraded_rate, cable_names(f.degraded, false)));
  }
  for (const auto& t : f.timed) {
    const std::string cable = Scenario::Failures::cable_name(t.a, t.b);
    parts.push_back(
        (t.fail ? fmt::format("{} fails at {:g} ms", cable, t.at.ms())
                : fmt::format("{} drops to {:g}% at {:g} ms", cable, 100.0 * f.degraded_rate, t.at.ms())) +
        (t.at >= iteration ? " (after the iteration ends: no effect)" : ""));
  }
  return fmt::format("Failures       {}\n", fmt::join(parts, "; "));
}

std::vector<StageMemory> stage_memory(const std::vector<parallelism::MemoryEstimate>& stages) {
  std::vector<StageMemory> out;
  out.reserve(stages.size());
  for (std::size_t i = 0; i < stages.size(); ++i) {
    const auto& m = stages[i];
    out.push_back(StageMemory{static_cast<int>(i), m.total(), m.capacity, m.oom(), m.weights, m.fp8_weights,
                              m.gradients, m.optimizer_states, m.activations, m.workspace});
  }
  return out;
}

std::string tight_memory_warning(const std::vector<StageMemory>& memory) {
  auto share = [](const StageMemory& m) { return m.total.in_gib() / m.capacity.in_gib(); };
  // A plan out of memory is said to be (helper 80: compare-schedules warned
  // that one stage of a plan marked OOM "may not fit").
  if (std::any_of(memory.begin(), memory.end(), [](const StageMemory& m) { return m.oom; })) return {};
  const StageMemory* fullest = nullptr;
  for (const auto& m : memory) {
    if (m.oom || !tight_memory(m.total, m.capacity)) continue;
    if (!fullest || share(m) > share(*fullest)) fullest = &m;
  }
  if (!fullest) return {};
  return tight_memory_text(fmt::format("stage {}", fullest->stage), fullest->total, fullest->capacity);
}

std::string tight_memory_text(std::string_view what, Bytes need, Bytes capacity) {
  return fmt::format(
      "memory: {} needs {:.1f} of {:.1f} GiB ({:.0f}%), and {}: a plan this full may not fit "
      "(tessera search --memory-headroom SIZE keeps plans that leave SIZE free)",
      what, need.in_gib(), capacity.in_gib(), 100.0 * need.in_gib() / capacity.in_gib(), kWorkspaceCaveat);
}

std::string forecast_warning_location(const Scenario& s, const std::string& warning) {
  for (const std::string key : study::kRunWarningKeys) {
    if (warning.size() <= key.size() || warning.compare(0, key.size(), key) != 0) continue;
    if (warning[key.size()] != ' ' && warning[key.size()] != ':') continue;
    if (const auto at = s.key_locations.find(key); at != s.key_locations.end()) return at->second.first;
  }
  return s.file;
}

void print_forecast_warning(const Scenario& s, const std::string& warning) {
  std::cerr << fmt::format("tessera: warning: {}: {}\n", forecast_warning_location(s, warning), warning);
}

std::vector<std::string> late_failure_warnings(const Scenario::Failures& f, Time iteration) {
  std::vector<std::string> out;
  for (const auto& t : f.timed) {
    if (t.at < iteration) continue;
    out.push_back(fmt::format(
        "failures: {} {} at {:g} ms, after the iteration ends ({:.3f} ms): it changes nothing",
        Scenario::Failures::cable_name(t.a, t.b), t.fail ? "fails" : "degrades", t.at.ms(), iteration.ms()));
  }
  return out;
}

namespace {
/// "774.0 M", "46.70 B".
std::string parameter_count(std::int64_t n) {
  const auto v = static_cast<double>(n);
  return v >= 1e9 ? fmt::format("{:.2f} B", v * 1e-9) : fmt::format("{:.1f} M", v * 1e-6);
}

/// All digits, in groups of three: "60,160".
std::string grouped(std::int64_t n) {
  std::string digits = std::to_string(n);
  for (auto at = static_cast<std::ptrdiff_t>(digits.size()) - 3; at > (n < 0 ? 1 : 0); at -= 3)
    digits.insert(static_cast<std::size_t>(at), ",");
  return digits;
}

/// How an MoE run routes, when it is not the even, dropless default: ", capacity
/// factor 1.25: every expert padded to it" or ", busiest expert-parallel
/// rank 1.25x the average: every rank modelled as it, ...".
std::string moe_routing_phrase(const RunReport& r) {
  if (r.capacity_factor > 1.0) {
    return fmt::format(", capacity factor {}: every expert padded to it", r.capacity_factor);
  }
  if (r.load_factor > 1.0) {
    return fmt::format(
        ", busiest expert-parallel rank {}x the average: every rank modelled as it, in time and all-to-all "
        "bytes",
        r.load_factor);
  }
  return {};
}

/// "fp8 weights 1.9, " for an fp8 run (MemoryEstimate::fp8_weights), else nothing.
std::string fp8_weights_part(const RunReport& r, const StageMemory& m) {
  return r.fp8 ? fmt::format("fp8 weights {:.1f}, ", m.fp8_weights.in_gib()) : std::string();
}
}  // namespace

std::string format_text(const RunReport& r) {
  // Shares of the iteration, rounded together as compare-schedules rounds
  // its bubble (IterationBreakdown::tenths_of_percent).
  const IterationBreakdown split{r.iteration_time, r.compute_time, r.host_time, r.bubble_time,
                                 r.exposed_comm_time};
  std::string out;
  out += fmt::format("Scenario       {}: {} on {} x {} ({}{})\n", r.scenario, r.model, r.gpus, r.gpu,
                     fabric_phrase(r.fabric) + r.fabric_detail, r.hcas);
  out += fmt::format(
      "Model          {}: {} parameters{}{}\n", r.model, parameter_count(r.parameters),
      r.experts > 0
          ? fmt::format(", {} active per token (top {} of {} experts{}{})",
                        parameter_count(r.active_parameters), r.top_k, r.experts,
                        r.shared_experts > 0 ? fmt::format(" + {} shared", r.shared_experts) : std::string(),
                        moe_routing_phrase(r))
          : std::string(),
      r.padded_parameters != r.parameters
          ? fmt::format(" (+{} as Megatron counts them, the vocabulary padded to {})",
                        grouped(r.padded_parameters - r.parameters), r.padded_vocab)
          : std::string());
  out += fmt::format("Plan           dp={} tp={} pp={}{}{}{}, {} x {} tokens, {} schedule{}\n", r.dp, r.tp,
                     r.pp, r.shows_ep() ? fmt::format(" ep={}", r.ep) : "",
                     r.layout.empty() ? "" : fmt::format(" (layout {})", r.layout),
                     layer_split_phrase(r.first_stage_layers, r.last_stage_layers, r.account_for_embedding,
                                        r.account_for_loss),
                     micro_batches_phrase(r.micro_batches, r.micro_batch), r.seq_len, r.schedule,
                     r.virtual_stages > 1 ? fmt::format(" (virtual_stages {})", r.virtual_stages) : "");
  out += fmt::format(
      "Options        dtype {}{}, framework {}, recompute {}, sequence_parallel {}, zero_stage {}, "
      "grad_sync {}{}\n",
      r.dtype, r.fp8 ? " (bf16 outside the layers' GEMMs)" : "", r.framework, r.recompute,
      r.sequence_parallel, r.zero_stage, r.grad_sync, r.grad_sync_note);
  out += fmt::format(
      "Models         {} node model{}, {} network backend\n", r.predictor,
      r.predictor_weights.empty() ? std::string() : fmt::format(" (weights {})", r.predictor_weights),
      r.backend);
  out += caveat_lines(r.untested_gpu, r.known_bias, r.untested_scale);
  if (!r.mixed_gpu.empty()) {
    // (MFU's peak said: the cluster GPU's, whatever the mixed nodes run;
    // helper 127)
    out += fmt::format(
        "Mixed GPUs     {} node{} of {} ({}; each stage's memory checked against its smallest GPU; "
        "MFU and HFU against {}'s peak)\n",
        r.mixed_nodes.size(), r.mixed_nodes.size() == 1 ? "" : "s", r.mixed_gpu, nodes_phrase(r.mixed_nodes),
        r.gpu);
  }
  out += failures_line(r.failures, r.iteration_time);
  if (r.scales.any()) out += fmt::format("Stragglers     {}\n", compute_scales_phrase(r.scales, r.gpus));
  if (const auto& o = r.kernel_overrides) {
    out +=
        fmt::format("Measured       {} of {} kernel{} in {} matched ({} planner lookup{}){}{}\n", o->matched,
                    o->entries, o->entries == 1 ? "" : "s", o->path, o->lookups, o->lookups == 1 ? "" : "s",
                    o->ignored_rows == 0 ? std::string()
                                         : fmt::format("; {} row{} ignored: composite or non-GEMM ops",
                                                       o->ignored_rows, o->ignored_rows == 1 ? "" : "s"),
                    unmatched_phrase(o->unmatched_lines));
    if (!o->unused_time_lines.empty()) {
      out += fmt::format(
          "               time_us unused on line{} {}: the kernel runs only as a part of a fused "
          "launch, timed by its part_time_us\n",
          o->unused_time_lines.size() == 1 ? "" : "s", fmt::join(o->unused_time_lines, ", "));
    }
  }
  out += fmt::format("Iteration      {:>12.3f} ms\n", r.iteration_time.ms());
  // The four shares rounded together, so that they add up to 100.0%.
  const std::array<int, 4> tenths = split.tenths_of_percent();
  out += fmt::format("  compute      {:>12.3f} ms  {:5.1f}%\n", r.compute_time.ms(), tenths[0] / 10.0);
  // Eager kernels are timed with their hosts' launch floors in them
  // (docs/calibration.md): zero here is not a free host (helper 56).
  const bool floors = r.framework == "pytorch-eager" && r.host_time == Time::zero();
  out += fmt::format("  host         {:>12.3f} ms  {:5.1f}%{}\n", r.host_time.ms(), tenths[1] / 10.0,
                     floors ? "  (pytorch-eager: each kernel's launch floor is in compute; calibration host "
                              "keys model the host apart)"
                            : "");
  out += fmt::format("  bubble       {:>12.3f} ms  {:5.1f}%\n", r.bubble_time.ms(), tenths[2] / 10.0);
  out += fmt::format("  exposed comm {:>12.3f} ms  {:5.1f}%\n", r.exposed_comm_time.ms(), tenths[3] / 10.0);
  if (r.comm_costs && r.comm_costs->empty()) out += "Comm costs     none: the plan runs no communication\n";
  if (r.comm_costs && !r.comm_costs->empty()) {
    out +=
        "Comm costs     the iteration with one class of communication free, the rest as it is (each alone, "
        "so they do not add up to the exposed communication)\n";
    for (const auto& c : *r.comm_costs) {
      out += fmt::format("  {:<22} {:>10.3f} ms faster  {:5.1f}%  (iteration {:.3f} ms)\n",
                         study::to_string(c.cls), c.saving.ms(), 100.0 * split.share(c.saving),
                         c.iteration_without.ms());
    }
  }
  out += fmt::format("Throughput     {:>12.0f} tokens/s\n", r.tokens_per_second);
  if (r.training_run)
    out += "Training run   " + training_run_text(*r.training_run, r.price_per_gpu_hour) + "\n";
  out += fmt::format("Per GPU        {:>12.1f} TFLOP/s model (MFU {:.1f}%), {:.1f} TFLOP/s hardware (HFU {:.1f}%)\n",
                     r.tflops_per_gpu, 100.0 * r.mfu, r.hardware_tflops_per_gpu, 100.0 * r.hfu);
  if (r.fp8) {
    out +=
        fmt::format("FP8            {}; MFU/HFU against the BF16 peak (against the FP8 peak: MFU {:.1f}%)\n",
                    fp8_basis(), 100.0 * r.mfu_fp8_peak);
  }
  out += fmt::format(
      "Network        {:>12.3f} GB sent per iteration: {:.3f} GB over NVLink within nodes, {:.3f} GB "
      "between nodes\n",
      r.bytes_sent.as_double() * 1e-9, r.nvlink_bytes.as_double() * 1e-9, r.fabric_bytes.as_double() * 1e-9);
  if (!r.stage_balance.empty()) {
    // The slowest stage sets the pace of the pipeline: marked.
    const auto slowest = std::max_element(r.stage_balance.begin(), r.stage_balance.end(), computes_less);
    const auto fastest = std::min_element(r.stage_balance.begin(), r.stage_balance.end(), computes_less);
    const auto layers = [](std::int64_t n) { return fmt::format("{} layer{}", n, n == 1 ? "" : "s"); };
    if (r.stage_balance_lines) {
      out += "Stage balance  busiest compute stream per pipeline stage, against the fastest stage\n";
      for (auto it = r.stage_balance.begin(); it != r.stage_balance.end(); ++it) {
        out += fmt::format("  stage {:<6} {:>12.3f} ms  x{:.3f}  (rank {}, {}){}\n", it->stage,
                           it->compute.ms(), it->vs_fastest, it->slowest_rank, layers(it->layers),
                           it == slowest && r.stage_balance.size() > 1 ? "  <- slowest" : "");
      }
    } else {
      out += fmt::format(
          "Stage balance  busiest compute stream per pipeline stage from {:.3f} ms (stage {}, {}) "
          "to {:.3f} ms (stage {}, {}: x{:.3f}, the slowest)\n",
          fastest->compute.ms(), fastest->stage, layers(fastest->layers), slowest->compute.ms(),
          slowest->stage, layers(slowest->layers), slowest->vs_fastest);
    }
    if (!r.stage_balance_hint.empty()) out += fmt::format("               {}\n", r.stage_balance_hint);
  }
  if (r.memory.size() <= 4) {
    for (const auto& m : r.memory) {
      out += fmt::format("Memory stage {:<3} {:>7.1f} GiB of {:.1f} GiB{}\n", m.stage, m.total.in_gib(),
                         m.capacity.in_gib(), m.oom ? "  ** OUT OF MEMORY **" : "");
      out += fmt::format(
          "  weights {:.1f}, {}gradients {:.1f} ({}), optimizer {:.1f}, activations {:.1f}, workspace "
          "{:.1f} GiB\n",
          m.weights.in_gib(), fp8_weights_part(r, m), m.gradients.in_gib(), r.gradient_dtype,
          m.optimizer_states.in_gib(), m.activations.in_gib(), m.workspace.in_gib());
    }
  } else if (!r.memory.empty()) {
    // Many stages: the extremes, and every stage that does not fit.
    auto [lo, hi] = std::minmax_element(r.memory.begin(), r.memory.end(),
                                        [](const StageMemory& a, const StageMemory& b) { return a.total < b.total; });
    const bool one_capacity = std::all_of(r.memory.begin(), r.memory.end(), [&](const StageMemory& m) {
      return m.capacity == r.memory.front().capacity;
    });
    if (one_capacity) {
      out += fmt::format(
          "Memory         {:>7.1f} GiB (stage {}) to {:.1f} GiB (stage {}) of {:.1f} GiB per GPU\n",
          lo->total.in_gib(), lo->stage, hi->total.in_gib(), hi->stage, hi->capacity.in_gib());
    } else {
      // Mixed GPUs: the stage fullest for its GPU may hold fewer bytes.
      const StageMemory fullest = r.fullest_stage();
      out += fmt::format(
          "Memory         {:>7.1f} GiB (stage {}) to {:.1f} GiB (stage {}); fullest for its GPU: stage {}, "
          "{:.1f} of {:.1f} GiB\n",
          lo->total.in_gib(), lo->stage, hi->total.in_gib(), hi->stage, fullest.stage, fullest.total.in_gib(),
          fullest.capacity.in_gib());
      hi = r.memory.begin() + static_cast<std::ptrdiff_t>(r.fullest);
    }
    // The fullest stage's split, as the per-stage lines give it (every
    // stage's: --json).
    out += fmt::format(
        "  stage {}: weights {:.1f}, {}gradients {:.1f} ({}), optimizer {:.1f}, activations {:.1f}, "
        "workspace {:.1f} GiB\n",
        hi->stage, hi->weights.in_gib(), fp8_weights_part(r, *hi), hi->gradients.in_gib(), r.gradient_dtype,
        hi->optimizer_states.in_gib(), hi->activations.in_gib(), hi->workspace.in_gib());
    for (const auto& m : r.memory) {
      if (m.oom)
        out += fmt::format("  ** OUT OF MEMORY ** stage {}: {:.1f} GiB\n", m.stage, m.total.in_gib());
    }
  }
  if (r.packet_fabric) out += format_packet_fabric(*r.packet_fabric);
  return out;
}

namespace {
/// `"kernel_overrides": {...}, ` when the scenario has node_model.overrides, else nothing.
std::string kernel_overrides_json(const RunReport& r) {
  if (!r.kernel_overrides) return {};
  const auto& o = *r.kernel_overrides;
  return fmt::format(
      "\"kernel_overrides\": {{\"file\": {}, \"kernels\": {}, \"matched_kernels\": {}, \"lookups\": "
      "{}{}{}{}}}, ",
      json_string(o.path), o.entries, o.matched, o.lookups,
      // Only a PyTorch profiler export skips rows.
      o.ignored_rows == 0 ? std::string() : fmt::format(", \"ignored_rows\": {}", o.ignored_rows),
      o.unmatched_lines.empty()
          ? std::string()
          : fmt::format(", \"unmatched_lines\": [{}]", fmt::join(o.unmatched_lines, ", ")),
      o.unused_time_lines.empty()
          ? std::string()
          : fmt::format(", \"unused_time_lines\": [{}]", fmt::join(o.unused_time_lines, ", ")));
}
}  // namespace

std::string format_json(const RunReport& r) {
  std::string memory;
  for (const auto& m : r.memory) {
    // fp8_weights_bytes for fp8 runs only (as the text's part), so others' are as before.
    const std::string fp8_weights =
        r.fp8 ? fmt::format("\"fp8_weights_bytes\": {}, ", m.fp8_weights.count()) : std::string();
    memory += fmt::format(
        "{}{{\"stage\": {}, \"bytes\": {}, \"capacity_bytes\": {}, \"oom\": {}, \"weights_bytes\": {}, "
        "{}\"gradients_bytes\": {}, \"optimizer_bytes\": {}, \"activations_bytes\": {}, "
        "\"workspace_bytes\": {}}}",
        memory.empty() ? "" : ", ", m.stage, m.total.count(), m.capacity.count(), m.oom ? "true" : "false",
        m.weights.count(), fp8_weights, m.gradients.count(), m.optimizer_states.count(),
        m.activations.count(), m.workspace.count());
  }
  std::string balance;
  if (!r.stage_balance_hint.empty()) {
    const auto key = [](const std::optional<std::int64_t>& v) {
      return v ? std::to_string(*v) : std::string("null");
    };
    balance += fmt::format(", \"stage_balance_hint\": {}", json_string(r.stage_balance_hint));
    if (const auto& sp = r.suggested_split) {
      // A plan counting the embedding and the loss is told to stop (Megatron-Core takes one way or the
      // other).
      balance += fmt::format(
          ", \"suggested_split\": {{\"first_stage_layers\": {}, \"last_stage_layers\": {}, {}"
          "\"slowest_stage_compute_s\": {:.9e}{}}}",
          key(sp->first_stage_layers), key(sp->last_stage_layers),
          r.account_for_embedding || r.account_for_loss
              ? "\"account_for_embedding\": false, \"account_for_loss\": false, "
              : "",
          sp->slowest_s,
          r.split_free_iteration && r.plan_free_iteration
              ? fmt::format(", \"free_comm_iteration_s\": {:.9e}, \"plan_free_comm_iteration_s\": {:.9e}",
                            r.split_free_iteration->seconds(), r.plan_free_iteration->seconds())
              : "");
    }
  }
  if (!r.stage_balance.empty()) {
    balance += ", \"stage_balance\": [";
    for (std::size_t i = 0; i < r.stage_balance.size(); ++i) {
      const auto& b = r.stage_balance[i];
      balance += fmt::format(
          "{}{{\"stage\": {}, \"layers\": {}, \"slowest_rank\": {}, \"compute_time_s\": {:.9e}, "
          "\"vs_fastest\": {:.6f}}}",
          i == 0 ? "" : ", ", b.stage, b.layers, b.slowest_rank, b.compute.seconds(), b.vs_fastest);
    }
    balance += "]";
  }
  const std::string warnings =
      r.warnings.empty() ? std::string() : ", \"warnings\": " + json_string_array(r.warnings);
  // The fullest stage's memory and its GPU's, as sweep, search and a job
  // report them.
  std::string peak;
  if (!r.memory.empty()) {
    const StageMemory fullest = r.fullest_stage();
    peak = fmt::format("\"peak_memory_bytes\": {}, \"memory_capacity_bytes\": {}, ", fullest.total.count(),
                       fullest.capacity.count());
  }
  std::string comm_costs;
  if (r.comm_costs) {
    comm_costs = ", \"comm_costs\": [";
    for (std::size_t i = 0; i < r.comm_costs->size(); ++i) {
      const auto& c = (*r.comm_costs)[i];
      comm_costs += fmt::format(R"({}{{"class": {}, "saving_s": {:.9e}, "iteration_without_s": {:.9e}}})",
                                i == 0 ? "" : ", ", json_string(std::string(study::to_string(c.cls))),
                                c.saving.seconds(), c.iteration_without.seconds());
    }
    comm_costs += "]";
  }
  return fmt::format(
      "{{\"scenario\": {}, \"model\": {}, \"parameters\": {}, \"active_parameters\": {}, "
      "\"padded_vocab\": {}, \"padded_parameters\": {}, \"gpu\": {}, "
      "\"fabric\": {}, \"fabric_tiers\": {}, \"leaf_oversubscription\": {:.6f}, "
      "\"spine_oversubscription\": {:.6f}, \"nodes_per_leaf\": {:.6f}, \"gpus\": {}, "
      "\"dp\": {}, \"tp\": {}, "
      "\"pp\": {}, {}\"schedule\": {}, \"virtual_stages\": {}, \"micro_batches\": {}, \"micro_batch\": {}, "
      "\"global_batch\": {}, \"seq_len\": {}, \"dtype\": {}, \"framework\": {}, \"recompute\": {}, "
      "\"sequence_parallel\": {}, "
      "\"zero_stage\": {}, \"grad_sync\": {}, {}\"backend\": {}, \"predictor\": {}, {}{}"
      "\"iteration_time_s\": {:.9e}, \"compute_time_s\": {:.9e}, \"host_time_s\": {:.9e}, "
      "\"bubble_time_s\": {:.9e}, \"exposed_comm_time_s\": {:.9e}, \"tflops_per_gpu\": {:.6f}, "
      "\"mfu\": {:.6f}, \"hardware_tflops_per_gpu\": {:.6f}, \"hfu\": {:.6f}, \"tokens_per_s\": {:.3f}, {}"
      "\"network_bytes\": {}, \"nvlink_bytes\": {}, \"fabric_bytes\": {}, \"gradient_dtype\": {}, "
      "{}\"oom\": {}, \"memory_per_stage\": [{}]{}}}\n",
      json_string(r.scenario), json_string(r.model), r.parameters,
      std::to_string(r.active_parameters) +
          (r.experts > 0 ? fmt::format(", \"moe\": {{\"experts\": {}, \"top_k\": {}, \"shared_experts\": {}, "
                                       "\"capacity_factor\": {:.6f}, \"imbalance\": {:.6f}, "
                                       "\"load_factor\": {:.6f}}}",
                                       r.experts, r.top_k, r.shared_experts, r.capacity_factor, r.imbalance,
                                       r.load_factor)
                         : std::string()),
      r.padded_vocab, r.padded_parameters, json_string(r.gpu), json_string(r.fabric), r.fabric_tiers,
      r.leaf_oversubscription, r.spine_oversubscription, r.nodes_per_leaf, r.gpus, r.dp, r.tp, r.pp,
      (r.shows_ep() ? fmt::format("\"ep\": {}, ", r.ep) : std::string()) +
          (r.layout.empty() ? std::string() : fmt::format("\"layout\": {}, ", json_string(r.layout))),
      json_string(r.schedule),
      std::to_string(r.virtual_stages) +
          (r.first_stage_layers ? fmt::format(", \"first_stage_layers\": {}", *r.first_stage_layers) : "") +
          (r.last_stage_layers ? fmt::format(", \"last_stage_layers\": {}", *r.last_stage_layers) : "") +
          (r.account_for_embedding ? ", \"account_for_embedding\": true" : "") +
          (r.account_for_loss ? ", \"account_for_loss\": true" : ""),
      r.micro_batches, r.micro_batch, r.global_batch, r.seq_len, json_string(r.dtype),
      json_string(r.framework), json_string(r.recompute), r.sequence_parallel, r.zero_stage,
      json_string(r.grad_sync), r.overlap_param_gather ? "\"overlap_param_gather\": true, " : "",
      json_string(r.backend), json_string(r.predictor),
      (r.mixed_gpu.empty() ? std::string() : mixed_gpus_json(r.mixed_gpu, r.mixed_nodes, r.gpu)) +
          compute_scales_json(r.scales) + failures_json(r.failures),
      (r.predictor_weights.empty()
           ? std::string()
           : fmt::format("\"predictor_weights\": {}, ", json_string(r.predictor_weights))) +
          kernel_overrides_json(r) +
          // fp8_gemm_times too, as the other commands name the caveat.
          (r.fp8 ? fmt::format("\"fp8\": {{\"gemm_times\": \"unvalidated\", "
                               "\"memory\": \"transformer-engine\", \"mfu_peak\": \"bf16\", "
                               "\"mfu_fp8_peak\": {:.6f}}}, \"fp8_gemm_times\": \"unvalidated\", ",
                               r.mfu_fp8_peak)
                 : std::string()) +
          caveat_json(r.untested_gpu, r.known_bias, true, r.untested_scale),
      r.iteration_time.seconds(), r.compute_time.seconds(), r.host_time.seconds(), r.bubble_time.seconds(),
      r.exposed_comm_time.seconds(), r.tflops_per_gpu, r.mfu, r.hardware_tflops_per_gpu, r.hfu,
      r.tokens_per_second,
      r.training_run ? fmt::format("\"training_run\": {}, ", training_run_json(*r.training_run))
                     : std::string(),
      r.bytes_sent.count(), r.nvlink_bytes.count(), r.fabric_bytes.count(), json_string(r.gradient_dtype),
      peak, r.oom() ? "true" : "false", memory,
      balance + (r.packet_fabric ? json_packet_fabric(*r.packet_fabric) : std::string()) + comm_costs +
          warnings);
}

}  // namespace tessera::cli
