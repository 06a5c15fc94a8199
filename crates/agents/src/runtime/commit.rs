//! Writing steps to the log: commits and the streams they wake, a step's commit and
//! snapshot, a user's turn, redeliveries of an idempotency key, new conversations,
//! lifecycle changes and single appends.

use cairn_store::{Commit, CommitOutcome, IdempotencyRecord, NewEvent, NewPrompt};
use cairn_types::{Conversation, IdPrefix, Lifecycle, RuntimeEvent, Snapshot, Timestamp, new_id};
use serde_json::{Value, json};

use cairn_runtime::*;

use super::DefaultRuntime;
use super::channel::Delivery;
use super::turn::{Input, TurnOutput};
use crate::llm::ChatMessage;

impl DefaultRuntime {
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
    pub(super) async fn commit_step(
        &self,
        commit: Commit,
    ) -> Result<(Conversation, Vec<RuntimeEvent>)> {
        match self.commit(commit).await? {
            CommitOutcome::Committed { conversation, events } => Ok((conversation, events)),
            CommitOutcome::Duplicate(_) | CommitOutcome::NotFound => {
                unreachable!("commits without a key are never duplicates; NotFound is an error")
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
    pub(super) fn step_commit(
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

    /// A user message and the agent's reply, as one or two commits.
    pub(super) async fn user_turn(
        &self,
        conversation: &Conversation,
        snapshot: &Snapshot,
        text: &str,
        message_data: Value,
        deltas: Option<&TextDeltas>,
        delivery: Option<&Delivery>,
    ) -> Result<TurnResult> {
        let at = Timestamp::now();
        let words_only = super::words::words_only(&message_data, conversation);
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
        let input = Input::Message { text, words_only };
        let out = self.run_turn(conversation, agent, snapshot, input, history, deltas).await;
        let (text, active_journey_id, handoff) =
            (out.text.clone(), out.journey.active_journey_id.clone(), out.handoff);
        let mut commit = self.step_commit(&conversation.id, user_event, out, snapshot);
        Delivery::stamp(delivery, &mut commit);
        if handoff {
            hand_off(&mut commit);
        }
        self.finish(commit, text, active_journey_id).await
    }

    pub(super) async fn finish(
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
    pub(super) async fn repeat(
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

    pub(super) async fn create(
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
    pub(super) async fn change_lifecycle(
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
    pub(super) async fn append(
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

pub(super) struct TurnResult {
    pub(super) conversation: Conversation,
    pub(super) events: Vec<RuntimeEvent>,
    pub(super) text: String,
    pub(super) active_journey_id: Option<String>,
    pub(super) duplicate: bool,
}

/// The user asked for a person: the step also hands the conversation over.
pub(super) fn hand_off(commit: &mut Commit) {
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
