//! The workload's URL grammar, hand-written: the host of
//! `^[hH][tT][tT][pP][sS]?://(?:[^/?#@]*@)?([A-Za-z0-9.\-]+)(?::[0-9]*)?(?:[/?#]|$)`.
//!
//! The floor and the Cedar caller use this byte scan; the Rego policy uses the regex itself.

/// The host the workload's regex would capture from `url`, or `None` when it does not match.
pub fn extract_host(url: &str) -> Option<&str> {
    let b = url.as_bytes();
    if b.len() < 7 || !b[..4].eq_ignore_ascii_case(b"http") {
        return None;
    }
    let mut i = 4;
    if b[i] == b's' || b[i] == b'S' {
        i += 1;
    }
    if b.get(i..i + 3) != Some(b"://".as_slice()) {
        return None;
    }
    i += 3;
    // Optional userinfo: the regex's `[^/?#@]*@` takes the run up to the first `@` that comes
    // before any `/`, `?` or `#`.
    let rest = &b[i..];
    let stop = rest
        .iter()
        .position(|&c| matches!(c, b'/' | b'?' | b'#' | b'@'))
        .unwrap_or(rest.len());
    if rest.get(stop) == Some(&b'@') {
        i += stop + 1;
    }
    let start = i;
    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.' || b[i] == b'-') {
        i += 1;
    }
    if i == start {
        return None;
    }
    let end = i;
    if i < b.len() && b[i] == b':' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    if i == b.len() || matches!(b[i], b'/' | b'?' | b'#') {
        url.get(start..end)
    } else {
        None
    }
}

/// True when `host` (already lower-case) is allowed by R3.
pub fn host_allowed(host: &str) -> bool {
    const HOSTS: [&str; 2] = ["aws.amazon.com", "developers.cloudflare.com"];
    HOSTS.iter().any(|h| {
        host == *h
            || (host.len() > h.len()
                && host.ends_with(h)
                && host.as_bytes()[host.len() - h.len() - 1] == b'.')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_regex() {
        let re = regex::Regex::new(
            r"^[hH][tT][tT][pP][sS]?://(?:[^/?#@]*@)?([A-Za-z0-9.\-]+)(?::[0-9]*)?(?:[/?#]|$)",
        )
        .unwrap();
        let urls = [
            "https://aws.amazon.com/x",
            "HTTP://Docs.AWS.amazon.com:8443?q",
            "https://user:pw@developers.cloudflare.com/",
            "https://aws.amazon.com@evil.tld/",
            "https://a@b@aws.amazon.com/",
            "https://evil.tld/@aws.amazon.com",
            "https://aws.amazon.com:x/",
            "https://aws.amazon.com:/",
            "https://",
            "https:/aws.amazon.com",
            "ftp://aws.amazon.com",
            "httpss://aws.amazon.com",
            "https://aws_amazon.com/",
            "https://[::1]/",
            "https://aws.amazon.com#f",
            "https://aws.amazon.com",
            "http://a",
            "https://xn--bcher-kva.de/",
            "https://b%C3%BCcher.de/",
            "",
        ];
        for u in urls {
            let want = re.captures(u).and_then(|c| c.get(1)).map(|m| m.as_str());
            assert_eq!(extract_host(u), want, "{u}");
        }
    }

    #[test]
    fn allowlist_is_exact_or_subdomain() {
        assert!(host_allowed("aws.amazon.com"));
        assert!(host_allowed("docs.aws.amazon.com"));
        assert!(host_allowed("developers.cloudflare.com"));
        assert!(!host_allowed("evilaws.amazon.com"));
        assert!(!host_allowed("aws.amazon.com.evil.tld"));
        assert!(!host_allowed("cloudflare.com"));
    }
}
