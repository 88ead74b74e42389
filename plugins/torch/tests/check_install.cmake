# Installs the build into a scratch prefix and imports nodus_torch from there
# with a one-process group: the extension must find libnodus by its RPATH.
set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${prefix}
  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install failed (${rc}): ${err}")
endif()
set(ENV{PYTHONPATH} ${prefix}/${PYDIR})
unset(ENV{LD_LIBRARY_PATH})
execute_process(COMMAND ${PYTHON} -c [=[
import datetime, os, torch, torch.distributed as dist
import nodus_torch
assert os.path.realpath(nodus_torch.__file__).startswith(os.path.realpath(os.environ["PYTHONPATH"])), nodus_torch.__file__
store = dist.HashStore()
dist.init_process_group("nodus", store=store, rank=0, world_size=1)
t = torch.arange(4.0)
dist.all_reduce(t)
assert t.tolist() == [0.0, 1.0, 2.0, 3.0], t
dist.destroy_process_group()
print("installed nodus_torch ok", nodus_torch.nodus_version())
]=] RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "installed nodus_torch ok")
  message(FATAL_ERROR "importing the installed nodus_torch failed (${rc}):\n${out}\n${err}")
endif()
message(STATUS "${out}")
