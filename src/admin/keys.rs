//! `GET /admin/keys/{id}` (docs/configuration.md "Limits and budgets"): one key's limits and their
//! live use: spend in the current budget period, what is reserved by requests in flight, what is
//! left, and the requests and tokens in the current sliding minute. The admin router (guarded by
//! `--admin-key`) calls [`respond`].
//!
//! ```json
//! {"id": "prod", "backend": "embedded",
//!  "rpm": {"limit": 600, "used": 12},
//!  "tpm": null,
//!  "budget": {"usd": "50.00", "period": "day", "period_id": "2026-11-23",
//!             "period_start": "2026-11-23T00:00:00Z", "period_end": "2026-11-24T00:00:00Z",
//!             "spent_usd": "1.234", "reserved_usd": "0.02", "remaining_usd": "48.746"}}
//! ```

use crate::runtime::Snapshot;
use crate::state::limits::{format_usd, KeyState, Limits};
use crate::util::rfc3339::Rfc3339;
use serde_json::{json, Value};

/// The JSON view of `state` for key `id`.
pub fn render(id: &str, backend: &str, state: &KeyState) -> Value {
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
    json!({
        "id": id,
        "backend": backend,
        "rpm": window(state.rpm.map(|(l, u)| (u64::from(l), u))),
        "tpm": window(state.tpm),
        "budget": budget,
    })
}

/// Answers `GET /admin/keys/{id}`: (status, JSON body). 404 for an unknown
/// key id, 503 when the limits store cannot be read (Redis unreachable).
pub async fn respond(limits: &Limits, snap: &Snapshot, id: &str) -> (u16, Vec<u8>) {
    let error = |status: u16, message: String| {
        (
            status,
            json!({"error": {"message": message}})
                .to_string()
                .into_bytes(),
        )
    };
    let Some(key) = snap.keys.by_id(id) else {
        return error(404, format!("no key with id {}", crate::error::quote(id)));
    };
    match limits.state(key).await {
        Ok(state) => (
            200,
            render(&key.id, limits.backend_name(), &state)
                .to_string()
                .into_bytes(),
        ),
        Err(e) => error(503, format!("the limits store cannot be read: {e}")),
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
        let (status, body) = respond(&limits, &snap, "prod").await;
        assert_eq!(status, 200);
        let v: Value = serde_json::from_slice(&body).unwrap();
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
        let (status, body) = respond(&limits, &snap, "dev").await;
        assert_eq!(status, 200);
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!((v["rpm"].is_null(), v["budget"].is_null()), (true, true));
        assert_eq!(respond(&limits, &snap, "nobody").await.0, 404);
    }
}
