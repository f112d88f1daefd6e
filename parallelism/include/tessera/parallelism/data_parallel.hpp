#pragma once
#include "tessera/node_model/kernel.hpp"
#include "tessera/parallelism/task_graph.hpp"
#include "tessera/parallelism/transformer.hpp"

namespace tessera::parallelism {

struct DataParallelPlan {
  int dp = 1;                              ///< number of replicas (= ranks)
  Bytes bucket_size = Bytes(25'000'000);   ///< gradient bucket (PyTorch DDP default 25 MB)
};

/// Plans one training iteration of pure data parallelism: every rank runs
/// forward and backward of its micro-batch; as backward produces gradients,
/// they are grouped into buckets, and each full bucket is all-reduced over all
/// ranks while backward continues; the optimizer step waits for every bucket.
/// Pure function: no event loop, no network.
TaskGraph plan_data_parallel(const TransformerConfig& model, const Workload& work,
                             const DataParallelPlan& plan,
                             const node_model::KernelPredictor& predictor);

}  // namespace tessera::parallelism
