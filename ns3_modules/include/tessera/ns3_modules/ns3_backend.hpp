#pragma once
// The ns-3 packet-level backend: the same EventLoop + Network seams as the
// flow backend, but ns3::Simulator owns the clock and every message crosses
// the fabric as MTU-sized packets over ns-3 PointToPoint links.
//
// This header is ns-3 free on purpose: the CLI includes it without ns-3's
// include paths. Everything that touches ns-3 lives behind it, in src/, and
// follows ns-3 conventions there (m_ members, PascalCase methods); the classes
// declared here follow Tessera's (snake_case, trailing `_`).
//
// ns3::Simulator is a process-wide singleton, so at most one Ns3EventLoop may
// exist at a time; its destructor calls ns3::Simulator::Destroy(), so runs
// made one after another in one process are independent and identical.
#include <cstdint>
#include <memory>

#include "tessera/engine/event_loop.hpp"
#include "tessera/engine/executor.hpp"
#include "tessera/engine/network.hpp"
#include "tessera/parallelism/task_graph.hpp"
#include "tessera/topology/topology.hpp"
#include "tessera/units.hpp"

namespace tessera::ns3_modules {

struct Ns3Options {
  /// Largest payload of one packet. Every packet also carries
  /// Ns3Network::kPacketOverhead bytes of headers on the wire.
  Bytes mtu = Bytes::kib(4);
  /// Packets a GPU keeps waiting in its NIC queue (besides the one on the
  /// wire). Sources are paced by their own link: they add a packet whenever
  /// one starts transmitting, round-robin over their active messages.
  int source_window = 2;
};

/// An EventLoop whose clock is ns3::Simulator's (picosecond resolution,
/// PriorityQueueScheduler, FIFO among events at the same time).
class Ns3EventLoop final : public engine::EventLoop {
 public:
  /// Throws SimulationError if another Ns3EventLoop is alive.
  Ns3EventLoop();
  ~Ns3EventLoop() override;  ///< ns3::Simulator::Destroy()
  Ns3EventLoop(const Ns3EventLoop&) = delete;
  Ns3EventLoop& operator=(const Ns3EventLoop&) = delete;

  [[nodiscard]] Time now() const override;
  /// Throws SimulationError for a negative delay.
  void schedule(Time delay, engine::Callback fn) override;
  void run() override;
  /// Events ns-3 has executed so far (ours and its own packet events).
  [[nodiscard]] std::uint64_t events_processed() const;
};

/// What the packet fabric did; filled as the simulation runs.
struct Ns3NetworkStats {
  std::uint64_t messages_sent = 0;
  std::uint64_t messages_delivered = 0;
  std::uint64_t packets_injected = 0;
  std::uint64_t packets_delivered = 0;
  Bytes payload_injected;   ///< message bytes put on the wire at sources
  Bytes payload_delivered;  ///< message bytes that reached their destination
  Bytes wire_bytes;         ///< payload plus headers, over every link crossed
  std::uint64_t drops = 0;  ///< MacTxDrop + PhyTxDrop + PhyRxDrop, all devices
  std::uint32_t max_queue_packets = 0;  ///< deepest transmit queue seen
};

/// A Network over ns-3: one ns3::Node per topology vertex, one
/// PointToPointChannel with a PointToPointNetDevice at each end per duplex
/// link. No Internet stack: packets carry a small Tessera header and are
/// source-routed along topology::Topology::route(src, dst).
class Ns3Network final : public engine::Network {
 public:
  /// Per-packet header bytes on the wire: the Tessera header (message id,
  /// destination, sequence number: 16 B) plus the PPP header (2 B).
  static constexpr std::int64_t kPacketOverhead = 18;

  /// `topo` and `loop` must outlive the network. Throws InputError for bad
  /// options.
  Ns3Network(const topology::Topology& topo, Ns3EventLoop& loop, const Ns3Options& options = {});
  ~Ns3Network() override;
  Ns3Network(const Ns3Network&) = delete;
  Ns3Network& operator=(const Ns3Network&) = delete;

  void send(const engine::Message& msg, engine::Callback on_delivered) override;

  [[nodiscard]] const Ns3NetworkStats& stats() const;
  /// Call after the loop has run: throws SimulationError unless nothing was
  /// dropped, every message was delivered and every injected byte arrived.
  void verify() const;

 private:
  class Fabric;
  std::unique_ptr<Fabric> fabric_;
};

/// Runs `graph` on `topo` with the ns-3 backend: creates an Ns3EventLoop and
/// an Ns3Network, calls engine::execute, checks the fabric was lossless
/// (Ns3Network::verify), destroys the simulator and returns the result.
/// Throws InputError for bad options or graphs, SimulationError if the run
/// deadlocks or loses data, and SimulationError if an Ns3EventLoop is already
/// alive in this process.
engine::ExecutionResult run_on_ns3(const parallelism::TaskGraph& graph, const topology::Topology& topo,
                                   const Ns3Options& options = {},
                                   engine::ExecutionObserver* observer = nullptr);

}  // namespace tessera::ns3_modules
