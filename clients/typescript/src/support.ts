// Support references: the memories an answer from memory rests on (the `supportReferences`
// of an assistant `message` event), as links and as a line of sources. The same rules as
// the daemon's own (crates/agents/src/support.rs), so a client rebuilds what it sends.

import type { SupportReference, SupportSourceLink } from "./types.js";

/** The distinct links of `references`, in order: one per URL, or per reference without one. */
export function collectSupportSourceLinks(references: readonly SupportReference[] | null | undefined): SupportSourceLink[] {
  const links: SupportSourceLink[] = [];
  for (const reference of references ?? []) {
    const seen = links.some((link) =>
      link.url !== undefined && reference.url !== undefined ? link.url === reference.url : link.id === reference.id,
    );
    if (seen) continue;
    const link: SupportSourceLink = { id: reference.id, label: reference.label };
    if (reference.url !== undefined && reference.url !== null) link.url = reference.url;
    links.push(link);
  }
  return links;
}

/** `Sources: [1] label (url); [2] label`, or `""` without references. */
export function formatSupportReferences(references: readonly SupportReference[] | null | undefined): string {
  const links = collectSupportSourceLinks(references);
  if (links.length === 0) return "";
  const items = links.map((link, index) =>
    link.url !== undefined ? `[${index + 1}] ${link.label} (${link.url})` : `[${index + 1}] ${link.label}`,
  );
  return `Sources: ${items.join("; ")}`;
}
