//! The report: its rows and notes, and how it prints.

enum Verdict {
    Ok,
    Over,
    Info,
}

struct Row {
    figure: String,
    measured: String,
    budget: String,
    verdict: Verdict,
}

#[derive(Default)]
pub(crate) struct Report {
    rows: Vec<Row>,
    pub(crate) notes: Vec<String>,
    /// Parts that failed before giving all their figures.
    stopped: usize,
}

impl Report {
    pub(crate) fn check(&mut self, figure: String, measured: String, budget: String, ok: bool) {
        let verdict = if ok { Verdict::Ok } else { Verdict::Over };
        self.rows.push(Row { figure, measured, budget, verdict });
    }

    pub(crate) fn info(&mut self, figure: String, measured: String) {
        self.rows.push(Row { figure, measured, budget: "—".into(), verdict: Verdict::Info });
    }

    pub(crate) fn note(&mut self, note: String) {
        eprintln!("  {note}");
        self.notes.push(note);
    }

    /// A part of the bench failed: its figures are missing, which the summary says.
    pub(crate) fn stopped_short(&mut self, part: &str, error: &anyhow::Error) {
        self.stopped += 1;
        self.note(format!("the {part} figures stopped short: {error:#}"));
    }

    pub(crate) fn print(&self) {
        let width = |pick: fn(&Row) -> &str, title: &str| {
            self.rows
                .iter()
                .map(|row| pick(row).chars().count())
                .max()
                .unwrap_or(0)
                .max(title.len())
        };
        let (figure, measured, budget) = (
            width(|row| &row.figure, "Figure"),
            width(|row| &row.measured, "Measured"),
            width(|row| &row.budget, "Budget"),
        );
        println!();
        println!("Cairn benchmark report (budgets: DESIGN.md, \"Budgets\")");
        println!();
        println!(
            "{:<figure$}  {:>measured$}  {:<budget$}  Verdict",
            "Figure", "Measured", "Budget"
        );
        println!("{}", "-".repeat(figure + measured + budget + 6 + 11));
        for row in &self.rows {
            let verdict = match row.verdict {
                Verdict::Ok => "ok",
                Verdict::Over => "OVER BUDGET",
                Verdict::Info => "",
            };
            // Pad by characters, not bytes: `µs` and `≥` are multi-byte.
            let pad = |text: &str, to: usize| " ".repeat(to.saturating_sub(text.chars().count()));
            println!(
                "{}{}  {}{}  {}{}  {verdict}",
                row.figure,
                pad(&row.figure, figure),
                pad(&row.measured, measured),
                row.measured,
                row.budget,
                pad(&row.budget, budget),
            );
        }
        let over = self.rows.iter().filter(|row| matches!(row.verdict, Verdict::Over)).count();
        println!();
        match (over, self.stopped) {
            (0, 0) => println!("All figures within budget."),
            (0, stopped) => println!(
                "The figures measured are within budget; {stopped} part(s) stopped short (see the notes)."
            ),
            (over, 0) => println!("{over} figure(s) OVER BUDGET."),
            (over, stopped) => println!(
                "{over} figure(s) OVER BUDGET; {stopped} part(s) stopped short (see the notes)."
            ),
        }
        if !self.notes.is_empty() {
            println!();
            println!("Notes:");
            for note in &self.notes {
                println!("  - {note}");
            }
        }
    }
}

/// Figures measured at each corpus size, reported as growth factors between sizes: a flat
/// curve is a factor near 1 however large the step.
#[derive(Default)]
pub(crate) struct Growth {
    /// `(figure, its measures)`, in the order first measured.
    figures: Vec<(&'static str, Vec<Measured>)>,
}

/// A corpus size and the p50 and p99 measured at it.
type Measured = (usize, [std::time::Duration; 2]);

impl Growth {
    pub(crate) fn add(
        &mut self,
        size: usize,
        figure: &'static str,
        values: [std::time::Duration; 2],
    ) {
        match self.figures.iter_mut().find(|(name, _)| *name == figure) {
            Some((_, sizes)) => sizes.push((size, values)),
            None => self.figures.push((figure, vec![(size, values)])),
        }
    }

    /// One row a figure and step between sizes: `×a / ×b` for p50 and p99.
    pub(crate) fn report(&self, report: &mut Report) {
        for (figure, sizes) in &self.figures {
            for pair in sizes.windows(2) {
                let [(from, before), (to, after)] = pair else { continue };
                let factor = |i: usize| {
                    after[i].as_secs_f64() / before[i].as_secs_f64().max(f64::MIN_POSITIVE)
                };
                report.info(
                    format!(
                        "growth of {figure}, {} → {}",
                        crate::stats::count(*from as f64),
                        crate::stats::count(*to as f64)
                    ),
                    format!("×{:.1} / ×{:.1}", factor(0), factor(1)),
                );
            }
        }
    }
}
