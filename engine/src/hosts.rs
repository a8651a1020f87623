//! Host allowlists for URL arguments.
//!
//! URLs are parsed with the WHATWG-conformant `url` crate, so userinfo (`a.com@b.com`),
//! percent-encoding, IDNA mapping and IPv4 shorthands (`0x7f.1`) are read the way a browser or
//! an HTTP client reads them, not the way a regex guesses. Everything fails closed.
//!
//! The common case (`http`/`https`, a plain ASCII host name, an optional numeric port) is
//! read by [`plain_host`] without allocating; anything else, and anything it is unsure of,
//! goes through the full parser. A property test holds the two to the same answers.

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
    exact: HashSet<Box<str>>,
    /// Suffixes with their leading dot (`.aws.amazon.com`), lowercase ASCII.
    suffixes: HashSet<Box<str>>,
    /// IP literals named by the list.
    ips: Box<[IpAddr]>,
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
        let mut exact = HashSet::default();
        let mut suffixes = HashSet::default();
        let mut ips = Vec::new();
        for p in patterns {
            match p {
                HostPattern::Exact(h) => {
                    exact.insert(h.into_boxed_str());
                }
                HostPattern::Suffix(s) => {
                    suffixes.insert(s.into_boxed_str());
                }
                HostPattern::Ip(ip) => ips.push(ip),
            }
        }
        HostList {
            name: name.into(),
            schemes: schemes.into_iter().map(String::into_boxed_str).collect(),
            exact,
            suffixes,
            ips: ips.into_boxed_slice(),
        }
    }

    /// The accepted schemes.
    pub(crate) fn schemes(&self) -> impl Iterator<Item = &str> {
        self.schemes.iter().map(|s| &**s)
    }

    /// True when `url` parses, has an accepted scheme, and its host is on the list.
    pub(crate) fn allows(&self, url: &str) -> bool {
        let mut buf = [0u8; MAX_PLAIN_HOST];
        match plain_host(url, &mut buf) {
            Some((scheme, host)) => {
                self.schemes.iter().any(|s| **s == *scheme) && self.domain_allowed(host)
            }
            None => self.allows_parsed(url),
        }
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
            Some(Host::Domain(d)) => self.domain_allowed(d),
        }
    }

    fn domain_allowed(&self, host: &str) -> bool {
        // Special schemes arrive lowercased and IDNA-mapped; opaque hosts of other schemes
        // do not, so fold their ASCII case here.
        let lowered;
        let host = if host.bytes().any(|b| b.is_ascii_uppercase()) {
            lowered = host.to_ascii_lowercase();
            lowered.as_str()
        } else {
            host
        };
        let host = host.strip_suffix('.').unwrap_or(host);
        if host.is_empty() {
            return false;
        }
        if self.exact.contains(host) {
            return true;
        }
        // Try every proper parent domain, each starting at a label boundary.
        host.match_indices('.')
            .any(|(i, _)| i > 0 && self.suffixes.contains(&host[i..]))
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

/// The scheme and lowercased host of a URL in the plain form
/// `http[s]://host[:port][/?#...]`, where the host is ASCII letters, digits, dots and hyphens.
///
/// `None` means "not sure": the caller must use the full parser. It is returned for anything
/// in the authority that the WHATWG parser might read differently from a naive split:
/// whitespace, control or non-ASCII bytes (the parser strips or maps them), backslashes
/// (read as `/`), userinfo, percent-encoding, IP literals and numeric last labels (IPv4
/// shorthands), `xn--` labels (punycode is validated), empty labels, extra slashes, and
/// out-of-range ports. Bytes after the authority cannot change the host, so they are not read.
fn plain_host<'b>(url: &str, buf: &'b mut [u8; MAX_PLAIN_HOST]) -> Option<(&'static str, &'b str)> {
    let bytes = url.as_bytes();
    let (scheme, rest) = if starts_with_ignore_case(bytes, b"https://") {
        ("https", &bytes[8..])
    } else if starts_with_ignore_case(bytes, b"http://") {
        ("http", &bytes[7..])
    } else {
        return None;
    };
    // One pass over the host, checking each label as it ends.
    let (mut label_start, mut prev_label_start) = (0, 0);
    let mut end = rest.len();
    for (i, &b) in rest.iter().enumerate() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' => {}
            b'.' => {
                if i == label_start || starts_with_ignore_case(&rest[label_start..i], b"xn--") {
                    return None;
                }
                prev_label_start = label_start;
                label_start = i + 1;
            }
            b':' | b'/' | b'?' | b'#' => {
                end = i;
                break;
            }
            _ => return None,
        }
    }
    let host = &rest[..end];
    if host.is_empty() || host.len() > MAX_PLAIN_HOST {
        return None;
    }
    // A single trailing dot is allowed; then the last label is the one before it.
    let last = if label_start == end {
        &rest[prev_label_start..end - 1]
    } else {
        &rest[label_start..end]
    };
    if starts_with_ignore_case(last, b"xn--") || last.first().is_none_or(u8::is_ascii_digit) {
        return None;
    }
    if rest.get(end) == Some(&b':') {
        let port = &rest[end + 1..];
        let port = &port[..port
            .iter()
            .position(|b| matches!(b, b'/' | b'?' | b'#'))
            .unwrap_or(port.len())];
        if port.len() > 5 || !port.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let value = port.iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0'));
        if value > 65_535 {
            return None;
        }
    }
    let out = &mut buf[..host.len()];
    for (o, b) in out.iter_mut().zip(host) {
        *o = b.to_ascii_lowercase();
    }
    Some((scheme, std::str::from_utf8(out).ok()?))
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
                let l = list(&["aws.amazon.com", ".aws.amazon.com", "developers.cloudflare.com"]);
                prop_assert_eq!(l.allows(&url), l.allows_parsed(&url), "url {:?}", url);
                let mut buf = [0u8; MAX_PLAIN_HOST];
                if let Some((scheme, host)) = plain_host(&url, &mut buf) {
                    let parsed = Url::parse(&url).expect("plain URLs parse");
                    prop_assert_eq!(parsed.scheme(), scheme);
                    prop_assert_eq!(parsed.host_str(), Some(host));
                }
            }
        }
    }
}
