#include "core/activity_timeline.h"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "core/intervals.h"
#include "gpuscope/phase.h"

namespace gpuscope::internal {
namespace {

// Device-time categories, highest priority first.
enum Category : uint8_t { kCatKernel = 0, kCatMemcpy, kCatMemset, kCatComm, kNumCategories };

Category CategoryOf(const DeviceInterval& a) {
  if (a.kind == ActivityKind::kKernel) {
    return a.kernel_class == KernelClass::kCollective ? kCatComm : kCatKernel;
  }
  return IsCopy(a.kind) ? kCatMemcpy : kCatMemset;
}

// One end of an activity interval, clipped to the window.
struct Edge {
  int64_t t;
  int8_t delta;  // +1 begins, -1 ends
  uint8_t category;
};

// Splits the time covered by `edges` (one device's, whose union within the
// window is d->busy_ns) among the categories: each piece goes to the
// highest-priority category running over it.
void SplitByCategory(std::vector<Edge>& edges, ActivityDeviceResult* d) {
  std::array<int64_t, kNumCategories> time{};
  const auto assign = [&] {
    d->kernel_ns = time[kCatKernel];
    d->memcpy_ns = time[kCatMemcpy];
    d->memset_ns = time[kCatMemset];
    d->comm_ns = time[kCatComm];
  };
  // One category only (compute kernels alone, the common step): all of the
  // busy time, no sort.
  if (std::all_of(edges.begin(), edges.end(),
                  [&](const Edge& e) { return e.category == edges.front().category; })) {
    if (!edges.empty()) time[edges.front().category] = d->busy_ns;
    assign();
    return;
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) { return a.t < b.t; });
  std::array<int, kNumCategories> running{};
  int64_t prev = 0;
  for (const Edge& e : edges) {
    for (int c = 0; c < kNumCategories; ++c) {
      if (running[static_cast<size_t>(c)] > 0) {
        time[static_cast<size_t>(c)] += e.t - prev;
        break;
      }
    }
    running[e.category] += e.delta;
    prev = e.t;
  }
  assign();
}

// Whether `a` began in the window [wb, we).
bool BeganIn(const DeviceInterval& a, int64_t wb, int64_t we) {
  return wb <= a.begin_ns && a.begin_ns < we;
}

// The pieces of `idle` (sorted, none a launch gap) that followed a
// synchronization: each piece in which a sync of `syncs` (sorted by end)
// returned, from the later of the piece's start and the first such sync's
// begin.
std::vector<Interval> IdleAfterSyncs(const std::vector<Interval>& idle,
                                     const std::vector<Interval>& syncs) {
  std::vector<Interval> out;
  auto s = syncs.begin();
  for (const Interval& piece : idle) {
    while (s != syncs.end() && s->end < piece.begin) ++s;
    if (s == syncs.end()) break;
    if (s->end < piece.end) out.push_back({std::max(piece.begin, s->begin), piece.end});
  }
  return out;
}

// Whether idle in phase `id` is another rule's: the loader's, copies' or
// collectives'.
bool IdleExplainedElsewhere(int id) {
  return id == static_cast<int>(Phase::kData) || id == static_cast<int>(Phase::kH2D) ||
         id == static_cast<int>(Phase::kComm);
}

// The synchronizations that returned in the window [wb, we), by end.
std::vector<Interval> SyncsEndingIn(std::span<const DeviceInterval> acts, int64_t wb, int64_t we) {
  std::vector<Interval> syncs;
  for (const DeviceInterval& a : acts) {
    if (a.kind == ActivityKind::kSync && a.end_ns >= wb && a.end_ns < we)
      syncs.push_back({a.begin_ns, a.end_ns});
  }
  std::sort(syncs.begin(), syncs.end(),
            [](const Interval& a, const Interval& b) { return a.end < b.end; });
  return syncs;
}

// One device's idle after a sync (activity_timeline.h): the pieces of
// `idle` that followed one of `syncs`, less those in phases whose idle
// other rules explain.
int64_t SyncIdleNs(const std::vector<Interval>& idle, const std::vector<Interval>& syncs,
                   const std::vector<PhaseRange>& ranges, const std::vector<HostPhase>& phases) {
  if (syncs.empty()) return 0;
  int64_t total = 0;  // starts with the pieces no phase is open over
  std::vector<int64_t> in_phase(phases.size());
  ChargeToInnermost(IdleAfterSyncs(idle, syncs), ranges, &in_phase, &total);
  for (size_t i = 0; i < in_phase.size(); ++i) {
    if (!IdleExplainedElsewhere(phases[i].phase_id)) total += in_phase[i];
  }
  return total;
}

// Per device taking part, its busy and idle time in the window [wb, we),
// idle told apart as launch gaps, phases' (the innermost open) and the
// rest, and busy time by category; into `out`, with their sums.
void AnalyzeDevices(const ActivityStepInput& in, int64_t wb, int64_t we, ActivityStepResult& out) {
  const std::span<const DeviceInterval> acts = in.activity;

  // Device activity per device; devices take part when some of it overlaps
  // the window.
  std::map<int, std::vector<Interval>> per_device;
  std::map<int, std::vector<Edge>> edges;  // by category, clipped to the window
  for (const int device : in.known_devices) per_device[device];
  for (const DeviceInterval& a : acts) {
    if (!IsDeviceActivity(a.kind)) continue;
    per_device[static_cast<int>(a.device)].push_back({a.begin_ns, a.end_ns});
    const int64_t lo = std::max(a.begin_ns, wb), hi = std::min(a.end_ns, we);
    if (hi <= lo) continue;
    const auto category = static_cast<uint8_t>(CategoryOf(a));
    std::vector<Edge>& e = edges[static_cast<int>(a.device)];
    e.push_back({lo, 1, category});
    e.push_back({hi, -1, category});
  }
  std::vector<PhaseRange> ranges;
  ranges.reserve(in.phases.size());
  for (const HostPhase& p : in.phases) ranges.push_back({p.begin_ns, p.end_ns, p.depth});
  std::vector<int64_t> phase_idle(in.phases.size());
  const std::vector<Interval> syncs = SyncsEndingIn(acts, wb, we);

  for (auto& [device, intervals] : per_device) {
    const std::vector<Interval> busy = UnionOf(std::move(intervals));
    ActivityDeviceResult d;
    d.device = device;
    std::vector<Interval> idle;  // idle that is not a launch gap: charged to phases
    // The gap before piece i (i == size: after the last), clipped to the
    // window. A launch gap has activity on both sides and is short.
    const auto gap = [&](size_t i) {
      const bool bounded = i > 0 && i < busy.size();
      const int64_t lo = i > 0 ? busy[i - 1].end : wb;
      const int64_t hi = i < busy.size() ? busy[i].begin : we;
      const int64_t clo = std::max(lo, wb);
      const int64_t chi = std::min(hi, we);
      if (chi <= clo) return;
      if (bounded && hi - lo < in.launch_threshold_ns) {
        d.idle_launch_ns += chi - clo;
      } else {
        idle.push_back({clo, chi});
      }
    };
    bool overlaps = false;
    for (size_t i = 0; i <= busy.size(); ++i) {
      gap(i);
      if (i == busy.size()) break;
      const int64_t lo = std::max(busy[i].begin, wb);
      const int64_t hi = std::min(busy[i].end, we);
      if (hi > lo) {
        overlaps = true;
        d.busy_ns += hi - lo;
      }
    }
    if (!overlaps && std::find(in.known_devices.begin(), in.known_devices.end(), device) ==
                         in.known_devices.end()) {
      continue;
    }
    d.idle_ns = out.window_ns - d.busy_ns;
    if (auto it = edges.find(device); it != edges.end()) SplitByCategory(it->second, &d);
    out.counts.busy_kernel_ns += d.kernel_ns;
    out.counts.busy_memcpy_ns += d.memcpy_ns;
    out.counts.busy_memset_ns += d.memset_ns;
    out.counts.busy_comm_ns += d.comm_ns;
    out.counts.sync_idle_ns += SyncIdleNs(idle, syncs, ranges, in.phases);
    std::fill(phase_idle.begin(), phase_idle.end(), 0);
    ChargeToInnermost(idle, ranges, &phase_idle, &d.idle_other_ns);
    for (size_t i = 0; i < phase_idle.size(); ++i) out.phases[i].idle_ns += phase_idle[i];
    out.busy_ns += d.busy_ns;
    out.idle_ns += d.idle_ns;
    out.idle_launch_ns += d.idle_launch_ns;
    out.idle_other_ns += d.idle_other_ns;
    out.devices.push_back(d);
  }
}

// Collective time no other work on its device overlapped (DDP overlaps
// its all-reduce with backward: only the rest delays the step), summed
// over devices, within the window [wb, we).
int64_t ExposedCollectiveNs(std::span<const DeviceInterval> acts, int64_t wb, int64_t we) {
  int64_t exposed = 0;
  std::map<uint32_t, std::pair<std::vector<Interval>, std::vector<Interval>>> work;
  for (const DeviceInterval& a : acts) {
    if (!IsDeviceActivity(a.kind)) continue;
    const int64_t lo = std::max(a.begin_ns, wb), hi = std::min(a.end_ns, we);
    if (hi <= lo) continue;
    auto& [collective, other] = work[a.device];
    (a.kind == ActivityKind::kKernel && a.kernel_class == KernelClass::kCollective ? collective
                                                                                   : other)
        .push_back({lo, hi});
  }
  for (auto& [device, lists] : work) {
    exposed += LengthOutside(UnionOf(std::move(lists.first)), UnionOf(std::move(lists.second)));
  }
  return exposed;
}

// Counts over what began in the window [wb, we): kernels and their time by
// class, copies and their bytes, synchronizations.
void CountBegunInWindow(std::span<const DeviceInterval> acts, int64_t wb, int64_t we,
                        ActivityCounts& c) {
  std::vector<int64_t> kernel_durations;
  for (const DeviceInterval& a : acts) {
    if (!BeganIn(a, wb, we)) continue;
    if (a.kind == ActivityKind::kKernel) {
      const int64_t d = a.end_ns - a.begin_ns;
      kernel_durations.push_back(d);
      c.kernel_ns += d;
      if (a.kernel_class == KernelClass::kGemmFp32 || a.kernel_class == KernelClass::kGemmReduced ||
          a.kernel_class == KernelClass::kGemmUnknown) {
        c.gemm_ns += d;
      }
      if (a.kernel_class == KernelClass::kGemmFp32) c.gemm_fp32_ns += d;
      if (a.kernel_class == KernelClass::kCollective) c.collective_ns += d;
    } else if (IsCopy(a.kind)) {
      ++c.copies;
      if (a.pageable) ++c.pageable_copies;
      if (a.pageable && a.kind == ActivityKind::kMemcpyH2D) ++c.pageable_h2d_copies;
      if (a.kind == ActivityKind::kMemcpyH2D) c.h2d_bytes += static_cast<int64_t>(a.bytes);
      if (a.kind == ActivityKind::kMemcpyD2H) c.d2h_bytes += static_cast<int64_t>(a.bytes);
    } else if (a.kind == ActivityKind::kSync) {
      ++c.syncs;
      c.sync_ns += std::max<int64_t>(0, std::min(a.end_ns, we) - a.begin_ns);
    }
  }
  c.kernels = static_cast<int64_t>(kernel_durations.size());
  if (!kernel_durations.empty()) {
    auto mid = kernel_durations.begin() + static_cast<std::ptrdiff_t>(kernel_durations.size() / 2);
    std::nth_element(kernel_durations.begin(), mid, kernel_durations.end());
    c.kernel_median_ns = *mid;
  }
}

// The innermost of `phases` open at `t` (-1: none).
int InnermostAt(const std::vector<HostPhase>& phases, int64_t t) {
  int found = -1, depth = -1;
  for (const HostPhase& p : phases) {
    if (p.begin_ns <= t && t < p.end_ns && p.depth > depth) {
      found = p.phase_id;
      depth = p.depth;
    }
  }
  return found;
}

// The kernels that began in the window [wb, we), by (name, launching
// phase): those of the kKernelNamesPerStep names with the most time, at
// most kKernelsPerStep entries, largest first.
std::vector<KernelTally> TallyKernels(std::span<const DeviceInterval> acts, int64_t wb, int64_t we,
                                      const std::vector<HostPhase>& phases) {
  std::vector<KernelTally> tallies;
  std::unordered_map<uint64_t, size_t> index;  // (name, phase + 1) -> tallies
  for (const DeviceInterval& a : acts) {
    if (a.kind != ActivityKind::kKernel || !BeganIn(a, wb, we)) continue;
    const int phase = a.launch_ns >= 0 ? InnermostAt(phases, a.launch_ns) : -1;
    const uint64_t key = (uint64_t{a.name} << 32) | static_cast<uint32_t>(phase + 1);
    const auto [it, added] = index.try_emplace(key, tallies.size());
    if (added)
      tallies.push_back({.name = a.name, .phase_id = phase, .kernel_class = a.kernel_class});
    KernelTally& t = tallies[it->second];
    t.ns += a.end_ns - a.begin_ns;
    ++t.count;
  }
  // Keep the kKernelNamesPerStep names with the most time, every phase
  // they were launched in (up to kKernelsPerStep entries): a kernel's total
  // is exact wherever its name is among a step's largest.
  std::unordered_map<uint32_t, int64_t> by_name;
  for (const KernelTally& t : tallies) by_name[t.name] += t.ns;
  std::vector<std::pair<int64_t, uint32_t>> names;
  names.reserve(by_name.size());
  for (const auto& [name, ns] : by_name) names.emplace_back(-ns, name);
  const size_t top = std::min(names.size(), kKernelNamesPerStep);
  std::partial_sort(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(top), names.end());
  std::unordered_set<uint32_t> kept_names;
  for (size_t i = 0; i < top; ++i) kept_names.insert(names[i].second);
  std::erase_if(tallies, [&](const KernelTally& t) { return !kept_names.contains(t.name); });
  std::sort(tallies.begin(), tallies.end(), [](const KernelTally& x, const KernelTally& y) {
    return std::tie(y.ns, x.name, x.phase_id) < std::tie(x.ns, y.name, y.phase_id);
  });
  if (tallies.size() > kKernelsPerStep) tallies.resize(kKernelsPerStep);
  return tallies;
}

// HTA's host-wait test: per stream, in begin order, a kernel whose launch
// call began after the previous activity on its stream had ended, within
// the step (a gap across the step boundary is the loop's, not a launch's).
void CountHostWaits(std::span<const DeviceInterval> acts, int64_t wb, int64_t we,
                    ActivityCounts& c) {
  std::vector<const DeviceInterval*> on_streams;
  for (const DeviceInterval& a : acts) {
    if (IsDeviceActivity(a.kind)) on_streams.push_back(&a);
  }
  std::sort(on_streams.begin(), on_streams.end(),
            [](const DeviceInterval* a, const DeviceInterval* b) {
              return std::tie(a->device, a->stream, a->begin_ns) <
                     std::tie(b->device, b->stream, b->begin_ns);
            });
  for (size_t i = 1; i < on_streams.size(); ++i) {
    const DeviceInterval& prev = *on_streams[i - 1];
    const DeviceInterval& k = *on_streams[i];
    if (k.kind != ActivityKind::kKernel || prev.device != k.device || prev.stream != k.stream ||
        !BeganIn(k, wb, we) || k.launch_ns < 0 || prev.end_ns < wb) {
      continue;
    }
    if (k.launch_ns > prev.end_ns) {
      ++c.host_wait_gaps;
      c.host_wait_ns += std::max<int64_t>(0, k.begin_ns - prev.end_ns);
    }
  }
}

}  // namespace

ActivityStepResult AnalyzeActivityStep(const ActivityStepInput& in) {
  ActivityStepResult out;
  const int64_t wb = in.begin_ns;
  const int64_t we = std::max(in.end_ns, in.begin_ns);
  out.window_ns = we - wb;
  out.phases.resize(in.phases.size());
  const std::span<const DeviceInterval> acts = in.activity;
  AnalyzeDevices(in, wb, we, out);
  const bool any_collective = std::any_of(acts.begin(), acts.end(), [](const DeviceInterval& a) {
    return a.kind == ActivityKind::kKernel && a.kernel_class == KernelClass::kCollective;
  });
  if (any_collective) out.counts.collective_exposed_ns += ExposedCollectiveNs(acts, wb, we);
  CountBegunInWindow(acts, wb, we, out.counts);
  CountHostWaits(acts, wb, we, out.counts);
  out.kernels = TallyKernels(acts, wb, we, in.phases);
  return out;
}

int64_t LaunchedDeviceTime(std::span<const DeviceInterval> activity,
                           const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  std::vector<Interval> launched;
  for (const DeviceInterval& a : activity) {
    if (!IsDeviceActivity(a.kind) || a.launch_ns < 0) continue;
    for (const auto& [b, e] : ranges) {
      if (b <= a.launch_ns && a.launch_ns < e) {
        launched.push_back({a.begin_ns, a.end_ns});
        break;
      }
    }
  }
  int64_t total = 0;
  for (const Interval& i : UnionOf(std::move(launched))) total += i.end - i.begin;
  return total;
}

}  // namespace gpuscope::internal
