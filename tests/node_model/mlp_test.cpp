// The MLP trainer (AdamTrainer, train_mlp) on problems whose answer is known
// by hand.
#include "tessera/node_model/mlp.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace nm = tessera::node_model;

namespace {

// Squared error against targets t (one output per sample).
nm::LossFn squared_error(const Eigen::VectorXd& t) {
  return [t](const Eigen::MatrixXd& out, const std::vector<int>& idx, Eigen::MatrixXd& grad) {
    double sum = 0.0;
    for (std::size_t c = 0; c < idx.size(); ++c) {
      const double r = out(0, static_cast<Eigen::Index>(c)) - t(idx[c]);
      grad(0, static_cast<Eigen::Index>(c)) = 2.0 * r;
      sum += r * r;
    }
    return sum;
  };
}

}  // namespace

TEST(Mlp, AdamFitsALineWithANetworkWithoutHiddenLayers) {
  // y = 3 x - 1 on x in [-1, 1]: a linear network (no hidden layer) can
  // represent it exactly, so Adam must drive the loss to about zero and the
  // network must reproduce the line, also between the samples it saw.
  const int n = 64;
  Eigen::MatrixXd x(1, n);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    x(0, i) = -1.0 + 2.0 * i / (n - 1);
    y(i) = 3.0 * x(0, i) - 1.0;
  }
  nm::Rng init(1);
  nm::Mlp net({1, 1}, init);
  nm::TrainOptions opt;
  opt.epochs = 400;
  opt.batch = 16;
  opt.lr = 2e-2;
  opt.lr_final = 1e-4;
  std::vector<double> losses;
  nm::train_mlp(net, x, squared_error(y), opt, [&](int, double loss) { losses.push_back(loss); });
  ASSERT_EQ(losses.size(), 400U);
  EXPECT_LT(losses.back(), 1e-6);
  EXPECT_LT(losses.back(), losses.front() * 1e-4);
  for (double v : {-1.0, -0.3, 0.0, 0.55, 1.0}) {
    EXPECT_NEAR(net.forward(Eigen::VectorXd::Constant(1, v))(0), 3.0 * v - 1.0, 1e-3) << v;
  }
}

TEST(Mlp, AdamTrainerStepsAreTheTrainersAndDeterministic) {
  // AdamTrainer driven by hand with train_mlp's shuffle and batches gives
  // the same weights, bit for bit, as train_mlp; and a second run the same.
  const int n = 40;
  Eigen::MatrixXd x(2, n);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    x(0, i) = std::sin(0.3 * i);
    x(1, i) = std::cos(0.7 * i);
    y(i) = x(0, i) * x(1, i);
  }
  nm::TrainOptions opt;
  opt.epochs = 5;
  opt.batch = 8;
  const auto loss = squared_error(y);
  auto train = [&] {
    nm::Rng init(7);
    nm::Mlp net({2, 8, 1}, init);
    nm::train_mlp(net, x, loss, opt);
    return net;
  };
  const nm::Mlp a = train();
  const nm::Mlp b = train();

  nm::Rng init(7);
  nm::Mlp c({2, 8, 1}, init);
  c.fit_normalization(x);
  const Eigen::MatrixXd z = c.normalize(x);
  nm::AdamTrainer adam(c, opt, static_cast<std::int64_t>(n / opt.batch) * opt.epochs);
  ASSERT_EQ(adam.layers(), 2U);
  nm::Rng rng(opt.seed);
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::vector<Eigen::MatrixXd> acts(3);
  for (int e = 0; e < opt.epochs; ++e) {
    nm::shuffle(order, rng);
    for (int start = 0; start < n; start += opt.batch) {
      std::vector<int> idx(order.begin() + start, order.begin() + start + opt.batch);
      acts[0].resize(2, opt.batch);
      for (int k = 0; k < opt.batch; ++k) acts[0].col(k) = z.col(idx[static_cast<std::size_t>(k)]);
      adam.forward(acts);
      Eigen::MatrixXd grad(1, opt.batch);
      loss(acts.back(), idx, grad);
      grad /= static_cast<double>(opt.batch);
      adam.step(std::move(grad), acts);
    }
  }
  for (std::size_t l = 0; l < 2; ++l) {
    EXPECT_TRUE(a.weights()[l] == b.weights()[l]) << l;
    EXPECT_TRUE(a.weights()[l] == c.weights()[l]) << l;
    EXPECT_TRUE(a.biases()[l] == c.biases()[l]) << l;
  }
  // Training moved the weights away from their initialisation.
  nm::Rng fresh(7);
  const nm::Mlp untrained({2, 8, 1}, fresh);
  EXPECT_FALSE(a.weights()[0] == untrained.weights()[0]);
}

TEST(Mlp, ShuffleIsAPermutationFixedBySeed) {
  std::vector<int> a(10), b(10);
  std::iota(a.begin(), a.end(), 0);
  std::iota(b.begin(), b.end(), 0);
  nm::Rng r1(42), r2(42);
  nm::shuffle(a, r1);
  nm::shuffle(b, r2);
  EXPECT_EQ(a, b);
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> ident(10);
  std::iota(ident.begin(), ident.end(), 0);
  EXPECT_EQ(sorted, ident);
  EXPECT_NE(a, ident);
}
