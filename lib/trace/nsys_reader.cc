#include "trace/nsys_reader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/kernel_names.h"
#include "base/dynlib.h"
#include "base/strings.h"
#include "base/text.h"

namespace gpuscope::internal {
namespace {

// SQLite's C API: the calls read here, as sqlite3.h declares them (stable
// since SQLite 3.5, 2007).
struct Sqlite3;
struct Sqlite3Stmt;
constexpr int kSqliteOk = 0, kSqliteRow = 100, kSqliteDone = 101;
constexpr int kSqliteOpenReadOnly = 0x00000001;
constexpr int kSqliteInteger = 1, kSqliteFloat = 2, kSqliteText = 3;

struct SqliteApi {
  int (*open_v2)(const char*, Sqlite3**, int, const char*) = nullptr;
  int (*close)(Sqlite3*) = nullptr;
  const char* (*errmsg)(Sqlite3*) = nullptr;
  int (*prepare_v2)(Sqlite3*, const char*, int, Sqlite3Stmt**, const char**) = nullptr;
  int (*step)(Sqlite3Stmt*) = nullptr;
  int (*finalize)(Sqlite3Stmt*) = nullptr;
  int (*column_type)(Sqlite3Stmt*, int) = nullptr;
  long long (*column_int64)(Sqlite3Stmt*, int) = nullptr;
  const unsigned char* (*column_text)(Sqlite3Stmt*, int) = nullptr;
  int (*column_bytes)(Sqlite3Stmt*, int) = nullptr;
};

absl::StatusOr<SqliteApi> LoadSqlite() {
  static const absl::StatusOr<SqliteApi>* const loaded = [] {
    absl::StatusOr<DynLib> lib = DynLib::Open("libsqlite3.so.0");
    if (!lib.ok()) return new absl::StatusOr<SqliteApi>(lib.status());
    SqliteApi s;
    for (absl::Status st :
         {lib->Bind(&s.open_v2, {"sqlite3_open_v2"}), lib->Bind(&s.close, {"sqlite3_close"}),
          lib->Bind(&s.errmsg, {"sqlite3_errmsg"}),
          lib->Bind(&s.prepare_v2, {"sqlite3_prepare_v2"}), lib->Bind(&s.step, {"sqlite3_step"}),
          lib->Bind(&s.finalize, {"sqlite3_finalize"}),
          lib->Bind(&s.column_type, {"sqlite3_column_type"}),
          lib->Bind(&s.column_int64, {"sqlite3_column_int64"}),
          lib->Bind(&s.column_text, {"sqlite3_column_text"}),
          lib->Bind(&s.column_bytes, {"sqlite3_column_bytes"})}) {
      if (!st.ok()) return new absl::StatusOr<SqliteApi>(st);
    }
    lib->Leak();
    return new absl::StatusOr<SqliteApi>(s);
  }();
  return *loaded;
}

// One prepared statement, its rows read through Next(). Fields are typed
// leniently: a NULL, a blob or text that is not a number is no value.
class Statement {
 public:
  Statement(const SqliteApi* api, Sqlite3* db, Sqlite3Stmt* stmt)
      : api_(api), db_(db), stmt_(stmt) {}
  Statement(Statement&& other) noexcept
      : api_(other.api_),
        db_(other.db_),
        stmt_(std::exchange(other.stmt_, nullptr)),
        done_(other.done_),
        error_(std::move(other.error_)) {}
  Statement& operator=(Statement&&) = delete;
  ~Statement() {
    if (stmt_ != nullptr) api_->finalize(stmt_);
  }

  // True at a row; false at the end, or on an error (error() says which).
  bool Next() {
    if (done_) return false;
    const int rc = api_->step(stmt_);
    if (rc == kSqliteRow) return true;
    done_ = true;
    if (rc != kSqliteDone) error_ = api_->errmsg(db_);
    return false;
  }
  const std::string& error() const { return error_; }

  std::optional<int64_t> Int(int col) const {
    switch (api_->column_type(stmt_, col)) {
      case kSqliteInteger:
      case kSqliteFloat:  // SQLite clamps a real to the 64-bit range
        return static_cast<int64_t>(api_->column_int64(stmt_, col));
      case kSqliteText: {
        const std::optional<std::string_view> text = Text(col);
        int64_t v = 0;
        if (!text.has_value()) return std::nullopt;
        const auto [p, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
        if (ec != std::errc() || p != text->data() + text->size()) return std::nullopt;
        return v;
      }
      default: return std::nullopt;  // NULL, blob
    }
  }
  // Valid until the next Next().
  std::optional<std::string_view> Text(int col) const {
    const int type = api_->column_type(stmt_, col);
    if (type != kSqliteText && type != kSqliteInteger && type != kSqliteFloat) return std::nullopt;
    const unsigned char* text = api_->column_text(stmt_, col);
    if (text == nullptr) return std::nullopt;
    const int n = api_->column_bytes(stmt_, col);
    return std::string_view(reinterpret_cast<const char*>(text), static_cast<size_t>(n));
  }

 private:
  const SqliteApi* api_;
  Sqlite3* db_;
  Sqlite3Stmt* stmt_;
  bool done_ = false;
  std::string error_;
};

// One value of an nsys enumeration: its symbol and its label.
struct EnumValue {
  std::string name;
  std::string label;
};
using Enum = std::unordered_map<int64_t, EnumValue>;

// The numbering of exports without ENUM_* tables (nsys 2022 and before), by
// the names and labels the newer exports' tables give the same values.
Enum CopyKinds() {
  const char* const kinds[][2] = {
      {"UNKNOWN", "Unknown"},
      {"HTOD", "Host-to-Device"},
      {"DTOH", "Device-to-Host"},
      {"HTOA", "Host-to-Array"},
      {"ATOH", "Array-to-Host"},
      {"ATOA", "Array-to-Array"},
      {"ATOD", "Array-to-Device"},
      {"DTOA", "Device-to-Array"},
      {"DTOD", "Device-to-Device"},
      {"HTOH", "Host-to-Host"},
      {"PTOP", "Peer-to-Peer"},
      {"UVM_HTOD", "Unified Host-to-Device"},
      {"UVM_DTOH", "Unified Device-to-Host"},
      {"UVM_DTOD", "Unified Device-to-Device"},
  };
  Enum e;
  for (size_t i = 0; i < std::size(kinds); ++i) {
    e[static_cast<int64_t>(i)] = {absl::StrCat("CUDA_MEMCPY_KIND_", kinds[i][0]), kinds[i][1]};
  }
  return e;
}

// Memory kinds: pageable is 0 here, where CUPTI's headers have it 1.
Enum MemoryKinds() {
  const char* const kinds[][2] = {
      {"PAGEABLE", "Pageable"},
      {"PINNED", "Pinned"},
      {"DEVICE", "Device"},
      {"ARRAY", "Array"},
      {"MANAGED", "Managed"},
      {"DEVICE_STATIC", "Device Static"},
      {"MANAGED_STATIC", "Managed Static"},
      {"UNKNOWN", "Unknown"},
  };
  Enum e;
  for (size_t i = 0; i < std::size(kinds); ++i) {
    e[static_cast<int64_t>(i)] = {absl::StrCat("CUDA_MEMOPR_MEMORY_KIND_", kinds[i][0]),
                                  kinds[i][1]};
  }
  return e;
}

// CUPTI's own numbering (CUpti_ActivitySynchronizationType).
Enum SyncTypes() {
  const char* const kinds[][2] = {{"UNKNOWN", "Unknown"},
                                  {"EVENT_SYNCHRONIZE", "Event sync"},
                                  {"STREAM_WAIT_EVENT", "Stream wait event"},
                                  {"STREAM_SYNCHRONIZE", "Stream sync"},
                                  {"CONTEXT_SYNCHRONIZE", "Context sync"}};
  Enum e;
  for (size_t i = 0; i < std::size(kinds); ++i) {
    e[static_cast<int64_t>(i)] = {absl::StrCat("CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_", kinds[i][0]),
                                  kinds[i][1]};
  }
  return e;
}

// The classes of CUPTI_ACTIVITY_KIND_RUNTIME's rows this reader tells apart.
Enum EventClasses() {
  return {{0, {"TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA runtime"}},
          {1, {"TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA driver"}},
          {67, {"TRACE_PROCESS_EVENT_CUDABACKTRACE", "CUDA backtrace"}}};
}

const EnumValue* Find(const Enum& e, std::optional<int64_t> v) {
  if (!v.has_value()) return nullptr;
  const auto it = e.find(*v);
  return it == e.end() ? nullptr : &it->second;
}
// (Never `cond ? "" : v->name`: that makes a temporary std::string.)
std::string_view NameOf(const EnumValue* v) {
  if (v == nullptr) return {};
  return v->name;
}
std::string_view LabelOf(const EnumValue* v) {
  if (v == nullptr || v->label.empty()) return "Unknown";
  return v->label;
}

// "cudaStreamSynchronize_v3020" → "cudaStreamSynchronize": nsys names a
// runtime call with the version of its entry point.
std::string_view WithoutVersion(std::string_view name) {
  const size_t at = name.rfind("_v");
  if (at == std::string_view::npos || at == 0 || at + 2 == name.size()) return name;
  for (size_t i = at + 2; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return name;
  }
  return name.substr(0, at);
}

uint32_t Clamped(std::optional<int64_t> v, int64_t max) {
  return static_cast<uint32_t>(std::clamp<int64_t>(v.value_or(0), 0, max));
}
// A correlation id, 0 (none) when missing or out of CUPTI's 32-bit range.
uint32_t CorrelationOf(std::optional<int64_t> v) {
  return v.has_value() && *v > 0 && *v <= UINT32_MAX ? static_cast<uint32_t>(*v) : 0;
}

// A select list's entry: a column, or the StringIds value a column refers to.
struct Field {
  std::string_view column;
  bool string_id = false;
};

// Text from the file as valid UTF-8: SQLite keeps whatever bytes it was
// given, and names reach reports, run files and Python's str, which need
// UTF-8. Each byte that does not begin a well-formed sequence becomes
// U+FFFD.
std::string ValidUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t n = Utf8SequenceLength(text, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

// SQLite's error, and what to do where it says the file is damaged: an
// export cut short (copied while nsys was writing it) or not SQLite past its
// header reads as "database disk image is malformed" or "file is not a
// database" at the first query.
std::string SqliteError(std::string_view error) {
  if (error.find("malformed") == std::string_view::npos &&
      error.find("not a database") == std::string_view::npos) {
    return std::string(error);
  }
  return absl::StrCat(ToAbsl(error),
                      ": the file is truncated or corrupt (copied before nsys finished writing "
                      "it?); export the report again with `nsys export --type sqlite`");
}

constexpr std::string_view kKernels = "CUPTI_ACTIVITY_KIND_KERNEL";
constexpr std::string_view kCopies = "CUPTI_ACTIVITY_KIND_MEMCPY";
constexpr std::string_view kMemsets = "CUPTI_ACTIVITY_KIND_MEMSET";
constexpr std::string_view kSyncs = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION";
constexpr std::string_view kRuntime = "CUPTI_ACTIVITY_KIND_RUNTIME";
constexpr std::string_view kNvtx = "NVTX_EVENTS";
constexpr int kNvtxPushPopRange = 59, kNvtxStartEndRange = 60, kNvtxDomainCreate = 75;

class NsysReader {
 public:
  NsysReader(const SqliteApi& api, Sqlite3* db, std::string path, const ReadLimits& limits,
             RecordedTrace* out)
      : api_(api), db_(db), path_(std::move(path)), limits_(limits), out_(out) {}

  absl::Status Read() {
    if (absl::Status st = LoadTables(); !st.ok()) return st;
    bool export_tables = tables_.contains(std::string(kNvtx));
    for (const std::string& t : tables_) export_tables |= t.starts_with("CUPTI_ACTIVITY_KIND_");
    if (!export_tables) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_,
          " is an SQLite file but not an Nsight Systems export (no CUPTI_ACTIVITY_KIND_* or "
          "NVTX_EVENTS tables); export the report with `nsys export --type sqlite`"));
    }
    for (auto part :
         {&NsysReader::LoadEnums, &NsysReader::GpuNames, &NsysReader::Kernels, &NsysReader::Copies,
          &NsysReader::Memsets, &NsysReader::Syncs, &NsysReader::Runtime, &NsysReader::Nvtx}) {
      if (absl::Status st = (this->*part)(); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<Statement> Prepare(std::string_view what, const std::string& sql) {
    Sqlite3Stmt* stmt = nullptr;
    if (api_.prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr) != kSqliteOk) {
      if (stmt != nullptr) api_.finalize(stmt);
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": cannot read ", ToAbsl(what), ": ", SqliteError(api_.errmsg(db_))));
    }
    return Statement(&api_, db_, stmt);
  }

  // Every row of `sql` to `fn`; `counted`: the rows count against
  // max_events.
  template <typename Fn>
  absl::Status Rows(std::string_view what, const std::string& sql, bool counted, Fn&& fn) {
    absl::StatusOr<Statement> st = Prepare(what, sql);
    if (!st.ok()) return st.status();
    while (st->Next()) {
      if (counted && ++out_->events > static_cast<int64_t>(limits_.max_events)) {
        return absl::InvalidArgumentError(absl::StrCat(path_, ": more than ", limits_.max_events,
                                                       " events (max_events): not read further"));
      }
      fn(*st);
    }
    if (!st->error().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": cannot read ", ToAbsl(what), ": ", SqliteError(st->error())));
    }
    return absl::OkStatus();
  }

  absl::Status LoadTables() {
    return Rows("its tables", "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')",
                false, [&](const Statement& st) {
                  if (std::optional<std::string_view> name = st.Text(0)) tables_.emplace(*name);
                });
  }
  bool Has(std::string_view table) const { return tables_.contains(std::string(table)); }

  const std::unordered_set<std::string>& Columns(std::string_view table) {
    const auto [it, added] = columns_.try_emplace(std::string(table));
    if (added) {
      // table_info's second column is the column's name. A failure leaves
      // the set empty: every field then reads as NULL.
      (void)Rows(table, absl::StrCat("PRAGMA table_info(\"", ToAbsl(table), "\")"), false,
                 [&](const Statement& st) {
                   if (std::optional<std::string_view> name = st.Text(1)) {
                     it->second.emplace(*name);
                   }
                 });
    }
    return it->second;
  }

  // `t."column"`, or NULL where the table has no such column.
  std::string Col(std::string_view table, std::string_view column) {
    return Columns(table).contains(std::string(column)) ? absl::StrCat("t.\"", ToAbsl(column), "\"")
                                                        : std::string("NULL");
  }

  // SELECT of `fields` from `table` (as t), `where` appended. A "start" or
  // "end" field the table lacks is an error: its rows have no time.
  absl::StatusOr<std::string> Select(std::string_view table, std::initializer_list<Field> fields,
                                     std::string_view where = "") {
    std::string sql = "SELECT ";
    for (const Field& f : fields) {
      std::string col = Col(table, f.column);
      if ((f.column == "start" || f.column == "end") && col == "NULL") {
        return absl::InvalidArgumentError(
            absl::StrCat(path_, ": table ", ToAbsl(table), " has no \"", ToAbsl(f.column),
                         "\" column (a schema this reader does not know)"));
      }
      if (f.string_id) {
        col = Has("StringIds") && col != "NULL"
                  ? absl::StrCat("(SELECT value FROM StringIds WHERE id = ", col, ")")
                  : "NULL";
      }
      absl::StrAppend(&sql, &f == fields.begin() ? "" : ", ", col);
    }
    absl::StrAppend(&sql, " FROM \"", ToAbsl(table), "\" AS t", where.empty() ? "" : " WHERE ",
                    ToAbsl(where));
    return sql;
  }

  // A table of `id`, `name`, `label` replaces the built-in numbering `e`.
  absl::Status LoadEnum(std::string_view table, Enum* e) {
    if (!Has(table)) return absl::OkStatus();
    absl::StatusOr<std::string> sql = Select(table, {{"id"}, {"name"}, {"label"}});
    if (!sql.ok()) return sql.status();
    Enum loaded;
    absl::Status st = Rows(table, *sql, false, [&](const Statement& row) {
      const std::optional<int64_t> id = row.Int(0);
      if (!id.has_value()) return;
      const std::optional<std::string_view> name = row.Text(1), label = row.Text(2);
      loaded[*id] = {std::string(name.value_or("")), std::string(label.value_or(""))};
    });
    if (!st.ok()) return st;
    if (!loaded.empty()) *e = std::move(loaded);
    return absl::OkStatus();
  }

  absl::Status LoadEnums() {
    for (auto [table, e] : {std::pair{"ENUM_CUDA_MEMCPY_OPER", &copy_kinds_},
                            std::pair{"ENUM_CUDA_MEM_KIND", &memory_kinds_},
                            std::pair{"ENUM_CUPTI_SYNC_TYPE", &sync_types_},
                            std::pair{"ENUM_NSYS_EVENT_CLASS", &event_classes_}}) {
      if (absl::Status st = LoadEnum(table, e); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

  absl::Status GpuNames() {
    constexpr std::string_view kGpus = "TARGET_INFO_GPU";
    if (!Has(kGpus)) return absl::OkStatus();
    absl::StatusOr<std::string> sql = Select(kGpus, {{"id"}, {"name"}});
    if (!sql.ok()) return sql.status();
    return Rows(kGpus, *sql, false, [&](const Statement& st) {
      const std::optional<int64_t> id = st.Int(0);
      const std::optional<std::string_view> name = st.Text(1);
      if (!id.has_value() || *id < 0 || *id >= (1 << 16) || !name.has_value()) return;
      const size_t at = static_cast<size_t>(*id);
      if (out_->gpu_names.size() <= at) out_->gpu_names.resize(at + 1);
      out_->gpu_names[at] = ValidUtf8(*name);
    });
  }

  uint32_t Intern(std::string_view name, std::unordered_map<std::string, uint32_t>* index,
                  std::vector<std::string>* names) {
    const auto [it, added] =
        index->try_emplace(ValidUtf8(name), static_cast<uint32_t>(names->size()));
    if (added) names->push_back(it->first);
    return it->second;
  }
  uint32_t Name(std::string_view name) { return Intern(name, &name_index_, &out_->names); }
  // A serialized GlobalId: the process id in bits 24-47, the thread id in
  // bits 0-23.
  uint32_t Thread(std::optional<int64_t> global_tid) {
    const auto g = static_cast<uint64_t>(global_tid.value_or(0));
    return Intern(absl::StrCat((g >> 24) & 0xFFFFFF, "/", g & 0xFFFFFF), &thread_index_,
                  &out_->threads);
  }

  // Fields 0-4 of every device query: start, end, deviceId, streamId,
  // correlationId. Nothing without a start and an end; an end before the
  // start is a point in time.
  static std::optional<TraceDeviceEvent> DeviceRow(const Statement& st, ActivityKind kind) {
    const std::optional<int64_t> begin = st.Int(0), end = st.Int(1);
    if (!begin.has_value() || !end.has_value()) return std::nullopt;
    TraceDeviceEvent d;
    d.interval.begin_ns = *begin;
    d.interval.end_ns = std::max(*begin, *end);
    d.interval.device = Clamped(st.Int(2), 1 << 16);
    d.interval.stream = Clamped(st.Int(3), UINT32_MAX);
    d.interval.kind = kind;
    d.correlation = CorrelationOf(st.Int(4));
    return d;
  }
  void Keep(TraceDeviceEvent d, std::string_view name) {
    d.name = Name(name);
    out_->device.push_back(d);
  }

  absl::Status Kernels() {
    if (!Has(kKernels)) return absl::OkStatus();
    absl::StatusOr<std::string> sql = Select(kKernels, {{"start"},
                                                        {"end"},
                                                        {"deviceId"},
                                                        {"streamId"},
                                                        {"correlationId"},
                                                        {"demangledName", true},
                                                        {"shortName", true}});
    if (!sql.ok()) return sql.status();
    return Rows(kKernels, *sql, true, [&](const Statement& st) {
      std::optional<TraceDeviceEvent> d = DeviceRow(st, ActivityKind::kKernel);
      if (!d.has_value()) return;
      std::optional<std::string_view> name = st.Text(5);
      if (!name.has_value() || name->empty()) name = st.Text(6);
      d->name = Name(name.value_or(""));
      const auto [it, added] = kernel_class_.try_emplace(d->name, KernelClass::kOther);
      if (added) it->second = ClassifyKernel(out_->names[d->name]);
      d->interval.kernel_class = it->second;
      out_->device.push_back(*d);
    });
  }

  absl::Status Copies() {
    if (!Has(kCopies)) return absl::OkStatus();
    absl::StatusOr<std::string> sql = Select(kCopies, {{"start"},
                                                       {"end"},
                                                       {"deviceId"},
                                                       {"streamId"},
                                                       {"correlationId"},
                                                       {"bytes"},
                                                       {"copyKind"},
                                                       {"srcKind"},
                                                       {"dstKind"}});
    if (!sql.ok()) return sql.status();
    return Rows(kCopies, *sql, true, [&](const Statement& st) {
      const EnumValue* copy = Find(copy_kinds_, st.Int(6));
      const ActivityKind kind = NameOf(copy) == "CUDA_MEMCPY_KIND_HTOD" ? ActivityKind::kMemcpyH2D
                                : NameOf(copy) == "CUDA_MEMCPY_KIND_DTOH"
                                    ? ActivityKind::kMemcpyD2H
                                    : ActivityKind::kMemcpyOther;
      std::optional<TraceDeviceEvent> d = DeviceRow(st, kind);
      if (!d.has_value()) return;
      const EnumValue* src = Find(memory_kinds_, st.Int(7));
      const EnumValue* dst = Find(memory_kinds_, st.Int(8));
      constexpr std::string_view kPageable = "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE";
      d->interval.pageable = (kind == ActivityKind::kMemcpyH2D && NameOf(src) == kPageable) ||
                             (kind == ActivityKind::kMemcpyD2H && NameOf(dst) == kPageable);
      d->interval.bytes = static_cast<uint64_t>(std::max<int64_t>(0, st.Int(5).value_or(0)));
      // As Kineto names a copy: "Memcpy Host-to-Device (Pageable -> Device)".
      Keep(*d, absl::StrCat("Memcpy ", ToAbsl(LabelOf(copy)), " (", ToAbsl(LabelOf(src)), " -> ",
                            ToAbsl(LabelOf(dst)), ")"));
    });
  }

  absl::Status Memsets() {
    if (!Has(kMemsets)) return absl::OkStatus();
    absl::StatusOr<std::string> sql = Select(kMemsets, {{"start"},
                                                        {"end"},
                                                        {"deviceId"},
                                                        {"streamId"},
                                                        {"correlationId"},
                                                        {"bytes"},
                                                        {"memKind"}});
    if (!sql.ok()) return sql.status();
    return Rows(kMemsets, *sql, true, [&](const Statement& st) {
      std::optional<TraceDeviceEvent> d = DeviceRow(st, ActivityKind::kMemset);
      if (!d.has_value()) return;
      d->interval.bytes = static_cast<uint64_t>(std::max<int64_t>(0, st.Int(5).value_or(0)));
      const EnumValue* memory = Find(memory_kinds_, st.Int(6));
      Keep(*d, memory == nullptr ? std::string("Memset")
                                 : absl::StrCat("Memset (", ToAbsl(LabelOf(memory)), ")"));
    });
  }

  absl::Status Syncs() {
    if (!Has(kSyncs)) return absl::OkStatus();
    absl::StatusOr<std::string> sql = Select(
        kSyncs, {{"start"}, {"end"}, {"deviceId"}, {"streamId"}, {"correlationId"}, {"syncType"}});
    if (!sql.ok()) return sql.status();
    return Rows(kSyncs, *sql, true, [&](const Statement& st) {
      out_->has_sync_records = true;
      const EnumValue* type = Find(sync_types_, st.Int(5));
      // A stream waiting on an event does not block the host.
      if (NameOf(type).ends_with("STREAM_WAIT_EVENT")) return;
      std::optional<TraceDeviceEvent> d = DeviceRow(st, ActivityKind::kSync);
      if (d.has_value()) Keep(*d, type == nullptr ? "Synchronization" : LabelOf(type));
    });
  }

  absl::Status Runtime() {
    if (!Has(kRuntime)) return absl::OkStatus();
    absl::StatusOr<std::string> sql = Select(
        kRuntime,
        {{"start"}, {"end"}, {"globalTid"}, {"correlationId"}, {"nameId", true}, {"eventClass"}});
    if (!sql.ok()) return sql.status();
    return Rows(kRuntime, *sql, true, [&](const Statement& st) {
      // A backtrace row repeats a call (its time and correlation) for its
      // call stack: not a call of its own.
      if (NameOf(Find(event_classes_, st.Int(5))) == "TRACE_PROCESS_EVENT_CUDABACKTRACE") return;
      const std::optional<int64_t> begin = st.Int(0), end = st.Int(1);
      if (!begin.has_value() || !end.has_value()) return;
      TraceHostEvent h;
      h.begin_ns = *begin;
      h.end_ns = std::max(*begin, *end);
      h.kind = TraceHostEvent::Kind::kRuntime;
      h.thread = Thread(st.Int(2));
      h.correlation = CorrelationOf(st.Int(3));
      h.name = Name(WithoutVersion(st.Text(4).value_or("")));
      out_->host.push_back(h);
    });
  }

  absl::Status NvtxDomains() {
    absl::StatusOr<std::string> sql =
        Select(kNvtx, {{"domainId"}, {"text"}, {"textId", true}},
               absl::StrCat(Col(kNvtx, "eventType"), " = ", kNvtxDomainCreate));
    if (!sql.ok()) return sql.status();
    return Rows(kNvtx, *sql, true, [&](const Statement& st) {
      const std::optional<int64_t> id = st.Int(0);
      std::optional<std::string_view> name = st.Text(1);
      if (!name.has_value()) name = st.Text(2);
      if (id.has_value() && *id != 0 && name.has_value()) domains_[*id] = ValidUtf8(*name);
    });
  }

  absl::Status Nvtx() {
    if (!Has(kNvtx)) return absl::OkStatus();
    if (absl::Status st = NvtxDomains(); !st.ok()) return st;
    absl::StatusOr<std::string> sql =
        Select(kNvtx, {{"start"}, {"end"}, {"text"}, {"textId", true}, {"globalTid"}, {"domainId"}},
               absl::StrCat(Col(kNvtx, "eventType"), " IN (", kNvtxPushPopRange, ", ",
                            kNvtxStartEndRange, ")"));
    if (!sql.ok()) return sql.status();
    return Rows(kNvtx, *sql, true, [&](const Statement& st) {
      const std::optional<int64_t> begin = st.Int(0), end = st.Int(1);
      std::optional<std::string_view> text = st.Text(2);
      if (!text.has_value()) text = st.Text(3);
      // Open ranges (no end) and ranges without a message are left out.
      if (!begin.has_value() || !end.has_value() || !text.has_value() || text->empty()) return;
      TraceHostEvent h;
      h.begin_ns = *begin;
      h.end_ns = std::max(*begin, *end);
      h.kind = TraceHostEvent::Kind::kAnnotation;
      h.thread = Thread(st.Int(4));
      const std::optional<int64_t> domain = st.Int(5);
      const auto it = domain.has_value() ? domains_.find(*domain) : domains_.end();
      h.name =
          it == domains_.end() ? Name(*text) : Name(absl::StrCat(it->second, ":", ToAbsl(*text)));
      out_->host.push_back(h);
    });
  }

  const SqliteApi& api_;
  Sqlite3* const db_;
  const std::string path_;  // the file's name as messages show it
  const ReadLimits limits_;
  RecordedTrace* const out_;
  std::unordered_set<std::string> tables_;
  std::unordered_map<std::string, std::unordered_set<std::string>> columns_;
  Enum copy_kinds_ = CopyKinds();
  Enum memory_kinds_ = MemoryKinds();
  Enum sync_types_ = SyncTypes();
  Enum event_classes_ = EventClasses();
  std::unordered_map<int64_t, std::string> domains_;  // NVTX domain id → its name
  std::unordered_map<std::string, uint32_t> name_index_, thread_index_;
  std::unordered_map<uint32_t, KernelClass> kernel_class_;  // by name index
};

}  // namespace

bool IsSqliteFile(std::string_view path) {
  constexpr std::string_view kMagic("SQLite format 3\0", 16);
  std::FILE* f = std::fopen(std::string(path).c_str(), "rb");
  if (f == nullptr) return false;
  char head[16] = {};
  const size_t got = std::fread(head, 1, sizeof(head), f);
  std::fclose(f);
  return got == sizeof(head) && std::string_view(head, sizeof(head)) == kMagic;
}

absl::StatusOr<RecordedTrace> ReadNsysTrace(std::string_view path, const ReadLimits& limits) {
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
  if (static_cast<uint64_t>(st.st_size) > limits.max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(shown, ": more than ", limits.max_bytes >> 20, " MiB (max_bytes): not read"));
  }
  if (!IsSqliteFile(p)) {
    return absl::InvalidArgumentError(
        absl::StrCat(shown, ": not an SQLite file (no \"SQLite format 3\" header)"));
  }
  absl::StatusOr<SqliteApi> api = LoadSqlite();
  if (!api.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        shown,
        " is an SQLite file (an Nsight Systems export), and SQLite's library (libsqlite3.so.0) "
        "could not be loaded: ",
        api.status().message(),
        "; install it (Debian/Ubuntu: apt-get install libsqlite3-0; Fedora/RHEL: dnf install "
        "sqlite-libs)"));
  }
  Sqlite3* db = nullptr;
  const int rc = api->open_v2(p.c_str(), &db, kSqliteOpenReadOnly, nullptr);
  // The connection is closed on every path out, even after a failed open.
  const std::unique_ptr<Sqlite3, int (*)(Sqlite3*)> closer(db, api->close);
  if (rc != kSqliteOk) {
    return absl::InvalidArgumentError(
        absl::StrCat(shown, ": SQLite cannot open it: ",
                     db != nullptr ? SqliteError(api->errmsg(db)) : std::string("out of memory")));
  }
  RecordedTrace trace;
  NsysReader reader(*api, db, shown, limits, &trace);
  if (absl::Status read = reader.Read(); !read.ok()) return read;
  trace.format = "Nsight Systems SQLite export";
  return trace;
}

}  // namespace gpuscope::internal
