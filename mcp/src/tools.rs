//! `tools/list` through the proxy: the upstream's tools filtered by [`Policy::offer`].
//!
//! Only the tools the active stage offers are listed, with the requirement text the policy
//! appends to their descriptions; tools the policy never classified, or that the stage does
//! not have, are left out, so the model never sees a schema it may not call. Every other
//! field of a listed tool (schemas, annotations, icons, `_meta`) passes through unchanged.
//! The list depends on the turn's latches, so it is marked private and not to be cached.

use rmcp::model::{CacheScope, ListToolsResult, Tool};
use std::collections::HashMap;
use toolgate_engine::{Facts, Policy, ToolDef};

/// The upstream tools the policy offers under `facts`, in upstream order.
pub fn offered(policy: &Policy, facts: &Facts, upstream: Vec<Tool>) -> ListToolsResult {
    let defs: Vec<ToolDef> = upstream
        .iter()
        .map(|tool| ToolDef {
            name: tool.name.to_string(),
            description: tool.description.as_deref().map(str::to_string),
            input_schema: None,
            extra: serde_json::Map::new(),
        })
        .collect();
    let offer = policy.offer(facts, &defs);
    // The offer keeps the first definition of a repeated name; so does this map.
    let mut by_name: HashMap<String, Tool> = HashMap::new();
    for tool in upstream {
        by_name.entry(tool.name.to_string()).or_insert(tool);
    }
    let tools = offer
        .tools
        .into_iter()
        .filter_map(|def| {
            let mut tool = by_name.remove(&def.name)?;
            tool.description = def.description.map(Into::into);
            Some(tool)
        })
        .collect();
    ListToolsResult::with_all_items(tools)
        .with_ttl_ms(0)
        .with_cache_scope(CacheScope::Private)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::offered;
    use rmcp::model::{CacheScope, Tool};
    use serde_json::json;
    use std::sync::Arc;
    use toolgate_engine::{Facts, Policy};

    fn tool(name: &'static str, description: &'static str) -> Tool {
        let schema = json!({"type": "object", "properties": {"x": {"type": "string"}}});
        let serde_json::Value::Object(schema) = schema else {
            unreachable!()
        };
        let mut t = Tool::new(name, description, Arc::new(schema));
        t.title = Some(format!("title of {name}"));
        t
    }

    #[test]
    fn only_offered_tools_are_listed_first_definition_wins_and_the_rest_passes_through() {
        let policy = Policy::compile(
            "p.gate",
            "module p\nwrite w\nread r, other\nstage s { tools [w, r] }\nrule needs_x for w { require args.x == \"ok\" }\n",
        )
        .unwrap();
        let facts = Facts {
            stage: Some("s".into()),
            ..Facts::default()
        };
        let upstream = vec![
            tool("secret", "never classified"),
            tool("w", "first w"),
            tool("other", "classified, not in the stage"),
            tool("r", "read it"),
            tool("w", "second w"),
        ];
        let listed = offered(&policy, &facts, upstream.clone());
        let names: Vec<&str> = listed.tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, ["w", "r"]);
        let w = &listed.tools[0];
        let description = w.description.as_deref().unwrap();
        assert!(description.starts_with("first w"), "{description}");
        assert!(description.contains("HARD REQUIREMENT"), "{description}");
        // Untouched: everything but the description.
        assert_eq!(w.input_schema, upstream[1].input_schema);
        assert_eq!(w.title.as_deref(), Some("title of w"));
        assert_eq!(listed.tools[1].description.as_deref(), Some("read it"));
        assert_eq!(listed.ttl_ms, Some(0));
        assert_eq!(listed.cache_scope, Some(CacheScope::Private));
        assert!(listed.next_cursor.is_none());
    }

    #[test]
    fn no_tool_is_listed_in_a_stage_the_policy_lacks() {
        let policy =
            Policy::compile("p.gate", "module p\nread r\nstage s { tools [r] }\n").unwrap();
        let facts = Facts {
            stage: Some("elsewhere".into()),
            ..Facts::default()
        };
        assert!(offered(&policy, &facts, vec![tool("r", "d")])
            .tools
            .is_empty());
    }
}
