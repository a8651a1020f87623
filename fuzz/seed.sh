#!/bin/sh
# Seeds the libFuzzer corpora (fuzz/corpus/TARGET, git-ignored) from the repository: every
# policy (example, golden and fixture) for parse_compile; every example request, scenario
# request and fuzz regression input for decide_json. decide_structured starts empty: its input
# is a choice sequence for `arbitrary`, not text. Run from anywhere; safe to re-run.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
mkdir -p "$here/corpus/parse_compile" "$here/corpus/decide_json" "$here/corpus/decide_structured"
for f in "$root"/stdlib-rules/examples/*.gate "$root"/tests/golden/*.gate; do
    [ -f "$f" ] && cp "$f" "$here/corpus/parse_compile/$(basename "$f")"
done
for f in "$root"/stdlib-rules/examples/*.request.json; do
    cp "$f" "$here/corpus/decide_json/$(basename "$f")"
done
# A scenario file holds a request's facts and calls beside its expectations; keep the request.
for f in "$root"/tests/fixtures/scenarios/*.json; do
    python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); print(json.dumps({"facts": v.get("facts", {}), "calls": v["calls"]}))' \
        "$f" > "$here/corpus/decide_json/scenario_$(basename "$f")" 2>/dev/null \
        || cp "$f" "$here/corpus/decide_json/scenario_$(basename "$f")"
done
# The regression inputs replayed by tests/tests/robustness.rs.
for f in "$root"/tests/fixtures/fuzz/policies/*; do
    cp "$f" "$here/corpus/parse_compile/regression_$(basename "$f")"
done
for f in "$root"/tests/fixtures/fuzz/requests/*; do
    cp "$f" "$here/corpus/decide_json/regression_$(basename "$f")"
done
echo "seeded: $(ls "$here/corpus/parse_compile" | wc -l) policies, $(ls "$here/corpus/decide_json" | wc -l) requests"
