#include "base/dynlib.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpuscope::internal {

absl::StatusOr<DynLib> DynLib::Open(const std::string& name) {
  // A path (from GPUSCOPE_LIBCUDA, GPUSCOPE_LIBNVML, GPUSCOPE_LIBCUPTI or a
  // search directory) must name a regular file, links to one included: the
  // loader reads whatever it is given, and a FIFO there would block it, and
  // with it the session's constructor, forever.
  if (name.find('/') != std::string::npos) {
    struct stat st;
    if (stat(name.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat(name, ": ", std::strerror(errno)));
    }
    if (!S_ISREG(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(name, " is not a regular file (a ",
                       S_ISFIFO(st.st_mode)   ? "FIFO"
                       : S_ISDIR(st.st_mode)  ? "directory"
                       : S_ISCHR(st.st_mode)  ? "character device"
                       : S_ISBLK(st.st_mode)  ? "block device"
                       : S_ISSOCK(st.st_mode) ? "socket"
                                              : "special file",
                       "): not loaded; point the variable at the shared library itself"));
    }
  }
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
