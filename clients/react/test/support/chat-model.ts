// A stand-in for a paid OpenAI-compatible chat-completions endpoint (the daemon's
// `--chat-url`): it answers every request with a fixed reply streamed in pieces, a pause
// between each, so a test can watch a reply being written.

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface ChatModel {
  /** The base URL to pass as `--chat-url` (`http://127.0.0.1:<port>/v1`). */
  url: string;
  close(): Promise<void>;
}

export async function startChatModel(pieces: string[], pauseMs: number): Promise<ChatModel> {
  const server: Server = createServer((request, response) => {
    if (request.method !== "POST" || request.url !== "/v1/chat/completions") {
      response.writeHead(404).end();
      return;
    }
    request.resume();
    request.on("end", async () => {
      response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      for (const piece of pieces) {
        const chunk = { id: "chatcmpl-test", object: "chat.completion.chunk", choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] };
        response.write(`data: ${JSON.stringify(chunk)}\n\n`);
        await new Promise((resolve) => setTimeout(resolve, pauseMs));
      }
      response.write(`data: ${JSON.stringify({ id: "chatcmpl-test", object: "chat.completion.chunk", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\n`);
      response.end("data: [DONE]\n\n");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
