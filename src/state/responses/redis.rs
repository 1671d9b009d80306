//! Stored responses in Redis (fleet mode, `--redis`): one string key per
//! response, `{prefix}response:{id}`, holding the record as JSON and set
//! with `PX` to the TTL, so every replica sees the same responses and Redis
//! expires them. The connection is made on first use (a Redis that is down
//! at start does not stop the gateway) and re-made by the connection
//! manager after a failure.
//!
//! A key's usage (the quota): three keys per client key, in one hash slot
//! (`{prefix}{{key_id}}:…`, as the limits backend's): `stored_exp`, a sorted
//! set of its response ids scored by expiry; `stored_bytes`, a hash of
//! each id's size; `stored_total`, their sum. A write adds (replacing an
//! id's old size), a delete subtracts, and reading the usage first drops
//! the ids whose expiry has passed (Redis expired their records), each step
//! one Lua script, so the total stays exact across replicas and restarts.
//! The three keys expire with the key's last record.

use super::{now_ms, Backend, StoreError, StoredResponse};
use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Script;
use std::time::Duration;
use tokio::sync::OnceCell;

/// The Redis backend.
pub struct Redis {
    client: redis::Client,
    prefix: String,
    conn: OnceCell<ConnectionManager>,
    add: Script,
    remove: Script,
    usage: Script,
}

/// KEYS: exp, bytes, total. ARGV: id, size, expires_at_ms, ttl_ms.
const ADD: &str = r"
local old = redis.call('HGET', KEYS[2], ARGV[1])
if old then redis.call('DECRBY', KEYS[3], old) end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
local total = redis.call('INCRBY', KEYS[3], ARGV[2])
local ttl = tonumber(ARGV[4])
for i = 1, 3 do
  if redis.call('PTTL', KEYS[i]) < ttl then redis.call('PEXPIRE', KEYS[i], ttl) end
end
return total
";

/// KEYS: exp, bytes, total. ARGV: id.
const REMOVE: &str = r"
local old = redis.call('HGET', KEYS[2], ARGV[1])
if old then
  redis.call('DECRBY', KEYS[3], old)
  redis.call('HDEL', KEYS[2], ARGV[1])
end
redis.call('ZREM', KEYS[1], ARGV[1])
return 0
";

/// KEYS: exp, bytes, total. ARGV: now_ms. Drops expired ids (a thousand a
/// call at most: the rest on the next), returns the total.
const USAGE: &str = r"
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 1000)
for _, id in ipairs(gone) do
  local b = redis.call('HGET', KEYS[2], id)
  if b then
    redis.call('DECRBY', KEYS[3], b)
    redis.call('HDEL', KEYS[2], id)
  end
  redis.call('ZREM', KEYS[1], id)
end
local t = tonumber(redis.call('GET', KEYS[3]) or '0')
if t < 0 then t = 0 end
return t
";

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redis")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

fn err(e: impl std::fmt::Display) -> StoreError {
    StoreError(format!("redis: {e}"))
}

impl Redis {
    /// A backend for `url` (`redis://host:port[/db]`) whose keys start with `prefix`.
    pub fn new(url: &str, prefix: &str) -> Result<Redis, String> {
        let client = redis::Client::open(url).map_err(|e| format!("--redis {url}: {e}"))?;
        Ok(Redis {
            client,
            prefix: prefix.to_string(),
            conn: OnceCell::new(),
            add: Script::new(ADD),
            remove: Script::new(REMOVE),
            usage: Script::new(USAGE),
        })
    }

    fn key(&self, id: &str) -> String {
        format!("{}response:{id}", self.prefix)
    }

    /// The usage keys of `key_id`: expiries, sizes, total.
    fn usage_keys(&self, key_id: &str) -> [String; 3] {
        let base = format!("{}{{{key_id}}}:stored_", self.prefix);
        [
            format!("{base}exp"),
            format!("{base}bytes"),
            format!("{base}total"),
        ]
    }

    async fn conn(&self) -> Result<ConnectionManager, StoreError> {
        self.conn
            .get_or_try_init(|| async {
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(Duration::from_secs(2)))
                    .set_response_timeout(Some(Duration::from_secs(2)))
                    .set_number_of_retries(2);
                ConnectionManager::new_with_config(self.client.clone(), config)
                    .await
                    .map_err(err)
            })
            .await
            .cloned()
    }
}

#[async_trait]
impl Backend for Redis {
    async fn put(&self, rec: &StoredResponse) -> Result<(), StoreError> {
        let text = rec.to_json();
        let ttl_ms = rec.expires_at_ms.saturating_sub(now_ms()).max(1);
        let mut c = self.conn().await?;
        // Counted first: a record is never stored uncounted (a failed SET
        // leaves its size counted until it expires, erring on the safe side).
        let k = self.usage_keys(&rec.key_id);
        self.add
            .key(&k[0])
            .key(&k[1])
            .key(&k[2])
            .arg(&rec.id)
            .arg(rec.bytes())
            .arg(rec.expires_at_ms)
            .arg(ttl_ms)
            .invoke_async::<i64>(&mut c)
            .await
            .map_err(err)?;
        redis::cmd("SET")
            .arg(self.key(&rec.id))
            .arg(text)
            .arg("PX")
            .arg(ttl_ms)
            .query_async::<()>(&mut c)
            .await
            .map_err(err)
    }

    async fn get(&self, id: &str) -> Result<Option<StoredResponse>, StoreError> {
        let mut c = self.conn().await?;
        let text: Option<String> = redis::cmd("GET")
            .arg(self.key(id))
            .query_async(&mut c)
            .await
            .map_err(err)?;
        match text {
            Some(t) => serde_json::from_str::<StoredResponse>(&t)
                .map(|r| Some(r).filter(|r| !r.expired(now_ms())))
                .map_err(err),
            None => Ok(None),
        }
    }

    async fn delete(&self, key_id: &str, id: &str) -> Result<bool, StoreError> {
        let mut c = self.conn().await?;
        let n: i64 = redis::cmd("DEL")
            .arg(self.key(id))
            .query_async(&mut c)
            .await
            .map_err(err)?;
        let k = self.usage_keys(key_id);
        self.remove
            .key(&k[0])
            .key(&k[1])
            .key(&k[2])
            .arg(id)
            .invoke_async::<i64>(&mut c)
            .await
            .map_err(err)?;
        Ok(n > 0)
    }

    async fn usage(&self, key_id: &str) -> Result<u64, StoreError> {
        let mut c = self.conn().await?;
        let k = self.usage_keys(key_id);
        let n: i64 = self
            .usage
            .key(&k[0])
            .key(&k[1])
            .key(&k[2])
            .arg(now_ms())
            .invoke_async(&mut c)
            .await
            .map_err(err)?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    fn shared(&self) -> bool {
        true
    }
    fn name(&self) -> &'static str {
        "redis"
    }
}
