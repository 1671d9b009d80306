//! Admission: the synchronous decisions taken about a request before any
//! upstream is called. Peeks and validation against the model's metadata
//! (`validate`), adapt or refuse (`policy`), token counts (`tokens`).
//!
//! May import: `adjust`, `config`, `error`, `family`, `ir`, `protocol`, `util`.

pub mod policy;
pub mod tokens;
pub mod validate;
