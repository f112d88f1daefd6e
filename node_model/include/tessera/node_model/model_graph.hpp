#pragma once
// Operator graphs of whole models, as lists of kernels: built analytically
// from a HuggingFace config, or read from NeuSight's torch.fx graph CSVs.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/node_model/csv.hpp"
#include "tessera/node_model/json.hpp"
#include "tessera/node_model/validation.hpp"

namespace tessera::node_model {

enum class Phase { Forward, Backward };

/// One kernel launch of a model, with how many times it runs per iteration.
struct GraphOp {
  std::string name;
  Kernel kernel;
  Phase phase = Phase::Forward;
  double count = 1;
  /// A further part of the kernel launched before it (Pass::part): timed
  /// without a launch floor (KernelPredictor::predict_part).
  bool fused_part = false;
};

struct ModelShape {
  std::string family;  ///< gpt2, opt, bert, switch
  std::int64_t hidden = 0, heads = 0, layers = 0, ffn = 0, vocab = 0;
  std::int64_t decoder_layers = 0, experts = 0;  ///< switch
  std::int64_t type_vocab = 0;                   ///< BERT's token types (`type_vocab_size`, default 2)
  std::int64_t head_dim = 0;  ///< per-head q/k/v width (T5/Switch `d_kv`); 0 = hidden / heads
  /// Learned positions (`n_positions`, `max_position_embeddings`): the
  /// longest sequence the model takes; 0 = no limit given (Switch's relative
  /// positions). `max_seq_key` names the config key it came from.
  std::int64_t max_seq = 0;
  std::string max_seq_key;
  /// The MLP's activation as HuggingFace names it (`activation_function`,
  /// `hidden_act`, `dense_act_fn`; the family's default when absent):
  /// `gelu_new` (GPT-2's tanh GeLU composed of 8 elementwise kernels),
  /// `gelu` or `gelu_pytorch_tanh` (one kernel), `relu`.
  std::string activation;
  /// OPT's `word_embed_proj_dim` when it differs from hidden (0: none): the
  /// embeddings and LM head are that wide, with project_in / project_out
  /// linears between them and the layers.
  std::int64_t embed_proj = 0;
  /// Layer norms after the residual adds (BERT; OPT's do_layer_norm_before false).
  bool post_norm = false;
  /// The config's `torch_dtype` ("float16", ...), as written; empty if absent.
  std::string torch_dtype;
};

/// Reads the dimensions of a HuggingFace config; throws InputError naming
/// the file and key (an activation the graph does not build, too).
ModelShape model_shape_from_config(const JsonValue& config, const std::string& source);

/// Rows of the embedding table that a HuggingFace module names (the last
/// part of `module`: `wte`, `embed_tokens`, `word_embeddings` and `shared` the
/// vocabulary; `wpe` and `position_embeddings` the learned positions, OPT's
/// `embed_positions` two more; `token_type_embeddings` BERT's token types);
/// `seq` stands in for positions the config does not give. 0 for a name
/// the model has no table for.
std::int64_t embedding_table_rows(const ModelShape& m, const std::string& module, std::int64_t seq);

/// The kernels PyTorch eager launches for one forward (and, when `train`,
/// backward) pass of the model with `dtype` tensors (FP32: what NeuSight
/// measured; 16-bit: the rule table's eager 16-bit kernels, unvalidated end
/// to end).
std::vector<GraphOp> build_model_graph(const ModelShape& m, std::int64_t batch, std::int64_t seq, bool train,
                                       DType dtype = DType::FP32);

struct GraphTimes {
  double fw_ms = 0, bw_ms = 0;
  [[nodiscard]] double e2e_ms() const { return fw_ms + bw_ms; }
};
GraphTimes predict_graph_times(const std::vector<GraphOp>& ops, const KernelPredictor& p);

/// One row of NeuSight's torch.fx graph CSV with the kernels it maps to.
struct FxOp {
  int row = 0;  ///< its data row in the graph file (1 = the first after the header)
  std::string name;
  std::string target;
  bool in_layer = false;  ///< part of the repeated block (layer 0)
  double measured_ms = 0, measured_fw_ms = 0;
  double measured_bw_ms = 0;  ///< backward plus gradient accumulation (bw_latency + acc_latency)
  std::vector<Kernel> kernels;      ///< forward kernels (empty: treated as free)
  std::vector<Kernel> bw_kernels;   ///< backward kernels, incl. gradient accumulation (training graphs)
  /// Per kernel of `kernels` and of `bw_kernels`: a further part of the
  /// kernel launched before it (GraphOp::fused_part).
  std::vector<bool> fused_parts, bw_fused_parts;
  /// An embedding of a training graph whose table size is not known (no
  /// model config, or a module name it has no table for): its backward is
  /// the scatter-add alone (OpRules::embedding with no table).
  bool table_unknown = false;
};
struct FxGraph {
  bool train = false;  ///< the ops measured a backward pass (else eval mode, where dropout is free)
  std::vector<FxOp> ops;
};
/// Reads a graph CSV; rows the model does not understand get no kernels.
/// Each op gets the kernels and backward rules of `build_model_graph`;
/// `model` (the graph's HuggingFace config, optional) sizes its embedding
/// tables, as `build_model_graph` does.
FxGraph read_fx_graph(const std::string& path, const ModelShape* model = nullptr);
/// The same from a parsed table (`path` names it in messages).
FxGraph fx_graph_from_csv(const CsvTable& t, const std::string& path, const ModelShape* model = nullptr);
/// The parts of a NeuSight run's file name, `<model>-<inf|train>-<seq>-<batch>`
/// then `extension` (".json" for a label, ".csv" for its op graph), as
/// written (the numbers unchecked); none for another name.
struct NeuSightRunName {
  std::string model, mode, seq, batch;
};
std::optional<NeuSightRunName> parse_neusight_run_name(const std::string& file_name,
                                                       std::string_view extension);

/// `num_layer` of a NeuSight label JSON: a whole number from 1 to 100000,
/// else InputError naming `source` and the value.
int label_layers(const JsonValue& label, const std::string& source);

/// Forward and backward milliseconds of a graph's measured ops, the ops of
/// the repeated block (layer 0) counted `layers` times.
GraphTimes measured_fx_times(const FxGraph& graph, double layers);

struct ModelErrorRow {
  std::string gpu, model, mode;
  double measured_ms = 0, predicted_ms = 0, roofline_ms = 0;
  /// The run's own per-op measurements (its fx graph CSV), summed and scaled
  /// by its layer count; 0 when the run has no graph CSV.
  double ops_ms = 0;
  [[nodiscard]] double error() const { return 100.0 * std::abs(predicted_ms / measured_ms - 1.0); }
  /// Signed error of the prediction against the run's own op sum.
  [[nodiscard]] double ops_error() const { return ops_ms > 0 ? 100.0 * (predicted_ms / ops_ms - 1.0) : 0.0; }
  [[nodiscard]] double roofline_error() const { return 100.0 * std::abs(roofline_ms / measured_ms - 1.0); }
};
/// Every labels/<GPU>/<model>-<inf|train>-<seq>-<batch>.json (not -fusion) of
/// a known GPU and model config, with the op sum of the graph CSV beside it.
/// `skipped` (optional) gets one line per label file left out and why (its
/// name, no model or device config, no numeric e2e_latency).
std::vector<ModelErrorRow> validate_models(const std::string& labels_dir,
                                           const std::string& model_configs_dir, const DeviceCatalog& catalog,
                                           const PredictorFactory& make, const std::string& gpu_filter = "",
                                           std::vector<std::string>* skipped = nullptr);
std::string format_model_errors(const std::vector<ModelErrorRow>& rows, const std::string& predictor);

}  // namespace tessera::node_model
