"""The official OpenAI Python SDK's Responses API against Switchboard's family D
(`POST /v1/responses`, `POST /v1/responses/input_tokens`), over every upstream
protocol: the three translated ones and a `responses` upstream (passed through).

Written to the OpenAI API's own behaviour (docs/api.md "The Responses API (family D)"): `response` objects
with `resp_` ids, typed stream events numbered by `sequence_number` from 0,
`function_call` items and `function_call_output` inputs, `reasoning` items
whose `encrypted_content` carries the upstream's reasoning back, an `error`
event then `response.failed` when the upstream fails mid-stream."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import openai
import pytest

import support as S
from support import PROMPT, SYSTEM, TOOL_ARGS

pytestmark = pytest.mark.family_d

F = "responses"

TOOLS = [
    {"type": "function", "name": "get_weather", "description": "Current weather in a city",
     "parameters": S.WEATHER_SCHEMA},
    {"type": "function", "name": "get_time", "description": "Current time in a time zone",
     "parameters": S.TIME_SCHEMA},
]
TOOL_RESULT = "18°C, ensoleillé"
# Drives the mock's tool loop: a call to get_weather with TOOL_ARGS, then, once
# the conversation's last turn carries the result, text quoting it.
AGENT_PROMPT = '[[agent-tool:get_weather:{"location":"Paris","unit":"c"}]] What is the weather in Paris?'


def model_of(protocol: str) -> str:
    return S.MODEL[F, protocol]


def seqs(events) -> list[int]:
    return [e.sequence_number for e in events]


def raw_post(gw_url: str, path: str, body: dict) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(
        gw_url + path, data=json.dumps(body).encode(), method="POST",
        headers={"authorization": f"Bearer {S.KEY}", "content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def sse_frames(raw: bytes) -> list[tuple[str | None, str]]:
    """(event name, data) of every SSE frame; comments skipped."""
    frames = []
    for block in raw.decode().replace("\r\n", "\n").split("\n\n"):
        event, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            frames.append((event, "\n".join(data)))
    return frames


# ------------------------------------------------------------------ create, stream


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_create(openai_client, protocol):
    model = model_of(protocol)
    r = openai_client.responses.create(model=model, input=PROMPT)
    expected = S.expected_reply(protocol, PROMPT)
    assert r.object == "response"
    assert r.id.startswith("resp_")
    assert r.status == "completed"
    assert r.error is None and r.incomplete_details is None
    assert r.model == S.client_model_name(F, model)
    assert r.output_text == expected
    (message,) = r.output
    assert message.type == "message" and message.role == "assistant" and message.status == "completed"
    assert message.id
    assert [c.type for c in message.content] == ["output_text"]
    assert message.content[0].text == expected
    u = r.usage
    assert u.input_tokens > 0
    assert u.output_tokens == S.mock_deltas(expected)
    assert u.total_tokens == u.input_tokens + u.output_tokens
    assert u.input_tokens_details.cached_tokens == 0
    assert u.output_tokens_details.reasoning_tokens == 0


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_create_with_message_items_and_instructions(openai_client, protocol):
    """`input` as a list of items, `instructions` as the system prompt: both reach the upstream."""
    r = openai_client.responses.create(
        model=model_of(protocol), instructions=SYSTEM,
        input=[
            {"role": "user", "content": "an earlier question"},
            {"role": "assistant", "content": "an earlier answer"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "[[echo-request]] " + PROMPT}]},
        ],
    )
    body = S.echoed(r.output_text)
    assert SYSTEM in S.system_text(protocol, body)
    assert S.user_texts(protocol, body) == ["an earlier question", "[[echo-request]] " + PROMPT]


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_cached_tokens(openai_client, protocol):
    """Prompt tokens read from the upstream's cache (`[[cached:N]]`) are `input_tokens_details.cached_tokens`,
    counted inside `input_tokens` as OpenAI does."""
    r = openai_client.responses.create(model=model_of(protocol), input="[[cached:3]] " + PROMPT)
    assert r.usage.input_tokens_details.cached_tokens == 3
    assert r.usage.input_tokens > 3


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_stream(openai_client, protocol):
    model = model_of(protocol)
    expected = S.expected_reply(protocol, PROMPT)
    with openai_client.responses.stream(model=model, input=PROMPT) as stream:
        events = list(stream)
        final = stream.get_final_response()
    types_ = [e.type for e in events]
    assert types_[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                          "response.content_part.added"]
    n = types_.count("response.output_text.delta")
    assert n > 3, "expected the reply in several deltas"
    assert types_[4:4 + n] == ["response.output_text.delta"] * n
    assert types_[4 + n:] == ["response.output_text.done", "response.content_part.done",
                              "response.output_item.done", "response.completed"]
    assert seqs(events) == list(range(len(events)))
    created = events[0].response
    assert created.status == "in_progress" and created.id.startswith("resp_")
    assert created.model == S.client_model_name(F, model)
    item = events[2].item
    assert item.type == "message" and item.role == "assistant"
    deltas = [e for e in events if e.type == "response.output_text.delta"]
    assert {(e.item_id, e.output_index, e.content_index) for e in deltas} == {(item.id, 0, 0)}
    assert "".join(e.delta for e in deltas) == expected
    assert events[4 + n].text == expected
    assert events[5 + n].part.text == expected
    assert events[6 + n].item.status == "completed"
    assert final.id == created.id
    assert final.status == "completed"
    assert final.model == S.client_model_name(F, model)
    assert final.output_text == expected
    assert final.usage.input_tokens > 0
    assert final.usage.output_tokens == S.mock_deltas(expected)


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_stream_wire_format(gateway, protocol):
    """The raw event stream: `event:` names the data's `type`, every event has a
    `sequence_number`, and there is no chat-completions `[DONE]`."""
    status, headers, raw = raw_post(gateway.url, "/v1/responses",
                                    {"model": model_of(protocol), "input": "hi", "stream": True})
    assert status == 200, raw[:500]
    assert headers["content-type"].startswith("text/event-stream")
    frames = sse_frames(raw)
    assert frames
    for i, (event, data) in enumerate(frames):
        assert data != "[DONE]"
        d = json.loads(data)
        assert event == d["type"], (event, data)
        assert d["sequence_number"] == i
    assert json.loads(frames[-1][1])["type"] == "response.completed"


def test_non_ascii_byte_split_stream(openai_client):
    """One-byte TCP writes upstream split every multi-byte character."""
    text = "[[chunk:1]] " + PROMPT
    with openai_client.responses.stream(model="anthropic/claude-sonnet-4.7", input=text) as stream:
        out = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
    assert out == S.expected_reply("anthropic", text)


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_upstream_request(openai_client, mock, protocol):
    """What reached the provider: its endpoint, its key (not the client's), its model name."""
    model = model_of(protocol)
    for stream in (False, True):
        mock.reset()
        if stream:
            with openai_client.responses.stream(model=model, input="hi") as s:
                s.until_done()
        else:
            openai_client.responses.create(model=model, input="hi")
        (rec,) = mock.requests()
        S.check_upstream_request(rec, protocol, model, stream)


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_max_output_tokens_reached_is_incomplete(openai_client, protocol):
    """An answer cut by its token limit (`[[max-tokens]]`: the upstream's own
    stop reason for it): `status: incomplete`, reason `max_output_tokens`."""
    r = openai_client.responses.create(model=model_of(protocol), input="[[max-tokens]] hi", max_output_tokens=64)
    assert r.status == "incomplete"
    assert r.incomplete_details.reason == "max_output_tokens"
    assert r.output_text == S.expected_reply(protocol, "[[max-tokens]] hi")
    with openai_client.responses.stream(model=model_of(protocol), input="[[max-tokens]] hi") as stream:
        events = list(stream)
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.status == "incomplete"
    assert events[-1].response.incomplete_details.reason == "max_output_tokens"


# ------------------------------------------------------------------ tools


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_function_call_round_trip(openai_client, mock, protocol):
    """The function-calling guide's loop: a `function_call` item, its output sent
    back as a `function_call_output` item, then the answer using it."""
    model = model_of(protocol)
    conversation = [{"role": "user", "content": AGENT_PROMPT}]
    first = openai_client.responses.create(model=model, input=conversation, tools=TOOLS)
    assert first.status == "completed"
    (call,) = [o for o in first.output if o.type == "function_call"]
    assert call.name == "get_weather"
    assert call.call_id
    assert json.loads(call.arguments) == TOOL_ARGS
    assert first.output_text == ""

    conversation += first.output
    conversation.append({"type": "function_call_output", "call_id": call.call_id, "output": TOOL_RESULT})
    mock.reset()
    second = openai_client.responses.create(model=model, input=conversation, tools=TOOLS)
    assert second.status == "completed"
    assert [o.type for o in second.output] == ["message"]
    assert second.output_text.startswith(f"Hello from {protocol} mock: tool result: ")
    assert TOOL_RESULT in second.output_text
    (rec,) = mock.requests()
    body = json.loads(rec["body"])
    assert S.tool_names(protocol, body) == ["get_weather", "get_time"]
    (result,) = S.tool_results(protocol, body)
    assert TOOL_RESULT in result


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_function_call_stream(openai_client, protocol):
    with openai_client.responses.stream(
        model=model_of(protocol), input="[[text+tool]] What is the weather in Paris?", tools=TOOLS,
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert seqs(events) == list(range(len(events)))
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [e.item.type for e in added] == ["message", "function_call"]
    assert [e.output_index for e in added] == [0, 1]
    call = added[1].item
    assert call.name == "get_weather" and call.call_id and call.arguments == ""
    deltas = [e for e in events if e.type == "response.function_call_arguments.delta"]
    assert deltas and {(e.item_id, e.output_index) for e in deltas} == {(call.id, 1)}
    assert json.loads("".join(e.delta for e in deltas)) == TOOL_ARGS
    (done,) = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert json.loads(done.arguments) == TOOL_ARGS
    assert done.item_id == call.id
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text, "[[text+tool]] sends text before the call"
    (final_call,) = [o for o in final.output if o.type == "function_call"]
    assert (final_call.call_id, final_call.name) == (call.call_id, "get_weather")
    assert json.loads(final_call.arguments) == TOOL_ARGS
    assert final.status == "completed"


# ------------------------------------------------------------------ images, JSON


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_image_input(openai_client, protocol):
    r = openai_client.responses.create(model=model_of(protocol), input=[{"role": "user", "content": [
        {"type": "input_text", "text": "[[echo-request]] What is in this image?"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{S.PNG_B64}", "detail": "auto"},
    ]}])
    body = S.echoed(r.output_text)
    ((mime, data),) = S.images(protocol, body)
    assert mime == "image/png"
    assert S.decode_b64(data, strict=protocol != "gemini") == S.png_bytes()


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_json_output(openai_client, protocol):
    fmt = {"type": "json_schema", "name": "answer", "schema": S.ANSWER_SCHEMA, "strict": True}
    r = openai_client.responses.create(
        model=model_of(protocol), input="[[echo-request]] Answer in JSON.", text={"format": fmt},
    )
    body = S.echoed(r.output_text)
    assert S.asks_for_json(protocol, body)
    if protocol == "responses":
        assert body["text"]["format"] == fmt


# ------------------------------------------------------------------ input_tokens


def test_input_tokens_count(openai_client, mock):
    """`POST /v1/responses/input_tokens`, answered by the gateway itself."""
    mock.reset()
    short = openai_client.responses.input_tokens.count(model="openai/gpt-5", input="hi")
    assert short.object == "response.input_tokens"
    assert short.input_tokens > 0
    long = openai_client.responses.input_tokens.count(
        model="anthropic/claude-sonnet-4.7", instructions=SYSTEM, tools=TOOLS,
        input=[{"role": "user", "content": PROMPT * 20}],
    )
    assert long.input_tokens > short.input_tokens
    assert mock.requests() == []


# ------------------------------------------------------------------ reasoning


@pytest.mark.parametrize("protocol", ["anthropic", "responses"])
def test_reasoning_round_trip(openai_client, mock, protocol):
    """The upstream's reasoning comes back as a `reasoning` item with
    `encrypted_content`; sent back in the next turn's input (as the reasoning
    guide says to, with `store: false`), it reaches the upstream as what that
    upstream signed: an Anthropic thinking block with the same signature, or
    the Responses item with the same encrypted content."""
    model = model_of(protocol)
    first = openai_client.responses.create(
        model=model, input="[[thinking]] think first", store=False,
        reasoning={"effort": "medium", "summary": "auto"}, include=["reasoning.encrypted_content"],
    )
    assert [o.type for o in first.output] == ["reasoning", "message"]
    reasoning = first.output[0]
    assert reasoning.id and reasoning.encrypted_content
    shown = [s.text for s in reasoning.summary] + [c.text for c in reasoning.content or []]
    assert S.THINKING_TEXT in shown
    assert first.output_text == S.expected_reply(protocol, "[[thinking]] think first")

    mock.reset()
    conversation = [{"role": "user", "content": "[[thinking]] think first"}, *first.output,
                    {"role": "user", "content": "and then?"}]
    second = openai_client.responses.create(model=model, input=conversation, store=False,
                                            include=["reasoning.encrypted_content"])
    assert second.output_text == S.expected_reply(protocol, "and then?")
    (rec,) = mock.requests()
    body = json.loads(rec["body"])
    if protocol == "anthropic":
        (assistant,) = [m for m in body["messages"] if m["role"] == "assistant"]
        blocks = assistant["content"]
        assert blocks[0] == {"type": "thinking", "thinking": S.THINKING_TEXT, "signature": S.THINKING_SIGNATURE}
        assert blocks[1]["type"] == "text"
    else:
        (item,) = [i for i in body["input"] if i.get("type") == "reasoning"]
        assert item["encrypted_content"] == S.REASONING_ENCRYPTED_CONTENT


@pytest.mark.parametrize("protocol", ["anthropic", "gemini", "responses"])
def test_reasoning_stream(openai_client, protocol):
    """Streamed reasoning: a `reasoning` output item before the message, its
    text in summary (or reasoning-text) deltas, the finished item with
    `encrypted_content` where the upstream signs its reasoning."""
    with openai_client.responses.stream(
        model=model_of(protocol), input="[[thinking]] think first",
        reasoning={"effort": "medium", "summary": "auto"}, include=["reasoning.encrypted_content"],
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert seqs(events) == list(range(len(events)))
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [e.item.type for e in added] == ["reasoning", "message"]
    thought = "".join(e.delta for e in events
                      if e.type in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"))
    assert thought == S.THINKING_TEXT
    (done,) = [e for e in events if e.type == "response.output_item.done" and e.item.type == "reasoning"]
    assert done.item.id == added[0].item.id
    if protocol != "gemini":
        assert done.item.encrypted_content
        assert final.output[0].encrypted_content == done.item.encrypted_content
    assert final.output_text == S.expected_reply(protocol, "[[thinking]] think first")
    if protocol != "anthropic":  # Anthropic's usage does not count thinking apart
        thoughts = S.mock_deltas(S.THINKING_TEXT)
        assert final.usage.output_tokens_details.reasoning_tokens == thoughts
        assert final.usage.output_tokens == thoughts + S.mock_deltas(final.output_text)


# ------------------------------------------------------------------ stored responses (docs/api.md "Stored responses")
#
# A response is stored unless `store: false`, owned by the key that made it:
# `previous_response_id` continues it on any upstream (the upstream receives
# the earlier turns, never the id), `retrieve`, `input_items.list` and
# `delete` read, list and delete it. OpenAI's wording for an id it does not
# hold: 400 `Previous response with id '…' not found.` on create, 404 on read.


def upstream_text(rec: dict) -> str:
    """A recorded upstream request's body as text, JSON escapes undone."""
    return json.dumps(json.loads(rec["body"]), ensure_ascii=False)


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_previous_response_id_continues_the_conversation(openai_client, mock, protocol):
    model = model_of(protocol)
    first = openai_client.responses.create(model=model, instructions="Sois bref.", input="Le mot est « pélican » ✓")
    assert first.status == "completed"
    assert first.store is True
    assert first.instructions == "Sois bref."
    mock.reset()
    second = openai_client.responses.create(model=model, input="Quel était le mot ?", previous_response_id=first.id)
    assert second.status == "completed"
    assert second.id != first.id
    assert second.previous_response_id == first.id
    assert second.instructions is None  # not inherited, as OpenAI does
    (rec,) = mock.requests()
    sent = upstream_text(rec)
    assert "« pélican »" in sent, sent
    assert first.output_text in sent, sent  # the earlier answer is part of the conversation
    assert "Quel était le mot ?" in sent
    assert "Sois bref." not in sent
    assert first.id not in sent and "previous_response_id" not in sent
    # A third turn reaches back through both.
    mock.reset()
    third = openai_client.responses.create(model=model, input="Et après ?", previous_response_id=second.id)
    assert third.previous_response_id == second.id
    (rec,) = mock.requests()
    sent = upstream_text(rec)
    for text in ("« pélican »", first.output_text, "Quel était le mot ?", second.output_text, "Et après ?"):
        assert text in sent, (text, sent)


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_streamed_responses_are_stored_and_continued(openai_client, mock, protocol):
    model = model_of(protocol)
    events = list(openai_client.responses.create(model=model, input="Retiens : kiwi 🥝", stream=True))
    assert events[-1].type == "response.completed"
    final = events[-1].response
    assert events[0].response.id == final.id
    assert final.store is True
    got = openai_client.responses.retrieve(final.id)
    assert got.model_dump() == final.model_dump()
    mock.reset()
    with openai_client.responses.stream(model=model, input="Quel fruit ?", previous_response_id=final.id) as stream:
        second = stream.get_final_response()
    assert second.previous_response_id == final.id
    (rec,) = mock.requests()
    sent = upstream_text(rec)
    assert "kiwi 🥝" in sent and final.output_text in sent and "Quel fruit ?" in sent, sent
    assert openai_client.responses.retrieve(second.id).output_text == second.output_text


def test_retrieve_list_input_items_and_delete(openai_client):
    created = openai_client.responses.create(
        model=model_of("anthropic"),
        instructions="Sois bref.",
        input=[
            {"role": "user", "content": "un"},
            {"role": "assistant", "content": "deux"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "trois"}]},
        ],
    )
    got = openai_client.responses.retrieve(created.id)
    assert got.id == created.id
    assert got.output_text == created.output_text
    assert got.instructions == "Sois bref."
    assert got.model_dump() == created.model_dump()

    def texts(items) -> list[str]:
        return [i.content[0].text for i in items]

    page = openai_client.responses.input_items.list(created.id)
    assert texts(page.data) == ["trois", "deux", "un"]  # newest first by default, as OpenAI
    assert all(i.type == "message" and i.id for i in page.data)
    assert page.first_id == page.data[0].id and page.last_id == page.data[-1].id
    assert page.has_more is False
    page = openai_client.responses.input_items.list(created.id, order="asc", limit=2)
    assert texts(page.data) == ["un", "deux"]
    assert page.has_more is True
    # The SDK's auto-pagination follows `after` through every page.
    assert texts(openai_client.responses.input_items.list(created.id, order="asc", limit=1)) == ["un", "deux", "trois"]

    assert openai_client.responses.delete(created.id) is None
    with pytest.raises(openai.NotFoundError) as e:
        openai_client.responses.retrieve(created.id)
    assert f"Response with id '{created.id}' not found." in e.value.message
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.input_items.list(created.id)
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.delete(created.id)


def test_delete_answers_openais_shape(gateway, openai_client):
    created = openai_client.responses.create(model=model_of("gemini"), input="éphémère")
    req = urllib.request.Request(
        gateway.url + f"/v1/responses/{created.id}", method="DELETE",
        headers={"authorization": f"Bearer {S.KEY}"},
    )
    with urllib.request.urlopen(req, timeout=20) as r:
        assert r.status == 200
        assert json.loads(r.read()) == {"id": created.id, "object": "response", "deleted": True}


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_store_false_is_not_kept(openai_client, mock, protocol):
    model = model_of(protocol)
    r = openai_client.responses.create(model=model, input="Oublie-moi", store=False)
    assert r.status == "completed"
    assert r.store is False
    with pytest.raises(openai.NotFoundError):
        openai_client.responses.retrieve(r.id)
    mock.reset()
    with pytest.raises(openai.BadRequestError) as e:
        openai_client.responses.create(model=model, input="encore", previous_response_id=r.id)
    assert e.value.status_code == 400
    assert e.value.type == "invalid_request_error"
    assert e.value.param == "previous_response_id"
    assert f"Previous response with id '{r.id}' not found." in e.value.message
    assert mock.requests() == []


def test_a_key_sees_only_its_own_responses(gateway, openai_client):
    created = openai_client.responses.create(model="openai/gpt-5", input="à moi")
    other = S.openai_client(gateway.url, key=S.LIMITED_KEY)  # may call openai/* too
    with pytest.raises(openai.NotFoundError):
        other.responses.retrieve(created.id)
    with pytest.raises(openai.NotFoundError):
        other.responses.input_items.list(created.id)
    with pytest.raises(openai.NotFoundError):
        other.responses.delete(created.id)
    with pytest.raises(openai.BadRequestError) as e:
        other.responses.create(model="openai/gpt-5", input="à toi ?", previous_response_id=created.id)
    assert e.value.param == "previous_response_id"
    assert openai_client.responses.retrieve(created.id).id == created.id


def test_previous_response_id_unknown_is_400(openai_client, mock):
    """OpenAI's answer for an id it does not hold."""
    mock.reset()
    with pytest.raises(openai.BadRequestError) as e:
        openai_client.responses.create(model="openai/gpt-5", input="hi", previous_response_id="resp_no_such_response")
    assert e.value.status_code == 400
    assert e.value.type == "invalid_request_error"
    assert e.value.param == "previous_response_id"
    assert e.value.code == "previous_response_not_found"
    assert "Previous response with id 'resp_no_such_response' not found." in e.value.message
    assert mock.requests() == []


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_builtin_tool(openai_client, gateway, mock, protocol):
    """Built-in tools (web search, ...) run only on a Responses upstream, which
    gets them as sent. Another upstream cannot take them: a strict key gets a
    400 that names the tool and says why; under `adapt` (docs/api.md "Adapt or refuse") they are
    cut, reported in `x-switchboard-adjusted`, and never reach the upstream
    (Codex CLI declares `web_search` on every request, whatever the model)."""
    tools = [{"type": "web_search"}, *TOOLS]
    if protocol == "responses":
        r = openai_client.responses.create(model=model_of(protocol), input="[[echo-request]] hi", tools=tools)
        body = S.echoed(r.output_text)
        assert body["tools"][0] == {"type": "web_search"}
        return
    strict = S.openai_client(gateway.url, key=S.STRICT_KEY)
    mock.reset()
    with pytest.raises(openai.BadRequestError) as e:
        strict.responses.create(model=model_of(protocol), input="hi", tools=tools)
    assert e.value.status_code == 400
    assert e.value.type == "invalid_request_error"
    assert "web_search" in e.value.message
    assert mock.requests() == []
    raw = openai_client.responses.with_raw_response.create(
        model=model_of(protocol), input="[[echo-request]] hi", tools=tools)
    assert "web_search" in raw.headers["x-switchboard-adjusted"]
    body = S.echoed(raw.parse().output_text)
    assert S.tool_names(protocol, body) == ["get_weather", "get_time"]
    assert "web_search" not in json.dumps(body["tools"])


def test_400_temperature(openai_client):
    with pytest.raises(openai.BadRequestError) as e:
        openai_client.responses.create(model="openai/gpt-5", input="hi", temperature=2.5)
    assert e.value.status_code == 400
    assert "temperature" in e.value.message


def test_401_bad_key(gateway):
    client = S.openai_client(gateway.url, key=S.BAD_KEY)
    with pytest.raises(openai.AuthenticationError) as e:
        client.responses.create(model="openai/gpt-5", input="hi")
    assert e.value.status_code == 401


def test_403_key_not_allowed_this_model(gateway):
    client = S.openai_client(gateway.url, key=S.LIMITED_KEY)
    with pytest.raises(openai.PermissionDeniedError):
        client.responses.create(model="anthropic/claude-sonnet-4.7", input="hi")
    ok = client.responses.create(model="openai/gpt-5", input="hi")
    assert ok.output_text == S.expected_reply("openai", "hi")


@pytest.mark.parametrize("model", ["openai/no-such-model", "no-such-model", "nobody/gpt-5"])
def test_404_unknown_model(openai_client, model):
    with pytest.raises(openai.NotFoundError) as e:
        openai_client.responses.create(model=model, input="hi")
    assert e.value.status_code == 404


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_429_from_upstream(openai_client, protocol):
    with pytest.raises(openai.RateLimitError) as e:
        openai_client.responses.create(model=model_of(protocol), input="[[status:429]] hi")
    assert e.value.status_code == 429
    assert e.value.response.headers.get("retry-after") == "1"


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_500_from_upstream(openai_client, protocol):
    with pytest.raises(openai.InternalServerError) as e:
        with openai_client.responses.stream(model=model_of(protocol), input="[[status:500]] hi") as s:
            s.until_done()
    assert e.value.status_code == 500


@pytest.mark.parametrize("marker", ["[[cut]]", "[[stream-error]]"])
@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_stream_failure_ends_with_error_then_response_failed(openai_client, protocol, marker):
    """An upstream stream that fails after it started ends the client's stream
    with an `error` event, then `response.failed`: never a `response.completed`."""
    stream = openai_client.responses.create(
        model=model_of(protocol), input=f"{marker} hi there, how are you today?", stream=True,
    )
    events = list(stream)
    types_ = [e.type for e in events]
    assert "response.output_text.delta" in types_, "the failure must come after the stream started"
    assert types_[-2:] == ["error", "response.failed"], types_
    assert "response.completed" not in types_
    assert seqs(events) == list(range(len(events)))
    error, failed = events[-2:]
    assert error.message
    assert failed.response.status == "failed"
    assert failed.response.error is not None and failed.response.error.message
    assert failed.response.id == events[0].response.id


@pytest.mark.parametrize("protocol", S.upstreams(F))
def test_one_unreadable_frame_is_skipped(openai_client, protocol):
    """One upstream frame that is not JSON is skipped: the stream still ends
    with `response.completed` and the whole text."""
    prompt = "[[malformed]] hi there, how are you today?"
    events = list(openai_client.responses.create(model=model_of(protocol), input=prompt, stream=True))
    types_ = [e.type for e in events]
    assert types_[-1] == "response.completed", types_
    assert "error" not in types_
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == S.expected_reply(protocol, prompt)
    assert seqs(events) == list(range(len(events)))


def test_a_cut_stream_is_continued(openai_client):
    """A stream the upstream cuts mid-answer is continued with a prefill: one
    response, numbered without a gap, ending `response.completed` with the
    whole text (docs/resilience.md)."""
    S.require_responses()
    prompt = "[[cut]] hi there, how are you today?"
    events = list(openai_client.responses.create(model="resume/claude-resume", input=prompt, stream=True))
    types_ = [e.type for e in events]
    assert types_[-1] == "response.completed", types_
    assert "error" not in types_
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == S.expected_reply("anthropic", prompt)
    assert events[-1].response.output_text == text
    assert seqs(events) == list(range(len(events)))
