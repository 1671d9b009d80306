//! Entra ID (Azure AD) access tokens from a client credential: OAuth2's
//! client-credentials grant at `{authority}/{tenant}/oauth2/v2.0/token`
//! for the Azure AI scope, as Azure's SDKs ask for it.

use super::fetch::{self, Call};
use super::{failed, Fetched};
use crate::config::{BaseUrl, Entra};
use crate::error::{ErrorKind, GatewayError};
use crate::upstream::client::UpstreamClient;

/// The scope of Azure OpenAI (Cognitive Services) tokens.
pub const SCOPE: &str = "https://cognitiveservices.azure.com/.default";

/// The token endpoint of `e`.
fn token_url(e: &Entra) -> String {
    format!(
        "{}://{}{}/{}/oauth2/v2.0/token",
        match e.authority.scheme {
            crate::config::Scheme::Http => "http",
            crate::config::Scheme::Https => "https",
        },
        e.authority.authority,
        e.authority.path,
        e.tenant_id
    )
}

/// Where the token comes from, for messages (never the secret).
pub(super) fn describe(e: &Entra) -> String {
    format!(
        "Entra ID ({}, client {}, secret from {})",
        token_url(e),
        e.client_id,
        e.client_secret_env
    )
}

/// A new token for `e`.
pub(super) async fn fetch(
    client: &UpstreamClient,
    provider: &str,
    e: &Entra,
) -> Result<Fetched, GatewayError> {
    let Some(secret) = e.client_secret.as_deref() else {
        return Err(GatewayError::new(
            ErrorKind::Unavailable,
            format!(
                "provider {provider}: the Entra ID client secret is not set (set the {} environment variable)",
                e.client_secret_env
            ),
        )
        .with_code("provider_key_missing"));
    };
    let url = BaseUrl::parse(&token_url(e))
        .map_err(|r| failed(provider, &describe(e), format!("invalid token URL: {r}")))?;
    let form = fetch::form(&[
        ("grant_type", "client_credentials"),
        ("client_id", &e.client_id),
        ("client_secret", secret),
        ("scope", SCOPE),
    ]);
    fetch::token(client, &url, Call::Form(&form))
        .await
        .map_err(|why| failed(provider, &describe(e), why))
}
