//! The [`Runtime`] trait for [`DefaultRuntime`]: each operation checked, locked, run and
//! committed, with the checks and list cursors they take.

use async_trait::async_trait;
use cairn_store::{Commit, ConversationCursor, ConversationQuery, EventRange, NewEvent};
use cairn_types::{Conversation, Lifecycle, RuntimeEvent, Snapshot, Timestamp};
use serde_json::{Value, json};
use tokio::sync::watch;

use cairn_runtime::*;

use super::DefaultRuntime;
use super::channel::{Delivery, channel_data, channel_result, with_message};
use super::turn::{Input, message_data};
use crate::journey::{Agent, Trigger};
use crate::llm::ChatMessage;

const DEFAULT_LIST_LIMIT: u32 = 50;
const MAX_LIST_LIMIT: u32 = 200;
/// How many conversations' newest messages a listing reads at once.
const LAST_MESSAGE_READS: usize = 8;
/// Past this many conversations with notification senders, unused ones are dropped.
const PRUNE_SUBSCRIPTIONS_AT: usize = 1024;

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
        use futures_util::{StreamExt, TryStreamExt};
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
        // Each conversation's newest message, a few reads at a time (the store's pool
        // serves them side by side).
        let newest = EventRange::newest_of_kind("message", 1);
        let ids: Vec<String> = conversations.iter().map(|found| found.id.clone()).collect();
        let newest_messages: Vec<(String, Vec<RuntimeEvent>)> = futures_util::stream::iter(ids)
            .map(|id| {
                let (store, newest) = (self.shared.store.clone(), newest.clone());
                async move { store.read_events(&id, &newest).await.map(|events| (id, events)) }
            })
            .buffered(LAST_MESSAGE_READS)
            .try_collect()
            .await
            .map_err(RuntimeError::internal)?;
        let mut last_messages = std::collections::BTreeMap::new();
        for (id, mut events) in newest_messages {
            if let Some(event) = events.pop() {
                let text = |key: &str| event.data[key].as_str().unwrap_or_default().to_owned();
                let (role, text) = (text("role"), text("text"));
                let message =
                    LastMessage { role, text, offset: event.offset, created_at: event.created_at };
                last_messages.insert(id, message);
            }
        }
        Ok(ConversationList { conversations, next_cursor, prev_cursor, last_messages })
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
        // still open that was opened after `afterOffset`, at most a page of them. Prompts
        // close with their conversation: a closed one has none (it takes no output).
        let open_prompts = if conversation.lifecycle == Lifecycle::Closed {
            Vec::new()
        } else {
            self.shared
                .store
                .open_prompts(&conversation.id, input.after_offset, None, MAX_EVENT_PAGE)
                .await
                .map_err(RuntimeError::internal)?
        };
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

/// Preambles that fit fewer words, longest first: what is said when a preamble does not fit.
const SHORT_PREAMBLES: [&str; 4] =
    ["One moment, let me look into that.", "One moment, please.", "One moment.", "Okay."];

/// `text` in at most `max_words` words, never cut mid-phrase: its whole sentences that fit,
/// else the longest of [`SHORT_PREAMBLES`] that fits.
fn limit_words(text: &str, max_words: usize) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.len() <= max_words {
        return words.join(" ");
    }
    let sentence_end = words[..max_words.min(words.len())]
        .iter()
        .rposition(|word| word.ends_with(['.', '!', '?']));
    if let Some(end) = sentence_end {
        return words[..=end].join(" ");
    }
    let fits = |preamble: &&str| preamble.split_whitespace().count() <= max_words;
    SHORT_PREAMBLES.into_iter().find(fits).unwrap_or("Okay.").to_owned()
}

#[cfg(test)]
mod preamble_tests {
    use super::limit_words;

    #[test]
    fn a_preamble_is_cut_to_whole_sentences_or_said_shorter() {
        let text = "One moment while I check the calendar.";
        assert_eq!(limit_words(text, 12), text);
        assert_eq!(limit_words(text, 3), "One moment, please.");
        assert_eq!(limit_words(text, 2), "One moment.");
        assert_eq!(limit_words(text, 5), "One moment, please.");
        assert_eq!(limit_words(text, 1), "Okay.");
        assert_eq!(limit_words("Sure. Let me look at your order history now.", 4), "Sure.");
        assert_eq!(
            limit_words("One moment while I check the calendar for you.", 7),
            "One moment, let me look into that."
        );
    }
}
