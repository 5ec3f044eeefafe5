// File: ir/status_macros.h — early-return helpers for absl::Status code, in
// the style of XLA's TF_RETURN_IF_ERROR / TF_ASSIGN_OR_RETURN, and the split
// between user errors (the model is wrong) and internal errors (kiln is wrong).
//
//   KILN_ASSIGN_OR_RETURN(Graph g, ImportModel(path));
//   KILN_RETURN_IF_ERROR(Verify(g));
//   if (bad) return kiln::InternalError("value ", id, " has no producer");
#ifndef KILN_IR_STATUS_MACROS_H_
#define KILN_IR_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace kiln {

// An invariant of kiln itself was broken: never the user's fault.
template <typename... Args>
absl::Status InternalError(const Args&... args) {
  return absl::InternalError(
      absl::StrCat("internal error (this is a kiln bug): ", args...));
}

}  // namespace kiln

#define KILN_STATUS_CONCAT_INNER_(a, b) a##b
#define KILN_STATUS_CONCAT_(a, b) KILN_STATUS_CONCAT_INNER_(a, b)

#define KILN_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    const ::absl::Status kiln_status_ = (expr);     \
    if (!kiln_status_.ok()) return kiln_status_;    \
  } while (false)

#define KILN_ASSIGN_OR_RETURN(lhs, expr)                                      \
  KILN_ASSIGN_OR_RETURN_IMPL_(KILN_STATUS_CONCAT_(kiln_statusor_, __LINE__), \
                              lhs, expr)

#define KILN_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                \
  if (!statusor.ok()) return statusor.status();          \
  lhs = std::move(statusor).value()

// Returns an internal error when an invariant of kiln does not hold.
#define KILN_RET_CHECK(cond)                                             \
  do {                                                                   \
    if (!(cond))                                                         \
      return ::kiln::InternalError("check failed: " #cond " at " __FILE__ \
                                   ":",                                  \
                                   __LINE__);                            \
  } while (false)

#endif  // KILN_IR_STATUS_MACROS_H_
