// Self-test of the NVTX recorder injection (nvtx_recorder.h/.cc).
//
// Runs as its own process: main() points NVTX_INJECTION64_PATH at the
// recorder library before the first NVTX call, so the header-only NVTX
// compiled into this executable loads the recorder exactly as it would load
// Nsight Systems' injection. The recorder path comes from the compile
// definition NVTX_RECORDER_PATH, or from --nvtx_recorder_path=<file>.

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "support/nvtx_recorder.h"

// Exported by the recorder library this test links against; referenced
// directly so the link keeps the library and the test can compare addresses.
extern "C" int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t);

namespace gpuscope::testing {
namespace {

std::string g_recorder_path;  // set in main()

using Kind = NvtxEvent::Kind;

constexpr uint32_t kArgbGreen = 0xFF76B900u;

nvtxEventAttributes_t Attributes() {
  nvtxEventAttributes_t attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.version = NVTX_VERSION;
  attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  return attr;
}

const char* KindName(Kind kind) {
  switch (kind) {
    case Kind::kDomainCreate: return "DomainCreate";
    case Kind::kRegisterString: return "RegisterString";
    case Kind::kPush: return "Push";
    case Kind::kPop: return "Pop";
    case Kind::kMark: return "Mark";
    case Kind::kCounterRegister: return "CounterRegister";
    case Kind::kCounterSample: return "CounterSample";
  }
  return "?";
}

std::string Describe(const std::vector<NvtxEvent>& events) {
  std::string out;
  for (const NvtxEvent& e : events) {
    out += std::string(KindName(e.kind)) + " domain='" + e.domain + "' message='" + e.message + "'";
    if (e.has_payload) out += " payload=" + std::to_string(e.payload);
    if (e.has_color) out += " color=" + std::to_string(e.color);
    out += " tid=" + std::to_string(e.thread_id) + "\n";
  }
  return out;
}

void ExpectEvent(const NvtxEvent& e, Kind kind, const std::string& domain,
                 const std::string& message) {
  EXPECT_EQ(e.kind, kind) << KindName(e.kind);
  EXPECT_EQ(e.domain, domain);
  EXPECT_EQ(e.message, message);
}

TEST(NvtxRecorderSelfTest, AttachesAtFirstNvtxCall) {
  nvtxInitialize(nullptr);  // first NVTX call: loads and initializes
  EXPECT_TRUE(NvtxRecorderAttached());
  // Exactly one NVTX instance lives in this process (this executable).
  EXPECT_EQ(NvtxRecorderAttachCount(), 1);
}

TEST(NvtxRecorderSelfTest, NvtxLoadedTheSameInstanceTheTestLinks) {
  nvtxInitialize(nullptr);
  // RTLD_NOLOAD: succeeds only if the file is already loaded.
  void* handle = dlopen(g_recorder_path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(handle, nullptr) << dlerror();
  EXPECT_EQ(dlsym(handle, "InitializeInjectionNvtx2"),
            reinterpret_cast<void*>(&InitializeInjectionNvtx2));
  EXPECT_EQ(dlsym(handle, "gpuscope_nvtx_recorder_visit_events"),
            dlsym(RTLD_DEFAULT, "gpuscope_nvtx_recorder_visit_events"));
  dlclose(handle);
}

TEST(NvtxRecorderSelfTest, DomainRangeWithRegisteredMessagePayloadAndColor) {
  NvtxRecorderClear();

  nvtxDomainHandle_t domain = nvtxDomainCreateA("gpuscope");
  ASSERT_NE(domain, nullptr);  // null would mean NVTX is not attached
  nvtxStringHandle_t step = nvtxDomainRegisterStringA(domain, "step");
  ASSERT_NE(step, nullptr);

  nvtxEventAttributes_t attr = Attributes();
  attr.colorType = NVTX_COLOR_ARGB;
  attr.color = kArgbGreen;
  attr.payloadType = NVTX_PAYLOAD_TYPE_INT64;
  attr.payload.llValue = 42;
  attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  attr.message.registered = step;
  EXPECT_EQ(nvtxDomainRangePushEx(domain, &attr), 0);
  EXPECT_EQ(nvtxDomainRangePop(domain), 0);

  const std::vector<NvtxEvent> events = NvtxRecorderEvents();
  ASSERT_EQ(events.size(), 4u) << Describe(events);
  ExpectEvent(events[0], Kind::kDomainCreate, "gpuscope", "");
  ExpectEvent(events[1], Kind::kRegisterString, "gpuscope", "step");
  ExpectEvent(events[2], Kind::kPush, "gpuscope", "step");
  EXPECT_TRUE(events[2].has_payload);
  EXPECT_EQ(events[2].payload, 42);
  EXPECT_TRUE(events[2].has_color);
  EXPECT_EQ(events[2].color, kArgbGreen);
  ExpectEvent(events[3], Kind::kPop, "gpuscope", "");
  EXPECT_FALSE(events[3].has_payload);
  EXPECT_FALSE(events[3].has_color);
  for (const NvtxEvent& e : events) {
    EXPECT_EQ(e.thread_id, NvtxRecorderCurrentThreadId());
  }
}

TEST(NvtxRecorderSelfTest, HandlesAreStableAndResolveToTheirText) {
  nvtxDomainHandle_t a = nvtxDomainCreateA("gpuscope");
  nvtxDomainHandle_t b = nvtxDomainCreateA("other");
  EXPECT_EQ(a, nvtxDomainCreateA("gpuscope"));
  EXPECT_NE(a, b);
  nvtxStringHandle_t forward = nvtxDomainRegisterStringA(a, "forward");
  nvtxStringHandle_t backward = nvtxDomainRegisterStringA(a, "backward");
  EXPECT_NE(forward, backward);
  NvtxRecorderClear();  // handles stay valid across Clear()

  nvtxEventAttributes_t outer = Attributes();
  outer.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  outer.message.registered = backward;
  outer.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT32;
  outer.payload.uiValue = 7;
  nvtxEventAttributes_t inner = Attributes();
  inner.messageType = NVTX_MESSAGE_TYPE_ASCII;
  inner.message.ascii = "ascii text";
  inner.payloadType = NVTX_PAYLOAD_TYPE_INT32;
  inner.payload.iValue = -3;
  nvtxEventAttributes_t mark = Attributes();
  mark.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  mark.message.registered = forward;
  mark.payloadType = NVTX_PAYLOAD_TYPE_DOUBLE;  // not recorded
  mark.payload.dValue = 1.5;

  EXPECT_EQ(nvtxDomainRangePushEx(a, &outer), 0);
  EXPECT_EQ(nvtxDomainRangePushEx(b, &inner), 0);  // levels are per domain
  EXPECT_EQ(nvtxDomainRangePushEx(a, &inner), 1);
  nvtxDomainMarkEx(a, &mark);
  EXPECT_EQ(nvtxDomainRangePop(a), 1);
  EXPECT_EQ(nvtxDomainRangePop(b), 0);
  EXPECT_EQ(nvtxDomainRangePop(a), 0);

  const std::vector<NvtxEvent> events = NvtxRecorderEvents();
  ASSERT_EQ(events.size(), 7u) << Describe(events);
  ExpectEvent(events[0], Kind::kPush, "gpuscope", "backward");
  EXPECT_TRUE(events[0].has_payload);
  EXPECT_EQ(events[0].payload, 7);
  EXPECT_FALSE(events[0].has_color);
  ExpectEvent(events[1], Kind::kPush, "other", "ascii text");
  EXPECT_EQ(events[1].payload, -3);
  ExpectEvent(events[2], Kind::kPush, "gpuscope", "ascii text");
  ExpectEvent(events[3], Kind::kMark, "gpuscope", "forward");
  EXPECT_FALSE(events[3].has_payload);
  ExpectEvent(events[4], Kind::kPop, "gpuscope", "");
  ExpectEvent(events[5], Kind::kPop, "other", "");
  ExpectEvent(events[6], Kind::kPop, "gpuscope", "");
}

TEST(NvtxRecorderSelfTest, CoreApiRecordsTheDefaultDomain) {
  NvtxRecorderClear();
  EXPECT_EQ(nvtxRangePushA("core range"), 0);
  nvtxMarkA("core mark");
  nvtxEventAttributes_t attr = Attributes();
  attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attr.message.ascii = "core ex";
  attr.colorType = NVTX_COLOR_ARGB;
  attr.color = 0xFFFF0000u;
  attr.payloadType = NVTX_PAYLOAD_TYPE_UNSIGNED_INT64;
  attr.payload.ullValue = 9;
  EXPECT_EQ(nvtxRangePushEx(&attr), 1);
  EXPECT_EQ(nvtxRangePop(), 1);
  EXPECT_EQ(nvtxRangePop(), 0);
  // A null domain handle is the default domain too.
  nvtxDomainMarkEx(nullptr, &attr);

  const std::vector<NvtxEvent> events = NvtxRecorderEvents();
  ASSERT_EQ(events.size(), 6u) << Describe(events);
  ExpectEvent(events[0], Kind::kPush, "", "core range");
  ExpectEvent(events[1], Kind::kMark, "", "core mark");
  ExpectEvent(events[2], Kind::kPush, "", "core ex");
  EXPECT_EQ(events[2].payload, 9);
  EXPECT_EQ(events[2].color, 0xFFFF0000u);
  ExpectEvent(events[3], Kind::kPop, "", "");
  ExpectEvent(events[4], Kind::kPop, "", "");
  ExpectEvent(events[5], Kind::kMark, "", "core ex");
}

TEST(NvtxRecorderSelfTest, SecondThreadGetsADifferentThreadId) {
  nvtxDomainHandle_t domain = nvtxDomainCreateA("gpuscope");
  NvtxRecorderClear();

  EXPECT_EQ(nvtxRangePushA("main"), 0);
  uint64_t worker_id = 0;
  std::thread worker([&] {
    worker_id = NvtxRecorderCurrentThreadId();
    nvtxEventAttributes_t attr = Attributes();
    attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
    attr.message.ascii = "worker";
    // Nesting levels are per thread: the worker starts at 0.
    EXPECT_EQ(nvtxDomainRangePushEx(domain, &attr), 0);
    EXPECT_EQ(nvtxDomainRangePop(domain), 0);
  });
  worker.join();
  EXPECT_EQ(nvtxRangePop(), 0);

  const std::vector<NvtxEvent> events = NvtxRecorderEvents();
  ASSERT_EQ(events.size(), 4u) << Describe(events);
  const uint64_t main_id = NvtxRecorderCurrentThreadId();
  ASSERT_NE(main_id, worker_id);
  ExpectEvent(events[0], Kind::kPush, "", "main");
  ExpectEvent(events[1], Kind::kPush, "gpuscope", "worker");
  ExpectEvent(events[2], Kind::kPop, "gpuscope", "");
  ExpectEvent(events[3], Kind::kPop, "", "");
  EXPECT_EQ(events[0].thread_id, main_id);
  EXPECT_EQ(events[1].thread_id, worker_id);
  EXPECT_EQ(events[2].thread_id, worker_id);
  EXPECT_EQ(events[3].thread_id, main_id);
}

TEST(NvtxRecorderSelfTest, ConcurrentThreadsAreAllRecorded) {
  nvtxDomainHandle_t domain = nvtxDomainCreateA("gpuscope");
  nvtxStringHandle_t step = nvtxDomainRegisterStringA(domain, "step");
  NvtxRecorderClear();

  constexpr int kThreads = 8;
  constexpr int kStepsPerThread = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([=] {
      for (int i = 0; i < kStepsPerThread; ++i) {
        nvtxEventAttributes_t attr = Attributes();
        attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
        attr.message.registered = step;
        attr.payloadType = NVTX_PAYLOAD_TYPE_INT64;
        attr.payload.llValue = i;
        nvtxDomainRangePushEx(domain, &attr);
        nvtxDomainRangePop(domain);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  const std::vector<NvtxEvent> events = NvtxRecorderEvents();
  ASSERT_EQ(events.size(), static_cast<size_t>(2 * kThreads * kStepsPerThread));
  size_t pushes = 0;
  for (const NvtxEvent& e : events) {
    if (e.kind == Kind::kPush) {
      ++pushes;
      EXPECT_EQ(e.message, "step");
    }
  }
  EXPECT_EQ(pushes, static_cast<size_t>(kThreads * kStepsPerThread));
}

}  // namespace
}  // namespace gpuscope::testing

int main(int argc, char** argv) {
  // Must happen before the first NVTX call in the process; NVTX reads the
  // variable once, at that call.
#ifdef NVTX_RECORDER_PATH
  std::string path = NVTX_RECORDER_PATH;
#else
  std::string path;
#endif
  constexpr const char kFlag[] = "--nvtx_recorder_path=";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], kFlag, sizeof(kFlag) - 1) == 0) {
      path = argv[i] + sizeof(kFlag) - 1;
    }
  }
  if (path.empty()) {
    std::fprintf(stderr,
                 "nvtx_recorder_selftest: no recorder library; build with "
                 "-DNVTX_RECORDER_PATH=\\\"...\\\" or pass "
                 "--nvtx_recorder_path=<file>\n");
    return 2;
  }
  if (setenv("NVTX_INJECTION64_PATH", path.c_str(), /*overwrite=*/1) != 0) {
    std::perror("setenv");
    return 2;
  }
  gpuscope::testing::g_recorder_path = path;

  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
