#include "tessera/node_model/mlp.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <istream>
#include <numbers>
#include <ostream>
#include <utility>

#include "tessera/error.hpp"

namespace tessera::node_model {

std::uint64_t Rng::next() {
  std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double Rng::normal() {
  double u1 = uniform();
  while (u1 <= 1e-300) u1 = uniform();
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

Mlp::Mlp(const std::vector<int>& sizes, Rng& rng) {
  for (std::size_t l = 1; l < sizes.size(); ++l) {
    Eigen::MatrixXd w(sizes[l], sizes[l - 1]);
    const double s = std::sqrt(2.0 / sizes[l - 1]);
    for (int r = 0; r < w.rows(); ++r) {
      for (int c = 0; c < w.cols(); ++c) w(r, c) = rng.normal() * s;
    }
    if (l + 1 == sizes.size()) w *= 0.1;  // start near a constant output
    w_.push_back(std::move(w));
    b_.push_back(Eigen::VectorXd::Zero(sizes[l]));
  }
  const int in = sizes.front();
  lo_ = Eigen::VectorXd::Constant(in, -1e300);
  hi_ = Eigen::VectorXd::Constant(in, 1e300);
  mean_ = Eigen::VectorXd::Zero(in);
  inv_std_ = Eigen::VectorXd::Ones(in);
}

void Mlp::fit_normalization(const Eigen::MatrixXd& x) {
  lo_ = x.rowwise().minCoeff();
  hi_ = x.rowwise().maxCoeff();
  mean_ = x.rowwise().mean();
  inv_std_.resize(x.rows());
  for (int f = 0; f < x.rows(); ++f) {
    const double var = (x.row(f).array() - mean_(f)).square().mean();
    inv_std_(f) = var > 1e-18 ? 1.0 / std::sqrt(var) : 0.0;
  }
}

Eigen::MatrixXd Mlp::normalize(const Eigen::MatrixXd& raw) const {
  Eigen::MatrixXd z(raw.rows(), raw.cols());
  for (int c = 0; c < raw.cols(); ++c) {
    z.col(c) = ((raw.col(c).cwiseMax(lo_).cwiseMin(hi_) - mean_).array() * inv_std_.array()).matrix();
  }
  return z;
}

Eigen::VectorXd Mlp::forward(const Eigen::VectorXd& raw) const {
  Eigen::VectorXd a = ((raw.cwiseMax(lo_).cwiseMin(hi_) - mean_).array() * inv_std_.array()).matrix();
  for (std::size_t l = 0; l < w_.size(); ++l) {
    Eigen::VectorXd z = w_[l] * a + b_[l];
    if (l + 1 < w_.size()) z = z.cwiseMax(0.0);
    a = std::move(z);
  }
  return a;
}

namespace {
void write_vec(std::ostream& out, const Eigen::VectorXd& v) {
  for (int i = 0; i < v.size(); ++i) out << (i ? " " : "") << fmt::format("{:.8g}", v(i));
  out << '\n';
}
}  // namespace

void Mlp::write(std::ostream& out) const {
  out << "mlp " << w_.size() + 1 << ' ' << inputs();
  for (const auto& w : w_) out << ' ' << w.rows();
  out << '\n';
  write_vec(out, lo_);
  write_vec(out, hi_);
  write_vec(out, mean_);
  write_vec(out, inv_std_);
  for (std::size_t l = 0; l < w_.size(); ++l) {
    for (int r = 0; r < w_[l].rows(); ++r) write_vec(out, w_[l].row(r).transpose());
    write_vec(out, b_[l]);
  }
}

Mlp Mlp::read(std::istream& in, const std::string& source) {
  auto fail = [&](const char* what) {
    throw InputError(fmt::format("{}: malformed weights ({})", source, what));
  };
  std::string tag;
  int n = 0;
  if (!(in >> tag >> n) || tag != "mlp" || n < 2 || n > 64) fail("mlp header");
  std::vector<int> sizes(n);
  for (auto& s : sizes) {
    if (!(in >> s) || s <= 0 || s > 100000) fail("layer size");
  }
  Mlp m;
  auto read_vec = [&](Eigen::VectorXd& v, int size) {
    v.resize(size);
    for (int i = 0; i < size; ++i) {
      if (!(in >> v(i))) fail("number");
    }
  };
  read_vec(m.lo_, sizes[0]);
  read_vec(m.hi_, sizes[0]);
  read_vec(m.mean_, sizes[0]);
  read_vec(m.inv_std_, sizes[0]);
  for (int l = 1; l < n; ++l) {
    Eigen::MatrixXd w(sizes[l], sizes[l - 1]);
    for (int r = 0; r < w.rows(); ++r) {
      for (int c = 0; c < w.cols(); ++c) {
        if (!(in >> w(r, c))) fail("weight");
      }
    }
    Eigen::VectorXd b;
    read_vec(b, sizes[l]);
    m.w_.push_back(std::move(w));
    m.b_.push_back(std::move(b));
  }
  return m;
}

namespace {
constexpr double kBeta1 = 0.9;
constexpr double kBeta2 = 0.999;
constexpr double kEps = 1e-8;
}  // namespace

AdamTrainer::AdamTrainer(Mlp& net, const TrainOptions& opt, std::int64_t total_steps)
    : net_(net), opt_(opt), total_steps_(total_steps) {
  const auto& w = net_.weights();
  const auto& b = net_.biases();
  const std::size_t layers = w.size();
  mw_.resize(layers);
  vw_.resize(layers);
  mb_.resize(layers);
  vb_.resize(layers);
  for (std::size_t l = 0; l < layers; ++l) {
    mw_[l] = Eigen::MatrixXd::Zero(w[l].rows(), w[l].cols());
    vw_[l] = mw_[l];
    mb_[l] = Eigen::VectorXd::Zero(b[l].size());
    vb_[l] = mb_[l];
  }
}

void AdamTrainer::forward(std::vector<Eigen::MatrixXd>& acts) const {
  const auto& w = net_.weights();
  const auto& b = net_.biases();
  const std::size_t layers = w.size();
  acts.resize(layers + 1);
  for (std::size_t l = 0; l < layers; ++l) {
    acts[l + 1] = (w[l] * acts[l]).colwise() + b[l];
    if (l + 1 < layers) acts[l + 1] = acts[l + 1].cwiseMax(0.0);
  }
}

void AdamTrainer::step(Eigen::MatrixXd grad, const std::vector<Eigen::MatrixXd>& acts) {
  auto& w = net_.weights();
  auto& b = net_.biases();
  ++step_;
  const double progress = static_cast<double>(step_) / static_cast<double>(total_steps_);
  const double lr =
      opt_.lr_final + 0.5 * (opt_.lr - opt_.lr_final) * (1.0 + std::cos(std::numbers::pi * progress));
  const double c1 = 1.0 - std::pow(kBeta1, static_cast<double>(step_));
  const double c2 = 1.0 - std::pow(kBeta2, static_cast<double>(step_));
  for (std::size_t l = w.size(); l-- > 0;) {
    const Eigen::MatrixXd gw = grad * acts[l].transpose();
    const Eigen::VectorXd gb = grad.rowwise().sum();
    if (l > 0) {
      grad = (w[l].transpose() * grad).cwiseProduct((acts[l].array() > 0.0).cast<double>().matrix());
    }
    mw_[l] = kBeta1 * mw_[l] + (1 - kBeta1) * gw;
    vw_[l] = kBeta2 * vw_[l] + (1 - kBeta2) * gw.cwiseProduct(gw);
    mb_[l] = kBeta1 * mb_[l] + (1 - kBeta1) * gb;
    vb_[l] = kBeta2 * vb_[l] + (1 - kBeta2) * gb.cwiseProduct(gb);
    w[l].array() -= lr * ((mw_[l].array() / c1) / ((vw_[l].array() / c2).sqrt() + kEps) +
                          opt_.weight_decay * w[l].array());
    b[l].array() -= lr * (mb_[l].array() / c1) / ((vb_[l].array() / c2).sqrt() + kEps);
  }
}

void shuffle(std::vector<int>& order, Rng& rng) {
  for (int i = static_cast<int>(order.size()) - 1; i > 0; --i) {
    const int j = static_cast<int>(rng.next() % static_cast<std::uint64_t>(i + 1));
    std::swap(order[i], order[j]);
  }
}

void train_mlp(Mlp& net, const Eigen::MatrixXd& x, const LossFn& loss, const TrainOptions& opt,
               const std::function<void(int, double)>& log) {
  const int n = static_cast<int>(x.cols());
  if (n == 0) return;
  net.fit_normalization(x);
  const Eigen::MatrixXd z = net.normalize(x);
  const int batches = (n + opt.batch - 1) / opt.batch;
  AdamTrainer adam(net, opt, static_cast<std::int64_t>(batches) * opt.epochs);
  Rng rng(opt.seed);
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  std::vector<Eigen::MatrixXd> acts(adam.layers() + 1);
  for (int epoch = 0; epoch < opt.epochs; ++epoch) {
    shuffle(order, rng);
    double epoch_loss = 0.0;
    for (int start = 0; start < n; start += opt.batch) {
      const int bs = std::min(opt.batch, n - start);
      std::vector<int> idx(order.begin() + start, order.begin() + start + bs);
      acts[0].resize(z.rows(), bs);
      for (int c = 0; c < bs; ++c) acts[0].col(c) = z.col(idx[c]);
      adam.forward(acts);
      Eigen::MatrixXd grad(acts.back().rows(), bs);
      epoch_loss += loss(acts.back(), idx, grad);
      grad /= static_cast<double>(bs);
      adam.step(std::move(grad), acts);
    }
    if (log) log(epoch, epoch_loss / n);
  }
}

}  // namespace tessera::node_model
