//! [`cairn_store::ConversationStore`] on PostgreSQL: conversations, the event log with
//! offsets kept by a counter row, snapshots, prompts, idempotency keys and voice segments.

use async_trait::async_trait;
use cairn_store::{
    Commit, CommitOutcome, ConversationQuery, ConversationStore, EventRange, IdempotencyRecord,
    NewEvent, PromptRecord, Result, VoiceSegmentRecord,
};
use cairn_types::{Conversation, OpenPrompt, RuntimeEvent, Snapshot, Timestamp};

use crate::{PgStore, not_yet};

#[async_trait]
impl ConversationStore for PgStore {
    async fn create_conversation(
        &self,
        conversation: &Conversation,
        snapshot: &Snapshot,
        events: &[NewEvent],
    ) -> Result<Option<Vec<RuntimeEvent>>> {
        let _ = (conversation, snapshot, events);
        Err(not_yet())
    }

    async fn get_conversation(&self, id: &str) -> Result<Option<Conversation>> {
        let _ = (id,);
        Err(not_yet())
    }

    async fn list_conversations(&self, query: &ConversationQuery) -> Result<Vec<Conversation>> {
        let _ = (query,);
        Err(not_yet())
    }

    async fn delete_conversations(&self, ids: &[String]) -> Result<Vec<String>> {
        let _ = (ids,);
        Err(not_yet())
    }

    async fn conversations_with_contact(&self, kind: &str, address: &str) -> Result<Vec<String>> {
        let _ = (kind, address);
        Err(not_yet())
    }

    async fn conversations_mentioning(&self, text: &str) -> Result<Vec<String>> {
        let _ = (text,);
        Err(not_yet())
    }

    async fn commit(&self, commit: &Commit) -> Result<CommitOutcome> {
        let _ = (commit,);
        Err(not_yet())
    }

    async fn list_events(
        &self,
        conversation_id: &str,
        after_offset: Option<u64>,
        limit: u32,
    ) -> Result<Vec<RuntimeEvent>> {
        let _ = (conversation_id, after_offset, limit);
        Err(not_yet())
    }

    async fn read_events(
        &self,
        conversation_id: &str,
        range: &EventRange,
    ) -> Result<Vec<RuntimeEvent>> {
        let _ = (conversation_id, range);
        Err(not_yet())
    }

    async fn count_events(&self, conversation_id: &str, range: &EventRange) -> Result<u64> {
        let _ = (conversation_id, range);
        Err(not_yet())
    }

    async fn get_event(
        &self,
        conversation_id: &str,
        event_id: &str,
    ) -> Result<Option<RuntimeEvent>> {
        let _ = (conversation_id, event_id);
        Err(not_yet())
    }

    async fn events_between(
        &self,
        conversation_id: &str,
        from: u64,
        to: u64,
    ) -> Result<Vec<RuntimeEvent>> {
        let _ = (conversation_id, from, to);
        Err(not_yet())
    }

    async fn get_snapshot(&self, conversation_id: &str) -> Result<Option<Snapshot>> {
        let _ = (conversation_id,);
        Err(not_yet())
    }

    async fn open_prompts(
        &self,
        conversation_id: &str,
        after: Option<u64>,
        before: Option<u64>,
        limit: u32,
    ) -> Result<Vec<OpenPrompt>> {
        let _ = (conversation_id, after, before, limit);
        Err(not_yet())
    }

    async fn get_prompt(
        &self,
        conversation_id: &str,
        prompt_id: &str,
    ) -> Result<Option<PromptRecord>> {
        let _ = (conversation_id, prompt_id);
        Err(not_yet())
    }

    async fn find_idempotency(&self, key: &str) -> Result<Option<IdempotencyRecord>> {
        let _ = (key,);
        Err(not_yet())
    }

    async fn create_voice_segment(&self, record: &VoiceSegmentRecord) -> Result<bool> {
        let _ = (record,);
        Err(not_yet())
    }

    async fn claim_voice_token(
        &self,
        token_hash: &str,
        now: Timestamp,
    ) -> Result<Option<VoiceSegmentRecord>> {
        let _ = (token_hash, now);
        Err(not_yet())
    }

    async fn end_voice_segment(
        &self,
        segment_id: &str,
        at: Timestamp,
    ) -> Result<Option<VoiceSegmentRecord>> {
        let _ = (segment_id, at);
        Err(not_yet())
    }

    async fn get_voice_segment(&self, segment_id: &str) -> Result<Option<VoiceSegmentRecord>> {
        let _ = (segment_id,);
        Err(not_yet())
    }
}
