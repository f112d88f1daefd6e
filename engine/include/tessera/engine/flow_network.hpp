#pragma once
// Flow-level backend: every message is a fluid flow along its routed path.
// Active flows share link bandwidth max-min fairly (progressive filling),
// a message of efficiency e (Message::efficiency) occupies bytes / e of wire
// (its payload moves at e times its share; link_bytes() counts payload),
// rates are recomputed whenever a flow starts or finishes, and a message is
// delivered one path latency (sum of link latencies) plus its delay_after
// after its last byte left the bottleneck.
//
// Incremental: flows that start or end at one instant are batched into one
// recomputation (a zero-delay event, once per instant), which only visits the
// flows connected to the changed ones through shared links (the rates of
// every other component cannot change). Progressive filling over a component
// gives bit-for-bit the rates a global pass gives (same link order, same flow
// order, same arithmetic). A flow's remaining bytes are brought up to date
// only when its rate changes; completions come from a heap of due times with
// lazy invalidation.
//
// Cables may fail or slow down at a simulated time (change_cable_at): a slow
// cable's flows get new rates from then on; a failed cable's flows in flight
// move, that instant, to the route the fabric without it gives (deterministic,
// as every route) with the bytes they have left, and every later message is
// routed around it.
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "tessera/engine/network.hpp"
#include "tessera/error.hpp"
#include "tessera/topology/topology.hpp"

namespace tessera::engine {

/// The longest one transfer may take at one rate (~46 days, beyond any
/// iteration): a transfer that would take longer fails the run
/// (transfer_overflow_error) rather than report the cap as a time (helper
/// 88: a NIC at 1 bps printed an iteration of 4e9 ms). Every backend's.
inline constexpr std::int64_t kLongestTransferPs = 4'000'000'000'000'000'000;

/// The error of a transfer of `bytes` from GPU `src` to GPU `dst` that would
/// take longer than kLongestTransferPs: it names the slowest link of its
/// path, `slowest`, which carries `bps` bits per second (a degraded cable's
/// rate included), and carries that rate for the caller to name the key.
TransferOverflowError transfer_overflow_error(double bytes, int src, int dst, const topology::Topology& topo,
                                              topology::LinkId slowest, double bps);

class FlowNetwork final : public Network {
 public:
  FlowNetwork(const topology::Topology& topo, EventLoop& loop);
  void send(const Message& msg, Callback on_delivered) override;
  /// The routed path's latency (sum of its links' latencies).
  [[nodiscard]] Time latency(int src, int dst) override { return routes_[route(src, dst)].latency; }
  /// One more for every cable taken out of service (change_cable_at with
  /// factor 0, when it happens): routes, and their latencies, may differ.
  [[nodiscard]] std::uint64_t routing_epoch() const override { return routing_epoch_; }

  /// At simulated time `at` (not before now), every cable between `a` and
  /// `b` (both directions, parallel cables included) changes: `factor` 0
  /// takes it out of service, `factor` in (0, 1] multiplies its rate. Flows
  /// crossing a failed cable then are re-routed at that instant with their
  /// remaining bytes (their delivery pays the new path's latency); routes
  /// asked for later avoid it. Throws InputError when there is no such
  /// cable or `at` or `factor` is out of range; SimulationError (when it
  /// happens) when a GPU with a flow in flight is cut off.
  void change_cable_at(Time at, topology::VertexId a, topology::VertexId b, double factor);

  /// Current rate of every active flow in start order, in bytes per second
  /// (for tests). Applies a pending same-instant recomputation first.
  [[nodiscard]] std::vector<double> active_rates();
  /// Bytes that crossed each directed link so far (index = LinkId): whole
  /// messages once delivered, plus the part of active flows moved by now.
  [[nodiscard]] const std::vector<double>& link_bytes() const;
  /// Time each directed link carried at least one active flow so far
  /// (index = LinkId): from a message's start to its last byte leaving, the
  /// union over its messages (path latency not included). A lone message of
  /// B bytes on a link of bandwidth W keeps it busy B * 8 / W (payload over
  /// efficiency, rounded up to a picosecond).
  [[nodiscard]] std::vector<Time> link_busy() const;
  /// Highest instantaneous load of each directed link so far, as the sum of
  /// its flows' wire rates over its capacity, in [0, 1] (max-min fair
  /// sharing fills a bottleneck to exactly 1). Updated where rates are
  /// computed: one pass over each recomputed component's links.
  [[nodiscard]] std::vector<double> link_peak_utilization() const;
  /// Optional accounting by class of the sending rank (a job, a tenant):
  /// class_of_rank[r] in 0..classes-1 is rank r's class, -1 (or a rank past
  /// the end) counts in no class. Call before the first send.
  void set_source_classes(std::vector<std::int32_t> class_of_rank);
  /// Adaptive routing: each message takes, at every switch with several
  /// equal-cost next hops, the link with the fewest flows on it when it
  /// starts (topology::Topology::route_least_loaded), instead of the static
  /// destination-mod-k route. Call before the first send.
  void set_adaptive_routing(bool on) { adaptive_ = on; }
  /// link_bytes() split by the class of each message's source ([class][LinkId]);
  /// over the classes it sums to link_bytes() for links only classed ranks
  /// use. Empty without set_source_classes.
  [[nodiscard]] std::vector<std::vector<double>> link_bytes_by_class() const;
  [[nodiscard]] std::uint64_t flows_completed() const { return completed_; }
  /// Rate recomputations run (one per instant with starts or ends), and the
  /// flows they visited in total (for benchmarks).
  [[nodiscard]] std::uint64_t recomputations() const { return recomputations_; }
  [[nodiscard]] std::uint64_t flows_visited() const { return flows_visited_; }

 private:
  using Slot = std::uint32_t;
  struct Route {
    std::uint32_t begin = 0;  ///< into path_links_
    std::uint32_t len = 0;
    Time latency;
  };
  struct Flow {
    std::uint64_t id = 0;       ///< start order; ties and per-link lists follow it
    std::uint32_t path_begin = 0;  ///< its links: path_links_[path_begin, path_begin + path_len)
    std::uint32_t path_len = 0;
    std::uint32_t route = 0;    ///< index into routes_
    std::int32_t src = 0, dst = 0;
    double payload = 0.0;       ///< bytes to cross its path (after a re-route: the part left)
    double efficiency = 1.0;    ///< payload per wire byte (Message::efficiency)
    double wire = 0.0;          ///< bytes on the wire: bytes / efficiency
    double remaining = 0.0;     ///< wire bytes left at `updated`
    double rate = 0.0;          ///< bytes per picosecond
    Time updated;
    std::int64_t due = 0;       ///< ps when the last byte leaves (valid when rate > 0)
    std::uint32_t version = 0;  ///< per slot, bumped on start and on every rate change
    bool active = false;
    bool capped = false;    ///< due held at the longest a flow may take (flow_network.cpp, kNeverPs)
    std::int32_t cls = -1;  ///< its source rank's class (set_source_classes), -1: none
    Time latency;  ///< of its path, plus Message::delay_after
    Callback on_delivered;
  };
  /// A flow's completion: ordered by time only (flows due together are
  /// finished in start order after popping). Stale once the slot's version
  /// moved on (rate change, or the slot now holds a later flow).
  struct Due {
    std::int64_t at;
    Slot slot;
    std::uint32_t version;
  };
  struct LaterDue {
    bool operator()(const Due& a, const Due& b) const { return a.at > b.at; }
  };
  struct Share {
    double share;
    topology::LinkId link;
    std::uint32_t version;
  };
  struct LargerShare {
    bool operator()(const Share& a, const Share& b) const {
      return a.share != b.share ? a.share > b.share : a.link > b.link;
    }
  };

  std::uint32_t route(int src, int dst);
  void apply_cable_change(topology::VertexId a, topology::VertexId b, double factor,
                          const std::vector<topology::LinkId>& links);
  void reroute(Slot s, Time now);
  void request_recompute();
  void recompute();
  void fill();
  void freeze_link(topology::LinkId link, double best);
  void set_rate(Slot s, double rate, Time now);
  void drop_stale_due();
  void arm_completion();
  void on_completion_event();
  void deliver(std::uint32_t batch);
  [[nodiscard]] double remaining_at(const Flow& f, Time t) const;
  [[nodiscard]] std::span<const topology::LinkId> path(const Flow& f) const {
    return {path_links_.data() + f.path_begin, f.path_len};
  }

  const topology::Topology& topo_;
  EventLoop& loop_;
  /// What routes come from: topo_, or after a timed failure its copy with
  /// the failed cables (owned).
  const topology::Topology* routing_ = &topo_;
  std::unique_ptr<topology::Topology> failed_topo_;
  std::uint64_t routing_epoch_ = 0;
  std::unordered_map<std::uint64_t, std::uint32_t> route_index_;  // lookup only, never iterated
  bool adaptive_ = false;
  /// Adaptive routes by their links (each distinct path stored once).
  std::map<topology::Path, std::uint32_t> adaptive_index_;
  /// Pairs with a single equal-cost path (adaptive routing has no choice).
  std::unordered_map<std::uint64_t, bool> single_path_;
  /// The route of a message from src to dst: the cached static one, or
  /// with adaptive routing the least loaded now.
  std::uint32_t route_now(int src, int dst);
  /// Appends `path` to routes_ and path_links_; its index.
  std::uint32_t store_route(const topology::Path& path);
  std::vector<Route> routes_;
  std::vector<topology::LinkId> path_links_;  // every route's links, back to back
  std::vector<Flow> flows_;         // slots; free ones listed in free_
  std::vector<Slot> free_;
  std::vector<double> capacity_;    // bytes per ps, per link
  std::vector<std::vector<Slot>> link_flows_;  // active flows per link, in start order
  std::vector<Due> due_heap_;       // binary heap (LaterDue)
  std::vector<Time> armed_;         // times of scheduled completion events (min-heap)
  // Changes since the last recomputation.
  std::vector<Slot> started_;
  std::vector<topology::LinkId> vacated_;  // links that lost a flow
  std::vector<Slot> done_;                 // scratch of on_completion_event()
  std::vector<Slot> released_;             // finished flows' slots, reusable after the next recompute()
  // Deliveries due at one instant, run by one event (deliver()): slots of
  // callback lists, reused; open_batches_ is on_completion_event()'s scratch.
  std::vector<std::vector<Callback>> batches_;
  std::vector<std::uint32_t> free_batches_;
  std::vector<std::pair<Time, std::uint32_t>> open_batches_;
  bool recompute_pending_ = false;
  // Scratch for recompute()/fill(), indexed by LinkId / slot.
  static constexpr std::size_t kScanLinks = 16;  // components up to this many links scan instead of a heap
  std::vector<std::uint64_t> link_mark_;
  std::vector<std::uint64_t> touch_mark_;
  std::vector<std::uint64_t> flow_mark_;
  std::uint64_t epoch_ = 0;
  std::uint64_t touch_epoch_ = 0;
  std::size_t frozen_ = 0;
  std::vector<topology::LinkId> seeds_;
  std::vector<double> cap_left_;
  std::vector<std::int32_t> unfrozen_;
  std::vector<std::uint32_t> share_version_;
  std::vector<double> new_rate_;
  std::vector<Share> share_heap_;
  std::vector<topology::LinkId> comp_links_;
  std::vector<Slot> comp_flows_;
  std::vector<topology::LinkId> touched_;

  std::uint64_t next_flow_ = 0;
  std::uint64_t completed_ = 0;
  std::uint64_t recomputations_ = 0;
  std::uint64_t flows_visited_ = 0;
  std::vector<double> done_bytes_;          // per link, delivered messages (whole bytes)
  struct LinkUse {
    std::uint32_t active = 0;  ///< flows started whose last byte has not left
    Time since;                ///< when `active` last rose from 0
    Time busy;                 ///< busy periods that ended
  };
  std::vector<LinkUse> use_;     // per link
  std::vector<double> min_left_;  // per link, least capacity left after a filling (bytes per ps)
  mutable std::vector<double> link_bytes_;  // done_bytes_ + in-flight, built on demand
  std::vector<std::int32_t> class_of_rank_;        // set_source_classes (empty: no accounting)
  std::vector<std::vector<double>> class_done_bytes_;  // [class][link], delivered messages
};

}  // namespace tessera::engine
