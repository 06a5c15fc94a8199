//! Widgets on channels that carry only words (a phone call, SMS): nobody there can fill a
//! form or tap a star, so a state's widget is asked for in words and the next message is
//! read as its output (an e-mail address or phone number for a form, a number for a rating,
//! yes or no for a confirmation). What is read goes to the journey as the widget's output,
//! so journeys need no second version for those channels.

use cairn_types::Conversation;
use cairn_types::runtime::ChannelEventNature;
use serde_json::{Map, Value, json};

use crate::widget::{form_field_names, is_email};

/// Channels that show only words: widgets are asked for in words there.
const WORDS_ONLY_CHANNELS: &[&str] = &["voice", "phone", "sms", "whatsapp"];

/// Whether a message (its event `data`) came over a channel that shows only words: a voice
/// turn, or a message whose channel (else the conversation's) is one of those.
pub(super) fn words_only(data: &Value, conversation: &Conversation) -> bool {
    if data["nature"] == ChannelEventNature::VoiceTurn.as_str() {
        return true;
    }
    let kind = match &data["channel"] {
        Value::String(kind) => Some(kind.as_str()),
        Value::Object(channel) => channel.get("type").and_then(Value::as_str),
        _ => None,
    };
    let kind = kind.or(conversation.channel.as_ref().map(|channel| channel.kind.as_str()));
    kind.is_some_and(|kind| WORDS_ONLY_CHANNELS.contains(&kind.to_ascii_lowercase().as_str()))
}

/// The question that stands for a widget of `kind` with `input`.
pub(super) fn ask(kind: &str, input: &Value) -> String {
    match kind {
        "form" if asks_for_contact(input) => {
            "Please tell me your name, and an e-mail address or phone number.".to_owned()
        }
        "form" => format!("Please tell me your {}.", form_field_names(input).join(" and ")),
        "rating" => {
            let (min, max) = rating_range(input);
            format!("On a scale of {min} to {max}, how did we do?")
        }
        "confirm" => "Please say yes or no.".to_owned(),
        "choice" => {
            let labels: Vec<String> = options(input).into_iter().map(|(_, label)| label).collect();
            format!("You can say {}.", or_list(&labels))
        }
        "date" => "What date suits you?".to_owned(),
        _ => "Please tell me in a few words.".to_owned(),
    }
}

/// Said when a message does not hold what a widget of `kind` asks for.
pub(super) fn ask_again(kind: &str, input: &Value) -> String {
    let what = match kind {
        "form" if asks_for_contact(input) => "an e-mail address or a phone number",
        "rating" => "a number",
        "confirm" => "a yes or a no",
        "choice" => "one of the options",
        _ => "that",
    };
    format!("Sorry, I didn't get {what}. {}", ask(kind, input))
}

/// The widget's output a message stands for, or `None` when it does not hold it.
pub(super) fn read(kind: &str, input: &Value, text: &str) -> Option<Value> {
    match kind {
        "form" => read_form(input, text),
        "rating" => {
            let (min, max) = rating_range(input);
            let value = numbers(text).into_iter().find(|value| (min..=max).contains(value))?;
            Some(json!({ "value": value }))
        }
        "confirm" => {
            let words = lower_words(text);
            let has = |list: &[&str]| words.iter().any(|word| list.contains(&word.as_str()));
            if has(&["no", "nope", "not", "don't", "cancel"]) {
                Some(json!({ "confirmed": false }))
            } else if has(&["yes", "yeah", "yep", "sure", "ok", "okay", "correct", "right"]) {
                Some(json!({ "confirmed": true }))
            } else {
                None
            }
        }
        "choice" => {
            let said = text.to_lowercase();
            options(input)
                .into_iter()
                .find(|(_, label)| said.contains(&label.to_lowercase()))
                .map(|(value, _)| json!({ "value": value }))
        }
        "date" => Some(json!({ "date": text.trim() })),
        _ => Some(json!({ "text": text.trim() })),
    }
}

/// A form's output from words: every field it names, with the name, e-mail address and
/// phone number found in the message ("I'm Ada, ada at example dot com"). Without an e-mail
/// address or phone number (when the form asks for one) it is not answered.
fn read_form(input: &Value, text: &str) -> Option<Value> {
    let email = email_in(text);
    let phone = phone_in(text);
    if asks_for_contact(input) && email.is_none() && phone.is_none() {
        return None;
    }
    let mut output = Map::new();
    for field in form_field_names(input) {
        let value = match field {
            "name" => name_in(text),
            "email" | "e-mail" => email.clone(),
            "phone" | "telephone" => phone.clone(),
            _ => None,
        };
        output.insert(field.to_owned(), json!(value.unwrap_or_default()));
    }
    if let Some(phone) = phone {
        output.insert("phone".to_owned(), json!(phone));
    }
    Some(Value::Object(output))
}

fn asks_for_contact(input: &Value) -> bool {
    form_field_names(input).iter().any(|field| matches!(*field, "email" | "e-mail" | "phone"))
}

fn rating_range(input: &Value) -> (u64, u64) {
    (input["min"].as_u64().unwrap_or(1), input["max"].as_u64().unwrap_or(5))
}

/// A choice's options as (value, label).
fn options(input: &Value) -> Vec<(Value, String)> {
    let raw = input.get("options").or(input.get("choices")).and_then(Value::as_array);
    raw.map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|option| match option {
            Value::String(label) => Some((option.clone(), label.clone())),
            Value::Object(object) => {
                let value = object.get("value")?.clone();
                let label = object
                    .get("label")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .or_else(|| value.as_str().map(str::to_owned))?;
                Some((value, label))
            }
            _ => None,
        })
        .collect()
}

fn or_list(items: &[String]) -> String {
    match items {
        [] => "your answer".to_owned(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

fn lower_words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The numbers in `text`, as digits or as words up to ten, in order.
fn numbers(text: &str) -> Vec<u64> {
    const WORDS: [&str; 11] =
        ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"];
    lower_words(text)
        .iter()
        .filter_map(|word| {
            word.parse::<u64>()
                .ok()
                .or_else(|| WORDS.iter().position(|w| w == word).map(|n| n as u64))
        })
        .collect()
}

/// An e-mail address written (`ada@example.com`) or spoken (`ada at example dot com`).
fn email_in(text: &str) -> Option<String> {
    let trim = |word: &str| {
        word.trim_matches(|c: char| !(c.is_alphanumeric() || "@._+-".contains(c)))
            .trim_end_matches('.')
            .to_lowercase()
    };
    let written = text.split_whitespace().map(trim).find(|word| is_email(word));
    if written.is_some() {
        return written;
    }
    // Spoken: "<local> at <domain> dot <tld>", the dots said or written.
    let words: Vec<String> = text.split_whitespace().map(trim).collect();
    let at = words.iter().position(|word| word == "at")?;
    let local = words.get(at.checked_sub(1)?)?;
    let mut domain = String::new();
    for word in &words[at + 1..] {
        match word.as_str() {
            "dot" => domain.push('.'),
            word if domain.is_empty() || domain.ends_with('.') => domain.push_str(word),
            _ => break,
        }
    }
    let email = format!("{local}@{}", domain.trim_end_matches('.'));
    is_email(&email).then_some(email)
}

/// A phone number: seven to fifteen digits in a row of digits, spaces, dashes, dots and
/// brackets, with an optional leading `+`.
fn phone_in(text: &str) -> Option<String> {
    let mut best: Option<String> = None;
    let mut current = String::new();
    let mut flush = |current: &mut String| {
        let digits = current.chars().filter(char::is_ascii_digit).count();
        if (7..=15).contains(&digits) && best.is_none() {
            best = Some(current.trim().trim_end_matches(['-', '.']).to_owned());
        }
        current.clear();
    };
    for c in text.chars() {
        let leading_plus = c == '+' && current.trim().is_empty();
        let separator = !current.is_empty() && " -.()".contains(c);
        if c.is_ascii_digit() || leading_plus || separator {
            current.push(c);
        } else {
            flush(&mut current);
        }
    }
    flush(&mut current);
    best
}

/// A name introduced as one ("my name is Ada Lovelace", "I'm Ada", "this is Ada").
fn name_in(text: &str) -> Option<String> {
    const AFTER: [&[&str]; 5] =
        [&["my", "name", "is"], &["name", "is"], &["i", "am"], &["i'm"], &["this", "is"]];
    const STOP: &[&str] = &[
        "and", "my", "at", "email", "e", "mail", "phone", "number", "you", "can", "reach", "me",
        "is", "it's", "on", "or", "please", "here",
    ];
    let words: Vec<&str> = text.split_whitespace().collect();
    let lower: Vec<String> = words
        .iter()
        .map(|word| word.trim_matches(|c: char| !(c.is_alphanumeric() || c == '\'')).to_lowercase())
        .collect();
    for lead in AFTER {
        let leads_at = |at: usize| {
            lower.len() >= at + lead.len()
                && lower[at..at + lead.len()].iter().zip(lead).all(|(a, b)| a == b)
        };
        let Some(start) = (0..lower.len()).find(|&at| leads_at(at)) else { continue };
        let mut name = Vec::new();
        for (word, lower) in words.iter().zip(&lower).skip(start + lead.len()) {
            let clean =
                word.trim_matches(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '-'));
            if clean.is_empty() || STOP.contains(&lower.as_str()) || clean.contains('@') {
                break;
            }
            name.push(capitalised(clean));
            if word.ends_with([',', '.', ';']) || name.len() == 3 {
                break;
            }
        }
        if !name.is_empty() {
            return Some(name.join(" "));
        }
    }
    None
}

fn capitalised(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form() -> Value {
        json!({ "fields": ["name", "email"] })
    }

    #[test]
    fn a_form_is_read_from_what_the_caller_says() {
        let said = "Sure, my name is Ada Lovelace and my email is ada@example.com.";
        assert_eq!(
            read("form", &form(), said),
            Some(json!({ "name": "Ada Lovelace", "email": "ada@example.com" }))
        );
        let spoken = "I'm Grace. Grace at example dot com";
        assert_eq!(
            read("form", &form(), spoken),
            Some(json!({ "name": "Grace", "email": "grace@example.com" }))
        );
        let phone = "This is Alan, call me on +44 20 7946 0958 please";
        assert_eq!(
            read("form", &form(), phone),
            Some(json!({ "name": "Alan", "email": "", "phone": "+44 20 7946 0958" }))
        );
        assert_eq!(read("form", &form(), "Tomorrow afternoon works"), None);
    }

    #[test]
    fn ratings_confirmations_and_choices_are_read_from_words() {
        let rating = json!({ "min": 1, "max": 5 });
        assert_eq!(read("rating", &rating, "I'd say four"), Some(json!({ "value": 4 })));
        assert_eq!(read("rating", &rating, "5 out of 5"), Some(json!({ "value": 5 })));
        assert_eq!(read("rating", &rating, "it was fine"), None);
        assert_eq!(read("confirm", &json!({}), "Yes please"), Some(json!({ "confirmed": true })));
        assert_eq!(read("confirm", &json!({}), "no thanks"), Some(json!({ "confirmed": false })));
        let choice = json!({ "options": [{ "value": "am", "label": "Morning" }, "Evening"] });
        assert_eq!(read("choice", &choice, "the morning"), Some(json!({ "value": "am" })));
        assert_eq!(ask("choice", &choice), "You can say Morning or Evening.");
    }

    #[test]
    fn a_message_on_a_words_only_channel_is_told_apart() {
        let conversation: Conversation = serde_json::from_value(json!({
            "id": "conv_1", "agentId": "concierge", "context": null, "lifecycle": "active", "createdAt": "2026-01-01T00:00:00Z",
            "updatedAt": "2026-01-01T00:00:00Z", "channel": { "type": "web" }
        }))
        .unwrap();
        assert!(!words_only(&json!({}), &conversation));
        assert!(words_only(&json!({ "channel": "sms" }), &conversation));
        assert!(words_only(&json!({ "channel": { "type": "SMS" } }), &conversation));
        assert!(words_only(&json!({ "nature": "voice-turn" }), &conversation));
    }
}
