// dlopen/dlsym with Status results: how gpuscope reaches libcuda, CUPTI and
// NVML without linking them.

#ifndef GPUSCOPE_LIB_BASE_DYNLIB_H_
#define GPUSCOPE_LIB_BASE_DYNLIB_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpuscope::internal {

class DynLib {
 public:
  // Opens `name` (RTLD_NOW | RTLD_LOCAL). A library already loaded in the
  // process (torch's libcuda, say) is shared, not loaded twice. NotFound with
  // dlerror()'s text on failure. A `name` with a '/' must be a regular file
  // (or a link to one): anything else (a FIFO would block the loader
  // forever) is FailedPrecondition, never opened.
  static absl::StatusOr<DynLib> Open(const std::string& name);

  DynLib(DynLib&& other) noexcept : handle_(other.handle_), name_(std::move(other.name_)) {
    other.handle_ = nullptr;
  }
  DynLib& operator=(DynLib&&) = delete;
  DynLib(const DynLib&) = delete;
  ~DynLib();

  // The first of `names` the library exports, as a function pointer; NotFound
  // naming them all if none is there.
  template <typename Fn>
  absl::StatusOr<Fn> Get(std::initializer_list<const char*> names) const {
    absl::StatusOr<void*> sym = Find(names);
    if (!sym.ok()) return sym.status();
    return reinterpret_cast<Fn>(*sym);
  }

  // Sets `*out` to the first of `names` the library exports; NotFound (and
  // `*out` untouched) when none is there. `(void)lib.Bind(...)` binds an
  // optional entry point, left null when missing.
  template <typename Fn>
  absl::Status Bind(Fn* out, std::initializer_list<const char*> names) const {
    absl::StatusOr<Fn> fn = Get<Fn>(names);
    if (!fn.ok()) return fn.status();
    *out = *fn;
    return absl::OkStatus();
  }

  // Keeps the library loaded for the rest of the process (drivers are never
  // unloaded: other code may hold pointers into them).
  void Leak() { handle_ = nullptr; }

 private:
  DynLib(void* handle, std::string name) : handle_(handle), name_(std::move(name)) {}
  absl::StatusOr<void*> Find(std::initializer_list<const char*> names) const;

  void* handle_;
  std::string name_;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BASE_DYNLIB_H_
