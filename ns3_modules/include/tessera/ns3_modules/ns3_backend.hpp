#pragma once
// The ns-3 packet-level backend: the same EventLoop + Network seams as the
// flow backend, but ns3::Simulator owns the clock and every message that
// leaves its node crosses the fabric as packets (messages inside a node's
// NVLink domain move as flows by default: ScaleUpModel). Two fabric models:
//  - Ns3Model::InfiniBand (default): our own ns-3 InfiniBand model (IbNetDevice,
//    IbChannel, IbSwitch, IbHca in src/): credit-based link-level flow control
//    per virtual lane, input-buffered switches forwarding by linear forwarding
//    tables, queue pairs at the HCAs. Lossless by protocol.
//  - Ns3Model::PointToPoint: ns-3's PointToPointNetDevice with unbounded
//    queues and source routing (the walking skeleton, kept as a reference).
//
// This header is ns-3 free on purpose: the CLI includes it without ns-3's
// include paths. Everything that touches ns-3 lives behind it, in src/, and
// follows ns-3 conventions there (m_ members, PascalCase methods, TypeIds with
// attributes and trace sources); the classes declared here follow Tessera's
// (snake_case, trailing `_`).
//
// ns3::Simulator is a process-wide singleton, so at most one Ns3EventLoop may
// exist at a time; its destructor calls ns3::Simulator::Destroy(), so runs
// made one after another in one process are independent and identical.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessera/engine/event_loop.hpp"
#include "tessera/engine/executor.hpp"
#include "tessera/engine/network.hpp"
#include "tessera/parallelism/task_graph.hpp"
#include "tessera/topology/routing.hpp"
#include "tessera/topology/topology.hpp"
#include "tessera/units.hpp"

namespace tessera::engine {
class FlowNetwork;
}

namespace tessera::ns3_modules {

enum class Ns3Model {
  InfiniBand,    ///< credit-based IB fabric (default)
  PointToPoint,  ///< ns-3 PointToPoint links, unbounded queues (reference)
};

/// How messages between GPUs of one scale-up domain move: those whose route
/// (topology::Topology::route) crosses only NVLink links (GPU-NVSwitch or
/// GPU-GPU inside a node). Those links carry no other traffic (a route off
/// the node leaves through the GPU's HCA link), so the two models never share
/// a link.
enum class ScaleUpModel {
  /// Fluid flows with max-min fair sharing on the NVLink links
  /// (engine::FlowNetwork on the same clock): the flow backend's model
  /// inside a node, packets only on the InfiniBand (or point-to-point)
  /// fabric. NVLink is not InfiniBand: modelling an NVSwitch as an IB switch
  /// with credits is no more faithful, and moving the scale-up bytes (most of
  /// a tensor-parallel job's) as packets is what makes large runs slow.
  Flow,
  /// Every message as packets, the NVSwitch forwarding like a switch.
  Packets,
};

/// How an InfiniBand message picks its virtual lane.
enum class VlPolicy {
  Destination,  ///< VL = destination rank mod num_vls (a static SL-to-VL map per destination)
  Source,       ///< VL = source rank mod num_vls
};

struct Ns3Options {
  /// How run_on_ns3 expands collectives (passed to engine::execute): give it
  /// the scenario's, as the flow backend gets them, or the two backends run
  /// different transfer graphs.
  engine::ExecutionOptions execution;
  /// Largest payload of one packet. PointToPoint: 1 B..1 MiB. InfiniBand: an
  /// IB MTU, 256..4096 B (IB allows 256, 512, 1024, 2048 or 4096).
  Bytes mtu = Bytes::kib(4);
  /// PointToPoint only: packets a GPU keeps waiting in its NIC queue.
  int source_window = 2;

  // --- InfiniBand model ---------------------------------------------------
  Ns3Model model = Ns3Model::InfiniBand;
  /// Header bytes on the wire per MTU packet: LRH 8 + BTH 12 + ICRC 4 +
  /// VCRC 2 = 26 B of headers and CRCs, plus 4 B of start/end delimiters and
  /// idles between packets. Range 0..256.
  Bytes header_bytes = Bytes(30);
  /// Data virtual lanes per port (1..15), served round-robin by each output.
  int num_vls = 1;
  VlPolicy vl_policy = VlPolicy::Destination;
  /// Receive buffer per input port per VL, i.e. the credits a sender starts
  /// with (counted in 64 B blocks, as IB does). Zero = sized per link to
  /// cover the credit round trip at line rate (2 x latency x rate + 3
  /// segments), so an uncongested link never waits for credits. An explicit
  /// size must hold at least one segment.
  Bytes buffer_bytes = Bytes(0);
  /// Segment coarsening, the accuracy-for-speed knob: the simulator moves
  /// this many MTU packets as one unit (wire size = payload + header_bytes per
  /// MTU packet inside it, so serialization time is exact; only the
  /// granularity of interleaving, pipelining and credits coarsens). 1 = every
  /// packet (exact). 1..4096.
  int packets_per_segment = 1;
  /// Switches pick, per packet, the least-loaded output among the
  /// destination's equal-cost ports (by bytes queued for each), instead of
  /// the forwarding table's single port. Packets of one message may then
  /// arrive out of order; the HCA reassembles by byte count.
  bool adaptive_routing = false;
  /// Switches forward a packet as soon as its headers are in (virtual
  /// cut-through, as IB switches do) instead of after its last byte (store
  /// and forward). A packet still never leaves before its last byte arrived.
  bool cut_through = true;
  /// Per-link wire-bytes time series, in bins of this width; zero = totals only.
  Time link_sample_interval = Time::zero();
  /// Forwarding tables to use instead of topology::build_forwarding_tables(topo)
  /// (must outlive the run). Checked before the run: every fabric switch must
  /// reach every HCA attached to the fabric.
  const topology::ForwardingTables* forwarding_tables = nullptr;
  /// Optional accounting by class of the sending rank (a job, a tenant), as
  /// engine::FlowNetwork::set_source_classes: source_classes[r] in 0..n-1 is
  /// rank r's class, -1 (or a rank past the end) counts in no class; empty:
  /// no accounting. Fills LinkReport::payload_by_class (InfiniBand model
  /// only; PointToPoint has no per-link report). Checked: no value below -1.
  std::vector<std::int32_t> source_classes;
  /// Messages inside a scale-up (NVLink) domain: flows (default) or packets.
  ScaleUpModel scale_up = ScaleUpModel::Flow;
  /// Cables that slow down during the run: at `at`, every cable between
  /// vertices `a` and `b` (both directions, parallel cables too) runs at
  /// `factor` (in (0, 1]) of its rate; a packet already on the wire keeps
  /// its rate. A cable failing (factor 0) is not supported here (routes
  /// come from the forwarding tables, which do not change during a run):
  /// InputError, as for an unknown cable or a negative time.
  struct CableRateChange {
    Time at;
    topology::VertexId a = 0, b = 0;
    double factor = 1.0;
  };
  std::vector<CableRateChange> rate_changes;
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
  /// A sign of life for long runs: `fn` is called with the simulated time
  /// once every `every` events ns-3 takes from its queue while run() runs
  /// (from the scheduler, so no event is added: the results and
  /// events_processed() stay exactly as without it; not when ns-3 drains
  /// what an interrupted run left, in the destructor). Null `fn`: none.
  /// Call before run(). Throws InputError for `every` 0.
  void set_heartbeat(std::function<void(Time)> fn, std::uint64_t every = kHeartbeatEvents);
  /// The default heartbeat interval: about 50 ms of a large run's wall time.
  static constexpr std::uint64_t kHeartbeatEvents = 1U << 16;

 private:
  bool running_ = false;  ///< inside run(): the heartbeat calls out only then
};

/// What the packet fabric did; filled as the simulation runs.
struct Ns3NetworkStats {
  std::uint64_t messages_sent = 0;
  std::uint64_t messages_delivered = 0;
  std::uint64_t packets_injected = 0;   ///< simulated packets (segments) put on the wire at sources
  std::uint64_t packets_delivered = 0;  ///< simulated packets (segments) that reached their HCA
  std::uint64_t packet_hops = 0;        ///< simulated packets transmitted, over every link
  Bytes payload_injected;   ///< message bytes put on the wire at sources
  Bytes payload_delivered;  ///< message bytes that reached their destination
  Bytes wire_bytes;         ///< payload plus headers, over every link crossed
  std::uint64_t drops = 0;  ///< PointToPoint: device drops; InfiniBand: buffer overflows (always 0 unless a bug)
  std::uint32_t max_queue_packets = 0;  ///< deepest transmit queue (PointToPoint) / input buffer (InfiniBand)
  // InfiniBand only.
  Bytes max_buffer_bytes;                ///< fullest input buffer of any port and VL
  /// The receive buffers (per port and VL, as sized: ns3.buffer, or auto
  /// from each link's latency, bandwidth and segment) at the far end of
  /// the links that carried packets, smallest and largest; 0 when none did.
  Bytes min_rx_buffer;
  Bytes max_rx_buffer;
  /// Links that carried packets into a buffer smaller than their credit
  /// round trip at line rate (2 x latency x rate, in credit bytes: an
  /// explicit ns3.buffer too small, which throttles the link whatever its
  /// load), and the largest such round trip; 0 with automatic buffers.
  std::uint64_t links_below_round_trip = 0;
  Bytes round_trip_bytes;
  Time credit_stall;                     ///< sum over output ports of time spent waiting for credits
  std::uint64_t credit_violations = 0;   ///< credits below zero or above the buffer (always 0 unless a bug)
  // ScaleUpModel::Flow: messages moved as flows inside a node. They count in
  // messages_sent / messages_delivered, not in the packet and payload counters.
  std::uint64_t scale_up_messages = 0;   ///< sent to the scale-up flow model
  Bytes scale_up_payload;                ///< their payload bytes
};

/// One directed link's totals (InfiniBand model). A scale-up (NVLink) link
/// under ScaleUpModel::Flow carries flows, not packets: payload_bytes, busy
/// (time it carried at least one flow) and payload_by_class come from the
/// flow model; packets, wire_bytes, credit_stall and the queue fields stay 0.
struct LinkReport {
  topology::LinkId link = -1;
  Bytes wire_bytes;      ///< payload + headers transmitted
  Bytes payload_bytes;
  std::uint64_t packets = 0;
  Time busy;             ///< time spent serialising
  Time credit_stall;     ///< time the output idled with packets waiting but no credits
  Bytes max_queue;       ///< fullest input buffer (all VLs) at the link's receiving end
  std::uint32_t max_queue_packets = 0;
  /// Wire bytes whose transmission started in each bin of
  /// Ns3Report::sample_interval (empty without a sample interval).
  std::vector<Bytes> bytes_per_sample;
  /// payload_bytes split by the class of each packet's source rank
  /// (Ns3Options::source_classes; index = class, size = highest class + 1);
  /// sums to payload_bytes when every rank that sends over the link has a
  /// class. Empty without source_classes.
  std::vector<Bytes> payload_by_class;
};

/// Everything a run of the ns-3 backend measured besides the execution result.
struct Ns3Report {
  Ns3NetworkStats network;
  /// Simulated time when the fabric went quiet (Ns3Network::report); from
  /// run_on_ns3, the iteration's end (the executor's makespan): the span of
  /// link_csv's utilization, as the flow backend's.
  Time end_time;
  Time sample_interval;          ///< width of LinkReport::bytes_per_sample bins
  std::uint64_t events = 0;      ///< ns-3 events executed
  std::vector<LinkReport> links; ///< InfiniBand: one per directed link (index = LinkId); PointToPoint: empty
};

/// A Network over ns-3 (see Ns3Model). No Internet stack: packets carry a
/// small header and are forwarded by tables (InfiniBand) or source-routed
/// along topology::Topology::route(src, dst) (PointToPoint).
class Ns3Network final : public engine::Network {
 public:
  /// PointToPoint per-packet header bytes on the wire: the Tessera header
  /// (message id, destination, sequence number: 16 B) plus the PPP header (2 B).
  static constexpr std::int64_t kPacketOverhead = 18;

  /// `topo` and `loop` must outlive the network. Throws InputError, before
  /// anything is simulated, for bad options, non-positive link rates or
  /// forwarding tables that do not reach every destination.
  Ns3Network(const topology::Topology& topo, Ns3EventLoop& loop, const Ns3Options& options = {});
  ~Ns3Network() override;
  Ns3Network(const Ns3Network&) = delete;
  Ns3Network& operator=(const Ns3Network&) = delete;

  void send(const engine::Message& msg, engine::Callback on_delivered) override;
  /// The latency of topology::Topology::route(src, dst) (the forwarding
  /// tables' paths have the same hop count).
  [[nodiscard]] Time latency(int src, int dst) override;

  [[nodiscard]] const Ns3NetworkStats& stats() const;
  /// Per-link totals, time series and fabric stats so far.
  [[nodiscard]] Ns3Report report() const;
  /// Call after the loop has run: throws SimulationError unless nothing was
  /// dropped, credits never went negative (nor above the buffer), every
  /// message was delivered and every injected byte arrived.
  void verify() const;
  /// Whether a message from `src` to `dst` goes to the scale-up flow model
  /// (ScaleUpModel::Flow and a route of NVLink links only).
  [[nodiscard]] bool scale_up_route(int src, int dst);

 /// The ns-3 side (opaque here; the models in src/ implement it).
  class Fabric;

 private:
  /// The scale-up flows' messages and bytes added to the fabric's counters.
  void add_scale_up(Ns3NetworkStats& s) const;
  /// Throws engine::transfer_overflow_error when the slowest link of the
  /// message's route would take longer than engine::kLongestTransferPs to
  /// carry it (the flow backend's error, where the packets would otherwise
  /// never arrive: helper 96).
  void check_transfer_time(const engine::Message& msg);

  std::unique_ptr<Fabric> fabric_;
  const topology::Topology& topo_;
  engine::EventLoop& loop_;
  /// ScaleUpModel::Flow: the flow model of the NVLink links (null: packets).
  std::unique_ptr<engine::FlowNetwork> scale_up_;
  std::unordered_map<std::uint64_t, bool> scale_up_pair_;  ///< (src x GPUs + dst) -> scale_up_route
  std::uint64_t scale_up_sent_ = 0;
  std::uint64_t scale_up_delivered_ = 0;
  Bytes scale_up_bytes_;
  double min_link_bps_ = 0;        ///< the slowest link's rate at the start (check_transfer_time's shortcut)
  mutable Ns3NetworkStats stats_;  ///< the fabric's counters plus the scale-up ones (stats())
};

/// Runs `graph` on `topo` with the ns-3 backend: creates an Ns3EventLoop and
/// an Ns3Network, calls engine::execute, checks the fabric's invariants
/// (Ns3Network::verify), fills `report` if given, destroys the simulator and
/// returns the result. Throws InputError for bad options, topologies or
/// graphs, SimulationError if the run deadlocks, loses data or breaks an
/// invariant, and SimulationError if an Ns3EventLoop is already alive.
engine::ExecutionResult run_on_ns3(const parallelism::TaskGraph& graph, const topology::Topology& topo,
                                   const Ns3Options& options = {},
                                   engine::ExecutionObserver* observer = nullptr, Ns3Report* report = nullptr);

/// Per-link totals as CSV, one row per directed link that carried traffic:
/// engine::kLinkCsvSharedColumns (link,src,dst,tier,bandwidth_bps,payload_bytes,
/// busy_us,utilization (busy / end_time)), then segments,wire_bytes,
/// credit_stall_us,max_queue_bytes,max_queue_segments (segments: the units
/// ns-3 moves, Ns3Options::packets_per_segment MTU packets each)
std::string link_csv(const Ns3Report& report, const topology::Topology& topo);
/// Per-link time series as CSV (needs Ns3Options::link_sample_interval):
/// link,t_us (bin start),wire_bytes,utilization (of the bin); links and bins
/// with no traffic are left out.
std::string link_timeseries_csv(const Ns3Report& report, const topology::Topology& topo);
/// Writes link_csv (and, when `timeseries_path` is not empty and there are
/// samples, link_timeseries_csv) atomically (temp file + rename). Throws
/// InputError if a file cannot be written.
void write_link_csv(const Ns3Report& report, const topology::Topology& topo, const std::string& path,
                    const std::string& timeseries_path = {});

}  // namespace tessera::ns3_modules
