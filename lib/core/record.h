// The fixed-size record the hot path appends for the background worker.

#ifndef GPUSCOPE_LIB_CORE_RECORD_H_
#define GPUSCOPE_LIB_CORE_RECORD_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
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

// Writes a whole record into `slot` (a queue slot, written in place by the
// hot path) in seven 8-byte stores: the 8-byte fields, then begin_event and
// end_event as one word, then name_id, kind, depth and flags as one (with
// reserved[0..1] zero). Fewer stores than fields: a slot's line is often not
// in the cache yet, and every store to it waits in the store buffer until
// it is. The caller reads everything it passes before calling, so that no
// store to the slot makes the compiler read it again.
inline void WriteRecord(Record* slot, int64_t begin_ns, int64_t end_ns, uint64_t step_seq,
                        int64_t samples, int64_t tokens, uint32_t begin_event, uint32_t end_event,
                        uint16_t name_id, RecordKind kind, uint8_t depth, uint16_t flags) noexcept {
  static_assert(offsetof(Record, end_event) == offsetof(Record, begin_event) + 4 &&
                offsetof(Record, name_id) == offsetof(Record, begin_event) + 8 &&
                offsetof(Record, kind) == offsetof(Record, name_id) + 2 &&
                offsetof(Record, depth) == offsetof(Record, name_id) + 3 &&
                offsetof(Record, flags) == offsetof(Record, name_id) + 4 &&
                offsetof(Record, reserved) == offsetof(Record, name_id) + 6);
  if constexpr (std::endian::native == std::endian::little) {
    const uint64_t events = uint64_t{begin_event} | uint64_t{end_event} << 32;
    const uint64_t tail = uint64_t{name_id} | uint64_t{static_cast<uint8_t>(kind)} << 16 |
                          uint64_t{depth} << 24 | uint64_t{flags} << 32;
    std::memcpy(&slot->begin_ns, &begin_ns, 8);
    std::memcpy(&slot->end_ns, &end_ns, 8);
    std::memcpy(&slot->step_seq, &step_seq, 8);
    std::memcpy(&slot->samples, &samples, 8);
    std::memcpy(&slot->tokens, &tokens, 8);
    std::memcpy(&slot->begin_event, &events, 8);
    std::memcpy(&slot->name_id, &tail, 8);
  } else {
    slot->begin_ns = begin_ns;
    slot->end_ns = end_ns;
    slot->step_seq = step_seq;
    slot->samples = samples;
    slot->tokens = tokens;
    slot->begin_event = begin_event;
    slot->end_event = end_event;
    slot->name_id = name_id;
    slot->kind = kind;
    slot->depth = depth;
    slot->flags = flags;
    slot->reserved[0] = slot->reserved[1] = 0;
  }
}

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_CORE_RECORD_H_
