//! Tests of journeys: the bundled agent, every routing, captures, templates, validation
//! messages, the definition hash and loading from a directory.

use cairn_types::runtime::Routing;
use serde_json::{Value, json};

use super::load::parse;
use super::template::render_value;
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
        step.actions.iter().any(|a| matches!(a, Action::OpenWidget { kind, .. } if kind == "form"))
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

    let step =
        event(agent, &JourneyState::default(), "feedback.requested", Routing::Full, (None, None));
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
    assert_eq!(step.actions[0], transition("book_demo", "ask_details", "done", "event:demo.skip"));

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
    let step =
        event(&agent, &ask, "anything", Routing::Targeted, (Some("book_demo"), Some("confirm")));
    assert_eq!(
        step.actions[..2],
        [
            transition("book_demo", "ask_details", "confirm", "event:anything"),
            entered("book_demo", "confirm"),
        ]
    );
    assert_eq!(step.actions[2], say("Thanks , we will write to ."));
    let step = event(&agent, &ask, "demo.skip", Routing::Targeted, (None, None));
    assert_eq!(step.actions[0], transition("book_demo", "ask_details", "done", "event:demo.skip"));
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
    let step =
        agent.step(&JourneyState::default(), Trigger::Widget { kind: "rating", output: &output });
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
    unknown_intent["journeys"][0]["states"][0]["transitions"][1]["on"] = json!({"intent": "abort"});
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
    let typo =
        example().to_string().replace("\"say\":\"Anything else?\"", "\"sya\":\"Anything else?\"");
    let message = parse("agents/typo.json", &typo).unwrap_err().to_string();
    assert!(
        message.starts_with("agents/typo.json: not a valid agent definition: unknown field `sya`"),
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
    assert_eq!(definitions.event_names(), ["demo.requested", "demo.skip", "feedback.requested"]);
    assert_eq!(definitions.default_agent_id(), Some("billing"));
    assert_eq!(definitions.agent("billing").unwrap().name(), "Concierge");
    assert_eq!(Definitions::load_dir(dir.path()).unwrap().hash(), definitions.hash());

    // A second file with an id already taken names both files.
    std::fs::write(dir.path().join("c.json"), example().to_string()).unwrap();
    let message = Definitions::load_dir(dir.path()).unwrap_err().to_string();
    let (b, c) = (dir.path().join("b.json"), dir.path().join("c.json"));
    assert_eq!(
        message,
        format!("{}: agent `concierge` is defined twice (first in {})", c.display(), b.display())
    );

    let missing = Definitions::load_dir(&dir.path().join("missing")).unwrap_err();
    assert!(matches!(missing, DefinitionError::Read { .. }), "{missing}");
}
