"""Session fixtures for the official-SDK suite.

Starts the project's mock upstream (`examples/mock_upstream`) and the real
release `switchboard` binary on loopback ports, with a test catalog whose
providers all point at the mock, and hands the tests SDK clients configured
exactly as each SDK's documentation shows.

The gateway is `${CARGO_TARGET_DIR:-target}/release/switchboard`, the mock
`${CARGO_TARGET_DIR:-target}/debug/examples/mock_upstream` (relative to the
repository root). Unless `SWITCHBOARD_SDK_NO_BUILD=1`, the session first runs
`cargo build --release --bin switchboard` and `cargo build --example
mock_upstream`, no-ops when they are up to date, so the suite never tests
stale code. They are two invocations on purpose: an example brings the
dev-dependencies' features into its whole invocation, and a release gateway
built beside it would make the next `cargo run --release` rebuild every crate.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

import support

REPO = Path(__file__).resolve().parents[2]


def _target_dir() -> Path:
    d = Path(os.environ.get("CARGO_TARGET_DIR", "target"))
    return d if d.is_absolute() else REPO / d


def _build() -> None:
    if os.environ.get("SWITCHBOARD_SDK_NO_BUILD") == "1":
        return
    for cmd in BUILD:
        try:
            subprocess.run(cmd, cwd=REPO, check=True)
        except FileNotFoundError:
            return  # no cargo on PATH: use whatever binaries exist


BUILD = [
    ["cargo", "build", "--release", "--quiet", "--bin", "switchboard"],
    ["cargo", "build", "--quiet", "--example", "mock_upstream"],
]


def _binary(rel: str) -> Path:
    p = _target_dir() / rel
    if not p.exists():
        how = " and ".join(f"`{' '.join(c)}`" for c in BUILD)
        pytest.exit(f"{p} not found: run {how} first", returncode=2)
    return p


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 2.0, context=None) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclass
class Mock:
    url: str  # http://127.0.0.1:PORT

    def base_url(self, protocol: str) -> str:
        return self.url + support.MOCK_BASE[protocol]

    def reset(self) -> None:
        req = urllib.request.Request(self.url + "/__mock/reset", data=b"", method="POST")
        urllib.request.urlopen(req, timeout=5).read()

    def requests(self) -> list[dict]:
        return json.loads(_get(self.url + "/__mock/requests")[1])


@dataclass
class Gateway:
    url: str  # http://127.0.0.1:PORT (https://localhost:PORT with TLS)
    log: Path
    ca: Path | None = None  # the test CA that signed the TLS certificate


@pytest.fixture(scope="session")
def mock():
    _build()
    proc = subprocess.Popen(
        [str(_binary("debug/examples/mock_upstream")), "--port", "0",
         "--cohere-key", support.PROVIDER_KEYS["SB_SDK_KEY_COHERE"]],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = proc.stdout.readline().strip()
    if not line.startswith("listening on "):
        _stop(proc)
        pytest.exit(f"mock upstream did not start: {line!r}", returncode=2)
    yield Mock("http://" + line.removeprefix("listening on "))
    _stop(proc)


def _start_gateway(
    tmp: Path, name: str, catalog: dict, tls: support.TestPki | None = None
) -> tuple[subprocess.Popen | None, Gateway, str]:
    """Starts the gateway on `catalog` (with `tls`: `--tls-cert`/`--tls-key`,
    served as https://localhost:PORT); returns (process, gateway, "") once
    `/healthz` answers, or (None, gateway, log) when the process exited first."""
    (tmp / f"{name}.json").write_text(json.dumps(catalog, indent=2))
    port, metrics = _free_port(), _free_port()
    env = dict(os.environ, RUST_LOG="info")
    env.update({var: key for var, key in support.PROVIDER_KEYS.items()})
    env.pop("SB_SDK_UNSET_KEY", None)
    # The embedded store (stored responses) in the session's own directory.
    env["SWITCHBOARD_DATA"] = str(tmp / f"data-{name}")
    log = tmp / f"gateway-{name}.log"
    with open(log, "wb") as logf:
        proc = subprocess.Popen(
            [
                str(_binary("release/switchboard")),
                "--catalog", str(tmp / f"{name}.json"),
                "--keys", str(tmp / "keys.json"),
                "--listen", f"127.0.0.1:{port}",
                "--metrics", f"127.0.0.1:{metrics}",
                "--data", str(tmp / f"data-{name}"),
                *(["--tls-cert", str(tls.cert), "--tls-key", str(tls.key)] if tls else []),
            ],
            stdout=subprocess.DEVNULL,
            stderr=logf,
            env=env,
        )
    if tls:
        gw = Gateway(f"https://localhost:{port}", log, tls.ca)
        context = ssl.create_default_context(cafile=str(tls.ca))
    else:
        gw, context = Gateway(f"http://127.0.0.1:{port}", log), None
    deadline = time.monotonic() + 30
    while True:
        try:
            if _get(gw.url + "/healthz", timeout=1, context=context)[0] == 200:
                return proc, gw, ""
        except OSError:
            pass
        if proc.poll() is not None:
            return None, gw, log.read_text(errors="replace")
        if time.monotonic() > deadline:
            _stop(proc)
            pytest.exit(f"gateway did not start:\n{log.read_text(errors='replace')}", returncode=2)
        time.sleep(0.05)


@pytest.fixture(scope="session")
def gateway(mock, request):
    """The gateway on the test catalog. A gateway that refuses the catalog's
    `responses` upstream and family (one built without family D) is started
    again on the catalog without them; `support.RESPONSES_REFUSED` then holds
    why, and the cells that need them fail with it."""
    tmp = Path(tempfile.mkdtemp(prefix="switchboard-sdk-"))
    (tmp / "keys.json").write_text(json.dumps(support.keys(), indent=2))
    dead_url = f"http://127.0.0.1:{_free_port()}/v1"
    proc, gw, refused = _start_gateway(tmp, "catalog", support.catalog(mock.base_url, dead_url))
    if proc is None:
        support.RESPONSES_REFUSED = "\n".join(refused.splitlines()[-5:])
        catalog = support.catalog(mock.base_url, dead_url, responses=False)
        proc, gw, log = _start_gateway(tmp, "catalog-without-responses", catalog)
        if proc is None:
            pytest.exit(f"gateway did not start:\n{log}", returncode=2)
    yield gw
    _stop(proc)
    if request.session.testsfailed:
        tail = gw.log.read_text(errors="replace").splitlines()[-40:]
        sys.stderr.write(f"\n--- last lines of the gateway log ({gw.log}) ---\n" + "\n".join(tail) + "\n")


@pytest.fixture(scope="session")
def tls_gateway(mock, request):
    """A second gateway on the same catalog with TLS on its listener
    (`--tls-cert`, `--tls-key`: a leaf for `localhost` signed by a test CA
    made here, `support.TestPki`); clients reach it at https://localhost:PORT
    and trust the CA by `verify=`."""
    tmp = Path(tempfile.mkdtemp(prefix="switchboard-sdk-tls-"))
    (tmp / "keys.json").write_text(json.dumps(support.keys(), indent=2))
    dead_url = f"http://127.0.0.1:{_free_port()}/v1"
    pki = support.TestPki.make(tmp)
    proc, gw, log = _start_gateway(tmp, "catalog", support.catalog(mock.base_url, dead_url), tls=pki)
    if proc is None:
        pytest.exit(f"gateway with TLS did not start:\n{log}", returncode=2)
    yield gw
    _stop(proc)
    if request.session.testsfailed:
        tail = gw.log.read_text(errors="replace").splitlines()[-40:]
        sys.stderr.write(f"\n--- last lines of the TLS gateway log ({gw.log}) ---\n" + "\n".join(tail) + "\n")


@pytest.fixture(autouse=True)
def _needs_responses(request):
    """Cells with a Responses upstream (`protocol` "responses") and family D
    tests (marked `family_d`) fail at once, with the reason, when the gateway
    refused the catalog with family D."""
    callspec = getattr(request.node, "callspec", None)
    upstream = callspec.params.get("protocol") if callspec else None
    if upstream == "responses" or request.node.get_closest_marker("family_d"):
        request.getfixturevalue("gateway")
        support.require_responses()


# ------------------------------------------------------------------ SDK clients


@pytest.fixture(scope="session")
def openai_client(gateway):
    return support.openai_client(gateway.url)


@pytest.fixture(scope="session")
def anthropic_client(gateway):
    return support.anthropic_client(gateway.url)


@pytest.fixture(scope="session")
def genai_client(gateway):
    return support.genai_client(gateway.url)


@pytest.fixture(scope="session")
def clients(openai_client, anthropic_client, genai_client):
    """The three SDK clients by family name."""
    return {"openai": openai_client, "anthropic": anthropic_client, "gemini": genai_client}
