import { expect, screenshot, test } from "./fixtures";

interface Created {
  conversation: { id: string };
}

test("the conversation list shows each one's channel, last message, update time and lifecycle, live", async ({ page, daemon }) => {
  const { conversation } = await daemon.api<Created>("POST", "/api/runtime/conversations", { channel: "sms" });
  await daemon.api("POST", `/api/runtime/conversations/${conversation.id}/messages`, { message: "hello" });
  await page.goto("/conversations");
  const entry = page.getByRole("listitem", { name: `conversation ${conversation.id}` });
  await expect(entry.getByTestId("channel")).toHaveText("sms");
  await expect(entry.getByTestId("last-message")).toHaveText("Agent: Hi! I can book a demo for you, or put you through to a person.");
  await expect(entry.locator("time")).not.toBeEmpty();
  await expect(entry).toContainText("active");

  // Handed off elsewhere: the list says so without a reload.
  await daemon.api("POST", `/api/runtime/conversations/${conversation.id}/handoff`, { reason: "billing" });
  await expect(entry).toContainText("handoff", { timeout: 10_000 });
  await screenshot(page, "conversation-list");
});

test("the replay shows prompts with their answers, the handoff and close markers, and sources as links", async ({ page, daemon }) => {
  await daemon.api("POST", "/api/memories", {
    content: "The lost and found desk is next to the main entrance.",
    scope: "global",
    tags: ["concierge"],
    metadata: { title: "Visitor guide", url: "https://help.example.com/visitors" },
  });
  const { conversation } = await daemon.api<Created>("POST", "/api/runtime/conversations", {});
  const base = `/api/runtime/conversations/${conversation.id}`;
  await daemon.api("POST", `${base}/messages`, { message: "Where is the lost and found desk?" });
  const booking = await daemon.api<{ events: { type: string; data: { promptId?: string } }[] }>("POST", `${base}/messages`, {
    message: "I would like to book a demo",
  });
  const promptId = booking.events.find((event) => event.type === "prompt.opened")!.data.promptId!;
  await daemon.api("POST", `${base}/widgets`, {
    promptId,
    widgetKind: "form",
    output: { name: "Ada", email: "ada@example.com" },
  });
  await daemon.api("POST", `${base}/handoff`, { reason: "wants a person" });
  await daemon.api("POST", `${base}/close`, { reason: "solved" });

  await page.goto(`/conversations/${conversation.id}`);
  const transcript = page.getByRole("region", { name: `conversation ${conversation.id}` }).getByRole("list", { name: "transcript" });
  const link = transcript.getByRole("link", { name: "Visitor guide" });
  await expect(link).toHaveAttribute("href", "https://help.example.com/visitors");
  await expect(transcript).not.toContainText("Sources:");
  const prompt = transcript.getByRole("listitem", { name: "form prompt" });
  await expect(prompt).toContainText("form · answered");
  await expect(prompt).toContainText("answer: email: ada@example.com, name: Ada");
  await expect(transcript.getByRole("separator", { name: "Handed off to a person: wants a person" })).toBeVisible();
  await expect(transcript.getByRole("separator", { name: "Closed: solved" })).toBeVisible();
  await screenshot(page, "conversation-timeline");
});

test("the events view lists each event by offset and type, its data folded until opened", async ({ page, daemon }) => {
  const { conversation } = await daemon.api<Created>("POST", "/api/runtime/conversations", {});
  await daemon.api("POST", `/api/runtime/conversations/${conversation.id}/messages`, { message: "hello" });
  await page.goto(`/conversations/${conversation.id}`);
  const detail = page.getByRole("region", { name: `conversation ${conversation.id}` });
  await detail.getByLabel("View").selectOption("events");
  const events = detail.getByRole("list", { name: "events" });
  const created = events.locator("details").first();
  await expect(created.locator("summary")).toContainText("#0 conversation.created");
  const data = created.locator("pre.json");
  await expect(data).toBeHidden();
  const user = events.locator("details").filter({ hasText: "user: hello" });
  await expect(user.locator("summary")).toContainText("message");
  await user.locator("summary").click();
  await expect(user.locator("pre.json")).toBeVisible();
  await expect(user.locator("pre.json")).toContainText('"role": "user"');
  await screenshot(page, "conversation-events");
});
