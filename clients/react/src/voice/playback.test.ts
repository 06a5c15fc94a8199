// The player's scheduling and accounting on a clock the test moves. The AudioContext is a
// stand-in for the browser's (Node has none); the browser tests play through the real one.

import { describe, expect, it } from "vitest";

import { encodePcm16Base64 } from "./pcm.js";
import { Pcm16Player, type PlaybackContext } from "./playback.js";

interface Source {
  startedAt?: number;
  stoppedAt?: number;
  connected: boolean;
  buffer: { length: number } | null;
}

function clock() {
  const sources: Source[] = [];
  const context = {
    currentTime: 0,
    sampleRate: 48_000,
    destination: {} as AudioNode,
    createBuffer: (_channels: number, length: number) => ({ length, getChannelData: () => new Float32Array(length) }) as unknown as AudioBuffer,
    createBufferSource: () => {
      const source: Source & Record<string, unknown> = {
        connected: false,
        buffer: null,
        connect() {
          source.connected = true;
        },
        disconnect() {
          source.connected = false;
        },
        start(at: number) {
          source.startedAt = at;
        },
        stop() {
          source.stoppedAt = context.currentTime;
        },
        onended: null,
      };
      sources.push(source);
      return source as unknown as AudioBufferSourceNode;
    },
  };
  return { context: context as PlaybackContext & { currentTime: number }, sources };
}

/** `ms` of silence as a base64 pcm16 24 kHz piece. */
const piece = (ms: number) => encodePcm16Base64(new Int16Array(ms * 24));

describe("Pcm16Player", () => {
  it("schedules pieces back to back and counts what was played of each item", () => {
    const { context, sources } = clock();
    const player = new Pcm16Player(context);
    expect(player.enqueue("msg_1", piece(100), "resp_1")).toBe(100);
    player.enqueue("msg_1", piece(100), "resp_1");
    player.enqueue("msg_1", piece(100), "resp_1");
    const starts = sources.map((source) => source.startedAt ?? NaN);
    expect(starts[1]! - starts[0]!).toBeCloseTo(0.1, 9);
    expect(starts[2]! - starts[1]!).toBeCloseTo(0.1, 9);

    context.currentTime = starts[0]! + 0.15;
    expect(player.playing).toBe(true);
    expect(player.playedMs("msg_1")).toBe(150);
    expect(player.receivedMs("msg_1")).toBe(300);
    expect(player.currentItem()).toEqual({ itemId: "msg_1", responseId: "resp_1" });

    context.currentTime = starts[0]! + 1;
    expect(player.playing).toBe(false);
    expect(player.playedMs("msg_1")).toBe(300);
    expect(player.currentItem()).toBeUndefined();
  });

  it("starts again shortly after now when the queue ran dry, and does not count the gap", () => {
    const { context, sources } = clock();
    const player = new Pcm16Player(context);
    player.enqueue("msg_1", piece(100));
    context.currentTime = 2;
    player.enqueue("msg_1", piece(100));
    expect(sources[1]!.startedAt).toBeGreaterThan(2);
    expect(sources[1]!.startedAt).toBeLessThan(2.1);
    context.currentTime = sources[1]!.startedAt! + 0.05;
    expect(player.playedMs("msg_1")).toBe(150);
  });

  it("stops at once on a barge-in, says what was heard, and drops the item's late pieces", () => {
    const { context, sources } = clock();
    const player = new Pcm16Player(context);
    player.enqueue("msg_1", piece(200), "resp_1");
    player.enqueue("msg_1", piece(200), "resp_1");
    context.currentTime = sources[0]!.startedAt! + 0.25;
    expect(player.stop({ silence: true })).toEqual({ itemId: "msg_1", responseId: "resp_1", playedMs: 250, receivedMs: 400 });
    // The piece playing now is stopped and disconnected (the first one had ended).
    expect(sources[1]).toMatchObject({ stoppedAt: context.currentTime, connected: false });
    expect(player.playing).toBe(false);
    expect(player.enqueue("msg_1", piece(100), "resp_1")).toBe(0);
    expect(player.playedMs("msg_1")).toBe(250);
    // The next reply plays.
    expect(player.enqueue("msg_2", piece(100), "resp_2")).toBe(100);
    expect(player.playing).toBe(true);
  });

  it("subtracts the output's latency from what the caller heard", () => {
    const { context, sources } = clock();
    const latency = Object.assign(context, { outputLatency: 0.05 });
    const player = new Pcm16Player(latency);
    player.enqueue("msg_1", piece(200));
    latency.currentTime = sources[0]!.startedAt! + 0.15;
    expect(player.playedMs("msg_1")).toBe(100);
  });
});
