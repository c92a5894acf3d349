#!/usr/bin/env bash
# Installs the Debian packages wasmsched needs to build guests and run tests:
# the LLVM 19 toolchain that TinyGo links against, Debian's prebuilt wasi-libc
# and wasm32 compiler-rt (TinyGo's module zip lacks its git submodules), binaryen,
# wabt (wat2wasm, to rebuild the hand-written test fixtures), openssl
# (certificates for the local control plane) and ca-certificates (the CA
# bundle make image copies into the images), and time (/usr/bin/time -v: the
# peak memory make bench-rollout reports).
# Idempotent: it only calls apt-get when a package is missing.
set -euo pipefail

PKGS=(llvm-19-dev libclang-19-dev clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32 binaryen wabt openssl ca-certificates time)

. "$(dirname "$0")/lib/apt.sh"
apt_install hack/install-deps.sh "${PKGS[@]}"
