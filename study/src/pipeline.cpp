#include "tessera/study/pipeline.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tessera/collectives/expand.hpp"
#include "tessera/collectives/ring.hpp"
#include "tessera/engine/zero_cost_network.hpp"
#include "tessera/index.hpp"
#include "tessera/node_model/predictors.hpp"
#include "tessera/node_model/roofline.hpp"
#include "tessera/parallelism/plan.hpp"

namespace tessera::study {

engine::ExecutionOptions execution_options(const Scenario& s) {
  // The scenario's calibration (cli::default_calibration, `calibration:` keys).
  engine::ExecutionOptions options{s.collectives, {}, s.calibration.comm, s.compute_scale, {}};
  // Without fused reductions (a line-rate calibration), a reducing receiver
  // runs an elementwise add of the bytes: time it as the memory-bound kernel
  // it is, at the GPU's memory bandwidth (no launch floor: inside NCCL's
  // kernel).
  auto reduction_model = std::make_shared<const node_model::RooflinePredictor>(s.gpu);
  const node_model::DType dtype = s.workload.dtype;
  options.reduction_time = [reduction_model, dtype](Bytes b) {
    const std::int64_t elements = b.count() / node_model::dtype_bytes(dtype);
    if (elements <= 0) return Time::zero();
    return reduction_model->predict(node_model::Kernel::vector(node_model::KernelOp::Add, 1, elements, dtype));
  };
  return options;
}

WorkEstimate estimate_work(const Scenario& s) {
  const auto& plan = s.plan;
  WorkEstimate w;
  const double dp = plan.dp;
  const double tp = plan.tp;
  const double pp = plan.pp;
  w.ranks = dp * tp * pp;
  w.micro_batches = static_cast<double>(plan.sequences(s.workload.micro_batch)) /
                    (dp * static_cast<double>(s.workload.micro_batch));
  const double layers_per_stage = std::ceil(static_cast<double>(s.model.layers) / pp) + 1;  // + embedding or head
  const double chunks = std::max(1, s.collectives.chunks);
  // Transfers per rank of a ring collective over n ranks: one flow, or n - 1
  // steps per ring pass (x chunks) at step granularity.
  const bool flows = s.collectives.granularity == collectives::Granularity::Flows;
  auto ring_sends = [&](double n, double passes) { return flows ? 1.0 : passes * (n - 1) * chunks; };
  const double per_rank_layer_steps = w.micro_batches * layers_per_stage;
  w.tasks = w.ranks * per_rank_layer_steps * 40;
  // Tensor parallel: about 4 all-reduces (or their all-gather/reduce-scatter
  // halves) per layer and micro-batch, forward and backward.
  // Inside a mesh node, a ring is its mesh rings (collectives::mesh_rings),
  // each rank in every one.
  const double tp_rings = s.collectives.mesh_node && plan.tp <= s.cluster.gpus_per_node
                              ? collectives::mesh_ring_count(plan.tp)
                              : 1.0;
  w.tp_transfers = tp > 1 ? w.ranks * per_rank_layer_steps * 4 * 2 * tp_rings * ring_sends(tp, 1) : 0.0;
  // Data parallel: the stage's gradients, each bucket a ring all-reduce
  // (after the backward pass, Megatron's one contiguous buffer).
  const double grad_bytes =
      static_cast<double>(s.model.params_per_layer_per_tp_rank(plan.tp)) * layers_per_stage * 4.0;
  const parallelism::GradSync sync = plan.resolved_grad_sync(s.workload);
  // A bucket closes at the first layer end past the bucket size, so it holds
  // at least one layer's gradients: at most a bucket per layer (a 100 B
  // bucket size was refused as 7.5e11 events; it runs as one per layer).
  const double cut =
      std::clamp(std::ceil(grad_bytes / std::max(1.0, plan.resolved_bucket_size(s.workload).as_double())),
                 1.0, layers_per_stage);
  // Megatron-Core's DDP cuts buckets on the first stage only, and with
  // interleaving reduces a chunk at a time (parallelism::DpGradSync): per
  // rank on average.
  const double buckets =
      sync == parallelism::GradSync::AfterBackward ? 1.0
      : sync == parallelism::GradSync::OverlapGradReduce
          ? (plan.virtual_stages > 1 ? static_cast<double>(plan.virtual_stages) : (cut + pp - 1) / pp)
          : cut;
  // A data-parallel group spanning nodes with several ranks on each runs as
  // that many rail rings (collectives::rail_rings), each rank in every one.
  const double dp_per_node = std::min(dp, std::max(1.0, std::floor(s.cluster.gpus_per_node / tp)));
  const double rings = dp > dp_per_node && dp_per_node >= 2 ? dp_per_node : 1.0;
  w.dp_transfers = dp > 1 ? w.ranks * buckets * rings * ring_sends(dp, 2) : 0.0;
  // Pipeline: an activation and a gradient per micro-batch and stage boundary.
  w.pp_transfers = pp > 1 ? w.ranks * w.micro_batches * 2 * static_cast<double>(plan.virtual_stages) : 0.0;
  // Expert parallelism: 4 all-to-alls per MoE layer and micro-batch (dispatch
  // and combine, each way), each ep - 1 messages per rank (direct algorithm).
  if (s.model.is_moe() && plan.ep > 1) {
    const double moe_share =
        static_cast<double>(s.model.moe_layers_in(0, s.model.layers)) / static_cast<double>(s.model.layers);
    w.ep_transfers = w.ranks * per_rank_layer_steps * moe_share * 4 * (plan.ep - 1) * chunks;
  }
  return w;
}

void check_work(const Scenario& s) {
  const WorkEstimate w = estimate_work(s);
  if (w.events() <= kMaxSimulatedEvents) return;
  // Kernels: micro-batches x layers x kernels per layer on every rank.
  // (the batch by the key that gave it: helper 150, micro_batches set on
  // the command line was placed at micro_batch's line)
  const char* keys = w.micro_batches <= 1       ? "model.layers"
                     : s.batch_as_micro_batches ? "training.micro_batches, training.micro_batch, model.layers"
                                                : "training.global_batch, training.micro_batch, model.layers";
  double largest = w.tasks;
  if (w.tp_transfers > largest) {
    largest = w.tp_transfers;
    keys = "parallelism.tp, collectives.chunks";
  }
  if (w.dp_transfers > largest) {
    largest = w.dp_transfers;
    keys = "parallelism.dp, cluster.nodes, collectives.chunks, parallelism.bucket_size";
  }
  if (w.pp_transfers > largest) {
    largest = w.pp_transfers;
    keys = "training.global_batch, parallelism.pp";
  }
  if (w.ep_transfers > largest) keys = "parallelism.ep, collectives.chunks";
  // Placed at the key the command line set (a sweep's), else at the first
  // the file writes.
  std::string where = s.file;
  std::string option;
  bool placed = false;
  for (std::string_view rest = keys; !rest.empty();) {
    const std::size_t comma = rest.find(", ");
    const std::string key(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 2);
    const auto it = s.key_locations.find(key);
    if (it == s.key_locations.end()) continue;
    if (!it->second.second.empty()) {
      std::tie(where, option) = it->second;
      break;
    }
    if (!placed) where = it->second.first;
    placed = true;
  }
  throw ScenarioError(
      where,
      fmt::format(
          "{}: one iteration would take about {:.2g} engine events ({:.2g} ranks, {:.3g} micro-batches per "
          "replica, {:.2g} compute tasks, {:.2g} transfers), more than the {:.0e} that can be simulated "
          "(about 17 minutes and 7 GiB; docs/scenarios.md, limits)",
          keys, w.events(), w.ranks, w.micro_batches, w.tasks, w.transfers(), kMaxSimulatedEvents),
      option);
}

BackendRun run_on_backend(const Scenario& s, const parallelism::TaskGraph& graph, const topology::Topology& topo,
                          std::vector<std::int32_t> source_classes, const BackendRegistry& backends) {
  const NetworkBackend& backend = backends.at(s.backend.name);
  backend.check(s);
  return backend.run_classified(graph, topo, s, execution_options(s), nullptr, std::move(source_classes));
}

engine::ExecutionResult execute_on_backend(const Scenario& s, const parallelism::TaskGraph& graph,
                                           const topology::Topology& topo, const BackendRegistry& backends) {
  return run_on_backend(s, graph, topo, {}, backends).result;
}

std::vector<Bytes> stage_memory_capacity(const Scenario& s, const parallelism::ParallelPlan& plan) {
  std::vector<Bytes> capacity(static_cast<std::size_t>(std::max(plan.pp, 1)), s.gpu.memory);
  if (!s.mixed_gpus) return capacity;
  for (int node : s.mixed_gpus->nodes) {
    for (int k = 0; k < s.cluster.gpus_per_node; ++k) {
      const std::size_t r = flat_index(node, s.cluster.gpus_per_node, k);
      if (r >= static_cast<std::size_t>(plan.world_size())) continue;
      const auto stage = static_cast<std::size_t>(parallelism::rank_coord(plan, static_cast<int>(r)).pp);
      capacity[stage] = std::min(capacity[stage], s.mixed_gpus->gpu.memory);
    }
  }
  return capacity;
}

Bytes smallest_gpu_memory(const Scenario& s) {
  return s.mixed_gpus ? std::min(s.gpu.memory, s.mixed_gpus->gpu.memory) : s.gpu.memory;
}

namespace {

/// The scenario's iteration planned with `predictor`, the nodes of a
/// `mixed_gpus` GPU running its own timings.
parallelism::PlannedTraining plan_scenario(const Scenario& s, const node_model::KernelPredictor& predictor) {
  auto planned = parallelism::plan_training_detailed(s.model, s.workload, s.plan, predictor);
  if (s.mixed_gpus) {
    // Nodes of the other GPU run the same plan timed on their GPU: its
    // programs have the same tasks and collectives, other durations.
    Scenario other = s;
    other.gpu = s.mixed_gpus->gpu;
    other.mixed_gpus.reset();
    // Measured kernel times are cluster.gpu's (node_model.overrides): the
    // other GPU's ranks are predicted on it (helper 112: the A100 times
    // replaced the H100 ranks' predictions too, 22% off with no word).
    other.kernel_overrides.reset();
    const auto other_predictor = make_scenario_predictor(other);
    const auto other_plan = parallelism::plan_training_detailed(s.model, s.workload, s.plan, *other_predictor);
    auto& g = planned.graph;
    const auto base = static_cast<std::int32_t>(g.programs.size());
    g.programs.insert(g.programs.end(), other_plan.graph.programs.begin(), other_plan.graph.programs.end());
    for (int node : s.mixed_gpus->nodes) {
      for (int k = 0; k < s.cluster.gpus_per_node; ++k) {
        const std::size_t r = flat_index(node, s.cluster.gpus_per_node, k);
        if (r >= g.ranks.size()) continue;
        g.ranks[r].program = base + other_plan.graph.ranks[r].program;
      }
    }
    auto& memory = planned.summary.memory_per_stage;
    const auto capacity = stage_memory_capacity(s, s.plan);
    for (std::size_t stage = 0; stage < memory.size() && stage < capacity.size(); ++stage)
      memory[stage].capacity = capacity[stage];
  }
  return planned;
}

Simulation simulate_unchecked(const Scenario& s, engine::ExecutionObserver* observer,
                              const node_model::KernelPredictor* predictor, bool split,
                              const NetworkBackend& backend) {
  std::unique_ptr<node_model::KernelPredictor> owned;
  if (predictor == nullptr) {
    owned = make_scenario_predictor(s);
    predictor = owned.get();
  }
  auto planned = plan_scenario(s, *predictor);
  Simulation sim{build_topology(s), std::move(planned.summary), {}, {}, {}, {}, {}, {}, {}, {}};
  if (const auto* o = dynamic_cast<const node_model::OverridePredictor*>(predictor))
    sim.kernel_overrides = o->stats();
  const engine::ExecutionOptions options = execution_options(s);
  BackendRun run = backend.run(planned.graph, sim.topology, s, options, observer);
  sim.result = std::move(run.result);
  sim.link_bytes = std::move(run.link_bytes);
  sim.link_busy = std::move(run.link_busy);
  sim.link_peak_utilization = std::move(run.link_peak_utilization);
  sim.link_csv = std::move(run.link_csv);
  sim.packet_fabric = run.packet_fabric;
  if (!split) return sim;
  // Free communication: the zero-cost network applies no calibration; one
  // rank per class of interchangeable ranks runs.
  sim.free_comm = free_communication(engine::execute_on_free_network(planned.graph, options));
  return sim;
}

/// `message` at `key` where the scenario wrote it (its line, or the --set
/// that gave it), else at the file.
[[noreturn]] void throw_at_key(const Scenario& s, const std::string& key, const std::string& message) {
  const auto at = s.key_locations.find(key);
  const bool located = at != s.key_locations.end();
  throw ScenarioError(located ? at->second.first : s.file, message,
                      located ? at->second.second : std::string());
}

}  // namespace

void throw_overflow(const Scenario& s, const OverflowError& e) {
  // A time or size past int64 while planning or simulating: the iteration
  // is too big to represent. Name the keys that scale it: a latency of
  // more than a day if the scenario has one (no real link or host has),
  // else the work per iteration.
  const std::pair<const char*, Time> latencies[] = {
      {"cluster.nvlink_latency", s.cluster.nvlink_latency},
      {"cluster.nic_latency", s.cluster.nic_latency},
      {"cluster.pcie_latency", s.cluster.pcie_latency},
      {"cluster.fabric.spine_latency",
       s.fabric == FabricKind::LeafSpine
           ? s.cluster.spine_latency
           : (s.fabric == FabricKind::FatTree ? s.fat_tree.leaf_spine.latency : s.rail.leaf_spine.latency)},
      {"cluster.fabric.core_latency", s.fabric == FabricKind::FatTree         ? s.fat_tree.spine_core.latency
                                      : s.fabric == FabricKind::RailOptimized ? s.rail.spine_core.latency
                                                                              : Time{}},
      {"collectives.auto_latency", s.collectives.auto_latency},
      {"calibration.host_launch", s.calibration.host_launch},
      {"calibration.host_iteration", s.calibration.host_iteration},
      {"calibration.host_p2p", s.calibration.host_p2p},
      {"calibration.host_microbatch", s.calibration.host_microbatch},
      {"calibration.nvlink_launch", s.calibration.comm.nvlink.launch_latency},
      {"calibration.nvlink_step", s.calibration.comm.nvlink.step_latency},
      {"calibration.network_launch", s.calibration.comm.network.launch_latency},
      {"calibration.network_step", s.calibration.comm.network.step_latency},
  };
  // (the first one: collectives.auto_latency defaults to 2 x cluster.nic_latency)
  const auto* longest = std::find_if(std::begin(latencies), std::end(latencies),
                                     [](const auto& l) { return l.second > Time::from_seconds(86'400); });
  if (longest != std::end(latencies)) {
    throw_at_key(
        s, longest->first,
        fmt::format("{}: {} cannot be simulated: {}", longest->first, to_string(longest->second), e.what()));
  }
  // A measured kernel time of more than a day (node_model.overrides),
  // as launched or as a part of a fused kernel (part_time_us).
  if (s.kernel_overrides) {
    for (const auto& k : s.kernel_overrides->entries()) {
      const bool part = k.part_time && *k.part_time > k.time;
      const Time t = part ? *k.part_time : k.time;
      if (t <= Time::from_seconds(86'400)) continue;
      throw ScenarioError(fmt::format("{}: node_model.overrides: {} line {}: {}{} cannot be simulated: {}",
                                      s.file, s.kernel_overrides->path(), k.line, part ? "part_time_us " : "",
                                      to_string(t), e.what()));
    }
  }
  // (the model's size too: a hidden of 10^7 overflows at a usual batch)
  // An inline GPU's spec warned about as no GPU's (a unit slip) slows every
  // kernel as much: named too (helper 114: sms 10^6, memory_bandwidth 1B/s).
  const std::string gpu_keys = fmt::format("{}", fmt::join(s.suspect_gpu_keys, ", "));
  throw ScenarioError(fmt::format(
      "{}: training.micro_batch, training.seq_len, training.global_batch, model.hidden, model.layers{}: one "
      "iteration ({} x {} tokens per micro-batch, {}, through {} layers of hidden {}) cannot be simulated: "
      "{}",
      s.file, gpu_keys.empty() ? std::string() : fmt::format(" (or {}, warned about as no GPU's)", gpu_keys),
      s.workload.micro_batch, s.workload.seq_len,
      s.plan.global_batch > 0 ? fmt::format("{} sequences", s.plan.global_batch)
                              : std::string("one micro-batch per replica"),
      s.model.layers, s.model.hidden, e.what()));
}

Simulation simulate_scenario(const Scenario& s, engine::ExecutionObserver* observer,
                             const node_model::KernelPredictor* predictor, bool split,
                             const BackendRegistry& backends) {
  if (!s.jobs.empty()) {
    throw ScenarioError(fmt::format("{}: jobs: a scenario with several jobs runs with `tessera run` only (its "
                                    "model, training and plan are per job)",
                                    s.file));
  }
  const NetworkBackend& backend = backends.at(s.backend.name);
  backend.check(s);
  check_work(s);
  try {
    return simulate_unchecked(s, observer, predictor, split, backend);
  } catch (const collectives::AlgorithmError& e) {
    // collectives.algorithm for every kind reached a kind without it; the
    // per-kind choice (those not named keep auto) is the way out.
    std::vector<std::string> having;
    for (std::size_t k = 0; k < collectives::kNumCollectiveKinds; ++k) {
      const auto kind = static_cast<parallelism::CollectiveKind>(k);
      const auto ok = collectives::algorithms_for(kind);
      if (std::find(ok.begin(), ok.end(), e.algorithm()) != ok.end())
        having.emplace_back(parallelism::to_string(kind));
    }
    const std::string algorithm(collectives::to_string(e.algorithm()));
    // At the key (helper 175: the file alone, and no word of a --set).
    throw_at_key(
        s, "collectives.algorithm",
        fmt::format(
            "collectives.algorithm: {}, which this plan runs; give '{}' per kind to the kinds that have "
            "it ({}), e.g. collectives.algorithm: {{{}: {}}}, and the others keep auto",
            e.what(), algorithm, fmt::join(having, ", "), having.empty() ? "all-reduce" : having.front(),
            algorithm));
  } catch (const TransferOverflowError& e) {
    // A transfer too slow to finish: name the bandwidth key it ran at.
    const Bandwidth spine = s.fabric == FabricKind::LeafSpine ? s.cluster.spine_bandwidth
                            : s.fabric == FabricKind::FatTree ? s.fat_tree.leaf_spine.bandwidth
                                                              : s.rail.leaf_spine.bandwidth;
    const std::pair<const char*, Bandwidth> rates[] = {
        {"cluster.nvlink_bandwidth", s.cluster.gpus_per_node > 1 ? s.cluster.nvlink_bandwidth : Bandwidth{}},
        {"cluster.nic_bandwidth", s.cluster.nic_bandwidth},
        {"cluster.pcie_bandwidth",
         s.cluster.hcas_per_node > 0 && s.cluster.hcas_per_node < s.cluster.gpus_per_node
             ? s.cluster.pcie_bandwidth
             : Bandwidth{}},
        {"cluster.fabric.spine_bandwidth", s.cluster.nodes > 1 ? spine : Bandwidth{}},
        {"cluster.fabric.core_bandwidth", s.fabric == FabricKind::FatTree && s.fat_tree.tiers == 3
                                              ? s.fat_tree.spine_core.bandwidth
                                              : Bandwidth{}},
    };
    // The key whose rate the stuck transfer's slowest link runs at; a
    // degraded cable runs at its rate x failures.degraded_rate (helper 91:
    // the slowest key was blamed for a cable degraded a millionfold).
    const auto* key = std::find_if(std::begin(rates), std::end(rates), [&](const auto& r) {
      return r.second.bps() > 0 && std::abs(static_cast<double>(r.second.bps()) - e.bottleneck_bps()) <= 1.0;
    });
    if (key != std::end(rates)) {
      throw_at_key(s, key->first,
                   fmt::format("{}: {} cannot carry this iteration: {}", key->first, to_string(key->second),
                               e.what()));
    }
    const bool degraded = !s.failures.degraded.empty() ||
                          std::any_of(s.failures.timed.begin(), s.failures.timed.end(),
                                      [](const Scenario::Failures::Timed& t) { return !t.fail; });
    if (degraded) {
      throw_at_key(s, "failures.degraded_rate",
                   fmt::format("failures.degraded_rate: {:g} leaves a degraded cable too slow for this "
                               "iteration: {}",
                               s.failures.degraded_rate, e.what()));
    }
    throw ScenarioError(fmt::format("{}: {}", s.file, e.what()));
  } catch (const OverflowError& e) {
    throw_overflow(s, e);
  }
}

FreeCommunication free_communication(const engine::ExecutionResult& free_network) {
  FreeCommunication f;
  f.makespan = free_network.makespan;
  for (const auto& r : free_network.ranks) {
    if (r.compute_busy > f.compute || (r.compute_busy == f.compute && r.host_wait > f.host)) {
      f.compute = r.compute_busy;
      f.host = r.host_wait;
    }
  }
  return f;
}

IterationBreakdown breakdown(Time iteration, const FreeCommunication& free) {
  IterationBreakdown b;
  b.iteration = iteration;
  b.compute = free.compute;
  b.host = std::min(free.host, std::max(Time::zero(), free.makespan - b.compute));
  b.bubble = std::max(Time::zero(), free.makespan - b.compute - b.host);
  b.exposed_comm = std::max(Time::zero(), b.iteration - free.makespan);
  return b;
}

IterationBreakdown breakdown(const Simulation& sim) { return breakdown(sim.result.makespan, sim.free_comm); }

std::optional<TrainingRun> training_run(double tokens, double tokens_per_second, int gpus,
                                        std::optional<double> price_per_gpu_hour) {
  if (tokens <= 0 || !(tokens_per_second > 0) || gpus <= 0) return std::nullopt;
  TrainingRun r;
  r.tokens = tokens;
  r.seconds = tokens / tokens_per_second;
  r.gpu_hours = static_cast<double>(gpus) * r.seconds / 3600.0;
  if (price_per_gpu_hour) r.cost = r.gpu_hours * *price_per_gpu_hour;
  return r;
}

double tokens_per_second(const Scenario& s, Time iteration) {
  const double tokens =
      static_cast<double>(s.plan.sequences(s.workload.micro_batch)) * static_cast<double>(s.workload.seq_len);
  return iteration > Time::zero() ? tokens / iteration.seconds() : 0.0;
}

std::optional<TrainingRun> training_run(const Scenario& s, double tokens_per_second) {
  return training_run(s.train_tokens, tokens_per_second, s.gpus(), s.price_per_gpu_hour);
}

double IterationBreakdown::share(Time part) const {
  return iteration > Time::zero() ? static_cast<double>(part.ps()) / static_cast<double>(iteration.ps()) : 0.0;
}

std::array<int, 4> IterationBreakdown::tenths_of_percent() const {
  std::array<int, 4> out{};
  if (iteration <= Time::zero()) return out;
  const Time parts[] = {compute, host, bubble, exposed_comm};
  std::array<double, 4> remainder{};
  int total = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    const double exact = 1000.0 * share(parts[i]);
    out[i] = static_cast<int>(std::floor(exact));
    remainder[i] = exact - out[i];
    total += out[i];
  }
  // The tenths the floors left, to the largest remainders (the earlier part
  // first on a tie: deterministic); none where the parts do not fill the
  // iteration.
  const int target = static_cast<int>(std::llround(1000.0 * share(compute + host + bubble + exposed_comm)));
  std::array<std::size_t, 4> order{0, 1, 2, 3};
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return remainder[a] > remainder[b]; });
  for (std::size_t k = 0; k < 4 && total < target; ++k, ++total) ++out[order[k]];
  return out;
}

std::string_view to_string(CommClass c) {
  switch (c) {
    case CommClass::TensorParallel:
      return "tensor-parallel";
    case CommClass::ExpertAllToAll:
      return "expert all-to-all";
    case CommClass::ExpertDataParallel:
      return "expert data-parallel";
    case CommClass::DataParallel:
      return "data-parallel";
    case CommClass::TiedEmbedding:
      return "tied embedding";
    case CommClass::Pipeline:
      return "pipeline";
    case CommClass::Other:
      return "other";
  }
  return "other";
}

CommClass comm_class(std::string_view task_name) {
  const std::string role = parallelism::task_role(task_name);
  const auto has = [&](std::string_view part) { return role.find(part) != std::string::npos; };
  const auto starts = [&](std::string_view prefix) { return role.rfind(prefix, 0) == 0; };
  if (starts("pp.")) return CommClass::Pipeline;
  if (has(".ep.")) return CommClass::ExpertAllToAll;
  // The experts' gradients and parameters over the ranks holding each
  // expert (ZeRO's reduce-scatter and gather, ZeRO-3's per-layer gathers).
  if (has("expert_grad") || has("expert_param")) return CommClass::ExpertDataParallel;
  if (has(".tp.")) return CommClass::TensorParallel;
  // Sequence parallelism's all-reduce of the norms' (and biases')
  // gradients runs over the tensor-parallel group (helper 131: it was
  // counted as data-parallel); the tied word embedding's, over the first
  // and last pipeline stages (Megatron's embedding group), is neither.
  if (starts("norm.grad.")) return CommClass::TensorParallel;
  if (starts("embedding.grad.")) return CommClass::TiedEmbedding;
  // The rest over the data-parallel ranks: gradients, ZeRO's parameter
  // gathers (`layer.fwd.zero3.param.all-gather`).
  if (starts("dp.") || has(".zero3.") || starts("zero3.") || has(".grad.")) return CommClass::DataParallel;
  return CommClass::Other;
}

std::vector<CommClassCost> communication_costs(const Scenario& s, Time iteration,
                                               const BackendRegistry& backends) {
  require_single_job(s, "the communication split");
  const NetworkBackend& backend = backends.at(s.backend.name);
  backend.check(s);
  check_work(s);
  const auto planned = plan_scenario(s, *make_scenario_predictor(s));
  const topology::Topology topo = build_topology(s);
  // Each collective task's class, classified once (task names are views of
  // their programs' storage: the address is the key), and the classes the
  // plan runs, in CommClass order.
  auto class_of = std::make_shared<std::unordered_map<const char*, CommClass>>();
  std::vector<bool> present(static_cast<std::size_t>(CommClass::Other) + 1, false);
  for (const auto& program : planned.graph.programs) {
    for (const parallelism::Task& t : program->tasks) {
      if (t.kind != parallelism::TaskKind::Collective) continue;
      const CommClass c = comm_class(t.name);
      class_of->emplace(t.name.data(), c);
      present[static_cast<std::size_t>(c)] = true;
    }
  }
  std::vector<CommClassCost> out;
  for (std::size_t k = 0; k < present.size(); ++k) {
    if (!present[k]) continue;
    const auto c = static_cast<CommClass>(k);
    engine::ExecutionOptions options = execution_options(s);
    options.free_collective = [c, class_of](const parallelism::Task& t) {
      const auto it = class_of->find(t.name.data());
      return (it != class_of->end() ? it->second : comm_class(t.name)) == c;
    };
    const Time without = backend.run(planned.graph, topo, s, options, nullptr).result.makespan;
    out.push_back({c, without, std::max(Time::zero(), iteration - without)});
  }
  return out;
}

Time free_communication_iteration(const Scenario& s, const node_model::KernelPredictor& predictor) {
  const auto planned = plan_scenario(s, predictor);
  return engine::execute_on_free_network(planned.graph, execution_options(s)).makespan;
}

}  // namespace tessera::study
