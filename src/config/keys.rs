//! API keys: plain or SHA-256 secrets, per-key model patterns and rate limits;
//! teams (`teams`), each with its own rpm, tpm and budget, that a key may belong to;
//! how a verified JWT maps to a team and a policy (`jwt`)
//! (docs/configuration.md "Keys", "Teams", "JWT clients (OIDC)").
//!
//! Every secret is kept only as its SHA-256 digest; a presented key is hashed
//! once and compared against every stored digest in constant time.

use super::catalog::{opt_policy, Policy};
use super::json::{parse, Obj};
use super::ConfigError;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// A `provider/model_id` pattern where `*` matches any run of characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelPattern(String);

impl ModelPattern {
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

/// One client key.
#[derive(Debug, Clone)]
pub struct ApiKey {
    /// The key's name, safe to log.
    pub id: String,
    digest: [u8; 32],
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
    /// [`KeyStore::find`], which reads only the file's keys.
    pub fn principal(
        id: String,
        models: Option<Vec<ModelPattern>>,
        policy: Option<Policy>,
        team: Option<Arc<Team>>,
    ) -> ApiKey {
        ApiKey {
            id,
            digest: [0; 32],
            models,
            rpm: None,
            tpm: None,
            budget: None,
            policy,
            team,
        }
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
    teams: Vec<Arc<Team>>,
    /// How JWT claims map to principals (`jwt`); `None`: the file has no `jwt` block.
    jwt: Option<JwtMapping>,
    /// The keys given in plain (`key`), for the secret scrubber only.
    plain: Plaintext,
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
            o.only(&["id", "rpm", "tpm", "budget"])?;
            let id = o.str("id")?.to_string();
            if teams.iter().any(|t| t.id == id) {
                return Err(o.err("id", format!("duplicate team id {id:?}")));
            }
            teams.push(Arc::new(Team {
                id,
                rpm: opt_rpm(&o)?,
                tpm: opt_tpm(&o)?,
                budget: opt_budget(&o)?,
            }));
        }
        let mut keys: Vec<ApiKey> = Vec::new();
        let mut plain = Vec::new();
        for (path, v) in root.array("keys")? {
            let o = Obj::new(file, path, v)?;
            o.only(&[
                "id", "key", "sha256", "models", "rpm", "tpm", "budget", "policy", "team",
            ])?;
            let id = o.str("id")?.to_string();
            if id.starts_with("jwt:") {
                return Err(o.err(
                    "id",
                    format!("{id:?}: ids starting with \"jwt:\" are reserved for JWT callers"),
                ));
            }
            if keys.iter().any(|k| k.id == id) {
                return Err(o.err("id", format!("duplicate key id {id:?}")));
            }
            let digest = match (o.opt_str("key")?, o.opt_str("sha256")?) {
                (Some(k), None) if !k.is_empty() => {
                    plain.push(k.to_string());
                    sha256(k.as_bytes())
                }
                (None, Some(h)) => hex32(&h.to_ascii_lowercase())
                    .ok_or_else(|| o.err("sha256", "expected 64 hexadecimal digits"))?,
                (Some(_), Some(_)) => {
                    return Err(o.err("key", "give either key or sha256, not both"))
                }
                _ => return Err(o.err("key", "missing: give key or sha256")),
            };
            let models = o
                .opt_strings("models")?
                .map(|ps| ps.into_iter().map(ModelPattern).collect());
            let rpm = opt_rpm(&o)?;
            let tpm = opt_tpm(&o)?;
            let budget = opt_budget(&o)?;
            let policy = opt_policy(&o)?;
            let team = match o.opt_str("team")? {
                None => None,
                Some(t) => Some(
                    teams
                        .iter()
                        .find(|x| x.id == t)
                        .cloned()
                        .ok_or_else(|| o.err("team", format!("no team {t:?} in $.teams")))?,
                ),
            };
            keys.push(ApiKey {
                id,
                digest,
                models,
                rpm,
                tpm,
                budget,
                policy,
                team,
            });
        }
        Ok(KeyStore {
            keys,
            teams,
            jwt: opt_jwt(&root)?,
            plain: Plaintext(plain),
        })
    }

    /// The key whose secret is `presented`, compared in constant time against all keys.
    pub fn find(&self, presented: &str) -> Option<&ApiKey> {
        let d = sha256(presented.as_bytes());
        let mut found = None;
        for k in &self.keys {
            if bool::from(k.digest.ct_eq(&d)) && found.is_none() {
                found = Some(k);
            }
        }
        found
    }

    /// The key named `id` (its `id`, not its secret): admin lookups.
    pub fn by_id(&self, id: &str) -> Option<&ApiKey> {
        self.keys.iter().find(|k| k.id == id)
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
}
