// The test controls of the fake CUPTI (tests/cpp/fakes/fake_libcupti.cc,
// built as fake_libcupti, a CUPTI 13, and fake_libcupti_v1, an older one): a
// test links one of them, points GPUSCOPE_LIBCUPTI at it, and drives CUPTI's
// state through these. The fake also exports cupti.h's entry points, so a
// test can call them as another tool in the process would (cuptiSubscribe);
// this header includes cupti.h for them, which linking the fake makes
// reachable.

#ifndef GPUSCOPE_TESTS_CPP_FAKES_FAKE_CUPTI_H_
#define GPUSCOPE_TESTS_CPP_FAKES_FAKE_CUPTI_H_

#include <cupti.h>

#include <cstddef>
#include <cstdint>

extern "C" {

// ---- The subscriber slot (the fake keeps one subscriber at a time).
void fake_cupti_hold(const char* name);  // another tool subscribes first
void fake_cupti_release();               // ... and lets go
int fake_cupti_subscribed();             // 1 while someone is subscribed
const char* fake_cupti_subscriber_name();
int fake_cupti_finalize_calls();
int fake_cupti_has_callbacks();  // 1 once buffer callbacks were registered
// The version cuptiGetVersion answers (130200 is CUPTI 13.2).
void fake_cupti_set_version(uint32_t version);
// What the last cuptiSubscribe_v2 was given: its parameters' size, and
// whether it asked to share CUPTI (-1: never called).
size_t fake_cupti_last_params_size();
int fake_cupti_last_allow_multiple();

// ---- Activity.
int fake_cupti_enabled_kinds();           // activity kinds enabled now
void fake_cupti_fail_enable(int result);  // cuptiActivityEnable answers it (0: succeeds again)
void fake_cupti_drop(size_t n);           // records CUPTI reports dropped
// Records for the next cuptiActivityFlushAll, of kinds enabled; times are
// CLOCK_MONOTONIC ns.
void fake_cupti_emit_api(uint32_t correlation, int64_t start_ns, int64_t end_ns);
void fake_cupti_set_kernel_name(const char* name);  // static storage: later kernels carry it
void fake_cupti_emit_kernel(int64_t start_ns, int64_t end_ns, uint32_t device, uint32_t stream,
                            uint32_t correlation);
void fake_cupti_emit_memcpy(int64_t start_ns, int64_t end_ns, uint8_t copy_kind, uint8_t src_kind,
                            uint8_t dst_kind, uint64_t bytes, uint32_t correlation);
void fake_cupti_emit_sync(int64_t start_ns, int64_t end_ns, uint32_t type);

}  // extern "C"

#endif  // GPUSCOPE_TESTS_CPP_FAKES_FAKE_CUPTI_H_
