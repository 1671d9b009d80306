//! What the admin API's writes read (docs/keys.md "Routes"): the request
//! body, at most [`MAX_BODY`] bytes of `application/json` holding one object,
//! and the query string's parameters. Every refusal is a 400 (413, 415) whose
//! message names the field or parameter at fault.

use super::{fail, Fail};
use crate::error::quote;
use crate::listener::Session;
use serde_json::{Map, Value};

/// The largest request body the admin API reads.
pub const MAX_BODY: usize = 64 * 1024;

/// The request's body as a JSON object: an empty body is `{}`.
pub async fn object(session: &mut Session) -> Result<Map<String, Value>, Fail> {
    let json_type = session
        .req_header()
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("application/json")
        });
    let mut body = Vec::new();
    loop {
        match session.read_request_body().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > MAX_BODY {
                    return Err(fail(
                        413,
                        "request_too_large",
                        format!("the request body is larger than {MAX_BODY} bytes"),
                    ));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => {
                return Err(fail(
                    400,
                    "invalid_request",
                    format!(
                        "the request body could not be read ({})",
                        e.etype().as_str()
                    ),
                ))
            }
        }
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    if json_type != Some(true) {
        return Err(fail(
            415,
            "unsupported_media_type",
            "send the body as Content-Type: application/json",
        ));
    }
    match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(fail(
            400,
            "invalid_request",
            "the request body must be a JSON object",
        )),
        Err(e) => Err(fail(
            400,
            "invalid_request",
            format!("the request body is not valid JSON: {e}"),
        )),
    }
}

/// Refuses a field not in `known`, naming it.
pub fn only(body: &Map<String, Value>, known: &[&str]) -> Result<(), Fail> {
    match body.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(fail(
            400,
            "invalid_request",
            format!("{}: unknown field (known: {})", quote(k), known.join(", ")),
        )),
        None => Ok(()),
    }
}

/// The query's parameters, decoded; an unknown one or one that does not
/// decode is refused by name.
pub fn query(raw: Option<&str>, known: &[&str]) -> Result<Vec<(String, String)>, Fail> {
    let mut out = Vec::new();
    for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if !known.contains(&name) {
            return Err(fail(
                400,
                "invalid_request",
                format!(
                    "unknown parameter {} (known: {})",
                    quote(name),
                    known.join(", ")
                ),
            ));
        }
        let value =
            crate::util::percent::decode_strict(value, crate::util::percent::Component::Query)
                .ok_or_else(|| {
                    fail(
                        400,
                        "invalid_request",
                        format!("{}: not valid percent-encoded UTF-8", quote(name)),
                    )
                })?;
        out.push((name.to_string(), value));
    }
    Ok(out)
}

/// The value of parameter `name` in `params`, unless empty.
pub fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

/// `limit`: 1 to `max`, `default` when absent.
pub fn limit(value: Option<&str>, default: usize, max: usize) -> Result<usize, Fail> {
    match value {
        None => Ok(default),
        Some(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| {
                fail(
                    400,
                    "invalid_request",
                    format!(
                        "limit: expected a whole number from 1 to {max}, got {}",
                        quote(v)
                    ),
                )
            }),
    }
}
