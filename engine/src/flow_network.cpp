#include "tessera/engine/flow_network.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "tessera/error.hpp"

namespace tessera::engine {

namespace {

/// The longest a flow may take at one rate: one due later is held this
/// long, and if it is still due then (no rate change came) the run fails.
constexpr std::int64_t kNeverPs = kLongestTransferPs;

/// Picoseconds until `remaining` bytes have left at `rate` bytes/ps, rounded
/// up (a flow within 1e-9 ps of a whole picosecond finishes on it); at most
/// kNeverPs, with `capped` set when held there.
std::int64_t delay_ps(double remaining, double rate, bool& capped) {
  const double x = std::ceil(std::max(0.0, remaining / rate) - 1e-9);
  capped = x >= static_cast<double>(kNeverPs);
  return capped ? kNeverPs : static_cast<std::int64_t>(x);
}

/// A (src, dst) pair as one key of the route caches.
std::uint64_t pair_key(int src, int dst) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(src)) << 32U) |
         static_cast<std::uint32_t>(dst);
}

}  // namespace

TransferOverflowError transfer_overflow_error(double bytes, int src, int dst, const topology::Topology& topo,
                                              topology::LinkId slowest, double bps) {
  const auto& link = topo.link(slowest);
  return TransferOverflowError(
      fmt::format(
          "a transfer of {:.0f} bytes from GPU {} to GPU {} would take more than {:.0f} days of simulated "
          "time: the slowest link of its path, {} -> {}, carries {:g} bit/s (is a bandwidth's unit wrong?)",
          bytes, src, dst, Time::from_ps(kLongestTransferPs).seconds() / 86400, topo.vertex(link.src).name,
          topo.vertex(link.dst).name, bps),
      bps);
}

FlowNetwork::FlowNetwork(const topology::Topology& topo, EventLoop& loop)
    : topo_(topo),
      loop_(loop),
      capacity_(topo.links().size()),
      link_flows_(topo.links().size()),
      link_mark_(topo.links().size(), 0),
      touch_mark_(topo.links().size(), 0),
      cap_left_(topo.links().size(), 0.0),
      unfrozen_(topo.links().size(), 0),
      share_version_(topo.links().size(), 0),
      done_bytes_(topo.links().size(), 0.0),
      use_(topo.links().size()) {
  for (std::size_t l = 0; l < capacity_.size(); ++l) {
    capacity_[l] = topo.link(static_cast<topology::LinkId>(l)).bandwidth.bytes_per_second() * 1e-12;
  }
  min_left_ = capacity_;
}

std::uint32_t FlowNetwork::store_route(const topology::Path& path) {
  const auto index = static_cast<std::uint32_t>(routes_.size());
  routes_.push_back(Route{static_cast<std::uint32_t>(path_links_.size()), static_cast<std::uint32_t>(path.size()),
                          topo_.latency(path)});
  path_links_.insert(path_links_.end(), path.begin(), path.end());
  return index;
}

std::uint32_t FlowNetwork::route(int src, int dst) {
  const std::uint64_t key = pair_key(src, dst);
  auto it = route_index_.find(key);
  if (it != route_index_.end()) return it->second;
  const std::uint32_t index = store_route(routing_->route(src, dst));
  route_index_.emplace(key, index);
  return index;
}

std::uint32_t FlowNetwork::route_now(int src, int dst) {
  if (!adaptive_) return route(src, dst);
  // A pair with one equal-cost path (inside a node, under one leaf) keeps
  // its cached route: nothing to choose.
  auto [one, fresh] = single_path_.try_emplace(pair_key(src, dst), false);
  if (fresh) one->second = routing_->count_ecmp_paths(src, dst) <= 1;
  if (one->second) return route(src, dst);
  topology::Path path = routing_->route_least_loaded(
      src, dst, [this](topology::LinkId l) { return use_[static_cast<std::size_t>(l)].active; });
  const auto it = adaptive_index_.find(path);
  if (it != adaptive_index_.end()) return it->second;
  const std::uint32_t index = store_route(path);
  adaptive_index_.emplace(std::move(path), index);
  return index;
}

void FlowNetwork::send(const Message& msg, Callback on_delivered) {
  if (msg.bytes.count() < 0) throw SimulationError("flow network: negative message size");
  if (!(msg.efficiency > 0.0 && msg.efficiency <= 1.0)) {
    throw SimulationError(fmt::format("flow network: message efficiency must be in (0, 1] (got {})", msg.efficiency));
  }
  const std::uint32_t r = msg.bytes.count() == 0 ? route(msg.src, msg.dst) : route_now(msg.src, msg.dst);
  const Route& rt = routes_[r];
  if (rt.len == 0 || msg.bytes.count() == 0) {
    loop_.schedule(rt.latency + msg.delay_after, std::move(on_delivered));
    return;
  }
  Slot s = 0;
  if (free_.empty()) {
    s = static_cast<Slot>(flows_.size());
    flows_.emplace_back();
    flow_mark_.push_back(0);
    new_rate_.push_back(0.0);
  } else {
    s = free_.back();
    free_.pop_back();
  }
  Flow& f = flows_[s];
  f.id = next_flow_++;
  f.path_begin = rt.begin;
  f.path_len = rt.len;
  f.route = r;
  f.src = msg.src;
  f.dst = msg.dst;
  f.latency = rt.latency + msg.delay_after;  // the delivery's delay after the last byte left
  f.payload = static_cast<double>(msg.bytes.count());
  f.efficiency = msg.efficiency;
  f.wire = msg.efficiency == 1.0 ? msg.bytes.as_double() : msg.bytes.as_double() / msg.efficiency;
  f.remaining = f.wire;
  f.rate = -1.0;  // not yet rated: set_rate() starts it
  f.updated = loop_.now();
  f.due = 0;
  ++f.version;
  f.active = true;
  f.cls = msg.src >= 0 && static_cast<std::size_t>(msg.src) < class_of_rank_.size()
              ? class_of_rank_[static_cast<std::size_t>(msg.src)]
              : -1;
  f.on_delivered = std::move(on_delivered);
  const Time now = loop_.now();
  for (topology::LinkId l : path(f)) {
    const auto li = static_cast<std::size_t>(l);
    link_flows_[li].push_back(s);
    if (use_[li].active++ == 0) use_[li].since = now;
  }
  started_.push_back(s);
  request_recompute();
}

void FlowNetwork::change_cable_at(Time at, topology::VertexId a, topology::VertexId b, double factor) {
  const Time now = loop_.now();
  if (at < now) {
    throw InputError(fmt::format("flow network: a cable change at {} is in the past (now {})", to_string(at),
                                 to_string(now)));
  }
  if (!(factor >= 0.0 && factor <= 1.0)) {
    throw InputError(fmt::format("flow network: a cable's rate factor must be in [0, 1] (got {})", factor));
  }
  std::vector<topology::LinkId> links = topo_.cable_links(a, b);
  if (links.empty()) {
    throw InputError(fmt::format("flow network: no cable between {} and {}", topo_.vertex(a).name,
                                 topo_.vertex(b).name));
  }
  loop_.schedule(at - now, [this, a, b, factor, links = std::move(links)] { apply_cable_change(a, b, factor, links); });
}

void FlowNetwork::apply_cable_change(topology::VertexId a, topology::VertexId b, double factor,
                                     const std::vector<topology::LinkId>& links) {
  const Time now = loop_.now();
  if (factor > 0.0) {
    // Slower from now on: its flows' component is recomputed at this instant.
    // The peak load seen so far keeps its fraction of the (new) capacity.
    for (topology::LinkId l : links) {
      const auto li = static_cast<std::size_t>(l);
      capacity_[li] *= factor;
      min_left_[li] *= factor;
      vacated_.push_back(l);
    }
    request_recompute();
    return;
  }
  // Out of service: later routes come from the fabric without it (the same
  // failures give the same routes), and its flows in flight move now, in
  // start order.
  if (!failed_topo_) failed_topo_ = std::make_unique<topology::Topology>(*routing_);
  (void)failed_topo_->fail_cable(a, b);
  routing_ = failed_topo_.get();
  route_index_.clear();
  single_path_.clear();
  ++routing_epoch_;
  std::vector<Slot> moving;
  for (topology::LinkId l : links) {
    for (Slot s : link_flows_[static_cast<std::size_t>(l)]) {
      if (flows_[s].active) moving.push_back(s);
    }
  }
  std::sort(moving.begin(), moving.end(), [this](Slot x, Slot y) { return flows_[x].id < flows_[y].id; });
  moving.erase(std::unique(moving.begin(), moving.end()), moving.end());
  for (Slot s : moving) reroute(s, now);
  request_recompute();
}

void FlowNetwork::reroute(Slot s, Time now) {
  Flow& f = flows_[s];
  const double left = remaining_at(f, now);
  const double moved = (f.wire - left) * f.efficiency;  // payload that crossed the old path
  for (topology::LinkId l : path(f)) {
    const auto li = static_cast<std::size_t>(l);
    done_bytes_[li] += moved;
    if (f.cls >= 0) class_done_bytes_[static_cast<std::size_t>(f.cls)][li] += moved;
    auto& list = link_flows_[li];
    list.erase(std::find(list.begin(), list.end(), s));
    if (--use_[li].active == 0) use_[li].busy += now - use_[li].since;
    vacated_.push_back(l);
  }
  const Time delay_after = f.latency - routes_[f.route].latency;
  std::uint32_t r = 0;
  try {
    r = route_now(f.src, f.dst);
  } catch (const InputError& e) {
    throw SimulationError(fmt::format("flow network: at {} a failed cable cut a flow off: {}", to_string(now),
                                      e.what()));
  }
  const Route& rt = routes_[r];
  f.route = r;
  f.path_begin = rt.begin;
  f.path_len = rt.len;
  f.latency = rt.latency + delay_after;
  f.payload = std::max(0.0, f.payload - moved);
  f.wire = left;
  f.remaining = left;
  f.updated = now;
  f.rate = -1.0;  // rated again by the next recomputation
  ++f.version;    // its due time is void
  for (topology::LinkId l : path(f)) {
    const auto li = static_cast<std::size_t>(l);
    auto& list = link_flows_[li];
    // Lists stay in start order.
    list.insert(std::lower_bound(list.begin(), list.end(), f.id,
                                 [this](Slot x, std::uint64_t id) { return flows_[x].id < id; }),
                s);
    if (use_[li].active++ == 0) use_[li].since = now;
  }
  started_.push_back(s);
}

void FlowNetwork::request_recompute() {
  if (recompute_pending_) return;
  recompute_pending_ = true;
  // Everything else that happens at this instant (ring steps start p flows
  // at once) joins the same recomputation.
  loop_.schedule(Time::zero(), [this] {
    if (recompute_pending_) recompute();
  });
}

double FlowNetwork::remaining_at(const Flow& f, Time t) const {
  if (f.rate <= 0.0) return f.remaining;
  const auto dt = static_cast<double>((t - f.updated).ps());
  return f.remaining - std::min(f.remaining, f.rate * dt);
}

void FlowNetwork::recompute() {
  recompute_pending_ = false;
  ++recomputations_;
  const Time now = loop_.now();

  // Drop finished flows from their links (order kept), then free their slots.
  ++epoch_;
  for (topology::LinkId l : vacated_) {
    const auto li = static_cast<std::size_t>(l);
    if (link_mark_[li] == epoch_) continue;
    link_mark_[li] = epoch_;
    auto& list = link_flows_[li];
    list.erase(std::remove_if(list.begin(), list.end(), [this](Slot s) { return !flows_[s].active; }), list.end());
  }
  // Slots of finished flows are reused only now that no link lists them.
  free_.insert(free_.end(), released_.begin(), released_.end());
  released_.clear();

  // The changed flows' components: every flow linked to them through shared
  // links, transitively. No other flow's max-min rate can change. Each
  // component is filled on its own (components never interact).
  ++epoch_;
  seeds_.clear();
  for (Slot s : started_) {
    if (!flows_[s].active) continue;
    const auto p = path(flows_[s]);
    seeds_.insert(seeds_.end(), p.begin(), p.end());
  }
  seeds_.insert(seeds_.end(), vacated_.begin(), vacated_.end());
  started_.clear();
  vacated_.clear();
  for (topology::LinkId seed : seeds_) {
    if (link_mark_[static_cast<std::size_t>(seed)] == epoch_) continue;
    link_mark_[static_cast<std::size_t>(seed)] = epoch_;
    comp_links_.clear();
    comp_flows_.clear();
    comp_links_.push_back(seed);
    for (std::size_t i = 0; i < comp_links_.size(); ++i) {
      for (Slot s : link_flows_[static_cast<std::size_t>(comp_links_[i])]) {
        if (flow_mark_[s] == epoch_) continue;
        flow_mark_[s] = epoch_;
        comp_flows_.push_back(s);
        for (topology::LinkId l : path(flows_[s])) {
          const auto li = static_cast<std::size_t>(l);
          if (link_mark_[li] == epoch_) continue;
          link_mark_[li] = epoch_;
          comp_links_.push_back(l);
        }
      }
    }
    if (comp_flows_.empty()) continue;
    flows_visited_ += comp_flows_.size();
    fill();
    for (Slot s : comp_flows_) set_rate(s, new_rate_[s], now);
    // The component's links carry their new rates until the next change:
    // their load is capacity - capacity left after filling (cap_left_ never
    // goes below 0, so a bottleneck reads exactly 1). Keep the least left.
    for (topology::LinkId l : comp_links_) {
      const auto li = static_cast<std::size_t>(l);
      min_left_[li] = std::min(min_left_[li], cap_left_[li]);
    }
  }
  arm_completion();
}

void FlowNetwork::freeze_link(topology::LinkId link, double best) {
  for (Slot s : link_flows_[static_cast<std::size_t>(link)]) {
    if (new_rate_[s] >= 0) continue;
    new_rate_[s] = best;
    ++frozen_;
    for (topology::LinkId l : path(flows_[s])) {
      const auto li = static_cast<std::size_t>(l);
      cap_left_[li] = std::max(0.0, cap_left_[li] - best);
      --unfrozen_[li];
      touched_.push_back(l);
    }
  }
}

void FlowNetwork::fill() {
  // Progressive filling, exactly as a global pass would do it on this
  // component: repeatedly take the link whose remaining capacity, split
  // equally among its unfrozen flows, is smallest (lowest LinkId on a tie),
  // and freeze its unfrozen flows, in start order, at that share. Links of
  // other components never interact with these, so the result is the same
  // bit for bit. Small components scan their links; large ones keep the
  // shares in a heap with lazy invalidation.
  const auto& links = comp_links_;
  for (topology::LinkId l : links) {
    const auto li = static_cast<std::size_t>(l);
    cap_left_[li] = capacity_[li];
    unfrozen_[li] = 0;
  }
  for (Slot s : comp_flows_) {
    new_rate_[s] = -1.0;
    for (topology::LinkId l : path(flows_[s])) ++unfrozen_[static_cast<std::size_t>(l)];
  }
  frozen_ = 0;
  const std::size_t n = comp_flows_.size();
  if (links.size() <= kScanLinks) {
    while (frozen_ < n) {
      double best = std::numeric_limits<double>::infinity();
      topology::LinkId best_link = -1;
      for (topology::LinkId l : links) {
        const auto li = static_cast<std::size_t>(l);
        if (unfrozen_[li] == 0) continue;
        const double share = cap_left_[li] / unfrozen_[li];
        if (share < best || (share == best && l < best_link)) {
          best = share;
          best_link = l;
        }
      }
      if (best_link < 0) break;
      touched_.clear();
      freeze_link(best_link, best);
    }
    return;
  }
  share_heap_.clear();
  for (topology::LinkId l : links) {
    const auto li = static_cast<std::size_t>(l);
    if (unfrozen_[li] == 0) continue;
    share_heap_.push_back(Share{cap_left_[li] / unfrozen_[li], l, ++share_version_[li]});
  }
  std::make_heap(share_heap_.begin(), share_heap_.end(), LargerShare{});
  while (frozen_ < n && !share_heap_.empty()) {
    std::pop_heap(share_heap_.begin(), share_heap_.end(), LargerShare{});
    const Share top = share_heap_.back();
    share_heap_.pop_back();
    const auto bi = static_cast<std::size_t>(top.link);
    if (top.version != share_version_[bi] || unfrozen_[bi] == 0) continue;  // stale
    touched_.clear();
    freeze_link(top.link, top.share);
    ++touch_epoch_;
    for (topology::LinkId l : touched_) {
      const auto li = static_cast<std::size_t>(l);
      if (touch_mark_[li] == touch_epoch_) continue;
      touch_mark_[li] = touch_epoch_;
      ++share_version_[li];
      if (unfrozen_[li] == 0) continue;
      share_heap_.push_back(Share{cap_left_[li] / unfrozen_[li], l, share_version_[li]});
      std::push_heap(share_heap_.begin(), share_heap_.end(), LargerShare{});
    }
  }
}

void FlowNetwork::set_rate(Slot s, double rate, Time now) {
  Flow& f = flows_[s];
  if (f.rate >= 0.0) {
    if (rate == f.rate) return;  // unchanged: its due time stands
    f.remaining = remaining_at(f, now);
  }
  f.updated = now;
  f.rate = rate;
  ++f.version;
  if (rate <= 0.0) return;  // starved: never due until a rate change
  const std::int64_t delay = delay_ps(f.remaining, rate, f.capped);
  f.due = (now + Time::from_ps(delay)).ps();
  due_heap_.push_back(Due{f.due, s, f.version});
  std::push_heap(due_heap_.begin(), due_heap_.end(), LaterDue{});
}

void FlowNetwork::drop_stale_due() {
  while (!due_heap_.empty()) {
    const Due& d = due_heap_.front();
    const Flow& f = flows_[d.slot];
    if (f.active && f.version == d.version) return;
    std::pop_heap(due_heap_.begin(), due_heap_.end(), LaterDue{});
    due_heap_.pop_back();
  }
}

void FlowNetwork::arm_completion() {
  drop_stale_due();
  if (due_heap_.empty()) return;
  const Time now = loop_.now();
  const Time at = std::max(now, Time::from_ps(due_heap_.front().at));
  if (!armed_.empty() && armed_.front() <= at) return;  // an earlier event will look again
  armed_.push_back(at);
  std::push_heap(armed_.begin(), armed_.end(), std::greater<>{});
  loop_.schedule(at - now, [this] { on_completion_event(); });
}

void FlowNetwork::on_completion_event() {
  std::pop_heap(armed_.begin(), armed_.end(), std::greater<>{});
  armed_.pop_back();
  const Time now = loop_.now();
  drop_stale_due();
  if (due_heap_.empty()) return;
  if (due_heap_.front().at > now.ps()) {  // superseded: the flows due here slowed down
    arm_completion();
    return;
  }
  // Finish every flow due now, or within the next picosecond (rounding), in
  // start order.
  std::vector<Slot>& done = done_;
  done.clear();
  while (!due_heap_.empty() && due_heap_.front().at <= now.ps() + 1) {
    const Due d = due_heap_.front();
    std::pop_heap(due_heap_.begin(), due_heap_.end(), LaterDue{});
    due_heap_.pop_back();
    const Flow& f = flows_[d.slot];
    if (f.active && f.version == d.version) done.push_back(d.slot);
  }
  std::sort(done.begin(), done.end(), [this](Slot a, Slot b) { return flows_[a].id < flows_[b].id; });
  if (const auto capped = std::find_if(done.begin(), done.end(), [this](Slot d) { return flows_[d].capped; });
      capped != done.end()) {
    const Flow& f = flows_[*capped];
    // Its path's slowest link (a degraded cable's rate included): what the
    // error names.
    topology::LinkId slowest = path(f).front();
    for (topology::LinkId l : path(f)) {
      if (capacity_[static_cast<std::size_t>(l)] < capacity_[static_cast<std::size_t>(slowest)]) slowest = l;
    }
    throw transfer_overflow_error(f.payload, f.src, f.dst, topo_, slowest,
                                  capacity_[static_cast<std::size_t>(slowest)] * 8e12);
  }
  // Deliveries due at the same instant share one event, in start order:
  // nothing else is scheduled in between, so the order of every event is
  // the one separate events would have had.
  std::vector<std::pair<Time, std::uint32_t>>& open = open_batches_;
  open.clear();
  for (Slot s : done) {
    Flow& f = flows_[s];
    f.active = false;
    for (topology::LinkId l : path(f)) {
      const auto li = static_cast<std::size_t>(l);
      done_bytes_[li] += f.payload;
      if (f.cls >= 0) class_done_bytes_[static_cast<std::size_t>(f.cls)][li] += f.payload;
      if (--use_[li].active == 0) use_[li].busy += now - use_[li].since;
      vacated_.push_back(l);
    }
    released_.push_back(s);
    ++completed_;
    std::uint32_t batch = 0;
    auto it = std::find_if(open.begin(), open.end(), [&](const auto& b) { return b.first == f.latency; });
    if (it != open.end()) {
      batch = it->second;
    } else {
      if (free_batches_.empty()) {
        batch = static_cast<std::uint32_t>(batches_.size());
        batches_.emplace_back();
      } else {
        batch = free_batches_.back();
        free_batches_.pop_back();
      }
      open.emplace_back(f.latency, batch);
      loop_.schedule(f.latency, [this, batch] { deliver(batch); });
    }
    batches_[batch].push_back(std::move(f.on_delivered));
    f.on_delivered = nullptr;
  }
  request_recompute();
}

void FlowNetwork::deliver(std::uint32_t batch) {
  // Take the callbacks out first: they may send, and finish, more flows.
  std::vector<Callback> calls = std::move(batches_[batch]);
  batches_[batch].clear();
  free_batches_.push_back(batch);
  for (Callback& c : calls) c();
  if (batches_[batch].empty() && batches_[batch].capacity() < calls.capacity()) {
    calls.clear();
    batches_[batch] = std::move(calls);  // keep the capacity for the slot's next batch
  }
}

std::vector<double> FlowNetwork::active_rates() {
  if (recompute_pending_) recompute();
  std::vector<std::pair<std::uint64_t, double>> active;
  for (const Flow& f : flows_) {
    if (f.active) active.emplace_back(f.id, f.rate * 1e12);
  }
  std::sort(active.begin(), active.end());
  std::vector<double> out;
  out.reserve(active.size());
  for (const auto& [id, rate] : active) out.push_back(rate);
  return out;
}

std::vector<Time> FlowNetwork::link_busy() const {
  std::vector<Time> busy(use_.size());
  const Time now = loop_.now();
  for (std::size_t l = 0; l < busy.size(); ++l) {
    busy[l] = use_[l].active > 0 ? use_[l].busy + (now - use_[l].since) : use_[l].busy;
  }
  return busy;
}

std::vector<double> FlowNetwork::link_peak_utilization() const {
  std::vector<double> peak(capacity_.size(), 0.0);
  for (std::size_t l = 0; l < peak.size(); ++l) {
    if (capacity_[l] > 0) peak[l] = 1.0 - min_left_[l] / capacity_[l];
  }
  return peak;
}

const std::vector<double>& FlowNetwork::link_bytes() const {
  link_bytes_ = done_bytes_;
  const Time now = loop_.now();
  for (const Flow& f : flows_) {
    if (!f.active || f.rate < 0.0) continue;
    const double moved = (f.wire - remaining_at(f, now)) * f.efficiency;
    for (topology::LinkId l : path(f)) link_bytes_[static_cast<std::size_t>(l)] += moved;
  }
  return link_bytes_;
}

void FlowNetwork::set_source_classes(std::vector<std::int32_t> class_of_rank) {
  if (next_flow_ > 0) throw SimulationError("flow network: source classes are set before the first message");
  std::int32_t classes = 0;
  for (std::int32_t c : class_of_rank) classes = std::max(classes, c + 1);
  class_of_rank_ = std::move(class_of_rank);
  class_done_bytes_.assign(static_cast<std::size_t>(classes), std::vector<double>(done_bytes_.size(), 0.0));
}

std::vector<std::vector<double>> FlowNetwork::link_bytes_by_class() const {
  std::vector<std::vector<double>> out = class_done_bytes_;
  const Time now = loop_.now();
  for (const Flow& f : flows_) {
    if (!f.active || f.rate < 0.0 || f.cls < 0) continue;
    const double moved = (f.wire - remaining_at(f, now)) * f.efficiency;
    for (topology::LinkId l : path(f)) out[static_cast<std::size_t>(f.cls)][static_cast<std::size_t>(l)] += moved;
  }
  return out;
}

}  // namespace tessera::engine
