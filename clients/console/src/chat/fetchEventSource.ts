// An `EventSource` that sends headers: Server-Sent Events read with `fetch`. The console
// gives it to @cairn/client as `createEventSource`, so under the production profile the
// operator's API key goes in the `X-API-Key` header and never in a URL. The client reopens
// the stream itself after the last offset it delivered, so this one never reconnects.
import type { EventSourceFactoryOptions, EventSourceLike } from "@cairn/client";

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
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value.replace(/\r\n?/g, "\n");
        let end: number;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let data: string[] = [];
          let id: string | undefined;
          for (const line of frame.split("\n")) {
            if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
            else if (line.startsWith("id:")) id = line.slice(3).trim();
          }
          if (data.length === 0 || this.readyState === 2) continue;
          this.onmessage?.(new MessageEvent("message", { data: data.join("\n"), lastEventId: id ?? "" }));
          data = [];
        }
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
