#include "tessera/node_model/model_graph.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <stdexcept>
#include <unordered_map>

#include "tessera/error.hpp"
#include "tessera/node_model/csv.hpp"
#include "tessera/node_model/device_config.hpp"
#include "tessera/node_model/roofline.hpp"
#include "tessera/node_model/workload.hpp"

namespace tessera::node_model {
namespace {

std::int64_t get_int(const JsonValue& c, std::initializer_list<const char*> keys, const std::string& source,
                     std::int64_t fallback = -1) {
  for (const char* k : keys) {
    // A null is Hugging Face's "the default" (GPT-2's "n_inner": null is 4 x
    // n_embd): absent, where there is a default (helper 120: refused).
    if (const JsonValue* v = c.find(k); v != nullptr && !(v->is_null() && fallback > 0)) {
      // (at most 2^24: larger than any model's dimension, small enough that
      // products of dimensions stay exact)
      constexpr double kMax = 16777216;
      if (!v->is_number() || v->number() <= 0 || v->number() != std::floor(v->number()) || v->number() > kMax) {
        throw InputError(fmt::format("{}: key '{}' must be a whole number from 1 to {:.0f}{}", source, k, kMax,
                                     v->is_number() ? fmt::format(" (got {:g})", v->number()) : std::string()));
      }
      return static_cast<std::int64_t>(v->number());
    }
  }
  if (fallback > 0) return fallback;
  throw InputError(fmt::format("{}: missing key '{}'", source, *keys.begin()));
}

/// Collects kernels. The forward and backward kernels of every op come from
/// the shared rule table (workload.hpp), PyTorch eager FP32 profile: the
/// planner builds on the same rules.
class GraphBuilder {
 public:
  // NeuSight's per-op backward latencies include the addition to `.grad`
  // (zero_grad(set_to_none=False), PyTorch 1.x): every backward accumulates.
  GraphBuilder(bool train, DType dtype)
      : train_(train),
        rules_(Framework::PyTorchEager, dtype, ProfileOptions{.eager_accumulate_every_backward = true}) {}

  void linear(const std::string& name, std::int64_t rows, std::int64_t in, std::int64_t out, double count = 1,
              bool bias = true) {
    add(rules_.linear(name, rows, in, out, bias), count);
  }
  void bmm(const std::string& name, std::int64_t b, std::int64_t m, std::int64_t n, std::int64_t k, double count = 1) {
    add(rules_.bmm(name, b, m, n, k), count);
  }
  /// Elementwise op; `bw_kernels` = elementwise kernels its gradient needs.
  void elem(const std::string& name, KernelOp op, std::int64_t rows, std::int64_t cols, int bw_kernels,
            double count = 1) {
    add(rules_.elementwise(name, op, rows, cols, bw_kernels), count);
  }
  void softmax(const std::string& name, std::int64_t rows, std::int64_t cols, double count = 1) {
    add(rules_.softmax(name, rows, cols), count);
  }
  void layer_norm(const std::string& name, std::int64_t rows, std::int64_t cols, double count = 1) {
    add(rules_.layer_norm(name, rows, cols), count);
  }
  void copy(const std::string& name, std::int64_t elements, double count = 1, bool grad = true) {
    add(rules_.copy(name, elements, grad), count);
  }
  void embedding(const std::string& name, std::int64_t tokens, std::int64_t rows, std::int64_t hidden) {
    add(rules_.embedding(name, tokens, rows, hidden), 1);
  }
  /// Dropout is active only in training.
  void dropout(const std::string& name, std::int64_t rows, std::int64_t cols, double count = 1) {
    if (train_) add(rules_.dropout(name, rows, cols), count);
  }

  std::vector<GraphOp> take() { return std::move(ops_); }

 private:
  void add(const OpKernels& op, double count) {
    for (std::size_t k = 0; k < op.forward.kernels.size(); ++k)
      ops_.push_back({op.name, op.forward.kernels[k], Phase::Forward, count, op.forward.part[k]});
    if (!train_) return;
    int i = 0;
    for (const Pass* p : {&op.input_grad, &op.weight_grad}) {
      for (std::size_t k = 0; k < p->kernels.size(); ++k) {
        ops_.push_back(
            {fmt::format("{}.bw{}", op.name, i++), p->kernels[k], Phase::Backward, count, p->part[k]});
      }
    }
  }

  bool train_;
  OpRules rules_;
  std::vector<GraphOp> ops_;
};

void gpt_gelu(GraphBuilder& g, const std::string& p, std::int64_t rows, std::int64_t cols, double n) {
  // gelu_new as HF writes it: 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))).
  g.elem(p + ".mul", KernelOp::MulU, rows, cols, 1, n);
  g.elem(p + ".pow", KernelOp::PowU, rows, cols, 2, n);
  g.elem(p + ".mul1", KernelOp::MulU, rows, cols, 1, n);
  g.elem(p + ".add", KernelOp::Add, rows, cols, 0, n);
  g.elem(p + ".mul2", KernelOp::MulU, rows, cols, 1, n);
  g.elem(p + ".tanh", KernelOp::Tanh, rows, cols, 1, n);
  g.elem(p + ".add1", KernelOp::AddU, rows, cols, 0, n);
  g.elem(p + ".mul3", KernelOp::Mul, rows, cols, 2, n);
}

}  // namespace

ModelShape model_shape_from_config(const JsonValue& c, const std::string& source) {
  if (!c.is_object()) throw InputError(fmt::format("{}: a model config must be a JSON object", source));
  ModelShape m;
  const JsonValue* type = c.find("model_type");
  if (type == nullptr || !type->is_string()) throw InputError(fmt::format("{}: missing key 'model_type'", source));
  const std::string& t = type->string();
  if (t == "gpt2" || t == "gpt_neo" || t == "gpt3") {
    m.family = "gpt2";
    m.hidden = get_int(c, {"n_embd", "hidden_size"}, source);
    // (GPT-Neo names them num_heads, num_layers and intermediate_size)
    m.heads = get_int(c, {"n_head", "num_attention_heads", "num_heads"}, source);
    m.layers = get_int(c, {"n_layer", "num_hidden_layers", "num_layers"}, source);
    m.ffn = get_int(c, {"n_inner", "intermediate_size"}, source, 4 * m.hidden);
    m.vocab = get_int(c, {"vocab_size"}, source);
  } else if (t == "opt") {
    m.family = "opt";
    m.hidden = get_int(c, {"hidden_size"}, source);
    m.heads = get_int(c, {"num_attention_heads"}, source);
    m.layers = get_int(c, {"num_hidden_layers"}, source);
    m.ffn = get_int(c, {"ffn_dim"}, source);
    m.vocab = get_int(c, {"vocab_size"}, source);
  } else if (t == "bert") {
    m.family = "bert";
    m.hidden = get_int(c, {"hidden_size"}, source);
    m.heads = get_int(c, {"num_attention_heads"}, source);
    m.layers = get_int(c, {"num_hidden_layers"}, source);
    m.ffn = get_int(c, {"intermediate_size"}, source);
    m.vocab = get_int(c, {"vocab_size"}, source);
    m.type_vocab = get_int(c, {"type_vocab_size"}, source, 2);
  } else if (t == "switch_transformers") {
    m.family = "switch";
    m.hidden = get_int(c, {"d_model"}, source);
    m.heads = get_int(c, {"num_heads"}, source);
    m.layers = get_int(c, {"num_layers"}, source);
    m.decoder_layers = get_int(c, {"num_decoder_layers"}, source, m.layers);
    m.ffn = get_int(c, {"d_ff"}, source);
    m.vocab = get_int(c, {"vocab_size"}, source);
    m.experts = get_int(c, {"num_experts"}, source, 1);
    m.head_dim = get_int(c, {"d_kv"}, source, m.hidden / m.heads);
  } else {
    throw InputError(fmt::format("{}: unsupported model_type '{}' (gpt2, opt, bert, switch_transformers)", source, t));
  }
  if (m.hidden % m.heads != 0) {
    throw InputError(fmt::format("{}: hidden size {} is not a multiple of the {} heads", source, m.hidden, m.heads));
  }
  // The MLP's activation: the config's, else the family's default.
  const char* act_key = m.family == "bert"     ? "hidden_act"
                        : m.family == "switch" ? "dense_act_fn"
                                               : "activation_function";
  m.activation = m.family == "gpt2" ? "gelu_new" : m.family == "bert" ? "gelu" : "relu";
  if (const JsonValue* a = c.find(act_key); a != nullptr) {
    if (!a->is_string()) throw InputError(fmt::format("{}: key '{}' must be a string", source, act_key));
    m.activation = a->string();
    if (m.activation != "gelu_new" && m.activation != "gelu" && m.activation != "gelu_pytorch_tanh" &&
        m.activation != "relu") {
      throw InputError(
          fmt::format("{}: {} '{}' is not one the graph builds "
                      "(gelu_new, gelu, gelu_pytorch_tanh, relu)",
                      source, act_key, m.activation));
    }
  }
  if (m.family == "opt") {
    const std::int64_t proj = get_int(c, {"word_embed_proj_dim"}, source, m.hidden);
    m.embed_proj = proj == m.hidden ? 0 : proj;
    if (const JsonValue* before = c.find("do_layer_norm_before"); before != nullptr) {
      if (!before->is_bool()) {
        throw InputError(fmt::format("{}: key 'do_layer_norm_before' must be true or false", source));
      }
      m.post_norm = !before->boolean();
    }
  }
  if (m.family == "bert") m.post_norm = true;
  if (const JsonValue* d = c.find("torch_dtype"); d != nullptr && d->is_string()) m.torch_dtype = d->string();
  if (m.family != "switch") {
    for (const char* key : {"n_positions", "max_position_embeddings"}) {
      if (c.find(key) == nullptr) continue;
      m.max_seq = get_int(c, {key}, source);
      m.max_seq_key = key;
      break;
    }
  }
  return m;
}

std::int64_t embedding_table_rows(const ModelShape& m, const std::string& module, std::int64_t seq) {
  const std::size_t dot = module.rfind('.');
  const std::string name = dot == std::string::npos ? module : module.substr(dot + 1);
  // nn.Embedding(max_positions, hidden): the whole table, whatever the
  // sequence (its gradient is zeroed and accumulated whole).
  const std::int64_t positions = m.max_seq > 0 ? m.max_seq : seq;
  if (name == "wte" || name == "embed_tokens" || name == "word_embeddings" || name == "shared")
    return m.vocab;
  if (name == "wpe" || name == "position_embeddings") return positions;
  if (name == "embed_positions" && m.family == "opt")
    return positions + 2;  // OPTLearnedPositionalEmbedding's offset
  if (name == "token_type_embeddings" && m.type_vocab > 0) return m.type_vocab;
  return 0;
}

std::vector<GraphOp> build_model_graph(const ModelShape& m, std::int64_t batch, std::int64_t seq, bool train,
                                       DType dtype) {
  if (batch <= 0 || seq <= 0) throw InputError("batch and sequence length must be positive");
  if (m.max_seq > 0 && seq > m.max_seq) {
    throw InputError(
        fmt::format("sequence length {} is longer than the model's {} learned positions ({} in its config)",
                    seq, m.max_seq, m.max_seq_key));
  }
  GraphBuilder g(train, dtype);
  const std::int64_t tokens = batch * seq;
  const std::int64_t hidden = m.hidden;
  const std::int64_t nh = m.heads;
  const std::int64_t dh = m.head_dim > 0 ? m.head_dim : hidden / nh;
  // The attention's inner width (T5/Switch: heads * d_kv, may differ from hidden).
  const std::int64_t attn_width = nh * dh;
  const std::int64_t ffn_width = m.ffn;
  const std::int64_t attn_rows = batch * nh * seq;

  // One transformer block (self-attention + MLP), repeated `n` times.
  // Layer norms after the residual adds: BERT's, OPT's with do_layer_norm_before false.
  const bool post_norm = m.post_norm;
  auto block = [&](const std::string& p, double n, bool causal, std::int64_t ffn, bool separate_qkv) {
    if (!post_norm) g.layer_norm(p + ".ln1", tokens, hidden, n);
    if (separate_qkv) {
      g.linear(p + ".q", tokens, hidden, attn_width, n);
      g.linear(p + ".k", tokens, hidden, attn_width, n);
      g.linear(p + ".v", tokens, hidden, attn_width, n);
    } else {
      g.linear(p + ".qkv", tokens, hidden, 3 * hidden, n);
    }
    if (m.family == "opt") g.elem(p + ".scale", KernelOp::MulU, tokens, hidden, 1, n);
    if (m.family == "opt" || m.family == "switch") g.copy(p + ".contiguous_qkv", 3 * tokens * attn_width, n);
    g.bmm(p + ".qk", batch * nh, seq, seq, dh, n);
    if (m.family != "opt" && m.family != "switch") g.elem(p + ".div", KernelOp::DivU, attn_rows, seq, 1, n);
    // GPT-2 masks with torch.where, whose backward selects the gradient (one
    // kernel: `where` in the measured graphs); BERT and OPT add the mask,
    // whose backward passes the gradient through.
    g.elem(p + ".mask", KernelOp::Add, attn_rows, seq, m.family == "gpt2" ? 1 : 0, n);
    if (causal && m.family == "opt") g.elem(p + ".max", KernelOp::Add, attn_rows, seq, 2, n);
    g.softmax(p + ".softmax", attn_rows, seq, n);
    if (m.family != "opt") g.dropout(p + ".attn_drop", attn_rows, seq, n);
    g.bmm(p + ".pv", batch * nh, seq, dh, seq, n);
    g.copy(p + ".contiguous", tokens * attn_width, n);
    g.linear(p + ".out", tokens, attn_width, hidden, n);
    g.dropout(p + ".drop1", tokens, hidden, n);
    g.elem(p + ".res1", KernelOp::Add, tokens, hidden, 0, n);
    if (post_norm) g.layer_norm(p + ".ln1", tokens, hidden, n);
    if (!post_norm) g.layer_norm(p + ".ln2", tokens, hidden, n);
    g.linear(p + ".fc1", tokens, hidden, ffn, n);
    if (m.activation == "gelu_new") {
      gpt_gelu(g, p + ".gelu", tokens, ffn, n);
    } else {
      g.elem(p + ".act", m.activation == "relu" ? KernelOp::Relu : KernelOp::Gelu, tokens, ffn, 1, n);
    }
    g.linear(p + ".fc2", tokens, ffn, hidden, n);
    g.dropout(p + ".drop2", tokens, hidden, n);
    g.elem(p + ".res2", KernelOp::Add, tokens, hidden, 0, n);
    if (post_norm) g.layer_norm(p + ".ln2", tokens, hidden, n);
  };

  const double layers = static_cast<double>(m.layers);
  if (m.family == "gpt2") {
    g.embedding("wte", tokens, embedding_table_rows(m, "wte", seq), hidden);
    g.embedding("wpe", seq, embedding_table_rows(m, "wpe", seq), hidden);
    g.elem("emb_add", KernelOp::Add, tokens, hidden, 0);
    g.dropout("emb_drop", tokens, hidden);
    block("h", layers, true, ffn_width, false);
    g.layer_norm("ln_f", tokens, hidden);
    g.linear("lm_head", tokens, hidden, m.vocab);
  } else if (m.family == "opt") {
    // word_embed_proj_dim: the token embeddings and the LM head that wide,
    // projected in and out of the layers' width (OPT-350m).
    const std::int64_t embed = m.embed_proj > 0 ? m.embed_proj : hidden;
    g.embedding("embed_tokens", tokens, embedding_table_rows(m, "embed_tokens", seq), embed);
    if (m.embed_proj > 0) g.linear("project_in", tokens, embed, hidden, 1, false);  // bias=False in HF
    g.embedding("embed_positions", tokens, embedding_table_rows(m, "embed_positions", seq), hidden);
    g.elem("emb_add", KernelOp::Add, tokens, hidden, 0);
    block("layers", layers, true, ffn_width, true);
    if (!post_norm) g.layer_norm("final_layer_norm", tokens, hidden);
    if (m.embed_proj > 0) g.linear("project_out", tokens, hidden, embed, 1, false);
    g.linear("lm_head", tokens, embed, m.vocab);
  } else if (m.family == "bert") {
    g.embedding("word_embeddings", tokens, embedding_table_rows(m, "word_embeddings", seq), hidden);
    g.embedding("token_type_embeddings", tokens, embedding_table_rows(m, "token_type_embeddings", seq),
                hidden);
    g.elem("emb_add", KernelOp::Add, tokens, hidden, 0);
    g.embedding("position_embeddings", seq, embedding_table_rows(m, "position_embeddings", seq), hidden);
    g.elem("emb_add2", KernelOp::Add, tokens, hidden, 0);
    g.layer_norm("emb_ln", tokens, hidden);
    g.dropout("emb_drop", tokens, hidden);
    block("layer", layers, false, ffn_width, true);
    g.linear("pooler", batch, hidden, hidden);
    g.elem("pooler_act", KernelOp::Tanh, batch, hidden, 1);
    g.linear("classifier", batch, hidden, 2);
  } else {  // switch: encoder-decoder; every other FFN is a top-1 mixture of experts.
    g.embedding("shared", tokens, embedding_table_rows(m, "shared", seq), hidden);
    const double enc_dense = std::ceil(layers / 2.0);
    const double enc_sparse = layers - enc_dense;
    block("encoder.dense", enc_dense, false, ffn_width, true);
    // A top-1 router sends each token to one expert: the expert FFNs together
    // see all the tokens; the router adds one small GEMM and a softmax.
    block("encoder.sparse", enc_sparse, false, ffn_width, true);
    g.linear("encoder.router", tokens, hidden, m.experts, enc_sparse);
    g.softmax("encoder.router_softmax", tokens, m.experts, enc_sparse);
    const double decoder_layers = static_cast<double>(m.decoder_layers);
    const double dec_dense = std::ceil(decoder_layers / 2.0);
    block("decoder.dense", dec_dense, true, ffn_width, true);
    block("decoder.sparse", decoder_layers - dec_dense, true, ffn_width, true);
    // Cross-attention of every decoder layer.
    g.linear("decoder.cross_q", tokens, hidden, attn_width, decoder_layers);
    g.linear("decoder.cross_kv", tokens, hidden, 2 * attn_width, decoder_layers);
    g.bmm("decoder.cross_qk", batch * nh, seq, seq, dh, decoder_layers);
    g.softmax("decoder.cross_softmax", attn_rows, seq, decoder_layers);
    g.bmm("decoder.cross_pv", batch * nh, seq, dh, seq, decoder_layers);
    g.linear("decoder.cross_out", tokens, attn_width, hidden, decoder_layers);
    g.layer_norm("decoder.cross_ln", tokens, hidden, decoder_layers);
    g.linear("lm_head", tokens, hidden, m.vocab);
  }
  return g.take();
}

GraphTimes predict_graph_times(const std::vector<GraphOp>& ops, const KernelPredictor& p) {
  GraphTimes t;
  for (const auto& op : ops) {
    const double ms = p.predict_eager(op.kernel, op.fused_part).ms() * op.count;
    (op.phase == Phase::Forward ? t.fw_ms : t.bw_ms) += ms;
  }
  return t;
}

// ---------------------------------------------------------------- fx graphs

namespace {

std::vector<std::vector<std::int64_t>> parse_shapes(const std::string& text) {
  // "[[4, 1024, 1280], [1]]" or "(4, 1024, 1280)"
  std::vector<std::vector<std::int64_t>> out;
  std::vector<std::int64_t> cur;
  int depth = 0;
  std::string num;
  auto flush = [&]() {
    if (!num.empty()) {
      cur.push_back(std::stoll(num));
      num.clear();
    }
  };
  const bool single = !text.empty() && text.front() == '(';
  for (char c : text) {
    // Shapes are digits, brackets, commas and spaces (torch.fx's repr):
    // anything else would be dropped silently and change the op's class.
    if (std::isdigit(static_cast<unsigned char>(c)) == 0 && std::string_view("[](), ").find(c) == std::string_view::npos) {
      throw InputError(fmt::format("unexpected character '{}' in a shape", c));
    }
    if (c == '[' || c == '(') {
      ++depth;
      if (depth > 4) throw InputError("shapes nested deeper than 4 levels");
      if ((single && depth == 1) || depth == 2) cur.clear();
    } else if (c == ']' || c == ')') {
      flush();
      if ((single && depth == 1) || depth == 2) out.push_back(cur);
      if (--depth < 0) throw InputError(fmt::format("'{}' closes a bracket never opened", c));
    } else if (std::isdigit(static_cast<unsigned char>(c)) != 0) {
      num += c;
    } else {
      flush();
    }
  }
  // "[[4, 1024" (a cell cut short) would read as no shape at all.
  if (depth != 0) throw InputError(fmt::format("{} bracket{} never closed", depth, depth == 1 ? "" : "s"));
  return out;
}

std::int64_t product(const std::vector<std::int64_t>& s, std::size_t from = 0, std::size_t to = std::string::npos) {
  std::int64_t p = 1;
  const std::size_t end = std::min(to, s.size());
  for (auto it = s.begin() + static_cast<std::ptrdiff_t>(std::min(from, end)); it != s.begin() + static_cast<std::ptrdiff_t>(end); ++it) {
    p *= *it;
  }
  return p;
}

}  // namespace

int label_layers(const JsonValue& label, const std::string& source) {
  const JsonValue* n = label.find("num_layer");
  if (n == nullptr) throw InputError(fmt::format("{}: missing key 'num_layer'", source));
  constexpr double kMax = 100000;
  if (!n->is_number() || !std::isfinite(n->number()) || n->number() < 1 || n->number() > kMax ||
      n->number() != std::floor(n->number())) {
    throw InputError(fmt::format("{}: key 'num_layer' must be a whole number from 1 to {:.0f}{}", source, kMax,
                                 n->is_number() ? fmt::format(" (got {:g})", n->number()) : std::string()));
  }
  return static_cast<int>(n->number());
}

std::optional<NeuSightRunName> parse_neusight_run_name(const std::string& file_name,
                                                       std::string_view extension) {
  static const std::regex kName(R"(^(.+)-(inf|train)-([0-9]+)-([0-9]+)$)");
  if (!file_name.ends_with(extension)) return std::nullopt;
  const std::string stem = file_name.substr(0, file_name.size() - extension.size());
  std::smatch m;
  if (!std::regex_match(stem, m, kName)) return std::nullopt;
  return NeuSightRunName{m[1].str(), m[2].str(), m[3].str(), m[4].str()};
}

FxGraph read_fx_graph(const std::string& path, const ModelShape* model) {
  return fx_graph_from_csv(read_csv(path), path, model);
}

FxGraph fx_graph_from_csv(const CsvTable& t, const std::string& path, const ModelShape* model) {
  const std::size_t c_op = t.require_column("op");
  const std::size_t c_target = t.require_column("target");
  const std::size_t c_meta = t.require_column("meta");
  const std::size_t c_in = t.require_column("input_shapes");
  const std::size_t c_out = t.require_column("output_shape");
  const std::size_t c_lat = t.require_column("latency");
  const int c_fw = t.column("fw_latency");
  const int c_bw = t.column("bw_latency");
  // With a backward column, 'latency' is forward + backward: not a stand-in
  // for the forward.
  if (c_bw >= 0 && c_fw < 0) {
    throw InputError(
        fmt::format("{}: missing column 'fw_latency' (a graph with 'bw_latency' needs its forward "
                    "times; 'latency' is forward + backward)",
                    path));
  }
  if (t.rows.empty()) throw InputError(fmt::format("{}: no ops (a header line, then one op per row)", path));
  const int c_name = t.column("Name");
  static const std::regex kLayer(R"(\.(h|layer|layers|block)\.0[.'])");
  // A training graph is one whose ops measured a backward pass; in an
  // inference graph the model ran in eval mode, where dropout is the identity.
  bool train = false;
  if (c_bw >= 0) {
    for (std::size_t r = 0; r < t.rows.size() && !train; ++r) train = t.number(r, c_bw) > 0.0;
  }
  const int c_acc = t.column("acc_latency");
  // Optional: each node's output dtype, a call's arguments and whether its
  // inputs are contiguous, to tell a conversion that returns its input.
  const int c_dtype = t.column("dtype");
  const int c_args = t.column("_args");
  const int c_in_contiguous = t.column("input_contiguous");
  std::unordered_map<std::string, std::string> dtype_of;  // node name -> its output dtype
  FxGraph graph;
  graph.train = train;
  for (std::size_t r = 0; r < t.rows.size(); ++r) {
    const auto& row = t.rows[r];
    FxOp op;
    op.row = static_cast<int>(r + 1);
    op.name = c_name >= 0 ? row[c_name] : fmt::format("row{}", r + 1);
    if (c_name >= 0 && c_dtype >= 0 && !row[c_dtype].empty()) dtype_of[op.name] = row[c_dtype];
    op.target = row[c_target];
    op.in_layer = std::regex_search(row[c_meta], kLayer);
    op.measured_ms = t.number(r, c_lat);
    op.measured_fw_ms = c_fw >= 0 ? t.number(r, c_fw) : op.measured_ms;
    op.measured_bw_ms = (c_bw >= 0 ? t.number(r, c_bw) : 0.0) + (c_acc >= 0 ? t.number(r, c_acc) : 0.0);
    const std::string& kind = row[c_op];
    std::vector<std::vector<std::int64_t>> in;
    std::vector<std::vector<std::int64_t>> outs;
    try {
      in = parse_shapes(row[c_in]);
      outs = parse_shapes(row[c_out]);
    } catch (const std::exception& e) {
      throw InputError(fmt::format(
          "{}: {}, columns 'input_shapes'/'output_shape': cannot parse shapes ({})", path, t.row_name(r),
          dynamic_cast<const std::out_of_range*>(&e) != nullptr ? "a dimension past int64" : e.what()));
    }
    for (const auto* shapes : {&in, &outs}) {
      for (const auto& s : *shapes) {
        // Over the nonzero dimensions: a zero makes the shape empty but not
        // the partial products (product() of a sub-range) that come before it.
        double elements = 1;
        for (const auto d : s) elements *= d == 0 ? 1.0 : static_cast<double>(d);
        if (elements > 9.2e18) {
          throw InputError(
              fmt::format("{}: {}: a shape whose dimensions multiply past 2^63", path, t.row_name(r)));
        }
      }
    }
    for (const auto& [value, column] : {std::pair{op.measured_ms, "latency"}, std::pair{op.measured_fw_ms, "fw_latency"},
                                        std::pair{op.measured_bw_ms, "bw_latency"}}) {
      if (!std::isfinite(value) || value < 0) {
        throw InputError(fmt::format("{}: {}, column '{}': a latency must be a finite number >= 0 (got {})",
                                     path, t.row_name(r), column, value));
      }
    }
    // torch.fx's node kinds: another is a damaged row, which would drop out
    // of the totals as an op without a kernel rule (helper 143).
    if (kind != "placeholder" && kind != "get_attr" && kind != "output" && kind != "call_module" &&
        kind != "call_function" && kind != "call_method") {
      throw InputError(
          fmt::format("{}: {}, column 'op': unknown node kind '{}' (torch.fx's are placeholder, "
                      "get_attr, call_function, call_method, call_module and output)",
                      path, t.row_name(r), kind));
    }
    if (kind == "placeholder" || kind == "get_attr" || kind == "output" || outs.empty()) {
      graph.ops.push_back(std::move(op));
      continue;
    }
    const auto& out = outs.front();
    const std::int64_t numel = product(out);
    const std::int64_t last = out.empty() ? 1 : out.back();
    const std::int64_t rows = std::max<std::int64_t>(1, numel / std::max<std::int64_t>(1, last));
    const std::string& target = op.target;
    const std::string& meta = row[c_meta];
    auto has = [&](const char* s) { return target.find(s) != std::string::npos; };
    // Size of the innermost module of this row (the last entry of the stack).
    const std::size_t last_mod = meta.rfind("<class '");
    const std::string module = last_mod == std::string::npos ? "" : meta.substr(last_mod);
    const bool is_module = kind == "call_module";
    auto module_is = [&](const char* s) { return is_module && module.find(s) != std::string::npos; };
    // PyTorch returns the tensor itself from .to() / .float() to the dtype
    // it has, and from .contiguous() on a contiguous one: no kernel (GPT-2's
    // mask `.to(dtype)` measured 0.0066 ms where a copy would take 0.43).
    bool returns_input = false;
    if ((target == "to" || target == "float") && c_dtype >= 0 && c_args >= 0 && !row[c_dtype].empty()) {
      // The first argument's node: "(truediv, getattr_8)" -> "truediv".
      const std::string& args = row[c_args];
      const std::size_t from = args.find_first_not_of("( ");
      const std::size_t to = args.find_first_of(",) ", from == std::string::npos ? args.size() : from);
      if (from != std::string::npos) {
        const auto in_dtype = dtype_of.find(args.substr(from, to - from));
        returns_input = in_dtype != dtype_of.end() && in_dtype->second == row[c_dtype];
      }
    }
    if (target == "contiguous" && c_in_contiguous >= 0) {
      returns_input = row[c_in_contiguous].find("False") == std::string::npos &&
                      row[c_in_contiguous].find("True") != std::string::npos;
    }
    // The same builder as the analytic graphs, so an fx op gets the same
    // forward kernels and the same backward rules as its analytic twin.
    GraphBuilder g(train, DType::FP32);
    const std::string& n = op.name;
    if (returns_input) {
      // no kernel
    } else if (has("addmm") && in.size() == 3 && in[1].size() == 2 && in[2].size() == 2) {
      g.linear(n, in[1][0], in[1][1], in[2][1]);
    } else if ((module_is("Linear") || module_is("Conv1D")) && !in.empty() && !in[0].empty()) {
      const std::int64_t k = in[0].back();
      g.linear(n, product(in[0]) / k, k, last);
    } else if ((has("matmul") || has("bmm")) && in.size() >= 2 && in[0].size() >= 2 && in[1].size() >= 2) {
      const auto& a = in[0];
      const auto& b = in[1];
      g.bmm(n, product(a, 0, a.size() - 2), a[a.size() - 2], b.back(), a.back());
    } else if (has("softmax")) {
      g.softmax(n, rows, last);
    } else if (module_is("LayerNorm")) {
      g.layer_norm(n, rows, last);
    } else if (module_is("Embedding") || has("embedding")) {
      // The analytic graph's rule: a gather forward; backward the table
      // gradient zeroed, the tokens scatter-added, the table accumulated
      // into .grad. The table's size is not in the graph: its model's config
      // gives it (a module call's target names the table, `transformer.wte`).
      const std::int64_t table =
          model != nullptr && is_module ? embedding_table_rows(*model, target, rows) : 0;
      op.table_unknown = train && table == 0;
      g.embedding(n, rows, table, last);
    } else if (target == "contiguous" || target == "to" || target == "float") {
      g.copy(n, numel);
    } else if (has("dropout") || module_is("Dropout")) {
      if (numel > 1) g.dropout(n, rows, last);
    } else if (numel > 1 && (has("gelu") || module_is("GELU"))) {
      g.elem(n, KernelOp::Gelu, rows, last, 1);
    } else if (numel > 1 && (has("relu") || module_is("ReLU"))) {
      g.elem(n, KernelOp::Relu, rows, last, 1);
    } else if (numel > 1 && (has("tanh") || module_is("Tanh"))) {
      g.elem(n, KernelOp::Tanh, rows, last, 1);
    } else if (numel > 1 && has("pow")) {
      g.elem(n, KernelOp::PowU, rows, last, 2);
    } else if (numel > 1 && (has("add") || has("sub") || has("mul") || has("truediv") || has("where") ||
                             has("max") || has("masked_fill"))) {
      int big_inputs = 0;
      for (const auto& s : in) big_inputs += product(s) > 1 ? 1 : 0;
      const bool binary = big_inputs >= 2;
      // Gradient kernels: none for a sum (the gradient passes through), one
      // per input for a product or quotient, one select for where/max/fill.
      KernelOp k = binary ? KernelOp::Add : KernelOp::AddU;
      int bw = has("where") || has("max") || has("masked_fill") ? 1 : 0;
      if (has("mul")) {
        k = binary ? KernelOp::Mul : KernelOp::MulU;
        bw = binary ? 2 : 1;
      } else if (has("truediv")) {
        k = binary ? KernelOp::Div : KernelOp::DivU;
        bw = binary ? 2 : 1;
      }
      g.elem(n, k, rows, last, bw);
    }
    // The row's floating-point dtype (a bf16 graph's kernels are bf16);
    // others (int64, bool) and none keep the builder's fp32.
    const std::optional<DType> dtype = c_dtype >= 0 ? try_parse_dtype(row[c_dtype]) : std::nullopt;
    for (const GraphOp& k : g.take()) {
      const bool forward = k.phase == Phase::Forward;
      auto& list = forward ? op.kernels : op.bw_kernels;
      auto& parts = forward ? op.fused_parts : op.bw_fused_parts;
      Kernel kernel = k.kernel;
      if (dtype) kernel.dtype = *dtype;
      for (int i = 0; i < static_cast<int>(std::lround(k.count)); ++i) {
        list.push_back(kernel);
        parts.push_back(k.fused_part);
      }
    }
    graph.ops.push_back(std::move(op));
  }
  return graph;
}

GraphTimes measured_fx_times(const FxGraph& graph, double layers) {
  GraphTimes t;
  for (const auto& op : graph.ops) {
    const double w = op.in_layer ? layers : 1.0;
    t.fw_ms += w * op.measured_fw_ms;
    t.bw_ms += w * op.measured_bw_ms;
  }
  return t;
}

// ---------------------------------------------------------------- validation

std::vector<ModelErrorRow> validate_models(const std::string& labels_dir,
                                           const std::string& model_configs_dir, const DeviceCatalog& catalog,
                                           const PredictorFactory& make, const std::string& gpu_filter,
                                           std::vector<std::string>* skipped) {
  namespace fs = std::filesystem;
  auto skip = [&](const fs::path& f, const std::string& why) {
    if (skipped != nullptr) skipped->push_back(fmt::format("{}: {}", f.string(), why));
  };
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(labels_dir)) {
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  std::vector<ModelErrorRow> rows;
  std::map<std::string, std::pair<std::unique_ptr<KernelPredictor>, std::unique_ptr<KernelPredictor>>> preds;
  for (const auto& f : files) {
    const std::string fname = f.filename().string();
    const std::optional<NeuSightRunName> run = parse_neusight_run_name(fname, ".json");
    if (!run) {
      // (NeuSight's fused-kernel runs, <run>-fusion.json, are not validated: documented)
      if (!fname.ends_with("-fusion.json")) skip(f, "not named <model>-<inf|train>-<seq>-<batch>.json");
      continue;
    }
    const std::string& model = run->model;
    const fs::path config = fs::path(model_configs_dir) / (model + ".json");
    if (!fs::exists(config)) {
      skip(f, fmt::format("no model config {}", config.string()));
      continue;
    }
    // The GPU: the directory name is the device-config file stem.
    const fs::path dev_file = fs::path(model_configs_dir).parent_path() / "device_configs" /
                              (f.parent_path().filename().string() + ".json");
    if (!fs::exists(dev_file)) {
      skip(f, fmt::format("no device config {}", dev_file.string()));
      continue;
    }
    // The sequence and batch of its name (helper: a batch of 0 failed
    // without naming the file).
    auto name_number = [&](const std::string& digits, const char* what) {
      constexpr std::size_t kMaxDigits = 9;
      if (digits.size() > kMaxDigits || std::stoll(digits) < 1) {
        throw InputError(fmt::format("{}: its name's {} must be a whole number from 1 to 999999999 (got {})",
                                     f.string(), what, digits));
      }
      return std::stoll(digits);
    };
    const std::int64_t seq = name_number(run->seq, "sequence length");
    const std::int64_t batch = name_number(run->batch, "batch");
    const GpuSpec gpu = load_device_config(dev_file.string());
    if (!gpu_filter.empty() && gpu.name != gpu_filter) continue;
    (void)catalog;
    auto& p = preds[gpu.name];
    if (!p.first) {
      p.first = make(gpu);
      p.second = std::make_unique<RooflinePredictor>(gpu);
    }
    const JsonValue label = read_json_file(f.string());
    const JsonValue* e2e = label.find("e2e_latency");
    if (e2e == nullptr || !e2e->is_number()) {
      skip(f, "no numeric \"e2e_latency\"");
      continue;
    }
    // (helper 120: 0 printed inf% and -3 an error of 6996%)
    if (!std::isfinite(e2e->number()) || e2e->number() <= 0) {
      throw InputError(fmt::format("{}: \"e2e_latency\" must be a positive time in milliseconds (got {})",
                                   f.string(), e2e->number()));
    }
    const ModelShape shape = model_shape_from_config(read_json_file(config.string()), config.string());
    const bool train = run->mode == "train";
    std::vector<GraphOp> graph;
    try {
      graph = build_model_graph(shape, batch, seq, train);
    } catch (const InputError& e) {
      throw InputError(fmt::format("{}: {}", f.string(), e.what()));  // a sequence past the positions
    }
    ModelErrorRow row;
    row.gpu = gpu.name;
    row.model = fmt::format("{}-{}-{}", model, run->seq, run->batch);
    row.mode = run->mode;
    row.measured_ms = e2e->number();
    row.predicted_ms = predict_graph_times(graph, *p.first).e2e_ms();
    row.roofline_ms = predict_graph_times(graph, *p.second).e2e_ms();
    const fs::path fx = fs::path(f).replace_extension(".csv");
    if (fs::exists(fx) && label.find("num_layer") != nullptr) {
      row.ops_ms = measured_fx_times(read_fx_graph(fx.string()), label_layers(label, f)).e2e_ms();
    }
    rows.push_back(row);
  }
  if (!gpu_filter.empty() && rows.empty()) {
    throw InputError(fmt::format("--gpu: no model runs of '{}' in {}", gpu_filter, labels_dir));
  }
  return rows;
}

std::string format_model_errors(const std::vector<ModelErrorRow>& rows, const std::string& predictor) {
  std::string s = fmt::format("{:<24} {:<26} {:<6} {:>12} {:>12} {:>8} {:>10} {:>10} {:>8}\n", "gpu", "model", "mode",
                              "measured_ms", "predicted_ms", "error", "roofline", "ops_ms", "vs_ops");
  struct Stats {
    double sum = 0, roof = 0, worst = 0;
    int n = 0;
    void add(const ModelErrorRow& r) {
      sum += r.error();
      roof += r.roofline_error();
      worst = std::max(worst, r.error());
      ++n;
    }
  };
  std::map<std::string, Stats> by_mode;
  std::map<std::pair<std::string, std::string>, Stats> by_gpu;
  double worst = 0.0;
  for (const auto& r : rows) {
    s += fmt::format("{:<24} {:<26} {:<6} {:>12.1f} {:>12.1f} {:>7.1f}% {:>9.1f}%", r.gpu, r.model, r.mode,
                     r.measured_ms, r.predicted_ms, r.error(), r.roofline_error());
    s += r.ops_ms > 0 ? fmt::format(" {:>10.1f} {:>+7.1f}%\n", r.ops_ms, r.ops_error())
                      : fmt::format(" {:>10} {:>8}\n", "-", "-");
    by_mode[r.mode].add(r);
    by_gpu[{r.gpu, r.mode}].add(r);
    worst = std::max(worst, r.error());
  }
  for (const auto& [key, v] : by_gpu) {
    s += fmt::format("{:<24} {:<5}: mean error {} {:.1f}%, max {:.1f}%, roofline {:.1f}% over {} runs\n", key.first,
                     key.second, predictor, v.sum / v.n, v.worst, v.roof / v.n, v.n);
  }
  for (const auto& [mode, v] : by_mode) {
    s += fmt::format("mean error ({}): {} {:.1f}%, roofline {:.1f}% over {} runs\n", mode, predictor, v.sum / v.n,
                     v.roof / v.n, v.n);
  }
  if (!rows.empty()) s += fmt::format("max error: {:.1f}%\n", worst);
  if (std::any_of(rows.begin(), rows.end(), [](const ModelErrorRow& r) { return r.ops_ms > 0; })) {
    s += "ops_ms: the run's own per-op measurements (its graph CSV) summed, the repeated block times its layers;\n"
         "vs_ops: the prediction against that sum (signed).\n";
  }
  return s;
}

}  // namespace tessera::node_model
