import { expect, openChat, screenshot, test } from "./fixtures";

test("book a demo with the bundled agent through the chat widget", async ({ page, daemon }) => {
  await page.goto("/conversations");
  const { chat, log } = await openChat(page, "I would like to book a demo");
  await expect(chat).toBeVisible();
  await expect(log).toContainText("I would like to book a demo");
  await expect(log).toContainText("Happy to set that up. Where can we reach you?");

  // The agent's form widget, rendered by @cairn/react in the log.
  const form = log.locator("form").filter({ has: page.getByLabel("Email") });
  await form.getByLabel("Name").fill("Ada Lovelace");
  await form.getByLabel("Email").fill("ada@example.com");
  await screenshot(page, "chat-demo-form");
  await form.getByRole("button", { name: "Submit" }).click();
  await expect(log).toContainText("Thanks Ada Lovelace, we will write to ada@example.com to find a time.");
  await expect(form.getByRole("button", { name: "Sent" })).toBeDisabled();
  await screenshot(page, "chat-demo-booked");

  // The conversation is in the daemon, and the console replays it.
  const conversationId = await page.locator(".chat-panel .voice code").textContent();
  expect(conversationId).toMatch(/^conv_/);
  const replay = await daemon.api<{ messages: { role: string; text: string }[]; openPrompts: unknown[] }>(
    "GET",
    `/api/runtime/conversations/${conversationId}/replay`,
  );
  expect(
    replay.messages.some(
      (message) =>
        message.role === "assistant" &&
        message.text.startsWith("Thanks Ada Lovelace, we will write to ada@example.com to find a time."),
    ),
  ).toBe(true);
  expect(replay.openPrompts).toEqual([]);

  await page.getByRole("list", { name: "conversation list" }).getByRole("link", { name: conversationId! }).click();
  const detail = page.getByRole("region", { name: `conversation ${conversationId}` });
  const transcript = detail.getByRole("list", { name: "transcript" });
  await expect(transcript).toContainText("Thanks Ada Lovelace");
  await detail.getByLabel("View").selectOption("events");
  await expect(detail.getByRole("list", { name: "events" })).toContainText("prompt.opened");
  await screenshot(page, "conversation-replay");
});

test("the live event stream shows what happens in a conversation as it happens", async ({ page, daemon }) => {
  const { conversation } = await daemon.api<{ conversation: { id: string } }>("POST", "/api/runtime/conversations", {});
  await daemon.api("POST", `/api/runtime/conversations/${conversation.id}/messages`, { message: "hello" });
  await page.goto(`/conversations/${conversation.id}`);
  const detail = page.getByRole("region", { name: `conversation ${conversation.id}` });
  const transcript = detail.getByRole("list", { name: "transcript" });
  await expect(transcript).toContainText("hello");
  await detail.getByLabel("Live").check();
  await expect(detail.getByRole("status")).toContainText("stream open");

  await daemon.api("POST", `/api/runtime/conversations/${conversation.id}/messages`, { message: "I would like to book a demo" });
  await expect(transcript).toContainText("Happy to set that up. Where can we reach you?");
  // Nothing twice: the replayed greeting and the streamed turn each appear once.
  await expect(transcript.getByText("hello", { exact: true })).toHaveCount(1);
  await expect(transcript.getByText("I would like to book a demo", { exact: true })).toHaveCount(1);
  await screenshot(page, "conversation-live");
});

test("the chat panel talks by voice: the microphone goes to the daemon's voice socket", async ({ page }) => {
  await page.goto("/conversations");
  await page.getByRole("button", { name: "New chat" }).click();
  const voice = page.getByLabel("voice", { exact: true });
  await voice.getByRole("button", { name: "Talk" }).click();
  // Permission, a voice conversation, the socket (allowed by the policy's connect-src) and
  // the capture worklet (a Blob URL script) all worked.
  // (Without the Whisper model the daemon says it cannot transcribe; the socket stays up.)
  await expect(voice.getByRole("status")).toHaveText(/^voice: connected/, { timeout: 20_000 });
  await expect(voice.locator("code")).toHaveText(/^conv_/);
  await screenshot(page, "chat-voice-connected");
  await voice.getByRole("button", { name: "Mute" }).click();
  await expect(voice.getByRole("button", { name: "Unmute" })).toBeVisible();
  await voice.getByRole("button", { name: "Stop talking" }).click();
  await expect(voice.getByRole("status")).toHaveText(/^voice: ended/);
});

test("the operator asks for feedback: the chat shows the agent's rating widget as it happens", async ({ page, daemon }) => {
  await page.goto("/conversations");
  const { chat, log } = await openChat(page, "hello");
  await expect(log).toContainText("Hi! I can book a demo for you, or put you through to a person.");
  const conversationId = (await page.locator(".chat-panel .voice code").textContent())!;

  // From the conversation's page, a journey event starts the feedback journey; the chat
  // follows the conversation's event stream and shows the rating widget.
  await page.getByRole("list", { name: "conversation list" }).getByRole("link", { name: conversationId }).click();
  const operate = page.getByRole("group", { name: "operate" });
  await expect(operate.getByLabel("Journey event")).toHaveValue("feedback.requested");
  await operate.getByRole("button", { name: "Send event" }).click();
  await expect(log).toContainText("How did we do today?");
  await log.getByRole("button", { name: "4 of 5" }).click();
  await expect(log).toContainText("Thank you! Anything we could do better? Just type it.");
  await chat.getByRole("textbox", { name: "Message" }).fill("Faster replies, please.");
  await chat.getByRole("button", { name: "Send" }).click();
  await expect(log).toContainText("Thanks for the feedback, it helps.");
  await screenshot(page, "chat-feedback-rating");

  // The journey stored it as a memory of the conversation (listed to operators, never
  // searched for other visitors).
  const stored = await daemon.api<{ memories: { content: string }[] }>("GET", "/api/memories?limit=500");
  expect(stored.memories.map((memory) => memory.content)).toContain("Feedback: rated 4 of 5. Faster replies, please.");

  await operate.getByRole("button", { name: "Close" }).click();
  await expect(page.getByRole("region", { name: `conversation ${conversationId}` })).toContainText("closed");
});
