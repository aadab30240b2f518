#!/usr/bin/env bash
# Every conformance vector of a release with its NUMA nodes numbered anew
# past 63 (relabel.py), replayed through the real kubelet code of that
# release (the oracle, one fresh process each: a kubelet crash ends the
# process), compared with the vector's expected document renumbered alike.
#   testdata/numa-ids/sweep.sh VERSION...      (default: every release)
# writes testdata/numa-ids/VERSION.tsv, one line per vector:
#   NAME <TAB> same                  the kubelet's answer, ids renumbered
#   NAME <TAB> panic <TAB> TEXT      the kubelet crashed (Go's panic line)
#   NAME <TAB> differs               anything else (none expected)
#   NAME <TAB> skipped               relabel.py does not apply
# crates/scenario/tests/numa_ids_relabelled.rs holds the engine to it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
if [ $# -eq 0 ]; then
	set -- $(cd "$root/testdata/conformance" && ls -d 1.* | sort -V)
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for v in "$@"; do
	bin=$("$root/oracle/build.sh" "$v" | tail -n 1)
	dir=$root/testdata/conformance/$v
	out=$here/$v.tsv
	: >"$out.tmp"
	for f in "$dir"/scenarios/*.json; do
		name=$(basename "$f" .json)
		case $name in code-*) continue ;; esac
		if ! python3 "$here/relabel.py" scenario "$f" >"$work/s.json"; then
			printf '%s\tskipped\n' "$name" >>"$out.tmp"
			continue
		fi
		"$bin" replay "$work/s.json" >"$work/out.json" 2>"$work/err" || true
		if grep -q '^panic: ' "$work/err"; then
			printf '%s\tpanic\t%s\n' "$name" "$(grep -m1 '^panic: ' "$work/err")" >>"$out.tmp"
			continue
		fi
		python3 "$here/relabel.py" expected "$dir/expected/$name.json" >"$work/exp.json"
		if python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1])) != json.load(open(sys.argv[2])))' \
			"$work/out.json" "$work/exp.json" 2>/dev/null; then
			printf '%s\tsame\n' "$name" >>"$out.tmp"
		else
			printf '%s\tdiffers\n' "$name" >>"$out.tmp"
		fi
	done
	mv "$out.tmp" "$out"
	echo "$v: $(cut -f2 "$out" | sort | uniq -c | tr '\n' ' ')" >&2
done
