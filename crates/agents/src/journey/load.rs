//! Loading and validation: [`Definitions`] read from files or built in code, and the
//! validated [`Agent`].

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use regex::{Regex, RegexBuilder};
use sha2::{Digest, Sha256};

use super::{AgentDefinition, JourneyDefinition, JourneyState, TransitionOn, WidgetDefinition};

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
    pub(super) definition: AgentDefinition,
    /// Each intent's compiled patterns, in definition order (the first match wins).
    intents: Vec<(String, Vec<Regex>)>,
}

const BUNDLED_PATH: &str = "agents/concierge.json";
const BUNDLED: &str = include_str!("../../agents/concierge.json");

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

pub(super) fn parse(origin: &str, text: &str) -> Result<AgentDefinition, DefinitionError> {
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

    /// The widget the journey waits for: the active state's, when it has one.
    pub fn awaited_widget(&self, state: &JourneyState) -> Option<&WidgetDefinition> {
        let journey = self.journey(state.active_journey_id.as_deref()?)?;
        journey.state(state.active_state_ids.first()?)?.widget.as_ref()
    }

    /// What the agent says to a question nothing it knows answers.
    pub fn unknown(&self) -> Option<&str> {
        self.definition.unknown.as_deref()
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
}
