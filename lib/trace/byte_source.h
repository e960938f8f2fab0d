// A trace file's bytes, read in chunks: plain, or gzip decompressed on the
// fly (zlib is dlopen'ed, as the GPU libraries are: libz.so.1 is where every
// Python's gzip module finds it). Memory is one input and one output buffer,
// whatever the file's size; the decompressed bytes are counted against a
// bound, and past 64 MiB a stream that inflates more than 256-fold (real
// traces: 8-27) is refused as a gzip bomb, within a second rather than read
// for minutes (byte_source.cc says why those numbers).

#ifndef GPUSCOPE_LIB_TRACE_BYTE_SOURCE_H_
#define GPUSCOPE_LIB_TRACE_BYTE_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpuscope::internal {

class ByteSource {
 public:
  virtual ~ByteSource() = default;

  // Opens `path`: gzip when its first two bytes are gzip's magic, else
  // plain. NotFound for a missing file, InvalidArgument for a directory or
  // a file that cannot be read; `max_bytes` bounds the bytes Next() hands
  // out in all.
  static absl::StatusOr<std::unique_ptr<ByteSource>> Open(std::string_view path,
                                                          uint64_t max_bytes);

  // The next chunk (valid until the next call); empty at the end of the
  // data or on error (then status() says which).
  virtual std::string_view Next() = 0;
  // OkStatus(), or why the data stopped short: a truncated or corrupt gzip
  // stream, a read error, more than max_bytes, a gzip bomb.
  virtual const absl::Status& status() const = 0;
  // Bytes handed out so far.
  virtual uint64_t offset() const = 0;
  virtual bool gzip() const = 0;
};

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_TRACE_BYTE_SOURCE_H_
