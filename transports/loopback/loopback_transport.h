// Loopback: ranks that are threads of one process. Slot rings in ordinary
// process memory; the default for unit tests and ThreadSanitizer runs.
#pragma once
#include <memory>
#include "transports/transport.h"
namespace nodus {
std::unique_ptr<Transport> makeLoopbackTransport();
}
