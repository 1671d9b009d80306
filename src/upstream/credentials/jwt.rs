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

/// `header.claims.signature`, each part base64url without padding.
pub(super) fn sign(
    key: &RsaKeyPair,
    header: &serde_json::Value,
    claims: &serde_json::Value,
) -> Result<String, String> {
    let mut jwt = base64::encode_url_safe(header.to_string().as_bytes());
    jwt.push('.');
    jwt.push_str(&base64::encode_url_safe(claims.to_string().as_bytes()));
    let mut sig = vec![0u8; key.public().modulus_len()];
    key.sign(
        &RSA_PKCS1_SHA256,
        &ring::rand::SystemRandom::new(),
        jwt.as_bytes(),
        &mut sig,
    )
    .map_err(|_| "signing the assertion failed".to_string())?;
    jwt.push('.');
    jwt.push_str(&base64::encode_url_safe(&sig));
    Ok(jwt)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use ring::signature::{KeyPair, UnparsedPublicKey, RSA_PKCS1_2048_8192_SHA256};

    const PEM: &str =
        include_str!("../../../tests/e2e/common/mock_upstream/keys/service-account.pem");

    #[test]
    fn signs_rs256_that_the_public_key_verifies() {
        let key = key_pair(PEM).unwrap();
        let jwt = sign(
            &key,
            &serde_json::json!({"alg": "RS256"}),
            &serde_json::json!({"iss": "a"}),
        )
        .unwrap();
        let (signed, sig) = jwt.rsplit_once('.').unwrap();
        assert!(
            !jwt.contains(['=', '+', '/']),
            "base64url without padding: {jwt}"
        );
        let header = base64::decode(signed.split('.').next().unwrap()).unwrap();
        assert_eq!(header, br#"{"alg":"RS256"}"#);
        let public = UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, key.public_key().as_ref());
        public
            .verify(signed.as_bytes(), &base64::decode(sig).unwrap())
            .unwrap();
        // a changed payload does not verify
        assert!(public
            .verify(b"x.y", &base64::decode(sig).unwrap())
            .is_err());
    }

    #[test]
    fn keys_that_are_not_rsa_private_keys_are_refused() {
        assert!(key_pair("not a key").unwrap_err().contains("not a PEM"));
        let cert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(key_pair(cert).unwrap_err().contains("CERTIFICATE"));
        let junk = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        assert!(key_pair(junk).unwrap_err().contains("not a usable RSA key"));
    }
}
