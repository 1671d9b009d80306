//! The admin API (docs/operations.md "Usage ledger", docs/keys.md), served on the metrics listener
//! under `/admin/*`, guarded by `--admin-key` and, with OIDC configured, by the identity
//! provider's tokens (docs/configuration.md "JWT clients (OIDC)"): without either every admin
//! route answers 404; else a request must carry `Authorization: Bearer KEY` (compared in
//! constant time) or a bearer JWT whose keys.json `jwt.admin_claim` holds `admin_value`,
//! or gets 401 (403: a valid token without the admin value). Who it is, the actor
//! (`admin-key`, or `jwt:` and the token's `email` or `sub`), is handed to the routes.
//! Answers are JSON and name keys by their id only, never a key.
//!
//! Routes:
//! - `GET /admin/whoami`: `{"actor": ...}`, who the credential is.
//! - `GET /admin/usage?key=&team=&model=&from=&to=&group_by=key|team|model|day[&format=csv]`:
//!   sums of requests, tokens and cost from the usage ledger (`state::ledger`),
//!   as JSON or CSV (`csv`).
//! - `GET /admin/usage/series`: the console's charts (`series`).
//! - `GET /admin/requests`: the latest requests, with their attempts (`requests`).
//! - `GET /admin/keys`, `GET /admin/keys/{id}`: keys (file and API) and one
//!   key with its spend in the current period, remaining budget, rpm / tpm
//!   use, from the limits state (`keys`); `POST /admin/keys`, `PATCH` and
//!   `DELETE /admin/keys/{id}`, `POST /admin/keys/{id}/rotate`: changes
//!   through the key store (`key_changes`, docs/keys.md);
//! - `/admin/teams[/{id}]`: teams, the same way (`teams`); what both share
//!   in `writes`, the bodies and query parameters read in `body`;
//! - `GET /admin/audit`: the changes made, newest first (`audit`);
//! - `GET /admin/upstreams`: every provider's pool, each upstream's weight,
//!   health, recent failures and load (`upstreams`).
//! - `GET /admin/ui/`: the web console (`console`), served without the key
//!   (its assets hold no data; every figure comes from the routes above).
//!
//! Every handler takes the actor's name (`admin-key`, `jwt:...`) as a plain
//! string, written into the audit log.

pub mod audit;
pub mod body;
pub mod console;
pub mod csv;
pub mod key_changes;
pub mod keys;
pub mod requests;
pub mod series;
pub mod server;
pub mod teams;
pub mod upstreams;
pub mod writes;

use crate::error::quote;
use crate::listener::Session;
use crate::state::ledger::{Bound, GroupBy, Reader, Sums, UsageQuery};
use http::Response;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The admin routes' state.
#[derive(Default)]
pub struct Admin {
    /// SHA-256 of `--admin-key`; `None`: the admin API is off (404).
    key_digest: Option<[u8; 32]>,
    /// Where usage is read from; `None` when the ledger is not open.
    ledger: Option<Reader>,
    /// The limits state and the live snapshot (for the keys), for `/admin/keys/{id}`.
    limits: Option<(
        std::sync::Arc<crate::state::limits::Limits>,
        std::sync::Arc<crate::runtime::Runtime>,
    )>,
    /// Where keys and teams made through the API are kept; `None`: read only.
    key_db: Option<std::sync::Arc<crate::state::keys::KeyDb>>,
    /// The identity provider's verifier and the snapshot whose keys.json says
    /// which claim grants admin; `None`: only the admin key.
    identity: Option<(
        std::sync::Arc<crate::identity::Oidc>,
        std::sync::Arc<crate::runtime::Runtime>,
    )>,
}

/// Who an admin request is: what the audit names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// `--admin-key`.
    AdminKey,
    /// A token that grants admin: `jwt:` and its `email`, else its `sub`.
    Jwt(String),
}

impl Actor {
    /// The actor's name: [`ADMIN_KEY_ACTOR`] or `jwt:<email or sub>`.
    pub fn name(&self) -> &str {
        match self {
            Actor::AdminKey => ADMIN_KEY_ACTOR,
            Actor::Jwt(who) => who,
        }
    }
}

/// An admin answer.
pub type Reply = Response<Vec<u8>>;

/// An answer that ends a handler early (an error), boxed: it is carried
/// through `Result`s.
pub type Fail = Box<Reply>;

/// [`error`] as a [`Fail`].
pub fn fail(status: u16, kind: &str, message: impl Into<String>) -> Fail {
    Box::new(error(status, kind, message))
}

/// The actor of a request authenticated with the admin key.
pub const ADMIN_KEY_ACTOR: &str = "admin-key";

/// What a route handler is given.
pub struct Ctx<'a> {
    pub limits: &'a crate::state::limits::Limits,
    pub rt: &'a crate::runtime::Runtime,
    /// `None`: no key store (changes answer 503).
    pub db: Option<&'a crate::state::keys::KeyDb>,
    /// Who is asking, for the audit log.
    pub actor: &'a str,
}

impl Ctx<'_> {
    /// The key store, or the 503 that says there is none.
    pub fn db(&self) -> Result<&crate::state::keys::KeyDb, Fail> {
        self.db
            .ok_or_else(|| fail(503, "unavailable", "the key store is not open"))
    }
}

/// A JSON response.
pub fn reply(status: u16, body: &Value) -> Response<Vec<u8>> {
    let mut resp = Response::new(body.to_string().into_bytes());
    *resp.status_mut() = http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::OK);
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-store"),
    );
    resp
}

/// The answer when the ledger cannot be read (`what` names the query, for the log).
fn ledger_failed(what: &str, e: &str) -> Reply {
    log::warn!("admin {what} query failed: {e}");
    error(
        503,
        "unavailable",
        format!("the usage ledger cannot be read: {e}"),
    )
}

/// An error answer: `{"error": {"type", "message"}}`.
pub fn error(status: u16, kind: &str, message: impl Into<String>) -> Response<Vec<u8>> {
    reply(
        status,
        &json!({"error": {"type": kind, "message": message.into()}}),
    )
}

/// Takes `format=json|csv` out of a usage query: (CSV asked for, the rest).
fn take_format(query: Option<&str>) -> Result<(bool, Option<String>), String> {
    let mut csv = false;
    let mut rest = Vec::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=').unwrap_or((pair, "")) {
            ("format", "csv") => csv = true,
            ("format", "json" | "") => csv = false,
            ("format", other) => {
                return Err(format!(
                    "format: expected json or csv, got {}",
                    quote(other)
                ))
            }
            _ => rest.push(pair),
        }
    }
    Ok((csv, Some(rest.join("&")).filter(|r| !r.is_empty())))
}

/// Parses the usage query string; `Err` names the bad parameter.
pub fn parse_usage_query(query: Option<&str>) -> Result<UsageQuery, String> {
    let mut q = UsageQuery::default();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (name, raw) = pair.split_once('=').unwrap_or((pair, ""));
        let value =
            crate::util::percent::decode_strict(raw, crate::util::percent::Component::Query)
                .ok_or_else(|| format!("{}: not valid percent-encoded UTF-8", quote(name)))?;
        let value = Some(value).filter(|v| !v.is_empty());
        let bound = |v: Option<String>| -> Result<Option<Bound>, String> {
            v.map(|v| {
                Bound::parse(&v).ok_or_else(|| {
                    format!(
                        "{name}: expected a UTC day (YYYY-MM-DD) or an RFC 3339 instant, got {}",
                        quote(&v)
                    )
                })
            })
            .transpose()
        };
        match name {
            "key" => q.key = value,
            "team" => q.team = value,
            "model" => q.model = value,
            "from" => q.from = bound(value)?,
            "to" => q.to = bound(value)?,
            "group_by" => {
                q.group_by = value
                    .map(|v| {
                        GroupBy::parse(&v).ok_or_else(|| {
                            format!(
                                "group_by: expected key, team, model or day, got {}",
                                quote(&v)
                            )
                        })
                    })
                    .transpose()?
            }
            other => {
                return Err(format!(
                    "unknown parameter {} (known: key, team, model, from, to, group_by, format)",
                    quote(other)
                ))
            }
        }
    }
    if let (Some(f), Some(t)) = (q.from, q.to) {
        if f.start_ms() >= t.end_ms() {
            return Err("from: must be before to".into());
        }
    }
    Ok(q)
}

fn sums_json(s: &Sums) -> Value {
    json!({
        "requests": s.requests,
        "errors": s.errors,
        "input_tokens": s.input_tokens,
        "output_tokens": s.output_tokens,
        "cached_tokens": s.cached_tokens,
        "cache_write_tokens": s.cache_write_tokens,
        "reasoning_tokens": s.reasoning_tokens,
        // Each row's cost is exact to 1e-9 USD; a sum of floats is rounded
        // back to that precision.
        "cost_usd": (s.cost_usd * 1e9).round() / 1e9,
        // Null without requests, or over days rolled up before latency was kept.
        "mean_latency_ms": (s.requests > 0 && s.latency_ms > 0.0)
            .then(|| (s.latency_ms / s.requests as f64 * 10.0).round() / 10.0),
    })
}

impl Admin {
    /// The admin API with `key` (`None` or empty: off) reading usage from `ledger`.
    pub fn new(key: Option<&str>, ledger: Option<Reader>) -> Admin {
        Admin {
            key_digest: key
                .filter(|k| !k.is_empty())
                .map(|k| Sha256::digest(k.as_bytes()).into()),
            ledger,
            limits: None,
            key_db: None,
            identity: None,
        }
    }

    /// Lets the identity provider's tokens in: a token whose `jwt.admin_claim`
    /// (in the keys file of `rt`'s snapshot) holds `admin_value`.
    #[must_use]
    pub fn with_identity(
        mut self,
        oidc: std::sync::Arc<crate::identity::Oidc>,
        rt: std::sync::Arc<crate::runtime::Runtime>,
    ) -> Admin {
        self.identity = Some((oidc, rt));
        self
    }

    /// Adds the key store the key and team changes are written to.
    #[must_use]
    pub fn with_key_db(mut self, db: std::sync::Arc<crate::state::keys::KeyDb>) -> Admin {
        self.key_db = Some(db);
        self
    }

    /// Adds the per-key limits state `GET /admin/keys/{id}` reads.
    #[must_use]
    pub fn with_limits(
        mut self,
        limits: std::sync::Arc<crate::state::limits::Limits>,
        rt: std::sync::Arc<crate::runtime::Runtime>,
    ) -> Admin {
        self.limits = Some((limits, rt));
        self
    }

    /// Whether `path` is an admin route (served here rather than as metrics).
    pub fn owns(path: &str) -> bool {
        path == "/admin" || path.starts_with("/admin/")
    }

    /// Who the request is: the admin key (both sides hashed first, so the
    /// comparison takes the same time whatever the presented length), or a
    /// token that grants admin. `Err`: the answer (401, 403, 503).
    async fn authenticate(&self, session: &Session) -> Result<Actor, Response<Vec<u8>>> {
        let presented = session
            .req_header()
            .headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, token) = v.trim().split_once(' ')?;
                scheme
                    .eq_ignore_ascii_case("bearer")
                    .then_some(token.trim())
            });
        let unauthorized = |message: String| {
            let mut r = error(401, "authentication", message);
            r.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Bearer realm=\"switchboard-admin\""),
            );
            r
        };
        let need = if self.identity.is_some() {
            "admin routes need Authorization: Bearer <admin key or admin JWT>"
        } else {
            "admin routes need Authorization: Bearer <admin key>"
        };
        let Some(token) = presented else {
            return Err(unauthorized(need.to_string()));
        };
        if let Some(digest) = &self.key_digest {
            let got: [u8; 32] = Sha256::digest(token.as_bytes()).into();
            if bool::from(got.ct_eq(digest)) {
                return Ok(Actor::AdminKey);
            }
        }
        let Some((oidc, rt)) = self
            .identity
            .as_ref()
            .filter(|_| crate::identity::looks_like_jwt(token))
        else {
            return Err(unauthorized(need.to_string()));
        };
        let claims = match oidc.verify(token).await {
            Ok(c) => c,
            Err(e) if e.kind == crate::error::ErrorKind::Unavailable => {
                return Err(error(503, "unavailable", e.message))
            }
            Err(e) => return Err(unauthorized(e.message)),
        };
        let snap = rt.snapshot();
        match snap.keys.jwt() {
            Some(m) if claims.grants_admin(m) => claims
                .actor()
                .map(Actor::Jwt)
                .map_err(|e| unauthorized(e.message)),
            m => Err(error(
                403,
                "permission_denied",
                match m.and_then(|m| m.admin_claim.as_deref()) {
                    Some(claim) => format!(
                        "this token does not grant admin: its {} claim does not hold the admin value",
                        quote(claim)
                    ),
                    None => "tokens do not grant admin: keys.json's jwt block has no admin_claim"
                        .to_string(),
                },
            )),
        }
    }

    /// Answers an `/admin/*` request.
    pub async fn respond(&self, session: &mut Session) -> Response<Vec<u8>> {
        if self.key_digest.is_none() && self.identity.is_none() {
            return error(404, "not_found", "not found");
        }
        let req = session.req_header();
        if console::owns(req.uri.path()) {
            // Assets only: no data, so no key (the pages ask the API with it,
            // an admin key or an admin JWT alike).
            return console::respond(&req.method, req.uri.path(), req.uri.query());
        }
        match self.authenticate(session).await {
            Ok(actor) => self.route(session, actor.name()).await,
            Err(answer) => answer,
        }
    }

    /// The admin routes, after authentication; `actor` made the request.
    async fn route(&self, session: &mut Session, actor: &str) -> Response<Vec<u8>> {
        let req = session.req_header();
        let method = req.method.clone();
        let path = req.uri.path().trim_end_matches('/').to_string();
        let query = req.uri.query().map(str::to_string);
        let get = method == http::Method::GET;
        let (post, patch, delete) = (
            method == http::Method::POST,
            method == http::Method::PATCH,
            method == http::Method::DELETE,
        );
        let Some((limits, rt)) = &self.limits else {
            return match path.as_str() {
                "/admin/usage" if get => self.usage(query.as_deref()).await,
                _ => error(503, "unavailable", "the runtime is not attached"),
            };
        };
        let cx = Ctx {
            limits,
            rt,
            db: self.key_db.as_deref(),
            actor,
        };
        let q = query.as_deref();
        // `/admin/{area}[/{id}[/{action}]]`, the id percent-decoded.
        let mut parts = path.trim_start_matches("/admin/").splitn(3, '/');
        let area = parts.next().unwrap_or("");
        let id = match parts.next().map(|raw| {
            crate::util::percent::decode_strict(raw, crate::util::percent::Component::Path)
        }) {
            Some(None) => {
                return error(
                    400,
                    "invalid_request",
                    "the id is not valid percent-encoded UTF-8",
                )
            }
            Some(Some(id)) => Some(id),
            None => None,
        };
        let action = parts.next();
        let not_allowed = |allow: &str| {
            let mut r = error(405, "method_not_allowed", format!("use {allow}"));
            if let Ok(v) = http::HeaderValue::from_str(allow) {
                r.headers_mut().insert(http::header::ALLOW, v);
            }
            r
        };
        match (area, id.as_deref(), action) {
            ("whoami", None, None) if get => reply(200, &json!({"actor": actor})),
            ("whoami", None, None) => not_allowed("GET"),
            ("usage", None, None) if get => self.usage(q).await,
            ("usage", None, None) => not_allowed("GET"),
            ("usage", Some("series"), None) if get => {
                series::respond(self.ledger.as_ref(), q).await
            }
            ("usage", Some("series"), None) => not_allowed("GET"),
            ("requests", None, None) if get => requests::respond(self.ledger.as_ref(), q).await,
            ("requests", None, None) => not_allowed("GET"),
            ("upstreams", None, None) if get => reply(200, &upstreams::render(&rt.snapshot())),
            ("upstreams", None, None) => not_allowed("GET"),
            ("keys", None, None) if get => keys::list(&cx, q),
            ("keys", None, None) if post => key_changes::create(&cx, session).await,
            ("keys", None, None) => not_allowed("GET, POST"),
            ("keys", Some(id), None) if get => keys::one(&cx, id).await,
            ("keys", Some(id), None) if patch => key_changes::update(&cx, session, id).await,
            ("keys", Some(id), None) if delete => key_changes::revoke(&cx, id).await,
            ("keys", Some(_), None) => not_allowed("GET, PATCH, DELETE"),
            ("keys", Some(id), Some("rotate")) if post => {
                key_changes::rotate(&cx, session, id).await
            }
            ("keys", Some(_), Some("rotate")) => not_allowed("POST"),
            ("teams", None, None) if get => teams::list(&cx),
            ("teams", None, None) if post => teams::create(&cx, session).await,
            ("teams", None, None) => not_allowed("GET, POST"),
            ("teams", Some(id), None) if get => teams::one(&cx, id).await,
            ("teams", Some(id), None) if patch => teams::update(&cx, session, id).await,
            ("teams", Some(id), None) if delete => teams::delete(&cx, id).await,
            ("teams", Some(_), None) => not_allowed("GET, PATCH, DELETE"),
            ("audit", None, None) if get => audit::list(&cx, q).await,
            ("audit", None, None) => not_allowed("GET"),
            _ => error(404, "not_found", format!("no admin route {}", quote(&path))),
        }
    }

    async fn usage(&self, query: Option<&str>) -> Response<Vec<u8>> {
        // `format` is the answer's, the rest the ledger query's.
        let (csv, query) = match take_format(query) {
            Ok(v) => v,
            Err(e) => return error(400, "invalid_request", e),
        };
        let q = match parse_usage_query(query.as_deref()) {
            Ok(q) => q,
            Err(e) => return error(400, "invalid_request", e),
        };
        let Some(ledger) = &self.ledger else {
            return error(503, "unavailable", "the usage ledger is not open");
        };
        let usage = match ledger.usage(&q).await {
            Ok(u) => u,
            Err(e) => return ledger_failed("usage", &e),
        };
        let mut total = Sums::default();
        let mut groups = Vec::with_capacity(usage.groups.len());
        for g in &usage.groups {
            total.add(&g.sums);
            if let Some(by) = q.group_by {
                let mut v = sums_json(&g.sums);
                if let Value::Object(o) = &mut v {
                    o.insert(by.name().to_string(), Value::String(g.value.clone()));
                }
                groups.push(v);
            }
        }
        let bound = |b: Option<Bound>| match b {
            None => Value::Null,
            Some(Bound::Day(d)) => Value::String(crate::state::ledger::day_string(d)),
            Some(Bound::Instant(ms)) => Value::String(
                crate::util::rfc3339::Rfc3339 {
                    secs: ms.div_euclid(1000),
                    millis: Some(u32::try_from(ms.rem_euclid(1000)).unwrap_or(0)),
                }
                .to_string(),
            ),
        };
        if csv {
            let name = q.group_by.map_or("total", GroupBy::name);
            let body = match q.group_by {
                Some(_) => csv::render(
                    name,
                    usage.groups.iter().map(|g| (g.value.as_str(), &g.sums)),
                ),
                None => csv::render(name, std::iter::once(("total", &total))),
            };
            let mut r = Response::new(body.into_bytes());
            let h = r.headers_mut();
            h.insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("text/csv; charset=utf-8"),
            );
            h.insert(
                http::header::CACHE_CONTROL,
                http::HeaderValue::from_static("no-store"),
            );
            if let Ok(v) = http::HeaderValue::from_str(&format!(
                "attachment; filename=\"switchboard-usage-by-{name}.csv\""
            )) {
                h.insert(http::header::CONTENT_DISPOSITION, v);
            }
            return r;
        }
        let mut body = json!({
            "filters": {"key": q.key, "team": q.team, "model": q.model, "from": bound(q.from), "to": bound(q.to)},
            "group_by": q.group_by.map(GroupBy::name),
            "source": usage.source,
            "total": sums_json(&total),
        });
        if q.group_by.is_some() {
            body["groups"] = Value::Array(groups);
        }
        reply(200, &body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_query_parses_and_refuses_with_the_parameter_named() {
        let q = parse_usage_query(Some(
            "key=dev&model=openai%2Fgpt-5&from=2026-01-01&to=2026-01-31&group_by=day",
        ))
        .unwrap();
        assert_eq!(q.key.as_deref(), Some("dev"));
        assert_eq!(q.model.as_deref(), Some("openai/gpt-5"));
        assert_eq!(q.group_by, Some(GroupBy::Day));
        assert!(q.day_range().is_some());
        assert_eq!(parse_usage_query(None).unwrap(), UsageQuery::default());
        assert_eq!(
            parse_usage_query(Some("key=&model=")).unwrap(),
            UsageQuery::default()
        );
        for (bad, name) in [
            ("group_by=hour", "group_by"),
            ("from=yesterday", "from"),
            ("to=2026-02-30", "to"),
            ("bogus=1", "bogus"),
            ("key=%zz", "key"),
            ("from=2026-02-01&to=2026-01-01", "from"),
        ] {
            let e = parse_usage_query(Some(bad)).unwrap_err();
            assert!(e.contains(name), "{bad}: {e}");
        }
    }
}
