//! What a reservation holds of a key's tpm window and budget, as a backend
//! records it when it reserves and reads it when it settles or releases.

use super::Nanos;
use crate::config::Budget;

/// What a reservation holds until it is settled or released.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    pub key_id: String,
    /// Tokens reserved against tpm (0 when the key has no tpm).
    pub tokens: u64,
    /// Whether the key's tpm window holds the tokens.
    pub tpm: bool,
    /// The second the tokens were counted in (their window bucket).
    pub bucket: u64,
    /// Cost reserved against the budget (0 when the key has no budget).
    pub cost: Nanos,
    /// The budget and the period the cost was reserved in.
    pub budget: Option<(Budget, String)>,
    /// The reservation's id in the shared store.
    pub id: String,
}

/// What a backend's reserve step gives back: `None` when nothing is held (a
/// shared store that failed open), else what is held (if anything needs
/// settling) and the budget left.
pub(crate) type Reserved = Option<(Option<Held>, Option<Nanos>)>;
