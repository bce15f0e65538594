//! `render_chart`: line, bar and scatter charts drawn with plotters into a PNG, kept in
//! the media store and returned as an image. Text is drawn with a font embedded in the
//! binary, so a machine without fonts or fontconfig draws the same chart.

use std::io::{Cursor, Read};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use conduit_core::content::ResultPart;
use conduit_core::media::MediaStore;
use conduit_core::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use image::ImageEncoder;
use image::codecs::png::{CompressionType, FilterType, PngEncoder};
use plotters::prelude::*;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{blocking, spec};

pub const DEFAULT_WIDTH: u32 = 1200;
pub const DEFAULT_HEIGHT: u32 = 700;
pub const MIN_SIZE: u32 = 200;
pub const MAX_WIDTH: u32 = 2400;
pub const MAX_HEIGHT: u32 = 1600;
pub const MAX_SERIES: usize = 10;
pub const MAX_POINTS_PER_SERIES: usize = 10_000;
pub const MAX_POINTS: usize = 50_000;
pub const MAX_CATEGORIES: usize = 200;
const MAX_TITLE_CHARS: usize = 200;
const MAX_NAME_CHARS: usize = 100;

/// DejaVu Sans (Bitstream Vera license, see assets/fonts/LICENSE), deflated by build.rs:
/// inflated on the first chart, so the binaries carry half its size.
static FONT_DEFLATED: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/DejaVuSans.ttf.deflate"));
const FONT_NAME: &str = "sans-serif";

/// Series colours (Tableau 10): distinct, and readable on white.
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Registers the embedded font with plotters once.
fn register_font() -> Result<(), String> {
    static FONT: OnceLock<Vec<u8>> = OnceLock::new();
    static REGISTERED: OnceLock<Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let mut font = Vec::new();
            flate2::read::DeflateDecoder::new(FONT_DEFLATED)
                .read_to_end(&mut font)
                .map_err(|e| format!("the chart font does not inflate: {e}"))?;
            let font: &'static [u8] = FONT.get_or_init(|| font);
            plotters::style::register_font(FONT_NAME, FontStyle::Normal, font)
                .map_err(|_| "the chart font does not load".to_owned())
        })
        .clone()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Kind {
    Line,
    Bar,
    Scatter,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Line => "line",
            Kind::Bar => "bar",
            Kind::Scatter => "scatter",
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChartArguments {
    kind: Kind,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    x_label: Option<String>,
    #[serde(default)]
    y_label: Option<String>,
    #[serde(default)]
    labels: Option<Vec<String>>,
    #[serde(default)]
    x: Option<Vec<Value>>,
    series: Vec<SeriesArguments>,
    #[serde(default)]
    width: Option<u32>,
    #[serde(default)]
    height: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SeriesArguments {
    #[serde(default)]
    name: Option<String>,
    y: Vec<Value>,
    #[serde(default)]
    x: Option<Vec<Value>>,
}

/// A checked chart, ready to draw.
#[derive(Debug, Clone, PartialEq)]
struct Chart {
    kind: Kind,
    title: Option<String>,
    x_label: Option<String>,
    y_label: Option<String>,
    /// Category names: bars, or a line over named points; the x of point `i` is `i`.
    categories: Option<Vec<String>>,
    series: Vec<Series>,
    width: u32,
    height: u32,
}

#[derive(Debug, Clone, PartialEq)]
struct Series {
    name: String,
    points: Vec<(f64, f64)>,
}

/// Numbers from JSON, each finite, or an error naming where the bad one is.
fn numbers(values: &[Value], what: &str) -> Result<Vec<f64>, String> {
    values
        .iter()
        .enumerate()
        .map(|(i, value)| match value.as_f64() {
            Some(n) if n.is_finite() => Ok(n),
            Some(_) => Err(format!("{what}[{i}] is not a finite number")),
            None => Err(format!("{what}[{i}] is {value}, not a number")),
        })
        .collect()
}

fn short_text(field: &str, text: Option<String>, max: usize) -> Result<Option<String>, String> {
    match text.map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()) {
        Some(t) if t.chars().count() > max => {
            Err(format!("`{field}` is longer than {max} characters"))
        }
        other => Ok(other),
    }
}

impl Chart {
    /// Checks the arguments: every rule a chart needs, each broken one named.
    fn from_arguments(args: ChartArguments) -> Result<Self, String> {
        let width = args.width.unwrap_or(DEFAULT_WIDTH);
        let height = args.height.unwrap_or(DEFAULT_HEIGHT);
        if !(MIN_SIZE..=MAX_WIDTH).contains(&width) {
            return Err(format!(
                "`width` is {width}; it must be between {MIN_SIZE} and {MAX_WIDTH} pixels"
            ));
        }
        if !(MIN_SIZE..=MAX_HEIGHT).contains(&height) {
            return Err(format!(
                "`height` is {height}; it must be between {MIN_SIZE} and {MAX_HEIGHT} pixels"
            ));
        }
        let title = short_text("title", args.title, MAX_TITLE_CHARS)?;
        let x_label = short_text("x_label", args.x_label, MAX_TITLE_CHARS)?;
        let y_label = short_text("y_label", args.y_label, MAX_TITLE_CHARS)?;
        if args.series.is_empty() {
            return Err("`series` is empty: give at least one series of y values".into());
        }
        if args.series.len() > MAX_SERIES {
            return Err(format!(
                "{} series is more than {MAX_SERIES}: combine or leave some out",
                args.series.len()
            ));
        }
        let total: usize = args.series.iter().map(|s| s.y.len()).sum();
        if total > MAX_POINTS {
            return Err(format!(
                "{total} points in all is more than {MAX_POINTS}: aggregate the data first"
            ));
        }
        if args.labels.is_some() && (args.x.is_some() || args.series.iter().any(|s| s.x.is_some()))
        {
            return Err("give `labels` (named categories) or `x` (numbers), not both".into());
        }
        let shared_x = match &args.x {
            Some(x) => Some(numbers(x, "x")?),
            None => None,
        };
        if args.kind == Kind::Bar
            && (shared_x.is_some() || args.series.iter().any(|s| s.x.is_some()))
        {
            return Err("a bar chart takes `labels` for its categories, not `x`".into());
        }
        if args.kind == Kind::Scatter && args.labels.is_some() {
            return Err("a scatter chart takes numeric `x`, not `labels`".into());
        }
        let categories = match (args.kind, args.labels) {
            (_, Some(labels)) => {
                if labels.is_empty() {
                    return Err("`labels` is empty".into());
                }
                if labels.len() > MAX_CATEGORIES {
                    return Err(format!(
                        "{} labels is more than {MAX_CATEGORIES} categories",
                        labels.len()
                    ));
                }
                if let Some(long) = labels
                    .iter()
                    .position(|l| l.chars().count() > MAX_NAME_CHARS)
                {
                    return Err(format!(
                        "labels[{long}] is longer than {MAX_NAME_CHARS} characters"
                    ));
                }
                Some(labels)
            }
            (Kind::Bar, None) => {
                let n = args.series.first().map_or(0, |s| s.y.len());
                Some((1..=n).map(|i| i.to_string()).collect())
            }
            _ => None,
        };
        if let Some(categories) = &categories
            && categories.len() > MAX_CATEGORIES
        {
            return Err(format!(
                "{} bars per series is more than {MAX_CATEGORIES}",
                categories.len()
            ));
        }
        let mut series = Vec::with_capacity(args.series.len());
        for (index, given) in args.series.into_iter().enumerate() {
            let name = match short_text("name", given.name, MAX_NAME_CHARS) {
                Ok(name) => name.unwrap_or_else(|| format!("series {}", index + 1)),
                Err(e) => return Err(format!("series {}: {e}", index + 1)),
            };
            let what = format!("series {} ({name:?})", index + 1);
            if given.y.is_empty() {
                return Err(format!("{what} has no y values"));
            }
            if given.y.len() > MAX_POINTS_PER_SERIES {
                return Err(format!(
                    "{what} has {} points, more than {MAX_POINTS_PER_SERIES}: aggregate the data first",
                    given.y.len()
                ));
            }
            let y = numbers(&given.y, &format!("{what} y"))?;
            let x = match (&given.x, &shared_x) {
                (Some(own), _) => numbers(own, &format!("{what} x"))?,
                (None, Some(shared)) => shared.clone(),
                (None, None) => (0..y.len()).map(|i| i as f64).collect(),
            };
            if x.len() != y.len() {
                return Err(format!(
                    "{what} has {} y values but {} x values: they must be as many",
                    y.len(),
                    x.len()
                ));
            }
            if let Some(categories) = &categories
                && categories.len() != y.len()
            {
                return Err(format!(
                    "{what} has {} y values but there are {} labels: give one value per label",
                    y.len(),
                    categories.len()
                ));
            }
            series.push(Series {
                name,
                points: x.into_iter().zip(y).collect(),
            });
        }
        let chart = Chart {
            kind: args.kind,
            title,
            x_label,
            y_label,
            categories,
            series,
            width,
            height,
        };
        let (x0, x1) = chart.x_range();
        let (y0, y1) = chart.y_range();
        if !(x1 - x0).is_finite() || !(y1 - y0).is_finite() {
            return Err(
                "the values are too far apart to draw on one axis: scale them first".into(),
            );
        }
        Ok(chart)
    }

    fn points(&self) -> impl Iterator<Item = &(f64, f64)> {
        self.series.iter().flat_map(|s| s.points.iter())
    }

    /// The y axis: every value (and zero for bars) with a little room.
    fn y_range(&self) -> (f64, f64) {
        let (mut low, mut high) = self
            .points()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &(_, y)| {
                (lo.min(y), hi.max(y))
            });
        if self.kind == Kind::Bar {
            low = low.min(0.0);
            high = high.max(0.0);
        }
        widen(&mut low, &mut high);
        let pad = (high - low) * 0.05;
        let low = if self.kind == Kind::Bar && low >= 0.0 {
            0.0
        } else {
            low - pad
        };
        (low, high + pad)
    }

    fn x_range(&self) -> (f64, f64) {
        if let Some(categories) = &self.categories {
            let last = categories.len().saturating_sub(1) as f64;
            return match self.kind {
                Kind::Bar => (-0.5, last + 0.5),
                _ if last == 0.0 => (-0.5, 0.5),
                _ => (0.0, last),
            };
        }
        let (mut low, mut high) = self
            .points()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &(x, _)| {
                (lo.min(x), hi.max(x))
            });
        widen(&mut low, &mut high);
        if self.kind == Kind::Scatter {
            let pad = (high - low) * 0.03;
            (low - pad, high + pad)
        } else {
            (low, high)
        }
    }

    /// Draws the chart into an RGB buffer and encodes it as PNG.
    fn render(&self) -> Result<Vec<u8>, String> {
        register_font()?;
        let mut buffer = vec![0u8; self.width as usize * self.height as usize * 3];
        self.draw(&mut buffer)
            .map_err(|e| format!("the chart could not be drawn: {e}"))?;
        let mut png = Vec::new();
        // Charts are flat colours, and the best level pays: for the 1200×700 test chart
        // (one dev-build sample, codecs optimised) fast took 80 ms for 136 KB, default
        // 68 ms for 35 KB, best 54 ms for 34 KB.
        PngEncoder::new_with_quality(
            Cursor::new(&mut png),
            CompressionType::Best,
            FilterType::Adaptive,
        )
        .write_image(
            &buffer,
            self.width,
            self.height,
            image::ExtendedColorType::Rgb8,
        )
        .map_err(|e| format!("the chart could not be encoded as PNG: {e}"))?;
        Ok(png)
    }

    fn draw(&self, buffer: &mut [u8]) -> Result<(), Box<dyn std::error::Error>> {
        let root =
            BitMapBackend::with_buffer(buffer, (self.width, self.height)).into_drawing_area();
        root.fill(&WHITE)?;
        let scale = f64::from(self.width.min(self.height * 2)) / 1200.0;
        let size = |base: f64| (base * scale.max(0.75)).round() as u32;
        let mut builder = ChartBuilder::on(&root);
        builder
            .margin(size(24.0))
            .x_label_area_size(size(if self.x_label.is_some() { 70.0 } else { 44.0 }))
            .y_label_area_size(size(if self.y_label.is_some() { 100.0 } else { 76.0 }));
        if let Some(title) = &self.title {
            builder.caption(title, (FONT_NAME, size(34.0)));
        }
        let (x0, x1) = self.x_range();
        let (y0, y1) = self.y_range();
        let mut chart = builder.build_cartesian_2d(x0..x1, y0..y1)?;

        let categories = self.categories.clone().unwrap_or_default();
        let category_label = |x: &f64| {
            let nearest = x.round();
            if (x - nearest).abs() < 1e-6 && nearest >= 0.0 {
                categories
                    .get(nearest as usize)
                    .cloned()
                    .unwrap_or_default()
            } else {
                String::new()
            }
        };
        let mut mesh = chart.configure_mesh();
        mesh.label_style((FONT_NAME, size(18.0)))
            .axis_desc_style((FONT_NAME, size(20.0)))
            .light_line_style(RGBColor(235, 235, 235))
            .bold_line_style(RGBColor(215, 215, 215));
        if let Some(label) = &self.x_label {
            mesh.x_desc(label);
        }
        if let Some(label) = &self.y_label {
            mesh.y_desc(label);
        }
        let number = |v: &f64| tick(*v);
        mesh.y_label_formatter(&number);
        if self.categories.is_some() {
            mesh.x_labels(categories.len().min(30))
                .x_label_formatter(&category_label);
            if self.kind == Kind::Bar {
                mesh.disable_x_mesh();
            }
        } else {
            mesh.x_label_formatter(&number);
        }
        mesh.draw()?;

        let bars = self.series.len() as f64;
        for (index, series) in self.series.iter().enumerate() {
            let color = COLORS[index % COLORS.len()];
            let drawn = match self.kind {
                Kind::Line => {
                    if series.points.len() <= 60 {
                        chart.draw_series(
                            series
                                .points
                                .iter()
                                .map(|&p| Circle::new(p, size(4.0).max(2), color.filled())),
                        )?;
                    }
                    chart.draw_series(LineSeries::new(
                        series.points.iter().copied(),
                        color.stroke_width(size(3.0).max(1)),
                    ))?
                }
                Kind::Scatter => chart.draw_series(
                    series
                        .points
                        .iter()
                        .map(|&p| Circle::new(p, size(5.0).max(2), color.filled())),
                )?,
                Kind::Bar => {
                    let width = 0.8 / bars;
                    chart.draw_series(series.points.iter().map(|&(x, y)| {
                        let left = x - 0.4 + width * index as f64;
                        Rectangle::new([(left, 0.0), (left + width, y)], color.filled())
                    }))?
                }
            };
            let legend = size(16.0) as i32;
            drawn.label(series.name.as_str()).legend(move |(x, y)| {
                Rectangle::new(
                    [(x, y - legend / 3), (x + legend, y + legend / 3)],
                    color.filled(),
                )
            });
        }
        if self.series.len() > 1 {
            chart
                .configure_series_labels()
                .label_font((FONT_NAME, size(18.0)))
                .background_style(WHITE.mix(0.85))
                .border_style(RGBColor(200, 200, 200))
                .position(SeriesLabelPosition::UpperRight)
                .draw()?;
        }
        root.present()?;
        Ok(())
    }

    fn describe(&self) -> String {
        let points: usize = self.series.iter().map(|s| s.points.len()).sum();
        let title = self
            .title
            .as_deref()
            .map(|t| format!(" {t:?}"))
            .unwrap_or_default();
        let names: Vec<&str> = self.series.iter().map(|s| s.name.as_str()).collect();
        format!(
            "A {} chart{title} of {} series ({}) with {points} points, as a {}×{} PNG image.",
            self.kind.name(),
            self.series.len(),
            names.join(", "),
            self.width,
            self.height
        )
    }
}

/// An axis tick as people write numbers: `18`, `2.5`, `0.001`, `1.5e9`.
fn tick(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude != 0.0 && !(1e-4..1e9).contains(&magnitude) {
        return format!("{value:e}");
    }
    let fixed = format!("{value:.6}");
    let trimmed = fixed.trim_end_matches('0').trim_end_matches('.');
    match trimmed {
        "-0" | "" => "0".to_owned(),
        other => other.to_owned(),
    }
}

/// A range that is a single value becomes one around it.
fn widen(low: &mut f64, high: &mut f64) {
    if !low.is_finite() || !high.is_finite() {
        (*low, *high) = (0.0, 1.0);
    } else if *high - *low < f64::EPSILON * high.abs().max(1.0) {
        let pad = (high.abs() * 0.1).max(1.0);
        *low -= pad;
        *high += pad;
    }
}

// ---------------------------------------------------------------------------------------

/// `render_chart`: data in, a PNG chart out.
pub struct RenderChart {
    spec: ToolSpec,
    media: Arc<dyn MediaStore>,
}

/// Charts drawn at once, in the whole process: each holds its pixels (up to 2400×1600,
/// 11.5 MB) while it draws, and a client of `conduit mcp serve` may call in parallel.
pub(super) static DRAWING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(2);

impl RenderChart {
    pub fn new(media: Arc<dyn MediaStore>) -> Self {
        Self {
            spec: Self::spec(),
            media,
        }
    }

    pub fn spec() -> ToolSpec {
        spec(
            "render_chart",
            "Render a chart",
            "Draw data as a chart and return it as a PNG image the user sees inline. \
             kind: line, bar or scatter. Each series has y values and an optional name \
             (shown in a legend when there are several series). For line and scatter \
             charts, x gives numeric x values (shared, or per series; default 0, 1, 2...); \
             for bar charts and lines over named points, labels names each position \
             (one y value per label in every series). Optional title, x_label, y_label, \
             width and height (default 1200×700 pixels).",
            json!({
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "enum": ["line", "bar", "scatter"]},
                    "title": {"type": "string", "maxLength": MAX_TITLE_CHARS},
                    "x_label": {"type": "string", "maxLength": MAX_TITLE_CHARS, "description": "The x axis' caption."},
                    "y_label": {"type": "string", "maxLength": MAX_TITLE_CHARS, "description": "The y axis' caption."},
                    "labels": {
                        "type": "array",
                        "items": {"type": "string", "maxLength": MAX_NAME_CHARS},
                        "minItems": 1,
                        "maxItems": MAX_CATEGORIES,
                        "description": "Category names (bars), or names of a line's points."
                    },
                    "x": {
                        "type": "array",
                        "items": {"type": "number"},
                        "maxItems": MAX_POINTS_PER_SERIES,
                        "description": "x values shared by every series (line and scatter)."
                    },
                    "series": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": MAX_SERIES,
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string", "maxLength": MAX_NAME_CHARS},
                                "y": {
                                    "type": "array",
                                    "items": {"type": "number"},
                                    "minItems": 1,
                                    "maxItems": MAX_POINTS_PER_SERIES
                                },
                                "x": {
                                    "type": "array",
                                    "items": {"type": "number"},
                                    "maxItems": MAX_POINTS_PER_SERIES,
                                    "description": "This series' own x values (line and scatter)."
                                }
                            },
                            "required": ["y"],
                            "additionalProperties": false
                        }
                    },
                    "width": {"type": "integer", "minimum": MIN_SIZE, "maximum": MAX_WIDTH, "default": DEFAULT_WIDTH},
                    "height": {"type": "integer", "minimum": MIN_SIZE, "maximum": MAX_HEIGHT, "default": DEFAULT_HEIGHT}
                },
                "required": ["kind", "series"],
                "additionalProperties": false
            }),
            None,
            // It writes the image into Conduit's media store: nothing the user had changes.
            false,
        )
    }
}

#[async_trait]
impl Tool for RenderChart {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let args: ChartArguments = match super::arguments("render_chart", arguments) {
            Ok(args) => args,
            Err(error) => return Ok(error),
        };
        let chart = match Chart::from_arguments(args) {
            Ok(chart) => chart,
            Err(message) => return Ok(ToolOutput::error(message)),
        };
        let media = self.media.clone();
        let permit = tokio::select! {
            permit = DRAWING.acquire() => permit,
            () = context.cancel.cancelled() => return Err(ToolError("cancelled".into())),
        };
        let Ok(drawing) = permit else {
            // The semaphore is never closed.
            return Ok(ToolOutput::error("Conduit cannot draw charts now"));
        };
        let work = blocking("drawing a chart", move || {
            // Held until the drawing ends, even when the call was cancelled meanwhile.
            let _drawing = drawing;
            let png = match chart.render() {
                Ok(png) => png,
                Err(message) => return ToolOutput::error(message),
            };
            match media.put(&png, Some("image/png")) {
                Ok(media) => ToolOutput {
                    parts: vec![
                        ResultPart::Text {
                            text: chart.describe(),
                        },
                        ResultPart::Image { media },
                    ],
                    is_error: false,
                },
                Err(e) => ToolOutput::error(format!("the chart could not be stored: {e}")),
            }
        });
        tokio::select! {
            output = work => Ok(output),
            () = context.cancel.cancelled() => Err(ToolError("cancelled".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::tick;

    #[test]
    fn ticks_read_like_numbers() {
        assert_eq!(tick(18.0), "18");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(tick(0.30000000000000004), "0.3");
        assert_eq!(tick(-0.0), "0");
        assert_eq!(tick(-1e-12), "-1e-12");
        assert_eq!(tick(1_000_000.0), "1000000");
        assert_eq!(tick(1.5e9), "1.5e9");
    }
}
