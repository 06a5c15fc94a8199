//! Storage for the conversation runtime: conversations, their event logs, snapshots and prompts.

use async_trait::async_trait;
use cairn_types::runtime::{ChannelSegment, VoiceConnection};
use cairn_types::{Conversation, Lifecycle, OpenPrompt, RuntimeEvent, Snapshot, Timestamp};

use crate::{ChangeListener, LockAttempt, Result, SharedLock, StoreError};

/// An event to append; the store gives it its id, offset and time.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub kind: String,
    pub data: serde_json::Value,
}

/// A widget prompt opened by an event of the same commit.
#[derive(Debug, Clone, PartialEq)]
pub struct NewPrompt {
    pub prompt_id: String,
    pub widget_kind: String,
    pub input: serde_json::Value,
    /// Index, in the commit's `events`, of the event that opens it (its offset is kept).
    pub event_index: usize,
}

/// A prompt as stored, open or answered.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptRecord {
    pub prompt: OpenPrompt,
    /// `None` while the prompt is open.
    pub output: Option<serde_json::Value>,
}

/// Everything one step of a conversation changes, applied in one transaction: the events
/// get the next offsets (without gaps, whoever else is appending), and the conversation's
/// `updatedAt`, lifecycle, snapshot, prompts and idempotency record change with them.
#[derive(Debug, Clone, PartialEq)]
pub struct Commit {
    pub conversation_id: String,
    pub events: Vec<NewEvent>,
    pub at: Timestamp,
    pub lifecycle: Option<Lifecycle>,
    /// Replaces the stored snapshot (its `lifecycle` and `updatedAt` are set by the store).
    pub snapshot: Option<Snapshot>,
    pub open_prompts: Vec<NewPrompt>,
    /// Prompts answered, with their output.
    pub close_prompts: Vec<(String, serde_json::Value)>,
    /// Recorded with the events' offsets; a second commit with the same key changes nothing
    /// and gets [`CommitOutcome::Duplicate`].
    pub idempotency_key: Option<String>,
    /// What the key was used for (a digest of the request), kept with it so a reuse of the
    /// key for something else can be told from a redelivery.
    pub idempotency_fingerprint: Option<String>,
}

impl Commit {
    /// A commit that appends `events` and changes nothing else.
    pub fn events(conversation_id: &str, events: Vec<NewEvent>, at: Timestamp) -> Commit {
        Commit {
            conversation_id: conversation_id.to_owned(),
            events,
            at,
            lifecycle: None,
            snapshot: None,
            open_prompts: Vec::new(),
            close_prompts: Vec::new(),
            idempotency_key: None,
            idempotency_fingerprint: None,
        }
    }

    /// Whether the commit holds together, before anything is written: every prompt it opens
    /// names one of its events.
    pub fn check(&self) -> Result<()> {
        match self.open_prompts.iter().find(|prompt| prompt.event_index >= self.events.len()) {
            Some(prompt) => Err(StoreError::Backend(
                format!(
                    "prompt {} is opened by event {} but the commit has {} events",
                    prompt.prompt_id,
                    prompt.event_index,
                    self.events.len()
                )
                .into(),
            )),
            None => Ok(()),
        }
    }

    /// The commit's events as stored: ids `ids`, consecutive offsets from `first_offset`,
    /// the commit's time.
    pub fn numbered(&self, ids: &[String], first_offset: u64) -> Vec<RuntimeEvent> {
        numbered_events(&self.conversation_id, ids, &self.events, first_offset, self.at)
    }
}

/// `events` as stored in `conversation_id`: ids `ids`, consecutive offsets from
/// `first_offset`, time `at` (a commit's or a creation's).
pub fn numbered_events(
    conversation_id: &str,
    ids: &[String],
    events: &[NewEvent],
    first_offset: u64,
    at: Timestamp,
) -> Vec<RuntimeEvent> {
    ids.iter()
        .zip(events)
        .zip(first_offset..)
        .map(|((id, event), offset)| RuntimeEvent {
            id: id.clone(),
            conversation_id: conversation_id.to_owned(),
            offset,
            kind: event.kind.clone(),
            created_at: at,
            data: event.data.clone(),
        })
        .collect()
}

/// What an idempotency key was first used for: a conversation and a range of its offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyRecord {
    pub key: String,
    pub conversation_id: String,
    /// The offsets `first_offset .. end_offset` the first commit appended.
    pub first_offset: u64,
    pub end_offset: u64,
    pub created_at: Timestamp,
    /// The commit's `idempotency_fingerprint`.
    pub fingerprint: Option<String>,
}

/// The result of [`ConversationStore::commit`].
#[derive(Debug, Clone, PartialEq)]
pub enum CommitOutcome {
    Committed {
        conversation: Conversation,
        events: Vec<RuntimeEvent>,
    },
    /// The idempotency key was used before; nothing changed.
    Duplicate(IdempotencyRecord),
    /// There is no such conversation; nothing changed.
    NotFound,
}

/// Which conversations a listing returns, newest first (by id, which sorts by creation).
/// `after` and `before` are ids of conversations: the page starts after (older than) or
/// ends before (newer than) them, so pages never skip or repeat a conversation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConversationQuery {
    pub agent_id: Option<String>,
    /// Only conversations listed after this one (older).
    pub after: Option<ConversationCursor>,
    /// Only conversations listed before this one (newer).
    pub before: Option<ConversationCursor>,
    pub updated_after: Option<Timestamp>,
    pub updated_before: Option<Timestamp>,
    pub limit: u32,
}

/// A place in the list of conversations, which runs newest first by creation time, then by
/// id: an order no conversation ever moves in, so pages never skip or repeat one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationCursor {
    pub created_at: Timestamp,
    pub id: String,
}

impl ConversationCursor {
    /// The place of `conversation` in the list.
    pub fn of(conversation: &Conversation) -> ConversationCursor {
        ConversationCursor { created_at: conversation.created_at, id: conversation.id.clone() }
    }
}

/// A bounded read of one conversation's log: the events with offsets strictly between
/// `after` and `before` (unbounded on a side that is `None`), of `kind` when given, at most
/// `limit` of them. `newest` keeps the newest `limit` instead of the oldest; either way they
/// come back in offset order. A backend answers it without reading the rest of the log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventRange {
    pub after: Option<u64>,
    pub before: Option<u64>,
    pub kind: Option<String>,
    pub limit: u32,
    pub newest: bool,
}

impl EventRange {
    /// The newest `limit` events of `kind`.
    pub fn newest_of_kind(kind: &str, limit: u32) -> EventRange {
        EventRange { kind: Some(kind.to_owned()), limit, newest: true, ..EventRange::default() }
    }
}

// Offsets are `u64` to callers and signed 64-bit integers to the databases (SQLite's
// `INTEGER`, PostgreSQL's `bigint`): the conversions both backends make, written once.

/// An offset as a query parameter; one past what the database holds is an error.
pub fn offset_param(offset: u64) -> Result<i64> {
    i64::try_from(offset)
        .map_err(|_| StoreError::Backend(format!("offset {offset} is out of range").into()))
}

/// An offset read from a column; a negative one means the row is corrupt.
pub fn offset_from_column(value: i64) -> Result<u64> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt(format!("negative offset {value}")))
}

/// A bound for `offset > ?` or `offset < ?`: offsets past what the database holds match
/// nothing.
pub fn offset_bound(offset: u64) -> i64 {
    i64::try_from(offset).unwrap_or(i64::MAX)
}

/// The exclusive bounds of `range` as database integers: -1 below every offset, `i64::MAX`
/// above them.
pub fn range_bounds(range: &EventRange) -> (i64, i64) {
    (range.after.map_or(-1, offset_bound), range.before.map_or(i64::MAX, offset_bound))
}

/// A JSON column parsed; text that does not parse means the row is corrupt.
pub fn parse_json_column<T: serde::de::DeserializeOwned>(text: &str, column: &str) -> Result<T> {
    serde_json::from_str(text)
        .map_err(|error| StoreError::Corrupt(format!("column {column}: {error}")))
}

/// A voice segment as stored, with its connection and what its socket token is bound to.
/// The token itself is never stored: only its sha256 (hex), which is unique.
#[derive(Debug, Clone, PartialEq)]
pub struct VoiceSegmentRecord {
    pub segment: ChannelSegment,
    pub connection: VoiceConnection,
    /// The hex sha256 of the socket token.
    pub token_hash: String,
    /// When the token was used to open the socket; a token opens one socket only.
    pub token_used_at: Option<Timestamp>,
    /// The start request's `app` and `client` hints, kept as given.
    pub app: Option<serde_json::Value>,
    pub client: Option<serde_json::Value>,
}

/// Storage for the conversation runtime.
#[async_trait]
pub trait ConversationStore: Send + Sync {
    /// Stores a new conversation with its snapshot and first events (offsets from 0).
    /// Returns `None`, changing nothing, when a conversation with this id exists.
    async fn create_conversation(
        &self,
        conversation: &Conversation,
        snapshot: &Snapshot,
        events: &[NewEvent],
    ) -> Result<Option<Vec<RuntimeEvent>>>;

    async fn get_conversation(&self, id: &str) -> Result<Option<Conversation>>;

    async fn list_conversations(&self, query: &ConversationQuery) -> Result<Vec<Conversation>>;

    /// Deletes conversations for good, in one transaction, with their events, prompts,
    /// snapshots, idempotency keys and voice segments. Returns the ids that existed.
    async fn delete_conversations(&self, ids: &[String]) -> Result<Vec<String>>;

    /// The ids of conversations on a channel of `kind` with the contact's `address`
    /// (`channel.type` and `channel.id`).
    async fn conversations_with_contact(&self, kind: &str, address: &str) -> Result<Vec<String>>;

    /// The ids of conversations whose events mention `text` (case folded) as a whole word:
    /// not inside another word or an id.
    async fn conversations_mentioning(&self, text: &str) -> Result<Vec<String>>;

    async fn commit(&self, commit: &Commit) -> Result<CommitOutcome>;

    /// Events with an offset above `after_offset` (all when `None`), in order, at most `limit`.
    async fn list_events(
        &self,
        conversation_id: &str,
        after_offset: Option<u64>,
        limit: u32,
    ) -> Result<Vec<RuntimeEvent>>;

    /// The events of `range`, in offset order; see [`EventRange`].
    async fn read_events(
        &self,
        conversation_id: &str,
        range: &EventRange,
    ) -> Result<Vec<RuntimeEvent>>;

    /// How many events `range` holds, ignoring its `limit`: counted by the backend, without
    /// reading the events out.
    async fn count_events(&self, conversation_id: &str, range: &EventRange) -> Result<u64>;

    /// The conversation's event with this id.
    async fn get_event(
        &self,
        conversation_id: &str,
        event_id: &str,
    ) -> Result<Option<RuntimeEvent>>;

    /// The events with offsets `from .. to`, in order.
    async fn events_between(
        &self,
        conversation_id: &str,
        from: u64,
        to: u64,
    ) -> Result<Vec<RuntimeEvent>>;

    async fn get_snapshot(&self, conversation_id: &str) -> Result<Option<Snapshot>>;

    /// Open prompts opened by events with offsets strictly between `after` and `before`
    /// (unbounded on a side that is `None`), oldest first, at most `limit`.
    async fn open_prompts(
        &self,
        conversation_id: &str,
        after: Option<u64>,
        before: Option<u64>,
        limit: u32,
    ) -> Result<Vec<OpenPrompt>>;

    async fn get_prompt(
        &self,
        conversation_id: &str,
        prompt_id: &str,
    ) -> Result<Option<PromptRecord>>;

    async fn find_idempotency(&self, key: &str) -> Result<Option<IdempotencyRecord>>;

    /// Stores a new voice segment with its connection (status `pending`) and token hash.
    /// Returns `false`, changing nothing, when the segment's conversation does not exist.
    async fn create_voice_segment(&self, record: &VoiceSegmentRecord) -> Result<bool>;

    /// Uses a socket token, atomically: when a segment has this token hash, the token is
    /// unused, `now` is before the connection's `expiresAt` and the segment has not ended,
    /// marks the token used at `now` and the connection `connected`, and returns the record
    /// as it is now. Otherwise changes nothing and returns `None`, so of two callers racing
    /// with one token exactly one gets it. A connection without `expiresAt` has no token to
    /// claim.
    async fn claim_voice_token(
        &self,
        token_hash: &str,
        now: Timestamp,
    ) -> Result<Option<VoiceSegmentRecord>>;

    /// Ends a segment at `at`: sets its `endedAt` and its connection's status `ended`.
    /// Returns the record as it is now when this call ended it, `None` when it had ended
    /// already or does not exist, so an end is recorded once.
    async fn end_voice_segment(
        &self,
        segment_id: &str,
        at: Timestamp,
    ) -> Result<Option<VoiceSegmentRecord>>;

    async fn get_voice_segment(&self, segment_id: &str) -> Result<Option<VoiceSegmentRecord>>;

    /// Takes the lock `name`, shared with every process on this store, waiting for it;
    /// `None` when the store is not shared (there is nothing to exclude: an in-process lock
    /// is enough). The lock is held until the [`SharedLock`] is dropped.
    async fn lock(&self, name: &str) -> Result<Option<SharedLock>> {
        let _ = name;
        Ok(None)
    }

    /// Takes the lock `name` if no one holds it; see [`ConversationStore::lock`].
    async fn try_lock(&self, name: &str) -> Result<LockAttempt> {
        let _ = name;
        Ok(LockAttempt::Unshared)
    }

    /// Registers `listener` for what other processes on this store change. A store used by
    /// one process never calls it.
    fn listen(&self, listener: ChangeListener) {
        let _ = listener;
    }
}

/// Whether `haystack` holds `word` with no letter, digit or `_` on either side: how a store's
/// [`ConversationStore::conversations_mentioning`] decides, after a coarse match in SQL.
pub fn mentions_word(haystack: &str, word: &str) -> bool {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    haystack.match_indices(word).any(|(at, _)| {
        let before = haystack[..at].chars().next_back();
        let after = haystack[at + word.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

#[cfg(test)]
mod mention_tests {
    use super::mentions_word;

    #[test]
    fn only_whole_words_are_mentions() {
        assert!(mentions_word(r#"{"text":"hi, i am ada."}"#, "ada"));
        assert!(mentions_word("ada lovelace", "ada lovelace"));
        assert!(!mentions_word(r#"{"text":"canada"}"#, "ada"));
        assert!(!mentions_word(r#"{"messageid":"msg_01kadab3"}"#, "ada"));
        assert!(!mentions_word("adam", "ada"));
    }
}
