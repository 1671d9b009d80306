"""boto3's `bedrock-runtime` client against Switchboard's Bedrock routes
(family E: E20 `converse`, E21 `converse-stream`, E22 `invoke`, E23
`invoke-with-response-stream`), with `endpoint_url` at the gateway's
`/bedrock` and the client key as a Bedrock API key (`AWS_BEARER_TOKEN_BEDROCK`,
sent as `Authorization: Bearer`; `make_client` says how over plain HTTP). botocore
escapes the model id into one path segment (`openai%2Fgpt-5`), frames the
streams as AWS event streams and checks their CRCs."""

from __future__ import annotations

import json

import boto3
import botocore
import botocore.config
import botocore.exceptions
import botocore.utils
import pytest

import support as S
from support import PROMPT, SYSTEM, TOOL_ARGS

# The model a Bedrock client names for each upstream protocol: any catalog
# model, `provider/model_id` as the model id.
MODEL = {
    "openai": "openai/gpt-5",
    "anthropic": "anthropic/claude-sonnet-4.7",
    "gemini": "google/gemini-3.1-pro",
    "responses": "azure/gpt-5-codex",
}


def upstreams():
    return [pytest.param(p, id=f"bedrock-to-{p}") for p in S.PROTOCOLS]


def make_client(gateway, monkeypatch, key: str = S.KEY):
    """A bedrock-runtime client whose credential is `key` as a Bedrock API
    key; no AWS credentials around, no retries (a refusal is seen as sent).

    botocore reads the key from `AWS_BEARER_TOKEN_BEDROCK` and sends it as
    `Authorization: Bearer`, but only to an https endpoint (its BearerAuth
    refuses plain HTTP); the suite's gateway listens on http, so the client
    is unsigned and sets the same header itself when each request is made."""
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", key)
    # botocore does pick the bearer token up for bedrock-runtime.
    assert botocore.utils.get_token_from_environment("bedrock") == key
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=gateway.url + "/bedrock",
        config=botocore.config.Config(
            retries={"max_attempts": 1, "mode": "standard"},
            signature_version=botocore.UNSIGNED,
        ),
    )

    def bearer(request, **_):
        request.headers["Authorization"] = f"Bearer {key}"

    client.meta.events.register("request-created.bedrock-runtime.*", bearer)
    sent = []
    client.meta.events.register("before-send.bedrock-runtime.*", lambda request, **_: sent.append(request))
    client.sent = sent  # the requests botocore sent, for their URLs and headers
    return client


@pytest.fixture
def bedrock(gateway, monkeypatch):
    return make_client(gateway, monkeypatch)


def converse_args(model: str, text: str = PROMPT, **extra) -> dict:
    args = {
        "modelId": model,
        "system": [{"text": SYSTEM}],
        "messages": [{"role": "user", "content": [{"text": text}]}],
        "inferenceConfig": {"maxTokens": 256, "temperature": 0.5},
    }
    args.update(extra)
    return args


def invoke_body(text: str = PROMPT) -> str:
    return json.dumps({
        "anthropic_version": "bedrock-2023-05-31",
        "max_tokens": 256,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": text}],
    })


TOOL_CONFIG = {
    "tools": [{"toolSpec": {"name": "get_weather", "description": "Current weather in a city",
                            "inputSchema": {"json": S.WEATHER_SCHEMA}}}],
    "toolChoice": {"auto": {}},
}


# ------------------------------------------------------------------ E20 converse


@pytest.mark.parametrize("protocol", upstreams())
def test_converse(bedrock, protocol):
    r = bedrock.converse(**converse_args(MODEL[protocol]))
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    content = r["output"]["message"]["content"]
    assert r["output"]["message"]["role"] == "assistant"
    assert content[0]["text"] == S.expected_reply(protocol, PROMPT)
    assert r["stopReason"] == "end_turn"
    u = r["usage"]
    assert u["inputTokens"] > 0 and u["outputTokens"] > 0
    assert u["totalTokens"] == u["inputTokens"] + u["outputTokens"]
    assert "latencyMs" in r["metrics"]
    # botocore put the model id in the path as one escaped segment.
    (req,) = bedrock.sent
    assert req.url.endswith("/bedrock/model/" + MODEL[protocol].replace("/", "%2F") + "/converse"), req.url
    auth = req.headers["Authorization"]
    assert (auth.decode() if isinstance(auth, bytes) else auth) == f"Bearer {S.KEY}"


def test_converse_by_bare_id_and_alias(bedrock):
    for model, protocol in (("gpt-5", "openai"), (S.ALIAS, "anthropic")):
        r = bedrock.converse(**converse_args(model, "hi"))
        assert r["output"]["message"]["content"][0]["text"] == S.expected_reply(protocol, "hi")


@pytest.mark.parametrize("protocol", upstreams())
def test_converse_tool_use(bedrock, protocol):
    r = bedrock.converse(**converse_args(MODEL[protocol], "weather please [[tool]]", toolConfig=TOOL_CONFIG))
    assert r["stopReason"] == "tool_use"
    (call,) = [b["toolUse"] for b in r["output"]["message"]["content"] if "toolUse" in b]
    assert call["name"] == "get_weather"
    assert call["input"] == TOOL_ARGS
    # The result goes back as a Converse toolResult; the upstream sees it.
    follow = converse_args(MODEL[protocol], "thanks [[echo-request]]", toolConfig=TOOL_CONFIG)
    follow["messages"] = [
        {"role": "user", "content": [{"text": "weather please"}]},
        {"role": "assistant", "content": [{"toolUse": call}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": call["toolUseId"], "content": [{"text": "sunny, 21 °C"}]}},
                                     {"text": "thanks [[echo-request]]"}]},
    ]
    r = bedrock.converse(**follow)
    body = S.echoed(r["output"]["message"]["content"][0]["text"])
    assert any("sunny, 21 °C" in t for t in S.tool_results(protocol, body)), body


# ------------------------------------------------------------------ E21 converse-stream


@pytest.mark.parametrize("protocol", upstreams())
def test_converse_stream(bedrock, protocol):
    r = bedrock.converse_stream(**converse_args(MODEL[protocol]))
    events = list(r["stream"])
    kinds = [next(iter(e)) for e in events]
    assert kinds[0] == "messageStart"
    assert kinds[-2:] == ["messageStop", "metadata"]
    text = "".join(e["contentBlockDelta"]["delta"].get("text", "") for e in events if "contentBlockDelta" in e)
    assert text == S.expected_reply(protocol, PROMPT)
    assert events[-2]["messageStop"]["stopReason"] == "end_turn"
    meta = events[-1]["metadata"]
    assert meta["usage"]["inputTokens"] > 0 and meta["usage"]["outputTokens"] > 0
    assert "latencyMs" in meta["metrics"]


@pytest.mark.parametrize("protocol", upstreams())
def test_converse_stream_tool_use(bedrock, protocol):
    r = bedrock.converse_stream(**converse_args(MODEL[protocol], "weather please [[tool]]", toolConfig=TOOL_CONFIG))
    events = list(r["stream"])
    (start,) = [e["contentBlockStart"] for e in events if "contentBlockStart" in e]
    assert start["start"]["toolUse"]["name"] == "get_weather"
    i = start["contentBlockIndex"]
    args = "".join(e["contentBlockDelta"]["delta"]["toolUse"]["input"] for e in events
                   if "contentBlockDelta" in e and e["contentBlockDelta"]["contentBlockIndex"] == i)
    assert json.loads(args) == TOOL_ARGS
    assert events[-2]["messageStop"]["stopReason"] == "tool_use"


def test_converse_stream_error_mid_answer(bedrock):
    r = bedrock.converse_stream(**converse_args(MODEL["anthropic"], "hi [[stream-error]]"))
    with pytest.raises(botocore.exceptions.EventStreamError) as e:
        list(r["stream"])
    assert e.value.response["Error"]["Code"].endswith("Exception")


# ------------------------------------------------------------------ E22 invoke


@pytest.mark.parametrize("protocol", upstreams())
def test_invoke_model(bedrock, protocol):
    r = bedrock.invoke_model(modelId=MODEL[protocol], body=invoke_body(), contentType="application/json",
                             accept="application/json")
    msg = json.loads(r["body"].read())
    assert msg["type"] == "message" and msg["role"] == "assistant"
    assert msg["model"] == S.bare(MODEL[protocol])
    assert msg["content"][0]["text"] == S.expected_reply(protocol, PROMPT)
    assert msg["stop_reason"] == "end_turn"
    assert msg["usage"]["input_tokens"] > 0 and msg["usage"]["output_tokens"] > 0
    (req,) = bedrock.sent
    assert "/bedrock/model/" + MODEL[protocol].replace("/", "%2F") + "/invoke" in req.url


# ------------------------------------------------------------------ E23 invoke-with-response-stream


@pytest.mark.parametrize("protocol", upstreams())
def test_invoke_model_with_response_stream(bedrock, protocol):
    r = bedrock.invoke_model_with_response_stream(modelId=MODEL[protocol], body=invoke_body(),
                                                  contentType="application/json")
    events = [json.loads(e["chunk"]["bytes"]) for e in r["body"]]
    types_ = [e["type"] for e in events]
    assert types_[0] == "message_start"
    assert types_[-1] == "message_stop"
    text = "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")
    assert text == S.expected_reply(protocol, PROMPT)
    (delta,) = [e for e in events if e["type"] == "message_delta"]
    assert delta["delta"]["stop_reason"] == "end_turn"
    assert delta["usage"]["output_tokens"] > 0


def test_invoke_stream_error_mid_answer(bedrock):
    r = bedrock.invoke_model_with_response_stream(modelId=MODEL["openai"], body=invoke_body("hi [[stream-error]]"))
    with pytest.raises(botocore.exceptions.EventStreamError) as e:
        list(r["body"])
    assert e.value.response["Error"]["Code"].endswith("Exception")


# ------------------------------------------------------------------ errors


def error_of(call) -> tuple[int, str, str]:
    with pytest.raises(botocore.exceptions.ClientError) as e:
        call()
    err = e.value.response
    return err["ResponseMetadata"]["HTTPStatusCode"], err["Error"]["Code"], err["Error"]["Message"]


def test_bad_key(gateway, monkeypatch):
    client = make_client(gateway, monkeypatch, key=S.BAD_KEY)
    status, code, message = error_of(lambda: client.converse(**converse_args(MODEL["openai"])))
    assert (status, code) == (401, "AccessDeniedException")
    assert S.BAD_KEY not in message


def test_unknown_model(bedrock):
    status, code, message = error_of(lambda: bedrock.converse(**converse_args("nobody/nothing")))
    assert (status, code) == (404, "ResourceNotFoundException")
    assert "nobody/nothing" in message


def test_upstream_throttling(bedrock):
    status, code, _ = error_of(lambda: bedrock.converse(**converse_args(MODEL["openai"], "hi [[status:429]]")))
    assert (status, code) == (429, "ThrottlingException")


def test_invoke_without_anthropic_version(bedrock):
    body = json.dumps({"max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]})
    status, code, message = error_of(lambda: bedrock.invoke_model(modelId=MODEL["anthropic"], body=body))
    assert (status, code) == (400, "ValidationException")
    assert "anthropic_version" in message


def test_limited_key_cannot_use_other_providers(gateway, monkeypatch):
    client = make_client(gateway, monkeypatch, key=S.LIMITED_KEY)
    assert client.converse(**converse_args(MODEL["openai"], "hi"))["stopReason"] == "end_turn"
    status, code, _ = error_of(lambda: client.converse(**converse_args(MODEL["anthropic"], "hi")))
    assert (status, code) == (403, "AccessDeniedException")


# ------------------------------------------------------------------ botocore's own bearer auth, over TLS


@pytest.fixture
def bedrock_tls(tls_gateway, monkeypatch):
    """A client as a Bedrock API key user makes one: no hook, botocore's own
    bearer auth from `AWS_BEARER_TOKEN_BEDROCK` (it sends it over https
    only), against the TLS gateway whose test CA it trusts."""
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", S.KEY)
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=tls_gateway.url + "/bedrock",
        verify=str(tls_gateway.ca),
        config=botocore.config.Config(retries={"max_attempts": 1, "mode": "standard"}),
    )


def test_botocore_bearer_auth_over_tls(bedrock_tls):
    r = bedrock_tls.converse(**converse_args(MODEL["anthropic"]))
    assert r["output"]["message"]["content"][0]["text"] == S.expected_reply("anthropic", PROMPT)
    events = list(bedrock_tls.converse_stream(**converse_args(MODEL["openai"]))["stream"])
    assert [next(iter(e)) for e in events][-2:] == ["messageStop", "metadata"]
    r = bedrock_tls.invoke_model_with_response_stream(modelId=MODEL["gemini"], body=invoke_body())
    chunks = [json.loads(e["chunk"]["bytes"]) for e in r["body"]]
    assert chunks[-1]["type"] == "message_stop"
