//! The cloud upstreams' own catalog fields (docs/clouds.md): an upstream
//! `protocol` of `azure`, `azure-responses`, `vertex`, `vertex-anthropic`,
//! `bedrock` or `bedrock-anthropic` keeps its wire family (OpenAI chat,
//! Responses, Gemini, Anthropic Messages, Bedrock Converse:
//! translation, pools and passthrough see only that) and adds a [`Cloud`]
//! (how the cloud addresses the call) and an [`Auth`] (where its credential
//! comes from). Secrets are never in the catalog: a variable's name, a
//! credentials file's path, the metadata server, or AWS's credential chain.

use super::json::Obj;
use super::url::BaseUrl;
use super::ConfigError;
use crate::family::Family;

/// The cloud an upstream is reached through, with its addressing fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cloud {
    /// Azure OpenAI: the v1 API under `base_url`, or a deployment.
    Azure { deployment: Option<Deployment> },
    /// Google Vertex AI: the model under a project and location.
    Vertex { project: String, location: String },
    /// Amazon Bedrock: the model under the region's runtime endpoint.
    Bedrock { region: String },
}

/// An Azure OpenAI deployment (`/openai/deployments/{name}/…?api-version=`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deployment {
    pub name: String,
    pub api_version: String,
}

/// Where an upstream's credential comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// The key read from `api_key_env`, in the protocol's header (Azure: `api-key`).
    Key,
    /// An Entra ID access token from a client credential (Azure).
    Entra(Entra),
    /// A Google OAuth2 access token: a service-account key file, else the metadata server (Vertex).
    Google(GoogleAuth),
    /// AWS SigV4 with credentials from the standard AWS chain (Bedrock);
    /// a Bedrock API key (`"type": "bearer"`) is [`Auth::Key`].
    Aws(AwsAuth),
}

/// `"auth": {"type": "sigv4", "profile"?: …}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsAuth {
    /// The shared-files profile to use alone; `None`: the whole chain
    /// (environment, `AWS_PROFILE` or `default`, web identity, container, IMDS).
    pub profile: Option<String>,
}

/// An Entra ID application's client credential (`"auth": {"type": "entra", …}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entra {
    pub tenant_id: String,
    pub client_id: String,
    /// The variable holding the client secret.
    pub client_secret_env: String,
    /// Its value, read at load (`None` when unset).
    pub client_secret: Option<String>,
    /// `authority_host` (default `https://login.microsoftonline.com`).
    pub authority: BaseUrl,
}

/// `"auth": {"type": "google-oauth", "credentials_file"?: …}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoogleAuth {
    /// A service-account JSON key; `None`: the metadata server.
    pub credentials_file: Option<String>,
}

/// Entra ID's public authority.
pub const ENTRA_AUTHORITY: &str = "https://login.microsoftonline.com";

/// Which cloud a protocol name names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CloudKind {
    Azure,
    Vertex,
    Bedrock,
}

/// The rerank-only protocol name (Cohere v2 `/rerank`; the OpenAI family's
/// Bearer key, never a completion or an embedding).
pub(crate) const COHERE: &str = "cohere";

/// The upstream protocol names: the wire family and the cloud around it.
const PROTOCOLS: &[(&str, Family, Option<CloudKind>)] = &[
    ("openai", Family::OpenAi, None),
    ("anthropic", Family::Anthropic, None),
    ("gemini", Family::Gemini, None),
    ("responses", Family::Responses, None),
    (COHERE, Family::OpenAi, None),
    ("azure", Family::OpenAi, Some(CloudKind::Azure)),
    ("azure-responses", Family::Responses, Some(CloudKind::Azure)),
    ("vertex", Family::Gemini, Some(CloudKind::Vertex)),
    (
        "vertex-anthropic",
        Family::Anthropic,
        Some(CloudKind::Vertex),
    ),
    ("bedrock", Family::Bedrock, Some(CloudKind::Bedrock)),
    (
        "bedrock-anthropic",
        Family::Anthropic,
        Some(CloudKind::Bedrock),
    ),
];

/// The variable a Bedrock API key is read from by default (as AWS's SDKs do).
pub const BEDROCK_KEY_ENV: &str = "AWS_BEARER_TOKEN_BEDROCK";

/// What [`fields`] reads of a cloud upstream.
pub(crate) struct Fields {
    pub cloud: Option<Cloud>,
    pub auth: Auth,
    /// The base URL the cloud gives when the catalog has none.
    pub default_base: Option<String>,
    /// The variable the key is read from when `auth` names it (Bedrock's
    /// bearer key), instead of `api_key_env`.
    pub key_env: Option<String>,
}

/// The upstream protocol `name` stands for, with its canonical (static) name.
pub(crate) fn protocol(name: &str) -> Option<(&'static str, Family, Option<CloudKind>)> {
    PROTOCOLS
        .iter()
        .find(|(n, ..)| *n == name)
        .map(|&(n, f, c)| (n, f, c))
}

/// The names [`protocol`] knows, for error messages.
pub(crate) fn protocol_names() -> String {
    let names: Vec<&str> = PROTOCOLS.iter().map(|(n, ..)| *n).collect();
    names.join(", ")
}

/// The cloud fields of upstream `u` (protocol `name`, cloud `kind`): its
/// [`Cloud`], its [`Auth`], and the base URL when the cloud gives one by
/// default (Vertex, Bedrock). Fields of another cloud are refused.
pub(crate) fn fields(
    u: &Obj<'_>,
    name: &str,
    kind: Option<CloudKind>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Fields, ConfigError> {
    let (cloud, auth, default_base, key_env) = cloud_fields(u, name, kind, env)?;
    Ok(Fields {
        cloud,
        auth,
        default_base,
        key_env,
    })
}

type Read = (Option<Cloud>, Auth, Option<String>, Option<String>);

/// Refuses the first of `fields` present, saying why (`fields`'s closure).
type Refuse<'r> = &'r dyn Fn(&[&str], &str) -> Result<(), ConfigError>;

fn cloud_fields(
    u: &Obj<'_>,
    name: &str,
    kind: Option<CloudKind>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Read, ConfigError> {
    let refuse = |fields: &[&str], why: &str| -> Result<(), ConfigError> {
        match fields.iter().find(|f| u.map.contains_key(**f)) {
            Some(f) => Err(u.err(f, format!("not a field of a {name} upstream ({why})"))),
            None => Ok(()),
        }
    };
    match kind {
        None => {
            refuse(
                &[
                    "deployment",
                    "api_version",
                    "project",
                    "location",
                    "region",
                    "auth",
                ],
                "it belongs to azure, vertex or bedrock upstreams",
            )?;
            Ok((None, Auth::Key, None, None))
        }
        Some(CloudKind::Azure) => {
            refuse(&["project", "location"], "it belongs to vertex upstreams")?;
            refuse(&["region"], "it belongs to bedrock upstreams")?;
            let deployment = deployment(u, name)?;
            let auth = match u.opt_obj("auth")? {
                None => Auth::Key,
                Some(a) => {
                    if u.map.contains_key("api_key_env") {
                        return Err(u.err(
                            "api_key_env",
                            "an upstream with \"auth\" takes its credential from there, not from a key",
                        ));
                    }
                    entra(&a, env)?
                }
            };
            Ok((Some(Cloud::Azure { deployment }), auth, None, None))
        }
        Some(CloudKind::Vertex) => {
            refuse(
                &["deployment", "api_version"],
                "it belongs to azure upstreams",
            )?;
            refuse(&["region"], "it belongs to bedrock upstreams")?;
            if u.map.contains_key("api_key_env") {
                return Err(u.err(
                    "api_key_env",
                    "a vertex upstream authenticates with \"auth\": {\"type\": \"google-oauth\"}",
                ));
            }
            let project = segment(u, "project")?;
            let location = segment(u, "location")?;
            let a = u.opt_obj("auth")?.ok_or_else(|| {
                u.err(
                    "auth",
                    "missing required field (e.g. {\"type\": \"google-oauth\"})",
                )
            })?;
            let auth = google(&a)?;
            let host = if location == "global" {
                "https://aiplatform.googleapis.com".to_string()
            } else {
                format!("https://{location}-aiplatform.googleapis.com")
            };
            Ok((
                Some(Cloud::Vertex { project, location }),
                auth,
                Some(host),
                None,
            ))
        }
        Some(CloudKind::Bedrock) => bedrock(u, &refuse),
    }
}

/// A Bedrock upstream: `region` (required, the SigV4 scope and the default
/// host) and `auth` (SigV4 from AWS's chain, or a Bedrock API key).
fn bedrock(u: &Obj<'_>, refuse: Refuse<'_>) -> Result<Read, ConfigError> {
    refuse(
        &["deployment", "api_version"],
        "it belongs to azure upstreams",
    )?;
    refuse(&["project", "location"], "it belongs to vertex upstreams")?;
    if u.map.contains_key("api_key_env") {
        return Err(u.err(
            "api_key_env",
            "a bedrock upstream authenticates with \"auth\": {\"type\": \"sigv4\"} or {\"type\": \"bearer\", \"env\": \"AWS_BEARER_TOKEN_BEDROCK\"}",
        ));
    }
    let region = u.str("region")?;
    if region.is_empty()
        || !region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Err(u.err(
            "region",
            format!("{region:?} is not an AWS region (e.g. \"us-east-1\")"),
        ));
    }
    let a = u.opt_obj("auth")?.ok_or_else(|| {
        u.err(
            "auth",
            "missing required field (e.g. {\"type\": \"sigv4\"} or {\"type\": \"bearer\", \"env\": \"AWS_BEARER_TOKEN_BEDROCK\"})",
        )
    })?;
    let (auth, key_env) = match a.str("type")? {
        "sigv4" => {
            a.only(&["type", "profile"])?;
            let profile = match a.opt_str("profile")? {
                None => None,
                Some(p) if !p.is_empty() && !p.contains(['[', ']', '\n']) => Some(p.to_string()),
                Some(p) => return Err(a.err("profile", format!("{p:?} is not a profile name"))),
            };
            (Auth::Aws(AwsAuth { profile }), None)
        }
        "bearer" => {
            a.only(&["type", "env"])?;
            let var = a.opt_str("env")?.unwrap_or(BEDROCK_KEY_ENV);
            if var.is_empty() {
                return Err(a.err("env", "must name an environment variable"));
            }
            (Auth::Key, Some(var.to_string()))
        }
        t => {
            return Err(a.err(
                "type",
                format!(
                    "unknown auth type {t:?} for this upstream (expected \"sigv4\" or \"bearer\")"
                ),
            ))
        }
    };
    let host = format!("https://bedrock-runtime.{region}.amazonaws.com");
    Ok((
        Some(Cloud::Bedrock {
            region: region.to_string(),
        }),
        auth,
        Some(host),
        key_env,
    ))
}

/// `deployment` and `api_version`, which go together (`azure` only).
fn deployment(u: &Obj<'_>, name: &str) -> Result<Option<Deployment>, ConfigError> {
    match (u.map.contains_key("deployment"), u.map.contains_key("api_version")) {
        (false, false) => Ok(None),
        (false, true) => Err(u.err(
            "api_version",
            "goes with \"deployment\" (the v1 API under base_url takes no api-version)",
        )),
        (true, _) if name != "azure" => Err(u.err(
            "deployment",
            "the Responses API on Azure is reached through the v1 API (base_url https://{resource}.openai.azure.com/openai/v1), without a deployment",
        )),
        (true, false) => Err(u.err(
            "api_version",
            "missing required field: a deployment is called with an api-version (e.g. \"2024-10-21\")",
        )),
        (true, true) => {
            let name = segment(u, "deployment")?;
            let api_version = u.str("api_version")?;
            if !api_version
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
            {
                return Err(u.err(
                    "api_version",
                    format!("{api_version:?} is not an api-version (letters, digits, '-' and '.')"),
                ));
            }
            Ok(Some(Deployment {
                name,
                api_version: api_version.to_string(),
            }))
        }
    }
}

/// A string that stands as one URL path segment.
fn segment(o: &Obj<'_>, key: &str) -> Result<String, ConfigError> {
    let s = o.str(key)?;
    if !s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err(o.err(
            key,
            format!("{s:?} must hold only letters, digits, '-', '_' and '.'"),
        ));
    }
    Ok(s.to_string())
}

/// The auth object's `type`, checked against the one this cloud takes.
fn auth_type(a: &Obj<'_>, want: &str) -> Result<(), ConfigError> {
    let t = a.str("type")?;
    if t != want {
        return Err(a.err(
            "type",
            format!("unknown auth type {t:?} for this upstream (expected {want:?})"),
        ));
    }
    Ok(())
}

fn entra(a: &Obj<'_>, env: &dyn Fn(&str) -> Option<String>) -> Result<Auth, ConfigError> {
    auth_type(a, "entra")?;
    a.only(&[
        "type",
        "tenant_id",
        "client_id",
        "client_secret_env",
        "authority_host",
    ])?;
    let tenant_id = segment(a, "tenant_id")?;
    let client_id = segment(a, "client_id")?;
    let client_secret_env = a.str("client_secret_env")?.to_string();
    let host = a.opt_str("authority_host")?.unwrap_or(ENTRA_AUTHORITY);
    let authority = BaseUrl::parse(host).map_err(|r| a.err("authority_host", r))?;
    Ok(Auth::Entra(Entra {
        tenant_id,
        client_id,
        client_secret: env(&client_secret_env).filter(|s| !s.is_empty()),
        client_secret_env,
        authority,
    }))
}

fn google(a: &Obj<'_>) -> Result<Auth, ConfigError> {
    auth_type(a, "google-oauth")?;
    a.only(&["type", "credentials_file"])?;
    let credentials_file = match a.opt_str("credentials_file")? {
        None => None,
        Some(_) => Some(a.str("credentials_file")?.to_string()),
    };
    if let Some(path) = &credentials_file {
        credentials_type(path).map_err(|r| a.err("credentials_file", r))?;
    }
    Ok(Auth::Google(GoogleAuth { credentials_file }))
}

/// Refuses a credentials file of a kind the gateway does not use (read at
/// load when it can be: one that cannot be read now is tried, and named in
/// the error, when a request needs it).
fn credentials_type(path: &str) -> Result<(), String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(());
    };
    let kind = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string));
    let source = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .map(|v| v["credential_source"].clone())
        .unwrap_or_default();
    match kind.as_deref() {
        Some("service_account") => Ok(()),
        Some("external_account") if source.get("file").is_some() || source.get("url").is_some() => {
            Ok(())
        }
        Some("external_account") => Err(format!(
            "{path}: only file- and URL-sourced external-account (workload identity federation) credentials are supported, not AWS- or executable-sourced ones; use a service-account key file, or the metadata server (no credentials_file) on GCE/GKE"
        )),
        Some(other) => Err(format!(
            "{path}: credentials of type {other:?} are not supported (expected \"service_account\" or \"external_account\")"
        )),
        None => Err(format!(
            "{path}: not a Google credentials file (a JSON object with \"type\": \"service_account\")"
        )),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::config::Catalog;

    /// A catalog with one upstream `up` (JSON members) for provider `p`.
    fn load(up: &str) -> Result<Catalog, ConfigError> {
        let text = format!(
            r#"{{"providers": [{{"id":"p","families":["openai"],"upstreams":[{{{up}}}]}}],
              "models": [{{"id":"m","provider":"p","context_length":100,"max_output_tokens":10,
                "pricing":{{"prompt":"0","completion":"0"}},"protocols":["openai"]}}]}}"#
        );
        Catalog::from_str("c.json", &text, &|v| {
            (v == "SECRET").then(|| "s3cret".into())
        })
    }

    fn err(up: &str) -> ConfigError {
        load(up).unwrap_err()
    }

    const AZ: &str = r#""protocol":"azure","base_url":"https://r.openai.azure.com/openai/v1""#;
    const VX: &str = r#""protocol":"vertex","project":"proj","location":"us-central1","auth":{"type":"google-oauth"}"#;
    const BR: &str = r#""protocol":"bedrock-anthropic","region":"us-east-1""#;

    #[test]
    fn bedrock_upstreams_sign_or_carry_a_key() {
        let c = load(&format!(r#"{BR},"auth":{{"type":"sigv4"}}"#)).unwrap();
        let u = &c.provider("p").unwrap().upstreams[0];
        assert_eq!(
            (u.protocol, u.protocol_name),
            (Family::Anthropic, "bedrock-anthropic")
        );
        assert_eq!(
            u.cloud,
            Some(Cloud::Bedrock {
                region: "us-east-1".into()
            })
        );
        assert_eq!(u.auth, Auth::Aws(AwsAuth { profile: None }));
        assert_eq!(u.url.authority, "bedrock-runtime.us-east-1.amazonaws.com");
        let c = load(&format!(
            r#"{BR},"auth":{{"type":"sigv4","profile":"team"}},"base_url":"http://127.0.0.1:9""#
        ))
        .unwrap();
        let u = &c.provider("p").unwrap().upstreams[0];
        assert_eq!(
            u.auth,
            Auth::Aws(AwsAuth {
                profile: Some("team".into())
            })
        );
        assert_eq!(u.url.port, 9);
        // a Bedrock API key: read like api_key_env, from the variable auth names
        let c = load(&format!(
            r#"{BR},"auth":{{"type":"bearer","env":"SECRET"}}"#
        ))
        .unwrap();
        let u = &c.provider("p").unwrap().upstreams[0];
        assert_eq!(
            (&u.auth, u.api_key.as_deref(), u.api_key_env.as_deref()),
            (&Auth::Key, Some("s3cret"), Some("SECRET"))
        );
        let c = load(
            &format!(r#"{BR},"auth":{{"type":"sigv4"}}"#).replace("bedrock-anthropic", "bedrock"),
        )
        .unwrap();
        let u = &c.provider("p").unwrap().upstreams[0];
        assert_eq!((u.protocol, u.protocol_name), (Family::Bedrock, "bedrock"));
        let c = load(&format!(r#"{BR},"auth":{{"type":"bearer"}}"#)).unwrap();
        let u = &c.provider("p").unwrap().upstreams[0];
        assert_eq!(u.api_key_env.as_deref(), Some(BEDROCK_KEY_ENV));
        assert_eq!(u.api_key, None);
    }

    #[test]
    fn azure_upstreams_keep_the_openai_wire() {
        let c = load(&format!(r#"{AZ},"api_key_env":"SECRET""#)).unwrap();
        let u = &c.provider("p").unwrap().upstreams[0];
        assert_eq!((u.protocol, u.protocol_name), (Family::OpenAi, "azure"));
        assert_eq!(u.cloud, Some(Cloud::Azure { deployment: None }));
        assert_eq!(
            (&u.auth, u.api_key.as_deref()),
            (&Auth::Key, Some("s3cret"))
        );
        assert_eq!(u.id, "azure@r.openai.azure.com");
        let c = load(
            r#""protocol":"azure","base_url":"https://r.openai.azure.com","deployment":"d1","api_version":"2024-10-21",
               "auth":{"type":"entra","tenant_id":"t","client_id":"c","client_secret_env":"SECRET"}"#,
        )
        .unwrap();
        let u = &c.provider("p").unwrap().upstreams[0];
        assert_eq!(
            u.cloud,
            Some(Cloud::Azure {
                deployment: Some(Deployment {
                    name: "d1".into(),
                    api_version: "2024-10-21".into()
                })
            })
        );
        let Auth::Entra(e) = &u.auth else { panic!() };
        assert_eq!(e.client_secret.as_deref(), Some("s3cret"));
        assert_eq!(e.authority.host, "login.microsoftonline.com");
        let c = load(r#""protocol":"azure-responses","base_url":"https://r/openai/v1""#).unwrap();
        assert_eq!(
            c.provider("p").unwrap().upstreams[0].protocol,
            Family::Responses
        );
    }

    #[test]
    fn vertex_upstreams_have_a_default_host() {
        let c = load(VX).unwrap();
        let u = &c.provider("p").unwrap().upstreams[0];
        assert_eq!((u.protocol, u.protocol_name), (Family::Gemini, "vertex"));
        assert_eq!(u.url.authority, "us-central1-aiplatform.googleapis.com");
        assert_eq!(u.url.path, "");
        let c = load(
            &VX.replace("us-central1", "global")
                .replace("\"vertex\"", "\"vertex-anthropic\""),
        )
        .unwrap();
        let u = &c.provider("p").unwrap().upstreams[0];
        assert_eq!(
            (u.protocol, u.url.authority.as_str()),
            (Family::Anthropic, "aiplatform.googleapis.com")
        );
        let c = load(&format!(r#"{VX},"base_url":"http://127.0.0.1:9""#)).unwrap();
        assert_eq!(c.provider("p").unwrap().upstreams[0].url.port, 9);
    }

    #[test]
    fn cloud_fields_are_validated_with_their_paths() {
        let at = "$.providers[0].upstreams[0]";
        for (up, path, says) in [
            (format!(r#"{AZ},"deployment":"d""#), "api_version", "missing required"),
            (format!(r#"{AZ},"api_version":"2024-10-21""#), "api_version", "goes with"),
            (format!(r#"{AZ},"deployment":"a/b","api_version":"1""#), "deployment", "letters"),
            (
                r#""protocol":"azure-responses","base_url":"https://r","deployment":"d","api_version":"1""#.into(),
                "deployment",
                "v1 API",
            ),
            (format!(r#"{AZ},"project":"x""#), "project", "vertex"),
            (format!(r#"{AZ},"auth":{{"type":"google-oauth"}}"#), "auth.type", "unknown auth type"),
            (
                format!(r#"{AZ},"auth":{{"type":"entra","tenant_id":"t","client_id":"c"}}"#),
                "auth.client_secret_env",
                "missing",
            ),
            (
                format!(r#"{AZ},"api_key_env":"K","auth":{{"type":"entra","tenant_id":"t","client_id":"c","client_secret_env":"S"}}"#),
                "api_key_env",
                "credential",
            ),
            (VX.replace(r#""project":"proj","#, ""), "project", "missing"),
            (VX.replace(r#""location":"us-central1","#, ""), "location", "missing"),
            (VX.replace(r#","auth":{"type":"google-oauth"}"#, ""), "auth", "missing"),
            (VX.replace("google-oauth", "sigv4"), "auth.type", "unknown auth type"),
            (VX.replace(r#""type":"google-oauth""#, r#""type":"google-oauth","x":1"#), "auth.x", "unknown field"),
            (format!(r#"{VX},"api_key_env":"K""#), "api_key_env", "google-oauth"),
            (format!(r#"{VX},"deployment":"d""#), "deployment", "azure"),
            (
                r#""protocol":"openai","base_url":"https://h","auth":{"type":"entra"}"#.into(),
                "auth",
                "azure, vertex or bedrock",
            ),
            (format!(r#"{BR},"auth":{{"type":"sigv4"}}"#).replace(r#""region":"us-east-1","#, ""), "region", "missing"),
            (format!(r#"{BR},"auth":{{"type":"sigv4"}}"#).replace("us-east-1", "US East"), "region", "not an AWS region"),
            (BR.to_string(), "auth", "missing"),
            (format!(r#"{BR},"auth":{{"type":"google-oauth"}}"#), "auth.type", "expected \"sigv4\" or \"bearer\""),
            (format!(r#"{BR},"auth":{{"type":"sigv4","region":"x"}}"#), "auth.region", "unknown field"),
            (format!(r#"{BR},"auth":{{"type":"bearer","env":""}}"#), "auth.env", "environment variable"),
            (format!(r#"{BR},"api_key_env":"K","auth":{{"type":"sigv4"}}"#), "api_key_env", "sigv4"),
            (format!(r#"{BR},"project":"p","auth":{{"type":"sigv4"}}"#), "project", "vertex"),
            (format!(r#"{VX},"region":"us-east-1""#), "region", "bedrock"),
            (r#""protocol":"bedrockish","base_url":"https://h""#.into(), "protocol", "vertex-anthropic"),
        ] {
            let e = err(&up);
            assert_eq!(e.path, format!("{at}.{path}"), "{up}: {e}");
            assert!(e.reason.contains(says), "{up}: {e}");
        }
    }

    #[test]
    fn credentials_files_of_other_kinds_are_refused_at_load() {
        let dir = std::env::temp_dir().join(format!("sb-cloud-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("ext.json");
        std::fs::write(
            &file,
            r#"{"type":"external_account","audience":"x","credential_source":{"environment_id":"aws1"}}"#,
        )
        .unwrap();
        let up = VX.replace(
            r#""type":"google-oauth""#,
            &format!(
                r#""type":"google-oauth","credentials_file":{:?}"#,
                file.display().to_string()
            ),
        );
        let e = err(&up);
        assert_eq!(e.path, "$.providers[0].upstreams[0].auth.credentials_file");
        assert!(e.reason.contains("not AWS- or executable-sourced"), "{e}");
        std::fs::write(
            &file,
            r#"{"type":"external_account","audience":"x","credential_source":{"file":"/t"}}"#,
        )
        .unwrap();
        assert!(load(&up).is_ok());
        std::fs::write(&file, r#"{"type":"service_account"}"#).unwrap();
        assert!(load(&up).is_ok());
        // a file that cannot be read now is tried when a request needs it
        std::fs::remove_file(&file).unwrap();
        assert!(load(&up).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
