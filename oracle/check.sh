#!/usr/bin/env bash
# Replays every scenario of a conformance vector directory through the
# oracle of one Kubernetes version and compares with its expected/ documents.
#   oracle/check.sh VERSION [DIR] [--save OUT] [--jobs N]
# DIR defaults to testdata/conformance/1.32. The last line of the output is
# "N passed, N failed"; the exit status is 0 only when nothing failed.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
if [ $# -lt 1 ]; then
	echo "usage: $0 VERSION [DIR] [--save OUT] [--jobs N]" >&2
	exit 2
fi
version=$1
shift
dir=$here/../testdata/conformance/1.32
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
	dir=$1
	shift
fi
bin=$("$here/build.sh" "$version" | tail -n 1)
exec "$bin" check "$@" "$dir"
