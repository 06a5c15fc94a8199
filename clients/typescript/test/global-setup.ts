// Starts the daemon most tests share (solo profile, fresh data directory) and stops it after
// the run. Tests that restart a daemon or need the production profile start their own.

import type { TestProject } from "vitest/node";
import { cairnBinary, startDaemon } from "./support/daemon.js";

declare module "vitest" {
  export interface ProvidedContext {
    /** The shared daemon's origin, `http://127.0.0.1:<port>`. */
    daemonUrl: string;
  }
}

export default async function setup(project: TestProject) {
  // Fails the run with a clear message, never skips, when there is no daemon to test against.
  cairnBinary();
  const daemon = await startDaemon();
  project.provide("daemonUrl", daemon.url);
  return async () => {
    await daemon.dispose();
  };
}
