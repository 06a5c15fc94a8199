//! The definition format: agents, their intents and knowledge, journeys, states and
//! transitions, as definition files hold them.

use cairn_types::{Memory, Scope};
use serde::{Deserialize, Serialize};
use serde_json::Value;

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
    /// Said when a question finds no answer in what the agent knows (default: "I don't know
    /// the answer to that."); a good one offers a person.
    #[serde(default)]
    pub unknown: Option<String>,
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

impl JourneyDefinition {
    pub fn state(&self, id: &str) -> Option<&StateDefinition> {
        self.states.iter().find(|state| state.id == id)
    }
}

impl StateDefinition {
    /// Where the transition on `on` goes, if the state has one.
    pub(super) fn target(&self, on: &TransitionOn) -> Option<&str> {
        self.transitions.iter().find(|transition| transition.on == *on).map(|t| t.to.as_str())
    }
}
