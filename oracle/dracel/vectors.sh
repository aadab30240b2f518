#!/usr/bin/env bash
# Regenerates the CEL selector vectors, testdata/dra/cel/<release>.jsonl, and
# the declarations of each release's selector environment,
# testdata/dra/cel/<release>-decls.txt, from the real
# k8s.io/dynamic-resource-allocation/cel package of each release (oracle/dracel,
# built against versions/<release>/go.mod). The cases are oracle/dracel/cases.json.
#
#   oracle/dracel/vectors.sh [RELEASE...]      default: 1.34 1.35 1.36 1.37
#
# Builds take the shared build lock (/tmp/topoalign-build.lock) when flock is
# there; the binaries go to ${TOPOALIGN_CACHE:-$HOME/.cache/topoalign}/dracel/.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
oracle=$(dirname "$here")
out=$(cd "$oracle/.." && pwd)/testdata/dra/cel
bin_dir=${TOPOALIGN_CACHE:-$HOME/.cache/topoalign}/dracel
mkdir -p "$out" "$bin_dir"

if [ $# -eq 0 ]; then
	set -- 1.34 1.35 1.36 1.37
fi

lock() {
	if command -v flock >/dev/null 2>&1; then
		flock /tmp/topoalign-build.lock "$@"
	else
		"$@"
	fi
}

for v in "$@"; do
	modfile=$oracle/versions/$v/go.mod
	if [ ! -f "$modfile" ]; then
		echo "vectors.sh: no Kubernetes release $v under oracle/versions" >&2
		exit 2
	fi
	bin=$bin_dir/dracel-$v
	echo "vectors.sh: building dracel $v" >&2
	(cd "$oracle" && GOFLAGS= lock nice go build -mod=readonly -buildvcs=false \
		-modfile "versions/$v/go.mod" -tags "k8s_${v//./_}" -o "$bin.tmp.$$" ./dracel)
	mv "$bin.tmp.$$" "$bin"
	if [ "$("$bin" release)" != "$v" ]; then
		echo "vectors.sh: $bin is not the $v build" >&2
		exit 1
	fi
	"$bin" vectors "$here/cases.json" >"$out/$v.jsonl.tmp"
	mv "$out/$v.jsonl.tmp" "$out/$v.jsonl"
	"$bin" decls >"$out/$v-decls.txt.tmp"
	mv "$out/$v-decls.txt.tmp" "$out/$v-decls.txt"
	echo "vectors.sh: $v: $(wc -l <"$out/$v.jsonl") vectors, $(grep -vc '^field' "$out/$v-decls.txt") overloads" >&2
done
