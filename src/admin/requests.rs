//! `GET /admin/requests?limit=&before=&key=&model=&status=`
//! (docs/operations.md "Console"): the latest requests from the ledger,
//! newest first, each with its attempts (`tried`: provider, model, upstream,
//! status or failure, the cool-down it started, milliseconds), what the
//! gateway changed (`adjusted`) and the error it answered. `next` is the
//! cursor of the following page (`before=`), null on the last one.

use super::{Fail, Reply};
use crate::state::ledger::{Cursor, Reader, RequestRow, RequestsQuery, StatusFilter};
use crate::util::rfc3339::Rfc3339;
use serde_json::{json, Value};

/// The parameters `GET /admin/requests` knows.
const KNOWN: [&str; 5] = ["limit", "before", "key", "model", "status"];

/// Parses the query; `Err`: the 400 naming the bad parameter.
pub fn parse(query: Option<&str>) -> Result<RequestsQuery, Fail> {
    use crate::state::ledger::recent::{DEFAULT_LIMIT, MAX_LIMIT};
    let bad = |m: String| super::fail(400, "invalid_request", m);
    let quote = crate::error::quote;
    let params = super::body::query(query, &KNOWN)?;
    let param = |name| super::body::param(&params, name);
    Ok(RequestsQuery {
        limit: super::body::limit(param("limit"), DEFAULT_LIMIT, MAX_LIMIT)?,
        before: param("before")
            .map(|v| {
                Cursor::parse(v).ok_or_else(|| {
                    bad(format!(
                        "before: expected a page's next cursor, got {}",
                        quote(v)
                    ))
                })
            })
            .transpose()?,
        key: param("key").map(str::to_string),
        model: param("model").map(str::to_string),
        status: param("status")
            .map(|v| {
                StatusFilter::parse(v).ok_or_else(|| {
                    bad(format!(
                        "status: expected ok, error or a status code, got {}",
                        quote(v)
                    ))
                })
            })
            .transpose()?,
    })
}

/// One request as the API answers it.
pub fn render(r: &RequestRow) -> Value {
    let tried = crate::state::ledger::expand_tried(
        r.tried.as_deref(),
        r.provider.as_deref(),
        r.model.as_deref(),
    );
    json!({
        "request_id": r.request_id,
        "time": Rfc3339 {
            secs: r.time_ms.div_euclid(1000),
            millis: Some(u32::try_from(r.time_ms.rem_euclid(1000)).unwrap_or(0)),
        }
        .to_string(),
        "key_id": r.key_id,
        "family": r.family,
        "provider": r.provider,
        "model": r.model,
        "upstream_protocol": r.upstream_protocol,
        "upstream_host": r.upstream_host,
        "status": r.status,
        "input_tokens": r.input_tokens,
        "output_tokens": r.output_tokens,
        "cached_tokens": r.cached_tokens,
        "cache_write_tokens": r.cache_write_tokens,
        "reasoning_tokens": r.reasoning_tokens,
        "cost_usd": r.cost_usd,
        "latency_ms": (r.latency_ms * 10.0).round() / 10.0,
        "ttft_ms": r.ttft_ms.map(|t| (t * 10.0).round() / 10.0),
        "attempts": tried.as_array().map_or(0, Vec::len),
        "tried": tried,
        "adjusted": r.adjusted,
        "error": r.error,
    })
}

/// Answers `GET /admin/requests`.
pub async fn respond(ledger: Option<&Reader>, query: Option<&str>) -> Reply {
    let q = match parse(query) {
        Ok(q) => q,
        Err(e) => return *e,
    };
    let Some(ledger) = ledger else {
        return super::error(503, "unavailable", "the usage ledger is not open");
    };
    match ledger.requests(&q).await {
        Ok(rows) => {
            let next = (rows.len() == q.limit)
                .then(|| rows.last().map(|r| r.cursor().render()))
                .flatten();
            super::reply(
                200,
                &json!({
                    "data": rows.iter().map(render).collect::<Vec<_>>(),
                    "next": next,
                }),
            )
        }
        Err(e) => super::ledger_failed("requests", &e),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_names_the_bad_parameter() {
        let q = parse(Some(
            "limit=10&key=dev&model=openai%2Fgpt-5&status=error&before=12%3Areq_1",
        ))
        .unwrap();
        assert_eq!(q.limit, 10);
        assert_eq!(q.key.as_deref(), Some("dev"));
        assert_eq!(q.model.as_deref(), Some("openai/gpt-5"));
        assert_eq!(q.status, Some(StatusFilter::Error));
        assert_eq!(q.before.unwrap().request_id, "req_1");
        assert_eq!(
            parse(Some("key=&status=")).unwrap(),
            RequestsQuery::default()
        );
        for (bad, name) in [
            ("limit=0", "limit"),
            ("limit=500", "limit"),
            ("before=x", "before"),
            ("status=teapot", "status"),
            ("since=1", "since"),
        ] {
            let e = parse(Some(bad)).unwrap_err();
            let e = String::from_utf8_lossy(e.body());
            assert!(e.contains(name), "{bad}: {e}");
        }
    }
}
