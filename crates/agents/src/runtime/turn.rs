//! One step of the agent: the journey engine's actions turned into events, questions
//! answered from memory, and the reply written (by the language model when one is
//! configured), with activity events around each part so a chat client can show progress.

use cairn_memory::{privacy, question_coverage};
use cairn_store::{NewEvent, NewPrompt};
use cairn_types::{
    Conversation, IdPrefix, Memory, NewMemory, Scope, SearchQuery, Snapshot, new_id,
};
use serde_json::{Value, json};

use super::{DefaultRuntime, words};
use crate::journey::{Action, Agent, JourneyState, Knowledge, Trigger};
use crate::llm::ChatMessage;
use crate::support::{
    SupportReference, collect_support_source_links, format_support_references, shorten,
};
use cairn_runtime::TextDeltas;

/// What a step produced, ready to commit.
#[derive(Debug, Default)]
pub(super) struct TurnOutput {
    pub events: Vec<NewEvent>,
    pub prompts: Vec<NewPrompt>,
    /// The assistant's reply ("" when the step said nothing).
    pub text: String,
    pub journey: JourneyState,
    /// The user asked for a person (the intent named `handoff`).
    pub handoff: bool,
}

impl TurnOutput {
    pub(super) fn push(&mut self, kind: &str, data: Value) -> usize {
        self.events.push(NewEvent { kind: kind.to_owned(), data });
        self.events.len() - 1
    }

    /// An activity of one of the seed's kinds (`response`, `widget`, `intent`,
    /// `extraction`, `action`, `tool`, `knowledge`); returns its id for the `done` event.
    fn activity(&mut self, kind: &str, label: &str, name: Option<&str>) -> String {
        let id = new_id(IdPrefix::Activity);
        self.push("activity", activity_data(&id, kind, label, name, "running"));
        id
    }

    fn activity_done(&mut self, id: &str, kind: &str, label: &str, name: Option<&str>) {
        self.push("activity", activity_data(id, kind, label, name, "done"));
    }
}

/// The data of a `message` event: a new message id, the role and text, not intermediate.
pub(super) fn message_data(role: &str, text: &str) -> Value {
    json!({
        "messageId": new_id(IdPrefix::Message), "role": role, "text": text, "intermediate": false,
    })
}

fn activity_data(id: &str, kind: &str, label: &str, name: Option<&str>, status: &str) -> Value {
    let mut data = json!({ "activityId": id, "kind": kind, "label": label, "status": status });
    if let Some(name) = name {
        data["name"] = json!(name);
    }
    data
}

/// Whom a step reads and writes memory for: its conversation, the owner tags of what its
/// visitor says (the conversation, and the contact when the channel names one), and the
/// shared memory its agent may answer from (none unless its definition says `knowledge`).
pub(super) struct Reader<'a> {
    conversation_id: &'a str,
    owners: Vec<String>,
    knowledge: Option<&'a Knowledge>,
    /// The step's channel shows only words: widgets are asked for in words (see [`words`]).
    words_only: bool,
}

impl<'a> Reader<'a> {
    fn of(
        conversation: &'a Conversation,
        agent: Option<&'a Agent>,
        words_only: bool,
    ) -> Reader<'a> {
        let mut owners = vec![privacy::conversation_tag(&conversation.id)];
        if let Some(channel) = &conversation.channel
            && let Some(address) = channel.id.as_deref().filter(|address| !address.is_empty())
        {
            owners.push(privacy::contact_tag(&channel.kind, address));
        }
        let knowledge = agent.and_then(|agent| agent.definition().knowledge.as_ref());
        Reader { conversation_id: &conversation.id, owners, knowledge, words_only }
    }

    /// Whether a shared memory is one the agent may answer from.
    fn may_share(&self, memory: &Memory) -> bool {
        self.knowledge.is_some_and(|knowledge| knowledge.admits(memory))
    }
}

/// The intent that hands a conversation to a person.
pub(super) const HANDOFF_INTENT: &str = "handoff";

/// What set the step off.
pub(super) enum Input<'a> {
    /// A message; `words_only` when its channel shows only words (a call, SMS).
    Message {
        text: &'a str,
        words_only: bool,
    },
    Event {
        trigger: Trigger<'a>,
    },
    Widget {
        kind: &'a str,
        output: &'a Value,
    },
}

pub(super) fn journey_state(snapshot: &Snapshot) -> JourneyState {
    JourneyState {
        active_journey_id: snapshot.active_journey_id.clone(),
        active_state_ids: snapshot.active_state_ids.clone(),
        context: snapshot.journey_context.clone().unwrap_or_else(|| json!({})),
    }
}

impl DefaultRuntime {
    /// Runs the agent on `input` and returns the events to commit. `history` is the
    /// conversation as the model should see it (used only with a language model).
    pub(super) async fn run_turn(
        &self,
        conversation: &Conversation,
        agent: Option<&Agent>,
        snapshot: &Snapshot,
        input: Input<'_>,
        history: Vec<ChatMessage>,
        deltas: Option<&TextDeltas>,
    ) -> TurnOutput {
        let mut out = TurnOutput { journey: journey_state(snapshot), ..TurnOutput::default() };
        let words_only = matches!(input, Input::Message { words_only: true, .. });
        let reader = Reader::of(conversation, agent, words_only);
        let mut said = Vec::new();
        let mut handled = false;
        if let Some(agent) = agent {
            // On a channel of words, a message answers the widget the journey waits for.
            let awaited = agent.awaited_widget(&out.journey).filter(|_| words_only);
            let answer = match (&input, awaited) {
                (Input::Message { text, .. }, Some(widget)) => {
                    words::read(&widget.kind, &widget.input, text).map(|output| (widget, output))
                }
                _ => None,
            };
            let trigger = match (&input, &answer) {
                (_, Some((widget, output))) => Trigger::Widget { kind: &widget.kind, output },
                (Input::Message { text, .. }, None) => Trigger::Message { text },
                (Input::Event { trigger }, None) => *trigger,
                (Input::Widget { kind, output }, None) => Trigger::Widget { kind, output },
            };
            let step = agent.step(&out.journey, trigger);
            if let Some(intent) = &step.intent {
                let label = format!("Understood: {}", intent.replace('_', " "));
                let id = out.activity("intent", &label, Some(intent));
                out.activity_done(&id, "intent", &label, Some(intent));
            }
            handled = step.handled;
            if let (Some(widget), None, false) = (awaited, &answer, handled) {
                // Not what the widget asks for, and nothing else the journey takes: ask again.
                said.push(words::ask_again(&widget.kind, &widget.input));
                handled = true;
            }
            out.handoff = step.intent.as_deref() == Some(HANDOFF_INTENT);
            for action in step.actions {
                self.apply_action(&reader, action, &mut out, &mut said).await;
            }
            out.journey = step.state;
        }
        let Input::Message { text: question, .. } = input else {
            // Events and widgets get the journey's words, if it had any.
            out.text = said.join("\n\n");
            if !out.text.is_empty() {
                if let Some(deltas) = deltas {
                    let _ = deltas.send(out.text.clone());
                }
                out.push("message", message_data("assistant", &out.text));
            }
            return out;
        };
        let mut references = Vec::new();
        if said.is_empty() && !handled {
            references = self.recall(&reader, question, &mut out).await;
        }
        let draft = if !said.is_empty() {
            said.join("\n\n")
        } else if !references.is_empty() {
            answer_from(&references)
        } else if is_question(question) {
            // Said plainly: nothing known answers it.
            agent
                .and_then(|agent| agent.unknown().map(str::to_owned))
                .unwrap_or_else(|| "I don't know the answer to that.".to_owned())
        } else {
            agent
                .and_then(|agent| agent.fallback().map(str::to_owned))
                .unwrap_or_else(|| "I don't know that yet.".to_owned())
        };
        let mut data = message_data("assistant", "");
        let text = match &self.shared.chat {
            Some(chat) => {
                let label = "Writing the reply";
                let id = out.activity("response", label, None);
                let prompt = model_prompt(agent, &out.journey, &draft, &references, history);
                let sink = deltas.cloned();
                let written = chat
                    .complete(prompt, move |delta: &str| {
                        if let Some(sink) = &sink {
                            let _ = sink.send(delta.to_owned());
                        }
                    })
                    .await;
                out.activity_done(&id, "response", label, None);
                match written {
                    Ok(text) if !text.trim().is_empty() => text,
                    Ok(_) => draft,
                    Err(error) => {
                        // The endpoint's address and answer go to the log, never to the
                        // conversation's users.
                        tracing::warn!(%error, "the language model failed; answering without it");
                        data["modelError"] = json!(error.public_message());
                        if let Some(deltas) = deltas {
                            let _ = deltas.send(draft.clone());
                        }
                        draft
                    }
                }
            }
            None => {
                if let Some(deltas) = deltas {
                    let _ = deltas.send(draft.clone());
                }
                draft
            }
        };
        data["text"] = json!(text);
        if !references.is_empty() {
            data["supportReferences"] = json!(references);
            data["supportSourceLinks"] = json!(collect_support_source_links(&references));
        }
        out.push("message", data);
        out.text = text;
        out
    }

    async fn apply_action(
        &self,
        reader: &Reader<'_>,
        action: Action,
        out: &mut TurnOutput,
        said: &mut Vec<String>,
    ) {
        match action {
            Action::JourneyStarted { journey_id } => {
                out.push("journey.started", json!({ "journeyId": journey_id }));
            }
            Action::StateEntered { journey_id, state_id } => {
                let data = json!({ "journeyId": journey_id, "stateId": state_id });
                out.push("journey.state_entered", data);
            }
            Action::Transition { journey_id, from, to, trigger } => {
                let data =
                    json!({ "journeyId": journey_id, "from": from, "to": to, "trigger": trigger });
                out.push("journey.transition", data);
            }
            Action::Say { text } => said.push(text),
            Action::OpenWidget { kind, input, .. } if reader.words_only => {
                // Nobody can fill a widget here: it is asked for in words, and the next
                // message is read as its output.
                said.push(words::ask(&kind, &input));
            }
            Action::OpenWidget { journey_id, state_id, kind, input } => {
                let label = widget_label(&kind);
                let id = out.activity("widget", &label, Some(&kind));
                let prompt_id = new_id(IdPrefix::Prompt);
                let index = out.push(
                    "prompt.opened",
                    json!({
                        "promptId": prompt_id, "widgetKind": kind, "input": input,
                        "journeyId": journey_id, "stateId": state_id,
                    }),
                );
                out.prompts.push(NewPrompt {
                    prompt_id,
                    widget_kind: kind.clone(),
                    input,
                    event_index: index,
                });
                out.activity_done(&id, "widget", &label, Some(&kind));
            }
            Action::CallTool { journey_id, state_id, name, input } => {
                let label = tool_label(&name);
                let id = out.activity("tool", &label, Some(&name));
                let result = self.call_tool(reader, &name, &input).await;
                let mut data = json!({
                    "journeyId": journey_id, "stateId": state_id, "name": name, "input": input,
                });
                let status = match result {
                    Ok(output) => {
                        data["output"] = output;
                        "done"
                    }
                    Err(error) => {
                        data["error"] = json!(error);
                        "failed"
                    }
                };
                out.push("tool.called", data);
                out.push("activity", activity_data(&id, "tool", &label, Some(&name), status));
            }
            Action::JourneyCompleted { journey_id } => {
                out.push("journey.completed", json!({ "journeyId": journey_id }));
            }
        }
    }

    /// The built-in tools: `memory.search` (`{query, limit?}`) and `memory.store`
    /// (`{content, scope?, tags?}`).
    async fn call_tool(
        &self,
        reader: &Reader<'_>,
        name: &str,
        input: &Value,
    ) -> Result<Value, String> {
        let conversation_id = reader.conversation_id;
        let engine = self.shared.engine.as_ref().ok_or("no memory engine is configured")?;
        match name {
            "memory.search" => {
                let query = input["query"].as_str().ok_or("input.query: a string is required")?;
                let limit = input["limit"].as_u64().unwrap_or(5).clamp(1, 20) as u32;
                let search = SearchQuery {
                    q: Some(query.to_owned()),
                    limit: Some(limit),
                    ..SearchQuery::default()
                };
                let found = engine
                    .search_as(search, &reader.owners, |memory| reader.may_share(memory))
                    .await
                    .map_err(|error| tool_error(name, error))?;
                let hits: Vec<Value> = found
                    .hits
                    .iter()
                    .map(|hit| json!({ "id": hit.memory.id, "content": hit.memory.content }))
                    .collect();
                Ok(json!({ "hits": hits }))
            }
            "memory.store" => {
                let content =
                    input["content"].as_str().ok_or("input.content: a string is required")?;
                let scope: Scope = match input.get("scope") {
                    Some(scope) => serde_json::from_value(scope.clone())
                        .map_err(|error| format!("input.scope: {error}"))?,
                    None => Scope::Task,
                };
                let mut tags: Vec<String> =
                    serde_json::from_value(input.get("tags").cloned().unwrap_or(json!([])))
                        .map_err(|error| format!("input.tags: {error}"))?;
                // What a visitor says is the conversation's (and the contact's): never served
                // to anyone else, whatever the agent's definition asks for.
                tags.extend(reader.owners.iter().cloned());
                let mut metadata = serde_json::Map::new();
                metadata.insert("conversationId".into(), json!(conversation_id));
                let memory = NewMemory {
                    content: content.to_owned(),
                    scope,
                    repo: None,
                    tags,
                    source: Some("cairn-runtime".to_owned()),
                    metadata,
                };
                let actor = format!("runtime:{conversation_id}");
                let stored = engine
                    .create_memory(memory, &actor)
                    .await
                    .map_err(|error| tool_error(name, error))?;
                // An erasure of the conversation may have run since the step began: then the
                // memory goes too, as the erasure would have taken it (see `Engine::erase`).
                let orphaned = engine
                    .erase_if_orphaned(&stored.id, conversation_id, &actor)
                    .await
                    .map_err(|error| tool_error(name, error))?;
                if orphaned {
                    return Err(format!("{name}: the conversation was erased"));
                }
                Ok(json!({ "memoryId": stored.id }))
            }
            other => Err(format!("unknown tool `{other}`; built in: memory.search, memory.store")),
        }
    }

    /// Memories that answer `question`, with a `knowledge` activity around the search.
    async fn recall(
        &self,
        reader: &Reader<'_>,
        question: &str,
        out: &mut TurnOutput,
    ) -> Vec<SupportReference> {
        let Some(engine) = &self.shared.engine else {
            return Vec::new();
        };
        let label = "Looking through memory";
        let id = out.activity("knowledge", label, None);
        let query = SearchQuery {
            q: Some(question.to_owned()),
            limit: Some(self.shared.answer_limit),
            ..SearchQuery::default()
        };
        let found = engine.search_as(query, &reader.owners, |memory| reader.may_share(memory));
        let references = match found.await {
            // Only what speaks to the question: a memory that shares a word or two with it
            // (the refund policy for a question about support hours) is no answer.
            Ok(found) => found
                .hits
                .iter()
                .filter(|hit| question_coverage(question, &hit.memory.content) > ANSWER_COVERAGE)
                .map(|hit| SupportReference::from_memory(&hit.memory, hit.score))
                .collect(),
            Err(error) => {
                // A question the engine cannot search (too long, no words) has no answer.
                tracing::debug!(%error, "memory search failed for a question");
                Vec::new()
            }
        };
        out.activity_done(&id, "knowledge", label, None);
        references
    }
}

/// What a tool call's event records of an engine failure: what was wrong with the tool's
/// input, which the agent's author can fix; anything else (storage, an embeddings
/// endpoint) is logged and recorded only as a failure.
fn tool_error(tool: &str, error: cairn_memory::Error) -> String {
    match error {
        cairn_memory::Error::Invalid { .. } | cairn_memory::Error::InvalidItem { .. } => {
            error.to_string()
        }
        error => {
            tracing::error!(%error, tool, "a tool call failed");
            "the memory engine failed; see the server's log".to_owned()
        }
    }
}

/// How much of a question's content words a memory must hold to be given as its answer:
/// more than half (`cairn_memory::question_coverage`).
const ANSWER_COVERAGE: f64 = 0.5;

/// Words a question starts with.
const QUESTION_WORDS: &[&str] = &[
    "are", "can", "could", "did", "do", "does", "how", "is", "may", "should", "was", "what",
    "when", "where", "which", "who", "why", "will", "would",
];

/// Whether `text` asks something: a question mark, or a question's first word.
fn is_question(text: &str) -> bool {
    let first = text.split_whitespace().next().unwrap_or_default().to_lowercase();
    text.contains('?')
        || QUESTION_WORDS.contains(&first.trim_matches(|c: char| !c.is_alphanumeric()))
}

/// What a visitor reads while a widget opens: plain words, never the widget's kind.
fn widget_label(kind: &str) -> String {
    match kind {
        "rating" => "Asking how we did",
        "choice" => "Listing the options",
        "date" => "Finding a date",
        "confirm" => "Checking with you",
        _ => "Getting a short form ready",
    }
    .to_owned()
}

/// What a visitor reads while a tool runs: what it does, in plain words, never its name.
fn tool_label(name: &str) -> String {
    match name {
        "memory.search" => "Looking through what we know",
        "memory.store" => "Noting that down",
        _ => "Working on it",
    }
    .to_owned()
}

/// The answer without a language model: what memory holds, with its sources.
fn answer_from(references: &[SupportReference]) -> String {
    let mut text = if references.len() == 1 {
        references[0].excerpt.clone()
    } else {
        let items: Vec<String> =
            references.iter().map(|reference| format!("- {}", reference.excerpt)).collect();
        format!("Here is what I know:\n{}", items.join("\n"))
    };
    text.push_str("\n\n");
    text.push_str(&format_support_references(references));
    text
}

/// The conversation for the language model: who it is, the journey's position and what the
/// journey wants said, the memories found, then the history.
fn model_prompt(
    agent: Option<&Agent>,
    journey: &JourneyState,
    draft: &str,
    references: &[SupportReference],
    history: Vec<ChatMessage>,
) -> Vec<ChatMessage> {
    let mut system = String::from("You are a helpful assistant in a chat. Answer briefly.");
    if let Some(agent) = agent {
        system = format!("You are {}, an assistant in a chat. Answer briefly.", agent.name());
        if let Some(description) = &agent.definition().description {
            system.push_str(&format!("\n{description}"));
        }
    }
    if let Some(journey_id) = &journey.active_journey_id {
        system.push_str(&format!(
            "\nThe conversation is in journey `{journey_id}`, state `{}`. Journey data: {}",
            journey.active_state_ids.join(", "),
            journey.context
        ));
    }
    if references.is_empty() {
        system.push_str(&format!("\nSay this, in your own words: {draft}"));
    } else {
        system.push_str("\nAnswer from these memories and cite them as [n]:");
        for (index, reference) in references.iter().enumerate() {
            system.push_str(&format!("\n[{}] {}", index + 1, shorten(&reference.excerpt, 600)));
        }
    }
    let mut messages = vec![ChatMessage::system(system)];
    messages.extend(history);
    messages
}
