//! Sample-rate conversion of a whole utterance: a windowed-sinc low-pass evaluated at each
//! output sample's position (band-limited interpolation).
//!
//! The ratio is reduced to `up / down`; output sample `j` sits at input position
//! `j * down / up`, so there are only `up` distinct fractional offsets and the filter taps of
//! each are computed once (for ratios with more than [`MAX_PHASES`] offsets, the offset is
//! rounded to the nearest of 1,024, a timing error of at most 1/2,048 of a sample). The
//! low-pass sits below the lower of the two Nyquist frequencies, so downsampling does not
//! alias and upsampling does not image; a Kaiser window keeps its stopband below -80 dB.

/// Zero crossings of the sinc on each side of the centre: the filter's length.
const ZERO_CROSSINGS: f64 = 24.0;

/// The cut-off as a fraction of the lower Nyquist frequency; the transition band lies
/// between it and the Nyquist frequency.
const ROLLOFF: f64 = 0.92;

/// The Kaiser window's shape: about -85 dB sidelobes.
const KAISER_BETA: f64 = 8.5;

/// The most fractional offsets given taps of their own.
const MAX_PHASES: u64 = 1024;

/// Converts mono `samples` from `from_hz` to `to_hz`, e.g. 24 kHz speech to Whisper's
/// 16 kHz, or espeak-ng's 22,050 Hz to 24 kHz.
///
/// The output has `samples.len() * to_hz / from_hz` samples (rounded down) and the same
/// time origin; equal rates return the input unchanged, and a rate of zero gives no samples.
pub fn resample(samples: &[f32], from_hz: u32, to_hz: u32) -> Vec<f32> {
    if from_hz == to_hz {
        return samples.to_vec();
    }
    if from_hz == 0 || to_hz == 0 || samples.is_empty() {
        return Vec::new();
    }
    let divisor = gcd(u64::from(from_hz), u64::from(to_hz));
    let (up, down) = (u64::from(to_hz) / divisor, u64::from(from_hz) / divisor);
    let phases = up.min(MAX_PHASES);

    // The cut-off in cycles per input sample, and the kernel's half-width in input samples.
    let cutoff = 0.5 * ROLLOFF * (to_hz as f64 / from_hz as f64).min(1.0);
    let half_width = ZERO_CROSSINGS / (2.0 * cutoff);
    let reach = half_width.ceil() as i64;
    let kernel = |x: f64| {
        if x.abs() >= half_width {
            return 0.0;
        }
        let ratio = x / half_width;
        let window = bessel_i0(KAISER_BETA * (1.0 - ratio * ratio).sqrt()) / bessel_i0(KAISER_BETA);
        2.0 * cutoff * sinc(2.0 * cutoff * x) * window
    };
    // The taps of each offset, for inputs `base - reach + 1 ..= base + reach`, scaled so
    // that they sum to one: a constant signal stays the same constant.
    let bank: Vec<Vec<f32>> = (0..phases)
        .map(|phase| {
            let offset = phase as f64 / phases as f64;
            let taps: Vec<f64> = (1 - reach..=reach).map(|i| kernel(i as f64 - offset)).collect();
            let sum: f64 = taps.iter().sum();
            taps.iter().map(|tap| (tap / sum) as f32).collect()
        })
        .collect();

    let count = (samples.len() as u64 * up / down) as usize;
    let len = samples.len() as i64;
    (0..count as u64)
        .map(|j| {
            let position = j * down;
            let mut base = (position / up) as i64;
            // The offset in 1/phases of a sample, rounded when phases < up.
            let mut phase = ((position % up) * phases + up / 2) / up;
            if phase == phases {
                base += 1;
                phase = 0;
            }
            let taps = &bank[phase as usize];
            // The taps that fall inside the input; beyond its ends the signal is silence.
            let start = base + 1 - reach;
            let (first, last) = (start.max(0), (start + taps.len() as i64).min(len));
            if first >= last {
                return 0.0;
            }
            let taps = &taps[(first - start) as usize..(last - start) as usize];
            let inputs = &samples[first as usize..last as usize];
            taps.iter().zip(inputs).map(|(tap, sample)| tap * sample).sum()
        })
        .collect()
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// `sin(πx) / (πx)`.
fn sinc(x: f64) -> f64 {
    if x == 0.0 {
        1.0
    } else {
        let angle = std::f64::consts::PI * x;
        angle.sin() / angle
    }
}

/// The modified Bessel function of the first kind, order zero, by its power series.
fn bessel_i0(x: f64) -> f64 {
    let quarter = x * x / 4.0;
    let (mut sum, mut term) = (1.0, 1.0);
    for k in 1..50 {
        term *= quarter / (k * k) as f64;
        sum += term;
        if term < sum * 1e-16 {
            break;
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tone(hz: f64, rate: u32, seconds: f64) -> Vec<f32> {
        let count = (seconds * f64::from(rate)) as usize;
        (0..count)
            .map(|i| {
                (0.5 * (2.0 * std::f64::consts::PI * hz * i as f64 / f64::from(rate)).sin()) as f32
            })
            .collect()
    }

    /// The amplitude of the `hz` component of the middle of `samples` (away from the edges),
    /// by correlation with a sine and a cosine.
    fn amplitude(samples: &[f32], rate: u32, hz: f64) -> f64 {
        let (start, end) = (samples.len() / 4, samples.len() * 3 / 4);
        let (mut re, mut im) = (0.0, 0.0);
        for (i, &sample) in samples.iter().enumerate().take(end).skip(start) {
            let angle = 2.0 * std::f64::consts::PI * hz * i as f64 / f64::from(rate);
            re += f64::from(sample) * angle.cos();
            im += f64::from(sample) * angle.sin();
        }
        2.0 * (re * re + im * im).sqrt() / (end - start) as f64
    }

    fn decibels(ratio: f64) -> f64 {
        20.0 * ratio.log10()
    }

    #[test]
    fn keeps_the_length_and_the_time_origin() {
        assert_eq!(resample(&vec![0.0; 48_000], 24_000, 16_000).len(), 32_000);
        assert_eq!(resample(&vec![0.0; 22_050], 22_050, 24_000).len(), 24_000);
        assert_eq!(resample(&vec![0.0; 1_000], 44_100, 16_000).len(), 362);
        assert_eq!(resample(&[0.25, 0.5], 16_000, 16_000), [0.25, 0.5]);
        assert!(resample(&[0.25], 0, 16_000).is_empty());
        assert!(resample(&[], 24_000, 16_000).is_empty());

        // A constant stays constant (away from the edges, where zeros are read beyond the
        // input), and an impulse lands at the same time.
        let flat = resample(&vec![0.3; 2_400], 24_000, 16_000);
        assert!(flat[100..1_500].iter().all(|&x| (x - 0.3).abs() < 1e-5));
        let mut impulse = vec![0.0; 2_400];
        impulse[1_200] = 1.0;
        let moved = resample(&impulse, 24_000, 16_000);
        let peak = (0..moved.len()).max_by(|&a, &b| moved[a].total_cmp(&moved[b])).unwrap();
        assert_eq!(peak, 800);
    }

    #[test]
    fn passes_speech_and_stops_what_would_alias() {
        for (from, to) in [(24_000, 16_000), (22_050, 24_000), (48_000, 16_000), (44_100, 16_000)] {
            let nyquist = f64::from(from.min(to)) / 2.0;
            for hz in [200.0, 1_000.0, 3_400.0, 0.75 * nyquist] {
                let out = resample(&tone(hz, from, 0.5), from, to);
                let gain = decibels(amplitude(&out, to, hz) / 0.5);
                assert!(gain.abs() < 0.05, "{from} -> {to}: {hz} Hz changed by {gain:.3} dB");
            }
            if to < from {
                // A tone above the new Nyquist frequency would fold back into the band.
                let hz = 1.2 * nyquist;
                let folded = f64::from(to) - hz;
                let out = resample(&tone(hz, from, 0.5), from, to);
                let leak = decibels(amplitude(&out, to, folded) / 0.5);
                assert!(leak < -70.0, "{from} -> {to}: {hz} Hz aliased at {leak:.1} dB");
            }
        }
    }

    #[test]
    fn computes_i0() {
        // Values from Abramowitz and Stegun, table 9.8.
        for (x, expected) in [(0.0, 1.0), (1.0, 1.266_065_878), (5.0, 27.239_871_82)] {
            assert!((bessel_i0(x) - expected).abs() < 1e-8, "I0({x}) = {}", bessel_i0(x));
        }
    }
}
