#include "trace/byte_source.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/dynlib.h"
#include "base/text.h"

namespace gpuscope::internal {
namespace {

constexpr size_t kChunk = size_t{1} << 20;

// A gzip bomb: a few MB that inflate to many GB, which would be read (and,
// made of events, kept) for minutes. Real traces compress 8-27 fold (the
// four in tests/data/traces: 7.9, 12.9, 25.4 and 26.6; a generated trace of
// distinct events 19-28); deflate's ceiling is about 1030 fold (a run of one
// byte), and one event repeated reaches about 340. Past kBombFloor of output,
// more than kMaxInflation times the compressed bytes consumed is refused: ten
// times above the highest real ratio, under what repeated filler reaches. So
// what a gzip file can make us read is max(kBombFloor, kMaxInflation x its
// size), refused within a second when it is a bomb; a real trace that
// trips it can be gunzipped and given plain (then only max_bytes bounds it).
constexpr uint64_t kBombFloor = uint64_t{64} << 20;
constexpr uint64_t kMaxInflation = 256;

// zlib's stream state, as zlib.h declares it (its layout has not changed
// since zlib 1.0; inflateInit2_ checks its size).
struct ZStream {
  const unsigned char* next_in;
  unsigned avail_in;
  unsigned long total_in;
  unsigned char* next_out;
  unsigned avail_out;
  unsigned long total_out;
  const char* msg;
  void* state;
  void* zalloc;
  void* zfree;
  void* opaque;
  int data_type;
  unsigned long adler;
  unsigned long reserved;
};
constexpr int kZOk = 0, kZStreamEnd = 1, kZNoFlush = 0, kZBufError = -5;
constexpr int kGzipWindowBits = 15 + 16;  // a gzip header, not a zlib one

struct Zlib {
  int (*inflate_init2)(ZStream*, int, const char*, int) = nullptr;
  int (*inflate)(ZStream*, int) = nullptr;
  int (*inflate_end)(ZStream*) = nullptr;
  int (*inflate_reset)(ZStream*) = nullptr;
};

absl::StatusOr<Zlib> LoadZlib() {
  static const absl::StatusOr<Zlib>* const loaded = [] {
    absl::StatusOr<DynLib> lib = DynLib::Open("libz.so.1");
    if (!lib.ok()) return new absl::StatusOr<Zlib>(lib.status());
    Zlib z;
    for (absl::Status st :
         {lib->Bind(&z.inflate_init2, {"inflateInit2_"}), lib->Bind(&z.inflate, {"inflate"}),
          lib->Bind(&z.inflate_end, {"inflateEnd"}),
          lib->Bind(&z.inflate_reset, {"inflateReset"})}) {
      if (!st.ok()) return new absl::StatusOr<Zlib>(st);
    }
    lib->Leak();
    return new absl::StatusOr<Zlib>(z);
  }();
  return *loaded;
}

class FileSource : public ByteSource {
 public:
  FileSource(std::FILE* f, uint64_t max_bytes) : f_(f), max_bytes_(max_bytes), buf_(kChunk) {}
  ~FileSource() override { std::fclose(f_); }

  std::string_view Next() override {
    if (!status_.ok()) return {};
    const size_t n = std::fread(buf_.data(), 1, buf_.size(), f_);
    if (n == 0 && std::ferror(f_)) {
      status_ = absl::DataLossError(
          absl::StrCat("read error at byte ", offset_, ": ", std::strerror(errno)));
      return {};
    }
    return Account(n) ? std::string_view(buf_.data(), n) : std::string_view();
  }
  const absl::Status& status() const override { return status_; }
  uint64_t offset() const override { return offset_; }
  bool gzip() const override { return false; }

 protected:
  bool Account(size_t n) {
    offset_ += n;
    if (offset_ > max_bytes_) {
      status_ = absl::ResourceExhaustedError(
          absl::StrCat("more than ", max_bytes_ >> 20, " MiB of data (max_bytes)"));
      return false;
    }
    return true;
  }

  std::FILE* f_;
  uint64_t max_bytes_;
  std::vector<char> buf_;
  uint64_t offset_ = 0;
  absl::Status status_;
};

class GzipSource final : public FileSource {
 public:
  GzipSource(std::FILE* f, uint64_t max_bytes, Zlib z)
      : FileSource(f, max_bytes), z_(z), out_(kChunk) {
    std::memset(&zs_, 0, sizeof(zs_));
    if (z_.inflate_init2(&zs_, kGzipWindowBits, "1.2.11", static_cast<int>(sizeof(ZStream))) !=
        kZOk) {
      status_ = absl::InternalError("zlib's inflateInit2 failed");
    } else {
      open_ = true;
    }
  }
  ~GzipSource() override {
    if (open_) z_.inflate_end(&zs_);
  }

  std::string_view Next() override {
    while (status_.ok() && !done_) {
      if (zs_.avail_in == 0 && !Refill()) break;
      zs_.next_out = reinterpret_cast<unsigned char*>(out_.data());
      zs_.avail_out = static_cast<unsigned>(out_.size());
      const int rc = z_.inflate(&zs_, kZNoFlush);
      const size_t n = out_.size() - zs_.avail_out;
      if (rc == kZStreamEnd) {
        // Concatenated gzip members (what `cat a.gz b.gz` makes) go on.
        if (zs_.avail_in > 0 || !AtEof()) {
          z_.inflate_reset(&zs_);
        } else {
          done_ = true;
        }
      } else if (rc != kZOk && rc != kZBufError) {
        status_ = absl::DataLossError(absl::StrCat("the gzip stream is corrupt after ", offset_,
                                                   " bytes (", zs_.msg ? zs_.msg : "zlib", ")"));
        return {};
      }
      if (n > 0) {
        return Inflation(n) && Account(n) ? std::string_view(out_.data(), n) : std::string_view();
      }
    }
    return {};
  }
  bool gzip() const override { return true; }

 private:
  // False (and status() says why) once `n` more bytes out would pass
  // kMaxInflation times the compressed bytes consumed, past kBombFloor.
  bool Inflation(size_t n) {
    const uint64_t out = offset_ + n;
    const uint64_t in = read_ - zs_.avail_in;
    if (out <= kBombFloor || out <= kMaxInflation * in) return true;
    status_ = absl::ResourceExhaustedError(
        absl::StrCat("the gzip stream inflates more than ", kMaxInflation, "-fold (", out >> 20,
                     " MiB from ", in >> 10,
                     " KiB so far; torch.profiler traces compress 8-30-fold): a gzip bomb, not a "
                     "trace; if it is a trace, gunzip it and give the plain file"));
    return false;
  }
  bool AtEof() {
    const int c = std::fgetc(f_);
    if (c == EOF) return true;
    std::ungetc(c, f_);
    return false;
  }
  bool Refill() {
    const size_t n = std::fread(buf_.data(), 1, buf_.size(), f_);
    if (n == 0) {
      status_ =
          std::ferror(f_)
              ? absl::DataLossError(absl::StrCat("read error: ", std::strerror(errno)))
              : absl::DataLossError(absl::StrCat("the gzip stream ends early, after ", offset_,
                                                 " bytes: the file is truncated (copied while "
                                                 "still being written?)"));
      return false;
    }
    zs_.next_in = reinterpret_cast<const unsigned char*>(buf_.data());
    zs_.avail_in = static_cast<unsigned>(n);
    read_ += n;
    return true;
  }

  Zlib z_;
  ZStream zs_;
  std::vector<char> out_;
  uint64_t read_ = 0;  // compressed bytes read from the file
  bool open_ = false;
  bool done_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ByteSource>> ByteSource::Open(std::string_view path,
                                                             uint64_t max_bytes) {
  const std::string p(path);
  // The name as messages show it (a file name need not be UTF-8; a message
  // must be, to reach Python).
  const std::string shown = TerminalSafe(p);
  struct stat st{};
  if (::stat(p.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(shown, ": ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(shown, ": not a regular file"));
  }
  std::FILE* f = std::fopen(p.c_str(), "rb");
  if (f == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(shown, ": ", std::strerror(errno)));
  }
  unsigned char magic[2] = {0, 0};
  const size_t got = std::fread(magic, 1, 2, f);
  std::rewind(f);
  if (got == 2 && magic[0] == 0x1f && magic[1] == 0x8b) {
    absl::StatusOr<Zlib> z = LoadZlib();
    if (!z.ok()) {
      std::fclose(f);
      return absl::FailedPreconditionError(
          absl::StrCat(shown, " is gzip-compressed, and zlib (libz.so.1) could not be loaded: ",
                       z.status().message(), "; decompress it first (gunzip)"));
    }
    return std::unique_ptr<ByteSource>(new GzipSource(f, max_bytes, *z));
  }
  return std::unique_ptr<ByteSource>(new FileSource(f, max_bytes));
}

}  // namespace gpuscope::internal
