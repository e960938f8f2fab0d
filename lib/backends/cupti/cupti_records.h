// CUPTI's activity records and subscriber parameters as gpuscope reads and
// writes them, from CUPTI's own headers (cupti.h). Shared by the CUPTI
// source and the fake CUPTI in tests, so that both use one layout. Only
// files built with the vendor headers on their include path include it.
//
// Records: CUPTI writes each record in the newest version it knows (CUPTI
// 13: CUpti_ActivityKernel10, CUpti_ActivityMemcpy6, ...; CUPTI 12: Kernel8
// or 9, Memcpy5), and which one arrives depends on the library found at run
// time, not on the header built against. gpuscope reads every version
// through the oldest one it may receive: the fields it reads have the same
// offsets and widths in all of them, which the static_asserts below hold
// every version the header defines to.

#ifndef GPUSCOPE_LIB_BACKENDS_CUPTI_CUPTI_RECORDS_H_
#define GPUSCOPE_LIB_BACKENDS_CUPTI_CUPTI_RECORDS_H_

#include <cupti.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace gpuscope::internal::cupti {

using KernelRecord = CUpti_ActivityKernel4;        // CUPTI writes Kernel4 .. 10
using MemcpyRecord = CUpti_ActivityMemcpy4;        // Memcpy4 .. 6
using MemsetRecord = CUpti_ActivityMemset2;        // Memset2 .. 4
using SyncRecord = CUpti_ActivitySynchronization;  // Synchronization, Synchronization2
using ApiRecord = CUpti_ActivityAPI;               // runtime and driver API calls

// CUPTI 13.2 added multi-subscriber support: cuptiSubscribe_v2 may share.
inline constexpr uint32_t kFirstSharingVersion = 130200;

// CUpti_SubscriberParams as CUPTI 13.2 reads it: 13.0's four fields, then
// allowMultipleSubscribers, which CUPTI reads only when structSize covers
// it. A 13.0 or 13.1 header has no such field, so the layout is written
// here, its first four fields checked against the header below.
struct SubscriberParams {
  size_t structSize;
  const char* subscriberName;
  char* oldSubscriberName;
  size_t oldSubscriberSize;
  uint8_t allowMultipleSubscribers;  // CUPTI 13.2
};
inline constexpr size_t kSubscriberParamsSize130 =
    offsetof(SubscriberParams, allowMultipleSubscribers);
inline constexpr size_t kSubscriberParamsSize132 = sizeof(SubscriberParams);

// cuptiSubscribe_v2 (CUPTI 13; an older library lacks it): what it is
// declared to take, and its type. A header older than 13 declares neither,
// and the parameters are then gpuscope's own.
#if CUPTI_API_VERSION >= 130000
using SubscribeV2Params = CUpti_SubscriberParams;
#else
using SubscribeV2Params = SubscriberParams;
#endif
using SubscribeV2Fn = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*,
                                             SubscribeV2Params*);

#define GPUSCOPE_CUPTI_SAME_OFFSET(Ours, Theirs, field)                                          \
  static_assert(offsetof(Ours, field) == offsetof(Theirs, field), #Theirs "::" #field " moved"); \
  static_assert(sizeof(Ours::field) == sizeof(Theirs::field), #Theirs "::" #field " resized")

// Every record starts with its kind.
GPUSCOPE_CUPTI_SAME_OFFSET(KernelRecord, CUpti_Activity, kind);
GPUSCOPE_CUPTI_SAME_OFFSET(MemcpyRecord, CUpti_Activity, kind);
GPUSCOPE_CUPTI_SAME_OFFSET(MemsetRecord, CUpti_Activity, kind);
GPUSCOPE_CUPTI_SAME_OFFSET(SyncRecord, CUpti_Activity, kind);
GPUSCOPE_CUPTI_SAME_OFFSET(ApiRecord, CUpti_Activity, kind);

#define GPUSCOPE_CUPTI_KERNEL_FIELDS_AT_KERNEL4(Theirs)            \
  GPUSCOPE_CUPTI_SAME_OFFSET(KernelRecord, Theirs, start);         \
  GPUSCOPE_CUPTI_SAME_OFFSET(KernelRecord, Theirs, end);           \
  GPUSCOPE_CUPTI_SAME_OFFSET(KernelRecord, Theirs, deviceId);      \
  GPUSCOPE_CUPTI_SAME_OFFSET(KernelRecord, Theirs, streamId);      \
  GPUSCOPE_CUPTI_SAME_OFFSET(KernelRecord, Theirs, correlationId); \
  GPUSCOPE_CUPTI_SAME_OFFSET(KernelRecord, Theirs, name)
#define GPUSCOPE_CUPTI_MEMCPY_FIELDS_AT_MEMCPY4(Theirs)       \
  GPUSCOPE_CUPTI_SAME_OFFSET(MemcpyRecord, Theirs, copyKind); \
  GPUSCOPE_CUPTI_SAME_OFFSET(MemcpyRecord, Theirs, srcKind);  \
  GPUSCOPE_CUPTI_SAME_OFFSET(MemcpyRecord, Theirs, dstKind);  \
  GPUSCOPE_CUPTI_SAME_OFFSET(MemcpyRecord, Theirs, bytes);    \
  GPUSCOPE_CUPTI_SAME_OFFSET(MemcpyRecord, Theirs, start);    \
  GPUSCOPE_CUPTI_SAME_OFFSET(MemcpyRecord, Theirs, end);      \
  GPUSCOPE_CUPTI_SAME_OFFSET(MemcpyRecord, Theirs, deviceId); \
  GPUSCOPE_CUPTI_SAME_OFFSET(MemcpyRecord, Theirs, streamId); \
  GPUSCOPE_CUPTI_SAME_OFFSET(MemcpyRecord, Theirs, correlationId)
#define GPUSCOPE_CUPTI_MEMSET_FIELDS_AT_MEMSET2(Theirs)       \
  GPUSCOPE_CUPTI_SAME_OFFSET(MemsetRecord, Theirs, bytes);    \
  GPUSCOPE_CUPTI_SAME_OFFSET(MemsetRecord, Theirs, start);    \
  GPUSCOPE_CUPTI_SAME_OFFSET(MemsetRecord, Theirs, end);      \
  GPUSCOPE_CUPTI_SAME_OFFSET(MemsetRecord, Theirs, deviceId); \
  GPUSCOPE_CUPTI_SAME_OFFSET(MemsetRecord, Theirs, streamId); \
  GPUSCOPE_CUPTI_SAME_OFFSET(MemsetRecord, Theirs, correlationId)
#define GPUSCOPE_CUPTI_SYNC_FIELDS_AT_SYNC1(Theirs)      \
  GPUSCOPE_CUPTI_SAME_OFFSET(SyncRecord, Theirs, type);  \
  GPUSCOPE_CUPTI_SAME_OFFSET(SyncRecord, Theirs, start); \
  GPUSCOPE_CUPTI_SAME_OFFSET(SyncRecord, Theirs, end);   \
  GPUSCOPE_CUPTI_SAME_OFFSET(SyncRecord, Theirs, streamId)

GPUSCOPE_CUPTI_KERNEL_FIELDS_AT_KERNEL4(CUpti_ActivityKernel5);
GPUSCOPE_CUPTI_KERNEL_FIELDS_AT_KERNEL4(CUpti_ActivityKernel6);
GPUSCOPE_CUPTI_KERNEL_FIELDS_AT_KERNEL4(CUpti_ActivityKernel7);
GPUSCOPE_CUPTI_KERNEL_FIELDS_AT_KERNEL4(CUpti_ActivityKernel8);
GPUSCOPE_CUPTI_KERNEL_FIELDS_AT_KERNEL4(CUpti_ActivityKernel9);
GPUSCOPE_CUPTI_MEMCPY_FIELDS_AT_MEMCPY4(CUpti_ActivityMemcpy5);
GPUSCOPE_CUPTI_MEMSET_FIELDS_AT_MEMSET2(CUpti_ActivityMemset3);
GPUSCOPE_CUPTI_MEMSET_FIELDS_AT_MEMSET2(CUpti_ActivityMemset4);
#if CUPTI_API_VERSION >= 130000
GPUSCOPE_CUPTI_KERNEL_FIELDS_AT_KERNEL4(CUpti_ActivityKernel10);
GPUSCOPE_CUPTI_MEMCPY_FIELDS_AT_MEMCPY4(CUpti_ActivityMemcpy6);
GPUSCOPE_CUPTI_SYNC_FIELDS_AT_SYNC1(CUpti_ActivitySynchronization2);

// The header's parameters are 13.0's: gpuscope's share their fields and
// offsets, and the entry point takes them.
GPUSCOPE_CUPTI_SAME_OFFSET(SubscriberParams, CUpti_SubscriberParams, structSize);
GPUSCOPE_CUPTI_SAME_OFFSET(SubscriberParams, CUpti_SubscriberParams, subscriberName);
GPUSCOPE_CUPTI_SAME_OFFSET(SubscriberParams, CUpti_SubscriberParams, oldSubscriberName);
GPUSCOPE_CUPTI_SAME_OFFSET(SubscriberParams, CUpti_SubscriberParams, oldSubscriberSize);
static_assert(std::is_same_v<decltype(&cuptiSubscribe_v2), SubscribeV2Fn>);
#endif

// A header from 13.2 on has the flag too: it must sit where gpuscope puts it.
template <typename P>
constexpr bool FlagSitsWhereGpuscopePutsIt() {
  if constexpr (requires(P p) { p.allowMultipleSubscribers; }) {
    return offsetof(P, allowMultipleSubscribers) ==
           offsetof(SubscriberParams, allowMultipleSubscribers);
  }
  return true;
}
static_assert(FlagSitsWhereGpuscopePutsIt<SubscribeV2Params>());

#undef GPUSCOPE_CUPTI_KERNEL_FIELDS_AT_KERNEL4
#undef GPUSCOPE_CUPTI_MEMCPY_FIELDS_AT_MEMCPY4
#undef GPUSCOPE_CUPTI_MEMSET_FIELDS_AT_MEMSET2
#undef GPUSCOPE_CUPTI_SYNC_FIELDS_AT_SYNC1
#undef GPUSCOPE_CUPTI_SAME_OFFSET

}  // namespace gpuscope::internal::cupti

#endif  // GPUSCOPE_LIB_BACKENDS_CUPTI_CUPTI_RECORDS_H_
