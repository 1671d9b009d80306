#!/usr/bin/env bash
# Syscalls per request, counted (not timed, so a busy machine does not
# matter): starts the nginx mock upstream of run.sh and BIN (a switchboard
# build; an alloc-count build adds heap allocations per request) on
# 127.0.0.1, then for each scenario sends N requests one after another on
# one keep-alive connection with strace -c attached to BIN, and prints the
# writes (write, writev, sendto, sendmsg) and reads (read, readv, recvfrom)
# per request. Ports 28100-28102.
#
#   bash benches/load/syscalls.sh target/release/switchboard [N] [SCENARIOS]
#   SCENARIOS: any of S1 S2 S4 S5 S7 S8 S9 G1 (default S1 S2 S4 S5 S7 S9;
#   G1: Gemini -> Gemini stream, passed through, not in run.sh)
set -euo pipefail
BIN=$(realpath "$1"); N=${2:-200}; SCENARIOS=${3:-"S1 S2 S4 S5 S7 S9"}
LAUNCH="" READY_TRIES=100
# shellcheck source=counting_setup.sh
source "$(dirname "$0")/counting_setup.sh"
heap() { curl -s "http://127.0.0.1:$SB_METRICS/metrics" | awk '$1 == "switchboard_heap_allocations_total" { print $2 }'; }
printf '%-4s %9s %9s %9s %9s %11s\n' "" writes/req reads/req other/req bytes/resp allocs/req
for s in $SCENARIOS; do
    read -r path body marker <<<"$(case_of "$s")"
    # Warm the upstream pool and check the answer.
    python3 "$HERE/syscalls_client.py" "$SB_PORT" "$path" "$body" "$marker" 3 >/dev/null
    a0=$(heap)
    strace -f -c -e trace=write,writev,sendto,sendmsg,read,readv,recvfrom -p "$SB" -o "$TMP/strace.$s" 2>/dev/null &
    ST=$!
    sleep 0.5
    size=$(python3 "$HERE/syscalls_client.py" "$SB_PORT" "$path" "$body" "$marker" "$N")
    sleep 0.3
    kill -INT "$ST"; wait "$ST" 2>/dev/null || true
    a1=$(heap)
    awk -v n="$N" -v s="$s" -v size="$size" -v a0="${a0:-0}" -v a1="${a1:-0}" '
        $NF ~ /^(write|writev|sendto|sendmsg)$/ { w += $4 }
        $NF ~ /^(read|readv|recvfrom)$/ { r += $4 }
        END { printf "%-4s %9.2f %9.2f %9s %9d %11s\n", s, w / n, r / n, "-", size,
              (a1 > 0 ? sprintf("%.1f", (a1 - a0) / (n + 0)) : "-") }' "$TMP/strace.$s"
done
