//! A reply as it is spoken: cut into sentences, so the first is heard while the next is
//! synthesised, and cut back to what the caller heard when they interrupt.

/// Splits a reply into the pieces it is spoken in: sentences (ending in `.`, `!`, `?` or
/// `…` before a space) and lines. Joined with single spaces they give the text back with
/// its whitespace normalised.
pub fn sentences(text: &str) -> Vec<String> {
    let mut splitter = SentenceSplitter::default();
    let mut pieces = splitter.push(text);
    pieces.extend(splitter.finish());
    pieces
}

/// [`sentences`] for text that arrives in pieces (a language model's deltas): each call
/// returns the pieces completed so far, and [`finish`](SentenceSplitter::finish) the rest,
/// whatever the pieces' boundaries.
#[derive(Debug, Default)]
pub struct SentenceSplitter {
    current: String,
    word: String,
}

impl SentenceSplitter {
    pub fn push(&mut self, text: &str) -> Vec<String> {
        let mut pieces = Vec::new();
        for c in text.chars() {
            if !c.is_whitespace() {
                self.word.push(c);
                continue;
            }
            self.end_word(&mut pieces);
            if c == '\n' && !self.current.is_empty() {
                pieces.push(std::mem::take(&mut self.current));
            }
        }
        pieces
    }

    pub fn finish(mut self) -> Vec<String> {
        let mut pieces = Vec::new();
        self.end_word(&mut pieces);
        if !self.current.is_empty() {
            pieces.push(self.current);
        }
        pieces
    }

    fn end_word(&mut self, pieces: &mut Vec<String>) {
        if self.word.is_empty() {
            return;
        }
        if !self.current.is_empty() {
            self.current.push(' ');
        }
        self.current.push_str(&self.word);
        if self.word.ends_with(['.', '!', '?', '…', ':', ';']) {
            pieces.push(std::mem::take(&mut self.current));
        }
        self.word.clear();
    }
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
    fn streamed_text_splits_as_the_whole_text_does() {
        let text = "Hello there. How can I help?\nPick a time:  Monday or\r\n Tuesday…  ok";
        for size in 1..=text.len() {
            let mut splitter = SentenceSplitter::default();
            let mut pieces = Vec::new();
            let chars: Vec<char> = text.chars().collect();
            for chunk in chars.chunks(size) {
                pieces.extend(splitter.push(&chunk.iter().collect::<String>()));
            }
            pieces.extend(splitter.finish());
            assert_eq!(pieces, sentences(text), "in pieces of {size} characters");
        }
        let mut splitter = SentenceSplitter::default();
        assert_eq!(splitter.push("Sure. I can"), vec!["Sure."]);
        assert!(splitter.push(" book").is_empty());
        assert_eq!(splitter.push(" that! "), vec!["I can book that!"]);
    }

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
