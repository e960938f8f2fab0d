#include "backends/host/host_stats.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gpuscope::internal {
namespace {

// Files that can be read whole into a string (the one-shot readers and the
// placement, which runs once).
bool ReadFile(const std::string& path, std::string* out) {
  ProcFile f(path);
  absl::string_view text;
  if (!f.Read(&text)) return false;
  out->assign(text.data(), text.size());
  return true;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The next whitespace-separated token of `*s` ("" at the end), consumed.
absl::string_view NextToken(absl::string_view* s) {
  size_t b = 0;
  while (b < s->size() && IsSpace((*s)[b])) ++b;
  size_t e = b;
  while (e < s->size() && !IsSpace((*s)[e])) ++e;
  const absl::string_view token = s->substr(b, e - b);
  s->remove_prefix(e);
  return token;
}

// The next line of `*s` (without its newline), consumed.
absl::string_view NextLine(absl::string_view* s) {
  const size_t nl = s->find('\n');
  const absl::string_view line = s->substr(0, nl);
  s->remove_prefix(nl == absl::string_view::npos ? s->size() : nl + 1);
  return line;
}

// The number in a cgroup file's text, or NaN ("max", empty, unparsable).
double CgroupNumberText(absl::string_view text) {
  double v = 0;
  if (!absl::SimpleAtod(absl::StripAsciiWhitespace(text), &v)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return v;
}

// The value of `key` in a memory.stat's text ("key value" lines), or 0.
double StatValueText(absl::string_view text, absl::string_view key) {
  while (!text.empty()) {
    absl::string_view line = NextLine(&text);
    const absl::string_view k = NextToken(&line);
    const absl::string_view v = NextToken(&line);
    double value = 0;
    if (k == key && NextToken(&line).empty() && absl::SimpleAtod(v, &value)) return value;
  }
  return 0;
}

// /proc/stat's "cpu" totals line: the first line, "cpu" and eight numbers.
bool ParseProcStat(absl::string_view text, CpuTimes* cpu) {
  absl::string_view line = NextLine(&text);
  if (NextToken(&line) != "cpu") return false;
  uint64_t* const fields[] = {&cpu->user,   &cpu->nice, &cpu->system,  &cpu->idle,
                              &cpu->iowait, &cpu->irq,  &cpu->softirq, &cpu->steal};
  for (uint64_t* f : fields) {
    if (!absl::SimpleAtoi(NextToken(&line), f)) return false;
  }
  return true;
}

void ParseSelfStat(absl::string_view text, double ticks_per_s, HostSnapshot* s) {
  // utime, stime, cutime, cstime: fields 14 to 17.
  absl::string_view f[15];
  if (!ProcStatFields(text, f, 15)) return;
  uint64_t v[4] = {0, 0, 0, 0};
  for (int i = 0; i < 4; ++i) {
    if (!absl::SimpleAtoi(f[11 + i], &v[i])) return;
  }
  s->process_cpu_s = static_cast<double>(v[0] + v[1]) / ticks_per_s;
  s->children_cpu_s = static_cast<double>(v[2] + v[3]) / ticks_per_s;
}

// "Key:   123 kB" lines of /proc/meminfo, in bytes: the first line of each
// key counts (NaN when its number does not parse).
void ParseMeminfo(absl::string_view text, HostSnapshot* s) {
  struct Key {
    absl::string_view name;
    double* out;
    bool seen;
  } keys[] = {{"MemTotal", &s->mem_total_bytes, false},
              {"MemAvailable", &s->mem_available_bytes, false},
              {"SwapTotal", &s->swap_total_bytes, false},
              {"SwapFree", &s->swap_free_bytes, false}};
  int left = 4;
  while (left > 0 && !text.empty()) {
    absl::string_view line = NextLine(&text);
    for (Key& k : keys) {
      if (k.seen || !absl::ConsumePrefix(&line, k.name) || !absl::ConsumePrefix(&line, ":")) {
        continue;
      }
      k.seen = true;
      --left;
      const absl::string_view number = NextToken(&line);
      double v = 0;
      if (!absl::SimpleAtod(number, &v)) {
        *k.out = std::numeric_limits<double>::quiet_NaN();
      } else {
        *k.out = NextToken(&line) == "kB" ? v * 1024 : v;
      }
      break;
    }
  }
}

void ParseLoadavg(absl::string_view text, HostSnapshot* s) {
  double load = 0;
  if (absl::SimpleAtod(text.substr(0, text.find(' ')), &load)) s->load1 = load;
}

// "some avg10=0.12 avg60=0.05 avg300=0.01 total=1234"
void ParsePressure(absl::string_view text, double* some_avg10) {
  while (!text.empty()) {
    absl::string_view line = NextLine(&text);
    if (!absl::ConsumePrefix(&line, "some ")) continue;
    for (absl::string_view kv = NextToken(&line); !kv.empty(); kv = NextToken(&line)) {
      double v = 0;
      if (absl::ConsumePrefix(&kv, "avg10=") && absl::SimpleAtod(kv, &v)) *some_avg10 = v;
    }
  }
}

// "pswpin 7" and "pswpout 11" lines of /proc/vmstat.
void ParseVmstat(absl::string_view text, HostSnapshot* s) {
  while (!text.empty()) {
    absl::string_view line = NextLine(&text);
    if (line.size() < 6 || line[0] != 'p' || line[1] != 's') continue;  // most lines, quickly
    const absl::string_view key = NextToken(&line);
    const absl::string_view value = NextToken(&line);
    if (!NextToken(&line).empty()) continue;
    if (key == "pswpin") (void)absl::SimpleAtoi(value, &s->swap_in_pages);
    if (key == "pswpout") (void)absl::SimpleAtoi(value, &s->swap_out_pages);
  }
}

}  // namespace

std::vector<int> ParseCpuList(const std::string& list) {
  std::vector<int> cpus;
  for (absl::string_view part :
       absl::StrSplit(absl::StripAsciiWhitespace(list), ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> range = absl::StrSplit(part, '-');
    int lo = 0, hi = 0;
    if (range.size() == 1 && absl::SimpleAtoi(range[0], &lo)) {
      hi = lo;
    } else if (range.size() != 2 || !absl::SimpleAtoi(range[0], &lo) ||
               !absl::SimpleAtoi(range[1], &hi) || hi < lo || hi - lo > 1 << 16) {
      return {};
    }
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  return cpus;
}

bool ProcStatFields(absl::string_view text, absl::string_view* fields, size_t n) {
  const size_t close = text.rfind(')');
  if (close == absl::string_view::npos) return false;
  text.remove_prefix(close + 1);
  size_t count = 0;
  while (count < n) {
    const absl::string_view token = NextToken(&text);
    if (token.empty()) return false;
    fields[count++] = token;
  }
  return true;
}

ProcFile::ProcFile(ProcFile&& other) noexcept
    : path_(std::move(other.path_)),
      end_(other.end_),
      fd_(std::exchange(other.fd_, -1)),
      tried_(other.tried_),
      buffer_(std::move(other.buffer_)) {}

ProcFile& ProcFile::operator=(ProcFile&& other) noexcept {
  if (this != &other) {
    Close();
    path_ = std::move(other.path_);
    end_ = other.end_;
    fd_ = std::exchange(other.fd_, -1);
    tried_ = other.tried_;
    buffer_ = std::move(other.buffer_);
  }
  return *this;
}

void ProcFile::Close() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

bool ProcFile::Read(absl::string_view* text, bool may_open) {
  // Files larger than this are read in part (a /proc/stat with thousands of
  // CPUs and interrupts is still well below).
  constexpr size_t kMaxBytes = size_t{16} << 20;
  if (fd_ < 0) {
    if (tried_ && !may_open) return false;
    tried_ = true;
    do {
      fd_ = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    } while (fd_ < 0 && errno == EINTR);
    if (fd_ < 0) return false;
  }
  if (buffer_.empty()) buffer_.resize(4096);
  // From the start to the end: a read from offset 0 has the kernel format a
  // /proc or cgroup file afresh.
  size_t total = 0;
  for (;;) {
    if (total == buffer_.size()) {
      if (buffer_.size() >= kMaxBytes) break;
      buffer_.resize(buffer_.size() * 2);
    }
    const ssize_t n =
        pread(fd_, buffer_.data() + total, buffer_.size() - total, static_cast<off_t>(total));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      Close();
      return false;
    }
    if (n == 0) break;
    const bool short_read = static_cast<size_t>(n) < buffer_.size() - total;
    total += static_cast<size_t>(n);
    if (short_read && end_ == End::kAtShortRead) break;
  }
  *text = absl::string_view(buffer_.data(), total);
  return true;
}

HostReader::HostReader(const std::string& proc_root, const std::string& pid_dir)
    : stat_(proc_root + "/stat", ProcFile::End::kAtShortRead),
      self_stat_(absl::StrCat(proc_root, "/", pid_dir, "/stat"), ProcFile::End::kAtShortRead),
      meminfo_(proc_root + "/meminfo", ProcFile::End::kAtShortRead),
      loadavg_(proc_root + "/loadavg", ProcFile::End::kAtShortRead),
      pressure_(proc_root + "/pressure/memory", ProcFile::End::kAtShortRead),
      cpu_pressure_(proc_root + "/pressure/cpu", ProcFile::End::kAtShortRead),
      vmstat_(proc_root + "/vmstat"),
      ticks_per_s_(static_cast<double>(std::max<long>(1, sysconf(_SC_CLK_TCK)))) {}

absl::StatusOr<HostSnapshot> HostReader::Read(bool look_again) {
  HostSnapshot s;
  absl::string_view text;
  // /proc/stat is required: looked for on every read.
  if (!stat_.Read(&text)) return absl::NotFoundError(absl::StrCat("cannot read ", stat_.path()));
  if (!ParseProcStat(text, &s.cpu)) {
    return absl::DataLossError(absl::StrCat(stat_.path(), ": no 'cpu' totals line"));
  }
  if (self_stat_.Read(&text, look_again)) ParseSelfStat(text, ticks_per_s_, &s);
  if (meminfo_.Read(&text, look_again)) ParseMeminfo(text, &s);
  // The kernel updates the load average every 5 s and PSI's avg10 every
  // 2 s: between two looks, the last ones read stand.
  if (!averages_read_ || look_again) {
    if (loadavg_.Read(&text, look_again)) ParseLoadavg(text, &s);
    if (pressure_.Read(&text, look_again)) ParsePressure(text, &s.memory_pressure_pct);
    if (cpu_pressure_.Read(&text, look_again)) ParsePressure(text, &s.cpu_pressure_pct);
    averages_read_ = true;
    load1_ = s.load1;
    memory_pressure_pct_ = s.memory_pressure_pct;
    cpu_pressure_pct_ = s.cpu_pressure_pct;
  } else {
    s.load1 = load1_;
    s.memory_pressure_pct = memory_pressure_pct_;
    s.cpu_pressure_pct = cpu_pressure_pct_;
  }
  // Without swap (SwapTotal 0) the swap counters stand still: the last ones
  // read stand for them.
  const bool swap_off = s.swap_total_bytes == 0;
  if (!vmstat_read_ || look_again || !swap_off) {
    if (vmstat_.Read(&text, look_again)) ParseVmstat(text, &s);
    vmstat_read_ = true;
    swap_in_ = s.swap_in_pages;
    swap_out_ = s.swap_out_pages;
  } else {
    s.swap_in_pages = swap_in_;
    s.swap_out_pages = swap_out_;
  }
  return s;
}

absl::StatusOr<HostSnapshot> ReadHost(const std::string& proc_root, const std::string& pid_dir) {
  return HostReader(proc_root, pid_dir).Read();
}

HostRates RatesBetween(const HostSnapshot& a, const HostSnapshot& b, double seconds) {
  HostRates r;
  const auto delta = [](uint64_t x, uint64_t y) {
    return y >= x ? static_cast<double>(y - x) : 0.0;
  };
  const double total = delta(a.cpu.total(), b.cpu.total());
  if (total > 0) {
    const double idle = delta(a.cpu.idle, b.cpu.idle);
    const double iowait = delta(a.cpu.iowait, b.cpu.iowait);
    r.cpu_pct = 100.0 * (total - idle - iowait) / total;
    r.iowait_pct = 100.0 * iowait / total;
    r.steal_pct = 100.0 * delta(a.cpu.steal, b.cpu.steal) / total;
  }
  if (seconds > 0) {
    r.process_cores = std::max(0.0, b.process_cpu_s - a.process_cpu_s) / seconds;
    r.children_cores = std::max(0.0, b.children_cpu_s - a.children_cpu_s) / seconds;
    r.swap_pages_per_s =
        (delta(a.swap_in_pages, b.swap_in_pages) + delta(a.swap_out_pages, b.swap_out_pages)) /
        seconds;
  }
  return r;
}

bool ParseSchedstat(absl::string_view text, uint64_t* on_cpu_ns, uint64_t* run_delay_ns) {
  return absl::SimpleAtoi(NextToken(&text), on_cpu_ns) &&
         absl::SimpleAtoi(NextToken(&text), run_delay_ns);
}

HostPlacement ReadPlacement(const std::string& sys_root, const std::string& cgroup_root,
                            const std::vector<int>* allowed_cpus, const std::string& proc_root) {
  HostPlacement p;
  std::string text;
  if (ReadFile(sys_root + "/devices/system/cpu/online", &text)) {
    p.cpus_online = static_cast<int>(ParseCpuList(text).size());
  }
  std::vector<int> allowed;
  if (allowed_cpus != nullptr) {
    allowed = *allowed_cpus;
  } else {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
      for (size_t c = 0; c < CPU_SETSIZE; ++c) {
        if (CPU_ISSET(c, &set)) allowed.push_back(static_cast<int>(c));
      }
    }
  }
  if (!allowed.empty()) p.cpus_allowed = static_cast<int>(allowed.size());
  // The tightest quota/period along the process's cgroup chains: cgroup v2's
  // cpu.max ("max 100000": no limit; "200000 100000": 2 cores), cgroup v1's
  // cpu.cfs_quota_us (-1: no limit) over cpu.cfs_period_us.
  const auto tighten = [&p](double quota, double period) {
    if (quota > 0 && period > 0 &&
        (std::isnan(p.cgroup_cpu_limit) || quota / period < p.cgroup_cpu_limit)) {
      p.cgroup_cpu_limit = quota / period;
    }
  };
  for (const std::string& dir : CgroupChain(proc_root, cgroup_root, "")) {
    if (!ReadFile(dir + "/cpu.max", &text)) continue;
    std::vector<absl::string_view> parts =
        absl::StrSplit(absl::StripAsciiWhitespace(text), ' ', absl::SkipEmpty());
    double quota = 0, period = 0;
    if (parts.size() == 2 && parts[0] != "max" && absl::SimpleAtod(parts[0], &quota) &&
        absl::SimpleAtod(parts[1], &period)) {
      tighten(quota, period);
    }
  }
  for (const std::string& dir : CgroupChain(proc_root, cgroup_root, "cpu")) {
    std::string period_text;
    double quota = 0, period = 0;
    if (ReadFile(dir + "/cpu.cfs_quota_us", &text) &&
        ReadFile(dir + "/cpu.cfs_period_us", &period_text) &&
        absl::SimpleAtod(absl::StripAsciiWhitespace(text), &quota) &&
        absl::SimpleAtod(absl::StripAsciiWhitespace(period_text), &period)) {
      tighten(quota, period);
    }
  }
  // Which NUMA nodes the allowed CPUs are on.
  std::set<int> nodes;
  for (int node = 0; node < 1024; ++node) {
    if (!ReadFile(absl::StrCat(sys_root, "/devices/system/node/node", node, "/cpulist"), &text)) {
      if (node > 64) break;  // node numbers can have holes; stop well after the last
      continue;
    }
    for (int cpu : ParseCpuList(text)) {
      if (std::find(allowed.begin(), allowed.end(), cpu) != allowed.end()) nodes.insert(node);
    }
  }
  p.numa_nodes_of_allowed_cpus.assign(nodes.begin(), nodes.end());
  return p;
}

namespace {

std::vector<std::string> CgroupChainOf(absl::string_view text, const std::string& cgroup_root,
                                       const std::string& controller) {
  std::string mount, own;
  bool found = false;
  while (!text.empty()) {
    const absl::string_view line = NextLine(&text);
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (fields.size() != 3) continue;
    if (controller.empty() ? fields[0] == "0" && fields[1].empty()
                           : absl::c_linear_search(absl::StrSplit(fields[1], ','), controller)) {
      mount = controller.empty() ? cgroup_root : absl::StrCat(cgroup_root, "/", fields[1]);
      own = std::string(absl::StripAsciiWhitespace(fields[2]));
      found = true;
      break;
    }
  }
  std::vector<std::string> chain;
  if (!found) return chain;
  // In a container without a cgroup namespace the path names the host's
  // hierarchy while the mount shows the container's own cgroup: walking up,
  // the mount's root is reached either way.
  for (std::string dir = own.empty() ? "/" : own;;) {
    chain.push_back(dir == "/" ? mount : mount + dir);
    if (dir == "/") break;
    const size_t slash = dir.rfind('/');
    dir = slash == 0 || slash == std::string::npos ? "/" : dir.substr(0, slash);
  }
  return chain;
}

// What /proc/self/cgroup is taken to say when it cannot be read: the
// process is in cgroup v2's root, and in no cgroup v1 hierarchy.
constexpr absl::string_view kUnreadableCgroupV2 = "0::/\n";

}  // namespace

std::vector<std::string> CgroupChain(const std::string& proc_root, const std::string& cgroup_root,
                                     const std::string& controller) {
  // /proc/self/cgroup: "0::/slurm/job_7/step_0" (v2), "4:cpu,cpuacct:/docker/ab12" (v1).
  std::string text;
  if (!ReadFile(proc_root + "/self/cgroup", &text)) {
    text = controller.empty() ? std::string(kUnreadableCgroupV2) : "";
  }
  return CgroupChainOf(text, cgroup_root, controller);
}

SelfCgroup::SelfCgroup(const std::string& proc_root)
    : file_(proc_root + "/self/cgroup", ProcFile::End::kAtShortRead) {}

bool SelfCgroup::Changed(bool look_again) {
  if (built_ && !look_again) return false;
  absl::string_view text;
  const bool readable = file_.Read(&text, /*may_open=*/true);
  if (!readable) text = "";
  if (built_ && readable == readable_ && text == text_) return false;
  text_.assign(text.data(), text.size());
  readable_ = readable;
  built_ = true;
  return true;
}

std::vector<std::string> SelfCgroup::Chain(const std::string& cgroup_root,
                                           const std::string& controller) const {
  const absl::string_view text =
      readable_ ? absl::string_view(text_)
                : (controller.empty() ? kUnreadableCgroupV2 : absl::string_view());
  return CgroupChainOf(text, cgroup_root, controller);
}

ContainerMemoryReader::ContainerMemoryReader(std::string cgroup_root, std::string proc_root)
    : cgroup_root_(std::move(cgroup_root)), self_(proc_root) {}

void ContainerMemoryReader::Build() {
  levels_.clear();
  const auto add = [this](const std::vector<std::string>& chain, const char* limit,
                          const char* usage, const char* inactive_key) {
    for (const std::string& dir : chain) {
      levels_.push_back(Level{ProcFile(absl::StrCat(dir, "/", limit), ProcFile::End::kAtShortRead),
                              ProcFile(absl::StrCat(dir, "/", usage), ProcFile::End::kAtShortRead),
                              ProcFile(dir + "/memory.stat", ProcFile::End::kAtShortRead),
                              inactive_key});
    }
  };
  add(self_.Chain(cgroup_root_, ""), "memory.max", "memory.current", "inactive_file");
  add(self_.Chain(cgroup_root_, "memory"), "memory.limit_in_bytes", "memory.usage_in_bytes",
      "total_inactive_file");
}

ContainerMemory ContainerMemoryReader::Read(bool look_again) {
  if (self_.Changed(look_again)) Build();  // the first read, or the process moved
  ContainerMemory m;
  // The tightest limit along the chains; its usage, less the page cache the
  // kernel reclaims first (inactive files), is what counts against it. The
  // usage and memory.stat are read only for a limit tighter than those
  // before it.
  for (Level& level : levels_) {
    absl::string_view value;
    if (!level.limit.Read(&value, look_again)) continue;
    const double limit = CgroupNumberText(value);
    // cgroup v1 writes "no limit" as a huge number (2^63 rounded to pages).
    if (std::isnan(limit) || limit <= 0 || limit >= 0x1p60) continue;
    if (!std::isnan(m.limit_bytes) && !(limit < m.limit_bytes)) continue;
    if (!level.usage.Read(&value, look_again)) continue;
    const double usage = CgroupNumberText(value);
    if (std::isnan(usage)) continue;
    const double inactive_file =
        level.stat.Read(&value, look_again) ? StatValueText(value, level.inactive_key) : 0;
    m.limit_bytes = limit;
    m.available_bytes = std::max(0.0, limit - std::max(0.0, usage - inactive_file));
  }
  return m;
}

ContainerMemory ReadContainerMemory(const std::string& cgroup_root, const std::string& proc_root) {
  return ContainerMemoryReader(cgroup_root, proc_root).Read();
}

ContainerCpuReader::ContainerCpuReader(std::string cgroup_root, std::string proc_root)
    : cgroup_root_(std::move(cgroup_root)), self_(proc_root) {}

void ContainerCpuReader::Build() {
  stats_.clear();
  for (const char* controller : {"", "cpu"}) {
    for (const std::string& dir : self_.Chain(cgroup_root_, controller))
      stats_.emplace_back(dir + "/cpu.stat", ProcFile::End::kAtShortRead);
  }
  counts_.assign(stats_.size(), CgroupThrottling{});
}

const std::vector<CgroupThrottling>& ContainerCpuReader::Read(bool look_again, bool* rebuilt) {
  *rebuilt = self_.Changed(look_again);
  if (*rebuilt) Build();
  for (size_t i = 0; i < stats_.size(); ++i) {
    absl::string_view text;
    CgroupThrottling& c = counts_[i];
    c = CgroupThrottling{};
    if (!stats_[i].Read(&text, look_again)) continue;
    c.periods = static_cast<uint64_t>(StatValueText(text, "nr_periods"));
    c.throttled = static_cast<uint64_t>(StatValueText(text, "nr_throttled"));
  }
  return counts_;
}

double ThrottledShare(const std::vector<CgroupThrottling>& before,
                      const std::vector<CgroupThrottling>& after) {
  double share = std::numeric_limits<double>::quiet_NaN();
  if (before.size() != after.size()) return share;
  for (size_t i = 0; i < after.size(); ++i) {
    const CgroupThrottling& a = before[i];
    const CgroupThrottling& b = after[i];
    // A counter that went back: another cgroup at that path since.
    if (b.periods <= a.periods || b.throttled < a.throttled) continue;
    const double level = std::min(1.0, static_cast<double>(b.throttled - a.throttled) /
                                           static_cast<double>(b.periods - a.periods));
    if (std::isnan(share) || level > share) share = level;
  }
  return share;
}

std::string CanonicalPciBusId(const std::string& bus_id) {
  std::string id = absl::AsciiStrToLower(absl::StripAsciiWhitespace(bus_id));
  if (const size_t colon = id.find(':'); colon != std::string::npos && colon > 0) {
    unsigned long domain = 0;
    if (!absl::SimpleHexAtoi(id.substr(0, colon), &domain)) return "";
    id = absl::StrCat(absl::StrFormat("%04x", domain), id.substr(colon));
  }
  return id;
}

int PciNumaNode(const std::string& sys_root, const std::string& bus_id) {
  const std::string id = CanonicalPciBusId(bus_id);
  if (id.empty()) return -1;
  std::string text;
  if (!ReadFile(absl::StrCat(sys_root, "/bus/pci/devices/", id, "/numa_node"), &text)) return -1;
  int node = -1;
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &node) ? node : -1;
}

}  // namespace gpuscope::internal
