// An `EventSource` that sends headers: Server-Sent Events read with `fetch`. The console
// gives it to @cairn/client as `createEventSource`, so under the production profile the
// operator's API key goes in the `X-API-Key` header and never in a URL. The client reopens
// the stream itself after the last offset it delivered, so this one never reconnects.
import type { EventSourceFactoryOptions, EventSourceLike } from "@cairn/client";

import { readMessages } from "../sse";

export class FetchEventSource implements EventSourceLike {
  readyState = 0;
  onopen: ((event: Event) => unknown) | null = null;
  onmessage: ((event: MessageEvent) => unknown) | null = null;
  onerror: ((event: Event) => unknown) | null = null;
  private readonly controller = new AbortController();

  constructor(
    readonly url: string,
    headers: Record<string, string>,
  ) {
    void this.run(headers);
  }

  close(): void {
    this.readyState = 2;
    this.controller.abort();
  }

  private async run(headers: Record<string, string>): Promise<void> {
    try {
      const response = await fetch(this.url, {
        headers: { ...headers, Accept: "text/event-stream" },
        signal: this.controller.signal,
        credentials: "omit",
        cache: "no-store",
      });
      if (!response.ok || !response.body) throw new Error(`the event stream answered ${response.status}`);
      this.readyState = 1;
      this.onopen?.(new Event("open"));
      for await (const message of readMessages(response.body)) {
        if (this.readyState === 2) continue;
        this.onmessage?.(new MessageEvent("message", { data: message.data, lastEventId: message.id ?? "" }));
      }
      throw new Error("the event stream ended");
    } catch {
      if (this.readyState === 2) return;
      this.readyState = 2;
      this.onerror?.(new Event("error"));
    }
  }
}

/** The factory for `createServiceClient({createEventSource})`. */
export function createFetchEventSource(url: string, options: EventSourceFactoryOptions): EventSourceLike {
  return new FetchEventSource(url, options.headers);
}
