#include "tessera/study/backend.hpp"

#include <fmt/format.h>

#include <string>
#include <utility>

#include "backends.hpp"
#include "tessera/error.hpp"
#include "tessera/names.hpp"

namespace tessera::study {

void BackendRegistry::add(std::unique_ptr<const NetworkBackend> backend) {
  if (!backend) throw InputError("backend registry: null backend");
  if (find(backend->name()) != nullptr) {
    throw InputError(fmt::format("backend registry: a backend named '{}' is already registered", backend->name()));
  }
  backends_.push_back(std::move(backend));
}

const NetworkBackend* BackendRegistry::find(std::string_view name) const {
  for (const auto& b : backends_) {
    if (b->name() == name) return b.get();
  }
  return nullptr;
}

const NetworkBackend& BackendRegistry::at(std::string_view name) const {
  if (const NetworkBackend* b = find(name)) return *b;
  // "flow", "flow or ns3", "flow, ns3 or x"
  std::string known;
  std::vector<std::string> list;
  for (std::size_t i = 0; i < backends_.size(); ++i) {
    if (i > 0) known += i + 1 == backends_.size() ? " or " : ", ";
    known += backends_[i]->name();
    list.emplace_back(backends_[i]->name());
  }
  throw InputError(fmt::format("unknown backend '{}'{} (expected {})", name,
                               did_you_mean(std::string(name), list), known.empty() ? "none" : known));
}

std::vector<std::string_view> BackendRegistry::names() const {
  std::vector<std::string_view> out;
  out.reserve(backends_.size());
  for (const auto& b : backends_) out.push_back(b->name());
  return out;
}

BackendRegistry built_in_backends() {
  BackendRegistry r;
  r.add(detail::make_flow_backend());
#ifdef TESSERA_HAVE_NS3
  r.add(detail::make_ns3_backend());
#else
  r.add(detail::make_unavailable_backend("ns3", "this tessera was built without ns-3 (TESSERA_WITH_NS3=OFF)"));
#endif
  return r;
}

namespace detail {

namespace {

class UnavailableBackend final : public NetworkBackend {
 public:
  UnavailableBackend(std::string_view name, std::string_view why) : name_(name), why_(why) {}
  [[nodiscard]] std::string_view name() const override { return name_; }
  void check(const Scenario& /*s*/) const override { refuse(); }
  [[nodiscard]] BackendRun run(const parallelism::TaskGraph& /*graph*/, const topology::Topology& /*topo*/,
                               const Scenario& /*s*/, const engine::ExecutionOptions& /*options*/,
                               engine::ExecutionObserver* /*observer*/) const override {
    refuse();
  }

 private:
  [[noreturn]] void refuse() const {
    throw InputError(fmt::format("backend '{}' is not available: {}", name_, why_));
  }
  std::string name_;
  std::string why_;
};

}  // namespace

std::unique_ptr<const NetworkBackend> make_unavailable_backend(std::string_view name, std::string_view why) {
  return std::make_unique<const UnavailableBackend>(name, why);
}

}  // namespace detail

std::vector<TimedCableChange> timed_cable_changes(const Scenario& s, const topology::Topology& topo) {
  std::vector<TimedCableChange> out;
  for (const auto& t : s.failures.timed) {
    const char* key = t.fail ? "links" : "degraded";
    TimedCableChange c;
    c.at = t.at;
    c.factor = t.fail ? 0.0 : s.failures.degraded_rate;
    try {
      c.a = topo.find_vertex(t.a);
      c.b = topo.find_vertex(t.b);
    } catch (const InputError& e) {
      throw failure_error(s, key, t.a, t.b, e.what());
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace tessera::study
