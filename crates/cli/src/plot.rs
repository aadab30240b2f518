//! Charts of a simulation report, PNG or SVG by the file's extension:
//! admission failures (pods rejected at admission, pods never placed) and
//! stranded CPUs per policy, one bar per scheduler; with DRA, pods whose
//! devices miss their CPUs' NUMA nodes.
//!
//! The layout is a pure function ([`layout`]) from the canvas size, the
//! labels and the values to rectangles: every text's box, the plot areas,
//! the legends. Drawing only paints what it computed, so the test can check
//! that no two text boxes intersect and nothing sits on the bars: legends
//! stand right of the plot area, group labels wrap or shrink to their slot,
//! y ticks are round steps (whole numbers on count axes) spaced for their
//! labels.
//!
//! Text is drawn with DejaVu Sans, embedded in the binary (`assets/`,
//! Bitstream Vera licence — permissive; see `assets/DejaVuSans.LICENSE.txt`),
//! so no system font or fontconfig is needed.

use std::path::Path;

use anyhow::{Context, anyhow, bail};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use topoalign_fleet::RunReport;

const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
const SCHEDULERS: [&str; 3] = ["unaware", "nrt", "exact"];
const COLOURS: [RGBColor; 3] = [RGBColor(214, 39, 40), RGBColor(255, 127, 14), RGBColor(44, 160, 44)];
const SIZE: (u32, u32) = (1200, 900);

/// What a panel shows of a run.
type Metric = fn(&RunReport) -> f64;

/// The panels: title, metric, whether its values are whole numbers.
const PANELS: [(&str, Metric, bool); 3] = [
    ("Pods rejected at admission", |r| r.rejected_at_admission as f64, true),
    ("Pods never placed", |r| r.unplaced as f64, true),
    (
        "Stranded CPUs (free, but no failed pod fits)",
        |r| r.stranded_cpus,
        false,
    ),
];

/// The panel added when some run placed pods with DRA claims.
const DRA_PANEL: (&str, Metric, bool) = (
    "Pods whose DRA devices miss their CPUs' NUMA nodes",
    |r| r.dra_misaligned as f64,
    true,
);

/// Writes the charts to `path` (`.png` or `.svg`).
///
/// # Errors
/// An unknown extension, or a drawing / file error.
pub fn write(path: &Path, runs: &[RunReport]) -> anyhow::Result<()> {
    register_font()?;
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("png") => {
            let root = BitMapBackend::new(path, SIZE).into_drawing_area();
            draw(&root, runs)?;
            root.present()
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        Some("svg") => {
            let root = SVGBackend::new(path, SIZE).into_drawing_area();
            draw(&root, runs)?;
            root.present()
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        _ => bail!("{}: the plot file must end in .png or .svg", path.display()),
    }
    Ok(())
}

fn register_font() -> anyhow::Result<()> {
    // Registering twice is harmless; plotters keeps the first.
    plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
        .map_err(|_| anyhow!("the embedded font is invalid"))
}

/// The width of `text` in pixels at `size`, as the bitmap backend draws
/// it with the embedded font.
fn text_width(text: &str, size: u32) -> i32 {
    ("sans-serif", f64::from(size)).into_font().box_size(text).map_or_else(
        |_| estimated_width(text, size),
        |(w, _)| i32::try_from(w).unwrap_or(i32::MAX),
    )
}

/// A fallback guess (0.65 em per character) if the font cannot measure.
fn estimated_width(text: &str, size: u32) -> i32 {
    i32::try_from(text.chars().count() as u64 * u64::from(size) * 65 / 100).unwrap_or(i32::MAX)
}

/// A rectangle in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rect {
    pub x: i32,
    pub y: i32,
    pub w: i32,
    pub h: i32,
}

impl Rect {
    fn right(self) -> i32 {
        self.x + self.w
    }

    fn bottom(self) -> i32 {
        self.y + self.h
    }

    /// Whether the two share any pixel.
    #[cfg(test)]
    pub fn intersects(self, other: Rect) -> bool {
        self.x < other.right() && other.x < self.right() && self.y < other.bottom() && other.y < self.bottom()
    }

    #[cfg(test)]
    pub fn inside(self, outer: Rect) -> bool {
        self.x >= outer.x && self.y >= outer.y && self.right() <= outer.right() && self.bottom() <= outer.bottom()
    }
}

/// How a text sits on its anchor point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    Center,
    Right,
}

/// One text and the box it may occupy.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Label {
    pub text: String,
    pub size: u32,
    pub align: Align,
    /// Holds the text as either backend draws it (the SVG viewer's font
    /// may be up to ~17 % wider than the embedded one).
    pub rect: Rect,
}

/// Text boxes: wider than measured for SVG viewers' fonts, and tall enough
/// for the bitmap backend's ascenders (above the anchor) and descenders.
const SVG_WIDTH: f64 = 1.17;
fn text_height(size: u32) -> i32 {
    i32::try_from(size).unwrap_or(0) * 5 / 4 + 1
}
fn ascent_above(size: u32) -> i32 {
    i32::try_from(size).unwrap_or(0) / 5
}

impl Label {
    /// A label whose anchor is `(x, top)`: `x` is its left edge, centre or
    /// right edge by `align`, `top` the top of its box.
    fn new(text: &str, size: u32, align: Align, x: i32, top: i32, measure: &dyn Fn(&str, u32) -> i32) -> Label {
        let w = (f64::from(measure(text, size)) * SVG_WIDTH).ceil() as i32 + 2;
        let left = match align {
            Align::Left => x,
            Align::Center => x - w / 2,
            Align::Right => x - w,
        };
        Label {
            text: text.to_string(),
            size,
            align,
            rect: Rect {
                x: left,
                y: top,
                w,
                h: text_height(size),
            },
        }
    }

    /// The point the text is drawn at, with its anchor.
    fn anchor(&self) -> ((i32, i32), Pos) {
        let y = self.rect.y + ascent_above(self.size);
        let (x, h) = match self.align {
            Align::Left => (self.rect.x + 1, HPos::Left),
            Align::Center => (self.rect.x + self.rect.w / 2, HPos::Center),
            Align::Right => (self.rect.right() - 1, HPos::Right),
        };
        ((x, y), Pos::new(h, VPos::Top))
    }
}

/// One panel, laid out.
#[derive(Clone, Debug)]
pub(crate) struct Panel {
    pub title: Label,
    /// Where the bars go.
    pub plot: Rect,
    /// The value at the top of the plot area (the bottom is 0).
    pub top: f64,
    /// Tick values, their pixel row, their labels.
    pub ticks: Vec<(f64, i32, Label)>,
    /// Per group: its slot (x range of the plot) and its label's lines.
    pub groups: Vec<(Rect, Vec<Label>)>,
    pub legend: Rect,
    /// Per series: its colour swatch and name.
    pub entries: Vec<(Rect, Label)>,
}

impl Panel {
    /// Every text box of the panel.
    pub fn texts(&self) -> Vec<&Label> {
        let mut texts = vec![&self.title];
        texts.extend(self.ticks.iter().map(|(_, _, l)| l));
        texts.extend(self.groups.iter().flat_map(|(_, lines)| lines));
        texts.extend(self.entries.iter().map(|(_, l)| l));
        texts
    }

    /// The pixel row of `value`.
    fn y_of(&self, value: f64) -> i32 {
        let share = if self.top > 0.0 { value / self.top } else { 0.0 };
        self.plot.bottom() - (share.clamp(0.0, 1.0) * f64::from(self.plot.h)).round() as i32
    }
}

/// What one panel shows.
pub(crate) struct PanelSpec<'a> {
    pub title: &'a str,
    /// The largest value.
    pub max: f64,
    /// Whole numbers only (counts): ticks are whole.
    pub integer: bool,
}

/// Lays the panels out one above the other on a `width` × `height`
/// canvas: `groups` are the x-axis groups' labels (one slot each, a bar
/// per series inside), `series` the legend's names.
pub(crate) fn layout(
    width: i32,
    height: i32,
    panels: &[PanelSpec<'_>],
    groups: &[String],
    series: &[&str],
    measure: &dyn Fn(&str, u32) -> i32,
) -> Vec<Panel> {
    let count = i32::try_from(panels.len().max(1)).unwrap_or(1);
    let panel_height = height / count;
    panels
        .iter()
        .enumerate()
        .map(|(i, spec)| {
            let area = Rect {
                x: 0,
                y: panel_height * i32::try_from(i).unwrap_or(0),
                w: width,
                h: panel_height,
            };
            layout_panel(area, spec, groups, series, measure)
        })
        .collect()
}

fn layout_panel(
    area: Rect,
    spec: &PanelSpec<'_>,
    groups: &[String],
    series: &[&str],
    measure: &dyn Fn(&str, u32) -> i32,
) -> Panel {
    let margin = 8;
    let title_size = u32::try_from(area.h / 13).unwrap_or(0).clamp(10, 22);
    let size = u32::try_from(area.h / 19).unwrap_or(0).clamp(8, 15);
    let line = text_height(size);
    let title = Label::new(
        spec.title,
        title_size,
        Align::Center,
        area.x + area.w / 2,
        area.y + margin,
        measure,
    );

    // The legend, right of the plot.
    let swatch = i32::try_from(size).unwrap_or(8) * 4 / 5;
    let pad = 6;
    let names_width = series
        .iter()
        .map(|name| Label::new(name, size, Align::Left, 0, 0, measure).rect.w)
        .max()
        .unwrap_or(0);
    let legend_w = pad + swatch + 6 + names_width + pad;
    let entry_h = line + 2;
    let plot_top = title.rect.bottom() + 4 + line / 2 + 2;
    let legend = Rect {
        x: area.right() - margin - legend_w,
        y: plot_top,
        w: legend_w,
        h: pad * 2 + entry_h * i32::try_from(series.len()).unwrap_or(0),
    };
    let entries = series
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let top = legend.y + pad + entry_h * i32::try_from(i).unwrap_or(0);
            let swatch_rect = Rect {
                x: legend.x + pad,
                y: top + (line - swatch) / 2,
                w: swatch,
                h: swatch,
            };
            (
                swatch_rect,
                Label::new(name, size, Align::Left, swatch_rect.right() + 6, top, measure),
            )
        })
        .collect();

    // Two lines for group labels below the plot, half a tick label's
    // height above and below it.
    let labels_h = 4 + 2 * line;
    let plot_bottom = area.bottom() - margin - labels_h;
    let plot_h = (plot_bottom - plot_top).max(1);
    let (top, values) = ticks(spec.max, spec.integer, plot_h, line);
    let decimals = if spec.integer {
        0
    } else {
        decimals(values.get(1).copied().unwrap_or(1.0))
    };
    let texts: Vec<String> = values.iter().map(|v| format!("{v:.decimals$}")).collect();
    let tick_w = texts
        .iter()
        .map(|t| Label::new(t, size, Align::Right, 0, 0, measure).rect.w)
        .max()
        .unwrap_or(0);
    let plot = Rect {
        x: area.x + margin + tick_w + 6,
        y: plot_top,
        w: (legend.x - 12 - (area.x + margin + tick_w + 6)).max(1),
        h: plot_h,
    };
    let mut panel = Panel {
        title,
        plot,
        top,
        ticks: Vec::new(),
        groups: Vec::new(),
        legend,
        entries,
    };
    panel.ticks = values
        .iter()
        .zip(&texts)
        .map(|(&value, text)| {
            let y = panel.y_of(value);
            (
                value,
                y,
                Label::new(text, size, Align::Right, plot.x - 5, y - line / 2, measure),
            )
        })
        .collect();
    let slots = i32::try_from(groups.len().max(1)).unwrap_or(1);
    let slot_rects: Vec<Rect> = (0..slots)
        .map(|g| Rect {
            x: plot.x + plot.w * g / slots,
            y: plot.y,
            w: plot.w * (g + 1) / slots - plot.w * g / slots,
            h: plot.h,
        })
        .collect();
    let room = slot_rects.iter().map(|r| r.w).min().unwrap_or(0) - 4;
    let (lines, size) = group_lines(groups, room, size, measure);
    let line_h = text_height(size);
    panel.groups = slot_rects
        .iter()
        .zip(lines)
        .map(|(&slot, lines)| {
            let centre = slot.x + slot.w / 2;
            let labels = lines
                .iter()
                .enumerate()
                .map(|(i, l)| {
                    let y = plot.bottom() + 4 + line_h * i32::try_from(i).unwrap_or(0);
                    Label::new(l, size, Align::Center, centre, y, measure)
                })
                .collect();
            (slot, labels)
        })
        .collect();
    panel
}

/// The group labels' lines and their one font size, alike for all groups:
/// one line each if all fit `room`; else split at " / " into two lines,
/// shrinking the font (down to 7 px) until they fit; else cut short with
/// "…".
fn group_lines(groups: &[String], room: i32, size: u32, measure: &dyn Fn(&str, u32) -> i32) -> (Vec<Vec<String>>, u32) {
    let width = |text: &str, size: u32| Label::new(text, size, Align::Center, 0, 0, measure).rect.w;
    let fits = |lines: &[Vec<String>], size: u32| lines.iter().flatten().all(|l| width(l, size) <= room);
    let one: Vec<Vec<String>> = groups.iter().map(|g| vec![g.clone()]).collect();
    if fits(&one, size) {
        return (one, size);
    }
    let mut two: Vec<Vec<String>> = groups
        .iter()
        .map(|g| match g.split_once(" / ") {
            Some((a, b)) => vec![a.to_string(), b.to_string()],
            None => vec![g.clone()],
        })
        .collect();
    let mut size = size;
    while !fits(&two, size) && size > 7 {
        size -= 1;
    }
    for line in two.iter_mut().flatten() {
        while width(line, size) > room && line.chars().count() > 1 {
            let keep = line.chars().count().saturating_sub(2);
            let mut shorter: String = line.chars().take(keep).collect();
            shorter.push('…');
            *line = shorter;
        }
    }
    (two, size)
}

/// The y axis: its top value and the tick values from 0, a round step
/// (1, 2 or 5 × 10^k; whole for `integer`) with at least `2 · line`
/// pixels between ticks, at most 6 steps.
pub(crate) fn ticks(max: f64, integer: bool, plot_h: i32, line: i32) -> (f64, Vec<f64>) {
    let max = if max.is_finite() && max > 0.0 { max } else { 1.0 };
    let steps = (plot_h / (2 * line).max(1)).clamp(1, 6);
    let raw = max / f64::from(steps);
    let magnitude = 10f64.powf(raw.log10().floor());
    let mut step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|&s| s >= raw)
        .unwrap_or(10.0 * magnitude);
    if integer {
        step = step.max(1.0).round();
    }
    let n = (max / step).ceil().max(1.0);
    let values = (0..=n as u32).map(|i| f64::from(i) * step).collect();
    (n * step, values)
}

/// Decimals that show a step exactly (0 for whole steps).
fn decimals(step: f64) -> usize {
    if step >= 1.0 || step <= 0.0 {
        0
    } else {
        usize::try_from((-step.log10().floor()) as i64).unwrap_or(0)
    }
}

fn group_names(runs: &[RunReport]) -> Vec<(String, String)> {
    let mut groups: Vec<(String, String)> = Vec::new();
    for run in runs {
        let key = (run.policy.clone(), run.scope.clone());
        if !groups.contains(&key) {
            groups.push(key);
        }
    }
    groups
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, runs: &[RunReport]) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let groups = group_names(runs);
    let labels: Vec<String> = groups
        .iter()
        .map(|(policy, scope)| {
            if scope == "as-configured" {
                policy.clone()
            } else {
                format!("{policy} / {scope}")
            }
        })
        .collect();
    let mut shown = PANELS.to_vec();
    if runs.iter().any(|r| r.dra_pods > 0) {
        shown.push(DRA_PANEL);
    }
    let specs: Vec<PanelSpec<'_>> = shown
        .iter()
        .map(|&(title, metric, integer)| PanelSpec {
            title,
            max: runs.iter().map(metric).fold(0.0, f64::max),
            integer,
        })
        .collect();
    let (w, h) = root.dim_in_pixel();
    let width = i32::try_from(w).unwrap_or(i32::MAX);
    let height = i32::try_from(h).unwrap_or(i32::MAX);
    let panels = layout(width, height, &specs, &labels, &SCHEDULERS, &text_width);
    for (panel, &(_, metric, _)) in panels.iter().zip(shown.iter()) {
        draw_panel(root, panel, &groups, runs, metric)?;
    }
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    panel: &Panel,
    groups: &[(String, String)],
    runs: &[RunReport],
    metric: Metric,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("{e}");
    let grey = RGBColor(220, 220, 220);
    let plot = panel.plot;
    for &(_, y, _) in &panel.ticks {
        root.draw(&PathElement::new(vec![(plot.x, y), (plot.right(), y)], grey))
            .map_err(err)?;
    }
    let series = i32::try_from(SCHEDULERS.len()).unwrap_or(1);
    for ((slot, _), (policy, scope)) in panel.groups.iter().zip(groups) {
        let bar_w = (slot.w * 4 / 5 / series).max(1);
        let start = slot.x + (slot.w - bar_w * series) / 2;
        for (s, (scheduler, colour)) in SCHEDULERS.iter().zip(COLOURS).enumerate() {
            let Some(run) = runs
                .iter()
                .find(|r| &r.policy == policy && &r.scope == scope && r.scheduler == *scheduler)
            else {
                continue;
            };
            let x = start + bar_w * i32::try_from(s).unwrap_or(0);
            let y = panel.y_of(metric(run));
            root.draw(&Rectangle::new([(x, y), (x + bar_w, plot.bottom())], colour.filled()))
                .map_err(err)?;
        }
    }
    root.draw(&PathElement::new(
        vec![(plot.x, plot.y), (plot.x, plot.bottom()), (plot.right(), plot.bottom())],
        BLACK,
    ))
    .map_err(err)?;
    for &(_, y, _) in &panel.ticks {
        root.draw(&PathElement::new(vec![(plot.x - 4, y), (plot.x, y)], BLACK))
            .map_err(err)?;
    }
    let legend = panel.legend;
    root.draw(&Rectangle::new(
        [(legend.x, legend.y), (legend.right(), legend.bottom())],
        BLACK.stroke_width(1),
    ))
    .map_err(err)?;
    for ((swatch, _), colour) in panel.entries.iter().zip(COLOURS) {
        root.draw(&Rectangle::new(
            [(swatch.x, swatch.y), (swatch.right(), swatch.bottom())],
            colour.filled(),
        ))
        .map_err(err)?;
    }
    for label in panel.texts() {
        let (at, pos) = label.anchor();
        let style = ("sans-serif", f64::from(label.size)).into_font().color(&BLACK).pos(pos);
        root.draw(&Text::new(label.text.clone(), at, style)).map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(count: usize, scoped: bool) -> Vec<String> {
        let policies = ["none", "best-effort", "restricted", "single-numa-node"];
        (0..count)
            .map(|i| {
                let policy = policies[i % 4];
                if scoped {
                    format!("{policy} / {}", if i / 4 % 2 == 0 { "container" } else { "pod" })
                } else {
                    policy.to_string()
                }
            })
            .collect()
    }

    #[test]
    fn no_two_text_boxes_intersect_and_nothing_covers_the_bars() {
        register_font().expect("font");
        let sizes = [(1200, 900), (800, 600), (640, 480), (1600, 1200), (500, 400)];
        let maxima = [0.0, 3.0, 57.4, 1300.0, 123_456.0];
        for (width, height) in sizes {
            for count in [1, 2, 4, 8] {
                for scoped in [false, true] {
                    let groups = labels(count, scoped);
                    let specs: Vec<PanelSpec<'_>> = maxima
                        .iter()
                        .take(3)
                        .zip([true, true, false])
                        .map(|(&max, integer)| PanelSpec {
                            title: "Stranded CPUs (free, but no failed pod fits)",
                            max,
                            integer,
                        })
                        .chain(maxima.iter().skip(3).map(|&max| PanelSpec {
                            title: "Pods never placed",
                            max,
                            integer: true,
                        }))
                        .take(3)
                        .collect();
                    let panels = layout(width, height, &specs, &groups, &SCHEDULERS, &text_width);
                    let canvas = Rect {
                        x: 0,
                        y: 0,
                        w: width,
                        h: height,
                    };
                    let case = format!("{width}x{height}, {count} groups, scoped {scoped}");
                    let texts: Vec<&Label> = panels.iter().flat_map(Panel::texts).collect();
                    for (i, a) in texts.iter().enumerate() {
                        assert!(a.rect.inside(canvas), "{case}: {a:?} leaves the canvas");
                        for b in &texts[i + 1..] {
                            assert!(!a.rect.intersects(b.rect), "{case}: {a:?} and {b:?} overlap");
                        }
                        for panel in &panels {
                            assert!(!a.rect.intersects(panel.plot), "{case}: {a:?} covers the plot");
                        }
                    }
                    for panel in &panels {
                        assert!(
                            !panel.legend.intersects(panel.plot),
                            "{case}: the legend covers the plot"
                        );
                        for label in panel.texts() {
                            let own = panel.entries.iter().any(|(_, l)| l == label);
                            assert!(
                                own || !label.rect.intersects(panel.legend),
                                "{case}: {label:?} under the legend"
                            );
                        }
                        for (slot, lines) in &panel.groups {
                            for line in lines {
                                assert!(
                                    line.rect.x >= slot.x && line.rect.right() <= slot.right(),
                                    "{case}: {line:?}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn count_axes_read_whole_numbers_in_round_steps() {
        for max in [0.0, 1.0, 3.0, 7.0, 50.0, 258.0, 1300.0, 99_999.0] {
            let (top, values) = ticks(max, true, 200, 19);
            assert!(top >= max, "{max}: {top}");
            assert!(values.len() >= 2, "{max}: {values:?}");
            let step = values[1];
            assert!(values.iter().all(|v| v.fract() == 0.0), "{max}: {values:?}");
            let mantissa = step / 10f64.powf(step.log10().floor());
            assert!(
                [1.0, 2.0, 5.0].iter().any(|m| (m - mantissa).abs() < 1e-9),
                "{max}: {step}"
            );
        }
        // Fractional axes print as many decimals as their step needs.
        let (_, values) = ticks(1.2, false, 200, 19);
        assert_eq!(decimals(values[1]), 1, "{values:?}");
        let (_, values) = ticks(57.4, false, 200, 19);
        assert_eq!(decimals(values[1]), 0, "{values:?}");
        assert!(values.iter().all(|v| v.fract() == 0.0), "{values:?}");
    }

    #[test]
    fn long_group_labels_wrap_then_shrink_then_are_cut_short() {
        register_font().expect("font");
        let groups = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let texts = |lines: &[Vec<String>]| lines.iter().map(|l| l.join("|")).collect::<Vec<_>>();
        let names = groups(&["none / pod", "single-numa-node / container"]);
        let (lines, size) = group_lines(&names, 400, 15, &text_width);
        assert_eq!(texts(&lines), ["none / pod", "single-numa-node / container"]);
        assert_eq!(size, 15);
        // Too wide for one line: every group wraps, at one size.
        let (lines, size) = group_lines(&names, 150, 15, &text_width);
        assert_eq!(texts(&lines), ["none|pod", "single-numa-node|container"]);
        assert!((7..=15).contains(&size));
        // Too narrow even at the smallest size: cut short.
        let (lines, size) = group_lines(&names, 36, 15, &text_width);
        assert_eq!(size, 7);
        assert!(lines[1][0].ends_with('…'), "{lines:?}");
        for line in lines.iter().flatten() {
            assert!(
                Label::new(line, size, Align::Center, 0, 0, &text_width).rect.w <= 36,
                "{line}"
            );
        }
    }
}
