//! Text to speech with eSpeak NG, run as a subprocess.
//!
//! `espeak-ng --stdout --stdin` reads the text from its standard input (never from the
//! command line and never through a shell, so no text can become an option or a command) and
//! writes a WAV file, at 22,050 Hz for its own voices, to its standard output. The audio is
//! brought to Cairn's voice format: 16-bit mono at 24 kHz.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::voice::resample::resample;
use crate::voice::wav::{f32_to_pcm16, parse_wav, pcm16_to_f32};

/// The sample rate of the audio [`Espeak::synthesize`] returns.
pub const VOICE_SAMPLE_RATE: u32 = 24_000;

/// The program looked for on `PATH`.
const PROGRAM: &str = "espeak-ng";

/// eSpeak NG's default voice.
const DEFAULT_VOICE: &str = "en-us";

/// eSpeak NG's default rate, in words a minute.
const DEFAULT_RATE: u32 = 175;

/// The rates eSpeak NG accepts, in words a minute.
const RATES: std::ops::RangeInclusive<u32> = 80..=450;

/// An eSpeak NG installation with a voice and a rate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Espeak {
    program: PathBuf,
    voice: String,
    rate: u32,
}

impl Espeak {
    /// Finds `espeak-ng` on `PATH`; `None` when it is not installed. The voice is `en-us`
    /// at 175 words a minute.
    pub fn detect() -> Option<Espeak> {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .map(|dir| dir.join(PROGRAM))
            .find(|candidate| is_executable(candidate))
            .map(Espeak::at)
    }

    /// Uses the `espeak-ng` program at `program`.
    pub fn at(program: PathBuf) -> Espeak {
        Espeak { program, voice: DEFAULT_VOICE.to_owned(), rate: DEFAULT_RATE }
    }

    /// Speaks with `voice` (`en-us`, `en-gb`, `en-us+f3`, … as `espeak-ng --voices` lists
    /// them). A name of anything but letters, digits, `-`, `_` and `+`, or starting with
    /// `-`, is refused and the voice left as it was.
    pub fn with_voice(mut self, voice: &str) -> Result<Espeak, String> {
        let valid = !voice.is_empty()
            && !voice.starts_with('-')
            && voice.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+'));
        if !valid {
            return Err(format!("{voice:?} is not an eSpeak NG voice name"));
        }
        self.voice = voice.to_owned();
        Ok(self)
    }

    /// Speaks at `words_per_minute`, kept within eSpeak NG's 80 to 450.
    pub fn with_rate(mut self, words_per_minute: u32) -> Espeak {
        self.rate = words_per_minute.clamp(*RATES.start(), *RATES.end());
        self
    }

    /// The program that is run.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Speaks `text`: 16-bit mono samples at 24 kHz ([`VOICE_SAMPLE_RATE`]); none for a text
    /// with nothing to say. Blocking (a subprocess): call it from a blocking thread in async
    /// code.
    pub fn synthesize(&self, text: &str) -> Result<Vec<i16>, String> {
        if text.trim().is_empty() {
            return Ok(Vec::new());
        }
        let mut child = Command::new(&self.program)
            .args(["--stdout", "--stdin", "-b", "1", "-v", &self.voice, "-s"])
            .arg(self.rate.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.program.display()))?;
        // Written from a thread of its own, so a long text cannot block on a full pipe while
        // the output waits to be read.
        let mut stdin = child.stdin.take().ok_or("espeak-ng has no standard input")?;
        let input = text.to_owned();
        let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
        let output =
            child.wait_with_output().map_err(|e| format!("espeak-ng did not finish: {e}"))?;
        let written = writer.join().map_err(|_| "the text could not be passed to espeak-ng")?;
        if !output.status.success() {
            let message = String::from_utf8_lossy(&output.stderr);
            return Err(format!("espeak-ng failed ({}): {}", output.status, message.trim()));
        }
        written.map_err(|e| format!("cannot pass the text to espeak-ng: {e}"))?;
        let wav = parse_wav(&output.stdout).map_err(|e| format!("espeak-ng's output: {e}"))?;
        let samples = resample(&pcm16_to_f32(&wav.samples), wav.sample_rate, VOICE_SAMPLE_RATE);
        Ok(f32_to_pcm16(&samples))
    }
}

/// Whether `path` is a file that may be run.
fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        path.metadata().is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// eSpeak NG is a test dependency (CI installs it); a clear failure beats a silent skip.
    fn espeak() -> Espeak {
        Espeak::detect().expect("espeak-ng is not on PATH: apt-get install espeak-ng")
    }

    #[test]
    fn speaks_at_24_khz() {
        let samples = espeak().synthesize("I would like to book a demo").unwrap();
        // About two seconds of speech, loud enough to hear.
        let seconds = samples.len() as f32 / VOICE_SAMPLE_RATE as f32;
        assert!((1.0..4.0).contains(&seconds), "{seconds} s");
        let peak = samples.iter().map(|s| s.unsigned_abs()).max().unwrap();
        assert!(peak > 5_000, "peak {peak}");
    }

    #[test]
    fn the_rate_changes_the_length() {
        let text = "The quick brown fox jumps over the lazy dog";
        let slow = espeak().with_rate(100).synthesize(text).unwrap().len();
        let fast = espeak().with_rate(300).synthesize(text).unwrap().len();
        assert!(slow > fast * 2, "slow {slow}, fast {fast}");
    }

    #[test]
    fn text_is_never_an_option() {
        // Read from standard input, a text that looks like options is spoken, not obeyed.
        let samples = espeak().synthesize("--version -w /tmp/x.wav").unwrap();
        assert!(samples.len() > VOICE_SAMPLE_RATE as usize / 2);
        assert!(espeak().synthesize("  \n").unwrap().is_empty());
    }

    #[test]
    fn voices_are_checked() {
        assert!(espeak().with_voice("en-gb").is_ok());
        assert!(espeak().with_voice("en-us+f3").is_ok());
        for bad in ["", "--stdout", "en us", "en;rm"] {
            assert!(espeak().with_voice(bad).is_err(), "{bad:?}");
        }
        // The voice is passed on: a female variant sounds different.
        let female = espeak().with_voice("en-us+f3").unwrap().synthesize("hello").unwrap();
        assert_ne!(female, espeak().synthesize("hello").unwrap());
    }

    #[test]
    fn a_missing_program_is_a_clear_error() {
        let err = Espeak::at("/nonexistent/espeak-ng".into()).synthesize("hello").unwrap_err();
        assert!(err.starts_with("cannot run /nonexistent/espeak-ng"), "{err}");
    }
}
