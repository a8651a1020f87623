//! Host allowlist edge cases, through the coach policy's `vendor_docs` list
//! (https only; `aws.amazon.com`, `.aws.amazon.com`, `developers.cloudflare.com`) and small
//! test policies; and properties over generated lists and URLs (see the end of the file).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use toolgate_engine::{DenyKind, Policy};
use toolgate_tests::{
    assert_allowed, assert_denied_by, compile, compile_err, decide_one, example_policy,
};

fn coach() -> Policy {
    example_policy("coach")
}

/// Judges `fetch_vendor_doc(args)` in the coach policy: true when allowed, and asserts that a
/// denial is kind `host` by rule `vendor_doc_host`.
fn fetch(args: Value) -> bool {
    judge(
        &coach(),
        "coach",
        "fetch_vendor_doc",
        args,
        "vendor_doc_host",
    )
}

/// Judges `tool(args)` in `stage`; true when allowed, asserting a denial is `host` by `rule`.
fn judge(p: &Policy, stage: &str, tool: &str, args: Value, rule: &str) -> bool {
    let d = decide_one(p, json!({ "stage": stage }), tool, args);
    if d.allow {
        assert_allowed(&d);
    } else {
        assert_denied_by(&d, DenyKind::Host, rule);
    }
    d.allow
}

fn url(u: &str) -> bool {
    fetch(json!({ "url": u }))
}

fn expect(cases: &[(&str, bool)]) {
    let mut wrong = Vec::new();
    for (u, want) in cases {
        let got = url(u);
        if got != *want {
            wrong.push(format!(
                "{u:?}: {} but expected {}",
                if got { "allowed" } else { "denied" },
                if *want { "allowed" } else { "denied" }
            ));
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

#[test]
fn listed_hosts_and_subdomains_are_allowed() {
    expect(&[
        ("https://aws.amazon.com/", true),
        ("https://aws.amazon.com", true),
        (
            "https://docs.aws.amazon.com/lambda/latest/dg/welcome.html",
            true,
        ),
        ("https://a.b.c.aws.amazon.com/x?y=z#f", true),
        ("https://developers.cloudflare.com/workers/", true),
    ]);
}

#[test]
fn exact_entries_do_not_cover_subdomains_or_parents() {
    expect(&[
        ("https://docs.developers.cloudflare.com/", false),
        ("https://cloudflare.com/", false),
        ("https://amazon.com/", false),
        ("https://www.amazon.com/", false),
    ]);
}

#[test]
fn userinfo_is_not_the_host() {
    expect(&[
        ("https://aws.amazon.com@evil.tld/", false),
        ("https://aws.amazon.com:443@evil.tld/", false),
        ("https://user:pass@aws.amazon.com.evil.tld/", false),
        // Here the host really is aws.amazon.com; the userinfo is evil.tld.
        ("https://evil.tld@aws.amazon.com/", true),
        ("https://evil.tld:pw@docs.aws.amazon.com/x", true),
    ]);
}

#[test]
fn look_alike_suffixes_and_prefixes_are_denied() {
    expect(&[
        ("https://evilaws.amazon.com/", false),
        ("https://evil-aws.amazon.com/", false),
        ("https://docs.aws.amazon.com.evil.tld/", false),
        ("https://aws.amazon.com.evil.tld/", false),
        ("https://aws.amazon.co/", false),
        ("https://aws-amazon.com/", false),
        ("https://awsamazon.com/", false),
        ("https://developers.cloudflare.com.evil.tld/", false),
        ("https://xdevelopers.cloudflare.com/", false),
    ]);
}

#[test]
fn idna_homoglyphs_are_denied_and_compatibility_forms_map() {
    expect(&[
        // Cyrillic 'а' (U+0430) in "aws".
        ("https://\u{0430}ws.amazon.com/", false),
        ("https://docs.\u{0430}ws.amazon.com/", false),
        // Cyrillic 'о' (U+043E) in "cloudflare".
        ("https://developers.cl\u{043E}udflare.com/", false),
        // The punycode form of a homoglyph host is just as foreign.
        ("https://xn--ws-8cd.amazon.com/", false),
        // Fullwidth letters are mapped to ASCII by IDNA (UTS #46): the same host.
        ("https://\u{FF41}\u{FF57}\u{FF53}.amazon.com/", true),
        ("https://docs.\u{FF21}\u{FF37}\u{FF33}.amazon.com/", true),
        // Ideographic full stop is a label separator under IDNA.
        ("https://docs\u{3002}aws.amazon.com/", true),
    ]);
}

#[test]
fn host_comparison_ignores_case() {
    expect(&[
        ("https://AWS.AMAZON.COM/", true),
        ("https://Docs.Aws.Amazon.Com/X", true),
        ("HTTPS://developers.cloudflare.com/", true),
        ("https://EVILAWS.AMAZON.COM/", false),
    ]);
}

#[test]
fn ports_are_ignored() {
    expect(&[
        ("https://aws.amazon.com:443/", true),
        ("https://aws.amazon.com:8443/", true),
        ("https://docs.aws.amazon.com:1/x", true),
        ("https://evil.tld:443/", false),
        // Not a valid port: unparseable, so denied.
        ("https://aws.amazon.com:99999/", false),
        ("https://aws.amazon.com:port/", false),
    ]);
}

#[test]
fn one_trailing_dot_is_stripped_two_are_not() {
    expect(&[
        ("https://aws.amazon.com./", true),
        ("https://docs.aws.amazon.com./x", true),
        ("https://developers.cloudflare.com./", true),
        ("https://aws.amazon.com../", false),
        ("https://docs.aws.amazon.com../x", false),
        ("https://.aws.amazon.com/", false),
    ]);
}

#[test]
fn ip_literals_are_denied_when_not_listed() {
    expect(&[
        ("https://127.0.0.1/", false),
        ("https://54.239.28.85/", false),
        ("https://[::1]/", false),
        ("https://[2600:9000::1]/", false),
        // Other spellings of 127.0.0.1 that WHATWG parsing normalises.
        ("https://2130706433/", false),
        ("https://0x7f000001/", false),
        ("https://0x7f.0.0.1/", false),
        ("https://0177.0.0.1/", false),
        ("https://127.1/", false),
        ("https://[::ffff:127.0.0.1]/", false),
    ]);
}

const IP_LIST: &str = r#"
module ips
ingest fetch
stage s { tools [fetch] }
hosts internal {
  schemes [https, http]
  allow ["10.0.0.1", "[::1]", "127.0.0.1"]
}
rule internal_only for fetch { require args.url in hosts internal }
"#;

#[test]
fn ip_literals_are_allowed_when_the_list_names_that_ip() {
    let p = compile(IP_LIST);
    let f = |u: &str| judge(&p, "s", "fetch", json!({ "url": u }), "internal_only");
    assert!(f("https://10.0.0.1/"));
    assert!(f("http://10.0.0.1:8080/x"));
    assert!(f("https://[::1]/"));
    assert!(f("https://[0:0:0:0:0:0:0:1]/"));
    assert!(f("https://127.0.0.1/"));
    // Another spelling of a listed IP is that IP.
    assert!(f("https://2130706433/"));
    assert!(f("https://0x7f.0.0.1/"));
    // Unlisted IPs and names stay denied.
    assert!(!f("https://10.0.0.2/"));
    assert!(!f("https://[::2]/"));
    assert!(!f("https://localhost/"));
    assert!(!f("https://10.0.0.1.evil.tld/"));
}

#[test]
fn non_string_and_missing_url_arguments_are_denied() {
    for args in [
        json!({}),
        json!({"url": null}),
        json!({"url": 42}),
        json!({"url": true}),
        json!({"url": ["https://aws.amazon.com/"]}),
        json!({"url": {"href": "https://aws.amazon.com/"}}),
        json!({"link": "https://aws.amazon.com/"}),
    ] {
        assert!(!fetch(args.clone()), "{args}");
    }
}

#[test]
fn unparseable_relative_and_hostless_urls_are_denied() {
    expect(&[
        ("", false),
        (" ", false),
        ("not a url at all", false),
        ("/relative/path", false),
        ("//aws.amazon.com/x", false),
        ("aws.amazon.com/docs", false),
        ("docs", false),
        ("https://", false),
        ("https:///path", false),
        ("https://aws amazon.com/", false),
    ]);
}

#[test]
fn schemes_other_than_the_listed_ones_are_denied() {
    expect(&[
        ("http://aws.amazon.com/", false),
        ("http://docs.aws.amazon.com/", false),
        ("ftp://aws.amazon.com/", false),
        ("ws://aws.amazon.com/", false),
        ("wss://aws.amazon.com/", false),
        ("file:///etc/passwd", false),
        ("file://aws.amazon.com/etc/passwd", false),
        ("javascript:alert(1)", false),
        ("javascript://aws.amazon.com/%0aalert(1)", false),
        ("data:text/html,<script>alert(1)</script>", false),
        (
            "data:text/plain;base64,aHR0cHM6Ly9hd3MuYW1hem9uLmNvbS8=",
            false,
        ),
        ("mailto:x@aws.amazon.com", false),
        ("httpsx://aws.amazon.com/", false),
    ]);
}

#[test]
fn percent_encoded_hosts_are_decoded_before_matching() {
    expect(&[
        // An encoded dot decodes to the allowed host itself (what a client would connect to).
        ("https://aws%2Eamazon%2Ecom/", true),
        ("https://docs%2eaws.amazon.com/", true),
        // Encoded look-alikes stay look-alikes.
        ("https://docs.aws.amazon.com%2Eevil.tld/", false),
        ("https://evil%2Etld/", false),
        ("https://%61ws.amazon.com.evil.tld/", false),
        // Encodings that decode to forbidden host characters do not parse.
        ("https://aws.amazon.com%2F@evil.tld/", false),
        ("https://evil.tld%00.aws.amazon.com/", false),
        ("https://aws.amazon.com%00/", false),
    ]);
}

#[test]
fn backslashes_and_odd_separators_are_read_like_a_browser_reads_them() {
    expect(&[
        // WHATWG treats `\` as `/` in special URLs: the host ends at the backslash.
        ("https://evil.tld\\@aws.amazon.com/", false),
        ("https://aws.amazon.com\\@evil.tld/", true),
        ("https://evil.tld#@aws.amazon.com/", false),
        ("https://evil.tld?@aws.amazon.com/", false),
        ("https://evil.tld/@aws.amazon.com/", false),
    ]);
}

#[test]
fn a_suffix_entry_matches_proper_subdomains_only() {
    let p = compile(
        r#"
module sub
ingest fetch
stage s { tools [fetch] }
hosts only_subs { schemes [https] allow [".example.com"] }
rule subs for fetch { require args.url in hosts only_subs }
"#,
    );
    let f = |u: &str| judge(&p, "s", "fetch", json!({ "url": u }), "subs");
    assert!(f("https://a.example.com/"));
    assert!(f("https://a.b.example.com/"));
    assert!(
        !f("https://example.com/"),
        "the bare domain is not a proper subdomain"
    );
    assert!(!f("https://badexample.com/"));
    assert!(!f("https://a.example.com.evil/"));
    assert!(!f("https://example.com.a/"));
}

#[test]
fn list_entries_are_idna_normalised_too() {
    let p = compile(
        r#"
module idn
ingest fetch
stage s { tools [fetch] }
hosts books { schemes [https] allow ["Bücher.de", "EXAMPLE.org."] }
rule books_only for fetch { require args.url in hosts books }
"#,
    );
    let f = |u: &str| judge(&p, "s", "fetch", json!({ "url": u }), "books_only");
    assert!(f("https://bücher.de/"));
    assert!(f("https://BÜCHER.de/"));
    assert!(f("https://xn--bcher-kva.de/"));
    assert!(f("https://example.org/"));
    assert!(!f("https://bucher.de/"));
}

#[test]
fn several_schemes_and_the_default_scheme() {
    let p = compile(
        r#"
module schemes
ingest both, default_only
stage s { tools [both, default_only] }
hosts both_list { schemes [https, http] allow ["example.com"] }
hosts default_list { allow ["example.com"] }
rule both_rule for both { require args.url in hosts both_list }
rule default_rule for default_only { require args.url in hosts default_list }
"#,
    );
    let both = |u: &str| judge(&p, "s", "both", json!({ "url": u }), "both_rule");
    let dflt = |u: &str| judge(&p, "s", "default_only", json!({ "url": u }), "default_rule");
    assert!(both("https://example.com/"));
    assert!(both("http://example.com/"));
    assert!(!both("ftp://example.com/"));
    assert!(dflt("https://example.com/"));
    assert!(
        !dflt("http://example.com/"),
        "a list without `schemes` accepts https only"
    );
}

#[test]
fn host_checks_work_on_nested_argument_paths() {
    let p = compile(
        r#"
module nested
ingest fetch
stage s { tools [fetch] }
hosts h { allow ["example.com"] }
rule every_source for fetch {
  require args.sources[0].url in hosts h and args.sources[1].url in hosts h
}
"#,
    );
    let f = |a: Value| judge(&p, "s", "fetch", a, "every_source");
    assert!(f(
        json!({"sources": [{"url": "https://example.com/a"}, {"url": "https://example.com/b"}]})
    ));
    assert!(!f(
        json!({"sources": [{"url": "https://example.com/a"}, {"url": "https://evil.tld/"}]})
    ));
    assert!(!f(json!({"sources": [{"url": "https://example.com/a"}]})));
}

#[test]
fn the_host_refusal_says_it_did_not_happen() {
    let d = decide_one(
        &coach(),
        json!({"stage": "coach"}),
        "fetch_vendor_doc",
        json!({"url": "https://evil.tld/"}),
    );
    let reason = d.reason.as_deref().unwrap();
    assert!(reason.contains("did NOT happen"), "{reason}");
    assert!(reason.contains("vendor_docs"), "names the list: {reason}");
}

#[test]
fn bad_host_entries_are_compile_errors() {
    for entry in [
        "https://example.com",
        "example.com/path",
        "user@example.com",
        "example.com:443",
        "*.example.com",
        "",
        ".",
        "exa mple.com",
    ] {
        let out = compile_err(&format!(
            "module m\ningest f\nstage s {{ tools [f] }}\nhosts h {{ allow [\"{entry}\"] }}\nrule r for f {{ require args.url in hosts h }}\n"
        ));
        assert!(out.contains("bad host entry"), "{entry:?}: {out}");
        assert!(out.contains("test.gate:4:"), "{entry:?}: {out}");
    }
}

#[test]
fn an_unknown_host_list_is_a_compile_error() {
    let out = compile_err(
        "module m\ningest f\nstage s { tools [f] }\nhosts h { allow [\"a.com\"] }\nrule r for f { require args.url in hosts nope }\n",
    );
    assert!(out.contains("nope"), "{out}");
    assert!(out.contains("test.gate:5:"), "{out}");
}

#[test]
fn an_empty_allowlist_warns_and_denies_everything() {
    let p = compile(
        "module m\ningest f\nstage s { tools [f] }\nhosts h { schemes [https] allow [] }\nrule r for f { require args.url in hosts h }\n",
    );
    assert!(
        p.warnings()
            .iter()
            .any(|w| w.message.contains("no entries")),
        "{:?}",
        p.warnings()
    );
    assert!(!judge(
        &p,
        "s",
        "f",
        json!({"url": "https://example.com/"}),
        "r"
    ));
}

#[test]
fn non_special_schemes_compare_hosts_the_same_way_and_need_a_host() {
    let p = compile(
        r#"
module odd
ingest fetch
stage s { tools [fetch] }
hosts odd { schemes [git, mailto, file] allow ["example.com", ".example.org"] }
rule odd_only for fetch { require args.url in hosts odd }
"#,
    );
    let f = |u: &str| judge(&p, "s", "fetch", json!({ "url": u }), "odd_only");
    assert!(f("git://example.com/repo.git"));
    assert!(f("GIT://EXAMPLE.COM/repo.git"));
    assert!(f("git://Sub.Example.Org:9418/r"));
    assert!(!f("git://example.com@evil.tld/"));
    assert!(!f("git://evilexample.com/"));
    // No host at all: denied even though the scheme is listed.
    assert!(!f("mailto:someone@example.com"));
    assert!(!f("file:///etc/passwd"));
    assert!(!f("git:example.com"));
}

// ---- properties over generated allowlists and URLs ---------------------------------------

mod generated {
    use super::*;
    use proptest::prelude::*;

    use toolgate_tests::proptest_config;

    /// One list entry: a bare host (`exact`) or a `.suffix`, lowercase ASCII labels.
    #[derive(Debug, Clone)]
    struct Entry {
        suffix: bool,
        body: String,
    }

    /// Labels always hold a letter with a Cyrillic look-alike, so every entry can be spoofed.
    fn label() -> impl Strategy<Value = String> {
        "[aceopxy][a-z0-9]{0,3}"
    }

    fn entry() -> impl Strategy<Value = Entry> {
        (any::<bool>(), prop::collection::vec(label(), 2..4)).prop_map(|(suffix, labels)| Entry {
            suffix,
            body: labels.join("."),
        })
    }

    fn policy_for(entries: &[Entry]) -> Policy {
        let list: Vec<String> = entries
            .iter()
            .map(|e| format!("\"{}{}\"", if e.suffix { "." } else { "" }, e.body))
            .collect();
        compile(&format!(
            "module h\ningest fetch\nstage s {{ tools [fetch] }}\n\
             hosts h {{ schemes [https] allow [{}] }}\n\
             rule r for fetch {{ require args.url in hosts h }}\n",
            list.join(", ")
        ))
    }

    fn allows(p: &Policy, url: &str) -> bool {
        judge(p, "s", "fetch", json!({ "url": url }), "r")
    }

    /// The reference reading: the URL parses (WHATWG), is https, its host is a domain, and
    /// after one trailing dot is dropped it equals an exact entry or ends with `.suffix` with at
    /// least one character before that dot (a label boundary, a proper subdomain).
    fn reference_allows(entries: &[Entry], url: &str) -> bool {
        let Ok(parsed) = url::Url::parse(url) else {
            return false;
        };
        if parsed.scheme() != "https" {
            return false;
        }
        let Some(url::Host::Domain(host)) = parsed.host() else {
            return false;
        };
        let host = host.to_ascii_lowercase();
        let host = host.strip_suffix('.').unwrap_or(&host);
        entries.iter().any(|e| {
            if e.suffix {
                let dotted = format!(".{}", e.body);
                host.len() > dotted.len() && host.ends_with(&dotted)
            } else {
                host == e.body
            }
        })
    }

    /// Pieces glued into a host: entry text, dots of several kinds, userinfo and path
    /// separators, homoglyphs, encodings, whitespace, ports and IP forms.
    fn piece(entries: Vec<Entry>) -> impl Strategy<Value = String> {
        let bodies: Vec<String> = entries.iter().map(|e| e.body.clone()).collect();
        prop_oneof![
            4 => prop::sample::select(bodies.clone()),
            2 => prop::sample::select(bodies).prop_map(|b| b.to_uppercase()),
            2 => label(),
            3 => prop::sample::select(vec![
                ".", "..", "\u{FF0E}", "\u{3002}", "\u{FF61}", "%2E", "%2e", "@", ":443", ":99999",
                ":", "\\", "/", "#", "?", " ", "\t", "\n", "%00", "%2F", "\u{0430}", "\u{043E}",
                "\u{0435}", "\u{0441}", "xn--", "-", "evil", "evil.tld", "127.0.0.1", "0x7f.1",
                "2130706433", "[::1]", "[::ffff:127.0.0.1]", "user:pw@", "\u{FF41}", "\u{200B}",
            ]).prop_map(String::from),
        ]
    }

    fn glued_url() -> impl Strategy<Value = (Vec<Entry>, String)> {
        prop::collection::vec(entry(), 1..4).prop_flat_map(|entries| {
            let scheme = prop::sample::select(vec!["https://", "HTTPS://", "http://", "https:"]);
            let tail = prop::sample::select(vec!["/", "", "/x?y#z", "./", ":8443/p"]);
            // Half the hosts end in `<separator><entry>`, so allowed URLs are common too.
            let sep = prop::sample::select(vec!["", ".", ".", "\u{FF0E}", "%2E", "@", ".."]);
            (
                Just(entries.clone()),
                (
                    scheme,
                    prop::collection::vec(piece(entries.clone()), 0..4),
                    sep,
                    piece(entries),
                    tail,
                )
                    .prop_map(|(s, pieces, sep, last, t)| {
                        format!("{s}{}{sep}{last}{t}", pieces.concat())
                    }),
            )
        })
    }

    /// Replaces the `n`th letter that has a Cyrillic twin (`a c e o p x y`) with that twin.
    fn homoglyph(body: &str, n: usize) -> String {
        let twin = |c: char| match c {
            'a' => Some('\u{0430}'),
            'c' => Some('\u{0441}'),
            'e' => Some('\u{0435}'),
            'o' => Some('\u{043E}'),
            'p' => Some('\u{0440}'),
            'x' => Some('\u{0445}'),
            'y' => Some('\u{0443}'),
            _ => None,
        };
        let spots: Vec<usize> = body
            .char_indices()
            .filter(|(_, c)| twin(*c).is_some())
            .map(|(i, _)| i)
            .collect();
        let at = spots[n % spots.len()];
        let c = body[at..].chars().next().unwrap();
        format!(
            "{}{}{}",
            &body[..at],
            twin(c).unwrap(),
            &body[at + c.len_utf8()..]
        )
    }

    /// Look-alikes of a one-entry list's entry, each naming a host that is neither the entry
    /// nor (for a suffix entry) one of its proper subdomains.
    fn look_alikes(e: &Entry, glue: &str, sub: &str, n: usize) -> Vec<String> {
        let b = &e.body;
        // What a legitimate URL would put in the host position: the entry, or a subdomain.
        let h = if e.suffix {
            format!("{sub}.{b}")
        } else {
            b.clone()
        };
        let spoofed = homoglyph(b, n);
        let spoofed_h = if e.suffix {
            format!("{sub}.{spoofed}")
        } else {
            spoofed
        };
        let first_dot = b.find('.').unwrap();
        vec![
            // Prefix glue onto the entry's first label: not on a label boundary.
            format!("https://{glue}{b}/"),
            format!("https://{glue}-{b}/"),
            // Suffix glue.
            format!("https://{h}.evil.tld/"),
            format!("https://{h}{glue}/"),
            format!("https://{h}-{glue}.tld/"),
            // Userinfo: the real host comes after the `@`.
            format!("https://{h}@evil.tld/"),
            format!("https://{h}:443@evil.tld/"),
            format!("https://{glue}:{h}@evil.tld/{h}"),
            // IDNA homoglyphs (Cyrillic letters), raw and already punycoded by the client.
            format!("https://{spoofed_h}/"),
            format!("https://{}/", idna_ascii(&spoofed_h)),
            // Full-width and ideographic dots map to `.`: they cannot hide a suffix.
            format!("https://{h}\u{FF0E}evil\u{FF0E}tld/"),
            format!("https://{h}\u{3002}evil.tld/"),
            // Extra dots: leading, doubled inside, two trailing.
            format!("https://.{b}/"),
            format!("https://{}..{}/", &b[..first_dot], &b[first_dot + 1..]),
            format!("https://{h}../"),
            // Ports: an invalid port does not parse; the host before a valid one is foreign.
            format!("https://{h}:99999/"),
            format!("https://{h}:443.evil.tld/"),
            format!("https://evil.tld:443/{h}"),
            // IP forms of loopback (the list names no IP).
            format!("https://127.0.0.1/{h}"),
            "https://2130706433/".to_string(),
            "https://0x7f.1/".to_string(),
            "https://[::ffff:127.0.0.1]/".to_string(),
            // Backslashes end the host in special URLs.
            format!("https://evil.tld\\@{h}/"),
            format!("https://evil.tld\\{h}/"),
            // Percent-encoding.
            format!("https://{h}%2Eevil.tld/"),
            format!("https://{h}%2Fx@evil.tld/"),
            format!("https://{h}%00/"),
            format!("https://evil%2Etld/{h}"),
            // Whitespace: spaces do not parse; tabs and newlines are removed.
            format!("https://{h} .evil.tld/"),
            format!("https://{h}\t.evil.tld/"),
            format!("https://{h}\n.evil.tld/"),
            format!(" https://evil.tld/{h}"),
            // Another scheme.
            format!("http://{h}/"),
        ]
    }

    /// The ASCII (punycode) form a client would send for a host, via the URL parser.
    fn idna_ascii(host: &str) -> String {
        url::Url::parse(&format!("https://{host}/"))
            .ok()
            .and_then(|u| u.host_str().map(String::from))
            .unwrap_or_else(|| host.to_string())
    }

    proptest! {
        #![proptest_config(proptest_config(256))]

        /// Over URLs glued from the entries and hostile pieces, the engine allows exactly what
        /// the reference reading allows: an allowed URL's host always equals an exact entry
        /// or ends with a suffix entry on a label boundary, and every such URL is allowed.
        #[test]
        fn allowed_hosts_are_exact_entries_or_proper_subdomains((entries, url) in glued_url()) {
            let p = policy_for(&entries);
            prop_assert_eq!(allows(&p, &url), reference_allows(&entries, &url), "{:?} {:?}", url, entries);
        }

        /// Generated look-alikes of a one-entry list never pass, whatever the case of the
        /// entry text in them.
        #[test]
        fn look_alikes_never_pass(
            e in entry(),
            glue in "[a-z0-9]{1,4}",
            sub in label(),
            n in any::<usize>(),
            upper in any::<bool>(),
        ) {
            let p = policy_for(std::slice::from_ref(&e));
            for url in look_alikes(&e, &glue, &sub, n) {
                let url = if upper { url.to_uppercase() } else { url };
                prop_assert!(!allows(&p, &url), "look-alike allowed: {:?} for {:?}", url, e);
            }
        }

        /// The real thing passes however it is spelled: any case, one trailing dot, a port,
        /// userinfo, path, query and fragment.
        #[test]
        fn listed_hosts_pass_in_every_legitimate_spelling(
            e in entry(),
            sub in label(),
            upper in any::<bool>(),
            dot in any::<bool>(),
            port in prop::option::of(1u16..),
            userinfo in prop::option::of("[a-z]{1,5}(:[a-z]{1,5})?"),
            tail in prop::sample::select(vec!["", "/", "/a/b", "/x?u=https://evil.tld/", "#f@evil.tld"]),
        ) {
            let host = if e.suffix { format!("{sub}.{}", e.body) } else { e.body.clone() };
            let host = if upper { host.to_uppercase() } else { host };
            let url = format!(
                "https://{}{host}{}{}{tail}",
                userinfo.map(|u| format!("{u}@")).unwrap_or_default(),
                if dot { "." } else { "" },
                port.map(|p| format!(":{p}")).unwrap_or_default(),
            );
            let p = policy_for(std::slice::from_ref(&e));
            prop_assert!(allows(&p, &url), "{:?} denied for {:?}", url, e);
        }

        /// The coach policy's real list: glued look-alikes of its entries never pass unless
        /// the reference reading says the host is on the list.
        #[test]
        fn coach_vendor_docs_agree_with_the_reference(
            pieces in prop::collection::vec(piece(vec![
                Entry { suffix: false, body: "aws.amazon.com".into() },
                Entry { suffix: true, body: "aws.amazon.com".into() },
                Entry { suffix: false, body: "developers.cloudflare.com".into() },
            ]), 1..6),
        ) {
            let entries = [
                Entry { suffix: false, body: "aws.amazon.com".into() },
                Entry { suffix: true, body: "aws.amazon.com".into() },
                Entry { suffix: false, body: "developers.cloudflare.com".into() },
            ];
            let url = format!("https://{}/", pieces.concat());
            prop_assert_eq!(fetch(json!({ "url": url })), reference_allows(&entries, &url), "{:?}", url);
        }
    }
}
