//! Test fakes every crate shares, each written once: a scripted provider, an echo tool
//! and an in-memory media store. Compiled for this crate's tests and, with the `testing`
//! feature, for other crates' tests; never in a release.

// Test code: a broken script is a failed test, said loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use async_trait::async_trait;
use futures::{StreamExt, stream};
use parking_lot::Mutex;
use serde_json::{Value, json};

use crate::content::MediaRef;
use crate::media::{MediaError, MediaStore};
use crate::provider::{
    EventStream, ModelInfo, ModelRequest, Provider, ProviderError, ProviderEvent,
};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolSpec};

/// What a scripted provider streams for one request.
pub type Script = Vec<Result<ProviderEvent, ProviderError>>;

/// A provider that replays one script per request, in order, and records the requests.
pub struct ScriptedProvider {
    scripts: Mutex<Vec<(Script, bool)>>,
    requests: Mutex<Vec<ModelRequest>>,
}

impl ScriptedProvider {
    pub fn new(scripts: Vec<Script>) -> Arc<Self> {
        Self::with_hangs(scripts.into_iter().map(|s| (s, false)).collect())
    }

    /// Each script may end by hanging (never closing the stream).
    pub fn with_hangs(scripts: Vec<(Script, bool)>) -> Arc<Self> {
        Arc::new(Self {
            scripts: Mutex::new(scripts.into_iter().rev().collect()),
            requests: Mutex::new(Vec::new()),
        })
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().clone()
    }
}

#[async_trait]
impl Provider for ScriptedProvider {
    fn protocol(&self) -> &'static str {
        "scripted"
    }

    async fn stream(&self, request: ModelRequest) -> Result<EventStream, ProviderError> {
        self.requests.lock().push(request);
        let (script, hang) = self
            .scripts
            .lock()
            .pop()
            .expect("the test scripted enough responses");
        let events = stream::iter(script);
        if hang {
            Ok(events.chain(stream::pending()).boxed())
        } else {
            Ok(events.boxed())
        }
    }

    async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        Ok(vec![])
    }
}

/// A tool spec named `name` that takes any object.
pub fn tool_spec(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.into(),
        title: None,
        description: format!("test tool {name}"),
        input_schema: json!({"type": "object"}),
        output_schema: None,
        annotations: Default::default(),
    }
}

/// A tool that answers with its `text` argument.
pub struct Echo(pub ToolSpec);

impl Echo {
    pub fn named(name: &str) -> Arc<Self> {
        Arc::new(Self(tool_spec(name)))
    }
}

#[async_trait]
impl Tool for Echo {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn call(&self, arguments: Value, _context: ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(
            arguments["text"].as_str().unwrap_or_default().to_owned(),
        ))
    }
}

/// A media store in memory: what is put can be loaded back, under a made-up hash.
#[derive(Default)]
pub struct MemoryMedia {
    kept: Mutex<Vec<(MediaRef, Vec<u8>)>>,
}

impl MemoryMedia {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Everything put so far, in order.
    pub fn kept(&self) -> Vec<Vec<u8>> {
        self.kept.lock().iter().map(|(_, b)| b.clone()).collect()
    }
}

impl MediaStore for MemoryMedia {
    fn reference(&self, hash: &str) -> Option<MediaRef> {
        self.kept
            .lock()
            .iter()
            .find(|(kept, _)| kept.hash == hash)
            .map(|(kept, _)| kept.clone())
    }

    fn put(&self, bytes: &[u8], declared_mime: Option<&str>) -> Result<MediaRef, MediaError> {
        let mut kept = self.kept.lock();
        let media = MediaRef {
            hash: format!("{:064x}", kept.len() + 1),
            mime: declared_mime
                .unwrap_or("application/octet-stream")
                .to_owned(),
            bytes: bytes.len() as u64,
            width: None,
            height: None,
        };
        kept.push((media.clone(), bytes.to_vec()));
        Ok(media)
    }

    fn load(&self, media: &MediaRef) -> Result<Vec<u8>, MediaError> {
        self.kept
            .lock()
            .iter()
            .find(|(kept, _)| kept.hash == media.hash)
            .map(|(_, bytes)| bytes.clone())
            .ok_or_else(|| MediaError::Missing {
                hash: media.hash.clone(),
            })
    }
}

/// A PNG whose pixels are all zero, in 8-bit grayscale: tiny however large it says it is
/// (a 257 × 2,088,000 one, which once decoded to 536 MB and asked a resize for 8.5 GB, is
/// 3.4 MB). Made by hand, row by row in constant memory, as no encoder here streams.
pub fn zero_png(width: u32, height: u32) -> Vec<u8> {
    zero_png_with(width, height, 0, 8)
}

/// [`zero_png`] in any PNG colour type (0 gray, 2 RGB, 4 gray + alpha, 6 RGBA) and bit
/// depth (8 or 16).
pub fn zero_png_with(width: u32, height: u32, color_type: u8, bit_depth: u8) -> Vec<u8> {
    let channels: u64 = match color_type {
        2 => 3,
        4 => 2,
        6 => 4,
        _ => 1,
    };
    let row = 1 + u64::from(width) * channels * u64::from(bit_depth / 8);
    let total = row * u64::from(height);
    let mut header = Vec::with_capacity(13);
    header.extend_from_slice(&width.to_be_bytes());
    header.extend_from_slice(&height.to_be_bytes());
    header.extend_from_slice(&[bit_depth, color_type, 0, 0, 0]);
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png_chunk(&mut png, b"IHDR", &header);
    png_chunk(&mut png, b"IDAT", &zlib_zeros(total));
    png_chunk(&mut png, b"IEND", &[]);
    png
}

/// A zlib stream of `count` zero bytes: one fixed-Huffman block of a literal zero and
/// back-references of 258 bytes at distance 1 (13 bits each), the rest as literals.
fn zlib_zeros(count: u64) -> Vec<u8> {
    struct Bits {
        out: Vec<u8>,
        byte: u8,
        used: u8,
    }
    impl Bits {
        /// Writes the low `n` bits of `value`, least significant first.
        fn lsb_first(&mut self, value: u32, n: u8) {
            for i in 0..n {
                self.bit((value >> i) & 1 == 1);
            }
        }
        /// Writes a Huffman code of `n` bits, most significant first.
        fn code(&mut self, code: u32, n: u8) {
            for i in (0..n).rev() {
                self.bit((code >> i) & 1 == 1);
            }
        }
        fn bit(&mut self, set: bool) {
            if set {
                self.byte |= 1 << self.used;
            }
            self.used += 1;
            if self.used == 8 {
                self.out.push(self.byte);
                (self.byte, self.used) = (0, 0);
            }
        }
    }
    let mut bits = Bits {
        out: vec![0x78, 0x01],
        byte: 0,
        used: 0,
    };
    bits.lsb_first(1, 1); // the last block
    bits.lsb_first(1, 2); // fixed Huffman codes
    let literal_zero = |bits: &mut Bits| bits.code(0x30, 8);
    let mut left = count;
    if left > 0 {
        literal_zero(&mut bits);
        left -= 1;
    }
    while left >= 258 {
        bits.code(0xC5, 8); // length 258 (symbol 285)
        bits.code(0, 5); // distance 1
        left -= 258;
    }
    for _ in 0..left {
        literal_zero(&mut bits);
    }
    bits.code(0, 7); // end of block
    if bits.used > 0 {
        bits.out.push(bits.byte);
    }
    // Adler-32 of zeros: the first sum stays 1, the second grows by 1 a byte.
    let adler = ((count % 65_521) << 16) | 1;
    bits.out
        .extend_from_slice(&u32::try_from(adler).unwrap_or(0).to_be_bytes());
    bits.out
}

fn png_chunk(png: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    png.extend_from_slice(&u32::try_from(data.len()).unwrap().to_be_bytes());
    png.extend_from_slice(kind);
    png.extend_from_slice(data);
    let mut crc = 0xFFFF_FFFF_u32;
    for &byte in kind.iter().chain(data) {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    png.extend_from_slice(&(!crc).to_be_bytes());
}

/// A JPEG whose pixels are `width` × `height`, with an Exif APP1 segment saying
/// `orientation` (6: turn 90° clockwise to show it, as a phone's portrait photo).
pub fn jpeg_with_orientation(width: u32, height: u32, orientation: u16) -> Vec<u8> {
    let mut jpeg = Vec::new();
    let pixels = image::RgbImage::from_fn(width, height, |x, _| {
        // The left half red, the right half blue: which side ends up where tells the turn.
        if x < width / 2 {
            image::Rgb([255, 0, 0])
        } else {
            image::Rgb([0, 0, 255])
        }
    });
    image::DynamicImage::ImageRgb8(pixels)
        .write_to(
            &mut std::io::Cursor::new(&mut jpeg),
            image::ImageFormat::Jpeg,
        )
        .expect("an RGB image encodes as a JPEG");
    // Little-endian TIFF: header, one IFD with one SHORT entry (0x0112), no next IFD.
    let mut tiff = b"II*\0\x08\0\0\0\x01\0\x12\x01\x03\0\x01\0\0\0".to_vec();
    tiff.extend_from_slice(&orientation.to_le_bytes());
    tiff.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    let mut app1 = b"Exif\0\0".to_vec();
    app1.extend_from_slice(&tiff);
    let length = u16::try_from(app1.len() + 2).expect("a short segment");
    let mut out = jpeg[..2].to_vec(); // SOI
    out.extend_from_slice(&[0xFF, 0xE1]);
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(&app1);
    out.extend_from_slice(&jpeg[2..]);
    out
}

/// A PDF of `pages` pages of text, padded with an incompressible-looking stream to at
/// least `at_least` bytes (a scanned paper is megabytes): its objects, cross-reference
/// table and trailer are well formed, so a reader opens it.
pub fn pdf(pages: usize, at_least: usize) -> Vec<u8> {
    let mut out = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n".to_vec();
    let mut offsets = Vec::new();
    let mut object = |out: &mut Vec<u8>, body: &[u8]| {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n", offsets.len()).as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\nendobj\n");
    };
    let kids: Vec<String> = (0..pages)
        .map(|page| format!("{} 0 R", 4 + 2 * page))
        .collect();
    object(&mut out, b"<< /Type /Catalog /Pages 2 0 R >>");
    object(
        &mut out,
        format!(
            "<< /Type /Pages /Kids [{}] /Count {pages} >>",
            kids.join(" ")
        )
        .as_bytes(),
    );
    object(
        &mut out,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    );
    for page in 0..pages {
        let text = format!(
            "BT /F1 18 Tf 72 720 Td (Page {} of the paper) Tj ET",
            page + 1
        );
        object(
            &mut out,
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents {} 0 R >>",
                5 + 2 * page
            )
            .as_bytes(),
        );
        object(
            &mut out,
            format!("<< /Length {} >>\nstream\n{text}\nendstream", text.len()).as_bytes(),
        );
    }
    let padding = at_least.saturating_sub(out.len());
    let noise: Vec<u8> = (0..padding)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut padded = format!("<< /Length {} >>\nstream\n", noise.len()).into_bytes();
    padded.extend_from_slice(&noise);
    padded.extend_from_slice(b"\nendstream");
    object(&mut out, &padded);
    let table = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", offsets.len() + 1).as_bytes(),
    );
    for offset in &offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{table}\n%%EOF\n",
            offsets.len() + 1
        )
        .as_bytes(),
    );
    out
}
