//! What a reservation holds of a key's (and its team's) tpm window and
//! budget, as a backend records it when it reserves and reads it when it
//! settles or releases.

use super::Nanos;
use crate::config::Budget;

/// What a reservation holds of one subject: the key, or its team.
#[derive(Debug, Clone)]
pub(crate) struct Part {
    /// The key's or the team's id.
    pub id: String,
    /// Whether the subject's tpm window holds the reservation's tokens.
    pub tpm: bool,
    /// The budget and the period the cost was reserved in.
    pub budget: Option<(Budget, String)>,
}

impl Part {
    /// Whether this part holds anything until the request settles.
    pub fn holds(&self) -> bool {
        self.tpm || self.budget.is_some()
    }
}

/// What a reservation holds until it is settled or released.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    /// The key's part.
    pub key: Part,
    /// The team's part, when the key is in a team that limits the request.
    pub team: Option<Part>,
    /// Tokens reserved (each part's tpm window holds them when it has a tpm).
    pub tokens: u64,
    /// Cost reserved (each part's budget holds it when it has a budget).
    pub cost: Nanos,
    /// The second the tokens were counted in (their window bucket).
    pub bucket: u64,
    /// The reservation's id in the shared store.
    pub id: String,
}

impl Held {
    /// Whether any budget (the key's or the team's) holds the cost.
    pub fn has_budget(&self) -> bool {
        self.key.budget.is_some() || self.team.as_ref().is_some_and(|t| t.budget.is_some())
    }
}

/// The smaller of two budgets left (either may be absent).
pub(crate) fn least(a: Option<Nanos>, b: Option<Nanos>) -> Option<Nanos> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// What a backend's reserve step gives back: `None` when nothing is held (a
/// shared store that failed open), else what is held (if anything needs
/// settling) and the budget left (the lesser of the key's and the team's).
pub(crate) type Reserved = Option<(Option<Held>, Option<Nanos>)>;
