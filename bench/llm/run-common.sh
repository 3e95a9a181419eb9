# Sourced (from the repo root) by the prepared LLM device scripts: the JSON-line tagger and the
# one-line-per-result summary they share (the run scripts of stops 37-38, records of commands
# that ran, keep their own copies).
# tag FIELDS: prefixes FIELDS ("\"k\":\"v\",...") to each JSON object read on stdin.
tag() { sed "s/^{/{$1,/"; }
# llm_summary FILE: spec, peer, variant, decode and prefill tok/s, aggregate of each result.
llm_summary() {
  python3 - "$1" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    try: j = json.loads(l)
    except Exception: continue
    print(j.get("spec"), j.get("peer"), j.get("variant", ""), "tg", round(j.get("tg_tok_s", 0), 1), "pp", round(j.get("pp_tok_s", 0)), j.get("aggregate_tok_s", ""))
PY
}
