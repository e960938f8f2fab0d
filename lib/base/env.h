// Environment variables, read one way everywhere.
//
// gpuscope's switches (GPUSCOPE_DISABLE, GPUSCOPE_SIMULATE, GPUSCOPE_CUPTI)
// are booleans spelled as people spell them: 1/true/yes/on and 0/false/no/off,
// in any case, surrounding whitespace ignored. An empty variable counts as
// unset. Anything else is a mistake the user should hear about: it is logged
// once and the switch keeps its default, so `GPUSCOPE_SIMULATE=false` never
// turns the simulated GPU on.

#ifndef GPUSCOPE_LIB_BASE_ENV_H_
#define GPUSCOPE_LIB_BASE_ENV_H_

#include <optional>
#include <string_view>

namespace gpuscope::internal {

// ParseBool()
//
// true for 1/true/yes/on, false for 0/false/no/off (any case, surrounding
// whitespace ignored), nullopt for anything else, the empty string included.
std::optional<bool> ParseBool(std::string_view text);

// EnvFlag()
//
// The boolean value of environment variable `name`: `default_value` when it
// is unset or empty, or when it is not a boolean (then a warning naming the
// variable and the accepted spellings is logged once).
bool EnvFlag(const char* name, bool default_value);

}  // namespace gpuscope::internal

#endif  // GPUSCOPE_LIB_BASE_ENV_H_
