// What the daemon answers for the console's files and routes, seen from an HTTP client.
import { expect, test } from "./fixtures";

test("the console is served with its content types, caching and security headers", async ({ request, daemon }) => {
  const index = await request.get(daemon.url + "/");
  expect(index.status()).toBe(200);
  expect(index.headers()["content-type"]).toBe("text/html; charset=utf-8");
  expect(index.headers()["cache-control"]).toBe("no-cache");
  const policy = index.headers()["content-security-policy"];
  expect(policy).toContain("script-src 'self'");
  expect(policy).toContain(`connect-src 'self' ws://${new URL(daemon.url).host} wss://${new URL(daemon.url).host}`);
  expect(policy).toContain("frame-ancestors 'none'");
  expect(index.headers()["x-content-type-options"]).toBe("nosniff");
  expect(await index.text()).toContain('src="/assets/console.js"');

  const script = await request.get(daemon.url + "/assets/console.js");
  expect(script.headers()["content-type"]).toBe("text/javascript; charset=utf-8");
  const etag = script.headers()["etag"];
  expect(etag).toMatch(/^"[0-9a-f]{16}"$/);
  const again = await request.get(daemon.url + "/assets/console.js", { headers: { "If-None-Match": etag } });
  expect(again.status()).toBe(304);

  // Console routes get the app; the API keeps its own answers.
  const route = await request.get(daemon.url + "/conversations/conv_x");
  expect(route.headers()["content-type"]).toBe("text/html; charset=utf-8");
  const missing = await request.get(daemon.url + "/assets/missing.js");
  expect(missing.status()).toBe(404);
  const api = await request.get(daemon.url + "/api/nothing");
  expect(api.status()).toBe(404);
  expect(api.headers()["content-type"]).toBe("application/json");
  const openapi = await request.get(daemon.url + "/openapi.json");
  expect(openapi.headers()["content-type"]).toContain("application/json");

  // Production: the files are public (they hold no data), the API is not.
  const production = await request.get(daemon.productionUrl + "/memories");
  expect(production.status()).toBe(200);
  expect((await request.get(daemon.productionUrl + "/api/health")).status()).toBe(401);
});

test("the solo profile still refuses the API to pages of other sites", async ({ request, daemon }) => {
  const refused = await request.get(daemon.url + "/api/memories", { headers: { Origin: "https://evil.example" } });
  expect(refused.status()).toBe(403);
  const allowed = await request.get(daemon.url + "/api/memories", { headers: { Origin: daemon.url } });
  expect(allowed.status()).toBe(200);
});
