#!/bin/sh
# A note-keeping agent program for nodeval's command-agent tests: curl + OpenAI Chat Completions.
#
# One user turn per stdin line, one answer line per turn on stdout. The model may call the tool
# save_note, which appends the note to notes.txt in the working directory. Reads OPENAI_BASE_URL
# (with /v1), OPENAI_API_KEY and SYSTEM_PROMPT. JSON is handled by python3 (stdlib only; no jq).
# An HTTP error status prints the body on stderr and exits 1. It knows nothing of nodeval.
set -eu

: "${OPENAI_BASE_URL:?}" "${OPENAI_API_KEY:?}"
SYSTEM_PROMPT=${SYSTEM_PROMPT-"You keep the user's notes."}
export SYSTEM_PROMPT
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT

# python3 -c "$JSON" STEP STATE_DIR: `start` (the system message), `user` (append $TURN),
# `request` (the request body) or `reply` (read the answer: exit 0 after printing it, or run
# the tool calls, append their results and exit 10 to ask again).
JSON=$(cat <<'PY'
import json, os, sys
step, state = sys.argv[1], sys.argv[2]
path = os.path.join(state, "messages.json")
messages = json.load(open(path)) if step != "start" else []
if step == "start":
    messages.append({"role": "system", "content": os.environ["SYSTEM_PROMPT"]})
elif step == "user":
    messages.append({"role": "user", "content": os.environ["TURN"]})
elif step == "request":
    params = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    tool = {"name": "save_note", "description": "Save a note for the user.", "parameters": params}
    json.dump({"model": "gpt-4.1-mini", "max_tokens": 256, "messages": messages,
               "tools": [{"type": "function", "function": tool}]}, sys.stdout)
    sys.exit(0)
else:
    reply = json.load(open(os.path.join(state, "response.json")))["choices"][0]["message"]
    calls = reply.get("tool_calls") or []
    messages.append({"role": "assistant", "content": reply.get("content")}
                    | ({"tool_calls": calls} if calls else {}))
    for call in calls:
        name, note = call["function"]["name"], json.loads(call["function"]["arguments"]).get("text")
        if name == "save_note":
            with open("notes.txt", "a", encoding="utf-8") as notes:
                notes.write(note + "\n")
        result = f"saved {note}" if name == "save_note" else f"unknown tool {name}"
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    if not calls:
        print((reply.get("content") or "").replace("\n", " "), flush=True)
json.dump(messages, open(path, "w"))
sys.exit(10 if step == "reply" and calls else 0)
PY
)

python3 -c "$JSON" start "$state"
while IFS= read -r turn || [ -n "$turn" ]; do
    TURN=$turn python3 -c "$JSON" user "$state"
    while :; do
        python3 -c "$JSON" request "$state" >"$state/request.json"
        status=$(curl -sS -o "$state/response.json" -w '%{http_code}' \
            -H "Authorization: Bearer $OPENAI_API_KEY" -H "Content-Type: application/json" \
            --data-binary @"$state/request.json" "${OPENAI_BASE_URL%/}/chat/completions")
        if [ "$status" -ge 400 ]; then
            cat "$state/response.json" >&2
            exit 1
        fi
        rc=0
        python3 -c "$JSON" reply "$state" || rc=$?
        [ "$rc" -eq 10 ] || break
    done
    [ "$rc" -eq 0 ] || exit "$rc"
done
