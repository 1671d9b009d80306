//! Tool results across families, every client family against every upstream
//! protocol: what the upstream model sees of the result a client sent
//! (docs/protocol-mapping.md, *Tool results across families*), and the
//! round trips through Gemini's `functionResponse.response` and back.

use super::{decode_request, encode_request_value, DecodeContext, EncodeOptions};
use crate::adjust::Adjustments;
use crate::family::Family::{self, Anthropic, Bedrock, Gemini, OpenAi, Responses};
use serde_json::{json, Value};

const ALL: [Family; 5] = [OpenAi, Anthropic, Gemini, Responses, Bedrock];

/// A tool result as a client of one family writes it.
#[derive(Clone)]
enum Sent {
    /// Text (A, B, D), with B's error flag.
    Text(&'static str, bool),
    /// A Gemini `functionResponse.response`.
    Response(Value),
}

/// A request of `family` with one call of `get_weather` and its result.
fn request(family: Family, sent: &Sent) -> Value {
    let args = json!({"city": "Paris"});
    let text = |s: &Sent| match s {
        Sent::Text(t, _) => json!(t),
        Sent::Response(_) => Value::Null,
    };
    match family {
        OpenAi => json!({"model": "m", "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": args.to_string()}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": text(sent)}]}),
        Anthropic => {
            let mut result =
                json!({"type": "tool_result", "tool_use_id": "call_1", "content": text(sent)});
            if let Sent::Text(_, true) = sent {
                result["is_error"] = json!(true);
            }
            json!({"model": "m", "max_tokens": 1000, "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "get_weather", "input": args}]},
                {"role": "user", "content": [result]}]})
        }
        Gemini => {
            let Sent::Response(r) = sent else {
                return Value::Null;
            };
            json!({"contents": [
                {"role": "user", "parts": [{"text": "Weather in Paris?"}]},
                {"role": "model", "parts": [{"functionCall": {"id": "call_1", "name": "get_weather", "args": args}}]},
                {"role": "user", "parts": [{"functionResponse": {"id": "call_1", "name": "get_weather", "response": r}}]}]})
        }
        Responses => json!({"model": "m", "input": [
            {"role": "user", "content": "Weather in Paris?"},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": args.to_string()},
            {"type": "function_call_output", "call_id": "call_1", "output": text(sent)}]}),
        Bedrock => {
            let mut result = json!({"toolUseId": "call_1", "content": [{"text": text(sent)}]});
            if let Sent::Text(_, true) = sent {
                result["status"] = json!("error");
            }
            json!({"messages": [
                {"role": "user", "content": [{"text": "Weather in Paris?"}]},
                {"role": "assistant", "content": [{"toolUse": {"toolUseId": "call_1", "name": "get_weather", "input": args}}]},
                {"role": "user", "content": [{"toolResult": result}]}]})
        }
    }
}

/// `body`, a client request of `from`, as the upstream body for `to`.
fn translate(from: Family, body: &Value, to: Family) -> Value {
    let ctx = DecodeContext {
        model: Some("m"),
        stream: false,
    };
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let req = decode_request(from, &bytes, &ctx);
    assert!(req.is_ok(), "{from} decode: {req:?}\n{body}");
    let Ok(req) = req else { return Value::Null };
    let opts = EncodeOptions {
        upstream_model: "m",
        default_max_tokens: 1000,
        stream: false,
        native_structured_output: true,
    };
    let out = encode_request_value(to, &req, &opts, &mut Adjustments::default());
    assert!(out.is_ok(), "{from} -> {to}: {out:?}");
    out.unwrap_or_default()
}

/// The tool result in an upstream body of `family`, as its model reads it:
/// the text (A, D), the content and error flag (B), the response object (C).
fn seen(family: Family, body: &Value) -> Value {
    let find = |list: Option<&Value>, pick: &dyn Fn(&Value) -> Option<Value>| {
        list.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find_map(pick)
            .unwrap_or(Value::Null)
    };
    match family {
        OpenAi => find(body.get("messages"), &|m| {
            (m["role"] == "tool").then(|| m["content"].clone())
        }),
        Anthropic => find(body.get("messages"), &|m| {
            m["content"].as_array()?.iter().find_map(|b| {
                (b["type"] == "tool_result").then(|| {
                    let mut v = json!({"content": b["content"]});
                    if let Some(e) = b.get("is_error") {
                        v["is_error"] = e.clone();
                    }
                    v
                })
            })
        }),
        Gemini => find(body.get("contents"), &|c| {
            c["parts"]
                .as_array()?
                .iter()
                .find_map(|p| p.pointer("/functionResponse/response").cloned())
        }),
        Responses => find(body.get("input"), &|i| {
            (i["type"] == "function_call_output").then(|| i["output"].clone())
        }),
        Bedrock => find(body.get("messages"), &|m| {
            m["content"].as_array()?.iter().find_map(|b| {
                let r = b.get("toolResult")?;
                let mut v = json!({"content": r.pointer("/content/0/text")?});
                if r["status"] == "error" {
                    v["is_error"] = json!(true);
                }
                Some(v)
            })
        }),
    }
}

/// What `to`'s model sees of a result: `text` (B: with its error flag),
/// or for Gemini `response`.
fn as_seen(to: Family, text: &str, is_error: bool, response: &Value) -> Value {
    match to {
        OpenAi | Responses => json!(text),
        Anthropic | Bedrock if is_error => json!({"content": text, "is_error": true}),
        Anthropic | Bedrock => json!({"content": text}),
        Gemini => response.clone(),
    }
}

/// Every client family sending a result (a Gemini client `response`, the
/// others `text`), against every upstream: each sees `text`, and a Gemini
/// upstream `to_gemini` (a Gemini client's own `response` as sent).
fn every_pair(text: &'static str, response: &Value, to_gemini: &Value) {
    for from in ALL {
        let sent = if from == Gemini {
            Sent::Response(response.clone())
        } else {
            Sent::Text(text, false)
        };
        let body = request(from, &sent);
        for to in ALL {
            let got = seen(to, &translate(from, &body, to));
            let gemini = if from == Gemini { response } else { to_gemini };
            assert_eq!(got, as_seen(to, text, false, gemini), "{from} -> {to}");
        }
    }
}

#[test]
fn a_text_result_reaches_every_upstream_as_the_text() {
    let r = json!({"output": "sunny, 21 °C"});
    every_pair("sunny, 21 °C", &r, &r);
    // google-genai's automatic function calling writes `result`.
    every_pair("sunny, 21 °C", &json!({"result": "sunny, 21 °C"}), &r);
    let r = json!({"output": "42"});
    every_pair("42", &r, &r);
}

#[test]
fn an_object_result_reaches_every_upstream_as_that_object() {
    let r = json!({"sky": "clear", "temp": 21});
    every_pair(r#"{"sky":"clear","temp":21}"#, &r, &r);
    let r = json!({"output": 21});
    every_pair(r#"{"output":21}"#, &r, &r);
    // A tool's JSON text shaped like a wrapped result stays that text.
    let r = json!({"output": r#"{"output":"sunny"}"#});
    every_pair(r#"{"output":"sunny"}"#, &r, &r);
}

#[test]
fn an_error_result_keeps_its_flag_where_the_protocol_has_one() {
    let r = json!({"error": "city not found"});
    let body = request(Anthropic, &Sent::Text("city not found", true));
    for to in ALL {
        let got = seen(to, &translate(Anthropic, &body, to));
        assert_eq!(got, as_seen(to, "city not found", true, &r), "B -> {to}");
    }
    let body = request(Gemini, &Sent::Response(r.clone()));
    for to in ALL {
        let got = seen(to, &translate(Gemini, &body, to));
        assert_eq!(got, as_seen(to, "city not found", true, &r), "C -> {to}");
    }
}

/// The upstream body for `via` taken as a client request of `via` again.
fn through(from: Family, body: &Value, via: Family, back: Family) -> Value {
    let mid = translate(from, body, via);
    seen(back, &translate(via, &mid, back))
}

#[test]
fn results_come_back_unchanged_through_gemini_and_through_every_other_family() {
    let texts = [
        "sunny, 21 °C",
        "",
        "42",
        "[1,2]",
        r#"{"sky":"clear","temp":21}"#,
        r#"{"output":"sunny"}"#,
        r#"{"result":"sunny"}"#,
    ];
    for x in [OpenAi, Anthropic, Responses, Bedrock] {
        for t in texts {
            let body = request(x, &Sent::Text(t, false));
            let want = seen(x, &body);
            assert_eq!(through(x, &body, Gemini, x), want, "{x} -> C -> {x}: {t}");
        }
    }
    let responses = [
        json!({"output": "sunny, 21 °C"}),
        json!({"sky": "clear", "temp": 21}),
        json!({"output": 21}),
        json!({"output": r#"{"a":1}"#}),
        json!({"output": r#"{"output":"x"}"#}),
        json!({}),
    ];
    for x in [OpenAi, Anthropic, Responses, Bedrock] {
        for r in &responses {
            let body = request(Gemini, &Sent::Response(r.clone()));
            assert_eq!(through(Gemini, &body, x, Gemini), *r, "C -> {x} -> C: {r}");
        }
        // `result` is read as the bare text and written back as `output`.
        let body = request(Gemini, &Sent::Response(json!({"result": "sunny"})));
        assert_eq!(
            through(Gemini, &body, x, Gemini),
            json!({"output": "sunny"}),
            "C -> {x} -> C"
        );
    }
    // Errors: Anthropic carries the flag; OpenAI and Responses cannot.
    let body = request(Gemini, &Sent::Response(json!({"error": "boom"})));
    assert_eq!(
        through(Gemini, &body, Anthropic, Gemini),
        json!({"error": "boom"})
    );
    assert_eq!(
        through(Gemini, &body, OpenAi, Gemini),
        json!({"output": "boom"})
    );
    let body = request(Anthropic, &Sent::Text("boom", true));
    assert_eq!(
        through(Anthropic, &body, Gemini, Anthropic),
        json!({"content": "boom", "is_error": true})
    );
}
