//! The catalog: providers with their upstreams, and models with their metadata.
//!
//! Validated at load (docs/configuration.md "Catalog"); afterwards read-only and shared through the
//! runtime snapshot. Lookups by model id, by any name a request may use (id,
//! `provider/id`, alias, `provider/alias`) and by provider token are O(1).

use super::cloud::{self, Auth, Cloud};
use super::json::{parse, Obj};
use super::pricing::Pricing;
use super::url::BaseUrl;
use super::ConfigError;
use crate::family::Family;
use std::collections::HashMap;

/// One way of reaching a provider: a wire protocol at a base URL with a key.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// A name unique within the provider, for metrics, logs and the admin
    /// view: the catalog's `id`, else `protocol@host[:port]` (with `#n` from
    /// the second upstream of the same protocol and host on).
    pub id: String,
    /// The wire protocol spoken there (a cloud's too: `azure` speaks OpenAI chat).
    pub protocol: Family,
    /// The catalog's `protocol` name (`openai`, `azure`, `vertex-anthropic`, …).
    pub protocol_name: &'static str,
    /// How a cloud addresses the call around the wire protocol (None: the
    /// protocol's own path under `base_url`).
    pub cloud: Option<Cloud>,
    /// Where the credential comes from (`api_key_env`, or a cloud's token source).
    pub auth: Auth,
    /// The share of the pool's traffic this upstream gets (default 1).
    pub weight: u32,
    pub base_url: String,
    pub url: BaseUrl,
    pub api_key_env: Option<String>,
    /// The key read from `api_key_env` at load time (`None` when unset).
    pub api_key: Option<String>,
}

impl Upstream {
    /// A `cohere` upstream: Cohere v2's `/rerank` only (docs/api.md "Rerank").
    pub fn rerank_only(&self) -> bool {
        self.protocol_name == cloud::COHERE
    }
}

/// A provider: its token, which client families accept it, its upstreams.
#[derive(Debug, Clone)]
pub struct Provider {
    pub id: String,
    pub families: Vec<Family>,
    pub upstreams: Vec<Upstream>,
    /// Deadlines for calls to this provider's upstreams (docs/resilience.md).
    pub timeouts: Timeouts,
    /// How many times a request may move on to another upstream (default 2).
    pub retries: u32,
    /// What happens to a stream the upstream cuts after the client got its
    /// first bytes (docs/resilience.md "Continuing a cut stream").
    pub continuation: Continuation,
    /// How the pool picks among its upstreams (docs/resilience.md "Session affinity").
    pub affinity: Affinity,
}

/// How a provider's pool picks an upstream (`affinity` in the catalog).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Affinity {
    /// A conversation stays on one upstream while it is healthy (weighted
    /// rendezvous hashing of its session key or stable prefix), so that the
    /// upstream's prompt cache is hit (the default).
    #[default]
    Session,
    /// Every request is split by weight (smooth weighted round-robin, the
    /// least loaded among equals), whatever its conversation.
    Off,
}

impl Affinity {
    /// Parses `session` or `off`.
    pub fn from_name(s: &str) -> Option<Affinity> {
        match s {
            "session" => Some(Affinity::Session),
            "off" => Some(Affinity::Off),
            _ => None,
        }
    }
}

/// A provider's answer to a stream cut mid-answer (`continuation` in the catalog).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Continuation {
    /// Continue the answer: with a prefill where the answering model takes
    /// one (`prefill`), else by asking again and passing on only what
    /// follows what the client has (the default).
    #[default]
    Auto,
    /// Continue by asking again only, never with a prefill.
    Restart,
    /// End the stream with the protocol's error event.
    Off,
}

impl Continuation {
    /// Parses `auto`, `restart` or `off`.
    pub fn from_name(s: &str) -> Option<Continuation> {
        match s {
            "auto" => Some(Continuation::Auto),
            "restart" => Some(Continuation::Restart),
            "off" => Some(Continuation::Off),
            _ => None,
        }
    }
}

/// How a model continues an assistant message that ends the conversation
/// (`prefill` in the catalog).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Prefill {
    /// It does not (the default): a continuation asks for the whole answer again.
    #[default]
    None,
    /// A last assistant turn is continued as it is (Anthropic, Gemini).
    Native,
    /// OpenAI chat upstreams: the last assistant message carries `"prefix": true` (DeepSeek, Mistral).
    Prefix,
    /// OpenAI chat upstreams: the last assistant message carries `"partial": true` (Qwen, Kimi).
    Partial,
}

impl Prefill {
    /// Parses `none`, `native`, `prefix` or `partial`.
    pub fn from_name(s: &str) -> Option<Prefill> {
        match s {
            "none" => Some(Prefill::None),
            "native" => Some(Prefill::Native),
            "prefix" => Some(Prefill::Prefix),
            "partial" => Some(Prefill::Partial),
            _ => None,
        }
    }

    /// The member an OpenAI chat upstream wants on the prefilled message.
    pub fn openai_member(self) -> Option<&'static str> {
        match self {
            Prefill::Prefix => Some("prefix"),
            Prefill::Partial => Some("partial"),
            Prefill::None | Prefill::Native => None,
        }
    }
}

/// A provider's optional deadlines (catalog milliseconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timeouts {
    /// TCP (and TLS) connect.
    pub connect: Option<std::time::Duration>,
    /// From sending the request to the first byte of the answer (for a
    /// stream: the first bytes carrying a token, past any preamble).
    pub first_token: Option<std::time::Duration>,
    /// The longest gap between two chunks of the answer.
    pub idle: Option<std::time::Duration>,
    /// The whole request, every attempt and the stream included.
    pub total: Option<std::time::Duration>,
}

/// The most retries a provider may configure.
pub const MAX_RETRIES: u64 = 10;
/// The largest upstream weight.
pub const MAX_WEIGHT: u64 = 1_000_000;

impl Provider {
    /// Whether `family` accepts this provider's token in path segments.
    pub fn accepts(&self, family: Family) -> bool {
        self.families.contains(&family)
    }
}

/// Feature flags rendered in Anthropic listings.
#[derive(Debug, Clone, Copy, Default)]
pub struct Features {
    pub vision: bool,
    pub tool_use: bool,
    pub streaming: bool,
}

/// Default sampling parameters rendered in Gemini listings.
#[derive(Debug, Clone, Copy, Default)]
pub struct Defaults {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<u64>,
}

/// One model of the catalog.
#[derive(Debug, Clone)]
pub struct Model {
    pub id: String,
    pub provider: String,
    /// `provider/id`, as OpenAI chat responses name it.
    pub qualified_id: String,
    pub upstream_model: String,
    pub display_name: String,
    pub description: String,
    pub created: u64,
    pub version: String,
    pub architecture: String,
    pub context_length: u64,
    pub max_output_tokens: u64,
    pub pricing: Pricing,
    pub supported_parameters: Vec<String>,
    pub supported_features: Features,
    pub supported_actions: Vec<String>,
    pub supported_generation_methods: Vec<String>,
    pub defaults: Defaults,
    pub protocols: Vec<Family>,
    /// `provider/model_id` of the models tried, in order, when every upstream
    /// of this model's provider failed or is cooling down.
    pub fallbacks: Vec<String>,
    /// Whether (and how) the model continues an assistant prefill.
    pub prefill: Prefill,
    /// Other names clients may call the model by (docs/configuration.md "Aliases").
    pub aliases: Vec<String>,
}

impl Model {
    /// Whether the model lists `param` in `supported_parameters`.
    pub fn supports(&self, param: &str) -> bool {
        self.supported_parameters.iter().any(|p| p == param)
    }

    /// Whether clients of `family` may call and see this model.
    pub fn speaks(&self, family: Family) -> bool {
        self.protocols.contains(&family)
    }
}

/// What to do with a request a model cannot take as it is (docs/api.md "Adapt or refuse").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Policy {
    /// Lower over-large output caps and drop unsupported optional knobs, reporting each change.
    #[default]
    Adapt,
    /// Refuse them with a 400 naming the parameter.
    Strict,
}

impl Policy {
    /// Parses `adapt` or `strict`.
    pub fn from_name(s: &str) -> Option<Policy> {
        match s {
            "adapt" => Some(Policy::Adapt),
            "strict" => Some(Policy::Strict),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Policy::Adapt => "adapt",
            Policy::Strict => "strict",
        }
    }
}

/// Reads an optional `policy` member of `o`.
pub(crate) fn opt_policy(o: &Obj<'_>) -> Result<Option<Policy>, ConfigError> {
    match o.opt_str("policy")? {
        None => Ok(None),
        Some(s) => Policy::from_name(s).map(Some).ok_or_else(|| {
            o.err(
                "policy",
                format!("unknown policy {s:?} (expected adapt or strict)"),
            )
        }),
    }
}

/// The validated catalog.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    /// The policy for requests a model cannot take as they are (keys may override it).
    pub policy: Policy,
    pub providers: Vec<Provider>,
    pub models: Vec<Model>,
    provider_index: HashMap<String, usize>,
    model_index: HashMap<String, usize>,
    /// Every name a request may call a model by: bare id, `provider/id`,
    /// alias, `provider/alias`; `true` for the provider forms.
    name_index: HashMap<String, (usize, bool)>,
}

const PROVIDER_FIELDS: &[&str] = &[
    "id",
    "families",
    "upstreams",
    "timeouts",
    "retries",
    "continuation",
    "affinity",
];
const UPSTREAM_FIELDS: &[&str] = &[
    "id",
    "protocol",
    "base_url",
    "api_key_env",
    "weight",
    "deployment",
    "api_version",
    "project",
    "location",
    "region",
    "auth",
];
const TIMEOUT_FIELDS: &[&str] = &["connect", "first_token", "idle", "total"];
const MODEL_FIELDS: &[&str] = &[
    "id",
    "provider",
    "upstream_model",
    "display_name",
    "description",
    "created",
    "version",
    "architecture",
    "context_length",
    "max_output_tokens",
    "pricing",
    "supported_parameters",
    "supported_features",
    "supported_actions",
    "supported_generation_methods",
    "defaults",
    "protocols",
    "fallbacks",
    "prefill",
    "aliases",
];

impl Catalog {
    /// Loads and validates a catalog file.
    pub fn load(path: &str) -> Result<Catalog, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new(path, "$", format!("cannot read file: {e}")))?;
        Catalog::from_str(path, &text, &|name| std::env::var(name).ok())
    }

    /// Validates catalog text; `env` resolves `api_key_env` names.
    pub fn from_str(
        file: &str,
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Catalog, ConfigError> {
        let doc = parse(file, text)?;
        let root = Obj::new(file, "$".into(), &doc)?;
        root.only(&["policy", "providers", "models"])?;
        let mut cat = Catalog {
            policy: opt_policy(&root)?.unwrap_or_default(),
            ..Catalog::default()
        };
        for (path, v) in root.array("providers")? {
            let p = provider(file, path.clone(), v, env)?;
            if cat.provider_index.contains_key(&p.id) {
                return Err(ConfigError::new(
                    file,
                    format!("{path}.id"),
                    format!("duplicate provider id {:?}", p.id),
                ));
            }
            cat.provider_index.insert(p.id.clone(), cat.providers.len());
            cat.providers.push(p);
        }
        for (path, v) in root.array("models")? {
            let m = model(file, path.clone(), v)?;
            if !cat.provider_index.contains_key(&m.provider) {
                return Err(ConfigError::new(
                    file,
                    format!("{path}.provider"),
                    format!("unknown provider {:?}", m.provider),
                ));
            }
            if cat.model_index.contains_key(&m.id) {
                return Err(ConfigError::new(
                    file,
                    format!("{path}.id"),
                    format!("duplicate model id {:?}", m.id),
                ));
            }
            let p = &cat.providers[cat.provider_index[&m.provider]];
            if let Some(a) = m.supported_actions.iter().find(|a| *a != "rerank") {
                if p.upstreams.iter().all(Upstream::rerank_only) {
                    return Err(ConfigError::new(
                        file,
                        format!("{path}.supported_actions"),
                        format!(
                            "provider {:?} has only cohere upstreams, which serve rerank alone; the {a} action needs an upstream of another protocol",
                            p.id
                        ),
                    ));
                }
            }
            cat.model_index.insert(m.id.clone(), cat.models.len());
            cat.models.push(m);
        }
        cat.index_names(file)?;
        for (i, m) in cat.models.iter().enumerate() {
            for (j, f) in m.fallbacks.iter().enumerate() {
                let at = || format!("$.models[{i}].fallbacks[{j}]");
                let target = f
                    .split_once('/')
                    .and_then(|(p, id)| cat.model(id).filter(|t| t.provider == p));
                match target {
                    None if cat.name_index.contains_key(f.as_str()) => {
                        return Err(ConfigError::new(
                            file,
                            at(),
                            format!("{f:?} is an alias; a fallback names the model's canonical provider/model_id"),
                        ))
                    }
                    None => {
                        return Err(ConfigError::new(
                            file,
                            at(),
                            format!("{f:?} is not a provider/model_id of this catalog"),
                        ))
                    }
                    Some(t) if t.id == m.id => {
                        return Err(ConfigError::new(
                            file,
                            at(),
                            "a model cannot be its own fallback",
                        ))
                    }
                    Some(_) if m.fallbacks[..j].contains(f) => {
                        return Err(ConfigError::new(
                            file,
                            at(),
                            format!("{f:?} is listed twice"),
                        ))
                    }
                    Some(_) => {}
                }
            }
        }
        Ok(cat)
    }

    /// Builds the name index, refusing an alias that clashes with a model
    /// id, a qualified id, a provider token or another alias.
    fn index_names(&mut self, file: &str) -> Result<(), ConfigError> {
        let mut names: HashMap<String, (usize, bool)> = HashMap::new();
        for (i, m) in self.models.iter().enumerate() {
            names.insert(m.id.clone(), (i, false));
            names.insert(m.qualified_id.clone(), (i, true));
        }
        let owner = |names: &HashMap<String, (usize, bool)>, models: &[Model], name: &str| {
            names.get(name).map(|&(k, _)| {
                let o = &models[k];
                let what = if name == o.id {
                    "the model id"
                } else if name == o.qualified_id {
                    "the qualified id"
                } else {
                    "an alias"
                };
                format!("{what} of $.models[{k}] ({:?})", o.qualified_id)
            })
        };
        for (i, m) in self.models.iter().enumerate() {
            for (j, a) in m.aliases.iter().enumerate() {
                let at = format!("$.models[{i}].aliases[{j}]");
                if self.provider_index.contains_key(a) {
                    return Err(ConfigError::new(
                        file,
                        at,
                        format!("alias {a:?} is a provider id"),
                    ));
                }
                if let Some(o) = owner(&names, &self.models, a) {
                    return Err(ConfigError::new(
                        file,
                        at,
                        format!("alias {a:?} is already {o}"),
                    ));
                }
                names.insert(a.clone(), (i, false));
            }
        }
        // `provider/alias`, after every literal name, so that a clash names
        // the bare alias that reads as it.
        for (i, m) in self.models.iter().enumerate() {
            for (j, a) in m.aliases.iter().enumerate() {
                if a.contains('/') {
                    continue;
                }
                let q = format!("{}/{a}", m.provider);
                if let Some(o) = owner(&names, &self.models, &q) {
                    return Err(ConfigError::new(
                        file,
                        format!("$.models[{i}].aliases[{j}]"),
                        format!("alias {a:?} reads {q:?} with its provider, already {o}"),
                    ));
                }
                names.insert(q, (i, true));
            }
        }
        self.name_index = names;
        Ok(())
    }

    /// The model a request names: a bare id, `provider/id`, an alias or
    /// `provider/alias` (one hash lookup); `true` when the name carries the
    /// model's provider token.
    pub fn lookup(&self, name: &str) -> Option<(&Model, bool)> {
        self.name_index
            .get(name)
            .map(|&(i, prefixed)| (&self.models[i], prefixed))
    }

    /// A provider by token.
    pub fn provider(&self, id: &str) -> Option<&Provider> {
        self.provider_index.get(id).map(|&i| &self.providers[i])
    }

    /// A model by bare id.
    pub fn model(&self, id: &str) -> Option<&Model> {
        self.model_index.get(id).map(|&i| &self.models[i])
    }

    /// The provider of a model (always present after validation).
    pub fn provider_of(&self, m: &Model) -> Option<&Provider> {
        self.provider(&m.provider)
    }
}

fn token(o: &Obj<'_>, key: &str) -> Result<String, ConfigError> {
    let s = o.str(key)?;
    if s.contains(['/', ':', '?', '#', ' ']) || s.trim() != s {
        return Err(o.err(
            key,
            format!("{s:?} must not contain '/', ':', '?', '#' or spaces"),
        ));
    }
    Ok(s.to_string())
}

fn families(o: &Obj<'_>, key: &str) -> Result<Vec<Family>, ConfigError> {
    let names = o
        .opt_strings(key)?
        .ok_or_else(|| o.err(key, "missing required field"))?;
    if names.is_empty() {
        return Err(o.err(key, "must name at least one protocol"));
    }
    names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            Family::from_name(n).ok_or_else(|| {
                ConfigError::new(
                    o.file,
                    format!("{}.{}[{}]", o.path, key, i),
                    format!("unknown protocol {n:?} (expected openai, anthropic or gemini)"),
                )
            })
        })
        .collect()
}

fn provider(
    file: &str,
    path: String,
    v: &serde_json::Value,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Provider, ConfigError> {
    let o = Obj::new(file, path, v)?;
    o.only(PROVIDER_FIELDS)?;
    let id = token(&o, "id")?;
    let families = families(&o, "families")?;
    let mut upstreams = Vec::new();
    for (upath, uv) in o.array("upstreams")? {
        let u = Obj::new(file, upath, uv)?;
        u.only(UPSTREAM_FIELDS)?;
        let proto = u.str("protocol")?;
        let (protocol_name, protocol, kind) = cloud::protocol(proto).ok_or_else(|| {
            u.err(
                "protocol",
                format!(
                    "unknown protocol {proto:?} (expected one of {})",
                    cloud::protocol_names()
                ),
            )
        })?;
        let cloud::Fields {
            cloud,
            auth,
            default_base,
            key_env,
        } = cloud::fields(&u, protocol_name, kind, env)?;
        let base_url = match (u.opt_str("base_url")?, default_base) {
            (None, Some(host)) => host,
            _ => u.str("base_url")?.to_string(),
        };
        let url = BaseUrl::parse(&base_url).map_err(|r| u.err("base_url", r))?;
        let api_key_env = match key_env {
            Some(var) => Some(var),
            None => u.opt_str("api_key_env")?.map(str::to_string),
        };
        let api_key = api_key_env
            .as_deref()
            .and_then(env)
            .filter(|k| !k.is_empty());
        let weight = match u.opt_u64("weight")? {
            None => 1,
            Some(w) if (1..=MAX_WEIGHT).contains(&w) => w as u32,
            Some(_) => {
                return Err(u.err(
                    "weight",
                    format!("must be a whole number from 1 to {MAX_WEIGHT}"),
                ))
            }
        };
        let id = match u.opt_str("id")? {
            Some(_) => token(&u, "id")?,
            None => {
                let base = format!("{protocol_name}@{}", url.authority);
                let same = upstreams
                    .iter()
                    .filter(|o: &&Upstream| {
                        o.protocol_name == protocol_name && o.url.authority == url.authority
                    })
                    .count();
                if same == 0 {
                    base
                } else {
                    format!("{base}#{}", same + 1)
                }
            }
        };
        if upstreams.iter().any(|o| o.id == id) {
            return Err(u.err("id", format!("duplicate upstream id {id:?}")));
        }
        upstreams.push(Upstream {
            id,
            weight,
            protocol,
            protocol_name,
            cloud,
            auth,
            base_url,
            url,
            api_key_env,
            api_key,
        });
    }
    if upstreams.is_empty() {
        return Err(o.err("upstreams", "must list at least one upstream"));
    }
    let timeouts = match o.opt_obj("timeouts")? {
        None => Timeouts::default(),
        Some(t) => {
            t.only(TIMEOUT_FIELDS)?;
            let ms = |k: &str| -> Result<Option<std::time::Duration>, ConfigError> {
                match t.opt_u64(k)? {
                    None => Ok(None),
                    Some(0) => Err(t.err(k, "must be a positive number of milliseconds")),
                    Some(n) => Ok(Some(std::time::Duration::from_millis(n))),
                }
            };
            Timeouts {
                connect: ms("connect")?,
                first_token: ms("first_token")?,
                idle: ms("idle")?,
                total: ms("total")?,
            }
        }
    };
    let retries = match o.opt_u64("retries")? {
        None => 2,
        Some(n) if n <= MAX_RETRIES => n as u32,
        Some(_) => return Err(o.err("retries", format!("must be at most {MAX_RETRIES}"))),
    };
    let continuation = match o.opt_str("continuation")? {
        None => Continuation::default(),
        Some(name) => Continuation::from_name(name)
            .ok_or_else(|| o.err("continuation", "must be one of auto, restart, off"))?,
    };
    let affinity = match o.opt_str("affinity")? {
        None => Affinity::default(),
        Some(name) => Affinity::from_name(name)
            .ok_or_else(|| o.err("affinity", "must be one of session, off"))?,
    };
    Ok(Provider {
        id,
        families,
        upstreams,
        timeouts,
        retries,
        continuation,
        affinity,
    })
}

/// `aliases`: names without '?', '#' or spaces, at most one '/' between
/// non-empty parts, none listed twice. A ':' is allowed (Bedrock's model ids,
/// `anthropic.claude-…-v1:0`, which Bedrock clients send): Gemini's
/// `{name}:{method}` paths split at the last ':'.
fn aliases(o: &Obj<'_>) -> Result<Vec<String>, ConfigError> {
    let list = o.opt_strings("aliases")?.unwrap_or_default();
    for (j, a) in list.iter().enumerate() {
        let at = |r: String| ConfigError::new(o.file, format!("{}.aliases[{j}]", o.path), r);
        if a.is_empty() {
            return Err(at("an alias must not be empty".into()));
        }
        let parts: Vec<&str> = a.split('/').collect();
        if a.contains(['?', '#', ' ']) || a.trim() != a {
            return Err(at(format!("{a:?} must not contain '?', '#' or spaces")));
        }
        if parts.len() > 2 || parts.iter().any(|p| p.is_empty()) {
            return Err(at(format!(
                "{a:?} may hold at most one '/', between two non-empty parts"
            )));
        }
        if a.starts_with("models/") {
            return Err(at(format!(
                "{a:?} must not start with \"models/\" (the prefix the SDKs' model names carry)"
            )));
        }
        if list[..j].contains(a) {
            return Err(at(format!("{a:?} is listed twice")));
        }
    }
    Ok(list)
}

fn model(file: &str, path: String, v: &serde_json::Value) -> Result<Model, ConfigError> {
    let o = Obj::new(file, path, v)?;
    o.only(MODEL_FIELDS)?;
    let id = token(&o, "id")?;
    let provider = o.str("provider")?.to_string();
    let upstream_model = o.opt_str("upstream_model")?.unwrap_or(&id).to_string();
    let display_name = o.opt_str("display_name")?.unwrap_or(&id).to_string();
    let context_length = o.positive_u64("context_length")?;
    let max_output_tokens = o.positive_u64("max_output_tokens")?;
    if max_output_tokens > context_length {
        return Err(o.err("max_output_tokens", "must not exceed context_length"));
    }
    let pricing = match o.opt_obj("pricing")? {
        Some(p) => super::pricing::pricing(&p)?,
        None => return Err(o.err("pricing", "missing required field")),
    };
    let supported_features = match o.opt_obj("supported_features")? {
        Some(f) => {
            f.only(&["vision", "tool_use", "streaming"])?;
            Features {
                vision: f.opt_bool("vision")?.unwrap_or(false),
                tool_use: f.opt_bool("tool_use")?.unwrap_or(false),
                streaming: f.opt_bool("streaming")?.unwrap_or(true),
            }
        }
        None => Features {
            streaming: true,
            ..Features::default()
        },
    };
    let defaults = match o.opt_obj("defaults")? {
        Some(d) => {
            d.only(&["temperature", "top_p", "top_k"])?;
            let t = d.opt_f64("temperature")?;
            if t.is_some_and(|t| !(0.0..=2.0).contains(&t)) {
                return Err(d.err("temperature", "must be between 0 and 2"));
            }
            let p = d.opt_f64("top_p")?;
            if p.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
                return Err(d.err("top_p", "must be between 0 and 1"));
            }
            Defaults {
                temperature: t,
                top_p: p,
                top_k: d.opt_u64("top_k")?,
            }
        }
        None => Defaults::default(),
    };
    let actions = o
        .opt_strings("supported_actions")?
        .unwrap_or_else(|| vec!["complete".to_string()]);
    for (i, a) in actions.iter().enumerate() {
        if !["complete", "embed", "rerank"].contains(&a.as_str()) {
            return Err(ConfigError::new(
                file,
                format!("{}.supported_actions[{i}]", o.path),
                format!("unknown action {a:?} (expected complete, embed or rerank)"),
            ));
        }
    }
    Ok(Model {
        qualified_id: format!("{provider}/{id}"),
        provider,
        upstream_model,
        display_name,
        description: o.opt_str("description")?.unwrap_or("").to_string(),
        created: o.opt_u64("created")?.unwrap_or(0),
        version: o.opt_str("version")?.unwrap_or("1").to_string(),
        architecture: o.opt_str("architecture")?.unwrap_or("decoder").to_string(),
        context_length,
        max_output_tokens,
        pricing,
        supported_parameters: o.opt_strings("supported_parameters")?.unwrap_or_default(),
        supported_features,
        supported_actions: actions,
        supported_generation_methods: o
            .opt_strings("supported_generation_methods")?
            .unwrap_or_else(|| vec!["generateContent".to_string(), "countTokens".to_string()]),
        defaults,
        protocols: families(&o, "protocols")?,
        fallbacks: o.opt_strings("fallbacks")?.unwrap_or_default(),
        aliases: aliases(&o)?,
        prefill: match o.opt_str("prefill")? {
            None => Prefill::default(),
            Some(name) => Prefill::from_name(name)
                .ok_or_else(|| o.err("prefill", "must be one of none, native, prefix, partial"))?,
        },
        id,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    const OK: &str = r#"{
      "providers": [{"id":"p","families":["openai"],"upstreams":[
        {"protocol":"openai","base_url":"http://127.0.0.1:9/v1/","api_key_env":"K"}]}],
      "models": [{"id":"m","provider":"p","context_length":100,"max_output_tokens":10,
        "pricing":{"prompt":"0.000001","completion":"2"},"protocols":["openai"]}]
    }"#;

    #[test]
    fn loads_valid_catalog() {
        let c = Catalog::from_str("c.json", OK, &|_| Some("secret".into())).unwrap();
        let m = c.model("m").unwrap();
        assert_eq!(m.qualified_id, "p/m");
        assert_eq!(m.upstream_model, "m");
        assert_eq!(m.pricing.base.completion.pico, 2_000_000_000_000);
        let u = &c.provider("p").unwrap().upstreams[0];
        assert_eq!(u.url.path, "/v1");
        assert_eq!(u.url.port, 9);
        assert_eq!(u.api_key.as_deref(), Some("secret"));
    }

    fn err(text: &str) -> ConfigError {
        Catalog::from_str("c.json", text, &no_env).unwrap_err()
    }

    #[test]
    fn errors_name_path_and_reason() {
        let e = err(&OK.replace("\"0.000001\"", "\"abc\""));
        assert_eq!(e.path, "$.models[0].pricing.prompt");
        assert!(e.reason.contains("decimal"), "{e}");
        let e = err(&OK.replace("\"provider\":\"p\"", "\"provider\":\"q\""));
        assert_eq!(e.path, "$.models[0].provider");
        let e = err(&OK.replace("[\"openai\"],\"upstreams\"", "[\"klingon\"],\"upstreams\""));
        assert_eq!(e.path, "$.providers[0].families[0]");
        let e = err(&OK.replace("\"context_length\":100", "\"context_length\":0"));
        assert_eq!(e.path, "$.models[0].context_length");
        let e = err(&OK.replace("http://127", "ftp://127"));
        assert_eq!(e.path, "$.providers[0].upstreams[0].base_url");
        let e = err("{\"providers\": [}");
        assert_eq!(e.path, "$");
        assert!(e.to_string().starts_with("c.json: $: invalid JSON"));
    }

    #[test]
    fn policy_defaults_to_adapt_and_is_validated() {
        let c = Catalog::from_str("c.json", OK, &no_env).unwrap();
        assert_eq!(c.policy, Policy::Adapt);
        let strict = OK.replacen('{', "{\"policy\": \"strict\",", 1);
        let c = Catalog::from_str("c.json", &strict, &no_env).unwrap();
        assert_eq!(c.policy, Policy::Strict);
        let e = err(&OK.replacen('{', "{\"policy\": \"lenient\",", 1));
        assert_eq!(e.path, "$.policy");
        assert!(e.reason.contains("adapt or strict"), "{e}");
        let e = err(&OK.replacen('{', "{\"policy\": 1,", 1));
        assert_eq!(e.path, "$.policy");
    }

    #[test]
    fn affinity_defaults_to_session_and_is_validated() {
        let c = Catalog::from_str("c.json", OK, &no_env).unwrap();
        assert_eq!(c.provider("p").unwrap().affinity, Affinity::Session);
        let off = OK.replace("{\"id\":\"p\",", "{\"id\":\"p\",\"affinity\":\"off\",");
        let c = Catalog::from_str("c.json", &off, &no_env).unwrap();
        assert_eq!(c.provider("p").unwrap().affinity, Affinity::Off);
        let e = err(&OK.replace("{\"id\":\"p\",", "{\"id\":\"p\",\"affinity\":\"sticky\","));
        assert_eq!(e.path, "$.providers[0].affinity");
        assert!(e.reason.contains("session, off"), "{e}");
    }

    #[test]
    fn rejects_duplicates() {
        let dup = OK.replace(
            "\"models\": [",
            "\"models\": [{\"id\":\"m\",\"provider\":\"p\",\"context_length\":1,\"max_output_tokens\":1,\"pricing\":{\"prompt\":\"0\",\"completion\":\"0\"},\"protocols\":[\"openai\"]},",
        );
        let e = err(&dup);
        assert_eq!(e.path, "$.models[1].id");
        assert!(e.reason.contains("duplicate"));
    }

    /// `OK` with a second model `n`, the first carrying `a_m` as aliases and the second `a_n`.
    fn with_aliases(a_m: &str, a_n: &str) -> String {
        OK.replace(
            "\"protocols\":[\"openai\"]}",
            &format!(
                "\"protocols\":[\"openai\"],\"aliases\":{a_m}}},\
                 {{\"id\":\"n\",\"provider\":\"p\",\"context_length\":1,\"max_output_tokens\":1,\
                 \"pricing\":{{\"prompt\":\"0\",\"completion\":\"0\"}},\"protocols\":[\"openai\"],\"aliases\":{a_n}}}"
            ),
        )
    }

    #[test]
    fn aliases_resolve_to_the_canonical_model() {
        let c = Catalog::from_str(
            "c.json",
            &with_aliases(r#"["m-alias","x/m-2","us.m-v1:0"]"#, "[]"),
            &no_env,
        )
        .unwrap();
        assert_eq!(
            c.model("m").unwrap().aliases,
            ["m-alias", "x/m-2", "us.m-v1:0"]
        );
        for (name, prefixed) in [
            ("m", false),
            ("p/m", true),
            ("m-alias", false),
            ("p/m-alias", true),
            ("x/m-2", false),
            ("us.m-v1:0", false),
        ] {
            let (m, p) = c.lookup(name).unwrap_or_else(|| panic!("{name}"));
            assert_eq!((m.id.as_str(), p), ("m", prefixed), "{name}");
        }
        assert_eq!(c.lookup("n").unwrap().0.id, "n");
        // an alias is a name for requests, not a model id
        assert!(c.model("m-alias").is_none());
        assert!(c.lookup("p/x/m-2").is_none() && c.lookup("q/m-alias").is_none());
    }

    #[test]
    fn aliases_must_be_unique_names() {
        let clash = |a_m: &str, a_n: &str| err(&with_aliases(a_m, a_n));
        // vs a model id
        let e = clash("[]", r#"["m"]"#);
        assert_eq!(e.path, "$.models[1].aliases[0]");
        assert!(
            e.reason
                .contains("\"m\" is already the model id of $.models[0]"),
            "{e}"
        );
        // vs a qualified id
        let e = clash("[]", r#"["p/m"]"#);
        assert_eq!(e.path, "$.models[1].aliases[0]");
        assert!(
            e.reason.contains("already the qualified id of $.models[0]"),
            "{e}"
        );
        // vs another model's alias
        let e = clash(r#"["a"]"#, r#"["b","a"]"#);
        assert_eq!(e.path, "$.models[1].aliases[1]");
        assert!(
            e.reason
                .contains("\"a\" is already an alias of $.models[0]"),
            "{e}"
        );
        // vs an alias of the same model
        let e = clash(r#"["a","a"]"#, "[]");
        assert_eq!(e.path, "$.models[0].aliases[1]");
        assert!(e.reason.contains("listed twice"), "{e}");
        // `provider/alias` vs a literal alias
        let e = clash(r#"["p/a"]"#, r#"["a"]"#);
        assert_eq!(e.path, "$.models[1].aliases[0]");
        assert!(e.reason.contains("reads \"p/a\""), "{e}");
        // vs a provider token
        let e = clash(r#"["p"]"#, "[]");
        assert!(e.reason.contains("provider id"), "{e}");
        // malformed
        for bad in [
            r#"[""]"#,
            r#"["a?b"]"#,
            r#"["a b"]"#,
            r#"["a/b/c"]"#,
            r#"["models/a"]"#,
            r#"["/a"]"#,
            "[1]",
        ] {
            let e = clash(bad, "[]");
            assert!(e.path.starts_with("$.models[0].aliases"), "{bad}: {e}");
        }
        assert!(clash(r#"[""]"#, "[]").reason.contains("empty"));
        // a fallback names the canonical model, not an alias
        let e = err(&with_aliases(r#"["m-alias"]"#, "[]").replace(
            "\"aliases\":[]",
            "\"aliases\":[],\"fallbacks\":[\"p/m-alias\"]",
        ));
        assert_eq!(e.path, "$.models[1].fallbacks[0]");
        assert!(e.reason.contains("is an alias"), "{e}");
    }

    #[test]
    fn pool_settings_default_and_parse() {
        let c = Catalog::from_str("c.json", OK, &no_env).unwrap();
        let p = c.provider("p").unwrap();
        assert_eq!((p.retries, p.timeouts), (2, Timeouts::default()));
        assert_eq!(p.upstreams[0].weight, 1);
        assert_eq!(p.upstreams[0].id, "openai@127.0.0.1:9");
        assert!(c.model("m").unwrap().fallbacks.is_empty());
        let set = OK
            .replace(
                "\"families\":[\"openai\"],",
                "\"families\":[\"openai\"],\"retries\":0,\"timeouts\":{\"first_token\":1500,\"total\":60000},",
            )
            .replace("\"api_key_env\":\"K\"}", "\"api_key_env\":\"K\",\"weight\":4,\"id\":\"east\"}");
        let c = Catalog::from_str("c.json", &set, &no_env).unwrap();
        let p = c.provider("p").unwrap();
        assert_eq!(p.retries, 0);
        assert_eq!(
            p.timeouts.first_token,
            Some(std::time::Duration::from_millis(1500))
        );
        assert_eq!(p.timeouts.total, Some(std::time::Duration::from_secs(60)));
        assert_eq!(p.timeouts.idle, None);
        assert_eq!(
            (p.upstreams[0].weight, p.upstreams[0].id.as_str()),
            (4, "east")
        );
        let e = err(&OK.replace(
            "\"protocols\":[\"openai\"]}",
            "\"protocols\":[\"openai\"],\"fallbacks\":[\"q/m\"]}",
        ));
        assert_eq!(e.path, "$.models[0].fallbacks[0]");
    }

    #[test]
    fn a_cohere_upstream_serves_rerank_alone() {
        let cohere = OK.replace("\"protocol\":\"openai\"", "\"protocol\":\"cohere\"");
        // A completion model on a provider of only cohere upstreams.
        let e = err(&cohere);
        assert_eq!(e.path, "$.models[0].supported_actions");
        assert!(
            e.reason.contains("rerank") && e.reason.contains("complete"),
            "{e}"
        );
        let rerank = cohere.replace(
            "\"protocols\":[\"openai\"]}",
            "\"protocols\":[\"openai\"],\"supported_actions\":[\"rerank\"]}",
        );
        let c = Catalog::from_str("c.json", &rerank, &no_env).unwrap();
        let up = &c.provider("p").unwrap().upstreams[0];
        assert!(up.rerank_only());
        assert_eq!((up.protocol, up.protocol_name), (Family::OpenAi, "cohere"));
        // Beside another protocol's upstream, a completion model loads.
        let mixed = OK.replace(
            "\"api_key_env\":\"K\"}]}]",
            "\"api_key_env\":\"K\"},{\"protocol\":\"cohere\",\"base_url\":\"http://127.0.0.1:9/v2\"}]}]",
        );
        assert!(Catalog::from_str("c.json", &mixed, &no_env).is_ok());
    }
}
