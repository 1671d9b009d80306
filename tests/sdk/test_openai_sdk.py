"""The official OpenAI Python SDK against Switchboard's family A (`/v1`)."""

from __future__ import annotations

import json

import openai
import pytest

import support as S
from support import PROMPT, SYSTEM, TOOL_ARGS

F = "openai"

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                      "parameters": S.WEATHER_SCHEMA}},
    {"type": "function", "function": {"name": "get_time", "description": "Current time in a time zone",
                                      "parameters": S.TIME_SCHEMA}},
]


def user(text):
    return [{"role": "user", "content": text}]


# ------------------------------------------------------------------ listing


def test_models_list(openai_client):
    models = list(openai_client.models.list())
    ids = [m.id for m in models]
    assert ids == ["gpt-5", "claude-sonnet-4.7", "gemini-3.1-pro", "qwen3-max", "deepseek-v4-pro",
                   "kimi-k2", "gpt-5-nano", "offline", "orphan-key", "gpt-5-codex", "claude-resume",
                   "text-embedding-3-small", "gemini-embedding-001", "rerank-v3.5"]
    for m in models:
        assert m.object == "model"
        assert m.created == 1767225600
    by_id = {m.id: m for m in models}
    assert by_id["claude-sonnet-4.7"].owned_by == "anthropic"
    assert by_id["gpt-5-nano"].supported_protocols == ["openai"]
    assert by_id["gpt-5-codex"].owned_by == "azure"


def test_models_retrieve(openai_client):
    m = openai_client.models.retrieve("gpt-5")
    assert (m.id, m.object, m.owned_by) == ("gpt-5", "model", "openai")
    assert m.created == 1767225600
    extra = m.model_extra
    assert extra["context_length"] == 200000
    assert extra["pricing"] == {"prompt": "0.000001", "completion": "0.000002"}
    assert extra["top_provider"] == "openai"
    assert "tools" in extra["supported_parameters"]
    assert extra["supported_protocols"] == S.model_protocols("gpt-5")


def test_models_retrieve_qualified_id(openai_client):
    r = openai_client.chat.completions.create(model="gpt-5", messages=user("hi"))
    m = openai_client.models.retrieve(r.model)  # "openai/gpt-5"
    assert m.id == "gpt-5"


def test_models_carry_aliases(openai_client):
    """An alias is no listing entry: `models.list()` keeps one entry per model, the
    model carries its `aliases`, and `models.retrieve(alias)` answers the canonical model."""
    by_id = {m.id: m for m in openai_client.models.list()}
    assert S.ALIAS not in by_id
    assert by_id["claude-sonnet-4.7"].model_extra["aliases"] == [S.ALIAS]
    assert by_id["gpt-5"].model_extra["aliases"] == []
    for name in (S.ALIAS, f"anthropic/{S.ALIAS}"):
        m = openai_client.models.retrieve(name)
        assert m.id == "claude-sonnet-4.7"


def test_models_retrieve_unknown(openai_client):
    with pytest.raises(openai.NotFoundError):
        openai_client.models.retrieve("no-such-model")


# ------------------------------------------------------------------ chat, nine cells


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_chat(openai_client, protocol):
    model = S.MODEL[F, protocol]
    r = openai_client.chat.completions.create(model=model, messages=user(PROMPT))
    assert r.object == "chat.completion"
    assert r.model == S.client_model_name(F, model)
    choice = r.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == S.expected_reply(protocol, PROMPT)
    assert choice.finish_reason == "stop"
    assert r.usage.prompt_tokens > 0
    assert r.usage.completion_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_chat_stream(openai_client, protocol):
    model = S.MODEL[F, protocol]
    stream = openai_client.chat.completions.create(
        model=model, messages=user(PROMPT), stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    assert len(chunks) > 3, "expected the reply in several deltas"
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert all(c.model == S.client_model_name(F, model) for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == S.expected_reply(protocol, PROMPT)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    usage = [c.usage for c in chunks if c.usage]
    assert usage, "include_usage asks for a usage chunk"
    assert usage[-1].prompt_tokens > 0 and usage[-1].completion_tokens > 0


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_upstream_request(openai_client, mock, protocol):
    """What reached the provider: its endpoint, its key (not the client's), its model name."""
    model = S.MODEL[F, protocol]
    for stream in (False, True):
        mock.reset()
        r = openai_client.chat.completions.create(model=model, messages=user("hi"), stream=stream)
        if stream:
            list(r)
        (rec,) = mock.requests()
        S.check_upstream_request(rec, protocol, model, stream)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_chat_by_alias(openai_client, mock, stream):
    """A call by alias reaches the upstream with the model's `upstream_model` and
    is answered with the canonical `provider/model_id`."""
    mock.reset()
    r = openai_client.chat.completions.create(model=S.ALIAS, messages=user(PROMPT), stream=stream)
    if stream:
        chunks = list(r)
        assert {c.model for c in chunks} == {"anthropic/claude-sonnet-4.7"}
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        assert r.model == "anthropic/claude-sonnet-4.7"
        text = r.choices[0].message.content
    assert text == S.expected_reply("anthropic", PROMPT)
    (rec,) = mock.requests()
    S.check_upstream_request(rec, "anthropic", "claude-sonnet-4.7", stream)


def test_bare_model_id(openai_client):
    r = openai_client.chat.completions.create(model="gpt-5", messages=user("hi"))
    assert r.model == "openai/gpt-5"
    assert r.choices[0].message.content == S.expected_reply("openai", "hi")


def test_non_ascii_byte_split_stream(openai_client):
    """One-byte TCP writes upstream split every multi-byte character."""
    text = "[[chunk:1]] " + PROMPT
    stream = openai_client.chat.completions.create(model="openai/gpt-5", messages=user(text), stream=True)
    out = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert out == S.expected_reply("openai", text)


def test_raw_response_headers(openai_client):
    raw = openai_client.chat.completions.with_raw_response.create(
        model="openai/gpt-5", messages=user("hi"), extra_headers={"x-request-id": "sdk-req-1"}
    )
    assert raw.headers["x-request-id"] == "sdk-req-1"
    assert raw.parse().choices[0].message.content == S.expected_reply("openai", "hi")


# ------------------------------------------------------------------ tools


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_tool_call(openai_client, protocol):
    r = openai_client.chat.completions.create(
        model=S.MODEL[F, protocol], messages=user("[[tool]] What is the weather in Paris?"),
        tools=TOOLS, tool_choice="auto",
    )
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.type == "function"
    assert call.id
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == TOOL_ARGS


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_tool_call_stream(openai_client, protocol):
    stream = openai_client.chat.completions.create(
        model=S.MODEL[F, protocol], messages=user("[[text+tool]] What is the weather in Paris?"),
        tools=TOOLS, stream=True,
    )
    calls: dict[int, dict] = {}
    text, finish = "", None
    for chunk in stream:
        if not chunk.choices:
            continue
        d = chunk.choices[0].delta
        text += d.content or ""
        for tc in d.tool_calls or []:
            c = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
            c["id"] = c["id"] or tc.id
            if tc.function:
                c["name"] += tc.function.name or ""
                c["arguments"] += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert text, "[[text+tool]] sends text before the call"
    assert finish == "tool_calls"
    assert list(calls) == [0]
    assert calls[0]["id"] and calls[0]["name"] == "get_weather"
    assert json.loads(calls[0]["arguments"]) == TOOL_ARGS


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_tool_definitions_and_results_reach_upstream(openai_client, protocol):
    messages = [
        {"role": "user", "content": "[[echo-request]] What is the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": json.dumps(TOOL_ARGS)}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18°C, ensoleillé"},
    ]
    r = openai_client.chat.completions.create(model=S.MODEL[F, protocol], messages=messages, tools=TOOLS)
    body = S.echoed(r.choices[0].message.content)
    assert S.tool_names(protocol, body) == ["get_weather", "get_time"]
    results = S.tool_results(protocol, body)
    assert len(results) == 1 and "18°C, ensoleillé" in results[0]


# ------------------------------------------------------------------ images, system, JSON


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_image_input(openai_client, protocol):
    content = [
        {"type": "text", "text": "[[echo-request]] What is in this image?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{S.PNG_B64}"}},
    ]
    r = openai_client.chat.completions.create(model=S.MODEL[F, protocol], messages=user(content))
    body = S.echoed(r.choices[0].message.content)
    ((mime, data),) = S.images(protocol, body)
    assert mime == "image/png"
    assert S.decode_b64(data, strict=protocol != "gemini") == S.png_bytes()


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_system_prompt(openai_client, protocol):
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "[[echo-request]] " + PROMPT}]
    r = openai_client.chat.completions.create(model=S.MODEL[F, protocol], messages=messages)
    body = S.echoed(r.choices[0].message.content)
    assert SYSTEM in S.system_text(protocol, body)
    assert S.user_texts(protocol, body) == ["[[echo-request]] " + PROMPT]


@pytest.mark.parametrize("fmt", ["json_object", "json_schema"])
@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_json_output(openai_client, protocol, fmt):
    if fmt == "json_object":
        rf = {"type": "json_object"}
    else:
        rf = {"type": "json_schema", "json_schema": {"name": "answer", "schema": S.ANSWER_SCHEMA, "strict": True}}
    r = openai_client.chat.completions.create(
        model=S.MODEL[F, protocol], messages=user("[[echo-request]] Answer in JSON."), response_format=rf
    )
    body = S.echoed(r.choices[0].message.content)
    assert S.asks_for_json(protocol, body)
    if protocol == "openai":
        assert body["response_format"] == rf


# ------------------------------------------------------------------ errors


def test_400_temperature(openai_client):
    with pytest.raises(openai.BadRequestError) as e:
        openai_client.chat.completions.create(model="openai/gpt-5", messages=user("hi"), temperature=2.5)
    assert e.value.status_code == 400
    assert e.value.type == "invalid_request_error"
    assert "temperature" in e.value.message


def test_400_unsupported_parameter(openai_client):
    with pytest.raises(openai.BadRequestError) as e:
        openai_client.chat.completions.create(model="openai/gpt-5-nano", messages=user("hi"), tools=TOOLS)
    assert "tools" in e.value.message


def test_max_tokens_above_model_limit_lowered_under_adapt_refused_under_strict(openai_client, gateway):
    raw = openai_client.chat.completions.with_raw_response.create(
        model="openai/gpt-5-nano", messages=user("hi"), max_tokens=101
    )
    assert raw.headers["x-switchboard-adjusted"] == "max_tokens=100 (was 101)"
    assert raw.parse().choices[0].message.content
    strict = S.openai_client(gateway.url, key=S.STRICT_KEY)
    with pytest.raises(openai.BadRequestError) as e:
        strict.chat.completions.create(model="openai/gpt-5-nano", messages=user("hi"), max_tokens=101)
    assert "max_tokens" in e.value.message


def test_401_bad_key(gateway):
    client = S.openai_client(gateway.url, key=S.BAD_KEY)
    with pytest.raises(openai.AuthenticationError) as e:
        client.chat.completions.create(model="openai/gpt-5", messages=user("hi"))
    assert e.value.status_code == 401


def test_403_key_not_allowed_this_model(gateway):
    client = S.openai_client(gateway.url, key=S.LIMITED_KEY)
    with pytest.raises(openai.PermissionDeniedError) as e:
        client.chat.completions.create(model="anthropic/claude-sonnet-4.7", messages=user("hi"))
    assert e.value.status_code == 403
    ok = client.chat.completions.create(model="openai/gpt-5", messages=user("hi"))
    assert ok.choices[0].message.content == S.expected_reply("openai", "hi")


@pytest.mark.parametrize("model", ["openai/no-such-model", "no-such-model", "nobody/gpt-5"])
def test_404_unknown_model(openai_client, model):
    with pytest.raises(openai.NotFoundError) as e:
        openai_client.chat.completions.create(model=model, messages=user("hi"))
    assert e.value.status_code == 404


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_429_from_upstream(openai_client, protocol):
    with pytest.raises(openai.RateLimitError) as e:
        openai_client.chat.completions.create(model=S.MODEL[F, protocol], messages=user("[[status:429]] hi"))
    assert e.value.status_code == 429
    assert e.value.response.headers.get("retry-after") == "1"


def test_429_before_stream(openai_client):
    with pytest.raises(openai.RateLimitError):
        stream = openai_client.chat.completions.create(
            model="openai/gpt-5", messages=user("[[status:429]] hi"), stream=True
        )
        list(stream)


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_500_from_upstream(openai_client, protocol):
    with pytest.raises(openai.InternalServerError) as e:
        openai_client.chat.completions.create(model=S.MODEL[F, protocol], messages=user("[[status:500]] hi"))
    assert e.value.status_code == 500


def test_502_upstream_unreachable(openai_client):
    with pytest.raises(openai.InternalServerError) as e:
        openai_client.chat.completions.create(model="down/offline", messages=user("hi"))
    assert e.value.status_code == 502


def test_503_provider_key_missing(openai_client):
    with pytest.raises(openai.InternalServerError) as e:
        openai_client.chat.completions.create(model="nokey/orphan-key", messages=user("hi"))
    assert e.value.status_code == 503
    assert "SB_SDK_UNSET_KEY" in e.value.message


@pytest.mark.parametrize("marker", ["[[cut]]", "[[stream-error]]"])
@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_stream_failure_is_an_error(openai_client, protocol, marker):
    """A stream that fails upstream after it started must raise in the SDK, not end cleanly."""
    received = []
    with pytest.raises(openai.APIError):
        stream = openai_client.chat.completions.create(
            model=S.MODEL[F, protocol], messages=user(f"{marker} hi there, how are you today?"), stream=True
        )
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                received.append(chunk.choices[0].delta.content)
    assert received, "the failure must come after the stream started"


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_one_unreadable_frame_is_skipped(openai_client, protocol):
    """One upstream frame that is not JSON is skipped: the SDK sees a whole, clean stream."""
    prompt = "[[malformed]] hi there, how are you today?"
    stream = openai_client.chat.completions.create(
        model=S.MODEL[F, protocol], messages=user(prompt), stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == S.expected_reply(protocol, prompt)


def test_a_cut_stream_is_continued(openai_client):
    """A stream the upstream cuts mid-answer is continued with a prefill: the SDK
    reads one whole answer and a clean end (docs/resilience.md)."""
    prompt = "[[cut]] hi there, how are you today?"
    stream = openai_client.chat.completions.create(
        model="resume/claude-resume", messages=user(prompt), stream=True
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == S.expected_reply("anthropic", prompt)
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    assert len({c.id for c in chunks}) == 1
