//! Golden translation tests: every fixture under `tests/golden/<from>_to_<to>/`
//! is run (the directory listing drives the test, so no fixture can be
//! skipped), plus round-trip property tests for each family.
//!
//! A fixture translates its `input`, written in the `<from>` protocol, into
//! the `<to>` protocol and compares the result with `expected` exactly
//! (`serde_json::Value` equality; the string `"$number"` in `expected`
//! matches any number, for the `created` timestamp a gateway must invent).
//!
//! - `kind: "request"`: `decode_request(<from>)` then `encode_request(<to>)`.
//! - `kind: "response"`: `decode_response(<from>)` then `encode_response(<to>)`
//!   (so a response fixture in `anthropic_to_openai` is what an OpenAI client
//!   sees from an Anthropic upstream).
//! - `kind: "request_error"` / `"response_error"`: the translation must fail
//!   with `expected_error.status`, `expected_error.param` and a message
//!   containing `expected_error.message_contains`.
//!
//! `"expected": "$input"` says the output must equal the input (lossless
//! same-family round trips in `<f>_to_<f>` directories).
//!
//! A request fixture may say `expected_adjusted`: what the translation reports
//! it dropped (the `x-switchboard-adjusted` form, e.g. `dropped=user,top_k`),
//! `""` for nothing; without it, the report is not checked. Blessing writes it
//! for every request fixture whose translation drops something.
//!
//! `options` may set `upstream_model`, `default_max_tokens`, `stream`,
//! `path_model`, `path_stream` (the Gemini path), `client_model` and
//! `native_structured_output` (the model enforces schemas; default false).
//! `covers` lists the features a fixture exercises; every cross-family pair
//! must cover the whole feature list.
//!
//! Run with `GOLDEN_BLESS=1` to (re)write `expected` / `expected_error` from
//! the current output, then review the diff.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "tests fail by panicking"
)]

use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use switchboard::adjust::Adjustments;
use switchboard::family::Family;
use switchboard::protocol::responses::namespace::Namespaces;
use switchboard::protocol::responses::response::encode_named;
use switchboard::protocol::{
    decode_request, decode_response, encode_request_value, encode_response_value, DecodeContext,
    EncodeOptions, TranslateError,
};

const REQUEST_FEATURES: &[&str] = &[
    "system",
    "multi_turn",
    "image_base64",
    "image_url",
    "tools",
    "tool_choice",
    "tool_calls",
    "tool_results",
    "response_format_json_object",
    "response_format_json_schema",
    "stop_sequences",
    "sampling",
    "thinking",
];

const RESPONSE_FEATURES: &[&str] = &[
    "text",
    "tool_calls",
    "stop_reasons",
    "usage_cache",
    "thinking",
];

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn parse_dir_name(name: &str) -> Option<(Family, Family)> {
    let (from, to) = name.split_once("_to_")?;
    Some((Family::from_name(from)?, Family::from_name(to)?))
}

fn opt_str<'a>(options: &'a Value, key: &str) -> Option<&'a str> {
    options.get(key).and_then(Value::as_str)
}

/// Runs one fixture's translation; for requests, also what it reported dropping.
fn translate(
    from: Family,
    to: Family,
    fixture: &Value,
    adjusted: &mut Adjustments,
) -> Result<Value, TranslateError> {
    let options = fixture.get("options").cloned().unwrap_or(json!({}));
    let kind = fixture["kind"].as_str().unwrap_or_default();
    let input = serde_json::to_vec(&fixture["input"]).unwrap();
    if kind.starts_with("request") {
        let ctx = DecodeContext {
            model: opt_str(&options, "path_model"),
            stream: options
                .get("path_stream")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        };
        let req = decode_request(from, &input, &ctx)?;
        let opts = EncodeOptions {
            upstream_model: opt_str(&options, "upstream_model").unwrap_or("upstream-model"),
            default_max_tokens: options
                .get("default_max_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(4096),
            stream: options
                .get("stream")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            native_structured_output: options
                .get("native_structured_output")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        };
        encode_request_value(to, &req, &opts, adjusted)
    } else {
        let resp = decode_response(from, &input)?;
        let client_model = opt_str(&options, "client_model").unwrap_or("client-model");
        // The Responses client's own request tools (its namespaces).
        let names = options
            .get("client_tools")
            .map_or_else(Namespaces::default, |t| {
                Namespaces::declared(&serde_json::to_vec(&json!({ "tools": t })).unwrap())
            });
        if to == Family::Responses && !names.is_empty() {
            return encode_named(&resp, client_model, &names);
        }
        encode_response_value(to, &resp, client_model)
    }
}

/// `expected` matches `actual`: equal, with `"$number"` matching any number.
fn matches(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::String(s), Value::Number(_)) if s == "$number" => true,
        (Value::Object(e), Value::Object(a)) => {
            e.len() == a.len()
                && e.iter()
                    .all(|(k, v)| a.get(k).is_some_and(|av| matches(v, av)))
        }
        (Value::Array(e), Value::Array(a)) => {
            e.len() == a.len() && e.iter().zip(a).all(|(ev, av)| matches(ev, av))
        }
        _ => expected == actual,
    }
}

/// The JSON paths where `expected` and `actual` differ.
fn diff(path: &str, expected: &Value, actual: &Value, out: &mut Vec<String>) {
    if matches(expected, actual) {
        return;
    }
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            let keys: BTreeSet<&String> = e.keys().chain(a.keys()).collect();
            for k in keys {
                let p = format!("{path}.{k}");
                match (e.get(k), a.get(k)) {
                    (Some(ev), Some(av)) => diff(&p, ev, av, out),
                    (Some(ev), None) => out.push(format!("{p}: missing (expected {ev})")),
                    (None, Some(av)) => out.push(format!("{p}: unexpected {av}")),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(e), Value::Array(a)) if e.len() == a.len() => {
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                diff(&format!("{path}[{i}]"), ev, av, out);
            }
        }
        _ => out.push(format!("{path}: expected {expected}, got {actual}")),
    }
}

fn error_value(e: &TranslateError) -> Value {
    json!({"status": e.status(), "param": e.param, "message_contains": e.message})
}

fn check_fixture(from: Family, to: Family, path: &Path, bless: bool) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    let mut fixture: Value =
        serde_json::from_str(&text).map_err(|e| format!("invalid JSON: {e}"))?;
    let kind = fixture["kind"].as_str().unwrap_or_default().to_string();
    let mut adjusted = Adjustments::default();
    let result = translate(from, to, &fixture, &mut adjusted);
    let report = adjusted.render();
    let wants_error = kind.ends_with("_error");
    if bless {
        match (&result, wants_error) {
            (Ok(_), false) if fixture["expected"] == json!("$input") => {}
            (Ok(actual), false) => {
                let mut actual = actual.clone();
                if to == Family::OpenAi && kind == "response" && from != Family::OpenAi {
                    actual["created"] = json!("$number");
                }
                if to == Family::Responses && kind == "response" && from != Family::Responses {
                    actual["created_at"] = json!("$number");
                }
                fixture["expected"] = actual;
                if kind == "request"
                    && (!report.is_empty() || fixture.get("expected_adjusted").is_some())
                {
                    fixture["expected_adjusted"] = json!(report);
                }
            }
            (Err(e), true) => fixture["expected_error"] = error_value(e),
            (Ok(v), true) => return Err(format!("expected an error, got {v}")),
            (Err(e), false) => return Err(format!("unexpected error: {e:?}")),
        }
        let mut pretty = serde_json::to_string_pretty(&fixture).unwrap();
        pretty.push('\n');
        std::fs::write(path, pretty).map_err(|e| format!("cannot write: {e}"))?;
        return Ok(());
    }
    match (result, wants_error) {
        (Ok(actual), false) => {
            // `"expected": "$input"`: a lossless same-family round trip.
            let expected = if fixture["expected"] == json!("$input") {
                &fixture["input"]
            } else {
                &fixture["expected"]
            };
            let mut diffs = Vec::new();
            diff("$", expected, &actual, &mut diffs);
            if let Some(want) = fixture.get("expected_adjusted").and_then(Value::as_str) {
                if want != report {
                    diffs.push(format!("adjusted: expected {want:?}, got {report:?}"));
                }
            }
            if diffs.is_empty() {
                Ok(())
            } else {
                let mut msg = String::new();
                for d in diffs.iter().take(20) {
                    let _ = writeln!(msg, "    {d}");
                }
                let _ = write!(
                    msg,
                    "    actual output:\n{}",
                    serde_json::to_string_pretty(&actual).unwrap()
                );
                Err(msg)
            }
        }
        (Err(e), true) => {
            let want = &fixture["expected_error"];
            let mut problems = Vec::new();
            if want.get("status").and_then(Value::as_u64) != Some(u64::from(e.status())) {
                problems.push(format!(
                    "status {} (expected {})",
                    e.status(),
                    want["status"]
                ));
            }
            if want.get("param") != Some(&json!(e.param)) {
                problems.push(format!("param {:?} (expected {})", e.param, want["param"]));
            }
            let needle = want["message_contains"].as_str().unwrap_or("\u{0}");
            if !e.message.contains(needle) {
                problems.push(format!("message {:?} lacks {needle:?}", e.message));
            }
            if problems.is_empty() {
                Ok(())
            } else {
                Err(format!("    wrong error: {}", problems.join("; ")))
            }
        }
        (Ok(v), true) => Err(format!("    expected an error, got {v}")),
        (Err(e), false) => Err(format!("    unexpected error: {e:?}")),
    }
}

#[test]
fn golden_fixtures() {
    let bless = std::env::var_os("GOLDEN_BLESS").is_some();
    let mut failures = Vec::new();
    let mut counted = 0;
    let mut pairs = BTreeSet::new();
    let mut dirs: Vec<_> = std::fs::read_dir(golden_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        // `streams/` holds the stream translation fixtures (tests/stream_translate.rs).
        .filter(|p| p.is_dir() && !p.ends_with("streams"))
        .collect();
    dirs.sort();
    for dir in dirs {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let (from, to) = parse_dir_name(&name)
            .unwrap_or_else(|| panic!("directory {name} is not named <family>_to_<family>"));
        pairs.insert((from.name(), to.name()));
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let mut covered: BTreeSet<String> = BTreeSet::new();
        let mut kinds: BTreeSet<String> = BTreeSet::new();
        for file in files {
            assert_eq!(
                file.extension().and_then(|e| e.to_str()),
                Some("json"),
                "{} is not a .json fixture",
                file.display()
            );
            counted += 1;
            let fixture: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            let kind = fixture["kind"].as_str().unwrap_or_default().to_string();
            assert!(
                ["request", "response", "request_error", "response_error"].contains(&kind.as_str()),
                "{}: unknown kind {kind:?}",
                file.display()
            );
            for c in fixture["covers"].as_array().into_iter().flatten() {
                covered.insert(format!("{}:{}", kind, c.as_str().unwrap()));
            }
            kinds.insert(kind);
            if let Err(msg) = check_fixture(from, to, &file, bless) {
                failures.push(format!("{}:\n{msg}", file.display()));
            }
        }
        if from != to {
            for f in REQUEST_FEATURES {
                // An Anthropic client has no way to ask for a bare JSON object.
                if from == Family::Anthropic && *f == "response_format_json_object" {
                    continue;
                }
                // The Responses API has no stop sequences.
                if from == Family::Responses && *f == "stop_sequences" {
                    continue;
                }
                // Converse takes images as bytes or S3 locations, never
                // URLs (an image URL to it is an error fixture).
                if to == Family::Bedrock && *f == "image_url" {
                    continue;
                }
                // Converse has no JSON output setting, and takes images as
                // bytes or S3 locations, never URLs.
                if from == Family::Bedrock
                    && matches!(
                        *f,
                        "response_format_json_object" | "response_format_json_schema" | "image_url"
                    )
                {
                    continue;
                }
                assert!(
                    covered.contains(&format!("request:{f}")),
                    "{name}: no request fixture covers {f}"
                );
            }
            for f in RESPONSE_FEATURES {
                assert!(
                    covered.contains(&format!("response:{f}")),
                    "{name}: no response fixture covers {f}"
                );
            }
            assert!(
                kinds.contains("request_error"),
                "{name}: no request_error fixture"
            );
        }
    }
    for from in Family::ALL {
        for to in Family::ALL {
            if from != to {
                assert!(
                    pairs.contains(&(from.name(), to.name())),
                    "no golden directory {}_to_{}",
                    from.name(),
                    to.name()
                );
            }
        }
    }
    assert!(counted > 0, "no fixtures found");
    assert!(
        failures.is_empty(),
        "{} of {counted} fixtures failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ---------------------------------------------------------------- round trips

mod roundtrip {
    //! Same-family round trips: for a generated canonical request or response
    //! that a family can express, encoding it (wire W1), decoding W1 and
    //! encoding again must give W1 back exactly. So every field the encoder
    //! can write, the decoder reads back without loss, unknown fields included.

    use super::*;
    use proptest::prelude::*;
    use switchboard::ir::{
        Block, ChatRequest, ChatResponse, Extra, FunctionTool, ImageBlock, ImageSource,
        JsonSchemaFormat, Message, Reasoning, RedactedThinkingBlock, ResponseFormat, Role,
        Sampling, StopReason, SystemPrompt, SystemRole, TextBlock, ThinkingBlock, Tool, ToolCall,
        ToolChoice, ToolResult, Usage,
    };

    fn word() -> impl Strategy<Value = String> {
        "[a-z]{1,8}( [a-z]{1,8}){0,3}"
    }

    fn extra_for(family: Family) -> impl Strategy<Value = Extra> {
        prop::option::of(("x_[a-z]{1,4}", "[a-z]{0,5}")).prop_map(move |kv| {
            let mut m = Map::new();
            if let Some((k, v)) = kv {
                m.insert(k, json!(v));
            }
            Extra::new(family, m)
        })
    }

    fn cache_control(family: Family) -> BoxedStrategy<Option<Value>> {
        if family == Family::Anthropic {
            prop::option::of(Just(json!({"type": "ephemeral"}))).boxed()
        } else {
            Just(None).boxed()
        }
    }

    fn text_block(family: Family) -> impl Strategy<Value = Block> {
        (
            word(),
            cache_control(family),
            extra_for(family),
            prop::option::of("[A-Za-z0-9+/]{4,12}"),
        )
            .prop_map(move |(text, cache_control, extra, sig)| {
                Block::Text(TextBlock {
                    text,
                    cache_control,
                    signature: if family == Family::Gemini { sig } else { None },
                    extra,
                })
            })
    }

    fn image_block(family: Family) -> impl Strategy<Value = Block> {
        (any::<bool>(), "[A-Za-z0-9]{4,16}", cache_control(family)).prop_map(
            move |(inline, data, cc)| {
                let source = if inline {
                    ImageSource::Base64 {
                        media_type: "image/png".into(),
                        data,
                    }
                } else {
                    ImageSource::Url {
                        url: format!("https://example.com/{data}.png"),
                        media_type: (family == Family::Gemini).then(|| "image/png".to_string()),
                    }
                };
                Block::Image(ImageBlock {
                    source,
                    detail: (family == Family::OpenAi).then(|| "high".to_string()),
                    cache_control: cc,
                    extra: Extra::default(),
                })
            },
        )
    }

    fn args() -> impl Strategy<Value = Value> {
        prop::collection::btree_map(
            "[a-z]{1,5}",
            prop_oneof![
                word().prop_map(Value::from),
                (0i64..100).prop_map(Value::from)
            ],
            0..3,
        )
        .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    /// A conversation: user turns, assistant turns with tool calls, and user
    /// turns answering every call of the previous assistant turn.
    fn conversation(family: Family) -> impl Strategy<Value = Vec<Message>> {
        let user_block = prop_oneof![text_block(family), image_block(family)];
        let turn = (
            prop::collection::vec(user_block, 1..3),
            prop::collection::vec(text_block(family), 0..2),
            prop::collection::vec(
                ("[a-z]{3,6}", args(), prop::option::of("[A-Za-z0-9+/]{8}")),
                0..3,
            ),
            prop::option::of(("[a-z]{3,9}", prop::option::of("[A-Za-z0-9]{6}"))),
            any::<bool>(),
            extra_for(family),
        );
        prop::collection::vec(turn, 1..4).prop_map(move |turns| {
            let mut messages = Vec::new();
            let mut n = 0;
            for (user, texts, calls, thinking, is_error, extra) in turns {
                let mut user_msg = Message::new(Role::User, user);
                if family != Family::Gemini {
                    user_msg.extra = extra;
                }
                messages.push(user_msg);
                let mut assistant = Vec::new();
                if let Some((text, sig)) = thinking {
                    match family {
                        Family::Anthropic | Family::Bedrock => {
                            if let Some(sig) = sig {
                                assistant.push(Block::Thinking(ThinkingBlock {
                                    text,
                                    signature: Some(sig),
                                    extra: Extra::default(),
                                }));
                            } else {
                                assistant.push(Block::RedactedThinking(RedactedThinkingBlock {
                                    data: text,
                                    extra: Extra::default(),
                                }));
                            }
                        }
                        Family::Gemini => assistant.push(Block::Thinking(ThinkingBlock {
                            text,
                            signature: sig,
                            extra: Extra::default(),
                        })),
                        Family::OpenAi => assistant.push(Block::Thinking(ThinkingBlock {
                            text,
                            signature: None,
                            extra: Extra::default(),
                        })),
                        // A Responses upstream gets back only reasoning it issued.
                        Family::Responses => assistant.push(Block::Thinking(ThinkingBlock {
                            text,
                            signature: sig.map(|s| {
                                switchboard::ir::signature::wrap_reasoning_item("rs_1", &s)
                            }),
                            extra: Extra::default(),
                        })),
                    }
                }
                assistant.extend(texts);
                let mut results = Vec::new();
                for (name, arguments, sig) in calls {
                    n += 1;
                    let id = format!("call_{n}");
                    assistant.push(Block::ToolCall(ToolCall {
                        id: id.clone(),
                        name: name.clone(),
                        arguments,
                        signature: if family == Family::Gemini { sig } else { None },
                        cache_control: None,
                        extra: Extra::default(),
                    }));
                    results.push(Block::ToolResult(ToolResult {
                        call_id: id,
                        name: Some(name),
                        content: vec![Block::text(format!("result {n}"))],
                        is_error: (family == Family::Anthropic && is_error).then_some(true),
                        cache_control: None,
                        extra: Extra::default(),
                    }));
                }
                if !assistant.is_empty() {
                    messages.push(Message::new(Role::Assistant, assistant));
                }
                if !results.is_empty() {
                    messages.push(Message::new(Role::User, results));
                }
            }
            messages
        })
    }

    fn tool(family: Family) -> impl Strategy<Value = Tool> {
        ("[a-z]{3,6}", prop::option::of(word()), cache_control(family), extra_for(family)).prop_map(
            move |(name, description, cache_control, extra)| {
                Tool::Function(FunctionTool {
                    name,
                    description,
                    parameters: Some(json!({"type": "object", "properties": {"q": {"type": "string", "description": "query"}}, "required": ["q"]})),
                    strict: (family == Family::OpenAi).then_some(true),
                    cache_control,
                    extra: if family == Family::Gemini { Extra::default() } else { extra },
                })
            },
        )
    }

    fn tool_choice(family: Family) -> BoxedStrategy<Option<ToolChoice>> {
        let mut options = vec![
            Just(None).boxed(),
            Just(Some(ToolChoice::Auto)).boxed(),
            Just(Some(ToolChoice::None)).boxed(),
            Just(Some(ToolChoice::Required)).boxed(),
            "[a-z]{3,6}".prop_map(|n| Some(ToolChoice::Tool(n))).boxed(),
        ];
        if family != Family::Anthropic {
            options.push(
                (any::<bool>(), prop::collection::vec("[a-z]{3,6}", 2..4))
                    .prop_map(|(required, names)| Some(ToolChoice::Allowed { required, names }))
                    .boxed(),
            );
        }
        prop::strategy::Union::new(options).boxed()
    }

    fn response_format(family: Family) -> BoxedStrategy<Option<ResponseFormat>> {
        let schema = json!({"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]});
        prop_oneof![
            Just(None),
            Just(Some(ResponseFormat::Text)),
            Just(Some(ResponseFormat::JsonObject)),
            Just(Some(ResponseFormat::JsonSchema(JsonSchemaFormat {
                name: (family == Family::OpenAi).then(|| "answer".to_string()),
                description: None,
                schema,
                strict: (family == Family::OpenAi).then_some(true),
            }))),
        ]
        .boxed()
    }

    fn reasoning(family: Family) -> BoxedStrategy<Option<Reasoning>> {
        match family {
            Family::Responses => (
                prop::option::of(prop::sample::select(vec!["low", "medium", "high"])),
                any::<bool>(),
            )
                .prop_map(|(e, summary)| {
                    (e.is_some() || summary).then(|| Reasoning {
                        effort: e.map(str::to_string),
                        include_thoughts: summary.then_some(true),
                        ..Reasoning::default()
                    })
                })
                .boxed(),
            Family::OpenAi => prop::option::of(prop::sample::select(vec!["low", "medium", "high"]))
                .prop_map(|e| {
                    e.map(|e| Reasoning {
                        effort: Some(e.to_string()),
                        ..Reasoning::default()
                    })
                })
                .boxed(),
            Family::Anthropic | Family::Bedrock => prop_oneof![
                Just(None),
                Just(Some(Reasoning {
                    enabled: Some(false),
                    ..Reasoning::default()
                })),
                (1024i64..4000).prop_map(|b| Some(Reasoning {
                    enabled: Some(true),
                    budget_tokens: Some(b),
                    ..Reasoning::default()
                })),
            ]
            .boxed(),
            Family::Gemini => (
                prop::option::of(prop_oneof![Just(0i64), Just(-1i64), 1i64..30000]),
                prop::option::of(any::<bool>()),
            )
                .prop_map(|(budget, include)| {
                    (budget.is_some() || include.is_some()).then(|| Reasoning {
                        enabled: (budget == Some(0)).then_some(false),
                        budget_tokens: budget,
                        include_thoughts: include,
                        ..Reasoning::default()
                    })
                })
                .boxed(),
        }
    }

    fn sampling(family: Family) -> impl Strategy<Value = Sampling> {
        (
            prop::option::of((0u32..=100).prop_map(|t| f64::from(t) / 100.0)),
            prop::option::of((1u32..=100).prop_map(|t| f64::from(t) / 100.0)),
            prop::option::of(1u64..100),
            prop::option::of(5000u64..20000),
            prop::collection::vec("[A-Z]{2,4}", 0..3),
            prop::option::of(0i64..1000),
            prop::option::of((-20i32..=20).prop_map(|p| f64::from(p) / 10.0)),
        )
            .prop_map(
                move |(temperature, top_p, top_k, max_tokens, stop, seed, penalty)| Sampling {
                    temperature,
                    top_p,
                    top_k: if family == Family::OpenAi {
                        None
                    } else {
                        top_k
                    },
                    max_tokens,
                    stop,
                    seed: if family == Family::Anthropic {
                        None
                    } else {
                        seed
                    },
                    presence_penalty: if family == Family::Anthropic {
                        None
                    } else {
                        penalty
                    },
                    frequency_penalty: if family == Family::Anthropic {
                        None
                    } else {
                        penalty
                    },
                    candidate_count: None,
                },
            )
    }

    fn request(family: Family) -> impl Strategy<Value = ChatRequest> {
        (
            prop::collection::vec(text_block(family), 0..3),
            conversation(family),
            prop::collection::vec(tool(family), 0..3),
            tool_choice(family),
            response_format(family),
            sampling(family),
            reasoning(family),
            (
                prop::option::of(any::<bool>()),
                prop::option::of("[a-z]{3,8}"),
                extra_for(family),
            ),
        )
            .prop_map(
                move |(
                    system,
                    messages,
                    tools,
                    choice,
                    format,
                    sampling,
                    reasoning,
                    (parallel, user, extra),
                )| {
                    let system: Vec<TextBlock> = system
                        .into_iter()
                        .filter_map(|b| match b {
                            Block::Text(mut t) => {
                                t.signature = None;
                                if family == Family::OpenAi {
                                    t.extra = Extra::default();
                                }
                                Some(t)
                            }
                            _ => None,
                        })
                        .collect();
                    let mut req = ChatRequest {
                        model: "m".into(),
                        system: if system.is_empty() {
                            vec![]
                        } else {
                            vec![SystemPrompt {
                                role: SystemRole::System,
                                content: system,
                                position: 0,
                                extra: Extra::default(),
                            }]
                        },
                        messages,
                        tool_choice: if tools.is_empty() { None } else { choice },
                        tools,
                        parallel_tool_calls: if family == Family::Gemini {
                            None
                        } else {
                            parallel
                        },
                        response_format: format,
                        sampling,
                        reasoning,
                        user: if family == Family::Gemini { None } else { user },
                        extra,
                        ..ChatRequest::default()
                    };
                    if family == Family::OpenAi {
                        // OpenAI system messages sit anywhere in the conversation.
                        if let Some(sp) = req.system.first_mut() {
                            sp.position = req.messages.len() / 2;
                            sp.role = SystemRole::Developer;
                        }
                    }
                    req
                },
            )
    }

    fn response(family: Family) -> impl Strategy<Value = ChatResponse> {
        (
            conversation(family),
            prop::sample::select(vec![
                StopReason::EndTurn,
                StopReason::MaxTokens,
                StopReason::ToolUse,
                StopReason::ContentFilter(None),
            ]),
            (
                1u64..1000,
                1u64..1000,
                prop::option::of(0u64..100),
                prop::option::of(0u64..100),
            ),
            extra_for(family),
        )
            .prop_map(
                move |(conversation, stop, (input, output, cached, reasoning), extra)| {
                    // The assistant turns of a generated conversation make a response body.
                    let content: Vec<Block> = conversation
                        .into_iter()
                        .filter(|m| m.role == Role::Assistant)
                        .flat_map(|m| m.content)
                        .collect();
                    let has_calls = content.iter().any(|b| matches!(b, Block::ToolCall(_)));
                    let stop = match (stop, has_calls) {
                        (_, true) => StopReason::ToolUse,
                        (StopReason::ToolUse, false) => StopReason::EndTurn,
                        (s, false) => s,
                    };
                    let stop = match (family, stop) {
                        (Family::Anthropic, StopReason::ContentFilter(_)) => StopReason::Refusal,
                        (_, s) => s,
                    };
                    ChatResponse {
                        id: "resp_1".into(),
                        model: "m".into(),
                        created: Some(1_700_000_000),
                        content,
                        stop_reason: Some(stop),
                        usage: Some(Usage {
                            input_tokens: input + cached.unwrap_or(0),
                            output_tokens: output + reasoning.unwrap_or(0),
                            total_tokens: None,
                            cache_read_tokens: cached,
                            cache_creation_tokens: None,
                            cache_write_1h_tokens: None,
                            reasoning_tokens: if family == Family::Anthropic {
                                None
                            } else {
                                reasoning
                            },
                            extra: Extra::default(),
                        }),
                        extra,
                        choice_extra: Extra::default(),
                    }
                },
            )
    }

    fn opts(stream: bool) -> EncodeOptions<'static> {
        EncodeOptions {
            upstream_model: "m",
            default_max_tokens: 8000,
            stream,
            native_structured_output: true,
        }
    }

    fn request_roundtrip(
        family: Family,
        req: &ChatRequest,
        stream: bool,
    ) -> Result<(), TestCaseError> {
        let w1 = encode_request_value(family, req, &opts(stream), &mut Adjustments::default())
            .map_err(|e| TestCaseError::fail(format!("encode failed: {e:?}")))?;
        let body = serde_json::to_vec(&w1).unwrap();
        let ctx = DecodeContext {
            model: Some("m"),
            stream,
        };
        let decoded = decode_request(family, &body, &ctx)
            .map_err(|e| TestCaseError::fail(format!("decode failed: {e:?}\n{w1:#}")))?;
        let mut adjusted = Adjustments::default();
        let w2 = encode_request_value(family, &decoded, &opts(stream), &mut adjusted)
            .map_err(|e| TestCaseError::fail(format!("re-encode failed: {e:?}")))?;
        let mut diffs = Vec::new();
        diff("$", &w1, &w2, &mut diffs);
        prop_assert!(
            diffs.is_empty(),
            "{family} request round trip differs: {diffs:#?}\nW1 = {w1:#}"
        );
        // A family's own wire loses nothing on its way back.
        prop_assert!(
            adjusted.is_empty(),
            "{family} round trip reported {}\nW1 = {w1:#}",
            adjusted.render()
        );
        Ok(())
    }

    fn response_roundtrip(family: Family, resp: &ChatResponse) -> Result<(), TestCaseError> {
        let w1 = encode_response_value(family, resp, "m")
            .map_err(|e| TestCaseError::fail(format!("encode failed: {e:?}")))?;
        let decoded = decode_response(family, &serde_json::to_vec(&w1).unwrap())
            .map_err(|e| TestCaseError::fail(format!("decode failed: {e:?}\n{w1:#}")))?;
        let w2 = encode_response_value(family, &decoded, "m")
            .map_err(|e| TestCaseError::fail(format!("re-encode failed: {e:?}")))?;
        let mut diffs = Vec::new();
        diff("$", &w1, &w2, &mut diffs);
        prop_assert!(
            diffs.is_empty(),
            "{family} response round trip differs: {diffs:#?}\nW1 = {w1:#}"
        );
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn openai_request_round_trip(req in request(Family::OpenAi), stream in any::<bool>()) {
            request_roundtrip(Family::OpenAi, &req, stream)?;
        }

        #[test]
        fn anthropic_request_round_trip(req in request(Family::Anthropic), stream in any::<bool>()) {
            request_roundtrip(Family::Anthropic, &req, stream)?;
        }

        #[test]
        fn gemini_request_round_trip(req in request(Family::Gemini), stream in any::<bool>()) {
            request_roundtrip(Family::Gemini, &req, stream)?;
        }

        #[test]
        fn responses_request_round_trip(req in request(Family::Responses), stream in any::<bool>()) {
            request_roundtrip(Family::Responses, &req, stream)?;
        }

        #[test]
        fn responses_response_round_trip(resp in response(Family::Responses)) {
            response_roundtrip(Family::Responses, &resp)?;
        }

        #[test]
        fn openai_response_round_trip(resp in response(Family::OpenAi)) {
            response_roundtrip(Family::OpenAi, &resp)?;
        }

        #[test]
        fn anthropic_response_round_trip(resp in response(Family::Anthropic)) {
            response_roundtrip(Family::Anthropic, &resp)?;
        }

        #[test]
        fn gemini_response_round_trip(resp in response(Family::Gemini)) {
            response_roundtrip(Family::Gemini, &resp)?;
        }

        /// Any request a family can say translates into every other family
        /// without an error, and back, keeping the tool calls (ids, names,
        /// arguments) and the number of tool results.
        #[test]
        fn cross_family_keeps_tool_calls(req in request(Family::OpenAi), target in prop::sample::select(vec![Family::Anthropic, Family::Gemini, Family::Responses])) {
            let mut req = req;
            if let Some(ToolChoice::Allowed { .. }) = req.tool_choice {
                req.tool_choice = None;
            }
            let wire = encode_request_value(target, &req, &opts(false), &mut Adjustments::default())
                .map_err(|e| TestCaseError::fail(format!("encode {target} failed: {e:?}")))?;
            let back = decode_request(target, &serde_json::to_vec(&wire).unwrap(), &DecodeContext { model: Some("m"), stream: false })
                .map_err(|e| TestCaseError::fail(format!("decode {target} failed: {e:?}")))?;
            let calls = |r: &ChatRequest| -> Vec<(String, String, Value)> {
                r.messages.iter().flat_map(|m| m.content.iter()).filter_map(|b| match b {
                    Block::ToolCall(c) => Some((c.id.clone(), c.name.clone(), c.arguments.clone())),
                    _ => None,
                }).collect()
            };
            let results = |r: &ChatRequest| r.messages.iter().flat_map(|m| m.content.iter()).filter(|b| matches!(b, Block::ToolResult(_))).count();
            let before = calls(&req);
            let after = calls(&back);
            prop_assert_eq!(before.len(), after.len());
            for ((id1, n1, a1), (id2, n2, a2)) in before.iter().zip(&after) {
                prop_assert_eq!(n1, n2);
                prop_assert_eq!(a1, a2);
                if matches!(target, Family::Anthropic | Family::Responses) {
                    prop_assert_eq!(id1, id2);
                }
            }
            prop_assert_eq!(results(&req), results(&back));
        }
    }
}
