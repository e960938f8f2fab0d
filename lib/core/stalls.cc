// Stall limits and the stall watch (core/stalls.h).

#include "core/stalls.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpuscope::internal {

double StepStallLimit(const StallHistory& history, double stall_after_s) {
  if (std::isinf(stall_after_s)) return std::numeric_limits<double>::infinity();
  if (history.warming_up || history.measured_steps < static_cast<uint64_t>(kStallHistorySteps)) {
    return std::max(kStallFirstStepsS, stall_after_s);
  }
  if (stall_after_s > 0) return stall_after_s;
  return std::max(
      {kStallFloorS, kStallP99Factor * history.step_p99_s, kStallMaxFactor * history.step_max_s});
}

double OutsideStallLimit(double longest_earlier_s, double stall_after_s) {
  if (std::isinf(stall_after_s)) return std::numeric_limits<double>::infinity();
  const double base = stall_after_s > 0 ? stall_after_s : kStallFloorS;
  return std::max(kStallOutsideFactor * base, kStallOutsideHistoryFactor * longest_earlier_s);
}

namespace {

double Seconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

}  // namespace

std::string StallDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (seconds < 60) return absl::StrFormat("%.1f s", seconds);
  const auto whole = static_cast<int64_t>(seconds);
  if (whole < 3600) return absl::StrFormat("%d min %02d s", whole / 60, whole % 60);
  return absl::StrFormat("%d h %02d min", whole / 3600, (whole % 3600) / 60);
}

std::string DescribeStall(const Stall& s) {
  std::string out = s.step >= 0
                        ? absl::StrCat("step ", s.step)
                        : std::string("phase `") + s.phase_path.substr(0, s.phase_path.find('/')) +
                              "` (outside steps)";
  absl::StrAppend(&out, s.ongoing ? " has been open " : " was open ", StallDuration(s.seconds),
                  " (its stall limit: ", StallDuration(s.limit), ")");
  if (!s.phase.empty() && (s.step >= 0 || s.phase_path.find('/') != std::string::npos)) {
    absl::StrAppend(&out, ", in ", s.phase_path, s.ongoing ? " for " : ", which had been open ",
                    StallDuration(s.phase_seconds));
  } else if (s.step >= 0) {
    absl::StrAppend(&out, ", outside any phase");
  }
  if (!s.gpu.empty()) absl::StrAppend(&out, "; ", s.gpu);
  return out;
}

std::optional<Stall> StallWatch::Begin(const OpenScope& open, int64_t now_ns, double limit_s,
                                       double unix_now_s, const PhaseTable& phases,
                                       StallGpuState gpu) {
  Stall s;
  s.step = open.is_step ? static_cast<int64_t>(open.step_seq) - 1 : -1;
  for (const uint16_t id : open.path) {
    if (!s.phase_path.empty()) s.phase_path += '/';
    s.phase = std::string(phases.Name(id));
    s.phase_path += s.phase;
  }
  s.seconds = Seconds(now_ns - open.begin_ns);
  s.began = unix_now_s - s.seconds;
  s.phase_seconds = Seconds(now_ns - open.innermost_begin_ns);
  s.limit = limit_s;
  s.ongoing = true;
  s.last_gpu_work_seconds = gpu.idle_seconds;
  s.gpu_utilization_pct = gpu.utilization_pct;
  s.gpu = std::move(gpu.words);
  current_ = KeyOf(open);
  current_begin_ns_ = open.begin_ns;
  current_stall_ = s;
  return s;
}

void StallWatch::Update(const OpenScope& open, int64_t now_ns) {
  // Both clocks run on: a message written from a later look reads alike.
  const double seconds = Seconds(now_ns - open.begin_ns);
  current_stall_->phase_seconds += seconds - current_stall_->seconds;
  current_stall_->seconds = seconds;
}

void StallWatch::Finish(const std::optional<OpenScope>& open, int64_t now_ns) {
  if (!current_.has_value()) return;
  if (open.has_value() && KeyOf(*open) == *current_) return;
  // Ended between the last look and this one: at most now; its record, when
  // it comes, says exactly (Ended()).
  Stall s = std::move(*current_stall_);
  s.seconds = std::max(s.seconds, Seconds(now_ns - current_begin_ns_));
  s.ongoing = false;
  done_.emplace_back(*current_, std::move(s));
  while (done_.size() > static_cast<size_t>(kMaxStalls)) done_.pop_front();
  awaiting_ = current_;
  current_.reset();
  current_stall_.reset();
}

void StallWatch::Ended(bool is_step, uint64_t step_seq, uint16_t phase_id, int64_t begin_raw,
                       int64_t begin_ns, int64_t end_ns) {
  const Key key{is_step, step_seq, is_step ? uint16_t{0} : phase_id, begin_raw};
  const double seconds = Seconds(end_ns - begin_ns);
  if (current_.has_value() && *current_ == key) {
    Stall s = std::move(*current_stall_);
    s.seconds = seconds;
    s.ongoing = false;
    done_.emplace_back(key, std::move(s));
    while (done_.size() > static_cast<size_t>(kMaxStalls)) done_.pop_front();
    current_.reset();
    current_stall_.reset();
    return;
  }
  if (!awaiting_.has_value() || !(*awaiting_ == key)) return;
  awaiting_.reset();
  for (auto it = done_.rbegin(); it != done_.rend(); ++it) {
    if (it->first == key) {
      it->second.seconds = seconds;
      return;
    }
  }
}

std::vector<Stall> StallWatch::All() const {
  std::vector<Stall> out;
  const size_t keep = current_stall_.has_value() ? static_cast<size_t>(kMaxStalls) - 1
                                                 : static_cast<size_t>(kMaxStalls);
  const size_t skip = done_.size() > keep ? done_.size() - keep : 0;
  out.reserve(done_.size() - skip + 1);
  for (size_t i = skip; i < done_.size(); ++i) out.push_back(done_[i].second);
  if (current_stall_.has_value()) out.push_back(*current_stall_);
  return out;
}

}  // namespace gpuscope::internal
