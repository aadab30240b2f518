#!/usr/bin/env bash
# topoalign's end-to-end suite: builds what is missing (the control plane
# from its pinned Go modules, cached outside the repository; topoalign with
# cargo), then runs the Go tests in e2e/suite against a real
# kube-apiserver and kube-scheduler. Exits non-zero on any failure,
# including a missing Go toolchain.
#
#   e2e/run.sh                  # everything
#   e2e/run.sh -run TestNRT     # extra arguments go to `go test`
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")

if ! command -v go >/dev/null 2>&1; then
    echo "e2e: FAILED: Go is not installed (or not on PATH). The end-to-end suite needs Go >= 1.26 to build etcd, kube-apiserver and kube-scheduler; install it from https://go.dev/dl/ and run e2e/run.sh again." >&2
    exit 1
fi

# TOPOALIGN_E2E_ETCD=..., TOPOALIGN_E2E_KUBE_APISERVER=..., ...
tools=$("$here/build-tools.sh")
while IFS='=' read -r name path; do
    export "$name=$path"
done <<<"$tools"

# TOPOALIGN_BIN=PATH runs that binary instead (bench/ passes a release build).
if [ -z "${TOPOALIGN_BIN:-}" ]; then
    echo "e2e: building topoalign (cargo build -p topoalign)" >&2
    (cd "$root" && cargo build -q -p topoalign)
    target_dir=${CARGO_TARGET_DIR:-$root/target}
    export TOPOALIGN_BIN=$target_dir/debug/topoalign
fi

cd "$here"
# -count=1: the suite talks to processes it starts; never a cached result.
go test -count=1 -timeout 20m ./... "$@"
