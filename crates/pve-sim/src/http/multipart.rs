//! `multipart/form-data` upload bodies, streamed like pve-http-server does
//! for `.../upload`: text fields become parameters, the one file part is
//! never kept in memory, only its size, its digests (for `checksum`) and
//! its first bytes (to read a qcow2 header).

use std::collections::BTreeMap;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use memchr::memmem::Finder;
use sha2::Digest;

use super::decode::{RawParams, RawValue};

/// Bytes of the file part kept for format detection.
const HEAD: usize = 512;
/// A text field larger than this is refused (PVE's POST limit is 64 KiB).
const MAX_FIELD: usize = 64 * 1024;

/// What was uploaded in the file part.
#[derive(Clone, Debug, Default)]
pub struct FilePart {
    /// The form field (`filename` for PVE's upload).
    pub field: String,
    /// The file name the client gave.
    pub filename: String,
    pub size: u64,
    /// Lower-case hex digests by PVE's algorithm names.
    pub digests: BTreeMap<&'static str, String>,
    pub head: Vec<u8>,
}

/// The boundary of a `multipart/form-data` content type.
pub fn boundary(content_type: &str) -> Option<String> {
    let (mime, rest) = content_type.split_once(';')?;
    if !mime.trim().eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    rest.split(';').find_map(|p| {
        let (k, v) = p.trim().split_once('=')?;
        k.eq_ignore_ascii_case("boundary")
            .then(|| v.trim_matches('"').to_owned())
    })
}

struct Hashers {
    md5: md5::Md5,
    sha1: sha1::Sha1,
    sha224: sha2::Sha224,
    sha256: sha2::Sha256,
    sha384: sha2::Sha384,
    sha512: sha2::Sha512,
}

impl Hashers {
    fn new() -> Self {
        Self {
            md5: md5::Md5::new(),
            sha1: sha1::Sha1::new(),
            sha224: sha2::Sha224::new(),
            sha256: sha2::Sha256::new(),
            sha384: sha2::Sha384::new(),
            sha512: sha2::Sha512::new(),
        }
    }

    fn update(&mut self, data: &[u8]) {
        self.md5.update(data);
        self.sha1.update(data);
        self.sha224.update(data);
        self.sha256.update(data);
        self.sha384.update(data);
        self.sha512.update(data);
    }

    fn finish(self) -> BTreeMap<&'static str, String> {
        let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
        BTreeMap::from([
            ("md5", hex(&self.md5.finalize())),
            ("sha1", hex(&self.sha1.finalize())),
            ("sha224", hex(&self.sha224.finalize())),
            ("sha256", hex(&self.sha256.finalize())),
            ("sha384", hex(&self.sha384.finalize())),
            ("sha512", hex(&self.sha512.finalize())),
        ])
    }
}

enum Part {
    Field { name: String, value: Vec<u8> },
    File { part: FilePart, hash: Box<Hashers> },
}

impl Part {
    fn feed(&mut self, data: &[u8]) -> Result<(), String> {
        match self {
            Self::Field { value, .. } => {
                if value.len() + data.len() > MAX_FIELD {
                    return Err("form field too large".into());
                }
                value.extend_from_slice(data);
            }
            Self::File { part, hash } => {
                let room = HEAD.saturating_sub(part.head.len());
                part.head.extend_from_slice(&data[..data.len().min(room)]);
                part.size += data.len() as u64;
                hash.update(data);
            }
        }
        Ok(())
    }
}

/// Parses the headers of one part.
fn part_from_headers(headers: &[u8]) -> Result<Part, String> {
    let text = String::from_utf8_lossy(headers);
    let disposition = text
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-disposition")
                .then_some(v)
        })
        .ok_or("multipart part without content-disposition")?;
    let attr = |name: &str| {
        disposition.split(';').find_map(|p| {
            let (k, v) = p.trim().split_once('=')?;
            (k == name).then(|| v.trim().trim_matches('"').to_owned())
        })
    };
    let name = attr("name").ok_or("multipart part without a name")?;
    Ok(match attr("filename") {
        Some(filename) => Part::File {
            part: FilePart {
                field: name,
                filename,
                ..FilePart::default()
            },
            hash: Box::new(Hashers::new()),
        },
        None => Part::Field {
            name,
            value: Vec::new(),
        },
    })
}

/// Reads a whole multipart body: text fields into `into`, the file part
/// summarized. Errors are the 400 reason.
pub async fn read(
    mut body: Incoming,
    boundary: &str,
    into: &mut RawParams,
) -> Result<Option<FilePart>, String> {
    let delim = format!("\r\n--{boundary}");
    let finder = Finder::new(delim.as_bytes());
    // A leading CRLF lets the first boundary match the same delimiter.
    let mut buf: Vec<u8> = b"\r\n".to_vec();
    let mut part: Option<Part> = None;
    let mut file: Option<FilePart> = None;
    let mut in_headers = false;
    let mut started = false;
    let mut done = false;
    let mut eof = false;
    loop {
        // Consume what the buffer allows.
        loop {
            if in_headers {
                let Some(end) = memchr::memmem::find(&buf, b"\r\n\r\n") else {
                    break;
                };
                part = Some(part_from_headers(&buf[..end])?);
                buf.drain(..end + 4);
                in_headers = false;
                continue;
            }
            match finder.find(&buf) {
                Some(at) => {
                    if let Some(p) = part.as_mut() {
                        p.feed(&buf[..at])?;
                    }
                    finish(part.take(), into, &mut file);
                    let after = at + delim.len();
                    if buf.len() < after + 2 {
                        if eof {
                            return Err("truncated multipart body".into());
                        }
                        break;
                    }
                    if &buf[after..after + 2] == b"--" {
                        done = true;
                        break;
                    }
                    buf.drain(..after + 2);
                    in_headers = true;
                    started = true;
                }
                None => {
                    // Keep a tail that could start the delimiter.
                    let keep = delim.len().min(buf.len());
                    let emit = buf.len() - keep;
                    if let Some(p) = part.as_mut() {
                        p.feed(&buf[..emit])?;
                    }
                    buf.drain(..emit);
                    break;
                }
            }
        }
        if done {
            return Ok(file);
        }
        if eof {
            return Err(if started {
                "truncated multipart body".into()
            } else {
                "multipart body without boundary".into()
            });
        }
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    buf.extend_from_slice(&data);
                }
            }
            Some(Err(e)) => return Err(format!("reading the body failed: {e}")),
            None => eof = true,
        }
    }
}

fn finish(part: Option<Part>, into: &mut RawParams, file: &mut Option<FilePart>) {
    match part {
        Some(Part::Field { name, value }) => {
            into.insert(
                name,
                RawValue::Text(String::from_utf8_lossy(&value).into_owned()),
            );
        }
        Some(Part::File { mut part, hash }) => {
            part.digests = hash.finish();
            into.insert(part.field.clone(), RawValue::Text(part.filename.clone()));
            *file = Some(part);
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundary_is_read_from_the_content_type() {
        assert_eq!(
            boundary("multipart/form-data; boundary=\"abc\"").as_deref(),
            Some("abc")
        );
        assert_eq!(boundary("application/json"), None);
    }
}
