// File: export/report_fields.h
// -----------------------------------------------------------------------------
//
// The one declaration of a finding's and a doctor report's fields, as
// summary_fields.h declares a summary's: a *Fields() function per struct
// that a visitor walks (JsonOut, export/json_out.h, writes them). Beyond the
// summary's visitor kinds (summary_fields.h), these use:
//
//   Severity(key, gpuscope::Severity)       CheckStatus(key, gpuscope::CheckStatus)
//   NamedNumbers(key, std::vector<std::pair<std::string, double>>, Range)  (in order)
//   StringMap(key, std::map<std::string, std::string>)

#ifndef GPUSCOPE_LIB_EXPORT_REPORT_FIELDS_H_
#define GPUSCOPE_LIB_EXPORT_REPORT_FIELDS_H_

#include "export/summary_fields.h"
#include "gpuscope/diagnose.h"
#include "gpuscope/doctor.h"

namespace gpuscope::internal {

template <typename V, typename F>
void FindingFields(V& v, F& f) {
  v.String("id", f.id);
  v.String("title", f.title);
  v.Severity("severity", f.severity);
  v.Number("share", f.share, kFraction);
  v.NamedNumbers("evidence", f.evidence, Range{-kHuge, kHuge});
  v.String("recommendation", f.recommendation);
  v.String("confidence", f.confidence);
  v.String("source", f.source);
}

template <typename V, typename C>
void DoctorCheckFields(V& v, C& c) {
  v.String("subject", c.subject);
  v.String("id", c.id);
  v.CheckStatus("status", c.status);
  v.String("value", c.value);
  v.String("reason", c.reason);
}

// After "schema" and "schema_version", which the writer puts first.
template <typename V, typename R>
void DoctorReportFields(V& v, R& r) {
  v.String("version", r.version);
  v.String("hostname", r.hostname);
  v.String("driver_version", r.driver_version);
  v.Int("cuda_driver_version", r.cuda_driver_version, Range{-1, kHuge});
  v.Int("gpu_count", r.gpu_count, kCount);
  v.Array("checks", r.checks, [](auto& sub, auto& c) { DoctorCheckFields(sub, c); });
  v.StringMap("facts", r.facts);
}

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_EXPORT_REPORT_FIELDS_H_
