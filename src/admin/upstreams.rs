//! `GET /admin/upstreams`: every provider's pool as JSON — each upstream's
//! weight, health (cooling and for how long), failure streak, last failure
//! and the latest ones (reason, status, when), requests in flight and
//! counters since start. Never a key: only the name of the variable it is
//! read from.

use crate::config::Auth;
use crate::runtime::Snapshot;
use serde_json::{json, Value};
use std::time::Instant;

/// The pools of `snap`, as the admin API answers them.
pub fn render(snap: &Snapshot) -> Value {
    let now = Instant::now();
    let wall = crate::util::rfc3339::Rfc3339::now();
    let providers: Vec<Value> = snap
        .pools()
        .map(|(p, pool)| {
            let upstreams: Vec<Value> = p
                .upstreams
                .iter()
                .zip(pool.members())
                .map(|(u, m)| {
                    let v = m.view(now);
                    json!({
                        "id": u.id,
                        "protocol": u.protocol_name,
                        "base_url": u.base_url,
                        "api_key_env": u.api_key_env,
                        "key_configured": key_configured(u),
                        "auth": auth(u),
                        "weight": u.weight,
                        "healthy": v.cooling.is_none(),
                        "cooldown_ms": v.cooling.map(|d| d.as_millis() as u64),
                        "failure_streak": v.streak,
                        "last_failure": v.last_failure.map(|(reason, ago)| json!({
                            "reason": reason,
                            "ago_ms": ago.as_millis() as u64,
                        })),
                        "recent_failures": v.recent.iter().map(|(cause, ago)| json!({
                            "reason": cause.label(),
                            "status": cause.status(),
                            "ago_ms": ago.as_millis() as u64,
                            "at": at(wall, *ago),
                        })).collect::<Vec<_>>(),
                        "in_flight": v.in_flight,
                        "attempts": v.attempts,
                        "failures": v.failures,
                        "cooldowns": v.cooldowns,
                    })
                })
                .collect();
            let ms = |d: Option<std::time::Duration>| d.map(|d| d.as_millis() as u64);
            json!({
                "id": p.id,
                "retries": p.retries,
                "timeouts": {
                    "connect_ms": ms(p.timeouts.connect),
                    "first_token_ms": ms(p.timeouts.first_token),
                    "idle_ms": ms(p.timeouts.idle),
                    "total_ms": ms(p.timeouts.total),
                },
                "upstreams": upstreams,
            })
        })
        .collect();
    json!({ "providers": providers })
}

/// The wall-clock time `ago` before `now`, RFC 3339 to the millisecond.
fn at(now: crate::util::rfc3339::Rfc3339, ago: std::time::Duration) -> String {
    let ms = now.secs * 1000 + i64::from(now.millis.unwrap_or(0))
        - i64::try_from(ago.as_millis()).unwrap_or(i64::MAX / 2);
    crate::util::rfc3339::Rfc3339 {
        secs: ms.div_euclid(1000),
        millis: Some(u32::try_from(ms.rem_euclid(1000)).unwrap_or(0)),
    }
    .to_string()
}

/// Whether the upstream's credential is configured (its key or client
/// secret variable set; a token source is tried when a request needs it).
fn key_configured(u: &crate::config::Upstream) -> bool {
    match &u.auth {
        Auth::Key => u.api_key.is_some(),
        Auth::Entra(e) => e.client_secret.is_some(),
        Auth::Google(_) | Auth::Aws(_) => true,
    }
}

/// Where a cloud upstream's token comes from: names, never a secret.
fn auth(u: &crate::config::Upstream) -> Value {
    match &u.auth {
        Auth::Key if matches!(u.cloud, Some(crate::config::Cloud::Bedrock { .. })) => json!({
            "type": "bearer",
            "env": u.api_key_env,
        }),
        Auth::Key => Value::Null,
        Auth::Entra(e) => json!({
            "type": "entra",
            "tenant_id": e.tenant_id,
            "client_id": e.client_id,
            "client_secret_env": e.client_secret_env,
        }),
        Auth::Google(g) => json!({
            "type": "google-oauth",
            "credentials_file": g.credentials_file,
        }),
        Auth::Aws(a) => json!({
            "type": "sigv4",
            "profile": a.profile,
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::config::{Catalog, KeyStore};
    use crate::upstream::pool::Cause;

    #[test]
    fn shows_weights_health_and_no_keys() {
        let cat = Catalog::from_str(
            "c.json",
            r#"{"providers":[{"id":"p","families":["openai"],"timeouts":{"first_token":500},"upstreams":[
                {"id":"east","protocol":"openai","base_url":"http://127.0.0.1:1/v1","weight":3,"api_key_env":"K"},
                {"protocol":"openai","base_url":"http://127.0.0.1:1/v1"}]}],"models":[]}"#,
            &|_| Some("secret-key".into()),
        )
        .unwrap();
        let snap = Snapshot::new(cat, KeyStore::default());
        let pool = snap.pool("p").unwrap();
        pool.member(1).failed(
            Cause::RateLimited(Some(std::time::Duration::from_secs(7))),
            Instant::now(),
        );
        let v = render(&snap);
        let text = v.to_string();
        assert!(!text.contains("secret-key"), "{text}");
        let p = &v["providers"][0];
        assert_eq!(p["timeouts"]["first_token_ms"], 500);
        assert_eq!(p["retries"], 2);
        let (east, second) = (&p["upstreams"][0], &p["upstreams"][1]);
        assert_eq!(east["id"], "east");
        assert_eq!(east["weight"], 3);
        assert_eq!(east["healthy"], true);
        // The second upstream of that protocol and host.
        assert_eq!(second["id"], "openai@127.0.0.1:1#2");
        assert_eq!(second["healthy"], false);
        assert!(second["cooldown_ms"].as_u64().unwrap() > 6000);
        assert_eq!(second["last_failure"]["reason"], "rate_limited");
        let recent = &second["recent_failures"][0];
        assert_eq!(recent["reason"], "rate_limited");
        assert_eq!(recent["status"], 429);
        assert!(recent["at"].as_str().unwrap().ends_with('Z'));
        assert_eq!(east["recent_failures"], json!([]));
    }

    #[test]
    fn cloud_upstreams_show_their_credential_source_and_no_secret() {
        let cat = Catalog::from_str(
            "c.json",
            r#"{"providers":[{"id":"p","families":["openai"],"upstreams":[
                {"protocol":"azure","base_url":"http://127.0.0.1:1/openai/v1","auth":{"type":"entra",
                 "tenant_id":"t","client_id":"c","client_secret_env":"S"}},
                {"protocol":"vertex","project":"pr","location":"global","auth":{"type":"google-oauth"}}]}],"models":[]}"#,
            &|_| Some("entra-secret-value".into()),
        )
        .unwrap();
        let v = render(&Snapshot::new(cat, KeyStore::default()));
        let text = v.to_string();
        assert!(!text.contains("entra-secret-value"), "{text}");
        let (azure, vertex) = (
            &v["providers"][0]["upstreams"][0],
            &v["providers"][0]["upstreams"][1],
        );
        assert_eq!(azure["protocol"], "azure");
        assert_eq!(azure["auth"]["type"], "entra");
        assert_eq!(azure["auth"]["client_secret_env"], "S");
        assert_eq!(azure["key_configured"], true);
        assert_eq!(vertex["protocol"], "vertex");
        assert_eq!(vertex["base_url"], "https://aiplatform.googleapis.com");
        assert_eq!(vertex["auth"]["credentials_file"], Value::Null);
    }
}
