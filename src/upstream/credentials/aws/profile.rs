//! AWS's shared files: the credentials file (`AWS_SHARED_CREDENTIALS_FILE`,
//! else `~/.aws/credentials`, sections `[name]`) and the config file
//! (`AWS_CONFIG_FILE`, else `~/.aws/config`, sections `[default]` and
//! `[profile name]`), INI as the SDKs read it: `key = value` lines, `#` and
//! `;` comment lines, indented lines continuing a property (ignored here).
//! A profile gives static keys (`aws_access_key_id`, `aws_secret_access_key`,
//! `aws_session_token`; the credentials file first), or a web identity role
//! (`role_arn` with `web_identity_token_file`). Both files are read each
//! time keys are fetched.

use super::{remote, var, AwsKeys, FetchedKeys, Link, STATIC_LIFE};
use crate::upstream::client::UpstreamClient;
use std::collections::HashMap;

/// One profile's properties (names lowercased).
type Props = HashMap<String, String>;

/// The properties of profile `name` in INI `text`; `config` says whether
/// sections are named as in the config file (`[profile name]`, `[default]`).
pub(crate) fn section(text: &str, name: &str, config: bool) -> Option<Props> {
    let mut found: Option<Props> = None;
    let mut inside = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        if let Some(header) = trimmed.strip_prefix('[') {
            let Some(header) = header.split(']').next() else {
                continue;
            };
            let header = header.trim();
            let this = if config {
                match header.strip_prefix("profile") {
                    Some(rest) if rest.starts_with([' ', '\t']) => rest.trim(),
                    _ if header == "default" => "default",
                    _ => "",
                }
            } else {
                header
            };
            inside = !this.is_empty() && this == name;
            if inside && found.is_none() {
                found = Some(Props::new());
            }
            continue;
        }
        // An indented line continues the property above it.
        if !inside || line.starts_with([' ', '\t']) {
            continue;
        }
        if let (Some(props), Some((k, v))) = (found.as_mut(), trimmed.split_once('=')) {
            props.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    found
}

/// The user's home directory.
fn home() -> Option<String> {
    var("HOME").or_else(|| var("USERPROFILE"))
}

/// The path of a shared file: the variable's, else `~/.aws/{file}`.
fn path(variable: &str, file: &str) -> Option<String> {
    var(variable).or_else(|| home().map(|h| format!("{h}/.aws/{file}")))
}

/// The keys of profile `name`; `named` says the catalog names it (then a
/// profile that is not there is an error, not the next link of the chain).
pub(super) async fn credentials(client: &UpstreamClient, name: &str, named: bool) -> Link {
    let creds_path = path("AWS_SHARED_CREDENTIALS_FILE", "credentials");
    let config_path = path("AWS_CONFIG_FILE", "config");
    let read = |p: &Option<String>, config: bool| {
        p.as_deref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| section(&t, name, config))
    };
    let creds = read(&creds_path, false);
    let config = read(&config_path, true);
    let shown = format!(
        "shared files ({}, {}): profile {name:?}",
        creds_path.as_deref().unwrap_or("no credentials file"),
        config_path.as_deref().unwrap_or("no config file"),
    );
    // The credentials file's keys first, then the config file's.
    for props in creds.iter().chain(config.iter()) {
        if let Some(id) = props.get("aws_access_key_id") {
            let Some(secret) = props.get("aws_secret_access_key") else {
                return Link::Failed(format!(
                    "{shown} has aws_access_key_id without aws_secret_access_key"
                ));
            };
            return Link::Keys(FetchedKeys {
                keys: AwsKeys {
                    access_key_id: id.clone(),
                    secret_access_key: secret.clone(),
                    session_token: props.get("aws_session_token").cloned(),
                },
                life: STATIC_LIFE,
                source: shown,
            });
        }
    }
    let Some(props) = config.or(creds) else {
        let why = format!("{shown} not found");
        return if named {
            Link::Failed(why)
        } else {
            Link::Absent(why)
        };
    };
    match (props.get("role_arn"), props.get("web_identity_token_file")) {
        (Some(role), Some(file)) => {
            let session = props.get("role_session_name").cloned();
            remote::web_identity(client, role, file, session.as_deref(), &shown).await
        }
        (Some(_), None) => Link::Failed(format!(
            "{shown} assumes a role from another profile or source (source_profile, credential_source), which the gateway does not do; give it keys, or a web_identity_token_file"
        )),
        _ if props.contains_key("credential_process") || props.contains_key("sso_session") || props.contains_key("sso_start_url") => Link::Failed(format!(
            "{shown} uses credential_process or SSO, which the gateway does not run; give it keys, or use the environment, web identity or the instance's role"
        )),
        _ => Link::Failed(format!("{shown} has no aws_access_key_id")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const CREDS: &str = "# keys\n[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key=s1\n\n[team]\n; comment\nAWS_ACCESS_KEY_ID = AKIDTEAM\naws_secret_access_key = s2\naws_session_token = tok\n";
    const CONFIG: &str = "[default]\nregion = us-east-1\n[profile ci]\nrole_arn = arn:aws:iam::1:role/r\nweb_identity_token_file = /t\ns3 =\n  max_concurrent_requests = 20\n[profilex]\naws_access_key_id = no\n";

    #[test]
    fn sections_are_found_by_the_files_naming() {
        let d = section(CREDS, "default", false).unwrap();
        assert_eq!(d["aws_access_key_id"], "AKIDDEFAULT");
        assert_eq!(d["aws_secret_access_key"], "s1");
        let t = section(CREDS, "team", false).unwrap();
        assert_eq!(t["aws_access_key_id"], "AKIDTEAM");
        assert_eq!(t["aws_session_token"], "tok");
        assert!(section(CREDS, "nope", false).is_none());
        let ci = section(CONFIG, "ci", true).unwrap();
        assert_eq!(ci["role_arn"], "arn:aws:iam::1:role/r");
        assert!(!ci.contains_key("max_concurrent_requests"));
        assert_eq!(
            section(CONFIG, "default", true).unwrap()["region"],
            "us-east-1"
        );
        // `[profilex]` is no profile; `[ci]` in the config file is not `[profile ci]`
        assert!(section(CONFIG, "profilex", true).is_none());
        assert!(section("[ci]\nx=1\n", "ci", true).is_none());
    }
}
