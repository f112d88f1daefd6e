#include "tessera/cli/pipeline.hpp"

#include <algorithm>
#include <memory>

#include "tessera/engine/flow_network.hpp"
#include "tessera/engine/zero_cost_network.hpp"
#include "tessera/node_model/predictors.hpp"
#include "tessera/node_model/roofline.hpp"
#ifdef TESSERA_HAVE_NS3
#include "tessera/ns3_modules/ns3_backend.hpp"
#endif

namespace tessera::cli {

engine::ExecutionOptions execution_options(const Scenario& s) {
  // The scenario's calibration (cli::default_calibration, `calibration:` keys).
  engine::ExecutionOptions options{s.collectives, {}, s.calibration.comm};
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

Simulation simulate_scenario(const Scenario& s, engine::ExecutionObserver* observer,
                             const node_model::KernelPredictor* predictor, bool split) {
  std::unique_ptr<node_model::KernelPredictor> owned;
  if (predictor == nullptr) {
    owned = node_model::make_predictor(s.predictor, kernel_gpu(s));
    predictor = owned.get();
  }
  auto planned = parallelism::plan_training_detailed(s.model, s.workload, s.plan, *predictor);
  Simulation sim{build_topology(s), std::move(planned.summary), {}, {}, {}, {}, {}};
  const engine::ExecutionOptions options = execution_options(s);
  if (s.backend == Backend::Ns3) {
#ifdef TESSERA_HAVE_NS3
    ns3_modules::Ns3Options ns3;
    ns3.execution = options;
    ns3_modules::Ns3Report report;
    sim.result = ns3_modules::run_on_ns3(planned.graph, sim.topology, ns3, observer, &report);
    sim.ns3_link_csv = ns3_modules::link_csv(report, sim.topology);
#else
    throw InputError("backend 'ns3' is not available: this tessera was built without ns-3 (TESSERA_WITH_NS3=OFF)");
#endif
  } else {
    engine::DiscreteEventLoop loop;
    engine::FlowNetwork net(sim.topology, loop);
    sim.result = engine::execute(planned.graph, loop, net, observer, options);
    sim.link_bytes = net.link_bytes();
  }
  if (!split) return sim;
  // Free communication: the zero-cost network applies no calibration.
  engine::DiscreteEventLoop loop;
  engine::ZeroCostNetwork free_net(loop);
  const auto free = engine::execute(planned.graph, loop, free_net, nullptr, options);
  sim.free_comm_makespan = free.makespan;
  for (const auto& r : free.ranks) {
    if (r.compute_busy > sim.free_comm_compute || (r.compute_busy == sim.free_comm_compute && r.host_wait > sim.free_comm_host)) {
      sim.free_comm_compute = r.compute_busy;
      sim.free_comm_host = r.host_wait;
    }
  }
  return sim;
}

IterationBreakdown breakdown(const Simulation& sim) {
  IterationBreakdown b;
  b.iteration = sim.result.makespan;
  b.compute = sim.free_comm_compute;
  b.host = std::min(sim.free_comm_host, std::max(Time::zero(), sim.free_comm_makespan - b.compute));
  b.bubble = std::max(Time::zero(), sim.free_comm_makespan - b.compute - b.host);
  b.exposed_comm = std::max(Time::zero(), b.iteration - sim.free_comm_makespan);
  return b;
}

double IterationBreakdown::bubble_fraction() const {
  const Time base = compute + host + bubble;
  return base > Time::zero() ? static_cast<double>(bubble.ps()) / static_cast<double>(base.ps()) : 0.0;
}

}  // namespace tessera::cli
