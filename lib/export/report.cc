#include "gpuscope/report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/strings.h"
#include "base/text.h"
#include "core/stalls.h"
#include "gpuscope/diagnose.h"
#include "gpuscope/phase.h"

namespace gpuscope {
namespace {

// A duration with three significant digits and a unit: "812 ns", "4.20 ms".
std::string Duration(double seconds) {
  const double ns = seconds * 1e9;
  struct Unit {
    double scale;
    const char* name;
  };
  constexpr Unit kUnits[] = {{1e9, "s"}, {1e6, "ms"}, {1e3, "us"}, {1, "ns"}};
  for (const Unit& u : kUnits) {
    if (ns >= u.scale || u.scale == 1) {
      const double v = ns / u.scale;
      if (v >= 100) return absl::StrFormat("%.0f %s", v, u.name);
      if (v >= 10) return absl::StrFormat("%.1f %s", v, u.name);
      return absl::StrFormat("%.2f %s", v, u.name);
    }
  }
  return "0 ns";
}

std::string Rate(double per_second, const char* what) {
  if (per_second >= 1e6) return absl::StrFormat("%.2f M %s/s", per_second / 1e6, what);
  if (per_second >= 1e3) return absl::StrFormat("%.2f k %s/s", per_second / 1e3, what);
  return absl::StrFormat("%.1f %s/s", per_second, what);
}

// FLOP/s with a decimal unit: "312.0 TFLOP/s", "1.98 PFLOP/s", "45.0 GFLOP/s".
std::string FlopRate(double flops) {
  constexpr struct {
    double scale;
    const char* name;
  } kUnits[] = {{1e15, "PFLOP/s"}, {1e12, "TFLOP/s"}, {1e9, "GFLOP/s"}, {1e6, "MFLOP/s"}};
  for (const auto& u : kUnits) {
    if (flops >= u.scale) {
      const double v = flops / u.scale;
      if (v >= 10) return absl::StrFormat("%.1f %s", v, u.name);  // 989.5: as the table says
      return absl::StrFormat("%.2f %s", v, u.name);
    }
  }
  return absl::StrFormat("%.0f FLOP/s", flops);
}

// The efficiency line: "model FLOPs 243.8 TFLOP/s = 24.6% MFU of 989.5 TFLOP/s
// (table: H100 SXM, bf16 dense)", or why the MFU is unknown.
std::string EfficiencyLine(const EfficiencyStats& e) {
  std::string line = e.flops_per_second.has_value()
                         ? absl::StrCat("model FLOPs ", FlopRate(*e.flops_per_second))
                         : std::string("model FLOPs unknown");
  if (e.mfu.has_value() && e.peak_flops.has_value()) {
    absl::StrAppend(&line, absl::StrFormat(" = %.1f%% MFU of %s (%s", 100 * *e.mfu,
                                           FlopRate(*e.peak_flops), e.peak_source));
    if (e.peak_source == "options") absl::StrAppend(&line, ", ", e.precision);
    absl::StrAppend(&line, ", per GPU)");
  } else {
    absl::StrAppend(&line, "; MFU unknown: ", e.reason);
  }
  return line;
}

// A byte count with a binary unit: "4 B", "64.0 MiB".
std::string Bytes(double bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrFormat("%.0f B", bytes) : absl::StrFormat("%.1f %s", bytes, kUnits[u]);
}

std::string Percent(double fraction) { return absl::StrFormat("%5.1f%%", 100 * fraction); }

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Columns a UTF-8 string takes, counting one per code point (East Asian
// wide characters take two on most terminals; rows with them may be off).
size_t Columns(std::string_view s) {
  size_t n = 0;
  for (char c : s) {
    if (!IsContinuationByte(c)) ++n;
  }
  return n;
}

// `name` in exactly `width` columns: padded with spaces, or shortened with
// "~" at a character boundary, so that rows stay aligned and valid UTF-8.
std::string Fit(std::string_view name, size_t width) {
  std::string out;
  if (Columns(name) <= width) {
    out.assign(name);
  } else {
    size_t columns = 0, end = 0;
    while (end < name.size()) {
      size_t next = end + 1;
      while (next < name.size() && IsContinuationByte(name[next])) ++next;
      if (columns + 1 > width - 1) break;
      ++columns;
      end = next;
    }
    out = absl::StrCat(internal::ToAbsl(name.substr(0, end)), "~");
  }
  out.append(width - Columns(out), ' ');
  return out;
}

// Appends `text` wrapped at 80 columns, every line indented by `indent`.
void QuantileRow(std::string* out, const char* label, const Quantiles& q, const char* note) {
  absl::StrAppendFormat(out, "  %-9s %9s %9s %9s %9s %9s %9s%s\n", label, Duration(q.p50),
                        Duration(q.p90), Duration(q.p95), Duration(q.p99), Duration(q.mean),
                        Duration(q.max), note);
}

// `s` with every string that may come from outside (phase names, a saved
// file's text fields) made safe to print: a crafted name must not move the
// cursor, rewrite a line or hide text on the reader's terminal.
Summary TerminalSafeCopy(const Summary& s) {
  Summary safe = s;
  const auto clean = [](std::string& text) { text = internal::TerminalSafe(text); };
  clean(safe.version);
  clean(safe.source_reason);
  for (PhaseStats& p : safe.phases) clean(p.name);
  std::map<std::string, double> causes;
  for (const auto& [cause, pct] : s.idle_by_cause) causes[internal::TerminalSafe(cause)] += pct;
  safe.idle_by_cause = std::move(causes);
  if (safe.rank.has_value()) clean(safe.rank->host);
  if (safe.ranks.has_value()) {
    for (RankRecord& r : safe.ranks->ranks) {
      clean(r.host);
      for (RankPhase& p : r.phases) clean(p.name);
    }
    for (Straggler& x : safe.ranks->stragglers) {
      clean(x.host);
      clean(x.phase);
    }
  }
  for (PeriodicSpike& p : safe.periodic_spikes) clean(p.phase);
  const auto clean_kernels = [&](std::vector<KernelStats>& kernels) {
    for (KernelStats& k : kernels) {
      clean(k.name);
      clean(k.kernel_class);
      clean(k.phase);
    }
  };
  clean_kernels(safe.top_kernels);
  for (PhaseStats& p : safe.phases) clean_kernels(p.top_kernels);
  if (safe.telemetry.has_value()) {
    clean(safe.telemetry->source);
    for (std::string& r : safe.telemetry->clocks_event_reasons) clean(r);
    for (GpuTelemetry& g : safe.telemetry->gpus) {
      for (std::string& r : g.clocks_event_reasons) clean(r);
    }
  }
  for (Stall& x : safe.stalls) {
    for (std::string* text : {&x.phase, &x.phase_path, &x.gpu}) clean(*text);
  }
  if (safe.memory.has_value()) {
    MemoryStats& m = *safe.memory;
    clean(m.source);
    for (GpuMemory& g : m.gpus) clean(g.peak_phase);
    std::map<std::string, double> peaks;
    for (const auto& [phase, bytes] : s.memory->peak_by_phase) {
      double& v = peaks[internal::TerminalSafe(phase)];
      v = std::max(v, bytes);
    }
    m.peak_by_phase = std::move(peaks);
    if (m.oom.has_value()) {
      for (std::string* text :
           {&m.oom->phase, &m.oom->phase_path, &m.oom->message, &m.oom->snapshot}) {
        clean(*text);
      }
    }
  }
  return safe;
}

// The per-step time a rank spent in `phase` (device time when `device`),
// NaN when the record has none.
double RankPhaseTime(const RankRecord& r, const std::string& phase, bool device) {
  for (const RankPhase& p : r.phases) {
    if (p.name == phase) return device ? p.device_p50 : p.host_p50;
  }
  return std::nan("");
}

std::string DurationOrDash(double seconds) {
  return std::isnan(seconds) ? std::string("-") : Duration(seconds);
}

// The cross-rank section: a row per rank up to kRankRows ranks, else the
// slowest and fastest ranks and each phase's spread.
constexpr size_t kRankRows = 8;

// The phases to show: the largest by share on the median rank's record,
// largest first.
std::vector<std::pair<double, std::string>> RankPhasesByShare(const RanksStats& r) {
  std::vector<std::pair<double, std::string>> shares;
  std::map<std::string, std::vector<double>> by_phase;
  for (const RankRecord& x : r.ranks) {
    for (const RankPhase& p : x.phases) by_phase[p.name].push_back(p.share);
  }
  for (auto& [name, v] : by_phase) {
    std::sort(v.begin(), v.end());
    shares.emplace_back(v[v.size() / 2] * static_cast<double>(v.size()), name);
  }
  std::sort(shares.begin(), shares.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  return shares;
}

// Whether `phase` is compared on device time: where every rank with the
// phase has it, as CompareRanks() scores.
bool RankPhaseOnDevice(const RanksStats& r, const std::string& phase) {
  for (const RankRecord& x : r.ranks) {
    const double d = RankPhaseTime(x, phase, true);
    const double h = RankPhaseTime(x, phase, false);
    if (!std::isnan(h) && !(d > 0)) return false;
  }
  return true;
}

// A row per rank: step time, the largest phases' times, GPU idle; the
// straggler starred.
void AppendRankRows(std::string* out, const RanksStats& r,
                    const std::vector<std::pair<double, std::string>>& shares,
                    const Straggler* top) {
  const auto on_device = [&](const std::string& phase) { return RankPhaseOnDevice(r, phase); };
  const size_t columns = std::min<size_t>(3, shares.size());
  std::string header =
      absl::StrFormat("  %4s %-12s %9s %9s", "rank", "host", "step p50", "step p95");
  for (size_t c = 0; c < columns; ++c) {
    // Right-aligned over the times below it.
    const std::string name(absl::StripTrailingAsciiWhitespace(Fit(shares[c].second, 9)));
    absl::StrAppend(&header, " ", std::string(9 - std::min<size_t>(9, Columns(name)), ' '), name);
  }
  absl::StrAppend(&header, "  GPU idle\n");
  absl::StrAppend(out, header);
  for (const RankRecord& x : r.ranks) {
    const bool slow_rank = top != nullptr && top->rank == x.rank;
    std::string line = absl::StrFormat("  %3d%s %s %9s %9s", x.rank, slow_rank ? "*" : " ",
                                       Fit(x.host, 12), Duration(x.step_p50), Duration(x.step_p95));
    for (size_t c = 0; c < columns; ++c) {
      const std::string& phase = shares[c].second;
      absl::StrAppend(
          &line, " ",
          absl::StrFormat("%9s", DurationOrDash(RankPhaseTime(x, phase, on_device(phase)))));
    }
    absl::StrAppend(&line, std::isnan(x.gpu_idle_pct)
                               ? std::string("         -")
                               : absl::StrFormat("  %7.1f%%", x.gpu_idle_pct));
    absl::StrAppend(out, line, "\n");
  }
  std::string note = "phase times are per-step medians";
  bool any_device = false;
  for (size_t c = 0; c < columns; ++c) any_device = any_device || on_device(shares[c].second);
  absl::StrAppend(&note, any_device ? " (device time where every rank has it)" : " (host time)");
  if (top != nullptr) absl::StrAppend(&note, "; * the straggler");
  internal::AppendWrapped(out, note, 2);
}

// Too many ranks for a row each: the fastest and slowest, and per phase the
// median, the least and the most with their ranks.
void AppendRankSpread(std::string* out, const RanksStats& r,
                      const std::vector<std::pair<double, std::string>>& shares) {
  const auto [lo, hi] = std::minmax_element(
      r.ranks.begin(), r.ranks.end(),
      [](const RankRecord& a, const RankRecord& b) { return a.step_p50 < b.step_p50; });
  internal::AppendHanging(
      out, "  ",
      absl::StrFormat("step p50: fastest rank %d (%s) %s, slowest rank %d (%s) %s", lo->rank,
                      lo->host, Duration(lo->step_p50), hi->rank, hi->host, Duration(hi->step_p50)),
      4);
  absl::StrAppendFormat(out, "  %-24s %9s %9s %6s %9s %6s\n", "phase (p50 per step)", "median",
                        "min", "rank", "max", "rank");
  for (size_t c = 0; c < std::min<size_t>(6, shares.size()); ++c) {
    const std::string& phase = shares[c].second;
    const bool device = RankPhaseOnDevice(r, phase);
    std::vector<std::pair<double, int>> times;
    for (const RankRecord& x : r.ranks) {
      const double t = RankPhaseTime(x, phase, device);
      if (!std::isnan(t)) times.emplace_back(t, x.rank);
    }
    if (times.empty()) continue;
    std::sort(times.begin(), times.end());
    absl::StrAppendFormat(out, "  %s %9s %9s %6d %9s %6d\n", Fit(phase, 24),
                          Duration(times[times.size() / 2].first), Duration(times.front().first),
                          times.front().second, Duration(times.back().first), times.back().second);
  }
}

void AppendRanks(std::string* out, const Summary& s) {
  const RanksStats& r = *s.ranks;
  if (r.ranks.empty()) return;
  const int world = s.rank.has_value() ? s.rank->world_size : static_cast<int>(r.ranks.size());
  absl::StrAppendFormat(out, "\nranks (exchange %d, %s ago: %d of %d ranks%s)\n", r.exchanges,
                        Duration(r.age), r.ranks.size(), world,
                        r.missing.empty() ? "" : absl::StrCat(", ", r.missing.size(), " missing"));
  const std::vector<std::pair<double, std::string>> shares = RankPhasesByShare(r);
  const Straggler* top = r.stragglers.empty() ? nullptr : &r.stragglers.front();
  // A row per rank while they fit: up to kRankRows ranks, numbered below
  // 1000 (the rank column's width).
  if (r.ranks.size() <= kRankRows && r.ranks.back().rank < 1000) {
    AppendRankRows(out, r, shares, top);
  } else {
    AppendRankSpread(out, r, shares);
  }
  if (!r.missing.empty()) {
    std::vector<std::string> ids;
    for (size_t i = 0; i < std::min<size_t>(16, r.missing.size()); ++i) {
      ids.push_back(absl::StrCat(r.missing[i]));
    }
    internal::AppendHanging(
        out, "  ",
        absl::StrCat("missing (no record within the timeout): ", absl::StrJoin(ids, ", "),
                     r.missing.size() > ids.size() ? ", ..." : ""),
        4);
  }
}

// The first lines: version, steps, source and why, warm-up, rank, and what makes
// every number below less trustworthy.
void AppendHeader(std::string* out, const Summary& s) {
  absl::StrAppend(out, "gpuscope ", s.version, " | ", s.steps, " steps in window (", s.total_steps,
                  " total) | source: ", internal::ToAbsl(SourceName(s.source)),
                  s.simulated ? " (SIMULATED GPU)" : "", "\n");
  internal::AppendWrapped(out, s.source_reason, 2);
  if (s.warmup.steps > 0) {
    internal::AppendWrapped(
        out,
        absl::StrCat(s.warmup.steps, s.warmup.steps == 1 ? " warm-up step" : " warm-up steps",
                     " excluded (", Duration(s.warmup.total),
                     s.warmup.steps > 1 ? absl::StrCat(", longest ", Duration(s.warmup.max)) : "",
                     "): in no number below"),
        2);
  }
  if (s.rank.has_value()) {
    internal::AppendWrapped(out,
                            absl::StrFormat("rank %d of %d (local rank %d) on %s", s.rank->rank,
                                            s.rank->world_size, s.rank->local_rank, s.rank->host),
                            2);
  }
  if (s.simulated) {
    internal::AppendWrapped(out,
                            "GPU numbers come from gpuscope's simulated device (simulated_device, "
                            "GPUSCOPE_SIMULATE), not from a GPU.",
                            2);
  }
  if (s.misuse.dropped_records > 0) {
    internal::AppendWrapped(
        out,
        absl::StrCat(
            "warning: ", s.misuse.dropped_records,
            " records were dropped (the queue to the background worker was full); ",
            s.misuse.incomplete_steps,
            " steps were left out. Raise Options::queue_capacity (Python: queue_capacity=)."),
        2);
  }
}

// Step-time quantiles, throughput, MFU and periodic spikes.
void AppendStepTime(std::string* out, const Summary& s) {
  absl::StrAppendFormat(out, "\n%-11s %9s %9s %9s %9s %9s %9s\n", "step time", "p50", "p90", "p95",
                        "p99", "mean", "max");
  QuantileRow(out, "window", s.step_time, "");
  if (s.lifetime_step_time.count > s.step_time.count) {
    QuantileRow(out, "lifetime", s.lifetime_step_time, " ~1%");
  }
  if (s.samples_per_second.has_value() || s.tokens_per_second.has_value()) {
    std::string rates;
    if (s.samples_per_second.has_value()) rates = Rate(*s.samples_per_second, "samples");
    if (s.tokens_per_second.has_value()) {
      absl::StrAppend(&rates, rates.empty() ? "" : ", ", Rate(*s.tokens_per_second, "tokens"));
    }
    absl::StrAppend(out, "throughput  ", rates, "\n");
  }
  if (s.efficiency.has_value()) {
    internal::AppendHanging(out, "efficiency  ", EfficiencyLine(*s.efficiency), 12);
  }
  for (const PeriodicSpike& p : s.periodic_spikes) {
    const std::string what = p.phase == kOtherPhaseName
                                 ? std::string("untimed work (outside every phase)")
                                 : absl::StrCat("phase ", p.phase);
    internal::AppendHanging(
        out, "spikes      ",
        absl::StrFormat("every %d steps, %s adds %s: %.1f%% of step time (%d in the window, "
                        "the last at step %d)",
                        p.period_steps, what, Duration(p.excess), 100 * p.share, p.occurrences,
                        p.last_step),
        12);
  }
}

// GPU idle and its causes (or why there is none yet).
void AppendGpuIdle(std::string* out, const Summary& s) {
  if (s.gpu_idle_pct.has_value()) {
    absl::StrAppendFormat(
        out, "GPU idle    %s%.1f%% of step time (%d of %d steps%s)\n",
        s.source == Source::kEvents ? "at least " : "", *s.gpu_idle_pct, s.gpu_steps, s.steps,
        s.pending_steps > 0 ? absl::StrCat(", ", s.pending_steps, " pending") : "");
    std::vector<std::pair<double, std::string>> causes;
    for (const auto& [cause, pct] : s.idle_by_cause) causes.emplace_back(pct, cause);
    std::sort(causes.rbegin(), causes.rend());
    std::string line = "idle while";
    for (const auto& [pct, cause] : causes) {
      absl::StrAppendFormat(&line, " %s %.1f%%,", cause, pct);
    }
    if (!causes.empty()) {
      line.pop_back();
      internal::AppendWrapped(out, line, 12);
    }
    if (s.devices.size() > 1) {
      std::string per_device = absl::StrFormat("per device:");
      for (const DeviceStats& d : s.devices) {
        if (!d.gpu_idle_pct.has_value()) continue;
        absl::StrAppendFormat(&per_device, " device %d %.1f%%,", d.device, *d.gpu_idle_pct);
      }
      per_device.back() = ' ';
      absl::StrAppendFormat(&per_device, "(the line above is their mean)");
      internal::AppendWrapped(out, per_device, 12);
    }
  } else if (s.source != Source::kHost && s.pending_steps > 0) {
    absl::StrAppendFormat(out, "GPU idle    (%d steps waiting for the GPU to catch up)\n",
                          s.pending_steps);
  } else if (s.source == Source::kEvents) {
    internal::AppendWrapped(out,
                            "GPU idle    (no step has device markers yet: is a stream set "
                            "(Options::stream, SetStream), and has CUDA been initialized on the "
                            "recording thread?)",
                            0);
  }
}

// Where the step time goes: the top-level phases, then the nested ones.
void AppendPhases(std::string* out, const Summary& s) {
  absl::StrAppendFormat(out, "\nwhere the step time goes (window, host time)\n");
  absl::StrAppendFormat(out, "  %-24s %7s %9s %9s %9s %7s\n", "phase", "share", "p50/step",
                        "p95/step", "max/step", "count");
  for (const PhaseStats& p : s.phases) {
    if (!p.top_level || p.steps == 0) continue;
    absl::StrAppendFormat(out, "  %s %7s %9s %9s %9s %7d\n", Fit(p.name, 24), Percent(p.share),
                          Duration(p.time.p50), Duration(p.time.p95), Duration(p.time.max),
                          p.count);
  }
  bool nested_header = false;
  for (const PhaseStats& p : s.phases) {
    if (p.steps == 0 || (p.top_level && p.inclusive_share <= p.share + 1e-12)) continue;
    if (!nested_header) {
      absl::StrAppend(out, "  nested (inside the phases above, not added to the breakdown):\n");
      nested_header = true;
    }
    absl::StrAppendFormat(out, "  %s %7s %9s %9s %9s %7d\n", Fit(absl::StrCat("  ", p.name), 24),
                          Percent(p.inclusive_share), Duration(p.time.p50), Duration(p.time.p95),
                          Duration(p.time.max), p.count);
  }
}

// GPU time per step, by phase.
void AppendDeviceTimes(std::string* out, const Summary& s) {
  if (s.gpu_steps > 0 && s.source == Source::kEvents) {
    absl::StrAppendFormat(out,
                          "\nGPU time per step (events: span between the phase's markers, +-%s)\n",
                          Duration(s.gpu_clock_error));
    absl::StrAppendFormat(out, "  %-24s %9s %9s %11s %8s\n", "phase", "p50", "p95", "backlog p50",
                          "GPU idle");
    for (const PhaseStats& p : s.phases) {
      if (p.device.count == 0) continue;
      const auto idle = s.idle_by_cause.find(p.name);
      absl::StrAppendFormat(out, "  %s %9s %9s %11s %7.1f%%\n", Fit(p.name, 24),
                            Duration(p.device.p50), Duration(p.device.p95), Duration(p.backlog_p50),
                            idle == s.idle_by_cause.end() ? 0.0 : idle->second);
    }
    absl::StrAppendFormat(out, "  %s %9s %9s\n", Fit("(step)", 24),
                          Duration(s.device_step_time.p50), Duration(s.device_step_time.p95));
  } else if (s.gpu_steps > 0) {
    absl::StrAppendFormat(out,
                          "\nGPU time per step (%s: device time of the work each phase launched)\n",
                          SourceName(s.source));
    absl::StrAppendFormat(out, "  %-24s %9s %9s %8s\n", "phase", "p50", "p95", "GPU idle");
    for (const PhaseStats& p : s.phases) {
      if (p.device.count == 0) continue;
      const auto idle = s.idle_by_cause.find(p.name);
      absl::StrAppendFormat(out, "  %s %9s %9s %7.1f%%\n", Fit(p.name, 24), Duration(p.device.p50),
                            Duration(p.device.p95),
                            idle == s.idle_by_cause.end() ? 0.0 : idle->second);
    }
  }
}

// CUPTI activity per step: kernels, GEMMs, copies, syncs, device time by
// category.
void AppendActivity(std::string* out, const Summary& s) {
  if (s.activity.has_value()) {
    const ActivityStats& a = *s.activity;
    absl::StrAppend(out, "\nGPU activity per step (mean over the window)\n");
    internal::AppendHanging(
        out, absl::StrFormat("  kernels %9.1f   ", a.kernels_per_step),
        absl::StrFormat("median %s; %.1f waits for a launch (%s)", Duration(a.kernel_time_p50),
                        a.host_wait_gaps_per_step, Duration(a.host_wait_time_per_step)),
        20);
    if (a.kernel_time_per_step > 0) {
      internal::AppendHanging(
          out, absl::StrFormat("  GEMMs   %9s   ", Duration(a.gemm_time_per_step)),
          absl::StrFormat("FP32 %s of them; NCCL %s; of %s kernel time",
                          Duration(a.fp32_gemm_time_per_step), Duration(a.collective_time_per_step),
                          Duration(a.kernel_time_per_step)),
          22);
    }
    absl::StrAppendFormat(out, "  copies  %9.1f   %.1f pageable; H2D %s, D2H %s\n",
                          a.copies_per_step, a.pageable_copies_per_step,
                          Bytes(a.h2d_bytes_per_step), Bytes(a.d2h_bytes_per_step));
    absl::StrAppendFormat(out, "  syncs   %9.1f   blocking the host %s", a.syncs_per_step,
                          Duration(a.sync_time_per_step));
    if (a.sync_idle_share.value_or(0) > 0) {
      absl::StrAppendFormat(out, "; GPU idle after them %.1f%%", 100 * *a.sync_idle_share);
    }
    out->push_back('\n');
    if (a.device_share_idle.has_value()) {
      // By priority: kernels hide the copies, memsets and collectives they
      // overlap (docs/definitions.md "Device time by category").
      internal::AppendHanging(
          out, "  device time: ",
          absl::StrFormat("kernels %.1f%%, memcpy %.1f%%, memset %.1f%%, comm %.1f%%, idle %.1f%%",
                          100 * a.device_share_kernel.value_or(0),
                          100 * a.device_share_memcpy.value_or(0),
                          100 * a.device_share_memset.value_or(0),
                          100 * a.device_share_comm.value_or(0), 100 * *a.device_share_idle),
          15);
    }
    if (a.dropped_records > 0) {
      internal::AppendWrapped(
          out,
          absl::StrCat("  ", a.dropped_records,
                       " activity records were dropped (buffers full): the numbers above "
                       "miss them"),
          4);
    }
  }
}

// The host's CPU line: how busy, who used it, what held it back.
std::string HostCpuLine(const TelemetryStats& t) {
  std::string line = absl::StrFormat("host CPUs %.0f%% busy, %.0f%% iowait", *t.host_cpu_pct,
                                     t.host_iowait_pct.value_or(0));
  if (t.steal_pct.has_value() && *t.steal_pct >= 0.5)
    absl::StrAppendFormat(&line, ", %.0f%% stolen", *t.steal_pct);
  if (t.process_cores.has_value())
    absl::StrAppendFormat(&line, "; this process %.1f cores", *t.process_cores);
  if (t.worker_cores.has_value())
    absl::StrAppendFormat(&line, ", its loader workers %.1f", *t.worker_cores);
  if (t.child_cores.has_value() && (*t.child_cores >= 0.05 || !t.worker_cores.has_value()))
    absl::StrAppendFormat(
        &line, ", %s %.1f",
        t.worker_cores.has_value() ? "other child processes" : "its child processes",
        *t.child_cores);
  if (t.cpus_available.has_value())
    absl::StrAppendFormat(&line, " (%.1f available)", *t.cpus_available);
  if (t.cpu_throttled_pct.has_value() && *t.cpu_throttled_pct >= 0.5) {
    absl::StrAppendFormat(&line, "; the container's CPU limit throttled it in %.0f%% of periods",
                          *t.cpu_throttled_pct);
  }
  if (t.cpu_wait_share.has_value() && *t.cpu_wait_share >= 0.005) {
    absl::StrAppendFormat(&line, "; the training thread waited for a CPU %.0f%% of the time",
                          100 * *t.cpu_wait_share);
  }
  if (t.load1.has_value()) absl::StrAppendFormat(&line, "; load %.1f", *t.load1);
  if (t.cpu_pressure_pct.has_value() && *t.cpu_pressure_pct >= 0.5)
    absl::StrAppendFormat(&line, ", CPU pressure %.0f%%", *t.cpu_pressure_pct);
  return line;
}

// Telemetry: nvidia-smi's utilization labelled as what it is, clocks, host
// CPUs and memory, and each GPU.
void AppendTelemetry(std::string* out, const Summary& s) {
  if (s.telemetry.has_value() && s.telemetry->steps > 0) {
    const TelemetryStats& t = *s.telemetry;
    internal::AppendHanging(out, absl::StrFormat("\ntelemetry (%d steps): ", t.steps), t.source, 4);
    if (t.gpu_utilization_pct.has_value()) {
      std::string line = absl::StrFormat(
          "GPU utilization as nvidia-smi reports it: %.0f%% (a kernel ran during the sample: "
          "not GPU busy time%s)",
          *t.gpu_utilization_pct, s.gpu_idle_pct.has_value() ? ", see GPU idle above" : "");
      internal::AppendHanging(out, "  ", line, 4);
    }
    if (t.sm_clock_ratio.has_value()) {
      std::string line = absl::StrFormat(
          "clocks: the slowest GPU at %.0f%% of its maximum SM clock", 100 * *t.sm_clock_ratio);
      if (!t.clocks_event_reasons.empty()) {
        absl::StrAppendFormat(&line, "; %.0f%% of steps throttled; reasons seen: %s",
                              100 * t.throttled_steps, absl::StrJoin(t.clocks_event_reasons, ", "));
      }
      internal::AppendHanging(out, "  ", line, 4);
    }
    if (t.host_cpu_pct.has_value()) internal::AppendHanging(out, "  ", HostCpuLine(t), 4);
    if (t.memory_available_bytes.has_value()) {
      std::string line = absl::StrFormat("memory %.1f GiB available",
                                         *t.memory_available_bytes / (1024.0 * 1024 * 1024));
      if (t.memory_pressure_pct.has_value())
        absl::StrAppendFormat(&line, ", pressure %.1f%%", *t.memory_pressure_pct);
      if (t.swap_pages_per_s.has_value())
        absl::StrAppendFormat(&line, ", swapping %.0f pages/s", *t.swap_pages_per_s);
      internal::AppendHanging(out, "  ", line, 4);
    }
    for (const GpuTelemetry& g : t.gpus) {
      std::string line =
          absl::StrFormat("gpu%d: %.0f%% util, SM %.0f of %.0f MHz, %.0f of %.0f W, %.0f C",
                          g.index, g.utilization_pct, g.sm_clock_mhz, g.sm_clock_max_mhz, g.power_w,
                          g.power_limit_w, g.temperature_c);
      if (g.pcie_width > 0 && g.pcie_width_max > 0) {
        absl::StrAppendFormat(&line, ", PCIe Gen%d x%d of Gen%d x%d", g.pcie_gen, g.pcie_width,
                              g.pcie_gen_max, g.pcie_width_max);
      }
      if (!g.clocks_event_reasons.empty())
        absl::StrAppend(&line, "; ", absl::StrJoin(g.clocks_event_reasons, ", "));
      internal::AppendHanging(out, "  ", line, 4);
    }
  }
}

// " (of 80.0 GiB)", or "" when the total is unknown.
std::string OfTotal(double total) {
  return total > 0 ? absl::StrCat(" of ", Bytes(total)) : std::string();
}

// This process's GPU memory: per GPU its peak and where it was reached,
// retries and OOMs, then the peak by phase and the OOM that ended a step.
void AppendMemory(std::string* out, const Summary& s) {
  if (!s.memory.has_value()) return;
  const MemoryStats& m = *s.memory;
  absl::StrAppendFormat(out, "\nGPU memory (%s; %d steps sampled)\n", m.source, m.steps);
  for (const GpuMemory& g : m.gpus) {
    std::string line = absl::StrFormat("gpu%d: peak %s allocated%s", g.device,
                                       Bytes(g.peak_allocated_bytes), OfTotal(g.total_bytes));
    if (!g.peak_exact && g.peak_allocated_bytes >= 0) absl::StrAppend(&line, " (sampled)");
    if (g.peak_step >= 0) {
      absl::StrAppendFormat(&line, " in step %d%s", g.peak_step,
                            g.peak_phase.empty() ? "" : absl::StrCat(", ", g.peak_phase));
    }
    if (g.peak_reserved_bytes >= 0) {
      absl::StrAppendFormat(&line, "; %s reserved", Bytes(g.peak_reserved_bytes));
    }
    if (g.fragmentation >= 0) {
      absl::StrAppendFormat(&line, " (%.0f%% unused at the peak)", 100 * g.fragmentation);
    }
    if (g.min_allocated_bytes >= 0) {
      absl::StrAppendFormat(&line, "; %s between steps", Bytes(g.min_allocated_bytes));
    }
    if (g.alloc_retries > 0) {
      absl::StrAppendFormat(&line, "; %d allocation retries in %d steps", g.alloc_retries,
                            g.retry_steps);
    }
    if (g.ooms > 0) absl::StrAppendFormat(&line, "; %d OOMs", g.ooms);
    if (g.process_used_bytes >= 0) {
      absl::StrAppendFormat(&line, "; NVML: %s used by this process", Bytes(g.process_used_bytes));
    }
    internal::AppendHanging(out, "  ", line, 4);
  }
  if (!m.peak_by_phase.empty()) {
    std::vector<std::pair<double, std::string>> phases;
    for (const auto& [name, bytes] : m.peak_by_phase) phases.emplace_back(bytes, name);
    std::sort(phases.rbegin(), phases.rend());
    std::string line = "peak by phase:";
    for (const auto& [bytes, name] : phases)
      absl::StrAppend(&line, " ", name, " ", Bytes(bytes), ",");
    line.pop_back();
    internal::AppendHanging(out, "  ", line, 4);
  }
  if (m.oom.has_value()) {
    const OomEvent& o = *m.oom;
    std::string line = absl::StrCat(
        "OUT OF MEMORY", o.step >= 0 ? absl::StrCat(" in step ", o.step) : std::string(),
        o.phase_path.empty() ? std::string() : absl::StrCat(", phase ", o.phase_path));
    if (o.requested_bytes >= 0) absl::StrAppend(&line, ": asked for ", Bytes(o.requested_bytes));
    if (o.allocated_bytes >= 0) {
      absl::StrAppend(&line, " with ", Bytes(o.allocated_bytes), " allocated",
                      OfTotal(o.total_bytes));
    }
    if (!o.snapshot.empty()) absl::StrAppend(&line, "; allocator snapshot: ", o.snapshot);
    internal::AppendHanging(out, "  ", line, 4);
  }
}

// Stalls since the session started: the step (or phase) that hung, where,
// how long, and the GPU then.
void AppendStalls(std::string* out, const Summary& s) {
  if (s.stalls.empty()) return;
  absl::StrAppend(out, "\nstalls (", s.stalls.size(), ")\n");
  for (const Stall& x : s.stalls) {
    internal::AppendHanging(out, "  ",
                            absl::StrCat(x.ongoing ? "NOW " : "", internal::DescribeStall(x)), 4);
  }
}

// Phases outside steps, over the whole run.
void AppendOutsideSteps(std::string* out, const Summary& s) {
  bool outside_header = false;
  for (const PhaseStats& p : s.phases) {
    if (p.outside_steps_count == 0) continue;
    if (!outside_header) {
      absl::StrAppend(out, "\noutside steps (whole run)\n");
      outside_header = true;
    }
    absl::StrAppendFormat(out, "  %s %7d x %9s total\n", Fit(p.name, 24), p.outside_steps_count,
                          Duration(p.outside_steps_total));
  }
}

// gpuscope's own cost.
// The kernels with the most device time, with the phase that launched
// most of each (the JSON and HTML have each phase's own list).
void AppendTopKernels(std::string* out, const Summary& s) {
  if (s.top_kernels.empty()) return;
  absl::StrAppendFormat(out,
                        "\ntop kernels (device time per step and GPU; share of kernel time)\n");
  absl::StrAppendFormat(out, "  %6s %9s %7s %-12s %-10s %s\n", "share", "time", "count", "class",
                        "launched", "kernel");
  for (const KernelStats& k : s.top_kernels) {
    std::string_view name = k.name;
    if (name.starts_with("void ")) name.remove_prefix(5);  // the demangler's return type
    std::string row = absl::StrFormat(
        "  %6s %9s %7.1f %s %s %s", Percent(k.share), Duration(k.time_per_step), k.count_per_step,
        Fit(k.kernel_class, 12), Fit(k.phase.empty() ? "-" : k.phase, 10), Fit(name, 29));
    absl::StrAppend(out, absl::StripTrailingAsciiWhitespace(row), "\n");
  }
}

void AppendOverhead(std::string* out, const Summary& s) {
  if (s.overhead.scope_ns.has_value() && s.overhead.records_per_step > 0) {
    const OverheadStats& o = s.overhead;
    const double per_step = *o.scope_ns * 1e-9 * o.records_per_step;
    std::string line =
        absl::StrFormat("%.0f ns a scope on this machine x %.1f scopes a step = %s a step",
                        *o.scope_ns, o.records_per_step, Duration(per_step));
    if (s.step_time.p50 > 0)
      absl::StrAppendFormat(&line, " (%.3f%% of p50)", 100 * per_step / s.step_time.p50);
    absl::StrAppendFormat(&line, "; background worker %.2f%% of a core", 100 * o.worker_cpu_share);
    if (o.activity_buffers > 0)
      absl::StrAppendFormat(&line, "; %d CUPTI buffers read", o.activity_buffers);
    absl::StrAppendFormat(&line, "; %d records dropped", s.misuse.dropped_records);
    internal::AppendHanging(out, "\ngpuscope's own cost: ", line, 4);
  }
}

// Instrumentation problems.
void AppendMisuse(std::string* out, const Summary& s) {
  if (s.misuse.total() > 0) {
    absl::StrAppend(out, "\ninstrumentation problems (numbers above may be off):\n");
    const struct {
      int64_t n;
      const char* what;
    } rows[] = {
        {s.misuse.out_of_order_end, "scopes ended out of order (inner ones closed with them)"},
        {s.misuse.stale_end, "scopes ended twice or after being closed"},
        {s.misuse.nested_step, "steps begun inside a step (ignored)"},
        {s.misuse.wrong_thread, "scope calls from a second thread (ignored)"},
        {s.misuse.too_deep, "scopes nested deeper than 32 (ignored)"},
        {s.misuse.invalid_phase, "phases with an invalid name or id (ignored)"},
        {s.misuse.dropped_records, "records dropped: queue full"},
        {s.misuse.incomplete_steps, "steps left out: records dropped"},
    };
    for (const auto& row : rows) {
      if (row.n > 0) absl::StrAppendFormat(out, "  %8d %s\n", row.n, row.what);
    }
  }
}

// The findings, ranked, each with its fix.
void AppendFindings(std::string* out, const Summary& s, const ReportOptions& options) {
  const std::vector<Finding> findings = Diagnose(s);
  if (!findings.empty()) {
    absl::StrAppend(out, "\nfindings (ranked by the step time they explain)\n");
    int rank = 0;
    for (const Finding& f : findings) {
      const char* on = "";
      const char* off = "";
      if (options.color && f.severity != Severity::kInfo) {
        on = f.severity == Severity::kHigh ? "\033[1;31m" : "\033[33m";
        off = "\033[0m";
      }
      const std::string explains = f.share > 0
                                       ? absl::StrFormat("%.0f%% of step time", 100 * f.share)
                                       : std::string("notice");
      absl::StrAppendFormat(out, "%3d. %s%-8s%s %s (%s)\n", ++rank, on,
                            internal::ToAbsl(SeverityName(f.severity)), off, f.id, explains);
      internal::AppendWrapped(out, f.title, 5);
      // The host-only and events-only findings end with why no better
      // source was used: the header has just said it, so say it once.
      std::string fix = f.recommendation;
      if (const std::string why = absl::StrCat("Why not here: ", s.source_reason);
          !s.source_reason.empty() && absl::EndsWith(fix, why)) {
        fix.replace(fix.size() - why.size(), why.size(),
                    "Why not here: see the reason under the report's first line.");
      }
      internal::AppendHanging(out, "     fix: ", fix, 10);
      internal::AppendHanging(
          out, "     confidence: ", absl::StrCat(f.confidence, " (source: ", f.source, ")"), 10);
    }
  }
}

}  // namespace

std::string EscapeForTerminal(std::string_view text) { return internal::TerminalSafe(text); }

std::string FormatReport(const Summary& unsafe, const ReportOptions& options) {
  const Summary s = TerminalSafeCopy(unsafe);
  std::string out;
  AppendHeader(&out, s);
  if (s.steps == 0 && s.warmup.steps > 0) {
    absl::StrAppend(&out, "\nno measured steps yet: every step so far was a warm-up step\n");
  } else if (s.steps == 0) {
    absl::StrAppend(&out,
                    "\nno completed steps yet: wrap each training step in a StepScope "
                    "(C++) or s.step() / s.steps() (Python)\n");
  } else {
    AppendStepTime(&out, s);
    AppendGpuIdle(&out, s);
    AppendPhases(&out, s);
  }
  AppendDeviceTimes(&out, s);
  AppendActivity(&out, s);
  AppendTopKernels(&out, s);
  AppendTelemetry(&out, s);
  AppendMemory(&out, s);
  if (s.ranks.has_value()) AppendRanks(&out, s);
  AppendStalls(&out, s);
  AppendOutsideSteps(&out, s);
  AppendOverhead(&out, s);
  AppendMisuse(&out, s);
  AppendFindings(&out, s, options);
  return out;
}

}  // namespace gpuscope
