#!/usr/bin/env bash
# Benchmark (not part of scripts/test): decompression bombs given where a
# sysfs capture archive is expected (issue 32). Each must end with a clear
# error naming the file in < 1 s and < 100 MB peak resident memory; a real
# capture (ocp-bm-master, 20 MB unpacked) is read in the same run as the
# baseline. The program is crates/discovery/examples/read_capture.rs
# (read_sysfs, as every command reads a capture), release build; time and
# peak RSS from /usr/bin/time.
#
#   bench/archive-bomb.sh            # 1 GiB bombs
#   bench/archive-bomb.sh 6          # 6 GiB of zeros in the stream bombs
#
# Bombs, made here from runs of zeros (xz and gzip command-line tools):
#   stream.tar.xz / stream.tgz  a FIFO entry claiming N GiB, then N GiB of
#                               zeros: only the bound on decompressed bytes
#                               (128 MiB) stops it
#   files.tar.xz                files of 15 MiB of zeros: the bound on bytes
#                               kept (48 MiB) stops it
#   zeros.xz                    N GiB of zeros, no tar at all
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
target_dir=${CARGO_TARGET_DIR:-$root/target}
gib=${1:-1}

for tool in xz gzip python3 /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "archive-bomb: needs $tool" >&2; exit 2; }
done

(cd "$root" && nice cargo build --release -q -p topoalign-discovery --example read_capture)
reader="$target_dir/release/examples/read_capture"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fifo_header() {
    python3 - "$1" <<'PY'
import sys, tarfile
info = tarfile.TarInfo("machine/sys/pipe")
info.type = tarfile.FIFOTYPE
info.size = int(sys.argv[1])
sys.stdout.buffer.write(info.tobuf(format=tarfile.GNU_FORMAT))
PY
}

files_of_zeros() {
    python3 - <<'PY'
import io, sys, tarfile
out = tarfile.open(fileobj=sys.stdout.buffer, mode="w|", format=tarfile.GNU_FORMAT)
zeros = b"\0" * (15 << 20)
for i in range(8):
    info = tarfile.TarInfo(f"machine/sys/zero{i}")
    info.size = len(zeros)
    out.addfile(info, io.BytesIO(zeros))
out.close()
PY
}

bytes=$((gib << 30))
{ fifo_header "$bytes"; head -c "$bytes" /dev/zero; } | xz -1 -T1 > "$work/stream.tar.xz"
{ fifo_header "$bytes"; head -c "$bytes" /dev/zero; } | gzip -1 > "$work/stream.tgz"
files_of_zeros | xz -1 -T1 > "$work/files.tar.xz"
head -c "$bytes" /dev/zero | xz -1 -T1 > "$work/zeros.xz"

measure() { # name path -> "seconds kib status" and the first error line
    local out status
    set +e
    out=$(/usr/bin/time -f "%e %M" "$reader" "$2" 2>&1 >/dev/null)
    status=$?
    set -e
    local timing=${out##*$'\n'}
    local message=${out%$'\n'*}
    [ "$message" = "$out" ] && message=""
    local seconds=${timing% *} kib=${timing#* }
    printf '  %-16s %8s bytes  %6.2f s  %7.1f MB  exit %d  %s\n' "$1" "$(stat -c %s "$2")" "$seconds" \
        "$(echo "$kib / 1024" | bc -l)" "$status" "${message:0:150}"
    echo "$seconds $kib" > "$work/$1.measured"
}

echo "archive bombs ($gib GiB of zeros), read_sysfs, release build; load: $(cut -d' ' -f1-3 /proc/loadavg)"
measure "real capture" "$root/testdata/topologies/sysfs/ocp-bm-master.internal.sysinfo.tgz"
failed=0
for bomb in stream.tar.xz stream.tgz files.tar.xz zeros.xz; do
    measure "$bomb" "$work/$bomb"
    read -r seconds kib < "$work/$bomb.measured"
    if (( $(echo "$seconds >= 1 || $kib >= 100 * 1024" | bc) )); then
        failed=1
    fi
done
read -r base_seconds base_kib < "$work/real capture.measured"
echo "  target: each bomb refused in < 1 s and < 100 MB (the real capture: ${base_seconds} s, $((base_kib / 1024)) MB)"
if [ "$failed" = 1 ]; then
    echo "  MISSED the target (on a loaded machine, time may be off: see the load above)"
fi
