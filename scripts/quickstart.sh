#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs nodus-perf under
# mpirun over shared memory — AllReduce and AllGather from 8 B to 64 MiB on
# 2 ranks, with Open MPI's own collective timed on the same buffers beside it.
#   NP=4 MAXBYTES=16M scripts/quickstart.sh     other rank counts and sizes
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target nodus-perf

np=${NP:-2}
mpi_flags=(--oversubscribe --bind-to none --mca btl self,vader)
[ "$(id -u)" -eq 0 ] && mpi_flags+=(--allow-run-as-root)
for coll in allreduce allgather; do
  mpirun "${mpi_flags[@]}" -np "$np" build/bench/nodus-perf --coll "$coll" \
    -b 8 -e "${MAXBYTES:-64M}" -f 4 -n "${ITERS:-50}" -w 10 --baseline mpi \
    --csv "build/perf-$coll.csv" --json "build/perf-$coll.json"
done
echo "results: build/perf-allreduce.{csv,json} build/perf-allgather.{csv,json}"
