//! One call to a token endpoint over the gateway's upstream client: a form
//! `POST` (Entra ID, Google's `token_uri`) or a `GET` with headers (the
//! metadata server; `text`, which `crate::identity` also uses for an
//! identity provider's documents), the answer read whole (small, bounded) and its
//! `access_token` and `expires_in` taken out. What goes wrong is said
//! without the form (it holds the secret or the signed assertion).

use super::Fetched;
use crate::config::BaseUrl;
use crate::upstream::client::{Message, UpstreamClient};
use crate::upstream::h1::RequestHead;
use bytes::Bytes;
use std::time::Duration;

/// The longest a token call may take, connect to last byte.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// The largest token answer read.
const MAX_ANSWER: usize = 64 * 1024;
/// The life assumed when an answer gives none.
const DEFAULT_LIFE: Duration = Duration::from_secs(3600);

/// The request to send: a form body, a `GET` with `headers`, or a JSON
/// body with a Bearer token (IAM's `generateAccessToken`).
pub(super) enum Call<'a> {
    Form(&'a str),
    Get(&'a [(&'a str, &'a str)]),
    Json {
        body: &'a str,
        bearer: &'a str,
    },
    /// A `PUT` with `headers` and no body (IMDSv2's session token).
    Put(&'a [(&'a str, &'a str)]),
}

/// `application/x-www-form-urlencoded` of `pairs`.
pub(super) fn form(pairs: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        encode_into(k, &mut out);
        out.push('=');
        encode_into(v, &mut out);
    }
    out
}

fn encode_into(s: &str, out: &mut String) {
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

/// Calls `url` (its path and `query`) and reads the token out of its
/// answer; `Err` is the reason, for the caller's message.
pub(super) async fn token(
    client: &UpstreamClient,
    url: &BaseUrl,
    call: Call<'_>,
) -> Result<Fetched, String> {
    let (status, body) = tokio::time::timeout(CALL_TIMEOUT, exchange(client, url, call))
        .await
        .map_err(|_| format!("no answer within {} s", CALL_TIMEOUT.as_secs()))??;
    let json: Option<serde_json::Value> = serde_json::from_slice(&body).ok();
    if !(200..300).contains(&status) {
        return Err(format!(
            "status {status}: {}",
            error_text(json.as_ref(), &body)
        ));
    }
    let json = json.ok_or_else(|| format!("status {status} with a body that is not JSON"))?;
    // OAuth2's `access_token`, or IAM's `accessToken` with an `expireTime`.
    let value = ["access_token", "accessToken"]
        .iter()
        .find_map(|k| json.get(*k).and_then(|t| t.as_str()))
        .filter(|t| !t.is_empty())
        .ok_or("the answer has no access_token")?;
    // Entra's v1 endpoint wrote `expires_in` as a string.
    let life = match json.get("expires_in") {
        Some(serde_json::Value::Number(n)) => n.as_u64(),
        Some(serde_json::Value::String(s)) => s.parse().ok(),
        _ => json
            .get("expireTime")
            .and_then(|t| t.as_str())
            .and_then(seconds_until),
    }
    .map_or(DEFAULT_LIFE, Duration::from_secs);
    Ok(Fetched {
        value: value.to_string(),
        life,
    })
}

/// Seconds from now until an RFC 3339 UTC time (`2026-11-26T18:00:00Z`,
/// fractions allowed, or a `+00:00` offset), as IAM's `expireTime` and AWS's
/// credential `Expiration` are written; another offset is not read.
pub(super) fn seconds_until(t: &str) -> Option<u64> {
    let b = t.as_bytes();
    let utc = t.ends_with('Z') || t.ends_with("+00:00");
    if b.len() < 20 || !utc || b[4] != b'-' || b[10] != b'T' {
        return None;
    }
    let n = |r: std::ops::Range<usize>| t.get(r)?.parse::<u32>().ok();
    let days = crate::util::rfc3339::days_from_civil(i64::from(n(0..4)?), n(5..7)?, n(8..10)?);
    let at = days * 86_400 + i64::from(n(11..13)? * 3600 + n(14..16)? * 60 + n(17..19)?);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs();
    u64::try_from(at).ok()?.checked_sub(now)
}

/// The text of a `GET` of `url` with `headers` (a subject token; an
/// identity provider's discovery document or key set, `crate::identity`),
/// status 2xx, within 15 s and 64 KiB.
pub async fn text(
    client: &UpstreamClient,
    url: &BaseUrl,
    headers: &[(&str, &str)],
) -> Result<String, String> {
    let (status, body) =
        tokio::time::timeout(CALL_TIMEOUT, exchange(client, url, Call::Get(headers)))
            .await
            .map_err(|_| format!("no answer within {} s", CALL_TIMEOUT.as_secs()))??;
    if !(200..300).contains(&status) {
        let json: Option<serde_json::Value> = serde_json::from_slice(&body).ok();
        return Err(format!(
            "status {status}: {}",
            error_text(json.as_ref(), &body)
        ));
    }
    String::from_utf8(body.to_vec()).map_err(|_| "the answer is not text".to_string())
}

/// What an error answer says: OAuth2's `error` and `error_description`,
/// else the start of its text.
pub(super) fn error_text(json: Option<&serde_json::Value>, body: &[u8]) -> String {
    let field = |k: &str| json.and_then(|j| j.get(k)).and_then(|v| v.as_str());
    let text = match (field("error"), field("error_description")) {
        (Some(e), Some(d)) => format!("{e}: {d}"),
        (Some(e), None) => e.to_string(),
        _ => match json
            .and_then(|j| j.pointer("/error/message"))
            .and_then(|v| v.as_str())
        {
            Some(m) => m.to_string(),
            None => String::from_utf8_lossy(body).trim().to_string(),
        },
    };
    crate::error::cut(&text, 300).into_owned()
}

/// The status and body of one call to `url` (at `path` when given: a
/// path that ends with `/`, which a `BaseUrl` does not keep), within `limit`.
pub(super) async fn answer(
    client: &UpstreamClient,
    url: &BaseUrl,
    path: Option<&str>,
    call: Call<'_>,
    limit: Duration,
) -> Result<(u16, Bytes), String> {
    tokio::time::timeout(limit, exchange_at(client, url, path, call))
        .await
        .map_err(|_| format!("no answer within {} ms", limit.as_millis()))?
}

async fn exchange(
    client: &UpstreamClient,
    url: &BaseUrl,
    call: Call<'_>,
) -> Result<(u16, Bytes), String> {
    exchange_at(client, url, None, call).await
}

async fn exchange_at(
    client: &UpstreamClient,
    url: &BaseUrl,
    path: Option<&str>,
    call: Call<'_>,
) -> Result<(u16, Bytes), String> {
    let path = match path {
        Some(p) => p,
        None if url.path.is_empty() => "/",
        None => &url.path,
    };
    let wire = |e: crate::upstream::h1::WireError| e.to_string();
    let (mut head, body) = match call {
        Call::Form(text) | Call::Json { body: text, .. } => (
            RequestHead::post(path, 512 + text.len()).map_err(wire)?,
            Bytes::copy_from_slice(text.as_bytes()),
        ),
        Call::Get(_) => (RequestHead::get(path).map_err(wire)?, Bytes::new()),
        Call::Put(_) => (RequestHead::put(path).map_err(wire)?, Bytes::new()),
    };
    head.header("host", &url.authority).map_err(wire)?;
    head.header("accept", "application/json").map_err(wire)?;
    head.header(
        "user-agent",
        concat!("switchboard/", env!("CARGO_PKG_VERSION")),
    )
    .map_err(wire)?;
    match call {
        Call::Form(_) => head
            .header("content-type", "application/x-www-form-urlencoded")
            .map_err(wire)?,
        Call::Get(headers) | Call::Put(headers) => {
            for (k, v) in headers {
                head.header(k, v).map_err(wire)?;
            }
        }
        Call::Json { bearer, .. } => {
            head.header("content-type", "application/json")
                .map_err(wire)?;
            head.header("authorization", &format!("Bearer {bearer}"))
                .map_err(wire)?;
        }
    }
    let msg = Message::new(head, &body);
    let identity = client.identity("\u{0}credentials", url, "");
    let mut resent = None;
    let mut ex = client
        .send(url, identity, None, &msg, &mut resent)
        .await
        .map_err(|e| e.message)?;
    let status = ex.status();
    let mut answer = Vec::new();
    while let Some(chunk) = UpstreamClient::read_chunk(&mut ex, None, None)
        .await
        .map_err(|f| f.error().message)?
    {
        if answer.len() + chunk.len() > MAX_ANSWER {
            return Err(format!("an answer over {MAX_ANSWER} bytes"));
        }
        answer.extend_from_slice(&chunk);
    }
    client.release(ex);
    Ok((status, Bytes::from(answer)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_are_percent_encoded() {
        assert_eq!(
            form(&[("a b", "x&y=z"), ("scope", "https://h/.default")]),
            "a%20b=x%26y%3Dz&scope=https%3A%2F%2Fh%2F.default"
        );
    }

    #[test]
    fn iam_expire_times_are_read() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let later = crate::util::rfc3339::Rfc3339::seconds(now as i64 + 600).to_string();
        let left = seconds_until(&later).unwrap();
        assert!((590..=600).contains(&left), "{later}: {left}");
        assert_eq!(seconds_until("2001-01-01T00:00:00.5Z"), None);
        assert_eq!(seconds_until("soon"), None);
        let offset = crate::util::rfc3339::Rfc3339::seconds(now as i64 + 600)
            .to_string()
            .replace('Z', "+00:00");
        assert!(seconds_until(&offset).is_some(), "{offset}");
        assert_eq!(seconds_until(&offset.replace("+00:00", "+05:00")), None);
    }

    #[test]
    fn error_answers_say_what_the_endpoint_said() {
        let j = serde_json::json!({"error": "invalid_client", "error_description": "bad secret"});
        assert_eq!(error_text(Some(&j), b""), "invalid_client: bad secret");
        assert_eq!(error_text(None, b" Not Found \n"), "Not Found");
    }
}
