// The chat hook as a browser page uses it in production: no API key, only a conversation
// token minted by the page's server side for one conversation.

import { createServiceClient, ServiceApiError } from "@cairn/client";
import { act, cleanup, renderHook, waitFor } from "@testing-library/react";
import { execFileSync } from "node:child_process";
import { EventSource } from "eventsource";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";

import { useServiceChat } from "../../src/index.js";
import { cairnBin, startDaemon, type Daemon } from "../support/daemon.js";

afterEach(cleanup);

let daemon: Daemon;
let runtimeKey: string;
let writeKey: string;

function createKey(dataDir: string, role: string): string {
  const output = execFileSync(cairnBin(), ["keys", "create", "--role", role, "--name", `widget-${role}`, "--data-dir", dataDir], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"],
  });
  return output.trim().split("\n").pop()!.trim();
}

beforeAll(async () => {
  daemon = await startDaemon({
    args: ["--profile", "production"],
    prepare: (dataDir) => {
      runtimeKey = createKey(dataDir, "runtime");
      // Minting a token needs `write` (a `runtime` key is refused: 403).
      writeKey = createKey(dataDir, "write");
    },
  });
});

afterAll(() => daemon?.stop());

/** What the page's server side does: create the conversation, mint its token. */
async function serverSide(): Promise<{ conversationId: string; token: string }> {
  const headers = { "x-api-key": runtimeKey, "content-type": "application/json" };
  const created = await fetch(`${daemon.url}/api/runtime/conversations`, { method: "POST", headers, body: "{}" });
  expect(created.status, await created.clone().text()).toBe(201);
  const { conversation } = (await created.json()) as { conversation: { id: string } };
  const minted = await fetch(`${daemon.url}/api/conversation-tokens`, {
    method: "POST",
    headers: { "x-api-key": writeKey, "content-type": "application/json" },
    body: JSON.stringify({ conversationId: conversation.id, ttlSeconds: 600 }),
  });
  expect(minted.status, await minted.clone().text()).toBe(201);
  const { token } = (await minted.json()) as { token: string };
  expect(token).toMatch(/^cvt_/);
  return { conversationId: conversation.id, token };
}

/** The page's client: the token in `Authorization`, the platform's EventSource (no headers). */
function pageClient(token: string) {
  return createServiceClient({
    baseUrl: `${daemon.url}/api/runtime`,
    fetch,
    headers: { authorization: `Bearer ${token}` },
    EventSource: EventSource as never,
  });
}

describe("useServiceChat with a conversation token", () => {
  it("talks in the conversation the token opens, and is refused anything else", async () => {
    const { conversationId, token } = await serverSide();
    // The client is made in render, as pages often do: a new object each time must not
    // restart the conversation's stream.
    const { result } = renderHook(() => useServiceChat({ client: pageClient(token), conversationId }));
    await waitFor(() => expect(result.current.status).toBe("idle"), { timeout: 10_000 });
    await act(async () => {
      expect(await result.current.sendMessage("book a demo")).toBe(true);
    });
    // From the event stream, which the token opens too (as `?token=`: EventSource sends no headers).
    await waitFor(() => {
      expect(result.current.messages.map(({ text, status }) => ({ text, status }))).toEqual([
        { text: "book a demo", status: "sent" },
        { text: "Happy to set that up. Where can we reach you?", status: "sent" },
      ]);
      expect(result.current.prompts[0]?.kind).toBe("form");
    }, { timeout: 10_000 });

    // Without a conversation the hook would create one: a token may not.
    const { result: stray } = renderHook(() => useServiceChat({ client: pageClient(token) }));
    await act(async () => {
      expect(await stray.current.sendMessage("hello")).toBe(false);
    });
    expect(stray.current.status).toBe("error");
    expect((stray.current.error as ServiceApiError).status).toBe(403);
  });

  it("shows a refused token as an error", async () => {
    const { conversationId } = await serverSide();
    const { result } = renderHook(() => useServiceChat({ client: pageClient("cvt_not_a_real_token"), conversationId }));
    await waitFor(() => expect(result.current.status).toBe("error"), { timeout: 10_000 });
    expect((result.current.error as ServiceApiError).status).toBe(401);
  });
});
