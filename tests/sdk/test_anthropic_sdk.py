"""The official Anthropic Python SDK against Switchboard's family B (`/anthropic/v1`)."""

from __future__ import annotations

import datetime

import anthropic
import pytest

import support as S
from support import PROMPT, SYSTEM, TOOL_ARGS

F = "anthropic"
# The test catalog's `created` (1767225600), as the SDK parses `created_at`.
CREATED = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)

TOOLS = [
    {"name": "get_weather", "description": "Current weather in a city", "input_schema": S.WEATHER_SCHEMA},
    {"name": "get_time", "description": "Current time in a time zone", "input_schema": S.TIME_SCHEMA},
]


def user(content):
    return [{"role": "user", "content": content}]


def text_of(message) -> str:
    return "".join(b.text for b in message.content if b.type == "text")


# ------------------------------------------------------------------ listing


def test_models_list(anthropic_client):
    """The family B listing carries Anthropic's page fields (`data`, `has_more`,
    `first_id`, `last_id`) beside `models`, so the SDK's
    paginated `models.list()` reads it: one page holding every model."""
    ids = ["models/gpt-5", "models/claude-sonnet-4.7", "models/gemini-3.1-pro", "models/qwen3-max",
           "models/deepseek-v4-pro", "models/kimi-k2", "models/offline", "models/orphan-key",
           "models/gpt-5-codex", "models/claude-resume"]
    page = anthropic_client.models.list()
    assert [m.id for m in page.data] == ids
    assert page.has_more is False
    assert page.first_id == ids[0] and page.last_id == ids[-1]
    assert not page.has_next_page()
    models = list(anthropic_client.models.list())  # auto-pagination stops after the one page
    assert [m.id for m in models] == ids
    for m in models:
        assert isinstance(m, anthropic.types.ModelInfo)
        assert m.type == "model"
        assert m.created_at == CREATED
        assert m.display_name == "Test " + m.id.removeprefix("models/")
    raw = anthropic_client.models.with_raw_response.list()
    assert raw.http_request.url.path == "/anthropic/v1/models"
    assert [m["id"] for m in raw.http_response.json()["models"]] == ids


def test_models_list_by_provider(anthropic_client):
    """E6 has the same page fields; read through the SDK's raw client."""
    page = anthropic_client.get("/v1/models/anthropic", cast_to=object)
    assert [m["id"] for m in page["data"]] == ["models/claude-sonnet-4.7"]
    assert page["data"] == page["models"]
    assert page["has_more"] is False
    assert page["first_id"] == page["last_id"] == "models/claude-sonnet-4.7"


@pytest.mark.parametrize("model_id", ["claude-sonnet-4.7", "models/claude-sonnet-4.7"])
def test_models_retrieve(anthropic_client, model_id):
    """`models.retrieve(id)` calls `GET /anthropic/v1/models/{id}` (a `/` in the
    id is sent as `%2F`); the id a listing returns (`models/...`) works too."""
    m = anthropic_client.models.retrieve(model_id)
    assert m.id == "models/claude-sonnet-4.7"
    assert m.display_name == "Test claude-sonnet-4.7"
    assert m.type == "model"
    assert m.created_at == CREATED
    extra = m.model_extra or {}
    assert extra["context_window_size"] == 200000
    assert extra["supported_features"] == {"vision": True, "tool_use": True, "streaming": True}
    assert extra["supported_actions"] == ["complete"]


def test_models_retrieve_alias(anthropic_client):
    """An alias answers the canonical model, whose object lists its aliases."""
    m = anthropic_client.models.retrieve(S.ALIAS)
    assert m.id == "models/claude-sonnet-4.7"
    assert (m.model_extra or {})["aliases"] == [S.ALIAS]


def test_models_retrieve_qualified_id(anthropic_client):
    m = anthropic_client.models.retrieve("anthropic/claude-sonnet-4.7")
    assert m.id == "models/claude-sonnet-4.7"


def test_models_retrieve_unknown(anthropic_client):
    with pytest.raises(anthropic.NotFoundError):
        anthropic_client.models.retrieve("no-such-model")


# ------------------------------------------------------------------ messages, nine cells


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_messages(anthropic_client, protocol):
    model = S.MODEL[F, protocol]
    m = anthropic_client.messages.create(model=model, max_tokens=1024, messages=user(PROMPT))
    assert m.type == "message"
    assert m.role == "assistant"
    assert m.model == S.client_model_name(F, model)
    assert [b.type for b in m.content] == ["text"]
    assert m.content[0].text == S.expected_reply(protocol, PROMPT)
    assert m.stop_reason == "end_turn"
    assert m.usage.input_tokens > 0
    assert m.usage.output_tokens > 0


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_messages_stream_helper(anthropic_client, protocol):
    model = S.MODEL[F, protocol]
    with anthropic_client.messages.stream(model=model, max_tokens=1024, messages=user(PROMPT)) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == S.expected_reply(protocol, PROMPT)
    assert final.model == S.client_model_name(F, model)
    assert text_of(final) == text
    assert final.stop_reason == "end_turn"
    assert final.usage.input_tokens > 0
    assert final.usage.output_tokens > 0


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_messages_stream_events(anthropic_client, protocol):
    """`stream=True`: the raw event sequence, exactly as Anthropic sends it."""
    model = S.MODEL[F, protocol]
    events = list(anthropic_client.messages.create(model=model, max_tokens=1024, messages=user(PROMPT), stream=True))
    types_ = [e.type for e in events]
    assert types_[0] == "message_start"
    assert types_[1] == "content_block_start"
    assert set(types_[2:-3]) == {"content_block_delta"}
    assert types_[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert events[0].message.model == S.client_model_name(F, model)
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta")
    assert text == S.expected_reply(protocol, PROMPT)
    delta = events[-2]
    assert delta.delta.stop_reason == "end_turn"
    assert delta.usage.output_tokens > 0
    assert events[0].message.usage.input_tokens > 0 or (delta.usage.input_tokens or 0) > 0


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_upstream_request(anthropic_client, mock, protocol):
    model = S.MODEL[F, protocol]
    for stream in (False, True):
        mock.reset()
        r = anthropic_client.messages.create(model=model, max_tokens=256, messages=user("hi"), stream=stream)
        if stream:
            list(r)
        (rec,) = mock.requests()
        S.check_upstream_request(rec, protocol, model, stream)


def test_same_protocol_upstream_preferred(anthropic_client, openai_client, mock):
    """A provider with OpenAI and Anthropic upstreams: each client family gets its own."""
    mock.reset()
    m = anthropic_client.messages.create(model="kimi-k2", max_tokens=64, messages=user("hi"))
    assert m.content[0].text == S.expected_reply("anthropic", "hi")
    r = openai_client.chat.completions.create(model="moonshotai/kimi-k2", messages=user("hi"))
    assert r.choices[0].message.content == S.expected_reply("openai", "hi")
    assert [q["path"] for q in mock.requests()] == ["/anthropic/v1/messages", "/openai/v1/chat/completions"]


def test_non_ascii_byte_split_stream(anthropic_client):
    text = "[[chunk:1]] " + PROMPT
    with anthropic_client.messages.stream(model="claude-sonnet-4.7", max_tokens=256, messages=user(text)) as s:
        out = "".join(s.text_stream)
    assert out == S.expected_reply("anthropic", text)


def test_count_tokens(anthropic_client):
    r = anthropic_client.messages.count_tokens(model="claude-sonnet-4.7", messages=user(PROMPT), system=SYSTEM)
    assert r.input_tokens > 0


def test_thinking(anthropic_client):
    m = anthropic_client.messages.create(
        model="claude-sonnet-4.7", max_tokens=4096, messages=user("[[thinking]] think first"),
        thinking={"type": "enabled", "budget_tokens": 1024},
    )
    assert [b.type for b in m.content] == ["thinking", "text"]
    assert m.content[0].thinking == "Thinking it over ✓ step by step."
    assert m.content[0].signature


# ------------------------------------------------------------------ tools


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_tool_use(anthropic_client, protocol):
    m = anthropic_client.messages.create(
        model=S.MODEL[F, protocol], max_tokens=1024, tools=TOOLS, tool_choice={"type": "auto"},
        messages=user("[[tool]] What is the weather in Paris?"),
    )
    assert m.stop_reason == "tool_use"
    (call,) = [b for b in m.content if b.type == "tool_use"]
    assert call.id
    assert call.name == "get_weather"
    assert call.input == TOOL_ARGS


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_tool_use_stream(anthropic_client, protocol):
    with anthropic_client.messages.stream(
        model=S.MODEL[F, protocol], max_tokens=1024, tools=TOOLS,
        messages=user("[[text+tool]] What is the weather in Paris?"),
    ) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["text", "tool_use"]
    assert final.content[0].text
    assert final.content[1].name == "get_weather"
    assert final.content[1].input == TOOL_ARGS
    assert final.stop_reason == "tool_use"


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_tool_definitions_and_results_reach_upstream(anthropic_client, protocol):
    messages = [
        {"role": "user", "content": "[[echo-request]] What is the weather in Paris?"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": TOOL_ARGS}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01", "content": "18°C, ensoleillé"}]},
    ]
    m = anthropic_client.messages.create(model=S.MODEL[F, protocol], max_tokens=1024, tools=TOOLS, messages=messages)
    body = S.echoed(text_of(m))
    assert S.tool_names(protocol, body) == ["get_weather", "get_time"]
    results = S.tool_results(protocol, body)
    assert len(results) == 1 and "18°C, ensoleillé" in results[0]


# ------------------------------------------------------------------ images, system, JSON


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_image_input(anthropic_client, protocol):
    content = [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": S.PNG_B64}},
        {"type": "text", "text": "[[echo-request]] What is in this image?"},
    ]
    m = anthropic_client.messages.create(model=S.MODEL[F, protocol], max_tokens=1024, messages=user(content))
    body = S.echoed(text_of(m))
    ((mime, data),) = S.images(protocol, body)
    assert mime == "image/png"
    assert S.decode_b64(data, strict=protocol != "gemini") == S.png_bytes()


@pytest.mark.parametrize("system", ["string", "blocks"])
@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_system_prompt(anthropic_client, protocol, system):
    sys_param = SYSTEM if system == "string" else [{"type": "text", "text": SYSTEM}]
    m = anthropic_client.messages.create(
        model=S.MODEL[F, protocol], max_tokens=1024, system=sys_param, messages=user("[[echo-request]] " + PROMPT)
    )
    body = S.echoed(text_of(m))
    assert SYSTEM in S.system_text(protocol, body)
    assert S.user_texts(protocol, body) == ["[[echo-request]] " + PROMPT]


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_json_output(anthropic_client, protocol):
    """Anthropic's structured output: `output_config.format` with a JSON schema."""
    m = anthropic_client.messages.create(
        model=S.MODEL[F, protocol], max_tokens=1024, messages=user("[[echo-request]] Answer in JSON."),
        output_config={"format": {"type": "json_schema", "schema": S.ANSWER_SCHEMA}},
    )
    body = S.echoed(text_of(m))
    assert S.asks_for_json(protocol, body)
    if protocol == "anthropic":
        assert body["output_config"] == {"format": {"type": "json_schema", "schema": S.ANSWER_SCHEMA}}


# ------------------------------------------------------------------ errors


def expect_error_type(e, status: int, kind: str):
    assert e.status_code == status
    assert e.body["type"] == "error"
    assert e.body["error"]["type"] == kind


def test_400_temperature(anthropic_client):
    with pytest.raises(anthropic.BadRequestError) as e:
        # This SDK version has no `temperature` argument any more; the API still takes it.
        anthropic_client.messages.create(
            model="claude-sonnet-4.7", max_tokens=64, messages=user("hi"), extra_body={"temperature": 1.5}
        )
    expect_error_type(e.value, 400, "invalid_request_error")
    assert "temperature" in e.value.body["error"]["message"]


def test_max_tokens_above_model_limit_lowered_under_adapt_refused_under_strict(anthropic_client, gateway):
    raw = anthropic_client.messages.with_raw_response.create(
        model="claude-sonnet-4.7", max_tokens=10**6, messages=user("hi")
    )
    assert raw.headers["x-switchboard-adjusted"].startswith("max_tokens=")
    assert "(was 1000000)" in raw.headers["x-switchboard-adjusted"]
    assert raw.parse().content[0].text
    strict = S.anthropic_client(gateway.url, key=S.STRICT_KEY)
    with pytest.raises(anthropic.BadRequestError) as e:
        strict.messages.create(model="claude-sonnet-4.7", max_tokens=10**6, messages=user("hi"))
    assert "max_tokens" in e.value.body["error"]["message"]


def test_401_bad_key(gateway):
    client = S.anthropic_client(gateway.url, key=S.BAD_KEY)
    with pytest.raises(anthropic.AuthenticationError) as e:
        client.messages.create(model="claude-sonnet-4.7", max_tokens=64, messages=user("hi"))
    expect_error_type(e.value, 401, "authentication_error")


def test_403_key_not_allowed_this_model(gateway):
    client = S.anthropic_client(gateway.url, key=S.LIMITED_KEY)
    with pytest.raises(anthropic.PermissionDeniedError) as e:
        client.messages.create(model="claude-sonnet-4.7", max_tokens=64, messages=user("hi"))
    expect_error_type(e.value, 403, "permission_error")


@pytest.mark.parametrize("model", ["no-such-model", "anthropic/no-such-model", "gpt-5-nano"])
def test_404_unknown_model(anthropic_client, model):
    """`gpt-5-nano` exists but its `protocols` leave out anthropic."""
    with pytest.raises(anthropic.NotFoundError) as e:
        anthropic_client.messages.create(model=model, max_tokens=64, messages=user("hi"))
    expect_error_type(e.value, 404, "not_found_error")


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_429_from_upstream(anthropic_client, protocol):
    with pytest.raises(anthropic.RateLimitError) as e:
        anthropic_client.messages.create(model=S.MODEL[F, protocol], max_tokens=64, messages=user("[[status:429]] hi"))
    expect_error_type(e.value, 429, "rate_limit_error")
    assert e.value.response.headers.get("retry-after") == "1"


def test_429_before_stream(anthropic_client):
    with pytest.raises(anthropic.RateLimitError):
        with anthropic_client.messages.stream(
            model="claude-sonnet-4.7", max_tokens=64, messages=user("[[status:429]] hi")
        ) as s:
            s.get_final_message()


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_500_from_upstream(anthropic_client, protocol):
    with pytest.raises(anthropic.InternalServerError) as e:
        anthropic_client.messages.create(model=S.MODEL[F, protocol], max_tokens=64, messages=user("[[status:500]] hi"))
    expect_error_type(e.value, 500, "api_error")


@pytest.mark.parametrize("marker", ["[[cut]]", "[[stream-error]]"])
@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_stream_failure_is_an_error(anthropic_client, protocol, marker):
    """A stream that fails upstream after it started must raise in the SDK, not end cleanly."""
    received = []
    with pytest.raises(anthropic.APIError):
        with anthropic_client.messages.stream(
            model=S.MODEL[F, protocol], max_tokens=256, messages=user(f"{marker} hi there, how are you today?")
        ) as s:
            for text in s.text_stream:
                received.append(text)
    assert received, "the failure must come after the stream started"


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_one_unreadable_frame_is_skipped(anthropic_client, protocol):
    """One upstream frame that is not JSON is skipped: the SDK sees a whole, clean stream."""
    prompt = "[[malformed]] hi there, how are you today?"
    with anthropic_client.messages.stream(
        model=S.MODEL[F, protocol], max_tokens=256, messages=user(prompt)
    ) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == S.expected_reply(protocol, prompt)
    assert final.stop_reason == "end_turn"


def test_a_cut_stream_is_continued(anthropic_client):
    """A stream the upstream cuts mid-answer is continued with a prefill: the SDK
    reads one whole message (docs/resilience.md)."""
    prompt = "[[cut]] hi there, how are you today?"
    with anthropic_client.messages.stream(
        model="claude-resume", max_tokens=256, messages=user(prompt)
    ) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == S.expected_reply("anthropic", prompt)
    assert final.stop_reason == "end_turn"
    assert [b.type for b in final.content] == ["text"]
    assert final.content[0].text == text
