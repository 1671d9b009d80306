//! `GET /admin/teams/{id}` (docs/configuration.md "Teams"): one team's limits and their live use
//! across all its keys, in the shape of `GET /admin/keys/{id}` (`admin::keys`): spend in the
//! current budget period (`budget.spent_usd`), what requests in flight hold, what is left, and the
//! requests and tokens in the current sliding minute. The admin router (guarded by `--admin-key`)
//! calls [`respond`].
//!
//! ```json
//! {"id": "ml", "backend": "embedded",
//!  "rpm": {"limit": 100, "used": 3}, "tpm": null,
//!  "budget": {"usd": "10.00", "period": "month", "period_id": "2026-11", "spent_usd": "1.25", ...}}
//! ```

use crate::config::Team;
use crate::runtime::Snapshot;
use crate::state::limits::{KeyState, Limits};
use serde_json::{json, Value};

/// The JSON view of `state` for team `id` (the key view's shape).
pub fn render(id: &str, backend: &str, state: &KeyState) -> Value {
    crate::admin::keys::render(id, backend, state)
}

/// The live view of `team`: (status, JSON body); 503 when the limits store
/// cannot be read (Redis unreachable).
pub async fn state(limits: &Limits, team: &Team) -> (u16, Value) {
    match limits.team_state(team).await {
        Ok(state) => (200, render(&team.id, limits.backend_name(), &state)),
        Err(e) => (
            503,
            json!({"error": {"message": format!("the limits store cannot be read: {e}")}}),
        ),
    }
}

/// Answers `GET /admin/teams/{id}` for the teams of the keys file: (status,
/// JSON body). 404 for an unknown team id.
pub async fn respond(limits: &Limits, snap: &Snapshot, id: &str) -> (u16, Vec<u8>) {
    let (status, body) = match snap.keys.team(id) {
        Some(team) => state(limits, team).await,
        None => (
            404,
            json!({"error": {"message": format!("no team with id {}", crate::error::quote(id))}}),
        ),
    };
    (status, body.to_string().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Catalog, KeyStore};
    use crate::state::limits::Ask;

    #[tokio::test]
    async fn a_teams_state_sums_its_keys() {
        let keys = KeyStore::from_str(
            "k.json",
            r#"{"teams":[{"id":"ml","rpm":100,"budget":{"usd":"10.00","period":"total"}}],
                "keys":[{"id":"a","key":"sa","team":"ml"},{"id":"b","key":"sb","team":"ml","rpm":5},
                        {"id":"ml","key":"sm","budget":{"usd":"1.00","period":"total"}}]}"#,
        )
        .unwrap();
        let snap = Snapshot::new(Catalog::default(), keys);
        let limits = Limits::in_memory();
        for (secret, cost) in [("sa", 1_000_000_000), ("sb", 250_000_000)] {
            let key = snap.keys.find(secret).unwrap();
            let r = limits
                .reserve(Ask::inference(key, 10, 2_000_000_000))
                .await
                .unwrap();
            let _ = r.settle(5, cost).await;
        }
        // The key named like the team spends its own budget, not the team's.
        let ml = snap.keys.find("sm").unwrap();
        let _ = limits
            .reserve(Ask::inference(ml, 1, 100_000_000))
            .await
            .unwrap()
            .settle(1, 100_000_000)
            .await;
        let (status, body) = respond(&limits, &snap, "ml").await;
        assert_eq!(status, 200);
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["id"], "ml");
        assert_eq!(v["rpm"], json!({"limit": 100, "used": 2}));
        assert_eq!(v["budget"]["spent_usd"], "1.25");
        assert_eq!(v["budget"]["remaining_usd"], "8.75");
        let (status, body) = respond(&limits, &snap, "web").await;
        assert_eq!(status, 404);
        assert!(String::from_utf8(body).unwrap().contains("no team with id"));
    }
}
