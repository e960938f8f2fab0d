// ToJson(): findings (gpuscope/diagnose.h) as the JSON array
// docs/json-schema.md describes. Here, with the other writers, rather than
// beside Diagnose(): the analysis layer decides, the export layer formats.

#include <string>
#include <vector>

#include "base/json.h"
#include "export/json_out.h"
#include "export/report_fields.h"
#include "gpuscope/diagnose.h"
#include "gpuscope/report.h"

namespace gpuscope {

std::string ToJson(const std::vector<Finding>& findings) {
  internal::JsonWriter w(/*indent=*/2);
  internal::JsonOut out(w);
  w.BeginArray();
  for (const Finding& f : findings) {
    w.BeginObject();
    internal::FindingFields(out, f);
    w.EndObject();
  }
  w.EndArray();
  return w.Take();
}

}  // namespace gpuscope
