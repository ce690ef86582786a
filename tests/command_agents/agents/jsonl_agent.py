"""A note-keeping agent that talks in nodeval's JSON lines (`stdio: jsonl`), standard library only.

Each stdin line is a message `{"type": "user", "text": ...}`; the agent answers with
`{"type": "output", "text": ...}` and then `{"type": "turn_end"}`, and stops at the end of
stdin. It calls the Messages API with urllib at ANTHROPIC_BASE_URL; the model may call
`save_note`, which appends to notes.txt in the working directory. It needs nothing but python3,
so it runs in every world. An HTTP error prints the body on stderr and exits 1.
"""

import json
import os
import sys
import urllib.error
import urllib.request

MODEL = "claude-sonnet-4-6"
SAVE_NOTE = {
    "name": "save_note",
    "description": "Save a note for the user.",
    "input_schema": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
}


def ask(system: str, messages: list) -> dict:
    body = {
        "model": MODEL,
        "max_tokens": 256,
        "system": system,
        "tools": [SAVE_NOTE],
        "messages": messages,
    }
    request = urllib.request.Request(
        os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
        data=json.dumps(body).encode(),
        headers={
            "content-type": "application/json",
            "x-api-key": os.environ["ANTHROPIC_API_KEY"],
            "anthropic-version": "2023-06-01",
        },
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def save_note(args: dict) -> str:
    with open("notes.txt", "a", encoding="utf-8") as notes:
        notes.write(args["text"] + "\n")
    return f"saved {args['text']}"


def answer(system: str, messages: list) -> str:
    while True:
        reply = ask(system, messages)
        messages.append({"role": "assistant", "content": reply["content"]})
        calls = [block for block in reply["content"] if block["type"] == "tool_use"]
        if not calls:
            return " ".join(b["text"] for b in reply["content"] if b["type"] == "text")
        results = [
            {"type": "tool_result", "tool_use_id": c["id"], "content": save_note(c["input"])}
            for c in calls
        ]
        messages.append({"role": "user", "content": results})


def say(message: dict) -> None:
    print(json.dumps(message), flush=True)


def main() -> int:
    system = os.environ.get("SYSTEM_PROMPT", "You keep the user's notes.")
    messages: list = []
    for line in sys.stdin:
        messages.append({"role": "user", "content": json.loads(line)["text"]})
        try:
            text = answer(system, messages)
        except urllib.error.HTTPError as err:
            print(err.read().decode(), file=sys.stderr)
            return 1
        say({"type": "output", "text": text})
        say({"type": "turn_end"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
