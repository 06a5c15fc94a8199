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

mod definition;
mod load;
mod run;
mod template;
#[cfg(test)]
mod tests;

pub use definition::{
    AgentDefinition, IntentDefinition, JourneyDefinition, JourneyWhen, Knowledge, StateDefinition,
    ToolDefinition, TransitionDefinition, TransitionOn, WidgetDefinition,
};
pub use load::{Agent, DefinitionError, Definitions};
pub use run::{Action, JourneyState, Step, Trigger};
pub use template::render;
