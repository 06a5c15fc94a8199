// Server-Sent Events read from a `fetch` body: the `data` (lines joined) and `id` of each
// message that has data, in order. Both of the console's streams read with it.

export interface StreamMessage {
  data: string;
  id?: string;
}

export async function* readMessages(body: NonNullable<Response["body"]>): AsyncGenerator<StreamMessage> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, "\n");
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data: string[] = [];
      let id: string | undefined;
      for (const line of frame.split("\n")) {
        if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
        else if (line.startsWith("id:")) id = line.slice(3).trim();
      }
      if (data.length > 0) yield { data: data.join("\n"), ...(id === undefined ? {} : { id }) };
    }
  }
}
