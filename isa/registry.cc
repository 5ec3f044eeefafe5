// File: isa/registry.cc — lookups over the VecISA table generated from
// isa/isas.bzl: by name, the best the host runs, selection with refusals.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "isa/isa.h"
#include "isa/isa_table.h"

namespace kiln::isa {

std::vector<const VecIsa*> AllIsas() {
  std::vector<const VecIsa*> out;
  for (const VecIsa& i : internal::IsaTable()) out.push_back(&i);
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
          "no VecISA module supports this CPU (isa/isas.bzl lacks the scalar row?)");
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

}  // namespace kiln::isa
