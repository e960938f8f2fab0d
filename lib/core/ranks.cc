#include "gpuscope/ranks.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/phase_table.h"
#include "gpuscope/phase.h"

namespace gpuscope {

namespace {

constexpr char kMagic[4] = {'G', 'S', 'R', 'K'};
constexpr uint16_t kVersion = 3;                        // 2: compute_time; 3: memory
constexpr size_t kHostBytes = 64;                       // NUL-padded; 63 kept
constexpr size_t kNameBytes = kMaxPhaseNameLength + 1;  // NUL-padded; a whole phase name
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A string cut to `max` bytes without splitting a UTF-8 sequence.
std::string Cut(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return std::string(s.substr(0, n));
}

class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}
  void Bytes(const void* p, size_t n) { out_->append(static_cast<const char*>(p), n); }
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
  void U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
  void U16(uint16_t v) {
    out_->push_back(static_cast<char>(v & 0xFF));
    out_->push_back(static_cast<char>(v >> 8));
  }
  void I32(int32_t v) { U32(static_cast<uint32_t>(v)); }
  void F64(double v) { U64(std::bit_cast<uint64_t>(v)); }
  void Padded(std::string_view s, size_t width) {  // s.size() < width
    out_->append(s);
    out_->append(width - s.size(), '\0');
  }

 private:
  std::string* out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  uint64_t U64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(Byte()) << (8 * i);
    return v;
  }
  uint32_t U32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(Byte()) << (8 * i);
    return v;
  }
  uint16_t U16() {
    const uint16_t lo = Byte();
    return static_cast<uint16_t>(lo | (Byte() << 8));
  }
  int32_t I32() { return static_cast<int32_t>(U32()); }
  double F64() { return std::bit_cast<double>(U64()); }
  // A NUL-padded field: the bytes before the first NUL, or nullopt when it
  // has none (not a record this code wrote).
  std::optional<std::string> Padded(size_t width) {
    const std::string_view field = in_.substr(at_, width);
    at_ += width;
    const size_t end = field.find('\0');
    if (end == std::string_view::npos) return std::nullopt;
    return std::string(field.substr(0, end));
  }
  std::string_view Take(size_t n) {
    const std::string_view v = in_.substr(at_, n);
    at_ += n;
    return v;
  }

 private:
  uint8_t Byte() { return static_cast<uint8_t>(in_[at_++]); }
  std::string_view in_;
  size_t at_ = 0;
};

bool SameNumber(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

double Or(const std::optional<double>& v) { return v.has_value() ? *v : kNaN; }

std::string ThisHost() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

absl::Status Invalid(std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("not a gpuscope rank record: ", std::string(what),
                   ". Records must come from EncodeRankRecord() of this gpuscope version."));
}

// The ranges a summary's JSON reader holds the same numbers to (so that a
// summary carrying a peer's record always reads back): a time is 0 to 1e9
// seconds, a percentage 0 to 100, a share 0 to 1, a rate 0 to 1e15, a clock
// ratio 0 to 100.
bool Within(double v, double hi) { return v >= 0 && v <= hi; }  // false for NaN
bool GoodTime(double v) { return Within(v, 1e9); }
// An optional number: NaN (unknown) or within its range.
bool GoodOptional(double v, double hi) { return std::isnan(v) || Within(v, hi); }

// The median of `sorted` (ascending, n >= 2) without its element at `skip`.
double MedianWithout(const std::vector<double>& sorted, size_t skip) {
  const size_t m = sorted.size() - 1;
  const auto at = [&](size_t i) { return sorted[i < skip ? i : i + 1]; };
  return m % 2 == 1 ? at(m / 2) : 0.5 * (at(m / 2 - 1) + at(m / 2));
}

}  // namespace

bool RankPhase::operator==(const RankPhase& o) const {
  return name == o.name && SameNumber(host_p50, o.host_p50) &&
         SameNumber(device_p50, o.device_p50) && SameNumber(share, o.share);
}

bool RankRecord::operator==(const RankRecord& o) const {
  return rank == o.rank && local_rank == o.local_rank && world_size == o.world_size &&
         host == o.host && steps == o.steps && SameNumber(step_p50, o.step_p50) &&
         SameNumber(step_p95, o.step_p95) && SameNumber(gpu_idle_pct, o.gpu_idle_pct) &&
         SameNumber(samples_per_second, o.samples_per_second) &&
         SameNumber(tokens_per_second, o.tokens_per_second) &&
         SameNumber(sm_clock_ratio, o.sm_clock_ratio) &&
         SameNumber(throttled_steps, o.throttled_steps) &&
         SameNumber(host_cpu_pct, o.host_cpu_pct) && SameNumber(compute_time, o.compute_time) &&
         SameNumber(memory_peak_share, o.memory_peak_share) &&
         SameNumber(memory_alloc_retries, o.memory_alloc_retries) && phases == o.phases;
}

RankRecord RankRecordOf(const Summary& summary, const RankIdentity& identity) {
  RankRecord r;
  r.rank = identity.rank;
  r.local_rank = identity.local_rank;
  r.world_size = identity.world_size;
  r.host = Cut(identity.host.empty() ? ThisHost() : identity.host, kHostBytes - 1);
  r.steps = summary.steps;
  r.step_p50 = summary.step_time.p50;
  r.step_p95 = summary.step_time.p95;
  r.gpu_idle_pct = Or(summary.gpu_idle_pct);
  r.samples_per_second = Or(summary.samples_per_second);
  r.tokens_per_second = Or(summary.tokens_per_second);
  if (summary.telemetry.has_value()) {
    r.sm_clock_ratio = Or(summary.telemetry->sm_clock_ratio);
    r.throttled_steps = summary.telemetry->throttled_steps;
    r.host_cpu_pct = Or(summary.telemetry->host_cpu_pct);
  }
  if (summary.activity.has_value() && summary.gpu_steps > 0) {
    r.compute_time = std::max(
        0.0, summary.activity->kernel_time_per_step - summary.activity->collective_time_per_step);
  }
  if (summary.memory.has_value()) {
    double retries = 0;
    for (const GpuMemory& g : summary.memory->gpus) {
      retries += static_cast<double>(g.alloc_retries);
      // What the process held at its peak (NVML's count where it is the
      // larger: the CUDA context too) over the GPU's memory.
      const double used =
          std::isnan(g.peak_reserved_bytes) || g.process_used_bytes > g.peak_reserved_bytes
              ? g.process_used_bytes
              : g.peak_reserved_bytes;
      const double share = used / g.total_bytes;
      if (share >= 0 && std::isfinite(share) &&
          (std::isnan(r.memory_peak_share) || share > r.memory_peak_share)) {
        r.memory_peak_share = std::min(share, 100.0);
      }
    }
    r.memory_alloc_retries = retries;
  }
  std::vector<const PhaseStats*> phases;
  for (const PhaseStats& p : summary.phases) {
    if (p.name != kOtherPhaseName && p.steps > 0) phases.push_back(&p);
  }
  std::stable_sort(phases.begin(), phases.end(), [](const PhaseStats* a, const PhaseStats* b) {
    return std::max(a->share, a->inclusive_share) > std::max(b->share, b->inclusive_share);
  });
  for (const PhaseStats* p : phases) {
    if (r.phases.size() == static_cast<size_t>(kMaxRankPhases)) break;
    RankPhase rp;
    rp.name = Cut(p->name, kNameBytes - 1);
    rp.host_p50 = p->time.p50;
    if (p->device.count > 0) rp.device_p50 = p->device.p50;
    rp.share = p->share;
    r.phases.push_back(std::move(rp));
  }
  return r;
}

std::string EncodeRankRecord(const RankRecord& record) {
  std::string out;
  out.reserve(kRankRecordBytes);
  Writer w(&out);
  const size_t phases = std::min(record.phases.size(), static_cast<size_t>(kMaxRankPhases));
  w.Bytes(kMagic, sizeof(kMagic));
  w.U16(kVersion);
  w.U16(static_cast<uint16_t>(phases));
  w.I32(record.rank);
  w.I32(record.local_rank);
  w.I32(record.world_size);
  w.Padded(Cut(record.host, kHostBytes - 1), kHostBytes);
  w.U64(static_cast<uint64_t>(record.steps));
  for (double v : {record.step_p50, record.step_p95, record.gpu_idle_pct, record.samples_per_second,
                   record.tokens_per_second, record.sm_clock_ratio, record.throttled_steps,
                   record.host_cpu_pct, record.compute_time, record.memory_peak_share,
                   record.memory_alloc_retries}) {
    w.F64(v);
  }
  for (size_t i = 0; i < phases; ++i) {
    const RankPhase& p = record.phases[i];
    w.Padded(Cut(p.name, kNameBytes - 1), kNameBytes);
    w.F64(p.host_p50);
    w.F64(p.device_p50);
    w.F64(p.share);
  }
  out.resize(kRankRecordBytes, '\0');
  return out;
}

absl::StatusOr<RankRecord> DecodeRankRecord(std::string_view bytes) {
  if (bytes.size() != kRankRecordBytes) {
    return Invalid(absl::StrCat(bytes.size(), " bytes, not ", kRankRecordBytes));
  }
  Reader in(bytes);
  if (in.Take(sizeof(kMagic)) != std::string_view(kMagic, sizeof(kMagic))) {
    return Invalid("wrong magic");
  }
  if (const uint16_t version = in.U16(); version != kVersion) {
    return Invalid(absl::StrCat("version ", version, ", this gpuscope reads ", kVersion));
  }
  const uint16_t phases = in.U16();
  if (phases > kMaxRankPhases) {
    return Invalid(absl::StrCat(phases, " phases, at most ", kMaxRankPhases));
  }
  RankRecord r;
  r.rank = in.I32();
  r.local_rank = in.I32();
  r.world_size = in.I32();
  std::optional<std::string> host = in.Padded(kHostBytes);
  if (!host.has_value()) return Invalid("host name not terminated");
  r.host = std::move(*host);
  r.steps = static_cast<int64_t>(in.U64());
  r.step_p50 = in.F64();
  r.step_p95 = in.F64();
  r.gpu_idle_pct = in.F64();
  r.samples_per_second = in.F64();
  r.tokens_per_second = in.F64();
  r.sm_clock_ratio = in.F64();
  r.throttled_steps = in.F64();
  r.host_cpu_pct = in.F64();
  r.compute_time = in.F64();
  r.memory_peak_share = in.F64();
  r.memory_alloc_retries = in.F64();
  for (uint16_t i = 0; i < phases; ++i) {
    RankPhase p;
    std::optional<std::string> name = in.Padded(kNameBytes);
    if (!name.has_value()) return Invalid("a phase name not terminated");
    p.name = std::move(*name);
    p.host_p50 = in.F64();
    p.device_p50 = in.F64();
    p.share = in.F64();
    r.phases.push_back(std::move(p));
  }
  if (absl::Status valid = ValidateRankRecord(r); !valid.ok()) {
    return Invalid(std::string(valid.message()));
  }
  return r;
}

absl::Status ValidateRankRecord(const RankRecord& r) {
  const auto bad = [](auto&&... what) { return absl::InvalidArgumentError(absl::StrCat(what...)); };
  if (r.world_size < 1 || r.rank < 0 || r.rank >= r.world_size || r.local_rank < 0) {
    return bad("rank ", r.rank, " (local ", r.local_rank, ") of ", r.world_size);
  }
  if (r.host.size() >= kHostBytes || r.host.find('\0') != std::string::npos) {
    return bad("a host name over ", kHostBytes - 1, " bytes or with a NUL");
  }
  if (r.steps < 0) return bad("negative step count");
  if (!GoodTime(r.step_p50) || !GoodTime(r.step_p95)) return bad("step time not a time");
  if (!(std::isnan(r.compute_time) || GoodTime(r.compute_time))) {
    return bad("compute time not a time");
  }
  constexpr double kPercent = 100 + 1e-6, kShare = 1 + 1e-9, kRate = 1e15, kClockRatio = 100;
  if (!GoodOptional(r.gpu_idle_pct, kPercent) || !GoodOptional(r.host_cpu_pct, kPercent) ||
      !GoodOptional(r.samples_per_second, kRate) || !GoodOptional(r.tokens_per_second, kRate) ||
      !GoodOptional(r.sm_clock_ratio, kClockRatio) || !GoodOptional(r.throttled_steps, kShare) ||
      !GoodOptional(r.memory_peak_share, kClockRatio) ||
      !GoodOptional(r.memory_alloc_retries, kRate)) {
    return bad("a number out of its range (a percentage over 100, a share over 1, ...)");
  }
  if (static_cast<double>(r.steps) > kRate) return bad("a step count out of range");
  if (r.phases.size() > static_cast<size_t>(kMaxRankPhases)) {
    return bad(r.phases.size(), " phases, at most ", kMaxRankPhases);
  }
  for (size_t i = 0; i < r.phases.size(); ++i) {
    const RankPhase& p = r.phases[i];
    if (p.name.size() >= kNameBytes || internal::PhaseNameProblem(p.name) != nullptr) {
      return bad("a phase name that is not one a session accepts (empty, over ", kNameBytes - 1,
                 " bytes, control characters, \"other\", ...)");
    }
    for (size_t j = 0; j < i; ++j) {
      if (r.phases[j].name == p.name) return bad("phase \"", p.name, "\" twice");
    }
    if (!GoodTime(p.host_p50) || !(std::isnan(p.device_p50) || GoodTime(p.device_p50)) ||
        !Within(p.share, kShare)) {
      return bad("phase \"", p.name, "\" has a time or share out of range");
    }
  }
  return absl::OkStatus();
}

absl::Status RankOptions::Validate() const {
  if (!(straggler_score > 0 && straggler_score < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("RankOptions::straggler_score is ", straggler_score,
                     "; it must be between 0 and 1 (0.75: a rank 1.33x slower than the others)."));
  }
  if (!(min_excess_share >= 0 && min_excess_share < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("RankOptions::min_excess_share is ", min_excess_share,
                     "; it must be at least 0 and below 1 (a share of step time)."));
  }
  return absl::OkStatus();
}

namespace {

// Per rank index, its median step time; and all of them sorted: the
// others' median step time is what an excess is a share of.
struct RankSteps {
  std::vector<double> steps;
  std::vector<double> sorted;
};

// One valid record per rank in [0, world_size), in `out.ranks` by rank: the
// later one wins. The ranks without one in `out.missing`.
void CollectRanks(std::vector<RankRecord>& records, int world_size, RankComparison& out) {
  std::map<int, RankRecord> by_rank;
  for (RankRecord& r : records) {
    if (r.rank < world_size && ValidateRankRecord(r).ok()) by_rank[r.rank] = std::move(r);
  }
  // (Listed up to 4096: a bound should a world size be corrupt.)
  for (int rank = 0; rank < world_size && out.missing.size() < 4096; ++rank) {
    if (by_rank.count(rank) == 0) out.missing.push_back(rank);
  }
  for (auto& [rank, r] : by_rank) out.ranks.push_back(std::move(r));
}

// Scores one quantity, given as (time, rank index) per rank that has it: a
// rank well slower than the others' median, by enough of a step, is a
// straggler.
void ScoreQuantity(std::string_view name, std::vector<std::pair<double, size_t>> times, bool device,
                   const RankSteps& steps, const RankOptions& opts, RankComparison& out) {
  if (times.size() < 3) return;
  std::sort(times.begin(), times.end());
  std::vector<double> sorted;
  for (const auto& t : times) sorted.push_back(t.first);
  for (size_t k = 0; k < times.size(); ++k) {
    const auto [t, index] = times[k];
    const double others = MedianWithout(sorted, k);
    if (!(t > 0) || others / t >= opts.straggler_score) continue;
    const size_t step_at = static_cast<size_t>(
        std::lower_bound(steps.sorted.begin(), steps.sorted.end(), steps.steps[index]) -
        steps.sorted.begin());
    const double others_step = MedianWithout(steps.sorted, step_at);
    const double excess = t - others;
    if (!(others_step > 0) || excess < opts.min_excess_share * others_step) continue;
    Straggler s;
    s.rank = out.ranks[index].rank;
    s.host = out.ranks[index].host;
    s.phase = std::string(name);
    s.device = device;
    s.score = others / t;
    s.slowdown = t / std::max(others, 1e-12);
    s.excess = excess;
    s.others_wait_share = excess / others_step;
    out.stragglers.push_back(std::move(s));
  }
}

// Scores each phase over the ranks that have it: by device time where
// every one of them has it, else by host time.
void ScorePhases(const RankSteps& steps, const RankOptions& opts, RankComparison& out) {
  struct Entry {
    size_t rank_index;
    const RankPhase* phase;
  };
  std::map<std::string_view, std::vector<Entry>> by_phase;
  for (size_t i = 0; i < out.ranks.size(); ++i) {
    for (const RankPhase& p : out.ranks[i].phases) by_phase[p.name].push_back({i, &p});
  }
  for (const auto& [name, entries] : by_phase) {
    const bool device = std::all_of(entries.begin(), entries.end(), [](const Entry& e) {
      return std::isfinite(e.phase->device_p50) && e.phase->device_p50 > 0;
    });
    std::vector<std::pair<double, size_t>> times;  // (time, rank index)
    for (const Entry& e : entries)
      times.emplace_back(device ? e.phase->device_p50 : e.phase->host_p50, e.rank_index);
    ScoreQuantity(name, std::move(times), device, steps, opts, out);
  }
}

}  // namespace

RankComparison CompareRanks(std::vector<RankRecord> records, int world_size,
                            const RankOptions& options) {
  RankComparison out;
  const RankOptions opts = options.Validate().ok() ? options : RankOptions{};
  CollectRanks(records, world_size, out);
  const size_t n = out.ranks.size();
  if (n < 3) return out;

  // The others' median step time, per rank: what an excess is a share of.
  RankSteps steps;
  for (const RankRecord& r : out.ranks) steps.steps.push_back(r.step_p50);
  steps.sorted = steps.steps;
  std::sort(steps.sorted.begin(), steps.sorted.end());
  ScorePhases(steps, opts, out);
  // No phase explains it (a loop without phases, say), but CUPTI measured
  // every rank's compute kernels: a rank whose GPU does more, or slower,
  // work shows there, since a wait in a collective does not lengthen it.
  const bool all_compute = std::all_of(out.ranks.begin(), out.ranks.end(), [](const RankRecord& r) {
    return std::isfinite(r.compute_time) && r.compute_time > 0;
  });
  if (out.stragglers.empty() && all_compute) {
    std::vector<std::pair<double, size_t>> times;
    for (size_t i = 0; i < n; ++i) times.emplace_back(out.ranks[i].compute_time, i);
    ScoreQuantity(kComputeKernelsName, std::move(times), /*device=*/true, steps, opts, out);
  }
  std::sort(out.stragglers.begin(), out.stragglers.end(),
            [](const Straggler& a, const Straggler& b) {
              return a.excess != b.excess ? a.excess > b.excess
                                          : std::tie(a.rank, a.phase) < std::tie(b.rank, b.phase);
            });
  return out;
}

}  // namespace gpuscope
