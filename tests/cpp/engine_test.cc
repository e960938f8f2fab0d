// The engine (core/engine.h) on a recorded run alone: host ranges and device
// intervals written down by the test as a timeline is played, fed to the
// engine with no session, give the same Summary a live session on the
// simulated device gave for that timeline.

#include "core/engine.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/kernel_names.h"
#include "export/chrome_trace.h"
#include "gpuscope/gpuscope.h"
#include "gpuscope/testing.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace gpuscope {
namespace {

using internal::ActivityKind;
using internal::DeviceInterval;
using internal::Engine;
using internal::Record;
using internal::RecordKind;
using internal::SummaryInputs;
using testing::kMs;
using testing::kUs;

// Plays one timeline twice over: on a live session (a ManualClock and a
// simulated device that delivers activity records), and into a recorded run
// the test keeps itself: a range per scope as it ends, an interval per
// kernel, copy, memset and sync from the in-order stream model
// (docs/definitions.md), never read back from the session or the device.
class Twin {
 public:
  Twin(Options options, bool device)
      : gpu_(device ? std::make_shared<SimulatedDevice>(SimulatedDevice::Config{.activity = true})
                    : nullptr) {
    options.clock = clock_;
    if (device) {
      options.stream = 0;
      options.simulated_device = gpu_;
    }
    options_ = options;
    session_ = std::make_unique<Session>(options);
  }

  template <typename Body>
  void Step(int64_t samples, Body body) {
    const int64_t begin = clock_->NowNs();
    ++seq_;
    in_step_ = true;
    {
      StepScope step(*session_, StepOptions{.samples = samples});
      body();
    }
    in_step_ = false;
    Record r{};
    r.begin_ns = begin;
    r.end_ns = clock_->NowNs();
    r.step_seq = seq_;
    r.samples = samples;
    r.tokens = -1;
    r.begin_event = r.end_event = internal::kNoEvent;
    r.kind = RecordKind::kStep;
    ranges_.push_back(r);
  }

  template <typename Body>
  void Phase(const std::string& name, Body body) {
    const int64_t begin = clock_->NowNs();
    const int depth = depth_++;
    {
      PhaseScope p(*session_, name);
      body();
    }
    --depth_;
    Record r{};
    r.begin_ns = begin;
    r.end_ns = clock_->NowNs();
    r.step_seq = in_step_ ? seq_ : 0;
    r.samples = r.tokens = -1;
    r.begin_event = r.end_event = internal::kNoEvent;
    r.name_id = engine_phase(name);
    r.kind = RecordKind::kPhase;
    r.depth = static_cast<uint8_t>(depth);
    ranges_.push_back(r);
  }

  void Host(int64_t ns) { clock_->Advance(ns); }

  void Kernel(int64_t ns, uint64_t stream = 0, std::string_view name = {}) {
    gpu_->Launch(ns, stream, name);
    Enqueue(ActivityKind::kKernel, ns, stream, 0, false,
            name.empty() ? internal::KernelClass::kOther : internal::ClassifyKernel(name),
            internal::InternKernelName(name));
  }
  void Copy(SimulatedDevice::Copy kind, uint64_t bytes, int64_t ns, bool pageable) {
    gpu_->LaunchCopy(kind, bytes, ns, pageable);
    Enqueue(kind == SimulatedDevice::Copy::kHostToDevice ? ActivityKind::kMemcpyH2D
                                                         : ActivityKind::kMemcpyD2H,
            ns, 0, bytes, pageable, internal::KernelClass::kOther);
  }
  void Memset(uint64_t bytes, int64_t ns) {
    gpu_->LaunchMemset(bytes, ns);
    Enqueue(ActivityKind::kMemset, ns, 0, bytes, false, internal::KernelClass::kOther);
  }
  // The host waits for `stream` (an .item()).
  void Sync(uint64_t stream = 0) {
    const int64_t now = clock_->NowNs();
    const int64_t wait = std::max<int64_t>(0, busy_[stream] - now);
    ASSERT_EQ(gpu_->Synchronize(stream), wait);
    DeviceInterval sync;
    sync.begin_ns = now;
    sync.end_ns = now + wait;
    sync.device = device_of_[stream];
    sync.stream = static_cast<uint32_t>(stream);
    sync.kind = ActivityKind::kSync;
    intervals_.push_back(sync);
    clock_->Advance(wait);
  }
  void PlaceStream(uint64_t stream, uint32_t device) {
    gpu_->PlaceStream(stream, static_cast<int>(device));
    device_of_[stream] = device;
  }

  Summary LiveSummary() {
    clock_->Advance(10'000 * kMs);  // past every kernel: nothing left pending
    return session_->Summarize();
  }

  Engine& engine() { return engine_; }
  const Session& session() const { return *session_; }
  const std::vector<Record>& ranges() const { return ranges_; }
  std::vector<DeviceInterval> intervals() const { return intervals_; }
  const Options& options() const { return options_; }

 private:
  void Enqueue(ActivityKind kind, int64_t ns, uint64_t stream, uint64_t bytes, bool pageable,
               internal::KernelClass kernel_class, uint32_t name = internal::kNoKernelName) {
    const int64_t now = clock_->NowNs();
    DeviceInterval a;
    a.begin_ns = std::max(now, busy_[stream]);
    a.end_ns = a.begin_ns + ns;
    a.launch_ns = now;
    a.device = device_of_[stream];
    a.stream = static_cast<uint32_t>(stream);
    a.kind = kind;
    a.pageable = pageable;
    a.bytes = bytes;
    a.kernel_class = kernel_class;
    a.name = name;
    busy_[stream] = a.end_ns;
    intervals_.push_back(a);
  }
  uint16_t engine_phase(const std::string& name) {
    absl::StatusOr<PhaseId> id = engine_.Phase(name);
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? id->value() : 0;
  }

  std::shared_ptr<ManualClock> clock_ = std::make_shared<ManualClock>();
  std::shared_ptr<SimulatedDevice> gpu_;
  Options options_;
  std::unique_ptr<Session> session_;
  Engine engine_{Engine::Config{}};  // only its phase ids: the test's engines are below
  std::vector<Record> ranges_;
  std::vector<DeviceInterval> intervals_;
  std::map<uint64_t, int64_t> busy_;
  std::map<uint64_t, uint32_t> device_of_;
  uint64_t seq_ = 0;
  int depth_ = 0;
  bool in_step_ = false;
};

// What the live session knew about itself, as a recorded run's reader would
// state it: its source and why, and its own overhead (the engine computes
// neither).
SummaryInputs InputsLike(const Summary& live, const Options& options) {
  SummaryInputs in;
  in.window = options.window;
  in.source = live.source;
  in.source_reason = live.source_reason;
  in.simulated = live.simulated;
  in.gpu_clock_error = live.gpu_clock_error;
  in.overhead = live.overhead;
  in.efficiency = internal::EfficiencyInputs::From(options, options.device_name);
  return in;
}

// Phase names the twin's engine gave ids to, registered in the same order
// on `engine` so that the ranges' ids mean the same names.
void RegisterLike(Engine& from_twin, Engine& engine, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    ASSERT_EQ(engine.Phase(name)->value(), from_twin.Phase(name)->value()) << name;
  }
}

// A training loop with something of everything: warm-up steps, a window
// shorter than the run, a slow data phase, a pageable host-to-device copy, a
// launch-bound forward pass with a nested custom phase, GEMMs in backward, a
// memset, a collective on a second GPU, a sync, and a phase between steps.
void PlayLoop(Twin& t) {
  t.PlaceStream(1, 1);
  for (int step = 0; step < 14; ++step) {
    t.Step(/*samples=*/64, [&] {
      t.Phase("data", [&] { t.Host((step % 3 == 0 ? 9 : 3) * kMs); });
      t.Phase("h2d", [&] {
        // Pageable: the host waits for the copy.
        t.Copy(SimulatedDevice::Copy::kHostToDevice, 1 << 24, 800 * kUs, /*pageable=*/true);
        t.Sync(0);
      });
      t.Phase("forward", [&] {
        for (int k = 0; k < 40; ++k) {
          t.Kernel(20 * kUs, 0, "void at::native::vectorized_elementwise_kernel<4>");
          t.Host(30 * kUs);
        }
        t.Phase("attention", [&] {
          t.Kernel(700 * kUs, 0, "flash_fwd_kernel");
          t.Host(100 * kUs);
        });
      });
      t.Phase("backward", [&] {
        for (int k = 0; k < 6; ++k) {
          t.Kernel(400 * kUs, 0, "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_nn");
          t.Host(60 * kUs);
        }
        t.Memset(4096, 5 * kUs);
      });
      t.Phase("comm", [&] {
        t.Kernel(1500 * kUs, 1, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
        t.Host(20 * kUs);
      });
      t.Phase("sync", [&] {
        t.Sync(0);
        t.Sync(1);
      });
      t.Phase("optimizer", [&] {
        t.Kernel(150 * kUs, 0, "multi_tensor_apply_kernel");
        t.Host(200 * kUs);
      });
    });
    if (step == 6) t.Phase("eval", [&] { t.Host(2 * kMs); });
    t.Host(40 * kUs);
  }
}

const std::vector<std::string> kLoopPhases = {"data", "h2d",  "forward",   "attention", "backward",
                                              "comm", "sync", "optimizer", "eval"};

Options LoopOptions() {
  Options o;
  o.window = 8;
  o.warmup_steps = 2;
  o.trace_steps = 4;
  o.flops_per_sample = 3e9;
  o.peak_flops = 1e14;
  return o;
}

Engine::Config ConfigLike(const Options& o, bool device) {
  return Engine::Config{.window = o.window,
                        .warmup_steps = o.warmup_steps,
                        .max_phases = o.max_phases,
                        .device_activity = device,
                        .trace_steps = o.trace_steps};
}

TEST(EngineTest, RecordedRunGivesTheLiveSessionsSummary) {
  Twin twin(LoopOptions(), /*device=*/true);
  PlayLoop(twin);
  const Summary live = twin.LiveSummary();
  // The timeline exercised what it set out to: a cupti summary of two GPUs.
  ASSERT_EQ(live.source, Source::kCupti) << live.source_reason;
  ASSERT_EQ(live.steps, 8);
  ASSERT_TRUE(live.gpu_idle_pct.has_value());
  ASSERT_EQ(live.devices.size(), 2u);
  ASSERT_TRUE(live.activity.has_value());
  ASSERT_GT(live.idle_by_cause.count("launch"), 0u);
  ASSERT_TRUE(live.efficiency.has_value());

  Engine engine(ConfigLike(twin.options(), /*device=*/true));
  RegisterLike(twin.engine(), engine, kLoopPhases);
  engine.AddDeviceIntervals(twin.intervals());
  for (const Record& r : twin.ranges()) engine.AddHostRange(r);
  const Summary recorded = engine.Summarize(InputsLike(live, twin.options()));

  EXPECT_EQ(ToJson(recorded), ToJson(live));
  EXPECT_TRUE(recorded == live);
  // And the same trace of the last steps.
  const std::string trace = internal::ToChromeTrace(engine.Trace());
  EXPECT_NE(trace.find("memcpy HtoD (pageable)"), std::string::npos);
  EXPECT_NE(trace.find("\"cat\":\"sync\""), std::string::npos);
  EXPECT_EQ(trace, ToChromeTrace(twin.session()));
}

// The same with the intervals arriving in pieces as the run goes (as a
// trace reader streaming a file would give them), each before the ranges it
// overlaps, in no particular order within a piece.
TEST(EngineTest, IntervalsGivenInPiecesGiveTheSameSummary) {
  Twin twin(LoopOptions(), /*device=*/true);
  PlayLoop(twin);
  const Summary live = twin.LiveSummary();

  Engine engine(ConfigLike(twin.options(), /*device=*/true));
  RegisterLike(twin.engine(), engine, kLoopPhases);
  std::vector<DeviceInterval> intervals = twin.intervals();
  std::sort(
      intervals.begin(), intervals.end(),
      [](const DeviceInterval& a, const DeviceInterval& b) { return a.begin_ns < b.begin_ns; });
  size_t next = 0;
  for (const Record& r : twin.ranges()) {
    if (r.kind == RecordKind::kStep) {
      // Everything that began before this step ended, newest first.
      std::vector<DeviceInterval> piece;
      while (next < intervals.size() && intervals[next].begin_ns < r.end_ns) {
        piece.push_back(intervals[next++]);
      }
      std::reverse(piece.begin(), piece.end());
      engine.AddDeviceIntervals(std::move(piece));
    }
    engine.AddHostRange(r);
  }
  engine.AddDeviceIntervals(
      {intervals.begin() + static_cast<std::ptrdiff_t>(next), intervals.end()});
  EXPECT_EQ(ToJson(engine.Summarize(InputsLike(live, twin.options()))), ToJson(live));
}

// Without a device timeline: the host breakdown alone, as a session with no
// GPU source gives it.
TEST(EngineTest, HostOnlyRunGivesTheLiveSessionsSummary) {
  Twin twin(LoopOptions(), /*device=*/false);
  for (int step = 0; step < 12; ++step) {
    twin.Step(32, [&] {
      twin.Phase("data", [&] { twin.Host((1 + step % 4) * kMs); });
      twin.Phase("forward", [&] {
        twin.Host(3 * kMs);
        twin.Phase("attention", [&] { twin.Host(kMs); });
      });
      twin.Host(500 * kUs);  // other
    });
  }
  const Summary live = twin.LiveSummary();
  ASSERT_EQ(live.source, Source::kHost);
  ASSERT_EQ(live.steps, 8);

  Engine engine(ConfigLike(twin.options(), /*device=*/false));
  RegisterLike(twin.engine(), engine, {"data", "forward", "attention"});
  for (const Record& r : twin.ranges()) engine.AddHostRange(r);
  EXPECT_EQ(ToJson(engine.Summarize(InputsLike(live, twin.options()))), ToJson(live));
}

// A step's GPU numbers come from the intervals alone: a recorded kernel that
// the live session never saw changes them (the comparison above is not
// vacuous).
TEST(EngineTest, TheIntervalsAreWhatTheGpuNumbersComeFrom) {
  Twin twin(LoopOptions(), /*device=*/true);
  PlayLoop(twin);
  const Summary live = twin.LiveSummary();

  Engine engine(ConfigLike(twin.options(), /*device=*/true));
  RegisterLike(twin.engine(), engine, kLoopPhases);
  std::vector<DeviceInterval> intervals = twin.intervals();
  // Fill the last step's data phase with a kernel.
  const Record* data = nullptr;
  for (const Record& r : twin.ranges()) {
    if (r.kind == RecordKind::kPhase && r.name_id == engine.Phase("data")->value()) data = &r;
  }
  ASSERT_NE(data, nullptr);
  DeviceInterval extra;
  extra.begin_ns = extra.launch_ns = data->begin_ns;
  extra.end_ns = data->end_ns;
  extra.stream = 2;
  intervals.push_back(extra);
  engine.AddDeviceIntervals(std::move(intervals));
  for (const Record& r : twin.ranges()) engine.AddHostRange(r);
  const Summary recorded = engine.Summarize(InputsLike(live, twin.options()));
  ASSERT_TRUE(recorded.gpu_idle_pct.has_value());
  EXPECT_LT(*recorded.gpu_idle_pct, *live.gpu_idle_pct);
  EXPECT_LT(recorded.idle_by_cause.at("data"), live.idle_by_cause.at("data"));
}

}  // namespace
}  // namespace gpuscope
