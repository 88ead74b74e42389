// Copies for the transports' slots.
#pragma once

#include <cstddef>

namespace nodus {

// memcpy with non-temporal (streaming) stores where the CPU has them
// (x86-64: SSE2), ending with a store fence, so the bytes go to memory
// without taking the destination's cache lines into this core's cache:
// a reader on a core that shares no cache with this one then reads them
// from memory instead of from this core's cache, and this core's next
// write to them does not first fetch them back from the reader's. Elsewhere
// a plain memcpy. The regions must not overlap.
void streamingCopy(void* dst, const void* src, size_t n);

// Whether streamingCopy really streams on this machine (false: memcpy).
bool streamingCopyStreams();

}  // namespace nodus
