// Global setup: real daemons for a test project. `cairnUrl` is a plain daemon (replies from
// journeys and memory); `cairnModelUrl` one whose replies are written by a language model
// (a local stand-in for the paid endpoint) and streamed in pieces.

import type { TestProject } from "vitest/node";

import { startChatModel } from "./chat-model.js";
import { startDaemon } from "./daemon.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** The daemon's base URL, `http://127.0.0.1:<port>`. */
    cairnUrl: string;
    /** A daemon with a chat model that streams its reply in pieces. */
    cairnModelUrl: string;
  }
}

/** The reply the stand-in model writes, piece by piece. */
export const MODEL_REPLY_PIECES = ["Happy ", "to help ", "you book ", "a demo."];

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const daemon = await startDaemon();
  const model = await startChatModel(MODEL_REPLY_PIECES, 250);
  const modelDaemon = await startDaemon({ args: ["--chat-url", model.url, "--chat-model", "stand-in"] });
  project.provide("cairnUrl", daemon.url);
  project.provide("cairnModelUrl", modelDaemon.url);
  return async () => {
    await Promise.all([daemon.stop(), modelDaemon.stop()]);
    await model.close();
  };
}
