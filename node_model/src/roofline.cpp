#include "tessera/node_model/roofline.hpp"

#include <algorithm>
#include <utility>

namespace tessera::node_model {

RooflinePredictor::RooflinePredictor(GpuSpec gpu) : gpu_(std::move(gpu)) { gpu_.validate(); }

Time RooflinePredictor::predict(const Kernel& kernel) const {
  kernel.validate();
  const FlopRate peak = is_gemm(kernel.op) ? gpu_.matmul_peak(kernel.dtype) : gpu_.fp32_peak;
  const Time t_compute = compute_time(kernel.flops(), peak);
  const Time t_memory = transmit_time(kernel.bytes(), gpu_.memory_bandwidth);
  return std::max(t_compute, t_memory);
}

}  // namespace tessera::node_model
