// ToPrometheus(): a summary in the Prometheus text exposition format
// (docs/prometheus.md).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/strings.h"
#include "base/text.h"
#include "gpuscope/diagnose.h"
#include "gpuscope/report.h"

namespace gpuscope {
namespace {

// Label values: backslash, double quote and newline escaped.
std::string LabelValue(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

class Exposition {
 public:
  // Starts a metric family (HELP and TYPE once).
  void Family(std::string_view name, std::string_view type, std::string_view help) {
    absl::StrAppend(&out_, "# HELP gpuscope_", internal::ToAbsl(name), " ", internal::ToAbsl(help),
                    "\n", "# TYPE gpuscope_", internal::ToAbsl(name), " ", internal::ToAbsl(type),
                    "\n");
    name_ = std::string(name);
  }
  // Labels every sample carries (the rank in a distributed job, the job's).
  void AlwaysLabel(std::string name, std::string value) {
    always_.emplace_back(std::move(name), std::move(value));
  }
  void Sample(double value, std::vector<std::pair<std::string, std::string>> labels = {}) {
    // The job's labels first; a sample's own label of the same name wins.
    std::vector<std::pair<std::string, std::string>> all;
    all.reserve(always_.size() + labels.size());
    for (const auto& label : always_) {
      const bool own = std::any_of(labels.begin(), labels.end(),
                                   [&](const auto& l) { return l.first == label.first; });
      if (!own) all.push_back(label);
    }
    all.insert(all.end(), std::make_move_iterator(labels.begin()),
               std::make_move_iterator(labels.end()));
    labels = std::move(all);
    absl::StrAppend(&out_, "gpuscope_", name_);
    if (!labels.empty()) {
      out_ += "{";
      for (size_t i = 0; i < labels.size(); ++i) {
        absl::StrAppend(&out_, i > 0 ? "," : "", labels[i].first, "=\"",
                        LabelValue(labels[i].second), "\"");
      }
      out_ += "}";
    }
    if (std::isnan(value)) {
      out_ += " NaN\n";
    } else {
      absl::StrAppendFormat(&out_, " %.17g\n", value);
    }
  }
  // A family of one sample, when the value is known.
  void Gauge(std::string_view name, std::string_view help, const std::optional<double>& v) {
    if (!v.has_value()) return;
    Family(name, "gauge", help);
    Sample(*v);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
  std::string name_;
  std::vector<std::pair<std::string, std::string>> always_;
};

// gpuscope_info: version, source, simulation, place in the job.
void Info(Exposition& e, const Summary& s) {
  e.Family("info", "gauge",
           "gpuscope's version, the data source in use, whether its GPU is simulated, and in a "
           "distributed job the process's place in it (value 1).");
  std::vector<std::pair<std::string, std::string>> info = {
      {"version", s.version},
      {"source", std::string(SourceName(s.source))},
      {"simulated", s.simulated ? "true" : "false"}};
  if (s.rank.has_value()) {
    info.emplace_back("local_rank", absl::StrCat(s.rank->local_rank));
    info.emplace_back("world_size", absl::StrCat(s.rank->world_size));
    info.emplace_back("host", s.rank->host);
  }
  e.Sample(1, std::move(info));
}

// The name a phase (or idle cause) has in the exposition: its own when it is
// one of the kept ones, else kRestName.
constexpr std::string_view kRestName = "_rest";

class PhaseNames {
 public:
  // The `max_phases` phases with the most time in the window ("other" first).
  PhaseNames(const Summary& s, int max_phases) {
    std::vector<const PhaseStats*> by_time;
    for (const PhaseStats& p : s.phases) by_time.push_back(&p);
    std::stable_sort(by_time.begin(), by_time.end(), [](const PhaseStats* a, const PhaseStats* b) {
      const bool a_other = a->name == kOtherPhaseName, b_other = b->name == kOtherPhaseName;
      if (a_other != b_other) return a_other;
      return a->total > b->total;
    });
    for (size_t i = 0; i < by_time.size() && i < static_cast<size_t>(max_phases); ++i) {
      kept_.push_back(by_time[i]->name);
    }
    for (size_t i = static_cast<size_t>(max_phases); i < by_time.size(); ++i) {
      rest_share_ += by_time[i]->share;
    }
    folded_ = by_time.size() > static_cast<size_t>(max_phases);
  }
  bool Kept(std::string_view name) const {
    return std::find(kept_.begin(), kept_.end(), name) != kept_.end();
  }
  // Whether some phases were summed under kRestName, and their share.
  bool folded() const { return folded_; }
  double rest_share() const { return rest_share_; }

 private:
  std::vector<std::string> kept_;
  double rest_share_ = 0;
  bool folded_ = false;
};

// Step counts, step-time quantiles and the phases' shares and times.
void Steps(Exposition& e, const Summary& s, const PhaseNames& names) {
  e.Family("steps_total", "counter",
           "Steps measured since the session started or was last reset (warm-up steps "
           "excluded).");
  e.Sample(static_cast<double>(s.total_steps));
  e.Family("window_steps", "gauge", "Completed steps in the window the other numbers cover.");
  e.Sample(static_cast<double>(s.steps));
  if (s.steps > 0) {
    e.Family("step_time_seconds", "gauge", "Step time over the window, by quantile (exact).");
    const std::pair<const char*, double> qs[] = {{"0.5", s.step_time.p50},
                                                 {"0.9", s.step_time.p90},
                                                 {"0.95", s.step_time.p95},
                                                 {"0.99", s.step_time.p99}};
    for (const auto& [q, v] : qs) e.Sample(v, {{"quantile", q}});
    e.Gauge("step_time_mean_seconds", "Mean step time over the window.", s.step_time.mean);
    e.Family(
        "phase_share_ratio", "gauge",
        "Share of window step time in each top-level phase (\"other\": outside them); sums to 1.");
    for (const PhaseStats& p : s.phases) {
      if (names.Kept(p.name)) e.Sample(p.share, {{"phase", p.name}});
    }
    if (names.folded()) e.Sample(names.rest_share(), {{"phase", std::string(kRestName)}});
    e.Family("phase_time_seconds", "gauge",
             "Per-step time in each phase (any depth), by quantile.");
    for (const PhaseStats& p : s.phases) {
      if (p.time.count == 0 || !names.Kept(p.name)) continue;
      e.Sample(p.time.p50, {{"phase", p.name}, {"quantile", "0.5"}});
      e.Sample(p.time.p95, {{"phase", p.name}, {"quantile", "0.95"}});
    }
  }
}

// Stalls: how long the open step has been open, and whether a stall is in
// progress, for the fleet's "no step for N minutes" alert.
void Stalls(Exposition& e, const Summary& s) {
  e.Gauge("step_in_progress_seconds", "How long the step open now has been open (0: none is open).",
          s.step_in_progress);
  const bool stalled = !s.stalls.empty() && s.stalls.back().ongoing;
  e.Gauge("stalled",
          "Whether a step (or a phase outside steps) is open past its stall limit now: 1, else 0.",
          stalled ? 1.0 : 0.0);
}

// Throughput and MFU.
void Throughput(Exposition& e, const Summary& s) {
  e.Gauge("throughput_samples_per_second",
          "Samples per second over the window's steps that gave a count.", s.samples_per_second);
  e.Gauge("throughput_tokens_per_second",
          "Tokens per second over the window's steps that gave a count.", s.tokens_per_second);
  if (s.efficiency.has_value()) {
    e.Gauge("model_flops_per_second",
            "Model FLOPs this process executed per second of step time over the window.",
            s.efficiency->flops_per_second);
    e.Gauge("mfu_ratio", "Model FLOPs utilization: model FLOP/s over one GPU's dense peak, 0..1.",
            s.efficiency->mfu);
  }
}

// gpuscope's own cost.
void Self(Exposition& e, const Summary& s) {
  e.Gauge("self_scope_seconds",
          "Host time one gpuscope scope (begin and end) costs on this machine.",
          s.overhead.scope_ns.has_value() ? std::optional<double>(*s.overhead.scope_ns * 1e-9)
                                          : std::nullopt);
  e.Gauge("self_records_per_step", "gpuscope records (a step and its phases) per step.",
          s.overhead.records_per_step);
  e.Gauge("self_worker_cpu_ratio", "gpuscope's background worker's CPU, as a share of one core.",
          s.overhead.worker_cpu_share);
}

// GPU idle, by cause and (cupti) device time by category.
void GpuIdle(Exposition& e, const Summary& s, const PhaseNames& names) {
  if (s.gpu_idle_pct.has_value()) {
    e.Gauge("gpu_idle_ratio", "Share of step time the GPU was idle (source events: a lower bound).",
            *s.gpu_idle_pct / 100);
    e.Family("gpu_idle_by_cause_ratio", "gauge",
             "Share of step time the GPU was idle, by the host phase open (or launch gaps); sums "
             "to gpu_idle_ratio.");
    double rest = 0;
    bool folded = false;
    for (const auto& [cause, pct] : s.idle_by_cause) {
      if (cause == kLaunchCauseName || names.Kept(cause)) {
        e.Sample(pct / 100, {{"cause", cause}});
      } else {
        rest += pct / 100;
        folded = true;
      }
    }
    if (folded) e.Sample(rest, {{"cause", std::string(kRestName)}});
  }
  if (s.activity.has_value() && s.activity->device_share_idle.has_value()) {
    const ActivityStats& a = *s.activity;
    e.Family("gpu_device_time_ratio", "gauge",
             "Share of the GPUs' step time by category, each instant to the highest running: "
             "kernel > memcpy > memset > comm > idle (cupti only); sums to 1.");
    e.Sample(a.device_share_kernel.value_or(0), {{"category", "kernel"}});
    e.Sample(a.device_share_memcpy.value_or(0), {{"category", "memcpy"}});
    e.Sample(a.device_share_memset.value_or(0), {{"category", "memset"}});
    e.Sample(a.device_share_comm.value_or(0), {{"category", "comm"}});
    e.Sample(*a.device_share_idle, {{"category", "idle"}});
  }
}

// `text`'s first `n` bytes at most, cut at a character boundary.
std::string_view Prefix(std::string_view text, size_t n) {
  if (text.size() <= n) return text;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return text.substr(0, n);
}

// The top kernels (cupti): at most kMaxTopKernels series, names cut to
// kKernelLabelBytes so that a templated name cannot bloat a scrape.
void TopKernels(Exposition& e, const Summary& s) {
  if (s.top_kernels.empty()) return;
  constexpr size_t kKernelLabelBytes = 128;
  const auto labels = [&](const KernelStats& k) {
    return std::vector<std::pair<std::string, std::string>>{
        {"kernel", std::string(Prefix(k.name, kKernelLabelBytes))},
        {"class", k.kernel_class},
        {"phase", k.phase}};
  };
  e.Family("kernel_time_seconds", "gauge",
           "Device time per step and GPU of the kernels with the most (at most 10), by name, "
           "class and the phase that launched most of it (cupti only).");
  for (const KernelStats& k : s.top_kernels) e.Sample(k.time_per_step, labels(k));
  e.Family("kernel_launches", "gauge", "Launches per step of the same kernels.");
  for (const KernelStats& k : s.top_kernels) e.Sample(k.count_per_step, labels(k));
}

// Telemetry: nvidia-smi's utilization labelled as what it is, clocks, host CPUs.
void Telemetry(Exposition& e, const Summary& s) {
  if (s.telemetry.has_value()) {
    const TelemetryStats& t = *s.telemetry;
    const auto ratio = [](const std::optional<double>& pct) {
      return pct.has_value() ? std::optional<double>(*pct / 100) : std::nullopt;
    };
    e.Gauge(
        "nvidia_smi_utilization_ratio",
        "GPU utilization as nvidia-smi reports it (a kernel ran during the sample): not busy time.",
        ratio(t.gpu_utilization_pct));
    e.Gauge("sm_clock_ratio", "The slowest GPU's SM clock over its maximum.", t.sm_clock_ratio);
    e.Gauge("throttled_steps_ratio", "Share of steps with a GPU power- or thermal-capped.",
            t.throttled_steps);
    e.Gauge("host_cpu_ratio", "Share of the host's CPUs busy.", ratio(t.host_cpu_pct));
    e.Gauge("host_iowait_ratio", "Share of the host's CPUs waiting for I/O.",
            ratio(t.host_iowait_pct));
    e.Gauge("process_cpu_cores", "CPU cores this process used.", t.process_cores);
    e.Gauge("worker_cpu_cores", "CPU cores its data loader's worker processes used.",
            t.worker_cores);
    e.Gauge("child_process_cpu_cores",
            "CPU cores its other descendant processes used (all of them while no loader named "
            "its workers).",
            t.child_cores);
    e.Gauge("training_thread_cpu_wait_ratio",
            "Share of time the training thread was runnable but waited for a CPU.",
            t.cpu_wait_share);
    e.Gauge("worker_cpu_wait_cores",
            "The loader workers' run-queue wait, summed: how many waited for a CPU at a time.",
            t.worker_cpu_wait_cores);
    e.Gauge("host_cpu_pressure_ratio",
            "PSI some avg10 of /proc/pressure/cpu: share of time a task waited for a CPU.",
            ratio(t.cpu_pressure_pct));
    e.Gauge("host_cpu_steal_ratio", "Share of the host's CPUs taken by the hypervisor.",
            ratio(t.steal_pct));
    e.Gauge("container_cpu_throttled_ratio",
            "Share of the container CPU limit's periods in which it was throttled.",
            ratio(t.cpu_throttled_pct));
  }
}

// This process's GPU memory (its allocator's numbers), by GPU. The peak
// phase is not a label: a phase name per series would multiply them.
void Memory(Exposition& e, const Summary& s) {
  if (!s.memory.has_value() || s.memory->gpus.empty()) return;
  const std::vector<GpuMemory>& gpus = s.memory->gpus;
  const auto family = [&](std::string_view name, std::string_view help, auto value) {
    e.Family(name, "gauge", help);
    for (const GpuMemory& g : gpus) {
      // An unknown value is left out, as the other families leave theirs.
      if (const double v = value(g); !std::isnan(v)) e.Sample(v, {{"gpu", absl::StrCat(g.device)}});
    }
  };
  family("memory_allocated_bytes", "GPU memory held by live tensors, at the last sample.",
         [](const GpuMemory& g) { return g.allocated_bytes; });
  family("memory_reserved_bytes", "GPU memory the allocator holds (tensors and its cache).",
         [](const GpuMemory& g) { return g.reserved_bytes; });
  family("memory_peak_allocated_bytes", "The window's peak GPU memory allocated.",
         [](const GpuMemory& g) { return g.peak_allocated_bytes; });
  family("memory_peak_reserved_bytes", "The window's peak GPU memory reserved by the allocator.",
         [](const GpuMemory& g) { return g.peak_reserved_bytes; });
  family("memory_total_bytes", "The GPU's memory.",
         [](const GpuMemory& g) { return g.total_bytes; });
  family("memory_fragmentation_ratio",
         "1 - peak allocated / peak reserved: the reservation tensors did not use at the peak.",
         [](const GpuMemory& g) { return g.fragmentation; });
  family("memory_alloc_retries",
         "Allocation retries (cache freed, cudaMalloc retried) in the window.",
         [](const GpuMemory& g) { return static_cast<double>(g.alloc_retries); });
  family("memory_ooms", "Out-of-memory errors the allocator raised in the window.",
         [](const GpuMemory& g) { return static_cast<double>(g.ooms); });
}

// The last rank exchange: ranks compared and missing, stragglers.
void Ranks(Exposition& e, const Summary& s) {
  if (s.ranks.has_value()) {
    const RanksStats& r = *s.ranks;
    e.Family("ranks_compared", "gauge", "Ranks whose records the last exchange compared.");
    e.Sample(static_cast<double>(r.ranks.size()));
    e.Family("ranks_missing", "gauge", "Ranks the last exchange had no record of.");
    e.Sample(static_cast<double>(r.missing.size()));
    e.Family("straggler_slowdown_ratio", "gauge",
             "Each straggler the last exchange found: its per-step time in the phase over the "
             "other ranks' median.");
    for (const Straggler& x : r.stragglers) {
      e.Sample(x.slowdown, {{"straggler_rank", absl::StrCat(x.rank)}, {"phase", x.phase}});
    }
  }
}

// Periodic spikes, by phase.
void PeriodicSpikes(Exposition& e, const Summary& s) {
  // A spike's phase is one whose time grew every N steps: a handful, and
  // named by the window's largest phases in practice; kept as they are.
  if (!s.periodic_spikes.empty()) {
    e.Family("periodic_spike_share_ratio", "gauge",
             "Work every N steps inside the step (evaluation, checkpoints), by the phase that "
             "grew: the step time it adds over the window's step time.");
    for (const PeriodicSpike& p : s.periodic_spikes) e.Sample(p.share, {{"phase", p.phase}});
    e.Family("periodic_spike_period_steps", "gauge",
             "Steps from one periodic spike to the next, by phase.");
    for (const PeriodicSpike& p : s.periodic_spikes) {
      e.Sample(static_cast<double>(p.period_steps), {{"phase", p.phase}});
    }
  }
}

// Misuse counters and the findings' shares.
void Diagnosis(Exposition& e, const Summary& s) {
  e.Family("misuse_total", "counter",
           "Scope calls that could not be recorded as written, by kind.");
  const std::pair<const char*, int64_t> misuse[] = {
      {"out_of_order_end", s.misuse.out_of_order_end},
      {"stale_end", s.misuse.stale_end},
      {"nested_step", s.misuse.nested_step},
      {"wrong_thread", s.misuse.wrong_thread},
      {"too_deep", s.misuse.too_deep},
      {"invalid_phase", s.misuse.invalid_phase},
      {"dropped_records", s.misuse.dropped_records},
      {"incomplete_steps", s.misuse.incomplete_steps}};
  for (const auto& [kind, n] : misuse) e.Sample(static_cast<double>(n), {{"kind", kind}});
  const std::vector<Finding> findings = Diagnose(s);
  e.Family("finding_share_ratio", "gauge",
           "The diagnosis: each finding's share of step time explained (0 for notices), by id and "
           "severity.");
  for (const Finding& f : findings) {
    e.Sample(f.share, {{"id", f.id}, {"severity", std::string(SeverityName(f.severity))}});
  }
}

// Whether `name` is a label name as Prometheus allows it.
bool IsLabelName(std::string_view name) {
  if (name.empty() || name.starts_with("__")) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool IsUtf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = internal::Utf8SequenceLength(text, pos);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

}  // namespace

absl::Status PrometheusOptions::Validate() const {
  if (max_phases < 1 || max_phases > kMaxPrometheusPhases) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_phases must be 1 to ", kMaxPrometheusPhases, ", not ", max_phases));
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    const auto& [name, value] = labels[i];
    if (!IsLabelName(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "label name \"", internal::TerminalSafe(name),
          "\" is not one Prometheus allows: letters, digits and _, not starting with a digit or "
          "__"));
    }
    if (name == "rank") {
      return absl::InvalidArgumentError(
          "label \"rank\" is the summary's own (a distributed job's rank); give another name");
    }
    for (size_t j = 0; j < i; ++j) {
      if (labels[j].first == name) {
        return absl::InvalidArgumentError(absl::StrCat("label \"", name, "\" is given twice"));
      }
    }
    if (value.size() > kMaxPrometheusLabelBytes || !IsUtf8(value)) {
      return absl::InvalidArgumentError(absl::StrCat("label \"", name,
                                                     "\"'s value must be valid UTF-8 of at most ",
                                                     kMaxPrometheusLabelBytes, " bytes"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ToPrometheus(const Summary& s, const PrometheusOptions& options) {
  if (absl::Status valid = options.Validate(); !valid.ok()) return valid;
  Exposition e;
  if (s.rank.has_value()) e.AlwaysLabel("rank", absl::StrCat(s.rank->rank));
  for (const auto& [name, value] : options.labels) e.AlwaysLabel(name, value);
  const PhaseNames names(s, options.max_phases);
  Info(e, s);
  Steps(e, s, names);
  Stalls(e, s);
  Throughput(e, s);
  Self(e, s);
  GpuIdle(e, s, names);
  for (void (*family)(Exposition&, const Summary&) :
       {TopKernels, Telemetry, Memory, Ranks, PeriodicSpikes, Diagnosis}) {
    family(e, s);
  }
  return e.Take();
}

std::string ToPrometheus(const Summary& s) { return *ToPrometheus(s, PrometheusOptions{}); }

}  // namespace gpuscope
