// Writes are safe to send again: every POST carries an Idempotency-Key, the same for its
// retries, and the daemon runs it once. Checked against the real daemon, with the
// connection dropped under one request by the caller's own fetch.

import { expect, inject, test } from "vitest";
import { createServiceClient } from "../src/index.js";

const daemonUrl = inject("daemonUrl");

test("a write whose first attempt never reached the daemon is sent again with the same key", async () => {
  const sent: Array<string | null> = [];
  let failNext = true;
  const client = createServiceClient({
    baseUrl: `${daemonUrl}/api/runtime`,
    fetch: async (input, init) => {
      sent.push(new Headers(init?.headers).get("idempotency-key"));
      if (failNext) {
        failNext = false;
        throw new TypeError("fetch failed: the network went away");
      }
      return fetch(input, init);
    },
  });
  const created = await client.createConversation();
  expect(sent).toHaveLength(2);
  expect(sent[0]).toMatch(/^[0-9a-f-]{32,36}$/);
  expect(sent[1]).toBe(sent[0]);

  // A retry of a write that did reach the daemon gets its first answer, and runs nothing.
  const key = "ts-retry-1";
  const message = { message: "Where is my order?" };
  const path = `${daemonUrl}/api/runtime/conversations/${created.conversation.id}/messages`;
  const send = () =>
    fetch(path, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": key },
      body: JSON.stringify(message),
    });
  const first = await send();
  const again = await send();
  expect(again.status).toBe(first.status);
  expect(again.headers.get("idempotent-replayed")).toBe("true");
  expect(await again.json()).toEqual(await first.json());
  const { events } = await client.listEvents(created.conversation.id);
  expect(events.filter((event) => event.type === "message" && event.data.role === "user")).toHaveLength(1);
});

test("no retry is made when told so", async () => {
  let calls = 0;
  const refusing = createServiceClient({
    baseUrl: `${daemonUrl}/api/runtime`,
    retries: 0,
    fetch: async () => {
      calls += 1;
      throw new TypeError("fetch failed");
    },
  });
  await expect(refusing.listConversations()).rejects.toThrow("fetch failed");
  expect(calls).toBe(1);
});
