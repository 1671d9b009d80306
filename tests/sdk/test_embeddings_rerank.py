"""Embeddings through the official SDKs: the OpenAI SDK's
`client.embeddings.create` (X1: base64, the SDK's default, which it decodes;
floats; `dimensions`) and google-genai's `client.models.embed_content` (X2:
one and several contents, `output_dimensionality`); and rerank (X3,
`POST /v1/rerank`) over plain HTTP, as no SDK of the suite has a rerank
call (Cohere's own SDK posts to `/v2/rerank`, not a gateway route).

The mock's vectors are deterministic (`mock_vector`, the formula of
tests/e2e/common/mock_upstream/embed.rs), so whole vectors are compared."""

from __future__ import annotations

import json
import struct
import urllib.error
import urllib.request

import pytest
from google.genai import types

import support as S

TEXTS = ["hello world", "the cat sat"]


def _fnv1a(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def mock_vector(text: str, dims: int = 8) -> list[float]:
    """The mock's vector for `text`, as f32 values."""
    out = []
    for i in range(dims):
        v = ((_fnv1a(f"{i}:{text}".encode()) % 2001) - 1000) / 1000
        out.append(struct.unpack("<f", struct.pack("<f", v))[0])
    return out


def close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(abs(x - y) < 1e-6 for x, y in zip(a, b))


def upstream_bodies(mock, suffix: str) -> list[dict]:
    return [json.loads(r["body"]) for r in mock.requests() if r["path"].split("?")[0].endswith(suffix)]


# ------------------------------------------------------------------ OpenAI SDK (X1)


def test_openai_sdk_embeddings_base64_by_default(openai_client, mock):
    """The SDK asks for base64 unless told otherwise and decodes it: the
    gateway asks the upstream for floats and encodes them itself."""
    mock.reset()
    raw = openai_client.embeddings.with_raw_response.create(model="openai/text-embedding-3-small", input=TEXTS)
    assert json.loads(raw.http_request.content)["encoding_format"] == "base64"
    wire = raw.http_response.json()
    assert isinstance(wire["data"][0]["embedding"], str)
    r = raw.parse()
    assert r.model == "openai/text-embedding-3-small"
    assert [d.index for d in r.data] == [0, 1]
    for d, text in zip(r.data, TEXTS):
        assert close(d.embedding, mock_vector(text)), d.embedding
    assert (r.usage.prompt_tokens, r.usage.total_tokens) == (5, 5)
    (up,) = upstream_bodies(mock, "/embeddings")
    assert up == {"model": "text-embedding-3-small", "input": TEXTS, "encoding_format": "float"}


def test_openai_sdk_embeddings_float_and_dimensions(openai_client, mock):
    mock.reset()
    r = openai_client.embeddings.create(model="openai/text-embedding-3-small", input="solo",
                                        encoding_format="float", dimensions=4)
    (d,) = r.data
    assert close(d.embedding, mock_vector("solo", 4))
    (up,) = upstream_bodies(mock, "/embeddings")
    assert up["dimensions"] == 4 and up["input"] == ["solo"]


def test_openai_sdk_embeddings_through_a_gemini_upstream(openai_client, mock):
    """X1 to a Gemini model: `dimensions` becomes `outputDimensionality`; the
    usage is the gateway's own count (Gemini reports none)."""
    mock.reset()
    r = openai_client.embeddings.create(model="google/gemini-embedding-001", input=TEXTS, dimensions=3)
    assert [close(d.embedding, mock_vector(t, 3)) for d, t in zip(r.data, TEXTS)] == [True, True]
    assert r.usage.prompt_tokens > 0
    (up,) = upstream_bodies(mock, ":batchEmbedContents")
    assert [q["outputDimensionality"] for q in up["requests"]] == [3, 3]


def test_openai_sdk_embeddings_of_a_chat_model_is_a_400(openai_client):
    import openai

    with pytest.raises(openai.BadRequestError) as e:
        openai_client.embeddings.create(model="openai/gpt-5", input="hi")
    assert "embed" in e.value.message


# ------------------------------------------------------------------ google-genai (X2)


def test_genai_embed_content_one(genai_client, mock):
    mock.reset()
    r = genai_client.models.embed_content(model="gemini-embedding-001", contents="hello world",
                                          config=types.EmbedContentConfig(output_dimensionality=4))
    (e,) = r.embeddings
    assert close(e.values, mock_vector("hello world", 4))
    assert mock.requests(), "the gateway called the upstream"


def test_genai_embed_content_several(genai_client, mock):
    mock.reset()
    r = genai_client.models.embed_content(
        model="google/gemini-embedding-001", contents=TEXTS,
        config=types.EmbedContentConfig(output_dimensionality=2, task_type="RETRIEVAL_DOCUMENT"))
    assert [close(e.values, mock_vector(t, 2)) for e, t in zip(r.embeddings, TEXTS)] == [True, True]
    (up,) = upstream_bodies(mock, ":batchEmbedContents")
    assert [q["taskType"] for q in up["requests"]] == ["RETRIEVAL_DOCUMENT"] * 2
    assert up["requests"][0]["model"] == "models/gemini-embedding-001"


# ------------------------------------------------------------------ rerank (X3), plain HTTP


def _post(gateway, path: str, body: dict, key: str = S.KEY) -> tuple[int, dict]:
    req = urllib.request.Request(gateway.url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"authorization": f"Bearer {key}", "content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_rerank_to_cohere(gateway, mock):
    mock.reset()
    docs = ["Paris is in France.", {"text": "Berlin is the capital of Germany."}, "Bread and butter."]
    status, v = _post(gateway, "/v1/rerank", {"model": "cohere/rerank-v3.5", "query": "capital of Germany",
                                              "documents": docs, "top_n": 2, "return_documents": True})
    assert status == 200, v
    assert v["model"] == "cohere/rerank-v3.5"
    assert [r["index"] for r in v["results"]][0] == 1
    assert v["results"][0]["document"] == {"text": "Berlin is the capital of Germany."}
    assert len(v["results"]) == 2
    scores = [r["relevance_score"] for r in v["results"]]
    assert scores == sorted(scores, reverse=True)
    assert v["meta"]["billed_units"]["search_units"] == 1
    (rec,) = [r for r in mock.requests() if r["path"].endswith("/rerank")]
    assert rec["path"] == "/cohere/v2/rerank"
    assert rec["headers"]["authorization"] == f"Bearer {S.PROVIDER_KEYS['SB_SDK_KEY_COHERE']}"
    assert json.loads(rec["body"]) == {"model": "rerank-v3.5", "query": "capital of Germany",
                                       "documents": [d if isinstance(d, str) else d["text"] for d in docs],
                                       "top_n": 2}


def test_rerank_errors_are_openai_shaped(gateway):
    status, v = _post(gateway, "/v1/rerank", {"model": "cohere/rerank-v3.5", "query": "q", "documents": []})
    assert status == 400 and v["error"]["message"].startswith("documents:"), v
    status, v = _post(gateway, "/v1/rerank", {"model": "openai/gpt-5", "query": "q", "documents": ["a"]})
    assert status == 400 and "rerank" in v["error"]["message"], v
    status, v = _post(gateway, "/v1/rerank", {"model": "cohere/rerank-v3.5", "query": "q", "documents": ["a"]},
                      key=S.BAD_KEY)
    assert status == 401 and v["error"]["code"] == "invalid_api_key", v
