// The console in a real browser: Debian's Chromium (no browser download), against real
// daemons that tests/global-setup.ts starts (solo and production profiles).
import { mkdirSync, writeFileSync } from "node:fs";
import { defineConfig } from "@playwright/test";

/** A second of silence (48 kHz mono pcm16 WAV): the fake microphone of the voice test. */
function silence(path: string): string {
  const samples = 48_000;
  const wav = Buffer.alloc(44 + samples * 2);
  wav.write("RIFF", 0);
  wav.writeUInt32LE(36 + samples * 2, 4);
  wav.write("WAVEfmt ", 8);
  wav.writeUInt32LE(16, 16);
  wav.writeUInt16LE(1, 20); // PCM
  wav.writeUInt16LE(1, 22); // mono
  wav.writeUInt32LE(48_000, 24);
  wav.writeUInt32LE(96_000, 28);
  wav.writeUInt16LE(2, 32);
  wav.writeUInt16LE(16, 34);
  wav.write("data", 36);
  wav.writeUInt32LE(samples * 2, 40);
  mkdirSync("test-results", { recursive: true });
  writeFileSync(path, wav);
  return path;
}

export default defineConfig({
  testDir: "./tests",
  testMatch: "*.spec.ts",
  globalSetup: "./tests/global-setup.ts",
  outputDir: "./test-results/output",
  // Two cores shared with builds: one browser at a time, and generous timeouts.
  workers: 1,
  fullyParallel: false,
  timeout: 60_000,
  expect: { timeout: 10_000 },
  retries: 0,
  reporter: [["list"]],
  use: {
    browserName: "chromium",
    headless: true,
    screenshot: "only-on-failure",
    trace: "off",
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
      // Playwright gives every launch a fresh temporary user-data-dir of its own.
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        // A fake microphone (silent) that needs no permission prompt, for the voice test.
        "--use-fake-device-for-media-stream",
        "--use-fake-ui-for-media-stream",
        `--use-file-for-fake-audio-capture=${silence(`${import.meta.dirname}/test-results/silence.wav`)}`,
        "--autoplay-policy=no-user-gesture-required",
      ],
    },
  },
});
