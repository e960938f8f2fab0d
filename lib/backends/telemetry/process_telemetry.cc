#include "backends/telemetry/process_telemetry.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "backends/telemetry/system_telemetry.h"
#include "base/fork.h"

namespace gpuscope::internal {
namespace {

// The shared sampler. Leaked on purpose, like the worker: sessions may be
// destroyed during static destruction at exit.
class Sampler {
 public:
  static Sampler& Get() {
    static Sampler* sampler = new Sampler();
    return *sampler;
  }

  // Starts the system telemetry on first use; `*cursor` then points past
  // every sample taken so far.
  absl::Status Attach(int64_t interval_ns, uint64_t* cursor) {
    std::lock_guard<std::mutex> lock(mu_);
    if (system_ == nullptr) {
      system_ = MakeSystemTelemetry();
      status_ = system_->Start();
      description_ = system_->description();
    }
    if (!status_.ok()) return status_;
    intervals_.insert(interval_ns);
    *cursor = next_seq_ - 1;
    return absl::OkStatus();
  }

  void Detach(int64_t interval_ns) {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = intervals_.find(interval_ns); it != intervals_.end()) intervals_.erase(it);
  }

  // The worker only (one caller at a time). The sample itself (NVML may
  // take milliseconds) is taken outside the lock, so that a session being
  // created never waits for it.
  void Collect(int64_t now_ns, uint64_t* cursor, std::vector<TelemetrySample>* out) {
    bool due = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!status_.ok() || intervals_.empty()) return;
      due = ring_.empty() || now_ns >= last_ns_ + *intervals_.begin();
      if (due) last_ns_ = now_ns;
    }
    if (due) {
      Entry entry;
      system_->Sample(now_ns, &entry.sample);
      std::string description =
          system_->description();  // which GPUs may change as the job takes them up
      std::lock_guard<std::mutex> lock(mu_);
      if (ring_.size() == kRingSize) ring_.pop_front();
      entry.seq = next_seq_++;
      ring_.push_back(std::move(entry));
      description_ = std::move(description);
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (const Entry& e : ring_) {
      if (e.seq > *cursor) out->push_back(e.sample);
    }
    *cursor = next_seq_ - 1;
  }

  std::string description() const {
    std::lock_guard<std::mutex> lock(mu_);
    return description_;
  }

  uint64_t samples() const {
    std::lock_guard<std::mutex> lock(mu_);
    return next_seq_ - 1;
  }

 private:
  struct Entry {
    uint64_t seq = 0;
    TelemetrySample sample;
  };
  // About 6 s at the default 10 Hz: a session whose worker pass came later
  // than that loses the oldest samples, never the newest.
  static constexpr size_t kRingSize = 64;

  // Protects everything below but what `system_` points to, which Attach()
  // starts once under it and the worker alone samples after that. Leaf
  // lock: never held while taking another, nor while sampling.
  mutable std::mutex mu_;
  std::unique_ptr<Telemetry> system_;
  absl::Status status_;
  std::string description_;
  std::multiset<int64_t> intervals_;  // of the attached views
  std::deque<Entry> ring_;
  uint64_t next_seq_ = 1;
  int64_t last_ns_ = 0;
};

class ProcessTelemetry final : public Telemetry {
 public:
  explicit ProcessTelemetry(int interval_ms)
      : interval_ns_(int64_t{std::max(interval_ms, 1)} * 1'000'000),
        fork_generation_(g_fork_generation.load(std::memory_order_relaxed)) {}

  ~ProcessTelemetry() override {
    // In a forked child the sampler belongs to the parent's threads.
    if (attached_ && fork_generation_ == g_fork_generation.load(std::memory_order_relaxed)) {
      Sampler::Get().Detach(interval_ns_);
    }
  }

  absl::string_view name() const override { return "system (shared)"; }

  absl::Status Start() override {
    absl::Status status = Sampler::Get().Attach(interval_ns_, &cursor_);
    attached_ = status.ok();
    return status;
  }

  void Sample(int64_t now_ns, TelemetrySample* out) override {
    std::vector<TelemetrySample> samples;
    Sampler::Get().Collect(now_ns, &cursor_, &samples);
    if (!samples.empty()) *out = samples.back();
  }

  void Collect(int64_t now_ns, int64_t /*interval_ns*/,
               std::vector<TelemetrySample>* out) override {
    if (attached_) Sampler::Get().Collect(now_ns, &cursor_, out);
  }

  std::string description() const override { return Sampler::Get().description(); }

 private:
  const int64_t interval_ns_;
  const uint32_t fork_generation_;
  bool attached_ = false;
  uint64_t cursor_ = 0;  // the newest sample handed out (worker only)
};

}  // namespace

std::unique_ptr<Telemetry> MakeProcessTelemetry(int interval_ms) {
  return std::make_unique<ProcessTelemetry>(interval_ms);
}

uint64_t ProcessTelemetrySamples() { return Sampler::Get().samples(); }

}  // namespace gpuscope::internal
