// The versioned JSON encoding round-trips exactly and rejects bad input with
// a message that says what is wrong.

#include <algorithm>
#include <string>
#include <string_view>

#include "gpuscope/gpuscope.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace gpuscope {
namespace {

using testing::ClockedSession;
using testing::kMs;
using testing::kUs;

Summary RecordedSummary() {
  ClockedSession s(Options{.window = 16});
  for (int i = 0; i < 40; ++i) {
    StepScope step(*s, {.samples = 32, .tokens = 1000 + i});
    s.Phase(Phase::kData, (3 + i % 5) * kMs + 7);  // odd nanoseconds: awkward doubles
    {
      PhaseScope fwd(*s, Phase::kForward);
      s.clock->Advance(5 * kMs + 13 * kUs);
      s.Phase("attention \"fused\" \\ layer", 333);  // characters JSON must escape
    }
  }
  s.Phase(Phase::kCheckpoint, 100 * kMs);
  const ScopeToken a = s->BeginStep();
  const ScopeToken b = s->BeginPhase(Phase::kSync);
  s->End(a);
  s->End(b);  // misuse counters are part of the encoding
  return s->Summarize();
}

TEST(SummaryJsonTest, RoundTripIsExact) {
  Summary original = RecordedSummary();
  original.gpu_idle_pct = 37.25;  // GPU fields as a GPU source would fill them
  original.idle_by_cause = {{"data", 30.0}, {"launch", 7.25}};
  original.source = Source::kEvents;
  const std::string json = ToJson(original);
  EXPECT_NE(json.find("\"schema_version\": 2"), std::string::npos);
  const absl::StatusOr<Summary> back = SummaryFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, original);
  EXPECT_EQ(ToJson(*back), json);
  EXPECT_EQ(back->misuse.out_of_order_end, 1);
  // 15 of the window's 16 steps have it (the last is the misuse step).
  EXPECT_EQ(back->FindPhase("attention \"fused\" \\ layer")->count, 15);
}

TEST(SummaryJsonTest, EmptySummaryRoundTrips) {
  Summary empty;
  const absl::StatusOr<Summary> back = SummaryFromJson(ToJson(empty));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, empty);
  EXPECT_FALSE(back->samples_per_second.has_value());
}

TEST(SummaryJsonTest, RejectsTextThatIsNotASummary) {
  for (const char* bad : {"", "{", "[]", "null", "{\"schema_version\": \"1\"}", "{\"hello\": 1}",
                          "not json at all"}) {
    const absl::StatusOr<Summary> r = SummaryFromJson(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("summary"), std::string_view::npos) << r.status();
  }
}

TEST(SummaryJsonTest, OtherSchemaVersionIsAPreconditionError) {
  std::string json = ToJson(Summary{});
  json.replace(json.find("\"schema_version\": 2"), 19, "\"schema_version\": 99");
  const absl::StatusOr<Summary> r = SummaryFromJson(json);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("99"), std::string_view::npos);
}

TEST(SummaryJsonTest, VersionOneFilesStillRead) {
  // Version 1 had no telemetry (nor devices, activity): all optional on read.
  std::string json = ToJson(Summary{});
  json.replace(json.find("\"schema_version\": 2"), 19, "\"schema_version\": 1");
  const absl::StatusOr<Summary> r = SummaryFromJson(json);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->telemetry.has_value());
}

Summary WithDeviceTimeByCategory() {
  Summary s;
  s.source = Source::kCupti;
  s.window = 8;
  s.steps = s.total_steps = s.gpu_steps = 4;
  s.step_time = {.count = 4,
                 .mean = 0.012,
                 .min = 0.012,
                 .max = 0.012,
                 .p50 = 0.012,
                 .p90 = 0.012,
                 .p95 = 0.012,
                 .p99 = 0.012};
  s.lifetime_step_time = s.step_time;
  s.window_time = 0.048;
  s.gpu_idle_pct = 25;
  ActivityStats a;
  a.kernels_per_step = 3;
  a.kernel_time_per_step = 0.007;
  a.device_time_kernel = 0.006;
  a.device_time_memcpy = 0.001;
  a.device_time_memset = 0.0005;
  a.device_time_comm = 0.0005;
  a.device_time_idle = 0.004;
  a.device_share_kernel = 0.5;
  a.device_share_memcpy = 1.0 / 12;
  a.device_share_memset = 1.0 / 24;
  a.device_share_comm = 1.0 / 24;
  a.device_share_idle = 1.0 / 3;
  s.activity = a;
  return s;
}

// Drops every line of `json` that holds `key` (the encoding puts one field
// per line).
std::string WithoutLinesHolding(const std::string& json, std::string_view key) {
  std::string out;
  size_t at = 0;
  while (at < json.size()) {
    const size_t end = std::min(json.find('\n', at), json.size());
    const std::string_view line = std::string_view(json).substr(at, end - at);
    if (line.find(key) == std::string_view::npos) {
      out.append(line);
      out += '\n';
    }
    at = end + 1;
  }
  return out;
}

TEST(SummaryJsonTest, DeviceTimeByCategoryRoundTripsAndOlderFilesStillRead) {
  const Summary s = WithDeviceTimeByCategory();
  const std::string json = ToJson(s);
  const absl::StatusOr<Summary> back = SummaryFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, s);
  // Written before the split existed: the activity object without it.
  const std::string older =
      WithoutLinesHolding(WithoutLinesHolding(json, "\"device_time_"), "\"device_share_");
  ASSERT_EQ(older.find("device_share"), std::string::npos);
  const absl::StatusOr<Summary> old = SummaryFromJson(older);
  ASSERT_TRUE(old.ok()) << old.status();
  ASSERT_TRUE(old->activity.has_value());
  EXPECT_FALSE(old->activity->device_time_kernel.has_value());
  EXPECT_FALSE(old->activity->device_share_idle.has_value());
  EXPECT_DOUBLE_EQ(old->activity->kernels_per_step, 3);
}

TEST(SummaryJsonTest, DeviceTimeByCategoryMustBeWholeAndSumToOne) {
  Summary partial = WithDeviceTimeByCategory();
  partial.activity->device_time_comm.reset();
  EXPECT_FALSE(SummaryFromJson(ToJson(partial)).ok());
  Summary off = WithDeviceTimeByCategory();
  off.activity->device_share_idle = 0.5;  // the shares sum to 7/6
  const absl::Status st = SummaryFromJson(ToJson(off)).status();
  EXPECT_NE(st.message().find("device time by category"), std::string_view::npos) << st;
}

TEST(SummaryJsonTest, TelemetryRoundTrips) {
  Summary s;
  TelemetryStats t;
  t.source = "NVML, /proc";
  t.steps = 3;
  t.gpu_utilization_pct = 97.5;
  t.sm_clock_ratio = 0.71;
  t.throttled_steps = 1.0 / 3;
  t.clocks_event_reasons = {"sw_power_cap"};
  t.host_cpu_pct = 35;
  t.worker_cores = 3.5;
  GpuTelemetry g;
  g.index = 0;
  g.utilization_pct = 97.5;
  g.sm_clock_mhz = 1410;
  g.sm_clock_max_mhz = 1980;
  g.clocks_event_reasons = {"sw_power_cap"};
  g.process_memory_bytes = 12e9;
  t.gpus = {g};
  s.telemetry = t;
  const absl::StatusOr<Summary> back = SummaryFromJson(ToJson(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->telemetry, s.telemetry);
}

TEST(SummaryJsonTest, MemoryRoundTripsWithItsUnknownsAndItsOom) {
  Summary s;
  MemoryStats m;
  m.source = "torch.cuda";
  m.samples = 40;
  m.steps = 20;
  GpuMemory g;
  g.device = 1;
  g.allocated_bytes = 3e9;
  g.peak_allocated_bytes = 7.5e9;
  g.peak_reserved_bytes = 8e9;
  g.peak_exact = true;
  g.peak_step = 17;
  g.peak_phase = "backward";
  g.min_allocated_bytes = 2.5e9;
  g.fragmentation = 1 - 7.5 / 8;
  g.alloc_retries = 2;
  g.retry_steps = 1;
  g.retry_time = 0.25;
  g.total_bytes = 80e9;  // reserved_bytes and process_used_bytes stay unknown (NaN)
  m.gpus = {g};
  m.peak_by_phase = {{"forward", 6e9}, {"backward", 7.5e9}};
  OomEvent oom;
  oom.step = 21;
  oom.phase = "attention";
  oom.phase_path = "forward/attention";
  oom.device = 1;
  oom.requested_bytes = 2e9;
  oom.message = "CUDA out of memory. Tried to allocate 1.86 GiB.";
  m.oom = oom;
  s.memory = m;
  const std::string json = ToJson(s);
  EXPECT_NE(json.find("\"reserved_bytes\": null"), std::string::npos);
  const absl::StatusOr<Summary> back = SummaryFromJson(json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->memory, s.memory);
  // A summary saved before memory existed reads as one without it.
  EXPECT_FALSE(SummaryFromJson(ToJson(Summary{}))->memory.has_value());
}

TEST(SummaryJsonTest, NamesTheFieldThatIsMissingOrMistyped) {
  const std::string json = ToJson(RecordedSummary());
  std::string missing = json;
  missing.replace(missing.find("\"p95\""), 5, "\"pXX\"");
  EXPECT_NE(SummaryFromJson(missing).status().message().find("step_time.p95"),
            std::string_view::npos);
  std::string mistyped = json;
  const size_t at = mistyped.find("\"builtin\": ");
  mistyped.replace(at, 15, "\"builtin\": 3   ");
  const absl::Status st = SummaryFromJson(mistyped).status();
  EXPECT_NE(st.message().find("phases[0].builtin"), std::string_view::npos) << st;
}

TEST(SummaryJsonTest, EveryTruncationIsRejected) {
  const std::string json = ToJson(RecordedSummary());
  const size_t end = json.find_last_of('}');
  for (size_t n = 0; n < end; n += 3) {
    ASSERT_FALSE(SummaryFromJson(std::string_view(json).substr(0, n)).ok()) << n;
  }
}

}  // namespace
}  // namespace gpuscope
