#!/usr/bin/env bash
# Builds the kubelet oracle for the given Kubernetes minor versions (default:
# every one under versions/), one at a time, into
#   ${TOPOALIGN_CACHE:-$HOME/.cache/topoalign}/oracle/<version>/oracle
# and prints each binary's path on stdout. A build is skipped when the cached
# binary was built from the same sources, go.mod, go.sum and Go toolchain.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${TOPOALIGN_CACHE:-$HOME/.cache/topoalign}/oracle

if [ $# -eq 0 ]; then
	set -- $(cd "$here/versions" && ls -d */ | tr -d / | sort -V)
fi

for v in "$@"; do
	v=${v#v}
	modfile=$here/versions/$v/go.mod
	if [ ! -f "$modfile" ]; then
		echo "build.sh: no Kubernetes version $v (have: $(cd "$here/versions" && ls | tr '\n' ' '))" >&2
		exit 2
	fi
	out=$cache/$v/oracle
	hash=$(
		cd "$here"
		{
			go version
			for f in build.sh go.mod *.go "versions/$v/go.mod" "versions/$v/go.sum"; do
				echo "== $f"
				cat "$f"
			done
		} | sha256sum | cut -d' ' -f1
	)
	if [ -x "$out" ] && [ "$(cat "$out.sha256" 2>/dev/null)" = "$hash" ]; then
		echo "$out"
		continue
	fi
	mkdir -p "$cache/$v"
	echo "build.sh: building the v$v oracle" >&2
	(
		cd "$here"
		# -mod=readonly: go.mod and go.sum are committed and complete; a build
		# never changes them and every download is checked against go.sum.
		GOFLAGS= go build -mod=readonly -buildvcs=false \
			-modfile "versions/$v/go.mod" -tags "k8s_${v//./_}" -o "$out.tmp.$$" .
	)
	mv "$out.tmp.$$" "$out"
	echo "$hash" >"$out.sha256"
	echo "$out"
done
