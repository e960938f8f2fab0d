// SessionImpl: everything behind gpuscope::Session, in three parts held by
// value, each with its own state and locks:
//   * the recorder (session/recorder.h): the recording thread's hot path and
//     the producer side of the record queue; no locks;
//   * the pump (session/pump.h): the queue's consumer side, staging, the
//     aggregator and the GPU sources, behind its locks; the background
//     worker and readers run it;
//   * the rank board (session/rank_board.h): this rank and the last
//     exchange's comparison, behind a leaf lock.
// What the session adds: its options, backends and phase names (immutable
// after construction but for the phase table's appends), the fork check, the
// worker's registration, and the summary assembled from the three
// (SummarizeWindow(), core/summarize.h). session/session.cc holds it and the
// public Session facade.

#ifndef GPUSCOPE_LIB_SESSION_SESSION_IMPL_H_
#define GPUSCOPE_LIB_SESSION_SESSION_IMPL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/phase_table.h"
#include "core/trace_steps.h"
#include "gpuscope/session.h"
#include "session/pump.h"
#include "session/rank_board.h"
#include "session/recorder.h"
#include "session/sources.h"
#include "session/worker.h"

namespace gpuscope::internal {

class SessionImpl final : public Pumpable {
  friend class SessionTestPeer;

 public:
  // `status` not ok: a disabled session that explains itself.
  SessionImpl(const Options& options, absl::Status status, Backends backends,
              std::atomic<bool>* recording_flag);
  ~SessionImpl() override;

  const Options& options() const { return options_; }
  const absl::Status& status() const { return status_; }
  Source source() const { return pump_.source(); }

  absl::StatusOr<PhaseId> RegisterPhase(std::string_view name);

  // Hot path (recording thread): the recorder's.
  Recorder& recorder() { return recorder_; }
  // Before any scope: the thread that claims this session is not the
  // training thread (gpuscope's own calibration session).
  void DontNameTrainingThread() { recorder_.DontNameTrainingThread(); }

  Summary Summarize();
  // Options::device_name, or the CUDA driver's name of the GPU in use when
  // MFU needs the peak table and the options give neither name nor peak.
  std::string DeviceNameForPeak();
  absl::Status Reset(std::optional<int> warmup_steps);
  absl::Status SetRank(const RankIdentity& identity) { return ranks_.SetRank(identity); }
  absl::Status SetRankRecords(std::vector<RankRecord> records, const RankOptions& options) {
    return ranks_.SetRankRecords(std::move(records), options);
  }
  std::optional<RankIdentity> rank() const { return ranks_.rank(); }
  std::vector<StepPoint> StepSeries();
  SeriesColumns StepColumns();
  // The kept steps' timelines as a value (session/trace_capture.h).
  TraceCapture Trace();
  void Flush();
  // Session::RecordMemory() / RecordOom().
  void RecordMemory(const AllocatorStats& stats, std::string_view source) {
    if (!InForkedChild() && status_.ok()) pump_.RecordMemory(stats, source);
  }
  void RecordOom(OomEvent oom, std::string_view source);
  std::optional<Stall> CurrentStall() const {
    return InForkedChild() || !status_.ok() ? std::nullopt : pump_.CurrentStall();
  }
  void Close();
  void ReleaseCupti();

  // Pumpable (worker, with the worker's lock held).
  double Pump() override { return pump_.Pass(); }
  int flush_interval_ms() const override { return options_.flush_interval_ms; }

 private:
  bool InForkedChild() const noexcept { return recorder_.InForkedChild(); }

  // ---- Immutable after construction.
  const Options options_;
  const absl::Status status_;
  Backends backends_;
  PhaseTable phases_;

  // ---- The parts.
  Recorder recorder_;
  class Pump pump_;
  RankBoard ranks_;

  std::atomic<bool>* const recording_flag_;  // Session::recording_
  std::atomic<bool> closed_{false};
  std::atomic<bool> registered_{false};

  // ---- The GPU's model name for MFU's peak table, when Options::device_name
  // is empty: asked of the CUDA driver until it answers (the framework may
  // initialize CUDA after the session starts), then kept. A leaf lock.
  std::mutex device_name_mu_;
  std::string device_name_;
};

// MeasuredScopeNs()
//
// Host nanoseconds one phase scope (begin and end, inside a step) costs on
// this machine: measured once per process, at the first call, on a private
// host-only session (no GPU source, no telemetry; NVTX as configured),
// 5 rounds of 64 steps of 15 phases each, the median round's cost per scope
// (the step's own begin and end spread over its phases); about a millisecond.
// nullopt where recording is off (GPUSCOPE_DISABLE) or in a forked child.
std::optional<double> MeasuredScopeNs();

// White-box access for tests, benchmarks and the simulated device: sessions
// on injected backends, and the implementation behind a Session.
class SessionTestPeer {
 public:
  static std::unique_ptr<Session> Create(Options options, Backends backends);
  static SessionImpl& Impl(Session& session);
  static size_t QueuedRecords(Session& session) { return Impl(session).pump_.queued_records(); }
  // Holds the aggregator lock as a slow reader (a summary of a large window)
  // would, for as long as the returned lock lives.
  static std::unique_lock<std::mutex> HoldAggregator(Session& session) {
    return Impl(session).pump_.HoldAggregator();
  }
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_SESSION_SESSION_IMPL_H_
