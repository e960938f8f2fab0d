// A doctor report for people (FormatDoctor()) and as JSON (ToJson(),
// DoctorFromJson()): what `gpuscope doctor` prints, `--save` writes and
// `--baseline` reads.

#include "gpuscope/doctor.h"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/json.h"
#include "base/strings.h"
#include "base/text.h"
#include "export/json_out.h"
#include "export/report_fields.h"
#include "gpuscope/report.h"

namespace gpuscope {
namespace {

// The version of the JSON a doctor report is saved as.
constexpr int kDoctorSchemaVersion = 1;

}  // namespace

std::string FormatDoctor(const DoctorReport& r, bool color) {
  std::string out = absl::StrCat("gpuscope doctor ", r.version, " on ",
                                 r.hostname.empty() ? "this host" : r.hostname, "\n");
  const auto paint = [color](CheckStatus s) -> std::pair<const char*, const char*> {
    if (!color || s == CheckStatus::kOk) return {"", ""};
    return {s == CheckStatus::kFail ? "\033[31m" : "\033[33m", "\033[0m"};
  };
  for (const DoctorCheck& c : r.checks) {
    const auto [on, off] = paint(c.status);
    // The escape codes take no columns: pad the visible part only.
    const std::string first = absl::StrFormat("  %s%-4s%s %-5s %-13s", on,
                                              CheckStatusName(c.status), off, c.subject, c.id);
    internal::AppendHanging(&out, first, c.value, 26);  // the value column
    if (!c.reason.empty()) internal::AppendWrapped(&out, c.reason, 8);
  }
  int warn = 0, fail = 0;
  for (const DoctorCheck& c : r.checks) {
    warn += c.status == CheckStatus::kWarn;
    fail += c.status == CheckStatus::kFail;
  }
  absl::StrAppendFormat(&out, "%d checks: %d failed, %d warnings\n", r.checks.size(), fail, warn);
  return out;
}

std::string ToJson(const DoctorReport& r) {
  internal::JsonWriter w(/*indent=*/2);
  internal::JsonOut out(w);
  w.BeginObject();
  out.String("schema", "gpuscope.doctor");
  out.Int("schema_version", kDoctorSchemaVersion, internal::kCount);
  internal::DoctorReportFields(out, r);
  w.EndObject();
  std::string text = w.Take();
  text.push_back('\n');
  return text;
}

absl::StatusOr<DoctorReport> DoctorFromJson(std::string_view json) {
  const auto bad = [](std::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a gpuscope doctor report: ", internal::ToAbsl(what),
                     " (write one with gpuscope doctor --save FILE)"));
  };
  absl::StatusOr<internal::JsonValue> doc = internal::ParseJson(json);
  if (!doc.ok()) return bad(absl::StrCat("invalid JSON: ", doc.status().message()));
  if (!doc->is_object()) return bad("the top level is not an object");
  const internal::JsonValue* schema = internal::Find(*doc, "schema");
  if (schema == nullptr || !schema->is_string() ||
      schema->get_ref<const std::string&>() != "gpuscope.doctor") {
    return bad("no \"schema\": \"gpuscope.doctor\" (is it a summary or another file?)");
  }
  const internal::JsonValue* version = internal::Find(*doc, "schema_version");
  if (version == nullptr || !internal::AsInt64(*version).has_value())
    return bad("no schema_version");
  if (*internal::AsInt64(*version) != kDoctorSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat("doctor report schema_version ", *internal::AsInt64(*version), " is not ",
                     kDoctorSchemaVersion, ": save a new baseline with this gpuscope"));
  }
  DoctorReport r;
  const auto str = [&](const internal::JsonValue& obj, const char* key, std::string* out) {
    const internal::JsonValue* v = internal::Find(obj, key);
    if (v == nullptr || !v->is_string()) return false;
    *out = v->get_ref<const std::string&>();
    return true;
  };
  if (!str(*doc, "version", &r.version) || !str(*doc, "hostname", &r.hostname) ||
      !str(*doc, "driver_version", &r.driver_version)) {
    return bad("version, hostname or driver_version missing");
  }
  const internal::JsonValue* cuda = internal::Find(*doc, "cuda_driver_version");
  const internal::JsonValue* gpus = internal::Find(*doc, "gpu_count");
  if (cuda == nullptr || !internal::AsInt64(*cuda) || gpus == nullptr ||
      !internal::AsInt64(*gpus)) {
    return bad("cuda_driver_version or gpu_count missing");
  }
  r.cuda_driver_version = static_cast<int>(*internal::AsInt64(*cuda));
  r.gpu_count = static_cast<int>(*internal::AsInt64(*gpus));
  const internal::JsonValue* checks = internal::Find(*doc, "checks");
  if (checks == nullptr || !checks->is_array()) return bad("checks missing");
  for (const internal::JsonValue& item : *checks) {
    DoctorCheck c;
    std::string status;
    if (!item.is_object() || !str(item, "subject", &c.subject) || !str(item, "id", &c.id) ||
        !str(item, "status", &status) || !str(item, "value", &c.value) ||
        !str(item, "reason", &c.reason)) {
      return bad("a check lacks subject, id, status, value or reason");
    }
    if (status == "OK") {
      c.status = CheckStatus::kOk;
    } else if (status == "WARN") {
      c.status = CheckStatus::kWarn;
    } else if (status == "FAIL") {
      c.status = CheckStatus::kFail;
    } else {
      return bad(absl::StrCat("unknown check status '", status, "'"));
    }
    r.checks.push_back(std::move(c));
  }
  const internal::JsonValue* facts = internal::Find(*doc, "facts");
  if (facts == nullptr || !facts->is_object()) return bad("facts missing");
  for (const auto& [k, v] : facts->items()) {
    if (!v.is_string()) return bad(absl::StrCat("fact '", k, "' is not a string"));
    r.facts[k] = v.get_ref<const std::string&>();
  }
  return r;
}

}  // namespace gpuscope
