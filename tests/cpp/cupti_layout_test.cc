// gpuscope reads every version of a CUPTI activity record through the
// oldest one it may receive (backends/cupti/cupti_records.h), whichever
// version the CUPTI found at run time writes. The static_asserts there hold
// each field gpuscope reads to the same offset and width in every version
// the header defines, in every build; this test is the run-time view of the
// same promise: a record written as each version CUPTI 12 and 13 write reads
// back, through gpuscope's types, as the values written.

#include <cupti.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "backends/cupti/cupti_records.h"
#include "gtest/gtest.h"

namespace gpuscope::internal {
namespace {

constexpr uint64_t kStart = 0x0123'4567'89ab'cdefULL;
constexpr uint64_t kEnd = 0x0fed'cba9'8765'4321ULL;
constexpr uint32_t kDevice = 0xd0d0d0d0u;
constexpr uint32_t kStream = 0x5a5a5a5au;
constexpr uint32_t kCorrelation = 0xc0ffee01u;

// The first bytes of `record` as gpuscope's type sees them (copied: the
// buffers CUPTI fills are bytes to the compiler, and so is this).
template <typename Ours, typename Theirs>
Ours ReadAs(const Theirs& record) {
  static_assert(sizeof(Ours) <= sizeof(Theirs), "a newer version only appends");
  Ours ours;
  std::memcpy(&ours, &record, sizeof(ours));
  return ours;
}

template <typename Theirs>
void ExpectKernelReadsBack() {
  static const char kName[] = "ampere_sgemm_128x64_nn";
  Theirs r{};
  r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  r.start = kStart;
  r.end = kEnd;
  r.deviceId = kDevice;
  r.streamId = kStream;
  r.correlationId = kCorrelation;
  r.name = kName;
  const cupti::KernelRecord ours = ReadAs<cupti::KernelRecord>(r);
  EXPECT_EQ(ours.kind, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  EXPECT_EQ(ours.start, kStart);
  EXPECT_EQ(ours.end, kEnd);
  EXPECT_EQ(ours.deviceId, kDevice);
  EXPECT_EQ(ours.streamId, kStream);
  EXPECT_EQ(ours.correlationId, kCorrelation);
  EXPECT_EQ(ours.name, kName);
}

template <typename Theirs>
void ExpectMemcpyReadsBack() {
  Theirs r{};
  r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  r.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  r.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
  r.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  r.bytes = kEnd;
  r.start = kStart;
  r.end = kEnd;
  r.deviceId = kDevice;
  r.streamId = kStream;
  r.correlationId = kCorrelation;
  const cupti::MemcpyRecord ours = ReadAs<cupti::MemcpyRecord>(r);
  EXPECT_EQ(ours.kind, CUPTI_ACTIVITY_KIND_MEMCPY);
  EXPECT_EQ(ours.copyKind, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
  EXPECT_EQ(ours.srcKind, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE);
  EXPECT_EQ(ours.dstKind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
  EXPECT_EQ(ours.bytes, kEnd);
  EXPECT_EQ(ours.start, kStart);
  EXPECT_EQ(ours.end, kEnd);
  EXPECT_EQ(ours.deviceId, kDevice);
  EXPECT_EQ(ours.streamId, kStream);
  EXPECT_EQ(ours.correlationId, kCorrelation);
}

template <typename Theirs>
void ExpectSyncReadsBack() {
  Theirs r{};
  r.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  r.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT;
  r.start = kStart;
  r.end = kEnd;
  r.streamId = kStream;
  const cupti::SyncRecord ours = ReadAs<cupti::SyncRecord>(r);
  EXPECT_EQ(ours.kind, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  EXPECT_EQ(ours.type, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT);
  EXPECT_EQ(ours.start, kStart);
  EXPECT_EQ(ours.end, kEnd);
  EXPECT_EQ(ours.streamId, kStream);
}

TEST(CuptiLayoutTest, EveryKernelRecordVersionReadsBack) {
  ExpectKernelReadsBack<CUpti_ActivityKernel8>();  // CUPTI 12.0
  ExpectKernelReadsBack<CUpti_ActivityKernel9>();  // CUPTI 12.x
#if CUPTI_API_VERSION >= 130000
  ExpectKernelReadsBack<CUpti_ActivityKernel10>();  // CUPTI 13
#endif
}

TEST(CuptiLayoutTest, EveryMemcpyAndSyncRecordVersionReadsBack) {
  ExpectMemcpyReadsBack<CUpti_ActivityMemcpy5>();
  ExpectSyncReadsBack<CUpti_ActivitySynchronization>();
#if CUPTI_API_VERSION >= 130000
  ExpectMemcpyReadsBack<CUpti_ActivityMemcpy6>();
  ExpectSyncReadsBack<CUpti_ActivitySynchronization2>();
#endif
}

TEST(CuptiLayoutTest, SubscriberParametersAreThirteenOhsThenTheSharingFlag) {
  // 13.0 reads the four fields up to oldSubscriberSize; 13.2 reads the flag
  // right after them (the size gpuscope passes says which).
  EXPECT_EQ(cupti::kSubscriberParamsSize130, 4 * sizeof(void*));
  EXPECT_GT(cupti::kSubscriberParamsSize132, cupti::kSubscriberParamsSize130);
#if CUPTI_API_VERSION >= 130000
  EXPECT_EQ(cupti::kSubscriberParamsSize130,
            offsetof(CUpti_SubscriberParams, oldSubscriberSize) + sizeof(size_t));
#endif
}

}  // namespace
}  // namespace gpuscope::internal
