//! The runtime's HTTP handler: `handle(Request) -> Response` over `http` types, with the
//! seed's options (base path, CORS, `authorize`, event definitions, error exposure, SSE).

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use cairn_http::{ApiError, ResponseBody, json_response, parse_json, parse_query, read_body};
use cairn_types::ErrorCode;
use cairn_types::runtime::*;
use http::request::Parts;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tokio::sync::watch;

use crate::channel::merge_envelope;
use crate::cors::Cors;
use crate::events::{EventDefinition, EventSchemas};
use crate::runtime::*;
use crate::sse;
use crate::voice::{self, Bases, VoiceHandshake, VoiceUpgrade};

/// The largest request body accepted, in bytes.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// The longest text a message may carry, in characters: a long letter, well below what a
/// memory or a language model takes.
pub const MAX_MESSAGE_CHARS: usize = 32 * 1024;

/// A message's text: not empty, not over [`MAX_MESSAGE_CHARS`].
fn check_text(field: &str, text: &str) -> Result<(), ApiError> {
    if text.trim().is_empty() {
        return Err(ApiError::validation(format!("{field}: must not be empty")));
    }
    check_length(field, text)
}

fn check_length(field: &str, text: &str) -> Result<(), ApiError> {
    let length = text.chars().count();
    if length > MAX_MESSAGE_CHARS {
        return Err(ApiError::validation(format!(
            "{field}: {length} characters is over the limit of {MAX_MESSAGE_CHARS} for a message"
        )));
    }
    Ok(())
}

pub use cairn_http::CredentialEnds;

/// Resolves when `ends` does; never without one (a credential nothing revokes).
pub(crate) async fn credential_ended(ends: &mut Option<CredentialEnds>) {
    match ends {
        Some(ends) => ends.await,
        None => std::future::pending().await,
    }
}

/// What [`Authorize::authorize`] decides.
pub enum Authorization {
    /// Let the request through; the caller is told apart by its credentials (see
    /// [`Authorization::AllowAs`]).
    Allow,
    /// Let the request through as this principal (an API key's id, a token's subject, …):
    /// what the handler counts per caller, such as open event streams. With plain `Allow`
    /// the handler tells callers apart by the credentials they send (`X-API-Key` or
    /// `Authorization`), else by a `std::net::SocketAddr` request extension, else counts
    /// them all as one.
    AllowAs(String),
    /// Like [`Authorization::AllowAs`], for a credential that can be revoked or expire: an
    /// event stream opened with it ends (with an `error` event) once the future completes.
    AllowUntil(String, CredentialEnds),
    /// Like [`Authorization::AllowAs`] (with `until`, [`Authorization::AllowUntil`]), and
    /// these headers go on the answer: the caller's rate-limit state, say.
    AllowWithHeaders { principal: String, until: Option<CredentialEnds>, headers: http::HeaderMap },
    /// Answered with 401 `UNAUTHORIZED`.
    Deny,
    /// Sent as it is: a custom denial.
    Respond(Response<ResponseBody>),
}

/// The `authorize` hook: sees the path after the base path is removed and the request
/// before its body is read (method, URL, headers, extensions). Not called for preflights.
#[async_trait]
pub trait Authorize: Send + Sync + 'static {
    async fn authorize(&self, path: &str, request: &Parts) -> Authorization;
}

/// Options of the handler; build with [`HandlerOptions::new`] and the setters.
pub struct HandlerOptions {
    runtime: Arc<dyn Runtime>,
    agent_id: Option<String>,
    authorize: Option<Arc<dyn Authorize>>,
    base_path: String,
    cors: Option<Cors>,
    custom_events: Vec<EventDefinition>,
    journey_events: Vec<EventDefinition>,
    expose_internal_errors: bool,
    sse_poll_interval: Duration,
    sse_heartbeat: Duration,
    max_streams_per_principal: usize,
    voice: VoiceHandshake,
}

/// How many event streams one caller may hold open at once by default.
pub const DEFAULT_MAX_STREAMS_PER_PRINCIPAL: usize = 64;

impl HandlerOptions {
    pub fn new(runtime: Arc<dyn Runtime>) -> HandlerOptions {
        HandlerOptions {
            runtime,
            agent_id: None,
            authorize: None,
            base_path: String::new(),
            cors: None,
            custom_events: Vec::new(),
            journey_events: Vec::new(),
            expose_internal_errors: false,
            sse_poll_interval: Duration::from_millis(1000),
            sse_heartbeat: Duration::from_secs(15),
            max_streams_per_principal: DEFAULT_MAX_STREAMS_PER_PRINCIPAL,
            voice: VoiceHandshake::default(),
        }
    }

    /// The agent of conversations created without an `agentId`.
    pub fn agent_id(mut self, agent_id: impl Into<String>) -> Self {
        self.agent_id = Some(agent_id.into());
        self
    }

    pub fn authorize(mut self, authorize: impl Authorize) -> Self {
        self.authorize = Some(Arc::new(authorize));
        self
    }

    /// The path the handler is mounted at, e.g. `/api/runtime`; removed before routing.
    pub fn base_path(mut self, base_path: impl Into<String>) -> Self {
        self.base_path = base_path.into().trim_end_matches('/').to_owned();
        self
    }

    pub fn cors(mut self, cors: Cors) -> Self {
        self.cors = Some(cors);
        self
    }

    pub fn custom_events(mut self, definitions: Vec<EventDefinition>) -> Self {
        self.custom_events = definitions;
        self
    }

    pub fn journey_events(mut self, definitions: Vec<EventDefinition>) -> Self {
        self.journey_events = definitions;
        self
    }

    /// Whether a 500 says what failed (default: only `INTERNAL_ERROR`).
    pub fn expose_internal_errors(mut self, expose: bool) -> Self {
        self.expose_internal_errors = expose;
        self
    }

    /// How often an event stream reads the log when no notification came (default 1 s).
    pub fn sse_poll_interval(mut self, interval: Duration) -> Self {
        self.sse_poll_interval = interval.max(Duration::from_millis(10));
        self
    }

    /// How long an idle event stream waits before a comment heartbeat (default 15 s).
    pub fn sse_heartbeat(mut self, interval: Duration) -> Self {
        self.sse_heartbeat = interval.max(Duration::from_millis(10));
        self
    }

    /// How many event streams one principal may hold open at once (default 64; at least
    /// 1). One more is refused with 429 `RATE_LIMITED`, so one caller cannot take every
    /// connection a server allows.
    pub fn max_streams_per_principal(mut self, streams: usize) -> Self {
        self.max_streams_per_principal = streams.max(1);
        self
    }

    /// The voice socket's handshake: the public URL clients reach the socket by, when it is
    /// not the request's own host, and the socket's limits (see [`VoiceHandshake`]).
    pub fn voice(mut self, handshake: VoiceHandshake) -> Self {
        self.voice = handshake;
        self
    }

    /// Builds the handler; fails when an event definition's schema is not a valid JSON
    /// Schema, or the voice public URL is not a ws(s) or http(s) URL.
    pub fn build(self) -> Result<RuntimeHandler, String> {
        let custom_events = EventSchemas::compile("customEvents", &self.custom_events)?;
        let journey_events = EventSchemas::compile("journeyEvents", &self.journey_events)?;
        let voice_bases = self.voice.public_bases()?;
        let (shutdown, _) = watch::channel(false);
        Ok(RuntimeHandler {
            inner: Arc::new(Inner {
                runtime: self.runtime,
                agent_id: self.agent_id,
                authorize: self.authorize,
                base_path: self.base_path,
                cors: self.cors,
                custom_events,
                journey_events,
                expose_internal_errors: self.expose_internal_errors,
                sse: sse::StreamOptions {
                    poll_interval: self.sse_poll_interval,
                    heartbeat: self.sse_heartbeat,
                },
                voice: self.voice,
                voice_bases,
                shutdown,
                streams: StreamCounts::new(self.max_streams_per_principal),
                voice_credentials: Mutex::default(),
            }),
        })
    }
}

impl Inner {
    /// Keeps the end of a voice start's credential for the socket its token opens.
    fn keep_voice_credential(&self, token: &str, ends: Option<CredentialEnds>) {
        let Some(ends) = ends else { return };
        let mut kept = self.voice_credentials.lock().expect("never poisoned");
        let now = std::time::Instant::now();
        kept.retain(|_, (at, _)| now.duration_since(*at) < VOICE_CREDENTIAL_KEPT);
        kept.insert(token.to_owned(), (now, ends));
    }

    /// The end of the credential that started the voice socket of `token`, if it can end.
    fn voice_credential(&self, token: &str) -> Option<CredentialEnds> {
        let mut kept = self.voice_credentials.lock().expect("never poisoned");
        kept.remove(token).map(|(_, ends)| ends)
    }
}

/// The handler. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct RuntimeHandler {
    inner: Arc<Inner>,
}

struct Inner {
    runtime: Arc<dyn Runtime>,
    agent_id: Option<String>,
    authorize: Option<Arc<dyn Authorize>>,
    base_path: String,
    cors: Option<Cors>,
    custom_events: EventSchemas,
    journey_events: EventSchemas,
    expose_internal_errors: bool,
    sse: sse::StreamOptions,
    voice: VoiceHandshake,
    /// The socket and HTTP base URLs from the voice public URL, when one is set.
    voice_bases: Option<Bases>,
    shutdown: watch::Sender<bool>,
    streams: Arc<StreamCounts>,
    /// The end of the credential each voice start was authorized with, by the socket token
    /// it issued: the socket opened with that token closes when the credential ends.
    voice_credentials: Mutex<HashMap<String, (std::time::Instant, CredentialEnds)>>,
}

/// How long a voice start's credential is kept for its socket: past any socket token's life.
const VOICE_CREDENTIAL_KEPT: std::time::Duration = std::time::Duration::from_secs(3600);

pub use crate::routes::{Operation, route};

impl RuntimeHandler {
    pub fn runtime(&self) -> &Arc<dyn Runtime> {
        &self.inner.runtime
    }

    /// Whether `path` is under the handler's base path: the requests a server that mounts
    /// it beside other routes should hand it.
    pub fn serves(&self, path: &str) -> bool {
        strip_base(path, &self.inner.base_path).is_some()
    }

    /// Ends every open event stream cleanly and closes every open voice socket (1001, "going
    /// away"); call it when the server shuts down, so graceful shutdown does not wait for
    /// streams that would never end.
    pub fn shutdown(&self) {
        self.inner.shutdown.send_replace(true);
    }

    /// Answers one request. Never fails: errors become responses in the error envelope.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<ResponseBody>
    where
        B: http_body::Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let inner = &self.inner;
        let origin = request.headers().get(header::ORIGIN).cloned();
        let mut response = self.answer(request).await;
        if let (Some(cors), Some(origin)) = (&inner.cors, origin) {
            cors.decorate(&origin, response.headers_mut());
        }
        response
    }

    async fn answer<B>(&self, request: Request<B>) -> Response<ResponseBody>
    where
        B: http_body::Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let inner = &self.inner;
        let Some(path) = strip_base(request.uri().path(), &inner.base_path).map(str::to_owned)
        else {
            return ApiError::not_found(request.uri().path()).into_response();
        };
        if request.method() == Method::OPTIONS
            && let Some(cors) = &inner.cors
        {
            return cors.preflight(request.headers());
        }
        let (parts, body) = request.into_parts();
        let mut principal = None;
        let mut ends = None;
        let mut extra_headers = None;
        // The voice socket's credential is its single-use token, which the runtime checks.
        let socket = matches!(route(&parts.method, &path), Ok((Operation::VoiceSocket, _)));
        if let Some(authorize) = inner.authorize.as_ref().filter(|_| !socket) {
            match authorize.authorize(&path, &parts).await {
                Authorization::Allow => {}
                Authorization::AllowAs(name) => principal = Some(name),
                Authorization::AllowUntil(name, until) => {
                    (principal, ends) = (Some(name), Some(until))
                }
                Authorization::AllowWithHeaders { principal: name, until, headers } => {
                    (principal, ends, extra_headers) = (Some(name), until, Some(headers))
                }
                Authorization::Deny => {
                    return ApiError::new(ErrorCode::Unauthorized, "not authorized")
                        .into_response();
                }
                Authorization::Respond(response) => return response,
            }
        }
        let (operation, id) = match route(&parts.method, &path) {
            Ok((operation, id)) => (operation, id.map(str::to_owned)),
            Err(error) => return error.into_response(),
        };
        let caller = principal.clone().map(cairn_http::Caller);
        let mut response = match self.dispatch(operation, id, &parts, body, principal, ends).await {
            Ok(response) => response,
            Err(error) => error.into_response(),
        };
        if let Some(caller) = caller {
            response.extensions_mut().insert(caller);
        }
        for (name, value) in extra_headers.into_iter().flatten() {
            if let Some(name) = name {
                response.headers_mut().entry(name).or_insert(value);
            }
        }
        response
    }

    async fn dispatch<B>(
        &self,
        operation: Operation,
        id: Option<String>,
        parts: &Parts,
        body: B,
        principal: Option<String>,
        ends: Option<CredentialEnds>,
    ) -> Result<Response<ResponseBody>, ApiError>
    where
        B: http_body::Body,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let inner = &self.inner;
        let runtime = &inner.runtime;
        let id = id.unwrap_or_default();
        let query = parts.uri.query();
        let fail = |error: RuntimeError| self.error(error);
        match operation {
            Operation::CreateConversation => {
                let mut input: CreateConversationInput = optional_body(parts, body).await?;
                if input.agent_id.is_none() {
                    input.agent_id = inner.agent_id.clone();
                }
                let conversation = runtime.create_conversation(input).await.map_err(fail)?;
                Ok(json_response(StatusCode::CREATED, &ConversationResult { conversation }))
            }
            Operation::ListConversations => {
                let input: ListConversationsInput = parse_query(query)?;
                Ok(json_response(
                    StatusCode::OK,
                    &runtime.list_conversations(input).await.map_err(fail)?,
                ))
            }
            Operation::HandleChannelEvent => {
                let bytes = read_body(&parts.headers, body, MAX_BODY_BYTES).await?;
                let object: Map<String, Value> = parse_json(&bytes)?;
                let merged = merge_envelope(object).map_err(ApiError::validation)?;
                let mut input: ChannelEventInput =
                    parse_json(&serde_json::to_vec(&merged).unwrap())?;
                input.validate().map_err(ApiError::validation)?;
                for (field, text) in [
                    ("text", &input.text),
                    ("message", &input.message),
                    ("body", &input.body),
                    ("transcript", &input.transcript),
                ] {
                    if let Some(text) = text {
                        check_length(field, text)?;
                    }
                }
                if input.agent_id.is_none() {
                    input.agent_id = inner.agent_id.clone();
                }
                if accepts_event_stream(parts) {
                    let runtime = runtime.clone();
                    let turn = move |deltas| async move {
                        runtime.handle_channel_event(input, Some(deltas)).await
                    };
                    return sse::stream_turn(turn, self.error_mapper()).await;
                }
                let result = runtime.handle_channel_event(input, None).await.map_err(fail)?;
                let status = if result.created { StatusCode::CREATED } else { StatusCode::OK };
                Ok(json_response(status, &result))
            }
            Operation::ResolveChannelOutput => {
                let input: ResolveOutputInput = json_body(parts, body).await?;
                Ok(json_response(
                    StatusCode::OK,
                    &runtime.resolve_channel_output(input).await.map_err(fail)?,
                ))
            }
            Operation::StartVoiceConversation => {
                let mut input: StartVoiceConversationInput = optional_body(parts, body).await?;
                if input.agent_id.is_none() {
                    input.agent_id = inner.agent_id.clone();
                }
                let bases = self.voice_bases(parts)?;
                let mut result = runtime.start_voice_conversation(input).await.map_err(fail)?;
                voice::fill_urls(&mut result, &bases);
                inner.keep_voice_credential(&result.socket.token, ends);
                Ok(json_response(StatusCode::CREATED, &result))
            }
            Operation::StartVoiceSegment => {
                let input: StartVoiceSegmentInput = optional_body(parts, body).await?;
                let bases = self.voice_bases(parts)?;
                let mut result = runtime.start_voice_segment(&id, input).await.map_err(fail)?;
                voice::fill_urls(&mut result, &bases);
                inner.keep_voice_credential(&result.socket.token, ends);
                Ok(json_response(StatusCode::CREATED, &result))
            }
            Operation::VoiceSocket => {
                let accept = voice::check_handshake(parts)?;
                let token = voice::socket_token(parts)?;
                let session = runtime.open_voice_socket(&token).await.map_err(fail)?;
                let credential = inner.voice_credential(&token);
                let upgrade =
                    VoiceUpgrade::new(session, inner.shutdown.subscribe(), inner.voice.socket)
                        .until(credential);
                Ok(voice::switching_protocols(&accept, upgrade))
            }
            Operation::SendMessage => {
                let body: SendMessageBody = json_body(parts, body).await?;
                check_text("message", &body.message)?;
                let input = UserMessageInput {
                    conversation_id: id,
                    text: body.message,
                    app: body.app,
                    channel: body.channel.map(ChannelInput::into_channel),
                    turn: body.turn,
                    deltas: None,
                };
                if accepts_event_stream(parts) {
                    let runtime = runtime.clone();
                    let turn = move |deltas| async move {
                        let input = UserMessageInput { deltas: Some(deltas), ..input };
                        runtime.handle_user_message(input).await
                    };
                    return sse::stream_turn(turn, self.error_mapper()).await;
                }
                Ok(json_response(
                    StatusCode::OK,
                    &runtime.handle_user_message(input).await.map_err(fail)?,
                ))
            }
            Operation::ListEvents => {
                let query: EventsQuery = parse_query(query)?;
                let limit = event_limit(query.limit)?;
                let mut events =
                    runtime.list_events(&id, query.after_offset, limit + 1).await.map_err(fail)?;
                // One more than the page says whether another page follows.
                let more = events.len() > limit as usize;
                events.truncate(limit as usize);
                let next_after_offset = events.last().filter(|_| more).map(|event| event.offset);
                Ok(json_response(StatusCode::OK, &EventPage { events, next_after_offset }))
            }
            Operation::StreamEvents => {
                let query: AfterOffset = parse_query(query)?;
                let after = match query.after_offset {
                    Some(offset) => Some(offset),
                    None => last_event_id(parts)?,
                };
                let principal = principal.unwrap_or_else(|| inner.streams.principal_of(parts));
                let permit = inner.streams.open(principal)?;
                sse::stream_events(
                    runtime.clone(),
                    id,
                    after,
                    inner.sse,
                    inner.shutdown.subscribe(),
                    self.error_mapper(),
                    sse::StreamAccess { permit, ends },
                )
                .await
            }
            Operation::SubmitWidget => {
                let body: SubmitWidgetBody = json_body(parts, body).await?;
                let input = SubmitWidgetInput {
                    conversation_id: id,
                    prompt_id: body.prompt_id,
                    widget_kind: body.widget_kind,
                    output: body.output,
                };
                Ok(json_response(
                    StatusCode::OK,
                    &runtime.submit_widget(input).await.map_err(fail)?,
                ))
            }
            Operation::EmitCustomEvent => {
                let body: CustomEventBody = json_body(parts, body).await?;
                inner.custom_events.validate(&body.event_name, &body.payload)?;
                let input = CustomEventInput {
                    conversation_id: id,
                    event: body.event_name,
                    payload: body.payload,
                };
                Ok(json_response(
                    StatusCode::CREATED,
                    &runtime.emit_custom_event(input).await.map_err(fail)?,
                ))
            }
            Operation::EmitJourneyEvent => {
                let body: JourneyEventBody = json_body(parts, body).await?;
                inner.journey_events.validate(&body.event_name, &body.payload)?;
                let routing = body.routing.unwrap_or_default();
                let input = JourneyEventInput {
                    conversation_id: id,
                    event: body.event_name,
                    app: body.app,
                    payload: body.payload,
                    routing,
                    target: body.target,
                };
                Ok(json_response(
                    StatusCode::CREATED,
                    &runtime.emit_journey_event(input).await.map_err(fail)?,
                ))
            }
            Operation::EmitIntermediateMessage => {
                let body: IntermediateMessageBody = json_body(parts, body).await?;
                check_text("text", &body.text)?;
                let input = IntermediateMessageInput {
                    conversation_id: id,
                    text: body.text,
                    visible_to_model: body.visible_to_model.unwrap_or(true),
                };
                Ok(json_response(
                    StatusCode::CREATED,
                    &runtime.emit_intermediate_message(input).await.map_err(fail)?,
                ))
            }
            Operation::EmitGeneratedPreamble => {
                let body: PreambleBody = optional_body(parts, body).await?;
                if body.max_words == Some(0) {
                    return Err(ApiError::validation("maxWords: must be at least 1"));
                }
                let input = PreambleInput {
                    conversation_id: id,
                    max_words: body.max_words,
                    purpose: body.purpose,
                };
                Ok(json_response(
                    StatusCode::CREATED,
                    &runtime.emit_generated_preamble(input).await.map_err(fail)?,
                ))
            }
            Operation::CompactConversation => {
                let body: CompactBody = optional_body(parts, body).await?;
                if let (Some(from), Some(to)) = (body.from_offset, body.to_offset)
                    && from > to
                {
                    return Err(ApiError::validation("fromOffset: must not be above toOffset"));
                }
                let input = CompactInput {
                    conversation_id: id,
                    from_offset: body.from_offset,
                    to_offset: body.to_offset,
                    schema_version: body.schema_version,
                };
                Ok(json_response(
                    StatusCode::OK,
                    &runtime.compact_conversation(input).await.map_err(fail)?,
                ))
            }
            Operation::CloseConversation => {
                let body: CloseBody = optional_body(parts, body).await?;
                let conversation =
                    runtime.close_conversation(&id, body.reason).await.map_err(fail)?;
                Ok(json_response(StatusCode::OK, &ConversationResult { conversation }))
            }
            Operation::RequestHandoff => {
                let body: HandoffBody = json_body(parts, body).await?;
                check_text("reason", &body.reason)?;
                let input = HandoffInput {
                    conversation_id: id,
                    reason: body.reason,
                    summary: body.summary,
                    payload: body.payload,
                };
                Ok(json_response(
                    StatusCode::OK,
                    &runtime.request_handoff(input).await.map_err(fail)?,
                ))
            }
            Operation::ResumeConversation => {
                let body: ResumeBody = optional_body(parts, body).await?;
                let input =
                    ResumeInput { conversation_id: id, reason: body.reason, payload: body.payload };
                Ok(json_response(
                    StatusCode::OK,
                    &runtime.resume_conversation(input).await.map_err(fail)?,
                ))
            }
            Operation::GetSnapshot => {
                let snapshot = runtime.get_snapshot(&id).await.map_err(fail)?;
                Ok(json_response(StatusCode::OK, &SnapshotResult { snapshot }))
            }
            Operation::ReplayConversation => {
                let query: EventsQuery = parse_query(query)?;
                let input = ReplayInput {
                    conversation_id: id,
                    after_offset: query.after_offset,
                    limit: event_limit(query.limit)?,
                };
                Ok(json_response(
                    StatusCode::OK,
                    &runtime.replay_conversation(input).await.map_err(fail)?,
                ))
            }
        }
    }

    /// Where clients reach the voice socket and the HTTP routes: the public URL when set,
    /// else the request's host and the base path.
    fn voice_bases(&self, parts: &Parts) -> Result<Bases, ApiError> {
        match &self.inner.voice_bases {
            Some(bases) => Ok(bases.clone()),
            None => voice::request_bases(parts, &self.inner.base_path),
        }
    }

    fn error_mapper(&self) -> ErrorMapper {
        ErrorMapper { expose_internal_errors: self.inner.expose_internal_errors }
    }

    fn error(&self, error: RuntimeError) -> ApiError {
        self.error_mapper().map(error)
    }
}

/// Turns runtime errors into API errors: the one place statuses and codes are chosen.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ErrorMapper {
    expose_internal_errors: bool,
}

impl ErrorMapper {
    pub(crate) fn map(self, error: RuntimeError) -> ApiError {
        let message = error.to_string();
        match error {
            RuntimeError::ConversationNotFound(_) => {
                ApiError::new(ErrorCode::ConversationNotFound, message)
            }
            RuntimeError::PromptNotFound(_) => ApiError::new(ErrorCode::PromptNotFound, message),
            RuntimeError::ConversationClosed(_) => {
                ApiError::new(ErrorCode::ConversationClosed, message)
            }
            RuntimeError::Invalid(_) => ApiError::validation(message),
            RuntimeError::Conflict(_) => ApiError::new(ErrorCode::Conflict, message),
            RuntimeError::Unauthorized(_) => ApiError::new(ErrorCode::Unauthorized, message),
            RuntimeError::NotSupported(_) => {
                ApiError::new(ErrorCode::CapabilityNotSupported, message)
            }
            RuntimeError::Internal(source) => {
                tracing::error!(error = %source, "runtime failed");
                let message = if self.expose_internal_errors {
                    source.to_string()
                } else {
                    "internal error".into()
                };
                ApiError::new(ErrorCode::InternalError, message)
            }
        }
    }
}

/// A page size of listEvents or replayConversation: 1 to [`MAX_EVENT_PAGE`], which is
/// also the default.
fn event_limit(limit: Option<u32>) -> Result<u32, ApiError> {
    match limit.unwrap_or(MAX_EVENT_PAGE) {
        limit @ 1..=MAX_EVENT_PAGE => Ok(limit),
        _ => Err(ApiError::validation(format!("limit: must be between 1 and {MAX_EVENT_PAGE}"))),
    }
}

/// The event streams each principal holds open, and how many one may hold.
pub(crate) struct StreamCounts {
    max_per_principal: usize,
    open: Mutex<HashMap<String, usize>>,
    /// Keys the digests of credentials, so the table never holds a credential and its
    /// digests mean nothing outside this process.
    hasher: RandomState,
}

impl StreamCounts {
    fn new(max_per_principal: usize) -> Arc<StreamCounts> {
        Arc::new(StreamCounts {
            max_per_principal,
            open: Mutex::new(HashMap::new()),
            hasher: RandomState::new(),
        })
    }

    /// Who is calling, when `authorize` did not say: the credentials sent, else the client
    /// address a server put in the extensions, else everyone together.
    fn principal_of(&self, parts: &Parts) -> String {
        for name in ["x-api-key", "authorization"] {
            if let Some(value) = parts.headers.get(name) {
                return format!("credential:{:016x}", self.hasher.hash_one(value.as_bytes()));
            }
        }
        match parts.extensions.get::<SocketAddr>() {
            Some(address) => format!("address:{}", address.ip()),
            None => "anonymous".to_owned(),
        }
    }

    /// Counts a new stream of `principal`, or refuses it with 429 when they hold the most
    /// they may.
    fn open(self: &Arc<Self>, principal: String) -> Result<StreamPermit, ApiError> {
        let mut open = self.open.lock().expect("stream table poisoned");
        let count = open.entry(principal.clone()).or_default();
        if *count >= self.max_per_principal {
            let message = format!(
                "this caller has {} event streams open, the most one caller may hold; close one \
                 before opening another",
                self.max_per_principal
            );
            return Err(ApiError::new(ErrorCode::RateLimited, message)
                .with_header(header::RETRY_AFTER, HeaderValue::from_static("5")));
        }
        *count += 1;
        Ok(StreamPermit { counts: self.clone(), principal })
    }
}

/// One open event stream; dropping it (the stream ended) frees its place.
pub(crate) struct StreamPermit {
    counts: Arc<StreamCounts>,
    principal: String,
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut open = self.counts.open.lock().expect("stream table poisoned");
        if let Some(count) = open.get_mut(&self.principal) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.principal);
            }
        }
    }
}

fn strip_base<'a>(path: &'a str, base: &str) -> Option<&'a str> {
    if base.is_empty() {
        return Some(path);
    }
    let rest = path.strip_prefix(base)?;
    (rest.is_empty() || rest.starts_with('/')).then_some(rest)
}

async fn json_body<T, B>(parts: &Parts, body: B) -> Result<T, ApiError>
where
    T: DeserializeOwned,
    B: http_body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let bytes = read_body(&parts.headers, body, MAX_BODY_BYTES).await?;
    parse_json(&bytes)
}

/// A JSON body where an empty one means "all defaults".
async fn optional_body<T, B>(parts: &Parts, body: B) -> Result<T, ApiError>
where
    T: DeserializeOwned + Default,
    B: http_body::Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let bytes = read_body(&parts.headers, body, MAX_BODY_BYTES).await?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    parse_json(&bytes)
}

fn accepts_event_stream(parts: &Parts) -> bool {
    parts
        .headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.contains("text/event-stream"))
}

fn last_event_id(parts: &Parts) -> Result<Option<u64>, ApiError> {
    let Some(value) = parts.headers.get("last-event-id") else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or_default().trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse::<u64>().map(Some).map_err(|_| {
        ApiError::validation(format!("Last-Event-ID: `{text}` is not an event offset"))
    })
}

pub(crate) fn header_value(text: &str) -> HeaderValue {
    HeaderValue::from_str(text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Any path routes to an operation or is refused with 404 or 405.
        #[test]
        fn fuzz_routes(path in "(/[a-z_\\-]{0,14}){0,5}/?", post in any::<bool>()) {
            let method = if post { Method::POST } else { Method::GET };
            if let Err(error) = route(&method, &path) {
                prop_assert!(matches!(error.code(), ErrorCode::NotFound | ErrorCode::MethodNotAllowed));
            }
        }

        /// `Last-Event-ID` is an offset, empty, or a 422.
        #[test]
        fn fuzz_last_event_id(value in "[ -~]{0,24}") {
            let Ok(header) = HeaderValue::from_str(&value) else { return Ok(()) };
            let (parts, ()) = Request::builder().header("last-event-id", header).body(()).unwrap().into_parts();
            match last_event_id(&parts) {
                Ok(Some(offset)) => prop_assert_eq!(value.trim().parse::<u64>().ok(), Some(offset)),
                Ok(None) => prop_assert!(value.trim().is_empty()),
                Err(error) => prop_assert_eq!(error.code(), ErrorCode::ValidationError),
            }
        }
    }
}
