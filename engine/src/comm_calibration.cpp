#include "tessera/engine/comm_calibration.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>
#include <vector>

#include "tessera/error.hpp"

namespace tessera::engine {

double LinkCalibration::efficiency(int group_size) const {
  const double e = peak_efficiency - group_penalty / static_cast<double>(std::max(group_size, 1));
  return std::min(1.0, e);
}

CommCalibration CommCalibration::nccl(int gpu_sms) {
  CommCalibration c;
  // Fitted by `tessera validate collectives --data ../shared/data --fit all`
  // on both measured NVLink tables (A100 nccl-tests all-reduce, 2-8 GPUs;
  // H100 XLA all-reduce / all-gather / reduce-scatter / all-to-all, groups of
  // 2, 4, 8, 1 MiB and up), each table weighing half (docs/collectives.md).
  c.nvlink.peak_efficiency = 0.799;
  c.nvlink.group_penalty = 0.449;
  c.nvlink.launch_latency = Time::from_ns(29090);
  c.nvlink.step_latency = Time::zero();
  // No InfiniBand measurements exist here: assumptions from NCCL's own cost
  // model (src/graph/tuning.cc). Efficiency 0.92, its bandwidth factor for
  // the LL128 protocol (120 payload bytes per 128-byte line); no group
  // penalty; the launch latency of the NVLink fit (a kernel launch and
  // handshake do not depend on the link); per network step 6.2 us, NCCL's
  // hwLat[NET] - hwLat[NVLINK] for Ring/Simple (9.6 - 3.4 us), the cost of a
  // network step beyond an NVLink one.
  c.network.peak_efficiency = 0.92;
  c.network.group_penalty = 0.0;
  c.network.launch_latency = c.nvlink.launch_latency;
  c.network.step_latency = Time::from_ns(6200);
  c.sm_slowdown = nccl_sm_share(gpu_sms);
  c.fused_reductions = true;
  return c;
}

double expected_max_normal(int n) {
  if (n <= 1) return 0.0;
  // E[max] = integral of x n phi(x) Phi(x)^(n-1) dx, by Simpson's rule on
  // [-10, 10] (what lies beyond is below 1e-11 for any n up to 1e9).
  const int steps = 4000;
  const double lo = -10.0, h = 20.0 / steps;
  double sum = 0.0;
  for (int i = 0; i <= steps; ++i) {
    const double x = lo + i * h;
    const double phi = std::exp(-0.5 * x * x) / std::sqrt(2.0 * std::numbers::pi);
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    const double f = x * n * phi * std::pow(cdf, n - 1);
    sum += f * (i == 0 || i == steps ? 1.0 : (i % 2 == 1 ? 4.0 : 2.0));
  }
  return sum * h / 3.0;
}

double nccl_sm_share(int sms, int channels) {
  if (sms <= 0 || channels <= 0) return 0.0;
  return std::min(0.5, static_cast<double>(channels) / static_cast<double>(sms));
}

void CommCalibration::validate() const {
  for (const auto& [name, l] : {std::pair{"nvlink", &nvlink}, std::pair{"network", &network}}) {
    if (!(l->peak_efficiency > 0.0 && l->peak_efficiency <= 1.0)) {
      throw InputError(
          fmt::format("calibration.{}_efficiency must be in (0, 1] (got {})", name, l->peak_efficiency));
    }
    if (!(l->group_penalty >= 0.0) || l->efficiency(2) <= 0.0) {
      throw InputError(fmt::format(
          "calibration.{}_group_penalty must be >= 0 and leave a positive efficiency for 2 ranks (got {}, "
          "efficiency(2) = {})",
          name, l->group_penalty, l->efficiency(2)));
    }
    if (l->launch_latency < Time::zero() || l->step_latency < Time::zero() || l->skew < Time::zero()) {
      throw InputError(fmt::format("calibration.{}: latencies must not be negative", name));
    }
  }
  if (!(sm_slowdown >= 0.0 && sm_slowdown < 1.0)) {
    throw InputError(fmt::format("calibration.sm_slowdown must be in [0, 1) (got {})", sm_slowdown));
  }
}

// --- Fitting ------------------------------------------------------------------

namespace {

/// The part of a sample's time that does not depend on the launch latency.
double fixed_seconds(double peak, double penalty, const CollectiveSample& s) {
  const double eff = std::min(1.0, peak - penalty / s.group_size);
  return s.steps * s.path_latency.seconds() + s.wire.as_double() / (eff * s.link.bytes_per_second());
}

struct Evaluation {
  double objective = 0.0;
  double latency = 0.0;  ///< seconds
};

/// Best launch latency (a weighted median of the residuals, weights w/t) and
/// the weighted MAPE it gives, for fixed efficiencies.
Evaluation evaluate(double peak, double penalty, std::span<const CollectiveSample> samples,
                    std::vector<std::pair<double, double>>& scratch) {
  scratch.clear();
  double total = 0.0;
  for (const auto& s : samples) {
    const double t = s.measured.seconds();
    const double w = s.weight / t;
    scratch.emplace_back(t - fixed_seconds(peak, penalty, s), w);
    total += w;
  }
  std::sort(scratch.begin(), scratch.end());
  double acc = 0.0;
  double latency = 0.0;
  for (const auto& [r, w] : scratch) {
    acc += w;
    if (acc >= total / 2) {
      latency = r;
      break;
    }
  }
  latency = std::max(0.0, latency);
  double err = 0.0;
  double wsum = 0.0;
  for (const auto& s : samples) {
    const double t = s.measured.seconds();
    err += s.weight * std::abs(latency + fixed_seconds(peak, penalty, s) - t) / t;
    wsum += s.weight;
  }
  return {wsum > 0 ? err / wsum : 0.0, latency};
}

}  // namespace

std::vector<double> log_size_weights(std::span<const Bytes> sizes, Bytes min) {
  std::vector<std::size_t> fit;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] >= min) fit.push_back(i);
  }
  std::stable_sort(fit.begin(), fit.end(), [&](std::size_t a, std::size_t b) { return sizes[a] < sizes[b]; });
  std::vector<double> w(sizes.size(), 0.0);
  double total = 0.0;
  for (std::size_t k = 0; k < fit.size(); ++k) {
    const double lo = std::log(sizes[fit[k == 0 ? 0 : k - 1]].as_double());
    const double hi = std::log(sizes[fit[std::min(k + 1, fit.size() - 1)]].as_double());
    w[fit[k]] = (hi - lo) / 2;
    total += w[fit[k]];
  }
  if (fit.size() == 1) w[fit.front()] = total = 1.0;
  for (double& x : w) x = total > 0 ? x / total : 0.0;
  return w;
}

double uncontended_seconds(const LinkCalibration& c, const CollectiveSample& s) {
  return c.launch_latency.seconds() + s.steps * (s.path_latency + c.step_latency).seconds() +
         s.wire.as_double() / (c.efficiency(s.group_size) * s.link.bytes_per_second());
}

double weighted_mape(const LinkCalibration& c, std::span<const CollectiveSample> samples) {
  double err = 0.0;
  double wsum = 0.0;
  for (const auto& s : samples) {
    const double t = s.measured.seconds();
    err += s.weight * std::abs(uncontended_seconds(c, s) - t) / t;
    wsum += s.weight;
  }
  return wsum > 0 ? err / wsum : 0.0;
}

LinkCalibration fit_link_calibration(std::span<const CollectiveSample> samples, bool fit_group_penalty,
                                     double fixed_group_penalty) {
  if (samples.empty()) throw InputError("fit_link_calibration: no samples to fit");
  int smallest = samples.front().group_size;
  for (const auto& s : samples) {
    if (s.group_size < 2 || s.measured <= Time::zero() || s.link.bps() <= 0 || !(s.weight >= 0.0)) {
      throw InputError(fmt::format(
          "fit_link_calibration: bad sample (group of {}, measured {} ps, link {} bps, weight {})",
          s.group_size, s.measured.ps(), s.link.bps(), s.weight));
    }
    smallest = std::min(smallest, s.group_size);
  }
  constexpr double kMinEfficiency = 0.05;
  std::vector<std::pair<double, double>> scratch;
  double best_peak = 1.0;
  const double penalty0 = fit_group_penalty ? 0.0 : fixed_group_penalty;
  double best_penalty = penalty0;
  Evaluation best{1e300, 0.0};
  auto consider = [&](double peak, double penalty) {
    if (peak <= kMinEfficiency || peak > 1.0 || penalty < 0.0) return;
    if (peak - penalty / smallest < kMinEfficiency) return;  // efficiency would vanish for the smallest group
    const Evaluation e = evaluate(peak, penalty, samples, scratch);
    if (e.objective < best.objective) {
      best = e;
      best_peak = peak;
      best_penalty = penalty;
    }
  };
  // Coarse grid, then two refinements around the best point. Ties keep the
  // first (smallest peak, then penalty): deterministic.
  double peak_step = 0.02;
  double penalty_step = fit_group_penalty ? 0.05 : 0.0;
  for (int i = 3; i <= 50; ++i) {
    for (int j = 0; j <= (fit_group_penalty ? 40 : 0); ++j)
      consider(i * peak_step, penalty0 + j * penalty_step);
  }
  for (int round = 0; round < 2; ++round) {
    const double p0 = best_peak;
    const double c0 = best_penalty;
    peak_step /= 10;
    penalty_step /= 10;
    for (int i = -10; i <= 10; ++i) {
      for (int j = fit_group_penalty ? -10 : 0; j <= (fit_group_penalty ? 10 : 0); ++j) {
        consider(p0 + i * peak_step, c0 + j * penalty_step);
      }
    }
  }
  LinkCalibration out;
  out.peak_efficiency = best_peak;
  out.group_penalty = best_penalty;
  out.launch_latency = Time::from_ps_rounded(best.latency * 1e12);
  return out;
}

}  // namespace tessera::engine
