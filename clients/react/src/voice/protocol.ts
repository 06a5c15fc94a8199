// The `service.voice.v1` socket from the browser's side: one JSON object per text frame,
// client events in, server events out (seed 001 "Voice WebSocket protocol", docs/voice.md).

/** The voice socket protocol's identifier (the WebSocket subprotocol). */
export const SERVICE_VOICE_PROTOCOL = "service.voice.v1";

/** `session.update`: change the session (turn detection, audio formats). */
export interface SessionUpdateEvent {
  type: "session.update";
  event_id?: string;
  session?: Record<string, unknown>;
}

/** `input_audio_buffer.append`: base64 pcm16 24 kHz mono audio (20–100 ms a frame). */
export interface InputAudioBufferAppendEvent {
  type: "input_audio_buffer.append";
  audio: string;
  event_id?: string;
  sequence?: number;
}

/** `input_audio_buffer.commit`: end the caller's turn now (needs 100 ms of audio). */
export interface InputAudioBufferCommitEvent {
  type: "input_audio_buffer.commit";
  event_id?: string;
}

/** `input_audio_buffer.clear`: drop the audio not yet committed. */
export interface InputAudioBufferClearEvent {
  type: "input_audio_buffer.clear";
  event_id?: string;
}

/** `response.cancel`: stop the reply in progress; say how much of it the caller heard. */
export interface ResponseCancelEvent {
  type: "response.cancel";
  event_id?: string;
  response_id?: string;
  reason?: string;
  audioEndMs?: number;
  playedUntilMs?: number;
  interruptedMessageId?: string;
}

/** `conversation.item.truncate`: the caller heard only `audio_end_ms` of a reply. */
export interface ConversationItemTruncateEvent {
  type: "conversation.item.truncate";
  event_id?: string;
  item_id?: string;
  content_index?: number;
  audio_end_ms?: number;
}

/** Every event a client may send on the socket. */
export type VoiceClientEvent =
  | SessionUpdateEvent
  | InputAudioBufferAppendEvent
  | InputAudioBufferCommitEvent
  | InputAudioBufferClearEvent
  | ResponseCancelEvent
  | ConversationItemTruncateEvent;

/** The `type` of every client event of `service.voice.v1`. */
export const VOICE_CLIENT_EVENT_TYPES: readonly VoiceClientEvent["type"][] = [
  "session.update",
  "input_audio_buffer.append",
  "input_audio_buffer.commit",
  "input_audio_buffer.clear",
  "response.cancel",
  "conversation.item.truncate",
];

/**
 * A server event: a string `type`, an `event_id`, and the fields of its type (docs/voice.md
 * lists the default runtime's: `session.created`, `input_audio_buffer.speech_started`,
 * `response.audio.delta`, `response.done`, `error`, …).
 */
export interface VoiceServerEvent {
  type: string;
  event_id?: string;
  [field: string]: unknown;
}

/** The `error` server event: a client event was refused, and the socket stays open. */
export interface VoiceErrorEvent extends VoiceServerEvent {
  type: "error";
  error: { type?: string; code?: string; message?: string; event_id?: string | null };
}

/** What the protocol client reports to `onError`: a frame it could not read, or a socket failure. */
export class VoiceProtocolError extends Error {
  /** The socket event behind it, when there is one. */
  readonly event?: Event;

  constructor(message: string, event?: Event) {
    super(message);
    this.name = "VoiceProtocolError";
    if (event !== undefined) {
      this.event = event;
    }
  }
}

/** A `WebSocket` constructor (the browser's by default; `ws` or another in Node). */
export type WebSocketConstructor = new (url: string | URL, protocols?: string | string[]) => WebSocket;

export interface VoiceProtocolClientOptions {
  /** The socket URL, its token included (a voice start's `socket.url`). */
  url: string;
  /** WebSocket subprotocols; default `["service.voice.v1"]`. */
  protocols?: string | string[];
  /** The `WebSocket` constructor; default `globalThis.WebSocket`. */
  WebSocket?: WebSocketConstructor;
  /** The socket opened (the server accepted the token and the subprotocol). */
  onOpen?: (event: Event) => void;
  /** The socket closed; `event.code` says why (docs/voice.md "Closing"). */
  onClose?: (event: CloseEvent) => void;
  /**
   * The socket failed (a refused handshake shows as this, then `onClose` with 1006), or a
   * frame could not be read. Server `error` events go to `onEvent`, not here.
   */
  onError?: (error: VoiceProtocolError) => void;
  /** Each server event, parsed. */
  onEvent?: (event: VoiceServerEvent) => void;
}

export interface VoiceProtocolClient {
  /** The underlying socket. */
  readonly socket: WebSocket;
  /**
   * Sends a client event as one JSON text frame. Events sent while the socket is still
   * connecting are queued and sent, in order, once it opens. Returns false, sending
   * nothing, when the socket is closing or closed.
   */
  sendEvent(event: VoiceClientEvent): boolean;
  /** Closes the socket (default code 1000); queued events are dropped. */
  close(code?: number, reason?: string): void;
}

/** Opens a `service.voice.v1` socket and speaks its JSON framing. */
export function createVoiceProtocolClient(options: VoiceProtocolClientOptions): VoiceProtocolClient {
  const Socket = options.WebSocket ?? (globalThis.WebSocket as WebSocketConstructor | undefined);
  if (Socket === undefined) {
    throw new Error("no WebSocket implementation: pass the `WebSocket` option");
  }
  const protocols = options.protocols ?? [SERVICE_VOICE_PROTOCOL];
  const socket = new Socket(options.url, protocols);
  let queue: string[] = [];

  socket.addEventListener("open", (event) => {
    const queued = queue;
    queue = [];
    for (const frame of queued) {
      socket.send(frame);
    }
    options.onOpen?.(event);
  });
  socket.addEventListener("message", (message: MessageEvent) => {
    if (typeof message.data !== "string") {
      options.onError?.(
        new VoiceProtocolError("the voice socket sent a binary frame; service.voice.v1 frames are JSON text", message),
      );
      return;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(message.data);
    } catch {
      options.onError?.(new VoiceProtocolError("the voice socket sent a frame that is not JSON", message));
      return;
    }
    if (typeof parsed !== "object" || parsed === null || typeof (parsed as { type?: unknown }).type !== "string") {
      options.onError?.(new VoiceProtocolError("the voice socket sent an event without a string `type`", message));
      return;
    }
    options.onEvent?.(parsed as VoiceServerEvent);
  });
  socket.addEventListener("error", (event) => {
    options.onError?.(new VoiceProtocolError("the voice socket failed", event));
  });
  socket.addEventListener("close", (event: CloseEvent) => {
    queue = [];
    options.onClose?.(event);
  });

  return {
    socket,
    sendEvent(event) {
      const frame = JSON.stringify(event);
      if (socket.readyState === socket.CONNECTING) {
        queue.push(frame);
        return true;
      }
      if (socket.readyState !== socket.OPEN) {
        return false;
      }
      socket.send(frame);
      return true;
    },
    close(code = 1000, reason) {
      queue = [];
      if (socket.readyState === socket.CLOSING || socket.readyState === socket.CLOSED) {
        return;
      }
      socket.close(code, reason);
    },
  };
}
