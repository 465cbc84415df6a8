// The one parameter registry. Every knob the library reads is declared once in param_list.h (name, type, default,
// documentation); nothing else in the library calls getenv. Values come from, in order of precedence:
//   0. the env plugin, where one is loaded (NCCL_ENV_PLUGIN, include/nccl_env.h; NCCL_ENV_PLUGIN and NCCL_CONF_FILE
//      themselves are never asked of it),
//   1. the process environment,
//   2. the file named by NCCL_CONF_FILE, else ~/.nccl.conf,
//   3. /etc/nccl.conf,
//   4. the declared default.
// Config files hold KEY=VALUE lines; '#' starts a comment. braid-info prints every knob with its value and source.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/common/status.h"

namespace braid {

enum class ParamType { kInt, kString };

struct ParamDef {
  const char* name;  // environment variable, e.g. "NCCL_BUFFSIZE"
  ParamType type;
  const char* defaultValue;  // textual default ("" = unset)
  const char* doc;
};

struct ParamValue {
  std::string text;    // raw value ("" when unset)
  std::string source;  // "default", "environment", "file /path", or "env plugin NAME (vN)"
  bool isSet = false;  // false when neither env nor a file gave a value
};

namespace params {

// Declares one accessor per knob: params::BuffSize() etc. Int knobs return int64_t, string knobs std::string.
// Int accessors return the default when the text does not parse; use getInt() to see the parse error.
#define BRAID_PARAM(ident, type, name, def, doc) extern const ParamDef k##ident;
#include "src/common/param_list.h"
#undef BRAID_PARAM

#define BRAID_PARAM_kInt(ident) int64_t ident();
#define BRAID_PARAM_kString(ident) std::string ident();
#define BRAID_PARAM(ident, type, name, def, doc) BRAID_PARAM_##type(ident)
#include "src/common/param_list.h"
#undef BRAID_PARAM
#undef BRAID_PARAM_kInt
#undef BRAID_PARAM_kString

}  // namespace params

// All declared knobs, in declaration order.
const std::vector<const ParamDef*>& allParams();

// Current value and where it came from.
ParamValue lookupParam(const ParamDef& def);

// Integer value; an unparsable setting is an error naming the knob and the text.
Result<int64_t> getIntParam(const ParamDef& def);

// The env plugin NCCL_ENV_PLUGIN names is in use (else its error: env_plugin.h), and every integer knob parses,
// wherever it is set (else an error naming the knob, its text and where it came from). Communicators check this at
// init, so a value that does not parse (BRAID_TIMEOUT=1m), or a plugin that did not load, fails instead of silently
// running with other settings.
[[nodiscard]] Status validateParams();

// A variable a launcher sets (RANK, WORLD_SIZE, MASTER_PORT, ...): read from the environment only, never from a
// configuration file, and not a knob (braid-info does not list it); "" when unset. src/bootstrap/launch_env.cc is
// its one user.
std::string launcherVariable(const char* name);

// Re-reads configuration files (tests change NCCL_CONF_FILE). The environment is always read live.
void reloadParamFiles();

}  // namespace braid
