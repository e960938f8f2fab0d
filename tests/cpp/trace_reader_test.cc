// The trace readers on bad input (docs/analyze.md, "Limits and bad input"):
// a gzip bomb, JSON nested a million deep, runs the JSON lexer would hold
// whole (one long string, spaces, brackets without a value), millions of
// events past max_events, an SQLite file cut short. Each is refused with one
// line, quickly and in bounded memory: every TEST runs in its own process
// under ctest, so getrusage's peak is this test's.

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/dynlib.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "trace/byte_source.h"
#include "trace/kineto_reader.h"
#include "trace/nsys_reader.h"

namespace gpuscope::internal {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kTraces = TRACES_DIR;

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

// A file written in pieces by `write`, which is called until it returns false.
std::string WriteFile(const std::string& name, const std::function<bool(std::FILE*)>& write) {
  const std::string path = TempPath(name);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr) << path;
  while (write(f)) {
  }
  std::fclose(f);
  return path;
}

std::string WriteText(const std::string& name, const std::string& text) {
  return WriteFile(name, [&](std::FILE* f) {
    std::fwrite(text.data(), 1, text.size(), f);
    return false;
  });
}

// Under a sanitizer (a Debug build), memory is shadowed and parsing is 50
// times slower: the bounds on time and memory are checked in the plain
// build, and the tests that parse past the 64 MiB gzip floor run there
// only (ByteSourceStopsABombPastTheFloor checks the floor everywhere).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#define GPUSCOPE_SKIP_UNDER_SANITIZERS() \
  if (kSanitized) GTEST_SKIP() << "64 MiB parsed: a minute under a sanitizer"

void ExpectPeakRssBelowMiB(int64_t mib) {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("peak RSS %ld MiB\n", usage.ru_maxrss >> 10);  // ru_maxrss: KiB on Linux
  if (!kSanitized) {
    EXPECT_LT(usage.ru_maxrss >> 10, mib);
  }
}

void ExpectFasterThan(std::chrono::steady_clock::time_point since, double seconds) {
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
  std::printf("%.2f s\n", took);
  if (!kSanitized) {
    EXPECT_LT(took, seconds);
  }
}

absl::StatusOr<RecordedTrace> Read(const std::string& path, ReadLimits limits = {}) {
  return ReadKinetoTrace(path, limits);
}

// zlib's deflate through dlopen, as the reader's inflate is (zlib.h's
// z_stream layout).
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

class Deflater {
 public:
  explicit Deflater(int level = 9) {
    absl::StatusOr<DynLib> lib = DynLib::Open("libz.so.1");
    if (!lib.ok()) return;
    ok_ = lib->Bind(&init_, {"deflateInit2_"}).ok() && lib->Bind(&deflate_, {"deflate"}).ok() &&
          lib->Bind(&end_, {"deflateEnd"}).ok();
    lib->Leak();
    if (!ok_) return;
    std::memset(&zs_, 0, sizeof(zs_));
    constexpr int kDeflated = 8, kGzip = 15 + 16, kMemLevel = 8, kDefault = 0;
    ok_ = init_(&zs_, level, kDeflated, kGzip, kMemLevel, kDefault, "1.2.11",
                static_cast<int>(sizeof(ZStream))) == 0;
  }
  ~Deflater() {
    if (ok_) end_(&zs_);
  }
  bool ok() const { return ok_; }

  // `data` compressed, with a full flush after it (the next piece depends on
  // nothing before: the same data gives the same bytes again).
  std::string Full(const std::string& data) { return Run(data, kFullFlush); }
  std::string Finish(const std::string& data) { return Run(data, kFinish); }

 private:
  static constexpr int kFullFlush = 3, kFinish = 4;
  std::string Run(const std::string& data, int flush) {
    std::string out;
    std::vector<unsigned char> buf(1 << 16);
    zs_.next_in = reinterpret_cast<const unsigned char*>(data.data());
    zs_.avail_in = static_cast<unsigned>(data.size());
    do {
      zs_.next_out = buf.data();
      zs_.avail_out = static_cast<unsigned>(buf.size());
      deflate_(&zs_, flush);
      out.append(reinterpret_cast<const char*>(buf.data()), buf.size() - zs_.avail_out);
    } while (zs_.avail_out == 0);
    return out;
  }

  int (*init_)(ZStream*, int, int, int, int, int, const char*, int) = nullptr;
  int (*deflate_)(ZStream*, int) = nullptr;
  int (*end_)(ZStream*) = nullptr;
  ZStream zs_;
  bool ok_ = false;
};

// A gzip stream that inflates to `gib` GiB: `prefix`, then `filler` over and
// over. Each MiB of filler is compressed once (a full flush makes its
// compressed bytes the same every time) and written `gib` x 1024 times: the
// file is about a thousandth of what it inflates to, and its end (the last
// block, the CRC) is never reached by a reader that refuses it.
std::string WriteBomb(const std::string& name, const std::string& prefix, const std::string& filler,
                      int gib) {
  Deflater d;
  EXPECT_TRUE(d.ok());
  std::string mib;
  while (mib.size() < (size_t{1} << 20)) mib += filler;
  const std::string head = d.Full(prefix);
  const std::string block = d.Full(mib);
  EXPECT_EQ(d.Full(mib), block);  // what the file relies on
  int left = gib << 10;
  bool first = true;
  return WriteFile(name, [&](std::FILE* f) {
    if (first) std::fwrite(head.data(), 1, head.size(), f);
    first = false;
    std::fwrite(block.data(), 1, block.size(), f);
    return --left > 0;
  });
}

#define GPUSCOPE_NEED_ZLIB() \
  if (!Deflater().ok()) GTEST_SKIP() << "libz.so.1 is not installed here"

TEST(TraceReaderTest, GzipBombIsRefusedWithinASecondOfWork) {
  GPUSCOPE_NEED_ZLIB();
  GPUSCOPE_SKIP_UNDER_SANITIZERS();
  // 16 GiB of "0," inside a trace's events list, in 16 MiB of file: valid
  // JSON all along (numbers, which reset the lexer's run), so only the
  // inflation bound stops it.
  const std::string path = WriteBomb("bomb.json.gz", R"({"traceEvents": [)", "0,", 16);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<RecordedTrace> t = Read(path);
  ExpectFasterThan(start, 10.0);  // 64 MiB inflated and parsed
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("gzip bomb"));
  EXPECT_THAT(t.status().message(), HasSubstr("256-fold"));
  EXPECT_THAT(t.status().message(), Not(HasSubstr("\n")));
  ExpectPeakRssBelowMiB(100);
}

TEST(TraceReaderTest, ByteSourceStopsABombPastTheFloor) {
  GPUSCOPE_NEED_ZLIB();
  const std::string path = WriteBomb("spaces.gz", "", " ", 4);
  absl::StatusOr<std::unique_ptr<ByteSource>> source = ByteSource::Open(path, uint64_t{1} << 40);
  ASSERT_TRUE(source.ok()) << source.status();
  while (!(*source)->Next().empty()) {
  }
  EXPECT_THAT((*source)->status().message(), HasSubstr("gzip bomb"));
  // Refused at the first chunk (a MiB) that would pass the 64 MiB floor.
  EXPECT_GE((*source)->offset(), uint64_t{63} << 20);
  EXPECT_LE((*source)->offset(), uint64_t{64} << 20);
}

TEST(TraceReaderTest, RealTracesAreNotBombs) {
  // The four real traces (8-27-fold) inflate whole: their sizes as gunzip
  // gives them.
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, uint64_t>>{
           {"alexnet.pt.trace.json.gz", 319'512},
           {"event_sync_a100.pt.trace.json.gz", 22'635},
           {"resnet50_v100_workers0.pt.trace.json.gz", 30'106'602},
           {"resnet50_v100_workers4.pt.trace.json.gz", 23'851'520}}) {
    absl::StatusOr<std::unique_ptr<ByteSource>> source =
        ByteSource::Open(kTraces + "/" + name, uint64_t{1} << 40);
    ASSERT_TRUE(source.ok()) << source.status();
    while (!(*source)->Next().empty()) {
    }
    EXPECT_TRUE((*source)->status().ok()) << name << ": " << (*source)->status();
    EXPECT_EQ((*source)->offset(), bytes) << name;
  }
}

TEST(TraceReaderTest, AGzipFileThatIsNotABombIsReadPastTheFloor) {
  GPUSCOPE_NEED_ZLIB();
  GPUSCOPE_SKIP_UNDER_SANITIZERS();
  // 80 MiB of events whose timestamps all differ, at gzip's default level:
  // past the 64 MiB floor, and well under the bound.
  Deflater d(6);
  std::string text = R"({"traceEvents": [)";
  std::string gz;
  uint64_t inflated = 0;
  int64_t n = 0;
  while (n < 1'200'000) {
    for (int i = 0; i < 10'000; ++i, ++n) {
      text += "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"k" + std::to_string(n % 7) +
              "\", \"ts\": " + std::to_string(1'000'000 + 3 * n) +
              ", \"dur\": " + std::to_string(n % 3) + "},\n";
    }
    inflated += text.size();
    gz += d.Full(text);
    text.clear();
  }
  gz += d.Finish(R"({"ph": "i", "ts": 0}]})");
  const double fold = static_cast<double>(inflated) / static_cast<double>(gz.size());
  std::printf("%lu MiB inflated, %.1f-fold\n", static_cast<unsigned long>(inflated >> 20), fold);
  ASSERT_GT(inflated, uint64_t{64} << 20);
  ASSERT_GT(fold, 10.0);
  absl::StatusOr<RecordedTrace> t = Read(WriteText("many.json.gz", gz));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->events, n + 1);
  EXPECT_EQ(t->device.size(), static_cast<size_t>(n));
}

TEST(TraceReaderTest, NestingAMillionDeepIsRefusedAtLevel65) {
  for (const std::string& open :
       {std::string("["), std::string(R"({"a":)"), std::string(R"({"traceEvents": [{"args": )")}) {
    std::string text;
    for (int i = 0; i < 1'000'000; ++i) text += open;
    const std::string path = WriteText("deep.json", text);
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<RecordedTrace> t = Read(path);
    ExpectFasterThan(start, 2.0);
    ASSERT_FALSE(t.ok()) << open;
    EXPECT_THAT(t.status().message(), HasSubstr("nested deeper than 64 levels")) << open;
    EXPECT_THAT(t.status().message(), Not(HasSubstr("truncated")));
  }
  ExpectPeakRssBelowMiB(100);
}

// The lexer holds a run from one string or number to the next whole: each
// of these would be held in full, whatever the file's size.
TEST(TraceReaderTest, RunsTheLexerWouldHoldWholeAreBounded) {
  const std::string mib(1 << 20, ' ');
  struct Case {
    std::string name, prefix, filler, says;
  };
  for (const Case& c : std::vector<Case>{
           {"string", R"({"traceEvents": [{"name": ")", "a", "in one string"},
           {"escapes", R"({"traceEvents": [{"name": ")", R"(\"\\)", "in one string"},
           {"spaces", R"({"traceEvents": [)", " ", "without a string or a number"},
           {"brackets", R"({"traceEvents": [)", "[],{},", "without a string or a number"},
           {"literals", R"({"traceEvents": [)", "true,null,", "without a string or a number"},
           {"digits", R"({"traceEvents": [)", "1234567890", "in one number"},
       }) {
    // Each parses 16 MiB: under a sanitizer, 4 s a case; the escapes and
    // brackets cover its branches there.
    if (kSanitized && c.name != "escapes" && c.name != "brackets") continue;
    std::string mib_of;
    while (mib_of.size() < mib.size()) mib_of += c.filler;
    int left = 17;  // MiB: past the bound, whatever the file's size
    bool first = true;
    const std::string path = WriteFile(c.name + ".json", [&](std::FILE* f) {
      if (first) std::fwrite(c.prefix.data(), 1, c.prefix.size(), f);
      first = false;
      std::fwrite(mib_of.data(), 1, mib_of.size(), f);
      return --left > 0;
    });
    absl::StatusOr<RecordedTrace> t = Read(path);
    ASSERT_FALSE(t.ok()) << c.name;
    EXPECT_THAT(t.status().message(), HasSubstr("more than 16 MiB " + c.says)) << c.name;
    EXPECT_THAT(t.status().message(), HasSubstr("not a trace")) << c.name;
    EXPECT_LT(t.status().message().size(), 300u) << c.name;
  }
  // 16 MiB held in the lexer's two buffers (each grown by doubling), and
  // copied into the parser's error message: about 200 MiB at the peak, the
  // same for a file of any size past 16 MiB.
  ExpectPeakRssBelowMiB(250);
}

TEST(TraceReaderTest, AStringOfAMebibyteIsReadAndALongSyntaxErrorIsOneShortLine) {
  // Under the bound: a 1 MiB kernel name is a name.
  const std::string name(1 << 20, 'k');
  absl::StatusOr<RecordedTrace> t = Read(
      WriteText("long_name.json", R"({"traceEvents": [{"ph": "X", "cat": "kernel", "name": ")" +
                                      name + R"(", "ts": 1, "dur": 2}]})"));
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->device.size(), 1u);
  EXPECT_EQ(t->names[t->device[0].name], name);
  // A string that never ends: the parser's "last read" (the whole string)
  // is cut to its two ends.
  t = Read(WriteText("open_string.json", R"({"traceEvents": [{"name": ")" + name));
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("missing closing quote"));
  EXPECT_THAT(t.status().message(), HasSubstr("truncated file"));
  EXPECT_LT(t.status().message().size(), 300u) << t.status().message().substr(0, 400);
}

// Small events, `n` of them, as one text: a kernel each (no name), time
// out of order every other one.
std::string WriteEvents(const std::string& name, int64_t n) {
  int64_t i = 0;
  bool first = true;
  return WriteFile(name, [&](std::FILE* f) {
    if (first) std::fputs("[\n", f);
    first = false;
    std::string buf;
    for (int k = 0; k < 100'000 && i < n; ++k, ++i) {
      buf += R"({"ph":"X","cat":"kernel","ts":)" + std::to_string(i % 2 ? i : n - i) +
             R"(,"dur":1})" + (i + 1 < n ? ",\n" : "\n");
    }
    if (i == n) buf += "]";
    std::fwrite(buf.data(), 1, buf.size(), f);
    return i < n;
  });
}

TEST(TraceReaderTest, TenMillionEventsStopAtMaxEvents) {
  // 10 million events (340 MB): past a bound of 1 million, refused there,
  // never read further. A tenth of both under a sanitizer.
  const int64_t scale = kSanitized ? 10 : 1;
  const std::string path = WriteEvents("ten_million.json", 10'000'000 / scale);
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<RecordedTrace> t =
      Read(path, {.max_events = static_cast<uint64_t>(1'000'000 / scale)});
  ExpectFasterThan(start, 10.0);
  std::remove(path.c_str());
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(),
              HasSubstr(absl::StrCat("more than ", 1'000'000 / scale, " events (max_events)")));
  // What a million events cost: 56 bytes each kept, in a vector that grows
  // by doubling.
  ExpectPeakRssBelowMiB(250);
}

TEST(TraceReaderTest, MaxEventsCountsEveryEventExactly) {
  const std::string path = WriteEvents("thousand.json", 1000);
  absl::StatusOr<RecordedTrace> t = Read(path, {.max_events = 1000});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->events, 1000);
  EXPECT_EQ(t->device.size(), 1000u);
  EXPECT_FALSE(Read(path, {.max_events = 999}).ok());
}

TEST(TraceReaderTest, PlainTextPastMaxBytesIsRefused) {
  const std::string path = WriteEvents("hundred_thousand.json", 100'000);
  absl::StatusOr<RecordedTrace> t = Read(path, {.max_bytes = 1 << 20});
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("more than 1 MiB of data (max_bytes)"));
}

TEST(TraceReaderTest, DurationsAndOrderAsDocumented) {
  // Zero and negative durations are points in time; events are kept as they
  // come (the analysis sorts what it needs).
  absl::StatusOr<RecordedTrace> t = Read(WriteText("durations.json", R"({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "b", "ts": 30, "dur": -5},
    {"ph": "X", "cat": "kernel", "name": "a", "ts": 10, "dur": 0},
    {"ph": "X", "cat": "cpu_op", "name": "op", "ts": 20, "dur": -1.5},
    {"ph": "X", "cat": "kernel", "name": "c", "ts": 5, "dur": 2.0005}]})"));
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->device.size(), 3u);
  EXPECT_EQ(t->device[0].interval.begin_ns, 30'000);
  EXPECT_EQ(t->device[0].interval.end_ns, 30'000);
  EXPECT_EQ(t->device[1].interval.begin_ns, 10'000);
  EXPECT_EQ(t->device[1].interval.end_ns, 10'000);
  EXPECT_EQ(t->device[2].interval.end_ns, 7'001);
  ASSERT_EQ(t->host.size(), 1u);
  EXPECT_EQ(t->host[0].end_ns, t->host[0].begin_ns);
}

TEST(TraceReaderTest, TruncatedSqliteIsOneLine) {
  // The first 4 KiB of a real export: SQLite's header, then nothing.
  std::ifstream in(kTraces + "/saxpy_a100_nsys.sqlite", std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  const std::string path = WriteText("cut.sqlite", head);
  ASSERT_TRUE(IsSqliteFile(path));
  absl::StatusOr<RecordedTrace> t = ReadNsysTrace(path, ReadLimits{});
  if (t.status().code() == absl::StatusCode::kFailedPrecondition) {
    GTEST_SKIP() << "libsqlite3.so.0 is not installed here";
  }
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("truncated or corrupt"));
  EXPECT_THAT(t.status().message(), Not(HasSubstr("\n")));
}

TEST(TraceReaderTest, AFileNameThatIsNotUtf8IsEscapedInMessages) {
  // A message reaches Python as str: the name's bytes that are not UTF-8
  // are written as \xNN.
  absl::StatusOr<RecordedTrace> t = Read(TempPath("gone\xff.json"));
  ASSERT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(t.status().message(), HasSubstr("gone\\xFF.json"));
  const std::string path =
      WriteText("cut\xff.sqlite", std::string("SQLite format 3\0", 16) + "junk");
  t = ReadNsysTrace(path, ReadLimits{});
  if (t.status().code() == absl::StatusCode::kFailedPrecondition) {
    GTEST_SKIP() << "libsqlite3.so.0 is not installed here";
  }
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("cut\\xFF.sqlite"));
  EXPECT_THAT(t.status().message(), Not(HasSubstr("\xff")));
}

}  // namespace
}  // namespace gpuscope::internal
