//! Google OAuth2 access tokens for Vertex AI: from a service-account key
//! file (a JWT signed with its key, exchanged at its `token_uri`, RFC 7523),
//! an external-account file (workload identity federation: `external`)
//! or, without a file, from the GCE / GKE metadata server
//! (`GCE_METADATA_HOST` overrides its host, as Google's SDKs allow).

use super::fetch::{self, Call};
use super::{external, failed, jwt, Fetched, GOOGLE_SCOPE as SCOPE};
use crate::config::{BaseUrl, GoogleAuth};
use crate::error::GatewayError;
use crate::upstream::client::UpstreamClient;
use serde_json::json;

/// The metadata server's host.
const METADATA_HOST: &str = "metadata.google.internal";
/// The metadata server's token path (the instance's default account).
const METADATA_PATH: &str = "/computeMetadata/v1/instance/service-accounts/default/token";
/// A service-account key without `token_uri` uses Google's.
const TOKEN_URI: &str = "https://oauth2.googleapis.com/token";
/// The life asked for a JWT assertion (Google's most).
const ASSERTION_LIFE: u64 = 3600;

/// The metadata server's host (`GCE_METADATA_HOST`, else Google's).
pub(super) fn metadata_host() -> String {
    std::env::var("GCE_METADATA_HOST")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| METADATA_HOST.to_string())
}

fn metadata_url() -> String {
    format!("http://{}{METADATA_PATH}", metadata_host())
}

/// Where the token comes from, for messages.
pub(super) fn describe(g: &GoogleAuth) -> String {
    match &g.credentials_file {
        Some(path) => format!("the service-account key file {path}"),
        None => format!("the metadata server ({})", metadata_url()),
    }
}

/// A new token for `g`.
pub(super) async fn fetch(
    client: &UpstreamClient,
    provider: &str,
    g: &GoogleAuth,
) -> Result<Fetched, GatewayError> {
    let fail = |why: String| failed(provider, &describe(g), why);
    match &g.credentials_file {
        None => {
            let url = BaseUrl::parse(&metadata_url()).map_err(&fail)?;
            let headers = [("metadata-flavor", "Google")];
            fetch::token(client, &url, Call::Get(&headers))
                .await
                .map_err(fail)
        }
        Some(path) => {
            let key = read_key(path).map_err(fail)?;
            if key["type"] == "external_account" {
                return external::fetch(client, &key).await.map_err(fail);
            }
            let (token_uri, assertion) = assertion(&key).map_err(fail)?;
            let url = BaseUrl::parse(&token_uri)
                .map_err(|r| fail(format!("token_uri {token_uri:?}: {r}")))?;
            let form = fetch::form(&[
                ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"),
                ("assertion", &assertion),
            ]);
            fetch::token(client, &url, Call::Form(&form))
                .await
                .map_err(|why| fail(format!("{token_uri}: {why}")))
        }
    }
}

/// The credentials file, parsed (read each time a token is made: a
/// rotated key is used at the next refresh).
fn read_key(path: &str) -> Result<serde_json::Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read it: {e}"))?;
    serde_json::from_str(&text).map_err(|_| "it is not JSON".to_string())
}

/// The service-account key's `token_uri` and a fresh signed assertion for it.
fn assertion(key: &serde_json::Value) -> Result<(String, String), String> {
    let field = |k: &str| {
        key.get(k)
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
    };
    match field("type") {
        Some("service_account") => {}
        other => {
            return Err(format!(
                "type {other:?} is not \"service_account\" or \"external_account\""
            ))
        }
    }
    let email = field("client_email").ok_or("it has no client_email")?;
    let pem = field("private_key").ok_or("it has no private_key")?;
    let token_uri = field("token_uri").unwrap_or(TOKEN_URI).to_string();
    let pair = jwt::key_pair(pem)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut header = json!({"alg": "RS256", "typ": "JWT"});
    if let Some(kid) = field("private_key_id") {
        header["kid"] = json!(kid);
    }
    let claims = json!({
        "iss": email,
        "scope": SCOPE,
        "aud": token_uri,
        "iat": now,
        "exp": now + ASSERTION_LIFE,
    });
    Ok((token_uri.clone(), jwt::sign(&pair, &header, &claims)?))
}
