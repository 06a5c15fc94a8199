// The built-in widget renderers: the kinds the bundled concierge agent opens (`form` with
// `fields`, `rating` with `min`/`max`) and a few common ones a journey may use (`choice`,
// `date`, `confirm`). Each is a React component taking `WidgetRendererProps`.

import { useId, useState, type ComponentType, type FormEvent, type ReactNode } from "react";

import type { ServiceChatAppearance } from "./appearance.js";

/** What a widget renderer receives. */
export interface WidgetRendererProps {
  /** The widget kind (`form`, `rating`, …). */
  kind: string;
  promptId: string;
  /** The prompt's input, as the agent's journey gave it. */
  input: unknown;
  /** The submitted output, once there is one. */
  output?: unknown;
  /** Whether the prompt was answered. */
  submitted?: boolean;
  /** Whether the renderer should refuse input (answered, or the chat is busy). */
  disabled?: boolean;
  appearance?: ServiceChatAppearance;
  /** Submits the widget's output for the prompt. */
  submit: (output: unknown) => void;
}

/** A renderer: a component for one widget kind. */
export type WidgetRenderer = ComponentType<WidgetRendererProps>;

/** Renderers by widget kind. */
export type WidgetRenderers = Record<string, WidgetRenderer>;

interface FieldSpec {
  name: string;
  label: string;
  type: string;
  required: boolean;
  placeholder?: string;
}

function record(value: unknown): Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

function humanize(name: string): string {
  const spaced = name.replace(/[_-]+/g, " ").replace(/([a-z])([A-Z])/g, "$1 $2").trim();
  return spaced.charAt(0).toUpperCase() + spaced.slice(1);
}

/** The input type a field's name suggests. */
function inferType(name: string): string {
  const lower = name.toLowerCase();
  if (lower.includes("email")) return "email";
  if (lower.includes("phone") || lower === "tel" || lower.includes("mobile")) return "tel";
  if (lower === "date" || lower.endsWith("_date") || lower.endsWith("date")) return "date";
  if (lower === "time" || lower.endsWith("_time")) return "time";
  if (lower.includes("url") || lower.includes("website")) return "url";
  return "text";
}

/** The fields of a form input: names (`["name", "email"]`) or objects (`{name, label?, type?, required?}`). */
function formFields(input: unknown): FieldSpec[] {
  const fields = record(input).fields;
  if (!Array.isArray(fields)) return [];
  return fields.flatMap((field): FieldSpec[] => {
    if (typeof field === "string") {
      return [{ name: field, label: humanize(field), type: inferType(field), required: true }];
    }
    const spec = record(field);
    if (typeof spec.name !== "string") return [];
    const result: FieldSpec = {
      name: spec.name,
      label: typeof spec.label === "string" ? spec.label : humanize(spec.name),
      type: typeof spec.type === "string" ? spec.type : inferType(spec.name),
      required: spec.required !== false,
    };
    if (typeof spec.placeholder === "string") result.placeholder = spec.placeholder;
    return [result];
  });
}

function Title({ input, fallback }: { input: unknown; fallback?: string }): ReactNode {
  const { title, label } = record(input);
  const text = typeof title === "string" ? title : typeof label === "string" ? label : fallback;
  return text === undefined ? null : <legend className="cairn-chat__widget-title">{text}</legend>;
}

/** `form`: labelled inputs for `input.fields`; the output maps each field's name to its value. */
export function FormWidget({ input, output, submitted, disabled, submit, promptId }: WidgetRendererProps): ReactNode {
  const fields = formFields(input);
  const given = record(output);
  const [values, setValues] = useState<Record<string, string>>(() =>
    Object.fromEntries(fields.map((field) => [field.name, typeof given[field.name] === "string" ? (given[field.name] as string) : ""])),
  );
  const id = useId();
  const { submitLabel } = record(input);
  const onSubmit = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    if (disabled || submitted) return;
    if (!event.currentTarget.checkValidity()) {
      event.currentTarget.reportValidity();
      return;
    }
    submit(Object.fromEntries(fields.map((field) => [field.name, values[field.name]?.trim() ?? ""])));
  };
  return (
    <form className="cairn-chat__widget cairn-chat__form" onSubmit={onSubmit} data-prompt-id={promptId}>
      <fieldset disabled={disabled || submitted}>
        <Title input={input} />
        {fields.map((field) => {
          const fieldId = `${id}-${field.name}`;
          const shown = submitted && typeof given[field.name] === "string" ? (given[field.name] as string) : (values[field.name] ?? "");
          return (
            <div className="cairn-chat__field" key={field.name}>
              <label htmlFor={fieldId}>{field.label}</label>
              <input
                id={fieldId}
                name={field.name}
                type={field.type}
                required={field.required}
                placeholder={field.placeholder}
                autoComplete={field.type === "email" ? "email" : field.name === "name" ? "name" : field.type === "tel" ? "tel" : undefined}
                value={shown}
                onChange={(event) => {
                  const value = event.currentTarget.value;
                  setValues((current) => ({ ...current, [field.name]: value }));
                }}
              />
            </div>
          );
        })}
        <button type="submit" className="cairn-chat__button">
          {submitted ? "Sent" : typeof submitLabel === "string" ? submitLabel : "Submit"}
        </button>
      </fieldset>
    </form>
  );
}

/** `rating`: one button per value from `input.min` (1) to `input.max` (5); the output is `{value}`. */
export function RatingWidget({ input, output, submitted, disabled, submit, promptId }: WidgetRendererProps): ReactNode {
  const { min: rawMin, max: rawMax } = record(input);
  const min = typeof rawMin === "number" && Number.isInteger(rawMin) ? rawMin : 1;
  const max = typeof rawMax === "number" && Number.isInteger(rawMax) && rawMax >= min && rawMax - min <= 20 ? rawMax : Math.max(min, 5);
  const chosen = record(output).value;
  const values = Array.from({ length: max - min + 1 }, (_, index) => min + index);
  return (
    <div className="cairn-chat__widget cairn-chat__rating" data-prompt-id={promptId}>
      <fieldset disabled={disabled || submitted}>
        <Title input={input} fallback="Your rating" />
        <div className="cairn-chat__options" role="group">
          {values.map((value) => (
            <button
              key={value}
              type="button"
              className="cairn-chat__option"
              aria-label={`${value} of ${max}`}
              aria-pressed={chosen === value}
              onClick={() => submit({ value })}
            >
              {value}
            </button>
          ))}
        </div>
      </fieldset>
    </div>
  );
}

/** `choice`: one button per `input.options` (strings or `{value, label}`); the output is `{value}`. */
export function ChoiceWidget({ input, output, submitted, disabled, submit, promptId }: WidgetRendererProps): ReactNode {
  const raw = record(input).options ?? record(input).choices ?? record(input).slots;
  const options = (Array.isArray(raw) ? raw : []).flatMap((option): { value: unknown; label: string }[] => {
    if (typeof option === "string" || typeof option === "number") return [{ value: option, label: String(option) }];
    const spec = record(option);
    const value = spec.value ?? spec.id;
    if (value === undefined) return [];
    return [{ value, label: typeof spec.label === "string" ? spec.label : String(value) }];
  });
  const chosen = record(output).value;
  return (
    <div className="cairn-chat__widget cairn-chat__choice" data-prompt-id={promptId}>
      <fieldset disabled={disabled || submitted}>
        <Title input={input} />
        <div className="cairn-chat__options" role="group">
          {options.map((option) => (
            <button
              key={String(option.value)}
              type="button"
              className="cairn-chat__option"
              aria-pressed={chosen === option.value}
              onClick={() => submit({ value: option.value })}
            >
              {option.label}
            </button>
          ))}
        </div>
      </fieldset>
    </div>
  );
}

/** `date`: a date input bounded by `input.min`/`input.max`; the output is `{date: "YYYY-MM-DD"}`. */
export function DateWidget({ input, output, submitted, disabled, submit, promptId }: WidgetRendererProps): ReactNode {
  const { min, max } = record(input);
  const given = record(output).date;
  const [date, setDate] = useState(typeof given === "string" ? given : "");
  const id = useId();
  return (
    <form
      className="cairn-chat__widget cairn-chat__date"
      data-prompt-id={promptId}
      onSubmit={(event) => {
        event.preventDefault();
        if (date !== "" && !disabled && !submitted) submit({ date });
      }}
    >
      <fieldset disabled={disabled || submitted}>
        <Title input={input} />
        <div className="cairn-chat__field">
          <label htmlFor={id}>Date</label>
          <input
            id={id}
            type="date"
            required
            min={typeof min === "string" ? min : undefined}
            max={typeof max === "string" ? max : undefined}
            value={date}
            onChange={(event) => setDate(event.currentTarget.value)}
          />
        </div>
        <button type="submit" className="cairn-chat__button">
          {submitted ? "Sent" : "Choose"}
        </button>
      </fieldset>
    </form>
  );
}

/** `confirm`: yes or no to `input.message`; the output is `{confirmed}`. */
export function ConfirmWidget({ input, output, submitted, disabled, submit, promptId }: WidgetRendererProps): ReactNode {
  const { message, confirmLabel, cancelLabel } = record(input);
  const confirmed = record(output).confirmed;
  return (
    <div className="cairn-chat__widget cairn-chat__confirm" data-prompt-id={promptId}>
      <fieldset disabled={disabled || submitted}>
        {typeof message === "string" ? <legend className="cairn-chat__widget-title">{message}</legend> : null}
        <div className="cairn-chat__options" role="group">
          <button type="button" className="cairn-chat__option" aria-pressed={confirmed === true} onClick={() => submit({ confirmed: true })}>
            {typeof confirmLabel === "string" ? confirmLabel : "Yes"}
          </button>
          <button type="button" className="cairn-chat__option" aria-pressed={confirmed === false} onClick={() => submit({ confirmed: false })}>
            {typeof cancelLabel === "string" ? cancelLabel : "No"}
          </button>
        </div>
      </fieldset>
    </div>
  );
}

/** A kind without a renderer: a form when the input has `fields`, choices when it has `options`, else a note. */
export function FallbackWidget(props: WidgetRendererProps): ReactNode {
  const input = record(props.input);
  if (Array.isArray(input.fields)) return <FormWidget {...props} />;
  if (Array.isArray(input.options) || Array.isArray(input.choices) || Array.isArray(input.slots)) return <ChoiceWidget {...props} />;
  return (
    <div className="cairn-chat__widget cairn-chat__unsupported" data-prompt-id={props.promptId} role="note">
      This step needs a “{props.kind}” widget, which this chat cannot show.
    </div>
  );
}

/** The built-in renderers by kind. */
export const defaultWidgetRenderers: WidgetRenderers = {
  form: FormWidget,
  rating: RatingWidget,
  choice: ChoiceWidget,
  choices: ChoiceWidget,
  select: ChoiceWidget,
  slot: ChoiceWidget,
  slots: ChoiceWidget,
  date: DateWidget,
  confirm: ConfirmWidget,
};
