//! Parses the shipped example policies.
#![allow(clippy::unwrap_used, clippy::panic)]

#[test]
fn examples_parse() {
    for name in ["motor_claims", "coach", "messenger_payments"] {
        let path = format!(
            "{}/../stdlib-rules/examples/{name}.gate",
            env!("CARGO_MANIFEST_DIR")
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let policy = toolgate_lang::parse(&text).unwrap_or_else(|d| {
            panic!(
                "{}",
                toolgate_lang::render_all(
                    &d,
                    &toolgate_lang::SourceFile::new(path.clone(), text.clone())
                )
            )
        });
        assert_eq!(policy.module.name, name);
    }
}
