#!/usr/bin/env bash
# Regenerates the DRA allocator's vectors: for every release (default 1.34
# 1.35 1.36 1.37) testdata/dra/<release>/features.json (oracle-dra features)
# and testdata/dra/<release>/<case>.json for every testdata/dra/cases/<case>.yaml
# (oracle-dra allocate --as-this-release: the case run as that release),
# from the real allocator of the release (dra/build.sh). Expected files
# without a case are removed. Then checks them (oracle-dra check).
#   oracle/dra/vectors.sh [VERSION...]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
data=$(cd "$here/../../testdata/dra" && pwd)

if [ $# -eq 0 ]; then
	set -- 1.34 1.35 1.36 1.37
fi

for v in "$@"; do
	bin=$("$here/build.sh" "$v" | tail -n 1)
	out=$data/$v
	mkdir -p "$out"
	"$bin" features >"$out/features.json"
	for f in "$out"/*.json; do
		name=$(basename "$f" .json)
		if [ "$name" != features ] && [ ! -f "$data/cases/$name.yaml" ]; then
			rm -f -- "$f"
		fi
	done
	for c in "$data"/cases/*.yaml; do
		name=$(basename "$c" .yaml)
		status=0
		"$bin" allocate --as-this-release "$c" >"$out/$name.json.tmp" || status=$?
		if [ "$status" -ne 0 ]; then
			echo "vectors.sh: v$v $name: oracle-dra exited $status:" >&2
			cat "$out/$name.json.tmp" >&2
			rm -f -- "$out/$name.json.tmp"
			exit 1
		fi
		mv "$out/$name.json.tmp" "$out/$name.json"
	done
	"$bin" check "$data"
done
