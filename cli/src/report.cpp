#include "tessera/cli/report.hpp"

#include <fmt/format.h>

namespace tessera::cli {

RunReport make_report(const Scenario& s, const engine::ExecutionResult& r) {
  RunReport rep;
  rep.scenario = s.name;
  rep.model = s.model.name;
  rep.gpu = s.gpu.name;
  rep.gpus = s.gpus();
  rep.dp = s.plan.dp;
  rep.backend = std::string(to_string(s.backend));
  rep.predictor = s.predictor;
  rep.summary = engine::summarize(r);
  rep.bytes_sent = r.bytes_sent;
  const double tokens = static_cast<double>(s.workload.micro_batch * s.workload.seq_len * s.plan.dp);
  if (r.makespan > Time::zero()) rep.tokens_per_second = tokens / r.makespan.seconds();
  return rep;
}

namespace {
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}
}  // namespace

std::string format_text(const RunReport& r) {
  const auto& s = r.summary;
  const double it = s.iteration_time.seconds();
  auto pct = [&](Time t) { return it > 0 ? 100.0 * t.seconds() / it : 0.0; };
  std::string out;
  out += fmt::format("Scenario     {} ({} on {} x {}, dp={}, {} backend, {} node model)\n", r.scenario, r.model,
                     r.gpus, r.gpu, r.dp, r.backend, r.predictor);
  out += fmt::format("Iteration    {:>12.3f} ms\n", s.iteration_time.ms());
  out += fmt::format("  compute    {:>12.3f} ms  ({:5.1f}%)\n", s.compute_time.ms(), pct(s.compute_time));
  out += fmt::format("  exposed comm {:>10.3f} ms  ({:5.1f}%)\n", s.exposed_comm_time.ms(),
                     pct(s.exposed_comm_time));
  out += fmt::format("Throughput   {:>12.1f} TFLOP/s per GPU, {:.0f} tokens/s\n", s.tflops_per_gpu,
                     r.tokens_per_second);
  out += fmt::format("Network      {:>12.3f} GB sent in total\n", r.bytes_sent.as_double() * 1e-9);
  return out;
}

std::string format_json(const RunReport& r) {
  const auto& s = r.summary;
  return fmt::format(
      "{{\"scenario\": {}, \"model\": {}, \"gpu\": {}, \"gpus\": {}, \"dp\": {}, \"backend\": {}, "
      "\"predictor\": {}, \"iteration_time_s\": {:.9e}, \"compute_time_s\": {:.9e}, "
      "\"exposed_comm_time_s\": {:.9e}, \"tflops_per_gpu\": {:.6f}, \"tokens_per_s\": {:.3f}, "
      "\"network_bytes\": {}}}\n",
      json_string(r.scenario), json_string(r.model), json_string(r.gpu), r.gpus, r.dp, json_string(r.backend),
      json_string(r.predictor), s.iteration_time.seconds(), s.compute_time.seconds(), s.exposed_comm_time.seconds(),
      s.tflops_per_gpu, r.tokens_per_second, r.bytes_sent.count());
}

}  // namespace tessera::cli
