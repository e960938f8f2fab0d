// Reads a torch.profiler (Kineto) Chrome-trace JSON file into the records
// the analysis needs, in one streaming pass (nlohmann-json's SAX parser over
// ByteSource's chunks): memory grows with the events kept (device records,
// runtime calls, host ranges) and the distinct names, never with the text
// (the JSON lexer holds a string or number, and what lies between two, at
// most 16 MiB of it: past that the text is refused, as is JSON nested past
// 64 levels and a gzip stream that inflates past 256-fold).
//
// Both formats seen in the wild are read: a list of events (older Kineto:
// categories Operator, Runtime, Kernel, Memcpy, Memset) and an object with
// `traceEvents`, `deviceProperties` and `distributedInfo` (categories
// cpu_op, user_annotation, cuda_runtime, cuda_driver, kernel, gpu_memcpy,
// gpu_memset, cuda_sync). Only complete events (`"ph": "X"`) are read.
// Timestamps and durations are microseconds; they are converted to integer
// nanoseconds from the number's text (newer Kineto writes fractional
// microseconds at epoch scale, beyond what a double holds exactly).

#ifndef GPUSCOPE_LIB_TRACE_KINETO_READER_H_
#define GPUSCOPE_LIB_TRACE_KINETO_READER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/activity_source.h"

namespace gpuscope::internal {

// A host range: an operator, a user annotation (record_function,
// ProfilerStep#N) or a CUDA runtime/driver call.
struct TraceHostEvent {
  enum class Kind : uint8_t { kOp, kAnnotation, kRuntime };
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  uint32_t thread = 0;       // index into RecordedTrace::threads
  uint32_t name = 0;         // index into RecordedTrace::names
  uint32_t correlation = 0;  // kRuntime: the id its device records carry (0: none)
  Kind kind = Kind::kOp;
};

// A device record (kernel, copy, memset) or a synchronization (kind kSync),
// with the correlation id of the call that launched it.
struct TraceDeviceEvent {
  DeviceInterval interval;  // launch_ns left -1: the analysis sets it
  uint32_t correlation = 0;
  uint32_t name = 0;  // index into RecordedTrace::names
};

struct RecordedTrace {
  std::string format;                // "Kineto JSON (list of events)" or "Kineto JSON"
  std::vector<std::string> names;    // distinct event names
  std::vector<std::string> threads;  // distinct host threads ("pid/tid")
  std::vector<TraceHostEvent> host;
  std::vector<TraceDeviceEvent> device;
  int64_t events = 0;                  // events read, of any kind
  bool has_sync_records = false;       // cuda_sync events (CUPTI's synchronization records)
  std::vector<std::string> gpu_names;  // deviceProperties, by ordinal
  std::optional<int> rank;             // distributedInfo
  std::optional<int> world_size;
};

struct ReadLimits {
  uint64_t max_bytes = uint64_t{64} << 30;
  uint64_t max_events = 50'000'000;
};

// ReadKinetoTrace()
//
// The trace at `path`. InvalidArgument (one line: what is wrong, what to do)
// for text that is not JSON, JSON that is not a Kineto trace, a truncated
// file, or a trace past `limits`; NotFound for a missing file.
absl::StatusOr<RecordedTrace> ReadKinetoTrace(std::string_view path, const ReadLimits& limits);

// MicrosToNs()
//
// A JSON number's text in microseconds (integer or decimal, with an optional
// exponent) as integer nanoseconds, rounded to the nearest; nullopt for text
// that is not a number or is out of range.
std::optional<int64_t> MicrosToNs(std::string_view text);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_TRACE_KINETO_READER_H_
