//! Teams through the key store (docs/keys.md "Routes"): `POST /admin/teams`
//! (`{"id", "rpm"?, "tpm"?, "budget"?}`), `GET /admin/teams`, `GET`,
//! `PATCH` (`null` removes a limit) and `DELETE /admin/teams/{id}`. A team
//! of the keys file is changed in the file (409 here); a team that a key
//! names, revoked keys included, cannot be deleted (409).
//!
//! A team's live use across its keys (its spend in the period,
//! `budget.spent_usd`, what requests in flight hold, its rpm and tpm windows)
//! comes from the limits state (`Limits::team_state`), in the shape of a
//! key's (`admin::keys::live`).

use super::key_changes::check_id;
use super::writes::{change, no_content, not_in_force, set, validated};
use super::{body, error, fail, keys, reply, Ctx, Fail, Reply};
use crate::config::{now_secs, stored_team, Source, Team};
use crate::error::quote;
use crate::listener::Session;
use crate::state::keys::EntryKind;
use crate::util::rfc3339::Rfc3339;
use serde_json::{json, Map, Value};

/// The team object: its limits, where it is defined and how many keys name it.
pub fn object(t: &Team, source: Source, members: usize) -> Value {
    json!({
        "id": t.id,
        "source": source.name(),
        "rpm": t.rpm.map(|l| json!({"limit": l})),
        "tpm": t.tpm.map(|l| json!({"limit": l})),
        "budget": t.budget.as_ref().map(keys::budget_limit),
        "keys": members,
    })
}

fn members(cx: &Ctx<'_>, id: &str) -> usize {
    cx.rt
        .snapshot()
        .keys
        .keys_after(None)
        .filter(|k| k.team.as_ref().is_some_and(|t| t.id == id))
        .count()
}

/// `GET /admin/teams`: every team, the file's then the store's.
pub fn list(cx: &Ctx<'_>) -> Reply {
    let snap = cx.rt.snapshot();
    let mut count = std::collections::HashMap::<&str, usize>::new();
    for k in snap.keys.keys_after(None) {
        if let Some(t) = &k.team {
            *count.entry(t.id.as_str()).or_default() += 1;
        }
    }
    let data: Vec<Value> = snap
        .keys
        .teams()
        .iter()
        .map(|t| {
            let source = snap.keys.team_source(&t.id).unwrap_or(Source::File);
            object(t, source, count.get(t.id.as_str()).copied().unwrap_or(0))
        })
        .collect();
    reply(200, &json!({"data": data}))
}

/// `GET /admin/teams/{id}`.
pub async fn one(cx: &Ctx<'_>, id: &str) -> Reply {
    let snap = cx.rt.snapshot();
    let (Some(t), Some(source)) = (snap.keys.team(id), snap.keys.team_source(id)) else {
        return error(404, "not_found", format!("no team with id {}", quote(id)));
    };
    let mut v = object(t, source, members(cx, id));
    match cx.limits.team_state(t).await {
        Ok(state) => {
            for (k, u) in keys::live(cx.limits.backend_name(), &state) {
                v[k.as_str()] = u;
            }
            reply(200, &v)
        }
        Err(e) => error(
            503,
            "unavailable",
            format!("the limits store cannot be read: {e}"),
        ),
    }
}

fn file_team(cx: &Ctx<'_>, id: &str) -> Result<(), Fail> {
    if cx.rt.snapshot().keys.team_source(id) == Some(Source::File) {
        return Err(fail(
            409,
            "conflict",
            format!(
                "team {} is defined in the keys file: change it there",
                quote(id)
            ),
        ));
    }
    Ok(())
}

fn answer(cx: &Ctx<'_>, status: u16, id: &str) -> Reply {
    let snap = cx.rt.snapshot();
    match snap.keys.team(id) {
        Some(t) => reply(status, &object(t, Source::Api, members(cx, id))),
        None => not_in_force(EntryKind::Team, id),
    }
}

/// `POST /admin/teams`: 201 with the team.
pub async fn create(cx: &Ctx<'_>, session: &mut Session) -> Reply {
    let run = async {
        let fields = body::object(session).await?;
        body::only(&fields, &["id", "rpm", "tpm", "budget"])?;
        let id = match fields.get("id") {
            Some(Value::String(s)) => s.clone(),
            None | Some(Value::Null) => {
                return Err(fail(400, "invalid_request", "id: missing required field"))
            }
            Some(_) => return Err(fail(400, "invalid_request", "id: expected a string")),
        };
        check_id("id", &id)?;
        file_team(cx, &id)?;
        let mut record = Map::new();
        set(&mut record, fields);
        record.insert(
            "created_at".into(),
            Value::String(Rfc3339::seconds(now_secs()).to_string()),
        );
        let record = validated(record, stored_team).map_err(|(s, k, m)| fail(s, k, m))?;
        let team_id = id.clone();
        change(cx, EntryKind::Team, &id, move |old| match old {
            Some(_) => Err((
                409,
                "conflict",
                format!("a team with id {} exists", quote(&team_id)),
            )),
            None => Ok((Some(record), "team.create")),
        })
        .await?;
        Ok(answer(cx, 201, &id))
    };
    run.await.unwrap_or_else(|r: Fail| *r)
}

/// `PATCH /admin/teams/{id}`: 200 with the team as changed.
pub async fn update(cx: &Ctx<'_>, session: &mut Session, id: &str) -> Reply {
    let run = async {
        let fields = body::object(session).await?;
        file_team(cx, id)?;
        body::only(&fields, &["rpm", "tpm", "budget"])?;
        let team_id = id.to_string();
        change(cx, EntryKind::Team, id, move |old| {
            let Some(Value::Object(mut record)) = old else {
                return Err((
                    404,
                    "not_found",
                    format!("no team with id {}", quote(&team_id)),
                ));
            };
            set(&mut record, fields);
            Ok((Some(validated(record, stored_team)?), "team.update"))
        })
        .await?;
        Ok(answer(cx, 200, id))
    };
    run.await.unwrap_or_else(|r: Fail| *r)
}

/// `DELETE /admin/teams/{id}`: 204; refused (409) while a key names the team.
pub async fn delete(cx: &Ctx<'_>, id: &str) -> Reply {
    let run = async {
        file_team(cx, id)?;
        let n = members(cx, id);
        if n > 0 {
            return Err(fail(
                409,
                "conflict",
                format!(
                    "team {} has {n} keys: move them to another team (PATCH team) first",
                    quote(id)
                ),
            ));
        }
        let team_id = id.to_string();
        change(cx, EntryKind::Team, id, move |old| match old {
            Some(_) => Ok((None, "team.delete")),
            None => Err((
                404,
                "not_found",
                format!("no team with id {}", quote(&team_id)),
            )),
        })
        .await
    };
    no_content(run.await)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::KeyStore;
    use crate::state::limits::{Ask, Limits};

    #[tokio::test]
    async fn a_teams_live_use_sums_its_keys() {
        let keys = KeyStore::from_str(
            "k.json",
            r#"{"teams":[{"id":"ml","rpm":100,"budget":{"usd":"10.00","period":"total"}}],
                "keys":[{"id":"a","key":"sa","team":"ml"},{"id":"b","key":"sb","team":"ml","rpm":5},
                        {"id":"ml","key":"sm","budget":{"usd":"1.00","period":"total"}}]}"#,
        )
        .unwrap();
        let limits = Limits::in_memory();
        for (secret, cost) in [("sa", 1_000_000_000), ("sb", 250_000_000)] {
            let key = keys.find(secret).unwrap();
            let r = limits
                .reserve(Ask::inference(key, 10, 2_000_000_000))
                .await
                .unwrap();
            let _ = r.settle(5, cost).await;
        }
        // The key named like the team spends its own budget, not the team's.
        let ml = keys.find("sm").unwrap();
        let _ = limits
            .reserve(Ask::inference(ml, 1, 100_000_000))
            .await
            .unwrap()
            .settle(1, 100_000_000)
            .await;
        let state = limits.team_state(keys.team("ml").unwrap()).await.unwrap();
        let v = Value::Object(keys::live(limits.backend_name(), &state));
        assert_eq!(v["rpm"], json!({"limit": 100, "used": 2}));
        assert_eq!(v["budget"]["spent_usd"], "1.25");
        assert_eq!(v["budget"]["remaining_usd"], "8.75");
        assert_eq!(v["backend"], "embedded");
    }
}
