"""The official OpenAI Python SDK over TLS and HTTP/2 (docs/operations.md
"TLS and HTTP/2"): its httpx client with `http2=True` and the test CA
(`verify=`), against the `tls_gateway` fixture (conftest.py: the gateway
started with `--tls-cert` / `--tls-key`); and over h2c (HTTP/2 with prior
knowledge) against the plain gateway."""

from __future__ import annotations

import ssl

import openai
import pytest

import support as S


def user(text):
    return [{"role": "user", "content": text}]


@pytest.fixture(scope="module")
def h2_client(tls_gateway):
    http = openai.DefaultHttpxClient(http2=True, verify=ssl.create_default_context(cafile=str(tls_gateway.ca)))
    client = openai.OpenAI(base_url=f"{tls_gateway.url}/v1", api_key=S.KEY, max_retries=0,
                           timeout=20, http_client=http)
    yield client
    client.close()


def test_chat_over_tls_and_http2(h2_client):
    raw = h2_client.chat.completions.with_raw_response.create(model="gpt-5", messages=user("over h2"))
    assert raw.http_response.http_version == "HTTP/2"
    r = raw.parse()
    assert r.model == "openai/gpt-5"
    assert r.choices[0].message.content == S.expected_reply("openai", "over h2")


def test_stream_over_tls_and_http2(h2_client):
    with h2_client.chat.completions.with_streaming_response.create(
        model="gpt-5", messages=user("streamed over h2"), stream=True
    ) as raw:
        assert raw.http_response.http_version == "HTTP/2"
        chunks = list(raw.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == S.expected_reply("openai", "streamed over h2")
    assert chunks[-1].choices == [] or chunks[-1].choices[0].finish_reason == "stop"


def test_models_over_tls_and_http2(h2_client):
    assert "gpt-5" in [m.id for m in h2_client.models.list()]


def test_stream_over_h2c(gateway):
    # Plain listener, HTTP/2 with prior knowledge (no HTTP/1.1 offered).
    http = openai.DefaultHttpxClient(http1=False, http2=True)
    client = openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=S.KEY, max_retries=0, timeout=20,
                           http_client=http)
    with client.chat.completions.with_streaming_response.create(
        model="gpt-5", messages=user("h2c"), stream=True
    ) as raw:
        assert raw.http_response.http_version == "HTTP/2"
        text = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
    assert text == S.expected_reply("openai", "h2c")
    client.close()
