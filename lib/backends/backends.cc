#include "backends/backends.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace gpuscope::internal {

Backends DefaultBackends(const Options& options) {
  Backends backends;
  backends.annotator = MakeNvtxAnnotator(options.max_phases);
  return backends;
}

SourceChoice SelectSource(Backends& backends) {
  SourceChoice choice;
  std::string why;
  if (backends.activity != nullptr) {
    absl::Status status = backends.activity->Start();
    if (status.ok()) {
      backends.device_timer.reset();  // exact activity makes events redundant
      choice.source = Source::kCupti;
      choice.reason = absl::StrCat("activity records from ", backends.activity->name());
      return choice;
    }
    absl::StrAppend(&why, backends.activity->name(), " unavailable: ", status.message(), "; ");
    backends.activity.reset();
  } else {
    absl::StrAppend(&why, "no activity source (CUPTI) in this build; ");
  }
  if (backends.device_timer != nullptr) {
    absl::Status status = backends.device_timer->Start();
    if (status.ok()) {
      choice.source = Source::kEvents;
      choice.reason = absl::StrCat(why, "using ", backends.device_timer->name(),
                                   " (idle % is a lower bound)");
      return choice;
    }
    absl::StrAppend(&why, backends.device_timer->name(), " unavailable: ", status.message(), "; ");
    backends.device_timer.reset();
  } else {
    absl::StrAppend(&why, "no device timer (CUDA events) in this build; ");
  }
  choice.source = Source::kHost;
  choice.reason = absl::StrCat(why, "host timing only: no GPU idle %");
  return choice;
}

}  // namespace gpuscope::internal
