#!/usr/bin/env bash
# Builds the DRA allocator oracle (oracle-dra) for the given Kubernetes minor
# versions (default: 1.34 1.35 1.36 1.37, the releases with resource.k8s.io/v1),
# one at a time, into
#   ${TOPOALIGN_CACHE:-$HOME/.cache/topoalign}/oracle-dra/<version>/<key>/oracle-dra
# and prints each binary's path on stdout. The key hashes this script, the
# oracle module's go.mod, the package's sources (oracle/dra/*.go), the
# release's go.mod/go.sum and the Go toolchain; the three most recently used
# builds of a version are kept, <version>/oracle-dra links to the last one.
# The kubelet oracle (oracle/build.sh) hashes oracle/*.go only: files here do
# not change its key.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
module=$(dirname "$here")
cache=${TOPOALIGN_CACHE:-$HOME/.cache/topoalign}/oracle-dra

if [ $# -eq 0 ]; then
	set -- 1.34 1.35 1.36 1.37
fi

for v in "$@"; do
	v=${v#v}
	case $v in
	1.34 | 1.35 | 1.36 | 1.37) ;;
	*)
		echo "dra/build.sh: no DRA oracle for Kubernetes $v (have: 1.34 1.35 1.36 1.37)" >&2
		exit 2
		;;
	esac
	hash=$(
		cd "$module"
		{
			go version
			for f in dra/build.sh go.mod dra/*.go "versions/$v/go.mod" "versions/$v/go.sum"; do
				echo "== $f"
				cat "$f"
			done
		} | sha256sum | cut -d' ' -f1
	)
	key=${hash:0:16}
	out=$cache/$v/$key/oracle-dra
	if [ ! -x "$out" ]; then
		mkdir -p "$cache/$v/$key"
		echo "dra/build.sh: building the v$v DRA oracle" >&2
		(
			cd "$module"
			# -mod=readonly: go.mod and go.sum are committed and complete.
			GOFLAGS= go build -mod=readonly -buildvcs=false \
				-modfile "versions/$v/go.mod" -tags "k8s_${v//./_}" -o "$out.tmp.$$" ./dra
		)
		mv "$out.tmp.$$" "$out"
	fi
	touch "$cache/$v/$key"
	ln -sfn "$key/oracle-dra" "$cache/$v/oracle-dra"
	(cd "$cache/$v" && ls -dt -- */ | tail -n +4 | xargs -r rm -rf --)
	echo "$out"
done
