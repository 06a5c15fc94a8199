import { expect, screenshot, test, unique } from "./fixtures";
import type { Conflict, Memory } from "../src/api";

test("a dry run reports a conflict, the run opens it, and keeping one side resolves it", async ({ page, daemon }) => {
  const repo = unique("conflict");
  const pnpm = await daemon.api<Memory>("POST", "/api/memories", { content: "Use pnpm, not npm, in this repo.", scope: "repo", repo });
  const npm = await daemon.api<Memory>("POST", "/api/memories", { content: "Always use npm in this repo.", scope: "repo", repo });

  await page.goto("/dream");
  await page.getByRole("button", { name: "Dry run" }).click();
  const report = page.getByRole("region", { name: "dream report" });
  await expect(report).toContainText("Dry run: nothing was changed");
  await expect(report).toContainText(`package manager) in \`${repo}\``);
  await screenshot(page, "dream-dry-run");
  // A dry run changes nothing.
  expect((await daemon.api<Memory>("GET", `/api/memories/${npm.id}`)).status).toBe("active");

  page.once("dialog", (dialog) => void dialog.accept());
  await page.getByRole("button", { name: "Run", exact: true }).click();
  await expect(report).toContainText("The cycle ran");
  await report.getByRole("link", { name: "Resolve them" }).click();

  await expect(page.getByRole("heading", { name: "Conflicts" })).toBeVisible();
  const card = page.locator(".conflict", { hasText: repo });
  await expect(card).toHaveCount(1);
  await expect(card.getByRole("group", { name: "side pnpm" })).toContainText("Use pnpm, not npm");
  await screenshot(page, "conflict-open");
  await card.getByRole("button", { name: "Keep pnpm" }).click();
  await expect(card).toHaveCount(0);

  const { conflicts } = await daemon.api<{ conflicts: Conflict[] }>("GET", "/api/conflicts?status=resolved");
  expect(conflicts.some((conflict) => conflict.repo === repo)).toBe(true);
  expect((await daemon.api<Memory>("GET", `/api/memories/${pnpm.id}`)).status).toBe("active");
  expect((await daemon.api<Memory>("GET", `/api/memories/${npm.id}`)).archivedAt).not.toBeNull();

  await page.getByLabel("Conflict status").selectOption("resolved");
  await expect(page.locator(".conflict", { hasText: repo })).toContainText("resolved");
});

test("the review queue approves one memory and rejects another", async ({ page, daemon }) => {
  const word = unique("queue");
  const keep = await daemon.api<Memory>("POST", "/api/memories", { content: `Keep ${word} rule`, scope: "global" });
  const drop = await daemon.api<Memory>("POST", "/api/memories", { content: `Drop ${word} rule`, scope: "global" });
  for (const memory of [keep, drop]) {
    await daemon.api("PATCH", `/api/memories/${memory.id}`, { status: "review" });
  }

  await page.goto("/review");
  const queue = page.getByRole("list", { name: "review queue" });
  const keepCard = queue.locator(".card", { hasText: `Keep ${word} rule` });
  const dropCard = queue.locator(".card", { hasText: `Drop ${word} rule` });
  await expect(keepCard).toBeVisible();
  await expect(dropCard).toBeVisible();
  await screenshot(page, "review-queue");

  await keepCard.getByRole("button", { name: "Approve" }).click();
  await expect(keepCard).toHaveCount(0);
  await dropCard.getByRole("button", { name: "Reject" }).click();
  await expect(dropCard).toHaveCount(0);

  const approved = await daemon.api<Memory>("GET", `/api/memories/${keep.id}`);
  expect(approved.status).toBe("active");
  expect(approved.archivedAt).toBeNull();
  const rejected = await daemon.api<Memory>("GET", `/api/memories/${drop.id}`);
  expect(rejected.status).toBe("stale");
  expect(rejected.archivedAt).not.toBeNull();

  // The audit log shows both decisions for the memory.
  await page.getByRole("link", { name: "Audit log" }).click();
  await page.getByLabel("Memory id").fill(drop.id);
  await page.getByRole("button", { name: "Apply" }).click();
  const log = page.getByRole("table", { name: "audit log" });
  await expect(log.locator("tbody tr")).toHaveCount(3);
  await expect(log.locator("tbody tr").first()).toContainText("reject");
  await expect(log).toContainText("create");
  await screenshot(page, "audit-log");
});

test("guards say why an action is blocked", async ({ page }) => {
  await page.goto("/guards");
  await page.getByRole("textbox", { name: "Action" }).fill("git push --force origin main");
  await page.getByRole("button", { name: "Check" }).click();
  const verdict = page.getByRole("region", { name: "verdict" });
  await expect(verdict.getByRole("heading", { name: "Blocked" })).toBeVisible();
  await expect(verdict).toContainText("FORCE_PUSH_PROTECTED");
  await page.getByRole("textbox", { name: "Action" }).fill("rm -rf node_modules");
  await page.getByRole("button", { name: "Check" }).click();
  await expect(verdict.getByRole("heading", { name: "Allowed" })).toBeVisible();
  await screenshot(page, "guards");
});

test("a folder connector is added, synced and healthy", async ({ page, daemon }) => {
  const name = unique("docs");
  await page.goto("/connectors");
  await page.getByRole("button", { name: "Add connector" }).click();
  const form = page.getByRole("form", { name: "Add connector" });
  await form.getByLabel("Absolute path").fill(daemon.docs);
  await form.getByLabel("Name").fill(name);
  await form.getByRole("button", { name: "Add" }).click();
  const card = page.locator(".card", { hasText: name });
  await expect(card).toContainText("never_synced");
  await card.getByRole("button", { name: "Sync now" }).click();
  await expect(card.getByRole("status")).toContainText("Sync ok: 1 imported");
  await expect(card).toContainText("1 memories");
  await screenshot(page, "connectors");

  // A path outside the connector roots is refused with the daemon's reason.
  await page.getByRole("button", { name: "Add connector" }).click();
  await form.getByLabel("Absolute path").fill("/etc");
  await form.getByRole("button", { name: "Add" }).click();
  await expect(form.getByRole("alert")).toContainText("outside the folders this daemon lets connectors read");
});
