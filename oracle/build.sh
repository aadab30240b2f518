#!/usr/bin/env bash
# Builds the kubelet oracle for the given Kubernetes minor versions (default:
# every one under versions/), one at a time, into
#   ${TOPOALIGN_CACHE:-$HOME/.cache/topoalign}/oracle/<version>/<key>/oracle
# and prints each binary's path on stdout. The key hashes the sources,
# go.mod, go.sum and Go toolchain, so checkouts with different harness code
# (worktrees, branches) each keep their build instead of rebuilding in turn;
# the three most recently used builds of a version are kept.
# <version>/oracle links to the one built or used last (what difftest
# takes when given no --oracle).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${TOPOALIGN_CACHE:-$HOME/.cache/topoalign}/oracle

if [ $# -eq 0 ]; then
	set -- $(cd "$here/versions" && ls -d */ | tr -d / | sort -V)
fi

# <version>/oracle -> <key>/oracle. (The stamp beside a binary in the
# cache's older layout, <version>/oracle.sha256, would vouch for the linked
# build: it goes.)
link() {
	ln -sfn "$2/oracle" "$cache/$1/oracle"
	rm -f "$cache/$1/oracle.sha256"
}

for v in "$@"; do
	v=${v#v}
	modfile=$here/versions/$v/go.mod
	if [ ! -f "$modfile" ]; then
		echo "build.sh: no Kubernetes version $v (have: $(cd "$here/versions" && ls | tr '\n' ' '))" >&2
		exit 2
	fi
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
	key=${hash:0:16}
	out=$cache/$v/$key/oracle
	if [ -x "$out" ]; then
		touch "$cache/$v/$key"
		link "$v" "$key"
		echo "$out"
		continue
	fi
	mkdir -p "$cache/$v/$key"
	echo "build.sh: building the v$v oracle" >&2
	(
		cd "$here"
		# -mod=readonly: go.mod and go.sum are committed and complete; a build
		# never changes them and every download is checked against go.sum.
		GOFLAGS= go build -mod=readonly -buildvcs=false \
			-modfile "versions/$v/go.mod" -tags "k8s_${v//./_}" -o "$out.tmp.$$" .
	)
	mv "$out.tmp.$$" "$out"
	link "$v" "$key"
	# Keep the three most recently used builds (each ~80 MB).
	(cd "$cache/$v" && ls -dt -- */ | tail -n +4 | xargs -r rm -rf --)
	echo "$out"
done
