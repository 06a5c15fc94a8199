// A small reader of `text/event-stream` bodies (the WHATWG format), for the replies that
// `sendMessage` and channel events stream when asked for deltas.

export interface ServerSentEvent {
  /** The `event:` field; `message` when absent. */
  event: string;
  data: string;
  id?: string;
}

/** The events of an SSE body, in order, as they arrive. */
export async function* readServerSentEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<ServerSentEvent> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  let event = "";
  let data: string[] = [];
  let id: string | undefined;
  let hasData = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      buffer += done ? decoder.decode() : decoder.decode(value, { stream: true });
      let newline: number;
      while ((newline = nextLineEnd(buffer)) >= 0) {
        const line = buffer.slice(0, newline);
        const skip = buffer[newline] === "\r" && buffer[newline + 1] === "\n" ? 2 : 1;
        buffer = buffer.slice(newline + skip);
        if (line === "") {
          if (hasData) yield { event: event || "message", data: data.join("\n"), ...(id === undefined ? {} : { id }) };
          event = "";
          data = [];
          hasData = false;
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "event") event = value;
        else if (field === "data") {
          data.push(value);
          hasData = true;
        } else if (field === "id") id = value;
      }
      if (done) break;
    }
    if (hasData) yield { event: event || "message", data: data.join("\n"), ...(id === undefined ? {} : { id }) };
  } finally {
    reader.releaseLock();
  }
}

function nextLineEnd(buffer: string): number {
  for (let index = 0; index < buffer.length; index++) {
    const char = buffer[index];
    if (char === "\n") return index;
    // A lone `\r` at the end may be the first half of `\r\n`: wait for more.
    if (char === "\r") return index + 1 < buffer.length ? index : -1;
  }
  return -1;
}
