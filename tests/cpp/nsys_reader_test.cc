// The Nsight Systems SQLite reader on a real export (a small MPI SAXPY on an
// A100, tests/data/traces/README.md: every number below is what the sqlite3
// shell shows for that file) and on small exports written here through the
// same dlopen'ed SQLite: gpuscope's own NVTX ranges, a newer export's ENUM_*
// tables, NULLs and odd types, and files that are not exports at all.

#include "trace/nsys_reader.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "base/dynlib.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuscope::internal {
namespace {

using ::testing::HasSubstr;

const std::string kSaxpy = std::string(TRACES_DIR) + "/saxpy_a100_nsys.sqlite";

// SQLite for writing small exports: open (read-write, create), exec, close.
struct SqliteWriter {
  int (*open_v2)(const char*, void**, int, const char*) = nullptr;
  int (*exec)(void*, const char*, int (*)(void*, int, char**, char**), void*, char**) = nullptr;
  int (*close)(void*) = nullptr;
  bool ok = false;
};

const SqliteWriter& Writer() {
  static const SqliteWriter* const writer = [] {
    auto* w = new SqliteWriter;
    absl::StatusOr<DynLib> lib = DynLib::Open("libsqlite3.so.0");
    if (!lib.ok()) return w;
    w->ok = lib->Bind(&w->open_v2, {"sqlite3_open_v2"}).ok() &&
            lib->Bind(&w->exec, {"sqlite3_exec"}).ok() &&
            lib->Bind(&w->close, {"sqlite3_close"}).ok();
    lib->Leak();
    return w;
  }();
  return *writer;
}

// A new SQLite file `name` in the test's temporary folder, made by `sql`.
std::string WriteDb(const std::string& name, const std::string& sql) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::remove(path.c_str());
  const SqliteWriter& w = Writer();
  void* db = nullptr;
  constexpr int kReadWriteCreate = 0x2 | 0x4;
  EXPECT_EQ(w.open_v2(path.c_str(), &db, kReadWriteCreate, nullptr), 0);
  char* error = nullptr;
  EXPECT_EQ(w.exec(db, sql.c_str(), nullptr, nullptr, &error), 0) << (error ? error : "");
  w.close(db);
  return path;
}

#define GPUSCOPE_NEED_SQLITE() \
  if (!Writer().ok) GTEST_SKIP() << "libsqlite3.so.0 is not installed here"

std::vector<const TraceDeviceEvent*> Device(const RecordedTrace& t, ActivityKind kind) {
  std::vector<const TraceDeviceEvent*> out;
  for (const TraceDeviceEvent& d : t.device) {
    if (d.interval.kind == kind) out.push_back(&d);
  }
  std::sort(out.begin(), out.end(),
            [](auto* a, auto* b) { return a->interval.begin_ns < b->interval.begin_ns; });
  return out;
}

std::vector<const TraceDeviceEvent*> Copies(const RecordedTrace& t) {
  std::vector<const TraceDeviceEvent*> out;
  for (const TraceDeviceEvent& d : t.device) {
    if (IsCopy(d.interval.kind)) out.push_back(&d);
  }
  std::sort(out.begin(), out.end(),
            [](auto* a, auto* b) { return a->interval.begin_ns < b->interval.begin_ns; });
  return out;
}

std::vector<const TraceHostEvent*> Host(const RecordedTrace& t, TraceHostEvent::Kind kind) {
  std::vector<const TraceHostEvent*> out;
  for (const TraceHostEvent& h : t.host) {
    if (h.kind == kind) out.push_back(&h);
  }
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->begin_ns < b->begin_ns; });
  return out;
}

std::map<std::string, int> NameCounts(const RecordedTrace& t, TraceHostEvent::Kind kind) {
  std::map<std::string, int> counts;
  for (const TraceHostEvent* h : Host(t, kind)) ++counts[t.names[h->name]];
  return counts;
}

absl::StatusOr<RecordedTrace> Read(const std::string& path) {
  return ReadNsysTrace(path, ReadLimits{});
}

TEST(NsysReaderTest, RealExportHasWhatSqliteShows) {
  GPUSCOPE_NEED_SQLITE();
  absl::StatusOr<RecordedTrace> t = Read(kSaxpy);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->format, "Nsight Systems SQLite export");
  EXPECT_EQ(Device(*t, ActivityKind::kKernel).size(), 5u);
  EXPECT_EQ(Copies(*t).size(), 15u);
  EXPECT_EQ(Device(*t, ActivityKind::kMemset).size(), 0u);
  EXPECT_EQ(Device(*t, ActivityKind::kSync).size(), 0u);
  EXPECT_FALSE(t->has_sync_records);  // the SYNCHRONIZATION table is empty
  // 95 runtime rows, 38 of them CUDA backtrace rows repeating a call.
  EXPECT_EQ(Host(*t, TraceHostEvent::Kind::kRuntime).size(), 57u);
  EXPECT_EQ(Host(*t, TraceHostEvent::Kind::kAnnotation).size(), 22u);
  // Rows read: 5 kernels, 15 copies, 95 runtime, 1 NVTX domain, 22 ranges.
  EXPECT_EQ(t->events, 138);
  ASSERT_EQ(t->gpu_names.size(), 1u);
  EXPECT_EQ(t->gpu_names[0], "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(t->threads, std::vector<std::string>{"1230493/1230493"});
}

TEST(NsysReaderTest, KernelIsReadExactly) {
  GPUSCOPE_NEED_SQLITE();
  absl::StatusOr<RecordedTrace> t = Read(kSaxpy);
  ASSERT_TRUE(t.ok()) << t.status();
  const TraceDeviceEvent& k = *Device(*t, ActivityKind::kKernel)[0];
  EXPECT_EQ(k.interval.begin_ns, 924922186);
  EXPECT_EQ(k.interval.end_ns, 942626994);
  EXPECT_EQ(k.interval.device, 0u);
  EXPECT_EQ(k.interval.stream, 7u);
  EXPECT_EQ(k.interval.launch_ns, -1);
  EXPECT_EQ(k.interval.kernel_class, KernelClass::kOther);
  EXPECT_EQ(k.correlation, 140u);
  EXPECT_EQ(t->names[k.name], "saxpy(double *, double *, double *, double, int)");
}

TEST(NsysReaderTest, CopiesHaveDirectionBytesAndPageableMemory) {
  GPUSCOPE_NEED_SQLITE();
  absl::StatusOr<RecordedTrace> t = Read(kSaxpy);
  ASSERT_TRUE(t.ok()) << t.status();
  const std::vector<const TraceDeviceEvent*> copies = Copies(*t);
  // copyKind 1, srcKind 0 (pageable in nsys's numbering), dstKind 2.
  const TraceDeviceEvent& h2d = *copies[0];
  EXPECT_EQ(h2d.interval.kind, ActivityKind::kMemcpyH2D);
  EXPECT_EQ(h2d.interval.begin_ns, 887857742);
  EXPECT_EQ(h2d.interval.end_ns, 906688200);
  EXPECT_EQ(h2d.interval.bytes, 262144000u);
  EXPECT_TRUE(h2d.interval.pageable);
  EXPECT_EQ(h2d.correlation, 138u);
  EXPECT_EQ(t->names[h2d.name], "Memcpy Host-to-Device (Pageable -> Device)");
  // copyKind 2, srcKind 2, dstKind 0.
  const TraceDeviceEvent& d2h = *copies[2];
  EXPECT_EQ(d2h.interval.kind, ActivityKind::kMemcpyD2H);
  EXPECT_EQ(d2h.interval.begin_ns, 942633682);
  EXPECT_TRUE(d2h.interval.pageable);
  EXPECT_EQ(t->names[d2h.name], "Memcpy Device-to-Host (Device -> Pageable)");
  int h2d_count = 0;
  for (const TraceDeviceEvent* c : copies)
    h2d_count += c->interval.kind == ActivityKind::kMemcpyH2D;
  EXPECT_EQ(h2d_count, 10);
}

TEST(NsysReaderTest, RuntimeCallsLoseTheirVersionSuffix) {
  GPUSCOPE_NEED_SQLITE();
  absl::StatusOr<RecordedTrace> t = Read(kSaxpy);
  ASSERT_TRUE(t.ok()) << t.status();
  const std::map<std::string, int> counts = NameCounts(*t, TraceHostEvent::Kind::kRuntime);
  EXPECT_EQ(counts, (std::map<std::string, int>{{"cuModuleGetLoadingMode", 1},
                                                {"cudaFree", 3},
                                                {"cudaHostRegister", 9},
                                                {"cudaHostUnregister", 9},
                                                {"cudaLaunchKernel", 5},
                                                {"cudaMalloc", 15},
                                                {"cudaMemcpy", 15}}));
  // The launch of the first kernel: the runtime row, not its backtrace row
  // (924889832-924923197).
  std::vector<const TraceHostEvent*> launch;
  for (const TraceHostEvent* h : Host(*t, TraceHostEvent::Kind::kRuntime)) {
    if (h->correlation == 140) launch.push_back(h);
  }
  ASSERT_EQ(launch.size(), 1u);
  EXPECT_EQ(launch[0]->begin_ns, 924890173);
  EXPECT_EQ(launch[0]->end_ns, 924923126);
  EXPECT_EQ(t->threads[launch[0]->thread], "1230493/1230493");
}

TEST(NsysReaderTest, NvtxRangesAreAnnotationsNamedByDomain) {
  GPUSCOPE_NEED_SQLITE();
  absl::StatusOr<RecordedTrace> t = Read(kSaxpy);
  ASSERT_TRUE(t.ok()) << t.status();
  // nsys's MPI ranges are registered strings in domain "MPI"; the
  // program's own "saxpy" ranges are text in the default domain.
  EXPECT_EQ(NameCounts(*t, TraceHostEvent::Kind::kAnnotation),
            (std::map<std::string, int>{{"MPI:MPI_Finalize", 1},
                                        {"MPI:MPI_Init", 1},
                                        {"MPI:MPI_Recv", 5},
                                        {"MPI:MPI_Send", 10},
                                        {"saxpy", 5}}));
  const TraceHostEvent& first_saxpy = *Host(*t, TraceHostEvent::Kind::kAnnotation)[3];
  EXPECT_EQ(t->names[first_saxpy.name], "saxpy");
  EXPECT_EQ(first_saxpy.begin_ns, 924881857);
  EXPECT_EQ(first_saxpy.end_ns, 924940911);
  EXPECT_EQ(first_saxpy.correlation, 0u);
}

// What gpuscope's NVTX annotator records (backends/nvtx/nvtx_annotator.cc):
// domain "gpuscope", registered strings "step" and the phase names.
TEST(NsysReaderTest, GpuscopeRangesReadAsGpuscopeStepAndPhases) {
  GPUSCOPE_NEED_SQLITE();
  const std::string path = WriteDb("gpuscope_nvtx.sqlite", R"(
    CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO StringIds VALUES (10, 'step'), (11, 'forward'), (12, 'data');
    CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
      text TEXT, globalTid INTEGER, textId INTEGER, domainId INTEGER, int64Value INTEGER);
    INSERT INTO NVTX_EVENTS VALUES
      (5, NULL, 75, 'gpuscope', 16777217, NULL, 3, NULL),
      (100, 900, 59, NULL, 16777217, 10, 3, 0),
      (120, 300, 59, NULL, 16777217, 12, 3, NULL),
      (300, 700, 59, NULL, 16777217, 11, 3, NULL),
      (400, NULL, 34, 'a mark', 16777217, NULL, 0, NULL),
      (500, NULL, 59, NULL, 16777217, 11, 3, NULL),
      (600, 650, 60, 'user range', 16777218, NULL, 0, NULL),
      (610, 620, 59, NULL, 16777217, NULL, 0, NULL);
  )");
  absl::StatusOr<RecordedTrace> t = Read(path);
  ASSERT_TRUE(t.ok()) << t.status();
  const std::vector<const TraceHostEvent*> ranges = Host(*t, TraceHostEvent::Kind::kAnnotation);
  ASSERT_EQ(ranges.size(), 4u);  // the mark, the open range and the nameless one left out
  EXPECT_EQ(t->names[ranges[0]->name], "gpuscope:step");
  EXPECT_EQ(ranges[0]->begin_ns, 100);
  EXPECT_EQ(ranges[0]->end_ns, 900);
  EXPECT_EQ(t->names[ranges[1]->name], "gpuscope:data");
  EXPECT_EQ(t->names[ranges[2]->name], "gpuscope:forward");
  EXPECT_EQ(t->names[ranges[3]->name], "user range");
  EXPECT_EQ(t->threads[ranges[0]->thread], "1/1");
  EXPECT_EQ(t->threads[ranges[3]->thread], "1/2");
  EXPECT_TRUE(t->device.empty());
}

// Newer exports name their enumerations' values in tables; those decide,
// whatever the numbers (deliberately not nsys's here).
TEST(NsysReaderTest, EnumTablesDecideWherePresent) {
  GPUSCOPE_NEED_SQLITE();
  const std::string path = WriteDb("enums.sqlite", R"(
    CREATE TABLE ENUM_CUDA_MEMCPY_OPER (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
    INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (1, 'CUDA_MEMCPY_KIND_DTOD', 'Device-to-Device'),
      (5, 'CUDA_MEMCPY_KIND_HTOD', 'Host-to-Device'), (6, 'CUDA_MEMCPY_KIND_DTOH', 'Device-to-Host');
    CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
    INSERT INTO ENUM_CUDA_MEM_KIND VALUES (0, 'CUDA_MEMOPR_MEMORY_KIND_PINNED', 'Pinned'),
      (9, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', 'Pageable'), (2, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', 'Device');
    CREATE TABLE ENUM_CUPTI_SYNC_TYPE (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
    INSERT INTO ENUM_CUPTI_SYNC_TYPE VALUES
      (7, 'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT', 'Stream wait'),
      (8, 'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE', 'Stream sync');
    CREATE TABLE ENUM_NSYS_EVENT_CLASS (id INTEGER PRIMARY KEY, name TEXT, label TEXT);
    INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES (0, 'TRACE_PROCESS_EVENT_CUDA_RUNTIME', 'CUDA runtime'),
      (99, 'TRACE_PROCESS_EVENT_CUDABACKTRACE', 'CUDA backtrace');
    CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO StringIds VALUES (1, 'cudaStreamSynchronize_v3020'), (2, 'cudaMemcpyAsync_v3020');
    CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER, end INTEGER, deviceId INTEGER,
      streamId INTEGER, correlationId INTEGER, bytes INTEGER, copyKind INTEGER, srcKind INTEGER,
      dstKind INTEGER);
    INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES
      (10, 20, 1, 13, 7, 4096, 5, 9, 2),
      (30, 40, 1, 13, 8, 4096, 6, 2, 0),
      (50, 60, 1, 13, 9, 4096, 1, 2, 2);
    CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER, end INTEGER,
      deviceId INTEGER, streamId INTEGER, correlationId INTEGER, syncType INTEGER);
    INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (70, 90, 1, 13, 11, 7), (70, 95, 1, 13, 12, 8);
    CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, eventClass INTEGER,
      globalTid INTEGER, correlationId INTEGER, nameId INTEGER);
    INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (68, 96, 0, 16777217, 12, 1),
      (67, 97, 99, 16777217, 12, 1), (5, 45, 67, 16777217, 8, 2);
  )");
  absl::StatusOr<RecordedTrace> t = Read(path);
  ASSERT_TRUE(t.ok()) << t.status();
  const std::vector<const TraceDeviceEvent*> copies = Copies(*t);
  ASSERT_EQ(copies.size(), 3u);
  EXPECT_EQ(copies[0]->interval.kind, ActivityKind::kMemcpyH2D);
  EXPECT_TRUE(copies[0]->interval.pageable);
  EXPECT_EQ(copies[0]->interval.device, 1u);
  EXPECT_EQ(copies[0]->interval.stream, 13u);
  EXPECT_EQ(copies[1]->interval.kind, ActivityKind::kMemcpyD2H);
  EXPECT_FALSE(copies[1]->interval.pageable);  // 0 is pinned by this export's table
  EXPECT_EQ(t->names[copies[1]->name], "Memcpy Device-to-Host (Device -> Pinned)");
  EXPECT_EQ(copies[2]->interval.kind, ActivityKind::kMemcpyOther);
  // The stream waiting on an event is left out; the stream sync is kept.
  EXPECT_TRUE(t->has_sync_records);
  const std::vector<const TraceDeviceEvent*> syncs = Device(*t, ActivityKind::kSync);
  ASSERT_EQ(syncs.size(), 1u);
  EXPECT_EQ(syncs[0]->interval.end_ns, 95);
  EXPECT_EQ(syncs[0]->correlation, 12u);
  // Class 99 is this export's backtrace class; 67 is nothing special here.
  EXPECT_EQ(NameCounts(*t, TraceHostEvent::Kind::kRuntime),
            (std::map<std::string, int>{{"cudaMemcpyAsync", 1}, {"cudaStreamSynchronize", 1}}));
}

TEST(NsysReaderTest, NullsAndOddTypesNeverStopTheRead) {
  GPUSCOPE_NEED_SQLITE();
  const std::string path = WriteDb("odd.sqlite", R"(
    CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, correlationId,
      demangledName, shortName);
    INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES
      (NULL, 10, 0, 1, 1, 1, 1),
      (5, NULL, 0, 1, 2, 1, 1),
      ('100', 200.0, 'gpu', x'00ff', -4, 'not an id', NULL),
      (300, 250, 70000, 5000000000, 99999999999, NULL, NULL);
    CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start, end, globalTid, correlationId, nameId);
    INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (1, 2, NULL, NULL, NULL), (3, 4, 'x', 2.5, 7);
  )");
  absl::StatusOr<RecordedTrace> t = Read(path);
  ASSERT_TRUE(t.ok()) << t.status();
  const std::vector<const TraceDeviceEvent*> kernels = Device(*t, ActivityKind::kKernel);
  ASSERT_EQ(kernels.size(), 2u);  // the rows without a start or an end are left out
  EXPECT_EQ(kernels[0]->interval.begin_ns, 100);
  EXPECT_EQ(kernels[0]->interval.end_ns, 200);
  EXPECT_EQ(kernels[0]->interval.device, 0u);
  EXPECT_EQ(kernels[0]->interval.stream, 0u);
  EXPECT_EQ(kernels[0]->correlation, 0u);
  EXPECT_EQ(t->names[kernels[0]->name], "");  // no StringIds table
  EXPECT_EQ(kernels[1]->interval.begin_ns, 300);
  EXPECT_EQ(kernels[1]->interval.end_ns, 300);  // an end before the start: a point
  EXPECT_EQ(kernels[1]->interval.device, 1u << 16);
  EXPECT_EQ(kernels[1]->interval.stream, UINT32_MAX);
  EXPECT_EQ(kernels[1]->correlation, 0u);
  EXPECT_EQ(Host(*t, TraceHostEvent::Kind::kRuntime).size(), 2u);
}

TEST(NsysReaderTest, MissingTablesGiveNoRecordsOfTheirKind) {
  GPUSCOPE_NEED_SQLITE();
  const std::string path = WriteDb("copies_only.sqlite", R"(
    CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER, end INTEGER, copyKind INTEGER,
      srcKind INTEGER, dstKind INTEGER, bytes INTEGER);
    INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (1, 2, 1, 1, 2, 64);
  )");
  absl::StatusOr<RecordedTrace> t = Read(path);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->device.size(), 1u);
  EXPECT_EQ(t->device[0].interval.kind, ActivityKind::kMemcpyH2D);
  EXPECT_FALSE(t->device[0].interval.pageable);  // 1 is pinned in nsys's numbering
  EXPECT_TRUE(t->host.empty());
  EXPECT_FALSE(t->has_sync_records);
}

TEST(NsysReaderTest, AnSqliteFileWithoutTheTablesIsRefused) {
  GPUSCOPE_NEED_SQLITE();
  const std::string path = WriteDb("not_nsys.sqlite",
                                   "CREATE TABLE notes (id INTEGER, body TEXT);"
                                   "INSERT INTO notes VALUES (1, 'hello');");
  EXPECT_TRUE(IsSqliteFile(path));
  absl::StatusOr<RecordedTrace> t = Read(path);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(),
              HasSubstr("is an SQLite file but not an Nsight Systems export (no "
                        "CUPTI_ACTIVITY_KIND_* or NVTX_EVENTS tables)"));
  EXPECT_EQ(t.status().message().find('\n'), absl::string_view::npos);
}

TEST(NsysReaderTest, AnActivityTableWithoutTimesIsRefused) {
  GPUSCOPE_NEED_SQLITE();
  const std::string path = WriteDb("no_start.sqlite", R"(
    CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (begin_time INTEGER, end INTEGER);
    INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1, 2);
  )");
  absl::StatusOr<RecordedTrace> t = Read(path);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("has no \"start\" column"));
}

TEST(NsysReaderTest, MaxEventsBoundsTheRowsRead) {
  GPUSCOPE_NEED_SQLITE();
  ReadLimits limits;
  limits.max_events = 10;
  absl::StatusOr<RecordedTrace> t = ReadNsysTrace(kSaxpy, limits);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("more than 10 events (max_events)"));
  limits.max_events = 138;  // exactly the rows the file holds
  EXPECT_TRUE(ReadNsysTrace(kSaxpy, limits).ok());
  limits.max_bytes = 1 << 20;  // the file is 1.5 MiB
  t = ReadNsysTrace(kSaxpy, limits);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("max_bytes"));
}

TEST(NsysReaderTest, ANonSqliteFileIsRefused) {
  const std::string path = ::testing::TempDir() + "/not_sqlite.json";
  std::ofstream(path) << R"({"traceEvents": []})";
  EXPECT_FALSE(IsSqliteFile(path));
  absl::StatusOr<RecordedTrace> t = Read(path);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("not an SQLite file"));
  // Shorter than the header.
  std::ofstream(path, std::ios::trunc) << "SQLite";
  EXPECT_FALSE(IsSqliteFile(path));
}

TEST(NsysReaderTest, ACorruptOrTruncatedExportIsRefusedInOneLine) {
  GPUSCOPE_NEED_SQLITE();
  const std::string garbage = ::testing::TempDir() + "/garbage.sqlite";
  {
    std::ofstream out(garbage, std::ios::binary);
    out << std::string("SQLite format 3\0", 16) << std::string(4096, '\x5a');
  }
  EXPECT_TRUE(IsSqliteFile(garbage));
  absl::StatusOr<RecordedTrace> t = Read(garbage);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message().find('\n'), absl::string_view::npos);
  // The export cut short (copied while still being written).
  const std::string truncated = ::testing::TempDir() + "/truncated.sqlite";
  {
    std::ifstream in(kSaxpy, std::ios::binary);
    std::string head(512 * 1024, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    std::ofstream(truncated, std::ios::binary) << head;
  }
  t = Read(truncated);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("cannot read"));
}

TEST(NsysReaderTest, AMissingFileIsNotFound) {
  const std::string path = ::testing::TempDir() + "/no_such_export.sqlite";
  EXPECT_FALSE(IsSqliteFile(path));
  absl::StatusOr<RecordedTrace> t = Read(path);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(IsSqliteFile(kSaxpy));
  // A folder is not an export either.
  t = Read(::testing::TempDir());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpuscope::internal
