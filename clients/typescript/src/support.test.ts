// The support-reference helpers (the daemon's own rules; memory-answer.json checks them
// against what it sent).

import { describe, expect, test } from "vitest";
import { collectSupportSourceLinks, formatSupportReferences, type SupportReference } from "./index.js";

const reference = (id: string, label: string, url?: string): SupportReference => ({ id, label, ...(url ? { url } : {}), excerpt: "", score: 1 });

describe("support references", () => {
  const references = [
    reference("mem_1", "Refund policy", "https://example.com/refunds"),
    reference("mem_2", "Refund policy (2)", "https://example.com/refunds"),
    reference("mem_3", "Shipping times"),
    reference("mem_3", "Shipping times (again)"),
    reference("mem_4", "Returns", "https://example.com/returns"),
  ];

  test("links are one per URL, or per reference without one, in order", () => {
    expect(collectSupportSourceLinks(references)).toEqual([
      { id: "mem_1", label: "Refund policy", url: "https://example.com/refunds" },
      { id: "mem_3", label: "Shipping times" },
      { id: "mem_4", label: "Returns", url: "https://example.com/returns" },
    ]);
    expect(collectSupportSourceLinks([])).toEqual([]);
    expect(collectSupportSourceLinks(undefined)).toEqual([]);
  });

  test("formatted as a numbered list of sources", () => {
    expect(formatSupportReferences(references)).toBe(
      "Sources: [1] Refund policy (https://example.com/refunds); [2] Shipping times; [3] Returns (https://example.com/returns)",
    );
    expect(formatSupportReferences([])).toBe("");
  });
});
