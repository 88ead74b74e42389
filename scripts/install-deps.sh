#!/usr/bin/env bash
# Installs, only where missing, every Debian package nodus needs to build,
# test and benchmark. Idempotent; quiet when everything is there.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  openmpi-bin libopenmpi-dev
  libhwloc-dev hwloc libyaml-cpp-dev graphviz
  libibverbs-dev librdmacm-dev libsimgrid-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 iproute2
  python3-torch libtorch-dev pybind11-dev python3-dev python3-numpy python3-pytest
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  SUDO=sudo
else
  SUDO=
fi
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
