// The built-in widget renderers on their own: what a user sees and what they submit.

import { cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it } from "vitest";

import { ChoiceWidget, ConfirmWidget, DateWidget, FallbackWidget, FormWidget, RatingWidget } from "../../src/index.js";

afterEach(cleanup);

function collect() {
  const outputs: unknown[] = [];
  return { outputs, submit: (output: unknown) => outputs.push(output) };
}

describe("built-in widget renderers", () => {
  it("form: fields given as objects keep their labels and types; required fields block the submit", () => {
    const { outputs, submit } = collect();
    render(
      <FormWidget
        kind="form"
        promptId="prm_1"
        input={{ title: "Your details", fields: [{ name: "phone", label: "Mobile number" }, { name: "company", required: false }] }}
        submit={submit}
      />,
    );
    expect(screen.getByRole("group", { name: "Your details" })).toBeTruthy();
    const phone = screen.getByLabelText("Mobile number");
    expect(phone.getAttribute("type")).toBe("tel");
    expect(phone.hasAttribute("required")).toBe(true);
    expect(screen.getByLabelText("Company").hasAttribute("required")).toBe(false);
    fireEvent.click(screen.getByRole("button", { name: "Submit" }));
    expect(outputs).toEqual([]);
    fireEvent.change(phone, { target: { value: " +44 20 7946 0000 " } });
    fireEvent.click(screen.getByRole("button", { name: "Submit" }));
    expect(outputs).toEqual([{ phone: "+44 20 7946 0000", company: "" }]);
  });

  it("rating: one button per value, the chosen one pressed once submitted", () => {
    const { outputs, submit } = collect();
    const { rerender } = render(<RatingWidget kind="rating" promptId="prm_2" input={{ min: 0, max: 10 }} submit={submit} />);
    expect(screen.getAllByRole("button")).toHaveLength(11);
    fireEvent.click(screen.getByRole("button", { name: "7 of 10" }));
    expect(outputs).toEqual([{ value: 7 }]);
    rerender(<RatingWidget kind="rating" promptId="prm_2" input={{ min: 0, max: 10 }} output={{ value: 7 }} submitted submit={submit} />);
    expect(screen.getByRole("button", { name: "7 of 10" }).getAttribute("aria-pressed")).toBe("true");
    expect(screen.getByRole("button", { name: "7 of 10" }).closest("fieldset")).toHaveProperty("disabled", true);
  });

  it("choice: options as strings or {value, label}; slots too", () => {
    const { outputs, submit } = collect();
    render(
      <ChoiceWidget
        kind="slot"
        promptId="prm_3"
        input={{ title: "Pick a time", slots: [{ id: "slot_1", label: "Mon 10:00" }, { id: "slot_2", label: "Tue 14:00" }] }}
        submit={submit}
      />,
    );
    fireEvent.click(screen.getByRole("button", { name: "Tue 14:00" }));
    expect(outputs).toEqual([{ value: "slot_2" }]);
  });

  it("date and confirm", () => {
    const { outputs, submit } = collect();
    render(<DateWidget kind="date" promptId="prm_4" input={{ min: "2026-12-01" }} submit={submit} />);
    const date = screen.getByLabelText("Date");
    expect(date.getAttribute("min")).toBe("2026-12-01");
    fireEvent.change(date, { target: { value: "2026-12-03" } });
    fireEvent.click(screen.getByRole("button", { name: "Choose" }));
    render(<ConfirmWidget kind="confirm" promptId="prm_5" input={{ message: "Book it?", confirmLabel: "Book" }} submit={submit} />);
    fireEvent.click(screen.getByRole("button", { name: "Book" }));
    expect(outputs).toEqual([{ date: "2026-12-03" }, { confirmed: true }]);
  });

  it("an unknown kind without fields or options says the chat cannot show it", () => {
    render(<FallbackWidget kind="signature" promptId="prm_6" input={{}} submit={() => undefined} />);
    expect(screen.getByRole("note").textContent).toContain("signature");
  });
});
