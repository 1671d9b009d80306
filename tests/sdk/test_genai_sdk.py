"""The official Google GenAI Python SDK (google-genai) against Switchboard's
family C (`/google/v1beta`)."""

from __future__ import annotations

import pytest
from google.genai import errors, types

import support as S
from support import PROMPT, SYSTEM, TOOL_ARGS

F = "gemini"

TOOLS = [types.Tool(function_declarations=[
    types.FunctionDeclaration(name="get_weather", description="Current weather in a city",
                              parameters_json_schema=S.WEATHER_SCHEMA),
    types.FunctionDeclaration(name="get_time", description="Current time in a time zone",
                              parameters_json_schema=S.TIME_SCHEMA),
])]
NO_AFC = types.AutomaticFunctionCallingConfig(disable=True)


def model_of(protocol: str) -> str:
    return S.MODEL[F, protocol]


# ------------------------------------------------------------------ listing


def test_models_list(genai_client):
    models = list(genai_client.models.list())
    names = [m.name for m in models]
    # Family C lists models whose `protocols` include gemini and whose provider accepts family C.
    assert names == ["models/gemini-3.1-pro", "models/qwen3-max", "models/deepseek-v4-pro", "models/kimi-k2",
                     "models/gpt-5-codex", "models/claude-resume", "models/gemini-embedding-001"]
    m = models[0]
    assert m.display_name == "Test gemini-3.1-pro"
    assert m.version == "1.0"
    # The gateway reports the input budget: context_length minus max_output_tokens.
    assert 0 < m.input_token_limit <= 200000
    assert m.output_token_limit == 8192
    assert m.supported_actions == ["generateContent", "countTokens"]
    assert (m.temperature, m.top_p, m.top_k) == (1.0, 0.95, 40)


@pytest.mark.parametrize("name", ["google/gemini-3.1-pro", "gemini-3.1-pro", "models/gemini-3.1-pro"])
def test_models_get(genai_client, name):
    m = genai_client.models.get(model=name)
    assert m.name == "models/gemini-3.1-pro"
    assert m.output_token_limit == 8192


def test_models_get_unknown(genai_client):
    with pytest.raises(errors.ClientError) as e:
        genai_client.models.get(model="google/no-such-model")
    assert e.value.code == 404


# ------------------------------------------------------------------ generateContent, nine cells


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_generate_content(genai_client, protocol):
    model = model_of(protocol)
    r = genai_client.models.generate_content(model=model, contents=PROMPT)
    assert r.text == S.expected_reply(protocol, PROMPT)
    assert r.model_version == S.client_model_name(F, model)
    c = r.candidates[0]
    assert c.content.role == "model"
    assert c.finish_reason == types.FinishReason.STOP
    u = r.usage_metadata
    assert u.prompt_token_count > 0
    assert u.candidates_token_count > 0
    assert u.total_token_count >= u.prompt_token_count + u.candidates_token_count


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_generate_content_stream(genai_client, protocol):
    model = model_of(protocol)
    chunks = list(genai_client.models.generate_content_stream(model=model, contents=PROMPT))
    assert len(chunks) > 3, "expected the reply in several chunks"
    text = "".join(c.text or "" for c in chunks)
    assert text == S.expected_reply(protocol, PROMPT)
    assert all(c.model_version == S.client_model_name(F, model) for c in chunks)
    finishes = [c.candidates[0].finish_reason for c in chunks if c.candidates and c.candidates[0].finish_reason]
    assert finishes == [types.FinishReason.STOP]
    u = chunks[-1].usage_metadata
    assert u is not None and u.prompt_token_count > 0 and u.candidates_token_count > 0


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_upstream_request(genai_client, mock, protocol):
    model = model_of(protocol)
    for stream in (False, True):
        mock.reset()
        if stream:
            list(genai_client.models.generate_content_stream(model=model, contents="hi"))
        else:
            genai_client.models.generate_content(model=model, contents="hi")
        (rec,) = mock.requests()
        S.check_upstream_request(rec, protocol, model, stream)


def test_chat_session(genai_client):
    """The SDK's multi-turn chat helper sends the history each turn."""
    chat = genai_client.chats.create(model="gemini-3.1-pro")
    first = chat.send_message("Bonjour ✓")
    assert first.text == S.expected_reply("gemini", "Bonjour ✓")
    second = chat.send_message("[[echo-request]] encore")
    body = S.echoed(second.text)
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
    assert body["contents"][1]["parts"][0]["text"] == first.text


def test_non_ascii_byte_split_stream(genai_client):
    text = "[[chunk:1]] " + PROMPT
    chunks = genai_client.models.generate_content_stream(model="gemini-3.1-pro", contents=text)
    assert "".join(c.text or "" for c in chunks) == S.expected_reply("gemini", text)


def test_count_tokens(genai_client):
    r = genai_client.models.count_tokens(model="gemini-3.1-pro", contents=PROMPT)
    assert r.total_tokens > 0


def test_thinking(genai_client):
    r = genai_client.models.generate_content(
        model="gemini-3.1-pro", contents="[[thinking]] think first",
        config=types.GenerateContentConfig(thinking_config=types.ThinkingConfig(include_thoughts=True)),
    )
    parts = r.candidates[0].content.parts
    assert [bool(p.thought) for p in parts] == [True, False]
    assert parts[0].text == "Thinking it over ✓ step by step."
    assert r.text == S.expected_reply("gemini", "[[thinking]] think first")


# ------------------------------------------------------------------ tools


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_function_call(genai_client, protocol):
    r = genai_client.models.generate_content(
        model=model_of(protocol), contents="[[tool]] What is the weather in Paris?",
        config=types.GenerateContentConfig(tools=TOOLS, automatic_function_calling=NO_AFC),
    )
    (call,) = r.function_calls
    assert call.name == "get_weather"
    assert call.args == TOOL_ARGS


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_function_call_stream(genai_client, protocol):
    chunks = list(genai_client.models.generate_content_stream(
        model=model_of(protocol), contents="[[text+tool]] What is the weather in Paris?",
        config=types.GenerateContentConfig(tools=TOOLS, automatic_function_calling=NO_AFC),
    ))
    calls = [fc for c in chunks for fc in (c.function_calls or [])]
    assert [(fc.name, fc.args) for fc in calls] == [("get_weather", TOOL_ARGS)]
    texts = [p.text for c in chunks if c.candidates and c.candidates[0].content
             for p in (c.candidates[0].content.parts or []) if p.text]
    assert texts, "[[text+tool]] sends text before the call"


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_tool_definitions_and_results_reach_upstream(genai_client, protocol):
    contents = [
        types.Content(role="user", parts=[types.Part(text="[[echo-request]] What is the weather in Paris?")]),
        types.Content(role="model", parts=[types.Part(function_call=types.FunctionCall(name="get_weather", args=TOOL_ARGS))]),
        types.Content(role="user", parts=[types.Part.from_function_response(
            name="get_weather", response={"result": "18°C, ensoleillé"})]),
    ]
    r = genai_client.models.generate_content(
        model=model_of(protocol), contents=contents,
        config=types.GenerateContentConfig(tools=TOOLS, automatic_function_calling=NO_AFC),
    )
    body = S.echoed(r.text)
    assert S.tool_names(protocol, body) == ["get_weather", "get_time"]
    results = S.tool_results(protocol, body)
    assert len(results) == 1 and "18°C, ensoleillé" in results[0]
    if protocol != "gemini":
        # The bare result, not the JSON text of Gemini's {"result": …}
        # (docs/protocol-mapping.md, "Tool results across families").
        assert results[0] == '"18°C, ensoleillé"', results[0]


# ------------------------------------------------------------------ images, system, JSON


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_image_input(genai_client, protocol):
    contents = [
        types.Part.from_bytes(data=S.png_bytes(), mime_type="image/png"),
        "[[echo-request]] What is in this image?",
    ]
    r = genai_client.models.generate_content(model=model_of(protocol), contents=contents)
    body = S.echoed(r.text)
    ((mime, data),) = S.images(protocol, body)
    assert mime == "image/png"
    # The SDK sends URL-safe base64; OpenAI and Anthropic upstreams need the standard alphabet.
    assert S.decode_b64(data, strict=protocol != "gemini") == S.png_bytes()


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_system_instruction(genai_client, protocol):
    r = genai_client.models.generate_content(
        model=model_of(protocol), contents="[[echo-request]] " + PROMPT,
        config=types.GenerateContentConfig(system_instruction=SYSTEM),
    )
    body = S.echoed(r.text)
    assert SYSTEM in S.system_text(protocol, body)
    assert S.user_texts(protocol, body) == ["[[echo-request]] " + PROMPT]


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_json_output(genai_client, protocol):
    r = genai_client.models.generate_content(
        model=model_of(protocol), contents="[[echo-request]] Answer in JSON.",
        config=types.GenerateContentConfig(response_mime_type="application/json",
                                           response_json_schema=S.ANSWER_SCHEMA),
    )
    body = S.echoed(r.text)
    assert S.asks_for_json(protocol, body)
    if protocol == "gemini":
        assert body["generationConfig"]["responseJsonSchema"] == S.ANSWER_SCHEMA


# ------------------------------------------------------------------ errors


def expect(e: errors.APIError, code: int, status: str):
    assert e.code == code
    assert e.status == status


def test_400_temperature(genai_client):
    with pytest.raises(errors.ClientError) as e:
        genai_client.models.generate_content(
            model="gemini-3.1-pro", contents="hi", config=types.GenerateContentConfig(temperature=2.5)
        )
    expect(e.value, 400, "INVALID_ARGUMENT")
    assert "temperature" in e.value.message


def test_max_output_tokens_lowered_under_adapt_refused_under_strict(genai_client, gateway):
    r = genai_client.models.generate_content(
        model="gemini-3.1-pro", contents="hi", config=types.GenerateContentConfig(max_output_tokens=10**6)
    )
    assert r.text
    adjusted = r.sdk_http_response.headers["x-switchboard-adjusted"]
    assert adjusted.startswith("generationConfig.maxOutputTokens=") and "(was 1000000)" in adjusted, adjusted
    strict = S.genai_client(gateway.url, key=S.STRICT_KEY)
    with pytest.raises(errors.ClientError) as e:
        strict.models.generate_content(
            model="gemini-3.1-pro", contents="hi", config=types.GenerateContentConfig(max_output_tokens=10**6)
        )
    expect(e.value, 400, "INVALID_ARGUMENT")
    assert "maxOutputTokens" in e.value.message


def test_401_bad_key(gateway):
    client = S.genai_client(gateway.url, key=S.BAD_KEY)
    with pytest.raises(errors.ClientError) as e:
        client.models.generate_content(model="gemini-3.1-pro", contents="hi")
    expect(e.value, 401, "UNAUTHENTICATED")


def test_403_key_not_allowed_this_model(gateway):
    client = S.genai_client(gateway.url, key=S.LIMITED_KEY)
    with pytest.raises(errors.ClientError) as e:
        client.models.generate_content(model="google/gemini-3.1-pro", contents="hi")
    expect(e.value, 403, "PERMISSION_DENIED")


@pytest.mark.parametrize("model", ["google/no-such-model", "no-such-model", "openai/gpt-5", "anthropic/claude-sonnet-4.7"])
def test_404_unknown_model(genai_client, model):
    """The last two exist, but their providers do not accept family C."""
    with pytest.raises(errors.ClientError) as e:
        genai_client.models.generate_content(model=model, contents="hi")
    expect(e.value, 404, "NOT_FOUND")


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_429_from_upstream(genai_client, protocol):
    with pytest.raises(errors.ClientError) as e:
        genai_client.models.generate_content(model=model_of(protocol), contents="[[status:429]] hi")
    expect(e.value, 429, "RESOURCE_EXHAUSTED")
    assert e.value.response.headers.get("retry-after") == "1"


def test_429_before_stream(genai_client):
    with pytest.raises(errors.ClientError) as e:
        list(genai_client.models.generate_content_stream(model="gemini-3.1-pro", contents="[[status:429]] hi"))
    assert e.value.code == 429


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_500_from_upstream(genai_client, protocol):
    with pytest.raises(errors.ServerError) as e:
        genai_client.models.generate_content(model=model_of(protocol), contents="[[status:500]] hi")
    assert e.value.code == 500


@pytest.mark.parametrize("marker", ["[[cut]]", "[[stream-error]]"])
@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_stream_failure_is_an_error(genai_client, protocol, marker):
    """A stream that fails upstream after it started must raise in the SDK, not end cleanly."""
    received = []
    with pytest.raises(errors.APIError):
        for chunk in genai_client.models.generate_content_stream(
            model=model_of(protocol), contents=f"{marker} hi there, how are you today?"
        ):
            if chunk.text:
                received.append(chunk.text)
    assert received, "the failure must come after the stream started"


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_one_unreadable_frame_is_skipped(genai_client, protocol):
    """One upstream frame that is not JSON is skipped: the SDK sees a whole, clean stream."""
    prompt = "[[malformed]] hi there, how are you today?"
    text = "".join(
        chunk.text or ""
        for chunk in genai_client.models.generate_content_stream(model=model_of(protocol), contents=prompt)
    )
    assert text == S.expected_reply(protocol, prompt)


def test_a_cut_stream_is_continued(genai_client):
    """A stream the upstream cuts mid-answer is continued with a prefill: the SDK
    reads the whole answer (docs/resilience.md)."""
    prompt = "[[cut]] hi there, how are you today?"
    chunks = list(genai_client.models.generate_content_stream(model="resume/claude-resume", contents=prompt))
    assert "".join(c.text or "" for c in chunks) == S.expected_reply("anthropic", prompt)
    assert chunks[-1].candidates[0].finish_reason.name == "STOP"
