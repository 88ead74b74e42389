// Shm: ranks that are processes of one host. Each rank creates one POSIX
// shared-memory segment holding its doorbell and the rings its peers send
// into (so the memory sits where the receiver runs); peers map it, then it
// is unlinked, so nothing outlives the job in /dev/shm.
#pragma once
#include <memory>
#include "transports/transport.h"
namespace nodus {
std::unique_ptr<Transport> makeShmTransport();
// Unlinks /dev/shm segments left by nodus processes that no longer exist.
void removeStaleShmSegments();
}
