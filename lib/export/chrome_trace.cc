#include "export/chrome_trace.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/kernel_names.h"
#include "base/json.h"
#include "core/intervals.h"
#include "gpuscope/report.h"
#include "gpuscope/session.h"
#include "session/trace_capture.h"

namespace gpuscope::internal {
namespace {

constexpr int kHostPid = 1;
constexpr int kStepTid = 1;
constexpr int kSyncTid = 2;
constexpr int kEventsPid = 2;        // events: phases' device spans, one thread per lane
constexpr int kFirstDevicePid = 10;  // cupti: one process per device
constexpr int kIdleTid = 0;          // ... whose thread 0 holds the idle gaps

// Whether `a` is drawn with `s`: it overlaps the step. (Activity just
// outside is kept only to decide the edge gaps.)
bool Drawn(const TraceStep& s, const DeviceInterval& a) {
  if (a.begin_ns == a.end_ns) return a.begin_ns >= s.begin_ns && a.begin_ns < s.end_ns;
  return a.end_ns > s.begin_ns && a.begin_ns < s.end_ns;
}

const char* KindName(const DeviceInterval& a) {
  switch (a.kind) {
    case ActivityKind::kKernel:
      switch (a.kernel_class) {
        case KernelClass::kGemmFp32: return "kernel (FP32 GEMM)";
        case KernelClass::kGemmReduced: return "kernel (GEMM, reduced precision)";
        case KernelClass::kCollective: return "kernel (NCCL collective)";
        case KernelClass::kGemmUnknown: return "kernel (GEMM)";
        case KernelClass::kOther: return "kernel";
      }
      return "kernel";
    case ActivityKind::kMemcpyH2D: return a.pageable ? "memcpy HtoD (pageable)" : "memcpy HtoD";
    case ActivityKind::kMemcpyD2H: return a.pageable ? "memcpy DtoH (pageable)" : "memcpy DtoH";
    case ActivityKind::kMemcpyOther: return "memcpy";
    case ActivityKind::kMemset: return "memset";
    case ActivityKind::kSync: return "sync (host blocked on the GPU)";
  }
  return "activity";
}

class TraceBuilder {
 public:
  TraceBuilder(int64_t origin_ns, const std::optional<RankIdentity>& rank) : origin_ns_(origin_ns) {
    w_.BeginObject();
    w_.Key("displayTimeUnit");
    w_.String("ms");
    w_.Key("otherData");
    w_.BeginObject();
    w_.Key("producer");
    w_.String("gpuscope");
    if (rank.has_value()) {
      // Process names say the rank, so that ranks' traces opened together
      // (Perfetto takes several files) tell apart.
      prefix_ = absl::StrCat("rank ", rank->rank, ": ");
      w_.Key("rank");
      w_.Int(rank->rank);
      w_.Key("local_rank");
      w_.Int(rank->local_rank);
      w_.Key("world_size");
      w_.Int(rank->world_size);
      w_.Key("host");
      w_.String(rank->host);
    }
    w_.EndObject();
    w_.Key("traceEvents");
    w_.BeginArray();
  }

  void Meta(const char* what, int pid, int tid, std::string_view name) {
    const std::string named = std::string_view(what) == "process_name"
                                  ? absl::StrCat(prefix_, std::string(name))
                                  : std::string(name);
    name = named;
    w_.BeginObject();
    w_.Key("name");
    w_.String(what);
    w_.Key("ph");
    w_.String("M");
    Ids(pid, tid);
    w_.Key("args");
    w_.BeginObject();
    w_.Key("name");
    w_.String(name);
    w_.EndObject();
    w_.EndObject();
  }

  // A complete ("X") event; `args` writes extra fields into its args object.
  template <typename Args>
  void Slice(std::string_view name, std::string_view cat, int pid, int tid, int64_t begin_ns,
             int64_t end_ns, Args args) {
    w_.BeginObject();
    w_.Key("name");
    w_.String(name);
    w_.Key("cat");
    w_.String(cat);
    w_.Key("ph");
    w_.String("X");
    w_.Key("ts");
    w_.Number(static_cast<double>(begin_ns - origin_ns_) / 1e3);
    w_.Key("dur");
    w_.Number(static_cast<double>(std::max<int64_t>(0, end_ns - begin_ns)) / 1e3);
    Ids(pid, tid);
    w_.Key("args");
    w_.BeginObject();
    args(w_);
    w_.EndObject();
    w_.EndObject();
  }
  void Slice(std::string_view name, std::string_view cat, int pid, int tid, int64_t begin_ns,
             int64_t end_ns) {
    Slice(name, cat, pid, tid, begin_ns, end_ns, [](JsonWriter&) {});
  }

  std::string Take() {
    w_.EndArray();
    w_.EndObject();
    return w_.Take();
  }

 private:
  void Ids(int pid, int tid) {
    w_.Key("pid");
    w_.Int(pid);
    w_.Key("tid");
    w_.Int(tid);
  }

  int64_t origin_ns_;
  std::string prefix_;  // before every process name: "rank N: ", or empty
  JsonWriter w_{0};
};

// The idle gaps of `device` within the step, each labeled with its cause,
// as AnalyzeActivityStep charges them (core/activity_timeline.cc): a gap
// between two pieces of activity (taken unclipped, so activity just outside
// the step counts) shorter than the threshold is "launch"; other idle goes
// to the innermost host phase open over it, split where that changes, or to
// "other".
struct Gap {
  int64_t begin_ns, end_ns;
  std::string cause;
};

std::vector<Gap> IdleGaps(const TraceStep& step, uint32_t device,
                          const std::function<std::string_view(uint16_t)>& name_of,
                          int64_t launch_threshold_ns) {
  std::vector<Interval> pieces;
  for (const DeviceInterval& a : step.activity) {
    if (IsDeviceActivity(a.kind) && a.device == device) pieces.push_back({a.begin_ns, a.end_ns});
  }
  const std::vector<Interval> busy = UnionOf(std::move(pieces));
  const int64_t wb = step.begin_ns;
  // Past the per-step cap the records are not all here: idle is drawn only
  // up to the last one kept (records arrive in begin order).
  int64_t we = step.end_ns;
  if (step.activity_dropped > 0 && !step.activity.empty()) {
    we = std::min(we, step.activity.back().begin_ns);
  }
  std::vector<Gap> gaps;
  const auto charge = [&](int64_t b, int64_t e) {
    std::set<int64_t> cuts = {b, e};
    for (const TraceSpan& p : step.phases) {
      if (p.begin_ns > b && p.begin_ns < e) cuts.insert(p.begin_ns);
      if (p.end_ns > b && p.end_ns < e) cuts.insert(p.end_ns);
    }
    for (auto it = cuts.begin(); std::next(it) != cuts.end(); ++it) {
      const int64_t pb = *it, pe = *std::next(it);
      const TraceSpan* inner = nullptr;
      for (const TraceSpan& p : step.phases) {
        if (p.begin_ns <= pb && pe <= p.end_ns && (inner == nullptr || p.depth > inner->depth))
          inner = &p;
      }
      std::string cause = inner != nullptr ? std::string(name_of(inner->id)) : "other";
      if (!gaps.empty() && gaps.back().end_ns == pb && gaps.back().cause == cause) {
        gaps.back().end_ns = pe;
      } else {
        gaps.push_back({pb, pe, std::move(cause)});
      }
    }
  };
  for (size_t i = 0; i <= busy.size(); ++i) {
    const bool bounded = i > 0 && i < busy.size();
    const int64_t lo = i > 0 ? busy[i - 1].end : wb;
    const int64_t hi = i < busy.size() ? busy[i].begin : we;
    const int64_t clo = std::max(lo, wb), chi = std::min(hi, we);
    if (chi <= clo) continue;
    if (bounded && hi - lo < launch_threshold_ns) {
      gaps.push_back({clo, chi, "launch"});
    } else {
      charge(clo, chi);
    }
  }
  return gaps;
}

// Time zero: the earliest thing written (activity of an earlier step may
// still run into the oldest kept one), so that no timestamp is negative.
int64_t TraceOrigin(const std::vector<const TraceStep*>& steps) {
  int64_t origin = steps.empty() ? 0 : steps.front()->begin_ns;
  for (const TraceStep* s : steps) {
    origin = std::min(origin, s->begin_ns);
    for (const DeviceInterval& a : s->activity) {
      if (Drawn(*s, a)) origin = std::min(origin, a.begin_ns);
    }
  }
  return origin;
}

// The tracks' names: the host's steps and syncs, each GPU's streams and idle
// track, the events lanes. Returns the GPUs drawn.
std::set<uint32_t> WriteTracks(TraceBuilder& t, const std::vector<const TraceStep*>& steps) {
  t.Meta("process_name", kHostPid, 0, "host: training loop");
  t.Meta("thread_name", kHostPid, kStepTid, "steps and phases");
  std::set<uint32_t> devices;
  std::set<std::pair<uint32_t, uint32_t>> streams;
  std::set<uint16_t> lanes;
  bool syncs = false;
  for (const TraceStep* s : steps) {
    for (const DeviceInterval& a : s->activity) {
      if (!Drawn(*s, a)) continue;
      if (a.kind == ActivityKind::kSync) {
        syncs = true;
        continue;
      }
      devices.insert(a.device);
      streams.insert({a.device, a.stream});
    }
    for (const TraceSpan& p : s->phases) {
      if (p.device_begin_ns >= 0) lanes.insert(p.lane);
    }
  }
  if (syncs) t.Meta("thread_name", kHostPid, kSyncTid, "syncs");
  for (uint32_t d : devices) {
    const int pid = kFirstDevicePid + static_cast<int>(d);
    t.Meta("process_name", pid, 0, absl::StrCat("GPU ", d, " (CUPTI activity)"));
    t.Meta("thread_name", pid, kIdleTid, "idle (by cause)");
  }
  for (const auto& [d, stream] : streams) {
    t.Meta("thread_name", kFirstDevicePid + static_cast<int>(d), static_cast<int>(stream) + 1,
           absl::StrCat("stream ", stream));
  }
  if (!lanes.empty())
    t.Meta("process_name", kEventsPid, 0, "GPU (CUDA events: phases' device spans)");
  for (uint16_t lane : lanes)
    t.Meta("thread_name", kEventsPid, lane + 1, absl::StrCat("lane ", lane));

  return devices;
}

// The step's own slice, with each GPU's time by category.
void WriteStepSlice(TraceBuilder& t, const TraceStep* s) {
  const uint64_t index = s->index;
  t.Slice(absl::StrCat("step ", index), "step", kHostPid, kStepTid, s->begin_ns, s->end_ns,
          [&](JsonWriter& w) {
            w.Key("index");
            w.Int(static_cast<int64_t>(index));
            if (s->activity_dropped > 0) {
              w.Key("activity_records_not_kept");
              w.Int(static_cast<int64_t>(s->activity_dropped));
            }
            // Each GPU's step time by category (docs/definitions.md "Device
            // time by category"), in ms: they sum to the step's time.
            if (!s->device_time.empty()) {
              w.Key("device_time_ms");
              w.BeginObject();
              for (const TraceDeviceTime& d : s->device_time) {
                w.Key(absl::StrCat("gpu ", d.device));
                w.BeginObject();
                const std::pair<const char*, int64_t> parts[] = {{"kernel", d.kernel_ns},
                                                                 {"memcpy", d.memcpy_ns},
                                                                 {"memset", d.memset_ns},
                                                                 {"comm", d.comm_ns},
                                                                 {"idle", d.idle_ns}};
                for (const auto& [key, ns] : parts) {
                  w.Key(key);
                  w.Number(static_cast<double>(ns) / 1e6);
                }
                w.EndObject();
              }
              w.EndObject();
            }
          });
}

// The step's phases, and their device spans (events).
void WritePhases(TraceBuilder& t, const TraceStep* s,
                 const std::function<std::string_view(uint16_t)>& name_of) {
  const uint64_t index = s->index;
  // Outer phases first, so that viewers nest them under the step.
  std::vector<const TraceSpan*> phases;
  for (const TraceSpan& p : s->phases) phases.push_back(&p);
  std::stable_sort(phases.begin(), phases.end(), [](const TraceSpan* a, const TraceSpan* b) {
    return a->begin_ns != b->begin_ns ? a->begin_ns < b->begin_ns : a->depth < b->depth;
  });
  for (const TraceSpan* p : phases) {
    const std::string_view name = name_of(p->id);
    t.Slice(name, "phase", kHostPid, kStepTid, p->begin_ns, p->end_ns, [&](JsonWriter& w) {
      w.Key("step");
      w.Int(static_cast<int64_t>(index));
      w.Key("depth");
      w.Int(p->depth);
    });
    if (p->device_begin_ns >= 0 && p->device_end_ns >= p->device_begin_ns) {
      t.Slice(name, "device_span", kEventsPid, p->lane + 1, p->device_begin_ns, p->device_end_ns,
              [&](JsonWriter& w) {
                w.Key("step");
                w.Int(static_cast<int64_t>(index));
                w.Key("device");
                w.Int(p->device);
              });
    }
  }
}

// The step's device activity and syncs, each record once across steps.
void WriteActivity(TraceBuilder& t, const TraceStep* s,
                   std::set<std::tuple<int64_t, int64_t, uint32_t, uint32_t, int>>& emitted) {
  const uint64_t index = s->index;
  for (const DeviceInterval& a : s->activity) {
    if (!Drawn(*s, a)) continue;
    // Work running across a step boundary belongs to both steps: once.
    if (!emitted.insert({a.begin_ns, a.end_ns, a.device, a.stream, static_cast<int>(a.kind)})
             .second)
      continue;
    const bool sync = a.kind == ActivityKind::kSync;
    const int pid = sync ? kHostPid : kFirstDevicePid + static_cast<int>(a.device);
    const int tid = sync ? kSyncTid : static_cast<int>(a.stream) + 1;
    // A kernel is named by its kernel, its class beside it.
    const bool named = a.kind == ActivityKind::kKernel && a.name != internal::kNoKernelName;
    t.Slice(named ? internal::KernelName(a.name) : KindName(a), sync ? "sync" : "activity", pid,
            tid, a.begin_ns, a.end_ns, [&](JsonWriter& w) {
              w.Key("step");
              w.Int(static_cast<int64_t>(index));
              if (named) {
                w.Key("what");
                w.String(KindName(a));
              }
              if (a.bytes > 0) {
                w.Key("bytes");
                w.Int(static_cast<int64_t>(a.bytes));
              }
              if (a.launch_ns >= 0) {
                w.Key("launch_lag_us");
                w.Number(static_cast<double>(a.begin_ns - a.launch_ns) / 1e3);
              }
            });
  }
}

// Each GPU's idle gaps in the step, labelled with their cause.
void WriteIdle(TraceBuilder& t, const TraceStep* s, const std::set<uint32_t>& devices,
               const std::function<std::string_view(uint16_t)>& name_of,
               int64_t launch_threshold_ns) {
  const uint64_t index = s->index;
  if (s->has_activity) {
    for (uint32_t d : devices) {
      for (const Gap& g : IdleGaps(*s, d, name_of, launch_threshold_ns)) {
        t.Slice(absl::StrCat("idle: ", g.cause), "idle", kFirstDevicePid + static_cast<int>(d),
                kIdleTid, g.begin_ns, g.end_ns, [&](JsonWriter& w) {
                  w.Key("step");
                  w.Int(static_cast<int64_t>(index));
                  w.Key("cause");
                  w.String(g.cause);
                });
      }
    }
  }
}

}  // namespace

std::string ToChromeTrace(const TraceCapture& capture) {
  const std::function<std::string_view(uint16_t)> name_of = [&](uint16_t id) {
    return id < capture.phase_names.size() ? std::string_view(capture.phase_names[id])
                                           : std::string_view("?");
  };
  std::vector<const TraceStep*> steps;
  steps.reserve(capture.steps.size());
  for (const TraceStep& s : capture.steps) steps.push_back(&s);
  TraceBuilder t(TraceOrigin(steps), capture.rank);
  const std::set<uint32_t> devices = WriteTracks(t, steps);
  std::set<std::tuple<int64_t, int64_t, uint32_t, uint32_t, int>> emitted;
  for (const TraceStep* s : steps) {
    WriteStepSlice(t, s);
    WritePhases(t, s, name_of);
    WriteActivity(t, s, emitted);
    WriteIdle(t, s, devices, name_of, capture.launch_threshold_ns);
  }
  return t.Take();
}

}  // namespace gpuscope::internal

namespace gpuscope {

std::string ToChromeTrace(const Session& session) {
  return internal::ToChromeTrace(internal::CaptureTrace(session));
}

std::string ToChromeTrace(const TraceAnalysis& run) {
  return internal::ToChromeTrace(run.timeline != nullptr ? *run.timeline
                                                         : internal::TraceCapture{});
}

}  // namespace gpuscope
