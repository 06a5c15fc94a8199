// A tiny history-API router: the daemon answers every console path with index.html.
import { useEffect, useState } from "react";

const changes = new Set<() => void>();

export function navigate(path: string): void {
  if (path === location.pathname + location.search) return;
  history.pushState(null, "", path);
  for (const change of changes) change();
}

export function usePath(): string {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const update = () => setPath(location.pathname);
    changes.add(update);
    window.addEventListener("popstate", update);
    return () => {
      changes.delete(update);
      window.removeEventListener("popstate", update);
    };
  }, []);
  return path;
}

/** A link that navigates without reloading the page. */
export function linkProps(path: string) {
  return {
    href: path,
    onClick: (event: React.MouseEvent) => {
      if (event.metaKey || event.ctrlKey || event.shiftKey || event.button !== 0) return;
      event.preventDefault();
      navigate(path);
    },
  };
}
