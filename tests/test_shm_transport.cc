// The shm transport's liveness check, at the transport's own interface: a
// peer process that posted its last slots and exited is reported dead only
// once those slots are read (a rank that finished its part may exit while
// another still waits for what it sent).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>

#include "core/bootstrap.h"
#include "transports/doorbell.h"
#include "transports/shm/shm_transport.h"

namespace nodus {
namespace {

using std::chrono::seconds;

constexpr char kLastWords[] = "the last slot of a rank that exits";

Status connectPair(int rank, const nodusUniqueId& id, Doorbell* bell, std::unique_ptr<Bootstrap>* boot,
                   std::unique_ptr<Transport>* shm, Connections* conns) {
  NODUS_TRY(socketBootstrap(id, rank, 2, seconds(20), boot));
  *shm = makeShmTransport();
  ConnectRequest req;
  req.bootstrap = boot->get();
  req.rank = rank;
  req.nranks = 2;
  req.peers = {1 - rank};
  req.slotBytes = 4096;
  req.slots = 4;
  req.ringPrev = 1 - rank;
  req.bell = bell;
  req.timeoutMs = 20000;
  return (*shm)->connect(req, *conns);
}

TEST(ShmTransport, APeerThatExitedIsDeadOnlyOnceItsPostedSlotsAreRead) {
  int idPipe[2];
  ASSERT_EQ(pipe(idPipe), 0);
  // Forked before this process makes the id: the child inherits no thread.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(idPipe[1]);
    nodusUniqueId id;
    if (read(idPipe[0], &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) _exit(2);
    Doorbell bell;
    std::unique_ptr<Bootstrap> boot;
    std::unique_ptr<Transport> shm;
    Connections conns;
    if (!connectPair(1, id, &bell, &boot, &shm, &conns).isOk()) _exit(3);
    std::byte* slot = conns.send[0]->tryAcquire();
    if (slot == nullptr) _exit(4);
    memcpy(slot, kLastWords, sizeof(kLastWords));
    conns.send[0]->post(sizeof(kLastWords));
    _exit(0);  // no teardown: gone as a rank that finished its part
  }
  close(idPipe[0]);
  nodusUniqueId id;
  ASSERT_TRUE(createUniqueId(&id).isOk());
  ASSERT_EQ(write(idPipe[1], &id, sizeof(id)), static_cast<ssize_t>(sizeof(id)));
  close(idPipe[1]);
  Doorbell bell;
  std::unique_ptr<Bootstrap> boot;
  std::unique_ptr<Transport> shm;
  Connections conns;
  const Status connected = connectPair(0, id, &bell, &boot, &shm, &conns);
  if (!connected.isOk()) kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);  // reaped: kill(pid, 0) now says ESRCH
  ASSERT_TRUE(connected.isOk()) << connected.message();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;

  // Its last slot is unread: not a failure yet.
  const Status beforeRead = shm->checkPeer(1);
  EXPECT_TRUE(beforeRead.isOk()) << beforeRead.message();
  size_t bytes = 0;
  const std::byte* got = conns.recv[1]->tryPeek(&bytes);
  ASSERT_NE(got, nullptr);
  ASSERT_EQ(bytes, sizeof(kLastWords));
  EXPECT_EQ(memcmp(got, kLastWords, sizeof(kLastWords)), 0);
  conns.recv[1]->release();

  // Nothing of it is left: waiting on it now fails, naming the process.
  const Status afterRead = shm->checkPeer(1);
  EXPECT_EQ(afterRead.code(), nodusRemoteError);
  EXPECT_NE(afterRead.message().find("died"), std::string::npos) << afterRead.message();
  EXPECT_NE(afterRead.message().find(std::to_string(child)), std::string::npos) << afterRead.message();
}

}  // namespace
}  // namespace nodus
