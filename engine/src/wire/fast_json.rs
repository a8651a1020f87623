//! The one-pass, zero-copy JSON reader behind [`crate::Policy::decide_json`].
//!
//! It reads a request straight into the borrowed [`RequestView`]: strings without escapes
//! stay slices of the input, message texts are checked for syntax and skipped, and custom
//! facts no rule reads are skipped the same way. Everything a policy can read is checked
//! exactly as [`crate::Request::from_json`] checks it, and every object of the schema is
//! closed as it is there: a key outside [`crate::wire::schema`]'s lists for that object refuses the
//! request (matched against the constants, so refusing allocates nothing). Only `facts`
//! stays open, for custom facts.
//!
//! It never explains a failure: on any error the caller reads the text again with the strict
//! reader, whose messages carry the line, column or field path. So this module only has to
//! accept exactly the valid requests, never to describe the invalid ones.

use crate::wire::request::repeated_id;
use crate::wire::schema as key;
use crate::wire::strict_json::ValueSeed;
use crate::wire::view::{
    from_client, CallView, CalledView, FactsView, LatchedView, MessageTable, RequestView,
};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt;

/// Reads `text` as a request, keeping the custom facts named in `custom`. `None` when the
/// text is not a valid request (the strict reader then says why).
pub(crate) fn parse<'a>(text: &'a str, custom: &[Box<str>]) -> Option<RequestView<'a>> {
    let mut de = serde_json::Deserializer::from_str(text);
    let view = RequestSeed { custom }.deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(view)
}

fn invalid<E: de::Error>() -> E {
    E::custom("not a valid request")
}

/// A value read for its syntax only. Unlike serde's `IgnoredAny` it goes through
/// `deserialize_any`, so serde_json's nesting limit applies to skipped values exactly as it
/// does in the strict reader (found by the `decide_structured` fuzz target: a fact nested
/// 65,535 deep was skipped here and refused there).
struct Skip;

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct SkipVisitor;
        impl<'de> Visitor<'de> for SkipVisitor {
            type Value = Skip;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Skip, E> {
                Ok(Skip)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
                while seq.next_element::<Skip>()?.is_some() {}
                Ok(Skip)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
                let mut seen = SeenKeys::default();
                while next_key(&mut map, &mut seen)?.is_some() {
                    map.next_value::<Skip>()?;
                }
                Ok(Skip)
            }
        }
        d.deserialize_any(SkipVisitor)
    }
}

/// A string, borrowed from the input when it has no escapes.
struct Str<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Str<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl<'de> Visitor<'de> for StrVisitor {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(StrVisitor)
    }
}

struct RequestSeed<'c> {
    custom: &'c [Box<str>],
}

impl<'de> DeserializeSeed<'de> for RequestSeed<'_> {
    type Value = RequestView<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RequestSeed<'_> {
    type Value = RequestView<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a request object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut view = RequestView::default();
        let mut calls = None;
        let mut seen = SeenKeys::default();
        while let Some(key) = next_key(&mut map, &mut seen)? {
            match &*key.0 {
                key::FACTS => {
                    view.facts = map.next_value_seed(FactsSeed {
                        custom: self.custom,
                    })?
                }
                key::CALLS => calls = Some(map.next_value::<Calls<'de>>()?.0),
                key::POLICY => view.policy = map.next_value::<Option<Str<'de>>>()?.map(|s| s.0),
                key::SESSION => view.session = map.next_value::<Option<Str<'de>>>()?.map(|s| s.0),
                key::TURN => view.turn = map.next_value::<Option<Str<'de>>>()?.map(|s| s.0),
                _ => return Err(invalid()),
            }
        }
        view.calls = calls.ok_or_else(invalid)?;
        let calls = &view.calls;
        if repeated_id(calls.len(), |i| &calls[i].id).is_some() {
            return Err(invalid());
        }
        Ok(view)
    }
}

struct FactsSeed<'c> {
    custom: &'c [Box<str>],
}

impl<'de> DeserializeSeed<'de> for FactsSeed<'_> {
    type Value = FactsView<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FactsSeed<'_> {
    type Value = FactsView<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a facts object or null")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(FactsView::default())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut facts = FactsView::default();
        let mut seen = SeenKeys::default();
        while let Some(key) = next_key(&mut map, &mut seen)? {
            match &*key.0 {
                key::STAGE => facts.stage = map.next_value::<Option<Str<'de>>>()?.map(|s| s.0),
                key::STAGE_TURNS => facts.stage_turns = map.next_value::<Option<u64>>()?,
                key::LATCHED => facts.latched = map.next_value::<Latched<'de>>()?.0,
                key::MESSAGES => {
                    facts.messages = map.next_value::<Option<Messages<'de>>>()?.map(|m| m.0)
                }
                key::FIELDS => {
                    facts.fields = match map.next_value_seed(ValueSeed::unexplained())? {
                        Value::Null => None,
                        Value::Object(fields) => Some(fields),
                        _ => return Err(invalid()),
                    }
                }
                key::CALLED => facts.called = map.next_value::<Option<Called<'de>>>()?.map(|c| c.0),
                key::APPROVALS => {
                    let given = map.next_value::<Option<Vec<Str<'de>>>>()?;
                    let given: Option<Vec<_>> = given.map(|v| v.into_iter().map(|s| s.0).collect());
                    // A malformed entry: the strict reader says which, with its path.
                    if given
                        .iter()
                        .flatten()
                        .any(|a| !crate::approval::well_formed(a))
                    {
                        return Err(invalid());
                    }
                    facts.approvals = given;
                }
                key::SPENT => {
                    facts.spent = map.next_value::<Option<Spent<'de>>>()?.map(|s| s.0);
                    // A negative or non-finite count: the strict reader says which.
                    if facts
                        .spent
                        .iter()
                        .flatten()
                        .any(|(_, n)| !crate::budget::valid_count(*n))
                    {
                        return Err(invalid());
                    }
                }
                key::PRINCIPAL => {
                    facts.principal = match map.next_value_seed(ValueSeed::unexplained())? {
                        Value::Null => None,
                        // A malformed principal: the strict reader says where.
                        v if crate::wire::principal::check(&v).is_err() => return Err(invalid()),
                        v => Some(v),
                    }
                }
                key::PROMPT => facts.prompt = map.next_value::<Option<Str<'de>>>()?.map(|s| s.0),
                key::OUTPUTS => {
                    facts.outputs = match map.next_value_seed(ValueSeed::unexplained())? {
                        Value::Null => None,
                        // A malformed list: the strict reader says where.
                        v if crate::wire::outputs::check_outputs(&v).is_err() => {
                            return Err(invalid())
                        }
                        v => Some(v),
                    }
                }
                name if self.custom.iter().any(|k| **k == *name) => {
                    let value = map.next_value_seed(ValueSeed::unexplained())?;
                    facts.other.push((key.0, value));
                }
                // A skipped key named like a standard fact is a misspelling: the strict
                // reader's check says so with its path (`Policy::check_facts`).
                name if crate::wire::schema::near_standard_fact(name).is_some() => {
                    return Err(invalid())
                }
                _ => {
                    map.next_value::<Skip>()?;
                }
            }
        }
        Ok(facts)
    }
}

/// `latched`: null, a bool, or an object of bools.
struct Latched<'a>(LatchedView<'a>);

impl<'de> Deserialize<'de> for Latched<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct LatchedVisitor;
        impl<'de> Visitor<'de> for LatchedVisitor {
            type Value = Latched<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a bool or an object of bools")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(Latched(LatchedView::Flag(false)))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Latched(LatchedView::Flag(v)))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut flags = Vec::new();
                let mut seen = SeenKeys::default();
                while let Some(k) = next_key(&mut map, &mut seen)? {
                    flags.push((k.0, map.next_value::<bool>()?));
                }
                Ok(Latched(LatchedView::ByName(flags)))
            }
        }
        d.deserialize_any(LatchedVisitor)
    }
}

/// `spent`: an object of budget names and numbers (each checked by the caller).
struct Spent<'a>(Vec<(Cow<'a, str>, f64)>);

impl<'de> Deserialize<'de> for Spent<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct SpentVisitor;
        impl<'de> Visitor<'de> for SpentVisitor {
            type Value = Spent<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of budget names and numbers")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut counts = Vec::new();
                let mut seen = SeenKeys::default();
                while let Some(k) = next_key(&mut map, &mut seen)? {
                    counts.push((k.0, map.next_value::<f64>()?));
                }
                Ok(Spent(counts))
            }
        }
        d.deserialize_map(SpentVisitor)
    }
}

/// `messages`: an array of `{from, media?, text?}` objects.
struct Messages<'a>(MessageTable<'a>);

impl<'de> Deserialize<'de> for Messages<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct MessagesVisitor;
        impl<'de> Visitor<'de> for MessagesVisitor {
            type Value = Messages<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of messages")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut table = MessageTable::default();
                table.rows.reserve(seq.size_hint().unwrap_or(32));
                while seq
                    .next_element_seed(MessageSeed { table: &mut table })?
                    .is_some()
                {}
                Ok(Messages(table))
            }
        }
        d.deserialize_seq(MessagesVisitor)
    }
}

struct MessageSeed<'t, 'a> {
    table: &'t mut MessageTable<'a>,
}

impl<'de> DeserializeSeed<'de> for MessageSeed<'_, 'de> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MessageSeed<'_, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a message object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let start = self.table.kinds.len();
        let mut client = None;
        let mut seen = SeenKeys::default();
        while let Some(key) = next_key(&mut map, &mut seen)? {
            match &*key.0 {
                key::FROM => client = Some(from_client(&map.next_value::<Str<'de>>()?.0)),
                key::MEDIA => {
                    map.next_value_seed(MediaSeed {
                        kinds: &mut self.table.kinds,
                    })?;
                }
                key::TEXT => {
                    map.next_value::<Skip>()?;
                }
                _ => return Err(invalid()),
            }
        }
        let client = client.ok_or_else(invalid)?;
        let start = u32::try_from(start).map_err(|_| invalid())?;
        let end = u32::try_from(self.table.kinds.len()).map_err(|_| invalid())?;
        self.table.rows.push((client, start, end));
        Ok(())
    }
}

struct MediaSeed<'t, 'a> {
    kinds: &'t mut Vec<Cow<'a, str>>,
}

impl<'de> DeserializeSeed<'de> for MediaSeed<'_, 'de> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for MediaSeed<'_, 'de> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of media kinds or null")
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(kind) = seq.next_element::<Str<'de>>()? {
            self.kinds.push(kind.0);
        }
        Ok(())
    }
}

/// `called`: an array of `{tool, ok?, turns_ago?}` objects.
struct Called<'a>(Vec<CalledView<'a>>);

impl<'de> Deserialize<'de> for Called<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct CalledVisitor;
        impl<'de> Visitor<'de> for CalledVisitor {
            type Value = Called<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of earlier calls")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = seq.next_element::<CalledView<'de>>()? {
                    out.push(entry);
                }
                Ok(Called(out))
            }
        }
        d.deserialize_seq(CalledVisitor)
    }
}

impl<'de> Deserialize<'de> for CalledView<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct EntryVisitor;
        impl<'de> Visitor<'de> for EntryVisitor {
            type Value = CalledView<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an earlier call object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let (mut tool, mut ok, mut turns_ago) = (None, false, None);
                let mut seen = SeenKeys::default();
                while let Some(key) = next_key(&mut map, &mut seen)? {
                    match &*key.0 {
                        key::TOOL => tool = Some(map.next_value::<Str<'de>>()?.0),
                        key::OK => ok = map.next_value::<Option<bool>>()?.unwrap_or(false),
                        key::TURNS_AGO => turns_ago = map.next_value::<Option<u64>>()?,
                        _ => return Err(invalid()),
                    }
                }
                Ok(CalledView {
                    tool: tool.ok_or_else(invalid)?,
                    ok,
                    turns_ago,
                })
            }
        }
        d.deserialize_map(EntryVisitor)
    }
}

/// `calls`: an array of `{id, tool, args?}` objects.
struct Calls<'a>(Vec<CallView<'a>>);

impl<'de> Deserialize<'de> for Calls<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct CallsVisitor;
        impl<'de> Visitor<'de> for CallsVisitor {
            type Value = Calls<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of calls")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(8));
                while let Some(call) = seq.next_element::<CallEntry<'de>>()? {
                    out.push(call.0);
                }
                Ok(Calls(out))
            }
        }
        d.deserialize_seq(CallsVisitor)
    }
}

struct CallEntry<'a>(CallView<'a>);

impl<'de> Deserialize<'de> for CallEntry<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct CallVisitor;
        impl<'de> Visitor<'de> for CallVisitor {
            type Value = CallEntry<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a call object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let (mut id, mut tool, mut args) = (None, None, Value::Object(Map::new()));
                let mut seen = SeenKeys::default();
                while let Some(key) = next_key(&mut map, &mut seen)? {
                    match &*key.0 {
                        key::ID => id = Some(map.next_value::<Str<'de>>()?.0),
                        key::TOOL => tool = Some(map.next_value::<Str<'de>>()?.0),
                        key::ARGS => {
                            args = match map.next_value_seed(ValueSeed::unexplained())? {
                                Value::Null => Value::Object(Map::new()),
                                v @ Value::Object(_) => v,
                                _ => return Err(invalid()),
                            }
                        }
                        _ => return Err(invalid()),
                    }
                }
                Ok(CallEntry(CallView {
                    id: id.ok_or_else(invalid)?,
                    tool: tool.ok_or_else(invalid)?,
                    args,
                }))
            }
        }
        d.deserialize_map(CallVisitor)
    }
}

/// The keys of one object read so far, as hashes of their decoded text: a key seen twice
/// makes the request invalid here, and the strict reader then reports the duplicate exactly.
/// A hash collision only sends a valid request to the strict reader, which accepts it. The
/// first few keys sit on the stack; objects with more use a hash set, so a hostile object
/// with many keys costs linear time.
#[derive(Default)]
struct SeenKeys {
    inline: [u64; 8],
    len: usize,
    spill: rustc_hash::FxHashSet<u64>,
}

impl SeenKeys {
    /// True the first time `key` is offered.
    fn first(&mut self, key: &str) -> bool {
        use std::hash::Hasher;
        let mut hasher = rustc_hash::FxHasher::default();
        hasher.write(key.as_bytes());
        let hash = hasher.finish();
        let inline = &mut self.inline[..self.len.min(8)];
        if inline.contains(&hash) {
            return false;
        }
        if self.len < 8 {
            self.inline[self.len] = hash;
        } else if !self.spill.insert(hash) {
            return false;
        }
        self.len += 1;
        true
    }
}

/// The next key of an object, refusing one already seen in it.
fn next_key<'de, A: MapAccess<'de>>(
    map: &mut A,
    seen: &mut SeenKeys,
) -> Result<Option<Str<'de>>, A::Error> {
    match map.next_key::<Str<'de>>()? {
        Some(key) if !seen.first(&key.0) => Err(invalid()),
        key => Ok(key),
    }
}
