// Small pieces every page uses: loading data, errors, paging.
import { useCallback, useEffect, useRef, useState, type ReactNode } from "react";
import { ApiError } from "./api";

/** Loads `load()` when `deps` change; `reload()` loads again. */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]) {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | undefined>(undefined);
  const [loading, setLoading] = useState(true);
  const generation = useRef(0);
  // `load` is read afresh whenever `deps` change, as with useEffect.
  const run = useCallback(load, deps);
  const reload = useCallback(() => {
    const mine = ++generation.current;
    setLoading(true);
    run().then(
      (value) => {
        if (mine !== generation.current) return;
        setData(value);
        setError(undefined);
        setLoading(false);
      },
      (failure: unknown) => {
        if (mine !== generation.current) return;
        setError(message(failure));
        setLoading(false);
      },
    );
  }, [run]);
  useEffect(reload, [reload]);
  return { data, error, loading, reload };
}

export function message(failure: unknown): string {
  if (failure instanceof ApiError) return failure.message;
  if (failure instanceof Error) return failure.message;
  return String(failure);
}

/** Runs an action, remembering its error and whether it is under way. */
export function useAction() {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | undefined>(undefined);
  const run = useCallback(async <T,>(action: () => Promise<T>): Promise<T | undefined> => {
    setBusy(true);
    setError(undefined);
    try {
      return await action();
    } catch (failure) {
      setError(message(failure));
      return undefined;
    } finally {
      setBusy(false);
    }
  }, []);
  return { busy, error, run, setError };
}

export function ErrorText({ error }: { error?: string }) {
  if (!error) return null;
  return (
    <p className="error" role="alert">
      {error}
    </p>
  );
}

export function Pager(props: { offset: number; limit: number; total: number; onChange: (offset: number) => void }) {
  const { offset, limit, total, onChange } = props;
  const last = Math.min(offset + limit, total);
  return (
    <nav className="pager" aria-label="pages">
      <button type="button" disabled={offset === 0} onClick={() => onChange(Math.max(0, offset - limit))}>
        Previous
      </button>
      <span>{total === 0 ? "none" : `${offset + 1}–${last} of ${total}`}</span>
      <button type="button" disabled={last >= total} onClick={() => onChange(offset + limit)}>
        Next
      </button>
    </nav>
  );
}

export function Page(props: { title: string; actions?: ReactNode; children: ReactNode }) {
  return (
    <section className="page" aria-labelledby="page-title">
      <header className="page-header">
        <h1 id="page-title">{props.title}</h1>
        {props.actions}
      </header>
      {props.children}
    </section>
  );
}

export function Badge({ value }: { value: string }) {
  return <span className={`badge badge-${value.replace(/[^a-z_]/gi, "")}`}>{value}</span>;
}

/** A button that opens and closes a panel (a form, a chat): `label` while closed, `closeLabel` while open. */
export function Toggle(props: { open: boolean; onToggle: (open: boolean) => void; label: string; closeLabel?: string }) {
  return (
    <button type="button" onClick={() => props.onToggle(!props.open)} aria-expanded={props.open}>
      {props.open ? (props.closeLabel ?? "Close") : props.label}
    </button>
  );
}

/** A list of cards (busy while `loading`), one per item, and the `empty` text once loaded and empty. */
export function CardList<T>(props: {
  label: string;
  loading: boolean;
  items?: T[];
  empty: ReactNode;
  children: (item: T) => ReactNode;
}) {
  return (
    <>
      <ul className="cards" aria-busy={props.loading} aria-label={props.label}>
        {props.items?.map((item) => props.children(item))}
      </ul>
      {props.items && props.items.length === 0 && <p className="empty">{props.empty}</p>}
    </>
  );
}

/** A page's "Add …" form: `toggle` opens and closes it (for the page's actions), `added()` closes it and runs `then`. */
export function useAdding(label: string, then: () => void) {
  const [open, setOpen] = useState(false);
  const toggle = <Toggle open={open} onToggle={setOpen} label={label} />;
  const added = () => {
    setOpen(false);
    then();
  };
  return { open, toggle, added };
}
