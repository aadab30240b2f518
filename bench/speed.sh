#!/usr/bin/env bash
# Benchmark (not part of scripts/test): the figures of issue #14 beside
# their targets, with the machine's load, plus callgrind instruction counts and
# dhat heap-allocation counts of one admission per policy and machine size,
# instructions per replay event and per extender call (filter + prioritize
# over 5,000 nodes, warm and cold) — counts repeat exactly from run to run,
# so a regression shows as a number even on a busy machine.
# The real kubelet's admission cost beside the engine's (issue #29), from
# the same run: `oracle bench` times the v1.37 kubelet code on the engine
# bench's node, pod and configuration at 1-16 NUMA nodes under the three
# policies; this needs Go (>= 1.26): oracle/build.sh 1.37 builds the oracle
# first (several minutes the first time, cached after).
#
#   bench/speed.sh                 # criterion (engine, extender), kubelet, callgrind
#   bench/speed.sh --quick         # shorter criterion and kubelet runs (rougher figures)
#   bench/speed.sh --callgrind     # only the instruction counts
#   bench/speed.sh --no-callgrind  # only the timings
#   bench/speed.sh --no-kubelet    # without the kubelet comparison (no Go needed)
#
# Wall-clock figures are only comparable with the targets on a quiet
# machine: the load printed beside them says how quiet it was.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
target_dir=${CARGO_TARGET_DIR:-$root/target}

quick=false
timings=true
counts=true
kubelet=true
for arg in "$@"; do
    case $arg in
        --quick) quick=true ;;
        --callgrind) timings=false ;;
        --no-callgrind) counts=false ;;
        --no-kubelet) kubelet=false ;;
        -h | --help)
            sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "bench/speed.sh: unknown argument $arg (try --help)" >&2
            exit 2
            ;;
    esac
done

if $counts && ! command -v valgrind >/dev/null; then
    echo "bench/speed.sh: valgrind is not installed, so the instruction counts cannot be taken." >&2
    echo "  Install it (Debian/Ubuntu: apt-get install valgrind) or run bench/speed.sh --no-callgrind." >&2
    exit 1
fi

$timings || kubelet=false
if $kubelet && ! command -v go >/dev/null; then
    echo "bench/speed.sh: Go is not on PATH, so the real kubelet code cannot be built for the comparison." >&2
    echo "  Install Go >= 1.26 (oracle/build.sh 1.37 builds it) or run bench/speed.sh --no-kubelet." >&2
    exit 1
fi

log=$(mktemp -t topoalign-speed.XXXXXX)
echo "bench/speed.sh: raw benchmark output in $log" >&2

if $kubelet; then
    # Built before anything is timed, so that the build does not load the
    # machine during the measurements.
    echo "bench/speed.sh: oracle/build.sh 1.37 (the real v1.37 kubelet code; the first build takes several minutes)" >&2
    oracle=$("$root/oracle/build.sh" 1.37 2>>"$log" | tail -n 1) && [ -x "$oracle" ] || {
        echo "bench/speed.sh: oracle/build.sh 1.37 failed; see $log (or run with --no-kubelet)" >&2
        exit 1
    }
fi

load() { uptime | sed 's/.*load average/load average/'; }

criterion_args=()
if $quick; then
    criterion_args=(--warm-up-time 1 --measurement-time 2)
fi

# The middle estimate of criterion's "time: [low mid high]" for each
# benchmark id, as "id<TAB>value<TAB>unit" lines.
criterion_estimates() {
    awk '
        /time:/ {
            id = $0; sub(/time:.*/, "", id); gsub(/^[ \t]+|[ \t]+$/, "", id)
            if (id == "") id = previous
            line = $0; sub(/.*\[/, "", line)
            split(line, f, /[ \t]+/)
            printf "%s\t%s\t%s\n", id, f[3], f[4]
            next
        }
        NF { previous = $0; gsub(/^[ \t]+|[ \t]+$/, "", previous) }
    ' "$1"
}

# Converts "value unit" to the unit asked for (µs or ms).
convert() {
    awk -v v="$1" -v u="$2" -v to="$3" 'BEGIN {
        f["ps"] = 1e-6; f["ns"] = 1e-3; f["µs"] = 1; f["us"] = 1; f["ms"] = 1e3; f["s"] = 1e6
        if (!(u in f)) { print "?"; exit }
        x = v * f[u]; if (to == "ms") x /= 1e3
        printf "%.1f", x
    }'
}

# The middle estimate of one id in nanoseconds (empty when absent).
nanoseconds() { # estimates-file id
    awk -F '\t' -v id="$2" '$1 == id { v = $2; u = $3 } END {
        f["ps"] = 1e-3; f["ns"] = 1; f["µs"] = 1e3; f["us"] = 1e3; f["ms"] = 1e6; f["s"] = 1e9
        if (u in f) printf "%.3f", v * f[u]
    }' "$1"
}

figure() { # estimates-file id unit
    local line
    line=$(awk -F '\t' -v id="$2" '$1 == id { print $2 "\t" $3 }' "$1" | tail -n 1)
    if [ -z "$line" ]; then
        echo "-"
    else
        convert "${line%%$'\t'*}" "${line#*$'\t'}" "$3"
    fi
}

if $timings; then
    echo "== timings (criterion, release)"
    echo "load before: $(load)"
    engine_out=$(mktemp -t topoalign-speed-engine.XXXXXX)
    # With the kubelet comparison, also the sizes it compares at.
    sizes='2|8|64'
    if $kubelet; then sizes='1|2|4|8|16|64'; fi
    (cd "$root" && cargo bench -q -p topoalign-engine --bench admission -- \
        "${criterion_args[@]}" "^admit/[a-z-]+/fast/($sizes)\$") >"$engine_out" 2>>"$log" || {
        echo "bench/speed.sh: cargo bench -p topoalign-engine failed; see $log" >&2
        exit 1
    }
    cat "$engine_out" >>"$log"
    engine=$(mktemp -t topoalign-speed-est.XXXXXX)
    criterion_estimates "$engine_out" >"$engine"
    echo "load after engine: $(load)"
    printf '%-44s %8s %8s %8s %8s\n' "engine admission (µs)" "snn" "restr." "b-e" "target"
    for numa in 2 8 64; do
        case $numa in 2) goal="≤ 5" ;; 8) goal="≤ 10" ;; 64) goal="≤ 50" ;; esac
        printf '%-44s %8s %8s %8s %8s\n' "  $numa NUMA nodes" \
            "$(figure "$engine" "admit/single-numa-node/fast/$numa" µs)" \
            "$(figure "$engine" "admit/restricted/fast/$numa" µs)" \
            "$(figure "$engine" "admit/best-effort/fast/$numa" µs)" "$goal"
    done

    if $kubelet; then
        # One admission of the same pod onto the same node through the real
        # kubelet code (oracle/bench.go), each case in a process of its own,
        # killed past the limit ("timeout": the kubelet's permutation merge
        # under restricted/best-effort at 16 NUMA nodes).
        limit=180 # seconds per case
        kubelet_args=(--time 3s)
        if $quick; then limit=60 kubelet_args=(--time 1s); fi
        kubelet_args+=(--limit "${limit}s")
        echo "== the kubelet beside the engine (oracle bench ${kubelet_args[*]}; engine: the criterion run above)"
        echo "load before kubelet: $(load)"
        kubelet_out=$(mktemp -t topoalign-speed-kubelet.XXXXXX)
        "$oracle" bench --policy single-numa-node,restricted,best-effort --numa 1,2,4,8,16 \
            "${kubelet_args[@]}" >"$kubelet_out" 2>>"$log" ||
            echo "bench/speed.sh: oracle bench reported errors; see $log" >&2
        cat "$kubelet_out" >>"$log"
        echo "load after kubelet: $(load)"
        sed -n 's/^# /  /p' "$kubelet_out"
        echo "  timeout: no admission within ${limit} s (the node's start-up included); its ratio is the one the limit gives, a lower bound"
        printf '%-18s %5s %16s %12s %12s %14s\n' "policy" "NUMA" "kubelet (µs)" "engine (µs)" "ratio" "target"
        for policy in single-numa-node restricted best-effort; do
            for numa in 1 2 4 8 16; do
                kubelet_ns=$(awk -F '\t' -v p="$policy" -v n="$numa" '$1 == p && $2 == n { print $3 }' "$kubelet_out")
                engine_ns=$(nanoseconds "$engine" "admit/$policy/fast/$numa")
                case $numa in 2) goal=50 ;; 8) goal=200 ;; *) goal= ;; esac
                # kubelet µs, ratio and the target's verdict; a timeout gives
                # the limit and the ratio it at least means.
                read -r kubelet_us ratio verdict < <(awk -v k="$kubelet_ns" -v e="$engine_ns" -v goal="$goal" \
                    -v s="$limit" 'BEGIN {
                        if (k == "timeout") {
                            us = "timeout"; r = (e > 0) ? sprintf(">%.0f×", s * 1e9 / e) : "-"
                            ok = (goal != "" && e > 0 && s * 1e9 / e >= goal) ? "met" : "-"
                        } else if (k ~ /^[0-9]+$/) {
                            us = sprintf("%.1f", k / 1e3); r = (e > 0) ? sprintf("%.0f×", k / e) : "-"
                            ok = (goal == "" || !(e > 0)) ? "-" : (k / e >= goal ? "met" : "missed")
                        } else { us = (k == "" ? "-" : k); r = "-"; ok = "-" }
                        print us, r, ok
                    }')
                target=-
                if [ -n "$goal" ]; then target="≥ $goal× $verdict"; fi
                printf '%-18s %5s %16s %12s %12s %14s\n' "$policy" "$numa" "$kubelet_us" \
                    "$(figure "$engine" "admit/$policy/fast/$numa" µs)" "$ratio" "$target"
            done
        done
        rm -f "$kubelet_out"
    fi

    extender_out=$(mktemp -t topoalign-speed-extender.XXXXXX)
    (cd "$root" && cargo bench -q -p topoalign-extender --bench extender -- "${criterion_args[@]}") \
        >"$extender_out" 2>>"$log" || {
        echo "bench/speed.sh: cargo bench -p topoalign-extender failed; see $log" >&2
        exit 1
    }
    cat "$extender_out" >>"$log"
    extender=$(mktemp -t topoalign-speed-est.XXXXXX)
    criterion_estimates "$extender_out" >"$extender"
    echo "load after extender: $(load)"
    printf '%-44s %8s %8s\n' "extender, 5,000 nodes (ms)" "now" "target"
    printf '%-44s %8s %8s\n' "  filter + prioritize, shape seen" \
        "$(figure "$extender" "extender 5000 nodes/filter + prioritize, warm" ms)" "≤ 1"
    printf '%-44s %8s %8s\n' "  filter + prioritize, shape never seen" \
        "$(figure "$extender" "extender 5000 nodes/filter + prioritize, cold" ms)" "≤ 3"

    echo "load before replay: $(load)"
    echo "replay, per event at 2 NUMA nodes (target ≤ 15 µs; cargo bench -p topoalign-scenario --bench replay):"
    cargo bench -q -p topoalign-scenario --bench replay 2>/dev/null | grep "µs per event" \
        || echo "  the replay bench failed: run cargo bench -p topoalign-scenario --bench replay"
    rm -f "$engine_out" "$engine" "$extender_out" "$extender"
fi

# Heap blocks valgrind's dhat counts in a whole run of a program.
heap_blocks() {
    valgrind --tool=dhat --dhat-out-file=/dev/null "$@" 2>&1 |
        sed -n 's/.*Total: .* in \([0-9,]*\) blocks.*/\1/p' | tr -d ,
}

# The heap allocations of one admission: dhat's blocks of a run with it
# less those of a run without it (`one_admission ... --no-admission`).
# (Callgrind's call counts into the allocator are not used: they take jumps
# inside glibc's malloc for calls.)
allocations() {
    local with without
    with=$(heap_blocks "$@") && without=$(heap_blocks "$@" --no-admission) && [ -n "$with" ] && [ -n "$without" ] ||
        { echo "?"; return; }
    echo $((with - without))
}

if $counts; then
    echo "== instructions (callgrind; the admission only, not start-up) / heap allocations (dhat: a run less a run without the admission) per admission"
    (cd "$root" && cargo build -q --release -p topoalign-engine --example one_admission) 2>>"$log" || {
        echo "bench/speed.sh: building the one_admission example failed; see $log" >&2
        exit 1
    }
    binary=$target_dir/release/examples/one_admission
    printf '%-20s %20s %20s %20s\n' "policy" "2 NUMA" "8 NUMA" "64 NUMA"
    for policy in single-numa-node restricted best-effort; do
        row=()
        for numa in 2 8 64; do
            out=$(mktemp -t topoalign-speed-cg.XXXXXX)
            if valgrind --tool=callgrind --callgrind-out-file=/dev/null \
                --toggle-collect='one_admission::measured' "$binary" "$policy" "$numa" >"$out" 2>&1; then
                row+=("$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out" | tail -n 1) / $(allocations "$binary" "$policy" "$numa")")
            else
                cat "$out" >>"$log"
                row+=("failed")
            fi
            rm -f "$out"
        done
        printf '%-20s %20s %20s %20s\n' "$policy" "${row[@]}"
    done

    echo "== instructions per replay event (callgrind; the replay bench's scenario: read, replay, write)"
    (cd "$root" && cargo build -q --release -p topoalign-scenario --example replay_events) 2>>"$log" || {
        echo "bench/speed.sh: building the replay_events example failed; see $log" >&2
        exit 1
    }
    out=$(mktemp -t topoalign-speed-cg.XXXXXX)
    if valgrind --tool=callgrind --callgrind-out-file=/dev/null \
        --toggle-collect='replay_events::measured' "$target_dir/release/examples/replay_events" >"$out" 2>&1; then
        total=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out" | tail -n 1)
        events=$(sed -n 's/^events: \([0-9]*\).*/\1/p' "$out")
        echo "  $((total / events)) instructions per event ($total over $events events)"
    else
        cat "$out" >>"$log"
        echo "  failed; see $log"
    fi
    rm -f "$out"

    echo "== instructions per extender call (callgrind; filter + prioritize over 5,000 nodes)"
    (cd "$root" && cargo build -q --release -p topoalign-extender --example filter_once) 2>>"$log" || {
        echo "bench/speed.sh: building the filter_once example failed; see $log" >&2
        exit 1
    }
    for mode in warm cold; do
        out=$(mktemp -t topoalign-speed-cg.XXXXXX)
        if valgrind --tool=callgrind --callgrind-out-file=/dev/null \
            --toggle-collect='filter_once::measured' "$target_dir/release/examples/filter_once" "$mode" >"$out" 2>&1; then
            count=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out" | tail -n 1)
        else
            cat "$out" >>"$log"
            count=failed
        fi
        rm -f "$out"
        case $mode in warm) what="pod shape already seen" ;; cold) what="pod shape never seen" ;; esac
        printf '%-44s %12s\n' "  $what" "$count"
    done
fi
echo "load at the end: $(load)"
