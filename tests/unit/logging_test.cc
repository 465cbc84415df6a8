// The logger's levels: NCCL 2.32's ATTN sits between WARN and INFO, for braid's own notices and for those plugins
// pass to the logger (level NCCL_LOG_ATTN, 6).
#include "src/common/logging.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "include/nccl_net.h"
#include "transports/net/net_plugin.h"

namespace braid {
namespace {

// What NCCL_DEBUG=`level` lets through of one WARN, one ATTN from braid, one ATTN from a plugin and one INFO.
std::string logAt(const char* level) {
  char path[] = "/tmp/braid-attn-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  setenv("NCCL_DEBUG", level, 1);
  setenv("NCCL_DEBUG_FILE", path, 1);
  logReinit();
  BRAID_WARN("a warning %d", 1);
  BRAID_ATTN("a notice %d", 2);
  net::netLogger(NCCL_LOG_ATTN, NCCL_ALL, "plugin.cc", 7, "a plugin's notice %d", 3);
  BRAID_INFO(kLogInit, "some information %d", 4);
  unsetenv("NCCL_DEBUG");
  unsetenv("NCCL_DEBUG_FILE");
  logReinit();
  std::string text;
  if (FILE* f = fopen(path, "r")) {
    char line[1024];
    while (fgets(line, sizeof(line), f) != nullptr) text += line;
    fclose(f);
  }
  unlink(path);
  return text;
}

TEST(Logging, AttnShowsWarningsAndNoticesButNoInformation) {
  const std::string text = logAt("ATTN");
  EXPECT_NE(text.find("NCCL WARN a warning 1"), std::string::npos) << text;
  EXPECT_NE(text.find("logging_test.cc"), std::string::npos) << text;
  EXPECT_NE(text.find("NCCL ATTN a notice 2"), std::string::npos) << text;
  EXPECT_NE(text.find("plugin.cc:7 NCCL ATTN a plugin's notice 3"), std::string::npos) << text;
  EXPECT_EQ(text.find("some information"), std::string::npos) << text;
}

TEST(Logging, WarnHidesNoticesAndInfoShowsAll) {
  const std::string warn = logAt("WARN");
  EXPECT_NE(warn.find("NCCL WARN a warning 1"), std::string::npos) << warn;
  EXPECT_EQ(warn.find("NCCL ATTN"), std::string::npos) << warn;
  const std::string info = logAt("INFO");
  EXPECT_NE(info.find("NCCL WARN a warning 1"), std::string::npos) << info;
  EXPECT_NE(info.find("NCCL ATTN a notice 2"), std::string::npos) << info;
  EXPECT_NE(info.find("NCCL INFO some information 4"), std::string::npos) << info;
}

// A plugin's level 0 (NCCL_LOG_NONE) or one braid does not know never prints, whatever the settings.
TEST(Logging, UnknownPluginLevelsNeverPrint) {
  char path[] = "/tmp/braid-attn-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  for (const char* level : {"WARN", "INFO"}) {
    setenv("NCCL_DEBUG", level, 1);
    setenv("NCCL_DEBUG_FILE", path, 1);
    logReinit();
    for (int l : {0, 7, -1}) {
      net::netLogger(static_cast<ncclDebugLogLevel>(l), NCCL_ALL, "plugin.cc", 9, "level %d", l);
    }
    unsetenv("NCCL_DEBUG");
    unsetenv("NCCL_DEBUG_FILE");
    logReinit();
    std::string text;
    if (FILE* f = fopen(path, "r")) {
      char line[1024];
      while (fgets(line, sizeof(line), f) != nullptr) text += line;
      fclose(f);
    }
    EXPECT_EQ(text.find("level "), std::string::npos) << level << ": " << text;
  }
  unlink(path);
}

}  // namespace
}  // namespace braid
