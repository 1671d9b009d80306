//! The Responses API's stored responses at the proxy (docs/api.md "Stored responses"): what a
//! `POST /v1/responses` means for the store (kept or not, continuing which
//! response), the continuation's expanded input, the envelope of a stored
//! response, its write once answered, and the stored-response routes
//! (`GET`/`DELETE /v1/responses/{id}`, `GET /v1/responses/{id}/input_items`).
//!
//! Quota (`state::responses`): a request asking to be stored is admitted
//! against the record limit and its key's quota before it goes upstream
//! (400 naming `store`, or 429 `stored_responses_quota_exceeded`); a whole
//! answer that makes its record too large is sent with `store: false` and
//! not kept.

use super::ctx::RequestCtx;
use super::respond;
use super::Gateway;
use crate::error::{ErrorKind, GatewayError};
use crate::family::Family;
use crate::listener::Session;
use crate::protocol::responses::envelope::Envelope;
use crate::state::responses::{
    inherited_items, list_page, new_response_id, normalise_input, quote_single, ListQuery,
};
use crate::util::json_text::JsonText;
use crate::util::jsonedit::{self, Edit};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

/// What one Responses request means for the store.
#[derive(Debug)]
pub struct Turn {
    /// Kept once answered (`store` not false, on `POST /v1/responses`).
    pub store: bool,
    /// The response id the client sees when stored.
    pub id: Option<String>,
    /// The response it continues.
    pub previous: Option<String>,
    pub instructions: Option<JsonText>,
    /// The request's own input in item form (only when stored).
    pub input_items: Vec<JsonText>,
    /// The record's bytes known before the answer: input items and instructions.
    pub known_bytes: u64,
}

impl Turn {
    /// What the response object carries: the gateway's id, `store`,
    /// `previous_response_id` and `instructions`; `None` for a response that
    /// is neither stored nor a continuation (left as it was).
    pub fn envelope(&self) -> Option<Envelope> {
        if !self.store && self.previous.is_none() && self.id.is_none() {
            return None;
        }
        let mut fields = Vec::new();
        if let Some(p) = &self.previous {
            fields.push((
                "previous_response_id",
                serde_json::to_vec(p).unwrap_or_default(),
            ));
        }
        if self.store {
            fields.push(("store", b"true".to_vec()));
        } else if self.id.is_some() {
            // Meant to be stored, but too large to keep: say so.
            fields.push(("store", b"false".to_vec()));
        }
        if let Some(i) = &self.instructions {
            fields.push(("instructions", i.get().as_bytes().to_vec()));
        }
        Some(Envelope {
            id: self.id.clone(),
            fields,
        })
    }
}

#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    instructions: Option<&'a RawValue>,
    #[serde(borrow, default)]
    store: Option<&'a RawValue>,
    #[serde(borrow, default)]
    previous_response_id: Option<&'a RawValue>,
}

/// Reads what `body` (a `POST /v1/responses` or `/input_tokens` body) means
/// for the store; a continuation's body comes back with `input` expanded to
/// the stored conversation (every earlier turn's input and output items,
/// oldest first, then the new input) and `previous_response_id` removed, so
/// any upstream (translated or passed through) sees the whole conversation.
/// `storing` is false for the count route (nothing is kept there).
pub async fn prepare(
    gw: &Gateway,
    key_id: &str,
    body: Bytes,
    storing: bool,
) -> Result<(Bytes, Option<Turn>), GatewayError> {
    let Ok(p) = serde_json::from_slice::<Peek<'_>>(&body) else {
        // Not a request object: validation says why.
        return Ok((body, None));
    };
    let previous = match p.previous_response_id {
        None => None,
        Some(raw) => Some(serde_json::from_str::<String>(raw.get()).map_err(|_| {
            GatewayError::invalid_param(
                "previous_response_id",
                "previous_response_id must be a string (the id of a stored response)",
            )
        })?),
    };
    let store = storing && p.store.is_none_or(|s| s.get().trim() != "false");
    let own_items = match p.input {
        Some(input) if store || previous.is_some() => normalise_input(input),
        _ => Vec::new(),
    };
    let instructions = p.instructions.map(JsonText::from);
    let known_bytes = if store {
        let items: usize = own_items.iter().map(|i| i.get().len()).sum();
        let known = items + instructions.as_ref().map_or(0, |i| i.get().len());
        let known = u64::try_from(known).unwrap_or(u64::MAX);
        gw.responses.admit(key_id, known).await?;
        known
    } else {
        0
    };
    let mut body = body.clone();
    if let Some(prev) = &previous {
        let chain = gw.responses.chain(key_id, prev).await?;
        let mut items = inherited_items(&chain);
        items.extend(own_items.iter().cloned());
        let mut input = Vec::with_capacity(items.iter().map(|i| i.get().len() + 1).sum());
        input.push(b'[');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                input.push(b',');
            }
            input.extend_from_slice(item.get().as_bytes());
        }
        input.push(b']');
        let mut edits = vec![Edit::remove("previous_response_id")];
        if p.input.is_some() {
            edits.push(Edit::set("input", input));
            if let Some(edited) = jsonedit::apply(&body, &edits) {
                body = Bytes::from(edited);
            }
        } else if let Some(edited) = jsonedit::apply(&body, &edits) {
            // No new input: the stored conversation is the whole input.
            let mut out = Vec::with_capacity(edited.len() + input.len() + 10);
            if let Some(open) = edited.iter().position(|&b| b == b'{') {
                out.extend_from_slice(&edited[..=open]);
                out.extend_from_slice(b"\"input\":");
                out.extend_from_slice(&input);
                let rest = &edited[open + 1..];
                if rest.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'}') {
                    out.push(b',');
                }
                out.extend_from_slice(rest);
                body = Bytes::from(out);
            }
        }
    }
    let turn = Turn {
        store,
        id: store.then(new_response_id),
        previous,
        instructions,
        input_items: if store { own_items } else { Vec::new() },
        known_bytes,
    };
    Ok((body, Some(turn)))
}

/// A whole response body for a client of this turn: the envelope applied,
/// and, when stored, its write started (off the response path). A record
/// the answer makes too large is not kept, and the body says `store: false`.
pub fn finish_body(gw: &Gateway, key_id: &str, mut turn: Turn, body: Vec<u8>) -> Vec<u8> {
    let Some(env) = turn.envelope() else {
        return body;
    };
    let out = env.apply(&body).unwrap_or_else(|| body.clone());
    let bytes = turn
        .known_bytes
        .saturating_add(u64::try_from(out.len()).unwrap_or(u64::MAX));
    if turn.store && bytes > gw.responses.max_record_bytes() {
        if let Some(id) = &turn.id {
            gw.responses.not_kept(id, bytes);
        }
        turn.store = false;
        return match turn.envelope() {
            Some(env) => env.apply(&body).unwrap_or(body),
            None => body,
        };
    }
    commit(gw, key_id, turn, &out);
    out
}

/// Stores `response` (the object the client received) for this turn, if it
/// is kept. Never fails the request: a problem is logged and counted.
///
/// `response` is JSON by where it comes from, and is not parsed again
/// (`JsonText::valid`): a whole answer passed through was checked whole
/// (`passthrough::rewrite_body`) or written by a translation's encoder; a
/// stream's is its encoder's, or the response object of the upstream's
/// terminal event, which the peek accepted whole (`protocol::responses::peek`:
/// a skim that agrees with serde, or serde), with the envelope's JSON
/// values spliced in.
pub fn commit(gw: &Gateway, key_id: &str, turn: Turn, response: &[u8]) {
    if !turn.store {
        return;
    }
    let Some(id) = turn.id else { return };
    // `JsonText::valid` keeps the object's own bytes (an upstream's body
    // may have whitespace around it).
    let raw = String::from_utf8(response.to_vec())
        .ok()
        .map(JsonText::valid)
        .filter(|t| t.get().starts_with('{'));
    let Some(raw) = raw else {
        gw.responses.count_failure();
        log::error!("stored response {id}: the response is not a JSON object; not stored");
        return;
    };
    let rec = gw.responses.record(
        id,
        key_id,
        turn.previous,
        turn.instructions,
        turn.input_items,
        raw,
    );
    gw.responses.save(rec);
}

fn not_found(id: &str) -> GatewayError {
    GatewayError::new(
        ErrorKind::NotFound,
        format!("Response with id {} not found.", quote_single(id)),
    )
}

/// `GET`/`DELETE /v1/responses/{id}`, `GET .../input_items`: reads, lists the input items of, or deletes the stored response `id`
/// of the key `key_id` (another key's response is not found).
pub async fn serve(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    key_id: &str,
    id: &str,
    input_items: bool,
) -> pingora_core::Result<()> {
    let family = Family::Responses;
    let method = session.req_header().method.as_str().to_string();
    let query = session.req_header().uri.query().map(str::to_string);
    let result = async {
        if method == "DELETE" {
            return if gw.responses.delete(key_id, id).await? {
                let body = serde_json::json!({"id": id, "object": "response", "deleted": true});
                Ok(Bytes::from(body.to_string()))
            } else {
                Err(not_found(id))
            };
        }
        let q = if input_items {
            Some(ListQuery::parse(query.as_deref())?)
        } else {
            None
        };
        let rec = gw
            .responses
            .lookup(key_id, id)
            .await?
            .ok_or_else(|| not_found(id))?;
        Ok(match q {
            Some(q) => Bytes::from(list_page(&rec, &q).to_string()),
            None => Bytes::from(rec.response.get().to_string()),
        })
    }
    .await;
    match result {
        Ok(body) => respond::json(session, ctx, 200, body).await,
        Err(e) => respond::error(session, ctx, family, &e).await,
    }
}
