# Sourced by hack/install-*.sh.

# apt_install SCRIPT PKG...: installs the Debian packages among PKG that are
# not installed yet (with sudo when not root), saying so as SCRIPT; calls
# apt-get only when one is missing, so a second run costs nothing.
apt_install() {
  local script="$1" p sudo=""
  shift
  local missing=()
  for p in "$@"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "$script: installing ${missing[*]}"
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
