//! [`cairn_store::KeyStore`] on PostgreSQL: API keys and conversation tokens, found by hash.

use async_trait::async_trait;
use cairn_store::{KeyStore, Result};
use cairn_types::{ApiKey, ConversationTokenRecord, Timestamp};

use crate::{PgStore, not_yet};

#[async_trait]
impl KeyStore for PgStore {
    async fn insert_key(&self, key: &ApiKey) -> Result<()> {
        let _ = (key,);
        Err(not_yet())
    }

    async fn find_active_key(&self, hash: &str) -> Result<Option<ApiKey>> {
        let _ = (hash,);
        Err(not_yet())
    }

    async fn list_keys(&self) -> Result<Vec<ApiKey>> {
        Err(not_yet())
    }

    async fn revoke_key(&self, id: &str, at: Timestamp) -> Result<bool> {
        let _ = (id, at);
        Err(not_yet())
    }

    async fn insert_conversation_token(&self, token: &ConversationTokenRecord) -> Result<()> {
        let _ = (token,);
        Err(not_yet())
    }

    async fn find_conversation_token(
        &self,
        hash: &str,
        now: Timestamp,
    ) -> Result<Option<ConversationTokenRecord>> {
        let _ = (hash, now);
        Err(not_yet())
    }

    async fn revoke_conversation_token(&self, id: &str, at: Timestamp) -> Result<bool> {
        let _ = (id, at);
        Err(not_yet())
    }
}
