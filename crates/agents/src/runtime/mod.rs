//! [`DefaultRuntime`]: conversations and their event log in Cairn's storage, agents and
//! journeys from definition files, answers from the memory engine, and an optional
//! OpenAI-compatible language model for the replies.
//!
//! Steps of one conversation run one at a time (a lock per conversation, shared through the
//! store with every daemon on the same database), so each step sees the state the previous
//! one left; the store still assigns offsets atomically, so other processes writing the
//! same log keep it gapless too. What other daemons append reaches this one's event streams
//! through [`DefaultRuntime::external_change`].

mod turn;
mod voice;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use cairn_memory::Engine;
use cairn_store::{
    Commit, CommitOutcome, ConversationCursor, ConversationQuery, ConversationStore, EventRange,
    ExternalChange, IdempotencyRecord, NewEvent, NewPrompt, SharedLock,
};
use cairn_types::{Conversation, IdPrefix, Lifecycle, RuntimeEvent, Snapshot, Timestamp, new_id};
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use cairn_runtime::*;

use self::turn::{Input, TurnOutput, message_data};
use crate::journey::{Agent, Definitions, Trigger};
use crate::llm::{ChatClient, ChatConfig, ChatMessage};
use crate::support::shorten;
use crate::voice::VoiceConfig;

const DEFAULT_LIST_LIMIT: u32 = 50;
const MAX_LIST_LIMIT: u32 = 200;
/// Past this many conversations with notification senders, unused ones are dropped.
const PRUNE_SUBSCRIPTIONS_AT: usize = 1024;
/// How many earlier messages the language model sees.
const HISTORY_MESSAGES: usize = 20;
/// How many of the newest messages a turn reads to find them: intermediate messages hidden
/// from the model are skipped, so a few more than it sees, and never the whole log.
const HISTORY_READ: u32 = 2 * HISTORY_MESSAGES as u32;
/// How many messages compaction reads at a time while its summary has room.
const COMPACTION_PAGE: u32 = 100;
/// The longest summary compaction writes, in characters, and the longest line of it.
const SUMMARY_CHARS: usize = 4000;
const SUMMARY_LINE_CHARS: usize = 200;

/// Options of the default runtime.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    pub definitions: Arc<Definitions>,
    /// The agent of conversations created without one (default: the definitions' first).
    pub default_agent_id: Option<String>,
    /// An OpenAI-compatible chat-completions endpoint that writes the replies.
    pub chat: Option<ChatConfig>,
    /// How many memories an answer draws on.
    pub answer_limit: u32,
    /// Speech and turn-taking for voice conversations.
    pub voice: VoiceConfig,
}

impl Default for RuntimeConfig {
    fn default() -> RuntimeConfig {
        RuntimeConfig {
            definitions: Arc::new(Definitions::bundled()),
            default_agent_id: None,
            chat: None,
            answer_limit: 3,
            voice: VoiceConfig::default(),
        }
    }
}

/// The default [`Runtime`]. Cheap to clone: clones share everything (a voice session keeps
/// one for as long as its socket is open).
#[derive(Clone)]
pub struct DefaultRuntime {
    shared: Arc<Shared>,
}

/// What every clone of a [`DefaultRuntime`] shares.
struct Shared {
    store: Arc<dyn ConversationStore>,
    engine: Option<Engine>,
    definitions: Arc<Definitions>,
    default_agent_id: String,
    chat: Option<ChatClient>,
    answer_limit: u32,
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    appended: Mutex<HashMap<String, watch::Sender<u64>>>,
    voice: Arc<VoiceConfig>,
}

impl DefaultRuntime {
    /// A runtime over `store`, answering from `engine` when one is given.
    pub fn new(
        store: Arc<dyn ConversationStore>,
        engine: Option<Engine>,
        config: RuntimeConfig,
    ) -> DefaultRuntime {
        let default_agent_id = config
            .default_agent_id
            .or_else(|| config.definitions.default_agent_id().map(str::to_owned))
            .unwrap_or_else(|| "default".to_owned());
        let shared = Shared {
            store,
            engine,
            definitions: config.definitions,
            default_agent_id,
            chat: config.chat.map(ChatClient::new),
            answer_limit: config.answer_limit.max(1),
            locks: Mutex::new(HashMap::new()),
            appended: Mutex::new(HashMap::new()),
            voice: Arc::new(config.voice),
        };
        DefaultRuntime { shared: Arc::new(shared) }
    }

    pub fn definitions(&self) -> &Definitions {
        &self.shared.definitions
    }

    /// Holds the conversation's step lock until the guard is dropped: this process's first
    /// (so its own steps queue here, not on the database), then the store's, shared with
    /// every daemon on the same database (none for a store that one process uses).
    async fn lock(&self, conversation_id: &str) -> Result<StepGuard<'_>> {
        let lock = {
            let mut locks = self.shared.locks.lock().expect("lock table poisoned");
            locks.entry(conversation_id.to_owned()).or_default().clone()
        };
        let guard = lock.clone().lock_owned().await;
        let mut step = StepGuard {
            runtime: self,
            id: conversation_id.to_owned(),
            lock,
            _guard: guard,
            _shared: None,
        };
        step._shared =
            self.shared.store.lock(conversation_id).await.map_err(RuntimeError::internal)?;
        Ok(step)
    }

    /// Takes in what other processes sharing the store changed: appends by other daemons
    /// wake this daemon's event streams, and while the store cannot say what changed (or
    /// may have missed something), every open stream reads its log again.
    pub fn external_change(&self, change: &ExternalChange) {
        match change {
            ExternalChange::Appended { conversation_id, next_offset } => {
                self.announce(conversation_id, *next_offset);
            }
            ExternalChange::Poll | ExternalChange::Resync => {
                let appended = self.shared.appended.lock().expect("notification table poisoned");
                for sender in appended.values().filter(|sender| sender.receiver_count() > 0) {
                    // Marks the value changed without changing it: each stream reads on
                    // from its last offset.
                    sender.send_modify(|_| {});
                }
            }
            ExternalChange::Memories { .. } | ExternalChange::Vectors { .. } => {}
        }
    }

    async fn load(&self, conversation_id: &str) -> Result<(Conversation, Snapshot)> {
        let conversation = self
            .shared
            .store
            .get_conversation(conversation_id)
            .await
            .map_err(RuntimeError::internal)?
            .ok_or_else(|| RuntimeError::ConversationNotFound(conversation_id.to_owned()))?;
        let snapshot = self
            .shared
            .store
            .get_snapshot(conversation_id)
            .await
            .map_err(RuntimeError::internal)?
            .unwrap_or_else(|| Snapshot::empty(&conversation));
        Ok((conversation, snapshot))
    }

    /// Loads a conversation that must not be closed.
    async fn load_open(&self, conversation_id: &str) -> Result<(Conversation, Snapshot)> {
        let (conversation, snapshot) = self.load(conversation_id).await?;
        if conversation.lifecycle == Lifecycle::Closed {
            return Err(RuntimeError::ConversationClosed(conversation.id));
        }
        Ok((conversation, snapshot))
    }

    fn agent(&self, conversation: &Conversation) -> Option<&Agent> {
        self.shared.definitions.agent(&conversation.agent_id)
    }

    /// Commits and tells event streams. A duplicate idempotency key is the caller's concern.
    async fn commit(&self, commit: Commit) -> Result<CommitOutcome> {
        let outcome = self.shared.store.commit(&commit).await.map_err(RuntimeError::internal)?;
        match &outcome {
            CommitOutcome::Committed { events, .. } => {
                if let Some(last) = events.last() {
                    self.announce(&commit.conversation_id, last.offset + 1);
                }
            }
            CommitOutcome::NotFound => {
                return Err(RuntimeError::ConversationNotFound(commit.conversation_id));
            }
            CommitOutcome::Duplicate(_) => {}
        }
        Ok(outcome)
    }

    /// Commits a step that carries no idempotency key.
    async fn commit_step(&self, commit: Commit) -> Result<(Conversation, Vec<RuntimeEvent>)> {
        match self.commit(commit).await? {
            CommitOutcome::Committed { conversation, events } => Ok((conversation, events)),
            CommitOutcome::Duplicate(_) | CommitOutcome::NotFound => {
                unreachable!("commits without a key are never duplicates; NotFound is an error")
            }
        }
    }

    fn announce(&self, conversation_id: &str, next_offset: u64) {
        let mut appended = self.shared.appended.lock().expect("notification table poisoned");
        if let Some(sender) = appended.get(conversation_id) {
            if sender.receiver_count() == 0 {
                appended.remove(conversation_id);
            } else {
                // Announced by this daemon's commit and again by the store's notice of it:
                // a stream wakes once, and never for an offset it has passed.
                sender.send_if_modified(|current| {
                    let grew = next_offset > *current;
                    if grew {
                        *current = next_offset;
                    }
                    grew
                });
            }
        }
    }

    /// The snapshot after a step: the journey's new position and the definitions in force.
    fn snapshot_after(&self, snapshot: &Snapshot, out: &TurnOutput) -> Snapshot {
        Snapshot {
            active_journey_id: out.journey.active_journey_id.clone(),
            active_state_ids: out.journey.active_state_ids.clone(),
            journey_context: Some(out.journey.context.clone()),
            definition_hash: Some(self.shared.definitions.hash().to_owned()),
            ..snapshot.clone()
        }
    }

    /// The commit of a step set off by `first` (a user message, a widget submission, a
    /// journey event): `first`, then the step's events, with the prompts it opened and the
    /// journey's new position.
    fn step_commit(
        &self,
        conversation_id: &str,
        first: NewEvent,
        out: TurnOutput,
        snapshot: &Snapshot,
    ) -> Commit {
        let snapshot = self.snapshot_after(snapshot, &out);
        let mut events = vec![first];
        events.extend(out.events);
        let open_prompts = out
            .prompts
            .into_iter()
            .map(|prompt| NewPrompt { event_index: prompt.event_index + 1, ..prompt })
            .collect();
        Commit {
            snapshot: Some(snapshot),
            open_prompts,
            ..Commit::events(conversation_id, events, Timestamp::now())
        }
    }

    /// The newest messages of the conversation as the language model should see them: one
    /// bounded read of the newest [`HISTORY_READ`] messages, whatever the log's length.
    async fn history(&self, conversation_id: &str) -> Result<Vec<ChatMessage>> {
        if self.shared.chat.is_none() {
            return Ok(Vec::new());
        }
        let range = EventRange::newest_of_kind("message", HISTORY_READ);
        let events = self.read_events(conversation_id, &range).await?;
        let mut messages: Vec<ChatMessage> = events
            .iter()
            .filter(|event| event.data["visibleToModel"].as_bool() != Some(false))
            .filter_map(|event| {
                let text = event.data["text"].as_str()?;
                Some(match event.data["role"].as_str()? {
                    "user" => ChatMessage::user(text),
                    _ => ChatMessage::assistant(text),
                })
            })
            .collect();
        let keep = messages.len().saturating_sub(HISTORY_MESSAGES);
        Ok(messages.split_off(keep))
    }

    async fn read_events(
        &self,
        conversation_id: &str,
        range: &EventRange,
    ) -> Result<Vec<RuntimeEvent>> {
        self.shared.store.read_events(conversation_id, range).await.map_err(RuntimeError::internal)
    }

    /// The extractive summary of the messages with offsets `from ..= to`: each as
    /// `role: text` (a line shortened to [`SUMMARY_LINE_CHARS`]), the whole shortened to
    /// [`SUMMARY_CHARS`]. Messages are read a page at a time only while the summary has
    /// room; the rest are counted by the store, not read.
    async fn summarise(&self, conversation_id: &str, from: u64, to: u64) -> Result<Value> {
        let mut lines: Vec<String> = Vec::new();
        let mut length = 0;
        let mut after = from.checked_sub(1);
        let before = to.checked_add(1);
        while length <= SUMMARY_CHARS {
            let page = EventRange {
                after,
                before,
                kind: Some("message".to_owned()),
                limit: COMPACTION_PAGE,
                newest: false,
            };
            let events = self.read_events(conversation_id, &page).await?;
            for event in &events {
                let (Some(role), Some(text)) =
                    (event.data["role"].as_str(), event.data["text"].as_str())
                else {
                    continue;
                };
                let line = format!("{role}: {}", shorten(text, SUMMARY_LINE_CHARS));
                length += line.chars().count() + 1;
                lines.push(line);
            }
            if events.len() < COMPACTION_PAGE as usize {
                break;
            }
            after = events.last().map(|event| event.offset);
        }
        let counted = EventRange {
            after: from.checked_sub(1),
            before,
            kind: Some("message".to_owned()),
            ..EventRange::default()
        };
        let message_count = self
            .shared
            .store
            .count_events(conversation_id, &counted)
            .await
            .map_err(RuntimeError::internal)?;
        Ok(json!({
            "fromOffset": from,
            "toOffset": to,
            "messageCount": message_count,
            "text": shorten(&lines.join("\n"), SUMMARY_CHARS),
        }))
    }

    /// A user message and the agent's reply, as one or two commits.
    async fn user_turn(
        &self,
        conversation: &Conversation,
        snapshot: &Snapshot,
        text: &str,
        message_data: Value,
        deltas: Option<&TextDeltas>,
        delivery: Option<&Delivery>,
    ) -> Result<TurnResult> {
        let at = Timestamp::now();
        let user_event = NewEvent { kind: "message".into(), data: message_data };
        if conversation.lifecycle == Lifecycle::Handoff {
            // A person has the conversation: record the message, say nothing.
            let mut commit = Commit::events(&conversation.id, vec![user_event], at);
            Delivery::stamp(delivery, &mut commit);
            return self.finish(commit, String::new(), snapshot.active_journey_id.clone()).await;
        }
        let mut history = self.history(&conversation.id).await?;
        if self.shared.chat.is_some() {
            history.push(ChatMessage::user(text));
        }
        let agent = self.agent(conversation);
        let out = self
            .run_turn(conversation, agent, snapshot, Input::Message(text), history, deltas)
            .await;
        let (text, active_journey_id, handoff) =
            (out.text.clone(), out.journey.active_journey_id.clone(), out.handoff);
        let mut commit = self.step_commit(&conversation.id, user_event, out, snapshot);
        Delivery::stamp(delivery, &mut commit);
        if handoff {
            hand_off(&mut commit);
        }
        self.finish(commit, text, active_journey_id).await
    }

    async fn finish(
        &self,
        commit: Commit,
        text: String,
        active_journey_id: Option<String>,
    ) -> Result<TurnResult> {
        let commit_fingerprint = commit.idempotency_fingerprint.clone();
        match self.commit(commit).await? {
            CommitOutcome::Committed { conversation, events } => {
                Ok(TurnResult { conversation, events, text, active_journey_id, duplicate: false })
            }
            CommitOutcome::Duplicate(record) => self.repeat(&record, commit_fingerprint).await,
            CommitOutcome::NotFound => unreachable!("mapped to an error by commit"),
        }
    }

    /// The result of the first delivery of an idempotency key, when this is a redelivery of
    /// it (same fingerprint); a key reused for another event is a conflict.
    async fn repeat(
        &self,
        record: &IdempotencyRecord,
        fingerprint: Option<String>,
    ) -> Result<TurnResult> {
        if let (Some(first), Some(this)) = (&record.fingerprint, &fingerprint)
            && first != this
        {
            return Err(RuntimeError::Conflict(format!(
                "this idempotency key ({}) was used for a different event; give each event a key of its own",
                record.key.split_once(':').map_or(record.key.as_str(), |(_, key)| key)
            )));
        }
        let (conversation, snapshot) = self.load(&record.conversation_id).await?;
        let events = self
            .shared
            .store
            .events_between(&record.conversation_id, record.first_offset, record.end_offset)
            .await
            .map_err(RuntimeError::internal)?;
        let text = events
            .iter()
            .rev()
            .find(|event| event.kind == "message" && event.data["role"] == "assistant")
            .and_then(|event| event.data["text"].as_str())
            .unwrap_or_default()
            .to_owned();
        let active_journey_id = snapshot.active_journey_id;
        Ok(TurnResult { conversation, events, text, active_journey_id, duplicate: true })
    }

    async fn create(
        &self,
        input: CreateConversationInput,
    ) -> Result<(Conversation, Vec<RuntimeEvent>, bool)> {
        let id = match input.id {
            Some(id) => {
                check_id(&id)?;
                id
            }
            None => new_id(IdPrefix::Conversation),
        };
        let agent_id = input.agent_id.unwrap_or_else(|| self.shared.default_agent_id.clone());
        let defined: Vec<&str> = self.shared.definitions.agent_ids().collect();
        if !defined.is_empty() && !defined.contains(&agent_id.as_str()) {
            return Err(RuntimeError::Invalid(format!(
                "agentId: no agent `{agent_id}` is defined (defined: {})",
                defined.join(", ")
            )));
        }
        let now = Timestamp::now();
        let conversation = Conversation {
            id,
            agent_id,
            channel: input.channel.map(ChannelInput::into_channel),
            context: input.context.unwrap_or(Value::Null),
            lifecycle: Lifecycle::Active,
            created_at: now,
            updated_at: now,
        };
        let mut snapshot = Snapshot::empty(&conversation);
        snapshot.definition_hash = Some(self.shared.definitions.hash().to_owned());
        let created = NewEvent {
            kind: "conversation.created".into(),
            data: json!({
                "agentId": conversation.agent_id,
                "channel": conversation.channel,
                "context": conversation.context,
            }),
        };
        let stored = self
            .shared
            .store
            .create_conversation(&conversation, &snapshot, &[created])
            .await
            .map_err(RuntimeError::internal)?;
        match stored {
            Some(events) => {
                self.announce(&conversation.id, events.len() as u64);
                Ok((conversation, events, true))
            }
            None => Err(RuntimeError::Conflict(format!(
                "conversation `{}` exists already",
                conversation.id
            ))),
        }
    }

    /// A lifecycle change with its event.
    async fn change_lifecycle(
        &self,
        conversation_id: &str,
        to: Lifecycle,
        kind: &str,
        data: Value,
    ) -> Result<LifecycleResult> {
        let (conversation, event) = self.append(conversation_id, kind, data, Some(to)).await?;
        Ok(LifecycleResult { conversation, event })
    }

    /// Appends one event (changing the lifecycle too, when given) as a step of its own.
    async fn append(
        &self,
        conversation_id: &str,
        kind: &str,
        data: Value,
        lifecycle: Option<Lifecycle>,
    ) -> Result<(Conversation, RuntimeEvent)> {
        let event = NewEvent { kind: kind.to_owned(), data };
        let mut commit = Commit::events(conversation_id, vec![event], Timestamp::now());
        commit.lifecycle = lifecycle;
        let (conversation, mut events) = self.commit_step(commit).await?;
        Ok((conversation, events.pop().expect("one event committed")))
    }
}

struct TurnResult {
    conversation: Conversation,
    events: Vec<RuntimeEvent>,
    text: String,
    active_journey_id: Option<String>,
    duplicate: bool,
}

/// Releases a conversation's step lock, forgetting it when nobody else waits.
struct StepGuard<'a> {
    runtime: &'a DefaultRuntime,
    id: String,
    lock: Arc<tokio::sync::Mutex<()>>,
    _guard: tokio::sync::OwnedMutexGuard<()>,
    /// The store's lock of the same name, when the store is shared.
    _shared: Option<SharedLock>,
}

impl Drop for StepGuard<'_> {
    fn drop(&mut self) {
        let mut locks = self.runtime.shared.locks.lock().expect("lock table poisoned");
        // Held by the table, this guard's `lock` and the owned guard: nobody else.
        if Arc::strong_count(&self.lock) == 3 {
            locks.remove(&self.id);
        }
    }
}

/// The user asked for a person: the step also hands the conversation over.
fn hand_off(commit: &mut Commit) {
    let data = json!({ "reason": "the user asked for a person", "from": "active" });
    commit.events.push(NewEvent { kind: "conversation.handoff".into(), data });
    commit.lifecycle = Some(Lifecycle::Handoff);
}

fn check_id(id: &str) -> Result<()> {
    let valid = !id.is_empty()
        && id.len() <= 128
        && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'));
    if valid {
        Ok(())
    } else {
        Err(RuntimeError::Invalid(
            "id: 1 to 128 characters of letters, digits, `_`, `-`, `.` or `:`".to_owned(),
        ))
    }
}

/// A targeted journey event must name what exists: the journey (else the active one), and
/// a state of it.
fn check_target(
    agent: Option<&Agent>,
    conversation: &Conversation,
    snapshot: &Snapshot,
    target: &JourneyTarget,
) -> Result<()> {
    let journey_id = target.journey_id.as_ref().or(snapshot.active_journey_id.as_ref());
    let journey = journey_id.and_then(|id| agent?.journey(id));
    if let (Some(id), None) = (&target.journey_id, journey) {
        return Err(RuntimeError::Invalid(format!(
            "target.journeyId: agent `{}` has no journey `{id}`",
            conversation.agent_id
        )));
    }
    let Some(state_id) = &target.state_id else { return Ok(()) };
    let Some(journey) = journey else {
        return Err(RuntimeError::Invalid(
            "target.stateId: no journey is active; name it in target.journeyId".to_owned(),
        ));
    };
    if !journey.states.iter().any(|state| &state.id == state_id) {
        return Err(RuntimeError::Invalid(format!(
            "target.stateId: journey `{}` has no state `{state_id}`",
            journey.id
        )));
    }
    Ok(())
}

/// A channel event's idempotency key and what it was used for: a digest of the event (less
/// what differs between deliveries of one event: `receivedAt`, `deliveryId`, `verified`).
#[derive(Debug, Clone)]
struct Delivery {
    key: String,
    fingerprint: String,
}

impl Delivery {
    fn of(input: &ChannelEventInput) -> Option<Delivery> {
        let key = input.idempotency_key()?;
        let event = ChannelEventInput {
            received_at: None,
            delivery_id: None,
            verified: None,
            ..input.clone()
        };
        let bytes = serde_json::to_vec(&event).expect("channel events serialize");
        let fingerprint =
            format!("sha256:{}", hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&bytes)));
        Some(Delivery { key, fingerprint })
    }

    fn stamp(delivery: Option<&Delivery>, commit: &mut Commit) {
        commit.idempotency_key = delivery.map(|delivery| delivery.key.clone());
        commit.idempotency_fingerprint = delivery.map(|delivery| delivery.fingerprint.clone());
    }
}

/// A list cursor as clients carry it: the conversation's creation time in milliseconds and
/// its id, `1763756118123.conv_…`. Opaque to clients; stable, so pages never skip or repeat.
fn cursor_text(conversation: &Conversation) -> String {
    format!("{}.{}", conversation.created_at.as_millis(), conversation.id)
}

fn cursor(field: &str, text: &str) -> Result<ConversationCursor> {
    let parsed = text.split_once('.').and_then(|(millis, id)| {
        let millis = millis.parse::<i64>().ok()?;
        Some(ConversationCursor { created_at: Timestamp::from_millis(millis), id: id.to_owned() })
    });
    parsed.filter(|cursor| !cursor.id.is_empty()).ok_or_else(|| {
        RuntimeError::Invalid(format!(
            "{field}: `{text}` is not a cursor; pass the `nextCursor` or `prevCursor` of a page"
        ))
    })
}

fn parse_time(field: &str, text: Option<&str>) -> Result<Option<Timestamp>> {
    text.map(|text| {
        Timestamp::parse(text).ok_or_else(|| {
            RuntimeError::Invalid(format!("{field}: `{text}` is not an RFC 3339 timestamp"))
        })
    })
    .transpose()
}

/// The non-null fields of a channel event, for its event's data.
fn channel_data(input: &ChannelEventInput, nature: ChannelEventNature) -> Value {
    let mut data = match serde_json::to_value(input) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    data.retain(|key, value| !value.is_null() && key != "createConversation");
    data.insert("nature".into(), json!(nature.as_str()));
    Value::Object(data)
}

#[async_trait]
impl Runtime for DefaultRuntime {
    async fn create_conversation(&self, input: CreateConversationInput) -> Result<Conversation> {
        Ok(self.create(input).await?.0)
    }

    async fn handle_user_message(&self, input: UserMessageInput) -> Result<SendMessageResult> {
        let _step = self.lock(&input.conversation_id).await?;
        let (conversation, snapshot) = self.load_open(&input.conversation_id).await?;
        let mut data = message_data("user", &input.text);
        if let Some(channel) = &input.channel {
            data["channel"] = json!(channel);
        }
        if let Some(turn) = &input.turn {
            data["turn"] = turn.clone();
        }
        let result = self
            .user_turn(&conversation, &snapshot, &input.text, data, input.deltas.as_ref(), None)
            .await?;
        Ok(SendMessageResult {
            text: result.text,
            events: result.events,
            active_journey_id: result.active_journey_id,
        })
    }

    async fn list_events(
        &self,
        conversation_id: &str,
        after_offset: Option<u64>,
        limit: u32,
    ) -> Result<Vec<RuntimeEvent>> {
        let events = self
            .shared
            .store
            .list_events(conversation_id, after_offset, limit)
            .await
            .map_err(RuntimeError::internal)?;
        if events.is_empty() {
            // An empty page and an unknown conversation look alike; tell them apart.
            self.load(conversation_id).await?;
        }
        Ok(events)
    }

    fn subscribe(&self, conversation_id: &str) -> Option<watch::Receiver<u64>> {
        let mut appended = self.shared.appended.lock().expect("notification table poisoned");
        if appended.len() >= PRUNE_SUBSCRIPTIONS_AT {
            // Streams that ended (or asked about conversations that do not exist) leave
            // senders nobody listens to.
            appended.retain(|_, sender| sender.receiver_count() > 0);
        }
        let sender =
            appended.entry(conversation_id.to_owned()).or_insert_with(|| watch::channel(0).0);
        Some(sender.subscribe())
    }

    async fn list_conversations(&self, input: ListConversationsInput) -> Result<ConversationList> {
        let limit = input.limit.unwrap_or(DEFAULT_LIST_LIMIT);
        if limit == 0 || limit > MAX_LIST_LIMIT {
            return Err(RuntimeError::Invalid(format!(
                "limit: must be between 1 and {MAX_LIST_LIMIT}"
            )));
        }
        if input.after.is_some() && input.before.is_some() {
            return Err(RuntimeError::Invalid("after, before: give one cursor, not both".into()));
        }
        let query = ConversationQuery {
            agent_id: input.agent_id,
            after: input.after.as_deref().map(|text| cursor("after", text)).transpose()?,
            before: input.before.as_deref().map(|text| cursor("before", text)).transpose()?,
            updated_after: parse_time("afterUpdatedAt", input.after_updated_at.as_deref())?,
            updated_before: parse_time("beforeUpdatedAt", input.before_updated_at.as_deref())?,
            limit: limit + 1,
        };
        let mut conversations =
            self.shared.store.list_conversations(&query).await.map_err(RuntimeError::internal)?;
        let more = conversations.len() > limit as usize;
        let (next_cursor, prev_cursor);
        if input.before.is_some() {
            // The page ends just before the cursor; an extra one means newer ones exist.
            if more {
                conversations.remove(0);
            }
            next_cursor = conversations.last().map(cursor_text);
            prev_cursor = conversations.first().filter(|_| more).map(cursor_text);
        } else {
            conversations.truncate(limit as usize);
            next_cursor = conversations.last().filter(|_| more).map(cursor_text);
            prev_cursor = conversations.first().filter(|_| input.after.is_some()).map(cursor_text);
        }
        Ok(ConversationList { conversations, next_cursor, prev_cursor })
    }

    async fn handle_channel_event(
        &self,
        input: ChannelEventInput,
        deltas: Option<TextDeltas>,
    ) -> Result<ChannelEventResult> {
        let nature = input.validate().map_err(RuntimeError::Invalid)?;
        let delivery = Delivery::of(&input);
        let key = delivery.as_ref().map(|delivery| delivery.key.clone());
        // Redeliveries of one event wait for each other, so that concurrent copies of a
        // first event create one conversation, not one each. (`/` is not allowed in
        // conversation ids, so these locks never meet a conversation's.)
        let _delivery = match &key {
            Some(key) => Some(self.lock(&format!("delivery/{key}")).await?),
            None => None,
        };
        if let Some(delivery) = &delivery
            && let Some(record) = self
                .shared
                .store
                .find_idempotency(&delivery.key)
                .await
                .map_err(RuntimeError::internal)?
        {
            let repeated = self.repeat(&record, Some(delivery.fingerprint.clone())).await?;
            return Ok(channel_result(repeated, false));
        }
        let requested_id = input
            .conversation_id
            .clone()
            .or_else(|| input.create_conversation.as_ref()?.id.clone());
        let existing = match &requested_id {
            Some(id) => {
                self.shared.store.get_conversation(id).await.map_err(RuntimeError::internal)?
            }
            None => None,
        };
        let (conversation_id, created) = match existing {
            Some(conversation) => (conversation.id, false),
            None => {
                let mut create = input.create_conversation.clone().unwrap_or_default();
                create.id = create.id.or(requested_id.clone());
                create.agent_id = create.agent_id.or(input.agent_id.clone());
                create.channel = create.channel.or(input.channel.clone());
                create.context = create.context.or(input.conversation_context.clone());
                match self.create(create).await {
                    Ok((conversation, _, _)) => (conversation.id, true),
                    // Another first event created it meanwhile.
                    Err(RuntimeError::Conflict(_)) if requested_id.is_some() => {
                        (requested_id.clone().unwrap_or_default(), false)
                    }
                    Err(error) => return Err(error),
                }
            }
        };
        let _step = self.lock(&conversation_id).await?;
        let (conversation, snapshot) = self.load(&conversation_id).await?;
        let data = channel_data(&input, nature);
        let at = Timestamp::now();
        let single = |kind: &str| {
            let mut commit = Commit::events(
                &conversation_id,
                vec![NewEvent { kind: kind.to_owned(), data: data.clone() }],
                at,
            );
            Delivery::stamp(delivery.as_ref(), &mut commit);
            commit
        };
        let result = match nature {
            ChannelEventNature::Message | ChannelEventNature::VoiceTurn
                if input.direction == Some(Direction::Outbound) =>
            {
                // Something a person or system already said on the channel: record it.
                let text = input.message_text().unwrap_or_default();
                let mut commit = single("message");
                commit.events[0].data = with_message(&data, "assistant", text);
                self.finish(commit, String::new(), snapshot.active_journey_id.clone()).await?
            }
            ChannelEventNature::Message | ChannelEventNature::VoiceTurn => {
                if conversation.lifecycle == Lifecycle::Closed {
                    return Err(RuntimeError::ConversationClosed(conversation_id));
                }
                let text = input.message_text().unwrap_or_default().to_owned();
                let data = with_message(&data, "user", &text);
                let deltas = deltas.as_ref();
                self.user_turn(&conversation, &snapshot, &text, data, deltas, delivery.as_ref())
                    .await?
            }
            ChannelEventNature::Handoff => {
                if conversation.lifecycle == Lifecycle::Closed {
                    return Err(RuntimeError::ConversationClosed(conversation_id));
                }
                let mut commit = single("conversation.handoff");
                commit.lifecycle = Some(Lifecycle::Handoff);
                self.finish(commit, String::new(), snapshot.active_journey_id.clone()).await?
            }
            other => {
                let kind = match other {
                    ChannelEventNature::ProviderObject => "channel.provider_update",
                    ChannelEventNature::OutboundContact => "channel.outbound_contact",
                    ChannelEventNature::Scheduled => "channel.scheduled",
                    ChannelEventNature::OutputResolution => "channel.output_resolved",
                    _ => "channel.handoff_review",
                };
                self.finish(single(kind), String::new(), snapshot.active_journey_id.clone()).await?
            }
        };
        Ok(channel_result(result, created))
    }

    async fn resolve_channel_output(&self, input: ResolveOutputInput) -> Result<EventResult> {
        let _step = self.lock(&input.conversation_id).await?;
        self.load(&input.conversation_id).await?;
        let found = self
            .shared
            .store
            .get_event(&input.conversation_id, &input.event_id)
            .await
            .map_err(RuntimeError::internal)?;
        let Some(output) = found else {
            return Err(RuntimeError::Invalid(format!(
                "eventId: conversation `{}` has no event `{}`",
                input.conversation_id, input.event_id
            )));
        };
        let mut data = serde_json::to_value(&input).unwrap_or_default();
        if let Value::Object(map) = &mut data {
            map.retain(|key, value| !value.is_null() && key != "conversationId");
            map.insert("outputOffset".into(), json!(output.offset));
        }
        let kind = "channel.output_resolved";
        let (_, event) = self.append(&input.conversation_id, kind, data, None).await?;
        Ok(EventResult { event })
    }

    async fn submit_widget(&self, input: SubmitWidgetInput) -> Result<EventResult> {
        let _step = self.lock(&input.conversation_id).await?;
        let (conversation, snapshot) = self.load_open(&input.conversation_id).await?;
        let prompt = self
            .shared
            .store
            .get_prompt(&conversation.id, &input.prompt_id)
            .await
            .map_err(RuntimeError::internal)?
            .ok_or_else(|| RuntimeError::PromptNotFound(input.prompt_id.clone()))?;
        if prompt.output.is_some() {
            return Err(RuntimeError::Conflict(format!(
                "prompt `{}` was submitted already",
                input.prompt_id
            )));
        }
        if prompt.prompt.widget_kind != input.widget_kind {
            return Err(RuntimeError::Invalid(format!(
                "widgetKind: prompt `{}` is a `{}` widget, not `{}`",
                input.prompt_id, prompt.prompt.widget_kind, input.widget_kind
            )));
        }
        // Checked before anything is written: a mismatch leaves the prompt open.
        crate::widget::check_output(&input.widget_kind, &prompt.prompt.input, &input.output)
            .map_err(RuntimeError::Invalid)?;
        let submitted = NewEvent {
            kind: "prompt.submitted".into(),
            data: json!({
                "promptId": input.prompt_id,
                "widgetKind": input.widget_kind,
                "output": input.output,
                "promptOffset": prompt.prompt.offset,
            }),
        };
        let widget = Input::Widget { kind: &input.widget_kind, output: &input.output };
        let agent = self.agent(&conversation);
        let out = self.run_turn(&conversation, agent, &snapshot, widget, Vec::new(), None).await;
        let mut commit = self.step_commit(&conversation.id, submitted, out, &snapshot);
        commit.close_prompts = vec![(input.prompt_id, input.output)];
        let (_, events) = self.commit_step(commit).await?;
        let event = events.into_iter().next().expect("the submission is committed first");
        Ok(EventResult { event })
    }

    async fn emit_custom_event(&self, input: CustomEventInput) -> Result<EventResult> {
        let _step = self.lock(&input.conversation_id).await?;
        self.load_open(&input.conversation_id).await?;
        let data = json!({ "name": input.event, "payload": input.payload });
        let (_, event) = self.append(&input.conversation_id, "custom", data, None).await?;
        Ok(EventResult { event })
    }

    async fn emit_journey_event(&self, input: JourneyEventInput) -> Result<JourneyEventResult> {
        let _step = self.lock(&input.conversation_id).await?;
        let (conversation, snapshot) = self.load_open(&input.conversation_id).await?;
        let target = input.target.clone().unwrap_or_default();
        let mut data = json!({
            "name": input.event, "payload": input.payload, "routing": input.routing,
        });
        if let Some(target) = &input.target {
            data["target"] = json!(target);
        }
        if let Some(app) = &input.app {
            data["app"] = app.clone();
        }
        if input.routing == Routing::Targeted {
            check_target(self.agent(&conversation), &conversation, &snapshot, &target)?;
        }
        let trigger = Trigger::Event {
            name: &input.event,
            payload: &input.payload,
            routing: input.routing,
            target_journey: target.journey_id.as_deref(),
            target_state: target.state_id.as_deref(),
        };
        let agent = self.agent(&conversation);
        let out = self
            .run_turn(&conversation, agent, &snapshot, Input::Event { trigger }, Vec::new(), None)
            .await;
        let event = NewEvent { kind: "journey.event".into(), data };
        let commit = self.step_commit(&conversation.id, event, out, &snapshot);
        let (_, events) = self.commit_step(commit).await?;
        let snapshot = self.load(&conversation.id).await?.1;
        Ok(JourneyEventResult { event: events[0].clone(), events, snapshot })
    }

    async fn emit_intermediate_message(
        &self,
        input: IntermediateMessageInput,
    ) -> Result<EventsResult> {
        let _step = self.lock(&input.conversation_id).await?;
        self.load_open(&input.conversation_id).await?;
        let mut data = message_data("assistant", &input.text);
        data["intermediate"] = json!(true);
        data["visibleToModel"] = json!(input.visible_to_model);
        data["reason"] = json!("intermediate");
        let (_, event) = self.append(&input.conversation_id, "message", data, None).await?;
        Ok(EventsResult { events: vec![event] })
    }

    async fn emit_generated_preamble(&self, input: PreambleInput) -> Result<PreambleResult> {
        let _step = self.lock(&input.conversation_id).await?;
        self.load_open(&input.conversation_id).await?;
        let max_words = input.max_words.unwrap_or(12) as usize;
        let written = match (&self.shared.chat, &input.purpose) {
            (Some(chat), purpose) => {
                let ask = format!(
                    "Write one short sentence (at most {max_words} words) telling the user you \
                     are working on it{}. Only the sentence.",
                    purpose.as_deref().map(|p| format!(": {p}")).unwrap_or_default()
                );
                match chat.complete(vec![ChatMessage::user(ask)], |_: &str| {}).await {
                    Ok(text) => Some(text),
                    Err(error) => {
                        tracing::warn!(%error, "the language model failed; a preamble without it");
                        None
                    }
                }
            }
            (None, _) => None,
        };
        let text = written.unwrap_or_else(|| match &input.purpose {
            Some(purpose) => format!("One moment while I {}.", purpose.trim_end_matches('.')),
            None => "One moment, let me look into that.".to_owned(),
        });
        let text = limit_words(&text, max_words);
        let mut data = message_data("assistant", &text);
        data["intermediate"] = json!(true);
        data["visibleToModel"] = json!(true);
        data["reason"] = json!("preamble");
        data["purpose"] = json!(input.purpose);
        let (_, event) = self.append(&input.conversation_id, "message", data, None).await?;
        Ok(PreambleResult { events: vec![event], text })
    }

    async fn compact_conversation(&self, input: CompactInput) -> Result<CompactResult> {
        let _step = self.lock(&input.conversation_id).await?;
        let (conversation, snapshot) = self.load(&input.conversation_id).await?;
        let newest = EventRange { limit: 1, newest: true, ..EventRange::default() };
        let last = self.read_events(&conversation.id, &newest).await?.pop().map_or(0, |e| e.offset);
        let from = input.from_offset.unwrap_or(0);
        let to = input.to_offset.unwrap_or(last);
        if to > last {
            return Err(RuntimeError::Invalid(format!(
                "toOffset: the last offset of the conversation is {last}"
            )));
        }
        let schema_version = input.schema_version.unwrap_or_else(|| "1".to_owned());
        let mut summary = self.summarise(&conversation.id, from, to).await?;
        summary["schemaVersion"] = json!(schema_version);
        let mut new_snapshot = snapshot.clone();
        new_snapshot.compaction_summary = Some(summary.clone());
        let data = json!({
            "fromOffset": from, "toOffset": to, "schemaVersion": schema_version, "summary": summary,
        });
        let commit = Commit {
            snapshot: Some(new_snapshot),
            ..Commit::events(
                &conversation.id,
                vec![NewEvent { kind: "conversation.compacted".into(), data }],
                Timestamp::now(),
            )
        };
        let (_, events) = self.commit_step(commit).await?;
        let snapshot = self.load(&conversation.id).await?.1;
        Ok(CompactResult { events, snapshot, summary })
    }

    async fn close_conversation(
        &self,
        conversation_id: &str,
        reason: Option<String>,
    ) -> Result<Conversation> {
        let _step = self.lock(conversation_id).await?;
        let (conversation, _) = self.load(conversation_id).await?;
        if conversation.lifecycle == Lifecycle::Closed {
            return Ok(conversation);
        }
        let data = json!({ "reason": reason, "from": conversation.lifecycle });
        let result =
            self.change_lifecycle(conversation_id, Lifecycle::Closed, "conversation.closed", data);
        Ok(result.await?.conversation)
    }

    async fn request_handoff(&self, input: HandoffInput) -> Result<LifecycleResult> {
        let _step = self.lock(&input.conversation_id).await?;
        self.load_open(&input.conversation_id).await?;
        let data = json!({
            "reason": input.reason, "summary": input.summary, "payload": input.payload,
        });
        self.change_lifecycle(
            &input.conversation_id,
            Lifecycle::Handoff,
            "conversation.handoff",
            data,
        )
        .await
    }

    async fn resume_conversation(&self, input: ResumeInput) -> Result<LifecycleResult> {
        let _step = self.lock(&input.conversation_id).await?;
        let (conversation, _) = self.load(&input.conversation_id).await?;
        let data = json!({
            "reason": input.reason, "payload": input.payload, "from": conversation.lifecycle,
        });
        self.change_lifecycle(
            &input.conversation_id,
            Lifecycle::Active,
            "conversation.resumed",
            data,
        )
        .await
    }

    async fn get_snapshot(&self, conversation_id: &str) -> Result<Snapshot> {
        Ok(self.load(conversation_id).await?.1)
    }

    async fn start_voice_conversation(
        &self,
        input: StartVoiceConversationInput,
    ) -> Result<VoiceStartResult> {
        self.start_voice_conversation_impl(input).await
    }

    async fn start_voice_segment(
        &self,
        conversation_id: &str,
        input: StartVoiceSegmentInput,
    ) -> Result<VoiceStartResult> {
        self.start_voice_segment_impl(conversation_id, input).await
    }

    async fn open_voice_socket(&self, token: &str) -> Result<Box<dyn VoiceSession>> {
        Ok(Box::new(self.open_voice_session(token).await?))
    }

    async fn replay_conversation(&self, input: ReplayInput) -> Result<ReplayResult> {
        let (conversation, snapshot) = self.load(&input.conversation_id).await?;
        // One more than the page says whether another page follows.
        let mut events = self
            .shared
            .store
            .list_events(&conversation.id, input.after_offset, input.limit.saturating_add(1))
            .await
            .map_err(RuntimeError::internal)?;
        let more = events.len() > input.limit as usize;
        events.truncate(input.limit as usize);
        let next_after_offset = events.last().filter(|_| more).map(|event| event.offset);
        let mut messages: Vec<ReplayMessage> = events
            .iter()
            .filter(|event| event.kind == "message")
            .filter_map(|event| {
                let data = &event.data;
                Some(ReplayMessage {
                    id: data["messageId"].as_str().unwrap_or(&event.id).to_owned(),
                    role: data["role"].as_str()?.to_owned(),
                    text: data["text"].as_str().unwrap_or_default().to_owned(),
                    offset: event.offset,
                    aborted: data["aborted"].as_bool().unwrap_or(false),
                    intermediate: data["intermediate"].as_bool().unwrap_or(false),
                    reason: data["reason"].as_str().map(str::to_owned),
                })
            })
            .collect();
        // A spoken reply the caller stopped after it was recorded keeps what they heard.
        for truncation in events.iter().filter(|event| event.kind == "message.truncated") {
            let id = truncation.data["messageId"].as_str().unwrap_or_default();
            if let Some(message) = messages.iter_mut().find(|message| message.id == id) {
                message.text = truncation.data["text"].as_str().unwrap_or_default().to_owned();
                message.aborted = true;
                message.reason = Some("truncated".to_owned());
            }
        }
        // Open prompts are the conversation's state, not a page of its log: every prompt
        // still open that was opened after `afterOffset`, at most a page of them.
        let open_prompts = self
            .shared
            .store
            .open_prompts(&conversation.id, input.after_offset, None, MAX_EVENT_PAGE)
            .await
            .map_err(RuntimeError::internal)?;
        Ok(ReplayResult {
            conversation,
            events,
            messages,
            open_prompts,
            snapshot,
            next_after_offset,
        })
    }
}
/// A channel event's data with the fields of a `message` event over it.
fn with_message(channel_data: &Value, role: &str, text: &str) -> Value {
    let mut data = channel_data.clone();
    if let (Value::Object(data), Value::Object(message)) = (&mut data, message_data(role, text)) {
        data.extend(message);
    }
    data
}

fn channel_result(result: TurnResult, created: bool) -> ChannelEventResult {
    ChannelEventResult {
        conversation: result.conversation,
        events: result.events,
        text: Some(result.text).filter(|text| !text.is_empty()),
        active_journey_id: result.active_journey_id,
        duplicate: result.duplicate,
        created,
    }
}

fn limit_words(text: &str, max_words: usize) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.len() <= max_words {
        return words.join(" ");
    }
    format!("{}…", words[..max_words].join(" ").trim_end_matches([',', '.', ';', ':']))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn other_daemons_appends_wake_streams_once_and_polls_wake_them_all() {
        let directory = tempfile::tempdir().unwrap();
        let store = cairn_store_sqlite::SqliteStore::open(&directory.path().join("cairn.db"));
        let runtime = DefaultRuntime::new(Arc::new(store.unwrap()), None, RuntimeConfig::default());
        let conversation =
            runtime.create_conversation(CreateConversationInput::default()).await.unwrap();
        let id = conversation.id.clone();
        let mut stream = runtime.subscribe(&id).unwrap();
        stream.borrow_and_update();
        let appended =
            |next_offset| ExternalChange::Appended { conversation_id: id.clone(), next_offset };

        let custom = CustomEventInput {
            conversation_id: id.clone(),
            event: "ping".to_owned(),
            payload: json!({}),
        };
        runtime.emit_custom_event(custom).await.unwrap();
        assert!(stream.has_changed().unwrap(), "a local append wakes the stream");
        assert_eq!(*stream.borrow_and_update(), 2);
        runtime.external_change(&appended(2));
        assert!(!stream.has_changed().unwrap(), "the store's notice of the same append: no wake");
        runtime.external_change(&appended(1));
        assert!(!stream.has_changed().unwrap(), "never back to an offset the stream passed");

        runtime.external_change(&appended(5));
        assert!(stream.has_changed().unwrap(), "another daemon's append wakes the stream");
        assert_eq!(*stream.borrow_and_update(), 5);

        for change in [ExternalChange::Poll, ExternalChange::Resync] {
            runtime.external_change(&change);
            assert!(stream.has_changed().unwrap(), "{change:?} makes every stream read again");
            assert_eq!(*stream.borrow_and_update(), 5, "without moving its offset");
        }
        for change in [
            ExternalChange::Memories { ids: vec![] },
            ExternalChange::Vectors { model: "m".to_owned(), ids: vec![] },
            ExternalChange::Appended { conversation_id: "conv_other".to_owned(), next_offset: 9 },
        ] {
            runtime.external_change(&change);
            assert!(!stream.has_changed().unwrap(), "{change:?} is not this stream's");
        }
    }
}
