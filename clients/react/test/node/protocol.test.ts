// The voice protocol client over a real `service.voice.v1` socket of the real daemon
// (Node's side: the `ws` WebSocket; the browser's is exercised by the browser tests).

import { createServiceClient } from "@cairn/client";
import { describe, expect, inject, it } from "vitest";
import WebSocket from "ws";

import {
  createVoiceProtocolClient,
  encodePcm16Base64,
  type VoiceProtocolClient,
  type VoiceServerEvent,
  type WebSocketConstructor,
} from "../../src/index.js";

const client = createServiceClient({ baseUrl: `${inject("cairnUrl")}/api/runtime`, fetch });

interface Recorded {
  protocol: VoiceProtocolClient;
  events: VoiceServerEvent[];
  errors: Error[];
  opened: Promise<void>;
  closed: Promise<CloseEvent>;
  next: (type: string) => Promise<VoiceServerEvent>;
}

function connect(url: string): Recorded {
  const events: VoiceServerEvent[] = [];
  const errors: Error[] = [];
  const waiters: { type: string; resolve: (event: VoiceServerEvent) => void }[] = [];
  let opened!: () => void;
  let closed!: (event: CloseEvent) => void;
  const openedPromise = new Promise<void>((resolve) => (opened = resolve));
  const closedPromise = new Promise<CloseEvent>((resolve) => (closed = resolve));
  const protocol = createVoiceProtocolClient({
    url,
    WebSocket: WebSocket as unknown as WebSocketConstructor,
    onOpen: () => opened(),
    onClose: (event) => closed(event),
    onError: (error) => errors.push(error),
    onEvent: (event) => {
      events.push(event);
      const index = waiters.findIndex((waiter) => waiter.type === event.type);
      if (index >= 0) waiters.splice(index, 1)[0]!.resolve(event);
    },
  });
  const next = (type: string) => {
    const seen = events.find((event) => event.type === type);
    if (seen !== undefined) {
      events.splice(events.indexOf(seen), 1);
      return Promise.resolve(seen);
    }
    return new Promise<VoiceServerEvent>((resolve) => waiters.push({ type, resolve: (event) => {
      events.splice(events.indexOf(event), 1);
      resolve(event);
    } }));
  };
  return { protocol, events, errors, opened: openedPromise, closed: closedPromise, next };
}

describe("createVoiceProtocolClient", () => {
  it("speaks service.voice.v1 with the daemon: session, refused frames, close", async () => {
    const start = await client.startVoiceConversation({});
    expect(start.socket.protocol).toBe("service.voice.v1");
    const socket = connect(start.socket.url);
    // Sent while connecting: queued and sent once the socket opens.
    expect(socket.protocol.sendEvent({ type: "session.update", event_id: "early", session: { turn_detection: null } })).toBe(true);
    await socket.opened;
    expect(socket.protocol.socket.protocol).toBe("service.voice.v1");

    const created = await socket.next("session.created");
    const session = created.session as Record<string, unknown>;
    expect(session.conversation_id).toBe(start.conversation.id);
    expect(session.channel_segment_id).toBe(start.channelSegment.id);
    const updated = await socket.next("session.updated");
    expect((updated.session as Record<string, unknown>).turn_detection).toBeNull();

    // A frame the socket cannot take is answered with an error naming it; the socket stays.
    socket.protocol.sendEvent({ type: "input_audio_buffer.append", audio: "not base64!", event_id: "bad_audio" });
    const refused = await socket.next("error");
    expect((refused.error as Record<string, unknown>).event_id).toBe("bad_audio");

    // Audio is taken (this daemon has no speech model: it says so once, as an error event).
    socket.protocol.sendEvent({ type: "input_audio_buffer.append", audio: encodePcm16Base64(new Int16Array(2400)), event_id: "audio_1" });
    const unavailable = await socket.next("error");
    expect((unavailable.error as Record<string, unknown>).code).toBe("speech_recognition_unavailable");

    socket.protocol.close(1000, "done");
    const closed = await socket.closed;
    expect(closed.code).toBe(1000);
    expect(socket.protocol.sendEvent({ type: "input_audio_buffer.clear" })).toBe(false);
    expect(socket.errors).toEqual([]);
  });

  it("reports a spent token as a failed socket (onError, then onClose 1006)", async () => {
    const start = await client.startVoiceConversation({});
    const first = connect(start.socket.url);
    await first.opened;
    const again = connect(start.socket.url);
    const closed = await again.closed;
    expect(closed.code).toBe(1006);
    expect(again.errors.length).toBeGreaterThan(0);
    expect(again.errors[0]?.name).toBe("VoiceProtocolError");
    first.protocol.close();
    await first.closed;
  });
});
