// The input builders: each variant's kind and defaults, the request body without the
// client-only fields, and mistakes caught before a request. (test/operations.test.ts sends
// what they build to the daemon.)

import { describe, expect, test } from "vitest";
import {
  createChannelEventInput,
  createChannelEventRequestBody,
  createChannelHandoffEventInput,
  createChannelHandoffReviewEventInput,
  createChannelOutputResolutionEventInput,
  createMessageChannelEventInput,
  createOutboundContactChannelEventInput,
  createProviderObjectChannelEventInput,
  createScheduledChannelEventInput,
  createVoiceTurnChannelEventInput,
} from "./index.js";

describe("input builders", () => {
  test("each variant builder sets its kind", () => {
    expect(createMessageChannelEventInput({ channel: "sms", text: "hi" })).toEqual({ channel: "sms", text: "hi", kind: "message", direction: "inbound" });
    expect(createMessageChannelEventInput({ channel: "sms", text: "sent", direction: "outbound" }).direction).toBe("outbound");
    expect(createProviderObjectChannelEventInput({ channel: "sms", provider: "twilio", providerObject: { sid: "SM1" } }).kind).toBe("provider-object");
    expect(createVoiceTurnChannelEventInput({ transcript: "hello" })).toEqual({ transcript: "hello", kind: "voice-turn" });
    expect(createOutboundContactChannelEventInput({ channel: "email" })).toEqual({ channel: "email", kind: "outbound-contact", direction: "outbound" });
    expect(createScheduledChannelEventInput({ channel: "web" }).kind).toBe("scheduled");
    expect(createChannelOutputResolutionEventInput({ channel: "sms", status: "delivered" }).kind).toBe("output-resolution");
    expect(createChannelHandoffEventInput({ channel: "voice", fromChannel: "web", reason: "asked" })).toEqual({
      channel: "voice",
      fromChannel: "web",
      reason: "asked",
      kind: "handoff",
    });
    expect(createChannelHandoffReviewEventInput({ channel: "web" }).kind).toBe("handoff-review");
  });

  test("a matching nature is folded into kind; another kind is a mistake", () => {
    expect(createScheduledChannelEventInput({ channel: "web", nature: "scheduled" })).toEqual({ channel: "web", kind: "scheduled" });
    expect(() => createScheduledChannelEventInput({ channel: "web", kind: "handoff" })).toThrow(/scheduled.*handoff/);
    expect(() => createMessageChannelEventInput({ channel: "web", text: "x", event: { nature: "scheduled" } })).toThrow(TypeError);
  });

  test("required fields: channel (from the top level or the envelope), and a message's text and direction", () => {
    // @ts-expect-error `channel` is required.
    expect(() => createScheduledChannelEventInput({})).toThrow(/channel/);
    expect(createScheduledChannelEventInput({ event: { channel: "web" } } as never).kind).toBe("scheduled");
    // @ts-expect-error `text` is required.
    expect(() => createMessageChannelEventInput({ channel: "web" })).toThrow(/text/);
    // @ts-expect-error a message is inbound or outbound.
    expect(() => createMessageChannelEventInput({ channel: "web", text: "x", direction: "internal" })).toThrow(/direction/);
    expect(createVoiceTurnChannelEventInput({ text: "hello", channel: "voice" }).kind).toBe("voice-turn");
  });

  test("createChannelEventInput copies; the request body drops signal, onAssistantTextDelta and undefined fields", () => {
    const signal = new AbortController().signal;
    const input = { channel: "sms", text: "hi", signal, onAssistantTextDelta: () => {}, metadata: { a: 1 }, subject: undefined };
    const copy = createChannelEventInput(input);
    expect(copy).toEqual(input);
    expect(copy).not.toBe(input);
    const body = createChannelEventRequestBody(input);
    expect(body).toEqual({ channel: "sms", text: "hi", metadata: { a: 1 } });
    expect(JSON.parse(JSON.stringify(body))).toEqual(body);
  });
});
