# Installs the build into a scratch prefix, then builds and runs a consumer
# outside the tree twice: with find_package(nodus) and with pkg-config.
set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${prefix})

# CMake package.
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install/consumer -B ${WORK_DIR}/cmake-build
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/cmake-build)
run(${WORK_DIR}/cmake-build/consumer)
if(NOT last_output MATCHES "consumer: allreduce over 3 ranks ok")
  message(FATAL_ERROR "CMake consumer printed: ${last_output}")
endif()

# pkg-config.
find_program(PKG_CONFIG pkg-config REQUIRED)
set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig:${prefix}/lib/x86_64-linux-gnu/pkgconfig)
run(${PKG_CONFIG} --cflags --libs nodus)
string(STRIP "${last_output}" flags)
separate_arguments(flags UNIX_COMMAND "${flags}")
find_program(CC NAMES cc gcc REQUIRED)
run(${CC} -std=c11 ${SOURCE_DIR}/tests/install/consumer/consumer.c -o ${WORK_DIR}/pc-consumer ${flags} -pthread)
# The library is not on the default search path: say where it is.
file(GLOB libdirs ${prefix}/lib ${prefix}/lib/*-linux-gnu)
string(REPLACE ";" ":" libpath "${libdirs}")
set(ENV{LD_LIBRARY_PATH} "${libpath}")
run(${WORK_DIR}/pc-consumer)
if(NOT last_output MATCHES "consumer: allreduce over 3 ranks ok")
  message(FATAL_ERROR "pkg-config consumer printed: ${last_output}")
endif()
message(STATUS "installed package works with find_package and pkg-config")
