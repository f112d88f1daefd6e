#pragma once
// The network seam: backends move point-to-point messages between GPUs.
#include <cstdint>
#include <string_view>

#include "tessera/engine/event_loop.hpp"
#include "tessera/units.hpp"

namespace tessera::engine {

struct Message {
  int src = -1;  ///< GPU rank
  int dst = -1;  ///< GPU rank
  Bytes bytes;
  /// Payload bytes per wire byte, in (0, 1]: the sender's protocol moves the
  /// payload at this fraction of the rate the network gives it (NCCL's
  /// achieved bandwidth over line rate, CommCalibration). Backends put
  /// bytes / efficiency on the wire and still count `bytes` as payload.
  double efficiency = 1.0;
  /// Delivered this much after its last byte arrived (on top of the path
  /// latency): the executor's remaining fixed costs of a multi-step flow
  /// (collectives::Transfer::steps) and reduction kernels, paid in the same
  /// event as the delivery.
  Time delay_after{};
};

/// The columns every backend's per-link CSV (`tessera run --links`) starts
/// with, in this order and with this meaning: directed link id, its source
/// and destination vertex names, its tier (topology::to_string(LinkTier)),
/// bandwidth in bit/s, payload bytes it carried, time it carried any traffic
/// (us) and that time over the run (the iteration). Each backend appends its
/// own columns. On the flow backend the busy time is the time any flow
/// crossed the link; on ns-3's packet links the time spent serialising
/// packets (its credit_stall_us column holds the time waiting for credits).
inline constexpr std::string_view kLinkCsvSharedColumns =
    "link,src,dst,tier,bandwidth_bps,payload_bytes,busy_us,utilization";

class Network {
 public:
  virtual ~Network() = default;
  /// Starts moving `msg` now; `on_delivered` runs on the event loop when its
  /// last byte has arrived at `dst`, plus msg.delay_after.
  virtual void send(const Message& msg, Callback on_delivered) = 0;
  /// True when every message arrives the instant it is sent (no bandwidth,
  /// no latency). The executor then completes an unobserved collective
  /// without expanding it into transfers: its timing cannot change.
  [[nodiscard]] virtual bool instantaneous() const { return false; }
  /// The path latency of a message from `src` to `dst` (what a zero-byte
  /// message takes, without queueing). The executor pays it once more for
  /// every further step of a multi-step flow (collectives::Transfer::steps).
  [[nodiscard]] virtual Time latency(int src, int dst) = 0;
  /// Changes whenever latency() may answer differently for a pair it has
  /// answered before (a cable failed at a simulated time re-routes): what a
  /// caller derived from latency() is keyed by it. Constant by default.
  [[nodiscard]] virtual std::uint64_t routing_epoch() const { return 0; }
};

}  // namespace tessera::engine
