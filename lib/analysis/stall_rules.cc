// The rule about a job that hung (Summary::stalls): a step, or a phase
// outside steps, that stayed open past its stall limit (docs/definitions.md
// "Stalls"). Declared in rules.h; Diagnose() runs it and puts it first after
// an out-of-memory error. docs/diagnosis.md has the playbook's entry.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "analysis/rules.h"
#include "core/stalls.h"
#include "gpuscope/diagnose.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {
namespace {

// What to do, by the phase the stall was in: the innermost phase of the
// path that is one of the kinds a hang has a known cause in.
std::string WhatToDo(const Stall& s) {
  std::vector<std::string_view> path;
  for (std::string_view rest = s.phase_path; !rest.empty();) {
    const size_t slash = rest.find('/');
    path.push_back(rest.substr(0, slash));
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  }
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    if (*it == "data") {
      return "The input pipeline stopped delivering: a DataLoader worker hung (a __getitem__ "
             "waiting on a lock, the network or a deadlock inherited through fork) or the storage "
             "it reads stopped answering. py-spy dump --pid <worker pid> shows where each worker "
             "is; DataLoader(timeout=...) turns a silent hang into an error; check the filesystem "
             "the dataset is on (a stale network mount).";
    }
    if (*it == "comm") {
      return "A collective is waiting, usually for a rank that is somewhere else or has died: the "
             "stall message each rank logs names the rank that is not in the collective, and "
             "where it is. Look at that rank's log and host; torch's flight recorder "
             "(TORCH_NCCL_TRACE_BUFFER_SIZE) dumps the collectives in flight; a process group "
             "timeout shorter than the default makes the job fail instead of hanging.";
    }
    if (*it == "sync") {
      return "The host waits for the GPU to finish, and it does not: a kernel that does not end "
             "(a collective on another stream waiting for a rank, a custom kernel that spins) or "
             "a device error. nvidia-smi shows whether the GPU still runs; compute-sanitizer "
             "finds a kernel that hangs.";
    }
    if (*it == "checkpoint") {
      return "Saving stopped progressing: the filesystem (often network storage) stopped "
             "answering or became very slow. Check the mount and its free space, and save "
             "asynchronously (torch.distributed.checkpoint.async_save) so that a slow store does "
             "not stop training.";
    }
  }
  return absl::StrCat(
      "The training thread stopped ",
      s.phase.empty() ? std::string("outside any phase") : absl::StrCat("in ", s.phase_path),
      ". The warning gpuscope logged when the stall began holds the training thread's Python "
      "stack (or, from C++, the phase path); py-spy dump --pid <pid> shows every thread now. A "
      "GPU that is busy with nothing finishing points to a kernel or a collective that does not "
      "end; an idle one, to the host.");
}

}  // namespace

void StallRule(const Summary& s, std::vector<Finding>* out) {
  if (s.stalls.empty()) return;
  // The one in progress, else the longest.
  const Stall* top = &s.stalls.back();
  if (!top->ongoing) {
    for (const Stall& x : s.stalls) {
      if (x.seconds > top->seconds) top = &x;
    }
  }
  Finding f;
  f.id = "stall";
  f.severity = Severity::kHigh;
  const std::string where =
      top->phase.empty() ? std::string() : absl::StrCat(" in ", top->phase_path);
  const std::string what =
      top->step >= 0 ? absl::StrCat("Step ", top->step) : absl::StrCat("Phase ", top->phase_path);
  f.title = top->ongoing ? absl::StrCat(what, " has been stuck for ", StallDuration(top->seconds),
                                        top->step >= 0 ? where : std::string(),
                                        " (its stall limit: ", StallDuration(top->limit), ")")
                         : absl::StrCat(what, " hung for ", StallDuration(top->seconds),
                                        top->step >= 0 ? where : std::string(),
                                        " (its stall limit: ", StallDuration(top->limit), ")");
  if (s.stalls.size() > 1) absl::StrAppend(&f.title, "; ", s.stalls.size(), " stalls in all");
  double stalled = 0;
  for (const Stall& x : s.stalls) stalled += x.seconds;
  const double ongoing = top->ongoing ? top->seconds : 0;
  const double total = s.window_time + ongoing;
  f.share = total > 0 ? std::min(1.0, (top->ongoing ? ongoing : top->seconds) / total) : 1.0;
  f.evidence = {{"step", static_cast<double>(top->step)},
                {"seconds", top->seconds},
                {"limit_seconds", top->limit},
                {"phase_seconds", top->phase_seconds},
                {"ongoing", top->ongoing ? 1.0 : 0.0},
                {"stalls", static_cast<double>(s.stalls.size())},
                {"stalled_seconds", stalled},
                {"last_gpu_work_seconds", top->last_gpu_work_seconds},
                {"gpu_utilization_pct", top->gpu_utilization_pct}};
  f.recommendation = WhatToDo(*top);
  if (!top->gpu.empty()) absl::StrAppend(&f.recommendation, " When it was found: ", top->gpu, ".");
  f.confidence =
      "high that the step stayed open that long (the training thread's own scopes, watched by "
      "gpuscope's background thread); medium for the cause, which the phase it was in suggests";
  f.source = "host";
  out->push_back(std::move(f));
}

}  // namespace gpuscope::internal
