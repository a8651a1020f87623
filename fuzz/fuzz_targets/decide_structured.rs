//! Structured requests: the fuzzer's bytes choose a request shape (via `arbitrary`) that is
//! mostly right, with wrong types, deep nesting (past serde_json's recursion limit), huge
//! numbers, long strings and unknown keys put where they hurt. The JSON text goes through
//! `decide_json` of each example policy; the response must keep every invariant, or the error
//! must say something.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use std::fmt::Write;
use toolgate_engine::Request;
use toolgate_fuzz::{check_order_independent, check_outcome, check_response, example_policies};

/// Words the example policies care about, so shapes reach the rules.
const WORDS: &[&str] = &[
    "coach",
    "chat",
    "intake_claim",
    "ncd_policy_faq",
    "tier_auto_payout",
    "tier_adjuster_review",
    "nowhere",
    "update_memory",
    "grade_attempt",
    "search_aws_docs",
    "fetch_vendor_doc",
    "get_learner_state",
    "authorise_bacs_payout",
    "update_claim_notes",
    "query_policy_handbook_rag",
    "lookup_policy_faq",
    "confirm_payment",
    "issue_invoice",
    "book_slot",
    "modify_booking",
    "verify_identity",
    "notify_owner",
    "https://docs.aws.amazon.com/lambda/",
    "https://docs.aws.amazon.com.evil.tld/",
    "https://aws.amazon.com@evil.tld/",
    "https://\u{0430}ws.amazon.com/",
    "https://developers.cloudflare.com./",
    "POL-123456",
    "client",
    "assistant",
    "image",
    "document",
    "phone",
    "documentation_read",
    "untrusted_content",
    "motor_claims",
    "messenger_payments",
    "",
    "\u{0}",
    "\u{FFFF}",
    "\u{1F600}",
];

const KEYS: &[&str] = &[
    "facts",
    "calls",
    "policy",
    "session",
    "turn",
    "stage",
    "stage_turns",
    "latched",
    "messages",
    "fields",
    "called",
    "from",
    "media",
    "tool",
    "ok",
    "id",
    "args",
    "url",
    "amount",
    "policy",
    "phone",
];

#[derive(Arbitrary, Debug)]
enum Text {
    Word(u8),
    Long { word: u8, times: u16 },
    Raw(String),
}

#[derive(Arbitrary, Debug)]
enum Key {
    Known(u8),
    Raw(String),
}

#[derive(Arbitrary, Debug)]
struct HugeNumber {
    negative: bool,
    digits: u16,
    fraction: Option<u8>,
    exponent: Option<i32>,
}

#[derive(Arbitrary, Debug)]
enum Json {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Huge(HugeNumber),
    Str(Text),
    Arr(Vec<Json>),
    Obj(Vec<(Key, Json)>),
    /// `depth` nested arrays (or objects) around `inner`.
    Deep {
        depth: u16,
        objects: bool,
        inner: Box<Json>,
    },
}

/// A field that is mostly the right shape, sometimes a wrong one, sometimes absent.
#[derive(Arbitrary, Debug)]
enum Field<T> {
    Right(T),
    Wrong(Json),
    Absent,
}

#[derive(Arbitrary, Debug)]
enum Latched {
    Flag(bool),
    ByName(Vec<(Key, Field<bool>)>),
}

#[derive(Arbitrary, Debug)]
struct Message {
    from: Field<Text>,
    media: Field<Vec<Field<Text>>>,
}

#[derive(Arbitrary, Debug)]
struct Called {
    tool: Field<Text>,
    ok: Field<bool>,
}

#[derive(Arbitrary, Debug)]
enum Turns {
    Small(u8),
    Any(u64),
    Huge(HugeNumber),
}

#[derive(Arbitrary, Debug)]
struct Facts {
    stage: Field<Text>,
    stage_turns: Field<Turns>,
    latched: Field<Latched>,
    messages: Field<Vec<Message>>,
    fields: Field<Vec<(Key, Json)>>,
    called: Field<Vec<Called>>,
    other: Vec<(Key, Json)>,
}

#[derive(Arbitrary, Debug)]
struct Call {
    id: Field<Text>,
    tool: Field<Text>,
    args: Field<Vec<(Key, Json)>>,
    extra: Option<(Key, Json)>,
}

#[derive(Arbitrary, Debug)]
struct Req {
    facts: Field<Facts>,
    calls: Field<Vec<Call>>,
    policy: Field<Text>,
    extra: Option<(Key, Json)>,
}

/// Writes JSON text. Writing to a `String` cannot fail, so `write!` results are ignored.
struct Out(String);

impl Out {
    fn str(&mut self, s: &str) {
        self.0.push_str(&serde_json::Value::from(s).to_string());
    }

    fn text(&mut self, t: &Text) {
        match t {
            Text::Word(i) => self.str(WORDS[*i as usize % WORDS.len()]),
            Text::Long { word, times } => {
                let w = WORDS[*word as usize % WORDS.len()];
                let w = if w.is_empty() { "x" } else { w };
                self.str(&w.repeat(*times as usize % 20_000));
            }
            Text::Raw(s) => self.str(s),
        }
    }

    fn key(&mut self, k: &Key) {
        match k {
            Key::Known(i) => self.str(KEYS[*i as usize % KEYS.len()]),
            Key::Raw(s) => self.str(s),
        }
    }

    fn huge(&mut self, h: &HugeNumber) {
        if h.negative {
            self.0.push('-');
        }
        let n = 1 + h.digits as usize % 4096;
        self.0.push('9');
        self.0.push_str(&"0".repeat(n - 1));
        if let Some(f) = h.fraction {
            let _ = write!(self.0, ".{f}");
        }
        if let Some(e) = h.exponent {
            let _ = write!(self.0, "e{e}");
        }
    }

    fn json(&mut self, j: &Json) {
        match j {
            Json::Null => self.0.push_str("null"),
            Json::Bool(b) => {
                let _ = write!(self.0, "{b}");
            }
            Json::Int(i) => {
                let _ = write!(self.0, "{i}");
            }
            Json::UInt(u) => {
                let _ = write!(self.0, "{u}");
            }
            Json::Float(f) => {
                if f.is_finite() {
                    let _ = write!(self.0, "{f:e}");
                } else {
                    self.0.push_str("1e999");
                }
            }
            Json::Huge(h) => self.huge(h),
            Json::Str(t) => self.text(t),
            Json::Arr(items) => self.list(items, |o, j| o.json(j)),
            Json::Obj(entries) => self.object(entries),
            Json::Deep {
                depth,
                objects,
                inner,
            } => {
                let n = *depth as usize % 5_000;
                for _ in 0..n {
                    self.0.push_str(if *objects { "{\"a\":" } else { "[" });
                }
                self.json(inner);
                for _ in 0..n {
                    self.0.push(if *objects { '}' } else { ']' });
                }
            }
        }
    }

    fn list<T>(&mut self, items: &[T], mut each: impl FnMut(&mut Self, &T)) {
        self.0.push('[');
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.0.push(',');
            }
            each(self, item);
        }
        self.0.push(']');
    }

    fn object(&mut self, entries: &[(Key, Json)]) {
        self.0.push('{');
        for (i, (k, v)) in entries.iter().enumerate() {
            if i > 0 {
                self.0.push(',');
            }
            self.key(k);
            self.0.push(':');
            self.json(v);
        }
        self.0.push('}');
    }

    /// Writes `"name": value` for a present field, preceded by a comma unless first.
    fn field<T>(
        &mut self,
        first: &mut bool,
        name: &str,
        f: &Field<T>,
        right: impl FnOnce(&mut Self, &T),
    ) {
        if matches!(f, Field::Absent) {
            return;
        }
        if !*first {
            self.0.push(',');
        }
        *first = false;
        self.str(name);
        self.0.push(':');
        match f {
            Field::Right(v) => right(self, v),
            Field::Wrong(j) => self.json(j),
            Field::Absent => {}
        }
    }

    fn extra(&mut self, first: &mut bool, extra: &[(Key, Json)]) {
        for (k, v) in extra {
            if !*first {
                self.0.push(',');
            }
            *first = false;
            self.key(k);
            self.0.push(':');
            self.json(v);
        }
    }

    fn facts(&mut self, f: &Facts) {
        self.0.push('{');
        let mut first = true;
        self.extra(&mut first, &f.other);
        self.field(&mut first, "stage", &f.stage, |o, t| o.text(t));
        self.field(&mut first, "stage_turns", &f.stage_turns, |o, t| match t {
            Turns::Small(n) => {
                let _ = write!(o.0, "{n}");
            }
            Turns::Any(n) => {
                let _ = write!(o.0, "{n}");
            }
            Turns::Huge(h) => o.huge(h),
        });
        self.field(&mut first, "latched", &f.latched, |o, l| match l {
            Latched::Flag(b) => {
                let _ = write!(o.0, "{b}");
            }
            Latched::ByName(m) => {
                o.0.push('{');
                let mut first = true;
                for (k, v) in m {
                    if matches!(v, Field::Absent) {
                        continue;
                    }
                    if !first {
                        o.0.push(',');
                    }
                    first = false;
                    o.key(k);
                    o.0.push(':');
                    match v {
                        Field::Right(b) => {
                            let _ = write!(o.0, "{b}");
                        }
                        Field::Wrong(j) => o.json(j),
                        Field::Absent => {}
                    }
                }
                o.0.push('}');
            }
        });
        self.field(&mut first, "messages", &f.messages, |o, ms| {
            o.list(ms, |o, m| {
                o.0.push('{');
                let mut first = true;
                o.field(&mut first, "from", &m.from, |o, t| o.text(t));
                o.field(&mut first, "media", &m.media, |o, media| {
                    o.list(media, |o, item| match item {
                        Field::Right(t) => o.text(t),
                        Field::Wrong(j) => o.json(j),
                        Field::Absent => o.0.push_str("null"),
                    })
                });
                o.0.push('}');
            })
        });
        self.field(&mut first, "fields", &f.fields, |o, e| o.object(e));
        self.field(&mut first, "called", &f.called, |o, cs| {
            o.list(cs, |o, c| {
                o.0.push('{');
                let mut first = true;
                o.field(&mut first, "tool", &c.tool, |o, t| o.text(t));
                o.field(&mut first, "ok", &c.ok, |o, b| {
                    let _ = write!(o.0, "{b}");
                });
                o.0.push('}');
            })
        });
        self.0.push('}');
    }

    fn call(&mut self, c: &Call) {
        self.0.push('{');
        let mut first = true;
        self.field(&mut first, "id", &c.id, |o, t| o.text(t));
        self.field(&mut first, "tool", &c.tool, |o, t| o.text(t));
        self.field(&mut first, "args", &c.args, |o, e| o.object(e));
        if let Some(extra) = &c.extra {
            self.extra(&mut first, std::slice::from_ref(extra));
        }
        self.0.push('}');
    }

    fn request(&mut self, r: &Req) {
        self.0.push('{');
        let mut first = true;
        self.field(&mut first, "facts", &r.facts, |o, f| o.facts(f));
        self.field(&mut first, "calls", &r.calls, |o, cs| {
            o.list(cs, |o, c| o.call(c))
        });
        self.field(&mut first, "policy", &r.policy, |o, t| o.text(t));
        if let Some(extra) = &r.extra {
            self.extra(&mut first, std::slice::from_ref(extra));
        }
        self.0.push('}');
    }
}

fuzz_target!(|req: Req| {
    let mut out = Out(String::new());
    out.request(&req);
    let text = out.0;
    let request = Request::from_json(&text).ok();
    for policy in example_policies() {
        let outcome = policy.decide_json(&text);
        check_outcome(policy, &outcome);
        match (&request, &outcome) {
            (Some(req), Ok(r)) => {
                check_response(policy, req, r);
                check_order_independent(policy, req, r);
            }
            (None, Ok(_)) => panic!("decide_json accepted what from_json rejected"),
            (Some(req), Err(_)) => assert!(policy.check_request(req).is_err()),
            (None, Err(_)) => {}
        }
    }
});
