// The voice hook: a spoken conversation with an agent from the browser. The microphone
// (getUserMedia) is captured at 24 kHz pcm16 over the `service.voice.v1` socket, the reply is
// played as it comes, and speaking over it stops it and tells the server what was heard.

import { useCallback, useEffect, useRef, useState } from "react";
import type { ServiceClient, VoiceStartResult } from "@cairn/client";

import type { VoiceClientEvent, VoiceServerEvent, WebSocketConstructor } from "./protocol.js";
import { VoiceSession } from "./session.js";

/** Where the voice connection is: the seed's voice connection statuses. */
export type ServiceVoiceStatus = "idle" | "requestingPermission" | "connecting" | "connected" | "ended" | "error";

/** The client operations the voice hook calls. */
export type ServiceVoiceClient = Pick<ServiceClient, "startVoiceConversation" | "startVoiceSegment">;

export interface UseServiceVoiceOptions {
  /** The runtime client (`createServiceClient`). */
  client: ServiceVoiceClient;
  /** The agent of a conversation `start` creates. */
  agentId?: string;
  /** What the app knows of the moment, sent with the start (`app`). */
  app?: unknown;
  /**
   * An existing conversation to talk in: `start` then opens a voice segment in it. Without
   * one, the first `start` creates a voice conversation and later starts continue it.
   */
  conversationId?: string;
  /** The `context` of a conversation `start` creates. */
  initialContext?: unknown;
  /** The AudioContext to capture and play on (default: one the hook makes, and closes). */
  audioContext?: AudioContext;
  /**
   * What `getUserMedia` is asked for (default: audio with echo cancellation, noise
   * suppression and automatic gain).
   */
  mediaConstraints?: MediaStreamConstraints;
  /** The `WebSocket` constructor (default: the browser's). */
  WebSocket?: WebSocketConstructor;
  /** The socket is open and the microphone is being sent. */
  onConnected?: (result: VoiceStartResult) => void;
  /** `start` created a conversation. */
  onConversationCreated?: (conversationId: string) => void;
  /** The session ended (stop, or the server closed the socket normally). */
  onEnded?: () => void;
  /** A failure: permission refused, a start refused, the socket lost, or a server `error` event. */
  onError?: (error: Error) => void;
  /** Each server event of the socket. */
  onEvent?: (event: VoiceServerEvent) => void;
}

export interface UseServiceVoiceResult {
  /** The voice segment of the current (or last) session. */
  channelSegmentId: string | undefined;
  /** The voice connection of the current (or last) session. */
  connectionId: string | undefined;
  /** The conversation talked in. */
  conversationId: string | undefined;
  /** The last failure; cleared by the next `start`. */
  error: Error | undefined;
  /** The microphone's stream while a session runs. */
  localStream: MediaStream | undefined;
  /** Whether the microphone is muted (its tracks disabled: the server hears silence). */
  muted: boolean;
  /** `idle`, `requestingPermission`, `connecting`, `connected`, `ended` or `error`. */
  status: ServiceVoiceStatus;
  /** Sends a client event on the socket; false when no socket is open. */
  sendEvent: (event: VoiceClientEvent) => boolean;
  /** Mutes or unmutes the microphone. */
  setMuted: (muted: boolean) => void;
  /**
   * Asks for the microphone, starts a voice conversation (or a segment of the known one),
   * opens the socket and starts sending; resolves with the voice start result once
   * connected, rejects (and sets `error`) on failure. Call it from a user gesture so the
   * AudioContext may start.
   */
  start: () => Promise<VoiceStartResult>;
  /** Ends the session: reports what was heard of a reply still playing, closes the socket, releases the microphone. */
  stop: () => void;
}

const DEFAULT_MEDIA_CONSTRAINTS: MediaStreamConstraints = {
  audio: { echoCancellation: true, noiseSuppression: true, autoGainControl: true, channelCount: 1 },
};

interface Running {
  session: VoiceSession | undefined;
  stream: MediaStream | undefined;
  context: AudioContext | undefined;
  ownsContext: boolean;
  /** Set when `stop` or unmount ended this run. */
  stopped: boolean;
}

/** The voice hook. See `UseServiceVoiceOptions` and `docs/react.md`. */
export function useServiceVoice(options: UseServiceVoiceOptions): UseServiceVoiceResult {
  const [status, setStatus] = useState<ServiceVoiceStatus>("idle");
  const [error, setError] = useState<Error | undefined>(undefined);
  const [conversationId, setConversationId] = useState<string | undefined>(options.conversationId);
  const [channelSegmentId, setChannelSegmentId] = useState<string | undefined>(undefined);
  const [connectionId, setConnectionId] = useState<string | undefined>(undefined);
  const [localStream, setLocalStream] = useState<MediaStream | undefined>(undefined);
  const [muted, setMutedState] = useState(false);

  const latest = useRef(options);
  latest.current = options;
  const running = useRef<Running | undefined>(undefined);
  const mounted = useRef(true);
  const mutedRef = useRef(false);
  /** The conversation the next `start` continues: the option's, else the last one. */
  const knownConversation = useRef<string | undefined>(options.conversationId);

  useEffect(() => {
    if (options.conversationId !== undefined) {
      knownConversation.current = options.conversationId;
      setConversationId(options.conversationId);
    }
  }, [options.conversationId]);

  const release = useCallback((run: Running) => {
    run.session?.close();
    for (const track of run.stream?.getTracks() ?? []) track.stop();
    if (run.ownsContext && run.context !== undefined && run.context.state !== "closed") {
      void run.context.close().catch(() => undefined);
    }
    if (running.current === run) running.current = undefined;
  }, []);

  const fail = useCallback((run: Running, failure: Error) => {
    release(run);
    if (!mounted.current) return;
    setLocalStream(undefined);
    setError(failure);
    setStatus("error");
    latest.current.onError?.(failure);
  }, [release]);

  const start = useCallback(async (): Promise<VoiceStartResult> => {
    if (running.current !== undefined) {
      throw new Error("the voice session is already running: stop it first");
    }
    const options = latest.current;
    // The context is made (and resumed) before anything is awaited, while the user's
    // gesture still allows audio to start.
    const ownsContext = options.audioContext === undefined;
    let context: AudioContext;
    try {
      context = options.audioContext ?? new AudioContext();
    } catch (contextError) {
      const failure = new Error(`audio is not available: ${contextError instanceof Error ? contextError.message : String(contextError)}`);
      setError(failure);
      setStatus("error");
      options.onError?.(failure);
      throw failure;
    }
    const resumed = context.state === "suspended" ? context.resume().catch(() => undefined) : Promise.resolve();
    const run: Running = { session: undefined, stream: undefined, context, ownsContext, stopped: false };
    running.current = run;
    setError(undefined);
    setStatus("requestingPermission");

    try {
      if (typeof navigator === "undefined" || navigator.mediaDevices?.getUserMedia === undefined) {
        throw new Error("this browser cannot capture the microphone (navigator.mediaDevices.getUserMedia is missing; pages need https or localhost)");
      }
      run.stream = await navigator.mediaDevices.getUserMedia(options.mediaConstraints ?? DEFAULT_MEDIA_CONSTRAINTS);
      for (const track of run.stream.getAudioTracks()) track.enabled = !mutedRef.current;
      if (run.stopped) throw new Error("the voice session was stopped while it started");
      await resumed;
      if (mounted.current) {
        setLocalStream(run.stream);
        setStatus("connecting");
      }

      const known = knownConversation.current;
      const result =
        known === undefined
          ? await options.client.startVoiceConversation({
              ...(options.agentId === undefined ? {} : { agentId: options.agentId }),
              ...(options.app === undefined ? {} : { app: options.app }),
              ...(options.initialContext === undefined ? {} : { context: options.initialContext }),
            })
          : await options.client.startVoiceSegment(known, options.app === undefined ? {} : { app: options.app });
      if (run.stopped) throw new Error("the voice session was stopped while it started");
      knownConversation.current = result.conversation.id;
      if (mounted.current) {
        setConversationId(result.conversation.id);
        setChannelSegmentId(result.channelSegment.id);
        setConnectionId(result.connection.id);
      }
      if (known === undefined) latest.current.onConversationCreated?.(result.conversation.id);

      const session = new VoiceSession({
        start: result,
        context,
        stream: run.stream,
        ...(options.WebSocket === undefined ? {} : { WebSocket: options.WebSocket }),
        onEvent: (event) => latest.current.onEvent?.(event),
        onError: (sessionError) => {
          if (!mounted.current) return;
          setError(sessionError);
          latest.current.onError?.(sessionError);
        },
        onClosed: (closeError) => {
          if (running.current !== run) return;
          if (closeError === undefined) {
            release(run);
            if (!mounted.current) return;
            setLocalStream(undefined);
            setStatus("ended");
            latest.current.onEnded?.();
          } else {
            fail(run, closeError);
          }
        },
      });
      run.session = session;
      await session.ready;
      if (run.stopped) throw new Error("the voice session was stopped while it started");
      if (mounted.current) setStatus("connected");
      latest.current.onConnected?.(result);
      return result;
    } catch (startError) {
      const failure = startError instanceof Error ? startError : new Error(String(startError));
      if (run.stopped) {
        // `stop` already reported the end.
        release(run);
        throw failure;
      }
      if (running.current === run || running.current === undefined) fail(run, failure);
      throw failure;
    }
  }, [fail, release]);

  const stop = useCallback(() => {
    const run = running.current;
    if (run === undefined) return;
    run.stopped = true;
    release(run);
    if (!mounted.current) return;
    setLocalStream(undefined);
    setStatus("ended");
    latest.current.onEnded?.();
  }, [release]);

  const sendEvent = useCallback((event: VoiceClientEvent): boolean => {
    return running.current?.session?.sendEvent(event) ?? false;
  }, []);

  const setMuted = useCallback((next: boolean) => {
    mutedRef.current = next;
    for (const track of running.current?.stream?.getAudioTracks() ?? []) track.enabled = !next;
    setMutedState(next);
  }, []);

  useEffect(() => {
    mounted.current = true;
    return () => {
      mounted.current = false;
      const run = running.current;
      if (run !== undefined) {
        run.stopped = true;
        release(run);
      }
    };
  }, [release]);

  return {
    channelSegmentId,
    connectionId,
    conversationId,
    error,
    localStream,
    muted,
    status,
    sendEvent,
    setMuted,
    start,
    stop,
  };
}

