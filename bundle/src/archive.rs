//! The container: gzip-compressed tar, read within bounds. Only plain files with plain
//! relative paths are accepted; links, devices, absolute paths, `..`, duplicates, and sizes
//! over the bounds refuse the whole archive. Directory entries carry nothing and are skipped.

use super::BundleError;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use std::collections::BTreeMap;
use std::io::Read;
use tar::EntryType;

/// Bounds on a bundle, checked while it is read, so a hostile archive (a gzip bomb, a huge
/// entry, millions of entries) is refused without being expanded.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Largest compressed bundle, as downloaded.
    pub compressed: u64,
    /// Largest total of all entries once expanded (tar headers included).
    pub expanded: u64,
    /// Largest single file.
    pub file: u64,
    /// Most entries.
    pub entries: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            compressed: 16 << 20,
            expanded: 64 << 20,
            file: toolgate_engine::MAX_SOURCE_BYTES as u64,
            entries: 4096,
        }
    }
}

/// A reader that fails, rather than stops, once more than `left` bytes come through.
struct Bounded<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.left = self.left.checked_sub(n as u64).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::FileTooLarge, "expanded size bound")
        })?;
        Ok(n)
    }
}

/// Reads every file of the archive, by bundle path.
pub fn read(bytes: &[u8], limits: &Limits) -> Result<BTreeMap<String, Vec<u8>>, BundleError> {
    if bytes.len() as u64 > limits.compressed {
        return Err(BundleError::TooLarge {
            what: "the bundle".into(),
            limit: limits.compressed,
        });
    }
    let expanded = || BundleError::TooLarge {
        what: "the expanded bundle".into(),
        limit: limits.expanded,
    };
    let io = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::FileTooLarge {
            expanded()
        } else {
            BundleError::Archive(e.to_string())
        }
    };
    let mut archive = tar::Archive::new(Bounded {
        inner: GzDecoder::new(bytes),
        left: limits.expanded,
    });
    let mut files = BTreeMap::new();
    let mut count = 0usize;
    for entry in archive.entries().map_err(io)? {
        let mut entry = entry.map_err(io)?;
        count += 1;
        if count > limits.entries {
            return Err(BundleError::TooManyEntries(limits.entries));
        }
        let raw_path = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        // The name is the archive's, unverified: escaped before it can reach a log line.
        let unsafe_entry = |reason| BundleError::UnsafeEntry {
            path: toolgate_loader::log_text::escape(&raw_path).into_owned(),
            reason,
        };
        match entry.header().entry_type() {
            EntryType::Regular | EntryType::Continuous => {}
            EntryType::Directory => continue,
            EntryType::Symlink | EntryType::Link => {
                return Err(unsafe_entry("links are not allowed in a bundle"))
            }
            _ => return Err(unsafe_entry("only plain files are allowed in a bundle")),
        }
        let path = bundle_path(&raw_path).map_err(unsafe_entry)?;
        let size = entry.header().size().map_err(io)?;
        if size > limits.file {
            return Err(BundleError::TooLarge {
                what: format!("`{path}`"),
                limit: limits.file,
            });
        }
        let mut data = Vec::with_capacity(size as usize);
        (&mut entry)
            .take(limits.file + 1)
            .read_to_end(&mut data)
            .map_err(io)?;
        if files.insert(path.clone(), data).is_some() {
            return Err(BundleError::Duplicate(path));
        }
    }
    Ok(files)
}

/// The normalised bundle path of an entry: `/`-separated and relative, with a leading `./`
/// dropped; empty, absolute, `.`/`..` components and backslashes are refused.
fn bundle_path(raw: &str) -> Result<String, &'static str> {
    let trimmed = raw.strip_prefix("./").unwrap_or(raw);
    if trimmed.is_empty() || trimmed.starts_with('/') {
        return Err("the path is empty or absolute");
    }
    if trimmed.contains('\\') || trimmed.contains('\0') {
        return Err("the path holds a backslash or a NUL");
    }
    if toolgate_loader::log_text::needs_escape(trimmed) {
        return Err("the path holds a control or bidirectional formatting character");
    }
    if trimmed
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err("the path has an empty, `.` or `..` component");
    }
    Ok(trimmed.to_string())
}

/// Writes `files` as a gzip-compressed tar, in path order, with fixed modes and times so
/// the same files always make the same archive.
pub fn write(files: &BTreeMap<String, Vec<u8>>) -> Result<Vec<u8>, BundleError> {
    let mut tar = tar::Builder::new(GzEncoder::new(Vec::new(), flate2::Compression::default()));
    for (name, data) in files {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(EntryType::Regular);
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        tar.append_data(&mut header, name, data.as_slice())
            .map_err(|e| BundleError::Archive(e.to_string()))?;
    }
    tar.into_inner()
        .and_then(|gz| gz.finish())
        .map_err(|e| BundleError::Archive(e.to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn paths_are_plain_and_relative() {
        assert_eq!(bundle_path("./a.gate").unwrap(), "a.gate");
        assert_eq!(bundle_path("sub/a.gate").unwrap(), "sub/a.gate");
        for bad in [
            "",
            "/etc/passwd",
            "../a.gate",
            "sub/../../a",
            "a//b",
            "a\\b",
            "./",
            "a\ntoolgate: loaded generation 9",
            "\u{1b}[2Ka.gate",
            "a\u{202e}etag.gate",
        ] {
            assert!(bundle_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_written_archive_reads_back() {
        let mut files = BTreeMap::new();
        files.insert("a.gate".to_string(), b"module a\n".to_vec());
        files.insert("sub/b.gate".to_string(), b"module b\n".to_vec());
        let bytes = write(&files).unwrap();
        assert_eq!(read(&bytes, &Limits::default()).unwrap(), files);
        assert_eq!(
            write(&files).unwrap(),
            bytes,
            "the same files make the same archive"
        );
    }

    #[test]
    fn a_gzip_bomb_is_refused_without_expanding_it() {
        let mut files = BTreeMap::new();
        files.insert("a.gate".to_string(), vec![b' '; 3 << 20]);
        let bytes = write(&files).unwrap();
        assert!(bytes.len() < 64 << 10, "compresses well: {}", bytes.len());
        let limits = Limits {
            expanded: 1 << 20,
            ..Limits::default()
        };
        let err = read(&bytes, &limits).unwrap_err();
        assert!(matches!(err, BundleError::TooLarge { .. }), "{err}");
        let limits = Limits {
            file: 1 << 20,
            ..Limits::default()
        };
        let err = read(&bytes, &limits).unwrap_err();
        assert!(
            err.to_string().contains("`a.gate` is over the limit"),
            "{err}"
        );
    }
}
