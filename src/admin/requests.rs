//! `GET /admin/requests?limit=&before=&key=&model=&status=`
//! (docs/operations.md "Console"): the latest requests from the ledger,
//! newest first, each with its attempts (`tried`: provider, model, upstream,
//! status or failure, the cool-down it started, milliseconds), what the
//! gateway changed (`adjusted`) and the error it answered. `next` is the
//! cursor of the following page (`before=`), null on the last one.

use super::{params, Reply};
use crate::state::ledger::{Cursor, Reader, RequestRow, RequestsQuery, StatusFilter};
use crate::util::rfc3339::Rfc3339;
use serde_json::{json, Value};

/// Parses the query; `Err` names the bad parameter.
pub fn parse(query: Option<&str>) -> Result<RequestsQuery, String> {
    let mut q = RequestsQuery::default();
    let quote = crate::error::quote;
    for (name, value) in params(query)? {
        let value_or_none = Some(value.clone()).filter(|v| !v.is_empty());
        match name {
            "limit" => {
                q.limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=crate::state::ledger::recent::MAX_LIMIT).contains(n))
                    .ok_or_else(|| {
                        format!(
                            "limit: expected 1 to {}, got {}",
                            crate::state::ledger::recent::MAX_LIMIT,
                            quote(&value)
                        )
                    })?
            }
            "before" => {
                q.before = value_or_none
                    .map(|v| {
                        Cursor::parse(&v).ok_or_else(|| {
                            format!("before: expected a page's next cursor, got {}", quote(&v))
                        })
                    })
                    .transpose()?
            }
            "key" => q.key = value_or_none,
            "model" => q.model = value_or_none,
            "status" => {
                q.status = value_or_none
                    .map(|v| {
                        StatusFilter::parse(&v).ok_or_else(|| {
                            format!(
                                "status: expected ok, error or a status code, got {}",
                                quote(&v)
                            )
                        })
                    })
                    .transpose()?
            }
            other => {
                return Err(format!(
                    "unknown parameter {} (known: limit, before, key, model, status)",
                    quote(other)
                ))
            }
        }
    }
    Ok(q)
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
        Err(e) => return super::error(400, "invalid_request", e),
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
            assert!(e.contains(name), "{bad}: {e}");
        }
    }
}
