//! [`cairn_store::KeyStore`] on PostgreSQL: API keys and conversation tokens, found by hash.

use async_trait::async_trait;
use cairn_store::{KeyStore, Result, StoreError};
use cairn_types::{ApiKey, ConversationTokenRecord, Timestamp};
use tokio_postgres::Row;

use crate::{PgStore, pg};

const KEY_COLUMNS: &str =
    "id, name, role, prefix, hash, created_at, revoked_at, expires_at, last_used_at";
const TOKEN_COLUMNS: &str = "id, conversation_id, hash, created_at, expires_at, revoked_at";

fn key_from_row(row: &Row) -> Result<ApiKey> {
    let role: String = row.get(2);
    Ok(ApiKey {
        id: row.get(0),
        name: row.get(1),
        role: role.parse().map_err(StoreError::Corrupt)?,
        prefix: row.get(3),
        hash: row.get(4),
        created_at: Timestamp::from_millis(row.get(5)),
        revoked_at: row.get::<_, Option<i64>>(6).map(Timestamp::from_millis),
        expires_at: row.get::<_, Option<i64>>(7).map(Timestamp::from_millis),
        last_used_at: row.get::<_, Option<i64>>(8).map(Timestamp::from_millis),
    })
}

fn token_from_row(row: &Row) -> ConversationTokenRecord {
    ConversationTokenRecord {
        id: row.get(0),
        conversation_id: row.get(1),
        hash: row.get(2),
        created_at: Timestamp::from_millis(row.get(3)),
        expires_at: Timestamp::from_millis(row.get(4)),
        revoked_at: row.get::<_, Option<i64>>(5).map(Timestamp::from_millis),
    }
}

#[async_trait]
impl KeyStore for PgStore {
    async fn insert_key(&self, key: &ApiKey) -> Result<()> {
        self.call(key.clone(), |_, client, key| {
            Box::pin(async move {
                let statement = client
                    .prepare_cached(&format!(
                        "INSERT INTO api_keys ({KEY_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
                    ))
                    .await
                    .map_err(pg)?;
                client
                    .execute(
                        &statement,
                        &[
                            &key.id,
                            &key.name,
                            &key.role.as_str(),
                            &key.prefix,
                            &key.hash,
                            &key.created_at.as_millis(),
                            &key.revoked_at.map(Timestamp::as_millis),
                            &key.expires_at.map(Timestamp::as_millis),
                            &key.last_used_at.map(Timestamp::as_millis),
                        ],
                    )
                    .await
                    .map_err(pg)?;
                Ok(())
            })
        })
        .await
    }

    async fn find_active_key(&self, hash: &str) -> Result<Option<ApiKey>> {
        self.read(hash.to_owned(), |_, client, hash| {
            Box::pin(async move {
                let statement = client
                    .prepare_cached(&format!(
                        "SELECT {KEY_COLUMNS} FROM api_keys WHERE hash = $1 AND revoked_at IS NULL"
                    ))
                    .await
                    .map_err(pg)?;
                let row = client.query_opt(&statement, &[hash]).await.map_err(pg)?;
                row.as_ref().map(key_from_row).transpose()
            })
        })
        .await
    }

    async fn list_keys(&self) -> Result<Vec<ApiKey>> {
        let sql = format!("SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_at, id");
        self.select(sql, Vec::new(), key_from_row).await
    }

    async fn revoke_key(&self, id: &str, at: Timestamp) -> Result<bool> {
        self.call((id.to_owned(), at.as_millis()), |_, client, (id, at)| {
            Box::pin(async move {
                let statement = client
                    .prepare_cached(
                        "UPDATE api_keys SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
                    )
                    .await
                    .map_err(pg)?;
                Ok(client.execute(&statement, &[id, at]).await.map_err(pg)? == 1)
            })
        })
        .await
    }

    async fn mark_key_used(&self, id: &str, at: Timestamp) -> Result<()> {
        self.call((id.to_owned(), at.as_millis()), |_, client, (id, at)| {
            Box::pin(async move {
                let statement = client
                    // Never back in time: daemons sharing the database note their own uses.
                    .prepare_cached(
                        "UPDATE api_keys SET last_used_at = $2 WHERE id = $1 \
                         AND (last_used_at IS NULL OR last_used_at < $2)",
                    )
                    .await
                    .map_err(pg)?;
                client.execute(&statement, &[id, at]).await.map_err(pg)?;
                Ok(())
            })
        })
        .await
    }

    async fn insert_conversation_token(&self, token: &ConversationTokenRecord) -> Result<bool> {
        self.call(token.clone(), |_, client, token| {
            Box::pin(async move {
                // The conversation's row is share-locked for the insert: an erasure (which
                // locks it for update first) commits wholly before (no row: no token) or after
                // (the token is deleted with it).
                let statement = client
                    .prepare_cached(&format!(
                        "WITH conversation AS \
                         (SELECT id FROM conversations WHERE id = $2 FOR SHARE) \
                         INSERT INTO conversation_tokens ({TOKEN_COLUMNS}) \
                         SELECT $1, conversation.id, $3, $4, $5, NULL FROM conversation"
                    ))
                    .await
                    .map_err(pg)?;
                let inserted = client
                    .execute(
                        &statement,
                        &[
                            &token.id,
                            &token.conversation_id,
                            &token.hash,
                            &token.created_at.as_millis(),
                            &token.expires_at.as_millis(),
                        ],
                    )
                    .await
                    .map_err(pg)?;
                Ok(inserted == 1)
            })
        })
        .await
    }

    async fn find_conversation_token(
        &self,
        hash: &str,
        now: Timestamp,
    ) -> Result<Option<ConversationTokenRecord>> {
        self.read((hash.to_owned(), now.as_millis()), |_, client, (hash, now)| {
            Box::pin(async move {
                let statement = client
                    .prepare_cached(&format!(
                        "SELECT {TOKEN_COLUMNS} FROM conversation_tokens \
                         WHERE hash = $1 AND revoked_at IS NULL AND expires_at > $2"
                    ))
                    .await
                    .map_err(pg)?;
                let row = client.query_opt(&statement, &[hash, now]).await.map_err(pg)?;
                Ok(row.as_ref().map(token_from_row))
            })
        })
        .await
    }

    async fn revoke_conversation_token(&self, id: &str, at: Timestamp) -> Result<bool> {
        self.call((id.to_owned(), at.as_millis()), |_, client, (id, at)| {
            Box::pin(async move {
                let statement = client
                    .prepare_cached(
                        "UPDATE conversation_tokens SET revoked_at = $2 \
                         WHERE id = $1 AND revoked_at IS NULL",
                    )
                    .await
                    .map_err(pg)?;
                Ok(client.execute(&statement, &[id, at]).await.map_err(pg)? == 1)
            })
        })
        .await
    }
}
