//! The [`Runtime`] trait: what the HTTP handler asks of a conversation runtime, with the
//! inputs and results of every operation.
//!
//! Three capabilities are required; every other one has a default that answers
//! [`RuntimeError::NotSupported`], which the handler turns into 501
//! `CAPABILITY_NOT_SUPPORTED`. A runtime of your own implements what it can.

use async_trait::async_trait;
use cairn_types::runtime::*;
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use crate::voice::VoiceSession;

/// What a runtime operation can fail with; each maps to one HTTP status and error code.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("conversation `{0}` was not found")]
    ConversationNotFound(String),
    #[error("prompt `{0}` was not found")]
    PromptNotFound(String),
    #[error("conversation `{0}` is closed; resume it first")]
    ConversationClosed(String),
    /// The input is well-formed but not acceptable (422).
    #[error("{0}")]
    Invalid(String),
    /// The input conflicts with the conversation's state (409), e.g. a prompt answered twice.
    #[error("{0}")]
    Conflict(String),
    /// A credential the operation itself checks is missing, wrong, used or expired (401),
    /// e.g. a voice socket token.
    #[error("{0}")]
    Unauthorized(String),
    #[error("this runtime does not support `{0}`")]
    NotSupported(&'static str),
    #[error("{0}")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl RuntimeError {
    pub fn internal(error: impl std::error::Error + Send + Sync + 'static) -> RuntimeError {
        RuntimeError::Internal(Box::new(error))
    }
}

pub type Result<T, E = RuntimeError> = std::result::Result<T, E>;

/// Text deltas of the assistant's reply, for callers that stream it.
pub type TextDeltas = mpsc::UnboundedSender<String>;

/// A conversation runtime. Implement what it offers (a conversational runtime: at least
/// `create_conversation`, `handle_user_message` and `list_events`); every method defaults
/// to "not supported", so a runtime of one capability (a voice booth, a read-only log)
/// writes only that one.
#[async_trait]
pub trait Runtime: Send + Sync + 'static {
    /// Creates a conversation. Like every capability, "not supported" (501) unless the
    /// runtime offers it.
    async fn create_conversation(&self, _input: CreateConversationInput) -> Result<Conversation> {
        Err(RuntimeError::NotSupported("createConversation"))
    }

    /// Applies a user message and produces the assistant's turn.
    async fn handle_user_message(&self, _input: UserMessageInput) -> Result<SendMessageResult> {
        Err(RuntimeError::NotSupported("sendMessage"))
    }

    /// The first `limit` events with an offset above `after_offset` (from the first event
    /// when `None`), in order: fewer only when the log holds no more. The handler asks for
    /// pages of at most [`MAX_EVENT_PAGE`] + 1, so a runtime never has to return more.
    async fn list_events(
        &self,
        _conversation_id: &str,
        _after_offset: Option<u64>,
        _limit: u32,
    ) -> Result<Vec<RuntimeEvent>> {
        Err(RuntimeError::NotSupported("listEvents"))
    }

    /// A receiver that changes whenever the conversation's log grows (its value: the next
    /// offset), so event streams are pushed instead of polled. While a stream holds one it
    /// reads the log only when the receiver changes, never on a timer: announce every
    /// append, from whatever writes the log. `None`: streams poll every
    /// `sse_poll_interval`.
    fn subscribe(&self, _conversation_id: &str) -> Option<watch::Receiver<u64>> {
        None
    }

    async fn list_conversations(&self, _input: ListConversationsInput) -> Result<ConversationList> {
        Err(RuntimeError::NotSupported("listConversations"))
    }

    /// Applies a channel event; `deltas` receives the reply's text as it is written when
    /// the caller streams.
    async fn handle_channel_event(
        &self,
        _input: ChannelEventInput,
        _deltas: Option<TextDeltas>,
    ) -> Result<ChannelEventResult> {
        Err(RuntimeError::NotSupported("handleChannelEvent"))
    }

    async fn resolve_channel_output(&self, _input: ResolveOutputInput) -> Result<EventResult> {
        Err(RuntimeError::NotSupported("resolveChannelOutput"))
    }

    /// Starts a conversation on the voice channel: its first voice segment, a connection,
    /// and a single-use socket token. Leave `socket.url` empty and `events_url` `None`: the
    /// handler fills them, since it knows the address clients reach it by.
    async fn start_voice_conversation(
        &self,
        _input: StartVoiceConversationInput,
    ) -> Result<VoiceStartResult> {
        Err(RuntimeError::NotSupported("startVoiceConversation"))
    }

    /// Starts a voice segment in an existing conversation, as
    /// [`start_voice_conversation`](Runtime::start_voice_conversation) does.
    async fn start_voice_segment(
        &self,
        _conversation_id: &str,
        _input: StartVoiceSegmentInput,
    ) -> Result<VoiceStartResult> {
        Err(RuntimeError::NotSupported("startVoiceSegment"))
    }

    /// Claims a socket token for `GET /voice/socket`, before the WebSocket upgrade: the
    /// session that runs once the socket is open. A token that is missing (empty), wrong,
    /// already used or expired fails with [`RuntimeError::Unauthorized`], changing nothing.
    /// The token is the socket's only credential: the handler's `authorize` hook does not
    /// run for this route.
    async fn open_voice_socket(&self, _token: &str) -> Result<Box<dyn VoiceSession>> {
        Err(RuntimeError::NotSupported("voiceSocket"))
    }

    async fn submit_widget(&self, _input: SubmitWidgetInput) -> Result<EventResult> {
        Err(RuntimeError::NotSupported("submitWidget"))
    }

    async fn emit_custom_event(&self, _input: CustomEventInput) -> Result<EventResult> {
        Err(RuntimeError::NotSupported("emitCustomEvent"))
    }

    async fn emit_journey_event(&self, _input: JourneyEventInput) -> Result<JourneyEventResult> {
        Err(RuntimeError::NotSupported("emitJourneyEvent"))
    }

    async fn emit_intermediate_message(
        &self,
        _input: IntermediateMessageInput,
    ) -> Result<EventsResult> {
        Err(RuntimeError::NotSupported("emitIntermediateMessage"))
    }

    async fn emit_generated_preamble(&self, _input: PreambleInput) -> Result<PreambleResult> {
        Err(RuntimeError::NotSupported("emitGeneratedPreamble"))
    }

    async fn compact_conversation(&self, _input: CompactInput) -> Result<CompactResult> {
        Err(RuntimeError::NotSupported("compactConversation"))
    }

    async fn close_conversation(
        &self,
        _conversation_id: &str,
        _reason: Option<String>,
    ) -> Result<Conversation> {
        Err(RuntimeError::NotSupported("closeConversation"))
    }

    async fn request_handoff(&self, _input: HandoffInput) -> Result<LifecycleResult> {
        Err(RuntimeError::NotSupported("requestHandoff"))
    }

    async fn resume_conversation(&self, _input: ResumeInput) -> Result<LifecycleResult> {
        Err(RuntimeError::NotSupported("resumeConversation"))
    }

    async fn get_snapshot(&self, _conversation_id: &str) -> Result<Snapshot> {
        Err(RuntimeError::NotSupported("getSnapshot"))
    }

    async fn replay_conversation(&self, _input: ReplayInput) -> Result<ReplayResult> {
        Err(RuntimeError::NotSupported("replayConversation"))
    }
}

/// A user message for [`Runtime::handle_user_message`].
#[derive(Debug, Clone, Default)]
pub struct UserMessageInput {
    pub conversation_id: String,
    pub text: String,
    pub app: Option<Value>,
    pub channel: Option<ConversationChannel>,
    pub turn: Option<Value>,
    /// Receives the reply's text as it is written, when the caller streams.
    pub deltas: Option<TextDeltas>,
}

/// The body of `POST /conversations/:id/messages`.
/// The body of `POST /conversations/:id/widgets`.
#[derive(Debug, Clone, PartialEq)]
pub struct SubmitWidgetInput {
    pub conversation_id: String,
    pub prompt_id: String,
    pub widget_kind: String,
    pub output: Value,
}

/// The body of `POST /conversations/:id/custom-events`.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomEventInput {
    pub conversation_id: String,
    pub event: String,
    pub payload: Value,
}

/// Where a targeted journey event goes.
/// The body of `POST /conversations/:id/journey-events`.
#[derive(Debug, Clone, PartialEq)]
pub struct JourneyEventInput {
    pub conversation_id: String,
    pub event: String,
    pub app: Option<Value>,
    pub payload: Value,
    pub routing: Routing,
    pub target: Option<JourneyTarget>,
}

/// The body of `POST /conversations/:id/intermediate-messages`.
#[derive(Debug, Clone, PartialEq)]
pub struct IntermediateMessageInput {
    pub conversation_id: String,
    pub text: String,
    pub visible_to_model: bool,
}

/// The body of `POST /conversations/:id/preambles`.
#[derive(Debug, Clone, PartialEq)]
pub struct PreambleInput {
    pub conversation_id: String,
    pub max_words: Option<u32>,
    pub purpose: Option<String>,
}

/// The body of `POST /conversations/:id/compact`.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactInput {
    pub conversation_id: String,
    pub from_offset: Option<u64>,
    pub to_offset: Option<u64>,
    pub schema_version: Option<String>,
}

/// The body of `POST /conversations/:id/close`.
/// The body of `POST /conversations/:id/handoff`.
#[derive(Debug, Clone, PartialEq)]
pub struct HandoffInput {
    pub conversation_id: String,
    pub reason: String,
    pub summary: Option<String>,
    pub payload: Option<Value>,
}

/// The body of `POST /conversations/:id/resume`.
#[derive(Debug, Clone, PartialEq)]
pub struct ResumeInput {
    pub conversation_id: String,
    pub reason: Option<String>,
    pub payload: Option<Value>,
}

/// The query of `GET /conversations/:id/replay`: a page of the log to rebuild.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayInput {
    pub conversation_id: String,
    pub after_offset: Option<u64>,
    /// At most this many events (1 to [`MAX_EVENT_PAGE`]; the handler checks it).
    pub limit: u32,
}
