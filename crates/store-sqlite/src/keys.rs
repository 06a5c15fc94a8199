//! API keys and conversation tokens in SQLite.

use async_trait::async_trait;
use cairn_store::{KeyStore, Result};
use cairn_types::{ApiKey, ConversationTokenRecord, Timestamp};
use rusqlite::{OptionalExtension, Row, params};

use crate::{SqliteStore, sql};

const KEY_COLUMNS: &str =
    "id, name, role, prefix, hash, created_at, revoked_at, expires_at, last_used_at";

fn key_from_row(row: &Row<'_>) -> rusqlite::Result<ApiKey> {
    let role: String = row.get(2)?;
    Ok(ApiKey {
        id: row.get(0)?,
        name: row.get(1)?,
        role: role.parse().map_err(|error: String| {
            rusqlite::Error::FromSqlConversionFailure(2, rusqlite::types::Type::Text, error.into())
        })?,
        prefix: row.get(3)?,
        hash: row.get(4)?,
        created_at: Timestamp::from_millis(row.get(5)?),
        revoked_at: row.get::<_, Option<i64>>(6)?.map(Timestamp::from_millis),
        expires_at: row.get::<_, Option<i64>>(7)?.map(Timestamp::from_millis),
        last_used_at: row.get::<_, Option<i64>>(8)?.map(Timestamp::from_millis),
    })
}

#[async_trait]
impl KeyStore for SqliteStore {
    async fn insert_key(&self, key: &ApiKey) -> Result<()> {
        let key = key.clone();
        self.write(move |tx| {
            tx.prepare_cached(&format!(
                "INSERT INTO api_keys ({KEY_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
            ))
            .map_err(sql)?
            .execute(params![
                key.id,
                key.name,
                key.role.as_str(),
                key.prefix,
                key.hash,
                key.created_at.as_millis(),
                key.revoked_at.map(Timestamp::as_millis),
                key.expires_at.map(Timestamp::as_millis),
                key.last_used_at.map(Timestamp::as_millis),
            ])
            .map_err(sql)?;
            Ok(())
        })
        .await
    }

    async fn find_active_key(&self, hash: &str) -> Result<Option<ApiKey>> {
        let hash = hash.to_owned();
        self.read(move |connection| {
            connection
                .prepare_cached(&format!(
                    "SELECT {KEY_COLUMNS} FROM api_keys WHERE hash = ?1 AND revoked_at IS NULL"
                ))
                .map_err(sql)?
                .query_row([hash], key_from_row)
                .optional()
                .map_err(sql)
        })
        .await
    }

    async fn list_keys(&self) -> Result<Vec<ApiKey>> {
        self.read(|connection| {
            let mut statement = connection
                .prepare_cached(&format!(
                    "SELECT {KEY_COLUMNS} FROM api_keys ORDER BY created_at, id"
                ))
                .map_err(sql)?;
            let rows = statement.query_map([], key_from_row).map_err(sql)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql)
        })
        .await
    }

    async fn revoke_key(&self, id: &str, at: Timestamp) -> Result<bool> {
        let id = id.to_owned();
        self.write(move |tx| {
            let changed = tx
                .prepare_cached(
                    "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
                )
                .map_err(sql)?
                .execute(params![id, at.as_millis()])
                .map_err(sql)?;
            Ok(changed == 1)
        })
        .await
    }

    async fn mark_key_used(&self, id: &str, at: Timestamp) -> Result<()> {
        let id = id.to_owned();
        self.write_relaxed(move |tx| {
            tx.prepare_cached("UPDATE api_keys SET last_used_at = ?2 WHERE id = ?1")
                .map_err(sql)?
                .execute(params![id, at.as_millis()])
                .map_err(sql)?;
            Ok(())
        })
        .await
    }

    async fn insert_conversation_token(&self, token: &ConversationTokenRecord) -> Result<bool> {
        let token = token.clone();
        // One writer: an erasure of the conversation commits wholly before or after this.
        self.write(move |tx| {
            let inserted = tx
                .prepare_cached(
                    "INSERT INTO conversation_tokens \
                     (id, conversation_id, hash, created_at, expires_at, revoked_at) \
                     SELECT ?1, ?2, ?3, ?4, ?5, NULL \
                     WHERE EXISTS (SELECT 1 FROM conversations WHERE id = ?2)",
                )
                .map_err(sql)?
                .execute(params![
                    token.id,
                    token.conversation_id,
                    token.hash,
                    token.created_at.as_millis(),
                    token.expires_at.as_millis(),
                ])
                .map_err(sql)?;
            Ok(inserted == 1)
        })
        .await
    }

    async fn find_conversation_token(
        &self,
        hash: &str,
        now: Timestamp,
    ) -> Result<Option<ConversationTokenRecord>> {
        let hash = hash.to_owned();
        self.read(move |connection| {
            connection
                .prepare_cached(
                    "SELECT id, conversation_id, hash, created_at, expires_at, revoked_at \
                     FROM conversation_tokens \
                     WHERE hash = ?1 AND revoked_at IS NULL AND expires_at > ?2",
                )
                .map_err(sql)?
                .query_row(params![hash, now.as_millis()], |row| {
                    Ok(ConversationTokenRecord {
                        id: row.get(0)?,
                        conversation_id: row.get(1)?,
                        hash: row.get(2)?,
                        created_at: Timestamp::from_millis(row.get(3)?),
                        expires_at: Timestamp::from_millis(row.get(4)?),
                        revoked_at: row.get::<_, Option<i64>>(5)?.map(Timestamp::from_millis),
                    })
                })
                .optional()
                .map_err(sql)
        })
        .await
    }

    async fn revoke_conversation_token(&self, id: &str, at: Timestamp) -> Result<bool> {
        let id = id.to_owned();
        self.write(move |tx| {
            let changed = tx
                .prepare_cached(
                    "UPDATE conversation_tokens SET revoked_at = ?2 \
                     WHERE id = ?1 AND revoked_at IS NULL",
                )
                .map_err(sql)?
                .execute(params![id, at.as_millis()])
                .map_err(sql)?;
            Ok(changed > 0)
        })
        .await
    }
}
