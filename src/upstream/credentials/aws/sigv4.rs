//! SigV4 over the exact request the gateway sends, with AWS's own signer
//! (`aws-sigv4`, its default settings: the ones AWS's SDKs use for every
//! service but S3). The canonical URI is the path as sent (a model id's
//! `:` already `%3A`), URI-encoded once more (`%3A` → `%253A`): services
//! other than S3 check the signature over the doubly encoded path, as
//! botocore and the SDKs sign it. The payload's SHA-256 is part of the
//! canonical request and not sent (`x-amz-content-sha256` is S3's). A
//! session token is signed and sent as `x-amz-security-token`.

use super::AwsKeys;
use aws_sigv4::http_request::{
    sign as sign_request, SignableBody, SignableRequest, SigningSettings,
};
use aws_sigv4::sign::v4;
use std::time::SystemTime;

/// What is signed: the request's method, scheme, host, path (and query, as
/// sent), the headers signed with it (as sent), and its body.
pub struct Signable<'a> {
    pub method: &'a str,
    pub https: bool,
    /// The `Host` header as sent.
    pub authority: &'a str,
    pub path: &'a str,
    /// Headers the request carries, signed besides `host` and the `x-amz-*` ones.
    pub headers: &'a [(&'a str, &'a str)],
    pub body: &'a [u8],
}

/// The headers to add to the request (`x-amz-date`, `x-amz-security-token`
/// when the keys have one, `authorization`), signed at `now` for `service`
/// in `region`. `Err` says why it could not be (never a secret).
pub fn sign(
    keys: &AwsKeys,
    region: &str,
    service: &str,
    r: &Signable<'_>,
    now: SystemTime,
) -> Result<Vec<(&'static str, String)>, String> {
    let identity = aws_credential_types::Credentials::new(
        keys.access_key_id.as_str(),
        keys.secret_access_key.as_str(),
        keys.session_token.clone(),
        None,
        "switchboard",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(now)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| format!("cannot sign the request: {e}"))?
        .into();
    let scheme = if r.https { "https" } else { "http" };
    let uri = format!("{scheme}://{}{}", r.authority, r.path);
    let headers = std::iter::once(("host", r.authority)).chain(r.headers.iter().copied());
    let request = SignableRequest::new(r.method, uri, headers, SignableBody::Bytes(r.body))
        .map_err(|e| format!("cannot sign the request: {e}"))?;
    let (instructions, _) = sign_request(request, &params)
        .map_err(|e| format!("cannot sign the request: {e}"))?
        .into_parts();
    let (headers, _) = instructions.into_parts();
    Ok(headers
        .into_iter()
        .map(|h| (h.name(), h.value().to_string()))
        .collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// AWS's published example (the `get-vanilla` test of the SigV4 suite:
    /// keys AKIDEXAMPLE, 2015-08-30T12:36:00Z, us-east-1, service
    /// "service"), as a POST with an empty body.
    #[test]
    fn signs_as_aws_documents() {
        let keys = AwsKeys {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: None,
        };
        let at = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_440_938_160);
        let r = Signable {
            method: "GET",
            https: true,
            authority: "example.amazonaws.com",
            path: "/",
            headers: &[],
            body: b"",
        };
        let h = sign(&keys, "us-east-1", "service", &r, at).unwrap();
        let get = |n: &str| h.iter().find(|(k, _)| *k == n).map(|(_, v)| v.as_str());
        assert_eq!(get("x-amz-date"), Some("20150830T123600Z"));
        assert_eq!(
            get("authorization"),
            Some("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")
        );
        assert_eq!(get("x-amz-security-token"), None);
        let with_token = AwsKeys {
            session_token: Some("session".into()),
            ..keys
        };
        let h = sign(&with_token, "us-east-1", "service", &r, at).unwrap();
        assert!(h
            .iter()
            .any(|(k, v)| *k == "x-amz-security-token" && v == "session"));
        assert!(h.iter().any(|(k, v)| *k == "authorization"
            && v.contains("SignedHeaders=host;x-amz-date;x-amz-security-token")));
    }
}
