#include "trace/kineto_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/kernel_names.h"
#include "base/text.h"
#include "trace/byte_source.h"

namespace gpuscope::internal {
namespace {

// A trace nests 3 deep to its events, 6 at most in their args ("Input
// Dims": [[...]]); JSON nested deeper is not one. The handler refuses the
// level past this before the parser goes on: nlohmann's SAX parser is
// iterative (no recursion; one bit a level open).
constexpr int kMaxDepth = 64;
constexpr int64_t kMaxNs = std::numeric_limits<int64_t>::max();
constexpr int64_t kMinNs = -kMaxNs;

bool Has(std::string_view s, std::string_view part) { return s.find(part) != s.npos; }

// What nlohmann's lexer holds, whatever the SAX handler keeps: every byte
// from the start of a string or number token to the start of the next one
// (token_string, for its error messages: the whitespace, brackets, commas
// and literals in between included), and a string's or number's text once
// more (token_buffer). So its memory grows with the longest such run, not
// with the file: 10 GB of one string, of spaces or of "[],[],..." would be
// held whole. A run is bounded here, in the bytes on their way to the
// parser: the longest string in a real trace is a kernel name or a call
// stack, a few KiB, and pretty-printed JSON puts a few hundred bytes of
// indentation between values.
constexpr uint64_t kMaxRun = uint64_t{16} << 20;

class RunGuard {
 public:
  // How many bytes of `chunk` keep every run within kMaxRun: all of them,
  // or the offset where one passes it.
  size_t Scan(std::string_view chunk) {
    size_t i = 0;
    while (i < chunk.size()) {
      if (in_string_ && !escape_) {
        // Most of a trace's bytes are inside strings: jump to the string's
        // next quote or backslash (memchr) rather than step to it, each
        // byte passed counted as Step() counts it.
        const size_t stop = NextQuoteOrBackslash(chunk, i);
        if (run_ + (stop - i) > kMaxRun) return i + static_cast<size_t>(kMaxRun - run_);
        run_ += stop - i;
        i = stop;
        if (i == chunk.size()) break;
      }
      if (!Step(chunk[i])) return i;
      ++i;
    }
    return chunk.size();
  }
  // Where the run that passed kMaxRun is.
  std::string_view where() const {
    return in_string_   ? "in one string"
           : in_number_ ? "in one number"
                        : "without a string or a number (spaces, brackets, literals)";
  }

 private:
  // One byte through the lexer's states; false once the run passes kMaxRun.
  bool Step(char c) {
    if (in_string_) {
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        in_string_ = false;
        between_ = true;
      }
      ++run_;
    } else if (c == '"') {  // the lexer's reset(): a string starts
      in_string_ = true;
      in_number_ = false;
      run_ = 1;
    } else if (c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == ',' || c == ':' ||
               c == '[' || c == ']' || c == '{' || c == '}') {
      between_ = true;
      in_number_ = false;
      ++run_;
    } else {
      // A number starts (reset() again); a literal (true, false, null)
      // does not reset the lexer's token_string: it counts on.
      if (between_ && (c == '-' || (c >= '0' && c <= '9'))) {
        in_number_ = true;
        run_ = 0;
      }
      between_ = false;
      ++run_;
    }
    return run_ <= kMaxRun;
  }
  // The offset of the first '"' or '\\' at or after `from`, or chunk.size().
  static size_t NextQuoteOrBackslash(std::string_view chunk, size_t from) {
    const char* const p = chunk.data() + from;
    const size_t n = chunk.size() - from;
    const void* quote = std::memchr(p, '"', n);
    const size_t to_quote =
        quote != nullptr ? static_cast<size_t>(static_cast<const char*>(quote) - p) : n;
    const void* backslash = std::memchr(p, '\\', to_quote);
    return from + (backslash != nullptr
                       ? static_cast<size_t>(static_cast<const char*>(backslash) - p)
                       : to_quote);
  }

  uint64_t run_ = 0;
  bool in_string_ = false, escape_ = false, in_number_ = false;
  bool between_ = true;  // the last byte outside a string ended a token
};

// ByteSource's chunks as the input iterator nlohmann's parser reads through.
class ChunkIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  struct State {
    ByteSource* source = nullptr;
    std::string_view chunk;
    size_t at = 0;
    bool end = false;
    RunGuard guard;
    uint64_t passed = 0;  // bytes handed to the parser in earlier chunks
    absl::Status error;   // a run past kMaxRun: the input ends there
    void Fill() {
      while (at >= chunk.size() && !end) {
        passed += chunk.size();
        at = 0;
        chunk = error.ok() ? source->Next() : std::string_view();
        if (chunk.empty()) {
          end = true;
          break;
        }
        if (const size_t kept = guard.Scan(chunk); kept < chunk.size()) {
          error = absl::InvalidArgumentError(absl::StrCat(
              "more than ", kMaxRun >> 20, " MiB ", std::string(guard.where()), " at byte ",
              passed + kept,
              ": not a trace (in one, strings are a few KiB at most, and values a few bytes "
              "apart)"));
          chunk = chunk.substr(0, kept);
        }
      }
    }
  };

  // The parser compares its iterator with the end one and reads through
  // it a byte at a time: the chunk's bounds are kept here, in the
  // iterator, so that each byte is a pointer compare and a load. At the
  // end (and in the end iterator) both are null.
  explicit ChunkIterator(State* state) : state_(state) {
    if (state_ == nullptr) return;
    state_->Fill();
    Load();
  }
  reference operator*() const { return *at_; }
  ChunkIterator& operator++() {
    if (++at_ == end_) {
      state_->at = state_->chunk.size();
      state_->Fill();
      Load();
    }
    return *this;
  }
  bool operator==(const ChunkIterator& other) const { return at_ == other.at_; }
  bool operator!=(const ChunkIterator& other) const { return !(*this == other); }

 private:
  void Load() {
    if (state_->end) {
      at_ = end_ = nullptr;
    } else {
      at_ = state_->chunk.data() + state_->at;
      end_ = state_->chunk.data() + state_->chunk.size();
    }
  }
  State* state_;
  const char* at_ = nullptr;
  const char* end_ = nullptr;
};

enum class Category : uint8_t {
  kNone,
  kOp,
  kAnnotation,
  kRuntime,
  kKernel,
  kMemcpy,
  kMemset,
  kSync
};

Category CategoryOf(std::string_view cat) {
  static const auto* const kMap = new std::unordered_map<std::string_view, Category>{
      {"Operator", Category::kOp},
      {"cpu_op", Category::kOp},
      {"user_annotation", Category::kAnnotation},
      {"Runtime", Category::kRuntime},
      {"cuda_runtime", Category::kRuntime},
      {"cuda_driver", Category::kRuntime},
      {"Kernel", Category::kKernel},
      {"kernel", Category::kKernel},
      {"Memcpy", Category::kMemcpy},
      {"gpu_memcpy", Category::kMemcpy},
      {"Memset", Category::kMemset},
      {"gpu_memset", Category::kMemset},
      {"cuda_sync", Category::kSync},
  };
  const auto it = kMap->find(cat);
  return it == kMap->end() ? Category::kNone : it->second;
}

// One event's fields as they arrive.
struct EventFields {
  bool complete = false;  // "ph": "X"
  Category cat = Category::kNone;
  std::string name;
  std::string pid, tid;
  std::optional<int64_t> ts, dur;
  int64_t device = -1, stream = -1, correlation = 0, bytes = 0;
  std::string sync_kind;
};

class KinetoHandler {
 public:
  KinetoHandler(RecordedTrace* out, const ReadLimits& limits) : out_(out), limits_(limits) {}

  const absl::Status& error() const { return error_; }
  bool saw_events_array() const { return events_depth_ > 0; }
  bool list_format() const { return list_format_; }

  bool null() { return Value(); }
  bool boolean(bool) { return Value(); }
  bool number_integer(int64_t v) { return Number(v, nullptr); }
  bool number_unsigned(uint64_t v) {
    return Number(v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                      ? std::numeric_limits<int64_t>::max()
                      : static_cast<int64_t>(v),
                  nullptr);
  }
  bool number_float(double v, const std::string& text) {
    return Number(std::isfinite(v) ? static_cast<int64_t>(std::clamp(v, -9e18, 9e18)) : 0, &text);
  }
  bool string(std::string& s) {
    if (InEvent()) {
      if (depth_ == events_depth_)
        EventString(std::move(s));
      else if (in_args_ && depth_ == events_depth_ + 1 && key_ == "cuda_sync_kind")
        ev_.sync_kind = std::move(s);
    } else if (in_device_props_ && depth_ == 3 && key_ == "name") {
      prop_name_ = std::move(s);
    }
    return true;
  }
  bool binary(nlohmann::json::binary_t&) { return Fail("binary data in a JSON text"); }

  bool start_object(size_t) {
    if (++depth_ > kMaxDepth) return Fail(kTooDeep);
    if (depth_ == 1 && !list_format_) object_format_ = true;
    if (events_depth_ > 0 && depth_ == events_depth_ && in_events_array_) ev_ = EventFields{};
    if (InEvent() && depth_ == events_depth_ + 1 && key_ == "args") in_args_ = true;
    if (in_device_props_ && depth_ == 3) {
      prop_name_.clear();
      prop_id_ = -1;
    }
    return true;
  }
  bool end_object() {
    if (InEvent() && depth_ == events_depth_) {
      if (!EndEvent()) return false;
    } else if (in_args_ && depth_ == events_depth_ + 1) {
      in_args_ = false;
    } else if (in_device_props_ && depth_ == 3) {
      const size_t id = prop_id_ >= 0 ? static_cast<size_t>(prop_id_) : out_->gpu_names.size();
      if (id < 1024) {
        if (out_->gpu_names.size() <= id) out_->gpu_names.resize(id + 1);
        out_->gpu_names[id] = prop_name_;
      }
    }
    --depth_;
    return true;
  }
  bool start_array(size_t) {
    if (++depth_ > kMaxDepth) return Fail(kTooDeep);
    if (depth_ == 1) {
      list_format_ = true;
      events_depth_ = 2;
      in_events_array_ = true;
    } else if (depth_ == 2 && object_format_ && key_ == "traceEvents") {
      events_depth_ = 3;
      in_events_array_ = true;
    } else if (depth_ == 2 && object_format_ && key_ == "deviceProperties") {
      in_device_props_ = true;
    }
    return true;
  }
  bool end_array() {
    if (depth_ == events_depth_ - 1) in_events_array_ = false;
    if (depth_ == 2) in_device_props_ = false;
    --depth_;
    return true;
  }
  bool key(std::string& k) {
    key_ = std::move(k);
    if (depth_ == 1 && key_ == "distributedInfo")
      in_distributed_ = true;
    else if (depth_ == 1)
      in_distributed_ = false;
    return true;
  }
  bool parse_error(size_t position, const std::string&, const nlohmann::json::exception& e) {
    if (error_.ok()) {
      error_ = absl::InvalidArgumentError(
          absl::StrCat("not valid JSON at byte ", position, " (", ParseMessage(e.what()), ")"));
      syntax_error_ = true;
    }
    return false;
  }
  // Whether the parse stopped at text that is not JSON (else at JSON that
  // is not a trace, or past a limit).
  bool syntax_error() const { return syntax_error_; }
  bool Fail(std::string_view why) {
    if (error_.ok()) error_ = absl::InvalidArgumentError(std::string(why));
    return false;
  }

 private:
  static std::string ParseMessage(std::string_view what) {
    // "[json.exception.parse_error.101] parse error at line 1, column 2:
    // syntax error while parsing value - invalid literal; last read: 'tru'"
    const size_t colon = what.find(": ");
    std::string_view why = colon == std::string_view::npos ? what : what.substr(colon + 2);
    // What was last read runs from the last string or number up to the
    // error (up to kMaxRun bytes): its ends say enough for one line.
    constexpr std::string_view kLastRead = "; last read: '";
    const size_t at = why.find(kLastRead);
    // What was read is the file's bytes, UTF-8 or not: escaped, so that
    // the line is text.
    if (at == std::string_view::npos || why.size() - at < kLastRead.size() + 80) {
      return TerminalSafe(why);
    }
    const std::string_view read = why.substr(at + kLastRead.size());
    return TerminalSafe(absl::StrCat(std::string(why.substr(0, at + kLastRead.size())),
                                     std::string(read.substr(0, 32)), "...",
                                     std::string(read.substr(read.size() - 33))));
  }
  bool InEvent() const { return in_events_array_ && depth_ >= events_depth_; }
  bool Value() { return true; }

  // `text`: a decimal number's literal; null for an integer (then `v`).
  bool Number(int64_t v, const std::string* text) {
    if (InEvent() && depth_ == events_depth_) {
      if (key_ == "ts" || key_ == "dur") {
        std::optional<int64_t> ns;
        if (text != nullptr)
          ns = MicrosToNs(*text);
        else if (v > kMinNs / 1000 && v < kMaxNs / 1000)
          ns = v * 1000;
        (key_ == "ts" ? ev_.ts : ev_.dur) = ns;
      } else if (key_ == "pid") {
        ev_.pid = text != nullptr ? *text : std::to_string(v);
      } else if (key_ == "tid") {
        ev_.tid = text != nullptr ? *text : std::to_string(v);
      }
    } else if (in_args_ && depth_ == events_depth_ + 1) {
      if (key_ == "device")
        ev_.device = v;
      else if (key_ == "stream")
        ev_.stream = v;
      else if (key_ == "correlation")
        ev_.correlation = v;
      else if (key_ == "bytes")
        ev_.bytes = v;
    } else if (in_device_props_ && depth_ == 3 && key_ == "id") {
      prop_id_ = v;
    } else if (in_distributed_ && depth_ == 2) {
      if (key_ == "rank" && v >= 0 && v < (1 << 24)) out_->rank = static_cast<int>(v);
      if (key_ == "world_size" && v > 0 && v <= (1 << 24)) out_->world_size = static_cast<int>(v);
    }
    return true;
  }

  void EventString(std::string s) {
    if (key_ == "ph")
      ev_.complete = s == "X";
    else if (key_ == "cat")
      ev_.cat = CategoryOf(s);
    else if (key_ == "name")
      ev_.name = std::move(s);
    else if (key_ == "pid")
      ev_.pid = std::move(s);
    else if (key_ == "tid")
      ev_.tid = std::move(s);
  }

  uint32_t Intern(std::string name, std::unordered_map<std::string, uint32_t>* index,
                  std::vector<std::string>* names) {
    const auto [it, added] = index->try_emplace(name, static_cast<uint32_t>(names->size()));
    if (added) names->push_back(std::move(name));
    return it->second;
  }

  bool EndEvent() {
    if (++out_->events > static_cast<int64_t>(limits_.max_events)) {
      return Fail(
          absl::StrCat("more than ", limits_.max_events, " events (max_events): not read further"));
    }
    if (!ev_.complete || ev_.cat == Category::kNone || !ev_.ts.has_value()) return true;
    const int64_t begin = *ev_.ts;
    // Zero and negative durations: a point in time.
    const int64_t end = begin + std::max<int64_t>(0, ev_.dur.value_or(0));
    switch (ev_.cat) {
      case Category::kOp:
      case Category::kAnnotation:
      case Category::kRuntime: {
        TraceHostEvent h;
        h.begin_ns = begin;
        h.end_ns = end;
        h.kind = ev_.cat == Category::kRuntime      ? TraceHostEvent::Kind::kRuntime
                 : ev_.cat == Category::kAnnotation ? TraceHostEvent::Kind::kAnnotation
                                                    : TraceHostEvent::Kind::kOp;
        h.correlation = static_cast<uint32_t>(ev_.correlation);
        h.thread = Intern(absl::StrCat(ev_.pid, "/", ev_.tid), &thread_index_, &out_->threads);
        h.name = Intern(std::move(ev_.name), &name_index_, &out_->names);
        out_->host.push_back(h);
        return true;
      }
      default: return DeviceEvent(begin, end);
    }
  }

  bool DeviceEvent(int64_t begin, int64_t end) {
    TraceDeviceEvent d;
    DeviceInterval& i = d.interval;
    i.begin_ns = begin;
    i.end_ns = end;
    int64_t device = ev_.device;
    if (device < 0) {  // older files: the device is the event's pid
      int64_t pid = -1;
      std::from_chars(ev_.pid.data(), ev_.pid.data() + ev_.pid.size(), pid);
      device = pid;
    }
    i.device = static_cast<uint32_t>(std::clamp<int64_t>(device, 0, 1 << 16));
    i.stream = static_cast<uint32_t>(std::clamp<int64_t>(ev_.stream, 0, UINT32_MAX));
    i.bytes = static_cast<uint64_t>(std::max<int64_t>(0, ev_.bytes));
    const std::string_view name = ev_.name;
    switch (ev_.cat) {
      case Category::kKernel:
        i.kind = ActivityKind::kKernel;
        i.kernel_class = ClassifyKernel(name);
        break;
      case Category::kMemcpy:
        // "Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)", ...
        i.kind = Has(name, "HtoD")   ? ActivityKind::kMemcpyH2D
                 : Has(name, "DtoH") ? ActivityKind::kMemcpyD2H
                                     : ActivityKind::kMemcpyOther;
        i.pageable = i.kind != ActivityKind::kMemcpyOther && Has(name, "Pageable");
        break;
      case Category::kMemset: i.kind = ActivityKind::kMemset; break;
      default:  // kSync
        out_->has_sync_records = true;
        // A stream waiting on an event does not block the host.
        if (ev_.sync_kind == "Stream Wait Event" || name == "Stream Wait Event") return true;
        i.kind = ActivityKind::kSync;
        break;
    }
    d.correlation = static_cast<uint32_t>(ev_.correlation);
    d.name = Intern(std::move(ev_.name), &name_index_, &out_->names);
    out_->device.push_back(d);
    return true;
  }

  static constexpr std::string_view kTooDeep =
      "JSON nested deeper than 64 levels (a trace nests fewer than 10): not a trace";

  RecordedTrace* out_;
  const ReadLimits limits_;
  absl::Status error_;
  bool syntax_error_ = false;
  int depth_ = 0;
  int events_depth_ = 0;  // the depth of an event object; 0 until the events array opens
  bool list_format_ = false, object_format_ = false;
  bool in_events_array_ = false, in_args_ = false;
  bool in_device_props_ = false, in_distributed_ = false;
  std::string key_;
  EventFields ev_;
  std::string prop_name_;
  int64_t prop_id_ = -1;
  std::unordered_map<std::string, uint32_t> name_index_, thread_index_;
};

}  // namespace

std::optional<int64_t> MicrosToNs(std::string_view text) {
  size_t i = 0;
  const bool negative = !text.empty() && text[0] == '-';
  if (negative) ++i;
  __extension__ typedef __int128 Wide;  // past 2^80 before the range check below
  Wide whole = 0;
  size_t digits = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits) {
    whole = whole * 10 + (text[i] - '0');
    if (whole > (Wide{1} << 80)) return std::nullopt;
  }
  Wide ns = whole * 1000;
  int frac_digits = 0;
  int round_digit = -1;
  if (i < text.size() && text[i] == '.') {
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, ++digits) {
      if (frac_digits < 3) {
        ns += (text[i] - '0') * (frac_digits == 0 ? 100 : frac_digits == 1 ? 10 : 1);
        ++frac_digits;
      } else if (round_digit < 0) {
        round_digit = text[i] - '0';
      }
    }
  }
  if (digits == 0) return std::nullopt;
  if (i < text.size()) {
    if (text[i] != 'e' && text[i] != 'E') return std::nullopt;
    double v = 0;  // an exponent: rare, and a double is then all the text holds
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || p != text.data() + text.size() || !std::isfinite(v * 1000) ||
        std::fabs(v * 1000) > 9e18)
      return std::nullopt;
    return static_cast<int64_t>(std::llround(v * 1000));
  }
  if (round_digit >= 5) ns += 1;
  if (ns > std::numeric_limits<int64_t>::max()) return std::nullopt;
  return static_cast<int64_t>(negative ? -ns : ns);
}

absl::StatusOr<RecordedTrace> ReadKinetoTrace(std::string_view path, const ReadLimits& limits) {
  absl::StatusOr<std::unique_ptr<ByteSource>> source = ByteSource::Open(path, limits.max_bytes);
  if (!source.ok()) return source.status();
  RecordedTrace trace;
  KinetoHandler handler(&trace, limits);
  ChunkIterator::State state;
  state.source = source->get();
  const bool parsed = nlohmann::json::sax_parse(ChunkIterator(&state), ChunkIterator(nullptr),
                                                &handler, nlohmann::json::input_format_t::json,
                                                /*strict=*/true);
  if (!(*source)->status().ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read the trace: ", (*source)->status().message()));
  }
  if (!state.error.ok() && state.end) {  // the parser read up to where the guard cut
    return absl::InvalidArgumentError(
        absl::StrCat("not a torch.profiler trace: ", state.error.message()));
  }
  if (!parsed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "not a torch.profiler trace: ", handler.error().message(),
        (*source)->gzip() || !handler.syntax_error() ? "" : " (a truncated file, or not JSON?)"));
  }
  if (!handler.saw_events_array()) {
    return absl::InvalidArgumentError(
        "not a torch.profiler trace: JSON without a \"traceEvents\" list (another tool's "
        "JSON?); give a trace written by torch.profiler (export_chrome_trace or "
        "tensorboard_trace_handler)");
  }
  trace.format = handler.list_format() ? "Kineto JSON (list of events)" : "Kineto JSON";
  return trace;
}

}  // namespace gpuscope::internal
