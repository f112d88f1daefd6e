#pragma once
// The built-in backends' factories (private to study): backend.cpp lists
// them in built_in_backends(). A new backend adds its .cpp file with one
// factory, declares it here and lists it there (docs/study.md, "Backends").
#include <memory>

#include "tessera/study/backend.hpp"

namespace tessera::study::detail {

/// Max-min fair fluid flows on engine::FlowNetwork (flow_backend.cpp).
std::unique_ptr<const NetworkBackend> make_flow_backend();
/// Packet-level ns-3 (ns3_backend.cpp; only in a build with ns-3).
std::unique_ptr<const NetworkBackend> make_ns3_backend();
/// A backend this build lacks: `name` is known, running it throws
/// InputError "backend 'name' is not available: why".
std::unique_ptr<const NetworkBackend> make_unavailable_backend(std::string_view name, std::string_view why);

}  // namespace tessera::study::detail
