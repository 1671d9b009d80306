"""Structured output as frameworks ask for it, toward a model on an Anthropic
upstream (docs/protocol-mapping.md "Structured output"): instructor and
LangChain's `with_structured_output` get a validated object back, and the
upstream got Anthropic's native form (`output_config.format`, strict tools),
which the mock upstream checks as Anthropic does and answers with a value
conforming to the schema (`[[json-answer]]`). LlamaIndex reaches a model by
its alias and is answered with the canonical id."""

from __future__ import annotations

import json

import instructor
import openai
import pytest
from langchain_openai import ChatOpenAI
from llama_index.core.llms import ChatMessage
from llama_index.llms.openai_like import OpenAILike
from pydantic import BaseModel, Field

import support as S

MODEL = S.MODEL["openai", "anthropic"]


class Address(BaseModel):
    city: str


class Person(BaseModel):
    name: str = Field(min_length=1)
    age: int = Field(ge=0, le=150, description="Age in years")
    address: Address
    nickname: str | None = None


def _client(gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gateway.url}/v1", api_key=S.KEY, max_retries=0, timeout=20)


def _last_messages_request(mock) -> dict:
    bodies = [json.loads(r["body"]) for r in mock.requests() if r["path"].endswith("/messages")]
    assert bodies, "no request reached the Anthropic upstream"
    return bodies[-1]


def _no_instruction(body: dict) -> bool:
    return "Respond with a single valid JSON" not in S.system_text("anthropic", body)


def _check_person(p: Person) -> None:
    assert isinstance(p, Person)
    assert p.address.city == "mock" and p.age == 7


def test_instructor_json_schema_is_enforced_natively(gateway, mock):
    client = instructor.from_openai(_client(gateway), mode=instructor.Mode.JSON_SCHEMA)
    person = client.chat.completions.create(
        model=MODEL,
        response_model=Person,
        max_retries=0,
        messages=[{"role": "user", "content": "Extract: Ada, 36, London [[json-answer]]"}],
    )
    _check_person(person)
    body = _last_messages_request(mock)
    fmt = body["output_config"]["format"]
    assert fmt["type"] == "json_schema"
    assert fmt["schema"]["additionalProperties"] is False
    assert "minimum" not in fmt["schema"]["properties"]["age"]
    assert _no_instruction(body)


def test_instructor_tools_mode(gateway, mock):
    client = instructor.from_openai(_client(gateway), mode=instructor.Mode.TOOLS)
    person = client.chat.completions.create(
        model=MODEL,
        response_model=Person,
        max_retries=0,
        messages=[{"role": "user", "content": "Extract: Ada, 36, London [[json-answer]] [[tool]]"}],
    )
    _check_person(person)
    body = _last_messages_request(mock)
    assert body["tools"][0]["name"] == "Person"
    assert body["tool_choice"] == {"type": "tool", "name": "Person"}


@pytest.mark.parametrize("method", ["json_schema", "function_calling"])
def test_langchain_with_structured_output(gateway, mock, method):
    llm = ChatOpenAI(model=MODEL, base_url=f"{gateway.url}/v1", api_key=S.KEY, max_retries=0, timeout=20)
    marker = "[[json-answer]]" if method == "json_schema" else "[[json-answer]] [[tool]]"
    # LangChain's default (json_schema); function calling with strict tools.
    strict = {"strict": True} if method == "function_calling" else {}
    raw = llm.with_structured_output(Person, method=method, include_raw=True, **strict).invoke(
        f"Extract: Ada, 36, London {marker}"
    )
    assert raw["parsing_error"] is None, raw
    _check_person(raw["parsed"])
    body = _last_messages_request(mock)
    if method == "json_schema":
        assert body["output_config"]["format"]["type"] == "json_schema"
        assert _no_instruction(body)
    else:
        tool = body["tools"][0]
        assert tool["name"] == "Person"
        # Anthropic strict tool use, the schema fitted (closed objects).
        assert tool["strict"] is True
        assert tool["input_schema"]["additionalProperties"] is False


def test_llamaindex_reaches_a_model_by_its_alias(gateway, mock):
    llm = OpenAILike(
        model=S.ALIAS,
        api_base=f"{gateway.url}/v1",
        api_key=S.KEY,
        is_chat_model=True,
        context_window=200000,
        max_retries=0,
        timeout=20,
    )
    r = llm.chat([ChatMessage(role="user", content="Hello from LlamaIndex")])
    assert "Hello from LlamaIndex" in r.message.content
    assert r.raw.model == MODEL
    body = _last_messages_request(mock)
    assert body["model"] == S.UPSTREAM_MODEL["claude-sonnet-4.7"]
