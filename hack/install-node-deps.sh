#!/usr/bin/env bash
# Installs the Debian packages a real test node needs beside the control
# plane (hack/build-node.sh builds the kubelet and its peers from Go
# modules): containerd and runc to run containers, the CNI plugins
# (bridge, host-local, loopback, portmap) for the pods' network, and
# iptables and conntrack for kube-proxy's Service rules.
# Idempotent: it only calls apt-get when a package is missing.
set -euo pipefail

PKGS=(containerd runc containernetworking-plugins iptables conntrack)

. "$(dirname "$0")/lib/apt.sh"
apt_install hack/install-node-deps.sh "${PKGS[@]}"
