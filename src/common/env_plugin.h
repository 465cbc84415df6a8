// NCCL's env plugin (NCCL_ENV_PLUGIN, include/nccl_env.h): a library that answers for the environment. The parameter
// registry (params.cc) loads it once per process and asks it for every knob; nothing else calls this.
#pragma once

#include <string>

#include "src/common/status.h"

namespace braid {

struct EnvPluginAnswer {
  bool found = false;  // a plugin is loaded (and not finalized) and had a value
  std::string text;
};

// Loads the plugin NCCL_ENV_PLUGIN's text `spec` names ("": libnccl-env.so if there is one; "none": none), from
// `specSource` (where the setting came from, for the error). Once per process: the registry calls it under its
// once flag. Logs nothing itself (it may run inside the logger's own initialization): envPluginFlushLog prints.
void envPluginLoad(const std::string& spec, const std::string& specSource);

// Asks the plugin for `name`; found=false when none is loaded or it has no value. Thread-safe: calls into the plugin
// are serialized.
EnvPluginAnswer envPluginGet(const char* name);

// "env plugin NAME (vN)": the source braid-info and ncclParamDumpAll show for a knob the plugin answered.
std::string envPluginLabel();

// ok, or why the plugin NCCL_ENV_PLUGIN names is not used (kInvalidArgument, naming the setting, each library tried
// and the remedy). Communicators refuse to initialize with it.
[[nodiscard]] Status envPluginStatus();

// Prints the lines the loader and the plugin logged so far, unless this thread is initializing the logger (which
// reads knobs): those wait for a later knob read.
void envPluginFlushLog();

}  // namespace braid
