// The fixed-size record the hot path appends for the background worker.

#ifndef GPUSCOPE_LIB_CORE_RECORD_H_
#define GPUSCOPE_LIB_CORE_RECORD_H_

#include <cstdint>
#include <type_traits>

#include "backends/device_timer.h"  // kNoEvent

namespace gpuscope::internal {

enum class RecordKind : uint8_t {
  kPhase = 1,  // a phase ended
  kStep = 2,   // a step ended
};

enum RecordFlags : uint16_t {
  kRecordAutoClosed = 1u << 0,   // closed because an enclosing scope ended first
  kRecordIncomplete = 1u << 1,   // step: a record of this step was dropped (queue full)
  kRecordCancelled = 1u << 2,    // step: cancelled; drop it and its phases without counting
  kRecordNamedStream = 1u << 3,  // phase: named its own stream (work there is not the step's)
};

// Record
//
// One ended scope. Written by the recording thread, read by whoever drains
// the session's queue. 64 bytes, one cache line; plain data.
struct alignas(64) Record {
  int64_t begin_ns;      // host clock at the scope's begin (TSC ticks until drained)
  int64_t end_ns;        // host clock at its end (TSC ticks until drained)
  uint64_t step_seq;     // the step it belongs to (1-based); 0: outside any step
  int64_t samples;       // kStep: StepOptions::samples (-1: not given)
  int64_t tokens;        // kStep: StepOptions::tokens (-1: not given)
  uint32_t begin_event;  // DeviceTimer slot recorded at begin, or kNoEvent
  uint32_t end_event;    // DeviceTimer slot recorded at end, or kNoEvent
  uint16_t name_id;      // kPhase: PhaseId value
  RecordKind kind;
  uint8_t depth;         // kPhase inside a step: 0 = top level
  uint16_t flags;        // RecordFlags
  uint8_t reserved[10];  // room for a stream/device id (events, CUPTI)
};

static_assert(sizeof(Record) == 64, "Record must stay one cache line");
static_assert(std::is_trivially_copyable_v<Record>);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_RECORD_H_
