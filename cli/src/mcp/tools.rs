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
