// The voice hook in a real browser (Debian's Chromium, driven by Playwright) against a real
// daemon with speech: espeak-ng's voice is the fake microphone, Whisper tiny.en hears it, the
// concierge answers, espeak-ng speaks the answer back.

import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { createServiceClient, type RuntimeEvent } from "@cairn/client";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { afterEach, describe, expect, inject, it } from "vitest";

import { speechWav as makeSpeech } from "./speech.js";
import type { Recorded } from "./page/recorded.js";

const client = createServiceClient({ baseUrl: `${inject("voiceDaemonUrl")}/api/runtime`, fetch });
const WAIT = { timeout: 90_000 };

let open: { browser: BrowserContext; profile: string } | undefined;
const speechDirs: string[] = [];

afterEach(async () => {
  if (open !== undefined) {
    await open.browser.close();
    rmSync(open.profile, { recursive: true, force: true });
    open = undefined;
  }
  for (const dir of speechDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A speech WAV for the fake microphone, removed after the test. */
function speechWav(text: string, leadingMs: number, trailingMs: number) {
  const speech = makeSpeech(text, leadingMs, trailingMs);
  speechDirs.push(speech.dir);
  return speech;
}

/** Chromium with a fresh profile whose microphone plays `wav` (looped unless `loop` is false). */
async function launch(wav: string, loop: boolean, grantMicrophone = true): Promise<BrowserContext> {
  const profile = mkdtempSync(join(tmpdir(), "cairn-react-chromium-"));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: inject("chromiumPath"),
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      // Answers the permission prompt with "allow"; without it the prompt is refused.
      ...(grantMicrophone ? ["--use-fake-ui-for-media-stream"] : []),
      "--use-fake-device-for-media-stream",
      `--use-file-for-fake-audio-capture=${wav}${loop ? "" : "%noloop"}`,
      "--autoplay-policy=no-user-gesture-required",
    ],
  });
  open = { browser, profile };
  return browser;
}

async function openPage(browser: BrowserContext, query: Record<string, string>): Promise<Page> {
  const page = await browser.newPage();
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(message.text());
  });
  const search = new URLSearchParams({ daemon: inject("voiceDaemonUrl"), ...query });
  await page.goto(`${inject("pageUrl")}?${search}`);
  await page.getByRole("button", { name: "Start talking" }).waitFor();
  return page;
}

const recorded = (page: Page) => page.evaluate(() => (window as unknown as { voiceTest: Recorded }).voiceTest);

async function waitForEvent(page: Page, type: string, timeout = 90_000): Promise<Record<string, any>> {
  const handle = await page.waitForFunction(
    (wanted) => (window as unknown as { voiceTest: Recorded }).voiceTest.events.find((event) => event.type === wanted),
    type,
    { timeout, polling: 100 },
  );
  return (await handle.jsonValue()) as Record<string, any>;
}

async function events(conversationId: string): Promise<RuntimeEvent[]> {
  return (await client.listEvents(conversationId)).events;
}

describe("useServiceVoice in Chromium", () => {
  it("sends the microphone, the daemon hears the caller, and the reply's audio plays", async () => {
    const speech = speechWav("I would like to book a demo.", 700, 8000);
    const page = await openPage(await launch(speech.path, false), {});
    await page.getByRole("button", { name: "Start talking" }).click();
    await page.getByTestId("status").filter({ hasText: /^connected$/ }).waitFor(WAIT);

    const created = await waitForEvent(page, "session.created");
    expect(created.session.input_audio_format).toBe("pcm16");
    const transcribed = await waitForEvent(page, "conversation.item.input_audio_transcription.completed");
    expect(String(transcribed.transcript).toLowerCase()).toContain("demo");
    const firstAudio = await waitForEvent(page, "response.audio.delta");
    expect(firstAudio.deltaLength).toBeGreaterThan(1000);
    const done = await waitForEvent(page, "response.done");
    expect(done.response.status).toBe("completed");

    const state = await recorded(page);
    expect(state.statuses).toEqual(["idle", "requestingPermission", "connecting", "connected"]);
    expect(state.errors).toEqual([]);
    expect(state.created).toHaveLength(1);
    const conversationId = state.created[0]!;
    expect(state.connected).toBe(conversationId);
    expect(state.startResult).toBe(conversationId);
    // What the page sent: 24 kHz pcm16 appends, in order.
    const appends = state.sent.filter((sent) => sent.type === "input_audio_buffer.append");
    expect(appends[0]).toMatchObject({ sequence: 1, bytes: 1920 });
    expect(appends[1]).toMatchObject({ sequence: 2 });
    const audio = state.events.filter((event) => event.type === "response.audio.delta");
    expect(audio.length).toBeGreaterThan(5);

    // The conversation's log: the caller's words as a voice turn, the agent's answer, heard whole.
    const log = await events(conversationId);
    const messages = log.filter((event) => event.type === "message").map((event) => event.data as Record<string, any>);
    expect(messages[0]).toMatchObject({ role: "user", nature: "voice-turn", channel: "voice" });
    expect(String(messages[0]!.text).toLowerCase()).toContain("demo");
    // On a call nobody can fill a form: the agent asks for the details in words.
    expect(messages[1]).toMatchObject({
      role: "assistant",
      text: "Happy to set that up. Where can we reach you?\n\nPlease tell me your name, and an e-mail address or phone number.",
    });
    expect(messages[1]!.aborted).not.toBe(true);
    expect(log.some((event) => event.type === "prompt.opened")).toBe(false);

    // Stop: the socket closes, the segment ends, the microphone is released.
    await page.getByRole("button", { name: "Stop" }).click();
    await page.getByTestId("status").filter({ hasText: /^ended$/ }).waitFor(WAIT);
    expect(await page.getByTestId("stream").textContent()).toBe("no stream");
    expect((await recorded(page)).ended).toBe(true);
    await expect.poll(async () => (await events(conversationId)).some((event) => event.type === "voice.segment.ended"), WAIT).toBe(true);

    // Starting again continues the same conversation with a new segment.
    await page.getByRole("button", { name: "Start talking" }).click();
    await page.getByTestId("status").filter({ hasText: /^connected$/ }).waitFor(WAIT);
    const again = await recorded(page);
    expect(again.created).toHaveLength(1);
    expect(again.startResult).toBe(conversationId);
    const segments = (await events(conversationId)).filter((event) => event.type === "voice.segment.started");
    expect(segments).toHaveLength(2);
  });

  it("stops the reply when the caller speaks over it and tells the daemon what was heard", async () => {
    // The question loops: muted while the agent prepares its answer, unmuted once the answer
    // plays, the next loop of the question speaks over it.
    const speech = speechWav("What are your opening hours?", 300, 1000);
    const page = await openPage(await launch(speech.path, true), { scenario: "barge-in" });
    await page.getByRole("button", { name: "Start talking" }).click();
    await page.getByTestId("status").filter({ hasText: /^connected$/ }).waitFor(WAIT);

    // The server cuts the reply once the caller has spoken over it for
    // `interrupt_min_speech_ms` (600 ms: more than a backchannel); the page then stops
    // playback and truncates the reply where playback really stopped.
    const truncate = await page.waitForFunction(
      () => (window as unknown as { voiceTest: Recorded }).voiceTest.sent.find((sent) => sent.type === "conversation.item.truncate"),
      undefined,
      { timeout: 120_000, polling: 100 },
    );
    const truncateEvent = (await truncate.jsonValue()) as Record<string, any>;
    expect(truncateEvent.audio_end_ms).toBeGreaterThan(0);
    const state = await recorded(page);
    const created = state.events.find((event) => event.type === "session.created");
    expect(created?.session.turn_detection.interrupt_min_speech_ms).toBe(600);
    const done = state.events.find(
      (event) => event.type === "response.done" && event.response.output?.[0]?.id === truncateEvent.item_id,
    );
    expect(done?.response.status).toBe("cancelled");
    expect(done?.response.status_details.reason).toBe("turn_detected");
    // Speech started over the reply before the cut, and the cut waited for it to last.
    const started = state.events.filter((event) => event.type === "input_audio_buffer.speech_started" && event.at <= done!.at);
    expect(started.length).toBeGreaterThanOrEqual(2);
    expect(done!.at - started.at(-1)!.at, JSON.stringify({ done, started })).toBeGreaterThanOrEqual(400);

    const conversationId = state.created[0]!;
    await expect
      .poll(async () => (await events(conversationId)).find((event) => event.type === "message.truncated" && event.data.messageId === truncateEvent.item_id), WAIT)
      .toBeDefined();
    const log = await events(conversationId);
    const reply = log.find((event) => event.type === "message" && event.data.messageId === truncateEvent.item_id)!;
    expect(reply.data).toMatchObject({ role: "assistant", aborted: true });
    const truncated = log.find((event) => event.type === "message.truncated" && event.data.messageId === truncateEvent.item_id)!;
    expect(truncated.data.heardMs).toBe(Math.min(truncateEvent.audio_end_ms, Number(truncated.data.audioMs)));
    expect(Number(truncated.data.heardMs)).toBeLessThan(Number(truncated.data.audioMs));
    const replay = await client.replayConversation(conversationId);
    const replayed = replay.messages.find((message) => message.id === truncateEvent.item_id)!;
    expect(replayed.aborted).toBe(true);
    expect(replayed.text.length).toBeLessThan(String((reply.data as Record<string, unknown>).text ?? "").length + 1);
    expect(replayed.text).toBe(truncated.data.text);

    await page.getByRole("button", { name: "Stop" }).click();
    await page.getByTestId("status").filter({ hasText: /^ended$/ }).waitFor(WAIT);
  });

  it("puts a refused start in error and status", async () => {
    const { conversation } = await client.createConversation({});
    await client.closeConversation(conversation.id);
    const speech = speechWav("Hello.", 100, 500);
    const page = await openPage(await launch(speech.path, false), { conversationId: conversation.id });
    await page.getByRole("button", { name: "Start talking" }).click();
    await page.getByTestId("status").filter({ hasText: /^error$/ }).waitFor(WAIT);
    const alert = await page.getByRole("alert").textContent();
    expect(alert).toMatch(/closed/i);
    const state = await recorded(page);
    expect(state.startError).toBe(alert);
    expect(state.errors).toEqual([alert]);
    expect(await page.getByTestId("stream").textContent()).toBe("no stream");
  });

  it("puts a refused microphone in error, and starts no conversation", async () => {
    const speech = speechWav("Hello.", 100, 500);
    const page = await openPage(await launch(speech.path, false, false), {});
    const before = (await client.listConversations({ limit: 200 })).conversations.length;
    await page.getByRole("button", { name: "Start talking" }).click();
    await page.getByTestId("status").filter({ hasText: /^error$/ }).waitFor(WAIT);
    const state = await recorded(page);
    expect(state.statuses).toEqual(["idle", "requestingPermission", "error"]);
    expect(state.startError).toMatch(/permission/i);
    expect(state.created).toEqual([]);
    expect((await client.listConversations({ limit: 200 })).conversations.length).toBe(before);
  });
});
