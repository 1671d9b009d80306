//! OpenID Connect Discovery (docs/configuration.md "JWT clients (OIDC)"): the
//! issuer's `/.well-known/openid-configuration`, whose `issuer` must be the
//! configured one exactly and whose `jwks_uri` is where the signing keys are.

use crate::config::{BaseUrl, Scheme};
use crate::upstream::client::UpstreamClient;

/// The discovery document's URL for `issuer` (a trailing `/` is not doubled).
pub fn document_url(issuer: &str) -> Result<BaseUrl, String> {
    let url = format!(
        "{}/.well-known/openid-configuration",
        issuer.trim_end_matches('/')
    );
    BaseUrl::parse(&url).map_err(|e| format!("--oidc-issuer {issuer}: {e}"))
}

/// Reads `jwks_uri` from `text`, the discovery document of `issuer`.
pub fn read(issuer: &str, text: &str) -> Result<BaseUrl, String> {
    let doc: serde_json::Value =
        serde_json::from_str(text).map_err(|_| "the discovery document is not JSON".to_string())?;
    let said = doc.get("issuer").and_then(|v| v.as_str());
    if said != Some(issuer) {
        return Err(format!(
            "the discovery document's issuer is {}, not {issuer}",
            said.map_or("missing".to_string(), crate::error::quote)
        ));
    }
    let uri = doc
        .get("jwks_uri")
        .and_then(|v| v.as_str())
        .ok_or("the discovery document has no jwks_uri")?;
    let url = BaseUrl::parse(uri).map_err(|e| format!("its jwks_uri: {e}"))?;
    // An https issuer's keys come over https: a plain-HTTP key set could be
    // replaced on the way.
    if issuer.starts_with("https://") && url.scheme != Scheme::Https {
        return Err(format!(
            "its jwks_uri {} is not https, as the issuer is",
            url_text(&url)
        ));
    }
    Ok(url)
}

/// The `jwks_uri` of `issuer`, fetched.
pub async fn jwks_uri(client: &UpstreamClient, issuer: &str) -> Result<BaseUrl, String> {
    let url = document_url(issuer)?;
    let text = crate::upstream::credentials::fetch_text(client, &url, &[])
        .await
        .map_err(|e| format!("{}: {e}", url_text(&url)))?;
    read(issuer, &text).map_err(|e| format!("{}: {e}", url_text(&url)))
}

/// A URL as logged: scheme, authority and path.
pub fn url_text(u: &BaseUrl) -> String {
    let scheme = match u.scheme {
        crate::config::Scheme::Http => "http",
        crate::config::Scheme::Https => "https",
    };
    format!("{scheme}://{}{}", u.authority, u.path)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_key_set_url() {
        let iss = "https://idp.example/realms/x";
        assert_eq!(
            document_url(iss).unwrap().path,
            "/realms/x/.well-known/openid-configuration"
        );
        assert_eq!(
            document_url("https://idp.example/").unwrap().path,
            "/.well-known/openid-configuration"
        );
        let doc =
            |issuer: &str, jwks: &str| format!(r#"{{"issuer":"{issuer}","jwks_uri":"{jwks}"}}"#);
        let u = read(iss, &doc(iss, "https://keys.example/certs")).unwrap();
        assert_eq!(
            (u.host.as_str(), u.path.as_str()),
            ("keys.example", "/certs")
        );
        let e = read(
            iss,
            &doc("https://evil.example", "https://keys.example/certs"),
        )
        .unwrap_err();
        assert!(e.contains("issuer is \"https://evil.example\""), "{e}");
        let e = read(iss, &doc(iss, "http://keys.example/certs")).unwrap_err();
        assert!(e.contains("not https"), "{e}");
        // A plain-HTTP issuer (a test IdP on loopback) may serve keys over HTTP.
        assert!(read(
            "http://127.0.0.1:1",
            &doc("http://127.0.0.1:1", "http://127.0.0.1:1/k")
        )
        .is_ok());
        assert!(read(iss, &format!(r#"{{"issuer":"{iss}"}}"#))
            .unwrap_err()
            .contains("no jwks_uri"));
        assert!(read(iss, "nope").is_err());
    }
}
