// Every operation of the client against the real daemon and its bundled demo agent
// (`concierge`): what a caller gets back, and the errors it sees.

import { describe, expect, inject, test } from "vitest";
import {
  createChannelHandoffEventInput,
  createChannelHandoffReviewEventInput,
  createChannelOutputResolutionEventInput,
  createMessageChannelEventInput,
  createOutboundContactChannelEventInput,
  createProviderObjectChannelEventInput,
  createScheduledChannelEventInput,
  createServiceClient,
  createVoiceTurnChannelEventInput,
  ServiceApiError,
  type RuntimeEvent,
  type ServiceRequestContext,
} from "../src/index.js";
import { failure } from "./support/failure.js";

const daemonUrl = inject("daemonUrl");
const client = createServiceClient({ baseUrl: `${daemonUrl}/api/runtime` });

function ofType(events: RuntimeEvent[], type: string): RuntimeEvent[] {
  return events.filter((event) => event.type === type);
}

function assistantTexts(events: RuntimeEvent[]): string[] {
  return ofType(events, "message")
    .filter((event) => event.data.role === "assistant")
    .map((event) => event.data.text as string);
}

describe("conversations", () => {
  test("createConversation keeps the id, channel and context it is given", async () => {
    const id = `conv_test_${Date.now()}`;
    const { conversation } = await client.createConversation({
      id,
      agentId: "concierge",
      channel: "web",
      context: { page: "/pricing" },
    });
    expect(conversation).toMatchObject({
      id,
      agentId: "concierge",
      channel: { type: "web" },
      context: { page: "/pricing" },
      lifecycle: "active",
    });
    expect(Date.parse(conversation.createdAt)).not.toBeNaN();

    const empty = await client.createConversation();
    expect(empty.conversation.id).toMatch(/^conv_/);
    expect(empty.conversation.context).toBeNull();

    const taken = await failure(client.createConversation({ id }));
    expect(taken.status).toBe(409);
    expect(taken.code).toBe("CONFLICT");
  });

  test("listConversations pages newest first with lossless cursors", async () => {
    // Other test files create conversations on the same daemon at the same time: the
    // assertions hold whatever they add.
    const records = [];
    for (let index = 0; index < 3; index++) {
      records.push((await client.createConversation({ context: { index } })).conversation);
    }
    const created = records.map((conversation) => conversation.id);
    const since = records[0]!.updatedAt;

    const seen: string[] = [];
    const pages: { ids: string[]; prevCursor?: string }[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listConversations({ limit: 2, ...(cursor ? { after: cursor } : {}) });
      expect(page.conversations.length).toBeLessThanOrEqual(2);
      const ids = page.conversations.map((conversation) => conversation.id);
      pages.push({ ids, ...(page.prevCursor ? { prevCursor: page.prevCursor } : {}) });
      seen.push(...ids);
      cursor = page.nextCursor;
    } while (cursor && !seen.includes(created[0]!));
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toEqual([...seen].sort().reverse());
    expect(seen.filter((id) => created.includes(id))).toEqual([...created].reverse());
    expect(pages[0]!.prevCursor).toBeUndefined();
    if (pages.length > 1) {
      const back = await client.listConversations({ limit: 2, before: pages[1]!.prevCursor! });
      expect(back.conversations.map((conversation) => conversation.id)).toEqual(pages[0]!.ids);
    }

    const recent = await client.listConversations({ afterUpdatedAt: since, agentId: "concierge", limit: 200 });
    const recentIds = recent.conversations.map((conversation) => conversation.id);
    // Strictly after: a conversation made in the same millisecond as the first is left out too.
    const later = records.filter((conversation) => conversation.updatedAt > since).map((conversation) => conversation.id);
    expect(later).toContain(created[2]);
    expect(recentIds.filter((id) => created.includes(id))).toEqual([...later].reverse());
    for (const conversation of recent.conversations) expect(conversation.updatedAt > since).toBe(true);
    const nobody = await client.listConversations({ agentId: "nobody" });
    expect(nobody.conversations).toEqual([]);
  });
});

describe("a chat with the demo agent", () => {
  test("sendMessage returns the turn's events and the reply, streaming it to onAssistantTextDelta", async () => {
    const { conversation } = await client.createConversation({ channel: "web" });
    const hello = await client.sendMessage(conversation.id, "hello");
    expect(hello.text).toBe("Hi! I can book a demo for you, or put you through to a person.");
    expect(hello.events[0]).toMatchObject({ type: "message", data: { role: "user", text: "hello" } });
    expect(assistantTexts(hello.events)).toEqual([hello.text]);
    expect(ofType(hello.events, "activity").map((event) => event.data.kind)).toContain("intent");

    const deltas: string[] = [];
    const booking = await client.sendMessage(conversation.id, "I'd like to book a demo", {
      app: { page: "/pricing" },
      onAssistantTextDelta: (delta) => deltas.push(delta),
    });
    expect(booking.text).toBe("Happy to set that up. Where can we reach you?");
    expect(deltas.join("")).toBe(booking.text);
    expect(booking.activeJourneyId).toBe("book_demo");
    const offsets = booking.events.map((event) => event.offset);
    expect(offsets).toEqual([...offsets].sort((a, b) => a - b));
    expect(offsets[0]).toBe(hello.events.at(-1)!.offset + 1);

    const [opened] = ofType(booking.events, "prompt.opened");
    expect(opened!.data).toMatchObject({ widgetKind: "form", input: { fields: ["name", "email"] } });
    const promptId = opened!.data.promptId as string;

    const replay = await client.replayConversation(conversation.id);
    expect(replay.openPrompts).toEqual([
      { promptId, widgetKind: "form", input: { fields: ["name", "email"] }, offset: opened!.offset },
    ]);

    const { event } = await client.submitWidget(conversation.id, {
      promptId,
      widgetKind: "form",
      output: { name: "Ada", email: "ada@example.com" },
    });
    expect(event).toMatchObject({
      type: "prompt.submitted",
      data: { promptId, widgetKind: "form", output: { name: "Ada", email: "ada@example.com" }, promptOffset: opened!.offset },
    });

    const after = await client.listEvents(conversation.id, { afterOffset: event.offset });
    expect(assistantTexts(after.events)).toEqual([
      "Thanks Ada, we will write to ada@example.com to find a time.\n\nAnything else I can help with?",
    ]);
    expect(ofType(after.events, "tool.called")[0]!.data.name).toBe("memory.store");

    const again = await failure(
      client.submitWidget(conversation.id, { promptId, widgetKind: "form", output: { name: "Bob" } }),
    );
    expect(again.status).toBe(409);

    const replayed = await client.replayConversation(conversation.id);
    expect(replayed.openPrompts).toEqual([]);
    expect(replayed.messages.map((message) => [message.role, message.text])).toEqual([
      ["user", "hello"],
      ["assistant", "Hi! I can book a demo for you, or put you through to a person."],
      ["user", "I'd like to book a demo"],
      ["assistant", "Happy to set that up. Where can we reach you?"],
      ["assistant", "Thanks Ada, we will write to ada@example.com to find a time.\n\nAnything else I can help with?"],
    ]);
    expect(replayed.conversation.id).toBe(conversation.id);
    expect(replayed.snapshot.conversationId).toBe(conversation.id);
  });

  test("listEvents reads everything after an offset, or a page of it", async () => {
    const { conversation } = await client.createConversation();
    await client.sendMessage(conversation.id, "hello");
    await client.sendMessage(conversation.id, "thanks");
    const all = await client.listEvents(conversation.id);
    expect(all.events.map((event) => event.offset)).toEqual(all.events.map((_, index) => index));
    expect(all.events[0]!.type).toBe("conversation.created");

    const page = await client.listEvents(conversation.id, { afterOffset: 2, limit: 3 });
    expect(page.events.map((event) => event.offset)).toEqual([3, 4, 5]);
    expect(page.nextAfterOffset).toBe(5);
    const rest = await client.listEvents(conversation.id, { afterOffset: 5 });
    expect(rest.events.map((event) => event.offset)).toEqual(all.events.slice(6).map((event) => event.offset));
    expect(rest.nextAfterOffset).toBeUndefined();

    const replayPage = await client.replayConversation(conversation.id, { afterOffset: 0, limit: 1 });
    expect(replayPage.events).toHaveLength(1);
    expect(replayPage.messages).toEqual([
      { id: replayPage.events[0]!.data.messageId, role: "user", text: "hello", offset: 1, aborted: false, intermediate: false },
    ]);
    expect(replayPage.nextAfterOffset).toBe(1);
  });

  test("custom events, journey events, intermediate messages and preambles", async () => {
    const { conversation } = await client.createConversation();
    const custom = await client.emitCustomEvent(conversation.id, "page.viewed", {
      payload: { url: "https://example.com/pricing" },
    });
    expect(custom.event).toMatchObject({ type: "custom", data: { name: "page.viewed", payload: { url: "https://example.com/pricing" } } });

    const invalid = await failure(client.emitCustomEvent(conversation.id, "page.viewed", { payload: { url: 7 } }));
    expect(invalid.status).toBe(422);
    expect(invalid.code).toBe("VALIDATION_ERROR");
    expect(invalid.message).toContain("url");
    const undefinedName = await failure(client.emitCustomEvent(conversation.id, "nothing.defined"));
    expect(undefinedName.status).toBe(422);

    const journey = await client.emitJourneyEvent(conversation.id, "feedback.requested", {
      payload: { caseId: "case-1" },
      routing: "full",
    });
    expect(journey.event).toMatchObject({ type: "journey.event", data: { name: "feedback.requested", routing: "full" } });
    expect(journey.snapshot.activeJourneyId).toBe("feedback");
    expect(ofType(journey.events, "prompt.opened")[0]!.data).toMatchObject({ widgetKind: "rating", input: { min: 1, max: 5 } });
    expect(assistantTexts(journey.events)).toEqual(["How did we do today?"]);

    const targeted = await client.emitJourneyEvent(conversation.id, "demo.requested", {
      payload: {},
      routing: "targeted",
      target: { journeyId: "book_demo", stateId: "cancelled" },
    });
    expect(targeted.snapshot.activeJourneyId ?? null).not.toBe("feedback");
    expect(assistantTexts(targeted.events)).toContain("No problem, cancelled.");

    const note = await client.emitIntermediateMessage(conversation.id, { text: "Checking the calendar…", visibleToModel: false });
    expect(note.events).toHaveLength(1);
    expect(note.events[0]!.data).toMatchObject({ role: "assistant", text: "Checking the calendar…", intermediate: true, visibleToModel: false });

    const preamble = await client.emitGeneratedPreamble(conversation.id, { purpose: "look up your booking", maxWords: 4 });
    // Whole words only: a shorter preamble, never one cut mid-phrase.
    expect(preamble.text).toBe("One moment, please.");
    expect(preamble.events[0]!.data).toMatchObject({ role: "assistant", reason: "preamble", purpose: "look up your booking" });
    const defaults = await client.emitGeneratedPreamble(conversation.id);
    expect(defaults.text.length).toBeGreaterThan(0);
  });

  test("compaction, snapshot, handoff, resume and close", async () => {
    const { conversation } = await client.createConversation();
    await client.sendMessage(conversation.id, "hello");
    const compacted = await client.compactConversation(conversation.id, { schemaVersion: "2" });
    expect(compacted.summary).toMatchObject({ schemaVersion: "2", fromOffset: 0, messageCount: 2 });
    expect(compacted.summary.text).toContain("user: hello");
    expect(compacted.snapshot.compactionSummary).toEqual(compacted.summary);
    expect(compacted.events[0]!.type).toBe("conversation.compacted");
    const partial = await client.compactConversation(conversation.id, { fromOffset: 0, toOffset: 1 });
    expect(partial.summary.messageCount).toBe(1);

    const { snapshot } = await client.getSnapshot(conversation.id);
    expect(snapshot).toMatchObject({ conversationId: conversation.id, lifecycle: "active", activeStateIds: expect.any(Array) });
    expect(snapshot.definitionHash).toMatch(/^[0-9a-f]{64}$/);

    const handoff = await client.requestHandoff(conversation.id, { reason: "billing question", summary: "wants a refund" });
    expect(handoff.conversation.lifecycle).toBe("handoff");
    expect(handoff.event).toMatchObject({ type: "conversation.handoff", data: { reason: "billing question", summary: "wants a refund" } });

    const resumed = await client.resumeConversation(conversation.id, { reason: "solved" });
    expect(resumed.conversation.lifecycle).toBe("active");
    expect(resumed.event).toMatchObject({ type: "conversation.resumed", data: { reason: "solved", from: "handoff" } });

    const closed = await client.closeConversation(conversation.id, { reason: "done" });
    expect(closed.conversation.lifecycle).toBe("closed");
    const refused = await failure(client.sendMessage(conversation.id, "still there?"));
    expect(refused.status).toBe(409);
    expect(refused.code).toBe("CONVERSATION_CLOSED");
    // With a delta handler, an error found before the reply starts is still an ordinary error.
    const refusedStreaming = await failure(client.sendMessage(conversation.id, "hello?", { onAssistantTextDelta: () => {} }));
    expect(refusedStreaming.status).toBe(409);

    const reopened = await client.resumeConversation(conversation.id);
    expect(reopened.conversation.lifecycle).toBe("active");
    expect(reopened.event.data).toMatchObject({ from: "closed" });
  });
});

describe("channel events", () => {
  test("handleChannelEvent creates the conversation on first contact and applies a redelivery once", async () => {
    const key = `sms-${Date.now()}`;
    const delivery = {
      channel: { type: "sms", provider: "twilio", id: "+15550001" },
      text: "hello",
      direction: "inbound" as const,
      idempotencyKey: key,
    };
    const first = await client.handleChannelEvent(delivery);
    expect(first.created).toBe(true);
    expect(first.duplicate).toBe(false);
    expect(first.text).toBe("Hi! I can book a demo for you, or put you through to a person.");
    expect(first.conversation.channel).toMatchObject({ type: "sms", provider: "twilio", id: "+15550001" });

    const again = await client.handleChannelEvent(delivery);
    expect(again.duplicate).toBe(true);
    expect(again.events.map((event) => event.id)).toEqual(first.events.map((event) => event.id));
  });

  test("each variant operation reaches its kind of event", async () => {
    const { conversation } = await client.createConversation({ channel: "sms" });
    const conversationId = conversation.id;

    const deltas: string[] = [];
    const message = await client.receiveMessage({
      conversationId,
      channel: "sms",
      text: "book a demo please",
      onAssistantTextDelta: (delta) => deltas.push(delta),
    });
    // SMS shows only words: the form is asked for in words, and no prompt opens.
    expect(message.text).toBe(
      "Happy to set that up. Where can we reach you?\n\nPlease tell me your name, and an e-mail address or phone number.",
    );
    expect(ofType(message.events, "prompt.opened")).toEqual([]);
    expect(deltas.join("")).toBe(message.text);
    expect(message.events[0]!.data).toMatchObject({ role: "user", nature: "message", direction: "inbound" });
    expect(message.activeJourneyId).toBe("book_demo");

    const reply = ofType(message.events, "message").find((event) => event.data.role === "assistant")!;
    const outbound = await client.receiveMessage({ conversationId, channel: "sms", text: "(sent by an operator)", direction: "outbound" });
    expect(outbound.text).toBeUndefined();
    expect(outbound.events[0]!.data).toMatchObject({ role: "assistant", direction: "outbound" });

    const provider = await client.recordProviderUpdate({
      conversationId,
      channel: "sms",
      provider: "twilio",
      providerObject: { sid: "SM1", status: "delivered" },
    });
    expect(provider.events[0]).toMatchObject({ type: "channel.provider_update", data: { nature: "provider-object", provider: "twilio" } });

    const resolution = await client.recordChannelOutputResolution({ conversationId, channel: "sms", status: "delivered" });
    expect(resolution.events[0]).toMatchObject({ type: "channel.output_resolved", data: { nature: "output-resolution", status: "delivered" } });

    const resolved = await client.resolveChannelOutput({ conversationId, eventId: reply.id, status: "read", provider: "twilio" });
    expect(resolved.event).toMatchObject({ type: "channel.output_resolved", data: { eventId: reply.id, status: "read", outputOffset: reply.offset } });
    const unknownOutput = await failure(client.resolveChannelOutput({ conversationId, eventId: "evt_nope", status: "read" }));
    expect(unknownOutput.status).toBe(422);

    const contact = await client.requestOutboundContact({ conversationId, channel: "email", subject: "Your demo" });
    expect(contact.events[0]).toMatchObject({ type: "channel.outbound_contact", data: { nature: "outbound-contact", direction: "outbound" } });

    const scheduled = await client.submitScheduledEvent({ conversationId, channel: "sms", summary: "reminder" });
    expect(scheduled.events[0]).toMatchObject({ type: "channel.scheduled", data: { nature: "scheduled" } });

    const voice = await client.finalizeVoiceTurn({ conversationId, transcript: "hello" });
    expect(voice.text).toBe("Hi! I can book a demo for you, or put you through to a person.");
    expect(voice.events[0]!.data).toMatchObject({ role: "user", nature: "voice-turn", text: "hello" });

    const review = await client.requestChannelHandoffReview({ conversationId, channel: "web", status: "approved" });
    expect(review.events[0]).toMatchObject({ type: "channel.handoff_review", data: { nature: "handoff-review" } });

    const handoff = await client.requestChannelHandoff({ conversationId, channel: "voice", fromChannel: "sms", reason: "caller asked to talk" });
    expect(handoff.conversation.lifecycle).toBe("handoff");
    expect(handoff.events[0]).toMatchObject({ type: "conversation.handoff", data: { nature: "handoff", reason: "caller asked to talk" } });
  });

  test("what every input builder makes, handleChannelEvent submits as its kind", async () => {
    const { conversation } = await client.createConversation({ channel: "web" });
    const conversationId = conversation.id;
    const cases = [
      [createMessageChannelEventInput({ conversationId, channel: "web", text: "hello" }), "message", "message"],
      [createVoiceTurnChannelEventInput({ conversationId, transcript: "thanks" }), "message", "voice-turn"],
      [createProviderObjectChannelEventInput({ conversationId, channel: "sms", provider: "twilio", providerObject: { sid: "SM9" } }), "channel.provider_update", "provider-object"],
      [createOutboundContactChannelEventInput({ conversationId, channel: "email" }), "channel.outbound_contact", "outbound-contact"],
      [createScheduledChannelEventInput({ conversationId, channel: "web" }), "channel.scheduled", "scheduled"],
      [createChannelOutputResolutionEventInput({ conversationId, channel: "sms", status: "failed" }), "channel.output_resolved", "output-resolution"],
      [createChannelHandoffReviewEventInput({ conversationId, channel: "web" }), "channel.handoff_review", "handoff-review"],
      [createChannelHandoffEventInput({ conversationId, channel: "voice", reasonCode: "caller_request" }), "conversation.handoff", "handoff"],
    ] as const;
    for (const [input, type, nature] of cases) {
      const result = await client.handleChannelEvent(input);
      expect(result.events[0], nature).toMatchObject({ type, data: { nature } });
    }
  });

  test("a variant without its required fields fails before any request, and the daemon's rules come back as 422", async () => {
    // @ts-expect-error `channel` is required for a message.
    expect(() => client.receiveMessage({ text: "hi" })).toThrow(TypeError);
    const refused = await failure(client.handleChannelEvent({ kind: "scheduled" }));
    expect(refused.status).toBe(422);
    expect(refused.message).toContain("channel");
  });
});

describe("voice starts", () => {
  test("startVoiceConversation and startVoiceSegment return the socket to talk on", async () => {
    const started = await client.startVoiceConversation({ agentId: "concierge", client: { name: "vitest" }, context: { from: "test" } });
    expect(started.conversation.channel).toMatchObject({ type: "voice" });
    expect(started.socket.protocol).toBe("service.voice.v1");
    expect(started.socket.url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\/api\/runtime\/voice\/socket\?token=vst_/);
    expect(started.socket.token).toMatch(/^vst_/);
    expect(started.connection).toMatchObject({ adapter: "websocket", status: "pending", channelSegmentId: started.channelSegment.id });
    expect(started.channelSegment).toMatchObject({ conversationId: started.conversation.id, channel: "voice" });
    expect(ofType(started.events, "voice.segment.started")).toHaveLength(1);
    expect(started.eventsUrl).toBe(`${daemonUrl}/api/runtime/conversations/${started.conversation.id}/events/stream`);

    const { conversation } = await client.createConversation({ channel: "web" });
    const segment = await client.startVoiceSegment(conversation.id, { app: { page: "/" } });
    expect(segment.conversation.id).toBe(conversation.id);
    expect(segment.channelSegment.conversationId).toBe(conversation.id);
    expect(segment.socket.token).not.toBe(started.socket.token);
  });
});

describe("errors", () => {
  test("a failed response is a ServiceApiError with the envelope's message, the status, the body and the response", async () => {
    const error = await failure(client.getSnapshot("conv_missing"));
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe("ServiceApiError");
    expect(error.status).toBe(404);
    expect(error.message).toBe("conversation `conv_missing` was not found");
    expect(error.body).toEqual({
      error: {
        code: "CONVERSATION_NOT_FOUND",
        message: "conversation `conv_missing` was not found",
        status: 404,
        requestId: error.response.headers.get("x-request-id"),
      },
    });
    expect(error.requestId).toMatch(/^req_/);
    expect(error.response).toBeInstanceOf(Response);
    expect(error.response.status).toBe(404);
    expect(error.response.url).toBe(`${daemonUrl}/api/runtime/conversations/conv_missing/snapshot`);

    const { conversation } = await client.createConversation();
    const prompt = await failure(client.submitWidget(conversation.id, { promptId: "prm_nope", widgetKind: "form", output: {} }));
    expect(prompt.status).toBe(404);
    expect(prompt.code).toBe("PROMPT_NOT_FOUND");

    const limit = await failure(client.listEvents(conversation.id, { limit: 0 }));
    expect(limit.status).toBe(422);
    expect(limit.message).toContain("limit");

    const empty = await failure(client.sendMessage(conversation.id, ""));
    expect(empty.status).toBe(422);

    const unknown = await failure(client.sendMessage("conv_missing", "hello"));
    expect(unknown.status).toBe(404);
  });

  test("a route that does not exist (a wrong base URL) is a ServiceApiError too", async () => {
    const wrong = createServiceClient({ baseUrl: `${daemonUrl}/api/nothing` });
    const error = await failure(wrong.createConversation());
    expect(error.status).toBe(404);
    expect(error.code).toBe("NOT_FOUND");
  });
});

describe("client options", () => {
  test("headers, credentials and the requestOptions resolver shape every request", async () => {
    const contexts: ServiceRequestContext[] = [];
    const seen: { url: string; headers: Headers; credentials: RequestCredentials | undefined }[] = [];
    const tracing = createServiceClient({
      baseUrl: `${daemonUrl}/api/runtime/`,
      headers: { "x-app": "shared" },
      credentials: "include",
      requestOptions: (context) => {
        contexts.push(context);
        return { headers: { "x-operation": context.operation } };
      },
      fetch: (input, init) => {
        seen.push({ url: String(input), headers: new Headers(init?.headers), credentials: init?.credentials });
        return fetch(input, init);
      },
    });
    const { conversation } = await tracing.createConversation({ id: `conv_opts_${Date.now()}` });
    await tracing.sendMessage(conversation.id, "hello");
    await tracing.listEvents(conversation.id, { afterOffset: 1 });

    expect(contexts).toEqual([
      { operation: "createConversation", method: "POST", url: `${daemonUrl}/api/runtime/conversations`, conversationId: conversation.id },
      { operation: "sendMessage", method: "POST", url: `${daemonUrl}/api/runtime/conversations/${conversation.id}/messages`, conversationId: conversation.id },
      { operation: "listEvents", method: "GET", url: `${daemonUrl}/api/runtime/conversations/${conversation.id}/events?afterOffset=1`, conversationId: conversation.id },
    ]);
    for (const [index, request] of seen.entries()) {
      expect(request.headers.get("x-app")).toBe("shared");
      expect(request.headers.get("x-operation")).toBe(contexts[index]!.operation);
      expect(request.credentials).toBe("include");
    }

    const objectOptions = createServiceClient({
      baseUrl: `${daemonUrl}/api/runtime`,
      requestOptions: { headers: { "x-fixed": "yes" }, cache: "no-store" },
      fetch: (input, init) => {
        expect(new Headers(init?.headers).get("x-fixed")).toBe("yes");
        expect(init?.cache).toBe("no-store");
        return fetch(input, init);
      },
    });
    expect((await objectOptions.getSnapshot(conversation.id)).snapshot.conversationId).toBe(conversation.id);
  });

  test("a signal aborts a request", async () => {
    const { conversation } = await client.createConversation();
    const controller = new AbortController();
    controller.abort();
    await expect(client.sendMessage(conversation.id, "hello", { signal: controller.signal })).rejects.toMatchObject({ name: "AbortError" });
  });

  test("createServiceClient needs a baseUrl", () => {
    // @ts-expect-error the option is required.
    expect(() => createServiceClient({})).toThrow(/baseUrl/);
  });
});
