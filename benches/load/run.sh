#!/usr/bin/env bash
# Switchboard load benchmark: the same load against Switchboard and against a
# plain nginx proxy_pass, both in front of the same mock upstream, in one run.
#
#   bash benches/load/run.sh [--quick] [--no-streams] [--restarts] [--no-install] [--no-build] [-h]
#
# What it does, all on 127.0.0.1, every process stopped on exit:
#  1. installs wrk and nginx (and curl, cmake, ...) from Debian packages if
#     missing (apt-get update first; nothing happens when they are there);
#  2. builds switchboard (release) and the stream_load bench client;
#  3. starts a mock upstream (nginx serving fixed, realistic JSON and SSE
#     bodies of the four upstream protocols: benches/load/fixtures), a plain nginx
#     proxy_pass to it (benches/load/proxy.nginx.conf) and Switchboard on a
#     catalog whose providers point at the mock;
#  4. for each scenario runs wrk (CONNS connections, WARMUP s discarded, then
#     DURATION s measured) against nginx and against Switchboard, after a
#     one-request probe of each that checks the status and the body;
#  5. streams at scale: STREAMS concurrent streams that trickle a token every
#     STREAM_INTERVAL_MS, straight to the trickling upstream, through nginx
#     and through a freshly started Switchboard, then STREAM_PROBES more
#     streams timed while all are open (skip with --no-streams or STREAMS=0);
#     then the same again with TTFB_STREAMS open streams, for the time to
#     first byte at the issue's 1,000 (at 10,000 a two-core machine is
#     saturated by the trickle itself);
#  6. prints the tables and writes them as Markdown to RESULTS.
# --restarts runs only the restart scenarios instead (benches/load/restarts.sh:
#  an upgrade and a SIGTERM under load, JSON and streams, reporting failed
#  requests next to the request count).
#
# Scenarios (the nginx baseline posts the same body to the upstream path
# Switchboard calls: it only relays, which is the lower bound):
#  S1 OpenAI client -> OpenAI upstream, JSON       S2 the same, streaming (50 frames)
#  S3 OpenAI client -> Anthropic upstream, JSON    S4 Anthropic client -> OpenAI upstream, streaming
#  S5 Gemini client -> OpenAI upstream, streaming  S6 200 KB OpenAI request -> Anthropic upstream, JSON
#  S7 Responses client -> Responses upstream, streaming (58 events, passthrough)
#  S8 Responses client -> OpenAI upstream, streaming  S9 OpenAI client -> Responses upstream, streaming
#  S10 as S1, on a pool of two upstreams of which one answers 503 to half of
#      its requests (nginx: the healthy path alone): the client must see no
#      errors; the report gives the latency added over S1's Switchboard run.
#  T1, T2 S1 and S2 over TLS (HTTP/1.1), nginx terminating TLS too (a second
#      Switchboard with --tls-cert/--tls-key, a TLS listener on the nginx proxy)
#  H2 S2 over TLS and HTTP/2 (ALPN), driven by h2load instead of wrk
#
# Settings (environment; defaults in brackets):
#  CONNS [64] wrk connections   THREADS [cores] wrk threads   DURATION [10] s
#  WARMUP [3] s   SCENARIOS ["S1 S2 S3 S4 S5 S6 S7 S8 S9 S10 T1 T2 H2"]   ACCESS_LOG [1] access logs on
#  CONTINUATION [auto] the providers' `continuation` (off: streams not kept continuable)
#  STREAMS [10000]   STREAM_INTERVAL_MS [100]   STREAM_TOKENS [50]
#  STREAM_RAMP_MS [3000] (connections spread over this)   STREAM_PROBES [100]
#  TTFB_STREAMS [1000] the second, smaller round's open streams (0: none)
#  RESULTS [benches/load/results.md]
#  SB_RUST_LOG [info] Switchboard's RUST_LOG   KEEP_TMP [0] keep the temp dir
#  SB_BIN, SL_BIN: run these switchboard and stream_load binaries (with
#     --no-build: e.g. an older build, to compare)
#  ALLOCS [1] the allocation pass: each scenario again, ALLOC_DURATION [3] s
#     of wrk, on a build with the counting allocator (feature alloc-count),
#     reporting heap allocations and bytes allocated per request
# --quick: DURATION=3 WARMUP=1 STREAMS=500 STREAM_TOKENS=30 STREAM_RAMP_MS=1000 (a smoke test).
#
# Figures are only meaningful on an otherwise idle machine: the load
# generator, both proxies and the mock share its cores.
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

INSTALL=1 BUILD=1 DO_STREAMS=1 RESTARTS=0
for arg in "$@"; do
    case "$arg" in
        --quick)
            : "${DURATION:=3}" "${WARMUP:=1}" "${STREAMS:=500}" "${STREAM_TOKENS:=30}" "${STREAM_RAMP_MS:=1000}"
            ;;
        --no-streams) DO_STREAMS=0 ;;
        --restarts) RESTARTS=1 ;;
        --no-install) INSTALL=0 ;;
        --no-build) BUILD=0 ;;
        -h | --help)
            usage
            exit 0
            ;;
        *)
            echo "unknown argument: $arg" >&2
            echo "usage: bash benches/load/run.sh [--quick] [--no-streams] [--restarts] [--no-install] [--no-build] [-h]" >&2
            exit 2
            ;;
    esac
done

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
LOAD="$ROOT/benches/load"
FIX="$LOAD/fixtures"
CORES=$(nproc)
CONNS=${CONNS:-64}
THREADS=${THREADS:-$CORES}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-3}
SCENARIOS=${SCENARIOS:-"S1 S2 S3 S4 S5 S6 S7 S8 S9 S10 T1 T2 H2"}
# Each provider's `continuation` (auto, restart, off): the cost of keeping
# streams continuable, measured against off.
CONTINUATION=${CONTINUATION:-auto}
ACCESS_LOG=${ACCESS_LOG:-1}
STREAMS=${STREAMS:-10000}
STREAM_INTERVAL_MS=${STREAM_INTERVAL_MS:-100}
STREAM_TOKENS=${STREAM_TOKENS:-50}
STREAM_RAMP_MS=${STREAM_RAMP_MS:-3000}
STREAM_PROBES=${STREAM_PROBES:-100}
TTFB_STREAMS=${TTFB_STREAMS:-1000}
RESULTS=${RESULTS:-$LOAD/results.md}
SB_RUST_LOG=${SB_RUST_LOG:-info}
KEEP_TMP=${KEEP_TMP:-0}
ALLOCS=${ALLOCS:-1}
# The Responses scenarios (S7, S8) store every answer, as the API does by
# default; one key's quota (--responses-key-quota-bytes, 64 MiB by default)
# would run out within seconds of load and turn the rest into 429s. The run
# measures the path, not the quota: the bench's key may keep this much.
RESPONSES_QUOTA=${RESPONSES_QUOTA:-68719476736}
ALLOC_DURATION=${ALLOC_DURATION:-3}
[ "$STREAMS" -gt 0 ] || DO_STREAMS=0
if [ "$RESTARTS" = 1 ]; then
    # Only the restart scenarios (benches/load/restarts.sh).
    SCENARIOS="" ALLOCS=0 DO_STREAMS=0
fi
for s in $SCENARIOS; do
    case "$s" in S[1-9] | S10 | T1 | T2 | H2) ;; *) echo "run.sh: unknown scenario $s (S1..S10, T1, T2, H2)" >&2 && exit 2 ;; esac
done
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
CLIENT_KEY=sk-bench-local
TICK=$(getconf CLK_TCK)

echo "usage: bash benches/load/run.sh [--quick] [--no-streams] [--restarts] [--no-install] [--no-build] [-h]  (settings: see -h)"

log() { printf '\n== %s\n' "$*"; }
die() {
    echo "run.sh: $*" >&2
    exit 1
}

if [ "$DO_STREAMS" = 1 ] &&
    [ $((STREAM_RAMP_MS + 500 + 10 * STREAM_PROBES)) -ge $((STREAM_TOKENS * STREAM_INTERVAL_MS)) ]; then
    echo "WARNING: the probes run after the first streams end; raise STREAM_TOKENS or lower STREAM_RAMP_MS" >&2
fi

# ------------------------------------------------------------------ install
if [ "$INSTALL" = 1 ]; then
    missing=()
    command -v wrk >/dev/null 2>&1 || missing+=(wrk)
    command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
    command -v curl >/dev/null 2>&1 || missing+=(curl)
    command -v ss >/dev/null 2>&1 || missing+=(iproute2)
    command -v pgrep >/dev/null 2>&1 || missing+=(procps)
    command -v openssl >/dev/null 2>&1 || missing+=(openssl)       # T1, T2, H2: the certificate
    command -v h2load >/dev/null 2>&1 || missing+=(nghttp2-client) # H2
    if [ "$BUILD" = 1 ]; then
        command -v cmake >/dev/null 2>&1 || missing+=(cmake) # Pingora's build needs it
    fi
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing ${missing[*]}"
        SUDO=()
        [ "$(id -u)" = 0 ] || SUDO=(sudo)
        export DEBIAN_FRONTEND=noninteractive
        "${SUDO[@]}" apt-get update -qq
        # The nginx package would start a system nginx where services can run;
        # policy-rc.d is respected, and ours never uses the system one.
        "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || die "nginx not found (run without --no-install)"
command -v wrk >/dev/null || die "wrk not found (run without --no-install)"

# ------------------------------------------------------------------ build
SB_BIN=${SB_BIN:-$TARGET_DIR/release/switchboard}
SB_COUNTING_BIN="$TARGET_DIR/release/switchboard-alloc-count"
if [ "$BUILD" = 1 ]; then
    log "building switchboard (release) and the stream_load client"
    if [ "$ALLOCS" = 1 ]; then
        # The counting build first (only the switchboard crate recompiles),
        # kept aside; then the measured binary is put back in its place.
        (cd "$ROOT" && cargo build --release --bin switchboard --features alloc-count)
        cp "$SB_BIN" "$SB_COUNTING_BIN"
    fi
    (cd "$ROOT" && cargo build --release --bin switchboard)
fi
[ -x "$SB_BIN" ] || die "$SB_BIN missing (run without --no-build)"
if [ "$ALLOCS" = 1 ] && ! [ -x "$SB_COUNTING_BIN" ]; then die "$SB_COUNTING_BIN missing (run without --no-build, or ALLOCS=0)"; fi
SL_BIN=${SL_BIN:-}
if [ -z "$SL_BIN" ] && { [ "$DO_STREAMS" = 1 ] || [ "$RESTARTS" = 1 ]; }; then
    if [ "$BUILD" = 1 ]; then
        (cd "$ROOT" && cargo bench --bench stream_load --no-run)
    fi
    SL_BIN=$(cd "$ROOT" && cargo bench --bench stream_load --no-run --message-format=json 2>/dev/null |
        grep -o '"executable":"[^"]*stream_load[^"]*"' | tail -1 | cut -d'"' -f4)
    if [ -z "$SL_BIN" ] || [ ! -x "$SL_BIN" ]; then die "stream_load bench executable not found"; fi
fi

# ------------------------------------------------------------------ file descriptors
# Switchboard holds two sockets per stream (client and upstream).
MOST_STREAMS=$((STREAMS > TTFB_STREAMS ? STREAMS : TTFB_STREAMS))
want_fds=$((2 * (MOST_STREAMS + ${STREAM_PROBES:-100}) * DO_STREAMS + 4096))
hard=$(ulimit -Hn)
STREAMS_REQUESTED=$STREAMS
FD_NOTE=""
if [ "$hard" = unlimited ] || [ "$hard" -ge "$want_fds" ]; then
    ulimit -n "$want_fds"
else
    ulimit -n "$hard"
    if [ "$DO_STREAMS" = 1 ]; then
        STREAMS=$(((hard - 1024) / 2 - STREAM_PROBES))
        FD_NOTE="open-file limit (ulimit -Hn) is $hard: ran $STREAMS streams instead of $STREAMS_REQUESTED (Switchboard needs 2 per stream)"
        echo "WARNING: $FD_NOTE" >&2
    fi
fi

# nginx worker_connections: 8192 for the wrk scenarios; for the streams each
# worker may end up holding every stream (client and upstream side). nginx
# allocates them up front, so the streams get their own, restarted, proxy.
STREAM_WORKER_CONNECTIONS=$((2 * (MOST_STREAMS + STREAM_PROBES) + 1024))
if [ "$STREAM_WORKER_CONNECTIONS" -gt "$(ulimit -n)" ]; then STREAM_WORKER_CONNECTIONS=$(ulimit -n); fi

# ------------------------------------------------------------------ temp dir, cleanup
TMP=$(mktemp -d /tmp/switchboard-load.XXXXXX)
PIDS=()
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    for pid in "${PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [ "$KEEP_TMP" = 1 ] || { [ "$rc" != 0 ] && [ "$rc" != 130 ]; }; then
        echo "temp dir kept: $TMP" >&2
    else
        rm -rf "$TMP"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------------ ports
USED_PORTS=" "
pick_port() { # VAR: a free loopback port below the ephemeral range
    local p
    for _ in $(seq 1 500); do
        p=$((20000 + RANDOM % 12000))
        case "$USED_PORTS" in *" $p "*) continue ;; esac
        if [ -z "$(ss -Htln "sport = :$p" 2>/dev/null)" ]; then
            USED_PORTS="$USED_PORTS$p "
            printf -v "$1" '%s' "$p"
            return
        fi
    done
    die "no free port found"
}
pick_port MOCK_PORT
pick_port PROXY_PORT
pick_port SB_PORT
pick_port SB_METRICS_PORT
pick_port TRICKLE_PORT
pick_port PROXY_TLS_PORT
pick_port SB_TLS_PORT
pick_port SB_TLS_METRICS_PORT

# ------------------------------------------------------------------ helpers
children() { pgrep -P "$1" 2>/dev/null | tr '\n' ' ' || true; }

cpu_ticks() { # total utime+stime of these pids
    local sum=0 p v
    for p in "$@"; do
        v=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat" 2>/dev/null || echo 0)
        sum=$((sum + ${v:-0}))
    done
    echo "$sum"
}

status_kb() { # FIELD pids...: sum of a /proc/PID/status field in kB
    local field=$1 sum=0 p v
    shift
    for p in "$@"; do
        v=$(awk -v f="$field:" '$1 == f { print $2 }' "/proc/$p/status" 2>/dev/null || echo 0)
        sum=$((sum + ${v:-0}))
    done
    echo "$sum"
}

reset_hwm() { # resets VmHWM to the current RSS (Linux >= 4.0)
    local p
    for p in "$@"; do
        echo 5 >"/proc/$p/clear_refs" 2>/dev/null || true
    done
}

wait_http() { # [-k] URL [tries of 0.1 s]
    local k=()
    if [ "$1" = -k ]; then
        k=(-k)
        shift
    fi
    local url=$1 tries=${2:-300}
    for _ in $(seq 1 "$tries"); do
        if curl -s "${k[@]}" -o /dev/null -m 1 "$url"; then
            return 0
        fi
        sleep 0.1
    done
    return 1
}

fmt() { awk -v x="$1" -v d="${2:-1}" 'BEGIN { printf "%.*f", d, x }'; }
ratio() { # A B -> A/B with 2 decimals, or n/a
    awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else printf "n/a" }'
}

fill() { # TEMPLATE OUT [WORKER_CONNECTIONS]: substitutes @PLACEHOLDERS@
    sed -e "s|@DIR@|$TMP|g" -e "s|@FIXTURES@|$FIX|g" -e "s|@MOCK_PORT@|$MOCK_PORT|g" \
        -e "s|@PROXY_PORT@|$PROXY_PORT|g" -e "s|@WORKERS@|$CORES|g" -e "s|@PROXY_TLS_PORT@|$PROXY_TLS_PORT|g" \
        -e "s|@ACCESS_LOG@|$ACCESS_LOG_LINE|g" -e "s|@TRICKLE_PORT@|$TRICKLE_PORT|g" \
        -e "s|@NOFILE@|$(ulimit -n)|g" -e "s|@WORKER_CONNECTIONS@|${3:-8192}|g" "$1" >"$2"
}

# ------------------------------------------------------------------ configuration files
if [ "$ACCESS_LOG" = 1 ]; then
    ACCESS_LOG_LINE="access_log $TMP/proxy.access.log;"
else
    ACCESS_LOG_LINE="access_log off;"
    SB_RUST_LOG=warn
fi
# T1, T2, H2: one certificate for both proxies (P-256, self-signed; the
# load tools do not verify it, the probes use curl -k).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$TMP/tls.key" -out "$TMP/tls.crt" 2>/dev/null ||
    die "openssl could not make the TLS certificate"
fill "$LOAD/mock_upstream.nginx.conf" "$TMP/mock.conf"
fill "$LOAD/proxy.nginx.conf" "$TMP/proxy.conf"
fill "$LOAD/proxy.nginx.conf" "$TMP/proxy_streams.conf" "$STREAM_WORKER_CONNECTIONS"

MOCK="http://127.0.0.1:$MOCK_PORT"
model() { # ID PROVIDER UPSTREAM_MODEL
    cat <<EOF
    {"id": "$1", "provider": "$2", "upstream_model": "$3", "display_name": "$1",
     "description": "load-benchmark model", "created": 1767225600, "version": "1",
     "architecture": "decoder", "context_length": 1048576, "max_output_tokens": 65536,
     "pricing": {"prompt": "0.00000025", "completion": "0.000002"},
     "supported_parameters": ["temperature", "top_p", "top_k", "max_tokens", "stream", "stop", "tools", "tool_choice", "response_format", "seed"],
     "supported_features": {"vision": true, "tool_use": true, "streaming": true},
     "supported_actions": ["complete"], "supported_generation_methods": ["generateContent", "countTokens"],
     "defaults": {"temperature": 1.0, "top_p": 0.95, "top_k": 40},
     "protocols": ["openai", "anthropic", "gemini"]}
EOF
}
provider() { # ID PROTOCOL BASE_URL ENV
    echo "    {\"id\": \"$1\", \"families\": [\"openai\", \"anthropic\", \"gemini\"], \"continuation\": \"$CONTINUATION\", \"upstreams\": [{\"protocol\": \"$2\", \"base_url\": \"$3\", \"api_key_env\": \"$4\"}]}"
}
{
    echo '{"providers": ['
    provider openai openai "$MOCK/openai/json/v1" SB_BENCH_OPENAI_KEY
    echo ','
    provider openai-stream openai "$MOCK/openai/sse/v1" SB_BENCH_OPENAI_KEY
    echo ','
    provider anthropic anthropic "$MOCK/anthropic/json/v1" SB_BENCH_ANTHROPIC_KEY
    echo ','
    provider anthropic-stream anthropic "$MOCK/anthropic/sse/v1" SB_BENCH_ANTHROPIC_KEY
    echo ','
    provider google gemini "$MOCK/gemini/v1beta" SB_BENCH_GEMINI_KEY
    echo ','
    provider responses responses "$MOCK/responses/json/v1" SB_BENCH_OPENAI_KEY
    echo ','
    provider responses-stream responses "$MOCK/responses/sse/v1" SB_BENCH_OPENAI_KEY
    echo ','
    provider trickle openai "http://127.0.0.1:$TRICKLE_PORT/v1" SB_BENCH_OPENAI_KEY
    echo ','
    # S10: a pool whose first upstream fails half of its requests with a 503.
    echo "    {\"id\": \"flaky\", \"families\": [\"openai\"], \"upstreams\": [
      {\"id\": \"half-down\", \"protocol\": \"openai\", \"base_url\": \"$MOCK/flaky/json/v1\", \"api_key_env\": \"SB_BENCH_OPENAI_KEY\"},
      {\"id\": \"healthy\", \"protocol\": \"openai\", \"base_url\": \"$MOCK/openai/json/v1\", \"api_key_env\": \"SB_BENCH_OPENAI_KEY\"}]}"
    echo '], "models": ['
    model gpt-5-mini openai gpt-5-mini-2025-08-07
    echo ','
    model gpt-5-mini-stream openai-stream gpt-5-mini-2025-08-07
    echo ','
    model claude-sonnet-4.5 anthropic claude-sonnet-4-5-20250929
    echo ','
    model claude-sonnet-4.5-stream anthropic-stream claude-sonnet-4-5-20250929
    echo ','
    model gemini-2.5-flash google gemini-2.5-flash
    echo ','
    model gpt-5-mini-resp responses gpt-5-mini-2025-08-07
    echo ','
    model gpt-5-mini-resp-stream responses-stream gpt-5-mini-2025-08-07
    echo ','
    model gpt-trickle trickle gpt-5-mini-2025-08-07
    echo ','
    model gpt-5-mini-flaky flaky gpt-5-mini-2025-08-07
    echo ']}'
} >"$TMP/catalog.json"
echo "{\"keys\": [{\"id\": \"bench\", \"key\": \"$CLIENT_KEY\"}]}" >"$TMP/keys.json"

# The 200 KB request: a long review conversation (OpenAI chat format).
awk -v model="anthropic/claude-sonnet-4.5" -v target=204800 'BEGIN {
    para = "Reviewing src/proxy/inference.rs, hunk %d: the exchange reads the request body into a single buffer sized from content-length, validates it, resolves the model and then writes the upstream request. The retry path clones the header and the body for every attempt; the body is a Bytes, so the clone is a reference count, but the header clone allocates. Consider keeping the serialized header. Also check that the read timeout covers the whole body and not each read, or a slow client can hold a worker for minutes. Line %d: the error message names the parameter, good; add the allowed range too.\\n"
    out = sprintf("{\"model\":\"%s\",\"max_tokens\":1024,\"temperature\":0.2,\"messages\":[{\"role\":\"system\",\"content\":\"You are a meticulous code reviewer. Be specific and cite line numbers.\"}", model)
    i = 0
    while (length(out) < target - 700) {
        i++
        user = ""
        for (k = 0; k < 3; k++) user = user sprintf(para, i * 3 + k, 100 + i * 7 + k)
        out = out sprintf(",{\"role\":\"user\",\"content\":\"%s\"}", user)
        out = out sprintf(",{\"role\":\"assistant\",\"content\":\"Noted for hunk %d: keep the serialized header, bound the whole-body read, and include the allowed range in the message.\"}", i)
    }
    out = out ",{\"role\":\"user\",\"content\":\"Summarise every issue above as a numbered list, most severe first.\"}]}"
    printf "%s\n", out
}' >"$TMP/req_large.json"

# S10's request: S1's on the pool with the half-failing upstream.
sed 's|"openai/gpt-5-mini"|"flaky/gpt-5-mini-flaky"|' "$FIX/req_openai.json" >"$TMP/req_flaky.json"
grep -q '"flaky/gpt-5-mini-flaky"' "$TMP/req_flaky.json" || die "S10 request: no model to replace in $FIX/req_openai.json"

# The trickle streams' request: the OpenAI stream request on the trickle model.
sed 's|"openai-stream/gpt-5-mini-stream"|"trickle/gpt-trickle"|' "$FIX/req_openai_stream.json" >"$TMP/req_trickle.json"

# ------------------------------------------------------------------ start
START_LOAD=$(cut -d' ' -f1 /proc/loadavg)
log "starting mock upstream :$MOCK_PORT, nginx proxy_pass :$PROXY_PORT, switchboard :$SB_PORT (temp dir $TMP)"
"$NGINX" -p "$TMP" -c "$TMP/mock.conf" -e "$TMP/mock.error.log" 2>>"$TMP/mock.stderr" &
MOCK_PID=$!
PIDS+=("$MOCK_PID")
start_proxy() { # CONF
    "$NGINX" -p "$TMP" -c "$1" -e "$TMP/proxy.error.log" 2>>"$TMP/proxy.stderr" &
    PROXY_PID=$!
    PIDS+=("$PROXY_PID")
}
start_proxy "$TMP/proxy.conf"

SB_PID=""
start_switchboard() { # [tls]: the TLS instance (T1, T2, H2) on SB_TLS_PORT, its pid in SB_TLS_PID
    local port=$SB_PORT metrics=$SB_METRICS_PORT data=$TMP/data tls=() url
    if [ "${1:-}" = tls ]; then
        port=$SB_TLS_PORT metrics=$SB_TLS_METRICS_PORT data=$TMP/data-tls
        tls=(--tls-cert "$TMP/tls.crt" --tls-key "$TMP/tls.key")
    fi
    SB_BENCH_OPENAI_KEY=sk-upstream-openai SB_BENCH_ANTHROPIC_KEY=sk-upstream-anthropic \
        SB_BENCH_GEMINI_KEY=upstream-gemini RUST_LOG="$SB_RUST_LOG" \
        "$SB_BIN" --catalog "$TMP/catalog.json" --keys "$TMP/keys.json" \
        --listen "127.0.0.1:$port" --metrics "127.0.0.1:$metrics" "${tls[@]}" \
        --data "$data" --responses-key-quota-bytes "$RESPONSES_QUOTA" \
        </dev/null >>"$TMP/switchboard.log" 2>&1 &
    if [ ${#tls[@]} -gt 0 ]; then SB_TLS_PID=$!; else SB_PID=$!; fi
    PIDS+=("$!")
    url="http://127.0.0.1:$port/readyz"
    [ ${#tls[@]} -gt 0 ] && url="-k https://127.0.0.1:$port/readyz"
    # shellcheck disable=SC2086
    wait_http $url || {
        tail -20 "$TMP/switchboard.log" >&2
        die "switchboard did not start"
    }
}
stop_switchboard() { # SIGINT: Pingora's fast shutdown
    kill -INT "$SB_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do
        kill -0 "$SB_PID" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$SB_PID" 2>/dev/null || true
    wait "$SB_PID" 2>/dev/null || true
}
start_switchboard
case " $SCENARIOS " in *" T1 "* | *" T2 "* | *" H2 "*) start_switchboard tls ;; esac
wait_http "$MOCK/" || die "mock upstream did not start: $(tail -5 "$TMP/mock.stderr" "$TMP/mock.error.log")"
wait_http "http://127.0.0.1:$PROXY_PORT/" || die "nginx proxy did not start: $(tail -5 "$TMP/proxy.stderr" "$TMP/proxy.error.log")"
sleep 1
SB_IDLE_KB=$(status_kb VmRSS "$SB_PID")
# shellcheck disable=SC2046
NGINX_IDLE_KB=$(status_kb VmRSS "$PROXY_PID" $(children "$PROXY_PID"))
echo "switchboard idle RSS: $(fmt "$(awk -v k="$SB_IDLE_KB" 'BEGIN{print k/1024}')") MB; nginx proxy (master + $CORES workers): $(fmt "$(awk -v k="$NGINX_IDLE_KB" 'BEGIN{print k/1024}')") MB"

# ------------------------------------------------------------------ scenarios
# Scenario records, tab-separated: title, Switchboard path, nginx (upstream)
# path, body, client headers ('|'-separated), marker expected in Switchboard's
# answer, marker expected in the upstream's (nginx's) answer.
H_OA="authorization: Bearer $CLIENT_KEY"
H_AN="x-api-key: $CLIENT_KEY|anthropic-version: 2023-06-01"
H_GM="x-goog-api-key: $CLIENT_KEY"
scenario() {
    local G='/google/v1beta/models/openai-stream/gpt-5-mini-stream:streamGenerateContent?alt=sse'
    case "$1" in
        S1) printf '%s\t' "OpenAI → OpenAI, JSON" /v1/chat/completions /openai/json/v1/chat/completions \
            "$FIX/req_openai.json" "$H_OA" '"chat.completion"' '"chat.completion"' ;;
        S2) printf '%s\t' "OpenAI → OpenAI, stream (50 frames)" /v1/chat/completions /openai/sse/v1/chat/completions \
            "$FIX/req_openai_stream.json" "$H_OA" 'data: [DONE]' 'data: [DONE]' ;;
        S3) printf '%s\t' "OpenAI → Anthropic, JSON" /v1/chat/completions /anthropic/json/v1/messages \
            "$FIX/req_openai_to_anthropic.json" "$H_OA" '"chat.completion"' '"stop_reason"' ;;
        S4) printf '%s\t' "Anthropic → OpenAI, stream" /anthropic/v1/messages /openai/sse/v1/chat/completions \
            "$FIX/req_anthropic_stream.json" "$H_AN" 'event: message_stop' 'data: [DONE]' ;;
        S5) printf '%s\t' "Gemini → OpenAI, stream" "$G" /openai/sse/v1/chat/completions \
            "$FIX/req_gemini_stream.json" "$H_GM" '"finishReason"' 'data: [DONE]' ;;
        S6) printf '%s\t' "OpenAI → Anthropic, 200 KB request" /v1/chat/completions /anthropic/json/v1/messages \
            "$TMP/req_large.json" "$H_OA" '"chat.completion"' '"stop_reason"' ;;
        S7) printf '%s\t' "Responses → Responses, stream (passthrough)" /v1/responses /responses/sse/v1/responses \
            "$FIX/req_responses_stream.json" "$H_OA" 'event: response.completed' 'event: response.completed' ;;
        S8) printf '%s\t' "Responses → OpenAI, stream" /v1/responses /openai/sse/v1/chat/completions \
            "$FIX/req_responses_to_openai_stream.json" "$H_OA" 'event: response.completed' 'data: [DONE]' ;;
        S9) printf '%s\t' "OpenAI → Responses, stream" /v1/chat/completions /responses/sse/v1/responses \
            "$FIX/req_openai_to_responses_stream.json" "$H_OA" 'data: [DONE]' 'event: response.completed' ;;
        S10) printf '%s\t' "OpenAI → OpenAI, JSON, one of two upstreams fails half its requests" /v1/chat/completions /openai/json/v1/chat/completions \
            "$TMP/req_flaky.json" "$H_OA" '"chat.completion"' '"chat.completion"' ;;
        T1) scenario S1 | retitle "OpenAI → OpenAI, JSON, over TLS (HTTP/1.1)" ;;
        T2) scenario S2 | retitle "OpenAI → OpenAI, stream, over TLS (HTTP/1.1)" ;;
        H2) scenario S2 | retitle "OpenAI → OpenAI, stream, over TLS and HTTP/2 (h2load)" ;;
        *) die "unknown scenario $1 (S1..S10, T1, T2, H2)" ;;
    esac
}
retitle() { awk -F'\t' -v OFS='\t' -v t="$1" '{ $1 = t; printf "%s", $0 }'; }
tls_scenario() { case "$1" in T1 | T2 | H2) return 0 ;; *) return 1 ;; esac; }

probe() { # URL BODY HEADERS MARKER -> "ok" or a reason
    local url=$1 body=$2 headers=$3 marker=$4 code args=()
    local IFS='|'
    for h in $headers; do args+=(-H "$h"); done
    # -k: the TLS scenarios' self-signed certificate (--http2: h2 where ALPN offers it).
    code=$(curl -s -k --http2 -m 20 -o "$TMP/probe.body" -w '%{http_code}' -X POST -H 'content-type: application/json' \
        "${args[@]}" --data-binary "@$body" "$url" || echo 000)
    if [ "$code" = 200 ] && grep -qF -- "$marker" "$TMP/probe.body"; then
        echo ok
    elif [ "$code" = 200 ]; then
        echo "200 but the body lacks '$marker': $(head -c 160 "$TMP/probe.body" | tr '\n\r' '  ')"
    else
        local msg
        msg=$(grep -o '"message": *"[^"]*"' "$TMP/probe.body" | head -1 | cut -d'"' -f4)
        echo "HTTP $code: ${msg:-$(head -c 160 "$TMP/probe.body" | tr '\n\r' '  ')}"
    fi
}

# H2's load: h2load (HTTP/2 over TLS, one stream at a time per connection, like
# wrk's one request per connection). h2load reports no percentiles: P50_US is
# its mean time per request, P99_US its maximum (the report says so).
h2load_run() { # SECONDS OUT URL BODY HEADERS
    local secs=$1 out=$2 url=$3 body=$4 headers=$5 args=() h
    local IFS='|'
    for h in $headers; do args+=(-H "$h"); done
    IFS=' '
    h2load -c "$CONNS" -t "$THREADS" -m 1 -D "$secs" -d "$body" -H 'content-type: application/json' \
        "${args[@]}" "$url" >"$out.log" 2>&1 || true
    awk -v secs="$secs" '
        function us(v) { if (v ~ /us$/) return v + 0; if (v ~ /ms$/) return (v + 0) * 1000; return (v + 0) * 1e6 }
        /^requests:/ { done = $6; failed = $10; errored = $12; timeout = $14 }
        /^status codes:/ { non2xx = $5 + $7 + $9 }
        /^time for request:/ { max = us($5); mean = us($6) }
        END {
            if (done == "") exit 1
            printf "REQUESTS=%d\nDURATION_US=%d\nERR_CONNECT=0\nERR_READ=%d\nERR_WRITE=0\nERR_STATUS=%d\nERR_TIMEOUT=%d\nP50_US=%d\nP99_US=%d\n",
                done, secs * 1e6, failed + errored, non2xx, timeout, mean, max
        }' "$out.log" >"$out" || rm -f "$out"
}

declare -A R # results: R[scenario,target,field]
run_target() { # SCENARIO TARGET(nginx|sb) URL BODY HEADERS MARKER
    local s=$1 t=$2 url=$3 body=$4 headers=$5 marker=$6 pids c0 c1 out
    if [ "$t" = sb ]; then pids="$SB_PID"; else pids="$PROXY_PID $(children "$PROXY_PID")"; fi
    if [ "$t" = sb ] && tls_scenario "$s"; then pids="$SB_TLS_PID"; fi
    R[$s,$t,probe]=$(probe "$url" "$body" "$headers" "$marker")
    out="$TMP/wrk.$s.$t"
    : >"$TMP/switchboard.log"
    [ "$ACCESS_LOG" = 1 ] && : >"$TMP/proxy.access.log"
    load() { # SECONDS OUT: wrk, or h2load for H2 (its summary turned into post.lua's KEY=value lines)
        if [ "$s" = H2 ]; then
            h2load_run "$1" "$2" "$url" "$body" "$headers"
        else
            WRK_BODY_FILE=$body WRK_HEADERS=$headers WRK_OUT="$2" \
                wrk -t"$THREADS" -c"$CONNS" -d"${1}s" --timeout 10s -s "$LOAD/post.lua" "$url" >"$2.log" 2>&1 || true
        fi
    }
    load "$WARMUP" "$out.warm"
    # shellcheck disable=SC2086
    reset_hwm $pids
    # shellcheck disable=SC2086
    c0=$(cpu_ticks $pids)
    load "$DURATION" "$out"
    # shellcheck disable=SC2086
    c1=$(cpu_ticks $pids)
    [ -s "$out" ] || {
        echo "wrk failed:" >&2
        cat "$out.log" >&2
        die "wrk produced no results for $s $t"
    }
    local REQUESTS DURATION_US ERR_CONNECT ERR_READ ERR_WRITE ERR_STATUS ERR_TIMEOUT P50_US P99_US
    # shellcheck disable=SC1090
    . "$out"
    R[$s,$t,requests]=$REQUESTS
    R[$s,$t,rps]=$(awk -v n="$REQUESTS" -v us="$DURATION_US" 'BEGIN { printf "%.0f", n / (us / 1e6) }')
    R[$s,$t,p50]=$(awk -v x="$P50_US" 'BEGIN { printf "%.2f", x / 1000 }')
    R[$s,$t,p99]=$(awk -v x="$P99_US" 'BEGIN { printf "%.2f", x / 1000 }')
    R[$s,$t,errors]=$((ERR_STATUS + ERR_CONNECT + ERR_READ + ERR_WRITE + ERR_TIMEOUT))
    R[$s,$t,errdetail]="non-2xx $ERR_STATUS, connect $ERR_CONNECT, read $ERR_READ, write $ERR_WRITE, timeout $ERR_TIMEOUT"
    R[$s,$t,cpu]=$(awk -v t="$((c1 - c0))" -v hz="$TICK" 'BEGIN { printf "%.2f", t / hz }')
    R[$s,$t,cpureq]=$(awk -v t="$((c1 - c0))" -v hz="$TICK" -v n="$REQUESTS" 'BEGIN { if (n > 0) printf "%.0f", t / hz / n * 1e6; else printf "n/a" }')
    # shellcheck disable=SC2086
    R[$s,$t,rss]=$(awk -v k="$(status_kb VmHWM $pids)" 'BEGIN { printf "%.1f", k / 1024 }')
    if [ "$s" = S10 ] && [ "$t" = sb ]; then
        # The half-down upstream's attempts and the 503s the client never saw.
        local m
        m=$(curl -s -m 5 "http://127.0.0.1:$SB_METRICS_PORT/metrics" || true)
        R[$s,sb,tried]=$(echo "$m" | awk '/^switchboard_upstream_attempts_total\{provider="flaky",upstream="half-down"/ { n += $NF } END { print n + 0 }')
        R[$s,sb,absorbed]=$(echo "$m" | awk '/^switchboard_upstream_attempts_total\{provider="flaky",upstream="half-down",outcome="status_5xx"/ { n += $NF } END { print n + 0 }')
    fi
}

for s in $SCENARIOS; do
    IFS=$'\t' read -r title sb_path ng_path body headers sb_marker ng_marker <<<"$(scenario "$s")"
    R[$s,title]=$title
    ng_url="http://127.0.0.1:$PROXY_PORT$ng_path" sb_url="http://127.0.0.1:$SB_PORT$sb_path"
    if tls_scenario "$s"; then
        ng_url="https://127.0.0.1:$PROXY_TLS_PORT$ng_path" sb_url="https://127.0.0.1:$SB_TLS_PORT$sb_path"
    fi
    log "$s $title: nginx proxy_pass"
    run_target "$s" nginx "$ng_url" "$body" "$headers" "$ng_marker"
    echo "   ${R[$s,nginx,rps]} req/s, p50 ${R[$s,nginx,p50]} ms, p99 ${R[$s,nginx,p99]} ms, errors ${R[$s,nginx,errors]}, probe: ${R[$s,nginx,probe]}"
    log "$s $title: switchboard"
    run_target "$s" sb "$sb_url" "$body" "$headers" "$sb_marker"
    echo "   ${R[$s,sb,rps]} req/s, p50 ${R[$s,sb,p50]} ms, p99 ${R[$s,sb,p99]} ms, errors ${R[$s,sb,errors]}, probe: ${R[$s,sb,probe]}"
done

if [ -n "${SB_TLS_PID:-}" ]; then # the TLS instance is done
    kill -INT "$SB_TLS_PID" 2>/dev/null || true
    wait "$SB_TLS_PID" 2>/dev/null || true
fi

# ------------------------------------------------------------------ allocations
# Each scenario again on the counting build: the growth of its heap counters
# over the growth of its request counter (both read from one metrics scrape,
# before and after ALLOC_DURATION s of wrk), after a 1 s warm-up.
scrape_allocs() { # -> "allocations bytes requests"
    curl -s -m 5 "http://127.0.0.1:$SB_METRICS_PORT/metrics" | awk '
        /^switchboard_heap_allocations_total / { a = $NF }
        /^switchboard_heap_allocated_bytes_total / { b = $NF }
        /^switchboard_requests_total\{/ { n += $NF }
        END { printf "%.0f %.0f %.0f\n", a, b, n }'
}
if [ "$ALLOCS" = 1 ] && [ -n "${SCENARIOS// /}" ]; then
    stop_switchboard
    MEASURED_BIN=$SB_BIN
    SB_BIN=$SB_COUNTING_BIN
    : >"$TMP/switchboard.log"
    start_switchboard
    log "allocations per request (counting build, ${ALLOC_DURATION} s per scenario)"
    for s in $SCENARIOS; do
        tls_scenario "$s" && continue # the plain path's figures (S1, S2) stand for them
        IFS=$'\t' read -r title sb_path ng_path body headers sb_marker ng_marker <<<"$(scenario "$s")"
        url="http://127.0.0.1:$SB_PORT$sb_path"
        WRK_BODY_FILE=$body WRK_HEADERS=$headers WRK_OUT="$TMP/alloc.$s.warm" \
            wrk -t"$THREADS" -c"$CONNS" -d1s --timeout 10s -s "$LOAD/post.lua" "$url" >/dev/null 2>&1 || true
        read -r a0 b0 n0 <<<"$(scrape_allocs)"
        WRK_BODY_FILE=$body WRK_HEADERS=$headers WRK_OUT="$TMP/alloc.$s" \
            wrk -t"$THREADS" -c"$CONNS" -d"${ALLOC_DURATION}s" --timeout 10s -s "$LOAD/post.lua" "$url" >/dev/null 2>&1 || true
        read -r a1 b1 n1 <<<"$(scrape_allocs)"
        R[$s,allocs]=$(awk -v a="$((a1 - a0))" -v n="$((n1 - n0))" 'BEGIN { if (n > 0) printf "%.0f", a / n; else print "n/a" }')
        R[$s,allocbytes]=$(awk -v b="$((b1 - b0))" -v n="$((n1 - n0))" 'BEGIN { if (n > 0) printf "%.1f", b / n / 1024; else print "n/a" }')
        echo "   $s: ${R[$s,allocs]} allocations, ${R[$s,allocbytes]} KiB allocated per request ($((n1 - n0)) requests)"
    done
    stop_switchboard
    SB_BIN=$MEASURED_BIN
    if [ "$DO_STREAMS" = 0 ]; then start_switchboard; fi
fi

# ------------------------------------------------------------------ streams at scale
declare -A ST
run_streams() { # NAME STREAMS TARGET_PORT PATH CLIENT_KEY [PIDS of the proxy...]
    local name=$1 streams=$2 port=$3 path=$4 key=$5 c0 c1 watch=()
    shift 5
    if [ $# -gt 0 ]; then
        ST[$name,base_kb]=$(status_kb VmRSS "$@")
        reset_hwm "$@"
        c0=$(cpu_ticks "$@")
        [ "${name%_t}" = sb ] && watch=(--watch-pid "$1")
    fi
    echo "-- $name"
    "$SL_BIN" client --target "127.0.0.1:$port" --path "$path" --header "authorization: Bearer $key" \
        --body-file "$TMP/req_trickle.json" --streams "$streams" --ramp-ms "$STREAM_RAMP_MS" \
        --probes "$STREAM_PROBES" --expect-frames "$((STREAM_TOKENS + 4))" \
        --timeout-s "$((STREAM_TOKENS * STREAM_INTERVAL_MS / 1000 + 30))" "${watch[@]}" \
        --out "$TMP/streams.$name" 2> >(tee "$TMP/streams.$name.err" >&2) | sed 's/^/   /'
    [ -s "$TMP/streams.$name" ] || die "stream_load client ($name) produced no results"
    while IFS='=' read -r k v; do
        ST[$name,$k]=${v//\'/}
    done <"$TMP/streams.$name"
    if [ $# -gt 0 ]; then
        c1=$(cpu_ticks "$@")
        ST[$name,cpu]=$(awk -v t="$((c1 - c0))" -v hz="$TICK" 'BEGIN { printf "%.2f", t / hz }')
        ST[$name,peak_kb]=$(status_kb VmHWM "$@")
        # VmHWM is updated lazily; the sampled VmRSS can be a little higher.
        if [ "${ST[$name,PEAK_RSS_KB]:-0}" -gt "${ST[$name,peak_kb]}" ]; then
            ST[$name,peak_kb]=${ST[$name,PEAK_RSS_KB]}
        fi
    fi
    sleep 1
}
if [ "$DO_STREAMS" = 1 ]; then
    stop_switchboard
    log "streams at scale: $STREAMS streams (+$STREAM_PROBES probes), a token every $STREAM_INTERVAL_MS ms for $STREAM_TOKENS tokens, ramp $STREAM_RAMP_MS ms"
    "$SL_BIN" upstream --listen "127.0.0.1:$TRICKLE_PORT" --interval-ms "$STREAM_INTERVAL_MS" \
        --tokens "$STREAM_TOKENS" >"$TMP/trickle.log" 2>&1 &
    PIDS+=("$!")
    for _ in $(seq 1 100); do
        grep -q listening "$TMP/trickle.log" 2>/dev/null && break
        sleep 0.1
    done
    grep -q listening "$TMP/trickle.log" || die "trickle upstream did not start: $(cat "$TMP/trickle.log")"
    : >"$TMP/switchboard.log"
    [ "$ACCESS_LOG" = 1 ] && : >"$TMP/proxy.access.log"
    start_switchboard
    kill -TERM "$PROXY_PID" # nginx: fast shutdown
    wait "$PROXY_PID" 2>/dev/null || true
    start_proxy "$TMP/proxy_streams.conf"
    wait_http "http://127.0.0.1:$PROXY_PORT/" || die "nginx proxy did not restart: $(tail -5 "$TMP/proxy.stderr" "$TMP/proxy.error.log")"
    sleep 1
    run_streams direct "$STREAMS" "$TRICKLE_PORT" /v1/chat/completions sk-upstream-openai
    # shellcheck disable=SC2046
    run_streams nginx "$STREAMS" "$PROXY_PORT" /trickle/v1/chat/completions sk-upstream-openai $(children "$PROXY_PID")
    run_streams sb "$STREAMS" "$SB_PORT" /v1/chat/completions "$CLIENT_KEY" "$SB_PID"
    if [ "$TTFB_STREAMS" -gt 0 ]; then
        # The time to first byte at TTFB_STREAMS open streams: a second
        # round, each run named NAME_t, Switchboard started afresh again.
        log "time to first byte at $TTFB_STREAMS open streams (+$STREAM_PROBES probes)"
        stop_switchboard
        start_switchboard
        run_streams direct_t "$TTFB_STREAMS" "$TRICKLE_PORT" /v1/chat/completions sk-upstream-openai
        # shellcheck disable=SC2046
        run_streams nginx_t "$TTFB_STREAMS" "$PROXY_PORT" /trickle/v1/chat/completions sk-upstream-openai $(children "$PROXY_PID")
        run_streams sb_t "$TTFB_STREAMS" "$SB_PORT" /v1/chat/completions "$CLIENT_KEY" "$SB_PID"
    fi
fi

# ------------------------------------------------------------------ restarts
if [ "$RESTARTS" = 1 ]; then
    # shellcheck source=benches/load/restarts.sh
    . "$LOAD/restarts.sh"
fi

# ------------------------------------------------------------------ report
mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
target_check() { # SCENARIO -> target verdict
    local s=$1 rr pr
    if [ "${R[$s,nginx,errors]}" != 0 ] || [ "${R[$s,sb,errors]}" != 0 ]; then
        echo "n/a (errors)"
        return
    fi
    rr=$(ratio "${R[$s,sb,rps]}" "${R[$s,nginx,rps]}")
    pr=$(ratio "${R[$s,sb,p99]}" "${R[$s,nginx,p99]}")
    case "$s" in
        # Issue 28's targets: S1 ≥ 0.85×; S2 ≥ 0.75× with p99 ≤ 1.5× nginx's.
        S1) awk -v r="$rr" 'BEGIN { printf "%s (≥0.85× req/s)", (r >= 0.85) ? "met" : "MISSED" }' ;;
        S2) awk -v r="$rr" -v p="$pr" 'BEGIN { printf "%s (≥0.75× req/s, ≤1.50× p99)", (r >= 0.75 && p <= 1.5) ? "met" : "MISSED" }' ;;
        S3 | S4 | S5 | S7 | S8 | S9) awk -v r="$rr" 'BEGIN { printf "%s (≥0.60× req/s)", (r >= 0.6) ? "met" : "MISSED" }' ;;
        S10) echo "met (no client errors)" ;;
        T1 | T2) awk -v r="$rr" 'BEGIN { printf "%s (≥0.80× req/s of nginx with TLS)", (r >= 0.8) ? "met" : "MISSED" }' ;;
        *) echo "—" ;;
    esac
}
pcterr() { awk -v e="$1" -v n="$2" 'BEGIN { if (e == 0) print "0"; else if (n + 0 > 0) printf "%d (%.0f%%)", e, 100 * e / n; else print e }'; }

CPU_MODEL=$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)
MEM_GB=$(awk '/MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)
GIT_REV=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
GIT_DIRTY=""
if [ -n "$(cd "$ROOT" && git status --porcelain 2>/dev/null)" ]; then GIT_DIRTY="+dirty"; fi
NGINX_V=$("$NGINX" -v 2>&1 | sed 's|.*/||')
WRK_V=$( (wrk -v 2>&1 || true) | head -1 | awk '{print $2}')
{
    echo "## Load benchmark: Switchboard vs nginx proxy_pass"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), switchboard $GIT_REV$GIT_DIRTY (release), nginx $NGINX_V, wrk $WRK_V."
    echo "Machine: $CPU_MODEL, $CORES cores, ${MEM_GB} GB, Linux $(uname -r); load average at start $START_LOAD."
    if [ "$RESTARTS" = 0 ]; then
        echo "Load: wrk, $CONNS connections, $THREADS threads, ${WARMUP} s warm-up then ${DURATION} s measured, per target."
        echo "Both proxies: $CORES worker threads/processes, access log $([ "$ACCESS_LOG" = 1 ] && echo on || echo off); the mock upstream is nginx serving fixed bodies (benches/load/fixtures)."
        echo "CPU is the proxy's own user+system time during the measured run (nginx: master and workers); peak RSS is VmHWM over the measured run (nginx: summed over its processes)."
    fi
    echo
    echo "Switchboard idle RSS right after start: **$(mb "$SB_IDLE_KB") MB** (target ≤ 20 MB); nginx proxy idle (master + workers): $(mb "$NGINX_IDLE_KB") MB."
    echo
    [ -n "${SCENARIOS// /}" ] && echo "| scenario | proxy | req/s | p50 ms | p99 ms | errors | CPU s | CPU µs/req | allocs/req | KiB alloc/req | peak RSS MB | target |"
    [ -n "${SCENARIOS// /}" ] && echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    for s in $SCENARIOS; do
        for t in nginx sb; do
            name=$([ "$t" = sb ] && echo Switchboard || echo "nginx proxy_pass")
            first=$([ "$t" = nginx ] && echo "$s ${R[$s,title]}" || echo "")
            if [ "$t" = sb ]; then al="${R[$s,allocs]:-—} | ${R[$s,allocbytes]:-—}"; else al="— | —"; fi
            echo "| $first | $name | ${R[$s,$t,rps]} | ${R[$s,$t,p50]} | ${R[$s,$t,p99]} | $(pcterr "${R[$s,$t,errors]}" "${R[$s,$t,requests]}") | ${R[$s,$t,cpu]} | ${R[$s,$t,cpureq]} | $al | ${R[$s,$t,rss]} | |"
        done
        if [ "${R[$s,nginx,errors]}" = 0 ] && [ "${R[$s,sb,errors]}" = 0 ]; then
            echo "| | **ratio** | **$(ratio "${R[$s,sb,rps]}" "${R[$s,nginx,rps]}")×** | $(ratio "${R[$s,sb,p50]}" "${R[$s,nginx,p50]}")× | **$(ratio "${R[$s,sb,p99]}" "${R[$s,nginx,p99]}")×** | | $(ratio "${R[$s,sb,cpu]}" "${R[$s,nginx,cpu]}")× | $(ratio "${R[$s,sb,cpureq]}" "${R[$s,nginx,cpureq]}")× | | | $(ratio "${R[$s,sb,rss]}" "${R[$s,nginx,rss]}")× | $(target_check "$s") |"
        else
            echo "| | **ratio** | n/a | | | | | | | | | $(target_check "$s") |"
        fi
    done
    echo
    notes=""
    for s in $SCENARIOS; do
        for t in nginx sb; do
            name=$([ "$t" = sb ] && echo Switchboard || echo "nginx")
            if [ "${R[$s,$t,probe]}" != ok ] || [ "${R[$s,$t,errors]}" != 0 ]; then
                notes+="- $s $name: probe: ${R[$s,$t,probe]}; errors: ${R[$s,$t,errdetail]}."$'\n'
            fi
        done
    done
    if [ -n "${R[H2,sb,rps]:-}" ]; then
        echo "H2 is driven by h2load ($CONNS connections, one stream at a time each): it reports no percentiles, so its p50 column is the mean time per request and its p99 column the maximum."
        echo
    fi
    if [ -n "${R[S10,sb,rps]:-}" ] && [ -n "${R[S1,sb,rps]:-}" ]; then
        echo "S10 against S1, both through Switchboard in this run (the half-failing upstream is cooled after each 503 and retried on its own schedule; the client never sees its errors): the half-down upstream was tried ${R[S10,sb,tried]:-?} times and answered 503 to ${R[S10,sb,absorbed]:-?} of them (warm-up included), each retried on the healthy one; client errors ${R[S10,sb,errors]}, p50 +$(awk -v a="${R[S10,sb,p50]}" -v b="${R[S1,sb,p50]}" 'BEGIN { printf "%.2f", a - b }') ms, p99 +$(awk -v a="${R[S10,sb,p99]}" -v b="${R[S1,sb,p99]}" 'BEGIN { printf "%.2f", a - b }') ms, req/s $(ratio "${R[S10,sb,rps]}" "${R[S1,sb,rps]}")× of S1's."
        echo
    fi
    if [ -n "$notes" ]; then
        echo "Errors (a probe is one request before the load, checking status 200 and the body):"
        echo
        printf '%s' "$notes"
        echo
    fi
    if [ "$DO_STREAMS" = 1 ]; then
        echo "### Streams at scale"
        echo
        echo "$STREAMS concurrent streams (plus $STREAM_PROBES probes), connections opened evenly over $STREAM_RAMP_MS ms, each an OpenAI chat.completion.chunk stream trickling a token every $STREAM_INTERVAL_MS ms ($STREAM_TOKENS tokens, $((STREAM_TOKENS + 4)) data lines, all checked), from a tokio upstream (benches/stream_load.rs); straight to it, through nginx proxy_pass, and through a freshly started Switchboard (OpenAI → OpenAI). Then $STREAM_PROBES probe streams start $((STREAM_RAMP_MS + 500)) ms in, one every 10 ms, while all the others are open. TTFB: request written → first response byte; first frame: → first \`data:\` line. \"Added\" is the proxy's percentile minus the direct one."
        [ -n "$FD_NOTE" ] && echo && echo "Note: $FD_NOTE."
        echo
        sub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }
        pair() { echo "${ST[$1,${2}_P50_MS]} / ${ST[$1,${2}_P99_MS]}"; }
        added() { # NAME KEY [DIRECT]
            local d=${3:-direct}
            echo "$(sub "${ST[$1,${2}_P50_MS]}" "${ST[$d,${2}_P50_MS]}") / $(sub "${ST[$1,${2}_P99_MS]}" "${ST[$d,${2}_P99_MS]}")"
        }
        per() { awk -v p="${ST[$1,peak_kb]}" -v b="${ST[$1,base_kb]}" -v n="${ST[$1,PEAK_OPEN]}" 'BEGIN { if (n > 0) printf "%.1f", (p - b) / n; else print "n/a" }'; }
        echo "| | direct to upstream | nginx proxy_pass | Switchboard |"
        echo "|---|---:|---:|---:|"
        echo "| streams ok / errors | ${ST[direct,OK]} / ${ST[direct,ERRORS]} | ${ST[nginx,OK]} / ${ST[nginx,ERRORS]} | ${ST[sb,OK]} / ${ST[sb,ERRORS]} |"
        echo "| peak concurrently open | ${ST[direct,PEAK_OPEN]} | ${ST[nginx,PEAK_OPEN]} | ${ST[sb,PEAK_OPEN]} |"
        echo "| TTFB p50 / p99 ms, probes at full concurrency | $(pair direct PROBE_TTFB) | $(pair nginx PROBE_TTFB) | $(pair sb PROBE_TTFB) |"
        echo "| added TTFB p50 / p99 ms, probes | | $(added nginx PROBE_TTFB) | **$(added sb PROBE_TTFB)** |"
        echo "| TTFB p50 / p99 ms, all streams (during the ramp) | $(pair direct TTFB) | $(pair nginx TTFB) | $(pair sb TTFB) |"
        echo "| added TTFB p50 / p99 ms, all streams | | $(added nginx TTFB) | $(added sb TTFB) |"
        echo "| first frame p50 / p99 ms, all streams | $(pair direct TTFF) | $(pair nginx TTFF) | $(pair sb TTFF) |"
        echo "| proxy RSS before → peak MB | | $(mb "${ST[nginx,base_kb]}") → $(mb "${ST[nginx,peak_kb]}") | $(mb "${ST[sb,base_kb]}") → **$(mb "${ST[sb,peak_kb]}")** |"
        echo "| RSS per open stream kB | | $(per nginx) | **$(per sb)** |"
        echo "| proxy CPU s | | ${ST[nginx,cpu]} | ${ST[sb,cpu]} |"
        echo
        echo "Targets: Switchboard with 10,000 open streams ≤ 350 MB and ≤ 32 kB per open stream (here $(mb "${ST[sb,peak_kb]}") MB with ${ST[sb,PEAK_OPEN]} open; at this rate 10,000 would take $(awk -v b="${ST[sb,base_kb]}" -v p="$(per sb)" 'BEGIN { printf "%.0f", (b + p * 10000) / 1024 }') MB); the time to first byte is the next table's (at 1,000 open streams)."
        if awk -v x="${ST[direct,PROBE_TTFB_P99_MS]}" 'BEGIN { exit !(x > 10) }'; then
            echo
            echo "Caution: even straight to the upstream the probes waited ${ST[direct,PROBE_TTFB_P99_MS]} ms (p99) for their first byte: the machine is saturated by $((STREAMS * 1000 / STREAM_INTERVAL_MS)) frames/s with the client, the upstream and the proxy on the same cores, so the TTFB rows measure that contention more than each proxy's own cost. Memory and CPU figures stand; for TTFB, fewer STREAMS or a bigger machine."
        fi
        if [ "$TTFB_STREAMS" -gt 0 ]; then
            echo
            echo "#### Time to first byte at $TTFB_STREAMS open streams"
            echo
            echo "The same streams and probes with $TTFB_STREAMS open (the issue's figure), after the round above, Switchboard started afresh."
            echo
            echo "| | direct to upstream | nginx proxy_pass | Switchboard |"
            echo "|---|---:|---:|---:|"
            echo "| streams ok / errors | ${ST[direct_t,OK]} / ${ST[direct_t,ERRORS]} | ${ST[nginx_t,OK]} / ${ST[nginx_t,ERRORS]} | ${ST[sb_t,OK]} / ${ST[sb_t,ERRORS]} |"
            echo "| peak concurrently open | ${ST[direct_t,PEAK_OPEN]} | ${ST[nginx_t,PEAK_OPEN]} | ${ST[sb_t,PEAK_OPEN]} |"
            echo "| TTFB p50 / p99 ms, probes at full concurrency | $(pair direct_t PROBE_TTFB) | $(pair nginx_t PROBE_TTFB) | $(pair sb_t PROBE_TTFB) |"
            echo "| added TTFB p50 / p99 ms, probes | | $(added nginx_t PROBE_TTFB direct_t) | **$(added sb_t PROBE_TTFB direct_t)** |"
            echo "| TTFB p50 / p99 ms, all streams (during the ramp) | $(pair direct_t TTFB) | $(pair nginx_t TTFB) | $(pair sb_t TTFB) |"
            echo "| added TTFB p50 / p99 ms, all streams | | $(added nginx_t TTFB direct_t) | $(added sb_t TTFB direct_t) |"
            echo "| first frame p50 / p99 ms, all streams | $(pair direct_t TTFF) | $(pair nginx_t TTFF) | $(pair sb_t TTFF) |"
            echo "| proxy CPU s | | ${ST[nginx_t,cpu]} | ${ST[sb_t,cpu]} |"
            echo
            added_p99=$(sub "${ST[sb_t,PROBE_TTFB_P99_MS]}" "${ST[direct_t,PROBE_TTFB_P99_MS]}")
            echo "Target: added TTFB p99 < 1 ms at 1,000 open streams: $added_p99 ms for the probes with $TTFB_STREAMS open ($(awk -v a="$added_p99" 'BEGIN { print (a < 1) ? "met" : "MISSED" }'))."
        fi
        for n in direct nginx sb direct_t nginx_t sb_t; do
            if [ -n "${ST[$n,ERRORS]:-}" ] && [ "${ST[$n,ERRORS]}" != 0 ]; then
                echo
                echo "Stream errors, $n: ${ST[$n,ERROR_KINDS]} (first messages in the run's output)."
            fi
        done
        echo
    fi
    if [ "$RESTARTS" = 1 ]; then
        restarts_report
    else
        echo "Reproduce: \`bash benches/load/run.sh\` (settings: \`bash benches/load/run.sh -h\`)."
    fi
} >"$TMP/results.md"

log "results"
cat "$TMP/results.md"
mkdir -p "$(dirname "$RESULTS")"
cp "$TMP/results.md" "$RESULTS"
echo
echo "written to $RESULTS"
