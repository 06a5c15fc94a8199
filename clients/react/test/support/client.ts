// The runtime client the tests use: Node's fetch, and the `eventsource` package's
// EventSource (Node 20 has none) over the same fetch.

import { createServiceClient, type ServiceClient } from "@cairn/client";
import { EventSource } from "eventsource";
import { inject } from "vitest";

export function testClient(daemon: "cairnUrl" | "cairnModelUrl" = "cairnUrl"): ServiceClient {
  const nodeFetch = globalThis.fetch;
  return createServiceClient({
    baseUrl: `${inject(daemon)}/api/runtime`,
    fetch: nodeFetch,
    createEventSource: (url, options) =>
      new EventSource(url, {
        withCredentials: options.withCredentials,
        fetch: (input, init) =>
          nodeFetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), ...options.headers } }),
      }),
  });
}
