#!/usr/bin/env bash
# Installs the Debian packages a real test node needs beside the control
# plane (hack/build-node.sh builds the kubelet and its peers from Go
# modules): containerd and runc to run containers, the CNI plugins
# (bridge, host-local, loopback, portmap) for the pods' network, and
# iptables and conntrack for kube-proxy's Service rules.
# Idempotent: it only calls apt-get when a package is missing.
set -euo pipefail

PKGS=(containerd runc containernetworking-plugins iptables conntrack)

missing=()
for p in "${PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "hack/install-node-deps.sh: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
