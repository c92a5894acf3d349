#!/usr/bin/env bash
# Builds TinyGo from its Go module (no release download exists on these machines)
# into .cache/tinygo/<version>, and prints the path of the tinygo wrapper.
#
# Facts this script relies on (checked on Debian bookworm + Go 1.26):
#   - the module proxy serves exact versions only; v0.41.1 builds with Go 1.26 and LLVM 19;
#   - the module zip lacks git submodules: src/net is created empty (guests cannot import net),
#     and TinyGo's library cache is pointed at Debian's prebuilt wasi-libc and wasm32 compiler-rt.
set -euo pipefail

VERSION="${TINYGO_VERSION:-v0.41.1}"
ROOT_DIR="$(cd "$(dirname "$0")/.." && pwd)"
DEST="${TINYGO_DIR:-$ROOT_DIR/.cache/tinygo/$VERSION}"
WRAPPER="$DEST/bin/tinygo"

# TinyGo v0.41's wasm targets name two features LLVM 20 added
# (+bulk-memory-opt, +call-indirect-overlong); LLVM 19 ignores them, saying
# so twice on every build ("is not a recognized feature for this target").
# Dropping them from the targets this TinyGo is built for changes no output.
llvm19_targets() {
  local f
  for f in "$DEST"/root/targets/wasi*.json "$DEST"/root/targets/wasm*.json; do
    [ -f "$f" ] || continue
    grep -q -e '+bulk-memory-opt' -e '+call-indirect-overlong' "$f" || continue
    sed -i -e 's/,+bulk-memory-opt//; s/,+call-indirect-overlong//' "$f"
  done
}

if [ -x "$WRAPPER" ] && "$WRAPPER" version >/dev/null 2>&1; then
  llvm19_targets
  echo "$WRAPPER"
  exit 0
fi

"$ROOT_DIR/hack/install-deps.sh" >&2

echo "hack/install-tinygo.sh: building TinyGo $VERSION into $DEST (about 3 minutes)" >&2
SRC="$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "github.com/tinygo-org/tinygo@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
if [ -z "$SRC" ] || [ ! -d "$SRC" ]; then
  echo "hack/install-tinygo.sh: could not download github.com/tinygo-org/tinygo@$VERSION" >&2
  exit 1
fi

rm -rf "$DEST"
mkdir -p "$DEST"
cp -r "$SRC" "$DEST/root"
chmod -R u+w "$DEST/root"
mkdir -p "$DEST/root/src/net"
llvm19_targets

(cd "$DEST/root" && CGO_ENABLED=1 go build -buildvcs=false -tags llvm19 -o build/tinygo .)

# TinyGo keeps compiled libraries in $XDG_CACHE_HOME/tinygo/<lib>-<triple>-<cpu>.
CACHE="$DEST/cache/tinygo"
mkdir -p "$CACHE/wasi-libc-wasm32-unknown-wasi-generic" "$CACHE/compiler-rt-wasm32-unknown-wasi-generic"
ln -sfn /usr/lib/wasm32-wasi/libc.a "$CACHE/wasi-libc-wasm32-unknown-wasi-generic/lib.a"
ln -sfn /usr/include/wasm32-wasi "$CACHE/wasi-libc-wasm32-unknown-wasi-generic/include"
ln -sfn /usr/lib/llvm-19/lib/clang/19/lib/wasi/libclang_rt.builtins-wasm32.a \
  "$CACHE/compiler-rt-wasm32-unknown-wasi-generic/lib.a"

mkdir -p "$DEST/bin"
cat > "$WRAPPER" <<WRAP
#!/usr/bin/env bash
export XDG_CACHE_HOME="$DEST/cache"
exec "$DEST/root/build/tinygo" "\$@"
WRAP
chmod +x "$WRAPPER"
"$WRAPPER" version >&2
echo "$WRAPPER"
