// One voice session in the browser, without React: the microphone captured and sent, the
// reply played, barge-ins reported as heard. `useServiceVoice` holds one of these and
// mirrors its state.

import type { VoiceStartResult } from "@cairn/client";

import { startMicrophoneCapture, type MicrophoneCapture } from "./capture.js";
import { Pcm16Player, type StoppedPlayback } from "./playback.js";
import {
  createVoiceProtocolClient,
  type VoiceClientEvent,
  type VoiceErrorEvent,
  type VoiceProtocolClient,
  type VoiceServerEvent,
  type WebSocketConstructor,
} from "./protocol.js";

/** The reason this library gives the server when the caller speaks over a reply. */
export const BARGE_IN_REASON = "barge_in";

/** An `error` event of the voice socket, or the socket's failure, as an Error. */
export class ServiceVoiceError extends Error {
  /** The server's `error.code` (`speech_recognition_unavailable`, …), or `socket_closed`/`socket_failed`. */
  readonly code: string;
  /** The server's `error.type`, when it came from an `error` event. */
  readonly type: string | undefined;
  /** The socket's close code, when the socket closed. */
  readonly closeCode: number | undefined;

  constructor(message: string, code: string, details: { type?: string; closeCode?: number } = {}) {
    super(message);
    this.name = "ServiceVoiceError";
    this.code = code;
    this.type = details.type;
    this.closeCode = details.closeCode;
  }
}

export interface VoiceSessionHandlers {
  /** Each server event, after the session acted on it. */
  onEvent?: (event: VoiceServerEvent) => void;
  /** A server `error` event the session did not expect, or a socket failure. */
  onError?: (error: ServiceVoiceError) => void;
  /** The socket closed: `error` when it was not a normal end. */
  onClosed?: (error: ServiceVoiceError | undefined) => void;
}

export interface VoiceSessionOptions extends VoiceSessionHandlers {
  start: VoiceStartResult;
  context: AudioContext;
  stream: MediaStream;
  WebSocket?: WebSocketConstructor;
}

/** A running voice session; `open` resolves once the socket is open and capture runs. */
export class VoiceSession {
  readonly start: VoiceStartResult;
  readonly player: Pcm16Player;
  private readonly protocol: VoiceProtocolClient;
  private readonly context: AudioContext;
  private readonly stream: MediaStream;
  private readonly handlers: VoiceSessionHandlers;
  private capture: MicrophoneCapture | undefined;
  private sequence = 0;
  private nextEventId = 0;
  private closedByUs = false;
  private closed = false;
  /** The server's `interrupt_min_speech_ms`: 0 stops a reply at the first word of speech over it. */
  private interruptAfterMs = 0;
  private opened = false;
  /** Responses whose `response.done` came (their audio may still be playing here). */
  private readonly doneResponses = new Set<string>();
  /** Replies stopped here while the server still sent them: what the caller heard. */
  private readonly stoppedReplies = new Map<string, StoppedPlayback>();
  /** Event ids of the events this session sent on its own (cancels, truncations). */
  private readonly ownEventIds = new Set<string>();
  readonly ready: Promise<void>;

  constructor(options: VoiceSessionOptions) {
    this.start = options.start;
    this.context = options.context;
    this.stream = options.stream;
    this.handlers = options;
    this.player = new Pcm16Player(options.context);
    let resolveOpen!: () => void;
    let rejectOpen!: (error: Error) => void;
    this.ready = new Promise<void>((resolve, reject) => {
      resolveOpen = resolve;
      rejectOpen = reject;
    });
    // A start that fails is reported by `ready`; nobody else needs to hear of it.
    this.ready.catch(() => undefined);
    this.protocol = createVoiceProtocolClient({
      url: options.start.socket.url,
      protocols: [options.start.socket.protocol ?? "service.voice.v1"],
      ...(options.WebSocket === undefined ? {} : { WebSocket: options.WebSocket }),
      onOpen: () => {
        startMicrophoneCapture({
          context: this.context,
          stream: this.stream,
          onFrame: (audio) => {
            this.sequence += 1;
            this.protocol.sendEvent({ type: "input_audio_buffer.append", audio, sequence: this.sequence });
          },
        }).then(
          (capture) => {
            if (this.closed) {
              capture.stop();
              return;
            }
            this.capture = capture;
            this.opened = true;
            resolveOpen();
          },
          (error: unknown) => {
            const failure = new ServiceVoiceError(
              `the microphone could not be captured: ${error instanceof Error ? error.message : String(error)}`,
              "capture_failed",
            );
            rejectOpen(failure);
            this.close(1000, "capture failed");
          },
        );
      },
      onEvent: (event) => this.handle(event),
      onError: () => {
        // The close that follows says what happened.
      },
      onClose: (event) => {
        const wasOpened = this.opened;
        this.release();
        if (this.closedByUs || event.code === 1000) {
          if (!wasOpened) {
            rejectOpen(new ServiceVoiceError("the voice session ended before it started", "socket_closed", { closeCode: event.code }));
          }
          this.handlers.onClosed?.(undefined);
          return;
        }
        const message = wasOpened
          ? `the voice socket closed (code ${event.code}${event.reason ? `: ${event.reason}` : ""})`
          : "the voice socket could not be opened (its token may have expired or been used: start again)";
        const error = new ServiceVoiceError(message, wasOpened ? "socket_closed" : "socket_failed", {
          closeCode: event.code,
        });
        rejectOpen(error);
        this.handlers.onClosed?.(error);
      },
    });
  }

  /** Sends a client event; false when the socket is closed. */
  sendEvent(event: VoiceClientEvent): boolean {
    return this.protocol.sendEvent(event);
  }

  /** Whether the socket is still open or opening. */
  get active(): boolean {
    return !this.closed;
  }

  /**
   * Ends the session: a reply still playing is reported as heard up to now (so the log keeps
   * only that), then the socket closes with 1000 and the microphone and playback stop.
   */
  close(code = 1000, reason?: string): void {
    if (this.closed) {
      return;
    }
    this.interrupt("client_stopped");
    this.closedByUs = true;
    this.protocol.close(code, reason);
    this.release();
  }

  /**
   * Stops the reply playing now and tells the server how much of it was heard: a
   * `response.cancel` while the server is still sending the reply, a
   * `conversation.item.truncate` for a reply it has finished (its `response.done` came).
   */
  interrupt(reason: string = BARGE_IN_REASON): StoppedPlayback | undefined {
    const stopped = this.player.stop({ silence: true });
    if (stopped === undefined) {
      return undefined;
    }
    const responseId = stopped.responseId;
    if (responseId !== undefined && !this.doneResponses.has(responseId)) {
      this.stoppedReplies.set(responseId, stopped);
      this.sendOwn({
        type: "response.cancel",
        response_id: responseId,
        reason,
        playedUntilMs: stopped.playedMs,
        audioEndMs: stopped.playedMs,
        interruptedMessageId: stopped.itemId,
      });
    } else {
      this.truncate(stopped);
    }
    return stopped;
  }

  private truncate(stopped: StoppedPlayback): void {
    this.sendOwn({
      type: "conversation.item.truncate",
      item_id: stopped.itemId,
      content_index: 0,
      audio_end_ms: stopped.playedMs,
    });
  }

  private sendOwn(event: VoiceClientEvent): void {
    this.nextEventId += 1;
    const eventId = `cairn_react_${this.nextEventId}`;
    this.ownEventIds.add(eventId);
    // Only the newest few can still be answered; forget the rest.
    if (this.ownEventIds.size > 32) {
      this.ownEventIds.delete(this.ownEventIds.values().next().value as string);
    }
    this.protocol.sendEvent({ ...event, event_id: eventId });
  }

  private handle(event: VoiceServerEvent): void {
    switch (event.type) {
      case "response.audio.delta": {
        const itemId = typeof event.item_id === "string" ? event.item_id : "";
        const responseId = typeof event.response_id === "string" ? event.response_id : undefined;
        if (typeof event.delta === "string") {
          try {
            this.player.enqueue(itemId, event.delta, responseId);
          } catch (error) {
            this.handlers.onError?.(
              new ServiceVoiceError(
                `reply audio could not be decoded: ${error instanceof Error ? error.message : String(error)}`,
                "invalid_audio",
              ),
            );
          }
        }
        break;
      }
      case "session.created":
      case "session.updated": {
        // How long speech over a reply must last before the server cuts it (0: at once).
        const detection = (event.session as { turn_detection?: { interrupt_min_speech_ms?: unknown } | null } | undefined)
          ?.turn_detection;
        const minimum = detection?.interrupt_min_speech_ms;
        this.interruptAfterMs = typeof minimum === "number" ? minimum : 0;
        break;
      }
      case "input_audio_buffer.speech_started": {
        // The caller speaks over the reply. Without a minimum, stop it now and report what
        // was heard; with one, the server decides (a backchannel leaves the reply playing,
        // longer speech makes it cut the reply), and playback stops when it says so.
        if (this.player.playing && this.interruptAfterMs === 0) {
          this.interrupt(BARGE_IN_REASON);
        }
        break;
      }
      case "response.done": {
        const response = event.response as { id?: unknown; status_details?: { reason?: unknown } | null } | undefined;
        const responseId = typeof response?.id === "string" ? response.id : undefined;
        if (responseId !== undefined) {
          this.doneResponses.add(responseId);
          // The server's VAD cut the reply this client still plays: stop it where it is,
          // and say so (the truncation below).
          const status = (event.response as { status?: unknown } | undefined)?.status;
          if (
            status === "cancelled" &&
            response?.status_details?.reason === "turn_detected" &&
            this.player.playing &&
            !this.stoppedReplies.has(responseId)
          ) {
            const stopped = this.player.stop({ silence: true });
            if (stopped !== undefined && stopped.responseId === responseId) this.truncate(stopped);
            break;
          }
          const stopped = this.stoppedReplies.get(responseId);
          if (stopped !== undefined) {
            this.stoppedReplies.delete(responseId);
            // The server stopped the reply for a reason of its own (its VAD heard the caller
            // first) and cut it where its clock said: cut it where playback really stopped.
            if (response?.status_details?.reason !== BARGE_IN_REASON) {
              this.truncate(stopped);
            }
          }
        }
        break;
      }
      case "error": {
        const error = (event as VoiceErrorEvent).error ?? {};
        const eventId = typeof error.event_id === "string" ? error.event_id : undefined;
        if (eventId !== undefined && this.ownEventIds.has(eventId)) {
          // A cancel that raced the end of its reply: nothing was left to stop.
          this.ownEventIds.delete(eventId);
          break;
        }
        this.handlers.onError?.(
          new ServiceVoiceError(error.message ?? "the voice session reported an error", error.code ?? "error", {
            ...(error.type === undefined ? {} : { type: error.type }),
          }),
        );
        break;
      }
      default:
        break;
    }
    this.handlers.onEvent?.(event);
  }

  /** Stops capture and playback; idempotent. */
  private release(): void {
    if (this.closed) {
      return;
    }
    this.closed = true;
    this.capture?.stop();
    this.capture = undefined;
    this.player.stop();
  }
}
