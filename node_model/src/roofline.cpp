#include "tessera/node_model/roofline.hpp"

#include <algorithm>
#include <utility>

namespace tessera::node_model {

Time roofline_time(const Kernel& kernel, const GpuSpec& gpu) {
  const FlopRate peak = is_gemm(kernel.op) ? gpu.matmul_peak(kernel.dtype) : gpu.fp32_peak;
  return std::max(compute_time(kernel.flops(), peak), transmit_time(kernel.bytes(), gpu.memory_bandwidth));
}

RooflinePredictor::RooflinePredictor(GpuSpec gpu) : gpu_(std::move(gpu)) { gpu_.validate(); }

Time RooflinePredictor::predict(const Kernel& kernel) const {
  kernel.validate();
  return roofline_time(kernel, gpu_);
}

}  // namespace tessera::node_model
