#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what the tests need
# (idempotently), then runs the Rust suite and the official-SDK suite.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
[ -e /etc/ssl/certs/ca-certificates.crt ] || need_apt+=(ca-certificates)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing system packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

echo "== Rust suite (cargo test)"
cargo test --all-targets 2>&1

if [ -f tests/sdk/requirements.txt ]; then
  echo "== official SDK suite (pytest)"
  venv=tests/sdk/.venv
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  stamp="$venv/.requirements.sha256"
  want=$(sha256sum tests/sdk/requirements.txt | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    "$venv/bin/pip" install -q --disable-pip-version-check -r tests/sdk/requirements.txt
    echo "$want" > "$stamp"
  fi
  # Two invocations, never one: building an example pulls the dev-dependencies'
  # features (tokio "full", ...) into every crate of that invocation, so a
  # release switchboard built beside it would not be the one `cargo run
  # --release` wants, and that would rebuild the whole crate graph. The
  # gateway is built exactly as `cargo run --release` builds it; the mock
  # upstream (a test double) in the debug profile, from the dependencies
  # `cargo test` has just compiled.
  cargo build --release --bin switchboard 2>&1
  cargo build --example mock_upstream 2>&1
  "$venv/bin/python" -m pytest -q tests/sdk
fi
