//! The clouds: Azure OpenAI and Vertex AI around the wire protocols, and
//! their token endpoints, checking what the real services check and
//! answering 401 (or the endpoint's own error) otherwise.
//! - Azure, under a `/azure` path prefix: the v1 API (`/azure/openai/v1/…`)
//!   and deployments (`/azure/openai/deployments/{d}/chat/completions`,
//!   `api-version` required); an `api-key` the test set
//!   ([`MockUpstream::expect_azure_key`]) or an Entra token this mock issued.
//! - Vertex (`/v1/projects/{p}/locations/{l}/publishers/{google|anthropic}/models/{m}:{method}`):
//!   a Google token this mock issued; Anthropic's `rawPredict` /
//!   `streamRawPredict` take `anthropic_version: vertex-2023-10-16` and no `model`.
//! - Entra ID: `POST /{tenant}/oauth2/v2.0/token`, the client-credentials form
//!   ([`MockUpstream::expect_entra`]).
//! - Google: `POST /google-oauth2/token` with a JWT-bearer assertion, its
//!   RS256 signature verified with the public key the test gave
//!   ([`MockUpstream::expect_service_account`]) and its claims checked;
//!   workload identity federation: Google's STS (`POST /sts/v1/token`, a
//!   token exchange of the subject token the test set,
//!   [`MockUpstream::expect_federation`]), IAM's
//!   `POST /iamcredentials/v1/projects/-/serviceAccounts/{email}:generateAccessToken`
//!   (an STS token as Bearer), and a subject-token URL
//!   (`GET /oidc/subject-token`, header `x-identity-header: e2e`, answering
//!   `{"id_token": …}`); the metadata server's `GET /computeMetadata/v1/instance/service-accounts/default/token`
//!   with `Metadata-Flavor: Google`.
//!
//! Tokens live [`MockUpstream::set_token_life`] seconds (default 3599) and
//! are refused once expired. Imports `super::*`; never another protocol's file.

use super::*;
use std::time::Instant;

/// The token path of the mock's Google OAuth2 endpoint (a key file's `token_uri`).
pub const GOOGLE_TOKEN_PATH: &str = "/google-oauth2/token";
/// Google STS's token-exchange path on the mock.
pub const STS_TOKEN_PATH: &str = "/sts/v1/token";
/// The mock's subject-token URL path (header `x-identity-header: e2e`).
pub const SUBJECT_TOKEN_PATH: &str = "/oidc/subject-token";
/// IAM's `generateAccessToken` path for `email`, on the mock.
pub fn impersonation_path(email: &str) -> String {
    format!("/iamcredentials/v1/projects/-/serviceAccounts/{email}:generateAccessToken")
}
/// The metadata server's token path.
pub const METADATA_TOKEN_PATH: &str = "/computeMetadata/v1/instance/service-accounts/default/token";
/// The `anthropic_version` Vertex takes.
pub const VERTEX_ANTHROPIC_VERSION: &str = "vertex-2023-10-16";
const ENTRA_SCOPE: &str = "https://cognitiveservices.azure.com/.default";
const GOOGLE_SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";

/// What the clouds accept, and the tokens issued.
#[derive(Default)]
pub(super) struct CloudState {
    azure_key: Option<String>,
    /// (tenant, client id, secret).
    entra: Option<(String, String, String)>,
    /// (client_email, the RSA public key, DER of PKCS#1 RSAPublicKey).
    google: Option<(String, Vec<u8>)>,
    /// Workload identity federation: (audience, subject token).
    federation: Option<(String, String)>,
    /// Seconds a token lives (0: 3599).
    life: u64,
    /// Issued tokens: (token, source, expiry).
    issued: Vec<(String, &'static str, Instant)>,
    /// Token calls answered with a token, per source.
    fetches: std::collections::HashMap<&'static str, usize>,
}

impl CloudState {
    fn valid(&self, token: &str, sources: &[&str]) -> bool {
        self.issued
            .iter()
            .any(|(t, s, until)| t == token && sources.contains(s) && Instant::now() < *until)
    }

    fn issue(&mut self, source: &'static str) -> (String, u64) {
        let life = if self.life == 0 { 3599 } else { self.life };
        *self.fetches.entry(source).or_default() += 1;
        let token = format!("mock-{source}-token-{}", self.issued.len() + 1);
        self.issued.push((
            token.clone(),
            source,
            Instant::now() + Duration::from_secs(life),
        ));
        (token, life)
    }
}

impl MockUpstream {
    /// Azure upstreams accept `api-key: key`.
    pub fn expect_azure_key(&self, key: &str) {
        self.state.cloud().azure_key = Some(key.to_owned());
    }

    /// The Entra ID endpoint issues tokens to this application.
    pub fn expect_entra(&self, tenant: &str, client_id: &str, secret: &str) {
        self.state.cloud().entra = Some((tenant.into(), client_id.into(), secret.into()));
    }

    /// The Google token endpoint accepts assertions of `email` signed by the
    /// key whose public half is `public_pem` (PEM `RSA PUBLIC KEY`).
    pub fn expect_service_account(&self, email: &str, public_pem: &str) {
        let der = pem_der(public_pem).unwrap_or_default();
        assert!(
            !der.is_empty(),
            "expect_service_account: an RSA PUBLIC KEY PEM"
        );
        self.state.cloud().google = Some((email.into(), der));
    }

    /// Google's STS exchanges `subject_token` for `audience` (workload
    /// identity federation), and IAM impersonates any account for its tokens.
    pub fn expect_federation(&self, audience: &str, subject_token: &str) {
        self.state.cloud().federation = Some((audience.into(), subject_token.into()));
    }

    /// Tokens issued from now on live `secs` seconds.
    pub fn set_token_life(&self, secs: u64) {
        self.state.cloud().life = secs;
    }

    /// Tokens issued by `source` (`entra`, `google`, `metadata`).
    pub fn token_fetches(&self, source: &str) -> usize {
        self.state.cloud().fetches.get(source).copied().unwrap_or(0)
    }

    /// Whether every token issued so far has expired.
    pub fn tokens_expired(&self) -> bool {
        let now = Instant::now();
        self.state
            .cloud()
            .issued
            .iter()
            .all(|(_, _, until)| now >= *until)
    }

    /// Revokes every token issued so far (they are refused from now on).
    pub fn revoke_tokens(&self) {
        let now = Instant::now();
        for t in &mut self.state.cloud().issued {
            t.2 = now;
        }
    }

    /// Every token issued so far.
    pub fn tokens_issued(&self) -> Vec<String> {
        self.state
            .cloud()
            .issued
            .iter()
            .map(|(t, ..)| t.clone())
            .collect()
    }
}

impl State {
    pub(super) fn cloud(&self) -> MutexGuard<'_, CloudState> {
        self.cloud.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The bytes of the first PEM block of `pem`.
fn pem_der(pem: &str) -> Option<Vec<u8>> {
    let body: String = pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect::<String>();
    base64_decode(&body)
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in text.trim_end_matches('=').bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// `application/x-www-form-urlencoded` pairs.
pub(super) fn form(body: &[u8]) -> Vec<(String, String)> {
    let decode = |s: &str| super::bedrock::percent_decode(&s.replace('+', " "));
    String::from_utf8_lossy(body)
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(p), String::new()),
        })
        .collect()
}

pub(super) fn field<'a>(form: &'a [(String, String)], name: &str) -> Option<&'a str> {
    form.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn oauth_error(status: u16, error: &str, description: &str) -> Reply {
    Reply::json(
        status,
        &json!({"error": error, "error_description": description}),
    )
}

/// The cloud's answer to `request` when it is a token call or a cloud call
/// the cloud refuses; `None`: the provider routes take it from here.
pub(super) fn cloud_reply(state: &State, request: &RecordedRequest) -> Option<Reply> {
    if let Some(reply) = super::bedrock::aws_reply(state, request) {
        return Some(reply);
    }
    let path = request.path_only();
    if request.method == "GET" && path == METADATA_TOKEN_PATH {
        return Some(metadata(state, request));
    }
    if request.method == "POST" && path == GOOGLE_TOKEN_PATH {
        return Some(google_token(state, request));
    }
    if request.method == "POST" && path == STS_TOKEN_PATH {
        return Some(sts_token(state, request));
    }
    if request.method == "POST" && path.starts_with("/iamcredentials/v1/") {
        return Some(impersonate(state, request));
    }
    if request.method == "GET" && path == SUBJECT_TOKEN_PATH {
        let subject = state.cloud().federation.clone().map(|f| f.1);
        return Some(match (request.header("x-identity-header"), subject) {
            (Some("e2e"), Some(s)) => Reply::json(200, &json!({"id_token": s})),
            _ => Reply::json(401, &json!({"error": "missing identity header"})),
        });
    }
    if request.method == "POST" && path.ends_with("/oauth2/v2.0/token") {
        return Some(entra_token(state, request));
    }
    if path.starts_with("/azure/") {
        return azure_check(state, request);
    }
    if path.starts_with("/v1/projects/") {
        return vertex_check(state, request);
    }
    None
}

fn metadata(state: &State, request: &RecordedRequest) -> Reply {
    if request.header("metadata-flavor") != Some("Google") {
        return Reply::full(
            403,
            "text/html",
            b"Missing Metadata-Flavor:Google header.".to_vec(),
        );
    }
    let (token, life) = state.cloud().issue("metadata");
    Reply::json(
        200,
        &json!({"access_token": token, "expires_in": life, "token_type": "Bearer"}),
    )
}

fn entra_token(state: &State, request: &RecordedRequest) -> Reply {
    let tenant = request.path_only().split('/').nth(1).unwrap_or_default();
    let f = form(&request.body);
    let mut cloud = state.cloud();
    let Some((want_tenant, want_client, want_secret)) = cloud.entra.clone() else {
        return oauth_error(400, "invalid_request", "AADSTS90002: Tenant not found.");
    };
    if tenant != want_tenant {
        return oauth_error(400, "invalid_request", "AADSTS90002: Tenant not found.");
    }
    if field(&f, "grant_type") != Some("client_credentials") {
        return oauth_error(
            400,
            "unsupported_grant_type",
            "AADSTS70003: unsupported grant type",
        );
    }
    if field(&f, "scope") != Some(ENTRA_SCOPE) {
        return oauth_error(
            400,
            "invalid_scope",
            "AADSTS70011: The provided scope is not valid.",
        );
    }
    if field(&f, "client_id") != Some(want_client.as_str()) {
        return oauth_error(
            400,
            "unauthorized_client",
            "AADSTS700016: Application not found.",
        );
    }
    if field(&f, "client_secret") != Some(want_secret.as_str()) {
        return oauth_error(
            401,
            "invalid_client",
            "AADSTS7000215: Invalid client secret provided.",
        );
    }
    let (token, life) = cloud.issue("entra");
    Reply::json(
        200,
        &json!({"token_type": "Bearer", "expires_in": life, "ext_expires_in": life, "access_token": token}),
    )
}

fn google_token(state: &State, request: &RecordedRequest) -> Reply {
    let f = form(&request.body);
    if field(&f, "grant_type") != Some("urn:ietf:params:oauth:grant-type:jwt-bearer") {
        return oauth_error(400, "unsupported_grant_type", "Invalid grant_type.");
    }
    let host = request.header("host").unwrap_or_default();
    let token_uri = format!("http://{host}{GOOGLE_TOKEN_PATH}");
    let mut cloud = state.cloud();
    let Some((email, key)) = cloud.google.clone() else {
        return oauth_error(400, "invalid_grant", "Invalid JWT Signature.");
    };
    match check_assertion(
        field(&f, "assertion").unwrap_or_default(),
        &email,
        &key,
        &token_uri,
    ) {
        Ok(()) => {
            let (token, life) = cloud.issue("google");
            Reply::json(
                200,
                &json!({"access_token": token, "expires_in": life, "token_type": "Bearer"}),
            )
        }
        Err(why) => oauth_error(400, "invalid_grant", why),
    }
}

/// What Google checks of a service account's assertion: RS256 signed by
/// the account's key, issued by it, for this endpoint, with a scope, live
/// and for at most an hour.
fn check_assertion(
    jwt: &str,
    email: &str,
    key: &[u8],
    token_uri: &str,
) -> Result<(), &'static str> {
    let mut parts = jwt.split('.');
    let (Some(h), Some(c), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(
            "Invalid JWT: Token must be a short-lived token and in a reasonable timeframe.",
        );
    };
    let json_of = |p: &str| base64_decode(p).and_then(|b| serde_json::from_slice::<Value>(&b).ok());
    let (Some(header), Some(claims), Some(sig)) = (json_of(h), json_of(c), base64_decode(s)) else {
        return Err("Invalid JWT Signature.");
    };
    if header["alg"] != "RS256" {
        return Err("Invalid JWT Signature.");
    }
    let public =
        ring::signature::UnparsedPublicKey::new(&ring::signature::RSA_PKCS1_2048_8192_SHA256, key);
    if public.verify(format!("{h}.{c}").as_bytes(), &sig).is_err() {
        return Err("Invalid JWT Signature.");
    }
    if claims["iss"] != email {
        return Err("Invalid JWT: iss is not the service account.");
    }
    if claims["aud"] != token_uri {
        return Err("Invalid JWT: aud is not the token endpoint.");
    }
    let scopes = claims["scope"].as_str().unwrap_or_default();
    if !scopes.split(' ').any(|s| s == GOOGLE_SCOPE) {
        return Err("Invalid JWT: no scope.");
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (iat, exp) = (claims["iat"].as_u64(), claims["exp"].as_u64());
    match (iat, exp) {
        (Some(iat), Some(exp)) if iat <= now + 60 && exp > now && exp > iat && exp - iat <= 3600 => {
            Ok(())
        }
        _ => Err("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe."),
    }
}

/// Google STS's token exchange (RFC 8693), as workload identity federation calls it.
fn sts_token(state: &State, request: &RecordedRequest) -> Reply {
    let f = form(&request.body);
    let mut cloud = state.cloud();
    let bad_audience = "The target service indicated by the audience parameters is invalid.";
    let Some((audience, subject)) = cloud.federation.clone() else {
        return oauth_error(400, "invalid_target", bad_audience);
    };
    if field(&f, "grant_type") != Some("urn:ietf:params:oauth:grant-type:token-exchange")
        || field(&f, "requested_token_type")
            != Some("urn:ietf:params:oauth:token-type:access_token")
    {
        return oauth_error(
            400,
            "invalid_request",
            "Invalid grant_type or requested_token_type.",
        );
    }
    if field(&f, "audience") != Some(audience.as_str()) {
        return oauth_error(400, "invalid_target", bad_audience);
    }
    if field(&f, "subject_token_type").is_none_or(str::is_empty)
        || !field(&f, "scope")
            .unwrap_or_default()
            .split(' ')
            .any(|s| s == GOOGLE_SCOPE)
    {
        return oauth_error(
            400,
            "invalid_request",
            "Missing subject_token_type or scope.",
        );
    }
    if field(&f, "subject_token") != Some(subject.as_str()) {
        return oauth_error(400, "invalid_grant", "The subject token is invalid.");
    }
    let (token, life) = cloud.issue("sts");
    Reply::json(
        200,
        &json!({"access_token": token, "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
            "token_type": "Bearer", "expires_in": life}),
    )
}

/// IAM's `generateAccessToken` for a service account, with an STS token.
fn impersonate(state: &State, request: &RecordedRequest) -> Reply {
    let mut cloud = state.cloud();
    if !bearer(request).is_some_and(|t| cloud.valid(t, &["sts"])) {
        return Reply::json(
            401,
            &json!({"error": {"code": 401, "message": "Request had invalid authentication credentials.", "status": "UNAUTHENTICATED"}}),
        );
    }
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let scoped = body["scope"]
        .as_array()
        .is_some_and(|s| s.iter().any(|s| s == GOOGLE_SCOPE));
    if !scoped || !request.path_only().ends_with(":generateAccessToken") {
        return Reply::json(
            400,
            &json!({"error": {"code": 400, "message": "scope is required", "status": "INVALID_ARGUMENT"}}),
        );
    }
    let (token, life) = cloud.issue("impersonated");
    let expires = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        + life;
    Reply::json(
        200,
        &json!({"accessToken": token, "expireTime": rfc3339(expires)}),
    )
}

/// `YYYY-MM-DDTHH:MM:SSZ` of unix seconds (Howard Hinnant's civil_from_days).
pub(super) fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn bearer(request: &RecordedRequest) -> Option<&str> {
    request
        .header("authorization")
        .and_then(|v| v.strip_prefix("Bearer "))
}

/// Azure: the credential, then the deployment form's `api-version`.
fn azure_check(state: &State, request: &RecordedRequest) -> Option<Reply> {
    let cloud = state.cloud();
    let by_key = match (&cloud.azure_key, request.header("api-key")) {
        (Some(want), Some(got)) => want == got,
        _ => false,
    };
    let by_token = bearer(request).is_some_and(|t| cloud.valid(t, &["entra"]));
    drop(cloud);
    if !by_key && !by_token {
        return Some(Reply::json(
            401,
            &json!({"error": {"code": "401", "message": "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."}}),
        ));
    }
    let path = request.path_only();
    if path.starts_with("/azure/openai/deployments/") {
        let version = request
            .query()
            .and_then(|q| q.split('&').find_map(|p| p.strip_prefix("api-version=")));
        if version.is_none_or(str::is_empty) {
            return Some(Reply::json(
                404,
                &json!({"error": {"code": "404", "message": "Resource not found"}}),
            ));
        }
    } else if !path.starts_with("/azure/openai/v1/") {
        return Some(Reply::json(
            404,
            &json!({"error": {"code": "404", "message": "Resource not found"}}),
        ));
    }
    None
}

/// Vertex: the token, the path's shape, and Anthropic's body.
fn vertex_check(state: &State, request: &RecordedRequest) -> Option<Reply> {
    let valid = bearer(request).is_some_and(|t| {
        state
            .cloud()
            .valid(t, &["google", "metadata", "sts", "impersonated"])
    });
    let google_error = |code: u16, status: &str, message: &str| {
        Reply::json(
            code,
            &json!({"error": {"code": code, "message": message, "status": status}}),
        )
    };
    if !valid {
        return Some(google_error(
            401,
            "UNAUTHENTICATED",
            "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.",
        ));
    }
    let segs: Vec<&str> = request.path_only().split('/').collect();
    // "", v1, projects, P, locations, L, publishers, PUB, models, M:method
    let shaped = segs.len() == 10
        && segs[4] == "locations"
        && segs[6] == "publishers"
        && segs[8] == "models"
        && !segs[3].is_empty()
        && !segs[5].is_empty();
    if !shaped {
        return Some(google_error(
            404,
            "NOT_FOUND",
            "mock: not a Vertex model path",
        ));
    }
    if segs[7] != "anthropic" {
        return None;
    }
    let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
    let stream = segs[9].ends_with(":streamRawPredict");
    let problem = if body["anthropic_version"] != VERTEX_ANTHROPIC_VERSION {
        Some("anthropic_version: vertex-2023-10-16 is required")
    } else if body.get("model").is_some() {
        Some("model: Extra inputs are not permitted")
    } else if (body["stream"] == true) != stream {
        Some("stream must be true with streamRawPredict, and only then")
    } else {
        None
    };
    problem.map(|m| {
        Reply::json(
            400,
            &json!({"type": "error", "error": {"type": "invalid_request_error", "message": m}}),
        )
    })
}
