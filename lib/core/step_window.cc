#include "core/step_window.h"

#include <algorithm>
#include <bit>

namespace gpuscope::internal {

namespace step_window_internal {

namespace {

// A 32-bit field for `v`: kAbsent for -1 (not measured), kWide when it does
// not fit.
uint32_t Encode(int64_t v) {
  if (v == -1) return PhaseColumn::kAbsent;
  if (v < 0 || v >= PhaseColumn::kWide) return PhaseColumn::kWide;
  return static_cast<uint32_t>(v);
}

int64_t Decode(uint32_t v, int64_t wide) {
  if (v == PhaseColumn::kAbsent) return -1;
  if (v == PhaseColumn::kWide) return wide;
  return v;
}

}  // namespace

const PhaseSample* PhaseColumn::FindWide(size_t slot) const {
  for (const auto& [s, sample] : wide) {
    if (s == slot) return &sample;
  }
  return nullptr;
}

PhaseSample* PhaseColumn::FindWide(size_t slot) {
  for (auto& [s, sample] : wide) {
    if (s == slot) return &sample;
  }
  return nullptr;
}

PhaseSample& PhaseColumn::WideSlot(size_t slot) {
  if (PhaseSample* found = FindWide(slot); found != nullptr) return *found;
  return wide.emplace_back(static_cast<uint32_t>(slot), PhaseSample{}).second;
}

int64_t PhaseColumn::TotalAt(size_t slot) const {
  if (total[slot] != kWide) return total[slot];
  const PhaseSample* w = FindWide(slot);
  return w != nullptr ? w->total_ns : 0;
}

PhaseSample PhaseColumn::Get(size_t slot) const {
  PhaseSample s;
  const PhaseSample* w = FindWide(slot);  // only searched when a field says so
  const auto wide_or = [&](int64_t PhaseSample::* field) {
    return w != nullptr ? w->*field : int64_t{0};
  };
  s.total_ns = Decode(total[slot], total[slot] == kWide ? wide_or(&PhaseSample::total_ns) : 0);
  const uint8_t m = meta[slot];
  switch (m & 3) {
    case kTopZero: s.top_ns = 0; break;
    case kTopEqual: s.top_ns = s.total_ns; break;
    default: s.top_ns = wide_or(&PhaseSample::top_ns);
  }
  s.top_level = (m & kTopLevelBit) != 0;
  const uint32_t count = m >> 3;
  s.count = count == kCountInline && w != nullptr ? w->count : count;
  if (!device.empty()) {
    s.device_ns =
        Decode(device[slot], device[slot] == kWide ? wide_or(&PhaseSample::device_ns) : 0);
    s.idle_ns = Decode(idle[slot], idle[slot] == kWide ? wide_or(&PhaseSample::idle_ns) : 0);
    s.backlog_ns =
        Decode(backlog[slot], backlog[slot] == kWide ? wide_or(&PhaseSample::backlog_ns) : 0);
  }
  return s;
}

void PhaseColumn::SetHost(size_t slot, const PhaseSample& sample) {
  total[slot] = Encode(std::max<int64_t>(0, sample.total_ns));
  uint8_t m = 0;
  if (sample.top_ns == 0) {
    m = kTopZero;
  } else if (sample.top_ns == sample.total_ns) {
    m = kTopEqual;
  } else {
    m = kTopWide;
  }
  if (sample.top_level) m |= kTopLevelBit;
  const uint32_t count = std::min(sample.count, kCountInline);
  m |= static_cast<uint8_t>(count << 3);
  meta[slot] = m;
  if (total[slot] == kWide || m % 4 == kTopWide || count == kCountInline) {
    PhaseSample& w = WideSlot(slot);
    w.total_ns = sample.total_ns;
    w.top_ns = sample.top_ns;
    w.count = sample.count;
  }
}

void PhaseColumn::SetDevice(size_t slot, int64_t device_ns, int64_t idle_ns, int64_t backlog_ns) {
  if (device.empty()) {
    device.assign(total.size(), kAbsent);
    idle.assign(total.size(), kAbsent);
    backlog.assign(total.size(), kAbsent);
  }
  device[slot] = Encode(device_ns);
  idle[slot] = Encode(idle_ns);
  backlog[slot] = Encode(backlog_ns);
  if (device[slot] == kWide || idle[slot] == kWide || backlog[slot] == kWide) {
    PhaseSample& w = WideSlot(slot);
    w.device_ns = device_ns;
    w.idle_ns = idle_ns;
    w.backlog_ns = backlog_ns;
  }
}

Chunk::Chunk(const Chunk& other) : first_index(other.first_index), capacity(other.capacity) {
  records.reserve(capacity);
  records.assign(other.records.begin(), other.records.end());
  if (other.devices != nullptr) {
    devices = std::make_unique<StepDevices[]>(capacity);
    std::copy(other.devices.get(), other.devices.get() + capacity, devices.get());
  }
  columns.resize(other.columns.size());
  for (size_t id = 0; id < columns.size(); ++id) {
    if (other.columns[id] != nullptr)
      columns[id] = std::make_unique<PhaseColumn>(*other.columns[id]);
  }
  std::lock_guard<std::mutex> lock(other.cache_mu);
  cached = other.cached;  // host times do not change when a chunk is copied
}

namespace {

// Keeps `found` in `c` bucket by bucket (a counting sort), so that the
// summary reads each target's values without working out their buckets:
// the buckets of `near`, or only its targets once the neighbours were
// dropped. mark[] gives a bucket's place in `near` plus one.
void KeepByBucket(const std::vector<size_t>& near, const std::vector<bool>& target, bool neighbours,
                  const std::vector<uint8_t>& mark, const std::vector<uint32_t>& found,
                  CachedTimes& c) {
  std::vector<uint32_t> count(near.size() + 1, 0);
  for (const uint32_t v : found) ++count[mark[WindowColumn::Bucket(v)]];
  std::vector<uint32_t> at(near.size(), 0);
  for (size_t k = 0; k < near.size(); ++k) {
    if (!neighbours && !target[k]) continue;
    at[k] = static_cast<uint32_t>(c.values.size());  // used as a running size below
    c.buckets.push_back(near[k]);
    c.begin.push_back(at[k]);
    c.values.resize(c.values.size() + count[k + 1]);
  }
  c.begin.push_back(static_cast<uint32_t>(c.values.size()));
  for (const uint32_t v : found) c.values[at[mark[WindowColumn::Bucket(v)] - 1]++] = v;
  c.values.shrink_to_fit();
}

}  // namespace

const CachedTimes* Chunk::TimesIn(uint16_t id, const TargetBuckets& t) const {
  if (cached.size() <= id) cached.resize(columns.size());
  CachedTimes& c = cached[id];
  if (std::includes(c.buckets.begin(), c.buckets.end(), t.buckets, t.buckets + t.size)) {
    return c.kept ? &c : nullptr;
  }
  // One pass over the column keeps the values in the targets and in their
  // neighbouring buckets, so that quantiles drifting into the next bucket
  // still find them, up to an eighth of the chunk; past that, in the
  // targets only, up to a quarter. mark[] gives a bucket's place in `near`
  // plus one.
  const size_t limit = capacity / 4, neighbour_limit = capacity / 8;
  thread_local std::vector<uint8_t> mark;
  thread_local std::vector<uint32_t> found;
  if (mark.empty()) mark.assign(WindowColumn::kBuckets, 0);
  std::vector<size_t> near;
  for (size_t i = 0; i < t.size; ++i) {
    const size_t b = t.buckets[i];
    if (b > 0) near.push_back(b - 1);
    near.push_back(b);
    if (b + 1 < WindowColumn::kBuckets) near.push_back(b + 1);
  }
  std::sort(near.begin(), near.end());
  near.erase(std::unique(near.begin(), near.end()), near.end());  // at most 30
  std::vector<bool> target(near.size());
  for (size_t k = 0; k < near.size(); ++k) {
    mark[near[k]] = static_cast<uint8_t>(k + 1);
    target[k] = std::binary_search(t.buckets, t.buckets + t.size, near[k]);
  }
  const auto is_target = [&](uint32_t v) { return target[mark[WindowColumn::Bucket(v)] - 1]; };
  found.clear();
  bool neighbours = true, fits = true;
  const PhaseColumn& col = *columns[id];
  for (size_t i = 0; i < capacity && fits; ++i) {
    const uint32_t v = col.total[i];
    if (v == PhaseColumn::kAbsent) continue;
    const int64_t value = v == PhaseColumn::kWide ? col.TotalAt(i) : v;
    const uint8_t m = mark[WindowColumn::Bucket(value)];
    if (m == 0 || (!neighbours && !target[m - 1])) continue;
    if (v == PhaseColumn::kWide) {
      fits = false;  // kept as 32 bits: take the column's road
    } else if (found.size() < (neighbours ? neighbour_limit : limit)) {
      found.push_back(v);
    } else if (neighbours) {
      // Too many: drop the neighbours' values and go on with the targets.
      neighbours = false;
      std::erase_if(found, [&](uint32_t x) { return !is_target(x); });
      if (!target[m - 1]) continue;
      if (found.size() < limit) {
        found.push_back(v);
      } else {
        fits = false;
      }
    } else {
      fits = false;
    }
  }
  c.kept = fits;
  c.buckets.clear();
  c.begin.clear();
  c.values.clear();
  if (fits) {
    KeepByBucket(near, target, neighbours, mark, found, c);
  } else {
    c.buckets.assign(t.buckets, t.buckets + t.size);
  }
  for (const size_t b : near) mark[b] = 0;
  return c.kept ? &c : nullptr;
}

}  // namespace step_window_internal

using step_window_internal::Chunk;
using step_window_internal::ChunkRef;
using step_window_internal::PhaseColumn;

const StepRecord& WindowView::front() const {
  const Chunk& c = *chunks_.front();
  const uint64_t at = std::max(first_index_, c.first_index);
  return c.records[static_cast<size_t>(at - c.first_index)];
}

const StepRecord& WindowView::back() const {
  const Chunk& c = *chunks_.back();
  return c.records[static_cast<size_t>(completed_ - 1 - c.first_index)];
}

namespace {

// Chunks of up to 1024 steps, about a quarter of the window (at least 16):
// a view makes the window copy at most the chunk or two it writes, and the
// window holds at most one chunk beyond its steps.
size_t ChunkSteps(size_t window) {
  return std::clamp<size_t>(std::bit_ceil(std::max<size_t>(window, 1)) / 4, 16, 1024);
}

}  // namespace

StepWindow::StepWindow(int window, int max_phases)
    : capacity_(static_cast<size_t>(std::max(window, 1))),
      chunk_steps_(ChunkSteps(capacity_)),
      chunk_shift_(std::countr_zero(chunk_steps_)),
      phase_totals_(static_cast<size_t>(std::max(max_phases, 0))) {}

size_t StepWindow::ChunkAt(uint64_t index) const {
  // A power of two: a shift, not a division (this runs for every step).
  return static_cast<size_t>((index - chunks_.front()->first_index) >> chunk_shift_);
}

Chunk* StepWindow::WritableChunk(uint64_t index) {
  if (chunks_.empty() || index < chunks_.front()->first_index) return nullptr;
  const size_t k = ChunkAt(index);
  if (k >= chunks_.size()) return nullptr;
  std::shared_ptr<Chunk>& chunk = chunks_[k];
  // Acquire: a view that let go of the chunk is done reading it.
  if (chunk->readers.load(std::memory_order_acquire) != 0) {
    chunk = std::make_shared<Chunk>(*chunk);
  }
  return chunk.get();
}

void StepWindow::Evict(uint64_t index) {
  const Chunk& c = *chunks_.front();  // the oldest step is in the oldest chunk
  const size_t slot = static_cast<size_t>(index - c.first_index);
  for (size_t id = 0; id < c.columns.size(); ++id) {
    const PhaseColumn* col = c.columns[id].get();
    if (col == nullptr || !col->Has(slot)) continue;
    PhaseTotals& t = phase_totals_[id];
    const uint32_t total = col->total[slot];
    const uint8_t meta = col->meta[slot];
    const uint32_t count = meta >> 3;
    if (total != PhaseColumn::kWide && (meta & 3) != PhaseColumn::kTopWide &&
        count != PhaseColumn::kCountInline && col->device.empty()) {
      // The common case, read straight from the column: a host-only value
      // that fits.
      t.time.Remove(total);
      t.top_ns -= (meta & 3) == PhaseColumn::kTopEqual ? total : 0;
      t.count -= count;
      if ((meta & PhaseColumn::kTopLevelBit) != 0) --t.top_level_steps;
      continue;
    }
    const PhaseSample p = col->Get(slot);
    t.time.Remove(p.total_ns);
    t.top_ns -= p.top_ns;
    t.count -= p.count;
    if (p.top_level) --t.top_level_steps;
    if (p.device_ns >= 0) {
      t.device.Remove(p.device_ns);
      t.idle_ns -= std::max<int64_t>(0, p.idle_ns);
    }
  }
}

StepRecord& StepWindow::Append(const StepRecord& step,
                               const std::vector<std::pair<uint16_t, PhaseSample>>& phases) {
  const uint64_t index = completed_;
  if (warmup_left_ > 0) {
    --warmup_left_;
    warmup_record_ = step;
    warmup_record_.index = index;
    warmup_record_.end_ns = std::max(step.end_ns, step.begin_ns);
    warmup_record_.top_level_ns =
        std::clamp<int64_t>(step.top_level_ns, 0, warmup_record_.duration_ns());
    ++warmup_.steps;
    warmup_.total_ns += warmup_record_.duration_ns();
    warmup_.max_ns = std::max(warmup_.max_ns, warmup_record_.duration_ns());
    start_ = ++completed_;
    return warmup_record_;
  }
  if (size() == capacity_) Evict(first_index());
  // The oldest chunk goes once every step in it has left the window.
  const uint64_t first_after = index + 1 - std::min<uint64_t>(index + 1, capacity_);
  while (!chunks_.empty() && chunks_.front()->first_index + chunk_steps_ <= first_after) {
    chunks_.pop_front();
  }
  if (chunks_.empty() || index >= chunks_.back()->first_index + chunk_steps_) {
    chunks_.push_back(std::make_shared<Chunk>(index, chunk_steps_));
  }
  Chunk* c = WritableChunk(index);
  const size_t slot = static_cast<size_t>(index - c->first_index);
  // Steps complete in order: the slot is the next one.
  if (slot == c->records.size()) {
    c->records.push_back(step);  // copied in, not built and then assigned
  } else {
    c->records[slot] = step;
  }
  StepRecord& s = c->records[slot];
  s.index = index;
  s.end_ns = std::max(s.end_ns, s.begin_ns);
  s.top_level_ns = std::clamp<int64_t>(s.top_level_ns, 0, s.duration_ns());
  for (const auto& [id, sample] : phases) {
    if (id >= phase_totals_.size()) continue;
    if (c->columns.size() <= id) c->columns.resize(id + 1u);
    std::unique_ptr<PhaseColumn>& col = c->columns[id];
    if (col == nullptr) col = std::make_unique<PhaseColumn>(chunk_steps_);
    col->SetHost(slot, sample);
    PhaseTotals& t = phase_totals_[id];
    t.time.Add(std::max<int64_t>(0, sample.total_ns));
    t.top_ns += sample.top_ns;
    t.count += sample.count;
    if (sample.top_level) ++t.top_level_steps;
  }
  lifetime.Add(s.duration_ns());
  ++completed_;
  return s;
}

void StepWindow::Reset(int warmup_steps) {
  chunks_.clear();  // views hold their own references
  for (PhaseTotals& t : phase_totals_) t = PhaseTotals{};
  lifetime = LogHistogram();
  start_ = completed_;
  warmup_ = WarmupTotals{};
  SetWarmup(warmup_steps);
}

void StepWindow::AddOutside(uint16_t id, int64_t ns) {
  if (id >= phase_totals_.size()) return;
  ++phase_totals_[id].outside_count;
  phase_totals_[id].outside_total_ns += ns;
}

const StepRecord* StepWindow::Find(uint64_t index) const {
  if (index < first_index() || index >= completed_) return nullptr;
  const Chunk& c = *chunks_[ChunkAt(index)];
  return &c.records[static_cast<size_t>(index - c.first_index)];
}

StepRecord* StepWindow::MutableStep(uint64_t index) {
  if (index < first_index() || index >= completed_) return nullptr;
  Chunk* c = WritableChunk(index);
  return &c->records[static_cast<size_t>(index - c->first_index)];
}

StepDevices* StepWindow::MutableDevices(uint64_t index) {
  if (index < first_index() || index >= completed_) return nullptr;
  Chunk* c = WritableChunk(index);
  if (c->devices == nullptr) c->devices = std::make_unique<StepDevices[]>(chunk_steps_);
  return &c->devices[static_cast<size_t>(index - c->first_index)];
}

std::optional<PhaseSample> StepWindow::Sample(uint16_t id, uint64_t index) const {
  if (index < first_index() || index >= completed_) return std::nullopt;
  const Chunk& c = *chunks_[ChunkAt(index)];
  const PhaseColumn* col = c.column(id);
  const size_t slot = static_cast<size_t>(index - c.first_index);
  if (col == nullptr || !col->Has(slot)) return std::nullopt;
  return col->Get(slot);
}

void StepWindow::SetPhaseDevice(uint16_t id, uint64_t index, int64_t device_ns, int64_t idle_ns,
                                int64_t backlog_ns) {
  const std::optional<PhaseSample> before = Sample(id, index);
  if (!before.has_value()) return;
  Chunk* c = WritableChunk(index);
  PhaseTotals& t = phase_totals_[id];
  if (before->device_ns >= 0) {
    t.device.Remove(before->device_ns);
    t.idle_ns -= std::max<int64_t>(0, before->idle_ns);
  }
  c->columns[id]->SetDevice(static_cast<size_t>(index - c->first_index), device_ns, idle_ns,
                            backlog_ns);
  if (device_ns >= 0) {
    t.device.Add(device_ns);
    t.idle_ns += std::max<int64_t>(0, idle_ns);
  }
}

TraceStep* StepWindow::FindTrace(uint64_t index) {
  for (size_t i = trace.size(); i-- > 0;) {
    if (trace[i].index == index) return &trace[i];
    if (trace[i].index < index) break;
  }
  return nullptr;
}

WindowView StepWindow::Snapshot(bool with_phase_totals) const {
  WindowView v;
  v.first_index_ = first_index();
  v.completed_ = completed_;
  v.start_ = start_;
  v.warmup_ = warmup_;
  v.incomplete_steps_ = incomplete_steps_;
  v.chunks_.reserve(chunks_.size());
  for (const std::shared_ptr<Chunk>& c : chunks_) v.chunks_.emplace_back(c);
  v.lifetime_ = lifetime;
  if (with_phase_totals) v.phase_totals_ = phase_totals_;
  return v;
}

}  // namespace gpuscope::internal
