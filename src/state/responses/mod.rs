//! Stored responses (docs/api.md "Stored responses"): a family D response kept with its input
//! items so that `previous_response_id` can continue it and D3 can read,
//! list or delete it.
//!
//! - A record is the response object exactly as the client received it (raw
//!   bytes, whole or assembled from the stream's terminal event), the
//!   request's own input items normalised to item form (a string `input` is
//!   one user `message`), its `instructions` and its `previous_response_id`.
//!   It is owned by the key id that made it and expires after the TTL.
//! - Continuing walks the chain through each record's
//!   `previous_response_id`, oldest first: every turn's input items then its
//!   output items, then the new input. `instructions` are not inherited
//!   (OpenAI's rule): each request carries its own.
//! - Writes happen off the response path ([`ResponseStore::save`] spawns
//!   them); until a write lands the record is served from memory, so a
//!   client that continues at once finds it. A failed write is logged and
//!   counted, never sent to the client.
//! - Backends: [`Memory`] (tests, benches), the embedded SQLite file
//!   (`responses_sqlite`) and Redis (`responses_redis`), behind [`Backend`].
//! - Quota: a record's size ([`StoredResponse::bytes`]: its response object,
//!   input items and instructions as JSON text) is capped per record
//!   (`--responses-max-record-bytes`) and the records a key holds, summed,
//!   per key (`--responses-key-quota-bytes`). Every backend tracks a key's
//!   usage ([`Backend::usage`]): it grows with each write, shrinks when a
//!   record is deleted or expires, and the persistent backends keep it
//!   across restarts. [`ResponseStore::admit`] checks a request that asks
//!   to be stored before it goes upstream: its own input already over the
//!   record limit is a 400 naming `store`; a key whose usage plus that input
//!   is over its quota is a 429 `stored_responses_quota_exceeded`. A record
//!   that only its answer makes too large is answered, not kept (the whole
//!   answer says `store: false`; a stream's already went), logged and
//!   counted as a store failure. The quota is checked at admission, and a
//!   record counts once its write lands (milliseconds after the answer), so
//!   requests of one key in flight together may pass it by their own records.

pub mod redis;
pub mod sqlite;

use crate::error::{ErrorKind, GatewayError};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The default time a stored response is kept.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// The longest chain of `previous_response_id` links followed.
pub const MAX_CHAIN: usize = 1000;

/// The largest record kept by default (`--responses-max-record-bytes`),
/// 8 MiB. A record is read whole on every continuation and D3 read and held
/// in memory while its write is in flight; text turns are kilobytes, so
/// this is three orders of magnitude above them and still fits a few inline
/// images (a quarter of the default `--max-body-bytes`), while a Redis value
/// much larger stalls the server for every other client while it is copied.
pub const DEFAULT_MAX_RECORD_BYTES: u64 = 8 << 20;

/// What one key may keep stored by default (`--responses-key-quota-bytes`),
/// 64 MiB: thousands of text turns (a turn is kilobytes to tens of them) or
/// eight records at the record limit within the TTL, and usage frees itself
/// as records expire; a thousand keys at quota (64 GB) still fit one large
/// Redis node or a modest disk.
pub const DEFAULT_KEY_QUOTA_BYTES: u64 = 64 << 20;

/// One stored response.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredResponse {
    pub id: String,
    /// The key id that made it (never the key).
    pub key_id: String,
    /// Unix seconds.
    pub created_at: u64,
    /// Unix milliseconds after which it is gone.
    pub expires_at_ms: u64,
    #[serde(default)]
    pub previous_response_id: Option<String>,
    #[serde(default)]
    pub instructions: Option<Box<RawValue>>,
    /// The request's own input items (not the inherited ones), in item form.
    pub input_items: Vec<Box<RawValue>>,
    /// The response object as the client received it.
    pub response: Box<RawValue>,
}

impl StoredResponse {
    /// Its size as the quota counts it: the JSON text of its response
    /// object, input items and instructions (what every backend keeps, give
    /// or take a few bytes of framing).
    pub fn bytes(&self) -> u64 {
        let items: usize = self.input_items.iter().map(|i| i.get().len()).sum();
        let instructions = self.instructions.as_ref().map_or(0, |i| i.get().len());
        u64::try_from(self.response.get().len() + items + instructions).unwrap_or(u64::MAX)
    }

    /// Whether it has expired at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms <= now_ms
    }

    /// The response's `output` items.
    pub fn output_items(&self) -> Vec<Box<RawValue>> {
        #[derive(Deserialize)]
        struct Output {
            #[serde(default)]
            output: Option<Vec<Box<RawValue>>>,
        }
        serde_json::from_str::<Output>(self.response.get())
            .ok()
            .and_then(|o| o.output)
            .unwrap_or_default()
    }
}

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

/// A fresh response id: `resp_` and 48 hex digits from the OS generator
/// (192 bits: unique and not guessable), the length of OpenAI's ids.
pub fn new_response_id() -> String {
    let mut b = [0u8; 24];
    if getrandom::getrandom(&mut b).is_err() {
        // No OS randomness: still unique within the process (time and counter).
        let fallback = crate::protocol::common::support::fresh_id("");
        let h = fallback.as_bytes();
        for (i, x) in b.iter_mut().enumerate() {
            *x = h.get(i).copied().unwrap_or(0);
        }
    }
    let mut s = String::with_capacity(53);
    s.push_str("resp_");
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

/// What a storage backend failed at (logged and counted; on a read, a 503).
#[derive(Debug, Clone)]
pub struct StoreError(pub String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where records live.
#[async_trait]
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// Stores `rec` (replacing a record of the same id).
    async fn put(&self, rec: &StoredResponse) -> Result<(), StoreError>;
    /// The record `id`, if stored and not expired.
    async fn get(&self, id: &str) -> Result<Option<StoredResponse>, StoreError>;
    /// Removes `id` (a record of `key_id`); whether it was there.
    async fn delete(&self, key_id: &str, id: &str) -> Result<bool, StoreError>;
    /// The bytes ([`StoredResponse::bytes`]) of `key_id`'s records that have
    /// not expired.
    async fn usage(&self, key_id: &str) -> Result<u64, StoreError>;
    /// Whether other instances write and delete records here too (then a
    /// key's usage is read every time, never from this instance's memory),
    /// and the read is cheap (a total the backend keeps, not a sum).
    fn shared(&self) -> bool {
        false
    }
    /// A short name for logs (`memory`, `sqlite`, `redis`).
    fn name(&self) -> &'static str;
}

/// Records in process memory (tests and benches; not the binary's default).
#[derive(Debug, Default)]
pub struct Memory {
    map: Mutex<HashMap<String, StoredResponse>>,
}

impl Memory {
    fn with<R>(&self, f: impl FnOnce(&mut HashMap<String, StoredResponse>) -> R) -> R {
        let mut g = match self.map.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        f(&mut g)
    }
}

#[async_trait]
impl Backend for Memory {
    async fn put(&self, rec: &StoredResponse) -> Result<(), StoreError> {
        let now = now_ms();
        self.with(|m| {
            m.retain(|_, r| !r.expired(now));
            m.insert(rec.id.clone(), rec.clone());
        });
        Ok(())
    }
    async fn get(&self, id: &str) -> Result<Option<StoredResponse>, StoreError> {
        let now = now_ms();
        Ok(self.with(|m| m.get(id).filter(|r| !r.expired(now)).cloned()))
    }
    async fn delete(&self, _key_id: &str, id: &str) -> Result<bool, StoreError> {
        Ok(self.with(|m| m.remove(id)).is_some())
    }
    async fn usage(&self, key_id: &str) -> Result<u64, StoreError> {
        let now = now_ms();
        Ok(self.with(|m| {
            m.values()
                .filter(|r| r.key_id == key_id && !r.expired(now))
                .map(StoredResponse::bytes)
                .sum()
        }))
    }
    fn name(&self) -> &'static str {
        "memory"
    }
}

/// A write not yet landed: served from here meanwhile.
#[derive(Debug)]
struct Pending {
    rec: Arc<StoredResponse>,
    /// Deleted before its write landed: the write is undone when it does.
    deleted: bool,
}

/// The store the gateway uses: a backend, the TTL, and the writes in flight.
#[derive(Debug)]
pub struct ResponseStore {
    backend: Arc<dyn Backend>,
    ttl: Duration,
    pending: Mutex<HashMap<String, Pending>>,
    /// Writes (and undo-deletes) that failed, and records not kept for
    /// their size; shared with the metrics.
    failures: Arc<AtomicU64>,
    /// The largest record kept ([`StoredResponse::bytes`]).
    max_record_bytes: u64,
    /// What one key's records may hold, summed.
    key_quota_bytes: u64,
    /// Each key's usage as last read from an unshared backend (memory,
    /// SQLite), with when, plus the records written since: `admit` asks the
    /// backend at most once per [`USAGE_FRESH`] per key (its answer is a sum
    /// over the key's records, which must not run on every request). A
    /// shared backend (Redis) keeps a total and is asked every time.
    usage: Mutex<HashMap<String, (u64, std::time::Instant)>>,
}

/// How long a key's usage read from the backend serves `admit`: within it
/// the store adds the records it saves and forgets the entry when one is
/// deleted or a write fails; records that expire meanwhile are freed at the
/// next read.
const USAGE_FRESH: Duration = Duration::from_secs(1);

/// Why a continuation could not be built.
fn not_found_previous(id: &str) -> GatewayError {
    GatewayError::invalid_param(
        "previous_response_id",
        format!("Previous response with id {} not found.", quote_single(id)),
    )
    .with_code("previous_response_not_found")
}

/// `'id'` (OpenAI quotes ids in single quotes), cut to a sane length.
pub fn quote_single(id: &str) -> String {
    let cut: String = id.chars().take(200).collect();
    format!("'{cut}'")
}

fn unavailable(e: &StoreError) -> GatewayError {
    GatewayError::new(
        ErrorKind::Unavailable,
        format!("stored responses are unavailable: {e}"),
    )
    .with_code("store_unavailable")
}

impl ResponseStore {
    /// A store over `backend` keeping records for `ttl`.
    pub fn new(backend: Arc<dyn Backend>, ttl: Duration) -> Self {
        ResponseStore {
            backend,
            ttl: ttl.max(Duration::from_secs(1)),
            pending: Mutex::new(HashMap::new()),
            failures: Arc::new(AtomicU64::new(0)),
            max_record_bytes: DEFAULT_MAX_RECORD_BYTES,
            key_quota_bytes: DEFAULT_KEY_QUOTA_BYTES,
            usage: Mutex::new(HashMap::new()),
        }
    }

    /// `key_id`'s usage when read from the backend less than
    /// [`USAGE_FRESH`] ago.
    fn usage_cached(&self, key_id: &str) -> Option<u64> {
        let m = self.usage.lock().ok()?;
        m.get(key_id)
            .filter(|(_, at)| at.elapsed() < USAGE_FRESH)
            .map(|(n, _)| *n)
    }

    /// Applies `f` to the usage entries (a poisoned lock skips it: the next
    /// read asks the backend).
    fn usage_edit(&self, f: impl FnOnce(&mut HashMap<String, (u64, std::time::Instant)>)) {
        if let Ok(mut m) = self.usage.lock() {
            f(&mut m);
        }
    }

    /// Sets the largest record kept and what one key may keep in all.
    #[must_use]
    pub fn with_limits(mut self, max_record_bytes: u64, key_quota_bytes: u64) -> Self {
        self.max_record_bytes = max_record_bytes;
        self.key_quota_bytes = key_quota_bytes;
        self
    }

    /// The largest record kept.
    pub fn max_record_bytes(&self) -> u64 {
        self.max_record_bytes
    }

    /// Logs and counts a response answered but not stored: its record
    /// (`bytes`) is over the record limit.
    pub fn not_kept(&self, id: &str, bytes: u64) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        log::warn!(
            "stored response {id}: {bytes} bytes, more than --responses-max-record-bytes ({}); answered but not stored",
            self.max_record_bytes
        );
    }

    /// Whether a request that asks to be stored, whose own part of the
    /// record (input items and instructions) is `known` bytes, may go on:
    /// a 400 naming `store` when that part alone is over the record limit,
    /// a 429 when the key's records and it would pass the key's quota. A
    /// backend that cannot say is not a reason to refuse an answer (the
    /// write would fail the same way, logged and counted): admitted, logged.
    pub async fn admit(&self, key_id: &str, known: u64) -> Result<(), GatewayError> {
        if known > self.max_record_bytes {
            return Err(GatewayError::invalid_param(
                "store",
                format!(
                    "this response cannot be stored: its input alone is {known} bytes, more than the {} bytes a stored response may hold on this gateway (--responses-max-record-bytes); send \"store\": false (and the conversation itself) or a smaller input",
                    self.max_record_bytes
                ),
            )
            .with_code("stored_response_too_large"));
        }
        let shared = self.backend.shared();
        let cached = if shared {
            None
        } else {
            self.usage_cached(key_id)
        };
        let used = match cached {
            Some(n) => Ok(n),
            None => self.backend.usage(key_id).await.inspect(|n| {
                if shared {
                    return;
                }
                let n = *n;
                self.usage_edit(|m| {
                    m.insert(key_id.to_string(), (n, std::time::Instant::now()));
                });
            }),
        };
        let used = match used {
            Ok(n) => n,
            Err(e) => {
                log::warn!(
                    "stored responses: the {} backend cannot tell a key's usage ({e}); admitting the request unchecked",
                    self.backend.name()
                );
                return Ok(());
            }
        };
        if used.saturating_add(known) > self.key_quota_bytes {
            let mut e = GatewayError::new(
                ErrorKind::RateLimited,
                format!(
                    "this key's stored responses hold {used} bytes of the {} it may keep (--responses-key-quota-bytes), and this one needs at least {known} more: delete stored responses (DELETE /v1/responses/{{id}}), wait for them to expire, or send \"store\": false",
                    self.key_quota_bytes
                ),
            )
            .with_code("stored_responses_quota_exceeded");
            e.param = Some("store".to_string());
            return Err(e);
        }
        Ok(())
    }

    /// Counts failed writes in `counter` (the metrics' own).
    #[must_use]
    pub fn count_failures_in(mut self, counter: Arc<AtomicU64>) -> Self {
        self.failures = counter;
        self
    }

    /// Counts one failed write.
    pub fn count_failure(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }

    /// An in-memory store with the default TTL.
    pub fn memory() -> Self {
        ResponseStore::new(Arc::new(Memory::default()), DEFAULT_TTL)
    }

    /// The backend's name.
    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }

    /// How long records are kept.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Writes that failed so far (`switchboard_responses_store_failures_total`).
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    fn pending<R>(&self, f: impl FnOnce(&mut HashMap<String, Pending>) -> R) -> R {
        let mut g = match self.pending.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        f(&mut g)
    }

    /// A record for `key_id` made now, expiring after the TTL.
    pub fn record(
        &self,
        id: String,
        key_id: &str,
        previous_response_id: Option<String>,
        instructions: Option<Box<RawValue>>,
        input_items: Vec<Box<RawValue>>,
        response: Box<RawValue>,
    ) -> StoredResponse {
        let now = now_ms();
        StoredResponse {
            id,
            key_id: key_id.to_string(),
            created_at: now / 1000,
            expires_at_ms: now
                .saturating_add(u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)),
            previous_response_id,
            instructions,
            input_items,
            response,
        }
    }

    /// Stores `rec` off the caller's path: served from memory at once, written
    /// by a spawned task; a failure is logged and counted. A record over the
    /// record limit is not kept (logged and counted); whether it was.
    pub fn save(self: &Arc<Self>, rec: StoredResponse) -> bool {
        let bytes = rec.bytes();
        if bytes > self.max_record_bytes {
            self.not_kept(&rec.id, bytes);
            return false;
        }
        // Counted from now on in this instance's reading of the key's usage
        // (a backend read replaces it with what the backend holds).
        self.usage_edit(|m| {
            if let Some((n, _)) = m.get_mut(&rec.key_id) {
                *n = n.saturating_add(bytes);
            }
        });
        let rec = Arc::new(rec);
        let id = rec.id.clone();
        self.pending(|p| {
            p.insert(
                id.clone(),
                Pending {
                    rec: rec.clone(),
                    deleted: false,
                },
            )
        });
        let store = self.clone();
        let key = id.clone();
        let write = async move {
            let r = store.backend.put(&rec).await;
            if let Err(e) = &r {
                store.failures.fetch_add(1, Ordering::Relaxed);
                log::error!(
                    "stored response {}: the {} write failed: {e}",
                    rec.id,
                    store.backend.name()
                );
            }
            let deleted = store.pending(|p| p.remove(&id).is_some_and(|x| x.deleted));
            if r.is_err() || deleted {
                // Not kept after all: counted in `save`, read again next time.
                store.usage_edit(|m| {
                    m.remove(&rec.key_id);
                });
            }
            if deleted && r.is_ok() {
                if let Err(e) = store.backend.delete(&rec.key_id, &id).await {
                    store.failures.fetch_add(1, Ordering::Relaxed);
                    log::error!("stored response {id}: deleting it failed: {e}");
                }
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) => {
                h.spawn(write);
                true
            }
            Err(_) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                self.pending(|p| p.remove(&key));
                log::error!("stored response {key}: no runtime to write it on");
                false
            }
        }
    }

    /// The record `id` if it exists, has not expired and belongs to `key_id`.
    pub async fn lookup(
        &self,
        key_id: &str,
        id: &str,
    ) -> Result<Option<Arc<StoredResponse>>, GatewayError> {
        let now = now_ms();
        let pending = self.pending(|p| p.get(id).map(|x| (x.rec.clone(), x.deleted)));
        let rec = match pending {
            Some((_, true)) => None,
            Some((rec, false)) => Some(rec),
            None => self
                .backend
                .get(id)
                .await
                .map_err(|e| unavailable(&e))?
                .map(Arc::new),
        };
        Ok(rec.filter(|r| r.key_id == key_id && !r.expired(now)))
    }

    /// Deletes `id` if it belongs to `key_id`; whether it did.
    pub async fn delete(&self, key_id: &str, id: &str) -> Result<bool, GatewayError> {
        if self.lookup(key_id, id).await?.is_none() {
            return Ok(false);
        }
        let was_pending = self.pending(|p| match p.get_mut(id) {
            Some(x) => {
                x.deleted = true;
                true
            }
            None => false,
        });
        if was_pending {
            return Ok(true);
        }
        self.backend
            .delete(key_id, id)
            .await
            .map_err(|e| unavailable(&e))?;
        // The key's usage is read again at its next admission.
        self.usage_edit(|m| {
            m.remove(key_id);
        });
        Ok(true)
    }

    /// The records from the oldest to `id`, following `previous_response_id`;
    /// a missing, expired or foreign link is the 400 OpenAI sends.
    pub async fn chain(
        &self,
        key_id: &str,
        id: &str,
    ) -> Result<Vec<Arc<StoredResponse>>, GatewayError> {
        let mut out = Vec::new();
        let mut next = Some(id.to_string());
        while let Some(cur) = next {
            if out.len() >= MAX_CHAIN {
                return Err(GatewayError::invalid_param(
                    "previous_response_id",
                    format!("the conversation is longer than {MAX_CHAIN} stored responses"),
                ));
            }
            let rec = self
                .lookup(key_id, &cur)
                .await?
                .ok_or_else(|| not_found_previous(&cur))?;
            next = rec.previous_response_id.clone();
            out.push(rec);
        }
        out.reverse();
        Ok(out)
    }
}

/// The items a continuation starts with: every turn's input items then its
/// output items, oldest first, as JSON texts.
pub fn inherited_items(chain: &[Arc<StoredResponse>]) -> Vec<Box<RawValue>> {
    let mut out = Vec::new();
    for rec in chain {
        out.extend(rec.input_items.iter().cloned());
        out.extend(rec.output_items());
    }
    out
}

fn raw(v: &Value) -> Option<Box<RawValue>> {
    serde_json::value::to_raw_value(v).ok()
}

/// A `message` item with one text part.
fn text_message(role: &str, text: &str) -> Option<Box<RawValue>> {
    let part = if role == "assistant" {
        "output_text"
    } else {
        "input_text"
    };
    raw(&json!({"type": "message", "role": role, "content": [{"type": part, "text": text}]}))
}

/// The request's `input` in item form: a string is one user message; an
/// "easy" message (`role` and `content`, no `type`) becomes a `message`
/// item with typed parts; other items are kept as they were sent.
pub fn normalise_input(input: &RawValue) -> Vec<Box<RawValue>> {
    if let Ok(s) = serde_json::from_str::<String>(input.get()) {
        return text_message("user", &s).into_iter().collect();
    }
    let Ok(items) = serde_json::from_str::<Vec<Box<RawValue>>>(input.get()) else {
        return Vec::new();
    };
    #[derive(Deserialize)]
    struct Easy<'a> {
        #[serde(rename = "type", default)]
        kind: Option<&'a str>,
        #[serde(default)]
        role: Option<&'a str>,
    }
    items
        .into_iter()
        .filter_map(|item| {
            let easy = serde_json::from_str::<Easy<'_>>(item.get()).ok();
            match easy {
                Some(Easy {
                    kind: None,
                    role: Some(role),
                }) => {
                    let mut v: Value = serde_json::from_str(item.get()).ok()?;
                    let obj = v.as_object_mut()?;
                    if let Some(Value::String(s)) = obj.get("content") {
                        let part = if role == "assistant" {
                            "output_text"
                        } else {
                            "input_text"
                        };
                        let parts = json!([{"type": part, "text": s}]);
                        obj.insert("content".into(), parts);
                    }
                    obj.insert("type".into(), json!("message"));
                    raw(&v)
                }
                _ => Some(item),
            }
        })
        .collect()
}

/// An input item as D3 lists it: with an `id` (its own, or one derived from
/// the response id and its position, stable across reads).
pub fn listed_item(response_id: &str, index: usize, item: &RawValue) -> Value {
    let mut v: Value = serde_json::from_str(item.get()).unwrap_or(Value::Null);
    if let Value::Object(obj) = &mut v {
        let has_id = obj.get("id").is_some_and(Value::is_string);
        if !has_id {
            let prefix = match obj.get("type").and_then(Value::as_str) {
                Some("message") | None => "msg_",
                Some("function_call_output") => "fco_",
                Some("function_call") => "fc_",
                Some("reasoning") => "rs_",
                Some(_) => "item_",
            };
            let id = crate::ir::ids::stable_id(
                prefix,
                &[response_id.as_bytes(), index.to_string().as_bytes()],
            );
            obj.insert("id".into(), json!(id));
        }
    }
    v
}

/// The order of an input-items page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Asc,
    Desc,
}

/// `GET /v1/responses/{id}/input_items` query: `order` (default `desc`, as
/// the API), `limit` (1..=100, default 20), `after` / `before` (item ids).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    pub order: Order,
    pub limit: usize,
    pub after: Option<String>,
    pub before: Option<String>,
}

impl ListQuery {
    /// Reads the query string; a bad value is a 400 naming it.
    pub fn parse(query: Option<&str>) -> Result<ListQuery, GatewayError> {
        let mut q = ListQuery {
            order: Order::Desc,
            limit: 20,
            after: None,
            before: None,
        };
        for pair in query.unwrap_or("").split('&').filter(|s| !s.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = String::from_utf8_lossy(&crate::util::percent::decode_lenient(
                v,
                crate::util::percent::Component::Query,
            ))
            .into_owned();
            match k {
                "order" => {
                    q.order = match v.as_str() {
                        "asc" => Order::Asc,
                        "desc" => Order::Desc,
                        _ => {
                            return Err(GatewayError::invalid_param(
                                "order",
                                format!(
                                    "Invalid value for 'order': expected 'asc' or 'desc', got {}.",
                                    quote_single(&v)
                                ),
                            ))
                        }
                    }
                }
                "limit" => {
                    q.limit = v
                        .parse::<usize>()
                        .ok()
                        .filter(|n| (1..=100).contains(n))
                        .ok_or_else(|| {
                            GatewayError::invalid_param(
                                "limit",
                                format!(
                                    "Invalid value for 'limit': expected an integer from 1 to 100, got {}.",
                                    quote_single(&v)
                                ),
                            )
                        })?;
                }
                "after" if !v.is_empty() => q.after = Some(v),
                "before" if !v.is_empty() => q.before = Some(v),
                _ => {}
            }
        }
        Ok(q)
    }
}

/// One page of `rec`'s input items, in OpenAI's list shape.
pub fn list_page(rec: &StoredResponse, q: &ListQuery) -> Value {
    let mut items: Vec<Value> = rec
        .input_items
        .iter()
        .enumerate()
        .map(|(i, it)| listed_item(&rec.id, i, it))
        .collect();
    if q.order == Order::Desc {
        items.reverse();
    }
    let pos = |id: &str| {
        items
            .iter()
            .position(|v| v.get("id").and_then(Value::as_str) == Some(id))
    };
    let start = match &q.after {
        Some(a) => pos(a).map_or(items.len(), |i| i + 1),
        None => 0,
    };
    let end = match &q.before {
        Some(b) => pos(b).unwrap_or(items.len()),
        None => items.len(),
    };
    let window: Vec<Value> = if start < end {
        items[start..end].to_vec()
    } else {
        Vec::new()
    };
    let has_more = window.len() > q.limit;
    let data: Vec<Value> = window.into_iter().take(q.limit).collect();
    let id_at = |v: Option<&Value>| v.and_then(|x| x.get("id")).cloned().unwrap_or(Value::Null);
    json!({
        "object": "list",
        "data": data,
        "first_id": id_at(data.first()),
        "last_id": id_at(data.last()),
        "has_more": has_more,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rawv(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    #[test]
    fn ids_are_unique_and_long() {
        let a = new_response_id();
        let b = new_response_id();
        assert_ne!(a, b);
        assert!(a.starts_with("resp_") && a.len() == 53, "{a}");
    }

    #[test]
    fn input_is_normalised_to_items() {
        let items = normalise_input(&rawv(r#""hi""#));
        assert_eq!(
            serde_json::from_str::<Value>(items[0].get()).unwrap(),
            json!({"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]})
        );
        let items = normalise_input(&rawv(
            r#"[{"role":"assistant","content":"yo"},{"type":"function_call_output","call_id":"c","output":"1"}]"#,
        ));
        let v0: Value = serde_json::from_str(items[0].get()).unwrap();
        assert_eq!(v0["type"], "message");
        assert_eq!(v0["content"][0]["type"], "output_text");
        assert_eq!(
            items[1].get(),
            r#"{"type":"function_call_output","call_id":"c","output":"1"}"#
        );
    }

    fn rec(store: &ResponseStore, id: &str, key: &str, prev: Option<&str>) -> StoredResponse {
        store.record(
            id.into(),
            key,
            prev.map(str::to_string),
            None,
            normalise_input(&rawv(&format!("\"q-{id}\""))),
            rawv(&format!(
                r#"{{"id":"{id}","output":[{{"type":"message","role":"assistant","content":[{{"type":"output_text","text":"a-{id}"}}]}}]}}"#
            )),
        )
    }

    #[tokio::test]
    async fn chains_are_walked_oldest_first_and_owned() {
        let store = Arc::new(ResponseStore::memory());
        store.save(rec(&store, "r1", "k", None));
        store.save(rec(&store, "r2", "k", Some("r1")));
        tokio::task::yield_now().await;
        let chain = store.chain("k", "r2").await.unwrap();
        let ids: Vec<&str> = chain.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["r1", "r2"]);
        let text: Vec<String> = inherited_items(&chain)
            .iter()
            .map(|i| i.get().to_string())
            .collect();
        assert_eq!(text.len(), 4);
        assert!(text[0].contains("q-r1") && text[1].contains("a-r1"));
        assert!(text[2].contains("q-r2") && text[3].contains("a-r2"));
        let e = store.chain("other", "r2").await.unwrap_err();
        assert_eq!(e.param.as_deref(), Some("previous_response_id"));
        assert_eq!(e.message, "Previous response with id 'r2' not found.");
        assert!(!store.delete("other", "r1").await.unwrap());
        assert!(store.delete("k", "r1").await.unwrap());
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(store.lookup("k", "r1").await.unwrap().is_none());
        assert!(store.chain("k", "r2").await.is_err());
    }

    #[tokio::test]
    async fn records_are_admitted_within_the_record_limit_and_the_key_quota() {
        let store = Arc::new(ResponseStore::memory().with_limits(1000, 2500));
        let e = store.admit("k", 1001).await.unwrap_err();
        assert_eq!((e.status, e.param.as_deref()), (400, Some("store")));
        let mut big = rec(&store, "r1", "k", None);
        big.response = rawv(&format!("\"{}\"", "x".repeat(1000)));
        assert!(!store.save(big), "a record over the limit is not kept");
        let mut ids = Vec::new();
        for i in 0..3 {
            let mut r = rec(&store, &format!("r{i}"), "k", None);
            r.response = rawv(&format!("\"{}\"", "x".repeat(700)));
            ids.push(r.id.clone());
            assert!(store.save(r));
        }
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        let used = store.backend.usage("k").await.unwrap();
        assert!(used > 2100 && used < 2500, "{used}");
        let e = store.admit("k", 500).await.unwrap_err();
        assert_eq!(e.status, 429);
        assert_eq!(e.code, Some("stored_responses_quota_exceeded"));
        store.admit("other", 500).await.unwrap();
        assert!(store.delete("k", &ids[0]).await.unwrap());
        store.admit("k", 500).await.unwrap();
    }

    #[tokio::test]
    async fn expired_records_are_gone() {
        let store = Arc::new(ResponseStore::memory());
        let mut r = rec(&store, "old", "k", None);
        r.expires_at_ms = now_ms() - 1;
        store.save(r);
        assert!(store.lookup("k", "old").await.unwrap().is_none());
    }

    #[test]
    fn pages_follow_order_limit_and_after() {
        let store = ResponseStore::memory();
        let mut r = rec(&store, "r", "k", None);
        r.input_items = (0..5)
            .map(|i| {
                rawv(&format!(
                    r#"{{"type":"message","id":"m{i}","role":"user","content":[]}}"#
                ))
            })
            .collect();
        let q = ListQuery::parse(Some("order=asc&limit=2")).unwrap();
        let p = list_page(&r, &q);
        assert_eq!(p["first_id"], "m0");
        assert_eq!(p["last_id"], "m1");
        assert_eq!(p["has_more"], true);
        let q = ListQuery::parse(Some("order=asc&limit=2&after=m3")).unwrap();
        let p = list_page(&r, &q);
        assert_eq!(p["data"].as_array().unwrap().len(), 1);
        assert_eq!(p["has_more"], false);
        let p = list_page(&r, &ListQuery::parse(None).unwrap());
        assert_eq!(p["first_id"], "m4");
        assert_eq!(p["object"], "list");
        assert!(ListQuery::parse(Some("order=up")).is_err());
        assert!(ListQuery::parse(Some("limit=0")).is_err());
        assert!(ListQuery::parse(Some("limit=101")).is_err());
    }
}
