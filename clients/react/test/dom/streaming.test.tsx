// A reply written by a language model streams into the chat as it is written, then the
// event stream's message takes its place: one reply, never two.

import { cleanup, fireEvent, render, renderHook, screen, waitFor } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";

import { ServiceChatWidget, useServiceChat, type ServiceChatStatus } from "../../src/index.js";
import { testClient } from "../support/client.js";

declare global {
  var IS_REACT_ACT_ENVIRONMENT: boolean | undefined;
}

afterEach(cleanup);

describe("useServiceChat with a language model", () => {
  it("shows the reply growing piece by piece with status streaming, then the logged message once", async () => {
    const client = testClient("cairnModelUrl");
    const statuses: ServiceChatStatus[] = [];
    const replies: { text: string; status: string }[] = [];
    const pending = new Set<string | undefined>();
    const { result } = renderHook(() => {
      const chat = useServiceChat({ client });
      pending.add(chat.pendingMessageRole);
      if (statuses[statuses.length - 1] !== chat.status) statuses.push(chat.status);
      const reply = chat.messages.find((message) => message.role === "assistant");
      const last = replies[replies.length - 1];
      if (reply !== undefined && (last?.text !== reply.text || last.status !== reply.status)) {
        replies.push({ text: reply.text, status: reply.status });
      }
      return chat;
    });
    // Rendered as a browser would (not batched into one `act`).
    const actEnvironment = globalThis.IS_REACT_ACT_ENVIRONMENT;
    globalThis.IS_REACT_ACT_ENVIRONMENT = false;
    try {
      expect(await result.current.sendMessage("I would like to book a demo")).toBe(true);
      await waitFor(() => {
        expect(result.current.messages.map(({ role, text, status }) => ({ role, text, status }))).toEqual([
          { role: "user", text: "I would like to book a demo", status: "sent" },
          { role: "assistant", text: "Happy to help you book a demo.", status: "sent" },
        ]);
        // The stream's events may render before the send's answer does.
        expect(result.current.status).toBe("idle");
      }, { timeout: 10_000 });
    } finally {
      globalThis.IS_REACT_ACT_ENVIRONMENT = actEnvironment;
    }
    // In order (React may batch away the short `starting`), `streaming` while it was written.
    const order: ServiceChatStatus[] = ["idle", "starting", "sending", "streaming", "idle"];
    let at = 0;
    for (const status of statuses) {
      at = order.indexOf(status, at);
      expect(at, `statuses ${statuses.join(" → ")}`).toBeGreaterThanOrEqual(0);
    }
    expect(statuses.slice(-2)).toEqual(["streaming", "idle"]);
    // The reply grew while it was written, then became the logged message.
    const streamed = replies.filter((reply) => reply.status === "streaming").map((reply) => reply.text);
    expect(streamed[0]).toBe("Happy ");
    expect(streamed).toContain("Happy to help ");
    expect(streamed.length).toBeGreaterThanOrEqual(3);
    expect(replies[replies.length - 1]).toEqual({ text: "Happy to help you book a demo.", status: "sent" });
    // The hook said a reply was awaited (a typing indicator's cue), and that it came.
    expect(pending.has("assistant")).toBe(true);
    expect(result.current.pendingMessageRole).toBeUndefined();
    expect(result.current.lifecycle).toBe("active");
  });

  it("the widget shows a typing indicator until the reply starts", async () => {
    const client = testClient("cairnModelUrl");
    render(<ServiceChatWidget client={client} />);
    let typing = false;
    const observer = new MutationObserver(() => {
      if (document.querySelector("[aria-label='The assistant is typing']")) typing = true;
    });
    observer.observe(document.body, { subtree: true, childList: true });
    try {
      fireEvent.change(screen.getByLabelText("Message"), { target: { value: "I would like to book a demo" } });
      fireEvent.click(screen.getByRole("button", { name: "Send" }));
      await screen.findByText("Happy to help you book a demo.", {}, { timeout: 10_000 });
    } finally {
      observer.disconnect();
    }
    expect(typing).toBe(true);
    await waitFor(() => expect(screen.queryByLabelText("The assistant is typing")).toBeNull());
  });
});
