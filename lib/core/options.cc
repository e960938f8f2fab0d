// Options::Validate(): the ranges every option must be in.

#include "gpuscope/options.h"

#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gpuscope/phase.h"

namespace gpuscope {
namespace {

absl::Status RangeError(const char* field, int64_t value, int64_t lo, int64_t hi) {
  return absl::InvalidArgumentError(absl::StrCat(
      "Options::", field, " = ", value, " is out of range: use a value from ", lo, " to ", hi));
}

}  // namespace

absl::Status Options::Validate() const {
  if (window < 1 || window > kMaxWindow) return RangeError("window", window, 1, kMaxWindow);
  if (max_phases <= kNumBuiltinPhases || max_phases > kMaxPhases) {
    return RangeError("max_phases", max_phases, kNumBuiltinPhases + 1, kMaxPhases);
  }
  if (queue_capacity < 64 || queue_capacity > kMaxQueueCapacity) {
    return RangeError("queue_capacity", queue_capacity, 64, kMaxQueueCapacity);
  }
  if (flush_interval_ms < 1 || flush_interval_ms > 10000) {
    return RangeError("flush_interval_ms", flush_interval_ms, 1, 10000);
  }
  if (telemetry_interval_ms < 0 || telemetry_interval_ms > 60000) {
    return RangeError("telemetry_interval_ms", telemetry_interval_ms, 0, 60000);
  }
  if (trace_steps < 0 || trace_steps > 4096) return RangeError("trace_steps", trace_steps, 0, 4096);
  if (warmup_steps < 0 || warmup_steps > kMaxWarmupSteps) {
    return RangeError("warmup_steps", warmup_steps, 0, kMaxWarmupSteps);
  }
  const struct {
    const char* name;
    double value;
  } flops[] = {{"flops_per_step", flops_per_step},
               {"flops_per_sample", flops_per_sample},
               {"peak_flops", peak_flops}};
  for (const auto& f : flops) {
    if (!std::isfinite(f.value) || f.value < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Options::", f.name, " = ", f.value,
          " is invalid: use a finite number >= 0 (FLOPs, or FLOP/s for peak_flops; 0: not given)"));
    }
  }
  if (flops_per_step > 0 && flops_per_sample > 0) {
    return absl::InvalidArgumentError(
        "Options::flops_per_step and flops_per_sample are both set: give one (per optimizer step, "
        "or per sample with each step's sample count)");
  }
  if (rank_interval_s != 0 &&
      !(std::isfinite(rank_interval_s) && rank_interval_s >= kMinRankIntervalS)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Options::rank_interval_s = ", rank_interval_s,
                     " is invalid: use a finite number of seconds, at least ", kMinRankIntervalS,
                     ", or 0 to exchange rank records only when asked (sync_ranks())"));
  }
  if (!std::isfinite(rank_timeout_s) || rank_timeout_s < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Options::rank_timeout_s = ", rank_timeout_s,
                     " is invalid: use a finite number of seconds above 0, or 0 for a third of "
                     "rank_interval_s (at most 10 s)"));
  }
  if (std::isnan(stall_after_s) || stall_after_s < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Options::stall_after_s = ", stall_after_s,
                     " is invalid: use a number of seconds above 0, 0 for a limit from the "
                     "job's own step times, or infinity for none"));
  }
  if (static_cast<int>(peak_precision) > static_cast<int>(Precision::kFp8)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Options::peak_precision = ", static_cast<int>(peak_precision),
                     " is not a Precision: use kBf16, kFp16, kTf32, kFp32 or kFp8"));
  }
  return absl::OkStatus();
}

}  // namespace gpuscope
