//! What `field_filled(NAME)` counts as filled in (docs/language.md, "Built-in preconditions").
//!
//! A field is filled when it holds a string with at least one visible character, a number,
//! or `true`. `false`, `null`, arrays and objects (empty or not) are not filled, and neither
//! is a string made only of invisible characters: a model, or a form that pads its fields,
//! must not be able to satisfy "the phone number is on file" with `"\u{200B}"`.

use serde_json::Value;

/// True when `v` counts as filled in.
pub(crate) fn is_filled(v: &Value) -> bool {
    match v {
        Value::String(s) => s.chars().any(|c| !is_invisible(c)),
        Value::Number(_) => true,
        Value::Bool(b) => *b,
        Value::Null | Value::Array(_) | Value::Object(_) => false,
    }
}

/// True for a character that shows nothing on its own: Unicode `White_Space`, the control
/// characters (`Cc`), `Default_Ignorable_Code_Point` (zero-width spaces and joiners, the word
/// joiner, the byte-order mark, bidirectional marks and embeddings, soft hyphen, variation
/// selectors, tags, fillers, ...), and U+2800 BRAILLE PATTERN BLANK.
pub(crate) fn is_invisible(c: char) -> bool {
    c.is_whitespace()
        || c.is_control()
        || matches!(c,
            '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'..='\u{1160}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{2800}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFF8}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn filled_means_a_visible_string_a_number_or_true() {
        for v in [
            json!("x"),
            json!(" +44 1 "),
            json!("\u{200B}7\u{200B}"),
            json!("é"),
            json!("٣"),
            json!(0),
            json!(-1.5),
            json!(true),
        ] {
            assert!(is_filled(&v), "{v}");
        }
        for v in [
            json!(""),
            json!("   "),
            json!("\t\n\r"),
            json!("\u{00A0}\u{2003}\u{3000}"),
            json!("\u{200B}"),
            json!("\u{200B}\u{200C}\u{200D}\u{2060}\u{FEFF}"),
            json!("\u{00AD}\u{034F}\u{180E}"),
            json!("\u{202E}\u{2066}\u{200E}"),
            json!("\u{3164}\u{FFA0}\u{115F}"),
            json!("\u{2800}"),
            json!("\u{FE0F}\u{E0041}"),
            json!("\u{0000}\u{001F}\u{007F}"),
            json!(false),
            json!(null),
            json!([]),
            json!({}),
            json!(["x"]),
            json!({"number": "x"}),
        ] {
            assert!(!is_filled(&v), "{v}");
        }
    }
}
