//! The strict URL reader behind host allowlists.
//!
//! toolgate judges a URL, but the executor's HTTP client fetches it, and URL readers disagree
//! about the host of some URLs: `https://a.com\@b.com/` is `a.com` to a WHATWG parser (the
//! backslash is a path separator) and `b.com` to curl and Python's `urlsplit`. An attacker
//! who controls a URL argument picks exactly those. So this reader accepts only URLs in a form
//! every mainstream reader (WHATWG, RFC 3986 readers such as curl, Python and Go, and Node's
//! legacy `url.parse`) gives the same host for, and names what is ambiguous in anything else.
//! `tests/tests/url_differential.rs` holds the real readers to that claim.
//!
//! It reads in place and allocates nothing; only an internationalised host, in a list that
//! opts in to them, is mapped (by [`idn_to_ascii`]) with allocation.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Why a URL's host cannot be told for certain: some mainstream URL readers would name a
/// different host than others, or a list's options refuse the form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ambiguity {
    Backslash,
    Whitespace,
    NoScheme,
    Slashes,
    ManyAt,
    AtWithDelimiter,
    Userinfo,
    UserinfoChars,
    Percent,
    Idn,
    IdnForm,
    NoHost,
    HostChars,
    EmptyLabel,
    LongHost,
    Ipv4Form,
    Ipv6Form,
    Port,
}

impl Ambiguity {
    /// Every reason, in declaration order (`ALL[a as usize] == a`).
    pub(crate) const ALL: [Ambiguity; 18] = [
        Ambiguity::Backslash,
        Ambiguity::Whitespace,
        Ambiguity::NoScheme,
        Ambiguity::Slashes,
        Ambiguity::ManyAt,
        Ambiguity::AtWithDelimiter,
        Ambiguity::Userinfo,
        Ambiguity::UserinfoChars,
        Ambiguity::Percent,
        Ambiguity::Idn,
        Ambiguity::IdnForm,
        Ambiguity::NoHost,
        Ambiguity::HostChars,
        Ambiguity::EmptyLabel,
        Ambiguity::LongHost,
        Ambiguity::Ipv4Form,
        Ambiguity::Ipv6Form,
        Ambiguity::Port,
    ];

    /// What is ambiguous, as a clause for a refusal ("the URL contains a backslash, ...").
    pub(crate) fn text(self) -> &'static str {
        match self {
            Ambiguity::Backslash => {
                "the URL contains a backslash, which some URL readers take as `/` and others as part of the host"
            }
            Ambiguity::Whitespace => {
                "the URL contains whitespace or a control character, which some URL readers strip and others keep"
            }
            Ambiguity::NoScheme => {
                "the URL does not start with a scheme such as `https:`, and clients guess a missing one differently"
            }
            Ambiguity::Slashes => {
                "the scheme is not followed by exactly two slashes (`https://`), and URL readers repair that differently"
            }
            Ambiguity::ManyAt => {
                "the URL contains more than one `@`, and URL readers disagree on which one ends the user name"
            }
            Ambiguity::AtWithDelimiter => {
                "the URL has an `@` before its path together with `?`, `#` or `;`, where some URL readers end the host and others do not"
            }
            Ambiguity::Userinfo => {
                "the URL carries a user name or password before an `@`, which URL readers split from the host differently (the host list does not accept userinfo)"
            }
            Ambiguity::UserinfoChars => {
                "the user name or password holds a character other than letters, digits, `-`, `.`, `_`, `~` and one `:`"
            }
            Ambiguity::Percent => {
                "the host part contains percent-encoding, which some URL readers decode and others do not"
            }
            Ambiguity::Idn => {
                "the host is an internationalised name (non-ASCII or `xn--`), which URL readers map differently (the host list does not accept them)"
            }
            Ambiguity::IdnForm => {
                "the internationalised host is not in the one normal form every IDNA version maps the same way"
            }
            Ambiguity::NoHost => "the URL names no host",
            Ambiguity::HostChars => {
                "the host contains a character other than letters, digits, `-` and `.`, where URL readers end or accept the host differently"
            }
            Ambiguity::EmptyLabel => {
                "the host has an empty label (a leading dot, `..`, or more than one trailing dot)"
            }
            Ambiguity::LongHost => "the host name is longer than the 253 characters DNS allows",
            Ambiguity::Ipv4Form => {
                "the host is a number in a form other than four plain decimal parts (like `0x7f.1` or `127.1`), which some URL readers turn into an IP address and others look up as a name"
            }
            Ambiguity::Ipv6Form => {
                "the bracketed IPv6 address is not one every URL reader parses the same way"
            }
            Ambiguity::Port => "the port is not a number from 1 to 65535",
        }
    }
}

/// What a host list accepts beyond the plain form.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Options {
    /// `userinfo allow`: a user name and password before the host.
    pub(crate) userinfo: bool,
    /// `idn allow`: internationalised host names, compared in their IDNA (punycode) form.
    pub(crate) idn: bool,
}

/// A host every reader agrees on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Host<'a> {
    /// ASCII letters (either case), digits, `-` and `.`, without its one allowed
    /// trailing dot; no `xn--` label.
    Name(&'a [u8]),
    /// Four plain decimal parts, or a bracketed IPv6 address.
    Ip(IpAddr),
    /// An internationalised name (non-ASCII, or with `xn--` labels), only when the list
    /// opts in: [`idn_to_ascii`] gives the form to compare.
    Idn(&'a str),
}

/// Whether `scheme` is one of WHATWG's special schemes, the only ones whose host it parses as
/// a domain (IDNA-mapped, IPv4 forms normalised); any other scheme's host stays opaque to it.
pub(crate) fn is_special(scheme: &[u8]) -> bool {
    ["http", "https", "ws", "wss", "ftp", "file"]
        .iter()
        .any(|s| crate::words::eq_folded(scheme, s.as_bytes()))
}

/// Splits `url` into its scheme and what follows the `:`, after refusing the bytes that are
/// ambiguous anywhere in a URL (backslashes, whitespace, controls).
pub(crate) fn scheme(url: &str) -> Result<(&[u8], &[u8]), Ambiguity> {
    let bytes = url.as_bytes();
    // Without an early exit the compiler vectorises this; the byte is found only when needed.
    let odd = |b: u8| (b <= b' ') | (b == 0x7f) | (b == b'\\');
    if bytes.iter().fold(0u8, |acc, &b| acc | u8::from(odd(b))) != 0 {
        let first = bytes.iter().copied().find(|&b| odd(b));
        return Err(if first == Some(b'\\') {
            Ambiguity::Backslash
        } else {
            Ambiguity::Whitespace
        });
    }
    if !bytes.first().is_some_and(u8::is_ascii_alphabetic) {
        return Err(Ambiguity::NoScheme);
    }
    let colon = bytes
        .iter()
        .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')))
        .filter(|&i| bytes[i] == b':')
        .ok_or(Ambiguity::NoScheme)?;
    Ok((&bytes[..colon], &bytes[colon + 1..]))
}

/// The host of a URL from `rest`, what follows its scheme's `:` (as [`scheme`] gives it).
pub(crate) fn host(rest: &[u8], opts: Options) -> Result<Host<'_>, Ambiguity> {
    let after = rest.strip_prefix(b"//").ok_or(Ambiguity::Slashes)?;
    if after.first() == Some(&b'/') {
        return Err(Ambiguity::Slashes);
    }
    let auth = Authority::scan(after);
    // Most URLs have no `@`: one word-at-a-time search says so.
    if after.contains(&b'@') {
        if after.iter().filter(|&&b| b == b'@').count() > 1 {
            return Err(Ambiguity::ManyAt);
        }
        // Every reader ends the authority at `/`; RFC 3986 and WHATWG readers also at `?`
        // and `#`, some legacy ones at `;` as well. Between the narrowest and the widest
        // reading an `@` would move the host, so it may not be there at all.
        let wide_end = after[auth.end..]
            .iter()
            .position(|&b| b == b'/')
            .map_or(after.len(), |i| auth.end + i);
        let wide = &after[..wide_end];
        if wide.contains(&b'@') && wide.iter().any(|b| matches!(b, b'?' | b'#' | b';')) {
            return Err(Ambiguity::AtWithDelimiter);
        }
    }
    if auth.percent {
        return Err(Ambiguity::Percent);
    }
    let start = match auth.at {
        Some(at) => {
            if !opts.userinfo {
                return Err(Ambiguity::Userinfo);
            }
            userinfo(&after[..at])?;
            at + 1
        }
        None => 0,
    };
    let host_port = &after[start..auth.end];
    if host_port.first() == Some(&b'[') {
        let close = host_port
            .iter()
            .position(|&b| b == b']')
            .ok_or(Ambiguity::Ipv6Form)?;
        let ip = std::str::from_utf8(&host_port[1..close])
            .ok()
            .and_then(|s| Ipv6Addr::from_str(s).ok())
            .ok_or(Ambiguity::Ipv6Form)?;
        match &host_port[close + 1..] {
            [] => {}
            [b':', digits @ ..] => port(digits)?,
            _ => return Err(Ambiguity::Ipv6Form),
        }
        return Ok(Host::Ip(IpAddr::V6(ip)));
    }
    let name_end = match auth.colon {
        // A second `:` is not a digit, so `port` refuses it.
        Some(colon) => {
            port(&after[colon + 1..auth.end])?;
            colon
        }
        None => auth.end,
    };
    let name = &after[start..name_end];
    if name.is_empty() {
        return Err(Ambiguity::NoHost);
    }
    if !auth.plain {
        let mut non_ascii = false;
        for &b in name {
            if b >= 0x80 {
                if !opts.idn {
                    return Err(Ambiguity::Idn);
                }
                non_ascii = true;
            } else if !is_name_byte(b) {
                return Err(Ambiguity::HostChars);
            }
        }
        if non_ascii {
            // `rest` came from a `&str` and the authority is cut at ASCII bytes, so this holds.
            return std::str::from_utf8(name)
                .map(Host::Idn)
                .map_err(|_| Ambiguity::HostChars);
        }
    }
    ascii_name(name, opts.idn)
}

/// What one scan of an authority (from after the `//`) found.
struct Authority {
    /// Where it ends: the first `/`, `?` or `#`, or the end of the URL.
    end: usize,
    /// The first `@`.
    at: Option<usize>,
    /// A `%` anywhere in it.
    percent: bool,
    /// The first `:` after the userinfo.
    colon: Option<usize>,
    /// Every byte after the userinfo and before that `:` is a host name byte.
    plain: bool,
}

impl Authority {
    fn scan(after: &[u8]) -> Authority {
        let mut a = Authority {
            end: after.len(),
            at: None,
            percent: false,
            colon: None,
            plain: true,
        };
        let mut i = 0;
        while i < after.len() {
            // Host name bytes are most of an authority: skip them in a tight loop.
            let b = after[i];
            i += 1;
            match BYTES[usize::from(b)] {
                Byte::Name => continue,
                Byte::End => {
                    a.end = i - 1;
                    break;
                }
                // What came before was userinfo: the host starts again.
                Byte::At if a.at.is_none() => {
                    a.at = Some(i - 1);
                    a.colon = None;
                    a.plain = true;
                }
                Byte::Colon if a.colon.is_none() => a.colon = Some(i - 1),
                Byte::Percent => {
                    a.percent = true;
                    a.plain &= a.colon.is_some();
                }
                Byte::At | Byte::Colon | Byte::Other => a.plain &= a.colon.is_some(),
            }
        }
        a
    }
}

/// How [`Authority::scan`] treats a byte.
#[derive(Clone, Copy)]
enum Byte {
    /// [`is_name_byte`].
    Name,
    /// `/`, `?`, `#`: the authority ends.
    End,
    At,
    Colon,
    Percent,
    /// Anything else, non-ASCII included.
    Other,
}

/// [`Byte`] for every byte, one load per byte.
static BYTES: [Byte; 256] = {
    let mut table = [Byte::Other; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        table[i] = match b {
            b'/' | b'?' | b'#' => Byte::End,
            b'@' => Byte::At,
            b':' => Byte::Colon,
            b'%' => Byte::Percent,
            _ if NAME_BYTES[i] => Byte::Name,
            _ => Byte::Other,
        };
        i += 1;
    }
    table
};

/// Checks an ASCII host name: labels, length, numbers. `xn--` labels are internationalised
/// names, accepted (as [`Host::Idn`]) only when `idn` is set.
pub(crate) fn ascii_name(name: &[u8], idn: bool) -> Result<Host<'_>, Ambiguity> {
    let trimmed = name.strip_suffix(b".").unwrap_or(name);
    if trimmed.is_empty() {
        return Err(if name.is_empty() {
            Ambiguity::NoHost
        } else {
            Ambiguity::EmptyLabel
        });
    }
    if trimmed.len() > MAX_NAME {
        return Err(Ambiguity::LongHost);
    }
    let mut punycode = false;
    let mut label_start = 0;
    for (i, &b) in trimmed.iter().enumerate() {
        if i == label_start {
            if b == b'.' {
                return Err(Ambiguity::EmptyLabel);
            }
            punycode |= trimmed
                .get(i..i + 4)
                .is_some_and(|p| p.eq_ignore_ascii_case(b"xn--"));
        }
        if b == b'.' {
            label_start = i + 1;
        }
    }
    // `trimmed` ending in a dot means the name ended in two.
    let last = &trimmed[label_start..];
    if last.is_empty() {
        return Err(Ambiguity::EmptyLabel);
    }
    if last.first().is_some_and(u8::is_ascii_digit) {
        // Only the plain dotted quad is read the same everywhere.
        return match dotted_quad(name) {
            Some(ip) => Ok(Host::Ip(IpAddr::V4(ip))),
            None => Err(Ambiguity::Ipv4Form),
        };
    }
    if punycode {
        if !idn {
            return Err(Ambiguity::Idn);
        }
        return std::str::from_utf8(name)
            .map(Host::Idn)
            .map_err(|_| Ambiguity::HostChars);
    }
    Ok(Host::Name(trimmed))
}

/// The longest host name DNS allows, less its trailing dot.
pub(crate) const MAX_NAME: usize = 253;

/// A host name byte: ASCII letters, digits, `-`, `.`. (Not `_`: readers agree on it, but
/// host names never need it, and the case-folded compare in `words` folds only these.)
pub(crate) fn is_name_byte(b: u8) -> bool {
    NAME_BYTES[usize::from(b)]
}

/// [`is_name_byte`] as a table, one load per byte.
static NAME_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        table[i] = b.is_ascii_alphanumeric() || b == b'-' || b == b'.';
        i += 1;
    }
    table
};

/// A user name and password: unreserved characters and one `:`.
fn userinfo(info: &[u8]) -> Result<(), Ambiguity> {
    let plain = info
        .iter()
        .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b':'));
    if !plain || info.iter().filter(|&&b| b == b':').count() > 1 {
        return Err(Ambiguity::UserinfoChars);
    }
    Ok(())
}

/// A port: one to five digits, 1 to 65535.
fn port(digits: &[u8]) -> Result<(), Ambiguity> {
    let ok = (1..=5).contains(&digits.len())
        && digits.iter().all(u8::is_ascii_digit)
        && (1..=65_535).contains(
            &digits
                .iter()
                .fold(0u32, |n, d| n * 10 + u32::from(d - b'0')),
        );
    if ok {
        Ok(())
    } else {
        Err(Ambiguity::Port)
    }
}

/// `a.b.c.d`, each part decimal 0 to 255 without leading zeros, and no trailing dot.
fn dotted_quad(name: &[u8]) -> Option<Ipv4Addr> {
    let mut parts = [0u8; 4];
    let mut n = 0;
    for part in name.split(|&b| b == b'.') {
        let slot = parts.get_mut(n)?;
        let plain = (1..=3).contains(&part.len())
            && part.iter().all(u8::is_ascii_digit)
            && (part.len() == 1 || part[0] != b'0');
        if !plain {
            return None;
        }
        *slot = u8::try_from(part.iter().fold(0u32, |v, d| v * 10 + u32::from(d - b'0'))).ok()?;
        n += 1;
    }
    (n == 4).then(|| Ipv4Addr::from(parts))
}

/// The ASCII (punycode) form of an internationalised host, lowercase and without its one
/// allowed trailing dot, when every IDNA reader maps it the same way: the host must already
/// be in normal form (so UTS #46, IDNA 2008 and IDNA 2003 leave it unchanged, and only
/// punycode it), and hold none of the four characters IDNA 2003 maps differently (`ß`, `ς`,
/// the zero-width joiner and non-joiner).
pub(crate) fn idn_to_ascii(host: &str) -> Result<String, Ambiguity> {
    const DEVIATIONS: [char; 4] = ['\u{00DF}', '\u{03C2}', '\u{200C}', '\u{200D}'];
    let ascii = url::quirks::domain_to_ascii(host);
    if ascii.is_empty() {
        return Err(Ambiguity::IdnForm);
    }
    let unicode = url::quirks::domain_to_unicode(&ascii);
    let lower = host.to_ascii_lowercase();
    let normal = if host.is_ascii() {
        ascii == lower
    } else {
        unicode == lower
    };
    if !normal || unicode.contains(DEVIATIONS) {
        return Err(Ambiguity::IdnForm);
    }
    // The mapped name must pass the checks a plain name passes.
    match ascii_name(ascii.as_bytes(), true)? {
        Host::Name(n) => Ok(String::from_utf8_lossy(n).into_owned()),
        Host::Idn(n) => Ok(n.strip_suffix('.').unwrap_or(n).to_string()),
        Host::Ip(_) => Err(Ambiguity::Ipv4Form),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(url: &str, opts: Options) -> Result<Host<'_>, Ambiguity> {
        let (_, rest) = scheme(url)?;
        host(rest, opts)
    }

    #[test]
    fn every_reason_has_its_index() {
        for (i, a) in Ambiguity::ALL.iter().enumerate() {
            assert_eq!(*a as usize, i);
            assert!(!a.text().is_empty());
        }
    }

    #[test]
    fn plain_urls_read_in_place() {
        let o = Options::default();
        assert_eq!(
            read("https://Docs.AWS.amazon.com./x", o),
            Ok(Host::Name(b"Docs.AWS.amazon.com"))
        );
        assert_eq!(
            read("https://1.2.3.4:8/", o),
            Ok(Host::Ip(IpAddr::V4(Ipv4Addr::new(1, 2, 3, 4))))
        );
        assert_eq!(read("https://a.b?x=@y", o), Err(Ambiguity::AtWithDelimiter));
        assert_eq!(read("https://a.b/?x=@y", o), Ok(Host::Name(b"a.b")));
    }

    #[test]
    fn idn_needs_normal_form() {
        assert_eq!(idn_to_ascii("bücher.de").as_deref(), Ok("xn--bcher-kva.de"));
        assert_eq!(
            idn_to_ascii("XN--BCHER-KVA.de").as_deref(),
            Ok("xn--bcher-kva.de")
        );
        assert_eq!(idn_to_ascii("BÜCHER.de"), Err(Ambiguity::IdnForm));
        assert_eq!(idn_to_ascii("faß.de"), Err(Ambiguity::IdnForm));
        assert_eq!(idn_to_ascii("\u{FF41}ws.com"), Err(Ambiguity::IdnForm));
        assert_eq!(idn_to_ascii("xn--zz.com"), Err(Ambiguity::IdnForm));
    }
}
