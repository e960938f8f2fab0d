// ToJson(): findings (gpuscope/diagnose.h) as the JSON array
// docs/json-schema.md describes. Here, with the other writers, rather than
// beside Diagnose(): the analysis layer decides, the export layer formats.

#include <string>
#include <vector>

#include "base/json.h"
#include "gpuscope/diagnose.h"
#include "gpuscope/report.h"

namespace gpuscope {

std::string ToJson(const std::vector<Finding>& findings) {
  internal::JsonWriter w(/*indent=*/2);
  w.BeginArray();
  for (const Finding& f : findings) {
    w.BeginObject();
    w.Key("id");
    w.String(f.id);
    w.Key("title");
    w.String(f.title);
    w.Key("severity");
    w.String(SeverityName(f.severity));
    w.Key("share");
    w.Number(f.share);
    w.Key("evidence");
    w.BeginObject();
    for (const auto& [name, value] : f.evidence) {
      w.Key(name);
      w.Number(value);
    }
    w.EndObject();
    w.Key("recommendation");
    w.String(f.recommendation);
    w.Key("confidence");
    w.String(f.confidence);
    w.Key("source");
    w.String(f.source);
    w.EndObject();
  }
  w.EndArray();
  return w.Take();
}

}  // namespace gpuscope
