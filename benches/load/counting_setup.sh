# Sourced by syscalls.sh and instructions.sh: the nginx mock upstream of
# run.sh and BIN (a switchboard build) on 127.0.0.1, ports 28100-28102,
# for counts taken over N requests one after another on one keep-alive
# connection. Before sourcing: BIN, and LAUNCH (words put before BIN, such
# as a valgrind command; empty for none) and READY_TRIES (tenths of a
# second to wait for BIN's /readyz). Defines FIX, TMP, SB (BIN's pid),
# SB_PORT, SB_METRICS, PIDS and `case_of SCENARIO` (path, body file, marker).
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FIX=$HERE/fixtures
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
TMP=$(mktemp -d /tmp/switchboard-counting.XXXXXX)
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
cat >"$TMP/catalog.json" <<CATALOG
{"providers": [$(provider openai openai "$M/openai/json/v1"), $(provider openai-stream openai "$M/openai/sse/v1"),
 $(provider responses-stream responses "$M/responses/sse/v1"), $(provider gemini-stream gemini "$M/gemini/v1beta")],
 "models": [$(model gpt-5-mini openai), $(model gpt-5-mini-stream openai-stream), $(model gpt-5-mini-resp-stream responses-stream),
  $(model gemini-2.5-flash gemini-stream)]}
CATALOG
echo '{"keys": [{"id": "bench", "key": "sk-bench-local"}]}' >"$TMP/keys.json"
# SB_RUST_LOG (default warn: no access log) and SB_EXTRA (more flags) for
# the scripts that want them (threads.sh).
# shellcheck disable=SC2086 # LAUNCH and SB_EXTRA are words on purpose
SB_BENCH_KEY=k RUST_LOG=${SB_RUST_LOG:-warn} $LAUNCH "$BIN" --catalog "$TMP/catalog.json" --keys "$TMP/keys.json" \
    --listen "127.0.0.1:$SB_PORT" --metrics "127.0.0.1:$SB_METRICS" --data "$TMP/data" ${SB_EXTRA:-} \
    </dev/null >"$TMP/sb.log" 2>&1 &
SB=$!
PIDS+=("$SB")
for _ in $(seq "$READY_TRIES"); do curl -s -o /dev/null "http://127.0.0.1:$SB_PORT/readyz" && break; sleep 0.1; done

# SCENARIO -> path, body file, marker
case_of() {
    case "$1" in
        S1) echo "/v1/chat/completions $FIX/req_openai.json chat.completion" ;;
        S2) echo "/v1/chat/completions $FIX/req_openai_stream.json [DONE]" ;;
        S4) echo "/anthropic/v1/messages $FIX/req_anthropic_stream.json message_stop" ;;
        S5) echo "/google/v1beta/models/openai-stream/gpt-5-mini-stream:streamGenerateContent?alt=sse $FIX/req_gemini_stream.json finishReason" ;;
        S7) echo "/v1/responses $FIX/req_responses_stream.json response.completed" ;;
        S8) echo "/v1/responses $FIX/req_responses_to_openai_stream.json response.completed" ;;
        S9) echo "/v1/chat/completions $FIX/req_openai_to_responses_stream.json [DONE]" ;;
        G1) echo "/google/v1beta/models/gemini-stream/gemini-2.5-flash:streamGenerateContent?alt=sse $FIX/req_gemini_stream.json finishReason" ;;
        *) echo "unknown scenario $1" >&2; exit 2 ;;
    esac
}
