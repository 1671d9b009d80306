//! The reasoning mapping, every source against every target: Anthropic
//! `thinking` / `output_config.effort`, OpenAI `reasoning_effort`, Gemini
//! `thinkingConfig` and Responses `reasoning`, decoded into the one canonical
//! notion and encoded again; and the reasoning state (Anthropic signatures,
//! Gemini thought signatures, Responses `encrypted_content`) carried through
//! a client of another family and back to the upstream that issued it.

use super::{
    decode_request, decode_response, encode_request_value, encode_response_value, DecodeContext,
    EncodeOptions,
};
use crate::adjust::Adjustments;
use crate::family::Family::{self, Anthropic, Bedrock, Gemini, OpenAi, Responses};
use serde_json::{json, Value};

/// A minimal request of `family` with `settings` merged in at the top level
/// (Gemini: into `generationConfig`).
fn body(family: Family, settings: &Value) -> Vec<u8> {
    let mut v = match family {
        OpenAi => {
            json!({"model": "m", "max_tokens": 64000, "messages": [{"role": "user", "content": "hi"}]})
        }
        Anthropic => {
            json!({"model": "m", "max_tokens": 64000, "messages": [{"role": "user", "content": "hi"}]})
        }
        Gemini => {
            json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}], "generationConfig": {"maxOutputTokens": 4000}})
        }
        Responses => json!({"model": "m", "max_output_tokens": 64000, "input": "hi"}),
        Bedrock => json!({"messages": [{"role": "user", "content": [{"text": "hi"}]}],
            "inferenceConfig": {"maxTokens": 64000}, "additionalModelRequestFields": {}}),
    };
    let target = if family == Gemini {
        &mut v["generationConfig"]
    } else if family == Bedrock {
        &mut v["additionalModelRequestFields"]
    } else {
        &mut v
    };
    if let (Value::Object(t), Value::Object(s)) = (target, settings) {
        for (k, val) in s {
            t.insert(k.clone(), val.clone());
        }
    }
    serde_json::to_vec(&v).unwrap_or_default()
}

/// Translates and returns the target's reasoning fields plus the report.
fn translate(from: Family, settings: Value, to: Family) -> (Value, String) {
    let ctx = DecodeContext {
        model: Some("m"),
        stream: false,
    };
    let req = decode_request(from, &body(from, &settings), &ctx);
    assert!(req.is_ok(), "{from} decode: {req:?}");
    let Ok(req) = req else {
        return (Value::Null, String::new());
    };
    let opts = EncodeOptions {
        upstream_model: "m",
        default_max_tokens: 4000,
        stream: false,
        native_structured_output: false,
    };
    let mut adj = Adjustments::default();
    let out = encode_request_value(to, &req, &opts, &mut adj).unwrap_or_default();
    let fields = match to {
        OpenAi => json!({"reasoning_effort": out.get("reasoning_effort")}),
        Anthropic => json!({
            "thinking": out.get("thinking"),
            "effort": out.pointer("/output_config/effort"),
        }),
        Gemini => json!({"thinkingConfig": out.pointer("/generationConfig/thinkingConfig")}),
        Responses => json!({"reasoning": out.get("reasoning")}),
        Bedrock => json!({"thinking": out.pointer("/additionalModelRequestFields/thinking")}),
    };
    (fields, adj.render())
}

fn check(from: Family, settings: Value, to: Family, want: Value, report: &str) {
    let (got, adjusted) = translate(from, settings.clone(), to);
    assert_eq!(got, want, "{from} {settings} -> {to}");
    assert_eq!(adjusted, report, "{from} {settings} -> {to}: report");
}

#[test]
fn bedrock_thinking_both_ways() {
    let budget = json!({"thinking": {"type": "enabled", "budget_tokens": 10000}});
    check(
        Anthropic,
        budget.clone(),
        Bedrock,
        json!({"thinking": {"type": "enabled", "budget_tokens": 10000}}),
        "",
    );
    check(
        Bedrock,
        budget.clone(),
        Anthropic,
        json!({"thinking": {"type": "enabled", "budget_tokens": 10000}, "effort": null}),
        "",
    );
    check(
        Bedrock,
        budget,
        OpenAi,
        json!({"reasoning_effort": "medium"}),
        "",
    );
    check(
        OpenAi,
        json!({"reasoning_effort": "high"}),
        Bedrock,
        json!({"thinking": {"type": "enabled", "budget_tokens": 16384}}),
        "",
    );
    check(
        Bedrock,
        json!({"thinking": {"type": "disabled"}}),
        Anthropic,
        json!({"thinking": {"type": "disabled"}, "effort": null}),
        "",
    );
}

#[test]
fn anthropic_thinking_to_each_target() {
    let budget = json!({"thinking": {"type": "enabled", "budget_tokens": 10000}});
    check(
        Anthropic,
        budget.clone(),
        OpenAi,
        json!({"reasoning_effort": "medium"}),
        "",
    );
    check(
        Anthropic,
        budget.clone(),
        Gemini,
        json!({"thinkingConfig": {"thinkingBudget": 10000, "includeThoughts": true}}),
        "",
    );
    check(
        Anthropic,
        budget,
        Anthropic,
        json!({"thinking": {"type": "enabled", "budget_tokens": 10000}, "effort": null}),
        "",
    );

    let adaptive = json!({"thinking": {"type": "adaptive"}, "output_config": {"effort": "xhigh"}});
    check(
        Anthropic,
        adaptive.clone(),
        OpenAi,
        json!({"reasoning_effort": "high"}),
        "",
    );
    check(
        Anthropic,
        adaptive.clone(),
        Gemini,
        json!({"thinkingConfig": {"thinkingBudget": 24576, "includeThoughts": true}}),
        "",
    );
    check(
        Anthropic,
        adaptive,
        Anthropic,
        json!({"thinking": {"type": "adaptive"}, "effort": "xhigh"}),
        "",
    );

    let adaptive_only = json!({"thinking": {"type": "adaptive"}});
    check(
        Anthropic,
        adaptive_only.clone(),
        OpenAi,
        json!({"reasoning_effort": "medium"}),
        "",
    );
    check(
        Anthropic,
        adaptive_only,
        Gemini,
        json!({"thinkingConfig": {"thinkingBudget": -1, "includeThoughts": true}}),
        "",
    );

    let disabled = json!({"thinking": {"type": "disabled"}});
    check(
        Anthropic,
        disabled.clone(),
        OpenAi,
        json!({"reasoning_effort": null}),
        "dropped=thinking",
    );
    check(
        Anthropic,
        disabled,
        Gemini,
        json!({"thinkingConfig": {"thinkingBudget": 0}}),
        "",
    );

    let effort_only = json!({"output_config": {"effort": "low"}});
    check(
        Anthropic,
        effort_only.clone(),
        OpenAi,
        json!({"reasoning_effort": "low"}),
        "",
    );
    check(
        Anthropic,
        effort_only.clone(),
        Gemini,
        json!({"thinkingConfig": {"thinkingBudget": 2048}}),
        "",
    );
    check(
        Anthropic,
        effort_only,
        Anthropic,
        json!({"thinking": null, "effort": "low"}),
        "",
    );
}

#[test]
fn openai_effort_to_each_target() {
    let cases = [
        (
            "none",
            json!({"type": "disabled"}),
            Value::Null,
            json!({"thinkingBudget": 0}),
        ),
        (
            "minimal",
            json!({"type": "adaptive"}),
            json!("low"),
            json!({"thinkingBudget": 1024}),
        ),
        (
            "low",
            json!({"type": "adaptive"}),
            json!("low"),
            json!({"thinkingBudget": 2048}),
        ),
        (
            "medium",
            json!({"type": "adaptive"}),
            json!("medium"),
            json!({"thinkingBudget": 8192}),
        ),
        (
            "high",
            json!({"type": "adaptive"}),
            json!("high"),
            json!({"thinkingBudget": 16384}),
        ),
        (
            "xhigh",
            json!({"type": "adaptive"}),
            json!("xhigh"),
            json!({"thinkingBudget": 24576}),
        ),
    ];
    for (effort, thinking, anthropic_effort, gemini) in cases {
        let settings = json!({"reasoning_effort": effort});
        check(
            OpenAi,
            settings.clone(),
            Anthropic,
            json!({"thinking": thinking, "effort": anthropic_effort}),
            "",
        );
        check(
            OpenAi,
            settings,
            Gemini,
            json!({"thinkingConfig": gemini}),
            "",
        );
    }
    // An effort no protocol knows is reported, not passed on.
    check(
        OpenAi,
        json!({"reasoning_effort": "extreme"}),
        Gemini,
        json!({"thinkingConfig": {"thinkingBudget": -1}}),
        "",
    );
    check(
        OpenAi,
        json!({"reasoning_effort": "extreme"}),
        Anthropic,
        json!({"thinking": {"type": "adaptive"}, "effort": null}),
        "dropped=reasoning_effort",
    );
}

#[test]
fn gemini_thinking_config_to_each_target() {
    let tc = |v: Value| json!({"thinkingConfig": v});
    check(
        Gemini,
        tc(json!({"thinkingBudget": 0})),
        OpenAi,
        json!({"reasoning_effort": null}),
        "dropped=generationConfig.thinkingConfig",
    );
    check(
        Gemini,
        tc(json!({"thinkingBudget": 0})),
        Anthropic,
        json!({"thinking": {"type": "disabled"}, "effort": null}),
        "",
    );
    check(
        Gemini,
        tc(json!({"thinkingBudget": 3000})),
        OpenAi,
        json!({"reasoning_effort": "low"}),
        "",
    );
    check(
        Gemini,
        tc(json!({"thinkingBudget": 3000, "includeThoughts": true})),
        Anthropic,
        json!({"thinking": {"type": "enabled", "budget_tokens": 3000}, "effort": null}),
        "",
    );
    check(
        Gemini,
        tc(json!({"thinkingBudget": -1})),
        OpenAi,
        json!({"reasoning_effort": "medium"}),
        "",
    );
    check(
        Gemini,
        tc(json!({"thinkingBudget": -1})),
        Anthropic,
        json!({"thinking": {"type": "adaptive"}, "effort": null}),
        "",
    );
    check(
        Gemini,
        tc(json!({"thinkingLevel": "HIGH"})),
        OpenAi,
        json!({"reasoning_effort": "high"}),
        "",
    );
    check(
        Gemini,
        tc(json!({"thinkingLevel": "HIGH"})),
        Anthropic,
        json!({"thinking": {"type": "adaptive"}, "effort": "high"}),
        "",
    );
    // google-genai's snake_case spelling.
    check(
        Gemini,
        json!({"thinking_config": {"thinking_level": "minimal", "include_thoughts": true}}),
        Anthropic,
        json!({"thinking": {"type": "adaptive"}, "effort": "low"}),
        "",
    );
    check(
        Gemini,
        tc(json!({"includeThoughts": true})),
        Anthropic,
        json!({"thinking": {"type": "adaptive"}, "effort": null}),
        "",
    );
    check(
        Gemini,
        tc(json!({"includeThoughts": true})),
        OpenAi,
        json!({"reasoning_effort": null}),
        "",
    );
    // The level stays a level for Gemini itself.
    check(
        Gemini,
        tc(json!({"thinkingLevel": "LOW"})),
        Gemini,
        json!({"thinkingConfig": {"thinkingLevel": "LOW"}}),
        "",
    );
}

#[test]
fn a_budget_that_does_not_fit_max_tokens_is_dropped_and_reported() {
    let ctx = DecodeContext {
        model: Some("m"),
        stream: false,
    };
    let body = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "generationConfig": {"maxOutputTokens": 1000, "thinkingConfig": {"thinkingBudget": 800}}});
    let req = decode_request(Gemini, &serde_json::to_vec(&body).unwrap_or_default(), &ctx);
    assert!(req.is_ok());
    let Ok(req) = req else { return };
    let opts = EncodeOptions {
        upstream_model: "m",
        default_max_tokens: 4000,
        stream: false,
        native_structured_output: false,
    };
    let mut adj = Adjustments::default();
    let out = encode_request_value(Anthropic, &req, &opts, &mut adj).unwrap_or_default();
    assert_eq!(out.get("thinking"), None);
    assert_eq!(adj.render(), "dropped=generationConfig.thinkingConfig");
}

#[test]
fn a_budget_from_an_effort_leaves_half_the_output_to_the_answer() {
    let ctx = DecodeContext {
        model: Some("m"),
        stream: false,
    };
    let opts = EncodeOptions {
        upstream_model: "m",
        default_max_tokens: 4000,
        stream: false,
        native_structured_output: false,
    };
    for (max_tokens, want) in [(4000, 2000), (40000, 16384), (100, 128)] {
        let body = json!({"model": "m", "max_tokens": max_tokens, "reasoning_effort": "high",
            "messages": [{"role": "user", "content": "hi"}]});
        let req = decode_request(OpenAi, &serde_json::to_vec(&body).unwrap_or_default(), &ctx);
        assert!(req.is_ok());
        let Ok(req) = req else { return };
        let out = encode_request_value(Gemini, &req, &opts, &mut Adjustments::default())
            .unwrap_or_default();
        assert_eq!(
            out.pointer("/generationConfig/thinkingConfig/thinkingBudget"),
            Some(&json!(want)),
            "max_tokens {max_tokens}"
        );
    }
}

#[test]
fn responses_reasoning_to_each_target() {
    let high = json!({"reasoning": {"effort": "high", "summary": "auto"}});
    check(
        Responses,
        high.clone(),
        OpenAi,
        json!({"reasoning_effort": "high"}),
        "",
    );
    check(
        Responses,
        high.clone(),
        Anthropic,
        json!({"thinking": {"type": "adaptive"}, "effort": "high"}),
        "",
    );
    check(
        Responses,
        high.clone(),
        Gemini,
        json!({"thinkingConfig": {"thinkingBudget": 16384, "includeThoughts": true}}),
        "",
    );
    check(
        Responses,
        high,
        Responses,
        json!({"reasoning": {"effort": "high", "summary": "auto"}}),
        "",
    );
    // Effort alone: reasoning, but no text asked for.
    check(
        Responses,
        json!({"reasoning": {"effort": "minimal"}}),
        Gemini,
        json!({"thinkingConfig": {"thinkingBudget": 1024}}),
        "",
    );
    check(
        Responses,
        json!({"reasoning": {"effort": "none"}}),
        Anthropic,
        json!({"thinking": {"type": "disabled"}, "effort": null}),
        "",
    );
    check(
        Responses,
        json!({"reasoning": {"effort": "none"}}),
        OpenAi,
        json!({"reasoning_effort": "none"}),
        "",
    );
}

#[test]
fn each_source_to_responses_reasoning() {
    check(
        Anthropic,
        json!({"thinking": {"type": "enabled", "budget_tokens": 10000}}),
        Responses,
        json!({"reasoning": {"effort": "medium", "summary": "auto"}}),
        "",
    );
    check(
        Anthropic,
        json!({"thinking": {"type": "adaptive"}, "output_config": {"effort": "max"}}),
        Responses,
        json!({"reasoning": {"effort": "high", "summary": "auto"}}),
        "",
    );
    check(
        Anthropic,
        json!({"thinking": {"type": "disabled"}}),
        Responses,
        json!({"reasoning": null}),
        "dropped=thinking",
    );
    // An OpenAI chat client's effort does not ask for summaries (they need a
    // verified OpenAI organization).
    check(
        OpenAi,
        json!({"reasoning_effort": "low"}),
        Responses,
        json!({"reasoning": {"effort": "low"}}),
        "",
    );
    check(
        Gemini,
        json!({"thinkingConfig": {"thinkingBudget": 3000, "includeThoughts": true}}),
        Responses,
        json!({"reasoning": {"effort": "low", "summary": "auto"}}),
        "",
    );
    check(
        Gemini,
        json!({"thinkingConfig": {"thinkingLevel": "HIGH"}}),
        Responses,
        json!({"reasoning": {"effort": "high"}}),
        "",
    );
}

// ---------------------------------------------------------------- carried state

fn ctx() -> DecodeContext<'static> {
    DecodeContext {
        model: Some("m"),
        stream: false,
    }
}

fn opts() -> EncodeOptions<'static> {
    EncodeOptions {
        upstream_model: "m",
        default_max_tokens: 4000,
        stream: false,
        native_structured_output: false,
    }
}

/// What a `client` sees for an `upstream` response body.
fn client_sees(upstream: Family, body: &Value, client: Family) -> Value {
    let resp = decode_response(upstream, &serde_json::to_vec(body).unwrap_or_default());
    assert!(resp.is_ok(), "{resp:?}");
    let Ok(resp) = resp else { return Value::Null };
    encode_response_value(client, &resp, "m").unwrap_or_default()
}

/// What an `upstream` receives for a `client` request body.
fn upstream_gets(client: Family, body: &Value, upstream: Family) -> Value {
    let req = decode_request(
        client,
        &serde_json::to_vec(body).unwrap_or_default(),
        &ctx(),
    );
    assert!(req.is_ok(), "{req:?}");
    let Ok(req) = req else { return Value::Null };
    encode_request_value(upstream, &req, &opts(), &mut Adjustments::default()).unwrap_or_default()
}

/// A Responses client's next request, with `output` (what it was given) sent back.
fn responses_follow_up(output: &Value) -> Value {
    let mut input = vec![json!({"role": "user", "content": "hi"})];
    input.extend(output.as_array().cloned().unwrap_or_default());
    input.push(json!({"type": "function_call_output", "call_id": "call_1", "output": "42"}));
    json!({"model": "m", "input": input})
}

#[test]
fn an_anthropic_signature_survives_a_responses_client() {
    let upstream = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [
            {"type": "thinking", "thinking": "Let me think.", "signature": "EqQBCkgIARAB"},
            {"type": "tool_use", "id": "call_1", "name": "f", "input": {"a": 1}}
        ],
        "stop_reason": "tool_use", "usage": {"input_tokens": 5, "output_tokens": 7}});
    let seen = client_sees(Anthropic, &upstream, Responses);
    let reasoning = &seen["output"][0];
    assert_eq!(reasoning["type"], "reasoning");
    assert_eq!(
        reasoning["summary"],
        json!([{"type": "summary_text", "text": "Let me think."}])
    );
    assert_eq!(reasoning["encrypted_content"], "swb-sig:EqQBCkgIARAB");
    let sent = upstream_gets(Responses, &responses_follow_up(&seen["output"]), Anthropic);
    assert_eq!(
        sent["messages"][1]["content"][0],
        json!({"type": "thinking", "thinking": "Let me think.", "signature": "EqQBCkgIARAB"})
    );
    // Redacted thinking comes back redacted.
    let redacted = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "redacted_thinking", "data": "ENCRYPTED"}, {"type": "text", "text": "ok"}],
        "stop_reason": "end_turn", "usage": {"input_tokens": 5, "output_tokens": 7}});
    let seen = client_sees(Anthropic, &redacted, Responses);
    let sent = upstream_gets(Responses, &responses_follow_up(&seen["output"]), Anthropic);
    assert_eq!(
        sent["messages"][1]["content"][0],
        json!({"type": "redacted_thinking", "data": "ENCRYPTED"})
    );
    // An OpenAI upstream is never sent a foreign signature.
    let to_openai = upstream_gets(Responses, &responses_follow_up(&seen["output"]), Responses);
    assert!(
        !to_openai.to_string().contains("ENCRYPTED"),
        "{to_openai:#}"
    );
}

#[test]
fn a_gemini_thought_signature_survives_a_responses_client() {
    let upstream = json!({"candidates": [{"content": {"role": "model", "parts": [
            {"text": "Pondering.", "thought": true, "thoughtSignature": "CiQBVKhc7w=="},
            {"functionCall": {"id": "call_1", "name": "f", "args": {"a": 1}}}
        ]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 7}, "modelVersion": "m"});
    let seen = client_sees(Gemini, &upstream, Responses);
    assert_eq!(
        seen["output"][0]["encrypted_content"],
        "swb-sig:CiQBVKhc7w=="
    );
    let sent = upstream_gets(Responses, &responses_follow_up(&seen["output"]), Gemini);
    assert_eq!(
        sent["contents"][1]["parts"][0],
        json!({"text": "Pondering.", "thought": true, "thoughtSignature": "CiQBVKhc7w=="})
    );
}

fn responses_upstream() -> Value {
    json!({"id": "resp_1", "object": "response", "created_at": 1_700_000_000, "status": "completed",
        "model": "m", "output": [
            {"id": "rs_abc", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Plan."}],
             "encrypted_content": "gAAAAABo_x-y+z/w=="},
            {"id": "fc_1", "type": "function_call", "status": "completed", "call_id": "call_1",
             "name": "f", "arguments": "{\"a\":1}"}
        ],
        "usage": {"input_tokens": 5, "output_tokens": 7, "total_tokens": 12,
            "input_tokens_details": {"cached_tokens": 0}, "output_tokens_details": {"reasoning_tokens": 4}}})
}

/// The reasoning item a Responses upstream must get back.
fn original_item() -> Value {
    json!({"type": "reasoning", "id": "rs_abc", "summary": [{"type": "summary_text", "text": "Plan."}],
        "encrypted_content": "gAAAAABo_x-y+z/w=="})
}

#[test]
fn encrypted_reasoning_survives_an_anthropic_client() {
    let seen = client_sees(Responses, &responses_upstream(), Anthropic);
    let thinking = &seen["content"][0];
    assert_eq!(thinking["type"], "thinking");
    assert_eq!(thinking["thinking"], "Plan.");
    let next = json!({"model": "m", "max_tokens": 100, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": seen["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "42"}]}
    ]});
    let sent = upstream_gets(Anthropic, &next, Responses);
    assert_eq!(sent["input"][1], original_item(), "{sent:#}");
    assert_eq!(sent["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(sent["store"], json!(false));
    // Routed to an Anthropic upstream instead, the foreign state is left out.
    let to_anthropic = upstream_gets(Anthropic, &next, Anthropic);
    assert_eq!(
        to_anthropic["messages"][1]["content"][0]["type"],
        "tool_use"
    );
}

#[test]
fn encrypted_reasoning_survives_a_gemini_client() {
    let seen = client_sees(Responses, &responses_upstream(), Gemini);
    let part = &seen["candidates"][0]["content"]["parts"][0];
    assert_eq!(part["thought"], true);
    // google-genai decodes the signature to bytes and may send it back URL-safe, unpadded.
    let sig = part["thoughtSignature"].as_str().unwrap_or_default();
    let url_safe: String = sig
        .trim_end_matches('=')
        .chars()
        .map(|c| match c {
            '+' => '-',
            '/' => '_',
            c => c,
        })
        .collect();
    let mut parts = seen["candidates"][0]["content"]["parts"].clone();
    parts[0]["thoughtSignature"] = json!(url_safe);
    let next = json!({"contents": [
        {"role": "user", "parts": [{"text": "hi"}]},
        {"role": "model", "parts": parts},
        {"role": "user", "parts": [{"functionResponse": {"id": "call_1", "name": "f", "response": {"r": 42}}}]}
    ]});
    let sent = upstream_gets(Gemini, &next, Responses);
    assert_eq!(sent["input"][1], original_item(), "{sent:#}");
    // Routed to a Gemini upstream instead, the thought keeps no foreign signature.
    let to_gemini = upstream_gets(Gemini, &next, Gemini);
    assert_eq!(
        to_gemini["contents"][1]["parts"][0],
        json!({"text": "Plan.", "thought": true})
    );
}
