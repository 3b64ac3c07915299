#!/bin/bash
# Unpack Debian .deb files (downloaded on the CPU machine with `apt-get download`) into a prefix on the
# GPU machine, which has no package registry. Prints the environment to source.
# usage: source scripts/device-env.sh .deps/debs /opt/deps
# The packages: scripts/install-deps.sh's libraries as .debs, with OpenBLAS's OpenMP build
# (libopenblas0-openmp, libopenblas-openmp-dev), e.g. in .deps/debs:
#   apt-get download libmetis5 libmetis-dev libsuitesparse-dev libcholmod3 libamd2 libcamd2 libccolamd2 libcolamd2 \
#     libsuitesparseconfig5 libumfpack5 libklu1 libbtf1 libldl2 libcxsparse3 libspqr2 libmongoose2 librbio2 \
#     libsliplu1 libmpfr6 libgmp10 zlib1g-dev libopenblas0-openmp libopenblas-openmp-dev libgfortran5 libblas3 \
#     liblapack3 libblas-dev liblapack-dev libtbb12 libeigen3-dev libgtest-dev googletest libcli11-dev \
#     nlohmann-json3-dev
set -e
DEBS=${1:?deb dir}; P=${2:-/opt/deps}
mkdir -p "$P"
for f in "$DEBS"/*.deb; do dpkg -x "$f" "$P"; done
L=$P/usr/lib/x86_64-linux-gnu
# dpkg -x runs no maintainer scripts: make the alternatives' links by hand (the libraries that link the
# system's libblas.so.3, CHOLMOD and UMFPACK, then load OpenBLAS's OpenMP build too)
for so in libblas.so.3 liblapack.so.3 libblas.so liblapack.so libopenblas.so libopenblas.so.0; do
  [ -e "$L/openblas-openmp/$so" ] && ln -sf "openblas-openmp/$so" "$L/$so"
done
export CPATH=$P/usr/include:$P/usr/include/suitesparse:$P/usr/include/eigen3${CPATH:+:$CPATH}
export LIBRARY_PATH=$L:$L/openblas-openmp${LIBRARY_PATH:+:$LIBRARY_PATH}
export LD_LIBRARY_PATH=$L:$L/openblas-openmp:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CMAKE_PREFIX_PATH=$P/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
set +e
