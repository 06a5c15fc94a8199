// The seed's ten input builders: each takes its variant of a channel event and returns a
// channel event input the daemon accepts (`POST /channel-events`), its `kind` set.

import type {
  ChannelEventInput,
  ChannelEventNature,
  ChannelEventRequestBody,
  ChannelHandoffEventInput,
  ChannelHandoffReviewEventInput,
  ChannelOutputResolutionEventInput,
  MessageChannelEventInput,
  OutboundContactChannelEventInput,
  ProviderObjectChannelEventInput,
  ScheduledChannelEventInput,
  VoiceTurnChannelEventInput,
} from "./types.js";

/**
 * A channel event input of any kind, copied. Nothing is added: without `kind` or `nature`
 * the daemon reads a body with text as a `message`.
 */
export function createChannelEventInput<T extends ChannelEventInput>(input: T): T {
  return { ...input };
}

/**
 * The request body of a channel event: the input without the client-only `signal` and
 * `onAssistantTextDelta`, and without fields left `undefined`.
 */
export function createChannelEventRequestBody(input: ChannelEventInput): ChannelEventRequestBody {
  const body: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(input)) {
    if (key === "signal" || key === "onAssistantTextDelta" || value === undefined) continue;
    body[key] = value;
  }
  return body as ChannelEventRequestBody;
}

/** A message someone sent on a channel (`direction` `inbound` unless given). */
export function createMessageChannelEventInput(input: MessageChannelEventInput): ChannelEventInput {
  requireChannel(input, "message");
  const text = input.text ?? input.event?.text;
  if (typeof text !== "string") throw new TypeError("createMessageChannelEventInput: `text` is required");
  const direction = input.direction ?? input.event?.direction ?? "inbound";
  if (direction !== "inbound" && direction !== "outbound") {
    throw new TypeError("createMessageChannelEventInput: `direction` is `inbound` or `outbound`");
  }
  return { ...variant(input, "message"), direction };
}

/** An object a provider reported, such as a delivery receipt. */
export function createProviderObjectChannelEventInput(input: ProviderObjectChannelEventInput): ChannelEventInput {
  requireChannel(input, "provider-object");
  return variant(input, "provider-object");
}

/** A finished turn of a voice call: `transcript` (or `text`); the channel defaults to `voice`. */
export function createVoiceTurnChannelEventInput(input: VoiceTurnChannelEventInput): ChannelEventInput {
  return variant(input, "voice-turn");
}

/** A request to contact someone on a channel (`direction` `outbound` unless given). */
export function createOutboundContactChannelEventInput(input: OutboundContactChannelEventInput): ChannelEventInput {
  requireChannel(input, "outbound-contact");
  return { ...variant(input, "outbound-contact"), direction: input.direction ?? input.event?.direction ?? "outbound" };
}

/** An event a scheduler fires. */
export function createScheduledChannelEventInput(input: ScheduledChannelEventInput): ChannelEventInput {
  requireChannel(input, "scheduled");
  return variant(input, "scheduled");
}

/** What became of an output sent on a channel (`status`: `delivered`, `failed`, …). */
export function createChannelOutputResolutionEventInput(input: ChannelOutputResolutionEventInput): ChannelEventInput {
  requireChannel(input, "output-resolution");
  return variant(input, "output-resolution");
}

/** A conversation handed to another channel (`fromChannel`, `reason`, `reasonCode`, `reasonLabel`). */
export function createChannelHandoffEventInput(input: ChannelHandoffEventInput): ChannelEventInput {
  requireChannel(input, "handoff");
  return variant(input, "handoff");
}

/** An operator's review of a handoff. */
export function createChannelHandoffReviewEventInput(input: ChannelHandoffReviewEventInput): ChannelEventInput {
  requireChannel(input, "handoff-review");
  return variant(input, "handoff-review");
}

/** The input with its `kind` set; a `kind` or `nature` of another variant is a mistake. */
function variant(input: ChannelEventInput, nature: ChannelEventNature): ChannelEventInput {
  for (const given of [input.kind, input.nature, input.event?.kind, input.event?.nature]) {
    if (given !== undefined && given !== nature) {
      throw new TypeError(`a \`${nature}\` channel event cannot have the kind \`${given}\``);
    }
  }
  const result: ChannelEventInput = { ...input, kind: nature };
  // The daemon wants `kind` and `nature` to agree; one of them is enough.
  delete result.nature;
  return result;
}

function requireChannel(input: ChannelEventInput, nature: ChannelEventNature): void {
  if (input.channel === undefined && input.event?.channel === undefined) {
    throw new TypeError(`a \`${nature}\` channel event needs a \`channel\``);
  }
}
