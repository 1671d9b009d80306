//! A verified token's claims mapped to who the caller is
//! (docs/configuration.md "JWT clients (OIDC)"): on the client routes a principal
//! (an `ApiKey` with the id `jwt:<sub>`, the team named by `team_claim`, the
//! policy named by `policy_claim`, the `jwt` block's `models`); on the admin
//! API whether `admin_claim` holds `admin_value`, and the actor the audit
//! names.

use crate::config::{ApiKey, JwtMapping, KeyStore, Policy};
use crate::error::{quote, ErrorKind, GatewayError};
use serde_json::{Map, Value};

/// The longest `sub` (or `email`) taken as a name; a longer one is refused.
const MAX_NAME_BYTES: usize = 256;

/// The claims of a token whose signature, issuer, audience and times were checked.
#[derive(Debug, Clone)]
pub struct Claims(pub(super) Map<String, Value>);

fn forbidden(message: String) -> GatewayError {
    GatewayError::new(ErrorKind::PermissionDenied, message)
}

/// A name fit for logs: non-empty, bounded, no control characters.
fn name(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str)
        .filter(|s| !s.is_empty() && s.len() <= MAX_NAME_BYTES && !s.chars().any(char::is_control))
}

impl Claims {
    /// A claim by name.
    pub fn get(&self, claim: &str) -> Option<&Value> {
        self.0.get(claim)
    }

    /// `sub`, required: the principal's name.
    pub fn subject(&self) -> Result<&str, GatewayError> {
        name(self.0.get("sub")).ok_or_else(|| {
            GatewayError::new(
                ErrorKind::Authentication,
                "invalid JWT: sub is missing, empty, over 256 bytes or holds control characters",
            )
        })
    }

    /// Who did it, for the admin API's audit: `jwt:` and the `email` claim
    /// when the token has one, else its `sub`.
    pub fn actor(&self) -> Result<String, GatewayError> {
        let who = match name(self.0.get("email")) {
            Some(email) => email,
            None => self.subject()?,
        };
        Ok(format!("jwt:{who}"))
    }

    /// The principal the client routes see: `jwt:<sub>`, its team, policy and models.
    /// 403 when the file has no `jwt` block, or the team claim is missing or
    /// names no team of the file.
    pub fn principal(&self, keys: &KeyStore) -> Result<ApiKey, GatewayError> {
        let sub = self.subject()?;
        let Some(map) = keys.jwt() else {
            return Err(forbidden(
                "JWT clients are not mapped to teams: keys.json has no jwt block".into(),
            ));
        };
        let claim = &map.team_claim;
        let team = match self.0.get(claim) {
            Some(Value::String(t)) => keys.team(t).ok_or_else(|| {
                forbidden(format!(
                    "the token's {} claim names no team of keys.json: {}",
                    quote(claim),
                    quote(t)
                ))
            })?,
            Some(_) => {
                return Err(forbidden(format!(
                    "the token's {} claim is not a string",
                    quote(claim)
                )))
            }
            None => {
                return Err(forbidden(format!(
                    "the token has no {} claim (the team)",
                    quote(claim)
                )))
            }
        };
        let policy = match &map.policy_claim {
            None => None,
            Some(pc) => match self.0.get(pc) {
                None => None,
                Some(v) => Some(v.as_str().and_then(Policy::from_name).ok_or_else(|| {
                    forbidden(format!(
                        "the token's {} claim is not adapt or strict",
                        quote(pc)
                    ))
                })?),
            },
        };
        Ok(ApiKey::principal(
            format!("jwt:{sub}"),
            map.models.clone(),
            policy,
            Some(team.clone()),
        ))
    }

    /// Whether `map`'s `admin_claim` (a string, or an array of strings)
    /// holds its `admin_value`.
    pub fn grants_admin(&self, map: &JwtMapping) -> bool {
        let (Some(claim), Some(want)) = (&map.admin_claim, &map.admin_value) else {
            return false;
        };
        match self.0.get(claim) {
            Some(Value::String(s)) => s == want,
            Some(Value::Array(a)) => a.iter().any(|v| v.as_str() == Some(want.as_str())),
            _ => false,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn keys() -> KeyStore {
        KeyStore::from_str(
            "k.json",
            r#"{"teams":[{"id":"ml","rpm":5}],"keys":[],
                "jwt":{"team_claim":"team","policy_claim":"pol","models":["openai/*"],
                       "admin_claim":"groups","admin_value":"admins"}}"#,
        )
        .unwrap()
    }

    fn claims(v: Value) -> Claims {
        Claims(v.as_object().unwrap().clone())
    }

    #[test]
    fn a_token_maps_to_its_team_and_policy() {
        let k = claims(json!({"sub": "alice", "team": "ml", "pol": "strict"}))
            .principal(&keys())
            .unwrap();
        assert_eq!(k.id, "jwt:alice");
        assert_eq!(k.team.as_ref().unwrap().rpm, Some(5));
        assert_eq!(k.policy, Some(Policy::Strict));
        assert!(k.allows("openai/gpt-5") && !k.allows("anthropic/claude"));
        let k = claims(json!({"sub": "bob", "team": "ml"}))
            .principal(&keys())
            .unwrap();
        assert_eq!(k.policy, None);
    }

    #[test]
    fn a_team_that_is_not_there_is_forbidden_by_name() {
        let e = claims(json!({"sub": "a", "team": "web"}))
            .principal(&keys())
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::PermissionDenied);
        assert!(
            e.message
                .contains("\"team\" claim names no team of keys.json: \"web\""),
            "{}",
            e.message
        );
        let e = claims(json!({"sub": "a"})).principal(&keys()).unwrap_err();
        assert!(e.message.contains("no \"team\" claim"), "{}", e.message);
        let e = claims(json!({"sub": "a", "team": ["ml"]}))
            .principal(&keys())
            .unwrap_err();
        assert!(e.message.contains("not a string"), "{}", e.message);
        let e = claims(json!({"sub": "a", "team": "ml", "pol": "loose"}))
            .principal(&keys())
            .unwrap_err();
        assert!(e.message.contains("not adapt or strict"), "{}", e.message);
        let e = claims(json!({"team": "ml"}))
            .principal(&keys())
            .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Authentication);
        let unmapped = KeyStore::from_str("k.json", r#"{"keys":[]}"#).unwrap();
        let e = claims(json!({"sub": "a", "team": "ml"}))
            .principal(&unmapped)
            .unwrap_err();
        assert!(e.message.contains("no jwt block"), "{}", e.message);
    }

    #[test]
    fn the_admin_group_grants_admin() {
        let ks = keys();
        let map = ks.jwt().unwrap();
        assert!(claims(json!({"groups": ["dev", "admins"]})).grants_admin(map));
        assert!(claims(json!({"groups": "admins"})).grants_admin(map));
        assert!(!claims(json!({"groups": ["dev"]})).grants_admin(map));
        assert!(!claims(json!({"groups": {"admins": true}})).grants_admin(map));
        assert!(!claims(json!({"admins": "groups"})).grants_admin(map));
        let c = claims(json!({"sub": "u1", "email": "ops@example.com"}));
        assert_eq!(c.actor().unwrap(), "jwt:ops@example.com");
        assert_eq!(claims(json!({"sub": "u1"})).actor().unwrap(), "jwt:u1");
        assert!(claims(json!({"sub": "a\nb"})).actor().is_err());
    }
}
