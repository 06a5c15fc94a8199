//! Whisper's input: the log-mel spectrogram of 16 kHz audio, as openai-whisper computes it.
//!
//! A short-time Fourier transform with a 400-sample periodic Hann window every 160 samples
//! (10 ms), centred (the signal is reflected by 200 samples at both ends) and without its
//! last frame, so `n` samples give `n / 160` frames; the power spectrum through 80 Slaney mel
//! filters; `log10` clamped at 1e-10, floored 8 below the maximum, and scaled to `(x + 4) / 4`.
//! The transform is a matrix product with a windowed DFT basis, so it runs in candle's
//! optimised matrix code rather than in a loop of this crate's own.

use candle_core::{Device, Result, Tensor};

/// The sample rate Whisper hears.
pub(crate) const SAMPLE_RATE: usize = 16_000;

/// The window of the Fourier transform, in samples.
pub(crate) const N_FFT: usize = 400;

/// The step between frames, in samples.
pub(crate) const HOP: usize = 160;

/// The frequency bins of one frame: 0 to 8 kHz in steps of 40 Hz.
const BINS: usize = N_FFT / 2 + 1;

/// The width of a mel below 1 kHz, in Hz, on the Slaney scale.
const F_SP: f64 = 200.0 / 3.0;

/// Where the Slaney scale turns logarithmic.
const MIN_LOG_HZ: f64 = 1000.0;

/// The mel of [`MIN_LOG_HZ`].
const MIN_LOG_MEL: f64 = MIN_LOG_HZ / F_SP;

/// The log step above [`MIN_LOG_HZ`]: 27 mels per factor 6.4.
fn log_step() -> f64 {
    6.4f64.ln() / 27.0
}

fn hz_to_mel(hz: f64) -> f64 {
    if hz >= MIN_LOG_HZ { MIN_LOG_MEL + (hz / MIN_LOG_HZ).ln() / log_step() } else { hz / F_SP }
}

fn mel_to_hz(mel: f64) -> f64 {
    if mel >= MIN_LOG_MEL {
        MIN_LOG_HZ * (log_step() * (mel - MIN_LOG_MEL)).exp()
    } else {
        mel * F_SP
    }
}

/// The mel filter bank, `n_mels` rows of 201 weights, as
/// `librosa.filters.mel(sr=16000, n_fft=400, n_mels=n_mels)` computes it (Slaney's scale and
/// area normalisation) and openai-whisper ships it in `mel_filters.npz`.
pub(crate) fn mel_filters(n_mels: usize) -> Vec<f32> {
    let nyquist = SAMPLE_RATE as f64 / 2.0;
    let bin_hz = |bin: usize| bin as f64 * nyquist / (BINS - 1) as f64;
    // n_mels + 2 points evenly spaced in mels from 0 Hz to the Nyquist frequency: the edges
    // and centres of the triangles.
    let top = hz_to_mel(nyquist);
    let points: Vec<f64> =
        (0..n_mels + 2).map(|i| mel_to_hz(top * i as f64 / (n_mels + 1) as f64)).collect();
    let mut filters = vec![0f32; n_mels * BINS];
    for m in 0..n_mels {
        let (low, centre, high) = (points[m], points[m + 1], points[m + 2]);
        let norm = 2.0 / (high - low);
        for bin in 0..BINS {
            let hz = bin_hz(bin);
            let rising = (hz - low) / (centre - low);
            let falling = (high - hz) / (high - centre);
            filters[m * BINS + bin] = (rising.min(falling).max(0.0) * norm) as f32;
        }
    }
    filters
}

/// Computes log-mel spectrograms; holds the DFT basis and the filters.
#[derive(Debug)]
pub(crate) struct LogMel {
    /// `(400, 402)`: the Hann window times `cos` in the first 201 columns and `sin` in the
    /// others, so `frames × basis` gives the real and imaginary parts.
    basis: Tensor,
    /// `(201, n_mels)`.
    filters: Tensor,
}

impl LogMel {
    pub(crate) fn new(n_mels: usize, device: &Device) -> Result<LogMel> {
        let mut basis = vec![0f32; N_FFT * 2 * BINS];
        for n in 0..N_FFT {
            let phase = 2.0 * std::f64::consts::PI * n as f64 / N_FFT as f64;
            let window = 0.5 * (1.0 - phase.cos());
            for k in 0..BINS {
                // (k * n) mod N keeps the angle small, so the f64 is exact enough.
                let angle = 2.0 * std::f64::consts::PI * ((k * n) % N_FFT) as f64 / N_FFT as f64;
                basis[n * 2 * BINS + k] = (window * angle.cos()) as f32;
                basis[n * 2 * BINS + BINS + k] = (window * angle.sin()) as f32;
            }
        }
        let basis = Tensor::from_vec(basis, (N_FFT, 2 * BINS), device)?;
        let filters = Tensor::from_vec(mel_filters(n_mels), (n_mels, BINS), device)?.t()?;
        Ok(LogMel { basis, filters: filters.contiguous()? })
    }

    /// The spectrogram of `samples` (16 kHz), shaped `(1, n_mels, samples.len() / 160)`.
    /// `samples` must be longer than 200 samples (the reflection at each end).
    pub(crate) fn compute(&self, samples: &[f32]) -> Result<Tensor> {
        let n = samples.len();
        let half = N_FFT / 2;
        if n <= half {
            candle_core::bail!("{n} samples are too few for a spectrogram");
        }
        let frames = n / HOP;
        let mut padded = Vec::with_capacity(n + N_FFT);
        padded.extend((1..=half).rev().map(|i| samples[i]));
        padded.extend_from_slice(samples);
        padded.extend((0..half).map(|j| samples[n - 2 - j]));
        let mut windows = Vec::with_capacity(frames * N_FFT);
        for t in 0..frames {
            windows.extend_from_slice(&padded[t * HOP..t * HOP + N_FFT]);
        }
        let windows = Tensor::from_vec(windows, (frames, N_FFT), self.basis.device())?;
        let spectrum = windows.matmul(&self.basis)?;
        let power = spectrum.sqr()?;
        let power = (power.narrow(1, 0, BINS)? + power.narrow(1, BINS, BINS)?)?;
        let mel = power.matmul(&self.filters)?;
        let log = (mel.clamp(1e-10, f64::INFINITY)?.log()? / std::f64::consts::LN_10)?;
        let floor = log.flatten_all()?.max(0)?.to_scalar::<f32>()? - 8.0;
        log.maximum(floor)?.affine(0.25, 1.0)?.t()?.contiguous()?.unsqueeze(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_match_openai_whisper() {
        let filters = mel_filters(80);
        let at = |row: usize, bin: usize| f64::from(filters[row * BINS + bin]);
        // Values of mel_80 in openai-whisper's whisper/assets/mel_filters.npz (20250625).
        let reference: [(usize, usize, f64); 10] = [
            (0, 1, 0.024862595),
            (1, 1, 0.0019908219),
            (1, 2, 0.022871772),
            (10, 10, 0.019908218),
            (10, 11, 0.004954375),
            (20, 19, 0.0109722),
            (40, 43, 0.014735566),
            (60, 93, 0.0065910928),
            (79, 186, 0.00036674167),
            (79, 193, 0.0031413133),
        ];
        for (row, bin, value) in reference {
            assert!(
                (at(row, bin) - value).abs() < 1e-8,
                "filter {row} bin {bin}: {}",
                at(row, bin)
            );
        }
        // Fingerprints of the whole bank: nonzero weights, sum, sum of squares, maximum.
        assert_eq!(filters.iter().filter(|&&w| w != 0.0).count(), 391);
        let sum: f64 = filters.iter().map(|&w| f64::from(w)).sum();
        let squares: f64 = filters.iter().map(|&w| f64::from(w) * f64::from(w)).sum();
        let max = f64::from(filters.iter().copied().fold(0f32, f32::max));
        assert!((sum - 1.999024092387117).abs() < 1e-6, "{sum}");
        assert!((squares - 0.0211855153073172).abs() < 1e-8, "{squares}");
        assert!((max - 0.025880683213472366).abs() < 1e-8, "{max}");
    }

    #[test]
    fn frames_follow_a_direct_fourier_transform() {
        // 0.25 s of two tones; one frame computed by hand in f64 with the same centring.
        let samples: Vec<f32> = (0..4000)
            .map(|i| {
                let t = i as f32 / SAMPLE_RATE as f32;
                0.5 * (2.0 * std::f32::consts::PI * 440.0 * t).sin()
                    + 0.2 * (2.0 * std::f32::consts::PI * 3000.0 * t).sin()
            })
            .collect();
        let mel = LogMel::new(80, &Device::Cpu).unwrap().compute(&samples).unwrap();
        assert_eq!(mel.dims(), [1, 80, 25]);
        let mel: Vec<Vec<f32>> = mel.squeeze(0).unwrap().to_vec2().unwrap();

        let filters = mel_filters(80);
        let direct = |t: usize| -> Vec<f64> {
            let power: Vec<f64> = (0..BINS)
                .map(|k| {
                    let (mut re, mut im) = (0f64, 0f64);
                    for n in 0..N_FFT {
                        // Reflected at both ends, the edge sample not repeated.
                        let index = (t * HOP + n) as isize - (N_FFT / 2) as isize;
                        let last = samples.len() as isize - 1;
                        let index = if index < 0 {
                            -index
                        } else if index > last {
                            2 * last - index
                        } else {
                            index
                        } as usize;
                        let window =
                            0.5 - 0.5 * (2.0 * std::f64::consts::PI * n as f64 / 400.0).cos();
                        let angle = 2.0 * std::f64::consts::PI * (k * n) as f64 / 400.0;
                        re += window * f64::from(samples[index]) * angle.cos();
                        im -= window * f64::from(samples[index]) * angle.sin();
                    }
                    re * re + im * im
                })
                .collect();
            (0..80)
                .map(|m| {
                    let energy: f64 =
                        (0..BINS).map(|k| f64::from(filters[m * BINS + k]) * power[k]).sum();
                    energy.max(1e-10).log10()
                })
                .collect()
        };
        let max = (0..25).flat_map(&direct).fold(f64::MIN, f64::max);
        for t in [0, 1, 12, 24] {
            let expected = direct(t);
            for m in 0..80 {
                let expected = (expected[m].max(max - 8.0) + 4.0) / 4.0;
                let got = f64::from(mel[m][t]);
                assert!((got - expected).abs() < 1e-3, "frame {t} mel {m}: {got} vs {expected}");
            }
        }
        // The loudest band of a middle frame is the one whose filter weighs 440 Hz (bin 11) most.
        let loudest = (0..80).max_by(|&a, &b| mel[a][12].total_cmp(&mel[b][12])).unwrap();
        let at_440 =
            (0..80).max_by(|&a, &b| filters[a * BINS + 11].total_cmp(&filters[b * BINS + 11]));
        assert_eq!(Some(loudest), at_440);
    }

    #[test]
    fn the_scale_round_trips() {
        for hz in [0.0, 300.0, 999.0, 1000.0, 4321.0, 8000.0] {
            assert!((mel_to_hz(hz_to_mel(hz)) - hz).abs() < 1e-9);
        }
        assert!((hz_to_mel(1000.0) - 15.0).abs() < 1e-12);
    }
}
