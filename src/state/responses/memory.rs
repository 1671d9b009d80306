//! Records in process memory: the backend of tests and benches.

use super::{now_ms, Backend, StoreError, StoredResponse};
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::Mutex;

/// Records in process memory (tests and benches; the binary keeps them here
/// only when it starts on a full disk).
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
