#!/usr/bin/env bash
# Runs, from the repository root, every command the README shows that starts
# with PREFIX (e.g. "PYTHONPATH=build/plugins/torch/python torchrun"),
# exactly as written there: what a user copies must work. Fails if none is
# found or any fails.
#   scripts/readme-commands.sh PREFIX
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:?usage: readme-commands.sh PREFIX}
mapfile -t commands < <(sed -n 's/^    //p' README.md | grep -F -- "$prefix" | grep -v '^#')
if [ "${#commands[@]}" -eq 0 ]; then
  echo "readme-commands: the README shows no command starting with '$prefix'" >&2
  exit 1
fi
for c in "${commands[@]}"; do
  case "$c" in "$prefix"*) ;; *) continue ;; esac
  echo "== $c"
  start=$(date +%s)
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} bash -c "$c"
  echo "== passed in $(( $(date +%s) - start )) s"
done
