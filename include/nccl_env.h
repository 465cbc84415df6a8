/*
 * nccl_env.h: braid's env-plugin ABI, binary compatible with NCCL's ncclEnv_v1 (2.28.7) and ncclEnv_v2 (2.30.7).
 *
 * An env plugin answers for the environment: every knob braid reads (NCCL_*, BRAID_*: the ones `braid-info -c`
 * lists) is asked of the plugin first. A site uses one to set knobs per cluster, per job or from a configuration
 * service, without touching each job's environment. The plugin is a shared library exporting a table under a
 * versioned symbol:
 *
 *     ncclEnvPlugin_v2 (ncclEnv_v2_t, NCCL 2.30.7: init also gets NCCL's logger)
 *     ncclEnvPlugin_v1 (ncclEnv_v1_t, NCCL 2.28.7)
 *
 * braid takes the newest one the library exports. Plugins built against NVIDIA's headers load unchanged.
 *
 * WHERE IT IS LOOKED FOR (NCCL_ENV_PLUGIN, read from the process environment, then the configuration files; never
 * asked of the plugin itself)
 *   unset: libnccl-env.so (quietly absent: INFO); "NAME": libnccl-env-NAME.so, then NAME as given (a path or a
 *   soname); "none": no plugin. The library is loaded once per process, at the first knob braid reads.
 *
 * CONTRACT
 *   init() runs once, before the first answer, with braid's NCCL API version (NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
 *   NCCL_SUFFIX) and, for v2, the logger (which may be called from init() and getEnv(); braid prints such lines once
 *   the knob being read is settled). getEnv(name) returns the knob's text, or NULL when the plugin has none for it;
 *   braid copies the text at once, so it need stay valid only until the next call. Calls are serialized: braid never
 *   calls the plugin from two threads at once. finalize() runs at process exit; knobs read after it come from the
 *   process environment.
 *   Precedence with a plugin: the plugin's answer, then the process environment, then the configuration files
 *   (NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf), then the default. (NCCL reads nothing but the plugin; a
 *   plugin there passes getenv(name) through where it has no value of its own, which is what braid does for every
 *   plugin: so launchers' job-scoped settings, such as braidrun's BRAID_BOOTSTRAP_SECRET, are never hidden.)
 *   Variables that are not knobs (what launchers set: RANK, WORLD_SIZE, MASTER_ADDR, ...; HOME) always come from the
 *   process environment.
 *   init() and getEnv() must not call back into the library (a knob read there waits for itself).
 *   A library that exports neither symbol, or whose init() fails, is not used (knobs come from the process
 *   environment). Where NCCL_ENV_PLUGIN named it, every communicator's init then fails with ncclInvalidArgument
 *   naming the library and why (NCCL carries on without it; braid refuses to run with settings other than the ones
 *   asked for); where it was found by the default name, INFO says why.
 *
 * This header is C99 and needs nccl.h and nccl_net.h (the logger type).
 */
#ifndef NCCL_ENV_H_
#define NCCL_ENV_H_

#include <stdint.h>

#include "nccl.h"
#include "nccl_net.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  const char* name; /* the plugin's name, for the logs */
  /* Once, before the first getEnv. Anything but ncclSuccess: the plugin is not used. */
  ncclResult_t (*init)(uint8_t ncclMajor, uint8_t ncclMinor, uint8_t ncclPatch, const char* suffix);
  /* At process exit. */
  ncclResult_t (*finalize)(void);
  /* The text of variable `name`, or NULL. Valid until finalize or the next getEnv of the same name. */
  const char* (*getEnv)(const char* name);
} ncclEnv_v1_t;

typedef struct {
  const char* name;
  /* As v1, plus NCCL's logger for the plugin's own lines. */
  ncclResult_t (*init)(uint8_t ncclMajor, uint8_t ncclMinor, uint8_t ncclPatch, const char* suffix,
                       ncclDebugLogger_t logFunction);
  ncclResult_t (*finalize)(void);
  const char* (*getEnv)(const char* name);
} ncclEnv_v2_t;

typedef ncclEnv_v2_t ncclEnv_t;

#define NCCL_ENV_PLUGIN_SYMBOL ncclEnvPlugin_v2

#ifdef __cplusplus
}
#endif

#endif /* NCCL_ENV_H_ */
