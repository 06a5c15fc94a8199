// The chat widget's look: CSS custom properties set from `appearance`, and the minimal
// stylesheet that reads them.

import type { CSSProperties } from "react";

/** Colours and shapes of the chat widget; each becomes a `--cairn-chat-*` CSS variable. */
export interface ServiceChatAppearance {
  /** Buttons, focus rings, the user's bubbles (`--cairn-chat-accent`). */
  accentColor?: string;
  /** Text on the accent colour (`--cairn-chat-accent-text`). */
  accentTextColor?: string;
  /** The widget's background (`--cairn-chat-background`). */
  backgroundColor?: string;
  /** The widget's text (`--cairn-chat-text`). */
  textColor?: string;
  /** Secondary text: activities, notes (`--cairn-chat-muted`). */
  mutedColor?: string;
  /** Borders (`--cairn-chat-border`). */
  borderColor?: string;
  /** The assistant's bubbles (`--cairn-chat-assistant-background`). */
  assistantBubbleColor?: string;
  /** The user's bubbles (`--cairn-chat-user-background`; default: the accent). */
  userBubbleColor?: string;
  /** Errors (`--cairn-chat-danger`). */
  dangerColor?: string;
  /** Corner radius (`--cairn-chat-radius`), e.g. `12px`. */
  borderRadius?: string;
  /** Font (`--cairn-chat-font`). */
  fontFamily?: string;
  /** Font size (`--cairn-chat-font-size`), e.g. `14px`. */
  fontSize?: string;
  /** Any further CSS variables, by full name (`{"--cairn-chat-gap": "12px"}`). */
  variables?: Record<`--${string}`, string>;
}

const VARIABLES: [keyof ServiceChatAppearance, string][] = [
  ["accentColor", "--cairn-chat-accent"],
  ["accentTextColor", "--cairn-chat-accent-text"],
  ["backgroundColor", "--cairn-chat-background"],
  ["textColor", "--cairn-chat-text"],
  ["mutedColor", "--cairn-chat-muted"],
  ["borderColor", "--cairn-chat-border"],
  ["assistantBubbleColor", "--cairn-chat-assistant-background"],
  ["userBubbleColor", "--cairn-chat-user-background"],
  ["dangerColor", "--cairn-chat-danger"],
  ["borderRadius", "--cairn-chat-radius"],
  ["fontFamily", "--cairn-chat-font"],
  ["fontSize", "--cairn-chat-font-size"],
];

/** The inline style that sets `appearance`'s CSS variables. */
export function appearanceStyle(appearance: ServiceChatAppearance | undefined): CSSProperties {
  const style: Record<string, string> = {};
  if (appearance === undefined) return style;
  for (const [key, variable] of VARIABLES) {
    const value = appearance[key];
    if (typeof value === "string" && value !== "") style[variable] = value;
  }
  for (const [variable, value] of Object.entries(appearance.variables ?? {})) {
    style[variable] = value;
  }
  return style as CSSProperties;
}

/** The widget's stylesheet: small, scoped to `.cairn-chat`, themed by the variables above. */
export const serviceChatWidgetCss = `
.cairn-chat {
  --cairn-chat-accent: #2f5bea;
  --cairn-chat-accent-text: #ffffff;
  --cairn-chat-background: #ffffff;
  --cairn-chat-text: #1d2433;
  --cairn-chat-muted: #5f6b7a;
  --cairn-chat-border: #d5dae1;
  --cairn-chat-assistant-background: #f1f3f6;
  --cairn-chat-user-background: var(--cairn-chat-accent);
  --cairn-chat-danger: #b42318;
  --cairn-chat-radius: 12px;
  --cairn-chat-font: system-ui, -apple-system, "Segoe UI", sans-serif;
  --cairn-chat-font-size: 14px;
  --cairn-chat-gap: 8px;
  display: flex;
  flex-direction: column;
  min-height: 320px;
  max-height: 100%;
  box-sizing: border-box;
  border: 1px solid var(--cairn-chat-border);
  border-radius: var(--cairn-chat-radius);
  background: var(--cairn-chat-background);
  color: var(--cairn-chat-text);
  font-family: var(--cairn-chat-font);
  font-size: var(--cairn-chat-font-size);
  line-height: 1.45;
  overflow: hidden;
}
.cairn-chat *, .cairn-chat *::before, .cairn-chat *::after { box-sizing: inherit; }
.cairn-chat__header { padding: 10px 14px; border-bottom: 1px solid var(--cairn-chat-border); }
.cairn-chat__title { margin: 0; font-size: 1.05em; font-weight: 600; }
.cairn-chat__log { flex: 1; overflow-y: auto; padding: 12px 14px; display: flex; flex-direction: column; gap: var(--cairn-chat-gap); }
.cairn-chat__message { max-width: 85%; padding: 8px 12px; border-radius: var(--cairn-chat-radius); white-space: pre-wrap; overflow-wrap: anywhere; }
.cairn-chat__message--assistant { align-self: flex-start; background: var(--cairn-chat-assistant-background); }
.cairn-chat__message--user { align-self: flex-end; background: var(--cairn-chat-user-background); color: var(--cairn-chat-accent-text); }
.cairn-chat__message[data-status="sending"], .cairn-chat__message[data-status="streaming"] { opacity: 0.8; }
.cairn-chat__message[data-status="failed"] { outline: 1px solid var(--cairn-chat-danger); }
.cairn-chat__message-note { display: block; font-size: 0.85em; opacity: 0.8; }
.cairn-chat__activity { align-self: flex-start; color: var(--cairn-chat-muted); font-size: 0.9em; font-style: italic; }
.cairn-chat__widget { align-self: flex-start; width: min(100%, 360px); padding: 10px 12px; border: 1px solid var(--cairn-chat-border); border-radius: var(--cairn-chat-radius); }
.cairn-chat__widget fieldset { margin: 0; padding: 0; border: 0; display: flex; flex-direction: column; gap: var(--cairn-chat-gap); }
.cairn-chat__widget-title { padding: 0; margin-bottom: 4px; font-weight: 600; }
.cairn-chat__field { display: flex; flex-direction: column; gap: 2px; }
.cairn-chat__field input, .cairn-chat__composer textarea {
  font: inherit; color: inherit; background: var(--cairn-chat-background);
  border: 1px solid var(--cairn-chat-border); border-radius: calc(var(--cairn-chat-radius) / 2); padding: 6px 8px;
}
.cairn-chat__options { display: flex; flex-wrap: wrap; gap: 6px; }
.cairn-chat__button, .cairn-chat__option {
  font: inherit; cursor: pointer; border-radius: calc(var(--cairn-chat-radius) / 2); padding: 6px 12px;
  border: 1px solid var(--cairn-chat-accent); background: var(--cairn-chat-accent); color: var(--cairn-chat-accent-text);
}
.cairn-chat__option { background: transparent; color: var(--cairn-chat-accent); min-width: 2.5em; }
.cairn-chat__option[aria-pressed="true"] { background: var(--cairn-chat-accent); color: var(--cairn-chat-accent-text); }
.cairn-chat button:disabled, .cairn-chat fieldset:disabled button { cursor: default; opacity: 0.6; }
.cairn-chat :focus-visible { outline: 2px solid var(--cairn-chat-accent); outline-offset: 2px; }
.cairn-chat__sources { margin: 6px 0 0; padding-left: 1.2em; font-size: 0.9em; white-space: normal; }
.cairn-chat__sources a { color: inherit; }
.cairn-chat__typing { align-self: flex-start; display: flex; gap: 4px; padding: 10px 12px; border-radius: var(--cairn-chat-radius); background: var(--cairn-chat-assistant-background); }
.cairn-chat__typing span { width: 6px; height: 6px; border-radius: 50%; background: var(--cairn-chat-muted); animation: cairn-chat-typing 1.2s infinite ease-in-out; }
.cairn-chat__typing span:nth-child(2) { animation-delay: 0.2s; }
.cairn-chat__typing span:nth-child(3) { animation-delay: 0.4s; }
@keyframes cairn-chat-typing { 0%, 80%, 100% { opacity: 0.3; } 40% { opacity: 1; } }
.cairn-chat__notice { align-self: stretch; margin: 0; padding: 8px 12px; text-align: center; color: var(--cairn-chat-muted); font-size: 0.9em; border: 1px dashed var(--cairn-chat-border); border-radius: var(--cairn-chat-radius); }
.cairn-chat__closed { display: flex; align-items: center; justify-content: space-between; gap: var(--cairn-chat-gap); padding: 10px 14px 0; }
.cairn-chat__closed p { margin: 0; color: var(--cairn-chat-muted); }
.cairn-chat__error { margin: 0 14px 8px; color: var(--cairn-chat-danger); font-size: 0.9em; }
.cairn-chat__composer { display: flex; gap: var(--cairn-chat-gap); padding: 10px 14px; border-top: 1px solid var(--cairn-chat-border); }
.cairn-chat__composer textarea { flex: 1; resize: none; min-height: 2.5em; }
.cairn-chat__visually-hidden {
  position: absolute !important; width: 1px; height: 1px; padding: 0; margin: -1px; overflow: hidden;
  clip: rect(0, 0, 0, 0); white-space: nowrap; border: 0;
}
`;
