// The VecISA registry and host CPU detection (through Highway).
#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "hwy/targets.h"
#include "isa/isa.h"

namespace kiln::isa {
namespace {

struct Registry {
  absl::Mutex mu;
  std::vector<std::unique_ptr<VecIsa>> isas;
};

Registry& GetRegistry() {
  static Registry* r = new Registry;
  return *r;
}

}  // namespace

bool RegisterIsa(VecIsa isa) {
  Registry& r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  r.isas.push_back(std::make_unique<VecIsa>(std::move(isa)));
  std::stable_sort(r.isas.begin(), r.isas.end(),
                   [](const auto& a, const auto& b) { return a->rank > b->rank; });
  return true;
}

std::vector<const VecIsa*> AllIsas() {
  Registry& r = GetRegistry();
  absl::MutexLock lock(&r.mu);
  std::vector<const VecIsa*> out;
  for (const auto& i : r.isas) out.push_back(i.get());
  return out;
}

const VecIsa* FindIsa(absl::string_view name) {
  for (const VecIsa* i : AllIsas()) {
    if (i->name == name) return i;
  }
  return nullptr;
}

const VecIsa* BestHostIsa() {
  for (const VecIsa* i : AllIsas()) {
    if (i->host_supports && i->host_supports()) return i;
  }
  return nullptr;
}

absl::StatusOr<const VecIsa*> SelectIsa(absl::string_view name) {
  if (name.empty()) {
    const VecIsa* best = BestHostIsa();
    if (best == nullptr) {
      return absl::FailedPreconditionError(
          "no VecISA module supports this CPU (is isa/scalar linked in?)");
    }
    return best;
  }
  const VecIsa* isa = FindIsa(name);
  if (isa == nullptr) {
    std::vector<std::string> names;
    for (const VecIsa* i : AllIsas()) names.push_back(i->name);
    return absl::InvalidArgumentError(
        absl::StrCat("unknown ISA '", name, "'; known: ",
                     absl::StrJoin(names, ", ")));
  }
  if (!isa->host_supports || !isa->host_supports()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ISA '", name, "' is not supported by this CPU; the best it runs is '",
        BestHostIsa() ? BestHostIsa()->name : "none", "'"));
  }
  return isa;
}

bool HostHasHwyTarget(int64_t hwy_target) {
  return (hwy::SupportedTargets() & hwy_target) != 0;
}

}  // namespace kiln::isa
