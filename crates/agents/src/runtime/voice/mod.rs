//! Voice conversations in the default runtime: starting a segment (its socket token
//! minted, only its hash stored), opening its socket with the token, and the two halves of
//! a spoken turn: the caller's transcript committed with the step it sets off, and the
//! reply committed once it has been spoken, with only what the caller heard.

mod session;

use cairn_store::{Commit, NewEvent, VoiceSegmentRecord};
use cairn_types::runtime::{
    ChannelEventInput, ChannelEventNature, ChannelSegment, StartVoiceConversationInput,
    StartVoiceSegmentInput, VOICE_CHANNEL, VOICE_PROTOCOL, VoiceConnection, VoiceConnectionStatus,
    VoiceSocket, VoiceStartResult,
};
use cairn_types::{IdPrefix, Lifecycle, RuntimeEvent, Timestamp, new_id};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

pub(crate) use self::session::Session;
use super::DefaultRuntime;
use super::channel::{channel_data, with_message};
use super::commit::hand_off;
use super::turn::{Input, message_data};
use cairn_runtime::{ChannelInput, CreateConversationInput, Result, RuntimeError, TextDeltas};

/// What a caller hears when they speak while a person has the conversation.
const ON_HOLD: &str =
    "A person from the team will take over this call shortly. Please stay on the line.";

/// What socket tokens start with, so they are told apart from other credentials.
pub(crate) const SOCKET_TOKEN_PREFIX: &str = "vst_";

/// The hex sha256 of a socket token: what the store keeps and looks tokens up by.
pub(crate) fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

fn new_socket_token() -> String {
    let mut random = [0u8; 32];
    getrandom::fill(&mut random).expect("the operating system provides randomness");
    format!("{SOCKET_TOKEN_PREFIX}{}", hex::encode(random))
}

/// The reply of a voice turn, committed only once it has been spoken.
#[derive(Debug, Clone)]
pub(crate) struct PendingReply {
    /// The data of its `message` event, as the step wrote it.
    pub data: Value,
    pub text: String,
}

/// What the caller heard of a reply.
#[derive(Debug, Clone)]
pub(crate) struct Heard {
    pub text: String,
    /// Cut short (barge-in, `response.cancel`, truncation, the socket closing).
    pub aborted: bool,
    pub reason: Option<String>,
    /// Audio sent, and audio heard, in milliseconds.
    pub audio_ms: u64,
    pub heard_ms: u64,
}

impl DefaultRuntime {
    pub(crate) async fn start_voice_conversation_impl(
        &self,
        input: StartVoiceConversationInput,
    ) -> Result<VoiceStartResult> {
        let create = CreateConversationInput {
            id: input.id,
            agent_id: input.agent_id,
            channel: Some(ChannelInput::Name(VOICE_CHANNEL.to_owned())),
            context: input.context,
        };
        let (conversation, mut created_events, _) = self.create(create).await?;
        let segment = StartVoiceSegmentInput { app: input.app, client: input.client };
        let mut result = self.start_voice_segment_impl(&conversation.id, segment).await?;
        created_events.append(&mut result.events);
        result.events = created_events;
        Ok(result)
    }

    pub(crate) async fn start_voice_segment_impl(
        &self,
        conversation_id: &str,
        input: StartVoiceSegmentInput,
    ) -> Result<VoiceStartResult> {
        let _step = self.lock(conversation_id).await?;
        let (conversation, _) = self.load(conversation_id).await?;
        if conversation.lifecycle == Lifecycle::Closed {
            return Err(RuntimeError::ConversationClosed(conversation.id));
        }
        let now = Timestamp::now();
        let ttl = i64::try_from(self.shared.voice.token_ttl.as_millis()).unwrap_or(i64::MAX);
        let expires_at = Timestamp::from_millis(now.as_millis().saturating_add(ttl));
        let token = new_socket_token();
        let segment = ChannelSegment {
            id: new_id(IdPrefix::ChannelSegment),
            conversation_id: conversation.id.clone(),
            channel: VOICE_CHANNEL.to_owned(),
            started_at: now,
            ended_at: None,
        };
        let connection = VoiceConnection {
            id: new_id(IdPrefix::VoiceConnection),
            channel_segment_id: segment.id.clone(),
            adapter: "websocket".to_owned(),
            status: VoiceConnectionStatus::Pending,
            provider: None,
            provider_session_id: None,
            expires_at: Some(expires_at),
        };
        let record = VoiceSegmentRecord {
            segment: segment.clone(),
            connection: connection.clone(),
            token_hash: token_hash(&token),
            token_used_at: None,
            app: input.app.clone(),
            client: input.client.clone(),
        };
        let stored = self
            .shared
            .store
            .create_voice_segment(&record)
            .await
            .map_err(RuntimeError::internal)?;
        if !stored {
            return Err(RuntimeError::ConversationNotFound(conversation.id));
        }
        let mut data = json!({
            "channelSegmentId": segment.id,
            "connectionId": connection.id,
            "channel": VOICE_CHANNEL,
            "adapter": connection.adapter,
            "expiresAt": expires_at,
        });
        if let Some(app) = &input.app {
            data["app"] = app.clone();
        }
        if let Some(client) = &input.client {
            data["client"] = client.clone();
        }
        let event = NewEvent { kind: "voice.segment.started".into(), data };
        let (conversation, events) =
            self.commit_step(Commit::events(&conversation.id, vec![event], now)).await?;
        Ok(VoiceStartResult {
            conversation,
            channel_segment: segment,
            connection,
            socket: VoiceSocket {
                url: String::new(),
                token,
                protocol: VOICE_PROTOCOL.to_owned(),
                expires_at,
            },
            events,
            events_url: None,
        })
    }

    /// Uses a socket token: the session of its segment, or `Unauthorized`.
    pub(crate) async fn open_voice_session(&self, token: &str) -> Result<Session> {
        let refused = || {
            RuntimeError::Unauthorized(
                "the voice socket token is missing, wrong, used or expired: start a voice \
                 segment for a new one"
                    .to_owned(),
            )
        };
        if !token.starts_with(SOCKET_TOKEN_PREFIX) {
            return Err(refused());
        }
        let record = self
            .shared
            .store
            .claim_voice_token(&token_hash(token), Timestamp::now())
            .await
            .map_err(RuntimeError::internal)?
            .ok_or_else(refused)?;
        Ok(Session::new(self.clone(), record))
    }

    /// A transcript's turn: the caller's message and the step it sets off are committed at
    /// once (SSE readers see them); the reply comes back uncommitted, to be committed by
    /// [`DefaultRuntime::commit_reply`] with what was heard of it.
    pub(crate) async fn voice_turn(
        &self,
        segment: &ChannelSegment,
        message_id: &str,
        transcript: &str,
        audio_ms: u64,
        reply_id: &str,
        deltas: Option<TextDeltas>,
    ) -> Result<(Vec<RuntimeEvent>, Option<PendingReply>)> {
        let conversation_id = &segment.conversation_id;
        let _step = self.lock(conversation_id).await?;
        let (conversation, snapshot) = self.load_open(conversation_id).await?;
        let input = ChannelEventInput::voice_turn(transcript);
        let mut data =
            with_message(&channel_data(&input, ChannelEventNature::VoiceTurn), "user", transcript);
        data["messageId"] = json!(message_id);
        data["channelSegmentId"] = json!(segment.id);
        data["audioMs"] = json!(audio_ms);
        let user_event = NewEvent { kind: "message".into(), data };
        let at = Timestamp::now();
        if conversation.lifecycle == Lifecycle::Handoff {
            // A person has the conversation: record what the caller said, and tell the
            // caller so (silence on a line sounds like a dropped call); the agent answers
            // nothing else.
            let (_, events) =
                self.commit_step(Commit::events(conversation_id, vec![user_event], at)).await?;
            if let Some(deltas) = &deltas {
                let _ = deltas.send(ON_HOLD.to_owned());
            }
            let mut data = message_data("assistant", ON_HOLD);
            data["messageId"] = json!(reply_id);
            data["reason"] = json!("handoff");
            return Ok((events, Some(PendingReply { text: ON_HOLD.to_owned(), data })));
        }
        let mut history = self.history(conversation_id).await?;
        if self.shared.chat.is_some() {
            history.push(crate::llm::ChatMessage::user(transcript));
        }
        let agent = self.agent(&conversation);
        let mut out = self
            .run_turn(
                &conversation,
                agent,
                &snapshot,
                Input::Message { text: transcript, words_only: true },
                history,
                deltas.as_ref(),
            )
            .await;
        drop(deltas);
        // The reply is the step's last event; prompts point at earlier ones. It takes the id
        // the session announced when it began to speak it.
        let reply = match out.events.last() {
            Some(last) if last.kind == "message" && last.data["role"] == "assistant" => {
                out.events.pop().map(|mut event| {
                    event.data["messageId"] = json!(reply_id);
                    PendingReply {
                        text: event.data["text"].as_str().unwrap_or_default().to_owned(),
                        data: event.data,
                    }
                })
            }
            _ => None,
        };
        let handoff = out.handoff;
        let mut commit = self.step_commit(conversation_id, user_event, out, &snapshot);
        if handoff {
            hand_off(&mut commit);
        }
        let (_, events) = self.commit_step(commit).await?;
        Ok((events, reply))
    }

    /// Commits a spoken reply's `message` with the text the caller heard; a reply cut short
    /// is marked `aborted` (replay shows it so) and keeps only what was heard.
    pub(crate) async fn commit_reply(
        &self,
        segment: &ChannelSegment,
        reply: PendingReply,
        heard: &Heard,
    ) -> Result<RuntimeEvent> {
        let mut data = reply.data;
        data["text"] = json!(heard.text);
        data["channel"] = json!(VOICE_CHANNEL);
        data["channelSegmentId"] = json!(segment.id);
        data["audioMs"] = json!(heard.audio_ms);
        if heard.aborted {
            data["aborted"] = json!(true);
            data["heardMs"] = json!(heard.heard_ms);
            if let Some(reason) = &heard.reason {
                data["reason"] = json!(reason);
            }
            if let Value::Object(map) = &mut data {
                // Support references of words never heard would mislead a reader.
                map.remove("supportReferences");
                map.remove("supportSourceLinks");
            }
        }
        let (_, event) = self.append(&segment.conversation_id, "message", data, None).await?;
        Ok(event)
    }

    /// Records that the caller heard only part of a reply committed earlier (a
    /// `conversation.item.truncate` after the reply ended): a `message.truncated` event,
    /// which replay applies to the message.
    pub(crate) async fn truncate_reply(
        &self,
        segment: &ChannelSegment,
        message_id: &str,
        heard: &Heard,
    ) -> Result<RuntimeEvent> {
        let data = json!({
            "messageId": message_id,
            "text": heard.text,
            "heardMs": heard.heard_ms,
            "audioMs": heard.audio_ms,
            "channelSegmentId": segment.id,
        });
        let (_, event) =
            self.append(&segment.conversation_id, "message.truncated", data, None).await?;
        Ok(event)
    }

    /// Ends a segment once: `voice.segment.ended` in the log.
    pub(crate) async fn end_voice_segment(&self, segment_id: &str, reason: &str) -> Result<()> {
        let at = Timestamp::now();
        let ended = self
            .shared
            .store
            .end_voice_segment(segment_id, at)
            .await
            .map_err(RuntimeError::internal)?;
        let Some(record) = ended else { return Ok(()) };
        let started = record.segment.started_at.as_millis();
        let data = json!({
            "channelSegmentId": record.segment.id,
            "connectionId": record.connection.id,
            "reason": reason,
            "durationMs": (at.as_millis() - started).max(0),
        });
        match self.append(&record.segment.conversation_id, "voice.segment.ended", data, None).await
        {
            Ok(_) | Err(RuntimeError::ConversationNotFound(_)) => Ok(()),
            Err(error) => Err(error),
        }
    }
}
