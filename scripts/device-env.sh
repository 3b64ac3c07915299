#!/bin/bash
# Unpack Debian .deb files (downloaded on the CPU machine with `apt-get download`) into a prefix on the
# GPU machine, which has no package registry. Prints the environment to source.
# usage: source scripts/device-env.sh .deps/debs /opt/deps
set -e
DEBS=${1:?deb dir}; P=${2:-/opt/deps}
mkdir -p "$P"
for f in "$DEBS"/*.deb; do dpkg -x "$f" "$P"; done
L=$P/usr/lib/x86_64-linux-gnu
# dpkg -x runs no maintainer scripts: make the alternatives' links by hand
for so in libblas.so.3 liblapack.so.3 libblas.so liblapack.so libopenblas.so libopenblas.so.0; do
  [ -e "$L/openblas-pthread/$so" ] && ln -sf "openblas-pthread/$so" "$L/$so"
done
export CPATH=$P/usr/include:$P/usr/include/suitesparse:$P/usr/include/eigen3${CPATH:+:$CPATH}
export LIBRARY_PATH=$L:$L/openblas-pthread${LIBRARY_PATH:+:$LIBRARY_PATH}
export LD_LIBRARY_PATH=$L:$L/openblas-pthread:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CMAKE_PREFIX_PATH=$P/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
set +e
