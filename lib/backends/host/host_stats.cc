#include "backends/host/host_stats.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
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

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream f(path);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

// "Key:   123 kB" lines of /proc/meminfo, in bytes.
double MeminfoBytes(const std::string& text, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, key) || !absl::ConsumePrefix(&line, ":")) continue;
    std::vector<absl::string_view> parts =
        absl::StrSplit(absl::StripAsciiWhitespace(line), ' ', absl::SkipEmpty());
    double v = 0;
    if (parts.empty() || !absl::SimpleAtod(parts[0], &v))
      return std::numeric_limits<double>::quiet_NaN();
    return parts.size() > 1 && parts[1] == "kB" ? v * 1024 : v;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

// A number in a cgroup file, or NaN ("max", missing, unparsable).
double CgroupNumber(const std::string& path) {
  std::string text;
  double v = 0;
  if (!ReadFile(path, &text) || !absl::SimpleAtod(absl::StripAsciiWhitespace(text), &v)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return v;
}

// The value of `key` in a cgroup memory.stat, or 0.
double StatValue(const std::string& path, absl::string_view key) {
  std::string text;
  if (!ReadFile(path, &text)) return 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> kv = absl::StrSplit(line, ' ', absl::SkipEmpty());
    double v = 0;
    if (kv.size() == 2 && kv[0] == key && absl::SimpleAtod(kv[1], &v)) return v;
  }
  return 0;
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

absl::StatusOr<HostSnapshot> ReadHost(const std::string& proc_root, const std::string& pid_dir) {
  HostSnapshot s;
  std::string text;
  const std::string stat_path = proc_root + "/stat";
  if (!ReadFile(stat_path, &text))
    return absl::NotFoundError(absl::StrCat("cannot read ", stat_path));
  {
    std::istringstream in(text);
    std::string cpu;
    in >> cpu >> s.cpu.user >> s.cpu.nice >> s.cpu.system >> s.cpu.idle >> s.cpu.iowait >>
        s.cpu.irq >> s.cpu.softirq >> s.cpu.steal;
    if (cpu != "cpu" || !in)
      return absl::DataLossError(absl::StrCat(stat_path, ": no 'cpu' totals line"));
  }
  const double ticks = static_cast<double>(std::max<long>(1, sysconf(_SC_CLK_TCK)));
  if (ReadFile(absl::StrCat(proc_root, "/", pid_dir, "/stat"), &text)) {
    // Fields after the command name (which may hold spaces) in parentheses.
    const size_t close = text.rfind(')');
    if (close != std::string::npos) {
      std::vector<absl::string_view> f =
          absl::StrSplit(absl::string_view(text).substr(close + 1), ' ', absl::SkipEmpty());
      // f[0] is field 3 (state); utime..cstime are fields 14..17.
      uint64_t v[4] = {0, 0, 0, 0};
      bool ok = f.size() > 14;
      for (int i = 0; ok && i < 4; ++i)
        ok = absl::SimpleAtoi(f[static_cast<size_t>(11 + i)], &v[i]);
      if (ok) {
        s.process_cpu_s = static_cast<double>(v[0] + v[1]) / ticks;
        s.children_cpu_s = static_cast<double>(v[2] + v[3]) / ticks;
      }
    }
  }
  if (ReadFile(proc_root + "/meminfo", &text)) {
    s.mem_total_bytes = MeminfoBytes(text, "MemTotal");
    s.mem_available_bytes = MeminfoBytes(text, "MemAvailable");
    s.swap_total_bytes = MeminfoBytes(text, "SwapTotal");
    s.swap_free_bytes = MeminfoBytes(text, "SwapFree");
  }
  if (ReadFile(proc_root + "/loadavg", &text)) {
    double load = 0;
    if (absl::SimpleAtod(absl::string_view(text).substr(0, text.find(' ')), &load)) s.load1 = load;
  }
  if (ReadFile(proc_root + "/pressure/memory", &text)) {
    // "some avg10=0.12 avg60=0.05 avg300=0.01 total=1234"
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      if (!absl::ConsumePrefix(&line, "some ")) continue;
      for (absl::string_view kv : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
        double v = 0;
        if (absl::ConsumePrefix(&kv, "avg10=") && absl::SimpleAtod(kv, &v))
          s.memory_pressure_pct = v;
      }
    }
  }
  if (ReadFile(proc_root + "/vmstat", &text)) {
    for (absl::string_view line : absl::StrSplit(text, '\n')) {
      std::vector<absl::string_view> kv = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (kv.size() != 2) continue;
      if (kv[0] == "pswpin") (void)absl::SimpleAtoi(kv[1], &s.swap_in_pages);
      if (kv[0] == "pswpout") (void)absl::SimpleAtoi(kv[1], &s.swap_out_pages);
    }
  }
  return s;
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

std::vector<std::string> CgroupChain(const std::string& proc_root, const std::string& cgroup_root,
                                     const std::string& controller) {
  // /proc/self/cgroup: "0::/slurm/job_7/step_0" (v2), "4:cpu,cpuacct:/docker/ab12" (v1).
  std::string text;
  if (!ReadFile(proc_root + "/self/cgroup", &text)) text = controller.empty() ? "0::/\n" : "";
  std::string mount, own;
  bool found = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
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

ContainerMemory ReadContainerMemory(const std::string& cgroup_root, const std::string& proc_root) {
  ContainerMemory m;
  // The tightest limit along the chains; its usage, less the page cache the
  // kernel reclaims first (inactive files), is what counts against it.
  const auto consider = [&m](double limit, double usage, double inactive_file) {
    // cgroup v1 writes "no limit" as a huge number (2^63 rounded to pages).
    if (std::isnan(limit) || limit <= 0 || limit >= 0x1p60 || std::isnan(usage)) return;
    if (std::isnan(m.limit_bytes) || limit < m.limit_bytes) {
      m.limit_bytes = limit;
      m.available_bytes = std::max(0.0, limit - std::max(0.0, usage - inactive_file));
    }
  };
  for (const std::string& dir : CgroupChain(proc_root, cgroup_root, "")) {
    consider(CgroupNumber(dir + "/memory.max"), CgroupNumber(dir + "/memory.current"),
             StatValue(dir + "/memory.stat", "inactive_file"));
  }
  for (const std::string& dir : CgroupChain(proc_root, cgroup_root, "memory")) {
    consider(CgroupNumber(dir + "/memory.limit_in_bytes"),
             CgroupNumber(dir + "/memory.usage_in_bytes"),
             StatValue(dir + "/memory.stat", "total_inactive_file"));
  }
  return m;
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
