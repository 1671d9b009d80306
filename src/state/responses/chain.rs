//! Continuing a stored response: the chain of `previous_response_id` links,
//! oldest first, and the items a continuation starts with.

use super::{quote_single, ResponseStore, StoredResponse};
use crate::error::GatewayError;
use crate::util::json_text::JsonText;
use std::sync::Arc;

/// The longest chain of `previous_response_id` links followed.
pub const MAX_CHAIN: usize = 1000;

/// Why a continuation could not be built.
fn not_found_previous(id: &str) -> GatewayError {
    GatewayError::invalid_param(
        "previous_response_id",
        format!("Previous response with id {} not found.", quote_single(id)),
    )
    .with_code("previous_response_not_found")
}

impl ResponseStore {
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
pub fn inherited_items(chain: &[Arc<StoredResponse>]) -> Vec<JsonText> {
    let mut out = Vec::new();
    for rec in chain {
        out.extend(rec.input_items.iter().cloned());
        out.extend(rec.output_items());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::responses::store::tests::rec;

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
}
