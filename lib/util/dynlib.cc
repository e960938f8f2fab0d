#include "util/dynlib.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpuscope::internal {

absl::StatusOr<DynLib> DynLib::Open(const std::string& name) {
  dlerror();
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return absl::NotFoundError(err != nullptr ? err : absl::StrCat("cannot load ", name));
  }
  return DynLib(handle, name);
}

DynLib::~DynLib() {
  if (handle_ != nullptr) dlclose(handle_);
}

absl::StatusOr<void*> DynLib::Find(std::initializer_list<const char*> names) const {
  for (const char* n : names) {
    if (void* sym = dlsym(handle_, n)) return sym;
  }
  return absl::NotFoundError(
      absl::StrCat(name_, " has none of: ", absl::StrJoin(names.begin(), names.end(), ", "),
                   " (driver too old?)"));
}

}  // namespace gpuscope::internal
