//! Running journeys: [`Agent::step`], the [`JourneyState`] it moves, the [`Trigger`]s it
//! takes and the [`Action`]s it returns.

use cairn_types::runtime::Routing;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::template::{render, render_value};
use super::{Agent, JourneyDefinition, StateDefinition, TransitionOn};

/// At most this many `next` moves follow one trigger, so a definition can never spin.
const MAX_AUTOMATIC_MOVES: usize = 32;

impl Agent {
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
