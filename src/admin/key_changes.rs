//! Changing keys through the key store (docs/keys.md): `POST /admin/keys`
//! (a new key; its secret in the answer, once), `PATCH /admin/keys/{id}`
//! (limits, budget, policy, expiry, metadata, team), `POST
//! /admin/keys/{id}/rotate` (a new secret; the old one accepted for
//! `grace_seconds` more), `DELETE /admin/keys/{id}` (revoke: refused from
//! then on, still readable). A key of the keys file is changed by editing
//! the file: the API answers 409.
//!
//! A new record is validated by the keys file's own rules
//! (`config::stored_key`), so a field the API takes means what it means in
//! the file, and a refusal names the field. The secret is made here from
//! the system's CSPRNG, put in the answer and nowhere else: the store keeps
//! its SHA-256, the audit log not even that.

use super::writes::{change, no_content, not_in_force, set, validated, Refusal};
use super::{body, fail, keys, reply, Ctx, Fail, Reply};
use crate::config::{now_secs, stored_key, Source};
use crate::error::quote;
use crate::listener::Session;
use crate::state::keys::EntryKind;
use crate::util::rfc3339::Rfc3339;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// What the body of `POST /admin/keys` may hold.
const CREATE_FIELDS: &[&str] = &[
    "id",
    "team",
    "models",
    "rpm",
    "tpm",
    "budget",
    "policy",
    "expires_at",
    "metadata",
];
/// What `PATCH /admin/keys/{id}` may change (`null` removes it): all but the id.
const UPDATE_FIELDS: &[&str] = CREATE_FIELDS.split_at(1).1;
/// The largest `metadata`, as JSON text.
pub const MAX_METADATA: usize = 8 * 1024;
/// The longest grace period of a rotation: 30 days.
pub const MAX_GRACE_SECONDS: u64 = 30 * 86_400;
/// The secret's prefix (it says what the string is when found in a file).
pub const SECRET_PREFIX: &str = "sk-sb-";

/// `n` bytes from the system's CSPRNG, base64url without padding.
fn random(n: usize) -> Result<String, Fail> {
    use ring::rand::SecureRandom;
    let mut bytes = vec![0u8; n];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| fail(503, "unavailable", "the system's random source failed"))?;
    let mut out = String::new();
    crate::util::base64::encode(&bytes, &mut out);
    Ok(crate::util::base64::standard_to_url_safe(&out))
}

/// A new secret and its digest (hex).
fn new_secret() -> Result<(String, String), Fail> {
    let secret = format!("{SECRET_PREFIX}{}", random(32)?);
    let digest = crate::util::hex::encode(&Sha256::digest(secret.as_bytes()));
    Ok((secret, digest))
}

/// An id the API accepts: 1 to 128 of `A-Z a-z 0-9 . _ : -`, starting with
/// a letter or digit (safe in a URL path segment and in logs).
pub fn check_id(field: &str, id: &str) -> Result<(), Fail> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id.as_bytes()[0].is_ascii_alphanumeric()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(fail(
            400,
            "invalid_request",
            format!(
                "{field}: {} is not an id (1 to 128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit)",
                quote(id)
            ),
        ))
    }
}

/// Checks what a body sets beside the keys file's rules: the team exists,
/// the metadata is an object of bounded size.
fn check_fields(cx: &Ctx<'_>, fields: &Map<String, Value>) -> Result<(), Fail> {
    if let Some(Value::String(t)) = fields.get("team") {
        if cx.rt.snapshot().keys.team(t).is_none() {
            return Err(fail(
                400,
                "invalid_request",
                format!("team: no team {}", quote(t)),
            ));
        }
    }
    if let Some(m) = fields.get("metadata") {
        if !(m.is_object() || m.is_null()) {
            return Err(fail(400, "invalid_request", "metadata: expected an object"));
        }
        if m.to_string().len() > MAX_METADATA {
            return Err(fail(
                400,
                "invalid_request",
                format!("metadata: larger than {MAX_METADATA} bytes of JSON"),
            ));
        }
    }
    Ok(())
}

/// 409 for a key of the keys file.
fn file_key(cx: &Ctx<'_>, id: &str) -> Result<(), Fail> {
    match cx.rt.snapshot().keys.by_id(id) {
        Some(k) if k.source == Source::File => Err(fail(
            409,
            "conflict",
            format!(
                "key {} is defined in the keys file: change it there",
                quote(id)
            ),
        )),
        _ => Ok(()),
    }
}

/// The key object as now in force, with `secret` when one was just made.
fn answer(cx: &Ctx<'_>, status: u16, id: &str, secret: Option<String>) -> Reply {
    let snap = cx.rt.snapshot();
    let Some(k) = snap.keys.by_id(id) else {
        return not_in_force(EntryKind::Key, id);
    };
    let mut v = keys::object(k, now_secs());
    if let Some(s) = secret {
        v["key"] = Value::String(s);
    }
    reply(status, &v)
}

fn not_found(id: &str) -> Refusal {
    (404, "not_found", format!("no key with id {}", quote(id)))
}

/// The record of a key that may still change: 404 without one, 409 once revoked.
fn live(old: Option<Value>, id: &str) -> Result<Map<String, Value>, Refusal> {
    let Some(Value::Object(record)) = old else {
        return Err(not_found(id));
    };
    if record.contains_key("revoked_at") {
        return Err((409, "conflict", format!("key {} is revoked", quote(id))));
    }
    Ok(record)
}

/// `POST /admin/keys`: 201 with the key and its secret, shown this once.
pub async fn create(cx: &Ctx<'_>, session: &mut Session) -> Reply {
    let run = async {
        let fields = body::object(session).await?;
        body::only(&fields, CREATE_FIELDS)?;
        let id = match fields.get("id") {
            None | Some(Value::Null) => format!("key-{}", random(9)?),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(fail(400, "invalid_request", "id: expected a string")),
        };
        check_id("id", &id)?;
        file_key(cx, &id)?;
        check_fields(cx, &fields)?;
        let (secret, digest) = new_secret()?;
        let mut record = Map::new();
        set(&mut record, fields);
        record.insert("id".into(), Value::String(id.clone()));
        record.insert("sha256".into(), Value::String(digest));
        record.insert(
            "created_at".into(),
            Value::String(Rfc3339::seconds(now_secs()).to_string()),
        );
        let record = validated(record, stored_key).map_err(|(s, k, m)| fail(s, k, m))?;
        let key_id = id.clone();
        change(cx, EntryKind::Key, &id, move |old| match old {
            Some(_) => Err((
                409,
                "conflict",
                format!("a key with id {} exists", quote(&key_id)),
            )),
            None => Ok((Some(record), "key.create")),
        })
        .await?;
        Ok(answer(cx, 201, &id, Some(secret)))
    };
    run.await.unwrap_or_else(|r: Fail| *r)
}

/// `PATCH /admin/keys/{id}`: 200 with the key as changed.
pub async fn update(cx: &Ctx<'_>, session: &mut Session, id: &str) -> Reply {
    let run = async {
        let fields = body::object(session).await?;
        file_key(cx, id)?;
        body::only(&fields, UPDATE_FIELDS)?;
        check_fields(cx, &fields)?;
        let key_id = id.to_string();
        change(cx, EntryKind::Key, id, move |old| {
            let mut record = live(old, &key_id)?;
            set(&mut record, fields);
            Ok((Some(validated(record, stored_key)?), "key.update"))
        })
        .await?;
        Ok(answer(cx, 200, id, None))
    };
    run.await.unwrap_or_else(|r: Fail| *r)
}

/// `POST /admin/keys/{id}/rotate`, body `{"grace_seconds": N}` (default 0):
/// 200 with the key and its new secret; the old secret is accepted for N
/// seconds more (a secret replaced earlier is dropped).
pub async fn rotate(cx: &Ctx<'_>, session: &mut Session, id: &str) -> Reply {
    let run = async {
        let fields = body::object(session).await?;
        file_key(cx, id)?;
        body::only(&fields, &["grace_seconds"])?;
        let grace = match fields.get("grace_seconds") {
            None | Some(Value::Null) => 0,
            Some(v) => v
                .as_u64()
                .filter(|g| *g <= MAX_GRACE_SECONDS)
                .ok_or_else(|| {
                    fail(
                        400,
                        "invalid_request",
                        format!("grace_seconds: expected a whole number of seconds from 0 to {MAX_GRACE_SECONDS}"),
                    )
                })?,
        };
        let (secret, digest) = new_secret()?;
        let until = now_secs().saturating_add(i64::try_from(grace).unwrap_or(0));
        let key_id = id.to_string();
        change(cx, EntryKind::Key, id, move |old| {
            let mut record = live(old, &key_id)?;
            let old_digest = record.insert("sha256".into(), Value::String(digest));
            match old_digest {
                Some(d) if grace > 0 => {
                    let mut previous = Map::new();
                    previous.insert("sha256".into(), d);
                    previous.insert(
                        "until".into(),
                        Value::String(Rfc3339::seconds(until).to_string()),
                    );
                    record.insert("previous".into(), Value::Object(previous));
                }
                _ => {
                    record.remove("previous");
                }
            }
            Ok((Some(validated(record, stored_key)?), "key.rotate"))
        })
        .await?;
        Ok(answer(cx, 200, id, Some(secret)))
    };
    run.await.unwrap_or_else(|r: Fail| *r)
}

/// `DELETE /admin/keys/{id}`: 204; the key is refused from then on and
/// stays readable with `"state": "revoked"`. Revoking a revoked key changes nothing.
pub async fn revoke(cx: &Ctx<'_>, id: &str) -> Reply {
    let run = async {
        file_key(cx, id)?;
        if cx
            .rt
            .snapshot()
            .keys
            .by_id(id)
            .is_some_and(|k| k.revoked_at.is_some())
        {
            return Ok(());
        }
        let key_id = id.to_string();
        let now = Rfc3339::seconds(now_secs()).to_string();
        change(cx, EntryKind::Key, id, move |old| {
            let Some(Value::Object(mut record)) = old else {
                return Err(not_found(&key_id));
            };
            record.remove("previous");
            record.insert("revoked_at".into(), Value::String(now));
            Ok((Some(Value::Object(record)), "key.revoke"))
        })
        .await
    };
    no_content(run.await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_secrets() {
        for good in ["a", "prod-1", "team.ml:ci_2", &"x".repeat(128)] {
            assert!(check_id("id", good).is_ok(), "{good}");
        }
        for bad in ["", "-a", "a/b", "a b", "é", &"x".repeat(129)] {
            assert_eq!(check_id("id", bad).unwrap_err().status(), 400, "{bad}");
        }
        let (s1, d1) = new_secret().unwrap();
        let (s2, _) = new_secret().unwrap();
        assert!(s1.starts_with(SECRET_PREFIX) && s1.len() == SECRET_PREFIX.len() + 43);
        assert_ne!(s1, s2);
        assert_eq!(d1, crate::util::hex::encode(&Sha256::digest(s1.as_bytes())));
    }
}
