// The console's chat with the runtime's agents: @cairn/react's chat widget (it renders the
// bundled agent's form and rating widgets) and its voice hook on the same conversation.
// It calls the daemon's runtime as the operator: no key in the solo profile, the signed-in
// API key (X-API-Key, also on event streams through a fetch-based event source) in
// production. Visitors' browsers use conversation tokens instead; see docs/console.md.
import { useMemo, useState } from "react";
import { createServiceClient, fetchEventSource } from "@cairn/client";
import { ServiceChatWidget, useServiceVoice, type ServiceChatAppearance } from "@cairn/react";
import { authHeaders } from "../api";

const APPEARANCE: ServiceChatAppearance = {
  accentColor: "#2f5d50",
  borderRadius: "10px",
  fontFamily: "inherit",
  fontSize: "15px",
};

export function ChatPanel(props: { onConversationCreated?: (id: string) => void }) {
  const key = authHeaders()["X-API-Key"];
  const client = useMemo(
    () =>
      createServiceClient({
        baseUrl: `${location.origin}/api/runtime`,
        headers: key ? { "X-API-Key": key } : {},
        credentials: "omit",
        createEventSource: fetchEventSource(fetch),
      }),
    [key],
  );
  const [conversationId, setConversationId] = useState<string | undefined>(undefined);
  const created = (id: string) => {
    setConversationId(id);
    props.onConversationCreated?.(id);
  };
  const voice = useServiceVoice({ client, conversationId, onConversationCreated: created });
  const talking = voice.status === "connected" || voice.status === "connecting" || voice.status === "requestingPermission";

  return (
    <div className="chat-panel">
      <ServiceChatWidget
        client={client}
        conversationId={conversationId}
        onConversationCreated={created}
        title="Chat with the agent"
        placeholder="Ask something, or say “I would like to book a demo”"
        appearance={APPEARANCE}
      />
      <div className="voice" role="group" aria-label="voice">
        {talking ? (
          <>
            <button type="button" className="danger" onClick={voice.stop}>
              Stop talking
            </button>
            <button type="button" className="secondary" onClick={() => voice.setMuted(!voice.muted)}>
              {voice.muted ? "Unmute" : "Mute"}
            </button>
          </>
        ) : (
          <button type="button" className="secondary" onClick={() => void voice.start().catch(() => undefined)}>
            Talk
          </button>
        )}
        <span className="meta" role="status">
          voice: {voice.status}
          {voice.error ? ` — ${voice.error.message}` : ""}
        </span>
        {conversationId && (
          <span className="meta">
            in <code>{conversationId}</code>
          </span>
        )}
      </div>
    </div>
  );
}
