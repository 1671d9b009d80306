//! AWS credentials for SigV4 (Bedrock upstreams, docs/clouds.md), from the
//! standard AWS chain, in the order AWS's SDKs try it: the environment
//! (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`), the
//! shared files' profile (`profile`), web identity (STS
//! `AssumeRoleWithWebIdentity`), the container endpoint (ECS, EKS Pod
//! Identity) and the EC2 instance metadata service (IMDSv2) (`remote`). An
//! upstream naming a `profile` uses that profile alone. The signature itself
//! is `sigv4`'s. Keys are never logged: the `Debug` of [`AwsKeys`] shows
//! the key id's first characters only.

pub(crate) mod profile;
mod remote;
pub mod sigv4;

use crate::config::AwsAuth;
use crate::error::GatewayError;
use crate::upstream::client::UpstreamClient;
use std::time::Duration;

/// How long keys that carry no expiry (the environment's, a profile's) are
/// kept before the source is read again (a rotated file is picked up).
const STATIC_LIFE: Duration = Duration::from_secs(3600);

/// A set of AWS credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct AwsKeys {
    pub access_key_id: String,
    pub secret_access_key: String,
    /// Temporary credentials' session token (`x-amz-security-token`).
    pub session_token: Option<String>,
}

impl std::fmt::Debug for AwsKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let id: String = self.access_key_id.chars().take(4).collect();
        write!(
            f,
            "AwsKeys({id}…, session token: {})",
            self.session_token.is_some()
        )
    }
}

/// Keys and how long they may be used.
pub(crate) struct FetchedKeys {
    pub keys: AwsKeys,
    pub life: Duration,
    /// The source that gave them, for the log line.
    pub source: String,
}

/// What one link of the chain came to.
enum Link {
    /// It gave keys.
    Keys(FetchedKeys),
    /// It is not configured here: the chain goes on.
    Absent(String),
    /// It is configured and failed: the chain stops (as the SDKs do).
    Failed(String),
}

/// The process environment, read when keys are fetched.
fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Where keys for `auth` come from, for messages.
pub(crate) fn describe(auth: &AwsAuth) -> String {
    match &auth.profile {
        Some(p) => format!("the AWS shared-files profile {p:?}"),
        None => "the AWS credential chain".to_string(),
    }
}

/// New keys for `auth`; the error names the provider and each source tried.
pub(crate) async fn fetch(
    client: &UpstreamClient,
    provider: &str,
    auth: &AwsAuth,
) -> Result<FetchedKeys, GatewayError> {
    let fail =
        |why: String| super::failed_to_obtain("AWS credentials", provider, &describe(auth), why);
    if let Some(name) = &auth.profile {
        return match profile::credentials(client, name, true).await {
            Link::Keys(k) => Ok(k),
            Link::Absent(why) | Link::Failed(why) => Err(fail(why)),
        };
    }
    let mut tried = Vec::new();
    for step in 0..5 {
        let link = match step {
            0 => environment(),
            1 => {
                let name = var("AWS_PROFILE").unwrap_or_else(|| "default".to_string());
                profile::credentials(client, &name, false).await
            }
            2 => remote::web_identity_from_env(client).await,
            3 => remote::container(client).await,
            _ => remote::imds(client).await,
        };
        match link {
            Link::Keys(k) => return Ok(k),
            Link::Absent(why) => tried.push(why),
            Link::Failed(why) => {
                tried.push(why);
                break;
            }
        }
    }
    Err(fail(tried.join("; ")))
}

/// The environment's keys.
fn environment() -> Link {
    match (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) {
        (Some(id), Some(secret)) => Link::Keys(FetchedKeys {
            keys: AwsKeys {
                access_key_id: id,
                secret_access_key: secret,
                session_token: var("AWS_SESSION_TOKEN"),
            },
            life: STATIC_LIFE,
            source: "the environment (AWS_ACCESS_KEY_ID)".to_string(),
        }),
        (Some(_), None) => Link::Failed(
            "environment: AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not".to_string(),
        ),
        (None, _) => Link::Absent("environment: AWS_ACCESS_KEY_ID not set".to_string()),
    }
}

/// Keys with an expiry (`Expiration`, RFC 3339) from a remote source.
fn expiring(keys: AwsKeys, expiration: Option<&str>, source: String) -> FetchedKeys {
    let life = expiration
        .and_then(super::fetch::seconds_until)
        .map_or(STATIC_LIFE, Duration::from_secs);
    FetchedKeys { keys, life, source }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn keys_debug_shows_no_secret() {
        let k = AwsKeys {
            access_key_id: "AKIAEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI".into(),
            session_token: Some("tok".into()),
        };
        let d = format!("{k:?}");
        assert!(
            !d.contains("wJal") && !d.contains("tok\"") && !d.contains("EXAMPLE"),
            "{d}"
        );
    }
}
