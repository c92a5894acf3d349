#!/usr/bin/env bash
# Installs the Debian packages wasmsched needs to build guests and run tests:
# the LLVM 19 toolchain that TinyGo links against, Debian's prebuilt wasi-libc
# and wasm32 compiler-rt (TinyGo's module zip lacks its git submodules), binaryen,
# wabt (wat2wasm, to rebuild the hand-written test fixtures), openssl
# (certificates for the local control plane) and ca-certificates (the CA
# bundle make image copies into the images).
# Idempotent: it only calls apt-get when a package is missing.
set -euo pipefail

PKGS=(llvm-19-dev libclang-19-dev clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32 binaryen wabt openssl ca-certificates)

missing=()
for p in "${PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "hack/install-deps.sh: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
