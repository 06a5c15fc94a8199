// The browser tests' page: the voice hook against the daemon named in `?daemon=`, with
// everything it does recorded on `window.voiceTest` for the test to read. `?scenario=barge-in`
// mutes the microphone after each turn and unmutes it once the reply plays, so the looping
// fake microphone speaks over the reply.

import { createServiceClient } from "@cairn/client";
import { useEffect, useRef } from "react";
import { createRoot } from "react-dom/client";

import { useServiceVoice, type UseServiceVoiceResult, type VoiceServerEvent } from "../../../src/index.js";
import type { Recorded } from "./recorded.js";

declare global {
  interface Window {
    voiceTest: Recorded;
    voice: UseServiceVoiceResult;
  }
}

const params = new URLSearchParams(location.search);
const daemon = params.get("daemon") ?? location.origin;
const scenario = params.get("scenario") ?? "talk";
const givenConversation = params.get("conversationId") ?? undefined;
const client = createServiceClient({ baseUrl: `${daemon}/api/runtime` });

const recorded: Recorded = { statuses: [], events: [], sent: [], errors: [], created: [], ended: false };
window.voiceTest = recorded;

/** The browser's WebSocket, with every frame the page sends recorded (audio left out). */
class RecordingWebSocket extends WebSocket {
  override send(data: string | ArrayBufferLike | Blob | ArrayBufferView): void {
    if (typeof data === "string") {
      const event = JSON.parse(data) as Record<string, unknown>;
      if (event.type === "input_audio_buffer.append") {
        const appends = recorded.sent.filter((sent) => sent.type === "input_audio_buffer.append").length;
        if (appends < 3) recorded.sent.push({ type: event.type, sequence: event.sequence, bytes: atob(String(event.audio)).length });
      } else {
        recorded.sent.push({ ...event, at: performance.now() });
      }
    }
    super.send(data);
  }
}

function summarize(event: VoiceServerEvent): Record<string, unknown> {
  const { delta, ...rest } = event;
  return event.type === "response.audio.delta" ? { ...rest, deltaLength: String(delta).length, at: performance.now() } : { ...event, at: performance.now() };
}

function App() {
  const voiceRef = useRef<UseServiceVoiceResult | undefined>(undefined);
  const unmuted = useRef(false);
  const voice = useServiceVoice({
    client,
    ...(givenConversation === undefined ? {} : { conversationId: givenConversation }),
    app: { page: "voice-test" },
    WebSocket: RecordingWebSocket,
    onConversationCreated: (id) => recorded.created.push(id),
    onConnected: (result) => (recorded.connected = result.conversation.id),
    onEnded: () => (recorded.ended = true),
    onError: (error) => recorded.errors.push(error.message),
    onEvent: (event) => {
      recorded.events.push(summarize(event));
      if (scenario !== "barge-in") return;
      if (event.type === "input_audio_buffer.committed") {
        // The turn is taken: keep the looping speech out until the reply plays.
        voiceRef.current?.setMuted(true);
      }
      if (event.type === "response.audio.delta" && !unmuted.current) {
        unmuted.current = true;
        setTimeout(() => voiceRef.current?.setMuted(false), 800);
      }
    },
  });
  voiceRef.current = voice;
  window.voice = voice;
  useEffect(() => {
    if (recorded.statuses[recorded.statuses.length - 1] !== voice.status) recorded.statuses.push(voice.status);
  }, [voice.status]);
  return (
    <main>
      <button
        type="button"
        onClick={() =>
          voice.start().then(
            (result) => (recorded.startResult = result.conversation.id),
            (error: Error) => (recorded.startError = error.message),
          )
        }
      >
        Start talking
      </button>
      <button type="button" onClick={() => voice.stop()}>
        Stop
      </button>
      <p data-testid="status">{voice.status}</p>
      <p data-testid="conversation">{voice.conversationId ?? ""}</p>
      <p data-testid="muted">{voice.muted ? "muted" : "live"}</p>
      <p data-testid="stream">{voice.localStream === undefined ? "no stream" : "stream"}</p>
      {voice.error === undefined ? null : <p role="alert">{voice.error.message}</p>}
    </main>
  );
}

createRoot(document.getElementById("root")!).render(<App />);
