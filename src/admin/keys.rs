//! Reading keys (docs/keys.md): `GET /admin/keys` lists every key, the keys
//! file's and the key store's, in the order of their ids, filtered (`team`,
//! `state`, `source`) and paginated (`limit`, `after`: the last id of the
//! previous page, the answer's `next`); `GET /admin/keys/{id}` is one key
//! with its limits' live use: spend in the current budget period, what is
//! reserved by requests in flight, what is left, and the requests and
//! tokens in the current sliding minute (docs/configuration.md "Limits and
//! budgets"). Never a secret, nor its digest.
//!
//! ```json
//! {"id": "prod", "source": "api", "state": "active", "team": "ml", "models": null,
//!  "policy": null, "expires_at": null, "created_at": "2026-11-23T10:00:00Z",
//!  "revoked_at": null, "grace_until": null, "metadata": {"owner": "ana"},
//!  "backend": "embedded",
//!  "rpm": {"limit": 600, "used": 12},
//!  "tpm": null,
//!  "budget": {"usd": "50.00", "period": "day", "period_id": "2026-11-23",
//!             "period_start": "2026-11-23T00:00:00Z", "period_end": "2026-11-24T00:00:00Z",
//!             "spent_usd": "1.234", "reserved_usd": "0.02", "remaining_usd": "48.746"}}
//! ```
//!
//! In a list (and in the answers to changes) `rpm`, `tpm` and `budget` hold
//! the limits alone (`{"limit": 600}`, `{"usd": "50.00", "period": "day"}`).

use super::{body, error, fail, reply, Ctx, Fail, Reply};
use crate::config::{now_secs, ApiKey, Budget, KeyStore, Source, Status};
use crate::error::quote;
use crate::runtime::Snapshot;
use crate::state::limits::{format_usd, KeyState, Limits};
use crate::util::rfc3339::Rfc3339;
use serde_json::{json, Map, Value};

/// The largest page of `GET /admin/keys`.
pub const MAX_PAGE: usize = 1000;
/// A page's size when `limit` is not given.
pub const DEFAULT_PAGE: usize = 100;

/// An RFC 3339 instant (or `null`).
pub fn time(secs: Option<i64>) -> Value {
    secs.map_or(Value::Null, |s| {
        Value::String(Rfc3339::seconds(s).to_string())
    })
}

/// A budget's limit: `{"usd", "period"}`.
pub fn budget_limit(b: &Budget) -> Value {
    json!({"usd": format_usd(b.nanos), "period": b.period.name()})
}

/// The key object: what it is and its limits, never its secret.
pub fn object(k: &ApiKey, now: i64) -> Value {
    json!({
        "id": k.id,
        "source": k.source.name(),
        "state": k.status(now).name(),
        "team": k.team.as_ref().map(|t| t.id.as_str()),
        "models": k.models.as_ref().map(|ps| ps.iter().map(|p| p.as_str()).collect::<Vec<_>>()),
        "policy": k.policy.map(|p| p.name()),
        "rpm": k.rpm.map(|l| json!({"limit": l})),
        "tpm": k.tpm.map(|l| json!({"limit": l})),
        "budget": k.budget.as_ref().map(budget_limit),
        "expires_at": time(k.expires_at),
        "created_at": time(k.created_at),
        "revoked_at": time(k.revoked_at),
        "grace_until": time(k.grace_until().filter(|u| *u > now)),
        "metadata": k.metadata.as_deref(),
    })
}

/// The live limits of a key or a team (`backend`, and `rpm`, `tpm`, `budget`
/// with their use), to merge into its object.
pub fn live(backend: &str, state: &KeyState) -> Map<String, Value> {
    let window =
        |w: Option<(u64, u64)>| w.map(|(limit, used)| json!({"limit": limit, "used": used}));
    let budget = state.budget.as_ref().map(|b| {
        json!({
            "usd": format_usd(b.budget.nanos),
            "period": b.budget.period.name(),
            "period_id": b.period.id,
            "period_start": (b.period.end.is_some()).then(|| Rfc3339::seconds(b.period.start).to_string()),
            "period_end": b.period.end.map(|e| Rfc3339::seconds(e).to_string()),
            "spent_usd": format_usd(b.spent),
            "reserved_usd": format_usd(b.reserved),
            "remaining_usd": format_usd(b.remaining().max(0)),
        })
    });
    let mut out = Map::new();
    out.insert("backend".into(), json!(backend));
    out.insert(
        "rpm".into(),
        json!(window(state.rpm.map(|(l, u)| (u64::from(l), u)))),
    );
    out.insert("tpm".into(), json!(window(state.tpm)));
    out.insert("budget".into(), json!(budget));
    out
}

/// The key object with its limits' live use `state`, from `backend`.
pub fn render(key: &ApiKey, backend: &str, state: &KeyState) -> Value {
    let mut v = object(key, now_secs());
    for (k, u) in live(backend, state) {
        v[k.as_str()] = u;
    }
    v
}

/// Answers `GET /admin/keys/{id}`: 404 for an unknown key id, 503 when the
/// limits store cannot be read (Redis unreachable).
pub async fn respond(limits: &Limits, snap: &Snapshot, id: &str) -> Reply {
    let Some(key) = snap.keys.by_id(id) else {
        return error(404, "not_found", format!("no key with id {}", quote(id)));
    };
    match limits.state(key).await {
        Ok(state) => reply(200, &render(key, limits.backend_name(), &state)),
        Err(e) => error(
            503,
            "unavailable",
            format!("the limits store cannot be read: {e}"),
        ),
    }
}

/// `GET /admin/keys/{id}`.
pub async fn one(cx: &Ctx<'_>, id: &str) -> Reply {
    respond(cx.limits, &cx.rt.snapshot(), id).await
}

/// The keys matching the query's filters, a page from `after`: `{"data", "next"}`.
pub fn page(keys: &KeyStore, query: Option<&str>, now: i64) -> Result<Value, Fail> {
    let params = body::query(query, &["team", "state", "source", "limit", "after"])?;
    let get = |name: &str| body::param(&params, name);
    let state = get("state")
        .map(|s| {
            Status::from_name(s).ok_or_else(|| {
                fail(
                    400,
                    "invalid_request",
                    format!(
                        "state: expected active, expired or revoked, got {}",
                        quote(s)
                    ),
                )
            })
        })
        .transpose()?;
    let source = get("source")
        .map(|s| match s {
            "file" => Ok(Source::File),
            "api" => Ok(Source::Api),
            _ => Err(fail(
                400,
                "invalid_request",
                format!("source: expected file or api, got {}", quote(s)),
            )),
        })
        .transpose()?;
    let limit = body::limit(get("limit"), DEFAULT_PAGE, MAX_PAGE)?;
    let team = get("team");
    let mut matching = keys.keys_after(get("after")).filter(|k| {
        team.is_none_or(|t| k.team.as_ref().is_some_and(|x| x.id == t))
            && state.is_none_or(|s| k.status(now) == s)
            && source.is_none_or(|s| k.source == s)
    });
    let data: Vec<Value> = matching
        .by_ref()
        .take(limit)
        .map(|k| object(k, now))
        .collect();
    let next = match matching.next() {
        Some(_) => data.last().map(|v| v["id"].clone()),
        None => None,
    };
    Ok(json!({"data": data, "next": next}))
}

/// `GET /admin/keys`.
pub fn list(cx: &Ctx<'_>, query: Option<&str>) -> Reply {
    match page(&cx.rt.snapshot().keys, query, now_secs()) {
        Ok(v) => reply(200, &v),
        Err(r) => *r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Catalog, KeyStore};
    use crate::state::limits::Ask;

    fn snapshot() -> Snapshot {
        let catalog = Catalog::default();
        let keys = KeyStore::from_str(
            "k.json",
            r#"{"keys":[{"id":"prod","key":"s","rpm":600,"budget":{"usd":"50.00","period":"total"}},{"id":"dev","key":"d"}]}"#,
        )
        .unwrap();
        Snapshot::new(catalog, keys)
    }

    #[tokio::test]
    async fn a_keys_state() {
        let snap = snapshot();
        let limits = Limits::in_memory();
        let key = snap.keys.by_id("prod").unwrap();
        let held = limits
            .reserve(Ask::inference(key, 10, 2_000_000_000))
            .await
            .unwrap();
        let _ = held.settle(5, 1_234_000_000).await;
        let _inflight = limits
            .reserve(Ask::inference(key, 10, 20_000_000))
            .await
            .unwrap();
        let r = respond(&limits, &snap, "prod").await;
        assert_eq!(r.status(), 200);
        let v: Value = serde_json::from_slice(r.body()).unwrap();
        assert_eq!(
            (v["source"].as_str(), v["state"].as_str()),
            (Some("file"), Some("active"))
        );
        assert_eq!(v["rpm"], json!({"limit": 600, "used": 2}));
        assert_eq!(v["tpm"], Value::Null);
        assert_eq!(v["backend"], "embedded");
        let b = &v["budget"];
        assert_eq!(b["usd"], "50.00");
        assert_eq!(b["period"], "total");
        assert_eq!(b["period_end"], Value::Null);
        assert_eq!(b["spent_usd"], "1.234");
        assert_eq!(b["reserved_usd"], "0.02");
        assert_eq!(b["remaining_usd"], "48.746");
        let r = respond(&limits, &snap, "dev").await;
        assert_eq!(r.status(), 200);
        let v: Value = serde_json::from_slice(r.body()).unwrap();
        assert_eq!((v["rpm"].is_null(), v["budget"].is_null()), (true, true));
        assert_eq!(respond(&limits, &snap, "nobody").await.status(), 404);
    }

    #[test]
    fn pages_and_filters() {
        let mut keys = String::from(r#"{"teams":[{"id":"ml"}],"keys":["#);
        for i in 0..25 {
            let team = if i % 5 == 0 { r#","team":"ml""# } else { "" };
            keys.push_str(&format!(r#"{{"id":"k{i:02}","key":"s{i}"{team}}},"#));
        }
        keys.pop();
        keys.push_str("]}");
        let ks = KeyStore::from_str("k.json", &keys).unwrap();
        let p = page(&ks, Some("limit=10"), 0).unwrap();
        assert_eq!(p["data"].as_array().unwrap().len(), 10);
        assert_eq!(p["next"], "k09");
        let p = page(&ks, Some("limit=10&after=k19"), 0).unwrap();
        assert_eq!(p["data"][0]["id"], "k20");
        assert_eq!(p["next"], Value::Null);
        let p = page(&ks, Some("team=ml"), 0).unwrap();
        let ids: Vec<&str> = p["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["k00", "k05", "k10", "k15", "k20"]);
        assert_eq!(
            page(&ks, Some("state=revoked"), 0).unwrap()["data"],
            json!([])
        );
        for bad in [
            "state=gone",
            "limit=0",
            "limit=5000",
            "color=red",
            "source=disk",
        ] {
            let r = page(&ks, Some(bad), 0).unwrap_err();
            assert_eq!(r.status(), 400, "{bad}");
            let name = bad.split('=').next().unwrap();
            assert!(String::from_utf8_lossy(r.body()).contains(name), "{bad}");
        }
    }
}
