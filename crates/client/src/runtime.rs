//! The conversation runtime: the seed's 27 operations in snake case, a streamed reply, and
//! the event stream.

use cairn_types::runtime::*;
use cairn_types::{RuntimeEvent, Snapshot};
use http::{HeaderName, Method};
use hyper::body::Incoming;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::sse::{EventStream, Parser, next_bytes};
use crate::{Body, Call, Client, Error, ServiceApiError, query, segment};

/// No body.
const NONE: Body<'static, ()> = Body::None;

impl Client {
    /// createConversation.
    pub async fn create_conversation(
        &self,
        input: &CreateConversationInput,
    ) -> Result<Conversation, Error> {
        let path = self.runtime_path("/conversations");
        let created: ConversationResult =
            self.call(Method::POST, &path, None, Body::Json(input)).await?;
        Ok(created.conversation)
    }

    /// listConversations: newest first, with lossless cursors.
    pub async fn list_conversations(
        &self,
        input: &ListConversationsInput,
    ) -> Result<ConversationList, Error> {
        let path = self.runtime_path("/conversations");
        self.call(Method::GET, &path, Some(query(input)?), NONE).await
    }

    /// handleChannelEvent: applies an event from a channel; build it with the constructors
    /// of [`ChannelEventInput`] (`message`, `voice_turn`, …).
    pub async fn handle_channel_event(
        &self,
        input: &ChannelEventInput,
    ) -> Result<ChannelEventResult, Error> {
        let path = self.runtime_path("/channel-events");
        self.call(Method::POST, &path, None, Body::Json(input)).await
    }

    /// receiveMessage: a channel event of kind `message`.
    pub async fn receive_message(
        &self,
        input: ChannelEventInput,
    ) -> Result<ChannelEventResult, Error> {
        self.channel_event(ChannelEventNature::Message, input).await
    }

    /// recordProviderUpdate: a channel event of kind `provider-object`.
    pub async fn record_provider_update(
        &self,
        input: ChannelEventInput,
    ) -> Result<ChannelEventResult, Error> {
        self.channel_event(ChannelEventNature::ProviderObject, input).await
    }

    /// finalizeVoiceTurn: a channel event of kind `voice-turn`.
    pub async fn finalize_voice_turn(
        &self,
        input: ChannelEventInput,
    ) -> Result<ChannelEventResult, Error> {
        self.channel_event(ChannelEventNature::VoiceTurn, input).await
    }

    /// requestOutboundContact: a channel event of kind `outbound-contact`.
    pub async fn request_outbound_contact(
        &self,
        input: ChannelEventInput,
    ) -> Result<ChannelEventResult, Error> {
        self.channel_event(ChannelEventNature::OutboundContact, input).await
    }

    /// submitScheduledEvent: a channel event of kind `scheduled`.
    pub async fn submit_scheduled_event(
        &self,
        input: ChannelEventInput,
    ) -> Result<ChannelEventResult, Error> {
        self.channel_event(ChannelEventNature::Scheduled, input).await
    }

    /// recordChannelOutputResolution: a channel event of kind `output-resolution`.
    pub async fn record_channel_output_resolution(
        &self,
        input: ChannelEventInput,
    ) -> Result<ChannelEventResult, Error> {
        self.channel_event(ChannelEventNature::OutputResolution, input).await
    }

    /// requestChannelHandoff: a channel event of kind `handoff`.
    pub async fn request_channel_handoff(
        &self,
        input: ChannelEventInput,
    ) -> Result<ChannelEventResult, Error> {
        self.channel_event(ChannelEventNature::Handoff, input).await
    }

    /// requestChannelHandoffReview: a channel event of kind `handoff-review`.
    pub async fn request_channel_handoff_review(
        &self,
        input: ChannelEventInput,
    ) -> Result<ChannelEventResult, Error> {
        self.channel_event(ChannelEventNature::HandoffReview, input).await
    }

    /// resolveChannelOutput: what became of an event sent out on a channel.
    pub async fn resolve_channel_output(
        &self,
        input: &ResolveOutputInput,
    ) -> Result<EventResult, Error> {
        let path = self.runtime_path("/channel-outputs/resolve");
        self.call(Method::POST, &path, None, Body::Json(input)).await
    }

    /// startVoiceConversation: a conversation on the `voice` channel, its first segment and
    /// the socket to talk on (`socket.url` opens as it is, with `service.voice.v1`).
    pub async fn start_voice_conversation(
        &self,
        input: &StartVoiceConversationInput,
    ) -> Result<VoiceStartResult, Error> {
        let path = self.runtime_path("/voice/conversations");
        self.call(Method::POST, &path, None, Body::Json(input)).await
    }

    /// startVoiceSegment: a new voice segment of a conversation, and its socket.
    pub async fn start_voice_segment(
        &self,
        conversation_id: &str,
        input: &StartVoiceSegmentInput,
    ) -> Result<VoiceStartResult, Error> {
        let path = self.conversation_path(conversation_id, "/voice-segments");
        self.call(Method::POST, &path, None, Body::Json(input)).await
    }

    /// sendMessage: the user's message and the assistant's turn.
    pub async fn send_message(
        &self,
        conversation_id: &str,
        input: &SendMessageBody,
    ) -> Result<SendMessageResult, Error> {
        let path = self.conversation_path(conversation_id, "/messages");
        self.call(Method::POST, &path, None, Body::Json(input)).await
    }

    /// sendMessage with the reply streamed: `on_delta` gets each piece of the reply's text
    /// as it is written; the result is the same as [`send_message`](Client::send_message)'s.
    pub async fn send_message_streaming(
        &self,
        conversation_id: &str,
        input: &SendMessageBody,
        on_delta: impl FnMut(&str),
    ) -> Result<SendMessageResult, Error> {
        let path = self.conversation_path(conversation_id, "/messages");
        let call = Call { method: Method::POST, path: &path, query: None, body: Body::Json(input) };
        let (url, body) = self.open(call, &[]).await?;
        read_streamed_turn(url, body, on_delta).await
    }

    /// listEvents: every event above `after_offset` (from the first when `None`), in order,
    /// read a page of [`MAX_EVENT_PAGE`] at a time until the last page.
    pub async fn list_events(
        &self,
        conversation_id: &str,
        after_offset: Option<u64>,
    ) -> Result<Vec<RuntimeEvent>, Error> {
        let mut events = Vec::new();
        let mut page_query = EventsQuery { after_offset, limit: None };
        loop {
            let page = self.list_events_page(conversation_id, &page_query).await?;
            events.extend(page.events);
            match page.next_after_offset {
                Some(next) => page_query.after_offset = Some(next),
                None => return Ok(events),
            }
        }
    }

    /// listEvents, one page: at most `limit` events (default and maximum
    /// [`MAX_EVENT_PAGE`]) above `after_offset`, with `next_after_offset` when more follow.
    pub async fn list_events_page(
        &self,
        conversation_id: &str,
        input: &EventsQuery,
    ) -> Result<EventPage, Error> {
        let path = self.conversation_path(conversation_id, "/events");
        self.call(Method::GET, &path, Some(query(input)?), NONE).await
    }

    /// streamEvents: the events above `after_offset`, then each new one as it is appended.
    /// The stream reconnects by itself (resuming after the last offset it yielded) and
    /// stops when dropped.
    pub fn stream_events(&self, conversation_id: &str, after_offset: Option<u64>) -> EventStream {
        EventStream::open(self.clone(), conversation_id.to_owned(), after_offset)
    }

    /// One connection of an event stream, resuming after `last`.
    pub(crate) async fn open_event_stream(
        &self,
        conversation_id: &str,
        last: Option<u64>,
    ) -> Result<Incoming, Error> {
        let path = self.conversation_path(conversation_id, "/events/stream");
        let resume: Vec<(HeaderName, String)> = last
            .map(|offset| (HeaderName::from_static("last-event-id"), offset.to_string()))
            .into_iter()
            .collect();
        let call = Call { method: Method::GET, path: &path, query: None, body: NONE };
        let (_, body) = self.open(call, &resume).await?;
        Ok(body)
    }

    /// submitWidget: answers an open widget prompt.
    pub async fn submit_widget(
        &self,
        conversation_id: &str,
        input: &SubmitWidgetBody,
    ) -> Result<EventResult, Error> {
        self.step(conversation_id, "/widgets", input).await
    }

    /// emitCustomEvent: an application event, checked against its definition.
    pub async fn emit_custom_event(
        &self,
        conversation_id: &str,
        input: &CustomEventBody,
    ) -> Result<EventResult, Error> {
        self.step(conversation_id, "/custom-events", input).await
    }

    /// emitJourneyEvent: an event for the conversation's journeys.
    pub async fn emit_journey_event(
        &self,
        conversation_id: &str,
        input: &JourneyEventBody,
    ) -> Result<JourneyEventResult, Error> {
        self.step(conversation_id, "/journey-events", input).await
    }

    /// emitIntermediateMessage: an assistant message between turns.
    pub async fn emit_intermediate_message(
        &self,
        conversation_id: &str,
        input: &IntermediateMessageBody,
    ) -> Result<EventsResult, Error> {
        self.step(conversation_id, "/intermediate-messages", input).await
    }

    /// emitGeneratedPreamble: a short preamble for the turn being prepared.
    pub async fn emit_generated_preamble(
        &self,
        conversation_id: &str,
        input: &PreambleBody,
    ) -> Result<PreambleResult, Error> {
        self.step(conversation_id, "/preambles", input).await
    }

    /// compactConversation: summarises a range of the log into the snapshot.
    pub async fn compact_conversation(
        &self,
        conversation_id: &str,
        input: &CompactBody,
    ) -> Result<CompactResult, Error> {
        self.step(conversation_id, "/compact", input).await
    }

    /// closeConversation.
    pub async fn close_conversation(
        &self,
        conversation_id: &str,
        reason: Option<String>,
    ) -> Result<Conversation, Error> {
        let closed: ConversationResult =
            self.step(conversation_id, "/close", &CloseBody { reason }).await?;
        Ok(closed.conversation)
    }

    /// requestHandoff: a person takes over; the agent stays silent until resumed.
    pub async fn request_handoff(
        &self,
        conversation_id: &str,
        input: &HandoffBody,
    ) -> Result<LifecycleResult, Error> {
        self.step(conversation_id, "/handoff", input).await
    }

    /// resumeConversation: back to the agent, or a closed conversation reopened.
    pub async fn resume_conversation(
        &self,
        conversation_id: &str,
        input: &ResumeBody,
    ) -> Result<LifecycleResult, Error> {
        self.step(conversation_id, "/resume", input).await
    }

    /// getSnapshot: the journey state.
    pub async fn get_snapshot(&self, conversation_id: &str) -> Result<Snapshot, Error> {
        let path = self.conversation_path(conversation_id, "/snapshot");
        let result: SnapshotResult = self.call(Method::GET, &path, None, NONE).await?;
        Ok(result.snapshot)
    }

    /// replayConversation: the conversation rebuilt from a page of its log (at most
    /// `limit` events above `after_offset`; `next_after_offset` when more follow), with the
    /// prompts still open and the snapshot.
    pub async fn replay_conversation(
        &self,
        conversation_id: &str,
        input: &EventsQuery,
    ) -> Result<ReplayResult, Error> {
        let path = self.conversation_path(conversation_id, "/replay");
        self.call(Method::GET, &path, Some(query(input)?), NONE).await
    }

    fn conversation_path(&self, conversation_id: &str, rest: &str) -> String {
        self.runtime_path(&format!("/conversations/{}{rest}", segment(conversation_id)))
    }

    async fn step<T: DeserializeOwned>(
        &self,
        conversation_id: &str,
        rest: &str,
        input: &(impl serde::Serialize + ?Sized),
    ) -> Result<T, Error> {
        let path = self.conversation_path(conversation_id, rest);
        self.call(Method::POST, &path, None, Body::Json(input)).await
    }

    async fn channel_event(
        &self,
        kind: ChannelEventNature,
        mut input: ChannelEventInput,
    ) -> Result<ChannelEventResult, Error> {
        input.kind = Some(kind);
        input.nature = None;
        self.handle_channel_event(&input).await
    }
}

/// Reads `delta` frames into `on_delta` until the `result` (or `error`) frame.
async fn read_streamed_turn<T: DeserializeOwned>(
    url: String,
    mut body: Incoming,
    mut on_delta: impl FnMut(&str),
) -> Result<T, Error> {
    let mut parser = Parser::default();
    while let Some(bytes) = next_bytes(&mut body).await {
        let bytes = bytes.map_err(|error| crate::transport(&url, error))?;
        for frame in parser.push(&bytes) {
            match frame.event.as_str() {
                "delta" => {
                    let delta: Value = serde_json::from_str(&frame.data).unwrap_or_default();
                    on_delta(delta["text"].as_str().unwrap_or_default());
                }
                "result" => {
                    return serde_json::from_str(&frame.data).map_err(|error| Error::Decode {
                        url,
                        message: format!("the result frame: {error}"),
                    });
                }
                "error" => return Err(Error::Api(ServiceApiError::from_frame(&frame.data))),
                _ => {}
            }
        }
    }
    Err(Error::Decode { url, message: "the stream ended before its result".into() })
}
