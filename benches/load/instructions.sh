#!/usr/bin/env bash
# Instructions per request, counted (not timed, so a busy machine does not
# matter): runs BIN (a switchboard build) under valgrind's callgrind with
# the nginx mock upstream of run.sh (counting_setup.sh, ports 28100-28102),
# and for each scenario sends N requests one after another on one
# keep-alive connection after a warm-up, counting the user-space
# instructions of all of BIN's threads (the kernel's work is not counted:
# syscalls.sh counts the syscalls). Prints instructions per request and
# keeps each scenario's profile in OUT for callgrind_annotate.
#
#   bash benches/load/instructions.sh target/release/switchboard [N] [SCENARIOS]
#   SCENARIOS: any of S1 S2 S4 S5 S7 S8 S9 (default all) and G1 (Gemini ->
#   Gemini stream, passed through: Gemini CLI's route; not in run.sh)
#   OUT: where the profiles go (default /tmp/switchboard-instructions)
set -euo pipefail
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 1; }
BIN=$(realpath "$1"); N=${2:-100}; SCENARIOS=${3:-"S1 S2 S4 S5 S7 S8 S9"}
OUT=${OUT:-/tmp/switchboard-instructions}
mkdir -p "$OUT"
# Valgrind starts a program some fifty times slower: up to two minutes.
LAUNCH="valgrind --tool=callgrind --compress-strings=no --callgrind-out-file=$OUT/callgrind.%p" READY_TRIES=1200
# shellcheck source=counting_setup.sh
source "$(dirname "$0")/counting_setup.sh"
curl -sf -o /dev/null "http://127.0.0.1:$SB_PORT/readyz" || { tail -20 "$TMP/sb.log" >&2; exit 1; }
total() { awk '/^(summary|totals):/ { print $2; exit }' "$1"; }
printf '%-4s %14s %14s\n' "" instr/req bytes/resp
for s in $SCENARIOS; do
    read -r path body marker <<<"$(case_of "$s")"
    # Warm the upstream pool and the code paths, and check the answer.
    python3 "$HERE/syscalls_client.py" "$SB_PORT" "$path" "$body" "$marker" 5 >/dev/null
    callgrind_control -z "$SB" >/dev/null 2>&1
    size=$(python3 "$HERE/syscalls_client.py" "$SB_PORT" "$path" "$body" "$marker" "$N")
    rm -f "$OUT/callgrind.$SB".*
    callgrind_control -d "$s" "$SB" >/dev/null 2>&1
    dump=$(ls -t "$OUT/callgrind.$SB".* | head -1)
    mv "$dump" "$OUT/$s.callgrind"
    printf '%-4s %14.0f %14d\n' "$s" "$(awk -v t="$(total "$OUT/$s.callgrind")" -v n="$N" 'BEGIN { print t / n }')" "$size"
done
echo "profiles: $OUT/<scenario>.callgrind (callgrind_annotate --inclusive=yes FILE)"
