//! API keys: plain or SHA-256 secrets, per-key model patterns and rate limits;
//! teams (`teams`), each with its own rpm, tpm and budget, that a key may belong to
//! (docs/configuration.md "Keys", "Teams"); how a verified JWT maps to a team and a
//! policy (`jwt`, "JWT clients (OIDC)"); and the keys and teams made through
//! the admin API (docs/keys.md), validated here from their stored records and
//! merged with the file's ([`KeyStore::merged`], docs/configuration.md "Keys
//! from the file and from the API").
//!
//! Every secret is kept only as its SHA-256 digest; a presented key is hashed
//! once and looked up in a map from digest to key (one lookup whatever the
//! number of keys; what a lookup's timing could tell is about a digest, which
//! says nothing of any secret).

use super::catalog::{opt_policy, Policy};
use super::json::{parse, Obj};
use super::ConfigError;
use crate::util::rfc3339::{parse as parse_time, Parsed};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A `provider/model_id` pattern where `*` matches any run of characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelPattern(String);

impl ModelPattern {
    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `qualified` (`provider/model_id`) matches.
    pub fn matches(&self, qualified: &str) -> bool {
        glob(self.0.as_bytes(), qualified.as_bytes())
    }
}

fn glob(p: &[u8], s: &[u8]) -> bool {
    // Iterative wildcard match with single backtrack point: O(len(p) * len(s)) worst case.
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, si));
            pi += 1;
        } else if pi < p.len() && p[pi] == s[si] {
            pi += 1;
            si += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == b'*')
}

/// Where a key or a team is defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The keys file: changed by editing it, never through the API.
    File,
    /// The key store, through the admin API.
    Api,
    /// A verified JWT's subject, made for its request (never stored).
    Jwt,
}

impl Source {
    /// `file` or `api`.
    pub fn name(self) -> &'static str {
        match self {
            Source::File => "file",
            Source::Api => "api",
            Source::Jwt => "jwt",
        }
    }
}

/// Whether a key is in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Active,
    /// Past its `expires_at`.
    Expired,
    /// Revoked through the API.
    Revoked,
}

impl Status {
    /// `active`, `expired` or `revoked`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Expired => "expired",
            Status::Revoked => "revoked",
        }
    }

    /// The inverse of [`Status::name`].
    pub fn from_name(s: &str) -> Option<Status> {
        [Status::Active, Status::Expired, Status::Revoked]
            .into_iter()
            .find(|x| x.name() == s)
    }
}

/// Unix seconds now.
pub fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// One client key.
#[derive(Debug, Clone)]
pub struct ApiKey {
    /// The key's name, safe to log.
    pub id: String,
    digest: [u8; 32],
    /// During a rotation's grace period: the previous secret's digest and
    /// the unix second from which it is refused.
    previous: Option<([u8; 32], i64)>,
    /// The keys file or the key store.
    pub source: Source,
    /// Unix seconds from which the key is refused as expired.
    pub expires_at: Option<i64>,
    /// When the key was revoked (unix seconds); a revoked key is refused.
    pub revoked_at: Option<i64>,
    /// When the key was made through the API (unix seconds).
    pub created_at: Option<i64>,
    /// The operator's own JSON object, kept and shown as given.
    pub metadata: Option<Arc<Value>>,
    /// Models this key may call; `None` means all.
    pub models: Option<Vec<ModelPattern>>,
    /// Requests per sliding minute; `None` means unlimited.
    pub rpm: Option<u32>,
    /// Tokens (input plus output) per sliding minute; `None` means unlimited.
    pub tpm: Option<u64>,
    /// A spending cap per period; `None` means unlimited.
    pub budget: Option<Budget>,
    /// Overrides the catalog's policy (docs/api.md "Adapt or refuse") for this key's requests.
    pub policy: Option<Policy>,
    /// The team this key belongs to: a request must fit the team's limits as well as the key's.
    pub team: Option<Arc<Team>>,
}

/// A team: limits shared by every key that names it (docs/configuration.md "Teams").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Team {
    /// The team's name, safe to log.
    pub id: String,
    /// Requests per sliding minute across the team's keys; `None` means unlimited.
    pub rpm: Option<u32>,
    /// Tokens per sliding minute across the team's keys; `None` means unlimited.
    pub tpm: Option<u64>,
    /// A spending cap per period across the team's keys; `None` means unlimited.
    pub budget: Option<Budget>,
}

impl ApiKey {
    /// A principal that holds no secret of ours: a verified JWT's subject
    /// (docs/configuration.md "JWT clients (OIDC)"). It is never found by
    /// [`KeyStore::find`], which reads only the keys' digests.
    pub fn principal(
        id: String,
        models: Option<Vec<ModelPattern>>,
        policy: Option<Policy>,
        team: Option<Arc<Team>>,
    ) -> ApiKey {
        ApiKey {
            id,
            digest: [0; 32],
            previous: None,
            source: Source::Jwt,
            expires_at: None,
            revoked_at: None,
            created_at: None,
            metadata: None,
            models,
            rpm: None,
            tpm: None,
            budget: None,
            policy,
            team,
        }
    }

    /// Whether the key is in force at `now` (unix seconds).
    pub fn status(&self, now: i64) -> Status {
        if self.revoked_at.is_some() {
            Status::Revoked
        } else if self.expires_at.is_some_and(|e| now >= e) {
            Status::Expired
        } else {
            Status::Active
        }
    }

    /// Until when (unix seconds) the secret replaced by the last rotation is still accepted.
    pub fn grace_until(&self) -> Option<i64> {
        self.previous.map(|(_, until)| until)
    }

    /// Whether this key may call the model `provider/model_id`.
    pub fn allows(&self, qualified: &str) -> bool {
        self.models
            .as_ref()
            .is_none_or(|ps| ps.iter().any(|p| p.matches(qualified)))
    }
}

/// How the claims of a verified JWT map to a principal (keys.json `jwt`,
/// docs/configuration.md "JWT clients (OIDC)"). Claim names are top-level claims,
/// matched exactly (`https://example.com/team` is one name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtMapping {
    /// The claim whose string value names the principal's team in `teams`.
    pub team_claim: String,
    /// A claim whose value (`adapt` or `strict`) sets the principal's policy;
    /// without it, or when the token lacks it, the catalog's policy.
    pub policy_claim: Option<String>,
    /// The models every JWT principal may call; `None` means all.
    pub models: Option<Vec<ModelPattern>>,
    /// The claim (a string or an array of strings, e.g. `groups`) that grants
    /// the admin API when it holds `admin_value`; `None`: tokens never do.
    pub admin_claim: Option<String>,
    /// The value of `admin_claim` that grants the admin API.
    pub admin_value: Option<String>,
}

fn opt_jwt(root: &Obj<'_>) -> Result<Option<JwtMapping>, ConfigError> {
    let Some(o) = root.opt_obj("jwt")? else {
        return Ok(None);
    };
    o.only(&[
        "team_claim",
        "policy_claim",
        "models",
        "admin_claim",
        "admin_value",
    ])?;
    let name = |key: &str| -> Result<Option<String>, ConfigError> {
        match o.opt_str(key)? {
            Some("") => Err(o.err(key, "must not be empty")),
            other => Ok(other.map(str::to_string)),
        }
    };
    let team_claim = name("team_claim")?.ok_or_else(|| {
        o.err(
            "team_claim",
            "missing: name the claim that holds a token's team",
        )
    })?;
    let (admin_claim, admin_value) = (name("admin_claim")?, name("admin_value")?);
    match (&admin_claim, &admin_value) {
        (Some(_), None) => {
            return Err(o.err(
                "admin_value",
                "missing: admin_claim needs the value that grants admin",
            ))
        }
        (None, Some(_)) => {
            return Err(o.err("admin_claim", "missing: admin_value needs admin_claim"))
        }
        _ => {}
    }
    Ok(Some(JwtMapping {
        team_claim,
        policy_claim: name("policy_claim")?,
        models: o
            .opt_strings("models")?
            .map(|ps| ps.into_iter().map(ModelPattern).collect()),
        admin_claim,
        admin_value,
    }))
}

/// How often a budget starts afresh (calendar boundaries in UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetPeriod {
    Day,
    Month,
    /// Never: the budget is for the key's whole life.
    Total,
}

impl BudgetPeriod {
    /// The name used in keys.json.
    pub fn name(self) -> &'static str {
        match self {
            BudgetPeriod::Day => "day",
            BudgetPeriod::Month => "month",
            BudgetPeriod::Total => "total",
        }
    }
}

/// A key's spending cap: `{"usd": "50.00", "period": "day" | "month" | "total"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    /// The cap in nano-USD (1e-9 USD), exact.
    pub nanos: i64,
    pub period: BudgetPeriod,
}

/// The largest budget accepted (USD): amounts stay exact integers of nano-USD
/// in Redis' Lua numbers (doubles, exact below 2^53).
pub const MAX_BUDGET_USD: i64 = 9_000_000;

/// Parses a non-negative decimal USD amount (`"50"`, `"0.25"`, at most nine
/// fractional digits) into nano-USD.
pub fn parse_usd_nanos(s: &str) -> Result<i64, String> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |p: &str| p.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || !digits(int) || !digits(frac) || (s.contains('.') && frac.is_empty()) {
        return Err(format!("{s:?} is not a decimal amount such as \"50.00\""));
    }
    if frac.len() > 9 {
        return Err(format!(
            "{s:?} has more than nine decimal places (the smallest unit is 0.000000001 USD)"
        ));
    }
    let whole: i64 = int
        .parse()
        .ok()
        .filter(|w| *w <= MAX_BUDGET_USD)
        .ok_or_else(|| format!("{s:?} is above the largest budget, {MAX_BUDGET_USD} USD"))?;
    let f = frac
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(9)
        .fold(0i64, |acc, b| acc * 10 + i64::from(b - b'0'));
    Ok(whole * 1_000_000_000 + f)
}

fn opt_rpm(o: &Obj<'_>) -> Result<Option<u32>, ConfigError> {
    match o.opt_u64("rpm")? {
        Some(0) => Err(o.err("rpm", "must be positive")),
        Some(n) => Ok(Some(
            u32::try_from(n).map_err(|_| o.err("rpm", "too large"))?,
        )),
        None => Ok(None),
    }
}

fn opt_tpm(o: &Obj<'_>) -> Result<Option<u64>, ConfigError> {
    match o.opt_u64("tpm")? {
        Some(0) => Err(o.err("tpm", "must be positive")),
        Some(n) if n > MAX_TPM => Err(o.err("tpm", format!("too large (at most {MAX_TPM})"))),
        other => Ok(other),
    }
}

fn opt_budget(o: &Obj<'_>) -> Result<Option<Budget>, ConfigError> {
    let Some(b) = o.opt_obj("budget")? else {
        return Ok(None);
    };
    b.only(&["usd", "period"])?;
    let usd = match b.map.get("usd") {
        Some(serde_json::Value::String(s)) => s.as_str(),
        Some(serde_json::Value::Number(_)) => {
            return Err(b.err(
                "usd",
                "expected a decimal string such as \"50.00\" (a JSON number would lose cents)",
            ))
        }
        _ => b.str("usd")?,
    };
    let nanos = parse_usd_nanos(usd).map_err(|e| b.err("usd", e))?;
    if nanos == 0 {
        return Err(b.err("usd", "must be positive"));
    }
    let period = match b.str("period")? {
        "day" => BudgetPeriod::Day,
        "month" => BudgetPeriod::Month,
        "total" => BudgetPeriod::Total,
        other => {
            return Err(b.err(
                "period",
                format!("{other:?} is not a budget period: use day, month or total"),
            ))
        }
    };
    Ok(Some(Budget { nanos, period }))
}

/// The validated set of keys.
#[derive(Debug, Clone, Default)]
pub struct KeyStore {
    keys: Vec<ApiKey>,
    /// Each secret's digest (a rotated key's previous one too, with the
    /// second it stops being accepted) to its key's index in `keys`.
    by_digest: HashMap<[u8; 32], (usize, Option<i64>)>,
    /// Indices into `keys`, in the order of their ids.
    sorted: Vec<usize>,
    /// The file's teams first, then the store's.
    teams: Vec<Arc<Team>>,
    /// How JWT claims map to principals (`jwt`); `None`: the file has no `jwt` block.
    jwt: Option<JwtMapping>,
    /// How many of `teams` come from the file.
    file_teams: usize,
    /// The keys given in plain (`key`), for the secret scrubber only.
    plain: Plaintext,
}

/// A key as kept in the key store: the key (its team left out) and its team's id.
#[derive(Debug, Clone)]
pub struct StoredKey {
    pub key: ApiKey,
    pub team: Option<String>,
}

/// The keys and teams made through the API, by id: what [`KeyStore::merged`]
/// adds to the file's. Entries are shared, so a copy is cheap to make.
#[derive(Debug, Clone, Default)]
pub struct StoredKeys {
    pub teams: BTreeMap<String, Arc<Team>>,
    pub keys: BTreeMap<String, Arc<StoredKey>>,
}

/// A stored key or team that [`KeyStore::merged`] left out, and why: the
/// keys file and the store disagree (an id in both, a secret in both, a
/// stored key's team in neither).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The id of the stored key or team left out.
    pub id: String,
    pub reason: String,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.id, self.reason)
    }
}

/// The fields of a key in the keys file.
const FILE_KEY_FIELDS: &[&str] = &[
    "id", "key", "sha256", "models", "rpm", "tpm", "budget", "policy", "team",
];
/// The fields of a key's record in the key store (never its secret).
pub const STORED_KEY_FIELDS: &[&str] = &[
    "id",
    "sha256",
    "previous",
    "models",
    "rpm",
    "tpm",
    "budget",
    "policy",
    "team",
    "expires_at",
    "revoked_at",
    "created_at",
    "metadata",
];
/// The fields of a team, in the file and in the store.
const TEAM_FIELDS: &[&str] = &["id", "rpm", "tpm", "budget", "created_at"];

fn parse_team(o: &Obj<'_>) -> Result<Team, ConfigError> {
    Ok(Team {
        id: o.str("id")?.to_string(),
        rpm: opt_rpm(o)?,
        tpm: opt_tpm(o)?,
        budget: opt_budget(o)?,
    })
}

/// A key's fields common to the file and the store; the team's id is returned, not resolved.
fn parse_key<'a>(
    o: &Obj<'a>,
    digest: [u8; 32],
    source: Source,
) -> Result<(ApiKey, Option<&'a str>), ConfigError> {
    let id = o.str("id")?;
    if id.starts_with("jwt:") {
        return Err(o.err(
            "id",
            format!("{id:?}: ids starting with \"jwt:\" are reserved for JWT callers"),
        ));
    }
    let key = ApiKey {
        id: id.to_string(),
        digest,
        previous: None,
        source,
        expires_at: None,
        revoked_at: None,
        created_at: None,
        metadata: None,
        models: o
            .opt_strings("models")?
            .map(|ps| ps.into_iter().map(ModelPattern).collect()),
        rpm: opt_rpm(o)?,
        tpm: opt_tpm(o)?,
        budget: opt_budget(o)?,
        policy: opt_policy(o)?,
        team: None,
    };
    Ok((key, o.opt_str("team")?))
}

/// An RFC 3339 instant as unix seconds.
fn opt_instant(o: &Obj<'_>, key: &str) -> Result<Option<i64>, ConfigError> {
    match o.opt_str(key)? {
        None => Ok(None),
        Some(s) => match parse_time(s) {
            Some(Parsed::Millis(ms)) => Ok(Some(ms.div_euclid(1000))),
            _ => Err(o.err(
                key,
                format!("{s:?} is not an RFC 3339 instant such as \"2026-12-31T00:00:00Z\""),
            )),
        },
    }
}

fn digest_field(o: &Obj<'_>, key: &str) -> Result<[u8; 32], ConfigError> {
    hex32(&o.str(key)?.to_ascii_lowercase())
        .ok_or_else(|| o.err(key, "expected 64 hexadecimal digits"))
}

/// A key's record in the key store (docs/keys.md), validated; `file` names
/// where it came from in errors (`$.rpm`: the field at fault).
pub fn stored_key(file: &str, v: &Value) -> Result<StoredKey, ConfigError> {
    let o = Obj::new(file, "$".into(), v)?;
    o.only(STORED_KEY_FIELDS)?;
    let (mut key, team) = parse_key(&o, digest_field(&o, "sha256")?, Source::Api)?;
    if let Some(p) = o.opt_obj("previous")? {
        p.only(&["sha256", "until"])?;
        let until =
            opt_instant(&p, "until")?.ok_or_else(|| p.err("until", "missing required field"))?;
        key.previous = Some((digest_field(&p, "sha256")?, until));
    }
    key.expires_at = opt_instant(&o, "expires_at")?;
    key.revoked_at = opt_instant(&o, "revoked_at")?;
    key.created_at = opt_instant(&o, "created_at")?;
    key.metadata = match o.map.get("metadata") {
        None | Some(Value::Null) => None,
        Some(m @ Value::Object(_)) => Some(Arc::new(m.clone())),
        Some(_) => return Err(o.err("metadata", "expected an object")),
    };
    Ok(StoredKey {
        key,
        team: team.map(str::to_string),
    })
}

/// A team's record in the key store, validated.
pub fn stored_team(file: &str, v: &Value) -> Result<Team, ConfigError> {
    let o = Obj::new(file, "$".into(), v)?;
    o.only(TEAM_FIELDS)?;
    opt_instant(&o, "created_at")?;
    parse_team(&o)
}

/// Client keys in plain; `Debug` shows only how many.
#[derive(Clone, Default)]
struct Plaintext(Vec<String>);

impl std::fmt::Debug for Plaintext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Plaintext({} keys)", self.0.len())
    }
}

/// The largest `tpm` accepted (token sums stay exact in Redis' Lua numbers).
pub const MAX_TPM: u64 = 1 << 50;

fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

fn hex32(s: &str) -> Option<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in b.chunks_exact(2).enumerate() {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        out[i] = u8::try_from(hi * 16 + lo).ok()?;
    }
    Some(out)
}

impl KeyStore {
    /// Loads and validates a keys file.
    pub fn load(path: &str) -> Result<KeyStore, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new(path, "$", format!("cannot read file: {e}")))?;
        KeyStore::from_str(path, &text)
    }

    /// Validates keys text.
    pub fn from_str(file: &str, text: &str) -> Result<KeyStore, ConfigError> {
        let doc = parse(file, text)?;
        let root = Obj::new(file, "$".into(), &doc)?;
        root.only(&["keys", "teams", "jwt"])?;
        let mut teams: Vec<Arc<Team>> = Vec::new();
        for (path, v) in root.opt_array("teams")?.unwrap_or_default() {
            let o = Obj::new(file, path, v)?;
            o.only(&TEAM_FIELDS[..4])?;
            let team = parse_team(&o)?;
            if teams.iter().any(|t| t.id == team.id) {
                return Err(o.err("id", format!("duplicate team id {:?}", team.id)));
            }
            teams.push(Arc::new(team));
        }
        let mut keys: Vec<ApiKey> = Vec::new();
        let mut plain = Vec::new();
        let mut ids = std::collections::HashSet::new();
        for (path, v) in root.array("keys")? {
            let o = Obj::new(file, path, v)?;
            o.only(FILE_KEY_FIELDS)?;
            let digest = match (o.opt_str("key")?, o.opt_str("sha256")?) {
                (Some(k), None) if !k.is_empty() => {
                    plain.push(k.to_string());
                    sha256(k.as_bytes())
                }
                (None, Some(_)) => digest_field(&o, "sha256")?,
                (Some(_), Some(_)) => {
                    return Err(o.err("key", "give either key or sha256, not both"))
                }
                _ => return Err(o.err("key", "missing: give key or sha256")),
            };
            let (mut key, team) = parse_key(&o, digest, Source::File)?;
            if !ids.insert(key.id.clone()) {
                return Err(o.err("id", format!("duplicate key id {:?}", key.id)));
            }
            if let Some(t) = team {
                key.team = Some(
                    teams
                        .iter()
                        .find(|x| x.id == t)
                        .cloned()
                        .ok_or_else(|| o.err("team", format!("no team {t:?} in $.teams")))?,
                );
            }
            keys.push(key);
        }
        let file_teams = teams.len();
        let mut store = KeyStore {
            keys,
            teams,
            jwt: opt_jwt(&root)?,
            file_teams,
            plain: Plaintext(plain),
            ..KeyStore::default()
        };
        store.index();
        Ok(store)
    }

    /// Builds the lookups over `keys`: by digest (a digest two keys share
    /// stays with the first) and by id.
    fn index(&mut self) {
        self.by_digest = HashMap::with_capacity(self.keys.len());
        for (i, k) in self.keys.iter().enumerate() {
            self.by_digest.entry(k.digest).or_insert((i, None));
            if let Some((d, until)) = k.previous {
                self.by_digest.entry(d).or_insert((i, Some(until)));
            }
        }
        self.sorted = (0..self.keys.len()).collect();
        let keys = &self.keys;
        self.sorted
            .sort_unstable_by(|a, b| keys[*a].id.cmp(&keys[*b].id));
    }

    /// The file's keys and teams (`self`) with the store's: a stored key or
    /// team whose id the file also defines is left out (the file's stays,
    /// docs/configuration.md "Keys from the file and from the API"), as is a
    /// stored key whose secret a file key has or whose team is in neither.
    /// What was left out is returned beside the merged set.
    pub fn merged(&self, stored: &StoredKeys) -> (KeyStore, Vec<Conflict>) {
        let mut out = KeyStore {
            keys: self.keys.clone(),
            teams: self.teams.clone(),
            file_teams: self.file_teams,
            jwt: self.jwt.clone(),
            plain: self.plain.clone(),
            ..KeyStore::default()
        };
        let mut conflicts = Vec::new();
        for (id, t) in &stored.teams {
            if out.teams[..self.file_teams].iter().any(|f| &f.id == id) {
                conflicts.push(Conflict {
                    id: id.clone(),
                    reason: "the keys file has a team with this id".into(),
                });
            } else {
                out.teams.push(t.clone());
            }
        }
        let teams: HashMap<&str, &Arc<Team>> =
            out.teams.iter().map(|t| (t.id.as_str(), t)).collect();
        let mut added = Vec::with_capacity(stored.keys.len());
        for (id, s) in &stored.keys {
            let left_out = |reason: String| Conflict {
                id: id.clone(),
                reason,
            };
            if self.by_id(id).is_some() {
                conflicts.push(left_out("the keys file has a key with this id".into()));
                continue;
            }
            if self.by_digest.contains_key(&s.key.digest) {
                conflicts.push(left_out("its secret is a file key's".into()));
                continue;
            }
            let mut key = s.key.clone();
            if let Some(t) = &s.team {
                match teams.get(t.as_str()) {
                    Some(team) => key.team = Some(Arc::clone(team)),
                    None => {
                        conflicts.push(left_out(format!(
                            "its team {t:?} is in neither the keys file nor the store"
                        )));
                        continue;
                    }
                }
            }
            added.push(key);
        }
        drop(teams);
        out.keys.extend(added);
        out.index();
        (out, conflicts)
    }

    /// The key whose secret is `presented`: one hash, one map lookup. A
    /// rotated key's previous secret is found until its grace period ends.
    /// The key may be expired or revoked: see [`ApiKey::status`].
    pub fn find(&self, presented: &str) -> Option<&ApiKey> {
        let &(i, until) = self.by_digest.get(&sha256(presented.as_bytes()))?;
        if until.is_some_and(|u| now_secs() >= u) {
            return None;
        }
        self.keys.get(i)
    }

    /// The key named `id` (its `id`, not its secret): admin lookups.
    pub fn by_id(&self, id: &str) -> Option<&ApiKey> {
        let i = self
            .sorted
            .binary_search_by(|i| self.keys[*i].id.as_str().cmp(id))
            .ok()?;
        self.keys.get(self.sorted[i])
    }

    /// The keys in the order of their ids, from the first id after `after`.
    pub fn keys_after<'a>(&'a self, after: Option<&str>) -> impl Iterator<Item = &'a ApiKey> {
        let start = after.map_or(0, |a| {
            self.sorted
                .partition_point(|i| self.keys[*i].id.as_str() <= a)
        });
        self.sorted[start..].iter().map(|i| &self.keys[*i])
    }

    /// Where the team `id` is defined.
    pub fn team_source(&self, id: &str) -> Option<Source> {
        let i = self.teams.iter().position(|t| t.id == id)?;
        Some(if i < self.file_teams {
            Source::File
        } else {
            Source::Api
        })
    }

    /// The team named `id`.
    pub fn team(&self, id: &str) -> Option<&Arc<Team>> {
        self.teams.iter().find(|t| t.id == id)
    }

    /// How JWT claims map to principals, when the file has a `jwt` block.
    pub fn jwt(&self) -> Option<&JwtMapping> {
        self.jwt.as_ref()
    }

    /// Every team, in the file's order.
    /// Every team: the file's in its order, then the store's by id.
    pub fn teams(&self) -> &[Arc<Team>] {
        &self.teams
    }

    /// The keys the file gives in plain (not its `sha256` entries): what the
    /// secret scrubber looks for.
    pub fn plaintext_keys(&self) -> impl Iterator<Item = &str> {
        self.plain.0.iter().map(String::as_str)
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether there are no keys.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_hashed_keys() {
        let h = "a".repeat(64);
        let ks = KeyStore::from_str(
            "k.json",
            &format!(
                r#"{{"keys":[{{"id":"dev","key":"sk-1"}},{{"id":"prod","sha256":"{h}","models":["openai/*"],"rpm":5}}]}}"#
            ),
        )
        .unwrap();
        assert_eq!(ks.find("sk-1").unwrap().id, "dev");
        assert!(ks.find("sk-2").is_none());
        let hashed = KeyStore::from_str(
            "k.json",
            &format!(
                r#"{{"keys":[{{"id":"x","sha256":"{}"}}]}}"#,
                "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
            ),
        )
        .unwrap();
        assert_eq!(hashed.find("test").unwrap().id, "x");
    }

    #[test]
    fn patterns() {
        let p = ModelPattern("openai/*".into());
        assert!(p.matches("openai/gpt-5"));
        assert!(!p.matches("anthropic/claude"));
        assert!(ModelPattern("*".into()).matches("a/b"));
        assert!(ModelPattern("*/gpt-*-mini".into()).matches("openai/gpt-5-mini"));
        assert!(!ModelPattern("anthropic/claude-sonnet-4.7".into())
            .matches("anthropic/claude-sonnet-4.70"));
    }

    #[test]
    fn validation_errors() {
        let e = KeyStore::from_str("k.json", r#"{"keys":[{"id":"a"}]}"#).unwrap_err();
        assert_eq!(e.path, "$.keys[0].key");
        let e = KeyStore::from_str("k.json", r#"{"keys":[{"id":"a","sha256":"zz"}]}"#).unwrap_err();
        assert_eq!(e.path, "$.keys[0].sha256");
        let e = KeyStore::from_str(
            "k.json",
            r#"{"keys":[{"id":"a","key":"x"},{"id":"a","key":"y"}]}"#,
        )
        .unwrap_err();
        assert_eq!(e.path, "$.keys[1].id");
        let e = KeyStore::from_str(
            "k.json",
            r#"{"keys":[{"id":"a","key":"x","policy":"loose"}]}"#,
        )
        .unwrap_err();
        assert_eq!(e.path, "$.keys[0].policy");
    }

    #[test]
    fn tpm_and_budget() {
        let ks = KeyStore::from_str(
            "k.json",
            r#"{"keys":[{"id":"a","key":"x","tpm":1000,"budget":{"usd":"50.00","period":"day"}},
                        {"id":"b","key":"y","budget":{"usd":"0.000000001","period":"total"}}]}"#,
        )
        .unwrap();
        let a = ks.find("x").unwrap();
        assert_eq!(a.tpm, Some(1000));
        assert_eq!(
            a.budget,
            Some(Budget {
                nanos: 50_000_000_000,
                period: BudgetPeriod::Day
            })
        );
        assert_eq!(ks.find("y").unwrap().budget.as_ref().unwrap().nanos, 1);
        for (bad, path) in [
            (r#""tpm":0"#, "$.keys[0].tpm"),
            (r#""tpm":"5""#, "$.keys[0].tpm"),
            (
                r#""budget":{"usd":"1","period":"week"}"#,
                "$.keys[0].budget.period",
            ),
            (r#""budget":{"usd":"1"}"#, "$.keys[0].budget.period"),
            (
                r#""budget":{"usd":5,"period":"day"}"#,
                "$.keys[0].budget.usd",
            ),
            (
                r#""budget":{"usd":"1.5e3","period":"day"}"#,
                "$.keys[0].budget.usd",
            ),
            (
                r#""budget":{"usd":"-1","period":"day"}"#,
                "$.keys[0].budget.usd",
            ),
            (
                r#""budget":{"usd":"0.00","period":"day"}"#,
                "$.keys[0].budget.usd",
            ),
            (
                r#""budget":{"usd":"0.0000000001","period":"day"}"#,
                "$.keys[0].budget.usd",
            ),
            (
                r#""budget":{"usd":"9000001","period":"day"}"#,
                "$.keys[0].budget.usd",
            ),
            (
                r#""budget":{"usd":"1","period":"day","cap":1}"#,
                "$.keys[0].budget.cap",
            ),
            (r#""budget":"50""#, "$.keys[0].budget"),
        ] {
            let text = format!(r#"{{"keys":[{{"id":"a","key":"x",{bad}}}]}}"#);
            let e = KeyStore::from_str("k.json", &text).unwrap_err();
            assert_eq!(e.path, path, "{bad}: {e}");
        }
    }

    #[test]
    fn usd_amounts_parse_exactly() {
        assert_eq!(parse_usd_nanos("50"), Ok(50_000_000_000));
        assert_eq!(parse_usd_nanos("0.08"), Ok(80_000_000));
        assert_eq!(parse_usd_nanos("1.000000001"), Ok(1_000_000_001));
        assert!(parse_usd_nanos("1.").is_err());
        assert!(parse_usd_nanos(".5").is_err());
        assert!(parse_usd_nanos("").is_err());
    }

    #[test]
    fn teams() {
        let ks = KeyStore::from_str(
            "k.json",
            r#"{"teams":[{"id":"ml","rpm":100,"tpm":5000,"budget":{"usd":"10","period":"month"}},{"id":"web"}],
                "keys":[{"id":"a","key":"x","team":"ml"},{"id":"b","key":"y"}]}"#,
        )
        .unwrap();
        let t = ks.find("x").unwrap().team.as_ref().unwrap();
        assert_eq!((t.id.as_str(), t.rpm, t.tpm), ("ml", Some(100), Some(5000)));
        assert_eq!(t.budget.as_ref().unwrap().period, BudgetPeriod::Month);
        assert!(ks.find("y").unwrap().team.is_none());
        assert_eq!(ks.teams().len(), 2);
        assert!(ks.team("web").unwrap().rpm.is_none());
        for (bad, path) in [
            (
                r#""teams":[{"id":"t"}],"keys":[{"id":"a","key":"x","team":"u"}]"#,
                "$.keys[0].team",
            ),
            (
                r#""teams":[{"id":"t"},{"id":"t"}],"keys":[]"#,
                "$.teams[1].id",
            ),
            (
                r#""teams":[{"id":"t","rpm":0}],"keys":[]"#,
                "$.teams[0].rpm",
            ),
            (
                r#""teams":[{"id":"t","models":[]}],"keys":[]"#,
                "$.teams[0].models",
            ),
        ] {
            let e = KeyStore::from_str("k.json", &format!("{{{bad}}}")).unwrap_err();
            assert_eq!(e.path, path, "{bad}: {e}");
        }
    }

    #[test]
    fn jwt_mapping() {
        let ks = KeyStore::from_str(
            "k.json",
            r#"{"teams":[{"id":"ml"}],"keys":[],
                "jwt":{"team_claim":"team","policy_claim":"sb_policy","models":["openai/*"],
                       "admin_claim":"groups","admin_value":"gateway-admins"}}"#,
        )
        .unwrap();
        let j = ks.jwt().unwrap();
        assert_eq!(j.team_claim, "team");
        assert_eq!(j.policy_claim.as_deref(), Some("sb_policy"));
        assert_eq!(
            (j.admin_claim.as_deref(), j.admin_value.as_deref()),
            (Some("groups"), Some("gateway-admins"))
        );
        assert!(j.models.as_ref().unwrap()[0].matches("openai/gpt-5"));
        assert!(KeyStore::from_str("k.json", r#"{"keys":[]}"#)
            .unwrap()
            .jwt()
            .is_none());
        for (bad, path) in [
            (r#"{}"#, "$.jwt.team_claim"),
            (r#"{"team_claim":""}"#, "$.jwt.team_claim"),
            (
                r#"{"team_claim":"t","admin_claim":"g"}"#,
                "$.jwt.admin_value",
            ),
            (
                r#"{"team_claim":"t","admin_value":"a"}"#,
                "$.jwt.admin_claim",
            ),
            (r#"{"team_claim":"t","audience":"a"}"#, "$.jwt.audience"),
            (
                r#"{"team_claim":"t"},"keys":[{"id":"jwt:alice","key":"k"}]"#,
                "$.keys[0].id",
            ),
            (r#""team""#, "$.jwt"),
        ] {
            let text = format!(r#"{{"jwt":{bad}}}"#);
            let text = if text.contains("\"keys\"") {
                text
            } else {
                text.replace("{\"jwt\"", "{\"keys\":[],\"jwt\"")
            };
            let e = KeyStore::from_str("k.json", &text).unwrap_err();
            assert_eq!(e.path, path, "{bad}: {e}");
        }
    }

    #[test]
    fn per_key_policy() {
        let ks = KeyStore::from_str(
            "k.json",
            r#"{"keys":[{"id":"a","key":"x","policy":"strict"},{"id":"b","key":"y"}]}"#,
        )
        .unwrap();
        assert_eq!(ks.find("x").unwrap().policy, Some(Policy::Strict));
        assert_eq!(ks.find("y").unwrap().policy, None);
    }

    fn stored(records: &[serde_json::Value], teams: &[serde_json::Value]) -> StoredKeys {
        let mut out = StoredKeys::default();
        for r in records {
            let k = stored_key("store", r).unwrap();
            out.keys.insert(k.key.id.clone(), Arc::new(k));
        }
        for t in teams {
            let t = stored_team("store", t).unwrap();
            out.teams.insert(t.id.clone(), Arc::new(t));
        }
        out
    }

    fn hex_of(secret: &str) -> String {
        crate::util::hex::encode(&sha256(secret.as_bytes()))
    }

    #[test]
    fn stored_keys_merge_with_the_files() {
        use serde_json::json;
        let file = KeyStore::from_str(
            "k.json",
            r#"{"teams":[{"id":"ml"}],"keys":[{"id":"dev","key":"sk-dev","team":"ml"}]}"#,
        )
        .unwrap();
        let s = stored(
            &[
                json!({"id": "api1", "sha256": hex_of("sk-api1"), "team": "web", "metadata": {"o": 1}}),
                json!({"id": "api2", "sha256": hex_of("sk-api2"), "team": "ml",
                       "revoked_at": "2026-01-01T00:00:00Z"}),
                json!({"id": "dev", "sha256": hex_of("sk-other")}),
                json!({"id": "twin", "sha256": hex_of("sk-dev")}),
                json!({"id": "lost", "sha256": hex_of("sk-lost"), "team": "gone"}),
            ],
            &[json!({"id": "web", "rpm": 5}), json!({"id": "ml"})],
        );
        let (ks, conflicts) = file.merged(&s);
        let mut ids: Vec<&str> = conflicts.iter().map(|c| c.id.as_str()).collect();
        ids.sort_unstable();
        assert_eq!(ids, ["dev", "lost", "ml", "twin"]);
        assert_eq!(ks.len(), 3);
        assert_eq!(ks.find("sk-dev").unwrap().source, Source::File);
        let a = ks.find("sk-api1").unwrap();
        assert_eq!((a.id.as_str(), a.source), ("api1", Source::Api));
        assert_eq!(a.team.as_ref().unwrap().rpm, Some(5));
        assert_eq!(a.metadata.as_deref(), Some(&json!({"o": 1})));
        assert_eq!(ks.find("sk-api2").unwrap().status(0), Status::Revoked);
        assert!(ks.find("sk-other").is_none() && ks.find("sk-lost").is_none());
        assert_eq!(ks.team_source("web"), Some(Source::Api));
        assert_eq!(ks.team_source("ml"), Some(Source::File));
        let order: Vec<&str> = ks.keys_after(None).map(|k| k.id.as_str()).collect();
        assert_eq!(order, ["api1", "api2", "dev"]);
        let after: Vec<&str> = ks.keys_after(Some("api1")).map(|k| k.id.as_str()).collect();
        assert_eq!(after, ["api2", "dev"]);
        assert_eq!(ks.by_id("api2").unwrap().id, "api2");
        // The scrubber still knows the file's plain keys.
        assert_eq!(ks.plaintext_keys().collect::<Vec<_>>(), ["sk-dev"]);
    }

    #[test]
    fn expiry_and_a_rotations_grace() {
        use serde_json::json;
        let now = now_secs();
        let until = crate::util::rfc3339::Rfc3339::seconds(now + 3600).to_string();
        let past = crate::util::rfc3339::Rfc3339::seconds(now - 1).to_string();
        let s = stored(
            &[
                json!({"id": "r", "sha256": hex_of("new"), "previous": {"sha256": hex_of("old"), "until": until}}),
                json!({"id": "g", "sha256": hex_of("new2"), "previous": {"sha256": hex_of("old2"), "until": past}}),
                json!({"id": "e", "sha256": hex_of("exp"), "expires_at": past}),
            ],
            &[],
        );
        let (ks, conflicts) = KeyStore::default().merged(&s);
        assert!(conflicts.is_empty());
        assert_eq!(ks.find("new").unwrap().id, "r");
        assert_eq!(ks.find("old").unwrap().id, "r");
        assert_eq!(ks.find("new2").unwrap().id, "g");
        assert!(ks.find("old2").is_none(), "past its grace");
        assert_eq!(ks.find("exp").unwrap().status(now), Status::Expired);
        assert_eq!(ks.find("new").unwrap().status(now), Status::Active);
        for (bad, path) in [
            (json!({"id": "x"}), "$.sha256"),
            (json!({"id": "x", "sha256": "zz"}), "$.sha256"),
            (
                json!({"id": "x", "sha256": hex_of("a"), "expires_at": "tomorrow"}),
                "$.expires_at",
            ),
            (
                json!({"id": "x", "sha256": hex_of("a"), "metadata": [1]}),
                "$.metadata",
            ),
            (
                json!({"id": "x", "sha256": hex_of("a"), "key": "plain"}),
                "$.key",
            ),
            (json!({"id": "x", "sha256": hex_of("a"), "rpm": 0}), "$.rpm"),
        ] {
            assert_eq!(stored_key("s", &bad).unwrap_err().path, path, "{bad}");
        }
    }

    #[test]
    fn a_hundred_thousand_keys_are_found_by_one_lookup() {
        use serde_json::json;
        let mut s = StoredKeys::default();
        for i in 0..100_000 {
            let k = stored_key(
                "s",
                &json!({"id": format!("k{i}"), "sha256": hex_of(&format!("s{i}"))}),
            )
            .unwrap();
            s.keys.insert(k.key.id.clone(), Arc::new(k));
        }
        let (ks, _) = KeyStore::default().merged(&s);
        assert_eq!(ks.len(), 100_000);
        assert_eq!(ks.find("s99999").unwrap().id, "k99999");
        assert_eq!(ks.by_id("k5").unwrap().id, "k5");
        assert!(ks.find("s100000").is_none());
    }
}
