# Restart scenarios, run by `bash benches/load/run.sh --restarts` (sourced by
# run.sh after its setup: its helpers, TMP, ports, catalog, the mock upstream).
#
# Each scenario starts its own Switchboard, puts RESTART_CONNS keep-alive
# connections of wrk on it, and RESTART_AT s into the run restarts it:
#  R1 upgrade, JSON (S1's request)      R2 upgrade, streams (a trickling upstream)
#  R3 SIGTERM, JSON (S1's request)      R4 SIGTERM, streams
# An upgrade starts the new binary with `-u` (it takes the listening sockets
# through the upgrade socket) and sends SIGQUIT to the old one; wrk keeps
# going against the same port until the end of the run. A SIGTERM stops the
# only instance: once its listener closes, wrk's reconnects are refused
# (counted apart as "refused": there is no one left to connect to; behind a
# load balancer they would go to another instance).
#
# Failed requests (target 0): a request written on an open connection and
# not answered in full with a 200 and its body's marker (wrk's read, write
# and timeout errors, non-2xx answers, and answers without the marker:
# `[DONE]` for streams, `"chat.completion"` for JSON). wrk connects without
# blocking, so a refused connection shows up as a failed write: after a
# SIGTERM, write errors are counted as refused, not failed.
#
# Settings: RESTART_CONNS [32]  RESTART_AT [4] s  RESTART_UPGRADE_DURATION [16] s
#  RESTART_TERM_DURATION [10] s  RESTART_STREAM_INTERVAL_MS [20]
#  RESTART_STREAM_TOKENS [50] (streams of 1 s)  RESTART_SCENARIOS ["R1 R2 R3 R4"]

RESTART_CONNS=${RESTART_CONNS:-32}
RESTART_AT=${RESTART_AT:-4}
RESTART_UPGRADE_DURATION=${RESTART_UPGRADE_DURATION:-16}
RESTART_TERM_DURATION=${RESTART_TERM_DURATION:-10}
RESTART_STREAM_INTERVAL_MS=${RESTART_STREAM_INTERVAL_MS:-20}
RESTART_STREAM_TOKENS=${RESTART_STREAM_TOKENS:-50}
RESTART_SCENARIOS=${RESTART_SCENARIOS:-"R1 R2 R3 R4"}

# Pingora's file for these runs: the upgrade socket in the run's own directory.
cat >"$TMP/restart.yaml" <<EOF
version: 1
grace_period_seconds: 30
graceful_shutdown_timeout_seconds: 10
upgrade_sock: $TMP/upgrade.sock
pid_file: $TMP/switchboard.pid
EOF

RS_PID=""
start_instance() { # LOG [extra args]: starts a Switchboard on SB_PORT, sets RS_PID
    local out=$1
    shift
    SB_BENCH_OPENAI_KEY=sk-upstream-openai SB_BENCH_ANTHROPIC_KEY=sk-upstream-anthropic \
        SB_BENCH_GEMINI_KEY=upstream-gemini RUST_LOG="$SB_RUST_LOG" \
        "$SB_BIN" --catalog "$TMP/catalog.json" --keys "$TMP/keys.json" \
        --listen "127.0.0.1:$SB_PORT" --metrics "127.0.0.1:$SB_METRICS_PORT" \
        --data "$TMP/data" --responses-key-quota-bytes "$RESPONSES_QUOTA" \
        -c "$TMP/restart.yaml" "$@" </dev/null >>"$out" 2>&1 &
    RS_PID=$!
    PIDS+=("$RS_PID")
}

wait_gone() { # PID TRIES(0.1 s) -> 0 when it exited
    local pid=$1 tries=$2
    for _ in $(seq 1 "$tries"); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    return 1
}

restart_scenario() { # -> title kind path body headers marker
    case "$1" in
        R1) printf '%s\t' "upgrade (-u, then SIGQUIT), JSON" upgrade /v1/chat/completions \
            "$FIX/req_openai.json" "$H_OA" '"chat.completion"' ;;
        R2) printf '%s\t' "upgrade (-u, then SIGQUIT), streams of $((RESTART_STREAM_TOKENS * RESTART_STREAM_INTERVAL_MS)) ms" upgrade \
            /v1/chat/completions "$TMP/req_trickle.json" "$H_OA" 'data: [DONE]' ;;
        R3) printf '%s\t' "SIGTERM, JSON" term /v1/chat/completions "$FIX/req_openai.json" "$H_OA" '"chat.completion"' ;;
        R4) printf '%s\t' "SIGTERM, streams of $((RESTART_STREAM_TOKENS * RESTART_STREAM_INTERVAL_MS)) ms" term \
            /v1/chat/completions "$TMP/req_trickle.json" "$H_OA" 'data: [DONE]' ;;
        *) die "unknown restart scenario $1 (R1..R4)" ;;
    esac
}

declare -A RR # RR[scenario,field]
run_restart() { # SCENARIO
    local s=$1 title kind path body headers marker old new="" t0 t1 dur out
    IFS=$'\t' read -r title kind path body headers marker <<<"$(restart_scenario "$s")"
    RR[$s,title]=$title
    out="$TMP/restart.$s"
    log "$s $title: $RESTART_CONNS connections, restart at ${RESTART_AT} s"
    rm -f "$TMP/upgrade.sock"
    start_instance "$out.old.log"
    old=$RS_PID
    wait_http "http://127.0.0.1:$SB_PORT/readyz" || die "$s: switchboard did not start: $(tail -5 "$out.old.log")"
    RR[$s,probe]=$(probe "http://127.0.0.1:$SB_PORT$path" "$body" "$headers" "$marker")
    dur=$([ "$kind" = upgrade ] && echo "$RESTART_UPGRADE_DURATION" || echo "$RESTART_TERM_DURATION")
    WRK_BODY_FILE=$body WRK_HEADERS=$headers WRK_MARKER=$marker WRK_OUT="$out.wrk" \
        wrk -t"$THREADS" -c"$RESTART_CONNS" -d"${dur}s" --timeout 10s -s "$LOAD/post.lua" \
        "http://127.0.0.1:$SB_PORT$path" >"$out.wrk.log" 2>&1 &
    local wrk_pid=$!
    sleep "$RESTART_AT"
    t0=$(date +%s.%N)
    if [ "$kind" = upgrade ]; then
        start_instance "$out.new.log" -u
        new=$RS_PID
        kill -QUIT "$old"
    else
        kill -TERM "$old"
    fi
    if wait_gone "$old" 900; then
        t1=$(date +%s.%N)
        RR[$s,gone]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
    else
        RR[$s,gone]="not within 90"
    fi
    wait "$old" 2>/dev/null || true
    wait "$wrk_pid" 2>/dev/null || true
    [ -s "$out.wrk" ] || die "$s: wrk produced no results: $(cat "$out.wrk.log")"
    local REQUESTS DURATION_US ERR_CONNECT ERR_READ ERR_WRITE ERR_STATUS ERR_TIMEOUT UNMARKED=0
    # shellcheck disable=SC1090
    . "$out.wrk"
    RR[$s,requests]=$REQUESTS
    if [ "$kind" = upgrade ]; then
        RR[$s,failed]=$((ERR_READ + ERR_WRITE + ERR_TIMEOUT + ERR_STATUS + UNMARKED))
        RR[$s,detail]="read $ERR_READ, write $ERR_WRITE, timeout $ERR_TIMEOUT, non-2xx $ERR_STATUS, no marker $UNMARKED"
        RR[$s,refused]=$ERR_CONNECT
    else
        # wrk connects without blocking: a refused connection shows up as
        # its first write failing. Once the port is closed every write
        # error is one.
        RR[$s,failed]=$((ERR_READ + ERR_TIMEOUT + ERR_STATUS + UNMARKED))
        RR[$s,detail]="read $ERR_READ, timeout $ERR_TIMEOUT, non-2xx $ERR_STATUS, no marker $UNMARKED"
        RR[$s,refused]=$((ERR_CONNECT + ERR_WRITE))
    fi
    RR[$s,rps]=$(awk -v n="$REQUESTS" -v us="$DURATION_US" 'BEGIN { printf "%.0f", n / (us / 1e6) }')
    RR[$s,after]=—
    if [ -n "$new" ]; then
        RR[$s,after]=$(probe "http://127.0.0.1:$SB_PORT$path" "$body" "$headers" "$marker")
        RR[$s,newpid]=$(kill -0 "$new" 2>/dev/null && echo running || echo exited)
        kill -INT "$new" 2>/dev/null || true
        wait_gone "$new" 100 || kill -KILL "$new" 2>/dev/null || true
        wait "$new" 2>/dev/null || true
    fi
    echo "   ${RR[$s,requests]} requests, failed ${RR[$s,failed]} (${RR[$s,detail]}), refused ${RR[$s,refused]}; old process gone ${RR[$s,gone]} s after the signal"
}

stop_switchboard
log "restart scenarios: trickling upstream :$TRICKLE_PORT, a token every $RESTART_STREAM_INTERVAL_MS ms for $RESTART_STREAM_TOKENS tokens"
"$SL_BIN" upstream --listen "127.0.0.1:$TRICKLE_PORT" --interval-ms "$RESTART_STREAM_INTERVAL_MS" \
    --tokens "$RESTART_STREAM_TOKENS" >"$TMP/trickle.log" 2>&1 &
PIDS+=("$!")
for _ in $(seq 1 100); do
    grep -q listening "$TMP/trickle.log" 2>/dev/null && break
    sleep 0.1
done
grep -q listening "$TMP/trickle.log" || die "trickle upstream did not start: $(cat "$TMP/trickle.log")"
for s in $RESTART_SCENARIOS; do
    run_restart "$s"
done

restarts_report() {
    echo "### Restarts under load"
    echo
    echo "$RESTART_CONNS keep-alive connections of wrk ($THREADS threads) on one Switchboard; ${RESTART_AT} s into the run it is upgraded (the new binary started with \`-u\`, then SIGQUIT to the old one; the run goes on for ${RESTART_UPGRADE_DURATION} s in all) or stopped with SIGTERM (the run lasts ${RESTART_TERM_DURATION} s). Streams: an OpenAI stream trickling a token every $RESTART_STREAM_INTERVAL_MS ms for $RESTART_STREAM_TOKENS tokens (benches/stream_load.rs upstream). Failed: requests written on an open connection and not answered in full (wrk read, write and timeout errors, non-2xx, no \`[DONE]\` / \`\"chat.completion\"\` in the body); refused: connections refused once the only instance closed its listener (SIGTERM; wrk connects without blocking and counts a refusal as a failed write, so after a SIGTERM its write errors are counted here)."
    echo
    echo "| scenario | requests | req/s | **failed** | failed by kind | refused (connect or first write) | old process gone after | served after |"
    echo "|---|---:|---:|---:|---|---:|---:|---|"
    for s in $RESTART_SCENARIOS; do
        echo "| $s ${RR[$s,title]} | ${RR[$s,requests]} | ${RR[$s,rps]} | **${RR[$s,failed]}** | ${RR[$s,detail]} | ${RR[$s,refused]} | ${RR[$s,gone]} s | ${RR[$s,after]} |"
    done
    echo
    echo "Reproduce: \`bash benches/load/run.sh --restarts\` (settings: \`benches/load/restarts.sh\`'s header)."
    echo
}
