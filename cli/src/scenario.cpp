#include "tessera/cli/scenario.hpp"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <tuple>

#include "tessera/cli/args.hpp"
#include "tessera/cli/trace.hpp"
#include "tessera/files.hpp"
#include "tessera/index.hpp"
#include "tessera/names.hpp"
#include "tessera/node_model/predictors.hpp"
#include "tessera/node_model/roofline.hpp"
#include "tessera/node_model/validation.hpp"
#include "tessera/study/jobs.hpp"
#include "tessera/study/routing_check.hpp"
#include "tessera/topology/fabrics.hpp"
#include "tessera/units.hpp"

namespace tessera::cli {

namespace {

/// A price without tokens: said once by the scenario, not by its jobs (whose
/// cluster's price it is, and whose own training sections hold no tokens).
constexpr const char* kPriceWithoutTokens =
    "cluster.price_per_gpu_hour has no effect without training.tokens "
    "(the whole run's tokens, whose cost it prices)";

/// The key path of `key` under `parent` ("cluster" + "fabric" ->
/// "cluster.fabric"; at the top level the key itself).
std::string child_key_path(const std::string& parent, const std::string& key) {
  if (key.empty()) return parent;  // the section itself
  return parent.empty() ? key : fmt::format("{}.{}", parent, key);
}

/// The error of a required key missing from a section that holds keys
/// within a typo of it (`spnes` for `spines`). Whether such a key is a typo
/// or a key the loader reads further on (`nvlink_bandwidth` beside a missing
/// `nic_bandwidth`) is known only once the section is read to its end, so
/// parse_text reads the scenario again with the required key given the near
/// miss's value: if the near miss is then an unknown key, the typo is the
/// error, otherwise this one, the missing key, is.
class MissingKeyNearMisses : public ScenarioError {
 public:
  struct NearMiss {
    std::string required, typed;  ///< keys of the section
    std::string typed_path;       ///< the near miss's key path
    ScenarioError typo;           ///< the error naming it
  };
  MissingKeyNearMisses(const ScenarioError& missing, const YAML::Node& section, std::vector<NearMiss> near)
      : ScenarioError(missing), section_(section), near_(std::move(near)) {}
  [[nodiscard]] const YAML::Node& section() const { return section_; }
  [[nodiscard]] const std::vector<NearMiss>& near() const { return near_; }

 private:
  YAML::Node section_;
  std::vector<NearMiss> near_;
};

/// The names other tools (Megatron-LM's flags, Hugging Face configs) give
/// keys of a scenario: an unknown key that is one of them is suggested as
/// ours, before any spelling neighbour ("expert_parallel" is `ep`, not
/// `sequence_parallel`).
/// A Megatron flag as typed on its command line (`--tensor-model-parallel-size`)
/// in the spelling its arguments take (`tensor_model_parallel_size`).
std::string flag_spelling(const std::string& key) {
  std::string out = key.substr(std::min(key.find_first_not_of('-'), key.size()));
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

std::string key_alias(const std::string& typed) {
  const std::string key = flag_spelling(typed);
  static const std::map<std::string, std::string> kAliases{
      {"expert_parallel", "ep"},
      {"expert_model_parallel_size", "ep"},
      {"expert_parallel_size", "ep"},
      {"tensor_parallel", "tp"},
      {"tensor_model_parallel_size", "tp"},
      {"tensor_parallel_size", "tp"},
      {"pipeline_parallel", "pp"},
      {"pipeline_model_parallel_size", "pp"},
      {"pipeline_parallel_size", "pp"},
      {"data_parallel", "dp"},
      {"data_parallel_size", "dp"},
      {"virtual_pipeline_model_parallel_size", "virtual_stages"},
      {"decoder_first_pipeline_num_layers", "first_stage_layers"},
      {"num_layers_in_first_pipeline_stage", "first_stage_layers"},
      {"decoder_last_pipeline_num_layers", "last_stage_layers"},
      {"num_layers_in_last_pipeline_stage", "last_stage_layers"},
      {"account_for_embedding_in_pipeline_split", "account_for_embedding"},
      {"account_for_loss_in_pipeline_split", "account_for_loss"},
      {"num_layers", "layers"},
      {"num_hidden_layers", "layers"},
      {"hidden_size", "hidden"},
      {"num_attention_heads", "heads"},
      {"num_key_value_heads", "kv_heads"},
      {"num_query_groups", "kv_heads"},
      {"ffn_hidden_size", "ffn_hidden"},
      {"intermediate_size", "ffn_hidden"},
      {"vocab_size", "vocab"},
      // An inline GPU's 16-bit peak by its dtype (helper 132: `bf16_peak`
      // got no word beside "missing tensor_peak").
      {"bf16_peak", "tensor_peak"},
      {"fp16_peak", "tensor_peak"},
      {"bf16_tflops", "tensor_peak"},
      {"fp16_tflops", "tensor_peak"},
      {"fp32_tflops", "fp32_peak"},
      {"fp8_tflops", "fp8_peak"},
      {"tf32_tflops", "tf32_peak"},
      {"num_experts", "experts"},
      {"num_local_experts", "experts"},
      {"moe_router_topk", "top_k"},
      {"router_topk", "top_k"},
      {"moe_ffn_hidden_size", "expert_ffn_hidden"},
      {"moe_intermediate_size", "expert_ffn_hidden"},
      {"moe_layer_freq", "moe_every"},
      {"n_shared_experts", "shared_experts"},
      {"n_routed_experts", "experts"},
      {"routed_experts", "experts"},
      {"moe_expert_capacity_factor", "capacity_factor"},
      {"expert_capacity_factor", "capacity_factor"},
      {"capacity", "capacity_factor"},
      {"first_k_dense_replace", "first_dense_layers"},
      {"num_experts_per_tok", "top_k"},
      {"micro_batch_size", "micro_batch"},
      {"train_micro_batch_size_per_gpu", "micro_batch"},
      {"global_batch_size", "global_batch"},
      {"train_batch_size", "global_batch"},
      {"seq_length", "seq_len"},
      {"sequence_length", "seq_len"},
      {"max_position_embeddings", "seq_len"},
      {"radix", "k"},
      {"ports", "k"},
  };
  const auto it = kAliases.find(key);
  return it == kAliases.end() ? std::string() : it->second;
}

/// What every spelling of context parallelism is told.
constexpr const char* kNoContextParallelism =
    "context parallelism (Megatron's --context-parallel-size) is not modelled";

/// Megatron-LM flags (as YAML keys) that are one of our keys with a value,
/// or a setting we do not model: the key of ours they concern (the hint is
/// given only in the section that has it) and what to write instead, for
/// the flag's `value` as written (clip_grad: 0 is no clipping).
std::optional<std::pair<std::string, std::string>> flag_key_hint(const std::string& typed,
                                                                 const YAML::Node& value) {
  const std::string key = flag_spelling(typed);
  const std::string v = value.IsScalar() ? ascii_lower(value.Scalar()) : std::string();
  if (key == "clip_grad" && (v == "0" || v == "0.0")) {
    return std::pair<std::string, std::string>{"grad_clipping",
                                               "Megatron's --clip-grad 0 is 'grad_clipping: false'"};
  }
  if ((key == "bf16" || key == "fp16") && v == "false") {
    std::string hint = fmt::format("'{}: false' chooses no element type: give 'dtype'", key);
    return std::pair<std::string, std::string>{"dtype", std::move(hint)};
  }
  // The value given: the formula with it ("layers / (pp x 2)").
  if (key == "num_layers_per_virtual_pipeline_stage" && !v.empty() && v.size() < 10 &&
      std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
      v.find_first_not_of('0') != std::string::npos) {
    std::string hint = fmt::format(
        "Megatron's --num-layers-per-virtual-pipeline-stage {} counts layers per model chunk; ours "
        "counts chunks per rank: 'virtual_stages: layers / (pp x {})'",
        std::stoi(v), std::stoi(v));
    return std::pair<std::string, std::string>{"virtual_stages", std::move(hint)};
  }
  static constexpr const char* kPartialRecompute =
      "Megatron's --recompute-method / --recompute-num-layers (some layers only) are not modelled: "
      "'recompute' (none, selective, full) holds for every layer";
  static const std::map<std::string, std::pair<std::string, std::string>> kFlagKeys{
      {"overlap_grad_reduce",
       {"grad_sync", "Megatron's --overlap-grad-reduce is 'grad_sync: overlap-grad-reduce'"}},
      {"use_distributed_optimizer",
       {"zero_stage", "Megatron's --use-distributed-optimizer is 'zero_stage: 1'"}},
      {"expert_tensor_parallel_size",
       {"ep",
        "Megatron's --expert-tensor-parallel-size is not modelled: the experts are split over 'tp' as "
        "the layers are (Megatron's default)"}},
      {"disable_bias_linear", {"linear_bias", "Megatron's --disable-bias-linear is 'linear_bias: false'"}},
      // (helper 131: it met only "missing vocab")
      {"padded_vocab_size",
       {"vocab",
        "did you mean 'vocab'? (the tokenizer's size: Megatron's padded_vocab_size is it padded to a "
        "multiple of 128 x tp, as the model pads 'vocab')"}},
      {"add_bias_linear", {"linear_bias", "did you mean 'linear_bias'?"}},
      {"normalization", {"norm", "did you mean 'norm' (layernorm or rmsnorm)?"}},
      {"ddp_bucket_size",
       {"bucket_size",
        "did you mean 'bucket_size'? (bytes of gradients: Megatron's --ddp-bucket-size counts "
        "parameters, x 4 for FP32 main gradients)"}},
      {"bf16", {"dtype", "Megatron's --bf16 is 'dtype: bf16'"}},
      {"fp16", {"dtype", "Megatron's --fp16 is 'dtype: fp16'"}},
      // (helper 125: `fp8: hybrid` got "missing required key" alone)
      {"fp8",
       {"dtype", "Megatron's --fp8-format hybrid (Transformer Engine's FP8 training) is 'dtype: fp8'"}},
      {"fp8_format",
       {"dtype", "Megatron's --fp8-format hybrid (Transformer Engine's FP8 training) is 'dtype: fp8'"}},
      {"clip_grad",
       {"grad_clipping", "Megatron's --clip-grad is 'grad_clipping: true' (the norm's value costs nothing)"}},
      {"use_flash_attn", {"flash_attention", "Megatron's --use-flash-attn is 'flash_attention: true'"}},
      {"untie_embeddings_and_output_weights",
       {"tied_embeddings", "Megatron's --untie-embeddings-and-output-weights is 'tied_embeddings: false'"}},
      {"swiglu",
       {"gated_mlp",
        "Megatron's --swiglu is 'gated_mlp: true' (without a preset and ffn_hidden, its width is "
        "Megatron's: 4 x hidden x 2/3, rounded down to a multiple of 64)"}},
      {"position_embedding_type",
       {"learned_positions", "Megatron's --position-embedding-type rope is 'learned_positions: false'"}},
      // (helper 111: `rope` was "did you mean 'moe'?")
      {"rope", {"learned_positions", "rotary positions (RoPE) are 'learned_positions: false'"}},
      {"use_rotary_position_embeddings",
       {"learned_positions", "Megatron's --use-rotary-position-embeddings is 'learned_positions: false'"}},
      {"rotary", {"learned_positions", "rotary positions (RoPE) are 'learned_positions: false'"}},
      {"recompute_granularity",
       {"recompute", "Megatron's --recompute-granularity is 'recompute: full' or 'recompute: selective'"}},
      {"recompute_activations",
       {"recompute", "Megatron's --recompute-activations is 'recompute: selective'"}},
      {"recompute_method", {"recompute", kPartialRecompute}},
      {"recompute_num_layers", {"recompute", kPartialRecompute}},
      {"num_layers_per_virtual_pipeline_stage",
       {"virtual_stages",
        "Megatron's --num-layers-per-virtual-pipeline-stage N counts layers per model chunk; ours "
        "counts chunks per rank: 'virtual_stages: layers / (pp x N)'"}},
      // Names other tools and papers give (helper 173: no hint for them).
      {"zero", {"zero_stage", "did you mean 'zero_stage'? (0, 1, 2 or 3: ZeRO's stage)"}},
      {"zero_optimization", {"zero_stage", "DeepSpeed's zero_optimization.stage is 'zero_stage'"}},
      {"flash_attn", {"flash_attention", "did you mean 'flash_attention'? (true or false)"}},
      {"activation_checkpointing",
       {"recompute",
        "activation checkpointing is 'recompute: full' (or 'selective': attention's core only)"}},
      {"gradient_checkpointing",
       {"recompute", "gradient checkpointing is 'recompute: full' (or 'selective': attention's core only)"}},
      {"activation",
       {"gated_mlp",
        "the MLP's activation: 'gated_mlp: true' for SwiGLU (a gated MLP), false for GeLU; both are "
        "timed as their fused kernels"}},
      {"context_parallel_size", {"tp", kNoContextParallelism}},
      // (helper 83: `cp` was "did you mean 'dp', 'ep', 'pp' or 'tp'?")
      {"cp", {"tp", kNoContextParallelism}},
      {"context_parallel", {"tp", kNoContextParallelism}},
      {"context_parallelism", {"tp", kNoContextParallelism}},
  };
  const auto it = kFlagKeys.find(key);
  if (it == kFlagKeys.end()) return std::nullopt;
  return it->second;
}

/// What to write instead of `key` (another tool's name, `value` as written)
/// when the key of ours it stands for is one `ours` accepts: the flag's
/// hint (flag_key_hint), else "did you mean 'ALIAS'?" (key_alias).
template <class Ours>
std::optional<std::string> written_as_ours(const std::string& key, const YAML::Node& value, Ours&& ours) {
  if (const auto f = flag_key_hint(key, value); f && ours(f->first)) return f->second;
  if (const std::string alias = key_alias(key); !alias.empty() && ours(alias))
    return fmt::format("did you mean '{}'?", alias);
  return std::nullopt;
}

/// A scalar as a decimal whole number: digits with an optional sign, leading
/// zeros allowed ("010" is 10). yaml-cpp's own conversion reads YAML 1.1's
/// forms, 010 as octal 8 and 0x40 as 64, which a scenario's number never
/// means. nullopt when it is no such number; `overflow` set when it is all
/// digits beyond int64.
std::optional<std::int64_t> decimal(const std::string& t, bool* overflow = nullptr) {
  const std::size_t first = !t.empty() && (t[0] == '+' || t[0] == '-') ? 1 : 0;
  if (t.size() == first || t.find_first_not_of("0123456789", first) != std::string::npos) return std::nullopt;
  std::int64_t x = 0;
  const char* begin = t.data() + (t[0] == '+' ? 1 : 0);
  const auto [end, ec] = std::from_chars(begin, t.data() + t.size(), x);
  if (ec != std::errc() || end != t.data() + t.size()) {
    if (overflow != nullptr) *overflow = true;
    return std::nullopt;
  }
  return x;
}

/// The values a required key takes, where they are a few words (helper 83:
/// `missing required keys: tiers` did not say 2, 3 or auto), else empty.
std::string required_values(const std::string& path) {
  if (path == "cluster.fabric.tiers") return " (2, 3 or auto)";
  if (path == "cluster.fabric.type") return " (leaf-spine, fat-tree or rail-optimized)";
  if (path == "training.dtype") return " (fp32, tf32, fp16, bf16 or fp8)";
  return {};
}

/// A YAML mapping being read: tracks which keys were used so that leftovers
/// are reported as unknown, and prefixes every error with file:line:col and
/// the key path.
class Section {
 public:
  /// `overridden`: key paths set from the command line (reported as such).
  Section(const YAML::Node& node, std::string path, const std::string& file,
          const std::map<std::string, std::string>* overridden = nullptr)
      : node_(node), path_(std::move(path)), file_(file), overridden_(overridden) {
    if (!node_.IsMap()) fail(node_, path_.empty() ? "the scenario must be a YAML mapping" : "must be a mapping");
  }

  [[noreturn]] void fail(const YAML::Node& at, const std::string& msg) const {
    fail_at(at.Mark(), path_, msg);
  }
  /// `created`: the error is about the key at `path` itself, which a
  /// `--set` of a key under it may have created (an unknown key): such an
  /// option is named too.
  [[noreturn]] void fail_at(const YAML::Mark& m, const std::string& path, const std::string& msg,
                            bool created = false) const {
    const auto [where, option] = location(m, path, created);
    throw ScenarioError(where, path.empty() ? msg : fmt::format("{}: {}", path, msg), option);
  }
  /// Where the key at `path` (at `m`) was written: "file:line:col", or
  /// "file (--set KEY)" with that option when the command line set it.
  [[nodiscard]] std::pair<std::string, std::string> location(const YAML::Mark& m, const std::string& path,
                                                             bool created = false) const {
    std::string where = m.is_null() ? file_ : fmt::format("{}:{}:{}", file_, m.line + 1, m.column + 1);
    std::string option;
    if (overridden_ != nullptr) {
      for (const auto& [o, flag] : *overridden_) {
        if (path == o || path.rfind(o + ".", 0) == 0 || path.rfind(o + "[", 0) == 0 ||
            (created && (o.rfind(path + ".", 0) == 0 || o.rfind(path + "[", 0) == 0))) {
          where = fmt::format("{} ({})", file_, flag);  // (a key under it, or an item of its list)
          option = flag;
        }
      }
    }
    return {where, option};
  }

  [[nodiscard]] std::string key_path(const std::string& key) const { return child_key_path(path_, key); }
  /// This section's key path ("cluster.fabric").
  [[nodiscard]] const std::string& path() const { return path_; }

  [[nodiscard]] bool has(const std::string& key) const {
    known_.insert(key);  // asked for: a key this section understands
    return static_cast<bool>(node_[key]);
  }

  /// Checks, before any of them is read, that the section has every key of
  /// `keys`: two or more missing are one error naming them all (one missing
  /// is left to need(), which names it the same way as always).
  void require(std::initializer_list<const char*> keys) const {
    std::vector<std::string> missing;
    for (const char* k : keys) {
      if (!node_[k]) missing.emplace_back(k);
    }
    if (missing.size() < 2) return;
    std::string list;
    for (const std::string& k : missing)
      list += (list.empty() ? "" : ", ") + k + required_values(key_path(k));
    fail_missing(missing, path_, fmt::format("missing required keys: {}", list));
  }

  /// The error that required `keys` of this section are missing (`msg` at
  /// `path`): a MissingKeyNearMisses when keys nobody has asked for yet are
  /// within a typo of them, so that a typo is reported as itself, where it
  /// was typed (parse_text), not as the key it failed to give.
  [[noreturn]] void fail_missing(const std::vector<std::string>& keys, const std::string& path,
                                 const std::string& msg) const {
    std::vector<MissingKeyNearMisses::NearMiss> near;
    for (const std::string& key : keys) {
      for (auto it = node_.begin(); it != node_.end(); ++it) {
        const std::string k = it->first.as<std::string>();
        if (used_.count(k) != 0U || allowed_.count(k) != 0U || known_.count(k) != 0U) continue;
        if (key_alias(k) != key && closest_names(k, {key}).empty()) continue;
        try {
          fail_at(it->first.Mark(), key_path(k),
                  fmt::format("unknown key, did you mean '{}'? ({} is required)", key, key_path(key)), true);
        } catch (const ScenarioError& typo) {
          near.push_back({key, k, key_path(k), typo});
        }
      }
    }
    // Keys written as Megatron's flags for a missing one (bf16: true for
    // dtype), which no retry with their value can show as typos: named here.
    std::string written;
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      const std::string k = it->first.as<std::string>();
      if (used_.count(k) != 0U || allowed_.count(k) != 0U || known_.count(k) != 0U) continue;
      const auto hint = written_as_ours(k, it->second, [&](const std::string& ours) {
        return std::find(keys.begin(), keys.end(), ours) != keys.end();
      });
      if (!hint) continue;
      written += fmt::format("{}{} (line {}): {}", written.empty() ? " (" : "; ", k,
                             it->first.Mark().line + 1, *hint);
    }
    if (!written.empty()) written += ")";
    try {
      fail_at(node_.Mark(), path, msg + written);
    } catch (const ScenarioError& missing) {
      if (near.empty()) throw;
      throw MissingKeyNearMisses(missing, node_, std::move(near));
    }
  }

  /// Where `key` itself is written: an empty value (`key:` and nothing)
  /// has the mark of whatever follows it, on a later line.
  [[nodiscard]] YAML::Mark key_mark(const std::string& key) const {
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      if (it->first.IsScalar() && it->first.Scalar() == key) return it->first.Mark();
    }
    return node_[key].Mark();
  }

  /// The value at `key`; missing keys are an error.
  YAML::Node need(const std::string& key) {
    used_.insert(key);
    YAML::Node v = node_[key];
    // (helper 89: every key of `parallelism` is optional, the section is
    // not; said where it is the one key missing)
    const std::string hint =
        key_path(key) == "parallelism"
            ? " (its keys are optional: `parallelism: {}` is data parallelism over every GPU)"
            : required_values(key_path(key));
    if (!v) fail_missing({key}, key_path(key), "missing required key" + hint);
    if (v.IsNull()) fail_at(key_mark(key), key_path(key), "has no value");
    return v;
  }

  std::string scalar(const std::string& key) {
    YAML::Node v = need(key);
    if (!v.IsScalar()) fail_at(v.Mark(), key_path(key), "expected a single value, not a list or mapping");
    return v.Scalar();
  }

  /// A whole number in [1, max]; a value beyond int64 or above `max` is an
  /// error naming the range, never wrapped.
  std::int64_t positive_int(const std::string& key,
                            std::int64_t max = std::numeric_limits<std::int64_t>::max()) {
    YAML::Node v = need(key);
    const auto out_of_range = [&](const std::string& got) {
      fail_at(v.Mark(), key_path(key), fmt::format("must be between 1 and {}, got {}", max, got));
    };
    const std::string t = v.IsScalar() ? v.Scalar() : std::string();
    bool overflow = false;
    const std::optional<std::int64_t> x = decimal(t, &overflow);
    if (!x) {
      // All digits (with a sign) but no int64: out of range, not a type error.
      if (overflow) {
        if (t[0] == '-') fail_at(v.Mark(), key_path(key), fmt::format("must be positive, got {}", t));
        out_of_range(t);
      }
      // 24,32: a list, as `tessera sweep` takes one (helper 64).
      const bool list =
          t.find(',') != std::string::npos && t.find_first_not_of("0123456789, ") == std::string::npos;
      // 8K: a suffix, which only amounts take (training.tokens: 2T is 2e12),
      // and "8K" tokens of sequence is 8192, not 8000 (helper 70): say so.
      const bool suffixed = t.size() > 1 &&
                            std::string_view("kKmM").find(t.back()) != std::string_view::npos &&
                            t.find_first_not_of("0123456789") == t.size() - 1;
      fail_at(
          v.Mark(), key_path(key),
          fmt::format("expected a whole number, got '{}'{}", describe(v),
                      list       ? " (one value: `tessera sweep` runs a list of them)"
                      : suffixed ? " (write the number itself: 8K is 8192 as a sequence length, 8000 as a "
                                   "count, so no suffix is taken here)"
                                 : ""));
    }
    if (*x <= 0) fail_at(v.Mark(), key_path(key), fmt::format("must be positive, got {}", t));
    if (*x > max) out_of_range(t);
    return *x;
  }

  /// A whole number in [0, max].
  std::int64_t count(const std::string& key) {
    const YAML::Node v = need(key);
    if (v.IsScalar() && v.Scalar() == "0") return 0;
    return positive_int(key);
  }

  /// A whole number in [1, INT_MAX], for the fields held as int.
  int positive_int32(const std::string& key) {
    return static_cast<int>(positive_int(key, std::numeric_limits<int>::max()));
  }

  template <typename T>
  T unit(const std::string& key, T (*parse)(std::string_view)) {
    const std::string text = scalar(key);
    try {
      return parse(text);
    } catch (const UnitError& e) {
      fail_at(node_[key].Mark(), key_path(key), e.what());
    }
  }

  /// A number in [lo, hi] (finite).
  /// `below`: why a value under `lo` is refused, said after the range.
  double number_in(const std::string& key, double lo, double hi, const char* below = nullptr) {
    YAML::Node v = need(key);
    double x = 0;
    try {
      if (!v.IsScalar()) throw YAML::BadConversion(v.Mark());
      x = v.as<double>();
    } catch (const YAML::BadConversion&) {
      fail_at(v.Mark(), key_path(key), fmt::format("expected a number, got '{}'", describe(v)));
    }
    if (!std::isfinite(x) || x < lo || x > hi) {
      fail_at(v.Mark(), key_path(key),
              fmt::format("must be between {} and {}, got {}{}", lo, hi, v.Scalar(),
                          below != nullptr && x < lo ? fmt::format(": {}", below) : std::string()));
    }
    return x;
  }

  bool boolean(const std::string& key) {
    YAML::Node v = need(key);
    try {
      if (!v.IsScalar()) throw YAML::BadConversion(v.Mark());
      return v.as<bool>();
    } catch (const YAML::BadConversion&) {
      fail_at(v.Mark(), key_path(key),
              fmt::format("expected true or false (YAML's yes/no and on/off too), got '{}'", describe(v)));
    }
  }

  Section child(const std::string& key) {
    YAML::Node v = need(key);
    if (!v.IsMap()) fail_at(v.Mark(), key_path(key), "must be a mapping");
    return Section(v, key_path(key), file_, overridden_);
  }

  /// A mapping inside this section that is not one key's value (a list
  /// item), read under `path`.
  [[nodiscard]] Section nested(const YAML::Node& v, const std::string& path) const {
    if (!v.IsMap()) fail_at(v.Mark(), path, "must be a mapping");
    return Section(v, path, file_, overridden_);
  }

  /// Reports the first key that nobody asked for.
  void finish() const {
    std::set<std::string> all = used_;
    all.insert(known_.begin(), known_.end());
    // ", did you mean 'x'?" for an unknown key: another tool's name for one
    // of ours first, else a spelling neighbour.
    // A mixture-of-experts name one level up (model.num_experts): the key
    // under `moe`.
    static const std::set<std::string> kMoeKeys{"experts",         "top_k",          "expert_ffn_hidden",
                                                "moe_every",       "shared_experts", "first_dense_layers",
                                                "capacity_factor", "imbalance"};
    // A plan's key in another section (training.ep, model.tp): the key
    // under `parallelism`, and a batch key under `parallelism` the key
    // under `training`.
    static const std::set<std::string> kPlanKeys{"dp",
                                                 "tp",
                                                 "pp",
                                                 "ep",
                                                 "schedule",
                                                 "virtual_stages",
                                                 "first_stage_layers",
                                                 "last_stage_layers",
                                                 "account_for_embedding",
                                                 "account_for_loss",
                                                 "layout",
                                                 "sequence_parallel",
                                                 "tp_comm_overlap",
                                                 "recompute",
                                                 "zero_stage",
                                                 "grad_sync",
                                                 "bucket_size",
                                                 "overlap_param_gather",
                                                 "pipeline_scatter_gather"};
    static const std::set<std::string> kBatchKeys{"micro_batch", "global_batch", "seq_len", "dtype"};
    // A count of micro-batches is no key: it follows from the batch sizes.
    // (training.micro_batches is a key: micro-batches per replica)
    static const std::set<std::string> kAccumulation{"gradient_accumulation_steps", "grad_accum_steps",
                                                     "accumulation_steps", "num_micro_batches",
                                                     "num_microbatches"};
    auto hint = [&](const std::string& k) {
      if (kAccumulation.count(k) != 0U && all.count("global_batch") != 0U)
        return std::string(
            ", set global_batch instead "
            "(micro-batches per replica = global_batch / (dp x micro_batch))");
      // Megatron flags that are one of our keys with a value: said with it.
      if (const auto ours =
              written_as_ours(k, node_[k], [&](const std::string& o) { return all.count(o) != 0U; }))
        return ", " + *ours;
      const std::string alias = key_alias(k);
      if (all.count("moe") != 0U && (kMoeKeys.count(alias) != 0U || kMoeKeys.count(k) != 0U))
        return fmt::format(", did you mean 'moe.{}'?", alias.empty() ? k : alias);
      const std::string ours = alias.empty() ? k : alias;
      if ((path_ == "training" || path_ == "model") && kPlanKeys.count(ours) != 0U)
        return fmt::format(", did you mean 'parallelism.{}'?", ours);
      if (path_ == "parallelism" && kBatchKeys.count(ours) != 0U)
        return fmt::format(", did you mean 'training.{}'?", ours);
      return did_you_mean(k, std::vector<std::string>(all.begin(), all.end()));
    };
    std::vector<YAML::const_iterator> unknown;
    for (auto it = node_.begin(); it != node_.end(); ++it) {
      const std::string k = it->first.as<std::string>();
      if (used_.count(k) == 0U && allowed_.count(k) == 0U) unknown.push_back(it);
    }
    if (unknown.empty()) return;
    // The first where it stands, the others of the section named with it:
    // one run finds them all.
    std::string others;
    for (std::size_t i = 1; i < unknown.size(); ++i) {
      const std::string k = unknown[i]->first.as<std::string>();
      // ", did you mean 'x'?" -> "(line N, did you mean 'x'?)"
      others += fmt::format("{}{} (line {}{})", others.empty() ? "" : ", ", k,
                            unknown[i]->first.Mark().line + 1, hint(k));
    }
    std::string known;
    for (const auto& u : all) known += (known.empty() ? "" : ", ") + u;
    const std::string k = unknown.front()->first.as<std::string>();
    fail_at(unknown.front()->first.Mark(), key_path(k),
            fmt::format("unknown key{}{} (known here: {})", hint(k),
                        others.empty() ? "" : fmt::format("; also unknown here: {}", others), known),
            true);
  }

  /// Marks a key as known even if this scenario does not use it.
  void allow(const std::string& key) { allowed_.insert(key); }
  void mark_used(const std::string& key) { used_.insert(key); }
  [[nodiscard]] const YAML::Node& node() const { return node_; }

 private:
  static std::string describe(const YAML::Node& v) {
    if (v.IsScalar()) return v.Scalar();
    if (v.IsSequence()) return "a list";
    if (v.IsMap()) return "a mapping";
    return "nothing";
  }

  YAML::Node node_;
  std::string path_;
  const std::string& file_;
  const std::map<std::string, std::string>* overridden_;  ///< key path -> the option that set it
  std::set<std::string> used_;
  mutable std::set<std::string> known_;
  std::set<std::string> allowed_;
};

/// Where `word` first stands in `text` as a whole key name (not inside
/// another: `heads` in `kv_heads` is not it); npos if nowhere.
std::size_t find_key_name(const std::string& text, const std::string& word) {
  auto part = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; };
  for (std::size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool starts = at == 0 || !part(text[at - 1]);
    const bool ends = at + word.size() == text.size() || !part(text[at + word.size()]);
    if (starts && ends) return at;
  }
  return std::string::npos;
}

/// As checked() below for a whole section: the error points at the key of
/// `keys` the message names first among those the section writes (a
/// validate() naming `kv_heads (6) must divide heads (64)` points at
/// kv_heads), else at the section; with `only_keys`, an error naming none of
/// them is left for a later check (returns).
template <typename F>
void checked_keys(const Section& s, const std::string& path, std::initializer_list<const char*> keys, F&& f,
                  bool only_keys = false) {
  try {
    f();
  } catch (const ScenarioError&) {
    throw;
  } catch (const InputError& e) {
    const std::string msg = e.what();
    // (after the model's name: "model 'x': ...")
    const std::size_t from = msg.find("': ") == std::string::npos ? 0 : msg.find("': ") + 3;
    std::size_t first = std::string::npos;
    std::string key;
    for (const char* k : keys) {
      if (!s.node()[k]) continue;
      const std::size_t at = find_key_name(msg.substr(from), k);
      if (at < first) {
        first = at;
        key = k;
      }
    }
    if (!key.empty()) {
      // A library message that opens with the key's path says it once
      // (helper 126: "cluster.fabric.k: cluster.fabric.k must be even ...").
      const std::string kp = s.key_path(key);
      // At the value, as every other check of a value points (helper 126:
      // `k: 7` was marked at the key, `k: 0` at the value).
      const YAML::Node value = s.node()[key];
      s.fail_at(value.IsScalar() ? value.Mark() : s.key_mark(key), kp,
                msg.rfind(kp + " ", 0) == 0 ? msg.substr(kp.size() + 1) : msg);
    }
    if (!only_keys) s.fail_at(s.node().Mark(), path, msg);
  }
}

/// Wraps a library InputError (e.g. an impossible combination found by a
/// validate()) with the file and key path it came from.
template <typename F>
auto checked(const Section& s, const YAML::Node& at, const std::string& path, F&& f) {
  try {
    return f();
  } catch (const ScenarioError&) {
    throw;
  } catch (const InputError& e) {
    s.fail_at(at.Mark(), path, e.what());
  }
}

/// The preset a scenario's `gpu` names: the name itself, or a mapping's
/// `preset` (a preset with some of its specs changed); nullopt for an
/// inline GPU of its own.
std::optional<std::string> gpu_preset_key(const YAML::Node& gpu) {
  if (gpu.IsScalar()) return gpu.Scalar();
  if (gpu.IsMap() && gpu["preset"] && gpu["preset"].IsScalar()) return gpu["preset"].Scalar();
  return std::nullopt;
}

/// A GPU's memory as its maker gives it: 80GiB for an H100, 141GB for an
/// H200 (to_string would give 141000000000B).
std::string maker_size(Bytes b) {
  constexpr std::int64_t kGB = 1'000'000'000;
  if (b.count() % (std::int64_t{1} << 30) != 0 && b.count() % kGB == 0)
    return fmt::format("{}GB", b.count() / kGB);
  return to_string(b);
}

node_model::GpuSpec read_gpu(Section& cluster, std::vector<std::string>& warnings) {
  YAML::Node v = cluster.need("gpu");
  if (v.IsScalar()) {
    // A device JSON (the node-model commands' --device) is not a scenario's
    // GPU: say how to write it here.
    const std::string& name = v.Scalar();
    const std::string ext = ascii_lower(name.size() > 5 ? name.substr(name.size() - 5) : std::string());
    if (ext == ".json") {
      cluster.fail_at(
          v.Mark(), cluster.key_path("gpu"),
          fmt::format("'{}' is a file: a scenario takes a GPU preset name or the GPU inline, a mapping "
                      "with name, fp32_peak, tensor_peak, memory_bandwidth, sms, l2_cache, memory "
                      "(device JSON files are for predict-kernels and the other node-model commands; "
                      "docs/scenarios.md, cluster.gpu)",
                      name));
    }
    return checked(cluster, v, cluster.key_path("gpu"), [&] { return node_model::gpu_preset(v.Scalar()); });
  }
  Section g = cluster.child("gpu");
  // The spec keys (besides name) an inline GPU gives, the first six
  // required, and a preset's mapping may change.
  static constexpr std::array<const char*, 9> kSpecKeys{"fp32_peak", "tensor_peak", "memory_bandwidth",
                                                        "sms",       "l2_cache",    "memory",
                                                        "tf32_peak", "fp8_peak",    "bf16"};
  node_model::GpuSpec spec;
  const bool from_preset = g.has("preset");
  if (from_preset) {
    // A preset with some specs changed (an H100 with 94 GB): each key given
    // replaces the preset's. Unless named, the reports name the preset and
    // what was changed ("H100-SXM (memory 94GB)").
    const YAML::Node at = g.need("preset");
    spec = checked(g, at, g.key_path("preset"), [&] { return node_model::gpu_preset(g.scalar("preset")); });
    std::string changed;
    for (const char* key : kSpecKeys) {
      if (g.node()[key] && g.node()[key].IsScalar())
        changed += fmt::format("{}{} {}", changed.empty() ? "" : ", ", key, g.node()[key].Scalar());
    }
    if (!changed.empty()) spec.name = fmt::format("{} ({})", spec.name, changed);
    if (g.has("name")) spec.name = g.scalar("name");
  } else {
    // Every missing key in one error (a new GPU is described in one go).
    g.require({"name", "fp32_peak", "tensor_peak", "memory_bandwidth", "sms", "l2_cache", "memory"});
    spec.name = g.scalar("name");
  }
  // Inline: the first seven keys are required (g.unit names a missing one);
  // from a preset each is read only when given.
  const auto given = [&](const char* key) { return !from_preset || g.has(key); };
  if (given("fp32_peak")) spec.fp32_peak = g.unit("fp32_peak", parse_flop_rate);
  if (given("tensor_peak")) spec.tensor_peak = g.unit("tensor_peak", parse_flop_rate);
  if (given("memory_bandwidth")) spec.memory_bandwidth = g.unit("memory_bandwidth", parse_bandwidth);
  if (given("sms")) spec.sms = g.positive_int32("sms");
  if (given("l2_cache")) spec.l2_cache = g.unit("l2_cache", parse_bytes);
  if (given("memory")) spec.memory = g.unit("memory", parse_bytes);
  // Optional inline: TF32 tensor cores at half the FP16/BF16 rate (every
  // NVIDIA GPU with TF32 so far), no FP8 tensor cores.
  if (g.has("tf32_peak")) {
    spec.tf32_peak = g.unit("tf32_peak", parse_flop_rate);
  } else if (!from_preset) {
    spec.tf32_peak = FlopRate::per_second(spec.tensor_peak.per_second() / 2.0);
  }
  if (g.has("fp8_peak")) {
    spec.fp8_peak = g.unit("fp8_peak", parse_flop_rate);
  } else if (!from_preset) {
    spec.fp8_peak = FlopRate::per_second(0.0);
  }
  if (g.has("bf16")) spec.bf16 = g.boolean("bf16");
  if (from_preset) {
    const node_model::GpuSpec& preset = node_model::gpu_preset(g.scalar("preset"));
    // A preset's tensor cores made slower or faster (an export variant, a
    // power cap) keep its TF32 : 16-bit : FP8 ratios, as every NVIDIA GPU
    // with them has (1 : 2 : 4), unless the mapping gives those peaks too.
    if (g.has("tensor_peak")) {
      const double ratio = spec.tensor_peak.per_second() / preset.tensor_peak.per_second();
      if (!g.has("tf32_peak")) spec.tf32_peak = FlopRate::per_second(preset.tf32_peak.per_second() * ratio);
      if (!g.has("fp8_peak")) spec.fp8_peak = FlopRate::per_second(preset.fp8_peak.per_second() * ratio);
    }
    // The preset's capacity in the other unit: GPU makers' "80GB" is
    // 80 GiB on an H100 but 141 GB on an H200; 80GB here is 74.5 GiB.
    if (g.has("memory") && spec.memory != preset.memory) {
      constexpr double kGB = 1e9, kGiB = 1073741824.0;
      const double given = spec.memory.as_double(), was = preset.memory.as_double();
      const bool other_unit = std::abs(given / kGB - was / kGiB) < 1e-9 * (was / kGiB) ||
                              std::abs(given / kGiB - was / kGB) < 1e-9 * (was / kGB);
      if (other_unit) {
        const bool binary = preset.memory.count() % (std::int64_t{1} << 30) == 0;
        warnings.push_back(fmt::format(
            "cluster.gpu.memory = {} is {:.4g} {}, where the {} preset's is {}: the same number in the "
            "other unit (GB = 10^9 bytes, GiB = 2^30); give {} for the preset's capacity",
            g.scalar("memory"), given / (binary ? kGiB : kGB), binary ? "GiB" : "GB", preset.name,
            maker_size(preset.memory), maker_size(preset.memory)));
      }
    }
  }
  g.finish();
  checked(g, g.node(), cluster.key_path("gpu"), [&] {
    spec.validate();
    return 0;
  });
  return spec;
}

/// What a scenario's model keys change from its preset, as the model's
/// label gives it ("layers 12, moe.top_k 1"): the architecture (sizes,
/// booleans, norm, the experts' shape), not a routing setting such as
/// moe.capacity_factor.
std::string changed_from_preset(const parallelism::TransformerConfig& preset,
                                const parallelism::TransformerConfig& cfg) {
  std::vector<std::string> changed;
  // Each key once, in the label's order: sizes, booleans, norm, experts.
  const auto note = [&](const char* key, const auto& was, const auto& now) {
    if (was != now) changed.push_back(fmt::format("{} {}", key, now));
  };
  note("layers", preset.layers, cfg.layers);
  note("hidden", preset.hidden, cfg.hidden);
  note("heads", preset.heads, cfg.heads);
  note("ffn_hidden", preset.ffn_hidden, cfg.ffn_hidden);
  note("vocab", preset.vocab, cfg.vocab);
  // kv_heads as attention sees it: a preset without one has a key and value
  // head per query head (with the heads as now), so `kv_heads: 20` on
  // gpt2-large's 20 heads changes nothing.
  note("kv_heads", preset.kv_heads > 0 ? preset.kv_heads : cfg.heads, cfg.kv_heads_or_heads());
  note("gated_mlp", preset.gated_mlp, cfg.gated_mlp);
  note("tied_embeddings", preset.tied_embeddings, cfg.tied_embeddings);
  note("learned_positions", preset.learned_positions, cfg.learned_positions);
  note("dropout", preset.dropout, cfg.dropout);
  note("linear_bias", preset.linear_bias, cfg.linear_bias);
  if (preset.rms_norm != cfg.rms_norm) changed.push_back(cfg.rms_norm ? "norm rmsnorm" : "norm layernorm");
  // The experts' shape (helper 125: a moe override kept the preset's
  // label, so a sweep over it named different models alike); an expert
  // width of 0 is the model's ffn_hidden.
  const auto expert_ffn = [](const parallelism::TransformerConfig& c) {
    return c.moe.expert_ffn_hidden > 0 ? c.moe.expert_ffn_hidden : c.ffn_hidden;
  };
  note("moe.experts", preset.moe.experts, cfg.moe.experts);
  note("moe.top_k", preset.moe.top_k, cfg.moe.top_k);
  note("moe.expert_ffn_hidden", cfg.is_moe() ? expert_ffn(preset) : 0, cfg.is_moe() ? expert_ffn(cfg) : 0);
  note("moe.moe_every", preset.moe.moe_every, cfg.moe.moe_every);
  note("moe.first_dense_layers", preset.moe.first_dense_layers, cfg.moe.first_dense_layers);
  note("moe.shared_experts", preset.moe.shared_experts, cfg.moe.shared_experts);
  return fmt::format("{}", fmt::join(changed, ", "));
}

parallelism::TransformerConfig read_model(Section& m) {
  parallelism::TransformerConfig cfg;
  std::optional<parallelism::TransformerConfig> preset_cfg;  // a preset's, before the scenario's keys
  if (m.has("preset")) {
    const YAML::Node at = m.need("preset");
    cfg = checked(m, at, m.key_path("preset"), [&] { return parallelism::model_preset(m.scalar("preset")); });
    // Fields given beside a preset override it.
    auto override_field = [&](const char* key, std::int64_t& field) {
      if (m.has(key)) field = m.positive_int(key);
    };
    const parallelism::TransformerConfig preset = cfg;
    const std::int64_t preset_hidden = cfg.hidden, preset_ffn = cfg.ffn_hidden;
    override_field("layers", cfg.layers);
    override_field("hidden", cfg.hidden);
    override_field("heads", cfg.heads);
    if (m.has("ffn_hidden")) {
      cfg.ffn_hidden = m.positive_int("ffn_hidden");
    } else if (cfg.hidden != preset_hidden) {
      // A new hidden size keeps the preset's MLP width ratio (4 x hidden
      // for the GPT presets), rounded, at most int64.
      // (__extension__: a GCC/Clang 128-bit integer, which -Wpedantic flags.)
      __extension__ using Int128 = __int128;
      const Int128 ffn = (static_cast<Int128>(preset_ffn) * cfg.hidden + preset_hidden / 2) / preset_hidden;
      cfg.ffn_hidden = static_cast<std::int64_t>(
          std::min<Int128>(std::max<Int128>(ffn, 1), std::numeric_limits<std::int64_t>::max()));
    }
    override_field("vocab", cfg.vocab);
    override_field("kv_heads", cfg.kv_heads);
    preset_cfg = preset;
  } else {
    m.require({"layers", "hidden", "heads", "vocab"});
    cfg.name = m.has("name") ? m.scalar("name") : "custom";
    cfg.layers = m.positive_int("layers");
    cfg.hidden = m.positive_int("hidden");
    cfg.heads = m.positive_int("heads");
    cfg.vocab = m.positive_int("vocab");
    if (m.has("kv_heads")) cfg.kv_heads = m.positive_int("kv_heads");
    cfg.ffn_hidden = m.has("ffn_hidden") ? m.positive_int("ffn_hidden") : 0;  // 0: Megatron's, below
  }
  if (m.has("gated_mlp")) cfg.gated_mlp = m.boolean("gated_mlp");
  // Without a width (and a preset), Megatron's: 4 x hidden, and for SwiGLU
  // two thirds of it rounded down to a multiple of 64 (arguments.py:
  // --swiglu without --ffn-hidden-size; helper 147: 4 x hidden made a model
  // 35% larger).
  if (cfg.ffn_hidden == 0) {
    cfg.ffn_hidden =
        cfg.gated_mlp ? std::max<std::int64_t>(64, 4 * cfg.hidden * 2 / 3 / 64 * 64) : 4 * cfg.hidden;
  }
  if (m.has("tied_embeddings")) cfg.tied_embeddings = m.boolean("tied_embeddings");
  if (m.has("learned_positions")) cfg.learned_positions = m.boolean("learned_positions");
  if (m.has("dropout")) cfg.dropout = m.boolean("dropout");
  if (m.has("linear_bias")) cfg.linear_bias = m.boolean("linear_bias");
  if (m.has("norm")) {
    std::string norm = m.scalar("norm");
    // Megatron spells them LayerNorm and RMSNorm.
    std::transform(norm.begin(), norm.end(), norm.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (norm != "layernorm" && norm != "rmsnorm") {
      m.fail_at(m.node()["norm"].Mark(), m.key_path("norm"),
                fmt::format("expected layernorm or rmsnorm, got '{}'", norm));
    }
    cfg.rms_norm = norm == "rmsnorm";
  }
  if (m.has("moe")) {
    // Mixture of experts (docs/scenarios.md): fields beside a preset override it.
    Section e = m.child("moe");
    parallelism::MoeConfig& moe = cfg.moe;
    // A moe section on a dense model (a preset without experts, or none)
    // makes it one, which needs the experts' count: said as such (a bare
    // "missing required key" read as if the key were optional elsewhere).
    if (!cfg.is_moe() && !e.has("experts")) {
      e.fail_at(e.node().Mark(), e.key_path("experts"),
                fmt::format("missing: the model{} is dense, and a moe section makes it a mixture of experts, "
                            "which needs experts (and top_k, 1 by default)",
                            cfg.name.empty() ? "" : fmt::format(" '{}'", cfg.name)));
    }
    if (e.has("experts") || !cfg.is_moe()) moe.experts = e.positive_int("experts");
    if (e.has("top_k")) moe.top_k = e.positive_int("top_k");
    if (e.has("expert_ffn_hidden")) moe.expert_ffn_hidden = e.positive_int("expert_ffn_hidden");
    if (e.has("moe_every")) moe.moe_every = e.positive_int("moe_every");
    if (e.has("first_dense_layers")) moe.first_dense_layers = e.count("first_dense_layers");
    if (e.has("shared_experts")) moe.shared_experts = e.count("shared_experts");
    if (e.has("capacity_factor"))
      moe.capacity_factor =
          e.number_in("capacity_factor", 1, 100,
                      "below 1 an expert drops tokens, which the model does not represent (1: dropless)");
    if (e.has("imbalance")) moe.imbalance = e.number_in("imbalance", 1, 100);
    e.finish();
    checked_keys(
        e, "model.moe",
        {"experts", "top_k", "expert_ffn_hidden", "moe_every", "first_dense_layers", "shared_experts",
         "capacity_factor", "imbalance"},
        [&] { cfg.validate(); }, true);  // the rest: the model's check below
  }
  // The label says what differs from the preset ("gpt2-large (layers 12)"),
  // unless the scenario names the model.
  if (preset_cfg) {
    const std::string changed = changed_from_preset(*preset_cfg, cfg);
    if (m.has("name")) {
      cfg.name = m.scalar("name");
    } else if (!changed.empty()) {
      cfg.name = fmt::format("{} ({})", cfg.name, changed);
    }
  }
  m.finish();
  checked_keys(m, "model", {"layers", "hidden", "heads", "kv_heads", "ffn_hidden", "vocab"},
               [&] { cfg.validate(); });
  return cfg;
}

}  // namespace

std::vector<std::string_view> layer_split_keys_set(const parallelism::ParallelPlan& plan) {
  const std::array<bool, kLayerSplitKeys.size()> set = {plan.first_stage_layers.has_value(),
                                                        plan.last_stage_layers.has_value(),
                                                        plan.account_for_embedding, plan.account_for_loss};
  std::vector<std::string_view> out;
  for (std::size_t i = 0; i < set.size(); ++i) {
    if (set[i]) out.push_back(kLayerSplitKeys[i]);
  }
  return out;
}

std::string uneven_layer_split_warning(std::int64_t layers, const parallelism::ParallelPlan& plan,
                                       node_model::Framework framework, bool virtual_stages_auto) {
  // DeepSpeed's pipeline engine (megatron-deepspeed) partitions the layers
  // itself (partition_method) and refuses no uneven split, nor has the keys
  // the warning suggests (helper 156: it said Megatron-LM refuses it).
  if (framework == node_model::Framework::MegatronDeepSpeed) return {};
  // An uneven split of the layers is forecast as it is, but Megatron-LM
  // refuses it unless told how (--decoder-first-pipeline-num-layers and
  // the like: first_stage_layers, last_stage_layers, which say it): said,
  // with the chunk sizes.
  if (!layer_split_keys_set(plan).empty()) return {};
  const int pp = plan.pp;
  const int virtual_stages = plan.virtual_stages;
  const std::int64_t chunks = static_cast<std::int64_t>(pp) * virtual_stages;
  if (chunks <= 1 || chunks > layers || layers % chunks == 0) return {};
  const std::int64_t small = layers / chunks;
  const std::int64_t big_ones = layers % chunks;
  const bool v = virtual_stages > 1;
  const std::string unit = v ? "chunk" : "stage";
  const std::string first = big_ones == 1 ? fmt::format("the first {} gets", unit)
                                          : fmt::format("the first {} {}s get", big_ones, unit);
  const std::string rest = chunks - big_ones == 1 ? fmt::format("the last {} gets", unit)
                                                  : fmt::format("the other {} get", chunks - big_ones);
  // How to tell it: the split closest to even (the fewest layers on the
  // fullest stage, then the next...) that Megatron-Core accepts.
  std::string told;
  // The stages' layers, runs of equal ones as "N (xk)".
  const auto runs_of = [](const std::vector<std::int64_t>& stages) {
    std::vector<std::string> runs;
    for (std::size_t i = 0; i < stages.size();) {
      std::size_t j = i;
      while (j < stages.size() && stages[j] == stages[i]) ++j;
      runs.push_back(j - i == 1 ? fmt::format("{}", stages[i]) : fmt::format("{} (x{})", stages[i], j - i));
      i = j;
    }
    return fmt::format("{}", fmt::join(runs, ", "));
  };
  const std::vector<std::int64_t> now = parallelism::stage_layer_split(layers, plan);
  const auto even =
      parallelism::balanced_edge_stage_split(layers, plan, std::vector<double>(now.begin(), now.end()), 0.0);
  if (even) {
    parallelism::ParallelPlan split = plan;
    split.first_stage_layers = even->first_stage_layers;
    split.last_stage_layers = even->last_stage_layers;
    const std::vector<std::int64_t> stages = parallelism::stage_layer_split(layers, split);
    std::vector<std::string> keys;
    if (even->first_stage_layers)
      keys.push_back(fmt::format("first_stage_layers: {}", *even->first_stage_layers));
    if (even->last_stage_layers)
      keys.push_back(fmt::format("last_stage_layers: {}", *even->last_stage_layers));
    told = fmt::format(": parallelism.{} give{} layers per stage {}", fmt::join(keys, " and "),
                       keys.size() == 1 ? "s" : "", runs_of(stages));
  }
  // Or Megatron-Core's --account-for-embedding/loss-in-pipeline-split, where
  // counting the embedding and the loss as layers splits evenly (under
  // `virtual_stages: auto` at the chunks auto then takes).
  if (const auto counted = parallelism::counted_layer_split(layers, plan, virtual_stages_auto)) {
    const std::vector<std::int64_t> stages = parallelism::stage_layer_split(layers, *counted);
    const bool both = counted->account_for_embedding && counted->account_for_loss;
    told += fmt::format(
        "{} parallelism.{}: true give{} {}{}{} (the {} counted as a layer)", told.empty() ? ":" : "; or",
        parallelism::accounted_split_keys(*counted), both ? "" : "s", told.empty() ? "layers per stage " : "",
        runs_of(stages),
        counted->virtual_stages != plan.virtual_stages
            ? fmt::format(" at virtual_stages {}", counted->virtual_stages)
            : "",
        both ? "embedding and the loss each" : (counted->account_for_embedding ? "embedding" : "loss"));
  }
  return fmt::format(
      "model.layers ({}) is not a multiple of the pipeline's {}s, {} ({}): {} {} layers, {} {} "
      "(forecast as such; Megatron-LM refuses an uneven split unless told how to make it{})",
      layers, unit, v ? "pp x virtual_stages" : "pp",
      v ? fmt::format("{} x {} = {}", pp, virtual_stages, chunks) : fmt::format("{}", chunks), first,
      small + 1, rest, small, told);
}

std::string split_backward_recompute_warning(const parallelism::ParallelPlan& plan) {
  // Full recomputation under a split backward saves less than it seems
  // (helper 83: stage 1's activations were the same with it and without).
  if (!parallelism::splits_backward(plan.schedule) || plan.recompute != parallelism::Recompute::Full)
    return {};
  return fmt::format(
      "parallelism.recompute: full under {}: B recomputes each layer and W keeps its linears' inputs and "
      "output gradients until it runs, more than full recomputation keeps, so this plan holds more "
      "activation memory than 1f1b with it (docs/parallelism.md, Memory model; tessera compare-schedules "
      "shows both)",
      parallelism::to_string(plan.schedule));
}

Override parse_override(const std::string& text) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw InputError(fmt::format("--set '{}': expected key.path=value", text));
  }
  if (eq + 1 == text.size()) {
    throw InputError(fmt::format("--set '{}': the value is empty (expected key.path=value)", text));
  }
  // Blanks around the key are no part of it (helper 145: ' cluster.nodes '
  // was "unknown key, did you mean 'cluster'?", the blanks invisible).
  std::string key = text.substr(0, eq);
  key.erase(0, key.find_first_not_of(" \t"));
  key.erase(key.find_last_not_of(" \t") + 1);
  if (key.empty()) throw InputError(fmt::format("--set '{}': expected key.path=value", text));
  // (helper 179: `cluster.nodes.=2` set cluster.nodes)
  if (key.front() == '.' || key.back() == '.' || key.find("..") != std::string::npos) {
    throw InputError(
        fmt::format("--set '{}': the key '{}' has an empty part (expected key.path=value)", text, key));
  }
  return Override{key, text.substr(eq + 1)};
}

std::optional<ChunkList> take_chunk_list(const std::optional<std::string>& given,
                                         std::vector<std::string>& sets) {
  std::optional<ChunkList> out;
  if (given) out = ChunkList{*given, "--virtual-stages"};
  for (auto it = sets.begin(); it != sets.end();) {
    const Override o = parse_override(*it);
    if (o.path != "parallelism.virtual_stages" || o.value == "auto") {
      ++it;
      continue;
    }
    if (out) {
      throw UsageError(fmt::format(
          "{} and --set parallelism.virtual_stages both set the model chunks to try: give one", out->flag));
    }
    out = ChunkList{o.value, "--set parallelism.virtual_stages"};
    it = sets.erase(it);
  }
  return out;
}

void refuse_set_of_row_keys(const std::vector<Override>& overrides,
                            std::span<const std::pair<std::string_view, std::string_view>> set_by,
                            std::string_view row, std::string_view (*note)(std::string_view column)) {
  for (const Override& o : overrides) {
    for (const auto& [key, column] : set_by) {
      if (o.path != key) continue;
      throw UsageError(fmt::format(
          "--set {}: every {} sets its own (the {}s file's '{}' column{}): each {} is timed as measured; "
          "change the file's rows to time another",
          o.path, row, row, column, note != nullptr ? note(column) : std::string_view(), row));
    }
  }
}

std::vector<std::size_t> key_path_columns(
    const node_model::CsvTable& t, std::span<const std::pair<std::string_view, std::string_view>> set_by) {
  std::vector<std::size_t> out;
  for (std::size_t c = 0; c < t.header.size(); ++c) {
    const std::string& h = t.header[c];
    if (h.find('.') == std::string::npos) continue;
    // Two columns setting one key: which wins is not known (and a JSON
    // report would carry the key twice).
    (void)t.column(h);
    // The GPU is the report's, one per table: its groups, fits and labels
    // are per GPU (helper 112: a cluster.gpu column ran half the rows on an
    // H100 under the A100's label, one fit over both).
    if (h == "cluster.gpu" || h.rfind("mixed_gpus.", 0) == 0 || h.rfind("cluster.gpu.", 0) == 0) {
      throw InputError(fmt::format(
          "{}: column '{}': a table's rows run on one GPU, the report's (--gpu, or the scenario's "
          "cluster.gpu); give each GPU's rows a file of their own",
          t.path, h));
    }
    for (const auto& [key, column] : set_by) {
      if (h != key) continue;
      if (t.column(column) >= 0) {
        throw InputError(fmt::format("{}: column '{}' sets what column '{}' gives: remove one of them",
                                     t.path, h, column));
      }
      throw InputError(fmt::format(
          "{}: column '{}': this table gives that key in a column named '{}': rename it", t.path, h, column));
    }
    out.push_back(c);
  }
  return out;
}

std::string without_scenario_file(const InputError& e, const std::string& file) {
  const auto* located = dynamic_cast<const ScenarioError*>(&e);
  return without_file_prefix(
      located != nullptr && !located->detail().empty() ? located->detail() : std::string(e.what()), file);
}

std::string without_file_prefix(std::string message, const std::string& file) {
  if (!file.empty() && message.starts_with(file + ": ")) message.erase(0, file.size() + 2);
  return message;
}

std::string loose_column_name(std::string_view name) {
  std::string out;
  for (const char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) != 0) {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

void check_time_units(const std::vector<MeasuredBesideForecast>& rows, const std::string& file,
                      std::string_view noun) {
  // Forecasts this many times off the measurements, or more: the times are
  // not milliseconds (helper 78: seconds under "iteration time (ms)" fit
  // every constant to 0; helper 112: validate steps printed a 94751% error).
  if (rows.empty()) return;
  std::vector<double> ratio;
  ratio.reserve(rows.size());
  for (const auto& r : rows) ratio.push_back(r.measured_ms / r.predicted_ms);
  const double median = node_model::median(ratio);
  if (median >= kTimeUnitsOffFactor || median <= 1.0 / kTimeUnitsOffFactor) {
    throw InputError(fmt::format(
        "{}: the measured iteration times are {:.3g} x the forecasts (median over {} {}s): is the time "
        "column in milliseconds?",
        file, median, rows.size(), noun));
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const double off = ratio[i] / median;
    if (off < kTimeUnitsOffFactor && off > 1.0 / kTimeUnitsOffFactor) continue;
    throw InputError(fmt::format(
        "{}: row {}: its measured iteration time, {:.6g} ms, is {:.3g} x its forecast where the {}s' "
        "median is {:.3g} x: is it in milliseconds, as the other rows?",
        file, rows[i].row, rows[i].measured_ms, ratio[i], noun, median));
  }
}

std::vector<std::pair<std::string, std::string>> key_path_cells(const node_model::CsvTable& t,
                                                                std::size_t row,
                                                                const std::vector<std::size_t>& columns) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::size_t c : columns) {
    std::string v = t.rows[row][c];
    v.erase(0, v.find_first_not_of(" \t"));
    v.erase(v.find_last_not_of(" \t") + 1);
    if (!v.empty()) out.emplace_back(t.header[c], std::move(v));
  }
  return out;
}

std::optional<std::string> key_column_error(const std::vector<std::pair<std::string, std::string>>& keys,
                                            std::string_view detail) {
  for (const auto& [key, value] : keys) {
    // The key itself or one of its sections ("trainng: unknown key").
    for (std::size_t end = key.find('.');; end = key.find('.', end + 1)) {
      const std::string_view prefix = std::string_view(key).substr(0, end);
      if (detail.substr(0, prefix.size()) == prefix &&
          detail.substr(prefix.size()).rfind(": unknown key", 0) == 0)
        return fmt::format("column '{}': {}", key, detail);
      if (end == std::string::npos) break;
    }
  }
  return std::nullopt;
}

namespace {

/// Counts the nodes of the documents a YAML::Parser reads, and where the
/// first node after the first document is.
struct DocumentEvents : YAML::EventHandler {
  int documents = 0;
  int nodes = 0;
  YAML::Mark second_at = YAML::Mark::null_mark();
  void node(const YAML::Mark& m) {
    ++nodes;
    if (documents >= 2 && second_at.is_null()) second_at = m;
  }
  void OnDocumentStart(const YAML::Mark& /*mark*/) override { ++documents; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& /*mark*/, YAML::anchor_t /*anchor*/) override {}
  void OnAlias(const YAML::Mark& m, YAML::anchor_t /*anchor*/) override { node(m); }
  void OnScalar(const YAML::Mark& m, const std::string& /*tag*/, YAML::anchor_t /*anchor*/,
                const std::string& /*value*/) override {
    node(m);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string& /*tag*/, YAML::anchor_t /*anchor*/,
                       YAML::EmitterStyle::value /*style*/) override {
    node(m);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& m, const std::string& /*tag*/, YAML::anchor_t /*anchor*/,
                  YAML::EmitterStyle::value /*style*/) override {
    node(m);
  }
  void OnMapEnd() override {}
};

/// The line and byte of the first byte sequence that is not UTF-8, if any.
std::optional<std::pair<int, unsigned>> first_invalid_utf8(std::string_view s) {
  int line = 1;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') ++line;
    std::size_t n = 0;
    unsigned cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return std::pair{line, static_cast<unsigned>(c)};
    }
    for (std::size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return std::pair{line, static_cast<unsigned>(c)};
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return std::pair{line, static_cast<unsigned>(c)};
      cp = (cp << 6) | (d & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
    const unsigned min[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
      return std::pair{line, static_cast<unsigned>(c)};
    }
    i += n + 1;
  }
  return std::nullopt;
}

/// Every mapping key is a plain name given once: yaml-cpp would silently
/// keep the first of two equal keys, and a list or mapping used as a key
/// means nothing here.
/// `option`: the command-line option whose value is being checked, if any.
void check_keys(const YAML::Node& node, const std::string& file, const std::string& path, int depth,
                const std::string& option = {}) {
  auto at = [&](const YAML::Mark& m) {
    return m.is_null() ? file : fmt::format("{}:{}:{}", file, m.line + 1, m.column + 1);
  };
  if (depth > 64) throw ScenarioError(at(node.Mark()), fmt::format("{}: nested too deep (more than 64 levels)", path), option);
  if (node.IsMap()) {
    std::set<std::string> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!it->first.IsScalar()) {
        throw ScenarioError(at(it->first.Mark()),
                            fmt::format("{}: a key must be a plain name, not a list or mapping",
                                        path.empty() ? "(top level)" : path),
                            option);
      }
      const std::string& k = it->first.Scalar();
      const std::string kp = child_key_path(path, k);
      if (!seen.insert(k).second) {
        throw ScenarioError(at(it->first.Mark()), fmt::format("{}: duplicate key (given twice in the same mapping)", kp),
                            option);
      }
      check_keys(it->second, file, kp, depth + 1, option);
    }
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) {
      check_keys(node[i], file, fmt::format("{}[{}]", path, i), depth + 1, option);
    }
  }
}

/// Whether the quote at `line[col]` closes on the line (escapes in double
/// quotes, '' in single quotes skipped).
bool quote_closes(std::string_view line, std::size_t col) {
  const char q = line[col];
  for (std::size_t i = col + 1; i < line.size(); ++i) {
    if (q == '"' && line[i] == '\\') {
      ++i;  // an escape
    } else if (line[i] == q) {
      if (q == '\'' && i + 1 < line.size() && line[i + 1] == '\'') {
        ++i;  // '' is a quote inside single quotes
      } else {
        return true;
      }
    }
  }
  return false;
}

/// A quoted value that does not close on its own line: YAML lets a quoted
/// scalar run over lines, so `nodes: "2` took every line up to the next
/// quote as its text and the error was the keys it swallowed ("missing
/// required keys" at another line; helper 179). No scenario value spans
/// lines: named at its opening quote.
void check_quotes_close(const YAML::Node& node, const std::vector<std::string>& lines,
                        const std::string& file, const std::string& path, int depth) {
  if (depth > 64) return;  // (check_keys names it)
  if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (it->first.IsScalar())
        check_quotes_close(it->second, lines, file, child_key_path(path, it->first.Scalar()), depth + 1);
    }
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) {
      check_quotes_close(node[i], lines, file, fmt::format("{}[{}]", path, i), depth + 1);
    }
  } else if (node.IsScalar() && node.Tag() == "!") {
    const YAML::Mark m = node.Mark();
    if (m.is_null() || m.line < 0 || static_cast<std::size_t>(m.line) >= lines.size()) return;
    const std::string_view line = lines[static_cast<std::size_t>(m.line)];
    const auto col = static_cast<std::size_t>(m.column);
    if (col >= line.size() || (line[col] != '"' && line[col] != '\'') || quote_closes(line, col)) return;
    throw ScenarioError(fmt::format(
        "{}:{}:{}: {}: the quoted value opened here does not close on its line (a "
        "missing closing {}? the lines up to the next one were read as its text)",
        file, m.line + 1, m.column + 1, path.empty() ? "(top level)" : path, line[col] == '"' ? "\"" : "'"));
  }
}

/// YAML's merge key (`<<: *anchor`, or a list of anchors), which yaml-cpp
/// does not resolve: the merged mappings' keys join the mapping, its own
/// keys winning, then the earlier mapping's (YAML 1.1's merge type; helper
/// 111: sharing a section between jobs by an anchor read as "training.<<:
/// unknown key"). Nested as check_keys allows.
void resolve_merge_keys(YAML::Node node, const std::string& file, int depth) {
  if (depth > 64) return;  // (check_keys names it)
  if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) resolve_merge_keys(node[i], file, depth + 1);
    return;
  }
  if (!node.IsMap()) return;
  for (auto it = node.begin(); it != node.end(); ++it) resolve_merge_keys(it->second, file, depth + 1);
  const YAML::Node& view = node;  // (a non-const [] would add the key)
  const YAML::Node merge = view["<<"];
  if (!merge) return;
  std::vector<YAML::Node> sources;
  if (merge.IsMap()) {
    sources.push_back(merge);
  } else if (merge.IsSequence()) {
    for (std::size_t i = 0; i < merge.size(); ++i) sources.push_back(merge[i]);
  }
  if (sources.empty() ||
      std::any_of(sources.begin(), sources.end(), [](const YAML::Node& m) { return !m.IsMap(); })) {
    const YAML::Mark m = merge.Mark();
    throw ScenarioError(
        m.is_null() ? file : fmt::format("{}:{}:{}", file, m.line + 1, m.column + 1),
        "'<<' (a YAML merge key) takes a mapping, an alias of one (*name), or a list of them");
  }
  node.remove("<<");
  for (const YAML::Node& source : sources) {
    for (auto it = source.begin(); it != source.end(); ++it) {
      if (!it->first.IsScalar() || view[it->first.Scalar()]) continue;
      node[it->first] = it->second;  // (the key node itself: its line, where the anchor wrote it)
    }
  }
}

/// How many times `target` (the node itself, not an equal one) is reached
/// from `node`, stopping at 2: an anchor's mapping is reached once per
/// alias (and per merge, which shares its values).
int reached(const YAML::Node& node, const YAML::Node& target, int depth = 0) {
  if (depth > 64) return 0;
  int n = node.is(target) ? 1 : 0;
  if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end() && n < 2; ++it) n += reached(it->second, target, depth + 1);
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size() && n < 2; ++i) n += reached(node[i], target, depth + 1);
  }
  return n;
}

void apply_override(const YAML::Node& root, const Override& o, const std::string& file) {
  const std::string option = o.flag.empty() ? "--set " + o.path : o.flag;
  // What the messages call it: the option, or (a data row's key) the path.
  const std::string label = o.flag.empty() ? option : fmt::format("key path '{}'", o.path);
  std::vector<std::string> keys;
  std::stringstream ss(o.path);
  for (std::string k; std::getline(ss, k, '.');) {
    if (k.empty()) throw ScenarioError(file, fmt::format("{}: empty key in the path", label), option);
    keys.push_back(k);
  }
  YAML::Node node = root;
  std::string walked;
  for (std::size_t i = 0; i + 1 < keys.size(); ++i) {
    walked += (walked.empty() ? "" : ".") + keys[i];
    // An element of a list the file has (`--set jobs[1].nodes=3`).
    if (const auto open = keys[i].find('['); open != std::string::npos && keys[i].back() == ']') {
      const std::string list = keys[i].substr(0, open);
      // A plain index, as errors and the jobs' --set are named (jobs[1], not
      // jobs[01] or jobs[+1]).
      const std::string digits = keys[i].substr(open + 1, keys[i].size() - open - 2);
      const bool plain =
          !digits.empty() && digits.size() < 10 &&
          std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; }) &&
          (digits == "0" || digits[0] != '0');
      const std::int64_t index = plain ? decimal(digits).value_or(-1) : -1;
      const YAML::Node seq = node[list];
      if (!seq || !seq.IsSequence()) {
        throw ScenarioError(
            file, fmt::format("{}: '{}': this scenario has no '{}' list", label, walked, list), option);
      }
      if (index < 0) {
        throw ScenarioError(
            file,
            fmt::format("{}: '{}': write the index as a plain whole number ({}[0], {}[1], ...)", label,
                        walked, list, list),
            option);
      }
      if (static_cast<std::size_t>(index) >= seq.size()) {
        throw ScenarioError(file,
                            fmt::format("{}: '{}': the scenario's {} has {} element{} (0..{})", label, walked,
                                        list, seq.size(), seq.size() == 1 ? "" : "s", seq.size() - 1),
                            option);
      }
      YAML::Node element = seq[static_cast<std::size_t>(index)];
      if (!element.IsMap()) {
        throw ScenarioError(file, fmt::format("{}: '{}' is not a mapping in this scenario", label, walked),
                            option);
      }
      node.reset(element);
      continue;
    }
    YAML::Node next = node[keys[i]];
    // A missing section is created (`--set collectives.algorithm=ring` on a
    // file without `collectives:`); its keys are then checked as any other.
    if (!next || next.IsNull()) {
      // A job's own section, new (`--set jobs[0].training.micro_batch=4`
      // where the job uses the top level's): the top level's, changed.
      const YAML::Node shared = i == 1 && keys[0].rfind("jobs[", 0) == 0 ? root[keys[i]] : YAML::Node();
      node[keys[i]] = shared && shared.IsMap() ? YAML::Clone(shared) : YAML::Node(YAML::NodeType::Map);
      next = node[keys[i]];
    }
    // A spec of a GPU the file names by preset (`--set cluster.gpu.memory=94GB`
    // over `gpu: H100-SXM`): the preset with that spec changed.
    if (walked == "cluster.gpu" && next.IsScalar()) {
      YAML::Node changed(YAML::NodeType::Map);
      changed["preset"] = next.Scalar();
      node[keys[i]] = changed;
      next = node[keys[i]];
    }
    if (!next.IsMap()) {
      throw ScenarioError(file, fmt::format("{}: '{}' is not a mapping in this scenario", label, walked),
                          option);
    }
    // A mapping the file shares by an anchor (`training: *t` in two jobs, or
    // merged with `<<`): changed here only, on a copy (helper 113: a
    // --set jobs[1].training.micro_batch changed job 0 too).
    if (reached(root, next) > 1) {
      const YAML::Node copy = YAML::Clone(next);
      node.remove(keys[i]);  // (assigning to the entry would rewrite the shared node itself)
      node[keys[i]] = copy;
      next.reset(node[keys[i]]);  // (rebind: assigning would rewrite the shared node)
    }
    node.reset(next);  // rebind: plain assignment would overwrite the parent's content
  }
  if (const auto open = keys.back().find('['); open != std::string::npos) {
    // A list element whole: a job (jobs[0]=...), or an item of a list value
    // (jobs[0].nodes[0]=...).
    const std::string list = keys.back().substr(0, open);
    throw ScenarioError(
        file,
        keys.size() == 1 && list == "jobs"
            ? fmt::format("{}: '{}' is a job: set one of its keys ({}.nodes, {}.training.micro_batch, ...)",
                          label, keys.back(), keys.back(), keys.back())
            : fmt::format("{}: '{}' is an item of a list: set the list whole ({}=[...])", label, keys.back(),
                          o.path.substr(0, o.path.size() - (keys.back().size() - open))),
        option);
  }
  YAML::Node value;
  try {
    value = YAML::Load(o.value);
  } catch (const YAML::ParserException& e) {
    throw ScenarioError(file, fmt::format("{}: malformed value '{}': {}", label, o.value, e.msg), option);
  }
  check_keys(value, fmt::format("{} ({})", file, option), o.path, 0, option);
  node[keys.back()] = value;
}

}  // namespace


Scenario parse_root(YAML::Node root, const std::string& file, const std::map<std::string, std::string>& overridden);
Scenario parse_with_jobs(YAML::Node root, const std::string& file,
                         const std::map<std::string, std::string>& overridden,
                         const std::set<std::string>& file_job_sections);

namespace {

/// The deepest part of the key path `path` ("a.b[2].c": names and
/// indices) that the file as read (overrides applied) writes, and its mark;
/// nullopt where it writes none of it. `whole`, if given, is set to whether
/// the file writes all of it; `created`, if given, to the part of the path
/// whose node has no mark (a `--set` made it), or left empty.
std::optional<YAML::Mark> locate_path(const YAML::Node& root, const std::string& path, bool* whole = nullptr,
                                      std::string* created = nullptr) {
  YAML::Node at = root;
  YAML::Mark mark = YAML::Mark::null_mark();
  bool any = false;
  std::size_t i = 0;
  while (i < path.size()) {
    YAML::Node next;
    if (path[i] == '[') {
      const std::size_t close = path.find(']', i);
      const std::optional<std::int64_t> k =
          close == std::string::npos ? std::nullopt : decimal(path.substr(i + 1, close - i - 1));
      const YAML::Node& seq = at;
      if (!k || !seq.IsSequence() || *k < 0 || static_cast<std::size_t>(*k) >= seq.size()) break;
      next.reset(seq[static_cast<std::size_t>(*k)]);
      i = close + 1;
    } else {
      if (path[i] == '.') ++i;
      const std::size_t stop = path.find_first_of(".[", i);
      const std::string key = path.substr(i, stop == std::string::npos ? std::string::npos : stop - i);
      const YAML::Node& map = at;
      if (key.empty() || !map.IsMap() || !map[key]) break;
      next.reset(map[key]);
      i = stop == std::string::npos ? path.size() : stop;
    }
    at.reset(next);
    any = true;
    if (!at.Mark().is_null()) {
      mark = at.Mark();
    } else if (created != nullptr && created->empty()) {
      *created = path.substr(0, i);
    }
  }
  if (whole != nullptr) *whole = i >= path.size();
  if (!any) return std::nullopt;
  return mark;
}

/// Scenario::warning_locations: each warning's leading key path ("cluster.
/// nvlink_bandwidth = ...", "model.layers (36) ...", "stragglers: ...")
/// walked in the file as read (overrides applied) to its deepest part the
/// file writes, and placed as an error at it would be (Section::location).
/// Scenario::key_locations likewise for the keys study::check_work names.
void locate_warnings(Scenario& s, const YAML::Node& root, const std::string& file,
                     const std::map<std::string, std::string>& overridden) {
  if (!root.IsMap()) return;
  const Section top(root, "", file, &overridden);
  for (const std::string& w : s.warnings) {
    std::size_t end = 0;
    while (end < w.size() && (std::isalnum(static_cast<unsigned char>(w[end])) != 0 || w[end] == '_' ||
                              w[end] == '.' || w[end] == '[' || w[end] == ']')) {
      ++end;
    }
    if (end == 0 || end == w.size() || (w[end] != ' ' && w[end] != ':') || w[end - 1] == '.') continue;
    const std::string path = w.substr(0, end);
    std::string created;
    bool whole = false;
    const auto mark = locate_path(root, path, &whole, &created);
    if (!mark) continue;
    // In a part the command line made (--set cluster.gpu.tensor_peak over a
    // preset's name), at the option that made it: the part's mark is its
    // parent's (helper 145: a line of another key).
    s.warning_locations[w] = whole || created.empty()
                                 ? top.location(*mark, path).first
                                 : top.location(YAML::Mark::null_mark(), created, true).first;
  }
  // (helper 145: an iteration too long to simulate named model.layers
  // without the line that wrote it or the --set that set it)
  const auto locate_key = [&](const std::string& path) {
    bool whole = false;
    const auto mark = locate_path(root, path, &whole);
    if (mark && whole) s.key_locations[path] = top.location(*mark, path);  // (a section is no key's place)
  };
  for (const std::string path : study::kWorkKeys) locate_key(path);
  for (const std::string path : study::kRunWarningKeys) locate_key(path);
  for (const std::string path : study::kSimulationKeys) locate_key(path);
}

/// Static routes that crowd the data-parallel rings onto some fabric links
/// (helper 172: dp 3, 5, 7 ran their gradient reductions slower than dp 4,
/// 6, 8 on a fat-tree whose leaves hold two nodes, unexplained): a warning
/// of the scenario, so that run, every sweep point and compare-schedules
/// give it (helper 176: a sweep's dip at 192 nodes went unexplained).
void warn_of_crowded_routes(Scenario& s) {
  if (std::string w = study::crowded_routes_warning(s); !w.empty()) s.warnings.push_back(std::move(w));
}

Scenario parse_text(const std::string& text, const std::string& file, const std::vector<Override>& overrides,
                    bool cluster_only) {
  // A scenario is UTF-8 text (names end up in JSON reports, which must be).
  if (const auto bad = first_invalid_utf8(text)) {
    throw ScenarioError(fmt::format("{}:{}: not valid UTF-8 (byte 0x{:02x}); save the scenario as UTF-8", file,
                                    bad->first, bad->second));
  }
  // The text's lines, for the checks that read it as written.
  const std::vector<std::string> lines = split(text, '\n');
  YAML::Node root;
  try {
    root = YAML::Load(text);
    // A second document would be ignored: say so instead (an empty one after
    // a trailing '---' is harmless). Counted with events, two documents at
    // most: yaml-cpp's LoadAll loops without end on some malformed inputs.
    std::istringstream stream(text);
    YAML::Parser parser(stream);
    DocumentEvents events;
    const bool more = parser.HandleNextDocument(events);
    const int first_nodes = events.nodes;
    if (more && parser.HandleNextDocument(events) && events.nodes > first_nodes) {
      throw ScenarioError(fmt::format("{}:{}:{}: a second YAML document: a scenario is one document (remove the "
                                      "'---' line or split the file)",
                                      file, events.second_at.line + 1, events.second_at.column + 1));
    }
    if ((!root || root.IsNull()) && more && first_nodes == 0 && events.nodes > 0) {
      throw ScenarioError(fmt::format("{}:{}:{}: malformed YAML: the scenario does not start with a mapping",
                                      file, events.second_at.line + 1, events.second_at.column + 1));
    }
  } catch (const YAML::ParserException& e) {
    // A tab in a line's indentation (YAML indents with spaces only) reads as
    // "illegal map value" at the line above it (helper 106): named, with
    // its line, where one comes at or before the line after the error's.
    // A value opening a quote it never closes reads to the file's end: named
    // at the quote (helper 179: "end of map not found" at the last line),
    // unless a tab comes first.
    std::optional<std::pair<int, std::size_t>> unclosed;  // (line, column) of its quote
    for (int n = 0; n < static_cast<int>(lines.size()) && n <= e.mark.line + 1; ++n) {
      const std::string& line = lines[static_cast<std::size_t>(n)];
      const std::size_t indent = line.find_first_not_of(" \t");
      if (indent == std::string::npos || line[indent] == '#') continue;
      const std::size_t tab = line.find('\t');
      if (tab < indent) {
        throw ScenarioError(fmt::format("{}:{}:{}: malformed YAML: {}", file, n + 1, tab + 1,
                                        "a tab in the indentation (YAML indents with spaces only)"));
      }
      std::size_t value = line.find(": ", indent);
      value = value == std::string::npos ? std::string::npos : line.find_first_not_of(' ', value + 1);
      if (!unclosed && n <= e.mark.line && value != std::string::npos &&
          (line[value] == '"' || line[value] == '\'') && !quote_closes(line, value)) {
        unclosed.emplace(n, value);
      }
    }
    if (unclosed) {
      const auto [n, value] = *unclosed;
      throw ScenarioError(
          fmt::format("{}:{}:{}: malformed YAML: a quoted value opened here does not close (a "
                      "missing closing {}?)",
                      file, n + 1, value + 1, lines[static_cast<std::size_t>(n)][value] == '"' ? "\"" : "'"));
    }
    throw ScenarioError(
        fmt::format("{}:{}:{}: malformed YAML: {}", file, e.mark.line + 1, e.mark.column + 1, e.msg));
  }
  check_quotes_close(root, lines, file, "", 0);
  resolve_merge_keys(root, file, 0);
  check_keys(root, file, "", 0);
  if (!root || root.IsNull()) throw ScenarioError(fmt::format("{}: the scenario is empty", file));
  if (!overrides.empty() && !root.IsMap()) throw ScenarioError(fmt::format("{}: the scenario must be a YAML mapping", file));
  std::map<std::string, std::string> overridden;
  // One job's keys after the top level's, whatever the order given: a job
  // section a jobs[i] --set creates starts as the top level's, with every
  // top-level --set in it (helper 82: it held those given before it only).
  std::vector<std::size_t> order;
  for (int jobs_pass = 0; jobs_pass < 2; ++jobs_pass) {
    for (std::size_t j = 0; j < overrides.size(); ++j) {
      if (overrides[j].path.starts_with("jobs[") == (jobs_pass == 1)) order.push_back(j);
    }
  }
  for (std::size_t j = 0; j < overrides.size(); ++j) {
    const Override& o = overrides[j];
    // A key set under one a later --set replaces whole would be dropped
    // without a word (--set cluster.gpu.memory=94GB --set cluster.gpu=H100-SXM).
    for (std::size_t i = 0; i < j; ++i) {
      if (overrides[i].path.rfind(o.path + ".", 0) == 0) {
        const std::string option = o.flag.empty() ? "--set " + o.path : o.flag;
        throw ScenarioError(
            file,
            fmt::format("{} replaces {}, set before it: give {} first", option, overrides[i].path, o.path),
            option);
      }
    }
  }
  // The jobs' own sections after the top-level overrides (a `--set jobs=...`
  // among them) and before the jobs' own: a top-level --set does not reach
  // them; one a --set jobs[i].SECTION.KEY creates is the top level's, with
  // it (helper 84: read from the file, a replaced jobs list was warned of).
  std::set<std::string> file_job_sections;
  bool sections_read = false;
  auto read_job_sections = [&] {
    sections_read = true;
    if (!root.IsMap() || !root["jobs"] || !root["jobs"].IsSequence()) return;
    for (std::size_t k = 0; k < root["jobs"].size(); ++k) {
      for (const char* section : {"model", "training", "parallelism"}) {
        if (root["jobs"][k].IsMap() && root["jobs"][k][section])
          file_job_sections.insert(fmt::format("jobs[{}].{}", k, section));
      }
    }
  };
  for (const std::size_t j : order) {
    const Override& o = overrides[j];
    if (o.path.starts_with("jobs[") && !sections_read) read_job_sections();
    apply_override(root, o, file);
    overridden[o.path] = o.flag.empty() ? "--set " + o.path : o.flag;
  }
  if (!sections_read) read_job_sections();
  if (cluster_only && root.IsMap() && !root["jobs"]) {
    // What runs on the cluster is not used: sections left out get stand-ins
    // (a small GPT, one sequence in fp32, which every GPU runs: a V100's
    // cluster was refused for the stand-in's bf16; no parallelism) so the
    // cluster is read by the same code and rules as any scenario's.
    // Sections written are read.
    if (!root["model"]) root["model"] = YAML::Load("{preset: gpt3-xl}");
    if (!root["training"]) root["training"] = YAML::Load("{micro_batch: 1, seq_len: 2048, dtype: fp32}");
    if (!root["parallelism"]) root["parallelism"] = YAML::Node(YAML::NodeType::Map);
  }

  const auto parse = [&] {
    if (root.IsMap() && root["jobs"]) {
      try {
        return parse_with_jobs(root, file, overridden, file_job_sections);
      } catch (const YAML::Exception& e) {  // a shape the checks above did not foresee
        throw ScenarioError(
            fmt::format("{}:{}:{}: jobs: {}", file, e.mark.line + 1, e.mark.column + 1, e.msg));
      }
    }
    return parse_root(root, file, overridden);
  };
  // The top-level keys first, all of them known, jobs and placement too
  // (helper 175: `job:` was hidden behind a plan error the jobs made moot,
  // and listed neither; `placment:` in a jobs file named no line).
  if (root.IsMap()) {
    Section top(root, "", file, &overridden);
    for (const char* k : {"backend", "calibration", "cluster", "collectives", "failures", "jobs",
                          "mixed_gpus", "model", "name", "node_model", "ns3", "outputs", "parallelism",
                          "placement", "predictor", "stragglers", "training"}) {
      if (top.has(k)) top.mark_used(k);
    }
    top.finish();
  }
  try {
    Scenario s = parse();
    if (!cluster_only && s.jobs.empty()) warn_of_crowded_routes(s);
    locate_warnings(s, root, file, overridden);
    return s;
  } catch (const MissingKeyNearMisses& e) {
    // Each near miss in turn: read again with the required key given its
    // value; the near miss is a typo if that read finds it unknown.
    YAML::Node section = e.section();
    // First all of them at once (several required keys each typed another
    // way, `num_layers` and `hidden_size` for `layers` and `hidden`).
    if (e.near().size() > 1) {
      for (const auto& n : e.near()) section[n.required] = section[n.typed];
      std::optional<ScenarioError> typos;
      try {
        parse();
      } catch (const ScenarioError& again) {
        // The section's first unknown key with the others named after it
        // (finish()): every near miss in one error.
        for (const auto& n : e.near()) {
          if (again.detail().rfind(n.typed_path + ": unknown key", 0) == 0) typos = again;
        }
      }
      for (const auto& n : e.near()) section.remove(n.required);
      if (typos) throw *typos;
    }
    for (const auto& n : e.near()) {
      section[n.required] = section[n.typed];
      bool typo = false;
      std::optional<ScenarioError> other_unknown;
      try {
        parse();
      } catch (const ScenarioError& again) {
        typo = again.detail().rfind(n.typed_path + ": unknown key", 0) == 0;
        // Another key of the same section found unknown first (finish()
        // names them in file order): a real error, and the one to fix
        // first, rather than the missing key it stands before.
        const std::string parent = n.typed_path.substr(0, n.typed_path.rfind('.') + 1);
        const std::string& d = again.detail();
        if (!typo && d.rfind(parent, 0) == 0 && d.find(": unknown key") != std::string::npos &&
            d.find('.', parent.size()) > d.find(':')) {
          other_unknown = again;
        }
      }
      section.remove(n.required);
      if (typo) throw n.typo;
      if (other_unknown) throw *other_unknown;
    }
    throw ScenarioError(e);  // the missing key, as such
  }
}

}  // namespace

Scenario parse_scenario(const std::string& text, const std::string& file,
                        const std::vector<Override>& overrides) {
  return parse_text(text, file, overrides, false);
}

Scenario parse_cluster_scenario(const std::string& text, const std::string& file,
                                const std::vector<Override>& overrides) {
  return parse_text(text, file, overrides, true);
}

namespace {

[[noreturn]] void fail_node(const std::string& file, const YAML::Node& at, const std::string& path,
                            const std::string& msg) {
  const YAML::Mark m = at.Mark();
  throw ScenarioError(fmt::format("{}:{}:{}", file, m.line + 1, m.column + 1), fmt::format("{}: {}", path, msg));
}

int node_int(const std::string& file, const YAML::Node& v, const std::string& path, int lo, int hi) {
  const std::optional<std::int64_t> x = v.IsScalar() ? decimal(v.Scalar()) : std::nullopt;
  if (!x) fail_node(file, v, path, fmt::format("expected an integer in {}..{}", lo, hi));
  if (*x < lo || *x > hi) fail_node(file, v, path, fmt::format("{} is out of range {}..{}", *x, lo, hi));
  return static_cast<int>(*x);
}

/// A new mapping sharing `m`'s values (so their marks, for messages) but
/// for the keys in `skip`: changing its keys leaves `m` alone.
YAML::Node shallow(const YAML::Node& m, std::initializer_list<std::string_view> skip = {}) {
  YAML::Node out(YAML::NodeType::Map);
  for (const auto& kv : m) {
    const std::string key = kv.first.Scalar();
    if (std::find(skip.begin(), skip.end(), key) != skip.end()) continue;
    out[key] = kv.second;
  }
  return out;
}

}  // namespace

Scenario parse_with_jobs(YAML::Node root, const std::string& file,
                         const std::map<std::string, std::string>& overridden,
                         const std::set<std::string>& file_job_sections) {
  const YAML::Node jobs = root["jobs"];
  // (as `--set jobs=...` where that wrote it: helper 127, a bogus 1:1)
  const Section placement_error(root, "", file, &overridden);  // errors as `--set` or file:line:column
  if (!jobs.IsSequence() || jobs.size() == 0) {
    placement_error.fail_at(jobs.Mark(), "jobs", "expected a non-empty list of jobs");
  }
  if (!root["cluster"] || !root["cluster"].IsMap() || !root["cluster"]["nodes"]) {
    throw ScenarioError(fmt::format("{}: cluster.nodes: missing required key", file));
  }
  const int cluster_nodes = node_int(file, root["cluster"]["nodes"], "cluster.nodes", 1, 1 << 30);
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    if (!jobs[j].IsMap()) {
      fail_node(file, jobs[j], fmt::format("jobs[{}]", j),
                "expected a mapping (name, nodes, model, training, parallelism)");
    }
  }
  // `placement: packed | spread | random`, or a mapping {policy, seed}
  // (seed only with random).
  // A job's errors at its file position, or naming the `--set` that wrote
  // the key (`--set jobs[0].nodes=...`).
  auto fail = [&](const YAML::Node& at, const std::string& path, const std::string& msg) {
    placement_error.fail_at(at.Mark(), path, msg);
  };
  auto job_int = [&](const YAML::Node& v, const std::string& path, int lo, int hi) {
    const std::optional<std::int64_t> x = v.IsScalar() ? decimal(v.Scalar()) : std::nullopt;
    if (!x) fail(v, path, fmt::format("expected an integer in {}..{}", lo, hi));
    if (*x < lo || *x > hi) fail(v, path, fmt::format("{} is out of range {}..{}", *x, lo, hi));
    return static_cast<int>(*x);
  };
  std::string placement = "packed";
  std::uint64_t placement_seed = 1;
  if (const YAML::Node p = root["placement"]) {
    const YAML::Node policy = p.IsMap() ? p["policy"] : p;
    if (p.IsMap()) {
      for (const auto& kv : p) {
        const std::string key = kv.first.Scalar();
        if (key != "policy" && key != "seed") {
          placement_error.fail_at(kv.first.Mark(), "placement." + key,
                                  fmt::format("unknown key{} (placement has policy and seed)",
                                              did_you_mean(key, {"policy", "seed"})));
        }
      }
      if (!policy) {
        placement_error.fail_at(p.Mark(), "placement.policy", "missing required key (packed, spread or random)");
      }
    }
    const std::string where = p.IsMap() ? "placement.policy" : "placement";
    placement = policy.IsScalar() ? policy.Scalar() : std::string();
    if (placement != "packed" && placement != "spread" && placement != "random") {
      placement_error.fail_at(policy.Mark(), where, "expected packed, spread or random");
    }
    if (p.IsMap() && p["seed"]) {
      if (placement != "random") {
        placement_error.fail_at(p["seed"].Mark(), "placement.seed", "a seed is only used by policy random");
      }
      const YAML::Node v = p["seed"];
      const long long x = v.IsScalar() ? decimal(v.Scalar()).value_or(-1) : -1;
      if (x < 0 || x > 4294967295LL) {
        placement_error.fail_at(v.Mark(), "placement.seed", "expected an integer in 0..4294967295");
      }
      placement_seed = static_cast<std::uint64_t>(x);
    }
  }
  // The cluster and every shared section, validated for the whole cluster
  // with a stand-in plan (one data-parallel rank per GPU).
  YAML::Node base = shallow(root, {"jobs", "placement"});
  auto section_of = [&](const YAML::Node& job, const char* key) -> YAML::Node {
    if (job[key]) return job[key];
    if (root[key]) return root[key];
    throw ScenarioError(fmt::format("{}:{}:{}: jobs: a job needs `{}` (in the job or at the top level)", file,
                                    job.Mark().line + 1, job.Mark().column + 1, key));
  };
  {
    YAML::Node stand_in = shallow(base);
    stand_in["model"] = section_of(jobs[0], "model");
    stand_in["training"] = shallow(section_of(jobs[0], "training"), {"global_batch", "micro_batches"});
    YAML::Node plan;
    plan["tp"] = 1;
    plan["pp"] = 1;
    stand_in["parallelism"] = plan;
    // (parsed below, after the jobs, so that their errors come first)
    base = stand_in;
  }
  std::vector<Job> parsed;
  std::vector<int> owner(static_cast<std::size_t>(cluster_nodes), -1);
  std::vector<int> counts;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const YAML::Node job = jobs[j];
    const std::string where = fmt::format("jobs[{}]", j);
    if (!job.IsMap()) fail(job, where, "expected a mapping (name, nodes, model, training, parallelism)");
    for (const auto& kv : job) {
      const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : std::string("?");
      if (key != "name" && key != "nodes" && key != "model" && key != "training" && key != "parallelism") {
        fail(kv.first, fmt::format("{}.{}", where, key),
             fmt::format("unknown key{} (a job has name, nodes, model, training, parallelism)",
                         did_you_mean(key, {"name", "nodes", "model", "training", "parallelism"})));
      }
    }
    Job out;
    out.name = job["name"] && job["name"].IsScalar() ? job["name"].Scalar() : fmt::format("job{}", j);
    // The report names each job's rows by its name: two alike read as one.
    for (std::size_t k = 0; k < parsed.size(); ++k) {
      if (parsed[k].name == out.name) {
        fail(job["name"] ? job["name"] : job, where + ".name",
             fmt::format("'{}' is also jobs[{}]'s name (each job needs its own)", out.name, k));
      }
    }
    if (!job["nodes"]) fail(job, where + ".nodes", "missing required key (a count or a list of nodes)");
    const YAML::Node nodes = job["nodes"];
    int count = 0;
    if (nodes.IsSequence()) {
      for (std::size_t k = 0; k < nodes.size(); ++k) {
        const int n = job_int(nodes[k], fmt::format("{}.nodes[{}]", where, k), 0, cluster_nodes - 1);
        auto& o = owner[static_cast<std::size_t>(n)];
        if (o >= 0) {
          fail(nodes[k], fmt::format("{}.nodes[{}]", where, k),
               fmt::format("node {} is already {}'s", n,
                           o == static_cast<int>(j) ? "this job" : parsed[static_cast<std::size_t>(o)].name));
        }
        o = static_cast<int>(j);
        out.nodes.push_back(n);
      }
      count = static_cast<int>(out.nodes.size());
      if (count == 0) fail(nodes, where + ".nodes", "an empty list");
    } else {
      count = job_int(nodes, where + ".nodes", 1, cluster_nodes);
    }
    counts.push_back(count);
    YAML::Node own = shallow(base, {"model", "training", "parallelism", "stragglers", "mixed_gpus"});
    own["model"] = section_of(job, "model");
    own["training"] = section_of(job, "training");
    own["parallelism"] = section_of(job, "parallelism");
    own["cluster"] = shallow(root["cluster"], {"nodes"});
    own["cluster"]["nodes"] = count;
    // This job's `--set jobs[j].KEY` are its KEY's.
    std::map<std::string, std::string> own_overridden = overridden;
    for (const auto& [path, flag] : overridden) {
      if (path.rfind(where + ".", 0) == 0) own_overridden[path.substr(where.size() + 1)] = flag;
    }
    try {
      out.scenario = parse_root(own, file, own_overridden);
    } catch (const ScenarioError& e) {
      throw ScenarioError(fmt::format("{} (job {} '{}', on {} node{}: its cluster.nodes)", e.what(), j,
                                      out.name, count, count == 1 ? "" : "s"));
    }
    out.scenario.name = out.name;
    std::erase(out.scenario.warnings, std::string(kPriceWithoutTokens));
    parsed.push_back(std::move(out));
  }
  // Nodes for the jobs given as counts: packed (consecutive free nodes, in
  // job order) or spread (round-robin over the free nodes).
  int needed = 0;
  for (std::size_t j = 0; j < parsed.size(); ++j) needed += parsed[j].nodes.empty() ? counts[j] : 0;
  int free_nodes = 0;
  for (int o : owner) free_nodes += o < 0 ? 1 : 0;
  if (needed > free_nodes) {
    int total = 0;
    for (int c : counts) total += c;
    fail(jobs, "jobs",
         fmt::format("the jobs need {} nodes ({} placed by count, {} free of cluster.nodes = {})", total,
                     needed, free_nodes, cluster_nodes));
  }
  if (placement == "packed") {
    int next = 0;
    for (std::size_t j = 0; j < parsed.size(); ++j) {
      if (!parsed[j].nodes.empty()) continue;
      while (static_cast<int>(parsed[j].nodes.size()) < counts[j]) {
        while (owner[static_cast<std::size_t>(next)] >= 0) ++next;
        owner[static_cast<std::size_t>(next)] = static_cast<int>(j);
        parsed[j].nodes.push_back(next);
      }
    }
  } else if (placement == "random") {
    std::vector<int> free_list;
    for (int n = 0; n < cluster_nodes; ++n) {
      if (owner[static_cast<std::size_t>(n)] < 0) free_list.push_back(n);
    }
    std::vector<int> by_count;
    for (std::size_t j = 0; j < parsed.size(); ++j) by_count.push_back(parsed[j].nodes.empty() ? counts[j] : 0);
    auto dealt = study::random_placement(std::move(free_list), by_count, placement_seed);
    for (std::size_t j = 0; j < parsed.size(); ++j) {
      if (parsed[j].nodes.empty()) parsed[j].nodes = std::move(dealt[j]);
    }
  } else {
    // Round-robin: each job placed by count in turn takes the next free node.
    int left = needed;
    std::size_t j = 0;
    int next = 0;
    while (left > 0) {
      while (!jobs[j]["nodes"].IsScalar() || static_cast<int>(parsed[j].nodes.size()) >= counts[j]) {
        j = (j + 1) % parsed.size();
      }
      while (owner[static_cast<std::size_t>(next)] >= 0) ++next;
      owner[static_cast<std::size_t>(next)] = static_cast<int>(j);
      parsed[j].nodes.push_back(next);
      --left;
      j = (j + 1) % parsed.size();
    }
  }
  Scenario s = parse_root(base, file, overridden);
  if (s.mixed_gpus) {
    // (at its line, as the outputs below: helper 127, it named the file alone)
    placement_error.fail_at(root["mixed_gpus"] ? placement_error.key_mark("mixed_gpus") : root.Mark(),
                            "mixed_gpus", "not available with jobs (each job runs on the cluster's gpu)");
  }
  // Outputs tessera run cannot write for several jobs (as --trace, --links).
  for (const char* key : {"trace", "links", "trace_ranks", "trace_micro_batches", "trace_transfers"}) {
    if (root["outputs"] && root["outputs"].IsMap() && root["outputs"][key]) {
      placement_error.fail_at(root["outputs"][key].Mark(), fmt::format("outputs.{}", key),
                              "not available for a scenario with jobs (outputs.json is)");
    }
  }
  // Named stragglers (nodes, ranks) on nodes no job runs on slow nothing:
  // most likely an index meant for a job's node (random_sigma scales every
  // GPU, the idle ones too: not worth a word).
  if (!s.compute_scale.empty() && !(root["stragglers"].IsMap() && root["stragglers"]["random_sigma"])) {
    std::vector<bool> used(static_cast<std::size_t>(cluster_nodes), false);
    for (const Job& j : parsed) {
      for (int n : j.nodes) used[static_cast<std::size_t>(n)] = true;
    }
    std::vector<int> idle;
    std::vector<std::string> idle_ranks;  // "31 (node 3)"
    for (int n = 0; n < cluster_nodes; ++n) {
      if (used[static_cast<std::size_t>(n)]) continue;
      bool any = false;
      for (int k = 0; k < s.cluster.gpus_per_node; ++k) {
        const std::size_t r = flat_index(n, s.cluster.gpus_per_node, k);
        if (s.compute_scale[r] == 1.0) continue;
        any = true;
        idle_ranks.push_back(fmt::format("{} (node {})", r, n));
      }
      if (any) idle.push_back(n);
    }
    // Named as the user gave them: ranks where only ranks were listed
    // (helper 127: `ranks: 31` was warned about as node 3).
    const bool by_rank =
        root["stragglers"].IsMap() && root["stragglers"]["ranks"] && !root["stragglers"]["nodes"];
    if (!idle.empty() && by_rank) {
      s.warnings.push_back(fmt::format(
          "stragglers: rank{} {} run{} no job: {} slowdown changes nothing (rank and node indices are the "
          "cluster's)",
          idle_ranks.size() == 1 ? "" : "s", fmt::join(idle_ranks, ", "), idle_ranks.size() == 1 ? "s" : "",
          idle_ranks.size() == 1 ? "its" : "their"));
    } else if (!idle.empty()) {
      s.warnings.push_back(fmt::format(
          "stragglers: node{} {} run{} no job: {} slowdown changes nothing (node indices are the cluster's)",
          idle.size() == 1 ? "" : "s", fmt::join(idle, ", "), idle.size() == 1 ? "s" : "",
          idle.size() == 1 ? "its" : "their"));
    }
  }
  // A top-level `--set model|training|parallelism.KEY` does not reach a job
  // with a section of that name of its own (helper 81: silently).
  for (const auto& [path, flag] : overridden) {
    const std::string section = path.substr(0, path.find('.'));
    if (section != "model" && section != "training" && section != "parallelism") continue;
    // (training.tokens does nothing in a jobs scenario, said below: pointing
    // to jobs[i].training.tokens led nowhere, helper 111)
    if (path == "training.tokens") continue;
    std::vector<std::string> shadowed;
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      // (not where the job's own key is set too: what the warning advises)
      if (file_job_sections.count(fmt::format("jobs[{}].{}", j, section)) != 0U &&
          overridden.count(fmt::format("jobs[{}].{}", j, path)) == 0U)
        shadowed.push_back(fmt::format("jobs[{}] ({})", j, parsed[j].name));
    }
    if (shadowed.empty()) continue;
    s.warnings.push_back(
        fmt::format("{}: {} {} a {} section of {} own, which this setting does not change (set "
                    "jobs[i].{} for a job's own)",
                    flag, fmt::join(shadowed, ", "), shadowed.size() == 1 ? "has" : "have", section,
                    shadowed.size() == 1 ? "its" : "their", path));
  }
  if (s.train_tokens > 0 ||
      std::any_of(parsed.begin(), parsed.end(), [](const Job& j) { return j.scenario.train_tokens > 0; })) {
    s.warnings.push_back(
        "training.tokens: a scenario with jobs gives no training run "
        "(run a job alone for its days and cost)");
  }
  s.jobs = std::move(parsed);
  s.placement = placement;
  s.placement_seed = placement == "random" ? placement_seed : 0;
  s.name = root["name"] && root["name"].IsScalar() ? root["name"].Scalar() : "unnamed";
  return s;
}

/// A switch-to-switch link's latency when none is given: a switch traversal
/// and a few metres of cable, as the shipped scenarios.
constexpr Time kSwitchLinkLatency = Time::from_ns(600);

/// A link latency above which a scenario is warned about: links take
/// microseconds (a millisecond is a unit slip).
constexpr Time kSlipLatency = Time::from_us(100);

/// The warning for a link latency of `path` above kSlipLatency, else empty.
std::string latency_slip(const std::string& path, Time t) {
  if (t <= kSlipLatency) return {};
  return fmt::format("{} = {:g} us: a link's latency is a few microseconds at most (a unit slip, ms for us?)",
                     path, t.us());
}

/// A switch-to-switch link's latency: the key if given (warned about above
/// kSlipLatency), else kSwitchLinkLatency.
/// The warning for a cable rate no GPU cluster has (`what`: "HCA port",
/// "switch cable"), or empty: above 800 Gb/s bytes for bits, below 10 Gb/s
/// Mbps for Gbps.
std::string bandwidth_slip(const std::string& path, Bandwidth bw, std::string_view what) {
  const double gbps = static_cast<double>(bw.bps()) * 1e-9;
  if (bw > parse_bandwidth("800Gbps")) {
    return fmt::format(
        "{} = {:g} Gb/s: one {} runs at 800 Gb/s at most today (bytes for bits, GB/s for Gbps?)", path, gbps,
        what);
  }
  if (bw < parse_bandwidth("10Gbps")) {
    return fmt::format("{} = {:g} Gb/s: a GPU cluster's {} runs at 10 Gb/s or more (Mbps for Gbps?)", path,
                       gbps, what);
  }
  return {};
}

Time fabric_latency(Section& f, const char* key, Scenario& s) {
  if (!f.has(key)) return kSwitchLinkLatency;
  const Time t = f.unit(key, parse_time);
  if (std::string w = latency_slip(f.key_path(key), t); !w.empty()) s.warnings.push_back(std::move(w));
  return t;
}

/// cluster.nvlink_bandwidth when the scenario leaves it out: the GPU preset's
/// NVLink per direction into an NVSwitch. An inline GPU, a preset without
/// one (H100-PCIe, MI300X) or an NVLink mesh (whose bandwidth is per link)
/// has no default: the same error as any missing required key, saying why.
Bandwidth default_nvlink_bandwidth(Section& c, topology::NodeFabric fabric) {
  const std::optional<std::string> preset_name = gpu_preset_key(c.node()["gpu"]);
  const std::optional<Bandwidth> preset =
      preset_name ? node_model::preset_nvlink_bandwidth(*preset_name) : std::nullopt;
  std::string why;
  if (fabric != topology::NodeFabric::NvSwitch) {
    why = "an nvlink-mesh node gives no default (bandwidth per link)";
  } else if (!preset_name) {
    why = "an inline GPU has no default";
  } else if (!preset) {
    const node_model::GpuSpec* named = node_model::find_gpu_preset(*preset_name);
    why = fmt::format(
        "GPU preset {} has no NVSwitch NVLink to default to: give each GPU's bandwidth to the others per "
        "direction, or with cluster.node_fabric: nvlink-mesh each link's",
        named != nullptr ? named->name : *preset_name);
  }
  if (!why.empty()) {
    c.fail_missing({"nvlink_bandwidth"}, c.key_path("nvlink_bandwidth"),
                   "missing required key (" + why + ")");
  }
  return *preset;
}

/// cluster.fabric left out of a one-node cluster: its HCAs on one leaf
/// switch at their own rate. No traffic leaves the node, so the choice
/// changes no forecast; an NVLink mesh, which the leaf-spine builder does
/// not take, gets the smallest two-tier fat-tree that holds its HCAs.
void one_node_fabric(Scenario& s, const topology::NodeSpec& node, const topology::LinkSpec& host) {
  auto& cl = s.cluster;
  s.fabric_written = false;
  if (node.fabric == topology::NodeFabric::NvSwitch) {
    s.fabric = FabricKind::LeafSpine;
    cl.hosts_per_leaf = cl.hcas_per_node;
    cl.spines = 1;
    cl.spine_bandwidth = cl.nic_bandwidth;
    cl.spine_latency = kSwitchLinkLatency;
  } else {
    s.fabric = FabricKind::FatTree;
    auto& ft = s.fat_tree;
    ft.nodes = cl.nodes;
    ft.node = node;
    ft.host = host;
    ft.tiers = 2;
    ft.oversubscription = 1;
    ft.leaf_spine = {cl.nic_bandwidth, kSwitchLinkLatency};
    ft.k = 4;
    while (topology::host_capacity(ft) < cl.hcas_per_node) ft.k += 2;
  }
}

/// A written `tiers` other than auto: 2 or 3, else an error saying what it
/// may be (helper 176: `Auto` got "expected a whole number").
int written_tiers(Section& f, const YAML::Node& at, const char* what) {
  const auto letter = [](char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; };
  const bool word = at.IsScalar() && std::any_of(at.Scalar().begin(), at.Scalar().end(), letter);
  const int tiers = word ? 0 : f.positive_int32("tiers");
  if (tiers != 2 && tiers != 3) {
    f.fail_at(at.Mark(), f.key_path("tiers"),
              fmt::format("{} has 2 or 3 tiers, or tiers: auto (got {})", what,
                          word ? fmt::format("'{}'", at.Scalar()) : std::to_string(tiers)));
  }
  return tiers;
}

/// The capacity error's note on a tree `tiers: auto` grew to 3 tiers.
std::string most_auto_builds(const Scenario& s) {
  return s.fabric_tiers_default ? " (the most tiers: auto, the default, builds)"
                                : " (the most tiers: auto builds)";
}

/// cluster.fabric: the fabric between the nodes, by its `type`.
void read_fabric(Section& c, Scenario& s, const topology::NodeSpec& node, const topology::LinkSpec& host) {
  auto& cl = s.cluster;
  Section f = c.child("fabric");
  const YAML::Node type_at = f.need("type");
  const std::string type = f.scalar("type");
  const std::int64_t hcas = static_cast<std::int64_t>(cl.nodes) * cl.hcas_per_node;
  auto check_capacity = [&](std::int64_t capacity, const std::string& what, std::string_view hint,
                            const char* key = "k") {
    if (capacity < hcas) {
      f.fail_at(f.node()[key].Mark(), f.key_path(key),
                cl.hcas_per_node < cl.gpus_per_node
                    ? fmt::format("{} attaches {} HCAs, but the cluster has {} (cluster.nodes x "
                                  "cluster.hcas_per_node = {} x {}){}",
                                  what, capacity, hcas, cl.nodes, cl.hcas_per_node, hint)
                    : fmt::format("{} attaches {} HCAs, but the cluster has {} (one per GPU: cluster.nodes x "
                                  "cluster.gpus_per_node = {} x {}){}",
                                  what, capacity, hcas, cl.nodes, cl.gpus_per_node, hint));
    }
  };
  // What fat-tree and rail-optimized specs share, read in the same key order
  // as before: the node and HCAs and `k`, then (after a fat-tree's tiers and
  // pods) the oversubscription and the leaf-spine links; last the check that
  // the tree holds the cluster's HCAs and is small enough to build.
  auto tree_nodes = [&](auto& spec) {
    spec.nodes = cl.nodes;
    spec.node = node;
    spec.host = host;
    spec.k = f.positive_int32("k");
  };
  auto tree_links = [&](auto& spec) {
    spec.oversubscription = f.has("oversubscription") ? f.positive_int32("oversubscription") : 1;
    spec.leaf_spine = {f.unit("spine_bandwidth", parse_bandwidth), fabric_latency(f, "spine_latency", s)};
    // A leaf's ports split into host ports and up-links (r + 1 divides k):
    // checked here, at the key it names, before `tiers: auto` sizes the tree.
    checked_keys(f, f.key_path("k"), {"oversubscription", "k"}, [&] { (void)topology::host_capacity(spec); });
  };
  // The core keys of a tree built with 2 tiers: checked (a sweep over tiers
  // shares them) and returned, to be said to do nothing.
  auto idle_core_keys = [&] {
    std::vector<std::string> idle;
    if (f.has("core_bandwidth")) {
      (void)f.unit("core_bandwidth", parse_bandwidth);
      idle.push_back(f.key_path("core_bandwidth"));
    }
    if (f.has("core_latency")) {
      (void)fabric_latency(f, "core_latency", s);
      idle.push_back(f.key_path("core_latency"));
    }
    return idle;
  };
  auto check_tree = [&](const auto& spec, const std::string& what, std::string_view hint = {},
                        const char* key = "k") {
    checked(f, f.node()[key], f.key_path(key), [&] {
      check_capacity(topology::host_capacity(spec), what, hint, key);
      topology::check_size(spec);
      return 0;
    });
  };
  // A leaf that holds no whole number of nodes (nor a node a whole number
  // of leaves) splits nodes across leaves: warned about, as real clusters
  // cable whole nodes to a leaf and the routing's balance assumes it.
  const auto straddle_warning = [&](int per_leaf, const char* key, const std::string& what,
                                    const std::string& fix) {
    const int per_node = cl.hcas_per_node;
    if (hcas <= per_leaf || per_leaf % per_node == 0 || per_node % per_leaf == 0) return;
    s.warnings.push_back(fmt::format(
        "{} = {}: {}'s leaves hold {} HCAs each, not a whole number of nodes ({} HCAs each), so nodes "
        "straddle two leaves and destination-mod-k routing sends some of their flows over the same "
        "up-links (a collective across nodes can run at half its bus bandwidth; docs/topology.md, "
        "Limitations); {}",
        f.key_path(key), f.scalar(key), what, per_leaf, per_node, fix));
  };
  // Keys of another fabric type, left behind when `type` changed: one error
  // naming them with the keys this type needs, not a missing-key error now
  // and an unknown-key error on the next run (helper 173).
  const auto other_type_keys = [&](std::initializer_list<const char*> theirs, const char* their_type,
                                   const std::string& ours) {
    std::vector<std::string> left;
    for (const char* k : theirs) {
      if (f.node()[k]) left.emplace_back(k);
    }
    if (left.empty()) return;
    f.fail_at(f.key_mark(left.front()), f.path(),
              fmt::format("{} {} {}'s key{}, not a {} fabric's: a {} fabric takes {}", fmt::join(left, ", "),
                          left.size() == 1 ? "is a" : "are a", their_type, left.size() == 1 ? "" : "s", type,
                          type, ours));
  };
  if (type == "leaf-spine") {
    other_type_keys({"k", "tiers", "core_bandwidth", "core_latency", "oversubscription"},
                    "fat-tree or rail-optimized fabric", "hosts_per_leaf, spines and spine_bandwidth");
  } else if (type == "fat-tree" || type == "rail-optimized") {
    other_type_keys({"hosts_per_leaf", "spines"}, "leaf-spine fabric",
                    "k and spine_bandwidth (tiers: 2, 3 or auto, the default)");
  }
  if (type == "leaf-spine") {
    s.fabric = FabricKind::LeafSpine;
    if (node.fabric != topology::NodeFabric::NvSwitch) {
      c.fail_at(c.node()["node_fabric"].Mark(), c.key_path("node_fabric"),
                "the leaf-spine fabric models NVSwitch nodes only (use fat-tree or rail-optimized for "
                "nvlink-mesh)");
    }
    f.require({"hosts_per_leaf", "spines", "spine_bandwidth"});
    cl.hosts_per_leaf = f.positive_int32("hosts_per_leaf");
    cl.spines = f.positive_int32("spines");
    cl.spine_bandwidth = f.unit("spine_bandwidth", parse_bandwidth);
    cl.spine_latency = fabric_latency(f, "spine_latency", s);
    checked(f, f.node()["spines"], f.key_path("spines"), [&] {
      topology::check_size(cl);
      return 0;
    });
    straddle_warning(cl.hosts_per_leaf, "hosts_per_leaf", "the leaf-spine fabric",
                     "use a hosts_per_leaf that is a multiple of the node's HCAs or divides them");
  } else if (type == "fat-tree") {
    s.fabric = FabricKind::FatTree;
    auto& ft = s.fat_tree;
    f.require({"k", "spine_bandwidth"});
    tree_nodes(ft);
    // `tiers: auto` (the default): the fewest tiers of these switches that
    // hold the cluster's HCAs (2, else 3), so a sweep over nodes grows the
    // tree as a real cluster of the same switches would; the core links
    // default to the spine links' bandwidth. (Helper 173: tiers was required
    // here and 2 by default on a rail-optimized fabric.)
    const YAML::Node tiers_at = f.has("tiers") ? f.need("tiers") : YAML::Node();
    s.fabric_tiers_default = !f.has("tiers");
    s.fabric_tiers_auto = s.fabric_tiers_default || (tiers_at.IsScalar() && tiers_at.Scalar() == "auto");
    ft.tiers = s.fabric_tiers_auto ? 2 : written_tiers(f, tiers_at, "a fat-tree");
    ft.pods = f.has("pods") ? f.positive_int32("pods") : 0;
    // (helper 126: past k the library's error named no file or line)
    if (ft.pods > ft.k) {
      f.fail_at(f.node()["pods"].Mark(), f.key_path("pods"),
                fmt::format("a 3-tier fat-tree of {}-port switches has at most k = {} pods (got {})", ft.k,
                            ft.k, ft.pods));
    }
    tree_links(ft);
    if (s.fabric_tiers_auto) {
      if (!s.fabric_tiers_default) f.mark_used("tiers");
      if (topology::host_capacity(ft) < hcas) ft.tiers = 3;
      if (ft.tiers == 3) {
        ft.spine_core = {
            f.has("core_bandwidth") ? f.unit("core_bandwidth", parse_bandwidth) : ft.leaf_spine.bandwidth,
            fabric_latency(f, "core_latency", s)};
      } else {
        // The core keys a larger point of a sweep would use: checked, not used.
        if (f.has("core_bandwidth")) (void)f.unit("core_bandwidth", parse_bandwidth);
        (void)fabric_latency(f, "core_latency", s);
      }
    } else if (ft.tiers == 3) {
      // (helper 176: tiers: 3 required core_bandwidth where auto's 3 tiers
      // took the spine links'; the same default now)
      ft.spine_core = {
          f.has("core_bandwidth") ? f.unit("core_bandwidth", parse_bandwidth) : ft.leaf_spine.bandwidth,
          fabric_latency(f, "core_latency", s)};
    } else {
      // A 2-tier tree has no core links: its core keys are checked (a
      // sweep over tiers: 2, 3 shares them) and said to do nothing here.
      std::vector<std::string> idle;
      if (f.has("pods")) idle.push_back(f.key_path("pods"));  // (helper 126: silently)
      for (std::string& key : idle_core_keys()) idle.push_back(std::move(key));
      if (!idle.empty()) {
        s.warnings.push_back(fmt::format(
            "{} {} no effect on a 2-tier fat-tree (core links and pods exist with tiers: 3, "
            "or tiers: auto past {} HCAs)",
            fmt::join(idle, " and "), idle.size() == 1 ? "has" : "have", topology::host_capacity(ft)));
      }
    }
    // Fewer pods than k limit a 3-tier tree's capacity: the error names
    // them (helper 126: it blamed k).
    const bool few_pods = ft.tiers == 3 && ft.pods > 0 && ft.pods < ft.k;
    check_tree(ft,
               fmt::format("a k={} {}-tier fat-tree{}{}", ft.k, ft.tiers,
                           few_pods ? fmt::format(" of {} pod{}", ft.pods, ft.pods == 1 ? "" : "s") : "",
                           s.fabric_tiers_auto && ft.tiers == 3 ? most_auto_builds(s) : ""),
               ft.tiers == 2 ? "; for more HCAs a larger k, or tiers: 3 (or auto)"
               : few_pods    ? fmt::format("; for more HCAs more pods (up to k = {}) or a larger k", ft.k)
                             : "; for more HCAs a larger k",
               few_pods ? "pods" : "k");
    // Nodes straddling leaves (helper 154: on a k=40 tree of 8-GPU nodes,
    // 20 HCAs per leaf, destination-mod-k routing sent two nodes' halves
    // over the same 4 up-links of a leaf while 16 stood idle, and some
    // stages' data-parallel all-reduce ran at half the bus bandwidth).
    straddle_warning(
        topology::host_ports_per_leaf(ft), "k", fmt::format("a k={} fat-tree", ft.k),
        "use a k whose leaves hold whole nodes or whose nodes span whole leaves (k/2 host ports per leaf, "
        "fewer with oversubscription)");
  } else if (type == "rail-optimized") {
    s.fabric = FabricKind::RailOptimized;
    auto& ro = s.rail;
    f.require({"k", "spine_bandwidth"});
    tree_nodes(ro);
    // `tiers`: 2, 3 (a plane per rail, joined by cores: NVIDIA's SuperPOD
    // layout), or auto (the default: the fewest that hold the HCAs, as a
    // fat-tree's).
    const YAML::Node tiers_at = f.has("tiers") ? f.need("tiers") : YAML::Node();
    s.fabric_tiers_default = !f.has("tiers");
    s.fabric_tiers_auto = s.fabric_tiers_default || (tiers_at.IsScalar() && tiers_at.Scalar() == "auto");
    ro.tiers = s.fabric_tiers_auto ? 2 : written_tiers(f, tiers_at, "a rail-optimized fabric");
    tree_links(ro);
    if (s.fabric_tiers_auto) {
      if (!s.fabric_tiers_default) f.mark_used("tiers");
      if (topology::host_capacity(ro) < hcas) ro.tiers = 3;
    }
    if (ro.tiers == 3) {
      ro.spine_core = {
          !f.has("core_bandwidth") ? ro.leaf_spine.bandwidth : f.unit("core_bandwidth", parse_bandwidth),
          fabric_latency(f, "core_latency", s)};
    } else {
      // Core keys without cores: checked (a sweep over tiers shares them);
      // said to do nothing unless tiers: auto would use them at more nodes.
      const std::vector<std::string> idle = idle_core_keys();
      if (!idle.empty() && !s.fabric_tiers_auto) {
        s.warnings.push_back(fmt::format(
            "{} {} no effect on a 2-tier rail-optimized fabric (core links exist with tiers: 3, or tiers: "
            "auto past {} HCAs)",
            fmt::join(idle, " and "), idle.size() == 1 ? "has" : "have", topology::host_capacity(ro)));
      }
      // One rail group is a leaf per rail (an HCA of each node): with fewer
      // than k leaves' spine ports for them, the fabric holds no HCA at all.
      if (const int rails = ro.node.hca_count(); ro.k < rails) {
        f.fail_at(
            f.node()["k"].Mark(), f.key_path("k"),
            fmt::format("a k={} rail-optimized fabric has at most {} leaves (one per spine port), fewer "
                        "than a node's {} rails (a leaf for each of its HCAs); k must be at least {}, or "
                        "tiers: 3",
                        ro.k, ro.k, rails, rails));
      }
    }
    // Two tiers hold k / rails rail groups, three k/2: past them, a larger
    // k (or a third tier).
    check_tree(
        ro,
        fmt::format("a k={} {}-tier rail-optimized fabric{}", ro.k, ro.tiers,
                    s.fabric_tiers_auto && ro.tiers == 3 ? most_auto_builds(s) : ""),
        ro.tiers == 2 ? "; for more HCAs a larger k, or tiers: 3 (or auto)" : "; for more HCAs a larger k");
  } else {
    f.fail_at(
        type_at.Mark(), f.key_path("type"),
        fmt::format("unknown fabric type '{}' (expected leaf-spine, fat-tree or rail-optimized)", type));
  }
  // How the switches pick among equal-cost up-links: static
  // destination-mod-k tables (what a subnet manager installs; the default)
  // or adaptive (least loaded when a flow starts; NDR fabrics with adaptive
  // routing on), for the flow backend and, unless ns3.adaptive_routing says
  // otherwise, the ns-3 one.
  if (f.has("routing")) {
    const std::string r = f.scalar("routing");
    if (r != "static" && r != "adaptive") {
      f.fail_at(f.node()["routing"].Mark(), f.key_path("routing"),
                fmt::format("expected static or adaptive (got '{}')", r));
    }
    s.fabric_adaptive_routing = r == "adaptive";
  }
  // The switch cables' unit slips, as the HCA's are warned about (helper
  // 108: spine_bandwidth 200Mbps ran 258x slower with no word, 200GB/s made
  // a 2:1 fabric non-blocking).
  for (const char* key : {"spine_bandwidth", "core_bandwidth"}) {
    // Only trees of 3 tiers have core links (leaf-spine knows no core_bandwidth).
    if ((key == std::string_view("core_bandwidth") && s.fabric == FabricKind::LeafSpine) || !f.has(key))
      continue;
    const std::string w = bandwidth_slip(f.key_path(key), f.unit(key, parse_bandwidth), "switch cable");
    if (!w.empty()) s.warnings.push_back(w);
  }
  f.finish();
}

Scenario parse_root(YAML::Node root, const std::string& file, const std::map<std::string, std::string>& overridden) {
  Scenario s;
  s.file = file;
  Section top(root, "", file, &overridden);
  top.require({"cluster", "model", "training", "parallelism"});
  s.name = top.has("name") ? top.scalar("name") : "unnamed";

  {
    Section c = top.child("cluster");
    // A one-node cluster needs no fabric (its GPUs talk over NVLink only);
    // more nodes do, and its absence is named below once the count is known.
    c.require({"nodes", "gpus_per_node", "gpu", "nic_bandwidth"});
    auto& cl = s.cluster;
    cl.nodes = c.positive_int32("nodes");
    cl.gpus_per_node = c.positive_int32("gpus_per_node");
    // GPUs are numbered by int ranks: their count must fit too.
    if (static_cast<std::int64_t>(cl.nodes) * cl.gpus_per_node > std::numeric_limits<int>::max()) {
      c.fail_at(c.node()["nodes"].Mark(), c.key_path("nodes"),
                fmt::format(
                    "cluster.nodes x cluster.gpus_per_node = {} x {} = {} GPUs; at most {} can be simulated",
                    cl.nodes, cl.gpus_per_node, static_cast<std::int64_t>(cl.nodes) * cl.gpus_per_node,
                    std::numeric_limits<int>::max()));
    }
    // One node is one NVLink domain: the largest shipped holds 72 GPUs
    // (GB200 NVL72). More is a cluster's GPU count given as a node's, or a
    // hypothetical machine (helper 145: 512 H100s on one NVSwitch ran
    // silently).
    if (cl.gpus_per_node > 72) {
      s.warnings.push_back(fmt::format(
          "cluster.gpus_per_node = {} GPUs in one NVLink domain, more than any machine built (72, GB200 "
          "NVL72; HGX boards hold 8): the cluster's GPU count is cluster.nodes x gpus_per_node",
          cl.gpus_per_node));
    }
    s.gpu = read_gpu(c, s.warnings);
    // An inline GPU whose peaks no GPU has: a unit slip, most likely.
    if (!c.node()["gpu"].IsScalar()) {
      const auto tf = [](FlopRate r) { return fmt::format("{:g} TFLOP/s", r.per_second() * 1e-12); };
      if (s.gpu.fp32_peak > s.gpu.tensor_peak) {
        s.suspect_gpu_keys.emplace_back("cluster.gpu.fp32_peak");
        s.warnings.push_back(
            fmt::format("cluster.gpu.fp32_peak ({}) is above tensor_peak ({}): on every GPU the "
                        "16-bit tensor cores are the faster (a unit slip?)",
                        tf(s.gpu.fp32_peak), tf(s.gpu.tensor_peak)));
      }
      if (s.gpu.fp8_peak.per_second() > 0 && s.gpu.fp8_peak < s.gpu.tensor_peak) {
        s.suspect_gpu_keys.emplace_back("cluster.gpu.fp8_peak");
        s.warnings.push_back(
            fmt::format("cluster.gpu.fp8_peak ({}) is below tensor_peak ({}): FP8 tensor cores "
                        "run at least the 16-bit rate (a unit slip?)",
                        tf(s.gpu.fp8_peak), tf(s.gpu.tensor_peak)));
      }
      // FP8 runs twice the 16-bit rate on every GPU that has it (Hopper,
      // Blackwell, MI300X); far more is a slip, and FP8 plans would then
      // report an MFU past 100% against the 16-bit peak (helper 132: 9x gave
      // 174.5%).
      if (s.gpu.fp8_peak.per_second() > 2.5 * s.gpu.tensor_peak.per_second()) {
        s.warnings.push_back(fmt::format(
            "cluster.gpu.fp8_peak ({}) is {:.3g}x tensor_peak ({}): FP8 tensor cores run 2x the 16-bit rate "
            "on every GPU that has them (a unit slip?; MFU is counted against tensor_peak, so FP8 plans "
            "could "
            "pass 100%)",
            tf(s.gpu.fp8_peak), s.gpu.fp8_peak.per_second() / s.gpu.tensor_peak.per_second(),
            tf(s.gpu.tensor_peak)));
      }
      // Values below every GPU the node model knows (NeuSight's P4 has the
      // least of most, T4 the least tensor peak) or above 4x the most of the
      // presets: bits for bytes, a prefix off by 1000.
      using Spec = node_model::GpuSpec;
      const auto range = [&](const char* key, double (*get)(const Spec&), double least, const char* least_gpu,
                             const char* unit) {
        const Spec* most = nullptr;
        for (const std::string& name : node_model::gpu_preset_names()) {
          const Spec& g = node_model::gpu_preset(name);
          if (most == nullptr || get(g) > get(*most)) most = &g;
        }
        const double value = get(s.gpu);
        if (value >= least && value <= 4 * get(*most)) return;
        // (the memory's capacity times nothing)
        if (key != std::string_view("memory"))
          s.suspect_gpu_keys.push_back(fmt::format("cluster.gpu.{}", key));
        s.warnings.push_back(fmt::format(
            "cluster.gpu.{} = {:g} {} is {} (a unit slip?)", key, value, unit,
            value < least ? fmt::format("below every GPU's the node model knows ({}: {:.4g} {})", least_gpu,
                                        least, unit)
                          : fmt::format("above 4x every GPU's the node model knows ({}: {})", most->name,
                                        // a preset's memory as its maker gives it (192GiB, not 206.2 GB)
                                        key == std::string_view("memory")
                                            ? maker_size(most->memory)
                                            : fmt::format("{:.4g} {}", get(*most), unit))));
      };
      range(
          "fp32_peak", [](const Spec& g) { return g.fp32_peak.per_second() * 1e-12; }, 5.7, "P4", "TFLOP/s");
      range(
          "tensor_peak", [](const Spec& g) { return g.tensor_peak.per_second() * 1e-12; }, 65, "T4",
          "TFLOP/s");
      range(
          "memory_bandwidth", [](const Spec& g) { return g.memory_bandwidth.bytes_per_second() * 1e-9; }, 192,
          "P4", "GB/s");
      range(
          "l2_cache", [](const Spec& g) { return g.l2_cache.as_double() * 1e-6; }, 2, "P4", "MB");
      range(
          "memory", [](const Spec& g) { return g.memory.as_double() * 1e-9; }, 8, "P4", "GB");
      // The SM count sets the tile model's waves and per-SM rate: 100,000
      // SMs at a fixed peak made the utilization network extrapolate to a
      // 13-day iteration without a word (helper 114).
      range(
          "sms", [](const Spec& g) { return static_cast<double>(g.sms); }, 20, "P4", "SMs");
      // Each key in range, the two together not: FLOPs per byte of memory
      // traffic more than twice any preset's (H100 PCIe: 378) is a
      // memory_bandwidth slip that the range above misses (helper 132:
      // 8000Gbps, 1 TB/s, on a 2,250 TFLOP/s GPU ran 5x slower, no word).
      const auto ridge = [](const Spec& g) {
        return g.tensor_peak.per_second() / std::max(1.0, g.memory_bandwidth.bytes_per_second());
      };
      const Spec* steepest = nullptr;
      for (const std::string& name : node_model::gpu_preset_names()) {
        const Spec& g = node_model::gpu_preset(name);
        if (steepest == nullptr || ridge(g) > ridge(*steepest)) steepest = &g;
      }
      const auto flagged = [&](const char* key) {
        return std::find(s.suspect_gpu_keys.begin(), s.suspect_gpu_keys.end(), key) !=
               s.suspect_gpu_keys.end();
      };
      if (ridge(s.gpu) > 2 * ridge(*steepest) && !flagged("cluster.gpu.memory_bandwidth") &&
          !flagged("cluster.gpu.tensor_peak")) {
        s.suspect_gpu_keys.emplace_back("cluster.gpu.memory_bandwidth");
        s.warnings.push_back(
            fmt::format("cluster.gpu: tensor_peak / memory_bandwidth = {:.0f} FLOP per byte, above twice "
                        "every GPU's the node model knows ({}: {:.0f}): memory_bandwidth {:g} GB/s (a unit "
                        "slip, Gbps for GB/s?)",
                        ridge(s.gpu), steepest->name, ridge(*steepest),
                        s.gpu.memory_bandwidth.bytes_per_second() * 1e-9));
      }
    }
    topology::NodeSpec node;
    node.gpus = cl.gpus_per_node;
    if (c.has("node_fabric")) {
      const YAML::Node v = c.need("node_fabric");
      node.fabric = checked(c, v, c.key_path("node_fabric"),
                            [&] { return topology::parse_node_fabric(c.scalar("node_fabric")); });
    }
    // (rings inside a mesh node spread over its links: docs/collectives.md)
    s.collectives.mesh_node = node.fabric == topology::NodeFabric::NvLinkMesh;
    // Link latencies default to the shipped scenarios' values (docs/scenarios.md);
    // 1us per NVLink link is also what the NVLink collective calibration was fit
    // with (kNvlinkLatency of `validate collectives`).
    cl.nvlink_bandwidth = c.has("nvlink_bandwidth") ? c.unit("nvlink_bandwidth", parse_bandwidth)
                                                    : default_nvlink_bandwidth(c, node.fabric);
    // `--set cluster.gpu=...` on a file that writes the NVLink bandwidth of
    // its own GPU keeps the file's (a key given wins over a preset), which
    // a GPU swap rarely means: said, not changed.
    const std::optional<std::string> preset_name = gpu_preset_key(c.node()["gpu"]);
    // (--set cluster.gpu.preset=B200 swaps the GPU as --set cluster.gpu=B200 does.)
    const bool gpu_swapped =
        overridden.count("cluster.gpu") != 0U || overridden.count("cluster.gpu.preset") != 0U;
    if (gpu_swapped && overridden.count("cluster.nvlink_bandwidth") == 0U && c.has("nvlink_bandwidth") &&
        preset_name) {
      const std::string& gpu = *preset_name;
      const std::optional<Bandwidth> preset = node_model::preset_nvlink_bandwidth(gpu);
      if (preset && *preset != cl.nvlink_bandwidth) {
        const auto gbs = [](Bandwidth b) { return fmt::format("{:g}GB/s", b.bytes_per_second() * 1e-9); };
        s.warnings.push_back(
            fmt::format("cluster.nvlink_bandwidth = {} is the file's, not {}'s {} (--set cluster.gpu keeps a "
                        "bandwidth the "
                        "scenario writes): add --set cluster.nvlink_bandwidth={} for the preset's",
                        gbs(cl.nvlink_bandwidth), gpu, gbs(*preset), gbs(*preset)));
      }
    }
    // A bandwidth under half the GPU's NVLink port, or twice it or more,
    // is a slip as often as a choice: 900Gbps for 900GB/s (bits for bytes),
    // or NVIDIA's both-directions figure for the per-direction one.
    // (Where the GPU is swapped and the bandwidth is the file's, the warning
    // above says so; both set on the command line are checked here: --set
    // cluster.gpu=A100-80GB --set cluster.nvlink_bandwidth=600GB/s ran
    // silently.)
    if (c.has("nvlink_bandwidth") && preset_name &&
        (!gpu_swapped || overridden.count("cluster.nvlink_bandwidth") != 0U)) {
      const std::optional<Bandwidth> preset = node_model::preset_nvlink_bandwidth(*preset_name);
      // A mesh's key is each link's: a GPU has gpus_per_node - 1 of them
      // (helper 111: 100GB/s links of a 4-GPU A100 board, right, were
      // called a unit slip against the GPU's 300GB/s).
      const bool mesh = node.fabric == topology::NodeFabric::NvLinkMesh;
      const double links = mesh ? std::max(1, cl.gpus_per_node - 1) : 1.0;
      const double ratio =
          preset ? links * cl.nvlink_bandwidth.bytes_per_second() / preset->bytes_per_second() : 1.0;
      if (ratio < 0.5 || ratio >= 2.0) {
        const auto gbs = [](Bandwidth b) { return fmt::format("{:g}GB/s", b.bytes_per_second() * 1e-9); };
        s.warnings.push_back(
            mesh ? fmt::format(
                       "cluster.nvlink_bandwidth = {} per mesh link, {} links a GPU, is {:.3g}x {}'s "
                       "NVLink, {} per GPU and direction (bits for bytes, or both directions for one?)",
                       gbs(cl.nvlink_bandwidth), cl.gpus_per_node - 1, ratio, *preset_name, gbs(*preset))
                 : fmt::format(
                       "cluster.nvlink_bandwidth = {} is {:.3g}x {}'s NVLink, {} per GPU and direction "
                       "(bits for bytes, or "
                       "both directions for one?)",
                       gbs(cl.nvlink_bandwidth), ratio, *preset_name, gbs(*preset)));
      }
    }
    cl.nvlink_latency = c.has("nvlink_latency") ? c.unit("nvlink_latency", parse_time) : Time::from_us(1);
    cl.nic_bandwidth = c.unit("nic_bandwidth", parse_bandwidth);
    cl.nic_latency = c.has("nic_latency") ? c.unit("nic_latency", parse_time) : Time::from_us(1);
    // What one GPU costs an hour (any currency): with training.tokens, the
    // reports give the training run's cost.
    if (c.has("price_per_gpu_hour")) s.price_per_gpu_hour = c.number_in("price_per_gpu_hour", 0, 1e9);
    // Link latencies are microseconds or less; a millisecond is a unit slip.
    for (const auto& [key, t] : {std::pair{"cluster.nvlink_latency", cl.nvlink_latency},
                                 std::pair{"cluster.nic_latency", cl.nic_latency}}) {
      if (std::string w = latency_slip(key, t); !w.empty()) s.warnings.push_back(std::move(w));
    }
    // One HCA port runs at 800 Gb/s at most today; more is a slip of bytes
    // for bits (400GB/s for 400Gbps, 200GB/s for HDR's 200Gbps: helper 78,
    // once under a 1600 Gb/s threshold) more often than a future NIC.
    // Under 10 Gb/s is no GPU cluster's HCA: Mbps for Gbps (helper 86: 400Mbps
    // ran silently, a reduce-scatter of 87 s); said beyond one node, where
    // the HCAs carry traffic.
    if (cl.nic_bandwidth > parse_bandwidth("800Gbps") || cl.nodes > 1) {
      if (std::string w = bandwidth_slip("cluster.nic_bandwidth", cl.nic_bandwidth, "HCA port"); !w.empty())
        s.warnings.push_back(std::move(w));
    }
    node.nvlink = {cl.nvlink_bandwidth, cl.nvlink_latency};
    // HCAs per node (default: one per GPU) and the PCIe link to a shared one.
    if (c.has("hcas_per_node")) {
      const YAML::Node v = c.need("hcas_per_node");
      const auto hcas = c.positive_int32("hcas_per_node");
      if (hcas > cl.gpus_per_node || cl.gpus_per_node % hcas != 0) {
        c.fail_at(v.Mark(), c.key_path("hcas_per_node"),
                  fmt::format("{} HCAs do not divide cluster.gpus_per_node = {} (GPUs share HCAs evenly; use a "
                              "divisor of {})",
                              hcas, cl.gpus_per_node, cl.gpus_per_node));
      }
      cl.hcas_per_node = static_cast<int>(hcas);
    } else {
      cl.hcas_per_node = cl.gpus_per_node;
    }
    // Without the key: the GPU preset's PCIe generation (an A100's is 4.0,
    // half of 5.0's 64 GB/s; helper 173), else 5.0's.
    const std::optional<std::string> gpu_preset = gpu_preset_key(c.node()["gpu"]);
    const Bandwidth pcie_default =
        (gpu_preset ? node_model::preset_pcie_bandwidth(*gpu_preset) : std::nullopt)
            .value_or(Bandwidth::gigabytes_per_second(64));
    cl.pcie_bandwidth = c.has("pcie_bandwidth") ? c.unit("pcie_bandwidth", parse_bandwidth) : pcie_default;
    cl.pcie_latency = c.has("pcie_latency") ? c.unit("pcie_latency", parse_time) : Time::from_ns(500);
    if (cl.pcie_bandwidth.bps() <= 0) {
      c.fail_at(c.node()["pcie_bandwidth"].Mark(), c.key_path("pcie_bandwidth"), "must be positive");
    }
    // The PCIe link is the path of GPUs to an HCA they share: with one HCA
    // per GPU nothing crosses it (helper 111: taken without a word).
    if (cl.hcas_per_node == cl.gpus_per_node && (c.has("pcie_bandwidth") || c.has("pcie_latency"))) {
      s.warnings.push_back(fmt::format(
          "cluster.{} {} no effect with an HCA per GPU (the PCIe link is modelled where GPUs share an HCA: "
          "cluster.hcas_per_node below gpus_per_node)",
          c.has("pcie_bandwidth") && c.has("pcie_latency")
              ? "pcie_bandwidth and pcie_latency"
              : (c.has("pcie_bandwidth") ? "pcie_bandwidth" : "pcie_latency"),
          c.has("pcie_bandwidth") && c.has("pcie_latency") ? "have" : "has"));
    }
    node.hcas = cl.hcas_per_node;
    node.pcie = {cl.pcie_bandwidth, cl.pcie_latency};
    const topology::LinkSpec host{cl.nic_bandwidth, cl.nic_latency};
    if (c.has("fabric")) {
      read_fabric(c, s, node, host);
    } else if (cl.nodes > 1) {
      c.fail_missing({"fabric"}, c.key_path("fabric"),
                     fmt::format("missing required key (a cluster of {} nodes needs the fabric between them: "
                                 "leaf-spine, fat-tree or rail-optimized)",
                                 cl.nodes));
    } else {
      one_node_fabric(s, node, host);
    }
    c.finish();
  }
  {
    Section m = top.child("model");
    s.model = read_model(m);
  }
  YAML::Node global_batch_at;  // training.global_batch, checked with the plan
  // (the plan's checks name these too: helper 145, a seq_len error pointed
  // at the training section's first key)
  YAML::Node micro_batch_at, seq_len_at;
  std::int64_t micro_batches = 0;  // training.micro_batches (0: not given)
  {
    Section t = top.child("training");
    t.require({"micro_batch", "seq_len", "dtype"});
    s.workload.micro_batch = t.positive_int("micro_batch");
    s.workload.seq_len = t.positive_int("seq_len");
    micro_batch_at = t.need("micro_batch");
    seq_len_at = t.need("seq_len");
    const YAML::Node dt = t.need("dtype");
    s.workload.dtype = checked(t, dt, t.key_path("dtype"), [&] { return node_model::parse_dtype(t.scalar("dtype")); });
    // The GPU must have tensor cores for the GEMMs' type (no bf16 on a V100,
    // no fp8 on an A100).
    if (s.workload.dtype != node_model::DType::FP32) {
      checked(t, dt, t.key_path("dtype"), [&] { return s.gpu.matmul_peak(s.workload.dtype); });
    }
    if (s.workload.dtype == node_model::DType::FP8) {
      // Transformer Engine FP8 (docs/parallelism.md, "FP8 training"): the
      // layers' GEMMs in FP8 on the GPU's FP8 tensor cores, the rest in bf16.
      s.workload.dtype = node_model::DType::BF16;
      s.workload.profile.fp8 = true;
    }
    // The batch as Megatron's users often give it: micro-batches per
    // data-parallel replica (gradient accumulation steps), so the global
    // batch grows with dp (weak scaling over cluster.nodes in one sweep).
    // Given with global_batch, the one typed on the command line wins.
    const bool gb = t.has("global_batch"), mbs = t.has("micro_batches");
    bool use_gb = gb, use_mbs = mbs;
    if (gb && mbs) {
      const bool gb_typed = overridden.count("training.global_batch") > 0U;
      const bool mbs_typed = overridden.count("training.micro_batches") > 0U;
      if (gb_typed == mbs_typed) {
        t.fail_at(t.need("micro_batches").Mark(), t.key_path("micro_batches"),
                  "training.global_batch and training.micro_batches both set the batch: give one");
      }
      use_gb = gb_typed;
      use_mbs = mbs_typed;
      t.allow(use_gb ? "micro_batches" : "global_batch");
    }
    if (use_gb) {
      global_batch_at = t.need("global_batch");
      s.plan.global_batch = t.positive_int("global_batch");
    }
    if (use_mbs) {
      global_batch_at = t.need("micro_batches");
      micro_batches = t.positive_int("micro_batches");
    }
    // The whole run's tokens: the reports give its time and GPU-hours.
    if (t.has("tokens")) s.train_tokens = t.unit("tokens", parse_count);
    if (t.has("framework")) {
      const YAML::Node v = t.need("framework");
      s.workload.framework =
          checked(t, v, t.key_path("framework"), [&] { return node_model::parse_framework(t.scalar("framework")); });
    }
    const bool megatron = node_model::is_megatron(s.workload.framework);
    if (s.workload.profile.fp8 && !megatron) {
      t.fail_at(dt.Mark(), t.key_path("dtype"),
                fmt::format("fp8 training is modelled as Transformer Engine under Megatron (training.framework is {})",
                            node_model::to_string(s.workload.framework)));
    }
    // Megatron-LM runs apex's FusedAdam and clips gradients (--clip-grad 1.0).
    s.plan.fused_optimizer = megatron;
    s.plan.grad_clipping = megatron;
    if (t.has("optimizer")) {
      const YAML::Node v = t.need("optimizer");
      const std::string name = t.scalar("optimizer");
      if (name != "adam" && name != "fused-adam") {
        // AdamW's decoupled weight decay is one more term in the same
        // passes (helper 173: `adamw` was refused with no word of that).
        const std::string lower = ascii_lower(name);
        std::string hint;
        if (lower == "adamw" || lower == "fused-adamw" || lower == "fused_adamw" || lower == "fusedadamw") {
          hint = fmt::format(": did you mean '{}'? (AdamW's weight decay costs the same passes as Adam's)",
                             lower == "adamw" ? "adam" : "fused-adam");
        } else if (lower == "fused_adam" || lower == "fusedadam") {
          hint = ": did you mean 'fused-adam'?";
        }
        t.fail_at(v.Mark(), t.key_path("optimizer"),
                  fmt::format("unknown optimizer '{}' (expected adam or fused-adam){}", name, hint));
      }
      s.plan.fused_optimizer = name == "fused-adam";
    }
    if (t.has("grad_clipping")) s.plan.grad_clipping = t.boolean("grad_clipping");
    if (t.has("grad_accumulation_fusion")) {
      s.workload.profile.grad_accumulation_fusion = t.boolean("grad_accumulation_fusion");
      // Megatron's fused main-gradient accumulation: eager PyTorch has no
      // main gradients to fuse into (helper 114: silently ignored).
      if (!megatron) {
        s.warnings.push_back(fmt::format(
            "training.grad_accumulation_fusion has no effect under framework {} (it fuses Megatron's FP32 "
            "main-gradient accumulation into the weight-gradient GEMMs)",
            node_model::to_string(s.workload.framework)));
      }
    }
    // PyTorch eager: how zero_grad leaves .grad (PyTorch 2's set_to_none by
    // default, ProfileOptions' default: the first micro-batch writes the
    // gradients, later ones add).
    if (t.has("zero_grad")) {
      const YAML::Node v = t.need("zero_grad");
      const std::string z = t.scalar("zero_grad");
      if (z != "set_to_none" && z != "zeros") {
        t.fail_at(v.Mark(), t.key_path("zero_grad"),
                  fmt::format("unknown zero_grad '{}' (expected set_to_none or zeros)", z));
      }
      if (megatron) {
        t.fail_at(v.Mark(), t.key_path("zero_grad"),
                  "applies to framework pytorch-eager only (Megatron accumulates into its main gradients)");
      }
      s.workload.profile.eager_accumulate_every_backward = z == "zeros";
    }
    if (t.has("flash_attention")) {
      s.workload.flash_attention = t.boolean("flash_attention");
      if (s.workload.flash_attention && node_model::dtype_bytes(s.workload.dtype) != 2) {
        t.fail_at(t.need("flash_attention").Mark(), t.key_path("flash_attention"),
                  fmt::format("FlashAttention runs fp16 or bf16 only, as does fp8 training's attention "
                              "(training.dtype is {})",
                              node_model::to_string(s.workload.dtype)));
      }
      // FlashAttention 2 needs Ampere or newer: a GPU without BF16 tensor
      // cores (Volta, Turing) does not run the kernel timed (helper 132).
      if (s.workload.flash_attention && !s.gpu.bf16) {
        s.warnings.push_back(fmt::format(
            "training.flash_attention on {}: FlashAttention 2 runs on GPUs with BF16 tensor "
            "cores (Ampere and newer), and FlashAttention 1 on Turing and Ampere only; the "
            "forecast times a fused attention kernel this GPU may not run (flash_attention: false "
            "times the attention it runs)",
            s.gpu.name));
      }
    }
    t.finish();
  }
  {
    // Parallel plan (docs/parallelism.md). Errors point at the key they name.
    Section p = top.child("parallelism");
    auto& plan = s.plan;
    auto optional_int = [&](const char* key, int& field) {
      if (p.has(key)) field = p.positive_int32(key);
    };
    optional_int("tp", plan.tp);
    optional_int("pp", plan.pp);
    optional_int("ep", plan.ep);
    // dp defaults to the GPUs left over by tp x pp (also when set to `auto`,
    // as `--set parallelism.dp=auto` can over a scenario that fixes it), so
    // that node-count sweeps need no matching dp list.
    const bool dp_given = p.has("dp");
    const YAML::Node dpn = dp_given ? p.need("dp") : p.node();
    const bool dp_fixed = dp_given && !(dpn.IsScalar() && dpn.Scalar() == "auto");
    // (tp x pp in 64 bits: both are ints, their product need not be)
    const std::int64_t tp_pp = static_cast<std::int64_t>(plan.tp) * plan.pp;
    if (dp_fixed) {
      if (dpn.IsScalar() && !dpn.Scalar().empty() &&
          dpn.Scalar().find_first_not_of("+-0123456789") != std::string::npos) {
        p.fail_at(dpn.Mark(), p.key_path("dp"),
                  fmt::format("expected a whole number or auto, got '{}'", dpn.Scalar()));
      }
      plan.dp = p.positive_int32("dp");
    } else if (s.gpus() % tp_pp != 0 && !dp_given && (p.has("tp") || p.has("pp"))) {
      // dp left out: the error is the tp (or pp) written (helper 64: 'dp'
      // named a key the file does not have).
      const char* key = p.has("tp") && s.gpus() % plan.tp != 0 ? "tp" : (p.has("pp") ? "pp" : "tp");
      p.fail_at(p.need(key).Mark(), p.key_path(key),
                fmt::format("tp x pp ({} x {} = {}) does not divide the {} GPUs (dp, not given, would be "
                            "the GPUs over tp x pp)",
                            plan.tp, plan.pp, tp_pp, s.gpus()));
    } else if (s.gpus() % tp_pp != 0) {
      p.fail_at(dpn.Mark(), p.key_path("dp"),
                fmt::format("{}, and tp x pp ({} x {} = {}) does not divide the {} GPUs",
                            dp_given ? "auto" : "not given", plan.tp, plan.pp, tp_pp, s.gpus()));
    } else {
      plan.dp = static_cast<int>(s.gpus() / tp_pp);
    }
    if (micro_batches > 0) {
      // (each factor below 2^31: their product in 128 bits)
      __extension__ using Int128 = __int128;
      const Int128 g = static_cast<Int128>(micro_batches) * plan.dp * s.workload.micro_batch;
      if (g > std::numeric_limits<std::int32_t>::max()) {
        top.fail_at(global_batch_at.Mark(), "training.micro_batches",
                    fmt::format("{} micro-batches x dp {} x micro_batch {} is more than 2147483647 sequences",
                                micro_batches, plan.dp, s.workload.micro_batch));
      }
      plan.global_batch = static_cast<std::int64_t>(g);
      s.batch_as_micro_batches = true;
    }
    // No batch given: one micro-batch per replica, which a pipeline runs
    // alone, its stages idle but one at a time (helper 147: a tp 8, pp 2
    // file without its global_batch forecast 0.56 s where the 512 meant
    // gave 6.90 s, silently).
    // (a jobs: scenario's jobs are read here one by one, each warned about)
    if (plan.global_batch == 0 && plan.pp > 1) {
      s.warnings.push_back(fmt::format(
          "training.global_batch not given: one micro-batch per pipeline (micro_batch x dp = {} x {} "
          "sequences), "
          "so {} of the {} stages idle at any time (give global_batch, Megatron's --global-batch-size, or "
          "micro_batches)",
          s.workload.micro_batch, plan.dp, plan.pp - 1, plan.pp));
    }
    // virtual_stages left out or `auto`: under interleaved-1f1b the fewest
    // chunks from 2 up that split the layers evenly, else 1, so that a sweep
    // or --set over schedules needs no matching list.
    // Megatron-Core's --decoder-first/last-pipeline-num-layers: before
    // virtual_stages' auto, which then divides them too.
    if (p.has("first_stage_layers")) plan.first_stage_layers = p.positive_int32("first_stage_layers");
    if (p.has("last_stage_layers")) plan.last_stage_layers = p.positive_int32("last_stage_layers");
    // --account-for-embedding/loss-in-pipeline-split: before it too.
    if (p.has("account_for_embedding")) plan.account_for_embedding = p.boolean("account_for_embedding");
    if (p.has("account_for_loss")) plan.account_for_loss = p.boolean("account_for_loss");
    const bool vs_auto = !p.has("virtual_stages") ||
                         (p.need("virtual_stages").IsScalar() && p.scalar("virtual_stages") == "auto");
    if (!vs_auto) plan.virtual_stages = p.positive_int32("virtual_stages");
    plan.schedule = plan.virtual_stages > 1 ? parallelism::Schedule::Interleaved1F1B : parallelism::Schedule::OneFOneB;
    if (p.has("schedule")) {
      const YAML::Node v = p.need("schedule");
      plan.schedule = checked(p, v, p.key_path("schedule"), [&] { return parallelism::parse_schedule(p.scalar("schedule")); });
    }
    if (vs_auto && plan.schedule == parallelism::Schedule::Interleaved1F1B)
      plan.virtual_stages = parallelism::auto_virtual_stages(s.model.layers, plan);
    if (p.has("recompute")) {
      const YAML::Node v = p.need("recompute");
      plan.recompute = checked(p, v, p.key_path("recompute"), [&] { return parallelism::parse_recompute(p.scalar("recompute")); });
    }
    if (p.has("sequence_parallel")) plan.sequence_parallel = p.boolean("sequence_parallel");
    if (p.has("zero_stage")) {
      const YAML::Node v = p.need("zero_stage");
      const std::string text = p.scalar("zero_stage");
      if (text.size() != 1 || text[0] < '0' || text[0] > '3') {
        p.fail_at(v.Mark(), p.key_path("zero_stage"), fmt::format("expected 0, 1, 2 or 3, got '{}'", text));
      }
      plan.zero_stage = text[0] - '0';
    }
    if (p.has("grad_sync")) {
      const YAML::Node v = p.need("grad_sync");
      plan.grad_sync = checked(p, v, p.key_path("grad_sync"), [&] { return parallelism::parse_grad_sync(p.scalar("grad_sync")); });
    }
    if (p.has("overlap_param_gather")) plan.overlap_param_gather = p.boolean("overlap_param_gather");
    if (p.has("tp_comm_overlap")) plan.tp_comm_overlap = p.boolean("tp_comm_overlap");
    if (p.has("pipeline_scatter_gather")) plan.pipeline_scatter_gather = p.boolean("pipeline_scatter_gather");
    if (p.has("layout")) {
      const YAML::Node v = p.need("layout");
      plan.layout = checked(p, v, p.key_path("layout"), [&] { return parallelism::parse_rank_layout(p.scalar("layout")); });
    }
    if (p.has("bucket_size")) {
      plan.bucket_size = p.unit("bucket_size", parse_bytes);
      if (plan.bucket_size->count() <= 0) {
        p.fail_at(p.node()["bucket_size"].Mark(), p.key_path("bucket_size"), "must be positive");
      }
    }
    p.finish();
    s.virtual_stages_auto = vs_auto;
    if (std::string w = uneven_layer_split_warning(s.model.layers, plan, s.workload.framework, vs_auto);
        !w.empty())
      s.warnings.push_back(std::move(w));
    // Megatron-Core's split keys have no DeepSpeed equivalent: its pipeline
    // engine places the layers by its partition_method (helper 156: taken
    // silently).
    if (s.workload.framework == node_model::Framework::MegatronDeepSpeed && plan.pp > 1) {
      const auto keys = layer_split_keys_set(plan);
      if (!keys.empty()) {
        s.warnings.push_back(fmt::format(
            "parallelism.{} {} Megatron-Core's (--decoder-first/last-pipeline-num-layers, "
            "--account-for-embedding/loss-in-pipeline-split): DeepSpeed's pipeline engine (framework "
            "megatron-deepspeed) has no such option and places the layers by its partition_method, so "
            "this split is a what-if",
            fmt::join(keys, " and parallelism."), keys.size() == 1 ? "is" : "are"));
      }
    }
    // Counting the embedding and the loss moves layers between stages: with
    // one stage there are none to move.
    if (plan.pp == 1 && (plan.account_for_embedding || plan.account_for_loss)) {
      s.warnings.push_back(
          fmt::format("parallelism.{} has no effect with pp = 1 (it moves layers off the first "
                      "and last pipeline stages)",
                      parallelism::accounted_split_keys(plan)));
    }
    // Tensor-parallel options given to a plan without tensor parallelism (or
    // pipeline stages) do nothing: said, as other keys that do nothing are.
    if (plan.tp == 1) {
      if (p.has("sequence_parallel") && plan.sequence_parallel) {
        s.warnings.emplace_back(
            "parallelism.sequence_parallel has no effect with tp = 1 (it splits activations across a "
            "tensor-parallel group)");
      }
      if (p.has("tp_comm_overlap")) {
        s.warnings.emplace_back(
            "parallelism.tp_comm_overlap has no effect with tp = 1 (no tensor-parallel collectives)");
      }
    }
    // ZeRO shards over the data-parallel group: with dp = 1 there is no one
    // to shard with (helper 106: said nothing).
    if (plan.dp == 1 && plan.zero_stage > 0) {
      s.warnings.push_back(fmt::format(
          "parallelism.zero_stage {} has no effect with dp = 1 (it shards across the data-parallel group)",
          plan.zero_stage));
    }
    // (helper 156: under megatron-deepspeed it did nothing, unsaid: DeepSpeed's
    // pipeline engine sends the whole activation)
    const bool megatron_lm = s.workload.framework == node_model::Framework::Megatron;
    if (p.has("pipeline_scatter_gather") &&
        (plan.tp == 1 || plan.pp == 1 || plan.sequence_parallel || !megatron_lm)) {
      s.warnings.push_back(fmt::format(
          "parallelism.pipeline_scatter_gather has no effect here (it is Megatron-LM's: it applies under "
          "framework megatron with tp > 1 and pp > 1, without sequence parallelism; {}tp = {}, pp = {}{})",
          megatron_lm ? "" : fmt::format("framework {}, ", node_model::to_string(s.workload.framework)),
          plan.tp, plan.pp, plan.sequence_parallel ? ", sequence_parallel on" : ""));
    }
    // Buckets exist only where gradients are reduced as they fill
    // (grad_sync overlapped, or auto under a profile that overlaps).
    if (p.has("bucket_size") && plan.resolved_grad_sync(s.workload) == parallelism::GradSync::AfterBackward) {
      s.warnings.push_back(fmt::format(
          "parallelism.bucket_size has no effect with grad_sync {} (all gradients are reduced at once after "
          "the backward{}; grad_sync: overlapped or overlap-grad-reduce reduces them in buckets)",
          parallelism::to_string(plan.grad_sync),
          plan.grad_sync == parallelism::GradSync::Auto ? ", the framework profile's default" : ""));
    }
    try {
      plan.validate(s.model, s.workload, s.gpus());
    } catch (const InputError& e) {
      // Library messages start with the key they are about.
      const std::string msg = e.what();
      std::string key = msg.substr(0, msg.find_first_of(" ("));
      // A refusal of first_stage_layers and last_stage_layers together
      // names first_stage_layers first; it points at last_stage_layers
      // where only that one was set on the command line (a sweep over it,
      // the file giving first_stage_layers), so that the error is where
      // the value that changed was typed.
      const auto set_on_command_line = [&](const char* k) {
        return !p.location(YAML::Mark::null_mark(), p.key_path(k)).second.empty();
      };
      if (key == "first_stage_layers" && msg.starts_with("first_stage_layers + last_stage_layers") &&
          set_on_command_line("last_stage_layers") && !set_on_command_line("first_stage_layers")) {
        key = "last_stage_layers";
      }
      if (key == "dp") {
        // A node-count sweep over a scenario that fixes dp lands here: say
        // what leaving dp out would give.
        // Without a batch key the global batch is micro_batch x dp: it
        // would follow too (helper 160: 128 became 32, unsaid).
        const std::int64_t auto_dp = s.gpus() / tp_pp;
        const std::string batch =
            plan.global_batch == 0
                ? fmt::format(
                      ", and the global batch with it, micro_batch x dp without training.global_batch: {}, "
                      "not {}",
                      s.workload.micro_batch * auto_dp, s.workload.micro_batch * plan.dp)
                : "";
        const std::string hint =
            dp_fixed && s.gpus() % tp_pp == 0
                ? fmt::format(" (with parallelism.dp left out or `auto` it follows the GPU count: dp {}{})",
                              auto_dp, batch)
                : "";
        p.fail_at(dpn.Mark(), p.key_path("dp"),
                  fmt::format("{}, cluster.nodes x cluster.gpus_per_node = {} x {} = {}{}", msg, s.cluster.nodes,
                              s.cluster.gpus_per_node, s.gpus(), hint));
      }
      if (key == "global_batch") {
        p.fail_at(global_batch_at.Mark(),
                  micro_batches > 0 ? "training.micro_batches" : "training.global_batch", msg);
      }
      if (key == "micro_batch" || key == "seq_len") {
        p.fail_at((key == "seq_len" ? seq_len_at : micro_batch_at).Mark(), "training." + key, msg);
      }
      // virtual_stages auto falls back to 2 where no count divides every
      // stage's layers: said, as the file does not write the 2.
      // (only where the chunks were the trouble: the stages split the
      // layers with one chunk each, as they do not with 81 counted layers
      // over pp 4)
      const bool split_key = key == "first_stage_layers" || key == "last_stage_layers" ||
                             key == "account_for_embedding" || key == "account_for_loss";
      const auto stages_split = [&] {
        parallelism::ParallelPlan one_chunk = plan;
        one_chunk.virtual_stages = 1;
        try {
          (void)parallelism::stage_layer_split(s.model.layers, one_chunk);
          return true;
        } catch (const InputError&) {
          return false;
        }
      };
      if (split_key && vs_auto && plan.schedule == parallelism::Schedule::Interleaved1F1B && p.has(key) &&
          stages_split()) {
        p.fail_at(p.node()[key].Mark(), p.key_path(key),
                  msg +
                      "; virtual_stages auto found no count of chunks from 2 up that divides every stage's "
                      "layers, and took 2");
      }
      if (p.has(key)) p.fail_at(p.node()[key].Mark(), p.key_path(key), msg);
      p.fail_at(p.node().Mark(), "parallelism", msg);
    }
    // A tensor-parallel group across nodes is legal but slow (its all-reduces
    // cross the network): a warning, not an error (docs/parallelism.md, "Rank
    // layout and groups").
    if (parallelism::tp_group_spans_nodes(plan, s.cluster.gpus_per_node)) {
      s.warnings.push_back(fmt::format(
          "parallelism.tp = {} spans nodes: with layout {} a tensor-parallel group does not fit in one node of "
          "cluster.gpus_per_node = {} GPUs (legal, but its all-reduces cross the network)",
          plan.tp, parallelism::to_string(plan.layout), s.cluster.gpus_per_node));
    }
    // Megatron's fused softmax refuses some shapes and its torch path then
    // runs, much slower and with FP32 scores kept: a cliff a user sees as
    // a sudden MFU drop between two micro-batch sizes (helper 131: GPT 18B
    // at tp 8, 48 heads, micro-batch 1: 25.9% MFU, 34.8% at 2).
    if (node_model::is_megatron(s.workload.framework) && node_model::dtype_bytes(s.workload.dtype) == 2 &&
        !s.workload.flash_attention && s.model.heads % plan.tp == 0) {
      const std::int64_t per_rank = s.model.heads / plan.tp;
      const std::int64_t mb = s.workload.micro_batch;
      const std::string why = node_model::fused_softmax_refusal(s.workload.framework, mb * per_rank,
                                                                s.workload.seq_len, s.workload.seq_len);
      if (!why.empty()) {
        std::string instead = "training.flash_attention: true";
        for (std::int64_t m = mb + 1; m <= mb + 8; ++m) {
          if (node_model::fused_softmax_available(s.workload.framework, s.workload.dtype, m * per_rank,
                                                  s.workload.seq_len, s.workload.seq_len)) {
            instead = fmt::format("training.micro_batch {} or {}", m, instead);
            break;
          }
        }
        s.warnings.push_back(
            fmt::format("attention softmax unfused: Megatron's fused softmax kernel {}, so its torch path "
                        "runs (micro_batch {} x {} heads per rank, sequence {}: FP32 scores, more time and "
                        "activation memory; {} would use a fused kernel; docs/parallelism.md, \"Framework "
                        "profiles\")",
                        why, mb, per_rank, s.workload.seq_len, instead));
      }
    }
    // PyTorch DDP under Megatron where Megatron-LM refuses it: modelled
    // (the forecast of the same sync on another stack), said (helper 79).
    if (std::string why = parallelism::torch_ddp_refusal(plan, s.workload); !why.empty()) {
      s.warnings.push_back("parallelism.grad_sync: " + why);
    }
    // An expert imbalance is between expert-parallel ranks: with ep 1 a
    // rank computes every expert for its own tokens (helper 90).
    if (plan.ep == 1 && s.model.is_moe() && s.model.moe.dropless() && s.model.moe.imbalance > 1) {
      s.warnings.push_back(fmt::format(
          "parallelism.ep = 1: model.moe.imbalance ({}) has no effect (a rank computes every expert for its "
          "own tokens, whatever the routing; the imbalance is between expert-parallel ranks)",
          s.model.moe.imbalance));
    }
    // Selective recomputation recomputes the attention core, which
    // FlashAttention already keeps none of (helper 85: the Options line said
    // "recompute selective" and nothing changed).
    if (plan.recompute == parallelism::Recompute::Selective && s.workload.flash_attention) {
      s.warnings.emplace_back(
          "parallelism.recompute: selective has no effect with training.flash_attention (FlashAttention "
          "keeps "
          "no attention scores, which is what selective recomputation recomputes: the plan holds what "
          "recompute: "
          "none holds; recompute: full recomputes whole layers)");
    }
    if (std::string w = split_backward_recompute_warning(plan); !w.empty())
      s.warnings.push_back(std::move(w));
  }
  if (top.has("predictor")) {
    const YAML::Node v = top.need("predictor");
    s.predictor = top.scalar("predictor");
    // Validates the name (and that this build has its weights).
    checked(top, v, "predictor", [&] { return node_model::make_predictor(s.predictor, s.gpu) != nullptr; });
  }
  if (top.has("node_model")) {
    Section nm = top.child("node_model");
    // A path relative to the scenario file's directory, unless set on the
    // command line (then relative to the working directory, as any path
    // typed there).
    auto scenario_path = [&](const std::string& key, std::string path) {
      const bool typed = overridden.count("node_model." + key) + overridden.count("node_model") > 0U;
      const std::filesystem::path dir = std::filesystem::path(file).parent_path();
      if (!typed && std::filesystem::path(path).is_relative() && !dir.empty()) path = (dir / path).string();
      return path;
    };
    if (nm.has("weights")) {
      const YAML::Node v = nm.need("weights");
      const std::string path = nm.scalar("weights");
      if (path.empty()) nm.fail_at(v.Mark(), nm.key_path("weights"), "empty path");
      s.predictor_weights = scenario_path("weights", path);
      if (!std::filesystem::is_directory(s.predictor_weights)) {
        nm.fail_at(v.Mark(), nm.key_path("weights"),
                   fmt::format("'{}' is not a folder (the one `tessera train-predictor --out DIR` wrote)",
                               s.predictor_weights));
      }
      // Reads the weights now, so a folder without the predictor's file (or
      // with a damaged one) fails here, naming the key.
      checked(nm, v, nm.key_path("weights"),
              [&] { return node_model::make_predictor(s.predictor, s.gpu, s.predictor_weights) != nullptr; });
    }
    if (nm.has("overrides")) {
      const YAML::Node v = nm.need("overrides");
      std::string path = nm.scalar("overrides");
      if (path.empty()) nm.fail_at(v.Mark(), nm.key_path("overrides"), "empty path");
      path = scenario_path("overrides", path);
      s.kernel_overrides = checked(nm, v, nm.key_path("overrides"), [&] {
        // PyTorch-profiler rows without a dtype column take training.dtype.
        return std::make_shared<const node_model::KernelTimeTable>(
            node_model::KernelTimeTable::read(path, s.workload.dtype));
      });
      // A file that names another GPU (a preset the scenario's is not) holds
      // another GPU's times: said, and then not blamed on units below.
      const std::string& measured_on = s.kernel_overrides->device();
      const node_model::GpuSpec* file_gpu =
          measured_on.empty() ? nullptr : node_model::find_gpu_preset(measured_on);
      const node_model::GpuSpec* own_gpu = node_model::find_gpu_preset(s.gpu.name);
      if (file_gpu != nullptr && own_gpu != nullptr && file_gpu->name != own_gpu->name) {
        s.warnings.push_back(
            fmt::format("node_model.overrides: {} was measured on {} (its Device column: '{}'), the "
                        "scenario's GPU is {}: "
                        "its times replace this GPU's predictions as they are",
                        s.kernel_overrides->path(), file_gpu->name, measured_on, s.gpu.name));
      }
      // A time below what the GPU's peak allows (its roofline bound, with
      // 10% for clocks above the datasheet's) is no measurement of this GPU:
      // most likely milliseconds typed into time_us. Said, not refused.
      std::vector<std::string> fast;
      std::size_t count = 0;
      for (const auto& e : s.kernel_overrides->entries()) {
        Time bound;
        try {
          bound = node_model::roofline_time(e.kernel, s.gpu);
        } catch (const InputError&) {
          continue;  // (a dtype this GPU has no peak for: the run says so)
        }
        if (e.time.ps() >= bound.ps() * 9 / 10) continue;
        if (++count <= 3)
          fast.push_back(fmt::format("line {}: {:g} us, bound {:g} us", e.line, e.time.us(), bound.us()));
      }
      if (count > 0 && (file_gpu == nullptr || own_gpu == nullptr || file_gpu->name == own_gpu->name)) {
        s.warnings.push_back(fmt::format(
            "node_model.overrides: {} kernel{} of {} {} faster than {} allows at its peak ({}{}): is time_us "
            "in microseconds? (NeuSight's Latency is in ms)",
            count, count == 1 ? "" : "s", s.kernel_overrides->path(), count == 1 ? "is" : "are", s.gpu.name,
            fmt::join(fast, "; "), count > fast.size() ? fmt::format("; {} more", count - fast.size()) : ""));
      }
    }
    nm.finish();
  }
  s.collectives.ranks_per_node = s.cluster.gpus_per_node;
  s.collectives.granularity = collectives::Granularity::Flows;  // docs/collectives.md, "Granularity"
  // Auto's nominal per-rank inter-node bandwidth: GPUs sharing an HCA share
  // its rate (hcas_per_node divides gpus_per_node: dividing by the GPUs per
  // HCA is exact and cannot overflow).
  const Bandwidth nic_per_gpu = Bandwidth::bits_per_second(
      s.cluster.nic_bandwidth.bps() / (s.cluster.gpus_per_node / s.cluster.hcas_per_node));
  // Auto's default per-step latency (2 x nic_latency), overflow named by its key.
  auto twice_nic_latency = [&] {
    const YAML::Node at = root["cluster"]["nic_latency"];
    return checked(top, at, "cluster.nic_latency", [&] { return s.cluster.nic_latency * 2; });
  };
  if (top.has("collectives")) {
    Section col = top.child("collectives");
    if (col.has("algorithm") && col.node()["algorithm"].IsMap()) {
      // One per collective kind ({all-to-all: hierarchical, ...}); kinds
      // not named keep auto.
      Section per = col.child("algorithm");
      for (std::size_t k = 0; k < collectives::kNumCollectiveKinds; ++k) {
        const auto kind = static_cast<parallelism::CollectiveKind>(k);
        const std::string name(parallelism::to_string(kind));
        if (!per.has(name)) continue;
        const YAML::Node v = per.need(name);
        const collectives::Algorithm a =
            checked(per, v, per.key_path(name), [&] { return collectives::parse_algorithm(per.scalar(name)); });
        const std::vector<collectives::Algorithm> ok = collectives::algorithms_for(kind);
        if (a != collectives::Algorithm::Auto && std::find(ok.begin(), ok.end(), a) == ok.end()) {
          std::string names;
          for (const auto x : ok) names += fmt::format(", {}", collectives::to_string(x));
          per.fail_at(v.Mark(), per.key_path(name),
                      fmt::format("{} has no algorithm '{}' (available: auto{})", name, per.scalar(name), names));
        }
        s.collectives.per_kind[k] = a;
      }
      per.finish();
    } else if (col.has("algorithm")) {
      const YAML::Node v = col.need("algorithm");
      s.collectives.algorithm =
          checked(col, v, col.key_path("algorithm"), [&] { return collectives::parse_algorithm(col.scalar("algorithm")); });
    }
    if (col.has("chunks")) s.collectives.chunks = col.positive_int32("chunks");
    if (col.has("granularity")) {
      const YAML::Node v = col.need("granularity");
      s.collectives.granularity = checked(col, v, col.key_path("granularity"),
                                          [&] { return collectives::parse_granularity(col.scalar("granularity")); });
    }
    s.collectives.auto_latency =
        col.has("auto_latency") ? col.unit("auto_latency", parse_time) : twice_nic_latency();
    s.collectives.auto_bandwidth = col.has("auto_bandwidth") ? col.unit("auto_bandwidth", parse_bandwidth) : nic_per_gpu;
    col.finish();
  } else {
    s.collectives.auto_latency = twice_nic_latency();
    s.collectives.auto_bandwidth = nic_per_gpu;
  }
  // Calibration (docs/calibration.md): fitted constants, each overridable.
  s.calibration = default_calibration(s.gpu, s.workload.framework);
  // Host keys given in the scenario (pytorch-eager applies only those).
  parallelism::HostOverhead given_host;
  bool host_given = false;
  bool launch_given = false;
  // The first host key given besides host_launch (one that makes the
  // switch), where the warning about a switch without a launch cost is
  // placed (helper 175: at `calibration`, which a --set had made).
  std::string first_host_key;
  if (top.has("calibration")) {
    Section c = top.child("calibration");
    // Above `most` a time is a unit slip more likely than a host (helper 145:
    // host_launch=1s forecast 41 minutes an iteration without a word).
    const auto slip = [&](const std::string& key, Time t, Time most, std::string_view what) {
      if (t > most) {
        s.warnings.push_back(fmt::format("{} = {}: {} (a unit slip, s for ms or ms for us?)", c.key_path(key),
                                         to_string(t), what));
      }
    };
    auto host_key = [&](const char* key, Time& field, Time& given, Time most, std::string_view what) {
      if (!c.has(key)) return;
      field = given = c.unit(key, parse_time);
      host_given = true;
      if (first_host_key.empty() && std::string_view(key) != "host_launch") first_host_key = c.key_path(key);
      slip(key, field, most, what);
    };
    launch_given = c.has("host_launch");
    host_key("host_launch", s.calibration.host_launch, given_host.per_launch, parse_time("1ms"),
             "a kernel launch costs the host microseconds, not milliseconds");
    host_key("host_iteration", s.calibration.host_iteration, given_host.per_iteration, parse_time("60s"),
             "more than a minute of host time an iteration");
    host_key("host_p2p", s.calibration.host_p2p, given_host.per_p2p, parse_time("100ms"),
             "a pipeline exchange costs the host milliseconds at most");
    host_key("host_microbatch", s.calibration.host_microbatch, given_host.per_micro_batch, parse_time("1s"),
             "more than a second of host time a micro-batch");
    auto link = [&](const char* prefix, engine::LinkCalibration& l) {
      const std::string p(prefix);
      if (c.has(p + "_efficiency")) l.peak_efficiency = c.number_in(p + "_efficiency", 0.01, 1.0);
      if (c.has(p + "_group_penalty")) l.group_penalty = c.number_in(p + "_group_penalty", 0.0, 10.0);
      for (const auto& [suffix, field] : {std::pair<const char*, Time*>{"_launch", &l.launch_latency},
                                          std::pair<const char*, Time*>{"_step", &l.step_latency},
                                          std::pair<const char*, Time*>{"_skew", &l.skew}}) {
        if (!c.has(p + suffix)) continue;
        *field = c.unit(p + suffix, parse_time);
        slip(p + suffix, *field, parse_time("10ms"), "a collective's latency is microseconds");
      }
      // Reported at the key given, as the key is written (the engine's check
      // below would name the section only).
      if (l.efficiency(2) <= 0.0) {
        const std::string key = c.has(p + "_group_penalty") ? p + "_group_penalty" : p + "_efficiency";
        c.fail_at(c.node()[key].Mark(), c.key_path(key),
                  fmt::format(
                      "leaves no bandwidth to a group of 2: {0}_efficiency - {0}_group_penalty / 2 = {1:g} - "
                      "{2:g} / 2 = {3:g} (it must be positive)",
                      p, l.peak_efficiency, l.group_penalty, l.efficiency(2)));
      }
    };
    link("nvlink", s.calibration.comm.nvlink);
    link("network", s.calibration.comm.network);
    if (c.has("overlap_slowdown")) s.calibration.comm.sm_slowdown = c.number_in("overlap_slowdown", 0.0, 0.9);
    if (c.has("clock_derate")) s.calibration.clock_derate = c.number_in("clock_derate", 0.1, 1.0);
    c.finish();
    checked(c, c.node(), "calibration", [&] {
      s.calibration.comm.validate();
      return 0;
    });
  }
  // The host model applies to frameworks with one host thread launching
  // every kernel (Megatron); PyTorch-eager timings carry their launch floors,
  // unless the scenario gives host keys: then eager kernels take their GPU
  // time and the host model the keys given (the others 0), for a host
  // measured apart from NeuSight's (docs/calibration.md, "Your own host").
  if (node_model::is_megatron(s.workload.framework)) {
    s.workload.host = {s.calibration.host_launch, s.calibration.host_iteration, s.calibration.host_p2p,
                       s.calibration.host_microbatch};
  } else if (host_given) {
    s.workload.host = given_host;
    // The switch takes the launch floors out of every kernel: without a
    // per-launch cost launches are free, which can make the iteration far
    // faster than with no host key at all (helper 87: host_iteration=0.001us
    // cut a step by 29%).
    if (given_host.enabled() && given_host.per_launch == Time::zero()) {
      s.warnings.push_back(fmt::format(
          "{}: a host key under framework {} switches to the host model, where kernels "
          "take their GPU "
          "time without their launch floors, and calibration.host_launch is {}: launches cost "
          "the host nothing "
          "(give host_launch, fit on your host: docs/calibration.md, \"Your own host\")",
          first_host_key, node_model::to_string(s.workload.framework), launch_given ? "0" : "not given (0)"));
    }
  }
  if (top.has("mixed_gpus")) {
    // Some nodes hold another GPU type (docs/scenarios.md, `mixed_gpus`).
    Section m = top.child("mixed_gpus");
    Scenario::MixedGpus mixed;
    const YAML::Node v = m.need("gpu");
    mixed.gpu = checked(m, v, m.key_path("gpu"), [&] { return node_model::gpu_preset(m.scalar("gpu")); });
    const node_model::DType gemm = s.workload.profile.fp8 ? node_model::DType::FP8 : s.workload.dtype;
    if (gemm != node_model::DType::FP32) {
      checked(m, v, m.key_path("gpu"), [&] { return mixed.gpu.matmul_peak(gemm); });
    }
    const std::string text = m.scalar("nodes");
    try {
      mixed.nodes = parse_index_list(text, m.key_path("nodes"), s.cluster.nodes, true);
    } catch (const InputError& e) {
      std::string why = e.what();
      const std::string prefix = m.key_path("nodes") + ": ";
      if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
      m.fail_at(m.node()["nodes"].Mark(), m.key_path("nodes"), why);
    }
    m.finish();
    // The cluster's own GPU changes nothing (helper 106: a Mixed GPUs line
    // and no word).
    if (mixed.gpu.name == s.gpu.name) {
      s.warnings.push_back(fmt::format(
          "mixed_gpus.gpu {} is the cluster's own GPU: the nodes it names are unchanged", mixed.gpu.name));
    } else if (static_cast<int>(mixed.nodes.size()) == s.cluster.nodes) {
      // Every node replaced: the report would still name cluster.gpu, and
      // its MFU the cluster GPU's peak (helper 127).
      s.warnings.push_back(
          fmt::format("mixed_gpus.nodes names every node: no {} is left (MFU and HFU stay against its peak); "
                      "for a cluster "
                      "of {} alone set cluster.gpu: {}",
                      s.gpu.name, mixed.gpu.name, mixed.gpu.name));
    }
    s.mixed_gpus = std::move(mixed);
  }
  if (top.has("failures")) {
    // Failed and degraded cables (docs/scenarios.md, `failures`), named by
    // their two ends: "leaf0-spine1, leaf1-spine0", or a list whose items
    // are such names or mappings {cable: leaf0-spine1, at: 5ms} (failing at
    // that simulated time). Checked against the fabric when it is built.
    Section fl = top.child("failures");
    // "a-b" (one or several, comma-separated) -> cables, or fails naming `path`.
    auto split = [&](const std::string& text, const YAML::Mark& mark, const std::string& path) {
      std::vector<std::pair<std::string, std::string>> out;
      std::size_t pos = 0;
      while (pos <= text.size()) {
        const std::size_t comma = std::min(text.find(',', pos), text.size());
        std::string item = text.substr(pos, comma - pos);
        item.erase(0, item.find_first_not_of(' '));
        item.erase(item.find_last_not_of(' ') + 1);
        const std::size_t dash = item.find('-');
        if (dash == std::string::npos || dash == 0 || dash + 1 == item.size()) {
          fl.fail_at(mark, path, fmt::format("'{}' is not a cable: name its two ends, as leaf0-spine1", item));
        }
        out.emplace_back(item.substr(0, dash), item.substr(dash + 1));
        pos = comma + 1;
      }
      return out;
    };
    // Each cable is named once (failed or degraded, from the start or at a
    // time): a second entry for it is an error at that entry, not a second
    // failure or a compounded degradation. Each is remembered with where it
    // was written, for the errors found once the fabric is built.
    std::map<std::pair<std::string, std::string>, std::string> named;
    auto name_once = [&](const std::pair<std::string, std::string>& c, const YAML::Mark& mark,
                         const std::string& path) {
      const auto [lo, hi] = std::minmax(c.first, c.second);
      const auto [it, fresh] = named.emplace(std::pair(lo, hi), path);
      if (!fresh) {
        fl.fail_at(
            mark, path,
            fmt::format("cable {}-{} is also in {} (name each cable once)", c.first, c.second, it->second));
      }
      auto [where, option] = fl.location(mark, path);
      s.failures.sources[std::pair(lo, hi)] = {std::move(where), path, std::move(option)};
    };
    auto cables = [&](const char* key, bool fail) {
      std::vector<std::pair<std::string, std::string>> out;
      const YAML::Node v = fl.need(key);
      if (!v.IsSequence()) {
        for (auto& c : split(fl.scalar(key), v.Mark(), fl.key_path(key))) {
          name_once(c, v.Mark(), fl.key_path(key));
          out.push_back(std::move(c));
        }
        return out;
      }
      for (std::size_t i = 0; i < v.size(); ++i) {
        const YAML::Node item = v[i];
        const std::string path = fmt::format("{}[{}]", fl.key_path(key), i);
        if (item.IsScalar()) {
          for (auto& c : split(item.Scalar(), item.Mark(), path)) {
            name_once(c, item.Mark(), path);
            out.push_back(std::move(c));
          }
          continue;
        }
        if (!item.IsMap()) fl.fail_at(item.Mark(), path, "expected a cable (leaf0-spine1) or a mapping {cable, at}");
        Section e = fl.nested(item, path);
        const YAML::Node cable = e.need("cable");
        const auto one = split(e.scalar("cable"), cable.Mark(), e.key_path("cable"));
        if (one.size() != 1) fl.fail_at(cable.Mark(), e.key_path("cable"), "expected one cable");
        name_once(one[0], item.Mark(), path);
        // (parse_time refuses negative times: a simulated time from the start)
        const Time at = e.has("at") ? e.unit("at", parse_time) : Time::zero();
        if (at == Time::zero()) {
          // At 0: from the start, on every backend (helper 95: ns3, which
          // runs no failure during the run, refused `at: 0ms`).
          out.push_back(one[0]);
        } else {
          s.failures.timed.push_back({one[0].first, one[0].second, at, fail});
        }
        e.finish();
      }
      return out;
    };
    if (fl.has("links")) {
      s.failures.failed = cables("links", true);
      auto [where, option] = fl.location(fl.node()["links"].Mark(), fl.key_path("links"));
      s.failures.links =
          Scenario::Failures::Source{std::move(where), fl.key_path("links"), std::move(option)};
    }
    if (fl.has("degraded")) s.failures.degraded = cables("degraded", false);
    if (fl.has("degraded_rate")) s.failures.degraded_rate = fl.number_in("degraded_rate", 1e-6, 1.0);
    const bool any_degraded = !s.failures.degraded.empty() ||
                              std::any_of(s.failures.timed.begin(), s.failures.timed.end(),
                                          [](const Scenario::Failures::Timed& t) { return !t.fail; });
    if (any_degraded != fl.has("degraded_rate")) {
      fl.fail_at(fl.node().Mark(), fl.key_path(""), "degraded and degraded_rate go together");
    }
    fl.finish();
  }
  if (top.has("stragglers")) {
    // Slower GPUs (docs/scenarios.md, `stragglers`): a factor on the compute
    // of some nodes or ranks, and optional seeded noise on every GPU.
    Section g = top.child("stragglers");
    s.compute_scale.assign(static_cast<std::size_t>(s.gpus()), 1.0);
    const double slowdown = g.has("slowdown") ? g.number_in("slowdown", 0.01, 1000.0) : 1.0;
    auto list = [&](const char* key, std::int64_t limit) {
      const std::string text = g.scalar(key);
      try {
        return parse_index_list(text, g.key_path(key), limit, true);
      } catch (const InputError& e) {
        std::string why = e.what();
        const std::string prefix = g.key_path(key) + ": ";
        if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
        g.fail_at(g.node()[key].Mark(), g.key_path(key), why);
      }
    };
    if (g.has("nodes")) {
      for (int n : list("nodes", s.cluster.nodes)) {
        for (int k = 0; k < s.cluster.gpus_per_node; ++k) {
          s.compute_scale[flat_index(n, s.cluster.gpus_per_node, k)] = slowdown;
        }
      }
    }
    if (g.has("ranks")) {
      for (int r : list("ranks", s.gpus())) s.compute_scale[static_cast<std::size_t>(r)] = slowdown;
    }
    if (g.has("random_sigma")) {
      // Every GPU x exp(N(0, sigma)), Box-Muller over mt19937_64 (fully
      // specified by the standard: the same seed gives the same GPUs
      // everywhere).
      const double sigma = g.number_in("random_sigma", 0.0, 1.0);
      const auto seed = static_cast<std::uint64_t>(g.has("seed") ? g.number_in("seed", 0, 4294967295.0) : 1.0);
      std::mt19937_64 rng(seed);
      auto uniform = [&] { return (static_cast<double>(rng() >> 11) + 0.5) * 0x1.0p-53; };
      for (double& f : s.compute_scale) {
        const double z = std::sqrt(-2.0 * std::log(uniform())) * std::cos(2.0 * M_PI * uniform());
        f *= std::exp(sigma * z);
      }
    } else if (g.has("seed")) {
      g.fail_at(g.node()["seed"].Mark(), g.key_path("seed"), "a seed without random_sigma has no effect");
    }
    if (!g.has("nodes") && !g.has("ranks") && !g.has("random_sigma")) {
      g.fail_at(g.node().Mark(), g.key_path(""), "name nodes, ranks or random_sigma");
    }
    // Nodes or ranks without a slowdown keep its default, 1: they change
    // nothing (helper 106: silently), as a slowdown with neither does.
    const bool listed = g.has("nodes") || g.has("ranks");
    if (listed && !g.has("slowdown")) {
      const char* key = g.has("nodes") ? "nodes" : "ranks";
      g.fail_at(
          g.node()[key].Mark(), g.key_path(key),
          "without stragglers.slowdown (default 1) the listed GPUs run as predicted: give their slowdown");
    }
    if (!listed && g.has("slowdown")) {
      g.fail_at(g.node()["slowdown"].Mark(), g.key_path("slowdown"),
                "a slowdown without nodes or ranks has no effect: name the GPUs it slows");
    }
    if (listed && g.has("slowdown") && slowdown == 1.0) {
      // (helper 127: said nothing, where nodes without a slowdown are an
      // error; a sweep's baseline point may mean it)
      s.warnings.push_back(
          fmt::format("{} 1: the listed GPUs run as predicted (no straggler)", g.key_path("slowdown")));
    }
    if (listed && slowdown < 1.0) {
      // Faster GPUs are allowed (a newer part among older ones), but MFU and
      // HFU stay against the preset's peak (helper 118: 0.01 on every rank
      // reported an MFU of 200%, without a word).
      s.warnings.push_back(fmt::format(
          "{} {} makes the listed GPUs {:.3g}x faster than {}'s model; MFU and HFU stay against its peak "
          "and can pass 100%",
          g.key_path("slowdown"), g.scalar("slowdown"), 1.0 / slowdown, s.gpu.name));
    }
    g.finish();
  }
  if (top.has("backend")) {
    const YAML::Node b = top.need("backend");
    s.backend = checked(top, b, "backend", [&] { return parse_backend(top.scalar("backend")); });
  }
  s.ns3.adaptive_routing = s.fabric_adaptive_routing;  // unless ns3.adaptive_routing is written
  if (top.has("ns3")) {
    // The ns-3 backend's options (docs/scenarios.md, `ns3`): read and checked
    // whatever the backend, so that `--backend ns3` never meets a bad value
    // late; the flow backend ignores them.
    Section n = top.child("ns3");
    Ns3Settings& ns = s.ns3;
    if (n.has("model")) {
      const YAML::Node v = n.need("model");
      const std::string name = n.scalar("model");
      if (name == "infiniband") {
        ns.model = Ns3Settings::Model::InfiniBand;
      } else if (name == "point-to-point") {
        ns.model = Ns3Settings::Model::PointToPoint;
      } else {
        n.fail_at(v.Mark(), n.key_path("model"),
                  fmt::format("unknown model '{}' (expected infiniband or point-to-point)", name));
      }
    }
    if (n.has("packets_per_segment")) {
      ns.packets_per_segment =
          static_cast<int>(n.positive_int("packets_per_segment", Ns3Settings::kMaxPacketsPerSegment));
    }
    if (n.has("mtu")) {
      const YAML::Node v = n.need("mtu");
      ns.mtu = n.unit("mtu", parse_bytes);
      const std::int64_t b = ns.mtu.count();
      // (the point-to-point model's packets are any size up to 1 MiB,
      // docs/ns3_modules.md)
      if (ns.model == Ns3Settings::Model::PointToPoint) {
        if (b < 1 || b > (std::int64_t{1} << 20)) {
          n.fail_at(v.Mark(), n.key_path("mtu"),
                    fmt::format("a point-to-point packet is 1B to 1MiB, got {}", n.scalar("mtu")));
        }
      } else if (b != 256 && b != 512 && b != 1024 && b != 2048 && b != 4096) {
        n.fail_at(
            v.Mark(), n.key_path("mtu"),
            fmt::format("an InfiniBand MTU is 256B, 512B, 1KiB, 2KiB or 4KiB, got {}", n.scalar("mtu")));
      }
    }
    if (n.has("scale_up")) {
      const YAML::Node v = n.need("scale_up");
      const std::string name = n.scalar("scale_up");
      if (name == "flow") {
        ns.scale_up = Ns3Settings::ScaleUp::Flow;
      } else if (name == "packets") {
        ns.scale_up = Ns3Settings::ScaleUp::Packets;
      } else {
        n.fail_at(v.Mark(), n.key_path("scale_up"),
                  fmt::format("unknown scale-up model '{}' (expected flow or packets)", name));
      }
    }
    if (n.has("num_vls")) ns.num_vls = static_cast<int>(n.positive_int("num_vls", Ns3Settings::kMaxVls));
    if (n.has("adaptive_routing")) ns.adaptive_routing = n.boolean("adaptive_routing");
    if (n.has("cut_through")) ns.cut_through = n.boolean("cut_through");
    if (n.has("header_bytes")) {
      const YAML::Node v = n.need("header_bytes");
      ns.header_bytes = n.scalar("header_bytes") == "0" ? Bytes(0) : n.unit("header_bytes", parse_bytes);
      if (ns.header_bytes > Ns3Settings::kMaxHeaderBytes) {
        n.fail_at(v.Mark(), n.key_path("header_bytes"),
                  fmt::format("at most {} B of headers per packet, got {}",
                              Ns3Settings::kMaxHeaderBytes.count(), n.scalar("header_bytes")));
      }
    }
    if (n.has("buffer")) {
      const YAML::Node v = n.need("buffer");
      // ("auto" is what 0 means: helper 121 wrote it and got a bare size error)
      if (n.scalar("buffer") == "auto") {
        n.fail_at(v.Mark(), n.key_path("buffer"),
                  "'auto' is written 0 (0: sized per link to cover the credit round trip), or give a size");
      }
      ns.buffer = n.scalar("buffer") == "0" ? Bytes(0) : n.unit("buffer", parse_bytes);
      // (checked: mtu + header bytes fit easily, times at most 4096 packets)
      // Credits count each packet in whole 64-byte blocks.
      const std::int64_t packet = (ns.mtu.count() + ns.header_bytes.count() + 63) / 64 * 64;
      const Bytes segment = Bytes(packet) * ns.packets_per_segment;
      // The credit counters are 32-bit and the fabric rounds a buffer up to
      // whole 64-byte credit blocks, so the most it holds is 4294967232 B
      // (helper 95: checked only when the ns-3 fabric was built, without the
      // key's line, and never on flow; helper 118: 4294967233-4294967295 B
      // passed here and failed there).
      constexpr std::int64_t kMostCredits = std::int64_t{std::numeric_limits<std::uint32_t>::max()} / 64 * 64;
      if (ns.buffer.count() > kMostCredits) {
        n.fail_at(v.Mark(), n.key_path("buffer"),
                  fmt::format("{} is more than the credit counters hold, {} B (4 GiB less one 64-byte credit "
                              "block: a buffer is rounded up to whole blocks)",
                              n.scalar("buffer"), kMostCredits));
      }
      if (ns.buffer.count() > 0 && ns.buffer < segment) {
        n.fail_at(
            v.Mark(), n.key_path("buffer"),
            fmt::format("must be 0 (auto) or hold one segment's credits: ns3.packets_per_segment x (ns3.mtu "
                        "+ {} B of headers, in whole 64-byte blocks) = {} x {} = {} B, got {}",
                        ns.header_bytes.count(), ns.packets_per_segment, packet, segment.count(),
                        n.scalar("buffer")));
      }
    }
    // Keys that do nothing here: the InfiniBand model's under point-to-point
    // (a file's or a --set's), and any ns3 key set on the command line for a
    // run on another backend (a file's section is for --backend ns3 later).
    if (ns.model == Ns3Settings::Model::PointToPoint) {
      for (const char* key :
           {"packets_per_segment", "num_vls", "adaptive_routing", "buffer", "header_bytes", "cut_through"}) {
        if (n.has(key)) {
          s.warnings.push_back(
              fmt::format("ns3.{}: ns3.model = point-to-point ignores it (it applies to the "
                          "infiniband model)",
                          key));
        }
      }
    }
    if (s.backend.name != "ns3") {
      for (const auto& [path, flag] : overridden) {
        if (path.rfind("ns3.", 0) == 0 && flag.rfind("--set", 0) == 0) {
          s.warnings.push_back(fmt::format(
              "{}: the {} backend ignores the ns3 section (--backend ns3 uses it)", path, s.backend.name));
        }
      }
    }
    n.finish();
  }
  if (top.has("outputs")) {
    Section o = top.child("outputs");
    auto path = [&](const char* key, std::string& field) {
      if (!o.has(key)) return;
      field = o.scalar(key);
      if (field.empty()) o.fail_at(o.node()[key].Mark(), o.key_path(key), "empty path");
    };
    path("json", s.outputs.json);
    path("trace", s.outputs.trace);
    path("links", s.outputs.links);
    // What the trace records: the same syntax as the --trace-* flags.
    auto parsed = [&](const char* key, auto parse) {
      const std::string text = o.scalar(key);
      try {
        return parse(text, o.key_path(key));
      } catch (const InputError& e) {
        std::string why = e.what();
        const std::string prefix = o.key_path(key) + ": ";
        if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
        o.fail_at(o.node()[key].Mark(), o.key_path(key), why);
      }
    };
    if (o.has("trace_ranks")) {
      s.outputs.trace_ranks = parsed("trace_ranks", [&](const std::string& t, const std::string& what) {
        return parse_index_list(t, what, s.gpus());
      });
    }
    if (o.has("trace_micro_batches")) {
      s.outputs.trace_micro_batches =
          parsed("trace_micro_batches", [](const std::string& t, const std::string& what) {
            return parse_index_list(t, what, kMaxTraceMicroBatch);
          });
    }
    if (o.has("trace_transfers")) {
      s.outputs.trace_transfers =
          parsed("trace_transfers",
                 [](const std::string& t, const std::string& what) { return parse_on_off(t, what); });
    }
    o.finish();
  }
  top.finish();
  if (s.price_per_gpu_hour && s.train_tokens == 0) {
    s.warnings.emplace_back(kPriceWithoutTokens);
  }
  return s;
}

std::string read_scenario_text(const std::string& path) {
  // (16 MiB: a scenario is a page of YAML; /dev/zero is refused, not read forever)
  try {
    return read_input_file(path, "scenario file", std::int64_t{16} << 20);
  } catch (const InputError& e) {
    throw ScenarioError(e.what());
  }
}

namespace {

/// An error about a key of the file that the command line did not set may
/// still follow from what it set (`--set parallelism.tp=3` and the file's
/// dp no longer fits): such an error ends with the --set options given,
/// unless the file without them fails the same way (a section the file
/// lacks is no fault of `--set training.micro_batch=2`).
template <typename F>
Scenario naming_sets(const std::vector<Override>& overrides, F&& parse) {
  try {
    return parse(overrides);
  } catch (const ScenarioError& e) {
    std::string sets;
    std::vector<Override> flags_only;
    for (const auto& o : overrides) {
      if (o.flag.empty()) {
        sets += fmt::format("{}--set {}={}", sets.empty() ? "" : ", ", o.path, o.value);
      } else {
        flags_only.push_back(o);
      }
    }
    if (!e.option().empty() || sets.empty()) throw;
    bool same_without_sets = false;
    try {
      (void)parse(flags_only);
    } catch (const ScenarioError& without) {
      same_without_sets = std::string_view(without.what()) == e.what();
    } catch (const std::exception&) {
    }
    if (same_without_sets) throw;
    if (e.detail().empty()) throw ScenarioError(fmt::format("{} (with {})", e.what(), sets));
    throw ScenarioError(e.where(), fmt::format("{} (with {})", e.detail(), sets));
  }
}

}  // namespace

Scenario load_scenario(const std::string& path, const std::vector<Override>& overrides) {
  const std::string text = read_scenario_text(path);
  return naming_sets(overrides,
                     [&](const std::vector<Override>& sets) { return parse_scenario(text, path, sets); });
}

Scenario load_cluster_scenario(const std::string& path, const std::vector<Override>& overrides) {
  const std::string text = read_scenario_text(path);
  return naming_sets(
      overrides, [&](const std::vector<Override>& sets) { return parse_cluster_scenario(text, path, sets); });
}

std::vector<std::string> take_set_options(const std::vector<std::string>& args, std::vector<std::string>& sets) {
  std::vector<std::string> rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--set") {
      if (i + 1 == args.size()) throw UsageError("--set: expected KEY=VALUE after it");
      sets.push_back(args[++i]);
    } else if (args[i].rfind("--set=", 0) == 0) {
      sets.push_back(args[i].substr(6));
    } else {
      rest.push_back(args[i]);
    }
  }
  return rest;
}

void declare_scenario_options(ArgParser& p) {
  // `set` is taken out before parsing (take_set_options; sweep's lists):
  // declared so that a mistyped --sett is told about it.
  p.option("backend").option("predictor").option("set");
}

std::vector<Override> parse_overrides(const std::vector<std::string>& sets) {
  std::vector<Override> out;
  out.reserve(sets.size() + 2);
  for (const auto& text : sets) out.push_back(parse_override(text));
  return out;
}

std::string shell_word(const std::string& word) {
  const bool plain =
      !word.empty() &&
      word.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:/=,+-") ==
          std::string::npos;
  if (plain) return word;
  std::string quoted = "'";
  for (const char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string override_flags(const std::vector<Override>& overrides) {
  std::string out;
  for (const Override& o : overrides) {
    if (!out.empty()) out += ' ';
    if (o.flag == "--backend" || o.flag == "--predictor") {
      out += o.flag + " " + shell_word(o.value);
    } else {
      out += "--set " + shell_word(o.path + "=" + o.value);
    }
  }
  return out;
}

std::vector<Override> scenario_overrides(const std::vector<std::string>& sets, const ArgParser& p) {
  std::vector<Override> out = parse_overrides(sets);
  if (auto b = p.get("backend")) out.push_back(Override{"backend", *b, "--backend"});
  if (auto pr = p.get("predictor")) out.push_back(Override{"predictor", *pr, "--predictor"});
  return out;
}

}  // namespace tessera::cli
