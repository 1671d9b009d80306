//! The AWS chain's remote sources: web identity (a projected token file
//! exchanged at STS `AssumeRoleWithWebIdentity`, `AWS_ENDPOINT_URL_STS`
//! overriding the endpoint as in AWS's SDKs), the container endpoint
//! (`AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` / `_FULL_URI`, with
//! `AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE)`) and IMDSv2 (a session token
//! `PUT`, then the instance role's keys; `AWS_EC2_METADATA_SERVICE_ENDPOINT`
//! overrides the endpoint, `AWS_EC2_METADATA_DISABLED=true` turns it off).

use super::super::fetch::{self, Call};
use super::{expiring, var, AwsKeys, Link};
use crate::config::BaseUrl;
use crate::upstream::client::UpstreamClient;
use std::time::Duration;

/// STS and container calls' bound.
const CALL_LIMIT: Duration = Duration::from_secs(15);
/// IMDS calls' bound (the SDKs' one second: off EC2 nothing answers).
const IMDS_LIMIT: Duration = Duration::from_secs(1);
/// The ECS container endpoint's host.
const CONTAINER_HOST: &str = "http://169.254.170.2";
/// IMDS's address.
const IMDS_ENDPOINT: &str = "http://169.254.169.254";

/// Web identity from `AWS_WEB_IDENTITY_TOKEN_FILE` and `AWS_ROLE_ARN`.
pub(super) async fn web_identity_from_env(client: &UpstreamClient) -> Link {
    match (var("AWS_WEB_IDENTITY_TOKEN_FILE"), var("AWS_ROLE_ARN")) {
        (Some(file), Some(role)) => {
            let session = var("AWS_ROLE_SESSION_NAME");
            web_identity(client, &role, &file, session.as_deref(), "web identity").await
        }
        (Some(_), None) => Link::Failed(
            "web identity: AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not".into(),
        ),
        _ => Link::Absent("web identity: AWS_WEB_IDENTITY_TOKEN_FILE not set".into()),
    }
}

/// STS's endpoint: `AWS_ENDPOINT_URL_STS`, `AWS_ENDPOINT_URL`, else the
/// regional one of `AWS_REGION` (`AWS_DEFAULT_REGION`), else the global one.
fn sts_endpoint() -> String {
    var("AWS_ENDPOINT_URL_STS")
        .or_else(|| var("AWS_ENDPOINT_URL"))
        .or_else(|| {
            var("AWS_REGION")
                .or_else(|| var("AWS_DEFAULT_REGION"))
                .map(|r| format!("https://sts.{r}.amazonaws.com"))
        })
        .unwrap_or_else(|| "https://sts.amazonaws.com".to_string())
}

/// The role `role`'s keys for the token in `file` (read each time: the
/// projected token is renewed on disk).
pub(super) async fn web_identity(
    client: &UpstreamClient,
    role: &str,
    file: &str,
    session: Option<&str>,
    shown: &str,
) -> Link {
    let endpoint = sts_endpoint();
    let source = format!("{shown}: role {role} via STS {endpoint}");
    let token = match std::fs::read_to_string(file) {
        Ok(t) if !t.trim().is_empty() => t,
        Ok(_) => return Link::Failed(format!("{source}: the token file {file} is empty")),
        Err(e) => return Link::Failed(format!("{source}: cannot read the token file {file}: {e}")),
    };
    let url = match BaseUrl::parse(endpoint.trim_end_matches('/')) {
        Ok(u) => u,
        Err(r) => return Link::Failed(format!("{source}: {r}")),
    };
    let session = session.map_or_else(
        || {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            format!("switchboard-{now}")
        },
        str::to_string,
    );
    let form = fetch::form(&[
        ("Action", "AssumeRoleWithWebIdentity"),
        ("Version", "2011-06-15"),
        ("RoleArn", role),
        ("RoleSessionName", &session),
        ("WebIdentityToken", token.trim()),
    ]);
    let (status, body) =
        match fetch::answer(client, &url, None, Call::Form(&form), CALL_LIMIT).await {
            Ok(r) => r,
            Err(why) => return Link::Failed(format!("{source}: {why}")),
        };
    let text = String::from_utf8_lossy(&body);
    if !(200..300).contains(&status) {
        let why = tag(&text, "Code")
            .map(|c| match tag(&text, "Message") {
                Some(m) => format!("{c}: {m}"),
                None => c,
            })
            .unwrap_or_else(|| crate::error::cut(text.trim(), 300).into_owned());
        return Link::Failed(format!("{source}: status {status}: {why}"));
    }
    match sts_keys(&text) {
        Some((keys, expiration)) => Link::Keys(expiring(keys, expiration.as_deref(), source)),
        None => Link::Failed(format!("{source}: the answer has no Credentials")),
    }
}

/// The keys of an `AssumeRoleWithWebIdentity` answer (XML, or the JSON
/// STS writes for `accept: application/json`) and their expiration.
fn sts_keys(text: &str) -> Option<(AwsKeys, Option<String>)> {
    if text.trim_start().starts_with('{') {
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        let c = v.pointer(
            "/AssumeRoleWithWebIdentityResponse/AssumeRoleWithWebIdentityResult/Credentials",
        )?;
        let exp = match &c["Expiration"] {
            serde_json::Value::Number(n) => n
                .as_f64()
                .map(|s| crate::util::rfc3339::Rfc3339::seconds(s as i64).to_string()),
            serde_json::Value::String(s) => Some(s.clone()),
            _ => None,
        };
        return Some((json_keys(c, "SessionToken")?, exp));
    }
    let creds = between(text, "Credentials")?;
    Some((
        AwsKeys {
            access_key_id: tag(creds, "AccessKeyId")?,
            secret_access_key: tag(creds, "SecretAccessKey")?,
            session_token: tag(creds, "SessionToken"),
        },
        tag(creds, "Expiration"),
    ))
}

/// The text between `<name>` and `</name>`.
fn between<'t>(text: &'t str, name: &str) -> Option<&'t str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = text.find(&open)? + open.len();
    let end = start + text[start..].find(&close)?;
    Some(&text[start..end])
}

/// An element's text, its XML entities decoded.
fn tag(text: &str, name: &str) -> Option<String> {
    let raw = between(text, name)?.trim();
    if raw.is_empty() {
        return None;
    }
    Some(
        raw.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}

/// Keys from a JSON object (`AccessKeyId`, `SecretAccessKey`, and the
/// session token under `token`).
fn json_keys(v: &serde_json::Value, token: &str) -> Option<AwsKeys> {
    let s = |k: &str| v.get(k).and_then(|x| x.as_str()).filter(|x| !x.is_empty());
    Some(AwsKeys {
        access_key_id: s("AccessKeyId")?.to_string(),
        secret_access_key: s("SecretAccessKey")?.to_string(),
        session_token: s(token).map(str::to_string),
    })
}

/// The container endpoint's keys (ECS task roles, EKS Pod Identity).
pub(super) async fn container(client: &UpstreamClient) -> Link {
    let url = match (
        var("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"),
        var("AWS_CONTAINER_CREDENTIALS_FULL_URI"),
    ) {
        (Some(rel), _) => format!("{CONTAINER_HOST}{rel}"),
        (None, Some(full)) => full,
        (None, None) => {
            return Link::Absent(
                "container: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI / _FULL_URI not set".into(),
            )
        }
    };
    let source = format!("the container endpoint {url}");
    let auth = match var("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") {
        Some(file) => match std::fs::read_to_string(&file) {
            Ok(t) => Some(t.trim().to_string()),
            Err(e) => return Link::Failed(format!("{source}: cannot read {file}: {e}")),
        },
        None => var("AWS_CONTAINER_AUTHORIZATION_TOKEN"),
    };
    let base = match BaseUrl::parse(&url) {
        Ok(u) => u,
        Err(r) => return Link::Failed(format!("{source}: {r}")),
    };
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    match fetch::answer(client, &base, None, Call::Get(&headers), CALL_LIMIT).await {
        Ok((status, body)) if (200..300).contains(&status) => {
            let v: Option<serde_json::Value> = serde_json::from_slice(&body).ok();
            match v.as_ref().and_then(|v| Some((json_keys(v, "Token")?, v))) {
                Some((keys, v)) => Link::Keys(expiring(
                    keys,
                    v.get("Expiration").and_then(|e| e.as_str()),
                    source,
                )),
                None => Link::Failed(format!("{source}: the answer has no AccessKeyId")),
            }
        }
        Ok((status, body)) => Link::Failed(format!(
            "{source}: status {status}: {}",
            fetch::error_text(serde_json::from_slice(&body).ok().as_ref(), &body)
        )),
        Err(why) => Link::Failed(format!("{source}: {why}")),
    }
}

/// The instance role's keys from IMDSv2.
pub(super) async fn imds(client: &UpstreamClient) -> Link {
    if var("AWS_EC2_METADATA_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Link::Absent("IMDS: disabled (AWS_EC2_METADATA_DISABLED)".into());
    }
    let endpoint =
        var("AWS_EC2_METADATA_SERVICE_ENDPOINT").unwrap_or_else(|| IMDS_ENDPOINT.to_string());
    let endpoint = endpoint.trim_end_matches('/');
    let source = format!("IMDS {endpoint}");
    let call = async {
        let host = BaseUrl::parse(endpoint)?;
        let at = |path: &str| format!("{}{path}", host.path);
        let ttl = [("x-aws-ec2-metadata-token-ttl-seconds", "21600")];
        let token_path = at("/latest/api/token");
        let put = Call::Put(&ttl);
        let token =
            ok_text(fetch::answer(client, &host, Some(&token_path), put, IMDS_LIMIT).await)?;
        let auth = [("x-aws-ec2-metadata-token", token.trim())];
        let roles_path = at("/latest/meta-data/iam/security-credentials/");
        let get = Call::Get(&auth);
        let roles =
            ok_text(fetch::answer(client, &host, Some(&roles_path), get, IMDS_LIMIT).await)?;
        let role = roles
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .ok_or("the instance has no IAM role")?
            .to_string();
        if !role
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+=,.@_-".contains(&b))
        {
            return Err("the role name is not one IAM allows".to_string());
        }
        let keys_path = at(&format!(
            "/latest/meta-data/iam/security-credentials/{role}"
        ));
        let get = Call::Get(&auth);
        let text = ok_text(fetch::answer(client, &host, Some(&keys_path), get, IMDS_LIMIT).await)?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|_| "the role's answer is not JSON")?;
        if v.get("Code")
            .and_then(|c| c.as_str())
            .is_some_and(|c| c != "Success")
        {
            return Err(format!("the role's answer says {}", v["Code"]));
        }
        let keys = json_keys(&v, "Token").ok_or("the role's answer has no AccessKeyId")?;
        Ok(expiring(
            keys,
            v.get("Expiration").and_then(|e| e.as_str()),
            format!("{source} (role {role})"),
        ))
    };
    match call.await {
        Ok(k) => Link::Keys(k),
        Err(why) => Link::Failed(format!("{source}: {why}")),
    }
}

/// A 2xx answer's text.
fn ok_text(r: Result<(u16, bytes::Bytes), String>) -> Result<String, String> {
    let (status, body) = r?;
    if !(200..300).contains(&status) {
        return Err(format!("status {status}"));
    }
    String::from_utf8(body.to_vec()).map_err(|_| "the answer is not text".to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sts_answers_are_read_in_xml_and_json() {
        let xml = r#"<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <Credentials>
      <SessionToken>FwoG&amp;x+y/z=</SessionToken>
      <SecretAccessKey>secret</SecretAccessKey>
      <Expiration>2030-01-01T00:00:00Z</Expiration>
      <AccessKeyId>ASIAEXAMPLE</AccessKeyId>
    </Credentials>
  </AssumeRoleWithWebIdentityResult>
</AssumeRoleWithWebIdentityResponse>"#;
        let (k, exp) = sts_keys(xml).unwrap();
        assert_eq!(k.access_key_id, "ASIAEXAMPLE");
        assert_eq!(k.secret_access_key, "secret");
        assert_eq!(k.session_token.as_deref(), Some("FwoG&x+y/z="));
        assert_eq!(exp.as_deref(), Some("2030-01-01T00:00:00Z"));
        let json = r#"{"AssumeRoleWithWebIdentityResponse":{"AssumeRoleWithWebIdentityResult":{"Credentials":{"AccessKeyId":"A","SecretAccessKey":"S","SessionToken":"T","Expiration":1.893456E9}}}}"#;
        let (k, exp) = sts_keys(json).unwrap();
        assert_eq!(
            (k.access_key_id.as_str(), k.session_token.as_deref()),
            ("A", Some("T"))
        );
        assert_eq!(exp.as_deref(), Some("2030-01-01T00:00:00Z"));
        assert!(sts_keys("<Error/>").is_none());
    }
}
