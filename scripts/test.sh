#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the normal build
# (warnings are errors), then the whole suite under ASan+UBSan and the
# in-process (loopback) and unit tests under ThreadSanitizer. The verifier's
# large-rank samples (pure computation, 20x slower under ASan; the block
# collectives' 17-24 ranks too) run in the
# normal build only, and the single-threaded verifier not under TSan.
#   NODUS_SANITIZERS=0 scripts/test.sh   skips the sanitizer builds.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh

jobs=$(nproc)
build() {
  local dir=$1
  shift
  echo "== build $dir"
  cmake -S . -B "$dir" -G Ninja -DNODUS_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j "$jobs"
}
run_tests() {
  local dir=$1
  shift
  echo "== test $dir"
  ctest --test-dir "$dir" -j "$jobs" --output-on-failure --no-tests=error "$@"
}

echo "== include direction"
python3 scripts/check-layers.py
build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
run_tests build

if [ "${NODUS_SANITIZERS:-1}" != 0 ]; then
  supp="$PWD/tests/lsan.supp"
  build build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNODUS_SANITIZE=address,undefined -DNODUS_BUILD_BENCH=OFF -DNODUS_BUILD_PLUGINS=OFF -DNODUS_BUILD_SIM=OFF
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 LSAN_OPTIONS="suppressions=$supp:print_suppressions=0" \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 run_tests build-asan -LE install -E 'VerifierSample|VerifierLarge|VerifierTorus.*8x8x8|VerifierHierarchical.*32hosts|VerifierBlocks.*17to24' 
  build build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNODUS_SANITIZE=thread -DNODUS_BUILD_BENCH=OFF -DNODUS_BUILD_PLUGINS=OFF -DNODUS_BUILD_SIM=OFF
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 run_tests build-tsan -L 'unit|loopback' -E 'Verifier' 
fi
echo "== all tests passed"
