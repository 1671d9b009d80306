"""Shared data and helpers of the SDK suite: the test catalog, keys, the
client x upstream matrix, SDK client factories, and readers of the upstream
request bodies the mock echoes back (`[[echo-request]]`)."""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types

KEY = "sk-sdk-test"
LIMITED_KEY = "sk-sdk-limited"  # may call `openai/*` only
BAD_KEY = "sk-not-a-key"
STRICT_KEY = "sk-sdk-strict"  # policy strict: what adapt would change is a 400

FAMILIES = ("openai", "anthropic", "gemini")  # client families A, B, C (D: test_openai_responses.py)
PROTOCOLS = ("openai", "anthropic", "gemini", "responses")  # upstream wire protocols

# The mock's path prefix per upstream protocol (`base_url` in the catalog; the
# gateway appends `/chat/completions`, `/messages`, `/models/...`, `/responses`).
MOCK_BASE = {
    "openai": "/openai/v1",
    "anthropic": "/anthropic/v1",
    "gemini": "/gemini/v1beta",
    "responses": "/responses-api/v1",
    "cohere": "/cohere/v2",  # rerank only (Cohere v2 `/rerank`)
}

# Set by conftest when the gateway refused the catalog with a `responses`
# upstream and family (a build without family D): the tail of its log. The
# suite then runs on `catalog(..., responses=False)` and every cell that needs
# family D or a Responses upstream fails with this reason.
RESPONSES_REFUSED: str | None = None

# Provider key environment variables set for the gateway process, and their values.
PROVIDER_KEYS = {
    "SB_SDK_KEY_OPENAI": "upstream-key-openai",
    "SB_SDK_KEY_ANTHROPIC": "upstream-key-anthropic",
    "SB_SDK_KEY_GEMINI": "upstream-key-gemini",
    "SB_SDK_KEY_RESPONSES": "upstream-key-responses",
    "SB_SDK_KEY_COHERE": "upstream-key-cohere",  # the mock's --cohere-key
}
UPSTREAM_KEY = {p: PROVIDER_KEYS[f"SB_SDK_KEY_{p.upper()}"] for p in PROTOCOLS}

# The model each client family names to reach a provider whose only upstream
# speaks each protocol. Family A takes `provider/model_id`; family B a bare id
# in the body (any model whose `protocols` include `anthropic`); family C a
# path, where the provider must accept family C (so `openai`'s models are
# reached there through `qwen`, an OpenAI-only provider, and Anthropic's
# through `deepseek`, an Anthropic-only provider). The Responses upstream is
# `azure`'s only one; it accepts families A, C and D.
MODEL = {
    ("openai", "openai"): "openai/gpt-5",
    ("openai", "anthropic"): "anthropic/claude-sonnet-4.7",
    ("openai", "gemini"): "google/gemini-3.1-pro",
    ("anthropic", "openai"): "gpt-5",
    ("anthropic", "anthropic"): "claude-sonnet-4.7",
    ("anthropic", "gemini"): "gemini-3.1-pro",
    ("gemini", "openai"): "qwen/qwen3-max",
    ("gemini", "anthropic"): "deepseek/deepseek-v4-pro",
    ("gemini", "gemini"): "gemini-3.1-pro",  # bare id, as the google-genai docs do
    ("openai", "responses"): "azure/gpt-5-codex",
    ("anthropic", "responses"): "gpt-5-codex",
    ("gemini", "responses"): "azure/gpt-5-codex",
    # Family D (the OpenAI Responses API, `/v1/responses`) names models as family A does.
    ("responses", "openai"): "openai/gpt-5",
    ("responses", "anthropic"): "anthropic/claude-sonnet-4.7",
    ("responses", "gemini"): "google/gemini-3.1-pro",
    ("responses", "responses"): "azure/gpt-5-codex",
}

# Upstream model names (the catalog's `upstream_model`), to check the rewrite.
UPSTREAM_MODEL = {
    "gpt-5": "gpt-5-2025-08-07",
    "claude-sonnet-4.7": "claude-sonnet-4-7",
    "gemini-3.1-pro": "gemini-3.1-pro-preview",
    "qwen3-max": "qwen3-max",
    "deepseek-v4-pro": "deepseek-v4-pro",
    "gpt-5-codex": "gpt-5-codex-2025-09-15",
}

# An alias of `claude-sonnet-4.7` (docs/configuration.md "Aliases"): accepted as the model, never
# a listing entry of its own, answered with the canonical name.
ALIAS = "sonnet-latest"

def bare(model: str) -> str:
    return model.rsplit("/", 1)[-1]


def upstreams(family: str):
    """pytest params of the upstream protocols a `family` client reaches."""
    return [pytest.param(p, id=f"{family}-to-{p}") for p in PROTOCOLS]


QUALIFIED = {
    "gpt-5": "openai/gpt-5",
    "claude-sonnet-4.7": "anthropic/claude-sonnet-4.7",
    "gemini-3.1-pro": "google/gemini-3.1-pro",
    "qwen3-max": "qwen/qwen3-max",
    "deepseek-v4-pro": "deepseek/deepseek-v4-pro",
    "kimi-k2": "moonshotai/kimi-k2",
    "gpt-5-codex": "azure/gpt-5-codex",
}


def client_model_name(family: str, model: str) -> str:
    """How the gateway names the model in responses (docs/api.md "Inference behaviour"): families A
    and D `provider/model_id`, families B and C the bare id."""
    return QUALIFIED[bare(model)] if family in ("openai", "responses") else bare(model)


def expected_reply(protocol: str, user_text: str) -> str:
    return f"Hello from {protocol} mock: {user_text} ✓ héllo 🌍"


# ------------------------------------------------------------------ configuration


def _model(id_: str, provider: str, **extra: Any) -> dict:
    m = {
        "id": id_,
        "provider": provider,
        "display_name": f"Test {id_}",
        "description": f"{id_} for the SDK suite",
        "created": 1767225600,
        "version": "1.0",
        "architecture": "decoder",
        "context_length": 200000,
        "max_output_tokens": 8192,
        "pricing": {"prompt": "0.000001", "completion": "0.000002"},
        "supported_parameters": [
            "temperature", "top_p", "top_k", "max_tokens", "stream", "stop",
            "tools", "tool_choice", "response_format", "seed", "reasoning",
        ],
        "supported_features": {"vision": True, "tool_use": True, "streaming": True},
        "supported_actions": ["complete"],
        "supported_generation_methods": ["generateContent", "countTokens"],
        "defaults": {"temperature": 1.0, "top_p": 0.95, "top_k": 40},
        "protocols": ["openai", "anthropic", "gemini"],
    }
    m.update(extra)
    return m


def catalog(base_url, dead_url: str, responses: bool = True) -> dict:
    """Providers all pointing at the mock (`base_url(protocol)`):

    | provider   | families                   | upstreams (in order) |
    |------------|----------------------------|----------------------|
    | openai     | openai, responses          | openai               |
    | anthropic  | openai, anthropic, responses | anthropic          |
    | google     | openai, gemini, responses  | gemini               |
    | qwen       | openai, gemini             | openai               |
    | deepseek   | openai, gemini             | anthropic            |
    | moonshotai | openai, gemini             | openai, anthropic    |
    | down       | openai                     | openai (nothing listening) |
    | nokey      | openai                     | openai (key variable unset) |
    | azure      | openai, gemini, responses  | responses            |
    | resume     | all four                   | anthropic (its model `claude-resume` takes a prefill) |
    | cohere     | openai                     | cohere (rerank only) |

    Beside the chat models: `openai/text-embedding-3-small` and
    `google/gemini-embedding-001` (`embed`), `cohere/rerank-v3.5` (`rerank`).

    Without `responses` (for a gateway that does not know family D and the
    `responses` protocol yet, and refuses such a catalog) no provider or model
    names family D, and `azure`'s upstream speaks `openai`: the listings keep
    the same models, so only the cells that need family D fail.
    """

    def up(p: str) -> dict:
        if p == "responses" and not responses:
            p = "openai"
        return {"protocol": p, "base_url": base_url(p), "api_key_env": f"SB_SDK_KEY_{p.upper()}"}

    def fam(*families: str) -> list[str]:
        return [f for f in families if responses or f != "responses"]

    d = fam("openai", "anthropic", "gemini", "responses")  # the four client families
    return {
        "providers": [
            {"id": "openai", "families": fam("openai", "responses"), "upstreams": [up("openai")]},
            {"id": "anthropic", "families": fam("openai", "anthropic", "responses"), "upstreams": [up("anthropic")]},
            {"id": "google", "families": fam("openai", "gemini", "responses"), "upstreams": [up("gemini")]},
            {"id": "qwen", "families": ["openai", "gemini"], "upstreams": [up("openai")]},
            {"id": "deepseek", "families": ["openai", "gemini"], "upstreams": [up("anthropic")]},
            {"id": "moonshotai", "families": ["openai", "gemini"], "upstreams": [up("openai"), up("anthropic")]},
            {"id": "down", "families": ["openai"],
             "upstreams": [{"protocol": "openai", "base_url": dead_url, "api_key_env": "SB_SDK_KEY_OPENAI"}]},
            {"id": "nokey", "families": ["openai"],
             "upstreams": [{"protocol": "openai", "base_url": base_url("openai"), "api_key_env": "SB_SDK_UNSET_KEY"}]},
            {"id": "azure", "families": fam("openai", "gemini", "responses"), "upstreams": [up("responses")]},
            # A model that continues an assistant prefill: a stream cut
            # mid-answer is continued (docs/resilience.md).
            {"id": "resume", "families": fam("openai", "anthropic", "gemini", "responses"),
             "upstreams": [up("anthropic")]},
            {"id": "cohere", "families": ["openai"], "upstreams": [up("cohere")]},
        ],
        "models": [
            _model("gpt-5", "openai", upstream_model=UPSTREAM_MODEL["gpt-5"], protocols=d),
            _model("claude-sonnet-4.7", "anthropic", upstream_model=UPSTREAM_MODEL["claude-sonnet-4.7"], protocols=d,
                   aliases=[ALIAS]),
            _model("gemini-3.1-pro", "google", upstream_model=UPSTREAM_MODEL["gemini-3.1-pro"], protocols=d),
            _model("qwen3-max", "qwen"),
            _model("deepseek-v4-pro", "deepseek"),
            _model("kimi-k2", "moonshotai"),
            _model("gpt-5-nano", "openai", protocols=["openai"], max_output_tokens=100,
                   supported_parameters=["max_tokens", "stream"],
                   supported_features={"vision": False, "tool_use": False, "streaming": True}),
            _model("offline", "down"),
            _model("orphan-key", "nokey"),
            _model("gpt-5-codex", "azure", upstream_model=UPSTREAM_MODEL["gpt-5-codex"], protocols=d),
            _model("claude-resume", "resume", protocols=d, prefill="native"),
            _model("text-embedding-3-small", "openai", protocols=["openai"], supported_actions=["embed"],
                   pricing={"prompt": "0.00000002", "completion": "0"}),
            _model("gemini-embedding-001", "google", protocols=["openai", "gemini"], supported_actions=["embed"],
                   supported_generation_methods=["embedContent"],
                   pricing={"prompt": "0.00000015", "completion": "0"}),
            _model("rerank-v3.5", "cohere", protocols=["openai"], supported_actions=["rerank"],
                   pricing={"prompt": "0", "completion": "0", "request": "0.002"}),
        ],
    }


def model_protocols(model_id: str) -> list[str]:
    """The `protocols` of a test-catalog model in the catalog the gateway runs."""
    (m,) = [m for m in catalog(lambda p: "", "", responses=RESPONSES_REFUSED is None)["models"] if m["id"] == model_id]
    return m["protocols"]


def require_responses() -> None:
    """Fails the calling test when the gateway refused the catalog with family D."""
    if RESPONSES_REFUSED is not None:
        pytest.fail("the gateway refused the test catalog with a `responses` upstream and family "
                    f"(no family D yet?); the suite runs without them. Gateway log:\n{RESPONSES_REFUSED}",
                    pytrace=False)


def keys() -> dict:
    return {"keys": [
        {"id": "sdk", "key": KEY},
        {"id": "limited", "key": LIMITED_KEY, "models": ["openai/*"]},
        {"id": "strict", "key": STRICT_KEY, "policy": "strict"},
    ]}


# ------------------------------------------------------------------ SDK clients


@dataclass
class TestPki:
    """A throwaway CA and a `localhost` leaf it signed, as PEM files (for the
    gateway's `--tls-cert` / `--tls-key` and the clients' `verify=`)."""

    ca: Path
    cert: Path
    key: Path

    @staticmethod
    def make(d: Path) -> "TestPki":
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        now = datetime.datetime.now(datetime.timezone.utc)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "switchboard sdk test CA")])
        ca = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                              data_encipherment=False, key_agreement=False, key_cert_sign=True,
                              crl_sign=True, encipher_only=False, decipher_only=False),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        leaf_key = ec.generate_private_key(ec.SECP256R1())
        leaf = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name)
            .public_key(leaf_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
            )
            .sign(ca_key, hashes.SHA256())
        )
        pki = TestPki(d / "ca.pem", d / "cert.pem", d / "key.pem")
        pki.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        pki.cert.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
        pki.key.write_bytes(
            leaf_key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return pki


def openai_client(gw: str, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{gw}/v1", api_key=key, max_retries=0, timeout=20)


def anthropic_client(gw: str, key: str = KEY) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=f"{gw}/anthropic", api_key=key, max_retries=0, timeout=20)


def genai_client(gw: str, key: str = KEY) -> genai.Client:
    return genai.Client(
        vertexai=False,
        api_key=key,
        http_options=types.HttpOptions(
            base_url=f"{gw}/google",
            api_version="v1beta",
            timeout=20_000,
            retry_options=types.HttpRetryOptions(attempts=1),
        ),
    )


# ------------------------------------------------------------------ one-shot chat per family


def chat(clients, family: str, model: str, text: str, **kw) -> str:
    """Sends one user message with the family's SDK, returns the reply text."""
    if family == "openai":
        r = clients["openai"].chat.completions.create(model=model, messages=[{"role": "user", "content": text}], **kw)
        return r.choices[0].message.content
    if family == "anthropic":
        kw.setdefault("max_tokens", 1024)
        r = clients["anthropic"].messages.create(model=model, messages=[{"role": "user", "content": text}], **kw)
        return "".join(b.text for b in r.content if b.type == "text")
    r = clients["gemini"].models.generate_content(model=model, contents=text, **kw)
    return r.text


# ------------------------------------------------------------------ upstream request bodies


def echoed(reply: str) -> dict:
    """The upstream request body the mock echoed back for `[[echo-request]]`."""
    return json.loads(reply)


def responses_messages(body: dict, *roles: str) -> list[dict]:
    """The message items of a Responses request's `input` with one of `roles`
    (a string `input` is one user message)."""
    items = body.get("input", [])
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    return [i for i in items if i.get("type", "message") == "message" and i.get("role") in roles]


def responses_parts(item: dict) -> list[dict]:
    """A Responses message's content as parts (a string is one `input_text`)."""
    c = item.get("content")
    return [{"type": "input_text", "text": c}] if isinstance(c, str) else list(c or [])


def system_text(protocol: str, body: dict) -> str:
    """All system-prompt text in an upstream request body."""
    if protocol == "responses":
        parts = [body["instructions"]] if isinstance(body.get("instructions"), str) else []
        for m in responses_messages(body, "system", "developer"):
            parts.append("".join(p.get("text", "") for p in responses_parts(m)))
        return "\n".join(parts)
    if protocol == "openai":
        parts = []
        for m in body.get("messages", []):
            if m.get("role") in ("system", "developer"):
                c = m.get("content")
                parts.append(c if isinstance(c, str) else "".join(p.get("text", "") for p in c))
        return "\n".join(parts)
    if protocol == "anthropic":
        s = body.get("system", "")
        return s if isinstance(s, str) else "\n".join(b.get("text", "") for b in s)
    si = body.get("systemInstruction") or body.get("system_instruction") or {}
    return "\n".join(p.get("text", "") for p in si.get("parts", []))


def user_texts(protocol: str, body: dict) -> list[str]:
    """Texts of the user turns in an upstream request body."""
    out = []
    if protocol == "gemini":
        for c in body.get("contents", []):
            if c.get("role", "user") == "user":
                out += [p["text"] for p in c.get("parts", []) if "text" in p]
        return out
    if protocol == "responses":
        for m in responses_messages(body, "user"):
            out += [p["text"] for p in responses_parts(m) if p.get("type") == "input_text"]
        return out
    for m in body.get("messages", []):
        if m.get("role") != "user":
            continue
        c = m.get("content")
        if isinstance(c, str):
            out.append(c)
        else:
            out += [p["text"] for p in c if p.get("type") == "text"]
    return out


def images(protocol: str, body: dict) -> list[tuple[str, str]]:
    """(media type, base64 data) of every inline image in an upstream request body."""
    out = []
    if protocol == "openai":
        for m in body.get("messages", []):
            c = m.get("content")
            if isinstance(c, list):
                for p in c:
                    if p.get("type") == "image_url":
                        url = p["image_url"]["url"] if isinstance(p["image_url"], dict) else p["image_url"]
                        head, _, data = url.partition(",")
                        out.append((head.removeprefix("data:").removesuffix(";base64"), data))
    elif protocol == "responses":
        for m in responses_messages(body, "user"):
            for p in responses_parts(m):
                if p.get("type") == "input_image" and isinstance(p.get("image_url"), str):
                    head, _, data = p["image_url"].partition(",")
                    out.append((head.removeprefix("data:").removesuffix(";base64"), data))
    elif protocol == "anthropic":
        for m in body.get("messages", []):
            c = m.get("content")
            if isinstance(c, list):
                for p in c:
                    if p.get("type") == "image" and p["source"]["type"] == "base64":
                        out.append((p["source"]["media_type"], p["source"]["data"]))
    else:
        for c in body.get("contents", []):
            for p in c.get("parts", []):
                d = p.get("inlineData") or p.get("inline_data")
                if d:
                    out.append((d.get("mimeType") or d.get("mime_type"), d["data"]))
    return out


def tool_names(protocol: str, body: dict) -> list[str]:
    """Names of the tools declared in an upstream request body."""
    if protocol == "openai":
        return [t["function"]["name"] for t in body.get("tools", [])]
    if protocol in ("anthropic", "responses"):  # Responses function tools are flat
        return [t["name"] for t in body.get("tools", []) if t.get("type", "function") in ("function", "custom")]
    names = []
    for t in body.get("tools", []):
        for d in t.get("functionDeclarations") or t.get("function_declarations") or []:
            names.append(d["name"])
    return names


def tool_results(protocol: str, body: dict) -> list[str]:
    """Serialized content of every tool result in an upstream request body."""
    out = []
    if protocol == "responses":
        for i in body.get("input", []) if isinstance(body.get("input"), list) else []:
            if i.get("type") == "function_call_output":
                out.append(json.dumps(i.get("output"), ensure_ascii=False))
    elif protocol == "openai":
        for m in body.get("messages", []):
            if m.get("role") == "tool":
                out.append(json.dumps(m.get("content"), ensure_ascii=False))
    elif protocol == "anthropic":
        for m in body.get("messages", []):
            c = m.get("content")
            if isinstance(c, list):
                for p in c:
                    if p.get("type") == "tool_result":
                        out.append(json.dumps(p.get("content"), ensure_ascii=False))
    else:
        for c in body.get("contents", []):
            for p in c.get("parts", []):
                fr = p.get("functionResponse") or p.get("function_response")
                if fr:
                    out.append(json.dumps(fr, ensure_ascii=False))
    return out


def asks_for_json(protocol: str, body: dict) -> bool:
    """Whether an upstream request body asks for JSON output, in that protocol's terms.

    Anthropic has no `response_format`: structured output is `output_config.format`,
    and a translator may instead add an instruction to the system prompt."""
    if protocol == "openai":
        return (body.get("response_format") or {}).get("type") in ("json_object", "json_schema")
    if protocol == "responses":
        return ((body.get("text") or {}).get("format") or {}).get("type") in ("json_object", "json_schema")
    if protocol == "anthropic":
        fmt = (body.get("output_config") or {}).get("format") or body.get("output_format") or {}
        return fmt.get("type") == "json_schema" or "json" in system_text(protocol, body).lower()
    g = body.get("generationConfig") or body.get("generation_config") or {}
    return (g.get("responseMimeType") or g.get("response_mime_type")) == "application/json"


# ------------------------------------------------------------------ fixtures' data

# A user prompt with non-ASCII text in several scripts; the mock quotes it back.
PROMPT = "Grüße, naïve café — 日本語, Ελληνικά, emoji 🚀"
SYSTEM = "You are Switchboard's test assistant. Réponds brièvement ✓"
# A 2x2 PNG whose base64 has both `+` and `/` (standard alphabet, not URL-safe).
PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAIAAAD91JpzAAAAEElEQVR42mNg+nMCiBggFAAungcZi/Z/lQAAAABJRU5ErkJggg=="
# Arguments of every mock tool call.
TOOL_ARGS = {"location": "Paris", "unit": "c"}
# The mock's `[[thinking]]` answer (tests/e2e/common/mock_upstream/): the thinking
# text, Anthropic's signature of it, the Responses reasoning item's `encrypted_content`.
THINKING_TEXT = "Thinking it over ✓ step by step."
THINKING_SIGNATURE = "bW9jay10aGlua2luZy1zaWduYXR1cmU="
REASONING_ENCRYPTED_CONTENT = "gAAAAABtb2NrLXJlYXNvbmluZy1lbmNyeXB0ZWQtY29udGVudA=="


def mock_deltas(text: str) -> int:
    """How many stream deltas (and so output tokens) the mock makes of `text`:
    one per word, the space kept with the word before it, at most 48."""
    words = text.split(" ")
    pieces = [w + " " for w in words[:-1]] + ([words[-1]] if words[-1] else [])
    if len(pieces) < 3:
        return 3 if len(text) >= 3 else len(pieces)
    per = -(-len(pieces) // 48)
    return -(-len(pieces) // per)
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "location": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["c", "f"]},
    },
    "required": ["location"],
}
TIME_SCHEMA = {"type": "object", "properties": {"zone": {"type": "string"}}, "required": ["zone"]}
ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


def png_bytes() -> bytes:
    import base64

    return base64.b64decode(PNG_B64)


def decode_b64(data: str, strict: bool) -> bytes:
    """Decodes base64; `strict` requires the standard alphabet with padding
    (what the OpenAI and Anthropic APIs take); otherwise URL-safe is accepted
    too (Gemini takes both, and the google-genai SDK sends URL-safe)."""
    import base64

    if strict:
        return base64.b64decode(data, validate=True)
    return base64.urlsafe_b64decode(data.replace("+", "-").replace("/", "_") + "=" * (-len(data) % 4))


def upstream_path(protocol: str, upstream_model: str, stream: bool) -> str:
    """The path (with query) the gateway must call on the mock for `protocol`."""
    if protocol == "openai":
        return "/openai/v1/chat/completions"
    if protocol == "responses":
        return MOCK_BASE["responses"] + "/responses"
    if protocol == "anthropic":
        return "/anthropic/v1/messages"
    if stream:
        return f"/gemini/v1beta/models/{upstream_model}:streamGenerateContent?alt=sse"
    return f"/gemini/v1beta/models/{upstream_model}:generateContent"


def check_upstream_request(rec: dict, protocol: str, model: str, stream: bool) -> None:
    """Asserts one recorded upstream request went to the right place with the
    provider's key (never the client's) and the upstream model name."""
    upstream_model = UPSTREAM_MODEL[bare(model)]
    assert rec["method"] == "POST"
    assert rec["path"] == upstream_path(protocol, upstream_model, stream)
    h = rec["headers"]
    if protocol in ("openai", "responses"):
        assert h.get("authorization") == f"Bearer {UPSTREAM_KEY[protocol]}"
    elif protocol == "anthropic":
        assert h.get("x-api-key") == UPSTREAM_KEY["anthropic"]
        assert h.get("anthropic-version") == "2023-06-01"
    else:
        assert h.get("x-goog-api-key") == UPSTREAM_KEY["gemini"]
    for name, value in h.items():
        assert KEY not in value, f"client key leaked upstream in {name}"
    body = json.loads(rec["body"])
    if protocol != "gemini":
        assert body["model"] == upstream_model
        assert bool(body.get("stream")) == stream
