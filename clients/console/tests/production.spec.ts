import { expect, openChat, screenshot, test } from "./fixtures";

test("the production profile asks for an API key, keeps it for the tab only, and forgets it", async ({ page, daemon }) => {
  await page.goto(daemon.productionUrl + "/memories");
  const login = page.getByRole("form", { name: "Cairn console" });
  await expect(login).toBeVisible();
  await expect(login).toContainText("production profile");
  await screenshot(page, "production-login");

  await login.getByLabel("API key").fill("cairn_" + "0".repeat(64));
  await login.getByRole("button", { name: "Sign in" }).click();
  await expect(login.getByRole("alert")).toContainText("not valid");
  expect(await page.evaluate(() => sessionStorage.length)).toBe(0);

  await login.getByLabel("API key").fill(daemon.key);
  await login.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByRole("heading", { name: "Memories" })).toBeVisible();
  await expect(page.getByText("No memories match.")).toBeVisible();

  // Kept in sessionStorage only: nothing in localStorage, no cookie.
  expect(await page.evaluate(() => sessionStorage.getItem("cairn.apiKey"))).toBe(daemon.key);
  expect(await page.evaluate(() => localStorage.length)).toBe(0);
  expect(await page.context().cookies()).toEqual([]);

  // The key goes with every call as X-API-Key: adding a memory works.
  await page.getByRole("button", { name: "Add memory" }).click();
  const form = page.getByRole("form", { name: "Add memory" });
  await form.getByLabel("Content").fill("Production memories need a key.");
  await form.getByRole("button", { name: "Save memory" }).click();
  await expect(page.locator(".card", { hasText: "Production memories need a key." })).toBeVisible();

  // A reload of the tab stays signed in; a new tab's session does not have the key.
  await page.reload();
  await expect(page.getByRole("heading", { name: "Memories" })).toBeVisible();
  const other = await page.context().newPage();
  await other.goto(daemon.productionUrl + "/");
  await expect(other.getByRole("form", { name: "Cairn console" })).toBeVisible();
  await other.close();

  await page.getByRole("button", { name: "Sign out" }).click();
  await expect(login).toBeVisible();
  expect(await page.evaluate(() => sessionStorage.getItem("cairn.apiKey"))).toBeNull();
});

test("a 401 (a revoked or wrong key) forgets the key and asks again", async ({ page, daemon }) => {
  await page.goto(daemon.productionUrl + "/");
  await page.evaluate(() => sessionStorage.setItem("cairn.apiKey", "cairn_" + "1".repeat(64)));
  await page.goto(daemon.productionUrl + "/review");
  await expect(page.getByRole("form", { name: "Cairn console" })).toBeVisible();
  expect(await page.evaluate(() => sessionStorage.getItem("cairn.apiKey"))).toBeNull();
});

test("the solo profile needs no key and the console is same-origin", async ({ page }) => {
  await page.goto("/audit");
  await expect(page.getByRole("heading", { name: "Audit log" })).toBeVisible();
  await expect(page.getByRole("button", { name: "Sign out" })).toHaveCount(0);
});

test("in production the chat panel talks with the operator's key, event stream included", async ({ page, daemon }) => {
  await page.goto(daemon.productionUrl + "/");
  const login = page.getByRole("form", { name: "Cairn console" });
  await login.getByLabel("API key").fill(daemon.key);
  await login.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("link", { name: "Conversations" }).click();
  const { log } = await openChat(page, "I would like to book a demo");
  await expect(log).toContainText("Happy to set that up. Where can we reach you?");
  const form = log.locator("form").filter({ has: page.getByLabel("Email") });
  await form.getByLabel("Name").fill("Grace");
  await form.getByLabel("Email").fill("grace@example.com");
  await form.getByRole("button", { name: "Submit" }).click();
  await expect(log).toContainText("Thanks Grace, we will write to grace@example.com to find a time.");

  // The live view reads the stream with the key in a header, never in the URL.
  const streamUrls: string[] = [];
  page.on("request", (request) => {
    if (request.url().includes("/events/stream")) streamUrls.push(request.url() + " " + (request.headers()["x-api-key"] ?? ""));
  });
  await page.getByRole("list", { name: "conversation list" }).getByRole("link").first().click();
  await page.getByLabel("Live").check();
  await expect(page.getByText("stream open")).toBeVisible();
  expect(streamUrls.length).toBeGreaterThan(0);
  for (const entry of streamUrls) {
    expect(entry.endsWith(" " + daemon.key)).toBe(true);
    expect(entry.split(" ")[0]).not.toContain(daemon.key);
  }
});
