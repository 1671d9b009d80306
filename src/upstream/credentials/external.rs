//! Workload identity federation (Google "external account" credentials):
//! a subject token from the workload's own identity (a file, or a URL such
//! as a pod's projected token or an identity provider's endpoint) exchanged
//! at Google's STS (`token_url`, RFC 8693 token exchange) for a federated
//! access token, then, when the file names one, exchanged again for a
//! service account's token (`service_account_impersonation_url`, IAM's
//! `generateAccessToken`). AWS- and executable-sourced subject tokens are
//! refused at load.

use super::fetch::{self, Call};
use super::{Fetched, GOOGLE_SCOPE as SCOPE};
use crate::config::BaseUrl;
use crate::upstream::client::UpstreamClient;
use serde_json::Value;

/// Google's STS, when the file names none.
const STS_URL: &str = "https://sts.googleapis.com/v1/token";

fn url(u: &str) -> Result<BaseUrl, String> {
    BaseUrl::parse(u).map_err(|r| format!("{u:?}: {r}"))
}

/// A token for the external account described by `key` (the parsed file).
pub(super) async fn fetch(client: &UpstreamClient, key: &Value) -> Result<Fetched, String> {
    let field = |k: &str| {
        key.get(k)
            .and_then(|v| v.as_str())
            .filter(|s| !s.is_empty())
    };
    let audience = field("audience").ok_or("it has no audience")?;
    let subject_type = field("subject_token_type").ok_or("it has no subject_token_type")?;
    let token_url = field("token_url").unwrap_or(STS_URL);
    let subject = subject_token(client, &key["credential_source"]).await?;
    let form = fetch::form(&[
        (
            "grant_type",
            "urn:ietf:params:oauth:grant-type:token-exchange",
        ),
        ("audience", audience),
        ("scope", SCOPE),
        (
            "requested_token_type",
            "urn:ietf:params:oauth:token-type:access_token",
        ),
        ("subject_token_type", subject_type),
        ("subject_token", &subject),
    ]);
    let federated = fetch::token(client, &url(token_url)?, Call::Form(&form))
        .await
        .map_err(|why| format!("{token_url}: {why}"))?;
    let Some(impersonate) = field("service_account_impersonation_url") else {
        return Ok(federated);
    };
    let body = serde_json::json!({"scope": [SCOPE], "lifetime": "3600s"}).to_string();
    let call = Call::Json {
        body: &body,
        bearer: &federated.value,
    };
    fetch::token(client, &url(impersonate)?, call)
        .await
        .map_err(|why| format!("{impersonate}: {why}"))
}

/// The workload's own token, from `credential_source`: a `file`, or a `url`
/// (with its `headers`); `format` `text` (the default) or `json` (its
/// `subject_token_field_name` member).
async fn subject_token(client: &UpstreamClient, source: &Value) -> Result<String, String> {
    let raw = if let Some(path) = source.get("file").and_then(|f| f.as_str()) {
        std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the subject token file {path}: {e}"))?
    } else if let Some(u) = source.get("url").and_then(|f| f.as_str()) {
        let headers: Vec<(&str, &str)> = source
            .get("headers")
            .and_then(|h| h.as_object())
            .map(|h| {
                h.iter()
                    .filter_map(|(k, v)| Some((k.as_str(), v.as_str()?)))
                    .collect()
            })
            .unwrap_or_default();
        fetch::text(client, &url(u)?, &headers)
            .await
            .map_err(|why| format!("the subject token URL {u}: {why}"))?
    } else {
        return Err("its credential_source has neither a file nor a url".into());
    };
    let format = &source["format"];
    let token = match format["type"].as_str() {
        None | Some("text") => raw.trim().to_string(),
        Some("json") => {
            let name = format["subject_token_field_name"]
                .as_str()
                .ok_or("a json credential_source format names no subject_token_field_name")?;
            serde_json::from_str::<Value>(&raw)
                .ok()
                .and_then(|v| v.get(name).and_then(|t| t.as_str()).map(str::to_string))
                .ok_or_else(|| format!("the subject token has no {name:?} member"))?
        }
        Some(other) => {
            return Err(format!(
                "credential_source format {other:?} is not text or json"
            ))
        }
    };
    if token.is_empty() {
        return Err("the subject token is empty".into());
    }
    Ok(token)
}
