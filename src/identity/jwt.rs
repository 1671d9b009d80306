//! A JWT in compact form (RFC 7519 over RFC 7515): parsed, its signature
//! verified with `ring`, its claims checked (docs/security.md "JWT clients").
//!
//! Only RS256 (RSASSA-PKCS1-v1_5 with SHA-256, 2048 to 8192-bit keys) and
//! ES256 (ECDSA P-256 with SHA-256, the 64-byte `R || S` form) are taken;
//! `none`, every HMAC algorithm and anything else are refused before a key
//! is looked at. The header's `alg` must fit the key it names (`kty`, `crv`
//! and, when the key has one, `alg`): an RSA public key is never used as an
//! HMAC secret, nor an EC key for RS256.

use crate::util::base64;
use ring::signature::{
    RsaPublicKeyComponents, UnparsedPublicKey, ECDSA_P256_SHA256_FIXED, RSA_PKCS1_2048_8192_SHA256,
};
use serde_json::{Map, Value};

/// The largest token read; a longer credential is refused unparsed.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// The clock skew allowed on `exp`, `nbf` and `iat`, in seconds.
pub const LEEWAY_SECS: i64 = 60;

/// A signature algorithm the gateway verifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    Rs256,
    Es256,
}

impl Alg {
    /// The JOSE name.
    pub fn name(self) -> &'static str {
        match self {
            Alg::Rs256 => "RS256",
            Alg::Es256 => "ES256",
        }
    }

    fn from_name(s: &str) -> Option<Alg> {
        match s {
            "RS256" => Some(Alg::Rs256),
            "ES256" => Some(Alg::Es256),
            _ => None,
        }
    }
}

/// A public key a token may be signed with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublicKey {
    /// RSA: modulus and exponent, big-endian, no leading zeros.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// P-256: the uncompressed point `04 || x || y`.
    P256 { point: Vec<u8> },
}

impl PublicKey {
    /// The JWK `kty`.
    pub fn kty(&self) -> &'static str {
        match self {
            PublicKey::Rsa { .. } => "RSA",
            PublicKey::P256 { .. } => "EC",
        }
    }

    /// Whether this key verifies `alg` signatures.
    pub fn fits(&self, alg: Alg) -> bool {
        matches!(
            (self, alg),
            (PublicKey::Rsa { .. }, Alg::Rs256) | (PublicKey::P256 { .. }, Alg::Es256)
        )
    }
}

/// Why a token was refused. Messages name the reason, never the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not three base64url parts with JSON header and claims.
    Malformed(&'static str),
    /// `alg` is not RS256 or ES256 (`none`, HS256, ...).
    Algorithm(String),
    /// The key the token names does not fit its `alg`.
    KeyMismatch { alg: Alg, kty: &'static str },
    /// No key of the provider's set has the token's `kid`.
    UnknownKey,
    /// The token names no `kid` and the set has several keys of its type.
    NoKid,
    /// The signature does not verify.
    Signature,
    /// `exp` is past (with the leeway).
    Expired,
    /// `exp` is missing or not a number.
    NoExpiry,
    /// `nbf` or `iat` is in the future (with the leeway).
    NotYetValid(&'static str),
    /// `iss` is not the configured issuer.
    Issuer,
    /// `aud` does not hold the configured audience.
    Audience,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Malformed(why) => write!(f, "invalid JWT: {why}"),
            Refusal::Algorithm(alg) => write!(
                f,
                "invalid JWT: alg {} is not accepted (RS256 or ES256)",
                crate::error::quote(alg)
            ),
            Refusal::KeyMismatch { alg, kty } => write!(
                f,
                "invalid JWT: alg {} does not fit its signing key (a {kty} key)",
                alg.name()
            ),
            Refusal::UnknownKey => f.write_str(
                "invalid JWT: unknown key id (kid): no key of the identity provider's key set has it",
            ),
            Refusal::NoKid => f.write_str(
                "invalid JWT: no key id (kid), and the identity provider has several keys of its type",
            ),
            Refusal::Signature => f.write_str("invalid JWT: bad signature"),
            Refusal::Expired => f.write_str("invalid JWT: the token has expired (exp)"),
            Refusal::NoExpiry => f.write_str("invalid JWT: exp is missing or not a number"),
            Refusal::NotYetValid(claim) => {
                write!(f, "invalid JWT: not valid yet ({claim} is in the future)")
            }
            Refusal::Issuer => f.write_str("invalid JWT: wrong issuer (iss)"),
            Refusal::Audience => f.write_str("invalid JWT: wrong audience (aud)"),
        }
    }
}

/// A parsed token whose signature is still to be checked.
pub struct Token<'a> {
    pub alg: Alg,
    pub kid: Option<String>,
    /// `header.claims` as sent: what the signature covers.
    signing_input: &'a str,
    signature: Vec<u8>,
    pub claims: Map<String, Value>,
}

/// Whether `s` has a JWT's shape: three base64url parts whose first decodes
/// to a JSON object. Cheap: what tells a JWT from an API key.
pub fn looks_like_jwt(s: &str) -> bool {
    let mut parts = s.split('.');
    let (Some(h), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    // `{` then optional space and `"`: base64url `ey` (`{"` is `eyJ`, `{ "` is `eyAi`).
    s.len() <= MAX_TOKEN_BYTES && h.starts_with("ey") && s.bytes().all(is_token_byte)
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')
}

/// One base64url part, unpadded, decoded.
fn part(s: &str, what: &'static str) -> Result<Vec<u8>, Refusal> {
    if s.is_empty()
        || !s
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(Refusal::Malformed(what));
    }
    base64::decode(s).ok_or(Refusal::Malformed(what))
}

/// Splits and decodes `token`, reading the header's `alg` and `kid`.
pub fn parse(token: &str) -> Result<Token<'_>, Refusal> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(Refusal::Malformed("longer than 16 KiB"));
    }
    let (signing_input, sig) = token
        .rsplit_once('.')
        .ok_or(Refusal::Malformed("not three dot-separated parts"))?;
    let (h, c) = signing_input
        .split_once('.')
        .filter(|(_, c)| !c.contains('.'))
        .ok_or(Refusal::Malformed("not three dot-separated parts"))?;
    let header: Map<String, Value> =
        serde_json::from_slice(&part(h, "the header is not base64url")?)
            .map_err(|_| Refusal::Malformed("the header is not a JSON object"))?;
    let alg = match header.get("alg") {
        Some(Value::String(a)) => Alg::from_name(a).ok_or_else(|| Refusal::Algorithm(a.clone()))?,
        _ => return Err(Refusal::Malformed("the header has no alg")),
    };
    // A critical extension we do not implement must not be ignored (RFC 7515 4.1.11).
    if header.contains_key("crit") {
        return Err(Refusal::Malformed(
            "the header's crit extensions are not supported",
        ));
    }
    let kid = match header.get("kid") {
        None => None,
        Some(Value::String(k)) => Some(k.clone()),
        Some(_) => return Err(Refusal::Malformed("kid is not a string")),
    };
    let claims: Map<String, Value> =
        serde_json::from_slice(&part(c, "the claims are not base64url")?)
            .map_err(|_| Refusal::Malformed("the claims are not a JSON object"))?;
    let signature = part(sig, "the signature is not base64url")?;
    Ok(Token {
        alg,
        kid,
        signing_input,
        signature,
        claims,
    })
}

impl Token<'_> {
    /// Verifies the signature with `key`, which must fit the token's `alg`.
    pub fn verify(&self, key: &PublicKey) -> Result<(), Refusal> {
        let msg = self.signing_input.as_bytes();
        let ok = match (self.alg, key) {
            (Alg::Rs256, PublicKey::Rsa { n, e }) => RsaPublicKeyComponents { n, e }
                .verify(&RSA_PKCS1_2048_8192_SHA256, msg, &self.signature)
                .is_ok(),
            (Alg::Es256, PublicKey::P256 { point }) => {
                UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
                    .verify(msg, &self.signature)
                    .is_ok()
            }
            (alg, key) => {
                return Err(Refusal::KeyMismatch {
                    alg,
                    kty: key.kty(),
                })
            }
        };
        if ok {
            Ok(())
        } else {
            Err(Refusal::Signature)
        }
    }
}

/// What the claims must say.
pub struct Expected<'a> {
    /// `iss` must equal it, when given.
    pub issuer: Option<&'a str>,
    /// `aud` (a string or an array of strings) must hold it.
    pub audience: &'a str,
    /// Now, in seconds since the epoch.
    pub now: i64,
}

/// A NumericDate claim (seconds, integer or not); `Err` when present but not a number.
fn date(claims: &Map<String, Value>, name: &str) -> Result<Option<f64>, ()> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => n.as_f64().map(Some).ok_or(()),
        Some(_) => Err(()),
    }
}

/// Checks `iss`, `aud`, `exp` (required), `nbf` and `iat`, with [`LEEWAY_SECS`];
/// `Ok`: until when the token is valid (seconds since the epoch, `exp` plus
/// the leeway, rounded up: valid while `now` is below it).
pub fn check(claims: &Map<String, Value>, want: &Expected<'_>) -> Result<i64, Refusal> {
    let now = want.now as f64;
    let leeway = LEEWAY_SECS as f64;
    let until = match date(claims, "exp") {
        Ok(Some(exp)) if now < exp + leeway => (exp + leeway).ceil() as i64,
        Ok(Some(_)) => return Err(Refusal::Expired),
        _ => return Err(Refusal::NoExpiry),
    };
    match date(claims, "nbf") {
        Ok(Some(nbf)) if nbf > now + leeway => return Err(Refusal::NotYetValid("nbf")),
        Ok(_) => {}
        Err(()) => return Err(Refusal::Malformed("nbf is not a number")),
    }
    match date(claims, "iat") {
        Ok(Some(iat)) if iat > now + leeway => return Err(Refusal::NotYetValid("iat")),
        Ok(_) => {}
        Err(()) => return Err(Refusal::Malformed("iat is not a number")),
    }
    if let Some(issuer) = want.issuer {
        if claims.get("iss").and_then(Value::as_str) != Some(issuer) {
            return Err(Refusal::Issuer);
        }
    }
    let audience_ok = match claims.get("aud") {
        Some(Value::String(a)) => a == want.audience,
        Some(Value::Array(a)) => a.iter().any(|v| v.as_str() == Some(want.audience)),
        _ => false,
    };
    if !audience_ok {
        return Err(Refusal::Audience);
    }
    Ok(until)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::util::base64::encode_url_safe as b64;
    use serde_json::json;

    fn compact(header: &Value, claims: &Value, sig: &[u8]) -> String {
        format!(
            "{}.{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes()),
            b64(sig)
        )
    }

    #[test]
    fn tells_jwts_from_keys() {
        let t = compact(&json!({"alg": "RS256"}), &json!({}), b"sig");
        assert!(looks_like_jwt(&t));
        // alg none has a JWT's shape: it is refused by `parse`, not taken for a key.
        assert!(looks_like_jwt(&compact(
            &json!({"alg": "none"}),
            &json!({}),
            b""
        )));
        assert!(!looks_like_jwt("sk-test-key"));
        assert!(!looks_like_jwt("eyJ.a"));
        assert!(!looks_like_jwt("eyJ.a.b.c"));
        assert!(!looks_like_jwt("eyJ a.b.c"));
    }

    #[test]
    fn parses_header_and_claims() {
        let t = compact(
            &json!({"alg": "ES256", "kid": "k1", "typ": "JWT"}),
            &json!({"sub": "u"}),
            &[1, 2, 3],
        );
        let p = parse(&t).unwrap();
        assert_eq!((p.alg, p.kid.as_deref()), (Alg::Es256, Some("k1")));
        assert_eq!(p.claims["sub"], "u");
        assert_eq!(p.signature, vec![1, 2, 3]);
        assert_eq!(p.signing_input, t.rsplit_once('.').unwrap().0);
    }

    #[test]
    fn refuses_other_algorithms_and_bad_shapes() {
        for alg in ["none", "HS256", "RS512", "PS256", "ES384", "EdDSA"] {
            let t = compact(&json!({ "alg": alg }), &json!({}), b"x");
            assert_eq!(
                parse(&t).err(),
                Some(Refusal::Algorithm(alg.into())),
                "{alg}"
            );
        }
        let ok_claims = b64(b"{}");
        for (bad, why) in [
            (
                format!("{}.{ok_claims}.", b64(br#"{"alg":"RS256"}"#)),
                "the signature is not base64url",
            ),
            (
                format!("{}.{ok_claims}.AA", b64(b"[1]")),
                "the header is not a JSON object",
            ),
            (
                format!("{}.{ok_claims}.AA", b64(br#"{"typ":"JWT"}"#)),
                "the header has no alg",
            ),
            (
                format!("{}.{}.AA", b64(br#"{"alg":"RS256"}"#), b64(b"1")),
                "the claims are not a JSON object",
            ),
            (
                format!("{}.{ok_claims}.A+A", b64(br#"{"alg":"RS256"}"#)),
                "the signature is not base64url",
            ),
            (
                format!(
                    "{}.{ok_claims}.AA",
                    b64(br#"{"alg":"RS256","crit":["exp"]}"#)
                ),
                "the header's crit extensions are not supported",
            ),
            (
                format!("{}.{ok_claims}.AA", b64(br#"{"alg":"RS256","kid":7}"#)),
                "kid is not a string",
            ),
            ("a.b".to_string(), "not three dot-separated parts"),
            ("a.b.c.d".to_string(), "not three dot-separated parts"),
        ] {
            assert_eq!(parse(&bad).err(), Some(Refusal::Malformed(why)), "{bad}");
        }
        let long = "a".repeat(MAX_TOKEN_BYTES + 1);
        assert!(matches!(parse(&long), Err(Refusal::Malformed(_))));
    }

    #[test]
    fn claims_are_checked() {
        let now = 1_800_000_000;
        let want = Expected {
            issuer: Some("https://idp.example"),
            audience: "switchboard",
            now,
        };
        let good = json!({"iss": "https://idp.example", "aud": "switchboard", "exp": now + 300, "iat": now, "nbf": now});
        let check_with = |edit: &dyn Fn(&mut Map<String, Value>)| {
            let mut c = good.as_object().unwrap().clone();
            edit(&mut c);
            check(&c, &want)
        };
        assert_eq!(check_with(&|_| {}), Ok(now + 300 + LEEWAY_SECS));
        assert_eq!(
            check_with(&|c| {
                c.insert("aud".into(), json!(["x", "switchboard"]));
            }),
            Ok(now + 300 + LEEWAY_SECS)
        );
        assert_eq!(
            check_with(&|c| {
                c.insert("exp".into(), json!((now + 1) as f64 + 0.5));
            }),
            Ok(now + 2 + LEEWAY_SECS)
        );
        // Within the leeway either way.
        assert_eq!(
            check_with(&|c| {
                c.insert("exp".into(), json!(now - 30));
            }),
            Ok(now - 30 + LEEWAY_SECS)
        );
        assert_eq!(
            check_with(&|c| {
                c.insert("nbf".into(), json!(now + 30));
            }),
            Ok(now + 300 + LEEWAY_SECS)
        );
        assert_eq!(
            check_with(&|c| {
                c.insert("exp".into(), json!(now - 61));
            }),
            Err(Refusal::Expired)
        );
        assert_eq!(
            check_with(&|c| {
                c.remove("exp");
            }),
            Err(Refusal::NoExpiry)
        );
        assert_eq!(
            check_with(&|c| {
                c.insert("exp".into(), json!("soon"));
            }),
            Err(Refusal::NoExpiry)
        );
        assert_eq!(
            check_with(&|c| {
                c.insert("nbf".into(), json!(now + 120));
            }),
            Err(Refusal::NotYetValid("nbf"))
        );
        assert_eq!(
            check_with(&|c| {
                c.insert("iat".into(), json!(now + 120));
            }),
            Err(Refusal::NotYetValid("iat"))
        );
        assert_eq!(
            check_with(&|c| {
                c.insert("iss".into(), json!("https://evil.example"));
            }),
            Err(Refusal::Issuer)
        );
        assert_eq!(
            check_with(&|c| {
                c.remove("iss");
            }),
            Err(Refusal::Issuer)
        );
        assert_eq!(
            check_with(&|c| {
                c.insert("aud".into(), json!("other"));
            }),
            Err(Refusal::Audience)
        );
        assert_eq!(
            check_with(&|c| {
                c.insert("aud".into(), json!(["other"]));
            }),
            Err(Refusal::Audience)
        );
        assert_eq!(
            check_with(&|c| {
                c.remove("aud");
            }),
            Err(Refusal::Audience)
        );
        // Without a configured issuer (--jwks-url alone) iss is not read.
        let no_iss = Expected {
            issuer: None,
            ..want
        };
        let mut c = good.as_object().unwrap().clone();
        c.remove("iss");
        assert_eq!(check(&c, &no_iss), Ok(now + 300 + LEEWAY_SECS));
    }

    #[test]
    fn es256_signatures_verify_with_their_key_only() {
        use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
        let rng = ring::rand::SystemRandom::new();
        let key = |rng: &ring::rand::SystemRandom| {
            let p = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, rng).unwrap();
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, p.as_ref(), rng).unwrap()
        };
        let (signer, other) = (key(&rng), key(&rng));
        let input = format!("{}.{}", b64(br#"{"alg":"ES256"}"#), b64(br#"{"sub":"a"}"#));
        let sig = signer.sign(&rng, input.as_bytes()).unwrap();
        let token = format!("{input}.{}", b64(sig.as_ref()));
        let public = |k: &EcdsaKeyPair| PublicKey::P256 {
            point: k.public_key().as_ref().to_vec(),
        };
        let t = parse(&token).unwrap();
        assert_eq!(t.verify(&public(&signer)), Ok(()));
        assert_eq!(t.verify(&public(&other)), Err(Refusal::Signature));
        let rsa = PublicKey::Rsa {
            n: vec![1; 256],
            e: vec![1, 0, 1],
        };
        assert_eq!(
            t.verify(&rsa),
            Err(Refusal::KeyMismatch {
                alg: Alg::Es256,
                kty: "RSA"
            })
        );
        let tampered = format!(
            "{}.{}.{}",
            b64(br#"{"alg":"ES256"}"#),
            b64(br#"{"sub":"b"}"#),
            b64(sig.as_ref())
        );
        assert_eq!(
            parse(&tampered).unwrap().verify(&public(&signer)),
            Err(Refusal::Signature)
        );
    }

    #[test]
    fn messages_name_the_reason_not_the_token() {
        assert_eq!(
            Refusal::Expired.to_string(),
            "invalid JWT: the token has expired (exp)"
        );
        assert!(Refusal::UnknownKey.to_string().contains("unknown key id"));
        assert!(Refusal::Audience.to_string().contains("wrong audience"));
        assert!(Refusal::Signature.to_string().contains("bad signature"));
    }
}
