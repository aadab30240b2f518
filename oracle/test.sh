#!/usr/bin/env bash
# The oracle's part of the test suite (scripts/test): builds the oracle of
# every release it is checked on here (cached; see build.sh), runs its Go
# tests, and replays the repository's v1.32 vectors through the real v1.32
# kubelet code, which must give every expected answer.
#
# Releases checked: 1.32 only for now. The v1.33-v1.37 builds exist
# (versions/) but the engine does not reproduce those releases yet, so they
# are not part of the suite until it does; build.sh 1.37 builds one by hand.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v go >/dev/null 2>&1; then
    echo "oracle/test.sh: FAILED: Go (>= 1.26) is not on PATH" >&2
    exit 1
fi

for version in 1.32; do
    bin=$(./build.sh "$version" | tail -n 1)
    echo "oracle $version: $bin" >&2
    go test -count=1 -modfile "versions/$version/go.mod" -tags "k8s_${version/./_}" .
    ./check.sh "$version" ../testdata/conformance/1.32
done
