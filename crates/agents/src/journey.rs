//! Journey definitions for the default conversation runtime, and the state machine that
//! runs them.
//!
//! Agents are loaded from JSON files (one agent per `*.json` file of a directory). An agent
//! has intents (regex patterns over user messages) and journeys: small state machines that
//! intents or journey events start, whose states say text, open widget prompts and call
//! tools, and that move on intents, journey events, widget outputs and plain messages.
//!
//! Everything here is pure: [`Agent::step`] takes the conversation's [`JourneyState`] and a
//! [`Trigger`] and returns the [`Action`]s to carry out and the new state. Storing, replying
//! and calling tools is the runtime's business.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use cairn_types::runtime::Routing;
use cairn_types::{Memory, Scope};
use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// At most this many `next` moves follow one trigger, so a definition can never spin.
const MAX_AUTOMATIC_MOVES: usize = 32;

// ---------------------------------------------------------------------------------------
// The definition format.
// ---------------------------------------------------------------------------------------

/// One agent, as a definition file holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentDefinition {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    /// Said when nothing answers a message.
    #[serde(default)]
    pub fallback: Option<String>,
    #[serde(default)]
    pub intents: Vec<IntentDefinition>,
    #[serde(default)]
    pub journeys: Vec<JourneyDefinition>,
    /// The shared memories the agent may answer from. Without it, none: the agent answers
    /// only from what its journeys say and what the conversation's own visitor told it.
    #[serde(default)]
    pub knowledge: Option<Knowledge>,
}

/// Which shared memories an agent may answer from: those that pass every list given (an
/// empty list passes all). `{}` opens every shared memory, developers' notes included.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Knowledge {
    /// Memories of these scopes.
    #[serde(default)]
    pub scopes: Vec<Scope>,
    /// Memories of these repositories.
    #[serde(default)]
    pub repos: Vec<String>,
    /// Memories with one of these tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

impl Knowledge {
    pub fn admits(&self, memory: &Memory) -> bool {
        (self.scopes.is_empty() || self.scopes.contains(&memory.scope))
            && (self.repos.is_empty()
                || memory.repo.as_ref().is_some_and(|repo| self.repos.contains(repo)))
            && (self.tags.is_empty() || memory.tags.iter().any(|tag| self.tags.contains(tag)))
    }
}

/// An intent: a message matches it when any pattern matches (case-insensitively).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IntentDefinition {
    pub name: String,
    pub patterns: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JourneyDefinition {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub when: JourneyWhen,
    /// The state the journey enters when it starts.
    pub start: String,
    pub states: Vec<StateDefinition>,
}

/// What starts a journey.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JourneyWhen {
    #[serde(default)]
    pub intents: Vec<String>,
    #[serde(default)]
    pub events: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StateDefinition {
    pub id: String,
    /// A template said on entering the state.
    #[serde(default)]
    pub say: Option<String>,
    /// A widget prompt opened on entering the state.
    #[serde(default)]
    pub widget: Option<WidgetDefinition>,
    /// Tools called on entering the state, in order.
    #[serde(default)]
    pub tools: Vec<ToolDefinition>,
    /// A context key: a user message received in this state is stored under it and counts
    /// as the trigger `{"message": true}`.
    #[serde(default)]
    pub capture: Option<String>,
    #[serde(default)]
    pub transitions: Vec<TransitionDefinition>,
    /// The state to move on to right after this one's actions.
    #[serde(default)]
    pub next: Option<String>,
    /// The journey completes after this state's actions.
    #[serde(default)]
    pub end: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WidgetDefinition {
    pub kind: String,
    /// Any JSON; templates inside its strings are rendered.
    #[serde(default)]
    pub input: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolDefinition {
    pub name: String,
    /// Any JSON; templates inside its strings are rendered.
    #[serde(default)]
    pub input: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TransitionDefinition {
    pub on: TransitionOn,
    pub to: String,
}

/// What fires a transition: exactly one of `{"intent": name}`, `{"event": name}`,
/// `{"widget": kind}` or `{"message": true}` (any user message).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "TransitionOnFields", into = "TransitionOnFields")]
pub enum TransitionOn {
    Intent(String),
    Event(String),
    Widget(String),
    Message,
}

/// [`TransitionOn`] as written, so that two keys or `"message": false` get a clear error.
#[derive(Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TransitionOnFields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    intent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    event: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    widget: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message: Option<bool>,
}

impl TryFrom<TransitionOnFields> for TransitionOn {
    type Error = &'static str;

    fn try_from(fields: TransitionOnFields) -> Result<TransitionOn, Self::Error> {
        match fields {
            TransitionOnFields { intent: Some(name), event: None, widget: None, message: None } => {
                Ok(TransitionOn::Intent(name))
            }
            TransitionOnFields { intent: None, event: Some(name), widget: None, message: None } => {
                Ok(TransitionOn::Event(name))
            }
            TransitionOnFields { intent: None, event: None, widget: Some(kind), message: None } => {
                Ok(TransitionOn::Widget(kind))
            }
            TransitionOnFields { intent: None, event: None, widget: None, message: Some(true) } => {
                Ok(TransitionOn::Message)
            }
            _ => Err("a transition's `on` takes exactly one of `intent`, `event`, `widget` \
                      or `\"message\": true`"),
        }
    }
}

impl From<TransitionOn> for TransitionOnFields {
    fn from(on: TransitionOn) -> TransitionOnFields {
        match on {
            TransitionOn::Intent(name) => {
                TransitionOnFields { intent: Some(name), ..Default::default() }
            }
            TransitionOn::Event(name) => {
                TransitionOnFields { event: Some(name), ..Default::default() }
            }
            TransitionOn::Widget(kind) => {
                TransitionOnFields { widget: Some(kind), ..Default::default() }
            }
            TransitionOn::Message => {
                TransitionOnFields { message: Some(true), ..Default::default() }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Loading and validation.
// ---------------------------------------------------------------------------------------

/// Why agent definitions did not load.
#[derive(Debug, thiserror::Error)]
pub enum DefinitionError {
    #[error("cannot read agent definitions from {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Not JSON, or not the definition format (an unknown field, a missing one, …).
    #[error("{origin}: not a valid agent definition: {source}")]
    Parse {
        origin: String,
        #[source]
        source: serde_json::Error,
    },
    /// Well-formed, but inconsistent; the message names the file, agent, journey and state.
    #[error("{0}")]
    Invalid(String),
}

/// A validated set of agents.
#[derive(Debug, Clone)]
pub struct Definitions {
    agents: BTreeMap<String, Agent>,
    hash: String,
}

/// A validated agent, ready to [`step`](Agent::step).
#[derive(Debug, Clone)]
pub struct Agent {
    definition: AgentDefinition,
    /// Each intent's compiled patterns, in definition order (the first match wins).
    intents: Vec<(String, Vec<Regex>)>,
}

const BUNDLED_PATH: &str = "agents/concierge.json";
const BUNDLED: &str = include_str!("../agents/concierge.json");

impl Definitions {
    /// Loads every `*.json` file of `path` (one agent per file), in file-name order.
    pub fn load_dir(path: &Path) -> Result<Definitions, DefinitionError> {
        let read_error = |source| DefinitionError::Read { path: path.to_owned(), source };
        let mut files = Vec::new();
        for entry in std::fs::read_dir(path).map_err(read_error)? {
            let file = entry.map_err(read_error)?.path();
            if file.is_file() && file.extension().is_some_and(|extension| extension == "json") {
                files.push(file);
            }
        }
        files.sort();

        let mut agents = Vec::with_capacity(files.len());
        for file in files {
            let text = std::fs::read_to_string(&file)
                .map_err(|source| DefinitionError::Read { path: file.clone(), source })?;
            let origin = file.display().to_string();
            agents.push((Some(origin.clone()), parse(&origin, &text)?));
        }
        build(agents)
    }

    /// The bundled example agent, `concierge` (`agents/concierge.json` in this crate).
    pub fn bundled() -> Definitions {
        let definition = parse(BUNDLED_PATH, BUNDLED).expect("the bundled agent parses");
        build(vec![(Some(BUNDLED_PATH.to_owned()), definition)])
            .expect("the bundled agent is valid")
    }

    /// Validates agents built in code.
    pub fn from_agents(agents: Vec<AgentDefinition>) -> Result<Definitions, DefinitionError> {
        build(agents.into_iter().map(|agent| (None, agent)).collect())
    }

    pub fn agent(&self, id: &str) -> Option<&Agent> {
        self.agents.get(id)
    }

    /// The agents' ids, sorted.
    pub fn agent_ids(&self) -> impl Iterator<Item = &str> {
        self.agents.keys().map(String::as_str)
    }

    /// The agent conversations get when they name none: the first by id.
    pub fn default_agent_id(&self) -> Option<&str> {
        self.agents.keys().next().map(String::as_str)
    }

    /// Every journey event name the agents react to (in `when.events` or a transition),
    /// sorted, each once.
    pub fn event_names(&self) -> Vec<String> {
        let mut names = BTreeSet::new();
        for journey in self.agents.values().flat_map(|agent| &agent.definition.journeys) {
            names.extend(journey.when.events.iter().cloned());
            for transition in journey.states.iter().flat_map(|state| &state.transitions) {
                if let TransitionOn::Event(name) = &transition.on {
                    names.insert(name.clone());
                }
            }
        }
        names.into_iter().collect()
    }

    /// Hex SHA-256 of the canonical definitions (agents sorted by id, object keys sorted):
    /// a snapshot's `definitionHash`. Formatting and key order in the files do not count.
    pub fn hash(&self) -> &str {
        &self.hash
    }
}

fn parse(origin: &str, text: &str) -> Result<AgentDefinition, DefinitionError> {
    serde_json::from_str(text)
        .map_err(|source| DefinitionError::Parse { origin: origin.to_owned(), source })
}

/// Validates each agent (with the file it came from, if any) and hashes the lot.
fn build(
    definitions: Vec<(Option<String>, AgentDefinition)>,
) -> Result<Definitions, DefinitionError> {
    let mut agents = BTreeMap::new();
    let mut origins: BTreeMap<String, Option<String>> = BTreeMap::new();
    for (origin, definition) in definitions {
        if let Some(first) = origins.get(&definition.id) {
            let mut message =
                format!("{}agent `{}` is defined twice", prefix(origin.as_deref()), definition.id);
            if let Some(first) = first {
                message.push_str(&format!(" (first in {first})"));
            }
            return Err(DefinitionError::Invalid(message));
        }
        let agent = Agent::compile(origin.as_deref(), definition)?;
        origins.insert(agent.definition.id.clone(), origin);
        agents.insert(agent.definition.id.clone(), agent);
    }

    let sorted: Vec<&AgentDefinition> = agents.values().map(|agent| &agent.definition).collect();
    let mut canonical = serde_json::to_value(sorted).expect("definitions serialize");
    // Keys are sorted so the hash does not depend on how serde_json orders maps.
    canonical.sort_all_objects();
    let hash = hex::encode(Sha256::digest(canonical.to_string().as_bytes()));
    Ok(Definitions { agents, hash })
}

fn prefix(origin: Option<&str>) -> String {
    origin.map(|origin| format!("{origin}: ")).unwrap_or_default()
}

impl Agent {
    fn compile(
        origin: Option<&str>,
        definition: AgentDefinition,
    ) -> Result<Agent, DefinitionError> {
        let agent_place = format!("{}agent `{}`", prefix(origin), definition.id);
        let invalid =
            |place: &str, message: String| DefinitionError::Invalid(format!("{place}: {message}"));

        let mut intents = Vec::with_capacity(definition.intents.len());
        let mut names = HashSet::new();
        for intent in &definition.intents {
            let place = format!("{agent_place}, intent `{}`", intent.name);
            if !names.insert(intent.name.as_str()) {
                return Err(invalid(&place, "is defined twice".into()));
            }
            if intent.patterns.is_empty() {
                return Err(invalid(&place, "has no patterns".into()));
            }
            let mut patterns = Vec::with_capacity(intent.patterns.len());
            for pattern in &intent.patterns {
                let regex =
                    RegexBuilder::new(pattern).case_insensitive(true).build().map_err(|error| {
                        invalid(&place, format!("pattern `{pattern}` does not compile: {error}"))
                    })?;
                patterns.push(regex);
            }
            intents.push((intent.name.clone(), patterns));
        }
        let known_intent = |place: &str, intent: &str| {
            if names.contains(intent) {
                Ok(())
            } else {
                Err(invalid(place, format!("intent `{intent}` is not defined")))
            }
        };

        let mut journey_ids = HashSet::new();
        for journey in &definition.journeys {
            let journey_place = format!("{agent_place}, journey `{}`", journey.id);
            if !journey_ids.insert(journey.id.as_str()) {
                return Err(invalid(&journey_place, "is defined twice".into()));
            }
            for intent in &journey.when.intents {
                known_intent(&journey_place, intent)?;
            }
            let mut state_ids = HashSet::new();
            for state in &journey.states {
                if !state_ids.insert(state.id.as_str()) {
                    let place = format!("{journey_place}, state `{}`", state.id);
                    return Err(invalid(&place, "is defined twice".into()));
                }
            }
            let known_state = |place: &str, what: &str, id: &str| {
                if state_ids.contains(id) {
                    Ok(())
                } else {
                    Err(invalid(place, format!("{what} names unknown state `{id}`")))
                }
            };
            known_state(&journey_place, "`start`", &journey.start)?;
            for state in &journey.states {
                let place = format!("{journey_place}, state `{}`", state.id);
                if state.end && state.next.is_some() {
                    return Err(invalid(&place, "has both `end` and `next`".into()));
                }
                if let Some(next) = &state.next {
                    known_state(&place, "`next`", next)?;
                }
                for transition in &state.transitions {
                    known_state(&place, "a transition", &transition.to)?;
                    if let TransitionOn::Intent(intent) = &transition.on {
                        known_intent(&place, intent)?;
                    }
                }
            }
            // A `next` loop would re-run its states' actions until the move limit; reject it
            // here, where the author can see it.
            for state in &journey.states {
                let mut current = state;
                for _ in 0..journey.states.len() {
                    let Some(next) = &current.next else { break };
                    current = journey.state(next).expect("`next` checked above");
                    if current.id == state.id {
                        let place = format!("{journey_place}, state `{}`", state.id);
                        return Err(invalid(&place, "its `next` chain loops back to it".into()));
                    }
                }
            }
        }
        Ok(Agent { definition, intents })
    }

    pub fn id(&self) -> &str {
        &self.definition.id
    }

    pub fn name(&self) -> &str {
        &self.definition.name
    }

    /// Said when nothing answers a message.
    pub fn fallback(&self) -> Option<&str> {
        self.definition.fallback.as_deref()
    }

    pub fn definition(&self) -> &AgentDefinition {
        &self.definition
    }

    pub fn journey(&self, id: &str) -> Option<&JourneyDefinition> {
        self.definition.journeys.iter().find(|journey| journey.id == id)
    }

    /// The first intent (in definition order) with a pattern that matches `text`.
    pub fn match_intent(&self, text: &str) -> Option<&str> {
        self.intents
            .iter()
            .find(|(_, patterns)| patterns.iter().any(|pattern| pattern.is_match(text)))
            .map(|(name, _)| name.as_str())
    }

    /// Applies `trigger` to a conversation in `state`: the actions to carry out, in order,
    /// and the state after them.
    pub fn step(&self, state: &JourneyState, trigger: Trigger<'_>) -> Step {
        let mut run = Run::new(self, state);
        let mut intent = None;
        let handled = match trigger {
            Trigger::Message { text } => {
                intent = self.match_intent(text);
                run.message(text, intent)
            }
            Trigger::Event { name, payload, routing, target_journey, target_state } => {
                run.event(name, payload, routing, target_journey, target_state)
            }
            Trigger::Widget { kind, output } => run.widget(kind, output),
        };
        Step { intent: intent.map(str::to_owned), actions: run.actions, state: run.state, handled }
    }
}

impl JourneyDefinition {
    pub fn state(&self, id: &str) -> Option<&StateDefinition> {
        self.states.iter().find(|state| state.id == id)
    }
}

impl StateDefinition {
    /// Where the transition on `on` goes, if the state has one.
    fn target(&self, on: &TransitionOn) -> Option<&str> {
        self.transitions.iter().find(|transition| transition.on == *on).map(|t| t.to.as_str())
    }
}

// ---------------------------------------------------------------------------------------
// Running journeys.
// ---------------------------------------------------------------------------------------

/// Where a conversation is in its journeys; the journey fields of its snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct JourneyState {
    pub active_journey_id: Option<String>,
    /// The current state's id while a journey is active (one element), else empty.
    pub active_state_ids: Vec<String>,
    /// A JSON object: widget outputs under their kind, the last journey event's payload
    /// under `event`, captured messages under their capture key. It outlives journeys, so
    /// a later journey can use what an earlier one collected.
    pub context: Value,
}

impl Default for JourneyState {
    fn default() -> JourneyState {
        JourneyState {
            active_journey_id: None,
            active_state_ids: Vec::new(),
            context: Value::Object(Map::new()),
        }
    }
}

/// What happened to a conversation.
#[derive(Debug, Clone, Copy)]
pub enum Trigger<'a> {
    Message {
        text: &'a str,
    },
    Event {
        name: &'a str,
        payload: &'a Value,
        routing: Routing,
        target_journey: Option<&'a str>,
        target_state: Option<&'a str>,
    },
    Widget {
        kind: &'a str,
        output: &'a Value,
    },
}

/// The outcome of [`Agent::step`].
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The intent the message matched (messages only), whether or not a journey used it.
    pub intent: Option<String>,
    pub actions: Vec<Action>,
    pub state: JourneyState,
    /// Whether a journey consumed the trigger: a transition fired, a journey started or a
    /// capture state stored the message. When not, the runtime answers another way (e.g.
    /// the agent's fallback).
    pub handled: bool,
}

/// What the runtime carries out, in order.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Action {
    JourneyStarted {
        journey_id: String,
    },
    StateEntered {
        journey_id: String,
        state_id: String,
    },
    /// `trigger` is `intent:<name>`, `event:<name>`, `widget:<kind>`, `message` or `next`.
    Transition {
        journey_id: String,
        from: String,
        to: String,
        trigger: String,
    },
    Say {
        text: String,
    },
    OpenWidget {
        journey_id: String,
        state_id: String,
        kind: String,
        input: Value,
    },
    CallTool {
        journey_id: String,
        state_id: String,
        name: String,
        input: Value,
    },
    JourneyCompleted {
        journey_id: String,
    },
}

/// How a trigger moves journeys, decided before acting so the event payload can be stored
/// before the entered states render their templates.
enum Move<'a> {
    /// A transition of the active journey.
    Transition { journey: &'a JourneyDefinition, from: &'a str, to: &'a str },
    /// (Re)start a journey in the given state.
    Start { journey: &'a JourneyDefinition, state: &'a str },
}

/// One step in progress.
struct Run<'a> {
    agent: &'a Agent,
    state: JourneyState,
    actions: Vec<Action>,
}

impl<'a> Run<'a> {
    fn new(agent: &'a Agent, state: &JourneyState) -> Run<'a> {
        let mut run = Run { agent, state: state.clone(), actions: Vec::new() };
        if !run.state.context.is_object() {
            run.state.context = Value::Object(Map::new());
        }
        // A snapshot can outlive its definitions (a file was edited): a journey or state
        // that no longer exists is no longer active.
        if run.active().is_none() {
            run.state.active_journey_id = None;
            run.state.active_state_ids.clear();
        }
        run
    }

    fn active(&self) -> Option<(&'a JourneyDefinition, &'a StateDefinition)> {
        let journey = self.agent.journey(self.state.active_journey_id.as_deref()?)?;
        let state = journey.state(self.state.active_state_ids.first()?)?;
        Some((journey, state))
    }

    /// The active state's transition on `on`.
    fn active_transition(&self, on: &TransitionOn) -> Option<Move<'a>> {
        let (journey, state) = self.active()?;
        let to = state.target(on)?;
        Some(Move::Transition { journey, from: &state.id, to })
    }

    fn message(&mut self, text: &str, intent: Option<&str>) -> bool {
        if let Some((_, state)) = self.active()
            && let Some(key) = &state.capture
        {
            self.set_context(key, Value::String(text.to_owned()));
            if let Some(to) = self.active_transition(&TransitionOn::Message) {
                self.apply(to, "message".into());
            }
            return true;
        }
        if let Some(intent) = intent
            && let Some(to) = self.active_transition(&TransitionOn::Intent(intent.to_owned()))
        {
            self.apply(to, format!("intent:{intent}"));
            return true;
        }
        if let Some(to) = self.active_transition(&TransitionOn::Message) {
            self.apply(to, "message".into());
            return true;
        }
        let starts = |journey: &&JourneyDefinition| {
            intent.is_some_and(|intent| journey.when.intents.iter().any(|i| i == intent))
        };
        if let Some(journey) = self.agent.definition.journeys.iter().find(starts) {
            self.apply(Move::Start { journey, state: &journey.start }, String::new());
            return true;
        }
        false
    }

    fn event(
        &mut self,
        name: &str,
        payload: &Value,
        routing: Routing,
        target_journey: Option<&str>,
        target_state: Option<&str>,
    ) -> bool {
        let on = TransitionOn::Event(name.to_owned());
        let planned = match routing {
            Routing::None => None,
            Routing::ActiveJourneyOnly => self.active_transition(&on),
            Routing::Full => self.active_transition(&on).or_else(|| {
                let journeys = &self.agent.definition.journeys;
                let journey = journeys.iter().find(|j| j.when.events.iter().any(|e| e == name))?;
                Some(Move::Start { journey, state: &journey.start })
            }),
            Routing::Targeted => self.targeted(&on, target_journey, target_state),
        };
        let Some(planned) = planned else { return false };
        self.set_context("event", payload.clone());
        self.apply(planned, format!("event:{name}"));
        true
    }

    fn targeted(
        &self,
        on: &TransitionOn,
        target_journey: Option<&str>,
        target_state: Option<&str>,
    ) -> Option<Move<'a>> {
        let active = self.active();
        let journey_id = target_journey.or(active.map(|(journey, _)| journey.id.as_str()))?;
        let journey = self.agent.journey(journey_id)?;
        let target_state = match target_state {
            Some(id) => Some(journey.state(id)?.id.as_str()),
            None => None,
        };
        match active.filter(|(active, _)| active.id == journey.id) {
            Some((_, current)) => match target_state {
                Some(to) => Some(Move::Transition { journey, from: &current.id, to }),
                None => self.active_transition(on),
            },
            None => Some(Move::Start { journey, state: target_state.unwrap_or(&journey.start) }),
        }
    }

    fn widget(&mut self, kind: &str, output: &Value) -> bool {
        self.set_context(kind, output.clone());
        match self.active_transition(&TransitionOn::Widget(kind.to_owned())) {
            Some(to) => {
                self.apply(to, format!("widget:{kind}"));
                true
            }
            None => false,
        }
    }

    /// Carries out a move; `trigger` (what fired it) is recorded on transitions only.
    fn apply(&mut self, planned: Move<'a>, trigger: String) {
        match planned {
            Move::Transition { journey, from, to } => {
                self.actions.push(Action::Transition {
                    journey_id: journey.id.clone(),
                    from: from.to_owned(),
                    to: to.to_owned(),
                    trigger,
                });
                self.enter(journey, to);
            }
            Move::Start { journey, state } => {
                self.actions.push(Action::JourneyStarted { journey_id: journey.id.clone() });
                self.enter(journey, state);
            }
        }
    }

    /// Enters a state and carries out its actions, following `next` moves.
    fn enter(&mut self, journey: &'a JourneyDefinition, state_id: &str) {
        let mut state = journey.state(state_id).expect("validated: moves name existing states");
        let mut moves = 0;
        loop {
            let journey_id = journey.id.clone();
            self.state.active_journey_id = Some(journey_id.clone());
            self.state.active_state_ids = vec![state.id.clone()];
            self.actions.push(Action::StateEntered {
                journey_id: journey_id.clone(),
                state_id: state.id.clone(),
            });
            let context = &self.state.context;
            if let Some(say) = &state.say {
                self.actions.push(Action::Say { text: render(say, context) });
            }
            if let Some(widget) = &state.widget {
                self.actions.push(Action::OpenWidget {
                    journey_id: journey_id.clone(),
                    state_id: state.id.clone(),
                    kind: widget.kind.clone(),
                    input: render_value(&widget.input, context),
                });
            }
            for tool in &state.tools {
                self.actions.push(Action::CallTool {
                    journey_id: journey_id.clone(),
                    state_id: state.id.clone(),
                    name: tool.name.clone(),
                    input: render_value(&tool.input, context),
                });
            }
            if state.end {
                self.actions.push(Action::JourneyCompleted { journey_id });
                self.state.active_journey_id = None;
                self.state.active_state_ids.clear();
                return;
            }
            // Validation rejects `next` loops; the limit is a second line of defence.
            let Some(next) = &state.next else { return };
            if moves == MAX_AUTOMATIC_MOVES {
                return;
            }
            moves += 1;
            self.actions.push(Action::Transition {
                journey_id,
                from: state.id.clone(),
                to: next.clone(),
                trigger: "next".into(),
            });
            state = journey.state(next).expect("validated: `next` names an existing state");
        }
    }

    fn set_context(&mut self, key: &str, value: Value) {
        if let Value::Object(context) = &mut self.state.context {
            context.insert(key.to_owned(), value);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Templates.
// ---------------------------------------------------------------------------------------

/// Replaces each `{{a.b.c}}` with that dotted path of `context` (array elements by index);
/// a missing value renders as nothing, strings as themselves, other values as JSON.
pub fn render(template: &str, context: &Value) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let Some(length) = rest[open + 2..].find("}}") else { break };
        out.push_str(&rest[..open]);
        let path = rest[open + 2..open + 2 + length].trim();
        match lookup(context, path) {
            None | Some(Value::Null) => {}
            Some(Value::String(text)) => out.push_str(text),
            Some(value) => out.push_str(&value.to_string()),
        }
        rest = &rest[open + 2 + length + 2..];
    }
    out.push_str(rest);
    out
}

fn lookup<'v>(context: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').try_fold(context, |value, key| match value {
        Value::Object(map) => map.get(key),
        Value::Array(items) => items.get(key.parse::<usize>().ok()?),
        _ => None,
    })
}

/// Renders the templates inside every string of `value`.
fn render_value(value: &Value, context: &Value) -> Value {
    match value {
        Value::String(template) => Value::String(render(template, context)),
        Value::Array(items) => items.iter().map(|item| render_value(item, context)).collect(),
        Value::Object(map) => {
            map.iter().map(|(key, item)| (key.clone(), render_value(item, context))).collect()
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The example of the definition format's documentation.
    fn example() -> Value {
        json!({
            "id": "concierge",
            "name": "Concierge",
            "fallback": "Sorry?",
            "intents": [
                {"name": "book_demo", "patterns": ["book (a )?demo", "schedule a call"]},
                {"name": "cancel", "patterns": ["\\bcancel\\b", "never ?mind"]}
            ],
            "journeys": [{
                "id": "book_demo", "name": "Book a demo",
                "when": {"intents": ["book_demo"], "events": ["demo.requested"]},
                "start": "ask_details",
                "states": [
                    {"id": "ask_details", "say": "Happy to set that up.",
                     "widget": {"kind": "form", "input": {"fields": ["name", "email"]}},
                     "transitions": [
                        {"on": {"widget": "form"}, "to": "confirm"},
                        {"on": {"intent": "cancel"}, "to": "cancelled"},
                        {"on": {"event": "demo.skip"}, "to": "done"}
                     ]},
                    {"id": "confirm", "say": "Thanks {{form.name}}, we will write to {{form.email}}.",
                     "tools": [{"name": "memory.store",
                                "input": {"content": "Demo requested by {{form.name}} <{{form.email}}>"}}],
                     "next": "done"},
                    {"id": "done", "say": "Anything else?", "end": true},
                    {"id": "cancelled", "say": "No problem, cancelled.", "end": true}
                ]
            }, {
                "id": "feedback", "name": "Feedback",
                "when": {"events": ["feedback.requested"]},
                "start": "ask_comment",
                "states": [
                    {"id": "ask_comment", "say": "Tell us more, {{event.name}}.", "capture": "comment",
                     "transitions": [{"on": {"message": true}, "to": "thank"}]},
                    {"id": "thank", "say": "Noted: {{comment}}", "end": true}
                ]
            }]
        })
    }

    fn definitions(agent: Value) -> Result<Definitions, DefinitionError> {
        Definitions::from_agents(vec![serde_json::from_value(agent).unwrap()])
    }

    fn error(agent: Value) -> String {
        definitions(agent).unwrap_err().to_string()
    }

    fn example_agent() -> Agent {
        definitions(example()).unwrap().agent("concierge").unwrap().clone()
    }

    fn active(journey: &str, state: &str) -> JourneyState {
        JourneyState {
            active_journey_id: Some(journey.into()),
            active_state_ids: vec![state.into()],
            ..JourneyState::default()
        }
    }

    fn message(agent: &Agent, state: &JourneyState, text: &str) -> Step {
        agent.step(state, Trigger::Message { text })
    }

    fn event(
        agent: &Agent,
        state: &JourneyState,
        name: &str,
        routing: Routing,
        target: (Option<&str>, Option<&str>),
    ) -> Step {
        let payload = json!({"name": "Ada"});
        let trigger = Trigger::Event {
            name,
            payload: &payload,
            routing,
            target_journey: target.0,
            target_state: target.1,
        };
        agent.step(state, trigger)
    }

    fn entered(journey: &str, state: &str) -> Action {
        Action::StateEntered { journey_id: journey.into(), state_id: state.into() }
    }

    fn say(text: &str) -> Action {
        Action::Say { text: text.into() }
    }

    fn transition(journey: &str, from: &str, to: &str, trigger: &str) -> Action {
        Action::Transition {
            journey_id: journey.into(),
            from: from.into(),
            to: to.into(),
            trigger: trigger.into(),
        }
    }

    fn started(journey: &str) -> Action {
        Action::JourneyStarted { journey_id: journey.into() }
    }

    fn completed(journey: &str) -> Action {
        Action::JourneyCompleted { journey_id: journey.into() }
    }

    fn open_form() -> Action {
        Action::OpenWidget {
            journey_id: "book_demo".into(),
            state_id: "ask_details".into(),
            kind: "form".into(),
            input: json!({"fields": ["name", "email"]}),
        }
    }

    #[test]
    fn the_bundled_agent_loads_and_books_a_demo() {
        let definitions = Definitions::bundled();
        assert_eq!(definitions.agent_ids().collect::<Vec<_>>(), ["concierge"]);
        assert_eq!(definitions.default_agent_id(), Some("concierge"));
        assert_eq!(definitions.hash().len(), 64);
        let agent = definitions.agent("concierge").unwrap();
        assert!(agent.fallback().is_some());

        let step = message(agent, &JourneyState::default(), "Hi, can I book a demo?");
        assert_eq!(step.intent.as_deref(), Some("book_demo"));
        assert!(step.handled);
        assert_eq!(step.state.active_journey_id.as_deref(), Some("book_demo"));
        assert!(
            step.actions
                .iter()
                .any(|a| matches!(a, Action::OpenWidget { kind, .. } if kind == "form"))
        );

        for (text, intent) in [
            ("Hello there", "greeting"),
            ("Can I talk to a human?", "handoff"),
            ("thanks!", "thanks"),
            ("never mind", "cancel"),
        ] {
            assert_eq!(agent.match_intent(text), Some(intent), "{text}");
        }
        assert_eq!(agent.match_intent("what is the weather"), None);
        for (text, journey) in
            [("hello", "welcome"), ("I need a human", "handoff"), ("thanks", "thanks")]
        {
            let step = message(agent, &JourneyState::default(), text);
            assert_eq!(step.actions[0], started(journey), "{text}");
            assert!(matches!(&step.actions[2], Action::Say { .. }), "{text}");
        }

        let step = event(
            agent,
            &JourneyState::default(),
            "feedback.requested",
            Routing::Full,
            (None, None),
        );
        assert_eq!(step.state.active_state_ids, ["ask_rating"]);
        let rating = json!({"value": 4});
        let step = agent.step(&step.state, Trigger::Widget { kind: "rating", output: &rating });
        assert_eq!(step.state.active_state_ids, ["ask_comment"]);
        let step = message(agent, &step.state, "More coffee, please.");
        assert!(step.actions.contains(&Action::CallTool {
            journey_id: "feedback".into(),
            state_id: "thank".into(),
            name: "memory.store".into(),
            input: json!({
                "content": "Feedback: rated 4 of 5. More coffee, please.",
                "tags": ["feedback"]
            }),
        }));
        assert_eq!(step.state.active_journey_id, None);
    }

    #[test]
    fn a_journey_walks_from_intent_to_widget_to_next_to_end() {
        let agent = example_agent();

        let step = message(&agent, &JourneyState::default(), "I'd like to Book a Demo");
        assert_eq!(step.intent.as_deref(), Some("book_demo"));
        assert!(step.handled);
        assert_eq!(
            step.actions,
            [
                started("book_demo"),
                entered("book_demo", "ask_details"),
                say("Happy to set that up."),
                open_form(),
            ]
        );
        assert_eq!(step.state, active("book_demo", "ask_details"));

        let form = json!({"name": "Ada", "email": "ada@example.com"});
        let step = agent.step(&step.state, Trigger::Widget { kind: "form", output: &form });
        assert!(step.handled);
        assert_eq!(step.intent, None);
        assert_eq!(
            step.actions,
            [
                transition("book_demo", "ask_details", "confirm", "widget:form"),
                entered("book_demo", "confirm"),
                say("Thanks Ada, we will write to ada@example.com."),
                Action::CallTool {
                    journey_id: "book_demo".into(),
                    state_id: "confirm".into(),
                    name: "memory.store".into(),
                    input: json!({"content": "Demo requested by Ada <ada@example.com>"}),
                },
                transition("book_demo", "confirm", "done", "next"),
                entered("book_demo", "done"),
                say("Anything else?"),
                completed("book_demo"),
            ]
        );
        assert_eq!(
            step.state,
            JourneyState {
                active_journey_id: None,
                active_state_ids: vec![],
                context: json!({"form": form}),
            }
        );
    }

    #[test]
    fn messages_fire_intent_transitions_or_go_unhandled() {
        let agent = example_agent();
        let step = message(&agent, &active("book_demo", "ask_details"), "cancel that");
        assert_eq!(step.intent.as_deref(), Some("cancel"));
        assert_eq!(
            step.actions,
            [
                transition("book_demo", "ask_details", "cancelled", "intent:cancel"),
                entered("book_demo", "cancelled"),
                say("No problem, cancelled."),
                completed("book_demo"),
            ]
        );

        // An intent that starts nothing is still reported.
        let step = message(&agent, &JourneyState::default(), "never mind");
        assert_eq!(step.intent.as_deref(), Some("cancel"));
        assert!(!step.handled);
        assert!(step.actions.is_empty());
        assert_eq!(step.state, JourneyState::default());

        let step = message(&agent, &active("book_demo", "ask_details"), "what?");
        assert_eq!((step.intent, step.handled), (None, false));
        assert_eq!(step.state, active("book_demo", "ask_details"));

        // A snapshot naming a state that no longer exists counts as no journey.
        let step = message(&agent, &active("book_demo", "gone"), "what?");
        assert_eq!(step.state, JourneyState::default());
    }

    #[test]
    fn a_capture_state_stores_the_message_and_moves_on() {
        let agent = example_agent();
        // Even a message matching an intent is captured: the state asked for free text.
        let step = message(&agent, &active("feedback", "ask_comment"), "cancel fewer demos");
        assert_eq!(step.intent.as_deref(), Some("cancel"));
        assert!(step.handled);
        assert_eq!(
            step.actions,
            [
                transition("feedback", "ask_comment", "thank", "message"),
                entered("feedback", "thank"),
                say("Noted: cancel fewer demos"),
                completed("feedback"),
            ]
        );
        assert_eq!(step.state.context, json!({"comment": "cancel fewer demos"}));
    }

    #[test]
    fn routing_none_leaves_everything_alone() {
        let agent = example_agent();
        let state = active("book_demo", "ask_details");
        let step = event(&agent, &state, "demo.skip", Routing::None, (None, None));
        assert!(!step.handled);
        assert!(step.actions.is_empty());
        assert_eq!(step.state, state);
    }

    #[test]
    fn routing_active_journey_only_fires_transitions_but_starts_nothing() {
        let agent = example_agent();
        let step = event(
            &agent,
            &JourneyState::default(),
            "demo.requested",
            Routing::ActiveJourneyOnly,
            (None, None),
        );
        assert!(!step.handled);
        assert_eq!(step.state, JourneyState::default());

        let step = event(
            &agent,
            &active("book_demo", "ask_details"),
            "demo.skip",
            Routing::ActiveJourneyOnly,
            (None, None),
        );
        assert!(step.handled);
        assert_eq!(
            step.actions,
            [
                transition("book_demo", "ask_details", "done", "event:demo.skip"),
                entered("book_demo", "done"),
                say("Anything else?"),
                completed("book_demo"),
            ]
        );
        assert_eq!(step.state.context, json!({"event": {"name": "Ada"}}));
    }

    #[test]
    fn routing_full_prefers_the_active_transition_then_starts_a_journey() {
        let agent = example_agent();
        let step = event(
            &agent,
            &active("book_demo", "ask_details"),
            "demo.skip",
            Routing::Full,
            (None, None),
        );
        assert_eq!(
            step.actions[0],
            transition("book_demo", "ask_details", "done", "event:demo.skip")
        );

        // The payload is stored before the started journey's first state speaks.
        let step = event(
            &agent,
            &active("book_demo", "ask_details"),
            "feedback.requested",
            Routing::Full,
            (None, None),
        );
        assert!(step.handled);
        assert_eq!(
            step.actions,
            [started("feedback"), entered("feedback", "ask_comment"), say("Tell us more, Ada.")]
        );
        assert_eq!(step.state.active_state_ids, ["ask_comment"]);

        let step =
            event(&agent, &JourneyState::default(), "unknown.event", Routing::Full, (None, None));
        assert!(!step.handled);
        assert_eq!(step.state, JourneyState::default(), "an unhandled payload is not stored");
    }

    #[test]
    fn routing_targeted_starts_or_moves_the_target_journey() {
        let agent = example_agent();
        let idle = JourneyState::default();

        // Not active: started at its start state, or straight at the target state.
        let step = event(&agent, &idle, "anything", Routing::Targeted, (Some("book_demo"), None));
        assert!(step.handled);
        assert_eq!(step.actions[..2], [started("book_demo"), entered("book_demo", "ask_details")]);
        let step =
            event(&agent, &idle, "anything", Routing::Targeted, (Some("book_demo"), Some("done")));
        assert_eq!(
            step.actions,
            [
                started("book_demo"),
                entered("book_demo", "done"),
                say("Anything else?"),
                completed("book_demo")
            ]
        );

        // Active: moved to the target state, or along the active state's event transition.
        let ask = active("book_demo", "ask_details");
        let step = event(
            &agent,
            &ask,
            "anything",
            Routing::Targeted,
            (Some("book_demo"), Some("confirm")),
        );
        assert_eq!(
            step.actions[..2],
            [
                transition("book_demo", "ask_details", "confirm", "event:anything"),
                entered("book_demo", "confirm"),
            ]
        );
        assert_eq!(step.actions[2], say("Thanks , we will write to ."));
        let step = event(&agent, &ask, "demo.skip", Routing::Targeted, (None, None));
        assert_eq!(
            step.actions[0],
            transition("book_demo", "ask_details", "done", "event:demo.skip")
        );
        let step = event(&agent, &ask, "anything", Routing::Targeted, (Some("book_demo"), None));
        assert!(!step.handled, "the active state has no transition on `anything`");

        // Another journey replaces the active one.
        let step = event(&agent, &ask, "anything", Routing::Targeted, (Some("feedback"), None));
        assert_eq!(step.actions[..2], [started("feedback"), entered("feedback", "ask_comment")]);

        // Unknown targets, or nothing to target, are not handled.
        for target in [(Some("nope"), None), (Some("book_demo"), Some("nope")), (None, None)] {
            let step = event(&agent, &idle, "anything", Routing::Targeted, target);
            assert!(!step.handled, "{target:?}");
            assert_eq!(step.state, idle);
        }
    }

    #[test]
    fn a_widget_output_is_stored_even_when_no_transition_fires() {
        let agent = example_agent();
        let output = json!({"stars": 5});
        let step = agent
            .step(&JourneyState::default(), Trigger::Widget { kind: "rating", output: &output });
        assert!(!step.handled);
        assert_eq!(step.state.context, json!({"rating": {"stars": 5}}));
    }

    #[test]
    fn templates_render_paths_and_missing_values() {
        let context = json!({"form": {"name": "Ada", "age": 36, "tags": ["a", "b"]}, "none": null});
        assert_eq!(render("Hi {{form.name}}!", &context), "Hi Ada!");
        assert_eq!(
            render("{{ form.age }} {{form.tags.1}} {{form.tags}}", &context),
            "36 b [\"a\",\"b\"]"
        );
        assert_eq!(render("[{{form.missing}}|{{nope.x}}|{{none}}]", &context), "[||]");
        assert_eq!(render("unclosed {{form.name", &context), "unclosed {{form.name");
        assert_eq!(render("no templates", &context), "no templates");
        assert_eq!(
            render_value(&json!({"a": ["{{form.name}}", 1], "b": "x{{form.age}}"}), &context),
            json!({"a": ["Ada", 1], "b": "x36"})
        );
    }

    #[test]
    fn validation_names_the_agent_journey_and_state() {
        let mut bad_to = example();
        bad_to["journeys"][0]["states"][0]["transitions"][0]["to"] = json!("confrim");
        assert_eq!(
            error(bad_to),
            "agent `concierge`, journey `book_demo`, state `ask_details`: a transition names unknown state `confrim`"
        );

        let mut duplicate = example();
        duplicate["journeys"][0]["states"][3]["id"] = json!("done");
        assert_eq!(
            error(duplicate),
            "agent `concierge`, journey `book_demo`, state `done`: is defined twice"
        );

        let mut unknown_intent = example();
        unknown_intent["journeys"][0]["states"][0]["transitions"][1]["on"] =
            json!({"intent": "abort"});
        assert_eq!(
            error(unknown_intent),
            "agent `concierge`, journey `book_demo`, state `ask_details`: intent `abort` is not defined"
        );
        let mut unknown_intent = example();
        unknown_intent["journeys"][0]["when"]["intents"] = json!(["abort"]);
        assert_eq!(
            error(unknown_intent),
            "agent `concierge`, journey `book_demo`: intent `abort` is not defined"
        );

        let mut bad_regex = example();
        bad_regex["intents"][1]["patterns"][1] = json!("never (mind");
        let message = error(bad_regex);
        assert!(
            message.starts_with(
                "agent `concierge`, intent `cancel`: pattern `never (mind` does not compile"
            ),
            "{message}"
        );

        let mut bad_start = example();
        bad_start["journeys"][1]["start"] = json!("nowhere");
        assert_eq!(
            error(bad_start),
            "agent `concierge`, journey `feedback`: `start` names unknown state `nowhere`"
        );

        let mut end_and_next = example();
        end_and_next["journeys"][0]["states"][1]["end"] = json!(true);
        assert_eq!(
            error(end_and_next),
            "agent `concierge`, journey `book_demo`, state `confirm`: has both `end` and `next`"
        );

        let mut cycle = example();
        cycle["journeys"][0]["states"][2] = json!({"id": "done", "next": "confirm"});
        assert_eq!(
            error(cycle),
            "agent `concierge`, journey `book_demo`, state `confirm`: its `next` chain loops back to it"
        );

        let mut duplicate_journey = example();
        duplicate_journey["journeys"][1]["id"] = json!("book_demo");
        assert_eq!(
            error(duplicate_journey),
            "agent `concierge`, journey `book_demo`: is defined twice"
        );

        let twice = vec![
            serde_json::from_value(example()).unwrap(),
            serde_json::from_value(example()).unwrap(),
        ];
        assert_eq!(
            Definitions::from_agents(twice).unwrap_err().to_string(),
            "agent `concierge` is defined twice"
        );
    }

    #[test]
    fn typos_are_errors_that_name_the_file() {
        let typo = example()
            .to_string()
            .replace("\"say\":\"Anything else?\"", "\"sya\":\"Anything else?\"");
        let message = parse("agents/typo.json", &typo).unwrap_err().to_string();
        assert!(
            message
                .starts_with("agents/typo.json: not a valid agent definition: unknown field `sya`"),
            "{message}"
        );

        let two_triggers = example()
            .to_string()
            .replace("{\"widget\":\"form\"}", "{\"widget\":\"form\",\"intent\":\"cancel\"}");
        let message = parse("a.json", &two_triggers).unwrap_err().to_string();
        assert!(message.contains("`on` takes exactly one of"), "{message}");
        let never = example().to_string().replace("{\"message\":true}", "{\"message\":false}");
        let message = parse("a.json", &never).unwrap_err().to_string();
        assert!(message.contains("`on` takes exactly one of"), "{message}");
        let unknown_trigger =
            example().to_string().replace("{\"widget\":\"form\"}", "{\"button\":\"form\"}");
        let message = parse("a.json", &unknown_trigger).unwrap_err().to_string();
        assert!(message.contains("unknown field `button`"), "{message}");
    }

    #[test]
    fn the_hash_follows_content_not_formatting() {
        let hash = definitions(example()).unwrap().hash().to_owned();
        assert_eq!(definitions(example()).unwrap().hash(), hash);

        // The same agent, formatted differently and with keys in another order, at the
        // top and inside a tool's free-form input.
        let pretty = format!("{:#}", example()).replacen("\"id\": \"concierge\",", "", 1);
        let moved =
            format!("{}, \"id\": \"concierge\"}}", pretty.trim_end().strip_suffix('}').unwrap());
        let agent = parse("x.json", &moved).unwrap();
        assert_eq!(Definitions::from_agents(vec![agent]).unwrap().hash(), hash);
        let with_input = |input: &str| {
            let text = format!(
                r#"{{"id": "a", "name": "A", "journeys": [{{"id": "j", "name": "J", "start": "s",
                    "states": [{{"id": "s", "tools": [{{"name": "t", "input": {input}}}]}}]}}]}}"#
            );
            let agent = parse("x.json", &text).unwrap();
            Definitions::from_agents(vec![agent]).unwrap().hash().to_owned()
        };
        assert_eq!(with_input(r#"{"a": 1, "b": 2}"#), with_input(r#"{"b": 2, "a": 1}"#));
        assert_ne!(with_input(r#"{"a": 1, "b": 2}"#), with_input(r#"{"a": 1, "b": 3}"#));

        let mut edited = example();
        edited["journeys"][0]["states"][2]["say"] = json!("Anything else? ");
        assert_ne!(definitions(edited).unwrap().hash(), hash);
        let mut edited = example();
        edited["journeys"][0]["states"][0]["widget"]["input"]["fields"][1] = json!("phone");
        assert_ne!(definitions(edited).unwrap().hash(), hash);
    }

    #[test]
    fn load_dir_reads_every_json_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut second = example();
        second["id"] = json!("billing");
        std::fs::write(dir.path().join("b.json"), example().to_string()).unwrap();
        std::fs::write(dir.path().join("a.json"), second.to_string()).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not an agent").unwrap();

        let definitions = Definitions::load_dir(dir.path()).unwrap();
        assert_eq!(definitions.agent_ids().collect::<Vec<_>>(), ["billing", "concierge"]);
        assert_eq!(
            definitions.event_names(),
            ["demo.requested", "demo.skip", "feedback.requested"]
        );
        assert_eq!(definitions.default_agent_id(), Some("billing"));
        assert_eq!(definitions.agent("billing").unwrap().name(), "Concierge");
        assert_eq!(Definitions::load_dir(dir.path()).unwrap().hash(), definitions.hash());

        // A second file with an id already taken names both files.
        std::fs::write(dir.path().join("c.json"), example().to_string()).unwrap();
        let message = Definitions::load_dir(dir.path()).unwrap_err().to_string();
        let (b, c) = (dir.path().join("b.json"), dir.path().join("c.json"));
        assert_eq!(
            message,
            format!(
                "{}: agent `concierge` is defined twice (first in {})",
                c.display(),
                b.display()
            )
        );

        let missing = Definitions::load_dir(&dir.path().join("missing")).unwrap_err();
        assert!(matches!(missing, DefinitionError::Read { .. }), "{missing}");
    }
}
