//! `GET /admin/audit` (docs/keys.md "Audit"): the changes made through the
//! admin API, newest first: `{"data": [{"seq", "at", "actor", "action",
//! "target": {"type", "id"}, "before", "after"}], "next"}`, a page of
//! `limit` (default 100, at most 1000) entries older than `before` (the
//! previous page's `next`). Never a secret nor a digest of one.

use super::{body, fail, reply, Ctx, Fail, Reply};
use crate::error::quote;
use serde_json::json;

/// `GET /admin/audit?limit=&before=`.
pub async fn list(cx: &Ctx<'_>, query: Option<&str>) -> Reply {
    let run = async {
        let params = body::query(query, &["limit", "before"])?;
        let get = |name: &str| body::param(&params, name);
        let limit = body::limit(get("limit"), 100, 1000)?;
        let before = get("before")
            .map(|b| {
                b.parse::<i64>().map_err(|_| {
                    fail(
                        400,
                        "invalid_request",
                        format!("before: expected an entry's seq, got {}", quote(b)),
                    )
                })
            })
            .transpose()?;
        let mut entries = cx.db()?.audit(limit + 1, before).await.map_err(|e| {
            fail(
                503,
                "unavailable",
                format!("the audit log cannot be read: {e}"),
            )
        })?;
        let more = entries.len() > limit;
        entries.truncate(limit);
        let next = more.then(|| entries.last().map(|e| e.seq)).flatten();
        let data: Vec<_> = entries.iter().map(|e| e.render()).collect();
        Ok(reply(200, &json!({"data": data, "next": next})))
    };
    run.await.unwrap_or_else(|r: Fail| *r)
}
