//! Charts of a simulation report, PNG or SVG by the file's extension:
//! admission failures (pods rejected at admission, pods never placed) and
//! stranded CPUs per policy, one bar per scheduler.
//!
//! Text is drawn with DejaVu Sans, embedded in the binary (`assets/`,
//! Bitstream Vera licence — permissive; see `assets/DejaVuSans.LICENSE.txt`),
//! so no system font or fontconfig is needed.

use std::path::Path;

use anyhow::{Context, anyhow, bail};
use plotters::coord::Shift;
use plotters::prelude::*;
use topoalign_fleet::RunReport;

const FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
const SCHEDULERS: [&str; 3] = ["unaware", "nrt", "exact"];
/// What a panel shows of a run.
type Metric = fn(&RunReport) -> f64;

const COLOURS: [RGBColor; 3] = [RGBColor(214, 39, 40), RGBColor(255, 127, 14), RGBColor(44, 160, 44)];

/// Writes the charts to `path` (`.png` or `.svg`).
///
/// # Errors
/// An unknown extension, or a drawing / file error.
pub fn write(path: &Path, runs: &[RunReport]) -> anyhow::Result<()> {
    // Registering twice is harmless; plotters keeps the first.
    plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
        .map_err(|_| anyhow!("the embedded font is invalid"))?;
    let size = (1200, 900);
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("png") => {
            let root = BitMapBackend::new(path, size).into_drawing_area();
            draw(&root, runs)?;
            root.present()
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        Some("svg") => {
            let root = SVGBackend::new(path, size).into_drawing_area();
            draw(&root, runs)?;
            root.present()
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        _ => bail!("{}: the plot file must end in .png or .svg", path.display()),
    }
    Ok(())
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, runs: &[RunReport]) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    let mut policies: Vec<(String, String)> = Vec::new();
    for run in runs {
        let key = (run.policy.clone(), run.scope.clone());
        if !policies.contains(&key) {
            policies.push(key);
        }
    }
    let panels = root.split_evenly((3, 1));
    let metrics: [(&str, Metric); 3] = [
        ("Pods rejected at admission", |r| r.rejected_at_admission as f64),
        ("Pods never placed", |r| r.unplaced as f64),
        ("Stranded CPUs (free, but no failed pod fits)", |r| r.stranded_cpus),
    ];
    for (panel, (title, metric)) in panels.iter().zip(metrics) {
        bars(panel, title, &policies, runs, metric)?;
    }
    Ok(())
}

fn bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    policies: &[(String, String)],
    runs: &[RunReport],
    metric: Metric,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let slots = i32::try_from(policies.len() * 4).unwrap_or(i32::MAX);
    let top = runs.iter().map(metric).fold(0.0, f64::max).max(1.0) * 1.35;
    let label = |x: &i32| {
        let index = usize::try_from(*x).unwrap_or(0);
        if index % 4 != 1 {
            return String::new();
        }
        policies.get(index / 4).map_or(String::new(), |(policy, scope)| {
            if scope == "as-configured" {
                policy.clone()
            } else {
                format!("{policy} / {scope}")
            }
        })
    };
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(70)
        .build_cartesian_2d(0..slots, 0.0..top)
        .map_err(|e| anyhow!("{e}"))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(policies.len() * 4)
        .x_label_formatter(&label)
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    for (s, (scheduler, colour)) in SCHEDULERS.iter().zip(COLOURS).enumerate() {
        let s = i32::try_from(s).unwrap_or(0);
        let bars: Vec<Rectangle<(i32, f64)>> = policies
            .iter()
            .enumerate()
            .filter_map(|(p, (policy, scope))| {
                let run = runs
                    .iter()
                    .find(|r| &r.policy == policy && &r.scope == scope && r.scheduler == *scheduler)?;
                let x = i32::try_from(p * 4).unwrap_or(0) + s;
                Some(Rectangle::new([(x, 0.0), (x + 1, metric(run))], colour.filled()))
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(|e| anyhow!("{e}"))?
            .label(*scheduler)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 12, y + 6)], colour.filled()));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| anyhow!("{e}"))?;
    Ok(())
}
