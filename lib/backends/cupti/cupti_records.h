// CUPTI's activity record prefixes: the fields gpuscope reads, at the
// offsets every record version since CUDA 11 shares. Standalone (no other
// includes) so that the fake CUPTI in tests writes the same layouts.

#ifndef GPUSCOPE_LIB_BACKENDS_CUPTI_CUPTI_RECORDS_H_
#define GPUSCOPE_LIB_BACKENDS_CUPTI_CUPTI_RECORDS_H_

#include <cstddef>
#include <cstdint>

namespace gpuscope::internal {

// Checked against cupti_activity.h by tests/cpp/cupti_layout_test.cc where
// the header exists. The values are those of cupti_activity.h.
namespace cupti {

enum Kind : uint32_t {
  kMemcpy = 1,
  kMemset = 2,
  kKernel = 3,
  kDriver = 4,
  kRuntime = 5,
  kConcurrentKernel = 10,
  kSynchronization = 38,
};
enum MemcpyKind : uint8_t { kHtoD = 1, kDtoH = 2 };
// CUpti_ActivitySynchronizationType: a stream waiting on an event does not
// block the host; the others (event, stream, context synchronize) do.
inline constexpr uint32_t kSyncStreamWaitEvent = 2;
// CUPTI 13.2 added multi-subscriber support: cuptiSubscribe_v2 may share.
inline constexpr uint32_t kFirstSharingVersion = 130200;
inline constexpr uint8_t kMemoryPageable = 1;

struct alignas(8) KernelRecord {  // CUpti_ActivityKernel4 .. 10
  uint32_t kind;
  uint8_t pad0[12];
  uint64_t start;      // 16
  uint64_t end;        // 24
  uint64_t completed;  // 32
  uint32_t device_id;  // 40
  uint32_t context_id;
  uint32_t stream_id;  // 48
  uint8_t pad1[40];
  uint32_t correlation_id;  // 92
  int64_t grid_id;          // 96
  const char* name;         // 104: shared by every record of the kernel, owned by CUPTI
};
struct alignas(8) MemcpyRecord {  // CUpti_ActivityMemcpy4 .. 6
  uint32_t kind;
  uint8_t copy_kind;  // 4
  uint8_t src_kind;   // 5
  uint8_t dst_kind;   // 6
  uint8_t flags;
  uint64_t bytes;      // 8
  uint64_t start;      // 16
  uint64_t end;        // 24
  uint32_t device_id;  // 32
  uint32_t context_id;
  uint32_t stream_id;       // 40
  uint32_t correlation_id;  // 44
};
struct alignas(8) MemsetRecord {  // CUpti_ActivityMemset2 .. 4
  uint32_t kind;
  uint32_t value;
  uint64_t bytes;      // 8
  uint64_t start;      // 16
  uint64_t end;        // 24
  uint32_t device_id;  // 32
  uint32_t context_id;
  uint32_t stream_id;       // 40
  uint32_t correlation_id;  // 44
};
struct alignas(8) SyncRecord {  // CUpti_ActivitySynchronization, 2
  uint32_t kind;
  uint32_t type;   // 4
  uint64_t start;  // 8
  uint64_t end;    // 16
  uint32_t correlation_id;  // 24
  uint32_t context_id;
  uint32_t stream_id;  // 32
};
struct alignas(8) ApiRecord {  // CUpti_ActivityAPI
  uint32_t kind;
  uint32_t cbid;
  uint64_t start;  // 8
  uint64_t end;    // 16
  uint32_t process_id;
  uint32_t thread_id;
  uint32_t correlation_id;  // 32
  uint32_t return_value;
};

static_assert(offsetof(KernelRecord, start) == 16 && offsetof(KernelRecord, device_id) == 40 &&
              offsetof(KernelRecord, stream_id) == 48 && offsetof(KernelRecord, correlation_id) == 92 &&
              offsetof(KernelRecord, name) == 104);
static_assert(offsetof(MemcpyRecord, bytes) == 8 && offsetof(MemcpyRecord, device_id) == 32 &&
              offsetof(MemcpyRecord, correlation_id) == 44);
static_assert(offsetof(MemsetRecord, bytes) == 8 && offsetof(MemsetRecord, correlation_id) == 44);
static_assert(offsetof(SyncRecord, start) == 8 && offsetof(SyncRecord, stream_id) == 32);
static_assert(offsetof(ApiRecord, start) == 8 && offsetof(ApiRecord, correlation_id) == 32);

}  // namespace cupti

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BACKENDS_CUPTI_CUPTI_RECORDS_H_
