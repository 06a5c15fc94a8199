// Global setup: one real daemon for a test project, its URL provided as `cairnUrl`.

import type { TestProject } from "vitest/node";

import { startDaemon } from "./daemon.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** The daemon's base URL, `http://127.0.0.1:<port>`. */
    cairnUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const daemon = await startDaemon();
  project.provide("cairnUrl", daemon.url);
  return () => daemon.stop();
}
