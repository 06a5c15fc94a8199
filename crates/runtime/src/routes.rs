//! The route table: one row per route the handler answers (a method, a path under the
//! handler's base path with `{id}` for the conversation, and the operation), from which
//! routing, 405s' `Allow` and the routes' labels for logs and metrics all come.

use cairn_http::{ApiError, match_path};
use http::Method;

/// Every operation, by the seed's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    CreateConversation,
    ListConversations,
    HandleChannelEvent,
    ResolveChannelOutput,
    StartVoiceConversation,
    VoiceSocket,
    StartVoiceSegment,
    SendMessage,
    ListEvents,
    StreamEvents,
    SubmitWidget,
    EmitCustomEvent,
    EmitJourneyEvent,
    EmitIntermediateMessage,
    EmitGeneratedPreamble,
    CompactConversation,
    CloseConversation,
    RequestHandoff,
    ResumeConversation,
    GetSnapshot,
    ReplayConversation,
}

use Method as M;
use Operation as O;

/// Every route, each operation once, in the order of [`Operation`].
pub const ROUTES: &[(Method, &str, Operation)] = &[
    (M::POST, "/conversations", O::CreateConversation),
    (M::GET, "/conversations", O::ListConversations),
    (M::POST, "/channel-events", O::HandleChannelEvent),
    (M::POST, "/channel-outputs/resolve", O::ResolveChannelOutput),
    (M::POST, "/voice/conversations", O::StartVoiceConversation),
    (M::GET, "/voice/socket", O::VoiceSocket),
    (M::POST, "/conversations/{id}/voice-segments", O::StartVoiceSegment),
    (M::POST, "/conversations/{id}/messages", O::SendMessage),
    (M::GET, "/conversations/{id}/events", O::ListEvents),
    (M::GET, "/conversations/{id}/events/stream", O::StreamEvents),
    (M::POST, "/conversations/{id}/widgets", O::SubmitWidget),
    (M::POST, "/conversations/{id}/custom-events", O::EmitCustomEvent),
    (M::POST, "/conversations/{id}/journey-events", O::EmitJourneyEvent),
    (M::POST, "/conversations/{id}/intermediate-messages", O::EmitIntermediateMessage),
    (M::POST, "/conversations/{id}/preambles", O::EmitGeneratedPreamble),
    (M::POST, "/conversations/{id}/compact", O::CompactConversation),
    (M::POST, "/conversations/{id}/close", O::CloseConversation),
    (M::POST, "/conversations/{id}/handoff", O::RequestHandoff),
    (M::POST, "/conversations/{id}/resume", O::ResumeConversation),
    (M::GET, "/conversations/{id}/snapshot", O::GetSnapshot),
    (M::GET, "/conversations/{id}/replay", O::ReplayConversation),
];

impl Operation {
    /// Every operation, in the order of the routes.
    pub fn all() -> impl Iterator<Item = Operation> {
        ROUTES.iter().map(|(_, _, operation)| *operation)
    }

    /// The operation's path pattern under the handler's base path (`{id}` for the
    /// conversation), as the OpenAPI document names it: a route label of bounded variety for
    /// logs and metrics.
    pub fn path(self) -> &'static str {
        ROUTES[self as usize].1
    }

    /// The operation's method.
    pub fn method(self) -> &'static Method {
        &ROUTES[self as usize].0
    }
}

/// Finds the operation for a method and a path relative to the base path, with the
/// conversation id when the path has one: 404 for a path no route has, 405 (with `Allow`)
/// for a method the path does not take.
pub fn route<'a>(method: &Method, path: &'a str) -> Result<(Operation, Option<&'a str>), ApiError> {
    let trimmed = path.trim_matches('/');
    let mut allow: Vec<&str> = Vec::new();
    for (allowed, pattern, operation) in ROUTES {
        let Some(id) = match_path(&pattern[1..], trimmed) else { continue };
        if allowed == method {
            return Ok((*operation, id));
        }
        allow.push(allowed.as_str());
    }
    if allow.is_empty() {
        return Err(ApiError::not_found(path));
    }
    // As HTTP lists them: reads first.
    allow.sort_by_key(|method| *method != "GET");
    Err(ApiError::method_not_allowed(method, path, &allow.join(", ")))
}

#[cfg(test)]
mod tests {
    use cairn_types::ErrorCode;

    use super::*;

    #[test]
    fn the_table_is_in_the_order_of_the_operations() {
        for (index, (_, _, operation)) in ROUTES.iter().enumerate() {
            assert_eq!(*operation as usize, index, "{operation:?}");
        }
        assert_eq!(Operation::all().count(), Operation::ReplayConversation as usize + 1);
    }

    #[test]
    fn paths_route_as_before() {
        fn ok(method: Method, path: &str) -> (Operation, Option<&str>) {
            route(&method, path).unwrap()
        }
        let code = |method: Method, path: &str| route(&method, path).unwrap_err().code();
        assert_eq!(ok(M::POST, "/conversations"), (O::CreateConversation, None));
        assert_eq!(ok(M::GET, "/conversations/"), (O::ListConversations, None));
        assert_eq!(ok(M::POST, "/conversations/c_1/messages"), (O::SendMessage, Some("c_1")));
        assert_eq!(ok(M::GET, "/conversations/c_1/events/stream"), (O::StreamEvents, Some("c_1")));
        let refused = route(&M::DELETE, "/conversations").unwrap_err();
        assert_eq!(refused.code(), ErrorCode::MethodNotAllowed);
        assert!(refused.message().ends_with("allowed: GET, POST"), "{}", refused.message());
        assert_eq!(code(M::GET, "/conversations/c_1/messages"), ErrorCode::MethodNotAllowed);
        assert_eq!(code(M::POST, "/conversations//messages"), ErrorCode::NotFound);
        assert_eq!(code(M::POST, "/conversations/c_1/nothing"), ErrorCode::NotFound);
        assert_eq!(code(M::GET, "/elsewhere"), ErrorCode::NotFound);
        assert_eq!(code(M::GET, "/"), ErrorCode::NotFound);
    }
}
