//! The live configuration snapshot (catalog, keys, pre-rendered listings) behind
//! an atomic pointer: requests load it once and keep it to the end, reloads swap
//! in a complete new one, so no request ever sees a half-applied change. The
//! keys are the file's merged with the key store's (docs/keys.md): a change to
//! either builds a new snapshot ([`Runtime::reload`], [`Runtime::set_stored`]);
//! a change of keys alone shares the catalog, its listings and pools.

pub mod drain;
pub mod reload;
pub mod upgrade;

use crate::config::{Catalog, ConfigError, KeyStore, Model, StoredKeys};
use crate::family::Family;
use crate::protocol::{anthropic, gemini, openai};
use crate::upstream::pool::{ProviderPool, Registry};
use arc_swap::ArcSwap;
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// One family's listings, rendered once per snapshot.
#[derive(Debug, Default)]
pub struct Listings {
    /// The whole list (`GET {root}/models`).
    pub all: Bytes,
    /// Per provider token accepted by this family (`GET {root}/models/{provider}`).
    pub by_provider: HashMap<String, Bytes>,
    /// Per visible model id, the bare object (`GET {root}/models/{provider}/{model_id}`).
    pub by_model: HashMap<String, Bytes>,
}

/// An immutable view of the configuration.
#[derive(Debug)]
pub struct Snapshot {
    pub catalog: Arc<Catalog>,
    pub keys: KeyStore,
    listings: Arc<[Listings; 3]>,
    /// Each provider's upstream pool, parallel to `catalog.providers`.
    pools: Vec<Arc<ProviderPool>>,
}

fn index(f: Family) -> usize {
    match f {
        Family::OpenAi => 0,
        Family::Anthropic => 1,
        Family::Gemini => 2,
        // The Responses API shares OpenAI's `/v1/models` listings; Bedrock
        // clients have none (never asked: no listing route under `/bedrock`).
        Family::Responses | Family::Bedrock => 0,
    }
}

impl Snapshot {
    /// Builds a snapshot and renders its listings.
    pub fn new(catalog: Catalog, keys: KeyStore) -> Snapshot {
        Snapshot::with_registry(catalog, keys, &Registry::default())
    }

    /// Builds a snapshot whose pools keep the health state `registry` holds
    /// for unchanged upstreams.
    pub fn with_registry(catalog: Catalog, keys: KeyStore, registry: &Registry) -> Snapshot {
        // `LISTED`, not `ALL`: the Responses API has no listings of its own.
        let listings = Family::LISTED.map(|f| render(&catalog, f));
        let pools = registry.pools(&catalog);
        Snapshot {
            catalog: Arc::new(catalog),
            keys,
            listings: Arc::new(listings),
            pools,
        }
    }

    /// This snapshot with other keys: the catalog, listings and pools shared.
    pub fn with_keys(&self, keys: KeyStore) -> Snapshot {
        Snapshot {
            catalog: self.catalog.clone(),
            keys,
            listings: self.listings.clone(),
            pools: self.pools.clone(),
        }
    }

    /// Loads both files; fails on the first invalid one.
    pub fn load(catalog_path: &str, keys_path: &str) -> Result<Snapshot, ConfigError> {
        Ok(Snapshot::new(
            Catalog::load(catalog_path)?,
            KeyStore::load(keys_path)?,
        ))
    }

    /// The pool of the provider `id`.
    pub fn pool(&self, id: &str) -> Option<&ProviderPool> {
        let i = self.catalog.providers.iter().position(|p| p.id == id)?;
        self.pools.get(i).map(|p| &**p)
    }

    /// Every provider with its pool.
    pub fn pools(&self) -> impl Iterator<Item = (&crate::config::Provider, &ProviderPool)> {
        self.catalog
            .providers
            .iter()
            .zip(self.pools.iter().map(|p| &**p))
    }

    /// The pre-rendered listings of `family`.
    pub fn listings(&self, family: Family) -> &Listings {
        &self.listings[index(family)]
    }

    /// Whether `family` lists (and serves) this model (docs/configuration.md "Catalog",
    /// `protocols`).
    pub fn visible(&self, family: Family, m: &Model) -> bool {
        visible_in(&self.catalog, family, m)
    }
}

fn visible_in(cat: &Catalog, family: Family, m: &Model) -> bool {
    match family {
        // The Responses API: served under `/v1` beside chat-completions, for every model.
        // Bedrock (E20-E23): every model, whatever its upstream speaks.
        Family::OpenAi | Family::Responses | Family::Bedrock => true,
        Family::Anthropic => m.speaks(Family::Anthropic),
        Family::Gemini => {
            m.speaks(Family::Gemini)
                && cat
                    .provider_of(m)
                    .is_some_and(|p| p.accepts(Family::Gemini))
        }
    }
}

fn object(family: Family, m: &Model) -> serde_json::Value {
    match family {
        // The Responses API and Bedrock: rendered as OpenAI's (never reached:
        // they have no listings of their own).
        Family::OpenAi | Family::Responses | Family::Bedrock => openai::models::model_object(m),
        Family::Anthropic => anthropic::models::model_object(m),
        Family::Gemini => gemini::models::model_object(m),
    }
}

fn envelope(family: Family, items: Vec<serde_json::Value>) -> Bytes {
    let v = match family {
        // The Responses API and Bedrock: as OpenAI's (never reached for Bedrock).
        Family::OpenAi | Family::Responses | Family::Bedrock => openai::models::list(items),
        Family::Anthropic => anthropic::models::list(items),
        Family::Gemini => gemini::models::list(items),
    };
    Bytes::from(v.to_string())
}

fn render(cat: &Catalog, family: Family) -> Listings {
    let mut out = Listings::default();
    let visible: Vec<&Model> = cat
        .models
        .iter()
        .filter(|m| visible_in(cat, family, m))
        .collect();
    for m in &visible {
        out.by_model
            .insert(m.id.clone(), Bytes::from(object(family, m).to_string()));
    }
    out.all = envelope(family, visible.iter().map(|m| object(family, m)).collect());
    for p in cat.providers.iter().filter(|p| p.accepts(family)) {
        let items = visible
            .iter()
            .filter(|m| m.provider == p.id)
            .map(|m| object(family, m))
            .collect();
        out.by_provider
            .insert(p.id.clone(), envelope(family, items));
    }
    out
}

/// Paths of the files a snapshot is loaded from.
#[derive(Debug, Clone)]
pub struct ConfigPaths {
    pub catalog: String,
    pub keys: String,
}

/// The process-wide runtime state shared by every request.
#[derive(Debug)]
pub struct Runtime {
    snapshot: ArcSwap<Snapshot>,
    /// Upstream health, carried from one snapshot to the next.
    registry: Registry,
    pub paths: ConfigPaths,
    /// Successful reloads since start.
    pub reloads: AtomicU64,
    /// Failed reload attempts since start.
    pub reload_failures: AtomicU64,
    /// The keys file's keys and the key store's, as last loaded; held while
    /// a new snapshot is built, so a file reload and a store change never
    /// build from each other's stale half.
    sources: Mutex<(KeyStore, Arc<StoredKeys>)>,
}

/// Why a keys file cannot be served with the store's keys: the first stored
/// entry they disagree on (docs/configuration.md "Keys from the file and
/// from the API").
fn refuse_clashes(file: &str, conflicts: &[crate::config::Conflict]) -> Result<(), ConfigError> {
    match conflicts.first() {
        Some(c) => Err(ConfigError::new(
            file,
            "$",
            format!("the key store's {c}: change the file, or the store through the admin API"),
        )),
        None => Ok(()),
    }
}

fn log_left_out(conflicts: &[crate::config::Conflict]) {
    for c in conflicts {
        log::error!("key store: {c}: left out of the live keys");
    }
}

impl Runtime {
    /// Wraps an initial snapshot (its keys: the file's alone).
    pub fn new(snapshot: Snapshot, paths: ConfigPaths) -> Runtime {
        let registry = Registry::default();
        registry.remember(&snapshot.pools);
        crate::secrets::install_config(&snapshot.catalog, &snapshot.keys);
        let file_keys = snapshot.keys.clone();
        Runtime {
            registry,
            snapshot: ArcSwap::from_pointee(snapshot),
            paths,
            reloads: AtomicU64::new(0),
            reload_failures: AtomicU64::new(0),
            sources: Mutex::new((file_keys, Arc::default())),
        }
    }

    /// As [`Runtime::new`] with the key store's keys and teams merged in;
    /// refused when the store defines an id the keys file also has.
    pub fn with_stored(
        snapshot: Snapshot,
        paths: ConfigPaths,
        stored: Arc<StoredKeys>,
    ) -> Result<Runtime, ConfigError> {
        let (keys, conflicts) = snapshot.keys.merged(&stored);
        refuse_clashes(&paths.keys, &conflicts)?;
        log_left_out(&conflicts);
        let rt = Runtime::new(snapshot, paths);
        {
            let mut sources = rt.sources.lock().unwrap_or_else(PoisonError::into_inner);
            sources.1 = stored;
            let next = rt.snapshot().with_keys(keys);
            rt.install(next);
        }
        Ok(rt)
    }

    /// The current snapshot; hold it for the whole request.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.load_full()
    }

    /// Reloads both files: on success swaps the snapshot in (the file's keys
    /// merged with the store's), on failure keeps the old one.
    pub fn reload(&self) -> Result<(), ConfigError> {
        let mut sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        let loaded = Catalog::load(&self.paths.catalog).and_then(|c| {
            let file = KeyStore::load(&self.paths.keys)?;
            let (keys, conflicts) = file.merged(&sources.1);
            refuse_clashes(&self.paths.keys, &conflicts)?;
            log_left_out(&conflicts);
            Ok((file, Snapshot::with_registry(c, keys, &self.registry)))
        });
        match loaded {
            Ok((file, s)) => {
                sources.0 = file;
                self.install(s);
                self.reloads.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                self.reload_failures.fetch_add(1, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    /// Puts the key store's keys and teams in force: a new snapshot with the
    /// same catalog and the file's keys merged with `stored`. A stored entry
    /// that cannot be merged is logged and left out.
    pub fn set_stored(&self, stored: Arc<StoredKeys>) {
        let mut sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        let (keys, conflicts) = sources.0.merged(&stored);
        log_left_out(&conflicts);
        sources.1 = stored;
        let next = self.snapshot().with_keys(keys);
        self.install(next);
    }

    fn install(&self, s: Snapshot) {
        // The scrubber first: a request on the new snapshot may already
        // meet a new key. Keys made through the API are never held in plain.
        crate::secrets::install_config(&s.catalog, &s.keys);
        self.snapshot.store(Arc::new(s));
    }
}
