#!/usr/bin/env node
// Records real event logs from the daemon into test/fixtures/*.json, for the chat reducer's
// tests. Run with `npm run record-fixtures` (it builds the client first); the daemon is
// `$CAIRN_BIN`, else the workspace's target/debug/cairn. It starts its own `cairn serve` on
// a free port with a fresh data directory and the bundled demo agent, talks through
// @cairn/client, and writes each conversation's whole log.
//
// The voice log needs speech to text: a stand-in for a paid transcription API (the
// OpenAI-compatible `/v1/audio/transcriptions`) answers with the words the script "said";
// replies are spoken by the daemon's real synthesis (espeak-ng) and cut over a real socket.

import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createServiceClient } from "../dist/index.js";

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = resolve(here, "../../..");
const fixtures = resolve(here, "../test/fixtures");

if (typeof WebSocket !== "function") {
  throw new Error("run with `node --experimental-websocket` on Node 20 (npm run record-fixtures does)");
}

const binary = process.env.CAIRN_BIN || join(repoRoot, "target/debug/cairn");
if (!existsSync(binary)) {
  throw new Error(`no cairn binary at ${binary}: build it (cargo build -p cairn-cli) or set CAIRN_BIN`);
}
if (spawnSync("espeak-ng", ["--version"]).status !== 0) {
  throw new Error("the voice log needs espeak-ng (apt-get install espeak-ng) for the daemon's speech");
}

// The stand-in transcriber: each request gets the next transcript.
const transcripts = [];
const transcriber = createServer((request, response) => {
  request.resume();
  request.on("end", () => {
    response.writeHead(200, { "content-type": "application/json" });
    response.end(JSON.stringify({ text: transcripts.shift() ?? "" }));
  });
});
await new Promise((done) => transcriber.listen(0, "127.0.0.1", done));
const transcriberUrl = `http://127.0.0.1:${transcriber.address().port}`;

const dataDir = mkdtempSync(join(tmpdir(), "cairn-fixtures-"));
const daemon = spawn(
  binary,
  [
    "serve", "--port", "0", "--data-dir", dataDir, "--profile", "solo", "--embedder", "none",
    "--rate-limit-read", "0", "--rate-limit-write", "0", "--rate-limit-context", "0",
    "--transcription-url", transcriberUrl,
  ],
  { stdio: ["ignore", "pipe", "pipe"], env: withoutServiceSettings() },
);
const url = await new Promise((done, fail) => {
  let output = "";
  const onData = (chunk) => {
    output += chunk;
    const match = /listening on (http:\/\/\S+)/.exec(output);
    if (match) done(match[1]);
  };
  daemon.stdout.on("data", onData);
  daemon.stderr.on("data", onData);
  daemon.once("exit", (code) => fail(new Error(`cairn serve exited with ${code}:\n${output}`)));
});

try {
  const client = createServiceClient({ baseUrl: `${url}/api/runtime` });
  mkdirSync(fixtures, { recursive: true });

  await record(client, "book-demo", "Greeting, booking a demo with the form widget, and thanks (text chat).", async () => {
    const { conversation } = await client.createConversation({ channel: "web" });
    await client.sendMessage(conversation.id, "hello");
    const booking = await client.sendMessage(conversation.id, "I'd like to book a demo");
    const prompt = booking.events.find((event) => event.type === "prompt.opened");
    await client.submitWidget(conversation.id, {
      promptId: prompt.data.promptId,
      widgetKind: "form",
      output: { name: "Ada Lovelace", email: "ada@example.com" },
    });
    await client.sendMessage(conversation.id, "thanks!");
    return conversation.id;
  });

  await record(client, "feedback", "A journey event opens the rating widget; a preamble and an intermediate note; the comment is captured.", async () => {
    const { conversation } = await client.createConversation({ channel: "web" });
    const started = await client.emitJourneyEvent(conversation.id, "feedback.requested", { payload: { caseId: "case-42" } });
    const prompt = started.events.find((event) => event.type === "prompt.opened");
    await client.submitWidget(conversation.id, { promptId: prompt.data.promptId, widgetKind: "rating", output: { value: 4 } });
    await client.emitGeneratedPreamble(conversation.id, { purpose: "note your comment" });
    await client.emitIntermediateMessage(conversation.id, { text: "Saving your feedback…" });
    await client.sendMessage(conversation.id, "Faster replies would be great");
    return conversation.id;
  });

  await record(client, "handoff", "The user asks for a person (handoff), writes while handed off, is resumed and the conversation closed.", async () => {
    const { conversation } = await client.createConversation({ channel: "web" });
    await client.sendMessage(conversation.id, "Can I talk to a human please?");
    await client.sendMessage(conversation.id, "Hello? Anyone there?");
    await client.resumeConversation(conversation.id, { reason: "the operator answered by phone" });
    await client.sendMessage(conversation.id, "thanks");
    await client.closeConversation(conversation.id, { reason: "solved" });
    return conversation.id;
  });

  await record(client, "memory-answer", "A question answered from memory, with support references and source links.", async () => {
    for (const memory of [
      { content: "Refunds are issued within 14 days of a return being received.", metadata: { title: "Refund policy", url: "https://example.com/help/refunds" } },
      { content: "Refunds for annual plans are prorated by the month.", metadata: { title: "Refunds for annual plans", url: "https://example.com/help/refunds" } },
      { content: "Refunds go back to the card that paid; allow 5 business days for the bank.", metadata: { title: "Refund timing" } },
    ]) {
      const response = await fetch(`${url}/api/memories`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...memory, scope: "global", tags: ["concierge"] }),
      });
      if (!response.ok) throw new Error(`storing a memory failed: ${response.status} ${await response.text()}`);
    }
    const { conversation } = await client.createConversation({ channel: "web" });
    await client.sendMessage(conversation.id, "How do refunds work?");
    return conversation.id;
  });

  await record(client, "voice-barge-in", "A voice call: the caller speaks over the first reply (response.cancel), hears the second to its end and then truncates it (message.truncated).", async () => {
    const started = await client.startVoiceConversation({ client: { name: "record-fixtures" } });
    const socket = await voiceSocket(started.socket.url);
    socket.send({ type: "session.update", session: { turn_detection: null } });
    await socket.until("session.updated");

    // First turn: cut the reply as soon as its audio starts.
    transcripts.push("hello");
    speak(socket);
    const firstAudio = await socket.until("response.audio.delta");
    socket.send({ type: "response.cancel", playedUntilMs: 600, interruptedMessageId: firstAudio.item_id });
    const cancelled = await socket.until("response.done");
    if (cancelled.response.status !== "cancelled") throw new Error(`the reply was not cancelled: ${JSON.stringify(cancelled)}`);

    // Second turn: heard to the end, then truncated after the fact.
    transcripts.push("I'd like to book a demo");
    speak(socket);
    const secondAudio = await socket.until("response.audio.delta");
    await socket.until("response.done");
    socket.send({ type: "conversation.item.truncate", item_id: secondAudio.item_id, content_index: 0, audio_end_ms: 900 });
    await socket.until("conversation.item.truncated");
    await socket.close();
    // The segment's end is appended when the daemon sees the close.
    await waitForEvent(client, started.conversation.id, "voice.segment.ended");
    return started.conversation.id;
  });
} finally {
  daemon.kill("SIGTERM");
  await new Promise((done) => daemon.once("exit", done));
  transcriber.close();
  rmSync(dataDir, { recursive: true, force: true });
}

async function record(client, name, description, run) {
  const conversationId = await run();
  const { events } = await client.listEvents(conversationId);
  const file = join(fixtures, `${name}.json`);
  writeFileSync(file, `${JSON.stringify({ description, recordedWith: "cairn serve with the bundled concierge agent, no language model", events }, null, 2)}\n`);
  console.log(`recorded ${events.length} events into ${file}`);
}

/** Half a second of a 440 Hz tone (pcm16, 24 kHz), committed as a turn. */
function speak(socket) {
  const samples = new Int16Array(12_000);
  for (let index = 0; index < samples.length; index++) {
    samples[index] = Math.round(8000 * Math.sin((2 * Math.PI * 440 * index) / 24_000));
  }
  socket.send({ type: "input_audio_buffer.append", audio: Buffer.from(samples.buffer).toString("base64") });
  socket.send({ type: "input_audio_buffer.commit" });
}

async function voiceSocket(socketUrl) {
  const socket = new WebSocket(socketUrl, "service.voice.v1");
  const received = [];
  let wake = () => {};
  socket.addEventListener("message", (message) => {
    received.push(JSON.parse(String(message.data)));
    wake();
  });
  await new Promise((done, fail) => {
    socket.addEventListener("open", done, { once: true });
    socket.addEventListener("error", () => fail(new Error("the voice socket did not open")), { once: true });
  });
  return {
    send: (event) => socket.send(JSON.stringify(event)),
    async until(type) {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const index = received.findIndex((event) => event.type === type || event.type === "error");
        if (index >= 0) {
          const [event] = received.splice(0, index + 1).slice(-1);
          if (event.type === "error" && type !== "error") throw new Error(`voice error: ${JSON.stringify(event)}`);
          return event;
        }
        if (Date.now() > deadline) throw new Error(`no ${type} on the voice socket`);
        await new Promise((done) => {
          wake = done;
          setTimeout(done, 200);
        });
      }
    },
    close: () =>
      new Promise((done) => {
        socket.addEventListener("close", done, { once: true });
        socket.close(1000, "done");
      }),
  };
}

async function waitForEvent(client, conversationId, type) {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    const { events } = await client.listEvents(conversationId);
    if (events.some((event) => event.type === type)) return;
    await new Promise((done) => setTimeout(done, 50));
  }
  throw new Error(`no ${type} in ${conversationId}`);
}

function withoutServiceSettings() {
  const env = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (!name.startsWith("SERVICE_") && !name.startsWith("CAIRN_")) env[name] = value;
  }
  return env;
}
