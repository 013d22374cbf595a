//! SVG charts (plotters, SVG backend only: no fonts or bitmaps needed): line charts with an
//! optional log-2 x axis and log-10 y axis, and grouped bar charts.
//!
//! Log axes are drawn as linear axes over the logarithm, with ticks at whole powers and their
//! labels written out ("100 µs", "1 ms"): plotters' own log scale draws a dense minor grid that
//! hides the lines, and float labels came out as `0.6000000000000001`.

use std::path::Path;

use plotters::prelude::*;

/// One line of a chart.
#[derive(Clone, Debug)]
pub struct Series {
    /// The line's label in the legend.
    pub label: String,
    /// Its (x, y) points.
    pub points: Vec<(f64, f64)>,
}

/// What the y values are, for their tick labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum YUnit {
    /// Plain numbers.
    Plain,
    /// Microseconds: labelled "500 µs", "2 ms", "1.5 s".
    Micros,
}

/// A line chart.
pub struct Chart<'a> {
    /// The chart's title.
    pub title: &'a str,
    /// The x axis's label.
    pub x_label: &'a str,
    /// The y axis's label.
    pub y_label: &'a str,
    /// The lines.
    pub series: &'a [Series],
    /// Draw x on a log-2 scale (threads per core, queue depth).
    pub log_x: bool,
    /// Draw y on a log-10 scale (latencies over orders of magnitude); values ≤ 0 are left out.
    pub log_y: bool,
    /// How the y axis's values are shown.
    pub y_unit: YUnit,
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// `v` without float noise: an integer when it is one, else at most 3 decimals, trailing
/// zeros dropped (0.6000000000000001 → "0.6").
pub fn format_number(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        return format!("{}", v.round() as i64);
    }
    let text = format!("{v:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A value of `unit` as a tick label.
pub fn format_value(v: f64, unit: YUnit) -> String {
    match unit {
        YUnit::Plain => format_number(v),
        YUnit::Micros if v >= 1e6 => format!("{} s", format_number(v / 1e6)),
        YUnit::Micros if v >= 1e3 => format!("{} ms", format_number(v / 1e3)),
        YUnit::Micros => format!("{} µs", format_number(v)),
    }
}

/// The axis range of the (transformed) values `lo..=hi`: whole powers on a log axis, from 0
/// (with 10 % headroom) on a linear one.
fn axis_range(lo: f64, hi: f64, log: bool) -> (f64, f64) {
    if log {
        let (lo, hi) = (lo.floor(), hi.ceil());
        (lo, hi.max(lo + 1.0))
    } else {
        (0.0, (hi * 1.1).max(1e-9))
    }
}

/// Writes `chart` to `path` as SVG.
#[expect(
    clippy::too_many_lines,
    reason = "one chart in plotters' builder order: mesh, axes, each series and the legend"
)]
pub fn write_svg(path: &Path, chart: &Chart<'_>) -> Result<(), String> {
    create_parent(path)?;
    let tx = |x: f64| if chart.log_x { x.max(1e-9).log2() } else { x };
    let ty = |y: f64| if chart.log_y { y.log10() } else { y };
    let series: Vec<(String, Vec<(f64, f64)>)> = chart
        .series
        .iter()
        .map(|s| {
            let points = s
                .points
                .iter()
                .filter(|&&(x, y)| x.is_finite() && y.is_finite() && (!chart.log_y || y > 0.0))
                .map(|&(x, y)| (tx(x), ty(y)))
                .collect();
            (s.label.clone(), points)
        })
        .collect();
    let all = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x_lo, mut x_hi, mut y_lo, mut y_hi) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in all {
        (x_lo, x_hi) = (x_lo.min(x), x_hi.max(x));
        (y_lo, y_hi) = (y_lo.min(y), y_hi.max(y));
    }
    if x_lo > x_hi {
        (x_lo, x_hi, y_lo, y_hi) = (0.0, 1.0, 0.0, 1.0);
    }
    let (x_lo, x_hi) = if chart.log_x {
        axis_range(x_lo, x_hi, true)
    } else {
        (0.0, x_hi.max(1.0) * 1.05)
    };
    let (y_lo, y_hi) = axis_range(y_lo, y_hi, chart.log_y);
    let (log_x, log_y, unit) = (chart.log_x, chart.log_y, chart.y_unit);
    let label_x = move |v: &f64| {
        if log_x {
            format_number(2f64.powf(*v).round())
        } else {
            format_number(*v)
        }
    };
    let label_y = move |v: &f64| {
        if log_y {
            format_value(10f64.powf(*v), unit)
        } else {
            format_value(*v, unit)
        }
    };
    let x_labels = if log_x {
        (x_hi - x_lo) as usize + 1
    } else {
        11
    };
    let y_labels = if log_y {
        (y_hi - y_lo) as usize + 1
    } else {
        11
    };
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let mut ctx = ChartBuilder::on(&root)
            .caption(chart.title, ("sans-serif", 18))
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)?;
        ctx.configure_mesh()
            .x_desc(chart.x_label)
            .y_desc(chart.y_label)
            .x_labels(x_labels)
            .y_labels(y_labels)
            .x_label_formatter(&label_x)
            .y_label_formatter(&label_y)
            .light_line_style(WHITE)
            .draw()?;
        for (i, (label, points)) in series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            ctx.draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))?
                .label(label.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color));
            ctx.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
        }
        ctx.configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| format!("drawing {}: {e}", path.display()))
}

/// One cluster of bars (one bar per category; `None`: not measured).
#[derive(Clone, Debug)]
pub struct Cluster {
    /// The cluster's label in the legend.
    pub label: String,
    /// One value per category (`None`: no bar).
    pub values: Vec<Option<f64>>,
}

/// A grouped bar chart: clusters along x, one colored bar per category in each, a legend of
/// the categories, and an optional horizontal reference line.
pub struct BarChart<'a> {
    /// The chart's title.
    pub title: &'a str,
    /// The y axis's label.
    pub y_label: &'a str,
    /// The categories along the x axis.
    pub categories: &'a [String],
    /// The bars of each category.
    pub clusters: &'a [Cluster],
    /// A dashed horizontal line (e.g. 1.0 for "as fast as the baseline").
    pub reference: Option<f64>,
}

/// Writes `chart` to `path` as SVG.
pub fn write_bar_svg(path: &Path, chart: &BarChart<'_>) -> Result<(), String> {
    create_parent(path)?;
    let n = chart.categories.len().max(1);
    let y_max = chart
        .clusters
        .iter()
        .flat_map(|c| c.values.iter().flatten())
        .copied()
        .chain(chart.reference)
        .fold(0.0f64, f64::max);
    let (_, y_hi) = axis_range(0.0, y_max, false);
    let clusters = chart.clusters.len().max(1);
    // Cluster i spans x in [i, i + 1): its bars fill [i + 0.1, i + 0.9).
    let width = 0.8 / n as f64;
    let root = SVGBackend::new(path, (1000, 560)).into_drawing_area();
    let labels: Vec<String> = chart.clusters.iter().map(|c| c.label.clone()).collect();
    let label_x = move |v: &f64| {
        let i = v.floor() as usize;
        if (v - v.floor() - 0.5).abs() < 1e-6 {
            labels.get(i).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let mut ctx = ChartBuilder::on(&root)
            .caption(chart.title, ("sans-serif", 18))
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..clusters as f64, 0f64..y_hi)?;
        ctx.configure_mesh()
            .y_desc(chart.y_label)
            .x_labels(2 * clusters + 1)
            .x_label_formatter(&label_x)
            .y_label_formatter(&|v: &f64| format_number(*v))
            .disable_x_mesh()
            .light_line_style(WHITE)
            .draw()?;
        for (k, category) in chart.categories.iter().enumerate() {
            let color = COLORS[k % COLORS.len()];
            let bars = chart.clusters.iter().enumerate().filter_map(|(i, c)| {
                let v = (*c.values.get(k)?)?;
                let x0 = i as f64 + 0.1 + k as f64 * width;
                Some(Rectangle::new(
                    [(x0, 0.0), (x0 + width * 0.92, v)],
                    color.filled(),
                ))
            });
            ctx.draw_series(bars)?
                .label(category.clone())
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled())
                });
        }
        if let Some(r) = chart.reference {
            ctx.draw_series(DashedLineSeries::new(
                vec![(0.0, r), (clusters as f64, r)],
                6,
                4,
                BLACK.stroke_width(1),
            ))?;
        }
        ctx.configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()?;
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| format!("drawing {}: {e}", path.display()))
}

fn create_parent(path: &Path) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_svg(name: &str) -> std::path::PathBuf {
        std::env::temp_dir()
            .join(format!("tamer-plot-{}", std::process::id()))
            .join(name)
    }

    #[test]
    fn writes_an_svg_with_every_label() {
        let path = temp_svg("t.svg");
        let series = vec![
            Series {
                label: "alpha".into(),
                points: vec![(1.0, 0.5), (2.0, 0.8), (4.0, 0.9)],
            },
            Series {
                label: "beta".into(),
                points: vec![(1.0, 0.1), (4.0, 0.3)],
            },
        ];
        write_svg(
            &path,
            &Chart {
                title: "test",
                x_label: "x",
                y_label: "y",
                series: &series,
                log_x: true,
                log_y: false,
                y_unit: YUnit::Plain,
            },
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("<svg") && text.contains("alpha") && text.contains("beta"));
        std::fs::remove_file(path).unwrap();
    }

    /// Mutation caught: raw float labels (`0.6000000000000001`) or log ticks not at powers.
    #[test]
    fn labels_are_readable() {
        assert_eq!(format_number(0.6000000000000001), "0.6");
        assert_eq!(format_number(3.0), "3");
        assert_eq!(format_number(0.125), "0.125");
        assert_eq!(format_value(100.0, YUnit::Micros), "100 µs");
        assert_eq!(format_value(2_500.0, YUnit::Micros), "2.5 ms");
        assert_eq!(format_value(1e6, YUnit::Micros), "1 s");
        assert_eq!(axis_range(1.3, 3.7, true), (1.0, 4.0));
        assert_eq!(axis_range(2.0, 2.0, true), (2.0, 3.0));
        let path = temp_svg("log.svg");
        let series = vec![Series {
            label: "p99".into(),
            points: vec![(0.6000000000000001, 80.0), (0.8, 2_000.0), (1.1, 0.0)],
        }];
        write_svg(
            &path,
            &Chart {
                title: "log",
                x_label: "load",
                y_label: "p99",
                series: &series,
                log_x: false,
                log_y: true,
                y_unit: YUnit::Micros,
            },
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("100 µs") && text.contains("1 ms"), "{text}");
        assert!(!text.contains("0.6000000000000001"));
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn writes_grouped_bars_with_a_legend() {
        let path = temp_svg("bars.svg");
        let categories = vec!["dram".to_string(), "tamer".to_string()];
        let clusters = vec![
            Cluster {
                label: "emu ycsb_b".into(),
                values: vec![Some(1.0), Some(0.97)],
            },
            Cluster {
                label: "disk ycsb_b".into(),
                values: vec![Some(1.0), None],
            },
        ];
        write_bar_svg(
            &path,
            &BarChart {
                title: "bars",
                y_label: "throughput / dram",
                categories: &categories,
                clusters: &clusters,
                reference: Some(1.0),
            },
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("tamer") && text.contains("emu ycsb_b") && text.contains("<rect"));
        std::fs::remove_file(path).unwrap();
    }
}
