// Audio as the voice socket carries it: pcm16, mono, 24 kHz, little-endian, base64 in JSON
// (docs/voice.md). Pure functions and a streaming resampler, so they are tested without a
// browser and shared by capture and playback.

/** The voice socket's sample rate, both ways. */
export const VOICE_SAMPLE_RATE = 24_000;

/** Converts float samples (−1…1) to pcm16, clamping what lies outside. */
export function floatToPcm16(samples: Float32Array): Int16Array {
  const out = new Int16Array(samples.length);
  for (let index = 0; index < samples.length; index += 1) {
    const sample = Math.max(-1, Math.min(1, samples[index] ?? 0));
    out[index] = sample < 0 ? Math.round(sample * 0x8000) : Math.round(sample * 0x7fff);
  }
  return out;
}

/** Converts pcm16 samples to floats (−1…1). */
export function pcm16ToFloat(samples: Int16Array): Float32Array {
  const out = new Float32Array(samples.length);
  for (let index = 0; index < samples.length; index += 1) {
    const sample = samples[index] ?? 0;
    out[index] = sample < 0 ? sample / 0x8000 : sample / 0x7fff;
  }
  return out;
}

/** Encodes pcm16 samples as little-endian bytes in base64, whatever the platform's order. */
export function encodePcm16Base64(samples: Int16Array): string {
  const bytes = new Uint8Array(samples.length * 2);
  const view = new DataView(bytes.buffer);
  for (let index = 0; index < samples.length; index += 1) {
    view.setInt16(index * 2, samples[index] ?? 0, true);
  }
  return bytesToBase64(bytes);
}

/**
 * Decodes base64 little-endian pcm16 into samples. Throws on text that is not base64 or
 * on an odd number of bytes, which no pcm16 audio has.
 */
export function decodePcm16Base64(audio: string): Int16Array {
  const bytes = base64ToBytes(audio);
  if (bytes.length % 2 !== 0) {
    throw new Error(`pcm16 audio has an even number of bytes; this has ${bytes.length}`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Int16Array(bytes.length / 2);
  for (let index = 0; index < out.length; index += 1) {
    out[index] = view.getInt16(index * 2, true);
  }
  return out;
}

/** How long `samples` pcm16 samples at 24 kHz last, in milliseconds. */
export function pcm16DurationMs(samples: number, sampleRate = VOICE_SAMPLE_RATE): number {
  return (samples * 1000) / sampleRate;
}

function bytesToBase64(bytes: Uint8Array): string {
  // `String.fromCharCode` takes arguments, so the bytes go in slices well under any
  // engine's argument limit.
  let binary = "";
  const slice = 0x8000;
  for (let start = 0; start < bytes.length; start += slice) {
    binary += String.fromCharCode(...bytes.subarray(start, start + slice));
  }
  return btoa(binary);
}

function base64ToBytes(text: string): Uint8Array {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let index = 0; index < binary.length; index += 1) {
    bytes[index] = binary.charCodeAt(index);
  }
  return bytes;
}

/**
 * Resamples a stream of mono float chunks from one rate to another, keeping its position
 * between chunks, so the output of many chunks is the output of their concatenation.
 *
 * Going down (a microphone at 48 or 44.1 kHz to 24 kHz), each output sample is the mean of
 * the input samples its period covers: a box filter that keeps most of what lies above the
 * new Nyquist frequency out, plenty for speech recognition. Going up (a 16 kHz context), it
 * interpolates linearly. Equal rates pass through unchanged.
 */
export class StreamResampler {
  readonly inputRate: number;
  readonly outputRate: number;
  /** Input samples not consumed yet, carried into the next chunk. */
  private pending: Float32Array = new Float32Array(0);
  /**
   * Where the next output sample starts, in input samples from the start of `pending`,
   * times `outputRate`: an integer, so chunking never changes the arithmetic.
   */
  private position = 0;

  constructor(inputRate: number, outputRate: number) {
    if (!(inputRate > 0) || !(outputRate > 0)) {
      throw new RangeError(`sample rates must be positive (got ${inputRate} and ${outputRate})`);
    }
    this.inputRate = Math.round(inputRate);
    this.outputRate = Math.round(outputRate);
  }

  /** Takes the next chunk of input and returns the output samples it completes. */
  push(chunk: Float32Array): Float32Array {
    if (this.inputRate === this.outputRate) {
      return chunk.slice();
    }
    const input = new Float32Array(this.pending.length + chunk.length);
    input.set(this.pending);
    input.set(chunk, this.pending.length);
    const step = this.inputRate;
    const scale = this.outputRate;
    const out: number[] = [];
    let position = this.position;
    if (step >= scale) {
      // Each output sample averages the inputs its period covers.
      while (position + step <= input.length * scale) {
        const from = Math.floor(position / scale);
        const to = Math.max(from + 1, Math.floor((position + step) / scale));
        let sum = 0;
        for (let index = from; index < to; index += 1) {
          sum += input[index] ?? 0;
        }
        out.push(sum / (to - from));
        position += step;
      }
    } else {
      // Each output sample lies between two inputs; the second must have arrived.
      while (Math.floor(position / scale) + 1 < input.length) {
        const from = Math.floor(position / scale);
        const fraction = (position - from * scale) / scale;
        const a = input[from] ?? 0;
        const b = input[from + 1] ?? 0;
        out.push(a + (b - a) * fraction);
        position += step;
      }
    }
    const keepFrom = Math.min(Math.floor(position / scale), input.length);
    this.pending = input.slice(keepFrom);
    this.position = position - keepFrom * scale;
    return Float32Array.from(out);
  }

  /** Forgets the carried input (after a pause in capture, so old audio does not leak in). */
  reset(): void {
    this.pending = new Float32Array(0);
    this.position = 0;
  }
}
