#!/usr/bin/env bash
# User and kernel CPU per request, by thread, under load: starts the nginx
# mock upstream of run.sh and BIN (a switchboard build) on 127.0.0.1 as
# counting_setup.sh does, plus a plain nginx proxy_pass to the same mock
# (proxy.nginx.conf, no access log, no TLS), drives each with wrk (CONNS
# connections, DURATION s after a 2 s warm-up) on SCENARIO's route, and
# prints user and system microseconds per request of each of BIN's threads
# (from /proc/PID/task/TID/stat) and of nginx's workers. Where a proxy's
# CPU goes, not how fast it is: the ratio of throughputs is run.sh's.
# Ports 28100-28104.
#
#   bash benches/load/cpu_split.sh target/release/switchboard [SCENARIO] [DURATION]
#   SCENARIO: S1 (default) or S2; CONNS (default 64)
set -euo pipefail
BIN=$(realpath "$1"); S=${2:-S1}; D=${3:-8}; CONNS=${CONNS:-64}
command -v wrk >/dev/null || { echo "wrk is needed (apt-get install wrk)" >&2; exit 1; }
LAUNCH="" READY_TRIES=100
# shellcheck source=counting_setup.sh
source "$(dirname "$0")/counting_setup.sh"
PROXY_PORT=28103
sed -e "s|@DIR@|$TMP|g" -e "s|@MOCK_PORT@|$MOCK_PORT|g" -e "s|@PROXY_PORT@|$PROXY_PORT|g" -e "s|@WORKERS@|$(nproc)|g" \
    -e "s|@ACCESS_LOG@|access_log off;|g" -e "s|@TRICKLE_PORT@|28104|g" -e "s|@NOFILE@|$(ulimit -n)|g" \
    -e "s|@WORKER_CONNECTIONS@|8192|g" -e '/ssl/d' "$HERE/proxy.nginx.conf" >"$TMP/proxy.conf"
mkdir -p "$TMP/proxy_body" "$TMP/proxy_proxy" "$TMP/proxy_fastcgi" "$TMP/proxy_uwsgi" "$TMP/proxy_scgi"
"$NGINX" -p "$TMP" -c "$TMP/proxy.conf" -e "$TMP/proxy.error.log" 2>>"$TMP/proxy.stderr" &
NGX=$!
PIDS+=("$NGX")
read -r path body _ <<<"$(case_of "$S")"
case "$S" in
    S1) nginx_path=/openai/json/v1/chat/completions ;;
    S2) nginx_path=/openai/sse/v1/chat/completions ;;
    *) echo "cpu_split.sh: S1 or S2" >&2; exit 2 ;;
esac
for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$PROXY_PORT/" && break; sleep 0.1; done
ticks() { # PID...: "tid name utime stime" for each thread of each process
    for p in "$@"; do
        for t in /proc/"$p"/task/*; do
            printf '%s %s %s\n' "$(basename "$t")" "$(tr ' ' _ <"$t/comm")" \
                "$(awk '{ sub(/^.*\) /, ""); print $12, $13 }' "$t/stat")"
        done
    done
}
drive() { # LABEL URL PID...
    local label=$1 url=$2 n hz
    shift 2
    WRK_BODY_FILE=$body WRK_HEADERS="Authorization: Bearer sk-bench-local" WRK_OUT="$TMP/warm" \
        wrk -t"$(nproc)" -c"$CONNS" -d2s -s "$HERE/post.lua" "$url" >/dev/null 2>&1 || true
    ticks "$@" | sort >"$TMP/t0"
    WRK_BODY_FILE=$body WRK_HEADERS="Authorization: Bearer sk-bench-local" WRK_OUT="$TMP/run" \
        wrk -t"$(nproc)" -c"$CONNS" -d"${D}s" -s "$HERE/post.lua" "$url" >"$TMP/run.log" 2>&1 || true
    ticks "$@" | sort >"$TMP/t1"
    n=$(awk -F= '$1 == "REQUESTS" { print $2 }' "$TMP/run")
    hz=$(getconf CLK_TCK)
    echo "$label: $((n / D)) req/s"
    join "$TMP/t0" "$TMP/t1" | awk -v n="$n" -v hz="$hz" '
        { u = ($6 - $3) * 1e6 / hz / n; s = ($7 - $4) * 1e6 / hz / n; U += u; S += s
          if (u + s >= 0.05) printf "  %-8s %-18s user %6.2f  sys %6.2f us/req\n", $1, $2, u, s }
        END { printf "  %-27s user %6.2f  sys %6.2f us/req\n", "all", U, S }'
}
drive "switchboard $S" "http://127.0.0.1:$SB_PORT$path" "$SB"
# shellcheck disable=SC2046 # the workers' pids, one word each
drive "nginx $S" "http://127.0.0.1:$PROXY_PORT$nginx_path" $(pgrep -P "$NGX")
