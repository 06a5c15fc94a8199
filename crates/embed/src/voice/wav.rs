//! 16-bit PCM: conversion to and from floating point, and the WAV container.

/// 16-bit samples as floating point in -1..1.
pub fn pcm16_to_f32(samples: &[i16]) -> Vec<f32> {
    samples.iter().map(|&sample| f32::from(sample) / 32_768.0).collect()
}

/// Floating-point samples as 16-bit, clipped to the 16-bit range.
pub fn f32_to_pcm16(samples: &[f32]) -> Vec<i16> {
    samples
        .iter()
        .map(|&sample| (sample * 32_768.0).round().clamp(-32_768.0, 32_767.0) as i16)
        .collect()
}

/// Decoded 16-bit PCM audio.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wav {
    pub sample_rate: u32,
    /// Mono: the channels of a multi-channel file are averaged.
    pub samples: Vec<i16>,
}

/// `WAVE_FORMAT_PCM`.
const FORMAT_PCM: u16 = 1;

/// `WAVE_FORMAT_EXTENSIBLE`, whose sub-format (the first two bytes of its GUID) says PCM.
const FORMAT_EXTENSIBLE: u16 = 0xFFFE;

/// Parses a RIFF/WAVE file of 16-bit PCM.
///
/// The chunks are walked rather than the header assumed to be 44 bytes: `fmt ` may be longer
/// than 16 bytes and other chunks (`LIST`, `fact`) may come first. A `data` chunk whose size
/// runs past the end of the bytes is cut there: a program writing a WAV to a pipe, as
/// `espeak-ng --stdout` does, cannot go back to fill in the size and leaves a placeholder.
pub(crate) fn parse_wav(bytes: &[u8]) -> Result<Wav, String> {
    if bytes.len() < 12 || &bytes[0..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return Err("the audio is not a WAV file".into());
    }
    let u16_at = |at: usize| u16::from_le_bytes([bytes[at], bytes[at + 1]]);
    let u32_at =
        |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let mut format = None;
    let mut at = 12;
    while at + 8 <= bytes.len() {
        let id = &bytes[at..at + 4];
        let size = u32_at(at + 4) as usize;
        let body = at + 8;
        match id {
            b"fmt " => {
                if size < 16 || body + 16 > bytes.len() {
                    return Err("the WAV file's fmt chunk is too short".into());
                }
                let mut tag = u16_at(body);
                if tag == FORMAT_EXTENSIBLE && size >= 26 && body + 26 <= bytes.len() {
                    tag = u16_at(body + 24);
                }
                let (channels, rate, bits) =
                    (u16_at(body + 2), u32_at(body + 4), u16_at(body + 14));
                if tag != FORMAT_PCM || bits != 16 || channels == 0 || rate == 0 {
                    return Err(format!(
                        "the WAV file holds format {tag} with {bits}-bit samples, {channels} \
                         channels at {rate} Hz; 16-bit PCM is read"
                    ));
                }
                format = Some((usize::from(channels), rate));
            }
            b"data" => {
                let (channels, sample_rate) =
                    format.ok_or("the WAV file's data comes before its fmt chunk")?;
                let end = body.saturating_add(size).min(bytes.len());
                let frame = 2 * channels;
                let samples = bytes[body..end]
                    .chunks_exact(frame)
                    .map(|frame| {
                        let sum: i32 = frame
                            .chunks_exact(2)
                            .map(|sample| i32::from(i16::from_le_bytes([sample[0], sample[1]])))
                            .sum();
                        (sum / channels as i32) as i16
                    })
                    .collect();
                return Ok(Wav { sample_rate, samples });
            }
            _ => {}
        }
        // Chunks are padded to an even size.
        at = body.saturating_add(size).saturating_add(size & 1);
    }
    Err("the WAV file has no data chunk".into())
}

/// A mono 16-bit PCM WAV file of `samples` at `sample_rate`.
pub(crate) fn encode_wav(samples: &[i16], sample_rate: u32) -> Vec<u8> {
    let data = (samples.len() * 2) as u32;
    let mut wav = Vec::with_capacity(44 + samples.len() * 2);
    wav.extend(b"RIFF");
    wav.extend((36 + data).to_le_bytes());
    wav.extend(b"WAVEfmt ");
    wav.extend(16u32.to_le_bytes());
    wav.extend(FORMAT_PCM.to_le_bytes());
    wav.extend(1u16.to_le_bytes()); // channels
    wav.extend(sample_rate.to_le_bytes());
    wav.extend((sample_rate * 2).to_le_bytes()); // bytes a second
    wav.extend(2u16.to_le_bytes()); // bytes a frame
    wav.extend(16u16.to_le_bytes()); // bits a sample
    wav.extend(b"data");
    wav.extend(data.to_le_bytes());
    for sample in samples {
        wav.extend(sample.to_le_bytes());
    }
    wav
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_between_integers_and_floats() {
        assert_eq!(pcm16_to_f32(&[0, 16_384, -32_768]), [0.0, 0.5, -1.0]);
        assert_eq!(
            f32_to_pcm16(&[0.0, 0.5, -1.0, 1.0, 7.0, -7.0]),
            [0, 16_384, -32_768, 32_767, 32_767, -32_768]
        );
        let samples: Vec<i16> = (-300..300).map(|i| i * 109).collect();
        assert_eq!(f32_to_pcm16(&pcm16_to_f32(&samples)), samples);
    }

    #[test]
    fn round_trips() {
        let samples = [0, 1, -1, i16::MAX, i16::MIN, 1234];
        let wav = encode_wav(&samples, 24_000);
        assert_eq!(wav.len(), 44 + 12);
        assert_eq!(
            parse_wav(&wav).unwrap(),
            Wav { sample_rate: 24_000, samples: samples.to_vec() }
        );
    }

    #[test]
    fn walks_the_chunks() {
        // A LIST chunk of odd size (padded) before a fmt chunk of 18 bytes, then stereo data
        // whose size is a placeholder past the end, as a program writing to a pipe leaves it.
        let mut wav = b"RIFF\xff\xff\xff\xffWAVE".to_vec();
        wav.extend(b"LIST");
        wav.extend(3u32.to_le_bytes());
        wav.extend(b"abc\0");
        wav.extend(b"fmt ");
        wav.extend(18u32.to_le_bytes());
        wav.extend(1u16.to_le_bytes());
        wav.extend(2u16.to_le_bytes());
        wav.extend(22_050u32.to_le_bytes());
        wav.extend((22_050u32 * 4).to_le_bytes());
        wav.extend(4u16.to_le_bytes());
        wav.extend(16u16.to_le_bytes());
        wav.extend(0u16.to_le_bytes());
        wav.extend(b"data");
        wav.extend(0x7fff_f000u32.to_le_bytes());
        for sample in [100i16, 300, -50, -150, 7, 9] {
            wav.extend(sample.to_le_bytes());
        }
        wav.push(0); // half a sample: dropped
        assert_eq!(
            parse_wav(&wav).unwrap(),
            Wav { sample_rate: 22_050, samples: vec![200, -100, 8] }
        );
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        assert_eq!(parse_wav(b"ID3 not a wav").unwrap_err(), "the audio is not a WAV file");
        let mut float = encode_wav(&[1, 2], 16_000);
        float[20] = 3; // IEEE float
        float[34] = 32;
        assert!(parse_wav(&float).unwrap_err().contains("format 3 with 32-bit samples"));
        let wav = encode_wav(&[1, 2], 16_000);
        assert_eq!(parse_wav(&wav[..36]).unwrap_err(), "the WAV file has no data chunk");
    }
}
