//! Where argument values came from: an index of one turn's tool outputs.
//!
//! The executor sends the outputs of the turn's earlier calls (`facts.outputs`) and the
//! user's message (`facts.prompt`). Every string leaf of an output, and every URL, address,
//! IBAN and long number inside one ([`tokens`]), is indexed under its key ([`key`]), labelled
//! by the tool's class:
//!
//! | the output of | is |
//! | --- | --- |
//! | a `read` tool | trusted: a value in it is the system's own |
//! | an `ingest` tool, or a tool the policy does not classify | untrusted, except its metadata keys |
//! | a `write` or `egress` tool | not indexed: it mostly echoes the call's own arguments |
//!
//! A value is *from ingest* when its key is in some untrusted output, and neither in trusted
//! output nor in the prompt. The index is built once per request, on the first provenance
//! test the judge evaluates, so a policy without such tests never pays for it.
//!
//! Cost (issue 25: at most 1 µs per KB to index, 1 µs per argument to check), measured with
//! `cargo run --release -p toolgate-engine --example provenance_cost` on a 100 KB inbox:
//! indexing 0.93–0.95 µs per KB (4.55 before the scanner of [`tokens`], the key map [`Keys`]
//! and its room reserved up front), a check about 150 ns per argument (430 before).

mod check;
pub(crate) mod key;
mod tokens;

pub(crate) use check::{
    first_hit, from_ingest, from_prompt, mentions_ingest, mentions_prompt, tainted,
};

use serde_json::Value;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

/// The keys of an ingest tool's output treated as metadata when the policy declares none for
/// the tool (`provenance for TOOL { metadata [..] }` replaces them).
pub(crate) const DEFAULT_METADATA: &[&str] = &[
    "id",
    "ids",
    "timestamp",
    "date",
    "time",
    "created_at",
    "updated_at",
];

/// How a tool's output is indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Trust {
    /// `read`: its values are trusted.
    Trusted,
    /// `ingest` or unclassified: its values are untrusted, except under metadata keys.
    Untrusted,
    /// `write`/`egress`: not indexed.
    Skip,
}

/// Where an untrusted value was first seen: the output (its index in `facts.outputs`) and
/// the leaf (its position among that output's scalar leaves, depth first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Origin {
    pub(crate) output: u32,
    pub(crate) leaf: u32,
}

/// What the index says of one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Taint {
    /// Not seen in untrusted output, or also in the prompt or trusted output.
    Clean,
    /// Seen first here, in untrusted output only.
    From(Origin),
    /// The turn's outputs are over [`crate::MAX_INDEXED_BYTES`]: every value counts as
    /// untrusted.
    OverCap,
    /// The request carries no `facts.outputs`: nothing can be said.
    Absent,
}

#[derive(Debug, Clone, Copy, Default)]
struct Seen {
    trusted: bool,
    first_untrusted: Option<Origin>,
}

#[derive(Debug)]
enum Outputs {
    Absent,
    OverCap,
    /// Boxed: a request judged without provenance tests moves an unbuilt index around, so it
    /// stays as small as it was with one plain map.
    Indexed(Box<Keys>),
}

/// The indexed keys and what was seen of each.
///
/// Output text is written by whoever the agent read, so the map must not let crafted keys
/// collide into quadratic time, yet hashing every byte with SipHash cost a third of the build.
/// So each key's text is hashed once with FxHash (fast, but its collisions can be computed
/// offline), and that 64-bit hash is the key of a map with std's randomly keyed SipHash: an
/// attacker who makes many texts share one FxHash sends all but the first to `collided`, a
/// map keyed by their text with SipHash, where they cost what every key cost before. Growing
/// `by_hash` rehashes 8 bytes a key, never the text. The texts of `by_hash` sit one after
/// another in `text`, so a key costs no allocation of its own.
#[derive(Debug, Default)]
struct Keys {
    text: String,
    by_hash: HashMap<u64, Slot, Mix>,
    collided: HashMap<Box<str>, Seen>,
}

/// Where [`Keys::by_hash`] puts a 64-bit hash: a folded multiply with two random keys, the
/// mixing aHash and foldhash rely on against crafted inputs, at a fraction of SipHash's cost.
/// The keys come from std's `RandomState`, fresh for each index.
#[derive(Debug, Clone)]
struct Mix {
    k0: u64,
    k1: u64,
}

impl Default for Mix {
    fn default() -> Self {
        use std::hash::BuildHasher;
        let random = std::collections::hash_map::RandomState::new();
        Mix {
            k0: random.hash_one(0u8),
            k1: random.hash_one(1u8) | 1,
        }
    }
}

impl std::hash::BuildHasher for Mix {
    type Hasher = Mixer;

    fn build_hasher(&self) -> Mixer {
        Mixer {
            keys: (self.k0, self.k1),
            hash: 0,
        }
    }
}

/// The hasher of [`Mix`]: it takes one `u64`.
struct Mixer {
    keys: (u64, u64),
    hash: u64,
}

impl std::hash::Hasher for Mixer {
    fn write(&mut self, bytes: &[u8]) {
        // Only `u64`s are hashed; any other input is folded in 8 bytes at a time.
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        let product = u128::from(n ^ self.keys.0 ^ self.hash) * u128::from(self.keys.1);
        self.hash = (product as u64) ^ ((product >> 64) as u64);
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

/// A key of [`Keys::by_hash`]: where its text is in [`Keys::text`], and what was seen of it.
#[derive(Debug)]
struct Slot {
    at: usize,
    len: usize,
    seen: Seen,
}

/// About how many bytes of output text hold one key (measured on mail-like output: ids,
/// senders, subjects, and the links, addresses and numbers inside bodies).
const BYTES_PER_KEY: usize = 128;

impl Keys {
    /// Room for the keys of `outputs` (those `label` indexes), from a walk that only adds up
    /// their string lengths
    /// (far cheaper than scanning them): the map is then built without growing and rehashing
    /// as it fills, and the key texts without being copied to a larger buffer. Capped at
    /// what the index may take ([`crate::limits::MAX_INDEXED_BYTES`]).
    fn reserve_for(&mut self, outputs: &[Value], label: Label<'_>) {
        let mut bytes = 0usize;
        for item in outputs {
            let (Some(tool), Some(output)) =
                (item.get("tool").and_then(Value::as_str), item.get("output"))
            else {
                continue;
            };
            if label.label(tool).0 != Trust::Skip {
                for_each_leaf(output, &|_| false, &mut |v| {
                    if let Value::String(s) = v {
                        bytes = bytes.saturating_add(s.len());
                    }
                    bytes <= crate::limits::MAX_INDEXED_BYTES
                });
            }
        }
        let bytes = bytes.min(crate::limits::MAX_INDEXED_BYTES);
        self.by_hash.reserve(bytes / BYTES_PER_KEY);
        self.text.reserve(bytes);
    }

    fn hash(key: &str) -> u64 {
        use std::hash::Hasher;
        let mut h = rustc_hash::FxHasher::default();
        h.write(key.as_bytes());
        h.finish()
    }

    /// The text of `slot`.
    fn text(&self, slot: &Slot) -> &str {
        self.text
            .get(slot.at..slot.at + slot.len)
            .unwrap_or_default()
    }

    /// What was seen of `key`.
    fn get(&self, key: &str) -> Option<&Seen> {
        match self.by_hash.get(&Self::hash(key)) {
            Some(slot) if self.text(slot) == key => Some(&slot.seen),
            Some(_) => self.collided.get(key),
            None => None,
        }
    }

    /// What was seen of `key`, made empty the first time: the text is copied only then.
    fn entry(&mut self, key: &str) -> &mut Seen {
        let text = &mut self.text;
        match self.by_hash.entry(Self::hash(key)) {
            Entry::Vacant(v) => {
                let at = text.len();
                text.push_str(key);
                &mut v
                    .insert(Slot {
                        at,
                        len: key.len(),
                        seen: Seen::default(),
                    })
                    .seen
            }
            Entry::Occupied(o) if text.get(o.get().at..o.get().at + o.get().len) == Some(key) => {
                &mut o.into_mut().seen
            }
            Entry::Occupied(_) => self.collided.entry(Box::from(key)).or_default(),
        }
    }
}

/// The prompt, as keys and as normalised text for substring matches.
#[derive(Debug)]
struct Prompt {
    text: String,
    keys: HashSet<Box<str>>,
}

/// One request's provenance index.
#[derive(Debug)]
pub(crate) struct Index {
    outputs: Outputs,
    prompt: Option<Prompt>,
}

impl Index {
    /// Indexes `outputs` (`facts.outputs`, already checked to be a list of `{id, tool,
    /// output}`) and `prompt`, labelling each output by `label(tool)`: its trust, and the
    /// metadata keys not to index (`None`: [`DEFAULT_METADATA`]).
    pub(crate) fn build(outputs: Option<&Value>, prompt: Option<&str>, label: Label<'_>) -> Index {
        let prompt = prompt.map(|p| {
            let mut keys = HashSet::new();
            for t in tokens::find(p) {
                if let Some(k) = key::of(t) {
                    keys.insert(Box::from(&*k));
                }
            }
            Prompt {
                text: key::of(p).map(|k| k.into_owned()).unwrap_or_default(),
                keys,
            }
        });
        let outputs = match outputs {
            None | Some(Value::Null) => Outputs::Absent,
            Some(list) => index_outputs(list, label),
        };
        Index { outputs, prompt }
    }

    /// Whether the request carried `facts.prompt`.
    pub(crate) fn has_prompt(&self) -> bool {
        self.prompt.is_some()
    }

    /// Whether `key` occurs in the prompt: as one of its tokens, or as a run of its text
    /// between word boundaries.
    pub(crate) fn in_prompt(&self, key: &str) -> bool {
        let Some(p) = &self.prompt else { return false };
        p.keys.contains(key) || contains_word(&p.text, key)
    }

    /// What the index says of `key`.
    pub(crate) fn taint(&self, key: &str) -> Taint {
        match &self.outputs {
            Outputs::Absent => Taint::Absent,
            Outputs::OverCap => Taint::OverCap,
            Outputs::Indexed(keys) => match keys.get(key) {
                Some(Seen {
                    trusted: false,
                    first_untrusted: Some(origin),
                }) if !self.in_prompt(key) => Taint::From(*origin),
                _ => Taint::Clean,
            },
        }
    }
}

/// Whether `needle` occurs in `hay` with no letter or digit right before or after it.
fn contains_word(hay: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    let word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    hay.match_indices(needle).any(|(at, _)| {
        !word(hay[..at].chars().next_back()) && !word(hay[at + needle.len()..].chars().next())
    })
}

/// How the policy labels a tool's output: its trust, and the metadata keys it declared
/// (`None`: [`DEFAULT_METADATA`]).
pub(crate) trait Labels {
    /// The labelling of `tool`'s output.
    fn label(&self, tool: &str) -> (Trust, Option<&[Box<str>]>);
}

/// A labelling, borrowed.
pub(crate) type Label<'a> = &'a dyn Labels;

/// Whether an object key `k` of an output with this labelling holds metadata, not indexed.
fn is_metadata(trust: Trust, declared: Option<&[Box<str>]>, k: &str) -> bool {
    match (trust, declared) {
        (Trust::Trusted, _) => false,
        (_, Some(keys)) => keys.iter().any(|m| **m == *k),
        (_, None) => DEFAULT_METADATA.contains(&k),
    }
}

fn index_outputs(list: &Value, label: Label<'_>) -> Outputs {
    let Value::Array(items) = list else {
        return Outputs::Absent;
    };
    let mut keys = Keys::default();
    keys.reserve_for(items, label);
    let mut bytes = 0usize;
    for (i, item) in items.iter().enumerate() {
        let (Some(tool), Some(output)) =
            (item.get("tool").and_then(Value::as_str), item.get("output"))
        else {
            continue;
        };
        let (trust, metadata) = label.label(tool);
        if trust == Trust::Skip {
            continue;
        }
        let output_index = u32::try_from(i).unwrap_or(u32::MAX);
        let mut over = false;
        let mut note = |k: &str, leaf: u32| {
            let seen = keys.entry(k);
            match trust {
                Trust::Trusted => seen.trusted = true,
                _ => {
                    seen.first_untrusted.get_or_insert(Origin {
                        output: output_index,
                        leaf,
                    });
                }
            }
        };
        let skip = |k: &str| is_metadata(trust, metadata, k);
        let mut leaf = 0u32;
        for_each_leaf(output, &skip, &mut |v| {
            match v {
                Value::String(s) => {
                    bytes = bytes.saturating_add(s.len());
                    if bytes > crate::limits::MAX_INDEXED_BYTES {
                        over = true;
                        return false;
                    }
                    if let Some(k) = key::of(s) {
                        note(&k, leaf);
                    }
                    for t in tokens::find(s) {
                        if let Some(k) = key::of(t) {
                            note(&k, leaf);
                        }
                    }
                }
                Value::Number(n) => {
                    if let Some(k) = key::of_number(n) {
                        note(&k, leaf);
                    }
                }
                _ => {}
            }
            leaf = leaf.saturating_add(1);
            true
        });
        if over {
            return Outputs::OverCap;
        }
    }
    Outputs::Indexed(Box::new(keys))
}

/// Calls `f` on each scalar leaf of `v`, depth first, skipping the values of object keys
/// `skip` names; stops when `f` returns false. Iterative, so no output nests too deep.
pub(crate) fn for_each_leaf<'v>(
    v: &'v Value,
    skip: &dyn Fn(&str) -> bool,
    f: &mut dyn FnMut(&'v Value) -> bool,
) {
    let mut stack: Vec<&Value> = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(items) => stack.extend(items.iter().rev()),
            Value::Object(map) => {
                stack.extend(map.iter().rev().filter(|(k, _)| !skip(k)).map(|(_, v)| v))
            }
            leaf => {
                if !f(leaf) {
                    return;
                }
            }
        }
    }
}

/// The walk of [`for_each_leaf`], with each leaf's path written after `at` (`.a[2].b`): the
/// path of the first leaf for which `found` holds. Allocates: it runs only to put a denial
/// into words.
pub(crate) fn find_leaf(
    v: &Value,
    at: String,
    skip: &dyn Fn(&str) -> bool,
    found: &mut dyn FnMut(&Value) -> bool,
) -> Option<String> {
    let mut stack: Vec<(&Value, String)> = vec![(v, at)];
    while let Some((v, at)) = stack.pop() {
        match v {
            Value::Array(items) => {
                for (i, x) in items.iter().enumerate().rev() {
                    stack.push((x, format!("{at}[{i}]")));
                }
            }
            Value::Object(map) => {
                for (k, x) in map.iter().rev().filter(|(k, _)| !skip(k)) {
                    stack.push((x, format!("{at}.{k}")));
                }
            }
            leaf => {
                if found(leaf) {
                    return Some(at);
                }
            }
        }
    }
    None
}

/// The path, as `facts.outputs[I].output.a[2].b`, of leaf `origin.leaf` of output
/// `origin.output`, with the output's call id and tool: for a denial to name. The walk is
/// the indexing walk's, so the leaf numbers agree.
pub(crate) fn locate(
    outputs: &Value,
    origin: Origin,
    label: Label<'_>,
) -> Option<(String, String, String)> {
    let item = outputs.get(origin.output as usize)?;
    let tool = item.get("tool")?.as_str()?;
    let id = item.get("id").and_then(Value::as_str).unwrap_or_default();
    let (trust, declared) = label.label(tool);
    let mut leaf = 0u32;
    let at = find_leaf(
        item.get("output")?,
        format!("facts.outputs[{}].output", origin.output),
        &|k| is_metadata(trust, declared, k),
        &mut |_| {
            let this = leaf == origin.leaf;
            leaf += 1;
            this
        },
    )?;
    Some((id.to_string(), tool.to_string(), at))
}

/// A request's index, built the first time a test asks for it. Making one reads nothing, so
/// a request judged by a policy without provenance tests pays only for the struct.
pub(crate) struct Lazy<'a> {
    cell: std::cell::OnceCell<Index>,
    facts: crate::wire::view::FactsRef<'a>,
    label: Label<'a>,
}

impl<'a> Lazy<'a> {
    /// The index of `facts.outputs` and `facts.prompt`, labelled by `label`, not built yet.
    #[inline(always)]
    pub(crate) fn new(facts: crate::wire::view::FactsRef<'a>, label: Label<'a>) -> Self {
        Lazy {
            cell: std::cell::OnceCell::new(),
            facts,
            label,
        }
    }

    /// The index, built now if no test asked for it before.
    pub(crate) fn get(&self) -> &Index {
        self.cell
            .get_or_init(|| Index::build(self.facts.outputs(), self.facts.prompt(), self.label))
    }

    /// Where in `facts.outputs` an untrusted value was first seen: the call id, the tool
    /// and the path.
    pub(crate) fn locate(&self, origin: Origin) -> Option<(String, String, String)> {
        locate(self.facts.outputs()?, origin, self.label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sharing_a_hash_are_kept_apart() {
        let mut keys = Keys::default();
        keys.entry("a").trusted = true;
        // A text that FxHash sends where `b` goes, as a crafted collision would.
        let at = keys.text.len();
        keys.text.push_str("not b");
        keys.by_hash.insert(
            Keys::hash("b"),
            Slot {
                at,
                len: 5,
                seen: Seen::default(),
            },
        );
        assert!(keys.get("b").is_none());
        keys.entry("b").first_untrusted = Some(Origin { output: 1, leaf: 2 });
        keys.entry("b").trusted = true;
        let b = keys.get("b").copied().unwrap_or_default();
        assert!(b.trusted);
        assert_eq!(b.first_untrusted, Some(Origin { output: 1, leaf: 2 }));
        assert_eq!(keys.collided.len(), 1);
        assert!(keys.get("a").is_some_and(|s| s.trusted));
        assert!(keys.get("c").is_none());
        let not_b = &keys.by_hash[&Keys::hash("b")];
        assert_eq!((keys.text(not_b), not_b.seen.trusted), ("not b", false));
    }
}
