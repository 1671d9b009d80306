//! `GET /admin/usage/series?from=&to=&bucket=hour|day&by=model|key|team&top=N`
//! (docs/operations.md "Console"): the Overview page's charts. Requests,
//! errors, mean latency and cost per bucket for the top `N` groups by cost
//! (default 5, at most 20) and "other", as columns (one array per figure,
//! one entry per bucket), so the answer's size is bounded by buckets × (N+1).

use super::{Fail, Reply};
use crate::state::ledger::{Bound, Bucket, Reader, Series, SeriesBy, SeriesQuery, Sums};
use crate::util::rfc3339::Rfc3339;
use serde_json::{json, Value};

/// The parameters `GET /admin/usage/series` knows.
const KNOWN: [&str; 5] = ["from", "to", "bucket", "by", "top"];

/// Parses the query; `Err`: the 400 naming the bad parameter.
pub fn parse(query: Option<&str>, now_ms: i64) -> Result<SeriesQuery, Fail> {
    let bad = |m: String| super::fail(400, "invalid_request", m);
    let (mut from, mut to, mut bucket, mut by, mut top) =
        (None, None, Bucket::Hour, SeriesBy::Model, 5usize);
    for (name, value) in super::body::query(query, &KNOWN)? {
        let bound = |v: &str| {
            Bound::parse(v).ok_or_else(|| {
                format!(
                    "{name}: expected a UTC day (YYYY-MM-DD) or an RFC 3339 instant, got {}",
                    crate::error::quote(v)
                )
            })
        };
        match name.as_str() {
            "from" => from = Some(bound(&value).map_err(bad)?),
            "to" => to = Some(bound(&value).map_err(bad)?),
            "bucket" => {
                bucket = Bucket::parse(&value)
                    .ok_or_else(|| {
                        format!(
                            "bucket: expected hour or day, got {}",
                            crate::error::quote(&value)
                        )
                    })
                    .map_err(bad)?
            }
            "by" => {
                by = SeriesBy::parse(&value)
                    .ok_or_else(|| {
                        format!(
                            "by: expected model, key or team, got {}",
                            crate::error::quote(&value)
                        )
                    })
                    .map_err(bad)?
            }
            "top" => {
                top = value
                    .parse()
                    .map_err(|_| {
                        format!(
                            "top: expected a number, got {}",
                            crate::error::quote(&value)
                        )
                    })
                    .map_err(bad)?
            }
            _ => {}
        }
    }
    SeriesQuery::new(from, to, bucket, by, top, now_ms).map_err(bad)
}

/// `ms` as RFC 3339 (whole seconds: buckets start on them).
fn instant(ms: i64) -> String {
    Rfc3339::seconds(ms.div_euclid(1000)).to_string()
}

/// The JSON answer for a series.
pub fn render(q: &SeriesQuery, s: &Series) -> Value {
    let column = |points: &[Sums], f: &dyn Fn(&Sums) -> Value| -> Value {
        Value::Array(points.iter().map(f).collect())
    };
    let groups: Vec<Value> = s
        .groups
        .iter()
        .map(|g| {
            json!({
                "name": g.name.clone().unwrap_or_else(|| "other".into()),
                "other": g.name.is_none(),
                "requests": column(&g.points, &|p| json!(p.requests)),
                "errors": column(&g.points, &|p| json!(p.errors)),
                "input_tokens": column(&g.points, &|p| json!(p.input_tokens)),
                "output_tokens": column(&g.points, &|p| json!(p.output_tokens)),
                "cost_usd": column(&g.points, &|p| json!((p.cost_usd * 1e9).round() / 1e9)),
                // Null where the bucket had no request, or (days rolled up
                // before latency was kept) no latency.
                "mean_latency_ms": column(&g.points, &|p| {
                    if p.requests > 0 && p.latency_ms > 0.0 {
                        json!((p.latency_ms / p.requests as f64 * 10.0).round() / 10.0)
                    } else {
                        Value::Null
                    }
                }),
            })
        })
        .collect();
    let mut total = Sums::default();
    for g in &s.groups {
        for p in &g.points {
            total.add(p);
        }
    }
    json!({
        "from": instant(q.from_ms),
        "to": instant(q.to_ms),
        "bucket": q.bucket.name(),
        "by": q.by.name(),
        "top": q.top,
        "source": s.source,
        "buckets": s.buckets.iter().map(|b| instant(*b)).collect::<Vec<_>>(),
        "series": groups,
        "total": super::sums_json(&total),
    })
}

/// Answers `GET /admin/usage/series`.
pub async fn respond(ledger: Option<&Reader>, query: Option<&str>) -> Reply {
    let q = match parse(query, crate::state::ledger::now_ms()) {
        Ok(q) => q,
        Err(e) => return *e,
    };
    let Some(ledger) = ledger else {
        return super::error(503, "unavailable", "the usage ledger is not open");
    };
    match ledger.series(&q).await {
        Ok(s) => super::reply(200, &render(&q, &s)),
        Err(e) => super::ledger_failed("series", &e),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_names_the_bad_parameter() {
        let day = 86_400_000;
        let q = parse(
            Some("bucket=day&by=key&top=3&from=1970-01-02&to=1970-01-05"),
            0,
        )
        .unwrap();
        assert_eq!((q.from_ms, q.to_ms, q.top), (day, 5 * day, 3));
        assert_eq!(q.by, SeriesBy::Key);
        for (bad, name) in [
            ("bucket=week", "bucket"),
            ("by=day", "by"),
            ("top=x", "top"),
            ("top=0", "top"),
            ("from=soon", "from"),
            ("nope=1", "nope"),
        ] {
            let e = parse(Some(bad), 0).unwrap_err();
            let e = String::from_utf8_lossy(e.body());
            assert!(e.contains(name), "{bad}: {e}");
        }
    }
}
