// File: export/summary_fields.h
// -----------------------------------------------------------------------------
//
// The one declaration of a Summary's fields, private to the library and the
// Python bindings. Each struct's fields are listed once, in a *Fields()
// function that a visitor walks: JsonOut (summary.cc) writes them, JsonIn
// reads them back, and the bindings define a Python attribute per field from
// the same walk. Adding a field to the encoding (and to Python) is one line
// here. Fields added after schema version 1 was first written are kOptional:
// readers accept documents without them.
//
// Every number carries the range it must lie in, and the reader refuses a
// file with a value outside it (a p95 of -1 s, a share of 50, GPU idle of
// 200 %): numbers that no session can produce must not reach a comparison or
// a diagnosis. Relations between fields are checked after reading
// (CheckConsistency() in summary.cc).
//
// A visitor V provides, for a field named `key` (its JSON name):
//
//   Int(key, int64_t or int, Range, bool required = true)
//   Number(key, double, Range, bool required = true)
//   Bool(key, bool, bool required = true)
//   String(key, std::string)          PhaseName(key, std::string)
//   Source(key, gpuscope::Source)
//   Optional(key, std::optional<double>, Range, bool required = true)
//   NanNumber(key, double, Range, bool required = true)
//                                      (NaN: not available, written as null)
//   Strings(key, std::vector<std::string>)
//   Ints(key, std::vector<int>, Range)
//   NumberMap(key, std::map<std::string, double>, Range)
//   Object(key, T, fields, bool required = true)
//   OptionalObject(key, std::optional<T>, fields)   (optional on read)
//   Array(key, std::vector<T>, fields, bool required = true)
//
// where `fields(sub_visitor, value)` walks a nested struct. Fields are passed
// by reference into the struct being walked (const for writers), so a
// visitor may read, write or locate them.

#ifndef GPUSCOPE_LIB_EXPORT_SUMMARY_FIELDS_H_
#define GPUSCOPE_LIB_EXPORT_SUMMARY_FIELDS_H_

#include <string>
#include <string_view>
#include <type_traits>

#include "absl/status/statusor.h"
#include "base/json.h"
#include "gpuscope/summary.h"

namespace gpuscope::internal {

inline constexpr bool kOptional = false;

struct Range {
  double lo;
  double hi;

  bool operator==(const Range&) const = default;
};
inline constexpr double kHuge = 1e15;              // beyond any count or size gpuscope writes
inline constexpr Range kCount{0, kHuge};           // counts and integers >= 0
inline constexpr Range kSeconds{0, 1e9};           // durations: 0 .. ~30 years
inline constexpr Range kSignedSeconds{-1e9, 1e9};  // lags, which may be negative
inline constexpr Range kUnixSeconds{0, 1e11};      // wall-clock stamps
inline constexpr Range kFraction{0, 1 + 1e-9};     // shares, ratios of a whole
inline constexpr Range kPercent{0, 100 + 1e-6};
inline constexpr Range kRate{0, kHuge};    // per second, per step, bytes
inline constexpr Range kRatio{0, 100};     // clocks over their maximum
inline constexpr Range kState{-1, kHuge};  // NVML state, -1: not available
inline constexpr Range kCelsius{-273.15, 1000};
inline constexpr Range kFlops{0, 1e24};             // FLOP/s (kHuge is below an FP8 peak)
inline constexpr Range kAnyInteger{-kHuge, kHuge};  // checked by the caller

template <typename V, typename Q>
void QuantilesFields(V& v, Q& q) {
  v.Int("count", q.count, kCount);
  v.Number("mean", q.mean, kSeconds);
  v.Number("stddev", q.stddev, kSeconds);
  v.Number("min", q.min, kSeconds);
  v.Number("max", q.max, kSeconds);
  v.Number("p50", q.p50, kSeconds);
  v.Number("p90", q.p90, kSeconds);
  v.Number("p95", q.p95, kSeconds);
  v.Number("p99", q.p99, kSeconds);
}

template <typename V, typename M>
void MisuseFields(V& v, M& m) {
  v.Int("out_of_order_end", m.out_of_order_end, kCount);
  v.Int("stale_end", m.stale_end, kCount);
  v.Int("nested_step", m.nested_step, kCount);
  v.Int("wrong_thread", m.wrong_thread, kCount);
  v.Int("too_deep", m.too_deep, kCount);
  v.Int("invalid_phase", m.invalid_phase, kCount);
  v.Int("dropped_records", m.dropped_records, kCount);
  v.Int("incomplete_steps", m.incomplete_steps, kCount);
}

template <typename V, typename O>
void OverheadFields(V& v, O& o) {
  v.Optional("scope_ns", o.scope_ns, kRate);
  v.Number("records_per_step", o.records_per_step, kRate);
  v.Number("worker_cpu_s", o.worker_cpu_s, kSeconds);
  v.Number("worker_cpu_share", o.worker_cpu_share, kFraction);
  v.Int("activity_buffers", o.activity_buffers, kCount);
}

template <typename V, typename W>
void WarmupFields(V& v, W& w) {
  v.Int("steps", w.steps, kCount);
  v.Number("total", w.total, kSeconds);
  v.Number("max", w.max, kSeconds);
}

template <typename V, typename K>
void KernelFields(V& v, K& k) {
  v.String("name", k.name);
  v.String("kernel_class", k.kernel_class);
  v.String("phase", k.phase);
  v.Number("count_per_step", k.count_per_step, kRate);
  v.Number("time_per_step", k.time_per_step, kSeconds);
  v.Number("share", k.share, kFraction);
}

template <typename V, typename P>
void PhaseFields(V& v, P& p) {
  v.PhaseName("name", p.name);
  v.Bool("builtin", p.builtin);
  v.Bool("top_level", p.top_level);
  v.Int("steps", p.steps, kCount);
  v.Int("count", p.count, kCount);
  v.Number("total", p.total, kSeconds);
  v.Number("share", p.share, kFraction);
  v.Number("inclusive_share", p.inclusive_share, kFraction);
  v.Object("time", p.time, [](auto& sub, auto& q) { QuantilesFields(sub, q); });
  v.Int("outside_steps_count", p.outside_steps_count, kCount);
  v.Number("outside_steps_total", p.outside_steps_total, kSeconds);
  v.Object("device", p.device, [](auto& sub, auto& q) { QuantilesFields(sub, q); }, kOptional);
  v.Number("backlog_p50", p.backlog_p50, kSignedSeconds, kOptional);
  v.Array(
      "top_kernels", p.top_kernels, [](auto& sub, auto& k) { KernelFields(sub, k); }, kOptional);
}

template <typename V, typename D>
void DeviceFields(V& v, D& d) {
  v.Int("device", d.device, kCount);
  v.Int("gpu_steps", d.gpu_steps, kCount);
  v.Optional("gpu_idle_pct", d.gpu_idle_pct, kPercent);
}

template <typename V, typename A>
void ActivityFields(V& v, A& a) {
  v.Number("kernels_per_step", a.kernels_per_step, kRate);
  v.Number("kernel_time_p50", a.kernel_time_p50, kSeconds);
  v.Number("h2d_bytes_per_step", a.h2d_bytes_per_step, kRate);
  v.Number("d2h_bytes_per_step", a.d2h_bytes_per_step, kRate);
  v.Number("copies_per_step", a.copies_per_step, kRate);
  v.Number("pageable_copies_per_step", a.pageable_copies_per_step, kRate);
  v.Number("syncs_per_step", a.syncs_per_step, kRate);
  v.Number("sync_time_per_step", a.sync_time_per_step, kSeconds);
  v.Number("host_wait_gaps_per_step", a.host_wait_gaps_per_step, kRate);
  v.Number("host_wait_time_per_step", a.host_wait_time_per_step, kSeconds);
  v.Number("kernel_time_per_step", a.kernel_time_per_step, kSeconds, kOptional);
  v.Number("gemm_time_per_step", a.gemm_time_per_step, kSeconds, kOptional);
  v.Number("fp32_gemm_time_per_step", a.fp32_gemm_time_per_step, kSeconds, kOptional);
  v.Number("collective_time_per_step", a.collective_time_per_step, kSeconds, kOptional);
  v.Number("exposed_collective_time_per_step", a.exposed_collective_time_per_step, kSeconds,
           kOptional);
  v.Number("pageable_h2d_copies_per_step", a.pageable_h2d_copies_per_step, kRate, kOptional);
  v.Optional("device_time_kernel", a.device_time_kernel, kSeconds, kOptional);
  v.Optional("device_time_memcpy", a.device_time_memcpy, kSeconds, kOptional);
  v.Optional("device_time_memset", a.device_time_memset, kSeconds, kOptional);
  v.Optional("device_time_comm", a.device_time_comm, kSeconds, kOptional);
  v.Optional("device_time_idle", a.device_time_idle, kSeconds, kOptional);
  v.Optional("device_share_kernel", a.device_share_kernel, kFraction, kOptional);
  v.Optional("device_share_memcpy", a.device_share_memcpy, kFraction, kOptional);
  v.Optional("device_share_memset", a.device_share_memset, kFraction, kOptional);
  v.Optional("device_share_comm", a.device_share_comm, kFraction, kOptional);
  v.Optional("device_share_idle", a.device_share_idle, kFraction, kOptional);
  v.Optional("sync_idle_share", a.sync_idle_share, kFraction, kOptional);
  v.Int("dropped_records", a.dropped_records, kCount);
}

// Optional numbers (NaN or nullopt) are written as null.
template <typename V, typename G>
void GpuTelemetryFields(V& v, G& g) {
  v.Int("index", g.index, kCount);
  v.NanNumber("utilization_pct", g.utilization_pct, kPercent);
  v.NanNumber("sm_clock_mhz", g.sm_clock_mhz, kRate);
  v.NanNumber("sm_clock_max_mhz", g.sm_clock_max_mhz, kRate);
  v.NanNumber("mem_clock_mhz", g.mem_clock_mhz, kRate);
  v.NanNumber("mem_clock_max_mhz", g.mem_clock_max_mhz, kRate);
  v.NanNumber("power_w", g.power_w, kRate);
  v.NanNumber("power_limit_w", g.power_limit_w, kRate);
  v.NanNumber("temperature_c", g.temperature_c, kCelsius);
  v.NanNumber("memory_used_bytes", g.memory_used_bytes, kRate);
  v.NanNumber("memory_total_bytes", g.memory_total_bytes, kRate);
  v.NanNumber("process_memory_bytes", g.process_memory_bytes, kRate, kOptional);
  v.NanNumber("pcie_rx_bytes_per_s", g.pcie_rx_bytes_per_s, kRate);
  v.NanNumber("pcie_tx_bytes_per_s", g.pcie_tx_bytes_per_s, kRate);
  v.Strings("clocks_event_reasons", g.clocks_event_reasons);
  v.Int("pcie_gen", g.pcie_gen, kState);
  v.Int("pcie_gen_max", g.pcie_gen_max, kState);
  v.Int("pcie_width", g.pcie_width, kState);
  v.Int("pcie_width_max", g.pcie_width_max, kState);
  v.Int("ecc_corrected", g.ecc_corrected, kState);
  v.Int("ecc_uncorrected", g.ecc_uncorrected, kState);
  v.Int("persistence_mode", g.persistence_mode, kState);
  v.Int("compute_mode", g.compute_mode, kState);
  v.Int("mig_mode", g.mig_mode, kState);
}

template <typename V, typename T>
void TelemetryFields(V& v, T& t) {
  v.String("source", t.source);
  v.Int("steps", t.steps, kCount);
  v.Optional("gpu_utilization_pct", t.gpu_utilization_pct, kPercent);
  v.Optional("sm_clock_ratio", t.sm_clock_ratio, kRatio);
  v.Number("throttled_steps", t.throttled_steps, kFraction);
  v.Strings("clocks_event_reasons", t.clocks_event_reasons);
  v.Optional("host_cpu_pct", t.host_cpu_pct, kPercent);
  v.Optional("host_iowait_pct", t.host_iowait_pct, kPercent);
  v.Optional("process_cores", t.process_cores, kRate);
  v.Optional("worker_cores", t.worker_cores, kRate);
  v.Optional("memory_available_bytes", t.memory_available_bytes, kRate);
  v.Optional("memory_pressure_pct", t.memory_pressure_pct, kPercent);
  v.Optional("swap_pages_per_s", t.swap_pages_per_s, kRate);
  v.Optional("load1", t.load1, kRate);
  v.Optional("cpus_available", t.cpus_available, kRate, kOptional);
  v.Optional("throttled_sm_clock_ratio", t.throttled_sm_clock_ratio, kRatio, kOptional);
  v.Optional("child_cores", t.child_cores, kRate, kOptional);
  v.Optional("cpu_wait_share", t.cpu_wait_share, kFraction, kOptional);
  v.Optional("worker_cpu_wait_cores", t.worker_cpu_wait_cores, kRate, kOptional);
  v.Optional("cpu_pressure_pct", t.cpu_pressure_pct, kPercent, kOptional);
  v.Optional("steal_pct", t.steal_pct, kPercent, kOptional);
  v.Optional("cpu_throttled_pct", t.cpu_throttled_pct, kPercent, kOptional);
  v.Array("gpus", t.gpus, [](auto& sub, auto& g) { GpuTelemetryFields(sub, g); });
}

template <typename V, typename G>
void GpuMemoryFields(V& v, G& g) {
  v.Int("device", g.device, kCount);
  v.NanNumber("allocated_bytes", g.allocated_bytes, kRate);
  v.NanNumber("reserved_bytes", g.reserved_bytes, kRate);
  v.NanNumber("peak_allocated_bytes", g.peak_allocated_bytes, kRate);
  v.NanNumber("peak_reserved_bytes", g.peak_reserved_bytes, kRate);
  v.Bool("peak_exact", g.peak_exact);
  v.Int("peak_step", g.peak_step, kState);
  v.String("peak_phase", g.peak_phase);
  v.NanNumber("min_allocated_bytes", g.min_allocated_bytes, kRate);
  v.NanNumber("fragmentation", g.fragmentation, kFraction);
  v.Int("alloc_retries", g.alloc_retries, kCount);
  v.Int("retry_steps", g.retry_steps, kCount);
  v.Number("retry_time", g.retry_time, kSeconds);
  v.Int("ooms", g.ooms, kCount);
  v.NanNumber("total_bytes", g.total_bytes, kRate);
  v.NanNumber("process_used_bytes", g.process_used_bytes, kRate);
}

template <typename V, typename O>
void OomFields(V& v, O& o) {
  v.Int("step", o.step, kState);
  v.String("phase", o.phase);
  v.String("phase_path", o.phase_path);
  v.Int("device", o.device, kState);
  v.NanNumber("requested_bytes", o.requested_bytes, kRate);
  v.NanNumber("allocated_bytes", o.allocated_bytes, kRate);
  v.NanNumber("reserved_bytes", o.reserved_bytes, kRate);
  v.NanNumber("total_bytes", o.total_bytes, kRate);
  v.String("message", o.message);
  v.String("snapshot", o.snapshot);
}

template <typename V, typename S>
void StallFields(V& v, S& s) {
  v.Int("step", s.step, kState);
  v.String("phase", s.phase);
  v.String("phase_path", s.phase_path);
  v.Number("began", s.began, kUnixSeconds);
  v.Number("seconds", s.seconds, kSeconds);
  v.Number("phase_seconds", s.phase_seconds, kSeconds);
  v.Number("limit", s.limit, kSeconds);
  v.Bool("ongoing", s.ongoing);
  v.NanNumber("last_gpu_work_seconds", s.last_gpu_work_seconds, kSeconds);
  v.NanNumber("gpu_utilization_pct", s.gpu_utilization_pct, kPercent);
  v.String("gpu", s.gpu);
}

template <typename V, typename M>
void MemoryFields(V& v, M& m) {
  v.String("source", m.source);
  v.Int("samples", m.samples, kCount);
  v.Int("steps", m.steps, kCount);
  v.Array("gpus", m.gpus, [](auto& sub, auto& g) { GpuMemoryFields(sub, g); });
  v.NumberMap("peak_by_phase", m.peak_by_phase, kRate);
  v.OptionalObject("oom", m.oom, [](auto& sub, auto& o) { OomFields(sub, o); });
}

template <typename V, typename I>
void RankIdentityFields(V& v, I& r) {
  v.Int("rank", r.rank, kCount);
  v.Int("local_rank", r.local_rank, kCount);
  v.Int("world_size", r.world_size, kCount);
  v.String("host", r.host);
}

template <typename V, typename P>
void RankPhaseFields(V& v, P& p) {
  v.PhaseName("name", p.name);
  v.Number("host_p50", p.host_p50, kSeconds);
  v.NanNumber("device_p50", p.device_p50, kSeconds);
  v.Number("share", p.share, kFraction);
}

template <typename V, typename R>
void RankRecordFields(V& v, R& r) {
  v.Int("rank", r.rank, kCount);
  v.Int("local_rank", r.local_rank, kCount);
  v.Int("world_size", r.world_size, kCount);
  v.String("host", r.host);
  v.Int("steps", r.steps, kCount);
  v.Number("step_p50", r.step_p50, kSeconds);
  v.Number("step_p95", r.step_p95, kSeconds);
  v.NanNumber("gpu_idle_pct", r.gpu_idle_pct, kPercent);
  v.NanNumber("samples_per_second", r.samples_per_second, kRate);
  v.NanNumber("tokens_per_second", r.tokens_per_second, kRate);
  v.NanNumber("sm_clock_ratio", r.sm_clock_ratio, kRatio);
  v.NanNumber("throttled_steps", r.throttled_steps, kFraction);
  v.NanNumber("host_cpu_pct", r.host_cpu_pct, kPercent);
  v.NanNumber("compute_time", r.compute_time, kSeconds);
  v.NanNumber("memory_peak_share", r.memory_peak_share, kRatio, kOptional);
  v.NanNumber("memory_alloc_retries", r.memory_alloc_retries, kRate, kOptional);
  v.Array("phases", r.phases, [](auto& sub, auto& p) { RankPhaseFields(sub, p); });
}

template <typename V, typename T>
void StragglerFields(V& v, T& s) {
  v.Int("rank", s.rank, kCount);
  v.String("host", s.host);
  v.String("phase", s.phase);
  v.Bool("device", s.device);
  v.Number("score", s.score, kFraction);
  v.Number("slowdown", s.slowdown, kRate);
  v.Number("excess", s.excess, kSeconds);
  v.Number("others_wait_share", s.others_wait_share, kRate);
}

template <typename V, typename R>
void RanksFields(V& v, R& r) {
  v.Array("ranks", r.ranks, [](auto& sub, auto& x) { RankRecordFields(sub, x); });
  v.Ints("missing", r.missing, kCount);
  v.Array("stragglers", r.stragglers, [](auto& sub, auto& x) { StragglerFields(sub, x); });
  v.Int("exchanges", r.exchanges, kCount);
  v.Number("age", r.age, kSeconds);
  v.Int("recent_exchanges", r.recent_exchanges, kCount);
  v.Int("straggler_exchanges", r.straggler_exchanges, kCount);
}

template <typename V, typename P>
void PeriodicSpikeFields(V& v, P& p) {
  v.PhaseName("phase", p.phase);
  v.Int("period_steps", p.period_steps, kCount);
  v.Int("occurrences", p.occurrences, kCount);
  v.Int("last_step", p.last_step, kCount);
  v.Number("excess", p.excess, kSeconds);
  v.Number("share", p.share, kFraction);
}

template <typename V, typename E>
void EfficiencyFields(V& v, E& e) {
  v.Optional("flops_per_second", e.flops_per_second, kFlops);
  v.Optional("peak_flops", e.peak_flops, kFlops);
  v.String("peak_source", e.peak_source);
  v.String("precision", e.precision);
  v.Optional("mfu", e.mfu, kRate);
  v.String("reason", e.reason);
}

template <typename V, typename S>
void SummaryFields(V& v, S& s) {
  v.String("version", s.version);
  v.Source("source", s.source);
  v.String("source_reason", s.source_reason);
  v.Bool("simulated", s.simulated, kOptional);
  v.Int("window", s.window, kCount);
  v.Int("steps", s.steps, kCount);
  v.Int("total_steps", s.total_steps, kCount);
  v.Int("pending_steps", s.pending_steps, kCount);
  v.Number("window_time", s.window_time, kSeconds);
  v.Object("step_time", s.step_time, [](auto& sub, auto& q) { QuantilesFields(sub, q); });
  v.Object("lifetime_step_time", s.lifetime_step_time,
           [](auto& sub, auto& q) { QuantilesFields(sub, q); });
  // Added after version 2: a file without it had no warm-up steps.
  v.Object("warmup", s.warmup, [](auto& sub, auto& w) { WarmupFields(sub, w); }, kOptional);
  v.Int("gpu_steps", s.gpu_steps, kCount, kOptional);
  v.Object(
      "device_step_time", s.device_step_time, [](auto& sub, auto& q) { QuantilesFields(sub, q); },
      kOptional);
  v.Number("gpu_clock_error", s.gpu_clock_error, kSeconds, kOptional);
  v.Array("phases", s.phases, [](auto& sub, auto& p) { PhaseFields(sub, p); });
  v.Optional("samples_per_second", s.samples_per_second, kRate);
  v.Optional("tokens_per_second", s.tokens_per_second, kRate);
  // Added after version 2 (optional on read, like every OptionalObject).
  v.OptionalObject("efficiency", s.efficiency,
                   [](auto& sub, auto& e) { EfficiencyFields(sub, e); });
  v.Optional("gpu_idle_pct", s.gpu_idle_pct, kPercent);
  v.NumberMap("idle_by_cause", s.idle_by_cause, kPercent);
  v.Array("devices", s.devices, [](auto& sub, auto& d) { DeviceFields(sub, d); }, kOptional);
  v.OptionalObject("activity", s.activity, [](auto& sub, auto& a) { ActivityFields(sub, a); });
  v.Array(
      "top_kernels", s.top_kernels, [](auto& sub, auto& k) { KernelFields(sub, k); }, kOptional);
  v.OptionalObject("telemetry", s.telemetry, [](auto& sub, auto& t) { TelemetryFields(sub, t); });
  v.OptionalObject("memory", s.memory, [](auto& sub, auto& m) { MemoryFields(sub, m); });
  v.Object("misuse", s.misuse, [](auto& sub, auto& m) { MisuseFields(sub, m); });
  v.Object("overhead", s.overhead, [](auto& sub, auto& o) { OverheadFields(sub, o); }, kOptional);
  v.Array(
      "periodic_spikes", s.periodic_spikes, [](auto& sub, auto& p) { PeriodicSpikeFields(sub, p); },
      kOptional);
  v.OptionalObject("rank", s.rank, [](auto& sub, auto& r) { RankIdentityFields(sub, r); });
  v.OptionalObject("ranks", s.ranks, [](auto& sub, auto& r) { RanksFields(sub, r); });
  v.Array("stalls", s.stalls, [](auto& sub, auto& st) { StallFields(sub, st); }, kOptional);
  v.Number("step_in_progress", s.step_in_progress, kSeconds, kOptional);
}

// FieldsOf()
//
// The *Fields() function above of a struct, chosen by its type (const or
// not), for code generic over a summary's parts.
template <typename T, typename Struct>
concept Is = std::is_same_v<std::remove_const_t<T>, Struct>;

template <typename V, Is<Quantiles> T>
void FieldsOf(V& v, T& x) {
  QuantilesFields(v, x);
}
template <typename V, Is<MisuseCounts> T>
void FieldsOf(V& v, T& x) {
  MisuseFields(v, x);
}
template <typename V, Is<OverheadStats> T>
void FieldsOf(V& v, T& x) {
  OverheadFields(v, x);
}

template <typename V, Is<WarmupStats> T>
void FieldsOf(V& v, T& x) {
  WarmupFields(v, x);
}
template <typename V, Is<KernelStats> T>
void FieldsOf(V& v, T& x) {
  KernelFields(v, x);
}
template <typename V, Is<PhaseStats> T>
void FieldsOf(V& v, T& x) {
  PhaseFields(v, x);
}
template <typename V, Is<EfficiencyStats> T>
void FieldsOf(V& v, T& x) {
  EfficiencyFields(v, x);
}
template <typename V, Is<DeviceStats> T>
void FieldsOf(V& v, T& x) {
  DeviceFields(v, x);
}
template <typename V, Is<ActivityStats> T>
void FieldsOf(V& v, T& x) {
  ActivityFields(v, x);
}
template <typename V, Is<GpuTelemetry> T>
void FieldsOf(V& v, T& x) {
  GpuTelemetryFields(v, x);
}
template <typename V, Is<TelemetryStats> T>
void FieldsOf(V& v, T& x) {
  TelemetryFields(v, x);
}
template <typename V, Is<GpuMemory> T>
void FieldsOf(V& v, T& x) {
  GpuMemoryFields(v, x);
}
template <typename V, Is<OomEvent> T>
void FieldsOf(V& v, T& x) {
  OomFields(v, x);
}
template <typename V, Is<Stall> T>
void FieldsOf(V& v, T& x) {
  StallFields(v, x);
}
template <typename V, Is<MemoryStats> T>
void FieldsOf(V& v, T& x) {
  MemoryFields(v, x);
}
template <typename V, Is<PeriodicSpike> T>
void FieldsOf(V& v, T& x) {
  PeriodicSpikeFields(v, x);
}
template <typename V, Is<RankIdentity> T>
void FieldsOf(V& v, T& x) {
  RankIdentityFields(v, x);
}
template <typename V, Is<RankPhase> T>
void FieldsOf(V& v, T& x) {
  RankPhaseFields(v, x);
}
template <typename V, Is<RankRecord> T>
void FieldsOf(V& v, T& x) {
  RankRecordFields(v, x);
}
template <typename V, Is<Straggler> T>
void FieldsOf(V& v, T& x) {
  StragglerFields(v, x);
}
template <typename V, Is<RanksStats> T>
void FieldsOf(V& v, T& x) {
  RanksFields(v, x);
}
template <typename V, Is<Summary> T>
void FieldsOf(V& v, T& x) {
  SummaryFields(v, x);
}

// PartToJson() / PartFromJson()
//
// One part of a summary (Quantiles, PhaseStats, DeviceStats, ActivityStats,
// GpuTelemetry, TelemetryStats, PeriodicSpike, ...) as a JSON object and back, written and
// read as inside a summary (each field checked against its range; relations
// between fields are the whole summary's to check). What pickling the
// Python views uses.
template <typename T>
std::string PartToJson(const T& part);
template <typename T>
absl::StatusOr<T> PartFromJson(std::string_view json);

// SummaryFromJsonValue()
//
// SummaryFromJson() for a document already parsed (or built from data that
// came from elsewhere, such as a Python dict): the same checks and errors.
absl::StatusOr<Summary> SummaryFromJsonValue(const JsonValue& doc);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_EXPORT_SUMMARY_FIELDS_H_
