//! The bundled events file, and the journey events the handler must accept for the agents'
//! journeys to move.

use cairn_runtime::{EventDefinition, EventDefinitions};

use crate::journey::Definitions;

const BUNDLED: &str = include_str!("../events.json");

/// The definitions that go with the bundled example agent (`events.json` in this crate).
pub fn bundled_events() -> EventDefinitions {
    serde_json::from_str(BUNDLED).expect("the bundled events file is valid")
}

/// The file's journey events, plus every event the agents' journeys react to that the file
/// does not define (with a schema that accepts any payload), so a journey never waits for an
/// event the handler would refuse.
pub fn journey_events_for(
    events: &EventDefinitions,
    definitions: &Definitions,
) -> Vec<EventDefinition> {
    let mut journey_events = events.journey_events.clone();
    for name in definitions.event_names() {
        if !journey_events.iter().any(|event| event.name == name) {
            journey_events.push(EventDefinition::any_payload(name));
        }
    }
    journey_events
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use cairn_runtime::{HandlerOptions, Runtime};

    use super::*;

    #[test]
    fn bundled_definitions_build_a_handler_and_cover_the_bundled_journeys() {
        let events = bundled_events();
        let journey = journey_events_for(&events, &Definitions::bundled());
        for name in Definitions::bundled().event_names() {
            assert!(journey.iter().any(|event| event.name == name), "{name} is not defined");
        }
        let dir = tempfile::tempdir().unwrap();
        let store =
            Arc::new(cairn_store_sqlite::SqliteStore::open(&dir.path().join("c.db")).unwrap());
        let runtime: Arc<dyn Runtime> =
            Arc::new(crate::DefaultRuntime::new(store, None, Default::default()));
        HandlerOptions::new(runtime)
            .custom_events(events.custom_events)
            .journey_events(journey)
            .build()
            .unwrap();
    }
}
