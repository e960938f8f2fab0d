// Reads an Nsight Systems SQLite export (`nsys export --type sqlite`) into
// the same records the Kineto reader gives (RecordedTrace), so that the
// analysis does not know which profiler wrote the trace.
//
// SQLite is dlopen'ed (libsqlite3.so.0), never linked, as zlib is for gzip:
// a machine without it reads Kineto traces all the same, and an export gets
// one line that says what to install. The file is opened read-only.
//
// What is read, table by table (nsys names CUPTI's fields as CUPTI does;
// times are integer nanoseconds already on the host's clock):
//
//   CUPTI_ACTIVITY_KIND_KERNEL     kernels: name from StringIds through
//                                  demangledName, else shortName; the
//                                  kernel class from ClassifyKernel()
//   CUPTI_ACTIVITY_KIND_MEMCPY     copies: copyKind HtoD / DtoH / anything
//                                  else, bytes, pageable host memory
//   CUPTI_ACTIVITY_KIND_MEMSET     memsets
//   CUPTI_ACTIVITY_KIND_SYNCHRONIZATION
//                                  kSync records (a stream waiting on an
//                                  event does not block the host: left out)
//   CUPTI_ACTIVITY_KIND_RUNTIME    runtime and driver calls, named without
//                                  nsys's version suffix
//                                  (cudaStreamSynchronize_v3020 reads as
//                                  cudaStreamSynchronize); the CUDA
//                                  backtrace rows that repeat a call are
//                                  left out
//   NVTX_EVENTS                    push/pop and start/end ranges with an end,
//                                  as annotations; marks and open ranges
//                                  are left out
//   TARGET_INFO_GPU                GPU names, by device id
//
// Enumerations: nsys numbers memory kinds its own way (CUDA_MEMOPR_MEMORY_KIND:
// pageable 0, pinned 1, device 2, ...; CUPTI's headers have pageable 1).
// Newer exports carry ENUM_CUDA_MEMCPY_OPER, ENUM_CUDA_MEM_KIND,
// ENUM_CUPTI_SYNC_TYPE and ENUM_NSYS_EVENT_CLASS tables that name each value:
// where a table is present its names decide; where it is not, the numbering
// of the exports without them (nsys 2022 and before) does.
//
// NVTX range names: a range in the default domain is named by its text; a
// range in a named domain is "<domain>:<text>", as nsys's own reports write
// it. gpuscope's ranges (domain "gpuscope", registered strings) so read
// "gpuscope:step" for a step and "gpuscope:<phase>" ("gpuscope:forward") for
// a phase. A range without text is left out.
//
// A table that is missing gives no records of its kind (a run without
// kernels has no KERNEL table); a file with none of the CUPTI_ACTIVITY_KIND_*
// tables and no NVTX_EVENTS is not an export and is refused. NULLs and
// values of an unexpected type never stop the read: the field is taken as
// absent, and a record without its start or end is left out.

#ifndef GPUSCOPE_LIB_TRACE_NSYS_READER_H_
#define GPUSCOPE_LIB_TRACE_NSYS_READER_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "trace/kineto_reader.h"

namespace gpuscope::internal {

// IsSqliteFile()
//
// Whether the file at `path` begins with SQLite's 16-byte header ("SQLite
// format 3" and a NUL). False for a file that cannot be read.
bool IsSqliteFile(std::string_view path);

// ReadNsysTrace()
//
// The export at `path`, format "Nsight Systems SQLite export". NotFound for
// a missing file; FailedPrecondition when libsqlite3.so.0 cannot be loaded
// (the message says what to install); InvalidArgument (one line) for a file
// that is not SQLite, an SQLite file that is not an export, a file larger
// than `limits.max_bytes`, or more than `limits.max_events` rows.
absl::StatusOr<RecordedTrace> ReadNsysTrace(std::string_view path, const ReadLimits& limits);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_TRACE_NSYS_READER_H_
