//! Idempotency keys on PostgreSQL (see [`cairn_store::IdempotencyStore`]): one row a key,
//! claimed by one atomic statement, so daemons sharing the database agree on who runs it.

use async_trait::async_trait;
use cairn_store::{
    Claim, IDEMPOTENCY_LEASE_MILLIS, IDEMPOTENCY_TTL_MILLIS, IdempotencyStore, KeyRow, Result,
    StoredAnswer, decide,
};
use cairn_types::Timestamp;

use crate::PgStore;
use crate::rows::{execute, query_opt};

/// Takes the key unless a row that has not lapsed holds it (see `cairn_store::lapsed`).
const CLAIM: &str = "INSERT INTO idempotency_keys (scope, key, fingerprint, created_at) \
     VALUES ($1, $2, $3, $4) \
     ON CONFLICT (scope, key) DO UPDATE SET fingerprint = excluded.fingerprint, \
     created_at = excluded.created_at, status = NULL, content_type = NULL, body = NULL \
     WHERE idempotency_keys.created_at <= $5 \
     OR (idempotency_keys.status IS NULL AND idempotency_keys.created_at <= $6) \
     RETURNING 1";

#[async_trait]
impl IdempotencyStore for PgStore {
    async fn claim_idempotency(
        &self,
        scope: &str,
        key: &str,
        fingerprint: &str,
        now: Timestamp,
    ) -> Result<Claim> {
        let data = (scope.to_owned(), key.to_owned(), fingerprint.to_owned(), now.as_millis());
        self.call(data, |_, client, (scope, key, fingerprint, now)| {
            Box::pin(async move {
                let (expired, abandoned) =
                    (now - IDEMPOTENCY_TTL_MILLIS, now - IDEMPOTENCY_LEASE_MILLIS);
                let claimed =
                    query_opt(client, CLAIM, &[scope, key, fingerprint, now, &expired, &abandoned])
                        .await?;
                if claimed.is_some() {
                    return Ok(Claim::Claimed);
                }
                let row = query_opt(
                    client,
                    "SELECT fingerprint, created_at, status, content_type, body \
                     FROM idempotency_keys WHERE scope = $1 AND key = $2",
                    &[scope, key],
                )
                .await?;
                // Released between the two statements: whoever held it is done with it.
                let Some(row) = row else { return Ok(Claim::Running) };
                let status: Option<i32> = row.get(2);
                let stored = KeyRow {
                    fingerprint: row.get(0),
                    created_at: Timestamp::from_millis(row.get(1)),
                    answer: status.map(|status| StoredAnswer {
                        status: status as u16,
                        content_type: row.get(3),
                        body: row.get::<_, Option<Vec<u8>>>(4).unwrap_or_default(),
                    }),
                };
                Ok(decide(stored, fingerprint))
            })
        })
        .await
    }

    async fn complete_idempotency(
        &self,
        scope: &str,
        key: &str,
        answer: &StoredAnswer,
    ) -> Result<()> {
        let data = (scope.to_owned(), key.to_owned(), answer.clone());
        self.call(data, |_, client, (scope, key, answer)| {
            Box::pin(async move {
                execute(
                    client,
                    "UPDATE idempotency_keys SET status = $3, content_type = $4, body = $5 \
                     WHERE scope = $1 AND key = $2 AND status IS NULL",
                    &[scope, key, &i32::from(answer.status), &answer.content_type, &answer.body],
                )
                .await?;
                Ok(())
            })
        })
        .await
    }

    async fn release_idempotency(&self, scope: &str, key: &str) -> Result<()> {
        self.call((scope.to_owned(), key.to_owned()), |_, client, (scope, key)| {
            Box::pin(async move {
                execute(
                    client,
                    "DELETE FROM idempotency_keys WHERE scope = $1 AND key = $2 AND status IS NULL",
                    &[scope, key],
                )
                .await?;
                Ok(())
            })
        })
        .await
    }

    async fn purge_idempotency(&self, now: Timestamp) -> Result<u64> {
        self.call(now.as_millis(), |_, client, now| {
            Box::pin(async move {
                let (expired, abandoned) =
                    (now - IDEMPOTENCY_TTL_MILLIS, now - IDEMPOTENCY_LEASE_MILLIS);
                execute(
                    client,
                    "DELETE FROM idempotency_keys WHERE created_at <= $1 \
                     OR (status IS NULL AND created_at <= $2)",
                    &[&expired, &abandoned],
                )
                .await
            })
        })
        .await
    }
}
