//! A runtime written from scratch and mounted in a plain hyper server: a small FAQ bot that
//! keeps its conversations in memory and answers by keyword.
//!
//! It implements the three required capabilities of [`Runtime`] (create a conversation,
//! answer a user message, list events) plus `subscribe`, so event streams are pushed the
//! moment an event is appended. Every other operation answers 501
//! `CAPABILITY_NOT_SUPPORTED` on its own. The server serves its own page at `/` and the
//! runtime under `/faq`, with CORS for one web origin. Nothing of Cairn's but
//! `cairn-runtime` (and the wire types it re-exports) is used.
//!
//! ```sh
//! cargo run -p cairn-runtime --example faq
//! curl -s -XPOST localhost:3000/faq/conversations
//! curl -s localhost:3000/faq/conversations/conv_1/messages -d '{"message": "when are you open?"}'
//! curl -sN localhost:3000/faq/conversations/conv_1/events/stream
//! ```

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use cairn_runtime::{
    Conversation, CorsOptions, CreateConversationInput, HandlerOptions, Lifecycle, ResponseBody,
    Runtime, RuntimeError, RuntimeEvent, RuntimeHandler, SendMessageResult, Timestamp,
    UserMessageInput,
};
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// The questions the bot knows: a keyword, and the answer.
const FAQ: &[(&str, &str)] = &[
    ("open", "We are open from 9 to 17, Monday to Friday."),
    ("price", "Plans start at 10 euros a month."),
    ("refund", "Refunds are possible within 30 days of purchase."),
];
const FALLBACK: &str = "I can tell you about opening hours, prices and refunds.";

/// One conversation: its record, its log, and the sender that announces each append.
struct Thread {
    conversation: Conversation,
    events: Vec<RuntimeEvent>,
    appended: watch::Sender<u64>,
}

/// The FAQ bot: conversations in a map, numbered `conv_1`, `conv_2`, …
#[derive(Default)]
pub struct FaqBot {
    threads: Mutex<HashMap<String, Thread>>,
}

impl FaqBot {
    fn answer(question: &str) -> &'static str {
        let question = question.to_lowercase();
        FAQ.iter()
            .find(|(keyword, _)| question.contains(keyword))
            .map_or(FALLBACK, |(_, answer)| answer)
    }
}

impl Thread {
    fn append(&mut self, kind: &str, data: Value) -> RuntimeEvent {
        let offset = self.events.len() as u64;
        let event = RuntimeEvent {
            id: format!("{}_evt_{offset}", self.conversation.id),
            conversation_id: self.conversation.id.clone(),
            offset,
            kind: kind.to_owned(),
            created_at: Timestamp::now(),
            data,
        };
        self.events.push(event.clone());
        self.conversation.updated_at = event.created_at;
        self.appended.send_replace(offset + 1);
        event
    }
}

#[async_trait]
impl Runtime for FaqBot {
    async fn create_conversation(
        &self,
        input: CreateConversationInput,
    ) -> Result<Conversation, RuntimeError> {
        let mut threads = self.threads.lock().unwrap();
        let id = input.id.unwrap_or_else(|| format!("conv_{}", threads.len() + 1));
        if threads.contains_key(&id) {
            return Err(RuntimeError::Conflict(format!("conversation `{id}` exists")));
        }
        let now = Timestamp::now();
        let conversation = Conversation {
            id: id.clone(),
            agent_id: input.agent_id.unwrap_or_else(|| "faq".to_owned()),
            channel: input.channel.map(|channel| channel.into_channel()),
            context: input.context.unwrap_or(Value::Null),
            lifecycle: Lifecycle::Active,
            created_at: now,
            updated_at: now,
        };
        let (appended, _) = watch::channel(0);
        let mut thread = Thread { conversation, events: Vec::new(), appended };
        thread.append("conversation.created", json!({ "agentId": thread.conversation.agent_id }));
        let conversation = thread.conversation.clone();
        threads.insert(id, thread);
        Ok(conversation)
    }

    async fn handle_user_message(
        &self,
        input: UserMessageInput,
    ) -> Result<SendMessageResult, RuntimeError> {
        let mut threads = self.threads.lock().unwrap();
        let thread = threads
            .get_mut(&input.conversation_id)
            .ok_or_else(|| RuntimeError::ConversationNotFound(input.conversation_id.clone()))?;
        let answer = FaqBot::answer(&input.text);
        if let Some(deltas) = &input.deltas {
            // A caller that streams gets the reply a word at a time.
            for word in answer.split_inclusive(' ') {
                let _ = deltas.send(word.to_owned());
            }
        }
        let asked = thread.append("message", json!({ "role": "user", "text": input.text }));
        let answered = thread.append("message", json!({ "role": "assistant", "text": answer }));
        Ok(SendMessageResult {
            text: answer.to_owned(),
            events: vec![asked, answered],
            active_journey_id: None,
        })
    }

    async fn list_events(
        &self,
        conversation_id: &str,
        after_offset: Option<u64>,
        limit: u32,
    ) -> Result<Vec<RuntimeEvent>, RuntimeError> {
        let threads = self.threads.lock().unwrap();
        let thread = threads
            .get(conversation_id)
            .ok_or_else(|| RuntimeError::ConversationNotFound(conversation_id.to_owned()))?;
        let first = after_offset.map_or(0, |offset| offset as usize + 1);
        Ok(thread.events.iter().skip(first).take(limit as usize).cloned().collect())
    }

    fn subscribe(&self, conversation_id: &str) -> Option<watch::Receiver<u64>> {
        let threads = self.threads.lock().unwrap();
        threads.get(conversation_id).map(|thread| thread.appended.subscribe())
    }
}

/// The bot's handler, mounted at `/faq`, open to pages of `web_origin`.
pub fn faq_handler(web_origin: &str) -> RuntimeHandler {
    HandlerOptions::new(Arc::new(FaqBot::default()))
        .base_path("/faq")
        .cors(cairn_runtime::Cors::Explicit(CorsOptions::new(vec![web_origin.to_owned()])))
        .build()
        .expect("valid options")
}

/// The application's router: its own page, and the bot under `/faq`.
async fn route(
    request: Request<hyper::body::Incoming>,
    faq: RuntimeHandler,
) -> Response<ResponseBody> {
    if faq.serves(request.uri().path()) {
        return faq.handle(request).await;
    }
    let (status, text) = match request.uri().path() {
        "/" => (StatusCode::OK, "the shop's home page"),
        _ => (StatusCode::NOT_FOUND, "not here"),
    };
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, "text/plain".parse().unwrap());
    response
}

/// Serves the application on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, faq: RuntimeHandler) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let faq = faq.clone();
        let service = service_fn(move |request| {
            let faq = faq.clone();
            async move { Ok::<_, Infallible>(route(request, faq).await) }
        });
        tokio::spawn(async move {
            let builder = auto::Builder::new(TokioExecutor::new());
            let _ = builder.serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

#[allow(dead_code)] // The test uses the functions above, not `main`.
#[tokio::main]
async fn main() {
    let listener = TcpListener::bind("127.0.0.1:3000").await.expect("port 3000 is free");
    println!("listening on http://127.0.0.1:3000 (the FAQ bot under /faq)");
    serve(listener, faq_handler("http://localhost:5173")).await;
}
