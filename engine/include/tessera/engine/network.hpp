#pragma once
// The network seam: backends move point-to-point messages between GPUs.
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
};

class Network {
 public:
  virtual ~Network() = default;
  /// Starts moving `msg` now; `on_delivered` runs on the event loop when its
  /// last byte has arrived at `dst`.
  virtual void send(const Message& msg, Callback on_delivered) = 0;
  /// True when every message arrives the instant it is sent (no bandwidth,
  /// no latency). The executor then completes an unobserved collective
  /// without expanding it into transfers: its timing cannot change.
  [[nodiscard]] virtual bool instantaneous() const { return false; }
};

}  // namespace tessera::engine
