#pragma once
// A small multi-layer perceptron (ReLU hidden layers, linear outputs) and a
// deterministic Adam trainer. Inputs are clamped to the range seen in
// training and standardised, so the network never extrapolates wildly on
// shapes or GPUs far outside its training data.
#include <Eigen/Dense>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace tessera::node_model {

/// Deterministic, platform-independent random numbers (splitmix64).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next();
  /// Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  /// Standard normal (Box-Muller).
  double normal();

 private:
  std::uint64_t s_;
};

class Mlp {
 public:
  Mlp() = default;
  /// `sizes` = {inputs, hidden..., outputs}; He initialisation from `rng`.
  Mlp(const std::vector<int>& sizes, Rng& rng);

  [[nodiscard]] int inputs() const { return w_.empty() ? 0 : static_cast<int>(w_.front().cols()); }
  [[nodiscard]] int outputs() const { return w_.empty() ? 0 : static_cast<int>(w_.back().rows()); }
  [[nodiscard]] bool empty() const { return w_.empty(); }

  /// Sets the input clamp range and standardisation from raw training inputs (features x samples).
  void fit_normalization(const Eigen::MatrixXd& x);
  /// Raw features (clamped and standardised inside) to outputs.
  [[nodiscard]] Eigen::VectorXd forward(const Eigen::VectorXd& raw) const;

  void write(std::ostream& out) const;
  /// Reads what write() wrote; throws InputError naming `source`.
  static Mlp read(std::istream& in, const std::string& source);

  // Training access.
  [[nodiscard]] Eigen::MatrixXd normalize(const Eigen::MatrixXd& raw) const;
  std::vector<Eigen::MatrixXd>& weights() { return w_; }
  std::vector<Eigen::VectorXd>& biases() { return b_; }
  [[nodiscard]] const std::vector<Eigen::MatrixXd>& weights() const { return w_; }
  [[nodiscard]] const std::vector<Eigen::VectorXd>& biases() const { return b_; }

 private:
  std::vector<Eigen::MatrixXd> w_;  // layer l: out x in
  std::vector<Eigen::VectorXd> b_;
  Eigen::VectorXd lo_, hi_, mean_, inv_std_;
};

struct TrainOptions {
  int epochs = 60;
  int batch = 128;
  double lr = 2e-3;
  double lr_final = 5e-5;  ///< cosine decay to this
  double weight_decay = 0.0;
  std::uint64_t seed = 20240531;
};

/// Adam on an Mlp's weights, one mini-batch at a time, with the learning
/// rate decayed from `opt.lr` to `opt.lr_final` on a cosine over
/// `total_steps`. The arithmetic of train_mlp, shared with trainers whose
/// loss is their own (the tensor-core model's fastest candidate).
class AdamTrainer {
 public:
  AdamTrainer(Mlp& net, const TrainOptions& opt, std::int64_t total_steps);
  /// Runs `acts[0]` (normalized inputs x samples) through the network and
  /// fills `acts[1..layers]` (ReLU between layers, linear outputs).
  void forward(std::vector<Eigen::MatrixXd>& acts) const;
  /// Backpropagates `grad` (dLoss/dOutput of the last forward(), outputs x
  /// samples, already divided by the batch) through `acts` and takes one step.
  void step(Eigen::MatrixXd grad, const std::vector<Eigen::MatrixXd>& acts);
  [[nodiscard]] std::size_t layers() const { return mw_.size(); }

 private:
  Mlp& net_;
  TrainOptions opt_;
  std::int64_t total_steps_;
  std::int64_t step_ = 0;
  std::vector<Eigen::MatrixXd> mw_, vw_;
  std::vector<Eigen::VectorXd> mb_, vb_;
};

/// The trainers' deterministic epoch order: a Fisher-Yates shuffle of
/// `order` drawing from `rng`.
void shuffle(std::vector<int>& order, Rng& rng);

/// Given network outputs for a mini-batch (outputs x batch) and the sample
/// indices, writes dLoss/dOutput (same shape) and returns the summed loss.
using LossFn =
    std::function<double(const Eigen::MatrixXd& out, const std::vector<int>& idx, Eigen::MatrixXd& grad)>;

/// Trains `net` on raw inputs `x` (features x samples) with Adam and a
/// deterministic shuffle. `log` (optional) receives one line per few epochs.
void train_mlp(Mlp& net, const Eigen::MatrixXd& x, const LossFn& loss, const TrainOptions& opt,
               const std::function<void(int epoch, double mean_loss)>& log = {});

}  // namespace tessera::node_model
