//! Results: a printed table, a JSON object with a `figures` map, machine facts.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

/// Each figure's value per round, printed as it is recorded; a figure is the median of its
/// rounds (`rpc` and `types`).
#[derive(Default)]
pub struct RoundValues(BTreeMap<String, Vec<f64>>);

impl RoundValues {
    /// `num ÷ den` (NaN when `den` is not positive), printed with its inputs.
    pub fn ratio(&mut self, figure: &str, num: f64, den: f64) {
        let r = crate::summary::ratio(num, den).unwrap_or(f64::NAN);
        println!("  {figure}: {num:.0} / {den:.0} = {r:.3}");
        self.0.entry(figure.into()).or_default().push(r);
    }

    /// A figure that is not a ratio (a fraction, a p99, a size).
    pub fn record(&mut self, figure: &str, value: f64) {
        println!("  {figure}: {value:.3}");
        self.0.entry(figure.into()).or_default().push(value);
    }

    /// Adds another round's values.
    pub fn extend(&mut self, other: RoundValues) {
        for (k, v) in other.0 {
            self.0.entry(k).or_default().extend(v);
        }
    }

    /// The median of `figure`'s rounds (NaNs left out).
    pub fn median(&self, figure: &str) -> Option<f64> {
        self.0.get(figure).and_then(|v| crate::summary::median(v))
    }

    /// Every figure's median into `result`.
    pub fn write_figures(&self, result: &mut BenchResult) {
        for (name, v) in &self.0 {
            result.figure(name, crate::summary::median(v));
        }
    }
}

/// What a bench run produced.
#[derive(Debug, Serialize)]
pub struct BenchResult {
    /// The bench's name.
    pub bench: String,
    /// Whether it was the CI-sized run.
    pub quick: bool,
    /// Seed of every random choice.
    pub seed: u64,
    /// What it ran on.
    pub machine: Machine,
    /// The bench's named figures (ratios where a baseline exists).
    pub figures: BTreeMap<String, Option<f64>>,
    /// Every measured point.
    pub rows: Vec<Value>,
    /// What was not measured and why (a missing peer, a skipped device).
    pub notes: Vec<String>,
    /// SVG files written.
    pub plots: Vec<String>,
}

impl BenchResult {
    /// An empty result of bench `bench`.
    pub fn new(bench: &str, quick: bool, seed: u64) -> Self {
        Self {
            bench: bench.into(),
            quick,
            seed,
            machine: Machine::detect(),
            figures: BTreeMap::new(),
            rows: Vec::new(),
            notes: Vec::new(),
            plots: Vec::new(),
        }
    }

    /// Records figure `name` (`None`, or a value that is not finite: not measured).
    pub fn figure(&mut self, name: &str, value: Option<f64>) {
        self.figures
            .insert(name.into(), value.filter(|v| v.is_finite()));
    }

    /// Records a note about the run and prints it on stderr.
    pub fn note(&mut self, note: impl Into<String>) {
        let note = note.into();
        eprintln!("note: {note}");
        self.notes.push(note);
    }

    /// Writes the JSON object to `path` (creating its directory).
    pub fn write_json(&self, path: &Path) -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let text = serde_json::to_string_pretty(self).expect("serializable");
        std::fs::write(path, text + "\n")
    }

    /// Prints the figures as a table.
    pub fn print_figures(&self) {
        println!("\nfigures ({}):", self.bench);
        for (name, value) in &self.figures {
            match value {
                Some(v) => println!("  {name:<32} {v:>12.3}"),
                None => println!("  {name:<32} {:>12}", "n/a"),
            }
        }
        for note in &self.notes {
            println!("  note: {note}");
        }
    }
}

/// Facts about the machine a result came from.
#[derive(Debug, Serialize)]
pub struct Machine {
    /// The CPU's model name.
    pub cpu: String,
    /// CPUs online.
    pub cpus: usize,
    /// Memory, bytes.
    pub memory_bytes: u64,
    /// Kernel release.
    pub kernel: String,
    /// When the run started (UTC, RFC 3339).
    pub date_utc: String,
}

impl Machine {
    /// "2 × <CPU model>, kernel <release>, <date>": for plot titles.
    pub fn short(&self) -> String {
        let date = self.date_utc.split('T').next().unwrap_or_default();
        format!(
            "{} × {}, kernel {}, {date}",
            self.cpus,
            self.cpu.trim(),
            self.kernel
        )
    }

    /// Reads the facts of this machine.
    pub fn detect() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name")
                    .map(|r| r.trim_start_matches([' ', '\t', ':']).to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_bytes = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|r| r.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024);
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .to_string();
        let date_utc = std::process::Command::new("date")
            .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        Self {
            cpu,
            cpus: tamer_runtime::online_cpus(),
            memory_bytes,
            kernel,
            date_utc,
        }
    }
}

/// Percentile `q` (0..=100) of a sorted-or-not sample, in its unit.
pub fn percentile(samples: &mut [u64], q: f64) -> Option<u64> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_unstable();
    let rank = ((q / 100.0) * (samples.len() - 1) as f64).round() as usize;
    Some(samples[rank.min(samples.len() - 1)])
}
