//! Approval digests: what a person approves when a call asks (`ask when`, a latch's `asks`).
//!
//! A digest binds everything that makes a call this call: the policy module and revision,
//! the policy element that asked (a rule or a latch), the tool, the arguments, and the
//! session and turn when the request names them. An approval (`facts.approvals`) carrying it
//! turns exactly that call into an allow; another argument set, tool, element, turn or
//! revision has another digest.
//!
//! The arguments are hashed in one canonical form, so the executor's key order and number
//! spelling do not matter: a tagged, length-prefixed binary form with object keys sorted by
//! their bytes, an integer (or a float with no fraction below 2^53) as one 128-bit integer,
//! any other number as its 64-bit float. Strings are hashed as given, with no
//! Unicode normalisation: two spellings of one word are two argument sets, so an approval
//! never carries over to text the person did not see. Each field is length-prefixed, so no
//! two subjects share an input.
//!
//! The digest is SHA-256 (`sha2`, which uses the CPU's SHA extensions where there are any)
//! over the input written out once, into the thread's own buffer (kept between digests, so a
//! digest allocates nothing), written `ap1:` and 64 lowercase hex digits. (BLAKE3 was tried:
//! on 1 KB inputs it was slower than SHA-256 with SHA extensions, on this project's CI
//! machines.)
//!
//! Cost (`cargo run --release -p toolgate-engine --example approval_cost`, 1,080 bytes of
//! arguments): 1.15 µs per digest on the CI machine (Xeon with SHA extensions), of which
//! SHA-256 over the 1.1 KB input is about 0.78 µs; the rest is writing the canonical form.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The prefix of every digest: the scheme's version.
pub const PREFIX: &str = "ap1:";
/// A digest's length as text: the prefix and 64 hex digits.
pub const TEXT_LEN: usize = PREFIX.len() + 64;

/// What one approval is for.
pub(crate) struct Subject<'a> {
    pub(crate) module: &'a str,
    pub(crate) revision: &'a str,
    /// The rule or latch that asked.
    pub(crate) element: &'a str,
    pub(crate) tool: &'a str,
    pub(crate) args: &'a Value,
    pub(crate) session: Option<&'a str>,
    pub(crate) turn: Option<&'a str>,
}

/// A digest as bytes.
pub(crate) type Raw = [u8; 32];

impl Subject<'_> {
    /// The subject's digest.
    pub(crate) fn digest(&self) -> Raw {
        // The input is written whole, then hashed in one pass: a few large updates cost far
        // less than one per token. The buffer is the thread's own, kept between digests, so
        // a digest allocates nothing once the thread has written one of its size.
        INPUT.with(|cell| match cell.try_borrow_mut() {
            Ok(mut buf) => {
                let digest = self.digest_in(&mut buf);
                if buf.capacity() > KEPT_BYTES {
                    *buf = Vec::new();
                }
                digest
            }
            // Only a digest computed while another is being written (never today) gets here.
            Err(_) => self.digest_in(&mut Vec::new()),
        })
    }

    fn digest_in(&self, buf: &mut Vec<u8>) -> Raw {
        buf.clear();
        let mut h = Hashing(buf);
        h.update(b"toolgate approval v1\0");
        for field in [self.module, self.revision, self.element, self.tool] {
            h.field(Some(field));
        }
        h.field(self.session);
        h.field(self.turn);
        canonical(&mut h, self.args, maps_sorted());
        Sha256::digest(&h.0[..]).into()
    }
}

/// The most a thread keeps of its digest buffer between digests: arguments larger than this
/// are rare, and a thread that met one once does not hold its size for good.
const KEPT_BYTES: usize = 64 * 1024;

std::thread_local! {
    /// Each thread's digest input buffer (see [`Subject::digest`]).
    static INPUT: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether serde_json's maps iterate in key order in this build: they do unless a crate in
/// the build turns on `preserve_order` (then a map keeps insertion order and
/// [`canonical`] sorts its keys). Asked once, of a map built out of order.
fn maps_sorted() -> bool {
    static SORTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SORTED.get_or_init(|| {
        let mut probe = serde_json::Map::new();
        probe.insert("b".into(), Value::Null);
        probe.insert("a".into(), Value::Null);
        probe.keys().next().is_some_and(|k| k == "a")
    })
}

/// `raw` as text: [`PREFIX`] and 64 lowercase hex digits.
pub(crate) fn text(raw: &Raw) -> String {
    let buf = text_bytes(raw);
    // Only ASCII was written.
    String::from_utf8_lossy(&buf).into_owned()
}

/// Whether `given` (an entry of `facts.approvals`) is the text of `raw`.
pub(crate) fn matches(raw: &Raw, given: &str) -> bool {
    given.as_bytes() == text_bytes(raw)
}

/// Whether `s` has a digest's shape: [`PREFIX`] and 64 lowercase hex digits.
pub fn well_formed(s: &str) -> bool {
    s.len() == TEXT_LEN
        && s.starts_with(PREFIX)
        && s.as_bytes()[PREFIX.len()..]
            .iter()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn text_bytes(raw: &Raw) -> [u8; TEXT_LEN] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; TEXT_LEN];
    out[..PREFIX.len()].copy_from_slice(PREFIX.as_bytes());
    for (i, b) in raw.iter().enumerate() {
        out[PREFIX.len() + 2 * i] = HEX[usize::from(b >> 4)];
        out[PREFIX.len() + 2 * i + 1] = HEX[usize::from(b & 0xf)];
    }
    out
}

/// The hash input being written.
struct Hashing<'b>(&'b mut Vec<u8>);

impl Hashing<'_> {
    #[inline]
    fn update(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    /// A length or count, as LEB128: one byte below 128, and still injective.
    #[inline]
    fn len(&mut self, n: usize) {
        if n < 0x80 {
            // Most lengths: one byte.
            self.0.push(n as u8);
        } else {
            self.long_len(n);
        }
    }

    #[inline(never)]
    fn long_len(&mut self, mut n: usize) {
        let mut buf = [0u8; 10];
        let mut i = 0;
        loop {
            let low = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                buf[i] = low;
                break;
            }
            buf[i] = low | 0x80;
            i += 1;
        }
        self.update(&buf[..=i]);
    }

    /// Bytes, length-prefixed.
    #[inline]
    fn bytes(&mut self, b: &[u8]) {
        self.len(b.len());
        self.update(b);
    }

    /// A string field, length-prefixed; absent is distinct from every string.
    fn field(&mut self, s: Option<&str>) {
        match s {
            None => self.update(&[0u8]),
            Some(s) => {
                self.update(&[1u8]);
                self.update(&(s.len() as u64).to_be_bytes());
                self.update(s.as_bytes());
            }
        }
    }
}

/// Below this, every integer is exactly a float, so `100` and `100.0` and `1e2` are one
/// number.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// Writes `v` in the canonical form: a tag byte per value, then, for a number, 16 bytes
/// (an integer) or 8 (any other float's bits); for a string or key, its length and bytes;
/// for an array or object, its length and its items (an object's sorted by key bytes).
/// Binary and length-prefixed, so no two values share an encoding and nothing is escaped or
/// formatted: the bytes of the arguments are copied once.
fn canonical(h: &mut Hashing<'_>, v: &Value, sorted: bool) {
    match v {
        Value::Null => h.update(b"n"),
        Value::Bool(true) => h.update(b"t"),
        Value::Bool(false) => h.update(b"f"),
        Value::Number(n) => {
            // Asked lazily, in this order: most numbers are unsigned integers.
            let exact = if let Some(u) = n.as_u64() {
                Some(i128::from(u))
            } else if let Some(i) = n.as_i64() {
                Some(i128::from(i))
            } else {
                match n.as_f64() {
                    // Exact: the guard bounds it well inside i64.
                    Some(f) if f.fract() == 0.0 && f.abs() < EXACT => Some(f as i64 as i128),
                    _ => None,
                }
            };
            match (exact, n.as_f64()) {
                (Some(i), _) => {
                    h.update(b"i");
                    h.update(&i.to_be_bytes());
                }
                (None, Some(f)) => {
                    h.update(b"d");
                    h.update(&f.to_bits().to_be_bytes());
                }
                (None, None) => h.update(b"?"),
            }
        }
        Value::String(s) => {
            h.update(b"s");
            h.bytes(s.as_bytes());
        }
        Value::Array(items) => {
            h.update(b"a");
            h.len(items.len());
            for item in items {
                canonical(h, item, sorted);
            }
        }
        Value::Object(map) => {
            h.update(b"o");
            h.len(map.len());
            // `sorted`: serde_json's map iterates in key order in this build
            // ([`maps_sorted`]); else (`preserve_order`) the keys are sorted here.
            if sorted {
                for (k, v) in map {
                    h.bytes(k.as_bytes());
                    canonical(h, v, sorted);
                }
            } else {
                let mut by_key: Vec<(&String, &Value)> = map.iter().collect();
                by_key.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                for (k, v) in by_key {
                    h.bytes(k.as_bytes());
                    canonical(h, v, sorted);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn subject(args: &Value) -> Subject<'_> {
        Subject {
            module: "m",
            revision: "r",
            element: "refunds",
            tool: "refund",
            args,
            session: Some("s"),
            turn: Some("t"),
        }
    }

    fn of(args: Value) -> Raw {
        subject(&args).digest()
    }

    #[test]
    fn key_order_and_number_spelling_do_not_matter() {
        let a: Value =
            serde_json::from_str(r#"{"amount": 100, "to": {"b": 1, "a": [1.5, 2]}}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{"to": {"a": [15e-1, 2.0], "b": 1e0}, "amount": 1e2}"#)
                .unwrap();
        assert_eq!(of(a), of(b));
    }

    #[test]
    fn every_bound_part_changes_the_digest() {
        let args = json!({"amount": 100});
        let base = subject(&args);
        let d = base.digest();
        let other = json!({"amount": 101});
        for changed in [
            Subject {
                module: "n",
                ..base
            },
            Subject {
                revision: "r2",
                ..base
            },
            Subject {
                element: "other",
                ..base
            },
            Subject {
                tool: "refund2",
                ..base
            },
            Subject {
                args: &other,
                ..base
            },
            Subject {
                session: None,
                ..base
            },
            Subject {
                turn: Some("t2"),
                ..base
            },
            Subject { turn: None, ..base },
        ] {
            assert_ne!(changed.digest(), d);
        }
        // Length prefixes: moving a byte between two fields is another subject.
        assert_ne!(
            Subject {
                module: "ab",
                revision: "c",
                ..base
            }
            .digest(),
            Subject {
                module: "a",
                revision: "bc",
                ..base
            }
            .digest()
        );
    }

    #[test]
    fn distinct_values_stay_distinct() {
        let pairs = [
            (json!({"a": "café"}), json!({"a": "cafe\u{301}"})),
            (
                json!({"a": 9_007_199_254_740_993u64}),
                json!({"a": 9_007_199_254_740_992u64}),
            ),
            (json!({"a": 1}), json!({"a": "1"})),
            (json!({"a": [1, 2]}), json!({"a": [2, 1]})),
            (json!({"a": null}), json!({})),
            (json!({"a": 0.1}), json!({"a": 0.10000000000000002})),
        ];
        for (x, y) in pairs {
            assert_ne!(of(x.clone()), of(y.clone()), "{x} vs {y}");
        }
        let many: serde_json::Map<String, Value> =
            (0..40).map(|i| (format!("k{i}"), json!(i))).collect();
        let mut reversed = serde_json::Map::new();
        for (k, v) in many.iter().rev() {
            reversed.insert(k.clone(), v.clone());
        }
        assert_eq!(of(Value::Object(many)), of(Value::Object(reversed)));
    }

    #[test]
    fn the_text_form_round_trips_and_is_checked() {
        let d = of(json!({}));
        let t = text(&d);
        assert!(well_formed(&t), "{t}");
        assert!(matches(&d, &t));
        assert!(!matches(&d, &t.to_uppercase()));
        assert!(!well_formed("ap1:00"));
        assert!(!well_formed(&t.replace("ap1:", "ap2:")));
    }
}
