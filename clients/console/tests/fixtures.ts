// The daemons global-setup.ts started, an API helper for test set-up, and screenshots that
// the tests save under test-results/screenshots (gitignored).
import { test as base, expect, type Page } from "@playwright/test";

export interface Daemon {
  url: string;
  productionUrl: string;
  key: string;
  docs: string;
  /** Calls the solo daemon's API directly (set-up and checks, not the flow under test). */
  api<T = unknown>(method: string, path: string, body?: unknown): Promise<T>;
}

export const test = base.extend<{ daemon: Daemon; policyViolations: string[] }>({
  baseURL: async ({}, use) => use(process.env.CAIRN_URL),
  // Every test fails if the page broke the daemon's Content-Security-Policy (or logged an
  // uncaught error): the policy must allow exactly what the console does.
  policyViolations: [
    async ({ page }, use) => {
      const violations: string[] = [];
      page.on("console", (message) => {
        if (message.type() === "error" && /Content Security Policy/i.test(message.text())) violations.push(message.text());
      });
      page.on("pageerror", (error) => violations.push(`uncaught: ${error.message}`));
      await use(violations);
      expect(violations, "CSP violations or uncaught errors on the page").toEqual([]);
    },
    { auto: true },
  ],
  daemon: async ({}, use) => {
    const url = process.env.CAIRN_URL!;
    await use({
      url,
      productionUrl: process.env.CAIRN_PRODUCTION_URL!,
      key: process.env.CAIRN_PRODUCTION_KEY!,
      docs: process.env.CAIRN_DOCS_DIR!,
      async api<T>(method: string, path: string, body?: unknown): Promise<T> {
        const response = await fetch(url + path, {
          method,
          headers: body === undefined ? {} : { "Content-Type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        const text = await response.text();
        if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
        return (text ? JSON.parse(text) : undefined) as T;
      },
    });
  },
});

export { expect };

/** Saves a full-page screenshot as test-results/screenshots/<name>.png. */
export async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: `test-results/screenshots/${name}.png`, fullPage: true });
}

/** Opens the chat panel of the Conversations page shown and sends `text`: the panel and its message log. */
export async function openChat(page: Page, text: string) {
  await page.getByRole("button", { name: "New chat" }).click();
  const chat = page.getByRole("region", { name: "Chat with the agent" });
  await chat.getByRole("textbox", { name: "Message" }).fill(text);
  await chat.getByRole("button", { name: "Send" }).click();
  return { chat, log: chat.getByRole("log", { name: "Messages" }) };
}

/** A word no other test uses, so tests sharing a daemon never see each other's data. */
export function unique(prefix: string): string {
  return `${prefix}${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
}
