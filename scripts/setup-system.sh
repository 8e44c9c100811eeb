#!/usr/bin/env bash
# Install the Debian packages calico-py's tests and daemons use. Idempotent and quiet:
# apt runs only when something is missing. Needs root (CI and the dev machines run as root).
set -euo pipefail

PACKAGES=(
    python3-venv      # virtualenv for the project
    iproute2          # ip netns / veth for test workloads
    procps            # ps, pkill used by tests' clean-up
    nftables          # nft CLI (debugging) and libnftables
    python3-nftables  # the libnftables JSON binding, linked into the venv
    runit             # runsv/sv/svlogd: the node's supervisor
    etcd-server       # real etcd v3 for the etcdv3 backend's tests
    etcd-client       # etcdctl, for debugging and tests
    podman            # a real container runtime driving the CNI plugin end to end
    containernetworking-plugins  # loopback etc. for podman's CNI backend
    runc              # podman's OCI runtime
    busybox-static    # the tiny local image the podman test builds
    iperf3            # Felix throughput benchmark (make bench)
    bird              # BIRD 1.6 (bird, bird6, birdc): BGP, configured by confd
    golang-go         # builds the hashicorp/yamux peer of guardian's wire-compatibility tests
    golang-github-hashicorp-yamux-dev  # hashicorp/yamux sources for that peer (GOPATH mode)
    clang             # compiles bpf-gpl/ and generated policy programs (BPF dataplane)
    libbpf-dev        # bpf_helpers.h etc. for those; libbpf.so.1 loads the objects
    bpftool           # inspecting BPF programs and pinned maps (debugging, tests)
    chromium          # headless browser for the Whisker UI's end-to-end test (DevTools protocol)
    chromium-driver   # chromedriver, for driving that browser with WebDriver when debugging
)

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$pkg")
    fi
done

if ((${#missing[@]} == 0)); then
    exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
    echo "setup-system: need root to install: ${missing[*]}" >&2
    exit 1
fi

echo "setup-system: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
