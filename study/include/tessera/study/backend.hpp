#pragma once
// Network backends: what runs a planned iteration's task graph on a fabric.
// Each backend is one class implementing NetworkBackend (flow_backend.cpp,
// ns3_backend.cpp); built_in_backends() lists them, and the pipeline looks the
// scenario's backend up by name (execute_on_backend, simulate_scenario). A
// caller may build its own BackendRegistry (a test backend, say) and pass it
// to the pipeline: there is no global registry. docs/study.md, "Backends".
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/engine/executor.hpp"
#include "tessera/parallelism/task_graph.hpp"
#include "tessera/study/scenario.hpp"
#include "tessera/topology/topology.hpp"

namespace tessera::study {

/// What the packet fabric of an ns-3 run did (ns3_modules::Ns3Report, copied
/// into plain types so that reports compile without ns-3), with the options
/// it ran with. Invariants a correct run keeps (Ns3Network::verify checks them
/// before this is filled): packets and payload delivered = injected, zero
/// drops, zero credit violations.
struct PacketFabricStats {
  Ns3Settings settings;  ///< model, segment = packets_per_segment x mtu, VLs, ...
  std::uint64_t messages_sent = 0;
  std::uint64_t messages_delivered = 0;
  std::uint64_t packets_injected = 0;   ///< simulated packets (segments) put on the wire at sources
  std::uint64_t packets_delivered = 0;  ///< simulated packets (segments) that reached their destination
  std::uint64_t packet_hops = 0;        ///< simulated packets transmitted, over every link
  Bytes payload_injected;
  Bytes payload_delivered;
  Bytes wire_bytes;  ///< payload plus headers, over every link crossed
  std::uint64_t drops = 0;
  Time credit_stall;  ///< summed over output ports (InfiniBand)
  std::uint64_t credit_violations = 0;
  /// Receive buffers per port and VL as sized (InfiniBand), smallest and
  /// largest over the links that carried packets (0: none did).
  Bytes min_rx_buffer;
  Bytes max_rx_buffer;
  /// Links whose receive buffer is below their credit round trip, and the
  /// largest such round trip (ns3_modules::Ns3NetworkStats).
  std::uint64_t links_below_round_trip = 0;
  Bytes round_trip_bytes;
  std::uint64_t events = 0;  ///< ns-3 events executed
  /// Messages (and their payload) moved as flows inside a node's NVLink
  /// domain (ns3.scale_up: flow); counted in messages_sent/delivered only.
  std::uint64_t scale_up_messages = 0;
  Bytes scale_up_payload;
};

/// One run of a task graph on a backend: its result and what the backend
/// measured on the links. A backend fills what it has; the rest stays empty.
struct BackendRun {
  engine::ExecutionResult result;
  /// Per directed link (index = topology::LinkId): payload bytes carried,
  /// time it carried traffic, highest load over capacity in [0, 1]. Used by
  /// `tessera run --links` when link_csv is empty.
  std::vector<double> link_bytes;
  std::vector<Time> link_busy;
  std::vector<double> link_peak_utilization;
  /// The backend's own per-link CSV (starting with
  /// engine::kLinkCsvSharedColumns); empty: built from the vectors above.
  std::string link_csv;
  /// Packet-level statistics (the ns-3 backend).
  std::optional<PacketFabricStats> packet_fabric;
  /// Per traffic class, per directed link: the payload bytes the class's
  /// ranks sent over it (run_classified; empty when the backend cannot
  /// attribute traffic to sources).
  std::vector<std::vector<double>> link_bytes_by_class;
};

class NetworkBackend {
 public:
  NetworkBackend() = default;
  NetworkBackend(const NetworkBackend&) = delete;
  NetworkBackend& operator=(const NetworkBackend&) = delete;
  virtual ~NetworkBackend() = default;

  /// The name scenarios use (`backend:`, --backend): lower case, unique.
  [[nodiscard]] virtual std::string_view name() const = 0;
  /// False when two runs must not overlap in one process (ns-3 has one
  /// Simulator per process): sweep and search then run one point at a time.
  [[nodiscard]] virtual bool concurrent_runs() const { return true; }
  /// Throws ScenarioError (one line, naming the key) for what the scenario
  /// asks and this backend cannot model. The pipeline calls it before
  /// planning.
  virtual void check(const Scenario& s) const { (void)s; }
  /// Runs `graph` on `topo` (built from `s`, its start-of-run failures
  /// applied) with `options` (execution_options(s)); `observer` (optional)
  /// sees the run. Must be deterministic.
  [[nodiscard]] virtual BackendRun run(const parallelism::TaskGraph& graph, const topology::Topology& topo,
                                       const Scenario& s, const engine::ExecutionOptions& options,
                                       engine::ExecutionObserver* observer) const = 0;
  /// run() with each rank's traffic class (`source_classes[rank]`, -1 for
  /// none): a backend that can attribute traffic fills
  /// BackendRun::link_bytes_by_class. The default runs run() and leaves it
  /// empty.
  [[nodiscard]] virtual BackendRun run_classified(
      const parallelism::TaskGraph& graph, const topology::Topology& topo, const Scenario& s,
      const engine::ExecutionOptions& options, engine::ExecutionObserver* observer,
      // NOLINTNEXTLINE(performance-unnecessary-value-param): a sink the backends move from
      std::vector<std::int32_t> source_classes) const {
    (void)source_classes;
    return run(graph, topo, s, options, observer);
  }
};

/// Backends by name, in the order they were added. Owned by its caller.
class BackendRegistry {
 public:
  /// Throws InputError when a backend of that name is already there.
  void add(std::unique_ptr<const NetworkBackend> backend);
  /// The backend named `name`, or null.
  [[nodiscard]] const NetworkBackend* find(std::string_view name) const;
  /// The backend named `name`; throws InputError "unknown backend 'x'
  /// (expected flow or ns3)" listing the names otherwise.
  [[nodiscard]] const NetworkBackend& at(std::string_view name) const;
  [[nodiscard]] std::vector<std::string_view> names() const;

 private:
  std::vector<std::unique_ptr<const NetworkBackend>> backends_;
};

/// The backends tessera ships: flow, then ns3 (which, in a build without
/// ns-3, refuses to run with a one-line InputError saying so). A new one is
/// added in backend.cpp.
BackendRegistry built_in_backends();

/// A cable that fails or slows down during the run (a `failures:` entry
/// with `at:`), resolved against a topology.
struct TimedCableChange {
  Time at;
  topology::VertexId a = 0, b = 0;
  /// 0: the cable goes out of service; in (0, 1]: it runs at this fraction
  /// of its rate from then on.
  double factor = 0.0;
};
/// The timed failures of `s` (Scenario::Failures::timed) resolved against
/// `topo`: what a backend applies during the run, in scenario order. Throws
/// ScenarioError naming the key for an unknown vertex.
std::vector<TimedCableChange> timed_cable_changes(const Scenario& s, const topology::Topology& topo);

}  // namespace tessera::study
