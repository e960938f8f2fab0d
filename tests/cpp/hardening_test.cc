// What a user, a file or a neighbour can do to gpuscope, and what it must
// not do to the training job in return: boolean switches read one way,
// phase names that cannot rewrite a terminal, saved summaries whose every
// number is checked, findings that stay finite, library paths that cannot
// hang the constructor, telemetry whose cost does not grow with sessions, a
// worker that sleeps when idle, and a reader that cannot make the recording
// thread drop records.

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "backends/telemetry/process_telemetry.h"
#include "base/dynlib.h"
#include "base/env.h"
#include "base/json.h"
#include "gmock/gmock.h"
#include "gpuscope/gpuscope.h"
#include "gpuscope/testing.h"
#include "gtest/gtest.h"
#include "session/session_impl.h"
#include "session/worker.h"
#include "test_util.h"

namespace gpuscope {
namespace {

using ::testing::HasSubstr;
using testing::kMs;
using ::testing::Not;
using testing::TempTree;

// Sets an environment variable for the scope's life.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// Captures what gpuscope logs.
class LogCapture {
 public:
  LogCapture() {
    SetLogSink([this](LogLevel, std::string_view m) {
      std::lock_guard<std::mutex> lock(mu_);
      text_ += std::string(m) + "\n";
    });
  }
  ~LogCapture() { SetLogSink(nullptr); }
  std::string text() {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }

 private:
  std::mutex mu_;
  std::string text_;
};

// ---------------------------------------------------------------------------
// Boolean switches

TEST(EnvTest, ParseBoolReadsTheUsualSpellingsAndNothingElse) {
  for (const char* yes : {"1", "true", "TRUE", "yes", "on", " On ", "\ttrue\n"}) {
    EXPECT_EQ(internal::ParseBool(yes), true) << yes;
  }
  for (const char* no : {"0", "false", "False", "no", "off", " 0", "OFF "}) {
    EXPECT_EQ(internal::ParseBool(no), false) << no;
  }
  for (const char* neither : {"", " ", "2", "maybe", "enable", "y", "t", "00", "-1"}) {
    EXPECT_EQ(internal::ParseBool(neither), std::nullopt) << neither;
  }
}

TEST(EnvTest, SimulateFalseNoOffAndZeroDoNotSimulate) {
  for (const char* off : {"false", "no", "off", " 0", "0", "FALSE", ""}) {
    ScopedEnv env("GPUSCOPE_SIMULATE", off);
    EXPECT_FALSE(SimulationRequested()) << "'" << off << "'";
  }
  for (const char* on : {"1", "true", "yes", "on", " On "}) {
    ScopedEnv env("GPUSCOPE_SIMULATE", on);
    EXPECT_TRUE(SimulationRequested()) << "'" << on << "'";
  }
}

TEST(EnvTest, AValueThatIsNotABooleanIsIgnoredAndSaidOnce) {
  LogCapture log;
  ScopedEnv env("GPUSCOPE_SIMULATE", "maybe");
  EXPECT_FALSE(SimulationRequested());
  EXPECT_FALSE(SimulationRequested());
  const std::string text = log.text();
  EXPECT_THAT(text, HasSubstr("GPUSCOPE_SIMULATE='maybe' is not a boolean"));
  EXPECT_EQ(text.find("GPUSCOPE_SIMULATE"), text.rfind("GPUSCOPE_SIMULATE='"));  // once
}

TEST(EnvTest, SimulatedNumbersAreLabeledSimulated) {
  {
    ScopedEnv env("GPUSCOPE_SIMULATE", "false");
    Session session(Options{.stream = 0});
    {
      StepScope step(session);
    }
    const Summary s = session.Summarize();
    EXPECT_FALSE(s.simulated);
    EXPECT_NE(s.source_reason.find("simulated"), 0u);
    EXPECT_THAT(FormatReport(s), Not(HasSubstr("SIMULATED")));
  }
  {
    ScopedEnv env("GPUSCOPE_SIMULATE", "yes");
    Session session(Options{.stream = 0});
    {
      StepScope step(session);
    }
    const Summary s = session.Summarize();
    EXPECT_TRUE(s.simulated);
    EXPECT_EQ(s.source, Source::kEvents);
    EXPECT_THAT(FormatReport(s), HasSubstr("source: events (SIMULATED GPU)"));
    EXPECT_THAT(ToJson(s), HasSubstr("\"simulated\": true"));
    EXPECT_THAT(ToPrometheus(s), HasSubstr("simulated=\"true\""));
    EXPECT_TRUE(SummaryFromJson(ToJson(s))->simulated);
  }
}

TEST(EnvTest, DisableReadsTheSameWay) {
  {
    ScopedEnv env("GPUSCOPE_DISABLE", "off");
    Session session;
    EXPECT_TRUE(session.recording());
  }
  {
    ScopedEnv env("GPUSCOPE_DISABLE", " yes");
    Session session;
    EXPECT_FALSE(session.recording());
  }
}

// ---------------------------------------------------------------------------
// Phase names and what is printed

TEST(PhaseNameTest, RefusesControlInvisibleAndLookAlikeCharacters) {
  const char* bad[] = {
      "\xc2\x85",  // NEL (C1)
      "a\xe2\x80\xae"
      "b",              // right-to-left override
      "a\xe2\x80\x8b",  // zero-width space
      "\xef\xbb\xbf"
      "x",  // BOM
      "a\xe2\x81\xa6"
      "b",  // left-to-right isolate
      "a\xc2\xa0"
      "b",  // no-break space
      " ",  // a lone space
      " forward",
      "forward ",
      "a\x1b[31m",  // ESC
      "a\rb",
      "\xff",          // not UTF-8
      "\xed\xa0\x80",  // a surrogate, encoded
      "\xc0\xaf",      // overlong
  };
  Session session;
  for (const char* name : bad) {
    const absl::Status status = ValidatePhaseName(name);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << EscapeForTerminal(name);
    // The message shows the name escaped, never raw.
    EXPECT_EQ(std::string(status.message()).find('\x1b'), std::string::npos);
    EXPECT_FALSE(session.RegisterPhase(name).ok()) << EscapeForTerminal(name);
  }
  {
    StepScope step(session);
    PhaseScope p(session,
                 "a\xe2\x80\xae"
                 "b");  // ignored and counted
  }
  EXPECT_EQ(session.Summarize().misuse.invalid_phase, 1);
}

TEST(PhaseNameTest, AcceptsVisibleTextInAnyScript) {
  for (const char* good : {"attention", "a b", "layer.3/attn", "\xe5\x89\x8d\xe5\x90\x91",
                           "\xce\xbb-layer", "rocket \xf0\x9f\x9a\x80", "x"}) {
    EXPECT_TRUE(ValidatePhaseName(good).ok()) << good;
  }
}

TEST(EscapeForTerminalTest, EscapesWhatCouldRewriteTheTerminal) {
  EXPECT_EQ(EscapeForTerminal("plain text, \xe5\x89\x8d\xe5\x90\x91"),
            "plain text, \xe5\x89\x8d\xe5\x90\x91");
  EXPECT_EQ(EscapeForTerminal("a\x1b[2Kb"), "a\\e[2Kb");
  EXPECT_EQ(EscapeForTerminal("x\r\nREGRESSION:"), "x\\r\\nREGRESSION:");
  EXPECT_EQ(EscapeForTerminal("\xc2\x85"), "\\u{0085}");
  EXPECT_EQ(EscapeForTerminal("a\xe2\x80\xae"
                              "b"),
            "a\\u{202E}b");
  EXPECT_EQ(EscapeForTerminal("a\xe2\x80\x8b"), "a\\u{200B}");
  EXPECT_EQ(EscapeForTerminal("\xff\xfe"), "\\xFF\\xFE");
  EXPECT_EQ(EscapeForTerminal("\xe2\x80"), "\\xE2\\x80");  // truncated sequence
}

// Whether `text` holds a byte or character that controls a terminal.
bool HasTerminalControl(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n') || c == 0x7f) return true;
    if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) < 0xa0)
      return true;
    if (text.compare(i, 3, "\xe2\x80\xae") == 0 || text.compare(i, 3, "\xe2\x80\x8b") == 0)
      return true;
  }
  return false;
}

TEST(ReportTest, TextFromASummaryIsPrintedEscaped) {
  Summary s;
  s.version = "1.0\x1b]0;owned\x07";
  s.source_reason = "reason\r\nREGRESSION: fake";
  s.steps = s.total_steps = s.window = 4;
  s.window_time = 0.04;
  s.step_time = Quantiles{.count = 4,
                          .mean = 0.01,
                          .min = 0.01,
                          .max = 0.01,
                          .p50 = 0.01,
                          .p90 = 0.01,
                          .p95 = 0.01,
                          .p99 = 0.01};
  PhaseStats evil;
  evil.name = "data\x1b[2K\r\xc2\x85REGRESSION\xe2\x80\xae";
  evil.share = evil.inclusive_share = 1;
  evil.steps = 4;
  evil.count = 4;
  evil.time = s.step_time;
  s.phases.push_back(evil);
  s.gpu_idle_pct = 50;
  s.idle_by_cause[evil.name] = 50;
  s.source = Source::kEvents;
  s.gpu_steps = 4;
  const std::string report = FormatReport(s);
  EXPECT_FALSE(HasTerminalControl(report)) << report;
  EXPECT_THAT(report, HasSubstr("data\\e[2K\\r\\u{0085}REGRESSION\\u{202E}"));
}

TEST(ReportTest, DroppedRecordsAreSaidAtTheTop) {
  Summary s;
  s.misuse.dropped_records = 1234;
  s.misuse.incomplete_steps = 7;
  const std::string report = FormatReport(s);
  const size_t warning = report.find("1234 records were dropped");
  ASSERT_NE(warning, std::string::npos) << report;
  EXPECT_LT(warning, report.find("no completed steps yet"));
  EXPECT_THAT(report, HasSubstr("7 steps were left out"));
}

// ---------------------------------------------------------------------------
// Saved summaries: every number checked on read

// A realistic summary's JSON, with activity, telemetry and two phases.
std::string SampleSummaryJson() {
  Summary s;
  s.version = "1.0";
  s.source = Source::kCupti;
  s.source_reason = "activity records";
  s.window = 64;
  s.steps = 10;
  s.total_steps = 12;
  s.window_time = 0.2;
  s.step_time = Quantiles{.count = 10,
                          .mean = 0.02,
                          .stddev = 0.001,
                          .min = 0.018,
                          .max = 0.025,
                          .p50 = 0.02,
                          .p90 = 0.021,
                          .p95 = 0.022,
                          .p99 = 0.024};
  s.lifetime_step_time = s.step_time;
  s.lifetime_step_time.count = 12;
  s.gpu_steps = 10;
  s.device_step_time = s.step_time;
  PhaseStats data;
  data.name = "data";
  data.builtin = data.top_level = true;
  data.steps = data.count = 10;
  data.total = 0.1;
  data.share = data.inclusive_share = 0.5;
  data.time = s.step_time;
  PhaseStats other = data;
  other.name = "other";
  other.builtin = false;
  s.phases = {data, other};
  s.samples_per_second = 3200;
  s.gpu_idle_pct = 60;
  s.idle_by_cause = {{"data", 50}, {"launch", 10}};
  ActivityStats a;
  a.kernels_per_step = 100;
  a.kernel_time_per_step = 0.008;
  a.gemm_time_per_step = 0.006;
  a.fp32_gemm_time_per_step = 0.003;
  a.collective_time_per_step = 0.001;
  a.exposed_collective_time_per_step = 0.0005;
  a.copies_per_step = 4;
  a.pageable_copies_per_step = 2;
  a.pageable_h2d_copies_per_step = 1;
  s.activity = a;
  TelemetryStats t;
  t.source = "/proc";
  t.steps = 10;
  t.host_cpu_pct = 40;
  t.throttled_steps = 0.1;
  s.telemetry = t;
  return ToJson(s);
}

// `json` with the first occurrence of `from` replaced by `to`.
std::string Replace(std::string json, const std::string& from, const std::string& to) {
  const size_t at = json.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) json.replace(at, from.size(), to);
  return json;
}

TEST(SummaryJsonTest, TheSampleReadsBack) {
  const absl::StatusOr<Summary> s = SummaryFromJson(SampleSummaryJson());
  ASSERT_TRUE(s.ok()) << s.status();
}

TEST(SummaryJsonTest, RefusesValuesNoSessionProduces) {
  const std::string json = SampleSummaryJson();
  struct Case {
    const char* from;
    const char* to;
    const char* says;
  } cases[] = {
      {"\"p95\": 0.022", "\"p95\": -1", "'step_time.p95' is -1"},
      {"\"steps\": 10", "\"steps\": -3", "'steps' is -3"},
      {"\"gpu_idle_pct\": 60", "\"gpu_idle_pct\": 200", "'gpu_idle_pct' is 200"},
      {"\"share\": 0.5", "\"share\": 50", "'phases[0].share' is 50"},
      {"\"total_steps\": 12", "\"total_steps\": 1e300", "'total_steps' must be an integer"},
      {"\"mean\": 0.02", "\"mean\": 1e300", "'step_time.mean' is 1e+300"},
      {"\"host_cpu_pct\": 40", "\"host_cpu_pct\": 101", "'telemetry.host_cpu_pct' is 101"},
      {"\"throttled_steps\": 0.1", "\"throttled_steps\": -0.5", "'telemetry.throttled_steps'"},
      {"\"samples_per_second\": 3200", "\"samples_per_second\": -1", "'samples_per_second' is -1"},
      {"\"dropped_records\": 0", "\"dropped_records\": -1", "dropped_records' is -1"},
      {"\"data\": 50", "\"data\": -5", "'idle_by_cause.data' is -5"},
      {"\"simulated\": false", "\"simulated\": 1", "'simulated' must be true or false"},
      {"\"name\": \"data\"", "\"name\": \"data\\u001b[2K\"",
       "is not a phase name a session accepts"},
      {"\"name\": \"data\"", "\"name\": \"x\\u202e\"", "is not a phase name a session accepts"},
      {"\"name\": \"data\"", "\"name\": \" \"", "is not a phase name a session accepts"},
      // Relations between fields.
      {"\"p50\": 0.02", "\"p50\": 0.024999", "step_time quantiles are not ordered"},
      {"\"steps\": 10", "\"steps\": 100", "steps exceeds window"},
      {"\"total_steps\": 12", "\"total_steps\": 5", "total_steps is less than steps"},
      {"\"count\": 10", "\"count\": 3", "step_time.count differs from steps"},
      {"\"gpu_steps\": 10", "\"gpu_steps\": 11", "gpu_steps exceeds steps"},
      {"\"data\": 50", "\"data\": 59", "idle_by_cause sums to"},
      {"\"gemm_time_per_step\": 0.006", "\"gemm_time_per_step\": 4.9e-324",
       "activity kernel times are inconsistent"},
      {"\"kernel_time_per_step\": 0.008", "\"kernel_time_per_step\": 0.001",
       "activity kernel times are inconsistent"},
      {"\"pageable_copies_per_step\": 2", "\"pageable_copies_per_step\": 9",
       "activity copy counts"},
      {"\"inclusive_share\": 0.5", "\"inclusive_share\": 0.25",
       "share exceeds its inclusive_share"},
  };
  for (const Case& c : cases) {
    const absl::StatusOr<Summary> s = SummaryFromJson(Replace(json, c.from, c.to));
    EXPECT_FALSE(s.ok()) << c.to;
    if (!s.ok()) {
      EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << c.to;
      EXPECT_THAT(std::string(s.status().message()), HasSubstr(c.says)) << c.to;
      EXPECT_FALSE(HasTerminalControl(std::string(s.status().message()))) << s.status();
    }
  }
}

// ---------------------------------------------------------------------------
// Findings stay finite whatever the summary holds

TEST(DiagnoseTest, DenormalAndZeroKernelTimesGiveNoNan) {
  absl::StatusOr<Summary> base = SummaryFromJson(SampleSummaryJson());
  ASSERT_TRUE(base.ok());
  for (const double tiny : {4.9e-324, 1e-310, 0.0}) {
    Summary s = *base;
    s.activity->kernel_time_per_step = tiny;
    s.activity->gemm_time_per_step = 0;
    s.activity->fp32_gemm_time_per_step = 0;
    const std::vector<Finding> findings = Diagnose(s);
    for (const Finding& f : findings) {
      EXPECT_TRUE(std::isfinite(f.share)) << f.id;
      EXPECT_THAT(f.title, Not(HasSubstr("nan"))) << f.id;
      for (const auto& [name, v] : f.evidence) EXPECT_TRUE(std::isfinite(v)) << f.id << " " << name;
    }
    EXPECT_THAT(ToJson(findings), Not(HasSubstr("null")));
    EXPECT_THAT(FormatReport(s), Not(HasSubstr("nan")));
  }
}

// ---------------------------------------------------------------------------
// Library paths

// Runs `fn` with a deadline; past it, opens `fifo` for writing (which lets a
// reader blocked in open() go on) and reports the hang.
template <typename Fn>
bool FinishesWithin(std::chrono::seconds limit, const std::string& fifo, Fn fn) {
  std::future<void> done = std::async(std::launch::async, fn);
  if (done.wait_for(limit) == std::future_status::ready) return true;
  const int fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
  if (fd >= 0) close(fd);
  done.wait();
  return false;
}

TEST(DynLibTest, RefusesAFifoInsteadOfBlockingOnIt) {
  TempTree tree;
  const std::string fifo = tree.Path("libcuda.so.1");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  absl::Status status;
  EXPECT_TRUE(FinishesWithin(std::chrono::seconds(10), fifo,
                             [&] { status = internal::DynLib::Open(fifo).status(); }));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("is not a regular file (a FIFO)"));
  // A directory, and a missing file, are plain errors too.
  EXPECT_FALSE(internal::DynLib::Open(tree.root() + "/").ok());
  EXPECT_EQ(internal::DynLib::Open(tree.Path("missing.so")).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(DynLibTest, ASessionWithLibraryPathsAtFifosStartsAndSaysWhy) {
  // The CUDA driver is loaded once per process: in a process where another
  // test already loaded it (or failed to), the paths below would never be
  // read. The session runs in a fresh process: gtest's "threadsafe" death
  // test style runs this test again, from the start, in a re-executed binary.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TempTree tree;
  const std::string cuda = tree.Path("cuda"), nvml = tree.Path("nvml"), cupti = tree.Path("cupti");
  for (const std::string& f : {cuda, nvml, cupti}) ASSERT_EQ(mkfifo(f.c_str(), 0600), 0);
  ScopedEnv e1("GPUSCOPE_LIBCUDA", cuda.c_str());
  ScopedEnv e2("GPUSCOPE_LIBNVML", nvml.c_str());
  ScopedEnv e3("GPUSCOPE_LIBCUPTI", cupti.c_str());
  EXPECT_EXIT(
      {
        Summary s;
        const bool finished = FinishesWithin(std::chrono::seconds(10), cuda, [&] {
          Session session;
          {
            StepScope step(session);
          }
          s = session.Summarize();
        });
        std::fprintf(stderr, "finished=%d source=%s reason: %s\n", finished ? 1 : 0,
                     std::string(SourceName(s.source)).c_str(), s.source_reason.c_str());
        std::exit(finished && s.source == Source::kHost &&
                          s.source_reason.find("is not a regular file") != std::string::npos
                      ? 0
                      : 1);
      },
      ::testing::ExitedWithCode(0), "finished=1 source=host reason: .*is not a regular file");
}

// ---------------------------------------------------------------------------
// A step whose end went unobserved (a Python loop left by break)

TEST(EndAtLastActivityTest, EndsTheStepWhereItsLastScopeEnded) {
  testing::ClockedSession s;
  ScopeToken step = s->BeginStep();
  s.Phase(Phase::kForward, 5 * kMs);
  s.clock->Advance(100 * kMs);  // after the loop was left
  EXPECT_EQ(s->EndAtLastActivity(step), ScopeStatus::kOk);
  s.clock->Advance(1 * kMs);
  const Summary summary = s->Summarize();
  ASSERT_EQ(summary.steps, 1);
  EXPECT_DOUBLE_EQ(summary.step_time.max, 0.005);
  EXPECT_EQ(summary.misuse.total(), 0);
}

TEST(EndAtLastActivityTest, NeverEndsAScopeBeforeItBegan) {
  testing::ClockedSession s;
  s.Phase(Phase::kData, 2 * kMs);  // the last end is before the step
  s.clock->Advance(10 * kMs);
  ScopeToken step = s->BeginStep();
  s.clock->Advance(3 * kMs);
  ScopeToken inner = s->BeginPhase(Phase::kForward);  // still open
  s.clock->Advance(50 * kMs);
  s->EndAtLastActivity(step);
  (void)inner;
  const Summary summary = s->Summarize();
  ASSERT_EQ(summary.steps, 1);
  EXPECT_DOUBLE_EQ(summary.step_time.max, 0.003);  // up to the inner scope's begin
  const PhaseStats* forward = summary.FindPhase("forward");
  ASSERT_NE(forward, nullptr);
  EXPECT_GE(forward->time.min, 0.0);
  EXPECT_DOUBLE_EQ(forward->time.max, 0.0);
}

// ---------------------------------------------------------------------------
// Telemetry and the worker

TEST(ProcessTelemetryTest, SampledOncePerIntervalHoweverManySessions) {
  constexpr int kSessions = 40;
  std::vector<std::unique_ptr<Session>> sessions;
  const uint64_t before = internal::ProcessTelemetrySamples();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kSessions; ++i) {
    sessions.push_back(
        std::make_unique<Session>(Options{.window = 8, .telemetry_interval_ms = 50}));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  const double elapsed_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const uint64_t taken = internal::ProcessTelemetrySamples() - before;
  // One sample per 50 ms for the process (a few more for timing slack), not
  // one per session: 40 sessions would take about 480.
  EXPECT_GE(taken, 3u);
  EXPECT_LE(static_cast<double>(taken), elapsed_ms / 50 + 4);
  sessions.clear();
  const uint64_t after_close = internal::ProcessTelemetrySamples();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(internal::ProcessTelemetrySamples(), after_close);  // nobody left to sample for
}

TEST(ProcessTelemetryTest, EverySessionGetsTheSharedSamples) {
  Session a(Options{.telemetry_interval_ms = 20});
  Session b(Options{.telemetry_interval_ms = 20});
  for (int i = 0; i < 20; ++i) {
    {
      StepScope step(a);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    {
      StepScope step(b);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  for (Session* s : {&a, &b}) {
    const Summary summary = s->Summarize();
    ASSERT_TRUE(summary.telemetry.has_value());
    EXPECT_GT(summary.telemetry->steps, 0);
    EXPECT_TRUE(summary.telemetry->host_cpu_pct.has_value());
  }
}

TEST(WorkerTest, SleepsWhileNoSessionIsOpen) {
  {
    Session session(Options{.flush_interval_ms = 1});
  }
  internal::Worker& worker = internal::Worker::Get();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a pass in flight ends
  const uint64_t passes = worker.passes();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // At most the one pass that may have been under way (a worker waking every
  // 1 ms, or every 10 ms before this change, would make dozens).
  EXPECT_LE(worker.passes(), passes + 1);
  {
    Session session(Options{.flush_interval_ms = 1});
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_GT(worker.passes(), passes);  // and wakes for a new one
  }
}

TEST(WorkerTest, ClosingTheFastestSessionSlowsTheWorkerDown) {
  internal::Worker& worker = internal::Worker::Get();
  Session slow(Options{.flush_interval_ms = 1000});
  {
    Session fast(Options{.flush_interval_ms = 1});
    EXPECT_EQ(worker.interval(), std::chrono::milliseconds(1));
  }
  // The 1 ms session is gone: the worker waits as long as the one left asks.
  EXPECT_EQ(worker.interval(), std::chrono::milliseconds(1000));
}

TEST(StagingTest, AReaderHoldingTheLockDoesNotMakeTheLoopDrop) {
  constexpr int kCapacity = 1024;
  Session session(Options{.window = 64, .queue_capacity = kCapacity, .flush_interval_ms = 1});
  constexpr int kBursts = 16, kPerBurst = 256;  // 4x the queue in all
  {
    // A slow reader (a summary of a large window) holds the aggregator lock
    // the whole time: the worker must still take records off the queue.
    std::unique_lock<std::mutex> reader = internal::SessionTestPeer::HoldAggregator(session);
    for (int b = 0; b < kBursts; ++b) {
      StepScope step(session);
      for (int i = 0; i < kPerBurst - 1; ++i) PhaseScope p(session, Phase::kForward);
      std::this_thread::sleep_for(std::chrono::milliseconds(60));
    }
  }
  const Summary s = session.Summarize();
  EXPECT_EQ(s.misuse.dropped_records, 0);
  EXPECT_EQ(s.total_steps, kBursts);
  const PhaseStats* forward = s.FindPhase("forward");
  ASSERT_NE(forward, nullptr);
  EXPECT_EQ(forward->count, kBursts * (kPerBurst - 1));
}

}  // namespace
}  // namespace gpuscope
