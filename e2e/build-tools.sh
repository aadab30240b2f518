#!/usr/bin/env bash
# Builds the control-plane binaries the end-to-end tests start, at the
# versions pinned in go.mod (etcd, kube-apiserver, kube-scheduler) and
# scheduler-plugins/go.mod (the scheduler-plugins scheduler, with
# NodeResourceTopologyMatch), into a cache outside the repository keyed by
# those files and the Go version: a second run finds them and builds
# nothing. Builds run one at a time (the machines are small).
#
# Prints, as its last two lines, the variables the suite reads:
#   TOPOALIGN_E2E_BIN=<directory of etcd, kube-apiserver, kube-scheduler>
#   TOPOALIGN_E2E_SCHEDULER_PLUGINS=<the scheduler-plugins scheduler>
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${TOPOALIGN_CACHE:-$HOME/.cache/topoalign}/e2e/bin

if ! command -v go >/dev/null 2>&1; then
    echo "e2e: Go is not installed (or not on PATH); the end-to-end suite needs Go >= 1.26 to build the control plane" >&2
    exit 1
fi

# key MODULE_DIR: a short hash of what decides the binaries of one module.
key() {
    (cat "$1/go.mod" "$1/go.sum"; go env GOVERSION GOOS GOARCH) | sha256sum | cut -c1-16
}

# build MODULE_DIR OUT_DIR NAME PACKAGE
build() {
    local module=$1 out=$2 name=$3 pkg=$4
    [ -x "$out/$name" ] && return 0
    mkdir -p "$out"
    local start=$SECONDS
    echo "e2e: building $name ($pkg) ..." >&2
    (cd "$module" && go build -trimpath -ldflags='-s -w' -o "$out/$name.partial" "$pkg")
    mv -f "$out/$name.partial" "$out/$name"
    echo "e2e: built $name in $((SECONDS - start)) s" >&2
}

main_dir=$cache/$(key "$here")
build "$here" "$main_dir" etcd go.etcd.io/etcd/server/v3
build "$here" "$main_dir" kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build "$here" "$main_dir" kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler

plugins_dir=$cache/scheduler-plugins-$(key "$here/scheduler-plugins")
build "$here/scheduler-plugins" "$plugins_dir" scheduler sigs.k8s.io/scheduler-plugins/cmd/scheduler

echo "TOPOALIGN_E2E_BIN=$main_dir"
echo "TOPOALIGN_E2E_SCHEDULER_PLUGINS=$plugins_dir/scheduler"
