//! Server voice activity detection: when a caller starts and stops speaking.
//!
//! Earshot's small network scores 16 ms frames of 16 kHz audio; the protocol's 24 kHz audio
//! is brought to 16 kHz by linear interpolation (two samples for every three), which is
//! plenty for telling speech from silence. A turn starts after three voiced frames in a row
//! (48 ms, so a click is not a turn) and ends after `silence_duration_ms` without one.

use super::TurnDetection;

/// Samples of 16 kHz audio earshot scores at a time (16 ms).
const FRAME: usize = 256;
/// Milliseconds in a frame.
const FRAME_MS: u64 = 16;
/// Voiced frames in a row that start a turn.
const START_FRAMES: u32 = 3;

/// A change the detector saw, at a time in milliseconds from the first audio it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VadEvent {
    SpeechStarted { at_ms: u64 },
    SpeechStopped { at_ms: u64 },
}

/// Detects turns in a stream of 24 kHz audio.
pub struct Detector {
    settings: TurnDetection,
    model: Box<earshot::Detector>,
    /// 24 kHz samples waiting for the rest of their group of three.
    carry: Vec<i16>,
    /// 16 kHz samples waiting for the rest of their frame.
    frame: Vec<i16>,
    /// Frames scored since the first audio.
    frames: u64,
    /// 24 kHz samples given since the first audio.
    pushed: u64,
    speaking: bool,
    voiced_run: u32,
    silent_run: u32,
    /// Where the last voiced frame ends, in milliseconds.
    voiced_until_ms: u64,
}

impl Detector {
    pub fn new(settings: TurnDetection) -> Detector {
        Detector {
            settings,
            model: earshot::Detector::default_boxed(),
            carry: Vec::with_capacity(3),
            frame: Vec::with_capacity(FRAME),
            frames: 0,
            pushed: 0,
            speaking: false,
            voiced_run: 0,
            silent_run: 0,
            voiced_until_ms: 0,
        }
    }

    pub fn settings(&self) -> TurnDetection {
        self.settings
    }

    /// New settings from `session.update`; a turn in progress goes on under them.
    pub fn set_settings(&mut self, settings: TurnDetection) {
        self.settings = settings;
    }

    /// Whether the caller is speaking now, as far as the audio given so far tells.
    pub fn speaking(&self) -> bool {
        self.speaking
    }

    /// Forgets the turn in progress (`input_audio_buffer.clear`), keeping the clock.
    pub fn interrupt(&mut self) {
        self.speaking = false;
        self.voiced_run = 0;
        self.silent_run = 0;
    }

    /// Scores `audio` (24 kHz) and returns the starts and stops it holds.
    pub fn push(&mut self, audio: &[i16]) -> Vec<VadEvent> {
        self.pushed += audio.len() as u64;
        let mut events = Vec::new();
        for &sample in audio {
            self.carry.push(sample);
            if self.carry.len() < 3 {
                continue;
            }
            let (a, b, c) = (self.carry[0], self.carry[1], self.carry[2]);
            self.carry.clear();
            self.frame.push(a);
            self.frame.push(((i32::from(b) + i32::from(c)) / 2) as i16);
            if self.frame.len() >= FRAME {
                let frame: Vec<i16> = self.frame.drain(..FRAME).collect();
                if let Some(event) = self.score(&frame) {
                    events.push(event);
                }
            }
        }
        events
    }

    /// Where the last frame heard as speech ends, in milliseconds from the first audio: how
    /// long a turn has been speech, not the silence that may yet end it.
    pub fn voiced_until_ms(&self) -> u64 {
        self.voiced_until_ms
    }

    /// Milliseconds of audio given so far: where the last given sample ends.
    pub fn heard_ms(&self) -> u64 {
        self.pushed * 1000 / u64::from(super::SAMPLE_RATE)
    }

    fn score(&mut self, frame: &[i16]) -> Option<VadEvent> {
        let voiced = self.model.predict_i16(frame) >= self.settings.threshold;
        self.frames += 1;
        let now_ms = self.frames * FRAME_MS;
        if voiced {
            self.voiced_run += 1;
            self.silent_run = 0;
            self.voiced_until_ms = now_ms;
        } else {
            self.voiced_run = 0;
            self.silent_run += 1;
        }
        if !self.speaking && self.voiced_run >= START_FRAMES {
            self.speaking = true;
            let started = now_ms - u64::from(START_FRAMES) * FRAME_MS;
            return Some(VadEvent::SpeechStarted { at_ms: started });
        }
        if self.speaking
            && u64::from(self.silent_run) * FRAME_MS >= u64::from(self.settings.silence_duration_ms)
        {
            self.speaking = false;
            return Some(VadEvent::SpeechStopped { at_ms: now_ms });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn silence(ms: u64) -> Vec<i16> {
        vec![0; (ms * 24) as usize]
    }

    #[test]
    fn silence_is_no_turn() {
        let mut detector = Detector::new(TurnDetection::default());
        assert!(detector.push(&silence(3000)).is_empty());
        assert!(!detector.speaking());
    }

    #[test]
    fn a_short_click_is_no_turn() {
        let mut detector = Detector::new(TurnDetection::default());
        let mut audio = silence(500);
        audio.extend(vec![20_000; 24]);
        audio.extend(silence(1000));
        assert!(detector.push(&audio).is_empty());
    }
}
