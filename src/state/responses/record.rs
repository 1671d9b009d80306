//! A stored response as every backend keeps it (its response object, input
//! items, instructions and link to the previous response), and its id.

use crate::util::json_text::JsonText;
use crate::util::json_write;
use serde::Deserialize;
use std::time::{SystemTime, UNIX_EPOCH};

/// One stored response. Backends keep it as the JSON text
/// [`StoredResponse::to_json`] writes and read it back with serde.
#[derive(Debug, Clone, Deserialize)]
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
    pub instructions: Option<JsonText>,
    /// The request's own input items (not the inherited ones), in item form.
    pub input_items: Vec<JsonText>,
    /// The response object as the client received it.
    pub response: JsonText,
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

    /// The record as JSON text (UTF-8), what the persistent backends keep:
    /// an object of its members, the JSON ones written as they are (no
    /// second parse, as serde's `RawValue` would make, nor a UTF-8 pass
    /// over the whole: only whole strings go in).
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_json(&mut out);
        out
    }

    /// [`StoredResponse::to_json`], appended to `out` (a writer reuses one
    /// buffer for every record it writes).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        // Its JSON members ([`StoredResponse::bytes`]), their commas, and
        // room for the rest.
        let json = usize::try_from(self.bytes()).unwrap_or(0);
        out.reserve(200 + json + self.input_items.len());
        out.extend_from_slice(b"{\"id\":");
        json_write::string(out, &self.id);
        out.extend_from_slice(b",\"key_id\":");
        json_write::string(out, &self.key_id);
        out.extend_from_slice(b",\"created_at\":");
        json_write::u64(out, self.created_at);
        out.extend_from_slice(b",\"expires_at_ms\":");
        json_write::u64(out, self.expires_at_ms);
        out.extend_from_slice(b",\"previous_response_id\":");
        json_write::or_null(
            out,
            self.previous_response_id.as_deref(),
            json_write::string,
        );
        out.extend_from_slice(b",\"instructions\":");
        json_write::or_null(out, self.instructions.as_ref(), |o, i| {
            o.extend_from_slice(i.get().as_bytes());
        });
        out.extend_from_slice(b",\"input_items\":[");
        for (n, item) in self.input_items.iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            out.extend_from_slice(item.get().as_bytes());
        }
        out.extend_from_slice(b"],\"response\":");
        out.extend_from_slice(self.response.get().as_bytes());
        out.push(b'}');
    }

    /// The response's `output` items.
    pub fn output_items(&self) -> Vec<JsonText> {
        #[derive(Deserialize)]
        struct Output {
            #[serde(default)]
            output: Option<Vec<JsonText>>,
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
    fn a_record_reads_back_as_written() {
        let text = |s: &str| JsonText::parse(s.to_string()).unwrap();
        let mut rec = StoredResponse {
            id: "resp_\"q\"\u{e9}\n".into(),
            key_id: "k\\1".into(),
            created_at: 1_700_000_000,
            expires_at_ms: u64::MAX,
            previous_response_id: Some("resp_0".into()),
            instructions: Some(text(r#""be \"brief\"""#)),
            input_items: vec![text(r#"{"type":"message","content":[]}"#), text("7")],
            response: text(r#"{"id":"x","output":[{"a":null}]}"#),
        };
        for _ in 0..2 {
            let json = rec.to_json();
            let back: StoredResponse = serde_json::from_slice(&json).unwrap();
            assert_eq!(
                (&back.id, &back.key_id, back.created_at, back.expires_at_ms),
                (&rec.id, &rec.key_id, rec.created_at, rec.expires_at_ms)
            );
            assert_eq!(back.previous_response_id, rec.previous_response_id);
            assert_eq!(back.instructions, rec.instructions);
            assert_eq!(back.input_items, rec.input_items);
            assert_eq!(back.response, rec.response);
            assert_eq!(back.bytes(), rec.bytes());
            // And with the optional members absent.
            rec.previous_response_id = None;
            rec.instructions = None;
            rec.input_items.clear();
        }
    }

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
