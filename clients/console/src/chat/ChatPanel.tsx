// Placeholder until @cairn/react builds; replaced by the real chat panel.
export function ChatPanel(_props: { onConversationCreated?: (id: string) => void }) {
  return <p className="empty">The chat panel needs @cairn/react.</p>;
}
