#include "tessera/study/jobs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "tessera/study/pipeline.hpp"
#include "tessera/engine/executor.hpp"
#include "tessera/error.hpp"
#include "tessera/node_model/predictors.hpp"

namespace tessera::study {

parallelism::TaskGraph place_jobs(const std::vector<const parallelism::TaskGraph*>& jobs,
                                  const std::vector<std::vector<int>>& gpu_of, int total_ranks) {
  if (jobs.size() != gpu_of.size()) throw InputError("place_jobs: one GPU mapping per job");
  parallelism::TaskGraph out;
  std::vector<parallelism::RankBinding> bindings(static_cast<std::size_t>(total_ranks));
  std::vector<bool> taken(static_cast<std::size_t>(total_ranks), false);
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const parallelism::TaskGraph& g = *jobs[j];
    const std::vector<int>& map = gpu_of[j];
    if (map.size() != g.ranks.size()) {
      throw InputError(fmt::format("place_jobs: job {} has {} ranks but {} GPUs", j, g.ranks.size(), map.size()));
    }
    for (int gpu : map) {
      if (gpu < 0 || gpu >= total_ranks || taken[static_cast<std::size_t>(gpu)]) {
        throw InputError(fmt::format("place_jobs: job {} is given GPU {} (of {}), out of range or taken", j, gpu,
                                     total_ranks));
      }
      taken[static_cast<std::size_t>(gpu)] = true;
    }
    const auto program_base = static_cast<std::int32_t>(out.programs.size());
    const auto group_base = static_cast<std::int32_t>(out.groups.size());
    out.programs.insert(out.programs.end(), g.programs.begin(), g.programs.end());
    for (const auto& grp : g.groups) {
      parallelism::Group placed;
      placed.ranks.reserve(grp.ranks.size());
      for (int r : grp.ranks) placed.ranks.push_back(map[static_cast<std::size_t>(r)]);
      out.groups.push_back(std::move(placed));
    }
    for (std::size_t r = 0; r < g.ranks.size(); ++r) {
      parallelism::RankBinding b = g.ranks[r];
      b.program += program_base;
      for (auto& gi : b.groups) gi += group_base;
      bindings[static_cast<std::size_t>(map[r])] = std::move(b);
    }
  }
  std::int32_t idle = -1;
  for (std::size_t r = 0; r < bindings.size(); ++r) {
    if (taken[r]) continue;
    if (idle < 0) idle = out.add_program(parallelism::Program{});
    bindings[r].program = idle;
  }
  out.ranks = std::move(bindings);
  return out;
}

std::vector<std::vector<int>> random_placement(std::vector<int> free_nodes, const std::vector<int>& counts,
                                               std::uint64_t seed) {
  std::size_t needed = 0;
  for (int c : counts) {
    if (c < 0) throw InputError("random_placement: a negative node count");
    needed += static_cast<std::size_t>(c);
  }
  if (needed > free_nodes.size()) {
    throw InputError(fmt::format("random_placement: the jobs need {} nodes, {} are free", needed, free_nodes.size()));
  }
  // splitmix64 (Steele, Lea, Flood 2014), as java.util.SplittableRandom.
  std::uint64_t state = seed;
  auto next = [&state] {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  for (std::size_t i = free_nodes.size(); i > 1; --i) {
    const std::size_t k = static_cast<std::size_t>(next() % i);  // modulo bias < i / 2^64: negligible
    std::swap(free_nodes[i - 1], free_nodes[k]);
  }
  std::vector<std::vector<int>> out;
  std::size_t next_node = 0;
  for (int c : counts) {
    auto first = free_nodes.begin() + static_cast<std::ptrdiff_t>(next_node);
    std::vector<int> nodes(first, first + c);
    std::sort(nodes.begin(), nodes.end());
    out.push_back(std::move(nodes));
    next_node += static_cast<std::size_t>(c);
  }
  return out;
}

namespace {

Time iteration_of(const engine::ExecutionResult& r, const std::vector<int>& gpus) {
  Time t;
  for (int g : gpus) t = std::max(t, r.ranks[static_cast<std::size_t>(g)].finish);
  return t;
}

}  // namespace

std::vector<int> job_gpus(const Job& job, int gpus_per_node) {
  std::vector<int> map;
  map.reserve(static_cast<std::size_t>(job.scenario.gpus()));
  for (int r = 0; r < job.scenario.gpus(); ++r) {
    map.push_back(job.nodes.at(static_cast<std::size_t>(r / gpus_per_node)) * gpus_per_node +
                  r % gpus_per_node);
  }
  return map;
}

JobsOutcome simulate_jobs(const Scenario& s) {
  const topology::Topology topo = build_topology(s);
  const int per_node = s.cluster.gpus_per_node;
  std::vector<parallelism::TaskGraph> graphs;
  std::vector<std::vector<parallelism::MemoryEstimate>> memory;  // [job][stage]
  std::vector<std::vector<int>> gpu_of;
  for (const Job& job : s.jobs) {
    check_work(job.scenario);
    const auto predictor = make_scenario_predictor(job.scenario);  // node_model.overrides included
    auto planned = parallelism::plan_training_detailed(job.scenario.model, job.scenario.workload,
                                                       job.scenario.plan, *predictor);
    graphs.push_back(std::move(planned.graph));
    memory.push_back(std::move(planned.summary.memory_per_stage));
    gpu_of.push_back(job_gpus(job, per_node));
  }
  std::vector<const parallelism::TaskGraph*> all;
  all.reserve(graphs.size());
  for (const auto& g : graphs) all.push_back(&g);
  const parallelism::TaskGraph placed = place_jobs(all, gpu_of, s.gpus());
  JobsOutcome out;
  engine::ExecutionResult shared;
  std::vector<std::vector<double>> job_link_bytes;  // [job][link]
  {
    // Each message's bytes counted for its source rank's job, where the
    // backend can attribute traffic (flow; ns-3's InfiniBand model).
    std::vector<std::int32_t> job_of(static_cast<std::size_t>(s.gpus()), -1);
    for (std::size_t j = 0; j < gpu_of.size(); ++j) {
      for (int g : gpu_of[j]) job_of[static_cast<std::size_t>(g)] = static_cast<std::int32_t>(j);
    }
    BackendRun run = run_on_backend(s, placed, topo, std::move(job_of));
    shared = std::move(run.result);
    out.packet_fabric = run.packet_fabric;
    if (!run.link_bytes_by_class.empty()) {
      job_link_bytes = std::move(run.link_bytes_by_class);
      job_link_bytes.resize(s.jobs.size(), std::vector<double>(topo.links().size(), 0.0));
      out.link_bytes = std::move(run.link_bytes);
      out.per_job_links = true;
    }
  }
  for (std::size_t j = 0; j < s.jobs.size(); ++j) {
    const Job& job = s.jobs[j];
    const parallelism::TaskGraph alone_graph = place_jobs({&graphs[j]}, {gpu_of[j]}, s.gpus());
    const engine::ExecutionResult alone = execute_on_backend(s, alone_graph, topo);
    JobOutcome o;
    o.name = job.name;
    o.nodes = job.nodes;
    o.gpus = job.scenario.gpus();
    if (!memory[j].empty()) {
      const std::size_t st = parallelism::fullest_stage(memory[j]);
      o.fullest_stage = static_cast<int>(st);
      o.peak_memory = memory[j][st].total();
      o.memory_capacity = memory[j][st].capacity;
    }
    if (!s.compute_scale.empty()) {
      for (int g : gpu_of[j]) {
        o.scales.add(s.compute_scale[static_cast<std::size_t>(g)]);
      }
    }
    o.alone = iteration_of(alone, gpu_of[j]);
    // Its ranks' stragglers apply here as in the runs (execution_options
    // scales the cluster's GPUs); the other jobs' GPUs run nothing.
    o.free_comm = free_communication(engine::execute_on_free_network(alone_graph, execution_options(s)));
    o.shared = iteration_of(shared, gpu_of[j]);
    o.tokens_per_s = tokens_per_second(job.scenario, o.shared);
    if (out.per_job_links) {
      o.link_bytes = std::move(job_link_bytes[j]);
      std::vector<topology::LinkId> used;
      for (std::size_t l = 0; l < o.link_bytes.size(); ++l) {
        if (o.link_bytes[l] > 0.0) used.push_back(static_cast<topology::LinkId>(l));
      }
      // Busiest: the most of the link's capacity used, bytes / bandwidth (the
      // job's iteration time is common to its links): a slow up-link before
      // a fast NVLink port carrying more bytes.
      auto load = [&](topology::LinkId l) {
        return o.link_bytes[static_cast<std::size_t>(l)] / topo.link(l).bandwidth.bytes_per_second();
      };
      // Between links the job loads equally, the one that carries more of the
      // other jobs' traffic first: the shared up-link a slowdown comes from
      // tied with the job's own host links and lost to them by link number.
      auto total = [&](topology::LinkId l) {
        return out.link_bytes[static_cast<std::size_t>(l)] / topo.link(l).bandwidth.bytes_per_second();
      };
      std::stable_sort(used.begin(), used.end(), [&](topology::LinkId a, topology::LinkId b) {
        return load(a) != load(b) ? load(a) > load(b) : total(a) > total(b);
      });
      if (used.size() > kJobBusiestLinks) used.resize(kJobBusiestLinks);
      for (topology::LinkId l : used) {
        const auto li = static_cast<std::size_t>(l);
        const topology::Link& link = topo.link(l);
        JobLink b;
        b.link = l;
        b.src = topo.vertex(link.src).name;
        b.dst = topo.vertex(link.dst).name;
        b.tier = std::string(topology::to_string(topo.tier(l)));
        b.bytes = o.link_bytes[li];
        b.share = out.link_bytes[li] > 0.0 ? b.bytes / out.link_bytes[li] : 0.0;
        // (load / time: ordered as the sort above, rounding included)
        b.utilization = o.shared > Time::zero() ? load(l) / o.shared.seconds() : 0.0;
        o.busiest_links.push_back(std::move(b));
      }
    }
    out.makespan = std::max(out.makespan, o.shared);
    out.jobs.push_back(std::move(o));
  }
  return out;
}

}  // namespace tessera::study
