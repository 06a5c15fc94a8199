import { expect, screenshot, test, unique } from "./fixtures";
import type { Memory } from "../src/api";

test("add a memory, find it by search, edit, archive and restore it", async ({ page, daemon }) => {
  const word = unique("zebra");
  const repo = unique("shop");
  await page.goto("/");
  await expect(page.getByRole("heading", { name: "Memories" })).toBeVisible();

  await page.getByRole("button", { name: "Add memory" }).click();
  const form = page.getByRole("form", { name: "Add memory" });
  await form.getByLabel("Content").fill(`Deploy the ${word} service with make release.`);
  await form.getByLabel("Scope").selectOption("repo");
  await form.getByLabel("Repository").fill(repo);
  await form.getByLabel("Tags").fill("deploy, ops");
  await form.getByRole("button", { name: "Save memory" }).click();
  await expect(form).toBeHidden();

  await page.getByRole("searchbox", { name: "Search memories" }).fill(word);
  await page.getByRole("button", { name: "Search" }).click();
  await expect(page.getByText(/1 match for/)).toBeVisible();
  const card = page.locator(".card", { hasText: word });
  await expect(card).toHaveCount(1);
  await expect(card).toContainText(repo);
  await expect(card).toContainText("#deploy");
  await screenshot(page, "memories-search");

  // The daemon has it as the console showed it.
  const id = await card.getAttribute("data-memory-id");
  const stored = await daemon.api<Memory>("GET", `/api/memories/${id}`);
  expect(stored.content).toBe(`Deploy the ${word} service with make release.`);
  expect(stored.tags).toEqual(["deploy", "ops"]);

  await card.getByRole("button", { name: "Edit" }).click();
  await card.getByLabel("Content").fill(`Deploy the ${word} service with make ship.`);
  await card.getByLabel("Status").selectOption("review");
  await card.getByRole("button", { name: "Save" }).click();
  await expect(card.locator(".memory-text")).toHaveText(`Deploy the ${word} service with make ship.`);
  await expect(card).toContainText("review");

  // Filter the list by repository and status instead of searching.
  await page.getByRole("button", { name: "Clear" }).click();
  await page.getByLabel("Repository", { exact: true }).fill(repo);
  await page.getByLabel("Status", { exact: true }).selectOption("review");
  await page.getByRole("button", { name: "Apply" }).click();
  await expect(page.locator(".card")).toHaveCount(1);
  await expect(page.getByRole("navigation", { name: "pages" })).toContainText("1–1 of 1");

  await page.locator(".card").getByRole("button", { name: "Archive" }).click();
  await expect(page.getByText("No memories match.")).toBeVisible();
  expect((await daemon.api<Memory>("GET", `/api/memories/${id}`)).archivedAt).not.toBeNull();

  await page.getByLabel("archived too").check();
  await page.getByRole("button", { name: "Apply" }).click();
  const archived = page.locator(".card.archived");
  await expect(archived).toHaveCount(1);
  await archived.getByRole("button", { name: "Restore" }).click();
  await expect(page.locator(".card.archived")).toHaveCount(0);
  await expect(page.locator(".card")).toHaveCount(1);
  expect((await daemon.api<Memory>("GET", `/api/memories/${id}`)).archivedAt).toBeNull();
});

test("the memory list pages through more memories than fit on a page", async ({ page, daemon }) => {
  const repo = unique("paged");
  for (let index = 0; index < 23; index++) {
    await daemon.api("POST", "/api/memories", { content: `Note ${index} of ${repo}`, scope: "task", repo });
  }
  await page.goto("/memories");
  await page.getByLabel("Repository", { exact: true }).fill(repo);
  await page.getByLabel("Scope", { exact: true }).selectOption("task");
  await page.getByRole("button", { name: "Apply" }).click();
  const pager = page.getByRole("navigation", { name: "pages" });
  await expect(pager).toContainText("1–20 of 23");
  await expect(page.locator(".card")).toHaveCount(20);
  // Newest first.
  await expect(page.locator(".card").first()).toContainText(`Note 22 of ${repo}`);
  await pager.getByRole("button", { name: "Next" }).click();
  await expect(pager).toContainText("21–23 of 23");
  await expect(page.locator(".card")).toHaveCount(3);
  await expect(page.locator(".card").last()).toContainText(`Note 0 of ${repo}`);
});
