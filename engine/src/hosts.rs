//! Host allowlists for URL arguments.
//!
//! A URL is read by the strict reader ([`crate::strict_url`]), which accepts only the forms
//! every mainstream URL reader gives the same host for and names what is ambiguous in any
//! other; the host it gives is then compared with the list. Plain URLs are read and compared
//! in place, without allocating. List entries are normalised at compile time (lowercase,
//! IDNA-mapped, one trailing dot dropped) so both sides compare equal.

use crate::strict_url::{self, Ambiguity, Host as UrlHost, Options};
use crate::words;
use rustc_hash::FxHashSet as HashSet;
use std::net::IpAddr;
use url::Host;

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
    /// What the list accepts beyond plain URLs (`userinfo allow`, `idn allow`).
    options: Options,
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
    /// From the strict reader: ASCII letters of either case, digits, `-` and `.`.
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

impl HostPattern {
    /// True for an internationalised name (stored in punycode, with an `xn--` label): only a
    /// list with `idn allow` can match it.
    pub(crate) fn is_idn(&self) -> bool {
        match self {
            HostPattern::Exact(d) | HostPattern::Suffix(d) => {
                d.split('.').any(|label| label.starts_with("xn--"))
            }
            HostPattern::Ip(_) => false,
        }
    }
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
            // An entry no URL could match (a URL host has to pass the same reader).
            if !d.bytes().all(strict_url::is_name_byte) {
                return Err(format!(
                    "no URL can name this host: {}",
                    Ambiguity::HostChars.text()
                ));
            }
            if let Err(why) = strict_url::ascii_name(d.as_bytes(), true) {
                return Err(format!("no URL can name this host: {}", why.text()));
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
    /// Builds a list from normalised patterns, lowercase schemes and the list's options.
    pub(crate) fn new(
        name: &str,
        schemes: Vec<String>,
        patterns: Vec<HostPattern>,
        options: Options,
    ) -> Self {
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
            options,
        }
    }

    /// The accepted schemes.
    pub(crate) fn schemes(&self) -> impl Iterator<Item = &str> {
        self.schemes.iter().map(|s| &**s)
    }

    /// True when `url` is unambiguous, has an accepted scheme, and its host is on the list.
    #[cfg(test)]
    pub(crate) fn allows(&self, url: &str) -> bool {
        self.check(url) == Ok(true)
    }

    /// Whether `url`'s host is on the list: `Ok(false)` for a URL that is plainly of another
    /// scheme or another host, `Err` for one whose host URL readers could disagree on.
    /// Allocates only for an internationalised host in a list that accepts them.
    pub(crate) fn check(&self, url: &str) -> Result<bool, Ambiguity> {
        let (scheme, rest) = strict_url::scheme(url)?;
        if !self
            .schemes
            .iter()
            .any(|s| words::eq_folded(scheme, s.as_bytes()))
        {
            // Whatever the rest of the URL is, its scheme is not accepted.
            return Ok(false);
        }
        Ok(match strict_url::host(rest, self.options)? {
            UrlHost::Name(name) => self.domain_allowed(HostRef::Plain(name)),
            UrlHost::Ip(ip) => self.ips.contains(&ip),
            // WHATWG maps an internationalised host to punycode only under its special
            // schemes; under any other it keeps an opaque, percent-encoded host, while other
            // readers still map it: readers disagree, so it is ambiguous.
            UrlHost::Idn(_) if !strict_url::is_special(scheme) => return Err(Ambiguity::Idn),
            UrlHost::Idn(name) => {
                self.domain_allowed(HostRef::Lower(&strict_url::idn_to_ascii(name)?))
            }
        })
    }

    /// What [`HostList::check`] read, in words, for `explain`.
    pub(crate) fn describe_url(&self, url: &str) -> String {
        let read = strict_url::scheme(url).and_then(|(scheme, rest)| {
            let scheme = String::from_utf8_lossy(scheme).to_ascii_lowercase();
            if !self.schemes().any(|s| s == scheme) {
                return Ok(format!("scheme `{scheme}`"));
            }
            Ok(match strict_url::host(rest, self.options)? {
                UrlHost::Name(n) => format!(
                    "host \"{}\"",
                    String::from_utf8_lossy(n).to_ascii_lowercase()
                ),
                UrlHost::Ip(ip) => format!("host {ip}"),
                UrlHost::Idn(n) => format!("host \"{}\"", strict_url::idn_to_ascii(n)?),
            })
        });
        read.unwrap_or_else(|why| format!("ambiguous URL ({})", why.text()))
    }

    /// True when `host` is on the list.
    fn domain_allowed(&self, host: HostRef<'_>) -> bool {
        self.exact.contains(host) || self.suffixes.has_suffix_of(host)
    }

    /// True when this list is within `other`: every URL it accepts, `other` accepts, and
    /// every URL `other` plainly turns down (another scheme or host, not an ambiguous one),
    /// it turns down too. That holds when both read URLs with the same options and this
    /// list's schemes, hosts, suffixes and addresses are all covered by `other`'s. The
    /// change gate (`crate::entail`) proves a host list narrowed with it.
    pub(crate) fn within(&self, other: &HostList) -> bool {
        self.options == other.options
            && self.schemes.iter().all(|s| other.schemes.contains(s))
            && self.exact.iter().all(|h| {
                other.exact.iter().any(|o| o == h)
                    || other
                        .suffixes
                        .iter()
                        .any(|s| h.len() > s.len() && h.ends_with(&**s))
            })
            && self
                .suffixes
                .iter()
                .all(|s| other.suffixes.iter().any(|o| s.ends_with(&**o)))
            && self.ips.iter().all(|ip| other.ips.contains(ip))
    }

    /// What makes this list accept more than `other`, in words, when [`HostList::within`]
    /// does not hold.
    pub(crate) fn widened_from(&self, other: &HostList) -> String {
        if self.options != other.options {
            return format!(
                "list `{}` reads URLs with other options (userinfo {}, idn {}; was userinfo {}, idn {})",
                self.name,
                allow(self.options.userinfo),
                allow(self.options.idn),
                allow(other.options.userinfo),
                allow(other.options.idn)
            );
        }
        if let Some(s) = self.schemes.iter().find(|s| !other.schemes.contains(s)) {
            return format!("list `{}` accepts scheme `{s}`", self.name);
        }
        let old: Vec<String> = other.describe_entries();
        let new = self
            .describe_entries()
            .into_iter()
            .find(|e| !old.contains(e))
            .unwrap_or_default();
        format!("list `{}` accepts {new}", self.name)
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

fn allow(on: bool) -> &'static str {
    if on {
        "allow"
    } else {
        "deny"
    }
}

/// Longest host a plain host is lowercased on the stack for.
const MAX_PLAIN_HOST: usize = strict_url::MAX_NAME;

#[cfg(test)]
mod tests {
    use super::*;

    fn list_with(entries: &[&str], schemes: &[&str], options: Options) -> HostList {
        let patterns = entries.iter().map(|e| parse_entry(e).unwrap()).collect();
        let schemes = schemes.iter().map(|s| s.to_string()).collect();
        HostList::new("t", schemes, patterns, options)
    }

    fn list(entries: &[&str]) -> HostList {
        list_with(entries, &["https"], Options::default())
    }

    /// Found by `agrees_with_whatwg`: under a non-special scheme WHATWG keeps a non-ASCII
    /// host opaque (percent-encoded) while other readers map it to punycode.
    #[test]
    fn an_idn_host_under_a_non_special_scheme_is_ambiguous() {
        let idn = Options {
            userinfo: false,
            idn: true,
        };
        let l = list_with(&[".aws.amazon.com"], &["https", "s3x"], idn);
        assert_eq!(
            l.check("s3x://\u{430}docs.aws.amazon.com"),
            Err(Ambiguity::Idn)
        );
        assert_eq!(l.check("https://\u{430}docs.aws.amazon.com"), Ok(true));
        assert_eq!(l.check("s3x://docs.aws.amazon.com"), Ok(true));
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
        assert_eq!(
            l.check("https://aws.amazon.com@evil.tld/"),
            Err(Ambiguity::Userinfo)
        );
        assert_eq!(l.check("http://aws.amazon.com/"), Ok(false));
        assert_eq!(l.check("https://cloudflare.com/"), Ok(false));
        assert_eq!(l.check("/relative/path"), Err(Ambiguity::NoScheme));
        assert_eq!(l.check("https://127.0.0.1/"), Ok(false));
        assert_eq!(
            l.check("https://docs.aws.amazon.com../"),
            Err(Ambiguity::EmptyLabel)
        );
        assert_eq!(
            l.check("https://docs.aws.amazon.com\\@evil.tld/"),
            Err(Ambiguity::Backslash)
        );
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
        assert!(parse_entry(".B\u{00FC}cher.de").unwrap().is_idn());
        assert!(!parse_entry("example.com").unwrap().is_idn());
        assert!(parse_entry("*.example.com").is_err());
        assert!(parse_entry("https://example.com").is_err());
        assert!(parse_entry("").is_err());
        assert!(parse_entry(".").is_err());
        assert!(parse_entry(".10.0.0.1").is_err());
        assert!(parse_entry("a_b.example.com").is_err());
        assert!(matches!(
            parse_entry("10.0.0.1").unwrap(),
            HostPattern::Ip(_)
        ));
        assert!(matches!(parse_entry("[::1]").unwrap(), HostPattern::Ip(_)));
    }

    #[test]
    fn options_open_userinfo_and_idn() {
        let entries = ["example.com", ".xn--bcher-kva.de"];
        let plain = list_with(&entries, &["https"], Options::default());
        let both = list_with(
            &entries,
            &["https"],
            Options {
                userinfo: true,
                idn: true,
            },
        );
        for (url, plain_says, both_says) in [
            (
                "https://u:p@example.com/",
                Err(Ambiguity::Userinfo),
                Ok(true),
            ),
            ("https://u@evil.tld/", Err(Ambiguity::Userinfo), Ok(false)),
            (
                "https://u;x@example.com/",
                Err(Ambiguity::AtWithDelimiter),
                Err(Ambiguity::AtWithDelimiter),
            ),
            (
                "https://u%40@example.com/",
                Err(Ambiguity::Percent),
                Err(Ambiguity::Percent),
            ),
            (
                "https://a:b:c@example.com/",
                Err(Ambiguity::Userinfo),
                Err(Ambiguity::UserinfoChars),
            ),
            ("https://a.b\u{00FC}cher.de/", Err(Ambiguity::Idn), Ok(true)),
            ("https://a.xn--bcher-kva.de/", Err(Ambiguity::Idn), Ok(true)),
            (
                "https://a.B\u{00DC}cher.de/",
                Err(Ambiguity::Idn),
                Err(Ambiguity::IdnForm),
            ),
            (
                "https://xn--zz.de/",
                Err(Ambiguity::Idn),
                Err(Ambiguity::IdnForm),
            ),
        ] {
            assert_eq!(plain.check(url), plain_says, "{url}");
            assert_eq!(both.check(url), both_says, "{url}");
        }
    }

    /// The strict reader against the WHATWG parser: every URL a list allows parses, with the
    /// same scheme and a host on the list, and the host the strict reader compared is the
    /// one the WHATWG parser gives. (The readers that differ from WHATWG are held to the
    /// same claim by `tests/tests/url_differential.rs`.)
    mod agrees_with_whatwg {
        use super::*;
        use proptest::prelude::*;
        use url::Url;

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
                "\u{fc}",
                "_",
                "com",
                "com.",
                ";",
                "de",
            ])
        }

        /// The host the WHATWG parser gives `url`, when its scheme is one of `schemes`.
        fn whatwg_host(url: &str, schemes: &[&str]) -> Option<String> {
            let parsed = Url::parse(url).ok()?;
            if !schemes.contains(&parsed.scheme()) {
                return None;
            }
            let host = match parsed.host()? {
                Host::Domain(d) => d.to_ascii_lowercase(),
                Host::Ipv4(ip) => ip.to_string(),
                Host::Ipv6(ip) => ip.to_string(),
            };
            Some(host.strip_suffix('.').unwrap_or(&host).to_string())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(4000))]
            #[test]
            fn allowed_urls_have_the_same_host_to_whatwg(parts in prop::collection::vec(part(), 1..7)) {
                let url: String = parts.concat();
                let entries = ["aws.amazon.com", ".aws.amazon.com", "developers.cloudflare.com", "a",
                    ".de", "127.0.0.1", "[::1]"];
                let schemes = ["http", "https", "ftp", "s3x"];
                let few = list_with(&entries, &schemes, Options::default());
                // A list long enough to be hashed rather than scanned.
                let mut long = entries.to_vec();
                long.extend(["b.example", "c.example", "d.example", "e.example", "f.example", "g.example"]);
                let many = list_with(&long, &schemes, Options { userinfo: true, idn: true });
                prop_assert!(matches!(many.exact, Names::Many(_)));
                for l in [&few, &many] {
                    let Ok(true) = l.check(&url) else { continue };
                    let host = whatwg_host(&url, &schemes);
                    prop_assert!(host.is_some(), "allowed, but WHATWG reads no host: {:?}", url);
                    let host = host.unwrap_or_default();
                    let described = l.describe_url(&url);
                    let listed = long.iter().any(|e| {
                        let e = e.trim_matches(['[', ']']);
                        host == *e || (e.starts_with('.') && host.ends_with(e))
                    });
                    prop_assert!(listed, "WHATWG host {:?} not listed: {:?}", host, url);
                    prop_assert!(described.contains(&host), "{:?} read as {}, WHATWG {:?}", url, described, host);
                }
            }
        }
    }
}
