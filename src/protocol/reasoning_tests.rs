//! The reasoning mapping, every source against every target: Anthropic
//! `thinking` / `output_config.effort`, OpenAI `reasoning_effort` and Gemini
//! `thinkingConfig`, decoded into the one canonical notion and encoded again.

use super::{decode_request, encode_request_value, DecodeContext, EncodeOptions};
use crate::adjust::Adjustments;
use crate::family::Family::{self, Anthropic, Gemini, OpenAi};
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
    };
    let target = if family == Gemini {
        &mut v["generationConfig"]
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
    };
    (fields, adj.render())
}

fn check(from: Family, settings: Value, to: Family, want: Value, report: &str) {
    let (got, adjusted) = translate(from, settings.clone(), to);
    assert_eq!(got, want, "{from} {settings} -> {to}");
    assert_eq!(adjusted, report, "{from} {settings} -> {to}: report");
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
