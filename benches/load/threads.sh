#!/usr/bin/env bash
# Where the gateway's CPU goes under load, thread by thread: starts the
# nginx mock and BIN as counting_setup.sh does (ports 28100-28102; the
# access log on, as in run.sh, and the bench key's stored-response quota
# raised so S7 and S8 store every answer), drives each scenario with wrk
# (64 connections, 3 s warm-up, DURATION s measured) and prints req/s, then
# per thread name (the workers are "switchboard"; "ledger-writer",
# "responses-write", "access-log" are the writers) the CPU microseconds
# and the voluntary and involuntary context switches per request, from
# /proc. A wake per request shows as a voluntary switch per request.
#
#   bash benches/load/threads.sh target/release/switchboard [SCENARIOS]
#   SCENARIOS: any of S1 S2 S4 S5 S7 S8 S9 G1 (default S1 S2 S7)
#   DURATION [8] s measured;  PERF=1 also records `perf record -e cpu-clock
#   --call-graph dwarf` of BIN into /tmp/switchboard-threads.<scenario>.perf
set -euo pipefail
command -v wrk >/dev/null || { echo "wrk is needed (apt-get install wrk)" >&2; exit 1; }
BIN=$(realpath "$1"); SCENARIOS=${2:-"S1 S2 S7"}; DURATION=${DURATION:-8}
LAUNCH="" READY_TRIES=100 SB_RUST_LOG=info SB_EXTRA="--responses-key-quota-bytes 68719476736"
# shellcheck source=counting_setup.sh
source "$(dirname "$0")/counting_setup.sh"
curl -sf -o /dev/null "http://127.0.0.1:$SB_PORT/readyz" || { tail -20 "$TMP/sb.log" >&2; exit 1; }
# Per thread name: CPU ticks, voluntary and involuntary switches (summed).
threads() {
    for t in /proc/"$SB"/task/*; do
        read -r -a st <<<"$(sed 's/.*) //' "$t/stat")"
        printf '%s %d %d %d\n' "$(tr ' ' '_' <"$t/comm")" $((st[11] + st[12])) \
            "$(awk '/^voluntary_ctxt/ { print $2 }' "$t/status")" \
            "$(awk '/^nonvoluntary_ctxt/ { print $2 }' "$t/status")"
    done | awk '{ c[$1] += $2; v[$1] += $3; n[$1] += $4 } END { for (k in c) print k, c[k], v[k], n[k] }' | sort
}
TICK=$(getconf CLK_TCK)
# The headers syscalls_client.py sends (every family's key header): one set
# for every scenario, as the counting scripts use.
headers="authorization: Bearer sk-bench-local|x-api-key: sk-bench-local|x-goog-api-key: sk-bench-local|anthropic-version: 2023-06-01"
for s in $SCENARIOS; do
    read -r path body marker <<<"$(case_of "$s")"
    python3 "$HERE/syscalls_client.py" "$SB_PORT" "$path" "$body" "$marker" 3 >/dev/null
    run() {
        WRK_BODY_FILE=$body WRK_HEADERS=$headers WRK_OUT="$TMP/wrk.out" WRK_MARKER=$marker \
            wrk -t2 -c64 -d"$1"s -s "$HERE/post.lua" "http://127.0.0.1:$SB_PORT$path"
    }
    run 3 >/dev/null 2>&1 || true
    [ "${PERF:-0}" = 1 ] && { perf record -e cpu-clock --call-graph dwarf,16384 -F 500 -p "$SB" \
        -o "/tmp/switchboard-threads.$s.perf" >/dev/null 2>&1 & PERF_PID=$!; }
    threads >"$TMP/before"
    run "$DURATION" >"$TMP/wrk.log" 2>&1 || true
    threads >"$TMP/after"
    [ "${PERF:-0}" = 1 ] && { kill -INT "$PERF_PID"; wait "$PERF_PID" 2>/dev/null || true; }
    rps=$(awk '/Requests\/sec/ { print $2 }' "$TMP/wrk.log")
    bad=$(awk '/Non-2xx|Socket errors/' "$TMP/wrk.log")
    echo "$s  $rps req/s${bad:+  ($bad)}"
    join "$TMP/before" "$TMP/after" | awk -v r="$rps" -v d="$DURATION" -v hz="$TICK" '{
        n = r * d; cpu = ($5 - $2) * 1e6 / hz / n
        if (cpu > 0.05 || ($6 - $3) / n > 0.001)
            printf "    %-16s %7.1f us CPU  %6.3f voluntary  %6.3f involuntary switches per request\n", $1, cpu, ($6 - $3) / n, ($7 - $4) / n
    }'
done
