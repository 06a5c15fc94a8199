//! Idempotency keys in SQLite (see [`cairn_store::IdempotencyStore`]).

use async_trait::async_trait;
use cairn_store::{
    Claim, IDEMPOTENCY_LEASE_MILLIS, IDEMPOTENCY_TTL_MILLIS, IdempotencyStore, KeyRow, Result,
    StoredAnswer, decide,
};
use cairn_types::Timestamp;
use rusqlite::{OptionalExtension, params};

use crate::{SqliteStore, sql};

/// Takes the key unless a row that has not lapsed holds it (see `cairn_store::lapsed`).
const CLAIM: &str = "INSERT INTO idempotency_keys (scope, key, fingerprint, created_at) \
     VALUES (?1, ?2, ?3, ?4) \
     ON CONFLICT (scope, key) DO UPDATE SET fingerprint = excluded.fingerprint, \
     created_at = excluded.created_at, status = NULL, content_type = NULL, body = NULL \
     WHERE idempotency_keys.created_at <= ?5 \
     OR (idempotency_keys.status IS NULL AND idempotency_keys.created_at <= ?6) \
     RETURNING 1";

#[async_trait]
impl IdempotencyStore for SqliteStore {
    async fn claim_idempotency(
        &self,
        scope: &str,
        key: &str,
        fingerprint: &str,
        now: Timestamp,
    ) -> Result<Claim> {
        let (scope, key, fingerprint) = (scope.to_owned(), key.to_owned(), fingerprint.to_owned());
        let now = now.as_millis();
        self.write(move |tx| {
            let claimed = tx
                .prepare_cached(CLAIM)
                .map_err(sql)?
                .query_row(
                    params![
                        scope,
                        key,
                        fingerprint,
                        now,
                        now - IDEMPOTENCY_TTL_MILLIS,
                        now - IDEMPOTENCY_LEASE_MILLIS
                    ],
                    |_| Ok(()),
                )
                .optional()
                .map_err(sql)?;
            if claimed.is_some() {
                return Ok(Claim::Claimed);
            }
            let row = tx
                .prepare_cached(
                    "SELECT fingerprint, created_at, status, content_type, body \
                     FROM idempotency_keys WHERE scope = ?1 AND key = ?2",
                )
                .map_err(sql)?
                .query_row(params![scope, key], |row| {
                    let status: Option<u16> = row.get(2)?;
                    Ok(KeyRow {
                        fingerprint: row.get(0)?,
                        created_at: Timestamp::from_millis(row.get(1)?),
                        answer: match status {
                            Some(status) => Some(StoredAnswer {
                                status,
                                content_type: row.get(3)?,
                                body: row.get::<_, Option<Vec<u8>>>(4)?.unwrap_or_default(),
                            }),
                            None => None,
                        },
                    })
                })
                .map_err(sql)?;
            Ok(decide(row, &fingerprint))
        })
        .await
    }

    async fn complete_idempotency(
        &self,
        scope: &str,
        key: &str,
        answer: &StoredAnswer,
    ) -> Result<()> {
        let (scope, key, answer) = (scope.to_owned(), key.to_owned(), answer.clone());
        self.write(move |tx| {
            tx.prepare_cached(
                "UPDATE idempotency_keys SET status = ?3, content_type = ?4, body = ?5 \
                 WHERE scope = ?1 AND key = ?2 AND status IS NULL",
            )
            .map_err(sql)?
            .execute(params![scope, key, answer.status, answer.content_type, answer.body])
            .map_err(sql)?;
            Ok(())
        })
        .await
    }

    async fn release_idempotency(&self, scope: &str, key: &str) -> Result<()> {
        let (scope, key) = (scope.to_owned(), key.to_owned());
        self.write(move |tx| {
            tx.prepare_cached(
                "DELETE FROM idempotency_keys WHERE scope = ?1 AND key = ?2 AND status IS NULL",
            )
            .map_err(sql)?
            .execute(params![scope, key])
            .map_err(sql)?;
            Ok(())
        })
        .await
    }

    async fn purge_idempotency(&self, now: Timestamp) -> Result<u64> {
        let now = now.as_millis();
        self.write(move |tx| {
            let purged = tx
                .prepare_cached(
                    "DELETE FROM idempotency_keys WHERE created_at <= ?1 \
                     OR (status IS NULL AND created_at <= ?2)",
                )
                .map_err(sql)?
                .execute(params![now - IDEMPOTENCY_TTL_MILLIS, now - IDEMPOTENCY_LEASE_MILLIS])
                .map_err(sql)?;
            Ok(purged as u64)
        })
        .await
    }
}
