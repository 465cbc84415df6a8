// Descriptor passing between processes (src/common/fd_share.h): an offered descriptor reaches the process that
// holds the ticket as the same open file, once; a withdrawn, fetched or made-up ticket and a server that does not
// exist are named errors, never a hang. A service answers another process's calls with the descriptor they send,
// passes its handler's errors on, and is gone once stopped.
#include "src/common/fd_share.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

namespace braid {
namespace {

// A memfd holding `text`.
int memfdWith(const char* text) {
  const int fd = memfd_create("fd-share-test", MFD_CLOEXEC);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, text, strlen(text)), static_cast<ssize_t>(strlen(text)));
  return fd;
}

std::string contents(int fd) {
  char buf[64] = {};
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

// Runs fetcher(ticket) in a forked child, which reports through its exit code.
int inChild(const FdTicket& t, int (*fetcher)(const FdTicket&)) {
  const pid_t pid = fork();
  if (pid == 0) _exit(fetcher(t));
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

TEST(FdShare, AnotherProcessFetchesTheSameFileOnce) {
  const int fd = memfdWith("hello");
  Result<FdTicket> t = offerFd(fd);
  ASSERT_TRUE(t.isOk()) << t.status().message();
  close(fd);  // the offer holds its own duplicate
  EXPECT_EQ(pendingFdOffers(), 1u);
  const int code = inChild(t.value(), [](const FdTicket& tk) {
    Result<int> got = fetchFd(tk, 5);
    if (!got.isOk()) return 1;
    if (contents(got.value()) != "hello") return 2;
    // Writing through it changes the parent's file: the same open file, not a copy.
    if (pwrite(got.value(), "J", 1, 0) != 1) return 3;
    Result<int> again = fetchFd(tk, 5);
    if (again.isOk()) return 4;  // a token is good for one fetch
    if (again.status().message().find("already fetched") == std::string::npos) return 5;
    return 0;
  });
  EXPECT_EQ(code, 0);
  EXPECT_EQ(pendingFdOffers(), 0u);
}

// Several descriptors in one offer arrive in order with the offer's info, for each of the fetches it was made for;
// an empty or oversized offer is refused by name.
TEST(FdShare, AnOfferOfSeveralDescriptorsArrivesInOrderWithItsInfo) {
  const int fds[3] = {memfdWith("one"), memfdWith("two"), memfdWith("three")};
  Result<FdTicket> t = offerFds({fds[0], fds[1], fds[2]}, 2, "sizes 3 3 5");
  ASSERT_TRUE(t.isOk()) << t.status().message();
  for (int fd : fds) close(fd);
  auto fetcher = [](const FdTicket& tk) {
    std::string info;
    Result<std::vector<int>> got = fetchFds(tk, 5, &info);
    if (!got.isOk() || got.value().size() != 3) return 1;
    if (contents(got.value()[0]) != "one" || contents(got.value()[1]) != "two" || contents(got.value()[2]) != "three")
      return 2;
    if (info != "sizes 3 3 5") return 3;
    // The second of the two fetches offered, by the one-descriptor form: refused, naming the count.
    Result<int> one = fetchFd(tk, 5);
    if (one.isOk() || one.status().message().find("offered 3 descriptors") == std::string::npos) return 4;
    return 0;
  };
  EXPECT_EQ(inChild(t.value(), fetcher), 0);
  EXPECT_EQ(pendingFdOffers(), 0u);
  EXPECT_FALSE(offerFds({}).isOk());
  Result<FdTicket> many = offerFds(std::vector<int>(kMaxFdsPerMessage + 1, 0));
  ASSERT_FALSE(many.isOk());
  EXPECT_NE(many.status().message().find("an offer of 254 descriptors (1 to 253)"), std::string::npos)
      << many.status().message();
}

TEST(FdShare, AWithdrawnOfferIsGone) {
  const int fd = memfdWith("x");
  Result<FdTicket> t = offerFd(fd);
  ASSERT_TRUE(t.isOk());
  close(fd);
  withdrawFd(t.value());
  EXPECT_EQ(pendingFdOffers(), 0u);
  EXPECT_EQ(inChild(t.value(), [](const FdTicket& tk) { return fetchFd(tk, 5).isOk() ? 1 : 0; }), 0);
}

TEST(FdShare, ANonexistentServerIsANamedError) {
  FdTicket t;
  t.pid = 1;  // init never runs braid's server
  t.server = 12345;
  t.token = 42;
  Result<int> got = fetchFd(t, 1);
  ASSERT_FALSE(got.isOk());
  EXPECT_NE(got.status().message().find("no descriptor server @braid-fd-1-12345"), std::string::npos)
      << got.status().message();
}

// The service reads what another process's descriptor holds and answers it with the request; the descriptor's
// file is the caller's (the handler's write shows in the child); a handler's error reaches the caller by name.
TEST(FdShare, AServiceAnswersAnotherProcessWithItsDescriptor) {
  Result<FdTicket> t =
      serveFdService([](const std::vector<int>& fds, const std::string& request) -> Result<std::string> {
        if (request == "fail") return invalidArgument("the handler refuses '%s'", request.c_str());
        if (fds.empty()) return std::string("no descriptor");
        std::string seen;
        for (int fd : fds) {
          seen += (seen.empty() ? "" : ",") + contents(fd);
          if (pwrite(fd, "W", 1, 0) != 1) return internalError("pwrite");
        }
        return request + ":" + seen;
      });
  ASSERT_TRUE(t.isOk()) << t.status().message();
  const int code = inChild(t.value(), [](const FdTicket& tk) {
    const int fd = memfdWith("abc");
    Result<std::string> a = callFdService(tk, {fd}, "map", 5);
    if (!a.isOk() || a.value() != "map:abc") return 1;
    if (contents(fd) != "Wbc") return 2;  // the same open file
    const int more[2] = {memfdWith("de"), memfdWith("fgh")};
    Result<std::string> several = callFdService(tk, {more[0], fd, more[1]}, "all", 5);
    if (!several.isOk() || several.value() != "all:de,Wbc,fgh") return 6;  // in the caller's order
    if (contents(more[1]) != "Wgh") return 7;
    Result<std::string> b = callFdService(tk, {}, "plain", 5);
    if (!b.isOk() || b.value() != "no descriptor") return 3;
    bool absent = true;
    Result<std::string> c = callFdService(tk, {}, "fail", 5, &absent);
    if (c.isOk() || absent || c.status().message().find("the handler refuses 'fail'") == std::string::npos) return 4;
    if (callFdService(tk, {}, std::string(5000, 'x'), 5).isOk()) return 5;  // too long: refused before sending
    return 0;
  });
  EXPECT_EQ(code, 0);
  stopFdService(t.value());
  // Stopped: another process is told there is no such service, and that nothing serves there.
  EXPECT_EQ(inChild(t.value(),
                    [](const FdTicket& tk) {
                      bool absent = false;
                      Result<std::string> a = callFdService(tk, {}, "map", 5, &absent);
                      if (a.isOk() || !absent) return 1;
                      return a.status().message().find("has no service") != std::string::npos ? 0 : 2;
                    }),
            0);
}

// A call to a process without a server says so (absent), at once.
TEST(FdShare, ACallToAProcessWithoutAServerIsAbsent) {
  FdTicket t;
  t.pid = 1;
  t.server = 777;
  t.token = 9;
  bool absent = false;
  Result<std::string> a = callFdService(t, {}, "x", 1, &absent);
  ASSERT_FALSE(a.isOk());
  EXPECT_TRUE(absent);
  EXPECT_NE(a.status().message().find("no descriptor server @braid-fd-1-777"), std::string::npos)
      << a.status().message();
}

}  // namespace
}  // namespace braid
