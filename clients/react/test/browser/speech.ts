// Real speech for the fake microphone: espeak-ng's voice, resampled to 48 kHz mono pcm16
// and framed by silence, written as a WAV file Chromium plays as the capture device.

import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const RATE = 48_000;

/** Reads the samples and rate of a mono pcm16 WAV file. */
function readWav(path: string): { rate: number; samples: Int16Array } {
  const bytes = readFileSync(path);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let offset = 12;
  let rate = 0;
  while (offset + 8 <= bytes.length) {
    const id = bytes.toString("ascii", offset, offset + 4);
    let size = view.getUint32(offset + 4, true);
    const body = offset + 8;
    if (id === "fmt ") {
      rate = view.getUint32(body + 4, true);
    } else if (id === "data") {
      // espeak-ng writing to a pipe leaves the size unknown; take the rest of the file.
      size = Math.min(size, bytes.length - body);
      const samples = new Int16Array(size / 2);
      for (let index = 0; index < samples.length; index += 1) samples[index] = view.getInt16(body + index * 2, true);
      return { rate, samples };
    }
    offset = body + size + (size % 2);
  }
  throw new Error(`${path}: no data chunk`);
}

function writeWav(path: string, samples: Int16Array): void {
  const bytes = Buffer.alloc(44 + samples.length * 2);
  bytes.write("RIFF", 0, "ascii");
  bytes.writeUInt32LE(36 + samples.length * 2, 4);
  bytes.write("WAVE", 8, "ascii");
  bytes.write("fmt ", 12, "ascii");
  bytes.writeUInt32LE(16, 16);
  bytes.writeUInt16LE(1, 20); // PCM
  bytes.writeUInt16LE(1, 22); // mono
  bytes.writeUInt32LE(RATE, 24);
  bytes.writeUInt32LE(RATE * 2, 28);
  bytes.writeUInt16LE(2, 32);
  bytes.writeUInt16LE(16, 34);
  bytes.write("data", 36, "ascii");
  bytes.writeUInt32LE(samples.length * 2, 40);
  samples.forEach((sample, index) => bytes.writeInt16LE(sample, 44 + index * 2));
  writeFileSync(path, bytes);
}

/** Linear interpolation from `from` Hz to 48 kHz (espeak-ng speaks at 22.05 kHz). */
function to48k(samples: Int16Array, from: number): Int16Array {
  const length = Math.floor((samples.length * RATE) / from);
  const out = new Int16Array(length);
  for (let index = 0; index < length; index += 1) {
    const position = (index * from) / RATE;
    const left = Math.floor(position);
    const a = samples[left] ?? 0;
    const b = samples[left + 1] ?? a;
    out[index] = Math.round(a + (b - a) * (position - left));
  }
  return out;
}

/**
 * Writes `text` spoken by espeak-ng, with `leadingMs` of silence before and `trailingMs`
 * after, to a fresh 48 kHz WAV file; returns its path and how long the speech lasts.
 */
export function speechWav(text: string, leadingMs: number, trailingMs: number): { path: string; dir: string; speechMs: number } {
  const dir = mkdtempSync(join(tmpdir(), "cairn-react-speech-"));
  const raw = join(dir, "espeak.wav");
  execFileSync("espeak-ng", ["-w", raw, text]);
  const { rate, samples } = readWav(raw);
  const speech = to48k(samples, rate);
  const lead = Math.round((leadingMs * RATE) / 1000);
  const trail = Math.round((trailingMs * RATE) / 1000);
  const all = new Int16Array(lead + speech.length + trail);
  all.set(speech, lead);
  const path = join(dir, "speech.wav");
  writeWav(path, all);
  return { path, dir, speechMs: Math.round((speech.length * 1000) / RATE) };
}
