//! Idempotency keys of HTTP writes: a client's `Idempotency-Key` claimed once, its first
//! answer kept for a day and given again to a retry (`cairn-server`'s `idempotency.rs`).
//! Both backends keep the rows in one table with the same statements; the decision on what
//! a stored row means for a new request is [`decide`], shared.

use async_trait::async_trait;
use cairn_types::Timestamp;

use crate::Result;

/// How long a key's answer is kept and given again: a day.
pub const IDEMPOTENCY_TTL_MILLIS: i64 = 24 * 60 * 60 * 1000;

/// How long a claim whose answer never came (its daemon died) holds its key; after it, a
/// retry runs the request again.
pub const IDEMPOTENCY_LEASE_MILLIS: i64 = 10 * 60 * 1000;

/// An answer kept for a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredAnswer {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

/// What a claim of a key found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The key is this request's now: run it, then [`IdempotencyStore::complete_idempotency`]
    /// (or [`IdempotencyStore::release_idempotency`] to let a retry run it again).
    Claimed,
    /// The same request was answered already: give its answer again.
    Replay(StoredAnswer),
    /// The same request is running now (another connection, another daemon).
    Running,
    /// The key was used for another request (method, path or body differ).
    Reused,
}

/// A key's row as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRow {
    pub fingerprint: String,
    pub created_at: Timestamp,
    /// `None` while the request is running.
    pub answer: Option<StoredAnswer>,
}

/// Whether a stored row no longer holds its key at `now`: past the day, or a claim whose
/// answer never came within the lease. Both backends' claims overwrite such a row.
pub fn lapsed(created_at: Timestamp, answered: bool, now: Timestamp) -> bool {
    let age = now.as_millis() - created_at.as_millis();
    age >= IDEMPOTENCY_TTL_MILLIS || (!answered && age >= IDEMPOTENCY_LEASE_MILLIS)
}

/// What a request with `fingerprint` gets from the row that holds its key (one that did not
/// lapse: a lapsed row was overwritten by the claim).
pub fn decide(row: KeyRow, fingerprint: &str) -> Claim {
    if row.fingerprint != fingerprint {
        return Claim::Reused;
    }
    match row.answer {
        Some(answer) => Claim::Replay(answer),
        None => Claim::Running,
    }
}

/// Storage for idempotency keys, by `scope` (who sent it: a hash of the credentials) and key.
#[async_trait]
pub trait IdempotencyStore: Send + Sync {
    /// Claims `key` for a request with `fingerprint`, unless a row holds it (see [`decide`]).
    /// Atomic across daemons sharing the database.
    async fn claim_idempotency(
        &self,
        scope: &str,
        key: &str,
        fingerprint: &str,
        now: Timestamp,
    ) -> Result<Claim>;

    /// Keeps the answer of a claimed key.
    async fn complete_idempotency(
        &self,
        scope: &str,
        key: &str,
        answer: &StoredAnswer,
    ) -> Result<()>;

    /// Gives a claimed key up (the request failed in a way a retry may fix).
    async fn release_idempotency(&self, scope: &str, key: &str) -> Result<()>;

    /// Deletes the rows that lapsed before `now`; how many.
    async fn purge_idempotency(&self, now: Timestamp) -> Result<u64>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(fingerprint: &str, answer: Option<StoredAnswer>) -> KeyRow {
        KeyRow {
            fingerprint: fingerprint.to_owned(),
            created_at: Timestamp::from_millis(0),
            answer,
        }
    }

    #[test]
    fn a_row_replays_blocks_or_refuses() {
        let answer = StoredAnswer { status: 201, content_type: None, body: b"{}".to_vec() };
        assert_eq!(decide(row("a", Some(answer.clone())), "a"), Claim::Replay(answer.clone()));
        assert_eq!(decide(row("a", None), "a"), Claim::Running);
        assert_eq!(decide(row("a", Some(answer)), "b"), Claim::Reused);
        assert_eq!(decide(row("a", None), "b"), Claim::Reused);
    }

    #[test]
    fn rows_lapse_after_a_day_and_claims_after_their_lease() {
        let at = |millis| Timestamp::from_millis(millis);
        assert!(!lapsed(at(0), true, at(IDEMPOTENCY_TTL_MILLIS - 1)));
        assert!(lapsed(at(0), true, at(IDEMPOTENCY_TTL_MILLIS)));
        assert!(!lapsed(at(0), false, at(IDEMPOTENCY_LEASE_MILLIS - 1)));
        assert!(lapsed(at(0), false, at(IDEMPOTENCY_LEASE_MILLIS)));
    }
}
