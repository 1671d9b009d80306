//! Amazon Bedrock's runtime API, its credentials, and the AWS endpoints
//! the credential chain calls, checking what AWS checks.
//! - `POST …/model/{id}/invoke` and `/invoke-with-response-stream`: an
//!   Anthropic Messages body with `anthropic_version: bedrock-2023-05-31`,
//!   no `model`, no `stream`; the stream is AWS's event stream of `chunk`
//!   messages whose payload `{"bytes": base64}` holds Anthropic's events
//!   (with a `p` padding member, as Bedrock sends).
//! - `POST …/model/{id}/converse` and `/converse-stream` (Converse, written
//!   from AWS's API reference: `messageStart`, `contentBlockStart` for a
//!   tool call, `contentBlockDelta`, `contentBlockStop`, `messageStop`,
//!   `metadata` with usage).
//! - Every model call: a Bedrock API key (`Authorization: Bearer`,
//!   [`MockUpstream::expect_bedrock_key`]) or SigV4, recomputed here by an
//!   implementation of its own (canonical request with the path URI-encoded
//!   once more, the HMAC chain): an unknown key id, a session token that is
//!   missing or not the key's, a missing `x-amz-date`, a date more than five
//!   minutes off, or a signature that differs are refused with AWS's 403
//!   (`{"message": …}`, `x-amzn-errortype`).
//! - STS `POST /aws-sts` `AssumeRoleWithWebIdentity` (XML answer), the
//!   container endpoint (`GET /aws-container/credentials`), IMDSv2
//!   (`PUT /latest/api/token`, `GET /latest/meta-data/iam/security-credentials/[role]`),
//!   each issuing temporary keys that SigV4 then accepts.
//!
//! Imports `super::*`, `ring` for SHA-256 and HMAC; nothing of the gateway.

use super::cloud::{field, form};
use super::*;

/// The `anthropic_version` Bedrock takes.
pub const BEDROCK_ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";
/// STS's path on the mock (`AWS_ENDPOINT_URL_STS=http://ADDR/aws-sts`).
pub const AWS_STS_PATH: &str = "/aws-sts";
/// The container credentials endpoint's path on the mock
/// (`AWS_CONTAINER_CREDENTIALS_FULL_URI=http://ADDR/aws-container/credentials`).
pub const CONTAINER_CREDENTIALS_PATH: &str = "/aws-container/credentials";
/// The role IMDS reports.
pub const IMDS_ROLE: &str = "mock-instance-role";
const SIGNATURE_MISMATCH: &str = "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.";
const BAD_TOKEN: &str = "The security token included in the request is invalid.";

/// What AWS accepts, and what it issued.
#[derive(Default)]
pub(super) struct AwsState {
    /// Access key id → (secret, the session token it needs).
    keys: std::collections::HashMap<String, (String, Option<String>)>,
    bearer: Vec<String>,
    /// (role ARN, the web identity token STS takes).
    web_identity: Option<(String, String)>,
    imds: bool,
    imds_tokens: Vec<String>,
    /// The authorization token the container endpoint takes.
    container: Option<String>,
    /// Keys issued, per source (`sts`, `imds`).
    fetches: std::collections::HashMap<&'static str, usize>,
    /// The region SigV4 scopes must name (default us-east-1).
    region: Option<String>,
}

impl AwsState {
    fn issue(&mut self, source: &'static str) -> (String, String, String) {
        let n = self.fetches.entry(source).or_default();
        *n += 1;
        let id = format!("ASIAMOCK{}{:04}", source.to_ascii_uppercase(), *n);
        let secret = format!("mock-{source}-secret-{n}/K7MDENG+bPxRfiCY");
        let token = format!("mock-{source}-session-token-{n}+/=");
        self.keys
            .insert(id.clone(), (secret.clone(), Some(token.clone())));
        (id, secret, token)
    }
}

impl State {
    pub(super) fn aws(&self) -> MutexGuard<'_, AwsState> {
        self.aws.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl MockUpstream {
    /// SigV4 with these keys is accepted (with `session_token`: only with it).
    pub fn expect_aws_keys(&self, id: &str, secret: &str, session_token: Option<&str>) {
        self.state.aws().keys.insert(
            id.to_owned(),
            (secret.to_owned(), session_token.map(str::to_owned)),
        );
    }

    /// Bedrock accepts `Authorization: Bearer key`.
    pub fn expect_bedrock_key(&self, key: &str) {
        self.state.aws().bearer.push(key.to_owned());
    }

    /// STS gives `role`'s temporary keys for web identity `token`.
    pub fn expect_web_identity(&self, role: &str, token: &str) {
        self.state.aws().web_identity = Some((role.to_owned(), token.to_owned()));
    }

    /// IMDS serves [`IMDS_ROLE`]'s temporary keys.
    pub fn serve_imds(&self) {
        self.state.aws().imds = true;
    }

    /// The container endpoint serves temporary keys to callers with
    /// `authorization: token`.
    pub fn serve_container_credentials(&self, token: &str) {
        self.state.aws().container = Some(token.to_owned());
    }

    /// SigV4 scopes must name `region`.
    pub fn expect_aws_region(&self, region: &str) {
        self.state.aws().region = Some(region.to_owned());
    }

    /// Temporary keys issued by `source` (`sts`, `imds`).
    pub fn aws_fetches(&self, source: &str) -> usize {
        self.state.aws().fetches.get(source).copied().unwrap_or(0)
    }
}

/// Bedrock's error: the status, `{"message"}` and `x-amzn-errortype`.
pub(super) fn bedrock_error(status: u16, kind: &str, message: &str) -> Reply {
    Reply::json(status, &json!({ "message": message })).header(
        "x-amzn-errortype",
        &format!("{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"),
    )
}

/// The exception Bedrock names a status with.
pub(super) fn exception_for(status: u16) -> &'static str {
    match status {
        400 => "ValidationException",
        403 => "AccessDeniedException",
        404 => "ResourceNotFoundException",
        408 => "ModelTimeoutException",
        424 => "ModelErrorException",
        429 => "ThrottlingException",
        503 => "ServiceUnavailableException",
        _ => "InternalServerException",
    }
}

/// A Bedrock model call: `(model, method)` of `…/model/{id}/{method}`.
pub(super) fn bedrock_call(path: &str) -> Option<(String, &str)> {
    let at = path.rfind("/model/")?;
    let (model, method) = path[at + "/model/".len()..].split_once('/')?;
    matches!(
        method,
        "invoke" | "invoke-with-response-stream" | "converse" | "converse-stream"
    )
    .then(|| (percent_decode(model), method))
}

/// `%XX` escapes decoded (a form's `+` is the caller's).
pub(super) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(n) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(n);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The AWS side's answer to `request` when it is an STS or IMDS call, or a
/// Bedrock call AWS refuses; `None`: the model routes take it from here.
pub(super) fn aws_reply(state: &State, request: &RecordedRequest) -> Option<Reply> {
    let path = request.path_only();
    if request.method == "POST" && path == AWS_STS_PATH {
        return Some(sts(state, request));
    }
    if path.starts_with("/latest/") {
        return Some(imds(state, request));
    }
    if path == CONTAINER_CREDENTIALS_PATH {
        let mut aws = state.aws();
        let Some(want) = aws.container.clone() else {
            return Some(Reply::full(404, "text/plain", b"Not Found".to_vec()));
        };
        if request.method != "GET" || request.header("authorization") != Some(want.as_str()) {
            return Some(Reply::json(
                403,
                &json!({"code": "AccessDenied", "message": "invalid authorization token"}),
            ));
        }
        let (id, secret, token) = aws.issue("container");
        return Some(Reply::json(
            200,
            &json!({"AccessKeyId": id, "SecretAccessKey": secret, "Token": token,
                "Expiration": rfc3339_at(3600), "RoleArn": "arn:aws:iam::123456789012:role/task"}),
        ));
    }
    let (_, method) = bedrock_call(path)?;
    let model_of = |p: &str| bedrock_call(p).map(|(m, _)| m).unwrap_or_default();
    if let Some(refused) = authenticate(state, request) {
        return Some(refused);
    }
    if method.starts_with("invoke") && !is_embedding_model(&model_of(path)) {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let problem = if body["anthropic_version"] != BEDROCK_ANTHROPIC_VERSION {
            Some("anthropic_version: bedrock-2023-05-31 is required")
        } else if body.get("model").is_some() {
            Some("extraneous key [model] is not permitted")
        } else if body.get("stream").is_some() {
            Some("extraneous key [stream] is not permitted")
        } else {
            None
        };
        return problem.map(|m| bedrock_error(400, "ValidationException", m));
    }
    None
}

fn sts(state: &State, request: &RecordedRequest) -> Reply {
    let f = form(&request.body);
    let error = |status: u16, code: &str, message: &str| {
        Reply::full(
            status,
            "text/xml",
            format!("<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error><RequestId>mock</RequestId></ErrorResponse>").into_bytes(),
        )
    };
    if field(&f, "Action") != Some("AssumeRoleWithWebIdentity")
        || field(&f, "Version") != Some("2011-06-15")
    {
        return error(400, "InvalidAction", "Could not find operation");
    }
    let mut aws = state.aws();
    let Some((role, token)) = aws.web_identity.clone() else {
        return error(
            400,
            "InvalidIdentityToken",
            "No OpenIDConnect provider found in your account",
        );
    };
    if field(&f, "RoleArn") != Some(role.as_str()) {
        return error(
            403,
            "AccessDenied",
            "Not authorized to perform sts:AssumeRoleWithWebIdentity",
        );
    }
    if field(&f, "WebIdentityToken") != Some(token.as_str()) {
        return error(
            400,
            "InvalidIdentityToken",
            "The web identity token that was passed could not be validated by AWS.",
        );
    }
    if field(&f, "RoleSessionName").is_none_or(str::is_empty) {
        return error(
            400,
            "ValidationError",
            "1 validation error detected: Value null at 'roleSessionName'",
        );
    }
    let (id, secret, session) = aws.issue("sts");
    let expires = rfc3339_at(3600);
    let xml = format!(
        "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\n  <AssumeRoleWithWebIdentityResult>\n    <Audience>sts.amazonaws.com</Audience>\n    <AssumedRoleUser><Arn>{role}/mock</Arn><AssumedRoleId>AROAMOCK:mock</AssumedRoleId></AssumedRoleUser>\n    <Credentials>\n      <AccessKeyId>{id}</AccessKeyId>\n      <SecretAccessKey>{secret}</SecretAccessKey>\n      <SessionToken>{}</SessionToken>\n      <Expiration>{expires}</Expiration>\n    </Credentials>\n  </AssumeRoleWithWebIdentityResult>\n  <ResponseMetadata><RequestId>mock</RequestId></ResponseMetadata>\n</AssumeRoleWithWebIdentityResponse>\n",
        session.replace('&', "&amp;")
    );
    Reply::full(200, "text/xml", xml.into_bytes())
}

fn imds(state: &State, request: &RecordedRequest) -> Reply {
    let mut aws = state.aws();
    if !aws.imds {
        return Reply::full(404, "text/plain", b"Not Found".to_vec());
    }
    let path = request.path_only();
    if path == "/latest/api/token" {
        if request.method != "PUT" {
            return Reply::full(405, "text/plain", b"Method Not Allowed".to_vec());
        }
        if request
            .header("x-aws-ec2-metadata-token-ttl-seconds")
            .and_then(|v| v.parse::<u32>().ok())
            .is_none_or(|t| t == 0 || t > 21600)
        {
            return Reply::full(400, "text/plain", b"Bad Request".to_vec());
        }
        let token = format!("imds-session-{}", aws.imds_tokens.len() + 1);
        aws.imds_tokens.push(token.clone());
        return Reply::full(200, "text/plain", token.into_bytes());
    }
    let valid = request
        .header("x-aws-ec2-metadata-token")
        .is_some_and(|t| aws.imds_tokens.iter().any(|k| k == t));
    if request.method != "GET" || !valid {
        return Reply::full(401, "text/plain", b"Unauthorized".to_vec());
    }
    match path.strip_prefix("/latest/meta-data/iam/security-credentials/") {
        Some("") => Reply::full(200, "text/plain", IMDS_ROLE.as_bytes().to_vec()),
        Some(IMDS_ROLE) => {
            let (id, secret, token) = aws.issue("imds");
            Reply::json(
                200,
                &json!({"Code": "Success", "LastUpdated": rfc3339_at(0), "Type": "AWS-HMAC",
                    "AccessKeyId": id, "SecretAccessKey": secret, "Token": token,
                    "Expiration": rfc3339_at(3600)}),
            )
        }
        _ => Reply::full(404, "text/plain", b"Not Found".to_vec()),
    }
}

/// Refuses a call whose credential AWS would refuse.
fn authenticate(state: &State, request: &RecordedRequest) -> Option<Reply> {
    let refuse = |kind: &str, message: &str| Some(bedrock_error(403, kind, message));
    let Some(auth) = request.header("authorization") else {
        return refuse(
            "MissingAuthenticationTokenException",
            "Missing Authentication Token",
        );
    };
    let aws = state.aws();
    if let Some(key) = auth.strip_prefix("Bearer ") {
        return if aws.bearer.iter().any(|k| k == key) {
            None
        } else {
            refuse(
                "UnrecognizedClientException",
                "Invalid API Key format: Must start with pre-defined prefix",
            )
        };
    }
    let Some(fields) = auth.strip_prefix("AWS4-HMAC-SHA256 ") else {
        return refuse("IncompleteSignatureException", "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters.");
    };
    let part = |name: &str| {
        fields
            .split(',')
            .map(str::trim)
            .find_map(|p| p.strip_prefix(name).and_then(|v| v.strip_prefix('=')))
    };
    let (Some(credential), Some(signed), Some(signature)) =
        (part("Credential"), part("SignedHeaders"), part("Signature"))
    else {
        return refuse("IncompleteSignatureException", "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters.");
    };
    let scope: Vec<&str> = credential.split('/').collect();
    let [key_id, day, region, service, "aws4_request"] = scope[..] else {
        return refuse(
            "IncompleteSignatureException",
            "Credential should be scoped to a valid region.",
        );
    };
    let Some((secret, session)) = aws.keys.get(key_id).cloned() else {
        return refuse("UnrecognizedClientException", BAD_TOKEN);
    };
    let want_region = aws.region.clone().unwrap_or_else(|| "us-east-1".to_owned());
    drop(aws);
    if region != want_region || service != "bedrock" {
        return refuse("InvalidSignatureException", &format!("Credential should be scoped to a valid region, not '{region}'. Credential should be scoped to correct service: 'bedrock'."));
    }
    let Some(amz_date) = request.header("x-amz-date") else {
        return refuse(
            "IncompleteSignatureException",
            "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.",
        );
    };
    let Some(at) = amz_seconds(amz_date) else {
        return refuse(
            "IncompleteSignatureException",
            "Date must be in ISO-8601 'basic format'.",
        );
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if at.abs_diff(now) > 300 || !amz_date.starts_with(day) {
        return refuse("InvalidSignatureException", &format!("Signature expired: {amz_date} is now earlier or later than the request time by more than 5 min."));
    }
    let names: Vec<&str> = signed.split(';').collect();
    if !names.contains(&"host") || !names.contains(&"x-amz-date") {
        return refuse(
            "InvalidSignatureException",
            "'Host' and 'X-Amz-Date' must be signed.",
        );
    }
    match (&session, request.header("x-amz-security-token")) {
        (Some(want), Some(got)) if want == got && names.contains(&"x-amz-security-token") => {}
        (None, None) => {}
        _ => return refuse("UnrecognizedClientException", BAD_TOKEN),
    }
    let expected = signature_of(request, &names, &secret, amz_date, day, region, service);
    if expected != signature {
        return refuse("InvalidSignatureException", SIGNATURE_MISMATCH);
    }
    None
}

/// The SigV4 signature AWS computes for `request`.
fn signature_of(
    request: &RecordedRequest,
    signed: &[&str],
    secret: &str,
    amz_date: &str,
    day: &str,
    region: &str,
    service: &str,
) -> String {
    use ring::{digest, hmac};
    // The canonical URI: the path as received, each byte but the
    // unreserved ones and '/' encoded once more (services but S3).
    let mut uri = String::new();
    for b in request.path_only().bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    let mut canonical = format!(
        "{}\n{uri}\n{}\n",
        request.method,
        request.query().unwrap_or("")
    );
    for name in signed {
        let values: Vec<String> = request
            .headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        canonical.push_str(&format!("{name}:{}\n", values.join(",")));
    }
    canonical.push('\n');
    canonical.push_str(&signed.join(";"));
    canonical.push('\n');
    canonical.push_str(&hex(digest::digest(&digest::SHA256, &request.body).as_ref()));
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{day}/{region}/{service}/aws4_request\n{}",
        hex(digest::digest(&digest::SHA256, canonical.as_bytes()).as_ref())
    );
    let mac = |key: &[u8], data: &str| {
        hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data.as_bytes())
            .as_ref()
            .to_vec()
    };
    let k = mac(format!("AWS4{secret}").as_bytes(), day);
    let k = mac(&k, region);
    let k = mac(&k, service);
    let k = mac(&k, "aws4_request");
    hex(&mac(&k, &to_sign))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Unix seconds of `YYYYMMDDTHHMMSSZ`.
fn amz_seconds(t: &str) -> Option<u64> {
    let b = t.as_bytes();
    if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
        return None;
    }
    let n = |r: std::ops::Range<usize>| t.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (n(0..4)?, n(4..6)?, n(6..8)?);
    // Howard Hinnant's days_from_civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days * 86_400 + n(9..11)? * 3600 + n(11..13)? * 60 + n(13..15)?).ok()
}

/// RFC 3339 of now plus `secs`.
fn rfc3339_at(secs: u64) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    super::cloud::rfc3339(now + secs)
}

// ---------------------------------------------------------------------------
// AWS's event stream, written here: prelude (total length, headers length,
// CRC32 of the two), headers (name length, name, type 7 = string, value
// length, value), payload, CRC32 of everything before it.

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// One event-stream message with string `headers` and `payload`.
pub fn event_frame(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    for (name, value) in headers {
        h.push(name.len() as u8);
        h.extend_from_slice(name.as_bytes());
        h.push(7);
        h.extend_from_slice(&(value.len() as u16).to_be_bytes());
        h.extend_from_slice(value.as_bytes());
    }
    let total = 12 + h.len() + payload.len() + 4;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&(total as u32).to_be_bytes());
    out.extend_from_slice(&(h.len() as u32).to_be_bytes());
    let prelude_crc = crc32(&out);
    out.extend_from_slice(&prelude_crc.to_be_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(payload);
    let crc = crc32(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// An `event` message named `name` (JSON payload).
fn event(name: &str, payload: &Value) -> Vec<u8> {
    event_frame(
        &[
            (":event-type", name),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        payload.to_string().as_bytes(),
    )
}

fn base64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(char::from(A[(n >> (18 - 6 * i) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// An Anthropic SSE stream reply as InvokeModelWithResponseStream sends
/// it: each SSE frame's data one `chunk` message; `[[bad-crc]]` corrupts
/// the CRC of the middle frame.
pub(super) fn as_chunk_stream(reply: Reply, bad_crc: bool) -> Reply {
    let ReplyBody::Stream(frames) = reply.body else {
        return reply;
    };
    let middle = frames.len() / 2;
    let chunks: Vec<Vec<u8>> = frames
        .iter()
        .enumerate()
        .filter_map(|(i, f)| {
            let text = String::from_utf8_lossy(f);
            let data: Vec<&str> = text
                .lines()
                .filter_map(|l| {
                    l.strip_prefix("data:")
                        .map(|d| d.strip_prefix(' ').unwrap_or(d))
                })
                .collect();
            if data.is_empty() {
                return None;
            }
            // Bedrock ends a failing stream with an exception message, not
            // the model's own error event.
            if text.lines().any(|l| l.trim_end() == "event: error") {
                return Some(exception_frame(
                    "throttlingException",
                    "Too many tokens, please wait before trying again.",
                ));
            }
            let payload = json!({"bytes": base64(data.join("\n").as_bytes()), "p": "abcdefghij"});
            let mut frame = event("chunk", &payload);
            if bad_crc && i == middle {
                let n = frame.len();
                frame[n - 1] ^= 0x5a;
            }
            Some(frame)
        })
        .collect();
    Reply {
        status: reply.status,
        headers: vec![(
            "content-type",
            "application/vnd.amazon.eventstream".to_owned(),
        )],
        body: ReplyBody::Stream(chunks),
        effects: reply.effects,
    }
}

/// An exception message (`throttlingException`, …) with its message.
pub fn exception_frame(kind: &str, message: &str) -> Vec<u8> {
    event_frame(
        &[
            (":exception-type", kind),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ],
        json!({ "message": message }).to_string().as_bytes(),
    )
}

/// Whether `model` is an embedding model (Titan, Cohere).
pub(super) fn is_embedding_model(model: &str) -> bool {
    model.starts_with("amazon.titan-embed") || model.starts_with("cohere.embed")
}

/// InvokeModel of an embedding model: Titan (`{"inputText", "dimensions",
/// "normalize"}` → `{"embedding", "inputTextTokenCount"}`) or Cohere
/// (`{"texts", "input_type"}` → `{"embeddings"}`), from AWS's model docs.
pub(super) fn bedrock_embed(body: &Value, model: &str) -> Reply {
    let invalid = |m: &str| bedrock_error(400, "ValidationException", m);
    let Some(obj) = body.as_object() else {
        return invalid("Malformed input request");
    };
    if model.starts_with("amazon.titan-embed") {
        if let Some(k) = obj.keys().find(|k| {
            !["inputText", "dimensions", "normalize", "embeddingTypes"].contains(&k.as_str())
        }) {
            return invalid(&format!(
                "Malformed input request: extraneous key [{k}] is not permitted"
            ));
        }
        let Some(text) = body["inputText"].as_str() else {
            return invalid("Malformed input request: required key [inputText] not found");
        };
        let dims = match &body["dimensions"] {
            Value::Null => DEFAULT_DIMENSIONS,
            v => match v.as_u64() {
                Some(d @ 1..=1024) => d as usize,
                _ => {
                    return invalid("Malformed input request: dimensions must be 256, 512 or 1024")
                }
            },
        };
        let vector = mock_vector(text, dims);
        return Reply::json(
            200,
            &json!({"embedding": vector, "embeddingsByType": {"float": vector},
                "inputTextTokenCount": mock_embed_tokens(&[text])}),
        );
    }
    if let Some(k) = obj
        .keys()
        .find(|k| !["texts", "input_type", "truncate", "embedding_types"].contains(&k.as_str()))
    {
        return invalid(&format!(
            "Malformed input request: extraneous key [{k}] is not permitted"
        ));
    }
    let texts: Vec<&str> = body["texts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if texts.is_empty() || texts.len() > 96 {
        return invalid("Malformed input request: texts must hold 1 to 96 strings");
    }
    if !matches!(
        body["input_type"].as_str(),
        Some("search_document" | "search_query" | "classification" | "clustering")
    ) {
        return invalid("Malformed input request: input_type must be search_document, search_query, classification or clustering");
    }
    let vectors: Vec<Vec<f32>> = texts
        .iter()
        .map(|t| mock_vector(t, DEFAULT_DIMENSIONS))
        .collect();
    Reply::json(
        200,
        &json!({"embeddings": vectors, "id": "mock-cohere-embed", "response_type": "embeddings_floats", "texts": texts}),
    )
}

/// The reply text of a Converse call for `user_text`.
pub fn converse_reply_text(user_text: &str) -> String {
    format!("Hello from bedrock mock: {user_text}{REPLY_SUFFIX}")
}

/// The last user message's text of a Converse body.
fn converse_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| {
            let texts: Vec<&str> = m["content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["text"].as_str())
                .collect();
            (!texts.is_empty()).then(|| texts.join(""))
        })
        .next_back()
        .unwrap_or_default()
}

/// A Converse (`stream` false) or ConverseStream answer.
pub(super) fn converse_reply(
    body: &Value,
    stream: bool,
    markers: &Markers,
    prompt_tokens: u64,
) -> Reply {
    if body
        .get("messages")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty)
    {
        return bedrock_error(400, "ValidationException", "A conversation must start with a user message. Try again with a conversation that starts with a user message.");
    }
    let tool = markers.tool.then(|| {
        body["toolConfig"]["tools"][0]["toolSpec"]["name"]
            .as_str()
            .unwrap_or(FALLBACK_TOOL)
            .to_owned()
    });
    let text = converse_reply_text(&converse_user_text(body));
    let deltas = split_deltas(&text);
    let stop = if tool.is_some() {
        "tool_use"
    } else if markers.max_tokens {
        "max_tokens"
    } else {
        "end_turn"
    };
    let output_tokens = deltas.len() as u64;
    let usage = json!({"inputTokens": prompt_tokens, "outputTokens": output_tokens, "totalTokens": prompt_tokens + output_tokens});
    let args: Value = serde_json::from_str(TOOL_ARGS).unwrap_or(Value::Null);
    if !stream {
        let mut content = vec![json!({"text": text})];
        if let Some(name) = &tool {
            content = vec![
                json!({"toolUse": {"toolUseId": "tooluse_mock0001", "name": name, "input": args}}),
            ];
        }
        return Reply::json(
            200,
            &json!({"output": {"message": {"role": "assistant", "content": content}},
                "stopReason": stop, "usage": usage, "metrics": {"latencyMs": 42}}),
        );
    }
    let mut frames = vec![event(
        "messageStart",
        &json!({"role": "assistant", "p": "abc"}),
    )];
    match &tool {
        Some(name) => {
            frames.push(event(
                "contentBlockStart",
                &json!({"contentBlockIndex": 0,
                "start": {"toolUse": {"toolUseId": "tooluse_mock0001", "name": name}}, "p": "ab"}),
            ));
            for piece in TOOL_ARG_FRAGMENTS {
                frames.push(event(
                    "contentBlockDelta",
                    &json!({"contentBlockIndex": 0,
                    "delta": {"toolUse": {"input": piece}}, "p": "abcd"}),
                ));
            }
        }
        None => {
            for d in &deltas {
                frames.push(event(
                    "contentBlockDelta",
                    &json!({"contentBlockIndex": 0,
                    "delta": {"text": d}, "p": "abcdef"}),
                ));
            }
        }
    }
    if markers.stream_error {
        let keep = frames.len() / 2 + 1;
        frames.truncate(keep);
        frames.push(exception_frame(
            "throttlingException",
            "Too many tokens, please wait before trying again.",
        ));
        return Reply::stream("application/vnd.amazon.eventstream", frames);
    }
    frames.push(event(
        "contentBlockStop",
        &json!({"contentBlockIndex": 0, "p": "a"}),
    ));
    frames.push(event(
        "messageStop",
        &json!({"stopReason": stop, "p": "abcdefg"}),
    ));
    frames.push(event(
        "metadata",
        &json!({"usage": usage, "metrics": {"latencyMs": 42}, "p": "ab"}),
    ));
    Reply::stream("application/vnd.amazon.eventstream", frames)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_is_ieee() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(base64(b"hello"), "aGVsbG8=");
        assert_eq!(amz_seconds("20150830T123600Z"), Some(1_440_938_160));
    }
}
