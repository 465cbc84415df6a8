#include "src/common/params.h"

#include <pthread.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <new>

#include "src/common/env_plugin.h"

namespace braid {

namespace params {
#define BRAID_PARAM(ident, type, name, def, doc) const ParamDef k##ident{name, ParamType::type, def, doc};
#include "src/common/param_list.h"
#undef BRAID_PARAM
}  // namespace params

namespace {

struct FileValues {
  std::map<std::string, std::pair<std::string, std::string>> values;  // key -> (value, path)
  bool loaded = false;
};

std::mutex& filesMutex() {
  static std::mutex* m = [] {
    // A child forked while another thread held the lock would otherwise deadlock on its first knob.
    pthread_atfork(nullptr, nullptr, [] { new (&filesMutex()) std::mutex(); });
    return new std::mutex();
  }();
  return *m;
}

FileValues& fileValues() {
  static FileValues* v = new FileValues();  // never destroyed: knobs may be read while the process exits
  return *v;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

void loadFile(const std::string& path, FileValues* out) {
  std::ifstream in(path);
  if (!in) return;
  std::string line;
  while (std::getline(in, line)) {
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = trim(line.substr(0, eq));
    std::string value = trim(line.substr(eq + 1));
    if (key.empty()) continue;
    // Earlier (higher-precedence) files win; loadFiles() reads them in precedence order.
    out->values.emplace(key, std::make_pair(value, path));
  }
}

std::string homeConfPath() {
  const char* home = getenv("HOME");  // the one place outside the table that reads the environment: not a knob
  if (home == nullptr || home[0] == '\0') {
    struct passwd* pw = getpwuid(getuid());
    if (pw != nullptr) home = pw->pw_dir;
  }
  return home ? std::string(home) + "/.nccl.conf" : std::string();
}

void loadFiles(FileValues* v) {
  v->values.clear();
  const char* conf = getenv(params::kConfFile.name);
  if (conf != nullptr && conf[0] != '\0') {
    loadFile(conf, v);
  } else {
    std::string home = homeConfPath();
    if (!home.empty()) loadFile(home, v);
  }
  loadFile("/etc/nccl.conf", v);
  v->loaded = true;
}

}  // namespace

const std::vector<const ParamDef*>& allParams() {
  static const std::vector<const ParamDef*> all = {
#define BRAID_PARAM(ident, type, name, def, doc) &params::k##ident,
#include "src/common/param_list.h"
#undef BRAID_PARAM
  };
  return all;
}

std::string launcherVariable(const char* name) {
  const char* v = getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

void reloadParamFiles() {
  std::lock_guard<std::mutex> lock(filesMutex());
  loadFiles(&fileValues());
}

namespace {

// The environment, then the files, then the default: what a knob the env plugin has no value for (or every knob,
// without a plugin) comes from.
ParamValue lookupWithoutPlugin(const ParamDef& def) {
  ParamValue v;
  const char* env = getenv(def.name);
  if (env != nullptr) {
    v.text = env;
    v.source = "environment";
    v.isSet = true;
    return v;
  }
  {
    std::lock_guard<std::mutex> lock(filesMutex());
    FileValues& files = fileValues();
    if (!files.loaded) loadFiles(&files);
    auto it = files.values.find(def.name);
    if (it != files.values.end()) {
      v.text = it->second.first;
      v.source = "file " + it->second.second;
      v.isSet = true;
      return v;
    }
  }
  v.text = def.defaultValue;
  v.source = "default";
  return v;
}

void loadEnvPluginOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    const ParamValue spec = lookupWithoutPlugin(params::kEnvPlugin);
    envPluginLoad(spec.text, spec.source);
  });
}

}  // namespace

ParamValue lookupParam(const ParamDef& def) {
  // Where the plugin comes from, and where the files are, are never asked of it (NCCL reads both from the process).
  if (&def == &params::kEnvPlugin || &def == &params::kConfFile) return lookupWithoutPlugin(def);
  loadEnvPluginOnce();
  const EnvPluginAnswer a = envPluginGet(def.name);
  envPluginFlushLog();
  if (!a.found) return lookupWithoutPlugin(def);
  ParamValue v;
  v.text = a.text;
  v.source = envPluginLabel();
  v.isSet = true;
  return v;
}

Result<int64_t> getIntParam(const ParamDef& def) {
  ParamValue v = lookupParam(def);
  std::string text = trim(v.text);
  if (text.empty()) return int64_t{-1};
  errno = 0;
  char* end = nullptr;
  long long x = strtoll(text.c_str(), &end, 0);
  if (errno != 0 || end == text.c_str() || *end != '\0') {
    return invalidArgument("%s=\"%s\" (from %s) is not an integer", def.name, v.text.c_str(), v.source.c_str());
  }
  return static_cast<int64_t>(x);
}

Status validateParams() {
  loadEnvPluginOnce();
  envPluginFlushLog();
  BRAID_RETURN_IF_ERROR(envPluginStatus());
  for (const ParamDef* def : allParams()) {
    if (def->type != ParamType::kInt) continue;
    Result<int64_t> r = getIntParam(*def);
    if (!r.isOk()) return r.status();
  }
  return Status::ok();
}

namespace params {
#define BRAID_PARAM_kInt(ident)                        \
  int64_t ident() {                                    \
    Result<int64_t> r = getIntParam(k##ident);         \
    if (r.isOk()) return r.value();                    \
    return strtoll(k##ident.defaultValue, nullptr, 0); \
  }
#define BRAID_PARAM_kString(ident)     \
  std::string ident() {                \
    return lookupParam(k##ident).text; \
  }
#define BRAID_PARAM(ident, type, name, def, doc) BRAID_PARAM_##type(ident)
#include "src/common/param_list.h"
#undef BRAID_PARAM
#undef BRAID_PARAM_kInt
#undef BRAID_PARAM_kString
}  // namespace params

}  // namespace braid
