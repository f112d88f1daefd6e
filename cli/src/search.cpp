// tessera search: the fastest parallel plan for a scenario's cluster, model
// and global batch that fits in memory.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "tessera/cli/args.hpp"
#include "tessera/cli/commands.hpp"
#include "tessera/cli/interrupt.hpp"
#include "tessera/cli/parallel.hpp"
#include "tessera/cli/progress.hpp"
#include "tessera/cli/report.hpp"
#include "tessera/cli/scenario.hpp"
#include "tessera/node_model/predictors.hpp"
#include "tessera/study/pipeline.hpp"

namespace tessera::cli {

namespace {

using parallelism::ParallelPlan;
using parallelism::Recompute;
using parallelism::Schedule;

struct Candidate {
  ParallelPlan plan;
  std::int64_t micro_batch = 1;
  Bytes peak_memory;
  std::optional<RunReport> report;
  std::string error;
  bool input_error = false;  ///< the error was the input's (InputError: a bandwidth too low to simulate)
  Time estimate;  ///< the iteration with free communication (the screen)
  /// Its memory estimate is tight (tight_memory, run's rule), as is_tight
  /// will say of its report: known before it is simulated.
  bool tight_estimate = false;
};

/// The scenario's own plan as `tessera run` forecasts it (search simulates
/// it beside the candidates), what the best plan is measured against; unset
/// where that plan is not valid on the cluster searched (SearchCounts).
struct OwnPlan {
  Candidate plan;               ///< its report, or its error
  std::string refused;          ///< why `tessera run` refuses the scenario with the search's --set flags
  std::string flags;            ///< the search's --set flags, as given: `tessera run` with them runs it
  Bytes free;                   ///< what its fullest stage leaves free of its GPU's memory
  bool within_headroom = true;  ///< it leaves --memory-headroom free (search keeps only such plans)
  /// The best plan's iteration over it, less 1 (negative: faster).
  [[nodiscard]] double best_change(const Candidate& best) const {
    return best.report->iteration_time.seconds() / plan.report->iteration_time.seconds() - 1.0;
  }
};

/// What the stage of `r` that leaves the least of its GPU's memory free
/// leaves, and that GPU's memory (under mixed_gpus a stage on the smaller
/// GPU may leave the least); `gpu_memory` for a report without stages.
std::pair<Bytes, Bytes> least_free_memory(const RunReport& r, Bytes gpu_memory) {
  Bytes free = gpu_memory, capacity = gpu_memory;
  for (const auto& m : r.memory) {
    const Bytes left = m.capacity - std::min(m.capacity, m.total);
    if (left < free) {
      free = left;
      capacity = m.capacity;
    }
  }
  return {free, capacity};
}

/// Whether tessera run warns that `c`'s simulated plan may not fit: its
/// fullest stage at kTightMemoryShare or more of its GPU's memory
/// (tight_memory_warning, the one rule of run's warning and the table's `*`).
bool is_tight(const Candidate& c) { return c.report && !tight_memory_warning(c.report->memory).empty(); }

std::vector<int> divisors(std::int64_t n, std::int64_t limit) {
  std::vector<int> out;
  for (std::int64_t d = 1; d <= std::min(n, limit); ++d) {
    if (n % d == 0) out.push_back(static_cast<int>(d));
  }
  return out;
}

/// The pipeline depths search tries for `s` on `gpus` GPUs.
struct SearchDepths {
  /// The depths dividing the GPUs (at most the layers) at which the layers
  /// split: evenly, or as the scenario splits them where it has its own
  /// split (126 layers at pp 16 counting the embedding and the loss), or,
  /// where it has none, as Megatron-Core splits them counting the embedding
  /// and the loss (`counted`).
  std::vector<int> pp;
  /// pp -> (account_for_embedding, account_for_loss): the counted split a
  /// depth the layers do not divide is tried with (a scenario without a
  /// split of its own).
  std::map<int, std::pair<bool, bool>> counted;
  /// The depths the scenario's own split leaves out that would be tried
  /// without it.
  std::vector<int> excluded;
};

SearchDepths search_depths(const Scenario& s, int gpus) {
  SearchDepths out;
  const bool own_split = !layer_split_keys_set(s.plan).empty();
  for (int pp : divisors(gpus, s.model.layers)) {
    ParallelPlan at_pp = s.plan;
    at_pp.pp = pp;
    at_pp.virtual_stages = 1;  // (a split's rule at one chunk a rank: more chunks only add to it)
    bool splits = s.model.layers % pp == 0;
    if (own_split) {
      // The scenario's own split decides (helper 135: depths the layers
      // divide were listed, their plans all refused).
      const bool without_it = splits || parallelism::counted_layer_split(s.model.layers, at_pp, false);
      try {
        (void)parallelism::chunk_layers(s.model.layers, at_pp);
        splits = true;
      } catch (const InputError&) {
        splits = false;
      }
      if (!splits && without_it) out.excluded.push_back(pp);
    } else if (!splits) {
      // A model whose layers do not divide over pp (Llama 3 405B's 126 at
      // 16) is tried with them split as Megatron-Core splits them counting
      // the embedding and the loss, where that splits them.
      if (const auto counted = parallelism::counted_layer_split(s.model.layers, at_pp, false)) {
        out.counted.emplace(pp, std::pair{counted->account_for_embedding, counted->account_for_loss});
        splits = true;
      }
    }
    if (splits) out.pp.push_back(pp);
  }
  return out;
}

/// A plan's iteration with free communication (compute, host and the
/// plan's own pipeline bubble, study::free_communication_iteration): the
/// screen only orders candidates by it; the simulation decides.
Time screen_estimate(const Scenario& base, const Candidate& c, const node_model::KernelPredictor& predictor) {
  Scenario s = base;
  s.plan = c.plan;
  s.workload.micro_batch = c.micro_batch;
  return free_communication_iteration(s, predictor);
}

/// The fullest stage's memory (parallelism::fullest_stage), as run reports it.
Bytes peak(const parallelism::PlanSummary& s) {
  return s.memory_per_stage.empty()
             ? Bytes()
             : s.memory_per_stage[parallelism::fullest_stage(s.memory_per_stage)].total();
}

/// The settings the search enumerates (every combination, less the invalid
/// ones); the loops and the JSON's `searched` object both read them.
struct SearchSpace {
  std::vector<int> tp;
  std::vector<int> pp;
  /// Every micro-batch from 1 to 16 (each plan takes those dividing its
  /// per-replica batch): a batch of 96 on 16 replicas runs micro-batches of
  /// 6 (the powers of two alone missed such a plan, 20% faster than the
  /// best they found on default.yaml at that batch).
  std::vector<std::int64_t> micro_batch{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  /// `--schedules`; the zero-bubble ones and interleaved-1f1b need pp > 1.
  std::vector<Schedule> schedules{Schedule::OneFOneB, Schedule::Interleaved1F1B, Schedule::ZeroBubbleH1,
                                  Schedule::ZeroBubbleH2};
  /// Expert parallelism: the divisors of a mixture-of-experts model's experts
  /// (each plan takes those that divide its dp); {1} for a dense model.
  std::vector<int> ep{1};
  std::vector<Recompute> recompute{Recompute::None, Recompute::Selective, Recompute::Full};
  /// `--zero-stages`: the ZeRO stages tried (empty: the scenario's, kept).
  std::vector<int> zero_stages;
  /// `--grad-syncs`: the data-parallel gradient syncs tried (empty: the
  /// scenario's, kept).
  std::vector<parallelism::GradSync> grad_syncs;
  /// `--virtual-stages`: interleaved-1f1b's chunk counts tried (empty: the
  /// fewest from 2 up that split each stage's layers evenly, per pp).
  std::vector<int> chunks;
};

/// What the search did, as the text's second line counts it.
struct SearchCounts {
  std::size_t considered = 0;  ///< plans enumerated (a plan's recomputations one plan)
  std::size_t invalid = 0;     ///< of them, plans the plan's rules refuse (ParallelPlan::validate)
  std::size_t fit = 0;         ///< plans that fit in memory (cheapest recomputation each)
  /// Of them, tight plans (95% or more of memory) also kept with their
  /// next recomputation that is not tight, one more candidate each (by
  /// default; not under --memory-headroom).
  std::size_t recomputed = 0;
  std::size_t simulated = 0;
  /// More fit than --max-candidates: screened by the iteration with free
  /// communication.
  bool screened = false;
  /// The scenario's own plan was refused and searched from with pp 1,
  /// 1f1b and virtual_stages auto (the file's virtual_stages is not known).
  bool own_plan_refused = false;
  /// Why (the text's `Note` line); empty where the plan was not refused.
  std::string own_plan_note;
};

/// The scenario's parallelism keys search keeps as they are (not searched)
/// where they are not the default, as YAML lines (`sequence_parallel: true`).
std::vector<std::string> kept_plan_keys(const parallelism::ParallelPlan& p, const parallelism::Workload& work,
                                        const SearchSpace& space) {
  std::vector<std::string> out;
  if (p.sequence_parallel) out.emplace_back("sequence_parallel: true");
  if (p.zero_stage > 0 && space.zero_stages.empty())
    out.push_back(fmt::format("zero_stage: {}", p.zero_stage));
  // grad_sync only where it is not what the framework profile does anyway.
  parallelism::ParallelPlan automatic = p;
  automatic.grad_sync = parallelism::GradSync::Auto;
  if (space.grad_syncs.empty() && p.grad_sync != parallelism::GradSync::Auto &&
      p.grad_sync != automatic.resolved_grad_sync(work)) {
    out.push_back(fmt::format("grad_sync: {}", parallelism::to_string(p.grad_sync)));
  }
  if (p.overlap_param_gather) out.emplace_back("overlap_param_gather: true");
  if (p.bucket_size) {
    // As given: in decimal units when they divide it ("100MB"), else to_string's.
    const std::int64_t n = p.bucket_size->count();
    std::string size = to_string(*p.bucket_size);
    for (const auto& [unit, f] : {std::pair{"GB", 1'000'000'000LL}, std::pair{"MB", 1'000'000LL}}) {
      if (n % f == 0) {
        size = fmt::format("{}{}", n / f, unit);
        break;
      }
    }
    out.push_back(fmt::format("bucket_size: {}", size));
  }
  if (!p.tp_comm_overlap) out.emplace_back("tp_comm_overlap: false");
  // A split of the layers of its own on the first or last stage: kept, so
  // only the depths it is valid at are plans (the others are refused).
  if (p.first_stage_layers) out.push_back(fmt::format("first_stage_layers: {}", *p.first_stage_layers));
  if (p.last_stage_layers) out.push_back(fmt::format("last_stage_layers: {}", *p.last_stage_layers));
  if (p.account_for_embedding) out.emplace_back("account_for_embedding: true");
  if (p.account_for_loss) out.emplace_back("account_for_loss: true");
  return out;
}

/// True when `chunks` model chunks per pipeline rank split every stage's
/// layers under `plan` (its pp, and first_stage_layers / last_stage_layers
/// where given) evenly, as Megatron-LM requires of interleaving (with
/// account_for_embedding / account_for_loss: the stages' counts with them).
bool chunks_split_stages(std::int64_t layers, const parallelism::ParallelPlan& plan, int chunks) {
  parallelism::ParallelPlan chunked = plan;
  chunked.virtual_stages = chunks;
  try {
    if (plan.account_for_embedding || plan.account_for_loss) {
      (void)parallelism::chunk_layers(layers, chunked);
      return true;
    }
    const std::vector<std::int64_t> stages = parallelism::stage_layer_split(layers, chunked);
    return std::all_of(stages.begin(), stages.end(), [chunks](std::int64_t n) { return n % chunks == 0; });
  } catch (const InputError&) {
    return false;
  }
}

/// The winner, ready to paste: as --set flags and as the scenario's
/// parallelism and training sections.
struct PastablePlan {
  std::string flags;
  std::string yaml;
};

/// `moe`: the model has experts, so ep is part of the plan (a dense model's
/// plans print as they did before ep was searched).
/// `own_plan_refused`: the scenario's plan was refused (SearchCounts), so
/// its virtual_stages is not base's: written whatever it is.
PastablePlan pastable(const Candidate& w, const Scenario& base, bool own_plan_refused,
                      const SearchSpace& space, const std::vector<std::string>& sets) {
  const bool moe = base.model.is_moe();
  const auto& pl = w.plan;
  PastablePlan out;
  const std::string ep_flag = moe ? fmt::format(" --set parallelism.ep={}", pl.ep) : "";
  const std::string ep_yaml = moe ? fmt::format("  ep: {}\n", pl.ep) : "";
  out.flags = fmt::format(
      "--set parallelism.dp={} --set parallelism.tp={} --set parallelism.pp={}{} --set training.micro_batch={} "
      "--set parallelism.schedule={} --set parallelism.recompute={}",
      pl.dp, pl.tp, pl.pp, ep_flag, w.micro_batch, parallelism::to_string(pl.schedule),
      parallelism::to_string(pl.recompute));
  out.yaml = fmt::format("parallelism:\n  dp: {}\n  tp: {}\n  pp: {}\n{}  schedule: {}\n  recompute: {}\n",
                         pl.dp, pl.tp, pl.pp, ep_yaml, parallelism::to_string(pl.schedule),
                         parallelism::to_string(pl.recompute));
  // Also 1 where the scenario interleaves and the winner does not: its
  // virtual_stages would refuse the winner's schedule.
  if (pl.virtual_stages > 1 || base.plan.virtual_stages > 1 || own_plan_refused) {
    out.flags += fmt::format(" --set parallelism.virtual_stages={}", pl.virtual_stages);
    out.yaml += fmt::format("  virtual_stages: {}\n", pl.virtual_stages);
  }
  // A depth the layers do not divide, split counting the embedding and the
  // loss (the scenario's own keys are kept below).
  for (const auto& [on, own, key] :
       {std::tuple{pl.account_for_embedding, base.plan.account_for_embedding, "account_for_embedding"},
        std::tuple{pl.account_for_loss, base.plan.account_for_loss, "account_for_loss"}}) {
    if (on && !own) {
      out.flags += fmt::format(" --set parallelism.{}=true", key);
      out.yaml += fmt::format("  {}: true\n", key);
    }
  }
  // An MoE winner with tp > 1 that search gave sequence parallelism.
  if (pl.sequence_parallel && !base.plan.sequence_parallel) {
    out.flags += " --set parallelism.sequence_parallel=true";
    out.yaml += "  sequence_parallel: true\n";
  }
  if (!space.zero_stages.empty()) {
    out.flags += fmt::format(" --set parallelism.zero_stage={}", pl.zero_stage);
    out.yaml += fmt::format("  zero_stage: {}\n", pl.zero_stage);
  }
  if (!space.grad_syncs.empty()) {
    out.flags += fmt::format(" --set parallelism.grad_sync={}", parallelism::to_string(pl.grad_sync));
    out.yaml += fmt::format("  grad_sync: {}\n", parallelism::to_string(pl.grad_sync));
  }
  // The scenario's sequence parallelism does nothing in a winner without
  // tensor parallelism (run would warn so): off in both (helper 56).
  const bool no_sp = pl.tp == 1 && base.plan.sequence_parallel;
  if (no_sp) out.flags += " --set parallelism.sequence_parallel=false";
  // Likewise the scenario's ZeRO stage in a winner without data
  // parallelism (the search ran it at 0).
  const bool no_zero = space.zero_stages.empty() && pl.zero_stage != base.plan.zero_stage;
  if (no_zero) out.flags += fmt::format(" --set parallelism.zero_stage={}", pl.zero_stage);
  const bool no_param_gather = base.plan.overlap_param_gather && !pl.overlap_param_gather;
  if (no_param_gather) out.flags += " --set parallelism.overlap_param_gather=false";
  // The scenario's counted split does nothing in a winner without a
  // pipeline (run would warn so): off in both (helper 135).
  const bool no_counted = pl.pp == 1 && (base.plan.account_for_embedding || base.plan.account_for_loss);
  if (no_counted && base.plan.account_for_embedding)
    out.flags += " --set parallelism.account_for_embedding=false";
  if (no_counted && base.plan.account_for_loss) out.flags += " --set parallelism.account_for_loss=false";
  // Not searched, kept from the scenario: in the YAML too, so that the
  // section can replace the scenario's without losing them.
  for (const std::string& k : kept_plan_keys(base.plan, base.workload, space)) {
    if (!(no_sp && k == "sequence_parallel: true") && !(no_zero && k.starts_with("zero_stage:")) &&
        !(no_param_gather && k == "overlap_param_gather: true") &&
        !(no_counted && k.starts_with("account_for_")))
      out.yaml += fmt::format("  {}\n", k);
  }
  // The global batch searched, also where the scenario leaves it to
  // micro_batch x dp: the winner's dp and micro-batch would change it.
  // The batch in the key the scenario gives it by, the other in a comment:
  // a file takes one of them, and a global_batch pasted beside a file's
  // micro_batches is an error (helper 103). The flags override either.
  out.flags += fmt::format(" --set training.global_batch={}", pl.global_batch);
  const std::string gb = fmt::format("global_batch: {}", pl.global_batch);
  const std::string mbs =
      fmt::format("micro_batches: {}", pl.global_batch / (static_cast<std::int64_t>(pl.dp) * w.micro_batch));
  out.yaml += fmt::format(
      "training:\n  micro_batch: {}\n  {}   # or {} instead (a file gives one of the two)\n", w.micro_batch,
      base.batch_as_micro_batches ? mbs : gb, base.batch_as_micro_batches ? gb : mbs);
  // The search's own --set flags that the plan's do not set come first:
  // with them the flags reproduce the winner on the scenario file alone
  // (helper 73: a search with --set cluster.nodes=32 printed flags that
  // failed on the file, written for another size).
  std::set<std::string> planned;
  {
    std::istringstream words(out.flags);
    for (std::string word; words >> word;) {
      if (word != "--set") planned.insert(word.substr(0, word.find('=')));
    }
  }
  // training.micro_batches and global_batch both set the batch (one of
  // them only; helper 74): the plan's global batch replaces it.
  if (planned.count("training.global_batch") != 0U) planned.insert("training.micro_batches");
  std::string own;
  for (const std::string& set : sets) {
    if (planned.count(set.substr(0, set.find('='))) != 0U) continue;
    own += fmt::format("--set {} ", shell_word(set));
  }
  out.flags = own + out.flags;
  return out;
}

template <typename T, typename F>
std::string json_list(const std::vector<T>& items, F&& render) {
  std::string out;
  for (const auto& x : items) out += fmt::format("{}{}", out.empty() ? "" : ", ", render(x));
  return fmt::format("[{}]", out);
}

/// A candidate's plan as JSON members (no braces).
std::string plan_json(const Candidate& c) {
  return fmt::format(
             "\"dp\": {}, \"tp\": {}, \"pp\": {}, \"ep\": {}, \"micro_batch\": {}, \"schedule\": {}, "
             "\"virtual_stages\": {}, \"recompute\": {}, \"zero_stage\": {}, \"grad_sync\": {}",
             c.plan.dp, c.plan.tp, c.plan.pp, c.plan.ep, c.micro_batch,
             json_string(std::string(parallelism::to_string(c.plan.schedule))), c.plan.virtual_stages,
             json_string(std::string(parallelism::to_string(c.plan.recompute))), c.plan.zero_stage,
             json_string(std::string(parallelism::to_string(c.plan.grad_sync)))) +
         (c.plan.account_for_embedding ? ", \"account_for_embedding\": true" : "") +
         (c.plan.account_for_loss ? ", \"account_for_loss\": true" : "");
}

/// `search --json`: one object with the settings searched, the counts, the
/// top candidates ranked (each with its `run --json` report under "run"),
/// the winner (never null: a search without one is an error) and the
/// candidates that failed.
std::string search_json(const Scenario& base, std::int64_t global_batch, const SearchSpace& space,
                        std::size_t top, std::size_t max_candidates, const SearchCounts& counts,
                        const std::vector<const Candidate*>& ranked,
                        const std::vector<const Candidate*>& failed, const std::vector<std::string>& sets,
                        const std::optional<OwnPlan>& own, bool tight_last, const Candidate* passed_over) {
  auto strip_newline = [](std::string s) {
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  };
  const std::string searched = fmt::format(
      "{{\"tp\": {}, \"pp\": {}, \"ep\": {}, \"micro_batch\": {}, \"schedules\": {}, \"recompute\": {}, "
      "\"zero_stages\": {}, \"grad_syncs\": {}, \"virtual_stages\": {}, \"global_batch\": {}, "
      "\"seq_len\": {}, \"top\": {}, \"max_candidates\": {}}}",
      json_list(space.tp, [](int v) { return fmt::format("{}", v); }),
      json_list(space.pp, [](int v) { return fmt::format("{}", v); }),
      json_list(space.ep, [](int v) { return fmt::format("{}", v); }),
      json_list(space.micro_batch, [](std::int64_t v) { return fmt::format("{}", v); }),
      json_list(space.schedules,
                [](Schedule v) { return json_string(std::string(parallelism::to_string(v))); }),
      json_list(space.recompute,
                [](Recompute v) { return json_string(std::string(parallelism::to_string(v))); }),
      space.zero_stages.empty() ? fmt::format("[{}]", base.plan.zero_stage)
                                : json_list(space.zero_stages, [](int v) { return fmt::format("{}", v); }),
      json_list(space.grad_syncs.empty()
                    ? std::vector<parallelism::GradSync>{base.plan.resolved_grad_sync(base.workload)}
                    : space.grad_syncs,
                [](parallelism::GradSync v) { return json_string(std::string(parallelism::to_string(v))); }),
      space.chunks.empty() ? std::string("\"auto\"")
                           : json_list(space.chunks, [](int v) { return fmt::format("{}", v); }),
      global_batch, base.workload.seq_len, top, max_candidates);
  std::string candidates;
  for (std::size_t i = 0; i < std::min(top, ranked.size()); ++i) {
    const Candidate& c = *ranked[i];
    // Each with its --set flags, as the winner's: a row a script picks runs
    // as ranked (helper 141: a tp > 1 MoE row needs sequence_parallel,
    // which the plan's members do not say).
    candidates += fmt::format(
        "{}{{\"rank\": {}, {}, \"peak_memory_bytes\": {}, \"tight\": {}, \"flags\": {}, \"run\": {}}}",
        candidates.empty() ? "" : ", ", i + 1, plan_json(c), c.peak_memory.count(),
        is_tight(c) ? "true" : "false",
        json_string(pastable(c, base, counts.own_plan_refused, space, sets).flags),
        strip_newline(format_json(*c.report)));
  }
  std::string winner = "null";
  if (!ranked.empty()) {
    const Candidate& w = *ranked.front();
    const PastablePlan paste = pastable(w, base, counts.own_plan_refused, space, sets);
    winner = fmt::format(
        "{{{}, \"iteration_time_s\": {:.9e}, \"tokens_per_s\": {:.3f}, {}\"mfu\": {:.6f}, "
        "\"peak_memory_bytes\": {}, \"tight\": {}, \"flags\": {}, \"yaml\": {}}}",
        plan_json(w), w.report->iteration_time.seconds(), w.report->tokens_per_second,
        w.report->training_run
            ? fmt::format("\"training_run\": {}, ", training_run_json(*w.report->training_run))
            : std::string(),
        w.report->mfu, w.peak_memory.count(), is_tight(w) ? "true" : "false", json_string(paste.flags),
        json_string(paste.yaml));
  }
  // The fastest plan, where it is tight and ranked after the winner (the
  // text's note): null otherwise.
  std::string fastest = "null";
  if (passed_over) {
    const Candidate& f = *passed_over;
    // (its fullest stage for its GPU, as run's warning names it)
    const StageMemory fullest = f.report->fullest_stage();
    fastest = fmt::format(
        "{{{}, \"iteration_time_s\": {:.9e}, \"peak_memory_bytes\": {}, \"memory_capacity_bytes\": {}, "
        "\"time_saved\": {:.6f}, \"flags\": {}}}",
        plan_json(f), f.report->iteration_time.seconds(), fullest.total.count(), fullest.capacity.count(),
        1.0 - f.report->iteration_time.seconds() / ranked.front()->report->iteration_time.seconds(),
        json_string(pastable(f, base, counts.own_plan_refused, space, sets).flags));
  }
  // The scenario's own plan: null where it is not valid here; its run's
  // figures, or the error its simulation ended with.
  std::string own_json = "null";
  if (own) {
    const Candidate& c = own->plan;
    // best_change only for a plan run forecasts (null out of memory: run
    // refuses it; helper 142).
    if (!own->refused.empty()) {
      own_json =
          fmt::format("{{\"flags\": {}, \"error\": {}}}", json_string(own->flags), json_string(own->refused));
    } else if (!c.report) {
      own_json = fmt::format("{{{}, \"flags\": {}, \"error\": {}}}", plan_json(c), json_string(own->flags),
                             json_string(c.error));
    } else {
      own_json = fmt::format(
          "{{{}, \"flags\": {}, \"iteration_time_s\": {:.9e}, \"tokens_per_s\": {:.3f}, \"mfu\": {:.6f}, "
          "\"peak_memory_bytes\": {}, \"free_memory_bytes\": {}, \"fits\": {}, \"tight\": {}, "
          "\"within_headroom\": {}, \"best_change\": {}}}",
          plan_json(c), json_string(own->flags), c.report->iteration_time.seconds(),
          c.report->tokens_per_second, c.report->mfu, c.report->fullest_stage().total.count(),
          own->free.count(), c.report->oom() ? "false" : "true", is_tight(c) ? "true" : "false",
          own->within_headroom ? "true" : "false",
          c.report->oom() ? std::string("null") : fmt::format("{:.6f}", own->best_change(*ranked.front())));
    }
  }
  const std::vector<std::string> warnings = scenario_warnings(base);
  const std::string failures = json_list(failed, [](const Candidate* c) {
    return fmt::format("{{{}, \"error\": {}}}", plan_json(*c), json_string(c->error));
  });
  return fmt::format(
      "{{\"scenario\": {}, \"model\": {}, \"gpu\": {}, \"gpus\": {}, \"backend\": {}, \"predictor\": {}, "
      "{}{}\"searched\": {}, \"plans_considered\": {}, \"plans_invalid\": {}, \"plans_fit\": {}, "
      "\"plans_fit_recomputed_less_full\": {}, \"simulated\": {}, \"screened\": {}, \"tight_ranked_last\": "
      "{}, \"candidates\": [{}], \"winner\": {}, "
      "\"fastest_tight_plan\": {}, \"scenario_plan\": {}, \"scenario_plan_note\": {}, \"failed\": {}}}\n",
      json_string(base.name), json_string(base.model.name), json_string(base.gpu.name), base.gpus(),
      json_string(std::string(to_string(base.backend))), json_string(base.predictor),
      // What the text prints above the table: the scenario's warnings, its
      // GPU's and workload's caveats (each candidate's run has its plan's).
      warnings.empty() ? std::string() : fmt::format("\"warnings\": {}, ", json_string_array(warnings)),
      caveat_json(base, false, true), searched, counts.considered, counts.invalid, counts.fit,
      counts.recomputed, counts.simulated, counts.screened ? "true" : "false", tight_last ? "true" : "false",
      candidates, winner, fastest, own_json,
      counts.own_plan_note.empty() ? std::string("null") : json_string(counts.own_plan_note), failures);
}

/// Of a screened search's simulations, those that go to other plans of the
/// kRefinedShapes fastest shapes of the first round: a quarter, from 8, and
/// never so many that the first round covers fewer shapes than with one
/// candidate less (helper 84: 8 covered 6 shapes where 7 covered 7).
constexpr std::size_t refine_share(std::size_t simulated) {
  return simulated >= 8 ? std::min(simulated / 4, simulated - 7) : 0;
}
/// How many of the first round's fastest shapes get more of their plans
/// simulated.
constexpr std::size_t kRefinedShapes = 4;

/// A plan's shape: what its communication mostly is (dp, tp, pp, ep, ZeRO
/// stage, gradient sync). The screen's first round and the refinement
/// group plans by it.
using Shape = std::tuple<int, int, int, int, int, int>;
Shape shape_of(const Candidate& c) {
  return Shape{c.plan.dp, c.plan.tp,         c.plan.pp,
               c.plan.ep, c.plan.zero_stage, static_cast<int>(c.plan.grad_sync)};
}

}  // namespace

int cmd_search(const Args& args, std::ostream& out) {
  ArgParser p("tessera search");
  p.option("top").option("max-candidates").option("jobs").option("schedules").option("memory-headroom");
  p.option("zero-stages").option("grad-syncs").option("virtual-stages").flag("json");
  declare_scenario_options(p);
  std::vector<std::string> sets;
  p.parse(take_set_options(args, sets));
  p.expect_positional(1, "a scenario file");
  // The --set flags as given: the scenario's own plan is run's with them
  // (a --set parallelism.virtual_stages=N, taken below as --virtual-stages
  // N, is its chunk count; helper 142).
  const std::vector<std::string> run_sets = sets;
  auto positive = [&](const char* name, std::size_t fallback) {
    const auto v = p.get(name);
    return v ? static_cast<std::size_t>(parse_positive_int(*v, fmt::format("--{}", name))) : fallback;
  };
  const std::size_t top = positive("top", 10);
  SearchSpace space;
  if (auto list = p.get("schedules")) {
    space.schedules = parse_schedule_list(*list);
  }
  if (auto list = p.get("zero-stages")) {
    const std::vector<std::string> items = split(*list, ',');
    for (const std::string& item : items.empty() ? std::vector<std::string>{""} : items) {
      if (item != "0" && item != "1" && item != "2" && item != "3") {
        throw UsageError(
            fmt::format("--zero-stages: expected stages 0-3 separated by commas (1,3), got '{}'", *list));
      }
      const int z = item[0] - '0';
      if (std::find(space.zero_stages.begin(), space.zero_stages.end(), z) != space.zero_stages.end()) {
        throw UsageError(fmt::format("--zero-stages: stage {} is listed twice in '{}'", z, *list));
      }
      space.zero_stages.push_back(z);
    }
  }
  if (auto list = p.get("grad-syncs")) {
    const std::vector<std::string> items = split(*list, ',');
    const std::string expected = fmt::format(
        "--grad-syncs: expected after-backward, overlapped or overlap-grad-reduce separated by commas, "
        "got '{}'",
        *list);
    for (const std::string& item : items.empty() ? std::vector<std::string>{""} : items) {
      if (item != "after-backward" && item != "overlapped" && item != "overlap-grad-reduce") {
        throw UsageError(expected);
      }
      const parallelism::GradSync g = parallelism::parse_grad_sync(item);
      if (std::find(space.grad_syncs.begin(), space.grad_syncs.end(), g) != space.grad_syncs.end()) {
        throw UsageError(fmt::format("--grad-syncs: {} is listed twice in '{}'", item, *list));
      }
      space.grad_syncs.push_back(g);
    }
  }
  // A --set parallelism.virtual_stages=N counts as --virtual-stages N, as in
  // compare-schedules, where interleaved-1f1b is searched (helper 123: search
  // refused it on a scenario without pipelining, or dropped it with a note,
  // never trying N chunks); else it is the scenario's, as any --set.
  const bool interleaving_searched = std::find(space.schedules.begin(), space.schedules.end(),
                                               Schedule::Interleaved1F1B) != space.schedules.end();
  std::vector<std::string> no_sets;
  const std::optional<ChunkList> chunk_list =
      take_chunk_list(p.get("virtual-stages"), interleaving_searched ? sets : no_sets);
  if (chunk_list) {
    const std::string& list = chunk_list->text;
    const std::string& chunk_flag = chunk_list->flag;
    const std::vector<std::string> items = split(list, ',');
    for (const std::string& item : items.empty() ? std::vector<std::string>{""} : items) {
      // 0 and 1 get one message (helper 103: two that disagreed).
      const bool digits = !item.empty() && item.find_first_not_of("0123456789") == std::string::npos;
      const int v = digits && item.size() < 3 && std::stoi(item) < 2
                        ? 0
                        : parse_positive_int(item, chunk_flag, 1 << 20);
      if (v < 2) {
        throw UsageError(
            fmt::format("{}: expected chunk counts of 2 or more separated by commas (2,4,5), got '{}'",
                        chunk_flag, list));
      }
      if (std::find(space.chunks.begin(), space.chunks.end(), v) != space.chunks.end()) {
        throw UsageError(fmt::format("{}: {} is listed twice in '{}'", chunk_flag, v, list));
      }
      space.chunks.push_back(v);
    }
    if (!interleaving_searched) {
      throw UsageError(fmt::format(
          "{}: --schedules leaves out interleaved-1f1b, the one schedule with model chunks", chunk_flag));
    }
  }
  // A list of values for a key (--set parallelism.tp=4,8; a comma outside a
  // YAML list or mapping, as sweep reads its --set): one scenario is
  // searched, and search tries the plans itself (helper 157: tp 4,8 ran
  // with a Note that the scenario's plan was not valid, every tp searched,
  // where a list of global batches was an error).
  for (const std::string& set : sets) {
    const Override o = parse_override(set);
    if (o.value.find(',') == std::string::npos || o.value.find_first_of("[]{}\"'") != std::string::npos)
      continue;
    throw UsageError(fmt::format(
        "--set {}: one value per key: search tries the parallel plans itself (dp, tp, pp, ep, micro-batch, "
        "schedule, recompute) for one scenario; `tessera sweep` runs a list of values{}",
        set,
        o.path == "parallelism.virtual_stages"
            ? " (search takes a list of chunk counts where --schedules includes interleaved-1f1b)"
            : ""));
  }
  // The screen ranks a plan's ZeRO stages and gradient syncs alike (compute
  // + bubble): the default cap holds 64 plans at each combination tried, so
  // that trying more never drops a plan the scenario's alone would simulate.
  const std::size_t max_candidates =
      positive("max-candidates", 64 * std::max<std::size_t>(1, space.zero_stages.size()) *
                                     std::max<std::size_t>(1, space.grad_syncs.size()));
  // Search chooses dp, pp (and tp, ep, the schedule) itself: a scenario whose
  // own plan does not fit the cluster (--set cluster.nodes over a scenario
  // written for another size) is loaded again with pp 1 and dp following the
  // GPUs, and only if that fails too is its error the search's.
  std::string plan_note;
  Scenario base = [&] {
    const std::vector<Override> overrides = scenario_overrides(sets, p);
    try {
      return load_scenario(p.positional()[0], overrides);
    } catch (const ScenarioError& e) {
      const std::string detail = without_scenario_file(e);
      // The plan's own keys, or a global batch its dp x micro-batch does
      // not divide (--set training.global_batch=1000 over a dp-32 plan).
      if (!detail.starts_with("parallelism.") && !detail.starts_with("training.global_batch:")) throw;
      // Stand-ins: pp 1 with dp following the GPUs, and every tp x pp (then
      // with micro-batch 1) for a dp that divides the global batch: pp the
      // powers of two, then the other depths up to 64 (24 nodes of 8 GPUs
      // and a global batch of 1024 need a pp with the factor 3).
      std::vector<int> depths;
      for (int pp = 1; pp <= 64; pp *= 2) depths.push_back(pp);
      for (int pp = 3; pp <= 64; ++pp) {
        if ((pp & (pp - 1)) != 0) depths.push_back(pp);
      }
      std::vector<std::vector<std::pair<std::string, std::string>>> plans = {{{"parallelism.pp", "1"}}};
      for (const char* mb : {"", "1"}) {
        for (int tp = 1; tp <= 8; tp *= 2) {
          for (int pp : depths) {
            plans.push_back({{"parallelism.tp", std::to_string(tp)}, {"parallelism.pp", std::to_string(pp)}});
            if (*mb != '\0') plans.back().emplace_back("training.micro_batch", mb);
          }
        }
      }
      // Of the stand-ins that load (the scenario's ep, then ep 1: an MoE
      // plan's ep must divide dp), the first with the fewest warnings:
      // theirs are about a plan search does not run (80 layers over 64
      // stages), the scenario's are every stand-in's.
      // (The file read once: up to 1026 stand-ins are parsed from it, 0.3 ms
      // each.)
      const std::string text = read_scenario_text(p.positional()[0]);
      // The global batch stays the scenario's where its plan sets it
      // (micro_batch x dp, or micro_batches x dp x micro_batch: no
      // global_batch key) and a --set of a plan key is what made the plan
      // invalid: the batch `tessera run` trains the scenario with, the
      // search's --set flags but those of parallelism keys applied (helper
      // 158: --set parallelism.tp=4 over default.yaml, micro_batch 8 x dp
      // 16, searched a batch of 32, micro_batch x the stand-in's dp 4). A
      // global batch given on the command line is the search's as given; a
      // --set training.micro_batches counts micro-batches of the scenario's
      // own dp, as run does (at the stand-in's dp it searched 4 x 4 x 8 =
      // 128 where run trains 4 x 16 x 8 = 512, unsaid).
      const bool batch_typed =
          std::ranges::any_of(overrides, [](const Override& o) { return o.path == "training.global_batch"; });
      std::optional<std::int64_t> own_batch;
      bool own_batch_as_micro_batches = false;
      if (!batch_typed) {
        std::vector<Override> without_plan_sets;
        std::ranges::copy_if(overrides, std::back_inserter(without_plan_sets),
                             [](const Override& o) { return !o.path.starts_with("parallelism."); });
        try {
          const Scenario own = parse_scenario(text, p.positional()[0], without_plan_sets);
          if (own.plan.global_batch == 0 || own.batch_as_micro_batches) {
            own_batch = own.plan.sequences(own.workload.micro_batch);
            own_batch_as_micro_batches = own.batch_as_micro_batches;
          }
        } catch (const ScenarioError&) {
          // (its plan does not fit the cluster either: the batch follows
          // the stand-in's dp, which the Note says)
        }
      }
      std::optional<Scenario> stand_in;
      // The keys of the scenario's own pipeline split that refused stand-ins
      // (account_for_loss at pp 7 over 80 layers), said where none loads.
      std::vector<std::string> split_refusals;
      // A stand-in's overrides: the command line's, dp following the GPUs,
      // 1f1b, then `plan`'s and `more`.
      const auto stand_in_overrides = [&](const std::vector<std::pair<std::string, std::string>>& plan,
                                          const std::vector<Override>& more) {
        std::vector<Override> relaxed = overrides;
        // (the batch as a global_batch: a typed micro_batches beside it
        // would be refused, both setting the batch)
        if (own_batch) {
          std::erase_if(relaxed, [](const Override& o) { return o.path == "training.micro_batches"; });
        }
        for (const auto& [key, value] :
             {std::pair{"parallelism.dp", "auto"}, std::pair{"parallelism.virtual_stages", "auto"},
              std::pair{"parallelism.schedule", "1f1b"}}) {
          relaxed.push_back(Override{key, value});
        }
        for (const auto& [key, value] : plan) relaxed.push_back(Override{key, value});
        if (own_batch) relaxed.push_back(Override{"training.global_batch", std::to_string(*own_batch)});
        relaxed.insert(relaxed.end(), more.begin(), more.end());
        return relaxed;
      };
      for (const char* ep : {"", "1"}) {
        for (const auto& plan : plans) {
          const std::vector<Override> relaxed =
              stand_in_overrides(plan, *ep != '\0' ? std::vector<Override>{Override{"parallelism.ep", ep}}
                                                   : std::vector<Override>{});
          try {
            Scenario s = parse_scenario(text, p.positional()[0], relaxed);
            // Warnings about the stand-in plan's keys (sequence parallelism
            // at its tp 1, its layers split unevenly over pp 3) are not the
            // scenario's.
            const std::string uneven =
                uneven_layer_split_warning(s.model.layers, s.plan, s.workload.framework);
            std::erase_if(s.warnings,
                          [&](const std::string& w) { return w.starts_with("parallelism.") || w == uneven; });
            if (!stand_in || s.warnings.size() < stand_in->warnings.size()) stand_in = std::move(s);
          } catch (const ScenarioError& refused) {
            const std::string why = without_scenario_file(refused);
            const std::string key = why.substr(0, why.find_first_of(" :("));
            // Every split key the refusal is about (both where the two are
            // refused together: "account_for_embedding and account_for_loss
            // count ...", "first_stage_layers + last_stage_layers ...";
            // helper 138: only the first was named).
            const bool split_refusal = std::ranges::any_of(
                kLayerSplitKeys, [&](std::string_view k) { return key == fmt::format("parallelism.{}", k); });
            for (std::string_view k : kLayerSplitKeys) {
              const std::string path = fmt::format("parallelism.{}", k);
              if (split_refusal && why.find(k) != std::string::npos &&
                  std::ranges::find(split_refusals, path) == split_refusals.end()) {
                split_refusals.push_back(path);
              }
            }
          }
        }
      }
      if (!stand_in && !split_refusals.empty()) {
        // Every stand-in is refused, some for the scenario's own split: that
        // is what leaves search nothing to start from, not the scenario's
        // plan's error (dp x tp x pp against the GPUs), whose dp and pp
        // search would choose itself. Dropping the split is suggested only
        // where a stand-in loads without it (the counted split's keys, which
        // --set can turn off; helper 138: suggested where nothing loads
        // without it either).
        std::sort(split_refusals.begin(), split_refusals.end());
        const bool counted_only = std::ranges::all_of(
            split_refusals, [](const std::string& k) { return k.starts_with("parallelism.account_for_"); });
        bool loads_without = false;
        if (counted_only) {
          for (const auto& plan : plans) {
            const std::vector<Override> relaxed =
                stand_in_overrides(plan, {Override{"parallelism.account_for_embedding", "false"},
                                          Override{"parallelism.account_for_loss", "false"}});
            try {
              const Scenario without = parse_scenario(text, p.positional()[0], relaxed);
              // ... and there search would find a depth (search_depths, as
              // the search below: the loader takes an uneven split with a
              // warning, search does not), with tp dividing a node's GPUs
              // and dp the global batch.
              const int g = without.gpus();
              const std::int64_t batch = without.plan.sequences(without.workload.micro_batch);
              for (int tp : divisors(without.cluster.gpus_per_node, without.cluster.gpus_per_node)) {
                for (int pp : search_depths(without, g).pp) {
                  if (g % (tp * pp) == 0 && batch % (g / (tp * pp)) == 0) loads_without = true;
                }
              }
              break;
            } catch (const ScenarioError&) {
            }
          }
        }
        const bool one = split_refusals.size() == 1;
        throw InputError(fmt::format(
            "{}: no parallel plan to search from: the scenario's plan does not fit here ({}), and none of "
            "the plans search tries in its place (pp 1 to 64, tp 1 to 8) both splits the layers as {} {} "
            "and is otherwise valid (a dp that divides the global batch); another cluster.nodes or "
            "training.global_batch{}",
            p.positional()[0], detail, fmt::join(split_refusals, " and "), one ? "says" : "say",
            loads_without  ? fmt::format(", or the scenario without {}", one ? "it" : "them")
            : counted_only ? ""
                           : ", or another split of the layers"));
      }
      if (!stand_in) throw;
      // Where the scenario's batch follows its dp and its own plan loads
      // nowhere here, the batch searched is the stand-in's micro_batch x dp
      // (x micro_batches): said, with how to choose another.
      std::string batch_note;
      if (own_batch) {
        batch_note = fmt::format(
            "; the global batch stays the scenario's, {} (its micro_batch x dp{}, as tessera run trains it "
            "without the --set of parallelism keys)",
            *own_batch, own_batch_as_micro_batches ? " x micro_batches" : "");
      } else if (!batch_typed && (stand_in->plan.global_batch == 0 || stand_in->batch_as_micro_batches)) {
        batch_note = fmt::format(
            "; the scenario gives its global batch as micro_batch x dp{}, and its own plan does not load "
            "here either: the batch searched, {}, follows dp {} of the GPUs (--set "
            "training.global_batch=N to search another)",
            stand_in->batch_as_micro_batches ? " x micro_batches" : "",
            stand_in->plan.sequences(stand_in->workload.micro_batch), stand_in->plan.dp);
      }
      plan_note = fmt::format(
          "the scenario's own plan is not valid here ({}); it is not one of "
          "the candidates, which search chooses itself{}",
          detail, batch_note);
      return std::move(*stand_in);
    }
  }();
  require_single_job(base, "search");
  // What tessera run says on stderr about the scenario's settings (an
  // NVLink bandwidth kept from the file under --set cluster.gpu=B200):
  // every candidate is ranked with them. Not those about the file's ep or
  // recomputation, which search chooses itself (helper 91: an imbalance
  // "with no effect at ep 1" while plans with ep 8 were ranked).
  // nor about how its own pipeline splits the layers, which search chooses
  // too (helper 135: every pp 16+ plan's report carried the scenario's "not
  // a multiple of the pipeline's stages, pp 8").
  const std::string own_uneven_split = uneven_layer_split_warning(
      base.model.layers, base.plan, base.workload.framework, base.virtual_stages_auto);
  std::erase_if(base.warnings, [&](const std::string& w) {
    return w.starts_with("parallelism.ep = ") || w.starts_with("parallelism.recompute: ") ||
           (!own_uneven_split.empty() && w == own_uneven_split) || w.starts_with("parallelism.account_for_");
  });
  print_scenario_warnings(base);
  // --memory-headroom: a plan fits when its fullest stage leaves this much of
  // the GPU's memory free (fragmentation, CUDA context, NCCL buffers).
  // Under mixed_gpus a stage's memory is the smallest of its ranks' GPUs
  // (study::stage_memory_capacity); the headroom must leave the smallest some.
  const Bytes smallest = study::smallest_gpu_memory(base);
  Bytes headroom;
  if (auto h = p.get("memory-headroom")) {
    try {
      headroom = parse_bytes(*h);
    } catch (const InputError& e) {
      throw UsageError(fmt::format("--memory-headroom: {}", e.what()));
    }
    if (headroom >= smallest) {
      throw UsageError(fmt::format("--memory-headroom {}: must be less than the {}GPU's memory ({})", *h,
                                   base.mixed_gpus ? "smallest " : "", to_string(smallest)));
    }
  }
  const Bytes usable = base.gpu.memory - headroom;
  // Ctrl-C says what was kept: nothing (search writes no files; its table
  // or JSON is printed when every candidate has been simulated).
  say_on_interrupt("nothing was written (search prints its plans when every candidate has been simulated)");
  const int gpus = base.gpus();
  // The global batch stays what the scenario trains with.
  const std::int64_t global_batch = base.plan.sequences(base.workload.micro_batch);

  // --zero-stages, or the scenario's stage alone.
  const std::vector<int> zero_stages =
      space.zero_stages.empty() ? std::vector<int>{base.plan.zero_stage} : space.zero_stages;
  // --grad-syncs, or the scenario's alone (`auto` as its framework resolves
  // it, which the plans' JSON names).
  const std::vector<parallelism::GradSync> grad_syncs =
      space.grad_syncs.empty()
          ? std::vector<parallelism::GradSync>{base.plan.resolved_grad_sync(base.workload)}
          : space.grad_syncs;
  // By default a plan tessera run warns may not fit (its fullest stage at
  // kTightMemoryShare of its GPU's memory or more) ranks after the others;
  // with --memory-headroom the headroom alone decides (see `ranked` below).
  const bool tight_last = !p.has("memory-headroom");
  // Enumerate plans; for each keep the cheapest recomputation that fits,
  // and, by default, where that one is tight, also the next that is not
  // (helper 158: selective at 96% was kept, and full at 80%, which may be
  // the fastest plan that leaves room, was never tried), its own candidate.
  std::vector<Candidate> fitting;
  std::size_t considered = 0, invalid = 0;
  // Tight plans kept again with a recomputation that is not tight.
  std::size_t recomputed = 0;
  std::string first_invalid;  // why the first refused plan is refused
  std::size_t splits = 0;     // (tp, pp, dp) that split the GPUs and the global batch
  // The plan out of memory by the least (its fullest stage's need against
  // what that stage may use), said where no plan fits (helper 157: "no
  // parallel plan fits" alone did not say how far off the cluster was).
  struct Closest {
    ParallelPlan plan;
    std::int64_t micro_batch = 1;
    Bytes need, capacity;
    double share = 0;
  };
  std::optional<Closest> closest;
  space.tp = divisors(base.cluster.gpus_per_node, base.cluster.gpus_per_node);
  // (pp must also divide the GPUs: the JSON's "searched" lists only those)
  // pp divides the layers, or, where the scenario splits them its own way
  // (first_stage_layers, account_for_embedding...), that split holds at it
  // (126 layers at pp 16 counting the embedding and the loss).
  const bool own_split = !layer_split_keys_set(base.plan).empty();
  const SearchDepths depths = search_depths(base, gpus);
  space.pp = depths.pp;
  const std::map<int, std::pair<bool, bool>>& counted_at_pp = depths.counted;
  // Depths the scenario's own split leaves out that would be searched
  // without it (said where no plan fits: helper 138, "no plan fits" where
  // account_for_loss allowed pp 1 alone).
  const std::vector<int>& split_excluded = depths.excluded;
  // The plan at `pp` with its counted split, where it has one.
  const auto with_counted_split = [&](ParallelPlan plan, int pp) {
    if (const auto it = counted_at_pp.find(pp); it != counted_at_pp.end()) {
      plan.account_for_embedding = it->second.first;
      plan.account_for_loss = it->second.second;
    }
    return plan;
  };
  if (base.model.is_moe()) space.ep = divisors(base.model.moe.experts, base.model.moe.experts);
  // Each schedule tried at a pp, with its chunk count: interleaving takes
  // --virtual-stages' counts, or compare-schedules' default (the fewest
  // from 2 up that split each stage's layers evenly), those that split the
  // stages' layers evenly (none without a pipeline); the others one chunk.
  auto schedule_chunks = [&](int pp) {
    std::vector<std::pair<Schedule, int>> out;
    for (Schedule sched : space.schedules) {
      if (sched != Schedule::Interleaved1F1B) {
        out.emplace_back(sched, 1);
        continue;
      }
      if (pp == 1) continue;
      ParallelPlan at_pp = with_counted_split(base.plan, pp);
      at_pp.pp = pp;
      const std::vector<int> counts =
          space.chunks.empty() ? std::vector<int>{parallelism::auto_virtual_stages(base.model.layers, at_pp)}
                               : space.chunks;
      for (int c : counts) {
        if (chunks_split_stages(base.model.layers, at_pp, c)) out.emplace_back(sched, c);
      }
    }
    return out;
  };
  for (int tp : space.tp) {
    for (int pp : space.pp) {
      if (gpus % (tp * pp) != 0) continue;
      const std::vector<std::pair<Schedule, int>> schedules_at_pp = schedule_chunks(pp);
      const int dp = gpus / (tp * pp);
      if (global_batch % dp != 0) continue;
      {
        // Tensor-parallel groups stay inside a node (tp divides the GPUs per
        // node; under a layout with tp not innermost that is not enough).
        ParallelPlan probe = base.plan;
        probe.dp = dp;
        probe.tp = tp;
        probe.pp = pp;
        if (parallelism::tp_group_spans_nodes(probe, base.cluster.gpus_per_node)) continue;
      }
      ++splits;
      for (int ep : space.ep) {
        // (expert-parallel groups are carved out of the data-parallel ranks)
        if (dp % ep != 0) continue;
        for (std::int64_t mb : space.micro_batch) {
          if ((global_batch / dp) % mb != 0) continue;
          // Without data parallelism there is nothing to shard and no
          // gradient to reduce: each schedule once, at the first (stage,
          // sync) listed that makes a valid plan (helper 79: only the first
          // pair was tried, and dp-1 plans were lost where it was invalid).
          std::set<std::pair<Schedule, int>> dp1_served;
          for (int zero : zero_stages) {
            for (parallelism::GradSync sync : grad_syncs) {
              for (const auto& [sched, chunks] : schedules_at_pp) {
                // Without a pipeline the zero-bubble schedules are 1f1b with the
                // backward split in two.
                if (parallelism::splits_backward(sched) && pp == 1) continue;
                if (dp == 1 && dp1_served.count({sched, chunks}) != 0U) continue;
                std::optional<Candidate> best, less_full;
                bool valid = false;
                // A plan with its recomputations is one plan considered,
                // however many of them the search tries before one fits
                // (helper 80: the count grew with --memory-headroom; helper
                // 82: counted per recomputation it read against the plans
                // that fit, counted per plan).
                ++considered;
                for (Recompute rc : space.recompute) {
                  ParallelPlan plan = with_counted_split(base.plan, pp);
                  plan.dp = dp;
                  plan.tp = tp;
                  plan.pp = pp;
                  plan.ep = ep;
                  plan.schedule = sched;
                  plan.virtual_stages = chunks;
                  plan.recompute = rc;
                  // ZeRO shards over dp: at dp 1 a stage has no effect (run
                  // warns so), and the winner is pasted at 0; so has
                  // Megatron-Core's overlap_param_gather, which needs stage
                  // 1: off too (helper 128).
                  plan.zero_stage = dp == 1 ? 0 : zero;
                  if (dp == 1) plan.overlap_param_gather = false;
                  plan.grad_sync = sync;
                  plan.global_batch = global_batch;
                  // An MoE model's tensor parallelism needs sequence parallelism
                  // (Megatron-Core's rule, parallelism::check_sharding).
                  if (base.model.is_moe() && tp > 1) plan.sequence_parallel = true;
                  parallelism::Workload work = base.workload;
                  work.micro_batch = mb;
                  try {
                    plan.validate(base.model, work, gpus);
                    // Runs in the model, but Megatron-LM refuses it: no sync
                    // to recommend (helper 79: search's winner was one). The
                    // scenario's own, kept, stays (its warning says so).
                    if (std::string why = parallelism::torch_ddp_refusal(plan, work);
                        !why.empty() && !space.grad_syncs.empty()) {
                      throw InputError("grad_sync " + why);
                    }
                    valid = true;
                    auto mem = parallelism::estimate_memory(base.model, work, plan, usable);
                    const auto capacity = study::stage_memory_capacity(base, plan);
                    for (std::size_t st = 0; st < mem.memory_per_stage.size() && st < capacity.size(); ++st) {
                      mem.memory_per_stage[st].capacity = capacity[st] - headroom;
                    }
                    if (mem.oom()) {
                      // (its fullest stage for its GPU, as run reports it)
                      const auto& m = mem.memory_per_stage[parallelism::fullest_stage(mem.memory_per_stage)];
                      const double share = m.total().in_gib() / m.capacity.in_gib();
                      if (!closest || share < closest->share)
                        closest = Closest{plan, mb, m.total(), m.capacity, share};
                      continue;
                    }
                    const bool tight = std::ranges::any_of(mem.memory_per_stage, [](const auto& m) {
                      return tight_memory(m.total(), m.capacity);
                    });
                    Candidate fit{plan, mb, peak(mem), std::nullopt, {}, false, {}, tight};
                    if (!best) {
                      best = std::move(fit);
                    } else if (!tight) {
                      less_full = std::move(fit);
                    }
                    if (!tight || !tight_last) break;
                  } catch (const InputError& e) {
                    // A costlier recomputation of a plan kept, refused: the
                    // plan stays as kept.
                    if (best) break;
                    // This (tp, pp, mb, schedule) is not a valid plan at all (a
                    // schedule the framework does not run): not out of memory.
                    ++invalid;
                    if (first_invalid.empty()) first_invalid = e.what();
                    break;
                  }
                }
                if (valid && dp == 1) dp1_served.emplace(sched, chunks);
                if (best) fitting.push_back(*best);
                if (less_full) {
                  fitting.push_back(*less_full);
                  ++recomputed;
                }
              }
            }
          }
        }
      }
    }
  }
  if (splits == 0) {
    // Nothing to size against memory: say which divisibility rules leave
    // no plan (not that none fits).
    throw InputError(fmt::format(
        "{}: no parallel plan splits the {} GPUs for this model and global batch {}: tp must divide the "
        "{} GPUs per node, pp the {} layers{}, and dp = GPUs / (tp x pp) the global batch (another "
        "cluster.nodes or training.global_batch)",
        base.file, gpus, global_batch, base.cluster.gpus_per_node, base.model.layers,
        own_split ? " as the scenario splits them"
                  : fmt::format(" (or {} or {}, counting the embedding and the loss as Megatron-Core can)",
                                base.model.layers + 1, base.model.layers + 2)));
  }
  if (considered == 0) {
    // No schedule searched runs at any depth searched (helper 134: "no
    // plan fits in memory" where none was sized).
    std::vector<std::string> schedules, depths;
    for (Schedule sched : space.schedules) schedules.emplace_back(parallelism::to_string(sched));
    for (int pp : space.pp) depths.push_back(std::to_string(pp));
    throw InputError(fmt::format(
        "{}: no plan to consider: none of the schedules searched ({}) runs at the pipeline depths that split "
        "the model (pp {}): interleaved-1f1b and the zero-bubble schedules need pp >= 2, interleaving chunks "
        "that split every stage's layers (add 1f1b to --schedules)",
        base.file, fmt::join(schedules, ", "), fmt::join(depths, ", ")));
  }
  if (fitting.empty() && considered > 0 && invalid == considered) {
    throw InputError(
        fmt::format("{}: no valid parallel plan of the {} GPUs for this model and global batch {}: "
                    "each one considered is refused, the first with: {}",
                    base.file, gpus, global_batch, first_invalid));
  }
  // Exit code 3, as `run` of a plan that does not fit (helper 94: it was
  // 2, a scenario typo's code, so a script could not tell them apart).
  if (fitting.empty()) {
    std::string split_note;
    if (!split_excluded.empty()) {
      std::vector<std::string> depths;
      for (int pp : space.pp) depths.push_back(std::to_string(pp));
      const std::vector<std::string_view> keys = layer_split_keys_set(base.plan);
      split_note = fmt::format(
          " at the pipeline depths the scenario's split of the layers (parallelism.{}) holds at, pp {}; "
          "pp {} would be searched without it",
          fmt::join(keys, ", "), fmt::join(depths, ", "), fmt::join(split_excluded, ", "));
    }
    // How far off the nearest plan is: its fullest stage's need against
    // what that stage may use (the GPU's memory, less the headroom).
    std::string closest_note;
    if (closest) {
      const ParallelPlan& pl = closest->plan;
      closest_note = fmt::format(
          "; the closest, dp {} tp {} pp {}{} micro-batch {} {}{} recompute {}{}{}, needs {:.1f} GiB per "
          "GPU on its fullest stage, {:.1f} GiB over the {:.1f} GiB it may use{}",
          pl.dp, pl.tp, pl.pp, base.model.is_moe() ? fmt::format(" ep {}", pl.ep) : "", closest->micro_batch,
          parallelism::to_string(pl.schedule),
          pl.virtual_stages > 1 ? fmt::format(" ({} chunks)", pl.virtual_stages) : "",
          parallelism::to_string(pl.recompute),
          space.zero_stages.empty() ? "" : fmt::format(" zero stage {}", pl.zero_stage),
          space.grad_syncs.empty() ? "" : fmt::format(" {}", parallelism::to_string(pl.grad_sync)),
          closest->need.in_gib(), closest->need.in_gib() - closest->capacity.in_gib(),
          closest->capacity.in_gib(), headroom > Bytes() ? " (its GPU's memory less the headroom)" : "");
    }
    throw OutOfMemoryError(fmt::format(
        "{}: no parallel plan of the {} GPUs fits {} of GPU memory{}{} for this model and "
        "global batch {}{}{}",
        base.file, gpus, to_string(smallest), base.mixed_gpus ? " (the smallest GPU)" : "",
        // (as given: 79.9GiB, not its 85791971738B; helper 123)
        headroom > Bytes() ? fmt::format(" less {} of headroom", p.get("memory-headroom").value_or("")) : "",
        global_batch, split_note, closest_note));
  }
  const std::size_t simulated = std::min(fitting.size(), max_candidates);
  // (--jobs was declared but ignored; ns-3 runs one Simulator per process)
  unsigned jobs = std::max(1U, std::thread::hardware_concurrency());
  if (auto j = p.get("jobs")) jobs = static_cast<unsigned>(parse_positive_int(*j, "--jobs", 4096));
  if (!built_in_backends().at(base.backend.name).concurrent_runs()) jobs = 1;
  // More plans fit than we simulate: screen them all by their iteration
  // with free communication (no topology, no backend) and simulate the most
  // promising; ties keep the enumeration order (deterministic).
  const bool screened = simulated < fitting.size();
  // Progress on stderr as in sweep: a bar on a terminal, a line every 10 s in a log.
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  if (screened) {
    CountProgress screening("search: screening", "plans", fitting.size(), 0, std::cerr, tty);
    // One predictor per thread; an error of the tool's own puts the plan
    // last, anything else (out of memory, a bug) is rethrown, the first
    // plan's (helper 88: it ended the process).
    for_each_index_per_thread(fitting.size(), jobs, [&] {
      std::shared_ptr<const node_model::KernelPredictor> predictor = make_scenario_predictor(base);
      return [&, predictor](std::size_t i) {
        try {
          fitting[i].estimate = screen_estimate(base, fitting[i], *predictor);
        } catch (const Error&) {
          fitting[i].estimate = Time::max();  // simulated last, if at all
        }
        screening.advance();
      };
    });
    screening.finish();
    std::stable_sort(fitting.begin(), fitting.end(),
                     [](const Candidate& a, const Candidate& b) { return a.estimate < b.estimate; });
    // The screen leaves communication out, and communication is mostly the
    // plan's shape (dp, tp, pp, ep, ZeRO stage): the best-screened plan of
    // each shape goes first, then the rest, each part by the screen (helper
    // 65: mixtral-ep's best plan, pp 4, saves communication the screen
    // cannot see and fell past the cut behind 64 pp-2 variants).
    // By default, where a shape's best-screened plan is tight (it ranks
    // after the others), its best-screened plan that is not goes first too.
    std::set<Shape> shapes, roomy_shapes;
    std::vector<Candidate> firsts, rest;
    for (Candidate& c : fitting) {
      const bool first = shapes.insert(shape_of(c)).second;
      const bool first_roomy = tight_last && !c.tight_estimate && roomy_shapes.insert(shape_of(c)).second;
      (first || first_roomy ? firsts : rest).push_back(std::move(c));
    }
    firsts.insert(firsts.end(), std::make_move_iterator(rest.begin()), std::make_move_iterator(rest.end()));
    fitting = std::move(firsts);
  }

  CountProgress progress("search", "plans simulated", simulated, 0, std::cerr, tty);
  auto simulate_range = [&](std::size_t from, std::size_t to) {
    for_each_index(to - from, jobs, [&](std::size_t k) {
      Candidate& c = fitting[from + k];
      Scenario s = base;
      s.plan = c.plan;
      s.workload.micro_batch = c.micro_batch;
      try {
        c.report = make_report(s, simulate_scenario(s));
      } catch (const Error& e) {
        c.error = e.what();
        c.input_error = dynamic_cast<const InputError*>(&e) != nullptr;
      }
      progress.advance();
    });
  };
  // Screened: a quarter of the simulations go to the fastest shapes' other
  // plans (schedules, micro-batches, recomputations the screen put behind
  // their shape's first), after the first round has ranked the shapes: the
  // screen sees no communication, which also tells a shape's plans apart
  // (helper 80: an interleaved plan of the 4th-fastest shape, 0.7% faster
  // than its simulated zero-bubble sibling, was left out).
  const std::size_t refined = screened ? refine_share(simulated) : 0;
  const std::size_t first_round = simulated - refined;
  simulate_range(0, first_round);
  if (refined > 0) {
    std::vector<const Candidate*> done;
    for (std::size_t i = 0; i < first_round; ++i) {
      if (fitting[i].report) done.push_back(&fitting[i]);
    }
    std::stable_sort(done.begin(), done.end(), [](const Candidate* a, const Candidate* b) {
      return a->report->iteration_time < b->report->iteration_time;
    });
    std::vector<Shape> fastest;
    for (const Candidate* c : done) {
      if (fastest.size() == kRefinedShapes) break;
      if (std::find(fastest.begin(), fastest.end(), shape_of(*c)) == fastest.end())
        fastest.push_back(shape_of(*c));
    }
    // Each fastest shape's best-screened other plans, in turn, a few each;
    // what is left of the share goes to the next plans in screen order.
    std::vector<std::size_t> picks;
    std::vector<bool> picked(fitting.size(), false);
    const std::size_t each = std::max<std::size_t>(1, (refined + kRefinedShapes - 1) / kRefinedShapes);
    for (const Shape& shape : fastest) {
      std::size_t taken = 0;
      for (std::size_t i = first_round; i < fitting.size() && taken < each && picks.size() < refined; ++i) {
        if (shape_of(fitting[i]) != shape) continue;
        picks.push_back(i);
        picked[i] = true;
        ++taken;
      }
    }
    for (std::size_t i = first_round; i < fitting.size() && picks.size() < refined; ++i) {
      if (!picked[i]) {
        picks.push_back(i);
        picked[i] = true;
      }
    }
    std::vector<Candidate> order;
    order.reserve(fitting.size());
    for (std::size_t i = 0; i < first_round; ++i) order.push_back(std::move(fitting[i]));
    for (std::size_t i : picks) order.push_back(std::move(fitting[i]));
    for (std::size_t i = first_round; i < fitting.size(); ++i) {
      if (!picked[i]) order.push_back(std::move(fitting[i]));
    }
    fitting = std::move(order);
    simulate_range(first_round, simulated);
  }
  progress.finish();

  std::vector<const Candidate*> ranked;
  for (std::size_t i = 0; i < simulated; ++i) {
    if (fitting[i].report) ranked.push_back(&fitting[i]);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const Candidate* a, const Candidate* b) {
    return a->report->iteration_time < b->report->iteration_time;
  });
  // A zb-h2 plan whose forecast and memory are its zb-h1 twin's to the
  // picosecond and byte (too few micro-batches for its longer warm-up to
  // matter) is the same result: one row, zb-h1's, not two taking top slots.
  std::erase_if(ranked, [&](const Candidate* c) {
    if (c->plan.schedule != Schedule::ZeroBubbleH2) return false;
    return std::any_of(ranked.begin(), ranked.end(), [&](const Candidate* o) {
      const ParallelPlan& a = c->plan;
      const ParallelPlan& b = o->plan;
      return b.schedule == Schedule::ZeroBubbleH1 && a.dp == b.dp && a.tp == b.tp && a.pp == b.pp &&
             a.ep == b.ep && a.recompute == b.recompute && a.zero_stage == b.zero_stage &&
             a.grad_sync == b.grad_sync && c->micro_batch == o->micro_batch &&
             c->report->iteration_time == o->report->iteration_time && c->peak_memory == o->peak_memory;
    });
  });
  std::vector<const Candidate*> failed;
  for (std::size_t i = 0; i < simulated; ++i) {
    if (!fitting[i].error.empty()) failed.push_back(&fitting[i]);
  }
  // No plan simulated: no result to print (helper 94: an empty table and
  // exit 0). The first failure says why; the same input fails the same way.
  if (ranked.empty()) {
    const Candidate& c = *failed.front();
    const std::string msg = fmt::format(
        "search: none of the {} plans simulated ran to the end; the first, dp={} tp={} pp={}{}, failed: {}",
        simulated, c.plan.dp, c.plan.tp, c.plan.pp,
        base.model.is_moe() ? fmt::format(" ep={}", c.plan.ep) : "", c.error);
    if (c.input_error) throw InputError(msg);
    throw SimulationError(msg);
  }
  // Without --memory-headroom, a plan tessera run warns may not fit (its
  // fullest stage at kTightMemoryShare or more of its GPU's memory,
  // tight_memory_warning: run's own rule) ranks after the plans that leave
  // more free, each part by time (helper 157: the winner pasted was a plan
  // at 79.1 of 80 GiB that run warned about, the next under 2% slower at
  // 62 GiB). With --memory-headroom the headroom decides what is kept, and
  // the plans kept rank by time alone (0B: every plan that fits).
  const Candidate* fastest = ranked.front();
  if (tight_last) {
    std::stable_partition(ranked.begin(), ranked.end(), [](const Candidate* c) { return !is_tight(*c); });
  }
  // The fastest plan, where a plan that is not so full wins over it.
  const Candidate* passed_over = fastest != ranked.front() ? fastest : nullptr;
  // The scenario's own plan, as `tessera run` forecasts it (helper 141: a
  // user looking for it among the plans found another recomputation of it,
  // search keeping the cheapest that fits, or nothing), where it is valid
  // here: one more simulation.
  std::optional<OwnPlan> own;
  if (plan_note.empty()) {
    own.emplace();
    for (const std::string& set : run_sets)
      own->flags += fmt::format("{}--set {}", own->flags.empty() ? "" : " ", set);
    // As `tessera run` loads it with the search's --set flags (base may have
    // left out a --set parallelism.virtual_stages, searched as a list).
    // (base itself where the search took no --set away: the same load)
    std::optional<Scenario> mine;
    if (run_sets == sets) {
      mine = base;
    } else {
      try {
        mine = load_scenario(p.positional()[0], scenario_overrides(run_sets, p));
      } catch (const ScenarioError& e) {
        own->refused = without_scenario_file(e);
      }
    }
    if (mine) {
      own->plan.plan = mine->plan;
      // (its gradient sync as its framework resolves `auto`, as the
      // candidates' and run's)
      own->plan.plan.grad_sync = mine->plan.resolved_grad_sync(mine->workload);
      own->plan.micro_batch = mine->workload.micro_batch;
      try {
        own->plan.report = make_report(*mine, simulate_scenario(*mine));
        own->plan.peak_memory = own->plan.report->fullest_stage().total;
        own->free = least_free_memory(*own->plan.report, mine->gpu.memory).first;
        own->within_headroom = !own->plan.report->oom() && own->free >= headroom;
      } catch (const Error& e) {
        own->plan.error = e.what();
      }
    }
  }
  if (p.has("json")) {
    out << search_json(base, global_batch, space, top, max_candidates,
                       SearchCounts{considered, invalid, fitting.size() - recomputed, recomputed, simulated,
                                    screened, !plan_note.empty(), plan_note},
                       ranked, failed, sets, own, tight_last, passed_over);
    return 0;
  }

  out << fmt::format(
      "Search {}: {} on {} x {}{}, global batch {} x {} tokens ({} node model, {} network backend)\n",
      base.name, base.model.name, gpus, base.gpu.name, mixed_gpus_phrase(base), global_batch,
      base.workload.seq_len, base.predictor, to_string(base.backend));
  std::vector<std::string> kept = kept_plan_keys(base.plan, base.workload, space);
  // The ZeRO stage is kept even at 0 (which the YAML leaves out): said, with
  // the option that searches it.
  if (space.zero_stages.empty() && base.plan.zero_stage == 0) kept.emplace_back("zero_stage: 0");
  // Plans with dp 1 run it at 0 (it would have no effect there): said
  // where one was simulated.
  const bool zero_dropped = std::any_of(ranked.begin(), ranked.end(), [&](const auto& c) {
    return c->plan.zero_stage != base.plan.zero_stage;
  });
  // Likewise the scenario's sequence parallelism, which does nothing in the
  // plans with tp 1 (they keep the flag; a tp-1 winner's flags say false):
  // helper 173 saw "Kept sequence_parallel: true" above such a winner.
  const bool sp_dropped =
      base.plan.sequence_parallel &&
      std::any_of(ranked.begin(), ranked.end(), [](const auto& c) { return c->plan.tp == 1; });
  for (std::string& k : kept) {
    if (k.starts_with("zero_stage:") && zero_dropped) k += " (0 where dp = 1)";
    if (k.starts_with("sequence_parallel:") && sp_dropped) k += " (false where tp = 1)";
  }
  if (!kept.empty()) {
    const bool sync_kept = std::any_of(kept.begin(), kept.end(),
                                       [](const std::string& k) { return k.starts_with("grad_sync:"); });
    out << fmt::format("Kept           {} (the scenario's, not searched{}{})\n", fmt::join(kept, ", "),
                       space.zero_stages.empty() ? "; --zero-stages 0,1,2,3 searches the ZeRO stage" : "",
                       sync_kept ? "; --grad-syncs searches the gradient sync" : "");
  }
  if (base.model.is_moe() && !base.plan.sequence_parallel &&
      std::any_of(space.tp.begin(), space.tp.end(), [](int t) { return t > 1; })) {
    out << "Set            sequence_parallel: true in plans with tp > 1 (an MoE model's tensor parallelism "
           "needs it, as in Megatron-Core)\n";
  }
  if (!plan_note.empty()) out << fmt::format("Note           {}\n", plan_note);
  if (base.train_tokens > 0) {
    out << fmt::format(
        "Training run   {} tokens: each plan's days{} at its throughput (steady state only: no warm-up, "
        "evaluation, checkpoints or failures)\n",
        count_text(base.train_tokens),
        base.price_per_gpu_hour ? fmt::format(" and cost at {:g} per GPU-hour", *base.price_per_gpu_hour)
                                : "");
  }
  out << caveat_lines(base, false) << stragglers_line(base);
  out << fmt::format(
      "{} plans considered{}, {} fit in memory{}, {} simulated{}\n\n", considered,
      invalid > 0 ? fmt::format(" ({} not valid plans)", invalid) : "", fitting.size() - recomputed,
      // (each a candidate of its own: the simulated count counts them)
      recomputed > 0 ? fmt::format(" ({} of them, {}% full or more, also with their next recomputation that "
                                   "is not: {} candidates)",
                                   recomputed, std::lround(100 * kTightMemoryShare), fitting.size())
                     : "",
      simulated,
      screened
          ? fmt::format(
                " (by their iteration with free communication, the best of each dp x tp x pp{}{}{} first{}; "
                "raise --max-candidates to simulate more)",
                base.model.is_moe() ? " x ep" : "", space.zero_stages.empty() ? "" : " x zero stage",
                space.grad_syncs.empty() ? "" : " x grad sync",
                refine_share(simulated) > 0
                    ? fmt::format(", then {} more, other plans of the {} first", refine_share(simulated),
                                  refine_share(simulated) == 1
                                      ? std::string("fastest shape")
                                      : fmt::format("{} fastest shapes",
                                                    std::min(refine_share(simulated), kRefinedShapes)))
                    : "")
          : "");
  // An ep column for a mixture-of-experts model only (a dense model's table
  // is what it was before ep was searched).
  const bool moe = base.model.is_moe();
  // With training.tokens, the run's days (and cost, with a price) per plan.
  const bool days = base.train_tokens > 0;
  const bool cost = days && base.price_per_gpu_hour.has_value();
  // A zero column where --zero-stages searched it, a sync column where
  // --grad-syncs did.
  const bool zero = !space.zero_stages.empty();
  const bool sync = !space.grad_syncs.empty();
  // A chunks column where a shown plan interleaves (as sweep's table has).
  const bool chunks =
      std::any_of(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(std::min(top, ranked.size())),
                  [](const Candidate* c) { return c->plan.virtual_stages > 1; });
  out << fmt::format(
      "{:>4} {:>4} {:>4} {:>4} {}{:>4} {:<18} {}{:<10} {}{}{:>13} {:>12} {:>6} {:>9}{}{}\n", "rank", "dp",
      "tp", "pp", moe ? fmt::format("{:>4} ", "ep") : "", "mb", "schedule",
      chunks ? fmt::format("{:>6} ", "chunks") : "", "recompute", zero ? fmt::format("{:>4} ", "zero") : "",
      sync ? fmt::format("{:<19} ", "grad sync") : "", "iteration ms", "tokens/s", "MFU", "peak GiB",
      days ? fmt::format(" {:>8}", "days") : "", cost ? fmt::format(" {:>12}", "cost") : "");
  bool any_tight = false;
  // A depth the layers do not divide, split counting the embedding and the
  // loss where the scenario did not (marked; the scenario's own is kept).
  const auto counted_split = [&](const Candidate& c) {
    return (c.plan.account_for_embedding && !base.plan.account_for_embedding) ||
           (c.plan.account_for_loss && !base.plan.account_for_loss);
  };
  bool any_counted = false;
  for (std::size_t i = 0; i < std::min(top, ranked.size()); ++i) {
    const Candidate& c = *ranked[i];
    any_counted = any_counted || counted_split(c);
    const auto& r = *c.report;
    std::string run_columns;
    if (r.training_run) {
      run_columns = fmt::format(" {:>8.1f}", r.training_run->days());
      if (cost && r.training_run->cost) run_columns += fmt::format(" {:>12.0f}", *r.training_run->cost);
    }
    // A plan tessera run would warn may not fit (95% or more of a GPU's
    // memory) is marked (helper 80: the 96- and 128-node winners were).
    const bool tight = is_tight(c);
    any_tight = any_tight || tight;
    out << fmt::format(
        "{:>4} {:>4} {:>4} {:>4} {}{:>4} {:<18} {}{:<10} {}{}{:>13.3f} {:>12.0f} {:>5.1f}% {}{}\n", i + 1,
        c.plan.dp, c.plan.tp, fmt::format("{}{}", c.plan.pp, counted_split(c) ? "+" : ""),
        moe ? fmt::format("{:>4} ", c.plan.ep) : "", c.micro_batch, parallelism::to_string(c.plan.schedule),
        chunks ? fmt::format("{:>6} ", c.plan.virtual_stages) : "", parallelism::to_string(c.plan.recompute),
        zero ? fmt::format("{:>4} ", c.plan.zero_stage) : "",
        sync ? fmt::format("{:<19} ", parallelism::to_string(c.plan.grad_sync)) : "", r.iteration_time.ms(),
        r.tokens_per_second, 100.0 * r.mfu,
        // (the mark's column padded only where a column follows)
        fmt::format("{:>8.1f}{}", c.peak_memory.in_gib(),
                    tight                 ? "*"
                    : run_columns.empty() ? ""
                                          : " "),
        run_columns);
  }
  if (any_counted) {
    out << "+ the layers do not divide over pp: split as Megatron-Core splits them counting the embedding, "
           "the loss or both as a layer (parallelism.account_for_embedding, account_for_loss; the JSON's "
           "plans and the pasted plan name which)\n";
  }
  if (own && !own->refused.empty()) {
    // (a --set the search takes as a list, virtual_stages, that run refuses)
    out << fmt::format(
        "\nthe scenario's own plan, with the search's --set flags, is refused by tessera run: {}\n",
        own->refused);
  } else if (own) {
    // The scenario's own plan against the best (its recomputation, schedule
    // and chunks as the file sets them; its ZeRO stage and gradient sync
    // where the table has their columns).
    const Candidate& c = own->plan;
    const ParallelPlan& pl = c.plan;
    const std::string which = fmt::format(
        "\nthe scenario's own plan (dp {}, tp {}, pp {}{}, micro-batch {}, {}{}, recompute {}{}{})", pl.dp,
        pl.tp, pl.pp, moe ? fmt::format(", ep {}", pl.ep) : "", c.micro_batch,
        parallelism::to_string(pl.schedule),
        pl.virtual_stages > 1 ? fmt::format(" with {} chunks", pl.virtual_stages) : "",
        parallelism::to_string(pl.recompute), zero ? fmt::format(", zero stage {}", pl.zero_stage) : "",
        sync ? fmt::format(", {}", parallelism::to_string(pl.grad_sync)) : "");
    if (!c.report) {
      out << fmt::format("{}: its simulation failed ({})\n", which, c.error);
    } else if (c.report->oom()) {
      out << fmt::format(
          "{} does not fit in GPU memory (its fullest stage needs {:.1f} of {:.1f} GiB): tessera "
          "run refuses it\n",
          which, c.report->fullest_stage().total.in_gib(), c.report->fullest_stage().capacity.in_gib());
    } else {
      const double change = own->best_change(*ranked.front());
      // A plan that leaves less than --memory-headroom is one search does
      // not keep: said, before any comparison (helper 142).
      // Likewise a plan run warns may not fit, which search ranks after
      // the others by default (without --memory-headroom).
      const bool own_tight = tight_last && is_tight(c);
      const std::string headroom_clause =
          !own->within_headroom
              ? fmt::format(
                    "; it leaves {:.1f} GiB free, less than --memory-headroom {}, so search does not keep it",
                    own->free.in_gib(), p.get("memory-headroom").value_or(""))
          : own_tight ? fmt::format(
                            "; it fills {}% or more of a GPU's memory, where tessera run warns a plan "
                            "may not fit, so search ranks such plans after the others",
                            std::lround(100 * kTightMemoryShare))
                      : std::string();
      const std::string verdict =
          change <= -0.0005 ? fmt::format("the best plan above takes {:.1f}% less time", -100.0 * change)
          : change >= 0.0005
              ? fmt::format("{:.1f}% faster than the best plan searched{}", 100.0 * change / (1.0 + change),
                            own->within_headroom && !own_tight
                                ? " (what search keeps or does not vary, above, holds it back)"
                                : "")
              : std::string("as fast as the best plan above");
      out << fmt::format("{}, as tessera run forecasts it: {:.3f} ms, {:.0f} tokens/s, MFU {:.1f}%; {}{}\n",
                         which, c.report->iteration_time.ms(), c.report->tokens_per_second,
                         100.0 * c.report->mfu, verdict, headroom_clause);
    }
  }
  if (any_tight) {
    out << fmt::format(
        "* {}% or more of a GPU's memory: tessera run warns such a plan may not fit (the memory model counts "
        "no fragmentation or NCCL buffers); {}\n",
        std::lround(100 * kTightMemoryShare),
        tight_last
            ? "ranked after the plans that leave more free (--memory-headroom SIZE instead keeps only plans "
              "that leave SIZE free, ranked by time alone)"
            : "ranked by time among the plans --memory-headroom keeps");
  }
  if (passed_over) {
    // The fastest plan, ranked after a slower one that run does not warn
    // about: named, with what it would gain and its flags.
    const Candidate& f = *passed_over;
    const auto rank =
        static_cast<std::size_t>(std::find(ranked.begin(), ranked.end(), passed_over) - ranked.begin()) + 1;
    const StageMemory fullest = f.report->fullest_stage();  // (as run's warning names it)
    out << fmt::format(
        "\nnote: the fastest plan simulated, dp {} tp {} pp {}{} micro-batch {} {}{} recompute {} "
        "(rank {}{}), takes {:.1f}% less time than the best plan, but its fullest stage needs {:.1f} of "
        "{:.1f} GiB ({:.0f}%): tessera run warns a plan that fills {}% or more of a GPU's memory may not "
        "fit, so search ranks such plans after the others (--memory-headroom 0B ranks every plan that fits "
        "by time alone); its flags: {}\n",
        f.plan.dp, f.plan.tp, f.plan.pp, moe ? fmt::format(" ep {}", f.plan.ep) : "", f.micro_batch,
        parallelism::to_string(f.plan.schedule),
        f.plan.virtual_stages > 1 ? fmt::format(" ({} chunks)", f.plan.virtual_stages) : "",
        parallelism::to_string(f.plan.recompute), rank, rank > top ? ", past --top" : "",
        100.0 * (1.0 - f.report->iteration_time.seconds() / ranked.front()->report->iteration_time.seconds()),
        fullest.total.in_gib(), fullest.capacity.in_gib(),
        100.0 * fullest.total.in_gib() / fullest.capacity.in_gib(), std::lround(100 * kTightMemoryShare),
        pastable(f, base, !plan_note.empty(), space, sets).flags);
  }
  // A known bias of some shown plans' forecasts (the plan's part of tessera
  // run's Known bias line, parallelism::known_bias_note): the widest tensor
  // parallelism's. The GPU's part holds for every plan: under the header.
  const Candidate* biased = nullptr;
  for (std::size_t i = 0; i < std::min(top, ranked.size()); ++i) {
    if (!parallelism::known_bias_note(ranked[i]->plan).empty() &&
        (!biased || ranked[i]->plan.tp > biased->plan.tp)) {
      biased = ranked[i];
    }
  }
  if (biased) {
    out << "\n" << ranking_bias_note(parallelism::known_bias_note(biased->plan), "plans");
  }
  if (!ranked.empty() && headroom == Bytes()) {
    // What the winner leaves free, where nothing was asked to be left: the
    // memory model does not count everything a GPU's memory holds.
    const auto [free, capacity] = least_free_memory(*ranked.front()->report, base.gpu.memory);
    out << fmt::format(
        "\nnote: the best plan leaves {:.1f} of {:.1f} GiB free, and {}: --memory-headroom SIZE keeps only "
        "plans that leave SIZE free\n",
        free.in_gib(), capacity.in_gib(), kWorkspaceCaveat);
  }
  if (!ranked.empty() && ranked.front()->plan.virtual_stages > 1 && space.chunks.empty()) {
    // The winner interleaves the default chunk count only: the other counts
    // that split its stages evenly may be faster (helper 70: 10 chunks beat
    // the 2 searched by 5% on Llama 3 70B).
    const ParallelPlan& w = ranked.front()->plan;
    std::vector<int> others;
    for (int c = 2; std::int64_t{c} * w.pp <= base.model.layers; ++c) {
      if (c != w.virtual_stages && chunks_split_stages(base.model.layers, w, c)) others.push_back(c);
    }
    if (!others.empty()) {
      out << fmt::format(
          "\nnote: the best plan interleaves {} chunks, the fewest that split its stages' layers evenly; "
          "--virtual-stages {} tries the others (more chunks: a smaller bubble, more pipeline sends)\n",
          w.virtual_stages, fmt::join(others, ","));
    }
  }
  if (!ranked.empty()) {
    // The winner, ready to paste: as --set flags and as the scenario's
    // parallelism section.
    const PastablePlan paste = pastable(*ranked.front(), base, !plan_note.empty(), space, sets);
    out << fmt::format("\nbest plan as flags: {}\nbest plan as YAML:\n{}", paste.flags, paste.yaml);
  }
  for (const Candidate* c : failed) {
    out << fmt::format("note: dp={} tp={} pp={}{} failed to simulate: {}\n", c->plan.dp, c->plan.tp, c->plan.pp,
                       moe ? fmt::format(" ep={}", c->plan.ep) : "", c->error);
  }
  return 0;
}

}  // namespace tessera::cli
