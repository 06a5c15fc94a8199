import { describe, expect, it } from "vitest";

import { decodePcm16Base64, encodePcm16Base64, floatToPcm16, pcm16ToFloat, StreamResampler } from "./pcm.js";

function sine(frequency: number, rate: number, seconds: number): Float32Array {
  return Float32Array.from({ length: Math.round(rate * seconds) }, (_, index) => 0.5 * Math.sin((2 * Math.PI * frequency * index) / rate));
}

/** Upward zero crossings per second: the frequency of a clean tone. */
function frequencyOf(samples: Float32Array, rate: number): number {
  let crossings = 0;
  for (let index = 1; index < samples.length; index += 1) {
    if ((samples[index - 1] ?? 0) < 0 && (samples[index] ?? 0) >= 0) crossings += 1;
  }
  return crossings / (samples.length / rate);
}

describe("pcm16 over the socket", () => {
  it("is little-endian base64, whatever the platform", () => {
    // 1 → 01 00, -2 → fe ff, 0x1234 → 34 12
    expect(encodePcm16Base64(Int16Array.from([1, -2, 0x1234]))).toBe(btoa("\x01\x00\xfe\xff\x34\x12"));
    expect(Array.from(decodePcm16Base64(btoa("\x01\x00\xfe\xff\x34\x12")))).toEqual([1, -2, 0x1234]);
  });

  it("refuses audio with an odd number of bytes", () => {
    expect(() => decodePcm16Base64(btoa("\x01\x00\x02"))).toThrow(/even number of bytes/);
  });

  it("clamps floats outside −1…1 and round-trips full scale", () => {
    expect(Array.from(floatToPcm16(Float32Array.from([2, -2, 1, -1, 0])))).toEqual([32767, -32768, 32767, -32768, 0]);
    expect(Array.from(pcm16ToFloat(Int16Array.from([32767, -32768, 0])))).toEqual([1, -1, 0]);
  });

  it("encodes long audio (more than one slice of bytes)", () => {
    const samples = Int16Array.from({ length: 48_000 }, (_, index) => (index * 7) % 65536 - 32768);
    expect(Array.from(decodePcm16Base64(encodePcm16Base64(samples)))).toEqual(Array.from(samples));
  });
});

describe("StreamResampler", () => {
  for (const inputRate of [48_000, 44_100, 16_000]) {
    it(`brings ${inputRate} Hz to 24 kHz, keeping a tone's pitch and the stream's length`, () => {
      const input = sine(440, inputRate, 1);
      const resampler = new StreamResampler(inputRate, 24_000);
      const output = resampler.push(input);
      expect(Math.abs(output.length - 24_000)).toBeLessThanOrEqual(2);
      expect(frequencyOf(output, 24_000)).toBeCloseTo(440, -1);
    });
  }

  it("gives the same samples for a stream in chunks as for the whole", () => {
    const input = sine(300, 44_100, 0.5);
    const whole = new StreamResampler(44_100, 24_000).push(input);
    const chunked = new StreamResampler(44_100, 24_000);
    const parts: number[] = [];
    for (let start = 0; start < input.length; start += 128) {
      parts.push(...chunked.push(input.subarray(start, start + 128)));
    }
    expect(parts.length).toBe(whole.length);
    parts.forEach((sample, index) => expect(sample).toBeCloseTo(whole[index] ?? NaN, 6));
  });

  it("passes equal rates through", () => {
    const input = Float32Array.from([0.1, 0.2, 0.3]);
    expect(Array.from(new StreamResampler(24_000, 24_000).push(input))).toEqual(Array.from(input));
  });
});
