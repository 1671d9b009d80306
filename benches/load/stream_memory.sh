#!/usr/bin/env bash
# Memory per open stream, quickly: starts BIN (a release switchboard; an
# alloc-count build adds the live heap by allocation size) on a catalog whose
# one model trickles from a Python upstream, opens N streams through it and
# prints RSS (and heap) per open stream. All on 127.0.0.1, ports 28088-28090.
#
#   bash benches/load/stream_memory.sh target/release/switchboard 2000
set -euo pipefail
BIN=$1; N=${2:-2000}
HERE=$(cd "$(dirname "$0")" && pwd)
ulimit -n $((2 * N + 1024)) 2>/dev/null || true
D=$(mktemp -d)
cat >"$D/catalog.json" <<EOC
{"providers": [{"id": "trickle", "families": ["openai"], "upstreams": [{"protocol": "openai", "base_url": "http://127.0.0.1:28090/v1", "api_key_env": "SB_BENCH_OPENAI_KEY"}]}],
"models": [{"id": "gpt-trickle", "provider": "trickle", "upstream_model": "gpt-5-mini", "display_name": "t", "description": "t", "created": 1767225600, "version": "1", "architecture": "decoder", "context_length": 1048576, "max_output_tokens": 65536, "pricing": {"prompt": "0.00000025", "completion": "0.000002"}, "supported_parameters": ["temperature", "max_tokens", "stream"], "supported_features": {"streaming": true}, "supported_actions": ["complete"], "supported_generation_methods": ["generateContent"], "protocols": ["openai"]}]}
EOC
echo '{"keys": [{"id": "bench", "key": "sk-bench-local"}]}' >"$D/keys.json"
SB_BENCH_OPENAI_KEY=a RUST_LOG=warn "$BIN" --catalog "$D/catalog.json" --keys "$D/keys.json" --listen 127.0.0.1:28088 --metrics 127.0.0.1:28089 --data "$D/data" >"$D/sb.log" 2>&1 &
SB=$!
for _ in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:28088/readyz && break; sleep 0.1; done
sleep 0.5
python3 "$HERE/stream_memory.py" "$N" 28088 28089 28090 "$SB" || true
kill -INT "$SB"; sleep 0.5; kill -9 "$SB" 2>/dev/null || true; rm -rf "$D"
