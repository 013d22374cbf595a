//! SVG line charts (plotters, SVG backend only: no fonts or bitmaps needed).

use std::path::Path;

use plotters::prelude::*;

/// One line of a chart.
#[derive(Clone, Debug)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// A chart with a log-2 x axis (threads per core, queue depth) and a linear y axis.
pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub series: &'a [Series],
    /// Draw x on a log scale.
    pub log_x: bool,
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

/// Writes `chart` to `path` as SVG.
pub fn write_svg(path: &Path, chart: &Chart<'_>) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let points = chart.series.iter().flat_map(|s| s.points.iter());
    let (mut x_max, mut y_max) = (1.0f64, 0.0f64);
    let mut x_min = f64::MAX;
    for &(x, y) in points {
        x_max = x_max.max(x);
        x_min = x_min.min(x);
        y_max = y_max.max(y);
    }
    if x_min == f64::MAX {
        x_min = 1.0;
    }
    let y_top = (y_max * 1.1).max(1e-9);
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    // A log-2 x axis is drawn as a linear axis over log2(x), labelled with x: plotters' own log
    // scale draws a dense minor grid that hides the lines.
    let transform = |x: f64| if chart.log_x { x.max(1e-9).log2() } else { x };
    let (x_lo, x_hi) = if chart.log_x {
        (
            transform(x_min).floor(),
            transform(x_max).ceil().max(transform(x_min).floor() + 1.0),
        )
    } else {
        (0.0, x_max * 1.05)
    };
    let series: Vec<(String, Vec<(f64, f64)>)> = chart
        .series
        .iter()
        .map(|s| {
            (
                s.label.clone(),
                s.points.iter().map(|&(x, y)| (transform(x), y)).collect(),
            )
        })
        .collect();
    let log_x = chart.log_x;
    let label_x = move |v: &f64| {
        if log_x {
            format!("{}", 2f64.powf(*v).round())
        } else {
            format!("{v}")
        }
    };
    let x_labels = if log_x {
        (x_hi - x_lo) as usize + 1
    } else {
        10
    };
    let draw = || -> Result<(), Box<dyn std::error::Error + '_>> {
        root.fill(&WHITE)?;
        let mut ctx = ChartBuilder::on(&root)
            .caption(chart.title, ("sans-serif", 20))
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(60)
            .build_cartesian_2d(x_lo..x_hi, 0f64..y_top)?;
        ctx.configure_mesh()
            .x_desc(chart.x_label)
            .y_desc(chart.y_label)
            .x_labels(x_labels)
            .x_label_formatter(&label_x)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_an_svg_with_every_label() {
        let dir = std::env::temp_dir().join(format!("tamer-plot-{}", std::process::id()));
        let path = dir.join("t.svg");
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
            },
        )
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("<svg") && text.contains("alpha") && text.contains("beta"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
