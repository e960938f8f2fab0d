#include "core/memory_window.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace gpuscope::internal {
namespace {

// The innermost phase of `phases` open at `t` (the deepest one containing
// it; of equals, the one begun last), or kNoMemoryPhase.
uint16_t InnermostAt(std::span<const Record> phases, int64_t t) {
  uint16_t id = MemoryStepEntry::kNoMemoryPhase;
  int depth = -1;
  int64_t begun = INT64_MIN;
  for (const Record& r : phases) {
    if (t < r.begin_ns || t > std::max(r.end_ns, r.begin_ns)) continue;
    if (r.depth > depth || (r.depth == depth && r.begin_ns >= begun)) {
      id = r.name_id;
      depth = r.depth;
      begun = r.begin_ns;
    }
  }
  return id;
}

// How much a cumulative counter rose from `before` to `now` (-1: unknown).
uint32_t Rise(int64_t before, int64_t now) {
  if (before < 0 || now <= before) return 0;
  return static_cast<uint32_t>(std::min<int64_t>(now - before, UINT32_MAX));
}

double Max(double a, double b) { return std::isnan(a) ? b : (std::isnan(b) ? a : std::max(a, b)); }

}  // namespace

MemoryWindow::Gpu& MemoryWindow::GpuOf(int device) {
  const size_t d = static_cast<size_t>(std::clamp(device, 0, 255));
  if (gpus_.size() <= d) gpus_.resize(d + 1);
  return gpus_[d];
}

void MemoryWindow::Add(const MemorySample& sample) {
  if (pending_.empty() || pending_.back().host_ns <= sample.host_ns) {
    pending_.push_back(sample);
  } else {
    const auto at =
        std::upper_bound(pending_.begin(), pending_.end(), sample.host_ns,
                         [](int64_t t, const MemorySample& s) { return t < s.host_ns; });
    pending_.insert(at, sample);
  }
  // No step for a long while (evaluation, a stalled loop): fold the oldest
  // into the GPUs' state so that waiting samples stay bounded.
  constexpr size_t kMaxPending = 1 << 16;
  while (pending_.size() > kMaxPending) {
    Take(pending_.front(), INT64_MAX, {}, nullptr, nullptr);
    pending_.pop_front();
  }
}

void MemoryWindow::Take(const MemorySample& s, int64_t begin_ns, std::span<const Record> phases,
                        MemoryStepEntry* entry, std::vector<MemoryPhasePeak>* peaks) {
  Gpu& gpu = GpuOf(s.stats.device);
  // A sample older than the GPU's latest (two threads pushing out of order)
  // would move its counters back and count a rise twice: it is dropped.
  if (gpu.seen && s.host_ns < gpu.last_ns) return;
  const AllocatorStats& now = s.stats;
  const AllocatorStats before = gpu.last;  // a copy: gpu.last is overwritten below
  if (entry != nullptr) {
    entry->retries += gpu.seen ? Rise(before.alloc_retries, now.alloc_retries) : 0;
    entry->ooms += gpu.seen ? Rise(before.ooms, now.ooms) : 0;
  }
  if (entry != nullptr && s.host_ns >= begin_ns && !std::isnan(now.allocated_bytes)) {
    // The sample's own allocation, at its instant; or the high-water mark,
    // where it rose since the previous sample: at the sample's instant when
    // the sample is at the mark (an allocator reporting each change), else
    // midway between the two samples.
    double peak = now.allocated_bytes;
    int64_t at = s.host_ns;
    // A sample at the high-water mark is the peak itself, not a lower bound.
    bool exact = now.allocated_bytes >= now.peak_allocated_bytes;
    if (gpu.seen && now.peak_allocated_bytes > before.peak_allocated_bytes) {
      exact = true;
      if (now.peak_allocated_bytes > now.allocated_bytes) {
        peak = now.peak_allocated_bytes;
        at = std::max(begin_ns, gpu.last_ns) / 2 + s.host_ns / 2;
      }
    }
    const uint16_t phase = InnermostAt(phases, at);
    if (!entry->sampled || peak > entry->peak_allocated) {
      entry->peak_allocated = peak;
      entry->peak_phase = phase;
      entry->exact = exact;
    }
    double reserved = now.reserved_bytes;
    if (gpu.seen && now.peak_reserved_bytes > before.peak_reserved_bytes) {
      reserved = Max(reserved, now.peak_reserved_bytes);
    }
    entry->peak_reserved = entry->sampled ? std::max(entry->peak_reserved, reserved) : reserved;
    entry->min_allocated =
        entry->sampled ? std::min(entry->min_allocated, now.allocated_bytes) : now.allocated_bytes;
    entry->sampled = true;
    if (entry->samples < UINT16_MAX) ++entry->samples;
    if (peaks != nullptr && phase != MemoryStepEntry::kNoMemoryPhase) {
      auto it = std::find_if(peaks->begin(), peaks->end(), [&](const MemoryPhasePeak& p) {
        return p.phase == phase && p.device == entry->device;
      });
      if (it == peaks->end()) {
        peaks->push_back({entry->index, phase, entry->device, peak});
      } else {
        it->peak = std::max(it->peak, peak);
      }
    }
  }
  gpu.last = now;
  if (gpu.seen) {  // the high-water marks only rise until their user resets them
    if (std::isnan(now.peak_allocated_bytes))
      gpu.last.peak_allocated_bytes = before.peak_allocated_bytes;
  }
  gpu.last_ns = s.host_ns;
  gpu.seen = true;
}

float MemoryWindow::OnStep(uint64_t index, int64_t begin_ns, int64_t end_ns,
                           std::span<const Record> phases) {
  // One entry per GPU the samples up to the step's end name.
  std::vector<MemoryStepEntry> entries;
  std::vector<MemoryPhasePeak> peaks;
  // Half open: a sample at the step's end belongs to the step that begins
  // there (an allocation made as the next step begins); a step of no
  // duration takes those at its instant.
  const int64_t until = end_ns > begin_ns ? end_ns - 1 : end_ns;
  while (!pending_.empty() && pending_.front().host_ns <= until) {
    const MemorySample& s = pending_.front();
    const uint8_t device = static_cast<uint8_t>(std::clamp(s.stats.device, 0, 255));
    auto it = std::find_if(entries.begin(), entries.end(),
                           [&](const MemoryStepEntry& e) { return e.device == device; });
    if (it == entries.end()) {
      MemoryStepEntry e;
      e.index = index;
      e.duration_ns = end_ns - begin_ns;
      e.device = device;
      entries.push_back(e);
      it = entries.end() - 1;
    }
    Take(s, begin_ns, phases, &*it, &peaks);
    pending_.pop_front();
  }
  double step_peak = std::numeric_limits<double>::quiet_NaN();
  for (const MemoryStepEntry& e : entries) {
    if (e.sampled) step_peak = Max(step_peak, e.peak_allocated);
    if (e.sampled || e.retries > 0 || e.ooms > 0) Push(e);
  }
  for (const MemoryPhasePeak& p : peaks) phase_peaks_.push_back(p);
  // Phase peaks of steps that left the window.
  const uint64_t oldest = steps_.empty() ? index : steps_.front().index;
  while (!phase_peaks_.empty() && phase_peaks_.front().index < oldest) phase_peaks_.pop_front();
  return static_cast<float>(step_peak);  // the series keeps a float a step
}

void MemoryWindow::Push(const MemoryStepEntry& entry) {
  steps_.push_back(entry);
  // Entries of steps past the window (a step has one per GPU).
  while (!steps_.empty() && steps_.front().index + capacity_ <= entry.index) steps_.pop_front();
}

void MemoryWindow::OnReset() {
  steps_.clear();
  phase_peaks_.clear();
}

std::optional<MemorySnapshot> MemoryWindow::Snapshot() const {
  if (source_.empty()) return std::nullopt;
  MemorySnapshot s;
  s.source = source_;
  s.steps.assign(steps_.begin(), steps_.end());
  s.phase_peaks.assign(phase_peaks_.begin(), phase_peaks_.end());
  // Each GPU's latest numbers: a sample still waiting for its step is newer
  // than what the steps took.
  std::vector<const AllocatorStats*> latest(gpus_.size(), nullptr);
  for (size_t d = 0; d < gpus_.size(); ++d) {
    if (gpus_[d].seen) latest[d] = &gpus_[d].last;
  }
  for (const MemorySample& m : pending_) {
    const size_t d = static_cast<size_t>(std::clamp(m.stats.device, 0, 255));
    if (d >= latest.size()) latest.resize(d + 1, nullptr);
    latest[d] = &m.stats;
  }
  for (size_t d = 0; d < latest.size(); ++d) {
    if (latest[d] == nullptr) continue;
    s.last.push_back(*latest[d]);
    s.last.back().device = static_cast<int>(d);
  }
  s.oom = oom_;
  return s;
}

namespace {

GpuMemory GpuOver(const MemorySnapshot& snap, int device, uint64_t first, uint64_t end,
                  double median_step_s, const std::vector<std::string>& names) {
  GpuMemory g;
  g.device = device;
  for (const AllocatorStats& a : snap.last) {
    if (a.device != device) continue;
    g.allocated_bytes = a.allocated_bytes;
    g.reserved_bytes = a.reserved_bytes;
    g.total_bytes = a.total_bytes;
  }
  const MemoryStepEntry* top = nullptr;
  for (const MemoryStepEntry& e : snap.steps) {
    if (e.device != device || e.index < first || e.index >= end) continue;
    // The allocator retries once before it raises an out-of-memory error:
    // that retry is the OOM's, not thrash.
    const uint32_t retries = e.retries - std::min(e.retries, e.ooms);
    g.alloc_retries += retries;
    g.ooms += e.ooms;
    if (retries > 0) {
      ++g.retry_steps;
      g.retry_time += std::max(0.0, static_cast<double>(e.duration_ns) * 1e-9 - median_step_s);
    }
    if (!e.sampled) continue;
    // Of equal peaks, the latest step's: where the loop is now.
    if (top == nullptr || e.peak_allocated >= top->peak_allocated) top = &e;
    g.peak_reserved_bytes = Max(g.peak_reserved_bytes, e.peak_reserved);
    g.min_allocated_bytes =
        std::isnan(g.min_allocated_bytes)
            ? e.min_allocated
            : std::min(g.min_allocated_bytes, static_cast<double>(e.min_allocated));
  }
  if (top != nullptr) {
    g.peak_allocated_bytes = top->peak_allocated;
    g.peak_exact = top->exact;
    g.peak_step = static_cast<int64_t>(top->index);
    if (top->peak_phase < names.size()) g.peak_phase = names[top->peak_phase];
    if (g.peak_reserved_bytes > 0) {
      g.fragmentation = std::clamp(1.0 - g.peak_allocated_bytes / g.peak_reserved_bytes, 0.0, 1.0);
    }
  }
  return g;
}

}  // namespace

MemoryStats MemoryStatsOf(const MemorySnapshot& snap, uint64_t first_index, uint64_t end_index,
                          double median_step_s, const std::vector<std::string>& phase_names) {
  MemoryStats m;
  m.source = snap.source;
  m.oom = snap.oom;
  std::vector<int> devices;
  for (const AllocatorStats& a : snap.last) devices.push_back(a.device);
  uint64_t last_counted = UINT64_MAX;
  for (const MemoryStepEntry& e : snap.steps) {
    if (e.index < first_index || e.index >= end_index || !e.sampled) continue;
    m.samples += e.samples;
    if (e.index != last_counted) ++m.steps;
    last_counted = e.index;
  }
  std::sort(devices.begin(), devices.end());
  devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
  int fullest = -1;
  double fullest_peak = -1;
  for (int d : devices) {
    m.gpus.push_back(GpuOver(snap, d, first_index, end_index, median_step_s, phase_names));
    if (m.gpus.back().peak_allocated_bytes > fullest_peak) {
      fullest_peak = m.gpus.back().peak_allocated_bytes;
      fullest = d;
    }
  }
  for (const MemoryPhasePeak& p : snap.phase_peaks) {
    if (p.device != fullest || p.index < first_index || p.index >= end_index) continue;
    if (p.phase >= phase_names.size()) continue;
    double& v = m.peak_by_phase.try_emplace(phase_names[p.phase], 0.0).first->second;
    v = std::max(v, static_cast<double>(p.peak));
  }
  return m;
}

}  // namespace gpuscope::internal
