// The chat reducer over event logs recorded from the real daemon (test/fixtures, written by
// `npm run record-fixtures`): the state a chat UI shows, and that replays, duplicates and
// late re-deliveries change nothing.

import { readFileSync } from "node:fs";
import { describe, expect, test } from "vitest";
import {
  collectSupportSourceLinks,
  formatSupportReferences,
  initialChatState,
  reduceChatRuntimeEvent,
  type ChatActivityLabelInput,
  type ChatEventReducerState,
  type ReduceChatRuntimeEventOptions,
  type RuntimeEvent,
  type SupportReference,
} from "./index.js";

function fixture(name: string): RuntimeEvent[] {
  const file = new URL(`../test/fixtures/${name}.json`, import.meta.url);
  return (JSON.parse(readFileSync(file, "utf8")) as { events: RuntimeEvent[] }).events;
}

function fold(events: RuntimeEvent[], state: ChatEventReducerState = initialChatState, options?: ReduceChatRuntimeEventOptions) {
  return events.reduce((current, event) => reduceChatRuntimeEvent(current, event, options), state);
}

function upTo(events: RuntimeEvent[], offset: number): ChatEventReducerState {
  return fold(events.filter((event) => event.offset <= offset));
}

const messageId = (events: RuntimeEvent[], offset: number) => events[offset]!.data.messageId as string;
const visible = (state: ChatEventReducerState) => state.messages.map((message) => [message.role, message.text, message.status]);

describe("a booking chat (book-demo.json)", () => {
  const events = fixture("book-demo");

  test("ends with the messages, activities and the submitted form a chat shows", () => {
    const state = fold(events);
    expect(state.lastOffset).toBe(33);
    expect(state.pendingMessageRole).toBeUndefined();
    expect(state.lifecycle).toBe("active");
    expect(visible(state)).toEqual([
      ["user", "hello", "sent"],
      ["assistant", "Hi! I can book a demo for you, or put you through to a person.", "sent"],
      ["user", "I'd like to book a demo", "sent"],
      ["assistant", "Happy to set that up. Where can we reach you?", "sent"],
      ["assistant", "Thanks Ada Lovelace, we will write to ada@example.com to find a time.\n\nAnything else I can help with?", "sent"],
      ["user", "thanks!", "sent"],
      ["assistant", "You're welcome!", "sent"],
    ]);
    expect(state.messages[1]).toEqual({
      id: messageId(events, 7),
      role: "assistant",
      text: "Hi! I can book a demo for you, or put you through to a person.",
      status: "sent",
      offset: 7,
    });
    expect(state.activities).toEqual([
      { id: events[2]!.data.activityId, label: "Understood: greeting", status: "done" },
      { id: events[9]!.data.activityId, label: "Understood: book demo", status: "done" },
      { id: events[13]!.data.activityId, label: "Getting a short form ready", status: "done" },
      { id: events[20]!.data.activityId, label: "Noting that down", status: "done" },
      { id: events[28]!.data.activityId, label: "Understood: thanks", status: "done" },
    ]);
    expect(state.prompts).toEqual([
      {
        promptId: events[14]!.data.promptId,
        kind: "form",
        input: { fields: ["name", "email"] },
        output: { name: "Ada Lovelace", email: "ada@example.com" },
        offset: 14,
        displayOffset: 16,
        status: "submitted",
      },
    ]);
  });

  test("shows each step as it happens: waiting for the agent, activities running, the form open", () => {
    expect(upTo(events, 8).pendingMessageRole).toBe("assistant");
    const thinking = upTo(events, 13);
    expect(thinking.activities.at(-1)).toEqual({ id: events[13]!.data.activityId, label: "Getting a short form ready", status: "running" });
    const opened = upTo(events, 14);
    expect(opened.prompts).toEqual([
      { promptId: events[14]!.data.promptId, kind: "form", input: { fields: ["name", "email"] }, offset: 14, status: "open" },
    ]);
    const asked = upTo(events, 16);
    expect(asked.prompts[0]).toMatchObject({ status: "open", displayOffset: 16 });
    expect(asked.pendingMessageRole).toBeUndefined();
    // Submitting the form waits for the agent again, until its reply.
    expect(upTo(events, 17).pendingMessageRole).toBe("assistant");
    expect(upTo(events, 17).prompts[0]).toMatchObject({ status: "submitted", output: { name: "Ada Lovelace" } });
    expect(upTo(events, 26).pendingMessageRole).toBeUndefined();
  });

  test("an event already applied returns the state itself: replays and duplicates change nothing", () => {
    const state = fold(events);
    for (const event of events) expect(reduceChatRuntimeEvent(state, event)).toBe(state);
    expect(fold(events, state)).toBe(state);
    const twice = fold(events.flatMap((event) => [event, event]));
    expect(twice).toEqual(state);
  });

  test("out-of-order re-delivery is ignored, and a resumed stream overlapping the first gives the same state", () => {
    const state = fold(events);
    const late = [...events.slice(0, 20), events[5]!, events[14]!, events[19]!, ...events.slice(20), events[0]!, events[16]!];
    expect(fold(late)).toEqual(state);
    const reconnected = fold(events.slice(15), fold(events.slice(0, 20)));
    expect(reconnected).toEqual(state);
  });

  test("formatActivityLabel relabels activities; undefined keeps the default", () => {
    const seen: ChatActivityLabelInput[] = [];
    const state = fold(events, initialChatState, {
      formatActivityLabel: (input) => {
        seen.push(input);
        return input.kind === "intent" ? `Thinking about ${input.name}` : undefined;
      },
    });
    expect(state.activities.map((activity) => activity.label)).toEqual([
      "Thinking about greeting",
      "Thinking about book_demo",
      "Getting a short form ready",
      "Noting that down",
      "Thinking about thanks",
    ]);
    expect(seen[0]).toEqual({ event: events[2], kind: "intent", defaultLabel: "Understood: greeting", name: "greeting" });
    expect(seen.map((input) => input.kind)).toEqual(["intent", "intent", "intent", "intent", "widget", "widget", "tool", "tool", "intent", "intent"]);
  });

  test("messages the UI showed before the log had them are replaced in place", () => {
    const before = upTo(events, 7);
    const sending: ChatEventReducerState = {
      ...before,
      messages: [...before.messages, { id: "local-1", role: "user", text: "I'd like to book a demo", status: "sending" }],
      pendingMessageRole: "user",
    };
    const sent = reduceChatRuntimeEvent(sending, events[8]!);
    expect(sent.messages).toHaveLength(3);
    expect(sent.messages[2]).toEqual({ id: messageId(events, 8), role: "user", text: "I'd like to book a demo", status: "sent", offset: 8 });
    expect(sent.pendingMessageRole).toBe("assistant");

    const streaming: ChatEventReducerState = {
      ...upTo(events, 15),
      messages: [...upTo(events, 15).messages, { id: "local-2", role: "assistant", text: "Happy to set", status: "streaming" }],
    };
    const replied = reduceChatRuntimeEvent(streaming, events[16]!);
    expect(replied.messages.map((message) => [message.id, message.status])).toEqual([
      [messageId(events, 1), "sent"],
      [messageId(events, 7), "sent"],
      [messageId(events, 8), "sent"],
      [messageId(events, 16), "sent"],
    ]);
  });

  test("the initial state is empty and stays untouched", () => {
    expect(initialChatState).toEqual({ messages: [], activities: [], prompts: [], lastOffset: -1 });
    fold(events);
    expect(initialChatState.messages).toEqual([]);
  });
});

describe("a feedback journey (feedback.json)", () => {
  const events = fixture("feedback");

  test("the rating widget, preamble and intermediate note, and the captured comment", () => {
    const state = fold(events);
    expect(visible(state)).toEqual([
      ["assistant", "How did we do today?", "sent"],
      ["assistant", "Thank you! Anything we could do better? Just type it.", "sent"],
      ["assistant", "One moment while I note your comment.", "sent"],
      ["assistant", "Saving your feedback…", "sent"],
      ["user", "Faster replies would be great", "sent"],
      ["assistant", "Thanks for the feedback, it helps.", "sent"],
    ]);
    expect(state.prompts).toEqual([
      { promptId: events[5]!.data.promptId, kind: "rating", input: { min: 1, max: 5 }, output: { value: 4 }, offset: 5, displayOffset: 7, status: "submitted" },
    ]);
    expect(state.pendingMessageRole).toBeUndefined();
    // A preamble is not the reply: the conversation still waits for the agent after it.
    expect(upTo(events, 8).pendingMessageRole).toBe("assistant");
    expect(upTo(events, 11).pendingMessageRole).toBeUndefined();
  });
});

describe("a handoff (handoff.json)", () => {
  const events = fixture("handoff");

  test("waits for nobody while a person has the conversation, and follows the lifecycle", () => {
    expect(upTo(events, 1).pendingMessageRole).toBe("assistant");
    expect(upTo(events, 8)).toMatchObject({ lifecycle: "handoff" });
    const handedOff = upTo(events, 9);
    expect(handedOff.pendingMessageRole).toBeUndefined();
    expect(handedOff.messages.at(-1)).toMatchObject({ role: "user", text: "Hello? Anyone there?", status: "sent" });
    expect(upTo(events, 10).lifecycle).toBe("active");
    expect(upTo(events, 11).pendingMessageRole).toBe("assistant");
    const closed = fold(events);
    expect(closed.lifecycle).toBe("closed");
    expect(closed.pendingMessageRole).toBeUndefined();
    expect(closed.messages.map((message) => message.text)).toEqual([
      "Can I talk to a human please?",
      "Of course. I'll pass this conversation to a person on the team.",
      "Hello? Anyone there?",
      "thanks",
      "You're welcome!",
    ]);
  });
});

describe("a conversation closed with a widget open", () => {
  const events = fixture("book-demo");
  const opened = events.find((event) => event.type === "prompt.opened")!;

  test("its prompts close with it and wait for nobody", () => {
    const open = upTo(events, opened.offset);
    expect(open.prompts.map((prompt) => prompt.status)).toEqual(["open"]);
    const closedEvent: RuntimeEvent = {
      ...events[opened.offset]!,
      id: "evt_closed",
      offset: opened.offset + 1,
      type: "conversation.closed",
      data: { reason: "visitor left" },
    };
    const closed = reduceChatRuntimeEvent(open, closedEvent);
    expect(closed.lifecycle).toBe("closed");
    expect(closed.pendingMessageRole).toBeUndefined();
    expect(closed.prompts.map((prompt) => [prompt.promptId, prompt.status])).toEqual([[opened.data.promptId, "closed"]]);
  });
});

describe("a voice call with barge-in (voice-barge-in.json)", () => {
  const events = fixture("voice-barge-in");

  test("a reply cut by the caller is aborted, and a later truncation cuts the text it kept", () => {
    const beforeTruncation = upTo(events, 14);
    expect(visible(beforeTruncation)).toEqual([
      ["user", "hello", "sent"],
      ["assistant", events[8]!.data.text, "aborted"],
      ["user", "I'd like to book a demo", "sent"],
      // On a call the form is asked for in words.
      [
        "assistant",
        "Happy to set that up. Where can we reach you?\n\nPlease tell me your name, and an e-mail address or phone number.",
        "sent",
      ],
    ]);
    expect(events[8]!.data.aborted).toBe(true);
    const state = fold(events);
    expect(state.messages[3]).toEqual({
      id: messageId(events, 14),
      role: "assistant",
      text: events[15]!.data.text,
      status: "aborted",
      offset: 14,
    });
    expect(events[15]!.data.text).toBe("Happy to set");
    expect(state.prompts).toEqual([]);
    expect(state.lastOffset).toBe(16);
    // The truncation delivered again (a resumed stream) changes nothing.
    expect(reduceChatRuntimeEvent(state, events[15]!)).toBe(state);
  });
});

describe("an answer from memory (memory-answer.json)", () => {
  const events = fixture("memory-answer");
  const answer = events.find((event) => event.type === "message" && event.data.role === "assistant")!;
  const references = answer.data.supportReferences as SupportReference[];

  test("the helpers rebuild the links and the sources line the daemon sent", () => {
    expect(references).toHaveLength(3);
    expect(collectSupportSourceLinks(references)).toEqual(answer.data.supportSourceLinks);
    expect(answer.data.text as string).toMatch(new RegExp(`\\n\\n${escape(formatSupportReferences(references))}$`));
    const state = fold(events);
    expect(state.activities).toEqual([{ id: events[2]!.data.activityId, label: "Looking through memory", status: "done" }]);
    expect(state.messages.at(-1)!.text.endsWith(formatSupportReferences(references))).toBe(true);
    // The links a UI renders as anchors.
    expect(state.messages.at(-1)!.sources).toEqual(answer.data.supportSourceLinks);
    expect(state.messages.at(-1)!.sources!.some((link) => link.url?.startsWith("http"))).toBe(true);
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
