//! The signed JWT a Google service account exchanges for an access token
//! (RFC 7523): RS256 over `header.claims` with the account's RSA key,
//! by `ring` (the constant-time RSA the gateway's TLS already links).

use crate::util::base64;
use ring::signature::{RsaKeyPair, RSA_PKCS1_SHA256};

/// The key of a PEM private key (`PRIVATE KEY`, PKCS#8, as Google writes
/// it; or `RSA PRIVATE KEY`, PKCS#1).
pub(super) fn key_pair(pem: &str) -> Result<RsaKeyPair, String> {
    let (label, der) = pem_body(pem).ok_or("private_key is not a PEM key")?;
    match label {
        "PRIVATE KEY" => RsaKeyPair::from_pkcs8(&der),
        "RSA PRIVATE KEY" => RsaKeyPair::from_der(&der),
        _ => {
            return Err(format!(
                "private_key is a PEM {label:?}, not an RSA private key"
            ))
        }
    }
    .map_err(|e| format!("private_key is not a usable RSA key ({e})"))
}

/// The label and bytes of the first PEM block of `pem`.
fn pem_body(pem: &str) -> Option<(&str, Vec<u8>)> {
    let start = pem.find("-----BEGIN ")? + "-----BEGIN ".len();
    let label_end = start + pem[start..].find("-----")?;
    let label = &pem[start..label_end];
    let body_start = label_end + "-----".len();
    let end = body_start + pem[body_start..].find("-----END ")?;
    let text: String = pem[body_start..end]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    Some((label, base64::decode(&text)?))
}

fn url_safe(data: &[u8]) -> String {
    let mut s = String::new();
    base64::encode(data, &mut s);
    base64::standard_to_url_safe(&s)
}

/// `header.claims.signature`, each part base64url without padding.
pub(super) fn sign(
    key: &RsaKeyPair,
    header: &serde_json::Value,
    claims: &serde_json::Value,
) -> Result<String, String> {
    let mut jwt = url_safe(header.to_string().as_bytes());
    jwt.push('.');
    jwt.push_str(&url_safe(claims.to_string().as_bytes()));
    let mut sig = vec![0u8; key.public().modulus_len()];
    key.sign(
        &RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        jwt.as_bytes(),
        &mut sig,
    )
    .map_err(|_| "signing the assertion failed".to_string())?;
    jwt.push('.');
    jwt.push_str(&url_safe(&sig));
    Ok(jwt)
}
