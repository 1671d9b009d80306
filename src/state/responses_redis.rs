//! Stored responses in Redis (fleet mode, `--redis`): one string key per
//! response, `{prefix}response:{id}`, holding the record as JSON and set
//! with `PX` to the TTL, so every replica sees the same responses and Redis
//! expires them. The connection is made on first use (a Redis that is down
//! at start does not stop the gateway) and re-made by the connection
//! manager after a failure.

use super::responses::{now_ms, Backend, StoreError, StoredResponse};
use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::time::Duration;
use tokio::sync::OnceCell;

/// The Redis backend.
pub struct Redis {
    client: redis::Client,
    prefix: String,
    conn: OnceCell<ConnectionManager>,
}

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
        })
    }

    fn key(&self, id: &str) -> String {
        format!("{}response:{id}", self.prefix)
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
        let text = serde_json::to_string(rec).map_err(err)?;
        let ttl_ms = rec.expires_at_ms.saturating_sub(now_ms()).max(1);
        let mut c = self.conn().await?;
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

    async fn delete(&self, id: &str) -> Result<bool, StoreError> {
        let mut c = self.conn().await?;
        let n: i64 = redis::cmd("DEL")
            .arg(self.key(id))
            .query_async(&mut c)
            .await
            .map_err(err)?;
        Ok(n > 0)
    }

    fn name(&self) -> &'static str {
        "redis"
    }
}
