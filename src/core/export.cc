// libnodus.so is nodus_core linked whole; the version script (nodus.map)
// exports only the C API. This file exists because a library needs a source.
