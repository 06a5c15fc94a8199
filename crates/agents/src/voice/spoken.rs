//! A reply as it is spoken: cut into sentences, so the first is heard while the next is
//! synthesised, and cut back to what the caller heard when they interrupt.

/// Splits a reply into the pieces it is spoken in: sentences (ending in `.`, `!`, `?` or
/// `…` before a space) and lines. Joined with single spaces they give the text back with
/// its whitespace normalised.
pub fn sentences(text: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    for line in text.lines() {
        let mut current = String::new();
        let words: Vec<&str> = line.split_whitespace().collect();
        for word in words {
            if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(word);
            if word.ends_with(['.', '!', '?', '…', ':', ';']) {
                pieces.push(std::mem::take(&mut current));
            }
        }
        if !current.is_empty() {
            pieces.push(current);
        }
    }
    pieces
}

/// One spoken piece of a reply and where its audio sits in the reply's audio.
#[derive(Debug, Clone, PartialEq)]
pub struct SpokenPiece {
    pub text: String,
    pub start_ms: u64,
    pub end_ms: u64,
}

/// The text heard when playback stopped at `heard_ms`: whole pieces whose audio ended by
/// then, and of the piece playing, the words whose share of its characters had been spoken
/// (speech runs at a roughly even pace through a sentence). `0` keeps nothing.
pub fn heard_text(pieces: &[SpokenPiece], heard_ms: u64) -> String {
    let mut heard = Vec::new();
    for piece in pieces {
        if heard_ms >= piece.end_ms {
            heard.push(piece.text.clone());
            continue;
        }
        if heard_ms > piece.start_ms {
            let share = (heard_ms - piece.start_ms) as f64 / (piece.end_ms - piece.start_ms) as f64;
            let budget = (piece.text.chars().count() as f64 * share).floor() as usize;
            let mut kept = String::new();
            for word in piece.text.split_whitespace() {
                let length =
                    kept.chars().count() + usize::from(!kept.is_empty()) + word.chars().count();
                if length > budget {
                    break;
                }
                if !kept.is_empty() {
                    kept.push(' ');
                }
                kept.push_str(word);
            }
            if !kept.is_empty() {
                heard.push(kept);
            }
        }
        break;
    }
    heard.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_spoken_a_sentence_at_a_time() {
        assert_eq!(
            sentences("Hello there. How can I help?\nPick a time:  Monday or Tuesday"),
            vec!["Hello there.", "How can I help?", "Pick a time:", "Monday or Tuesday"]
        );
        assert!(sentences("  \n ").is_empty());
        assert_eq!(sentences("v1.2 is out"), vec!["v1.2 is out"]);
    }

    fn pieces() -> Vec<SpokenPiece> {
        vec![
            SpokenPiece { text: "Hello there.".into(), start_ms: 0, end_ms: 1000 },
            SpokenPiece {
                text: "We can book a demo for you.".into(),
                start_ms: 1000,
                end_ms: 3000,
            },
        ]
    }

    #[test]
    fn the_heard_text_stops_where_playback_stopped() {
        assert_eq!(heard_text(&pieces(), 0), "");
        assert_eq!(heard_text(&pieces(), 1000), "Hello there.");
        // Half of the second sentence's 27 characters: 13, so "We can book a" (13).
        assert_eq!(heard_text(&pieces(), 2000), "Hello there. We can book a");
        assert_eq!(heard_text(&pieces(), 3000), "Hello there. We can book a demo for you.");
        assert_eq!(heard_text(&pieces(), 99_000), "Hello there. We can book a demo for you.");
        // A word is kept only once all of it was heard.
        assert_eq!(heard_text(&pieces(), 500), "Hello");
    }
}
