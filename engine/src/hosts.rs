//! Host allowlists for URL arguments.
//!
//! URLs are parsed with the WHATWG-conformant `url` crate, so userinfo (`a.com@b.com`),
//! percent-encoding, IDNA mapping and IPv4 shorthands (`0x7f.1`) are read the way a browser or
//! an HTTP client reads them, not the way a regex guesses. Everything fails closed.
//!
//! The common case (`http`/`https`, a plain ASCII host name, an optional numeric port) is
//! read by [`plain_host`] without allocating; anything else, and anything it is unsure of,
//! goes through the full parser. A property test holds the two to the same answers.

use crate::words;
use rustc_hash::FxHashSet as HashSet;
use std::net::IpAddr;
use url::{Host, Url};

/// A compiled allowlist.
#[derive(Debug, Clone)]
pub(crate) struct HostList {
    /// The list's name in the policy.
    pub(crate) name: Box<str>,
    /// Accepted schemes, lowercase.
    schemes: Box<[Box<str>]>,
    /// Hosts matched exactly, lowercase ASCII (IDNA already applied).
    exact: Names,
    /// Suffixes with their leading dot (`.aws.amazon.com`), lowercase ASCII.
    suffixes: Names,
    /// IP literals named by the list.
    ips: Box<[IpAddr]>,
}

/// A set of host names: a short list is scanned (a few byte compares beat hashing every
/// parent domain of the host), a long one is hashed.
#[derive(Debug, Clone)]
enum Names {
    Few(Box<[Box<str>]>),
    Many(HashSet<Box<str>>),
}

/// Lists up to this long are scanned rather than hashed.
const FEW_NAMES: usize = 8;

impl Names {
    fn new(mut names: Vec<Box<str>>) -> Self {
        names.sort_unstable();
        names.dedup();
        if names.len() <= FEW_NAMES {
            Names::Few(names.into_boxed_slice())
        } else {
            Names::Many(names.into_iter().collect())
        }
    }

    /// True when `host` is on the list.
    fn contains(&self, host: HostRef<'_>) -> bool {
        match self {
            Names::Few(names) => names.iter().any(|n| host.is(n)),
            Names::Many(set) => host.with_lowercase(|h| set.contains(h)),
        }
    }

    /// True when some entry (each starting with a dot) is a proper suffix of `host`, so the
    /// match starts on a label boundary with at least one label before it.
    fn has_suffix_of(&self, host: HostRef<'_>) -> bool {
        match self {
            Names::Few(suffixes) => suffixes
                .iter()
                .any(|s| host.len() > s.len() && host.tail(s.len()).is(s)),
            Names::Many(set) => host.with_lowercase(|h| {
                h.match_indices('.')
                    .any(|(i, _)| i > 0 && set.contains(&h[i..]))
            }),
        }
    }

    fn iter(&self) -> Box<dyn Iterator<Item = &Box<str>> + '_> {
        match self {
            Names::Few(names) => Box::new(names.iter()),
            Names::Many(set) => Box::new(set.iter()),
        }
    }
}

/// A host name to look up.
#[derive(Clone, Copy)]
enum HostRef<'a> {
    /// Lowercase already.
    Lower(&'a str),
    /// From [`plain_host`]: ASCII letters of either case, digits, `-` and `.`.
    Plain(&'a [u8]),
}

impl HostRef<'_> {
    fn len(self) -> usize {
        match self {
            HostRef::Lower(h) => h.len(),
            HostRef::Plain(h) => h.len(),
        }
    }

    /// The last `n` bytes (`n` at most [`HostRef::len`], and a suffix entry starts with an
    /// ASCII dot, so a match never splits a character).
    fn tail(self, n: usize) -> Self {
        match self {
            HostRef::Lower(h) => HostRef::Lower(h.get(h.len() - n..).unwrap_or("")),
            HostRef::Plain(h) => HostRef::Plain(&h[h.len() - n..]),
        }
    }

    /// True when the host is `entry` (lowercase).
    #[inline]
    fn is(self, entry: &str) -> bool {
        match self {
            HostRef::Lower(h) => words::eq(h.as_bytes(), entry.as_bytes()),
            HostRef::Plain(h) => words::eq_folded(h, entry.as_bytes()),
        }
    }

    /// Runs `f` on the host in lowercase; a plain host is lowercased on the stack.
    fn with_lowercase(self, f: impl FnOnce(&str) -> bool) -> bool {
        match self {
            HostRef::Lower(h) => f(h),
            HostRef::Plain(h) => {
                let mut buf = [0u8; MAX_PLAIN_HOST];
                let Some(out) = buf.get_mut(..h.len()) else {
                    return false;
                };
                out.copy_from_slice(h);
                out.make_ascii_lowercase();
                std::str::from_utf8(out).is_ok_and(f)
            }
        }
    }
}

/// One allowlist entry after normalisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HostPattern {
    /// `example.com`: this host only.
    Exact(String),
    /// `.example.com`: any proper subdomain (stored with the leading dot).
    Suffix(String),
    /// An IP literal.
    Ip(IpAddr),
}

/// Normalises a list entry the way URL hosts are normalised, so both sides compare equal.
pub(crate) fn parse_entry(entry: &str) -> Result<HostPattern, String> {
    let (suffix, body) = match entry.strip_prefix('.') {
        Some(rest) => (true, rest),
        None => (false, entry),
    };
    let body = body.strip_suffix('.').unwrap_or(body);
    if body.is_empty() {
        return Err("host entry is empty".into());
    }
    if body.starts_with('*') {
        return Err("wildcards are not supported".into());
    }
    if body.contains(['/', ':', '@', '?', '#', ' ']) && !body.starts_with('[') {
        return Err("an entry is a bare host name, without scheme, port, path or userinfo".into());
    }
    match Host::parse(body) {
        Ok(Host::Domain(d)) => {
            if d.is_empty() || d.starts_with('.') || d.contains("..") {
                return Err("host entry has an empty label".into());
            }
            Ok(if suffix {
                HostPattern::Suffix(format!(".{d}"))
            } else {
                HostPattern::Exact(d)
            })
        }
        Ok(Host::Ipv4(ip)) if !suffix => Ok(HostPattern::Ip(IpAddr::V4(ip))),
        Ok(Host::Ipv6(ip)) if !suffix => Ok(HostPattern::Ip(IpAddr::V6(ip))),
        Ok(_) => Err("an IP address cannot have subdomains".into()),
        Err(e) => Err(format!("not a valid host: {e}")),
    }
}

impl HostList {
    /// Builds a list from normalised patterns and lowercase schemes.
    pub(crate) fn new(name: &str, schemes: Vec<String>, patterns: Vec<HostPattern>) -> Self {
        let mut exact = Vec::new();
        let mut suffixes = Vec::new();
        let mut ips = Vec::new();
        for p in patterns {
            match p {
                HostPattern::Exact(h) => exact.push(h.into_boxed_str()),
                HostPattern::Suffix(s) => suffixes.push(s.into_boxed_str()),
                HostPattern::Ip(ip) => ips.push(ip),
            }
        }
        HostList {
            name: name.into(),
            schemes: schemes.into_iter().map(String::into_boxed_str).collect(),
            exact: Names::new(exact),
            suffixes: Names::new(suffixes),
            ips: ips.into_boxed_slice(),
        }
    }

    /// The accepted schemes.
    pub(crate) fn schemes(&self) -> impl Iterator<Item = &str> {
        self.schemes.iter().map(|s| &**s)
    }

    /// True when `url` parses, has an accepted scheme, and its host is on the list.
    pub(crate) fn allows(&self, url: &str) -> bool {
        let bytes = url.as_bytes();
        let Some(len) = plain_scheme_len(bytes) else {
            return self.allows_parsed(url);
        };
        let scheme = &bytes[..len];
        let Some(accepted) = self
            .schemes
            .iter()
            .find(|s| words::eq_folded(scheme, s.as_bytes()))
        else {
            // Whatever the rest of the URL is, its scheme is not accepted.
            return false;
        };
        // The list's own entry is lowercase: compare it, not the URL's bytes, again.
        let web = matches!(&**accepted, "http" | "https");
        if web && bytes[len + 1..].starts_with(b"//") {
            if let Some(host) = plain_host(&bytes[len + 3..]) {
                return self.domain_allowed(HostRef::Plain(host));
            }
        }
        self.allows_parsed(url)
    }

    /// [`HostList::allows`] through the full WHATWG parser.
    fn allows_parsed(&self, url: &str) -> bool {
        let Ok(parsed) = Url::parse(url) else {
            return false;
        };
        if !self.schemes.iter().any(|s| **s == *parsed.scheme()) {
            return false;
        }
        match parsed.host() {
            None => false,
            Some(Host::Ipv4(ip)) => self.ips.contains(&IpAddr::V4(ip)),
            Some(Host::Ipv6(ip)) => self.ips.contains(&IpAddr::V6(ip)),
            // Special schemes give the host lowercased and IDNA-mapped; an opaque host of
            // another scheme keeps its case, so fold it here.
            Some(Host::Domain(d)) if d.bytes().any(|b| b.is_ascii_uppercase()) => {
                self.domain_allowed(HostRef::Lower(&d.to_ascii_lowercase()))
            }
            Some(Host::Domain(d)) => self.domain_allowed(HostRef::Lower(d)),
        }
    }

    /// True when `host`, less one trailing dot, is on the list.
    fn domain_allowed(&self, host: HostRef<'_>) -> bool {
        let host = match host {
            HostRef::Lower(h) => HostRef::Lower(h.strip_suffix('.').unwrap_or(h)),
            HostRef::Plain(h) => HostRef::Plain(h.strip_suffix(b".").unwrap_or(h)),
        };
        if host.len() == 0 {
            return false;
        }
        self.exact.contains(host) || self.suffixes.has_suffix_of(host)
    }

    /// The entries, as written back for refusals and docs.
    pub(crate) fn describe_entries(&self) -> Vec<String> {
        let mut out: Vec<String> = self.exact.iter().map(|h| h.to_string()).collect();
        out.extend(
            self.suffixes
                .iter()
                .map(|s| format!("any subdomain of {}", &s[1..])),
        );
        out.extend(self.ips.iter().map(|ip| ip.to_string()));
        out.sort();
        out
    }
}

/// Longest host [`plain_host`] reads itself (a DNS name is at most 253 bytes).
const MAX_PLAIN_HOST: usize = 253;

/// How [`plain_host`] treats each byte of the authority.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    /// `A-Z`, `a-z`, `0-9`, `-`: a host name byte.
    Name,
    Dot,
    Colon,
    At,
    /// `/`, `?`, `#`, `\`: the authority ends (`\` is `/` in special schemes).
    End,
    /// Other printable ASCII: allowed in userinfo, not in a plain host.
    Other,
    /// Whitespace, controls and non-ASCII: the parser strips or maps them, so leave the URL
    /// to it.
    Unsure,
}

const fn classify(b: u8) -> Class {
    match b {
        b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' => Class::Name,
        b'.' => Class::Dot,
        b':' => Class::Colon,
        b'@' => Class::At,
        b'/' | b'?' | b'#' | b'\\' => Class::End,
        0x21..=0x7e => Class::Other,
        _ => Class::Unsure,
    }
}

/// [`classify`] for every byte, so the scan is one table load per byte.
static CLASSES: [Class; 256] = {
    let mut table = [Class::Unsure; 256];
    let mut i = 0;
    while i < 256 {
        table[i] = classify(i as u8);
        i += 1;
    }
    table
};

/// The host of a URL in the plain form `http[s]://[userinfo@]host[:port][/?#...]`, read
/// from `rest`, the URL after its `://`: the host is ASCII letters, digits, dots and hyphens
/// (of either case) and the userinfo is printable ASCII. Reads in place; allocates nothing.
///
/// `None` means "not sure": the caller must use the full parser. It is returned for anything
/// in the authority that the WHATWG parser might read differently from a naive split:
/// whitespace, control or non-ASCII bytes (the parser strips or maps them), percent-encoding
/// in the host, IP literals and numeric last labels (IPv4 shorthands), `xn--` labels
/// (punycode is validated), empty labels, extra slashes, and out-of-range ports. Bytes after
/// the authority cannot change the host, so they are not read.
fn plain_host(rest: &[u8]) -> Option<&[u8]> {
    // One pass over the authority. An `@` means everything so far was userinfo: the host
    // starts again after it, so problems seen before it are forgotten.
    let mut end = rest.len();
    let mut host_start = 0;
    let (mut label_start, mut prev_label_start) = (0, 0);
    let mut colon = None;
    // Something that is fine in userinfo but not in a plain host or port.
    let mut odd = false;
    let mut i = 0;
    while i < rest.len() {
        // Host name bytes are most of an authority: skip them in a tight loop.
        if CLASSES[usize::from(rest[i])] == Class::Name {
            i += 1;
            continue;
        }
        match CLASSES[usize::from(rest[i])] {
            Class::Name => {}
            Class::Dot => {
                odd |= colon.is_some() || i == label_start || is_punycode(&rest[label_start..i]);
                prev_label_start = label_start;
                label_start = i + 1;
            }
            Class::Colon => {
                odd |= colon.is_some();
                colon = Some(i);
            }
            Class::At => {
                host_start = i + 1;
                label_start = i + 1;
                prev_label_start = i + 1;
                colon = None;
                odd = false;
            }
            Class::End => {
                end = i;
                break;
            }
            Class::Other => odd = true,
            Class::Unsure => return None,
        }
        i += 1;
    }
    let host_end = colon.unwrap_or(end);
    if odd || host_end == host_start || host_end - host_start > MAX_PLAIN_HOST {
        return None;
    }
    // A single trailing dot is allowed; then the last label is the one before it.
    let last = if label_start == host_end {
        &rest[prev_label_start..host_end - 1]
    } else {
        &rest[label_start..host_end]
    };
    if is_punycode(last) || last.first().is_none_or(u8::is_ascii_digit) {
        return None;
    }
    if let Some(colon) = colon {
        let port = &rest[colon + 1..end];
        if port.len() > 5
            || !port.iter().all(u8::is_ascii_digit)
            || port.iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0')) > 65_535
        {
            return None;
        }
    }
    Some(&rest[host_start..host_end])
}

/// The length of the scheme of `url` when it is certain without the full parser: the URL
/// starts with an ASCII letter, then letters, digits, `+`, `-` or `.`, then `:`. (The parser
/// strips leading spaces and controls and every tab and newline first, so a URL with any of
/// those before its colon is not certain.)
fn plain_scheme_len(url: &[u8]) -> Option<usize> {
    if !url.first()?.is_ascii_alphabetic() {
        return None;
    }
    let colon = url
        .iter()
        .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')))?;
    (url[colon] == b':').then_some(colon)
}

/// True for an `xn--` label, whose punycode the full parser validates.
fn is_punycode(label: &[u8]) -> bool {
    starts_with_ignore_case(label, b"xn--")
}

fn starts_with_ignore_case(bytes: &[u8], prefix: &[u8]) -> bool {
    bytes.len() >= prefix.len() && bytes[..prefix.len()].eq_ignore_ascii_case(prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[&str]) -> HostList {
        let patterns = entries.iter().map(|e| parse_entry(e).unwrap()).collect();
        HostList::new("t", vec!["https".into()], patterns)
    }

    #[test]
    fn exact_suffix_and_boundaries() {
        let l = list(&[
            "aws.amazon.com",
            ".aws.amazon.com",
            "developers.cloudflare.com",
        ]);
        assert!(l.allows("https://aws.amazon.com/x"));
        assert!(l.allows("https://docs.aws.amazon.com/x"));
        assert!(l.allows("https://DOCS.AWS.Amazon.COM/lambda"));
        assert!(l.allows("https://docs.aws.amazon.com./x"));
        assert!(l.allows("https://docs.aws.amazon.com:8443/x"));
        assert!(!l.allows("https://evilaws.amazon.com/"));
        assert!(!l.allows("https://docs.aws.amazon.com.evil.tld/"));
        assert!(!l.allows("https://aws.amazon.com@evil.tld/"));
        assert!(!l.allows("http://aws.amazon.com/"));
        assert!(!l.allows("https://cloudflare.com/"));
        assert!(!l.allows("/relative/path"));
        assert!(!l.allows("https://127.0.0.1/"));
        assert!(!l.allows("https://docs.aws.amazon.com../"));
    }

    #[test]
    fn entries_are_normalised_and_validated() {
        assert_eq!(
            parse_entry("Example.COM.").unwrap(),
            HostPattern::Exact("example.com".into())
        );
        assert_eq!(
            parse_entry(".B\u{00FC}cher.de").unwrap(),
            HostPattern::Suffix(".xn--bcher-kva.de".into())
        );
        assert!(parse_entry("*.example.com").is_err());
        assert!(parse_entry("https://example.com").is_err());
        assert!(parse_entry("").is_err());
        assert!(parse_entry(".").is_err());
        assert!(parse_entry(".10.0.0.1").is_err());
        assert!(matches!(
            parse_entry("10.0.0.1").unwrap(),
            HostPattern::Ip(_)
        ));
        assert!(matches!(parse_entry("[::1]").unwrap(), HostPattern::Ip(_)));
    }

    /// The allocation-free reader must agree with the WHATWG parser on every URL it claims.
    mod plain_host_agrees {
        use super::*;
        use proptest::prelude::*;

        fn part() -> impl Strategy<Value = &'static str> {
            prop::sample::select(vec![
                "https://",
                "http://",
                "HTTPS://",
                "hTTp://",
                "ftp://",
                "FTP://",
                "s3x://",
                "S3X:",
                "Https://",
                "h+t.t-p:",
                "https:",
                "https:/",
                "https:///",
                "aws.amazon.com",
                "docs.aws.amazon.com",
                "AWS.Amazon.COM",
                "developers.cloudflare.com",
                "evil.tld",
                "amazon.com",
                ".",
                "..",
                "-",
                "a",
                "xn--bcher-kva",
                "XN--80ak6aa92e",
                "127.0.0.1",
                "0x7f",
                "1",
                "[::1]",
                ":",
                ":443",
                ":65536",
                ":99999",
                ":0",
                "@",
                "user:pw@",
                "a@b@",
                "u%40x@",
                "[@",
                "\\@",
                "%41",
                "/",
                "/path",
                "?q=1",
                "#frag",
                "\\",
                " ",
                "\t",
                "\n",
                "\u{430}",
                "\u{ff0e}",
                "_",
                "com",
                "com.",
            ])
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]
            #[test]
            fn same_answer_as_the_full_parser(parts in prop::collection::vec(part(), 1..7)) {
                let url: String = parts.concat();
                let few = list(&["aws.amazon.com", ".aws.amazon.com", "developers.cloudflare.com"]);
                prop_assert_eq!(few.allows(&url), few.allows_parsed(&url), "url {:?}", url);
                // A list long enough to be hashed rather than scanned.
                let many = list(&[
                    "aws.amazon.com", ".aws.amazon.com", "developers.cloudflare.com", "a",
                    ".a", "evil.tld", "b.example", "c.example", "d.example", "e.example", "f.example", "g.example",
                ]);
                prop_assert!(matches!(many.exact, Names::Many(_)));
                prop_assert_eq!(many.allows(&url), many.allows_parsed(&url), "url {:?}", url);
                // More schemes, one of them not special (its host is opaque and keeps its case).
                let patterns = ["aws.amazon.com", ".amazon.com", "a"]
                    .iter()
                    .map(|e| parse_entry(e).unwrap())
                    .collect();
                let schemes = ["http", "https", "ftp", "s3x"].map(String::from).to_vec();
                let web = HostList::new("t", schemes, patterns);
                prop_assert_eq!(web.allows(&url), web.allows_parsed(&url), "url {:?}", url);
                let lower = url.to_ascii_lowercase();
                let rest = lower
                    .strip_prefix("https://")
                    .or_else(|| lower.strip_prefix("http://"))
                    .map(|r| &url[url.len() - r.len()..]);
                if let Some(host) = rest.and_then(|r| plain_host(r.as_bytes())) {
                    let parsed = Url::parse(&url).expect("plain URLs parse");
                    let lowered = String::from_utf8(host.to_ascii_lowercase()).expect("ascii");
                    prop_assert_eq!(parsed.host_str(), Some(lowered.as_str()));
                }
            }
        }
    }
}
