// gpuscope reads CUPTI's activity records through its own declarations
// (backends/cupti_records.h) so that building needs no CUPTI header. Where
// the header is installed, this test holds them to it: every field gpuscope
// reads sits where CUPTI writes it, in every record version this header
// defines that gpuscope may receive, and the enum values agree.

#include <cupti.h>

#include <cstddef>

#include "backends/cupti/cupti_records.h"
#include "gtest/gtest.h"

namespace gpuscope::internal {
namespace {

#define SAME_OFFSET(Ours, field, Theirs, their_field) \
  static_assert(offsetof(cupti::Ours, field) == offsetof(Theirs, their_field), #Theirs "." #their_field)

SAME_OFFSET(KernelRecord, start, CUpti_ActivityKernel4, start);
SAME_OFFSET(KernelRecord, end, CUpti_ActivityKernel4, end);
SAME_OFFSET(KernelRecord, device_id, CUpti_ActivityKernel4, deviceId);
SAME_OFFSET(KernelRecord, stream_id, CUpti_ActivityKernel4, streamId);
SAME_OFFSET(KernelRecord, correlation_id, CUpti_ActivityKernel4, correlationId);
SAME_OFFSET(KernelRecord, name, CUpti_ActivityKernel4, name);
SAME_OFFSET(KernelRecord, name, CUpti_ActivityKernel9, name);
SAME_OFFSET(KernelRecord, name, CUpti_ActivityKernel10, name);
SAME_OFFSET(KernelRecord, correlation_id, CUpti_ActivityKernel9, correlationId);
SAME_OFFSET(KernelRecord, stream_id, CUpti_ActivityKernel9, streamId);
SAME_OFFSET(MemcpyRecord, copy_kind, CUpti_ActivityMemcpy5, copyKind);
SAME_OFFSET(MemcpyRecord, src_kind, CUpti_ActivityMemcpy5, srcKind);
SAME_OFFSET(MemcpyRecord, dst_kind, CUpti_ActivityMemcpy5, dstKind);
SAME_OFFSET(MemcpyRecord, bytes, CUpti_ActivityMemcpy5, bytes);
SAME_OFFSET(MemcpyRecord, start, CUpti_ActivityMemcpy5, start);
SAME_OFFSET(MemcpyRecord, end, CUpti_ActivityMemcpy5, end);
SAME_OFFSET(MemcpyRecord, device_id, CUpti_ActivityMemcpy5, deviceId);
SAME_OFFSET(MemcpyRecord, stream_id, CUpti_ActivityMemcpy5, streamId);
SAME_OFFSET(MemcpyRecord, correlation_id, CUpti_ActivityMemcpy5, correlationId);
SAME_OFFSET(MemsetRecord, bytes, CUpti_ActivityMemset4, bytes);
SAME_OFFSET(MemsetRecord, start, CUpti_ActivityMemset4, start);
SAME_OFFSET(MemsetRecord, device_id, CUpti_ActivityMemset4, deviceId);
SAME_OFFSET(MemsetRecord, stream_id, CUpti_ActivityMemset4, streamId);
SAME_OFFSET(MemsetRecord, correlation_id, CUpti_ActivityMemset4, correlationId);
SAME_OFFSET(SyncRecord, start, CUpti_ActivitySynchronization, start);
SAME_OFFSET(SyncRecord, end, CUpti_ActivitySynchronization, end);
SAME_OFFSET(SyncRecord, stream_id, CUpti_ActivitySynchronization, streamId);
SAME_OFFSET(ApiRecord, start, CUpti_ActivityAPI, start);
SAME_OFFSET(ApiRecord, correlation_id, CUpti_ActivityAPI, correlationId);
#if CUPTI_API_VERSION >= 130000
SAME_OFFSET(KernelRecord, correlation_id, CUpti_ActivityKernel10, correlationId);
SAME_OFFSET(KernelRecord, stream_id, CUpti_ActivityKernel10, streamId);
SAME_OFFSET(MemcpyRecord, correlation_id, CUpti_ActivityMemcpy6, correlationId);
SAME_OFFSET(MemcpyRecord, stream_id, CUpti_ActivityMemcpy6, streamId);
SAME_OFFSET(SyncRecord, stream_id, CUpti_ActivitySynchronization2, streamId);
#endif

TEST(CuptiLayoutTest, KindsAndValuesAgreeWithTheHeader) {
  EXPECT_EQ(cupti::kMemcpy, CUPTI_ACTIVITY_KIND_MEMCPY);
  EXPECT_EQ(cupti::kMemset, CUPTI_ACTIVITY_KIND_MEMSET);
  EXPECT_EQ(cupti::kKernel, CUPTI_ACTIVITY_KIND_KERNEL);
  EXPECT_EQ(cupti::kConcurrentKernel, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  EXPECT_EQ(cupti::kDriver, CUPTI_ACTIVITY_KIND_DRIVER);
  EXPECT_EQ(cupti::kRuntime, CUPTI_ACTIVITY_KIND_RUNTIME);
  EXPECT_EQ(cupti::kSynchronization, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
  EXPECT_EQ(cupti::kHtoD, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
  EXPECT_EQ(cupti::kDtoH, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH);
  EXPECT_EQ(cupti::kMemoryPageable, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE);
  EXPECT_EQ(cupti::kSyncStreamWaitEvent, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT);
  EXPECT_EQ(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, 39);
  EXPECT_EQ(CUPTI_ERROR_MAX_LIMIT_REACHED, 12);
  EXPECT_EQ(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED, 1);
}

}  // namespace
}  // namespace gpuscope::internal
