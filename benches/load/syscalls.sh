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
#   SCENARIOS: any of S1 S2 S4 S5 S7 S9 (default all)
set -euo pipefail
BIN=$(realpath "$1"); N=${2:-200}; SCENARIOS=${3:-"S1 S2 S4 S5 S7 S9"}
HERE=$(cd "$(dirname "$0")" && pwd)
FIX=$HERE/fixtures
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
TMP=$(mktemp -d /tmp/switchboard-syscalls.XXXXXX)
MOCK_PORT=28100 SB_PORT=28101 SB_METRICS=28102
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    sleep 0.3
    rm -rf "$TMP"
}
trap cleanup EXIT
mkdir -p "$TMP/mock_body" "$TMP/mock_proxy" "$TMP/mock_fastcgi" "$TMP/mock_uwsgi" "$TMP/mock_scgi"
sed -e "s|@DIR@|$TMP|g" -e "s|@FIXTURES@|$FIX|g" -e "s|@MOCK_PORT@|$MOCK_PORT|g" -e "s|@WORKERS@|1|g" \
    -e "s|@NOFILE@|$(ulimit -n)|g" -e "s|@WORKER_CONNECTIONS@|1024|g" \
    "$HERE/mock_upstream.nginx.conf" >"$TMP/mock.conf"
"$NGINX" -p "$TMP" -c "$TMP/mock.conf" -e "$TMP/mock.error.log" 2>>"$TMP/mock.stderr" &
PIDS+=("$!")
M="http://127.0.0.1:$MOCK_PORT"
provider() { echo "{\"id\": \"$1\", \"families\": [\"openai\", \"anthropic\", \"gemini\"], \"upstreams\": [{\"protocol\": \"$2\", \"base_url\": \"$3\", \"api_key_env\": \"SB_BENCH_KEY\"}]}"; }
model() {
    echo "{\"id\": \"$1\", \"provider\": \"$2\", \"upstream_model\": \"gpt-5-mini\", \"display_name\": \"$1\", \"description\": \"d\", \"created\": 1767225600, \"version\": \"1\", \"architecture\": \"decoder\", \"context_length\": 1048576, \"max_output_tokens\": 65536, \"pricing\": {\"prompt\": \"0.00000025\", \"completion\": \"0.000002\"}, \"supported_parameters\": [\"temperature\", \"top_p\", \"top_k\", \"max_tokens\", \"stream\", \"stop\"], \"supported_features\": {\"streaming\": true}, \"supported_actions\": [\"complete\"], \"supported_generation_methods\": [\"generateContent\"], \"protocols\": [\"openai\", \"anthropic\", \"gemini\"]}"
}
cat >"$TMP/catalog.json" <<EOF
{"providers": [$(provider openai openai "$M/openai/json/v1"), $(provider openai-stream openai "$M/openai/sse/v1"),
 $(provider responses-stream responses "$M/responses/sse/v1")],
 "models": [$(model gpt-5-mini openai), $(model gpt-5-mini-stream openai-stream), $(model gpt-5-mini-resp-stream responses-stream)]}
EOF
echo '{"keys": [{"id": "bench", "key": "sk-bench-local"}]}' >"$TMP/keys.json"
SB_BENCH_KEY=k RUST_LOG=warn "$BIN" --catalog "$TMP/catalog.json" --keys "$TMP/keys.json" \
    --listen "127.0.0.1:$SB_PORT" --metrics "127.0.0.1:$SB_METRICS" --data "$TMP/data" \
    </dev/null >"$TMP/sb.log" 2>&1 &
SB=$!
PIDS+=("$SB")
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$SB_PORT/readyz" && break; sleep 0.1; done

# SCENARIO -> path, body file, marker
case_of() {
    case "$1" in
        S1) echo "/v1/chat/completions $FIX/req_openai.json chat.completion" ;;
        S2) echo "/v1/chat/completions $FIX/req_openai_stream.json [DONE]" ;;
        S4) echo "/anthropic/v1/messages $FIX/req_anthropic_stream.json message_stop" ;;
        S5) echo "/google/v1beta/models/openai-stream/gpt-5-mini-stream:streamGenerateContent?alt=sse $FIX/req_gemini_stream.json finishReason" ;;
        S7) echo "/v1/responses $FIX/req_responses_stream.json response.completed" ;;
        S9) echo "/v1/chat/completions $FIX/req_openai_to_responses_stream.json [DONE]" ;;
    esac
}
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
