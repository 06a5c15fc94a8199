// Playback of the agent's reply: `response.audio.delta` pieces scheduled back to back on an
// AudioContext, with a record of what of each reply item was actually played, so a barge-in
// can tell the server how much the caller heard.

import { decodePcm16Base64, pcm16ToFloat, VOICE_SAMPLE_RATE } from "./pcm.js";

/** How far ahead of the context's clock a piece starts when nothing is queued (seconds). */
const START_LEAD_SECONDS = 0.03;

/** The clock a player schedules on: an AudioContext, or anything with its few members. */
export interface PlaybackContext {
  readonly currentTime: number;
  readonly sampleRate: number;
  readonly destination: AudioNode;
  /** The output's delay after `currentTime`, when the engine reports it (seconds). */
  readonly outputLatency?: number;
  createBuffer(channels: number, length: number, sampleRate: number): AudioBuffer;
  createBufferSource(): AudioBufferSourceNode;
}

interface ScheduledPiece {
  itemId: string;
  responseId: string | undefined;
  /** Context time at which it starts and ends (seconds). */
  start: number;
  end: number;
  source: AudioBufferSourceNode | undefined;
}

/** What was playing when playback stopped. */
export interface StoppedPlayback {
  itemId: string;
  responseId: string | undefined;
  /** Milliseconds of the item played before the stop. */
  playedMs: number;
  /** Milliseconds of the item received. */
  receivedMs: number;
}

/** Plays pcm16 24 kHz pieces gap-free and tracks what of each item was played. */
export class Pcm16Player {
  private readonly context: PlaybackContext;
  private readonly destination: AudioNode;
  /** When the last scheduled piece ends (context seconds). */
  private queueEnd = 0;
  /** Pieces not yet known to have ended, in order. */
  private pieces: ScheduledPiece[] = [];
  /** Per item: milliseconds of pieces that ended, and milliseconds received. */
  private readonly items = new Map<string, { playedMs: number; receivedMs: number; responseId?: string }>();
  /** Items stopped by a barge-in: their late pieces are dropped. */
  private readonly silenced = new Set<string>();

  constructor(context: PlaybackContext, destination?: AudioNode) {
    this.context = context;
    this.destination = destination ?? context.destination;
  }

  /**
   * Queues one base64 pcm16 piece of `itemId` right after what is queued (or shortly after
   * now when the queue ran dry). Pieces of a silenced item are dropped. Returns the piece's
   * duration in milliseconds (0 when dropped).
   */
  enqueue(itemId: string, base64Audio: string, responseId?: string): number {
    if (this.silenced.has(itemId)) {
      return 0;
    }
    const samples = pcm16ToFloat(decodePcm16Base64(base64Audio));
    if (samples.length === 0) {
      return 0;
    }
    const durationSeconds = samples.length / VOICE_SAMPLE_RATE;
    const now = this.context.currentTime;
    const start = Math.max(this.queueEnd, now + START_LEAD_SECONDS);
    const buffer = this.context.createBuffer(1, samples.length, VOICE_SAMPLE_RATE);
    buffer.getChannelData(0).set(samples);
    const source = this.context.createBufferSource();
    source.buffer = buffer;
    source.connect(this.destination);
    source.start(start);
    this.queueEnd = start + durationSeconds;
    const piece: ScheduledPiece = { itemId, responseId, start, end: this.queueEnd, source };
    source.onended = () => {
      source.disconnect();
      piece.source = undefined;
    };
    this.pieces.push(piece);
    const item = this.items.get(itemId) ?? { playedMs: 0, receivedMs: 0 };
    item.receivedMs += durationSeconds * 1000;
    if (responseId !== undefined) {
      item.responseId = responseId;
    }
    this.items.set(itemId, item);
    this.settle();
    return durationSeconds * 1000;
  }

  /** Whether audio is playing or queued now. */
  get playing(): boolean {
    return this.queueEnd > this.heardTime();
  }

  /** The item whose audio plays now, or the next one queued; undefined when silent. */
  currentItem(): { itemId: string; responseId: string | undefined } | undefined {
    this.settle();
    const piece = this.pieces[0];
    return piece === undefined ? undefined : { itemId: piece.itemId, responseId: piece.responseId };
  }

  /** Milliseconds of `itemId` the caller has heard so far. */
  playedMs(itemId: string): number {
    this.settle();
    const now = this.heardTime();
    let played = this.items.get(itemId)?.playedMs ?? 0;
    for (const piece of this.pieces) {
      if (piece.itemId === itemId && now > piece.start) {
        played += (Math.min(now, piece.end) - piece.start) * 1000;
      }
    }
    return Math.round(played);
  }

  /** Milliseconds of `itemId` received so far. */
  receivedMs(itemId: string): number {
    return Math.round(this.items.get(itemId)?.receivedMs ?? 0);
  }

  /**
   * Stops all playback at once. Returns what was playing (the item heard last, or the next
   * queued when none had started), or undefined when nothing was. With `silence`, the
   * stopped items' later pieces are dropped (a barge-in); without, they play when they come.
   */
  stop(options: { silence?: boolean } = {}): StoppedPlayback | undefined {
    this.settle();
    const now = this.heardTime();
    const started = this.pieces.filter((piece) => piece.start < now);
    const current = started[started.length - 1] ?? this.pieces[0];
    const result: StoppedPlayback | undefined =
      current === undefined
        ? undefined
        : {
            itemId: current.itemId,
            responseId: current.responseId,
            playedMs: this.playedMs(current.itemId),
            receivedMs: this.receivedMs(current.itemId),
          };
    for (const piece of this.pieces) {
      if (options.silence === true) {
        this.silenced.add(piece.itemId);
      }
      const item = this.items.get(piece.itemId);
      if (item !== undefined && now > piece.start) {
        item.playedMs += (Math.min(now, piece.end) - piece.start) * 1000;
      }
      try {
        piece.source?.stop();
      } catch {
        // A source that never started or already ended has nothing to stop.
      }
      piece.source?.disconnect();
    }
    this.pieces = [];
    this.queueEnd = 0;
    return result;
  }

  /** Forgets an item (after its reply is done and settled). */
  forget(itemId: string): void {
    this.items.delete(itemId);
    this.silenced.delete(itemId);
  }

  /** The context time the caller hears now: the clock minus the output's latency. */
  private heardTime(): number {
    const latency = this.context.outputLatency;
    const now = this.context.currentTime;
    return typeof latency === "number" && Number.isFinite(latency) && latency > 0 ? Math.max(0, now - latency) : now;
  }

  /** Moves pieces that have ended into their item's played total. */
  private settle(): void {
    const now = this.heardTime();
    while (this.pieces.length > 0 && (this.pieces[0]?.end ?? Infinity) <= now) {
      const piece = this.pieces.shift() as ScheduledPiece;
      const item = this.items.get(piece.itemId);
      if (item !== undefined) {
        item.playedMs += (piece.end - piece.start) * 1000;
      }
    }
  }
}
