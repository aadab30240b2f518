#!/usr/bin/env bash
# Builds the control-plane binaries the end-to-end tests start, at the
# versions pinned in go.mod (etcd, kube-apiserver, kube-scheduler) and
# scheduler-plugins/go.mod (the scheduler-plugins scheduler, with
# NodeResourceTopologyMatch), into a cache outside the repository
# (${TOPOALIGN_CACHE:-~/.cache/topoalign}/e2e/bin/<name>-<key>), keyed by the
# module versions each binary is built from, the Go version and the flags:
# a second run finds them and builds nothing. Builds run one at a time (the
# machines are small).
#
# Prints the variables the suite reads, one NAME=PATH a line:
# TOPOALIGN_E2E_ETCD, TOPOALIGN_E2E_KUBE_APISERVER,
# TOPOALIGN_E2E_KUBE_SCHEDULER, TOPOALIGN_E2E_SCHEDULER_PLUGINS,
# TOPOALIGN_E2E_KUBECTL (kubectl of the same release, to run topoalign as
# its plugin; its packages mostly come from kube-apiserver's build).
set -euo pipefail
shopt -s inherit_errexit # a failed go build inside $(build ...) stops the script

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${TOPOALIGN_CACHE:-$HOME/.cache/topoalign}/e2e/bin

if ! command -v go >/dev/null 2>&1; then
    echo "e2e: Go is not installed (or not on PATH); the end-to-end suite needs Go >= 1.26 to build the control plane" >&2
    exit 1
fi

# No -trimpath: it is part of every compiled package's cache key, and
# without it the packages these binaries share with the oracle
# (oracle/versions/1.37 is k8s.io/kubernetes v1.37.2 as here; the
# scheduler-plugins module replaces it with v1.34.4, the 1.34 oracle's) come
# from the Go build cache the oracle's build filled: about 70% of
# kube-apiserver's packages and 40% of scheduler-plugins' on a cold machine.
flags=(-ldflags='-s -w')

# key MODULE_DIR PACKAGE: a short hash of what decides a binary: the
# versions of the modules its packages come from (not the whole go.sum, so
# test-only dependencies of the suite do not force a rebuild), the Go
# version and the build flags.
key() {
    (
        cd "$1"
        go list -deps -f '{{with .Module}}{{.Path}}@{{.Version}}{{with .Replace}}=>{{.Path}}@{{.Version}}{{end}}{{end}}' "$2" | sort -u
        go env GOVERSION GOOS GOARCH
        echo "${flags[@]}"
    ) | sha256sum | cut -c1-16
}

# build MODULE_DIR NAME PACKAGE: the binary's path on standard output.
build() {
    local module=$1 name=$2 pkg=$3
    local out
    out=$cache/$name-$(key "$module" "$pkg")
    if [ -x "$out/$name" ]; then
        echo "$out/$name"
        return 0
    fi
    mkdir -p "$out"
    local start=$SECONDS
    echo "e2e: building $name ($pkg) ..." >&2
    # A partial file of this process's own: two runs building at once (CI
    # and a developer, two worktrees) must not write into one file.
    (cd "$module" && go build "${flags[@]}" -o "$out/$name.partial.$$" "$pkg")
    mv -f "$out/$name.partial.$$" "$out/$name"
    echo "e2e: built $name in $((SECONDS - start)) s" >&2
    echo "$out/$name"
}

etcd=$(build "$here" etcd go.etcd.io/etcd/server/v3)
apiserver=$(build "$here" kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver)
scheduler=$(build "$here" kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler)
plugins=$(build "$here/scheduler-plugins" scheduler-plugins sigs.k8s.io/scheduler-plugins/cmd/scheduler)
kubectl=$(build "$here" kubectl k8s.io/kubernetes/cmd/kubectl)

echo "TOPOALIGN_E2E_ETCD=$etcd"
echo "TOPOALIGN_E2E_KUBE_APISERVER=$apiserver"
echo "TOPOALIGN_E2E_KUBE_SCHEDULER=$scheduler"
echo "TOPOALIGN_E2E_SCHEDULER_PLUGINS=$plugins"
echo "TOPOALIGN_E2E_KUBECTL=$kubectl"
