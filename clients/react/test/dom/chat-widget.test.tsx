// The chat widget against the real daemon: typing, the concierge's form and rating widgets,
// custom renderers, errors, accessible markup.

import { StrictMode } from "react";
import { act, cleanup, fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import { afterEach, describe, expect, inject, it } from "vitest";

import { ServiceChatWidget, type ServiceChatWidgetSubmitEvent, type WidgetRendererProps } from "../../src/index.js";
import { testClient } from "../support/client.js";

afterEach(cleanup);

const client = testClient();
const WAIT = { timeout: 10_000 };

function send(text: string) {
  fireEvent.change(screen.getByLabelText("Message"), { target: { value: text } });
  fireEvent.click(screen.getByRole("button", { name: "Send" }));
}

describe("ServiceChatWidget", () => {
  it("books a demo through the built-in form renderer", async () => {
    const submitted: ServiceChatWidgetSubmitEvent[] = [];
    let conversationId: string | undefined;
    // In StrictMode, as apps develop: effects run twice, the chat must not show things twice.
    render(
      <StrictMode>
      <ServiceChatWidget
        client={client}
        title="Concierge"
        placeholder="Ask us anything"
        onConversationCreated={(id) => (conversationId = id)}
        onWidgetSubmit={(event) => submitted.push(event)}
        appearance={{ accentColor: "rgb(10, 20, 30)", borderRadius: "4px" }}
      />
      </StrictMode>,
    );
    const region = screen.getByRole("region", { name: "Concierge" });
    expect(region.style.getPropertyValue("--cairn-chat-accent")).toBe("rgb(10, 20, 30)");
    expect(region.style.getPropertyValue("--cairn-chat-radius")).toBe("4px");
    expect(screen.getByPlaceholderText("Ask us anything")).toBe(screen.getByLabelText("Message"));
    // Nothing to send yet.
    expect(screen.getByRole("button", { name: "Send" })).toHaveProperty("disabled", true);

    send("I would like to book a demo");
    const log = screen.getByRole("log");
    await within(log).findByText("Happy to set that up. Where can we reach you?", {}, WAIT);
    expect(within(log).getAllByText("I would like to book a demo")).toHaveLength(1);
    expect(screen.getByLabelText("Message")).toHaveProperty("value", "");

    // The concierge's form: one labelled field per name, email typed as such.
    const name = await within(log).findByLabelText("Name", {}, WAIT);
    const email = within(log).getByLabelText("Email");
    expect(email.getAttribute("type")).toBe("email");
    fireEvent.change(name, { target: { value: "Ada Lovelace" } });
    fireEvent.change(email, { target: { value: "ada@example.com" } });
    fireEvent.click(within(log).getByRole("button", { name: "Submit" }));

    await within(log).findByText(/^Thanks Ada Lovelace, we will write to ada@example.com to find a time.\s+Anything else I can help with\?$/, {}, WAIT);
    expect(submitted).toEqual([
      { kind: "form", promptId: expect.stringMatching(/^prm_/), output: { name: "Ada Lovelace", email: "ada@example.com" } },
    ]);
    // The answered form stays, showing what was sent, and takes no more input.
    expect(within(log).getByLabelText("Name")).toHaveProperty("value", "Ada Lovelace");
    expect(within(log).getByRole("button", { name: "Sent" })).toBeTruthy();
    expect(within(log).getByLabelText("Name").closest("fieldset")).toHaveProperty("disabled", true);

    // The runtime's log agrees: one submission, the journey done.
    const { events } = await client.listEvents(conversationId!);
    const submissions = events.filter((event) => event.type === "prompt.submitted");
    expect(submissions.map((event) => event.data.output)).toEqual([{ name: "Ada Lovelace", email: "ada@example.com" }]);
    expect(events.some((event) => event.type === "journey.completed" && event.data.journeyId === "book_demo")).toBe(true);
  });

  it("renders the rating widget of the feedback journey and sends the chosen value", async () => {
    const { conversation } = await client.createConversation({});
    render(<ServiceChatWidget client={client} conversationId={conversation.id} />);
    await client.emitJourneyEvent(conversation.id, "feedback.requested", { payload: {} });
    const log = screen.getByRole("log");
    await within(log).findByText("How did we do today?", {}, WAIT);
    const four = await within(log).findByRole("button", { name: "4 of 5" }, WAIT);
    expect(within(log).getAllByRole("button", { name: /of 5$/ })).toHaveLength(5);
    fireEvent.click(four);
    await within(log).findByText("Thank you! Anything we could do better? Just type it.", {}, WAIT);
    expect(within(log).getByRole("button", { name: "4 of 5" }).getAttribute("aria-pressed")).toBe("true");
    // The reply can show (from the stream) before the answer's request returns; until then
    // the widget is busy and its Send button disabled, as a visitor would find it.
    fireEvent.change(screen.getByLabelText("Message"), { target: { value: "More coffee" } });
    await waitFor(() => expect(screen.getByRole("button", { name: "Send" })).toHaveProperty("disabled", false), WAIT);
    fireEvent.click(screen.getByRole("button", { name: "Send" }));
    await within(log).findByText("Thanks for the feedback, it helps.", {}, WAIT);
  });

  it("uses a renderer given for a kind instead of the built-in one", async () => {
    const seen: WidgetRendererProps[] = [];
    function OneClickForm(props: WidgetRendererProps) {
      seen.push(props);
      return (
        <button type="button" disabled={props.disabled} onClick={() => props.submit({ name: "Grace", email: "grace@example.com" })}>
          Use my saved details
        </button>
      );
    }
    render(<ServiceChatWidget client={client} widgets={{ form: OneClickForm }} sendLabel="Go" />);
    fireEvent.change(screen.getByLabelText("Message"), { target: { value: "book a demo" } });
    fireEvent.click(screen.getByRole("button", { name: "Go" }));
    const button = await screen.findByRole("button", { name: "Use my saved details" }, WAIT);
    await waitFor(() => expect(button).toHaveProperty("disabled", false), WAIT);
    expect(seen[seen.length - 1]).toMatchObject({ kind: "form", input: { fields: ["name", "email"] }, submitted: false });
    fireEvent.click(button);
    await screen.findByText(/^Thanks Grace, we will write to grace@example.com to find a time./, {}, WAIT);
    expect(seen[seen.length - 1]).toMatchObject({ submitted: true, output: { name: "Grace", email: "grace@example.com" } });
    expect(screen.queryByLabelText("Name")).toBeNull();
  });

  it("shows a refused message in plain words, never the server's, and the message as not sent", async () => {
    render(<ServiceChatWidget client={client} />);
    send("hello");
    await screen.findByText("Hi! I can book a demo for you, or put you through to a person.", {}, WAIT);
    send("x".repeat(40_000));
    const alert = await screen.findByRole("alert", {}, WAIT);
    expect(alert.textContent).toBe("That message couldn't be sent. Try a shorter one.");
    expect(screen.getByText("Not sent")).toBeTruthy();
    expect(screen.getByRole("region").getAttribute("data-status")).toBe("error");
  });

  it("a closed conversation disables the input, says so plainly, and starts again", async () => {
    const { conversation } = await client.createConversation({});
    await client.sendMessage(conversation.id, "hello");
    await client.closeConversation(conversation.id);
    const created: string[] = [];
    render(<ServiceChatWidget client={client} conversationId={conversation.id} onConversationCreated={(id) => created.push(id)} />);
    await screen.findByText("This conversation has ended.", {}, WAIT);
    const input = screen.getByLabelText("Message");
    expect(input).toHaveProperty("disabled", true);
    expect(screen.getByRole("button", { name: "Send" })).toHaveProperty("disabled", true);
    // Nothing of the server's own words: no ids, no "resume it first".
    const region = screen.getByRole("region");
    expect(region.textContent).not.toMatch(/conv_|resume/);

    fireEvent.click(screen.getByRole("button", { name: "Start a new conversation" }));
    await waitFor(() => expect(screen.getByLabelText("Message")).toHaveProperty("disabled", false), WAIT);
    expect(screen.queryByText("hello")).toBeNull();
    send("hello");
    await screen.findByText("Hi! I can book a demo for you, or put you through to a person.", {}, WAIT);
    expect(created).toHaveLength(1);
    expect(created[0]).not.toBe(conversation.id);
  });

  it("shows a notice when a person takes over, and the open prompt closes with its conversation", async () => {
    render(<ServiceChatWidget client={client} />);
    send("I would like to book a demo");
    const log = screen.getByRole("log");
    await within(log).findByLabelText("Name", {}, WAIT);
    send("Can I talk to a human please?");
    await screen.findByText("A person from the team is joining this conversation. They will reply here.", {}, WAIT);
    // While a person has the conversation nobody types in the agent's name.
    expect(screen.queryByLabelText("The assistant is typing")).toBeNull();
    expect(screen.getByLabelText("Message")).toHaveProperty("disabled", false);
  });

  it("gives an answer's sources as links, without repeating them as text", async () => {
    const daemon = inject("cairnUrl");
    const stored = await fetch(`${daemon}/api/memories`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        content: "Parking for visitors is on level -2; ask reception for a ticket.",
        scope: "global",
        tags: ["concierge"],
        metadata: { title: "Visitor guide", url: "https://help.example.com/visitors" },
      }),
    });
    expect(stored.status).toBe(201);
    render(<ServiceChatWidget client={client} />);
    send("Where is visitor parking?");
    const link = await screen.findByRole("link", { name: "Visitor guide" }, WAIT);
    expect(link.getAttribute("href")).toBe("https://help.example.com/visitors");
    expect(link.getAttribute("rel")).toBe("noopener noreferrer");
    const answer = link.closest("[data-role='assistant']")!;
    expect(answer.textContent).toContain("level -2");
    expect(answer.textContent).not.toContain("Sources:");
  });

  it("sends with Enter, and keeps Shift+Enter for a new line", async () => {
    render(<ServiceChatWidget client={client} />);
    const input = screen.getByLabelText("Message");
    fireEvent.change(input, { target: { value: "hello" } });
    fireEvent.keyDown(input, { key: "Enter", shiftKey: true });
    expect(input).toHaveProperty("value", "hello");
    await act(async () => {
      fireEvent.keyDown(input, { key: "Enter" });
    });
    await screen.findByText("Hi! I can book a demo for you, or put you through to a person.", {}, WAIT);
  });
});
