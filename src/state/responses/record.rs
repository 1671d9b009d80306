//! A stored response as every backend keeps it (its response object, input
//! items, instructions and link to the previous response), and its id.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::time::{SystemTime, UNIX_EPOCH};

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

/// A fresh response id: `resp_` and 48 hex digits, the length of OpenAI's
/// ids (which also start with the time): 12 of the Unix time in
/// milliseconds, then 36 from the thread's cryptographic generator
/// (ChaCha12, seeded and reseeded from the OS; 144 bits: unique and not
/// guessable). Ids made later sort after, so the embedded store's id index
/// grows at its end: a commit of many records rewrites a page or two of it
/// instead of a page per record at random.
pub fn new_response_id() -> String {
    let mut b = [0u8; 24];
    b[..6].copy_from_slice(&now_ms().to_be_bytes()[2..]);
    rand::RngCore::fill_bytes(&mut rand::thread_rng(), &mut b[6..]);
    let mut s = String::with_capacity(53);
    s.push_str("resp_");
    crate::util::hex::push(&mut s, &b);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_long() {
        let a = new_response_id();
        let b = new_response_id();
        assert_ne!(a, b);
        assert!(a.starts_with("resp_") && a.len() == 53, "{a}");
        // The time first: a later id sorts after (the clock moved on).
        let before = now_ms();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let c = new_response_id();
        let stamp = u64::from_str_radix(&c[5..17], 16).unwrap();
        assert!(stamp > before && stamp <= now_ms(), "{c}");
        assert!(c > a, "{c} {a}");
    }
}
