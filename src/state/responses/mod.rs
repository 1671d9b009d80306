//! Stored responses (docs/api.md "Stored responses"): a response of the
//! Responses API kept with its input items, so that `previous_response_id`
//! can continue it and the Responses routes can read, list or delete it.
//!
//! The pieces, in the order a request meets them:
//! - [`quota`]: a request that asks to be stored is admitted first
//!   ([`ResponseStore::admit`]): its own input already over the record limit
//!   (`--responses-max-record-bytes`) is a 400 naming `store`; a key whose
//!   records ([`StoredResponse::bytes`]: response object, input items and
//!   instructions as JSON text), summed, plus that input are over its quota
//!   (`--responses-key-quota-bytes`) is a 429
//!   `stored_responses_quota_exceeded`. A record that only its answer makes
//!   too large is answered, not kept (the whole answer says `store: false`;
//!   a stream's already went), logged and counted as a store failure. A
//!   record counts once its write lands (milliseconds after the answer), so
//!   requests of one key in flight together may pass the quota by their own
//!   records;
//! - [`input`]: the request's input items normalised to item form (a string
//!   `input` is one user `message`);
//! - [`chain`]: continuing walks the chain through each record's
//!   `previous_response_id`, oldest first: every turn's input items then its
//!   output items, then the new input. `instructions` are not inherited
//!   (OpenAI's rule): each request carries its own;
//! - [`record`]: the record, the response object exactly as the client
//!   received it (raw bytes, whole or assembled from the stream's terminal
//!   event), the input items, `instructions` and `previous_response_id`,
//!   owned by the key id that made it and expiring after the TTL; its id is
//!   the gateway's own ([`new_response_id`]);
//! - [`store`]: writes happen off the response path ([`ResponseStore::save`]
//!   spawns them); until a write lands the record is served from memory, so
//!   a client that continues at once finds it. A failed write is logged and
//!   counted, never sent to the client;
//! - [`backend`]: where records live, [`Memory`] (tests, benches, see
//!   [`memory`]), the embedded SQLite file ([`sqlite`], `responses_sqlite`)
//!   or Redis ([`redis`], `responses_redis`). Every backend tracks a key's
//!   usage ([`Backend::usage`]): it grows with each write, shrinks when a
//!   record is deleted or expires, and the persistent backends keep it
//!   across restarts;
//! - [`list`]: `GET /v1/responses/{id}/input_items` pages through a record's
//!   input items.

pub mod backend;
pub mod chain;
pub mod input;
pub mod list;
pub mod memory;
pub mod quota;
pub mod record;
pub mod redis;
pub mod sqlite;
pub mod store;

pub use backend::{Backend, StoreError};
pub use chain::{inherited_items, MAX_CHAIN};
pub use input::normalise_input;
pub use list::{list_page, listed_item, ListQuery, Order};
pub use memory::Memory;
pub use quota::{DEFAULT_KEY_QUOTA_BYTES, DEFAULT_MAX_RECORD_BYTES};
pub use record::{new_response_id, now_ms, StoredResponse};
pub use store::{quote_single, ResponseStore, DEFAULT_TTL};
