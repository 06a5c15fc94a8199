// The chat hook against the real daemon and its bundled concierge agent.

import { ServiceApiError } from "@cairn/client";
import { act, cleanup, renderHook, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";

declare global {
  var IS_REACT_ACT_ENVIRONMENT: boolean | undefined;
}

import type { ChatMessage } from "@cairn/client";

import { useServiceChat, type ServiceChatStatus } from "../../src/index.js";
import { testClient } from "../support/client.js";

afterEach(cleanup);

const client = testClient();
const WAIT = { timeout: 10_000 };

describe("useServiceChat", () => {
  it("creates the conversation on first send and shows the demo agent's reply once, from the stream", async () => {
    const created: string[] = [];
    const statuses: ServiceChatStatus[] = [];
    let firstShown: ChatMessage[] | undefined;
    let firstShownStatus: ServiceChatStatus | undefined;
    const { result } = renderHook(() => {
      const chat = useServiceChat({ client, channel: "web", onConversationCreated: (id) => created.push(id) });
      if (statuses[statuses.length - 1] !== chat.status) statuses.push(chat.status);
      if (firstShown === undefined && chat.messages.length > 0) {
        firstShown = chat.messages;
        firstShownStatus = chat.status;
      }
      return chat;
    });
    expect(result.current.status).toBe("idle");
    expect(result.current.conversationId).toBeUndefined();

    // Rendered as a browser would (not batched into one `act`), so every status is seen.
    const actEnvironment = globalThis.IS_REACT_ACT_ENVIRONMENT;
    globalThis.IS_REACT_ACT_ENVIRONMENT = false;
    try {
      expect(await result.current.sendMessage("I would like to book a demo")).toBe(true);
    } finally {
      globalThis.IS_REACT_ACT_ENVIRONMENT = actEnvironment;
    }

    await waitFor(() => {
      expect(result.current.messages.map(({ role, text, status }) => ({ role, text, status }))).toEqual([
        { role: "user", text: "I would like to book a demo", status: "sent" },
        { role: "assistant", text: "Happy to set that up. Where can we reach you?", status: "sent" },
      ]);
      // Outside `act` React renders on its own schedule: the stream's events may show
      // before the render that follows the send's answer.
      expect(result.current.status).toBe("idle");
    }, WAIT);
    // The user's message showed at once, before the runtime had it.
    expect(firstShown).toEqual([expect.objectContaining({ role: "user", text: "I would like to book a demo", status: "sending" })]);
    expect(created).toHaveLength(1);
    expect(result.current.conversationId).toBe(created[0]);
    // Created, sent, done, in that order; React may batch away a status that lasted less
    // than a render (without a language model the reply is one delta that comes with the
    // result; streaming in pieces is tested with a model in streaming.test.tsx).
    const order: ServiceChatStatus[] = ["idle", "starting", "sending", "streaming", "idle"];
    let at = 0;
    for (const status of statuses) {
      at = order.indexOf(status, at);
      expect(at, `statuses ${statuses.join(" → ")}`).toBeGreaterThanOrEqual(0);
    }
    expect(statuses[statuses.length - 1]).toBe("idle");
    // The message showed while the chat was busy with it.
    expect(["starting", "sending", "streaming"]).toContain(firstShownStatus);
    // Every message has its offset in the log: they came from the event stream.
    expect(result.current.messages.every((message) => typeof message.offset === "number")).toBe(true);
    expect(result.current.prompts).toEqual([
      expect.objectContaining({ kind: "form", input: { fields: ["name", "email"] }, status: "open" }),
    ]);
    expect(result.current.activities).toContainEqual(expect.objectContaining({ label: "Understood: book demo", status: "done" }));

    // The form's answer moves the journey on; the prompt shows as submitted.
    const promptId = result.current.prompts[0]!.promptId;
    await act(async () => {
      expect(await result.current.submitWidget({ promptId, output: { name: "Ada", email: "ada@example.com" } })).toBe(true);
    });
    await waitFor(() => {
      expect(result.current.messages.map((message) => message.text)).toEqual([
        "I would like to book a demo",
        "Happy to set that up. Where can we reach you?",
        "Thanks Ada, we will write to ada@example.com to find a time.\n\nAnything else I can help with?",
      ]);
    }, WAIT);
    expect(result.current.prompts).toEqual([
      expect.objectContaining({ promptId, status: "submitted", output: { name: "Ada", email: "ada@example.com" } }),
    ]);

    // clearPrompt hides it from the hook; the log keeps it.
    act(() => result.current.clearPrompt(promptId));
    expect(result.current.prompts).toEqual([]);
    const { events } = await client.listEvents(created[0]!);
    expect(events.filter((event) => event.type === "prompt.submitted")).toHaveLength(1);
  });

  it("applies formatActivityLabel to the activities it shows", async () => {
    const { result } = renderHook(() =>
      useServiceChat({ client, formatActivityLabel: ({ kind, name }) => (kind === "intent" ? `intent ${name}` : undefined) }),
    );
    await act(async () => {
      await result.current.sendMessage("hello");
    });
    await waitFor(() => expect(result.current.activities).toContainEqual(expect.objectContaining({ label: "intent greeting" })), WAIT);
  });

  it("shows an existing conversation's history and follows what others add to it", async () => {
    const { conversation } = await client.createConversation({});
    await client.sendMessage(conversation.id, "hello");
    const { result } = renderHook(() => useServiceChat({ client, conversationId: conversation.id }));
    await waitFor(() => {
      expect(result.current.messages.map((message) => message.text)).toEqual([
        "hello",
        "Hi! I can book a demo for you, or put you through to a person.",
      ]);
    }, WAIT);
    expect(result.current.conversationId).toBe(conversation.id);
    await waitFor(() => expect(result.current.status).toBe("idle"), WAIT);

    // Another tab (here the client itself) talks in the same conversation.
    await client.sendMessage(conversation.id, "thanks");
    await waitFor(() => expect(result.current.messages.map((message) => message.text).slice(2)).toEqual(["thanks", "You're welcome!"]), WAIT);
  });

  it("puts a refused send in error and status, and marks the message failed", async () => {
    const { conversation } = await client.createConversation({});
    await client.closeConversation(conversation.id);
    const { result } = renderHook(() => useServiceChat({ client, conversationId: conversation.id }));
    await waitFor(() => expect(result.current.status).toBe("idle"), WAIT);
    await act(async () => {
      expect(await result.current.sendMessage("anyone there?")).toBe(false);
    });
    expect(result.current.status).toBe("error");
    expect(result.current.error).toBeInstanceOf(ServiceApiError);
    expect((result.current.error as ServiceApiError).status).toBe(409);
    expect(result.current.messages).toEqual([expect.objectContaining({ text: "anyone there?", status: "failed" })]);
  });

  it("puts an unknown conversation in error", async () => {
    const { result } = renderHook(() => useServiceChat({ client, conversationId: "conv_does_not_exist" }));
    await waitFor(() => expect(result.current.status).toBe("error"), WAIT);
    expect((result.current.error as ServiceApiError).status).toBe(404);
  });

  it("puts a refused widget answer in error and leaves the prompt open", async () => {
    const { result } = renderHook(() => useServiceChat({ client }));
    await act(async () => {
      await result.current.sendMessage("book a demo");
    });
    await waitFor(() => expect(result.current.prompts).toHaveLength(1), WAIT);
    await act(async () => {
      expect(await result.current.submitWidget({ promptId: "prm_unknown", widgetKind: "form", output: {} })).toBe(false);
    });
    expect(result.current.status).toBe("error");
    expect((result.current.error as ServiceApiError).status).toBe(404);
    expect(result.current.prompts[0]?.status).toBe("open");
  });
});

describe("useServiceChat switching conversations", () => {
  it("shows the conversation it is given, and a new one when it changes", async () => {
    const first = (await client.createConversation({})).conversation.id;
    const second = (await client.createConversation({})).conversation.id;
    await client.sendMessage(first, "hello");
    await client.sendMessage(second, "thanks");
    const { result, rerender } = renderHook(({ id }: { id: string }) => useServiceChat({ client, conversationId: id }), {
      initialProps: { id: first },
    });
    await waitFor(() => expect(result.current.messages.map((message) => message.text)[0]).toBe("hello"), WAIT);
    rerender({ id: second });
    await waitFor(() => expect(result.current.messages.map((message) => message.text)).toEqual(["thanks", "You're welcome!"]), WAIT);
    expect(result.current.conversationId).toBe(second);
  });
});
