// A vitest environment: happy-dom's DOM for React, with Node's own networking (fetch,
// Request, Response, Headers, AbortController, URL, …) left in place, so the client talks to
// the real daemon exactly as in Node, with no CORS emulation or fetch stand-in between.

import { builtinEnvironments, type Environment } from "vitest/runtime";

const NODE_KEYS = [
  "fetch",
  "Request",
  "Response",
  "Headers",
  "AbortController",
  "AbortSignal",
  "URL",
  "URLSearchParams",
  "FormData",
  "MessagePort",
] as const;

export default {
  name: "happy-dom-node-fetch",
  viteEnvironment: "client",
  async setup(global, options) {
    const saved = new Map(NODE_KEYS.map((key) => [key, global[key]]));
    const happy = await builtinEnvironments["happy-dom"].setup(global, options);
    for (const [key, value] of saved) global[key] = value;
    return {
      async teardown(global) {
        await happy.teardown(global);
        for (const [key, value] of saved) global[key] = value;
      },
    };
  },
} satisfies Environment;
