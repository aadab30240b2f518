#!/usr/bin/env bash
# The oracle's part of the test suite (scripts/test): checks the harness's
# copies of kubelet code against every release's source (copied/), builds
# the oracle of every release it is checked on here (cached; see build.sh),
# runs its Go tests, and replays the repository's v1.32 vectors through the real v1.32
# kubelet code, which must give every expected answer.
#
# Releases checked: the oldest and the newest the engine reproduces (1.32,
# 1.37) and 1.34 (the first with pod-level resources on): each one's vectors
# replayed, and its feature gate table (crates/k8s/src/feature_gates/
# <release>.tsv, dependencies included) compared with what the real kubelet
# code knows. The other releases build the same way (build.sh 1.35).
#
# The scheduler's DRA allocator (dra/, issue #30): the oracle of 1.34 and
# 1.37 (the oldest and newest, two allocator variants) built and every case
# of testdata/dra checked against its real allocator, with the release's
# feature table; 1.35 and 1.36 are checked by dra/vectors.sh.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v go >/dev/null 2>&1; then
    echo "oracle/test.sh: FAILED: Go (>= 1.26) is not on PATH" >&2
    exit 1
fi

# Every piece of kubelet code the harness copies or models, against each
# release's k8s.io/kubernetes source in the module cache (copied/table.go;
# it parses source only: no -modfile, no build tags). Every release's
# k8s.io/kubernetes module is fetched first (a no-op once it is in the cache;
# checked against that release's go.sum).
for modfile in versions/*/go.mod; do
    GOFLAGS= go mod download -modfile "$modfile" k8s.io/kubernetes
done
go test -count=1 ./copied

# The resizes the harness refuses as status-dependent, on 1.33 too (1.32's
# run with the Go tests below): the table topoalign's engine replays too
# (testdata/resize-refusals.json).
GOFLAGS= go test -count=1 -modfile versions/1.33/go.mod -tags k8s_1_33 -run TestResizeRefusals .

for version in 1.32 1.34 1.37; do
    bin=$(./build.sh "$version" | tail -n 1)
    echo "oracle $version: $bin" >&2
    if [ "$version" = 1.32 ]; then
        go test -count=1 -modfile "versions/$version/go.mod" -tags "k8s_${version/./_}" .
    fi
    ./check.sh "$version" "../testdata/conformance/$version"
    table=../crates/k8s/src/feature_gates/$version.tsv
    if ! diff <(grep -v '^#' "$table") <("$bin" gates) >&2; then
        echo "oracle/test.sh: FAILED: $table differs from the gates of the real v$version kubelet code (left: the table, right: oracle gates)" >&2
        exit 1
    fi
done

for version in 1.34 1.37; do
    bin=$(dra/build.sh "$version" | tail -n 1)
    echo "oracle-dra $version: $bin" >&2
    "$bin" check ../testdata/dra
done
