// @cairn/react: React bindings for Cairn's conversation runtime (seed 001 "Chat and voice
// bindings"): the chat hook and widget, the voice hook and the service.voice.v1 protocol
// client, over @cairn/client.

export { useServiceChat } from "./chat/useServiceChat.js";
export type {
  ServiceChatClient,
  ServiceChatStatus,
  ServiceChatWidgetSubmission,
  UseServiceChatOptions,
  UseServiceChatResult,
} from "./chat/useServiceChat.js";
export { ServiceChatWidget, visitorErrorText } from "./chat/ServiceChatWidget.js";
export type { ServiceChatWidgetProps, ServiceChatWidgetSubmitEvent } from "./chat/ServiceChatWidget.js";
export {
  ChoiceWidget,
  ConfirmWidget,
  DateWidget,
  defaultWidgetRenderers,
  FallbackWidget,
  FormWidget,
  RatingWidget,
} from "./chat/renderers.js";
export type { WidgetRenderer, WidgetRendererProps, WidgetRenderers } from "./chat/renderers.js";
export { appearanceStyle, serviceChatWidgetCss } from "./chat/appearance.js";
export type { ServiceChatAppearance } from "./chat/appearance.js";

export { useServiceVoice } from "./voice/useServiceVoice.js";
export type {
  ServiceVoiceClient,
  ServiceVoiceStatus,
  UseServiceVoiceOptions,
  UseServiceVoiceResult,
} from "./voice/useServiceVoice.js";
export { BARGE_IN_REASON, ServiceVoiceError } from "./voice/session.js";
export {
  createVoiceProtocolClient,
  SERVICE_VOICE_PROTOCOL,
  VOICE_CLIENT_EVENT_TYPES,
  VoiceProtocolError,
} from "./voice/protocol.js";
export type {
  ConversationItemTruncateEvent,
  InputAudioBufferAppendEvent,
  InputAudioBufferClearEvent,
  InputAudioBufferCommitEvent,
  ResponseCancelEvent,
  SessionUpdateEvent,
  VoiceClientEvent,
  VoiceErrorEvent,
  VoiceProtocolClient,
  VoiceProtocolClientOptions,
  VoiceServerEvent,
  WebSocketConstructor,
} from "./voice/protocol.js";
export {
  decodePcm16Base64,
  encodePcm16Base64,
  floatToPcm16,
  pcm16ToFloat,
  StreamResampler,
  VOICE_SAMPLE_RATE,
} from "./voice/pcm.js";
export { Pcm16Player } from "./voice/playback.js";
export type { PlaybackContext, StoppedPlayback } from "./voice/playback.js";
